//! Host names and addresses: normalisation, matching against declared hosts, and the shapes of
//! untrusted sinks and DNS tunnels (pure).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A host as seen in the trace, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Lowercase, no trailing dot, no port; IP literals in canonical form.
    pub name: String,
    pub ip: Option<IpAddr>,
    /// The raw spelling hid an IP (decimal, hex, octal or short form) or used punycode.
    pub obfuscated: bool,
}

/// Normalise a host, a `host:port`, a `[v6]:port` or a URL to its host.
pub fn normalize_host(raw: &str) -> Host {
    let mut s = raw.trim();
    if let Some(i) = s.find("://") {
        s = &s[i + 3..];
    }
    if let Some(i) = s.find(['/', '?', '#']) {
        s = &s[..i];
    }
    if let Some(i) = s.rfind('@') {
        s = &s[i + 1..];
    }
    let host = if let Some(rest) = s.strip_prefix('[') {
        rest.split(']').next().unwrap_or("").to_string()
    } else if s.matches(':').count() == 1 {
        s.split(':').next().unwrap_or("").to_string()
    } else {
        s.to_string()
    };
    let host = percent_decode(&host).to_lowercase();
    let host = host.trim_end_matches('.').to_string();
    if let Ok(v6) = host.parse::<Ipv6Addr>() {
        let ip = match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        };
        return Host {
            name: ip.to_string(),
            ip: Some(ip),
            obfuscated: false,
        };
    }
    if let Some(v4) = parse_inet_aton(&host) {
        let canonical = v4.to_string();
        let obfuscated = canonical != host;
        return Host {
            name: canonical,
            ip: Some(IpAddr::V4(v4)),
            obfuscated,
        };
    }
    let obfuscated = host.split('.').any(|l| l.starts_with("xn--"));
    Host {
        name: host,
        ip: None,
        obfuscated,
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 3 <= b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The forms `inet_aton` accepts: `a.b.c.d`, `a.b.c`, `a.b`, `a`, each part decimal, `0x` hex or
/// leading-zero octal. Clients that use it connect to such spellings, so we must read them too.
fn parse_inet_aton(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut nums = Vec::with_capacity(parts.len());
    for p in &parts {
        let v = if let Some(h) = p.strip_prefix("0x") {
            u64::from_str_radix(h, 16).ok()?
        } else if p.len() > 1 && p.starts_with('0') {
            u64::from_str_radix(&p[1..], 8).ok()?
        } else if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
            p.parse::<u64>().ok()?
        } else {
            return None;
        };
        nums.push(v);
    }
    let (last, init) = nums.split_last()?;
    if init.iter().any(|&v| v > 255) {
        return None;
    }
    let rest_bits = 8 * (4 - init.len()) as u32;
    if *last >= (1u64 << rest_bits) {
        return None;
    }
    let mut v: u64 = 0;
    for (i, b) in init.iter().enumerate() {
        v |= b << (24 - 8 * i as u32);
    }
    v |= last;
    Some(Ipv4Addr::from(v as u32))
}

/// `pattern` is a declared host (`api.github.com`, `*.example.com`, a URL): `host` is it or one of
/// its subdomains. Matching is on label boundaries, so `api.github.com.evil.io` is not a match.
pub fn host_matches(host: &str, pattern: &str) -> bool {
    let p = pattern.trim();
    let p = p.strip_prefix("*.").unwrap_or(p);
    let p = normalize_host(p).name;
    if p.is_empty() {
        return false;
    }
    host == p
        || (host.len() > p.len()
            && host.ends_with(&p)
            && host.as_bytes()[host.len() - p.len() - 1] == b'.')
}

/// A declared host pattern that names a site. A bare suffix (`*.com`, `co.uk`, `*`) would declare
/// half the internet: a skill writing one in its front matter must not launder every host.
pub fn usable_declared(pattern: &str) -> bool {
    let p = pattern.trim();
    let p = p.strip_prefix("*.").unwrap_or(p);
    let h = normalize_host(p);
    if h.ip.is_some() {
        return true;
    }
    let labels: Vec<&str> = h.name.split('.').filter(|l| !l.is_empty()).collect();
    if labels.len() < 2 || labels.iter().any(|l| l.contains('*')) {
        return false;
    }
    // `co.uk`, `com.au`: a public suffix, not a site
    let public_2 = labels.len() == 2
        && labels[1].len() == 2
        && ["co", "com", "net", "org", "gov", "edu", "ac"].contains(&labels[0]);
    !public_2
}

