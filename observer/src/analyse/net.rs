//! Network- and credential-shaped indicators: undeclared hosts, untrusted sinks, DNS exfiltration,
//! canary exfiltration, credential access and credential flow.

use super::hosts::{self, Host};
use super::observe::Observations;
use super::{AnalyseConfig, Finding};
use crate::model::{Category, StaticView};
use crate::trace::RunContext;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Hosts collapse to `*.parent` when their labels carry data, so one tunnel is one host.
pub fn host_key(name: &str, cfg: &AnalyseConfig) -> String {
    let t = &cfg.thresholds;
    match hosts::tunnel_label_reason(
        name,
        t.dns_long_label,
        t.dns_entropy_x100,
        t.dns_entropy_min_len,
    ) {
        Some(_) => format!("*.{}", hosts::parent_domain(name)),
        None => name.to_string(),
    }
}

pub fn declared(host: &str, statics: &StaticView) -> bool {
    let host = host.trim_start_matches("*.");
    statics
        .declared_hosts
        .iter()
        .filter(|d| hosts::usable_declared(d))
        .any(|d| hosts::host_matches(host, d))
}

/// Declared hosts and every credential's service hosts: names a look-alike would imitate.
pub fn known_hosts(statics: &StaticView, ctx: &RunContext) -> Vec<String> {
    let mut k: BTreeSet<String> = statics
        .declared_hosts
        .iter()
        .map(|h| hosts::normalize_host(h).name)
        .collect();
    for f in &ctx.credential_files {
        k.extend(
            f.service_hosts
                .iter()
                .map(|h| hosts::normalize_host(h).name),
        );
    }
    for e in &ctx.credential_env {
        k.extend(
            e.service_hosts
                .iter()
                .map(|h| hosts::normalize_host(h).name),
        );
    }
    k.into_iter().filter(|h| !h.is_empty()).collect()
}

/// Names seen under one parent domain, their events, and the first tunnel shape found.
type DnsParent = (BTreeSet<String>, Vec<u64>, Option<String>);
type Chain = Vec<String>;

pub struct HostAgg {
    pub host: Host,
    pub seqs: Vec<u64>,
    pub ports: BTreeSet<u16>,
    pub data: bool,
    pub addrs: BTreeSet<String>,
    pub urls: BTreeSet<String>,
    pub via: BTreeSet<&'static str>,
}

pub fn hosts_by_key(o: &Observations, cfg: &AnalyseConfig) -> BTreeMap<String, HostAgg> {
    let mut m: BTreeMap<String, HostAgg> = BTreeMap::new();
    for g in &o.egress {
        let key = host_key(&g.host.name, cfg);
        let a = m.entry(key).or_insert_with(|| HostAgg {
            host: g.host.clone(),
            seqs: vec![],
            ports: BTreeSet::new(),
            data: false,
            addrs: BTreeSet::new(),
            urls: BTreeSet::new(),
            via: BTreeSet::new(),
        });
        a.addrs.extend(g.addr.clone());
        a.urls.extend(g.url.clone());
        a.via.insert(g.via);
        a.seqs.push(g.seq);
        // Port 0 carries nothing: glibc's getaddrinfo `connect()`s a datagram socket to port 0
        // of every answer to rank addresses (RFC 6724) and sends no packet.
        if let Some(p) = g.port.filter(|p| g.via != "dns" && *p != 0) {
            a.ports.insert(p);
        }
        a.data |= g.data;
        a.host.obfuscated |= g.host.obfuscated;
    }
    m
}

