//! Montgomery arithmetic modulo one odd `64·L`-bit candidate, and the Miller–Rabin test on it.
//!
//! Plain (not constant-time) code: the numbers are canaries, not keys anyone relies on, and speed
//! is the point. Little-endian `u64` limbs throughout.

use rand_core::RngCore;

pub(crate) type Limbs<const L: usize> = [u64; L];

/// The largest operand size supported (1024 bits).
pub(crate) const MAX_LIMBS: usize = 16;

/// `a >= b` on little-endian limbs.
pub(crate) fn ge<const L: usize>(a: &Limbs<L>, b: &Limbs<L>) -> bool {
    for i in (0..L).rev() {
        if a[i] != b[i] {
            return a[i] > b[i];
        }
    }
    true
}

/// `a - b` (wrapping), and whether it borrowed.
fn sub<const L: usize>(a: &Limbs<L>, b: &Limbs<L>) -> (Limbs<L>, bool) {
    let mut out = [0u64; L];
    let mut borrow = false;
    for i in 0..L {
        let (d, b1) = a[i].overflowing_sub(b[i]);
        let (d, b2) = d.overflowing_sub(borrow as u64);
        out[i] = d;
        borrow = b1 | b2;
    }
    (out, borrow)
}

pub(crate) fn bits<const L: usize>(a: &Limbs<L>) -> usize {
    (0..L)
        .rev()
        .find(|&i| a[i] != 0)
        .map_or(0, |i| 64 * i + 64 - a[i].leading_zeros() as usize)
}

fn bit<const L: usize>(a: &Limbs<L>, i: usize) -> bool {
    (a[i / 64] >> (i % 64)) & 1 == 1
}

/// Arithmetic modulo `n` in Montgomery form (`x·R mod n`, `R = 2^(64·L)`).
pub(crate) struct Mont<const L: usize> {
    n: Limbs<L>,
    /// `-n⁻¹ mod 2^64`.
    n0: u64,
    /// `R mod n`: the Montgomery form of 1.
    one: Limbs<L>,
}

