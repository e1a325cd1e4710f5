//! `make` targets the instructions name (`make build`, `make -C tools install`, "then run make
//! setup"), run where the Makefile is.

use super::hooks::{dir_of, join, vendored};
use super::{commands, Draft, PlanContext, Source, StepKind};
use crate::bundle::SkillUnit;
use regex::Regex;
use std::sync::LazyLock;

/// `make [options] target` named in the instructions.
#[derive(Debug, Clone)]
pub struct MakeMention {
    /// Empty for the default target.
    pub target: String,
    /// `-C dir` when given.
    pub dir: Option<String>,
    pub source: Source,
    pub gate: Option<String>,
    /// Inside a command (code); prose mentions count only for targets the Makefile defines.
    pub in_code: bool,
}

/// `make` invocations in one shell line: target and `-C` directory.
pub(crate) fn make_in_line(line: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for seg in line.split(['|', ';', '&', '(', ')', '`']) {
        let (words, _) = commands::shell_words(seg);
        let mut w = words.iter().map(String::as_str).peekable();
        while let Some(&x) = w.peek() {
            if x.contains('=')
                || matches!(x, "sudo" | "env" | "nohup" | "time" | "exec" | "command")
            {
                w.next();
            } else {
                break;
            }
        }
        if w.next() != Some("make") {
            continue;
        }
        let mut dir = None;
        let mut target = String::new();
        while let Some(x) = w.next() {
            match x {
                "-C" | "--directory" => dir = w.next().map(str::to_string),
                "-f" | "--file" | "-I" | "-o" | "-W" => {
                    w.next();
                }
                x if x.starts_with('-') || x.contains('=') => {}
                x => {
                    target = x.to_string();
                    break;
                }
            }
        }
        if target.is_empty()
            || target
                .chars()
                .all(|c| c.is_alphanumeric() || "_.-/".contains(c))
        {
            out.push((target, dir));
        }
    }
    out
}

/// "run make build" in prose: candidate targets (kept only when the Makefile defines them).
pub(crate) fn prose_make(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let words: Vec<&str> = text.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        if *w == "make" {
            if let Some(t) = words.get(i + 1) {
                let t = t.trim_end_matches(['.', ',', ';', ':']);
                if !t.is_empty() && t.chars().all(|c| c.is_alphanumeric() || "_-".contains(c)) {
                    out.push((t.to_string(), None));
                }
            }
        }
    }
    out
}

/// Targets a Makefile defines, and its default (first) target.
fn make_targets_of(text: &str) -> (Vec<String>, Option<String>) {
    static RULE: LazyLock<Regex> = LazyLock::new(|| {
        crate::util::regex(r"(?m)^([A-Za-z0-9_.\-/][A-Za-z0-9_.\-/ ]*?)\s*::?(?:[^=]|$)")
            .expect("valid")
    });
    let mut targets = Vec::new();
    for c in RULE.captures_iter(text) {
        for t in c[1].split_whitespace() {
            if !t.starts_with('.') && !t.contains('%') && !targets.contains(&t.to_string()) {
                targets.push(t.to_string());
            }
        }
    }
    let default = targets.first().cloned();
    (targets, default)
}

/// `make` targets named in the instructions, run where the Makefile is; the Makefile's other
/// targets are noted as not run.
pub fn make_targets(
    unit: &SkillUnit,
    ctx: &PlanContext,
    mentions: &[MakeMention],
    not_run: &mut Vec<(String, String)>,
) -> Vec<Draft> {
    let makefiles: Vec<(&String, &str)> = unit
        .files
        .iter()
        .filter(|(p, _)| {
            !vendored(p)
                && matches!(
                    p.rsplit('/').next(),
                    Some("Makefile" | "makefile" | "GNUmakefile")
                )
        })
        .filter_map(|(p, f)| f.text().map(|t| (p, t)))
        .collect();
    let mut out = Vec::new();
    let mut ran: Vec<(String, String)> = Vec::new();
    for m in mentions {
        // The Makefile in `-C dir`, else the shallowest one.
        let mf = m
            .dir
            .as_ref()
            .and_then(|d| {
                let d = d.trim_start_matches("./").trim_end_matches('/');
                makefiles
                    .iter()
                    .find(|(p, _)| dir_of(p) == d || dir_of(p).ends_with(&format!("/{d}")))
            })
            .or_else(|| makefiles.iter().min_by_key(|(p, _)| p.matches('/').count()));
        let Some((path, text)) = mf else { continue };
        let (targets, default) = make_targets_of(text);
        let target = if m.target.is_empty() {
            default.clone().unwrap_or_default()
        } else {
            m.target.clone()
        };
        if !m.in_code && !targets.contains(&target) {
            continue;
        }
        if ran.contains(&((*path).clone(), target.clone())) {
            continue;
        }
        ran.push(((*path).clone(), target.clone()));
        let mut argv = vec!["make".to_string()];
        if !m.target.is_empty() {
            argv.push(m.target.clone());
        }
        let mut d = Draft::new(
            StepKind::MakeTarget,
            format!(
                "make {} ({path})",
                if m.target.is_empty() {
                    "(default)"
                } else {
                    &m.target
                }
            ),
            argv,
            &join(&ctx.skill_dir, dir_of(path)),
            m.source.clone(),
        );
        d.gate = m.gate.clone();
        out.push(d);
    }
    for (path, text) in &makefiles {
        let (targets, _) = make_targets_of(text);
        let rest: Vec<&String> = targets
            .iter()
            .filter(|t| !ran.iter().any(|(p, r)| p == *path && r == *t))
            .collect();
        if !rest.is_empty() {
            not_run.push((
                format!(
                    "{path} targets {}",
                    rest.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "not named in the instructions".into(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_targets_in_lines() {
        assert_eq!(make_in_line("make build"), [("build".to_string(), None)]);
        assert_eq!(
            make_in_line("cd x && make -C tools -j4 V=1 install | tee log"),
            [("install".to_string(), Some("tools".to_string()))]
        );
        assert_eq!(make_in_line("make"), [(String::new(), None)]);
        assert!(make_in_line("cmake ..").is_empty());
        assert_eq!(
            prose_make("then make setup, and make sure it works"),
            [("setup".to_string(), None), ("sure".to_string(), None)]
        );
    }

    #[test]
    fn makefile_targets() {
        let (t, d) = make_targets_of(".PHONY: all\nall: build\n\t@echo\nbuild:\n\tcc x\ninstall test: all\nVAR := 1\n%.o: %.c\n");
        assert_eq!(t, ["all", "build", "install", "test"]);
        assert_eq!(d.as_deref(), Some("all"));
    }
}
