//! Starting the jail process. A `vfork`-style clone of the supervisor (no page tables copied; the
//! supervisor waits only until the exec) that makes raw system calls only: it takes its fds, drops
//! to the run's uid as root, creates the jail's user namespace and maps its ids, keeps its
//! capabilities across the exec (ambient), and execs the jail binary.
//!
//! Creating the user namespace *before* the exec makes the new program's memory belong to that
//! namespace, so the tracer (root there) can read the memory of init's children before they exec
//! even though init is not dumpable. init therefore needs no re-exec of its own.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use super::JailError;

/// What the child needs, prepared by the parent: the child may not allocate.
pub struct Plan {
    /// `argv[0]` is the program run.
    pub argv: Vec<CString>,
    /// Our fds to place at `targets[i]` in the child.
    pub fds: Vec<RawFd>,
    pub targets: Vec<RawFd>,
    /// Host ids to drop to first (as root: the run's unprivileged id).
    pub drop_to: Option<(u32, u32)>,
    /// The jail user's ids inside the namespace (mapped onto our own, or `drop_to`'s).
    pub inside: (u32, u32),
    pub outside: (u32, u32),
}

/// A started jail process: killed and reaped however its owner ends.
pub struct JailChild {
    pid: libc::pid_t,
    status: Option<std::process::ExitStatus>,
}

impl JailChild {
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// SIGKILL, unless already reaped (the pid cannot have been reused before we reap it).
    pub fn kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        // SAFETY: signalling our own unreaped child.
        super::sys::cvt_i(unsafe { libc::kill(self.pid, libc::SIGKILL) }).map(|_| ())
    }

    pub fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        let mut st = 0;
        loop {
            // SAFETY: waiting for our own child.
            let r = unsafe { libc::waitpid(self.pid, &mut st, 0) };
            if r == self.pid {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        let s = std::os::unix::process::ExitStatusExt::from_raw(st);
        self.status = Some(s);
        Ok(s)
    }
}

impl Drop for JailChild {
    fn drop(&mut self) {
        let _ = self.kill();
        let _ = self.wait();
    }
}

/// The child's steps, for the error message when one fails.
const STEPS: [&str; 10] = [
    "",
    "signals",
    "fds",
    "ids",
    "user namespace",
    "uid/gid maps",
    "capabilities",
    "parent-death signal",
    "process group",
    "exec",
];

