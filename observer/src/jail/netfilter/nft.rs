//! The jail's nf_tables ruleset: built as data by a pure function (`ruleset`), then encoded as one
//! atomic nfnetlink batch (`encode_batch`).
//!
//! ```text
//! table inet egress {
//!   chain nat_out  { type nat hook output priority -100; policy accept;
//!     meta l4proto tcp th dport 53 redirect to :DNS      # any resolver, loopback ones too
//!     meta l4proto udp th dport 53 redirect to :DNS
//!     ip daddr 127.0.0.0/8 return                         # the jail's own local servers
//!     ip6 daddr ::1 return
//!     ip daddr HOST4 return
//!     ip6 daddr HOST6 return
//!     meta l4proto tcp redirect to :TCP }
//!   chain pre_in   { type filter hook prerouting priority -150; policy drop;
//!     ct status dnat accept                               # redirected flows, both directions
//!     ip daddr 127.0.0.0/8 accept
//!     ip6 daddr ::1 accept
//!     ip daddr HOST4 accept
//!     ip6 daddr HOST6 accept
//!     meta nfproto ipv4 meta l4proto udp tproxy ip to 127.0.0.1:UDP accept
//!     meta nfproto ipv6 meta l4proto udp tproxy ip6 to [::1]:UDP accept }
//!   chain filter_out { type filter hook output priority 0; policy drop;
//!     ct status dnat accept
//!     ip daddr 127.0.0.0/8 accept
//!     ip6 daddr ::1 accept
//!     ip daddr HOST4 accept
//!     ip6 daddr HOST6 accept
//!     meta l4proto udp accept }                           # on to pre_in: TPROXY or drop
//! }
//! ```

use super::nl::Msg;
use super::RedirectPlan;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const TABLE: &str = "egress";

// nfnetlink / nf_tables uapi numbers (linux/netfilter/nf_tables.h, nfnetlink.h).
const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_DELTABLE: u16 = 2;
pub const NFPROTO_INET: u8 = 1;
pub const NFPROTO_IPV4: u8 = 2;
pub const NFPROTO_IPV6: u8 = 10;

const NFTA_TABLE_NAME: u16 = 1;
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_CHAIN_POLICY: u16 = 5;
const NFTA_CHAIN_TYPE: u16 = 7;
const NFTA_HOOK_HOOKNUM: u16 = 1;
const NFTA_HOOK_PRIORITY: u16 = 2;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;

pub const HOOK_PRE_ROUTING: u32 = 0;
pub const HOOK_LOCAL_OUT: u32 = 3;

pub const META_NFPROTO: u32 = 15;
pub const META_L4PROTO: u32 = 16;
pub const CT_STATUS: u32 = 2;
/// `IPS_DST_NAT`: the flow was redirected.
pub const IPS_DST_NAT: u32 = 1 << 5;
pub const PAYLOAD_NETWORK: u32 = 1;
pub const PAYLOAD_TRANSPORT: u32 = 2;
pub const CMP_EQ: u32 = 0;
pub const CMP_NEQ: u32 = 1;
pub const NF_DROP: i32 = 0;
pub const NF_ACCEPT: i32 = 1;
pub const NFT_RETURN: i32 = -5;
const NF_NAT_RANGE_PROTO_SPECIFIED: u32 = 1 << 1;
/// 16-byte registers (an IPv6 address fits).
pub const REG1: u32 = 1;
pub const REG2: u32 = 2;

pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;

