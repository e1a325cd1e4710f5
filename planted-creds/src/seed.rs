//! The run seed: 32 bytes, written as 64 hex digits in reports so a run can be reproduced.

use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SeedError {
    #[error("seed must be 64 hex digits, got {0} characters")]
    Length(usize),
    #[error("seed is not hexadecimal: {0}")]
    NotHex(String),
    #[error("no system randomness: {0}")]
    Random(String),
}

#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Seed([u8; 32]);

impl Seed {
    /// A fresh seed from the operating system's randomness.
    pub fn random() -> Result<Seed, SeedError> {
        let mut b = [0u8; 32];
        getrandom::getrandom(&mut b).map_err(|e| SeedError::Random(e.to_string()))?;
        Ok(Seed(b))
    }

    pub fn from_bytes(b: [u8; 32]) -> Seed {
        Seed(b)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// An independent deterministic stream per purpose, so adding a credential never changes the
    /// values of the others.
    pub fn rng(&self, label: &str) -> ChaCha20Rng {
        let mut h = Sha256::new();
        h.update(b"planted-creds/v1\0");
        h.update(self.0);
        h.update(label.as_bytes());
        ChaCha20Rng::from_seed(h.finalize().into())
    }

    /// A derived seed (e.g. for a second pass) that stays reproducible from this one.
    pub fn derive(&self, label: &str) -> Seed {
        let mut h = Sha256::new();
        h.update(b"planted-creds/derive\0");
        h.update(self.0);
        h.update(label.as_bytes());
        Seed(h.finalize().into())
    }
}

impl fmt::Display for Seed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

// Never print the bytes through Debug in a different shape than Display.
impl fmt::Debug for Seed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Seed({self})")
    }
}

impl FromStr for Seed {
    type Err = SeedError;
    fn from_str(s: &str) -> Result<Seed, SeedError> {
        let s = s.trim();
        if s.len() != 64 {
            return Err(SeedError::Length(s.len()));
        }
        let v = hex::decode(s).map_err(|e| SeedError::NotHex(e.to_string()))?;
        let mut b = [0u8; 32];
        b.copy_from_slice(&v);
        Ok(Seed(b))
    }
}

impl TryFrom<String> for Seed {
    type Error = SeedError;
    fn try_from(s: String) -> Result<Seed, SeedError> {
        s.parse()
    }
}

impl From<Seed> for String {
    fn from(s: Seed) -> String {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::RngCore;

    #[test]
    fn roundtrip_and_errors() {
        let s = Seed::random().unwrap();
        let t: Seed = s.to_string().parse().unwrap();
        assert_eq!(s, t);
        assert_eq!("abc".parse::<Seed>(), Err(SeedError::Length(3)));
        assert!(matches!(
            "z".repeat(64).parse::<Seed>(),
            Err(SeedError::NotHex(_))
        ));
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Seed>(&json).unwrap(), s);
        assert!(serde_json::from_str::<Seed>("\"00\"").is_err());
    }

    #[test]
    fn streams_are_independent_and_stable() {
        let s = Seed::from_bytes([7; 32]);
        assert_eq!(s.rng("a").next_u64(), s.rng("a").next_u64());
        assert_ne!(s.rng("a").next_u64(), s.rng("b").next_u64());
        assert_ne!(
            s.rng("a").next_u64(),
            Seed::from_bytes([8; 32]).rng("a").next_u64()
        );
        assert_ne!(s.derive("x"), s);
    }
}
