//! Attacker-shaped tests: each hides a planted value the way an exfiltrating skill would.

use super::reassemble::Reassembler;
use super::*;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use std::io::Write;

const SECRET: &str = "ghp_R4nd0mV4lu3Xq9ZtK2mP8sLw1eYcJ6bNf";

fn index() -> CanaryIndex {
    CanaryIndex::new(vec![
        Needle {
            value: SECRET.as_bytes().to_vec(),
            canary: "github_token".into(),
            credential: "gh-hosts".into(),
            service_hosts: vec!["api.github.com".into()],
        },
        Needle::new(
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzKEY9",
            "aws_secret",
            "aws-credentials",
        ),
    ])
}

fn chains(r: &ScanReport, canary: &str) -> Vec<Vec<String>> {
    r.hits
        .iter()
        .filter(|h| h.canary == canary)
        .map(|h| h.chain.clone())
        .collect()
}

fn has_chain(r: &ScanReport, chain: &[&str]) -> bool {
    r.hits
        .iter()
        .any(|h| h.canary == "github_token" && h.chain == chain)
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn raw_value_in_body() {
    let body = format!("{{\"note\":\"hi\",\"t\":\"{SECRET}\"}}");
    let r = index().scan("body", body.as_bytes());
    assert!(has_chain(&r, &["body"]), "{r:?}");
    assert_eq!(r.hits[0].credential, "gh-hosts");
}

#[test]
fn value_in_url_query_percent_encoded() {
    // Form-encoding turns '_' into itself but an attacker can encode everything.
    let enc: String = SECRET.bytes().map(|b| format!("%{b:02X}")).collect();
    let url = format!("https://collector.example/c?id=7&k={enc}");
    let r = index().scan("url", url.as_bytes());
    assert!(has_chain(&r, &["url", "url"]), "{r:?}");
}

#[test]
fn base64_every_alignment_both_alphabets() {
    let idx = index();
    for prefix in ["", "a", "ab", "abc", "user=alice;token="] {
        let plain = format!("{prefix}{SECRET};end");
        for enc in [STANDARD.encode(&plain), URL_SAFE_NO_PAD.encode(&plain)] {
            let body = format!("data={enc}&x=1");
            let r = idx.scan("body", body.as_bytes());
            assert!(
                has_chain(&r, &["body", "base64"]),
                "prefix {prefix:?}: {r:?}"
            );
        }
    }
}

#[test]
fn hex_upper_and_lower() {
    let idx = index();
    for h in [hex::encode(SECRET), hex::encode_upper(SECRET)] {
        let r = idx.scan("body", format!("blob:{h}").as_bytes());
        assert!(has_chain(&r, &["body", "hex"]), "{r:?}");
    }
}

#[test]
fn gzip_body() {
    let r = index().scan("body", &gz(format!("config dump\n{SECRET}\n").as_bytes()));
    assert!(has_chain(&r, &["body", "gzip"]), "{r:?}");
}

#[test]
fn gzip_embedded_mid_stream_with_prefix() {
    let mut data = b"HEADER\x00\x01garbage".to_vec();
    data.extend(gz(SECRET.as_bytes()));
    data.extend(b"trailer");
    let r = index().scan("stream", &data);
    assert!(has_chain(&r, &["stream", "gzip"]), "{r:?}");
}

fn zip_with(name: &str, content: &[u8], method: zip::CompressionMethod) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().compression_method(method);
    w.start_file("README.txt", opts).unwrap();
    w.write_all(b"nothing to see").unwrap();
    w.start_file(name, opts).unwrap();
    w.write_all(content).unwrap();
    w.finish().unwrap().into_inner()
}

#[test]
fn inside_zip_deflated_and_stored() {
    let idx = index();
    let creds = format!("[default]\naws_access_key_id = AKIA...\ntoken = {SECRET}\n");
    let r = idx.scan(
        "body",
        &zip_with(
            ".aws/credentials",
            creds.as_bytes(),
            zip::CompressionMethod::Deflated,
        ),
    );
    assert!(has_chain(&r, &["body", "zip"]), "{r:?}");
    let r = idx.scan(
        "body",
        &zip_with("c", creds.as_bytes(), zip::CompressionMethod::Stored),
    );
    // Stored: found in the member; the redundant raw-container hit is folded into it.
    assert_eq!(
        chains(&r, "github_token"),
        vec![vec!["body".to_string(), "zip".into()]],
        "{r:?}"
    );
}

fn tar_with(name: &str, content: &[u8]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(content.len() as u64);
    h.set_mode(0o600);
    h.set_cksum();
    b.append_data(&mut h, name, content).unwrap();
    b.into_inner().unwrap()
}

#[test]
fn tar_gz_then_base64() {
    let tgz = gz(&tar_with(
        "home/.config/gh/hosts.yml",
        format!("oauth_token: {SECRET}\n").as_bytes(),
    ));
    let body = format!("{{\"upload\":\"{}\"}}", STANDARD.encode(tgz));
    let r = index().scan("body", body.as_bytes());
    assert!(has_chain(&r, &["body", "base64", "tar.gz"]), "{r:?}");
}

