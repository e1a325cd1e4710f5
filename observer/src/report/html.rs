//! One self-contained HTML page for a run: inline CSS, no scripts, no fetches. Every string from
//! the trace is attacker-controlled and is escaped.

use super::{FileAccess, Report, Verdict};
use crate::trace::{EventKind, Trace};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Rows of the timeline; a run with more events links to the JSON trace for the rest.
const TIMELINE_MAX: usize = 2000;

pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if c.is_control() => o.push('\u{fffd}'),
            c => o.push(c),
        }
    }
    o
}

const CSS: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232b;background:#f6f7f9}
main{max-width:1200px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d8dde3;padding-bottom:4px}
.verdict{display:inline-block;padding:6px 14px;border-radius:6px;color:#fff;font-weight:700;font-size:18px;margin-right:12px}
.CLEAN{background:#23863b}.SUSPICIOUS{background:#b7791f}.MALICIOUS{background:#c53030}.INCOMPLETE{background:#5a6472}
.score{font-size:18px;font-weight:600}.meta{color:#5a6472;margin-top:6px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}th,td{border:1px solid #e1e5ea;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f4}td.mono,.mono{font-family:ui-monospace,monospace;word-break:break-all}
.sev-high{color:#c53030;font-weight:700}.sev-medium{color:#b7791f;font-weight:600}.sev-low{color:#5a6472}.sev-info{color:#2b6cb0}
.warn{background:#fff4e5;border:1px solid #f0c27b;padding:8px 12px;border-radius:6px}
ul.tree{list-style:none;padding-left:18px;margin:0}ul.tree li{margin:2px 0}.pid{color:#5a6472}
tr.k-canary_hit td{background:#fde8e8}tr.k-step_start td,tr.k-step_end td{background:#eef4fb}tr.k-denied td{background:#fff4e5}
a{color:#2b6cb0;text-decoration:none}";

/// Render the report (and the trace it was judged from) as one HTML document.
pub fn render_html(r: &Report, t: &Trace) -> String {
    let mut h = String::new();
    let v = r.verdict.as_str();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <title>{} — {v}</title><style>{CSS}</style></head><body><main>",
        esc(&r.skill.name)
    );
    let fid = r.skill.fidelity.map(|f| f.as_str()).unwrap_or("unknown");
    let _ = write!(
        h,
        "<h1>{}</h1><div><span class=\"verdict {v}\" id=\"verdict\">{v}</span><span class=\"score\" id=\"score\">score {}/100 · {}</span></div>\
         <div class=\"meta\">os {} · fidelity {} · {} ms · {} events · run {} · started {} · digest <span class=\"mono\">{}</span></div>",
        esc(&r.skill.name),
        r.score,
        r.band.as_str(),
        esc(&r.run.os),
        fid,
        r.run.duration_ms,
        r.run.events,
        esc(&r.run.run_id),
        esc(&r.run.started_at),
        esc(r.skill.digest.as_deref().unwrap_or("-")),
    );
    if !r.run.complete {
        h.push_str("<p class=\"warn\" id=\"incomplete\"><b>Incomplete run.</b> ");
        let reasons: Vec<String> = r.run.incomplete_reasons.iter().map(|x| esc(x)).collect();
        h.push_str(&reasons.join("; "));
        if r.verdict != Verdict::Incomplete {
            h.push_str(" — findings made before coverage was lost still count.");
        }
        h.push_str("</p>");
    }
    indicators(&mut h, r);
    categories(&mut h, r);
    egress(&mut h, r);
    tree(&mut h, r);
    files(&mut h, r);
    timeline(&mut h, t);
    h.push_str("</main></body></html>\n");
    h
}

fn ev_links(ev: &[u64]) -> String {
    if ev.is_empty() {
        return "-".into();
    }
    ev.iter()
        .map(|e| format!("<a href=\"#ev-{e}\">{e}</a>"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn indicators(h: &mut String, r: &Report) {
    h.push_str("<h2>Indicators</h2>");
    if r.indicators.is_empty() {
        h.push_str("<p>None.</p>");
        return;
    }
    h.push_str("<table id=\"indicators\"><tr><th>severity</th><th>indicator</th><th>weight</th><th>summary</th><th>evidence (event)</th></tr>");
    for i in &r.indicators {
        let sev = i.severity.as_str();
        let _ = write!(
            h,
            "<tr><td class=\"sev-{sev}\">{sev}</td><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&i.id),
            i.weight,
            esc(&i.summary),
            ev_links(&i.evidence)
        );
    }
    h.push_str("</table>");
}

fn categories(h: &mut String, r: &Report) {
    h.push_str(
        "<h2>Categories</h2><table><tr><th>category</th><th>declared</th><th>evidence</th></tr>",
    );
    for c in &r.categories {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            c.category.as_str(),
            if c.declared { "yes" } else { "<b>no</b>" },
            ev_links(&c.evidence)
        );
    }
    let declared: Vec<&str> = r
        .static_view
        .categories
        .iter()
        .map(|c| c.as_str())
        .collect();
    let _ = write!(
        h,
        "</table><p class=\"meta\">Static view ({:?}): categories [{}], hosts [{}]</p>",
        r.static_view.source,
        declared.join(", "),
        esc(&r.static_view.declared_hosts.join(", "))
    );
}

fn egress(h: &mut String, r: &Report) {
    h.push_str("<h2>Egress</h2>");
    if r.profile.hosts.is_empty() {
        h.push_str("<p>No egress.</p>");
    } else {
        h.push_str("<table id=\"egress\"><tr><th>host</th><th>declared</th><th>ports</th><th>via</th><th>data</th><th>addresses / URLs</th><th>events</th></tr>");
        for x in &r.profile.hosts {
            let mut detail: Vec<String> = x.addrs.iter().map(|a| esc(a)).collect();
            detail.extend(x.urls.iter().take(10).map(|u| esc(u)));
            let ports: Vec<String> = x.ports.iter().map(|p| p.to_string()).collect();
            let _ = write!(
                h,
                "<tr><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td><td>{}</td></tr>",
                esc(&x.host),
                if x.declared { "yes" } else { "<b>no</b>" },
                ports.join(", "),
                x.via.join(", "),
                if x.sent_data { "sent" } else { "-" },
                detail.join("<br>"),
                ev_links(&x.evidence)
            );
        }
        h.push_str("</table>");
    }
    if !r.profile.canary_hits.is_empty() {
        h.push_str("<h2>Canary hits</h2><table id=\"canaries\"><tr><th>credential</th><th>to host</th><th>own service</th><th>decoding chain</th><th>hit / carrier</th></tr>");
        for c in &r.profile.canary_hits {
            let chain: Vec<String> = c.chain.iter().map(|x| esc(x)).collect();
            let _ = write!(
                h,
                "<tr><td>{}</td><td class=\"mono\">{}</td><td>{}</td><td class=\"mono\">{}</td><td>{}</td></tr>",
                esc(&c.credential),
                esc(c.host.as_deref().unwrap_or("unknown")),
                if c.own_service { "yes" } else { "<b>no</b>" },
                if chain.is_empty() { "raw".into() } else { chain.join(" → ") },
                ev_links(&[c.seq, c.in_event])
            );
        }
        h.push_str("</table>");
    }
}

fn tree(h: &mut String, r: &Report) {
    h.push_str("<h2>Process tree</h2>");
    let procs = &r.profile.processes;
    let known: std::collections::BTreeSet<i32> = procs.iter().map(|p| p.pid).collect();
    let mut children: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    let mut roots = Vec::new();
    for (i, p) in procs.iter().enumerate() {
        match p.parent.filter(|pp| known.contains(pp) && *pp != p.pid) {
            Some(pp) => children.entry(pp).or_default().push(i),
            None => roots.push(i),
        }
    }
    h.push_str("<ul class=\"tree\" id=\"tree\">");
    let mut seen = std::collections::HashSet::new();
    for i in roots {
        node(h, r, i, &children, &mut seen, 0);
    }
    h.push_str("</ul>");
}

fn node(
    h: &mut String,
    r: &Report,
    i: usize,
    ch: &BTreeMap<i32, Vec<usize>>,
    seen: &mut std::collections::HashSet<i32>,
    depth: usize,
) {
    let p = &r.profile.processes[i];
    // A malformed trace can make parent links cycle; each pid is drawn once, depth is bounded.
    if !seen.insert(p.pid) || depth > 64 {
        return;
    }
    let prog = p.program.as_deref().unwrap_or("(no exec)");
    let argv = super::summary::one_line(&p.argv.join(" "));
    let step = p.step.map(|s| format!(" · step {s}")).unwrap_or_default();
    let exit = match (p.exit_code, p.signal) {
        (Some(c), _) => format!(" · exit {c}"),
        (_, Some(s)) => format!(" · signal {s}"),
        _ => String::new(),
    };
    let _ = write!(h, "<li><span class=\"pid\">[{}]</span> <span class=\"mono\">{}</span> <span class=\"mono\">{}</span><span class=\"pid\">{step}{exit}</span>", p.pid, esc(prog), esc(&argv));
    if let Some(kids) = ch.get(&p.pid) {
        h.push_str("<ul class=\"tree\">");
        for k in kids {
            node(h, r, *k, ch, seen, depth + 1);
        }
        h.push_str("</ul>");
    }
    h.push_str("</li>");
}

fn files(h: &mut String, r: &Report) {
    let written: Vec<_> = r
        .profile
        .files
        .iter()
        .filter(|f| f.access.iter().any(|a| *a != FileAccess::Read))
        .collect();
    if written.is_empty() {
        return;
    }
    h.push_str("<h2>Files changed</h2><table id=\"files\"><tr><th>path</th><th>class</th><th>access</th><th>events</th></tr>");
    for f in written {
        let acc: Vec<String> = f
            .access
            .iter()
            .map(|a| format!("{a:?}").to_lowercase())
            .collect();
        let _ = write!(
            h,
            "<tr><td class=\"mono\">{}</td><td>{}</td><td>{}{}</td><td>{}</td></tr>",
            esc(&f.path),
            f.class.as_str(),
            acc.join(", "),
            if f.failed { " (refused)" } else { "" },
            ev_links(&f.evidence)
        );
    }
    h.push_str("</table>");
}

fn timeline(h: &mut String, t: &Trace) {
    h.push_str("<h2>Timeline</h2><table id=\"timeline\"><tr><th>event</th><th>ms</th><th>pid</th><th>step</th><th>what</th><th>detail</th></tr>");
    let mut events: Vec<_> = t.events.iter().collect();
    events.sort_by_key(|e| e.seq);
    let mut rows = 0usize;
    for e in events {
        let (kind, detail) = match &e.kind {
            EventKind::StepStart { label, argv } => {
                ("step_start", format!("{label} {}", argv.join(" ")))
            }
            EventKind::StepEnd {
                exit_code,
                timed_out,
                ..
            } => (
                "step_end",
                format!(
                    "exit {:?}{}",
                    exit_code,
                    if *timed_out { " timed out" } else { "" }
                ),
            ),
            EventKind::Exec {
                path, argv, result, ..
            } => ("exec", format!("{path} {}{}", argv.join(" "), err(result))),
            EventKind::Open {
                path,
                write: true,
                result,
                ..
            } => ("write", format!("{path}{}", err(result))),
            EventKind::FileOp {
                op,
                path,
                path2,
                result,
                ..
            } => (
                "file_op",
                format!(
                    "{op:?} {path} {}{}",
                    path2.as_deref().unwrap_or(""),
                    err(result)
                ),
            ),
            EventKind::Net {
                op,
                addr: Some(a),
                port,
                family,
                result,
                ..
            } if family != "unix" || matches!(op, crate::trace::NetOp::Connect) => (
                "net",
                format!(
                    "{op:?} {a}:{}{}",
                    port.map(|p| p.to_string()).unwrap_or_default(),
                    err(result)
                ),
            ),
            EventKind::DnsQuery { name, qtype, .. } => ("dns_query", format!("{qtype} {name}")),
            EventKind::Connection {
                dst_addr,
                dst_port,
                name,
                ..
            } => (
                "connection",
                format!("{}:{dst_port}", name.clone().unwrap_or(dst_addr.clone())),
            ),
            EventKind::HttpRequest {
                method,
                url,
                body_size,
                ..
            } => (
                "http_request",
                format!("{method} {url} ({body_size} bytes)"),
            ),
            EventKind::TlsHandshake { sni, bytes_out, .. } => (
                "tls_handshake",
                format!("{} ({bytes_out} bytes out)", sni.as_deref().unwrap_or("?")),
            ),
            EventKind::Stream {
                dst_addr,
                dst_port,
                bytes_out,
                ..
            } => (
                "stream",
                format!("{dst_addr}:{dst_port} ({bytes_out} bytes out)"),
            ),
            EventKind::CanaryHit {
                credential,
                chain,
                in_event,
                host,
                ..
            } => (
                "canary_hit",
                format!(
                    "{credential} → {} via {} (in event {in_event})",
                    host.as_deref().unwrap_or("?"),
                    chain.join(" → ")
                ),
            ),
            EventKind::Denied {
                syscall, action, ..
            } => ("denied", format!("{syscall} ({action})")),
            EventKind::Shim { program, argv } => ("shim", format!("{program} {}", argv.join(" "))),
            EventKind::Limit { what, detail } => ("limit", format!("{what}: {detail}")),
            EventKind::TracerNote { note, detail } => ("tracer_note", format!("{note}: {detail}")),
            EventKind::RunEnd {
                complete,
                incomplete_reasons,
                ..
            } => (
                "run_end",
                format!("complete {complete} {}", incomplete_reasons.join("; ")),
            ),
            _ => continue,
        };
        rows += 1;
        if rows > TIMELINE_MAX {
            let _ = write!(h, "<tr><td colspan=\"6\">… later events are in the trace file (timeline capped at {TIMELINE_MAX} rows)</td></tr>");
            break;
        }
        let _ = write!(
            h,
            "<tr id=\"ev-{}\" class=\"k-{kind}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{kind}</td><td class=\"mono\">{}</td></tr>",
            e.seq,
            e.seq,
            e.t_ns / 1_000_000,
            e.pid,
            e.step.map(|s| s.to_string()).unwrap_or_default(),
            esc(&super::summary::one_line(&detail))
        );
    }
    h.push_str("</table>");
}

fn err(r: &crate::trace::SysResult) -> String {
    match (&r.err, r.is_ok() || r.ret.is_none()) {
        (_, true) => String::new(),
        (Some(e), false) => format!(" → {e}"),
        (None, false) => format!(" → {}", r.ret.unwrap_or(0)),
    }
}
