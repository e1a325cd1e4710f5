//! RSA-2048 keys fast enough to make fresh ones on every run.
//!
//! The `rsa` crate spends most of its key generation in Miller–Rabin exponentiations on candidates
//! that a sieve could have thrown away, at `num-bigint-dig` speed. Here each 1024-bit prime is found
//! by an incremental search from a random odd start whose top two bits are set (so `n` has exactly
//! 2048 bits): a sieve over a window of 4096 odd offsets strikes every multiple of a prime below
//! 2^18 (and every `c ≡ 1 mod 65537`, so `e` is invertible), about 31 survivors are tried with one
//! base-2 Miller–Rabin round (doublings instead of multiplications), and the first to pass must also
//! pass [`RANDOM_ROUNDS`] rounds with random bases. See `docs/credentials.md` for the error bounds.
//!
//! Everything is drawn from the caller's stream, so a seed reproduces the key bit for bit.

mod mont;

use mont::{bits, ge, Limbs, Mont};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use rsa::{BigUint, RsaPrivateKey};
use std::sync::OnceLock;

/// Bits of the modulus.
pub const RSA_BITS: usize = 2048;
/// The public exponent every current tool uses.
pub const PUBLIC_EXPONENT: u64 = 65537;
/// Miller–Rabin rounds with uniformly random bases after the base-2 round.
pub const RANDOM_ROUNDS: usize = 4;
/// Small primes below this bound are sieved out.
const SIEVE_BOUND: u32 = 1 << 18;
/// Odd offsets examined per random start; about 11 primes are expected in it, so a window without
/// one (probability ≈ e^-11.5) just draws a new start.
const WINDOW: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum KeyGenError {
    #[error("assembling the RSA key: {0}")]
    Assemble(#[from] rsa::Error),
    #[error("prime search thread failed")]
    Thread,
    #[error("reference primes are not hexadecimal")]
    Reference,
}

/// Primes below [`SIEVE_BOUND`] (from 3), grouped so that each group's product fits a `u64`: one
/// multi-limb remainder per group instead of per prime.
struct SmallPrimes {
    groups: Vec<(u64, Vec<u32>)>,
}

fn small_primes() -> &'static SmallPrimes {
    static TABLE: OnceLock<SmallPrimes> = OnceLock::new();
    TABLE.get_or_init(|| {
        let bound = SIEVE_BOUND as usize;
        let mut composite = vec![false; bound];
        let mut groups: Vec<(u64, Vec<u32>)> = Vec::new();
        let (mut product, mut members) = (1u64, Vec::new());
        for p in 2..bound {
            if composite[p] {
                continue;
            }
            for multiple in (p * p..bound).step_by(p) {
                composite[multiple] = true;
            }
            if p == 2 {
                continue;
            }
            match product.checked_mul(p as u64) {
                Some(next) => product = next,
                None => {
                    groups.push((product, std::mem::take(&mut members)));
                    product = p as u64;
                }
            }
            members.push(p as u32);
        }
        groups.push((product, members));
        SmallPrimes { groups }
    })
}

/// `x mod m` for a multi-limb `x` and `m < 2^64`.
fn rem_u64<const L: usize>(x: &Limbs<L>, m: u64) -> u64 {
    let m = m as u128;
    x.iter()
        .rev()
        .fold(0u128, |r, &limb| ((r << 64) | limb as u128) % m) as u64
}

/// For candidates `start + 2k`, `k < WINDOW`: true where the candidate is divisible by a small
/// prime or is `1 mod 65537`.
fn sieve<const L: usize>(start: &Limbs<L>) -> Vec<bool> {
    let mut struck = vec![false; WINDOW];
    // start + 2k ≡ target (mod p)  ⇔  k ≡ (target - r)·2⁻¹ (mod p), with 2⁻¹ = (p + 1)/2.
    let mut strike = |p: u64, r: u64, target: u64| {
        let k0 = ((target + p - r) % p) * p.div_ceil(2) % p;
        for k in (k0 as usize..WINDOW).step_by(p as usize) {
            struck[k] = true;
        }
    };
    for (product, members) in &small_primes().groups {
        let r = rem_u64(start, *product);
        for &p in members {
            strike(p as u64, r % p as u64, 0);
        }
    }
    let r = rem_u64(start, PUBLIC_EXPONENT);
    strike(PUBLIC_EXPONENT, r, 0);
    strike(PUBLIC_EXPONENT, r, 1);
    struck
}

