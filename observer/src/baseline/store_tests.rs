//! The drift-store test suite, run unchanged against every backend: the embedded SQLite store and
//! the PostgreSQL store of a fleet (a real server: see `test_pg_server`). Each backend is a
//! [`Fixture`]; `suite!` instantiates every test for it.

use super::{establish, open, AcceptOutcome, BaselineError, BaselineStore, BaselineSummary};
use crate::analyse::{analyse, AnalyseConfig};
use crate::model::{Category, Fidelity};
use crate::report::Verdict;
use crate::testutil::*;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::sync::{Arc, Barrier};

/// One backend's store, fresh and empty.
pub(super) trait Fixture: Send + Sync {
    /// What `--baseline` / `--store` would name for this store.
    fn spec(&self) -> String;
    /// Overwrites every stored summary with text that is not JSON, behind the store's back.
    fn corrupt_summaries(&self);
    /// Rows in the table, counted behind the store's back.
    fn rows(&self) -> i64;

    /// A new connection to the store, as another `observe` process would open it.
    fn open(&self) -> Box<dyn BaselineStore> {
        match open(Some(OsStr::new(&self.spec()))) {
            Ok(s) => s,
            Err(e) => panic!("open {}: {e}", self.spec()),
        }
    }
}

struct Sqlite {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl Sqlite {
    fn new() -> Sqlite {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/dir/baselines.sqlite");
        Sqlite { _dir: dir, path }
    }
    fn conn(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(&self.path).unwrap()
    }
}

impl Fixture for Sqlite {
    fn spec(&self) -> String {
        self.path.display().to_string()
    }
    fn corrupt_summaries(&self) {
        self.conn()
            .execute("UPDATE baselines SET summary = '{not json'", [])
            .unwrap();
    }
    fn rows(&self) -> i64 {
        self.conn()
            .query_row("SELECT count(*) FROM baselines", [], |r| r.get(0))
            .unwrap()
    }
}

struct Postgres {
    url: String,
}

impl Postgres {
    fn new() -> Postgres {
        Postgres {
            url: super::test_pg_server::fresh_database(),
        }
    }
    fn conn(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).unwrap()
    }
}

impl Fixture for Postgres {
    fn spec(&self) -> String {
        self.url.clone()
    }
    fn corrupt_summaries(&self) {
        self.conn()
            .execute(
                "UPDATE skill_observer_baselines SET summary = '{not json'",
                &[],
            )
            .unwrap();
    }
    fn rows(&self) -> i64 {
        self.conn()
            .query_one("SELECT count(*) FROM skill_observer_baselines", &[])
            .unwrap()
            .get(0)
    }
}

fn summary(skill: &str, host: &str) -> BaselineSummary {
    BaselineSummary {
        skill: skill.into(),
        fidelity: Fidelity::Bundle,
        digest: Some(format!("digest-of-{host}")),
        accepted_at: String::new(),
        hosts: BTreeSet::from([host.to_string()]),
        categories: BTreeSet::from([Category::Network]),
        programs: BTreeSet::from(["/usr/bin/curl".to_string()]),
        write_classes: BTreeSet::new(),
    }
}

fn accept_show_list_forget(f: &dyn Fixture) {
    let store = f.open();
    assert_eq!(store.list().unwrap(), vec![]);
    assert_eq!(store.show("demo", Fidelity::Bundle).unwrap(), None);

    let first = store.accept(&summary("demo", "a.example"), false).unwrap();
    let AcceptOutcome::Inserted(stored) = first else {
        panic!("{first:?}")
    };
    assert_eq!(stored.hosts, BTreeSet::from(["a.example".to_string()]));
    assert!(
        stored.accepted_at.ends_with('Z') && stored.accepted_at.len() == 20,
        "{}",
        stored.accepted_at
    );
    assert_eq!(&stored.accepted_at[4..5], "-");
    assert_eq!(&stored.accepted_at[10..11], "T");

    // the first accepted baseline wins
    let again = store.accept(&summary("demo", "b.example"), false).unwrap();
    assert_eq!(again, AcceptOutcome::Kept(stored.clone()));
    // fidelity is part of the key
    assert!(matches!(
        store
            .accept(
                &BaselineSummary {
                    fidelity: Fidelity::Prompt,
                    ..summary("demo", "p.example")
                },
                false
            )
            .unwrap(),
        AcceptOutcome::Inserted(_)
    ));
    let list = store.list().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(
        (list[0].fidelity, list[1].fidelity),
        (Fidelity::Bundle, Fidelity::Prompt)
    );
    assert_eq!(list[0].digest.as_deref(), Some("digest-of-a.example"));

    let replaced = store.accept(&summary("demo", "b.example"), true).unwrap();
    assert!(matches!(&replaced, AcceptOutcome::Replaced(s) if s.hosts.contains("b.example")));
    // replace of a key that had none inserts
    assert!(matches!(
        store.accept(&summary("fresh", "c.example"), true).unwrap(),
        AcceptOutcome::Inserted(_)
    ));
    // a reopened store sees the same data
    drop(store);
    let store = f.open();
    assert!(store
        .show("demo", Fidelity::Bundle)
        .unwrap()
        .unwrap()
        .hosts
        .contains("b.example"));
    assert!(store.forget("demo", Fidelity::Bundle).unwrap());
    assert!(!store.forget("demo", Fidelity::Bundle).unwrap());
    assert_eq!(store.list().unwrap().len(), 2);
    assert_eq!(f.rows(), 2);
}

