//! `{{name}}` substitution for image files. Single braces pass through untouched, so JSON, shell
//! and Python text need no escaping; an unknown name is an error, never an empty string.

use std::collections::BTreeMap;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TemplateError {
    #[error("unknown template variable {{{{{0}}}}}")]
    Unknown(String),
    #[error("unterminated {{{{ in {0:?}")]
    Unterminated(String),
}

pub type Vars = BTreeMap<String, String>;

pub fn expand(text: &str, vars: &Vars) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| TemplateError::Unterminated(rest[start..].chars().take(40).collect()))?;
        let name = after[..end].trim();
        let v = vars
            .get(name)
            .ok_or_else(|| TemplateError::Unknown(name.to_string()))?;
        out.push_str(v);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_and_rejects() {
        let vars: Vars = [("user".to_string(), "maya".to_string())].into();
        assert_eq!(expand("/home/{{user}}/x", &vars).unwrap(), "/home/maya/x");
        assert_eq!(
            expand("{\"a\": {\"b\": 1}}", &vars).unwrap(),
            "{\"a\": {\"b\": 1}}"
        );
        assert_eq!(expand("{{ user }}", &vars).unwrap(), "maya");
        assert_eq!(
            expand("{{nope}}", &vars),
            Err(TemplateError::Unknown("nope".into()))
        );
        assert!(matches!(
            expand("a {{user", &vars),
            Err(TemplateError::Unterminated(_))
        ));
    }
}
