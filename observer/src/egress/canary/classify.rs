//! Byte classes for run finding, 64 bytes at a time: one bit mask per alphabet (base64 with line
//! breaks, base32, hex), plus which of a few rare bytes occur (`FLAG_BYTES`), so the passes that
//! look for them can be skipped on buffers without them.

pub(super) const C_B64: u8 = 1; // A-Z a-z 0-9 + / - _
pub(super) const C_HEX: u8 = 2;
pub(super) const C_B32: u8 = 4; // A-Z a-z 2-7 (case-insensitive)
pub(super) const C_WS: u8 = 8; // \r \n inside MIME base64

pub(super) static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        let mut v = 0;
        if c.is_ascii_alphanumeric() || c == b'+' || c == b'/' || c == b'-' || c == b'_' {
            v |= C_B64;
        }
        if c.is_ascii_hexdigit() {
            v |= C_HEX;
        }
        if c.is_ascii_alphabetic() || (c >= b'2' && c <= b'7') {
            v |= C_B32;
        }
        if c == b'\r' || c == b'\n' {
            v |= C_WS;
        }
        t[i] = v;
        i += 1;
    }
    t
};

/// Alphabet membership for run finding: `C_B64` also for line breaks (MIME wraps at 76).
static MEMBER: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let k = CLASS[i];
        t[i] = (if k & (C_B64 | C_WS) != 0 { C_B64 } else { 0 }) | (k & (C_HEX | C_B32));
        i += 1;
    }
    t
};

pub(super) fn member(c: u8) -> u8 {
    MEMBER[c as usize]
}

/// Membership of 64 bytes, bit `i` for byte `i`, per alphabet (in `ALPHABETS` order).
pub(super) type Masks = [u64; 3];

/// The `MEMBER` bit of each alphabet, in `Masks` order.
pub(super) const ALPHABETS: [u8; 3] = [C_B64, C_B32, C_HEX];

/// Bytes whose presence decides whether later passes run (magic numbers of gzip, xz, zstd and
/// zip; bzip2's block magic; the URL, JSON and quoted-printable escapes): bit `i` of `seen`.
pub(super) const FLAG_BYTES: [u8; 7] = [0x1f, 0xfd, 0x03, b'&', b'%', b'\\', b'='];
pub(super) const ALL_FLAGS: u8 = (1 << FLAG_BYTES.len()) - 1;

/// The `seen` bit of a byte of `FLAG_BYTES` (0 for any other byte).
pub(super) const fn flag(b: u8) -> u8 {
    let mut i = 0;
    while i < FLAG_BYTES.len() {
        if FLAG_BYTES[i] == b {
            return 1 << i;
        }
        i += 1;
    }
    0
}

// Nibble tables for the vector classifier: a byte is in a class when the tables of its high and
// low nibble share a bit of that class. Each bit is one rectangle of the ASCII table:
const N_AO: u8 = 1; // 4x/6x, x = 1..F: A-O a-o
const N_PZ: u8 = 2; // 5x/7x, x = 0..A: P-Z p-z
const N_DIGIT: u8 = 4; // 3x, x = 0..9
const N_PUNCT: u8 = 8; // 2B 2D 2F: + - /
const N_WS: u8 = 16; // 0A 0D: \n \r
const N_UNDER: u8 = 32; // 5F: _
const N_AF: u8 = 64; // 4x/6x, x = 1..6: A-F a-f
const N_B32DIGIT: u8 = 128; // 3x, x = 2..7

/// Bits of each class, in `ALPHABETS` order.
const N_CLASSES: [u8; 3] = [
    N_AO | N_PZ | N_DIGIT | N_PUNCT | N_WS | N_UNDER,
    N_AO | N_PZ | N_B32DIGIT,
    N_DIGIT | N_AF,
];

const NIBBLE_HI: [u8; 16] = [
    N_WS,
    0,
    N_PUNCT,
    N_DIGIT | N_B32DIGIT,
    N_AO | N_AF,
    N_PZ | N_UNDER,
    N_AO | N_AF,
    N_PZ,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
];

const NIBBLE_LO: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut lo = 0;
    while lo < 16 {
        let mut v = 0;
        if lo >= 1 {
            v |= N_AO;
        }
        if lo <= 0xA {
            v |= N_PZ;
        }
        if lo <= 9 {
            v |= N_DIGIT;
        }
        if lo == 0xB || lo == 0xD || lo == 0xF {
            v |= N_PUNCT;
        }
        if lo == 0xA || lo == 0xD {
            v |= N_WS;
        }
        if lo == 0xF {
            v |= N_UNDER;
        }
        if lo >= 1 && lo <= 6 {
            v |= N_AF;
        }
        if lo >= 2 && lo <= 7 {
            v |= N_B32DIGIT;
        }
        t[lo] = v;
        lo += 1;
    }
    t
};

