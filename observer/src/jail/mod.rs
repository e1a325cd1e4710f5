//! The jail: kernel isolation for one run. The supervisor side lives here (spawn the jail
//! process, map its ids, enforce the wall-clock budget, collect its messages); the jail process
//! itself is `stage1` (namespaces, then tracer) and `init` (the jail's pid 1).

pub mod egress_fds;
pub mod filter;
pub mod init;
pub mod netfilter;
mod rootfs;
mod spawn;
pub mod spec;
pub mod stage1;
pub mod sys;

use crate::tracer::Msg;
use spec::JailSpec;
use std::io::Write;

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
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

/// The program the jail process runs: the `observe-jail` helper from our own directory when it
/// is there (2 MB instead of 20, it loads in a third of the time), else ourselves.
fn stage1_program(exe: &std::path::Path) -> std::path::PathBuf {
    let helper = exe.with_file_name(stage1::HELPER);
    if helper.is_file() {
        helper
    } else {
        exe.to_path_buf()
    }
}

fn spawn_stage1(fds: [RawFd; 4], inside: (u32, u32)) -> Result<spawn::JailChild, JailError> {
    let exe = std::env::current_exe().map_err(JailError::Spawn)?;
    let program = stage1_program(&exe);
    // The build id and our own path let a helper from another build hand over to us.
    let argv = spawn::c_args([
        program.as_os_str(),
        stage1::STAGE1_ARG.as_ref(),
        stage1::BUILD_ID.as_ref(),
        exe.as_os_str(),
    ])
    .map_err(JailError::Spawn)?;
    // SAFETY: getter.
    let root = unsafe { libc::geteuid() } == 0;
    let outside = outer_ids();
    let plan = spawn::Plan {
        argv,
        fds: fds.to_vec(),
        targets: vec![
            stage1::FD_SPEC,
            stage1::FD_EVENTS,
            stage1::FD_GO,
            stage1::FD_EGRESS,
        ],
        // As root the jail process drops to its dedicated unprivileged id before it creates its
        // user namespace: that id is what the jail user maps to.
        drop_to: root.then_some(outside),
        inside,
        outside,
    };
    spawn::spawn(&plan)
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
    child: spawn::JailChild,
    attach: Option<std::thread::JoinHandle<Result<(), String>>>,
    self_move: Vec<std::path::PathBuf>,
    spec_w: OwnedFd,
    ev_r: OwnedFd,
    go_w: OwnedFd,
    eg_ours: OwnedFd,
    inside: (u32, u32),
}

/// Starts the jail process (it blocks reading its spec), in its user namespace with the jail
/// user's ids `inside`. It forks nothing before [`Started::attach`]'s work is done.
pub fn start(inside: (u32, u32)) -> Result<Started, JailError> {
    let (spec_r, spec_w) = pipe()?;
    let (ev_r, ev_w) = pipe()?;
    // A large pipe lets the tracer run ahead of the writer in bursts.
    // SAFETY: fcntl on our own fd; failure only leaves the default size.
    unsafe { libc::fcntl(ev_r.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    let (go_r, go_w) = pipe()?; // supervisor → jail: "you may fork"
    let (eg_ours, eg_theirs) = socketpair()?;
    let child = spawn_stage1(
        [
            spec_r.as_raw_fd(),
            ev_w.as_raw_fd(),
            go_r.as_raw_fd(),
            eg_theirs.as_raw_fd(),
        ],
        inside,
    )?;
    drop((spec_r, ev_w, go_r, eg_theirs));
    tracing::debug!("jail: stage 1 spawned");
    Ok(Started {
        child,
        attach: None,
        self_move: Vec::new(),
        spec_w,
        ev_r,
        go_w,
        eg_ours,
        inside,
    })
}

impl Started {
    /// Starts `watch`'s [`Attach`] work on the jail process (made after the spawn, so it overlaps
    /// the jail process's own start).
    pub fn attach(&mut self, watch: &dyn Watch) {
        let pid = self.child.id();
        match watch.attach() {
            Some(Attach::Thread(f)) => self.attach = Some(std::thread::spawn(move || f(pid))),
            Some(Attach::SelfMove(files)) => self.self_move = files,
            None => {}
        }
    }
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
        go_w,
        eg_ours,
        inside,
    } = started;
    if (spec.uid, spec.gid) != inside {
        return Err(JailError::Setup(format!(
            "the jail was started for ids {inside:?}, the spec has ({}, {})",
            spec.uid, spec.gid
        )));
    }
    let spec_json = if self_move.is_empty() {
        serde_json::to_vec(spec)
    } else {
        let mut spec = spec.clone();
        spec.self_move = self_move;
        serde_json::to_vec(&spec)
    }
    .map_err(|e| JailError::Setup(e.to_string()))?;
    let writer = send_spec(spec_w, spec_json);
    let kill_child = |child: &mut spawn::JailChild| {
        let _ = child.kill();
        let _ = child.wait();
    };
    if let Some(a) = attach {
        let r = a
            .join()
            .unwrap_or_else(|_| Err("the attach thread panicked".into()));
        if let Err(e) = r {
            kill_child(&mut child);
            if let Some(w) = writer {
                let _ = w.join();
            }
            return Err(JailError::Setup(format!("resource limits: {e}")));
        }
    }
    // A jail process that already failed has closed its end; its fatal message says why.
    let _ = sys::write_all_fd(go_w.as_raw_fd(), b"g");
    drop(go_w);
    if let Some(w) = writer {
        let _ = w.join();
    }
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
    // The watch reads the cgroup's counters: every 100 ms, not at every message.
    let mut next_poll = begun;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(m) => absorb(&mut out, m),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        if now >= deadline {
            out.budget_exhausted = true;
            // Killing the tracer kills every task (PTRACE_O_EXITKILL and pid 1's
            // parent-death signal take the whole pid namespace down).
            let _ = child.kill();
            break;
        }
        if now < next_poll {
            continue;
        }
        next_poll = now + Duration::from_millis(100);
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

/// Sends the spec: written here when the pipe can hold it whole (the jail reads it before
/// anything else, so the write cannot block), else from a thread.
fn send_spec(
    spec_w: OwnedFd,
    json: Vec<u8>,
) -> Option<std::thread::JoinHandle<std::io::Result<()>>> {
    // SAFETY: fcntl on our own fd.
    let mut room = unsafe { libc::fcntl(spec_w.as_raw_fd(), libc::F_GETPIPE_SZ) };
    if room >= 0 && (room as usize) < json.len() {
        // SAFETY: as above; failure leaves the size as it was.
        room = unsafe {
            libc::fcntl(
                spec_w.as_raw_fd(),
                libc::F_SETPIPE_SZ,
                i32::try_from(json.len()).unwrap_or(i32::MAX),
            )
        };
    }
    if room >= 0 && room as usize >= json.len() {
        // A jail process that already failed has closed its end; its fatal message says why.
        let _ = sys::write_all_fd(spec_w.as_raw_fd(), &json);
        return None;
    }
    Some(std::thread::spawn(move || {
        let mut f = std::fs::File::from(spec_w);
        f.write_all(&json)
    }))
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
