//! Turning text from the instructions into something the jail can run: which interpreter a
//! fenced block needs, console prompts, placeholders for the skill's folder
//! (`{baseDir}`, `${CLAUDE_SKILL_DIR}`, `~/.claude/skills/<name>`), paths into the bundle
//! (an agent runs `python3 scripts/x.py` against the installed skill, not the workspace), and
//! documentation placeholders (`<input.pdf>`, `path/to/file`) replaced by sample inputs.

use crate::bundle::SkillUnit;
use crate::statics::line_runs_program;
use regex::Regex;
use std::sync::LazyLock;

/// How a fenced block is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner {
    Shell,
    Python,
    Node,
    NodeModule,
    Ruby,
    Perl,
}

impl Runner {
    pub fn argv(self, code: &str) -> Vec<String> {
        let head: &[&str] = match self {
            Runner::Shell => &["bash", "-c"],
            Runner::Python => &["python3", "-c"],
            Runner::Node => &["node", "-e"],
            Runner::NodeModule => &["node", "--input-type=module", "-e"],
            Runner::Ruby => &["ruby", "-e"],
            Runner::Perl => &["perl", "-e"],
        };
        let mut v: Vec<String> = head.iter().map(|s| s.to_string()).collect();
        v.push(code.to_string());
        v
    }
}

const SHELL_LANGS: &[&str] = &[
    "bash",
    "sh",
    "shell",
    "zsh",
    "console",
    "terminal",
    "shell-session",
    "shellsession",
    "sh-session",
    "ksh",
    "fish",
    "dash",
    "ash",
    "bash-session",
];
/// Languages whose blocks are real code we cannot run in a Linux image.
const UNRUNNABLE: &[&str] = &[
    "powershell",
    "ps1",
    "ps",
    "pwsh",
    "bat",
    "batch",
    "cmd",
    "applescript",
    "osascript",
    "typescript",
    "ts",
    "tsx",
    "go",
    "golang",
    "rust",
    "rs",
    "c",
    "cpp",
    "c++",
    "java",
    "kotlin",
    "swift",
    "csharp",
    "cs",
    "php",
    "lua",
    "dockerfile",
    "vbscript",
    "vb",
];

/// What a fenced block's language means: `Ok(Some(runner))`, `Ok(None)` for data or prose
/// (JSON, YAML, output…), `Err(reason)` for code we cannot run.
pub fn runner_for(lang: &str, text: &str) -> Result<Option<Runner>, String> {
    let l = lang.to_ascii_lowercase();
    if SHELL_LANGS.contains(&l.as_str()) {
        return Ok(Some(Runner::Shell));
    }
    match l.as_str() {
        "python" | "py" | "python3" | "pycon" | "ipython" | "py3" => Ok(Some(Runner::Python)),
        "node" | "js" | "javascript" | "mjs" | "cjs" | "nodejs" => Ok(Some(if is_esm(text) {
            Runner::NodeModule
        } else {
            Runner::Node
        })),
        "ruby" | "rb" => Ok(Some(Runner::Ruby)),
        "perl" | "pl" => Ok(Some(Runner::Perl)),
        "" => Ok(looks_like_shell(text).then_some(Runner::Shell)),
        l if UNRUNNABLE.contains(&l) => Err(format!("no `{l}` interpreter in a Linux image")),
        _ => Ok(None),
    }
}

fn is_esm(text: &str) -> bool {
    text.lines().any(|l| {
        let t = l.trim_start();
        (t.starts_with("import ") && (t.contains(" from ") || t.contains('\'') || t.contains('"')))
            || t.starts_with("export ")
    })
}

/// An unlabelled block is shell when one of its lines starts a known program, a prompt or a
/// path.
fn looks_like_shell(text: &str) -> bool {
    text.lines().any(|l| {
        let t = l.trim_start();
        t.starts_with("$ ")
            || t.starts_with("./")
            || (line_runs_program(t, false, true).is_some()
                && t.split_whitespace().next().is_some_and(|w| {
                    w.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_./".contains(c))
                }))
    })
}

