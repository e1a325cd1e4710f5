//! HTTP requests seen by the proxy: recorded (method, full URL, headers, bounded body with its
//! full size and SHA-256), searched for canaries, and answered locally — from a researcher's
//! response directory, by a passthrough connector for listed hosts, or with a plausible default.

use super::{Conn, Proxy};
use crate::egress::canary::Compression;
use crate::egress::record::Buffer;
use crate::trace::EventKind;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use sha2::{Digest, Sha256};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A request handed to a passthrough connector.
#[derive(Debug, Clone)]
pub struct ForwardRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone)]
pub struct ForwardResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Forwards requests for passthrough hosts (an external agent's model API). Supplied by the
/// caller, who decides how (and whether) anything reaches the outside; nothing else forwards.
#[async_trait::async_trait]
pub trait Upstream: Send + Sync + 'static {
    async fn forward(&self, req: ForwardRequest) -> Result<ForwardResponse, String>;
}

/// A researcher's captured responses: `DIR/<host>/<path>` (a path ending in `/` serves
/// `index`), else `DIR/_any/<path>` for any host. Query strings are ignored.
#[derive(Debug, Clone)]
pub struct ResponseMap {
    dir: PathBuf,
}

impl ResponseMap {
    pub fn new(dir: PathBuf) -> Self {
        ResponseMap { dir }
    }

    /// The file for a request, never outside the directory (no `..`, no symlink escape).
    pub fn lookup(&self, host: &str, path: &str) -> Option<PathBuf> {
        let path = path.split('?').next().unwrap_or("");
        let mut rel = PathBuf::new();
        for seg in path.split('/').filter(|s| !s.is_empty()) {
            let c = Path::new(seg).components().next()?;
            if !matches!(c, Component::Normal(_)) || seg.contains('\\') {
                return None;
            }
            rel.push(seg);
        }
        if path.is_empty() || path.ends_with('/') {
            rel.push("index");
        }
        let root = self.dir.canonicalize().ok()?;
        let host = host.to_ascii_lowercase();
        if host.is_empty() || host.contains('/') || host.contains("..") {
            return None;
        }
        for base in [host.as_str(), "_any"] {
            let cand = root.join(base).join(&rel);
            if let Ok(real) = cand.canonicalize() {
                if real.starts_with(&root) && real.is_file() {
                    return Some(real);
                }
            }
        }
        None
    }
}

fn content_type_for(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "json" => "application/json",
        "html" | "htm" => "text/html; charset=utf-8",
        "js" => "application/javascript",
        "txt" | "sh" | "py" | "ps1" => "text/plain; charset=utf-8",
        "zip" => "application/zip",
        "gz" | "tgz" => "application/gzip",
        _ => "application/octet-stream",
    }
}

