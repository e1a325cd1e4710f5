use crate::analyse::{analyse, replay, AnalyseConfig};
use crate::baseline::BaselineSummary;
use crate::model::Category::*;
use crate::report::{Band, Verdict};
use crate::testutil::*;
use crate::trace::{EventKind, TraceWriter};

fn benign() -> T {
    let mut t = T::new();
    t.launch(10, 1, "run.py");
    t.write(10, 1, &format!("{WS}/out.txt"));
    t
}

#[test]
fn a_truncated_trace_is_incomplete_never_clean() {
    let r = judge(&benign().trace(), &none());
    assert_eq!(r.verdict, Verdict::Incomplete);
    assert!(!r.run.complete);
    assert!(
        r.run
            .incomplete_reasons
            .iter()
            .any(|x| x.contains("run_end")),
        "{:?}",
        r.run.incomplete_reasons
    );
    assert!(r
        .run
        .incomplete_reasons
        .iter()
        .any(|x| x.contains("step 1")));
    assert_eq!(r.band, Band::Trusted);
}

#[test]
fn run_end_incomplete_is_incomplete_and_a_complete_run_is_clean() {
    let mut t = benign();
    t.step_end(1);
    t.end(false, &["tracer: lost events"]);
    let r = judge(&t.trace(), &none());
    assert_eq!(r.verdict, Verdict::Incomplete);
    assert_eq!(r.run.incomplete_reasons, vec!["tracer: lost events"]);
    let r = judge(&benign().done(), &none());
    assert_eq!(r.verdict, Verdict::Clean);
    assert!(r.run.complete);
    assert_eq!(r.run.duration_ms, 1234);
}

#[test]
fn exfiltrated_then_cancelled_is_still_malicious() {
    let mut t = benign();
    let req = t.http(
        10,
        1,
        "POST",
        "https://collect.example.net/u",
        "collect.example.net",
        512,
    );
    t.canary(
        "openai",
        Some("collect.example.net"),
        req,
        &["body", "json"],
    );
    t.end(false, &["cancelled"]);
    let r = judge(&t.trace(), &statics(&[Network], &[]));
    assert_eq!(r.verdict, Verdict::Malicious);
    assert!(!r.run.complete);
    assert!(r.run.incomplete_reasons.contains(&"cancelled".to_string()));
}

#[test]
fn missing_or_duplicated_events_make_the_run_incomplete() {
    let mut tr = benign().done();
    tr.events.remove(2);
    let r = judge(&tr, &none());
    assert!(
        r.run
            .incomplete_reasons
            .iter()
            .any(|x| x == "event 3 missing from the trace"),
        "{:?}",
        r.run.incomplete_reasons
    );
    assert_eq!(r.verdict, Verdict::Incomplete, "{:#?}", r.indicators);
    let mut tr = benign().done();
    let dup = tr.events[1].clone();
    tr.events.push(dup);
    assert!(judge(&tr, &none())
        .run
        .incomplete_reasons
        .iter()
        .any(|x| x.contains("duplicate")));
    let mut tr = benign().done();
    tr.header.context = Default::default();
    let r = judge(&tr, &none());
    assert!(!r.run.complete && r.verdict != Verdict::Clean);
}

#[test]
fn loopback_and_the_jail_resolver_are_not_network() {
    let mut t = benign();
    t.connect(10, 1, "127.0.0.1", 5432);
    t.connect(10, 1, "::1", 8080);
    t.connect(10, 1, "10.0.2.3", 53);
    t.dns(10, "localhost", "127.0.0.1");
    t.ev(
        10,
        Some(1),
        EventKind::Net {
            op: crate::trace::NetOp::Bind,
            family: "inet".into(),
            addr: Some("0.0.0.0".into()),
            port: Some(8000),
            bytes: None,
            local_port: None,
            result: crate::trace::SysResult::ok(0),
        },
    );
    let r = judge(&t.done(), &none());
    assert!(
        r.categories.iter().all(|c| c.category != Network),
        "{:#?}",
        r.profile.hosts
    );
    assert_eq!(r.verdict, Verdict::Clean);
    // a public resolver on 53 is egress
    let mut t = benign();
    t.connect(10, 1, "8.8.8.8", 53);
    let r = judge(&t.done(), &none());
    assert!(r.profile.hosts.iter().any(|h| h.host == "8.8.8.8"));
}

#[test]
fn score_counts_each_indicator_once_and_caps_at_100() {
    let mut t = benign();
    for h in ["a.example.org", "b.example.org", "c.example.org"] {
        t.http(10, 1, "GET", &format!("https://{h}/"), h, 0);
    }
    let r = judge(&t.done(), &statics(&[Network], &[]));
    assert_eq!(
        r.indicators
            .iter()
            .filter(|i| i.id == "BEHAV_UNDECLARED_HOST")
            .count(),
        3
    );
    // undeclared hosts and the host divergence are one fact: 30, not 60
    assert_eq!(r.score, 30, "{:#?}", r.indicators);
    assert_eq!(r.verdict, Verdict::Suspicious);
    let mut t = benign();
    let q = t.http(
        10,
        1,
        "POST",
        "https://45.61.136.17:8443/",
        "45.61.136.17",
        100,
    );
    t.canary("aws", None, q, &[]);
    t.write(10, 1, "/home/alice/.bashrc");
    t.read(10, 1, "/.dockerenv");
    assert_eq!(judge(&t.done(), &none()).score, 100);
}

