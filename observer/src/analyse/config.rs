//! Scoring configuration: weights per indicator, band thresholds and detection thresholds.
//!
//! The shipped defaults live in `observer/config/weights.toml` (embedded at build time); a user
//! file overrides any subset of keys. Unknown keys are rejected so a typo cannot disable a rule.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The shipped defaults, documented in `docs/indicators.md`.
pub const SHIPPED_WEIGHTS_TOML: &str = include_str!("../../config/weights.toml");

/// Every key the weights table may hold: indicator ids and their variants.
pub const WEIGHT_KEYS: &[&str] = &[
    "BEHAV_CANARY_EXFIL",
    "BEHAV_DNS_EXFIL.canary",
    "BEHAV_REMOTE_EXEC",
    "BEHAV_PERSISTENCE",
    "BEHAV_DESTRUCTIVE",
    "BEHAV_CROSS_SKILL_WRITE",
    "BEHAV_TOOL_TAMPER",
    "BEHAV_STATIC_DIVERGENCE",
    "BEHAV_DRIFT",
    "BEHAV_UNDECLARED_HOST",
    "BEHAV_UNTRUSTED_SINK",
    "BEHAV_UNTRUSTED_SINK.data",
    "BEHAV_DNS_EXFIL",
    "BEHAV_CRED_ACCESS",
    "BEHAV_CRED_ACCESS.ambient",
    "BEHAV_CRED_FLOW",
    "BEHAV_SANDBOX_PROBE",
    "BEHAV_ESCAPE_ATTEMPT",
    "BEHAV_PERSISTENCE.declared",
    "BEHAV_DESTRUCTIVE.declared",
    "BEHAV_CROSS_SKILL_WRITE.declared",
    "BEHAV_TOOL_TAMPER.declared",
    "INFO_DECLARED_BEHAVIOUR",
    "INFO_CRED_TO_OWN_SERVICE",
];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("weights file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("weights: not valid TOML: {0}")]
    Toml(String),
    #[error("weights: unknown key {0:?} (see docs/indicators.md for the list)")]
    UnknownKey(String),
    #[error("weights: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bands {
    pub review: u32,
    pub blocked: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thresholds {
    pub destructive_min_files: usize,
    pub dns_unique_subdomains: usize,
    pub dns_long_label: usize,
    pub dns_entropy_x100: u32,
    pub dns_entropy_min_len: usize,
    pub sandbox_weak_markers: usize,
    pub evidence_cap: usize,
}

/// Everything the analyser's judgement depends on besides its inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnalyseConfig {
    pub bands: Bands,
    pub weights: BTreeMap<String, u32>,
    pub thresholds: Thresholds,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    bands: Option<RawBands>,
    #[serde(default)]
    weights: BTreeMap<String, i64>,
    #[serde(default)]
    thresholds: BTreeMap<String, i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBands {
    review: Option<i64>,
    blocked: Option<i64>,
}

impl Default for AnalyseConfig {
    fn default() -> Self {
        AnalyseConfig::shipped()
    }
}

impl AnalyseConfig {
    /// The shipped defaults. The embedded file is part of this build and a unit test parses it,
    /// so failure here is a build defect, not user input.
    pub fn shipped() -> AnalyseConfig {
        let base = AnalyseConfig {
            bands: Bands {
                review: 30,
                blocked: 70,
            },
            weights: BTreeMap::new(),
            thresholds: Thresholds {
                destructive_min_files: 10,
                dns_unique_subdomains: 10,
                dns_long_label: 32,
                dns_entropy_x100: 380,
                dns_entropy_min_len: 20,
                sandbox_weak_markers: 3,
                evidence_cap: 64,
            },
        };
        base.overlay(SHIPPED_WEIGHTS_TOML)
            .expect("shipped observer/config/weights.toml is valid (checked by a unit test)")
    }

    /// The shipped defaults overridden by a user TOML text.
    pub fn from_toml_str(text: &str) -> Result<AnalyseConfig, ConfigError> {
        AnalyseConfig::shipped().overlay(text)
    }

    /// The shipped defaults overridden by a user file (`--weights FILE`).
    pub fn load_file(path: &Path) -> Result<AnalyseConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.display().to_string(),
            source,
        })?;
        AnalyseConfig::from_toml_str(&text)
    }

    /// Weight of an indicator key; unknown keys weigh 0 (they cannot exist past validation).
    pub fn weight(&self, key: &str) -> u32 {
        self.weights.get(key).copied().unwrap_or(0)
    }

    fn overlay(mut self, text: &str) -> Result<AnalyseConfig, ConfigError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| ConfigError::Toml(e.to_string()))?;
        if let Some(b) = raw.bands {
            if let Some(v) = b.review {
                self.bands.review = pct(v, "bands.review")?;
            }
            if let Some(v) = b.blocked {
                self.bands.blocked = pct(v, "bands.blocked")?;
            }
        }
        for (k, v) in raw.weights {
            if !WEIGHT_KEYS.contains(&k.as_str()) {
                return Err(ConfigError::UnknownKey(k));
            }
            let w = pct(v, &k)?;
            if k.starts_with("INFO_") && w != 0 {
                return Err(ConfigError::Invalid(format!(
                    "{k} is information about declared behaviour and must weigh 0"
                )));
            }
            self.weights.insert(k, w);
        }
        for (k, v) in raw.thresholds {
            let n = usize::try_from(v)
                .map_err(|_| ConfigError::Invalid(format!("thresholds.{k} must be >= 0")))?;
            let t = &mut self.thresholds;
            match k.as_str() {
                "destructive_min_files" => t.destructive_min_files = n.max(1),
                "dns_unique_subdomains" => t.dns_unique_subdomains = n.max(2),
                "dns_long_label" => t.dns_long_label = n.max(1),
                "dns_entropy_x100" => t.dns_entropy_x100 = n.min(1000) as u32,
                "dns_entropy_min_len" => t.dns_entropy_min_len = n.max(1),
                "sandbox_weak_markers" => t.sandbox_weak_markers = n.max(1),
                "evidence_cap" => t.evidence_cap = n.max(1),
                _ => return Err(ConfigError::UnknownKey(format!("thresholds.{k}"))),
            }
        }
        if self.bands.review == 0 || self.bands.review >= self.bands.blocked {
            return Err(ConfigError::Invalid(format!(
                "bands must satisfy 0 < review < blocked <= 100 (review {}, blocked {})",
                self.bands.review, self.bands.blocked
            )));
        }
        Ok(self)
    }
}

