//! Precomputed encoded forms of every needle, so the common encodings (base64 at any alignment,
//! base32, hex, byte reversal) are found by one multi-pattern pass without decoding anything.

use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine;

/// How a needle was encoded when its pattern matched. The layers are what a reader would undo,
/// outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Form {
    Raw,
    Base64,
    Base32,
    Hex,
    Reversed,
    ReversedBase64,
    ReversedHex,
}

impl Form {
    pub fn layers(self) -> &'static [&'static str] {
        match self {
            Form::Raw => &[],
            Form::Base64 => &["base64"],
            Form::Base32 => &["base32"],
            Form::Hex => &["hex"],
            Form::Reversed => &["reversed"],
            Form::ReversedBase64 => &["reversed", "base64"],
            Form::ReversedHex => &["reversed", "hex"],
        }
    }
}

/// The middle of `encode(prefix + needle)` that depends only on the needle: characters whose
/// bits all come from the needle, for a prefix of `shift` bytes. `bits` is 6 (base64) or 5
/// (base32).
fn shifted_slice(encoded: &str, shift: usize, len: usize, bits: usize) -> Option<String> {
    let start = (8 * shift).div_ceil(bits);
    let end = (8 * (shift + len)) / bits;
    encoded.get(start..end).map(str::to_string)
}

/// The base64 forms (standard and URL-safe) of `needle` at each of the 3 byte alignments.
pub fn base64_forms(needle: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for shift in 0..3 {
        let mut buf = vec![0u8; shift];
        buf.extend_from_slice(needle);
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            if let Some(s) = shifted_slice(&engine.encode(&buf), shift, needle.len(), 6) {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
    }
    out
}

const B32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// RFC 4648 base32 without padding.
pub fn base32_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len() * 8 / 5 + 1);
    let mut acc: u64 = 0;
    let mut nbits = 0;
    for &b in data {
        acc = (acc << 8) | u64::from(b);
        nbits += 8;
        while nbits >= 5 {
            nbits -= 5;
            out.push(B32[((acc >> nbits) & 31) as usize] as char);
        }
    }
    if nbits > 0 {
        out.push(B32[((acc << (5 - nbits)) & 31) as usize] as char);
    }
    out
}

/// Base32 forms at each of the 5 byte alignments, upper and lower case (DNS lower-cases).
pub fn base32_forms(needle: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for shift in 0..5 {
        let mut buf = vec![0u8; shift];
        buf.extend_from_slice(needle);
        if let Some(s) = shifted_slice(&base32_encode(&buf), shift, needle.len(), 5) {
            for v in [s.clone(), s.to_ascii_lowercase()] {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        }
    }
    out
}

/// Every (pattern bytes, form) pair for one needle.
pub fn forms(needle: &[u8]) -> Vec<(Vec<u8>, Form)> {
    let mut out: Vec<(Vec<u8>, Form)> = vec![(needle.to_vec(), Form::Raw)];
    let rev: Vec<u8> = needle.iter().rev().copied().collect();
    if rev != needle {
        out.push((rev, Form::Reversed));
    }
    for s in base64_forms(needle) {
        let r: Vec<u8> = s.bytes().rev().collect();
        out.push((s.into_bytes(), Form::Base64));
        out.push((r, Form::ReversedBase64));
    }
    for s in base32_forms(needle) {
        out.push((s.into_bytes(), Form::Base32));
    }
    let lower = hex::encode(needle);
    let upper = lower.to_ascii_uppercase();
    for h in [lower, upper] {
        let r: Vec<u8> = h.bytes().rev().collect();
        out.push((r, Form::ReversedHex));
        out.push((h.into_bytes(), Form::Hex));
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|(p, f)| seen.insert((p.clone(), *f)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_forms_match_every_alignment() {
        let needle = b"AKIAsecretVALUE123";
        let forms = base64_forms(needle);
        for prefix in ["", "x", "xy", "xyz", "hello world "] {
            let mut data = prefix.as_bytes().to_vec();
            data.extend_from_slice(needle);
            data.extend_from_slice(b" trailing");
            for enc in [STANDARD_NO_PAD.encode(&data), URL_SAFE_NO_PAD.encode(&data)] {
                assert!(
                    forms.iter().any(|f| enc.contains(f.as_str())),
                    "prefix {prefix:?}: {enc} has none of {forms:?}"
                );
            }
        }
    }

    #[test]
    fn base32_forms_match_every_alignment() {
        let needle = b"s3cr3t-token-value";
        let forms = base32_forms(needle);
        for prefix in ["", "a", "ab", "abc", "abcd", "abcde"] {
            let mut data = prefix.as_bytes().to_vec();
            data.extend_from_slice(needle);
            let enc = base32_encode(&data);
            assert!(forms.iter().any(|f| enc.contains(f.as_str())), "{prefix:?}");
            assert!(forms
                .iter()
                .any(|f| enc.to_lowercase().contains(f.as_str())));
        }
    }

    #[test]
    fn base32_encoder_matches_rfc4648_vectors() {
        assert_eq!(base32_encode(b"foobar"), "MZXW6YTBOI");
        assert_eq!(base32_encode(b"fo"), "MZXQ");
    }
}
