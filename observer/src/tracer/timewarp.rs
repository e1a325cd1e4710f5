//! Applies the virtual clock (clock.rs) to the jail: answers clock reads and sleeps (seccomp
//! notification) and shortens long timed waits (ptrace at the `SECCOMP_RET_TRACE` stop, restored
//! at syscall exit). pid 1, the agent, keeps real time: its step budgets are real budgets.

use super::clock::{self, WaitPlan, POLICY};
use super::Tracer;
use crate::jail::sys;
use crate::trace::EventKind;
use std::os::fd::RawFd;

/// A sleep answered later, from the tracer's loop.
#[derive(Debug, Clone)]
pub(super) struct HeldSleep {
    pub due_ns: u64,
    pub id: u64,
    /// The sleeping task: blocked in the kernel until answered.
    pub tid: i32,
    pub skip_ns: u64,
}

/// A shortened wait, restored at its syscall exit.
#[derive(Debug, Clone)]
pub(super) struct PendingWait {
    nr: i64,
    /// Index of the argument register that was changed, and its original value.
    arg: usize,
    orig: u64,
    started_ns: u64,
    /// The whole wait the task asked for (ns) and what was really waited at most.
    asked_ns: u64,
    /// The task's own timeout struct, reset to zero if the wait times out (select's semantics).
    timeval_out: Option<u64>,
}

/// Notes about skipped time kept per run (the rest are counted).
const MAX_SKIP_NOTES: u32 = 50;

fn arg_reg(r: &libc::user_regs_struct, i: usize) -> u64 {
    match i {
        0 => r.rdi,
        1 => r.rsi,
        2 => r.rdx,
        3 => r.r10,
        4 => r.r8,
        _ => r.r9,
    }
}

fn set_arg_reg(r: &mut libc::user_regs_struct, i: usize, v: u64) {
    match i {
        0 => r.rdi = v,
        1 => r.rsi = v,
        2 => r.rdx = v,
        3 => r.r10 = v,
        4 => r.r8 = v,
        _ => r.r9 = v,
    }
}

fn set_regs(pid: i32, r: &libc::user_regs_struct) -> bool {
    // SAFETY: r is a valid register block for our stopped tracee.
    unsafe { libc::ptrace(libc::PTRACE_SETREGS, pid, 0, r as *const _) == 0 }
}

fn read16(tid: i32, addr: u64) -> Option<[u8; 16]> {
    let mut b = [0u8; 16];
    (sys::read_mem(tid, addr, &mut b).ok()? == 16).then_some(b)
}

/// How a timed wait carries its timeout.
#[derive(Clone, Copy)]
enum Form {
    Millis,
    Timeval,
    Timespec,
}

impl Tracer {
    fn step_of(&self, tid: i32) -> Option<u32> {
        let tgid = self.tgid_of(tid);
        self.tasks.get(&tgid).and_then(|t| t.step)
    }

    fn note_skip(&mut self, tid: i32, what: &str, ns: u64) {
        if ns < 1_000_000_000 {
            return;
        }
        self.time.skips_noted += 1;
        if self.time.skips_noted <= MAX_SKIP_NOTES {
            self.emit(
                tid,
                EventKind::TracerNote {
                    note: "time_skip".into(),
                    detail: format!("{what}: {:.1} s fast-forwarded", ns as f64 / 1e9),
                },
            );
        }
    }

    /// The virtual reading of `clk`; every read by a step past the busy-wait threshold also
    /// moves the clock on a little.
    fn read_clock(&mut self, tid: i32, clk: i64) -> Result<i128, i32> {
        let real = clock::real_now(clk)?;
        let step = self.step_of(tid);
        let reads = self.time.clock_reads.entry(step).or_default();
        *reads += 1;
        let adv = clock::busy_advance(*reads, &POLICY);
        if adv > 0 {
            // A program reading the clock by syscall moves it; vDSO readers must follow.
            self.virtualize_clock_reads("a process busy-waited on the clock", &[tid]);
            self.time.clock.skip(adv);
        }
        Ok(real + self.time.clock.offset(clk).unwrap_or(0))
    }

