//! The jail's pid 1. Builds the root, locks itself down (rlimits, landlock, no capabilities,
//! seccomp) and then runs the agent's steps one by one, reaping everything, until the last step and
//! the grace period are over. It talks to the tracer over a pipe with short text lines; it never
//! judges anything.

use super::filter;
use super::rootfs;
use super::spec::JailSpec;
use super::sys::{self, cstr, write_all_fd};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

const MAX_STEP_PIPES: usize = 256;

/// Control lines from init to the tracer.
pub fn ctl(fd: RawFd, line: &str) {
    let _ = write_all_fd(fd, format!("{line}\n").as_bytes());
}

fn fail(ctl_fd: RawFd, what: &str, e: impl std::fmt::Display) -> ! {
    ctl(ctl_fd, &format!("error {what}: {e}"));
    // SAFETY: terminating the process.
    unsafe { libc::_exit(1) }
}

fn set_rlimit(res: libc::__rlimit_resource_t, v: u64) -> io::Result<()> {
    let r = libc::rlimit {
        rlim_cur: v,
        rlim_max: v,
    };
    // SAFETY: r is a valid rlimit.
    sys::cvt_i(unsafe { libc::setrlimit(res, &r) }).map(|_| ())
}

fn apply_landlock(rw: &[String]) -> Result<String, String> {
    use landlock::{
        path_beneath_rules, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus, Scope, ABI,
    };
    let abi = ABI::V6;
    let mut rw_paths: Vec<&str> = rw.iter().map(String::as_str).collect();
    // Writing to the std devices is ordinary; /proc writes (comm, oom_score_adj) too.
    rw_paths.extend([
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/tty",
        "/dev/shm",
        "/proc",
    ]);
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.scope(Scope::from_all(abi)))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi))))
        .and_then(|r| r.add_rules(path_beneath_rules(&rw_paths, AccessFs::from_all(abi))))
        .and_then(|r| r.restrict_self())
        .map_err(|e| e.to_string())?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => "fully_enforced".into(),
        RulesetStatus::PartiallyEnforced => "partially_enforced".into(),
        RulesetStatus::NotEnforced => "not_enforced".into(),
    })
}

fn drop_all_caps() -> io::Result<()> {
    for cap in 0..=63 {
        // SAFETY: plain prctl; EINVAL for caps beyond the kernel's last is expected.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
    }
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
    caps::clear(None, caps::CapSet::Effective).map_err(|e| io::Error::other(e.to_string()))?;
    caps::clear(None, caps::CapSet::Permitted).map_err(|e| io::Error::other(e.to_string()))?;
    caps::clear(None, caps::CapSet::Inheritable).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(())
}

fn find_in_path(prog: &str, env: &[(String, String)]) -> String {
    if prog.contains('/') {
        return prog.to_string();
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or("/usr/bin:/bin");
    for dir in path.split(':') {
        let cand = format!("{dir}/{prog}");
        if let Ok(c) = cstr(&cand) {
            // SAFETY: valid C string.
            if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
                return cand;
            }
        }
    }
    prog.to_string()
}

