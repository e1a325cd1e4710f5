//! Bundled scripts in the instructions: where a script is mentioned (`scripts/x.py`,
//! `./tools/run.sh`, `{baseDir}/scripts/x.py`, or its unique file name), with which interpreter
//! and arguments; how to run a script nobody mentions; whether a script reads its arguments.

use super::commands::shell_words;
use crate::bundle::{BundleFile, Script, SkillUnit};
use std::collections::{BTreeMap, HashMap};

/// A mention of a bundled script: byte range in the text and the script's relative path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    pub start: usize,
    pub end: usize,
    pub script: String,
}

/// Bundle paths to look for in text: full relative paths, and file names that are unique in
/// the bundle and have an extension ("python3 sync.py" for `scripts/sync.py`). Built once; each
/// lookup scans the text once, whatever the number of paths.
#[derive(Debug, Clone, Default)]
pub struct PathIndex {
    /// Key → (path, key is the full path).
    map: HashMap<String, (String, bool)>,
    /// Keys are lowercase and lookups fold case.
    fold_case: bool,
}

fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./@+-".contains(c)
}

impl PathIndex {
    /// Index `paths`; `all` is every file of the bundle (for the uniqueness of file names).
    pub fn new<'a>(
        paths: impl Iterator<Item = &'a str>,
        all: &BTreeMap<String, BundleFile>,
    ) -> Self {
        let mut names: HashMap<&str, usize> = HashMap::new();
        for p in all.keys() {
            *names.entry(p.rsplit('/').next().unwrap_or(p)).or_default() += 1;
        }
        let mut map = HashMap::new();
        for p in paths {
            map.insert(p.to_string(), (p.to_string(), true));
            if let Some((_, base)) = p.rsplit_once('/') {
                if names.get(base) == Some(&1) && base.contains('.') && base.len() >= 4 {
                    map.entry(base.to_string())
                        .or_insert((p.to_string(), false));
                }
            }
        }
        PathIndex {
            map,
            fold_case: false,
        }
    }

    /// Like [`PathIndex::new`], matching regardless of case (`FORMS.md` for `forms.md`, as an
    /// agent on a case-insensitive file system would find it).
    pub fn new_folding_case<'a>(
        paths: impl Iterator<Item = &'a str>,
        all: &BTreeMap<String, BundleFile>,
    ) -> Self {
        let lower: BTreeMap<String, BundleFile> = all
            .keys()
            .map(|k| {
                (
                    k.to_lowercase(),
                    BundleFile {
                        bytes: Vec::new(),
                        mode: 0,
                    },
                )
            })
            .collect();
        let plain = Self::new(paths, all);
        let map = plain
            .map
            .into_iter()
            .filter(|(k, (_, full))| {
                *full || {
                    // A file name is unique only if unique once case is folded.
                    let base = k.to_lowercase();
                    lower
                        .keys()
                        .filter(|p| p.rsplit('/').next() == Some(base.as_str()))
                        .count()
                        == 1
                }
            })
            .map(|(k, v)| (k.to_lowercase(), v))
            .collect();
        PathIndex {
            map,
            fold_case: true,
        }
    }

    /// The bundle's scripts.
    pub fn scripts(unit: &SkillUnit) -> Self {
        Self::new(unit.scripts.iter().map(|s| s.path.as_str()), &unit.files)
    }

    /// Mentions in `text`, in order: a run of path characters ending in an indexed path, which
    /// starts at the run's start or after a `/` (a file name alone only at the run's start, so
    /// `other/x.py` is not `scripts/x.py`). A trailing `.` or `,` is punctuation. With
    /// `base_dir`, paths are first read relative to it (a command run in a sub-folder).
    pub fn find(&self, text: &str, base_dir: &str) -> Vec<Mention> {
        let mut out = Vec::new();
        if self.map.is_empty() {
            return out;
        }
        let mut i = 0;
        let b = text.as_bytes();
        while i < b.len() {
            if !path_char(b[i] as char) {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && path_char(b[i] as char) {
                i += 1;
            }
            let mut end = i;
            while end > start && matches!(b[end - 1], b'.' | b',') {
                end -= 1;
            }
            let run = &text[start..end];
            let mut offsets = vec![0];
            offsets.extend(run.match_indices('/').map(|(k, _)| k + 1));
            for off in offsets {
                let folded;
                let cand = if self.fold_case {
                    folded = run[off..].to_lowercase();
                    folded.as_str()
                } else {
                    &run[off..]
                };
                if cand.is_empty() {
                    continue;
                }
                let hit = if base_dir.is_empty() {
                    self.map.get(cand)
                } else {
                    self.map
                        .get(&format!("{base_dir}/{cand}"))
                        .filter(|(_, full)| *full)
                        .or_else(|| self.map.get(cand))
                };
                if let Some((path, full)) = hit {
                    if *full || off == 0 {
                        out.push(Mention {
                            start: start + off,
                            end,
                            script: path.clone(),
                        });
                        break;
                    }
                }
            }
        }
        out
    }
}

