//! Turning captured traffic into trace events, and every captured byte into canary searches.

use super::canary::reassemble::{Assembled, Reassembler};
use super::canary::{CanaryIndex, Compression, ScanReport};
use super::dns::fake::FakeIps;
use super::dns::tunnel::TunnelTracker;
use crate::trace::EventKind;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// Where egress events go. The return value is the event's sequence number in the trace, so a
/// `canary_hit` can name the event its value was found in (`in_event`).
pub trait EventSink: Send + Sync + 'static {
    fn emit(&self, kind: EventKind) -> u64;
}

impl<F: Fn(EventKind) -> u64 + Send + Sync + 'static> EventSink for F {
    fn emit(&self, kind: EventKind) -> u64 {
        self(kind)
    }
}

/// One captured buffer to search.
pub struct Buffer {
    pub label: String,
    pub data: Vec<u8>,
    pub declared: Option<Compression>,
}

impl Buffer {
    pub fn new(label: &str, data: impl Into<Vec<u8>>) -> Self {
        Buffer {
            label: label.into(),
            data: data.into(),
            declared: None,
        }
    }
}

/// Bytes held for searching across all connections at once (bodies and streams kept in
/// memory); past it, bytes are still counted and hashed but not kept.
pub const KEPT_BUDGET: usize = 256 << 20;
/// Searches running at once (CPU and decode memory are bounded by this times the per-buffer
/// budget).
const SCAN_SLOTS: usize = 2;

/// A shared byte budget (reserve before keeping, release after searching).
#[derive(Debug)]
pub struct KeptBudget {
    used: std::sync::atomic::AtomicUsize,
    cap: usize,
}

impl KeptBudget {
    pub fn new(cap: usize) -> Self {
        KeptBudget {
            used: std::sync::atomic::AtomicUsize::new(0),
            cap,
        }
    }

