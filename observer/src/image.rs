//! The filesystem and identity the skill sees. This first image is built in; the declarative
//! images of `sandbox-images/` replace its data (issue 4) while keeping this shape.

use crate::jail::spec::{FsEntry, JailSpec, Limits};
use crate::trace::RunContext;

/// A file of the skill, relative to its folder.
#[derive(Debug, Clone)]
pub struct SkillFile {
    pub path: String,
    pub data: Vec<u8>,
    pub mode: u32,
}

/// Everything about the run's user environment that the jail and the analyser need.
#[derive(Debug, Clone)]
pub struct Image {
    pub os: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
    pub workspace: String,
    pub skill_dir: String,
    pub hostname: String,
    pub env: Vec<(String, String)>,
    pub entries: Vec<FsEntry>,
    pub ro_binds: Vec<String>,
    pub rw_mounts: Vec<String>,
    pub context: RunContext,
}

/// System paths bound read-only from the host. Missing ones are skipped; merged-/usr symlinks
/// are recreated as symlinks.
pub const SYSTEM_BINDS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/lib32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/localtime",
    "/etc/protocols",
    "/etc/services",
    "/etc/mime.types",
    "/etc/bash.bashrc",
    "/etc/profile",
    "/etc/profile.d",
    "/etc/inputrc",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/gai.conf",
    "/etc/host.conf",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/terminfo",
    "/etc/nsswitch.conf",
    "/etc/magic",
    "/etc/perl",
    "/etc/wgetrc",
    "/etc/login.defs",
    "/etc/shells",
];

fn dir(path: &str, mode: u32) -> FsEntry {
    FsEntry::Dir {
        path: path.into(),
        mode,
    }
}

fn file(path: &str, mode: u32, data: impl Into<Vec<u8>>) -> FsEntry {
    FsEntry::File {
        path: path.into(),
        mode,
        data: data.into(),
    }
}