/// One nf_tables expression, as the kernel knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Meta {
        key: u32,
        dreg: u32,
    },
    Payload {
        base: u32,
        offset: u32,
        len: u32,
        dreg: u32,
    },
    /// `dreg = (sreg & mask) ^ xor`
    Bitwise {
        sreg: u32,
        dreg: u32,
        mask: Vec<u8>,
        xor: Vec<u8>,
    },
    Cmp {
        sreg: u32,
        op: u32,
        data: Vec<u8>,
    },
    Ct {
        key: u32,
        dreg: u32,
    },
    Imm {
        dreg: u32,
        data: Vec<u8>,
    },
    Verdict(i32),
    /// Redirect to the local address of the hook's family, port from `sreg` (network order).
    Redir {
        sreg_port: u32,
    },
    /// Hand the packet to the transparent socket at the address/port in the registers.
    Tproxy {
        family: u8,
        sreg_addr: u32,
        sreg_port: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainKind {
    Nat,
    Filter,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub name: &'static str,
    pub kind: ChainKind,
    pub hook: u32,
    pub priority: i32,
    /// `NF_ACCEPT` or `NF_DROP`.
    pub policy: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub chain: &'static str,
    pub exprs: Vec<Expr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ruleset {
    pub chains: Vec<Chain>,
    pub rules: Vec<Rule>,
}

pub const NAT_OUT: &str = "nat_out";
pub const PRE_IN: &str = "pre_in";
pub const FILTER_OUT: &str = "filter_out";

fn meta_is(key: u32, value: u8) -> Vec<Expr> {
    vec![
        Expr::Meta { key, dreg: REG1 },
        Expr::Cmp {
            sreg: REG1,
            op: CMP_EQ,
            data: vec![value],
        },
    ]
}

fn l4proto(p: u8) -> Vec<Expr> {
    meta_is(META_L4PROTO, p)
}

fn dport(port: u16) -> Vec<Expr> {
    vec![
        Expr::Payload {
            base: PAYLOAD_TRANSPORT,
            offset: 2,
            len: 2,
            dreg: REG1,
        },
        Expr::Cmp {
            sreg: REG1,
            op: CMP_EQ,
            data: port.to_be_bytes().to_vec(),
        },
    ]
}

fn prefix_mask(len: usize, prefix: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let bits = (prefix as usize).saturating_sub(i * 8).min(8);
            (0xffu16 << (8 - bits)) as u8
        })
        .collect()
}

/// `ip daddr NET/PREFIX` or `ip6 daddr NET/PREFIX`, with the family guard the inet table needs.
fn daddr_in(net: IpAddr, prefix: u8) -> Vec<Expr> {
    let (family, offset, bytes) = match net {
        IpAddr::V4(a) => (NFPROTO_IPV4, 16, a.octets().to_vec()),
        IpAddr::V6(a) => (NFPROTO_IPV6, 24, a.octets().to_vec()),
    };
    let len = bytes.len();
    let mut v = meta_is(META_NFPROTO, family);
    v.push(Expr::Payload {
        base: PAYLOAD_NETWORK,
        offset,
        len: len as u32,
        dreg: REG1,
    });
    if (prefix as usize) < len * 8 {
        v.push(Expr::Bitwise {
            sreg: REG1,
            dreg: REG1,
            mask: prefix_mask(len, prefix),
            xor: vec![0; len],
        });
    }
    let mask = prefix_mask(len, prefix);
    v.push(Expr::Cmp {
        sreg: REG1,
        op: CMP_EQ,
        data: bytes.iter().zip(mask).map(|(b, m)| b & m).collect(),
    });
    v
}

/// `ct status dnat`: the packet belongs to a redirected flow (either direction).
fn ct_dnat() -> Vec<Expr> {
    vec![
        Expr::Ct {
            key: CT_STATUS,
            dreg: REG1,
        },
        Expr::Bitwise {
            sreg: REG1,
            dreg: REG1,
            // ct status is a host-order u32 in the register.
            mask: IPS_DST_NAT.to_ne_bytes().to_vec(),
            xor: vec![0; 4],
        },
        Expr::Cmp {
            sreg: REG1,
            op: CMP_NEQ,
            data: vec![0; 4],
        },
    ]
}

fn redirect(port: u16) -> Vec<Expr> {
    vec![
        Expr::Imm {
            dreg: REG1,
            data: port.to_be_bytes().to_vec(),
        },
        Expr::Redir { sreg_port: REG1 },
    ]
}

fn tproxy(to: IpAddr, port: u16) -> Vec<Expr> {
    let (family, addr) = match to {
        IpAddr::V4(a) => (NFPROTO_IPV4, a.octets().to_vec()),
        IpAddr::V6(a) => (NFPROTO_IPV6, a.octets().to_vec()),
    };
    let mut v = meta_is(META_NFPROTO, family);
    v.extend(l4proto(IPPROTO_UDP));
    v.push(Expr::Imm {
        dreg: REG1,
        data: addr,
    });
    v.push(Expr::Imm {
        dreg: REG2,
        data: port.to_be_bytes().to_vec(),
    });
    v.push(Expr::Tproxy {
        family,
        sreg_addr: REG1,
        sreg_port: REG2,
    });
    v.push(Expr::Verdict(NF_ACCEPT));
    v
}

fn rule(chain: &'static str, parts: &[Vec<Expr>]) -> Rule {
    Rule {
        chain,
        exprs: parts.concat(),
    }
}

/// Destinations that stay inside the jail untouched: loopback and the jail's own addresses.
fn local_nets(plan: &RedirectPlan) -> [(IpAddr, u8); 4] {
    [
        (IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)), 8),
        (IpAddr::V6(Ipv6Addr::LOCALHOST), 128),
        (IpAddr::V4(plan.host_v4), 32),
        (IpAddr::V6(plan.host_v6), 128),
    ]
}

