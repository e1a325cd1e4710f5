use super::*;

#[test]
fn parses_sizes_and_rejects_nonsense() {
    assert_eq!(parse_size("512M"), Ok(512 << 20));
    assert_eq!(parse_size("1g"), Ok(1 << 30));
    assert_eq!(parse_size("64k"), Ok(64 << 10));
    assert_eq!(parse_size("1048576"), Ok(1 << 20));
    for bad in [
        "",
        "M",
        "12X",
        "-1G",
        "1.5G",
        "99999999999999999999",
        "20000000000G",
    ] {
        assert!(parse_size(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn rejects_limits_too_small_to_run_anything() {
    let l = ResourceLimits {
        memory: 1 << 20,
        ..ResourceLimits::default()
    };
    assert!(l.validate().is_err());
    assert!(ResourceLimits::default().validate().is_ok());
}

#[test]
fn cgroup_mode_keeps_rlimits_above_the_cgroup_values() {
    let l = ResourceLimits::default();
    let cg = l.jail_limits(Enforcement::CgroupV1);
    assert!(cg.nproc > l.pids && cg.address_space > l.memory);
    let rl = l.jail_limits(Enforcement::Rlimits);
    assert_eq!((rl.nproc, rl.address_space), (l.pids, l.memory));
    assert_eq!(rl.disk_bytes, l.disk);
}

#[test]
fn counts_egress_bytes_of_handshakes_and_requests() {
    let m = EgressMeter::default();
    m.count(&EventKind::TlsHandshake {
        sni: None,
        alpn: vec![],
        intercepted: true,
        bytes_out: 1000,
        bytes_in: 5,
    });
    let req = |url: &str| EventKind::HttpRequest {
        method: "POST".into(),
        url: url.into(),
        host: "h".into(),
        headers: vec![("a".into(), "b".into())],
        body_size: 100,
        body_sha256: None,
        body_preview: None,
    };
    // The TLS count is the handshake; requests inside it count on their own.
    m.count(&req("https://h/x"));
    m.count(&req("http://h/x"));
    assert_eq!(m.bytes(), 1000 + (4 + 11 + 6 + 100) + (4 + 10 + 6 + 100));
    assert_eq!(m.requests.load(Ordering::Relaxed), 2);
}

#[test]
fn stops_for_cancel_cpu_and_egress_in_that_order() {
    let l = ResourceLimits {
        cpu_time: Duration::from_secs(2),
        egress_bytes: 10,
        ..ResourceLimits::default()
    };
    assert_eq!(stop_for(&l, None, Some(1_000_000_000), 10), None);
    assert_eq!(
        stop_for(&l, Some("SIGTERM"), Some(3_000_000_000), 11).map(|s| s.what),
        Some("cancelled".into())
    );
    assert_eq!(
        stop_for(&l, None, Some(3_000_000_000), 11).map(|s| s.what),
        Some("cpu_time".into())
    );
    assert_eq!(
        stop_for(&l, None, None, 11).map(|s| s.what),
        Some("egress_bytes".into())
    );
}

#[test]
fn names_each_limit_hit() {
    let l = ResourceLimits::default();
    let none = hits(
        &l,
        &Observed {
            disk_used: Some(1 << 20),
            disk_size: Some(l.disk),
            ..Observed::default()
        },
    );
    assert!(none.is_empty(), "{none:?}");
    let all = hits(
        &l,
        &Observed {
            stopped: Some("cpu_time".into()),
            budget_exhausted: true,
            oom_kills: 1,
            pids_refused: 7,
            disk_used: Some(l.disk - 4096),
            disk_size: Some(l.disk),
        },
    );
    let names: Vec<_> = all.iter().map(|(w, _)| *w).collect();
    assert_eq!(names, ["wall_time", "cpu_time", "memory", "pids", "disk"]);
    assert!(all[3].1.contains("7 fork"));
}
