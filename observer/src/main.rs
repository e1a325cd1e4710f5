//! The `observe` command.

use anyhow::Context;
use clap::{Parser, Subcommand};
use observer::analyse::{self, AnalyseConfig};
use observer::baseline::{self, parse_fidelity, BaselineStore, BaselineSummary};
use observer::model::{Fidelity, StaticView};
use observer::report::{self, exit, Report};
use observer::run::{RunOptions, SkillInput};
use observer::trace::Trace;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "observe",
    version,
    about = "Run an AI-agent skill in a kernel jail and report what it does"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// Skill folder, lone SKILL.md, or .zip
    skill: Option<PathBuf>,
    /// Image the skill runs in: linux or darwin-sim
    #[arg(long, default_value = "linux")]
    os: String,
    /// Static scanner report (JSON with categories and declared_hosts)
    #[arg(long = "static")]
    static_file: Option<PathBuf>,
    /// Write the JSON report here ("-" for stdout; the summary then goes to stderr)
    #[arg(long)]
    report: Option<PathBuf>,
    /// Keep the event trace (JSON Lines) here
    #[arg(long)]
    record: Option<PathBuf>,
    /// Stream the trace live as JSON Lines while the run goes ("-" for stdout; the summary then
    /// goes to stderr)
    #[arg(long)]
    events: Option<PathBuf>,
    /// Baseline store for drift: a SQLite file or a postgres:// URL (default: a per-user SQLite
    /// file)
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Judge without any baseline (no drift, nothing stored)
    #[arg(long, conflicts_with = "baseline")]
    no_baseline: bool,
    /// Wall-clock budget in seconds
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// builtin, or an agent command line run in the jail with the task as its last argument
    /// (e.g. "claude -p", "codex exec", ./my-agent.sh)
    #[arg(long, default_value = "builtin")]
    agent: String,
    /// Task prompt for an external agent (default: built from the skill's description)
    #[arg(long)]
    task: Option<String>,
    /// Write a self-contained HTML report here
    #[arg(long)]
    html: Option<PathBuf>,
    /// Indicator weights and band thresholds overriding the shipped ones (TOML)
    #[arg(long)]
    weights: Option<PathBuf>,
    /// Seed of the planted credentials (64 hex digits), to reproduce a run
    #[arg(long)]
    seed: Option<String>,
    /// Forward requests for this host to the real one (HOST, HOST:PORT, *.SUFFIX; without a port
    /// only 80/443); repeatable. Everything else is answered locally
    #[arg(long, value_name = "HOST")]
    passthrough: Vec<String>,
    /// Serve captured responses from DIR/<host>/<path> (or DIR/_any/<path>)
    #[arg(long, value_name = "DIR")]
    responses: Option<PathBuf>,
    /// Move the jail's wall clock, e.g. 3d, 12h, 2w, -1d (catches time bombs)
    #[arg(long, value_parser = parse_clock_offset, allow_hyphen_values = true)]
    clock_offset: Option<i64>,
    #[command(flatten)]
    limits: LimitArgs,
}

fn parse_clock_offset(s: &str) -> Result<i64, String> {
    observer::tracer::clock::parse_offset(s)
}

/// Per-run resource limits (docs/architecture.md, "Resource limits").
#[derive(clap::Args, Debug, Clone)]
struct LimitArgs {
    /// CPU time of the whole run, in seconds
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    cpu_time: u64,
    /// Memory of the whole run (e.g. 1G)
    #[arg(long, value_name = "SIZE", default_value = "2G")]
    memory: String,
    /// Processes and threads at once
    #[arg(long, value_name = "N", default_value_t = 256)]
    pids: u64,
    /// The jail's writable space (/home, /tmp, /var/tmp together)
    #[arg(long, value_name = "SIZE", default_value = "512M")]
    disk: String,
    /// Bytes the run may send through egress capture
    #[arg(long, value_name = "SIZE", default_value = "64M")]
    egress_bytes: String,
}

