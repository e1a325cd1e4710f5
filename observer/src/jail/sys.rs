//! Thin wrappers over the raw kernel interfaces the jail and tracer need and that neither `nix` nor
//! `libc` wrap (seccomp user notification, pidfd_getfd, remote memory reads).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub fn last_err() -> io::Error {
    io::Error::last_os_error()
}

pub fn cvt(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(last_err())
    } else {
        Ok(r)
    }
}

pub fn cvt_i(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(last_err())
    } else {
        Ok(r)
    }
}

pub fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

pub fn own(fd: RawFd) -> OwnedFd {
    // SAFETY: callers pass a freshly created fd that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments.
    let r = cvt(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })?;
    Ok(own(r as RawFd))
}

/// A `poll` entry waiting for input on `fd` (a negative fd is skipped by the kernel).
pub fn pollin(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Runs an inspection of a jail task (its memory, fds, cwd) and, when the kernel refuses it
/// because the task is not dumpable (the jail's init, and its children until they exec), runs it
/// again with CAP_SYS_PTRACE raised for that call only. The tracer keeps the capability
/// permitted but not effective, so the calls it replays for the jail meet exactly the checks
/// the jail's own tasks meet (`/proc/1/maps` stays closed to them).
pub fn inspect<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    use caps::{CapSet, Capability};
    match f() {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) => {
            if caps::raise(None, CapSet::Effective, Capability::CAP_SYS_PTRACE).is_err() {
                return Err(e);
            }
            let r = f();
            let _ = caps::drop(None, CapSet::Effective, Capability::CAP_SYS_PTRACE);
            r
        }
        r => r,
    }
}

/// Duplicates `targetfd` of the process behind `pidfd` into this process (close-on-exec).
pub fn pidfd_getfd(pidfd: &OwnedFd, targetfd: i32) -> io::Result<OwnedFd> {
    inspect(|| {
        // SAFETY: plain syscall with integer arguments.
        let r =
            cvt(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), targetfd, 0) })?;
        Ok(own(r as RawFd))
    })
}

/// Reads up to `buf.len()` bytes at `addr` in `pid`'s address space; returns the count read.
pub fn read_mem(pid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    if buf.is_empty() {
        return Ok(0);
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    inspect(|| {
        // SAFETY: the local iovec points into `buf`; the remote one is only dereferenced by the
        // kernel.
        let r = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        if r < 0 {
            Err(last_err())
        } else {
            Ok(r as usize)
        }
    })
}

/// Writes `buf` at `addr` in `pid`'s address space.
pub fn write_mem(pid: i32, addr: u64, buf: &[u8]) -> io::Result<()> {
    let local = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the local iovec points into `buf` (only read); the remote one is the kernel's.
    let r = inspect(|| {
        cvt(unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) } as libc::c_long)
    })
    .unwrap_or(-1);
    if r < 0 {
        Err(last_err())
    } else if r as usize != buf.len() {
        Err(io::Error::from_raw_os_error(libc::EFAULT))
    } else {
        Ok(())
    }
}

/// Writes `buf` at `addr` in the memory of `tid`, a tracee of ours in a ptrace stop, through
/// `PTRACE_PEEKDATA`/`POKEDATA`: read-only pages (code) included, as a debugger sets a
/// breakpoint, and without the ownership checks `/proc/<pid>/mem` makes.
pub fn poke_mem(tid: i32, addr: u64, buf: &[u8]) -> io::Result<()> {
    let end = addr
        .checked_add(buf.len() as u64)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
    let mut word = addr & !7;
    while word < end {
        // SAFETY: PEEKDATA returns the word; errno tells a failure from a word of -1.
        let old = unsafe {
            *libc::__errno_location() = 0;
            libc::ptrace(libc::PTRACE_PEEKDATA, tid, word, 0)
        };
        if old == -1 && last_err().raw_os_error().unwrap_or(0) != 0 {
            return Err(last_err());
        }
        let mut bytes = old.to_ne_bytes();
        for (i, b) in bytes.iter_mut().enumerate() {
            let a = word + i as u64;
            if (addr..end).contains(&a) {
                *b = buf[(a - addr) as usize];
            }
        }
        // SAFETY: POKEDATA writes one word into our stopped tracee.
        cvt(unsafe {
            libc::ptrace(
                libc::PTRACE_POKEDATA,
                tid,
                word,
                libc::c_long::from_ne_bytes(bytes),
            )
        })?;
        word += 8;
    }
    Ok(())
}

