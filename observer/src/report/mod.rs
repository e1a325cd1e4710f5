//! The report: versioned JSON for machines (docs/report-format.md, docs/report.schema.json), a short
//! summary for people, and a self-contained HTML page.
//!
//! Everything here is deterministic: lists are sorted, maps are ordered, and the only timestamps
//! (`run.started_at`, `baseline.accepted_at`) come from the inputs, never from the clock.

mod html;
pub mod plan;
mod summary;

pub use html::render_html;
pub use summary::summary;

use crate::model::{Category, Fidelity, StaticView};
use serde::{Deserialize, Serialize};

/// Bumped when a field changes meaning or disappears; adding a field keeps the version.
pub const SCHEMA_VERSION: u32 = 1;

/// The JSON Schema of [`Report`], shipped in `docs/`.
pub const REPORT_SCHEMA_JSON: &str = include_str!("../../../docs/report.schema.json");

/// Exit statuses of `observe` (docs/report-format.md).
pub mod exit {
    pub const CLEAN: i32 = 0;
    pub const INTERNAL_ERROR: i32 = 1;
    pub const BAD_INPUT: i32 = 2;
    pub const SUSPICIOUS: i32 = 10;
    pub const MALICIOUS: i32 = 20;
    pub const INCOMPLETE: i32 = 30;
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    Clean,
    Incomplete,
    Suspicious,
    Malicious,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Clean => "CLEAN",
            Verdict::Incomplete => "INCOMPLETE",
            Verdict::Suspicious => "SUSPICIOUS",
            Verdict::Malicious => "MALICIOUS",
        }
    }
    /// The process exit status for this verdict.
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Clean => exit::CLEAN,
            Verdict::Suspicious => exit::SUSPICIOUS,
            Verdict::Malicious => exit::MALICIOUS,
            Verdict::Incomplete => exit::INCOMPLETE,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Band {
    Trusted,
    Review,
    Blocked,
}

impl Band {
    pub fn as_str(self) -> &'static str {
        match self {
            Band::Trusted => "trusted",
            Band::Review => "review",
            Band::Blocked => "blocked",
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Low,
    Medium,
    High,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

/// Where a path lies in the jail, as the analyser sees it (docs/report-format.md).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum PathClass {
    Workspace,
    Temp,
    SkillOwn,
    OtherSkill,
    AgentSettings,
    ShellStartup,
    Scheduler,
    PathDir,
    Credential,
    UserDocument,
    PackageConfig,
    Cache,
    Home,
    Pseudo,
    System,
}

impl PathClass {
    pub fn as_str(self) -> &'static str {
        match self {
            PathClass::Workspace => "workspace",
            PathClass::Temp => "temp",
            PathClass::SkillOwn => "skill_own",
            PathClass::OtherSkill => "other_skill",
            PathClass::AgentSettings => "agent_settings",
            PathClass::ShellStartup => "shell_startup",
            PathClass::Scheduler => "scheduler",
            PathClass::PathDir => "path_dir",
            PathClass::Credential => "credential",
            PathClass::UserDocument => "user_document",
            PathClass::PackageConfig => "package_config",
            PathClass::Cache => "cache",
            PathClass::Home => "home",
            PathClass::Pseudo => "pseudo",
            PathClass::System => "system",
        }
    }
}

/// What was done to a file.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum FileAccess {
    Read,
    Write,
    Create,
    Delete,
    Chmod,
    Chown,
    RenameFrom,
    RenameTo,
    Link,
    Symlink,
    Mkdir,
    Truncate,
}

