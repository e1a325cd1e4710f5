//! Text-level decoders: base64/base32/hex (the runs are found in `runs.rs`), percent/form
//! encoding, JSON string escapes, quoted-printable, multipart bodies. Every decoder is lenient
//! (attackers send sloppy encodings) and returns `None` when the input has nothing to undo.

fn b64_val(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    }
}

/// Decodes base64 in either alphabet, skipping line breaks, tolerating missing padding; decoding
/// stops at the first `=` (padding) and restarts after it, so concatenated chunks decode too.
/// `skip` characters are dropped first (to try the other 4-character alignments).
pub fn b64_decode(run: &[u8], skip: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(run.len() * 3 / 4 + 3);
    let mut acc: u32 = 0;
    let mut nbits = 0u32;
    let mut skipped = 0;
    for &c in run {
        if c == b'=' {
            acc = 0;
            nbits = 0;
            continue;
        }
        let Some(v) = b64_val(c) else { continue };
        if skipped < skip {
            skipped += 1;
            continue;
        }
        acc = (acc << 6) | u32::from(v);
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((acc >> nbits) as u8);
        }
    }
    out
}

/// Case-insensitive RFC 4648 base32.
pub fn b32_decode(run: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(run.len() * 5 / 8 + 1);
    let mut acc: u64 = 0;
    let mut nbits = 0u32;
    for &c in run {
        let v = match c.to_ascii_uppercase() {
            u @ b'A'..=b'Z' => u - b'A',
            d @ b'2'..=b'7' => d - b'2' + 26,
            _ => continue,
        };
        acc = (acc << 5) | u64::from(v);
        nbits += 5;
        if nbits >= 8 {
            nbits -= 8;
            out.push((acc >> nbits) as u8);
        }
    }
    out
}

