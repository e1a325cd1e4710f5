//! The built-in agent's plan: every path a skill offers, as steps for the jail. A pure function
//! of the bundle and the image's paths ([`plan`]); nothing here touches the host. Ordering,
//! classifier rules and limits: docs/agent.md.
//!
//! Order: commands the instructions tell the agent to run (fenced blocks and inline commands,
//! in document order) → scripts the instructions reference → every other bundled script
//! (orphans) → package-manager lifecycle and build hooks → Claude plugin hooks → `make` targets
//! named in the instructions → trigger variations of scripts that read arguments, environment
//! or input. Gates in prose never remove a step; they are listed in [`Plan::ignored_gates`].

mod classify;
mod claude_hooks;
mod commands;
pub mod dated;
mod docs;
mod gates;
mod hooks;
mod instructions;
mod make;
mod markdown;
mod scripts;
mod steps;
mod triggers;

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

pub use classify::{judge_block, judge_inline, BlockContext, InlineContext, Judgement, Skip};
pub use gates::find_gate;
pub use markdown::spans as code_spans;
pub use triggers::{triggers, variations, Triggers, Variation, TRUTHY};

use crate::bundle::{Script, SkillUnit};
use crate::jail::spec::StepSpec;
use serde::Serialize;
use std::collections::{BTreeSet, HashSet};

/// Default bound on the number of steps of a plan; more are reported in
/// [`Plan::over_limit`] and make the run incomplete.
pub const DEFAULT_MAX_STEPS: usize = 200;
/// Default bound on trigger variations per script.
pub const DEFAULT_MAX_VARIATIONS: usize = 4;
/// At most this many distinct invocations of one script are taken from the instructions.
pub const MAX_INVOCATIONS_PER_SCRIPT: usize = 3;
/// Largest code block or command run (an argument beyond ~128 KiB cannot be passed to exec).
pub const MAX_COMMAND_BYTES: usize = 64 << 10;

/// Where the skill sits in the image, and the planner's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanContext {
    /// The installed skill (`~/.claude/skills/<install_name>`).
    pub skill_dir: String,
    /// The project the agent works in; the working directory of most steps.
    pub workspace: String,
    pub home: String,
    pub step_timeout_ms: u64,
    /// Workspace files (relative) used as plausible inputs.
    pub sample_inputs: Vec<String>,
    /// Environment names the image already sets (planted credentials among them): trigger
    /// variations override them only with a literal the script compares them to.
    pub env_names: Vec<String>,
    pub max_steps: usize,
    pub max_variations_per_script: usize,
    /// Today in the jail (days since 1970-01-01, `--clock-offset` included); `None` plans no
    /// dated pass.
    pub today_days: Option<i64>,
}

