//! Seccomp notifications: copy the arguments once, replay the call here with the jail's identity,
//! answer the task with our result (and our fd), record exactly what was done.

use super::{open_replay, Tracer};
use crate::jail::filter::{classify, syscall_name, Class};
use crate::jail::sys::{self, own};
use crate::trace::{EventKind, FileOp, NetOp, SysResult};
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

const PATH_MAX: usize = 4096;

/// The open flags, by name, for the trace.
pub fn open_flag_names(flags: i32) -> Vec<String> {
    let mut v = vec![match flags & libc::O_ACCMODE {
        libc::O_WRONLY => "O_WRONLY",
        libc::O_RDWR => "O_RDWR",
        _ => "O_RDONLY",
    }
    .to_string()];
    for (f, n) in [
        (libc::O_CREAT, "O_CREAT"),
        (libc::O_EXCL, "O_EXCL"),
        (libc::O_TRUNC, "O_TRUNC"),
        (libc::O_APPEND, "O_APPEND"),
        (libc::O_NONBLOCK, "O_NONBLOCK"),
        (libc::O_DIRECTORY, "O_DIRECTORY"),
        (libc::O_NOFOLLOW, "O_NOFOLLOW"),
        (libc::O_CLOEXEC, "O_CLOEXEC"),
        (libc::O_PATH, "O_PATH"),
        (libc::O_TMPFILE & !libc::O_DIRECTORY, "O_TMPFILE"),
    ] {
        if flags & f == f {
            v.push(n.to_string());
        }
    }
    v
}

pub fn opens_for_write(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY || flags & (libc::O_CREAT | libc::O_TRUNC) != 0
}

/// Rewrites paths that name "the calling process" (`/proc/self`, `/dev/fd/N`, …): replayed from the
/// tracer they would otherwise name the tracer.
pub fn rewrite_self(path: &[u8], vtgid: i32, vtid: i32) -> Vec<u8> {
    let fixups: [(&[u8], String); 6] = [
        (b"/proc/self", format!("/proc/{vtgid}")),
        (b"/proc/thread-self", format!("/proc/{vtgid}/task/{vtid}")),
        (b"/dev/fd", format!("/proc/{vtgid}/fd")),
        (b"/dev/stdin", format!("/proc/{vtgid}/fd/0")),
        (b"/dev/stdout", format!("/proc/{vtgid}/fd/1")),
        (b"/dev/stderr", format!("/proc/{vtgid}/fd/2")),
    ];
    for (prefix, repl) in fixups {
        if let Some(rest) = path.strip_prefix(prefix) {
            if rest.is_empty() || rest.starts_with(b"/") {
                let mut v = repl.into_bytes();
                v.extend_from_slice(rest);
                return v;
            }
        }
    }
    path.to_vec()
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Decodes a sockaddr into (family, address, port).
pub fn decode_sockaddr(b: &[u8]) -> (String, Option<String>, Option<u16>) {
    if b.len() < 2 {
        return ("other".into(), None, None);
    }
    let fam = u16::from_ne_bytes([b[0], b[1]]) as i32;
    match fam {
        libc::AF_INET if b.len() >= 8 => {
            let port = u16::from_be_bytes([b[2], b[3]]);
            let ip = std::net::Ipv4Addr::new(b[4], b[5], b[6], b[7]);
            ("inet".into(), Some(ip.to_string()), Some(port))
        }
        libc::AF_INET6 if b.len() >= 24 => {
            let port = u16::from_be_bytes([b[2], b[3]]);
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[8..24]);
            (
                "inet6".into(),
                Some(std::net::Ipv6Addr::from(a).to_string()),
                Some(port),
            )
        }
        libc::AF_UNIX => {
            let p = &b[2..];
            let s = if p.first() == Some(&0) {
                // Abstract socket: shown with a leading '@'.
                format!(
                    "@{}",
                    String::from_utf8_lossy(&p[1..]).trim_end_matches('\0')
                )
            } else {
                let end = p.iter().position(|&c| c == 0).unwrap_or(p.len());
                String::from_utf8_lossy(&p[..end]).into_owned()
            };
            ("unix".into(), Some(s), None)
        }
        libc::AF_NETLINK => ("netlink".into(), None, None),
        _ => ("other".into(), None, None),
    }
}

fn is_loopback(addr: &str) -> bool {
    addr.parse::<std::net::IpAddr>()
        .map(|a| a.is_loopback() || a.is_unspecified())
        .unwrap_or(false)
}

