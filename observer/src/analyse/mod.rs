//! The analyser: a pure function `(trace, static view, baseline, config) → report`.
//!
//! Nothing here touches the kernel, files or the clock (except [`replay`], which only reads the
//! trace file), so a recorded trace re-judged later gives the same report byte for byte.
//! Stages: observe (normalise events) → profile → categories → indicators → score → verdict.

mod config;
mod creds;
mod exec;
mod fs;
mod hosts;
mod net;
mod observe;
mod paths;
mod profile;

#[cfg(test)]
mod tests;

pub use config::{
    AnalyseConfig, Bands, ConfigError, Thresholds, SHIPPED_WEIGHTS_TOML, WEIGHT_KEYS,
};
pub use hosts::{host_matches, normalize_host};
pub use paths::{normalize as normalize_path, Layout};

use crate::baseline::BaselineSummary;
use crate::model::{Category, Fidelity, StaticView};
use crate::report::{
    Band, BaselineRef, CategoryFinding, Indicator, Profile, Report, RunInfo, Severity, SkillInfo,
    Verdict, SCHEMA_VERSION,
};
use crate::trace::{Event, EventKind, Trace, TraceError};
use std::collections::BTreeMap;
use std::path::Path;

/// One indicator instance before weighting. `key` selects the weight (an id or `id.variant`).
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub key: &'static str,
    pub id: &'static str,
    pub summary: String,
    pub evidence: Vec<u64>,
}