/// The whole ruleset for a plan. Pure.
pub fn ruleset(plan: &RedirectPlan) -> Ruleset {
    let chains = vec![
        Chain {
            name: NAT_OUT,
            kind: ChainKind::Nat,
            hook: HOOK_LOCAL_OUT,
            priority: -100,
            policy: NF_ACCEPT,
        },
        Chain {
            name: PRE_IN,
            kind: ChainKind::Filter,
            hook: HOOK_PRE_ROUTING,
            priority: -150,
            policy: NF_DROP,
        },
        Chain {
            name: FILTER_OUT,
            kind: ChainKind::Filter,
            hook: HOOK_LOCAL_OUT,
            priority: 0,
            policy: NF_DROP,
        },
    ];
    let mut rules = Vec::new();
    // DNS first: a resolver on loopback (127.0.0.53, ::1) is still ours.
    for p in [IPPROTO_TCP, IPPROTO_UDP] {
        rules.push(rule(
            NAT_OUT,
            &[l4proto(p), dport(53), redirect(plan.dns_port)],
        ));
    }
    let ret = vec![Expr::Verdict(NFT_RETURN)];
    let accept = vec![Expr::Verdict(NF_ACCEPT)];
    for (net, prefix) in local_nets(plan) {
        rules.push(rule(NAT_OUT, &[daddr_in(net, prefix), ret.clone()]));
    }
    rules.push(rule(
        NAT_OUT,
        &[l4proto(IPPROTO_TCP), redirect(plan.tcp_port)],
    ));

    for chain in [PRE_IN, FILTER_OUT] {
        rules.push(rule(chain, &[ct_dnat(), accept.clone()]));
        for (net, prefix) in local_nets(plan) {
            rules.push(rule(chain, &[daddr_in(net, prefix), accept.clone()]));
        }
    }
    rules.push(rule(
        PRE_IN,
        &[tproxy(IpAddr::V4(Ipv4Addr::LOCALHOST), plan.udp_port)],
    ));
    rules.push(rule(
        PRE_IN,
        &[tproxy(IpAddr::V6(Ipv6Addr::LOCALHOST), plan.udp_port)],
    ));
    // Other UDP leaves the output hook only to meet TPROXY (or the drop) in prerouting.
    rules.push(rule(FILTER_OUT, &[l4proto(IPPROTO_UDP), accept]));
    Ruleset { chains, rules }
}

fn data_value(m: &mut Msg, ty: u16, bytes: &[u8]) {
    m.nest(ty, |m| {
        m.attr(NFTA_DATA_VALUE, bytes);
    });
}

fn expr_name(e: &Expr) -> &'static str {
    match e {
        Expr::Meta { .. } => "meta",
        Expr::Payload { .. } => "payload",
        Expr::Bitwise { .. } => "bitwise",
        Expr::Cmp { .. } => "cmp",
        Expr::Ct { .. } => "ct",
        Expr::Imm { .. } | Expr::Verdict(_) => "immediate",
        Expr::Redir { .. } => "redir",
        Expr::Tproxy { .. } => "tproxy",
    }
}

/// The expression's attributes (NFTA_<EXPR>_*, numbered as in nf_tables.h).
fn encode_body(m: &mut Msg, e: &Expr) {
    match e {
        Expr::Meta { key, dreg } | Expr::Ct { key, dreg } => {
            m.attr_be32(1, *dreg).attr_be32(2, *key);
        }
        Expr::Payload {
            base,
            offset,
            len,
            dreg,
        } => {
            m.attr_be32(1, *dreg)
                .attr_be32(2, *base)
                .attr_be32(3, *offset)
                .attr_be32(4, *len);
        }
        Expr::Bitwise {
            sreg,
            dreg,
            mask,
            xor,
        } => {
            m.attr_be32(1, *sreg)
                .attr_be32(2, *dreg)
                .attr_be32(3, mask.len() as u32);
            data_value(m, 4, mask);
            data_value(m, 5, xor);
        }
        Expr::Cmp { sreg, op, data } => {
            m.attr_be32(1, *sreg).attr_be32(2, *op);
            data_value(m, 3, data);
        }
        Expr::Imm { dreg, data } => {
            m.attr_be32(1, *dreg);
            data_value(m, 2, data);
        }
        Expr::Verdict(code) => {
            m.attr_be32(1, 0); // the verdict register
            m.nest(2, |m| {
                m.nest(NFTA_DATA_VERDICT, |m| {
                    m.attr_be32(NFTA_VERDICT_CODE, *code as u32);
                });
            });
        }
        Expr::Redir { sreg_port } => {
            m.attr_be32(1, *sreg_port)
                .attr_be32(2, *sreg_port)
                .attr_be32(3, NF_NAT_RANGE_PROTO_SPECIFIED);
        }
        Expr::Tproxy {
            family,
            sreg_addr,
            sreg_port,
        } => {
            m.attr_be32(1, *family as u32)
                .attr_be32(2, *sreg_addr)
                .attr_be32(3, *sreg_port);
        }
    }
}