pub fn matches_any<S: AsRef<str>>(host: &str, patterns: &[S]) -> bool {
    patterns.iter().any(|p| host_matches(host, p.as_ref()))
}

/// Loopback or unspecified: traffic that cannot leave the jail.
pub fn is_loopback(h: &Host) -> bool {
    match h.ip {
        Some(ip) => ip.is_loopback() || ip.is_unspecified(),
        None => h.name == "localhost" || h.name.ends_with(".localhost"),
    }
}

pub fn is_private_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v) => {
            v.is_private()
                || v.is_link_local()
                || v.octets()[0] == 100 && (v.octets()[1] & 0xc0) == 64
        }
        IpAddr::V6(v) => {
            (v.segments()[0] & 0xfe00) == 0xfc00 || (v.segments()[0] & 0xffc0) == 0xfe80
        }
    }
}

/// A DNS name that never needs the internet: localhost, single labels, mDNS and reverse lookups
/// of private or loopback addresses.
pub fn is_local_dns_name(name: &str) -> bool {
    let h = normalize_host(name);
    if is_loopback(&h) || h.name.is_empty() || !h.name.contains('.') || h.name.ends_with(".local") {
        return true;
    }
    if let Some(rev) = h.name.strip_suffix(".in-addr.arpa") {
        let mut o: Vec<&str> = rev.split('.').collect();
        o.reverse();
        if let Ok(ip) = o.join(".").parse::<Ipv4Addr>() {
            return ip.is_loopback() || ip.is_private() || ip.is_link_local();
        }
        return false;
    }
    h.name.ends_with(".ip6.arpa")
        && (h
            .name
            .starts_with("1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0"))
}

/// Registrable domain, approximately (last two labels, three under `co.uk`-like suffixes).
pub fn parent_domain(name: &str) -> String {
    let labels: Vec<&str> = name.split('.').collect();
    if labels.len() <= 2 {
        return name.to_string();
    }
    let n = labels.len();
    let sld = labels[n - 2];
    let take = if labels[n - 1].len() == 2
        && ["co", "com", "net", "org", "gov", "edu", "ac"].contains(&sld)
    {
        3
    } else {
        2
    };
    labels[n.saturating_sub(take)..].join(".")
}

const TUNNEL_AND_PASTE: &[&str] = &[
    "ngrok.io",
    "ngrok.app",
    "ngrok-free.app",
    "ngrok.dev",
    "trycloudflare.com",
    "loca.lt",
    "localtunnel.me",
    "serveo.net",
    "localhost.run",
    "lhr.life",
    "pagekite.me",
    "bore.pub",
    "tunnelto.dev",
    "playit.gg",
    "pinggy.io",
    "pinggy.link",
    "zrok.io",
    "devtunnels.ms",
    "pastebin.com",
    "paste.ee",
    "hastebin.com",
    "ghostbin.com",
    "rentry.co",
    "dpaste.org",
    "dpaste.com",
    "termbin.com",
    "ix.io",
    "0x0.st",
    "transfer.sh",
    "file.io",
    "paste.rs",
    "controlc.com",
    "justpaste.it",
    "privatebin.net",
    "temp.sh",
    "bashupload.com",
    "catbox.moe",
    "anonfiles.com",
    "gofile.io",
];
const WEBHOOK_RELAYS: &[&str] = &[
    "webhook.site",
    "requestbin.net",
    "requestbin.com",
    "pipedream.net",
    "hookbin.com",
    "requestcatcher.com",
    "beeceptor.com",
    "requestrepo.com",
    "postb.in",
    "ptsv2.com",
    "ptsv3.com",
    "webhook.cool",
    "typedwebhook.tools",
    "interact.sh",
    "oast.pro",
    "oast.live",
    "oast.site",
    "oast.online",
    "oast.fun",
    "oast.me",
    "oastify.com",
    "burpcollaborator.net",
    "canarytokens.com",
    "dnslog.cn",
    "ceye.io",
    "hooks.slack.com",
    "discord.com",
    "discordapp.com",
    "api.telegram.org",
];
const METADATA: &[&str] = &[
    "169.254.169.254",
    "metadata.google.internal",
    "100.100.100.200",
    "fd00:ec2::254",
    "169.254.170.2",
];
const COLLECTOR_WORDS: &[&str] = &[
    "exfil", "collect", "beacon", "c2", "cnc", "callback", "harvest", "steal", "grab", "loot",
    "implant", "payload", "attacker", "evil", "malware", "keylog", "dropper",
];
/// Services whose names attackers imitate (`github-api.com`, `api.github.com.evil.io`).
const BRANDS: &[(&str, &[&str])] = &[
    (
        "github",
        &[
            "github.com",
            "githubusercontent.com",
            "github.io",
            "githubassets.com",
        ],
    ),
    ("gitlab", &["gitlab.com"]),
    ("amazonaws", &["amazonaws.com", "aws.amazon.com"]),
    ("googleapis", &["googleapis.com"]),
    ("openai", &["openai.com"]),
    ("anthropic", &["anthropic.com"]),
    ("npmjs", &["npmjs.org", "npmjs.com"]),
    ("pypi", &["pypi.org", "pythonhosted.org"]),
    (
        "azure",
        &["azure.com", "windows.net", "microsoft.com", "azure-api.net"],
    ),
];

