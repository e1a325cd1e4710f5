//! The content digest of a skill unit (definition in docs/bundle.md).

use super::BundleFile;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Domain separation, so the digest of a bundle can never equal a digest of other data.
const DOMAIN: &[u8] = b"skill-observer bundle digest v1\0";

/// SHA-256 over: the domain tag, the file count (u64 BE), then per file in byte order of the
/// path: path length (u64 BE), path, executable flag (one byte, 0 or 1), content length (u64 BE),
/// content. Lowercase hex.
pub fn digest(files: &BTreeMap<String, BundleFile>) -> String {
    let mut h = Sha256::new();
    h.update(DOMAIN);
    h.update((files.len() as u64).to_be_bytes());
    for (path, file) in files {
        h.update((path.len() as u64).to_be_bytes());
        h.update(path.as_bytes());
        h.update([u8::from(file.is_executable())]);
        h.update((file.bytes.len() as u64).to_be_bytes());
        h.update(&file.bytes);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(entries: &[(&str, &[u8], u32)]) -> BTreeMap<String, BundleFile> {
        entries
            .iter()
            .map(|(p, b, m)| {
                (
                    p.to_string(),
                    BundleFile {
                        bytes: b.to_vec(),
                        mode: *m,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn digest_is_stable_and_framed() {
        let base = digest(&set(&[("a", b"xy", 0o644), ("b", b"z", 0o644)]));
        // Order of insertion does not matter.
        assert_eq!(
            base,
            digest(&set(&[("b", b"z", 0o644), ("a", b"xy", 0o644)]))
        );
        assert_eq!(base.len(), 64);
        // Moving a byte between files changes it.
        assert_ne!(
            base,
            digest(&set(&[("a", b"x", 0o644), ("b", b"yz", 0o644)]))
        );
        // Moving bytes between path and content changes it.
        assert_ne!(
            digest(&set(&[("ab", b"c", 0o644)])),
            digest(&set(&[("a", b"bc", 0o644)]))
        );
        // Renaming, the executable bit and an added empty file change it.
        assert_ne!(
            base,
            digest(&set(&[("a", b"xy", 0o644), ("c", b"z", 0o644)]))
        );
        assert_ne!(
            base,
            digest(&set(&[("a", b"xy", 0o755), ("b", b"z", 0o644)]))
        );
        assert_ne!(
            base,
            digest(&set(&[
                ("a", b"xy", 0o644),
                ("b", b"z", 0o644),
                ("e", b"", 0o644)
            ]))
        );
        // Other permission bits do not (they do not change behaviour in the jail).
        assert_eq!(
            base,
            digest(&set(&[("a", b"xy", 0o600), ("b", b"z", 0o444)]))
        );
    }

    #[test]
    fn known_answer() {
        // Computed independently with Python's hashlib from the documented definition.
        let d = digest(&set(&[("SKILL.md", b"hi\n", 0o644)]));
        assert_eq!(d, KNOWN);
    }
    const KNOWN: &str = "d2c6bf8a43eafdfbc7f95cf02099163a919a81a9dc509cff09ef687d8472294c";
}