/// Code of a block as it is run: console prompts removed (lines without a prompt are output
/// when any line has one), Python `>>>` prompts likewise.
pub fn strip_prompts(text: &str, runner: Runner) -> String {
    let prompts: &[&str] = match runner {
        Runner::Shell => &["$ ", "% "],
        Runner::Python => &[">>> ", "... "],
        _ => return text.to_string(),
    };
    let has_prompt = text
        .lines()
        .any(|l| prompts.iter().any(|p| l.trim_start().starts_with(p)) || l.trim() == "$");
    if !has_prompt {
        return text.to_string();
    }
    let mut out = String::new();
    let mut continued = false;
    for l in text.lines() {
        let t = l.trim_start();
        let stripped = prompts.iter().find_map(|p| t.strip_prefix(p));
        if let Some(cmd) = stripped {
            out.push_str(cmd);
            out.push('\n');
            continued = cmd.trim_end().ends_with('\\');
        } else if continued {
            out.push_str(l);
            out.push('\n');
            continued = l.trim_end().ends_with('\\');
        }
    }
    out
}

/// Chars of a path token.
fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./@+-".contains(c)
}

fn token_start(prev: Option<char>) -> bool {
    prev.is_none_or(|p| p.is_whitespace() || "'\"=(;|&<>`,[{:".contains(p))
}

/// Rewrites placeholders and bundle paths for one skill installed at `skill_dir`.
pub struct Resolver<'a> {
    unit: &'a SkillUnit,
    /// The bundle's scripts, for finding them in text.
    pub index: super::scripts::PathIndex,
    skill_dir: &'a str,
    samples: &'a [String],
    root: Regex,
}

impl<'a> Resolver<'a> {
    pub fn new(unit: &'a SkillUnit, skill_dir: &'a str, samples: &'a [String]) -> Self {
        let mut names: Vec<String> = vec![unit.install_name.clone()];
        if !unit.name.contains('/') {
            names.push(unit.name.clone());
        }
        let names: Vec<String> = names.iter().map(|n| regex::escape(n)).collect();
        let root = format!(
            r#"(?i)\{{\{{\s*(?:base_?dir|skill_?dir|skill_?root|skill_?path)\s*\}}\}}|\{{(?:base_?dir|skill_?dir|skill_?root|skill_?path|skill_?folder)\}}|\$\{{?(?:CLAUDE_SKILL_DIR|SKILL_DIR|CLAUDE_PLUGIN_ROOT|SKILL_ROOT|BASE_DIR|SKILL_PATH|SKILL_HOME|SKILL_FOLDER)\b\}}?|<(?:skill[-_ ]?(?:dir|directory|root|path|folder)|base[-_ ]?dir)>|(?:~|\$HOME|\$\{{HOME\}}|/home/[^/\s'"`]+|/Users/[^/\s'"`]+|/root)/\.(?:claude|codex|agents|cursor|gemini)/skills/(?:{}|<[^>/\s]*>|\{{[^}}/\s]*\}}|skill-name|your-skill|SKILL_NAME)(?:/|\b)|/path/to/(?:the[-_])?(?:skill|skill[-_]dir|{})(?:/|\b)"#,
            names.join("|"),
            names.join("|")
        );
        // The pattern is built from escaped names; fall back to one that matches nothing.
        let root = crate::util::regex(&root)
            .unwrap_or_else(|_| crate::util::regex(r"[^\s\S]").expect("valid"));
        Resolver {
            unit,
            index: super::scripts::PathIndex::scripts(unit),
            skill_dir,
            samples,
            root,
        }
    }

    /// Every placeholder for the skill's folder replaced by `skill_dir`.
    pub fn placeholders(&self, text: &str) -> String {
        self.root
            .replace_all(text, |c: &regex::Captures| {
                let m = c.get(0).map_or("", |m| m.as_str());
                if m.ends_with('/') {
                    format!("{}/", self.skill_dir)
                } else {
                    self.skill_dir.to_string()
                }
            })
            .into_owned()
    }

    fn in_bundle(&self, rel: &str) -> bool {
        let rel = rel.trim_end_matches('/');
        if rel.is_empty() || rel.starts_with('.') && !rel.starts_with("./") && rel.len() < 3 {
            return false;
        }
        if self.samples.iter().any(|s| s == rel) {
            return false; // the workspace's own file of that name
        }
        let is_script = self.unit.scripts.iter().any(|s| s.path == rel);
        (self.unit.files.contains_key(rel) && (rel.contains('/') || is_script))
            || self.unit.dirs.contains(rel)
    }

