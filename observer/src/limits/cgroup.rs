//! A per-run cgroup: cgroup v2 when the host delegates a subtree with the memory and pids
//! controllers, else cgroup v1 (memory, pids, cpuacct hierarchies) when we are root and they are
//! mounted. The supervisor moves the jail process into it before the jail forks anything, reads
//! what the run used, and removes it at the end.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no usable cgroup: {0}")]
    Unavailable(String),
    #[error("cgroup {0}: {1}")]
    Io(PathBuf, std::io::Error),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V2,
    V1,
}

/// What the kernel counted for the run's cgroup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupUsage {
    pub cpu_ns: Option<u64>,
    pub peak_memory: Option<u64>,
    pub oom_kills: u64,
    /// Forks refused at `pids.max`.
    pub pids_refused: u64,
}

#[derive(Debug, Clone)]
pub struct Cgroup {
    pub version: Version,
    /// v2: one directory; v1: memory, pids, cpuacct directories (in that order).
    dirs: Vec<PathBuf>,
}

fn io(p: &Path) -> impl FnOnce(std::io::Error) -> CgroupError + '_ {
    move |e| CgroupError::Io(p.to_path_buf(), e)
}

fn write(p: &Path, v: &str) -> Result<(), CgroupError> {
    std::fs::write(p, v).map_err(io(p))
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// `key value` lines (memory.events, cpu.stat, memory.oom_control, pids.events).
pub fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key)).then(|| it.next()?.parse().ok())?
    })
}

/// The cgroup paths of this process per hierarchy (`/proc/self/cgroup`): `""` for v2, else the
/// controller list.
pub fn own_paths(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let (_, ctrl, path) = (it.next()?, it.next()?, it.next()?);
            Some((ctrl.to_string(), path.to_string()))
        })
        .collect()
}

/// The mount point of the cgroup2 hierarchy (`/sys/fs/cgroup` or `/sys/fs/cgroup/unified`).
fn v2_mount() -> Option<PathBuf> {
    let mi = read(Path::new("/proc/self/mountinfo"))?;
    mi.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        if post.split_whitespace().next() != Some("cgroup2") {
            return None;
        }
        pre.split_whitespace().nth(4).map(PathBuf::from)
    })
}

fn unique_name() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "so-run-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Removes run cgroups left behind by supervisors that were killed (`so-run-<pid>-<n>` whose
/// pid is gone). Only empty cgroups can be removed, so a live run is never touched.
fn sweep_stale(parent: &Path) {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("so-run-"))
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

impl Cgroup {
    /// Creates the run's cgroup with the given limits, or says why none can be had.
    pub fn create(memory: u64, pids: u64) -> Result<Cgroup, CgroupError> {
        let own = read(Path::new("/proc/self/cgroup")).unwrap_or_default();
        let own = own_paths(&own);
        let mut why = Vec::new();
        match Self::create_v2(&own, memory, pids) {
            Ok(c) => return Ok(c),
            Err(e) => why.push(format!("v2: {e}")),
        }
        match Self::create_v1(&own, memory, pids) {
            Ok(c) => return Ok(c),
            Err(e) => why.push(format!("v1: {e}")),
        }
        Err(CgroupError::Unavailable(why.join("; ")))
    }

    fn create_v2(own: &[(String, String)], memory: u64, pids: u64) -> Result<Cgroup, String> {
        let mount = v2_mount().ok_or("no cgroup2 mount")?;
        let own_path = own
            .iter()
            .find(|(c, _)| c.is_empty())
            .map(|(_, p)| p.trim_start_matches('/').to_string())
            .ok_or("no v2 entry in /proc/self/cgroup")?;
        // A delegated parent named by the deployment, else our own cgroup, else its parent (a
        // cgroup with processes cannot enable controllers for children: runs then go beside us).
        let mut parents = Vec::new();
        let named = std::env::var("OBSERVE_CGROUP").ok().map(PathBuf::from);
        if let Some(p) = &named {
            parents.push(p.clone());
        }
        let ours = mount.join(&own_path);
        parents.push(ours.clone());
        if let Some(p) = ours.parent().filter(|p| p.starts_with(&mount)) {
            parents.push(p.to_path_buf());
        }
        let mut last = String::from("no candidate");
        for parent in parents {
            let ctl = read(&parent.join("cgroup.subtree_control")).unwrap_or_default();
            if !(ctl.contains("memory") && ctl.contains("pids")) && named.as_ref() == Some(&parent)
            {
                // Enable them only where the deployment delegated the parent to us: elsewhere
                // it would change the host's cgroup configuration.
                let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+memory +pids +cpu");
            }
            sweep_stale(&parent);
            let dir = parent.join(unique_name());
            if let Err(e) = std::fs::create_dir(&dir) {
                last = format!("{}: {e}", parent.display());
                continue;
            }
            let cg = Cgroup {
                version: Version::V2,
                dirs: vec![dir.clone()],
            };
            let have = read(&dir.join("cgroup.controllers")).unwrap_or_default();
            if !(have.contains("memory") && have.contains("pids")) {
                last = format!(
                    "{}: memory/pids controllers not delegated",
                    parent.display()
                );
                cg.remove();
                continue;
            }
            let set = write(&dir.join("memory.max"), &memory.to_string())
                .and_then(|_| write(&dir.join("pids.max"), &pids.to_string()));
            if let Err(e) = set {
                last = e.to_string();
                cg.remove();
                continue;
            }
            // No swap: the memory limit is the memory the run may hold.
            let _ = std::fs::write(dir.join("memory.swap.max"), "0");
            return Ok(cg);
        }
        Err(last)
    }

