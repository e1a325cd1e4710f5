//! The re-executed child: inside its own user + network namespace it installs the plan, binds the
//! egress listeners as the supervisor would, then acts like a skill trying every kind of egress.
//! Any failed check panics (non-zero exit, output shown by the parent).

use super::sock::*;
use observer::jail::netfilter::{install, NetfilterError, RedirectPlan};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::{Duration, Instant};

pub const ENV: &str = "SO_NETFILTER_CHILD_PORTS";
pub const REPORT: &str = "netfilter:";
pub const DONE: &str = "netfilter: all checks passed";
/// Original-destination ports the child uses; the parent watches them on the host's loopback.
pub const DESTINATION_PORTS: [u16; 7] = [4444, 8443, 443, 53, 9001, 3000, 3001];

const T: Duration = Duration::from_secs(2);

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

struct Listeners {
    t4: TcpListener,
    t6: TcpListener,
    dns_u4: UdpSocket,
    dns_u6: UdpSocket,
    dns_t4: TcpListener,
    dns_t6: TcpListener,
    catch4: UdpSocket,
    catch6: UdpSocket,
}

/// The UDP catcher as the egress side binds it: transparent, reporting original destinations.
fn catcher(addr: SocketAddr) -> UdpSocket {
    let s = UdpSocket::bind(addr).unwrap_or_else(|e| panic!("bind catcher {addr}: {e}"));
    let fd = s.as_raw_fd();
    if addr.is_ipv4() {
        setsockopt_int(fd, libc::SOL_IP, libc::IP_TRANSPARENT);
        setsockopt_int(fd, libc::SOL_IP, libc::IP_RECVORIGDSTADDR);
    } else {
        setsockopt_int(fd, libc::SOL_IPV6, libc::IPV6_TRANSPARENT);
        setsockopt_int(fd, libc::SOL_IPV6, libc::IPV6_RECVORIGDSTADDR);
    }
    s
}

fn bind_listeners(p: &RedirectPlan) -> Listeners {
    let tcp = |ip: IpAddr, port| {
        let l = TcpListener::bind((ip, port)).unwrap_or_else(|e| panic!("bind {ip}:{port}: {e}"));
        l.set_nonblocking(true).expect("nonblocking");
        l
    };
    let udp = |ip: IpAddr, port| {
        let u = UdpSocket::bind((ip, port)).unwrap_or_else(|e| panic!("bind {ip}:{port}: {e}"));
        u.set_read_timeout(Some(T)).expect("timeout");
        u
    };
    let (v4, v6) = (Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into());
    let c4 = catcher(SocketAddr::new(v4, p.udp_port));
    let c6 = catcher(SocketAddr::new(v6, p.udp_port));
    Listeners {
        t4: tcp(v4, p.tcp_port),
        t6: tcp(v6, p.tcp_port),
        dns_u4: udp(v4, p.dns_port),
        dns_u6: udp(v6, p.dns_port),
        dns_t4: tcp(v4, p.dns_port),
        dns_t6: tcp(v6, p.dns_port),
        catch4: c4,
        catch6: c6,
    }
}

fn accept_within(l: &TcpListener) -> Option<TcpStream> {
    let start = Instant::now();
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).expect("blocking");
                s.set_read_timeout(Some(T)).expect("timeout");
                return Some(s);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock && start.elapsed() < T => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => return None,
        }
    }
}

fn assert_nothing_pending(l: &TcpListener, what: &str) {
    match l.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("{what}: unexpected connection {other:?}"),
    }
}

