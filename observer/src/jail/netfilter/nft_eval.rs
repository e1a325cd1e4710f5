//! A small evaluator of our nf_tables IR with the kernel's semantics for the expressions we use,
//! so unit tests can ask "what happens to this packet" of the ruleset itself. The real-kernel
//! tests (observer/tests/netfilter.rs) check that the kernel agrees.

use super::*;
use std::collections::HashMap;

/// A locally generated packet, as the output hook first sees it.
#[derive(Debug, Clone, Copy)]
pub struct Pkt {
    pub l4: u8,
    pub daddr: IpAddr,
    pub dport: u16,
    /// Belongs to a flow already redirected (conntrack `IPS_DST_NAT`).
    pub dnat: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Accept,
    Drop,
    /// Fell off the end (or `return` from a base chain): the chain's policy applies.
    Policy,
    Redirect(u16),
    Tproxy(u16),
}

/// Where a packet ends up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// NAT-redirected to the local listener on this port.
    Redirected(u16),
    /// Handed to the transparent UDP socket on this port, original destination intact.
    Tproxied(u16),
    /// Delivered untouched inside the jail.
    Local,
    Dropped,
}

fn network_header(daddr: IpAddr, l4: u8) -> Vec<u8> {
    match daddr {
        IpAddr::V4(a) => {
            let mut h = vec![0u8; 20];
            h[9] = l4;
            h[16..20].copy_from_slice(&a.octets());
            h
        }
        IpAddr::V6(a) => {
            let mut h = vec![0u8; 40];
            h[6] = l4;
            h[24..40].copy_from_slice(&a.octets());
            h
        }
    }
}

struct Ctx {
    nh: Vec<u8>,
    th: Vec<u8>,
    family: u8,
}

/// One rule: `Some(verdict)` when it decides, `None` when a comparison fails or it falls through.
fn eval_rule(r: &Rule, p: &Pkt, cx: &Ctx) -> Option<Verdict> {
    let mut regs: HashMap<u32, Vec<u8>> = HashMap::new();
    let mut tproxied = None;
    for e in &r.exprs {
        match e {
            Expr::Meta { key, dreg } => {
                let v = match *key {
                    META_NFPROTO => cx.family,
                    META_L4PROTO => p.l4,
                    k => panic!("meta key {k} not modelled"),
                };
                regs.insert(*dreg, vec![v]);
            }
            Expr::Payload {
                base,
                offset,
                len,
                dreg,
            } => {
                let src = if *base == PAYLOAD_NETWORK {
                    &cx.nh
                } else {
                    &cx.th
                };
                let (o, l) = (*offset as usize, *len as usize);
                regs.insert(*dreg, src[o..o + l].to_vec());
            }
            Expr::Bitwise {
                sreg,
                dreg,
                mask,
                xor,
            } => {
                let v = regs[sreg]
                    .iter()
                    .zip(mask)
                    .zip(xor)
                    .map(|((v, m), x)| (v & m) ^ x)
                    .collect();
                regs.insert(*dreg, v);
            }
            Expr::Cmp { sreg, op, data } => {
                let eq = regs[sreg][..data.len()] == data[..];
                if eq != (*op == CMP_EQ) {
                    return None;
                }
            }
            Expr::Ct { key, dreg } => {
                assert_eq!(*key, CT_STATUS);
                let s = if p.dnat { IPS_DST_NAT } else { 0 };
                regs.insert(*dreg, s.to_ne_bytes().to_vec());
            }
            Expr::Imm { dreg, data } => {
                regs.insert(*dreg, data.clone());
            }
            Expr::Redir { sreg_port } => {
                let b = &regs[sreg_port];
                return Some(Verdict::Redirect(u16::from_be_bytes([b[0], b[1]])));
            }
            Expr::Tproxy {
                family, sreg_port, ..
            } => {
                // The kernel's tproxy acts only on its own family (and on TCP/UDP); otherwise the
                // rule breaks.
                if *family != cx.family || (p.l4 != IPPROTO_UDP && p.l4 != IPPROTO_TCP) {
                    return None;
                }
                let b = &regs[sreg_port];
                tproxied = Some(u16::from_be_bytes([b[0], b[1]]));
            }
            Expr::Verdict(code) => {
                return Some(match (*code, tproxied) {
                    (NF_ACCEPT, Some(port)) => Verdict::Tproxy(port),
                    (NF_ACCEPT, None) => Verdict::Accept,
                    (NF_DROP, _) => Verdict::Drop,
                    (NFT_RETURN, _) => Verdict::Policy,
                    (c, _) => panic!("verdict {c} not modelled"),
                });
            }
        }
    }
    None
}