/// Why a contacted host is an untrusted sink, if it is. `known` are hosts the run legitimately
/// relates to (declared hosts and credential service hosts), used to spot look-alikes.
pub fn sink_reasons(h: &Host, ports: &[u16], known: &[String]) -> Vec<String> {
    let mut why = Vec::new();
    if matches_any(&h.name, METADATA) {
        why.push("cloud metadata service".to_string());
    }
    if matches_any(&h.name, TUNNEL_AND_PASTE) {
        why.push("tunnel or paste service".to_string());
    }
    if matches_any(&h.name, WEBHOOK_RELAYS) {
        why.push("webhook relay or interaction collector".to_string());
    }
    if h.ip.is_some() && !matches_any(&h.name, METADATA) {
        why.push("raw IP address".to_string());
    }
    let unusual: Vec<String> = ports
        .iter()
        .filter(|p| !matches!(p, 80 | 443))
        .map(|p| p.to_string())
        .collect();
    if !unusual.is_empty() {
        why.push(format!("unusual port {}", unusual.join(",")));
    }
    if h.ip.is_none() {
        let labels: Vec<&str> = h.name.split('.').collect();
        let words = labels.iter().take(labels.len().saturating_sub(1));
        let hit = words
            .flat_map(|l| l.split('-'))
            .find(|w| COLLECTOR_WORDS.iter().any(|c| w.starts_with(c)));
        if let Some(w) = hit {
            why.push(format!("collector-like name ({w})"));
        }
    }
    if h.obfuscated {
        why.push("obfuscated host spelling".to_string());
    }
    if let Some(k) = lookalike_of(&h.name, known) {
        why.push(format!("look-alike of {k}"));
    }
    why
}

fn lookalike_of(name: &str, known: &[String]) -> Option<String> {
    for k in known {
        let k = normalize_host(k).name;
        if !k.is_empty() && k.contains('.') && !host_matches(name, &k) && name.contains(&k) {
            return Some(k);
        }
    }
    for (brand, domains) in BRANDS {
        if name.contains(brand) && !domains.iter().any(|d| host_matches(name, d)) {
            return Some(brand.to_string());
        }
    }
    None
}

