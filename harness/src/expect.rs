//! `expect.toml`: what a corpus case must produce (docs/harness.md).

use observer::analyse::WEIGHT_KEYS;
use observer::model::Category;
use observer::report::Verdict;
use serde::Deserialize;
use std::collections::BTreeSet;

#[derive(Debug, thiserror::Error)]
pub enum ExpectError {
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    #[error("{0}")]
    Invalid(String),
}

/// Whether a case is an attack or a benign skill (the confusion summary's ground truth).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Attack,
    Benign,
    /// An attack run where its gate keeps the payload dormant (a macOS-only payload on the Linux
    /// image): it checks that nothing is invented, and stays out of the detection counts.
    Control,
}

/// The static view a case is judged against instead of the built-in categoriser's.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct StaticSpec {
    #[serde(default)]
    pub categories: Vec<Category>,
    #[serde(default)]
    pub declared_hosts: Vec<String>,
}

impl StaticSpec {
    /// The JSON a static scanner would hand `observe --static`.
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "categories": self.categories.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            "declared_hosts": self.declared_hosts,
        })
        .to_string()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    kind: Kind,
    #[serde(default)]
    summary: String,
    #[serde(default = "default_os")]
    os: String,
    #[serde(rename = "static")]
    statics: Option<StaticSpec>,
    verdict: Vec<String>,
    #[serde(default)]
    fire: Vec<String>,
    #[serde(default)]
    not_fire: Vec<String>,
    pending: Option<String>,
    #[serde(default)]
    pending_fire: Vec<String>,
    timeout: Option<u64>,
    skill_of: Option<String>,
}

fn default_os() -> String {
    "linux".into()
}

/// A validated `expect.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Expect {
    pub kind: Kind,
    /// What the case does, in one line (shown nowhere else; for readers of the corpus).
    pub summary: String,
    pub os: String,
    pub statics: Option<StaticSpec>,
    /// Acceptable verdicts; the first is the one the design calls for.
    pub verdicts: Vec<Verdict>,
    pub fire: BTreeSet<String>,
    pub not_fire: BTreeSet<String>,
    /// Why (part of) this case cannot pass yet: it depends on a part that has not landed.
    pub pending: Option<String>,
    /// With `pending`: only these `fire` entries are soft; everything else must hold. Empty with
    /// `pending` set means the whole case is soft.
    pub pending_fire: BTreeSet<String>,
    /// `observe --timeout` for this case (seconds).
    pub timeout: Option<u64>,
    /// Run the skill of this other case instead of an own `skill/` (a control runs the very
    /// bundle of the attack it controls).
    pub skill_of: Option<String>,
}

/// Indicator ids the analyser can emit (weight keys without their `.variant`).
pub fn known_indicator_ids() -> BTreeSet<&'static str> {
    WEIGHT_KEYS
        .iter()
        .map(|k| k.split('.').next().unwrap_or(k))
        .collect()
}

pub fn parse_verdict(s: &str) -> Option<Verdict> {
    match s {
        "CLEAN" => Some(Verdict::Clean),
        "SUSPICIOUS" => Some(Verdict::Suspicious),
        "MALICIOUS" => Some(Verdict::Malicious),
        "INCOMPLETE" => Some(Verdict::Incomplete),
        _ => None,
    }
}

