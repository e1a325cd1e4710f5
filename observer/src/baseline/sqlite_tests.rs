use super::*;
use crate::analyse::{analyse, AnalyseConfig};
use crate::baseline::{establish, AcceptOutcome, BaselineStore, BaselineSummary};
use crate::model::{Category, Fidelity};
use crate::report::Verdict;
use crate::testutil::*;
use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};

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

#[test]
fn accept_show_list_forget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dir/baselines.sqlite");
    let store = SqliteStore::open(&path).unwrap();
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
    // a reopened store sees the same data
    drop(store);
    let store = SqliteStore::open(&path).unwrap();
    assert!(store
        .show("demo", Fidelity::Bundle)
        .unwrap()
        .unwrap()
        .hosts
        .contains("b.example"));
    assert!(store.forget("demo", Fidelity::Bundle).unwrap());
    assert!(!store.forget("demo", Fidelity::Bundle).unwrap());
    assert_eq!(store.list().unwrap().len(), 1);
}

#[test]
fn hostile_names_are_data() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("b.sqlite")).unwrap();
    let name = "x'); DROP TABLE baselines; --";
    store.accept(&summary(name, "h"), false).unwrap();
    assert_eq!(store.list().unwrap()[0].skill, name);
}

#[test]
fn a_file_that_is_not_a_database_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.sqlite");
    std::fs::write(&path, vec![0x42u8; 4096]).unwrap();
    let err = SqliteStore::open(&path).err().expect("junk must not open");
    let msg = err.to_string();
    assert!(
        msg.contains("junk.sqlite") && msg.contains("not a usable SQLite database"),
        "{msg}"
    );
    let err = SqliteStore::open(dir.path())
        .err()
        .expect("a directory must not open");
    assert!(err.to_string().contains(&dir.path().display().to_string()));
}

#[test]
fn a_corrupt_row_is_reported_not_panicked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.sqlite");
    let store = SqliteStore::open(&path).unwrap();
    store.accept(&summary("demo", "a"), false).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("UPDATE baselines SET summary = '{not json'", [])
        .unwrap();
    assert!(matches!(
        store.show("demo", Fidelity::Bundle),
        Err(BaselineError::Corrupt { .. })
    ));
}

#[test]
fn default_path_follows_xdg() {
    let p = default_path_from(Some("/x/data".into()), Some("/home/a".into())).unwrap();
    assert_eq!(
        p,
        std::path::PathBuf::from("/x/data/skill-observer/baselines.sqlite")
    );
    let p = default_path_from(Some("relative".into()), Some("/home/a".into())).unwrap();
    assert_eq!(
        p,
        std::path::PathBuf::from("/home/a/.local/share/skill-observer/baselines.sqlite")
    );
    assert!(matches!(
        default_path_from(None, None),
        Err(BaselineError::NoDataDir)
    ));
    assert!(matches!(
        default_path_from(None, Some("".into())),
        Err(BaselineError::NoDataDir)
    ));
}

#[test]
fn threads_racing_on_a_first_baseline_store_exactly_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("race.sqlite"));
    const N: usize = 8;
    let barrier = Arc::new(Barrier::new(N));
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let (path, barrier) = (path.clone(), barrier.clone());
            std::thread::spawn(move || {
                // each thread is its own connection, as separate `observe` runs are
                let store = SqliteStore::open(&path).unwrap();
                barrier.wait();
                store
                    .accept(&summary("racy", &format!("host{i}.example")), false)
                    .unwrap()
            })
        })
        .collect();
    let outcomes: Vec<AcceptOutcome> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let inserted = outcomes
        .iter()
        .filter(|o| matches!(o, AcceptOutcome::Inserted(_)))
        .count();
    assert_eq!(inserted, 1, "{outcomes:#?}");
    let winner = outcomes
        .iter()
        .find(|o| matches!(o, AcceptOutcome::Inserted(_)))
        .unwrap()
        .stored()
        .clone();
    assert!(
        outcomes.iter().all(|o| o.stored() == &winner),
        "every caller sees the one stored baseline"
    );
    let rows: i64 = rusqlite::Connection::open(&*path)
        .unwrap()
        .query_row("SELECT count(*) FROM baselines", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 1);
}

const CHILD_DB: &str = "SKILL_OBSERVER_BASELINE_CHILD_DB";

/// Helper run in child processes by the test below; does nothing when run on its own.
#[test]
#[ignore = "helper process for processes_racing_on_a_first_baseline_store_exactly_one"]
fn child_accept() {
    let Some(db) = std::env::var_os(CHILD_DB) else {
        return;
    };
    let id = std::env::var("SKILL_OBSERVER_BASELINE_CHILD_ID").unwrap_or_default();
    let store = SqliteStore::open(std::path::Path::new(&db)).unwrap();
    let out = store
        .accept(&summary("racy", &format!("proc{id}.example")), false)
        .unwrap();
    println!(
        "OUTCOME {}",
        if matches!(out, AcceptOutcome::Inserted(_)) {
            "inserted"
        } else {
            "kept"
        }
    );
}

#[test]
fn processes_racing_on_a_first_baseline_store_exactly_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("race.sqlite");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..6)
        .map(|i| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "baseline::sqlite::tests::child_accept",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_DB, &db)
                .env("SKILL_OBSERVER_BASELINE_CHILD_ID", i.to_string())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut inserted = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("OUTCOME "),
            "child did not run the helper: {text}"
        );
        inserted += text.matches("OUTCOME inserted").count();
    }
    assert_eq!(inserted, 1);
    let store = SqliteStore::open(&db).unwrap();
    assert_eq!(store.list().unwrap().len(), 1);
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
#[test]
fn drift_through_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("b.sqlite")).unwrap();
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
    assert_eq!(establish(&store, &r0).unwrap(), None);
    let r1 = judge_with(&run(&["api.example.com"], true));
    assert_eq!(r1.verdict, Verdict::Clean);
    assert!(matches!(
        establish(&store, &r1).unwrap(),
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
        establish(&store, &r2).unwrap(),
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
}
