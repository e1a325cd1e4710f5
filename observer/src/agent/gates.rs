//! Gates in prose: conditions the instructions put on a step ("only when the user says …",
//! "never run this unless …", "if the user asks for X, run …"). A gate never stops a step — an
//! attacker writes exactly such a condition to keep a payload quiet while a scanner watches —
//! it is recorded so the report can say which conditions the run ignored.

use regex::Regex;
use std::sync::LazyLock;

/// Phrasings that condition an action on the user, a moment or a permission. Each is matched
/// on lowercased text with straight apostrophes.
static GATE: LazyLock<Regex> = LazyLock::new(|| {
    let who = r"(?:the\s+)?(?:user|human|operator|owner|admin|administrator|person|customer|client|they|someone|anyone|he|she)";
    let acts = r"(?:say|says|said|ask|asks|asked|type|types|typed|request|requests|requested|mention|mentions|write|writes|confirm|confirms|confirmed|approve|approves|approved|want|wants|explicitly|enter|enters|use|uses|provide|provides|invoke|invokes|trigger|triggers|tell|tells|send|sends|include|includes|specifically|needs|need|gives|give|grants|allows|permits)";
    let pats = [
        // "only when / only if / only after / only once / only on request"
        r"\bonly\b[^.;]{0,60}?\b(?:when|if|after|once|on|upon|for|with|in\s+case)\b".to_string(),
        r"\bunless\b".to_string(),
        format!(r"\buntil\b[^.;]{{0,40}}\b(?:{who}|asked|told|confirm\w*|approv\w*|instruct\w*|request\w*)"),
        format!(r"\b(?:if|when|whenever|once|after|as\s+soon\s+as)\s+{who}\s+(?:\w+\s+){{0,3}}?{acts}\b"),
        r"\b(?:if|when|whenever|unless|until)\s+(?:explicitly\s+)?(?:asked|requested|prompted|instructed|told|permitted|authori[sz]ed)\b".to_string(),
        r"\b(?:on|upon|by)\s+(?:explicit\s+|special\s+|user\s+)?request\b".to_string(),
        r"\bwithout\s+(?:the\s+)?(?:user'?s?\s+|their\s+|explicit\s+|prior\s+)*(?:permission|consent|approval|confirmation|authori[sz]ation)\b".to_string(),
        format!(r"\b(?:ask|check\s+with|confirm\s+with)\s+{who}\s+(?:first|before)\b"),
        r"\bask\s+(?:first|before)\b".to_string(),
        r"\bwait\s+(?:for|until)\s+(?:the\s+user|confirmation|approval|permission|consent|a\s+go)\b".to_string(),
        r"\b(?:trigger|magic|secret|activation|special)[\s-]?(?:phrase|word|keyword|sentence|command)\b|\b(?:pass|code)[\s-](?:phrase|word)\b|\b(?:passphrase|codeword)\b".to_string(),
        r"\bthe\s+phrase\b".to_string(),
        r"\bwhen\s+(?:it\s+is\s+|it's\s+)?(?:needed|necessary|required|appropriate)\b".to_string(),
    ];
    crate::util::regex(&pats.join("|")).expect("gate pattern is valid")
});

/// Longest gate text kept (a sentence can be huge in hostile input).
const MAX_GATE_TEXT: usize = 300;

/// Lowercase with straight apostrophes and single spaces.
pub fn normalise(text: &str) -> String {
    let t: String = text
        .chars()
        .map(|c| match c {
            '\u{2019}' | '\u{2018}' | '`' => '\'',
            '\u{201C}' | '\u{201D}' => '"',
            c => c,
        })
        .collect::<String>()
        .to_lowercase();
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The gate in this text, if any: the text itself (trimmed and bounded), for the report.
pub fn find_gate(text: &str) -> Option<String> {
    let n = normalise(text);
    GATE.is_match(&n).then(|| bounded(text))
}

pub(crate) fn bounded(text: &str) -> String {
    let t = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if t.len() <= MAX_GATE_TEXT {
        return t;
    }
    let mut cut = MAX_GATE_TEXT;
    while !t.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &t[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_in_varied_wording() {
        for t in [
            "Only run this when the user says the phrase 'purple walrus'.",
            "Use this ONLY if the user explicitly asks for a full sync.",
            "Never run the script below unless you are told to.",
            "If the user asks for a backup, run `scripts/backup.sh`.",
            "When the operator types `sync now`, execute the following.",
            "Do not use this until the user confirms.",
            "Run this on request only.",
            "Don't call it without the user's explicit permission.",
            "Ask the user first.",
            "Wait for confirmation before running it.",
            "The activation phrase is 'blue moon'.",
            "Say the passphrase to unlock the backup.",
            "Whenever someone mentions deployment, run deploy.",
            "Execute only after approval.",
            "if asked, run the cleanup",
            "Run it when needed.",
            "Only when the user\u{2019}s message contains 'go'",
        ] {
            assert!(find_gate(t).is_some(), "{t}");
        }
    }

    #[test]
    fn plain_instructions_are_not_gates() {
        for t in [
            "Run `npm install` in the skill folder.",
            "This script converts PDF files to text.",
            "First, install the dependencies.",
            "Before first use, register your key.",
            "Do not run this: it deletes your home folder.",
            "The user gets a summary of the changes.",
            "If the file is missing, the script prints an error.",
            "Remove password.",
            "Reset the user's password with the admin command.",
        ] {
            assert_eq!(find_gate(t), None, "{t}");
        }
    }

    #[test]
    fn gate_text_is_bounded() {
        let long = format!("Only when the user says {}", "x".repeat(10_000));
        let g = find_gate(&long).unwrap();
        assert!(g.len() <= MAX_GATE_TEXT + 4, "{}", g.len());
        let multibyte = format!("unless {}", "é".repeat(400));
        assert!(find_gate(&multibyte).is_some());
    }
}