impl Expect {
    pub fn parse(text: &str) -> Result<Expect, ExpectError> {
        let raw: RawExpect = toml::from_str(text)?;
        let bad = |m: String| Err(ExpectError::Invalid(m));
        if raw.os != "linux" && raw.os != "darwin-sim" {
            return bad(format!("os must be linux or darwin-sim, not {:?}", raw.os));
        }
        if raw.verdict.is_empty() {
            return bad("verdict must list at least one acceptable verdict".into());
        }
        let mut verdicts = Vec::new();
        for v in &raw.verdict {
            match parse_verdict(v) {
                Some(x) if !verdicts.contains(&x) => verdicts.push(x),
                Some(_) => return bad(format!("verdict {v} listed twice")),
                None => {
                    return bad(format!(
                        "unknown verdict {v:?} (CLEAN, SUSPICIOUS, MALICIOUS, INCOMPLETE)"
                    ))
                }
            }
        }
        // A typo in an indicator id would make a must-not-fire check vacuous: refuse it.
        let known = known_indicator_ids();
        let ids = |list: &[String], what: &str| -> Result<BTreeSet<String>, ExpectError> {
            let mut out = BTreeSet::new();
            for id in list {
                if !known.contains(id.as_str()) {
                    return Err(ExpectError::Invalid(format!(
                        "{what}: unknown indicator id {id:?}"
                    )));
                }
                if !out.insert(id.clone()) {
                    return Err(ExpectError::Invalid(format!("{what}: {id} listed twice")));
                }
            }
            Ok(out)
        };
        let fire = ids(&raw.fire, "fire")?;
        let not_fire = ids(&raw.not_fire, "not_fire")?;
        let pending_fire = ids(&raw.pending_fire, "pending_fire")?;
        if let Some(id) = fire.intersection(&not_fire).next() {
            return bad(format!("{id} is in both fire and not_fire"));
        }
        if let Some(id) = pending_fire.difference(&fire).next() {
            return bad(format!("pending_fire: {id} is not in fire"));
        }
        if !pending_fire.is_empty() && raw.pending.is_none() {
            return bad("pending_fire needs pending = \"reason\"".into());
        }
        if raw.pending.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return bad("pending must say why".into());
        }
        if raw.kind == Kind::Benign && verdicts[0] != Verdict::Clean {
            return bad("a benign case's first acceptable verdict must be CLEAN".into());
        }
        if raw.kind == Kind::Attack && verdicts.contains(&Verdict::Clean) {
            return bad("an attack case cannot accept CLEAN".into());
        }
        if raw.timeout == Some(0) {
            return bad("timeout must be at least 1 second".into());
        }
        Ok(Expect {
            kind: raw.kind,
            summary: raw.summary,
            os: raw.os,
            statics: raw.statics,
            verdicts,
            fire,
            not_fire,
            pending: raw.pending,
            pending_fire,
            timeout: raw.timeout,
            skill_of: raw.skill_of,
        })
    }

    /// The whole case is soft (pending without a narrowed `pending_fire`).
    pub fn wholly_pending(&self) -> bool {
        self.pending.is_some() && self.pending_fire.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"
kind = "attack"
summary = "steals keys"
verdict = ["MALICIOUS"]
fire = ["BEHAV_CRED_ACCESS", "BEHAV_CANARY_EXFIL"]
not_fire = ["BEHAV_DESTRUCTIVE"]
pending = "egress capture"
pending_fire = ["BEHAV_CANARY_EXFIL"]
[static]
categories = ["network"]
declared_hosts = ["api.example.com"]
"#;

    #[test]
    fn parses_a_full_expectation() {
        let e = Expect::parse(OK).unwrap();
        assert_eq!(e.kind, Kind::Attack);
        assert_eq!(e.os, "linux");
        assert_eq!(e.verdicts, vec![Verdict::Malicious]);
        assert!(e.fire.contains("BEHAV_CANARY_EXFIL"));
        assert!(!e.wholly_pending());
        let s = e.statics.unwrap();
        assert_eq!(s.categories, vec![Category::Network]);
        let v: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(v["categories"][0], "network");
        assert_eq!(v["declared_hosts"][0], "api.example.com");
    }

    fn err(text: &str) -> String {
        Expect::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn refuses_typos_and_contradictions() {
        let base = "kind = \"attack\"\nverdict = [\"MALICIOUS\"]\n";
        assert!(err(&format!("{base}fire = [\"BEHAV_PERSISTANCE\"]")).contains("unknown indicator"));
        assert!(err(&format!("{base}not_fire = [\"BEHAV_X\"]")).contains("unknown indicator"));
        assert!(err(&format!(
            "{base}fire = [\"BEHAV_DRIFT\"]\nnot_fire = [\"BEHAV_DRIFT\"]"
        ))
        .contains("both"));
        assert!(err(&format!(
            "{base}pending_fire = [\"BEHAV_DRIFT\"]\npending = \"x\""
        ))
        .contains("not in fire"));
        assert!(err(&format!(
            "{base}fire = [\"BEHAV_DRIFT\"]\npending_fire = [\"BEHAV_DRIFT\"]"
        ))
        .contains("needs pending"));
        assert!(err(&format!("{base}pending = \"  \"")).contains("say why"));
        assert!(err("kind = \"attack\"\nverdict = [\"EVIL\"]").contains("unknown verdict"));
        assert!(err("kind = \"attack\"\nverdict = []").contains("at least one"));
        assert!(err("kind = \"attack\"\nverdict = [\"CLEAN\"]").contains("cannot accept CLEAN"));
        assert!(err("kind = \"benign\"\nverdict = [\"SUSPICIOUS\"]").contains("must be CLEAN"));
        assert!(err(&format!("{base}os = \"windows\"")).contains("os must be"));
        assert!(err(&format!("{base}colour = \"red\"")).contains("unknown field"));
        assert!(
            err("kind = \"attack\"\nverdict = [\"MALICIOUS\", \"MALICIOUS\"]").contains("twice")
        );
    }

    #[test]
    fn variant_keys_are_not_ids_but_their_base_is() {
        let k = known_indicator_ids();
        assert!(k.contains("BEHAV_DNS_EXFIL"));
        assert!(!k.contains("BEHAV_DNS_EXFIL.canary"));
    }
}
