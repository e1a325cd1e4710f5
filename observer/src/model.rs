//! Small shared vocabulary of the pipeline (DESIGN.md "Categories").

use serde::{Deserialize, Serialize};

/// The four behaviour categories that divergence compares.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Network,
    Credential,
    Execution,
    Writes,
}

impl Category {
    pub const ALL: [Category; 4] = [
        Category::Network,
        Category::Credential,
        Category::Execution,
        Category::Writes,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Network => "network",
            Category::Credential => "credential",
            Category::Execution => "execution",
            Category::Writes => "writes",
        }
    }
}

/// Where a skill's static view came from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StaticSource {
    /// `--static FILE`: a static scanner's report.
    Imported,
    /// The built-in categoriser.
    Builtin,
}

/// What the static plane says a skill does.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StaticView {
    pub source: StaticSource,
    pub categories: Vec<Category>,
    pub declared_hosts: Vec<String>,
}

/// How faithfully the run reproduces the skill: a whole bundle, or just its `SKILL.md`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Fidelity {
    Bundle,
    Prompt,
}

impl Fidelity {
    pub fn as_str(self) -> &'static str {
        match self {
            Fidelity::Bundle => "bundle",
            Fidelity::Prompt => "prompt",
        }
    }
}