/// `a + 2k`, or `None` if it overflows `L` limbs.
fn add_offset<const L: usize>(a: &Limbs<L>, k: usize) -> Option<Limbs<L>> {
    let mut out = *a;
    let mut carry = 2 * k as u64;
    for limb in out.iter_mut() {
        if carry == 0 {
            break;
        }
        let (v, c) = limb.overflowing_add(carry);
        *limb = v;
        carry = c as u64;
    }
    (carry == 0).then_some(out)
}

/// A random `64·L`-bit probable prime with its top two bits set and `p ≢ 1 (mod 65537)`.
pub(crate) fn random_prime<const L: usize>(rng: &mut impl RngCore) -> Limbs<L> {
    loop {
        let mut start = [0u64; L];
        for limb in start.iter_mut() {
            *limb = rng.next_u64();
        }
        start[L - 1] |= 0b11 << 62;
        start[0] |= 1;
        let struck = sieve(&start);
        for (k, _) in struck.iter().enumerate().filter(|(_, s)| !**s) {
            let Some(c) = add_offset(&start, k) else {
                break;
            };
            let Some(m) = Mont::new(c) else {
                continue;
            };
            if m.sprp_base2() && (0..RANDOM_ROUNDS).all(|_| m.sprp(&m.random_base(rng))) {
                return c;
            }
        }
    }
}

fn to_biguint<const L: usize>(x: &Limbs<L>) -> BigUint {
    let bytes: Vec<u8> = x.iter().flat_map(|l| l.to_le_bytes()).collect();
    BigUint::from_bytes_le(&bytes)
}

/// A fresh RSA-2048 key (`e = 65537`, `d = e⁻¹ mod λ(n)`, `p > q` as OpenSSL orders them), drawn
/// entirely from `rng`. The two primes are searched on two threads, each from its own stream
/// seeded from `rng`, so the result does not depend on scheduling.
pub fn rsa_2048(rng: &mut impl RngCore) -> Result<RsaPrivateKey, KeyGenError> {
    let mut seeds = [[0u8; 32]; 2];
    for s in &mut seeds {
        rng.fill_bytes(s);
    }
    let [sp, sq] = seeds;
    let (a, b) = std::thread::scope(|scope| {
        let other = scope.spawn(move || random_prime::<16>(&mut ChaCha20Rng::from_seed(sq)));
        let a = random_prime::<16>(&mut ChaCha20Rng::from_seed(sp));
        other.join().map(|b| (a, b))
    })
    .map_err(|_| KeyGenError::Thread)?;
    let (p, q) = if ge(&a, &b) { (a, b) } else { (b, a) };
    debug_assert_eq!(bits(&p), RSA_BITS / 2);
    Ok(RsaPrivateKey::from_p_q(
        to_biguint(&p),
        to_biguint(&q),
        BigUint::from(PUBLIC_EXPONENT),
    )?)
}

/// The primes of a fixed RSA-2048 key (found by [`rsa_2048`] from a constant stream), for the
/// registry's probe generation. The probe only looks for structure that every RSA-2048 key shares
/// (such as the first line of an OpenSSH RSA key); any valid key shows it, and a fixed one saves
/// two key generations per process. Never planted.
const REFERENCE_PRIMES: [&str; 2] = [
    "ea722509552ac2f2b2f31f379b31f2a73a00c61b59017618dec2f6c08ef7ff8db0cd9d5941fb87d925ea2f85db97ebbd\
     0b5e51a2442e5272df1ace73426f62e66c3712a6637eb86536d2a3023cd9927ce6f226741e3779387633f124a07dbb87\
     be0f1f15feb2fbfd8820b864adc58b99be14a80f5bd688abecf5e518d0b070cf",
    "df048c59a017fca17ebb7e4c4be141075da771f1578502266c5790b262bbf6e4399d294cb84663f1f0dab59f0695ad36\
     541a2d9f7f38b5d825ef0ff918c0f956c629fb52de6dd0b98ca608315749cffbc10c8ceff89945212e90f7ff2e17a2e9\
     1f78a00f8e1a2b05738f65bd20449ed73e831ca9f4f024dd215e9463dea2659d",
];

