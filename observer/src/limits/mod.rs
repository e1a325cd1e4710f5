//! Per-run resource limits for a shared host (wall and CPU time, memory, processes, writable
//! space, egress bytes), how they are enforced (a per-run cgroup when the host gives us one,
//! rlimits and tmpfs sizes always), and what the run used. The supervisor's side of a run is a
//! [`RunGuard`]: it places the jail in its cgroup, stops the run when a limit that only it can
//! see is crossed (CPU time, egress bytes) or the run is cancelled, and at the end says which
//! limits were hit. Those decisions are pure functions ([`hits`], [`stop_for`]).

pub mod cgroup;

use crate::jail::{spec::Limits, JailOutcome, Stop, Watch};
use crate::trace::EventKind;
use cgroup::Cgroup;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LimitsError {
    #[error("{0:?} is not a size (a number with an optional K, M or G suffix)")]
    Size(String),
    #[error("{what} must be at least {min}")]
    TooSmall { what: &'static str, min: u64 },
}

/// What one run may use. Defaults suit a host shared by several parallel runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceLimits {
    /// CPU time of all the run's processes together (cgroup), and of each one (`RLIMIT_CPU`).
    pub cpu_time: Duration,
    /// Memory of the whole run (cgroup, tmpfs pages included); without a cgroup each process's
    /// address space (`RLIMIT_AS`).
    pub memory: u64,
    /// Tasks (processes and threads) at once.
    pub pids: u64,
    /// The jail's writable space: one tmpfs shared by `/home`, `/tmp` and `/var/tmp`.
    pub disk: u64,
    /// Bytes the run may send through egress capture before it is stopped.
    pub egress_bytes: u64,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        ResourceLimits {
            cpu_time: Duration::from_secs(120),
            memory: 2 << 30,
            pids: 256,
            disk: 512 << 20,
            egress_bytes: 64 << 20,
        }
    }
}

/// `512M`, `1G`, `64k`, `1048576` (binary units).
pub fn parse_size(s: &str) -> Result<u64, LimitsError> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(LimitsError::Size(s.into())),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| LimitsError::Size(s.into()))
}

/// How the limits are enforced on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    CgroupV2,
    CgroupV1,
    Rlimits,
}

impl Enforcement {
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::CgroupV2 => "cgroup_v2",
            Enforcement::CgroupV1 => "cgroup_v1",
            Enforcement::Rlimits => "rlimits",
        }
    }
}

impl ResourceLimits {
    pub fn validate(&self) -> Result<(), LimitsError> {
        let min = |what, v: u64, min: u64| {
            if v < min {
                Err(LimitsError::TooSmall { what, min })
            } else {
                Ok(())
            }
        };
        min("--memory", self.memory, 32 << 20)?;
        min("--pids", self.pids, 16)?;
        min("--disk", self.disk, 4 << 20)?;
        min("--cpu-time", self.cpu_time.as_secs(), 1)
    }

    /// The jail's rlimits and tmpfs size. With a cgroup the rlimits are backstops set above the
    /// cgroup's values, so the cgroup (which can report a hit) acts first.
    pub fn jail_limits(&self, e: Enforcement) -> Limits {
        let cgroup = e != Enforcement::Rlimits;
        Limits {
            nproc: if cgroup { self.pids * 2 } else { self.pids },
            nofile: 1024,
            // With a cgroup bounding memory, address space is not limited: V8 reserves ~10 GiB of
            // address space per WebAssembly memory (Node's built-in `fetch` uses one), which an
            // address-space limit near the memory limit refuses. Without a cgroup the
            // address-space limit is the only memory bound (and Node's `fetch` fails: docs/
            // threat-model.md).
            address_space: if cgroup { u64::MAX } else { self.memory },
            // Below the writable space, so one huge file is reported as such (`file_size`)
            // rather than only filling the disk.
            file_size: (256u64 << 20).min(self.disk / 2),
            disk_bytes: self.disk,
            cpu_seconds: if cgroup {
                self.cpu_time.as_secs().saturating_mul(2).saturating_add(5)
            } else {
                self.cpu_time.as_secs().max(1)
            },
        }
    }
}

