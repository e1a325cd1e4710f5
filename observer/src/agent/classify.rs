//! Does the text around a command tell the agent to run it? The classifier reads the class of
//! phrasing, not fixtures: the mood of the verb next to the command (imperative, negated,
//! descriptive), counter-example and documentation labels, and attack narratives. It leans to
//! running: only explicit negation, a counter-example label, an attack description or an output
//! sample keeps a command out of the plan, and a positive instruction beside any of those wins.

mod words;

use super::gates::{find_gate, normalise};
use super::markdown::ListKind;
use words::*;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    /// `,` `;` `:` `(` `)` dashes and sentence ends.
    Clause,
    /// An inline code span.
    Code,
}

/// Words of a text (lowercased, straight apostrophes), clause marks and code spans. `spans`
/// are content byte ranges (as [`super::markdown::spans`] gives them), in order. Returns the
/// tokens and, for each span, the index of its `Code` token.
fn tokens(text: &str, spans: &[(usize, usize)]) -> (Vec<Tok>, Vec<usize>) {
    let mut out = Vec::new();
    let mut code_idx = Vec::new();
    let mut pos = 0;
    for &(s, e) in spans {
        if s < pos || e > text.len() || s > e {
            continue;
        }
        let ticks = text[..s].len() - text[..s].trim_end_matches('`').len();
        let open = s - ticks.min(s - pos);
        words_into(text.get(pos..open).unwrap_or(""), &mut out);
        code_idx.push(out.len());
        out.push(Tok::Code);
        let close = text[e..].len() - text[e..].trim_start_matches('`').len();
        pos = e + close.min(ticks.max(1));
    }
    words_into(text.get(pos..).unwrap_or(""), &mut out);
    (out, code_idx)
}

fn words_into(text: &str, out: &mut Vec<Tok>) {
    let mut word = String::new();
    let flush = |w: &mut String, out: &mut Vec<Tok>| {
        let t = w.trim_matches(|c| c == '\'' || c == '-');
        if !t.is_empty() {
            out.push(Tok::Word(t.to_lowercase()));
        }
        w.clear();
    };
    for c in text.chars() {
        match c {
            c if c.is_alphanumeric() || c == '\'' => word.push(c),
            '\u{2019}' => word.push('\''),
            '-' if !word.is_empty() => word.push('-'),
            ',' | ';' | ':' | '(' | ')' | '.' | '!' | '?' | '\u{2014}' | '\u{2013}' | '-' => {
                flush(&mut word, out);
                out.push(Tok::Clause);
            }
            '\u{274C}' | '\u{1F6AB}' | '\u{26D4}' => {
                flush(&mut word, out);
                out.push(Tok::Word("\u{274C}".into()));
            }
            _ => flush(&mut word, out),
        }
    }
    flush(&mut word, out);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mood {
    /// Addressed to the agent: "run", "you must run", "remember to run".
    Imperative,
    /// "do not run", "never execute".
    Negated,
    /// "the script runs", "an attacker might run".
    Descriptive,
}

fn word(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Word(w)) => Some(w.as_str()),
        _ => None,
    }
}

fn is_verb(toks: &[Tok], i: usize) -> Option<bool> {
    let w = word(toks.get(i))?;
    if STRONG_VERBS.contains(&w) {
        return Some(true);
    }
    if !WEAK_VERBS.contains(&w) {
        return None;
    }
    // Auxiliary "do" ("do not run", "do run") is not the action.
    if w == "do" {
        let next = word(toks.get(i + 1));
        let verb_next = next.is_some_and(|n| {
            NEGATORS.contains(&n) || STRONG_VERBS.contains(&n) || WEAK_VERBS.contains(&n)
        });
        if verb_next {
            return None;
        }
    }
    Some(false)
}

/// Mood of the verb at `i`.
fn mood(toks: &[Tok], i: usize) -> Mood {
    // Negation within four words of the same clause, unless a double negative sits between.
    let mut k = i;
    let mut seen = 0;
    while k > 0 && seen < 4 {
        k -= 1;
        match word(toks.get(k)) {
            Some(w) if FORGETS.contains(&w) => break,
            Some(w) if NEGATORS.contains(&w) => return Mood::Negated,
            Some(_) => seen += 1,
            None => break,
        }
    }
    let prev_skip = |mut j: usize| -> (usize, Option<&str>) {
        while j > 0 {
            match word(toks.get(j - 1)) {
                Some(w) if ADVERBS.contains(&w) => j -= 1,
                Some(w) => return (j - 1, Some(w)),
                None => return (j - 1, None),
            }
        }
        (0, None)
    };
    let (j, prev) = prev_skip(i);
    let Some(p) = prev else {
        return Mood::Imperative; // sentence start, clause mark or a code span before it
    };
    if CONJ.contains(&p) || AGENT_SUBJECTS.contains(&p) {
        return Mood::Imperative;
    }
    if matches!(p, "you'll" | "you'd" | "we'll" | "i'll" | "let's" | "lets") {
        return Mood::Imperative;
    }
    if p == "to" {
        let (_, p2) = prev_skip(j);
        return match p2 {
            None => Mood::Imperative,
            Some(w) if TO_OK.contains(&w) || AGENT_SUBJECTS.contains(&w) => Mood::Imperative,
            Some(_) => Mood::Descriptive,
        };
    }
    if MODALS.contains(&p) || p == "to" {
        let (_, subj) = prev_skip(j);
        return match subj {
            None => Mood::Imperative,
            Some(w) if AGENT_SUBJECTS.contains(&w) => Mood::Imperative,
            Some(_) => Mood::Descriptive,
        };
    }
    Mood::Descriptive
}

