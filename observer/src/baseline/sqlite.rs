//! The embedded baseline store (SQLite, WAL mode). Safe for many `observe` processes at once:
//! each write is one `BEGIN IMMEDIATE` transaction, readers never block writers, and a busy
//! timeout rides out contention instead of failing.

use super::{
    decode_entry, decode_summary, AcceptOutcome, BaselineEntry, BaselineError, BaselineStore,
    BaselineSummary,
};
use crate::model::Fidelity;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// `$XDG_DATA_HOME/skill-observer/baselines.sqlite`, else `~/.local/share/skill-observer/…`.
pub fn default_path() -> Result<PathBuf, BaselineError> {
    default_path_from(std::env::var_os("XDG_DATA_HOME"), std::env::var_os("HOME"))
}

/// [`default_path`] for given `XDG_DATA_HOME` and `HOME` values. A relative `XDG_DATA_HOME` is
/// ignored, as the XDG specification requires.
pub fn default_path_from(
    xdg: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf, BaselineError> {
    let base = match xdg.filter(|v| Path::new(v).is_absolute()) {
        Some(x) => PathBuf::from(x),
        None => match home.filter(|v| Path::new(v).is_absolute()) {
            Some(h) => PathBuf::from(h).join(".local").join("share"),
            None => return Err(BaselineError::NoDataDir),
        },
    };
    Ok(base.join("skill-observer").join("baselines.sqlite"))
}

pub struct SqliteStore {
    // rusqlite connections are Send but not Sync; a mutex lets one store serve several threads.
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl SqliteStore {
    /// Open (creating if needed) the store at the default per-user path.
    pub fn open_default() -> Result<SqliteStore, BaselineError> {
        SqliteStore::open(&default_path()?)
    }

    /// Open (creating if needed) the store in `path` (`--baseline FILE`).
    pub fn open(path: &Path) -> Result<SqliteStore, BaselineError> {
        let err = |msg: String| BaselineError::Open {
            path: path.display().to_string(),
            msg,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| err(format!("cannot create {}: {e}", dir.display())))?;
        }
        let conn = Connection::open(path).map_err(|e| err(e.to_string()))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| err(e.to_string()))?;
        // journal_mode returns a row; a file that is not a database fails here with a clear message.
        // Switching a fresh file to WAL takes an exclusive lock and reports SQLITE_BUSY without
        // calling the busy handler, so workers opening a new store at once retry here.
        let started = std::time::Instant::now();
        let mode: String = loop {
            match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)) {
                Ok(m) => break m,
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if f.code == rusqlite::ErrorCode::DatabaseBusy
                        && started.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(err(format!("not a usable SQLite database: {e}"))),
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(path = %path.display(), mode, "baseline store could not switch to WAL");
        }
        conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
            .map_err(|e| err(e.to_string()))?;
        let store = SqliteStore {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
        };
        store.migrate().map_err(|e| err(e.to_string()))?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent (transactions roll back).
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn migrate(&self) -> Result<(), BaselineError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let v: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        super::check_schema_version(v)?;
        if v < 1 {
            tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS baselines (
                    skill       TEXT NOT NULL,
                    fidelity    TEXT NOT NULL,
                    digest      TEXT,
                    accepted_at TEXT NOT NULL,
                    summary     TEXT NOT NULL,
                    PRIMARY KEY (skill, fidelity)
                 );
                 PRAGMA user_version = 1;",
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn read(
        conn: &Connection,
        skill: &str,
        fidelity: Fidelity,
    ) -> Result<Option<BaselineSummary>, BaselineError> {
        let row: Option<(String, String)> = conn
            .query_row(
                "SELECT summary, accepted_at FROM baselines WHERE skill = ?1 AND fidelity = ?2",
                params![skill, fidelity.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        row.map(|(json, at)| decode_summary(skill, fidelity, &json, at))
            .transpose()
    }
}

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%SZ','now')";

impl BaselineStore for SqliteStore {
    fn list(&self) -> Result<Vec<BaselineEntry>, BaselineError> {
        let conn = self.conn();
        let mut st = conn.prepare(
            "SELECT skill, fidelity, digest, accepted_at FROM baselines ORDER BY skill, fidelity",
        )?;
        let rows = st.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get(2)?,
                r.get(3)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (skill, fid, digest, accepted_at) = row?;
            out.push(decode_entry(skill, fid, digest, accepted_at)?);
        }
        Ok(out)
    }

    fn show(
        &self,
        skill: &str,
        fidelity: Fidelity,
    ) -> Result<Option<BaselineSummary>, BaselineError> {
        SqliteStore::read(&self.conn(), skill, fidelity)
    }

    fn accept(
        &self,
        summary: &BaselineSummary,
        replace: bool,
    ) -> Result<AcceptOutcome, BaselineError> {
        let mut stored = summary.clone();
        stored.accepted_at = String::new();
        let json =
            serde_json::to_string(&stored).map_err(|e| BaselineError::Backend(e.to_string()))?;
        let mut conn = self.conn();
        // IMMEDIATE takes the write lock up front, so check-then-insert cannot interleave.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let existed = SqliteStore::read(&tx, &summary.skill, summary.fidelity)?;
        let outcome = match (existed, replace) {
            (Some(old), false) => AcceptOutcome::Kept(old),
            (existed, _) => {
                tx.execute(
                    &format!(
                        "INSERT INTO baselines (skill, fidelity, digest, accepted_at, summary)
                         VALUES (?1, ?2, ?3, {NOW}, ?4)
                         ON CONFLICT (skill, fidelity) DO UPDATE SET
                           digest = excluded.digest, accepted_at = excluded.accepted_at, summary = excluded.summary"
                    ),
                    params![summary.skill, summary.fidelity.as_str(), summary.digest, json],
                )?;
                let now =
                    SqliteStore::read(&tx, &summary.skill, summary.fidelity)?.ok_or_else(|| {
                        BaselineError::Backend("row vanished inside its transaction".into())
                    })?;
                if existed.is_some() {
                    AcceptOutcome::Replaced(now)
                } else {
                    AcceptOutcome::Inserted(now)
                }
            }
        };
        tx.commit()?;
        Ok(outcome)
    }

    fn forget(&self, skill: &str, fidelity: Fidelity) -> Result<bool, BaselineError> {
        let n = self.conn().execute(
            "DELETE FROM baselines WHERE skill = ?1 AND fidelity = ?2",
            params![skill, fidelity.as_str()],
        )?;
        Ok(n > 0)
    }
}

#[cfg(test)]
#[path = "sqlite_tests.rs"]
mod tests;
