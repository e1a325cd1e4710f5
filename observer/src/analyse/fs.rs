//! File- and system-shaped indicators: persistence, cross-skill writes, tool tampering,
//! destruction, sandbox probing and escape attempts.

use super::exec::{self, basename};
use super::net::list;
use super::observe::{FileObs, Observations};
use super::paths::Layout;
use super::{AnalyseConfig, Finding};
use crate::model::{Category, StaticView};
use crate::report::{FileAccess, PathClass};
use crate::trace::{Event, EventKind};
use std::collections::{BTreeMap, BTreeSet};

/// Writes that count for the `writes` category: outside workspace and temp, not pseudo files, not
/// caches, not Python's bytecode cache next to the skill's own modules or a refused one.
pub fn counts_as_write(f: &FileObs) -> bool {
    if !f.access.is_write() {
        return false;
    }
    if matches!(
        f.class,
        PathClass::Workspace | PathClass::Temp | PathClass::Pseudo | PathClass::Cache
    ) {
        return false;
    }
    let pyc = f.path.contains("/__pycache__/") || f.path.ends_with("/__pycache__");
    !(pyc && (f.class == PathClass::SkillOwn || f.failed))
}

/// Accesses that plant something (everything but deleting or moving away).
fn plants(a: FileAccess) -> bool {
    matches!(
        a,
        FileAccess::Write
            | FileAccess::Create
            | FileAccess::RenameTo
            | FileAccess::Link
            | FileAccess::Symlink
            | FileAccess::Chmod
            | FileAccess::Truncate
    )
}

