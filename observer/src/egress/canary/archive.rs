//! Decompressors and archive walkers, each bounded by an output cap. Partial output (a truncated
//! or corrupt stream) is still returned: what decoded before the error is evidence too.

use super::classify::flag;
use std::io::{BufReader, Read, Write};

/// Output of one decompression attempt.
pub struct Inflated {
    pub data: Vec<u8>,
    /// The cap was reached: more output was available (a bomb or just a big stream).
    pub capped: bool,
}

fn read_capped<R: Read>(r: R, cap: usize, hint: usize) -> Inflated {
    let mut data = Vec::with_capacity(hint.saturating_mul(4).min(cap).min(64 << 20));
    // Errors end the stream; the bytes before them are kept.
    let _ = r.take(cap as u64 + 1).read_to_end(&mut data);
    let capped = data.len() > cap;
    data.truncate(cap);
    Inflated { data, capped }
}

/// A writer that refuses bytes past its cap (for decoders that push output).
struct CapWriter {
    data: Vec<u8>,
    cap: usize,
    capped: bool,
}

impl Write for CapWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.cap - self.data.len();
        if room == 0 {
            self.capped = true;
            return Err(std::io::Error::other("output cap"));
        }
        let n = room.min(buf.len());
        self.data.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Compression formats, by name as they appear in decoding chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Gzip,
    Zlib,
    Deflate,
    Brotli,
    Zstd,
    Bzip2,
    Xz,
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zlib => "zlib",
            Codec::Deflate => "deflate",
            Codec::Brotli => "brotli",
            Codec::Zstd => "zstd",
            Codec::Bzip2 => "bzip2",
            Codec::Xz => "xz",
        }
    }

    /// The suffix a tar inside this codec is known by (`tar.gz`).
    pub fn tar_suffix(self) -> &'static str {
        match self {
            Codec::Gzip => "gz",
            Codec::Zlib => "zlib",
            Codec::Deflate => "deflate",
            Codec::Brotli => "br",
            Codec::Zstd => "zst",
            Codec::Bzip2 => "bz2",
            Codec::Xz => "xz",
        }
    }

    pub fn from_content_encoding(v: &str) -> Option<Codec> {
        match v.trim().to_ascii_lowercase().as_str() {
            "gzip" | "x-gzip" => Some(Codec::Gzip),
            "deflate" => Some(Codec::Zlib),
            "br" => Some(Codec::Brotli),
            "zstd" => Some(Codec::Zstd),
            "bzip2" => Some(Codec::Bzip2),
            "xz" => Some(Codec::Xz),
            _ => None,
        }
    }

    pub fn decompress(self, data: &[u8], cap: usize) -> Inflated {
        match self {
            Codec::Gzip => read_capped(flate2::bufread::MultiGzDecoder::new(data), cap, data.len()),
            Codec::Zlib => read_capped(flate2::bufread::ZlibDecoder::new(data), cap, data.len()),
            Codec::Deflate => read_capped(flate2::bufread::DeflateDecoder::new(data), cap, 0),
            Codec::Brotli => {
                read_capped(brotli_decompressor::Decompressor::new(data, 4096), cap, 0)
            }
            Codec::Zstd => match ruzstd::decoding::StreamingDecoder::new(data) {
                Ok(d) => read_capped(d, cap, data.len()),
                Err(_) => Inflated {
                    data: Vec::new(),
                    capped: false,
                },
            },
            Codec::Bzip2 => read_capped(bzip2::bufread::MultiBzDecoder::new(data), cap, data.len()),
            Codec::Xz => {
                let mut w = CapWriter {
                    data: Vec::new(),
                    cap,
                    capped: false,
                };
                let _ = lzma_rs::xz_decompress(&mut BufReader::new(data), &mut w);
                Inflated {
                    data: w.data,
                    capped: w.capped,
                }
            }
        }
    }
}

