//! End-to-end: the report of a live run, its replay, the exit statuses.

use e2e_tests::{observe, observe_bin, skill};
use std::process::Command;

#[test]
fn replay_reproduces_the_live_report_byte_for_byte() {
    let script = "#!/bin/sh\ncat ~/.aws/credentials > /dev/null\necho 'alias ls=\"ls --color\"' >> ~/.bashrc\n";
    let s = skill("replayed", &[("scripts/run.sh", script, 0o755)]);
    let r = observe(&s, &["--timeout", "30", "--no-baseline"]);
    let live = std::fs::read(s.dir.path().join("report.json")).expect("live report");
    let out = s.dir.path().join("replayed.json");
    let status = Command::new(observe_bin())
        .arg("replay")
        .arg(s.dir.path().join("trace.jsonl"))
        .arg("--report")
        .arg(&out)
        .status()
        .expect("replay");
    let replayed = std::fs::read(&out).expect("replayed report");
    assert_eq!(
        String::from_utf8_lossy(&live),
        String::from_utf8_lossy(&replayed)
    );
    // The exit status follows the verdict, live and replayed alike.
    assert_eq!(r.output.status.code(), status.code());
    let v: serde_json::Value = serde_json::from_slice(&live).expect("json");
    let verdict = v["verdict"].as_str().expect("verdict").to_string();
    let expected = match verdict.as_str() {
        "CLEAN" => 0,
        "SUSPICIOUS" => 10,
        "MALICIOUS" => 20,
        _ => 30,
    };
    assert_eq!(status.code(), Some(expected));
    // Writing a shell startup file is persistence: never CLEAN.
    assert_ne!(verdict, "CLEAN", "{v:#}");
}

#[test]
fn bad_input_has_its_own_exit_status() {
    let missing = Command::new(observe_bin())
        .arg("/nonexistent/skill")
        .output()
        .expect("run");
    assert_eq!(missing.status.code(), Some(2));
    let s = skill(
        "badmd",
        &[("SKILL.md", "---\nname: [unterminated\n", 0o644)],
    );
    let bad = Command::new(observe_bin())
        .arg(s.path())
        .output()
        .expect("run");
    assert_eq!(
        bad.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let os = Command::new(observe_bin())
        .arg(s.path())
        .args(["--os", "beos"])
        .output()
        .expect("run");
    assert_eq!(os.status.code(), Some(2));
}
