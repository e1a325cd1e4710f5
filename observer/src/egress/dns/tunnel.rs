//! DNS tunnelling shapes: what a name looks like when it carries data rather than names a host.
//! Pure functions; the server turns their output into trace notes.

use std::collections::{HashMap, HashSet};

/// Unique names under one parent after which the parent is flagged.
pub const MANY_SUBDOMAINS: usize = 30;
pub const LONG_LABEL: usize = 40;
pub const LONG_NAME: usize = 150;
const MIN_ENCODED: usize = 16;

/// Shannon entropy in bits per character.
pub fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// What a single label looks like, if it looks like encoded data.
pub fn label_shape(label: &str) -> Option<&'static str> {
    let n = label.len();
    if n < MIN_ENCODED {
        return None;
    }
    let b = label.as_bytes();
    let digits = b.iter().filter(|c| c.is_ascii_digit()).count();
    let letters = b.iter().filter(|c| c.is_ascii_alphabetic()).count();
    if b.iter().all(u8::is_ascii_hexdigit) && digits > 0 && letters > 0 {
        return Some("hex");
    }
    let upper = b.iter().any(u8::is_ascii_uppercase);
    let lower = b.iter().any(u8::is_ascii_lowercase);
    if b.iter()
        .all(|c| c.is_ascii_alphabetic() || (b'2'..=b'7').contains(c) || *c == b'=')
        && digits >= 2
        && upper != lower
    {
        return Some("base32");
    }
    if b.iter()
        .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
        && upper
        && lower
        && digits > 0
    {
        return Some("base64");
    }
    if entropy(label) >= 3.5 && digits > 0 {
        return Some("high-entropy");
    }
    None
}

/// Per-name signals: long labels, long names, encoded-looking labels.
pub fn name_signals(name: &str) -> Vec<String> {
    let name = name.trim_end_matches('.');
    let mut out = Vec::new();
    if name.len() >= LONG_NAME {
        out.push(format!("long name ({} chars)", name.len()));
    }
    for label in name.split('.') {
        if label.len() >= LONG_LABEL {
            out.push(format!("long label ({} chars)", label.len()));
        }
        if let Some(shape) = label_shape(label) {
            out.push(format!("{shape} label"));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Remembers names per parent and reports each kind of signal once per parent.
#[derive(Debug, Default)]
pub struct TunnelTracker {
    subdomains: HashMap<String, HashSet<String>>,
    reported: HashSet<(String, String)>,
}

impl TunnelTracker {
    /// Observes one queried name; returns new notes (`parent: reason (example name)`).
    pub fn observe(&mut self, name: &str) -> Vec<String> {
        let Some((parent, subs)) = crate::egress::canary::reassemble::split_parent(name) else {
            return Vec::new();
        };
        let mut reasons = name_signals(name);
        if !subs.is_empty() {
            let set = self.subdomains.entry(parent.clone()).or_default();
            if set.len() <= MANY_SUBDOMAINS {
                set.insert(subs.join("."));
            }
            if set.len() > MANY_SUBDOMAINS {
                reasons.push(format!("more than {MANY_SUBDOMAINS} unique subdomains"));
            }
        }
        reasons
            .into_iter()
            .filter(|r| self.reported.insert((parent.clone(), r.clone())))
            .map(|r| format!("{parent}: {r} (e.g. {})", name.trim_end_matches('.')))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(label_shape("6768705f52346e64306d56"), Some("hex"));
        assert_eq!(label_shape("mfrggzdfmztwq2lknnwg23tp"), Some("base32"));
        assert_eq!(label_shape("Z2hwX1I0bmQwbVY0bHUz"), Some("base64"));
        for benign in [
            "www",
            "api",
            "googleusercontent",
            "static-assets",
            "login",
            "accounts",
        ] {
            assert_eq!(label_shape(benign), None, "{benign}");
        }
        assert!(name_signals(&format!("{}.x.evil.com", "a".repeat(50)))
            .iter()
            .any(|s| s.starts_with("long label")));
        assert!(name_signals("api.github.com").is_empty());
    }

    #[test]
    fn many_unique_subdomains_reported_once() {
        let mut t = TunnelTracker::default();
        let mut notes = Vec::new();
        for i in 0..100 {
            notes.extend(t.observe(&format!("q{i}.beacon.example.net")));
        }
        assert_eq!(
            notes
                .iter()
                .filter(|n| n.contains("unique subdomains"))
                .count(),
            1,
            "{notes:?}"
        );
        // Benign repeated lookups never trip it.
        let mut t = TunnelTracker::default();
        for _ in 0..100 {
            assert!(t.observe("api.github.com").is_empty());
        }
    }
}
