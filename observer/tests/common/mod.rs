//! Test helpers: a byte-exact zip builder (so tests can write what no honest archiver writes) and
//! a deflate stream of zeros built without compressing anything.
#![allow(dead_code)]

/// One member as it will be stored.
#[derive(Clone)]
pub struct RawEntry {
    pub name: Vec<u8>,
    /// Stored payload (already compressed when `method` is 8).
    pub payload: Vec<u8>,
    pub method: u16,
    pub flags: u16,
    pub made_by: u16,
    pub external: u32,
    pub crc: u32,
    /// Declared uncompressed size.
    pub size: u32,
    pub extra: Vec<u8>,
    /// Name written into the local header when it should differ from the central one.
    pub local_name: Option<Vec<u8>>,
    /// Central-directory-only record pointing at this offset (no local header written).
    pub at: Option<u32>,
}

impl RawEntry {
    /// A stored regular file with Unix mode `0o100000 | perm`.
    pub fn file(name: &str, data: &[u8], perm: u32) -> Self {
        RawEntry {
            name: name.as_bytes().to_vec(),
            payload: data.to_vec(),
            method: 0,
            flags: 0x0800,
            made_by: (3 << 8) | 20,
            external: (0o100000 | perm) << 16,
            crc: crc32(data),
            size: data.len() as u32,
            extra: Vec::new(),
            local_name: None,
            at: None,
        }
    }
    pub fn dir(name: &str) -> Self {
        let mut e = Self::file(name, b"", 0o755);
        e.external = (0o040000 | 0o755) << 16;
        e
    }
    pub fn raw_name(mut self, name: &[u8]) -> Self {
        self.name = name.to_vec();
        self
    }
}

/// The local header and data of one entry.
pub fn local_record(e: &RawEntry) -> Vec<u8> {
    let mut out = Vec::new();
    let local_name = e.local_name.as_ref().unwrap_or(&e.name);
    out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
    out.extend_from_slice(&20u16.to_le_bytes());
    out.extend_from_slice(&e.flags.to_le_bytes());
    out.extend_from_slice(&e.method.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0x21, 0]); // time, date
    out.extend_from_slice(&e.crc.to_le_bytes());
    out.extend_from_slice(&(e.payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&e.size.to_le_bytes());
    out.extend_from_slice(&(local_name.len() as u16).to_le_bytes());
    out.extend_from_slice(&(e.extra.len() as u16).to_le_bytes());
    out.extend_from_slice(local_name);
    out.extend_from_slice(&e.extra);
    out.extend_from_slice(&e.payload);
    out
}

pub fn build_zip(entries: &[RawEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for e in entries {
        let offset = match e.at {
            Some(at) => at,
            None => {
                let at = out.len() as u32;
                out.extend(local_record(e));
                at
            }
        };
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&e.made_by.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&e.flags.to_le_bytes());
        central.extend_from_slice(&e.method.to_le_bytes());
        central.extend_from_slice(&[0, 0, 0x21, 0]);
        central.extend_from_slice(&e.crc.to_le_bytes());
        central.extend_from_slice(&(e.payload.len() as u32).to_le_bytes());
        central.extend_from_slice(&e.size.to_le_bytes());
        central.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        central.extend_from_slice(&(e.extra.len() as u16).to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes()); // comment
        central.extend_from_slice(&0u16.to_le_bytes()); // disk
        central.extend_from_slice(&0u16.to_le_bytes()); // internal attrs
        central.extend_from_slice(&e.external.to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(&e.name);
        central.extend_from_slice(&e.extra);
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A raw deflate stream (fixed Huffman, one block) that inflates to `1 + 258 * matches` zeros:
/// a literal zero, then `matches` copies of length 258 at distance 1. 13 bits per 258 bytes,
/// built directly, so a gigabyte bomb costs a few megabytes and no compression time.
pub fn deflated_zeros(matches: usize) -> (Vec<u8>, u64) {
    struct Bits {
        out: Vec<u8>,
        acc: u64,
        n: u32,
    }
    impl Bits {
        fn put(&mut self, v: u64, n: u32) {
            self.acc |= v << self.n;
            self.n += n;
            while self.n >= 8 {
                self.out.push(self.acc as u8);
                self.acc >>= 8;
                self.n -= 8;
            }
        }
        /// Huffman codes go most significant bit first.
        fn code(&mut self, code: u32, len: u32) {
            let mut r = 0u64;
            for i in 0..len {
                r |= (((code >> i) & 1) as u64) << (len - 1 - i);
            }
            self.put(r, len);
        }
    }
    let mut b = Bits {
        out: Vec::with_capacity(matches * 13 / 8 + 16),
        acc: 0,
        n: 0,
    };
    b.put(1, 1); // BFINAL
    b.put(1, 2); // BTYPE = fixed Huffman
    b.code(0x30, 8); // literal 0
    for _ in 0..matches {
        b.code(0xC5, 8); // length code 285 = 258
        b.code(0, 5); // distance code 0 = 1
    }
    b.code(0, 7); // end of block
    if b.n > 0 {
        let n = 8 - b.n;
        b.put(0, n);
    }
    (b.out, 1 + 258 * matches as u64)
}

/// A zip built with the `zip` crate's writer (honest archiver), members as (name, data, mode).
pub fn honest_zip(members: &[(&str, &[u8], u32)]) -> Vec<u8> {
    use std::io::Write;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data, mode) in members {
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(*mode);
        w.start_file(*name, opts).expect("start");
        w.write_all(data).expect("write");
    }
    w.finish().expect("finish").into_inner()
}

pub const SKILL: &[u8] =
    b"---\nname: demo\ndescription: A demo skill\n---\nRun `python3 scripts/run.py`.\n";

/// The limit a load ran into (panics on any other outcome).
pub fn limit_hit<T: std::fmt::Debug>(
    r: Result<T, observer::bundle::BundleError>,
) -> observer::bundle::LimitExceeded {
    match r {
        Err(observer::bundle::BundleError::Limit { limit, .. }) => limit,
        other => panic!("expected a limit error, got {other:?}"),
    }
}
