//! Switching the jail's clock reads from the vDSO to the tracer, once they need to be virtual.
//!
//! Until the virtual clock first departs from real time, processes read the clock through the
//! kernel's vDSO (no notification; CPython's start-up alone makes thousands of reads). On the
//! first departure (a skipped sleep or wait, a date offset, a busy-wait seen by the tracer, or
//! a process spinning on the CPU as a `while time() < deadline` loop does) every live process's
//! vDSO clock entries are replaced with syscall stubs (vdso.rs); programs exec'd later get the
//! stubs too and no vDSO in their auxiliary vector (ptrace.rs). The stubs are written with all
//! threads of all processes stopped, after every check has passed (processes may share memory),
//! and no thread is resumed in the middle of an entry it had started to run.

use super::{vdso, Tracer};
use crate::jail::sys;
use crate::trace::EventKind;
use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

/// A process that has used this much CPU while the clock is still real may be spinning on it.
const SPIN_CPU_NS: u64 = 1_000_000_000;
/// How often the tracer looks for such a process.
const SPIN_CHECK_EVERY_NS: u64 = 250_000_000;
/// How long threads get to reach a ptrace stop. One that does not is blocked in the kernel; it
/// cannot run a user instruction before stopping, so where it will resume is checked instead.
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
    /// Processes that could not be switched; their forks cannot be either.
    pub failed: HashSet<i32>,
}

impl LazyClock {
    /// Lazy only when our own vDSO can be planned; otherwise every program starts without one.
    pub fn new(eager: bool) -> Self {
        let own = (|| -> Result<(Vec<u8>, Vec<vdso::Patch>), String> {
            let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| e.to_string())?;
            let r = vdso::vdso_range(&maps)
                .map_err(|e| e.to_string())?
                .ok_or("no [vdso] mapping")?;
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
                ..Default::default()
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
    #[error("{0}: {1}")]
    Io(&'static str, io::Error),
    #[error("its memory map: {0}")]
    Map(#[from] vdso::VdsoError),
    #[error("its vDSO entries are neither the kernel's code nor ours (rewritten by the process)")]
    Foreign,
    #[error("thread {0} could not be stopped outside a clock entry")]
    Unsafe(i32),
    #[error("it shares its memory with process {0}, which could not be switched")]
    SharesWith(i32),
    #[error("its parent could not be switched")]
    Parent,
}

/// The process or thread no longer exists (or has no memory left to patch).
fn gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH))
        || matches!(
            e.kind(),
            io::ErrorKind::UnexpectedEof | io::ErrorKind::WriteZero
        )
}

/// Whether two processes share one address space (`CLONE_VM`).
fn same_vm(a: i32, b: i32) -> bool {
    const KCMP_VM: libc::c_long = 1;
    sys::inspect(|| {
        // SAFETY: plain syscall with integer arguments.
        sys::cvt(unsafe { libc::syscall(libc::SYS_kcmp, a, b, KCMP_VM, 0, 0) })
    })
    .is_ok_and(|r| r == 0)
}

/// A process whose vDSO still holds the kernel's clock code.
struct Unpatched {
    tgid: i32,
    base: u64,
    /// Its threads that were asked to stop.
    tids: Vec<i32>,
}

impl Tracer {
    fn read_proc(&self, path: &str) -> io::Result<Vec<u8>> {
        sys::inspect(|| sys::read_at(self.host_proc.as_raw_fd(), path))
    }

    /// Tasks blocked in the kernel waiting on the tracer, not to be stopped: `explicit` (in a
    /// ptrace stop or a notification being answered), held sleeps whose notification is still
    /// pending (a signal may have ended one; that task runs again and must be stopped), and
    /// shortened waits (they end in a syscall-exit stop whatever happens).
    fn parked_tasks(&self, explicit: &[i32]) -> HashSet<i32> {
        let listener = self.listener.as_ref().map(|l| l.as_raw_fd());
        let mut p: HashSet<i32> = explicit.iter().copied().collect();
        p.extend(
            self.time
                .held
                .iter()
                .filter(|h| listener.is_some_and(|l| sys::notif_id_valid(l, h.id)))
                .map(|h| h.tid),
        );
        p.extend(self.time.waits.keys().copied());
        p
    }

