//! The fleet baseline store (PostgreSQL): every worker of a fleet reads and writes the same
//! baselines. A first accept is one `INSERT … ON CONFLICT DO NOTHING`, so of several workers
//! establishing the first baseline of a skill at once exactly one row is stored and every worker
//! reads that one back; a per-key advisory lock serialises read-then-write (replace) the way
//! SQLite's `BEGIN IMMEDIATE` does.

use super::{
    decode_entry, decode_summary, AcceptOutcome, BaselineEntry, BaselineError, BaselineStore,
    BaselineSummary,
};
use crate::model::Fidelity;
use postgres::{Client, NoTls, Transaction};
use std::sync::Mutex;
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Taken by every migration so workers starting together do not race on `CREATE TABLE`
/// (PostgreSQL's `IF NOT EXISTS` is not safe against a concurrent creation).
const MIGRATION_LOCK: i64 = 0x736b_6f62_7376_0001;
/// Accepted-at timestamps in the same RFC 3339 shape the SQLite store writes.
const NOW: &str = r#"to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')"#;

/// True for the URLs `--baseline` / `--store` hand to this store rather than to SQLite.
pub fn is_postgres_url(spec: &str) -> bool {
    spec.starts_with("postgres://") || spec.starts_with("postgresql://")
}

/// The URL with any password replaced, for error messages and logs.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    // userinfo ends at the last '@' before the first '/', '?' or '#'.
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (auth, tail) = rest.split_at(auth_end);
    let tail = redact_query_password(tail);
    match auth.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => format!("{scheme}://{userinfo}@{host}{tail}"),
        },
        None => format!("{scheme}://{auth}{tail}"),
    }
}

fn redact_query_password(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_string();
    };
    let q: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => kv.to_string(),
        })
        .collect();
    format!("{path}?{}", q.join("&"))
}

/// PostgreSQL text cannot hold NUL, which a skill name (from YAML front matter) can: names are
/// stored with `\` doubled and NUL as `\0`, a reversible encoding, so such a skill gets a
/// baseline like any other instead of an error that would stop its run.
fn enc(name: &str) -> String {
    name.replace('\\', "\\\\").replace('\0', "\\0")
}

