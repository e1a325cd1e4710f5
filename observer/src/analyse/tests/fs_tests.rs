use crate::model::Category::*;
use crate::report::{PathClass, Verdict};
use crate::testutil::*;
use crate::trace::FileOp;

fn base() -> T {
    let mut t = T::new();
    t.launch(10, 1, "run.py");
    t
}

#[test]
fn workspace_temp_and_cache_writes_are_not_the_writes_category() {
    let mut t = base();
    t.write(10, 1, &format!("{WS}/src/main.rs"));
    t.op(10, 1, FileOp::Unlink, &format!("{WS}/build/old.o"), None);
    t.op(10, 1, FileOp::Mkdir, &format!("{WS}/out"), None);
    t.write(10, 1, "/tmp/scratch.json");
    t.write(10, 1, "/home/alice/.cache/pip/http/x");
    t.write(10, 1, "/dev/null");
    t.write(
        10,
        1,
        &format!("{SKILL}/scripts/__pycache__/run.cpython-311.pyc"),
    );
    t.write(
        10,
        1,
        &format!("{WS}/.venv/lib/python3.11/site-packages/_virtualenv.pth"),
    );
    t.write(10, 1, &format!("{WS}/.git/hooks/pre-commit.sample"));
    for i in 0..15 {
        t.op(10, 1, FileOp::Unlink, &format!("{WS}/dist/f{i}.js"), None);
    }
    let r = judge(&t.done(), &none());
    assert!(
        r.categories.iter().all(|c| c.category != Writes),
        "{:#?}",
        r.categories
    );
    assert_eq!(r.indicators, vec![], "{:#?}", r.indicators);
    assert_eq!(r.verdict, Verdict::Clean);
    assert!(r
        .profile
        .files
        .iter()
        .any(|f| f.class == PathClass::Workspace));
}

#[test]
fn writes_outside_are_writes() {
    let mut t = base();
    let s = t.write(10, 1, "/home/alice/.lesshst");
    let r = judge(&t.done(), &none());
    let w = r
        .categories
        .iter()
        .find(|c| c.category == Writes)
        .expect("writes");
    assert_eq!(w.evidence, vec![s]);
    assert!(find(&r, "BEHAV_STATIC_DIVERGENCE")
        .summary
        .contains("writes"));
    let r = judge(
        &{
            let mut t = base();
            t.write(10, 1, "/home/alice/.lesshst");
            t.done()
        },
        &statics(&[Writes], &[]),
    );
    assert!(!has(&r, "BEHAV_STATIC_DIVERGENCE"));
}

#[test]
fn persistence_through_evasive_paths() {
    for path in [
        "/home/alice/project/../.bashrc",
        "/home/alice//.config/systemd/user/update.service",
        "/proc/self/root/home/alice/.zshenv",
        "/home/alice/./.config/autostart/x.desktop",
        "/home/alice/project/.git/hooks/post-checkout",
        "/home/alice/.local/lib/python3.11/site-packages/zzz.pth",
        "/home/alice/.ssh/authorized_keys",
        "/var/spool/cron/crontabs/alice",
    ] {
        let mut t = base();
        let s = t.write_flags(10, 1, path, &["O_WRONLY", "O_APPEND"]);
        let r = judge(&t.done(), &statics(&[Execution], &[]));
        let i = find(&r, "BEHAV_PERSISTENCE");
        assert!(i.evidence == vec![s], "{path}");
        assert_eq!(r.verdict, Verdict::Malicious, "{path}");
    }
}

#[test]
fn persistence_by_rename_or_symlink_and_declared_writes_soften_it() {
    let mut t = base();
    t.write(10, 1, "/tmp/x");
    let mv = t.op(
        10,
        1,
        FileOp::Rename,
        "/tmp/x",
        Some("/home/alice/.profile"),
    );
    let r = judge(&t.finished(), &statics(&[Execution], &[]));
    assert!(find(&r, "BEHAV_PERSISTENCE").evidence.contains(&mv));
    let r = judge(&t.finished(), &statics(&[Execution, Writes], &[]));
    let i = find(&r, "BEHAV_PERSISTENCE");
    assert_eq!(i.weight, 40);
    assert_eq!(r.verdict, Verdict::Suspicious);
    let mut t = base();
    let ln = t.op(
        10,
        1,
        FileOp::Symlink,
        "/home/alice/.config/fish/conf.d/x.fish",
        Some("/tmp/payload.sh"),
    );
    let r = judge(&t.done(), &statics(&[Execution], &[]));
    assert!(find(&r, "BEHAV_PERSISTENCE").evidence.contains(&ln));
}

