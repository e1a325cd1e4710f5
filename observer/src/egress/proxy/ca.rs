//! The per-run certificate authority: a fresh root that looks like a corporate one, and leaf
//! certificates per host (IP literals get an IP SAN), cached. Only the root certificate is ever
//! written to disk, and only inside the run directory; keys stay in memory.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Read;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use time::{Duration, OffsetDateTime};

#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("certificate generation: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("certificate key: {0}")]
    Key(String),
    #[error("writing the root certificate: {0}")]
    Io(#[from] std::io::Error),
    #[error("invalid host name for a certificate: {0:?}")]
    Host(String),
}

const ORG_A: &[&str] = &[
    "Arden",
    "Belmont",
    "Calder",
    "Dunmore",
    "Everly",
    "Fairhaven",
    "Glenrock",
    "Harwell",
    "Kestrel",
    "Linden",
    "Marlow",
    "Norcliff",
    "Oakridge",
    "Pemberton",
    "Redfern",
    "Stanmore",
    "Thornbury",
    "Westbrook",
];
const ORG_B: &[&str] = &[
    "Systems",
    "Holdings",
    "Group",
    "Technologies",
    "Networks",
    "Partners",
    "Industries",
    "Financial",
];
const CN_FORM: &[&str] = &[
    "{} Root CA",
    "{} Enterprise Root CA",
    "{} Root Certification Authority",
    "{} Internal Root CA G2",
];

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // /dev/urandom is always present on Linux; fall back to time-derived bytes if not.
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let h = Sha256::digest(format!("{t:?}{}", std::process::id()));
        for (i, x) in b.iter_mut().enumerate() {
            *x = h[i % 32];
        }
    }
    b
}

pub struct CertAuthority {
    ca_params: CertificateParams,
    ca_key: KeyPair,
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    leaf_key: KeyPair,
    leaf_key_der: Vec<u8>,
    salt: [u8; 16],
    cache: Mutex<HashMap<String, Arc<CertifiedKey>>>,
    pem_path: Option<PathBuf>,
}

impl std::fmt::Debug for CertAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertAuthority")
            .field("pem_path", &self.pem_path)
            .finish()
    }
}

fn serial(salt: &[u8], what: &str) -> SerialNumber {
    let h = Sha256::new()
        .chain_update(salt)
        .chain_update(what.as_bytes())
        .finalize();
    let mut s = h[..16].to_vec();
    s[0] &= 0x7f; // positive
    SerialNumber::from_slice(&s)
}