    /// clock_gettime, gettimeofday, time, nanosleep, clock_nanosleep.
    pub(super) fn do_time(
        &mut self,
        listener: RawFd,
        c: &super::notify::Call,
    ) -> Option<Result<i64, i32>> {
        if c.tid == self.init_pid {
            let _ = sys::notif_continue(listener, c.id);
            return None;
        }
        let a = c.args;
        let efault = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EFAULT);
        match c.nr {
            libc::SYS_clock_gettime => {
                Some(self.read_clock(c.tid, a[0] as i32 as i64).and_then(|ns| {
                    sys::write_mem(c.tid, a[1], &clock::ns_timespec(ns))
                        .map(|_| 0)
                        .map_err(efault)
                }))
            }
            libc::SYS_gettimeofday => Some((|| {
                let ns = self.read_clock(c.tid, libc::CLOCK_REALTIME as i64)?;
                if a[0] != 0 {
                    sys::write_mem(c.tid, a[0], &clock::ns_timeval(ns)).map_err(efault)?;
                }
                if a[1] != 0 {
                    // struct timezone: UTC, no DST (what the kernel reports by default).
                    sys::write_mem(c.tid, a[1], &[0u8; 8]).map_err(efault)?;
                }
                Ok(0)
            })()),
            libc::SYS_time => Some((|| {
                let ns = self.read_clock(c.tid, libc::CLOCK_REALTIME as i64)?;
                let secs = ns.div_euclid(clock::NS_PER_SEC) as i64;
                if a[0] != 0 {
                    sys::write_mem(c.tid, a[0], &secs.to_ne_bytes()).map_err(efault)?;
                }
                Ok(secs)
            })()),
            libc::SYS_nanosleep => self.sleep(c, libc::CLOCK_MONOTONIC as i64, 0, a[0]),
            libc::SYS_clock_nanosleep => self.sleep(c, a[0] as i32 as i64, a[1], a[2]),
            _ => Some(Err(libc::ENOSYS)),
        }
    }

    fn sleep(
        &mut self,
        c: &super::notify::Call,
        clk: i64,
        flags: u64,
        req: u64,
    ) -> Option<Result<i64, i32>> {
        let Some(b) = read16(c.tid, req) else {
            return Some(Err(libc::EFAULT));
        };
        let Some(t) = clock::timespec_ns(&b) else {
            return Some(Err(libc::EINVAL));
        };
        let d = if flags & libc::TIMER_ABSTIME as u64 != 0 {
            let now = match clock::real_now(clk) {
                Ok(n) => n + self.time.clock.offset(clk).unwrap_or(0),
                Err(e) => return Some(Err(e)),
            };
            t - now
        } else {
            t
        };
        if d <= 0 {
            return Some(Ok(0));
        }
        let d = d.min(u64::MAX as i128) as u64;
        let step = self.step_of(c.tid);
        let slept = self.time.slept_real.entry(step).or_default();
        let plan = clock::plan_sleep(d, *slept, &POLICY);
        *slept += plan.real_ns;
        self.time.held.push(HeldSleep {
            due_ns: sys::monotonic_ns() + plan.real_ns,
            id: c.id,
            tid: c.tid,
            skip_ns: plan.skip_ns,
        });
        if plan.skip_ns > 0 {
            let name = crate::jail::filter::syscall_name(c.nr);
            self.note_skip(c.tid, name, plan.skip_ns);
        }
        None
    }

    /// Milliseconds until the next held sleep is due (`default` when none is held).
    pub(super) fn next_wake_ms(&self, default: i32) -> i32 {
        let now = sys::monotonic_ns();
        self.time
            .held
            .iter()
            .map(|h| (h.due_ns.saturating_sub(now).div_ceil(1_000_000)) as i32)
            .min()
            .map_or(default, |m| m.min(default))
    }

    /// Answers the held sleeps that are due; their skipped time moves the clock.
    pub(super) fn wake_due(&mut self, listener: RawFd) {
        if self.time.held.is_empty() {
            return;
        }
        let now = sys::monotonic_ns();
        if self
            .time
            .held
            .iter()
            .any(|h| h.due_ns <= now && h.skip_ns > 0)
        {
            self.virtualize_clock_reads("a sleep was fast-forwarded", &[]);
        }
        let (due, rest): (Vec<HeldSleep>, Vec<HeldSleep>) =
            self.time.held.drain(..).partition(|h| h.due_ns <= now);
        self.time.held = rest;
        for h in due {
            // A task killed while it slept has no answer to take (and skips nothing).
            if sys::notif_respond(listener, h.id, Ok(0)).is_ok() {
                self.time.clock.skip(h.skip_ns);
            }
        }
    }

    /// Sets the wall-clock offset for a step (`--clock-offset` plus the step's dated pass).
    pub(super) fn set_step_offset(&mut self, step_offset_ns: i64) {
        self.time.clock.wall_offset_ns = self.spec.clock_offset_ns.saturating_add(step_offset_ns);
        if self.time.clock.wall_offset_ns != 0 {
            self.virtualize_clock_reads("the date was moved", &[]);
        }
    }

    /// At the `SECCOMP_RET_TRACE` stop of a timed wait: shortens a long timeout (the rest is
    /// skipped if it expires) and moves an absolute deadline from virtual to real time. Returns
    /// whether the syscall-exit stop is wanted.
    pub(super) fn on_wait_entry(&mut self, pid: i32, mut r: libc::user_regs_struct) -> bool {
        if self.tgid_of(pid) == self.init_pid {
            return false;
        }
        let nr = r.orig_rax as i64;
        let op = r.rsi as i32;
        let (arg, form, pure_sleep) = match nr {
            libc::SYS_poll => (2, Form::Millis, r.rsi == 0),
            libc::SYS_epoll_wait | libc::SYS_epoll_pwait => (3, Form::Millis, false),
            libc::SYS_select => (4, Form::Timeval, r.rdi == 0),
            libc::SYS_pselect6 => (4, Form::Timespec, r.rdi == 0),
            libc::SYS_ppoll => (2, Form::Timespec, r.rsi == 0),
            libc::SYS_epoll_pwait2 => (3, Form::Timespec, false),
            libc::SYS_futex => (3, Form::Timespec, false),
            _ => return false,
        };
        let orig = arg_reg(&r, arg);
        let futex_abs = nr == libc::SYS_futex && op & 0x7f == libc::FUTEX_WAIT_BITSET;
        let clk = if op & libc::FUTEX_CLOCK_REALTIME != 0 {
            libc::CLOCK_REALTIME as i64
        } else {
            libc::CLOCK_MONOTONIC as i64
        };
        let offset = self.time.clock.offset(clk).unwrap_or(0);
        // The wait asked for, relative, in ns; for an absolute futex also the real deadline.
        let (d, real_deadline): (i128, Option<i128>) = match form {
            Form::Millis => ((orig as i32) as i128 * 1_000_000, None),
            Form::Timeval | Form::Timespec => {
                let Some(b) = read16(pid, orig) else {
                    return false;
                };
                let parsed = match form {
                    Form::Timeval => clock::timeval_ns(&b),
                    _ => clock::timespec_ns(&b),
                };
                let Some(t) = parsed else { return false };
                if futex_abs {
                    let Ok(now) = clock::real_now(clk) else {
                        return false;
                    };
                    (t - offset - now, Some(t - offset))
                } else {
                    (t, None)
                }
            }
        };
        if d < 0 && (real_deadline.is_none() || offset == 0) {
            return false;
        }
        let d = d.max(0).min(u64::MAX as i128) as u64;
        let plan = if pure_sleep {
            let step = self.step_of(pid);
            let slept = self.time.slept_real.entry(step).or_default();
            let p = clock::plan_sleep(d, *slept, &POLICY);
            *slept += p.real_ns;
            Some(p).filter(|p| p.skip_ns > 0)
        } else {
            clock::plan_fd_wait(d, &POLICY)
        };
        // An absolute deadline in virtual time must be moved to real time even when it is short.
        let plan = match plan {
            Some(p) => p,
            None if real_deadline.is_some() && offset != 0 => WaitPlan {
                real_ns: d,
                skip_ns: 0,
            },
            None => return false,
        };
        let new_value = match form {
            Form::Millis => plan.real_ns.div_ceil(1_000_000),
            Form::Timeval | Form::Timespec => {
                let bytes = match (form, real_deadline) {
                    (Form::Timeval, _) => clock::ns_timeval(plan.real_ns as i128),
                    (_, Some(_)) => match clock::real_now(clk) {
                        Ok(now) => clock::ns_timespec(now + plan.real_ns as i128),
                        Err(_) => return false,
                    },
                    _ => clock::ns_timespec(plan.real_ns as i128),
                };
                // Below the red zone and any frame the task is in: what a signal frame would
                // overwrite, so the task cannot rely on it. The kernel copies the timeout in.
                let scratch = (r.rsp.wrapping_sub(4096)) & !15;
                if sys::write_mem(pid, scratch, &bytes).is_err() {
                    return false;
                }
                scratch
            }
        };
        set_arg_reg(&mut r, arg, new_value);
        if !set_regs(pid, &r) {
            return false;
        }
        let timeval_out = (nr == libc::SYS_select).then_some(orig);
        self.time.waits.insert(
            pid,
            PendingWait {
                nr,
                arg,
                orig,
                started_ns: sys::monotonic_ns(),
                asked_ns: d,
                timeval_out,
            },
        );
        true
    }

    /// At the syscall exit of a shortened wait: restores the argument and, if the shortened
    /// timeout expired, skips the rest of the asked wait.
    pub(super) fn on_wait_exit(&mut self, pid: i32, mut r: libc::user_regs_struct) {
        let Some(w) = self.time.waits.remove(&pid) else {
            return;
        };
        set_arg_reg(&mut r, w.arg, w.orig);
        let _ = set_regs(pid, &r);
        let ret = r.rax as i64;
        let timed_out = if w.nr == libc::SYS_futex {
            ret == -(libc::ETIMEDOUT as i64)
        } else {
            ret == 0
        };
        if !timed_out {
            return;
        }
        if let Some(tv) = w.timeval_out {
            let _ = sys::write_mem(pid, tv, &[0u8; 16]);
        }
        let waited = sys::monotonic_ns().saturating_sub(w.started_ns);
        let skip = w.asked_ns.saturating_sub(waited);
        if skip > 0 {
            self.virtualize_clock_reads("a timed wait was fast-forwarded", &[pid]);
            self.time.clock.skip(skip);
            let name = crate::jail::filter::syscall_name(w.nr);
            self.note_skip(pid, name, skip);
        }
    }

    /// A summary of the run's virtual time, for the supervisor.
    pub(super) fn time_summary(&self) {
        self.info(
            "time_skipped_ms",
            &(self.time.clock.skipped_ns / 1_000_000).to_string(),
        );
        let reads: u64 = self.time.clock_reads.values().sum();
        self.info("clock_reads", &reads.to_string());
    }
}

/// The tracer's virtual-time state.
#[derive(Debug, Default)]
pub(super) struct TimeState {
    pub clock: clock::VirtualClock,
    pub held: Vec<HeldSleep>,
    pub slept_real: std::collections::HashMap<Option<u32>, u64>,
    pub clock_reads: std::collections::HashMap<Option<u32>, u64>,
    pub waits: std::collections::HashMap<i32, PendingWait>,
    pub skips_noted: u32,
    pub lazy: super::lazyclock::LazyClock,
}
