//! HTTPS requests per second through our intercepting proxy vs mitmproxy (`mitmdump` answering
//! locally), same client, same workload, side by side (issue 3 targets: ≥ 15x keep-alive small
//! requests, ≥ 5x with a new TLS handshake per request).
//!
//! Run: `cargo bench -p skill-observer --bench proxy` (needs `mitmdump` on PATH: `pip install mitmproxy`).
//! Both proxies are used as explicit proxies (CONNECT, then TLS inside the tunnel); both answer
//! every request themselves with a small JSON body. Loopback only, bounded in time.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use observer::egress::proxy::{CertAuthority, ProxyConfig};
use observer::egress::{EgressConfig, EgressRuntime, EgressSockets, OriginalDst};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HOST: &str = "bench.example.com";
const CLIENTS: usize = 4;
const RUN: Duration = Duration::from_secs(3);

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

async fn tunnel(
    proxy: SocketAddr,
    tls: &tokio_rustls::TlsConnector,
) -> Res<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let mut s = tokio::net::TcpStream::connect(proxy).await?;
    s.set_nodelay(true)?;
    s.write_all(format!("CONNECT {HOST}:443 HTTP/1.1\r\nHost: {HOST}:443\r\n\r\n").as_bytes())
        .await?;
    let mut buf = [0u8; 512];
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Err("proxy closed during CONNECT".into());
        }
        got.extend_from_slice(&buf[..n]);
    }
    if !got.starts_with(b"HTTP/1.1 200") && !got.starts_with(b"HTTP/1.0 200") {
        return Err(format!("CONNECT refused: {}", String::from_utf8_lossy(&got)).into());
    }
    Ok(tls.connect(ServerName::try_from(HOST)?, s).await?)
}

async fn sender(
    proxy: SocketAddr,
    tls: &tokio_rustls::TlsConnector,
) -> Res<hyper::client::conn::http1::SendRequest<Empty<Bytes>>> {
    let t = tunnel(proxy, tls).await?;
    let (send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(t)).await?;
    tokio::spawn(conn);
    Ok(send)
}

async fn one(send: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>, i: u64) -> Res<()> {
    let req = hyper::Request::get(format!("https://{HOST}/api/item/{i}"))
        .header("host", HOST)
        .header("accept", "application/json")
        .body(Empty::new())?;
    let resp = send.send_request(req).await?;
    if !resp.status().is_success() {
        return Err(format!("status {}", resp.status()).into());
    }
    resp.into_body().collect().await?;
    Ok(())
}

/// Requests per second over `RUN` with `CLIENTS` concurrent clients.
async fn load(proxy: SocketAddr, tls: tokio_rustls::TlsConnector, keep_alive: bool) -> Res<f64> {
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (tls, done) = (tls.clone(), Arc::clone(&done));
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            let mut keep = None;
            while start.elapsed() < RUN {
                let mut send = match keep.take() {
                    Some(s) => s,
                    None => sender(proxy, &tls).await?,
                };
                one(&mut send, i).await?;
                i += 1;
                done.fetch_add(1, Ordering::Relaxed);
                if keep_alive {
                    keep = Some(send);
                }
            }
            Res::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64())
}

fn connector(root: CertificateDer<'static>) -> Res<tokio_rustls::TlsConnector> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root)?;
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(cfg)))
}

fn wait_listening(addr: SocketAddr, limit: Duration) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if std::net::TcpStream::connect(addr).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() -> Res<()> {
    let dir = tempfile::tempdir()?;
    // Ours.
    let ca = Arc::new(CertAuthority::generate(Some(dir.path()))?);
    let ours_root = ca.cert_der().clone();
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let ours = listener.local_addr()?;
    let cfg = EgressConfig {
        original_dst: OriginalDst::LocalAddrFallback,
        proxy: Some(ProxyConfig::new(ca)),
        ..EgressConfig::default()
    };
    let events = Arc::new(AtomicU64::new(0));
    let ev = Arc::clone(&events);
    let egress = EgressRuntime::start(
        EgressSockets {
            transparent_tcp: vec![listener],
            ..Default::default()
        },
        cfg,
        move |_| ev.fetch_add(1, Ordering::Relaxed) + 1,
    )?;

    // mitmproxy, answering locally from an addon.
    let mitm_port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addon = dir.path().join("answer.py");
    std::fs::write(&addon, "from mitmproxy import http\n\ndef request(flow):\n    flow.response = http.Response.make(200, b'{\"status\":\"ok\",\"success\":true}', {\"Content-Type\": \"application/json\"})\n")?;
    let confdir = dir.path().join("mitm");
    let child = std::process::Command::new("mitmdump")
        .args([
            "-q",
            "--listen-host",
            "127.0.0.1",
            "--listen-port",
            &mitm_port.to_string(),
            "-s",
        ])
        .arg(&addon)
        .arg("--set")
        .arg(format!("confdir={}", confdir.display()))
        // Never contact the (non-existent) upstream: no eager connect, no upstream certificate sniffing.
        .args([
            "--set",
            "connection_strategy=lazy",
            "--set",
            "upstream_cert=false",
        ])
        .spawn();
    let mitm = SocketAddr::from(([127, 0, 0, 1], mitm_port));
    let child = match child {
        Ok(c) => Some(Child(c)),
        Err(e) => {
            println!("mitmdump not available ({e}); measuring ours only");
            None
        }
    };
    let mitm_ok = child.is_some() && wait_listening(mitm, Duration::from_secs(30));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let ours_tls = connector(ours_root)?;
    let mitm_tls = if mitm_ok {
        Some(connector(CertificateDer::from_pem_file(
            confdir.join("mitmproxy-ca-cert.pem"),
        )?)?)
    } else {
        None
    };

    println!("{CLIENTS} clients, {RUN:?} per case, best of 2 rounds, loopback, explicit proxy (CONNECT + TLS)");
    for (label, keep, target) in [
        ("keep-alive small requests", true, 15.0),
        ("new TLS handshake per request", false, 5.0),
    ] {
        let (mut a, mut b) = (0f64, 0f64);
        for _ in 0..2 {
            a = a.max(rt.block_on(load(ours, ours_tls.clone(), keep))?);
            if let Some(t) = &mitm_tls {
                b = b.max(rt.block_on(load(mitm, t.clone(), keep))?);
            }
        }
        if b > 0.0 {
            println!("{label:32} ours {a:8.0} req/s   mitmdump {b:7.0} req/s   ratio {:5.1}x   target {target}x", a / b);
        } else {
            println!("{label:32} ours {a:8.0} req/s");
        }
    }
    let status = egress.shutdown();
    println!(
        "events recorded by ours: {} (complete: {})",
        events.load(Ordering::Relaxed),
        status.is_complete()
    );
    drop(child);
    Ok(())
}
