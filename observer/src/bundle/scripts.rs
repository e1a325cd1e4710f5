//! Which bundled files are scripts, and how each would be run. Pure helpers for the runner.

use super::BundleFile;
use serde::Serialize;
use std::collections::BTreeMap;

/// A program and its leading arguments, e.g. `python3` or `/bin/bash -e`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interpreter {
    pub program: String,
    pub args: Vec<String>,
}

impl Interpreter {
    fn bare(program: &str) -> Self {
        Interpreter {
            program: program.to_string(),
            args: Vec::new(),
        }
    }
}

/// A bundled file an agent could run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Script {
    /// Path relative to the skill root.
    pub path: String,
    /// Any execute bit is set.
    pub executable: bool,
    pub by_extension: Option<Interpreter>,
    pub by_shebang: Option<Interpreter>,
}

impl Script {
    /// The interpreter an agent would most likely use: the extension's (agents type
    /// `python3 scripts/x.py`), else the shebang's.
    pub fn interpreter(&self) -> Option<&Interpreter> {
        self.by_extension.as_ref().or(self.by_shebang.as_ref())
    }

    /// Every distinct way the script could be run. When extension and shebang disagree both are
    /// listed, so a script cannot dodge observation with a decoy shebang (`#!/bin/true` on a
    /// `.py`) or a decoy extension.
    pub fn candidates(&self) -> Vec<&Interpreter> {
        let mut out: Vec<&Interpreter> = Vec::new();
        for i in [self.by_extension.as_ref(), self.by_shebang.as_ref()]
            .into_iter()
            .flatten()
        {
            if !out.contains(&i) {
                out.push(i);
            }
        }
        out
    }
}

/// Interpreter by file extension (case-insensitive).
pub fn interpreter_for_extension(path: &str) -> Option<Interpreter> {
    let file = path.rsplit('/').next().unwrap_or(path);
    let (stem, ext) = file.rsplit_once('.')?;
    if stem.is_empty() {
        return None; // `.bashrc` is a dotfile, not an extension
    }
    let program = match ext.to_ascii_lowercase().as_str() {
        "py" | "pyw" | "py3" => "python3",
        "sh" | "bash" => "bash",
        "js" | "mjs" | "cjs" => "node",
        "rb" => "ruby",
        "pl" => "perl",
        _ => return None,
    };
    Some(Interpreter::bare(program))
}

/// Parse a `#!` line the way the kernel reads it (first 256 bytes, first line). `env` is looked
/// through: `#!/usr/bin/env -S python3 -u` gives `python3 -u`.
pub fn parse_shebang(bytes: &[u8]) -> Option<Interpreter> {
    let rest = bytes.strip_prefix(b"#!")?;
    let head = &rest[..rest.len().min(254)];
    let line = head.split(|&b| b == b'\n').next().unwrap_or(head);
    let line = String::from_utf8_lossy(line);
    let mut tokens = line.split_whitespace();
    let program = tokens.next()?;
    let rest: Vec<&str> = tokens.collect();
    if program.rsplit('/').next() == Some("env") {
        let mut i = 0;
        while i < rest.len() {
            let t = rest[i];
            if matches!(t, "-u" | "--unset" | "-C" | "--chdir") {
                i += 2;
            } else if t.starts_with('-') || t.contains('=') {
                i += 1;
            } else {
                return Some(Interpreter {
                    program: t.to_string(),
                    args: rest[i + 1..].iter().map(|s| s.to_string()).collect(),
                });
            }
        }
        return None;
    }
    Some(Interpreter {
        program: program.to_string(),
        args: rest.iter().map(|s| s.to_string()).collect(),
    })
}

/// Folders of vendored code, where a `.js` or `.py` is a library file rather than a script of
/// the skill. Files there are scripts only when under `scripts/`, executable or with a shebang.
const VENDORED: &[&str] = &[
    "node_modules",
    "__pycache__",
    ".git",
    ".venv",
    "venv",
    "site-packages",
];

