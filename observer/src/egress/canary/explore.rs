//! The recursive decoder: searches a buffer, peels every layer it recognises, searches again.

use super::archive::{self, Codec};
use super::classify;
use super::decode;
use super::runs;
use super::{CanaryIndex, Hit, LimitHit, ScanReport, MIN_NEEDLE_LEN};
use std::collections::BTreeSet;

pub(super) struct Explorer<'a> {
    idx: &'a CanaryIndex,
    budget: usize,
    used: usize,
    exhausted: bool,
    hits: BTreeSet<(usize, Vec<String>)>,
    limits: BTreeSet<LimitHit>,
    chain: Vec<String>,
    archive_depth: usize,
    text_transforms: usize,
    reversed: bool,
}

const MAX_LIMIT_RECORDS: usize = 32;
/// Container layers: a hit inside a member is also a hit in the container's raw bytes (stored
/// entries); only the more specific chain is kept.
const CONTAINERS: &[&str] = &["zip", "tar", "multipart"];

impl<'a> Explorer<'a> {
    pub(super) fn new(idx: &'a CanaryIndex, budget: usize, label: &str) -> Self {
        Explorer {
            idx,
            budget,
            used: 0,
            exhausted: false,
            hits: BTreeSet::new(),
            limits: BTreeSet::new(),
            chain: vec![label.to_string()],
            archive_depth: 0,
            text_transforms: 0,
            reversed: false,
        }
    }

    fn limit(&mut self, what: impl Into<String>) {
        if self.limits.len() < MAX_LIMIT_RECORDS {
            self.limits.insert(LimitHit {
                chain: self.chain.clone(),
                what: what.into(),
            });
        }
    }

    fn charge(&mut self, n: usize) -> bool {
        if self.exhausted {
            return false;
        }
        if self.used.saturating_add(n) > self.budget {
            self.exhausted = true;
            let b = self.budget;
            self.limit(format!(
                "work budget of {b} bytes exhausted; decoding stopped"
            ));
            return false;
        }
        self.used += n;
        true
    }

    /// All matches, overlapping ones included.
    fn search(&mut self, data: &[u8]) {
        let mut found: Vec<usize> = Vec::new();
        self.idx.grams.find_all(data, |p| found.push(p));
        for p in found {
            for &(needle, form) in &self.idx.forms[p] {
                let mut chain = self.chain.clone();
                chain.extend(form.layers().iter().map(|s| s.to_string()));
                self.hits.insert((needle, chain));
            }
        }
    }

    fn with_layer(&mut self, name: &str, f: impl FnOnce(&mut Self)) {
        self.chain.push(name.to_string());
        f(self);
        self.chain.pop();
    }

    pub(super) fn explore(&mut self, data: &[u8], depth: usize, headerless: bool) {
        if !self.charge(data.len()) {
            return;
        }
        self.search(data);
        if data.len() < MIN_NEEDLE_LEN || self.exhausted {
            return;
        }
        if depth >= self.idx.limits.max_depth {
            return;
        }
        let l = self.idx.limits.clone();

        // One pass finds the encoded runs and tells which rare bytes occur at all.
        let survey = runs::survey(data, l.max_runs);
        let (magics, has_zip) = archive::magic_offsets(data, 8, survey.seen);
        for &(codec, off) in &magics {
            self.decompress(codec, &data[off..], depth);
        }
        // Codecs without a magic number, tried on binary that came out of a text decoding.
        if headerless && magics.is_empty() && decode::looks_binary(data) {
            self.decompress(Codec::Deflate, data, depth);
            self.decompress(Codec::Brotli, data, depth);
        }
        if has_zip {
            self.archive("zip", depth, |cap| {
                archive::zip_members(data, cap, l.max_members)
            });
        }
        if archive::is_tar(data) {
            self.archive("tar", depth, |cap| {
                archive::tar_members(data, cap, l.max_members)
            });
        }

        let parts = decode::multipart_parts(data, l.max_members);
        if !parts.is_empty() {
            self.with_layer("multipart", |s| {
                for p in parts {
                    s.explore(p, depth + 1, false);
                }
            });
        }

        let runs::Survey {
            runs,
            dropped,
            seen,
        } = survey;
        if dropped {
            self.limit(format!(
                "more than {} encoded runs; the rest were not decoded",
                l.max_runs
            ));
        }
        for r in &runs.b64 {
            let run = &data[r.clone()];
            if !runs::plausible_b64(run)
                || r.len() == data.len()
                    && depth > 0
                    && self.chain.last().is_some_and(|c| c == "base64")
            {
                continue;
            }
            // The alignment is unknown when letters before the run belong to the alphabet; try
            // all four for runs small enough to afford it.
            let skips = if run.len() <= 4096 { 0..4 } else { 0..1 };
            self.with_layer("base64", |s| {
                for skip in skips {
                    let out = decode::b64_decode(run, skip);
                    s.explore(&out, depth + 1, true);
                }
            });
        }
        for r in &runs.b32 {
            let run = &data[r.clone()];
            if runs::plausible_b32(run) {
                let out = decode::b32_decode(run);
                self.with_layer("base32", |s| s.explore(&out, depth + 1, true));
            }
        }
        for r in &runs.hex {
            let run = &data[r.clone()];
            let skips = if run.len() % 2 == 1 { 0..2 } else { 0..1 };
            self.with_layer("hex", |s| {
                for skip in skips {
                    let out = decode::hex_decode(run, skip);
                    s.explore(&out, depth + 1, true);
                }
            });
        }

        if self.text_transforms < l.max_text_transforms && !decode::looks_binary(data) {
            self.text_transforms += 1;
            let has = |b: u8| seen & classify::flag(b) != 0;
            let (pct, bs, eq) = (has(b'%'), has(b'\\'), has(b'='));
            if let Some(out) = pct.then(|| decode::url_decode(data)).flatten() {
                self.with_layer("url", |s| s.explore(&out, depth + 1, false));
            }
            for out in if bs {
                decode::json_unescape(data)
            } else {
                Vec::new()
            } {
                self.with_layer("json", |s| s.explore(&out, depth + 1, false));
            }
            if let Some(out) = eq.then(|| decode::qp_decode(data)).flatten() {
                self.with_layer("quoted-printable", |s| s.explore(&out, depth + 1, false));
            }
            self.text_transforms -= 1;
        }

        // Reversed data whose reading starts with a magic number or base64 padding.
        if !self.reversed && reversed_looks_encoded(data) {
            let rev: Vec<u8> = data.iter().rev().copied().collect();
            self.reversed = true;
            self.with_layer("reversed", |s| s.explore(&rev, depth + 1, false));
            self.reversed = false;
        }
    }

