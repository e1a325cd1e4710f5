//! Stream adapters: replaying sniffed bytes, counting bytes for handshake records.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A stream whose first bytes were already read (to sniff the protocol) and are replayed.
pub struct Prefixed<IO> {
    prefix: Vec<u8>,
    pos: usize,
    inner: IO,
}

impl<IO> Prefixed<IO> {
    pub fn new(prefix: Vec<u8>, inner: IO) -> Self {
        Prefixed {
            prefix,
            pos: 0,
            inner,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Prefixed<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.pos < self.prefix.len() {
            let n = (self.prefix.len() - self.pos).min(buf.remaining());
            let start = self.pos;
            buf.put_slice(&self.prefix[start..start + n]);
            self.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Prefixed<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Bytes read from (`from_client`) and written to (`to_client`) the client, and a copy of the
/// first `capture_cap` bytes the client sent (to fall back to a raw record when a parser
/// rejects the stream).
#[derive(Debug, Default)]
pub struct Counters {
    pub from_client: AtomicU64,
    pub to_client: AtomicU64,
    capture_cap: usize,
    captured: std::sync::Mutex<Vec<u8>>,
}

impl Counters {
    pub fn get(&self) -> (u64, u64) {
        (
            self.from_client.load(Ordering::Relaxed),
            self.to_client.load(Ordering::Relaxed),
        )
    }

    fn record(&self, data: &[u8]) {
        if self.capture_cap == 0 {
            return;
        }
        let mut c = self.captured.lock().unwrap_or_else(|e| e.into_inner());
        let room = self.capture_cap.saturating_sub(c.len());
        c.extend_from_slice(&data[..room.min(data.len())]);
    }

    /// The captured prefix of what the client sent.
    pub fn captured(&self) -> Vec<u8> {
        self.captured
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

pub struct Counted<IO> {
    inner: IO,
    pub counters: Arc<Counters>,
}

impl<IO> Counted<IO> {
    pub fn new(inner: IO) -> Self {
        Self::with_capture(inner, 0)
    }

    /// Also keeps a copy of the first `cap` bytes read from the client.
    pub fn with_capture(inner: IO, cap: usize) -> Self {
        Counted {
            inner,
            counters: Arc::new(Counters {
                capture_cap: cap,
                ..Counters::default()
            }),
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Counted<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.counters.from_client.fetch_add(n, Ordering::Relaxed);
        self.counters.record(&buf.filled()[before..]);
        r
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Counted<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.counters
                .to_client
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
