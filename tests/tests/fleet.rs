//! End-to-end tests of what a fleet of hosted workers relies on: the live event stream
//! (`--events`) and the shared PostgreSQL baseline store (a real server, see
//! `observer::baseline::test_pg_server`).

use e2e_tests::{observe, observe_bin, skill, Skill};
use observer::baseline::test_pg_server::fresh_database;
use observer::trace::{EventKind, Trace};
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

// Short sleeps are real up to the virtual clock's per-step budget (3 s, docs/agent.md "Time");
// one long `sleep 8` would be fast-forwarded and the run would end at once.
const SLOW: &str = "#!/bin/sh
cat /etc/hostname > /dev/null
echo started
for i in 1 2 3 4 5 6 7; do sleep 0.4; done
echo finished
";

fn is_first_action(line: &str) -> bool {
    let Ok(ev) = serde_json::from_str::<observer::trace::Event>(line) else {
        return false;
    };
    match ev.kind {
        EventKind::Exec { path, .. } => path.ends_with("/cat"),
        EventKind::Output { data } => data.contains("started"),
        _ => false,
    }
}

/// A consumer reading `--events -` sees the skill's first action while `observe` is still
/// running (the skill sleeps after it), and the stream is the whole trace: byte for byte the
/// `--record` file, with the human summary on stderr instead of mixed into it.
#[test]
fn events_stream_live_to_stdout_while_the_run_goes() {
    let s = skill("slow-streamer", &[("scripts/run.sh", SLOW, 0o755)]);
    let dir = s.dir.path();
    let (record, report) = (dir.join("trace.jsonl"), dir.join("report.json"));
    let mut child = Command::new(observe_bin())
        .arg(s.path())
        .args(["--events", "-", "--no-baseline", "--timeout", "90"])
        .arg("--record")
        .arg(&record)
        .arg("--report")
        .arg(&report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn observe");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let t0 = Instant::now();
    let mut seen_live: Option<Instant> = None;
    while t0.elapsed() < Duration::from_secs(120) {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                let first = is_first_action(&line);
                lines.push(line);
                if first {
                    // observe must still be running: the skill sleeps 2.8 s after this
                    let still_running = child.try_wait().expect("try_wait").is_none();
                    assert!(
                        still_running,
                        "the first action arrived only after observe exited"
                    );
                    assert!(
                        !lines.iter().any(|l| l.contains("finished")),
                        "the stream was not live: {lines:#?}"
                    );
                    seen_live = Some(Instant::now());
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if child.try_wait().expect("try_wait").is_some() {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait().expect("wait observe");
    let exited = Instant::now();
    reader.join().expect("reader");
    lines.extend(rx.try_iter());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    let Some(seen) = seen_live else {
        panic!(
            "no first action seen before the run ended (status {status:?}): {lines:#?}\n{stderr}"
        )
    };
    // The skill sleeps 2.8 s (real) after its first action: a stream written only at the end of
    // the run would deliver it moments before exit, not seconds.
    assert!(
        exited.duration_since(seen) >= Duration::from_secs(2),
        "first action arrived only {:?} before exit",
        exited.duration_since(seen)
    );
    assert!(
        status.code().is_some_and(|c| c != 1 && c != 2),
        "{status:?}\n{stderr}"
    );

    let streamed = lines.join("\n") + "\n";
    assert_eq!(
        streamed,
        std::fs::read_to_string(&record).expect("record"),
        "the stream is the trace"
    );
    let t = Trace::read(streamed.as_bytes()).expect("stream parses as a trace");
    assert!(matches!(
        t.events.last().map(|e| &e.kind),
        Some(EventKind::RunEnd { .. })
    ));
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("report json");
    let verdict = r["verdict"].as_str().expect("verdict");
    assert!(stderr.contains(verdict), "summary goes to stderr: {stderr}");
}

fn run_observe(args: &[&str]) -> std::process::Output {
    Command::new(observe_bin())
        .args(args)
        .output()
        .expect("run observe")
}

#[test]
fn events_and_report_both_on_stdout_or_unwritable_are_bad_input() {
    let s = skill(
        "clash",
        &[("scripts/run.sh", "#!/bin/sh\necho hi\n", 0o755)],
    );
    let p = s.path().to_string_lossy().into_owned();
    let out = run_observe(&[&p, "--events", "-", "--report", "-", "--no-baseline"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--events -") && err.contains("stdout"),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    let bad = s.dir.path().join("no/such/dir/ev.jsonl");
    let out = run_observe(&[&p, "--events", &bad.to_string_lossy(), "--no-baseline"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such/dir"));

    // the stream must not overwrite another output
    let same = s.dir.path().join("same.json");
    let same = same.to_string_lossy();
    let out = run_observe(&[&p, "--events", &same, "--report", &same, "--no-baseline"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

fn baseline_cli(url: &str, args: &[&str]) -> std::process::Output {
    let mut a = vec!["baseline"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--store", url]);
    run_observe(&a)
}

fn report_of(s: &Skill) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(s.dir.path().join("report.json")).expect("report"))
        .expect("report json")
}

/// Two workers observing a new skill at once against one PostgreSQL store: one baseline is
/// stored, the next run of the skill is judged against it, and the `baseline` subcommands see
/// and manage the same rows.
#[test]
fn workers_share_one_postgres_baseline() {
    let url = fresh_database();
    const SCRIPT: &str = "#!/bin/sh\necho hi > out.txt\ncat /etc/hostname\n";
    // Two copies of one skill (same name, same content), as two workers would receive it.
    let a = skill("fleet-demo", &[("scripts/run.sh", SCRIPT, 0o755)]);
    let b = skill("fleet-demo", &[("scripts/run.sh", SCRIPT, 0o755)]);
    let args = ["--baseline", url.as_str(), "--timeout", "90"];
    let (ra, rb) = std::thread::scope(|sc| {
        let ha = sc.spawn(|| observe(&a, &args));
        let hb = sc.spawn(|| observe(&b, &args));
        (ha.join().expect("a"), hb.join().expect("b"))
    });
    for r in [&ra, &rb] {
        assert!(r.run_end().0, "run incomplete: {:?}", r.run_end().1);
    }
    let list = baseline_cli(&url, &["list"]);
    assert_eq!(list.status.code(), Some(0), "{list:?}");
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("list line"))
        .collect();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["skill"], "fleet-demo");

    let c = skill("fleet-demo", &[("scripts/run.sh", SCRIPT, 0o755)]);
    let rc = observe(&c, &args);
    assert!(rc.run_end().0);
    let rep = report_of(&c);
    assert_eq!(
        rep["baseline"]["accepted_at"], rows[0]["accepted_at"],
        "the third run is judged against the stored baseline: {}",
        rep["baseline"]
    );
    assert!(
        rep["indicators"]
            .as_array()
            .is_some_and(|a| a.iter().all(|i| i["id"] != "BEHAV_DRIFT")),
        "{}",
        rep["indicators"]
    );

    let show = baseline_cli(&url, &["show", "fleet-demo"]);
    assert_eq!(show.status.code(), Some(0), "{show:?}");
    assert!(String::from_utf8_lossy(&show.stdout).contains("\"skill\": \"fleet-demo\""));
    assert_eq!(
        baseline_cli(&url, &["forget", "fleet-demo"]).status.code(),
        Some(0)
    );
    assert_eq!(
        baseline_cli(&url, &["forget", "fleet-demo"]).status.code(),
        Some(2)
    );
    // accept stores a report's profile as the baseline
    let rpath = c.dir.path().join("report.json");
    let acc = baseline_cli(&url, &["accept", &rpath.to_string_lossy()]);
    assert_eq!(acc.status.code(), Some(0), "{acc:?}");
    assert_eq!(
        baseline_cli(&url, &["show", "fleet-demo"]).status.code(),
        Some(0)
    );
}

/// An unreachable store is refused before the run, as bad input, without echoing the password.
#[test]
fn an_unreachable_postgres_store_is_bad_input_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let url = format!("postgres://worker:s3cr3t-pw@127.0.0.1:{port}/fleet?connect_timeout=5");
    let s = skill(
        "unreachable",
        &[("scripts/run.sh", "#!/bin/sh\necho hi\n", 0o755)],
    );
    let out = run_observe(&[&s.path().to_string_lossy(), "--baseline", &url]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && !err.contains("s3cr3t-pw"),
        "{err}"
    );
    let out = baseline_cli(&url, &["list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("s3cr3t-pw"));
}
