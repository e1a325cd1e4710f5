//! Errors of bundle loading. Every variant is "bad input": the CLI maps all of them to exit
//! status 2 (docs/bundle.md).

use std::fmt;

/// Why loading a skill failed.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a regular file or directory ({kind})")]
    NotFileOrDir { path: String, kind: &'static str },
    #[error("no SKILL.md found in {0}")]
    MissingSkillMd(String),
    #[error("{path}: malformed SKILL.md: {reason}")]
    MalformedSkillMd { path: String, reason: String },
    #[error("{input}: {limit}")]
    Limit { input: String, limit: LimitExceeded },
    #[error("{input}: zip bomb: {member}: {reason}")]
    ZipBomb {
        input: String,
        member: String,
        reason: String,
    },
    #[error("{input}: not a valid zip archive: {reason}")]
    InvalidZip { input: String, reason: String },
    #[error("{input}: rejected, {}", Problems(.problems, *.omitted))]
    Rejected {
        input: String,
        problems: Vec<Problem>,
        /// Problems found beyond the reported ones (the list is capped).
        omitted: usize,
    },
}

impl BundleError {
    /// The exit status the CLI uses for every bundle error ("bad input").
    pub const EXIT_STATUS: i32 = 2;
}

/// A configured limit that the input exceeds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitExceeded {
    #[error("archive is {actual} bytes, the limit is {limit}")]
    ZipSize { limit: u64, actual: u64 },
    #[error("unpacked content exceeds {limit} bytes")]
    Unpacked { limit: u64 },
    #[error("more than {limit} files")]
    FileCount { limit: usize },
    #[error("text file {path} is {actual} bytes, the limit is {limit}")]
    TextFile {
        path: String,
        limit: u64,
        actual: u64,
    },
    #[error("folder nesting deeper than {limit}")]
    Depth { limit: usize },
}

/// One rejected entry of the input. Rejections are collected and reported together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The entry as named in the input (lossy UTF-8 for display).
    pub path: String,
    pub kind: ProblemKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProblemKind {
    #[error("symbolic link (to {target:?}); links are never followed or copied")]
    Symlink { target: String },
    #[error("special file ({0}); only regular files and directories are accepted")]
    SpecialFile(&'static str),
    #[error("path climbs out with `..`")]
    ParentTraversal,
    #[error("absolute path")]
    Absolute,
    #[error("backslash in a member name (a Windows separator, ambiguous)")]
    Backslash,
    #[error("control character in the name")]
    ControlChar,
    #[error("empty or `.` path component")]
    NonCanonical,
    #[error("name is not valid UTF-8")]
    NonUtf8Name,
    #[error("name too long")]
    NameTooLong,
    #[error("duplicate member")]
    Duplicate,
    #[error("collides with {other:?} on a case- or normalisation-insensitive filesystem")]
    CaseCollision { other: String },
    #[error("is both a file and a directory")]
    FileDirConflict,
    #[error("encrypted member")]
    Encrypted,
    #[error("unsupported compression method {0}")]
    UnsupportedCompression(u16),
    #[error("local header disagrees with the central directory ({0})")]
    HeaderMismatch(&'static str),
    #[error("member data overlaps another member")]
    Overlap,
    #[error("directory entry carries a file type, or file entry a directory type")]
    TypeMismatch,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.kind)
    }
}

/// Display helper: "2 problems: a: …; b: …".
struct Problems<'a>(&'a [Problem], usize);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len() + self.1;
        write!(f, "{n} problem{}: ", if n == 1 { "" } else { "s" })?;
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{p}")?;
        }
        if self.1 > 0 {
            write!(f, "; and {} more", self.1)?;
        }
        Ok(())
    }
}
