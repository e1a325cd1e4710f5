//! The jail's end of egress capture: program the network namespace (netfilter redirect), bind the
//! listeners inside it, and pass them to the supervisor, which serves them (DNS, proxy, catcher).

use super::netfilter::{self, Installed, RedirectPlan};
use super::sys::{cvt_i, own};
use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use serde::{Deserialize, Serialize};
use std::io::{IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// How many sockets of each kind follow, in this order, in the message's fds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq, Eq)]
pub struct Counts {
    pub tcp: usize,
    pub dns_udp: usize,
    pub dns_tcp: usize,
    pub udp: usize,
}

/// The listeners as the supervisor receives them.
#[derive(Debug, Default)]
pub struct EgressFds {
    pub tcp: Vec<OwnedFd>,
    pub dns_udp: Vec<OwnedFd>,
    pub dns_tcp: Vec<OwnedFd>,
    pub udp: Vec<OwnedFd>,
}

#[derive(Debug, thiserror::Error)]
pub enum EgressFdError {
    #[error("netfilter: {0}")]
    Netfilter(#[from] netfilter::NetfilterError),
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
    #[error("passing listeners: {0}")]
    Pass(String),
}

fn socket(domain: i32, ty: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: plain socket call.
    Ok(own(cvt_i(unsafe {
        libc::socket(domain, ty | libc::SOCK_CLOEXEC, 0)
    })?))
}

fn setopt(fd: &OwnedFd, level: i32, name: i32) -> std::io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: a valid int option value.
    cvt_i(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        )
    })
    .map(|_| ())
}

fn bind(fd: &OwnedFd, addr: SocketAddr) -> std::io::Result<()> {
    let (storage, len) = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: zeroed sockaddr_in is valid.
            let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            s.sin_family = libc::AF_INET as u16;
            s.sin_port = a.port().to_be();
            s.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            // SAFETY: sockaddr_in fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut st as *mut libc::sockaddr_storage).cast(), s) };
            (st, std::mem::size_of::<libc::sockaddr_in>())
        }
        SocketAddr::V6(a) => {
            // SAFETY: zeroed sockaddr_in6 is valid.
            let mut s: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            s.sin6_family = libc::AF_INET6 as u16;
            s.sin6_port = a.port().to_be();
            s.sin6_addr.s6_addr = a.ip().octets();
            let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut st as *mut libc::sockaddr_storage).cast(), s) };
            (st, std::mem::size_of::<libc::sockaddr_in6>())
        }
    };
    // SAFETY: storage holds a valid sockaddr of `len` bytes.
    cvt_i(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len as u32,
        )
    })
    .map(|_| ())
}

fn listen(fd: &OwnedFd) -> std::io::Result<()> {
    // SAFETY: plain listen.
    cvt_i(unsafe { libc::listen(fd.as_raw_fd(), 1024) }).map(|_| ())
}

/// Ports for this run's listeners: random in 20000–29999, below the ephemeral range so no
/// client socket of the skill collides with them.
pub fn pick_ports() -> (u16, u16, u16) {
    let mut b = [0u8; 6];
    // SAFETY: getrandom into a local buffer.
    unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    let p = |i: usize| 20000 + (u16::from_ne_bytes([b[i], b[i + 1]]) % 10000);
    let tcp = p(0);
    let mut dns = p(2);
    let mut udp = p(4);
    while dns == tcp {
        dns = 20000 + (dns - 19999) % 10000;
    }
    while udp == dns || udp == tcp {
        udp = 20000 + (udp - 19999) % 10000;
    }
    (tcp, dns, udp)
}

