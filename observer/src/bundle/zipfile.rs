//! Reading a zip archive held in memory. The central directory is walked here, byte by byte, so
//! every policy decision (names, types, encryption, duplicates the `zip` crate would merge,
//! local headers that disagree, overlapping members) is made on the raw records; the `zip` crate
//! only decompresses, and every member is read with a byte budget so declared sizes are never
//! trusted.

use super::error::{BundleError, LimitExceeded, ProblemKind};
use super::folder::check_text_size;
use super::paths::{check_path_set, validate_rel_path, EntryKind, Problems};
use super::{BundleFile, Limits, Tree};
use std::io::{Cursor, Read};

const LOCAL_SIG: u32 = 0x0403_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const EMPTY_SIG: u32 = 0x0605_4b50;
/// Members smaller than this are not ratio-checked (tiny files compress arbitrarily well).
const RATIO_FLOOR: u64 = 1 << 20;

/// A zip starts with a local header (or is an empty archive). Data before it (self-extracting
/// stubs, polyglot files) is refused by `read_zip`.
pub(crate) fn looks_like_zip(bytes: &[u8]) -> bool {
    matches!(le32(bytes, 0), Some(LOCAL_SIG | EMPTY_SIG))
}

fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The entry count announced by the end-of-central-directory record (zip64 aware). The record
/// must end the file exactly (after its comment): data after it is where a second, different
/// archive hides. Checked before the `zip` crate parses anything, since it pre-allocates per
/// announced entry.
fn announced_entries(bytes: &[u8]) -> Result<u64, String> {
    const EOCD_SIG: u32 = 0x0605_4b50;
    let last = bytes.len().checked_sub(22).ok_or("too short to be a zip")?;
    let lowest = last.saturating_sub(0xFFFF);
    let pos = (lowest..=last)
        .rev()
        .find(|&p| {
            le32(bytes, p) == Some(EOCD_SIG)
                && le16(bytes, p + 20).map(|c| p + 22 + c as usize) == Some(bytes.len())
        })
        .ok_or("no end-of-central-directory record at the end of the file")?;
    let count = le16(bytes, pos + 10).ok_or("truncated end record")?;
    if count != 0xFFFF {
        return Ok(count as u64);
    }
    // Zip64: locator just before the end record, pointing at the zip64 end record.
    let loc = pos.checked_sub(20).ok_or("truncated zip64 locator")?;
    if le32(bytes, loc) != Some(0x0706_4b50) {
        return Ok(count as u64);
    }
    let at = le64(bytes, loc + 8)
        .and_then(|a| usize::try_from(a).ok())
        .ok_or("bad zip64 offset")?;
    if le32(bytes, at) != Some(0x0606_4b50) {
        return Err("zip64 end record missing".into());
    }
    le64(bytes, at + 32).ok_or_else(|| "truncated zip64 end record".into())
}

/// A central directory record, as stored.
#[derive(Debug)]
struct Record {
    made_by: u16,
    flags: u16,
    method: u16,
    external: u32,
    name: Vec<u8>,
}

/// Walk central directory records from `start` until the signature stops matching.
fn walk_central(bytes: &[u8], start: usize) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    let mut pos = start;
    while le32(bytes, pos) == Some(CENTRAL_SIG) {
        let f = |o: usize| le16(bytes, pos + o).ok_or("truncated central directory");
        let (n, m, k) = (f(28)? as usize, f(30)? as usize, f(32)? as usize);
        let name = bytes
            .get(pos + 46..pos + 46 + n)
            .ok_or("truncated central directory")?
            .to_vec();
        out.push(Record {
            made_by: f(4)?,
            flags: f(8)?,
            method: f(10)?,
            external: le32(bytes, pos + 38).ok_or("truncated central directory")?,
            name,
        });
        pos += 46 + n + m + k;
    }
    Ok(out)
}

