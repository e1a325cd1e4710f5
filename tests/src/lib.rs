//! End-to-end test helpers: build skills on disk, run the real `observe` binary on them, read the
//! trace and report it wrote. Nothing here mocks the jail.

pub mod hostnet;

use observer::trace::{Event, EventKind, Trace};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Path to the `observe` binary: `$OBSERVE_BIN`, or built once from this workspace (with its
/// `observe-jail` helper).
pub fn observe_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = std::env::var("OBSERVE_BIN") {
            return PathBuf::from(p);
        }
        let root = workspace_root();
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "-q", "-p", "skill-observer", "--bins"])
            .current_dir(&root)
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building observe failed");
        let target = std::env::var("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root.join("target"));
        target.join("debug").join("observe")
    })
    .clone()
}

/// A skill folder on disk.
pub struct Skill {
    pub dir: tempfile::TempDir,
}

impl Skill {
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("skill")
    }
}

/// Creates a skill named `name` with `SKILL.md` and the given files (path, content, mode).
pub fn skill(name: &str, files: &[(&str, &str, u32)]) -> Skill {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("so-test-")
        .tempdir()
        .expect("tempdir");
    // World-writable so an unprivileged observe (see `unprivileged_prefix`) can write its trace.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let root = dir.path().join("skill");
    std::fs::create_dir_all(&root).expect("mkdir");
    let has_md = files.iter().any(|(p, _, _)| *p == "SKILL.md");
    if !has_md {
        std::fs::write(
            root.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: test skill {name}\n---\n\nRun the scripts.\n"),
        )
        .expect("write SKILL.md");
    }
    for (p, content, mode) in files {
        let f = root.join(p);
        std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
        std::fs::write(&f, content).expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(*mode)).expect("chmod");
    }
    Skill { dir }
}

pub struct Run {
    pub output: Output,
    pub trace: Trace,
    pub report: Option<serde_json::Value>,
    pub elapsed: Duration,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn events(&self) -> &[Event] {
        &self.trace.events
    }

    pub fn kinds(&self) -> impl Iterator<Item = &EventKind> {
        self.trace.events.iter().map(|e| &e.kind)
    }

    pub fn run_end(&self) -> (bool, Vec<String>) {
        self.kinds()
            .find_map(|k| match k {
                EventKind::RunEnd {
                    complete,
                    incomplete_reasons,
                    ..
                } => Some((*complete, incomplete_reasons.clone())),
                _ => None,
            })
            .expect("trace has a run_end event")
    }

    pub fn execs(&self) -> Vec<(String, Vec<String>, bool)> {
        self.kinds()
            .filter_map(|k| match k {
                EventKind::Exec {
                    path, argv, result, ..
                } => Some((path.clone(), argv.clone(), result.is_ok())),
                _ => None,
            })
            .collect()
    }

    pub fn opens(&self) -> Vec<(String, bool, Option<i64>)> {
        self.kinds()
            .filter_map(|k| match k {
                EventKind::Open {
                    path,
                    write,
                    result,
                    ..
                } => Some((path.clone(), *write, result.ret)),
                _ => None,
            })
            .collect()
    }