/// Where compressed streams (by magic number) start, at most `max` per codec, and whether a
/// zip local header occurs. One `memchr3` pass over bytes that are rare in text (0x1f starts
/// gzip, 0xfd starts xz and ends zstd's magic, 0x03 is inside zip's `PK\3\4`), plus a
/// substring search for bzip2's block magic; each skipped when `seen` (from the survey pass)
/// says the buffer has none of the bytes it needs.
pub fn magic_offsets(data: &[u8], max: usize, seen: u8) -> (Vec<(Codec, usize)>, bool) {
    let mut out = Vec::new();
    let mut counts = [0usize; 4];
    let mut zip = false;
    let mut push = |out: &mut Vec<(Codec, usize)>, slot: usize, codec: Codec, at: usize| {
        if counts[slot] < max {
            counts[slot] += 1;
            out.push((codec, at));
        }
    };
    let at_is = |at: usize, magic: &[u8]| data.get(at..at + magic.len()) == Some(magic);
    let any = |bytes: &[u8]| bytes.iter().any(|&b| seen & flag(b) != 0);
    let starts = if any(&[0x1f, 0xfd, 0x03]) { data } else { &[] };
    for i in memchr::memchr3_iter(0x1f, 0xfd, 0x03, starts) {
        match data[i] {
            0x1f if at_is(i, &[0x1f, 0x8b, 0x08]) => push(&mut out, 0, Codec::Gzip, i),
            0xfd if at_is(i, &[0xfd, b'7', b'z', b'X', b'Z', 0x00]) => {
                push(&mut out, 2, Codec::Xz, i)
            }
            0xfd if i >= 3 && at_is(i - 3, &[0x28, 0xb5, 0x2f, 0xfd]) => {
                push(&mut out, 1, Codec::Zstd, i - 3)
            }
            0x03 if i >= 2 && at_is(i - 2, b"PK\x03\x04") => zip = true,
            _ => {}
        }
    }
    let blocks = if any(b"&") { data } else { &[] };
    for i in memchr::memmem::find_iter(blocks, &[0x41, 0x59, 0x26, 0x53, 0x59]) {
        // "BZh" + level + "1AY&SY"
        if i >= 5
            && data[i - 5..i - 2] == *b"BZh"
            && (b'1'..=b'9').contains(&data[i - 2])
            && data[i - 1] == 0x31
        {
            push(&mut out, 3, Codec::Bzip2, i - 5);
        }
    }
    // zlib has only a 2-byte header: accept it at the start only, with a valid check value.
    if data.len() > 2
        && data[0] & 0x0f == 8
        && (u16::from(data[0]) << 8 | u16::from(data[1])) % 31 == 0
    {
        out.push((Codec::Zlib, 0));
    }
    (out, zip)
}

/// One member of a zip or tar archive.
pub struct Member {
    pub name: Vec<u8>,
    pub data: Vec<u8>,
    pub capped: bool,
}

fn le16(d: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_le_bytes(d.get(at..at + 2)?.try_into().ok()?) as usize)
}
fn le32(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}
fn le64(d: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(d.get(at..at + 8)?.try_into().ok()?))
}

/// Walks zip local file headers from each `PK\3\4` (not the central directory, which an attacker
/// can corrupt or omit while the data stays readable). At most `max_members`.
pub fn zip_members(data: &[u8], cap: usize, max_members: usize) -> Vec<Member> {
    let mut out = Vec::new();
    let mut pos = 0;
    while out.len() < max_members {
        let Some(p) = memchr::memmem::find(&data[pos..], b"PK\x03\x04") else {
            break;
        };
        let at = pos + p;
        match zip_entry(data, at, cap) {
            Some((m, next)) => {
                out.push(m);
                pos = next.max(at + 4);
            }
            None => pos = at + 4,
        }
        if pos >= data.len() {
            break;
        }
    }
    out
}

fn zip_entry(d: &[u8], at: usize, cap: usize) -> Option<(Member, usize)> {
    let flags = le16(d, at + 6)?;
    let method = le16(d, at + 8)?;
    let mut csize = u64::from(le32(d, at + 18)?);
    let nlen = le16(d, at + 26)?;
    let xlen = le16(d, at + 28)?;
    let name = d.get(at + 30..at + 30 + nlen)?.to_vec();
    let extra = d.get(at + 30 + nlen..at + 30 + nlen + xlen)?;
    // zip64: sizes live in extra field 0x0001.
    if csize == 0xffff_ffff {
        let mut e = 0;
        while e + 4 <= extra.len() {
            let (id, len) = (le16(extra, e)?, le16(extra, e + 2)?);
            if id == 1 {
                csize = le64(extra, e + 12).unwrap_or(csize);
            }
            e += 4 + len;
        }
    }
    let start = at + 30 + nlen + xlen;
    let rest = d.get(start..)?;
    // Sizes unknown (data descriptor) or lying: read to the end and let the codec stop itself.
    let body = if flags & 8 != 0 || csize == 0 || csize as usize > rest.len() {
        rest
    } else {
        &rest[..csize as usize]
    };
    let inflated = match method {
        0 => {
            let end = if flags & 8 != 0 {
                body.windows(4)
                    .position(|w| w == b"PK\x07\x08" || w == b"PK\x03\x04")
                    .unwrap_or(body.len())
            } else {
                body.len()
            };
            let n = end.min(cap);
            Inflated {
                data: body[..n].to_vec(),
                capped: end > cap,
            }
        }
        8 => Codec::Deflate.decompress(body, cap),
        12 => Codec::Bzip2.decompress(body, cap),
        93 => Codec::Zstd.decompress(body, cap),
        95 => Codec::Xz.decompress(body, cap),
        _ => Inflated {
            data: body[..body.len().min(cap)].to_vec(),
            capped: false,
        },
    };
    let next = if flags & 8 != 0 {
        start + 1
    } else {
        start + body.len()
    };
    Some((
        Member {
            name,
            data: inflated.data,
            capped: inflated.capped,
        },
        next,
    ))
}