/// The configured limits as the report shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitValues {
    pub wall_ms: u64,
    pub cpu_ms: u64,
    pub memory_bytes: u64,
    pub pids: u64,
    pub disk_bytes: u64,
    pub egress_bytes: u64,
}

/// What the run used. `None`: not measurable on this host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceUse {
    pub wall_ms: u64,
    pub cpu_ms: Option<u64>,
    /// Whole run (cgroup); with rlimits only, the largest single process.
    pub peak_memory_bytes: Option<u64>,
    /// Processes the tracer saw (filled in by the analyser from the trace).
    #[serde(default)]
    pub processes: Option<u64>,
    /// Space in use on the writable tmpfs when the run ended (the image's home files included).
    pub disk_bytes: Option<u64>,
    pub egress_bytes: u64,
    pub egress_connections: u64,
    pub egress_requests: u64,
    pub dns_queries: u64,
}

/// Recorded in the trace (`resources` event) and copied into the report's `run.resources`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceReport {
    pub enforcement: Enforcement,
    pub limits: LimitValues,
    pub used: ResourceUse,
    /// Limits the run reached: `wall_time`, `cpu_time`, `memory`, `pids`, `disk`,
    /// `egress_bytes`.
    pub hit: Vec<String>,
}

/// Counts egress as the capture reports it (shared with the egress threads).
#[derive(Debug, Default)]
pub struct EgressMeter {
    bytes: AtomicU64,
    connections: AtomicU64,
    requests: AtomicU64,
    dns: AtomicU64,
}

/// Bytes an egress event says the jail sent: TLS handshakes and raw streams (also those inside
/// intercepted TLS) by their bytes, HTTP requests (plain or inside intercepted TLS) by request
/// line, headers and body. Each byte is in one event only.
pub fn egress_bytes_of(kind: &EventKind) -> u64 {
    match kind {
        EventKind::TlsHandshake { bytes_out, .. } | EventKind::Stream { bytes_out, .. } => {
            *bytes_out
        }
        EventKind::HttpRequest {
            method,
            url,
            headers,
            body_size,
            ..
        } => {
            let head: usize = headers.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
            (method.len() + url.len() + head) as u64 + body_size
        }
        _ => 0,
    }
}

