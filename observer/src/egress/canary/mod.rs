//! Canary search: find planted credential values in captured bytes, through encodings,
//! compression and archives.
//!
//! Every needle is compiled into one Aho-Corasick automaton together with its precomputed encoded
//! forms (raw, byte-reversed, base64 and base32 at every alignment, hex in both cases), so the
//! common encodings cost one pass and no decoding. Everything else is found by decoding layers
//! recursively (see [`ScanLimits`] for the bounds) and searching each decoded buffer again.
//!
//! A hit's `chain` starts with the buffer label (`body`, `url`, `dns:example.com`, …) and then
//! lists the layers to undo, outermost first: `["body", "base64", "tar.gz"]` means the body was
//! base64 text whose decoding was a gzip-compressed tar holding the value.
//!
//! Needles shorter than [`MIN_NEEDLE_LEN`] bytes are never searched: short values match random
//! data and decoded garbage, and no planted credential is that short.

mod archive;
mod decode;
mod patterns;
pub mod reassemble;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use archive::Codec;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap, HashSet};

pub use archive::Codec as Compression;
pub use patterns::Form;

pub const MIN_NEEDLE_LEN: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum CanaryError {
    #[error("cannot build the canary automaton: {0}")]
    Automaton(String),
}

/// One planted value to look for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Needle {
    pub value: Vec<u8>,
    /// Id of this value (a whole secret or a registered substring of it).
    pub canary: String,
    /// The credential the value belongs to.
    pub credential: String,
    /// Hosts of the service the credential legitimately belongs to.
    #[serde(default)]
    pub service_hosts: Vec<String>,
}

/// Bounds on the work done for one buffer. Defaults keep a hostile buffer to a few hundred MB of
/// decoding at worst, whatever it claims to expand to.
#[derive(Debug, Clone)]
pub struct ScanLimits {
    /// Decoding layers below the buffer itself.
    pub max_depth: usize,
    /// Nested decompressions and archives (zip, tar, gzip, …) in one chain.
    pub max_archive_depth: usize,
    /// Output cap of one decompression or archive member.
    pub max_layer_output: usize,
    /// Total bytes searched and decoded for one buffer: `base + per_input_byte × len`, at most `cap`.
    pub budget_base: usize,
    pub budget_per_input_byte: usize,
    pub budget_cap: usize,
    /// Members read from one archive.
    pub max_members: usize,
    /// Encoded-looking runs decoded per alphabet per buffer.
    pub max_runs: usize,
    /// Whole-buffer text rewrites (URL, JSON, quoted-printable) in one chain.
    pub max_text_transforms: usize,
}

impl Default for ScanLimits {
    fn default() -> Self {
        ScanLimits {
            max_depth: 8,
            max_archive_depth: 5,
            max_layer_output: 64 << 20,
            budget_base: 32 << 20,
            budget_per_input_byte: 8,
            budget_cap: 512 << 20,
            max_members: 1024,
            max_runs: 4096,
            max_text_transforms: 3,
        }
    }
}

/// A needle found in a buffer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Hit {
    /// Index into [`CanaryIndex::needles`].
    pub needle: usize,
    pub canary: String,
    pub credential: String,
    /// Buffer label, then the layers to undo, outermost first.
    pub chain: Vec<String>,
}

/// A bound was reached: decoding stopped there (a bomb, or just a large payload).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct LimitHit {
    pub chain: Vec<String>,
    pub what: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScanReport {
    pub hits: Vec<Hit>,
    pub limits: Vec<LimitHit>,
    /// Bytes searched plus bytes decoded.
    pub work: usize,
}

/// The compiled needles. Cheap to share (`Arc`) across tasks; scanning takes `&self`.
pub struct CanaryIndex {
    needles: Vec<Needle>,
    ac: Option<AhoCorasick>,
    /// Pattern id → the (needle, form) pairs it stands for.
    forms: Vec<Vec<(usize, Form)>>,
    skipped_short: Vec<usize>,
    max_pattern_len: usize,
    prefilter: BlockFilter,
    limits: ScanLimits,
}