/// Forks one step. The child gets its own session, the step's output pipe on stdout and stderr,
/// /dev/null on stdin, and the run's environment.
fn spawn_step(
    argv: &[String],
    cwd: &str,
    env: &[(String, String)],
    stdin: Option<&str>,
    out_w: RawFd,
) -> io::Result<i32> {
    let prog = cstr(&find_in_path(
        argv.first().map(String::as_str).unwrap_or("/bin/true"),
        env,
    ))?;
    let cargv: Vec<CString> = argv.iter().map(|a| cstr(a)).collect::<io::Result<_>>()?;
    let mut pargv: Vec<*const libc::c_char> = cargv.iter().map(|c| c.as_ptr()).collect();
    pargv.push(std::ptr::null());
    let cenv: Vec<CString> = env
        .iter()
        .map(|(k, v)| cstr(&format!("{k}={v}")))
        .collect::<io::Result<_>>()?;
    let mut penv: Vec<*const libc::c_char> = cenv.iter().map(|c| c.as_ptr()).collect();
    penv.push(std::ptr::null());
    let ccwd = cstr(cwd)?;
    let devnull = cstr("/dev/null")?;
    // Step input goes through a pipe filled before the fork (bounded so the write cannot block).
    let input = match stdin {
        Some(text) => {
            let mut fds = [0; 2];
            // SAFETY: fds is a valid 2-int array.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                return Err(sys::last_err());
            }
            let (r, w) = (sys::own(fds[0]), sys::own(fds[1]));
            let bytes = text.as_bytes();
            write_all_fd(w.as_raw_fd(), &bytes[..bytes.len().min(60 * 1024)])?;
            drop(w);
            Some(r)
        }
        None => None,
    };
    let in_fd = input.as_ref().map(|r| r.as_raw_fd()).unwrap_or(-1);
    // SAFETY: the child only makes async-signal-safe calls on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(sys::last_err());
    }
    if pid == 0 {
        // SAFETY: async-signal-safe calls only, then exec or _exit.
        unsafe {
            libc::setsid();
            // A user's programs start with every signal at its default: we ignore SIGPIPE (the
            // Rust runtime does), and whatever the supervisor's caller ignored reached us.
            let _ = sys::default_signal_dispositions(false);
            if in_fd >= 0 {
                libc::dup2(in_fd, 0);
            } else {
                let nul = libc::open(devnull.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                if nul > 0 {
                    libc::dup2(nul, 0);
                }
            }
            libc::dup2(out_w, 1);
            libc::dup2(out_w, 2);
            // Only the three standard fds go to the step (ours are CLOEXEC; this is the rule).
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
            libc::chdir(ccwd.as_ptr());
            libc::execve(prog.as_ptr(), pargv.as_ptr(), penv.as_ptr());
            let msg = b"exec failed\n";
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::_exit(127);
        }
    }
    Ok(pid)
}

/// The run's environment with the step's additions (a step's value replaces the run's).
fn step_env(base: &[(String, String)], extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = base
        .iter()
        .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k))
        .cloned()
        .collect();
    env.extend(extra.iter().cloned());
    env
}

fn reap_nohang() -> Option<(i32, i32)> {
    let mut st = 0;
    // SAFETY: st is a valid out-pointer.
    let r = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG | libc::__WALL) };
    if r > 0 {
        Some((r, st))
    } else {
        None
    }
}

fn no_children_left() -> bool {
    let mut st = 0;
    // SAFETY: waitid with WNOWAIT only peeks.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL,
        )
    };
    let _ = &mut st;
    r < 0 && sys::last_err().raw_os_error() == Some(libc::ECHILD)
}

/// Installs the seccomp filter and hands its listener, with one output pipe per step, to the
/// tracer. Returns the pipes' write ends.
fn hand_over(spec: &JailSpec, ctl_fd: RawFd, go: RawFd) -> Vec<Option<OwnedFd>> {
    let prog = filter::build(&spec.extra_notify);
    let listener = match sys::seccomp_install(&prog) {
        Ok(l) => l,
        Err(e) => fail(ctl_fd, "seccomp", e),
    };
    // One output pipe per step, made now: the tracer takes the read ends (and the listener) while
    // we are still dumpable; afterwards nothing in the jail can reach our fds through /proc/1.
    let mut pipes = Vec::new();
    let mut readers = String::new();
    for _ in spec.steps.iter().take(MAX_STEP_PIPES) {
        let mut fds = [0; 2];
        // SAFETY: fds is a valid 2-int array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            fail(ctl_fd, "pipe", sys::last_err());
        }
        readers.push_str(&format!(" {}", fds[0]));
        pipes.push((sys::own(fds[0]), sys::own(fds[1])));
    }
    ctl(
        ctl_fd,
        &format!("listener {}{readers}", listener.as_raw_fd()),
    );
    if sys::read_byte(go).is_err() {
        // SAFETY: terminating.
        unsafe { libc::_exit(1) }
    }
    drop(listener);
    pipes.into_iter().map(|(_r, w)| Some(w)).collect()
}

