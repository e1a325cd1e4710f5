//! Canary search: find planted credential values in captured bytes, through encodings,
//! compression and archives.
//!
//! Every needle is indexed together with its precomputed encoded
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
mod classify;
mod decode;
mod explore;
mod patterns;
mod prefilter;
pub mod reassemble;
mod runs;

use explore::Explorer;
use prefilter::GramIndex;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

pub use archive::Codec as Compression;
pub use patterns::Form;

pub const MIN_NEEDLE_LEN: usize = 8;

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
    /// Every pattern (needle × form), searched in one pass.
    grams: GramIndex,
    /// Pattern id → the (needle, form) pairs it stands for.
    forms: Vec<Vec<(usize, Form)>>,
    skipped_short: Vec<usize>,
    limits: ScanLimits,
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
    pub fn new(needles: Vec<Needle>) -> Self {
        Self::with_limits(needles, ScanLimits::default())
    }

    pub fn with_limits(needles: Vec<Needle>, limits: ScanLimits) -> Self {
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
        let grams = GramIndex::new(patterns);
        CanaryIndex {
            needles,
            grams,
            forms,
            skipped_short,
            limits,
        }
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
        if self.grams.is_empty() {
            return ScanReport::default();
        }
        let l = &self.limits;
        let budget = l
            .budget_base
            .saturating_add(data.len().saturating_mul(l.budget_per_input_byte))
            .min(l.budget_cap)
            .max(data.len());
        let mut ex = Explorer::new(self, budget, label);
        if let Some(codec) = declared {
            ex.decompress(codec, data, 0);
        }
        ex.explore(data, 0, false);
        ex.finish()
    }
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