#[test]
fn a_failed_persistence_attempt_still_counts() {
    let mut t = base();
    let s = t.ev(
        10,
        Some(1),
        crate::trace::EventKind::Open {
            path: "/etc/cron.d/update".into(),
            requested: "/etc/cron.d/update".into(),
            flags: vec!["O_WRONLY".into(), "O_CREAT".into()],
            write: true,
            result: crate::trace::SysResult::errno(libc::EROFS),
        },
    );
    let r = judge(&t.done(), &statics(&[Execution], &[]));
    assert_eq!(find(&r, "BEHAV_PERSISTENCE").evidence, vec![s]);
}

#[test]
fn tool_tampering() {
    let mut t = base();
    let a = t.write(10, 1, "/home/alice/.local/bin/git");
    let b = t.op(
        10,
        1,
        FileOp::Symlink,
        "/usr/local/bin/python3",
        Some("/tmp/x"),
    );
    let c = t.write(10, 1, "/home/alice/.config/pip/pip.conf");
    let d = t.write(10, 1, &format!("{WS}/.npmrc"));
    let r = judge(&t.done(), &statics(&[Execution], &[]));
    let ev: Vec<u64> = r
        .indicators
        .iter()
        .filter(|i| i.id == "BEHAV_TOOL_TAMPER")
        .flat_map(|i| i.evidence.clone())
        .collect();
    for s in [a, b, c, d] {
        assert!(ev.contains(&s), "{s} missing from {ev:?}");
    }
    assert_eq!(r.verdict, Verdict::Malicious);
    // reading them is fine
    let mut t = base();
    t.read(10, 1, "/home/alice/.config/pip/pip.conf");
    t.read(10, 1, "/usr/local/bin/python3");
    assert!(!has(&judge(&t.done(), &none()), "BEHAV_TOOL_TAMPER"));
}

#[test]
fn destroying_user_documents() {
    let mut t = base();
    let d = t.op(
        10,
        1,
        FileOp::Unlink,
        "/home/alice/Documents/taxes-2025.xlsx",
        None,
    );
    let r = judge(&t.done(), &statics(&[Execution], &[]));
    assert_eq!(find(&r, "BEHAV_DESTRUCTIVE").evidence, vec![d]);
    // ransomware shape: read, then rewrite in place
    let mut t = base();
    t.read(10, 1, "/home/alice/Pictures/cat.jpg");
    let w = t.write(10, 1, "/home/alice/Pictures/cat.jpg");
    let r = judge(&t.done(), &statics(&[Execution], &[]));
    assert_eq!(find(&r, "BEHAV_DESTRUCTIVE").evidence, vec![w]);
    // many deletions outside the workspace
    let mut t = base();
    for i in 0..12 {
        t.op(
            10,
            1,
            FileOp::Unlink,
            &format!("/home/alice/.config/app{i}/state"),
            None,
        );
    }
    let r = judge(&t.done(), &statics(&[Execution], &[]));
    assert!(find(&r, "BEHAV_DESTRUCTIVE").summary.contains("12 files"));
}

#[test]
fn saving_a_new_document_is_not_destruction() {
    let mut t = base();
    t.write_flags(
        10,
        1,
        "/home/alice/Documents/report.pdf",
        &["O_WRONLY", "O_CREAT", "O_EXCL"],
    );
    t.write(10, 1, "/home/alice/Documents/summary.md");
    for i in 0..5 {
        t.op(
            10,
            1,
            FileOp::Unlink,
            &format!("/home/alice/.config/app{i}/state"),
            None,
        );
    }
    let r = judge(&t.done(), &statics(&[Execution, Writes], &[]));
    assert!(!has(&r, "BEHAV_DESTRUCTIVE"), "{:#?}", r.indicators);
    assert_eq!(r.verdict, Verdict::Clean);
}

