//! Path normalisation and classification against the jail layout (pure, no filesystem access).
//!
//! Paths in a trace may be spelled evasively (`a/../b`, `//`, `/proc/self/root/…`); everything is
//! normalised lexically before it is classified. On macOS-like images comparisons ignore case,
//! because the default macOS filesystem does.

use crate::report::PathClass;
use crate::trace::RunContext;

/// Lexically normalise `path`: make it absolute against `cwd`, undo `/proc/<pid>/root` and
/// `/proc/self/cwd` indirections, drop `.`, empty components and resolve `..`.
pub fn normalize(path: &str, cwd: Option<&str>) -> String {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{}/{}", cwd.unwrap_or(""), path)
    };
    let mut parts: Vec<String> = Vec::new();
    for c in joined.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(c.to_string()),
        }
        // `/proc/<pid>/root` is that process's root and `/proc/<pid>/cwd` its working directory:
        // inside one jail the same root, and (for the process itself) the cwd we know. Undo them
        // before a later `..` can climb out of the indirection.
        if parts.len() == 3 && parts[0] == "proc" && is_pid_ref(&parts[1]) {
            if parts[2] == "root" {
                parts.clear();
            } else if let (true, Some(cwd)) =
                (parts[2] == "cwd", cwd.filter(|c| c.starts_with('/')))
            {
                parts = cwd
                    .split('/')
                    .filter(|p| !p.is_empty() && *p != ".")
                    .map(String::from)
                    .collect();
            }
        }
    }
    format!("/{}", parts.join("/"))
}

