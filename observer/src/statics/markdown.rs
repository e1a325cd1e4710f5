//! Splitting Markdown into prose and code, and reading shell command lines, for the
//! categoriser. Deliberately simple: a static scanner's view, not a shell parser.

/// A piece of code found in Markdown (or a whole code file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    /// Fence info word (`bash`, `python`, …), empty when unlabelled; `inline` for a code span.
    pub lang: String,
    pub text: String,
    /// 1-based line of the snippet's first line in its file.
    pub line: usize,
}

/// Fenced code blocks and inline code spans of a Markdown text.
pub fn code_snippets(md: &str) -> Vec<Snippet> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize, Snippet)> = None;
    for (i, line) in md.lines().enumerate() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        if let Some((ch, n, snip)) = &mut fence {
            let run = t.chars().take_while(|c| c == ch).count();
            if indent <= 3 && run >= *n && t[run * ch.len_utf8()..].trim().is_empty() {
                if let Some((_, _, s)) = fence.take() {
                    out.push(s);
                }
            } else {
                snip.text.push_str(line);
                snip.text.push('\n');
            }
            continue;
        }
        let ch = t.chars().next().unwrap_or(' ');
        if indent <= 3 && (ch == '`' || ch == '~') {
            let run = t.chars().take_while(|&c| c == ch).count();
            if run >= 3 {
                let info = t[run..].trim();
                let lang = info
                    .split(|c: char| c.is_whitespace() || c == '{' || c == ',')
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase();
                fence = Some((
                    ch,
                    run,
                    Snippet {
                        lang,
                        text: String::new(),
                        line: i + 2,
                    },
                ));
                continue;
            }
        }
        for span in inline_spans(line) {
            out.push(Snippet {
                lang: "inline".into(),
                text: span.to_string(),
                line: i + 1,
            });
        }
    }
    if let Some((_, _, s)) = fence {
        out.push(s); // unclosed fence: the rest of the file is code
    }
    out
}

