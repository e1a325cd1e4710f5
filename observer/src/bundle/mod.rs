//! Bundle loading: a skill folder, a lone `SKILL.md` or a `.zip`, read once into memory under
//! explicit limits, split into one unit per `SKILL.md`. Nothing downstream reads host paths of
//! the skill again. Policy and definitions: docs/bundle.md.

mod digest;
mod error;
mod folder;
mod frontmatter;
mod paths;
mod scripts;
mod zipfile;

pub use digest::digest;
pub use error::{BundleError, LimitExceeded, Problem, ProblemKind};
pub use frontmatter::{parse_skill_md, split_tools, FrontMatter, SkillMd};
pub use paths::{fold_key, validate_rel_path};
pub use scripts::{find_scripts, interpreter_for_extension, parse_shebang, Interpreter, Script};

use crate::model::Fidelity;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Size and count limits, as a hosted scanner enforces them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Size of a `.zip` input.
    pub max_zip_bytes: u64,
    /// Total bytes of all files after unpacking (real bytes read, not declared sizes).
    pub max_unpacked_bytes: u64,
    /// Number of files; directories are counted separately against the same number.
    pub max_files: usize,
    /// Size of one text file (UTF-8 without NUL bytes), and of a lone `SKILL.md`.
    pub max_text_file_bytes: u64,
    /// Highest accepted compression ratio of a zip member of at least 1 MiB.
    pub max_compression_ratio: u64,
    /// Folder nesting depth.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_zip_bytes: 25 << 20,
            max_unpacked_bytes: 256 << 20,
            max_files: 10_000,
            max_text_file_bytes: 4 << 20,
            max_compression_ratio: 200,
            max_depth: 64,
        }
    }
}

/// One file of a unit, held in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleFile {
    pub bytes: Vec<u8>,
    /// Permission bits (`0o777` mask; set-id and sticky bits are dropped).
    pub mode: u32,
}

impl BundleFile {
    pub fn is_executable(&self) -> bool {
        self.mode & 0o111 != 0
    }

    /// UTF-8 (a BOM allowed) without NUL bytes.
    pub fn is_text(&self) -> bool {
        is_text(&self.bytes)
    }

    /// The content as text when it is text.
    pub fn text(&self) -> Option<&str> {
        if self.bytes.contains(&0) {
            return None;
        }
        let b = self
            .bytes
            .strip_prefix(b"\xEF\xBB\xBF")
            .unwrap_or(&self.bytes);
        std::str::from_utf8(b).ok()
    }
}

pub(crate) fn is_text(bytes: &[u8]) -> bool {
    !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok()
}

/// One skill: the folder holding a `SKILL.md`, without the files of skills nested below it.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillUnit {
    /// `name` from the front matter, else the name of the unit's folder.
    pub name: String,
    /// True when `name` came from the folder name.
    pub name_is_fallback: bool,
    /// A safe directory name derived from `name` (`[a-z0-9-]`, at most 64 bytes) for installing
    /// the skill in the jail; the raw name may hold `/` or `..`.
    pub install_name: String,
    pub description: Option<String>,
    pub front_matter: FrontMatter,
    /// The instructions after the front matter (LF line endings).
    pub instructions: String,
    pub fidelity: Fidelity,
    /// Content digest, lowercase hex SHA-256 (docs/bundle.md).
    pub digest: String,
    /// Where the unit sits in the input (`.` for the root, else e.g. `skills/pdf`).
    pub location: String,
    /// Files relative to the unit root, `SKILL.md` included.
    pub files: BTreeMap<String, BundleFile>,
    /// Directories relative to the unit root (so empty ones can be recreated).
    pub dirs: BTreeSet<String>,
    /// Scripts among `files`, with interpreter guesses.
    pub scripts: Vec<Script>,
}

impl SkillUnit {
    /// The unit's `SKILL.md` (always present in units built by [`load`]).
    pub fn skill_md(&self) -> Option<&BundleFile> {
        self.files.get(SKILL_MD)
    }
}

