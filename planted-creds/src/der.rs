//! Just enough DER to write a self-signed Ed25519 CA certificate (kubeconfig
//! `certificate-authority-data`) and the other ASN.1 blobs browsers store.

use ed25519_dalek::{Signer, SigningKey};

pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n
            .to_be_bytes()
            .iter()
            .copied()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend_from_slice(&bytes);
    }
    out.extend_from_slice(content);
    out
}

pub fn seq(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

pub fn set(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x31, &parts.concat())
}

pub fn octets(b: &[u8]) -> Vec<u8> {
    tlv(0x04, b)
}

/// A non-negative INTEGER from big-endian magnitude bytes.
pub fn uint(b: &[u8]) -> Vec<u8> {
    let mut v: Vec<u8> = b.iter().copied().skip_while(|x| *x == 0).collect();
    if v.is_empty() || v[0] & 0x80 != 0 {
        v.insert(0, 0);
    }
    tlv(0x02, &v)
}

pub fn oid(encoded: &[u8]) -> Vec<u8> {
    tlv(0x06, encoded)
}

pub fn bits(b: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8];
    v.extend_from_slice(b);
    tlv(0x03, &v)
}

fn name(cn: &str) -> Vec<u8> {
    seq(&[set(&[seq(&[
        oid(&[0x55, 0x04, 0x03]),
        tlv(0x0c, cn.as_bytes()),
    ])])])
}

/// `YYMMDDHHMMSSZ` for a Unix time.
fn utc_time(unix: i64) -> Vec<u8> {
    let c = crate::time::civil(unix);
    let s = format!(
        "{:02}{:02}{:02}{:02}{:02}{:02}Z",
        c.year % 100,
        c.month,
        c.day,
        c.hour,
        c.minute,
        c.second
    );
    tlv(0x17, s.as_bytes())
}

const ED25519: &[u8] = &[0x2b, 0x65, 0x70];

/// A self-signed CA certificate (DER) as kubeadm-style clusters carry, valid for ten years
/// from `not_before`.
pub fn ca_certificate(key: &SigningKey, serial: &[u8], cn: &str, not_before: i64) -> Vec<u8> {
    let alg = seq(&[oid(ED25519)]);
    let spki = seq(&[alg.clone(), bits(key.verifying_key().as_bytes())]);
    let basic = seq(&[
        oid(&[0x55, 0x1d, 0x13]),
        tlv(0x01, &[0xff]),
        octets(&seq(&[tlv(0x01, &[0xff])])),
    ]);
    // keyCertSign | digitalSignature | keyEncipherment
    let usage = seq(&[
        oid(&[0x55, 0x1d, 0x0f]),
        tlv(0x01, &[0xff]),
        octets(&tlv(0x03, &[0x05, 0xa4])),
    ]);
    let tbs = seq(&[
        tlv(0xa0, &uint(&[2])),
        uint(serial),
        alg.clone(),
        name(cn),
        seq(&[utc_time(not_before), utc_time(not_before + 3650 * 86400)]),
        name(cn),
        spki,
        tlv(0xa3, &seq(&[basic, usage])),
    ]);
    let sig = key.sign(&tbs);
    seq(&[tbs, alg, bits(&sig.to_bytes())])
}

/// PEM armour with 64-column lines.
pub fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let b = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_encode_long_form() {
        assert_eq!(tlv(0x04, &[0; 3])[..2], [0x04, 3]);
        assert_eq!(tlv(0x04, &[0; 200])[..3], [0x04, 0x81, 200]);
        assert_eq!(tlv(0x04, &[0; 300])[..4], [0x04, 0x82, 1, 44]);
        assert_eq!(uint(&[0x80]), vec![0x02, 2, 0, 0x80]);
        assert_eq!(uint(&[0, 0, 5]), vec![0x02, 1, 5]);
    }

    #[test]
    fn certificate_parses_with_openssl_when_installed() {
        let key = SigningKey::from_bytes(&[9; 32]);
        let der = ca_certificate(&key, &[1, 2, 3], "kubernetes", 1_700_000_000);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ca.crt");
        std::fs::write(&p, pem("CERTIFICATE", &der)).unwrap();
        let out = match std::process::Command::new("openssl")
            .args(["x509", "-noout", "-subject", "-in"])
            .arg(&p)
            .output()
        {
            Ok(o) => o,
            Err(_) => {
                eprintln!("openssl not installed; skipping the parse check");
                return;
            }
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("kubernetes"));
        let v = std::process::Command::new("openssl")
            .args(["verify", "-CAfile"])
            .arg(&p)
            .arg(&p)
            .output()
            .unwrap();
        assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    }
}
