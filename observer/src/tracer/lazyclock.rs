//! Switching the jail's clock reads from the vDSO to the tracer, once they need to be virtual.
//!
//! Until the virtual clock first departs from real time, processes read the clock through the
//! kernel's vDSO (no notification; CPython's start-up alone makes thousands of reads). On the
//! first departure (a skipped sleep or wait, a date offset, or a process spinning on the CPU as
//! a `while time() < deadline` loop does) every live process's vDSO clock entries are replaced
//! with syscall stubs (vdso.rs), and programs exec'd later get no vDSO at all (ptrace.rs). The
//! stubs are written with the process's threads stopped, and no thread is resumed in the middle
//! of an entry it had started to run.

use super::{vdso, Tracer};
use crate::jail::sys;
use crate::trace::EventKind;
use std::collections::HashSet;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

/// A process that has used this much CPU while the clock is still real may be spinning on it.
const SPIN_CPU_NS: u64 = 1_000_000_000;
/// How often the tracer looks for such a process.
const SPIN_CHECK_EVERY_NS: u64 = 250_000_000;
/// How long threads get to reach a ptrace stop before the patch goes ahead without them (a
/// thread that does not stop is blocked in the kernel; that is checked).
const STOP_WAIT_NS: u64 = 100_000_000;

/// The clock-switching state of a run.
#[derive(Debug, Default)]
pub(super) struct LazyClock {
    /// Reads go to the tracer: every live process is patched, new programs get no vDSO.
    pub virtual_reads: bool,
    /// This tracer's own vDSO: the kernel's code, to tell a jailed image apart from a rewritten one.
    pub original: Vec<u8>,
    pub plan: Vec<vdso::Patch>,
    pub next_spin_check_ns: u64,
}

impl LazyClock {
    /// Lazy only when our own vDSO can be planned; otherwise every program starts without one.
    pub fn new(eager: bool) -> Self {
        let own = (|| -> Result<(Vec<u8>, Vec<vdso::Patch>), String> {
            let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| e.to_string())?;
            let r = vdso::vdso_range(&maps).ok_or("no [vdso] mapping")?;
            let f = std::fs::File::open("/proc/self/mem").map_err(|e| e.to_string())?;
            let mut img = vec![0u8; (r.end - r.start) as usize];
            f.read_exact_at(&mut img, r.start)
                .map_err(|e| e.to_string())?;
            let plan = vdso::plan(&img).map_err(|e| e.to_string())?;
            Ok((img, plan))
        })();
        match own {
            Ok((original, plan)) => LazyClock {
                virtual_reads: eager,
                original,
                plan,
                next_spin_check_ns: 0,
            },
            Err(e) => {
                tracing::debug!(error = %e, "vDSO not patchable: clock reads virtual from the start");
                LazyClock {
                    virtual_reads: true,
                    ..Default::default()
                }
            }
        }
    }
}

/// Why one process could not be switched.
#[derive(Debug, thiserror::Error)]
pub(super) enum SwitchError {
    #[error("reading its memory: {0}")]
    Mem(#[from] std::io::Error),
    #[error("its vDSO entries are neither the kernel's code nor ours (rewritten by the process)")]
    Foreign,
    #[error("thread {0} could not be stopped outside a clock entry")]
    Unsafe(i32),
}

/// A process whose vDSO still holds the kernel's clock code.
struct Unpatched {
    tgid: i32,
    base: u64,
    mem: std::fs::File,
    /// Its threads that were asked to stop.
    tids: Vec<i32>,
}

/// A stopped thread: its process, its id, its wait status.
type Stopped = (i32, i32, i32);

impl Tracer {
    /// From now on every clock read of the jail reaches the tracer. `parked`: tasks known to be
    /// blocked in the kernel waiting on the tracer (not to be stopped: they could not stop).
    pub(super) fn virtualize_clock_reads(&mut self, why: &str, parked: &[i32]) {
        if self.time.lazy.virtual_reads {
            return;
        }
        self.time.lazy.virtual_reads = true;
        let mut parked: HashSet<i32> = parked.iter().copied().collect();
        parked.extend(self.time.held.iter().map(|h| h.tid));
        parked.extend(self.time.waits.keys().copied());
        let mut leaders: Vec<i32> = self
            .tasks
            .iter()
            .filter(|(&p, t)| t.tgid == p && p != self.init_pid)
            .map(|(&p, _)| p)
            .collect();
        leaders.sort_unstable();
        let mut procs = Vec::new();
        for tgid in leaders {
            match self.unpatched(tgid) {
                Ok(Some(mut u)) => {
                    u.tids = self.threads_of(tgid, &parked);
                    procs.push(u);
                }
                Ok(None) => {}
                Err(e) => self.clock_unvirtualized(tgid, &e),
            }
        }
        // Every thread of every process is stopped at once, under one deadline for the whole
        // jail: a thousand processes with a thread that cannot stop cost 100 ms, not 100 s.
        let mut others = Vec::new();
        let (mut mine, late) = stop_all(&procs, &mut others);
        let plan = self.time.lazy.plan.clone();
        let mut switched = 0;
        for u in &procs {
            let windows = vdso::windows(u.base, &plan);
            let checked = self.check_threads(u, &windows, &mut mine, &late);
            let written = checked.and_then(|()| {
                for p in &plan {
                    u.mem.write_all_at(&p.stub, u.base + p.off)?;
                }
                Ok(())
            });
            match written {
                Ok(()) => switched += 1,
                Err(e) => self.clock_unvirtualized(u.tgid, &e),
            }
        }
        // The stops taken here are handled as if the main loop had reaped them.
        self.deferred_stops.extend(others);
        self.deferred_stops
            .extend(mine.into_iter().map(|(_, tid, st)| (tid, st)));
        self.emit(
            self.init_pid,
            EventKind::TracerNote {
                note: "virtual_clock".into(),
                detail: format!(
                    "{why}: clock reads go through the tracer from here; {switched} running \
                     process(es) switched from the vDSO"
                ),
            },
        );
    }