/// Contents of `` `code` `` and ``` ``code`` ``` spans on one line.
fn inline_spans(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'`' {
            i += 1;
            continue;
        }
        let n = b[i..].iter().take_while(|&&c| c == b'`').count();
        let start = i + n;
        let mut j = start;
        let mut found = None;
        while j < b.len() {
            if b[j] == b'`' {
                let m = b[j..].iter().take_while(|&&c| c == b'`').count();
                if m == n {
                    found = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match found {
            Some(end) => {
                out.push(line[start..end].trim());
                i = end + n;
            }
            None => i = start,
        }
    }
    out
}

/// Fence languages whose lines are shell commands.
pub fn is_shell_lang(lang: &str) -> bool {
    matches!(
        lang,
        "bash" | "sh" | "shell" | "zsh" | "console" | "terminal" | "shell-session" | "ksh" | "fish"
    )
}

/// Shell words that start no program.
const BUILTINS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "in", "function", "return", "exit", "echo", "printf", "set", "unset", "export", "local",
    "read", "cd", "pwd", "shift", "true", "false", "test", "[", "[[", "]]", "]", ":", "source",
    ".", "declare", "typeset", "readonly", "trap", "wait", "break", "continue", "let", "{", "}",
    "(", ")", ";;", "select", "alias", "unalias", "umask", "getopts", "type", "hash", "shopt",
    "pushd", "popd", "dirs", "!", "time",
];

/// Common programs: in inline code and unlabelled blocks only these count as commands, since
/// a span like `config.json` or `name` is not an instruction to run anything.
const KNOWN_COMMANDS: &[&str] = &[
    "git",
    "gh",
    "npm",
    "npx",
    "yarn",
    "pnpm",
    "pip",
    "pip3",
    "pipx",
    "uv",
    "uvx",
    "poetry",
    "make",
    "cmake",
    "docker",
    "podman",
    "kubectl",
    "helm",
    "curl",
    "wget",
    "ssh",
    "scp",
    "rsync",
    "nc",
    "ncat",
    "socat",
    "telnet",
    "apt",
    "apt-get",
    "brew",
    "sudo",
    "chmod",
    "chown",
    "rm",
    "mv",
    "cp",
    "ln",
    "tar",
    "unzip",
    "zip",
    "gzip",
    "openssl",
    "aws",
    "gcloud",
    "az",
    "terraform",
    "cargo",
    "rustc",
    "go",
    "java",
    "javac",
    "gcc",
    "g++",
    "clang",
    "ffmpeg",
    "convert",
    "magick",
    "pandoc",
    "jq",
    "yq",
    "sed",
    "awk",
    "grep",
    "rg",
    "find",
    "xargs",
    "crontab",
    "systemctl",
    "launchctl",
    "osascript",
    "security",
    "base64",
    "dd",
    "sh",
    "bash",
    "zsh",
    "python",
    "python3",
    "node",
    "deno",
    "bun",
    "ruby",
    "perl",
    "php",
    "cat",
    "ls",
    "mkdir",
    "touch",
    "head",
    "tail",
    "sort",
    "tee",
    "env",
    "printenv",
    "kill",
    "pkill",
    "nohup",
    "screen",
    "tmux",
    "open",
    "xdg-open",
    "pdftotext",
    "qpdf",
    "libreoffice",
    "soffice",
    "sqlite3",
    "psql",
    "mysql",
    "redis-cli",
    "eval",
    "exec",
    "source",
    "dig",
    "nslookup",
    "ping",
    "traceroute",
    "whoami",
    "id",
    "uname",
    "hostname",
    "ps",
    "lsof",
    "netstat",
    "ss",
    "ifconfig",
    "ip",
    "defaults",
    "pbcopy",
    "pbpaste",
    "powershell",
    "pwsh",
    "certutil",
];

const INTERPRETERS: &[&str] = &[
    "python", "python3", "py", "node", "bash", "sh", "zsh", "ruby", "perl", "deno", "bun", "uv",
    "tsx", "ts-node",
];

/// Options after which the next word is code, not a script path.
const CODE_FLAGS: &[&str] = &["-c", "-e", "-m", "--eval", "-p", "--print", "-r"];

/// Does this one shell line start a program that counts as `execution`? Returns the program.
///
/// `bundled_ok`: an interpreter running one of the skill's own scripts (`python3
/// scripts/x.py`, `./scripts/run.sh`, `{baseDir}/scripts/a.js`) does not count — that is the
/// agent's step, not execution (DESIGN.md). True for instructions; false inside a shell script,
/// where every child program counts. `known_only`: only programs from the known list count.
pub fn line_runs_program(line: &str, bundled_ok: bool, known_only: bool) -> Option<String> {
    let t = line.trim();
    let t = t
        .strip_prefix("$ ")
        .or_else(|| t.strip_prefix("% "))
        .unwrap_or(t);
    if t.is_empty() || t.starts_with('#') {
        return None;
    }
    let mut segments: Vec<String> = t
        .split(['|', ';', '&'])
        .map(|s| s.trim().to_string())
        .collect();
    // Command substitutions run programs too.
    for sub in t.split("$(").skip(1).chain(t.split('`').skip(1).step_by(2)) {
        segments.push(sub.trim_end_matches(')').to_string());
    }
    for seg in segments {
        let words: Vec<&str> = seg
            .split_whitespace()
            .map(|w| w.trim_matches(|c| c == '"' || c == '\'' || c == '(' || c == '{'))
            .collect();
        let mut k = 0;
        while k < words.len()
            && (is_assignment(words[k])
                || matches!(
                    words[k].rsplit('/').next().unwrap_or(""),
                    "sudo" | "env" | "nohup" | "command" | "exec" | "time" | "doas"
                ))
        {
            k += 1;
        }
        let Some(&cmd) = words.get(k) else { continue };
        if cmd.is_empty()
            || BUILTINS.contains(&cmd)
            || cmd.ends_with(')')
            || cmd.contains("()")
            || cmd.starts_with('-')
            || cmd.starts_with('<')
            || cmd.starts_with('>')
        {
            continue;
        }
        if bundled_ok && runs_bundled_script(cmd, &words[k + 1..]) {
            continue;
        }
        let base = cmd.rsplit('/').next().unwrap_or(cmd);
        if known_only && !KNOWN_COMMANDS.contains(&base) {
            continue;
        }
        return Some(base.to_string());
    }
    None
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !name.as_bytes()[0].is_ascii_digit()
        }
        None => false,
    }
}

/// A path that points into the skill itself.
fn is_bundled_path(p: &str) -> bool {
    let p = p.trim_matches(|c| c == '"' || c == '\'');
    let skill_root = [
        "{basedir}",
        "${skill_dir}",
        "$skill_dir",
        "${claude_plugin_root}",
    ];
    let lower = p.to_ascii_lowercase();
    lower.starts_with("scripts/")
        || lower.starts_with("./")
        || lower.contains("/scripts/")
        || lower.contains(".claude/skills/")
        || skill_root.iter().any(|r| lower.starts_with(r))
        || crate::bundle::interpreter_for_extension(&lower).is_some()
        || [".ts", ".mts"].iter().any(|e| lower.ends_with(e))
}