fn octal(field: &[u8]) -> Option<u64> {
    // GNU base-256 for large sizes.
    if field.first().is_some_and(|&b| b & 0x80 != 0) {
        let mut v: u64 = u64::from(field[0] & 0x7f);
        for &b in &field[1..] {
            v = v.checked_mul(256)?.checked_add(u64::from(b))?;
        }
        return Some(v);
    }
    let s: Vec<u8> = field
        .iter()
        .copied()
        .take_while(|&c| c != 0 && c != b' ')
        .skip_while(|&c| c == b' ')
        .collect();
    if s.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(std::str::from_utf8(&s).ok()?, 8).ok()
}

/// A tar header block: the checksum over the block must match.
pub fn is_tar(data: &[u8]) -> bool {
    let Some(h) = data.get(..512) else {
        return false;
    };
    let Some(want) = octal(&h[148..156]) else {
        return false;
    };
    let sum: u64 = h
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u64::from(b)
            }
        })
        .sum();
    sum == want && h.iter().any(|&b| b != 0)
}

/// Members of a tar stream (bounded). Member data is stored verbatim, so this only names things;
/// the bytes were already visible to the raw search.
pub fn tar_members(data: &[u8], cap: usize, max_members: usize) -> Vec<Member> {
    let mut out = Vec::new();
    let mut pos = 0;
    while out.len() < max_members && pos + 512 <= data.len() && is_tar(&data[pos..]) {
        let h = &data[pos..pos + 512];
        let Some(size) = octal(&h[124..136]) else {
            break;
        };
        let name: Vec<u8> = h[..100].iter().copied().take_while(|&c| c != 0).collect();
        let start = pos + 512;
        let avail = data.len().saturating_sub(start);
        let take = (size.min(avail as u64) as usize).min(cap);
        out.push(Member {
            name,
            data: data[start..start + take].to_vec(),
            capped: size as usize > take && take == cap,
        });
        let blocks = size.div_ceil(512).saturating_mul(512);
        pos = match start.checked_add(blocks as usize) {
            Some(p) => p,
            None => break,
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_cap_reports_capping() {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&vec![0u8; 100_000]).unwrap();
        let gz = e.finish().unwrap();
        let r = Codec::Gzip.decompress(&gz, 1000);
        assert!(r.capped);
        assert_eq!(r.data.len(), 1000);
        let r = Codec::Gzip.decompress(&gz, 1_000_000);
        assert!(!r.capped);
        assert_eq!(r.data.len(), 100_000);
    }

    #[test]
    fn truncated_stream_keeps_prefix() {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(b"the quick brown fox jumps over the lazy dog, several times over")
            .unwrap();
        let gz = e.finish().unwrap();
        let r = Codec::Gzip.decompress(&gz[..gz.len() - 8], 1000);
        assert!(r.data.starts_with(b"the quick"));
    }

    #[test]
    fn garbage_never_panics() {
        let mut x: u32 = 12345;
        for len in [0usize, 1, 3, 17, 512, 4096] {
            let junk: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            for c in [
                Codec::Gzip,
                Codec::Zlib,
                Codec::Deflate,
                Codec::Brotli,
                Codec::Zstd,
                Codec::Bzip2,
                Codec::Xz,
            ] {
                let _ = c.decompress(&junk, 1 << 16);
            }
            let _ = zip_members(&junk, 1 << 16, 10);
            let _ = tar_members(&junk, 1 << 16, 10);
        }
    }
}
