//! The transparent TCP capture: every connection the jail makes lands here. The first bytes
//! decide: a TLS ClientHello is terminated with a leaf from the per-run authority (then HTTP/1.1
//! or h2 is served locally); plain HTTP (including `CONNECT` from proxy-aware clients, whose
//! tunnels come back through the same path) is served locally; anything else is recorded as a
//! bounded raw stream. Nothing connects anywhere: the only way out is an [`Upstream`] the caller
//! supplies, for hosts listed in `passthrough`.

pub mod ca;
pub mod http;
pub mod io;
pub mod passthrough;
pub mod sniff;
mod stream;
pub mod ws;

use super::record::Recorder;
use super::{Ctl, OriginalDst};
use crate::trace::EventKind;
pub use ca::CertAuthority;
pub use http::{ForwardRequest, ForwardResponse, ResponseMap, Upstream};
use io::{Counted, Prefixed};
use rustls::server::{Acceptor, ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use sniff::Proto;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
pub(crate) use stream::{raw_stream, read_bounded, record_stream};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::task::JoinSet;

pub struct ProxyConfig {
    pub ca: Arc<CertAuthority>,
    /// `--passthrough` rules (`HOST[:PORT]`, `*.suffix`; see [`passthrough`]) whose requests go
    /// to `upstream`. Empty by default.
    pub passthrough: Vec<String>,
    pub upstream: Option<Arc<dyn Upstream>>,
    /// `--responses DIR`: captured second stages served per URL (see [`ResponseMap`]).
    pub responses_dir: Option<PathBuf>,
    /// Request body bytes kept for the canary search (size and hash always cover all of it).
    pub body_keep: usize,
    /// Raw stream bytes kept per connection.
    pub stream_keep: usize,
    /// How long a client may stay silent before we speak first (server-first protocols).
    pub first_byte_timeout: Duration,
    /// A raw stream idle this long is closed and recorded.
    pub stream_idle: Duration,
    pub max_connections: usize,
}

impl ProxyConfig {
    pub fn new(ca: Arc<CertAuthority>) -> Self {
        ProxyConfig {
            ca,
            passthrough: Vec::new(),
            upstream: None,
            responses_dir: None,
            body_keep: 32 << 20,
            stream_keep: 1 << 20,
            first_byte_timeout: Duration::from_secs(3),
            stream_idle: Duration::from_secs(10),
            max_connections: 1024,
        }
    }

    /// `observe --passthrough HOST[:PORT]…` (forwarded by a [`passthrough::DirectUpstream`] over
    /// the supervisor's network) and `--responses DIR`.
    pub fn with_cli_options(
        mut self,
        passthrough: Vec<String>,
        responses: Option<PathBuf>,
    ) -> Self {
        if !passthrough.is_empty() {
            self.upstream = Some(Arc::new(passthrough::DirectUpstream::new(
                passthrough.clone(),
            )));
        }
        self.passthrough = passthrough;
        self.responses_dir = responses;
        self
    }
}

/// (certificate host, ALPN offered back).
type TlsKey = (String, Vec<Vec<u8>>);

pub(crate) struct Proxy {
    pub cfg: ProxyConfig,
    pub rec: Arc<Recorder>,
    pub ctl: Ctl,
    pub responses: Option<ResponseMap>,
    tls_configs: Mutex<HashMap<TlsKey, Arc<ServerConfig>>>,
}

/// Where a connection was going.
#[derive(Debug, Clone)]
pub(crate) struct Dest {
    pub addr: String,
    pub port: u16,
    pub name: Option<String>,
    pub tls: bool,
    pub sni: Option<String>,
}

impl Dest {
    pub fn named(host: &str, port: u16) -> Self {
        let is_ip = host.parse::<std::net::IpAddr>().is_ok();
        Dest {
            addr: host.to_string(),
            port,
            name: (!is_ip).then(|| host.to_string()),
            tls: false,
            sni: None,
        }
    }

    fn host(&self) -> String {
        self.sni
            .clone()
            .or_else(|| self.name.clone())
            .unwrap_or_else(|| self.addr.clone())
    }

    pub fn url_authority(&self) -> String {
        let h = if self.addr.contains(':') {
            format!("[{}]", self.addr)
        } else {
            self.addr.clone()
        };
        let default = if self.tls { 443 } else { 80 };
        if self.port == default {
            h
        } else {
            format!("{h}:{}", self.port)
        }
    }
}

pub(crate) struct Conn {
    pub dest: Dest,
    pub depth: u8,
    /// Requests parsed on this connection.
    pub requests: AtomicU64,
}

#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }
}