#[test]
fn weights_come_from_the_config() {
    let mut t = benign();
    t.read(10, 1, "/.dockerenv");
    let tr = t.done();
    let cfg = AnalyseConfig::from_toml_str("[weights]\nBEHAV_SANDBOX_PROBE = 75\n").unwrap();
    let r = analyse(&tr, &none(), None, &cfg);
    assert_eq!(r.verdict, Verdict::Malicious);
    assert_eq!(judge(&tr, &none()).verdict, Verdict::Suspicious);
    let cfg = AnalyseConfig::from_toml_str("[bands]\nreview = 10\nblocked = 20\n").unwrap();
    assert_eq!(analyse(&tr, &none(), None, &cfg).band, Band::Blocked);
}

fn with_host(h: &str) -> crate::trace::Trace {
    let mut t = benign();
    t.dns(10, h, "198.18.0.7");
    t.connect(10, 1, "198.18.0.7", 443);
    t.done()
}

#[test]
fn drift_names_new_hosts_and_an_identical_run_has_none() {
    let s = statics(
        &[Network, Execution],
        &["api.example.com", "new.example.net"],
    );
    let cfg = AnalyseConfig::shipped();
    let first = judge(&with_host("api.example.com"), &s);
    let mut base = BaselineSummary::from_report(&first).expect("fidelity known");
    base.accepted_at = "2026-01-01T00:00:00Z".into();
    let again = analyse(&with_host("api.example.com"), &s, Some(&base), &cfg);
    assert!(!has(&again, "BEHAV_DRIFT"), "{:#?}", again.indicators);
    assert_eq!(
        again.baseline.as_ref().map(|b| b.accepted_at.as_str()),
        Some("2026-01-01T00:00:00Z")
    );
    let mut t = benign();
    t.dns(10, "api.example.com", "198.18.0.7");
    t.dns(10, "new.example.net", "198.18.0.8");
    let c = t.connect(10, 1, "198.18.0.8", 443);
    t.spawn(10, 11, 1);
    let g = t.exec(11, 1, "/usr/bin/git", &["git", "push"]);
    let r = analyse(&t.done(), &s, Some(&base), &cfg);
    let d: Vec<_> = r
        .indicators
        .iter()
        .filter(|i| i.id == "BEHAV_DRIFT")
        .collect();
    assert!(
        d.iter().any(|i| i.summary.contains("hosts")
            && i.summary.contains("new.example.net")
            && i.evidence.contains(&c)),
        "{d:#?}"
    );
    assert!(d
        .iter()
        .any(|i| i.summary.contains("/usr/bin/git") && i.evidence.contains(&g)));
    assert!(!d.iter().any(|i| i.summary.contains("api.example.com")));
    assert_eq!(r.verdict, Verdict::Suspicious);
}

#[test]
fn reports_are_deterministic_and_replay_reproduces_them() {
    let mut t = benign();
    let q = t.http(10, 1, "POST", "https://b.example.org/x", "b.example.org", 3);
    t.canary("aws", None, q, &["gzip", "base64"]);
    t.http(10, 1, "GET", "https://a.example.org/", "a.example.org", 0);
    t.write(10, 1, "/home/alice/.bashrc");
    let tr = t.done();
    let s = statics(&[Network], &["a.example.org"]);
    let live = judge(&tr, &s).to_json();
    assert_eq!(live, judge(&tr, &s).to_json());
    // the same events in another order in memory judge the same
    let mut shuffled = tr.clone();
    shuffled.events.reverse();
    assert_eq!(live, judge(&shuffled, &s).to_json());
    // through a trace file, as `observe replay` does
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.trace.jsonl");
    let mut w = TraceWriter::new(std::fs::File::create(&path).unwrap(), &tr.header).unwrap();
    for e in &tr.events {
        w.write(e.clone()).unwrap();
    }
    drop(w);
    let replayed = replay(&path, &s, None, &AnalyseConfig::shipped())
        .unwrap()
        .to_json();
    assert_eq!(live, replayed);
    assert!(replay(
        &dir.path().join("missing"),
        &s,
        None,
        &AnalyseConfig::shipped()
    )
    .is_err());
}

#[test]
fn hostile_strings_do_not_break_the_analyser() {
    let mut t = T::new();
    t.step(1, "\u{1b}[2J\nfake");
    t.exec(10, 1, "", &[]);
    t.exec(10, 1, "/\u{0}x/ü/../ß", &["\u{202e}evil"]);
    t.read(10, 1, "");
    t.read(10, 1, "relative/../../../../x");
    t.dns(10, "", "not an ip, 999.1.1.1, ::ffff:1.2.3.4");
    t.http(10, 1, "GET", "http://[::1", "", 0);
    t.http(10, 1, "GET", "%zz%", "%", 0);
    t.canary("nope", Some("..."), u64::MAX, &[]);
    t.ev(
        -5,
        None,
        EventKind::Spawn {
            parent: -1,
            child: -1,
            thread: false,
        },
    );
    let r = judge(&t.done(), &none());
    assert!(r.score <= 100);
    let _ = crate::report::summary(&r);
}

#[test]
fn a_process_left_on_the_real_clock_makes_the_run_incomplete() {
    let mut t = benign();
    t.ev(
        10,
        Some(1),
        EventKind::TracerNote {
            note: "virtual_clock".into(),
            detail: "a sleep was fast-forwarded: …".into(),
        },
    );
    let r = judge(&t.clone().done(), &none());
    assert!(r.run.complete, "{:?}", r.run.incomplete_reasons);
    t.ev(
        10,
        Some(1),
        EventKind::TracerNote {
            note: "clock_unvirtualized".into(),
            detail: "thread 12 could not be stopped outside a clock entry".into(),
        },
    );
    let r = judge(&t.done(), &none());
    assert_eq!(r.verdict, Verdict::Incomplete);
    assert!(
        r.run
            .incomplete_reasons
            .iter()
            .any(|x| x.contains("real clock") && x.contains("thread 12")),
        "{:?}",
        r.run.incomplete_reasons
    );
}
