//! Raw (non-HTTP) client streams: read bounded, record, search.

use super::io::Prefixed;
use super::{sniff, BoxIo, Dest, Proxy, DRAIN};
use crate::egress::record::Buffer;
use crate::trace::EventKind;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Reads a client stream to its end (EOF, idle, or shutdown plus a short drain), keeping at most
/// `stream_keep` bytes within the shared memory budget; returns (kept, total).
pub(crate) async fn read_bounded<IO: AsyncRead + Unpin>(
    proxy: &Proxy,
    mut io: IO,
) -> (Vec<u8>, u64) {
    let keep = proxy.cfg.stream_keep;
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 16 << 10];
    let mut shutdown = proxy.ctl.shutdown.clone();
    let mut draining = false;
    loop {
        let read = tokio::time::timeout(
            if draining {
                DRAIN
            } else {
                proxy.cfg.stream_idle
            },
            io.read(&mut buf),
        );
        let r = if draining {
            read.await
        } else {
            tokio::select! {
                r = read => r,
                _ = crate::egress::stopped(&mut shutdown) => {
                    // Keep what the client already sent, then stop.
                    draining = true;
                    continue;
                }
            }
        };
        let n = match r {
            Ok(Ok(n)) if n > 0 => n,
            _ => break,
        };
        total += n as u64;
        let want = keep.saturating_sub(kept.len()).min(n);
        let got = proxy.rec.kept.reserve(want);
        kept.extend_from_slice(&buf[..got]);
    }
    (kept, total)
}

pub(crate) async fn raw_stream(proxy: Arc<Proxy>, io: Prefixed<BoxIo>, dest: Dest) {
    let (kept, total) = read_bounded(&proxy, io).await;
    let proto = if dest.tls { "tls" } else { "tcp" };
    record_stream(&proxy, &dest, proto, "stream", kept, Some(total)).await;
}

/// Emits a `stream` event for bytes kept (already reserved in the memory budget) out of `total`
/// sent, and searches them.
pub(crate) async fn record_stream(
    proxy: &Arc<Proxy>,
    dest: &Dest,
    proto: &str,
    label: &str,
    kept: Vec<u8>,
    total: Option<u64>,
) {
    let total = total.unwrap_or(kept.len() as u64);
    let seq = proxy.rec.emit(EventKind::Stream {
        proto: proto.into(),
        dst_addr: dest.addr.clone(),
        dst_port: dest.port,
        bytes_out: total,
        preview: (!kept.is_empty()).then(|| sniff::preview(&kept, 256)),
    });
    if total as usize > kept.len() {
        proxy.rec.emit(EventKind::Limit {
            what: "egress_stream".into(),
            detail: format!("event {seq}: {total} bytes, first {} searched", kept.len()),
        });
    }
    if !kept.is_empty() {
        let host = dest.host();
        let rec = Arc::clone(&proxy.rec);
        let held = kept.len();
        let label = label.to_string();
        proxy.rec.track(async move {
            rec.scan(
                seq,
                Some(host.clone()),
                Some(host),
                vec![Buffer::new(&label, kept)],
            )
            .await;
            rec.kept.release(held);
        });
    }
}
