//! Trigger variation: inputs a script's own text suggests would change what it does. A backdoor
//! waits for a literal argument (`sys.argv[1] == "sync-now"`, `[[ "$1" == --force ]]`,
//! `process.argv.includes('--admin')`), an environment variable (`ADMIN_MODE=TRUE`, `DEBUG`),
//! or an answer on standard input. This module reads those literals and names from the source
//! text, line by line, for any language, and builds a bounded, deterministic set of variations.

mod literals;

use literals::{case_labels, choice_literal, compared, literals, shell_bare_operands, usable};
use regex::Regex;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// Values tried for a variable the script reads without comparing it to anything.
pub const TRUTHY: &[&str] = &["1", "true", "TRUE", "yes"];
/// Literals longer than this are not trigger words.
pub(crate) const MAX_LITERAL: usize = 64;
/// At most this many of each kind of trigger are kept per script.
const MAX_PER_KIND: usize = 8;

/// What a script's text says it reacts to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Triggers {
    /// Literals compared against a positional argument.
    pub positional: Vec<String>,
    /// Options: `["--admin"]`, or `["--mode", "prod"]` when the option takes a value.
    pub flags: Vec<Vec<String>>,
    /// Environment variables read, with the literals they are compared to (maybe none).
    pub env: Vec<(String, Vec<String>)>,
    /// Literals compared against lines read from standard input.
    pub stdin: Vec<String>,
    /// First line (1-based) where a trigger was found.
    pub line: usize,
}

impl Triggers {
    pub fn is_empty(&self) -> bool {
        self.positional.is_empty()
            && self.flags.is_empty()
            && self.env.is_empty()
            && self.stdin.is_empty()
    }
}

/// One variation: arguments, extra environment and standard input for a second run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variation {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub stdin: Option<String>,
}

impl Variation {
    /// Short text for a step label.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        parts.extend(self.args.iter().cloned());
        if let Some(s) = &self.stdin {
            parts.push(format!("stdin {:?}", s.trim_end()));
        }
        let t = parts.join(" ");
        if t.chars().count() > 120 {
            format!("{}…", t.chars().take(120).collect::<String>())
        } else {
            t
        }
    }
}

