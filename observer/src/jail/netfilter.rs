//! Network namespace plumbing for egress capture: programs the jail's own network namespace so
//! that every outbound attempt, whatever the client, lands on the egress listeners bound on
//! 127.0.0.1 / ::1 inside it, and anything else is dropped.
//!
//! Called once by the jail process while it is inside the new network namespace and still holds
//! `CAP_NET_ADMIN` over it (right after `unshare(CLONE_NEWUSER)` + `unshare(CLONE_NEWNET)`). Talks
//! to the kernel over netlink only: no `ip`/`nft` binary, no C library. See docs/egress.md,
//! "Network namespace plumbing", for the mechanism, the alternatives and the measurements.
//!
//! What `install` does, in order:
//! 1. one atomic nf_tables batch (table `inet egress`, see `nft.rs`): NAT output redirects DNS
//!    (TCP/UDP 53 to any address) to `dns_port` and every other TCP leaving the jail to
//!    `tcp_port`; other UDP is TPROXY'd in prerouting to `udp_port` with its destination intact;
//!    output and prerouting filter chains with policy drop accept only loopback, the jail's own
//!    addresses and redirected flows. Installed first, so no route exists without the filter.
//! 2. `lo` up, the host addresses `host_v4`/`host_v6` on it (no prefix route, no DAD);
//! 3. a `local` default route per family with the host address as source ("AnyIP"): every
//!    destination is local, so `connect()` reaches netfilter instead of failing with ENETUNREACH.
//!
//! No sysctl is needed (`route_localnet` stays 0: every packet stays on `lo`), except that IPv6 is
//! re-enabled on `lo` if the host made new namespaces start with it disabled.

mod nft;
mod nl;
mod rtnl;

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

pub use nft::TABLE;

#[derive(Debug, thiserror::Error)]
pub enum NetfilterError {
    #[error("invalid redirect plan: {0}")]
    Plan(String),
    #[error("cannot open a netlink socket ({what}): {source}")]
    Socket {
        what: &'static str,
        source: io::Error,
    },
    #[error("netlink i/o while trying to {what}: {source}")]
    Io { what: String, source: io::Error },
    #[error(
        "the kernel refused to {what}: {}{}{}",
        io::Error::from_raw_os_error(*.errno),
        .detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default(),
        if *.errno == libc::EPERM { " — the caller needs CAP_NET_ADMIN over this network namespace" } else { "" }
    )]
    Refused {
        what: String,
        errno: i32,
        detail: Option<String>,
    },
    #[error("no loopback interface in this network namespace: {0}")]
    NoLoopback(io::Error),
    #[error("sysctl {path}: {source}")]
    Sysctl { path: String, source: io::Error },
}

/// Where the egress listeners are, and the addresses the jail presents as its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectPlan {
    /// Transparent TCP listener (127.0.0.1 and ::1): every TCP connection leaving the jail.
    pub tcp_port: u16,
    /// DNS listeners, UDP and TCP (127.0.0.1 and ::1): port 53 of any address.
    pub dns_port: u16,
    /// UDP catcher (127.0.0.1 and ::1, `IP_TRANSPARENT` + `IP_RECVORIGDSTADDR` /
    /// `IPV6_TRANSPARENT` + `IPV6_RECVORIGDSTADDR`): every other datagram, TPROXY'd.
    pub udp_port: u16,
    /// The jail's own non-loopback addresses, placed on `lo` and used as the source of outbound
    /// connections. Without a non-loopback address glibc's `getaddrinfo` with `AI_ADDRCONFIG` and
    /// a family resolves nothing, not even a literal IP, and `getsockname()` would show the
    /// destination itself.
    pub host_v4: Ipv4Addr,
    pub host_v6: Ipv6Addr,
}

/// A plausible home-network address; nothing special-cases it outside the jail.
pub const DEFAULT_HOST_V4: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 23);
/// A unique-local address (clients then prefer IPv4 first, as on most real hosts).
pub const DEFAULT_HOST_V6: Ipv6Addr = Ipv6Addr::new(0xfd42, 0x7, 0x1, 0, 0, 0, 0, 0x23);