fn run_chain(rs: &Ruleset, chain: &str, p: &Pkt) -> Verdict {
    let policy = rs
        .chains
        .iter()
        .find(|c| c.name == chain)
        .map(|c| c.policy)
        .expect("chain exists");
    let mut th = vec![0u8; 8];
    th[2..4].copy_from_slice(&p.dport.to_be_bytes());
    let cx = Ctx {
        nh: network_header(p.daddr, p.l4),
        th,
        family: if p.daddr.is_ipv4() {
            NFPROTO_IPV4
        } else {
            NFPROTO_IPV6
        },
    };
    let verdict = rs
        .rules
        .iter()
        .filter(|r| r.chain == chain)
        .find_map(|r| eval_rule(r, p, &cx))
        .unwrap_or(Verdict::Policy);
    match verdict {
        Verdict::Policy if policy == NF_DROP => Verdict::Drop,
        Verdict::Policy => Verdict::Accept,
        v => v,
    }
}

/// The path of a locally generated packet: nat output, filter output, then (looped back
/// through `lo`) prerouting.
pub fn fate(rs: &Ruleset, pkt: Pkt) -> Fate {
    let mut p = pkt;
    let mut redirected = None;
    match run_chain(rs, NAT_OUT, &p) {
        Verdict::Redirect(port) => {
            // REDIRECT in the output hook rewrites to the family's loopback address.
            p.daddr = match p.daddr {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            };
            p.dport = port;
            p.dnat = true;
            redirected = Some(port);
        }
        Verdict::Drop => return Fate::Dropped,
        _ => {}
    }
    if run_chain(rs, FILTER_OUT, &p) != Verdict::Accept {
        return Fate::Dropped;
    }
    match run_chain(rs, PRE_IN, &p) {
        Verdict::Accept => redirected.map_or(Fate::Local, Fate::Redirected),
        Verdict::Tproxy(port) => Fate::Tproxied(port),
        _ => Fate::Dropped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: u16 = 15001;
    const DNS: u16 = 15353;
    const UDP: u16 = 15002;

    fn plan() -> RedirectPlan {
        RedirectPlan::new(TCP, DNS, UDP)
    }

    fn pkt(l4: u8, addr: &str, dport: u16) -> Pkt {
        Pkt {
            l4,
            daddr: addr.parse().expect("address"),
            dport,
            dnat: false,
        }
    }

    fn fate_of(l4: u8, addr: &str, dport: u16) -> Fate {
        fate(&ruleset(&plan()), pkt(l4, addr, dport))
    }

    const ICMP: u8 = 1;
    const ICMPV6: u8 = 58;
    const SCTP: u8 = 132;

    #[test]
    fn every_tcp_destination_outside_the_jail_lands_on_the_proxy() {
        for (a, p) in [
            ("203.0.113.7", 4444),
            ("45.61.136.17", 8443),
            ("2001:db8::1", 443),
            ("198.18.0.5", 80), // a fake address our DNS handed out
            ("fd7a:3c4e:91b2:5d00::9", 443),
            ("169.254.169.254", 80), // cloud metadata
            ("128.0.0.1", 80),       // just outside 127/8
            ("126.255.255.255", 80),
            ("::2", 80),
        ] {
            assert_eq!(fate_of(IPPROTO_TCP, a, p), Fate::Redirected(TCP), "{a}:{p}");
        }
    }

    #[test]
    fn dns_to_any_resolver_lands_on_the_dns_server_even_on_loopback() {
        for a in [
            "8.8.8.8",
            "1.1.1.1",
            "127.0.0.53",
            "127.0.0.1",
            "2001:4860:4860::8888",
            "::1",
            "192.168.1.23",
        ] {
            for l4 in [IPPROTO_UDP, IPPROTO_TCP] {
                assert_eq!(fate_of(l4, a, 53), Fate::Redirected(DNS), "{l4} {a}");
            }
        }
    }

    #[test]
    fn other_udp_is_tproxied_with_its_destination_intact() {
        for (a, p) in [
            ("203.0.113.50", 9001),
            ("2001:db8::50", 9001),
            ("224.0.0.251", 5353),
            ("255.255.255.255", 67),
            ("8.8.8.8", 443), // QUIC
        ] {
            assert_eq!(fate_of(IPPROTO_UDP, a, p), Fate::Tproxied(UDP), "{a}:{p}");
        }
    }

    #[test]
    fn the_jails_own_servers_are_reached_untouched() {
        let host4 = plan().host_v4.to_string();
        let host6 = plan().host_v6.to_string();
        for a in [
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            host4.as_str(),
            host6.as_str(),
        ] {
            for l4 in [IPPROTO_TCP, IPPROTO_UDP] {
                assert_eq!(fate_of(l4, a, 3000), Fate::Local, "{l4} {a}");
            }
        }
        // The listeners themselves are loopback too: no redirect loop.
        assert_eq!(fate_of(IPPROTO_TCP, "127.0.0.1", TCP), Fate::Local);
    }

    #[test]
    fn anything_else_is_dropped() {
        for (l4, a) in [
            (ICMP, "203.0.113.7"),
            (ICMPV6, "2001:db8::1"),
            (SCTP, "203.0.113.7"),
            (SCTP, "2001:db8::1"),
            (47, "203.0.113.7"), // GRE
        ] {
            assert_eq!(fate_of(l4, a, 0), Fate::Dropped, "{l4} {a}");
        }
        // Loopback ICMP (errors for local traffic) stays allowed.
        assert_eq!(fate_of(ICMP, "127.0.0.1", 0), Fate::Local);
    }

    #[test]
    fn replies_of_redirected_flows_pass_whatever_their_destination() {
        let rs = ruleset(&plan());
        // A listener's reply to a client whose source was the jail's host address.
        let mut p = pkt(IPPROTO_UDP, "192.168.1.23", 40000);
        p.dnat = true;
        assert_eq!(fate(&rs, p), Fate::Local);
        p.daddr = "203.0.113.9".parse().expect("addr");
        assert_eq!(fate(&rs, p), Fate::Local);
    }

    #[test]
    fn prefix_masks_cover_partial_bytes() {
        assert_eq!(prefix_mask(4, 8), vec![255, 0, 0, 0]);
        assert_eq!(prefix_mask(4, 12), vec![255, 240, 0, 0]);
        assert_eq!(prefix_mask(4, 32), vec![255; 4]);
        assert_eq!(prefix_mask(16, 0), vec![0; 16]);
    }

    #[test]
    fn the_batch_has_one_acked_message_per_step_and_consistent_lengths() {
        let rs = ruleset(&plan());
        let mut seq = 100;
        let (bytes, steps) = encode_batch(&rs, || {
            seq += 1;
            seq
        });
        assert_eq!(steps.len(), 3 + rs.chains.len() + rs.rules.len());
        // Walk the messages: lengths add up exactly, begin and end frame the batch.
        let mut at = 0;
        let mut types = Vec::new();
        while at < bytes.len() {
            let len = u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("4")) as usize;
            types.push(u16::from_ne_bytes(
                bytes[at + 4..at + 6].try_into().expect("2"),
            ));
            assert!(len >= 20 && len.is_multiple_of(4));
            at += len;
        }
        assert_eq!(at, bytes.len());
        assert_eq!(types.first(), Some(&NFNL_MSG_BATCH_BEGIN));
        assert_eq!(types.last(), Some(&NFNL_MSG_BATCH_END));
        assert_eq!(types.len(), steps.len() + 2);
    }
}