/// The definition the vector classifier must agree with.
pub(super) fn classify_table(c: &[u8; 64], flags: bool) -> (Masks, u8) {
    let mut m = [0u64; 3];
    let mut seen = 0;
    for (i, &b) in c.iter().enumerate() {
        for (k, &bit) in ALPHABETS.iter().enumerate() {
            m[k] |= u64::from(member(b) & bit != 0) << i;
        }
        if flags {
            for (f, &x) in FLAG_BYTES.iter().enumerate() {
                seen |= u8::from(b == x) << f;
            }
        }
    }
    (m, seen)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn load32(b: &[u8; 32]) -> std::arch::x86_64::__m256i {
    // SAFETY: reads exactly the 32 bytes of `b`; `loadu` has no alignment requirement. (Building
    // the vector from safe u64 reads compiled to byte inserts and cost more than it saved.)
    unsafe { std::arch::x86_64::_mm256_loadu_si256(b.as_ptr().cast()) }
}

/// A nibble table repeated in both 128-bit lanes (`pshufb` looks up within each lane).
const fn twice(t: [u8; 16]) -> [u8; 32] {
    let mut both = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        both[i] = t[i % 16];
        i += 1;
    }
    both
}

static NIBBLE_HI2: [u8; 32] = twice(NIBBLE_HI);
static NIBBLE_LO2: [u8; 32] = twice(NIBBLE_LO);

/// Flag bytes by nibble, one bit per byte of `FLAG_BYTES` (each its own rectangle).
const fn flag_nibbles(shift: u32) -> [u8; 16] {
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < FLAG_BYTES.len() {
        t[((FLAG_BYTES[i] >> shift) & 15) as usize] |= 1 << i;
        i += 1;
    }
    t
}

static FLAG_HI2: [u8; 32] = twice(flag_nibbles(4));
static FLAG_LO2: [u8; 32] = twice(flag_nibbles(0));

/// `classify_table` with AVX2: two nibble lookups per 32 bytes instead of one load per byte.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) fn classify_avx2(c: &[u8; 64], flags: bool) -> (Masks, u8) {
    use std::arch::x86_64::*;
    let (hi_t, lo_t) = (load32(&NIBBLE_HI2), load32(&NIBBLE_LO2));
    let nib = _mm256_set1_epi8(0x0f);
    let mut out = [0u64; 3];
    let mut flagged = _mm256_setzero_si256();
    for (h, half) in c.as_chunks::<32>().0.iter().enumerate() {
        let x = load32(half);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(x), nib);
        let lo = _mm256_and_si256(x, nib);
        // pshufb zeroes lanes whose index has bit 7 set; `hi` and `lo` never do.
        let t = _mm256_and_si256(_mm256_shuffle_epi8(hi_t, hi), _mm256_shuffle_epi8(lo_t, lo));
        for (k, &bits) in N_CLASSES.iter().enumerate() {
            let none = _mm256_cmpeq_epi8(
                _mm256_and_si256(t, _mm256_set1_epi8(bits as i8)),
                _mm256_setzero_si256(),
            );
            let m = !(_mm256_movemask_epi8(none) as u32);
            out[k] |= u64::from(m) << (32 * h);
        }
        if flags {
            let f = _mm256_and_si256(
                _mm256_shuffle_epi8(load32(&FLAG_HI2), hi),
                _mm256_shuffle_epi8(load32(&FLAG_LO2), lo),
            );
            flagged = _mm256_or_si256(flagged, f);
        }
    }
    let mut seen = 0;
    // Text rarely holds a flag byte: one test, and bit by bit only when one is there.
    if flags && _mm256_testz_si256(flagged, flagged) == 0 {
        let mut bytes = [0u8; 32];
        // SAFETY: writes exactly the 32 bytes of `bytes`; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_si256(bytes.as_mut_ptr().cast(), flagged) };
        seen = bytes.iter().fold(0, |a, b| a | b);
    }
    (out, seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify_fast(c: &[u8; 64], flags: bool) -> (Masks, u8) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { classify_avx2(c, flags) };
        }
        classify_table(c, flags)
    }

    /// Every byte value at every position of the window.
    #[test]
    fn vector_classes_and_flags_agree_with_the_table() {
        for start in (0..256).step_by(64) {
            for rot in 0..64 {
                let c: [u8; 64] = std::array::from_fn(|i| (start + (i + rot) % 64) as u8);
                for flags in [false, true] {
                    assert_eq!(classify_fast(&c, flags), classify_table(&c, flags));
                }
            }
        }
        for (i, &b) in FLAG_BYTES.iter().enumerate() {
            for at in [0, 31, 32, 63] {
                let mut c = [b'a'; 64];
                c[at] = b;
                assert_eq!(classify_fast(&c, true).1, 1 << i);
                assert_eq!(classify_fast(&c, false).1, 0);
            }
        }
    }
}
