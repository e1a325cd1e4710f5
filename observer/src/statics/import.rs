//! `--static FILE`: a static scanner's view, `{"categories": [...], "declared_hosts": [...]}`.
//! Both keys are optional; other keys (a full scanner report) are ignored.

use super::hosts::normalise_host;
use crate::model::{Category, StaticSource, StaticView};
use serde_json::Value as Json;
use std::collections::BTreeSet;

/// What is wrong with an imported static view.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidStatic {
    #[error("not JSON: {0}")]
    Json(String),
    #[error("the top level must be a JSON object")]
    NotAnObject,
    #[error("`{0}` must be a list of strings")]
    NotAStringList(&'static str),
    #[error("unknown category {0:?} (expected network, credential, execution or writes)")]
    UnknownCategory(String),
    #[error("invalid host {0:?} in `declared_hosts`")]
    InvalidHost(String),
}

/// Parse an imported static view. Categories are matched case-insensitively; hosts are
/// normalised like declared hosts (docs/statics.md). `null` counts as absent.
pub fn parse_static(bytes: &[u8]) -> Result<StaticView, InvalidStatic> {
    let v: Json = serde_json::from_slice(bytes).map_err(|e| InvalidStatic::Json(e.to_string()))?;
    let Json::Object(map) = v else {
        return Err(InvalidStatic::NotAnObject);
    };
    let mut categories = BTreeSet::new();
    for s in string_list(map.get("categories"), "categories")? {
        let c = match s.trim().to_ascii_lowercase().as_str() {
            "network" => Category::Network,
            "credential" => Category::Credential,
            "execution" => Category::Execution,
            "writes" => Category::Writes,
            _ => return Err(InvalidStatic::UnknownCategory(s.to_string())),
        };
        categories.insert(c);
    }
    let mut hosts = BTreeSet::new();
    for s in string_list(map.get("declared_hosts"), "declared_hosts")? {
        hosts.insert(normalise_host(s).ok_or_else(|| InvalidStatic::InvalidHost(s.to_string()))?);
    }
    Ok(StaticView {
        source: StaticSource::Imported,
        categories: categories.into_iter().collect(),
        declared_hosts: hosts.into_iter().collect(),
    })
}

fn string_list<'a>(
    v: Option<&'a Json>,
    field: &'static str,
) -> Result<Vec<&'a str>, InvalidStatic> {
    match v {
        None | Some(Json::Null) => Ok(Vec::new()),
        Some(Json::Array(items)) => items
            .iter()
            .map(|i| i.as_str().ok_or(InvalidStatic::NotAStringList(field)))
            .collect(),
        Some(_) => Err(InvalidStatic::NotAStringList(field)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_and_full_reports() {
        let v = parse_static(b"{}").unwrap();
        assert_eq!(v.source, StaticSource::Imported);
        assert!(v.categories.is_empty() && v.declared_hosts.is_empty());
        let v = parse_static(
            br#"{"scanner": "x", "score": 12, "findings": [{"id": 1}],
                "categories": ["Network", "execution", "network"],
                "declared_hosts": ["HTTPS://API.GitHub.com:443/v3", "api.github.com.", "10.0.0.1"],
                "categories_extra": 5}"#,
        )
        .unwrap();
        assert_eq!(v.categories, [Category::Network, Category::Execution]);
        assert_eq!(v.declared_hosts, ["10.0.0.1", "api.github.com"]);
        let v = parse_static(br#"{"categories": null, "declared_hosts": null}"#).unwrap();
        assert!(v.categories.is_empty());
    }

    #[test]
    fn bad_values_are_typed_errors() {
        use InvalidStatic::*;
        assert!(matches!(parse_static(b"not json"), Err(Json(_))));
        assert_eq!(parse_static(b"[]"), Err(NotAnObject));
        assert_eq!(
            parse_static(br#"{"categories": "network"}"#),
            Err(NotAStringList("categories"))
        );
        assert_eq!(
            parse_static(br#"{"categories": [1]}"#),
            Err(NotAStringList("categories"))
        );
        assert_eq!(
            parse_static(br#"{"categories": ["filesystem"]}"#),
            Err(UnknownCategory("filesystem".into()))
        );
        assert_eq!(
            parse_static(br#"{"declared_hosts": ["not a host"]}"#),
            Err(InvalidHost("not a host".into()))
        );
        assert_eq!(
            parse_static(br#"{"declared_hosts": {"a": 1}}"#),
            Err(NotAStringList("declared_hosts"))
        );
    }
}