#[test]
fn multipart_form_upload_with_base64_part() {
    let body = format!(
        "--------------------------a1b2c3\r\nContent-Disposition: form-data; name=\"meta\"\r\n\r\nhello\r\n\
         --------------------------a1b2c3\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.bin\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n{}\r\n--------------------------a1b2c3--\r\n",
        STANDARD.encode(gz(SECRET.as_bytes()))
    );
    let r = index().scan("body", body.as_bytes());
    assert!(
        has_chain(&r, &["body", "multipart", "base64", "gzip"]),
        "{r:?}"
    );
}

#[test]
fn byte_reversed_and_reversed_base64() {
    let idx = index();
    let rev: String = SECRET.chars().rev().collect();
    let r = idx.scan("body", rev.as_bytes());
    assert!(has_chain(&r, &["body", "reversed"]), "{r:?}");
    let b: String = STANDARD
        .encode(format!("xx{SECRET}"))
        .chars()
        .rev()
        .collect();
    let r = idx.scan("body", b.as_bytes());
    assert!(has_chain(&r, &["body", "reversed", "base64"]), "{r:?}");
    // Reversed gzip: only reachable by reversing the buffer.
    let rg: Vec<u8> = gz(SECRET.as_bytes()).into_iter().rev().collect();
    let r = idx.scan("body", &rg);
    assert!(has_chain(&r, &["body", "reversed", "gzip"]), "{r:?}");
}

#[test]
fn json_escaped_unicode() {
    let esc: String = SECRET
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    let body = format!("{{\"k\":\"{esc}\"}}");
    let r = index().scan("body", body.as_bytes());
    assert!(has_chain(&r, &["body", "json"]), "{r:?}");
}

#[test]
fn deep_chain_depth_four() {
    // base64( gzip( hex( url-encoded( value ) ) ) ) inside a JSON string.
    let url: String = SECRET.bytes().map(|b| format!("%{b:02x}")).collect();
    let layered = STANDARD.encode(gz(hex::encode(url).as_bytes()));
    let r = index().scan("body", format!("{{\"d\":\"{layered}\"}}").as_bytes());
    assert!(
        has_chain(&r, &["body", "base64", "gzip", "hex", "url"]),
        "{r:?}"
    );
}

#[test]
fn other_codecs() {
    let idx = index();
    let payload = format!("secret={SECRET}").into_bytes();
    let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    bz.write_all(&payload).unwrap();
    let r = idx.scan("body", &bz.finish().unwrap());
    assert!(has_chain(&r, &["body", "bzip2"]), "{r:?}");
    let mut xz = Vec::new();
    lzma_rs::xz_compress(&mut &payload[..], &mut xz).unwrap();
    let r = idx.scan("body", &xz);
    assert!(has_chain(&r, &["body", "xz"]), "{r:?}");
    let zs = ruzstd::encoding::compress_to_vec(
        &payload[..],
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    let r = idx.scan("body", &zs);
    assert!(has_chain(&r, &["body", "zstd"]), "{r:?}");
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&payload).unwrap();
    let r = idx.scan("body", &z.finish().unwrap());
    assert!(has_chain(&r, &["body", "zlib"]), "{r:?}");
    // Raw deflate has no header: found when it comes out of a text decoding.
    let mut d = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    d.write_all(&"config ".repeat(40).into_bytes()).unwrap();
    d.write_all(&payload).unwrap();
    let r = idx.scan("body", STANDARD.encode(d.finish().unwrap()).as_bytes());
    assert!(has_chain(&r, &["body", "base64", "deflate"]), "{r:?}");
    let qp: String = payload.iter().map(|b| format!("={b:02X}")).collect();
    let r = idx.scan("body", qp.as_bytes());
    assert!(has_chain(&r, &["body", "quoted-printable"]), "{r:?}");
    let b32 = super::patterns::base32_encode(&payload).to_lowercase();
    let r = idx.scan("body", b32.as_bytes());
    assert!(has_chain(&r, &["body", "base32"]), "{r:?}");
}

#[test]
fn hex_split_across_twelve_dns_queries() {
    let idx = index();
    let h = hex::encode(SECRET);
    let n = h.len();
    let pieces: Vec<&[u8]> = (0..12)
        .map(|i| &h.as_bytes()[i * n / 12..(i + 1) * n / 12])
        .collect();
    let mut re = Reassembler::default();
    let mut parent = None;
    for (i, c) in pieces.iter().enumerate() {
        let name = format!(
            "{}.{i}.s.telemetry-cdn.net",
            std::str::from_utf8(c).unwrap()
        );
        // Each query alone holds no findable piece.
        assert!(idx.scan("dns", name.as_bytes()).hits.is_empty());
        // Resolvers ask A and AAAA: the duplicate is ignored.
        parent = re.add_dns(&name, i as u64).or(parent);
        re.add_dns(&name, i as u64);
    }
    let parent = parent.unwrap();
    let found: Vec<_> = re
        .dns_group(&parent)
        .iter()
        .flat_map(|a| idx.scan(&a.label, &a.data).hits)
        .filter(|h| h.canary == "github_token")
        .collect();
    assert!(
        found.iter().any(|h| h.chain.len() == 2
            && h.chain[0].starts_with("dns:telemetry-cdn.net:")
            && h.chain[1] == "hex"),
        "{found:?}"
    );
}

