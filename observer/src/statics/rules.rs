//! The built-in categoriser's rules (documented one by one in docs/statics.md).

use crate::model::Category;
use regex::{Captures, Regex};
use std::net::Ipv4Addr;
use std::sync::{LazyLock, OnceLock};

/// Where a rule looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everywhere, Markdown prose included: artifacts a scanner flags wherever they are
    /// (URLs, credential paths, persistence locations, secret variable names).
    All,
    /// Code only: code files, and code blocks and inline code in Markdown.
    Code,
}

pub struct Rule {
    pub id: &'static str,
    pub categories: &'static [Category],
    pub scope: Scope,
    /// The pattern as compiled (see [`crate::util::ascii_classes`]).
    pub pattern: String,
    /// Compiled on first use: most rules never match a given skill, and [`RULE_SET`] says which
    /// did (compiling all of them cost ~20 ms per run).
    re: OnceLock<Regex>,
    /// Extra check on a match the regex language cannot express (no look-around).
    pub keep: Option<fn(&Captures) -> bool>,
}

impl Rule {
    pub fn re(&self) -> &Regex {
        self.re.get_or_init(|| {
            Regex::new(&self.pattern).unwrap_or_else(|e| panic!("rule {}: {e}", self.id))
        })
    }
}

fn rule(
    id: &'static str,
    categories: &'static [Category],
    scope: Scope,
    pattern: &str,
    keep: Option<fn(&Captures) -> bool>,
) -> Rule {
    Rule {
        id,
        categories,
        scope,
        pattern: crate::util::ascii_classes(pattern),
        re: OnceLock::new(),
        keep,
    }
}

/// Hosts that appear in files without being contacted: XML/JSON schema namespaces, licence
/// texts, documentation placeholders and the local machine.
const INERT_HOSTS: &[&str] = &[
    "www.w3.org",
    "w3.org",
    "json-schema.org",
    "schemas.openxmlformats.org",
    "schemas.microsoft.com",
    "purl.org",
    "ns.adobe.com",
    "xmlns.com",
    "www.apache.org",
    "opensource.org",
    "creativecommons.org",
    "www.gnu.org",
    "spdx.org",
    "example.com",
    "example.org",
    "example.net",
    "localhost",
    "127.0.0.1",
    "0.0.0.0",
    "::1",
];

fn url_is_live(c: &Captures) -> bool {
    let Some(host) = c
        .get(1)
        .and_then(|m| super::hosts::normalise_host(m.as_str()))
    else {
        return false;
    };
    let h = host.as_str();
    !(INERT_HOSTS.contains(&h)
        || h.ends_with(".example.com")
        || h.ends_with(".example")
        || h.ends_with(".localhost")
        || h.ends_with(".test")
        || h.ends_with(".invalid")
        || h.starts_with("127."))
}

fn ip_is_public(c: &Captures) -> bool {
    let Some(ip) = c.get(1).and_then(|m| m.as_str().parse::<Ipv4Addr>().ok()) else {
        return false;
    };
    // Link-local is kept: 169.254.169.254 is the cloud metadata service.
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.octets()[0] >= 224 // multicast, reserved, netmasks like 255.255.255.0
        || ip.octets()[0] == 0)
}

/// All rule patterns in one set: one pass says which rules can match a region at all.
pub static RULE_SET: LazyLock<regex::RegexSet> = LazyLock::new(|| {
    regex::RegexSet::new(RULES.iter().map(|r| r.pattern.as_str())).expect("rules compile")
});

