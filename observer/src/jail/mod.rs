//! The jail: kernel isolation for one run. The supervisor side lives here (spawn the jail
//! process, map its ids, enforce the wall-clock budget, collect its messages); the jail process
//! itself is `stage1` (namespaces, then tracer) and `init` (the jail's pid 1).

pub mod egress_fds;
pub mod filter;
pub mod init;
pub mod netfilter;
mod rootfs;
pub mod spec;
pub mod stage1;
pub mod sys;

use crate::tracer::Msg;
use spec::JailSpec;
use std::io::{BufRead, BufReader, Write};

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum JailError {
    #[error("cannot start the jail process: {0}")]
    Spawn(std::io::Error),
    #[error("cannot set up the jail's user namespace: {0}")]
    UserNs(String),
    #[error("jail setup failed: {0}")]
    Setup(String),
    #[error("jail i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// How a jail run ended, as the supervisor saw it.
#[derive(Debug, Clone, Default)]
pub struct JailOutcome {
    pub budget_exhausted: bool,
    /// The jail process ended without a clean finish (crash, fatal message).
    pub failure: Option<String>,
    pub info: Vec<(String, String)>,
    pub wall: Duration,
    /// The supervisor stopped the run early (cancelled, or a limit only it can see).
    pub stopped: Option<Stop>,
}

/// Why the supervisor ended a run before the jail finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    /// `cancelled`, `cpu_time`, `egress_bytes`: also the `limit` event's `what`.
    pub what: String,
    pub detail: String,
}

/// How the jail process is moved (into the run's cgroup) before it may fork.
pub enum Attach {
    /// Work done on the jail process's pid, on a thread while the run is prepared. Moving a
    /// whole process takes the kernel's global threadgroup lock, whose first use waits for an
    /// RCU grace period (9–27 ms measured here); the thread overlaps that wait with the image.
    Thread(Box<dyn FnOnce(u32) -> Result<(), String> + Send>),
    /// Files (cgroup v1 `tasks`) the jail process writes `0` to itself before anything else:
    /// a thread moving only itself skips that global lock (40 µs instead of 9–27 ms). The jail
    /// process is single-threaded then, so the whole process moves.
    SelfMove(Vec<std::path::PathBuf>),
}

/// The supervisor's hooks into a running jail (resource limits, cancellation).
pub trait Watch {
    /// What to do with the jail process once it exists and before it forks.
    fn attach(&self) -> Option<Attach> {
        None
    }
    /// Polled about every 100 ms while the jail runs: `Some` kills the jail.
    fn poll(&mut self) -> Option<Stop> {
        None
    }
}

/// No hooks.
pub struct NoWatch;
impl Watch for NoWatch {}

fn socketpair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid 2-int array.
    sys::cvt_i(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    Ok((sys::own(fds[0]), sys::own(fds[1])))
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid 2-int array.
    sys::cvt_i(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((sys::own(fds[0]), sys::own(fds[1])))
}

/// The host uid/gid the jail user (uid `inside`) maps to. Unprivileged: ourselves (the only
/// mapping allowed). As root: a dedicated unprivileged id per run, so nothing in the jail is
/// root-owned on the host and parallel runs do not share an identity.
pub(crate) fn outer_ids() -> (u32, u32) {
    // SAFETY: getters without side effects.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid == 0 {
        let id = 1_000_000 + (std::process::id() % 1_000_000);
        (id, id)
    } else {
        (uid, gid)
    }
}

fn write_maps(pid: u32, inside_uid: u32, inside_gid: u32) -> Result<(), JailError> {
    let (ou, og) = outer_ids();
    let base = format!("/proc/{pid}");
    let w = |file: &str, data: String| -> Result<(), JailError> {
        std::fs::write(format!("{base}/{file}"), data)
            .map_err(|e| JailError::UserNs(format!("{file}: {e}")))
    };
    // Without this an unprivileged mapper may not write gid_map; as root it keeps the jail from
    // ever regaining supplementary groups.
    w("setgroups", "deny".into())?;
    w("uid_map", format!("{inside_uid} {ou} 1\n"))?;
    w("gid_map", format!("{inside_gid} {og} 1\n"))?;
    Ok(())
}

/// The program the jail process runs: the `observe-jail` helper from our own directory when it
/// is there (2 MB instead of 20, it loads in a third of the time, twice per run with init's
/// re-exec), else ourselves.
fn stage1_program(exe: &std::path::Path) -> std::path::PathBuf {
    let helper = exe.with_file_name(stage1::HELPER);
    if helper.is_file() {
        helper
    } else {
        exe.to_path_buf()
    }
}