const MAX_DEPTH: u8 = 4;
/// Client bytes kept to re-read as a raw stream when a TLS or HTTP parser rejects them.
const CAPTURE: usize = 64 << 10;
/// At shutdown, how long buffered client data is still read.
const DRAIN: Duration = Duration::from_millis(300);

impl Proxy {
    pub fn new(cfg: ProxyConfig, rec: Arc<Recorder>, ctl: Ctl) -> Self {
        let responses = cfg.responses_dir.clone().map(ResponseMap::new);
        Proxy {
            cfg,
            rec,
            ctl,
            responses,
            tls_configs: Mutex::default(),
        }
    }

    fn server_config(
        &self,
        host: &str,
        client_alpn: &[Vec<u8>],
    ) -> Result<Arc<ServerConfig>, String> {
        let alpn: Vec<Vec<u8>> = if client_alpn.iter().any(|p| p == b"h2") {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        } else if client_alpn.iter().any(|p| p == b"http/1.1") {
            vec![b"http/1.1".to_vec()]
        } else {
            // Non-HTTP ALPN: agree to what the client asked, and record what it then sends.
            client_alpn.to_vec()
        };
        let key = (host.to_string(), alpn.clone());
        if let Some(c) = self
            .tls_configs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(Arc::clone(c));
        }
        let leaf = self.cfg.ca.leaf(host).map_err(|e| e.to_string())?;
        let mut cfg =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_no_client_auth()
                .with_cert_resolver(Arc::new(Fixed(leaf)));
        cfg.alpn_protocols = alpn;
        let cfg = Arc::new(cfg);
        let mut cache = self.tls_configs.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() < 4096 {
            cache.insert(key, Arc::clone(&cfg));
        }
        Ok(cfg)
    }
}

/// Reads until the protocol can be told (or the client stays silent / closes).
async fn read_head<IO: AsyncRead + Unpin>(
    io: &mut IO,
    first_timeout: Duration,
) -> (Vec<u8>, Proto) {
    let mut head = Vec::new();
    let mut buf = [0u8; 64];
    let mut wait = first_timeout;
    loop {
        match tokio::time::timeout(wait, io.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => return (head, Proto::Other),
        }
        match sniff::sniff(&head) {
            Proto::NeedMore if head.len() < 64 => wait = Duration::from_millis(500),
            Proto::NeedMore => return (head, Proto::Other),
            p => return (head, p),
        }
    }
}

/// Reads until the end of the request head (or 16 KiB, or a short pause).
async fn read_http_head(io: &mut BoxIo, head: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    while head.len() < HTTP_HEAD_MAX
        && memchr::memmem::find(head, b"\r\n\r\n").is_none()
        && memchr::memmem::find(head, b"\n\n").is_none()
    {
        match tokio::time::timeout(Duration::from_millis(500), io.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => return,
        }
    }
}

const HTTP_HEAD_MAX: usize = 16 << 10;

/// A greeting for protocols where the server speaks first, so the client sends its payload.
fn banner(port: u16, host: &str) -> Option<String> {
    match port {
        22 | 2222 => Some("SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n".into()),
        25 | 587 | 2525 => Some(format!("220 {host} ESMTP Postfix (Ubuntu)\r\n")),
        21 => Some("220 (vsFTPd 3.0.5)\r\n".into()),
        110 => Some("+OK POP3 server ready\r\n".into()),
        143 => Some("* OK [CAPABILITY IMAP4rev1] ready\r\n".into()),
        _ => None,
    }
}

