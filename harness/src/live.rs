//! `harness run`: every case through the real `observe` binary, several at once.

use crate::corpus::Case;
use crate::judge::Observed;
use crate::CaseResult;
use observer::report::Report;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("observe binary {0} does not exist")]
    NoObserve(String),
    #[error("building observe failed: {0}")]
    Build(String),
}

/// Budget given to `observe --timeout` when a case names none.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// Extra time before the harness kills an `observe` that overran its own budget.
const GRACE_SECS: u64 = 60;

#[derive(Debug, Clone)]
pub struct LiveOptions {
    pub observe: PathBuf,
    pub jobs: usize,
    /// Also keep every trace as `DIR/<case>.jsonl`.
    pub record_dir: Option<PathBuf>,
    /// Store every trace as the case's `trace.jsonl` (the corpus's recorded traces).
    pub record_corpus: bool,
}

/// The `observe` binary to use: the one given, else one built now from this workspace (a no-op
/// when up to date, so a stale binary never judges the corpus), else the one beside `harness`.
pub fn locate_observe(explicit: Option<&Path>) -> Result<PathBuf, LiveError> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(LiveError::NoObserve(p.display().to_string()))
        };
    }
    let exe = std::env::current_exe().ok();
    let exe_dir = exe.as_deref().and_then(Path::parent).map(Path::to_path_buf);
    let release = exe_dir
        .as_deref()
        .and_then(Path::file_name)
        .is_some_and(|n| n == "release");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if workspace.join("Cargo.toml").is_file() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(&workspace)
            .args(["build", "-q", "-p", "skill-observer", "--bins"]);
        if release {
            cmd.arg("--release");
        }
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => return Err(LiveError::Build(format!("cargo exited with {s}"))),
            // No cargo here: fall through to a binary beside the harness.
            Err(_) => {}
        }
    }
    let candidates = [
        exe_dir.as_ref().map(|d| d.join("observe")),
        Some(
            workspace
                .join("target")
                .join(if release { "release" } else { "debug" })
                .join("observe"),
        ),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
        .ok_or_else(|| LiveError::NoObserve("beside the harness binary".into()))
}

/// Run every case; results come back in corpus order. Progress lines go to stderr.
pub fn run_all(cases: &[Case], opts: &LiveOptions) -> Vec<CaseResult> {
    let queue: Arc<Mutex<VecDeque<usize>>> = Arc::new(Mutex::new((0..cases.len()).collect()));
    let results: Arc<Mutex<Vec<Option<CaseResult>>>> =
        Arc::new(Mutex::new(vec![None; cases.len()]));
    let done = Arc::new(Mutex::new(0usize));
    std::thread::scope(|s| {
        for _ in 0..opts.jobs.max(1) {
            let queue = Arc::clone(&queue);
            let results = Arc::clone(&results);
            let done = Arc::clone(&done);
            s.spawn(move || loop {
                let next = queue.lock().map(|mut q| q.pop_front()).unwrap_or(None);
                let Some(i) = next else { break };
                let r = run_case(&cases[i], opts);
                if let Ok(mut d) = done.lock() {
                    *d += 1;
                    eprintln!(
                        "[{}/{}] {:<10} {} ({:.1}s)",
                        *d,
                        cases.len(),
                        r.status().label(),
                        r.name,
                        r.elapsed.as_secs_f64()
                    );
                }
                if let Ok(mut res) = results.lock() {
                    res[i] = Some(r);
                }
            });
        }
    });
    let collected = match Arc::try_unwrap(results) {
        Ok(m) => m.into_inner().unwrap_or_default(),
        Err(a) => a.lock().map(|v| v.clone()).unwrap_or_default(),
    };
    collected
        .into_iter()
        .zip(cases)
        .map(|(r, c)| {
            r.unwrap_or_else(|| CaseResult::new(c, Err("worker died".into()), Duration::ZERO))
        })
        .collect()
}

fn tail(path: &Path, max: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(max)..].join("\n")
}

/// Run one case through `observe` and judge its report.
pub fn run_case(case: &Case, opts: &LiveOptions) -> CaseResult {
    let start = Instant::now();
    let observed = observe_case(case, opts);
    CaseResult::new(case, observed, start.elapsed())
}

fn observe_case(case: &Case, opts: &LiveOptions) -> Result<Observed, String> {
    let tmp = tempfile::Builder::new()
        .prefix("harness-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    let t = tmp.path();
    let xdg = t.join("xdg");
    std::fs::create_dir_all(&xdg).map_err(|e| format!("temp dir: {e}"))?;
    let report_path = t.join("report.json");
    let trace_path = t.join("trace.jsonl");
    let timeout = case.expect.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
    let mut cmd = Command::new(&opts.observe);
    cmd.arg(case.skill_dir())
        .args([
            "--os",
            &case.expect.os,
            "--no-baseline",
            "--seed",
            &case.seed(),
        ])
        .arg("--timeout")
        .arg(timeout.to_string())
        .arg("--report")
        .arg(&report_path)
        .arg("--record")
        .arg(&trace_path)
        .env("XDG_DATA_HOME", &xdg)
        .stdin(Stdio::null());
    if let Some(s) = &case.expect.statics {
        let p = t.join("static.json");
        std::fs::write(&p, s.to_json()).map_err(|e| format!("static file: {e}"))?;
        cmd.arg("--static").arg(&p);
    }
    let out = std::fs::File::create(t.join("stdout")).map_err(|e| e.to_string())?;
    let err = std::fs::File::create(t.join("stderr")).map_err(|e| e.to_string())?;
    cmd.stdout(out).stderr(err);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting {}: {e}", opts.observe.display()))?;
    let deadline = Instant::now() + Duration::from_secs(timeout + GRACE_SECS);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() > deadline => {
                // Our own child, by its pid; observe's jail dies with it (parent-death signal).
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "observe did not finish within {}s of its {timeout}s budget",
                    GRACE_SECS
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting for observe: {e}")),
        }
    };
    let code = status.code();
    let verdict_code = [0, 10, 20, 30];
    if !code.is_some_and(|c| verdict_code.contains(&c)) {
        return Err(format!(
            "observe exited with {status}: {}",
            tail(&t.join("stderr"), 6)
        ));
    }
    let text = std::fs::read_to_string(&report_path)
        .map_err(|e| format!("report {}: {e}", report_path.display()))?;
    let report: Report =
        serde_json::from_str(&text).map_err(|e| format!("report is not a valid report: {e}"))?;
    if Some(report.verdict.exit_code()) != code {
        return Err(format!(
            "exit status {code:?} does not match the report's verdict {}",
            report.verdict.as_str()
        ));
    }
    keep_trace(case, &trace_path, opts)?;
    Ok(Observed::from_report(&report))
}

fn keep_trace(case: &Case, trace: &Path, opts: &LiveOptions) -> Result<(), String> {
    let copy = |to: &Path| {
        std::fs::copy(trace, to)
            .map(|_| ())
            .map_err(|e| format!("keeping the trace at {}: {e}", to.display()))
    };
    if let Some(d) = &opts.record_dir {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        copy(&d.join(format!("{}.jsonl", case.name)))?;
    }
    if opts.record_corpus {
        copy(&case.trace_path())?;
    }
    Ok(())
}