    /// The output cap for one more archive/compression layer, or `None` (recorded) when the
    /// nesting limit is reached.
    fn layer_cap(&mut self, kind: &str) -> Option<usize> {
        if self.archive_depth >= self.idx.limits.max_archive_depth {
            self.with_layer(kind, |s| s.limit("nested archive depth limit reached"));
            return None;
        }
        Some(
            self.idx
                .limits
                .max_layer_output
                .min(self.budget.saturating_sub(self.used)),
        )
    }

    pub(super) fn decompress(&mut self, codec: Codec, data: &[u8], depth: usize) {
        let Some(cap) = self.layer_cap(codec.name()) else {
            return;
        };
        let Some(out) = guarded(|| codec.decompress(data, cap)) else {
            self.with_layer(codec.name(), |s| s.limit("decoder failed (internal panic)"));
            return;
        };
        if out.data.is_empty() {
            return;
        }
        self.archive_depth += 1;
        if archive::is_tar(&out.data) {
            let layer = format!("tar.{}", codec.tar_suffix());
            let l = self.idx.limits.clone();
            self.chain.push(layer);
            if out.capped {
                self.limit(format!("decompressed output capped at {cap} bytes"));
            }
            let members = archive::tar_members(&out.data, l.max_layer_output, l.max_members);
            self.members(members, depth);
            self.chain.pop();
        } else {
            self.with_layer(codec.name(), |s| {
                if out.capped {
                    s.limit(format!("decompressed output capped at {cap} bytes"));
                }
                s.explore(&out.data, depth + 1, false);
            });
        }
        self.archive_depth -= 1;
    }

    fn archive(
        &mut self,
        kind: &str,
        depth: usize,
        read: impl FnOnce(usize) -> Vec<archive::Member>,
    ) {
        let Some(cap) = self.layer_cap(kind) else {
            return;
        };
        let Some(members) = guarded(|| read(cap)) else {
            self.with_layer(kind, |s| s.limit("archive reader failed (internal panic)"));
            return;
        };
        if members.is_empty() {
            return;
        }
        self.archive_depth += 1;
        self.chain.push(kind.to_string());
        if members.len() >= self.idx.limits.max_members {
            self.limit(format!(
                "more than {} members; the rest were not read",
                self.idx.limits.max_members
            ));
        }
        self.members(members, depth);
        self.chain.pop();
        self.archive_depth -= 1;
    }

    fn members(&mut self, members: Vec<archive::Member>, depth: usize) {
        for m in members {
            if self.exhausted {
                break;
            }
            self.search(&m.name);
            if m.capped {
                self.limit("archive member output capped");
            }
            self.explore(&m.data, depth + 1, false);
        }
    }

    pub(super) fn finish(self) -> ScanReport {
        let all: Vec<(usize, Vec<String>)> = self.hits.into_iter().collect();
        let redundant = |needle: usize, chain: &Vec<String>| {
            all.iter().any(|(n, c)| {
                *n == needle
                    && c.len() > chain.len()
                    && c.starts_with(chain)
                    && c[chain.len()..]
                        .iter()
                        .all(|l| CONTAINERS.contains(&l.as_str()) || l.starts_with("tar."))
            })
        };
        let hits = all
            .iter()
            .filter(|(n, c)| !redundant(*n, c))
            .map(|(n, c)| {
                let needle = &self.idx.needles[*n];
                Hit {
                    needle: *n,
                    canary: needle.canary.clone(),
                    credential: needle.credential.clone(),
                    chain: c.clone(),
                }
            })
            .collect();
        ScanReport {
            hits,
            limits: self.limits.into_iter().collect(),
            work: self.used,
        }
    }
}

/// Runs a decoder on hostile input; a panic inside a third-party decoder becomes `None`.
pub(super) fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

fn reversed_looks_encoded(data: &[u8]) -> bool {
    let n = data.len();
    if n < 16 {
        return false;
    }
    let tail: Vec<u8> = data[n - 6..].iter().rev().copied().collect();
    tail.starts_with(&[0x1f, 0x8b])
        || tail.starts_with(b"PK\x03\x04")
        || tail.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
        || tail.starts_with(b"BZh")
        || tail.starts_with(&[0xfd, b'7', b'z', b'X', b'Z'])
        || (data[0] == b'='
            && data[1..]
                .iter()
                .take(32)
                .all(|c| c.is_ascii_alphanumeric() || b"+/=-_".contains(c)))
}
