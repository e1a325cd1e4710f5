//! The built-in agent's plan: which steps to run in the jail. This first planner runs every bundled
//! script with the right interpreter, one step each; issue 5 extends it to instructed commands,
//! hooks and gates.

use crate::image::SkillFile;
use crate::jail::spec::StepSpec;

/// The argv that runs `path` (absolute, inside the jail): by extension first, then by shebang,
/// then directly if executable. `None` when the file is not something to run.
pub fn interpreter_argv(path: &str, data: &[u8], mode: u32) -> Option<Vec<String>> {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    let by_ext: Option<&[&str]> = match ext.as_deref() {
        Some("py") => Some(&["python3"]),
        Some("sh") => Some(&["sh"]),
        Some("bash") => Some(&["bash"]),
        Some("zsh") => Some(&["bash"]),
        Some("js") | Some("mjs") | Some("cjs") => Some(&["node"]),
        Some("rb") => Some(&["ruby"]),
        Some("pl") => Some(&["perl"]),
        _ => None,
    };
    // A shebang names the interpreter the author meant (e.g. `bash` for a `.sh` file).
    if let Some(line) = data.strip_prefix(b"#!") {
        let end = line
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(line.len())
            .min(256);
        let line = String::from_utf8_lossy(&line[..end]);
        let mut parts: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        if !parts.is_empty() {
            parts.push(path.to_string());
            return Some(parts);
        }
    }
    if let Some(cmd) = by_ext {
        let mut v: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        v.push(path.to_string());
        return Some(v);
    }
    if mode & 0o111 != 0 && !data.is_empty() {
        return Some(vec![path.to_string()]);
    }
    None
}

/// One step per script under `scripts/` (and per executable elsewhere in the bundle), in path
/// order, each with the workspace as working directory.
pub fn plan_scripts(
    files: &[SkillFile],
    skill_dir: &str,
    workspace: &str,
    step_timeout_ms: u64,
) -> Vec<StepSpec> {
    let mut sorted: Vec<&SkillFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut steps = Vec::new();
    for f in sorted {
        let rel = f.path.trim_start_matches('/');
        let in_scripts = rel.starts_with("scripts/");
        let executable = f.mode & 0o111 != 0;
        if !in_scripts && !executable {
            continue;
        }
        let abs = format!("{skill_dir}/{rel}");
        if let Some(argv) = interpreter_argv(&abs, &f.data, f.mode) {
            steps.push(StepSpec {
                label: format!("script {rel}"),
                argv,
                cwd: workspace.to_string(),
                timeout_ms: step_timeout_ms,
            });
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(path: &str, data: &str, mode: u32) -> SkillFile {
        SkillFile {
            path: path.into(),
            data: data.as_bytes().to_vec(),
            mode,
        }
    }

    #[test]
    fn interpreters() {
        assert_eq!(
            interpreter_argv("/s/a.py", b"print(1)", 0o644).unwrap(),
            vec!["python3", "/s/a.py"]
        );
        assert_eq!(
            interpreter_argv("/s/a.sh", b"#!/usr/bin/env bash\necho", 0o644).unwrap(),
            vec!["/usr/bin/env", "bash", "/s/a.sh"]
        );
        assert_eq!(
            interpreter_argv("/s/run", b"#!/bin/sh -e\n", 0o755).unwrap(),
            vec!["/bin/sh", "-e", "/s/run"]
        );
        assert_eq!(
            interpreter_argv("/s/bin", b"\x7fELF", 0o755).unwrap(),
            vec!["/s/bin"]
        );
        assert!(interpreter_argv("/s/notes.txt", b"hello", 0o644).is_none());
    }

    #[test]
    fn plans_scripts_and_executables_only() {
        let files = vec![
            f("SKILL.md", "---\nname: x\n---", 0o644),
            f("scripts/b.py", "print(1)", 0o644),
            f("scripts/a.sh", "echo hi", 0o644),
            f("tools/helper", "#!/bin/sh\necho", 0o755),
            f("references/doc.md", "# doc", 0o644),
        ];
        let steps = plan_scripts(&files, "/h/.claude/skills/x", "/h/ws", 1000);
        let labels: Vec<_> = steps.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            vec![
                "script scripts/a.sh",
                "script scripts/b.py",
                "script tools/helper"
            ]
        );
        assert!(steps.iter().all(|s| s.cwd == "/h/ws"));
    }
}