    /// Everything the steps printed (from the trace's `output` events).
    pub fn output(&self) -> String {
        self.kinds()
            .filter_map(|k| match k {
                EventKind::Output { data } => Some(data.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Runs `observe` on the skill with extra args, recording the trace and the report.
pub fn observe(skill: &Skill, args: &[&str]) -> Run {
    observe_as(skill, args, None)
}

/// As `observe`, optionally through a command prefix (e.g. `setpriv` to drop privileges).
pub fn observe_as(skill: &Skill, args: &[&str], prefix: Option<&[String]>) -> Run {
    start_observe(&skill.path(), skill.dir.path(), args, prefix).finish()
}

/// A running `observe` (started by [`start_observe`]).
pub struct Job {
    pub child: std::process::Child,
    pub trace: PathBuf,
    pub report: PathBuf,
    started: Instant,
}

/// Starts `observe` on the skill at `skill_path` in the background; trace, report and baseline
/// store go to `out` (which must exist).
pub fn start_observe(
    skill_path: &Path,
    out: &Path,
    args: &[&str],
    prefix: Option<&[String]>,
) -> Job {
    let trace = out.join("trace.jsonl");
    let report = out.join("report.json");
    let mut argv: Vec<String> = Vec::new();
    if let Some(p) = prefix {
        argv.extend(p.iter().cloned());
    }
    argv.push(observe_bin().to_string_lossy().into_owned());
    argv.push(skill_path.to_string_lossy().into_owned());
    argv.extend(["--record".into(), trace.to_string_lossy().into_owned()]);
    argv.extend(["--report".into(), report.to_string_lossy().into_owned()]);
    argv.extend(args.iter().map(|s| s.to_string()));
    let started = Instant::now();
    // Each test gets its own baseline store (the default one lives under XDG_DATA_HOME).
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .env("XDG_DATA_HOME", out.join("xdg"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run observe");
    Job {
        child,
        trace,
        report,
        started,
    }
}

impl Job {
    /// Waits for `observe` to end and reads what it wrote.
    pub fn finish(self) -> Run {
        let output = self.child.wait_with_output().expect("wait for observe");
        let elapsed = self.started.elapsed();
        let t = Trace::read_file(&self.trace).unwrap_or_else(|e| {
            panic!(
                "no trace ({e}); observe said:\n{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        let report = std::fs::read(&self.report)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        Run {
            output,
            trace: t,
            report,
            elapsed,
        }
    }

    /// Waits (up to `within`) until the trace written so far contains `needle`.
    pub fn wait_for_trace(&self, needle: &str, within: Duration) -> bool {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if std::fs::read_to_string(&self.trace).is_ok_and(|t| t.contains(needle)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }
}

/// A process as `/proc` shows it: pid, parent, start time (to tell a reused pid), command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    pub start: u64,
    pub uid: u32,
    pub cmdline: String,
}

fn read_proc(pid: u32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default();
    Some(Proc {
        pid,
        ppid: f.get(1)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
        uid,
        cmdline: cmdline.trim().to_string(),
    })
}

/// Every process on the host.
pub fn processes() -> Vec<Proc> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .filter_map(read_proc)
                .collect()
        })
        .unwrap_or_default()
}

/// The processes descended from `root` (not `root` itself).
pub fn descendants(root: u32) -> Vec<Proc> {
    let all = processes();
    let mut out: Vec<Proc> = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for c in all.iter().filter(|c| c.ppid == p) {
            frontier.push(c.pid);
            out.push(c.clone());
        }
    }
    out
}

/// Whether this exact process (same pid and start time) still exists (zombies count as gone).
pub fn alive(p: &Proc) -> bool {
    let zombie = std::fs::read_to_string(format!("/proc/{}/stat", p.pid))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
        .unwrap_or(true);
    !zombie && read_proc(p.pid).is_some_and(|q| q.start == p.start)
}

/// The canary values the image of a run with `seed` plants.
pub fn canary_values(seed: &str) -> Vec<Vec<u8>> {
    let img = observer::image::build("linux", "x", &[], Some(seed)).expect("image for the seed");
    img.registry.needles().map(|n| n.bytes.to_vec()).collect()
}

/// A copy of a corpus or example skill folder (`harness/corpus/NAME/skill`, `examples/skills/NAME`).
pub fn repo_skill(rel: &str) -> PathBuf {
    workspace_root().join(rel)
}

/// Creates (once) an unprivileged user for tests and returns the `setpriv` prefix that runs a
/// command as that user, or the reason it cannot.
pub fn unprivileged_prefix() -> Result<Vec<String>, String> {
    // SAFETY: getter.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(Vec::new()); // already unprivileged
    }
    let user = "so-test-worker";
    let exists = Command::new("id")
        .arg(user)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !exists {
        let ok = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                user,
            ])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            return Err("useradd failed".into());
        }
    }
    let out = Command::new("id")
        .args(["-u", user])
        .output()
        .map_err(|e| e.to_string())?;
    let uid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let out = Command::new("id")
        .args(["-g", user])
        .output()
        .map_err(|e| e.to_string())?;
    let gid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(vec![
        "setpriv".into(),
        format!("--reuid={uid}"),
        format!("--regid={gid}"),
        "--clear-groups".into(),
        "--inh-caps=-all".into(),
        "--bounding-set=-all".into(),
        "--".into(),
    ])
}

/// As `unprivileged_prefix`, but also checks with `observe doctor` that the host lets that user
/// build a jail; `Err` says why a test should be skipped.
pub fn unprivileged_jail_prefix() -> Result<Vec<String>, String> {
    let prefix = unprivileged_prefix()?;
    if prefix.is_empty() {
        return Ok(prefix);
    }
    let doctor = Command::new("setpriv")
        .args(&prefix[1..prefix.len() - 1])
        .arg(observe_bin())
        .arg("doctor")
        .output()
        .map_err(|e| e.to_string())?;
    if !doctor.status.success() {
        return Err(format!(
            "the host forbids unprivileged jails:\n{}",
            String::from_utf8_lossy(&doctor.stdout)
        ));
    }
    Ok(prefix)
}

/// The prefix that runs `observe` as an unprivileged user who can build a jail; when the host
/// cannot give one, prints why and returns from the calling test (skipped, never failed).
#[macro_export]
macro_rules! unprivileged_or_skip {
    () => {
        match $crate::unprivileged_jail_prefix() {
            Ok(p) => p,
            Err(why) => {
                println!("SKIPPED: {why}");
                return;
            }
        }
    };
}

/// Egress events of a run, flattened for assertions (see `tests/tests/egress.rs`).
impl Run {
    /// `(name, qtype, transport)` of every `dns_query`.
    pub fn dns_queries(&self) -> Vec<(String, String, String)> {
        self.kinds()
            .filter_map(|k| match k {
                EventKind::DnsQuery {
                    name,
                    qtype,
                    transport,
                    ..
                } => Some((
                    name.trim_end_matches('.').to_ascii_lowercase(),
                    qtype.clone(),
                    transport.clone(),
                )),
                _ => None,
            })
            .collect()
    }

