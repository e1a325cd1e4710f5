//! What a client speaks, from its first bytes (pure).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// A TLS record carrying a handshake (ClientHello).
    Tls,
    /// An HTTP/1.x request line or the HTTP/2 prior-knowledge preface.
    Http,
    /// Anything else: raw bytes, SSH banners, custom protocols.
    Other,
    /// Not enough bytes yet to tell.
    NeedMore,
}

const METHODS: &[&str] = &[
    "GET",
    "POST",
    "PUT",
    "DELETE",
    "HEAD",
    "OPTIONS",
    "PATCH",
    "CONNECT",
    "TRACE",
    "PRI",
    "PROPFIND",
    "PROPPATCH",
    "MKCOL",
    "COPY",
    "MOVE",
    "LOCK",
    "UNLOCK",
    "REPORT",
    "SEARCH",
];

/// Classifies the first bytes a client sent.
pub fn sniff(head: &[u8]) -> Proto {
    let Some(&first) = head.first() else {
        return Proto::NeedMore;
    };
    if first == 0x16 {
        return match head.get(1) {
            None => Proto::NeedMore,
            Some(3) => Proto::Tls,
            Some(_) => Proto::Other,
        };
    }
    if !first.is_ascii_uppercase() {
        return Proto::Other;
    }
    let token_len = head.iter().take_while(|c| c.is_ascii_uppercase()).count();
    match head.get(token_len) {
        None if token_len < 16 => Proto::NeedMore,
        Some(b' ') if METHODS.contains(&std::str::from_utf8(&head[..token_len]).unwrap_or("")) => {
            Proto::Http
        }
        _ => Proto::Other,
    }
}

/// Whether the bytes seen so far are a plausible HTTP/1.x request head (or the h2 preface).
/// An incomplete head is given the benefit of the doubt; a malformed one is not HTTP.
pub fn http_head_ok(head: &[u8]) -> bool {
    if head.starts_with(b"PRI * HTTP/2.0") {
        return true;
    }
    let mut headers = [httparse::EMPTY_HEADER; 128];
    match httparse::Request::new(&mut headers).parse(head) {
        Ok(_) | Err(httparse::Error::TooManyHeaders) => true,
        Err(_) => false,
    }
}

/// Splits `host:port` / `[v6]:port` (a CONNECT target).
pub fn split_authority(auth: &str, default_port: u16) -> (String, u16) {
    if let Some(rest) = auth.strip_prefix('[') {
        if let Some((h, p)) = rest.split_once(']') {
            let port = p
                .strip_prefix(':')
                .and_then(|p| p.parse().ok())
                .unwrap_or(default_port);
            return (h.to_string(), port);
        }
    }
    match auth.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h.to_string(), p.parse().unwrap_or(default_port)),
        _ => (auth.to_string(), default_port),
    }
}

/// A short printable preview of captured bytes (escaped, bounded).
pub fn preview(data: &[u8], max: usize) -> String {
    let mut s = String::new();
    for &b in data.iter().take(max) {
        match b {
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    if data.len() > max {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert_eq!(sniff(b"\x16\x03\x01\x02\x00"), Proto::Tls);
        assert_eq!(sniff(b"GET / HTTP/1.1\r\n"), Proto::Http);
        assert_eq!(sniff(b"CONNECT a:443 HTTP/1.1\r\n"), Proto::Http);
        assert_eq!(sniff(b"PRI * HTTP/2.0\r\n"), Proto::Http);
        assert_eq!(sniff(b"SSH-2.0-OpenSSH_9.6\r\n"), Proto::Other);
        assert_eq!(sniff(b"GETX / HTTP/1.1"), Proto::Other);
        assert_eq!(sniff(b"\x00\x01garbage"), Proto::Other);
        assert_eq!(sniff(b"GE"), Proto::NeedMore);
        assert_eq!(sniff(b""), Proto::NeedMore);
        assert_eq!(sniff(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"), Proto::Other);
    }

    #[test]
    fn http_heads() {
        assert!(http_head_ok(b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n"));
        assert!(http_head_ok(
            b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Le"
        ));
        assert!(http_head_ok(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
        assert!(!http_head_ok(b"GET \x00\x01secret\r\n\r\n"));
        assert!(!http_head_ok(b"GET /x HTTP/1.1\r\nbad header line\r\n\r\n"));
    }

    #[test]
    fn authorities() {
        assert_eq!(
            split_authority("example.com:8443", 443),
            ("example.com".into(), 8443)
        );
        assert_eq!(
            split_authority("[2001:db8::1]:22", 443),
            ("2001:db8::1".into(), 22)
        );
        assert_eq!(
            split_authority("example.com", 443),
            ("example.com".into(), 443)
        );
        assert_eq!(
            split_authority("example.com:junk", 443),
            ("example.com".into(), 443)
        );
    }

    #[test]
    fn preview_is_bounded_and_escaped() {
        assert_eq!(preview(b"SSH-2.0\r\n\x00", 100), "SSH-2.0\\r\\n\\x00");
        assert_eq!(preview(&[b'a'; 10], 4), "aaaa…");
    }
}
