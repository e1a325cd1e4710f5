//! WebSocket: accept the upgrade (so a client that exfiltrates over a socket gets to send), then
//! unmask the client's frames so their payload can be searched.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Whether the request asks for a WebSocket upgrade; returns the client's key.
pub fn upgrade_key(headers: &[(String, String)]) -> Option<String> {
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.trim())
    };
    let upgrade = get("upgrade")?.eq_ignore_ascii_case("websocket");
    let key = get("sec-websocket-key")?;
    (upgrade && !key.is_empty() && key.len() < 128).then(|| key.to_string())
}

/// `Sec-WebSocket-Accept` for a key (RFC 6455 §4.2.2).
pub fn accept_value(key: &str) -> String {
    let digest = sha1_smol(format!("{key}{GUID}").as_bytes());
    STANDARD.encode(digest)
}

/// The payload of every data frame (text, binary, continuation) in `stream`, unmasked, up to
/// `max` bytes, stopping at a close frame or at bytes that are not a frame (those are appended
/// as they are, so nothing sent is lost to a malformed frame).
pub fn payloads(stream: &[u8], max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < stream.len() && out.len() < max {
        let Some((opcode, start, len, mask)) = frame_header(&stream[i..]) else {
            out.extend_from_slice(&stream[i..stream.len().min(i + max - out.len())]);
            break;
        };
        let begin = i + start;
        let end = begin.saturating_add(len).min(stream.len());
        if opcode == 8 {
            break;
        }
        if matches!(opcode, 0..=2) {
            for (k, &b) in stream[begin..end].iter().enumerate() {
                if out.len() >= max {
                    break;
                }
                out.push(match mask {
                    Some(m) => b ^ m[k % 4],
                    None => b,
                });
            }
        }
        i = end;
    }
    out
}

/// (opcode, header length, payload length, masking key).
fn frame_header(b: &[u8]) -> Option<(u8, usize, usize, Option<[u8; 4]>)> {
    let (&b0, &b1) = (b.first()?, b.get(1)?);
    if b0 & 0x70 != 0 {
        return None; // reserved bits: not a frame we understand
    }
    let opcode = b0 & 0x0f;
    let masked = b1 & 0x80 != 0;
    let (len, mut at) = match b1 & 0x7f {
        126 => (u16::from_be_bytes([*b.get(2)?, *b.get(3)?]) as usize, 4),
        127 => (
            usize::try_from(u64::from_be_bytes(b.get(2..10)?.try_into().ok()?)).ok()?,
            10,
        ),
        n => (n as usize, 2),
    };
    let mask = if masked {
        let m: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        at += 4;
        Some(m)
    } else {
        None
    };
    Some((opcode, at, len, mask))
}

/// SHA-1 for the handshake only (not for security): a small implementation avoids a
/// dependency for one legacy hash.
fn sha1_smol(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for chunk in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for t in 0..16 {
            w[t] = u32::from_be_bytes([
                chunk[4 * t],
                chunk[4 * t + 1],
                chunk[4 * t + 2],
                chunk[4 * t + 3],
            ]);
        }
        for t in 16..80 {
            w[t] = (w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (t, &wt) in w.iter().enumerate() {
            let (f, k) = match t {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let tmp = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(wt);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = tmp;
        }
        for (x, v) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(v);
        }
    }
    let mut out = [0u8; 20];
    for (i, v) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&v.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6455_handshake_example() {
        assert_eq!(
            accept_value("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn masked_frames_are_unmasked_and_joined() {
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        let frame = |op: u8, fin: bool, payload: &[u8]| {
            let mut f = vec![
                (if fin { 0x80 } else { 0 }) | op,
                0x80 | payload.len() as u8,
            ];
            f.extend_from_slice(&mask);
            f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
            f
        };
        let mut s = frame(1, false, b"Hel");
        s.extend(frame(0, true, b"lo"));
        s.extend(frame(9, true, b"ping")); // control frames are not data
        s.extend(frame(2, true, b"!"));
        s.extend(frame(8, true, b""));
        s.extend(b"after close");
        assert_eq!(payloads(&s, 1000), b"Hello!");
        assert_eq!(payloads(&s, 3), b"Hel");
        // Not a frame at all: kept as sent.
        assert_eq!(payloads(b"\xffjunk", 100), b"\xffjunk");
        // A length that claims more than was sent is cut at what arrived.
        assert_eq!(
            payloads(
                &[0x82, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2],
                100
            ),
            vec![1, 2]
        );
    }

    #[test]
    fn upgrade_detection() {
        let h = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            upgrade_key(&h(&[
                ("Upgrade", "websocket"),
                ("Sec-WebSocket-Key", "abc")
            ]))
            .as_deref(),
            Some("abc")
        );
        assert!(upgrade_key(&h(&[("Upgrade", "h2c"), ("Sec-WebSocket-Key", "abc")])).is_none());
        assert!(upgrade_key(&h(&[("Upgrade", "websocket")])).is_none());
    }
}