impl PlanContext {
    /// Defaults matching the built-in Linux image's workspace (`README.md`, `package.json`,
    /// `src/index.js`).
    pub fn new(skill_dir: &str, workspace: &str, home: &str, step_timeout_ms: u64) -> Self {
        PlanContext {
            skill_dir: skill_dir.trim_end_matches('/').to_string(),
            workspace: workspace.to_string(),
            home: home.to_string(),
            step_timeout_ms,
            sample_inputs: vec![
                "README.md".into(),
                "package.json".into(),
                "src/index.js".into(),
            ],
            env_names: Vec::new(),
            today_days: None,
            max_steps: DEFAULT_MAX_STEPS,
            max_variations_per_script: DEFAULT_MAX_VARIATIONS,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// A command in the prose (inline code or written out after "run").
    InstructedCommand,
    /// A fenced code block.
    CodeBlock,
    ReferencedScript,
    OrphanScript,
    /// `package.json` lifecycle scripts, `setup.py`, `pyproject.toml` build hooks.
    LifecycleHook,
    /// Claude Code hooks (`hooks/hooks.json`, `.claude-plugin/plugin.json`, settings).
    PluginHook,
    MakeTarget,
    TriggerVariation,
}

/// A place in the bundle: file (relative to the skill) and 1-based line when known.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Source {
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

impl Source {
    pub fn at(file: &str, line: usize) -> Self {
        Source {
            file: file.to_string(),
            line: (line > 0).then_some(line),
        }
    }
    pub fn file(file: &str) -> Self {
        Source {
            file: file.to_string(),
            line: None,
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}", self.file),
            None => write!(f, "{}", self.file),
        }
    }
}

/// A condition in prose the plan ran past.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Gate {
    pub text: String,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedStep {
    /// Index in [`Plan::steps`]; the jail's step number.
    pub id: u32,
    pub kind: StepKind,
    pub label: String,
    pub argv: Vec<String>,
    pub cwd: String,
    /// Set on top of the image's environment.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_extra: Vec<(String, String)>,
    /// Standard input (hook JSON, trigger answers); `/dev/null` when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    pub timeout_ms: u64,
    pub source: Source,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<Gate>,
    /// Bundled scripts (relative paths) this step runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scripts: Vec<String>,
    /// Wall-clock offset of the dated pass (ns); 0 for the first pass.
    #[serde(skip_serializing_if = "is_zero")]
    pub clock_offset_ns: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub steps: Vec<PlannedStep>,
    /// Gates of planned steps, each once.
    pub ignored_gates: Vec<Gate>,
    /// What was found but deliberately not run, with why.
    pub not_run: Vec<(String, String)>,
    /// Steps found beyond `max_steps`: not run, and they count against coverage.
    pub over_limit: Vec<PlannedStep>,
    /// Bundled scripts the plan can run (the denominator of script coverage).
    pub scripts: Vec<String>,
    /// Days the dated pass moves the clock (see dated.rs); `None`: no dated pass.
    pub dated_pass_days: Option<i64>,
}

/// What makes two steps the same: argv, cwd, extra environment, input.
type StepKey = (Vec<String>, String, Vec<(String, String)>, Option<String>);

/// A step before it has an id.
#[derive(Debug, Clone)]
pub(crate) struct Draft {
    pub kind: StepKind,
    pub label: String,
    pub argv: Vec<String>,
    pub cwd: String,
    pub env_extra: Vec<(String, String)>,
    pub stdin: Option<String>,
    pub source: Source,
    pub gate: Option<String>,
    pub scripts: Vec<String>,
}

impl Draft {
    pub fn new(
        kind: StepKind,
        label: String,
        argv: Vec<String>,
        cwd: &str,
        source: Source,
    ) -> Self {
        Draft {
            kind,
            label,
            argv,
            cwd: cwd.to_string(),
            env_extra: Vec::new(),
            stdin: None,
            source,
            gate: None,
            scripts: Vec::new(),
        }
    }
}

/// Short one-line form of a command for labels and notes.
pub(crate) fn brief(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > 80 {
        format!("{}…", one.chars().take(80).collect::<String>())
    } else {
        one
    }
}

/// Plan every step of a skill. Pure: the same unit and context give the same plan.
pub fn plan(unit: &SkillUnit, ctx: &PlanContext) -> Plan {
    let res = commands::Resolver::new(unit, &ctx.skill_dir, &ctx.sample_inputs);
    let mut not_run: Vec<(String, String)> = Vec::new();
    let docs = docs::instruction_docs(unit);
    let found = instructions::read(&docs, &res, ctx, &mut not_run);

    let mut drafts: Vec<Draft> = found.commands;
    let mut used: Vec<(String, Vec<String>)> = Vec::new();

    // Referenced scripts, in order of first mention.
    let mut referenced: Vec<String> = Vec::new();
    for inv in &found.invocations {
        if !referenced.contains(&inv.script) {
            referenced.push(inv.script.clone());
        }
    }
    for rel in &referenced {
        let Some(script) = unit.scripts.iter().find(|s| &s.path == rel) else {
            continue;
        };
        let invs: Vec<&instructions::Invocation> = found
            .invocations
            .iter()
            .filter(|i| &i.script == rel)
            .collect();
        drafts.extend(steps::referenced(script, &invs, unit, ctx, &res, &mut used));
    }
    let mut runnable: Vec<String> = Vec::new();
    for s in &unit.scripts {
        if !scripts::heads(s, unit).is_empty() {
            runnable.push(s.path.clone());
        }
    }
    // Orphans: every other script, with every way it could be run.
    for s in &unit.scripts {
        if referenced.contains(&s.path) {
            continue;
        }
        let heads = scripts::heads(s, unit);
        if heads.is_empty() {
            not_run.push((
                format!("script {}", s.path),
                "no interpreter: no known extension, shebang, execute bit or recognisable code"
                    .into(),
            ));
            continue;
        }
        for h in heads {
            drafts.push(steps::script_step(
                StepKind::OrphanScript,
                s,
                &h,
                &[],
                None,
                ctx,
            ));
        }
    }
    drafts.extend(hooks::lifecycle(unit, ctx, &mut not_run));
    drafts.extend(claude_hooks::plugin_hooks(unit, ctx, &mut not_run));
    drafts.extend(make::make_targets(unit, ctx, &found.make, &mut not_run));
    // Trigger variations: after every first run, so a variation never precedes the plain run.
    for s in &unit.scripts {
        let heads = scripts::heads(s, unit);
        let Some(head) = used
            .iter()
            .find(|(p, _)| p == &s.path)
            .map(|(_, h)| h.clone())
            .or_else(|| heads.first().cloned())
        else {
            continue;
        };
        let Some(text) = unit.files.get(&s.path).and_then(|f| f.text()) else {
            continue;
        };
        let shell = head.first().is_some_and(|p| {
            matches!(
                p.rsplit('/').next().unwrap_or(p),
                "bash" | "sh" | "zsh" | "ksh" | "dash"
            )
        }) || s.path.ends_with(".sh");
        let t = triggers::triggers(text, shell, &ctx.env_names);
        for (k, v) in triggers::variations(&t, ctx.max_variations_per_script)
            .into_iter()
            .enumerate()
        {
            let mut d =
                steps::script_step(StepKind::TriggerVariation, s, &head, &v.args, None, ctx);
            d.label = format!("variation {} of {} ({})", k + 1, s.path, v.summary());
            d.env_extra = v.env;
            d.stdin = v.stdin;
            d.source = Source::at(&s.path, t.line);
            drafts.push(d);
        }
    }
    let mut plan = finish(drafts, not_run, runnable, ctx);
    if let Some(today) = ctx.today_days {
        if let Some(days) = dated::offset_days(&dated::scan_unit(unit), today) {
            let extra = dated::dated_steps(&plan.steps, days, ctx);
            plan.steps.extend(extra);
            plan.dated_pass_days = Some(days);
        }
    }
    plan
}

/// Ids, de-duplication (same argv, cwd, environment and input: the first one stays), the step
/// limit, gates.
fn finish(
    drafts: Vec<Draft>,
    not_run: Vec<(String, String)>,
    scripts: Vec<String>,
    ctx: &PlanContext,
) -> Plan {
    let mut seen: HashSet<StepKey> = HashSet::new();
    let mut steps = Vec::new();
    let mut over = Vec::new();
    let mut gates: Vec<Gate> = Vec::new();
    let mut gate_seen: BTreeSet<(String, String)> = BTreeSet::new();
    for d in drafts {
        let key = (
            d.argv.clone(),
            d.cwd.clone(),
            d.env_extra.clone(),
            d.stdin.clone(),
        );
        if !seen.insert(key) {
            continue;
        }
        let gate = d.gate.map(|text| Gate {
            text,
            source: d.source.clone(),
        });
        let id = (steps.len() + over.len()) as u32;
        let step = PlannedStep {
            id,
            kind: d.kind,
            label: d.label,
            argv: d.argv,
            cwd: d.cwd,
            env_extra: d.env_extra,
            stdin: d.stdin,
            timeout_ms: ctx.step_timeout_ms,
            source: d.source,
            gate,
            scripts: d.scripts,
            clock_offset_ns: 0,
        };
        if steps.len() < ctx.max_steps {
            if let Some(g) = &step.gate {
                if gate_seen.insert((g.text.clone(), g.source.to_string())) {
                    gates.push(g.clone());
                }
            }
            steps.push(step);
        } else {
            over.push(step);
        }
    }
    Plan {
        steps,
        ignored_gates: gates,
        not_run,
        over_limit: over,
        scripts,
        dated_pass_days: None,
    }
}

impl PlannedStep {
    /// The jail's step: argv, cwd and budget, with the step's environment and stdin.
    pub fn to_step_spec(&self) -> StepSpec {
        StepSpec {
            label: self.label.clone(),
            argv: self.argv.clone(),
            cwd: self.cwd.clone(),
            timeout_ms: self.timeout_ms,
            env: self.env_extra.clone(),
            stdin: self.stdin.clone(),
            clock_offset_ns: self.clock_offset_ns,
        }
    }
}

impl Plan {
    pub fn step_specs(&self) -> Vec<StepSpec> {
        self.steps.iter().map(PlannedStep::to_step_spec).collect()
    }

