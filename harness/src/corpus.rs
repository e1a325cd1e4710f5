//! The corpus: `harness/corpus/<case>/{skill/, expect.toml, trace.jsonl}`.

use crate::expect::{Expect, ExpectError};
use std::path::{Path, PathBuf};

/// The corpus shipped with this crate.
pub fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// File name of a case's recorded trace.
pub const TRACE_FILE: &str = "trace.jsonl";

#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error("corpus {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("case {case}: expect.toml: {source}")]
    Expect {
        case: String,
        #[source]
        source: ExpectError,
    },
    #[error("case {case}: {problem}")]
    Layout { case: String, problem: String },
    #[error("--filter {0:?} matches no case")]
    NoMatch(String),
}

#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub dir: PathBuf,
    pub expect: Expect,
}

impl Case {
    pub fn skill_dir(&self) -> PathBuf {
        match (&self.expect.skill_of, self.dir.parent()) {
            (Some(other), Some(root)) => root.join(other).join("skill"),
            _ => self.dir.join("skill"),
        }
    }
    pub fn trace_path(&self) -> PathBuf {
        self.dir.join(TRACE_FILE)
    }
    /// A stable credential seed per case, so re-recorded traces plant the same values and diffs
    /// stay readable. 64 hex digits, as `observe --seed` takes.
    pub fn seed(&self) -> String {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(format!("harness-corpus:{}", self.name)))
    }
}

/// A case name is a plain folder name: letters, digits, `-`, `_`.
fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CorpusError + '_ {
    move |source| CorpusError::Io {
        path: path.display().to_string(),
        source,
    }
}

pub fn load_case(dir: &Path) -> Result<Case, CorpusError> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let layout = |problem: String| CorpusError::Layout {
        case: name.clone(),
        problem,
    };
    if !valid_name(&name) {
        return Err(layout(
            "case folder names use letters, digits, '-' and '_' only".into(),
        ));
    }
    let p = dir.join("expect.toml");
    let text = std::fs::read_to_string(&p).map_err(io(&p))?;
    let expect = Expect::parse(&text).map_err(|source| CorpusError::Expect {
        case: name.clone(),
        source,
    })?;
    if let Some(other) = &expect.skill_of {
        if !valid_name(other) || *other == name {
            return Err(layout(format!(
                "skill_of {other:?} is not another case's name"
            )));
        }
    }
    let case = Case {
        name: name.clone(),
        dir: dir.to_path_buf(),
        expect,
    };
    if !case.skill_dir().join("SKILL.md").is_file() {
        return Err(layout(format!(
            "{} has no SKILL.md",
            case.skill_dir().display()
        )));
    }
    Ok(case)
}

/// Every case under `root` (sorted by name) whose name contains `filter`.
pub fn load(root: &Path, filter: Option<&str>) -> Result<Vec<Case>, CorpusError> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for entry in std::fs::read_dir(root).map_err(io(root))? {
        let entry = entry.map_err(io(root))?;
        if entry.file_type().map_err(io(root))?.is_dir() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    let mut cases = Vec::new();
    for d in dirs {
        let name = d.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        cases.push(load_case(&d)?);
    }
    if cases.is_empty() {
        if let Some(f) = filter {
            return Err(CorpusError::NoMatch(f.to_string()));
        }
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_case(root: &Path, name: &str, expect: &str) {
        let d = root.join(name).join("skill");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("SKILL.md"), "---\nname: x\n---\n").unwrap();
        std::fs::write(root.join(name).join("expect.toml"), expect).unwrap();
    }

    #[test]
    fn loads_filters_and_names_the_broken_case() {
        let t = tempfile::tempdir().unwrap();
        let ok = "kind = \"benign\"\nverdict = [\"CLEAN\"]\n";
        write_case(t.path(), "b-case", ok);
        write_case(t.path(), "a-case", ok);
        let all = load(t.path(), None).unwrap();
        assert_eq!(
            all.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["a-case", "b-case"]
        );
        assert_eq!(load(t.path(), Some("b-")).unwrap().len(), 1);
        assert!(matches!(
            load(t.path(), Some("zzz")),
            Err(CorpusError::NoMatch(_))
        ));
        assert_ne!(all[0].seed(), all[1].seed());
        assert_eq!(all[0].seed().len(), 64);
        write_case(
            t.path(),
            "c-case",
            "kind = \"benign\"\nverdict = [\"NICE\"]\n",
        );
        let e = load(t.path(), None).unwrap_err().to_string();
        assert!(e.contains("c-case") && e.contains("NICE"), "{e}");
    }

    #[test]
    fn a_control_runs_another_case_s_skill() {
        let t = tempfile::tempdir().unwrap();
        write_case(
            t.path(),
            "atk-x",
            "kind = \"attack\"\nverdict = [\"MALICIOUS\"]\n",
        );
        let ctl = t.path().join("ctl-x");
        std::fs::create_dir_all(&ctl).unwrap();
        let exp = "kind = \"control\"\nskill_of = \"atk-x\"\nverdict = [\"CLEAN\"]\n";
        std::fs::write(ctl.join("expect.toml"), exp).unwrap();
        let c = load_case(&ctl).unwrap();
        assert_eq!(c.skill_dir(), t.path().join("atk-x").join("skill"));
        for bad in ["../etc", "ctl-x", "atk-missing"] {
            let exp = format!("kind = \"control\"\nskill_of = \"{bad}\"\nverdict = [\"CLEAN\"]\n");
            std::fs::write(ctl.join("expect.toml"), exp).unwrap();
            assert!(load_case(&ctl).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_shipped_corpus_loads() {
        let cases = load(&default_dir(), None).unwrap();
        assert!(cases.len() >= 40, "{} cases", cases.len());
    }
}