impl Finding {
    pub fn new(id: &'static str, summary: String, evidence: Vec<u64>) -> Finding {
        Finding {
            key: id,
            id,
            summary,
            evidence,
        }
    }
    pub fn keyed(
        key: &'static str,
        id: &'static str,
        summary: String,
        evidence: Vec<u64>,
    ) -> Finding {
        Finding {
            key,
            id,
            summary,
            evidence,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// Re-judge a recorded trace without a sandbox (`observe replay TRACE`).
pub fn replay(
    trace_path: &Path,
    statics: &StaticView,
    baseline: Option<&BaselineSummary>,
    cfg: &AnalyseConfig,
) -> Result<Report, ReplayError> {
    let trace = Trace::read_file(trace_path)?;
    Ok(analyse(&trace, statics, baseline, cfg))
}

fn parse_fidelity(s: Option<&str>) -> Option<Fidelity> {
    match s.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        Some("bundle") => Some(Fidelity::Bundle),
        Some("prompt") => Some(Fidelity::Prompt),
        _ => None,
    }
}

/// Judge a trace.
/// An external agent's own traffic to its passthrough hosts (its model API) is recorded but not
/// the skill's: connections of the agent's process that the `--passthrough` rules let through, and
/// lookups of those names (DNS queries carry no process). The same host reached by any other
/// process still counts.
fn drop_agent_passthrough(o: &mut observe::Observations, a: &crate::report::plan::AgentReport) {
    use crate::egress::proxy::passthrough::PassthroughRule;
    let Some(root) = a.pid else { return };
    let rules: Vec<PassthroughRule> = a
        .passthrough
        .iter()
        .filter_map(|r| PassthroughRule::parse(r).ok())
        .collect();
    o.egress.retain(|g| {
        let agents = match (g.via, g.port) {
            ("dns", _) => rules.iter().any(|r| r.matches_host(&g.host.name)),
            (_, Some(port)) if g.pid == root => rules.iter().any(|r| r.matches(&g.host.name, port)),
            _ => false,
        };
        !agents
    });
}

pub fn analyse(
    trace: &Trace,
    statics: &StaticView,
    baseline: Option<&BaselineSummary>,
    cfg: &AnalyseConfig,
) -> Report {
    let mut events: Vec<&Event> = trace.events.iter().collect();
    events.sort_by_key(|e| e.seq);
    let layout = Layout::from_context(&trace.header.context, &trace.header.os);
    let mut o = observe::observe(trace, &layout, &events);
    let plan = trace
        .header
        .plan
        .as_ref()
        .and_then(|v| serde_json::from_value::<crate::report::plan::PlanRecord>(v.clone()).ok())
        .map(|rec| crate::report::plan::plan_report(&rec, &events));
    if let Some(a) = plan.as_ref().and_then(|p| p.agent.as_ref()) {
        drop_agent_passthrough(&mut o, a);
    }
    exec::classify_execution(&mut o, &layout);

    let mut profile = profile::build(&o, &events, statics, cfg);
    for p in profile.programs.iter_mut() {
        p.program_key = exec::program_key(&p.program, &layout);
    }

    // Categories
    let mut cats: BTreeMap<Category, Vec<u64>> = BTreeMap::new();
    let mut add = |c: Category, s: u64| cats.entry(c).or_default().push(s);
    o.egress.iter().for_each(|g| add(Category::Network, g.seq));
    o.creds
        .iter()
        .filter(|c| !c.ambient)
        .for_each(|c| add(Category::Credential, c.seq));
    o.execs
        .iter()
        .filter(|e| e.ok && e.execution)
        .for_each(|e| add(Category::Execution, e.seq));
    o.files
        .iter()
        .filter(|f| fs::counts_as_write(f))
        .for_each(|f| add(Category::Writes, f.seq));
    let categories: Vec<CategoryFinding> = cats
        .iter()
        .map(|(c, s)| CategoryFinding {
            category: *c,
            declared: statics.categories.contains(c),
            evidence: profile::cap(s.clone(), cfg),
        })
        .collect();

    // Indicators
    let ctx = &trace.header.context;
    let mut f: Vec<Finding> = Vec::new();
    for (c, seqs) in &cats {
        if statics.categories.contains(c) {
            f.push(Finding::new(
                "INFO_DECLARED_BEHAVIOUR",
                format!("{} behaviour, declared by the static view", c.as_str()),
                seqs.clone(),
            ));
        } else {
            let declared: Vec<&str> = statics.categories.iter().map(|c| c.as_str()).collect();
            let d = if declared.is_empty() {
                "none".to_string()
            } else {
                declared.join(", ")
            };
            f.push(Finding::new(
                "BEHAV_STATIC_DIVERGENCE",
                format!(
                    "observed {} behaviour; the static view declares: {d}",
                    c.as_str()
                ),
                seqs.clone(),
            ));
        }
    }
    net::host_findings(&o, statics, ctx, cfg, &mut f);
    net::dns_findings(&o, statics, cfg, &mut f);
    net::canary_findings(&o, statics, &mut f);
    net::cred_access_findings(&o, statics, ctx, &mut f);
    net::cred_flow_findings(&o, statics, ctx, &mut f);
    for (summary, ev) in exec::remote_exec(&o) {
        f.push(Finding::new("BEHAV_REMOTE_EXEC", summary, ev));
    }
    fs::write_findings(&o, &layout, statics, cfg, &mut f);
    fs::probe_findings(&o, cfg, &mut f);
    fs::escape_findings(&o, &events, &mut f);

    let name = trace
        .header
        .skill
        .clone()
        .unwrap_or_else(|| "unknown".into());
    let fidelity = parse_fidelity(trace.header.fidelity.as_deref());
    let baseline_ref = baseline.map(|b| {
        let current = BaselineSummary::from_parts(
            &name,
            fidelity.unwrap_or(b.fidelity),
            None,
            &profile,
            &categories,
        );
        drift_findings(b, &current, &profile, &categories, &mut f);
        BaselineRef {
            digest: b.digest.clone(),
            accepted_at: b.accepted_at.clone(),
        }
    });

    // Run coverage
    let (duration_ms, mut complete, mut reasons) =
        match events.iter().rev().find_map(|e| match &e.kind {
            EventKind::RunEnd {
                duration_ms,
                complete,
                incomplete_reasons,
            } => Some((*duration_ms, *complete, incomplete_reasons.clone())),
            _ => None,
        }) {
            Some((d, c, r)) => (d, c, r),
            None => (
                events.last().map(|e| e.t_ns / 1_000_000).unwrap_or(0),
                false,
                vec!["trace ends without run_end (truncated or the supervisor died)".to_string()],
            ),
        };
    if !complete && reasons.is_empty() {
        reasons.push("run_end reports the run incomplete without a reason".into());
    }
    for s in &profile.steps {
        if s.end_seq.is_none() {
            complete = false;
            reasons.push(format!(
                "step {} ({}) has no step_end",
                s.step,
                exec::short(&s.label)
            ));
        }
    }
    for (a, b) in &o.seq_gaps {
        complete = false;
        reasons.push(if a == b {
            format!("event {a} missing from the trace")
        } else {
            format!("events {a}..{b} missing from the trace")
        });
    }
    if events.windows(2).any(|w| w[0].seq == w[1].seq) {
        complete = false;
        reasons.push("duplicate event sequence numbers".into());
    }
    // The tracer could not make a process read the virtual clock: a delayed payload in it may
    // not have fired (tracer/lazyclock.rs).
    for n in profile
        .notes
        .iter()
        .filter(|n| n.note == "clock_unvirtualized")
    {
        complete = false;
        reasons.push(format!(
            "a process kept the real clock while time was fast-forwarded: {}",
            n.detail
        ));
    }
    if let Some(why) = plan.as_ref().and_then(|p| p.incomplete_reason()) {
        complete = false;
        reasons.push(why);
    }
    if ctx.home.is_empty() || ctx.workspace.is_empty() {
        complete = false;
        reasons.push("trace header has no run context: paths cannot be classified".into());
    }

    let (indicators, score) = weigh(f, cfg);
    let band = if score >= cfg.bands.blocked {
        Band::Blocked
    } else if score >= cfg.bands.review {
        Band::Review
    } else {
        Band::Trusted
    };
    // Findings outrank missing coverage: a run that exfiltrated and was then cancelled is still
    // MALICIOUS. Only an otherwise trusted run turns INCOMPLETE, never CLEAN.
    let verdict = match band {
        Band::Blocked => Verdict::Malicious,
        Band::Review => Verdict::Suspicious,
        Band::Trusted if complete => Verdict::Clean,
        Band::Trusted => Verdict::Incomplete,
    };

    Report {
        schema_version: SCHEMA_VERSION,
        skill: SkillInfo {
            name,
            digest: trace.header.skill_digest.clone(),
            fidelity,
        },
        run: RunInfo {
            run_id: trace.header.run_id.clone(),
            os: trace.header.os.clone(),
            started_at: trace.header.started_at.clone(),
            duration_ms,
            complete,
            incomplete_reasons: reasons,
            events: events.len() as u64,
            resources: resources_of(&events, &profile),
        },
        static_view: StaticView {
            source: statics.source,
            categories: {
                let mut c = statics.categories.clone();
                c.sort();
                c.dedup();
                c
            },
            declared_hosts: {
                let mut h = statics.declared_hosts.clone();
                h.sort();
                h.dedup();
                h
            },
        },
        baseline: baseline_ref,
        profile,
        categories,
        indicators,
        score,
        band,
        verdict,
        plan,
    }
}

fn drift_findings(
    b: &BaselineSummary,
    current: &BaselineSummary,
    p: &Profile,
    cats: &[CategoryFinding],
    f: &mut Vec<Finding>,
) {
    let d = b.drift(current);
    let since = if b.accepted_at.is_empty() {
        String::new()
    } else {
        format!(" (baseline of {})", b.accepted_at)
    };
    let mut push = |what: &str, items: Vec<String>, ev: Vec<u64>| {
        if !items.is_empty() {
            let refs: Vec<&str> = items.iter().map(|s| s.as_str()).collect();
            f.push(Finding::new(
                "BEHAV_DRIFT",
                format!("new {what} since the baseline{since}: {}", net::list(&refs)),
                ev,
            ));
        }
    };
    let ev: Vec<u64> = p
        .hosts
        .iter()
        .filter(|h| d.hosts.contains(&h.host))
        .flat_map(|h| h.evidence.iter().copied())
        .collect();
    push("hosts", d.hosts.clone(), ev);
    let ev = cats
        .iter()
        .filter(|c| d.categories.contains(&c.category))
        .flat_map(|c| c.evidence.iter().copied())
        .collect();
    push(
        "categories",
        d.categories
            .iter()
            .map(|c| c.as_str().to_string())
            .collect(),
        ev,
    );
    let ev = p
        .programs
        .iter()
        .filter(|x| x.ok && d.programs.contains(&x.program_key))
        .map(|x| x.seq)
        .collect();
    push("programs", d.programs.clone(), ev);
    let ev = p
        .files
        .iter()
        .filter(|x| {
            d.write_classes.iter().any(|c| c == x.class.as_str())
                && x.access.iter().any(|a| a.is_write())
        })
        .flat_map(|x| x.evidence.iter().copied())
        .collect();
    push("write classes", d.write_classes.clone(), ev);
}

fn severity(w: u32, cfg: &AnalyseConfig) -> Severity {
    if w == 0 {
        Severity::Info
    } else if w < cfg.bands.review {
        Severity::Low
    } else if w < cfg.bands.blocked {
        Severity::Medium
    } else {
        Severity::High
    }
}

/// Scoring slot of an indicator id. A host outside the declared hosts is both an undeclared host
/// and a divergence; they share a slot so one fact is not counted twice.
fn slot(id: &str) -> &str {
    match id {
        "BEHAV_UNDECLARED_HOST" => "BEHAV_STATIC_DIVERGENCE",
        other => other,
    }
}

/// Weight findings and score the run: per slot the largest weight counts once (so a noisy run
/// cannot add up one soft indicator), the sum is capped at 100.
fn weigh(findings: Vec<Finding>, cfg: &AnalyseConfig) -> (Vec<Indicator>, u32) {
    let mut per_id: BTreeMap<&str, u32> = BTreeMap::new();
    let mut out: Vec<Indicator> = findings
        .into_iter()
        .map(|f| {
            let w = cfg.weight(f.key);
            let e = per_id.entry(slot(f.id)).or_insert(0);
            *e = (*e).max(w);
            Indicator {
                id: f.id.to_string(),
                severity: severity(w, cfg),
                summary: f.summary,
                evidence: profile::cap(f.evidence, cfg),
                weight: w,
            }
        })
        .collect();
    let score = per_id.values().sum::<u32>().min(100);
    out.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then_with(|| a.id.cmp(&b.id))
            .then_with(|| a.summary.cmp(&b.summary))
            .then_with(|| a.evidence.cmp(&b.evidence))
    });
    out.dedup_by(|a, b| a.id == b.id && a.summary == b.summary && a.evidence == b.evidence);
    (out, score)
}

/// The run's `resources` event, with the process count the trace shows.
fn resources_of(
    events: &[&Event],
    profile: &crate::report::Profile,
) -> Option<crate::limits::ResourceReport> {
    let mut r = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Resources(r) => Some(r.clone()),
        _ => None,
    })?;
    r.used.processes = Some(profile.processes.len() as u64);
    Some(r)
}
