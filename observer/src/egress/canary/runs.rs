//! Finding base64 / base32 / hex runs worth decoding, in one pass that also notes which rare
//! bytes occur (so the magic-number and escape passes can be skipped on text).
//!
//! Every run worth decoding is at least 16 bytes long, so it fully covers some 8-byte block
//! aligned on a multiple of 8 from the buffer's start. The buffer is classified 64 bytes at a time
//! into one membership bit mask per alphabet (`classify.rs`); a run is expanded only from a block
//! whose 8 bits are all set, with bit operations on the masks, and windows without such a block
//! cost nothing more.

use super::classify::{classify_table, member, Masks, ALL_FLAGS, ALPHABETS, CLASS, C_B64, C_WS};
use std::ops::Range;

/// Shortest base64 run worth decoding. Needles are ≥ 8 bytes; a base64 needle on its own is
/// matched by the precomputed forms, so decoding only matters for nested encodings, which are longer.
pub const MIN_B64_RUN: usize = 20;
pub const MIN_B32_RUN: usize = 16;
pub const MIN_HEX_RUN: usize = 16;

/// Shortest run per alphabet, in `Masks` order.
const MIN_RUN: [usize; 3] = [MIN_B64_RUN, MIN_B32_RUN, MIN_HEX_RUN];

/// Runs of encoded-looking text in one pass.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Runs {
    pub b64: Vec<Range<usize>>,
    pub b32: Vec<Range<usize>>,
    pub hex: Vec<Range<usize>>,
}

/// What one pass over a buffer found.
#[derive(Debug, PartialEq, Eq)]
pub struct Survey {
    pub runs: Runs,
    /// Runs were dropped at the cap.
    pub dropped: bool,
    /// Bit `i` set when `FLAG_BYTES[i]` occurs in the buffer.
    pub seen: u8,
}

/// The masks of the 64 bytes at `w`, zero past the end (0 is in no alphabet).
#[inline(always)]
fn window<C: Fn(&[u8; 64], bool) -> (Masks, u8)>(
    classify: &C,
    data: &[u8],
    w: usize,
    flags: bool,
) -> (Masks, u8) {
    let rest = data.get(w..).unwrap_or_default();
    match rest.first_chunk::<64>() {
        Some(c) => classify(c, flags),
        None => {
            let mut c = [0u8; 64];
            c[..rest.len()].copy_from_slice(rest);
            classify(&c, flags)
        }
    }
}

/// Lanes (bit 8j for byte j) of `m` whose 8 bits are all set: the fully-member aligned blocks.
fn full_bytes(m: u64) -> u64 {
    let t = m & (m >> 1);
    let t = t & (t >> 2);
    t & (t >> 4) & 0x0101_0101_0101_0101
}

/// A base64 run `s..e` without its leading line breaks and with its padding (up to two `=`).
fn trim_b64(data: &[u8], mut s: usize, e: usize) -> (usize, usize) {
    while s < e && CLASS[data[s] as usize] & C_WS != 0 {
        s += 1;
    }
    let pad = data[e..].iter().take(2).take_while(|&&c| c == b'=').count();
    (s, e + pad)
}

struct Finder<'a, C> {
    data: &'a [u8],
    classify: C,
    max_runs: usize,
    runs: Runs,
    dropped: bool,
    /// Per alphabet, where the last expanded run ended: blocks before it are inside it.
    covered: [usize; 3],
}

impl<C: Fn(&[u8; 64], bool) -> (Masks, u8)> Finder<'_, C> {
    /// The run of alphabet `k` through the full block at offset `off` of the window at `w`
    /// (membership mask `m`).
    fn run(&mut self, k: usize, w: usize, m: u64, off: usize) {
        let (bit, min) = (ALPHABETS[k], MIN_RUN[k]);
        let data = self.data;
        let n = data.len();
        let block = w + off;
        // Blocks are visited in order and `covered` skips the rest of a run, so this is the first
        // full block of its run: the run starts at most 7 bytes before it.
        let mut s = block;
        if off >= 8 {
            s -= (m << (64 - off)).leading_ones() as usize;
        } else {
            while s > 0 && member(data[s - 1]) & bit != 0 {
                s -= 1;
            }
        }
        let mut e = block + 8;
        if off + 8 < 64 {
            e += (m >> (off + 8)).trailing_ones() as usize;
        }
        if e == w + 64 {
            while e < n {
                let m = window(&self.classify, data, e, false).0[k];
                e += m.trailing_ones() as usize;
                if m != u64::MAX {
                    break;
                }
            }
        }
        let mut e = e.min(n);
        self.covered[k] = e;
        if bit == C_B64 {
            (s, e) = trim_b64(data, s, e);
        }
        if e - s >= min {
            let v = match k {
                0 => &mut self.runs.b64,
                1 => &mut self.runs.b32,
                _ => &mut self.runs.hex,
            };
            if v.len() < self.max_runs {
                v.push(s..e);
            } else {
                self.dropped = true;
            }
        }
    }
}