/// Shared with the child (same memory): inputs as raw pointers, and where it failed.
#[repr(C)]
struct Shared {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    moves: *const (RawFd, RawFd),
    n_moves: usize,
    scratch: *mut RawFd,
    devnull: RawFd,
    /// The first fd number the jail process does not get.
    keep_below: RawFd,
    drop_to: Option<(u32, u32)>,
    maps: [(*const libc::c_char, *const u8, usize); 3],
    orig_mask: libc::sigset_t,
    failed_step: usize,
    errno: i32,
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Starts the jail process per `plan`, with stdin and stdout on /dev/null, stderr inherited, the
/// `plan`'s fds at their targets and no other fd.
pub fn spawn(plan: &Plan) -> Result<JailChild, JailError> {
    spawn_io(plan).map_err(|(step, e)| match step {
        4..=6 => JailError::UserNs(format!("{}: {e}", STEPS[step])),
        0 => JailError::Spawn(e),
        _ => JailError::Spawn(io::Error::new(e.kind(), format!("{}: {e}", STEPS[step]))),
    })
}

fn spawn_io(plan: &Plan) -> Result<JailChild, (usize, io::Error)> {
    let io = |e| (0, e);
    let program = plan
        .argv
        .first()
        .ok_or_else(|| io(io::Error::new(io::ErrorKind::InvalidInput, "no program")))?;
    let devnull = super::sys::open_at(libc::AT_FDCWD, "/dev/null", libc::O_RDWR | libc::O_CLOEXEC)
        .map_err(io)?;
    // No environment: the jail process reads none, and init (a fork of it) would carry the
    // supervisor's in its memory.
    let argv_p = nul_terminated(&plan.argv);
    let env_p = nul_terminated(&[]);
    let moves: Vec<(RawFd, RawFd)> = plan
        .fds
        .iter()
        .copied()
        .zip(plan.targets.iter().copied())
        .collect();
    let mut scratch = vec![-1; moves.len()];
    let (iu, ig) = plan.inside;
    let (ou, og) = plan.outside;
    let uid_map = format!("{iu} {ou} 1\n");
    let gid_map = format!("{ig} {og} 1\n");
    let map =
        |path: &'static std::ffi::CStr, data: &str| (path.as_ptr(), data.as_ptr(), data.len());
    // SAFETY: an all-zero sigset is valid; it is filled below.
    let mut shared = Shared {
        program: program.as_ptr(),
        argv: argv_p.as_ptr(),
        envp: env_p.as_ptr(),
        moves: moves.as_ptr(),
        n_moves: moves.len(),
        scratch: scratch.as_mut_ptr(),
        devnull: devnull.as_raw_fd(),
        keep_below: plan.targets.iter().copied().max().unwrap_or(2).max(2) + 1,
        drop_to: plan.drop_to,
        maps: [
            // Without this an unprivileged writer may not write gid_map; it also keeps the jail
            // from ever regaining supplementary groups.
            map(c"/proc/self/setgroups", "deny"),
            map(c"/proc/self/uid_map", &uid_map),
            map(c"/proc/self/gid_map", &gid_map),
        ],
        orig_mask: unsafe { std::mem::zeroed() },
        failed_step: 0,
        errno: 0,
    };
    // The child runs on this stack, in our memory, until its exec; its uid change and its
    // PR_SET_DUMPABLE act on our memory's dumpable flag too, which is put back after.
    let mut stack = vec![0u8; 64 * 1024];
    // SAFETY: plain prctl getter.
    let dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE) };
    // SAFETY: the stack grows down from its (16-aligned) end; `shared` and everything it points
    // to outlive the call, because CLONE_VFORK suspends us until the child has exec'd or exited.
    // All signals are blocked around the clone so no handler of ours runs on the child's stack.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut shared.orig_mask);
        let top = stack.as_mut_ptr().add(stack.len());
        let top = top.sub(top as usize % 16);
        let pid = libc::clone(
            child,
            top.cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut shared as *mut Shared).cast(),
        );
        let e = errno();
        if dumpable >= 0 {
            libc::prctl(libc::PR_SET_DUMPABLE, dumpable);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &shared.orig_mask, std::ptr::null_mut());
        if pid < 0 {
            return Err(io(io::Error::from_raw_os_error(e)));
        }
        pid
    };
    let mut c = JailChild { pid, status: None };
    // SAFETY: the child wrote these (if at all) before its exec or exit, which we waited for.
    let (step, err) = unsafe {
        (
            std::ptr::read_volatile(&shared.failed_step),
            std::ptr::read_volatile(&shared.errno),
        )
    };
    if step != 0 {
        let _ = c.wait();
        return Err((step.min(STEPS.len() - 1), io::Error::from_raw_os_error(err)));
    }
    drop((devnull, stack));
    Ok(c)
}

fn nul_terminated(v: &[CString]) -> Vec<*const libc::c_char> {
    v.iter()
        .map(|s| s.as_ptr())
        .chain([std::ptr::null()])
        .collect()
}

