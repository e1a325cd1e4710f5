//! First stage of the analyser: turn raw trace events into normalised observations (processes,
//! programs, file accesses, egress, credential uses, canary hits) that the profile and the
//! indicators are computed from.

use super::hosts::{self, Host};
use super::paths::{normalize, Layout};
use crate::report::{FileAccess, PathClass};
use crate::trace::{Event, EventKind, FileOp, NetOp, Trace};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone)]
pub struct ExecObs {
    pub seq: u64,
    pub pid: i32,
    pub step: Option<u32>,
    /// The program running after the exec (`exe`; for a `#!` script, its interpreter).
    pub program: String,
    /// The path the caller asked to execute (for a `#!` script, the script).
    pub path: String,
    pub argv: Vec<String>,
    pub cwd: String,
    pub ok: bool,
    /// The error when the kernel refused it (`ENOENT` from a PATH search is noise).
    pub err: Option<String>,
    pub execution: bool,
}

#[derive(Debug, Clone)]
pub struct FileObs {
    pub seq: u64,
    pub pid: i32,
    pub step: Option<u32>,
    pub path: String,
    pub class: PathClass,
    pub access: FileAccess,
    pub failed: bool,
    pub flags: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct EgressObs {
    pub seq: u64,
    pub pid: i32,
    pub step: Option<u32>,
    pub host: Host,
    pub addr: Option<String>,
    pub port: Option<u16>,
    pub via: &'static str,
    pub url: Option<String>,
    /// A payload was seen leaving (body, query, stream bytes, datagram).
    pub data: bool,
}

#[derive(Debug, Clone)]
pub struct CredObs {
    pub seq: u64,
    pub pid: i32,
    pub step: Option<u32>,
    pub credential: String,
    pub via: String,
    /// A read that common clients do implicitly (`~/.netrc` by HTTP libraries, `~/.npmrc` by npm,
    /// a tool reading its own credential store): reported, weighted low, not a taint source.
    pub ambient: bool,
}

#[derive(Debug, Clone)]
pub struct CanaryObs {
    pub seq: u64,
    pub canary: String,
    pub credential: String,
    pub chain: Vec<String>,
    pub in_event: u64,
    pub host: Option<Host>,
    pub service_hosts: Vec<String>,
    pub own_service: bool,
    pub via_dns: bool,
}

#[derive(Debug, Clone)]
pub struct UnixObs {
    pub seq: u64,
    pub path: String,
}

/// Everything the later stages need, in sequence order.
#[derive(Debug, Default)]
pub struct Observations {
    pub parent: HashMap<i32, i32>,
    pub pid_step: HashMap<i32, u32>,
    pub execs: Vec<ExecObs>,
    pub files: Vec<FileObs>,
    pub egress: Vec<EgressObs>,
    pub creds: Vec<CredObs>,
    pub canaries: Vec<CanaryObs>,
    pub unix: Vec<UnixObs>,
    /// (seq, program, argv)
    pub shims: Vec<(u64, String, Vec<String>)>,
    /// Ranges of sequence numbers missing from the trace (lost or removed events).
    pub seq_gaps: Vec<(u64, u64)>,
}

/// Bytes a TLS client sends in a handshake; more than this through a tunnel we could not open
/// means application data left.
const TLS_HANDSHAKE_BYTES: u64 = 4096;

pub fn observe(trace: &Trace, layout: &Layout, events: &[&Event]) -> Observations {
    let mut o = Observations::default();
    let mut addr_names: HashMap<String, String> = HashMap::new();
    let mut port_owner: HashMap<u16, (i32, Option<u32>)> = HashMap::new();
    let mut last_seq = 0u64;
    for ev in events {
        if ev.seq > last_seq + 1 {
            o.seq_gaps.push((last_seq + 1, ev.seq - 1));
        }
        last_seq = last_seq.max(ev.seq);
        if let Some(s) = ev.step {
            o.pid_step.entry(ev.pid).or_insert(s);
        }
        match &ev.kind {
            EventKind::Spawn {
                parent,
                child,
                thread: false,
            } => {
                o.parent.entry(*child).or_insert(*parent);
            }
            EventKind::DnsQuery {
                name,
                answer: Some(a),
                ..
            } => {
                for part in a.split([',', ' ', ';']).filter(|p| !p.is_empty()) {
                    let h = hosts::normalize_host(part);
                    if h.ip.is_some() {
                        addr_names.insert(h.name, hosts::normalize_host(name).name);
                    }
                }
            }
            EventKind::Connection {
                dst_addr,
                name: Some(n),
                ..
            } => {
                addr_names.insert(
                    hosts::normalize_host(dst_addr).name,
                    hosts::normalize_host(n).name,
                );
            }
            EventKind::Net {
                local_port: Some(p),
                ..
            } => {
                port_owner.insert(*p, (ev.pid, ev.step));
            }
            _ => {}
        }
        if let Some(pp) = ev.ppid {
            if pp > 0 && pp != ev.pid {
                o.parent.entry(ev.pid).or_insert(pp);
            }
        }
    }
    // Children spawned before their first stepped event inherit the parent's step.
    let spawns: Vec<(i32, i32)> = o.parent.iter().map(|(c, p)| (*c, *p)).collect();
    for _ in 0..4 {
        for (c, p) in &spawns {
            if !o.pid_step.contains_key(c) {
                if let Some(s) = o.pid_step.get(p).copied() {
                    o.pid_step.insert(*c, s);
                }
            }
        }
    }
    let resolve = |addr: &str| -> Host {
        let h = hosts::normalize_host(addr);
        match addr_names.get(&h.name) {
            Some(n) => hosts::normalize_host(n),
            None => h,
        }
    };

    let mut cwd: HashMap<i32, String> = HashMap::new();
    // pid -> (program, argv) of its latest successful exec
    let mut last_exec: HashMap<i32, (String, Vec<String>)> = HashMap::new();
    let mut aliases: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for ev in events {
        let step = ev.step.or_else(|| o.pid_step.get(&ev.pid).copied());
        let pid_cwd = cwd
            .get(&ev.pid)
            .cloned()
            .or_else(|| o.parent.get(&ev.pid).and_then(|p| cwd.get(p).cloned()));
        let file = |path: &str,
                    access: FileAccess,
                    failed: bool,
                    flags: &[String],
                    o: &mut Observations| {
            let path = normalize(path, pid_cwd.as_deref());
            let class = layout.classify(&path);
            o.files.push(FileObs {
                seq: ev.seq,
                pid: ev.pid,
                step,
                path,
                class,
                access,
                failed,
                flags: flags.to_vec(),
            });
        };
        match &ev.kind {
            EventKind::Exec {
                path,
                argv,
                cwd: c,
                exe,
                result,
            } => {
                let ok = result.ret.is_none_or(|r| r >= 0);
                let base = if c.is_empty() {
                    pid_cwd.clone()
                } else {
                    Some(normalize(c, None))
                };
                let program = normalize(exe.as_deref().unwrap_or(path), base.as_deref());
                let requested = normalize(path, base.as_deref());
                if ok {
                    if let Some(b) = &base {
                        cwd.insert(ev.pid, b.clone());
                    }
                    last_exec.insert(ev.pid, (program.clone(), argv.clone()));
                }
                if ok {
                    super::creds::keychain(
                        &mut o,
                        ev,
                        step,
                        &super::exec::basename(&program),
                        argv,
                    );
                }
                o.execs.push(ExecObs {
                    seq: ev.seq,
                    pid: ev.pid,
                    step,
                    program,
                    path: requested,
                    argv: argv.clone(),
                    cwd: base.unwrap_or_default(),
                    ok,
                    err: if ok { None } else { result.err.clone() },
                    execution: true,
                });
            }
            EventKind::Open {
                path,
                flags,
                write,
                result,
                ..
            } => {
                let failed = result.ret.is_some_and(|r| r < 0);
                let enoent = result.err.as_deref() == Some("ENOENT");
                let is_dir = flags.iter().any(|f| f == "O_DIRECTORY");
                let creat = flags.iter().any(|f| f == "O_CREAT");
                let write = *write
                    || flags
                        .iter()
                        .any(|f| f == "O_WRONLY" || f == "O_RDWR" || f == "O_TRUNC");
                if write {
                    let access = if creat {
                        FileAccess::Create
                    } else {
                        FileAccess::Write
                    };
                    file(path, access, failed, flags, &mut o);
                } else if !(is_dir || failed && enoent) {
                    file(path, FileAccess::Read, failed, flags, &mut o);
                }
                if !write && !is_dir {
                    let np = normalize(path, pid_cwd.as_deref());
                    let prog = last_exec.get(&ev.pid);
                    super::creds::cred_read(&mut o, layout, &aliases, ev, step, &np, prog);
                }
            }
            EventKind::FileOp {
                op,
                path,
                path2,
                result,
                ..
            } => {
                let failed = result.ret.is_some_and(|r| r < 0);
                let second = path2.as_deref();
                match op {
                    FileOp::Unlink | FileOp::Rmdir => {
                        file(path, FileAccess::Delete, failed, &[], &mut o)
                    }
                    FileOp::Mkdir => file(path, FileAccess::Mkdir, failed, &[], &mut o),
                    FileOp::Chmod => file(path, FileAccess::Chmod, failed, &[], &mut o),
                    FileOp::Chown => file(path, FileAccess::Chown, failed, &[], &mut o),
                    FileOp::Truncate => file(path, FileAccess::Truncate, failed, &[], &mut o),
                    // symlink: `path` is the new link, `path2` only the target string.
                    FileOp::Symlink => file(path, FileAccess::Symlink, failed, &[], &mut o),
                    // rename/link: `path` is the existing name, `path2` the new one.
                    FileOp::Rename | FileOp::Link => {
                        if *op == FileOp::Rename {
                            file(path, FileAccess::RenameFrom, failed, &[], &mut o);
                        }
                        let dst = second.unwrap_or(path);
                        let access = if *op == FileOp::Rename {
                            FileAccess::RenameTo
                        } else {
                            FileAccess::Link
                        };
                        file(dst, access, failed, &[], &mut o);
                        let src = normalize(path, pid_cwd.as_deref());
                        let dst_n = normalize(dst, pid_cwd.as_deref());
                        let cred = layout
                            .credential_for(&src)
                            .map(|(_, c, h)| (c.clone(), h.clone()))
                            .or_else(|| aliases.get(&src).cloned());
                        if let (Some(c), Some(_)) = (cred, second) {
                            // Moving or hard-linking a credential is access; later reads of the new
                            // name are too (the kernel reports the link's own path on open).
                            o.creds.push(CredObs {
                                seq: ev.seq,
                                pid: ev.pid,
                                step,
                                credential: c.0.clone(),
                                via: format!("file:{src}"),
                                ambient: false,
                            });
                            aliases.insert(dst_n, c);
                        }
                    }
                }
            }
            EventKind::Net {
                op,
                family,
                addr,
                port,
                bytes,
                ..
            } => {
                if family == "unix" {
                    if let Some(a) = addr {
                        o.unix.push(UnixObs {
                            seq: ev.seq,
                            path: a.clone(),
                        });
                    }
                    continue;
                }
                if !matches!(op, NetOp::Connect | NetOp::Sendto | NetOp::Sendmsg) {
                    continue;
                }
                let (Some(a), true) = (addr, family == "inet" || family == "inet6") else {
                    continue;
                };
                let h = resolve(a);
                if hosts::is_loopback(&h) {
                    continue;
                }
                let resolver = *port == Some(53) && h.ip.is_some_and(hosts::is_private_ip);
                if resolver {
                    continue;
                }
                o.egress.push(EgressObs {
                    seq: ev.seq,
                    pid: ev.pid,
                    step,
                    host: h,
                    addr: Some(a.clone()),
                    port: *port,
                    via: "socket",
                    url: None,
                    data: bytes.unwrap_or(0) > 0,
                });
            }
            EventKind::DnsQuery { name, .. } if !hosts::is_local_dns_name(name) => {
                let host = hosts::normalize_host(name);
                let obs = egress(ev.seq, ev.pid, step, host, None, None, "dns", None, false);
                o.egress.push(obs);
            }
            EventKind::Connection {
                dst_addr,
                dst_port,
                src_port,
                name,
                ..
            } => {
                let h = match name {
                    Some(n) => hosts::normalize_host(n),
                    None => resolve(dst_addr),
                };
                if hosts::is_loopback(&h) {
                    continue;
                }
                let (pid, step) =
                    attribute(ev, step, src_port.and_then(|p| port_owner.get(&p).copied()));
                o.egress.push(egress(
                    ev.seq,
                    pid,
                    step,
                    h,
                    Some(dst_addr.clone()),
                    Some(*dst_port),
                    "connection",
                    None,
                    false,
                ));
            }
            EventKind::HttpRequest {
                url,
                host,
                body_size,
                ..
            } => {
                let h = if host.is_empty() {
                    hosts::normalize_host(url)
                } else {
                    hosts::normalize_host(host)
                };
                if hosts::is_loopback(&h) {
                    continue;
                }
                let data = *body_size > 0 || url.contains('?');
                o.egress.push(egress(
                    ev.seq,
                    ev.pid,
                    step,
                    h,
                    None,
                    url_port(url),
                    "http",
                    Some(url.clone()),
                    data,
                ));
            }
            EventKind::TlsHandshake {
                sni: Some(sni),
                bytes_out,
                intercepted,
                ..
            } => {
                let h = hosts::normalize_host(sni);
                if !hosts::is_loopback(&h) {
                    let data = !intercepted && *bytes_out > TLS_HANDSHAKE_BYTES;
                    o.egress.push(egress(
                        ev.seq, ev.pid, step, h, None, None, "tls", None, data,
                    ));
                }
            }
            EventKind::Stream {
                dst_addr,
                dst_port,
                bytes_out,
                ..
            } => {
                let h = resolve(dst_addr);
                if !hosts::is_loopback(&h) {
                    o.egress.push(egress(
                        ev.seq,
                        ev.pid,
                        step,
                        h,
                        Some(dst_addr.clone()),
                        Some(*dst_port),
                        "stream",
                        None,
                        *bytes_out > 0,
                    ));
                }
            }
            EventKind::Shim { program, argv } => {
                let prog = program.rsplit('/').next().unwrap_or(program).to_string();
                super::creds::keychain(&mut o, ev, step, &prog, argv);
                o.shims.push((ev.seq, prog, argv.clone()));
            }
            _ => {}
        }
    }
    super::creds::canaries(&mut o, trace, events, &addr_names);
    o
}

#[allow(clippy::too_many_arguments)]
fn egress(
    seq: u64,
    pid: i32,
    step: Option<u32>,
    host: Host,
    addr: Option<String>,
    port: Option<u16>,
    via: &'static str,
    url: Option<String>,
    data: bool,
) -> EgressObs {
    EgressObs {
        seq,
        pid,
        step,
        host,
        addr,
        port,
        via,
        url,
        data,
    }
}

/// Egress seen by the proxy may lack the pid; the tracer's connect with the same source port has it.
fn attribute(
    ev: &Event,
    step: Option<u32>,
    owner: Option<(i32, Option<u32>)>,
) -> (i32, Option<u32>) {
    match owner {
        Some((pid, s)) if ev.pid <= 0 => (pid, s.or(step)),
        _ => (ev.pid, step),
    }
}

fn url_port(url: &str) -> Option<u16> {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let auth = rest.split(['/', '?', '#']).next().unwrap_or("");
    let auth = auth.rsplit('@').next().unwrap_or(auth);
    let after_v6 = auth.rsplit(']').next().unwrap_or(auth);
    if let Some((_, p)) = after_v6.rsplit_once(':') {
        return p.parse().ok();
    }
    if url.starts_with("https://") {
        Some(443)
    } else if url.starts_with("http://") {
        Some(80)
    } else {
        None
    }
}