impl FileAccess {
    /// Changes the file system (everything but a read).
    pub fn is_write(self) -> bool {
        self != FileAccess::Read
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub schema_version: u32,
    pub skill: SkillInfo,
    pub run: RunInfo,
    pub static_view: StaticView,
    pub baseline: Option<BaselineRef>,
    pub profile: Profile,
    pub categories: Vec<CategoryFinding>,
    pub indicators: Vec<Indicator>,
    pub score: u32,
    pub band: Band,
    pub verdict: Verdict,
    /// The agent's plan, what ran and coverage (absent when the trace recorded no plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<plan::PlanReport>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SkillInfo {
    pub name: String,
    pub digest: Option<String>,
    pub fidelity: Option<Fidelity>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunInfo {
    pub run_id: String,
    pub os: String,
    /// Timestamp copied from the trace header (the only wall-clock value of a run).
    pub started_at: String,
    pub duration_ms: u64,
    pub complete: bool,
    pub incomplete_reasons: Vec<String>,
    pub events: u64,
    /// Limits, their enforcement and what the run used (absent in traces from before issue 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<crate::limits::ResourceReport>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BaselineRef {
    pub digest: Option<String>,
    /// Timestamp of the baseline's acceptance, from the baseline store.
    pub accepted_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CategoryFinding {
    pub category: Category,
    pub declared: bool,
    pub evidence: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Indicator {
    pub id: String,
    pub severity: Severity,
    pub summary: String,
    pub evidence: Vec<u64>,
    /// What this finding adds to the score (before de-duplication by id and the cap).
    pub weight: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Profile {
    pub steps: Vec<StepInfo>,
    pub processes: Vec<ProcessInfo>,
    pub programs: Vec<ProgramInfo>,
    pub hosts: Vec<HostInfo>,
    pub files: Vec<FileInfo>,
    pub credentials: Vec<CredentialUse>,
    pub canary_hits: Vec<CanaryHitInfo>,
    pub denials: Vec<DenialInfo>,
    pub notes: Vec<NoteInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepInfo {
    pub step: u32,
    pub label: String,
    pub argv: Vec<String>,
    pub start_seq: u64,
    pub end_seq: Option<u64>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProcessInfo {
    pub pid: i32,
    pub parent: Option<i32>,
    pub step: Option<u32>,
    pub first_seq: u64,
    /// The last program the process ran (after a successful exec).
    pub program: Option<String>,
    pub argv: Vec<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProgramInfo {
    pub seq: u64,
    pub pid: i32,
    pub step: Option<u32>,
    pub program: String,
    /// The program spelled relative to run-specific folders (`<skill>/…`, `~/…`, `<temp>`), as
    /// baselines compare it.
    pub program_key: String,
    pub argv: Vec<String>,
    pub ok: bool,
    /// False for the agent's own interpreter running the skill's bundled script.
    pub execution: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostInfo {
    pub host: String,
    pub addrs: Vec<String>,
    pub ports: Vec<u16>,
    pub urls: Vec<String>,
    pub via: Vec<String>,
    pub declared: bool,
    pub sent_data: bool,
    pub evidence: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileInfo {
    pub path: String,
    pub class: PathClass,
    pub access: Vec<FileAccess>,
    pub failed: bool,
    pub evidence: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CredentialUse {
    pub credential: String,
    pub via: String,
    /// An implicit read by an ordinary client (`~/.netrc` by an HTTP library, a tool's own store).
    pub ambient: bool,
    pub evidence: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CanaryHitInfo {
    pub seq: u64,
    pub canary: String,
    pub credential: String,
    pub chain: Vec<String>,
    pub in_event: u64,
    pub host: Option<String>,
    pub service_hosts: Vec<String>,
    pub own_service: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DenialInfo {
    pub seq: u64,
    pub pid: i32,
    pub syscall: String,
    pub arch: String,
    pub action: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NoteInfo {
    pub seq: u64,
    pub kind: String,
    pub note: String,
    pub detail: String,
}

impl Report {
    /// Pretty JSON with a trailing newline: the byte-for-byte form `observe` writes.
    pub fn to_json(&self) -> String {
        // Serialising plain structs with string keys cannot fail.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct_and_documented() {
        let all = [
            Verdict::Clean.exit_code(),
            Verdict::Suspicious.exit_code(),
            Verdict::Malicious.exit_code(),
            Verdict::Incomplete.exit_code(),
            exit::BAD_INPUT,
            exit::INTERNAL_ERROR,
        ];
        assert_eq!(all, [0, 10, 20, 30, 2, 1]);
        let doc = include_str!("../../../docs/report-format.md");
        for (v, c) in [
            ("CLEAN", 0),
            ("SUSPICIOUS", 10),
            ("MALICIOUS", 20),
            ("INCOMPLETE", 30),
        ] {
            assert!(
                doc.contains(&format!("| `{v}` | {c} |")),
                "report-format.md lacks {v}"
            );
        }
    }
}

#[cfg(test)]
mod report_tests;