/// The scripts of a skill: files under `scripts/`, files with a shebang, executables, and files
/// with a script extension outside vendored folders. Sorted by path.
pub fn find_scripts(files: &BTreeMap<String, BundleFile>) -> Vec<Script> {
    let mut out = Vec::new();
    for (path, file) in files {
        let by_extension = interpreter_for_extension(path);
        let by_shebang = parse_shebang(&file.bytes);
        let executable = file.is_executable();
        let under_scripts = path.split('/').next() == Some("scripts") && path.contains('/');
        let vendored = path.split('/').any(|c| VENDORED.contains(&c));
        let is_script = under_scripts
            || executable
            || by_shebang.is_some()
            || (by_extension.is_some() && !vendored);
        if is_script {
            out.push(Script {
                path: path.clone(),
                executable,
                by_extension,
                by_shebang,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i(p: &str, args: &[&str]) -> Interpreter {
        Interpreter {
            program: p.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn extensions() {
        for (p, want) in [
            ("scripts/a.py", Some("python3")),
            ("A.PY", Some("python3")),
            ("x.sh", Some("bash")),
            ("x.bash", Some("bash")),
            ("x.js", Some("node")),
            ("x.mjs", Some("node")),
            ("x.cjs", Some("node")),
            ("x.rb", Some("ruby")),
            ("x.pl", Some("perl")),
            ("x.txt", None),
            ("Makefile", None),
            (".bashrc", None),
            ("dir.py/file", None),
        ] {
            assert_eq!(
                interpreter_for_extension(p).map(|i| i.program),
                want.map(String::from),
                "{p}"
            );
        }
    }

    #[test]
    fn shebangs() {
        assert_eq!(parse_shebang(b"#!/bin/sh\necho"), Some(i("/bin/sh", &[])));
        assert_eq!(
            parse_shebang(b"#! /bin/bash -e\r\n"),
            Some(i("/bin/bash", &["-e"]))
        );
        assert_eq!(
            parse_shebang(b"#!/usr/bin/env python3\n"),
            Some(i("python3", &[]))
        );
        assert_eq!(
            parse_shebang(b"#!/usr/bin/env -S node --no-warnings\n"),
            Some(i("node", &["--no-warnings"]))
        );
        assert_eq!(
            parse_shebang(b"#!/usr/bin/env -u X A=1 ruby\n"),
            Some(i("ruby", &[]))
        );
        assert_eq!(parse_shebang(b"#!/usr/bin/env\n"), None);
        assert_eq!(parse_shebang(b"#!\n"), None);
        assert_eq!(parse_shebang(b"# not a shebang"), None);
        assert_eq!(parse_shebang(b"\xEF\xBB\xBF#!/bin/sh"), None);
        assert_eq!(
            parse_shebang(b"#!/bin/\xffsh\n").map(|i| i.args.len()),
            Some(0)
        );
    }

    fn file(bytes: &[u8], mode: u32) -> BundleFile {
        BundleFile {
            bytes: bytes.to_vec(),
            mode,
        }
    }

    #[test]
    fn finds_scripts_and_candidates() {
        let mut files = BTreeMap::new();
        files.insert("SKILL.md".to_string(), file(b"---\n---\n", 0o644));
        files.insert("scripts/data.json".to_string(), file(b"{}", 0o644));
        files.insert(
            "scripts/run.py".to_string(),
            file(b"#!/bin/true\nprint(1)", 0o644),
        );
        files.insert("tool".to_string(), file(b"#!/usr/bin/env perl\n", 0o644));
        files.insert("bin/elf".to_string(), file(b"\x7fELF", 0o755));
        files.insert("helper.rb".to_string(), file(b"puts 1", 0o644));
        files.insert("node_modules/x/index.js".to_string(), file(b"1", 0o644));
        files.insert("references/notes.md".to_string(), file(b"# notes", 0o644));
        let s = find_scripts(&files);
        let paths: Vec<&str> = s.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "bin/elf",
                "helper.rb",
                "scripts/data.json",
                "scripts/run.py",
                "tool"
            ]
        );
        let run = &s[3];
        assert_eq!(run.interpreter(), Some(&i("python3", &[])));
        assert_eq!(run.candidates(), [&i("python3", &[]), &i("/bin/true", &[])]);
        assert_eq!(s[4].interpreter(), Some(&i("perl", &[])));
        assert!(s[0].executable && s[0].interpreter().is_none());
        assert!(s[2].candidates().is_empty());
    }
}