/// Everything read from one input.
#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    pub fidelity: Fidelity,
    pub units: Vec<SkillUnit>,
    /// Files of the input that belong to no unit (no `SKILL.md` above them). Reported, not run.
    pub unassigned: Vec<String>,
}

pub const SKILL_MD: &str = "SKILL.md";

/// The files and directories of an input, relative to its root, validated and within limits.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    pub files: BTreeMap<String, BundleFile>,
    pub dirs: BTreeSet<String>,
}

/// Load a skill folder, zip or lone `SKILL.md`: one unit per `SKILL.md`.
pub fn load(path: &Path, limits: &Limits) -> Result<Vec<SkillUnit>, BundleError> {
    load_bundle(path, limits).map(|b| b.units)
}

/// Like [`load`], also reporting files that belong to no unit.
pub fn load_bundle(path: &Path, limits: &Limits) -> Result<Bundle, BundleError> {
    let shown = path.display().to_string();
    let io_err = |source| BundleError::Io {
        path: shown.clone(),
        source,
    };
    // The top-level path is followed if it is a link: the user chose it. Nothing below it is.
    let meta = std::fs::metadata(path).map_err(io_err)?;
    if meta.is_dir() {
        let tree = folder::read_folder(path, limits)?;
        let root_name = folder_name(path);
        return split_units(tree, &root_name, Fidelity::Bundle, &shown);
    }
    if !meta.is_file() {
        return Err(BundleError::NotFileOrDir {
            path: shown,
            kind: file_type_name(&meta.file_type()),
        });
    }
    let cap = limits.max_zip_bytes.max(limits.max_text_file_bytes);
    let bytes = read_regular_file(path, cap).map_err(io_err)?;
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    if zipfile::looks_like_zip(&bytes) || ext.as_deref() == Some("zip") {
        if bytes.len() as u64 > limits.max_zip_bytes {
            return Err(BundleError::Limit {
                input: shown,
                limit: LimitExceeded::ZipSize {
                    limit: limits.max_zip_bytes,
                    actual: meta.len().max(bytes.len() as u64),
                },
            });
        }
        let tree = zipfile::read_zip(&shown, &bytes, limits)?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        return split_units(tree, &stem, Fidelity::Bundle, &shown);
    }
    if bytes.len() as u64 > limits.max_text_file_bytes {
        return Err(BundleError::Limit {
            input: shown,
            limit: LimitExceeded::TextFile {
                path: SKILL_MD.into(),
                limit: limits.max_text_file_bytes,
                actual: meta.len().max(bytes.len() as u64),
            },
        });
    }
    let root_name = match path.file_name() {
        Some(n) if n.eq_ignore_ascii_case(SKILL_MD) => path
            .parent()
            .map(folder_name)
            .unwrap_or_else(|| "skill".into()),
        _ => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let mut tree = Tree::default();
    tree.files
        .insert(SKILL_MD.into(), BundleFile { bytes, mode: 0o644 });
    split_units(tree, &root_name, Fidelity::Prompt, &shown)
}

/// Read a regular file, at most `cap + 1` bytes (so the caller sees it is over). Opened without
/// following a final link and without blocking, then checked with `fstat`, so a path swapped
/// for a FIFO or device after `metadata` is not read.
fn read_regular_file(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({})", file_type_name(&meta.file_type())),
        ));
    }
    let mut out = Vec::with_capacity(meta.len().min(cap + 1) as usize);
    f.take(cap + 1).read_to_end(&mut out)?;
    Ok(out)
}

pub(crate) fn file_type_name(t: &std::fs::FileType) -> &'static str {
    if t.is_fifo() {
        "fifo"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_symlink() {
        "symbolic link"
    } else if t.is_dir() {
        "directory"
    } else if t.is_file() {
        "regular file"
    } else {
        "unknown"
    }
}

/// The last component of a folder path, resolving `.` and `..` through the filesystem.
fn folder_name(path: &Path) -> String {
    let named = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n != "." && n != "..");
    named
        .or_else(|| {
            std::fs::canonicalize(path)
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        })
        .unwrap_or_else(|| "skill".into())
}

