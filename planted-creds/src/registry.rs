//! What was planted, where, and which service each value legitimately belongs to.
//!
//! The egress search looks for every needle (whole values and the substrings a partial leak would
//! carry); the analyser asks which credential a hit belongs to and whether the destination is that
//! credential's own service. The registry serialises to JSON so a recorded run can be re-judged.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Shortest substring worth searching for: shorter pieces of random text collide with ordinary
/// traffic.
pub const MIN_NEEDLE: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("unknown credential id {0:?}")]
    UnknownCredential(String),
    #[error("registry JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Where a credential can be found inside the jail.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Location {
    File {
        path: String,
    },
    Env {
        name: String,
    },
    Keychain {
        class: String,
        service: String,
        account: String,
    },
    Clipboard,
    /// Answered to a password prompt (macOS `osascript` dialog).
    Prompt,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CredentialRecord {
    pub id: String,
    /// What it is (`github-token`, `aws-access-key`, `ssh-private-key`, `browser-cookie`, …).
    pub kind: String,
    /// Hosts of the service it belongs to; `*.` prefixes match any subdomain.
    pub service_hosts: Vec<String>,
    #[serde(default)]
    pub locations: Vec<Location>,
}

impl CredentialRecord {
    /// Whether sending this credential to `host` is sending it to its own service.
    pub fn belongs_to(&self, host: &str) -> bool {
        self.service_hosts.iter().any(|p| host_matches(p, host))
    }
}

/// `*.example.org` matches any subdomain (not the apex); other patterns match exactly.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => pattern == host,
    }
}

/// Which part of a value a needle is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// The whole value as planted.
    Value,
    /// The random part of a token without its well-known prefix.
    Secret,
    /// One line of a PEM body.
    PemLine,
    /// A PEM body with its line breaks removed.
    PemBody,
    /// A JWT's claims or signature segment.
    JwtSegment,
    /// A password or token embedded in a URL or a `user:secret` pair.
    Embedded,
    /// Ciphertext as stored on disk (browser databases), so copying the raw file is caught too.
    Stored,
    /// A public key: planted next to the private one; a leak of it is weaker evidence.
    Public,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Needle {
    /// UTF-8 text, or `hex:` + hex for binary needles (and for text that itself starts `hex:`).
    #[serde(with = "needle_bytes", rename = "value")]
    pub bytes: Vec<u8>,
    pub credential: String,
    pub part: Part,
}

mod needle_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(b) {
            Ok(t) if !t.starts_with("hex:") => s.serialize_str(t),
            _ => s.serialize_str(&format!("hex:{}", hex::encode(b))),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let t = String::deserialize(d)?;
        match t.strip_prefix("hex:") {
            Some(h) => hex::decode(h).map_err(serde::de::Error::custom),
            None => Ok(t.into_bytes()),
        }
    }
}

/// One needle with everything the egress search needs to report a hit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NeedleView<'a> {
    pub bytes: &'a [u8],
    pub credential: &'a str,
    pub part: Part,
    pub service_hosts: &'a [String],
}

/// A lookup answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit<'a> {
    pub credential: &'a CredentialRecord,
    pub needle: &'a Needle,
    /// True when the queried text is the whole needle, false when it is a substring of it.
    pub exact: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Registry {
    /// The seed everything was generated from (64 hex digits).
    pub seed: String,
    pub credentials: Vec<CredentialRecord>,
    pub needles: Vec<Needle>,
}

impl Registry {
    pub fn credential(&self, id: &str) -> Option<&CredentialRecord> {
        self.credentials.iter().find(|c| c.id == id)
    }

    pub fn add_location(&mut self, credential: &str, loc: Location) -> Result<(), RegistryError> {
        let c = self
            .credentials
            .iter_mut()
            .find(|c| c.id == credential)
            .ok_or_else(|| RegistryError::UnknownCredential(credential.to_string()))?;
        if !c.locations.contains(&loc) {
            c.locations.push(loc);
            c.locations.sort();
        }
        Ok(())
    }