    /// Relative paths into the bundle (`scripts/x.py`, `./run.sh`, `references/`) made absolute
    /// under `skill_dir`; anything else is left alone.
    pub fn bundle_paths(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut prev: Option<char> = None;
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if path_char(c) && token_start(prev) {
                let len = rest.find(|c: char| !path_char(c)).unwrap_or(rest.len());
                let tok = &rest[..len];
                let bare = tok.strip_prefix("./").unwrap_or(tok);
                let trimmed = bare.trim_end_matches(['.', ',']);
                if self.in_bundle(bare) {
                    out.push_str(&format!("{}/{}", self.skill_dir, bare));
                } else if trimmed != bare && self.in_bundle(trimmed) {
                    out.push_str(&format!("{}/{}", self.skill_dir, trimmed));
                    out.push_str(&bare[trimmed.len()..]);
                } else {
                    out.push_str(tok);
                }
                prev = tok.chars().last();
                rest = &rest[len..];
                continue;
            }
            out.push(c);
            prev = Some(c);
            rest = &rest[c.len_utf8()..];
        }
        out
    }

    /// Documentation placeholders (`<input.pdf>`, `{file}`, `path/to/data.json`) replaced by a
    /// sample input of the workspace that fits them.
    pub fn sample_placeholders(&self, text: &str) -> String {
        static PH: LazyLock<Regex> = LazyLock::new(|| {
            crate::util::regex(
                r"<[A-Za-z][A-Za-z0-9_.-]*(?: [A-Za-z0-9_.-]+)*>|(?:^|[^$\{A-Za-z0-9_])\{[a-z][a-z0-9_]*\}(?:[^}]|$)|/?path/to/[A-Za-z0-9_./-]+",
            )
            .expect("valid")
        });
        PH.replace_all(text, |c: &regex::Captures| {
            let m = c.get(0).map_or("", |m| m.as_str());
            // The brace form captured one char on each side: keep them.
            if let Some(open) = m.find('{') {
                if !m.starts_with('<') && !m.contains("path/to/") {
                    let close = m.rfind('}').unwrap_or(m.len() - 1);
                    return format!(
                        "{}{}{}",
                        &m[..open],
                        self.sample_for(&m[open..=close]),
                        &m[close + 1..]
                    );
                }
            }
            self.sample_for(m)
        })
        .into_owned()
    }

    /// The sample input best matching a placeholder or a script's text.
    pub fn sample_for(&self, hint: &str) -> String {
        let h = hint.to_ascii_lowercase();
        let pick = |ext: &[&str]| {
            self.samples
                .iter()
                .find(|s| ext.iter().any(|e| s.to_ascii_lowercase().ends_with(e)))
                .cloned()
        };
        let by_kind = if h.contains("json") {
            pick(&[".json"])
        } else if h.contains(".js")
            || h.contains(".ts")
            || h.contains("source")
            || h.contains("code")
        {
            pick(&[".js", ".ts", ".py"])
        } else if h.contains("dir")
            || h.contains("folder")
            || h.contains("project")
            || h.contains("repo")
        {
            Some(".".to_string())
        } else if h.contains(".md")
            || h.contains("readme")
            || h.contains("markdown")
            || h.contains("text")
            || h.contains("doc")
        {
            pick(&[".md", ".txt"])
        } else {
            None
        };
        by_kind
            .or_else(|| self.samples.first().cloned())
            .unwrap_or_else(|| ".".into())
    }

    /// Shell text as run: placeholders, bundle paths, sample placeholders.
    pub fn shell(&self, text: &str) -> String {
        self.sample_placeholders(&self.bundle_paths(&self.placeholders(text)))
    }

    /// Bundled scripts (relative paths) whose installed path occurs in `text`.
    pub fn scripts_in(&self, text: &str) -> Vec<String> {
        let prefix = format!("{}/", self.skill_dir);
        let mut out: Vec<String> = Vec::new();
        for m in self.index.find(text, "") {
            if text[..m.start].ends_with(&prefix) && !out.contains(&m.script) {
                out.push(m.script);
            }
        }
        out
    }
}

/// Split a shell command line into words, quotes removed, stopping at the first unquoted
/// operator (`|`, `;`, `&`, `<`, `>`, `(`, `)`, a `#` comment, a newline). Also says whether a
/// word needs a shell (expansions, globs, `~`).
pub fn shell_words(line: &str) -> (Vec<String>, bool) {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut needs_shell = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    cur.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                cur.push(n);
                            }
                        }
                        '$' | '`' => {
                            needs_shell = true;
                            cur.push(q);
                        }
                        _ => cur.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') | None => {}
                    Some(n) => cur.push(n),
                }
            }
            '|' | ';' | '&' | '<' | '>' | '(' | ')' | '\n' => break,
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                if matches!(c, '$' | '`' | '*' | '?' | '[' | '{') || (c == '~' && !in_word) {
                    needs_shell = true;
                }
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    (words, needs_shell)
}

/// Single-quote a word for `sh`.
pub fn sh_quote(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:@%+=,-".contains(c))
    {
        return w.to_string();
    }
    format!("'{}'", w.replace('\'', r"'\''"))
}

