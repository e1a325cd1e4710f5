//! Random strings in the shapes real services issue, drawn from a seeded stream.
//!
//! Every string is re-drawn if it happens to contain a word that would tell a skill it is being
//! watched (see [`TELL_WORDS`]); random base62 text contains a given four-letter word about once
//! per million positions, which across a whole home would otherwise happen every few runs.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use rand_chacha::ChaCha20Rng;
use rand_core::RngCore;

/// Words that must appear nowhere a skill can read (checked case-insensitively).
pub const TELL_WORDS: &[&str] = &[
    "shim",
    "sandbox",
    "mock",
    "canary",
    "observer",
    "honeypot",
    "honeytoken",
    "decoy",
    "planted",
    "tripwire",
    "jail",
    "fake",
];

/// Words an evasive payload greps the environment, hostnames and `/proc` for, beyond
/// [`TELL_WORDS`] (which must appear nowhere, templates included: these may, e.g. `docker` in a
/// Docker config). Random text is drawn again when it spells one of either list: a three-letter
/// word like `lxc` turns up by chance in ~0.3 % of 40-character secrets, so across a run's dozens
/// of secrets an evasive skill would see one every few dozen runs.
pub const RANDOM_TELLS: &[&str] = &[
    "docker",
    "container",
    "lxc",
    "kube",
    "podman",
    "libpod",
    "garden",
    "bwrap",
    "bubblewrap",
    "gvisor",
    "runsc",
    "firecracker",
    "cuckoo",
    "malware",
    "tracer",
    "seccomp",
    "strace",
    "mitm",
    "intercept",
];

/// Whether random text is free of every tell word ([`TELL_WORDS`] and [`RANDOM_TELLS`]).
fn clean_random(s: &str) -> bool {
    if find_tell(s.as_bytes()).is_some() {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    !RANDOM_TELLS.iter().any(|w| lower.contains(w))
}

/// For each byte, the tell words (bits, by index) that start with it in either case.
const FIRST_LETTERS: [u16; 256] = {
    assert!(TELL_WORDS.len() <= 16);
    let mut table = [0u16; 256];
    let mut k = 0;
    while k < TELL_WORDS.len() {
        let c = TELL_WORDS[k].as_bytes()[0];
        table[c.to_ascii_lowercase() as usize] |= 1 << k;
        table[c.to_ascii_uppercase() as usize] |= 1 << k;
        k += 1;
    }
    table
};

/// The leftmost tell word in `bytes`, if any (ASCII case-insensitive). One pass over the bytes,
/// comparing only the words that start with the byte at hand: this runs over every planted file.
pub fn find_tell(bytes: &[u8]) -> Option<&'static str> {
    for (i, b) in bytes.iter().enumerate() {
        let mut words = FIRST_LETTERS[*b as usize];
        while words != 0 {
            let k = words.trailing_zeros() as usize;
            words &= words - 1;
            let w = TELL_WORDS[k];
            if bytes[i..].len() >= w.len()
                && bytes[i..i + w.len()].eq_ignore_ascii_case(w.as_bytes())
            {
                return Some(w);
            }
        }
    }
    None
}

pub const ALNUM: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
pub const LOWER_ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
pub const UPPER_B32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
pub const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
pub const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
pub const HEX: &[u8] = b"0123456789abcdef";

pub struct Gen {
    rng: ChaCha20Rng,
}

impl Gen {
    pub fn new(rng: ChaCha20Rng) -> Gen {
        Gen { rng }
    }

    pub fn rng(&mut self) -> &mut ChaCha20Rng {
        &mut self.rng
    }