/// The built-in Linux developer laptop: user `alice`, a project workspace, the skill installed
/// at `~/.claude/skills/<name>/` next to a sibling skill.
pub fn linux(skill_name: &str, skill_files: &[SkillFile]) -> Image {
    let user = "alice";
    let home = format!("/home/{user}");
    let workspace = format!("{home}/projects/webapp");
    let skill_dir = format!("{home}/.claude/skills/{skill_name}");
    let sibling = format!("{home}/.claude/skills/pdf-tools");
    let hostname = "alice-thinkpad".to_string();
    let mut entries = vec![
        dir("/etc", 0o755),
        dir("/var", 0o755),
        dir("/var/lib", 0o755),
        dir("/run", 0o755),
        dir("/mnt", 0o755),
        dir("/opt", 0o755),
        dir("/srv", 0o755),
        dir("/root", 0o700),
        file(
            "/etc/passwd",
            0o644,
            format!(
                "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
                 nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
                 {user}:x:1000:1000:Alice,,,:{home}:/bin/bash\n"
            ),
        ),
        file(
            "/etc/group",
            0o644,
            format!("root:x:0:\nsudo:x:27:{user}\nusers:x:100:{user}\nnogroup:x:65534:\n{user}:x:1000:\n"),
        ),
        file("/etc/hostname", 0o644, format!("{hostname}\n")),
        file(
            "/etc/hosts",
            0o644,
            format!("127.0.0.1\tlocalhost\n127.0.1.1\t{hostname}\n::1\tlocalhost ip6-localhost ip6-loopback\n"),
        ),
        file("/etc/resolv.conf", 0o644, "nameserver 192.168.1.1\nsearch lan\n"),
        file("/etc/machine-id", 0o444, "3f8a6c1e9b2d4f7a8c5e1b9d2a6f4c8e\n"),
        dir(&home, 0o750),
        dir(&format!("{home}/.config"), 0o755),
        dir(&format!("{home}/.cache"), 0o755),
        dir(&format!("{home}/.local/bin"), 0o755),
        dir(&format!("{home}/Documents"), 0o755),
        dir(&format!("{home}/Downloads"), 0o755),
        file(
            &format!("{home}/.bashrc"),
            0o644,
            "# ~/.bashrc\n[ -z \"$PS1\" ] && return\nHISTCONTROL=ignoreboth\nalias ll='ls -alF'\n",
        ),
        file(&format!("{home}/.profile"), 0o644, "# ~/.profile\n[ -f ~/.bashrc ] && . ~/.bashrc\n"),
        dir(&workspace, 0o755),
        file(
            &format!("{workspace}/README.md"),
            0o644,
            "# webapp\n\nInternal dashboard. Run `npm start` to develop.\n",
        ),
        file(
            &format!("{workspace}/package.json"),
            0o644,
            "{\n  \"name\": \"webapp\",\n  \"version\": \"1.4.2\",\n  \"private\": true\n}\n",
        ),
        dir(&format!("{workspace}/src"), 0o755),
        file(
            &format!("{workspace}/src/index.js"),
            0o644,
            "const http = require('http');\nhttp.createServer((q, r) => r.end('ok')).listen(3000);\n",
        ),
        file(&format!("{home}/Documents/notes.txt"), 0o644, "Q3 planning: hire two engineers.\n"),
        dir(&format!("{home}/.claude"), 0o755),
        file(
            &format!("{home}/.claude/settings.json"),
            0o644,
            "{\n  \"permissions\": {\"allow\": [\"Bash(npm run *)\"]}\n}\n",
        ),
        dir(&sibling, 0o755),
        file(
            &format!("{sibling}/SKILL.md"),
            0o644,
            "---\nname: pdf-tools\ndescription: Merge and split PDF files.\n---\n\nUse `qpdf` to merge.\n",
        ),
        dir(&skill_dir, 0o755),
    ];
    for f in skill_files {
        let rel = f.path.trim_start_matches('/');
        entries.push(file(
            &format!("{skill_dir}/{rel}"),
            f.mode & 0o7777,
            f.data.clone(),
        ));
    }
    let path = format!("{home}/.local/bin:/usr/local/bin:/usr/bin:/bin");
    let env = vec![
        ("HOME".into(), home.clone()),
        ("USER".into(), user.into()),
        ("LOGNAME".into(), user.into()),
        ("SHELL".into(), "/bin/bash".into()),
        ("PATH".into(), path),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "xterm-256color".into()),
        ("PWD".into(), workspace.clone()),
    ];
    let context = RunContext {
        home: home.clone(),
        workspace: workspace.clone(),
        skill_dir: skill_dir.clone(),
        other_skill_dirs: vec![sibling],
        agent_files: vec![
            format!("{home}/.claude/settings.json"),
            format!("{home}/.claude/CLAUDE.md"),
        ],
        temp_dirs: vec!["/tmp".into(), "/var/tmp".into(), "/dev/shm".into()],
        path_dirs: vec![
            format!("{home}/.local/bin"),
            "/usr/local/bin".into(),
            "/usr/bin".into(),
            "/bin".into(),
        ],
        credential_files: Vec::new(),
        credential_env: Vec::new(),
        creds_seed: None,
    };
    Image {
        os: "linux".into(),
        user: user.into(),
        uid: 1000,
        gid: 1000,
        home,
        workspace,
        skill_dir,
        hostname,
        env,
        entries,
        ro_binds: SYSTEM_BINDS.iter().map(|s| s.to_string()).collect(),
        rw_mounts: vec!["/home".into(), "/tmp".into(), "/var/tmp".into()],
        context,
    }
}

impl Image {
    pub fn jail_spec(
        &self,
        staging: String,
        steps: Vec<crate::jail::spec::StepSpec>,
        limits: Limits,
        grace_ms: u64,
        t0_ns: u64,
    ) -> JailSpec {
        JailSpec {
            t0_ns,
            staging,
            hostname: self.hostname.clone(),
            uid: self.uid,
            gid: self.gid,
            home: self.home.clone(),
            env: self.env.clone(),
            ro_binds: self.ro_binds.clone(),
            entries: self.entries.clone(),
            rw_mounts: self.rw_mounts.clone(),
            steps,
            limits,
            grace_ms,
            extra_notify: Vec::new(),
            traced: true,
        }
    }
}
