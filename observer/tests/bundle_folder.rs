//! Folder and lone-SKILL.md inputs, written as an attacker: links out of the folder, special
//! files, names that cannot be materialised, and nested skills.

mod common;

use common::{honest_zip, limit_hit, SKILL};
use observer::bundle::{load, load_bundle, BundleError, LimitExceeded, Limits, ProblemKind};
use observer::model::Fidelity;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

fn put(root: &Path, rel: &str, bytes: &[u8], mode: u32) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, bytes).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn skill_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("demo-skill");
    put(&root, "SKILL.md", SKILL, 0o644);
    put(&root, "scripts/run.py", b"print('hi')\n", 0o755);
    put(&root, "references/guide.md", b"# guide\n", 0o644);
    d
}

fn problems(
    r: Result<Vec<observer::bundle::SkillUnit>, BundleError>,
) -> Vec<(String, ProblemKind)> {
    match r {
        Err(BundleError::Rejected { problems, .. }) => {
            problems.into_iter().map(|p| (p.path, p.kind)).collect()
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn folder_loads_and_matches_the_same_zip() {
    let d = skill_dir();
    let root = d.path().join("demo-skill");
    std::fs::create_dir(root.join("empty")).unwrap();
    let u = load(&root, &Limits::default()).expect("loads");
    assert_eq!(u.len(), 1);
    let u = &u[0];
    assert_eq!(u.fidelity, Fidelity::Bundle);
    assert_eq!(u.name, "demo");
    assert_eq!(u.location, ".");
    assert_eq!(u.files.len(), 3);
    assert_eq!(u.files["scripts/run.py"].mode, 0o755);
    assert!(u.dirs.contains("empty") && u.dirs.contains("scripts"));
    assert_eq!(u.instructions, "Run `python3 scripts/run.py`.\n");
    // Same content as a zip: same digest, whatever the container.
    let z = honest_zip(&[
        ("SKILL.md", SKILL, 0o644),
        ("references/guide.md", b"# guide\n", 0o644),
        ("scripts/run.py", b"print('hi')\n", 0o755),
    ]);
    let zp = d.path().join("demo.zip");
    std::fs::write(&zp, z).unwrap();
    let zu = load(&zp, &Limits::default()).unwrap();
    assert_eq!(zu[0].digest, u.digest);
    // One changed byte changes it.
    put(&root, "references/guide.md", b"# guidE\n", 0o644);
    assert_ne!(load(&root, &Limits::default()).unwrap()[0].digest, u.digest);
}

#[test]
fn symlinks_are_never_followed_and_are_reported() {
    let d = skill_dir();
    let root = d.path().join("demo-skill");
    symlink("/etc/passwd", root.join("scripts/passwd")).unwrap();
    symlink("..", root.join("up")).unwrap();
    symlink("run.py", root.join("scripts/alias.py")).unwrap();
    let p = problems(load(&root, &Limits::default()));
    assert_eq!(p.len(), 3, "{p:?}");
    let targets: Vec<_> = p
        .iter()
        .map(|(path, k)| match k {
            ProblemKind::Symlink { target } => (path.as_str(), target.as_str()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(targets.contains(&("scripts/passwd", "/etc/passwd")));
    assert!(targets.contains(&("up", "..")));
    assert!(targets.contains(&("scripts/alias.py", "run.py")));
}

#[test]
fn the_input_path_itself_may_be_a_link() {
    // The user named the link; it is followed once, and nothing below it.
    let d = skill_dir();
    let link = d.path().join("via-link");
    symlink(d.path().join("demo-skill"), &link).unwrap();
    let u = load(&link, &Limits::default()).unwrap();
    assert_eq!(u[0].files.len(), 3);
}

#[test]
fn special_files_are_reported_without_blocking() {
    let d = skill_dir();
    let root = d.path().join("demo-skill");
    nix::unistd::mkfifo(&root.join("scripts/pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let _sock = std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
    let p = problems(load(&root, &Limits::default()));
    assert!(p.contains(&("scripts/pipe".into(), ProblemKind::SpecialFile("fifo"))));
    assert!(p.contains(&("sock".into(), ProblemKind::SpecialFile("socket"))));
    // A FIFO given as the input itself.
    match load(&root.join("scripts/pipe"), &Limits::default()) {
        Err(BundleError::NotFileOrDir { kind, .. }) => assert_eq!(kind, "fifo"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn hostile_names_in_folders() {
    let d = skill_dir();
    let root = d.path().join("demo-skill");
    let bad = std::ffi::OsStr::from_bytes(b"scripts/\xff\xfe.sh");
    std::fs::write(root.join(bad), b"echo").unwrap();
    put(&root, "scripts/RUN.py", b"print('other')\n", 0o755);
    put(&root, "x\\y.sh", b"echo", 0o644);
    put(&root, "new\nline", b"", 0o644);
    let p = problems(load(&root, &Limits::default()));
    let kinds: Vec<_> = p.iter().map(|(_, k)| k.clone()).collect();
    assert!(kinds.contains(&ProblemKind::NonUtf8Name), "{p:?}");
    assert!(kinds.contains(&ProblemKind::Backslash), "{p:?}");
    assert!(kinds.contains(&ProblemKind::ControlChar), "{p:?}");
    assert!(kinds
        .iter()
        .any(|k| matches!(k, ProblemKind::CaseCollision { .. })));
}

#[test]
fn several_skills_yield_one_unit_each() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("repo");
    put(&root, "README.md", b"# repo", 0o644);
    put(
        &root,
        "skills/a/SKILL.md",
        b"---\nname: alpha\n---\n",
        0o644,
    );
    put(&root, "skills/a/scripts/a.sh", b"echo a", 0o755);
    put(
        &root,
        "skills/b/SKILL.md",
        b"---\ndescription: no name\n---\n",
        0o644,
    );
    put(
        &root,
        "skills/b/inner/SKILL.md",
        b"---\nname: inner\n---\n",
        0o644,
    );
    put(&root, "skills/b/inner/x.py", b"x", 0o644);
    put(&root, "skills/b/b.txt", b"b", 0o644);
    let b = load_bundle(&root, &Limits::default()).unwrap();
    assert_eq!(b.unassigned, vec!["README.md".to_string()]);
    let names: Vec<_> = b
        .units
        .iter()
        .map(|u| (u.name.as_str(), u.location.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("alpha", "skills/a"),
            ("b", "skills/b"),
            ("inner", "skills/b/inner")
        ]
    );
    let outer = &b.units[1];
    assert!(outer.name_is_fallback);
    let files: Vec<_> = outer.files.keys().cloned().collect();
    assert_eq!(
        files,
        ["SKILL.md", "b.txt"],
        "nested skill's files stay out"
    );
    assert!(!outer.dirs.contains("inner"));
    assert_eq!(b.units[2].files.len(), 2);
    assert_eq!(b.units[0].scripts[0].path, "scripts/a.sh");
}

#[test]
fn folder_limits() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("many");
    put(&root, "SKILL.md", SKILL, 0o644);
    std::fs::create_dir(root.join("f")).unwrap();
    for i in 0..10_000 {
        std::fs::write(root.join(format!("f/{i}")), b"").unwrap();
    }
    assert_eq!(
        limit_hit(load(&root, &Limits::default())),
        LimitExceeded::FileCount { limit: 10_000 }
    );
    std::fs::remove_file(root.join("f/0")).unwrap();
    assert!(
        load(&root, &Limits::default()).is_ok(),
        "10,000 files are fine"
    );

    let d = skill_dir();
    let root = d.path().join("demo-skill");
    put(&root, "big.txt", &vec![b'a'; 3000], 0o644);
    let lim = Limits {
        max_text_file_bytes: 2048,
        ..Limits::default()
    };
    assert!(matches!(
        limit_hit(load(&root, &lim)),
        LimitExceeded::TextFile { .. }
    ));
    let lim = Limits {
        max_unpacked_bytes: 1024,
        ..Limits::default()
    };
    assert!(matches!(
        limit_hit(load(&root, &lim)),
        LimitExceeded::Unpacked { .. }
    ));
    // A sparse 1 TiB file is refused from its size, without reading it.
    let sparse = std::fs::File::create(root.join("sparse.bin")).unwrap();
    sparse.set_len(1 << 40).unwrap();
    let t = std::time::Instant::now();
    assert!(matches!(
        limit_hit(load(&root, &Limits::default())),
        LimitExceeded::Unpacked { .. }
    ));
    assert!(t.elapsed().as_secs() < 2, "took {:?}", t.elapsed());
    std::fs::remove_file(root.join("sparse.bin")).unwrap();
    let mut deep = root.clone();
    for _ in 0..5 {
        deep = deep.join("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    let lim = Limits {
        max_depth: 3,
        ..Limits::default()
    };
    assert!(matches!(
        limit_hit(load(&root, &lim)),
        LimitExceeded::Depth { .. }
    ));
}

#[test]
fn lone_skill_md_is_prompt_fidelity() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pdf-helper");
    put(
        &dir,
        "SKILL.md",
        b"\xEF\xBB\xBF---\r\ndescription: x\r\n---\r\nbody\r\n",
        0o644,
    );
    put(&dir, "scripts/ignored.sh", b"echo", 0o755);
    let u = load(&dir.join("SKILL.md"), &Limits::default()).unwrap();
    assert_eq!(u.len(), 1);
    assert_eq!(u[0].fidelity, Fidelity::Prompt);
    assert_eq!(u[0].name, "pdf-helper");
    assert_eq!(u[0].files.len(), 1, "only the file itself");
    assert_eq!(u[0].instructions, "body\n");
    // Another file name falls back to its stem.
    put(&dir, "notes.md", b"---\n---\n", 0o644);
    assert_eq!(
        load(&dir.join("notes.md"), &Limits::default()).unwrap()[0].name,
        "notes"
    );
    let lim = Limits {
        max_text_file_bytes: 4,
        ..Limits::default()
    };
    assert!(matches!(
        load(&dir.join("SKILL.md"), &lim),
        Err(BundleError::Limit { .. })
    ));
}

#[test]
fn missing_or_malformed_skill_md() {
    let d = tempfile::tempdir().unwrap();
    put(d.path(), "README.md", b"hi", 0o644);
    let e = load(d.path(), &Limits::default()).unwrap_err();
    assert!(matches!(e, BundleError::MissingSkillMd(_)));
    assert!(e.to_string().contains("no SKILL.md"));
    for bad in [
        &b"no front matter"[..],
        b"---\nname: x\n",
        b"---\nname: [a\n---\n",
        b"---\nname: a\nname: b\n---\n",
        b"\xff\xfe---\n",
    ] {
        put(d.path(), "SKILL.md", bad, 0o644);
        match load(d.path(), &Limits::default()) {
            Err(BundleError::MalformedSkillMd { path, reason }) => {
                assert!(path.ends_with("SKILL.md"), "{path}");
                assert!(!reason.is_empty());
            }
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(bad)),
        }
    }
    assert!(matches!(
        load(&d.path().join("nope"), &Limits::default()),
        Err(BundleError::Io { .. })
    ));
}

#[test]
fn hostile_name_field_gets_a_safe_install_name() {
    let d = tempfile::tempdir().unwrap();
    put(
        d.path(),
        "SKILL.md",
        b"---\nname: ../../.bashrc\n---\n",
        0o644,
    );
    let u = load(d.path(), &Limits::default()).unwrap();
    assert_eq!(u[0].name, "../../.bashrc");
    assert_eq!(u[0].install_name, "bashrc");
}