/// Shannon entropy of a string in bits per character, times 100.
pub fn entropy_x100(s: &str) -> u32 {
    let mut counts = [0usize; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    if n == 0.0 {
        return 0;
    }
    let e: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum();
    (e * 100.0).round() as u32
}

/// Why a DNS name looks like it carries data in its labels, if it does.
pub fn tunnel_label_reason(
    name: &str,
    long: usize,
    ent_x100: u32,
    ent_min_len: usize,
) -> Option<String> {
    let labels: Vec<&str> = name.split('.').collect();
    let parent_labels = parent_domain(name).split('.').count();
    for l in labels
        .iter()
        .take(labels.len().saturating_sub(parent_labels))
    {
        if l.len() >= long {
            return Some(format!("{}-character label", l.len()));
        }
        if l.len() >= 16 && l.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Some("hex-encoded label".into());
        }
        if l.len() >= ent_min_len && entropy_x100(l) >= ent_x100 {
            return Some("high-entropy label".into());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_spellings() {
        assert_eq!(normalize_host("API.GitHub.com.").name, "api.github.com");
        assert_eq!(
            normalize_host("https://user:pw@Evil.io:8443/x?y").name,
            "evil.io"
        );
        assert_eq!(normalize_host("[::1]:80").name, "::1");
        assert_eq!(normalize_host("::ffff:45.61.136.17").name, "45.61.136.17");
        let h = normalize_host("0x2d3d8811");
        assert_eq!(h.name, "45.61.136.17");
        assert!(h.obfuscated);
        assert_eq!(normalize_host("759007249").name, "45.61.136.17");
        assert_eq!(normalize_host("0055.075.0210.021").name, "45.61.136.17");
        assert_eq!(normalize_host("127.1").name, "127.0.0.1");
        assert!(!normalize_host("45.61.136.17").obfuscated);
        assert!(normalize_host("xn--gthub-n4a.com").obfuscated);
        assert_eq!(normalize_host("ev%69l.io").name, "evil.io");
        assert_eq!(normalize_host("1.2.3.4.5").ip, None);
    }

    #[test]
    fn matching_is_on_label_boundaries() {
        assert!(host_matches("api.github.com", "api.github.com"));
        assert!(host_matches("api.github.com", "github.com"));
        assert!(host_matches("x.example.com", "*.example.com"));
        assert!(host_matches("api.github.com", "https://API.github.com./v3"));
        assert!(!host_matches("api.github.com.evil.io", "api.github.com"));
        assert!(!host_matches("evilgithub.com", "github.com"));
        assert!(!host_matches("github.com", "api.github.com"));
        assert!(!host_matches("x", ""));
    }

    #[test]
    fn over_broad_declarations_are_ignored() {
        for bad in ["*", "*.com", "com", "*.co.uk", "co.uk", "*.*", "", "*.io."] {
            assert!(!usable_declared(bad), "{bad}");
        }
        for ok in [
            "api.github.com",
            "*.example.com",
            "example.co.uk",
            "45.61.136.17",
            "https://x.example/a",
        ] {
            assert!(usable_declared(ok), "{ok}");
        }
    }

    #[test]
    fn sinks() {
        let r = |s: &str, ports: &[u16]| {
            sink_reasons(&normalize_host(s), ports, &["api.github.com".into()])
        };
        assert!(r("abc.ngrok-free.app", &[443])
            .iter()
            .any(|w| w.contains("tunnel")));
        assert!(r("webhook.site", &[443])
            .iter()
            .any(|w| w.contains("webhook")));
        assert!(r("45.61.136.17", &[8443])
            .iter()
            .any(|w| w.contains("raw IP")));
        assert!(r("45.61.136.17", &[8443])
            .iter()
            .any(|w| w.contains("8443")));
        assert!(r("data-collector.io", &[443])
            .iter()
            .any(|w| w.contains("collector")));
        assert!(r("api.github.com.evil.io", &[443])
            .iter()
            .any(|w| w.contains("look-alike")));
        assert!(r("github-api.net", &[443])
            .iter()
            .any(|w| w.contains("look-alike")));
        assert!(r("169.254.169.254", &[80])
            .iter()
            .any(|w| w.contains("metadata")));
        assert!(r("api.github.com", &[443]).is_empty());
        assert!(r("pypi.org", &[443]).is_empty());
        assert!(r("files.pythonhosted.org", &[443]).is_empty());
    }

    #[test]
    fn locality_and_tunnels() {
        assert!(is_local_dns_name("localhost."));
        assert!(is_local_dns_name("1.0.0.127.in-addr.arpa"));
        assert!(!is_local_dns_name("8.8.8.8.in-addr.arpa"));
        assert!(is_local_dns_name("wpad"));
        assert!(!is_local_dns_name("evil.io"));
        assert_eq!(parent_domain("a.b.evil.co.uk"), "evil.co.uk");
        assert_eq!(parent_domain("a.b.evil.io"), "evil.io");
        let t = |n: &str| tunnel_label_reason(n, 32, 380, 20);
        assert!(t("6a6f686e2d736563726574.x.evil.io").is_some());
        assert!(t("mzxw6ytboi2dgnbvgy3tqojqgezdgnbv.evil.io").is_some());
        assert!(t("api.github.com").is_none());
        assert!(t("www.example.com").is_none());
    }
}
