//! Real-kernel tests of `jail::netfilter`: the test binary re-executes itself in a fresh user +
//! network namespace (as the jail does), installs the plan, binds the egress listeners and then
//! behaves like a skill trying every kind of egress. Nothing is mocked.
//!
//! The child's checks live in `netfilter/child.rs`; this file spawns it (as the current user, and as root
//! also as an unprivileged user) and proves that nothing reached the host's loopback.

#[path = "netfilter/child.rs"]
mod child;
#[path = "netfilter/sock.rs"]
mod sock;

use std::io::ErrorKind;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, UdpSocket};
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};
use std::sync::Mutex;

/// Decoy ports on the host are shared between the tests.
static HOST_PORTS: Mutex<()> = Mutex::new(());

/// The entry point of the re-executed child; a no-op in a normal run.
#[test]
fn netns_child() {
    if let Ok(ports) = std::env::var(child::ENV) {
        child::main(&ports);
    }
}

/// Writes `data` to a /proc file with raw syscalls (we are between fork and exec).
fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> std::io::Result<()> {
    // SAFETY: path is NUL-terminated, data valid for its length.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if n != data.len() as isize {
            return Err(err);
        }
    }
    Ok(())
}

fn cvt(r: libc::c_int) -> std::io::Result<()> {
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs the child in new user + network namespaces, as `as_user` (uid, gid) when given. The
/// child maps itself to root of its user namespace, as the jail's stage 1 does.
fn spawn_child(ports: (u16, u16, u16), as_user: Option<(u32, u32)>) -> std::io::Result<Output> {
    // SAFETY: getters.
    let (uid, gid) = as_user.unwrap_or(unsafe { (libc::geteuid(), libc::getegid()) });
    let uid_map = format!("0 {uid} 1\n");
    let gid_map = format!("0 {gid} 1\n");
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", "netns_child", "--nocapture", "--test-threads=1"])
        .env(child::ENV, format!("{},{},{}", ports.0, ports.1, ports.2));
    if let Some((u, g)) = as_user {
        cmd.uid(u).gid(g); // std also clears supplementary groups when dropping root
    }
    // SAFETY: the closure makes only raw syscalls on data prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            // setuid cleared "dumpable", which would leave /proc/self/*_map owned by root.
            cvt(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0))?;
            cvt(libc::unshare(libc::CLONE_NEWUSER))?;
            write_proc(c"/proc/self/setgroups", b"deny")?;
            write_proc(c"/proc/self/uid_map", uid_map.as_bytes())?;
            write_proc(c"/proc/self/gid_map", gid_map.as_bytes())?;
            cvt(libc::unshare(libc::CLONE_NEWNET))?;
            Ok(())
        });
    }
    cmd.output()
}

/// Sockets on the host's loopback at every port the child uses; none may see anything.
struct HostDecoys {
    tcp: Vec<TcpListener>,
    udp: Vec<UdpSocket>,
}

fn free_port_pair() -> (TcpListener, UdpSocket) {
    for _ in 0..100 {
        let Ok(t) = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)) else {
            continue;
        };
        let Ok(port) = t.local_addr().map(|a| a.port()) else {
            continue;
        };
        if let Ok(u) = UdpSocket::bind((Ipv4Addr::LOCALHOST, port)) {
            return (t, u);
        }
    }
    panic!("no free TCP+UDP port pair on the host's loopback");
}

impl HostDecoys {
    /// Binds the three planned ports on the host (so they are ours) and, where possible, the
    /// original destinations' ports the child uses.
    fn new() -> (Self, (u16, u16, u16)) {
        let mut d = HostDecoys {
            tcp: Vec::new(),
            udp: Vec::new(),
        };
        let mut ports = [0u16; 3];
        for p in &mut ports {
            let (t, u) = free_port_pair();
            *p = t.local_addr().expect("local addr").port();
            d.tcp.push(t);
            d.udp.push(u);
        }
        for port in child::DESTINATION_PORTS {
            for ip in [
                std::net::IpAddr::V4(Ipv4Addr::LOCALHOST),
                Ipv6Addr::LOCALHOST.into(),
            ] {
                // Ports in use elsewhere (or privileged ones when unprivileged) are skipped.
                if let Ok(t) = TcpListener::bind(SocketAddr::new(ip, port)) {
                    d.tcp.push(t);
                }
                if let Ok(u) = UdpSocket::bind(SocketAddr::new(ip, port)) {
                    d.udp.push(u);
                }
            }
        }
        for t in &d.tcp {
            t.set_nonblocking(true).expect("nonblocking");
        }
        for u in &d.udp {
            u.set_nonblocking(true).expect("nonblocking");
        }
        (d, (ports[0], ports[1], ports[2]))
    }

    fn assert_untouched(&self) {
        for t in &self.tcp {
            match t.accept() {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                other => panic!("host listener {:?} got {other:?}", t.local_addr()),
            }
        }
        let mut buf = [0u8; 64];
        for u in &self.udp {
            match u.recv_from(&mut buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                other => panic!("host UDP socket {:?} got {other:?}", u.local_addr()),
            }
        }
    }
}

fn run_and_check(as_user: Option<(u32, u32)>) {
    let _g = HOST_PORTS.lock().unwrap_or_else(|e| e.into_inner());
    let (decoys, ports) = HostDecoys::new();
    let out = match spawn_child(ports, as_user) {
        Ok(o) => o,
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EPERM | libc::ENOSPC | libc::EINVAL)
            ) =>
        {
            println!("SKIPPED: this host does not allow the child's user namespace: {e}");
            return;
        }
        Err(e) => panic!("cannot start the namespace child: {e}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // libtest's "test netns_child ... " may prefix the first line.
    for l in stdout
        .lines()
        .filter_map(|l| l.find(child::REPORT).map(|i| &l[i..]))
    {
        println!("{l}");
    }
    assert!(
        out.status.success() && stdout.contains(child::DONE),
        "namespace child failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    decoys.assert_untouched();
}

#[test]
fn every_egress_lands_on_its_listener_for_the_current_user() {
    run_and_check(None);
}

#[test]
fn every_egress_lands_on_its_listener_for_an_unprivileged_user() {
    // SAFETY: getter.
    if unsafe { libc::geteuid() } != 0 {
        println!("(already unprivileged: covered by the current-user test)");
        run_and_check(None);
        return;
    }
    run_and_check(Some((65534, 65534)));
}