/// What one piece of context says.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Signals {
    /// An instruction to act, addressed to the agent.
    pos: bool,
    /// A negated instruction or a counter-example label.
    neg: bool,
    /// An attack narrative ("an attacker might …").
    attack: bool,
    /// An output or format sample.
    doc: bool,
}

fn signals(text: &str) -> Signals {
    let (toks, _) = tokens(text, &super::markdown::spans(text));
    let norm = normalise(text);
    let mut s = Signals::default();
    for i in 0..toks.len() {
        if word(toks.get(i)) == Some("avoid") && mood(&toks, i) == Mood::Imperative {
            s.neg = true;
        }
        if is_verb(&toks, i).is_some() {
            match mood(&toks, i) {
                Mood::Imperative => s.pos = true,
                Mood::Negated => s.neg = true,
                Mood::Descriptive => {}
            }
        }
    }
    let words: Vec<&str> = toks.iter().filter_map(|t| word(Some(t))).collect();
    let short = words.len() <= 5;
    if COUNTER_PHRASES.iter().any(|p| norm.contains(p))
        || (short && words.iter().any(|w| COUNTER_ADJ.contains(w)))
        || (words.len() <= 2
            && matches!(words.first(), Some(&"don't") | Some(&"never"))
            && !words.get(1).is_some_and(|w| FORGETS.contains(w)))
    {
        s.neg = true;
    }
    s.attack = words.iter().any(|w| ATTACK_WORDS.contains(w))
        || norm.contains("bad actor")
        || norm.contains("threat actor");
    let label = words.len() <= 4 && words.iter().any(|w| DOC_LABEL_NOUNS.contains(w));
    s.doc = label || DOC_PHRASES.iter().any(|p| norm.contains(p));
    s
}

/// Why a command is left out of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// A negated instruction, counter-example label or attack description.
    Counter(String),
    /// An output or format sample.
    Documentation(String),
    /// Mentioned, but nothing tells the agent to run it.
    NotInstructed,
}

impl Skip {
    pub fn reason(&self) -> String {
        match self {
            Skip::Counter(t) => format!("presented as a counter-example: \"{}\"", short(t)),
            Skip::Documentation(t) => format!("presented as documentation: \"{}\"", short(t)),
            Skip::NotInstructed => "mentioned without an instruction to run it".into(),
        }
    }
}

fn short(t: &str) -> String {
    super::gates::bounded(t).chars().take(120).collect()
}

/// The classifier's answer: run (with the gate found in prose, if any) or skip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    pub run: Result<(), Skip>,
    pub gate: Option<String>,
}

/// Layers of context, nearest first. The first layer that says something decides: a positive
/// instruction runs; negation or an attack narrative skips unless a gate conditions it (a gated
/// step always runs); an output sample skips. Attack words in headings do not count (a section
/// named after threats may still hold real steps).
fn decide(layers: &[(&str, bool)], gate: Option<String>) -> Judgement {
    for &(text, is_heading) in layers {
        if text.trim().is_empty() {
            continue;
        }
        let s = signals(text);
        if s.pos && !is_heading {
            return Judgement { run: Ok(()), gate };
        }
        if s.neg || (s.attack && !is_heading) {
            if gate.is_some() {
                return Judgement { run: Ok(()), gate };
            }
            return Judgement {
                run: Err(Skip::Counter(text.to_string())),
                gate: None,
            };
        }
        if s.doc {
            return Judgement {
                run: Err(Skip::Documentation(text.to_string())),
                gate: None,
            };
        }
    }
    Judgement { run: Ok(()), gate }
}

fn first_gate(layers: &[&str]) -> Option<String> {
    layers.iter().find_map(|l| find_gate(l))
}

/// What surrounds a fenced code block.
#[derive(Debug, Default, Clone)]
pub struct BlockContext<'a> {
    /// The last sentence of the prose just before the block.
    pub near: &'a str,
    /// The block's leading comment lines and its fence info string.
    pub comment: &'a str,
    /// The rest of that prose block.
    pub rest: &'a str,
    /// When that prose is a list item: the paragraph introducing the list.
    pub intro: &'a str,
    /// Enclosing headings, nearest first.
    pub headings: &'a [String],
}

/// Should a fenced code block run?
pub fn judge_block(c: &BlockContext) -> Judgement {
    let mut layers: Vec<(&str, bool)> = vec![
        (c.near, false),
        (c.comment, false),
        (c.rest, false),
        (c.intro, false),
    ];
    layers.extend(c.headings.iter().map(|h| (h.as_str(), true)));
    let texts: Vec<&str> = layers.iter().map(|l| l.0).collect();
    decide(&layers, first_gate(&texts))
}