/// Entry of pid 1. `go` receives bytes from the tracer, `ctl` carries our lines to it.
pub fn run(spec: &JailSpec, go: OwnedFd, ctl_fd: OwnedFd) -> ! {
    let ctl_fd = std::os::fd::IntoRawFd::into_raw_fd(ctl_fd);
    let go = std::os::fd::IntoRawFd::into_raw_fd(go);
    // SAFETY: plain prctl.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    if sys::read_byte(go).is_err() {
        // SAFETY: terminating.
        unsafe { libc::_exit(1) }
    }
    if let Err(e) = rootfs::build(spec) {
        fail(ctl_fd, "rootfs", e);
    }
    if let Err(e) = nix::unistd::sethostname(&spec.hostname) {
        fail(ctl_fd, "hostname", e);
    }
    if let Err(e) = rootfs::loopback_up() {
        fail(ctl_fd, "loopback", e);
    }
    let l = &spec.limits;
    for (res, v) in [
        (libc::RLIMIT_NPROC, l.nproc),
        (libc::RLIMIT_NOFILE, l.nofile),
        (libc::RLIMIT_AS, l.address_space),
        (libc::RLIMIT_FSIZE, l.file_size),
        (libc::RLIMIT_CPU, l.cpu_seconds),
        (libc::RLIMIT_CORE, 0),
    ] {
        if let Err(e) = set_rlimit(res, v) {
            fail(ctl_fd, "rlimit", e);
        }
    }
    // SAFETY: plain prctl.
    unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if let Err(e) = drop_all_caps() {
        fail(ctl_fd, "capabilities", e);
    }
    look_like_init(ctl_fd);
    run_steps(spec, go, ctl_fd)
}

/// Our name as the jail sees it (`/proc/1/comm`, `/proc/1/cmdline`): an init's, nothing of the
/// host (the jail process's command line names the supervisor's path). The argument strings are
/// overwritten in place, setproctitle-style: with the area's last byte not NUL the kernel shows
/// only the first string. Also our own session and process group, as a real init's (1 and 1).
/// Fails closed: an init that would show the host's path does not run the skill.
fn look_like_init(ctl_fd: RawFd) {
    // SAFETY: plain prctl with a NUL-terminated name; setsid of a process-group non-leader.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"init".as_ptr(), 0, 0, 0);
        libc::setsid();
    }
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let title = b"/sbin/init\0";
    let (start, end) = match arg_area(&stat) {
        Some((s, e)) if e - s > title.len() => (s, e),
        _ => fail(ctl_fd, "init's name", "no argument area to overwrite"),
    };
    let len = end - start;
    // SAFETY: [start, end) is our own argument area on our stack, writable; nothing reads it
    // after this (std reads argv lazily, and init never asks for its arguments).
    unsafe {
        let area = std::slice::from_raw_parts_mut(start as *mut u8, len);
        area.fill(0);
        area[..title.len()].copy_from_slice(title);
        area[len - 1] = b' ';
    }
}

/// `arg_start` and `arg_end` (fields 48 and 49) of a `/proc/<pid>/stat` line.
fn arg_area(stat: &str) -> Option<(usize, usize)> {
    // The command name (field 2) may hold spaces and parentheses: count from its last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace().skip(45);
    let start: usize = f.next()?.parse().ok()?;
    let end: usize = f.next()?.parse().ok()?;
    (start != 0 && end > start).then_some((start, end))
}

/// A short sleep that the virtual clock does not intercept (a `poll` with a timeout below
/// `filter::LONG_WAIT_MS` is not sent to the tracer; nanosleep would be, once per call).
fn nap(ms: i32) {
    // SAFETY: poll on no descriptors is a plain sleep.
    unsafe { libc::poll(std::ptr::null_mut(), 0, ms) };
}

/// A step's budget: its own cap, but no more than an equal share of what is left of the run's
/// step budget, so one hanging step cannot starve the steps after it.
pub fn step_deadline_ms(own_ms: u64, budget_ms: u64, used_ms: u64, steps_left: usize) -> u64 {
    if budget_ms == 0 || steps_left == 0 {
        return own_ms;
    }
    let share = budget_ms.saturating_sub(used_ms) / steps_left as u64;
    own_ms.min(share.max(MIN_STEP_MS))
}

/// The least a step is given, even when the run's budget is nearly spent.
const MIN_STEP_MS: u64 = 2_000;