fn encode_expr(m: &mut Msg, e: &Expr) {
    m.nest(NFTA_LIST_ELEM, |m| {
        m.attr_str(NFTA_EXPR_NAME, expr_name(e));
        m.nest(NFTA_EXPR_DATA, |m| encode_body(m, e));
    });
}

fn nft_msg(ty: u16, flags: u16, seq: u32, family: u8) -> Msg {
    let mut m = Msg::new(
        (NFNL_SUBSYS_NFTABLES << 8) | ty,
        flags | libc::NLM_F_REQUEST as u16,
        seq,
    );
    // nfgenmsg: family, version 0, resource id (big endian).
    m.raw(&[family, 0, 0, 0]);
    m
}

/// One message of the batch and what it was for (named in errors).
pub struct Step {
    pub seq: u32,
    pub what: String,
}

/// The whole ruleset as one nfnetlink batch that replaces any earlier table of ours atomically.
/// `next_seq` hands out sequence numbers.
pub fn encode_batch(rs: &Ruleset, mut next_seq: impl FnMut() -> u32) -> (Vec<u8>, Vec<Step>) {
    let ack = libc::NLM_F_ACK as u16;
    let create = libc::NLM_F_CREATE as u16;
    let mut out = Vec::with_capacity(8 * 1024);
    let mut steps = Vec::new();
    let mut begin = Msg::new(NFNL_MSG_BATCH_BEGIN, libc::NLM_F_REQUEST as u16, next_seq());
    begin.raw(&[0, 0, 0, NFNL_SUBSYS_NFTABLES as u8]);
    out.extend(begin.finish());

    let mut push = |m: Msg, seq: u32, what: String| {
        out.extend(m.finish());
        steps.push(Step { seq, what });
    };
    // Create-then-delete-then-create: works whether or not the table exists, in one transaction.
    for (ty, flags, what) in [
        (NFT_MSG_NEWTABLE, create, "create table"),
        (NFT_MSG_DELTABLE, 0, "delete old table"),
        (NFT_MSG_NEWTABLE, create, "create table"),
    ] {
        let seq = next_seq();
        let mut m = nft_msg(ty, flags | ack, seq, NFPROTO_INET);
        m.attr_str(NFTA_TABLE_NAME, TABLE);
        push(m, seq, what.into());
    }
    for c in &rs.chains {
        let seq = next_seq();
        let mut m = nft_msg(NFT_MSG_NEWCHAIN, create | ack, seq, NFPROTO_INET);
        m.attr_str(NFTA_CHAIN_TABLE, TABLE)
            .attr_str(NFTA_CHAIN_NAME, c.name)
            .nest(NFTA_CHAIN_HOOK, |m| {
                m.attr_be32(NFTA_HOOK_HOOKNUM, c.hook)
                    .attr_be32(NFTA_HOOK_PRIORITY, c.priority as u32);
            })
            .attr_be32(NFTA_CHAIN_POLICY, c.policy as u32)
            .attr_str(
                NFTA_CHAIN_TYPE,
                match c.kind {
                    ChainKind::Nat => "nat",
                    ChainKind::Filter => "filter",
                },
            );
        push(m, seq, format!("create chain {}", c.name));
    }
    for (i, r) in rs.rules.iter().enumerate() {
        let seq = next_seq();
        let append = libc::NLM_F_APPEND as u16;
        let mut m = nft_msg(NFT_MSG_NEWRULE, create | append | ack, seq, NFPROTO_INET);
        m.attr_str(NFTA_RULE_TABLE, TABLE)
            .attr_str(NFTA_RULE_CHAIN, r.chain)
            .nest(NFTA_RULE_EXPRESSIONS, |m| {
                for e in &r.exprs {
                    encode_expr(m, e);
                }
            });
        push(m, seq, format!("rule {i} in chain {}", r.chain));
    }
    let mut end = Msg::new(NFNL_MSG_BATCH_END, libc::NLM_F_REQUEST as u16, next_seq());
    end.raw(&[0, 0, 0, NFNL_SUBSYS_NFTABLES as u8]);
    out.extend(end.finish());
    (out, steps)
}

#[cfg(test)]
#[path = "nft_eval.rs"]
mod eval;
