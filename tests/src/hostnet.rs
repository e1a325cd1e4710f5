//! Listeners on the host's own network (outside any jail) that record what reaches them, for
//! tests proving that nothing does.

/// What a listener on the host's network received.
#[derive(Default, Debug)]
pub struct Seen {
    connections: usize,
    bytes: Vec<u8>,
    datagrams: usize,
}

/// TCP and UDP listeners on the host (outside the jail) that record everything they get. A TCP
/// listener with `answer` replies to each request with it (a real upstream).
pub struct HostListener {
    pub addr: std::net::SocketAddr,
    seen: std::sync::Arc<std::sync::Mutex<Seen>>,
}

impl HostListener {
    pub fn tcp(ip: std::net::IpAddr, answer: Option<String>) -> Option<HostListener> {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind((ip, 0)).ok()?;
        let addr = l.local_addr().ok()?;
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Seen::default()));
        let s2 = seen.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { continue };
                s2.lock().unwrap().connections += 1;
                let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                let mut buf = [0u8; 65536];
                let mut got = Vec::new();
                // Read until the head of a request is complete (or the peer stops).
                while let Ok(n @ 1..) = c.read(&mut buf) {
                    got.extend_from_slice(&buf[..n]);
                    if got.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                s2.lock().unwrap().bytes.extend_from_slice(&got);
                if let Some(a) = &answer {
                    let _ = write!(
                        c,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{a}",
                        a.len()
                    );
                }
            }
        });
        Some(HostListener { addr, seen })
    }

    pub fn udp(ip: std::net::IpAddr) -> Option<HostListener> {
        let s = std::net::UdpSocket::bind((ip, 0)).ok()?;
        let addr = s.local_addr().ok()?;
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Seen::default()));
        let s2 = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n) = s.recv(&mut buf) {
                let mut g = s2.lock().unwrap();
                g.datagrams += 1;
                g.bytes.extend_from_slice(&buf[..n]);
            }
        });
        Some(HostListener { addr, seen })
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn ip(&self) -> String {
        self.addr.ip().to_string()
    }

    pub fn snapshot(&self) -> (usize, usize, String) {
        let g = self.seen.lock().unwrap();
        (
            g.connections,
            g.datagrams,
            String::from_utf8_lossy(&g.bytes).into_owned(),
        )
    }
}

/// The host's own non-loopback address of a family, if it has one (the source address the
/// kernel would pick; connecting a UDP socket sends nothing).
pub fn host_address(v6: bool) -> Option<std::net::IpAddr> {
    let (bind, probe) = if v6 {
        ("[::]:0", "[2001:db8::1]:9")
    } else {
        ("0.0.0.0:0", "192.0.2.1:9")
    };
    let s = std::net::UdpSocket::bind(bind).ok()?;
    s.connect(probe).ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}