fn runs_bundled_script(cmd: &str, args: &[&str]) -> bool {
    let base = cmd.rsplit('/').next().unwrap_or(cmd);
    let interp =
        INTERPRETERS.contains(&base) || base.starts_with("python3.") || base.starts_with("python2");
    if !interp {
        return is_bundled_path(cmd) && cmd.contains('/');
    }
    for a in args {
        if matches!(*a, "run") && matches!(base, "uv" | "deno" | "bun") {
            continue;
        }
        if CODE_FLAGS.contains(a) {
            return false;
        }
        if a.starts_with('-') {
            continue;
        }
        return is_bundled_path(a);
    }
    false
}

/// Shell text → per logical line (continuations joined, heredoc bodies skipped) with its
/// 1-based line number.
pub fn shell_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    let mut heredoc: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(end) = &heredoc {
            if line.trim() == end {
                heredoc = None;
            }
            continue;
        }
        let (start, mut acc) = pending.take().unwrap_or((i + 1, String::new()));
        acc.push_str(line.trim_end_matches('\\'));
        if line.ends_with('\\') {
            acc.push(' ');
            pending = Some((start, acc));
            continue;
        }
        heredoc = heredoc_terminator(&acc);
        out.push((start, acc));
    }
    if let Some(p) = pending {
        out.push(p);
    }
    out
}

fn heredoc_terminator(line: &str) -> Option<String> {
    let i = line.find("<<")?;
    let rest = line[i + 2..].trim_start_matches(['-', '~']).trim_start();
    if rest.starts_with('<') {
        return None; // here-string `<<<`
    }
    let word: String = rest
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets() {
        let md = "Run `python3 scripts/a.py` then ``git push``.\n\n```bash\ncurl x\n```\n~~~python title=x\nimport os\n~~~\n```\nunclosed\n";
        let s = code_snippets(md);
        let got: Vec<(&str, &str, usize)> = s
            .iter()
            .map(|s| (s.lang.as_str(), s.text.as_str(), s.line))
            .collect();
        assert_eq!(
            got,
            [
                ("inline", "python3 scripts/a.py", 1),
                ("inline", "git push", 1),
                ("bash", "curl x\n", 4),
                ("python", "import os\n", 7),
                ("", "unclosed\n", 10),
            ]
        );
    }

    #[test]
    fn program_lines() {
        let run = |l: &str| line_runs_program(l, true, false);
        assert_eq!(run("git status"), Some("git".into()));
        assert_eq!(run("$ sudo curl -s x | sh"), Some("curl".into()));
        assert_eq!(run("FOO=1 /usr/bin/env node -e 'x'"), Some("node".into()));
        assert_eq!(run("python3 scripts/fill.py in.pdf"), None);
        assert_eq!(run("python3 -u scripts/fill.py"), None);
        assert_eq!(run("uv run scripts/x.py"), None);
        assert_eq!(run("bash {baseDir}/scripts/setup.sh"), None);
        assert_eq!(run("./scripts/run"), None);
        assert_eq!(run("python3 -c 'import os'"), Some("python3".into()));
        assert_eq!(run("python3 -m pip install x"), Some("python3".into()));
        assert_eq!(run("python3 scripts/a.py | jq ."), Some("jq".into()));
        assert_eq!(run("echo hi && cd /tmp"), None);
        assert_eq!(run("export X=$(whoami)"), Some("whoami".into()));
        assert_eq!(run("# comment"), None);
        assert_eq!(run("X=1"), None);
        assert_eq!(
            line_runs_program("python3 scripts/a.py", false, false),
            Some("python3".into())
        );
        assert_eq!(line_runs_program("config.json", true, true), None);
        assert_eq!(
            line_runs_program("npm install", true, true),
            Some("npm".into())
        );
    }

    #[test]
    fn logical_lines() {
        let l = shell_lines("curl \\\n  -d x\ncat <<EOF\nrm -rf /\nEOF\nls\n");
        assert_eq!(
            l,
            [
                (1, "curl    -d x".to_string()),
                (3, "cat <<EOF".to_string()),
                (6, "ls".to_string())
            ]
        );
    }
}