/// Finds the maximal runs of each alphabet that fully cover an aligned 8-byte block, capped at
/// `max_runs` per alphabet (the rest are dropped and `dropped` is set so the caller can report
/// it), and which `FLAG_BYTES` occur. Base64 runs drop leading line breaks and take up to two `=`
/// of padding.
pub fn survey(data: &[u8], max_runs: usize) -> Survey {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { survey_avx2(data, max_runs) };
    }
    survey_with(data, max_runs, classify_table)
}

/// The whole loop compiled for AVX2, so the classifier inlines and its tables stay in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn survey_avx2(data: &[u8], max_runs: usize) -> Survey {
    use super::classify::classify_avx2;
    survey_with(data, max_runs, |c: &[u8; 64], f: bool| classify_avx2(c, f))
}

#[inline(always)]
fn survey_with(
    data: &[u8],
    max_runs: usize,
    classify: impl Fn(&[u8; 64], bool) -> (Masks, u8),
) -> Survey {
    let mut f = Finder {
        data,
        classify,
        max_runs,
        runs: Runs::default(),
        dropped: false,
        covered: [0; 3],
    };
    let mut seen = 0;
    for w in (0..data.len()).step_by(64) {
        let (masks, flags) = window(&f.classify, data, w, seen != ALL_FLAGS);
        seen |= flags;
        // Hex and base32 are subsets of base64: no full base64 block, nothing to expand.
        if full_bytes(masks[0]) == 0 {
            continue;
        }
        for (k, &m) in masks.iter().enumerate() {
            let mut full = full_bytes(m);
            while full != 0 {
                let off = full.trailing_zeros() as usize;
                full &= full - 1;
                if w + off >= f.covered[k] {
                    f.run(k, w, m, off);
                }
            }
        }
    }
    Survey {
        runs: f.runs,
        dropped: f.dropped,
        seen,
    }
}

/// Base64-looking: mixed case (random data encodes to both with near certainty, words rarely do).
pub fn plausible_b64(run: &[u8]) -> bool {
    run.iter().any(u8::is_ascii_uppercase) && run.iter().any(u8::is_ascii_lowercase)
}

/// Base32-looking: one case only and at least one digit 2-7.
pub fn plausible_b32(run: &[u8]) -> bool {
    let upper = run.iter().any(u8::is_ascii_uppercase);
    let lower = run.iter().any(u8::is_ascii_lowercase);
    upper != lower && run.iter().any(|c| (b'2'..=b'7').contains(c))
}

#[cfg(test)]
mod tests {
    use super::super::classify::FLAG_BYTES;
    use super::super::decode::{b64_decode, hex_decode};
    use super::*;

    fn find_runs(data: &[u8], max_runs: usize) -> (Runs, bool) {
        let s = survey(data, max_runs);
        // The portable path must agree too (the AVX2 one is taken on this machine).
        assert_eq!(s, survey_with(data, max_runs, classify_table));
        let want = FLAG_BYTES
            .iter()
            .enumerate()
            .filter(|(_, b)| data.contains(b))
            .fold(0, |a, (i, _)| a | 1 << i);
        assert_eq!(s.seen, want);
        (s.runs, s.dropped)
    }