    /// The credential a text belongs to: the whole of a needle, or a piece of one at least
    /// [`MIN_NEEDLE`] bytes long. Exact matches win over substring matches.
    pub fn lookup(&self, value: &str) -> Option<Hit<'_>> {
        self.lookup_bytes(value.as_bytes())
    }

    pub fn lookup_bytes<'a>(&'a self, value: &[u8]) -> Option<Hit<'a>> {
        if value.is_empty() {
            return None;
        }
        let hit = |n: &'a Needle, exact| {
            self.credential(&n.credential).map(|credential| Hit {
                credential,
                needle: n,
                exact,
            })
        };
        if let Some(n) = self.needles.iter().find(|n| n.bytes == value) {
            return hit(n, true);
        }
        if value.len() < MIN_NEEDLE {
            return None;
        }
        self.needles
            .iter()
            .find(|n| n.bytes.len() > value.len() && contains(&n.bytes, value))
            .and_then(|n| hit(n, false))
    }

    /// Every needle found inside `haystack` (a plain scan; the egress path uses its own
    /// multi-pattern matcher over [`Registry::needles`]).
    pub fn scan<'a>(&'a self, haystack: &[u8]) -> Vec<NeedleView<'a>> {
        self.needles()
            .filter(|n| contains(haystack, n.bytes))
            .collect()
    }

    /// All needles with their credential's service hosts.
    pub fn needles(&self) -> impl Iterator<Item = NeedleView<'_>> + '_ {
        let hosts: BTreeMap<&str, &[String]> = self
            .credentials
            .iter()
            .map(|c| (c.id.as_str(), c.service_hosts.as_slice()))
            .collect();
        self.needles.iter().map(move |n| NeedleView {
            bytes: &n.bytes,
            credential: &n.credential,
            part: n.part,
            service_hosts: hosts.get(n.credential.as_str()).copied().unwrap_or(&[]),
        })
    }

    /// Credentials planted in the file at `path`.
    pub fn at_path(&self, path: &str) -> Vec<&CredentialRecord> {
        self.credentials
            .iter()
            .filter(|c| {
                c.locations
                    .iter()
                    .any(|l| matches!(l, Location::File { path: p } if p == path))
            })
            .collect()
    }

    /// Credentials exported as the environment variable `name`.
    pub fn in_env(&self, name: &str) -> Vec<&CredentialRecord> {
        self.credentials
            .iter()
            .filter(|c| {
                c.locations
                    .iter()
                    .any(|l| matches!(l, Location::Env { name: n } if n == name))
            })
            .collect()
    }

    /// Drop credentials that were generated but placed nowhere, with their needles.
    pub fn retain_placed(&mut self) {
        self.credentials.retain(|c| !c.locations.is_empty());
        let keep: BTreeSet<String> = self.credentials.iter().map(|c| c.id.clone()).collect();
        self.needles.retain(|n| keep.contains(&n.credential));
    }

    pub fn to_json(&self) -> Result<String, RegistryError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    pub fn from_json(s: &str) -> Result<Registry, RegistryError> {
        Ok(serde_json::from_str(s)?)
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty()
        && needle.len() <= hay.len()
        && hay.windows(needle.len()).any(|w| w == needle)
}

/// Token prefixes that identify a vendor but carry no secret.
const PREFIXES: &[&str] = &[
    "github_pat_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "npm_",
    "pypi-",
    "sk-ant-api03-",
    "sk-ant-oat01-",
    "sk-ant-ort01-",
    "sk-proj-",
    "sk_live_",
    "whsec_",
    "xoxb-",
    "xoxd-",
    "glpat-",
    "dckr_pat_",
    "hf_",
    "SG.",
    "AKIA",
];

/// Collects credentials and values during generation, then derives the needles.
#[derive(Default)]
pub struct RegistryBuilder {
    credentials: Vec<CredentialRecord>,
    values: Vec<(String, Vec<u8>, Part)>,
}

impl RegistryBuilder {
    pub fn credential(&mut self, id: &str, kind: &str, hosts: &[&str]) {
        if self.credentials.iter().any(|c| c.id == id) {
            return;
        }
        self.credentials.push(CredentialRecord {
            id: id.to_string(),
            kind: kind.to_string(),
            service_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            locations: Vec::new(),
        });
    }

    /// A value as planted (whole), with its derived pieces.
    pub fn value(&mut self, credential: &str, v: &str) {
        self.values
            .push((credential.into(), v.as_bytes().to_vec(), Part::Value));
    }

    /// An additional piece with an explicit role (embedded password, stored ciphertext, …).
    pub fn piece(&mut self, credential: &str, v: &[u8], part: Part) {
        self.values.push((credential.into(), v.to_vec(), part));
    }

    /// Derive needles. `common` holds pieces that occur identically under other seeds (constant
    /// structure such as the first line of every OpenSSH ed25519 key); those are dropped.
    pub fn finish(self, seed: &str, common: &BTreeSet<Vec<u8>>) -> Registry {
        let mut needles = BTreeSet::new();
        for (cred, bytes, part) in self.values {
            let add = |b: Vec<u8>, p: Part, needles: &mut BTreeSet<Needle>| {
                let keep = p == Part::Value || (b.len() >= MIN_NEEDLE && !common.contains(&b));
                if keep && !b.is_empty() {
                    needles.insert(Needle {
                        bytes: b,
                        credential: cred.clone(),
                        part: p,
                    });
                }
            };
            if part != Part::Value {
                add(bytes, part, &mut needles);
                continue;
            }
            for (b, p) in derive_pieces(&bytes) {
                add(b, p, &mut needles);
            }
            add(bytes, Part::Value, &mut needles);
        }
        let mut credentials = self.credentials;
        credentials.sort_by(|a, b| a.id.cmp(&b.id));
        Registry {
            seed: seed.to_string(),
            credentials,
            needles: needles.into_iter().collect(),
        }
    }