fn hexval(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Hex pairs from `skip` on (0 or 1, for a run that starts mid-byte).
pub fn hex_decode(run: &[u8], skip: usize) -> Vec<u8> {
    run.get(skip..)
        .unwrap_or_default()
        .chunks_exact(2)
        .filter_map(|p| Some(hexval(p[0])? << 4 | hexval(p[1])?))
        .collect()
}

fn has_pct_escape(data: &[u8]) -> bool {
    memchr_iter(b'%', data).any(|i| {
        data.len() > i + 2 && hexval(data[i + 1]).is_some() && hexval(data[i + 2]).is_some()
    })
}

fn memchr_iter(needle: u8, data: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memchr::memchr_iter(needle, data)
}

/// Percent-decoding with form semantics (`+` is a space). `None` when there is no `%XX`.
pub fn url_decode(data: &[u8]) -> Option<Vec<u8>> {
    if !has_pct_escape(data) {
        return None;
    }
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        let c = data[i];
        if c == b'%' && i + 2 < data.len() {
            if let (Some(h), Some(l)) = (hexval(data[i + 1]), hexval(data[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(if c == b'+' { b' ' } else { c });
        i += 1;
    }
    Some(out)
}

/// JSON string escapes (`\uXXXX` with surrogate pairs, `\n`, `\/`, …). Returns the UTF-8 reading
/// and, when escapes name code points 0x80–0xFF, also the Latin-1 reading (binary smuggled as
/// `\u00XX`).
pub fn json_unescape(data: &[u8]) -> Vec<Vec<u8>> {
    let has_escape = memchr_iter(b'\\', data).any(|i| {
        matches!(
            data.get(i + 1),
            Some(b'u' | b'"' | b'\\' | b'/' | b'n' | b'r' | b't' | b'b' | b'f')
        )
    });
    if !has_escape {
        return Vec::new();
    }
    let mut utf8 = Vec::with_capacity(data.len());
    let mut latin1 = Vec::with_capacity(data.len());
    let mut high_latin = false;
    let mut i = 0;
    let hex4 = |s: &[u8]| -> Option<u32> {
        if s.len() < 4 {
            return None;
        }
        let mut v = 0u32;
        for &c in &s[..4] {
            v = v << 4 | u32::from(hexval(c)?);
        }
        Some(v)
    };
    while i < data.len() {
        let c = data[i];
        if c != b'\\' || i + 1 >= data.len() {
            utf8.push(c);
            latin1.push(c);
            i += 1;
            continue;
        }
        let simple = match data[i + 1] {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            b'/' => Some(b'/'),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'b' => Some(8),
            b'f' => Some(12),
            _ => None,
        };
        if let Some(s) = simple {
            utf8.push(s);
            latin1.push(s);
            i += 2;
            continue;
        }
        if data[i + 1] == b'u' {
            if let Some(mut cp) = hex4(&data[i + 2..]) {
                let mut used = 6;
                if (0xD800..0xDC00).contains(&cp)
                    && data.get(i + 6) == Some(&b'\\')
                    && data.get(i + 7) == Some(&b'u')
                {
                    if let Some(lo) = hex4(&data[i + 8..]) {
                        if (0xDC00..0xE000).contains(&lo) {
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                            used = 12;
                        }
                    }
                }
                if cp < 0x100 {
                    latin1.push(cp as u8);
                    high_latin |= cp >= 0x80;
                }
                let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                let mut buf = [0u8; 4];
                utf8.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                i += used;
                continue;
            }
        }
        utf8.push(c);
        latin1.push(c);
        i += 1;
    }
    let mut out = vec![utf8];
    if high_latin {
        out.push(latin1);
    }
    out
}

/// Quoted-printable (`=XX`, soft line breaks). `None` without any QP escape.
pub fn qp_decode(data: &[u8]) -> Option<Vec<u8>> {
    let is_escape = |i: usize| -> bool {
        match (data.get(i + 1), data.get(i + 2)) {
            (Some(b'\n'), _) | (Some(b'\r'), Some(b'\n')) => true,
            (Some(&h), Some(&l)) => {
                (h.is_ascii_digit() || (b'A'..=b'F').contains(&h))
                    && (l.is_ascii_digit() || (b'A'..=b'F').contains(&l))
            }
            _ => false,
        }
    };
    if !memchr_iter(b'=', data).any(is_escape) {
        return None;
    }
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        if data[i] == b'=' {
            match (data.get(i + 1), data.get(i + 2)) {
                (Some(b'\n'), _) => {
                    i += 2;
                    continue;
                }
                (Some(b'\r'), Some(b'\n')) => {
                    i += 3;
                    continue;
                }
                (Some(&h), Some(&l)) => {
                    if let (Some(h), Some(l)) = (hexval(h), hexval(l)) {
                        out.push(h << 4 | l);
                        i += 3;
                        continue;
                    }
                }
                _ => {}
            }
        }
        out.push(data[i]);
        i += 1;
    }
    Some(out)
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || from >= hay.len() {
        return None;
    }
    memchr::memmem::find(&hay[from..], needle).map(|p| p + from)
}

/// Splits a multipart body into its parts (each part's body, headers dropped; the headers are
/// returned as separate entries because file names and field names can carry data too). The
/// boundary is the first line when it starts with `--`.
pub fn multipart_parts(data: &[u8], max_parts: usize) -> Vec<&[u8]> {
    let start = data
        .iter()
        .position(|&c| c != b'\r' && c != b'\n')
        .unwrap_or(data.len());
    let body = &data[start..];
    if !body.starts_with(b"--") {
        return Vec::new();
    }
    let line_end = body.iter().position(|&c| c == b'\n').unwrap_or(body.len());
    let boundary = body[..line_end]
        .strip_suffix(b"\r")
        .unwrap_or(&body[..line_end]);
    if boundary.len() < 3
        || boundary.len() > 200
        || boundary.iter().any(|c| c.is_ascii_whitespace())
    {
        return Vec::new();
    }
    let mut parts = Vec::new();
    let mut pos = line_end + 1;
    while pos < body.len() && parts.len() < max_parts {
        let next = find(body, boundary, pos).unwrap_or(body.len());
        let mut part = &body[pos..next];
        // The CRLF before the next boundary belongs to the delimiter.
        part = part
            .strip_suffix(b"\r\n")
            .or_else(|| part.strip_suffix(b"\n"))
            .unwrap_or(part);
        let split = find(part, b"\r\n\r\n", 0)
            .map(|p| (p, 4))
            .or_else(|| find(part, b"\n\n", 0).map(|p| (p, 2)));
        match split {
            Some((p, n)) => {
                parts.push(&part[..p]);
                parts.push(&part[p + n..]);
            }
            None => parts.push(part),
        }
        if next >= body.len() || body[next + boundary.len()..].starts_with(b"--") {
            break;
        }
        pos = find(body, b"\n", next).map_or(body.len(), |p| p + 1);
    }
    parts
}

/// Fraction of bytes that are not printable ASCII or common whitespace, over a prefix.
pub fn looks_binary(data: &[u8]) -> bool {
    let head = &data[..data.len().min(512)];
    if head.is_empty() {
        return false;
    }
    let odd = head
        .iter()
        .filter(|&&c| !(c == b'\n' || c == b'\r' || c == b'\t' || (0x20..0x7f).contains(&c)))
        .count();
    odd * 5 > head.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_json_qp() {
        assert_eq!(url_decode(b"a%41b+c").unwrap(), b"aAb c");
        assert!(url_decode(b"100% sure").is_none());
        assert_eq!(
            json_unescape(br#"\u0041\"\ud83d\ude00"#)[0],
            "A\"😀".as_bytes()
        );
        assert_eq!(json_unescape(br#"\u00e9"#)[1], vec![0xe9]);
        assert_eq!(qp_decode(b"a=3Db=\r\nc").unwrap(), b"a=bc");
        assert!(qp_decode(b"a=b").is_none());
    }

    #[test]
    fn multipart_split() {
        let body = b"--XyZ123\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nvalue one\r\n--XyZ123\r\nContent-Disposition: form-data; name=\"g\"\r\n\r\nsecond\r\n--XyZ123--\r\n";
        let parts = multipart_parts(body, 10);
        assert!(parts.contains(&&b"value one"[..]));
        assert!(parts.contains(&&b"second"[..]));
        assert!(multipart_parts(b"not multipart", 10).is_empty());
    }
}