    fn clock_unvirtualized(&mut self, tgid: i32, e: &SwitchError) {
        self.emit(
            tgid,
            EventKind::TracerNote {
                note: "clock_unvirtualized".into(),
                detail: format!("this process keeps reading the real clock: {e}"),
            },
        );
    }

    /// A process seen for the first time after the switch, still stopped at its first ptrace
    /// stop (a fork racing with the switch): patched if its parent's copy was not.
    pub(super) fn switch_new_process(&mut self, pid: i32) {
        if !self.time.lazy.virtual_reads || self.time.lazy.plan.is_empty() || pid == self.init_pid {
            return;
        }
        let r = self.unpatched(pid).and_then(|u| {
            if let Some(u) = u {
                for p in &self.time.lazy.plan {
                    u.mem.write_all_at(&p.stub, u.base + p.off)?;
                }
            }
            Ok(())
        });
        if let Err(e) = r {
            self.clock_unvirtualized(pid, &e);
        }
    }

    /// The process's vDSO, opened for writing, if it still holds the kernel's clock code.
    fn unpatched(&self, tgid: i32) -> Result<Option<Unpatched>, SwitchError> {
        let proc_fd = self.host_proc.as_raw_fd();
        let Ok(maps) = sys::read_at(proc_fd, &format!("{tgid}/maps")) else {
            return Ok(None); // gone
        };
        let Some(range) = vdso::vdso_range(&String::from_utf8_lossy(&maps)) else {
            return Ok(None); // no vDSO mapped (or unmapped by the program): nothing reads it
        };
        let mem = std::fs::File::from(sys::inspect(|| {
            sys::open_at(
                proc_fd,
                &format!("{tgid}/mem"),
                libc::O_RDWR | libc::O_CLOEXEC,
            )
        })?);
        let mut img = vec![0u8; (range.end - range.start) as usize];
        mem.read_exact_at(&mut img, range.start)?;
        match vdso::state(&img, &self.time.lazy.original, &self.time.lazy.plan) {
            vdso::State::Patched => Ok(None),
            vdso::State::Foreign => Err(SwitchError::Foreign),
            vdso::State::Original => Ok(Some(Unpatched {
                tgid,
                base: range.start,
                mem,
                tids: Vec::new(),
            })),
        }
    }

