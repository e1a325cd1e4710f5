//! Process lifecycle through ptrace: spawn links, exec (entry arguments via SECCOMP_RET_TRACE and
//! the result at syscall exit), exits, and the SIGSYS of a foreign-architecture syscall.

use super::{PendingExec, Task, Tracer};
use crate::jail::sys;
use crate::trace::{EventKind, SysResult};
use std::os::fd::AsRawFd;

const EV_FORK: i32 = libc::PTRACE_EVENT_FORK;
const EV_VFORK: i32 = libc::PTRACE_EVENT_VFORK;
const EV_CLONE: i32 = libc::PTRACE_EVENT_CLONE;
const EV_EXEC: i32 = libc::PTRACE_EVENT_EXEC;
const EV_SECCOMP: i32 = libc::PTRACE_EVENT_SECCOMP;
const EV_STOP: i32 = 128; // PTRACE_EVENT_STOP

fn cont(pid: i32, sig: i32) {
    // SAFETY: resuming a tracee of ours; errors (task gone) are harmless.
    unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, sig as libc::c_long) };
}

fn cont_syscall(pid: i32) {
    // SAFETY: as above; stops again at the syscall's exit.
    unsafe { libc::ptrace(libc::PTRACE_SYSCALL, pid, 0, 0) };
}

fn event_msg(pid: i32) -> u64 {
    let mut m: libc::c_ulong = 0;
    // SAFETY: m is a valid out-pointer.
    unsafe {
        libc::ptrace(
            libc::PTRACE_GETEVENTMSG,
            pid,
            0,
            &mut m as *mut libc::c_ulong,
        )
    };
    m
}

pub(super) fn regs(pid: i32) -> Option<libc::user_regs_struct> {
    // SAFETY: zeroed registers are a valid out-buffer.
    let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    // SAFETY: r is a valid out-pointer.
    let rc = unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut r as *mut _) };
    (rc == 0).then_some(r)
}

/// Hides the vDSO from the new program: its auxiliary vector entry `AT_SYSINFO_EHDR` becomes
/// `AT_IGNORE`, so libc (and Go's runtime) make real clock syscalls, which the virtual clock
/// answers. Called at the exec's syscall exit, when the stack is exactly as the kernel built it:
/// argc, argv, NULL, envp, NULL, then the auxv pairs. Returns the vDSO's address.
fn disable_vdso(pid: i32) -> Option<u64> {
    const AT_NULL: u64 = 0;
    const AT_IGNORE: u64 = 1;
    const AT_SYSINFO_EHDR: u64 = 33;
    let r = regs(pid)?;
    let mut buf = vec![0u8; 64 * 1024];
    let n = sys::read_mem(pid, r.rsp, &mut buf).ok()?;
    let words: Vec<u64> = buf[..n - n % 8]
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    let &argc = words.first()?;
    let mut i = (argc as usize).saturating_add(2);
    while i < words.len() && words[i] != 0 {
        i += 1;
    }
    i += 1;
    while i + 1 < words.len() && words[i] != AT_NULL {
        if words[i] == AT_SYSINFO_EHDR {
            let _ = sys::write_mem(pid, r.rsp + 8 * i as u64, &AT_IGNORE.to_ne_bytes());
            return Some(words[i + 1]);
        }
        i += 2;
    }
    None
}

fn arch_name(arch: u32) -> String {
    match arch {
        0x4000_0003 => "i386".into(),
        0xC000_003E => "x86_64".into(),
        a => format!("{a:#x}"),
    }
}

