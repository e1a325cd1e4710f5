//! Path policy shared by zip members and folder entries: what a relative path may look like, and
//! which sets of paths cannot be materialised faithfully (duplicates, case or Unicode
//! normalisation collisions, a name that is both a file and a directory).

use super::error::{BundleError, Problem, ProblemKind};
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use unicode_normalization::UnicodeNormalization;

/// Longest accepted path component and whole path, in bytes (Linux `NAME_MAX` and `PATH_MAX`).
pub const MAX_COMPONENT: usize = 255;
pub const MAX_PATH: usize = 4096;

/// Validate a relative path (`/`-separated, UTF-8). A trailing `/` is accepted and dropped (zip
/// directory entries). Returns the canonical form.
pub fn validate_rel_path(name: &str) -> Result<String, ProblemKind> {
    if name.chars().any(|c| c.is_control()) {
        return Err(ProblemKind::ControlChar);
    }
    if name.contains('\\') {
        return Err(ProblemKind::Backslash);
    }
    if name.starts_with('/') || has_drive_prefix(name) {
        return Err(ProblemKind::Absolute);
    }
    let trimmed = name.strip_suffix('/').unwrap_or(name);
    if trimmed.split('/').any(|c| c == "..") {
        return Err(ProblemKind::ParentTraversal);
    }
    if trimmed.split('/').any(|c| c.is_empty() || c == ".") {
        return Err(ProblemKind::NonCanonical);
    }
    if trimmed.len() > MAX_PATH || trimmed.split('/').any(|c| c.len() > MAX_COMPONENT) {
        return Err(ProblemKind::NameTooLong);
    }
    Ok(trimmed.to_string())
}

/// `C:` or `c:foo`: absolute (or drive-relative) on Windows, so an extractor there escapes.
fn has_drive_prefix(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'
}

/// Kind of an entry in a path set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
}

/// The key two paths share when a case-insensitive or normalisation-insensitive filesystem
/// (macOS, Windows) would store them in the same place.
pub fn fold_key(path: &str) -> String {
    let lower: String = path.nfd().flat_map(char::to_lowercase).collect();
    lower.nfc().collect()
}

/// Check a set of validated paths: exact duplicates, file-vs-directory conflicts (including
/// directories implied by a file's path) and fold collisions. Problems are appended.
pub fn check_path_set(entries: &[(String, EntryKind)], problems: &mut Problems) {
    let mut all: BTreeMap<&str, EntryKind> = BTreeMap::new();
    for (path, kind) in entries {
        match all.entry(path.as_str()) {
            Entry::Vacant(v) => {
                v.insert(*kind);
            }
            // Two entries for one directory are harmless in themselves but never made by a normal
            // archiver; they are rejected like duplicate files.
            Entry::Occupied(_) => problems.push(path, ProblemKind::Duplicate),
        }
    }
    // Directories implied by file paths.
    let mut implied: Vec<&str> = Vec::new();
    for path in all.keys() {
        let mut end = 0;
        while let Some(i) = path[end..].find('/') {
            implied.push(&path[..end + i]);
            end += i + 1;
        }
    }
    for dir in implied {
        match all.get(dir) {
            Some(EntryKind::File) => problems.push(dir, ProblemKind::FileDirConflict),
            Some(EntryKind::Dir) => {}
            None => {
                all.insert(dir, EntryKind::Dir);
            }
        }
    }
    let mut folded: BTreeMap<String, &str> = BTreeMap::new();
    for path in all.keys() {
        match folded.entry(fold_key(path)) {
            Entry::Vacant(v) => {
                v.insert(path);
            }
            Entry::Occupied(o) => problems.push(
                path,
                ProblemKind::CaseCollision {
                    other: (*o.get()).to_string(),
                },
            ),
        }
    }
}

/// Collects rejections; the list is capped so a hostile archive cannot make the error huge.
#[derive(Debug, Default)]
pub struct Problems {
    list: Vec<Problem>,
    omitted: usize,
}

const MAX_REPORTED: usize = 100;

