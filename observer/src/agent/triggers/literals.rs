//! String literals in source lines, and whether a literal is compared to something (the value
//! a trigger waits for) or only passed along (a default, a format, a message).

use super::MAX_LITERAL;
use regex::Regex;
use std::sync::LazyLock;

/// String literals of one line: byte range of the content and the text.
pub(super) fn literals(line: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let q = b[i];
        if q != b'"' && q != b'\'' && q != b'`' {
            i += 1;
            continue;
        }
        let start = i + 1;
        let mut j = start;
        let mut text = String::new();
        let mut closed = false;
        while j < b.len() {
            if b[j] == b'\\' && j + 1 < b.len() {
                j += 2;
                continue;
            }
            if b[j] == q {
                closed = true;
                break;
            }
            j += 1;
        }
        if !closed {
            break;
        }
        if let Some(s) = line.get(start..j) {
            text.push_str(s);
        }
        // JS template literals with substitutions are not fixed strings.
        if !(q == b'`' && text.contains("${")) {
            out.push((start, j, text));
        }
        i = j + 1;
    }
    out
}

pub(super) fn usable(lit: &str) -> bool {
    // `"$VAR"`, `"${x}"`, `"$(cmd)"` are expansions, not fixed strings.
    let expansion = lit.match_indices('$').any(|(i, _)| {
        lit[i + 1..].starts_with(|c: char| c.is_ascii_alphabetic() || "_{(".contains(c))
    });
    !expansion
        && !lit.trim().is_empty()
        && lit.len() <= MAX_LITERAL
        && !lit.chars().any(char::is_control)
        && !lit.contains("%s")
        && !lit.contains("{}")
}

/// Method calls that compare their receiver to their argument (or test membership).
const COMPARE_FNS: &[&str] = &[
    "startswith",
    "endswith",
    "includes",
    "equals",
    "equalsIgnoreCase",
    "match",
    "test",
    "indexOf",
    "contains",
    "has",
    "fullmatch",
    "search",
    "eq",
    "equal",
    "in",
    "index",
];

/// Is the literal `[s, e)` (content range, quotes just outside) compared to something?
pub(super) fn compared(line: &str, s: usize, e: usize, shell: bool) -> bool {
    let before = line[..s.saturating_sub(1)].trim_end();
    let after = line.get(e + 1..).unwrap_or("").trim_start();
    // An operand of a larger expression (`'x' * 100`, `'a' + b`, `'%s' % v`) is not the value.
    if after.starts_with(['*', '+', '%'])
        || after.starts_with(".format")
        || after.starts_with(".join")
    {
        return false;
    }
    let ops = ["==", "!=", "===", "!==", "-eq", "-ne", "=~", "<>"];
    if ops.iter().any(|o| before.ends_with(o)) || ops.iter().any(|o| after.starts_with(o)) {
        return true;
    }
    if after.starts_with("in ") || after.starts_with("not in ") {
        return true;
    }
    let test_ctx = shell && (line.contains('[') || line.contains("test "));
    if test_ctx && (before.ends_with(" =") || after.starts_with("= ") || after.starts_with("=]")) {
        return true;
    }
    // Inside a group opened after `in` or a comparing call: `in ("a", "b")`,
    // `.startswith(("x", "y"))`, `['--a', '--b'].includes(x)`.
    let mut depth = 0i32;
    for (i, c) in before.char_indices().rev() {
        match c {
            ')' | ']' | '}' => depth += 1,
            '(' | '[' | '{' => {
                if depth > 0 {
                    depth -= 1;
                    continue;
                }
                let head = before[..i].trim_end();
                let word: String = head
                    .chars()
                    .rev()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                if COMPARE_FNS.contains(&word.as_str()) || head.ends_with("==") {
                    return true;
                }
                if c == '(' && head.ends_with('(') {
                    continue; // `.startswith((…))`: look one group further out
                }
                // `[...]` or `(...)` followed by a comparing call.
                let rest = &line[e..];
                let close = match c {
                    '(' => ')',
                    '[' => ']',
                    _ => '}',
                };
                if let Some(p) = rest.find(close) {
                    let tail = rest[p + 1..].trim_start();
                    if [".includes(", ".indexOf(", ".has(", ".contains("]
                        .iter()
                        .any(|t| tail.starts_with(t))
                    {
                        return true;
                    }
                }
                return false;
            }
            _ => {}
        }
    }
    false
}

/// The first literal of a `choices=[…]` / `click.Choice([…])` list.
pub(super) fn choice_literal(code: &str) -> Option<String> {
    let p = code.find("choices").or_else(|| code.find("Choice("))?;
    literals(&code[p..])
        .into_iter()
        .map(|(_, _, l)| l)
        .find(|l| usable(l))
}

/// Labels of a `case` arm: `deploy)`, `--force|-f)`, `"sync-now")`, `case "x":`, `case 'x':`.
pub(super) fn case_labels(line: &str) -> Option<Vec<String>> {
    if let Some(rest) = line.strip_prefix("case ") {
        let lits: Vec<String> = literals(rest).into_iter().map(|(_, _, l)| l).collect();
        return (!lits.is_empty()).then_some(lits);
    }
    let close = line.find(')')?;
    let head = &line[..close];
    if head.is_empty() || head.contains('(') || head.contains(' ') && !head.contains('|') {
        return None;
    }
    let labels: Vec<String> = head
        .split('|')
        .map(|l| l.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
        .filter(|l| !l.is_empty() && !l.contains('*') && !l.contains('?') && !l.contains('['))
        .collect();
    (!labels.is_empty()).then_some(labels)
}

/// Bare words compared in a shell test: `[ "$1" = deploy ]`, `[[ $MODE == yes ]]`.
pub(super) fn shell_bare_operands(code: &str, shell: bool) -> Vec<String> {
    static BARE: LazyLock<Regex> = LazyLock::new(|| {
        crate::util::regex(r"(?:==?|!=)\s+([A-Za-z0-9_][A-Za-z0-9_.:+-]*|-{1,2}[A-Za-z0-9][A-Za-z0-9_-]*)\s*(?:\]|;|&&|\|\||$)").expect("valid")
    });
    if !shell || !(code.contains('[') || code.contains("test ")) {
        return Vec::new();
    }
    BARE.captures_iter(code)
        .filter_map(|c| c.get(1).map(|m| m.as_str().to_string()))
        .filter(|w| usable(w))
        .collect()
}
