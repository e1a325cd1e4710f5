//! The DNS server every query in the jail lands in (hickory-server on sockets bound inside the
//! jail's namespace). It records every query, answers A/AAAA with a stable fake address per name
//! (so a later connection is attributed to the name), gives plausible answers to other types,
//! and flags tunnelling shapes.

pub mod fake;
pub mod tunnel;

use super::record::Recorder;
use crate::trace::EventKind;
use fake::FakeIps;
use hickory_proto::op::{Header, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, MX, NS, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::xfer::Protocol;
use hickory_server::authority::MessageResponseBuilder;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

const TTL: u32 = 60;

/// What to answer for one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub rcode: ResponseCode,
    pub answers: Vec<Record>,
    /// SOA for the authority section of NODATA/NXDOMAIN answers.
    pub authority: Vec<Record>,
}

fn parent_of(name: &str) -> String {
    super::canary::reassemble::split_parent(name)
        .map_or_else(|| name.trim_end_matches('.').to_string(), |p| p.0)
}

fn mk_name(s: &str) -> Name {
    Name::from_ascii(format!("{}.", s.trim_end_matches('.'))).unwrap_or_else(|_| Name::root())
}

fn soa_for(zone: &str) -> Record {
    let z = mk_name(zone);
    let soa = SOA::new(
        mk_name(&format!("ns1.{zone}")),
        mk_name(&format!("hostmaster.{zone}")),
        2024061501,
        7200,
        3600,
        1209600,
        300,
    );
    Record::from_rdata(z, TTL, RData::SOA(soa))
}

/// `4.3.18.198.in-addr.arpa` / nibble `ip6.arpa` names back to the address.
pub fn ptr_address(name: &str) -> Option<IpAddr> {
    let n = name.trim_end_matches('.').to_ascii_lowercase();
    if let Some(v4) = n.strip_suffix(".in-addr.arpa") {
        let mut o: Vec<u8> = v4
            .split('.')
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        if o.len() != 4 {
            return None;
        }
        o.reverse();
        return Some(IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], o[3])));
    }
    let v6 = n.strip_suffix(".ip6.arpa")?;
    let nibbles: Vec<u8> = v6
        .split('.')
        .map(|p| {
            u8::from_str_radix(p, 16)
                .ok()
                .filter(|&x| x < 16 && p.len() == 1)
        })
        .collect::<Option<_>>()?;
    if nibbles.len() != 32 {
        return None;
    }
    let v = nibbles
        .iter()
        .rev()
        .fold(0u128, |acc, &x| acc << 4 | u128::from(x));
    Some(IpAddr::V6(Ipv6Addr::from(v)))
}

/// The answer for `name`/`qtype`: pure apart from address allocation in `fake`.
pub fn plan_answer(fake: &FakeIps, name: &str, qtype: RecordType) -> Answer {
    let owner = mk_name(name);
    let zone = parent_of(name);
    let rec = |rdata: RData| Record::from_rdata(owner.clone(), TTL, rdata);
    let nodata = || Answer {
        rcode: ResponseCode::NoError,
        answers: Vec::new(),
        authority: vec![soa_for(&zone)],
    };
    let one = |rdata: RData| Answer {
        rcode: ResponseCode::NoError,
        answers: vec![rec(rdata)],
        authority: Vec::new(),
    };
    match qtype {
        RecordType::A => match fake.v4(name) {
            Some(a) => one(RData::A(A(a))),
            None => Answer {
                rcode: ResponseCode::ServFail,
                answers: Vec::new(),
                authority: Vec::new(),
            },
        },
        RecordType::AAAA => one(RData::AAAA(AAAA(fake.v6(name)))),
        RecordType::TXT => one(RData::TXT(TXT::new(vec![format!(
            "v=spf1 include:_spf.{zone} ~all"
        )]))),
        RecordType::MX => one(RData::MX(MX::new(10, mk_name(&format!("mail.{zone}"))))),
        RecordType::NS => Answer {
            rcode: ResponseCode::NoError,
            answers: ["ns1", "ns2"]
                .iter()
                .map(|p| rec(RData::NS(NS(mk_name(&format!("{p}.{zone}"))))))
                .collect(),
            authority: Vec::new(),
        },
        RecordType::SOA => Answer {
            rcode: ResponseCode::NoError,
            answers: vec![soa_for(&zone)],
            authority: Vec::new(),
        },
        RecordType::CNAME if name.trim_end_matches('.').eq_ignore_ascii_case(&zone) => nodata(),
        RecordType::CNAME => one(RData::CNAME(CNAME(mk_name(&format!("edge.{zone}"))))),
        RecordType::SRV => one(RData::SRV(SRV::new(
            10,
            5,
            443,
            mk_name(&format!("srv.{zone}")),
        ))),
        RecordType::PTR => match ptr_address(name).and_then(|ip| fake.lookup_name(ip)) {
            Some(n) => one(RData::PTR(PTR(mk_name(&n)))),
            None => Answer {
                rcode: ResponseCode::NXDomain,
                answers: Vec::new(),
                authority: vec![soa_for("in-addr.arpa")],
            },
        },
        _ => nodata(),
    }
}