/// Any client stream (TCP, a CONNECT tunnel, decrypted TLS), type-erased so the recursion
/// through TLS and tunnels does not build ever-deeper types.
pub(crate) trait ClientIo: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> ClientIo for T {}
pub(crate) type BoxIo = Box<dyn ClientIo>;

/// Serves one client stream going to `dest`.
pub(crate) fn serve(
    proxy: Arc<Proxy>,
    io: BoxIo,
    dest: Dest,
    depth: u8,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async move {
        let mut io = io;
        if depth > MAX_DEPTH {
            proxy.rec.note(
                "egress_nesting",
                format!(
                    "tunnels nested deeper than {MAX_DEPTH} to {}:{}; recorded raw",
                    dest.addr, dest.port
                ),
            );
            return raw_stream(proxy, Prefixed::new(Vec::new(), io), dest).await;
        }
        let (mut head, proto) = read_head(&mut io, proxy.cfg.first_byte_timeout).await;
        if head.is_empty() {
            if let Some(b) = banner(dest.port, &dest.host()) {
                if io.write_all(b.as_bytes()).await.is_ok() {
                    let mut buf = [0u8; 4096];
                    if let Ok(Ok(n)) =
                        tokio::time::timeout(proxy.cfg.stream_idle, io.read(&mut buf)).await
                    {
                        head.extend_from_slice(&buf[..n]);
                    }
                }
            }
        }
        let proto = if proto == Proto::Http {
            // The HTTP parser drops what it rejects: look at the whole head first, and send
            // "GET " followed by anything that is not a request to the raw capture instead.
            read_http_head(&mut io, &mut head).await;
            if sniff::http_head_ok(&head) {
                Proto::Http
            } else {
                Proto::Other
            }
        } else {
            proto
        };
        let io = Prefixed::new(head, io);
        match proto {
            Proto::Tls => tls(proxy, io, dest, depth).await,
            Proto::Http => serve_http(proxy, io, dest, depth).await,
            _ => raw_stream(proxy, io, dest).await,
        }
    })
}

async fn tls(proxy: Arc<Proxy>, io: Prefixed<BoxIo>, dest: Dest, depth: u8) {
    let counted = Counted::with_capture(io, CAPTURE);
    let counters = Arc::clone(&counted.counters);
    let timeout = proxy.cfg.stream_idle;
    let handshake_failed = |proxy: &Proxy, sni: Option<String>, alpn: Vec<String>, why: String| {
        let (out, inn) = counters.get();
        proxy.rec.emit(EventKind::TlsHandshake {
            sni: sni.clone(),
            alpn,
            intercepted: false,
            bytes_out: out,
            bytes_in: inn,
        });
        tracing::debug!(?sni, "TLS not intercepted: {why}");
    };
    let mut acceptor = tokio_rustls::LazyConfigAcceptor::new(Acceptor::default(), counted);
    let why = match tokio::time::timeout(timeout, &mut acceptor).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("ClientHello timeout".to_string()),
    };
    let start = match why {
        Ok(s) => s,
        Err(why) => {
            // Looked like TLS (0x16 0x03) but is no ClientHello: whatever it carries is
            // recorded as a raw stream, so that prefix cannot hide a payload.
            handshake_failed(&proxy, None, Vec::new(), why);
            if let Some(io) = acceptor.take_io() {
                let seen = counters.captured();
                return raw_stream(proxy, Prefixed::new(seen, Box::new(io)), dest).await;
            }
            return;
        }
    };
    let hello = start.client_hello();
    let sni = hello.server_name().map(str::to_string);
    let alpn_raw: Vec<Vec<u8>> = hello
        .alpn()
        .map(|it| it.map(<[u8]>::to_vec).collect())
        .unwrap_or_default();
    let alpn: Vec<String> = alpn_raw
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let cert_host = sni
        .clone()
        .or_else(|| dest.name.clone())
        .unwrap_or_else(|| dest.addr.clone());
    let config = match proxy.server_config(&cert_host, &alpn_raw) {
        Ok(c) => c,
        Err(e) => return handshake_failed(&proxy, sni, alpn, e),
    };
    match tokio::time::timeout(timeout, start.into_stream(config)).await {
        Ok(Ok(stream)) => {
            let (out, inn) = counters.get();
            proxy.rec.emit(EventKind::TlsHandshake {
                sni: sni.clone(),
                alpn,
                intercepted: true,
                bytes_out: out,
                bytes_in: inn,
            });
            let inner = Dest {
                tls: true,
                sni,
                ..dest
            };
            serve(proxy, Box::new(stream), inner, depth + 1).await;
        }
        Ok(Err(e)) => handshake_failed(&proxy, sni, alpn, e.to_string()),
        Err(_) => handshake_failed(&proxy, sni, alpn, "handshake timeout".into()),
    }
}

