//! Egress capture (issue 3): DNS server, TLS-intercepting proxy, raw stream capture, and the
//! canary search every captured byte goes through. Nothing here opens a socket to the outside:
//! the listeners are handed in already bound inside the jail's network namespace, and nothing is
//! forwarded unless a host is listed for passthrough *and* a connector is supplied.
//!
//! Call [`start`] inside a tokio runtime (or use [`EgressRuntime`] from synchronous code); events
//! go to the [`EventSink`]; [`EgressHandle::shutdown`] stops everything, flushes the reassembled
//! canary searches and reports which parts failed (any failure makes the run incomplete).

pub mod canary;
pub mod dns;
pub mod proxy;
pub mod record;
mod udp;

use canary::{CanaryIndex, Needle, ScanLimits};
use dns::fake::FakeIps;
pub use record::EventSink;
use record::Recorder;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("egress socket setup: {0}")]
    Socket(#[from] std::io::Error),
    #[error("egress runtime: {0}")]
    Runtime(String),
    #[error(
        "transparent TCP sockets were given but no proxy configuration (certificate authority)"
    )]
    NoProxyConfig,
}

/// Sockets bound inside the jail's network namespace, handed over by the jail.
#[derive(Debug, Default)]
pub struct EgressSockets {
    /// Where netfilter redirects every TCP connection; accepted sockets give the original
    /// destination through `SO_ORIGINAL_DST` / `IP6T_SO_ORIGINAL_DST`.
    pub transparent_tcp: Vec<std::net::TcpListener>,
    /// DNS over UDP and TCP (port 53 of any resolver is redirected here).
    pub dns_udp: Vec<std::net::UdpSocket>,
    pub dns_tcp: Vec<std::net::TcpListener>,
    /// TPROXY'd datagrams to any other port (`IP_TRANSPARENT` + `IP_RECVORIGDSTADDR` set).
    pub udp_catchall: Vec<std::net::UdpSocket>,
}

/// How the original destination of a redirected connection is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OriginalDst {
    /// The product path: ask netfilter (`SO_ORIGINAL_DST`, `IP_RECVORIGDSTADDR`); when it has no
    /// answer the destination is recorded as unknown (`0.0.0.0:0`).
    #[default]
    Netfilter,
    /// Tests without netfilter: when netfilter has no answer, use the listener's own address.
    LocalAddrFallback,
}

pub struct EgressConfig {
    pub needles: Vec<Needle>,
    /// The needles already indexed (the supervisor builds it while the jail starts); `needles`
    /// and `scan_limits` are ignored when given.
    pub index: Option<Arc<CanaryIndex>>,
    pub scan_limits: ScanLimits,
    pub original_dst: OriginalDst,
    /// Grace period for in-flight connections at shutdown.
    pub shutdown_grace: Duration,
    /// The TLS-intercepting proxy; required when `transparent_tcp` sockets are given.
    pub proxy: Option<proxy::ProxyConfig>,
}

impl Default for EgressConfig {
    fn default() -> Self {
        EgressConfig {
            needles: Vec::new(),
            index: None,
            scan_limits: ScanLimits::default(),
            original_dst: OriginalDst::default(),
            shutdown_grace: Duration::from_secs(2),
            proxy: None,
        }
    }
}

/// A part of egress capture that stopped or crashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartFailure {
    pub part: String,
    pub error: String,
}

/// Outcome of a run's egress capture.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressStatus {
    pub failures: Vec<PartFailure>,
}

impl EgressStatus {
    pub fn is_complete(&self) -> bool {
        self.failures.is_empty()
    }

    /// Reasons for the report's `incomplete_reasons`, each naming the part.
    pub fn incomplete_reasons(&self) -> Vec<String> {
        self.failures
            .iter()
            .map(|f| format!("egress {} failed: {}", f.part, f.error))
            .collect()
    }
}

/// Shared by all parts: failure list and shutdown signal.
#[derive(Clone)]
pub(crate) struct Ctl {
    pub failures: Arc<Mutex<Vec<PartFailure>>>,
    pub shutdown: watch::Receiver<bool>,
}

impl Ctl {
    pub fn fail(&self, part: &str, error: impl Into<String>) {
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if f.len() < 64 {
            f.push(PartFailure {
                part: part.into(),
                error: error.into(),
            });
        }
    }
}

pub struct EgressHandle {
    stop: watch::Sender<bool>,
    parts: Vec<(String, JoinHandle<Result<(), String>>)>,
    ctl: Ctl,
    rec: Arc<Recorder>,
    grace: Duration,
}

impl EgressHandle {
    /// The name a fake DNS address was handed out for (to name `connection` destinations).
    pub fn lookup_name(&self, ip: IpAddr) -> Option<String> {
        self.rec.fake.lookup_name(ip)
    }

    pub fn fake_ips(&self) -> Arc<FakeIps> {
        Arc::clone(&self.rec.fake)
    }

    /// Failures so far (a part that stopped or panicked), while running.
    pub fn failures(&self) -> Vec<PartFailure> {
        let mut f = self
            .ctl
            .failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for (name, h) in &self.parts {
            if h.is_finished() {
                f.push(PartFailure {
                    part: name.clone(),
                    error: "stopped unexpectedly".into(),
                });
            }
        }
        f
    }