/// The hickory request handler.
pub struct DnsHandler {
    pub(crate) rec: Arc<Recorder>,
}

fn transport(p: Protocol) -> &'static str {
    match p {
        Protocol::Udp => "udp",
        Protocol::Tcp => "tcp",
        _ => "other",
    }
}

fn describe(a: &Answer) -> Option<String> {
    let parts: Vec<String> = a.answers.iter().map(|r| r.data().to_string()).collect();
    if parts.is_empty() {
        (a.rcode != ResponseCode::NoError).then(|| a.rcode.to_string())
    } else {
        Some(parts.join(","))
    }
}

#[async_trait::async_trait]
impl RequestHandler for DnsHandler {
    async fn handle_request<R: ResponseHandler>(
        &self,
        request: &Request,
        mut response: R,
    ) -> ResponseInfo {
        let builder = MessageResponseBuilder::from_message_request(request);
        let Some(q) = request.queries().first() else {
            let msg = builder.error_msg(request.header(), ResponseCode::FormErr);
            return response
                .send_response(msg)
                .await
                .unwrap_or_else(|_| failed(request.header()));
        };
        let name = q.original().name().to_string();
        let qtype = q.query_type();
        let answer = plan_answer(&self.rec.fake, &name, qtype);
        let seq = self.rec.emit(EventKind::DnsQuery {
            name: name.trim_end_matches('.').to_string(),
            qtype: qtype.to_string(),
            transport: transport(request.protocol()).into(),
            answer: describe(&answer),
        });
        let mut header = Header::response_from_request(request.header());
        header.set_authoritative(true);
        header.set_recursion_available(true);
        header.set_response_code(answer.rcode);
        let msg = builder.build(
            header,
            answer.answers.iter(),
            [],
            answer.authority.iter(),
            [],
        );
        let info = response
            .send_response(msg)
            .await
            .unwrap_or_else(|_| failed(request.header()));
        self.rec.dns_query(seq, &name);
        info
    }
}

fn failed(req: &Header) -> ResponseInfo {
    let mut h = Header::response_from_request(req);
    h.set_response_code(ResponseCode::ServFail);
    h.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_by_type() {
        let f = FakeIps::new();
        let a = plan_answer(&f, "exfil.evil.com.", RecordType::A);
        let RData::A(A(ip)) = a.answers[0].data() else {
            panic!("{a:?}")
        };
        assert!(FakeIps::in_pool(IpAddr::V4(*ip)));
        assert_eq!(plan_answer(&f, "exfil.evil.com", RecordType::A), a);
        assert!(matches!(
            plan_answer(&f, "evil.com.", RecordType::MX).answers[0].data(),
            RData::MX(_)
        ));
        assert!(matches!(
            plan_answer(&f, "evil.com.", RecordType::TXT).answers[0].data(),
            RData::TXT(_)
        ));
        let https = plan_answer(&f, "evil.com.", RecordType::HTTPS);
        assert!(https.answers.is_empty() && !https.authority.is_empty());
        // Reverse lookup of a handed-out address gives the name back.
        let o: Vec<String> = ip.octets().iter().rev().map(u8::to_string).collect();
        let ptr = plan_answer(
            &f,
            &format!("{}.in-addr.arpa.", o.join(".")),
            RecordType::PTR,
        );
        assert_eq!(ptr.answers[0].data().to_string(), "exfil.evil.com.");
        assert_eq!(
            plan_answer(&f, "1.0.0.127.in-addr.arpa.", RecordType::PTR).rcode,
            ResponseCode::NXDomain
        );
    }

    #[test]
    fn ptr_parsing_rejects_junk() {
        assert_eq!(
            ptr_address("4.3.2.1.in-addr.arpa"),
            Some("1.2.3.4".parse().unwrap())
        );
        assert!(ptr_address("x.3.2.1.in-addr.arpa").is_none());
        assert!(ptr_address("999.3.2.1.in-addr.arpa").is_none());
        let six: Vec<String> = "fd7a3c4e91b25d000000000000000001"
            .chars()
            .rev()
            .map(String::from)
            .collect();
        assert_eq!(
            ptr_address(&format!("{}.ip6.arpa", six.join("."))),
            Some("fd7a:3c4e:91b2:5d00::1".parse().unwrap())
        );
    }
}