/// Skill names come from a hostile SKILL.md: quotes, SQL, NUL, backslashes and non-ASCII are
/// data, keyed exactly, listed in the same (byte) order by every backend.
fn hostile_names_are_data(f: &dyn Fixture) {
    let store = f.open();
    let names = [
        "x'); DROP TABLE baselines; DROP TABLE skill_observer_baselines; --",
        "nul\0byte",
        "nul\\0byte",
        "back\\slash",
        "Émoji 🦀",
        "B",
        "a",
        "$1",
    ];
    for (i, n) in names.iter().enumerate() {
        let s = summary(n, &format!("h{i}"));
        assert!(
            matches!(store.accept(&s, false).unwrap(), AcceptOutcome::Inserted(_)),
            "{n:?} collided with an earlier name"
        );
        let back = store.show(n, Fidelity::Bundle).unwrap().expect("stored");
        assert_eq!(back.skill, *n);
        assert_eq!(back.hosts, s.hosts);
    }
    let listed: Vec<String> = store.list().unwrap().into_iter().map(|e| e.skill).collect();
    let mut want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(listed, want);
    assert!(store.forget("nul\0byte", Fidelity::Bundle).unwrap());
    assert!(store
        .show("nul\\0byte", Fidelity::Bundle)
        .unwrap()
        .is_some());
}

fn a_corrupt_row_is_reported_not_panicked(f: &dyn Fixture) {
    let store = f.open();
    store.accept(&summary("demo", "a"), false).unwrap();
    f.corrupt_summaries();
    assert!(matches!(
        store.show("demo", Fidelity::Bundle),
        Err(BaselineError::Corrupt { .. })
    ));
    // and a first accept does not overwrite it silently either
    assert!(store.accept(&summary("demo", "b"), false).is_err());
}

fn check_one_winner(outcomes: &[AcceptOutcome]) {
    let inserted: Vec<&AcceptOutcome> = outcomes
        .iter()
        .filter(|o| matches!(o, AcceptOutcome::Inserted(_)))
        .collect();
    assert_eq!(inserted.len(), 1, "{outcomes:#?}");
    let winner = inserted[0].stored();
    assert!(
        outcomes.iter().all(|o| o.stored() == winner),
        "every caller sees the one stored baseline: {outcomes:#?}"
    );
}