/// The child: raw system calls only (it shares the supervisor's memory and thread-local state).
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Shared`, alive while we run (CLONE_VFORK).
    let s = unsafe { &mut *(arg as *mut Shared) };
    // SAFETY: raw system calls on this process's own state, with pointers the parent prepared.
    unsafe {
        // Default dispositions for every handled signal: the supervisor's handlers must not run
        // here; SIG_IGN stays (exec keeps it), except SIGPIPE, which a program expects default.
        if super::sys::default_signal_dispositions(true).is_err() {
            fail(s, 1);
        }
        // Sources first above every target, so a source that is also a target is not clobbered.
        let moves = std::slice::from_raw_parts(s.moves, s.n_moves);
        for (i, (from, _)) in moves.iter().enumerate() {
            let fd = libc::fcntl(*from, libc::F_DUPFD_CLOEXEC, 10);
            if fd < 0 {
                fail(s, 2);
            }
            *s.scratch.add(i) = fd;
        }
        for (i, (_, to)) in moves.iter().enumerate() {
            if libc::dup2(*s.scratch.add(i), *to) < 0 {
                fail(s, 2);
            }
        }
        if libc::dup2(s.devnull, 0) < 0 || libc::dup2(s.devnull, 1) < 0 {
            fail(s, 2);
        }
        // Nothing else we hold may reach the jail: not our own fds (CLOEXEC or not), nor any
        // our caller left open without CLOEXEC — a host directory fd would be a way out of the
        // jail's root, a pipe of ours a way to forge its events.
        if libc::syscall(libc::SYS_close_range, s.keep_below as u32, u32::MAX, 0u32) != 0 {
            fail(s, 2);
        }
        if let Some((u, g)) = s.drop_to {
            // Raw calls: libc's setuid would signal the supervisor's threads.
            if libc::syscall(libc::SYS_setgroups, 0usize, 0usize) != 0
                || libc::syscall(libc::SYS_setresgid, g, g, g) != 0
                || libc::syscall(libc::SYS_setresuid, u, u, u) != 0
            {
                fail(s, 3);
            }
        }
        if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER) != 0 {
            fail(s, 4);
        }
        // A change of uid made us non-dumpable, which makes /proc/self root's: the maps could
        // not be opened. The exec makes us dumpable again anyway.
        if libc::syscall(libc::SYS_prctl, libc::PR_SET_DUMPABLE, 1usize) != 0 {
            fail(s, 4);
        }
        for (path, data, len) in s.maps {
            let fd = libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path, libc::O_WRONLY) as i32;
            if fd < 0 || libc::syscall(libc::SYS_write, fd, data, len) != len as libc::c_long {
                fail(s, 5);
            }
            libc::syscall(libc::SYS_close, fd);
        }
        // Root of the new namespace until the exec, and still after it: ambient capabilities
        // (the jail user is not uid 0 there, so an exec would otherwise drop them all). init
        // clears every set, ambient included, before anything of the skill runs.
        let mut hdr = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let mut data = [CapData::default(); 2];
        if libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) != 0 {
            fail(s, 6);
        }
        for d in &mut data {
            d.inheritable = d.permitted;
        }
        if libc::syscall(libc::SYS_capset, &mut hdr, data.as_ptr()) != 0 {
            fail(s, 6);
        }
        for cap in 0..64 {
            let r = libc::syscall(
                libc::SYS_prctl,
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_RAISE,
                cap,
                0usize,
                0usize,
            );
            if r != 0 {
                // Past the kernel's last capability.
                if errno() == libc::EINVAL && cap > 0 {
                    break;
                }
                fail(s, 6);
            }
        }
        // Last of the credential changes: each of them clears it.
        if libc::syscall(libc::SYS_prctl, libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            fail(s, 7);
        }
        // Its own process group: a terminal's Ctrl-C reaches only the supervisor, which then
        // ends the run and still writes the report.
        if libc::syscall(libc::SYS_setpgid, 0usize, 0usize) != 0 {
            fail(s, 8);
        }
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &s.orig_mask,
            0usize,
            8usize,
        );
        libc::syscall(libc::SYS_execve, s.program, s.argv, s.envp);
        fail(s, 9)
    }
}

/// Records where the child failed and ends it.
fn fail(s: &mut Shared, step: usize) -> ! {
    s.errno = errno();
    s.failed_step = step;
    loop {
        // SAFETY: ends this child only; never returns.
        unsafe { libc::syscall(libc::SYS_exit_group, 127) };
    }
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `argv` for the jail binary, as C strings.
pub fn c_args<'a>(args: impl IntoIterator<Item = &'a OsStr>) -> io::Result<Vec<CString>> {
    args.into_iter()
        .map(|a| {
            CString::new(a.as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in an argument"))
        })
        .collect()
}
