//! What the supervisor tells the jail to build and run. Passed to the jail process as JSON.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FsEntry {
    Dir {
        path: String,
        mode: u32,
        #[serde(default)]
        mtime: Option<i64>,
    },
    File {
        path: String,
        mode: u32,
        #[serde(with = "b64")]
        data: Vec<u8>,
        #[serde(default)]
        mtime: Option<i64>,
    },
    Symlink {
        path: String,
        target: String,
    },
    /// Hides a host entry inside an overlaid directory (an overlayfs whiteout).
    Whiteout {
        path: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepSpec {
    pub label: String,
    pub argv: Vec<String>,
    pub cwd: String,
    pub timeout_ms: u64,
    /// Added to (or replacing in) the run's environment for this step.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Given on stdin (bounded to one pipe buffer); `/dev/null` otherwise.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Added to the wall clock while this step runs (the dated pass), on top of the run's offset.
    #[serde(default)]
    pub clock_offset_ns: i64,
}

impl StepSpec {
    /// A step with no extra environment, no input and the real date.
    pub fn plain(label: String, argv: Vec<String>, cwd: String, timeout_ms: u64) -> Self {
        StepSpec {
            label,
            argv,
            cwd,
            timeout_ms,
            env: Vec::new(),
            stdin: None,
            clock_offset_ns: 0,
        }
    }
}

/// Per-run resource limits the jail applies itself (rlimits and the writable tmpfs size); see
/// `crate::limits` for how they are chosen.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Limits {
    pub nproc: u64,
    pub nofile: u64,
    pub address_space: u64,
    pub file_size: u64,
    /// One tmpfs of this size holds every writable directory (`rw_mounts`).
    pub disk_bytes: u64,
    /// `RLIMIT_CPU` of each process.
    pub cpu_seconds: u64,
}

impl Default for Limits {
    fn default() -> Self {
        crate::limits::ResourceLimits::default().jail_limits(crate::limits::Enforcement::Rlimits)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JailSpec {
    /// CLOCK_MONOTONIC (ns) at run start; event times are relative to it.
    pub t0_ns: u64,
    /// Empty directory on the host where the jail mounts its new root (inside its own mount
    /// namespace; nothing is written there on the host).
    pub staging: String,
    pub hostname: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
    pub env: Vec<(String, String)>,
    /// Host directories bound read-only at the same path (system directories).
    pub ro_binds: Vec<String>,
    /// Files and directories written into the jail's tmpfs root.
    pub entries: Vec<FsEntry>,
    /// Writable directories (landlock read-write; each gets its own size-limited tmpfs).
    pub rw_mounts: Vec<String>,
    pub steps: Vec<StepSpec>,
    pub limits: Limits,
    /// How long background processes may keep running after the last step.
    pub grace_ms: u64,
    /// Extra syscalls to notify (e.g. uname for darwin-sim).
    #[serde(default)]
    pub extra_notify: Vec<i64>,
    /// Host directories mounted as a read-only overlay (host below, the image's entries for that
    /// directory on top) instead of a plain bind, e.g. `/usr` for `/usr/bin/security`.
    #[serde(default)]
    pub overlay_dirs: Vec<String>,
    /// What `uname(2)` answers (darwin-sim); `None` leaves the kernel's answer.
    #[serde(default)]
    pub uname: Option<UnameSpec>,
    /// Programs standing in for platform commands: their execs are also `shim` events.
    #[serde(default)]
    pub shims: Vec<String>,
    /// Files bound read-only over the jail's fresh `/proc` (e.g. `/proc/sys/kernel/ostype` under
    /// darwin-sim), so the kernel's own answer does not contradict the image.
    #[serde(default)]
    pub proc_files: Vec<ProcFile>,
    /// Redirect all egress of the jail's network namespace to listeners handed to the supervisor.
    #[serde(default)]
    pub egress: bool,
    /// False only for benchmarks: the same jail without seccomp notification or ptrace, to
    /// measure what tracing costs.
    #[serde(default = "yes")]
    pub traced: bool,
    /// Real time all steps together may take (ms); each step gets at most an equal share of what
    /// is left (0: no sharing, each step only has its own cap).
    #[serde(default)]
    pub steps_budget_ms: u64,
    /// `--clock-offset`: added to every wall clock the jail reads (ns).
    #[serde(default)]
    pub clock_offset_ns: i64,
    /// Files the jail process writes `0` to first, moving itself (see [`super::Attach`]); set
    /// by `jail::run`, not by the spec's author.
    #[serde(default)]
    pub self_move: Vec<std::path::PathBuf>,
}

fn yes() -> bool {
    true
}

/// One file over `/proc`: `path` is absolute and under `/proc`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcFile {
    pub path: String,
    #[serde(with = "b64")]
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct UnameSpec {
    pub sysname: String,
    pub nodename: String,
    pub release: String,
    pub version: String,
    pub machine: String,
}

mod b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(serde::de::Error::custom)
    }
}
