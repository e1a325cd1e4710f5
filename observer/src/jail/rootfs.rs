//! Builds the jail's root: a fresh tmpfs with the system directories bound read-only, a synthetic
//! home and workspace, a fresh `/proc`, a minimal `/dev`; then `pivot_root` so no host path stays
//! reachable. Runs in the jail's init (pid 1), which still holds its namespace capabilities here.

use super::spec::{FsEntry, JailSpec, ProcFile};
use super::sys::{cstr, cvt_i, last_err};
use std::ffi::CString;
use std::io;
use std::os::unix::fs::{symlink, DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

fn mount(
    src: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let src = src.map(cstr).transpose()?;
    let fstype = fstype.map(cstr).transpose()?;
    let data = data.map(cstr).transpose()?;
    let target = path_c(target)?;
    // SAFETY: all pointers are valid C strings or null for the duration of the call.
    cvt_i(unsafe {
        libc::mount(
            src.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            data.as_ref()
                .map_or(std::ptr::null(), |s| s.as_ptr().cast()),
        )
    })
    .map(|_| ())
    .map_err(|e| io::Error::new(e.kind(), format!("mount {}: {e}", target.to_string_lossy())))
}

fn tmpfs(target: &Path, flags: libc::c_ulong, opts: &str) -> io::Result<()> {
    mount(Some("tmpfs"), target, Some("tmpfs"), flags, Some(opts))
}

fn path_c(p: &Path) -> io::Result<CString> {
    cstr(&p.to_string_lossy())
}

/// Mount flags that a bind-remount inside a user namespace must keep (the kernel locks them).
fn locked_flags(p: &Path) -> io::Result<libc::c_ulong> {
    let c = path_c(p)?;
    // SAFETY: zeroed statvfs is valid; the kernel fills it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid C string; st is a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(last_err());
    }
    let mut f = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            f |= ms_flag;
        }
    }
    Ok(f)
}

fn bind_ro(src: &Path, dst: &Path) -> io::Result<()> {
    mount(Some(&src.to_string_lossy()), dst, None, libc::MS_BIND, None)?;
    let keep = locked_flags(dst)?;
    mount(
        None,
        dst,
        None,
        libc::MS_BIND
            | libc::MS_REMOUNT
            | libc::MS_RDONLY
            | libc::MS_NOSUID
            | libc::MS_NODEV
            | keep,
        None,
    )
}

fn under(root: &Path, p: &str) -> PathBuf {
    root.join(p.trim_start_matches('/'))
}

fn mkdirs(p: &Path, mode: u32) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(p)
}

/// Binds one host path read-only at the same place; host symlinks (merged-/usr `/bin`) are
/// recreated as symlinks. Missing host paths are skipped.
fn bind_host_path(root: &Path, host: &str) -> io::Result<()> {
    let hp = Path::new(host);
    let meta = match std::fs::symlink_metadata(hp) {
        Ok(m) => m,
        Err(_) => return Ok(()),
    };
    let dst = under(root, host);
    if let Some(parent) = dst.parent() {
        mkdirs(parent, 0o755)?;
    }
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(hp)?;
        return symlink(target, &dst);
    }
    if meta.is_dir() {
        mkdirs(&dst, 0o755)?;
    } else {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o644)
            .open(&dst)?;
    }
    bind_ro(hp, &dst)
}

