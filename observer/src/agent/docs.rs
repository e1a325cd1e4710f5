//! The texts an agent reads as instructions: the `description` (always in the agent's context),
//! the body of `SKILL.md`, and the bundled documents those point to (`see references/setup.md`),
//! followed a few levels deep.

use super::scripts::PathIndex;
use crate::bundle::{SkillUnit, SKILL_MD};

/// Linked documents are followed this many links away from `SKILL.md`.
pub const MAX_LINK_DEPTH: usize = 3;
/// At most this many linked documents are read.
pub const MAX_LINKED_DOCS: usize = 16;

const DOC_EXT: &[&str] = &[".md", ".markdown", ".mdx", ".txt", ".rst"];

/// One instruction text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    /// File in the bundle it comes from.
    pub file: String,
    pub text: String,
    /// Lines of the file before `text` starts (front matter), so lines map back to the file.
    pub line_offset: usize,
}

/// Lines before the body in `SKILL.md` (front matter and its fences).
fn body_offset(unit: &SkillUnit) -> usize {
    let Some(raw) = unit.skill_md().and_then(|f| f.text()) else {
        return 0;
    };
    let norm = raw.replace("\r\n", "\n");
    if norm.ends_with(&unit.instructions) {
        let head = &norm[..norm.len() - unit.instructions.len()];
        return head.matches('\n').count();
    }
    0
}

/// Instruction texts, `SKILL.md` first.
pub fn instruction_docs(unit: &SkillUnit) -> Vec<Doc> {
    let mut out = Vec::new();
    if let Some(d) = &unit.description {
        let line = unit
            .skill_md()
            .and_then(|f| f.text())
            .and_then(|t| {
                t.lines()
                    .position(|l| l.trim_start().starts_with("description"))
            })
            .unwrap_or(0);
        out.push(Doc {
            file: SKILL_MD.into(),
            text: d.clone(),
            line_offset: line,
        });
    }
    out.push(Doc {
        file: SKILL_MD.into(),
        text: unit.instructions.clone(),
        line_offset: body_offset(unit),
    });
    let index = PathIndex::new_folding_case(
        unit.files
            .keys()
            .filter(|p| p.as_str() != SKILL_MD)
            .filter(|p| {
                let l = p.to_ascii_lowercase();
                DOC_EXT.iter().any(|e| l.ends_with(e))
            })
            .map(String::as_str),
        &unit.files,
    );
    let mut frontier: Vec<String> = vec![unit.instructions.clone()];
    if let Some(d) = &unit.description {
        frontier.push(d.clone());
    }
    let mut read: Vec<String> = Vec::new();
    for _ in 0..MAX_LINK_DEPTH {
        let mut next = Vec::new();
        for text in &frontier {
            for m in index.find(text, "") {
                if read.len() >= MAX_LINKED_DOCS || read.contains(&m.script) {
                    continue;
                }
                let Some(t) = unit.files.get(&m.script).and_then(|f| f.text()) else {
                    continue;
                };
                read.push(m.script.clone());
                let t = t.replace("\r\n", "\n");
                next.push(t.clone());
                out.push(Doc {
                    file: m.script,
                    text: t,
                    line_offset: 0,
                });
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::test_support::{skill, unit};

    #[test]
    fn follows_links_a_few_levels_and_maps_lines() {
        let u = skill(
            "Read [setup](references/SETUP.md) first.\n",
            &[
                ("references/setup.md", "Then see more.md\n", 0o644),
                ("references/more.md", "x", 0o644),
                ("references/unlinked.md", "y", 0o644),
            ],
        );
        let d = instruction_docs(&u);
        let files: Vec<&str> = d.iter().map(|d| d.file.as_str()).collect();
        assert_eq!(
            files,
            [
                "SKILL.md",
                "SKILL.md",
                "references/setup.md",
                "references/more.md"
            ]
        );
        // Front matter is 4 lines: the body starts on line 5.
        assert_eq!(d[1].line_offset, 4);
        assert_eq!(d[0].text, "Test skill");
        assert_eq!(d[0].line_offset, 2);
    }

    #[test]
    fn link_cycles_and_limits_terminate() {
        let mut files: Vec<(String, String)> = Vec::new();
        for i in 0..40 {
            files.push((
                format!("docs/d{i}.md"),
                format!("see docs/d{}.md and SKILL.md", (i + 1) % 40),
            ));
        }
        let mut all: Vec<(&str, &str, u32)> =
            vec![("SKILL.md", "---\nname: x\n---\nsee docs/d0.md\n", 0o644)];
        all.extend(files.iter().map(|(p, t)| (p.as_str(), t.as_str(), 0o644)));
        let d = instruction_docs(&unit(&all));
        assert!(d.len() <= 2 + MAX_LINKED_DOCS);
        assert_eq!(d.len(), 1 + MAX_LINK_DEPTH);
    }
}