fn run_steps(spec: &JailSpec, go: RawFd, ctl_fd: RawFd) -> ! {
    match apply_landlock(&spec.rw_mounts) {
        Ok(s) => ctl(ctl_fd, &format!("landlock {s}")),
        Err(e) => ctl(ctl_fd, &format!("landlock failed:{}", e.replace('\n', " "))),
    }
    let mut writers: Vec<Option<OwnedFd>> = Vec::new();
    if spec.traced {
        writers = hand_over(spec, ctl_fd, go);
    } else {
        ctl(ctl_fd, "untraced");
        for _ in &spec.steps {
            writers.push(sys::open_at(libc::AT_FDCWD, "/dev/null", libc::O_WRONLY).ok());
        }
    }
    // The tracer lets this one call through for pid 1 (it fakes it for everyone else).
    // SAFETY: plain prctl.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };

    let steps_began = Instant::now();
    for (i, step) in spec.steps.iter().enumerate() {
        // Steps past the pipe limit share the last pipe.
        let slot = if spec.traced {
            i.min(MAX_STEP_PIPES - 1)
        } else {
            i
        };
        let out_w = match writers.get_mut(slot) {
            Some(w) if i < MAX_STEP_PIPES || !spec.traced => w.take(),
            Some(w) => w.as_ref().and_then(|w| w.try_clone().ok()),
            None => None,
        };
        let Some(out_w) = out_w else { continue };
        ctl(ctl_fd, &format!("start {i}"));
        if sys::read_byte(go).is_err() {
            // SAFETY: terminating.
            unsafe { libc::_exit(1) }
        }
        let started = Instant::now();
        let env = step_env(&spec.env, &step.env);
        let pid = match spawn_step(
            &step.argv,
            &step.cwd,
            &env,
            step.stdin.as_deref(),
            out_w.as_raw_fd(),
        ) {
            Ok(p) => p,
            Err(e) => {
                ctl(ctl_fd, &format!("end {i} - - 0 spawn:{e}"));
                continue;
            }
        };
        drop(out_w);
        let deadline = Duration::from_millis(step_deadline_ms(
            step.timeout_ms,
            spec.steps_budget_ms,
            steps_began.elapsed().as_millis() as u64,
            spec.steps.len() - i,
        ));
        let mut timed_out = false;
        // Woken the moment the step ends (a pidfd polls readable then); a plain nap where the
        // kernel has no pidfd.
        let pidfd = sys::pidfd_open(pid).ok();
        let status = loop {
            match reap_nohang() {
                Some((p, st)) if p == pid => break st,
                Some(_) => continue,
                None => {}
            }
            if !timed_out && started.elapsed() > deadline {
                timed_out = true;
                // SAFETY: signalling the step's session and the step itself.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            match &pidfd {
                Some(fd) => {
                    let left = deadline.saturating_sub(started.elapsed()).as_millis();
                    // Below filter::LONG_WAIT_MS, so the virtual clock leaves this wait alone.
                    let ms = left.clamp(1, 500) as i32;
                    let mut p = sys::pollin(fd.as_raw_fd());
                    // SAFETY: one valid pollfd.
                    unsafe { libc::poll(&mut p, 1, ms) };
                }
                None => nap(2),
            }
        };
        let (code, sig) = if libc::WIFEXITED(status) {
            (libc::WEXITSTATUS(status).to_string(), "-".to_string())
        } else {
            ("-".to_string(), libc::WTERMSIG(status).to_string())
        };
        ctl(ctl_fd, &format!("end {i} {code} {sig} {}", timed_out as u8));
    }
    // Background processes (daemons, double-forked children) may still act: give them the grace
    // period, then end everything.
    let grace = Instant::now();
    while grace.elapsed() < Duration::from_millis(spec.grace_ms) {
        while reap_nohang().is_some() {}
        if no_children_left() {
            break;
        }
        nap(5);
    }
    let lingering = !no_children_left();
    // SAFETY: kill(-1) from pid 1 signals every other process of the jail's pid namespace.
    unsafe { libc::kill(-1, libc::SIGKILL) };
    while !no_children_left() {
        while reap_nohang().is_some() {}
        nap(1);
    }
    ctl(ctl_fd, &format!("done {}", lingering as u8));
    // SAFETY: terminating pid 1 ends the namespace.
    unsafe { libc::_exit(0) }
}

#[cfg(test)]
mod tests {
    use super::step_deadline_ms;

    #[test]
    fn a_hanging_step_only_takes_its_share() {
        // 10 steps, 100 s: the first gets 10 s, not the whole budget.
        assert_eq!(step_deadline_ms(100_000, 100_000, 0, 10), 10_000);
        // Later steps get an equal share of what is left.
        assert_eq!(step_deadline_ms(100_000, 100_000, 10_000, 9), 10_000);
        // Fast earlier steps leave more for later ones.
        assert_eq!(step_deadline_ms(100_000, 100_000, 1_000, 2), 49_500);
        // Never below the floor, never above the step's own cap.
        assert_eq!(step_deadline_ms(100_000, 100_000, 99_000, 5), 2_000);
        assert_eq!(step_deadline_ms(5_000, 100_000, 0, 1), 5_000);
        // No run budget: the step's own cap.
        assert_eq!(step_deadline_ms(7_000, 0, 0, 3), 7_000);
    }
}
