//! rtnetlink requests: bring `lo` up, give it the jail's host addresses, and make every
//! destination local ("AnyIP") so a connect to any address reaches netfilter instead of failing
//! with ENETUNREACH.

use super::nl::Msg;
use std::net::IpAddr;

const RTM_NEWLINK: u16 = 16;
const RTM_NEWADDR: u16 = 20;
const RTM_NEWROUTE: u16 = 24;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_FLAGS: u16 = 8;
const IFA_F_NODAD: u32 = 0x02;
const IFA_F_NOPREFIXROUTE: u32 = 0x200;
const RTA_OIF: u16 = 4;
const RTA_PREFSRC: u16 = 7;
const RT_TABLE_LOCAL: u8 = 255;
const RTPROT_STATIC: u8 = 4;
const RT_SCOPE_HOST: u8 = 254;
const RTN_LOCAL: u8 = 2;

fn flags(extra: libc::c_int) -> u16 {
    (libc::NLM_F_REQUEST | libc::NLM_F_ACK | extra) as u16
}

fn family(a: IpAddr) -> u8 {
    match a {
        IpAddr::V4(_) => libc::AF_INET as u8,
        IpAddr::V6(_) => libc::AF_INET6 as u8,
    }
}

fn octets(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// `ip link set dev <index> up`
pub fn link_up(seq: u32, index: u32) -> Vec<u8> {
    let mut m = Msg::new(RTM_NEWLINK, flags(0), seq);
    // ifinfomsg: family, pad, type, index, flags, change
    let mut h = vec![libc::AF_UNSPEC as u8, 0, 0, 0];
    h.extend_from_slice(&(index as i32).to_ne_bytes());
    h.extend_from_slice(&(libc::IFF_UP as u32).to_ne_bytes());
    h.extend_from_slice(&(libc::IFF_UP as u32).to_ne_bytes());
    m.raw(&h);
    m.finish()
}

/// `ip addr replace <addr>/32|128 dev <index> nodad noprefixroute`: a host address with no
/// prefix route (an IPv6 prefix route on `lo` would become a reject route).
pub fn add_host_address(seq: u32, index: u32, addr: IpAddr) -> Vec<u8> {
    let replace = libc::NLM_F_CREATE | libc::NLM_F_REPLACE;
    let mut m = Msg::new(RTM_NEWADDR, flags(replace), seq);
    let plen = if addr.is_ipv4() { 32 } else { 128 };
    // ifaddrmsg: family, prefixlen, flags, scope, index
    let mut h = vec![family(addr), plen, 0, 0];
    h.extend_from_slice(&index.to_ne_bytes());
    m.raw(&h);
    let o = octets(addr);
    m.attr(IFA_LOCAL, &o).attr(IFA_ADDRESS, &o);
    m.attr_u32(IFA_FLAGS, IFA_F_NODAD | IFA_F_NOPREFIXROUTE);
    m.finish()
}

/// `ip route replace local default dev <index> src <src> table local`: every destination of
/// that family is local. Unlike a unicast default through `lo`, this works for IPv6 (the
/// kernel turns IPv6 unicast routes via `lo` into reject routes); IPv4 uses the same for
/// uniformity.
pub fn add_local_default_route(seq: u32, index: u32, src: IpAddr) -> Vec<u8> {
    let replace = libc::NLM_F_CREATE | libc::NLM_F_REPLACE;
    let mut m = Msg::new(RTM_NEWROUTE, flags(replace), seq);
    // rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags(u32)
    let mut h = vec![
        family(src),
        0,
        0,
        0,
        RT_TABLE_LOCAL,
        RTPROT_STATIC,
        RT_SCOPE_HOST,
        RTN_LOCAL,
    ];
    h.extend_from_slice(&0u32.to_ne_bytes());
    m.raw(&h);
    m.attr_u32(RTA_OIF, index).attr(RTA_PREFSRC, &octets(src));
    m.finish()
}