    /// The plan as the trace header records it (for the report's plan and coverage).
    pub fn record(&self, clock_offset_s: i64) -> crate::report::plan::PlanRecord {
        use crate::report::plan::{GateRecord, NotRun, PlanRecord, PlanStepRecord};
        PlanRecord {
            steps: self
                .steps
                .iter()
                .map(|s| PlanStepRecord {
                    id: s.id,
                    kind: serde_json::to_value(s.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    label: s.label.clone(),
                    argv: s.argv.clone(),
                    source: s.source.to_string(),
                    gate: s.gate.as_ref().map(|g| g.text.clone()),
                    scripts: s.scripts.clone(),
                    dated: s.clock_offset_ns != 0,
                })
                .collect(),
            over_limit: self.over_limit.len(),
            scripts: self.scripts.clone(),
            ignored_gates: self
                .ignored_gates
                .iter()
                .map(|g| GateRecord {
                    text: g.text.clone(),
                    source: g.source.to_string(),
                })
                .collect(),
            not_run: self
                .not_run
                .iter()
                .map(|(what, why)| NotRun {
                    what: what.clone(),
                    why: why.clone(),
                })
                .collect(),
            dated_pass_days: self.dated_pass_days,
            clock_offset_s,
            agent: None,
        }
    }
}

/// One step per script and interpreter, in path order, each with the workspace as working
/// directory (the first runner's plan, kept for callers without a [`SkillUnit`]). A script
/// whose extension and shebang disagree runs under both, so a decoy shebang does not hide it.
pub fn plan_scripts(
    scripts: &[Script],
    skill_dir: &str,
    workspace: &str,
    step_timeout_ms: u64,
) -> Vec<StepSpec> {
    let mut sorted: Vec<&Script> = scripts.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let ctx = PlanContext::new(skill_dir, workspace, "", step_timeout_ms);
    let mut steps = Vec::new();
    for s in sorted {
        let candidates = s.candidates();
        let heads: Vec<Vec<String>> = if candidates.is_empty() && s.executable {
            vec![Vec::new()]
        } else {
            candidates
                .iter()
                .map(|i| {
                    std::iter::once(i.program.clone())
                        .chain(i.args.iter().cloned())
                        .collect()
                })
                .collect()
        };
        for h in heads {
            let d = steps::script_step(StepKind::OrphanScript, s, &h, &[], None, &ctx);
            steps.push(StepSpec::plain(d.label, d.argv, d.cwd, step_timeout_ms));
        }
    }
    steps
}