async fn serve_http(proxy: Arc<Proxy>, io: Prefixed<BoxIo>, dest: Dest, depth: u8) {
    let counted = Counted::with_capture(io, CAPTURE);
    let counters = Arc::clone(&counted.counters);
    let conn = Arc::new(Conn {
        dest: dest.clone(),
        depth,
        requests: AtomicU64::new(0),
    });
    let seen = Arc::clone(&conn);
    let p = Arc::clone(&proxy);
    let svc = hyper::service::service_fn(move |req| {
        let (p, c) = (Arc::clone(&p), Arc::clone(&conn));
        async move { Ok::<_, std::convert::Infallible>(http::handle(p, c, req).await) }
    });
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    // A client that sends its request and then shuts down its write side still gets it recorded.
    builder.http1().half_close(true);
    let c = builder.serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(counted), svc);
    tokio::pin!(c);
    let mut shutdown = proxy.ctl.shutdown.clone();
    let r = tokio::select! {
        r = c.as_mut() => r,
        _ = crate::egress::stopped(&mut shutdown) => {
            // Requests already sent are still read and answered; then the connection closes.
            match tokio::time::timeout(DRAIN, c.as_mut()).await {
                Ok(r) => r,
                Err(_) => {
                    c.as_mut().graceful_shutdown();
                    c.await
                }
            }
        }
    };
    if let Err(e) = r {
        tracing::debug!("http connection ended: {e}");
        // Started like HTTP but no request parsed ("GET " + payload): keep the bytes anyway.
        if seen.requests.load(Ordering::Relaxed) == 0 {
            let mut bytes = counters.captured();
            bytes.truncate(proxy.rec.kept.reserve(bytes.len()));
            if !bytes.is_empty() {
                let total = counters.get().0;
                let proto = if dest.tls { "tls" } else { "tcp" };
                record_stream(&proxy, &dest, proto, "stream", bytes, Some(total)).await;
            }
        }
    }
}

/// Reads a socket option holding a `T` (a sockaddr); `None` when the kernel has no answer.
fn sockopt_addr<T>(fd: std::os::fd::RawFd, level: libc::c_int, name: libc::c_int) -> Option<T> {
    let mut v = std::mem::MaybeUninit::<T>::zeroed();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the zeroed buffer of that size, and the
    // sockaddr types used here are plain data valid for any bit pattern.
    let rc = unsafe { libc::getsockopt(fd, level, name, v.as_mut_ptr().cast(), &mut len) };
    // SAFETY: zero-initialised and possibly overwritten by the kernel: initialised either way.
    (rc == 0).then(|| unsafe { v.assume_init() })
}

