//! The built-in categoriser: which categories the text of a skill indicates, with evidence.

use super::markdown::{code_snippets, is_shell_lang, line_runs_program, shell_lines};
use super::rules::{Scope, RULES, RULE_SET};
use crate::bundle::parse_shebang;
use crate::model::Category;
use serde::Serialize;
use std::collections::BTreeSet;

/// One piece of evidence: a rule matched a line of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub category: Category,
    pub rule: &'static str,
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// The matched line, trimmed and shortened.
    pub excerpt: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Instructions and prose: artifact rules on everything, code rules on code blocks/spans.
    Markdown,
    /// A shell script: every program it starts is execution.
    Shell,
    /// Any other text: all rules on all of it.
    Code,
    Skip,
}

fn kind_of(path: &str, text: &str) -> Kind {
    let file = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    if ["license", "licence", "copying", "notice"]
        .iter()
        .any(|p| file.starts_with(p))
    {
        return Kind::Skip; // licence texts are full of URLs and words, never behaviour
    }
    let ext = file.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    if matches!(ext, "md" | "markdown" | "mdx" | "txt" | "rst") {
        return Kind::Markdown;
    }
    if matches!(ext, "sh" | "bash" | "zsh" | "ksh") {
        return Kind::Shell;
    }
    if let Some(i) = parse_shebang(text.as_bytes()) {
        let base = i.program.rsplit('/').next().unwrap_or(&i.program);
        if matches!(base, "sh" | "bash" | "zsh" | "dash" | "ksh" | "ash") {
            return Kind::Shell;
        }
    }
    Kind::Code
}

/// Categorise a set of text files (relative path, content). Binary files should not be passed.
/// At most one finding per rule, category and file (the first match).
pub fn categorise_texts<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Finding> {
    let mut out = Vec::new();
    for (path, text) in files {
        let kind = kind_of(path, text);
        if kind == Kind::Skip {
            continue;
        }
        let mut found: BTreeSet<(&'static str, Category)> = BTreeSet::new();
        let mut push = |out: &mut Vec<Finding>, rule, category, line: usize, excerpt: &str| {
            if found.insert((rule, category)) {
                out.push(Finding {
                    category,
                    rule,
                    file: path.to_string(),
                    line,
                    excerpt: shorten(excerpt),
                });
            }
        };
        // Regex rules: over the whole text, or over the code snippets only (joined, so each rule
        // makes one pass however many snippets there are).
        let snippets = if kind == Kind::Markdown {
            code_snippets(text)
        } else {
            Vec::new()
        };
        let whole = Region::whole(text);
        let code = Region::joined(&snippets);
        let hits_whole = RULE_SET.matches(&whole.text);
        let hits_code = RULE_SET.matches(&code.text);
        for (i, rule) in RULES.iter().enumerate() {
            let (region, hits) = match (kind, rule.scope) {
                (Kind::Markdown, Scope::Code) => (&code, &hits_code),
                _ => (&whole, &hits_whole),
            };
            if !hits.matched(i) {
                continue;
            }
            for caps in rule.re().captures_iter(&region.text) {
                if rule.keep.is_some_and(|keep| !keep(&caps)) {
                    continue;
                }
                let Some(m) = caps.get(0) else { continue };
                // Patterns may start on the separator before a word (a newline).
                let lead = m.as_str().len() - m.as_str().trim_start().len();
                let (line, excerpt) = region.locate(m.start() + lead);
                for &c in rule.categories {
                    push(&mut out, rule.id, c, line, excerpt);
                }
                break;
            }
        }
        // Programs started by commands.
        match kind {
            Kind::Shell => {
                for (line, l) in shell_lines(text) {
                    if line == 1 && l.starts_with("#!") {
                        continue;
                    }
                    if line_runs_program(&l, false, false).is_some() {
                        push(&mut out, "shell-command", Category::Execution, line, &l);
                        break;
                    }
                }
            }
            Kind::Markdown => {
                'snips: for s in &snippets {
                    let (bundled_ok, known_only) = match s.lang.as_str() {
                        l if is_shell_lang(l) => (true, false),
                        "" | "inline" => (true, true),
                        _ => continue,
                    };
                    for (line, l) in shell_lines(&s.text) {
                        // `console` blocks: only prompt lines are commands.
                        if s.lang == "console" && !(l.starts_with("$ ") || l.starts_with("% ")) {
                            continue;
                        }
                        if line_runs_program(&l, bundled_ok, known_only).is_some() {
                            let at = s.line + line - 1;
                            push(&mut out, "instructed-command", Category::Execution, at, &l);
                            break 'snips;
                        }
                    }
                }
            }
            Kind::Code | Kind::Skip => {}
        }
    }
    out
}