fn res(r: libc::c_long) -> Result<i64, i32> {
    if r < 0 {
        Err(sys::last_err().raw_os_error().unwrap_or(libc::EIO))
    } else {
        Ok(r)
    }
}

/// Landlock refuses writes outside the writable roots with EACCES before the read-only mount
/// would say EROFS; the replayed call sees only the mount, so answer as the task would have seen.
fn as_jail_errno(e: i32) -> i32 {
    if e == libc::EROFS {
        libc::EACCES
    } else {
        e
    }
}

fn sysres(r: &Result<i64, i32>) -> SysResult {
    match r {
        Ok(v) => SysResult::ok(*v),
        Err(e) => SysResult::errno(*e),
    }
}

pub(super) struct Call {
    pub id: u64,
    pub tid: i32,
    pub nr: i64,
    pub args: [u64; 6],
}

impl Tracer {
    pub(super) fn handle_notification(&mut self, listener: RawFd) {
        let n = match sys::notif_recv(listener) {
            Ok(n) => n,
            Err(_) => return, // the task died while waiting (ENOENT) or we were interrupted
        };
        let call = Call {
            id: n.id,
            tid: n.pid as i32,
            nr: n.data.nr as i64,
            args: n.data.args,
        };
        let answer = match classify(call.nr, call.args[0]) {
            Class::Deny => {
                self.emit(
                    call.tid,
                    EventKind::Denied {
                        syscall: syscall_name(call.nr).into(),
                        nr: call.nr,
                        arch: "x86_64".into(),
                        action: "errno".into(),
                    },
                );
                Some(Err(libc::EPERM))
            }
            Class::Pretend if call.tid == self.init_pid => {
                // pid 1 hides its own fds this way once the tracer has taken them.
                let _ = sys::notif_continue(listener, call.id);
                None
            }
            Class::Pretend => {
                self.emit(
                    call.tid,
                    EventKind::Denied {
                        syscall: syscall_name(call.nr).into(),
                        nr: call.nr,
                        arch: "x86_64".into(),
                        action: "pretend".into(),
                    },
                );
                Some(Ok(0))
            }
            Class::Observe => self.observe(listener, &call),
        };
        // None: already answered (fd handed over, or continued).
        if let Some(r) = answer {
            let _ = sys::notif_respond(listener, call.id, r);
        }
    }

    fn observe(&mut self, listener: RawFd, c: &Call) -> Option<Result<i64, i32>> {
        let a = c.args;
        match c.nr {
            libc::SYS_open => self.do_open(
                listener,
                c,
                libc::AT_FDCWD,
                a[0],
                a[1] as i32,
                a[2] as u32,
                0,
            ),
            libc::SYS_creat => self.do_open(
                listener,
                c,
                libc::AT_FDCWD,
                a[0],
                libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                a[1] as u32,
                0,
            ),
            libc::SYS_openat => {
                self.do_open(listener, c, a[0] as i32, a[1], a[2] as i32, a[3] as u32, 0)
            }
            libc::SYS_openat2 => {
                let mut how = [0u8; 24];
                if a[3] < 24 || sys::read_mem(c.tid, a[2], &mut how).ok() != Some(24) {
                    return Some(Err(libc::EINVAL));
                }
                let flags = u64::from_ne_bytes(how[0..8].try_into().unwrap_or_default());
                let mode = u64::from_ne_bytes(how[8..16].try_into().unwrap_or_default());
                let resolve = u64::from_ne_bytes(how[16..24].try_into().unwrap_or_default());
                self.do_open(
                    listener,
                    c,
                    a[0] as i32,
                    a[1],
                    flags as i32,
                    mode as u32,
                    resolve,
                )
            }
            libc::SYS_connect | libc::SYS_bind => self.do_sock_addr(listener, c),
            libc::SYS_listen => self.do_listen(c),
            libc::SYS_uname => Some(self.do_uname(c)),
            libc::SYS_clock_gettime
            | libc::SYS_gettimeofday
            | libc::SYS_time
            | libc::SYS_nanosleep
            | libc::SYS_clock_nanosleep => self.do_time(listener, c),
            libc::SYS_sendto | libc::SYS_sendmsg | libc::SYS_sendmmsg => {
                self.record_send(c);
                let _ = sys::notif_continue(listener, c.id);
                None
            }
            _ => Some(self.do_path_op(listener, c)),
        }
    }