pub static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    use Category::*;
    use Scope::*;
    vec![
        // ---- execution ----
        rule(
            "py-subprocess",
            &[Execution],
            Code,
            r"\bsubprocess\b|\bos\s*\.\s*(?:system|popen|exec[lv]p?e?|spawn[lv]p?e?|posix_spawnp?)\b|\bpty\s*\.\s*spawn\b|\bcommands\s*\.\s*getoutput\b|\basyncio\s*\.\s*create_subprocess_(?:exec|shell)\b",
            None,
        ),
        rule(
            "dynamic-eval",
            &[Execution],
            Code,
            // `re.exec(` / `regex.exec(` (JavaScript's RegExp) is not code execution.
            r"(?:^|[^.\w$])(?:eval|exec|execfile)\s*\(|\bnew\s+Function\s*\(|\bvm\s*\.\s*run\w*|\bcompile\s*\([^)]*['\x22]exec['\x22]",
            None,
        ),
        rule(
            "js-child-process",
            &[Execution],
            Code,
            r"\bchild_process\b|\b(?:execSync|execFileSync|spawnSync|execFile)\b|\bBun\s*\.\s*spawn|\bDeno\s*\.\s*(?:run|Command)\b|\bshelljs\b|\bexeca\b",
            None,
        ),
        rule(
            "ruby-perl-exec",
            &[Execution],
            Code,
            r"\b(?:IO\s*\.\s*popen|Open3|Kernel\s*\.\s*(?:system|exec|spawn)|Process\s*\.\s*spawn)\b|%x[\{\(\[]|\bqx\s*[\{\(/]|\bsystem\s*\(|\bsystem\s+['\x22]|\bInvoke-Expression\b|\bStart-Process\b",
            None,
        ),
        rule(
            "pipe-to-shell",
            &[Execution],
            Code,
            r"\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b|\b(?:bash|sh|zsh|dash)\s+-c\b|\bxargs\s",
            None,
        ),
        rule(
            "package-install",
            &[Execution, Network],
            Code,
            r"\b(?:pip3?|pipx|npm|yarn|pnpm|gem|cargo|go|apt(?:-get)?|brew|uv\s+pip)\s+(?:install|add|i|get)\b|\bnpx\s+\w",
            None,
        ),
        // ---- network ----
        rule(
            "url",
            &[Network],
            All,
            r"(?i)\b(?:https?|wss?|ftps?|sftp)://([^\s/\x22'<>()\[\]{}`,;\\]+)",
            Some(url_is_live),
        ),
        rule(
            "raw-ip",
            &[Network],
            All,
            r"(?:^|[^\w.])((?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3})(?:[^\w.]|$)",
            Some(ip_is_public),
        ),
        rule(
            "net-tool",
            &[Network],
            Code,
            r"(?:^|[\s;&|(`$\x22'])(?:curl|wget|ncat|netcat|socat|telnet|nslookup|sftp|scp|aria2c)\s|\bdig\s+[^\n]*\.[a-z]{2,}\b|\b(?:ftp|host)\s+(?:-\S+\s+)*[\w-]+\.[\w.-]*[a-z]|\bnc\s+[^\n|;&]*\b\d{2,5}\b|\bssh\s+(?:-\w+\s+\S+\s+)*[\w.-]*@[\w.-]+|\brsync\s[^\n]*\S+:\S|\bInvoke-(?:WebRequest|RestMethod)\b",
            None,
        ),
        rule("dev-tcp", &[Network], Code, r"/dev/(?:tcp|udp)/", None),
        rule(
            "py-net",
            &[Network],
            Code,
            r"\b(?:import|from)\s+(?:requests|urllib3?|httpx|aiohttp|http\.client|socket|ftplib|smtplib|telnetlib|paramiko|websockets?|pycurl|dns|grpc|boto3|botocore|httplib2)\b|\burllib\s*\.\s*request\b|\bsocket\s*\.\s*(?:socket|create_connection|getaddrinfo|gethostbyname)\b|\brequests\s*\.\s*(?:get|post|put|patch|delete|head|request|Session)\b",
            None,
        ),
        rule(
            "js-net",
            &[Network],
            Code,
            r#"\bfetch\s*\(|\bXMLHttpRequest\b|\bWebSocket\b|\baxios\b|\bnode-fetch\b|\bundici\b|require\(\s*['"](?:node:)?(?:https?|net|dgram|dns|tls|http2)['"]\s*\)|from\s+['"](?:node:)?(?:https?|net|dgram|dns|tls|http2)['"]|\bnet\s*\.\s*(?:connect|createConnection|Socket)\b|\bdgram\s*\.\s*createSocket\b"#,
            None,
        ),
        rule(
            "ruby-perl-net",
            &[Network],
            Code,
            r"\bNet::HTTP\b|\bopen-uri\b|\b(?:TCP|UDP)Socket\b|\bLWP::|\bHTTP::Tiny\b|\bIO::Socket\b|\bNet::FTP\b",
            None,
        ),
        rule(
            "git-remote",
            &[Network],
            Code,
            r"\bgit\s+(?:clone|push|pull|fetch|ls-remote)\b|\bdocker\s+(?:pull|push)\b",
            None,
        ),
        // ---- credential ----
        rule(
            "credential-path",
            &[Credential],
            All,
            r"~/\.ssh\b|\$HOME/\.ssh\b|\.ssh/(?:id_\w+|config)\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/(?:credentials|config)\b|\.config/gcloud\b|application_default_credentials\.json|\.azure/|\.kube/config\b|\.docker/config\.json|\.npmrc\b|\.pypirc\b|\.netrc\b|\.git-credentials\b|\.config/gh/hosts\.yml|\.gnupg\b|\.password-store\b|\bwallet\.dat\b|\.pgpass\b|\.my\.cnf\b|/etc/shadow\b|\.claude\.json\b|\bLogin Data\b|/Cookies\b|Cookies\.binarycookies|\bcookies\.sqlite\b|\blogins\.json\b|\bkey4\.db\b|\bLocal State\b|\.vault-token\b|\.terraformrc\b|credentials\.tfrc\.json",
            None,
        ),
        rule(
            "dotenv",
            &[Credential],
            All,
            r"(?:^|[\s'\x22`/=(,\[])\.env(?:\.(?:local|production|prod|development|dev|test|staging))?(?:$|[\s'\x22`),:;\]])",
            None,
        ),
        rule(
            "keychain",
            &[Credential],
            All,
            r"(?i)\bkeychain\b|\bsecurity\s+(?:find|dump)-[\w-]+|\bfind-(?:generic|internet)-password\b|\bkeyring\b|\bsecret-tool\b|\bkwallet|\bgnome-keyring|\blibsecret\b|\bcmdkey\b",
            None,
        ),
        rule(
            "secret-env",
            &[Credential],
            All,
            r"\b(?:[A-Z0-9]+_)*(?:TOKEN|SECRET|SECRET_KEY|API_KEY|APIKEY|ACCESS_KEY|ACCESS_KEY_ID|PASSWORD|PASSWD|PRIVATE_KEY|CREDENTIALS?|AUTH_TOKEN|SESSION_KEY|CLIENT_SECRET)S?\b",
            None,
        ),
        rule(
            "env-dump",
            &[Credential],
            Code,
            r"\bos\s*\.\s*environ\s*\.\s*(?:items|keys|values)\s*\(|\b(?:dict|json\s*\.\s*dumps|str|repr|list|print|sorted)\s*\(\s*(?:dict\s*\(\s*)?os\s*\.\s*environ\s*\)|\{\s*\*\*\s*os\s*\.\s*environ\s*\}|\bObject\s*\.\s*(?:keys|entries|values)\s*\(\s*process\s*\.\s*env\s*\)|\bJSON\s*\.\s*stringify\s*\(\s*process\s*\.\s*env\b|\bprintenv\b|(?:^|[;&|(]\s*|\$\(\s*)env\s*(?:$|[|>;)])|/proc/(?:self|\d+|\*|\$\w+|\$\{\w+\})/environ\b|\bENV\s*\.\s*to_h\b|\bkeys\s+%ENV\b",
            None,
        ),
        rule(
            "credential-cli",
            &[Credential],
            All,
            r"\bgh\s+auth\s+token\b|\baws\s+configure\s+(?:get|export-credentials)\b|\bgit\s+credential\s+fill\b|\bgcloud\s+auth\s+print-(?:access|identity)-token\b|\baz\s+account\s+get-access-token\b|\bkubectl\s+config\s+view\s+--raw\b|\bdocker-credential-\w+",
            None,
        ),
        rule(
            // The clipboard holds pasted passwords and tokens (the jail plants one there), so a
            // skill that reads it declares credential behaviour.
            "clipboard-read",
            &[Credential],
            Code,
            r"\bpbpaste\b|\bxclip\b[^\n|;]*\s-o\b|\bxclip\b[^\n|;]*-selection\s+\w+\s+-o\b|\bxsel\b[^\n|;]*\s-(?:o|-output)\b|\bwl-paste\b|\bGet-Clipboard\b|\bpyperclip\s*\.\s*paste\b|\bclipboard\s*\.\s*read(?:Text)?\s*\(|\bNSPasteboard\b|\bclipboard_get\b",
            None,
        ),
        rule(
            "cloud-metadata",
            &[Credential, Network],
            All,
            r"169\.254\.169\.254|\bmetadata\.google\.internal\b|\bfd00:ec2::254\b|100\.100\.100\.200",
            None,
        ),
        // ---- writes ----
        rule(
            "shell-rc",
            &[Writes],
            All,
            r"(?:^|[\s'\x22/~=`])\.(?:bashrc|bash_profile|bash_login|bash_logout|zshrc|zshenv|zprofile|zlogin|profile|cshrc|tcshrc|kshrc|inputrc)\b|\.config/fish/config\.fish|/etc/(?:profile|bash\.bashrc|environment|zsh/zshrc)\b",
            None,
        ),
        rule(
            "scheduler",
            &[Writes],
            All,
            r"\bcrontab\b|/etc/cron|/var/spool/cron|\bsystemctl\s+(?:--user\s+)?(?:enable|start|daemon-reload|link)\b|\.config/systemd/|/etc/systemd/|\bLaunchAgents\b|\bLaunchDaemons\b|\blaunchctl\b|\.config/autostart\b|\bschtasks\b|\bat\s+now\b",
            None,
        ),
        rule(
            "persistence-hook",
            &[Writes],
            All,
            r"\bsitecustomize\b|\busercustomize\b|site-packages[^\s'\x22]*\.pth\b|\.git/hooks/|\bcore\.hooksPath\b|\bauthorized_keys\b|/etc/ld\.so\.preload\b|\bLD_PRELOAD\b",
            None,
        ),
        rule(
            "agent-settings",
            &[Writes],
            All,
            r"\.claude/(?:settings(?:\.local)?\.json|hooks|commands|agents|skills)\b|\.codex/|\.cursor/|\.config/(?:claude|codex)\b|\.gemini/",
            None,
        ),
        rule(
            "chmod",
            &[Writes],
            Code,
            r"\b(?:chmod|chown|chattr)\b|\.chmod\s*\(|\bfs\s*\.\s*chmod(?:Sync)?\b",
            None,
        ),
        rule(
            "destructive-delete",
            &[Writes],
            Code,
            r#"\brm\s+(?:-[a-zA-Z-]+\s+)*["']?(?:~|\$HOME|\$\{HOME\}|/(?:\s|$|\*)|/(?:home|Users|etc|usr|var|opt|root|Library)\b|\.\./)|\bshutil\s*\.\s*rmtree\s*\([^)\n]*(?:expanduser|home\(\)|~|HOME)|\bfs\s*\.\s*rm(?:Sync)?\s*\([^)\n]*(?:homedir|HOME|~)|\bfind\s+(?:~|\$HOME|/)\S*\s[^\n]*-delete\b|\bshred\b"#,
            None,
        ),
        rule(
            "home-or-system-write",
            &[Writes],
            Code,
            r#"(?:>>?|\btee\s+(?:-a\s+)?)\s*["']?(?:~|\$HOME|\$\{HOME\})/|(?:>>?|\btee\s+(?:-a\s+)?)\s*["']?/(?:etc|usr|opt|var|Library|System|root|home)/|\b(?:cp|mv|install|ln)\s+[^\n;|&]*\s["']?(?:~|\$HOME|\$\{HOME\}|/usr/|/etc/|/opt/|/Library/)|(?:expanduser|Path\s*\.\s*home\s*\(\)|homedir\s*\(\)|process\s*\.\s*env\s*\.\s*HOME|os\s*\.\s*environ\s*\[\s*['"]HOME)[^\n]*(?:write_text|write_bytes|\.touch\(|\.mkdir\(|['"][wa]b?\+?['"]|writeFile|appendFile|copyFile|mkdirSync|renameSync|\.rename\(|\.replace\()|\b(?:writeFileSync|appendFileSync|writeFile|appendFile|copyFileSync|mkdirSync)\s*\([^\n]*(?:homedir|HOME|~/)|/usr/local/bin\b|~/\.local/bin\b|\$HOME/\.local/bin\b|~/bin/"#,
            None,
        ),
        rule(
            "package-config",
            &[Writes],
            Code,
            r"\bpip\.conf\b|\bpip3?\s+config\s+set\b|\bnpm\s+config\s+set\b|\byarn\s+config\s+set\b|\.pydistutils\.cfg\b|\.gemrc\b|\.yarnrc\b|\bgit\s+config\s+--global\b",
            None,
        ),
    ]
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_compiles_and_ids_are_unique() {
        let mut ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n);
        for r in RULES.iter() {
            let _ = r.re();
        }
        assert_eq!(RULE_SET.len(), n);
    }
}