/// The fixed key built from [`REFERENCE_PRIMES`].
pub(crate) fn reference_key() -> Result<RsaPrivateKey, KeyGenError> {
    static KEY: OnceLock<RsaPrivateKey> = OnceLock::new();
    if let Some(k) = KEY.get() {
        return Ok(k.clone());
    }
    let prime = |hex: &str| BigUint::parse_bytes(hex.as_bytes(), 16).ok_or(KeyGenError::Reference);
    let key = RsaPrivateKey::from_p_q(
        prime(REFERENCE_PRIMES[0])?,
        prime(REFERENCE_PRIMES[1])?,
        BigUint::from(PUBLIC_EXPONENT),
    )?;
    Ok(KEY.get_or_init(|| key).clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsa::traits::{PrivateKeyParts, PublicKeyParts};
    use rsa::Pkcs1v15Encrypt;

    fn is_small_prime_free(x: &Limbs<2>) -> bool {
        let v = x[0] as u128 | (x[1] as u128) << 64;
        small_primes()
            .groups
            .iter()
            .flat_map(|(_, ps)| ps)
            .all(|&p| !v.is_multiple_of(p as u128))
            && v % PUBLIC_EXPONENT as u128 > 1
    }

    #[test]
    fn sieve_strikes_exactly_the_candidates_with_small_factors() {
        let mut rng = ChaCha20Rng::from_seed([5; 32]);
        let start = [rng.next_u64() | 1, rng.next_u64() | (0b11 << 62)];
        let struck = sieve(&start);
        let survivors = struck.iter().filter(|s| !**s).count();
        // Mertens: about 2·e^-γ/ln(2^18) ≈ 9% of odd numbers survive.
        assert!((250..600).contains(&survivors), "{survivors} survivors");
        for (k, s) in struck.iter().enumerate() {
            let c = add_offset(&start, k).unwrap();
            assert_eq!(!s, is_small_prime_free(&c), "offset {k}");
        }
    }

    #[test]
    fn small_prime_table_is_complete() {
        let all: Vec<u32> = small_primes()
            .groups
            .iter()
            .flat_map(|(prod, ps)| {
                assert_eq!(*prod, ps.iter().map(|&p| p as u64).product::<u64>());
                ps.clone()
            })
            .collect();
        assert_eq!(all.len(), 23000 - 1, "primes below 2^18, without 2");
        assert_eq!(all.first(), Some(&3));
        assert_eq!(all.last(), Some(&262139));
    }

    #[test]
    fn offsets_that_overflow_are_refused() {
        assert_eq!(add_offset(&[u64::MAX - 3, 0], 1), Some([u64::MAX - 1, 0]));
        assert_eq!(add_offset(&[u64::MAX - 1, 0], 1), Some([0, 1]));
        assert_eq!(add_offset(&[u64::MAX - 1, u64::MAX], 1), None);
    }

    #[test]
    fn small_primes_found_are_prime_and_sized() {
        let mut rng = ChaCha20Rng::from_seed([11; 32]);
        for _ in 0..20 {
            let p = random_prime::<2>(&mut rng);
            assert_eq!(p[1] >> 62, 0b11);
            let v = to_biguint(&p);
            assert!(num_bigint_dig_prime(&v), "{v} is composite");
            assert_ne!(&v % PUBLIC_EXPONENT, BigUint::from(1u8));
        }
    }

    fn num_bigint_dig_prime(v: &BigUint) -> bool {
        // 20 rounds plus a Lucas test in the rsa crate's own bigint library, an implementation
        // independent of ours.
        num_bigint_dig::prime::probably_prime(v, 20)
    }

    #[test]
    fn reference_key_is_a_real_rsa_2048_key() {
        let key = reference_key().unwrap();
        key.validate().unwrap();
        assert_eq!(key.n().bits(), RSA_BITS);
        assert!(key.primes().iter().all(num_bigint_dig_prime));
        assert_eq!(reference_key().unwrap(), key);
    }

    #[test]
    fn key_is_valid_reproducible_and_unique() {
        let key = rsa_2048(&mut ChaCha20Rng::from_seed([1; 32])).unwrap();
        let again = rsa_2048(&mut ChaCha20Rng::from_seed([1; 32])).unwrap();
        let other = rsa_2048(&mut ChaCha20Rng::from_seed([2; 32])).unwrap();
        assert_eq!(key, again);
        assert_ne!(key.n(), other.n());
        key.validate().unwrap();
        assert_eq!(key.n().bits(), RSA_BITS);
        assert_eq!(key.e(), &BigUint::from(PUBLIC_EXPONENT));
        let [p, q] = key.primes() else {
            panic!("two primes expected");
        };
        assert!(p > q);
        for f in [p, q] {
            assert_eq!(f.bits(), RSA_BITS / 2);
            assert!(num_bigint_dig_prime(f));
        }
        // The key works: what its public half encrypts, the private half decrypts.
        let mut rng = ChaCha20Rng::from_seed([4; 32]);
        let ct = key
            .to_public_key()
            .encrypt(&mut rng, Pkcs1v15Encrypt, b"round trip")
            .unwrap();
        assert_eq!(key.decrypt(Pkcs1v15Encrypt, &ct).unwrap(), b"round trip");
    }
}