    /// Path bytes exactly as passed (names need not be UTF-8).
    fn read_path(&self, tid: i32, ptr: u64) -> Result<Vec<u8>, i32> {
        sys::read_cstring(tid, ptr, PATH_MAX).map_err(|e| e.raw_os_error().unwrap_or(libc::EFAULT))
    }

    /// A directory fd to resolve `path` from, as the task would: its cwd or its `dirfd`.
    fn base_dir(&mut self, tid: i32, dirfd: i32, path: &[u8]) -> Result<Option<OwnedFd>, i32> {
        if path.starts_with(b"/") {
            return Ok(None);
        }
        if dirfd == libc::AT_FDCWD {
            return sys::open_at(
                self.host_proc.as_raw_fd(),
                &format!("{tid}/cwd"),
                libc::O_PATH | libc::O_DIRECTORY,
            )
            .map(Some)
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EBADF));
        }
        let tgid = self.tgid_of(tid);
        let pidfd = self.pidfd(tgid).map_err(|_| libc::ESRCH)?;
        sys::pidfd_getfd(pidfd, dirfd)
            .map(Some)
            .map_err(|_| libc::EBADF)
    }

    /// A duplicate of the task's fd `fd` (its socket, for replaying calls on it).
    fn task_fd(&mut self, tid: i32, fd: i32) -> std::io::Result<OwnedFd> {
        let tgid = self.tgid_of(tid);
        self.pidfd(tgid).and_then(|p| sys::pidfd_getfd(p, fd))
    }

    fn fd_path(&self, fd: RawFd) -> Option<String> {
        sys::readlink_at(self.host_proc.as_raw_fd(), &format!("self/fd/{fd}")).ok()
    }

    /// The absolute path a (possibly relative) path names, with its parent resolved (so symlinked
    /// directories show where the write really went) and its last component kept as given.
    fn absolute(&self, base: Option<&OwnedFd>, path: &[u8]) -> String {
        let (dir, name): (&[u8], &[u8]) = match path.iter().rposition(|&b| b == b'/') {
            Some(0) => (b"/", &path[1..]),
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (b".", path),
        };
        let dfd = base.map(|b| b.as_raw_fd()).unwrap_or(libc::AT_FDCWD);
        let resolved = CString::new(dir.to_vec()).ok().and_then(|d| {
            // SAFETY: valid C string.
            let fd = unsafe { libc::openat(dfd, d.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
            (fd >= 0)
                .then(|| own(fd))
                .and_then(|f| self.fd_path(f.as_raw_fd()))
        });
        let name = lossy(name);
        match resolved {
            Some(d) if name.is_empty() => d,
            Some(d) if d == "/" => format!("/{name}"),
            Some(d) => format!("{d}/{name}"),
            None if path.starts_with(b"/") => lossy(path),
            None => {
                let b = base
                    .and_then(|b| self.fd_path(b.as_raw_fd()))
                    .unwrap_or_default();
                format!("{b}/{}", lossy(path))
            }
        }
    }

    fn target_umask(&self, tid: i32) -> u32 {
        let s =
            sys::read_at(self.host_proc.as_raw_fd(), &format!("{tid}/status")).unwrap_or_default();
        String::from_utf8_lossy(&s)
            .lines()
            .find(|l| l.starts_with("Umask:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| u32::from_str_radix(v, 8).ok())
            .unwrap_or(0o022)
    }

    fn rewrite_for(&self, tid: i32, path: &[u8]) -> Vec<u8> {
        if path.starts_with(b"/proc/self")
            || path.starts_with(b"/proc/thread-self")
            || path.starts_with(b"/dev/")
        {
            let (vt, vtid) = self.vids(tid);
            rewrite_self(path, vt, vtid)
        } else {
            path.to_vec()
        }
    }

    fn vids(&self, tid: i32) -> (i32, i32) {
        let tgid = self.tgid_of(tid);
        (
            self.cached_vpid(tgid).unwrap_or(tgid),
            self.cached_vpid(tid).unwrap_or(tid),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn do_open(
        &mut self,
        listener: RawFd,
        c: &Call,
        dirfd: i32,
        ptr: u64,
        flags: i32,
        mode: u32,
        resolve: u64,
    ) -> Option<Result<i64, i32>> {
        let raw = match self.read_path(c.tid, ptr) {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        let requested = lossy(&raw);
        if !sys::notif_id_valid(listener, c.id) {
            return None;
        }
        let path = self.rewrite_for(c.tid, &raw);
        let base = match self.base_dir(c.tid, dirfd, &path) {
            Ok(b) => b,
            Err(e) => {
                self.record_open(
                    c.tid,
                    requested.clone(),
                    requested,
                    flags,
                    SysResult::errno(e),
                );
                return Some(Err(e));
            }
        };
        let creates = flags & (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) != 0;
        let mode = if creates {
            mode & !self.target_umask(c.tid) & 0o7777
        } else {
            0
        };
        // Never block the tracer on a FIFO: open non-blocking, check the type, undo.
        let is_path = flags & libc::O_PATH != 0;
        let our_flags = flags | libc::O_CLOEXEC | if is_path { 0 } else { libc::O_NONBLOCK };
        let cpath = match CString::new(path.clone()) {
            Ok(p) => p,
            Err(_) => return Some(Err(libc::EINVAL)),
        };
        let dfd = base
            .as_ref()
            .map(|b| b.as_raw_fd())
            .unwrap_or(libc::AT_FDCWD);
        let openat2 = |flags: i32, resolve: u64| {
            // struct open_how { u64 flags, mode, resolve }
            let how: [u64; 3] = [flags as u64, mode as u64, resolve];
            // SAFETY: valid C string and open_how layout for the call.
            res(unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    dfd,
                    cpath.as_ptr(),
                    how.as_ptr(),
                    24usize,
                )
            })
        };
        // A clean absolute path opened without following a symlink is the file's path: no
        // read-back from the fd (a readlink per open). If a symlink is on the way (ELOOP), the
        // open is done again as asked and the path read back.
        let mut known = base.is_none() && open_replay::names_itself(&path);
        let r = if c.nr == libc::SYS_openat2 {
            let first = if known && resolve & open_replay::RESOLVE_NO_SYMLINKS == 0 {
                openat2(our_flags, resolve | open_replay::RESOLVE_NO_SYMLINKS)
            } else {
                Err(libc::ELOOP)
            };
            match first {
                Err(libc::ELOOP) => {
                    known = known && resolve & open_replay::RESOLVE_NO_SYMLINKS != 0;
                    openat2(our_flags, resolve)
                }
                r => r,
            }
        } else {
            let first = if known {
                // openat2 refuses flag bits legacy openat drops: drop them as it does.
                openat2(
                    our_flags & open_replay::KERNEL_OPEN_FLAGS,
                    open_replay::RESOLVE_NO_SYMLINKS,
                )
            } else {
                Err(libc::ELOOP)
            };
            match first {
                Err(libc::ELOOP) => {
                    known = false;
                    // SAFETY: valid C string.
                    res(unsafe {
                        libc::syscall(libc::SYS_openat, dfd, cpath.as_ptr(), our_flags, mode)
                    })
                }
                r => r,
            }
        };
        match r {
            Err(e) => {
                let e = as_jail_errno(e);
                let abs = self.absolute(base.as_ref(), &path);
                self.record_open(c.tid, abs, requested, flags, SysResult::errno(e));
                Some(Err(e))
            }
            Ok(fd) => {
                let fd = own(fd as RawFd);
                // SAFETY: zeroed stat is a valid out-buffer.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: st is a valid out-pointer.
                unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
                let actual = if known {
                    lossy(&path)
                } else {
                    self.fd_path(fd.as_raw_fd()).unwrap_or_else(|| lossy(&path))
                };
                // A FIFO's open blocks by design, and an O_PATH fd cannot be handed over (the
                // kernel's ADDFD refuses O_PATH files with EBADF): let the kernel do these. An
                // O_PATH fd gives no access to content; opens relative to it are replayed.
                if is_path || st.st_mode & libc::S_IFMT == libc::S_IFIFO {
                    drop(fd);
                    self.record_open(c.tid, actual, requested, flags, SysResult::unknown());
                    let _ = sys::notif_continue(listener, c.id);
                    return None;
                }
                if !is_path && flags & libc::O_NONBLOCK == 0 {
                    // Back to the status flags the task asked for (we added O_NONBLOCK).
                    let status =
                        flags & (libc::O_APPEND | libc::O_ASYNC | libc::O_DIRECT | libc::O_NOATIME);
                    // SAFETY: fcntl on our own fd.
                    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, status) };
                }
                match sys::notif_addfd_send(
                    listener,
                    c.id,
                    fd.as_raw_fd(),
                    flags & libc::O_CLOEXEC != 0,
                ) {
                    Ok(newfd) => self.record_open(
                        c.tid,
                        actual,
                        requested,
                        flags,
                        SysResult::ok(newfd as i64),
                    ),
                    Err(e) => {
                        let e = e.raw_os_error().unwrap_or(libc::EIO);
                        self.record_open(c.tid, actual, requested, flags, SysResult::errno(e));
                        // The task still waits for an answer (unless it is gone).
                        let _ = sys::notif_respond(listener, c.id, Err(e));
                    }
                }
                None
            }
        }
    }

    fn record_open(
        &self,
        tid: i32,
        path: String,
        requested: String,
        flags: i32,
        result: SysResult,
    ) {
        self.emit(
            tid,
            EventKind::Open {
                path,
                requested,
                flags: open_flag_names(flags),
                write: opens_for_write(flags),
                result,
            },
        );
    }

    /// unlink/rename/mkdir/rmdir/link/symlink/chmod/truncate, replayed with the *at calls.
    fn do_path_op(&mut self, listener: RawFd, c: &Call) -> Result<i64, i32> {
        let a = c.args;
        let at = libc::AT_FDCWD as u64;
        // (op, dirfd1, path1 ptr, dirfd2, path2 ptr, mode, flags, symlink target ptr)
        let (op, d1, p1, d2, p2, mode, flags) = match c.nr {
            libc::SYS_unlink => (FileOp::Unlink, at, a[0], at, 0, None, 0),
            libc::SYS_unlinkat => (
                if a[2] as i32 & libc::AT_REMOVEDIR != 0 {
                    FileOp::Rmdir
                } else {
                    FileOp::Unlink
                },
                a[0],
                a[1],
                at,
                0,
                None,
                a[2] as i32,
            ),
            libc::SYS_rmdir => (FileOp::Rmdir, at, a[0], at, 0, None, libc::AT_REMOVEDIR),
            libc::SYS_mkdir => (FileOp::Mkdir, at, a[0], at, 0, Some(a[1] as u32), 0),
            libc::SYS_mkdirat => (FileOp::Mkdir, a[0], a[1], at, 0, Some(a[2] as u32), 0),
            libc::SYS_rename => (FileOp::Rename, at, a[0], at, a[1], None, 0),
            libc::SYS_renameat => (FileOp::Rename, a[0], a[1], a[2], a[3], None, 0),
            libc::SYS_renameat2 => (FileOp::Rename, a[0], a[1], a[2], a[3], None, a[4] as i32),
            libc::SYS_link => (FileOp::Link, at, a[0], at, a[1], None, 0),
            libc::SYS_linkat => (FileOp::Link, a[0], a[1], a[2], a[3], None, a[4] as i32),
            // symlink(target, linkpath): the target is only a string; the link is the path.
            libc::SYS_symlink => (FileOp::Symlink, at, a[1], at, 0, None, 0),
            libc::SYS_symlinkat => (FileOp::Symlink, a[1], a[2], at, 0, None, 0),
            libc::SYS_chmod => (FileOp::Chmod, at, a[0], at, 0, Some(a[1] as u32), 0),
            libc::SYS_fchmodat => (FileOp::Chmod, a[0], a[1], at, 0, Some(a[2] as u32), 0),
            libc::SYS_fchmodat2 => (
                FileOp::Chmod,
                a[0],
                a[1],
                at,
                0,
                Some(a[2] as u32),
                a[3] as i32,
            ),
            libc::SYS_truncate => (FileOp::Truncate, at, a[0], at, 0, None, 0),
            _ => {
                let _ = sys::notif_continue(listener, c.id);
                return Ok(0);
            }
        };
        let path1 = self.rewrite_for(c.tid, &self.read_path(c.tid, p1)?);
        let path2 = if p2 != 0 {
            Some(self.rewrite_for(c.tid, &self.read_path(c.tid, p2)?))
        } else {
            None
        };
        let link_target = match c.nr {
            libc::SYS_symlink | libc::SYS_symlinkat => Some(self.read_path(c.tid, a[0])?),
            _ => None,
        };
        if !sys::notif_id_valid(listener, c.id) {
            return Err(libc::ESRCH);
        }
        let b1 = self.base_dir(c.tid, d1 as i32, &path1)?;
        let b2 = match &path2 {
            Some(p) => self.base_dir(c.tid, d2 as i32, p)?,
            None => None,
        };
        let f1 = b1.as_ref().map(|b| b.as_raw_fd()).unwrap_or(libc::AT_FDCWD);
        let f2 = b2.as_ref().map(|b| b.as_raw_fd()).unwrap_or(libc::AT_FDCWD);
        let cp1 = CString::new(path1.clone()).map_err(|_| libc::EINVAL)?;
        let cp2 = path2
            .as_ref()
            .map(|p| CString::new(p.clone()))
            .transpose()
            .map_err(|_| libc::EINVAL)?;
        let umask = self.target_umask(c.tid);
        // Recorded before a delete or rename runs, so the resolved parent still exists.
        let abs1 = self.absolute(b1.as_ref(), &path1);
        let abs2 = path2.as_ref().map(|p| self.absolute(b2.as_ref(), p));
        // SAFETY (all arms): valid C strings and fds for the duration of each call.
        let r = unsafe {
            match c.nr {
                libc::SYS_unlink | libc::SYS_unlinkat | libc::SYS_rmdir => {
                    res(libc::syscall(libc::SYS_unlinkat, f1, cp1.as_ptr(), flags))
                }
                libc::SYS_mkdir | libc::SYS_mkdirat => res(libc::syscall(
                    libc::SYS_mkdirat,
                    f1,
                    cp1.as_ptr(),
                    mode.unwrap_or(0o777) & !umask & 0o7777,
                )),
                libc::SYS_rename | libc::SYS_renameat | libc::SYS_renameat2 => res(libc::syscall(
                    libc::SYS_renameat2,
                    f1,
                    cp1.as_ptr(),
                    f2,
                    cp2.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()),
                    flags,
                )),
                libc::SYS_link | libc::SYS_linkat => res(libc::syscall(
                    libc::SYS_linkat,
                    f1,
                    cp1.as_ptr(),
                    f2,
                    cp2.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()),
                    flags,
                )),
                libc::SYS_symlink | libc::SYS_symlinkat => {
                    let t = CString::new(link_target.clone().unwrap_or_default())
                        .map_err(|_| libc::EINVAL)?;
                    res(libc::syscall(
                        libc::SYS_symlinkat,
                        t.as_ptr(),
                        f1,
                        cp1.as_ptr(),
                    ))
                }
                libc::SYS_chmod | libc::SYS_fchmodat | libc::SYS_fchmodat2 => res(libc::syscall(
                    libc::SYS_fchmodat2,
                    f1,
                    cp1.as_ptr(),
                    mode.unwrap_or(0),
                    flags,
                )),
                _ => {
                    // truncate has no *at form: resolve to an fd first (needs write permission,
                    // as truncate does).
                    let fd = libc::openat(
                        f1,
                        cp1.as_ptr(),
                        libc::O_WRONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
                    );
                    if fd < 0 {
                        Err(sys::last_err().raw_os_error().unwrap_or(libc::EIO))
                    } else {
                        let fd = own(fd);
                        res(libc::ftruncate(fd.as_raw_fd(), a[1] as i64) as libc::c_long)
                    }
                }
            }
        };
        let r = r.map_err(as_jail_errno);
        let (path, path2) = match (op, link_target) {
            (FileOp::Symlink, Some(t)) => (abs1, Some(lossy(&t))),
            _ => (abs1, abs2),
        };
        self.emit(
            c.tid,
            EventKind::FileOp {
                op,
                path,
                path2,
                mode,
                result: sysres(&r),
            },
        );
        r
    }

    /// darwin-sim: answer `uname(2)` with the image's values (every language reads it), written
    /// into the task's `struct utsname` (6 fields of 65 bytes).
    fn do_uname(&self, c: &Call) -> Result<i64, i32> {
        let Some(u) = &self.spec.uname else {
            return Err(libc::ENOSYS);
        };
        let mut buf = vec![0u8; 65 * 6];
        let domain = "(none)".to_string();
        for (i, f) in [
            &u.sysname,
            &u.nodename,
            &u.release,
            &u.version,
            &u.machine,
            &domain,
        ]
        .iter()
        .enumerate()
        {
            let b = f.as_bytes();
            let n = b.len().min(64);
            buf[i * 65..i * 65 + n].copy_from_slice(&b[..n]);
        }
        sys::write_mem(c.tid, c.args[0], &buf)
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EFAULT))?;
        Ok(0)
    }

    fn read_sockaddr(&self, tid: i32, ptr: u64, len: u64) -> Result<Vec<u8>, i32> {
        let len = (len as usize).min(128);
        let mut b = vec![0u8; len];
        match sys::read_mem(tid, ptr, &mut b) {
            Ok(n) if n == len => Ok(b),
            _ => Err(libc::EFAULT),
        }
    }

    /// connect and bind: replayed on a duplicate of the task's socket, except where replaying could
    /// block the tracer (loopback and unix connects, which are local and seen whole by the kernel;
    /// their address is recorded and the kernel runs the call).
    fn do_sock_addr(&mut self, listener: RawFd, c: &Call) -> Option<Result<i64, i32>> {
        let a = c.args;
        let op = if c.nr == libc::SYS_connect {
            NetOp::Connect
        } else {
            NetOp::Bind
        };
        let addr = match self.read_sockaddr(c.tid, a[1], a[2]) {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        let (family, host, port) = decode_sockaddr(&addr);
        if !sys::notif_id_valid(listener, c.id) {
            return None;
        }
        let local = host.as_deref().map(is_loopback).unwrap_or(true);
        if op == NetOp::Connect
            && (family == "unix" || family == "netlink" || family == "other" || local)
        {
            self.emit(
                c.tid,
                EventKind::Net {
                    op,
                    family,
                    addr: host,
                    port,
                    bytes: None,
                    local_port: None,
                    result: SysResult::unknown(),
                },
            );
            let _ = sys::notif_continue(listener, c.id);
            return None;
        }
        let sock = match self.task_fd(c.tid, a[0] as i32) {
            Ok(s) => s,
            Err(_) => return Some(Err(libc::EBADF)),
        };
        // Relative unix socket paths resolve from the task's cwd.
        let cwd = if family == "unix" {
            self.base_dir(c.tid, libc::AT_FDCWD, b"rel").ok().flatten()
        } else {
            None
        };
        if let Some(cwd) = &cwd {
            // SAFETY: fchdir to a directory fd we own; we return to / below.
            unsafe { libc::fchdir(cwd.as_raw_fd()) };
        }
        let sysno = if op == NetOp::Connect {
            libc::SYS_connect
        } else {
            libc::SYS_bind
        };
        let umask_old = if family == "unix" {
            // SAFETY: umask on our own process.
            Some(unsafe { libc::umask(self.target_umask(c.tid) as libc::mode_t) })
        } else {
            None
        };
        // SAFETY: addr is a readable buffer of the given length.
        let r = res(unsafe { libc::syscall(sysno, sock.as_raw_fd(), addr.as_ptr(), addr.len()) })
            .map_err(as_jail_errno);
        if let Some(m) = umask_old {
            // SAFETY: restoring our umask.
            unsafe { libc::umask(m) };
        }
        if cwd.is_some() {
            let _ = std::env::set_current_dir("/");
        }
        let local_port = if r.is_ok() && (family == "inet" || family == "inet6") {
            local_port(&sock)
        } else {
            None
        };
        self.emit(
            c.tid,
            EventKind::Net {
                op,
                family,
                addr: host,
                port,
                bytes: None,
                local_port,
                result: sysres(&r),
            },
        );
        Some(r)
    }

    fn do_listen(&mut self, c: &Call) -> Option<Result<i64, i32>> {
        let sock = match self.task_fd(c.tid, c.args[0] as i32) {
            Ok(s) => s,
            Err(_) => return Some(Err(libc::EBADF)),
        };
        // SAFETY: listen on our duplicate of the task's socket.
        let r = res(unsafe { libc::listen(sock.as_raw_fd(), c.args[1] as i32) as libc::c_long });
        let (family, addr, port) = sock_name(&sock);
        self.emit(
            c.tid,
            EventKind::Net {
                op: NetOp::Listen,
                family,
                addr,
                port,
                bytes: None,
                local_port: None,
                result: sysres(&r),
            },
        );
        Some(r)
    }

    fn record_send(&mut self, c: &Call) {
        let a = c.args;
        let emit_one = |this: &Self, op: NetOp, name: u64, namelen: u64, bytes: u64| {
            if name == 0 {
                return;
            }
            if let Ok(b) = this.read_sockaddr(c.tid, name, namelen) {
                let (family, addr, port) = decode_sockaddr(&b);
                this.emit(
                    c.tid,
                    EventKind::Net {
                        op,
                        family,
                        addr,
                        port,
                        bytes: Some(bytes),
                        local_port: None,
                        result: SysResult::unknown(),
                    },
                );
            }
        };
        match c.nr {
            libc::SYS_sendto => emit_one(self, NetOp::Sendto, a[4], a[5], a[2]),
            libc::SYS_sendmsg => {
                if let Some((name, namelen, bytes)) = self.read_msghdr(c.tid, a[1]) {
                    emit_one(self, NetOp::Sendmsg, name, namelen, bytes);
                }
            }
            _ => {
                // sendmmsg: struct mmsghdr { msghdr (56 bytes); unsigned int len; } (64 bytes)
                for i in 0..a[2].min(16) {
                    if let Some((name, namelen, bytes)) = self.read_msghdr(c.tid, a[1] + i * 64) {
                        emit_one(self, NetOp::Sendmsg, name, namelen, bytes);
                    }
                }
            }
        }
    }

    /// (msg_name, msg_namelen, total iov bytes) of a struct msghdr in the task.
    fn read_msghdr(&self, tid: i32, ptr: u64) -> Option<(u64, u64, u64)> {
        let mut h = [0u8; 56];
        if sys::read_mem(tid, ptr, &mut h).ok()? != 56 {
            return None;
        }
        let u = |o: usize| u64::from_ne_bytes(h[o..o + 8].try_into().unwrap_or_default());
        let (name, namelen, iov, iovlen) = (u(0), u(8) & 0xffff_ffff, u(16), u(24));
        let mut bytes = 0u64;
        for i in 0..iovlen.min(64) {
            let mut e = [0u8; 16];
            if sys::read_mem(tid, iov + i * 16, &mut e).ok()? != 16 {
                break;
            }
            bytes += u64::from_ne_bytes(e[8..16].try_into().unwrap_or_default());
        }
        Some((name, namelen, bytes))
    }
}