fn set_mtime(p: &Path, mtime: i64) -> io::Result<()> {
    let c = path_c(p)?;
    let ts = [
        libc::timespec {
            tv_sec: mtime,
            tv_nsec: 0,
        },
        libc::timespec {
            tv_sec: mtime,
            tv_nsec: 0,
        },
    ];
    // SAFETY: valid C string and a two-element timespec array.
    cvt_i(unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            ts.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(|_| ())
}

/// Writes the entries: those inside an overlaid directory into the overlay's upper layer
/// (`ovl`), the rest into the root. Directory times are set last, deepest first, since creating
/// children touches them.
fn write_entries(
    root: &Path,
    ovl: &Path,
    overlay_dirs: &[String],
    entries: &[FsEntry],
) -> io::Result<()> {
    let in_ovl = |path: &str| {
        overlay_dirs.iter().any(|d| {
            path.strip_prefix(d.as_str())
                .is_some_and(|r| r.starts_with('/'))
        })
    };
    let base = |path: &str| under(if in_ovl(path) { ovl } else { root }, path);
    let mut dir_times = Vec::new();
    for e in entries {
        match e {
            FsEntry::Dir { path, mode, mtime } => {
                let p = base(path);
                // A directory the jail already provides as a link (merged-/usr `/bin`) stays one.
                if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
                    continue;
                }
                mkdirs(&p, 0o755)?;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode & 0o7777))?;
                if let Some(t) = mtime {
                    dir_times.push((p, *t));
                }
            }
            FsEntry::File {
                path,
                mode,
                data,
                mtime,
            } => {
                let p = base(path);
                if let Some(parent) = p.parent() {
                    mkdirs(parent, 0o755)?;
                }
                std::fs::write(&p, data)?;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode & 0o7777))?;
                if let Some(t) = mtime {
                    set_mtime(&p, *t)?;
                }
            }
            FsEntry::Symlink { path, target } => {
                let p = base(path);
                if let Some(parent) = p.parent() {
                    mkdirs(parent, 0o755)?;
                }
                symlink(target, &p)?;
            }
            // Only meaningful in an overlay's upper layer; elsewhere there is nothing to hide.
            FsEntry::Whiteout { path } if in_ovl(path) => {
                let p = base(path);
                if let Some(parent) = p.parent() {
                    mkdirs(parent, 0o755)?;
                }
                let c = path_c(&p)?;
                // SAFETY: valid C string. A 0/0 character device is overlayfs's whiteout, which
                // the kernel lets an unprivileged user namespace create.
                cvt_i(unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR, libc::makedev(0, 0)) })?;
            }
            FsEntry::Whiteout { .. } => {}
        }
    }
    dir_times.sort_by_key(|(p, _)| std::cmp::Reverse(p.components().count()));
    for (p, t) in dir_times {
        set_mtime(&p, t)?;
    }
    Ok(())
}

/// Binds each file read-only over its `/proc` path. The sources live on a small tmpfs of their
/// own that is detached once they are bound (the binds keep it), so they show nowhere in the tree
/// and the root tmpfs holds no unlinked file (which would make its read-only remount fail).
/// Paths the kernel does not provide, or outside `/proc`, are skipped.
fn cover_proc_files(root: &Path, files: &[ProcFile]) -> io::Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    let scratch = root.join(".k");
    mkdirs(&scratch, 0o700)?;
    tmpfs(
        &scratch,
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        "size=1048576,mode=755",
    )?;
    let bound = (|| {
        for (i, f) in files.iter().enumerate() {
            let rel = match f.path.strip_prefix("/proc/") {
                Some(r) if !r.split('/').any(|c| c.is_empty() || c == "." || c == "..") => r,
                _ => continue,
            };
            let dst = root.join("proc").join(rel);
            if !std::fs::symlink_metadata(&dst).is_ok_and(|m| m.is_file()) {
                continue;
            }
            let name = rel.rsplit('/').next().unwrap_or("f");
            let src = scratch.join(format!("{name}{i}"));
            std::fs::write(&src, &f.data)?;
            std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o444))?;
            bind_ro(&src, &dst)?;
        }
        Ok(())
    })();
    let c = path_c(&scratch)?;
    // SAFETY: valid C string.
    cvt_i(unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) })?;
    std::fs::remove_dir(&scratch)?;
    bound
}

const DEV_NODES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

fn build_dev(root: &Path) -> io::Result<()> {
    let dev = under(root, "/dev");
    mkdirs(&dev, 0o755)?;
    mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("size=65536,mode=755"),
    )?;
    for n in DEV_NODES {
        let host = Path::new("/dev").join(n);
        if !host.exists() {
            continue;
        }
        let dst = dev.join(n);
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o666)
            .open(&dst)?;
        mount(
            Some(&host.to_string_lossy()),
            &dst,
            None,
            libc::MS_BIND,
            None,
        )?;
    }
    symlink("/proc/self/fd", dev.join("fd"))?;
    symlink("/proc/self/fd/0", dev.join("stdin"))?;
    symlink("/proc/self/fd/1", dev.join("stdout"))?;
    symlink("/proc/self/fd/2", dev.join("stderr"))?;
    mkdirs(&dev.join("pts"), 0o755)?;
    let shm = dev.join("shm");
    mkdirs(&shm, 0o1777)?;
    tmpfs(
        &shm,
        libc::MS_NOSUID | libc::MS_NODEV,
        "size=67108864,mode=1777",
    )?;
    Ok(())
}

