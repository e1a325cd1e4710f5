//! Small bundles for the planner's tests, built in memory.

use crate::bundle::{find_scripts, parse_skill_md, BundleFile, SkillUnit};
use std::collections::{BTreeMap, BTreeSet};

/// A unit from `(path, content, mode)` triples. `SKILL.md`, when given, is parsed for the front
/// matter and instructions.
pub fn unit(files: &[(&str, &str, u32)]) -> SkillUnit {
    let files: BTreeMap<String, BundleFile> = files
        .iter()
        .map(|(p, d, m)| {
            (
                p.to_string(),
                BundleFile {
                    bytes: d.as_bytes().to_vec(),
                    mode: *m,
                },
            )
        })
        .collect();
    let mut dirs = BTreeSet::new();
    for p in files.keys() {
        let mut cur = p.as_str();
        while let Some((d, _)) = cur.rsplit_once('/') {
            dirs.insert(d.to_string());
            cur = d;
        }
    }
    let md = files
        .get("SKILL.md")
        .and_then(|f| parse_skill_md(&f.bytes).ok());
    let (front_matter, instructions) = md.map(|m| (m.front_matter, m.body)).unwrap_or_default();
    SkillUnit {
        name: front_matter
            .name
            .clone()
            .unwrap_or_else(|| "My Skill".into()),
        name_is_fallback: false,
        install_name: "my-skill".into(),
        description: front_matter.description.clone(),
        front_matter,
        instructions,
        fidelity: crate::model::Fidelity::Bundle,
        digest: "ab".repeat(32),
        location: ".".into(),
        scripts: find_scripts(&files),
        files,
        dirs,
    }
}

/// A unit with just a `SKILL.md` holding `body` after a minimal front matter, plus `extra`.
pub fn skill(body: &str, extra: &[(&str, &str, u32)]) -> SkillUnit {
    let md = format!("---\nname: my-skill\ndescription: Test skill\n---\n{body}");
    let mut all: Vec<(&str, &str, u32)> = vec![("SKILL.md", md.as_str(), 0o644)];
    all.extend_from_slice(extra);
    unit(&all)
}