/// A prefilter for the automaton. Every pattern is at least [`MIN_NEEDLE_LEN`] (≥ 7) bytes, so
/// any match fully covers a 4-byte block aligned on a multiple of 4, and that block equals the
/// pattern's bytes at offset 0, 1, 2 or 3. Those 4-grams go into a 2^20-bit bitmap; the text is
/// tested one aligned block at a time (one load, one multiply, one bit test per 4 bytes) and the
/// automaton only runs around blocks that pass.
struct BlockFilter {
    bits: Vec<u64>,
}

const FILTER_BITS: u32 = 20;

impl BlockFilter {
    fn slot(x: u32) -> usize {
        (x.wrapping_mul(0x9E37_79B1) >> (32 - FILTER_BITS)) as usize
    }

    fn new(patterns: &[Vec<u8>]) -> Self {
        let mut bits = vec![0u64; (1usize << FILTER_BITS) / 64];
        for p in patterns {
            for off in 0..4.min(p.len().saturating_sub(3)) {
                let x = u32::from_le_bytes([p[off], p[off + 1], p[off + 2], p[off + 3]]);
                let s = Self::slot(x);
                bits[s / 64] |= 1 << (s % 64);
            }
        }
        BlockFilter { bits }
    }

    /// Byte ranges that may hold a match of a pattern no longer than `max_len`, merged.
    fn candidates(&self, data: &[u8], max_len: usize) -> Vec<std::ops::Range<usize>> {
        let mut out: Vec<std::ops::Range<usize>> = Vec::new();
        for (i, c) in data.chunks_exact(4).enumerate() {
            let s = Self::slot(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            if self.bits[s / 64] & (1 << (s % 64)) == 0 {
                continue;
            }
            let a = i * 4;
            let (lo, hi) = (a.saturating_sub(3), (a + max_len).min(data.len()));
            match out.last_mut() {
                Some(r) if lo <= r.end => r.end = r.end.max(hi),
                _ => out.push(lo..hi),
            }
        }
        out
    }
}

impl std::fmt::Debug for CanaryIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CanaryIndex")
            .field("needles", &self.needles.len())
            .field("patterns", &self.forms.len())
            .finish()
    }
}

impl CanaryIndex {
    pub fn new(needles: Vec<Needle>) -> Result<Self, CanaryError> {
        Self::with_limits(needles, ScanLimits::default())
    }

    pub fn with_limits(needles: Vec<Needle>, limits: ScanLimits) -> Result<Self, CanaryError> {
        let mut by_pattern: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut forms: Vec<Vec<(usize, Form)>> = Vec::new();
        let mut skipped_short = Vec::new();
        for (i, n) in needles.iter().enumerate() {
            if n.value.len() < MIN_NEEDLE_LEN {
                skipped_short.push(i);
                continue;
            }
            for (p, form) in patterns::forms(&n.value) {
                let id = *by_pattern.entry(p.clone()).or_insert_with(|| {
                    patterns.push(p);
                    forms.push(Vec::new());
                    forms.len() - 1
                });
                if !forms[id].contains(&(i, form)) {
                    forms[id].push((i, form));
                }
            }
        }
        let ac = if patterns.is_empty() {
            None
        } else {
            Some(
                AhoCorasickBuilder::new()
                    .match_kind(MatchKind::Standard)
                    .kind(Some(AhoCorasickKind::DFA))
                    .build(&patterns)
                    .map_err(|e| CanaryError::Automaton(e.to_string()))?,
            )
        };
        let max_pattern_len = patterns.iter().map(Vec::len).max().unwrap_or(0);
        let prefilter = BlockFilter::new(&patterns);
        Ok(CanaryIndex {
            needles,
            ac,
            forms,
            skipped_short,
            max_pattern_len,
            prefilter,
            limits,
        })
    }

    pub fn needles(&self) -> &[Needle] {
        &self.needles
    }

    /// Needles not searched because they are shorter than [`MIN_NEEDLE_LEN`].
    pub fn skipped_short(&self) -> impl Iterator<Item = &Needle> {
        self.skipped_short.iter().map(|&i| &self.needles[i])
    }

    pub fn limits(&self) -> &ScanLimits {
        &self.limits
    }

