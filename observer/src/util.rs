//! Small helpers with no better home.

/// Current UTC time as RFC 3339 (seconds precision), without a date-time dependency.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

/// Formats seconds since the epoch (UTC) as RFC 3339.
pub fn rfc3339(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// A regex with the cheap classes of [`ascii_classes`].
pub fn regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&ascii_classes(pattern))
}

/// Rewrites the Perl classes `\w`, `\d` (and their negations outside brackets) and the word
/// boundaries `\b`, `\B` to their ASCII forms, and `\s`/`\S` to an explicit list of the
/// Unicode White_Space characters (the same set, so odd spaces still count as spaces). The
/// patterns look for code, paths and command words; the Unicode classes made compiling them
/// ~10x slower (every `\w` is a UTF-8 automaton of ~700 ranges), ~50 ms of every run. A
/// non-ASCII letter next to a keyword now counts as a boundary, which only makes a pattern match
/// more often.
pub fn ascii_classes(pattern: &str) -> String {
    const W: &str = "0-9A-Za-z_";
    // Unicode White_Space exactly (25 characters): whitespace is where evasion lives.
    const S: &str =
        "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
    const D: &str = "0-9";
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut chars = pattern.chars();
    let mut in_class = false;
    // The first character after `[` or `[^` is literal even if it is `]`.
    let mut class_start = false;
    while let Some(c) = chars.next() {
        let at_start = std::mem::take(&mut class_start);
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let class = match e {
                    'w' => Some((W, false)),
                    's' => Some((S, false)),
                    'd' => Some((D, false)),
                    'W' => Some((W, true)),
                    'S' => Some((S, true)),
                    'D' => Some((D, true)),
                    _ => None,
                };
                match (class, in_class) {
                    (Some((set, false)), true) => out.push_str(set),
                    (Some((set, negated)), false) => {
                        out.push_str(if negated { "[^" } else { "[" });
                        out.push_str(set);
                        out.push(']');
                    }
                    _ if !in_class && (e == 'b' || e == 'B') => {
                        out.push_str("(?-u:\\");
                        out.push(e);
                        out.push(')');
                    }
                    _ => {
                        out.push('\\');
                        out.push(e);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.as_str().starts_with('^') {
                    out.push('^');
                    chars.next();
                }
                class_start = true;
            }
            ']' if in_class && !at_start => {
                in_class = false;
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_known_instants() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_796_037_600), "2026-11-30T11:20:00Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn perl_classes_become_cheap() {
        use super::ascii_classes;
        let sp = r"\t\n\x0B\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}";
        assert_eq!(
            ascii_classes(r"\bfoo\s+\w[^\s/\]x]\d\W\\w\x22[]a]"),
            format!(r"(?-u:\b)foo[{sp}]+[0-9A-Za-z_][^{sp}/\]x][0-9][^0-9A-Za-z_]\\w\x22[]a]")
        );
        let re = regex::Regex::new(&ascii_classes(r"\beval\s*\(")).unwrap();
        assert!(re.is_match("x = eval (1)"));
        assert!(
            re.is_match("x = eval\u{a0}(1)"),
            "Unicode spaces still count"
        );
        assert!(re.is_match("éeval(1)"), "a non-ASCII letter is a boundary");
        assert!(!re.is_match("medieval(1)"));
    }
}