fn is_pid_ref(s: &str) -> bool {
    s == "self" || s == "thread-self" || (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
}

/// The jail layout a trace's paths are classified against.
#[derive(Debug, Clone)]
pub struct Layout {
    ci: bool,
    pub home: String,
    pub workspace: String,
    pub skill_dir: String,
    skills_roots: Vec<String>,
    other_skill_dirs: Vec<String>,
    agent_paths: Vec<String>,
    temp_dirs: Vec<String>,
    path_dirs: Vec<String>,
    /// (normalised path, credential id, service hosts)
    pub cred_files: Vec<(String, String, Vec<String>)>,
    shell_startup: Vec<String>,
    scheduler: Vec<String>,
    package_config: Vec<String>,
    documents: Vec<String>,
    cache: Vec<String>,
    ssh_persist: Vec<(String, &'static str)>,
}

const SHELL_STARTUP_HOME: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".kshrc",
    ".mkshrc",
    ".cshrc",
    ".tcshrc",
    ".config/fish",
    ".config/nushell",
    ".xprofile",
    ".xsessionrc",
    ".xinitrc",
    ".pam_environment",
    ".config/environment.d",
];
const SHELL_STARTUP_SYS: &[&str] = &[
    "/etc/profile",
    "/etc/profile.d",
    "/etc/bash.bashrc",
    "/etc/bashrc",
    "/etc/zshrc",
    "/etc/zsh",
    "/etc/zprofile",
    "/etc/zshenv",
    "/etc/environment",
    "/etc/fish",
    "/etc/ld.so.preload",
];
const SCHEDULER_HOME: &[&str] = &[
    ".config/systemd/user",
    ".local/share/systemd/user",
    ".config/autostart",
    "Library/LaunchAgents",
    ".config/upstart",
    ".kde/Autostart",
    ".config/plasma-workspace/env",
];
const SCHEDULER_SYS: &[&str] = &[
    "/etc/crontab",
    "/etc/cron.d",
    "/etc/cron.hourly",
    "/etc/cron.daily",
    "/etc/cron.weekly",
    "/etc/cron.monthly",
    "/etc/anacrontab",
    "/var/spool/cron",
    "/var/spool/at",
    "/etc/systemd",
    "/lib/systemd/system",
    "/usr/lib/systemd",
    "/etc/init.d",
    "/etc/rc.local",
    "/etc/xdg/autostart",
    "/Library/LaunchAgents",
    "/Library/LaunchDaemons",
    "/System/Library/LaunchDaemons",
    "/System/Library/LaunchAgents",
    "/var/at/tabs",
    "/usr/lib/cron/tabs",
    "/private/var/at/tabs",
    "/etc/periodic",
    "/etc/launchd.conf",
];
const PACKAGE_CONFIG_HOME: &[&str] = &[
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".bunfig.toml",
    ".pip/pip.conf",
    ".config/pip/pip.conf",
    "Library/Application Support/pip/pip.conf",
    ".pydistutils.cfg",
    ".condarc",
    ".config/uv/uv.toml",
    ".cargo/config",
    ".cargo/config.toml",
    ".gemrc",
    ".bundle/config",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".gradle/init.d",
    ".gitconfig",
    ".config/git/config",
    ".nuget/NuGet/NuGet.Config",
    ".config/NuGet/NuGet.Config",
    ".composer/config.json",
    ".config/composer/config.json",
    ".docker/config.json",
];
const PACKAGE_CONFIG_SYS: &[&str] = &[
    "/etc/pip.conf",
    "/etc/xdg/pip/pip.conf",
    "/etc/npmrc",
    "/usr/etc/npmrc",
    "/etc/gitconfig",
    "/etc/gemrc",
    "/etc/conda/.condarc",
    "/etc/apt/sources.list",
    "/etc/apt/sources.list.d",
    "/etc/yum.repos.d",
    "/etc/hosts",
    "/etc/resolv.conf",
];
/// Package configuration in a project root: points the project's installs at another index.
const PACKAGE_CONFIG_WS: &[&str] = &[
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    "bunfig.toml",
    "pip.conf",
    ".pip/pip.conf",
    ".condarc",
    ".cargo/config",
    ".cargo/config.toml",
];
const AGENT_HOME: &[&str] = &[
    ".claude",
    ".claude.json",
    ".codex",
    ".cursor",
    ".gemini",
    ".continue",
    ".config/claude",
    ".config/codex",
    ".aider.conf.yml",
    ".windsurf",
    ".codeium",
];
/// Agent settings, hooks and memory inside a project: read by the agent on its next session.
const AGENT_WS: &[&str] = &[
    ".claude",
    ".codex",
    ".cursor",
    ".gemini",
    ".mcp.json",
    "CLAUDE.md",
    "CLAUDE.local.md",
    "AGENTS.md",
    "GEMINI.md",
    ".cursorrules",
    ".windsurfrules",
    ".github/copilot-instructions.md",
];
const SKILLS_ROOTS_HOME: &[&str] = &[
    ".claude/skills",
    ".codex/skills",
    ".agents/skills",
    ".config/claude/skills",
    ".gemini/skills",
];
const DOCUMENTS_HOME: &[&str] = &[
    "Documents",
    "Desktop",
    "Downloads",
    "Pictures",
    "Photos",
    "Music",
    "Movies",
    "Videos",
    "Calendar",
    "Public",
    "Library/Mobile Documents",
];
const CACHE_HOME: &[&str] = &[".cache", "Library/Caches", ".npm/_cacache", ".npm/_logs"];

impl Layout {
    pub fn from_context(ctx: &RunContext, os: &str) -> Layout {
        let ci =
            os.to_ascii_lowercase().contains("darwin") || os.to_ascii_lowercase().contains("mac");
        let n = |p: &str| {
            if p.is_empty() {
                String::new()
            } else {
                normalize(p, None)
            }
        };
        let home = n(&ctx.home);
        let workspace = n(&ctx.workspace);
        let skill_dir = n(&ctx.skill_dir);
        let other_skill_dirs: Vec<String> = ctx.other_skill_dirs.iter().map(|p| n(p)).collect();
        let mut skills_roots: Vec<String> = Vec::new();
        for d in std::iter::once(&skill_dir).chain(other_skill_dirs.iter()) {
            if let Some((parent, _)) = d.rsplit_once('/') {
                if !parent.is_empty() && parent != home {
                    skills_roots.push(parent.to_string());
                }
            }
        }
        let mut agent_paths: Vec<String> = ctx.agent_files.iter().map(|p| n(p)).collect();
        if !home.is_empty() {
            skills_roots.extend(SKILLS_ROOTS_HOME.iter().map(|r| format!("{home}/{r}")));
            agent_paths.extend(AGENT_HOME.iter().map(|r| format!("{home}/{r}")));
        }
        if !workspace.is_empty() {
            skills_roots.push(format!("{workspace}/.claude/skills"));
            agent_paths.extend(AGENT_WS.iter().map(|r| format!("{workspace}/{r}")));
        }
        let mut temp_dirs: Vec<String> = ctx.temp_dirs.iter().map(|p| n(p)).collect();
        temp_dirs.extend(["/tmp", "/var/tmp", "/dev/shm"].map(String::from));
        let cred_files = ctx
            .credential_files
            .iter()
            .map(|c| (n(&c.path), c.credential.clone(), c.service_hosts.clone()))
            .collect();
        let in_home = |rels: &[&str]| -> Vec<String> {
            if home.is_empty() {
                return vec![];
            }
            rels.iter().map(|r| format!("{home}/{r}")).collect()
        };
        let with = |mut v: Vec<String>, abs: &[&str]| {
            v.extend(abs.iter().map(|a| a.to_string()));
            v
        };
        let mut package_config = with(in_home(PACKAGE_CONFIG_HOME), PACKAGE_CONFIG_SYS);
        if !workspace.is_empty() {
            package_config.extend(PACKAGE_CONFIG_WS.iter().map(|r| format!("{workspace}/{r}")));
        }
        let ssh_persist = [
            (".ssh/authorized_keys", "ssh authorized_keys"),
            (".ssh/authorized_keys2", "ssh authorized_keys"),
            (".ssh/rc", "ssh login script"),
            (".ssh/config", "ssh client config (ProxyCommand)"),
        ]
        .iter()
        .filter(|_| !home.is_empty())
        .map(|(r, why)| (format!("{home}/{r}"), *why))
        .collect();
        Layout {
            shell_startup: with(in_home(SHELL_STARTUP_HOME), SHELL_STARTUP_SYS),
            scheduler: with(in_home(SCHEDULER_HOME), SCHEDULER_SYS),
            package_config,
            documents: in_home(DOCUMENTS_HOME),
            cache: in_home(CACHE_HOME),
            ssh_persist,
            ci,
            home,
            workspace,
            skill_dir,
            skills_roots,
            other_skill_dirs,
            agent_paths,
            temp_dirs,
            path_dirs: ctx.path_dirs.iter().map(|p| n(p)).collect(),
            cred_files,
        }
    }

    /// `path` is `dir` or below it (empty `dir` never matches). Byte-wise, without allocating:
    /// this runs for every file event against every folder list.
    pub fn under(&self, path: &str, dir: &str) -> bool {
        if dir.is_empty() {
            return false;
        }
        let d = dir.trim_end_matches('/').as_bytes();
        let p = path.as_bytes();
        if p.len() < d.len() {
            return false;
        }
        let head = &p[..d.len()];
        // macOS compares names case-insensitively (ASCII folding covers the paths that matter).
        let same = if self.ci {
            head.eq_ignore_ascii_case(d)
        } else {
            head == d
        };
        same && (p.len() == d.len() || p[d.len()] == b'/')
    }

    fn under_any(&self, path: &str, dirs: &[String]) -> bool {
        dirs.iter().any(|d| self.under(path, d))
    }

    fn under_list(&self, path: &str, abs: &[&str]) -> bool {
        abs.iter().any(|d| self.under(path, d))
    }

    /// The planted credential a (normalised) path is, if any.
    pub fn credential_for(&self, path: &str) -> Option<&(String, String, Vec<String>)> {
        self.cred_files.iter().find(|(p, _, _)| self.under(path, p))
    }

    pub fn in_workspace(&self, path: &str) -> bool {
        self.under(path, &self.workspace)
    }
    pub fn in_temp(&self, path: &str) -> bool {
        self.under_any(path, &self.temp_dirs)
    }
    pub fn in_skill(&self, path: &str) -> bool {
        self.under(path, &self.skill_dir)
    }

    /// The class of a normalised path; the first matching rule wins (most specific first).
    pub fn classify(&self, path: &str) -> PathClass {
        if self.credential_for(path).is_some() {
            PathClass::Credential
        } else if self.in_skill(path) {
            PathClass::SkillOwn
        } else if self.under_any(path, &self.other_skill_dirs)
            || self.under_any(path, &self.skills_roots)
        {
            PathClass::OtherSkill
        } else if self.under_any(path, &self.agent_paths) {
            PathClass::AgentSettings
        } else if self.in_temp(path) {
            PathClass::Temp
        } else if self.in_workspace(path) {
            PathClass::Workspace
        } else if self.under_any(path, &self.shell_startup) {
            PathClass::ShellStartup
        } else if self.under_any(path, &self.scheduler) {
            PathClass::Scheduler
        } else if self.is_package_config(path) {
            PathClass::PackageConfig
        } else if self
            .path_dirs
            .iter()
            .any(|d| self.under(path, d) && path.len() > d.len())
        {
            PathClass::PathDir
        } else if self.under_any(path, &self.documents) {
            PathClass::UserDocument
        } else if self.under_any(path, &self.cache) {
            PathClass::Cache
        } else if self.under(path, &self.home) {
            PathClass::Home
        } else if self.under_list(path, &["/proc", "/sys", "/dev"]) {
            PathClass::Pseudo
        } else {
            PathClass::System
        }
    }

    /// Package-manager / VCS configuration that decides where code is fetched from.
    pub fn is_package_config(&self, path: &str) -> bool {
        self.under_any(path, &self.package_config)
    }

    /// Why writing `path` makes something run later without the user asking, if it does.
    pub fn persistence_reason(&self, path: &str, class: PathClass) -> Option<&'static str> {
        let lower = path.to_lowercase();
        let file = lower.rsplit('/').next().unwrap_or("");
        let outside = !self.in_workspace(path) && !self.in_temp(path);
        match class {
            PathClass::ShellStartup => return Some("shell startup file"),
            PathClass::Scheduler => return Some("scheduler or service folder"),
            _ => {}
        }
        if let Some(i) = lower.find("/.git/hooks/") {
            let hook = &lower[i + "/.git/hooks/".len()..];
            if !hook.is_empty() && !hook.ends_with(".sample") {
                return Some("git hook");
            }
        }
        if lower.contains("/.config/git/hooks/") || lower.contains("/.githooks/") {
            return Some("git hook");
        }
        if outside
            && (file.ends_with(".pth") || file == "sitecustomize.py" || file == "usercustomize.py")
        {
            return Some("python startup hook (.pth / sitecustomize)");
        }
        if let Some((_, why)) = self.ssh_persist.iter().find(|(p, _)| self.under(path, p)) {
            return Some(why);
        }
        if class == PathClass::AgentSettings
            && (lower.contains("/hooks/") || lower.contains("/hooks.json"))
        {
            return Some("agent hook");
        }
        None
    }
}

#[cfg(test)]
#[path = "paths_tests.rs"]
mod tests;