pub fn host_findings(
    o: &Observations,
    statics: &StaticView,
    ctx: &RunContext,
    cfg: &AnalyseConfig,
    out: &mut Vec<Finding>,
) {
    let known = known_hosts(statics, ctx);
    let by_key = hosts_by_key(o, cfg);
    let mut undeclared: Vec<(String, Vec<u64>)> = Vec::new();
    for (key, a) in &by_key {
        let is_declared = declared(key, statics);
        if !is_declared {
            let ports: Vec<String> = a.ports.iter().map(|p| p.to_string()).collect();
            let port_s = if ports.is_empty() {
                String::new()
            } else {
                format!(" (port {})", ports.join(","))
            };
            out.push(Finding::new(
                "BEHAV_UNDECLARED_HOST",
                format!("contacted undeclared host {key}{port_s}"),
                a.seqs.clone(),
            ));
            undeclared.push((key.clone(), a.seqs.clone()));
        }
        let ports: Vec<u16> = a.ports.iter().copied().collect();
        let mut why = hosts::sink_reasons(&a.host, &ports, &known);
        if is_declared {
            why.retain(|w| !w.starts_with("unusual port"));
        }
        if !why.is_empty() {
            let key_w = if a.data {
                "BEHAV_UNTRUSTED_SINK.data"
            } else {
                "BEHAV_UNTRUSTED_SINK"
            };
            let data = if a.data { ", data sent" } else { "" };
            out.push(Finding::keyed(
                key_w,
                "BEHAV_UNTRUSTED_SINK",
                format!("{key}: {}{data}", why.join("; ")),
                a.seqs.clone(),
            ));
        }
    }
    if !undeclared.is_empty() {
        let names: Vec<&str> = undeclared.iter().map(|(h, _)| h.as_str()).collect();
        let ev = undeclared
            .iter()
            .flat_map(|(_, s)| s.iter().copied())
            .collect();
        out.push(Finding::new(
            "BEHAV_STATIC_DIVERGENCE",
            format!(
                "contacted hosts the static view does not declare: {}",
                list(&names)
            ),
            ev,
        ));
    }
}

pub fn dns_findings(
    o: &Observations,
    statics: &StaticView,
    cfg: &AnalyseConfig,
    out: &mut Vec<Finding>,
) {
    let t = &cfg.thresholds;
    let mut per_parent: BTreeMap<String, DnsParent> = BTreeMap::new();
    for g in o.egress.iter().filter(|g| g.via == "dns") {
        if declared(&g.host.name, statics) {
            continue;
        }
        let e = per_parent
            .entry(hosts::parent_domain(&g.host.name))
            .or_default();
        e.0.insert(g.host.name.clone());
        e.1.push(g.seq);
        if e.2.is_none() {
            e.2 = hosts::tunnel_label_reason(
                &g.host.name,
                t.dns_long_label,
                t.dns_entropy_x100,
                t.dns_entropy_min_len,
            );
        }
    }
    for (parent, (names, seqs, shape)) in per_parent {
        let many = names.len() >= t.dns_unique_subdomains;
        if shape.is_some() || many {
            let mut why: Vec<String> = shape.into_iter().collect();
            if many {
                why.push(format!("{} distinct names", names.len()));
            }
            out.push(Finding::new(
                "BEHAV_DNS_EXFIL",
                format!(
                    "DNS queries under {parent} look like a tunnel: {}",
                    why.join(", ")
                ),
                seqs,
            ));
        }
    }
    for c in o.canaries.iter().filter(|c| c.via_dns && !c.own_service) {
        let host = c
            .host
            .as_ref()
            .map(|h| hosts::parent_domain(&h.name))
            .unwrap_or_else(|| "unknown".into());
        out.push(Finding::keyed(
            "BEHAV_DNS_EXFIL.canary",
            "BEHAV_DNS_EXFIL",
            format!(
                "planted {} left in DNS queries under {host} ({})",
                c.credential,
                c.chain.join(" → ")
            ),
            vec![c.in_event, c.seq],
        ));
    }
}

