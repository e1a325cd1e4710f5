//! `SKILL.md` parsing: YAML front matter between `---` lines, then the instructions.

use serde::Serialize;
use serde_json::{Map, Value as Json};
use serde_yaml::Value as Yaml;

/// The front matter fields the pipeline uses, plus the whole mapping as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct FrontMatter {
    pub name: Option<String>,
    pub description: Option<String>,
    /// `allowed-tools`, as a list (a comma- or space-separated string is split).
    pub allowed_tools: Vec<String>,
    pub license: Option<String>,
    /// `metadata` as given (`null` when absent).
    pub metadata: Json,
    /// Every key of the front matter, converted to JSON (non-string keys stringified).
    pub raw: Map<String, Json>,
}

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillMd {
    pub front_matter: FrontMatter,
    /// The instructions after the front matter, with CRLF turned into LF.
    pub body: String,
}

/// Parse `SKILL.md` bytes. The error is a human-readable reason.
pub fn parse_skill_md(bytes: &[u8]) -> Result<SkillMd, String> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes)
        .map_err(|e| format!("not valid UTF-8 (at byte {})", e.valid_up_to()))?;
    let text = text.replace("\r\n", "\n");
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if !is_fence(first) {
        return Err("no YAML front matter: the file must start with a `---` line".into());
    }
    let mut yaml = String::new();
    let mut closed = false;
    let mut consumed = first.len();
    for line in lines.by_ref() {
        consumed += line.len();
        if is_fence(line) {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err("front matter is not closed by a `---` line".into());
    }
    let body = text[consumed..].to_string();
    let front_matter = parse_front_matter(&yaml)?;
    Ok(SkillMd { front_matter, body })
}

fn is_fence(line: &str) -> bool {
    line.trim_end_matches(['\n', '\r', ' ', '\t']) == "---"
}

fn parse_front_matter(yaml: &str) -> Result<FrontMatter, String> {
    let value: Yaml =
        serde_yaml::from_str(yaml).map_err(|e| format!("invalid YAML front matter: {e}"))?;
    let raw = match yaml_to_json(value) {
        Json::Null => Map::new(),
        Json::Object(map) => map,
        other => {
            return Err(format!(
                "front matter must be a YAML mapping, found {}",
                json_kind(&other)
            ))
        }
    };
    let name = scalar_field(&raw, "name")?.filter(|s| !s.trim().is_empty());
    let description = scalar_field(&raw, "description")?;
    let license = scalar_field(&raw, "license")?;
    let tools_value = raw
        .get("allowed-tools")
        .or_else(|| raw.get("allowed_tools"));
    let allowed_tools = match tools_value {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::String(s)) => split_tools(s),
        Some(Json::Array(items)) => items
            .iter()
            .map(|v| match v {
                Json::String(s) => Ok(s.trim().to_string()),
                other => Err(format!(
                    "`allowed-tools` entries must be strings, found {}",
                    json_kind(other)
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(format!(
                "`allowed-tools` must be a string or a list, found {}",
                json_kind(other)
            ))
        }
    };
    let metadata = raw.get("metadata").cloned().unwrap_or(Json::Null);
    Ok(FrontMatter {
        name,
        description,
        allowed_tools,
        license,
        metadata,
        raw,
    })
}

/// A string field; numbers and booleans are accepted as their text, lists and maps are errors.
fn scalar_field(raw: &Map<String, Json>, key: &str) -> Result<Option<String>, String> {
    match raw.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(v @ (Json::Number(_) | Json::Bool(_))) => Ok(Some(v.to_string())),
        Some(other) => Err(format!(
            "`{key}` must be a string, found {}",
            json_kind(other)
        )),
    }
}

/// Split `Read, Grep, Bash(git add:*)` or `Read Grep` into tools; separators inside parentheses
/// belong to the tool pattern.
pub fn split_tools(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            ',' | ' ' | '\t' | '\n' if depth == 0 => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn json_kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "a mapping",
    }
}