fn key(base: &'static str, statics: &StaticView) -> &'static str {
    if !statics.categories.contains(&Category::Writes) {
        return base;
    }
    match base {
        "BEHAV_PERSISTENCE" => "BEHAV_PERSISTENCE.declared",
        "BEHAV_CROSS_SKILL_WRITE" => "BEHAV_CROSS_SKILL_WRITE.declared",
        "BEHAV_TOOL_TAMPER" => "BEHAV_TOOL_TAMPER.declared",
        "BEHAV_DESTRUCTIVE" => "BEHAV_DESTRUCTIVE.declared",
        other => other,
    }
}

fn grouped(
    items: impl Iterator<Item = (String, String, u64)>,
) -> BTreeMap<String, (BTreeSet<String>, Vec<u64>)> {
    let mut m: BTreeMap<String, (BTreeSet<String>, Vec<u64>)> = BTreeMap::new();
    for (group, what, seq) in items {
        let e = m.entry(group).or_default();
        e.0.insert(what);
        e.1.push(seq);
    }
    m
}

/// A refused write is still reported (the intent is the finding), but not as if it happened.
fn attempted(f: &super::observe::FileObs, what: &str) -> String {
    if f.failed {
        format!("attempted (refused by the jail): {what}")
    } else {
        what.to_string()
    }
}

pub fn write_findings(
    o: &Observations,
    layout: &Layout,
    statics: &StaticView,
    cfg: &AnalyseConfig,
    out: &mut Vec<Finding>,
) {
    let id = "BEHAV_PERSISTENCE";
    let persist = o.files.iter().filter(|f| plants(f.access)).filter_map(|f| {
        layout
            .persistence_reason(&f.path, f.class)
            .map(|why| (attempted(f, why), f.path.clone(), f.seq))
    });
    for (why, (paths, seqs)) in grouped(persist) {
        let p: Vec<&str> = paths.iter().map(|s| s.as_str()).collect();
        out.push(Finding::keyed(
            key(id, statics),
            id,
            format!("{why} written: {}", list(&p)),
            seqs,
        ));
    }
    for (cmd, seq) in exec::persistence_commands(o) {
        out.push(Finding::keyed(
            key(id, statics),
            id,
            format!("persistence installed by command: {cmd}"),
            vec![seq],
        ));
    }

    let id = "BEHAV_CROSS_SKILL_WRITE";
    let cross = o
        .files
        .iter()
        .filter(|f| {
            f.access.is_write()
                && matches!(f.class, PathClass::OtherSkill | PathClass::AgentSettings)
        })
        .map(|f| (f.class.as_str().to_string(), f.path.clone(), f.seq));
    for (class, (paths, seqs)) in grouped(cross) {
        let what = if class == "other_skill" {
            "another skill's folder"
        } else {
            "the agent's settings or memory"
        };
        let p: Vec<&str> = paths.iter().map(|s| s.as_str()).collect();
        out.push(Finding::keyed(
            key(id, statics),
            id,
            format!("wrote into {what}: {}", list(&p)),
            seqs,
        ));
    }

    let id = "BEHAV_TOOL_TAMPER";
    let tamper = o
        .files
        .iter()
        .filter(|f| plants(f.access) && f.access != FileAccess::Truncate)
        .filter_map(|f| {
            if f.class == PathClass::PathDir {
                Some((
                    attempted(f, "executable dropped into a PATH directory"),
                    f.path.clone(),
                    f.seq,
                ))
            } else if layout.is_package_config(&f.path) && !layout.in_temp(&f.path) {
                Some((
                    "package manager or git configuration changed".to_string(),
                    f.path.clone(),
                    f.seq,
                ))
            } else {
                None
            }
        });
    for (why, (paths, seqs)) in grouped(tamper) {
        let p: Vec<&str> = paths.iter().map(|s| s.as_str()).collect();
        out.push(Finding::keyed(
            key(id, statics),
            id,
            format!("{why}: {}", list(&p)),
            seqs,
        ));
    }
    for (cmd, seq) in exec::tamper_commands(o) {
        out.push(Finding::keyed(
            key(id, statics),
            id,
            format!("package source changed by command: {cmd}"),
            vec![seq],
        ));
    }

    destructive(o, statics, cfg, out);
}

fn destructive(
    o: &Observations,
    statics: &StaticView,
    cfg: &AnalyseConfig,
    out: &mut Vec<Finding>,
) {
    let id = "BEHAV_DESTRUCTIVE";
    let mut read_before: BTreeSet<&str> = BTreeSet::new();
    let mut docs: BTreeMap<String, u64> = BTreeMap::new();
    let mut outside: BTreeMap<String, u64> = BTreeMap::new();
    for f in &o.files {
        if f.access == FileAccess::Read {
            read_before.insert(&f.path);
            continue;
        }
        let trunc = f.flags.iter().any(|x| x == "O_TRUNC");
        let destroys = match f.access {
            FileAccess::Delete | FileAccess::Truncate | FileAccess::RenameFrom => true,
            // Overwriting: writing a file in place, or truncating one that the run read first.
            FileAccess::Write => true,
            FileAccess::Create => trunc && read_before.contains(f.path.as_str()),
            _ => false,
        };
        if !destroys || f.failed {
            continue;
        }
        if f.class == PathClass::UserDocument {
            docs.entry(f.path.clone()).or_insert(f.seq);
        }
        if !matches!(
            f.class,
            PathClass::Workspace | PathClass::Temp | PathClass::Pseudo | PathClass::Cache
        ) {
            outside.entry(f.path.clone()).or_insert(f.seq);
        }
    }
    if !docs.is_empty() {
        let p: Vec<&str> = docs.keys().map(|s| s.as_str()).collect();
        out.push(Finding::keyed(
            key(id, statics),
            id,
            format!(
                "deleted or overwrote {} user document(s): {}",
                docs.len(),
                list(&p)
            ),
            docs.values().copied().collect(),
        ));
    }
    if outside.len() >= cfg.thresholds.destructive_min_files {
        out.push(Finding::keyed(
            key(id, statics),
            id,
            format!(
                "deleted or overwrote {} files outside the workspace",
                outside.len()
            ),
            outside.values().copied().collect(),
        ));
    }
}

const STRONG_MARKERS: &[&str] = &[
    "/.dockerenv",
    "/run/.containerenv",
    "/proc/1/cgroup",
    "/proc/1/sched",
    "/proc/1/mountinfo",
    "/proc/1/comm",
    "/proc/1/cmdline",
    "/proc/1/status",
    // `container=` in PID 1's environment (systemd-detect-virt, container checks)
    "/proc/1/environ",
    "/sys/class/dmi/id",
    "/sys/devices/virtual/dmi/id",
    "/sys/firmware/dmi",
    "/sys/hypervisor",
    "/proc/xen",
    "/proc/vz",
    "/proc/bc",
    "/proc/scsi/scsi",
    "/dev/vboxguest",
    "/dev/vboxuser",
    "/proc/sys/kernel/ostype",
    "/var/run/secrets/kubernetes.io",
    "/run/secrets/kubernetes.io",
    "/.singularity.d",
    "/proc/sys/kernel/seccomp",
];
const WEAK_MARKERS: &[&str] = &[
    "/proc/self/cgroup",
    "/proc/self/mountinfo",
    "/proc/self/status",
    "/proc/self/mounts",
    "/proc/mounts",
    "/sys/fs/cgroup",
    "/proc/cpuinfo",
    "/proc/version",
    "/proc/modules",
    "/proc/uptime",
    "/etc/hostname",
    "/proc/sys/kernel/hostname",
    "/proc/sys/kernel/osrelease",
    "/proc/self/ns",
];
const PROBE_TOOLS: &[&str] = &[
    "systemd-detect-virt",
    "virt-what",
    "dmidecode",
    "imvirt",
    "virt-who",
];
const WEAK_TOOLS: &[&str] = &["lscpu", "hostnamectl", "lsmod", "dmesg", "mount", "findmnt"];

fn marker(path: &str, list: &[&str]) -> Option<String> {
    list.iter()
        .find(|m| {
            path.strip_prefix(**m)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
        .map(|m| m.to_string())
}

pub fn probe_findings(o: &Observations, cfg: &AnalyseConfig, out: &mut Vec<Finding>) {
    let mut strong: BTreeMap<String, u64> = BTreeMap::new();
    let mut weak: BTreeMap<String, u64> = BTreeMap::new();
    for f in o.files.iter().filter(|f| f.access == FileAccess::Read) {
        let p = f.path.replace("/proc/thread-self/", "/proc/self/");
        let p = if let Some(rest) = p.strip_prefix("/proc/").filter(|r| {
            r.split('/')
                .next()
                .is_some_and(|n| n.parse::<i32>().ok() == Some(f.pid))
        }) {
            format!(
                "/proc/self/{}",
                rest.split_once('/').map(|(_, r)| r).unwrap_or("")
            )
        } else {
            p
        };
        if let Some(m) = marker(&p, STRONG_MARKERS) {
            strong.entry(m).or_insert(f.seq);
        } else if let Some(m) = marker(&p, WEAK_MARKERS) {
            weak.entry(m).or_insert(f.seq);
        }
    }
    for e in o
        .execs
        .iter()
        .filter(|e| e.err.as_deref() != Some("ENOENT"))
    {
        let b = basename(&e.program);
        if PROBE_TOOLS.contains(&b.as_str()) {
            strong.entry(b).or_insert(e.seq);
        } else if WEAK_TOOLS.contains(&b.as_str()) {
            weak.entry(b).or_insert(e.seq);
        }
    }
    if !strong.is_empty() || weak.len() >= cfg.thresholds.sandbox_weak_markers {
        let mut names: Vec<&str> = strong.keys().map(|s| s.as_str()).collect();
        names.extend(weak.keys().map(|s| s.as_str()));
        let seqs = strong.values().chain(weak.values()).copied().collect();
        out.push(Finding::new(
            "BEHAV_SANDBOX_PROBE",
            format!(
                "looked for sandbox or virtualisation markers: {}",
                list(&names)
            ),
            seqs,
        ));
    }
}

const ESCAPE_SYSCALLS: &[&str] = &[
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount",
    "umount2",
    "fsopen",
    "fsmount",
    "move_mount",
    "open_tree",
    "unshare",
    "setns",
    "bpf",
    "perf_event_open",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_enter",
    "io_uring_register",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "pivot_root",
    "chroot",
    "swapon",
    "swapoff",
    "reboot",
    "iopl",
    "ioperm",
    "acct",
    "quotactl",
    "lookup_dcookie",
    "vhangup",
    "syslog",
];
const RUNTIME_SOCKETS: &[&str] = &[
    "docker.sock",
    "containerd.sock",
    "podman.sock",
    "crio.sock",
    "dockershim.sock",
    "kubelet.sock",
];
const ESCAPE_PATHS: &[&str] = &[
    "/proc/sysrq-trigger",
    "/dev/mem",
    "/dev/kmem",
    "/proc/kcore",
    "/dev/port",
    "/proc/sys/kernel/core_pattern",
    "/sys/kernel/uevent_helper",
    "/sys/fs/cgroup/release_agent",
];

pub fn escape_findings(o: &Observations, events: &[&Event], out: &mut Vec<Finding>) {
    let mut found: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for ev in events {
        if let EventKind::Denied {
            syscall,
            action,
            arch,
            ..
        } = &ev.kind
        {
            let s = syscall.to_ascii_lowercase();
            if action == "kill" {
                found
                    .entry(format!("{s} ({arch}) killed by the filter"))
                    .or_default()
                    .push(ev.seq);
            } else if ESCAPE_SYSCALLS.contains(&s.as_str()) {
                found.entry(format!("{s} denied")).or_default().push(ev.seq);
            }
        }
    }
    for u in &o.unix {
        if RUNTIME_SOCKETS.iter().any(|s| u.path.ends_with(s)) {
            found
                .entry(format!("connected to container runtime socket {}", u.path))
                .or_default()
                .push(u.seq);
        }
    }
    for f in &o.files {
        let sock = RUNTIME_SOCKETS.iter().any(|s| f.path.ends_with(s));
        let sys_write = f.access.is_write()
            && (f.path.starts_with("/proc/sys/") || f.path.starts_with("/sys/"));
        let mem_write =
            f.access.is_write() && f.path.starts_with("/proc/") && f.path.ends_with("/mem");
        if sock || sys_write || mem_write || marker(&f.path, ESCAPE_PATHS).is_some() {
            found
                .entry(format!("touched {}", f.path))
                .or_default()
                .push(f.seq);
        }
    }
    if !found.is_empty() {
        let names: Vec<&str> = found.keys().map(|s| s.as_str()).collect();
        let seqs = found.values().flatten().copied().collect();
        out.push(Finding::new(
            "BEHAV_ESCAPE_ATTEMPT",
            format!("tried to leave the sandbox: {}", list(&names)),
            seqs,
        ));
    }
}