fn dec(stored: &str) -> String {
    let mut out = String::with_capacity(stored.len());
    let mut it = stored.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('0') => out.push('\0'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

pub struct PostgresStore {
    // The sync client needs `&mut` per query; one connection per store, as one per `observe`.
    client: Mutex<Client>,
    cfg: postgres::Config,
    url: String,
}

fn db_err(e: postgres::Error) -> BaselineError {
    // The Display of a server error is terse ("db error"); its source carries the message.
    let detail = std::error::Error::source(&e)
        .map(|s| format!("{e}: {s}"))
        .unwrap_or_else(|| e.to_string());
    BaselineError::Backend(detail)
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/db[?options]`; a host that is a
    /// percent-encoded absolute path is a Unix socket directory) and creates the table if needed.
    pub fn open(url: &str) -> Result<PostgresStore, BaselineError> {
        let err = |msg: String| BaselineError::Open {
            path: redact(url),
            msg,
        };
        let mut cfg: postgres::Config = url
            .parse()
            .map_err(|e: postgres::Error| err(format!("not a usable PostgreSQL URL: {e}")))?;
        if cfg.get_connect_timeout().is_none() {
            cfg.connect_timeout(CONNECT_TIMEOUT);
        }
        cfg.application_name("skill-observer");
        // TLS is not built in: reach a remote server through a Unix socket, a private network or
        // a local TLS-terminating proxy (docs/deployment.md).
        let client = cfg.connect(NoTls).map_err(|e| match db_err(e) {
            BaselineError::Backend(m) => err(m),
            other => other,
        })?;
        let store = PostgresStore {
            client: Mutex::new(client),
            cfg,
            url: url.to_string(),
        };
        store.migrate().map_err(|e| err(e.to_string()))?;
        Ok(store)
    }

    /// The URL, password redacted.
    pub fn url(&self) -> String {
        redact(&self.url)
    }

    fn client(&self) -> std::sync::MutexGuard<'_, Client> {
        // A panic while holding the lock cannot leave the server inconsistent: an open
        // transaction is rolled back when dropped.
        self.client.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `op` on the connection; when the connection turns out closed (the server restarted,
    /// a proxy dropped it while a long run held it idle) reconnects and runs `op` once more, so
    /// a run's baseline is not lost to an idle timeout. Every `op` is one transaction or one
    /// statement, safe to repeat.
    fn with<T>(
        &self,
        op: impl Fn(&mut Client) -> Result<T, BaselineError>,
    ) -> Result<T, BaselineError> {
        let mut c = self.client();
        match op(&mut c) {
            Err(e) if c.is_closed() => {
                tracing::info!("baseline store connection closed ({e}); reconnecting");
                *c = self.cfg.connect(NoTls).map_err(db_err)?;
                op(&mut c)
            }
            r => r,
        }
    }

    fn migrate(&self) -> Result<(), BaselineError> {
        self.with(PostgresStore::migrate_on)
    }

    fn migrate_on(c: &mut Client) -> Result<(), BaselineError> {
        let mut tx = c.transaction().map_err(db_err)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .map_err(db_err)?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS skill_observer_meta (
                 key   TEXT PRIMARY KEY,
                 value TEXT NOT NULL
             )",
        )
        .map_err(db_err)?;
        let v: Option<String> = tx
            .query_opt(
                "SELECT value FROM skill_observer_meta WHERE key = 'schema_version'",
                &[],
            )
            .map_err(db_err)?
            .map(|r| r.get(0));
        let v: i64 = match v {
            None => 0,
            Some(s) => s.parse().map_err(|_| {
                BaselineError::Backend(format!("store schema version {s:?} is not a number"))
            })?,
        };
        super::check_schema_version(v)?;
        if v < 1 {
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS skill_observer_baselines (
                     skill       TEXT NOT NULL,
                     fidelity    TEXT NOT NULL,
                     digest      TEXT,
                     accepted_at TEXT NOT NULL,
                     summary     TEXT NOT NULL,
                     PRIMARY KEY (skill, fidelity)
                 );
                 INSERT INTO skill_observer_meta (key, value) VALUES ('schema_version', '1')
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value;",
            )
            .map_err(db_err)?;
        }
        tx.commit().map_err(db_err)?;
        Ok(())
    }

    fn read(
        c: &mut impl postgres::GenericClient,
        skill: &str,
        fidelity: Fidelity,
    ) -> Result<Option<BaselineSummary>, BaselineError> {
        let row = c
            .query_opt(
                "SELECT summary, accepted_at FROM skill_observer_baselines
                 WHERE skill = $1 AND fidelity = $2",
                &[&enc(skill), &fidelity.as_str()],
            )
            .map_err(db_err)?;
        let Some(row) = row else {
            return Ok(None);
        };
        decode_summary(skill, fidelity, row.get(0), row.get(1)).map(Some)
    }

    fn lock_key(tx: &mut Transaction<'_>, s: &BaselineSummary) -> Result<(), BaselineError> {
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))",
            &[&enc(&s.skill), &s.fidelity.as_str()],
        )
        .map_err(db_err)?;
        Ok(())
    }
}

impl BaselineStore for PostgresStore {
    fn list(&self) -> Result<Vec<BaselineEntry>, BaselineError> {
        let rows = self.with(|c| {
            c.query(
                "SELECT skill, fidelity, digest, accepted_at FROM skill_observer_baselines",
                &[],
            )
            .map_err(db_err)
        })?;
        // Sorted here, on decoded names, in the byte order SQLite's ORDER BY gives.
        let mut out: Vec<BaselineEntry> = rows
            .into_iter()
            .map(|r| decode_entry(dec(r.get(0)), r.get(1), r.get(2), r.get(3)))
            .collect::<Result<_, BaselineError>>()?;
        out.sort_by(|a, b| (&a.skill, a.fidelity.as_str()).cmp(&(&b.skill, b.fidelity.as_str())));
        Ok(out)
    }

    fn show(
        &self,
        skill: &str,
        fidelity: Fidelity,
    ) -> Result<Option<BaselineSummary>, BaselineError> {
        self.with(|c| PostgresStore::read(c, skill, fidelity))
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
        self.with(|c| PostgresStore::accept_on(c, summary, &json, replace))
    }

    fn forget(&self, skill: &str, fidelity: Fidelity) -> Result<bool, BaselineError> {
        let n = self.with(|c| {
            c.execute(
                "DELETE FROM skill_observer_baselines WHERE skill = $1 AND fidelity = $2",
                &[&enc(skill), &fidelity.as_str()],
            )
            .map_err(db_err)
        })?;
        Ok(n > 0)
    }
}

impl PostgresStore {
    fn accept_on(
        c: &mut Client,
        summary: &BaselineSummary,
        json: &str,
        replace: bool,
    ) -> Result<AcceptOutcome, BaselineError> {
        let mut tx = c.transaction().map_err(db_err)?;
        PostgresStore::lock_key(&mut tx, summary)?;
        let (skill, fid) = (&summary.skill, summary.fidelity.as_str());
        let key = enc(skill);
        let outcome = if replace {
            let existed = PostgresStore::read(&mut tx, skill, summary.fidelity)?.is_some();
            tx.execute(
                &format!(
                    "INSERT INTO skill_observer_baselines (skill, fidelity, digest, accepted_at, summary)
                     VALUES ($1, $2, $3, {NOW}, $4)
                     ON CONFLICT (skill, fidelity) DO UPDATE SET
                       digest = excluded.digest, accepted_at = excluded.accepted_at,
                       summary = excluded.summary"
                ),
                &[&key, &fid, &summary.digest, &json],
            )
            .map_err(db_err)?;
            let now = PostgresStore::read(&mut tx, skill, summary.fidelity)?.ok_or_else(|| {
                BaselineError::Backend("row vanished inside its transaction".into())
            })?;
            if existed {
                AcceptOutcome::Replaced(now)
            } else {
                AcceptOutcome::Inserted(now)
            }
        } else {
            // DO NOTHING (not the advisory lock) is what guarantees one row: it holds even
            // against a writer that does not take the lock.
            let n = tx
                .execute(
                    &format!(
                        "INSERT INTO skill_observer_baselines (skill, fidelity, digest, accepted_at, summary)
                         VALUES ($1, $2, $3, {NOW}, $4)
                         ON CONFLICT (skill, fidelity) DO NOTHING"
                    ),
                    &[&key, &fid, &summary.digest, &json],
                )
                .map_err(db_err)?;
            let now = PostgresStore::read(&mut tx, skill, summary.fidelity)?.ok_or_else(|| {
                BaselineError::Backend("row vanished inside its transaction".into())
            })?;
            if n == 1 {
                AcceptOutcome::Inserted(now)
            } else {
                AcceptOutcome::Kept(now)
            }
        };
        tx.commit().map_err(db_err)?;
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact("postgres://u:s3cret@db.example:5432/b?sslmode=disable"),
            "postgres://u:***@db.example:5432/b?sslmode=disable"
        );
        assert_eq!(
            redact("postgresql://u@h/b?password=s3cret&x=1"),
            "postgresql://u@h/b?password=***&x=1"
        );
        // an '@' inside the password must not leak its tail
        let r = redact("postgres://u:p@ss@h/b");
        assert!(!r.contains("p@ss") && !r.contains(":p@"), "{r}");
        assert_eq!(redact("postgres://h/b"), "postgres://h/b");
        assert!(is_postgres_url("postgresql://x/y") && !is_postgres_url("/var/b.sqlite"));
        assert!(!is_postgres_url("./postgres://x"));
    }

    #[test]
    fn name_encoding_is_reversible_and_nul_free() {
        for n in ["plain", "a\0b", "a\\0b", "\\", "\\\0\\", "é\0", ""] {
            assert!(!enc(n).contains('\0'));
            assert_eq!(dec(&enc(n)), n);
        }
        // distinct names stay distinct
        assert_ne!(enc("a\0b"), enc("a\\0b"));
    }

    #[test]
    fn a_bad_url_or_dead_server_is_a_clear_error_without_the_password() {
        let e = PostgresStore::open("postgres://u:hunter2@127.0.0.1:notaport/db")
            .err()
            .expect("bad port must not open");
        let m = e.to_string();
        assert!(
            m.contains("not a usable PostgreSQL URL") && !m.contains("hunter2"),
            "{m}"
        );
        // a port nobody listens on: connect fails fast, naming the server but not the password
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let url = format!("postgres://u:hunter2@127.0.0.1:{port}/db?connect_timeout=5");
        let m = PostgresStore::open(&url)
            .err()
            .expect("no server")
            .to_string();
        assert!(
            m.contains(&format!("127.0.0.1:{port}")) && !m.contains("hunter2"),
            "{m}"
        );
    }
}