#[test]
fn split_across_http_requests_to_one_host() {
    let idx = index();
    let b = URL_SAFE_NO_PAD.encode(SECRET);
    let mut re = Reassembler::default();
    for (i, c) in b.as_bytes().chunks(6).enumerate() {
        re.add_http(
            "Beacon.Example",
            &format!("/p?seq={i}&d={}", std::str::from_utf8(c).unwrap()),
            b"",
            i as u64,
        );
    }
    let hits: Vec<_> = re
        .http_group("beacon.example")
        .iter()
        .flat_map(|a| idx.scan(&a.label, &a.data).hits)
        .collect();
    // The `d` values concatenate to the base64 text; the interleaved `seq` does not get in the way.
    assert!(
        hits.iter()
            .any(|h| h.canary == "github_token"
                && h.chain == ["http:beacon.example:param:d", "base64"]),
        "{hits:?}"
    );
}

#[test]
fn no_false_positives_in_random_data_and_text() {
    let idx = index();
    let mut seed = 0x9e3779b97f4a7c15u64;
    let bin: Vec<u8> = (0..2_000_000).map(|_| rng(&mut seed) as u8).collect();
    assert!(idx.scan("body", &bin).hits.is_empty());
    let alnum: Vec<u8> = (0..500_000)
        .map(|_| {
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                [(rng(&mut seed) % 64) as usize]
        })
        .collect();
    assert!(idx.scan("body", &alnum).hits.is_empty());
    assert!(idx.scan("body", &gz(&bin[..100_000])).hits.is_empty());
}

#[test]
fn short_needles_are_never_searched() {
    let idx = CanaryIndex::new(vec![
        Needle::new("1234567", "short", "c"),
        Needle::new(SECRET, "long", "c"),
    ]);
    assert_eq!(idx.skipped_short().count(), 1);
    let r = idx.scan("body", b"xx 1234567 yy");
    assert!(r.hits.is_empty());
    assert!(CanaryIndex::new(vec![Needle::new("abc", "s", "c")])
        .scan("b", b"abc")
        .hits
        .is_empty());
}

#[test]
fn substring_needles_overlap_whole_value() {
    // The registry also lists substrings of a value for partial leaks; both must be reported.
    let idx = CanaryIndex::new(vec![
        Needle::new(SECRET, "whole", "c"),
        Needle::new(&SECRET[4..20], "part", "c"),
    ]);
    let r = idx.scan("body", SECRET.as_bytes());
    let names: Vec<_> = r.hits.iter().map(|h| h.canary.as_str()).collect();
    assert!(
        names.contains(&"whole") && names.contains(&"part"),
        "{names:?}"
    );
}

/// 1 GiB of zeros as 1024 concatenated gzip members (`gunzip` expands it all), plus the value
/// at the very end, which a capped decoder never reaches: the bomb is reported, quickly.
#[test]
fn gzip_bomb_is_bounded_and_reported() {
    let member = gz(&vec![0u8; 1 << 20]);
    let mut bomb = Vec::with_capacity(member.len() * 1024);
    for _ in 0..1024 {
        bomb.extend_from_slice(&member);
    }
    let t = std::time::Instant::now();
    let limits = ScanLimits {
        max_layer_output: 8 << 20,
        ..ScanLimits::default()
    };
    let idx = CanaryIndex::with_limits(vec![Needle::new(SECRET, "t", "c")], limits);
    let r = idx.scan("body", &bomb);
    assert!(
        r.limits
            .iter()
            .any(|l| l.chain == ["body", "gzip"] && l.what.contains("capped")),
        "{:?}",
        r.limits
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        t.elapsed()
    );
    assert!(r.work <= idx.limits().budget_cap);
}

/// 42.zip-style: five levels of 16 nested zips over a 4 MiB zero file (16^5 × 4 MiB = 4 TiB).
#[test]
fn nested_zip_bomb_is_bounded_and_reported() {
    let mut level = zip_with(
        "0.bin",
        &vec![0u8; 4 << 20],
        zip::CompressionMethod::Deflated,
    );
    for depth in 0..5 {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for i in 0..16 {
            w.start_file(format!("lib{depth}_{i}.zip"), opts).unwrap();
            w.write_all(&level).unwrap();
        }
        level = w.finish().unwrap().into_inner();
    }
    let t = std::time::Instant::now();
    let r = index().scan("body", &level);
    assert!(r.hits.is_empty());
    assert!(
        r.limits
            .iter()
            .any(|l| l.what.contains("nested archive depth") || l.what.contains("budget")),
        "{:?}",
        r.limits
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        t.elapsed()
    );
}