static ENV_READ: LazyLock<Regex> = LazyLock::new(|| {
    let n = r"([A-Za-z_][A-Za-z0-9_]*)";
    let pats = [
        format!(r#"environ\.get\(\s*['"]{n}['"]"#),
        format!(r#"environ\[\s*['"]{n}['"]\s*\]"#),
        format!(r#"getenv\(\s*['"]{n}['"]"#),
        format!(r#"['"]{n}['"]\s+(?:not\s+)?in\s+(?:os\.)?environ"#),
        format!(r"process\.env\.{n}"),
        format!(r#"process\.env\[\s*['"]{n}['"]\s*\]"#),
        format!(r#"\bENV\[\s*['"]{n}['"]\s*\]"#),
        format!(r#"\bENV\.fetch\(\s*['"]{n}['"]"#),
        format!(r#"\$ENV\{{\s*['"]?{n}['"]?\s*\}}"#),
        format!(r#"env\.get\(\s*['"]{n}['"]"#),
        format!(r#"Getenv\(\s*"{n}""#),
    ];
    crate::util::regex(&pats.join("|")).expect("valid")
});
static SHELL_VAR: LazyLock<Regex> =
    LazyLock::new(|| crate::util::regex(r"\$\{?([A-Z_][A-Z0-9_]*)").expect("valid"));
static JS_DESTRUCTURE: LazyLock<Regex> = LazyLock::new(|| {
    crate::util::regex(r"\{([A-Za-z0-9_,\s:]+)\}\s*=\s*process\.env").expect("valid")
});
static ASSIGN: LazyLock<Regex> = LazyLock::new(|| {
    // `name = …`, `const name = …`, `local name=…`, `name="$1"` (no `==`).
    crate::util::regex(r"^\s*(?:export\s+|local\s+|const\s+|let\s+|var\s+|my\s+|readonly\s+)?\$?([A-Za-z_][A-Za-z0-9_]*)\s*:?=[^=]").expect("valid")
});
static SHELL_ASSIGNED: LazyLock<Regex> = LazyLock::new(|| {
    crate::util::regex(r"(?m)^\s*(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)?)?([A-Z_][A-Z0-9_]*)=|\bread\s+(?:-\w+\s+)*([A-Z_][A-Z0-9_]*)|\bfor\s+([A-Z_][A-Z0-9_]*)\s+in").expect("valid")
});
static ADD_ARGUMENT: LazyLock<Regex> = LazyLock::new(|| {
    crate::util::regex(r"(?:add_argument|click\.option|click\.argument|\.option)\s*\(")
        .expect("valid")
});

const ARGV_SOURCES: &[&str] = &[
    "sys.argv",
    "process.argv",
    "Deno.args",
    "Bun.argv",
    "ARGV",
    "$1",
    "${1",
    "$2",
    "${2",
    "$@",
    "$*",
    "argv[",
    "parse_args(",
];
/// Reads of standard input (not of files: `f.readline()` is not a prompt).
static STDIN_READ: LazyLock<Regex> = LazyLock::new(|| {
    crate::util::regex(r"\binput\(|sys\.stdin|process\.stdin|<STDIN>|\$stdin|STDIN\.|(?:^|[^.\w])gets\b|(?:^|[;&|]\s*|\bthen\s+|\bdo\s+)read\s+(?:-[a-zA-Z]+\s+(?:'[^']*'\s+|\x22[^\x22]*\x22\s+)?)*[A-Za-z_]|\bprompt\(")
        .expect("valid")
});

/// Environment names that are the machine's, not a skill's switch.
fn standard_env(name: &str) -> bool {
    const STD: &[&str] = &[
        "HOME",
        "PATH",
        "USER",
        "LOGNAME",
        "SHELL",
        "PWD",
        "OLDPWD",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TMPDIR",
        "TEMP",
        "TMP",
        "HOSTNAME",
        "IFS",
        "PS1",
        "PS2",
        "PS3",
        "PS4",
        "RANDOM",
        "SECONDS",
        "LINENO",
        "UID",
        "EUID",
        "PPID",
        "SHLVL",
        "OPTARG",
        "OPTIND",
        "REPLY",
        "PIPESTATUS",
        "FUNCNAME",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "DISPLAY",
        "COLUMNS",
        "LINES",
        "BASHPID",
        "HISTFILE",
        "MAIL",
        "TZ",
        "NODE_ENV_PATH",
        "PYTHONPATH",
        "NODE_PATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CI",
    ];
    STD.contains(&name)
        || ["LC_", "BASH_", "XDG_", "CLAUDE_", "npm_"]
            .iter()
            .any(|p| name.starts_with(p))
        || ["_DIR", "_PATH", "_HOME", "_ROOT", "_FILE"]
            .iter()
            .any(|s| name.ends_with(s))
}

/// Names whose value is a secret: the planted credential must stay, so they are set only when
/// the script compares them to a literal.
fn secret_like(name: &str) -> bool {
    let u = name.to_ascii_uppercase();
    [
        "TOKEN",
        "KEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "AUTH",
        "COOKIE",
        "SESSION",
    ]
    .iter()
    .any(|s| u.contains(s))
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if v.len() < MAX_PER_KIND && !v.contains(&s) {
        v.push(s);
    }
}

fn mentions_var(line: &str, var: &str) -> bool {
    line.match_indices(var).any(|(i, _)| {
        let b = line[..i].chars().next_back();
        let a = line[i + var.len()..].chars().next();
        b.is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
            && a.is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

/// Read the triggers of a script. `shell`: the script is a shell script (bare `$NAME` reads
/// the environment). `protected`: names the image already sets (planted credentials, `HOME`),
/// overridden only when compared to a literal.
pub fn triggers(text: &str, shell: bool, protected: &[String]) -> Triggers {
    let lines: Vec<&str> = text.lines().collect();
    let mut t = Triggers::default();
    let mut first_line = usize::MAX;
    let mut env: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut env_order: Vec<String> = Vec::new();
    // Variables holding an argument, an environment value or a line of input.
    let mut argv_vars: Vec<String> = Vec::new();
    let mut env_vars: Vec<(String, String)> = Vec::new();
    let mut stdin_vars: Vec<String> = Vec::new();
    // Shell variables the script sets itself are not read from the environment, except a
    // default for the variable itself (`DEBUG=${DEBUG:-0}`).
    let shell_assigned: Vec<String> = if shell {
        SHELL_ASSIGNED
            .captures_iter(text)
            .filter_map(|c| {
                let m = c.get(1).or(c.get(2)).or(c.get(3))?;
                let name = m.as_str();
                let rest = text[c.get(0)?.end()..].trim_start_matches('"');
                let self_default = rest.starts_with(&format!("${{{name}"))
                    || rest.starts_with(&format!("${name}"));
                (!self_default).then(|| name.to_string())
            })
            .collect()
    } else {
        Vec::new()
    };
    let note_env =
        |name: &str, env: &mut BTreeMap<String, Vec<String>>, order: &mut Vec<String>| {
            if !env.contains_key(name) && order.len() < 2 * MAX_PER_KIND {
                env.insert(name.to_string(), Vec::new());
                order.push(name.to_string());
            }
        };

    // Pass 1: reads and the variables that hold them.
    for (i, line) in lines.iter().enumerate() {
        let code = strip_comment(line, shell);
        let mut names: Vec<String> = ENV_READ
            .captures_iter(code)
            .filter_map(|c| {
                c.iter()
                    .skip(1)
                    .flatten()
                    .next()
                    .map(|m| m.as_str().to_string())
            })
            .collect();
        if let Some(c) = JS_DESTRUCTURE.captures(code) {
            if let Some(m) = c.get(1) {
                names.extend(
                    m.as_str()
                        .split(',')
                        .filter_map(|p| p.split(':').next())
                        .map(|p| p.trim().to_string())
                        .filter(|p| !p.is_empty()),
                );
            }
        }
        if shell {
            for c in SHELL_VAR.captures_iter(code) {
                if let Some(m) = c.get(1) {
                    let n = m.as_str();
                    if !shell_assigned.iter().any(|a| a == n) {
                        names.push(n.to_string());
                    }
                }
            }
        }
        let argv = ARGV_SOURCES.iter().any(|s| code.contains(s));
        let stdin = STDIN_READ.is_match(code);
        if let Some(c) = ASSIGN.captures(code) {
            if let Some(v) = c.get(1).map(|m| m.as_str().to_string()) {
                if argv {
                    argv_vars.push(v.clone());
                }
                if stdin {
                    stdin_vars.push(v.clone());
                }
                if let Some(n) = names.first() {
                    env_vars.push((v, n.clone()));
                }
            }
        }
        // Shell `read … VAR`: the last word of the read command holds the answer.
        if shell && stdin {
            if let Some(p) = code.find("read ") {
                let rest = &code[p + 5..];
                let end = rest.find([';', '&', '|']).unwrap_or(rest.len());
                let (words, _) = super::commands::shell_words(&rest[..end]);
                if let Some(v) = words.last().filter(|w| {
                    w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !w.starts_with('-')
                }) {
                    stdin_vars.push(v.clone());
                }
            }
        }
        for n in &names {
            note_env(n, &mut env, &mut env_order);
        }
        if (argv || stdin || !names.is_empty()) && first_line == usize::MAX {
            first_line = i + 1;
        }
    }

    // Pass 2: literals compared on lines that read (or hold) an input.
    let mut case_of: Option<(Kind, usize)> = None;
    for (i, line) in lines.iter().enumerate() {
        let code = strip_comment(line, shell);
        let lits: Vec<String> = literals(code)
            .into_iter()
            .filter(|(s, e, l)| usable(l) && compared(code, *s, *e, shell))
            .map(|(_, _, l)| l)
            .chain(shell_bare_operands(code, shell))
            .collect();
        let env_here: Vec<String> = env_order
            .iter()
            .filter(|n| mentions_var(code, n))
            .cloned()
            .chain(
                env_vars
                    .iter()
                    .filter(|(v, _)| mentions_var(code, v))
                    .map(|(_, n)| n.clone()),
            )
            .collect();
        let argv_here = ARGV_SOURCES.iter().any(|s| code.contains(s))
            || argv_vars.iter().any(|v| mentions_var(code, v));
        let stdin_here =
            STDIN_READ.is_match(code) || stdin_vars.iter().any(|v| mentions_var(code, v));
        // `case "$1" in`, `switch (process.argv[2])`, `match cmd:` open a block of labels.
        let t_code = code.trim_start();
        let opener = (t_code.starts_with("case ") && t_code.trim_end().ends_with(" in"))
            || t_code.starts_with("switch")
            || (t_code.starts_with("match ") && t_code.trim_end().ends_with(':'));
        if opener {
            case_of = if let Some(n) = env_here.first() {
                Some((Kind::Env(n.clone()), i))
            } else if argv_here {
                Some((Kind::Argv, i))
            } else if stdin_here {
                Some((Kind::Stdin, i))
            } else {
                None
            };
            if case_of.is_some() {
                continue;
            }
        }
        if let Some((kind, from)) = &case_of {
            if t_code.starts_with("esac") || i > from + 200 {
                case_of = None;
            } else if let Some(labels) = case_labels(t_code) {
                for l in labels {
                    add(&mut t, &mut env, kind, l);
                }
                continue;
            }
        }
        if lits.is_empty() {
            continue;
        }
        for n in &env_here {
            for l in &lits {
                if l != n {
                    add(&mut t, &mut env, &Kind::Env(n.clone()), l.clone());
                }
            }
        }
        if env_here.is_empty() && argv_here {
            for l in &lits {
                add(&mut t, &mut env, &Kind::Argv, l.clone());
            }
        } else if env_here.is_empty() && stdin_here {
            for l in &lits {
                add(&mut t, &mut env, &Kind::Stdin, l.clone());
            }
        }
    }

    // Option parsers: `add_argument("--admin", action="store_true")`, `click.option(...)`.
    for line in &lines {
        let code = strip_comment(line, shell);
        if !ADD_ARGUMENT.is_match(code) {
            continue;
        }
        let lits: Vec<String> = literals(code).into_iter().map(|(_, _, l)| l).collect();
        let opts: Vec<&String> = lits
            .iter()
            .filter(|l| l.starts_with('-') && usable(l))
            .collect();
        if let Some(opt) = opts.iter().max_by_key(|o| o.len()) {
            let is_flag = [
                "store_true",
                "store_false",
                "count",
                "store_const",
                "is_flag",
            ]
            .iter()
            .any(|k| code.contains(k));
            let choice = choice_literal(code);
            let mut f = vec![opt.to_string()];
            if !is_flag {
                f.push(choice.unwrap_or_else(|| "1".into()));
            }
            if t.flags.len() < MAX_PER_KIND && !t.flags.contains(&f) {
                t.flags.push(f);
            }
        } else if let Some(c) = choice_literal(code) {
            push_unique(&mut t.positional, c);
        }
    }

    // Positional literals that look like options are options.
    let (flags, pos): (Vec<String>, Vec<String>) = std::mem::take(&mut t.positional)
        .into_iter()
        .partition(|l| l.starts_with('-'));
    t.positional = pos;
    for f in flags {
        let f = vec![f];
        if t.flags.len() < MAX_PER_KIND && !t.flags.contains(&f) {
            t.flags.push(f);
        }
    }

    for name in env_order {
        let lits = env.remove(&name).unwrap_or_default();
        let keep = if lits.is_empty() {
            !standard_env(&name) && !secret_like(&name) && !protected.contains(&name)
        } else {
            !matches!(name.as_str(), "HOME" | "PATH" | "USER" | "SHELL" | "PWD")
        };
        if keep && t.env.len() < MAX_PER_KIND {
            t.env.push((name, lits));
        }
    }
    t.line = if first_line == usize::MAX {
        0
    } else {
        first_line
    };
    t
}

#[derive(Debug, Clone)]
enum Kind {
    Argv,
    Env(String),
    Stdin,
}

fn add(t: &mut Triggers, env: &mut BTreeMap<String, Vec<String>>, kind: &Kind, lit: String) {
    if !usable(&lit) {
        return;
    }
    match kind {
        Kind::Argv => push_unique(&mut t.positional, lit),
        Kind::Stdin => push_unique(&mut t.stdin, lit),
        Kind::Env(n) => {
            if let Some(v) = env.get_mut(n) {
                push_unique(v, lit);
            }
        }
    }
}

/// The line without a trailing comment (`#` for shell and Python, `//` otherwise), so a
/// comment's apostrophes do not open string literals.
fn strip_comment(line: &str, shell: bool) -> &str {
    let t = line.trim_start();
    if t.starts_with('#') || t.starts_with("//") {
        return "";
    }
    let _ = shell;
    line
}

/// Variations of a script run, at most `max`, deterministic. Round `k` sets each variable to its
/// `k`-th compared literal (cycling) or, when it has none, to `TRUTHY[k]`; passes the `k`-th
/// positional literal with every option; then single options alone (an early-exit option like
/// `--dry-run` must not mask another).
pub fn variations(t: &Triggers, max: usize) -> Vec<Variation> {
    if t.is_empty() || max == 0 {
        return Vec::new();
    }
    let all_flags: Vec<String> = t.flags.iter().flatten().cloned().collect();
    let mut arg_sets: Vec<Vec<String>> = Vec::new();
    if t.positional.is_empty() {
        arg_sets.push(all_flags.clone());
    }
    for p in &t.positional {
        let mut a = vec![p.clone()];
        a.extend(all_flags.iter().cloned());
        arg_sets.push(a);
    }
    if t.flags.len() > 1 {
        for f in &t.flags {
            let mut a: Vec<String> = t.positional.first().cloned().into_iter().collect();
            a.extend(f.iter().cloned());
            arg_sets.push(a);
        }
    }
    let env_rounds = t
        .env
        .iter()
        .map(|(_, l)| if l.is_empty() { TRUTHY.len() } else { l.len() })
        .max()
        .unwrap_or(1);
    let rounds = arg_sets.len().max(env_rounds);
    let stdin = (!t.stdin.is_empty()).then(|| {
        let mut s = t.stdin.join("\n");
        s.push('\n');
        s
    });
    let mut out: Vec<Variation> = Vec::new();
    for k in 0..rounds {
        let args = arg_sets[k % arg_sets.len()].clone();
        let env = t
            .env
            .iter()
            .map(|(n, l)| {
                let v = if l.is_empty() {
                    TRUTHY[k % TRUTHY.len()].to_string()
                } else {
                    l[k % l.len()].clone()
                };
                (n.clone(), v)
            })
            .collect();
        let v = Variation {
            args,
            env,
            stdin: stdin.clone(),
        };
        if !out.contains(&v) {
            out.push(v);
        }
        if out.len() >= max {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests;