#[test]
fn cross_skill_and_agent_settings_writes() {
    for path in [
        "/home/alice/.claude/skills/sibling/SKILL.md",
        "/home/alice/.claude/skills/helper-new/SKILL.md",
        "/home/alice/.claude/settings.json",
        "/home/alice/project/.claude/settings.local.json",
        "/home/alice/project/CLAUDE.md",
        "/home/alice/.codex/AGENTS.md",
    ] {
        let mut t = base();
        let s = t.write(10, 1, path);
        let r = judge(&t.done(), &statics(&[Execution], &[]));
        assert_eq!(
            find(&r, "BEHAV_CROSS_SKILL_WRITE").evidence,
            vec![s],
            "{path}"
        );
        assert_eq!(r.verdict, Verdict::Malicious, "{path}");
    }
    // reading the sibling or writing its own folder is not
    let mut t = base();
    t.read(10, 1, "/home/alice/.claude/skills/sibling/SKILL.md");
    t.write(10, 1, &format!("{SKILL}/.state.json"));
    let r = judge(&t.done(), &statics(&[Execution, Writes], &[]));
    assert!(!has(&r, "BEHAV_CROSS_SKILL_WRITE"));
}

#[test]
fn sandbox_probing() {
    let mut t = base();
    let s = t.read(10, 1, "/.dockerenv");
    let r = judge(&t.done(), &none());
    assert_eq!(find(&r, "BEHAV_SANDBOX_PROBE").evidence, vec![s]);
    let mut t = base();
    t.read(10, 1, "/proc/self/cgroup");
    t.read(10, 1, "/proc/10/mountinfo");
    t.exec(
        11,
        1,
        "/usr/bin/systemd-detect-virt",
        &["systemd-detect-virt"],
    );
    assert!(has(
        &judge(&t.done(), &statics(&[Execution], &[])),
        "BEHAV_SANDBOX_PROBE"
    ));
    let mut t = base();
    t.read(10, 1, "/proc/self/cgroup");
    t.read(10, 1, "/proc/self/mountinfo");
    t.read(10, 1, "/proc/self/status");
    assert!(has(&judge(&t.done(), &none()), "BEHAV_SANDBOX_PROBE"));
    // what a language runtime reads at start-up is not probing
    let mut t = base();
    t.read(10, 1, "/proc/self/cgroup");
    t.read(10, 1, "/sys/fs/cgroup/cpu.max");
    t.read(10, 1, "/etc/ssl/certs/ca-certificates.crt");
    assert!(!has(&judge(&t.done(), &none()), "BEHAV_SANDBOX_PROBE"));
}

#[test]
fn escape_attempts() {
    let mut t = base();
    let p = t.denied(10, "ptrace", "errno");
    let k = t.denied(10, "int80:execve", "kill");
    t.denied(10, "clone3", "errno");
    let d = t.ev(
        10,
        Some(1),
        crate::trace::EventKind::Net {
            op: crate::trace::NetOp::Connect,
            family: "unix".into(),
            addr: Some("/var/run/docker.sock".into()),
            port: None,
            bytes: None,
            local_port: None,
            result: crate::trace::SysResult::errno(libc::ENOENT),
        },
    );
    let r = judge(&t.done(), &none());
    let i = find(&r, "BEHAV_ESCAPE_ATTEMPT");
    assert_eq!(i.evidence, vec![p, k, d]);
    assert!(!i.summary.contains("clone3"));
    assert_eq!(r.profile.denials.len(), 3);
    assert_eq!(r.verdict, Verdict::Suspicious);
    let mut t = base();
    t.denied(10, "clone3", "errno");
    t.denied(10, "io_uring_setup", "errno"); // libuv probes it at start-up
    assert!(!has(&judge(&t.done(), &none()), "BEHAV_ESCAPE_ATTEMPT"));
}
