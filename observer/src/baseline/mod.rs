//! Baselines: the first accepted behavioural summary of a skill (keyed by name and fidelity), so a
//! later run that shows new hosts, categories, programs or write classes raises `BEHAV_DRIFT`.
//!
//! [`BaselineStore`] is the storage interface; [`SqliteStore`] is the embedded implementation and
//! [`PostgresStore`] the one a fleet of workers shares (issue 8). [`open`] picks one from what
//! `--baseline` / `--store` name: a `postgres://` or `postgresql://` URL, else a SQLite file.

mod pg;
mod sqlite;
#[cfg(any(test, feature = "test-pg-server"))]
pub mod test_pg_server;

pub use pg::{is_postgres_url, redact, PostgresStore};
pub use sqlite::{default_path, default_path_from, SqliteStore};

use crate::model::{Category, Fidelity};
use crate::report::{CategoryFinding, Profile, Report, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    #[error("baseline store {path}: {msg}")]
    Open { path: String, msg: String },
    #[error("baseline store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("baseline store i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("baseline for {skill} ({fidelity}) is corrupt: {msg}")]
    Corrupt {
        skill: String,
        fidelity: String,
        msg: String,
    },
    #[error("no per-user data directory: set XDG_DATA_HOME or HOME, or pass --baseline FILE")]
    NoDataDir,
    #[error("baseline store backend: {0}")]
    Backend(String),
}

/// What a baseline remembers of a run: the profile dimensions drift compares.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BaselineSummary {
    pub skill: String,
    pub fidelity: Fidelity,
    pub digest: Option<String>,
    /// Set by the store when the summary is accepted (RFC 3339, UTC).
    #[serde(default)]
    pub accepted_at: String,
    pub hosts: BTreeSet<String>,
    pub categories: BTreeSet<Category>,
    pub programs: BTreeSet<String>,
    pub write_classes: BTreeSet<String>,
}

/// What a run shows that its baseline never did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drift {
    pub hosts: Vec<String>,
    pub categories: Vec<Category>,
    pub programs: Vec<String>,
    pub write_classes: Vec<String>,
}

impl Drift {
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
            && self.categories.is_empty()
            && self.programs.is_empty()
            && self.write_classes.is_empty()
    }
}

impl BaselineSummary {
    /// The summary of a finished report (what `observe baseline accept` stores).
    /// `None` when the run's fidelity is unknown: baselines are keyed by it.
    pub fn from_report(r: &Report) -> Option<BaselineSummary> {
        let fidelity = r.skill.fidelity?;
        Some(BaselineSummary::from_parts(
            &r.skill.name,
            fidelity,
            r.skill.digest.clone(),
            &r.profile,
            &r.categories,
        ))
    }

    pub fn from_parts(
        skill: &str,
        fidelity: Fidelity,
        digest: Option<String>,
        profile: &Profile,
        categories: &[CategoryFinding],
    ) -> BaselineSummary {
        BaselineSummary {
            skill: skill.to_string(),
            fidelity,
            digest,
            accepted_at: String::new(),
            hosts: profile.hosts.iter().map(|h| h.host.clone()).collect(),
            categories: categories.iter().map(|c| c.category).collect(),
            programs: profile
                .programs
                .iter()
                .filter(|p| p.ok)
                .map(|p| p.program_key.clone())
                .collect(),
            write_classes: profile
                .files
                .iter()
                .filter(|f| f.access.iter().any(|a| a.is_write()))
                .map(|f| f.class.as_str().to_string())
                .collect(),
        }
    }

    /// What `current` shows that `self` never did.
    pub fn drift(&self, current: &BaselineSummary) -> Drift {
        Drift {
            hosts: current.hosts.difference(&self.hosts).cloned().collect(),
            categories: current
                .categories
                .difference(&self.categories)
                .copied()
                .collect(),
            programs: current
                .programs
                .difference(&self.programs)
                .cloned()
                .collect(),
            write_classes: current
                .write_classes
                .difference(&self.write_classes)
                .cloned()
                .collect(),
        }
    }
}

/// One row of `observe baseline list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BaselineEntry {
    pub skill: String,
    pub fidelity: Fidelity,
    pub digest: Option<String>,
    pub accepted_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcceptOutcome {
    /// No baseline existed; this one is now stored.
    Inserted(BaselineSummary),
    /// A baseline already existed and was kept (the first accepted one wins).
    Kept(BaselineSummary),
    /// An existing baseline was replaced on request.
    Replaced(BaselineSummary),
}