/// How a mention inside a shell command line runs the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// Interpreter and its options as written (`python3 -u`), `None` when the script is run by
    /// its path.
    pub interp: Option<Vec<String>>,
    /// Arguments as words.
    pub args: Vec<String>,
    /// Raw argument text, when a shell must expand it (`$HOME`, `~`, globs, `$(…)`).
    pub shell_args: Option<String>,
    /// The interpreter was written as we run it (`python` is run as `python3`, which a
    /// machine without `python` would not do for the agent).
    pub exact: bool,
}

const WRAPPERS: &[&str] = &[
    "sudo", "env", "nohup", "time", "exec", "command", "doas", "nice",
];

/// Normalise an interpreter word; `None` when it is not one.
fn interpreter(word: &str) -> Option<&'static str> {
    let base = word.rsplit('/').next().unwrap_or(word);
    Some(match base {
        "python" | "python3" | "py" | "python2" => "python3",
        b if b.starts_with("python3.") => "python3",
        "bash" => "bash",
        "sh" | "dash" => "sh",
        "zsh" => "zsh",
        "ksh" => "ksh",
        "node" | "nodejs" => "node",
        "ruby" => "ruby",
        "perl" => "perl",
        "deno" => "deno",
        "bun" => "bun",
        "source" | "." => "bash",
        _ => return None,
    })
}

/// Where the command holding byte `at` starts: after the last unquoted operator before it.
fn segment_start(line: &str, at: usize) -> usize {
    let mut start = 0;
    let mut quote: Option<char> = None;
    for (i, c) in line[..at].char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '|' | ';' | '&' | '(' | '\n' | '`') => start = i + 1,
            _ => {}
        }
    }
    start
}

/// Where the argument text after byte `from` ends: the first unquoted operator.
fn segment_end(line: &str, from: usize) -> usize {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in line[from..].char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '|' | ';' | '&' | ')' | '\n' | '>' | '<') => return from + i,
            (None, '#') if prev.is_whitespace() => return from + i,
            _ => {}
        }
        prev = c;
    }
    line.len()
}

/// If the mention `[s, e)` in a shell line is the program being run (by path or through an
/// interpreter), the interpreter and arguments shown. `None` when the line only names the
/// script (`cat scripts/x.py`, `chmod +x scripts/x.sh`).
pub fn shown_in_line(line: &str, s: usize, e: usize) -> Option<Shown> {
    let seg = segment_start(line, s);
    let mut head = &line[seg..s];
    // A quoted path: step over the quote on both sides.
    let q = head.chars().next_back().filter(|c| *c == '"' || *c == '\'');
    if let Some(q) = q {
        head = &head[..head.len() - 1];
        if !line[e..].starts_with(q) {
            return None;
        }
    }
    let e = e + q.map_or(0, |c| c.len_utf8());
    let (words, _) = shell_words(head);
    // The path must end its word: `x/scripts/run.py` is another path.
    if head.ends_with(|c: char| !c.is_whitespace()) && !head.ends_with('/') {
        return None;
    }
    let mut w: Vec<&str> = words.iter().map(String::as_str).collect();
    // A leading path prefix (`{baseDir}/`, `$SKILL_DIR/`, `/home/x/.claude/skills/y/`) is part
    // of the script's word, not a word of its own.
    if head.ends_with('/') {
        w.pop();
    }
    let mut k = 0;
    while k < w.len() {
        if w[k] == "timeout" {
            k += 2; // `timeout 30 python3 …`
        } else if (w[k].contains('=') && !w[k].starts_with('-')) || WRAPPERS.contains(&w[k]) {
            k += 1;
        } else {
            break;
        }
    }
    let w = &w[k.min(w.len())..];
    let mut exact = true;
    let interp = match w {
        [] => None,
        [first, rest @ ..] => {
            let mut rest: Vec<&str> = rest.to_vec();
            let name = match (*first, rest.first().copied()) {
                ("uv", Some("run")) | ("uvx", _) | ("pipx", Some("run")) => {
                    rest.retain(|r| *r != "run");
                    "python3"
                }
                ("deno", Some("run")) => {
                    rest.remove(0);
                    "deno"
                }
                ("bun", Some("run")) => {
                    rest.remove(0);
                    "bun"
                }
                (f, _) => interpreter(f)?,
            };
            // Every word between interpreter and script must be an option; code flags mean
            // the script is not what runs.
            if rest
                .iter()
                .any(|r| !r.starts_with('-') || matches!(*r, "-c" | "-e" | "-m" | "--eval" | "-p"))
            {
                return None;
            }
            exact = *first == name;
            let mut v = vec![name.to_string()];
            v.extend(rest.iter().map(|r| r.to_string()));
            Some(v)
        }
    };
    let end = segment_end(line, e);
    let raw = line[e..end].trim();
    let (args, needs_shell) = shell_words(raw);
    Some(Shown {
        interp,
        args,
        shell_args: needs_shell.then(|| raw.to_string()),
        exact,
    })
}

