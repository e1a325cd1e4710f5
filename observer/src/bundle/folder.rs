//! Reading a skill folder. Every directory and file below the root is opened relative to its
//! parent's descriptor with `O_NOFOLLOW`, so no symbolic link is ever followed, and a file
//! swapped after it was listed is caught by comparing `fstat` with the listing's `lstat`.

use super::error::{BundleError, LimitExceeded, ProblemKind};
use super::paths::{check_path_set, validate_rel_path, EntryKind, Problems};
use super::{is_text, BundleFile, Limits, Tree};
use nix::dir::Dir;
use nix::fcntl::{openat, readlinkat, AtFlags, OFlag};
use nix::sys::stat::{fstatat, FileStat, Mode, SFlag};
use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

struct Walker<'a> {
    input: String,
    limits: &'a Limits,
    tree: Tree,
    problems: Problems,
    files: usize,
    dirs: usize,
    bytes: u64,
}

/// Read a folder into memory within `limits`. Symbolic links, special files and names that
/// break the path policy are rejected (all of them reported together).
pub(crate) fn read_folder(root: &Path, limits: &Limits) -> Result<Tree, BundleError> {
    let input = root.display().to_string();
    let dir = Dir::open(
        root,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| BundleError::Io {
        path: input.clone(),
        source: e.into(),
    })?;
    let mut w = Walker {
        input,
        limits,
        tree: Tree::default(),
        problems: Problems::default(),
        files: 0,
        dirs: 0,
        bytes: 0,
    };
    w.walk(dir, "", 0)?;
    let mut entries: Vec<(String, EntryKind)> = w
        .tree
        .files
        .keys()
        .map(|p| (p.clone(), EntryKind::File))
        .collect();
    entries.extend(w.tree.dirs.iter().map(|p| (p.clone(), EntryKind::Dir)));
    check_path_set(&entries, &mut w.problems);
    w.problems.finish(&w.input)?;
    Ok(w.tree)
}