/// Reads a NUL-terminated string of at most `max` bytes. Reads page by page so a string that
/// ends just before an unmapped page is still read.
pub fn read_cstring(pid: i32, addr: u64, max: usize) -> io::Result<Vec<u8>> {
    if addr == 0 {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    let mut out = Vec::new();
    let mut cur = addr;
    while out.len() < max {
        let page_left = 4096 - (cur % 4096) as usize;
        let want = page_left.min(max - out.len());
        let mut chunk = vec![0u8; want];
        let n = read_mem(pid, cur, &mut chunk)?;
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        if let Some(z) = chunk[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..z]);
            return Ok(out);
        }
        out.extend_from_slice(&chunk[..n]);
        cur += n as u64;
    }
    Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG))
}

pub fn read_u64(pid: i32, addr: u64) -> io::Result<u64> {
    let mut b = [0u8; 8];
    if read_mem(pid, addr, &mut b)? != 8 {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(u64::from_ne_bytes(b))
}

/// Reads a NULL-terminated array of string pointers (argv), bounded in count and bytes.
pub fn read_argv(
    pid: i32,
    addr: u64,
    max_args: usize,
    max_bytes: usize,
) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut total = 0usize;
    if addr == 0 {
        return Ok(out);
    }
    for i in 0..max_args {
        let p = read_u64(pid, addr + (i as u64) * 8)?;
        if p == 0 {
            return Ok(out);
        }
        let s = read_cstring(pid, p, 64 * 1024).unwrap_or_default();
        total += s.len();
        out.push(String::from_utf8_lossy(&s).into_owned());
        if total > max_bytes {
            out.push("…(truncated)".into());
            return Ok(out);
        }
    }
    out.push("…(truncated)".into());
    Ok(out)
}

// ---- seccomp user notification ----

pub fn notif_recv(fd: RawFd) -> io::Result<libc::seccomp_notif> {
    // SAFETY: zeroed is a valid seccomp_notif (plain integers); the kernel fills it in.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes at most sizeof(seccomp_notif) bytes into `n`.
    cvt_i(unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut n) })?;
    Ok(n)
}

pub fn notif_id_valid(fd: RawFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads one u64.
    unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _, &mut id) == 0 }
}

/// Answers a notification: `Ok(v)` returns `v`, `Err(e)` fails with errno `e`.
pub fn notif_respond(fd: RawFd, id: u64, res: Result<i64, i32>) -> io::Result<()> {
    let (val, error) = match res {
        Ok(v) => (v, 0),
        Err(e) => (0, -e),
    };
    let mut r = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags: 0,
    };
    // SAFETY: the ioctl reads one seccomp_notif_resp.
    cvt_i(unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND as _, &mut r) })?;
    Ok(())
}

/// Lets the kernel run the call as the task made it.
pub fn notif_continue(fd: RawFd, id: u64) -> io::Result<()> {
    let mut r = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: the ioctl reads one seccomp_notif_resp.
    cvt_i(unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND as _, &mut r) })?;
    Ok(())
}

/// Installs `src` in the target as a new fd and answers the notification with its number.
pub fn notif_addfd_send(fd: RawFd, id: u64, src: RawFd, cloexec: bool) -> io::Result<i32> {
    let mut a = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: src as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the ioctl reads one seccomp_notif_addfd.
    cvt_i(unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_ADDFD as _, &mut a) })
}

/// Wakes the supervisor on the CPU of the notifying task (avoids ~70 µs cross-CPU wake-ups).
pub fn notif_set_sync_wakeup(fd: RawFd) -> io::Result<()> {
    // SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP; this ioctl takes its argument by value.
    // SAFETY: no pointer is passed.
    cvt_i(unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _, 1u64) })?;
    Ok(())
}

