//! Datagrams to any port other than DNS, TPROXY'd to one socket: recorded (bounded) and searched.

use super::record::{Buffer, Recorder};
use super::{Ctl, OriginalDst};
use crate::trace::EventKind;
use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage,
};
use std::collections::HashSet;
use std::io::IoSliceMut;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use tokio::io::Interest;

/// Datagram events per run before only a count is kept.
pub const MAX_DATAGRAM_EVENTS: usize = 2000;
const MAX_FLOWS: usize = 4096;

fn to_std(s: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(SocketAddr::from((v4.ip(), v4.port())));
    }
    s.as_sockaddr_in6()
        .map(|v6| SocketAddr::from((v6.ip(), v6.port())))
}

/// One datagram with its source and (when netfilter told us) original destination.
fn recv_one(
    fd: i32,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<SocketAddr>, Option<SocketAddr>)> {
    let mut iov = [IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!(libc::sockaddr_in6);
    let msg = recvmsg::<SockaddrStorage>(fd, &mut iov, Some(&mut space), MsgFlags::MSG_TRUNC)
        .map_err(std::io::Error::from)?;
    let mut dst = None;
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            match c {
                ControlMessageOwned::Ipv4OrigDstAddr(sa) => {
                    let ip = std::net::Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr));
                    dst = Some(SocketAddr::from((ip, u16::from_be(sa.sin_port))));
                }
                ControlMessageOwned::Ipv6OrigDstAddr(sa) => {
                    let ip = std::net::Ipv6Addr::from(sa.sin6_addr.s6_addr);
                    dst = Some(SocketAddr::from((ip, u16::from_be(sa.sin6_port))));
                }
                _ => {}
            }
        }
    }
    let src = msg.address.as_ref().and_then(to_std);
    Ok((msg.bytes, src, dst))
}

pub(crate) async fn udp_loop(
    rec: Arc<Recorder>,
    ctl: Ctl,
    sock: std::net::UdpSocket,
    od: OriginalDst,
) -> Result<(), String> {
    sock.set_nonblocking(true).map_err(|e| e.to_string())?;
    let v6 = sock.local_addr().map(|a| a.is_ipv6()).unwrap_or(false);
    // Ask for the original destination (the jail may have set it already; asking twice is harmless).
    let _ = if v6 {
        setsockopt(&sock, sockopt::Ipv6OrigDstAddr, &true)
    } else {
        setsockopt(&sock, sockopt::Ipv4OrigDstAddr, &true)
    };
    let local = sock.local_addr().ok();
    let sock = tokio::net::UdpSocket::from_std(sock).map_err(|e| e.to_string())?;
    let fd = sock.as_raw_fd();
    let mut buf = vec![0u8; 65536];
    let mut shutdown = ctl.shutdown.clone();
    let mut st = FlowState {
        rec,
        od,
        local,
        flows: HashSet::new(),
        events: 0,
        dropped: 0,
    };
    loop {
        let r = tokio::select! {
            r = sock.async_io(Interest::READABLE, || recv_one(fd, &mut buf)) => r,
            _ = crate::egress::stopped(&mut shutdown) => break,
        };
        match r {
            Ok((n, src, dst)) => st.datagram(&buf[..n.min(buf.len())], n, src, dst),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("recvmsg: {e}")),
        }
    }
    // Datagrams the jail sent before the end are still queued: take them too.
    // The fd is non-blocking: this stops at EAGAIN.
    while let Ok((n, src, dst)) = recv_one(fd, &mut buf) {
        st.datagram(&buf[..n.min(buf.len())], n, src, dst);
    }
    let FlowState { rec, dropped, .. } = st;
    if dropped > 0 {
        rec.emit(EventKind::Limit {
            what: "egress_datagrams".into(),
            detail: format!(
                "{dropped} datagrams after the first {MAX_DATAGRAM_EVENTS} were not recorded"
            ),
        });
    }
    Ok(())
}

struct FlowState {
    rec: Arc<Recorder>,
    od: OriginalDst,
    local: Option<SocketAddr>,
    flows: HashSet<(SocketAddr, SocketAddr)>,
    events: usize,
    dropped: u64,
}

impl FlowState {
    fn datagram(
        &mut self,
        kept: &[u8],
        n: usize,
        src: Option<SocketAddr>,
        dst: Option<SocketAddr>,
    ) {
        let rec = &self.rec;
        let dst = dst.or(match self.od {
            OriginalDst::LocalAddrFallback => self.local,
            OriginalDst::Netfilter => None,
        });
        let dst = dst.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        let src = src.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        if self.events >= MAX_DATAGRAM_EVENTS {
            self.dropped += 1;
            return;
        }
        self.events += 1;
        let name = rec.fake.lookup_name(dst.ip());
        if self.flows.len() < MAX_FLOWS && self.flows.insert((src, dst)) {
            rec.emit(EventKind::Connection {
                proto: "udp".into(),
                dst_addr: dst.ip().to_string(),
                dst_port: dst.port(),
                src_port: Some(src.port()),
                name: name.clone(),
            });
        }
        let seq = rec.emit(EventKind::Stream {
            proto: "udp".into(),
            dst_addr: dst.ip().to_string(),
            dst_port: dst.port(),
            bytes_out: n as u64,
            preview: (!kept.is_empty()).then(|| super::proxy::sniff::preview(kept, 256)),
        });
        if !kept.is_empty() {
            let host = name.unwrap_or_else(|| host_of(dst.ip()));
            let r2 = Arc::clone(rec);
            let data = kept.to_vec();
            rec.track(async move {
                r2.scan(
                    seq,
                    Some(host.clone()),
                    Some(host),
                    vec![Buffer::new("datagram", data)],
                )
                .await
            });
        }
    }
}

fn host_of(ip: IpAddr) -> String {
    ip.to_string()
}