/// Split a tree into units: each folder holding a `SKILL.md` owns the files below it, except
/// those below a deeper `SKILL.md`.
fn split_units(
    tree: Tree,
    root_name: &str,
    fidelity: Fidelity,
    input: &str,
) -> Result<Bundle, BundleError> {
    let skill_dirs: BTreeSet<String> = tree
        .files
        .keys()
        .filter_map(|p| match p.rsplit_once('/') {
            Some((dir, SKILL_MD)) => Some(dir.to_string()),
            None if p == SKILL_MD => Some(String::new()),
            _ => None,
        })
        .collect();
    if skill_dirs.is_empty() {
        return Err(BundleError::MissingSkillMd(input.to_string()));
    }
    let mut per_unit: BTreeMap<&str, Tree> = skill_dirs
        .iter()
        .map(|d| (d.as_str(), Tree::default()))
        .collect();
    let mut unassigned = Vec::new();
    for (path, file) in tree.files {
        match owner(&skill_dirs, &path) {
            Some(dir) => {
                let rel = strip_dir(dir, &path).to_string();
                if let Some(t) = per_unit.get_mut(dir) {
                    t.files.insert(rel, file);
                }
            }
            None => unassigned.push(path),
        }
    }
    for path in tree.dirs {
        if let Some(dir) = owner(&skill_dirs, &path) {
            if dir != path {
                let rel = strip_dir(dir, &path).to_string();
                if let Some(t) = per_unit.get_mut(dir) {
                    t.dirs.insert(rel);
                }
            }
        }
    }
    let mut units = Vec::with_capacity(per_unit.len());
    for (dir, t) in per_unit {
        let shown = if dir.is_empty() {
            format!("{input}/{SKILL_MD}")
        } else {
            format!("{input}/{dir}/{SKILL_MD}")
        };
        let skill_md = t.files.get(SKILL_MD).map(|f| f.bytes.as_slice());
        let md = parse_skill_md(skill_md.unwrap_or_default()).map_err(|reason| {
            BundleError::MalformedSkillMd {
                path: shown,
                reason,
            }
        })?;
        let folder = if dir.is_empty() {
            root_name
        } else {
            dir.rsplit('/').next().unwrap_or(dir)
        };
        let (name, name_is_fallback) = match &md.front_matter.name {
            Some(n) => (n.clone(), false),
            None => (folder.to_string(), true),
        };
        units.push(SkillUnit {
            install_name: install_name(&name),
            name,
            name_is_fallback,
            description: md.front_matter.description.clone(),
            front_matter: md.front_matter,
            instructions: md.body,
            fidelity,
            digest: digest(&t.files),
            location: if dir.is_empty() {
                ".".into()
            } else {
                dir.into()
            },
            scripts: find_scripts(&t.files),
            files: t.files,
            dirs: t.dirs,
        });
    }
    Ok(Bundle {
        fidelity,
        units,
        unassigned,
    })
}

/// The deepest skill folder at or above `path`.
fn owner<'a>(skill_dirs: &'a BTreeSet<String>, path: &str) -> Option<&'a str> {
    let mut cur = path;
    loop {
        if let Some(d) = skill_dirs.get(cur) {
            return Some(d);
        }
        match cur.rsplit_once('/') {
            Some((parent, _)) => cur = parent,
            None => return skill_dirs.get("").map(|s| s.as_str()),
        }
    }
}

fn strip_dir<'a>(dir: &str, path: &'a str) -> &'a str {
    if dir.is_empty() {
        path
    } else {
        path.strip_prefix(dir)
            .and_then(|p| p.strip_prefix('/'))
            .unwrap_or(path)
    }
}

/// A directory name safe to create anywhere: lowercase ASCII letters, digits and single `-`,
/// at most 64 bytes, never empty.
pub fn install_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= 64 {
            break;
        }
    }
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "skill".into()
    } else {
        out.to_string()
    }
}

#[cfg(test)]
mod tests;