impl CertAuthority {
    /// A fresh authority. With `run_dir`, the root certificate (not the key) is written to
    /// `run_dir/trust/root.crt` for the jail's trust store.
    pub fn generate(run_dir: Option<&Path>) -> Result<Self, CaError> {
        let r: [u8; 24] = random_bytes();
        let salt: [u8; 16] = r[8..24].try_into().unwrap_or_default();
        let org = format!(
            "{} {}",
            ORG_A[r[0] as usize % ORG_A.len()],
            ORG_B[r[1] as usize % ORG_B.len()]
        );
        let cn = CN_FORM[r[2] as usize % CN_FORM.len()].replace("{}", &org);
        let now = OffsetDateTime::now_utc();
        let mut p = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CountryName, "US");
        dn.push(DnType::OrganizationName, org.as_str());
        dn.push(DnType::OrganizationalUnitName, "IT Security");
        dn.push(DnType::CommonName, cn.as_str());
        p.distinguished_name = dn;
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        // An established root: issued a while ago, long-lived.
        p.not_before = now - Duration::days(400 + i64::from(r[3]) * 3);
        p.not_after = p.not_before + Duration::days(365 * 20);
        p.serial_number = Some(serial(&salt, "root"));
        let ca_key = KeyPair::generate()?;
        let ca_cert = p.self_signed(&ca_key)?;
        let ca_pem = ca_cert.pem();
        let leaf_key = KeyPair::generate()?;
        let leaf_key_der = leaf_key.serialize_der();
        let pem_path = match run_dir {
            Some(dir) => {
                let d = dir.join("trust");
                std::fs::create_dir_all(&d)?;
                let path = d.join("root.crt");
                std::fs::write(&path, &ca_pem)?;
                Some(path)
            }
            None => None,
        };
        Ok(CertAuthority {
            ca_params: p,
            ca_key,
            ca_pem,
            ca_der: ca_cert.der().clone(),
            leaf_key,
            leaf_key_der,
            salt,
            cache: Mutex::default(),
            pem_path,
        })
    }

    /// The root certificate, PEM, for the jail's system bundle and `SSL_CERT_FILE` & co.
    pub fn cert_pem(&self) -> &str {
        &self.ca_pem
    }

    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.ca_der
    }

    /// Where the root certificate was written, if a run directory was given.
    pub fn pem_path(&self) -> Option<&Path> {
        self.pem_path.as_deref()
    }

    /// A leaf for `host` (a DNS name or an IP literal), issued once and cached.
    pub fn leaf(&self, host: &str) -> Result<Arc<CertifiedKey>, CaError> {
        let host = host
            .trim_end_matches('.')
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if let Some(c) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&host)
        {
            return Ok(Arc::clone(c));
        }
        let mut p = CertificateParams::default();
        let san = match host.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => {
                if host.is_empty()
                    || host.len() > 253
                    || !host
                        .bytes()
                        .all(|c| c.is_ascii_alphanumeric() || b"-._*".contains(&c))
                {
                    return Err(CaError::Host(host));
                }
                SanType::DnsName(
                    host.clone()
                        .try_into()
                        .map_err(|_| CaError::Host(host.clone()))?,
                )
            }
        };
        p.subject_alt_names = vec![san];
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, host.as_str());
        p.distinguished_name = dn;
        let now = OffsetDateTime::now_utc();
        p.not_before = now - Duration::days(3);
        p.not_after = now + Duration::days(87);
        p.serial_number = Some(serial(&self.salt, &host));
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.use_authority_key_identifier_extension = true;
        let issuer = Issuer::from_params(&self.ca_params, &self.ca_key);
        let cert = p.signed_by(&self.leaf_key, &issuer)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key_der.clone()));
        let signer = rustls::crypto::ring::sign::any_supported_type(&key)
            .map_err(|e| CaError::Key(e.to_string()))?;
        let ck = Arc::new(CertifiedKey::new(vec![cert.der().clone()], signer));
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(host, Arc::clone(&ck));
        Ok(ck)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_looks_corporate_and_is_written_only_in_run_dir() {
        let dir = tempfile::tempdir().unwrap();
        let ca = CertAuthority::generate(Some(dir.path())).unwrap();
        let path = ca.pem_path().unwrap();
        assert!(path.starts_with(dir.path()));
        assert_eq!(std::fs::read_to_string(path).unwrap(), ca.cert_pem());
        let lower = format!("{}{}", ca.cert_pem(), path.display()).to_lowercase();
        for w in ["mitm", "observer", "sandbox", "mock", "proxy"] {
            assert!(!lower.contains(w), "{w}");
        }
        // Every file in the run dir: only the certificate, never a key.
        let all = std::fs::read_to_string(path).unwrap();
        assert!(!all.contains("PRIVATE KEY"));
        // Two runs, two different roots.
        assert_ne!(
            CertAuthority::generate(None).unwrap().cert_pem(),
            ca.cert_pem()
        );
    }

    #[test]
    fn leaves_cached_and_hosts_validated() {
        let ca = CertAuthority::generate(None).unwrap();
        let a = ca.leaf("api.example.com").unwrap();
        assert!(Arc::ptr_eq(&a, &ca.leaf("API.example.com.").unwrap()));
        ca.leaf("203.0.113.9").unwrap();
        ca.leaf("[2001:db8::1]").unwrap();
        assert!(ca.leaf("bad host\r\n").is_err());
        assert!(ca.leaf("").is_err());
    }
}
