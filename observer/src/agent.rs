//! The built-in agent's plan: which steps to run in the jail. This first planner runs every bundled
//! script with each interpreter it could be meant for (extension and shebang), one step each;
//! issue 5 extends it to instructed commands, hooks and gates.

use crate::bundle::Script;
use crate::jail::spec::StepSpec;

/// One step per script and interpreter, in path order, each with the workspace as working
/// directory. A script whose extension and shebang disagree runs under both, so a decoy shebang
/// (`#!/bin/true` on a `.py`) does not hide it.
pub fn plan_scripts(
    scripts: &[Script],
    skill_dir: &str,
    workspace: &str,
    step_timeout_ms: u64,
) -> Vec<StepSpec> {
    let mut sorted: Vec<&Script> = scripts.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut steps = Vec::new();
    for s in sorted {
        let rel = s.path.trim_start_matches('/');
        let abs = format!("{skill_dir}/{rel}");
        let candidates = s.candidates();
        if candidates.is_empty() && s.executable {
            steps.push(StepSpec {
                label: format!("script {rel}"),
                argv: vec![abs.clone()],
                cwd: workspace.to_string(),
                timeout_ms: step_timeout_ms,
            });
        }
        for i in candidates {
            let mut argv = vec![i.program.clone()];
            argv.extend(i.args.iter().cloned());
            argv.push(abs.clone());
            steps.push(StepSpec {
                label: format!("script {rel} ({})", i.program),
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
    use crate::bundle::{find_scripts, BundleFile};
    use std::collections::BTreeMap;

    fn files(list: &[(&str, &str, u32)]) -> BTreeMap<String, BundleFile> {
        list.iter()
            .map(|(p, d, m)| {
                (
                    p.to_string(),
                    BundleFile {
                        bytes: d.as_bytes().to_vec(),
                        mode: *m,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn plans_every_script_with_every_candidate_interpreter() {
        let f = files(&[
            ("SKILL.md", "---\nname: x\n---", 0o644),
            ("scripts/b.py", "#!/bin/true\nprint(1)", 0o644),
            ("scripts/a.sh", "echo hi", 0o644),
            ("tools/helper", "#!/bin/sh\necho", 0o755),
            ("references/doc.md", "# doc", 0o644),
        ]);
        let scripts = find_scripts(&f);
        let steps = plan_scripts(&scripts, "/h/.claude/skills/x", "/h/ws", 1000);
        let argvs: Vec<Vec<String>> = steps.iter().map(|s| s.argv.clone()).collect();
        assert!(
            argvs.contains(&vec![
                "bash".to_string(),
                "/h/.claude/skills/x/scripts/a.sh".to_string()
            ]),
            "{argvs:?}"
        );
        // The decoy shebang does not replace python.
        assert!(
            argvs
                .iter()
                .any(|a| a[0] == "python3" && a.last().unwrap().ends_with("b.py")),
            "{argvs:?}"
        );
        assert!(argvs.iter().any(|a| a[0] == "/bin/true"), "{argvs:?}");
        assert!(
            argvs
                .iter()
                .any(|a| a.last().unwrap().ends_with("tools/helper")),
            "{argvs:?}"
        );
        assert!(!argvs.iter().any(|a| a.last().unwrap().ends_with(".md")));
        assert!(steps.iter().all(|s| s.cwd == "/h/ws"));
    }
}