impl<const L: usize> Mont<L> {
    /// `None` unless `n` is odd and greater than 3.
    pub(crate) fn new(n: Limbs<L>) -> Option<Mont<L>> {
        if L == 0 || L > MAX_LIMBS || n[0] & 1 == 0 || bits(&n) <= 2 {
            return None;
        }
        // Newton's iteration doubles the correct low bits: n·n ≡ 1 (mod 8) for odd n, then 3·2^5 ≥ 64.
        let mut inv = n[0];
        for _ in 0..5 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(n[0].wrapping_mul(inv)));
        }
        let mut m = Mont {
            n,
            n0: inv.wrapping_neg(),
            one: [0; L],
        };
        m.one = if n[L - 1] >> 63 == 1 {
            // n > R/2, so R mod n = R - n: the two's complement of n.
            sub(&[0; L], &n).0
        } else {
            // Doubling 1 (which is < n) 64·L times.
            let mut one = [0u64; L];
            one[0] = 1;
            for _ in 0..64 * L {
                m.double(&mut one);
            }
            one
        };
        Some(m)
    }

    /// `a ← 2a mod n` (for `a < n`; the same in and out of Montgomery form).
    pub(crate) fn double(&self, a: &mut Limbs<L>) {
        let mut carry = 0u64;
        for x in a.iter_mut() {
            let next = *x >> 63;
            *x = (*x << 1) | carry;
            carry = next;
        }
        if carry != 0 || ge(a, &self.n) {
            *a = sub(a, &self.n).0;
        }
    }

    /// Montgomery product `a·b·R⁻¹ mod n`: schoolbook product, then word-by-word reduction.
    pub(crate) fn mul(&self, a: &Limbs<L>, b: &Limbs<L>) -> Limbs<L> {
        // `[u64; 2 * L]` cannot be written with a const generic on stable Rust.
        let mut t = [0u64; 2 * MAX_LIMBS];
        for i in 0..L {
            let ai = a[i] as u128;
            let mut c: u128 = 0;
            for (tj, &bj) in t[i..i + L].iter_mut().zip(b.iter()) {
                let v = ai * bj as u128 + *tj as u128 + c;
                *tj = v as u64;
                c = v >> 64;
            }
            t[i + L] = c as u64;
        }
        self.redc(&mut t)
    }

    /// Montgomery square `a²·R⁻¹ mod n`: each cross product once, doubled, plus the diagonal —
    /// about a quarter fewer word products than [`mul`](Self::mul). The Miller–Rabin tests are
    /// almost nothing but squarings.
    pub(crate) fn sqr(&self, a: &Limbs<L>) -> Limbs<L> {
        let mut t = [0u64; 2 * MAX_LIMBS];
        for i in 0..L {
            let ai = a[i] as u128;
            let mut c: u128 = 0;
            for (tj, &aj) in t[2 * i + 1..i + L].iter_mut().zip(a[i + 1..].iter()) {
                let v = ai * aj as u128 + *tj as u128 + c;
                *tj = v as u64;
                c = v >> 64;
            }
            t[i + L] = c as u64;
        }
        // 2·(cross products) < a² < 2^(128·L): nothing carries out of the top word.
        let mut carry = 0u64;
        for x in t.iter_mut().take(2 * L) {
            let next = *x >> 63;
            *x = (*x << 1) | carry;
            carry = next;
        }
        let mut c: u128 = 0;
        for i in 0..L {
            let sq = a[i] as u128 * a[i] as u128;
            let v = t[2 * i] as u128 + (sq as u64) as u128 + c;
            t[2 * i] = v as u64;
            let v = t[2 * i + 1] as u128 + (sq >> 64) + (v >> 64);
            t[2 * i + 1] = v as u64;
            c = v >> 64;
        }
        self.redc(&mut t)
    }

    /// Montgomery reduction of a double-width `t < n·R`: `t·R⁻¹ mod n`.
    fn redc(&self, t: &mut [u64; 2 * MAX_LIMBS]) -> Limbs<L> {
        let mut top: u128 = 0;
        for i in 0..L {
            let m = t[i].wrapping_mul(self.n0) as u128;
            let mut c: u128 = 0;
            // Iterators over equal-length slices: no bounds checks in the hot loop.
            for (tj, &nj) in t[i..i + L].iter_mut().zip(self.n.iter()) {
                let v = m * nj as u128 + *tj as u128 + c;
                *tj = v as u64;
                c = v >> 64;
            }
            let v = t[i + L] as u128 + c + top;
            t[i + L] = v as u64;
            top = v >> 64;
        }
        let mut r = [0u64; L];
        r.copy_from_slice(&t[L..2 * L]);
        if top != 0 || ge(&r, &self.n) {
            r = sub(&r, &self.n).0;
        }
        r
    }

    /// `x` in Montgomery form (`x < n`).
    fn to_mont(&self, x: &Limbs<L>) -> Limbs<L> {
        // x·R = x doubled 64·L times; only done for the few random bases, so no R² table.
        let mut v = *x;
        for _ in 0..64 * L {
            self.double(&mut v);
        }
        v
    }

    /// `(n - 1) = d·2^s`, as (d, s).
    fn split(&self) -> (Limbs<L>, usize) {
        let mut one = [0u64; L];
        one[0] = 1;
        let n1 = sub(&self.n, &one).0;
        let s = (0..64 * L).find(|&i| bit(&n1, i)).unwrap_or(0);
        let mut d = [0u64; L];
        for i in 0..64 * L - s {
            if bit(&n1, i + s) {
                d[i / 64] |= 1 << (i % 64);
            }
        }
        (d, s)
    }

    /// The strong-probable-prime test's verdict for `x = a^d` (Montgomery form).
    fn finish_sprp(&self, mut x: Limbs<L>, s: usize) -> bool {
        let minus_one = sub(&self.n, &self.one).0;
        if x == self.one || x == minus_one {
            return true;
        }
        for _ in 1..s {
            x = self.sqr(&x);
            if x == minus_one {
                return true;
            }
            if x == self.one {
                return false;
            }
        }
        false
    }

    /// Miller–Rabin with base 2. Multiplying by the base is a doubling, so this costs one modular
    /// squaring per bit of `n`.
    pub(crate) fn sprp_base2(&self) -> bool {
        let (d, s) = self.split();
        let mut x = self.one;
        for i in (0..bits(&d)).rev() {
            x = self.sqr(&x);
            if bit(&d, i) {
                self.double(&mut x);
            }
        }
        self.finish_sprp(x, s)
    }

    /// Miller–Rabin with base `a` (`2 ≤ a ≤ n - 2`, plain form); 4-bit fixed window.
    pub(crate) fn sprp(&self, a: &Limbs<L>) -> bool {
        let (d, s) = self.split();
        let base = self.to_mont(a);
        let mut table = [self.one; 16];
        for i in 1..16 {
            table[i] = self.mul(&table[i - 1], &base);
        }
        let mut x = self.one;
        let nb = bits(&d).div_ceil(4) * 4;
        for w in (0..nb / 4).rev() {
            for _ in 0..4 {
                x = self.sqr(&x);
            }
            let idx = (0..4).fold(0usize, |acc, k| acc | ((bit(&d, 4 * w + k) as usize) << k));
            x = self.mul(&x, &table[idx]);
        }
        self.finish_sprp(x, s)
    }

    /// A uniform base in `[2, n - 2]` (rejection sampling within `n`'s bit length).
    pub(crate) fn random_base(&self, rng: &mut impl RngCore) -> Limbs<L> {
        let nbits = bits(&self.n);
        let mut two = [0u64; L];
        two[0] = 2;
        let (hi_bound, _) = sub(&self.n, &two); // n - 2
        loop {
            let mut a = [0u64; L];
            for (i, limb) in a.iter_mut().enumerate() {
                let lo_bit = 64 * i;
                if lo_bit >= nbits {
                    break;
                }
                let mut v = rng.next_u64();
                if nbits - lo_bit < 64 {
                    v &= (1u64 << (nbits - lo_bit)) - 1;
                }
                *limb = v;
            }
            if ge(&a, &two) && ge(&hi_bound, &a) {
                return a;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    fn one_limb(n: u64) -> Option<Mont<1>> {
        Mont::new([n])
    }

    fn naive_prime(n: u64) -> bool {
        n >= 2
            && (2..)
                .take_while(|d| d * d <= n)
                .all(|d| !n.is_multiple_of(d))
    }

    #[test]
    fn montgomery_product_matches_plain_arithmetic() {
        // Two limbs so carries cross a limb boundary; compared against u128 arithmetic.
        let n: u128 = 0xc5f1_3d8a_92b4_e617_0a3b_55de_91c7_2f4d;
        let m = Mont::<2>::new([n as u64, (n >> 64) as u64]).unwrap();
        let limbs = |x: u128| [x as u64, (x >> 64) as u64];
        let val = |l: [u64; 2]| l[0] as u128 | (l[1] as u128) << 64;
        let mut rng = ChaCha20Rng::from_seed([3; 32]);
        for _ in 0..200 {
            let a = ((rng.next_u64() as u128) << 64 | rng.next_u64() as u128) % n;
            let b = ((rng.next_u64() as u128) << 64 | rng.next_u64() as u128) % n;
            // Convert in, multiply, convert out by multiplying with plain 1.
            let prod = m.mul(&m.to_mont(&limbs(a)), &m.to_mont(&limbs(b)));
            let out = val(m.mul(&prod, &[1, 0]));
            assert_eq!(out, mulmod(a, b, n));
        }
    }

    #[test]
    fn montgomery_square_matches_the_product() {
        let mut rng = ChaCha20Rng::from_seed([5; 32]);
        for _ in 0..50 {
            let mut n = [0u64; 16];
            n.iter_mut().for_each(|l| *l = rng.next_u64());
            n[0] |= 1;
            n[15] |= 1 << 63;
            let m = Mont::<16>::new(n).unwrap();
            let mut a = [0u64; 16];
            a.iter_mut().for_each(|l| *l = rng.next_u64());
            a[15] &= u64::MAX >> 1; // a < n
            assert_eq!(m.sqr(&a), m.mul(&a, &a));
            let mut one = [0u64; 16];
            one[0] = 1;
            // n - 1: the largest residue, every carry path taken.
            let x = sub(&n, &one).0;
            assert_eq!(m.sqr(&x), m.mul(&x, &x));
        }
    }

    /// a·b mod n by double-and-add, since a·b overflows u128.
    fn mulmod(a: u128, b: u128, n: u128) -> u128 {
        let mut r: u128 = 0;
        for i in (0..128).rev() {
            r = if r >= n - r { r - (n - r) } else { r + r };
            if (b >> i) & 1 == 1 {
                r = if r >= n - a { r - (n - a) } else { r + a };
            }
        }
        r
    }

    #[test]
    fn base2_test_agrees_with_trial_division_except_on_base2_pseudoprimes() {
        // Strong pseudoprimes to base 2 below 10^5 (OEIS A001262).
        let spsp2 = [
            2047u64, 3277, 4033, 4681, 8321, 15841, 29341, 42799, 49141, 52633, 65281, 74665,
            80581, 85489, 88357, 90751,
        ];
        for n in (5u64..100_000).step_by(2) {
            let m = one_limb(n).unwrap();
            let expect = naive_prime(n) || spsp2.contains(&n);
            assert_eq!(m.sprp_base2(), expect, "n = {n}");
        }
    }

    #[test]
    fn random_bases_expose_base2_pseudoprimes_and_carmichael_numbers() {
        let mut rng = ChaCha20Rng::from_seed([9; 32]);
        // 3215031751 is a strong pseudoprime to bases 2, 3, 5 and 7; 561 and 41041 are Carmichael.
        for n in [2047u64, 3215031751, 561, 41041, 4681] {
            let m = one_limb(n).unwrap();
            let caught = (0..8).any(|_| !m.sprp(&m.random_base(&mut rng)));
            assert!(caught, "{n} passed eight random bases");
        }
        for p in [65537u64, 2147483647, 0xffff_ffff_ffff_ffc5] {
            let m = one_limb(p).unwrap();
            assert!(m.sprp_base2());
            assert!((0..8).all(|_| m.sprp(&m.random_base(&mut rng))), "{p}");
        }
    }

    #[test]
    fn montgomery_one_is_r_mod_n_for_full_width_moduli() {
        // Top bit set (the R - n shortcut) and clear (doubling): 1·1 = 1 in both.
        for n in [
            0xffff_ffff_ffff_ffc5u64,
            0x8000_0000_0000_001d,
            0x7fff_ffff_ffff_ffe7,
            1_000_003,
        ] {
            let m = one_limb(n).unwrap();
            let r = ((1u128 << 64) % n as u128) as u64;
            assert_eq!(m.one, [r], "{n:#x}");
            assert_eq!(m.mul(&m.one, &m.one), m.one);
        }
    }

    #[test]
    fn bad_moduli_are_refused_and_bases_stay_in_range() {
        assert!(one_limb(0).is_none());
        assert!(one_limb(10).is_none());
        assert!(one_limb(3).is_none());
        let m = one_limb(7).unwrap();
        let mut rng = ChaCha20Rng::from_seed([1; 32]);
        for _ in 0..100 {
            let a = m.random_base(&mut rng)[0];
            assert!((2..=5).contains(&a), "{a}");
        }
    }
}
