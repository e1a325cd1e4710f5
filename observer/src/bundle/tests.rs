use super::*;

#[test]
fn install_names() {
    assert_eq!(install_name("pdf-tools"), "pdf-tools");
    assert_eq!(install_name("PDF Processing!"), "pdf-processing");
    assert_eq!(install_name("../../etc"), "etc");
    assert_eq!(install_name("..."), "skill");
    assert_eq!(install_name(""), "skill");
    assert_eq!(install_name("日本"), "skill");
    assert_eq!(install_name(&"a".repeat(100)).len(), 64);
    assert_eq!(install_name("a--b__c"), "a-b-c");
}

#[test]
fn owner_picks_the_deepest_skill() {
    let dirs: BTreeSet<String> = ["", "a", "a/b"].iter().map(|s| s.to_string()).collect();
    assert_eq!(owner(&dirs, "x"), Some(""));
    assert_eq!(owner(&dirs, "a/x"), Some("a"));
    assert_eq!(owner(&dirs, "a/b/c/d"), Some("a/b"));
    assert_eq!(owner(&dirs, "ab/x"), Some(""));
    let dirs: BTreeSet<String> = ["a"].iter().map(|s| s.to_string()).collect();
    assert_eq!(owner(&dirs, "b/x"), None);
}

#[test]
fn text_detection() {
    let f = |b: &[u8]| BundleFile {
        bytes: b.to_vec(),
        mode: 0o644,
    };
    assert!(f(b"plain").is_text());
    assert!(!f(b"a\0b").is_text());
    assert!(!f(b"\xff").is_text());
    assert_eq!(f(b"\xEF\xBB\xBFhi").text(), Some("hi"));
}
