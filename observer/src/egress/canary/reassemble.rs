//! Reassembly of values split across several DNS queries or HTTP requests.
//!
//! Exfiltration tools chunk a secret over many queries (`<chunk>.<n>.x.evil.com`) or requests
//! (`?d=<chunk>`). Per parent domain (or per host) we keep the pieces in arrival order and build a
//! few candidate concatenations that the canary search then scans like any buffer:
//!
//! * `first` — the leftmost label of each distinct name, in order (the usual tool layout);
//! * `varying` — the labels that differ between names, with purely numeric labels taken as a
//!   sequence number (sorted by it when every name has one) and dropped from the data;
//! * `all` — every label under the parent, in order.
//!
//! For HTTP: the bodies in order, the query-parameter values in order, and the last path segments.

use std::collections::{HashMap, HashSet};

/// Distinct query-parameter names tracked per host.
const MAX_PARAMS: usize = 32;

/// Second-level labels under which registrations happen one level deeper (`x.co.uk`).
const SECOND_LEVEL: &[&str] = &[
    "co", "com", "net", "org", "gov", "edu", "ac", "or", "ne", "go",
];

/// The registrable parent (eTLD+1, heuristically) of a DNS name and the labels below it.
pub fn split_parent(name: &str) -> Option<(String, Vec<String>)> {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let labels: Vec<&str> = name.split('.').filter(|l| !l.is_empty()).collect();
    if labels.len() < 2 {
        return None;
    }
    let n = labels.len();
    let keep = if n >= 3 && labels[n - 1].len() == 2 && SECOND_LEVEL.contains(&labels[n - 2]) {
        3
    } else {
        2
    };
    if n < keep {
        return None;
    }
    let parent = labels[n - keep..].join(".");
    let subs = labels[..n - keep].iter().map(|s| s.to_string()).collect();
    Some((parent, subs))
}

/// Candidate reassemblies of the sub-labels of several names under one parent.
pub fn dns_candidates(names: &[Vec<String>], max_bytes: usize) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    let push = |out: &mut Vec<(&'static str, Vec<u8>)>, label, v: Vec<u8>| {
        if !v.is_empty() && !out.iter().any(|(_, o)| *o == v) {
            out.push((label, v));
        }
    };
    let cat = |it: &mut dyn Iterator<Item = &str>| -> Vec<u8> {
        let mut v = Vec::new();
        for s in it {
            if v.len() + s.len() > max_bytes {
                break;
            }
            v.extend_from_slice(s.as_bytes());
        }
        v
    };
    let first = cat(&mut names.iter().filter_map(|l| l.first().map(String::as_str)));
    push(&mut out, "first", first);

    // Labels equal across all names at the same distance from the parent are framing, not data.
    let constant = |depth_from_right: usize| -> bool {
        let mut vals = names
            .iter()
            .map(|l| l.len().checked_sub(depth_from_right + 1).map(|i| &l[i]));
        match vals.next() {
            Some(Some(v0)) => names.len() > 1 && vals.all(|v| v == Some(v0)),
            _ => false,
        }
    };
    let max_len = names.iter().map(Vec::len).max().unwrap_or(0);
    let framing: HashSet<usize> = (0..max_len).filter(|&d| constant(d)).collect();
    let is_index = |s: &str| !s.is_empty() && s.len() <= 6 && s.bytes().all(|c| c.is_ascii_digit());
    let mut rows: Vec<(Option<u64>, usize, Vec<&str>)> = names
        .iter()
        .enumerate()
        .map(|(i, labels)| {
            let n = labels.len();
            let mut idx = None;
            let mut data = Vec::new();
            for (j, l) in labels.iter().enumerate() {
                if framing.contains(&(n - 1 - j)) {
                    continue;
                }
                if is_index(l) && idx.is_none() {
                    idx = l.parse().ok();
                    continue;
                }
                data.push(l.as_str());
            }
            (idx, i, data)
        })
        .collect();
    if rows.iter().all(|r| r.0.is_some()) {
        rows.sort_by_key(|r| (r.0, r.1));
    }
    let varying = cat(&mut rows.iter().flat_map(|r| r.2.iter().copied()));
    push(&mut out, "varying", varying);
    let all = cat(&mut names.iter().flat_map(|l| l.iter().map(String::as_str)));
    push(&mut out, "all", all);
    out
}

/// Distinct names under one parent, in first-seen order, with the seq of the latest query.
#[derive(Debug, Default)]
struct DnsGroup {
    names: Vec<Vec<String>>,
    seen: HashSet<String>,
    last_seq: u64,
    bytes: usize,
}

#[derive(Debug, Default)]
struct HttpGroup {
    bodies: Vec<u8>,
    /// Values of each query parameter, concatenated per parameter name.
    params: Vec<(String, Vec<u8>)>,
    segments: Vec<u8>,
    requests: usize,
    last_seq: u64,
}

/// A reassembled buffer ready for scanning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assembled {
    /// `dns:<parent>:<method>` or `http:<host>:<method>`.
    pub label: String,
    pub data: Vec<u8>,
    /// The last event that contributed.
    pub last_seq: u64,
    /// The group (parent domain or host) for attributing the destination.
    pub group: String,
}

