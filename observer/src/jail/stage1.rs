//! The jail process ("stage 1"), started by the supervisor as a fresh copy of our own binary so it
//! is single-threaded. It creates the namespaces, forks the jail's pid 1, and then becomes the
//! tracer: it sits outside the jail's pid namespace (invisible from inside) but inside its user,
//! mount and network namespaces, so it can replay the jail's file and socket calls with exactly
//! the jail's identity and view.

use super::init;
use super::spec::JailSpec;
use super::sys::{self, cvt_i, read_byte, write_all_fd};
use crate::tracer::{Msg, Tracer};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub const STAGE1_ARG: &str = "__skill-observer-jail";
/// The helper binary that runs stage 1 (and init) when it sits next to `observe`.
pub const HELPER: &str = "observe-jail";
/// Identifies this build of the library (see build.rs): the supervisor and the jail process
/// must agree on the spec and message formats.
pub const BUILD_ID: &str = env!("OBSERVE_BUILD_ID");
pub const FD_SPEC: RawFd = 3;
pub const FD_EVENTS: RawFd = 4;
/// The supervisor's word that we may fork (the run's cgroup has us).
pub const FD_GO: RawFd = 5;
/// Unix socket to the supervisor for the egress listeners.
pub const FD_EGRESS: RawFd = 6;

fn fatal(what: &str) -> ! {
    let line = serde_json::to_string(&Msg::Fatal {
        what: what.to_string(),
    })
    .unwrap_or_default();
    let _ = write_all_fd(FD_EVENTS, format!("{line}\n").as_bytes());
    std::process::exit(3)
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid 2-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        fatal(&format!("pipe: {}", sys::last_err()));
    }
    (sys::own(fds[0]), sys::own(fds[1]))
}

/// What a freshly started jail process does with its command line
/// (`STAGE1_ARG build-id supervisor-exe [handed-over]`).
#[derive(Debug, PartialEq, Eq)]
enum Launch<'a> {
    /// Same build as the supervisor: run.
    Run,
    /// A helper from another build: run the supervisor's binary in our place.
    HandOver(&'a std::ffi::OsStr),
    Fail(&'static str),
}

const HANDED_OVER: &str = "handed-over";

fn launch<'a>(args: &'a [std::ffi::OsString], build_id: &str) -> Launch<'a> {
    use std::os::unix::ffi::OsStrExt;
    if args.get(2).map(|a| a.as_bytes()) == Some(build_id.as_bytes()) {
        return Launch::Run;
    }
    if args.len() > 4 {
        // Handed over already and still foreign: the supervisor's binary was replaced on disk
        // after it started. Handing over again would loop.
        return Launch::Fail("observe's binary changed on disk during the run");
    }
    match args.get(3) {
        Some(exe) => Launch::HandOver(exe),
        None => Launch::Fail("started without the supervisor's build id"),
    }
}

/// Runs the supervisor's own binary in our place (same pid, fds and arguments) when this binary
/// is a helper from another build than the supervisor's.
fn hand_over_if_foreign() {
    use std::os::unix::ffi::OsStrExt;
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let exe = match launch(&args, BUILD_ID) {
        Launch::Run => return,
        Launch::Fail(why) => fatal(why),
        Launch::HandOver(exe) => exe,
    };
    let c = |a: &std::ffi::OsStr| std::ffi::CString::new(a.as_bytes()).ok();
    let argv: Option<Vec<std::ffi::CString>> = args
        .iter()
        .map(|a| c(a))
        .chain([c(HANDED_OVER.as_ref())])
        .collect();
    let (Some(path), Some(mut argv)) = (c(exe), argv) else {
        fatal("bad arguments")
    };
    argv[0] = path.clone();
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: NUL-terminated strings and a null-terminated array that outlive the call.
    unsafe { libc::execv(path.as_ptr(), ptrs.as_ptr()) };
    fatal(&format!(
        "running {}: {}",
        exe.to_string_lossy(),
        sys::last_err()
    ))
}