    /// Uniform in `0..n` (n > 0), without modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let v = self.rng.next_u64();
            if v < zone {
                return v % n;
            }
        }
    }

    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below((hi - lo) as u64) as i64
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.rng.fill_bytes(&mut v);
        v
    }

    /// `n` characters from `alphabet`, re-drawn while a tell word appears.
    pub fn chars(&mut self, alphabet: &[u8], n: usize) -> String {
        loop {
            let s: String = (0..n)
                .map(|_| alphabet[self.below(alphabet.len() as u64) as usize] as char)
                .collect();
            if clean_random(&s) {
                return s;
            }
        }
    }

    pub fn alnum(&mut self, n: usize) -> String {
        self.chars(ALNUM, n)
    }

    pub fn hex(&mut self, n: usize) -> String {
        self.chars(HEX, n)
    }

    pub fn digits(&mut self, n: usize) -> String {
        // No leading zero: these are account numbers and ids.
        let mut s = self.chars(b"123456789", 1);
        s.push_str(&self.chars(b"0123456789", n.saturating_sub(1)));
        s
    }

    /// Base64 (standard, padded) of `n` random bytes, re-drawn while a tell word appears.
    pub fn b64(&mut self, n: usize) -> String {
        loop {
            let s = STANDARD.encode(self.bytes(n));
            if clean_random(&s) {
                return s;
            }
        }
    }

    pub fn b64url(&mut self, n: usize) -> String {
        loop {
            let s = URL_SAFE_NO_PAD.encode(self.bytes(n));
            if clean_random(&s) {
                return s;
            }
        }
    }

    pub fn uuid(&mut self) -> String {
        let mut b = self.bytes(16);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h = hex::encode(b);
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }

    /// A password a person picked: two words, digits and a symbol.
    pub fn human_password(&mut self) -> String {
        const WORDS: &[&str] = &[
            "Maple", "harbor", "Falcon", "quartz", "Winter", "copper", "Orbit", "violet", "Summit",
            "ember", "Lotus", "granite", "Pepper", "meadow", "Cobalt", "tundra", "Saffron",
            "willow", "Bishop", "cactus", "Juniper", "walnut", "Marble", "tiger", "Ranger",
            "pebble", "Sierra", "mango", "Nimbus", "zephyr", "Aurora", "biscuit",
        ];
        const SYMBOLS: &[&str] = &["!", "#", "$", "%", "&", "*", "?", "@", "."];
        let a = *self.pick(WORDS);
        let b = *self.pick(WORDS);
        let sep = *self.pick(&["", "-", "_", "."]);
        let n = self.digits(4);
        let sym = *self.pick(SYMBOLS);
        format!("{a}{sep}{b}{n}{sym}")
    }

    /// A password a password manager generated.
    pub fn strong_password(&mut self, n: usize) -> String {
        self.chars(
            b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789!#$%&*+-=?@^_",
            n,
        )
    }
}

/// Base62 with GitHub's digit order, fixed width (left-padded with '0').
fn base62_fixed(mut v: u64, width: usize) -> String {
    let mut out = vec![b'0'; width];
    for slot in out.iter_mut().rev() {
        *slot = ALNUM[(v % 62) as usize];
        v /= 62;
    }
    String::from_utf8(out).unwrap_or_default()
}

/// GitHub / npm token shape: prefix, 30 random base62 characters and a 6-character base62
/// CRC-32 checksum of those characters (what secret scanners validate offline).
pub fn checksummed_token(g: &mut Gen, prefix: &str) -> String {
    let body = g.alnum(30);
    let crc = crc32fast::hash(body.as_bytes());
    format!("{prefix}{body}{}", base62_fixed(crc as u64, 6))
}

/// True when the last six characters are the CRC-32 of the thirty before them.
pub fn checksum_ok(token: &str) -> bool {
    let Some(us) = token.find('_') else {
        return false;
    };
    let rest = &token[us + 1..];
    if rest.len() != 36 || !rest.is_ascii() {
        return false;
    }
    let (body, sum) = rest.split_at(30);
    base62_fixed(crc32fast::hash(body.as_bytes()) as u64, 6) == sum
}

/// `github_pat_` fine-grained token: 22 + `_` + 59 characters.
pub fn github_fine_grained(g: &mut Gen) -> String {
    format!("github_pat_11{}_{}", g.chars(UPPER_B32, 20), g.alnum(59))
}

pub fn aws_key_id(g: &mut Gen) -> String {
    format!("AKIA{}", g.chars(UPPER_B32, 16))
}

pub fn aws_secret(g: &mut Gen) -> String {
    g.chars(B64, 40)
}

pub fn slack_bot(g: &mut Gen) -> String {
    format!("xoxb-{}-{}-{}", g.digits(12), g.digits(13), g.alnum(24))
}

pub fn slack_session_cookie(g: &mut Gen) -> String {
    format!("xoxd-{}", g.chars(B64URL, 150).replace('-', "%2B"))
}

pub fn stripe_live(g: &mut Gen) -> String {
    format!("sk_live_51{}", g.alnum(97))
}

pub fn stripe_webhook(g: &mut Gen) -> String {
    format!("whsec_{}", g.alnum(32))
}

pub fn anthropic_api(g: &mut Gen) -> String {
    format!("sk-ant-api03-{}AA", g.chars(B64URL, 93))
}

pub fn anthropic_oauth(g: &mut Gen, kind: &str) -> String {
    format!("sk-ant-{kind}01-{}AA", g.chars(B64URL, 93))
}

pub fn openai_project(g: &mut Gen) -> String {
    format!(
        "sk-proj-{}T3BlbkFJ{}",
        g.chars(B64URL, 74),
        g.chars(B64URL, 74)
    )
}

pub fn gitlab_pat(g: &mut Gen) -> String {
    format!("glpat-{}", g.chars(B64URL, 20))
}

pub fn docker_pat(g: &mut Gen) -> String {
    format!("dckr_pat_{}", g.chars(B64URL, 27))
}

pub fn huggingface(g: &mut Gen) -> String {
    format!("hf_{}", g.chars(LETTERS, 34))
}

pub fn sendgrid(g: &mut Gen) -> String {
    format!("SG.{}.{}", g.chars(B64URL, 22), g.chars(B64URL, 43))
}

