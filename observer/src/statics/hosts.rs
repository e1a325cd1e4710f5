//! Hosts a skill declares: normalisation, and extraction from the front matter, the description
//! and an `## Integrations` section.

use crate::bundle::FrontMatter;
use regex::Regex;
use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

/// Normalise a host as written anywhere (`HTTPS://User@API.Example.COM.:443/v1?q` →
/// `api.example.com`): lowercase, no scheme, user, port, path, query or trailing dot; IPv6
/// without brackets. A leading `*.` wildcard is kept. `None` when it is not a host name or an
/// address (names must be ASCII; write IDNs in punycode).
pub fn normalise_host(input: &str) -> Option<String> {
    let mut s = input.trim().to_ascii_lowercase();
    if let Some(i) = s.find("://") {
        let scheme = &s[..i];
        if !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        {
            s = s[i + 3..].to_string();
        }
    } else if let Some(rest) = s.strip_prefix("//") {
        s = rest.to_string();
    }
    let end = s.find(['/', '?', '#']).unwrap_or(s.len());
    s.truncate(end);
    if let Some(at) = s.rfind('@') {
        s = s[at + 1..].to_string();
    }
    // [v6]:port, bare v6, or name:port.
    if let Some(rest) = s.strip_prefix('[') {
        let close = rest.find(']')?;
        let v6: Ipv6Addr = rest[..close].parse().ok()?;
        let tail = &rest[close + 1..];
        if !(tail.is_empty() || is_port(tail.strip_prefix(':')?)) {
            return None;
        }
        return Some(v6.to_string());
    }
    if s.matches(':').count() > 1 {
        return s.parse::<Ipv6Addr>().ok().map(|a| a.to_string());
    }
    if let Some((host, port)) = s.split_once(':') {
        if !is_port(port) {
            return None;
        }
        s = host.to_string();
    }
    let s = s.trim_end_matches('.');
    if s.is_empty() || s.len() > 253 {
        return None;
    }
    if s.parse::<Ipv4Addr>().is_ok() {
        return Some(s.to_string());
    }
    let name = s.strip_prefix("*.").unwrap_or(s);
    // A wildcard must leave a registrable-looking name: `*.com` would declare half the web.
    if name.len() != s.len() && name.split('.').count() < 2 {
        return None;
    }
    let labels_ok = name.split('.').all(|l| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !l.starts_with('-')
            && !l.ends_with('-')
    });
    // All-numeric dotted strings that are not addresses ("1.2.3") are versions, not hosts.
    let numeric = name.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    (labels_ok && !numeric).then(|| s.to_string())
}

fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

/// Top-level domains accepted for bare names in prose (`api.github.com`). Real TLDs that are
/// also common file extensions (`.md`, `.py`, `.sh`, `.rs`, `.pl`, `.zip`, `.mov`) are left out:
/// `install.sh` in a description is a file, not a host. URLs are accepted with any TLD.
const PROSE_TLDS: &[&str] = &[
    "com", "net", "org", "io", "dev", "ai", "app", "co", "cloud", "gov", "edu", "mil", "int",
    "info", "biz", "me", "us", "uk", "de", "fr", "jp", "cn", "ru", "in", "br", "au", "ca", "eu",
    "nl", "ch", "se", "no", "es", "it", "pl", "kr", "tv", "fm", "ly", "gg", "so", "xyz", "tech",
    "site", "online", "store", "page", "run", "workers", "link", "network", "systems", "services",
    "top", "cc", "to", "su", "ws", "host", "website", "space", "live", "pro",
];

static URL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&crate::util::ascii_classes(
        r#"(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>()\[\]{}`,;]+"#,
    ))
    .expect("static regex")
});
static DOMAIN_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&crate::util::ascii_classes(
        r"(?i)(^|[^\w@.-])((?:\*\.)?(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+([a-z]{2,24}))(:\d{1,5})?\b",
    ))
    .expect("static regex")
});