/// Entry point; never returns.
pub fn main() -> ! {
    hand_over_if_foreign();
    // We came in with ambient capabilities (see `spawn`) and exec nothing ourselves: keep them
    // from reaching anything by accident. init clears every set before the skill runs.
    // SAFETY: plain prctl.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    // SAFETY: fd 3 was set up by the supervisor for us alone.
    let mut spec_file = unsafe { std::fs::File::from_raw_fd(FD_SPEC) };
    let mut buf = Vec::new();
    if let Err(e) = spec_file.read_to_end(&mut buf) {
        fatal(&format!("reading spec: {e}"));
    }
    drop(spec_file);
    let spec: JailSpec = match serde_json::from_slice(&buf) {
        Ok(s) => s,
        Err(e) => fatal(&format!("bad spec: {e}")),
    };

    // Into the run's cgroup before anything is forked: everything the jail starts inherits it.
    // (Our host uid owns its files; the new user namespace does not change that.)
    for f in &spec.self_move {
        if let Err(e) = std::fs::write(f, "0") {
            fatal(&format!("moving into {}: {e}", f.display()));
        }
    }
    // The cgroup namespace comes after the go (below): it is rooted where we are when it is made.
    let flags = libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC;
    // SAFETY: plain unshare.
    if unsafe { libc::unshare(flags) } != 0 {
        fatal(&format!("unshare(namespaces): {}", sys::last_err()));
    }
    // Egress: every outbound attempt of the new network namespace is redirected to listeners we
    // bind here and hand to the supervisor. Without it the run could not see the network: fail.
    let _netfilter = if spec.egress {
        let (t, d, u) = super::egress_fds::pick_ports();
        let plan = super::netfilter::RedirectPlan::new(t, d, u);
        match super::egress_fds::setup(&plan) {
            Ok((guard, counts, fds)) => {
                if let Err(e) = super::egress_fds::send(FD_EGRESS, &counts, &fds) {
                    fatal(&format!("egress: {e}"));
                }
                // Nothing may run before the servers are up: wait for the supervisor's word.
                if !matches!(read_byte(FD_EGRESS), Ok(b'g')) {
                    fatal("egress: the supervisor did not start the servers");
                }
                Some(guard)
            }
            Err(e) => fatal(&format!("egress: {e}")),
        }
    } else {
        None
    };
    // SAFETY: closing our end of the egress socket; the listeners now belong to the supervisor.
    unsafe { libc::close(FD_EGRESS) };
    // Nothing is forked, and the cgroup namespace is not made, before the supervisor has put us
    // in the run's cgroup (on cgroup v2 it moves us from outside, on a thread): made earlier, the
    // namespace would be rooted at the supervisor's cgroup and show the run's cgroup path inside.
    if !matches!(read_byte(FD_GO), Ok(b'g')) {
        fatal("the supervisor did not let the jail start");
    }
    // SAFETY: closing our copy; plain unshare.
    unsafe { libc::close(FD_GO) };
    if unsafe { libc::unshare(libc::CLONE_NEWCGROUP) } != 0 {
        fatal(&format!("unshare(cgroup): {}", sys::last_err()));
    }
    // The host's /proc, kept as a directory fd: the tracer reads tasks through it after the pivot.
    let host_proc = match sys::open_at(libc::AT_FDCWD, "/proc", libc::O_RDONLY | libc::O_DIRECTORY)
    {
        Ok(f) => f,
        Err(e) => fatal(&format!("open /proc: {e}")),
    };
    let (go_r, go_w) = pipe();
    let (ctl_r, ctl_w) = pipe();
    // Block SIGCHLD before forking so no ptrace stop notification is lost; the tracer reads it
    // from a signalfd.
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGCHLD);
    if set.thread_block().is_err() {
        fatal("block SIGCHLD");
    }
    // SAFETY: single-threaded process; the child runs init::run, which never returns.
    let child = unsafe { libc::fork() };
    if child < 0 {
        fatal(&format!("fork: {}", sys::last_err()));
    }
    if child == 0 {
        drop(go_w);
        drop(ctl_r);
        drop(host_proc);
        // The event pipe is the tracer's alone: a jail task holding it could forge events.
        // SAFETY: closing an fd this process owns.
        unsafe { libc::close(FD_EVENTS) };
        let _ = nix::sys::signal::SigSet::empty().thread_set_mask();
        init::run(&spec, go_r, ctl_w);
    }
    drop(go_r);
    drop(ctl_w);
    let opts = libc::PTRACE_O_TRACEFORK
        | libc::PTRACE_O_TRACEVFORK
        | libc::PTRACE_O_TRACECLONE
        | libc::PTRACE_O_TRACEEXEC
        | libc::PTRACE_O_TRACESECCOMP
        | libc::PTRACE_O_TRACESYSGOOD
        | libc::PTRACE_O_EXITKILL;
    // SAFETY: seizing our own child.
    if !spec.traced {
        // Benchmark baseline: no tracing at all.
    } else if let Err(e) =
        cvt_i(unsafe { libc::ptrace(libc::PTRACE_SEIZE, child, 0, opts as libc::c_long) as i32 })
    {
        // SAFETY: killing our own child.
        unsafe { libc::kill(child, libc::SIGKILL) };
        fatal(&format!("ptrace seize: {e}"));
    }
    if write_all_fd(go_w.as_raw_fd(), b"g").is_err() {
        fatal("init vanished");
    }
    let (rw_first, disk_bytes) = (spec.rw_mounts.first().cloned(), spec.limits.disk_bytes);
    // The tracer stays on one CPU (init, forked before, and the jail keep every CPU). Otherwise
    // it follows each notifying task to its CPU (the notification wakes it there), and the
    // answer then wakes the task on the *other*, idle CPU: a migration per replayed open, with
    // cold caches (an import-heavy Python run: 280 migrations down to 9-13, and 1.21x down to
    // 1.04x its untraced time, medians of 80 alternating runs). Invisible from inside: the
    // tracer is outside the jail's pid namespace, and the jail's own affinity is untouched.
    sys::pin_to_current_cpu();
    let mut tracer = Tracer::new(spec, host_proc, child, go_w, ctl_r, FD_EVENTS);
    let code = tracer.run();
    report_disk_use(rw_first.as_deref(), disk_bytes);
    std::process::exit(code)
}

