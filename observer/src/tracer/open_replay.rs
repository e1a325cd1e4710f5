//! Pure decisions of the open replay (tracer/notify.rs), kept apart so unit tests reach them.

/// The open flags the kernel knows (x86_64 `VALID_OPEN_FLAGS`). Legacy `open`/`openat` drop
/// any other bit silently while `openat2` refuses them, so a replay through `openat2` passes
/// only these: a task setting junk bits sees what it would see untraced.
pub const KERNEL_OPEN_FLAGS: i32 = libc::O_ACCMODE
    | libc::O_CREAT
    | libc::O_EXCL
    | libc::O_NOCTTY
    | libc::O_TRUNC
    | libc::O_APPEND
    | libc::O_NONBLOCK
    | libc::O_DSYNC
    | libc::O_SYNC
    | libc::O_ASYNC
    | libc::O_DIRECT
    | 0o100000 // O_LARGEFILE as the kernel spells it (0 in glibc's x86_64 headers)
    | libc::O_DIRECTORY
    | libc::O_NOFOLLOW
    | libc::O_NOATIME
    | libc::O_CLOEXEC
    | libc::O_PATH
    | libc::O_TMPFILE;

/// `RESOLVE_NO_SYMLINKS` of `openat2`.
pub const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// Whether `path`, once opened without following any symlink, is itself the path of the file
/// opened, so the replay need not ask the kernel for the fd's path: absolute, no empty, `.` or
/// `..` component, no trailing slash, and not under `/proc` or `/dev` (magic links, per-task
/// views). Anything else is opened as asked and its path read back from the fd.
pub fn names_itself(path: &[u8]) -> bool {
    if path == b"/" {
        return true;
    }
    if !path.starts_with(b"/")
        || path.ends_with(b"/")
        || path.starts_with(b"/proc/")
        || path.starts_with(b"/dev/")
        || path == b"/proc"
        || path == b"/dev"
    {
        return false;
    }
    path[1..]
        .split(|&b| b == b'/')
        .all(|c| !c.is_empty() && c != b"." && c != b"..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_absolute_paths_name_themselves() {
        for p in [
            "/",
            "/etc/hostname",
            "/usr/lib/python3/dist-packages/x.py",
            "/home/user/.ssh/id_rsa",
            "/proc.txt",
        ] {
            assert!(names_itself(p.as_bytes()), "{p}");
        }
    }

    #[test]
    fn anything_the_kernel_could_rewrite_is_read_back() {
        for p in [
            "etc/hostname",
            "./x",
            "",
            "//etc/hostname",
            "/etc//hostname",
            "/etc/./hostname",
            "/etc/../etc/shadow",
            "/home/user/..",
            "/home/user/.",
            "/tmp/",
            "/proc/self/environ",
            "/proc",
            "/dev/stdin",
            "/dev/fd/3",
        ] {
            assert!(!names_itself(p.as_bytes()), "{p:?}");
        }
    }

    #[test]
    fn junk_bits_are_outside_the_kernel_flags() {
        assert_eq!(0x4000_0000 & KERNEL_OPEN_FLAGS, 0);
        assert_eq!(libc::O_RDWR & KERNEL_OPEN_FLAGS, libc::O_RDWR);
        assert_eq!(libc::O_TMPFILE & KERNEL_OPEN_FLAGS, libc::O_TMPFILE);
    }
}
