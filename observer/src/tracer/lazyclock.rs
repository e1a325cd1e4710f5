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
        let mut switched = 0;
        for tgid in leaders {
            match self.switch_process(tgid, &parked, false) {
                Ok(true) => switched += 1,
                Ok(false) => {}
                Err(e) => self.clock_unvirtualized(tgid, &e),
            }
        }
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
        if let Err(e) = self.switch_process(pid, &HashSet::new(), true) {
            self.clock_unvirtualized(pid, &e);
        }
    }

    /// Writes the stubs into one process. `stopped`: the process is a single task already in a
    /// ptrace stop. Returns whether anything was written.
    fn switch_process(
        &mut self,
        tgid: i32,
        parked: &HashSet<i32>,
        stopped: bool,
    ) -> Result<bool, SwitchError> {
        let proc_fd = self.host_proc.as_raw_fd();
        let Ok(maps) = sys::read_at(proc_fd, &format!("{tgid}/maps")) else {
            return Ok(false); // gone
        };
        let Some(range) = vdso::vdso_range(&String::from_utf8_lossy(&maps)) else {
            return Ok(false); // no vDSO mapped (or unmapped by the program): nothing reads it
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
        let plan = self.time.lazy.plan.clone();
        match vdso::state(&img, &self.time.lazy.original, &plan) {
            vdso::State::Patched => return Ok(false),
            vdso::State::Foreign => return Err(SwitchError::Foreign),
            vdso::State::Original => {}
        }
        let windows = vdso::windows(range.start, &plan);
        let mut stops: Vec<(i32, i32)> = Vec::new();
        let result = (|| {
            if !stopped {
                self.stop_threads(tgid, parked, &windows, &mut stops)?;
            }
            for p in &plan {
                mem.write_all_at(&p.stub, range.start + p.off)?;
            }
            Ok(true)
        })();
        // The stops taken here are handled as if the main loop had reaped them.
        self.deferred_stops.extend(stops);
        result
    }

    /// Stops every thread of `tgid` that is not parked, and moves any thread caught inside an
    /// entry window past it. Stops reaped on the way (ours and others') land in `stops`.
    fn stop_threads(
        &mut self,
        tgid: i32,
        parked: &HashSet<i32>,
        windows: &[std::ops::Range<u64>],
        stops: &mut Vec<(i32, i32)>,
    ) -> Result<(), SwitchError> {
        let proc_fd = self.host_proc.as_raw_fd();
        let dir = sys::open_at(
            proc_fd,
            &format!("{tgid}/task"),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )?;
        let mut dir = nix::dir::Dir::from_fd(std::os::fd::IntoRawFd::into_raw_fd(dir))
            .map_err(std::io::Error::from)?;
        let tids: Vec<i32> = dir
            .iter()
            .filter_map(|e| e.ok()?.file_name().to_str().ok()?.parse().ok())
            .filter(|t| !parked.contains(t))
            .collect();
        let mut waiting: HashSet<i32> = HashSet::new();
        for &tid in &tids {
            // SAFETY: PTRACE_INTERRUPT on our own tracee; ESRCH (gone) is fine.
            if unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) } == 0 {
                waiting.insert(tid);
            }
        }
        let mut mine: Vec<(i32, i32)> = Vec::new();
        let deadline = sys::monotonic_ns() + STOP_WAIT_NS;
        while !waiting.is_empty() && sys::monotonic_ns() < deadline {
            let mut st = 0;
            // SAFETY: st is a valid out-pointer.
            let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG | libc::__WALL) };
            if pid > 0 {
                if waiting.remove(&pid) {
                    mine.push((pid, st));
                } else {
                    stops.push((pid, st));
                }
                continue;
            }
            if pid < 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        // A thread that did not stop is blocked in the kernel (a running or runnable one stops
        // within microseconds): its user-mode address is a syscall's return, unless proven not.
        let mut unsafe_tid = None;
        for &tid in &waiting {
            let text = sys::read_at(proc_fd, &format!("{tgid}/task/{tid}/syscall"))
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            if !vdso::blocked_in_syscall(&text) && !text.is_empty() {
                unsafe_tid = Some(tid);
            }
        }
        for (tid, st) in &mut mine {
            if libc::WIFSTOPPED(*st) && !step_out_of(*tid, st, windows) {
                unsafe_tid = Some(*tid);
            }
        }
        stops.extend(mine);
        match unsafe_tid {
            Some(t) => Err(SwitchError::Unsafe(t)),
            None => Ok(()),
        }
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
