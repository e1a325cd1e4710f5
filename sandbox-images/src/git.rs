//! A real git repository written object by object (zlib-compressed loose objects, refs, reflog and
//! a version-2 index), so the workspace has history without running `git` at build time and the
//! result is byte-for-byte reproducible from the seed.

use flate2::write::ZlibEncoder;
use flate2::Compression;
use sha1::{Digest, Sha1};
use std::collections::BTreeMap;
use std::io::Write;

/// One commit's effect, with the full file set after it.
pub struct CommitIn {
    pub message: String,
    pub author: String,
    pub email: String,
    pub time: i64,
    /// Path → (content, executable) after this commit.
    pub tree: BTreeMap<String, (Vec<u8>, bool)>,
    /// True when the commit came from someone else (reflog shows a pull).
    pub pulled: bool,
}

pub struct RepoOut {
    /// Paths relative to `.git/`.
    pub files: Vec<(String, Vec<u8>)>,
    /// Dirs relative to `.git/` that must exist even when empty.
    pub dirs: Vec<String>,
}

#[derive(Clone, Copy)]
pub struct RepoOpts<'a> {
    pub branch: &'a str,
    pub remote: &'a str,
    pub tz: &'a str,
    pub user: &'a str,
    pub email: &'a str,
    pub uid: u32,
    pub gid: u32,
    pub darwin: bool,
    /// Work-tree file mtimes, for the index.
    pub mtimes: &'a BTreeMap<String, i64>,
}

struct Store {
    objects: BTreeMap<String, Vec<u8>>,
}

impl Store {
    fn put(&mut self, kind: &str, body: &[u8]) -> [u8; 20] {
        let mut raw = format!("{kind} {}\0", body.len()).into_bytes();
        raw.extend_from_slice(body);
        let id: [u8; 20] = Sha1::digest(&raw).into();
        let hexid = hex::encode(id);
        let path = format!("objects/{}/{}", &hexid[..2], &hexid[2..]);
        self.objects.entry(path).or_insert_with(|| {
            let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
            // Writing into a Vec cannot fail.
            let _ = z.write_all(&raw);
            z.finish().unwrap_or_default()
        });
        id
    }