/// Per-run reassembly state (bounded per group and in number of groups).
#[derive(Debug)]
pub struct Reassembler {
    dns: HashMap<String, DnsGroup>,
    http: HashMap<String, HttpGroup>,
    max_group_bytes: usize,
    max_groups: usize,
}

impl Default for Reassembler {
    fn default() -> Self {
        Reassembler {
            dns: HashMap::new(),
            http: HashMap::new(),
            max_group_bytes: 1 << 20,
            max_groups: 4096,
        }
    }
}

impl Reassembler {
    /// Records a queried name; returns the parent when the group changed (a new distinct name).
    pub fn add_dns(&mut self, name: &str, seq: u64) -> Option<String> {
        let (parent, subs) = split_parent(name)?;
        if subs.is_empty() {
            return None;
        }
        if !self.dns.contains_key(&parent) && self.dns.len() >= self.max_groups {
            return None;
        }
        let g = self.dns.entry(parent.clone()).or_default();
        let full = subs.join(".");
        if g.bytes + full.len() > self.max_group_bytes || !g.seen.insert(full.clone()) {
            return None;
        }
        g.bytes += full.len();
        g.names.push(subs);
        g.last_seq = seq;
        Some(parent)
    }

    pub fn dns_group(&self, parent: &str) -> Vec<Assembled> {
        let Some(g) = self.dns.get(parent) else {
            return Vec::new();
        };
        dns_candidates(&g.names, self.max_group_bytes)
            .into_iter()
            .map(|(m, data)| Assembled {
                label: format!("dns:{parent}:{m}"),
                data,
                last_seq: g.last_seq,
                group: parent.to_string(),
            })
            .collect()
    }

    /// Records one HTTP request's payload pieces. `path_and_query` is the raw request target.
    pub fn add_http(&mut self, host: &str, path_and_query: &str, body: &[u8], seq: u64) {
        let host = host.to_ascii_lowercase();
        if !self.http.contains_key(&host) && self.http.len() >= self.max_groups {
            return;
        }
        let cap = self.max_group_bytes;
        let g = self.http.entry(host).or_default();
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let room = |v: &Vec<u8>, n: usize| v.len() + n <= cap;
        if room(&g.bodies, body.len()) {
            g.bodies.extend_from_slice(body);
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or(("", pair));
            let slot = match g.params.iter().position(|(n, _)| n == k) {
                Some(i) => i,
                None if g.params.len() < MAX_PARAMS => {
                    g.params.push((k.to_string(), Vec::new()));
                    g.params.len() - 1
                }
                None => continue,
            };
            if room(&g.params[slot].1, v.len()) {
                g.params[slot].1.extend_from_slice(v.as_bytes());
            }
        }
        let seg = path.rsplit('/').next().unwrap_or("");
        if room(&g.segments, seg.len()) {
            g.segments.extend_from_slice(seg.as_bytes());
        }
        g.requests += 1;
        g.last_seq = seq;
    }

    /// The host's reassembled buffers, once it has seen at least two requests.
    pub fn http_group(&self, host: &str) -> Vec<Assembled> {
        let host = host.to_ascii_lowercase();
        let Some(g) = self.http.get(&host) else {
            return Vec::new();
        };
        if g.requests < 2 {
            return Vec::new();
        }
        let mut parts: Vec<(String, &Vec<u8>)> = vec![
            ("bodies".into(), &g.bodies),
            ("segments".into(), &g.segments),
        ];
        parts.extend(g.params.iter().map(|(k, v)| (format!("param:{k}"), v)));
        parts
            .into_iter()
            .filter(|(_, d)| !d.is_empty())
            .map(|(m, d)| Assembled {
                label: format!("http:{host}:{m}"),
                data: d.clone(),
                last_seq: g.last_seq,
                group: host.clone(),
            })
            .collect()
    }

    /// The size of a group's data, to decide whether a live rescan is cheap.
    pub fn dns_group_bytes(&self, parent: &str) -> usize {
        self.dns.get(parent).map_or(0, |g| g.bytes)
    }

    pub fn http_group_bytes(&self, host: &str) -> usize {
        self.http.get(&host.to_ascii_lowercase()).map_or(0, |g| {
            g.bodies.len() + g.params.iter().map(|p| p.1.len()).sum::<usize>() + g.segments.len()
        })
    }

    pub fn dns_parents(&self) -> Vec<String> {
        self.dns.keys().cloned().collect()
    }

    pub fn http_hosts(&self) -> Vec<String> {
        self.http.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents() {
        assert_eq!(
            split_parent("a.b.evil.com").unwrap(),
            ("evil.com".into(), vec!["a".into(), "b".into()])
        );
        assert_eq!(split_parent("x.evil.co.uk.").unwrap().0, "evil.co.uk");
        assert!(split_parent("localhost").is_none());
    }

    #[test]
    fn indexed_chunks_out_of_order() {
        let names: Vec<Vec<String>> = [("cd", "1"), ("ab", "0"), ("ef", "2")]
            .iter()
            .map(|(d, i)| vec![d.to_string(), i.to_string(), "x".into()])
            .collect();
        let c = dns_candidates(&names, 1000);
        assert!(
            c.iter().any(|(m, v)| *m == "varying" && v == b"abcdef"),
            "{c:?}"
        );
    }
}