fn threads_racing_on_a_first_baseline_store_exactly_one(f: &dyn Fixture) {
    const N: usize = 8;
    // Create the schema first on one connection, then open N more: the race is on the row.
    drop(f.open());
    let stores: Vec<Box<dyn BaselineStore>> = (0..N).map(|_| f.open()).collect();
    let barrier = Arc::new(Barrier::new(N));
    let outcomes: Vec<AcceptOutcome> = std::thread::scope(|sc| {
        let hs: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(i, store)| {
                let barrier = barrier.clone();
                sc.spawn(move || {
                    barrier.wait();
                    store
                        .accept(&summary("racy", &format!("host{i}.example")), false)
                        .unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    check_one_winner(&outcomes);
    assert_eq!(f.rows(), 1);
}

/// Workers starting on an empty database at once also race on creating the schema.
fn threads_racing_on_a_fresh_store_open_and_store_one(f: &dyn Fixture) {
    const N: usize = 6;
    let barrier = Arc::new(Barrier::new(N));
    let outcomes: Vec<AcceptOutcome> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..N)
            .map(|i| {
                let barrier = barrier.clone();
                sc.spawn(move || {
                    barrier.wait();
                    f.open()
                        .accept(&summary("racy", &format!("host{i}.example")), false)
                        .unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    check_one_winner(&outcomes);
    assert_eq!(f.rows(), 1);
}

const CHILD_SPEC: &str = "SKILL_OBSERVER_BASELINE_CHILD_SPEC";

/// Helper run in child processes by `processes_racing…`; does nothing when run on its own.
#[test]
#[ignore = "helper process for processes_racing_on_a_first_baseline_store_exactly_one"]
fn child_accept() {
    let Some(spec) = std::env::var_os(CHILD_SPEC) else {
        return;
    };
    let id = std::env::var("SKILL_OBSERVER_BASELINE_CHILD_ID").unwrap_or_default();
    let store = open(Some(&spec)).unwrap();
    // Start together: wait for the go file the parent creates once every child is connected.
    let go =
        std::path::PathBuf::from(std::env::var_os("SKILL_OBSERVER_BASELINE_CHILD_GO").unwrap());
    let t0 = std::time::Instant::now();
    while !go.exists() && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let out = store
        .accept(&summary("racy", &format!("proc{id}.example")), false)
        .unwrap();
    println!(
        "OUTCOME {} {}",
        if matches!(out, AcceptOutcome::Inserted(_)) {
            "inserted"
        } else {
            "kept"
        },
        serde_json::to_string(out.stored()).unwrap()
    );
}

fn processes_racing_on_a_first_baseline_store_exactly_one(f: &dyn Fixture) {
    drop(f.open());
    let exe = std::env::current_exe().unwrap();
    let go_dir = tempfile::tempdir().unwrap();
    let go = go_dir.path().join("go");
    let children: Vec<_> = (0..6)
        .map(|i| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "baseline::store_tests::child_accept",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_SPEC, f.spec())
                .env("SKILL_OBSERVER_BASELINE_CHILD_GO", &go)
                .env("SKILL_OBSERVER_BASELINE_CHILD_ID", i.to_string())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Give every child time to start and connect, then release them at once.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    std::fs::write(&go, b"go").unwrap();
    let mut inserted = 0;
    let mut stored = BTreeSet::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        // libtest prints the test's name on the same line before the helper's output
        let line = text
            .lines()
            .find_map(|l| l.find("OUTCOME ").map(|i| &l[i..]))
            .unwrap_or_else(|| panic!("child did not run the helper: {text}"));
        inserted += usize::from(line.starts_with("OUTCOME inserted"));
        stored.insert(line.splitn(3, ' ').nth(2).unwrap_or_default().to_string());
    }
    assert_eq!(inserted, 1);
    assert_eq!(
        stored.len(),
        1,
        "processes saw different baselines: {stored:?}"
    );
    assert_eq!(f.open().list().unwrap().len(), 1);
    assert_eq!(f.rows(), 1);
}

fn run(hosts: &[&str], complete: bool) -> crate::trace::Trace {
    let mut t = T::new();
    t.launch(10, 1, "sync.py");
    for (i, h) in hosts.iter().enumerate() {
        let ip = format!("198.18.0.{}", i + 1);
        t.dns(10, h, &ip);
        t.connect(10, 1, &ip, 443);
    }
    if complete {
        t.done()
    } else {
        t.trace()
    }
}

/// The acceptance scenario: the first run sets the baseline, an identical run shows no drift, a
/// run contacting a new host raises BEHAV_DRIFT naming it.
fn drift_through_the_store(f: &dyn Fixture) {
    let store = f.open();
    let s = statics(
        &[Category::Network],
        &["api.example.com", "cdn.example.net"],
    );
    let cfg = AnalyseConfig::shipped();
    let judge_with = |t: &crate::trace::Trace| {
        let b = store.show("demo", Fidelity::Bundle).unwrap();
        analyse(t, &s, b.as_ref(), &cfg)
    };
    // an incomplete first run does not set the baseline
    let r0 = judge_with(&run(&["api.example.com"], false));
    assert_eq!(establish(store.as_ref(), &r0).unwrap(), None);
    let r1 = judge_with(&run(&["api.example.com"], true));
    assert_eq!(r1.verdict, Verdict::Clean);
    assert!(matches!(
        establish(store.as_ref(), &r1).unwrap(),
        Some(AcceptOutcome::Inserted(_))
    ));
    let r2 = judge_with(&run(&["api.example.com"], true));
    assert!(
        r2.indicators.iter().all(|i| i.id != "BEHAV_DRIFT"),
        "{:#?}",
        r2.indicators
    );
    assert!(r2.baseline.is_some());
    assert!(matches!(
        establish(store.as_ref(), &r2).unwrap(),
        Some(AcceptOutcome::Kept(_))
    ));
    let r3 = judge_with(&run(&["api.example.com", "cdn.example.net"], true));
    let d = r3
        .indicators
        .iter()
        .find(|i| i.id == "BEHAV_DRIFT")
        .expect("drift");
    assert!(
        d.summary.contains("cdn.example.net") && !d.evidence.is_empty(),
        "{d:?}"
    );
    assert_eq!(r3.verdict, Verdict::Suspicious);
    // another worker (connection) judges the same way
    let other = f.open();
    let r4 = analyse(
        &run(&["api.example.com", "cdn.example.net"], true),
        &s,
        other.show("demo", Fidelity::Bundle).unwrap().as_ref(),
        &cfg,
    );
    assert_eq!(r4.verdict, Verdict::Suspicious);
}

macro_rules! suite {
    ($backend:ident, $fixture:expr) => {
        mod $backend {
            use super::*;
            #[test]
            fn accept_show_list_forget() {
                super::accept_show_list_forget(&$fixture);
            }
            #[test]
            fn hostile_names_are_data() {
                super::hostile_names_are_data(&$fixture);
            }
            #[test]
            fn a_corrupt_row_is_reported_not_panicked() {
                super::a_corrupt_row_is_reported_not_panicked(&$fixture);
            }
            #[test]
            fn threads_racing_on_a_first_baseline_store_exactly_one() {
                super::threads_racing_on_a_first_baseline_store_exactly_one(&$fixture);
            }
            #[test]
            fn threads_racing_on_a_fresh_store_open_and_store_one() {
                super::threads_racing_on_a_fresh_store_open_and_store_one(&$fixture);
            }
            #[test]
            fn processes_racing_on_a_first_baseline_store_exactly_one() {
                super::processes_racing_on_a_first_baseline_store_exactly_one(&$fixture);
            }
            #[test]
            fn drift_through_the_store() {
                super::drift_through_the_store(&$fixture);
            }
        }
    };
}

suite!(sqlite_store, Sqlite::new());
suite!(postgres_store, Postgres::new());

/// A worker holds its connection through a run of up to minutes; a server restart or a proxy's
/// idle timeout in between must not cost the run its baseline.
#[test]
fn postgres_reconnects_after_the_server_drops_the_connection() {
    let f = Postgres::new();
    let store = f.open();
    store.accept(&summary("demo", "a"), false).unwrap();
    let killed: i64 = f
        .conn()
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND application_name = 'skill-observer'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(killed, 1);
    // termination is asynchronous: wait until the backend is gone, so the next call does meet a
    // closed connection
    let t0 = std::time::Instant::now();
    let mut admin = f.conn();
    while admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'skill-observer'",
            &[],
        )
        .unwrap()
        .get::<_, i64>(0)
        > 0
    {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "backend never ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(store.show("demo", Fidelity::Bundle).unwrap().is_some());
    assert!(matches!(
        store.accept(&summary("demo2", "b"), false).unwrap(),
        AcceptOutcome::Inserted(_)
    ));
    assert_eq!(f.rows(), 2);
}

/// TLS is not built in: a URL that demands it is refused with a message saying so, never
/// silently downgraded to plaintext.
#[test]
fn postgres_refuses_a_url_that_requires_tls() {
    let url = super::test_pg_server::fresh_database();
    let sep = if url.contains('?') { '&' } else { '?' };
    let e = open(Some(OsStr::new(&format!("{url}{sep}sslmode=require"))))
        .err()
        .expect("sslmode=require must not connect without TLS");
    let m = e.to_string();
    assert!(m.to_ascii_lowercase().contains("tls"), "{m}");
}