impl Tracer {
    pub(super) fn ptrace_drain(&mut self) {
        loop {
            // Stops reaped while the clock was being switched (which can start inside a handler
            // below) come before anything reaped later, in the order reaped.
            if !self.deferred_stops.is_empty() {
                for (pid, st) in std::mem::take(&mut self.deferred_stops) {
                    self.on_status(pid, st);
                }
                continue;
            }
            let mut st = 0;
            // SAFETY: st is a valid out-pointer.
            let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG | libc::__WALL) };
            if pid <= 0 {
                return;
            }
            self.on_status(pid, st);
        }
    }

    fn on_status(&mut self, pid: i32, st: i32) {
        if libc::WIFSTOPPED(st) {
            self.on_stop(pid, st);
        } else if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
            self.on_exit(pid, st);
        }
    }

    fn task_mut(&mut self, pid: i32) -> &mut Task {
        self.ensure_task(pid);
        self.tasks.entry(pid).or_default()
    }

    /// Registers a task the first time any stop of it is seen. A child's first stops can be reaped
    /// before its parent's fork event, so the parent link comes from /proc (the parent is still
    /// stopped in its fork event and cannot have exited).
    fn ensure_task(&mut self, pid: i32) {
        if self.tasks.contains_key(&pid) {
            return;
        }
        let status =
            sys::read_at(self.host_proc.as_raw_fd(), &format!("{pid}/status")).unwrap_or_default();
        let status = String::from_utf8_lossy(&status);
        let field = |name: &str| -> Option<i32> {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        };
        let tgid = field("Tgid:").unwrap_or(pid);
        let vpid = status
            .lines()
            .find(|l| l.starts_with("NSpid:"))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse().ok());
        let thread = tgid != pid;
        let parent = if thread {
            tgid
        } else {
            field("PPid:").unwrap_or(self.init_pid)
        };
        let ptgid = self.tgid_of(parent);
        let step = if ptgid == self.init_pid && !thread {
            // init forks only step roots, in order, right after announcing the step.
            self.announced_step
        } else {
            self.tasks.get(&ptgid).and_then(|t| t.step)
        };
        let ppid = if thread {
            self.tasks.get(&ptgid).and_then(|t| t.ppid)
        } else {
            Some(ptgid)
        };
        self.tasks.insert(
            pid,
            Task {
                tgid: if thread { ptgid } else { pid },
                ppid,
                step,
                started: false,
                vpid,
            },
        );
        let kind = EventKind::Spawn {
            parent: ptgid,
            child: pid,
            thread,
        };
        if thread {
            self.emit(ptgid, kind);
        } else {
            self.emit(pid, kind);
        }
    }

    fn on_stop(&mut self, pid: i32, st: i32) {
        let sig = libc::WSTOPSIG(st);
        let ev = (st >> 16) & 0xff;
        match ev {
            EV_FORK | EV_VFORK | EV_CLONE => {
                let child = event_msg(pid) as i32;
                self.on_spawn(pid, child);
                cont(pid, 0);
            }
            EV_EXEC => {
                let former = event_msg(pid) as i32;
                // A task that was in a shortened wait is gone (or is the exec'ing thread, now in
                // execve): its wait entry must not claim the exec's syscall-exit stop.
                self.time.waits.remove(&pid);
                self.time.waits.remove(&former);
                if former != pid {
                    // A non-leader thread exec'd: it now carries the leader's pid.
                    if let Some(p) = self.pending_exec.remove(&former) {
                        self.pending_exec.insert(pid, p);
                    }
                    self.tasks.remove(&former);
                }
                if let Some(p) = self.pending_exec.get_mut(&pid) {
                    p.done = true;
                }
                // Still inside execve: continue to its syscall-exit stop.
                cont_syscall(pid);
            }
            EV_SECCOMP => match regs(pid) {
                Some(r) if matches!(r.orig_rax as i64, libc::SYS_execve | libc::SYS_execveat) => {
                    self.on_exec_entry(pid);
                    cont_syscall(pid);
                }
                Some(r) if self.on_wait_entry(pid, r) => cont_syscall(pid),
                _ => cont(pid, 0),
            },
            EV_STOP => {
                let t = self.task_mut(pid);
                if !t.started {
                    t.started = true;
                    self.first_stop(pid);
                    cont(pid, 0);
                } else if matches!(
                    sig,
                    libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                ) {
                    // A real group-stop: stay stopped but keep reporting events.
                    // SAFETY: PTRACE_LISTEN on our tracee.
                    unsafe { libc::ptrace(libc::PTRACE_LISTEN, pid, 0, 0) };
                } else {
                    cont(pid, 0);
                }
            }
            0 if sig == (libc::SIGTRAP | 0x80) => {
                let exec_done = self.pending_exec.get(&pid).is_some_and(|p| p.done);
                if self.time.waits.contains_key(&pid) && !exec_done {
                    if let Some(r) = regs(pid) {
                        self.on_wait_exit(pid, r);
                    } else {
                        self.time.waits.remove(&pid);
                    }
                } else {
                    self.on_exec_exit(pid);
                }
                cont(pid, 0);
            }
            0 => {
                let t = self.task_mut(pid);
                if !t.started {
                    t.started = true;
                    self.first_stop(pid);
                }
                let inject = self.on_signal(pid, sig);
                cont(pid, inject);
            }
            _ => cont(pid, 0),
        }
    }

    /// A new process's first stop: it has not run yet, so a fork that raced with the clock
    /// switch can get the stubs now.
    fn first_stop(&mut self, pid: i32) {
        let parent = match self.tasks.get(&pid) {
            Some(t) if t.tgid == pid => t.ppid,
            _ => None,
        };
        if let Some(parent) = parent {
            self.switch_new_process(pid, parent);
        }
    }

    fn on_spawn(&mut self, _parent: i32, child: i32) {
        self.ensure_task(child);
    }

    fn on_exec_entry(&mut self, pid: i32) {
        let Some(r) = regs(pid) else { return };
        let nr = r.orig_rax as i64;
        let (path_ptr, argv_ptr, dirfd) = if nr == libc::SYS_execveat {
            (r.rsi, r.rdx, r.rdi as i32)
        } else {
            (r.rdi, r.rsi, libc::AT_FDCWD)
        };
        let path = sys::read_cstring(pid, path_ptr, 4096)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let argv = sys::read_argv(pid, argv_ptr, 4096, 256 * 1024).unwrap_or_default();
        let cwd =
            sys::readlink_at(self.host_proc.as_raw_fd(), &format!("{pid}/cwd")).unwrap_or_default();
        let path = if dirfd != libc::AT_FDCWD && !path.starts_with('/') {
            let base = sys::readlink_at(self.host_proc.as_raw_fd(), &format!("{pid}/fd/{dirfd}"))
                .unwrap_or_default();
            if path.is_empty() {
                base
            } else {
                format!("{base}/{path}")
            }
        } else {
            path
        };
        self.pending_exec.insert(
            pid,
            PendingExec {
                path,
                argv,
                cwd,
                done: false,
            },
        );
    }

    fn on_exec_exit(&mut self, pid: i32) {
        let Some(mut p) = self.pending_exec.remove(&pid) else {
            return;
        };
        let ret = regs(pid).map(|r| r.rax as i64).unwrap_or(-1);
        let (result, exe) = if p.done || ret == 0 {
            let exe = sys::readlink_at(self.host_proc.as_raw_fd(), &format!("{pid}/exe")).ok();
            if p.argv.is_empty() {
                // The old image was not readable (a child of the non-dumpable pid 1 before its
                // exec): the new image's argv is the one that was passed.
                let raw = sys::read_at(self.host_proc.as_raw_fd(), &format!("{pid}/cmdline"))
                    .unwrap_or_default();
                p.argv = raw
                    .split(|&b| b == 0)
                    .filter(|s| !s.is_empty())
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect();
                p.cwd = sys::readlink_at(self.host_proc.as_raw_fd(), &format!("{pid}/cwd"))
                    .unwrap_or_default();
                if p.path.is_empty() {
                    p.path = exe.clone().unwrap_or_default();
                }
            }
            (SysResult::ok(0), exe)
        } else {
            (SysResult::errno((-ret) as i32), None)
        };
        if result.is_ok() && self.time.lazy.virtual_reads {
            let base = disable_vdso(pid);
            self.switch_exec(pid, base);
        }
        let shim = result.is_ok() && self.spec.shims.contains(&p.path);
        let (program, argv) = (p.path.clone(), p.argv.clone());
        self.emit(
            pid,
            EventKind::Exec {
                path: p.path,
                argv: p.argv,
                cwd: p.cwd,
                exe,
                result,
            },
        );
        if shim {
            self.emit(pid, EventKind::Shim { program, argv });
        }
    }

    /// Returns the signal to deliver.
    fn on_signal(&mut self, pid: i32, sig: i32) -> i32 {
        if sig == libc::SIGSYS {
            // SAFETY: zeroed siginfo is a valid out-buffer.
            let mut si: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: si is a valid out-pointer.
            unsafe { libc::ptrace(libc::PTRACE_GETSIGINFO, pid, 0, &mut si as *mut _) };
            if si.si_code == 1 {
                // SYS_SECCOMP: our filter's TRAP (foreign architecture or x32). The sigsys
                // fields follow the common header: call address, syscall number, arch.
                // SAFETY: siginfo_t is at least 128 plain bytes.
                let raw: &[u8; 128] =
                    unsafe { &*(&si as *const libc::siginfo_t as *const [u8; 128]) };
                let nr = i32::from_ne_bytes([raw[24], raw[25], raw[26], raw[27]]);
                let arch = u32::from_ne_bytes([raw[28], raw[29], raw[30], raw[31]]);
                self.emit(
                    pid,
                    EventKind::Denied {
                        syscall: if arch == 0x4000_0003 {
                            format!("i386:{nr}")
                        } else {
                            crate::jail::filter::syscall_name(nr as i64).to_string()
                        },
                        nr: nr as i64,
                        arch: arch_name(arch),
                        action: "kill".into(),
                    },
                );
                // The process dies; no handler of its own gets to run.
                // SAFETY: killing our tracee.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                return 0;
            }
        }
        if sig == libc::SIGXFSZ {
            self.emit(
                pid,
                EventKind::Limit {
                    what: "file_size".into(),
                    detail: "a write went past the per-file size limit".into(),
                },
            );
        }
        sig
    }

    fn on_exit(&mut self, pid: i32, st: i32) {
        self.time.waits.remove(&pid);
        self.time.held.retain(|h| h.tid != pid);
        self.forget_clock_state(pid);
        if let Some(p) = self.pending_exec.remove(&pid) {
            self.emit(
                pid,
                EventKind::Exec {
                    path: p.path,
                    argv: p.argv,
                    cwd: p.cwd,
                    exe: None,
                    result: SysResult::unknown(),
                },
            );
        }
        let is_leader = self.tasks.get(&pid).map(|t| t.tgid == pid).unwrap_or(true);
        if is_leader {
            let (code, signal) = if libc::WIFEXITED(st) {
                (Some(libc::WEXITSTATUS(st)), None)
            } else {
                (None, Some(libc::WTERMSIG(st)))
            };
            self.emit(pid, EventKind::Exit { code, signal });
            self.pidfds.remove(&pid);
        }
        self.tasks.remove(&pid);
        if pid == self.init_pid {
            self.init_exited = true;
        }
    }
}
