//! The entry tree being built, path rules, and the final check for tell words.

use crate::materialize::ImageError;
use crate::Entry;
use planted_creds::{find_tell, Gen};
use std::collections::BTreeMap;

pub(crate) fn check_path(p: &str) -> Result<(), ImageError> {
    let ok = p.starts_with('/')
        && p.len() > 1
        && !p.ends_with('/')
        && !p.contains('\0')
        && p[1..]
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    if ok {
        Ok(())
    } else {
        Err(ImageError::BadPath(p.to_string()))
    }
}

pub(crate) fn check_rel(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\0')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

pub(crate) struct Tree {
    pub entries: BTreeMap<String, Entry>,
    pub g: Gen,
    pub now: i64,
}

impl Tree {
    fn parent_dirs(&mut self, path: &str) {
        let mut cur = String::new();
        let parts: Vec<&str> = path[1..].split('/').collect();
        for c in &parts[..parts.len() - 1] {
            cur.push('/');
            cur.push_str(c);
            if !self.entries.contains_key(&cur) {
                let mtime = self.now - self.g.range(0, 60 * 86400);
                self.entries.insert(
                    cur.clone(),
                    Entry::Dir {
                        path: cur.clone(),
                        mode: 0o755,
                        mtime,
                    },
                );
            }
        }
    }

    pub fn dir(&mut self, path: &str, mode: u32) -> Result<(), ImageError> {
        check_path(path)?;
        self.parent_dirs(path);
        let mtime = self.now - self.g.range(0, 60 * 86400);
        match self.entries.get_mut(path) {
            Some(Entry::Dir { mode: m, .. }) => *m = mode,
            Some(_) => return Err(ImageError::Conflict(path.into())),
            None => {
                self.entries.insert(
                    path.into(),
                    Entry::Dir {
                        path: path.into(),
                        mode,
                        mtime,
                    },
                );
            }
        }
        Ok(())
    }

    pub fn file(
        &mut self,
        path: &str,
        bytes: Vec<u8>,
        mode: u32,
        mtime: i64,
    ) -> Result<(), ImageError> {
        self.leaf(Entry::File {
            path: path.into(),
            bytes,
            mode,
            mtime,
        })
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> Result<(), ImageError> {
        self.leaf(Entry::Symlink {
            path: path.into(),
            target: target.into(),
        })
    }

    /// A file or symlink: placing two things at one path is a bug in the image.
    fn leaf(&mut self, e: Entry) -> Result<(), ImageError> {
        let path = e.path().to_string();
        check_path(&path)?;
        if self.entries.contains_key(&path) {
            return Err(ImageError::Conflict(path));
        }
        self.parent_dirs(&path);
        self.entries.insert(path, e);
        Ok(())
    }

    pub fn age(&mut self, days: Option<u32>) -> i64 {
        match days {
            Some(d) => self.now - i64::from(d) * 86400 - self.g.range(0, 20_000),
            None => self.now - self.g.range(86400, 365 * 86400),
        }
    }
}

pub(crate) fn under(path: &str, dir: &str) -> bool {
    path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// Nothing we generate may carry a word that tells a skill it is watched. The skill's own files
/// are its business and are not checked.
pub(crate) fn scan_for_tells(
    entries: &[Entry],
    env: &[(String, String)],
    skill_dir: &str,
    names: &[&str],
) -> Result<(), ImageError> {
    let tell = |path: &str, bytes: &[u8]| match find_tell(bytes) {
        Some(word) => Err(ImageError::Tell {
            path: path.to_string(),
            word,
        }),
        None => Ok(()),
    };
    for e in entries {
        if under(e.path(), skill_dir) {
            continue;
        }
        tell(e.path(), e.path().as_bytes())?;
        match e {
            Entry::File { path, bytes, .. } => tell(path, bytes)?,
            Entry::Symlink { path, target } => tell(path, target.as_bytes())?,
            Entry::Dir { .. } => {}
        }
    }
    for (k, v) in env {
        tell(&format!("${k}"), k.as_bytes())?;
        tell(&format!("${k}"), v.as_bytes())?;
    }
    for n in names {
        tell("identity", n.as_bytes())?;
    }
    Ok(())
}