    /// Searches `data` (labelled `label` in chains) through every decoding layer.
    pub fn scan(&self, label: &str, data: &[u8]) -> ScanReport {
        self.scan_encoded(label, data, None)
    }

    /// Like [`scan`](Self::scan), with a codec the sender declared (`Content-Encoding`), for
    /// codecs that carry no magic number (brotli, raw deflate).
    pub fn scan_encoded(
        &self,
        label: &str,
        data: &[u8],
        declared: Option<Compression>,
    ) -> ScanReport {
        if self.ac.is_none() {
            return ScanReport::default();
        }
        let l = &self.limits;
        let budget = l
            .budget_base
            .saturating_add(data.len().saturating_mul(l.budget_per_input_byte))
            .min(l.budget_cap)
            .max(data.len());
        let mut ex = Explorer {
            idx: self,
            budget,
            used: 0,
            exhausted: false,
            hits: BTreeSet::new(),
            limits: BTreeSet::new(),
            chain: vec![label.to_string()],
            archive_depth: 0,
            text_transforms: 0,
            reversed: false,
        };
        if let Some(codec) = declared {
            ex.decompress(codec, data, 0);
        }
        ex.explore(data, 0, false);
        ex.finish()
    }
}

struct Explorer<'a> {
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

impl Explorer<'_> {
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

    /// All matches, overlapping ones included, in the ranges the block prefilter lets through.
    fn search(&mut self, data: &[u8]) {
        let Some(ac) = &self.idx.ac else { return };
        let mut found: Vec<usize> = Vec::new();
        for r in self
            .idx
            .prefilter
            .candidates(data, self.idx.max_pattern_len)
        {
            for m in ac.find_overlapping_iter(aho_corasick::Input::new(data).span(r)) {
                found.push(m.pattern().as_usize());
            }
        }
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

    fn explore(&mut self, data: &[u8], depth: usize, headerless: bool) {
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

        let (magics, has_zip) = archive::magic_offsets(data, 8);
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

        let (runs, dropped) = decode::find_runs(data, l.max_runs);
        if dropped {
            self.limit(format!(
                "more than {} encoded runs; the rest were not decoded",
                l.max_runs
            ));
        }
        for r in &runs.b64 {
            let run = &data[r.clone()];
            if !decode::plausible_b64(run)
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
            if decode::plausible_b32(run) {
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
            // One pass tells which escape characters occur at all.
            let (mut pct, mut bs, mut eq) = (false, false, false);
            for i in memchr::memchr3_iter(b'%', b'\\', b'=', data) {
                match data[i] {
                    b'%' => pct = true,
                    b'\\' => bs = true,
                    _ => eq = true,
                }
                if pct && bs && eq {
                    break;
                }
            }
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

    fn decompress(&mut self, codec: Codec, data: &[u8], depth: usize) {
        if self.archive_depth >= self.idx.limits.max_archive_depth {
            self.with_layer(codec.name(), |s| {
                s.limit("nested archive depth limit reached")
            });
            return;
        }
        let cap = self
            .idx
            .limits
            .max_layer_output
            .min(self.budget.saturating_sub(self.used));
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
        if self.archive_depth >= self.idx.limits.max_archive_depth {
            self.with_layer(kind, |s| s.limit("nested archive depth limit reached"));
            return;
        }
        let cap = self
            .idx
            .limits
            .max_layer_output
            .min(self.budget.saturating_sub(self.used));
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

    fn finish(self) -> ScanReport {
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
fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
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

/// Convenience for tests and callers holding raw values.
impl Needle {
    pub fn new(value: impl Into<Vec<u8>>, canary: &str, credential: &str) -> Self {
        Needle {
            value: value.into(),
            canary: canary.into(),
            credential: credential.into(),
            service_hosts: Vec::new(),
        }
    }
}

/// Distinct (canary, chain) keys of a report, for dedup across rescans.
pub fn hit_keys(r: &ScanReport) -> HashSet<(String, Vec<String>)> {
    r.hits
        .iter()
        .map(|h| (h.canary.clone(), h.chain.clone()))
        .collect()
}

#[cfg(test)]
mod tests;