impl RedirectPlan {
    pub fn new(tcp_port: u16, dns_port: u16, udp_port: u16) -> Self {
        RedirectPlan {
            tcp_port,
            dns_port,
            udp_port,
            host_v4: DEFAULT_HOST_V4,
            host_v6: DEFAULT_HOST_V6,
        }
    }

    pub fn validate(&self) -> Result<(), NetfilterError> {
        let bad = |m: String| Err(NetfilterError::Plan(m));
        if self.tcp_port == 0 || self.dns_port == 0 || self.udp_port == 0 {
            return bad("listener ports must not be 0".into());
        }
        // TCP DNS and the TCP proxy share the TCP port space, UDP DNS and the catcher the UDP one.
        if self.tcp_port == self.dns_port {
            return bad(format!("tcp_port and dns_port are both {}", self.tcp_port));
        }
        if self.udp_port == self.dns_port {
            return bad(format!("udp_port and dns_port are both {}", self.udp_port));
        }
        let v4 = self.host_v4;
        if v4.is_loopback()
            || v4.is_unspecified()
            || v4.is_multicast()
            || v4.is_broadcast()
            || v4.is_link_local()
        {
            return bad(format!("host_v4 {v4} is not a unicast host address"));
        }
        let v6 = self.host_v6;
        if v6.is_loopback()
            || v6.is_unspecified()
            || v6.is_multicast()
            || v6.to_ipv4_mapped().is_some()
            || (v6.segments()[0] & 0xffc0) == 0xfe80
        {
            return bad(format!("host_v6 {v6} is not a unicast host address"));
        }
        Ok(())
    }
}

fn loopback_index() -> Result<u32, NetfilterError> {
    // SAFETY: a NUL-terminated constant name.
    let i = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
    if i == 0 {
        return Err(NetfilterError::NoLoopback(io::Error::last_os_error()));
    }
    Ok(i)
}