/// What a member is, from its Unix mode where the archiver recorded one.
fn member_kind(rec: &Record, name_is_dir: bool) -> Result<(EntryKind, u32), ProblemKind> {
    let host = rec.made_by >> 8;
    let unix = rec.external >> 16;
    // 3 = Unix, 19 = OS X; other hosts (DOS, NTFS, …) carry no Unix mode.
    if !(host == 3 || host == 19) || unix == 0 {
        let kind = if name_is_dir {
            EntryKind::Dir
        } else {
            EntryKind::File
        };
        return Ok((kind, 0o644));
    }
    let perm = match unix & 0o777 {
        0 => 0o644,
        p => p,
    };
    let kind = match unix & 0o170000 {
        0 if name_is_dir => EntryKind::Dir,
        0 | 0o100000 if !name_is_dir => EntryKind::File,
        0o040000 if name_is_dir => EntryKind::Dir,
        0o100000 | 0o040000 => return Err(ProblemKind::TypeMismatch),
        0o120000 => {
            return Err(ProblemKind::Symlink {
                target: "(link target stored in the archive)".into(),
            })
        }
        0o010000 => return Err(ProblemKind::SpecialFile("fifo")),
        0o020000 => return Err(ProblemKind::SpecialFile("character device")),
        0o060000 => return Err(ProblemKind::SpecialFile("block device")),
        0o140000 => return Err(ProblemKind::SpecialFile("socket")),
        _ => return Err(ProblemKind::SpecialFile("unknown type")),
    };
    Ok((kind, perm))
}

struct Member {
    index: usize,
    path: String,
    kind: EntryKind,
    mode: u32,
    size: u64,
    compressed: u64,
}