    /// The threads of `tgid` that are not parked.
    fn threads_of(&self, tgid: i32, parked: &HashSet<i32>) -> Vec<i32> {
        let dir = sys::open_at(
            self.host_proc.as_raw_fd(),
            &format!("{tgid}/task"),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        let Ok(mut dir) = dir.and_then(|d| {
            nix::dir::Dir::from_fd(std::os::fd::IntoRawFd::into_raw_fd(d))
                .map_err(std::io::Error::from)
        }) else {
            return Vec::new();
        };
        dir.iter()
            .filter_map(|e| e.ok()?.file_name().to_str().ok()?.parse().ok())
            .filter(|t| !parked.contains(t))
            .collect()
    }

    /// Whether the stubs can be written under `u`'s threads: each stopped one is outside the
    /// entry windows (single-stepped out if need be), each one that did not stop is blocked in
    /// a system call.
    fn check_threads(
        &self,
        u: &Unpatched,
        windows: &[std::ops::Range<u64>],
        mine: &mut [Stopped],
        late: &[(i32, i32)],
    ) -> Result<(), SwitchError> {
        for &(_, tid) in late.iter().filter(|(g, _)| *g == u.tgid) {
            let text = sys::read_at(
                self.host_proc.as_raw_fd(),
                &format!("{}/task/{tid}/syscall", u.tgid),
            )
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
            // Empty: the thread is gone.
            if !text.is_empty() && !vdso::blocked_in_syscall(&text) {
                return Err(SwitchError::Unsafe(tid));
            }
        }
        for (_, tid, st) in mine.iter_mut().filter(|(g, _, _)| *g == u.tgid) {
            if libc::WIFSTOPPED(*st) && !step_out_of(*tid, st, windows) {
                return Err(SwitchError::Unsafe(*tid));
            }
        }
        Ok(())
    }

    /// Notices a process spinning while the clock is real (a busy-wait on a deadline never
    /// sleeps, so nothing else would switch the clock and the wait would take real time).
    pub(super) fn watch_for_spinning(&mut self) {
        if self.time.lazy.virtual_reads {
            return;
        }
        let now = sys::monotonic_ns();
        if now < self.time.lazy.next_spin_check_ns {
            return;
        }
        self.time.lazy.next_spin_check_ns = now + SPIN_CHECK_EVERY_NS;
        // SAFETY: sysconf has no memory effects.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        let proc_fd = self.host_proc.as_raw_fd();
        let spinner = self
            .tasks
            .iter()
            .filter(|(&p, t)| t.tgid == p && p != self.init_pid)
            .map(|(&p, _)| p)
            .find(|p| {
                sys::read_at(proc_fd, &format!("{p}/stat"))
                    .ok()
                    .and_then(|b| vdso::cpu_ticks(&String::from_utf8_lossy(&b)))
                    .is_some_and(|t| t.saturating_mul(1_000_000_000 / hz) >= SPIN_CPU_NS)
            });
        if let Some(p) = spinner {
            self.virtualize_clock_reads(&format!("process {p} spun for a second"), &[]);
        }
    }
}

/// Interrupts every listed thread and collects their stops until all have stopped or the
/// deadline passes. Returns the stops of listed threads and the threads that did not stop;
/// stops of other tasks reaped meanwhile go to `others`.
fn stop_all(procs: &[Unpatched], others: &mut Vec<(i32, i32)>) -> (Vec<Stopped>, Vec<(i32, i32)>) {
    let mut waiting: std::collections::HashMap<i32, i32> = std::collections::HashMap::new();
    for u in procs {
        for &tid in &u.tids {
            // SAFETY: PTRACE_INTERRUPT on our own tracee; ESRCH (gone) is fine.
            if unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) } == 0 {
                waiting.insert(tid, u.tgid);
            }
        }
    }
    let mut mine = Vec::new();
    let deadline = sys::monotonic_ns() + STOP_WAIT_NS;
    while !waiting.is_empty() && sys::monotonic_ns() < deadline {
        let mut st = 0;
        // SAFETY: st is a valid out-pointer.
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG | libc::__WALL) };
        if pid > 0 {
            match waiting.remove(&pid) {
                Some(tgid) => mine.push((tgid, pid, st)),
                None => others.push((pid, st)),
            }
            continue;
        }
        if pid < 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
    let late = waiting.into_iter().map(|(tid, tgid)| (tgid, tid)).collect();
    (mine, late)
}

/// Single-steps a stopped thread out of an entry window (at most a few instructions: a
/// function prologue). Only from stops a single-step may resume: our interrupt and signal
/// delivery; a thread in a group-stop or a syscall stop is never inside an entry.
/// A thread that exits while stepping leaves its exit status in `st`.
fn step_out_of(tid: i32, st: &mut i32, windows: &[std::ops::Range<u64>]) -> bool {
    let ev = (*st >> 16) & 0xff;
    let sig = libc::WSTOPSIG(*st);
    let group_stop = ev == libc::PTRACE_EVENT_STOP
        && matches!(
            sig,
            libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
        );
    for _ in 0..16 {
        let Some(r) = super::ptrace::regs(tid) else {
            return true; // gone
        };
        if !vdso::in_window(r.rip, windows) {
            return true;
        }
        if group_stop || (ev != 0 && ev != libc::PTRACE_EVENT_STOP) {
            return false;
        }
        // SAFETY: single-stepping our own stopped tracee.
        unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, tid, 0, 0) };
        let mut s = 0;
        // SAFETY: s is a valid out-pointer.
        if unsafe { libc::waitpid(tid, &mut s, libc::__WALL) } != tid {
            return false;
        }
        if !libc::WIFSTOPPED(s) {
            *st = s;
            return true;
        }
    }
    false
}