/// Builds the root under `spec.staging` and pivots into it. Afterwards `/` is the jail root, the
/// old root is detached, and the root tmpfs is read-only (only `rw_mounts` are writable).
pub fn build(spec: &JailSpec) -> io::Result<()> {
    let root = PathBuf::from(&spec.staging);
    // Nothing we mount may propagate back to the host.
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    mount(
        Some("tmpfs"),
        &root,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("size=67108864,mode=755"),
    )?;
    // The image's additions to host directories (e.g. /usr/bin/security) live on a scratch tmpfs
    // that becomes the top layer of a read-only overlay; the scratch mount is detached after.
    let ovl = root.join(".ovl");
    if !spec.overlay_dirs.is_empty() {
        mkdirs(&ovl, 0o700)?;
        mount(
            Some("tmpfs"),
            &ovl,
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some("size=16777216,mode=755"),
        )?;
    }
    for host in &spec.ro_binds {
        if !spec.overlay_dirs.contains(host) {
            bind_host_path(&root, host)?;
        }
    }
    // One tmpfs holds every writable directory, so the run's writable space is one number
    // (`--disk`) however the skill spreads its writes; each directory is a bind of a subfolder.
    let rw_root = root.join(".rw");
    if !spec.rw_mounts.is_empty() {
        mkdirs(&rw_root, 0o700)?;
        mount(
            Some("tmpfs"),
            &rw_root,
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(&format!("size={},mode=755", spec.limits.disk_bytes)),
        )?;
    }
    for (i, rw) in spec.rw_mounts.iter().enumerate() {
        let p = under(&root, rw);
        mkdirs(&p, 0o755)?;
        let mode = if rw == "/tmp" || rw == "/var/tmp" {
            0o1777
        } else {
            0o755
        };
        let src = rw_root.join(i.to_string());
        mkdirs(&src, mode)?;
        // mkdir's mode is masked by the umask: set it exactly (sticky bit for the temp dirs).
        std::fs::set_permissions(&src, std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        mount(Some(&src.to_string_lossy()), &p, None, libc::MS_BIND, None)?;
    }
    if !spec.rw_mounts.is_empty() {
        // The binds keep the tmpfs alive; its own mount point goes.
        let c = path_c(&rw_root)?;
        // SAFETY: valid C string.
        cvt_i(unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) })
            .map_err(|e| io::Error::new(e.kind(), format!("detach .rw: {e}")))?;
        std::fs::remove_dir(&rw_root)?;
    }
    write_entries(&root, &ovl, &spec.overlay_dirs, &spec.entries)?;
    for d in &spec.overlay_dirs {
        let upper = under(&ovl, d);
        mkdirs(&upper, 0o755)?;
        let dst = under(&root, d);
        mkdirs(&dst, 0o755)?;
        let opts = format!("lowerdir={}:{}", upper.display(), d);
        mount(
            Some("overlay"),
            &dst,
            Some("overlay"),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
            Some(&opts),
        )?;
    }
    if !spec.overlay_dirs.is_empty() {
        let c = path_c(&ovl)?;
        // SAFETY: valid C string.
        cvt_i(unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) })?;
        std::fs::remove_dir(&ovl)?;
    }
    let proc_dir = under(&root, "/proc");
    mkdirs(&proc_dir, 0o555)?;
    mount(
        Some("proc"),
        &proc_dir,
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )?;
    cover_proc_files(&root, &spec.proc_files)?;
    build_dev(&root)?;

    let old = root.join(".oldroot");
    mkdirs(&old, 0o700)?;
    let (r, o) = (path_c(&root)?, path_c(&old)?);
    // SAFETY: valid C strings.
    cvt_i(unsafe { libc::syscall(libc::SYS_pivot_root, r.as_ptr(), o.as_ptr()) as i32 })
        .map_err(|e| io::Error::new(e.kind(), format!("pivot_root: {e}")))?;
    std::env::set_current_dir("/")?;
    let old_c = cstr("/.oldroot")?;
    // SAFETY: valid C string.
    cvt_i(unsafe { libc::umount2(old_c.as_ptr(), libc::MNT_DETACH) })
        .map_err(|e| io::Error::new(e.kind(), format!("detach old root: {e}")))?;
    std::fs::remove_dir("/.oldroot")?;
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
        None,
    )?;
    Ok(())
}

/// Brings the loopback interface up (the new network namespace starts with it down).
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: plain socket call.
    let s =
        cvt_i(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    let s = super::sys::own(s);
    // SAFETY: zeroed ifreq is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in b"lo\0".iter().enumerate() {
        ifr.ifr_name[i] = *b as libc::c_char;
    }
    use std::os::fd::AsRawFd;
    // SAFETY: ifr is a valid ifreq.
    cvt_i(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr) })?;
    // SAFETY: union access of the flags member that SIOCGIFFLAGS filled.
    unsafe {
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: ifr is a valid ifreq.
    cvt_i(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS, &ifr) })?;
    Ok(())
}