/// How strongly an inline span looks like a command, without any verb around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Look {
    /// Not a command (a file name, an option, a value).
    None,
    /// One word that could be a program (`pytest`, `make`).
    Weak,
    /// Shell operators, a known program with arguments, or a path to run.
    Strong,
}

const DATA_EXT: &[&str] = &[
    "json", "yaml", "yml", "md", "txt", "csv", "pdf", "docx", "xlsx", "pptx", "png", "jpg", "jpeg",
    "gif", "svg", "toml", "ini", "cfg", "conf", "env", "lock", "log", "html", "xml", "zip", "tar",
    "gz",
];

pub fn look(span: &str, index: &super::scripts::PathIndex) -> Look {
    let t = span.trim();
    let t = t.strip_prefix("$ ").unwrap_or(t);
    let Some(first) = t.split_whitespace().next() else {
        return Look::None;
    };
    if first.starts_with('-') || t.contains('\n') && t.lines().count() > 20 {
        return Look::None;
    }
    let multi = t.split_whitespace().nth(1).is_some();
    let pathish = first.starts_with("./")
        || first.starts_with('/')
        || first.starts_with("~/")
        || first.starts_with('{')
        || first.starts_with("${")
        || first.starts_with("$SKILL")
        || first.starts_with("$CLAUDE")
        || !index.find(first, "").is_empty();
    let ops = ["|", "&&", "||", ";", "$(", ">", "<("]
        .iter()
        .any(|o| t.contains(o));
    let known = line_runs_program(t, false, true).is_some();
    let commandish = first
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.+-/~${}=".contains(c))
        && first.chars().any(|c| c.is_ascii_alphabetic());
    let data_file = !multi
        && first
            .rsplit_once('.')
            .is_some_and(|(_, e)| DATA_EXT.contains(&e.to_ascii_lowercase().as_str()));
    if !commandish || data_file || first.contains("://") {
        return Look::None;
    }
    if (known && multi) || (pathish && !data_file) || (ops && (known || pathish || multi)) {
        return Look::Strong;
    }
    if first.contains('=') && !multi {
        return Look::None; // KEY=value
    }
    Look::Weak
}

/// A command written without backticks after a run verb: "run curl -s https://x | sh to set
/// up". The command is the rest of the line, cut at prose connectors and unbalanced quotes,
/// when it starts with a known program. Returns the byte offset where it starts, and the text.
pub fn unquoted_command(line: &str, index: &super::scripts::PathIndex) -> Option<(usize, String)> {
    static VERB: LazyLock<Regex> = LazyLock::new(|| {
        crate::util::regex(
            r"(?i)\b(?:run|execute|exec|type|paste|enter|invoke|launch)\b(?:\s+(?:the|this|these|following|command|commands|line|in\s+(?:your|a|the)\s+(?:terminal|shell)|in\s+bash|now|first|immediately|silently))*\s*:?\s+",
        )
        .expect("valid")
    });
    for m in VERB.find_iter(line) {
        let rest = &line[m.end()..];
        if rest.starts_with('`') {
            continue;
        }
        let cmd = cut_prose(rest);
        let first = cmd.split_whitespace().next()?;
        let lower_program = first
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_./~".contains(c));
        let script = !index.find(first, "").is_empty();
        if script
            || (lower_program
                && cmd.split_whitespace().nth(1).is_some()
                && line_runs_program(&cmd, false, true).is_some())
        {
            return Some((m.end(), cmd));
        }
    }
    None
}

/// Cut a command written in prose at the first prose connector, then at an unbalanced quote,
/// and drop a final full stop.
pub fn cut_prose(rest: &str) -> String {
    let mut end = rest.len();
    for c in [
        " to ",
        " so that ",
        " and then ",
        " which ",
        " \u{2014} ",
        " -- then",
        " before ",
        " after ",
        " once ",
        ". ",
        " then ",
        " unless ",
        " if ",
        " when ",
        " whenever ",
        " until ",
        " only ",
        " in order ",
        " for ",
    ] {
        if let Some(p) = rest.find(c) {
            end = end.min(p);
        }
    }
    let mut cmd = rest[..end].trim().to_string();
    for q in ['\'', '"'] {
        if cmd.matches(q).count() % 2 == 1 {
            if let Some(p) = cmd.rfind(q) {
                cmd.truncate(p);
            }
        }
    }
    cmd.trim().trim_end_matches('.').trim().to_string()
}

#[cfg(test)]
mod tests;