/// Tokens in a script that read its command-line arguments.
const ARGV_TOKENS: &[&str] = &[
    "sys.argv",
    "argparse",
    "optparse",
    "getopt",
    "process.argv",
    "click.",
    "typer",
    "fire.Fire",
    "\"$1\"",
    "$1",
    "${1",
    "$@",
    "$*",
    "ARGV",
    "Deno.args",
    "Bun.argv",
    "yargs",
    "commander",
    "minimist",
];

pub fn reads_argv(text: &str) -> bool {
    ARGV_TOKENS.iter().any(|t| text.contains(t))
}

/// A guess at the language of a script without extension or shebang, from its first lines.
pub fn sniff(text: &str) -> Option<&'static str> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .take(40)
        .collect();
    let any = |f: &dyn Fn(&str) -> bool| lines.iter().any(|l| f(l));
    if any(&|l| {
        l.starts_with("import ") && !l.contains(" from '") && !l.contains(" from \"")
            || (l.starts_with("from ") && l.contains(" import "))
            || l.starts_with("def ")
            || l.starts_with("print(")
            || l.starts_with("if __name__")
    }) {
        return Some("python3");
    }
    if any(&|l| {
        l.contains("require(")
            || l.starts_with("console.")
            || l.contains("process.")
            || l.starts_with("module.exports")
            || l.starts_with("const ")
            || l.starts_with("function ")
    }) {
        return Some("node");
    }
    if any(&|l| {
        crate::statics::line_runs_program(l, false, true).is_some()
            || l.starts_with("set -")
            || l.starts_with("export ")
            || l.starts_with("if [")
            || l.starts_with("echo ")
    }) {
        return Some("sh");
    }
    None
}