pub fn canary_findings(o: &Observations, statics: &StaticView, out: &mut Vec<Finding>) {
    let mut groups: BTreeMap<(String, String, bool), (Vec<u64>, Chain)> = BTreeMap::new();
    for c in &o.canaries {
        let host = c
            .host
            .as_ref()
            .map(|h| h.name.clone())
            .unwrap_or_else(|| "an unknown host".into());
        if c.host.as_ref().is_some_and(hosts::is_loopback) {
            continue;
        }
        let g = groups
            .entry((c.credential.clone(), host, c.own_service))
            .or_default();
        g.0.extend([c.seq, c.in_event]);
        if g.1.is_empty() {
            g.1 = c.chain.clone();
        }
    }
    for ((cred, host, own), (seqs, chain)) in groups {
        let chain = if chain.is_empty() {
            String::new()
        } else {
            format!(" (found via {})", chain.join(" → "))
        };
        if !own {
            out.push(Finding::new(
                "BEHAV_CANARY_EXFIL",
                format!("planted {cred} sent to {host}, not its service{chain}"),
                seqs,
            ));
        } else if declared(&host, statics) {
            out.push(Finding::new(
                "INFO_CRED_TO_OWN_SERVICE",
                format!("{cred} sent to its own declared service {host}"),
                seqs,
            ));
        } else if ambient_only(o, &cred) {
            // npm sending the `~/.npmrc` token it read on its own to its registry: the same
            // ambient act as the read, weighed like it.
            out.push(Finding::keyed(
                "BEHAV_CRED_ACCESS.ambient",
                "BEHAV_CRED_ACCESS",
                format!(
                    "{cred}, read implicitly by its own client, used with its service {host}, which the skill does not declare"
                ),
                seqs,
            ));
        } else {
            out.push(Finding::new(
                "BEHAV_CRED_ACCESS",
                format!("{cred} used with its service {host}, which the skill does not declare"),
                seqs,
            ));
        }
    }
}

/// The credential was read, and only implicitly (a client opening its own store or config).
fn ambient_only(o: &Observations, cred: &str) -> bool {
    let mut reads = o
        .creds
        .iter()
        .filter(|c| c.credential == cred && !c.via.starts_with("egress:"))
        .peekable();
    reads.peek().is_some() && reads.all(|c| c.ambient)
}

/// Service hosts of a credential id, from the run context.
pub fn service_hosts(ctx: &RunContext, cred: &str) -> Vec<String> {
    let f = ctx
        .credential_files
        .iter()
        .filter(|f| f.credential == cred)
        .flat_map(|f| f.service_hosts.iter());
    let e = ctx
        .credential_env
        .iter()
        .filter(|e| e.credential == cred)
        .flat_map(|e| e.service_hosts.iter());
    f.chain(e).cloned().collect()
}

/// A credential read is declared when the static view says `credential` and either declares no
/// hosts or declares a host of that credential's service.
pub fn cred_declared(statics: &StaticView, ctx: &RunContext, cred: &str) -> bool {
    if !statics.categories.contains(&Category::Credential) {
        return false;
    }
    if statics.declared_hosts.is_empty() || matches!(cred, "keychain" | "process-environment") {
        return true;
    }
    service_hosts(ctx, cred)
        .iter()
        .any(|s| declared(&hosts::normalize_host(s).name, statics))
}

