//! A real PostgreSQL server for tests (never a fake): `$SKILL_OBSERVER_TEST_PG` when set (a
//! `postgres://` URL of a role that may `CREATE DATABASE`), else a private throwaway server this
//! process starts once: `initdb` into a temporary directory, listening on a free loopback port,
//! run as an unprivileged user when we are root (PostgreSQL refuses root). The server lives as
//! long as the test process: a shell holding the read end of a pipe stops it and deletes its
//! directory when the process exits, however it exits.
//!
//! Only built for tests (`cfg(test)` or the `test-pg-server` feature the e2e tests enable).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub const ENV: &str = "SKILL_OBSERVER_TEST_PG";

struct Private {
    url: String,
    // Held (never dropped) so the server's guard shell sees its stdin close only at exit.
    _guard: Mutex<Child>,
}

fn find_bin(name: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    });
    // Debian's postgresql package keeps the server binaries off PATH.
    on_path.or_else(|| {
        let mut vers: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin").join(name)))
            .filter(|f| f.is_file())
            .collect();
        vers.sort();
        vers.pop()
    })
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// (uid, gid) to run the server as: ourselves, or an unprivileged account when we are root.
fn server_user() -> Result<Option<(u32, u32)>, String> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    for name in ["so-test-worker", "nobody"] {
        if let Ok(Some(u)) = nix::unistd::User::from_name(name) {
            return Ok(Some((u.uid.as_raw(), u.gid.as_raw())));
        }
    }
    Err("running as root and no unprivileged user (so-test-worker, nobody) to run postgres".into())
}

fn as_user(cmd: &mut Command, user: Option<(u32, u32)>) -> &mut Command {
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

fn start_private() -> Result<Private, String> {
    let initdb = find_bin("initdb").ok_or("initdb not found (apt-get install postgresql)")?;
    let postgres = find_bin("postgres").ok_or("postgres not found (apt-get install postgresql)")?;
    let user = server_user()?;
    let dir = tempfile::Builder::new()
        .prefix("so-test-pg-")
        .tempdir()
        .map_err(|e| e.to_string())?
        // The guard shell deletes it; a TempDir would delete it under the running server.
        .keep();
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
    }
    let data = dir.join("data");
    let out = as_user(&mut Command::new(&initdb), user)
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        .current_dir(&dir)
        .output()
        .map_err(|e| format!("{}: {e}", initdb.display()))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let port = free_port()?;
    let log = dir.join("server.log");
    // `read` returns when every write end of the pipe is closed: this process has exited.
    let script = r#"
        "$1" -D "$2" -p "$3" -k "$4" -c listen_addresses=127.0.0.1 -c fsync=off \
             -c full_page_writes=off -c max_connections=200 >"$5" 2>&1 &
        pid=$!
        read _ignored
        kill -INT "$pid" 2>/dev/null
        wait "$pid"
        rm -rf "$4"
    "#;
    let child = as_user(&mut Command::new("/bin/sh"), user)
        .arg("-c")
        .arg(script)
        .arg("so-test-pg")
        .arg(&postgres)
        .arg(&data)
        .arg(port.to_string())
        .arg(&dir)
        .arg(&log)
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    let private = Private {
        url: url.clone(),
        _guard: Mutex::new(child),
    };
    let t0 = Instant::now();
    loop {
        match postgres::Client::connect(&url, postgres::NoTls) {
            Ok(_) => return Ok(private),
            Err(e) if t0.elapsed() > Duration::from_secs(60) => {
                return Err(format!(
                    "postgres did not come up: {e}; log: {}",
                    read_log(&log)
                ))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn read_log(p: &Path) -> String {
    let mut s = String::new();
    let _ = std::fs::File::open(p).and_then(|mut f| f.read_to_string(&mut s));
    s
}

/// URL of the test server (see the module docs). Panics with the reason when there is none:
/// a test that needs PostgreSQL must not pass without one.
pub fn server_url() -> String {
    if let Ok(u) = std::env::var(ENV) {
        if !u.is_empty() {
            return u;
        }
    }
    static SERVER: OnceLock<Result<Private, String>> = OnceLock::new();
    match SERVER.get_or_init(start_private) {
        Ok(p) => p.url.clone(),
        Err(e) => panic!("no PostgreSQL server for the tests ({ENV} unset): {e}"),
    }
}

/// `url` with its database name replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, tail) = rest.split_at(auth_end);
    let query = tail.split_once('?').map(|(_, q)| q);
    match query {
        Some(q) => format!("{scheme}://{auth}/{db}?{q}"),
        None => format!("{scheme}://{auth}/{db}"),
    }
}

/// A new, empty database on the test server; returns its URL.
pub fn fresh_database() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let url = server_url();
    let db = format!(
        "so_test_{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    );
    let mut admin = postgres::Client::connect(&url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("connect to the test server: {e}"));
    // CREATE DATABASE copies template1 and fails while another creation holds it: retry.
    let mut tries = 0;
    loop {
        match admin.batch_execute(&format!("CREATE DATABASE {db}")) {
            Ok(()) => break,
            Err(e) if tries < 20 => {
                tries += 1;
                tracing::debug!("CREATE DATABASE retry: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("CREATE DATABASE {db}: {e}"),
        }
    }
    with_database(&url, &db)
}
