//! Socket plumbing the namespace child needs and std does not offer: original destinations,
//! `IP_ORIGDSTADDR` control messages, raw and UDP-Lite sends, `AI_ADDRCONFIG` lookups.

use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SO_ORIGINAL_DST: libc::c_int = 80;
const IP6T_SO_ORIGINAL_DST: libc::c_int = 80;

pub fn setsockopt_int(fd: i32, level: i32, opt: i32) {
    let one: libc::c_int = 1;
    // SAFETY: `one` outlives the call and its size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(
        r,
        0,
        "setsockopt {level}/{opt}: {}",
        std::io::Error::last_os_error()
    );
}

pub fn from_in(a: &libc::sockaddr_in) -> SocketAddr {
    SocketAddr::new(
        Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)).into(),
        u16::from_be(a.sin_port),
    )
}

pub fn from_in6(a: &libc::sockaddr_in6) -> SocketAddr {
    SocketAddr::new(
        Ipv6Addr::from(a.sin6_addr.s6_addr).into(),
        u16::from_be(a.sin6_port),
    )
}

/// `SO_ORIGINAL_DST` / `IP6T_SO_ORIGINAL_DST` of an accepted, redirected connection.
pub fn original_dst(s: &TcpStream) -> SocketAddr {
    let v6 = s.local_addr().expect("local").is_ipv6();
    // SAFETY: a zeroed sockaddr_in6 is valid and large enough for either family.
    let mut buf: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
    let (level, opt) = if v6 {
        (libc::SOL_IPV6, IP6T_SO_ORIGINAL_DST)
    } else {
        (libc::SOL_IP, SO_ORIGINAL_DST)
    };
    // SAFETY: buf is valid for len bytes.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&mut buf as *mut libc::sockaddr_in6).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "original dst: {}", std::io::Error::last_os_error());
    if v6 {
        from_in6(&buf)
    } else {
        // SAFETY: the kernel wrote a sockaddr_in at the start of buf.
        from_in(unsafe { &*(&buf as *const libc::sockaddr_in6).cast::<libc::sockaddr_in>() })
    }
}

/// One datagram with its source and the original destination netfilter reports.
pub fn recv_orig(s: &UdpSocket) -> Option<(Vec<u8>, SocketAddr, Option<SocketAddr>)> {
    let mut data = vec![0u8; 2048];
    let mut ctrl = [0u64; 32];
    // SAFETY: zeroed storage is a valid sockaddr_storage.
    let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: zeroed msghdr, then every pointer set to live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as u32;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 32]>();
    // SAFETY: msg points at live buffers; the socket has a read timeout.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return None;
    }
    data.truncate(n as usize);
    let src = if from.ss_family as i32 == libc::AF_INET {
        // SAFETY: family says sockaddr_in.
        from_in(unsafe { &*(&from as *const libc::sockaddr_storage).cast() })
    } else {
        // SAFETY: family says sockaddr_in6.
        from_in6(unsafe { &*(&from as *const libc::sockaddr_storage).cast() })
    };
    let mut orig = None;
    // SAFETY: standard cmsg walk over the control buffer the kernel filled.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let d = libc::CMSG_DATA(c);
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::SOL_IP, libc::IP_ORIGDSTADDR) => {
                    orig = Some(from_in(&std::ptr::read_unaligned(d.cast())));
                }
                (libc::SOL_IPV6, libc::IPV6_ORIGDSTADDR) => {
                    orig = Some(from_in6(&std::ptr::read_unaligned(d.cast())));
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Some((data, src, orig))
}

pub fn sockaddr(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: zeroed storage is valid; it is filled as the family's sockaddr below.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match a {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in.
            let s = unsafe {
                &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>()
            };
            s.sin_family = libc::AF_INET as u16;
            s.sin_port = a.port().to_be();
            s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            (ss, size_of::<libc::sockaddr_in>() as u32)
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in6.
            let s = unsafe {
                &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            s.sin6_family = libc::AF_INET6 as u16;
            s.sin6_port = a.port().to_be();
            s.sin6_addr.s6_addr = a.ip().octets();
            (ss, size_of::<libc::sockaddr_in6>() as u32)
        }
    }
}

/// glibc's getaddrinfo with `AI_ADDRCONFIG` (Node's default, curl's, many others').
pub fn addrconfig_resolves(host: &std::ffi::CStr, family: libc::c_int) -> bool {
    // SAFETY: zeroed addrinfo hints are valid.
    let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_family = family;
    hints.ai_socktype = libc::SOCK_STREAM;
    hints.ai_flags = libc::AI_ADDRCONFIG;
    let mut res = std::ptr::null_mut();
    // SAFETY: valid C strings and out pointer; freed on success.
    let r = unsafe { libc::getaddrinfo(host.as_ptr(), std::ptr::null(), &hints, &mut res) };
    if r == 0 {
        // SAFETY: res came from getaddrinfo.
        unsafe { libc::freeaddrinfo(res) };
    }
    r == 0
}

/// Drops every capability of the calling thread only.
pub fn drop_thread_caps() {
    #[repr(C)]
    struct Hdr {
        version: u32,
        pid: i32,
    }
    let hdr = Hdr {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let data = [0u32; 6];
    // SAFETY: header and two zeroed data structs as capset(2) expects.
    let r = unsafe { libc::syscall(libc::SYS_capset, &hdr, data.as_ptr()) };
    assert_eq!(r, 0, "capset: {}", std::io::Error::last_os_error());
}

/// Sends `payload` to `dst` from a fresh socket of the given type and protocol.
pub fn send_with(
    ty: libc::c_int,
    proto: libc::c_int,
    payload: &[u8],
    dst: SocketAddr,
) -> std::io::Result<()> {
    let fam = if dst.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket call.
    let fd = unsafe { libc::socket(fam, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh fd.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let (ss, len) = sockaddr(dst);
    // SAFETY: payload and ss are valid for the lengths passed.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            payload.as_ptr().cast(),
            payload.len(),
            0,
            (&ss as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// An ICMP / ICMPv6 echo request through a raw socket.
pub fn icmp_echo(dst: IpAddr) -> std::io::Result<()> {
    let mut pkt = [8u8, 0, 0, 0, 0, 1, 0, 1];
    let proto = if dst.is_ipv4() {
        let sum: u32 = pkt
            .chunks(2)
            .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
            .sum();
        let ck = !((sum & 0xffff) + (sum >> 16)) as u16;
        pkt[2..4].copy_from_slice(&ck.to_be_bytes());
        libc::IPPROTO_ICMP
    } else {
        pkt[0] = 128; // the kernel fills in the ICMPv6 checksum
        libc::IPPROTO_ICMPV6
    };
    send_with(libc::SOCK_RAW, proto, &pkt, SocketAddr::new(dst, 0))
}