    fn create_v1(own: &[(String, String)], memory: u64, pids: u64) -> Result<Cgroup, String> {
        // SAFETY: getter.
        if unsafe { libc::geteuid() } != 0 {
            return Err("v1 hierarchies are not delegated to unprivileged users".into());
        }
        let mut dirs = Vec::new();
        let name = unique_name();
        for ctrl in ["memory", "pids", "cpuacct"] {
            let base = PathBuf::from("/sys/fs/cgroup").join(ctrl);
            if !base.join("cgroup.procs").exists() {
                return Err(format!("no {ctrl} hierarchy"));
            }
            let path = own
                .iter()
                .find(|(c, _)| c.split(',').any(|x| x == ctrl))
                .map(|(_, p)| p.trim_start_matches('/').to_string())
                .unwrap_or_default();
            let parent = base.join(path);
            sweep_stale(&parent);
            let dir = parent.join(&name);
            if let Err(e) = std::fs::create_dir(&dir) {
                Cgroup {
                    version: Version::V1,
                    dirs,
                }
                .remove();
                return Err(format!("{}: {e}", dir.display()));
            }
            dirs.push(dir);
        }
        let cg = Cgroup {
            version: Version::V1,
            dirs,
        };
        let set = write(
            &cg.dirs[0].join("memory.limit_in_bytes"),
            &memory.to_string(),
        )
        .and_then(|_| write(&cg.dirs[1].join("pids.max"), &pids.to_string()));
        if let Err(e) = set {
            cg.remove();
            return Err(e.to_string());
        }
        // Memory+swap at the same value: no swap (absent without swap accounting).
        let _ = std::fs::write(
            cg.dirs[0].join("memory.memsw.limit_in_bytes"),
            memory.to_string(),
        );
        Ok(cg)
    }

    /// Moves a process (the jail process, before it forks) into the cgroup.
    pub fn add(&self, pid: u32) -> Result<(), CgroupError> {
        for d in &self.dirs {
            write(&d.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// The files a single-threaded process running as `owner` writes `0` to in order to move
    /// itself (v1 `tasks`, which skips the kernel's global threadgroup lock); they are given to
    /// `owner`, as v1 only lets a process write files it may write. `None` on v2 (whose
    /// `cgroup.threads` only works in threaded cgroups) or when the files cannot be given.
    pub fn self_move_files(&self, owner: (u32, u32)) -> Option<Vec<PathBuf>> {
        if self.version != Version::V1 {
            return None;
        }
        let mut files = Vec::new();
        for d in &self.dirs {
            let f = d.join("tasks");
            std::os::unix::fs::chown(&f, Some(owner.0), Some(owner.1)).ok()?;
            files.push(f);
        }
        Some(files)
    }

    pub fn usage(&self) -> CgroupUsage {
        let d = &self.dirs;
        match self.version {
            Version::V2 => {
                let events = read(&d[0].join("memory.events")).unwrap_or_default();
                CgroupUsage {
                    cpu_ns: read(&d[0].join("cpu.stat"))
                        .and_then(|s| keyed(&s, "usage_usec"))
                        .map(|us| us * 1000),
                    peak_memory: read(&d[0].join("memory.peak"))
                        .and_then(|s| s.trim().parse().ok()),
                    oom_kills: keyed(&events, "oom_kill").unwrap_or(0),
                    pids_refused: read(&d[0].join("pids.events"))
                        .and_then(|s| keyed(&s, "max"))
                        .unwrap_or(0),
                }
            }
            Version::V1 => CgroupUsage {
                cpu_ns: read(&d[2].join("cpuacct.usage")).and_then(|s| s.trim().parse().ok()),
                peak_memory: read(&d[0].join("memory.max_usage_in_bytes"))
                    .and_then(|s| s.trim().parse().ok()),
                oom_kills: read(&d[0].join("memory.oom_control"))
                    .and_then(|s| keyed(&s, "oom_kill"))
                    .unwrap_or(0),
                pids_refused: read(&d[1].join("pids.events"))
                    .and_then(|s| keyed(&s, "max"))
                    .unwrap_or(0),
            },
        }
    }

    /// The processes still in the cgroup.
    pub fn pids(&self) -> Vec<u32> {
        read(&self.dirs[0].join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Kills every process of the run (only those in its own cgroup).
    pub fn kill_all(&self) {
        if self.version == Version::V2 && write(&self.dirs[0].join("cgroup.kill"), "1").is_ok() {
            return;
        }
        for pid in self.pids() {
            // SAFETY: signalling a process of this run's cgroup.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }

    /// Removes the cgroup once its processes are gone (they die asynchronously after the jail's
    /// pid 1: wait a little).
    pub fn remove(&self) {
        for _ in 0..50 {
            if self
                .dirs
                .iter()
                .all(|d| !d.exists() || std::fs::remove_dir(d).is_ok())
            {
                return;
            }
            self.kill_all();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        tracing::warn!("could not remove the run's cgroup {:?}", self.dirs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_keyed_files() {
        let ev = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n";
        assert_eq!(keyed(ev, "oom_kill"), Some(1));
        assert_eq!(keyed(ev, "max"), Some(12));
        assert_eq!(keyed(ev, "absent"), None);
        let oc = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(keyed(oc, "oom_kill"), Some(3));
    }

    #[test]
    fn parses_own_cgroup_paths() {
        let t = "9:name=systemd:/\n4:memory:/a/b\n2:cpu,cpuacct:/\n0::/user.slice/x\n";
        let p = own_paths(t);
        assert!(p.contains(&("memory".into(), "/a/b".into())));
        assert!(p.contains(&("".into(), "/user.slice/x".into())));
        assert!(p.contains(&("cpu,cpuacct".into(), "/".into())));
    }
}
