//! One observation run: image + plan → jail → trace. Side effects (run directory, trace file) live
//! here; judging the trace is the analyser's job.

use crate::agent;
use crate::image::{self, Image, SkillFile};
use crate::jail::{self, spec::Limits, JailOutcome};
use crate::model::Fidelity;
use crate::trace::{Event, EventKind, TraceHeader, TraceWriter};
use crate::tracer::Msg;
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
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub os: String,
    pub timeout: Duration,
    /// Where the trace goes; a temporary file in the run directory otherwise.
    pub record: Option<PathBuf>,
    pub limits: Limits,
    pub grace: Duration,
    /// Run this argv (in the workspace) as the only step instead of the agent's plan.
    pub command: Option<Vec<String>>,
    /// False only for benchmarks (see `JailSpec::traced`).
    pub traced: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            os: "linux".into(),
            timeout: Duration::from_secs(120),
            record: None,
            limits: Limits::default(),
            grace: Duration::from_secs(3),
            command: None,
            traced: true,
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

/// Writes the jail's events into the trace file as they arrive.
struct TraceSink {
    writer: TraceWriter<std::io::BufWriter<std::fs::File>>,
    err: Option<crate::trace::TraceError>,
    /// Steps that ran past their budget (needed for completeness without re-reading the trace).
    timed_out: Vec<u32>,
}

impl jail::EventSink for TraceSink {
    fn event(&mut self, line: &str) {
        if line.contains("\"kind\":\"step_end\"") {
            if let Ok(ev) = serde_json::from_str::<Event>(line) {
                if let (
                    EventKind::StepEnd {
                        timed_out: true, ..
                    },
                    Some(step),
                ) = (&ev.kind, ev.step)
                {
                    self.timed_out.push(step);
                }
            }
        }
        if let Err(e) = self.writer.write_raw(line) {
            self.err.get_or_insert(e);
        }
    }
    fn idle(&mut self) {
        if let Err(e) = self.writer.flush() {
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

pub fn observe(skill: &SkillInput, opts: &RunOptions) -> Result<RunResult, RunError> {
    let t0 = jail::sys::monotonic_ns();
    let run_dir = tempfile::Builder::new()
        .prefix("so-run-")
        .tempdir()
        .map_err(RunError::RunDir)?;
    // The jail runs under another uid when we are root: it must be able to reach the staging dir.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(run_dir.path(), std::fs::Permissions::from_mode(0o711))
        .map_err(RunError::RunDir)?;
    let staging = run_dir.path().join("root");
    std::fs::create_dir(&staging).map_err(RunError::RunDir)?;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o755))
        .map_err(RunError::RunDir)?;

    let image = image::linux(&skill.install_name, &skill.files);
    let step_timeout = opts
        .timeout
        .saturating_sub(opts.grace)
        .max(Duration::from_secs(1));
    let step_ms = step_timeout.as_millis() as u64;
    let steps = match &opts.command {
        Some(argv) => vec![jail::spec::StepSpec {
            label: "command".into(),
            argv: argv.clone(),
            cwd: image.workspace.clone(),
            timeout_ms: step_ms,
        }],
        None => agent::plan_scripts(&skill.scripts, &image.skill_dir, &image.workspace, step_ms),
    };
    let mut spec = image.jail_spec(
        staging.to_string_lossy().into_owned(),
        steps,
        opts.limits.clone(),
        opts.grace.as_millis() as u64,
        t0,
    );
    spec.traced = opts.traced;

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
    let file = std::fs::File::create(&trace_path).map_err(crate::trace::TraceError::Io)?;
    let writer = TraceWriter::new(std::io::BufWriter::with_capacity(1 << 16, file), &header)?;
    let mut outputs: BTreeMap<u32, String> = BTreeMap::new();
    let (outcome, sink) = jail::run(
        &spec,
        opts.timeout,
        TraceSink {
            writer,
            err: None,
            timed_out: Vec::new(),
        },
        &mut |m| {
            if let Msg::Output { step, data } = m {
                outputs.entry(step).or_default().push_str(&data);
            }
        },
    )?;
    let TraceSink {
        mut writer,
        err,
        timed_out,
    } = sink;
    if let Some(e) = err {
        return Err(e.into());
    }
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
    let reasons = incompleteness(&outcome, &timed_out);
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