/// Unpack an in-memory zip into a tree, or say precisely why not.
pub(crate) fn read_zip(input: &str, bytes: &[u8], limits: &Limits) -> Result<Tree, BundleError> {
    let invalid = |reason: String| BundleError::InvalidZip {
        input: input.to_string(),
        reason,
    };
    if !looks_like_zip(bytes) {
        return Err(invalid(
            "does not start with a zip member (not a zip, or data before the first member)".into(),
        ));
    }
    let announced = announced_entries(bytes).map_err(invalid)?;
    if announced > 2 * limits.max_files as u64 {
        return Err(BundleError::Limit {
            input: input.to_string(),
            limit: LimitExceeded::FileCount {
                limit: limits.max_files,
            },
        });
    }
    let mut archive =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| invalid(e.to_string()))?;
    let cd_start = usize::try_from(archive.central_directory_start())
        .map_err(|_| invalid("central directory offset out of range".into()))?;
    let records = walk_central(bytes, cd_start).map_err(invalid)?;
    let files = records.iter().filter(|r| !r.name.ends_with(b"/")).count();
    let dirs = records.len() - files;
    if files > limits.max_files || dirs > limits.max_files {
        return Err(BundleError::Limit {
            input: input.to_string(),
            limit: LimitExceeded::FileCount {
                limit: limits.max_files,
            },
        });
    }

    let mut problems = Problems::default();
    let mut members = Vec::with_capacity(records.len());
    let mut spans: Vec<(u64, u64, String)> = Vec::with_capacity(records.len());
    for (index, rec) in records.iter().enumerate() {
        let shown = String::from_utf8_lossy(&rec.name).into_owned();
        let Ok(name) = std::str::from_utf8(&rec.name) else {
            problems.push(&shown, ProblemKind::NonUtf8Name);
            continue;
        };
        let path = match validate_rel_path(name) {
            Ok(p) => p,
            Err(kind) => {
                problems.push(&shown, kind);
                continue;
            }
        };
        if rec.flags & 0x0041 != 0 || rec.method == 99 {
            problems.push(&path, ProblemKind::Encrypted);
            continue;
        }
        if rec.method != 0 && rec.method != 8 {
            problems.push(&path, ProblemKind::UnsupportedCompression(rec.method));
            continue;
        }
        let (kind, mode) = match member_kind(rec, name.ends_with('/')) {
            Ok(k) => k,
            Err(kind) => {
                problems.push(&path, kind);
                continue;
            }
        };
        members.push(Member {
            index,
            path,
            kind,
            mode,
            size: 0,
            compressed: 0,
        });
    }
    let entries: Vec<(String, EntryKind)> =
        members.iter().map(|m| (m.path.clone(), m.kind)).collect();
    check_path_set(&entries, &mut problems);
    if !problems.is_empty() {
        return problems.finish(input).map(|_| Tree::default());
    }

    // No duplicates and all names are UTF-8, so the zip crate's (name-keyed) index lines up
    // with the raw records; anything else means it read a different central directory.
    if archive.len() != records.len() {
        return Err(invalid(format!(
            "central directory holds {} records but the end record announces {}",
            records.len(),
            archive.len()
        )));
    }
    for m in &mut members {
        let f = archive
            .by_index_raw(m.index)
            .map_err(|e| invalid(format!("{}: {e}", m.path)))?;
        if f.name_raw() != records[m.index].name.as_slice() {
            return Err(invalid("central directory read inconsistently".into()));
        }
        m.size = f.size();
        m.compressed = f.compressed_size();
        let start = f.header_start();
        if let Err(what) = check_local_header(bytes, start, &records[m.index]) {
            problems.push(&m.path, ProblemKind::HeaderMismatch(what));
            continue;
        }
        let end = f.data_start().saturating_add(m.compressed);
        spans.push((start, end, m.path.clone()));
    }
    spans.sort();
    for pair in spans.windows(2) {
        if pair[1].0 < pair[0].1 {
            problems.push(&pair[1].2, ProblemKind::Overlap);
        }
    }
    if let Some((_, end, path)) = spans.iter().max_by_key(|s| s.1) {
        if *end > cd_start as u64 {
            problems.push(path, ProblemKind::Overlap);
        }
    }
    problems.finish(input)?;

    // Declared sizes first: a bomb that admits its size is refused before any inflation.
    let declared: u64 = members
        .iter()
        .fold(0u64, |acc, m| acc.saturating_add(m.size));
    if declared > limits.max_unpacked_bytes {
        return Err(BundleError::Limit {
            input: input.to_string(),
            limit: LimitExceeded::Unpacked {
                limit: limits.max_unpacked_bytes,
            },
        });
    }
    let bomb = |member: &str, reason: String| BundleError::ZipBomb {
        input: input.to_string(),
        member: member.to_string(),
        reason,
    };
    for m in &members {
        if m.size >= RATIO_FLOOR && m.size / m.compressed.max(1) > limits.max_compression_ratio {
            return Err(bomb(
                &m.path,
                format!(
                    "compression ratio {}:1 is over the limit of {}:1",
                    m.size / m.compressed.max(1),
                    limits.max_compression_ratio
                ),
            ));
        }
    }

    let mut tree = Tree::default();
    let mut total: u64 = 0;
    for m in &members {
        if m.kind == EntryKind::Dir {
            tree.dirs.insert(m.path.clone());
            continue;
        }
        let f = archive
            .by_index(m.index)
            .map_err(|e| invalid(format!("{}: {e}", m.path)))?;
        // Read one byte more than declared: a member that inflates past its declared size is a
        // lie, found after at most `size + 1` bytes however much it would really produce.
        let mut data = Vec::with_capacity(m.size.min(1 << 20) as usize);
        f.take(m.size.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|e| invalid(format!("{}: {e}", m.path)))?;
        let got = data.len() as u64;
        if got > m.size {
            return Err(bomb(
                &m.path,
                format!("declares {} bytes but inflates to more", m.size),
            ));
        }
        if got < m.size {
            return Err(invalid(format!(
                "{}: declares {} bytes but holds {got}",
                m.path, m.size
            )));
        }
        total += got;
        if total > limits.max_unpacked_bytes {
            return Err(BundleError::Limit {
                input: input.to_string(),
                limit: LimitExceeded::Unpacked {
                    limit: limits.max_unpacked_bytes,
                },
            });
        }
        check_text_size(&m.path, &data, limits).map_err(|limit| BundleError::Limit {
            input: input.to_string(),
            limit,
        })?;
        tree.files.insert(
            m.path.clone(),
            BundleFile {
                bytes: data,
                mode: m.mode,
            },
        );
    }
    Ok(tree)
}

/// The local header must name the same member with the same method and encryption as the
/// central directory: tools that trust one or the other must not see different archives.
fn check_local_header(bytes: &[u8], start: u64, rec: &Record) -> Result<(), &'static str> {
    let at = usize::try_from(start).map_err(|_| "offset")?;
    if le32(bytes, at) != Some(LOCAL_SIG) {
        return Err("no local header at the recorded offset");
    }
    let flags = le16(bytes, at + 6).ok_or("truncated")?;
    let method = le16(bytes, at + 8).ok_or("truncated")?;
    let n = le16(bytes, at + 26).ok_or("truncated")? as usize;
    let name = bytes.get(at + 30..at + 30 + n).ok_or("truncated")?;
    if name != rec.name.as_slice() {
        return Err("name");
    }
    if method != rec.method {
        return Err("compression method");
    }
    if (flags ^ rec.flags) & 0x0041 != 0 {
        return Err("encryption flag");
    }
    Ok(())
}