/// How full the jail's writable tmpfs ended (we share the jail's mount namespace and, after its
/// `pivot_root`, its root): `disk_used` / `disk_size` messages for the supervisor's limits.
fn report_disk_use(dir: Option<&str>, disk_bytes: u64) {
    let Some(dir) = dir else {
        return;
    };
    let Ok(st) = nix::sys::statfs::statfs(dir) else {
        return;
    };
    let bsize = st.block_size() as u64;
    let size = st.blocks() * bsize;
    // Only our tmpfs: anything else means we are not looking at the jail's root.
    if st.filesystem_type() != nix::sys::statfs::TMPFS_MAGIC
        || size.abs_diff(disk_bytes) > bsize.max(4096)
    {
        return;
    }
    let used = (st.blocks() - st.blocks_free()) * bsize;
    for (key, value) in [("disk_used", used), ("disk_size", size)] {
        let line = serde_json::to_string(&Msg::Info {
            key: key.into(),
            value: value.to_string(),
        })
        .unwrap_or_default();
        let _ = write_all_fd(FD_EVENTS, format!("{line}\n").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_same_build_runs() {
        let a = args(&["observe-jail", STAGE1_ARG, "id-1", "/bin/observe"]);
        assert_eq!(launch(&a, "id-1"), Launch::Run);
    }

    #[test]
    fn a_foreign_helper_hands_over_once() {
        let a = args(&["observe-jail", STAGE1_ARG, "id-1", "/bin/observe"]);
        assert_eq!(
            launch(&a, "id-2"),
            Launch::HandOver("/bin/observe".as_ref())
        );
        let again = args(&["observe", STAGE1_ARG, "id-1", "/bin/observe", HANDED_OVER]);
        assert!(matches!(launch(&again, "id-3"), Launch::Fail(_)));
    }

    #[test]
    fn missing_arguments_fail() {
        assert!(matches!(
            launch(&args(&["observe-jail", STAGE1_ARG]), "id"),
            Launch::Fail(_)
        ));
        assert!(matches!(
            launch(&args(&["observe-jail", STAGE1_ARG, "other"]), "id"),
            Launch::Fail(_)
        ));
    }
}
