//! One observation run: image + plan → jail → trace. Side effects (run directory, trace file) live
//! here; judging the trace is the analyser's job.

use crate::agent;
use crate::egress::canary::{CanaryIndex, Needle};
use crate::egress::proxy::{ca::CertAuthority, ProxyConfig};
use crate::egress::{EgressConfig, EgressRuntime, EgressSockets};
use crate::image::{self, Image, SkillFile};
use crate::jail::{self, JailOutcome};
use crate::limits::{EgressMeter, ResourceLimits, RunGuard};
use crate::model::Fidelity;
use crate::trace::{Event, EventKind, TraceHeader, TraceWriter};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("run directory: {0}")]
    RunDir(std::io::Error),
    #[error("trace: {0}")]
    Trace(#[from] crate::trace::TraceError),
    #[error(transparent)]
    Jail(#[from] jail::JailError),
    #[error(transparent)]
    Image(#[from] image::ImageError),
    #[error("egress capture: {0}")]
    Egress(String),
    #[error("external agent: {0}")]
    Agent(String),
    #[error(transparent)]
    Events(#[from] crate::events::EventsError),
}

/// `--agent CMD`: an agent CLI run inside the jail instead of the built-in planner.
#[derive(Debug, Clone)]
pub struct ExternalAgent {
    /// The command line (program first); the task is appended as the last argument.
    pub argv: Vec<String>,
    pub task: String,
    /// `--passthrough` rules for the agent's model API.
    pub passthrough: Vec<String>,
}

/// Where an agent program given as a host path is installed in the jail (on the user's PATH).
fn agent_install_path(home: &str, program: &str) -> Option<String> {
    let name = std::path::Path::new(program).file_name()?.to_str()?;
    Some(format!("{home}/.local/bin/{name}"))
}

/// The jail's step for an external agent; a program given as a host path is copied into the
/// image (the jail sees no host path). Returns the step and the plan record.
fn external_agent_step(
    a: &ExternalAgent,
    image: &mut Image,
    step_ms: u64,
    clock_offset_s: i64,
) -> Result<(jail::spec::StepSpec, crate::report::plan::PlanRecord), RunError> {
    use crate::report::plan::{AgentRecord, PlanRecord, PlanStepRecord};
    let mut argv = a.argv.clone();
    let program = argv
        .first()
        .cloned()
        .ok_or_else(|| RunError::Agent("empty command".into()))?;
    if program.contains('/') {
        let data =
            std::fs::read(&program).map_err(|e| RunError::Agent(format!("{program}: {e}")))?;
        let dest = agent_install_path(&image.home, &program)
            .ok_or_else(|| RunError::Agent(format!("{program}: not a file name")))?;
        image.entries.push(jail::spec::FsEntry::File {
            path: dest.clone(),
            mode: 0o755,
            data,
            mtime: None,
        });
        argv[0] = dest;
    }
    argv.push(a.task.clone());
    let label = format!("external agent: {}", argv.join(" "));
    let step = jail::spec::StepSpec::plain(
        label.clone(),
        argv.clone(),
        image.workspace.clone(),
        step_ms,
    );
    let record = PlanRecord {
        steps: vec![PlanStepRecord {
            id: 0,
            kind: "external_agent".into(),
            label,
            argv: argv.clone(),
            source: "--agent".into(),
            ..Default::default()
        }],
        clock_offset_s,
        agent: Some(AgentRecord {
            argv,
            task: a.task.clone(),
            passthrough: a.passthrough.clone(),
        }),
        ..Default::default()
    };
    Ok((step, record))
}

/// The registry's values as egress canary needles.
pub fn needles_of(reg: &planted_creds::Registry) -> Vec<Needle> {
    reg.needles()
        .map(|n| Needle {
            value: n.bytes.to_vec(),
            canary: format!("{}/{:?}", n.credential, n.part),
            credential: n.credential.to_string(),
            service_hosts: n.service_hosts.to_vec(),
        })
        .collect()
}

/// Serves the jail's listeners: DNS, the intercepting proxy, the UDP catcher. Their events go into
/// the trace (pid 0: the analyser joins them to processes by port).
fn start_egress(
    fds: jail::egress_fds::EgressFds,
    ca: std::sync::Arc<CertAuthority>,
    (passthrough, responses): (Vec<String>, Option<PathBuf>),
    index: std::sync::Arc<CanaryIndex>,
    writer: SharedWriter,
    t0: u64,
    meter: std::sync::Arc<EgressMeter>,
) -> Result<EgressRuntime, String> {
    use std::net::{TcpListener, UdpSocket};
    /// The jail's listener fds as non-blocking std sockets (tokio takes them over).
    fn nonblocking<T: From<std::os::fd::OwnedFd>>(
        v: Vec<std::os::fd::OwnedFd>,
        set: fn(&T, bool) -> std::io::Result<()>,
    ) -> Result<Vec<T>, String> {
        v.into_iter()
            .map(|f| {
                let s = T::from(f);
                set(&s, true).map(|_| s).map_err(|e| e.to_string())
            })
            .collect()
    }
    let sockets = EgressSockets {
        transparent_tcp: nonblocking(fds.tcp, TcpListener::set_nonblocking)?,
        dns_udp: nonblocking(fds.dns_udp, UdpSocket::set_nonblocking)?,
        dns_tcp: nonblocking(fds.dns_tcp, TcpListener::set_nonblocking)?,
        udp_catchall: nonblocking(fds.udp, UdpSocket::set_nonblocking)?,
    };
    let cfg = EgressConfig {
        index: Some(index),
        proxy: Some(ProxyConfig::new(ca).with_cli_options(passthrough, responses)),
        ..EgressConfig::default()
    };
    let sink = move |kind: EventKind| -> u64 {
        meter.count(&kind);
        let ev = Event {
            seq: 0,
            t_ns: jail::sys::monotonic_ns().saturating_sub(t0),
            pid: 0,
            tid: None,
            ppid: None,
            vpid: None,
            step: None,
            kind,
        };
        match writer.lock() {
            Ok(mut w) => w.write(ev).unwrap_or(0),
            Err(_) => 0,
        }
    };
    EgressRuntime::start(sockets, cfg, sink).map_err(|e| e.to_string())
}

/// The skill as the run needs it.
#[derive(Debug, Clone)]
pub struct SkillInput {
    pub name: String,
    /// Safe folder name to install under (`~/.claude/skills/<install_name>/`).
    pub install_name: String,
    pub digest: String,
    pub fidelity: Fidelity,
    pub files: Vec<SkillFile>,
    pub scripts: Vec<crate::bundle::Script>,
    /// The whole unit, for the built-in agent's planner (`None`: one step per script).
    pub unit: Option<crate::bundle::SkillUnit>,
}

impl From<&crate::bundle::SkillUnit> for SkillInput {
    fn from(u: &crate::bundle::SkillUnit) -> Self {
        SkillInput {
            name: u.name.clone(),
            install_name: u.install_name.clone(),
            digest: u.digest.clone(),
            fidelity: u.fidelity,
            files: u
                .files
                .iter()
                .map(|(p, f)| SkillFile {
                    path: p.clone(),
                    data: f.bytes.clone(),
                    mode: f.mode,
                })
                .collect(),
            scripts: u.scripts.clone(),
            unit: Some(u.clone()),
        }
    }
}

impl SkillInput {
    /// A skill with nothing in it (for `observe jail-exec`).
    pub fn empty(name: &str) -> Self {
        SkillInput {
            name: name.into(),
            install_name: name.into(),
            digest: String::new(),
            fidelity: Fidelity::Bundle,
            files: Vec::new(),
            scripts: Vec::new(),
            unit: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub os: String,
    pub timeout: Duration,
    /// Where the trace goes; a temporary file in the run directory otherwise.
    pub record: Option<PathBuf>,
    /// A live copy of the trace (`--events FILE|-`, see `events.rs`).
    pub events: Option<PathBuf>,
    /// Per-run resource limits (`crate::limits`).
    pub resources: ResourceLimits,
    pub grace: Duration,
    /// Run this argv (in the workspace) as the only step instead of the agent's plan.
    pub command: Option<Vec<String>>,
    /// False only for benchmarks (see `JailSpec::traced`).
    pub traced: bool,
    /// Capture egress (DNS, TLS-intercepting proxy, UDP) in the jail's network namespace.
    pub egress: bool,
    /// The jail alone ([`image::bare`], no egress capture): for measuring the jail and tracer.
    pub bare_image: bool,
    /// `--passthrough HOST[:PORT]`: the only hosts requests are forwarded to (see docs/egress.md).
    pub passthrough: Vec<String>,
    /// `--responses DIR`: captured second stages served per URL (see docs/egress.md).
    pub responses: Option<PathBuf>,
    /// Seed of the planted credentials and image (random when `None`).
    pub seed: Option<String>,
    /// Recorded in the trace header so a replay judges as the live run did.
    pub statics: Option<crate::model::StaticView>,
    pub baseline: Option<serde_json::Value>,
    /// `--clock-offset`: added to every wall clock the jail reads (ns).
    pub clock_offset_ns: i64,
    /// Run this agent instead of the built-in planner.
    pub agent: Option<ExternalAgent>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            os: "linux".into(),
            timeout: Duration::from_secs(120),
            record: None,
            events: None,
            resources: ResourceLimits::default(),
            grace: Duration::from_secs(3),
            command: None,
            traced: true,
            statics: None,
            baseline: None,
            seed: None,
            egress: true,
            bare_image: false,
            clock_offset_ns: 0,
            agent: None,
            passthrough: Vec::new(),
            responses: None,
        }
    }
}

#[derive(Debug)]
pub struct RunResult {
    pub trace_path: PathBuf,
    /// Kept on disk only when the caller asked for it (`record`).
    pub trace_kept: bool,
    pub outcome: JailOutcome,
    pub complete: bool,
    pub incomplete_reasons: Vec<String>,
    pub step_output: BTreeMap<u32, String>,
    pub duration_ms: u64,
    pub image: Image,
    _run_dir: tempfile::TempDir,
}

type SharedWriter =
    std::sync::Arc<std::sync::Mutex<TraceWriter<std::io::BufWriter<crate::events::Tee>>>>;

/// Writes the jail's events into the trace file as they arrive (egress writes into the same
/// writer from its own threads).
struct TraceSink {
    writer: SharedWriter,
    err: Option<crate::trace::TraceError>,
    /// Steps that ran past their budget (needed for completeness without re-reading the trace).
    timed_out: Vec<u32>,
    outputs: BTreeMap<u32, String>,
}

impl jail::EventSink for TraceSink {
    fn event(&mut self, line: &str) {
        if line.contains("\"kind\":\"step_end\"") || line.contains("\"kind\":\"output\"") {
            if let Ok(ev) = serde_json::from_str::<Event>(line) {
                match (&ev.kind, ev.step) {
                    (
                        EventKind::StepEnd {
                            timed_out: true, ..
                        },
                        Some(step),
                    ) => self.timed_out.push(step),
                    (EventKind::Output { data }, Some(step)) => {
                        self.outputs.entry(step).or_default().push_str(data)
                    }
                    _ => {}
                }
            }
        }
        let r = match self.writer.lock() {
            Ok(mut w) => w.write_raw(line).map(|_| ()),
            Err(_) => Ok(()),
        };
        if let Err(e) = r {
            self.err.get_or_insert(e);
        }
    }
    fn idle(&mut self) {
        let r = match self.writer.lock() {
            Ok(mut w) => w.flush(),
            Err(_) => Ok(()),
        };
        if let Err(e) = r {
            self.err.get_or_insert(e);
        }
    }
}

/// Why a run could not see everything, from what the supervisor knows and the steps that timed
/// out.
pub fn incompleteness(outcome: &JailOutcome, timed_out: &[u32]) -> Vec<String> {
    let mut r = Vec::new();
    if let Some(f) = &outcome.failure {
        r.push(format!("jail: {f}"));
    }
    if outcome.budget_exhausted {
        r.push("budget exhausted with processes alive".to_string());
    }
    for step in timed_out {
        r.push(format!("step {step} timed out"));
    }
    if outcome.info.iter().any(|(k, _)| k == "tracing") {
        r.push("tracing was off (benchmark mode)".to_string());
    } else if !outcome
        .info
        .iter()
        .any(|(k, v)| k == "tracer" && v == "ready")
    {
        r.push("tracer: never became ready".to_string());
    }
    r
}

/// Today in the jail: days since 1970-01-01 of the real date moved by the clock offset.
fn today_days(clock_offset_ns: i64) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    (now + clock_offset_ns / 1_000_000_000).div_euclid(86_400)
}

pub fn observe(skill: &SkillInput, opts: &RunOptions) -> Result<RunResult, RunError> {
    let setup = std::time::Instant::now();
    // The jail process starts first, in a user namespace with the image user's ids; the run's
    // cgroup (when the host gives one) is made while it loads, and it is moved there while the
    // image is built. It forks nothing before that.
    let image_spec = if opts.bare_image {
        None
    } else {
        Some(image::load(&opts.os)?)
    };
    let ids = image_spec.as_ref().map_or(image::BARE_IDS, image::ids);
    let mut started = jail::start(ids)?;
    let mut guard = RunGuard::new(opts.resources.clone());
    started.attach(&guard);
    let run_dir = tempfile::Builder::new()
        .prefix("so-run-")
        .tempdir()
        .map_err(RunError::RunDir)?;
    // Egress capture (and with it the CA and the canary index); never for the bare jail.
    let capture = opts.egress && !opts.bare_image;
    // The image (with its planted credentials) is made before the clock of the run starts: the
    // budget and event times are the jail's. A fresh interception CA per run (its files stay in
    // the run directory) is made alongside.
    let (image, ca) = std::thread::scope(|s| {
        let ca = capture.then(|| {
            s.spawn(|| {
                CertAuthority::generate(Some(run_dir.path()))
                    .map(|ca| (ca, image::host_bundle()))
                    .map_err(|e| RunError::Egress(e.to_string()))
            })
        });
        let image = match &image_spec {
            None => Ok(image::bare()),
            Some(spec) => image::build_from(
                spec,
                &skill.install_name,
                &skill.files,
                opts.seed.as_deref(),
            ),
        };
        let ca = ca.map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(RunError::Egress("the CA thread panicked".into())))
        });
        (image, ca.transpose())
    });
    let mut image = image?;
    tracing::debug!(ms = setup.elapsed().as_millis() as u64, "image built");
    let ca = ca?.map(|(ca, bundle)| {
        image.trust_ca(bundle, ca.cert_pem());
        std::sync::Arc::new(ca)
    });
    tracing::debug!(
        ms = setup.elapsed().as_millis() as u64,
        "interception CA ready"
    );
    let t0 = jail::sys::monotonic_ns();
    // The jail runs under another uid when we are root: it must be able to reach the staging dir.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(run_dir.path(), std::fs::Permissions::from_mode(0o711))
        .map_err(RunError::RunDir)?;
    let staging = run_dir.path().join("root");
    std::fs::create_dir(&staging).map_err(RunError::RunDir)?;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o755))
        .map_err(RunError::RunDir)?;

    let step_timeout = opts
        .timeout
        .saturating_sub(opts.grace)
        .max(Duration::from_secs(1));
    let step_ms = step_timeout.as_millis() as u64;
    let mut plan_record = None;
    let steps = match (&opts.command, &opts.agent) {
        (None, Some(a)) => {
            let (step, rec) =
                external_agent_step(a, &mut image, step_ms, opts.clock_offset_ns / 1_000_000_000)?;
            plan_record = serde_json::to_value(rec).ok();
            vec![step]
        }
        _ => match &opts.command {
            Some(argv) => vec![jail::spec::StepSpec::plain(
                "command".into(),
                argv.clone(),
                image.workspace.clone(),
                step_ms,
            )],
            None => match &skill.unit {
                Some(unit) => {
                    let mut ctx = agent::PlanContext::new(
                        &image.skill_dir,
                        &image.workspace,
                        &image.home,
                        step_ms,
                    );
                    ctx.env_names = image.env.iter().map(|(k, _)| k.clone()).collect();
                    ctx.today_days = Some(today_days(opts.clock_offset_ns));
                    let plan = agent::plan(unit, &ctx);
                    plan_record =
                        serde_json::to_value(plan.record(opts.clock_offset_ns / 1_000_000_000))
                            .ok();
                    plan.step_specs()
                }
                None => {
                    agent::plan_scripts(&skill.scripts, &image.skill_dir, &image.workspace, step_ms)
                }
            },
        },
    };
    let mut spec = image.jail_spec(
        staging.to_string_lossy().into_owned(),
        steps,
        guard.limits().jail_limits(guard.enforcement()),
        opts.grace.as_millis() as u64,
        t0,
    );
    spec.traced = opts.traced;
    spec.egress = capture;
    spec.clock_offset_ns = opts.clock_offset_ns;
    // Setup (image, egress start) comes out of the same wall-clock budget.
    spec.steps_budget_ms = step_ms.saturating_sub(2_000).max(1_000);

    let (trace_path, kept) = match &opts.record {
        Some(p) => (p.clone(), true),
        None => (run_dir.path().join("trace.jsonl"), false),
    };
    let mut header = TraceHeader::new(
        &format!("{:x}", t0 ^ u64::from(std::process::id()) << 32),
        &opts.os,
        Some(skill.name.clone()),
        crate::util::now_rfc3339(),
    );
    header.skill_digest = Some(skill.digest.clone());
    header.fidelity = Some(skill.fidelity.as_str().to_string());
    header.context = image.context.clone();
    header.statics = opts.statics.clone();
    header.baseline = opts.baseline.clone();
    header.plan = plan_record;
    let file = std::fs::File::create(&trace_path).map_err(crate::trace::TraceError::Io)?;
    let live = match &opts.events {
        Some(p) => Some(crate::events::open_target(p)?),
        None => None,
    };
    let writer: SharedWriter = std::sync::Arc::new(std::sync::Mutex::new(TraceWriter::new(
        std::io::BufWriter::with_capacity(1 << 16, crate::events::Tee::new(file, live)),
        &header,
    )?));
    let mut egress: Option<EgressRuntime> = None;
    let egress_writer = writer.clone();
    // Indexed on its own thread while the jail starts; egress waits for it only if it is late.
    let needles = needles_of(&image.registry);
    let mut indexing =
        capture.then(|| std::thread::spawn(move || std::sync::Arc::new(CanaryIndex::new(needles))));
    tracing::debug!(ms = setup.elapsed().as_millis() as u64, "starting the jail");
    let meter = guard.meter();
    let (outcome, sink) = jail::run(
        started,
        &spec,
        opts.timeout,
        TraceSink {
            writer: writer.clone(),
            err: None,
            timed_out: Vec::new(),
            outputs: BTreeMap::new(),
        },
        &mut |fds| {
            let ca = ca.clone().ok_or("no CA")?;
            let answers = (opts.passthrough.clone(), opts.responses.clone());
            let index = indexing
                .take()
                .ok_or("the canary index was already taken")?
                .join()
                .map_err(|_| "the canary index thread panicked".to_string())?;
            let rt = start_egress(
                fds,
                ca,
                answers,
                index,
                egress_writer.clone(),
                t0,
                meter.clone(),
            )?;
            egress = Some(rt);
            tracing::debug!(ms = setup.elapsed().as_millis() as u64, "egress started");
            Ok(())
        },
        &mut guard,
    )?;
    tracing::debug!(ms = setup.elapsed().as_millis() as u64, "jail ended");
    let TraceSink {
        err,
        timed_out,
        outputs,
        ..
    } = sink;
    if let Some(e) = err {
        return Err(e.into());
    }
    // Egress drains what is still in flight, then stops; a part that failed makes the run
    // incomplete.
    let egress_reasons = egress
        .map(|rt| rt.shutdown().incomplete_reasons())
        .unwrap_or_default();
    tracing::debug!(ms = setup.elapsed().as_millis() as u64, "egress stopped");
    let mut writer = writer
        .lock()
        .map_err(|_| RunError::Egress("trace writer poisoned".into()))?;
    let duration_ms = (jail::sys::monotonic_ns().saturating_sub(t0)) / 1_000_000;
    let end_event = |kind| Event {
        seq: 0,
        t_ns: jail::sys::monotonic_ns().saturating_sub(t0),
        pid: 0,
        tid: None,
        ppid: None,
        vpid: None,
        step: None,
        kind,
    };
    if outcome.budget_exhausted {
        writer.write(end_event(EventKind::Limit {
            what: "budget".into(),
            detail: format!(
                "wall-clock budget of {} s ran out; every process of the jail was killed",
                opts.timeout.as_secs()
            ),
        }))?;
    }
    let mut reasons = incompleteness(&outcome, &timed_out);
    reasons.extend(egress_reasons);
    let used = guard.finish(&outcome, outcome.wall, opts.timeout);
    tracing::debug!(
        ms = setup.elapsed().as_millis() as u64,
        "resources accounted"
    );
    for (what, detail) in used.events {
        writer.write(end_event(EventKind::Limit { what, detail }))?;
    }
    reasons.extend(used.reasons);
    writer.write(end_event(EventKind::Resources(used.report)))?;
    writer.write(end_event(EventKind::RunEnd {
        duration_ms,
        complete: reasons.is_empty(),
        incomplete_reasons: reasons.clone(),
    }))?;
    drop(writer);
    Ok(RunResult {
        trace_path,
        trace_kept: kept,
        outcome,
        complete: reasons.is_empty(),
        incomplete_reasons: reasons,
        step_output: outputs,
        duration_ms,
        image,
        _run_dir: run_dir,
    })
}