/// Whether IPv6 exists in this namespace; re-enables it on `lo` when the host's settings made
/// new namespaces start with it disabled.
fn ipv6_on_lo() -> Result<bool, NetfilterError> {
    // /proc/sys/net is the view of the calling task's network namespace.
    let path = "/proc/sys/net/ipv6/conf/lo/disable_ipv6";
    let sysctl = |source| NetfilterError::Sysctl {
        path: path.into(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(v) if v.trim() == "0" => Ok(true),
        Ok(_) => {
            std::fs::write(path, "0").map_err(sysctl)?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // No IPv6 in this kernel: nothing in the jail can open an IPv6 socket either.
            tracing::warn!("no IPv6 in this network namespace; only IPv4 is plumbed");
            Ok(false)
        }
        Err(e) => Err(sysctl(e)),
    }
}

fn open(protocol: libc::c_int, what: &'static str) -> Result<nl::Socket, NetfilterError> {
    nl::Socket::open(protocol).map_err(|source| NetfilterError::Socket { what, source })
}

/// Sends `bytes` and maps the outcome onto the named steps.
fn transact(
    sock: &nl::Socket,
    bytes: &[u8],
    steps: &[(u32, String)],
    all: &str,
) -> Result<(), NetfilterError> {
    let seqs: Vec<u32> = steps.iter().map(|s| s.0).collect();
    sock.transact(bytes, &seqs).map_err(|e| match e {
        nl::TransactError::Io(source) => NetfilterError::Io {
            what: all.into(),
            source,
        },
        nl::TransactError::Refused(r) => NetfilterError::Refused {
            what: steps
                .iter()
                .find(|s| s.0 == r.seq)
                .map_or_else(|| all.to_string(), |s| s.1.clone()),
            errno: r.errno,
            detail: r.text,
        },
    })
}

/// A programmed namespace. Holds the nf_tables netlink socket: closing it makes the kernel wait
/// for the committed transaction's release (an RCU grace period, 2–15 ms measured here), so drop
/// it when that wait overlaps other work — after the rest of the jail setup — rather than at once.
/// The socket is close-on-exec, and useless without `CAP_NET_ADMIN` anyway.
#[derive(Debug)]
pub struct Installed {
    /// Whether IPv6 exists in the namespace (and was plumbed like IPv4).
    pub ipv6: bool,
    _nftables: nl::Socket,
}

/// Programs the calling task's network namespace for `plan`. Idempotent: a second call replaces
/// the table atomically. Any error means the namespace must not be used for a run (fail closed;
/// the nf_tables part is atomic, and without it the namespace has no route out anyway).
pub fn install(plan: &RedirectPlan) -> Result<Installed, NetfilterError> {
    let start = Instant::now();
    plan.validate()?;
    let lo = loopback_index()?;
    let ipv6 = ipv6_on_lo()?;

    let mut nf = open(libc::NETLINK_NETFILTER, "nf_tables")?;
    let rules = nft::ruleset(plan);
    let (batch, steps) = nft::encode_batch(&rules, || nf.next_seq());
    let steps: Vec<(u32, String)> = steps.into_iter().map(|s| (s.seq, s.what)).collect();
    transact(&nf, &batch, &steps, "install the nf_tables ruleset")?;

    // All link/address/route requests in one send; the kernel handles them in order.
    let mut rt = open(libc::NETLINK_ROUTE, "rtnetlink")?;
    let mut bytes = Vec::new();
    let mut steps = Vec::new();
    let mut add = |rt: &mut nl::Socket, what: String, f: &dyn Fn(u32) -> Vec<u8>| {
        let seq = rt.next_seq();
        bytes.extend(f(seq));
        steps.push((seq, what));
    };
    add(&mut rt, "bring lo up".into(), &|s| rtnl::link_up(s, lo));
    let mut hosts = vec![IpAddr::V4(plan.host_v4)];
    if ipv6 {
        hosts.push(IpAddr::V6(plan.host_v6));
    }
    for &h in &hosts {
        add(&mut rt, format!("add address {h} to lo"), &|s| {
            rtnl::add_host_address(s, lo, h)
        });
    }
    for &h in &hosts {
        add(
            &mut rt,
            format!("add a local default route from {h}"),
            &|s| rtnl::add_local_default_route(s, lo, h),
        );
    }
    transact(&rt, &bytes, &steps, "configure lo and routes")?;
    tracing::debug!(
        elapsed_us = start.elapsed().as_micros() as u64,
        ipv6,
        "network namespace plumbed"
    );
    Ok(Installed {
        ipv6,
        _nftables: nf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_with_clashing_or_zero_ports_are_refused() {
        assert!(RedirectPlan::new(1, 2, 3).validate().is_ok());
        assert!(RedirectPlan::new(5, 6, 5).validate().is_ok()); // TCP and UDP may share
        for (t, d, u) in [(0, 2, 3), (1, 0, 3), (1, 2, 0), (7, 7, 3), (1, 7, 7)] {
            let e = RedirectPlan::new(t, d, u).validate();
            assert!(matches!(e, Err(NetfilterError::Plan(_))), "{t} {d} {u}");
        }
    }

    #[test]
    fn host_addresses_must_be_unicast_and_not_loopback() {
        let mut p = RedirectPlan::new(1, 2, 3);
        for a in [
            "127.0.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "169.254.1.1",
        ] {
            p.host_v4 = a.parse().expect("v4");
            assert!(p.validate().is_err(), "{a}");
        }
        p.host_v4 = DEFAULT_HOST_V4;
        for a in ["::1", "::", "ff02::1", "::ffff:10.0.0.1", "fe80::1"] {
            p.host_v6 = a.parse().expect("v6");
            assert!(p.validate().is_err(), "{a}");
        }
    }

    #[test]
    fn refusals_name_the_step_and_explain_eperm() {
        let e = NetfilterError::Refused {
            what: "create chain nat_out".into(),
            errno: libc::EPERM,
            detail: None,
        };
        let s = e.to_string();
        assert!(
            s.contains("create chain nat_out") && s.contains("CAP_NET_ADMIN"),
            "{s}"
        );
        let e = NetfilterError::Refused {
            what: "rule 3 in chain pre_in".into(),
            errno: libc::EOPNOTSUPP,
            detail: Some("Could not process rule".into()),
        };
        assert!(e.to_string().contains("(Could not process rule)"));
    }
}
