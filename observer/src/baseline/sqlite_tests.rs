//! Tests of what only the SQLite store has (a file, a default path). The behaviour both stores
//! share is tested once for both in `store_tests.rs`.

use super::*;

#[test]
fn a_file_that_is_not_a_database_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.sqlite");
    std::fs::write(&path, vec![0x42u8; 4096]).unwrap();
    let err = SqliteStore::open(&path).err().expect("junk must not open");
    let msg = err.to_string();
    assert!(
        msg.contains("junk.sqlite") && msg.contains("not a usable SQLite database"),
        "{msg}"
    );
    let err = SqliteStore::open(dir.path())
        .err()
        .expect("a directory must not open");
    assert!(err.to_string().contains(&dir.path().display().to_string()));
}

#[test]
fn default_path_follows_xdg() {
    let p = default_path_from(Some("/x/data".into()), Some("/home/a".into())).unwrap();
    assert_eq!(
        p,
        std::path::PathBuf::from("/x/data/skill-observer/baselines.sqlite")
    );
    let p = default_path_from(Some("relative".into()), Some("/home/a".into())).unwrap();
    assert_eq!(
        p,
        std::path::PathBuf::from("/home/a/.local/share/skill-observer/baselines.sqlite")
    );
    assert!(matches!(
        default_path_from(None, None),
        Err(BaselineError::NoDataDir)
    ));
    assert!(matches!(
        default_path_from(None, Some("".into())),
        Err(BaselineError::NoDataDir)
    ));
}