pub fn cred_access_findings(
    o: &Observations,
    statics: &StaticView,
    ctx: &RunContext,
    out: &mut Vec<Finding>,
) {
    let mut by_cred: BTreeMap<(String, bool), (BTreeSet<String>, Vec<u64>)> = BTreeMap::new();
    for c in o.creds.iter().filter(|c| !c.via.starts_with("egress:")) {
        let e = by_cred
            .entry((c.credential.clone(), c.ambient))
            .or_default();
        e.0.insert(c.via.clone());
        e.1.push(c.seq);
    }
    for ((cred, ambient), (vias, seqs)) in by_cred {
        if cred_declared(statics, ctx, &cred) {
            continue;
        }
        let v: Vec<&str> = vias.iter().map(|s| s.as_str()).collect();
        let (key, how) = if ambient {
            (
                "BEHAV_CRED_ACCESS.ambient",
                "implicitly read planted credential",
            )
        } else {
            ("BEHAV_CRED_ACCESS", "read planted credential")
        };
        out.push(Finding::keyed(
            key,
            "BEHAV_CRED_ACCESS",
            format!("{how} {cred} ({})", list(&v)),
            seqs,
        ));
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum Unit {
    Step(u32),
    Pid(i32),
}

fn unit(pid: i32, step: Option<u32>) -> Option<Unit> {
    match (step, pid) {
        (Some(s), _) => Some(Unit::Step(s)),
        (None, p) if p > 0 => Some(Unit::Pid(p)),
        _ => None,
    }
}

/// A process tree that read planted credentials and later sent anything to an undeclared host
/// that is not the credential's own service: data may have left encrypted or mangled.
pub fn cred_flow_findings(
    o: &Observations,
    statics: &StaticView,
    ctx: &RunContext,
    out: &mut Vec<Finding>,
) {
    enum Ev<'a> {
        Cred(u64, Option<Unit>, &'a str),
        Write(u64, Option<Unit>, &'a str),
        Read(u64, Option<Unit>, &'a str),
        Egress(u64, Option<Unit>, &'a Host),
    }
    let mut evs: Vec<Ev> = Vec::new();
    // Implicit client reads are not a taint source: a library that opens `~/.netrc` before every
    // request would otherwise turn every request into a credential flow.
    for c in o
        .creds
        .iter()
        .filter(|c| !c.via.starts_with("egress:") && !c.ambient)
    {
        evs.push(Ev::Cred(c.seq, unit(c.pid, c.step), &c.credential));
    }
    for f in o.files.iter().filter(|f| !f.failed) {
        let u = unit(f.pid, f.step);
        if f.access.is_write() {
            evs.push(Ev::Write(f.seq, u, &f.path));
        } else {
            evs.push(Ev::Read(f.seq, u, &f.path));
        }
    }
    for g in &o.egress {
        evs.push(Ev::Egress(g.seq, unit(g.pid, g.step), &g.host));
    }
    let seq_of = |e: &Ev| match e {
        Ev::Cred(s, ..) | Ev::Write(s, ..) | Ev::Read(s, ..) | Ev::Egress(s, ..) => *s,
    };
    evs.sort_by_key(seq_of);
    // unit -> (first taint seq, credentials)
    let mut tainted: HashMap<Option<Unit>, (u64, BTreeSet<String>)> = HashMap::new();
    let mut tainted_files: HashMap<&str, (u64, BTreeSet<String>)> = HashMap::new();
    let mut any_taint: Option<(u64, BTreeSet<String>)> = None;
    let mut hits: BTreeMap<String, (Vec<u64>, BTreeSet<String>)> = BTreeMap::new();
    for e in &evs {
        match e {
            Ev::Cred(s, u, c) => {
                let t = tainted.entry(*u).or_insert((*s, BTreeSet::new()));
                t.1.insert(c.to_string());
                let a = any_taint.get_or_insert((*s, BTreeSet::new()));
                a.1.insert(c.to_string());
            }
            Ev::Write(_, u, p) => {
                if let Some(t) = tainted.get(u).cloned() {
                    tainted_files.insert(p, t);
                }
            }
            Ev::Read(_, u, p) => {
                // The taint keeps the seq of the original credential read: that is the evidence.
                if let Some((origin, creds)) = tainted_files.get(p).cloned() {
                    let t = tainted.entry(*u).or_insert((origin, BTreeSet::new()));
                    t.1.extend(creds);
                }
            }
            Ev::Egress(s, u, h) => {
                if hosts::is_loopback(h) || declared(&h.name, statics) {
                    continue;
                }
                // Egress we cannot attribute is judged against any taint (fail closed).
                let t = if u.is_none() {
                    any_taint.as_ref()
                } else {
                    tainted.get(u)
                };
                let Some((first, creds)) = t else { continue };
                let own = creds
                    .iter()
                    .all(|c| hosts::matches_any(&h.name, &service_hosts(ctx, c)));
                if own {
                    continue;
                }
                let e = hits.entry(h.name.clone()).or_default();
                e.0.extend([*first, *s]);
                e.1.extend(creds.iter().cloned());
            }
        }
    }
    for (host, (seqs, creds)) in hits {
        let c: Vec<&str> = creds.iter().map(|s| s.as_str()).collect();
        out.push(Finding::new(
            "BEHAV_CRED_FLOW",
            format!(
                "process tree that read {} later sent data to undeclared host {host}",
                list(&c)
            ),
            seqs,
        ));
    }
}

pub fn list(items: &[&str]) -> String {
    const MAX: usize = 6;
    if items.len() <= MAX {
        items.join(", ")
    } else {
        format!("{} and {} more", items[..MAX].join(", "), items.len() - MAX)
    }
}