/// `SO_ORIGINAL_DST` / `IP6T_SO_ORIGINAL_DST` of a redirected connection.
pub fn original_dst(s: &tokio::net::TcpStream) -> Option<SocketAddr> {
    use std::os::fd::AsRawFd;
    const SO_ORIGINAL_DST: libc::c_int = 80; // == IP6T_SO_ORIGINAL_DST
    let fd = s.as_raw_fd();
    if s.local_addr().ok()?.is_ipv4() {
        let sa: libc::sockaddr_in = sockopt_addr(fd, libc::SOL_IP, SO_ORIGINAL_DST)?;
        let ip = std::net::Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr));
        Some(SocketAddr::from((ip, u16::from_be(sa.sin_port))))
    } else {
        let sa: libc::sockaddr_in6 = sockopt_addr(fd, libc::SOL_IPV6, SO_ORIGINAL_DST)?;
        Some(SocketAddr::from((
            std::net::Ipv6Addr::from(sa.sin6_addr.s6_addr),
            u16::from_be(sa.sin6_port),
        )))
    }
}

/// Records one accepted connection and starts serving it.
fn accept_one(
    proxy: &Arc<Proxy>,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    od: OriginalDst,
    conns: &mut JoinSet<()>,
) {
    if conns.len() >= proxy.cfg.max_connections {
        proxy.rec.emit(EventKind::Limit {
            what: "egress_connections".into(),
            detail: format!(
                "more than {} concurrent connections; {peer} dropped",
                proxy.cfg.max_connections
            ),
        });
        return;
    }
    let dst = match (original_dst(&stream), od) {
        (Some(d), _) => Some(d),
        (None, OriginalDst::LocalAddrFallback) => stream.local_addr().ok(),
        (None, OriginalDst::Netfilter) => None,
    };
    let dst = dst.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    let name = proxy.rec.fake.lookup_name(dst.ip());
    proxy.rec.emit(EventKind::Connection {
        proto: "tcp".into(),
        dst_addr: dst.ip().to_string(),
        dst_port: dst.port(),
        src_port: Some(peer.port()),
        name: name.clone(),
    });
    let dest = Dest {
        addr: dst.ip().to_string(),
        port: dst.port(),
        name,
        tls: false,
        sni: None,
    };
    let _ = stream.set_nodelay(true);
    conns.spawn(serve(Arc::clone(proxy), Box::new(stream), dest, 0));
}

/// Accepts redirected connections until shutdown.
pub(crate) async fn accept_loop(
    proxy: Arc<Proxy>,
    listener: tokio::net::TcpListener,
    od: OriginalDst,
    grace: Duration,
) -> Result<(), String> {
    let mut conns = JoinSet::new();
    let mut shutdown = proxy.ctl.shutdown.clone();
    loop {
        while let Some(done) = conns.try_join_next() {
            if let Err(e) = done {
                if e.is_panic() {
                    proxy
                        .ctl
                        .fail("proxy", format!("connection handler panicked: {e}"));
                }
            }
        }
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)) => {
                    // Out of descriptors: back off rather than die; the backlog holds the rest.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset) => continue,
                Err(e) => return Err(format!("accept: {e}")),
            },
            _ = crate::egress::stopped(&mut shutdown) => break,
        };
        accept_one(&proxy, stream, peer, od, &mut conns);
    }
    // Connections the jail made before the end may still sit in the backlog. The jail is gone
    // by now and loopback handshakes complete inside `connect`, so the backlog is final: drain it
    // without waiting.
    if let Ok(std_listener) = listener.into_std() {
        while let Ok((stream, peer)) = std_listener.accept() {
            let stream = stream
                .set_nonblocking(true)
                .and_then(|_| tokio::net::TcpStream::from_std(stream));
            if let Ok(stream) = stream {
                accept_one(&proxy, stream, peer, od, &mut conns);
            }
        }
    }
    let drain = async {
        while let Some(done) = conns.join_next().await {
            if let Err(e) = done {
                if e.is_panic() {
                    proxy
                        .ctl
                        .fail("proxy", format!("connection handler panicked: {e}"));
                }
            }
        }
    };
    if tokio::time::timeout(grace, drain).await.is_err() {
        conns.abort_all();
    }
    Ok(())
}
