//! Canary hits from the egress capture: which credential left, to which host (the carrying
//! event is the wire truth), and whether that host is the credential's own service.

use super::hosts::{self, Host};
use super::observe::{CanaryObs, CredObs, Observations};
use crate::trace::{Event, EventKind, Trace};
use std::collections::{BTreeSet, HashMap};

pub fn canaries(
    o: &mut Observations,
    trace: &Trace,
    events: &[&Event],
    addr_names: &HashMap<String, String>,
) {
    let by_seq: HashMap<u64, &Event> = events.iter().map(|e| (e.seq, *e)).collect();
    let ctx = &trace.header.context;
    for ev in events {
        let EventKind::CanaryHit {
            canary,
            credential,
            chain,
            in_event,
            host,
            service_hosts,
        } = &ev.kind
        else {
            continue;
        };
        let src = by_seq.get(in_event);
        let derived: Option<String> = src.and_then(|e| match &e.kind {
            EventKind::HttpRequest { host, url, .. } => Some(if host.is_empty() {
                url.clone()
            } else {
                host.clone()
            }),
            EventKind::DnsQuery { name, .. } => Some(name.clone()),
            EventKind::TlsHandshake { sni, .. } => sni.clone(),
            EventKind::Connection { name, dst_addr, .. } => {
                Some(name.clone().unwrap_or(dst_addr.clone()))
            }
            EventKind::Stream { dst_addr, .. } => Some(dst_addr.clone()),
            EventKind::Net { addr, .. } => addr.clone(),
            _ => None,
        });
        // Prefer what the carrying event says over the hit's own label: it is the wire truth.
        let h = derived.or(host.clone()).map(|raw| {
            let h = hosts::normalize_host(&raw);
            match addr_names.get(&h.name) {
                Some(n) => hosts::normalize_host(n),
                None => h,
            }
        });
        let mut svc: BTreeSet<String> = service_hosts
            .iter()
            .map(|s| hosts::normalize_host(s).name)
            .collect();
        for f in &ctx.credential_files {
            if &f.credential == credential {
                svc.extend(
                    f.service_hosts
                        .iter()
                        .map(|s| hosts::normalize_host(s).name),
                );
            }
        }
        for e in &ctx.credential_env {
            if &e.credential == credential {
                svc.extend(
                    e.service_hosts
                        .iter()
                        .map(|s| hosts::normalize_host(s).name),
                );
            }
        }
        svc.remove("");
        let svc: Vec<String> = svc.into_iter().collect();
        let mut h = h;
        if let Some(real) = src.and_then(|e| fronted(o, e, h.as_ref()?, &svc)) {
            h = Some(real);
        }
        let own_service = h
            .as_ref()
            .is_some_and(|h| hosts::matches_any(&h.name, &svc));
        let via_dns = src.is_some_and(|e| matches!(e.kind, EventKind::DnsQuery { .. }))
            || chain.iter().any(|c| c.to_ascii_lowercase().contains("dns"));
        let (pid, step) = src.map(|e| (e.pid, e.step)).unwrap_or((ev.pid, ev.step));
        o.creds.push(CredObs {
            seq: ev.seq,
            pid,
            step,
            credential: credential.clone(),
            via: format!(
                "egress:{}",
                h.as_ref()
                    .map(|h| h.name.as_str())
                    .unwrap_or("unknown host")
            ),
        });
        o.canaries.push(CanaryObs {
            seq: ev.seq,
            canary: canary.clone(),
            credential: credential.clone(),
            chain: chain.clone(),
            in_event: *in_event,
            host: h,
            service_hosts: svc,
            own_service,
            via_dns,
        });
    }
}

/// An HTTP request may name the credential's service in its `Host` header while the process only
/// ever connected elsewhere (domain fronting, or a raw IP with a forged header). Then the wire
/// destination is the host it connected to. Returns that host when the claim is unsupported.
fn fronted(o: &Observations, carrier: &Event, claimed: &Host, svc: &[String]) -> Option<Host> {
    if !matches!(carrier.kind, EventKind::HttpRequest { .. }) || carrier.pid <= 0 {
        return None;
    }
    if !hosts::matches_any(&claimed.name, svc) {
        return None;
    }
    let conns: Vec<&Host> = o
        .egress
        .iter()
        .filter(|g| g.pid == carrier.pid && g.seq < carrier.seq)
        .filter(|g| matches!(g.via, "connection" | "socket" | "tls"))
        .map(|g| &g.host)
        .collect();
    if conns.is_empty() || conns.iter().any(|c| hosts::matches_any(&c.name, svc)) {
        return None;
    }
    conns.last().map(|c| (*c).clone())
}