    /// Stops every part, waits for them (in-flight connections get `grace`), runs the final
    /// reassembly searches, and reports failures.
    pub async fn shutdown(self) -> EgressStatus {
        let EgressHandle {
            stop,
            parts,
            ctl,
            rec,
            grace,
        } = self;
        let _ = stop.send(true);
        for (name, h) in parts {
            let abort = h.abort_handle();
            match tokio::time::timeout(grace + Duration::from_secs(3), h).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => ctl.fail(&name, e),
                Ok(Err(e)) if e.is_panic() => ctl.fail(&name, format!("panicked: {e}")),
                Ok(Err(e)) => ctl.fail(&name, format!("task ended: {e}")),
                Err(_) => {
                    abort.abort();
                    ctl.fail(&name, "did not stop within the shutdown grace period");
                }
            }
        }
        rec.flush().await;
        let failures = ctl
            .failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        EgressStatus { failures }
    }
}

/// Starts every part on the current tokio runtime.
pub fn start(
    sockets: EgressSockets,
    config: EgressConfig,
    sink: impl EventSink,
) -> Result<EgressHandle, EgressError> {
    let index = match config.index {
        Some(i) => i,
        None => Arc::new(CanaryIndex::with_limits(config.needles, config.scan_limits)),
    };
    for n in index.skipped_short() {
        tracing::warn!(canary = %n.canary, "canary value shorter than {} bytes is not searched", canary::MIN_NEEDLE_LEN);
    }
    let rec = Arc::new(Recorder::new(
        Box::new(sink),
        index,
        Arc::new(FakeIps::new()),
    ));
    let (stop, rx) = watch::channel(false);
    let ctl = Ctl {
        failures: Arc::default(),
        shutdown: rx,
    };
    let mut parts = Vec::new();
    if !sockets.dns_udp.is_empty() || !sockets.dns_tcp.is_empty() {
        let task = dns_part(&rec, sockets.dns_udp, sockets.dns_tcp, ctl.shutdown.clone())?;
        parts.push(("dns".to_string(), task));
    }
    if !sockets.transparent_tcp.is_empty() {
        let cfg = config.proxy.ok_or(EgressError::NoProxyConfig)?;
        let p = Arc::new(proxy::Proxy::new(cfg, Arc::clone(&rec), ctl.clone()));
        for l in sockets.transparent_tcp {
            l.set_nonblocking(true)?;
            let l = tokio::net::TcpListener::from_std(l)?;
            let task = tokio::spawn(proxy::accept_loop(
                Arc::clone(&p),
                l,
                config.original_dst,
                config.shutdown_grace,
            ));
            parts.push(("proxy".to_string(), task));
        }
    }
    for s in sockets.udp_catchall {
        let task = tokio::spawn(udp::udp_loop(
            Arc::clone(&rec),
            ctl.clone(),
            s,
            config.original_dst,
        ));
        parts.push(("udp".to_string(), task));
    }
    Ok(EgressHandle {
        stop,
        parts,
        ctl,
        rec,
        grace: config.shutdown_grace,
    })
}

fn dns_part(
    rec: &Arc<Recorder>,
    udp: Vec<std::net::UdpSocket>,
    tcp: Vec<std::net::TcpListener>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<JoinHandle<Result<(), String>>, EgressError> {
    let mut server = hickory_server::ServerFuture::new(dns::DnsHandler {
        rec: Arc::clone(rec),
    });
    for s in udp {
        s.set_nonblocking(true)?;
        server.register_socket(tokio::net::UdpSocket::from_std(s)?);
    }
    for l in tcp {
        l.set_nonblocking(true)?;
        server.register_listener(
            tokio::net::TcpListener::from_std(l)?,
            Duration::from_secs(10),
        );
    }
    Ok(tokio::spawn(async move {
        let ended = tokio::select! {
            r = server.block_until_done() => Some(r),
            _ = crate::egress::stopped(&mut shutdown) => None,
        };
        match ended {
            Some(r) => Err(format!("DNS server stopped: {r:?}")),
            None => server
                .shutdown_gracefully()
                .await
                .map_err(|e| e.to_string()),
        }
    }))
}

/// [`start`] on a runtime of its own, for synchronous callers (the supervisor).
pub struct EgressRuntime {
    rt: tokio::runtime::Runtime,
    handle: EgressHandle,
}

impl EgressRuntime {
    pub fn start(
        sockets: EgressSockets,
        config: EgressConfig,
        sink: impl EventSink,
    ) -> Result<Self, EgressError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("egress")
            .enable_all()
            .build()?;
        let handle = rt.block_on(async { start(sockets, config, sink) })?;
        Ok(EgressRuntime { rt, handle })
    }

    pub fn handle(&self) -> &EgressHandle {
        &self.handle
    }

    pub fn shutdown(self) -> EgressStatus {
        let EgressRuntime { rt, handle } = self;
        let status = rt.block_on(handle.shutdown());
        rt.shutdown_timeout(Duration::from_secs(2));
        status
    }
}

/// Resolves once shutdown was signalled (or the signal is gone). Returns nothing, so no watch
/// guard is held across an await in `select!` arms.
pub(crate) async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}
