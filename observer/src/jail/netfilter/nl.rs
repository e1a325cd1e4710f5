//! A minimal netlink client: message building (header, attributes, nesting), one socket per
//! protocol, and acknowledgement parsing with the kernel's extended error text.
//!
//! Hand-written because the two jobs (rtnetlink for link/address/route, nfnetlink for nf_tables)
//! need a few dozen bytes each, and no pure-Rust crate models nf_tables expressions (see
//! docs/egress.md, "Network namespace plumbing").

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NLMSG_HDRLEN: usize = 16;
const NLA_HDRLEN: usize = 4;
pub const NLA_F_NESTED: u16 = 0x8000;
const NLMSG_ERROR: u16 = 2;
const SOL_NETLINK: libc::c_int = 270;
const NETLINK_CAP_ACK: libc::c_int = 10;
const NETLINK_EXT_ACK: libc::c_int = 11;
/// Flags of an error message: the original request was cut to its header; TLVs follow.
const NLM_F_CAPPED: u16 = 0x100;
const NLM_F_ACK_TLVS: u16 = 0x200;
const NLMSGERR_ATTR_MSG: u16 = 1;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One netlink message under construction.
pub struct Msg {
    buf: Vec<u8>,
}

impl Msg {
    pub fn new(ty: u16, flags: u16, seq: u32) -> Self {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, patched by finish()
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
        Msg { buf }
    }

    fn pad(&mut self) {
        let n = align4(self.buf.len());
        self.buf.resize(n, 0);
    }

    /// A fixed family header (ifinfomsg, rtmsg, nfgenmsg, …).
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(bytes);
        self.pad();
        self
    }

    pub fn attr(&mut self, ty: u16, payload: &[u8]) -> &mut Self {
        let len = (NLA_HDRLEN + payload.len()) as u16;
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(payload);
        self.pad();
        self
    }

    /// A NUL-terminated string attribute.
    pub fn attr_str(&mut self, ty: u16, s: &str) -> &mut Self {
        let mut v = Vec::with_capacity(s.len() + 1);
        v.extend_from_slice(s.as_bytes());
        v.push(0);
        self.attr(ty, &v)
    }

    /// A 32-bit attribute in network order (nf_tables convention).
    pub fn attr_be32(&mut self, ty: u16, v: u32) -> &mut Self {
        self.attr(ty, &v.to_be_bytes())
    }

    /// A 32-bit attribute in host order (rtnetlink convention).
    pub fn attr_u32(&mut self, ty: u16, v: u32) -> &mut Self {
        self.attr(ty, &v.to_ne_bytes())
    }

    /// A nested attribute whose members `f` writes.
    pub fn nest(&mut self, ty: u16, f: impl FnOnce(&mut Msg)) -> &mut Self {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        self.buf
            .extend_from_slice(&(ty | NLA_F_NESTED).to_ne_bytes());
        f(self);
        let len = (self.buf.len() - start) as u16;
        self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        self
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.pad();
        let len = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

/// The kernel refused one message.
#[derive(Debug)]
pub struct Refused {
    pub seq: u32,
    pub errno: i32,
    /// The extended ack text ("Could not process rule: …"), when the kernel gave one.
    pub text: Option<String>,
}

/// What one received buffer said about our requests.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Acks {
    pub ok: Vec<u32>,
    pub refused: Vec<(u32, i32, Option<String>)>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The extended-ack message text among the TLVs that follow an error.
fn ext_ack_text(tlvs: &[u8]) -> Option<String> {
    let mut at = 0;
    while at + NLA_HDRLEN <= tlvs.len() {
        let len = u16_at(tlvs, at)? as usize;
        let ty = u16_at(tlvs, at + 2)? & !NLA_F_NESTED;
        if len < NLA_HDRLEN || at + len > tlvs.len() {
            return None;
        }
        if ty == NLMSGERR_ATTR_MSG {
            let s = &tlvs[at + NLA_HDRLEN..at + len];
            let s = s.split(|&c| c == 0).next().unwrap_or(s);
            return Some(String::from_utf8_lossy(s).into_owned());
        }
        at += align4(len);
    }
    None
}

/// Parses the acknowledgements (and errors) in one buffer read from a netlink socket. Other
/// message types are skipped; a malformed buffer ends the parse at the last whole message.
pub fn parse_acks(buf: &[u8]) -> Acks {
    let mut acks = Acks::default();
    let mut at = 0;
    while at + NLMSG_HDRLEN <= buf.len() {
        let (Some(len), Some(ty), Some(flags), Some(seq)) = (
            u32_at(buf, at),
            u16_at(buf, at + 4),
            u16_at(buf, at + 6),
            u32_at(buf, at + 8),
        ) else {
            break;
        };
        let len = len as usize;
        if len < NLMSG_HDRLEN || at + len > buf.len() {
            break;
        }
        let body = &buf[at + NLMSG_HDRLEN..at + len];
        if ty == NLMSG_ERROR {
            if let Some(err) = u32_at(body, 0) {
                let err = err as i32;
                if err == 0 {
                    acks.ok.push(seq);
                } else {
                    // After the errno comes the request: its header only when capped.
                    let orig_len = if flags & NLM_F_CAPPED != 0 {
                        NLMSG_HDRLEN
                    } else {
                        u32_at(body, 4).map(|l| l as usize).unwrap_or(NLMSG_HDRLEN)
                    };
                    let text = if flags & NLM_F_ACK_TLVS != 0 {
                        body.get(4 + align4(orig_len)..).and_then(ext_ack_text)
                    } else {
                        None
                    };
                    acks.refused.push((seq, -err, text));
                }
            }
        }
        at += align4(len);
    }
    acks
}

/// A bound netlink socket of one protocol.
#[derive(Debug)]
pub struct Socket {
    fd: OwnedFd,
    seq: u32,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt_int(fd: &OwnedFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> i32 {
    // SAFETY: v outlives the call and its size is passed.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    }
}

impl Socket {
    pub fn open(protocol: libc::c_int) -> io::Result<Self> {
        // SAFETY: plain socket call.
        let fd = cvt(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                protocol,
            )
        })?;
        // SAFETY: fd is fresh and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // Best effort: older kernels lack them; errors are then reported without the text.
        setsockopt_int(&fd, SOL_NETLINK, NETLINK_EXT_ACK, 1);
        setsockopt_int(&fd, SOL_NETLINK, NETLINK_CAP_ACK, 1);
        // Replies are queued during sendmsg; the timeout only guards against a kernel that
        // never answers, so the jail fails instead of hanging.
        let tv = libc::timeval {
            tv_sec: 2,
            tv_usec: 0,
        };
        // SAFETY: tv outlives the call and its size is passed.
        cvt(unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        })?;
        // SAFETY: a zeroed sockaddr_nl is the kernel-assigned address.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: sa is a valid sockaddr_nl of the size passed.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        })?;
        Ok(Socket { fd, seq: 0 })
    }

    pub fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    fn send(&self, bytes: &[u8]) -> io::Result<()> {
        // SAFETY: a zeroed sockaddr_nl addresses the kernel.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: bytes and sa are valid for the lengths passed.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != bytes.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "short netlink send",
            ));
        }
        Ok(())
    }

    /// Sends `bytes` (one message or a batch) and waits until every sequence number in `want`
    /// is acknowledged. The first refusal ends the wait.
    pub fn transact(&self, bytes: &[u8], want: &[u32]) -> Result<(), TransactError> {
        self.send(bytes).map_err(TransactError::Io)?;
        let mut pending: Vec<u32> = want.to_vec();
        let mut buf = vec![0u8; 32 * 1024];
        while !pending.is_empty() {
            // SAFETY: buf is valid for its length.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(TransactError::Io(e));
            }
            let acks = parse_acks(&buf[..n as usize]);
            if let Some((seq, errno, text)) = acks.refused.into_iter().next() {
                return Err(TransactError::Refused(Refused { seq, errno, text }));
            }
            pending.retain(|s| !acks.ok.contains(s));
        }
        Ok(())
    }
}