fn canon(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// A skill connects to `dst`; the connection must land on `listener` with `dst` as its original
/// destination, and bytes must flow both ways.
fn tcp_lands(dst: SocketAddr, listener: &TcpListener, what: &str) {
    let c = TcpStream::connect_timeout(&dst, T).unwrap_or_else(|e| panic!("{what}: {e}"));
    exchange(c, dst, listener, what);
}

/// As `tcp_lands`, from a socket bound to `src` first.
fn tcp_lands_from(src: SocketAddr, dst: SocketAddr, listener: &TcpListener) {
    let what = format!("tcp {dst} from {src}");
    let fam = if src.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket call; the fd is owned right away.
    let fd = unsafe { libc::socket(fam, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket");
    // SAFETY: fresh fd; std takes ownership.
    let c = unsafe { TcpStream::from_raw_fd(fd) };
    // A blocking connect gives up after SO_SNDTIMEO.
    c.set_write_timeout(Some(T)).expect("timeout");
    let (ss, len) = sockaddr(src);
    // SAFETY: ss is valid for len bytes.
    let r = unsafe { libc::bind(fd, (&ss as *const libc::sockaddr_storage).cast(), len) };
    assert_eq!(r, 0, "{what}: bind: {}", std::io::Error::last_os_error());
    let (ss, len) = sockaddr(dst);
    // SAFETY: ss is valid for len bytes.
    let r = unsafe { libc::connect(fd, (&ss as *const libc::sockaddr_storage).cast(), len) };
    assert_eq!(r, 0, "{what}: connect: {}", std::io::Error::last_os_error());
    exchange(c, dst, listener, &what);
}

fn exchange(mut c: TcpStream, dst: SocketAddr, listener: &TcpListener, what: &str) {
    c.set_read_timeout(Some(T)).expect("timeout");
    let mut s = accept_within(listener).unwrap_or_else(|| panic!("{what}: nothing accepted"));
    assert_eq!(original_dst(&s), canon(dst), "{what}: original destination");
    assert_eq!(
        canon(s.peer_addr().expect("peer")),
        canon(c.local_addr().expect("local")),
        "{what}: the listener sees the client's own address"
    );
    c.write_all(b"ping").expect("write");
    let mut b = [0u8; 4];
    s.read_exact(&mut b).expect("listener read");
    assert_eq!(&b, b"ping");
    s.write_all(b"pong").expect("write back");
    c.read_exact(&mut b).expect("client read");
    assert_eq!(&b, b"pong", "{what}: reply");
}

/// A resolver-style client (connected UDP socket, as glibc uses) queries `resolver`: the query
/// must reach `server` and the server's reply must be accepted by the connected client.
fn dns_round_trip(resolver: SocketAddr, server: &UdpSocket) {
    let bind: SocketAddr = if resolver.is_ipv4() {
        sa("0.0.0.0:0")
    } else {
        sa("[::]:0")
    };
    let c = UdpSocket::bind(bind).expect("bind client");
    c.connect(resolver).expect("connect resolver");
    c.set_read_timeout(Some(T)).expect("timeout");
    let query = format!("query to {resolver}");
    c.send(query.as_bytes()).expect("send query");
    let mut b = [0u8; 512];
    let (n, src) = server
        .recv_from(&mut b)
        .unwrap_or_else(|e| panic!("DNS to {resolver} did not reach the server: {e}"));
    assert_eq!(&b[..n], query.as_bytes());
    server.send_to(b"answer", src).expect("reply");
    let (n, from) = c
        .recv_from(&mut b)
        .unwrap_or_else(|e| panic!("reply from {resolver} not accepted by the client: {e}"));
    assert_eq!(&b[..n], b"answer");
    assert_eq!(
        from, resolver,
        "the reply appears to come from the resolver"
    );
}

fn udp_caught(dst: SocketAddr, catcher: &UdpSocket) {
    let bind = if dst.is_ipv4() {
        sa("0.0.0.0:0")
    } else {
        sa("[::]:0")
    };
    let c = UdpSocket::bind(bind).expect("bind");
    let payload = format!("datagram to {dst}");
    c.send_to(payload.as_bytes(), dst).expect("send");
    let (data, src, orig) = recv_orig(catcher).unwrap_or_else(|| panic!("{dst}: not caught"));
    assert_eq!(data, payload.as_bytes());
    assert_eq!(orig, Some(dst), "{dst}: original destination");
    assert_eq!(src.port(), c.local_addr().expect("local").port());
}

fn stats(mut v: Vec<Duration>) -> String {
    v.sort();
    let us = |d: Duration| d.as_micros();
    format!(
        "min {} µs, median {} µs, max {} µs",
        us(v[0]),
        us(v[v.len() / 2]),
        us(v[v.len() - 1])
    )
}

pub fn main(ports: &str) {
    let p: Vec<u16> = ports.split(',').filter_map(|s| s.parse().ok()).collect();
    assert_eq!(p.len(), 3, "ports: {ports}");
    let plan = RedirectPlan::new(p[0], p[1], p[2]);
    let before4 = addrconfig_resolves(c"203.0.113.7", libc::AF_INET);

    let t0 = Instant::now();
    let installed = install(&plan).unwrap_or_else(|e| panic!("install: {e}"));
    let first = t0.elapsed();
    assert!(
        installed.ipv6,
        "IPv6 is available on this kernel and must be plumbed"
    );
    let l = bind_listeners(&plan);

    // TCP to any address and port, IPv4, IPv6 and IPv4-mapped IPv6.
    tcp_lands(sa("203.0.113.7:4444"), &l.t4, "tcp 203.0.113.7:4444");
    tcp_lands(sa("45.61.136.17:8443"), &l.t4, "tcp 45.61.136.17:8443");
    tcp_lands(sa("[2001:db8::1]:443"), &l.t6, "tcp [2001:db8::1]:443");
    tcp_lands(sa("[::ffff:203.0.113.9]:80"), &l.t4, "tcp via v4-mapped v6");
    tcp_lands(sa("169.254.169.254:80"), &l.t4, "tcp cloud metadata");
    // Clients bound to loopback or (every address being local) to any address first.
    for src in ["127.0.0.1:0", "10.9.9.9:0"] {
        tcp_lands_from(sa(src), sa("203.0.113.7:4444"), &l.t4);
    }
    tcp_lands_from(sa("[::1]:0"), sa("[2001:db8::1]:443"), &l.t6);
    let c = TcpStream::connect_timeout(&sa("203.0.113.7:4444"), T).expect("connect");
    let own = c.local_addr().expect("local").ip();
    assert_eq!(
        own,
        IpAddr::V4(plan.host_v4),
        "source address of outbound connections"
    );
    drop(c);
    drop(accept_within(&l.t4));

    // DNS to hard-coded resolvers, the stub resolver address and IPv6, over UDP and TCP.
    for r in ["8.8.8.8:53", "1.1.1.1:53", "127.0.0.53:53"] {
        dns_round_trip(sa(r), &l.dns_u4);
    }
    for r in ["[2001:4860:4860::8888]:53", "[::1]:53"] {
        dns_round_trip(sa(r), &l.dns_u6);
    }
    tcp_lands(sa("8.8.8.8:53"), &l.dns_t4, "dns over tcp 8.8.8.8");
    tcp_lands(
        sa("[2606:4700:4700::1111]:53"),
        &l.dns_t6,
        "dns over tcp v6",
    );
    assert_nothing_pending(&l.t4, "DNS over TCP must not reach the proxy");

    // Other UDP is caught with its original destination.
    udp_caught(sa("203.0.113.50:9001"), &l.catch4);
    udp_caught(sa("[2001:db8::50]:9001"), &l.catch6);
    udp_caught(sa("8.8.8.8:443"), &l.catch4);

    // An attacker listening on the destination port itself inside the jail gets nothing.
    let squat_t = TcpListener::bind(sa("0.0.0.0:4444")).expect("squat tcp");
    squat_t.set_nonblocking(true).expect("nonblocking");
    let squat_u = UdpSocket::bind(sa("0.0.0.0:9001")).expect("squat udp");
    squat_u.set_nonblocking(true).expect("nonblocking");
    tcp_lands(
        sa("203.0.113.7:4444"),
        &l.t4,
        "tcp with a squatter on :4444",
    );
    udp_caught(sa("203.0.113.50:9001"), &l.catch4);
    assert_nothing_pending(&squat_t, "squatting listener");
    assert!(
        squat_u.recv_from(&mut [0u8; 64]).is_err(),
        "squatting UDP socket got a datagram"
    );

    // The jail's own servers keep working, on loopback and on its host address.
    let web = TcpListener::bind(sa("127.0.0.1:3000")).expect("local server");
    web.set_nonblocking(true).expect("nonblocking");
    let _c = TcpStream::connect_timeout(&sa("127.0.0.1:3000"), T).expect("local connect");
    assert!(accept_within(&web).is_some(), "loopback server reached");
    let web6 = TcpListener::bind(sa("[::1]:3000")).expect("local server v6");
    web6.set_nonblocking(true).expect("nonblocking");
    let _c6 = TcpStream::connect_timeout(&sa("[::1]:3000"), T).expect("local connect v6");
    assert!(accept_within(&web6).is_some(), "loopback v6 server reached");
    let any = TcpListener::bind(sa("0.0.0.0:3001")).expect("server on all addresses");
    any.set_nonblocking(true).expect("nonblocking");
    let host = SocketAddr::new(plan.host_v4.into(), 3001);
    let _c7 = TcpStream::connect_timeout(&host, T).expect("connect to own host address");
    assert!(
        accept_within(&any).is_some(),
        "server reached via the host address"
    );
    let lu = UdpSocket::bind(sa("127.0.0.1:3002")).expect("local udp");
    lu.set_read_timeout(Some(T)).expect("timeout");
    UdpSocket::bind(sa("127.0.0.1:0"))
        .expect("bind")
        .send_to(b"local", sa("127.0.0.1:3002"))
        .expect("send local");
    assert!(
        lu.recv_from(&mut [0u8; 16]).is_ok(),
        "loopback UDP delivered"
    );
    assert_nothing_pending(&l.t4, "local traffic must not reach the proxy");
    assert_nothing_pending(&l.t6, "local traffic must not reach the proxy (v6)");

    // Anything else is dropped: raw ICMP is refused by the output filter (this child holds
    // CAP_NET_RAW in its namespace; the jail's processes do not even have that).
    for dst in ["203.0.113.7", "2001:db8::1"] {
        let e = icmp_echo(dst.parse().expect("ip")).expect_err("ICMP must be dropped");
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{dst}: {e}");
    }
    icmp_echo(IpAddr::V4(Ipv4Addr::LOCALHOST)).expect("loopback ICMP allowed");
    // UDP-Lite needs no privilege and is not UDP to netfilter: it must not slip through.
    const IPPROTO_UDPLITE: libc::c_int = 136;
    match send_with(
        libc::SOCK_DGRAM,
        IPPROTO_UDPLITE,
        b"lite",
        sa("203.0.113.50:9001"),
    ) {
        Err(e) if e.raw_os_error() == Some(libc::EPROTONOSUPPORT) => {}
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EPERM), "UDP-Lite: {e}"),
        Ok(()) => panic!("UDP-Lite to 203.0.113.50 was not dropped"),
    }
    // Multicast is neither caught nor delivered to a local socket (see docs: a known limit).
    let mdns = UdpSocket::bind(sa("0.0.0.0:5353")).expect("bind 5353");
    mdns.set_nonblocking(true).expect("nonblocking");
    let _ = UdpSocket::bind(sa("0.0.0.0:0"))
        .expect("bind")
        .send_to(b"mdns", sa("224.0.0.251:5353"));
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        mdns.recv_from(&mut [0u8; 16]).is_err(),
        "multicast delivered locally"
    );

    let after4 = addrconfig_resolves(c"203.0.113.7", libc::AF_INET);
    let after6 = addrconfig_resolves(c"2001:db8::1", libc::AF_INET6);
    assert!(
        after4 && after6,
        "AI_ADDRCONFIG lookups fail: v4 {after4} v6 {after6}"
    );

    // Idempotent: a second install replaces the table and everything still works.
    drop(installed);
    drop(install(&plan).unwrap_or_else(|e| panic!("second install: {e}")));
    tcp_lands(sa("203.0.113.7:4444"), &l.t4, "tcp after reinstall");
    dns_round_trip(sa("8.8.8.8:53"), &l.dns_u4);

    // Without CAP_NET_ADMIN, install fails closed with a clear error.
    let denied = std::thread::spawn(move || {
        drop_thread_caps();
        install(&RedirectPlan::new(1, 2, 3))
    })
    .join()
    .expect("thread");
    match denied {
        Err(e @ NetfilterError::Refused { errno, .. }) if errno == libc::EPERM => {
            assert!(e.to_string().contains("CAP_NET_ADMIN"), "{e}");
        }
        other => panic!("install without CAP_NET_ADMIN: {other:?}"),
    }

    // Cost per jail start, in fresh namespaces (this thread moves to each): install(), then
    // dropping its guard at once, or after 5 ms of other jail setup.
    let (mut inst, mut drop_now, mut drop_later) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..30 {
        // SAFETY: plain syscall; affects only this thread.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "unshare");
        let t = Instant::now();
        let g = install(&plan).unwrap_or_else(|e| panic!("install in a fresh namespace: {e}"));
        inst.push(t.elapsed());
        if i % 2 == 1 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let t = Instant::now();
        drop(g);
        if i % 2 == 1 {
            drop_later.push(t.elapsed());
        } else {
            drop_now.push(t.elapsed());
        }
    }
    println!(
        "{REPORT} AI_ADDRCONFIG AF_INET before install: {}",
        if before4 { "resolves" } else { "fails" }
    );
    println!("{REPORT} install() in the first namespace: {first:?}");
    println!("{REPORT} install() x30 fresh namespaces: {}", stats(inst));
    println!("{REPORT} guard dropped at once x15: {}", stats(drop_now));
    println!(
        "{REPORT} guard dropped after 5 ms x15: {}",
        stats(drop_later)
    );
    println!("{DONE}");
}