/// Programs the namespace and binds the listeners (needs CAP_NET_ADMIN in the namespace). The
/// returned guard must live as long as the jail (it holds the nf_tables socket).
pub fn setup(plan: &RedirectPlan) -> Result<(Installed, Counts, Vec<OwnedFd>), EgressFdError> {
    let installed = netfilter::install(plan)?;
    let mut addrs: Vec<std::net::IpAddr> = vec![Ipv4Addr::LOCALHOST.into()];
    if installed.ipv6 {
        addrs.push(Ipv6Addr::LOCALHOST.into());
    }
    let fam = |a: &std::net::IpAddr| {
        if a.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        }
    };
    let (mut tcp, mut dns_udp, mut dns_tcp, mut udp) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for a in &addrs {
        let s = socket(fam(a), libc::SOCK_STREAM)?;
        setopt(&s, libc::SOL_SOCKET, libc::SO_REUSEADDR)?;
        if a.is_ipv6() {
            setopt(&s, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY)?;
        }
        bind(&s, SocketAddr::new(*a, plan.tcp_port))?;
        listen(&s)?;
        tcp.push(s);

        let s = socket(fam(a), libc::SOCK_DGRAM)?;
        if a.is_ipv6() {
            setopt(&s, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY)?;
        }
        bind(&s, SocketAddr::new(*a, plan.dns_port))?;
        dns_udp.push(s);

        let s = socket(fam(a), libc::SOCK_STREAM)?;
        setopt(&s, libc::SOL_SOCKET, libc::SO_REUSEADDR)?;
        if a.is_ipv6() {
            setopt(&s, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY)?;
        }
        bind(&s, SocketAddr::new(*a, plan.dns_port))?;
        listen(&s)?;
        dns_tcp.push(s);

        let s = socket(fam(a), libc::SOCK_DGRAM)?;
        if a.is_ipv4() {
            setopt(&s, libc::SOL_IP, libc::IP_TRANSPARENT)?;
            setopt(&s, libc::SOL_IP, libc::IP_RECVORIGDSTADDR)?;
        } else {
            setopt(&s, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY)?;
            setopt(&s, libc::SOL_IPV6, libc::IPV6_TRANSPARENT)?;
            setopt(&s, libc::SOL_IPV6, libc::IPV6_RECVORIGDSTADDR)?;
        }
        bind(&s, SocketAddr::new(*a, plan.udp_port))?;
        udp.push(s);
    }
    let counts = Counts {
        tcp: tcp.len(),
        dns_udp: dns_udp.len(),
        dns_tcp: dns_tcp.len(),
        udp: udp.len(),
    };
    let mut all = tcp;
    all.extend(dns_udp);
    all.extend(dns_tcp);
    all.extend(udp);
    Ok((installed, counts, all))
}

/// Sends the listeners over a unix socket (one message: counts as JSON, fds as SCM_RIGHTS).
pub fn send(sock: RawFd, counts: &Counts, fds: &[OwnedFd]) -> Result<(), EgressFdError> {
    let header = serde_json::to_vec(counts).map_err(|e| EgressFdError::Pass(e.to_string()))?;
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let iov = [IoSlice::new(&header)];
    let cmsg = [ControlMessage::ScmRights(&raw)];
    sendmsg::<()>(sock, &iov, &cmsg, MsgFlags::empty(), None)
        .map_err(|e| EgressFdError::Pass(e.to_string()))?;
    Ok(())
}

/// Receives what `send` sent.
pub fn recv(sock: RawFd) -> Result<EgressFds, EgressFdError> {
    let mut buf = [0u8; 512];
    let mut cmsg = nix::cmsg_space!([RawFd; 16]);
    let (n, fds) = {
        let mut iov = [IoSliceMut::new(&mut buf)];
        let msg = recvmsg::<()>(sock, &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC)
            .map_err(|e| EgressFdError::Pass(e.to_string()))?;
        let mut fds = Vec::new();
        for c in msg
            .cmsgs()
            .map_err(|e| EgressFdError::Pass(e.to_string()))?
        {
            if let ControlMessageOwned::ScmRights(v) = c {
                fds.extend(v.into_iter().map(own));
            }
        }
        (msg.bytes, fds)
    };
    let counts: Counts = serde_json::from_slice(&buf[..n])
        .map_err(|e| EgressFdError::Pass(format!("bad header: {e}")))?;
    let total = counts.tcp + counts.dns_udp + counts.dns_tcp + counts.udp;
    if fds.len() != total {
        return Err(EgressFdError::Pass(format!(
            "expected {total} sockets, got {}",
            fds.len()
        )));
    }
    let mut it = fds.into_iter();
    let mut take = |n: usize| -> Vec<OwnedFd> { it.by_ref().take(n).collect() };
    Ok(EgressFds {
        tcp: take(counts.tcp),
        dns_udp: take(counts.dns_udp),
        dns_tcp: take(counts.dns_tcp),
        udp: take(counts.udp),
    })
}