/// YAML → JSON. Non-string keys become their YAML text; tags are dropped; non-finite floats
/// become strings (JSON has none).
pub fn yaml_to_json(v: Yaml) -> Json {
    match v {
        Yaml::Null => Json::Null,
        Yaml::Bool(b) => Json::Bool(b),
        Yaml::Number(n) => {
            if let Some(i) = n.as_i64() {
                Json::from(i)
            } else if let Some(u) = n.as_u64() {
                Json::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                serde_json::Number::from_f64(f)
                    .map(Json::Number)
                    .unwrap_or_else(|| Json::String(n.to_string()))
            }
        }
        Yaml::String(s) => Json::String(s),
        Yaml::Sequence(items) => Json::Array(items.into_iter().map(yaml_to_json).collect()),
        Yaml::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match k {
                    Yaml::String(s) => s,
                    other => serde_yaml::to_string(&other)
                        .map(|s| s.trim_end().to_string())
                        .unwrap_or_default(),
                };
                out.insert(key, yaml_to_json(v));
            }
            Json::Object(out)
        }
        Yaml::Tagged(t) => yaml_to_json(t.value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> SkillMd {
        parse_skill_md(s.as_bytes()).expect("parses")
    }
    fn err(s: &[u8]) -> String {
        parse_skill_md(s).expect_err("must fail")
    }

    #[test]
    fn parses_all_fields() {
        let md = ok("---\nname: pdf-tools\ndescription: Fill PDF forms\nallowed-tools: Read, Grep, Bash(git add:*)\nlicense: MIT\nmetadata:\n  hosts: [api.example.com]\n---\n# Title\nbody\n");
        let fm = &md.front_matter;
        assert_eq!(fm.name.as_deref(), Some("pdf-tools"));
        assert_eq!(fm.description.as_deref(), Some("Fill PDF forms"));
        assert_eq!(fm.allowed_tools, ["Read", "Grep", "Bash(git add:*)"]);
        assert_eq!(fm.license.as_deref(), Some("MIT"));
        assert_eq!(fm.metadata["hosts"][0], "api.example.com");
        assert_eq!(md.body, "# Title\nbody\n");
    }

    #[test]
    fn bom_and_crlf() {
        let md = parse_skill_md(
            b"\xEF\xBB\xBF---\r\nname: x\r\ndescription: d\r\n---\r\nline1\r\nline2\r\n",
        )
        .unwrap();
        assert_eq!(md.front_matter.name.as_deref(), Some("x"));
        assert_eq!(md.front_matter.description.as_deref(), Some("d"));
        assert_eq!(md.body, "line1\nline2\n");
    }

    #[test]
    fn missing_name_is_none_and_list_tools() {
        let md = ok("---\ndescription: d\nallowed-tools:\n  - Read\n  - Bash\n---\n");
        assert_eq!(md.front_matter.name, None);
        assert_eq!(md.front_matter.allowed_tools, ["Read", "Bash"]);
        assert_eq!(md.body, "");
        assert_eq!(ok("---\nname: ''\n---\n").front_matter.name, None);
        assert_eq!(ok("---\n---\nx").front_matter, FrontMatter::default());
    }

    #[test]
    fn malformed_inputs_are_errors() {
        assert!(err(b"# no front matter\n").contains("must start"));
        assert!(err(b"").contains("must start"));
        assert!(err(b"---\nname: x\nbody without closing\n").contains("not closed"));
        assert!(err(b"---\nname: [unclosed\n---\n").contains("invalid YAML"));
        assert!(err(b"---\n- a\n- b\n---\n").contains("mapping"));
        assert!(err(b"---\nname: {a: 1}\n---\n").contains("`name` must be a string"));
        assert!(err(b"---\nallowed-tools: {a: 1}\n---\n").contains("allowed-tools"));
        assert!(err(b"---\nname: \xff\xfe\n---\n").contains("UTF-8"));
        // Parser differential: two `name` keys must not let one tool see "good" and another "evil".
        assert!(err(b"---\nname: good\nname: evil\n---\n").contains("invalid YAML"));
    }

    #[test]
    fn billion_laughs_is_refused_quickly() {
        let mut y = String::from("---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            y.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        y.push_str("---\n");
        let t = std::time::Instant::now();
        let e = err(y.as_bytes());
        assert!(t.elapsed().as_secs() < 5, "took {:?}", t.elapsed());
        assert!(e.contains("invalid YAML"), "{e}");
    }

    #[test]
    fn numbers_and_tags_convert() {
        let md = ok("---\nname: 123\nmetadata: !custom {1: .inf, k: 2.5}\n---\n");
        assert_eq!(md.front_matter.name.as_deref(), Some("123"));
        assert_eq!(md.front_matter.metadata["1"], ".inf");
        assert_eq!(md.front_matter.metadata["k"], 2.5);
    }

    #[test]
    fn split_tools_handles_separators() {
        assert_eq!(split_tools("Read Grep"), ["Read", "Grep"]);
        assert_eq!(
            split_tools(" Bash(npm run *), Read "),
            ["Bash(npm run *)", "Read"]
        );
        assert!(split_tools("").is_empty());
    }
}
