use super::*;
use crate::trace::CredentialFile;

fn layout(os: &str) -> Layout {
    let home = if os == "darwin-sim" {
        "/Users/alice"
    } else {
        "/home/alice"
    };
    let ctx = RunContext {
        home: home.into(),
        workspace: format!("{home}/project"),
        skill_dir: format!("{home}/.claude/skills/demo"),
        other_skill_dirs: vec![format!("{home}/.claude/skills/sibling")],
        agent_files: vec![format!("{home}/.claude/settings.json")],
        temp_dirs: vec!["/tmp".into()],
        path_dirs: vec![format!("{home}/.local/bin"), "/usr/bin".into()],
        credential_files: vec![CredentialFile {
            path: format!("{home}/.ssh/id_ed25519"),
            credential: "ssh-ed25519".into(),
            service_hosts: vec![],
        }],
        ..Default::default()
    };
    Layout::from_context(&ctx, os)
}

#[test]
fn normalises_evasive_spellings() {
    assert_eq!(
        normalize("/home/alice/project/../.bashrc", None),
        "/home/alice/.bashrc"
    );
    assert_eq!(
        normalize("/home//alice/./.bashrc", None),
        "/home/alice/.bashrc"
    );
    assert_eq!(
        normalize("/proc/self/root/home/alice/.bashrc", None),
        "/home/alice/.bashrc"
    );
    assert_eq!(
        normalize("/proc/1/root/proc/self/root/etc/cron.d/x", None),
        "/etc/cron.d/x"
    );
    assert_eq!(
        normalize("../.zshrc", Some("/home/alice/project")),
        "/home/alice/.zshrc"
    );
    assert_eq!(
        normalize("/proc/self/cwd/../.profile", Some("/home/alice/project")),
        "/home/alice/.profile"
    );
    assert_eq!(normalize("/../../etc/passwd", None), "/etc/passwd");
    assert_eq!(normalize("/proc/12/environ", None), "/proc/12/environ");
}

#[test]
fn classifies_every_class() {
    let l = layout("linux");
    let c = |p: &str| l.classify(&normalize(p, None));
    assert_eq!(c("/home/alice/project/src/main.rs"), PathClass::Workspace);
    assert_eq!(c("/tmp/x"), PathClass::Temp);
    assert_eq!(
        c("/home/alice/.claude/skills/demo/scripts/run.py"),
        PathClass::SkillOwn
    );
    assert_eq!(
        c("/home/alice/.claude/skills/sibling/SKILL.md"),
        PathClass::OtherSkill
    );
    assert_eq!(
        c("/home/alice/.claude/skills/newly-dropped/SKILL.md"),
        PathClass::OtherSkill
    );
    assert_eq!(
        c("/home/alice/.claude/settings.json"),
        PathClass::AgentSettings
    );
    assert_eq!(
        c("/home/alice/project/.claude/settings.local.json"),
        PathClass::AgentSettings
    );
    assert_eq!(c("/home/alice/project/CLAUDE.md"), PathClass::AgentSettings);
    assert_eq!(c("/home/alice/.bashrc"), PathClass::ShellStartup);
    assert_eq!(c("/home/alice/project/../.bashrc"), PathClass::ShellStartup);
    assert_eq!(
        c("/home/alice/.config/systemd/user/x.service"),
        PathClass::Scheduler
    );
    assert_eq!(c("/var/spool/cron/crontabs/alice"), PathClass::Scheduler);
    assert_eq!(c("/home/alice/.local/bin/git"), PathClass::PathDir);
    assert_eq!(c("/usr/bin/git"), PathClass::PathDir);
    assert_eq!(c("/home/alice/.ssh/id_ed25519"), PathClass::Credential);
    assert_eq!(
        c("/home/alice/Documents/taxes.xlsx"),
        PathClass::UserDocument
    );
    assert_eq!(c("/home/alice/.pip/pip.conf"), PathClass::PackageConfig);
    assert_eq!(c("/home/alice/.cache/pip/x"), PathClass::Cache);
    assert_eq!(c("/home/alice/.lesshst"), PathClass::Home);
    assert_eq!(c("/proc/self/status"), PathClass::Pseudo);
    assert_eq!(c("/etc/passwd"), PathClass::System);
    // a prefix that is not a path boundary is not "under"
    assert_eq!(c("/home/alice/projectile/x"), PathClass::Home);
    assert_eq!(c("/home/alice/.bashrc.d/evil"), PathClass::Home);
}

#[test]
fn darwin_compares_case_insensitively() {
    let l = layout("darwin-sim");
    assert_eq!(
        l.classify("/Users/alice/library/launchagents/com.x.plist"),
        PathClass::Scheduler
    );
    assert_eq!(
        l.classify("/Users/alice/.SSH/ID_ED25519"),
        PathClass::Credential
    );
    let linux = layout("linux");
    assert_eq!(
        linux.classify("/home/alice/.SSH/ID_ED25519"),
        PathClass::Home
    );
}

#[test]
fn persistence_paths() {
    let l = layout("linux");
    let p = |s: &str| {
        let n = normalize(s, None);
        l.persistence_reason(&n, l.classify(&n))
    };
    assert!(p("/home/alice/.zshrc").is_some());
    assert!(p("/home/alice/project/.git/hooks/pre-commit").is_some());
    assert!(p("/home/alice/project/.git/hooks/pre-commit.sample").is_none());
    assert!(p("/home/alice/.local/lib/python3.11/site-packages/zz.pth").is_some());
    assert!(p("/home/alice/project/.venv/lib/python3.11/site-packages/_virtualenv.pth").is_none());
    assert!(p("/home/alice/.ssh/authorized_keys").is_some());
    assert!(p("/home/alice/.claude/hooks/x.sh").is_some());
    assert!(p("/home/alice/project/src/lib.rs").is_none());
}