    /// Reserves up to `n` bytes; returns how many were granted.
    pub fn reserve(&self, n: usize) -> usize {
        use std::sync::atomic::Ordering;
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            let grant = n.min(self.cap.saturating_sub(cur));
            if grant == 0 {
                return 0;
            }
            match self.used.compare_exchange_weak(
                cur,
                cur + grant,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return grant,
                Err(now) => cur = now,
            }
        }
    }

    pub fn release(&self, n: usize) {
        self.used.fetch_sub(
            n.min(self.used.load(std::sync::atomic::Ordering::Relaxed)),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// Groups smaller than this are rescanned live on every new piece; bigger ones at flush.
const LIVE_RESCAN_BYTES: usize = 64 << 10;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded state stays consistent across a panic elsewhere (single-statement updates).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct Recorder {
    sink: Box<dyn EventSink>,
    index: Arc<CanaryIndex>,
    pub fake: Arc<FakeIps>,
    reasm: Mutex<Reassembler>,
    tunnel: Mutex<TunnelTracker>,
    /// (canary, chain) already reported from reassembled buffers.
    reported: Mutex<HashSet<(String, Vec<String>)>>,
    /// (canary, group) found in a single event: reassembly adds nothing there.
    single: Mutex<HashSet<(String, String)>>,
    /// Searches still running, awaited at flush so no hit is lost at shutdown.
    tasks: tokio_util::task::TaskTracker,
    scan_slots: tokio::sync::Semaphore,
    /// Memory held by captured bytes waiting for their search.
    pub kept: KeptBudget,
}

impl Recorder {
    pub fn new(sink: Box<dyn EventSink>, index: Arc<CanaryIndex>, fake: Arc<FakeIps>) -> Self {
        Recorder {
            sink,
            index,
            fake,
            reasm: Mutex::default(),
            tunnel: Mutex::default(),
            reported: Mutex::default(),
            single: Mutex::default(),
            tasks: tokio_util::task::TaskTracker::new(),
            scan_slots: tokio::sync::Semaphore::new(SCAN_SLOTS),
            kept: KeptBudget::new(KEPT_BUDGET),
        }
    }

    pub fn emit(&self, kind: EventKind) -> u64 {
        self.sink.emit(kind)
    }

    pub fn note(&self, note: &str, detail: String) {
        self.emit(EventKind::TracerNote {
            note: note.into(),
            detail,
        });
    }

    fn hits(
        &self,
        seq: u64,
        host: Option<&str>,
        group: Option<&str>,
        report: ScanReport,
        reassembled: bool,
    ) {
        for h in report.hits {
            if reassembled {
                let g = group.unwrap_or_default().to_string();
                if lock(&self.single).contains(&(h.canary.clone(), g))
                    || !lock(&self.reported).insert((h.canary.clone(), h.chain.clone()))
                {
                    continue;
                }
            } else if let Some(g) = group {
                lock(&self.single).insert((h.canary.clone(), g.to_string()));
            }
            let service_hosts = self
                .index
                .needles()
                .get(h.needle)
                .map(|n| n.service_hosts.clone())
                .unwrap_or_default();
            self.emit(EventKind::CanaryHit {
                canary: h.canary,
                credential: h.credential,
                chain: h.chain,
                in_event: seq,
                host: host.map(str::to_string),
                service_hosts,
            });
        }
        for l in report.limits {
            if reassembled && !lock(&self.reported).insert((l.what.clone(), l.chain.clone())) {
                continue;
            }
            self.emit(EventKind::Limit {
                what: "egress_decode".into(),
                detail: format!("{} at {} (event {seq})", l.what, l.chain.join(" → ")),
            });
        }
    }

    /// Searches the buffers of event `seq` (off the async threads: decoding is CPU work).
    pub async fn scan(
        self: &Arc<Self>,
        seq: u64,
        host: Option<String>,
        group: Option<String>,
        bufs: Vec<Buffer>,
    ) {
        let _slot = self.scan_slots.acquire().await;
        let me = Arc::clone(self);
        let job = tokio::task::spawn_blocking(move || {
            for b in bufs {
                let r = me.index.scan_encoded(&b.label, &b.data, b.declared);
                me.hits(seq, host.as_deref(), group.as_deref(), r, false);
            }
        });
        if let Err(e) = job.await {
            self.note(
                "egress_scan_failed",
                format!("canary search of event {seq} failed: {e}"),
            );
        }
    }

    async fn scan_assembled(self: &Arc<Self>, groups: Vec<Assembled>) {
        if groups.is_empty() {
            return;
        }
        let _slot = self.scan_slots.acquire().await;
        let me = Arc::clone(self);
        let job = tokio::task::spawn_blocking(move || {
            for a in groups {
                let r = me.index.scan(&a.label, &a.data);
                me.hits(a.last_seq, Some(&a.group), Some(&a.group), r, true);
            }
        });
        if let Err(e) = job.await {
            self.note(
                "egress_scan_failed",
                format!("reassembled canary search failed: {e}"),
            );
        }
    }

    /// After a DNS query was recorded as `seq`: tunnelling notes, canary search of the name and
    /// of the reassembled names under its parent.
    pub fn dns_query(self: &Arc<Self>, seq: u64, name: &str) {
        let notes = lock(&self.tunnel).observe(name);
        for n in notes {
            self.note("dns_tunnel_shape", n);
        }
        let name = name.trim_end_matches('.').to_string();
        let parent = super::canary::reassemble::split_parent(&name).map(|p| p.0);
        // Into the reassembly now, so a shutdown right after the answer cannot lose the name.
        let live = {
            let mut r = lock(&self.reasm);
            match r.add_dns(&name, seq) {
                Some(p) if r.dns_group_bytes(&p) <= LIVE_RESCAN_BYTES => r.dns_group(&p),
                _ => Vec::new(),
            }
        };
        // Dots split encoded runs; the name without them is searched too.
        let flat: String = name.split('.').collect();
        let bufs = vec![
            Buffer::new("dns", name.clone()),
            Buffer::new("dns-labels", flat),
        ];
        let me = Arc::clone(self);
        // The single-name search goes first: a value found there is not reported again from
        // the reassembly.
        self.track(async move {
            me.scan(seq, Some(name), parent, bufs).await;
            me.scan_assembled(live).await;
        });
    }

    /// After an HTTP request was recorded as `seq`: the request's parts feed the per-host reassembly.
    pub async fn http_pieces(
        self: &Arc<Self>,
        seq: u64,
        host: &str,
        path_and_query: &str,
        body: &[u8],
    ) {
        let live = {
            let mut r = lock(&self.reasm);
            r.add_http(host, path_and_query, body, seq);
            if r.http_group_bytes(host) <= LIVE_RESCAN_BYTES {
                r.http_group(host)
            } else {
                Vec::new()
            }
        };
        self.scan_assembled(live).await;
    }

    /// Runs `fut` in the background; [`flush`](Self::flush) waits for it.
    pub fn track<F: std::future::Future<Output = ()> + Send + 'static>(&self, fut: F) {
        self.tasks.spawn(fut);
    }

    /// Waits for background searches (bounded), then rescans every reassembly group in full:
    /// big groups are only searched here.
    pub async fn flush(self: &Arc<Self>) {
        self.tasks.close();
        if tokio::time::timeout(std::time::Duration::from_secs(30), self.tasks.wait())
            .await
            .is_err()
        {
            self.note(
                "egress_scan_failed",
                "canary searches still running after 30 s at shutdown".into(),
            );
        }
        let all = {
            let r = lock(&self.reasm);
            let mut v: Vec<Assembled> = r
                .dns_parents()
                .iter()
                .flat_map(|p| r.dns_group(p))
                .collect();
            v.extend(r.http_hosts().iter().flat_map(|h| r.http_group(h)));
            v
        };
        self.scan_assembled(all).await;
    }
}

#[cfg(test)]
mod tests {
    use super::KeptBudget;

    #[test]
    fn kept_budget_grants_partially_and_releases() {
        let b = KeptBudget::new(100);
        assert_eq!(b.reserve(60), 60);
        assert_eq!(b.reserve(60), 40);
        assert_eq!(b.reserve(1), 0);
        b.release(100);
        assert_eq!(b.reserve(30), 30);
        b.release(1000); // never underflows
        assert_eq!(b.reserve(100), 100);
    }
}