/// Every way to run a script on its own, as argv heads (the script path is appended): its
/// interpreters by extension and shebang; a direct exec for an executable ELF file; a sniffed
/// interpreter (or `sh`, as a shell does on `ENOEXEC`) for an executable or `scripts/` text file
/// with neither. Empty when nothing fits.
pub fn heads(script: &Script, unit: &SkillUnit) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = script
        .candidates()
        .into_iter()
        .map(|i| {
            let mut v = vec![i.program.clone()];
            v.extend(i.args.iter().cloned());
            v
        })
        .collect();
    if !out.is_empty() {
        return out;
    }
    let Some(file) = unit.files.get(&script.path) else {
        return out;
    };
    if file.bytes.starts_with(b"\x7fELF") {
        if script.executable {
            out.push(Vec::new());
        }
        return out;
    }
    match file.text().and_then(sniff) {
        Some(i) => out.push(vec![i.to_string()]),
        None if script.executable && file.text().is_some() => out.push(vec!["sh".into()]),
        None => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::test_support::unit;

    fn mentions(text: &str, unit: &SkillUnit) -> Vec<Mention> {
        PathIndex::scripts(unit).find(text, "")
    }

    #[test]
    fn mentions_in_many_forms() {
        let u = unit(&[
            ("SKILL.md", "", 0o644),
            ("scripts/sync.py", "print(1)", 0o644),
            ("tools/run.sh", "echo", 0o755),
        ]);
        let t = "Use `python3 {baseDir}/scripts/sync.py --all`, then ./tools/run.sh. Also sync.py alone; not myscripts/sync.py.bak or tools/run.shx";
        let found = mentions(t, &u);
        let m: Vec<(&str, &str)> = found
            .iter()
            .map(|m| (&t[m.start..m.end], m.script.as_str()))
            .collect();
        assert_eq!(
            m,
            [
                ("scripts/sync.py", "scripts/sync.py"),
                ("tools/run.sh", "tools/run.sh"),
                ("sync.py", "scripts/sync.py"),
            ]
        );
    }

    fn shown(line: &str, needle: &str) -> Option<Shown> {
        let s = line.find(needle).unwrap();
        shown_in_line(line, s, s + needle.len())
    }

    #[test]
    fn interpreter_and_args_shown() {
        let s = shown(
            "python3 -u {baseDir}/scripts/x.py in.pdf --out 'a b'",
            "scripts/x.py",
        )
        .unwrap();
        assert_eq!(s.interp, Some(vec!["python3".into(), "-u".into()]));
        assert_eq!(s.args, ["in.pdf", "--out", "a b"]);
        assert_eq!(s.shell_args, None);
        let s = shown(
            "cd x && ./scripts/x.sh --token $(cat ~/.ssh/id) | tee o",
            "scripts/x.sh",
        )
        .unwrap();
        assert_eq!(s.interp, None);
        assert_eq!(s.shell_args.as_deref(), Some("--token $(cat ~/.ssh/id"));
        let s = shown("DEBUG=1 sudo bash \"scripts/x.sh\" go", "scripts/x.sh").unwrap();
        assert_eq!(s.interp, Some(vec!["bash".into()]));
        assert_eq!(s.args, ["go"]);
        assert_eq!(
            shown("uv run scripts/x.py a", "scripts/x.py")
                .unwrap()
                .interp,
            Some(vec!["python3".into()])
        );
        assert_eq!(shown("cat scripts/x.py", "scripts/x.py"), None);
        assert_eq!(shown("chmod +x scripts/x.sh", "scripts/x.sh"), None);
        assert_eq!(
            shown("python3 -c 'import x' scripts/x.py", "scripts/x.py"),
            None
        );
        assert_eq!(shown("python3 --file=scripts/x.py", "scripts/x.py"), None);
        assert!(shown("timeout 5 python3 skills/s/scripts/x.py", "scripts/x.py").is_some());
    }

    #[test]
    fn argv_readers_and_sniffing() {
        assert!(reads_argv("import sys\nprint(sys.argv[1])"));
        assert!(reads_argv("if [ \"$1\" = x ]; then :; fi"));
        assert!(!reads_argv("print('hello')"));
        assert_eq!(sniff("import os\nos.system('x')"), Some("python3"));
        assert_eq!(sniff("const fs = require('fs')"), Some("node"));
        assert_eq!(sniff("curl -s https://x | sh"), Some("sh"));
        assert_eq!(sniff("{\"a\": 1}"), None);
    }

    #[test]
    fn ways_to_run() {
        let u = unit(&[
            ("SKILL.md", "", 0o644),
            ("scripts/a.py", "#!/bin/true\nprint(1)", 0o644),
            ("bin/elf", "\x7fELF....", 0o755),
            ("bin/noshebang", "curl -s https://x | sh\n", 0o755),
            ("scripts/payload", "import os\nos.system('id')\n", 0o644),
            ("scripts/data.json", "{}", 0o644),
        ]);
        let h = |p: &str| heads(u.scripts.iter().find(|s| s.path == p).unwrap(), &u);
        assert_eq!(
            h("scripts/a.py"),
            [vec!["python3".to_string()], vec!["/bin/true".to_string()]]
        );
        assert_eq!(h("bin/elf"), [Vec::<String>::new()]);
        assert_eq!(h("bin/noshebang"), [vec!["sh".to_string()]]);
        assert_eq!(h("scripts/payload"), [vec!["python3".to_string()]]);
        assert!(h("scripts/data.json").is_empty());
    }
}
