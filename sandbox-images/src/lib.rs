//! Sandbox images: a believable Linux or macOS user home, workspace and identity, described as data
//! under `images/` and materialised per run with that run's planted credentials.
//!
//! The jail writes [`Materialized::entries`] into its tmpfs root, exports [`Materialized::env`], sets
//! the hostname and uid, and answers `uname` from [`Materialized::uname`]. The trace header's
//! `RunContext` is filled from [`Materialized::context`], field for field.
//!
//! ```no_run
//! use sandbox_images::{materialize, ImageSpec};
//! use planted_creds::Seed;
//! let image = ImageSpec::builtin("darwin-sim").unwrap();
//! let skill = vec![("SKILL.md".to_string(), b"---\nname: demo\n---\n".to_vec(), 0o644)];
//! let m = materialize(&image, "demo", &skill, &Seed::random().unwrap()).unwrap();
//! println!("{} entries for {}@{}", m.entries.len(), m.user, m.hostname);
//! ```

mod documents;
mod git;
mod materialize;
mod project;
mod render;
pub mod spec;
mod system;
pub mod template;
mod tree;

pub use materialize::{materialize, materialize_at, ImageError};
pub use spec::{ImageSpec, Os, Source, SpecError};

use planted_creds::Registry;
use serde::{Deserialize, Serialize};

/// Something to create inside the jail. Paths are absolute jail paths; parents always come first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir {
        path: String,
        mode: u32,
        /// Modification time (Unix seconds) to set with `utimensat`.
        mtime: i64,
    },
    File {
        path: String,
        bytes: Vec<u8>,
        mode: u32,
        mtime: i64,
    },
    Symlink {
        path: String,
        target: String,
    },
}

impl Entry {
    pub fn path(&self) -> &str {
        match self {
            Entry::Dir { path, .. } | Entry::File { path, .. } | Entry::Symlink { path, .. } => {
                path
            }
        }
    }
}

/// What the emulated `uname(2)` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uname {
    pub sysname: String,
    pub nodename: String,
    pub release: String,
    pub version: String,
    pub machine: String,
}

/// A planted credential file (one row per credential in the file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialFile {
    pub path: String,
    pub credential: String,
    pub service_hosts: Vec<String>,
}

/// A planted credential environment variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialEnv {
    pub name: String,
    pub credential: String,
    pub service_hosts: Vec<String>,
}

/// Mirrors `observer::trace::RunContext` field for field (this crate does not depend on observer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ImageContext {
    pub home: String,
    pub workspace: String,
    pub skill_dir: String,
    pub other_skill_dirs: Vec<String>,
    pub agent_files: Vec<String>,
    pub temp_dirs: Vec<String>,
    pub path_dirs: Vec<String>,
    pub credential_files: Vec<CredentialFile>,
    pub credential_env: Vec<CredentialEnv>,
    pub creds_seed: Option<String>,
}

/// One run's image, ready for the jail.
#[derive(Debug, Clone, PartialEq)]
pub struct Materialized {
    pub image: String,
    pub os: Os,
    pub user: String,
    pub full_name: String,
    pub uid: u32,
    pub gid: u32,
    pub group: String,
    pub home: String,
    pub workspace: String,
    pub skill_dir: String,
    pub hostname: String,
    pub shell: String,
    /// The whole environment of the skill's processes, in order.
    pub env: Vec<(String, String)>,
    pub entries: Vec<Entry>,
    pub path_dirs: Vec<String>,
    pub uname: Option<Uname>,
    pub registry: Registry,
    pub context: ImageContext,
    /// Executables standing in for platform commands (`/usr/bin/security`, …): an exec of one of
    /// these paths is a `shim` trace event.
    pub commands: Vec<String>,
    /// Entries inside directories the jail binds from the host (`/etc/passwd`, `/usr/bin/security`):
    /// the jail must overlay them.
    pub system_overrides: Vec<String>,
    /// Directories the jail binds read-only from the host (from the image).
    pub host_dirs: Vec<String>,
    pub seed: String,
    /// The time everything was dated against (Unix seconds).
    pub now: i64,
}

impl Materialized {
    pub fn entry(&self, path: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.path() == path)
    }

    pub fn file(&self, path: &str) -> Option<&[u8]> {
        match self.entry(path)? {
            Entry::File { bytes, .. } => Some(bytes),
            _ => None,
        }
    }

    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}