fn pct(v: i64, what: &str) -> Result<u32, ConfigError> {
    if (0..=100).contains(&v) {
        Ok(v as u32)
    } else {
        Err(ConfigError::Invalid(format!(
            "{what} = {v} is outside 0..=100"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_file_is_complete_and_follows_the_band_rule() {
        let c = AnalyseConfig::shipped();
        for k in WEIGHT_KEYS {
            assert!(c.weights.contains_key(*k), "shipped weights lack {k}");
        }
        let strong = [
            "BEHAV_CANARY_EXFIL",
            "BEHAV_DNS_EXFIL.canary",
            "BEHAV_REMOTE_EXEC",
            "BEHAV_PERSISTENCE",
            "BEHAV_DESTRUCTIVE",
            "BEHAV_CROSS_SKILL_WRITE",
            "BEHAV_TOOL_TAMPER",
        ];
        for k in strong {
            assert!(c.weight(k) >= c.bands.blocked, "{k} must block on its own");
        }
        let soft = [
            "BEHAV_STATIC_DIVERGENCE",
            "BEHAV_DRIFT",
            "BEHAV_UNDECLARED_HOST",
            "BEHAV_UNTRUSTED_SINK",
            "BEHAV_CRED_ACCESS",
            "BEHAV_CRED_FLOW",
            "BEHAV_SANDBOX_PROBE",
            "BEHAV_ESCAPE_ATTEMPT",
            "BEHAV_DNS_EXFIL",
        ];
        for k in soft {
            let w = c.weight(k);
            assert!(
                w >= c.bands.review && w < c.bands.blocked,
                "{k}={w} must be review"
            );
        }
        assert_eq!(c.weight("INFO_DECLARED_BEHAVIOUR"), 0);
        assert!(c.weight("BEHAV_CRED_ACCESS.ambient") < c.bands.review);
    }

    #[test]
    fn user_file_overrides_and_rejects_typos() {
        let c = AnalyseConfig::from_toml_str("[weights]\nBEHAV_DRIFT = 5\n").unwrap();
        assert_eq!(c.weight("BEHAV_DRIFT"), 5);
        assert_eq!(c.weight("BEHAV_CANARY_EXFIL"), 100);
        assert!(matches!(
            AnalyseConfig::from_toml_str("[weights]\nBEHAV_DRIFTT = 5\n"),
            Err(ConfigError::UnknownKey(_))
        ));
        assert!(AnalyseConfig::from_toml_str("[weights]\nBEHAV_DRIFT = 500\n").is_err());
        assert!(AnalyseConfig::from_toml_str("[weights]\nBEHAV_DRIFT = -1\n").is_err());
        assert!(AnalyseConfig::from_toml_str("[weights]\nINFO_CRED_TO_OWN_SERVICE = 3\n").is_err());
        assert!(AnalyseConfig::from_toml_str("[bands]\nreview = 80\n").is_err());
        assert!(AnalyseConfig::from_toml_str("[bogus]\n").is_err());
        assert!(AnalyseConfig::from_toml_str("not toml [").is_err());
    }

    #[test]
    fn load_file_reports_missing_file() {
        let e = AnalyseConfig::load_file(Path::new("/nonexistent/w.toml")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/w.toml"));
    }
}