fn sock_name(sock: &OwnedFd) -> (String, Option<String>, Option<u16>) {
    let mut b = [0u8; 128];
    let mut len = b.len() as libc::socklen_t;
    // SAFETY: b is writable for len bytes.
    if unsafe { libc::getsockname(sock.as_raw_fd(), b.as_mut_ptr().cast(), &mut len) } != 0 {
        return ("other".into(), None, None);
    }
    decode_sockaddr(&b[..(len as usize).min(128)])
}

fn local_port(sock: &OwnedFd) -> Option<u16> {
    sock_name(sock).2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_paths_are_rewritten() {
        let rw = |p: &str| String::from_utf8(rewrite_self(p.as_bytes(), 7, 9)).unwrap();
        assert_eq!(rw("/proc/self/environ"), "/proc/7/environ");
        assert_eq!(rw("/proc/self"), "/proc/7");
        assert_eq!(rw("/proc/thread-self/comm"), "/proc/7/task/9/comm");
        assert_eq!(rw("/dev/fd/3"), "/proc/7/fd/3");
        assert_eq!(rw("/dev/stdin"), "/proc/7/fd/0");
        assert_eq!(rw("/proc/selfish"), "/proc/selfish");
        assert_eq!(rw("rel/proc/self"), "rel/proc/self");
    }

    #[test]
    fn sockaddrs_decode() {
        let mut v4 = vec![0u8; 16];
        v4[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&4444u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[203, 0, 113, 7]);
        assert_eq!(
            decode_sockaddr(&v4),
            ("inet".into(), Some("203.0.113.7".into()), Some(4444))
        );
        let mut un = vec![0u8; 13];
        un[0..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        un[2..].copy_from_slice(b"/tmp/sock\0\0");
        assert_eq!(decode_sockaddr(&un).1.as_deref(), Some("/tmp/sock"));
        un[2] = 0;
        assert!(decode_sockaddr(&un).1.unwrap().starts_with('@'));
        assert_eq!(decode_sockaddr(&[1]).0, "other");
    }

    #[test]
    fn flags_named() {
        let f = open_flag_names(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC);
        assert_eq!(f, vec!["O_WRONLY", "O_CREAT", "O_TRUNC"]);
        assert!(opens_for_write(libc::O_RDONLY | libc::O_CREAT));
        assert!(!opens_for_write(libc::O_RDONLY | libc::O_CLOEXEC));
    }
}