/// Text searched by the rules, with the file line where each of its pieces starts.
struct Region<'a> {
    text: std::borrow::Cow<'a, str>,
    /// (offset in `text`, 1-based file line), ascending.
    starts: Vec<(usize, usize)>,
}

impl<'a> Region<'a> {
    fn whole(text: &'a str) -> Self {
        Region {
            text: text.into(),
            starts: vec![(0, 1)],
        }
    }

    fn joined(snippets: &[super::markdown::Snippet]) -> Self {
        let mut text = String::new();
        let mut starts = Vec::with_capacity(snippets.len());
        for s in snippets {
            starts.push((text.len(), s.line));
            text.push_str(&s.text);
            // A blank line between pieces: no line-bound pattern spans two of them.
            text.push_str("\n\n");
        }
        Region {
            text: text.into(),
            starts,
        }
    }

    /// File line and text of the line at `offset`.
    fn locate(&self, offset: usize) -> (usize, &str) {
        let i = self.starts.partition_point(|&(o, _)| o <= offset).max(1) - 1;
        let (start, first_line) = self.starts.get(i).copied().unwrap_or((0, 1));
        let (line, excerpt) = line_at(&self.text[start..], offset - start);
        (first_line + line - 1, excerpt)
    }
}

fn line_at(text: &str, offset: usize) -> (usize, &str) {
    let line = text[..offset].bytes().filter(|&b| b == b'\n').count() + 1;
    let start = text[..offset].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let end = text[offset..]
        .find('\n')
        .map(|i| offset + i)
        .unwrap_or(text.len());
    (line, &text[start..end])
}

fn shorten(s: &str) -> String {
    let t = s.trim();
    if t.chars().count() <= 160 {
        return t.to_string();
    }
    let mut out: String = t.chars().take(157).collect();
    out.push_str("...");
    out
}

/// Findings from the front matter's `allowed-tools`: `Bash` grants command execution,
/// `WebFetch`/`WebSearch` and `Bash(curl…)`-style grants network access.
pub fn tool_findings(allowed_tools: &[String], skill_md: &str) -> Vec<Finding> {
    let line = skill_md
        .lines()
        .position(|l| {
            l.trim_start().starts_with("allowed-tools")
                || l.trim_start().starts_with("allowed_tools")
        })
        .map(|i| i + 1)
        .unwrap_or(1);
    let mut out: Vec<Finding> = Vec::new();
    let mut add = |category, tool: &str| {
        if !out.iter().any(|f| f.category == category) {
            out.push(Finding {
                category,
                rule: "allowed-tools",
                file: crate::bundle::SKILL_MD.to_string(),
                line,
                excerpt: shorten(tool),
            });
        }
    };
    for tool in allowed_tools {
        let name = tool.split('(').next().unwrap_or("").trim();
        match name {
            "Bash" | "Shell" => {
                add(Category::Execution, tool);
                let inner = tool
                    .split_once('(')
                    .map(|(_, r)| r.trim_end_matches(')'))
                    .unwrap_or("");
                let program = inner
                    .split([':', ' ', '*'])
                    .next()
                    .unwrap_or("")
                    .rsplit('/')
                    .next()
                    .unwrap_or("");
                if NET_PROGRAMS.contains(&program) {
                    add(Category::Network, tool);
                }
            }
            "WebFetch" | "WebSearch" => add(Category::Network, tool),
            _ => {}
        }
    }
    out
}

/// Programs whose whole purpose is network access.
const NET_PROGRAMS: &[&str] = &[
    "curl", "wget", "nc", "ncat", "netcat", "socat", "ssh", "scp", "sftp", "rsync", "telnet",
    "ftp", "http", "httpie", "aria2c",
];

/// The categories of a set of findings, sorted, deduplicated.
pub fn categories_of(findings: &[Finding]) -> Vec<Category> {
    let set: BTreeSet<Category> = findings.iter().map(|f| f.category).collect();
    set.into_iter().collect()
}