    /// From now on every clock read of the jail reaches the tracer.
    pub(super) fn virtualize_clock_reads(&mut self, why: &str, explicit_parked: &[i32]) {
        if self.time.lazy.virtual_reads {
            return;
        }
        self.time.lazy.virtual_reads = true;
        let parked = self.parked_tasks(explicit_parked);
        let mut leaders: Vec<i32> = self
            .tasks
            .iter()
            .filter(|(&p, t)| t.tgid == p && p != self.init_pid)
            .map(|(&p, _)| p)
            .collect();
        leaders.sort_unstable();
        let mut procs = Vec::new();
        for tgid in leaders {
            match self.unpatched(tgid, None) {
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
        // `reaped` keeps every status in the order reaped; it is handled in that order later.
        let mut reaped: Vec<(i32, i32)> = Vec::new();
        let (mine, late) = stop_all(&procs, &mut reaped);
        let plan = self.time.lazy.plan.clone();
        // All checks before any write: processes can share one address space.
        let mut verdicts: Vec<Result<(), SwitchError>> = procs
            .iter()
            .map(|u| {
                let windows = vdso::windows(u.base, &plan);
                self.check_threads(u, &windows, &mut reaped, &mine, &late)
            })
            .collect();
        let failed: Vec<i32> = procs
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| v.is_err())
            .map(|(u, _)| u.tgid)
            .collect();
        for (u, v) in procs.iter().zip(verdicts.iter_mut()) {
            if v.is_ok() {
                if let Some(&f) = failed.iter().find(|&&f| same_vm(u.tgid, f)) {
                    *v = Err(SwitchError::SharesWith(f));
                }
            }
        }
        let mut switched = 0;
        for (u, v) in procs.iter().zip(verdicts) {
            // A thread exec'd while we stopped the others: the memory we checked is gone, and
            // the new program is patched at its exec's exit.
            // (A sibling's exec is reported under the leader's pid, wherever it was reaped.)
            let execed = reaped.iter().any(|&(pid, st)| {
                (pid == u.tgid || u.tids.contains(&pid))
                    && libc::WIFSTOPPED(st)
                    && (st >> 16) & 0xff == libc::PTRACE_EVENT_EXEC
            });
            if execed && v.is_ok() {
                continue;
            }
            // Through one of its threads that is in a ptrace stop, if any.
            let via = u
                .tids
                .iter()
                .copied()
                .find(|t| mine.get(t).is_some_and(|&i| libc::WIFSTOPPED(reaped[i].1)));
            match v.and_then(|()| self.write_stubs(u, via)) {
                Ok(()) => switched += 1,
                Err(e) => self.clock_unvirtualized(u.tgid, &e),
            }
        }
        // The stops taken here are handled as if the main loop had reaped them.
        self.deferred_stops.extend(reaped);
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

    /// Writes the stubs: with `PTRACE_POKEDATA` through `stopped`, a thread of the process in a
    /// ptrace stop; otherwise (every thread is held by the tracer) through `/proc/<pid>/mem`.
    fn write_stubs(&self, u: &Unpatched, stopped: Option<i32>) -> Result<(), SwitchError> {
        let mem = match stopped {
            Some(_) => None,
            None => match sys::inspect(|| {
                sys::open_at(
                    self.host_proc.as_raw_fd(),
                    &format!("{}/mem", u.tgid),
                    libc::O_WRONLY | libc::O_CLOEXEC,
                )
            }) {
                Ok(m) => Some(std::fs::File::from(m)),
                Err(e) if gone(&e) => return Ok(()),
                Err(e) => return Err(SwitchError::Io("opening its memory", e)),
            },
        };
        for p in &self.time.lazy.plan {
            let at = u.base + p.off;
            let r = match (stopped, &mem) {
                (Some(tid), _) => sys::poke_mem(tid, at, &p.stub),
                (None, Some(m)) => m.write_all_at(&p.stub, at),
                (None, None) => Ok(()),
            };
            match r {
                Ok(()) => {}
                Err(e) if gone(&e) => return Ok(()),
                Err(e) => return Err(SwitchError::Io("writing the stubs", e)),
            }
        }
        // Read back: what counts is that the process now runs the stubs.
        match self.vdso_state(u.tgid, u.base)? {
            None | Some(vdso::State::Patched) => Ok(()),
            Some(_) => Err(SwitchError::Foreign),
        }
    }

    /// What the vDSO-sized image at `base` in `tgid` holds; `None` when the process is gone.
    fn vdso_state(&self, tgid: i32, base: u64) -> Result<Option<vdso::State>, SwitchError> {
        let mut img = vec![0u8; self.time.lazy.original.len()];
        match sys::read_mem(tgid, base, &mut img) {
            Ok(n) if n == img.len() => {}
            Ok(_) => return Err(SwitchError::Foreign),
            Err(e) if gone(&e) => return Ok(None),
            Err(e) => return Err(SwitchError::Io("reading its vDSO", e)),
        }
        let lazy = &self.time.lazy;
        Ok(Some(vdso::state(&img, &lazy.original, &lazy.plan)))
    }

    fn clock_unvirtualized(&mut self, tgid: i32, e: &SwitchError) {
        self.time.lazy.failed.insert(tgid);
        self.emit(
            tgid,
            EventKind::TracerNote {
                note: "clock_unvirtualized".into(),
                detail: format!("this process keeps reading the real clock: {e}"),
            },
        );
    }

    /// A new process at its first ptrace stop after the switch (a fork racing with the switch
    /// may hold an unpatched copy of its parent's vDSO): patched if need be.
    pub(super) fn switch_new_process(&mut self, pid: i32, parent: i32) {
        if !self.time.lazy.virtual_reads || self.time.lazy.plan.is_empty() || pid == self.init_pid {
            return;
        }
        if self.time.lazy.failed.contains(&parent) {
            self.clock_unvirtualized(pid, &SwitchError::Parent);
            return;
        }
        // Its own memory map, not its parent's address: the parent (or a sibling thread of
        // it) may have moved its vDSO and left a decoy where it was.
        self.switch_stopped(pid, None);
    }

    /// After the switch, a new program (stopped at its exec's syscall exit, one thread) gets
    /// the stubs as well as a hidden vDSO: a program that finds the vDSO itself must not read
    /// the real clock through it. `base` is the vDSO address from its auxiliary vector.
    pub(super) fn switch_exec(&mut self, pid: i32, base: Option<u64>) {
        if self.time.lazy.plan.is_empty() {
            return;
        }
        self.time.lazy.failed.remove(&pid);
        self.switch_stopped(pid, base);
    }

    /// Patches a single-threaded process that is in a ptrace stop.
    fn switch_stopped(&mut self, pid: i32, base: Option<u64>) {
        let r = self.unpatched(pid, base).and_then(|u| match u {
            Some(u) => self.write_stubs(&u, Some(pid)),
            None => Ok(()),
        });
        if let Err(e) = r {
            self.clock_unvirtualized(pid, &e);
        }
    }

    /// A process is gone: its pid may come back as another process.
    pub(super) fn forget_clock_state(&mut self, pid: i32) {
        self.time.lazy.failed.remove(&pid);
    }

    /// The process's vDSO, if it still holds the kernel's clock code.
    /// `base`: its address when known (an exec's auxiliary vector); otherwise the memory map's
    /// single `[vdso]`.
    fn unpatched(&self, tgid: i32, base: Option<u64>) -> Result<Option<Unpatched>, SwitchError> {
        let base = match base {
            Some(b) => b,
            None => {
                let maps = match self.read_proc(&format!("{tgid}/maps")) {
                    Ok(m) => m,
                    Err(e) if gone(&e) => return Ok(None),
                    Err(e) => return Err(SwitchError::Io("reading its memory map", e)),
                };
                match vdso::vdso_range(&String::from_utf8_lossy(&maps))? {
                    Some(r) => r.start,
                    // No vDSO mapped (unmapped by the program, or a zombie): nothing reads it.
                    None => return Ok(None),
                }
            }
        };
        match self.vdso_state(tgid, base)? {
            None | Some(vdso::State::Patched) => Ok(None),
            Some(vdso::State::Foreign) => Err(SwitchError::Foreign),
            Some(vdso::State::Original) => Ok(Some(Unpatched {
                tgid,
                base,
                tids: Vec::new(),
            })),
        }
    }

    /// The threads of `tgid` that are not parked.
    fn threads_of(&self, tgid: i32, parked: &HashSet<i32>) -> Vec<i32> {
        let dir = sys::inspect(|| {
            sys::open_at(
                self.host_proc.as_raw_fd(),
                &format!("{tgid}/task"),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        });
        let Ok(mut dir) = dir.and_then(|d| {
            nix::dir::Dir::from_fd(std::os::fd::IntoRawFd::into_raw_fd(d)).map_err(io::Error::from)
        }) else {
            return Vec::new();
        };
        dir.iter()
            .filter_map(|e| e.ok()?.file_name().to_str().ok()?.parse().ok())
            .filter(|t| !parked.contains(t))
            .collect()
    }

    /// Whether the stubs can be written under `u`'s threads: each stopped one is outside the
    /// entry windows (single-stepped out if need be); each one that did not stop will resume
    /// outside them (or is a zombie).
    fn check_threads(
        &self,
        u: &Unpatched,
        windows: &[std::ops::Range<u64>],
        reaped: &mut [(i32, i32)],
        mine: &HashMap<i32, usize>,
        late: &[(i32, i32)],
    ) -> Result<(), SwitchError> {
        for &(_, tid) in late.iter().filter(|(g, _)| *g == u.tgid) {
            let state = match self.read_proc(&format!("{}/task/{tid}/stat", u.tgid)) {
                Ok(b) => vdso::stat_state(&String::from_utf8_lossy(&b)),
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(SwitchError::Io("reading a thread's state", e)),
            };
            if matches!(state, Some('Z' | 'X')) {
                continue;
            }
            let text = match self.read_proc(&format!("{}/task/{tid}/syscall", u.tgid)) {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(SwitchError::Io("reading a thread's registers", e)),
            };
            match vdso::saved_pc(&text) {
                Some(pc) if !vdso::in_window(pc, windows) => {}
                _ => return Err(SwitchError::Unsafe(tid)),
            }
        }
        for &tid in &u.tids {
            let Some(&i) = mine.get(&tid) else { continue };
            let st = &mut reaped[i].1;
            if libc::WIFSTOPPED(*st) && !step_out_of(tid, st, windows) {
                return Err(SwitchError::Unsafe(tid));
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

/// Interrupts every listed thread and collects stops until all have stopped or the deadline
/// passes. Every status reaped goes to `reaped`, in order; returns where each listed thread's
/// stop is in it, and the listed threads that did not stop (process, thread).
fn stop_all(
    procs: &[Unpatched],
    reaped: &mut Vec<(i32, i32)>,
) -> (HashMap<i32, usize>, Vec<(i32, i32)>) {
    let mut waiting: HashMap<i32, i32> = HashMap::new();
    for u in procs {
        for &tid in &u.tids {
            // SAFETY: PTRACE_INTERRUPT on our own tracee; ESRCH (gone) is fine.
            if unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) } == 0 {
                waiting.insert(tid, u.tgid);
            }
        }
    }
    let mut mine = HashMap::new();
    let deadline = sys::monotonic_ns() + STOP_WAIT_NS;
    while !waiting.is_empty() && sys::monotonic_ns() < deadline {
        let mut st = 0;
        // SAFETY: st is a valid out-pointer.
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG | libc::__WALL) };
        if pid > 0 {
            if waiting.remove(&pid).is_some() {
                mine.insert(pid, reaped.len());
            }
            reaped.push((pid, st));
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
/// function prologue), from our interrupt's stop only. Any stop
/// other than the step's own trap (a signal, an exit, an exec) ends the stepping and replaces
/// `st`, so it is handled like any other reaped status.
fn step_out_of(tid: i32, st: &mut i32, windows: &[std::ops::Range<u64>]) -> bool {
    let ev = (*st >> 16) & 0xff;
    let sig = libc::WSTOPSIG(*st);
    let group_stop = ev == libc::PTRACE_EVENT_STOP
        && matches!(
            sig,
            libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
        );
    let outside = |tid| super::ptrace::regs(tid).is_none_or(|r| !vdso::in_window(r.rip, windows));
    for _ in 0..16 {
        if outside(tid) {
            return true;
        }
        // Only from our interrupt's stop: a step from a signal-delivery stop would have to drop
        // or deliver the signal, and group-stops and syscall stops are never inside an entry.
        if group_stop || ev != libc::PTRACE_EVENT_STOP {
            return false;
        }
        // SAFETY: single-stepping our own stopped tracee.
        if unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, tid, 0, 0) } != 0 {
            return false;
        }
        let mut s = 0;
        let deadline = sys::monotonic_ns() + STOP_WAIT_NS;
        loop {
            // SAFETY: s is a valid out-pointer.
            let r = unsafe { libc::waitpid(tid, &mut s, libc::WNOHANG | libc::__WALL) };
            if r == tid {
                break;
            }
            if r < 0 || sys::monotonic_ns() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
        if !libc::WIFSTOPPED(s) {
            *st = s;
            return true;
        }
        if libc::WSTOPSIG(s) != libc::SIGTRAP || (s >> 16) != 0 {
            *st = s;
            return outside(tid);
        }
    }
    false
}