impl EgressMeter {
    pub fn count(&self, kind: &EventKind) {
        let b = egress_bytes_of(kind);
        if b > 0 {
            self.bytes.fetch_add(b, Ordering::Relaxed);
        }
        let c = match kind {
            EventKind::Connection { .. } => &self.connections,
            EventKind::HttpRequest { .. } => &self.requests,
            EventKind::DnsQuery { .. } => &self.dns,
            _ => return,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// What the supervisor observed at the end of a run, for [`hits`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    pub stopped: Option<String>,
    pub budget_exhausted: bool,
    pub oom_kills: u64,
    pub pids_refused: u64,
    pub disk_used: Option<u64>,
    pub disk_size: Option<u64>,
}

/// The tmpfs is full when less than this is left (a write of a few blocks would fail).
fn disk_full(used: u64, size: u64) -> bool {
    size.saturating_sub(used) < (size / 64).max(256 << 10)
}

/// Which limits a run reached, each with its incomplete reason.
pub fn hits(l: &ResourceLimits, o: &Observed) -> Vec<(&'static str, String)> {
    let mut h = Vec::new();
    if o.budget_exhausted {
        // The budget's own reason and `limit` event are written by the run.
        h.push(("wall_time", String::new()));
    }
    match o.stopped.as_deref() {
        Some("cpu_time") => h.push((
            "cpu_time",
            format!(
                "limit: CPU time of {} s used up; every process of the jail was killed",
                l.cpu_time.as_secs()
            ),
        )),
        Some("egress_bytes") => h.push((
            "egress_bytes",
            format!(
                "limit: egress of {} bytes exceeded; every process of the jail was killed",
                l.egress_bytes
            ),
        )),
        _ => {}
    }
    if o.oom_kills > 0 {
        h.push((
            "memory",
            format!(
                "limit: memory of {} bytes reached; the kernel killed {} process(es)",
                l.memory, o.oom_kills
            ),
        ));
    }
    if o.pids_refused > 0 {
        h.push((
            "pids",
            format!(
                "limit: {} tasks reached; {} fork(s) refused",
                l.pids, o.pids_refused
            ),
        ));
    }
    if let (Some(u), Some(s)) = (o.disk_used, o.disk_size) {
        if disk_full(u, s) {
            h.push((
                "disk",
                format!("limit: writable space of {s} bytes full ({u} bytes in use)"),
            ));
        }
    }
    h
}

/// Why the supervisor must stop a run now, if it must.
pub fn stop_for(
    l: &ResourceLimits,
    cancelled: Option<&str>,
    cpu_ns: Option<u64>,
    egress_bytes: u64,
) -> Option<Stop> {
    if let Some(sig) = cancelled {
        return Some(Stop {
            what: crate::cancel::REASON.into(),
            detail: format!("{sig} received; every process of the jail was killed"),
        });
    }
    if cpu_ns.is_some_and(|ns| ns > l.cpu_time.as_nanos() as u64) {
        return Some(Stop {
            what: "cpu_time".into(),
            detail: format!("CPU time of {} s used up", l.cpu_time.as_secs()),
        });
    }
    if egress_bytes > l.egress_bytes {
        return Some(Stop {
            what: "egress_bytes".into(),
            detail: format!(
                "{egress_bytes} bytes sent through egress capture, over the limit of {}",
                l.egress_bytes
            ),
        });
    }
    None
}

fn children_usage() -> (u64, u64) {
    // SAFETY: getrusage fills the struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    (
        ns(ru.ru_utime) + ns(ru.ru_stime),
        ru.ru_maxrss as u64 * 1024,
    )
}

/// How a run started now would enforce its limits, and why (for `observe doctor`).
pub fn probe() -> (Enforcement, String) {
    let l = ResourceLimits::default();
    match Cgroup::create(l.memory, l.pids) {
        Ok(c) => {
            let e = match c.version {
                cgroup::Version::V2 => Enforcement::CgroupV2,
                cgroup::Version::V1 => Enforcement::CgroupV1,
            };
            c.remove();
            (
                e,
                "a per-run cgroup limits memory, processes and CPU time".into(),
            )
        }
        Err(e) => (
            Enforcement::Rlimits,
            format!("rlimits and the tmpfs size only ({e})"),
        ),
    }
}

/// The supervisor's side of one run's limits.
pub struct RunGuard {
    limits: ResourceLimits,
    cgroup: Option<Cgroup>,
    meter: Arc<EgressMeter>,
    cpu0: u64,
}

/// What [`RunGuard::finish`] hands back to the run.
pub struct Finished {
    pub report: ResourceReport,
    /// `limit` events to record (what, detail).
    pub events: Vec<(String, String)>,
    pub reasons: Vec<String>,
}

impl RunGuard {
    /// Makes the run's cgroup when the host allows it (rlimits only otherwise).
    pub fn new(limits: ResourceLimits) -> RunGuard {
        let cgroup = match Cgroup::create(limits.memory, limits.pids) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::debug!("limits use rlimits and tmpfs sizes: {e}");
                None
            }
        };
        RunGuard {
            limits,
            cgroup,
            meter: Arc::default(),
            cpu0: children_usage().0,
        }
    }

    pub fn enforcement(&self) -> Enforcement {
        match self.cgroup.as_ref().map(|c| c.version) {
            Some(cgroup::Version::V2) => Enforcement::CgroupV2,
            Some(cgroup::Version::V1) => Enforcement::CgroupV1,
            None => Enforcement::Rlimits,
        }
    }

    pub fn limits(&self) -> &ResourceLimits {
        &self.limits
    }

    pub fn meter(&self) -> Arc<EgressMeter> {
        self.meter.clone()
    }

    /// Ends the run's accounting: what it used, which limits it hit. Removes the cgroup.
    pub fn finish(self, outcome: &JailOutcome, wall: Duration, timeout: Duration) -> Finished {
        let cg = self.cgroup.as_ref().map(Cgroup::usage).unwrap_or_default();
        if let Some(c) = &self.cgroup {
            c.remove();
        }
        let (cpu1, maxrss) = children_usage();
        let info = |k: &str| {
            outcome
                .info
                .iter()
                .find(|(key, _)| key == k)
                .and_then(|(_, v)| v.parse::<u64>().ok())
        };
        let observed = Observed {
            stopped: outcome.stopped.as_ref().map(|s| s.what.clone()),
            budget_exhausted: outcome.budget_exhausted,
            oom_kills: cg.oom_kills,
            pids_refused: cg.pids_refused,
            disk_used: info("disk_used"),
            disk_size: info("disk_size"),
        };
        let hit = hits(&self.limits, &observed);
        let mut events = Vec::new();
        let mut reasons = Vec::new();
        if let Some(s) = &outcome.stopped {
            events.push((s.what.clone(), s.detail.clone()));
            if s.what == crate::cancel::REASON {
                reasons.push(crate::cancel::REASON.to_string());
            }
        }
        for (what, reason) in &hit {
            if reason.is_empty() {
                continue;
            }
            // A stop already has its event.
            if outcome.stopped.as_ref().map(|s| s.what.as_str()) != Some(*what) {
                events.push((what.to_string(), reason.clone()));
            }
            reasons.push(reason.clone());
        }
        let l = &self.limits;
        let report = ResourceReport {
            enforcement: self.enforcement(),
            limits: LimitValues {
                wall_ms: timeout.as_millis() as u64,
                cpu_ms: l.cpu_time.as_millis() as u64,
                memory_bytes: l.memory,
                pids: l.pids,
                disk_bytes: l.disk,
                egress_bytes: l.egress_bytes,
            },
            used: ResourceUse {
                wall_ms: wall.as_millis() as u64,
                cpu_ms: Some(cg.cpu_ns.unwrap_or(cpu1.saturating_sub(self.cpu0)) / 1_000_000),
                peak_memory_bytes: cg.peak_memory.or(Some(maxrss).filter(|m| *m > 0)),
                processes: None,
                disk_bytes: observed.disk_used,
                egress_bytes: self.meter.bytes(),
                egress_connections: self.meter.connections.load(Ordering::Relaxed),
                egress_requests: self.meter.requests.load(Ordering::Relaxed),
                dns_queries: self.meter.dns.load(Ordering::Relaxed),
            },
            hit: hit.iter().map(|(w, _)| w.to_string()).collect(),
        };
        Finished {
            report,
            events,
            reasons,
        }
    }
}

impl Watch for RunGuard {
    fn attach(&self) -> Option<crate::jail::Attach> {
        let c = self.cgroup.clone()?;
        if let Some(files) = c.self_move_files(crate::jail::outer_ids()) {
            return Some(crate::jail::Attach::SelfMove(files));
        }
        Some(crate::jail::Attach::Thread(Box::new(move |pid| {
            c.add(pid).map_err(|e| e.to_string())
        })))
    }

    fn poll(&mut self) -> Option<Stop> {
        let cpu = self.cgroup.as_ref().and_then(|c| c.usage().cpu_ns);
        stop_for(
            &self.limits,
            crate::cancel::requested(),
            cpu,
            self.meter.bytes(),
        )
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        // `finish` removes it too; this covers a run that failed before finishing.
        if let Some(c) = &self.cgroup {
            c.remove();
        }
    }
}

#[cfg(test)]
mod tests;
