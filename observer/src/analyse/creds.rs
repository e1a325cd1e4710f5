//! Credential uses: planted files read (also through aliases), the keychain, other processes'
//! environments, and canary hits from the egress capture: which credential left, to which host (the carrying
//! event is the wire truth), and whether that host is the credential's own service.

use super::hosts::{self, Host};
use super::observe::{CanaryObs, CredObs, Observations};
use super::paths::Layout;
use crate::trace::{Event, EventKind, Trace};
use std::collections::{BTreeMap, BTreeSet, HashMap};

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
        svc.extend(
            super::net::service_hosts(ctx, credential)
                .iter()
                .map(|s| hosts::normalize_host(s).name),
        );
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
            ambient: false,
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

/// `security find-generic-password …` and friends read the macOS keychain (shim or real binary).
pub fn keychain(o: &mut Observations, ev: &Event, step: Option<u32>, prog: &str, argv: &[String]) {
    let sub = argv
        .iter()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .cloned()
        .unwrap_or_default();
    if prog == "security"
        && (sub.starts_with("find-") || sub.starts_with("dump-") || sub == "export")
    {
        o.creds.push(CredObs {
            seq: ev.seq,
            pid: ev.pid,
            step,
            credential: "keychain".into(),
            via: format!("keychain:{sub}"),
            ambient: false,
        });
    }
}

#[allow(clippy::too_many_arguments)]
pub fn cred_read(
    o: &mut Observations,
    layout: &Layout,
    aliases: &BTreeMap<String, (String, Vec<String>)>,
    ev: &Event,
    step: Option<u32>,
    path: &str,
    prog: Option<&(String, Vec<String>)>,
) {
    if let Some((p, c, _)) = layout.credential_for(path) {
        let ambient = ambient_read(layout, p, prog);
        o.creds.push(CredObs {
            seq: ev.seq,
            pid: ev.pid,
            step,
            credential: c.clone(),
            via: format!("file:{p}"),
            ambient,
        });
    } else if let Some((c, _)) = aliases.get(path) {
        o.creds.push(CredObs {
            seq: ev.seq,
            pid: ev.pid,
            step,
            credential: c.clone(),
            via: format!("file:{path} (alias)"),
            ambient: false,
        });
    } else if let Some(rest) = path.strip_prefix("/proc/") {
        let parts: Vec<&str> = rest.split('/').collect();
        if parts.len() == 2 && parts[1] == "environ" && parts[0].bytes().all(|b| b.is_ascii_digit())
        {
            let n: i32 = parts[0].parse().unwrap_or(-1);
            let own = n == ev.pid || Some(n) == ev.vpid || Some(n) == ev.tid;
            // A refused open (EACCES: another user's or a non-dumpable process) read nothing;
            // `systemd-detect-virt` and container checks try PID 1's environment routinely, and
            // that attempt is a sandbox probe (fs.rs), not a credential read.
            let refused =
                matches!(&ev.kind, EventKind::Open { result, .. } if result.err.is_some());
            if !own && !refused {
                o.creds.push(CredObs {
                    seq: ev.seq,
                    pid: ev.pid,
                    step,
                    credential: "process-environment".into(),
                    via: format!("environ:{path}"),
                    ambient: false,
                });
            }
        }
    }
}

/// Client configuration that libraries of any language open on their own (`requests` reads
/// `~/.netrc` before every request without explicit auth; npm, yarn and pnpm read `~/.npmrc`).
const AMBIENT_ANY: &[&str] = &[".netrc", "_netrc", ".npmrc", ".yarnrc", ".yarnrc.yml"];
/// A tool reading its own credential store: (tool names, path under home).
const TOOL_OWN: &[(&[&str], &str)] = &[
    (
        &["npm", "npx", "yarn", "pnpm", "npm-cli.js", "npx-cli.js"],
        ".npmrc",
    ),
    (&["gh"], ".config/gh"),
    (&["aws"], ".aws"),
    (&["kubectl", "helm", "k9s"], ".kube"),
    (&["docker", "docker-credential-desktop"], ".docker"),
    (
        &["git", "git-credential-store", "git-remote-https"],
        ".git-credentials",
    ),
    (
        &["git", "git-credential-store", "git-remote-https"],
        ".config/git/credentials",
    ),
    (&["gcloud", "gsutil", "bq"], ".config/gcloud"),
    (&["az"], ".azure"),
    (&["twine"], ".pypirc"),
    (&["cargo"], ".cargo/credentials.toml"),
];

/// Whether reading the planted file `path` is what ordinary clients do implicitly. `prog` is the
/// reading process's program and argv (for `node …/npm-cli.js` the script names the tool).
fn ambient_read(layout: &Layout, path: &str, prog: Option<&(String, Vec<String>)>) -> bool {
    let home = &layout.home;
    if home.is_empty() {
        return false;
    }
    if AMBIENT_ANY.iter().any(|r| path == format!("{home}/{r}")) {
        return true;
    }
    let Some((program, argv)) = prog else {
        return false;
    };
    let mut names = vec![super::exec::basename(program)];
    names.extend(argv.iter().take(2).map(|a| super::exec::basename(a)));
    TOOL_OWN.iter().any(|(tools, rel)| {
        layout.under(path, &format!("{home}/{rel}"))
            && names.iter().any(|n| tools.contains(&n.as_str()))
    })
}
