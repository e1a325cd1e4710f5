//! The static view: what the static plane says a skill does (categories and declared hosts),
//! imported from a scanner's report or computed by the built-in categoriser. Rules and
//! definitions: docs/statics.md.

mod categorise;
mod hosts;
mod import;
mod markdown;
mod rules;

pub use categorise::{categories_of, categorise_texts, tool_findings, Finding};
pub use hosts::{
    declared_hosts, hosts_in_front_matter, hosts_in_text, integrations_sections, normalise_host,
};
pub use import::{parse_static, InvalidStatic};
pub use markdown::{code_snippets, line_runs_program, Snippet};

use crate::bundle::SkillUnit;
use crate::model::{StaticSource, StaticView};
use std::io::Read;
use std::path::Path;

/// Largest `--static` file read (a full scanner report can be big, but not unbounded).
pub const MAX_STATIC_BYTES: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum StaticsError {
    #[error("cannot read static view {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("static view {path} is larger than {limit} bytes")]
    TooLarge { path: String, limit: u64 },
    #[error("static view {path}: {problem}")]
    Invalid {
        path: String,
        problem: InvalidStatic,
    },
}

/// The built-in categoriser's full answer, with the evidence behind each category.
#[derive(Debug, Clone, PartialEq)]
pub struct Categorisation {
    pub findings: Vec<Finding>,
    pub view: StaticView,
}

/// Categorise a unit: `SKILL.md` (with its `allowed-tools`) and every bundled text file; hosts
/// from the front matter, the description and `## Integrations` sections.
pub fn categorise(unit: &SkillUnit) -> Categorisation {
    let texts = unit
        .files
        .iter()
        .filter_map(|(p, f)| f.text().map(|t| (p.as_str(), t)));
    let mut findings = categorise_texts(texts);
    let skill_md = unit.skill_md().and_then(|f| f.text()).unwrap_or("");
    findings.extend(tool_findings(&unit.front_matter.allowed_tools, skill_md));
    let view = StaticView {
        source: StaticSource::Builtin,
        categories: categories_of(&findings),
        declared_hosts: declared_hosts(&unit.front_matter, &unit.instructions),
    };
    Categorisation { findings, view }
}

/// The static view for a unit: imported from `imported` when given, else built in.
pub fn static_view(unit: &SkillUnit, imported: Option<&Path>) -> Result<StaticView, StaticsError> {
    match imported {
        None => Ok(categorise(unit).view),
        Some(path) => import_file(path),
    }
}

/// Read and parse a `--static` file.
pub fn import_file(path: &Path) -> Result<StaticView, StaticsError> {
    let shown = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|source| StaticsError::Io {
        path: shown.clone(),
        source,
    })?;
    let mut bytes = Vec::new();
    f.take(MAX_STATIC_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| StaticsError::Io {
            path: shown.clone(),
            source,
        })?;
    if bytes.len() as u64 > MAX_STATIC_BYTES {
        return Err(StaticsError::TooLarge {
            path: shown,
            limit: MAX_STATIC_BYTES,
        });
    }
    parse_static(&bytes).map_err(|problem| StaticsError::Invalid {
        path: shown,
        problem,
    })
}

#[cfg(test)]
mod tests;
