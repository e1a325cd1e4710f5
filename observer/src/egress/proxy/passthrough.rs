//! `--passthrough HOST[:PORT]`: the only way a request leaves the machine. A rule names a host
//! (exact, or `*.suffix` for any subdomain) and optionally a port; without a port only 80 and 443
//! match. [`DirectUpstream`] re-issues a matching HTTP request from the supervisor (which lives
//! in the host's network namespace, so a host-loopback service is reachable too) to exactly the
//! named host and port, checking the rules again on the URL it connects to: whatever the skill
//! writes in `Host`, absolute URIs or `CONNECT`, nothing else is ever connected to, and non-HTTP
//! bytes are never forwarded (they stay raw streams).

use super::http::{ForwardRequest, ForwardResponse, Upstream};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PassthroughError {
    #[error("passthrough rule {0:?}: empty host")]
    Empty(String),
    #[error("passthrough rule {0:?}: a host name or address, optionally with :PORT (no scheme, path, user or wildcard other than a leading `*.`)")]
    Malformed(String),
    #[error("passthrough rule {0:?}: port must be 1-65535")]
    Port(String),
}

/// One `--passthrough` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassthroughRule {
    /// Lowercase, without a trailing dot or IPv6 brackets; for a wildcard, the suffix.
    host: String,
    wildcard: bool,
    port: Option<u16>,
}

/// Ports a rule without `:PORT` allows.
const DEFAULT_PORTS: [u16; 2] = [80, 443];