/// Every signal back to its default disposition, 1 to 64 — also 32 and 33, which libc's
/// `signal` refuses to touch (it keeps them for itself) but a caller may have left ignored. With
/// `keep_ignored`, a signal ignored now stays ignored (an exec keeps that), except SIGPIPE, which
/// a program expects at its default. Raw system calls only: safe between fork (or a vfork-style
/// clone) and exec; every signal is tried, and the first refused change is the error.
pub fn default_signal_dispositions(keep_ignored: bool) -> io::Result<()> {
    let dfl = KSigaction::default();
    let mut first_err = Ok(());
    for sig in 1..65 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        if keep_ignored && sig != libc::SIGPIPE {
            let mut old = KSigaction::default();
            // SAFETY: reads the kernel's sigaction into `old`.
            let r = unsafe { libc::syscall(libc::SYS_rt_sigaction, sig, 0usize, &mut old, 8usize) };
            if r != 0 || old.handler == libc::SIG_DFL || old.handler == libc::SIG_IGN {
                continue;
            }
        }
        // SAFETY: the kernel's sigaction layout, SIG_DFL.
        if unsafe { libc::syscall(libc::SYS_rt_sigaction, sig, &dfl, 0usize, 8usize) } != 0
            && first_err.is_ok()
        {
            first_err = Err(last_err());
        }
    }
    first_err
}

/// The kernel's `struct sigaction` on x86_64 (not libc's).
#[repr(C)]
#[derive(Default)]
struct KSigaction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

/// Restricts the calling thread to the CPU it is running on, when it may run on several (so runs
/// started side by side spread over the CPUs). Best effort: the mask is left as it was on error.
pub fn pin_to_current_cpu() {
    // SAFETY: plain getters and a setter on our own thread with a valid, zero-initialised set.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let cpu = libc::sched_getcpu();
        if cpu < 0
            || libc::sched_getaffinity(0, size, &mut allowed) != 0
            || libc::CPU_COUNT(&allowed) < 2
            || !libc::CPU_ISSET(cpu as usize, &allowed)
        {
            return;
        }
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut one);
        libc::sched_setaffinity(0, size, &one);
    }
}

/// Installs a classic-BPF seccomp filter on the calling thread; returns the notification fd.
pub fn seccomp_install(prog: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `fprog` points to `prog`, alive for the call.
    let r = cvt(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    })?;
    Ok(own(r as RawFd))
}

/// Reads a link; under the host's `/proc` an inspection of a jail task (see [`inspect`]).
pub fn readlink_at(dirfd: RawFd, path: &str) -> io::Result<String> {
    let c = cstr(path)?;
    let mut buf = vec![0u8; 4096];
    let n = inspect(|| {
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::readlinkat(dirfd, c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(last_err())
        } else {
            Ok(n)
        }
    })?;
    buf.truncate(n as usize);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

pub fn read_at(dirfd: RawFd, path: &str) -> io::Result<Vec<u8>> {
    let c = cstr(path)?;
    // SAFETY: plain openat with a valid C string.
    let fd = cvt_i(unsafe { libc::openat(dirfd, c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
    let f = std::fs::File::from(own(fd));
    let mut v = Vec::new();
    std::io::Read::read_to_end(&mut &f, &mut v)?;
    Ok(v)
}

/// Opens a file; under the host's `/proc` an inspection of a jail task (see [`inspect`]). Never
/// used to replay a jail task's own open.
pub fn open_at(dirfd: RawFd, path: &str, flags: i32) -> io::Result<OwnedFd> {
    let c = cstr(path)?;
    // SAFETY: plain openat with a valid C string.
    let fd =
        inspect(|| cvt_i(unsafe { libc::openat(dirfd, c.as_ptr(), flags | libc::O_CLOEXEC, 0) }))?;
    Ok(own(fd))
}

pub fn write_all_fd(fd: RawFd, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        // SAFETY: data is readable for its length.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 {
            let e = last_err();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        data = &data[n as usize..];
    }
    Ok(())
}

pub fn read_byte(fd: RawFd) -> io::Result<u8> {
    let mut b = [0u8; 1];
    loop {
        // SAFETY: reads one byte into b.
        let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) };
        if n == 1 {
            return Ok(b[0]);
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        let e = last_err();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
