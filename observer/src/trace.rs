//! The trace: JSON Lines, a header line then one event per line.
//!
//! This is a versioned contract (docs/trace-format.md). The analyser reads only this, so a recorded
//! trace can be replayed without a sandbox. Fields are added, never renamed, within a version.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::Path;

pub const TRACE_FORMAT: &str = "skill-observer-trace";
pub const TRACE_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("trace i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("trace line {line}: {msg}")]
    Parse { line: usize, msg: String },
    #[error("not a skill-observer trace (header: {0})")]
    BadHeader(String),
    #[error("trace version {0} is not supported (this build reads version {TRACE_VERSION})")]
    Version(u32),
}

/// First line of every trace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TraceHeader {
    pub format: String,
    pub version: u32,
    /// Wall-clock start, RFC 3339 (informational; events use monotonic time).
    pub started_at: String,
    pub run_id: String,
    pub os: String,
    #[serde(default)]
    pub skill: Option<String>,
    /// SHA-256 content digest of the skill bundle (hex).
    #[serde(default)]
    pub skill_digest: Option<String>,
    /// `bundle` or `prompt`.
    #[serde(default)]
    pub fidelity: Option<String>,
    /// Where things are inside the jail, so the analyser can classify paths without the image.
    #[serde(default)]
    pub context: RunContext,
    /// The static view the live run was judged against, so a replay judges the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statics: Option<crate::model::StaticView>,
    /// The drift baseline the live run was judged against (a `BaselineSummary`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<serde_json::Value>,
    /// The agent's plan (a `report::plan::PlanRecord`), so the report shows plan and coverage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<serde_json::Value>,
}

/// The layout of the jail the events refer to (all paths as seen inside the jail).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RunContext {
    pub home: String,
    pub workspace: String,
    /// The skill under test, installed where agents install skills.
    pub skill_dir: String,
    /// Sibling skills and other agents' skill folders.
    #[serde(default)]
    pub other_skill_dirs: Vec<String>,
    /// Agent settings, memory and hook files (`~/.claude/settings.json`, `CLAUDE.md`, …).
    #[serde(default)]
    pub agent_files: Vec<String>,
    #[serde(default)]
    pub temp_dirs: Vec<String>,
    /// Directories on the jail's `PATH`.
    #[serde(default)]
    pub path_dirs: Vec<String>,
    /// Planted credential files: path → credential id.
    #[serde(default)]
    pub credential_files: Vec<CredentialFile>,
    /// Planted credential environment variables: name → credential id.
    #[serde(default)]
    pub credential_env: Vec<CredentialEnv>,
    /// Seed of the planted credentials, so a run can be reproduced.
    #[serde(default)]
    pub creds_seed: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CredentialFile {
    pub path: String,
    pub credential: String,
    /// Hosts of the service this credential legitimately belongs to.
    #[serde(default)]
    pub service_hosts: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CredentialEnv {
    pub name: String,
    pub credential: String,
    #[serde(default)]
    pub service_hosts: Vec<String>,
}

impl TraceHeader {
    pub fn new(run_id: &str, os: &str, skill: Option<String>, started_at: String) -> Self {
        TraceHeader {
            format: TRACE_FORMAT.into(),
            version: TRACE_VERSION,
            started_at,
            run_id: run_id.into(),
            os: os.into(),
            skill,
            skill_digest: None,
            fidelity: None,
            context: RunContext::default(),
            statics: None,
            baseline: None,
            plan: None,
        }
    }
}

/// One event. `pid`/`tid` are host pids of the jailed task (stable for the run); `vpid` is the pid the
/// task sees inside the jail when known. `step` is the agent step the task belongs to.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    pub seq: u64,
    /// Nanoseconds since the run started (monotonic clock).
    pub t_ns: u64,
    pub pid: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ppid: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpid: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The result of a syscall: `ret` is the return value (>= 0) or `-errno`; `err` names the errno.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct SysResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ret: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err: Option<String>,
}