impl PassthroughRule {
    pub fn parse(s: &str) -> Result<Self, PassthroughError> {
        let bad = || PassthroughError::Malformed(s.to_string());
        let t = s.trim();
        if t.is_empty() {
            return Err(PassthroughError::Empty(s.to_string()));
        }
        let (host, port) = split_host_port(t).ok_or_else(bad)?;
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(PassthroughError::Port(s.to_string())),
            },
        };
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let (host, wildcard) = match host.strip_prefix("*.") {
            Some(rest) => (rest.to_string(), true),
            None => (host, false),
        };
        let ip = host.parse::<std::net::IpAddr>().is_ok();
        let name_ok = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
            && !host.starts_with('.')
            && !host.contains("..");
        if host.is_empty() {
            return Err(PassthroughError::Empty(s.to_string()));
        }
        let literal_ok = ip && !wildcard;
        if !literal_ok && !name_ok {
            return Err(bad());
        }
        Ok(PassthroughRule {
            host,
            wildcard,
            port,
        })
    }

    /// Does a request to `host:port` match? `host` as written by the client (any case, maybe a
    /// trailing dot or IPv6 brackets).
    pub fn matches(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        };
        port_ok && self.matches_host(host)
    }

    /// Does `host` (as in [`Self::matches`]) match, whatever the port (a DNS lookup has none)?
    pub fn matches_host(&self, host: &str) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        if self.wildcard {
            host.len() > self.host.len() + 1
                && host.ends_with(&self.host)
                && host.as_bytes()[host.len() - self.host.len() - 1] == b'.'
        } else {
            host == self.host
        }
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`, or a bare IPv6 address. `None` for anything with a
/// scheme, path, query or userinfo.
fn split_host_port(s: &str) -> Option<(&str, Option<&str>)> {
    if s.contains(['/', '@', '?', '#', ' ', '\\']) {
        return None;
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (h, tail) = rest.split_once(']')?;
        return match tail {
            "" => Some((h, None)),
            t => Some((h, Some(t.strip_prefix(':')?))),
        };
    }
    if s.matches(':').count() > 1 {
        // A bare IPv6 address: no port possible without brackets.
        return s.parse::<std::net::Ipv6Addr>().is_ok().then_some((s, None));
    }
    Some(match s.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    })
}

/// Parses every rule (for the CLI: the first bad one is the error).
pub fn parse_rules(list: &[String]) -> Result<Vec<PassthroughRule>, PassthroughError> {
    list.iter().map(|s| PassthroughRule::parse(s)).collect()
}

/// Does any rule (unparsable entries match nothing) allow `host:port`?
pub fn allows(list: &[String], host: &str, port: u16) -> bool {
    list.iter()
        .filter_map(|s| PassthroughRule::parse(s).ok())
        .any(|r| r.matches(host, port))
}

/// Where a forwarded request goes, from its URL alone: `(https, host, port)`. `None` for anything
/// but an absolute `http`/`https` URL with a plain authority (no userinfo).
pub fn target_of(url: &str) -> Option<(bool, String, u16)> {
    let uri: hyper::Uri = url.parse().ok()?;
    let https = match uri.scheme_str()? {
        "http" => false,
        "https" => true,
        _ => return None,
    };
    let auth = uri.authority()?;
    if auth.as_str().contains('@') {
        return None;
    }
    let host = auth.host().trim_start_matches('[').trim_end_matches(']');
    let port = auth.port_u16().unwrap_or(if https { 443 } else { 80 });
    Some((https, host.to_string(), port))
}

#[derive(Debug, thiserror::Error)]
enum ForwardError {
    #[error("{0} is not an http(s) URL this proxy forwards")]
    Url(String),
    #[error("{0}:{1} is not listed with --passthrough")]
    NotListed(String, u16),
    #[error("resolving {0}: {1}")]
    Resolve(String, std::io::Error),
    #[error("connecting to {0}: {1}")]
    Connect(String, String),
    #[error("TLS to {0}: {1}")]
    Tls(String, String),
    #[error("HTTP exchange with {0}: {1}")]
    Http(String, String),
}

/// Headers that belong to one hop and are not re-sent.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Forwards to the listed hosts over the supervisor's own network (HTTP/1.1; HTTPS verified
/// against the host's system trust store, not the run's CA).
pub struct DirectUpstream {
    rules: Vec<String>,
    tls: tokio_rustls::TlsConnector,
    timeout: Duration,
    max_response: usize,
}

/// The host's CA bundle (Debian/Ubuntu, Fedora/RHEL, Alpine, SUSE locations).
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

impl DirectUpstream {
    /// `rules` as given to `--passthrough` (checked again on every request).
    pub fn new(rules: Vec<String>) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        for path in SYSTEM_BUNDLES {
            if let Ok(iter) = CertificateDer::pem_file_iter(path) {
                for cert in iter.flatten() {
                    let _ = roots.add(cert);
                }
                break;
            }
        }
        Self::with_roots(rules, roots)
    }

    pub fn with_roots(rules: Vec<String>, roots: rustls::RootCertStore) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map(|b| b.with_root_certificates(roots).with_no_client_auth())
            .map(|mut c| {
                c.alpn_protocols = vec![b"http/1.1".to_vec()];
                Arc::new(c)
            });
        let cfg = match cfg {
            Ok(c) => c,
            // ring always supports the default versions; keep a config that fails every handshake.
            Err(_) => Arc::new(
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth(),
            ),
        };
        DirectUpstream {
            rules,
            tls: tokio_rustls::TlsConnector::from(cfg),
            timeout: Duration::from_secs(60),
            max_response: 64 << 20,
        }
    }

    async fn exchange(&self, req: ForwardRequest) -> Result<ForwardResponse, ForwardError> {
        let (https, host, port) =
            target_of(&req.url).ok_or_else(|| ForwardError::Url(req.url.clone()))?;
        if !allows(&self.rules, &host, port) {
            return Err(ForwardError::NotListed(host, port));
        }
        let addrs: Vec<_> = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| ForwardError::Resolve(host.clone(), e))?
            .collect();
        let mut last = String::from("no address");
        let mut tcp = None;
        for a in addrs {
            match tokio::net::TcpStream::connect(a).await {
                Ok(s) => {
                    tcp = Some(s);
                    break;
                }
                Err(e) => last = format!("{a}: {e}"),
            }
        }
        let tcp = tcp.ok_or_else(|| ForwardError::Connect(host.clone(), last))?;
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let path = req
            .url
            .parse::<hyper::Uri>()
            .ok()
            .and_then(|u| u.path_and_query().map(|p| p.as_str().to_string()))
            .unwrap_or_else(|| "/".into());
        let mut b = hyper::Request::builder()
            .method(req.method.as_str())
            .uri(path);
        for (k, v) in &req.headers {
            let k = k.to_ascii_lowercase();
            if HOP_BY_HOP.contains(&k.as_str()) || k == "host" || k == "content-length" {
                continue;
            }
            b = b.header(k, v);
        }
        b = b.header("host", &authority);
        let r = b
            .body(Full::new(Bytes::from(req.body)))
            .map_err(|e| ForwardError::Http(authority.clone(), e.to_string()))?;
        if https {
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|e| ForwardError::Tls(host.clone(), e.to_string()))?;
            let tls = self
                .tls
                .connect(name, tcp)
                .await
                .map_err(|e| ForwardError::Tls(host.clone(), e.to_string()))?;
            self.send(tls, r, &authority).await
        } else {
            self.send(tcp, r, &authority).await
        }
    }

    async fn send<S>(
        &self,
        io: S,
        req: hyper::Request<Full<Bytes>>,
        authority: &str,
    ) -> Result<ForwardResponse, ForwardError>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let err = |e: String| ForwardError::Http(authority.to_string(), e);
        let (mut tx, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
                .await
                .map_err(|e| err(e.to_string()))?;
        let driver = tokio::spawn(conn);
        let resp = tx.send_request(req).await.map_err(|e| err(e.to_string()));
        let out = match resp {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let headers = resp
                    .headers()
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.as_str().to_string(),
                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                        )
                    })
                    .collect();
                let body = Limited::new(resp.into_body(), self.max_response)
                    .collect()
                    .await
                    .map_err(|e| err(e.to_string()))?
                    .to_bytes()
                    .to_vec();
                Ok(ForwardResponse {
                    status,
                    headers,
                    body,
                })
            }
            Err(e) => Err(e),
        };
        driver.abort();
        out
    }
}

#[async_trait::async_trait]
impl Upstream for DirectUpstream {
    async fn forward(&self, req: ForwardRequest) -> Result<ForwardResponse, String> {
        match tokio::time::timeout(self.timeout, self.exchange(req)).await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err(format!("no answer within {:?}", self.timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn host_matching_ignores_only_the_port() {
        let r = PassthroughRule::parse("api.openai.com:8443").expect("rule");
        assert!(r.matches_host("API.openai.com."));
        assert!(!r.matches_host("evil.api.openai.com"));
        assert!(!r.matches("api.openai.com", 443));
        let w = PassthroughRule::parse("*.anthropic.com").expect("rule");
        assert!(w.matches_host("api.anthropic.com"));
        assert!(!w.matches_host("anthropic.com"));
        assert!(!w.matches_host("xanthropic.com"));
    }

    #[test]
    fn rules_parse_or_say_why() {
        for ok in [
            "api.anthropic.com",
            "API.Anthropic.com.",
            "*.openai.com",
            "127.0.0.1:8080",
            "[::1]:8443",
            "::1",
            "host_with_underscore.internal:9000",
        ] {
            assert!(PassthroughRule::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "https://api.anthropic.com",
            "api.anthropic.com/v1",
            "user@api.anthropic.com",
            "*",
            "*.",
            "a*.b.com",
            "a..b",
            ".b.com",
            "[::1",
            "[::1]x",
        ] {
            assert!(
                matches!(
                    PassthroughRule::parse(bad),
                    Err(PassthroughError::Malformed(_) | PassthroughError::Empty(_))
                ),
                "{bad}"
            );
        }
        for bad in ["", "  "] {
            assert!(matches!(
                PassthroughRule::parse(bad),
                Err(PassthroughError::Empty(_))
            ));
        }
        for bad in ["h:0", "h:65536", "h:x", "h:"] {
            assert!(matches!(
                PassthroughRule::parse(bad),
                Err(PassthroughError::Port(_))
            ));
        }
    }

    #[test]
    fn matching_is_exact_on_host_and_port() {
        let list = l(&[
            "api.anthropic.com",
            "*.openai.com",
            "127.0.0.1:8080",
            "[::1]:9",
        ]);
        assert!(allows(&list, "API.anthropic.com.", 443));
        assert!(allows(&list, "api.anthropic.com", 80));
        // A listed host without a port: only the web ports.
        assert!(!allows(&list, "api.anthropic.com", 22));
        assert!(!allows(&list, "api.anthropic.com.evil.net", 443));
        assert!(!allows(&list, "evilapi.anthropic.com", 443));
        assert!(allows(&list, "chat.api.openai.com", 443));
        assert!(!allows(&list, "openai.com", 443));
        assert!(!allows(&list, "evilopenai.com", 443));
        assert!(allows(&list, "127.0.0.1", 8080));
        assert!(!allows(&list, "127.0.0.1", 8081));
        assert!(!allows(&list, "127.0.0.2", 8080));
        assert!(!allows(&list, "localhost", 8080));
        assert!(allows(&list, "[::1]", 9));
        assert!(allows(&list, "::1", 9));
        assert!(!allows(&[], "api.anthropic.com", 443));
        // Unparsable entries match nothing.
        assert!(!allows(&l(&["https://x.com"]), "x.com", 443));
    }

    #[test]
    fn forward_target_comes_from_the_url_only() {
        assert_eq!(
            target_of("http://127.0.0.1:8080/a?b"),
            Some((false, "127.0.0.1".into(), 8080))
        );
        assert_eq!(
            target_of("https://api.anthropic.com/v1"),
            Some((true, "api.anthropic.com".into(), 443))
        );
        assert_eq!(target_of("http://[::1]:9/"), Some((false, "::1".into(), 9)));
        // Userinfo could make a checker and a connector disagree on the host: refused.
        assert_eq!(target_of("http://127.0.0.1:8080@10.0.0.1:80/"), None);
        assert_eq!(target_of("ftp://x.com/"), None);
        assert_eq!(target_of("/relative"), None);
    }

    #[tokio::test]
    async fn unlisted_targets_are_refused_before_any_connection() {
        // A listener that must see nothing.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let up = DirectUpstream::with_roots(
            vec![format!("127.0.0.1:{}", port.wrapping_add(1).max(1))],
            rustls::RootCertStore::empty(),
        );
        let req = |url: String| ForwardRequest {
            method: "GET".into(),
            url,
            headers: vec![],
            body: vec![],
        };
        for url in [
            format!("http://127.0.0.1:{port}/"),
            format!(
                "http://127.0.0.1:{}@127.0.0.1:{port}/",
                port.wrapping_add(1)
            ),
            format!("http://localhost:{port}/"),
        ] {
            let e = up.forward(req(url.clone())).await.unwrap_err();
            assert!(
                e.contains("not listed") || e.contains("not an http(s) URL"),
                "{url}: {e}"
            );
        }
        let accepted = tokio::time::timeout(Duration::from_millis(200), l.accept()).await;
        assert!(accepted.is_err(), "the unlisted listener was connected to");
    }
}

#[cfg(test)]
mod tls_tests {
    use super::*;
    use crate::egress::proxy::ca::CertAuthority;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[derive(Debug)]
    struct Fixed(Arc<rustls::sign::CertifiedKey>);
    impl rustls::server::ResolvesServerCert for Fixed {
        fn resolve(
            &self,
            _: rustls::server::ClientHello<'_>,
        ) -> Option<Arc<rustls::sign::CertifiedKey>> {
            Some(Arc::clone(&self.0))
        }
    }

    /// A listed HTTPS upstream (on loopback, certificate from a test root) gets the request with
    /// `Host` rewritten and hop-by-hop headers dropped; an untrusted root is refused.
    #[tokio::test]
    async fn https_upstream_is_verified_and_gets_a_clean_request() {
        let ca = CertAuthority::generate(None).unwrap();
        let leaf = ca.leaf("127.0.0.1").unwrap();
        let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Fixed(leaf)));
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let mut heads = Vec::new();
            for _ in 0..2 {
                let (tcp, _) = l.accept().await.unwrap();
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    heads.push(String::from("<handshake refused>"));
                    continue;
                };
                let mut buf = vec![0u8; 8192];
                let n = tls.read(&mut buf).await.unwrap();
                heads.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                tls.write_all(b"HTTP/1.1 201 Created\r\nContent-Type: text/x-test\r\nContent-Length: 2\r\n\r\nhi")
                    .await
                    .unwrap();
                tls.shutdown().await.ok();
            }
            heads
        });
        let rules = vec![format!("127.0.0.1:{port}")];
        let req = || ForwardRequest {
            method: "POST".into(),
            url: format!("https://127.0.0.1:{port}/v1/x?y=1"),
            headers: vec![
                ("Host".into(), "evil.example".into()),
                ("Proxy-Authorization".into(), "Basic eA==".into()),
                ("Connection".into(), "keep-alive".into()),
                ("X-Api-Key".into(), "k".into()),
            ],
            body: b"{}".to_vec(),
        };
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.cert_der().clone()).unwrap();
        let ok = DirectUpstream::with_roots(rules.clone(), roots)
            .forward(req())
            .await
            .unwrap();
        assert_eq!(ok.status, 201);
        assert_eq!(ok.body, b"hi");
        let refused = DirectUpstream::with_roots(rules, rustls::RootCertStore::empty())
            .forward(req())
            .await
            .unwrap_err();
        assert!(refused.contains("TLS"), "{refused}");
        let heads = server.await.unwrap();
        let h = heads[0].to_ascii_lowercase();
        assert!(h.starts_with("post /v1/x?y=1 http/1.1\r\n"), "{h}");
        assert!(h.contains(&format!("host: 127.0.0.1:{port}\r\n")), "{h}");
        assert!(h.contains("x-api-key: k\r\n"), "{h}");
        assert!(
            !h.contains("evil.example") && !h.contains("proxy-authorization"),
            "{h}"
        );
        assert_eq!(heads[1], "<handshake refused>");
    }
}