impl Walker<'_> {
    fn limit(&self, limit: LimitExceeded) -> BundleError {
        BundleError::Limit {
            input: self.input.clone(),
            limit,
        }
    }

    fn io(&self, rel: &str, e: impl Into<std::io::Error>) -> BundleError {
        BundleError::Io {
            path: format!("{}/{rel}", self.input),
            source: e.into(),
        }
    }

    fn walk(&mut self, mut dir: Dir, rel: &str, depth: usize) -> Result<(), BundleError> {
        if depth > self.limits.max_depth {
            return Err(self.limit(LimitExceeded::Depth {
                limit: self.limits.max_depth,
            }));
        }
        let mut names: Vec<CString> = Vec::new();
        for entry in dir.iter() {
            let entry = entry.map_err(|e| self.io(rel, e))?;
            let name = entry.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            names.push(name.to_owned());
            // Bound the listing itself, before anything is stat-ed or read.
            if names.len() + self.files + self.dirs > 2 * self.limits.max_files {
                return Err(self.limit(LimitExceeded::FileCount {
                    limit: self.limits.max_files,
                }));
            }
        }
        names.sort();
        let fd = dir.as_raw_fd();
        for name in names {
            let raw = name.to_bytes();
            let shown = join(rel, &String::from_utf8_lossy(raw));
            let Ok(name_str) = std::str::from_utf8(raw) else {
                self.problems.push(&shown, ProblemKind::NonUtf8Name);
                continue;
            };
            let path = join(rel, name_str);
            if let Err(kind) = validate_rel_path(&path) {
                self.problems.push(&shown, kind);
                continue;
            }
            let st = fstatat(Some(fd), name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                .map_err(|e| self.io(&path, e))?;
            match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
                SFlag::S_IFDIR => {
                    self.dirs += 1;
                    if self.dirs > self.limits.max_files {
                        return Err(self.limit(LimitExceeded::FileCount {
                            limit: self.limits.max_files,
                        }));
                    }
                    let sub = Dir::openat(
                        Some(fd),
                        name.as_c_str(),
                        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(|e| self.io(&path, e))?;
                    self.tree.dirs.insert(path.clone());
                    self.walk(sub, &path, depth + 1)?;
                }
                SFlag::S_IFREG => self.read_file(fd, &name, &path, &st)?,
                SFlag::S_IFLNK => {
                    self.count_file()?;
                    let target = readlinkat(Some(fd), name.as_c_str())
                        .map(|t| t.to_string_lossy().into_owned())
                        .unwrap_or_else(|_| "?".into());
                    self.problems.push(&path, ProblemKind::Symlink { target });
                }
                other => {
                    self.count_file()?;
                    self.problems
                        .push(&path, ProblemKind::SpecialFile(special_name(other)));
                }
            }
        }
        Ok(())
    }

    fn count_file(&mut self) -> Result<(), BundleError> {
        self.files += 1;
        if self.files > self.limits.max_files {
            return Err(self.limit(LimitExceeded::FileCount {
                limit: self.limits.max_files,
            }));
        }
        Ok(())
    }

    fn read_file(
        &mut self,
        dirfd: RawFd,
        name: &CString,
        path: &str,
        listed: &FileStat,
    ) -> Result<(), BundleError> {
        self.count_file()?;
        let raw = openat(
            Some(dirfd),
            name.as_c_str(),
            OFlag::O_RDONLY
                | OFlag::O_NOFOLLOW
                | OFlag::O_NONBLOCK
                | OFlag::O_NOCTTY
                | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| self.io(path, e))?;
        // SAFETY: `raw` was just returned by openat and is owned by nobody else.
        let file = unsafe { File::from_raw_fd(raw) };
        let meta = file.metadata().map_err(|e| self.io(path, e))?;
        if !meta.is_file() || meta.ino() != listed.st_ino || meta.dev() != listed.st_dev {
            return Err(self.io(
                path,
                std::io::Error::other("file changed while the folder was read"),
            ));
        }
        let remaining = self.limits.max_unpacked_bytes.saturating_sub(self.bytes);
        if meta.len() > remaining {
            // Refused from its size, before reading: a sparse file costs nothing to make.
            return Err(self.limit(LimitExceeded::Unpacked {
                limit: self.limits.max_unpacked_bytes,
            }));
        }
        let mut bytes = Vec::with_capacity(meta.len().min(remaining) as usize);
        file.take(remaining.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| self.io(path, e))?;
        self.bytes += bytes.len() as u64;
        if self.bytes > self.limits.max_unpacked_bytes {
            return Err(self.limit(LimitExceeded::Unpacked {
                limit: self.limits.max_unpacked_bytes,
            }));
        }
        check_text_size(path, &bytes, self.limits).map_err(|l| self.limit(l))?;
        self.tree.files.insert(
            path.to_string(),
            BundleFile {
                bytes,
                mode: meta.mode() & 0o777,
            },
        );
        Ok(())
    }
}

/// The per-text-file limit: binary files are bounded only by the unpacked total.
pub(crate) fn check_text_size(
    path: &str,
    bytes: &[u8],
    limits: &Limits,
) -> Result<(), LimitExceeded> {
    let len = bytes.len() as u64;
    if len > limits.max_text_file_bytes && is_text(bytes) {
        return Err(LimitExceeded::TextFile {
            path: path.to_string(),
            limit: limits.max_text_file_bytes,
            actual: len,
        });
    }
    Ok(())
}

fn join(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_string()
    } else {
        format!("{rel}/{name}")
    }
}

fn special_name(t: SFlag) -> &'static str {
    match t {
        SFlag::S_IFIFO => "fifo",
        SFlag::S_IFSOCK => "socket",
        SFlag::S_IFCHR => "character device",
        SFlag::S_IFBLK => "block device",
        _ => "unknown type",
    }
}