impl AcceptOutcome {
    pub fn stored(&self) -> &BaselineSummary {
        match self {
            AcceptOutcome::Inserted(b) | AcceptOutcome::Kept(b) | AcceptOutcome::Replaced(b) => b,
        }
    }
}

/// A baseline store. Implementations must make `accept(_, false)` atomic: of several concurrent
/// first accepts of one key exactly one is stored and every caller gets that one back.
pub trait BaselineStore: Send + Sync {
    fn list(&self) -> Result<Vec<BaselineEntry>, BaselineError>;
    fn show(
        &self,
        skill: &str,
        fidelity: Fidelity,
    ) -> Result<Option<BaselineSummary>, BaselineError>;
    /// Store `summary` unless a baseline exists (`replace` overwrites it instead).
    fn accept(
        &self,
        summary: &BaselineSummary,
        replace: bool,
    ) -> Result<AcceptOutcome, BaselineError>;
    /// Remove a baseline; false when there was none.
    fn forget(&self, skill: &str, fidelity: Fidelity) -> Result<bool, BaselineError>;
}

/// The policy for a live run: the first complete, not-malicious run of a skill becomes its
/// baseline (an incomplete run would make every later complete run look like drift, and a
/// malicious one would teach the baseline the attack). Returns what the store now holds.
pub fn establish(
    store: &dyn BaselineStore,
    report: &Report,
) -> Result<Option<AcceptOutcome>, BaselineError> {
    if !report.run.complete || report.verdict == Verdict::Malicious {
        return Ok(None);
    }
    match BaselineSummary::from_report(report) {
        Some(s) => store.accept(&s, false).map(Some),
        None => Ok(None),
    }
}

/// The schema version every backend writes (SQLite's `user_version`, PostgreSQL's meta row).
const SCHEMA_VERSION: i64 = 1;

/// A store written by a newer build is refused rather than misread.
fn check_schema_version(v: i64) -> Result<(), BaselineError> {
    if v > SCHEMA_VERSION {
        return Err(BaselineError::Backend(format!(
            "store schema version {v} is newer than this build understands ({SCHEMA_VERSION})"
        )));
    }
    Ok(())
}

pub fn parse_fidelity(s: &str) -> Option<Fidelity> {
    match s {
        "bundle" => Some(Fidelity::Bundle),
        "prompt" => Some(Fidelity::Prompt),
        _ => None,
    }
}

/// A stored summary (JSON) and its acceptance time, as every backend keeps them.
fn decode_summary(
    skill: &str,
    fidelity: Fidelity,
    json: &str,
    accepted_at: String,
) -> Result<BaselineSummary, BaselineError> {
    let mut s: BaselineSummary =
        serde_json::from_str(json).map_err(|e| BaselineError::Corrupt {
            skill: skill.to_string(),
            fidelity: fidelity.as_str().to_string(),
            msg: e.to_string(),
        })?;
    s.accepted_at = accepted_at;
    Ok(s)
}

/// A `list` row from its stored columns.
fn decode_entry(
    skill: String,
    fidelity: String,
    digest: Option<String>,
    accepted_at: String,
) -> Result<BaselineEntry, BaselineError> {
    let f = parse_fidelity(&fidelity).ok_or_else(|| BaselineError::Corrupt {
        skill: skill.clone(),
        fidelity: fidelity.clone(),
        msg: "unknown fidelity".into(),
    })?;
    Ok(BaselineEntry {
        skill,
        fidelity: f,
        digest,
        accepted_at,
    })
}

/// Opens the store `spec` names: a PostgreSQL URL, a SQLite file, or (`None`) the per-user
/// SQLite file.
pub fn open(spec: Option<&std::ffi::OsStr>) -> Result<Box<dyn BaselineStore>, BaselineError> {
    let Some(spec) = spec else {
        return Ok(Box::new(SqliteStore::open_default()?));
    };
    match spec.to_str() {
        Some(url) if is_postgres_url(url) => Ok(Box::new(PostgresStore::open(url)?)),
        _ => Ok(Box::new(SqliteStore::open(std::path::Path::new(spec))?)),
    }
}

#[cfg(test)]
mod store_tests;