impl Problems {
    pub fn push(&mut self, path: &str, kind: ProblemKind) {
        if self.list.len() < MAX_REPORTED {
            self.list.push(Problem {
                path: path.to_string(),
                kind,
            });
        } else {
            self.omitted += 1;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// `Ok` when nothing was rejected.
    pub fn finish(self, input: &str) -> Result<(), BundleError> {
        if self.list.is_empty() {
            return Ok(());
        }
        Err(BundleError::Rejected {
            input: input.to_string(),
            problems: self.list,
            omitted: self.omitted,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_relative_paths() {
        assert_eq!(validate_rel_path("SKILL.md").unwrap(), "SKILL.md");
        assert_eq!(
            validate_rel_path("scripts/run.sh").unwrap(),
            "scripts/run.sh"
        );
        assert_eq!(validate_rel_path("scripts/").unwrap(), "scripts");
        assert_eq!(validate_rel_path("a/.hidden").unwrap(), "a/.hidden");
        assert_eq!(validate_rel_path("a/..b/c..").unwrap(), "a/..b/c..");
        assert_eq!(validate_rel_path("dé/ü.txt").unwrap(), "dé/ü.txt");
    }

    #[test]
    fn rejects_zip_slip_shapes() {
        use ProblemKind::*;
        for (name, want) in [
            ("../evil", ParentTraversal),
            ("a/../../evil", ParentTraversal),
            ("a/..", ParentTraversal),
            ("..", ParentTraversal),
            ("/etc/passwd", Absolute),
            ("//server/share/x", Absolute),
            ("C:/Windows/x", Absolute),
            ("c:evil", Absolute),
            ("..\\..\\evil", Backslash),
            ("C:\\Windows\\x", Backslash),
            ("a\\b", Backslash),
            ("a//b", NonCanonical),
            ("./a", NonCanonical),
            ("a/./b", NonCanonical),
            ("", NonCanonical),
            ("/", Absolute),
            ("a\0b", ControlChar),
            ("a\nb", ControlChar),
            ("a\u{7f}", ControlChar),
        ] {
            assert_eq!(validate_rel_path(name), Err(want), "{name:?}");
        }
        let long = "a".repeat(256);
        assert_eq!(validate_rel_path(&long), Err(NameTooLong));
        let deep = vec!["abcdefgh"; 600].join("/");
        assert_eq!(validate_rel_path(&deep), Err(NameTooLong));
    }

    fn check(entries: &[(&str, EntryKind)]) -> Vec<Problem> {
        let owned: Vec<(String, EntryKind)> =
            entries.iter().map(|(p, k)| (p.to_string(), *k)).collect();
        let mut problems = Problems::default();
        check_path_set(&owned, &mut problems);
        problems.list
    }

    #[test]
    fn path_set_conflicts() {
        use EntryKind::*;
        assert!(check(&[("a.sh", File), ("b/c", File), ("b", Dir)]).is_empty());
        let p = check(&[("a.sh", File), ("A.sh", File)]);
        assert_eq!(p.len(), 1);
        assert!(matches!(p[0].kind, ProblemKind::CaseCollision { .. }));
        assert_eq!(
            check(&[("x", File), ("x", File)])[0].kind,
            ProblemKind::Duplicate
        );
        assert_eq!(
            check(&[("x", Dir), ("x", Dir)])[0].kind,
            ProblemKind::Duplicate
        );
        assert_eq!(
            check(&[("x", File), ("x/y", File)])[0].kind,
            ProblemKind::FileDirConflict
        );
        // Implied directories collide too: Scripts/ and scripts/ merge on macOS.
        assert!(matches!(
            check(&[("Scripts/a", File), ("scripts/b", File)])[0].kind,
            ProblemKind::CaseCollision { .. }
        ));
        // NFC vs NFD spelling of the same name.
        let p = check(&[("caf\u{e9}.sh", File), ("cafe\u{301}.sh", File)]);
        assert!(matches!(p[0].kind, ProblemKind::CaseCollision { .. }));
        // Non-ASCII case folding.
        let p = check(&[("\u{c9}t\u{c9}", File), ("\u{e9}t\u{e9}", File)]);
        assert!(matches!(p[0].kind, ProblemKind::CaseCollision { .. }));
    }

    #[test]
    fn problem_list_is_capped() {
        let mut p = Problems::default();
        for i in 0..250 {
            p.push(&format!("f{i}"), ProblemKind::Duplicate);
        }
        match p.finish("in") {
            Err(BundleError::Rejected {
                problems, omitted, ..
            }) => {
                assert_eq!(problems.len(), MAX_REPORTED);
                assert_eq!(omitted, 150);
            }
            other => panic!("{other:?}"),
        }
    }
}