/// What surrounds an inline code span (or a command written without backticks).
#[derive(Debug, Clone)]
pub struct InlineContext<'a> {
    /// The sentence holding the command.
    pub sentence: &'a str,
    /// The command's byte range inside `sentence` (content, without backticks); `None` when the
    /// command is not a span: then `sentence` is the text before it.
    pub span: Option<(usize, usize)>,
    /// Byte ranges of every span of the sentence (content).
    pub all_spans: &'a [(usize, usize)],
    /// A gate found around the sentence (its prose block, the list's introduction, the
    /// headings), computed once per block by the caller.
    pub outer_gate: Option<String>,
    /// The block is a list item of this kind, and the command opens it.
    pub item_start: Option<ListKind>,
    /// When the block is a list item: the paragraph introducing the list.
    pub intro: &'a str,
    pub headings: &'a [String],
    /// The command looks like a command even without a verb (shell operators, a known program
    /// with arguments, a path to a script).
    pub strong: bool,
}

/// Should an inline command run?
pub fn judge_inline(c: &InlineContext) -> Judgement {
    let (toks, codes) = tokens(c.sentence, c.all_spans);
    let ci = match c.span {
        Some(span) => c
            .all_spans
            .iter()
            .position(|&s| s == span)
            .and_then(|p| codes.get(p).copied())
            .unwrap_or(toks.len()),
        None => toks.len(),
    };
    let gate = find_gate(c.sentence).or_else(|| c.outer_gate.clone());
    let run = Judgement {
        run: Ok(()),
        gate: gate.clone(),
    };
    let counter = |t: &str| {
        if gate.is_some() {
            run.clone()
        } else {
            Judgement {
                run: Err(Skip::Counter(t.to_string())),
                gate: None,
            }
        }
    };
    // 1. A verb just before the command, looking back over at most ten words and through
    //    earlier commands joined by conjunctions ("run `a` and then `b`").
    let mut k = ci;
    let mut words = 0;
    while k > 0 && words < VERB_WINDOW {
        k -= 1;
        match &toks[k] {
            Tok::Code => {
                let joined = toks[k + 1..ci].iter().all(|t| {
                    matches!(t, Tok::Clause) || word(Some(t)).is_some_and(|w| CONJ.contains(&w))
                });
                if !joined {
                    break;
                }
            }
            Tok::Clause => {}
            Tok::Word(_) => {
                words += 1;
                if let Some(strong_verb) = is_verb(&toks, k) {
                    return match mood(&toks, k) {
                        Mood::Negated => counter(c.sentence),
                        Mood::Imperative if strong_verb || c.strong => run,
                        Mood::Imperative => Judgement {
                            run: Err(Skip::NotInstructed),
                            gate: None,
                        },
                        // "the script uses", "an attacker might run": not an instruction,
                        // but the sentence may still open with an ordering word.
                        Mood::Descriptive => break,
                    };
                }
            }
        }
    }
    // 2. Passive: "`x` must be run first", "`x` needs to be executed".
    let after: Vec<&str> = toks
        .iter()
        .skip(ci + 1)
        .take(7)
        .map_while(|t| word(Some(t)))
        .collect();
    if let Some(p) = after.iter().position(|w| PASSIVE.contains(w)) {
        let before = &after[..p];
        let modal = before.iter().any(|w| {
            MODALS.contains(w) || matches!(*w, "is" | "are" | "be" | "has" | "have" | "gets")
        });
        if modal
            && before
                .iter()
                .any(|w| matches!(*w, "be" | "is" | "are" | "to" | "been"))
        {
            if before.iter().any(|w| NEGATORS.contains(w)) {
                return counter(c.sentence);
            }
            if c.strong {
                return run;
            }
        }
    }
    // 3. Structure: an ordering word opening the sentence, or the command opening a numbered
    //    step or a bullet of a setup section. The command must look like one.
    let opens_with_order = toks
        .iter()
        .take(ci.min(12))
        .find_map(|t| word(Some(t)))
        .is_some_and(|w| ORDERING.contains(&w));
    let setup_section = c
        .headings
        .iter()
        .any(|h| SETUP_HEADINGS.iter().any(|s| h.to_lowercase().contains(s)));
    let structural = match c.item_start {
        Some(ListKind::Ordered) => true,
        Some(ListKind::Bullet) => setup_section,
        None => false,
    } || opens_with_order
        || (ci == 0 && setup_section);
    if structural && c.strong {
        let mut layers = vec![(c.sentence, false), (c.intro, false)];
        layers.extend(c.headings.iter().map(|h| (h.as_str(), true)));
        return decide(&layers, gate);
    }
    let s = signals(c.sentence);
    if (s.neg || s.attack) && !s.pos {
        return counter(c.sentence);
    }
    Judgement {
        run: Err(Skip::NotInstructed),
        gate: None,
    }
}

#[cfg(test)]
mod tests;