/// Hosts named in free text: every URL's host, and bare domain names with a known TLD (not
/// e-mail domains, not `name.method(` calls).
pub fn hosts_in_text(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for m in URL_RE.find_iter(text) {
        let u = m.as_str();
        // Only network schemes name a host.
        let scheme = u.split("://").next().unwrap_or("").to_ascii_lowercase();
        if matches!(scheme.as_str(), "file" | "data" | "mailto" | "javascript") {
            continue;
        }
        if let Some(h) = normalise_host(u) {
            out.insert(h);
        }
    }
    let stripped = URL_RE.replace_all(text, " ");
    for c in DOMAIN_RE.captures_iter(&stripped) {
        let (Some(m), Some(tld)) = (c.get(2), c.get(3)) else {
            continue;
        };
        let after = stripped[m.end()..].chars().next();
        if after == Some('(') {
            continue;
        }
        if !PROSE_TLDS.contains(&tld.as_str().to_ascii_lowercase().as_str()) {
            continue;
        }
        if let Some(h) = normalise_host(m.as_str()) {
            out.insert(h);
        }
    }
    out
}

/// Keys that declare hosts: `hosts`, `domains`, `host`, `domain`, `endpoints`, and any key
/// ending in one of them (`allowed-hosts`, `network_domains`).
fn is_host_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace('-', "_");
    [
        "hosts",
        "domains",
        "host",
        "domain",
        "endpoints",
        "endpoint",
    ]
    .iter()
    .any(|s| k == *s || k.ends_with(&format!("_{s}")))
}

/// Metadata keys whose URLs point at documentation or provenance, not at traffic.
fn is_provenance_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "homepage",
        "repository",
        "repo",
        "source",
        "docs",
        "documentation",
        "license",
        "author",
        "bugs",
        "issues",
        "changelog",
        "funding",
        "website",
    ]
    .iter()
    .any(|p| k == *p || k.starts_with(&format!("{p}_")) || k.ends_with(&format!("_{p}")))
}

/// Hosts declared in the front matter: values under host/domain keys anywhere, and URLs inside
/// `metadata` except provenance links (`homepage`, `repository`, …).
pub fn hosts_in_front_matter(fm: &FrontMatter) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (k, v) in &fm.raw {
        walk(k, v, false, &mut out);
    }
    out
}

fn walk(key: &str, v: &Json, in_metadata: bool, out: &mut BTreeSet<String>) {
    let in_metadata = in_metadata || key == "metadata";
    if is_host_key(key) {
        collect_host_values(v, out);
        return;
    }
    match v {
        Json::Object(map) => {
            for (k, v) in map {
                walk(k, v, in_metadata, out);
            }
        }
        Json::Array(items) => {
            for item in items {
                walk(key, item, in_metadata, out);
            }
        }
        Json::String(s) if in_metadata && !is_provenance_key(key) => {
            for m in URL_RE.find_iter(s) {
                if let Some(h) = normalise_host(m.as_str()) {
                    out.insert(h);
                }
            }
        }
        _ => {}
    }
}

fn collect_host_values(v: &Json, out: &mut BTreeSet<String>) {
    match v {
        Json::String(s) => {
            for part in s.split([',', ' ', '\t', '\n']).filter(|p| !p.is_empty()) {
                if let Some(h) = normalise_host(part) {
                    out.insert(h);
                }
            }
        }
        Json::Array(items) => items.iter().for_each(|i| collect_host_values(i, out)),
        Json::Object(map) => map.values().for_each(|i| collect_host_values(i, out)),
        _ => {}
    }
}

/// The text of every `Integrations` section (any heading level; up to the next heading of the
/// same or a higher level). Headings inside fenced code do not count.
pub fn integrations_sections(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    let mut fence: Option<String> = None;
    for line in markdown.lines() {
        let t = line.trim_start();
        if let Some(f) = &fence {
            if t.starts_with(f.as_str()) {
                fence = None;
            }
        } else if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(t[..3].to_string());
        } else if let Some(level) = heading_level(t) {
            let title = t[level..]
                .trim()
                .trim_end_matches('#')
                .trim()
                .to_ascii_lowercase();
            if let Some((l, _)) = &current {
                if level <= *l {
                    out.push(current.take().map(|c| c.1).unwrap_or_default());
                }
            }
            if current.is_none() && (title == "integrations" || title == "integration") {
                current = Some((level, String::new()));
                continue;
            }
        }
        if let Some((_, text)) = &mut current {
            text.push_str(line);
            text.push('\n');
        }
    }
    if let Some((_, text)) = current {
        out.push(text);
    }
    out
}

fn heading_level(line: &str) -> Option<usize> {
    let n = line.bytes().take_while(|&b| b == b'#').count();
    ((1..=6).contains(&n) && line[n..].starts_with([' ', '\t'])).then_some(n)
}

static HTML_COMMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)<!--.*?(?:-->|$)").expect("static regex"));

