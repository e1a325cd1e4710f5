//! `harness replay`: re-judge recorded traces with the current analyser, in-process, no sandbox.

use crate::corpus::Case;
use crate::judge::Observed;
use crate::CaseResult;
use observer::analyse::{analyse, AnalyseConfig};
use observer::model::StaticView;
use observer::trace::Trace;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("no recorded trace at {0} (record one with `harness run --record-corpus`)")]
    NoTrace(String),
    #[error("{0}")]
    Trace(#[from] observer::trace::TraceError),
    #[error("static view: {0}")]
    Static(String),
    #[error("the trace records no static view and the case has none")]
    NoStatic,
}

/// Where a case's trace is: `DIR/<case>.jsonl` (what `harness run --record DIR` writes), or the
/// case's own `trace.jsonl` when no DIR is given.
pub fn trace_for(case: &Case, dir: Option<&Path>) -> PathBuf {
    match dir {
        Some(d) => d.join(format!("{}.jsonl", case.name)),
        None => case.trace_path(),
    }
}

/// The static view a live run of this case would be judged against: the case's own (imported,
/// through the same parser as `observe --static`), else the built-in categoriser on the case's
/// skill as the current code sees it, else the view the trace header recorded.
pub fn static_view(case: &Case, trace: &Trace) -> Result<StaticView, ReplayError> {
    if let Some(s) = &case.expect.statics {
        return observer::statics::parse_static(s.to_json().as_bytes())
            .map_err(|e| ReplayError::Static(e.to_string()));
    }
    let limits = observer::bundle::Limits::default();
    if let Ok(units) = observer::bundle::load(&case.skill_dir(), &limits) {
        if let [unit] = units.as_slice() {
            return Ok(observer::statics::categorise(unit).view);
        }
    }
    trace.header.statics.clone().ok_or(ReplayError::NoStatic)
}

/// Judge one trace of a case (the tests feed altered traces and configs through here).
pub fn judge_trace(
    case: &Case,
    trace: &Trace,
    cfg: &AnalyseConfig,
) -> Result<Observed, ReplayError> {
    let statics = static_view(case, trace)?;
    // No baseline: the live run uses --no-baseline too, so drift never enters the corpus.
    let report = analyse(trace, &statics, None, cfg);
    Ok(Observed::from_report(&report))
}

pub fn replay_case(case: &Case, dir: Option<&Path>, cfg: &AnalyseConfig) -> CaseResult {
    let start = Instant::now();
    let path = trace_for(case, dir);
    let observed = if path.is_file() {
        Trace::read_file(&path)
            .map_err(ReplayError::from)
            .and_then(|t| judge_trace(case, &t, cfg))
    } else {
        Err(ReplayError::NoTrace(path.display().to_string()))
    };
    CaseResult::new(case, observed.map_err(|e| e.to_string()), start.elapsed())
}

/// Replay every case, in order.
pub fn replay_all(cases: &[Case], dir: Option<&Path>, cfg: &AnalyseConfig) -> Vec<CaseResult> {
    cases.iter().map(|c| replay_case(c, dir, cfg)).collect()
}