impl SysResult {
    pub fn ok(v: i64) -> Self {
        SysResult {
            ret: Some(v),
            err: None,
        }
    }
    pub fn errno(e: i32) -> Self {
        SysResult {
            ret: Some(-(e as i64)),
            err: Some(errno_name(e).to_string()),
        }
    }
    /// The call went ahead in the kernel and its outcome was not observed.
    pub fn unknown() -> Self {
        SysResult::default()
    }
    pub fn is_ok(&self) -> bool {
        matches!(self.ret, Some(v) if v >= 0)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum FileOp {
    Unlink,
    Rmdir,
    Rename,
    Mkdir,
    Chmod,
    Chown,
    Symlink,
    Link,
    Truncate,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum NetOp {
    Connect,
    Sendto,
    Sendmsg,
    Bind,
    Listen,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// The agent started a step (a script, a command, a hook). The step number is the event's
    /// `step`.
    StepStart { label: String, argv: Vec<String> },
    StepEnd {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        timed_out: bool,
    },
    /// A new task appeared: `parent` made it with fork/clone (`thread` when it shares the address space).
    Spawn {
        parent: i32,
        child: i32,
        thread: bool,
    },
    /// An execve/execveat. `exe` is the program actually running after the call succeeded.
    Exec {
        path: String,
        argv: Vec<String>,
        cwd: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exe: Option<String>,
        result: SysResult,
    },
    Exit {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
    },
    /// A file open. `path` is the path the kernel actually opened (from the resulting fd) when it
    /// succeeded, else the requested path made absolute. `requested` is the raw argument.
    Open {
        path: String,
        requested: String,
        flags: Vec<String>,
        write: bool,
        result: SysResult,
    },
    FileOp {
        op: FileOp,
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path2: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<u32>,
        result: SysResult,
    },
    Net {
        op: NetOp,
        /// `inet`, `inet6`, `unix`, `netlink`, `other`.
        family: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        addr: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
        /// Local port after a successful inet connect, to join with egress `connection` events.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        local_port: Option<u16>,
        result: SysResult,
    },
    /// A syscall the jail refused. `action` is `errno` (denied) or `kill` (process killed).
    Denied {
        syscall: String,
        nr: i64,
        arch: String,
        action: String,
    },
    /// Something the tracer noticed about itself or the skill's attempts to fool it.
    TracerNote { note: String, detail: String },
    /// A budget or limit was hit.
    Limit { what: String, detail: String },
    /// Egress (issue 3).
    DnsQuery {
        name: String,
        qtype: String,
        transport: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
    },
    Connection {
        proto: String,
        dst_addr: String,
        dst_port: u16,
        /// Client source port inside the jail (joins the tracer's `net` connect event).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        src_port: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    HttpRequest {
        method: String,
        url: String,
        host: String,
        #[serde(default)]
        headers: Vec<(String, String)>,
        body_size: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body_sha256: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body_preview: Option<String>,
    },
    TlsHandshake {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sni: Option<String>,
        #[serde(default)]
        alpn: Vec<String>,
        intercepted: bool,
        bytes_out: u64,
        bytes_in: u64,
    },
    Stream {
        proto: String,
        dst_addr: String,
        dst_port: u16,
        bytes_out: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preview: Option<String>,
    },
    CanaryHit {
        canary: String,
        credential: String,
        chain: Vec<String>,
        /// seq of the event the value was found in.
        in_event: u64,
        /// Destination host (name if known, else address).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
        /// Hosts of the service the credential legitimately belongs to.
        #[serde(default)]
        service_hosts: Vec<String>,
    },
    /// What a step printed (stdout and stderr together, in order; bounded per step).
    Output { data: String },
    /// Last event of a run: what the supervisor knows about coverage. Everything the analyser
    /// needs is in the trace, so a replay gives the same report.
    RunEnd {
        duration_ms: u64,
        complete: bool,
        #[serde(default)]
        incomplete_reasons: Vec<String>,
    },
    /// A macOS shim (security, launchctl, …) was used (issue 4).
    Shim { program: String, argv: Vec<String> },
    /// Just before `run_end`: the run's resource limits, how they were enforced, what it used.
    Resources(crate::limits::ResourceReport),
}

/// Writes events as they happen; each line is flushed so a crash loses nothing already seen.
pub struct TraceWriter<W: Write> {
    out: W,
    seq: u64,
}

impl<W: Write> TraceWriter<W> {
    pub fn new(mut out: W, header: &TraceHeader) -> Result<Self, TraceError> {
        serde_json::to_writer(&mut out, header).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
        out.flush()?;
        Ok(TraceWriter { out, seq: 0 })
    }

    /// Assigns the next sequence number and writes the event; returns the seq.
    pub fn write(&mut self, mut ev: Event) -> Result<u64, TraceError> {
        self.seq += 1;
        ev.seq = self.seq;
        serde_json::to_writer(&mut self.out, &ev).map_err(std::io::Error::from)?;
        self.out.write_all(b"\n")?;
        self.out.flush()?;
        Ok(self.seq)
    }

    /// Writes an event already serialized with `"seq":0` as its first field, numbering it without
    /// re-parsing. Lines of another shape are refused. Not flushed: call `flush` when idle.
    pub fn write_raw(&mut self, line: &str) -> Result<u64, TraceError> {
        let rest = line
            .strip_prefix("{\"seq\":0,")
            .ok_or_else(|| TraceError::Parse {
                line: 0,
                msg: "event line does not start with seq 0".into(),
            })?;
        self.seq += 1;
        write!(self.out, "{{\"seq\":{},", self.seq)?;
        self.out.write_all(rest.as_bytes())?;
        self.out.write_all(b"\n")?;
        Ok(self.seq)
    }

    pub fn flush(&mut self) -> Result<(), TraceError> {
        self.out.flush()?;
        Ok(())
    }

    pub fn last_seq(&self) -> u64 {
        self.seq
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// A whole trace in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub header: TraceHeader,
    pub events: Vec<Event>,
}

impl Trace {
    pub fn read<R: BufRead>(r: R) -> Result<Trace, TraceError> {
        let mut lines = r.lines();
        let first = lines
            .next()
            .ok_or_else(|| TraceError::BadHeader("empty file".into()))??;
        let header: TraceHeader =
            serde_json::from_str(&first).map_err(|e| TraceError::BadHeader(format!("{e}")))?;
        if header.format != TRACE_FORMAT {
            return Err(TraceError::BadHeader(header.format));
        }
        if header.version != TRACE_VERSION {
            return Err(TraceError::Version(header.version));
        }
        let mut events = Vec::new();
        for (i, line) in lines.enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let ev: Event = serde_json::from_str(&line).map_err(|e| TraceError::Parse {
                line: i + 2,
                msg: e.to_string(),
            })?;
            events.push(ev);
        }
        Ok(Trace { header, events })
    }

    pub fn read_file(path: &Path) -> Result<Trace, TraceError> {
        let f = std::fs::File::open(path)?;
        Trace::read(std::io::BufReader::new(f))
    }
}

/// Symbolic errno name (the kernel's spelling), for readable traces.
pub fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::ENOEXEC => "ENOEXEC",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ETXTBSY => "ETXTBSY",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::EROFS => "EROFS",
        libc::EMLINK => "EMLINK",
        libc::EPIPE => "EPIPE",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::ELOOP => "ELOOP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETDOWN => "ENETDOWN",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::ECONNRESET => "ECONNRESET",
        libc::EISCONN => "EISCONN",
        libc::ENOTCONN => "ENOTCONN",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::EALREADY => "EALREADY",
        libc::EINPROGRESS => "EINPROGRESS",
        libc::ENOTSOCK => "ENOTSOCK",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EDQUOT => "EDQUOT",
        _ => "EUNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_header_and_events() {
        let h = TraceHeader::new(
            "r1",
            "linux",
            Some("demo".into()),
            "2026-01-01T00:00:00Z".into(),
        );
        let mut w = TraceWriter::new(Vec::new(), &h).unwrap();
        w.write(Event {
            seq: 0,
            t_ns: 5,
            pid: 10,
            tid: None,
            ppid: Some(1),
            vpid: Some(2),
            step: Some(1),
            kind: EventKind::Open {
                path: "/etc/hostname".into(),
                requested: "/etc/hostname".into(),
                flags: vec!["O_RDONLY".into()],
                write: false,
                result: SysResult::ok(3),
            },
        })
        .unwrap();
        w.write(Event {
            seq: 0,
            t_ns: 6,
            pid: 10,
            tid: None,
            ppid: None,
            vpid: None,
            step: None,
            kind: EventKind::Net {
                op: NetOp::Connect,
                family: "inet".into(),
                addr: Some("203.0.113.7".into()),
                port: Some(4444),
                bytes: None,
                local_port: None,
                result: SysResult::errno(libc::ENETUNREACH),
            },
        })
        .unwrap();
        let bytes = w.into_inner();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.lines().nth(1).unwrap().contains("\"kind\":\"open\""));
        let t = Trace::read(&bytes[..]).unwrap();
        assert_eq!(t.header, h);
        assert_eq!(t.events.len(), 2);
        assert_eq!(t.events[1].seq, 2);
        assert_eq!(
            t.events[1].kind,
            match &t.events[1].kind {
                k @ EventKind::Net { .. } => k.clone(),
                _ => panic!(),
            }
        );
    }

    #[test]
    fn rejects_foreign_and_future() {
        assert!(matches!(
            Trace::read(&b"{\"format\":\"x\",\"version\":1,\"started_at\":\"\",\"run_id\":\"\",\"os\":\"\"}\n"[..]),
            Err(TraceError::BadHeader(_))
        ));
        assert!(matches!(
            Trace::read(&b"{\"format\":\"skill-observer-trace\",\"version\":99,\"started_at\":\"\",\"run_id\":\"\",\"os\":\"\"}\n"[..]),
            Err(TraceError::Version(99))
        ));
        assert!(matches!(
            Trace::read(&b""[..]),
            Err(TraceError::BadHeader(_))
        ));
    }
}