/// The default local answer: JSON for JSON requests, HTML for browsers, else plain text.
pub fn default_answer(headers: &[(String, String)]) -> (&'static str, &'static [u8]) {
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    let ct = get("content-type").unwrap_or_default();
    let accept = get("accept").unwrap_or_default();
    if ct.contains("json") || (accept.contains("json") && !accept.contains("html")) {
        ("application/json", br#"{"status":"ok","success":true}"#)
    } else if accept.contains("text/html") {
        (
            "text/html; charset=utf-8",
            b"<!doctype html><html><head><title>OK</title></head><body>OK</body></html>",
        )
    } else {
        ("text/plain; charset=utf-8", b"OK\n")
    }
}

fn respond(status: u16, ct: &str, body: Vec<u8>, head: bool) -> Response<Full<Bytes>> {
    let len = body.len();
    let mut r = Response::new(Full::new(if head {
        Bytes::new()
    } else {
        Bytes::from(body)
    }));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let h = r.headers_mut();
    h.insert("server", hyper::header::HeaderValue::from_static("nginx"));
    if let Ok(v) = ct.parse() {
        h.insert("content-type", v);
    }
    h.insert("content-length", len.into());
    r
}

const MAX_HEADERS: usize = 200;
const MAX_HEADER_VALUE: usize = 16 << 10;
const BODY_TIMEOUT: Duration = Duration::from_secs(120);

/// Handles one request on an intercepted (or plain) connection.
pub(super) async fn handle(
    proxy: Arc<Proxy>,
    conn: Arc<Conn>,
    mut req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    conn.requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let method = req.method().as_str().to_string();
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .take(MAX_HEADERS)
        .map(|(k, v)| {
            let v = String::from_utf8_lossy(v.as_bytes());
            (
                k.as_str().to_string(),
                v.chars().take(MAX_HEADER_VALUE).collect(),
            )
        })
        .collect();
    let uri = req.uri().clone();
    let host_header = req
        .headers()
        .get("host")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);

    if req.method() == hyper::Method::CONNECT {
        let auth = uri
            .authority()
            .map(|a| a.to_string())
            .unwrap_or_else(|| uri.to_string());
        let (host, port) = super::sniff::split_authority(&auth, 443);
        proxy.rec.emit(EventKind::HttpRequest {
            method,
            url: auth.clone(),
            host: host.clone(),
            headers,
            body_size: 0,
            body_sha256: None,
            body_preview: None,
        });
        let depth = conn.depth + 1;
        let p = Arc::clone(&proxy);
        proxy.rec.track(async move {
            match hyper::upgrade::on(req).await {
                Ok(up) => {
                    let dest = super::Dest::named(&host, port);
                    super::serve(p, Box::new(hyper_util::rt::TokioIo::new(up)), dest, depth).await;
                }
                Err(e) => tracing::debug!("CONNECT upgrade failed: {e}"),
            }
        });
        // A bare 200: a CONNECT answer carries no body headers.
        return Response::new(Full::new(Bytes::new()));
    }

    let scheme = if conn.dest.tls { "https" } else { "http" };
    let (url, authority) = if uri.scheme().is_some() && uri.authority().is_some() {
        (
            uri.to_string(),
            uri.authority().map(|a| a.to_string()).unwrap_or_default(),
        )
    } else {
        let authority = uri
            .authority()
            .map(|a| a.to_string())
            .or(host_header)
            .or_else(|| conn.dest.sni.clone())
            .unwrap_or_else(|| conn.dest.url_authority());
        let pq = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        (format!("{scheme}://{authority}{pq}"), authority)
    };
    let (host, port) =
        super::sniff::split_authority(&authority, if conn.dest.tls { 443 } else { 80 });
    let host = host.to_ascii_lowercase();
    let path_and_query = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());

    // Body: hash and count everything, keep a bounded prefix for the search.
    let keep = proxy.cfg.body_keep;
    let mut kept = Vec::new();
    let mut size = 0u64;
    let mut hasher = Sha256::new();
    let ws_key = super::ws::upgrade_key(&headers);
    let on_upgrade = ws_key.as_ref().map(|_| hyper::upgrade::on(&mut req));
    let mut body = req.into_body();
    let mut starved = false;
    let collect = async {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            if let Ok(data) = frame.into_data() {
                size += data.len() as u64;
                hasher.update(&data);
                let want = keep.saturating_sub(kept.len()).min(data.len());
                let got = proxy.rec.kept.reserve(want);
                starved |= got < want;
                kept.extend_from_slice(&data[..got]);
            }
        }
    };
    let complete = tokio::time::timeout(BODY_TIMEOUT, collect).await.is_ok();
    let sha = hex::encode(hasher.finalize());
    let declared = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-encoding"))
        .and_then(|(_, v)| Compression::from_content_encoding(v));
    let header_text: String = headers.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
    let seq = proxy.rec.emit(EventKind::HttpRequest {
        method: method.clone(),
        url: url.clone(),
        host: host.clone(),
        headers: headers.clone(),
        body_size: size,
        body_sha256: (size > 0).then(|| sha.clone()),
        body_preview: (!kept.is_empty()).then(|| super::sniff::preview(&kept, 512)),
    });
    if !complete {
        proxy.rec.note(
            "egress_body_timeout",
            format!("request body of event {seq} not complete after {BODY_TIMEOUT:?}"),
        );
    }
    if size as usize > kept.len() {
        proxy.rec.emit(EventKind::Limit {
            what: if starved {
                "egress_memory"
            } else {
                "egress_body"
            }
            .into(),
            detail: format!(
                "event {seq}: body of {size} bytes, first {} searched",
                kept.len()
            ),
        });
    }
    let mut body_buf = Buffer::new("body", kept.clone());
    body_buf.declared = declared;
    let bufs = vec![
        Buffer::new("url", url.clone()),
        Buffer::new("headers", header_text),
        body_buf,
    ];
    let rec = Arc::clone(&proxy.rec);
    let (h2, pq2) = (host.clone(), path_and_query.clone());
    let body_for_reasm = kept.clone();
    proxy.rec.track(async move {
        rec.scan(seq, Some(h2.clone()), Some(h2.clone()), bufs)
            .await;
        rec.http_pieces(seq, &h2, &pq2, &body_for_reasm).await;
    });

    if let (Some(key), Some(on_upgrade)) = (ws_key, on_upgrade) {
        // Accept, so a client exfiltrating over a WebSocket gets to send its frames.
        let p = Arc::clone(&proxy);
        let dest = super::Dest {
            name: Some(host.clone()),
            ..conn.dest.clone()
        };
        proxy.rec.track(async move {
            if let Ok(up) = on_upgrade.await {
                let (raw, total) = super::read_bounded(&p, hyper_util::rt::TokioIo::new(up)).await;
                let payload = super::ws::payloads(&raw, raw.len());
                p.rec.kept.release(raw.len() - payload.len());
                super::record_stream(&p, &dest, "websocket", "websocket", payload, Some(total))
                    .await;
            }
        });
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let h = r.headers_mut();
        h.insert(
            "upgrade",
            hyper::header::HeaderValue::from_static("websocket"),
        );
        h.insert(
            "connection",
            hyper::header::HeaderValue::from_static("Upgrade"),
        );
        if let Ok(v) = super::ws::accept_value(&key).parse() {
            h.insert("sec-websocket-accept", v);
        }
        return r;
    }
    let head = method == "HEAD";
    if let Some(map) = &proxy.responses {
        if let Some(file) = map.lookup(&host, &path_and_query) {
            if let Ok(data) = tokio::fs::read(&file).await {
                return respond(200, content_type_for(&file), data, head);
            }
        }
    }
    if super::passthrough::allows(&proxy.cfg.passthrough, &host, port) {
        if let Some(up) = &proxy.cfg.upstream {
            let what = format!("{method} {url}");
            let fr = ForwardRequest {
                method,
                url,
                headers: headers.clone(),
                body: kept,
            };
            return match up.forward(fr).await {
                Ok(r) => {
                    // What left the machine is part of the record.
                    proxy.rec.note(
                        "egress_passthrough",
                        format!(
                            "event {seq}: {what} forwarded upstream, answered {}",
                            r.status
                        ),
                    );
                    let ct = r
                        .headers
                        .iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                        .map(|(_, v)| v.clone());
                    respond(
                        r.status,
                        ct.as_deref().unwrap_or("application/octet-stream"),
                        r.body,
                        head,
                    )
                }
                Err(e) => {
                    proxy
                        .rec
                        .note("egress_passthrough_failed", format!("{host}: {e}"));
                    respond(502, "text/plain", b"Bad Gateway\n".to_vec(), head)
                }
            };
        }
    }
    let (ct, body) = default_answer(&headers);
    respond(200, ct, body.to_vec(), head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_map_stays_inside_its_directory() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("evil.example/stage")).unwrap();
        std::fs::write(d.path().join("evil.example/stage/two.sh"), "echo hi").unwrap();
        std::fs::write(d.path().join("evil.example/index"), "root").unwrap();
        std::fs::create_dir_all(d.path().join("_any")).unwrap();
        std::fs::write(d.path().join("_any/x.json"), "{}").unwrap();
        std::fs::write(d.path().join("../outside-secret"), "no").ok();
        let m = ResponseMap::new(d.path().to_path_buf());
        assert!(m
            .lookup("Evil.Example", "/stage/two.sh?x=1")
            .unwrap()
            .ends_with("stage/two.sh"));
        assert!(m.lookup("evil.example", "/").unwrap().ends_with("index"));
        assert!(m
            .lookup("other.host", "/x.json")
            .unwrap()
            .ends_with("_any/x.json"));
        assert!(m.lookup("evil.example", "/../outside-secret").is_none());
        assert!(m.lookup("..", "/outside-secret").is_none());
        assert!(m.lookup("evil.example", "/nope").is_none());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc/passwd", d.path().join("_any/passwd")).unwrap();
            assert!(m.lookup("x", "/passwd").is_none());
        }
    }

    #[test]
    fn default_answers() {
        let h = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(
            default_answer(&h("Content-Type", "application/json")).0,
            "application/json"
        );
        assert_eq!(
            default_answer(&h("accept", "application/json")).0,
            "application/json"
        );
        assert!(default_answer(&h("accept", "text/html,*/*"))
            .0
            .starts_with("text/html"));
        assert!(default_answer(&[]).0.starts_with("text/plain"));
    }
}
