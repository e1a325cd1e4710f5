//! The block prefilter in front of the Aho-Corasick automaton.

/// A prefilter for the automaton. Every pattern is at least `MIN_NEEDLE_LEN` (≥ 7) bytes, so
/// any match fully covers a 4-byte block aligned on a multiple of 4, and that block equals the
/// pattern's bytes at offset 0, 1, 2 or 3. Those 4-grams go into a 2^20-bit bitmap; the text is
/// tested one aligned block at a time (one load, one multiply, one bit test per 4 bytes) and the
/// automaton only runs around blocks that pass.
pub(super) struct BlockFilter {
    bits: Vec<u64>,
}

const FILTER_BITS: u32 = 20;

impl BlockFilter {
    fn slot(x: u32) -> usize {
        (x.wrapping_mul(0x9E37_79B1) >> (32 - FILTER_BITS)) as usize
    }

    pub(super) fn new(patterns: &[Vec<u8>]) -> Self {
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
    pub(super) fn candidates(&self, data: &[u8], max_len: usize) -> Vec<std::ops::Range<usize>> {
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