fn spawn_stage1(fds: [RawFd; 5]) -> std::io::Result<Child> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(stage1_program(&exe));
    // The build id and our own path let a helper from another build hand over to us.
    cmd.arg(stage1::STAGE1_ARG)
        .arg(stage1::BUILD_ID)
        .arg(&exe)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    // SAFETY: getter.
    if unsafe { libc::geteuid() } == 0 {
        // As root the jail process drops to its dedicated unprivileged id before it creates its
        // user namespace: that id is what the jail user maps to (std clears supplementary groups).
        let (u, g) = outer_ids();
        cmd.uid(u).gid(g);
    }
    // SAFETY: only async-signal-safe calls (dup2, prctl) in the child before exec.
    unsafe {
        cmd.pre_exec(move || {
            let targets = [
                stage1::FD_SPEC,
                stage1::FD_EVENTS,
                stage1::FD_SYNC_OUT,
                stage1::FD_SYNC_IN,
                stage1::FD_EGRESS,
            ];
            // Move sources above the target range first so a source that equals a later target
            // is not clobbered.
            let mut moved = [0; 5];
            for (i, &fd) in fds.iter().enumerate() {
                moved[i] = libc::fcntl(fd, libc::F_DUPFD, 10);
                if moved[i] < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for (i, &t) in targets.iter().enumerate() {
                if libc::dup2(moved[i], t) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Its own process group: a terminal's Ctrl-C reaches only the supervisor, which
            // then ends the run and still writes the report.
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Receives the jail's events as raw trace lines (`{"seq":0,...}`), on the jail reader thread,
/// as they happen.
pub trait EventSink: Send + 'static {
    fn event(&mut self, line: &str);
    /// Called when no more lines are waiting (a good moment to flush).
    fn idle(&mut self) {}
}

/// A jail process started ahead of its run: it waits for its spec, so the supervisor can prepare
/// the run (image, CA, plan) while the process starts up and is attached (see [`Attach`]).
/// Dropped unused, it is killed and reaped.
pub struct Started {
    child: KillOnDrop,
    attach: Option<std::thread::JoinHandle<Result<(), String>>>,
    self_move: Vec<std::path::PathBuf>,
    spec_w: OwnedFd,
    ev_r: OwnedFd,
    up_r: OwnedFd,
    down_w: OwnedFd,
    eg_ours: OwnedFd,
}

/// The jail process, killed and reaped however its owner ends (an early error included; after
/// a normal end both calls are no-ops on the reaped child).
struct KillOnDrop(Child);

impl std::ops::Deref for KillOnDrop {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the jail process (it blocks reading its spec) and its [`Attach`] work.
pub fn start(watch: &dyn Watch) -> Result<Started, JailError> {
    let (spec_r, spec_w) = pipe()?;
    let (ev_r, ev_w) = pipe()?;
    // A large pipe lets the tracer run ahead of the writer in bursts.
    // SAFETY: fcntl on our own fd; failure only leaves the default size.
    unsafe { libc::fcntl(ev_r.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    let (up_r, up_w) = pipe()?; // jail → supervisor
    let (down_r, down_w) = pipe()?; // supervisor → jail
    let (eg_ours, eg_theirs) = socketpair()?;
    let child = spawn_stage1([
        spec_r.as_raw_fd(),
        ev_w.as_raw_fd(),
        up_w.as_raw_fd(),
        down_r.as_raw_fd(),
        eg_theirs.as_raw_fd(),
    ])
    .map_err(JailError::Spawn)?;
    drop((spec_r, ev_w, up_w, down_r, eg_theirs));
    tracing::debug!("jail: stage 1 spawned");
    // Before it reads its spec the jail process forks nothing, and it forks only after the
    // supervisor's go, sent once the attach is done: everything it will start is inside
    // whatever the attach puts it in.
    let pid = child.id();
    let (attach, self_move) = match watch.attach() {
        Some(Attach::Thread(f)) => (Some(std::thread::spawn(move || f(pid))), Vec::new()),
        Some(Attach::SelfMove(files)) => (None, files),
        None => (None, Vec::new()),
    };
    Ok(Started {
        child: KillOnDrop(child),
        attach,
        self_move,
        spec_w,
        ev_r,
        up_r,
        down_w,
        eg_ours,
    })
}

/// Runs a started jail to completion (or until `budget`). Events go to `sink` on a reader thread
/// as they arrive (so a crash loses nothing already seen). Returns the sink when the jail is done.
pub fn run<S: EventSink>(
    started: Started,
    spec: &JailSpec,
    budget: Duration,
    mut sink: S,
    on_sockets: &mut dyn FnMut(egress_fds::EgressFds) -> Result<(), String>,
    watch: &mut dyn Watch,
) -> Result<(JailOutcome, S), JailError> {
    let begun = Instant::now();
    let Started {
        mut child,
        attach,
        self_move,
        spec_w,
        ev_r,
        up_r,
        down_w,
        eg_ours,
    } = started;
    let spec_json = if self_move.is_empty() {
        serde_json::to_vec(spec)
    } else {
        let mut spec = spec.clone();
        spec.self_move = self_move;
        serde_json::to_vec(&spec)
    }
    .map_err(|e| JailError::Setup(e.to_string()))?;
    // The spec can exceed a pipe's buffer; the jail reads it before anything else.
    let writer = std::thread::spawn(move || {
        let mut f = std::fs::File::from(spec_w);
        f.write_all(&spec_json)
    });
    let kill_child = |child: &mut Child| {
        let _ = child.kill();
        let _ = child.wait();
    };
    match sys::read_byte(up_r.as_raw_fd()) {
        Ok(b'u') => {}
        _ => {
            kill_child(&mut child);
            let _ = writer.join();
            // The jail may have sent a fatal message explaining why.
            let why = BufReader::new(std::fs::File::from(ev_r))
                .lines()
                .map_while(Result::ok)
                .filter_map(|l| serde_json::from_str::<Msg>(&l).ok())
                .find_map(|m| match m {
                    Msg::Fatal { what } => Some(what),
                    _ => None,
                })
                .unwrap_or_else(|| {
                    "the jail process ended before creating its user namespace".into()
                });
            return Err(JailError::UserNs(why));
        }
    }
    tracing::debug!("jail: user namespace made");
    if let Err(e) = write_maps(child.id(), spec.uid, spec.gid) {
        kill_child(&mut child);
        return Err(e);
    }
    if let Some(a) = attach {
        let r = a
            .join()
            .unwrap_or_else(|_| Err("the attach thread panicked".into()));
        if let Err(e) = r {
            kill_child(&mut child);
            let _ = writer.join();
            return Err(JailError::Setup(format!("resource limits: {e}")));
        }
    }
    sys::write_all_fd(down_w.as_raw_fd(), b"g")?;
    let _ = writer.join();
    if spec.egress {
        // The jail binds its listeners right after creating its network namespace.
        let got = egress_fds::recv(eg_ours.as_raw_fd()).map_err(|e| e.to_string());
        tracing::debug!("jail: egress sockets received");
        if let Err(e) = got.and_then(&mut *on_sockets) {
            kill_child(&mut child);
            return Err(JailError::Setup(format!("egress capture: {e}")));
        }
        sys::write_all_fd(eg_ours.as_raw_fd(), b"g")?;
    }
    drop(eg_ours);

    let (tx, rx) = mpsc::channel::<Msg>();
    let reader = std::thread::spawn(move || {
        // A panic while writing the trace must not lose the run: it becomes a fatal message
        // naming the part, and the sink (with what it already wrote) comes back.
        let tx2 = tx.clone();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            read_events(ev_r, &mut sink, &tx)
        }));
        if let Err(p) = r {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let _ = tx2.send(Msg::Fatal {
                what: format!("trace writer panicked: {what}"),
            });
        }
        sink
    });
    let mut out = JailOutcome::default();
    let deadline = begun + budget;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(m) => absorb(&mut out, m),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if Instant::now() >= deadline {
                    out.budget_exhausted = true;
                    // Killing the tracer kills every task (PTRACE_O_EXITKILL and pid 1's
                    // parent-death signal take the whole pid namespace down).
                    let _ = child.kill();
                    break;
                }
            }
        }
        if let Some(stop) = watch.poll() {
            out.stopped = Some(stop);
            let _ = child.kill();
            break;
        }
    }
    // Drain whatever the jail wrote before it ended.
    let status = child.wait()?;
    if !out.budget_exhausted && out.stopped.is_none() && !status.success() && out.failure.is_none()
    {
        out.failure = Some(format!(
            "the tracer (jail process) ended abnormally ({status})"
        ));
    }
    let sink = reader
        .join()
        .map_err(|_| JailError::Setup("the event reader panicked".into()))?;
    while let Ok(m) = rx.try_recv() {
        absorb(&mut out, m);
    }
    out.wall = begun.elapsed();
    Ok((out, sink))
}

/// A message from the jail into the outcome: the first fatal one is the failure.
fn absorb(out: &mut JailOutcome, m: Msg) {
    match m {
        Msg::Fatal { what } => {
            out.failure.get_or_insert(what);
        }
        Msg::Info { key, value } => {
            tracing::debug!(%key, %value, "jail info");
            out.info.push((key, value))
        }
    }
}

/// The event reader: trace lines to the sink, messages to the supervisor's loop.
fn read_events<S: EventSink>(ev_r: OwnedFd, sink: &mut S, tx: &mpsc::Sender<Msg>) {
    {
        use std::io::Read;
        let mut f = std::fs::File::from(ev_r);
        let mut buf = vec![0u8; 1 << 20];
        let mut pending: Vec<u8> = Vec::new();
        loop {
            let n = match f.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            pending.extend_from_slice(&buf[..n]);
            let mut start = 0;
            while let Some(off) = pending[start..].iter().position(|&b| b == b'\n') {
                let line = String::from_utf8_lossy(&pending[start..start + off]);
                start += off + 1;
                if line.starts_with("{\"seq\":") {
                    sink.event(&line);
                    continue;
                }
                let m = serde_json::from_str::<Msg>(&line).unwrap_or_else(|e| Msg::Fatal {
                    what: format!("unreadable message from the jail: {e}"),
                });
                if tx.send(m).is_err() {
                    break;
                }
            }
            pending.drain(..start);
            sink.idle();
        }
    }
}
