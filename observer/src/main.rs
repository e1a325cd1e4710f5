//! The `observe` command.

use clap::{Parser, Subcommand};
use observer::run::{RunOptions, SkillInput};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit statuses (docs/report-format.md).
const EXIT_INTERNAL: u8 = 1;
const EXIT_BAD_INPUT: u8 = 2;
const EXIT_INCOMPLETE: u8 = 30;

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
    /// Write the JSON report here
    #[arg(long)]
    report: Option<PathBuf>,
    /// Keep the event trace (JSON Lines) here
    #[arg(long)]
    record: Option<PathBuf>,
    /// Baseline store for drift
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Wall-clock budget in seconds
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// builtin, or a command that runs an external agent
    #[arg(long, default_value = "builtin")]
    agent: String,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Report what this host offers the jail
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Re-judge a recorded trace without a sandbox
    Replay { trace: PathBuf },
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
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        argv: Vec<String>,
    },
}

fn not_yet(flag: &str) -> ExitCode {
    eprintln!("observe: {flag} is not yet supported");
    ExitCode::from(EXIT_BAD_INPUT)
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some(observer::jail::stage1::STAGE1_ARG) {
        observer::jail::stage1::main();
    }
    if observer::jail::init::is_reexec() {
        observer::jail::init::after_reexec();
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("OBSERVE_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.cmd {
        Some(Cmd::Doctor { json }) => {
            let d = observer::doctor::run();
            if json {
                println!("{}", serde_json::to_string_pretty(&d).unwrap_or_default());
            } else {
                print!("{}", d.render());
            }
            return if d.usable() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_INTERNAL)
            };
        }
        Some(Cmd::Replay { .. }) => return not_yet("replay"),
        Some(Cmd::JailExec {
            untraced,
            record,
            timeout,
            quiet,
            argv,
        }) => {
            let input = SkillInput::empty("shell");
            let opts = RunOptions {
                timeout: std::time::Duration::from_secs(timeout),
                grace: std::time::Duration::ZERO,
                record,
                command: Some(argv),
                traced: !untraced,
                ..RunOptions::default()
            };
            return match observer::run::observe(&input, &opts) {
                Ok(r) => {
                    if !quiet {
                        for o in r.step_output.values() {
                            print!("{o}");
                        }
                        for reason in &r.incomplete_reasons {
                            eprintln!("incomplete: {reason}");
                        }
                    }
                    let failed = r.outcome.failure.is_some() || r.outcome.budget_exhausted;
                    if failed {
                        ExitCode::from(EXIT_INTERNAL)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                Err(e) => {
                    eprintln!("observe: {e}");
                    ExitCode::from(EXIT_INTERNAL)
                }
            };
        }
        None => {}
    }
    let Some(skill) = cli.skill.clone() else {
        eprintln!("observe: a SKILL path is required (see --help)");
        return ExitCode::from(EXIT_BAD_INPUT);
    };
    if cli.os != "linux" {
        return not_yet(&format!("--os {}", cli.os));
    }
    if cli.static_file.is_some() {
        return not_yet("--static");
    }
    if cli.baseline.is_some() {
        return not_yet("--baseline");
    }
    if cli.agent != "builtin" {
        return not_yet("--agent CMD");
    }
    let units = match observer::bundle::load(&skill, &observer::bundle::Limits::default()) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("observe: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    if units.len() != 1 {
        eprintln!(
            "observe: {} holds {} skills; observing each in turn",
            skill.display(),
            units.len()
        );
    }
    let mut worst = ExitCode::SUCCESS;
    for unit in &units {
        let code = observe_one(&SkillInput::from(unit), &cli);
        if code != ExitCode::SUCCESS {
            worst = code;
        }
    }
    worst
}

fn observe_one(input: &SkillInput, cli: &Cli) -> ExitCode {
    let opts = RunOptions {
        timeout: std::time::Duration::from_secs(cli.timeout),
        record: cli.record.clone(),
        ..RunOptions::default()
    };
    let res = match observer::run::observe(input, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("observe: {e}");
            return ExitCode::from(EXIT_INTERNAL);
        }
    };
    println!(
        "trace: {} (complete: {}, {} ms)",
        res.trace_path.display(),
        res.complete,
        res.duration_ms
    );
    for r in &res.incomplete_reasons {
        println!("incomplete: {r}");
    }
    for (k, v) in &res.outcome.info {
        println!("info: {k}={v}");
    }
    for (s, o) in &res.step_output {
        println!("--- step {s} output ---\n{o}");
    }
    let _ = &cli.report;
    if res.complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_INCOMPLETE)
    }
}