    /// Every derived (non-whole) piece, for computing the common set from a probe generation.
    pub fn pieces(&self) -> BTreeSet<Vec<u8>> {
        let mut out = BTreeSet::new();
        for (_, bytes, part) in &self.values {
            if *part == Part::Value {
                out.extend(derive_pieces(bytes).into_iter().map(|(b, _)| b));
            } else {
                out.insert(bytes.clone());
            }
        }
        out
    }
}

/// The substrings of a value that a partial leak would carry.
fn derive_pieces(v: &[u8]) -> Vec<(Vec<u8>, Part)> {
    let mut out = Vec::new();
    let Ok(s) = std::str::from_utf8(v) else {
        return out;
    };
    if s.contains("-----BEGIN ") {
        let mut body = String::new();
        for line in s.lines() {
            let l = line.trim();
            if l.starts_with("-----") {
                if !body.is_empty() {
                    out.push((std::mem::take(&mut body).into_bytes(), Part::PemBody));
                }
                continue;
            }
            if !l.is_empty() && !l.contains(':') {
                out.push((l.as_bytes().to_vec(), Part::PemLine));
                body.push_str(l);
            }
        }
        return out;
    }
    if let Some(p) = PREFIXES.iter().find(|p| s.starts_with(*p)) {
        out.push((s.as_bytes()[p.len()..].to_vec(), Part::Secret));
    }
    let segs: Vec<&str> = s.split('.').collect();
    if segs.len() == 3 && segs[0].starts_with("eyJ") {
        out.push((segs[1].as_bytes().to_vec(), Part::JwtSegment));
        out.push((segs[2].as_bytes().to_vec(), Part::JwtSegment));
    }
    // A public key line `ssh-ed25519 AAAA… comment`: the base64 blob.
    if s.starts_with("ssh-") {
        if let Some(blob) = s.split_whitespace().nth(1) {
            out.push((blob.as_bytes().to_vec(), Part::Public));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_wildcards_exactly() {
        assert!(host_matches(
            "*.amazonaws.com",
            "s3.eu-west-1.amazonaws.com"
        ));
        assert!(!host_matches("*.amazonaws.com", "amazonaws.com"));
        assert!(!host_matches("*.amazonaws.com", "evilamazonaws.com"));
        assert!(!host_matches("*.amazonaws.com", "amazonaws.com.evil.io"));
        assert!(host_matches("api.github.com", "API.GitHub.com"));
    }

    #[test]
    fn lookup_whole_and_piece_and_json_roundtrip() {
        let mut b = RegistryBuilder::default();
        b.credential("gh", "github-token", &["api.github.com"]);
        b.value("gh", "ghp_abcdefghijklmnopqrstuvwxyz0123456789");
        b.piece(
            "gh",
            &[0, 159, 146, 150, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            Part::Stored,
        );
        let mut r = b.finish("00", &BTreeSet::new());
        r.add_location(
            "gh",
            Location::Env {
                name: "GITHUB_TOKEN".into(),
            },
        )
        .unwrap();
        assert!(r.add_location("nope", Location::Clipboard).is_err());
        let h = r
            .lookup("ghp_abcdefghijklmnopqrstuvwxyz0123456789")
            .unwrap();
        assert!(h.exact);
        assert_eq!(h.credential.id, "gh");
        let h = r.lookup("abcdefghijklmnopqrstuvwxyz0123456789").unwrap();
        assert_eq!(h.needle.part, Part::Secret);
        assert!(r.lookup("mnopqrstuvwx").is_some());
        assert!(
            r.lookup("mnopqrstuvw").is_none(),
            "too short to be evidence"
        );
        assert!(r.lookup("").is_none());
        assert_eq!(r.in_env("GITHUB_TOKEN").len(), 1);
        let hay = b"POST /x HTTP/1.1\r\n\r\ntoken=abcdefghijklmnopqrstuvwxyz0123456789";
        assert_eq!(r.scan(hay).len(), 1);
        let back = Registry::from_json(&r.to_json().unwrap()).unwrap();
        assert_eq!(back, r);
        assert!(back
            .needles
            .iter()
            .any(|n| n.part == Part::Stored && n.bytes[0] == 0));
        assert!(Registry::from_json("{").is_err());
    }

    #[test]
    fn common_pieces_are_dropped_but_values_kept() {
        let mut b = RegistryBuilder::default();
        b.credential("k", "ssh-private-key", &[]);
        let pem =
            "-----BEGIN X-----\nCONSTANTCONSTANTCONSTANT\nUNIQUEUNIQUEUNIQUE\n-----END X-----\n";
        b.value("k", pem);
        let common: BTreeSet<Vec<u8>> = [b"CONSTANTCONSTANTCONSTANT".to_vec()].into();
        let r = b.finish("00", &common);
        assert!(r.lookup("UNIQUEUNIQUEUNIQUE").is_some());
        assert!(r
            .needles
            .iter()
            .all(|n| n.bytes != b"CONSTANTCONSTANTCONSTANT"));
        assert!(r.lookup(pem).unwrap().exact);
    }
}