    fn tree(&mut self, files: &BTreeMap<String, (Vec<u8>, bool)>, prefix: &str) -> [u8; 20] {
        // Immediate children of `prefix`: files and subdirectories.
        let mut entries: Vec<(String, &'static str, [u8; 20])> = Vec::new();
        let mut subdirs: Vec<String> = Vec::new();
        for (path, (bytes, exec)) in files.range(prefix.to_string()..) {
            let Some(rest) = path.strip_prefix(prefix) else {
                break;
            };
            match rest.split_once('/') {
                None => {
                    let id = self.put("blob", bytes);
                    entries.push((
                        rest.to_string(),
                        if *exec { "100755" } else { "100644" },
                        id,
                    ));
                }
                Some((dir, _)) => {
                    if subdirs.last().map(String::as_str) != Some(dir) {
                        subdirs.push(dir.to_string());
                    }
                }
            }
        }
        subdirs.dedup();
        for d in subdirs {
            let id = self.tree(files, &format!("{prefix}{d}/"));
            entries.push((d, "40000", id));
        }
        // Git orders tree entries by name, directories compared as if they ended in '/'.
        entries.sort_by(|a, b| {
            let ka = if a.1 == "40000" {
                format!("{}/", a.0)
            } else {
                a.0.clone()
            };
            let kb = if b.1 == "40000" {
                format!("{}/", b.0)
            } else {
                b.0.clone()
            };
            ka.as_bytes().cmp(kb.as_bytes())
        });
        let mut body = Vec::new();
        for (name, mode, id) in entries {
            body.extend_from_slice(format!("{mode} {name}\0").as_bytes());
            body.extend_from_slice(&id);
        }
        self.put("tree", &body)
    }
}

pub fn build(commits: &[CommitIn], o: &RepoOpts) -> RepoOut {
    let mut store = Store {
        objects: BTreeMap::new(),
    };
    let zero = "0".repeat(40);
    let mut parent: Option<String> = None;
    let mut reflog = String::new();
    for (i, c) in commits.iter().enumerate() {
        let tree = hex::encode(store.tree(&c.tree, ""));
        let sig = format!("{} <{}> {} {}", c.author, c.email, c.time, o.tz);
        let mut body = format!("tree {tree}\n");
        if let Some(p) = &parent {
            body.push_str(&format!("parent {p}\n"));
        }
        body.push_str(&format!("author {sig}\ncommitter {sig}\n\n{}\n", c.message));
        let id = hex::encode(store.put("commit", body.as_bytes()));
        let old = parent.clone().unwrap_or_else(|| zero.clone());
        let subject = c.message.lines().next().unwrap_or_default();
        let what = if i == 0 && c.pulled {
            format!("clone: from {}", o.remote)
        } else if i == 0 {
            format!("commit (initial): {subject}")
        } else if c.pulled {
            "pull: Fast-forward".to_string()
        } else {
            format!("commit: {subject}")
        };
        // The reflog records who moved the ref (the user), at the commit or pull time.
        reflog.push_str(&format!(
            "{old} {id} {} <{}> {} {}\t{what}\n",
            o.user,
            o.email,
            c.time + if c.pulled { 3600 } else { 0 },
            o.tz
        ));
        parent = Some(id);
    }
    let head = parent.unwrap_or(zero);
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut config = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n".to_string();
    if o.darwin {
        config.push_str("\tignorecase = true\n\tprecomposeunicode = true\n");
    }
    config.push_str(&format!(
        "[remote \"origin\"]\n\turl = {}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"{b}\"]\n\tremote = origin\n\tmerge = refs/heads/{b}\n",
        o.remote,
        b = o.branch
    ));
    files.push((
        "HEAD".into(),
        format!("ref: refs/heads/{}\n", o.branch).into_bytes(),
    ));
    files.push(("config".into(), config.into_bytes()));
    files.push((
        "description".into(),
        b"Unnamed repository; edit this file 'description' to name the repository.\n".to_vec(),
    ));
    files.push((
        "info/exclude".into(),
        b"# git ls-files --others --exclude-from=.git/info/exclude\n# Lines that start with '#' are comments.\n# For a project mostly in C, the following would be a good set of\n# exclude patterns (uncomment them if you want to use them):\n# *.[oa]\n# *~\n".to_vec(),
    ));
    files.push((
        format!("refs/heads/{}", o.branch),
        format!("{head}\n").into_bytes(),
    ));
    files.push((
        format!("refs/remotes/origin/{}", o.branch),
        format!("{head}\n").into_bytes(),
    ));
    files.push((
        "refs/remotes/origin/HEAD".into(),
        format!("ref: refs/remotes/origin/{}\n", o.branch).into_bytes(),
    ));
    files.push(("logs/HEAD".into(), reflog.clone().into_bytes()));
    files.push((format!("logs/refs/heads/{}", o.branch), reflog.into_bytes()));
    if let Some(last) = commits.iter().rev().find(|c| !c.pulled) {
        files.push((
            "COMMIT_EDITMSG".into(),
            format!("{}\n", last.message).into_bytes(),
        ));
    }
    if let Some(last) = commits.last() {
        files.push(("index".into(), index(&mut store, &last.tree, o)));
    }
    files.extend(store.objects);
    RepoOut {
        files,
        dirs: vec![
            "hooks".into(),
            "objects/info".into(),
            "objects/pack".into(),
            "refs/tags".into(),
        ],
    }
}

/// Index version 2: one entry per tracked file, sorted by path, SHA-1 trailer.
fn index(store: &mut Store, tree: &BTreeMap<String, (Vec<u8>, bool)>, o: &RepoOpts) -> Vec<u8> {
    let mut out = b"DIRC".to_vec();
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(&(tree.len() as u32).to_be_bytes());
    for (path, (bytes, exec)) in tree {
        let id = store.put("blob", bytes);
        let t = o.mtimes.get(path).copied().unwrap_or(0) as u32;
        let start = out.len();
        for v in [t, 0, t, 0, 0, 0] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        let mode: u32 = if *exec { 0o100755 } else { 0o100644 };
        for v in [mode, o.uid, o.gid, bytes.len() as u32] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&id);
        out.extend_from_slice(&(path.len().min(0xfff) as u16).to_be_bytes());
        out.extend_from_slice(path.as_bytes());
        // NUL padding to a multiple of 8, at least one NUL.
        let len = out.len() - start;
        let pad = 8 - (len % 8);
        out.extend(std::iter::repeat_n(0u8, pad));
    }
    let sum: [u8; 20] = Sha1::digest(&out).into();
    out.extend_from_slice(&sum);
    out
}