impl LimitArgs {
    fn resolve(&self) -> Result<observer::limits::ResourceLimits, ExitCode> {
        use observer::limits::parse_size;
        let size =
            |flag: &str, v: &str| parse_size(v).map_err(|e| bad_input(format!("{flag}: {e}")));
        let l = observer::limits::ResourceLimits {
            cpu_time: std::time::Duration::from_secs(self.cpu_time),
            memory: size("--memory", &self.memory)?,
            pids: self.pids,
            disk: size("--disk", &self.disk)?,
            egress_bytes: size("--egress-bytes", &self.egress_bytes)?,
        };
        l.validate().map_err(bad_input)?;
        Ok(l)
    }
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Report what this host offers the jail
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Re-judge a recorded trace without a sandbox
    Replay {
        trace: PathBuf,
        #[arg(long = "static")]
        static_file: Option<PathBuf>,
        /// Judge against this baseline store instead of the baseline recorded in the trace
        #[arg(long)]
        baseline: Option<PathBuf>,
        #[arg(long)]
        report: Option<PathBuf>,
        #[arg(long)]
        weights: Option<PathBuf>,
    },
    /// Print the report's JSON Schema
    Schema,
    /// Manage drift baselines
    Baseline {
        #[command(subcommand)]
        op: BaselineOp,
        /// Store: a SQLite file or a postgres:// URL (default: the per-user SQLite file)
        #[arg(long, global = true)]
        store: Option<PathBuf>,
    },
    /// Diagnostic: run one command in the jail (as the built-in image's user, in its workspace)
    /// and print its output; with --record, keep the trace
    JailExec {
        /// Run without tracing (benchmark baseline)
        #[arg(long)]
        untraced: bool,
        #[arg(long)]
        record: Option<PathBuf>,
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// Print nothing (benchmarks)
        #[arg(long, short)]
        quiet: bool,
        /// The jail alone: system binds, an empty home, nothing planted, no egress capture
        /// (benchmarks of the jail and the tracer)
        #[arg(long)]
        bare: bool,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        argv: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
enum BaselineOp {
    /// List stored baselines
    List,
    /// Show one baseline
    Show {
        skill: String,
        #[arg(long, default_value = "bundle")]
        fidelity: String,
    },
    /// Store the profile of a report as the baseline (replacing any)
    Accept { report: PathBuf },
    /// Remove a baseline
    Forget {
        skill: String,
        #[arg(long, default_value = "bundle")]
        fidelity: String,
    },
}

fn code(c: i32) -> ExitCode {
    ExitCode::from(c.clamp(0, 255) as u8)
}

fn bad_input(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("observe: {msg}");
    code(exit::BAD_INPUT)
}

fn internal(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("observe: {msg}");
    code(exit::INTERNAL_ERROR)
}

/// `--agent CMD` as argv (`None` for the built-in agent); `--task` needs an external agent.
fn external_agent(cli: &Cli) -> Result<Option<Vec<String>>, String> {
    if cli.agent == "builtin" {
        if cli.task.is_some() {
            return Err("--task is for an external agent (--agent CMD)".into());
        }
        return Ok(None);
    }
    let argv = shlex::split(&cli.agent)
        .ok_or_else(|| format!("--agent {:?}: unbalanced quotes", cli.agent))?;
    if argv.is_empty() {
        return Err("--agent: empty command".into());
    }
    Ok(Some(argv))
}

/// The task an external agent gets when `--task` is not given: ask it to use the skill.
fn default_task(unit: &observer::bundle::SkillUnit) -> String {
    let desc = unit.description.as_deref().unwrap_or("").trim();
    if desc.is_empty() {
        format!("Use the {} skill on this project.", unit.name)
    } else {
        format!("Use the {} skill on this project: {desc}", unit.name)
    }
}

/// A SQLite file, a `postgres://` URL, or the per-user SQLite file.
fn open_store(path: Option<&Path>) -> anyhow::Result<Box<dyn BaselineStore>> {
    Ok(baseline::open(path.map(Path::as_os_str))?)
}

fn weights(path: Option<&Path>) -> Result<AnalyseConfig, ExitCode> {
    match path {
        None => Ok(AnalyseConfig::shipped()),
        Some(p) => AnalyseConfig::load_file(p).map_err(bad_input),
    }
}

/// Writes the report where asked and the summary where it does not collide with it.
/// `stdout_taken`: the events stream owns stdout, so the summary goes to stderr.
fn deliver(
    r: &Report,
    report_to: Option<&Path>,
    html: Option<(&Path, &Trace)>,
    stdout_taken: bool,
) -> anyhow::Result<()> {
    let json = r.to_json();
    let summary = report::summary(r);
    match report_to {
        Some(p) if p == Path::new("-") => {
            print!("{json}");
            eprint!("{summary}");
        }
        Some(p) => {
            std::fs::write(p, &json).with_context(|| format!("writing {}", p.display()))?;
        }
        None => {}
    }
    match report_to {
        Some(p) if p == Path::new("-") => {}
        _ if stdout_taken => eprint!("{summary}"),
        _ => print!("{summary}"),
    }
    if let Some((p, t)) = html {
        std::fs::write(p, report::render_html(r, t))
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some(observer::jail::stage1::STAGE1_ARG) {
        observer::jail::stage1::main();
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("OBSERVE_LOG"))
        .with_writer(std::io::stderr)
        .init();
    tracing::debug!("start");
    let mut cli = Cli::parse();
    // Runs (not the other subcommands) turn SIGTERM/SIGINT into an early end with a report
    // (verdict by what was seen, reason `cancelled`).
    let runs_jail = matches!(cli.cmd, None | Some(Cmd::JailExec { .. }));
    if runs_jail {
        if let Err(e) = observer::cancel::install() {
            return internal(e);
        }
    }
    match &cli.cmd {
        Some(Cmd::Doctor { json }) => {
            let d = observer::doctor::run();
            if *json {
                println!("{}", serde_json::to_string_pretty(&d).unwrap_or_default());
            } else {
                print!("{}", d.render());
            }
            return if d.usable() {
                ExitCode::SUCCESS
            } else {
                code(exit::INTERNAL_ERROR)
            };
        }
        Some(Cmd::Schema) => {
            print!("{}", report::REPORT_SCHEMA_JSON);
            return ExitCode::SUCCESS;
        }
        Some(Cmd::Replay {
            trace,
            static_file,
            baseline,
            report,
            weights: w,
        }) => {
            return replay(
                trace,
                static_file.as_deref(),
                baseline.as_deref(),
                report.as_deref(),
                w.as_deref(),
            );
        }
        Some(Cmd::Baseline { op, store }) => return baseline_cmd(op, store.as_deref()),
        Some(Cmd::JailExec {
            untraced,
            record,
            timeout,
            quiet,
            bare,
            argv,
        }) => {
            return jail_exec(
                *untraced,
                *bare,
                record.clone(),
                *timeout,
                *quiet,
                argv.clone(),
            );
        }
        None => {}
    }
    let Some(skill) = cli.skill.clone() else {
        return bad_input("a SKILL path is required (see --help)");
    };
    if cli.os != "linux" && cli.os != "darwin-sim" {
        return bad_input(format!(
            "--os must be linux or darwin-sim, not {:?}",
            cli.os
        ));
    }
    if let Err(e) = external_agent(&cli) {
        return bad_input(e);
    }
    if let Err(e) = observer::egress::proxy::passthrough::parse_rules(&cli.passthrough) {
        return bad_input(e);
    }
    // Absolute, so the lookups do not depend on the supervisor's working directory.
    let responses = match cli.responses.as_deref().map(std::fs::canonicalize) {
        Some(Ok(d)) if d.is_dir() => Some(d),
        Some(_) => {
            let d = cli.responses.as_deref().unwrap_or(Path::new("")).display();
            return bad_input(format!("--responses {d}: not a directory"));
        }
        None => None,
    };
    cli.responses = responses;
    let cfg = match weights(cli.weights.as_deref()) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let resources = match cli.limits.resolve() {
        Ok(l) => l,
        Err(e) => return e,
    };
    let units = match observer::bundle::load(&skill, &observer::bundle::Limits::default()) {
        Ok(u) => u,
        Err(e) => return bad_input(e),
    };
    if let Err(e) = check_outputs(&cli) {
        return bad_input(e);
    }
    if units.len() > 1
        && (cli.report.is_some()
            || cli.record.is_some()
            || cli.html.is_some()
            || cli.events.is_some())
    {
        return bad_input(format!(
            "{} holds {} skills; point observe at one skill folder to use --report/--record/--html/--events",
            skill.display(),
            units.len()
        ));
    }
    let store = if cli.no_baseline {
        None
    } else {
        match open_store(cli.baseline.as_deref()) {
            Ok(s) => Some(s),
            Err(e) => return bad_input(format!("baseline store: {e:#}")),
        }
    };
    let mut worst = exit::CLEAN;
    for unit in &units {
        let c = match observe_one(unit, &cli, &cfg, store.as_deref(), &resources) {
            Ok(c) => c,
            Err(e) => return e,
        };
        // Report the most serious outcome across units.
        worst = worst.max(c);
        if observer::cancel::requested().is_some() {
            break;
        }
    }
    code(worst)
}

/// Outputs that would collide, refused before anything runs.
fn check_outputs(cli: &Cli) -> Result<(), String> {
    let dash = |p: &Option<PathBuf>| p.as_deref() == Some(Path::new("-"));
    if dash(&cli.report) && dash(&cli.events) {
        return Err(
            "--report - and --events - both want stdout; send one of them to a file".into(),
        );
    }
    if let Some(p) = cli
        .events
        .as_deref()
        .filter(|p| !observer::events::is_stdout(p))
    {
        let same = |o: &Option<PathBuf>| o.as_deref() == Some(p);
        if same(&cli.report) || same(&cli.record) || same(&cli.html) {
            return Err(format!(
                "--events {} names the same file as another output",
                p.display()
            ));
        }
        // Fail now, as bad input, rather than after the image is built.
        observer::events::open_target(p).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn observe_one(
    unit: &observer::bundle::SkillUnit,
    cli: &Cli,
    cfg: &AnalyseConfig,
    store: Option<&dyn BaselineStore>,
    resources: &observer::limits::ResourceLimits,
) -> Result<i32, ExitCode> {
    tracing::debug!("bundle loaded");
    let statics: StaticView =
        observer::statics::static_view(unit, cli.static_file.as_deref()).map_err(bad_input)?;
    tracing::debug!("static view ready");
    let base: Option<BaselineSummary> = match store {
        Some(s) => s
            .show(&unit.name, unit.fidelity)
            .map_err(|e| internal(format!("baseline store: {e}")))?,
        None => None,
    };
    let opts = RunOptions {
        os: cli.os.clone(),
        timeout: std::time::Duration::from_secs(cli.timeout),
        record: cli.record.clone(),
        events: cli.events.clone(),
        seed: cli.seed.clone(),
        passthrough: cli.passthrough.clone(),
        responses: cli.responses.clone(),
        statics: Some(statics.clone()),
        baseline: base.as_ref().and_then(|b| serde_json::to_value(b).ok()),
        clock_offset_ns: cli.clock_offset.unwrap_or(0),
        agent: external_agent(cli)
            .ok()
            .flatten()
            .map(|argv| observer::run::ExternalAgent {
                argv,
                task: cli.task.clone().unwrap_or_else(|| default_task(unit)),
                passthrough: cli.passthrough.clone(),
            }),
        resources: resources.clone(),
        ..RunOptions::default()
    };
    let res = match observer::run::observe(&SkillInput::from(unit), &opts) {
        Ok(r) => r,
        Err(e @ observer::run::RunError::Image(observer::image::ImageError::Seed(_))) => {
            return Err(bad_input(e))
        }
        Err(e) => return Err(internal(e)),
    };
    tracing::debug!("run ended");
    let trace = Trace::read_file(&res.trace_path).map_err(internal)?;
    let r = analyse::analyse(&trace, &statics, base.as_ref(), cfg);
    tracing::debug!("analysed");
    if let Some(s) = store {
        if let Err(e) = baseline::establish(s, &r) {
            eprintln!("observe: could not store the baseline: {e}");
        }
    }
    deliver(
        &r,
        cli.report.as_deref(),
        cli.html.as_deref().map(|p| (p, &trace)),
        cli.events
            .as_deref()
            .is_some_and(observer::events::is_stdout),
    )
    .map_err(internal)?;
    Ok(r.verdict.exit_code())
}

fn replay(
    trace: &Path,
    static_file: Option<&Path>,
    baseline: Option<&Path>,
    report_to: Option<&Path>,
    w: Option<&Path>,
) -> ExitCode {
    let cfg = match weights(w) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let t = match Trace::read_file(trace) {
        Ok(t) => t,
        Err(e) => return bad_input(format!("{}: {e}", trace.display())),
    };
    let statics = match static_file {
        Some(p) => match observer::statics::import_file(p) {
            Ok(v) => v,
            Err(e) => return bad_input(e),
        },
        None => match &t.header.statics {
            Some(v) => v.clone(),
            None => return bad_input("the trace records no static view; pass --static FILE"),
        },
    };
    let base: Option<BaselineSummary> = match baseline {
        Some(p) => {
            let store = match open_store(Some(p)) {
                Ok(s) => s,
                Err(e) => return bad_input(format!("baseline store: {e:#}")),
            };
            let name = t.header.skill.clone().unwrap_or_default();
            let fid = t
                .header
                .fidelity
                .as_deref()
                .and_then(parse_fidelity)
                .unwrap_or(Fidelity::Bundle);
            match store.show(&name, fid) {
                Ok(b) => b,
                Err(e) => return internal(e),
            }
        }
        None => t
            .header
            .baseline
            .clone()
            .and_then(|v| serde_json::from_value(v).ok()),
    };
    let r = analyse::analyse(&t, &statics, base.as_ref(), &cfg);
    match deliver(&r, report_to, None, false) {
        Ok(()) => code(r.verdict.exit_code()),
        Err(e) => internal(format!("{e:#}")),
    }
}

fn baseline_cmd(op: &BaselineOp, store: Option<&Path>) -> ExitCode {
    let s = match open_store(store) {
        Ok(s) => s,
        Err(e) => return bad_input(format!("baseline store: {e:#}")),
    };
    let fid = |f: &str| {
        parse_fidelity(f)
            .ok_or_else(|| bad_input(format!("fidelity must be bundle or prompt, not {f:?}")))
    };
    match op {
        BaselineOp::List => match s.list() {
            Ok(list) => {
                for e in list {
                    println!("{}", serde_json::to_string(&e).unwrap_or_default());
                }
                ExitCode::SUCCESS
            }
            Err(e) => internal(e),
        },
        BaselineOp::Show { skill, fidelity } => {
            let f = match fid(fidelity) {
                Ok(f) => f,
                Err(e) => return e,
            };
            match s.show(skill, f) {
                Ok(Some(b)) => {
                    println!("{}", serde_json::to_string_pretty(&b).unwrap_or_default());
                    ExitCode::SUCCESS
                }
                Ok(None) => bad_input(format!("no baseline for {skill} ({fidelity})")),
                Err(e) => internal(e),
            }
        }
        BaselineOp::Accept { report } => {
            let r: Report = match std::fs::read(report)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            {
                Ok(r) => r,
                Err(e) => return bad_input(format!("{}: {e}", report.display())),
            };
            let Some(summary) = BaselineSummary::from_report(&r) else {
                return bad_input("the report has no skill name or fidelity to key a baseline on");
            };
            match s.accept(&summary, true) {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => internal(e),
            }
        }
        BaselineOp::Forget { skill, fidelity } => {
            let f = match fid(fidelity) {
                Ok(f) => f,
                Err(e) => return e,
            };
            match s.forget(skill, f) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => bad_input(format!("no baseline for {skill} ({fidelity})")),
                Err(e) => internal(e),
            }
        }
    }
}

fn jail_exec(
    untraced: bool,
    bare: bool,
    record: Option<PathBuf>,
    timeout: u64,
    quiet: bool,
    argv: Vec<String>,
) -> ExitCode {
    let opts = RunOptions {
        timeout: std::time::Duration::from_secs(timeout),
        grace: std::time::Duration::ZERO,
        record,
        command: Some(argv),
        traced: !untraced,
        bare_image: bare,
        ..RunOptions::default()
    };
    match observer::run::observe(&SkillInput::empty("shell"), &opts) {
        Ok(r) => {
            if !quiet {
                for o in r.step_output.values() {
                    print!("{o}");
                }
                for reason in &r.incomplete_reasons {
                    eprintln!("incomplete: {reason}");
                }
            }
            if r.outcome.failure.is_some() || r.outcome.budget_exhausted {
                code(exit::INTERNAL_ERROR)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => internal(e),
    }
}
