//! The stored corpus traces, re-judged with the current analyser: they must pass, fast, and a
//! broken rule must make them fail with a diff that names the case and the indicator.

use harness::corpus::{self, Case};
use harness::judge::Status;
use harness::replay::{judge_trace, replay_all};
use harness::{any_failure, table, CaseResult};
use observer::analyse::AnalyseConfig;
use observer::trace::{EventKind, Trace};
use std::process::Command;
use std::time::{Duration, Instant};

fn cases() -> Vec<Case> {
    corpus::load(&corpus::default_dir(), None).expect("corpus loads")
}

#[test]
fn stored_traces_replay_green_within_ten_seconds() {
    let cases = cases();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let missing: Vec<&str> = cases
        .iter()
        .filter(|c| !c.trace_path().is_file())
        .map(|c| c.name.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "cases without a recorded trace: {missing:?}"
    );
    let start = Instant::now();
    let results = replay_all(&cases, None, &AnalyseConfig::shipped());
    let took = start.elapsed();
    let out = table::render_all("replay", &results, took);
    assert!(!any_failure(&results), "{out}");
    // Unoptimised test build on a shared 2-core machine: the release CLI is several times faster.
    assert!(
        took < Duration::from_secs(10),
        "replay took {took:?}\n{out}"
    );
    // The replay judged something: attacks flagged, benign skills clean.
    let d = table::detection(&results);
    assert!(d.tp >= 30, "{d:?}\n{out}");
}

fn failing(results: &[CaseResult]) -> Vec<String> {
    results
        .iter()
        .filter(|r| r.status().fails_harness())
        .map(|r| r.name.clone())
        .collect()
}

#[test]
fn a_zeroed_rule_fails_the_replay_naming_case_and_indicator() {
    let cases = cases();
    let broken = AnalyseConfig::from_toml_str(
        "[weights]\nBEHAV_PERSISTENCE = 0\n\"BEHAV_PERSISTENCE.declared\" = 0\n",
    )
    .unwrap();
    let results = replay_all(&cases, None, &broken);
    assert!(any_failure(&results));
    let fails = failing(&results);
    // Every non-pending case that requires persistence must now fail, and only those.
    for c in &cases {
        let needs = c.expect.fire.contains("BEHAV_PERSISTENCE") && c.expect.pending.is_none();
        assert_eq!(
            fails.contains(&c.name),
            needs,
            "{}: {:?}",
            c.name,
            results
                .iter()
                .find(|r| r.name == c.name)
                .map(|r| r.status())
        );
    }
    let diff = table::render_failures(&results);
    assert!(diff.contains("FAIL atk-bashrc-persist"), "{diff}");
    assert!(
        diff.contains("- BEHAV_PERSISTENCE must fire and did not"),
        "{diff}"
    );
    assert!(
        diff.contains("FAIL atk-bashrc-persist\n  verdict: expected MALICIOUS, got SUSPICIOUS"),
        "{diff}"
    );
}

#[test]
fn a_rule_blind_to_its_events_fails_the_replay() {
    // What a regression in the file-event handling would look like: the deletions and renames
    // behind BEHAV_DESTRUCTIVE are no longer seen.
    let cases = cases();
    let case = cases
        .iter()
        .find(|c| c.name == "atk-ransomware")
        .expect("case");
    let mut trace = Trace::read_file(&case.trace_path()).unwrap();
    let cfg = AnalyseConfig::shipped();
    let before = judge_trace(case, &trace, &cfg).unwrap();
    assert!(before.fired.contains("BEHAV_DESTRUCTIVE"));
    trace
        .events
        .retain(|e| !matches!(&e.kind, EventKind::FileOp { .. }));
    let after = judge_trace(case, &trace, &cfg).unwrap();
    let r = CaseResult::new(case, Ok(after), Duration::ZERO);
    assert_eq!(r.status(), Status::Fail);
    let diff = table::render_failures(&[r]);
    assert!(diff.contains("FAIL atk-ransomware"), "{diff}");
    assert!(
        diff.contains("- BEHAV_DESTRUCTIVE must fire and did not"),
        "{diff}"
    );
}

#[test]
fn the_cli_exits_non_zero_on_a_broken_rule_and_zero_otherwise() {
    let exe = env!("CARGO_BIN_EXE_harness");
    let ok = Command::new(exe).arg("replay").output().unwrap();
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{text}");
    assert!(text.contains("harness replay:"), "{text}");
    assert!(text.contains("per indicator:"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.toml");
    std::fs::write(
        &w,
        "[weights]\nBEHAV_TOOL_TAMPER = 0\n\"BEHAV_TOOL_TAMPER.declared\" = 0\n",
    )
    .unwrap();
    let bad = Command::new(exe)
        .args(["replay", "--weights"])
        .arg(&w)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(text.contains("FAIL atk-npmrc-registry"), "{text}");
    assert!(
        text.contains("- BEHAV_TOOL_TAMPER must fire and did not"),
        "{text}"
    );

    // Bad input is an error (2), not a pass.
    let none = Command::new(exe)
        .args(["replay", "--filter", "no-such-case"])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
}

#[test]
fn a_trace_dir_replays_by_case_name_and_reports_missing_traces() {
    let cases: Vec<Case> = cases()
        .into_iter()
        .filter(|c| c.name == "atk-ransomware" || c.name == "ben-guide-only")
        .collect();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        cases[0].trace_path(),
        dir.path().join(format!("{}.jsonl", cases[0].name)),
    )
    .unwrap();
    let results = replay_all(&cases, Some(dir.path()), &AnalyseConfig::shipped());
    assert_eq!(results[0].status(), Status::Pass);
    match results[1].status() {
        Status::Error(e) => assert!(e.contains("no recorded trace"), "{e}"),
        s => panic!("{s:?}"),
    }
}
