//! The `harness` command: run the corpus live through `observe`, or replay its recorded traces.

use anyhow::Context;
use clap::{Parser, Subcommand};
use harness::{any_failure, corpus, live, replay, table};
use observer::analyse::AnalyseConfig;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(
    name = "harness",
    about = "Regression harness for skill-observer (docs/harness.md)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Corpus folder (default: the crate's corpus/)
    #[arg(long, global = true)]
    corpus: Option<PathBuf>,
    /// Only cases whose name contains this
    #[arg(long, global = true)]
    filter: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run every case through the observe binary (real jail) and check its report
    Run {
        /// Cases run at once
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        /// Also keep every trace as DIR/<case>.jsonl
        #[arg(long)]
        record: Option<PathBuf>,
        /// Store every trace as the case's trace.jsonl (re-records the corpus)
        #[arg(long)]
        record_corpus: bool,
        /// The observe binary (default: built from this workspace)
        #[arg(long)]
        observe: Option<PathBuf>,
    },
    /// Re-judge recorded traces with the current analyser (no sandbox)
    Replay {
        /// Traces as DIR/<case>.jsonl (default: each case's stored trace.jsonl)
        dir: Option<PathBuf>,
        /// Weights overriding the shipped ones, as `observe --weights`
        #[arg(long)]
        weights: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match real_main() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("harness: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn real_main() -> anyhow::Result<bool> {
    let cli = Cli::parse();
    let root = cli.corpus.clone().unwrap_or_else(corpus::default_dir);
    let cases = corpus::load(&root, cli.filter.as_deref())?;
    let start = Instant::now();
    let (mode, results) = match &cli.cmd {
        Cmd::Run {
            jobs,
            record,
            record_corpus,
            observe,
        } => {
            let observe = live::locate_observe(observe.as_deref())?;
            let opts = live::LiveOptions {
                observe,
                jobs: (*jobs).max(1),
                record_dir: record.clone(),
                record_corpus: *record_corpus,
            };
            ("run", live::run_all(&cases, &opts))
        }
        Cmd::Replay { dir, weights } => {
            let cfg = match weights {
                Some(p) => AnalyseConfig::load_file(p)
                    .with_context(|| format!("weights {}", p.display()))?,
                None => AnalyseConfig::shipped(),
            };
            ("replay", replay::replay_all(&cases, dir.as_deref(), &cfg))
        }
    };
    print!("{}", table::render_all(mode, &results, start.elapsed()));
    Ok(!any_failure(&results))
}