/// PyPI API token: `pypi-` + base64url of a version-2 macaroon for pypi.org.
pub fn pypi(g: &mut Gen) -> String {
    let id = g.uuid();
    let caveat = format!(
        "{{\"version\": 1, \"permissions\": \"user\", \"id\": \"{}\"}}",
        g.uuid()
    );
    let mut m = vec![0x02u8];
    field(&mut m, 1, b"pypi.org");
    field(
        &mut m,
        2,
        format!("{{\"nonce\": \"{}\"}}", &id[..32]).as_bytes(),
    );
    m.push(0);
    field(&mut m, 2, caveat.as_bytes());
    m.push(0);
    m.push(0);
    let sig = g.bytes(32);
    field(&mut m, 6, &sig);
    loop {
        let s = format!("pypi-{}", URL_SAFE_NO_PAD.encode(&m));
        if find_tell(s.as_bytes()).is_none() {
            return s;
        }
        // Astronomically rare: re-sign.
        let sig = g.bytes(32);
        let n = m.len();
        m[n - 32..].copy_from_slice(&sig);
    }
}

fn field(out: &mut Vec<u8>, kind: u8, data: &[u8]) {
    out.push(kind);
    let mut n = data.len();
    // Unsigned LEB128 length, as the macaroon v2 format uses.
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    }
    out.extend_from_slice(data);
}

/// A compact JWS with the given header and claims and a random 256-byte (RS256-sized) signature.
/// `nonce` names the claim that carries a random id (`aio`, `jti`); it is re-drawn, with a varying
/// length, until no encoded segment happens to spell a tell word.
pub fn jwt(
    g: &mut Gen,
    header: &serde_json::Value,
    claims: &serde_json::Value,
    nonce: &str,
) -> String {
    let h = URL_SAFE_NO_PAD.encode(header.to_string());
    let mut claims = claims.clone();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let n = 16 + g.below(3) as usize;
        if let Some(obj) = claims.as_object_mut() {
            obj.insert(nonce.to_string(), serde_json::Value::String(g.b64url(n)));
        }
        let c = URL_SAFE_NO_PAD.encode(claims.to_string());
        let t = format!("{h}.{c}.{}", g.b64url(256));
        // A tell in the fixed header cannot be fixed here; the caller's final check reports it.
        if find_tell(t.as_bytes()).is_none() || attempts >= 64 {
            return t;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Seed;

    fn g() -> Gen {
        Gen::new(Seed::from_bytes([3; 32]).rng("t"))
    }

    #[test]
    fn token_shapes() {
        let mut g = g();
        let t = checksummed_token(&mut g, "ghp_");
        assert_eq!(t.len(), 40);
        assert!(checksum_ok(&t), "{t}");
        let mut bad = t.clone().into_bytes();
        bad[10] = if bad[10] == b'a' { b'b' } else { b'a' };
        assert!(!checksum_ok(&String::from_utf8(bad).unwrap()));
        let k = aws_key_id(&mut g);
        assert_eq!(k.len(), 20);
        assert!(k.starts_with("AKIA"));
        assert_eq!(aws_secret(&mut g).len(), 40);
        assert_eq!(github_fine_grained(&mut g).len(), 93);
        assert_eq!(anthropic_api(&mut g).len(), 108);
        let p = pypi(&mut g);
        assert!(p.starts_with("pypi-AgEIcHlwaS5vcmc"), "{p}");
        let u = g.uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }

    #[test]
    fn tell_words_are_found_and_avoided() {
        assert_eq!(find_tell(b"xxSandBoxyy"), Some("sandbox"));
        assert_eq!(find_tell(b"nothing here"), None);
        assert!(
            !clean_random("xxLXCyy"),
            "an evasive payload's word in random text"
        );
        assert!(!clean_random("xxSandBoxyy"));
        assert!(clean_random("nothing here"));
        assert_eq!(find_tell(b"HONEYPOT"), Some("honeypot"));
        assert_eq!(find_tell(b"fak"), None);
        assert_eq!(find_tell(b"x-Fake"), Some("fake"));
        // Agrees with the plain search (every word, every window) on text dense in near misses.
        let naive = |b: &[u8]| {
            TELL_WORDS.iter().any(|w| {
                b.windows(w.len())
                    .any(|win| win.eq_ignore_ascii_case(w.as_bytes()))
            })
        };
        let mut g = g();
        for _ in 0..5000 {
            let s = g.chars(b"mockMOCKfaejilsandbxhnyptr", 12);
            assert_eq!(
                find_tell(s.as_bytes()).is_some(),
                naive(s.as_bytes()),
                "{s}"
            );
        }
        let mut hits = 0;
        for _ in 0..2000 {
            let s: String = (0..12).map(|_| *g.pick(b"mockfaejl") as char).collect();
            let found = find_tell(s.as_bytes());
            assert_eq!(found.is_some(), naive(s.as_bytes()), "{s}");
            hits += found.is_some() as usize;
        }
        assert!(hits > 0);
        for _ in 0..2000 {
            assert!(find_tell(g.chars(b"mockMOCK", 8).as_bytes()).is_none());
        }
    }
}