/// Every host the skill declares, normalised, sorted, deduplicated. Text inside HTML comments
/// is not a declaration: a reader of the rendered page never sees it.
pub fn declared_hosts(fm: &FrontMatter, instructions: &str) -> Vec<String> {
    let mut all = hosts_in_front_matter(fm);
    if let Some(d) = &fm.description {
        all.extend(hosts_in_text(&HTML_COMMENT.replace_all(d, " ")));
    }
    let visible = HTML_COMMENT.replace_all(instructions, " ");
    for section in integrations_sections(&visible) {
        all.extend(hosts_in_text(&section));
    }
    all.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::parse_skill_md;

    #[test]
    fn normalisation() {
        for (i, want) in [
            ("api.github.com", Some("api.github.com")),
            ("API.GitHub.COM.", Some("api.github.com")),
            (
                "https://api.github.com/v3/repos?x=1#f",
                Some("api.github.com"),
            ),
            (
                "HTTPS://user:pw@Hooks.Slack.com:443/services",
                Some("hooks.slack.com"),
            ),
            ("wss://stream.example.io:8443", Some("stream.example.io")),
            ("//cdn.example.net/x.js", Some("cdn.example.net")),
            ("203.0.113.7:4444", Some("203.0.113.7")),
            ("[2001:DB8::1]:443", Some("2001:db8::1")),
            ("2001:db8::1", Some("2001:db8::1")),
            ("*.s3.amazonaws.com", Some("*.s3.amazonaws.com")),
            ("*.com", None),
            ("*", None),
            ("evil\u{200b}.io", None),
            ("evil\u{3002}io", None),
            ("localhost", Some("localhost")),
            ("", None),
            ("bad host", None),
            ("-x.com", None),
            ("a..b", None),
            ("x.com:http", None),
            ("1.2.3", None),
            ("bücher.de", None),
            ("[::1", None),
        ] {
            assert_eq!(normalise_host(i).as_deref(), want, "{i:?}");
        }
    }

    #[test]
    fn hosts_in_prose() {
        let h = hosts_in_text(
            "Calls https://API.Stripe.com/v1 and api.github.com:443, mail admin@corp.com, \
             run install.sh, read SKILL.md, call requests.get(url), version 1.2.3.4-beta? \
             also ftp://files.example.org/x and file:///etc/passwd",
        );
        let got: Vec<&str> = h.iter().map(|s| s.as_str()).collect();
        assert!(got.contains(&"api.stripe.com"));
        assert!(got.contains(&"api.github.com"));
        assert!(got.contains(&"files.example.org"));
        assert!(
            !got.contains(&"corp.com"),
            "e-mail domains are not declarations"
        );
        assert!(!got
            .iter()
            .any(|h| h.contains("install") || h.contains("skill")));
        assert!(!got.iter().any(|h| h.contains("requests")));
        assert!(!got.iter().any(|h| h.contains("etc")));
    }

    #[test]
    fn hosts_from_each_source() {
        let md = parse_skill_md(
            b"---\nname: x\ndescription: Posts to hooks.slack.com for alerts\nallowed-hosts: [api.linear.app]\nmetadata:\n  homepage: https://github.com/acme/skill\n  api_base: https://api.acme.dev/v2\n  network:\n    domains: 'a.example.com, B.Example.com:8080'\n---\n# Use\nSee https://docs.ignored.com in prose.\n\n## Integrations\n\n- Notion (`api.notion.com`)\n- https://upload.acme.io/v1\n<!-- hidden.evil.io -->\n\n```\n# not a heading\n```\n\n## Other\nhttps://not-declared.com\n",
        )
        .expect("parses");
        let got = declared_hosts(&md.front_matter, &md.body);
        assert_eq!(
            got,
            [
                "a.example.com",
                "api.acme.dev",
                "api.linear.app",
                "api.notion.com",
                "b.example.com",
                "hooks.slack.com",
                "upload.acme.io"
            ]
        );
    }

    #[test]
    fn integrations_section_bounds() {
        let s = integrations_sections(
            "# A\n### Integrations\nx.com\n#### sub\ny.com\n## Next\nz.com\n",
        );
        assert_eq!(s, vec!["x.com\n#### sub\ny.com\n".to_string()]);
        assert!(integrations_sections("no sections").is_empty());
        let s = integrations_sections("## INTEGRATIONS ##\nq.io\n");
        assert_eq!(s, vec!["q.io\n".to_string()]);
    }
}