    /// The byte-at-a-time definition `find_runs` replaced (one table lookup per byte).
    fn find_runs_bytewise(data: &[u8], max_runs: usize) -> (Runs, bool) {
        let mut runs = Runs::default();
        let mut dropped = false;
        let n = data.len();
        let mut covered = [0usize; 3];
        let mut block = 0;
        while block + 8 <= n {
            let all = data[block..block + 8]
                .iter()
                .fold(0xff, |a, &c| a & member(c));
            for (slot, (&bit, &min)) in ALPHABETS.iter().zip(&MIN_RUN).enumerate() {
                if all & bit == 0 || block < covered[slot] {
                    continue;
                }
                let mut s = block;
                while s > 0 && member(data[s - 1]) & bit != 0 {
                    s -= 1;
                }
                let mut e = block + 8;
                while e < n && member(data[e]) & bit != 0 {
                    e += 1;
                }
                covered[slot] = e;
                if bit == C_B64 {
                    (s, e) = trim_b64(data, s, e);
                }
                if e - s >= min {
                    let v = [&mut runs.b64, &mut runs.b32, &mut runs.hex];
                    let v = v.into_iter().nth(slot).expect("three kinds");
                    if v.len() < max_runs {
                        v.push(s..e);
                    } else {
                        dropped = true;
                    }
                }
            }
            block += 8;
        }
        (runs, dropped)
    }

    fn same_as_bytewise(data: &[u8], max_runs: usize) {
        assert_eq!(
            find_runs(data, max_runs),
            find_runs_bytewise(data, max_runs),
            "{:?}",
            String::from_utf8_lossy(data)
        );
    }

    /// Runs of every alphabet, of lengths around the minimums, starting and ending at every
    /// offset relative to the 8- and 16-byte blocks and at both buffer ends.
    #[test]
    fn same_runs_as_bytewise_at_every_alignment_and_edge() {
        let fills: [&[u8]; 6] = [
            b"SGVsbG8gV29ybGQgZnJvbSBiYXNlNjQhIQ+/-_",
            b"deadbeef0123456789ABCDEFabcdef",
            b"MZXW6YTBOI234567mzxw6ytboi",
            b"ab\r\ncd\r\nAB+/",
            b"0123456789",
            b"==",
        ];
        for fill in fills {
            for len in [
                0, 1, 7, 8, 9, 15, 16, 17, 19, 20, 21, 23, 24, 31, 32, 33, 47, 64,
            ] {
                for pre in 0..34 {
                    for post in [0, 1, 2, 7, 8, 15, 16, 17] {
                        let mut d = vec![b' '; pre];
                        d.extend(fill.iter().cycle().take(len));
                        d.extend(std::iter::repeat_n(b' ', post));
                        same_as_bytewise(&d, 100);
                        // The run touching the start and the end of the buffer.
                        same_as_bytewise(&d[pre..pre + len], 100);
                        same_as_bytewise(&d[pre..], 100);
                        same_as_bytewise(&d[..pre + len], 100);
                    }
                }
            }
        }
    }

    #[test]
    fn same_runs_as_bytewise_on_random_mixes() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let alphabet = b"aAzZ09fF27gG+/-_=\r\n .,:\"%\x00\xff\x1f\xfd\x03&\\";
        for round in 0..400 {
            let len = round * 3 % 700;
            let d: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    // Mostly members, so long runs of every kind form and break.
                    let r = (seed >> 32) as usize;
                    if r.is_multiple_of(16) {
                        alphabet[r / 16 % alphabet.len()]
                    } else {
                        alphabet[r % 19]
                    }
                })
                .collect();
            same_as_bytewise(&d, 100);
            same_as_bytewise(&d, 1);
        }
    }

    #[test]
    fn the_run_cap_drops_the_same_runs() {
        let d = b"0123456789abcdef0123 ".repeat(10);
        same_as_bytewise(&d, 3);
        assert!(find_runs(&d, 3).1);
        assert_eq!(find_runs(&d, 3).0.hex.len(), 3);
    }

    #[test]
    fn runs_and_decoders() {
        let data = b"x=SGVsbG8gV29ybGQgZnJvbSBiYXNlNjQh&h=48656c6c6f20686578";
        let (runs, _) = find_runs(data, 100);
        let b = &data[runs.b64[0].clone()];
        assert_eq!(b64_decode(b, 0), b"Hello World from base64!");
        let h = runs
            .hex
            .iter()
            .map(|r| &data[r.clone()])
            .find(|r| r.starts_with(b"4865"))
            .unwrap();
        assert_eq!(hex_decode(h, 0), b"Hello hex");
    }

    #[test]
    fn mime_base64_with_line_breaks_is_one_run() {
        let data = b"SGVsbG8gV29ybGQgZnJvbSBi\r\nYXNlNjQgb3ZlciB0d28gbGluZXM=\r\n";
        let (runs, _) = find_runs(data, 10);
        assert_eq!(runs.b64.len(), 1);
        assert_eq!(
            b64_decode(&data[runs.b64[0].clone()], 0),
            b"Hello World from base64 over two lines"
        );
    }
}