    /// `(proto, dst_addr, dst_port, name)` of every `connection`.
    pub fn connections(&self) -> Vec<(String, String, u16, Option<String>)> {
        self.kinds()
            .filter_map(|k| match k {
                EventKind::Connection {
                    proto,
                    dst_addr,
                    dst_port,
                    name,
                    ..
                } => Some((proto.clone(), dst_addr.clone(), *dst_port, name.clone())),
                _ => None,
            })
            .collect()
    }

    /// `(method, url, host)` of every `http_request`.
    pub fn http_requests(&self) -> Vec<(String, String, String)> {
        self.kinds()
            .filter_map(|k| match k {
                EventKind::HttpRequest {
                    method, url, host, ..
                } => Some((method.clone(), url.clone(), host.clone())),
                _ => None,
            })
            .collect()
    }

    /// `(proto, dst_addr, dst_port, bytes_out, preview)` of every `stream`.
    pub fn streams(&self) -> Vec<(String, String, u16, u64, String)> {
        self.kinds()
            .filter_map(|k| match k {
                EventKind::Stream {
                    proto,
                    dst_addr,
                    dst_port,
                    bytes_out,
                    preview,
                } => Some((
                    proto.clone(),
                    dst_addr.clone(),
                    *dst_port,
                    *bytes_out,
                    preview.clone().unwrap_or_default(),
                )),
                _ => None,
            })
            .collect()
    }

    /// `(credential, chain, host)` of every `canary_hit`.
    pub fn canary_hits(&self) -> Vec<(String, Vec<String>, Option<String>)> {
        self.kinds()
            .filter_map(|k| match k {
                EventKind::CanaryHit {
                    credential,
                    chain,
                    host,
                    ..
                } => Some((credential.clone(), chain.clone(), host.clone())),
                _ => None,
            })
            .collect()
    }

    /// `(what, detail)` of every `limit` event.
    pub fn limits(&self) -> Vec<(String, String)> {
        self.kinds()
            .filter_map(|k| match k {
                EventKind::Limit { what, detail } => Some((what.clone(), detail.clone())),
                _ => None,
            })
            .collect()
    }

    /// The run's `duration_ms` (from `run_end`).
    pub fn duration_ms(&self) -> u64 {
        self.kinds()
            .find_map(|k| match k {
                EventKind::RunEnd { duration_ms, .. } => Some(*duration_ms),
                _ => None,
            })
            .expect("trace has a run_end event")
    }

    /// The report's `profile.canary_hits[].credential` values.
    pub fn reported_leaks(&self) -> Vec<String> {
        self.report
            .as_ref()
            .and_then(|r| r.pointer("/profile/canary_hits"))
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|h| h.get("credential").and_then(|c| c.as_str()))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }
}