#[derive(Debug)]
pub enum TransactError {
    Io(io::Error),
    Refused(Refused),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err_msg(seq: u32, errno: i32, flags: u16, tlv_text: Option<&str>) -> Vec<u8> {
        let mut m = Msg::new(NLMSG_ERROR, flags, seq);
        let mut body = (-errno).to_ne_bytes().to_vec();
        // The capped original header.
        body.extend_from_slice(&16u32.to_ne_bytes());
        body.extend_from_slice(&[0; 12]);
        m.raw(&body);
        if let Some(t) = tlv_text {
            m.attr_str(NLMSGERR_ATTR_MSG, t);
        }
        m.finish()
    }

    #[test]
    fn attributes_are_padded_and_nests_sized() {
        let mut m = Msg::new(0x0a06, 0x5, 7);
        m.attr_str(1, "egress"); // 4 + 7 -> 11, padded to 12
        m.nest(4, |m| {
            m.attr_be32(1, 3);
        });
        let b = m.finish();
        assert_eq!(b.len(), 16 + 12 + 4 + 8);
        assert_eq!(u32_at(&b, 0), Some(b.len() as u32));
        assert_eq!(u16_at(&b, 16), Some(11));
        assert_eq!(&b[20..27], b"egress\0");
        assert_eq!(u16_at(&b, 28), Some(12));
        assert_eq!(u16_at(&b, 30), Some(4 | NLA_F_NESTED));
        assert_eq!(&b[36..40], &3u32.to_be_bytes());
    }

    #[test]
    fn acks_and_refusals_are_told_apart_with_the_kernel_text() {
        let mut buf = err_msg(3, 0, 0, None);
        buf.extend(err_msg(
            4,
            libc::EOPNOTSUPP,
            NLM_F_CAPPED | NLM_F_ACK_TLVS,
            Some("Could not process rule"),
        ));
        let a = parse_acks(&buf);
        assert_eq!(a.ok, vec![3]);
        assert_eq!(
            a.refused,
            vec![(
                4,
                libc::EOPNOTSUPP,
                Some("Could not process rule".to_string())
            )]
        );
    }

    #[test]
    fn truncated_or_lying_buffers_do_not_panic() {
        let good = err_msg(9, libc::EPERM, NLM_F_CAPPED | NLM_F_ACK_TLVS, Some("x"));
        for cut in 0..good.len() {
            let _ = parse_acks(&good[..cut]);
        }
        let mut lying = good.clone();
        lying[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(parse_acks(&lying), Acks::default());
        let mut short = good;
        short[0..4].copy_from_slice(&3u32.to_ne_bytes());
        assert_eq!(parse_acks(&short), Acks::default());
    }
}
