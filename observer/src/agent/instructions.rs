//! Reading the instruction texts: which commands to run (fenced blocks, inline commands,
//! commands written out after "run"), which scripts are mentioned and how, which `make`
//! targets are named. Each decision goes through the classifier; skipped commands are noted.

use super::classify::{judge_block, judge_inline, BlockContext, InlineContext, Judgement, Skip};
use super::commands::{self, look, Look, Resolver, Runner};
use super::docs::Doc;
use super::gates::find_gate;
use super::make::{make_in_line, prose_make, MakeMention};
use super::markdown::{self, Block, ListKind};
use super::scripts::{self, Shown};
use super::{brief, Draft, PlanContext, Source, StepKind, MAX_COMMAND_BYTES};

/// Bytes of context the classifier reads around a command (before it; half as much after).
const CONTEXT_BYTES: usize = 600;
/// Inline commands judged per prose block; more are noted as not run.
pub const MAX_SPANS_PER_BLOCK: usize = 256;

/// The part of a long sentence around one span, with the spans inside it, re-based.
fn window<'s>(
    sentence: &'s str,
    span: (usize, usize),
    spans: &[(usize, usize)],
) -> (&'s str, (usize, usize), Vec<(usize, usize)>) {
    if sentence.len() <= 2 * CONTEXT_BYTES {
        return (sentence, span, spans.to_vec());
    }
    let mut ws = span.0.saturating_sub(CONTEXT_BYTES);
    while !sentence.is_char_boundary(ws) {
        ws += 1;
    }
    let mut we = (span.1 + CONTEXT_BYTES / 2).min(sentence.len());
    while !sentence.is_char_boundary(we) {
        we -= 1;
    }
    let inside: Vec<(usize, usize)> = spans
        .iter()
        .filter(|&&(a, b)| a >= ws && b <= we)
        .map(|&(a, b)| (a - ws, b - ws))
        .collect();
    (&sentence[ws..we], (span.0 - ws, span.1 - ws), inside)
}

/// A script mentioned in the instructions.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub script: String,
    /// Interpreter and arguments when the mention sits in a command line; `None` when the text
    /// only names the script.
    pub shown: Option<Shown>,
    pub source: Source,
    pub gate: Option<String>,
    /// The surrounding command is one the plan runs.
    pub runs: bool,
    /// The command step is exactly this invocation (one line, nothing else), so no separate
    /// step is needed.
    pub covered: bool,
}

#[derive(Debug, Default)]
pub struct Found {
    pub commands: Vec<Draft>,
    pub invocations: Vec<Invocation>,
    pub make: Vec<MakeMention>,
}

struct Walker<'a> {
    res: &'a Resolver<'a>,
    ctx: &'a PlanContext,
    found: Found,
    not_run: &'a mut Vec<(String, String)>,
}

/// Read every instruction text.
pub fn read(
    docs: &[Doc],
    res: &Resolver,
    ctx: &PlanContext,
    not_run: &mut Vec<(String, String)>,
) -> Found {
    let mut w = Walker {
        res,
        ctx,
        found: Found::default(),
        not_run,
    };
    for d in docs {
        w.doc(d);
    }
    w.found
}

/// Shell lines with backslash continuations joined; each with its 0-based first line.
fn logical_lines(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, l) in code.lines().enumerate() {
        let (start, mut acc) = cur.take().unwrap_or((i, String::new()));
        if let Some(stripped) = l.strip_suffix('\\') {
            acc.push_str(stripped);
            acc.push(' ');
            cur = Some((start, acc));
        } else {
            acc.push_str(l);
            out.push((start, acc));
        }
    }
    if let Some(c) = cur {
        out.push(c);
    }
    out
}

impl Walker<'_> {
    fn doc(&mut self, d: &Doc) {
        let blocks = markdown::blocks(&d.text);
        let mut headings: Vec<(usize, String)> = Vec::new();
        // The prose block just before the current position (cleared by headings and code).
        let mut last_prose: Option<(String, Option<ListKind>)> = None;
        let mut last_para: String = String::new();
        for b in &blocks {
            match b {
                Block::Heading { level, text, .. } => {
                    headings.retain(|(l, _)| l < level);
                    headings.push((*level, text.clone()));
                    last_prose = None;
                    last_para.clear();
                }
                Block::Prose { text, line, list } => {
                    let hs: Vec<String> = headings.iter().rev().map(|(_, h)| h.clone()).collect();
                    let intro = if list.is_some() {
                        last_para.clone()
                    } else {
                        String::new()
                    };
                    self.prose(d, text, *line, *list, &intro, &hs);
                    if list.is_none() {
                        last_para = text.clone();
                    }
                    last_prose = Some((text.clone(), *list));
                }
                Block::Code {
                    lang,
                    info,
                    text,
                    line,
                } => {
                    let hs: Vec<String> = headings.iter().rev().map(|(_, h)| h.clone()).collect();
                    let (lead, list) = last_prose.take().unwrap_or_default();
                    let intro = if list.is_some() {
                        last_para.clone()
                    } else {
                        String::new()
                    };
                    self.code(d, lang, info, text, *line, &lead, &intro, &hs);
                }
            }
        }
    }

    fn source(&self, d: &Doc, line_in_doc: usize) -> Source {
        Source::at(&d.file, d.line_offset + line_in_doc)
    }

    /// A fenced block.
    #[allow(clippy::too_many_arguments)]
    fn code(
        &mut self,
        d: &Doc,
        lang: &str,
        info: &str,
        text: &str,
        line: usize,
        lead: &str,
        intro: &str,
        headings: &[String],
    ) {
        let src = self.source(d, line);
        let what = format!(
            "{src} code block ({})",
            if lang.is_empty() { "unlabelled" } else { lang }
        );
        let runner = match commands::runner_for(lang, text) {
            Ok(Some(r)) => r,
            Ok(None) => {
                self.mentions_only(d, text, line, None);
                return;
            }
            Err(reason) => {
                self.not_run
                    .push((format!("{what}: {}", brief(text)), reason));
                self.mentions_only(d, text, line, None);
                return;
            }
        };
        let lead = markdown::tail(lead, 4 * CONTEXT_BYTES);
        let sents = markdown::sentences(lead);
        let (near, rest) = match sents.last() {
            Some(&(s, e)) => (
                markdown::tail(&lead[s..e], CONTEXT_BYTES),
                markdown::tail(&lead[..s], CONTEXT_BYTES),
            ),
            None => ("", ""),
        };
        let intro = markdown::tail(intro, CONTEXT_BYTES);
        let comment: String = text
            .lines()
            .take_while(|l| {
                let t = l.trim_start();
                t.starts_with('#') || t.starts_with("//") || t.is_empty()
            })
            .filter(|l| !l.trim_start().starts_with("#!"))
            .map(|l| l.trim_start().trim_start_matches(['#', '/']).trim())
            .take(3)
            .chain(std::iter::once(info))
            .collect::<Vec<_>>()
            .join(". ");
        let comment = markdown::head(&comment, CONTEXT_BYTES).to_string();
        let j = judge_block(&BlockContext {
            near,
            comment: &comment,
            rest,
            intro,
            headings,
        });
        let code = commands::strip_prompts(text, runner);
        if let Err(skip) = &j.run {
            self.not_run
                .push((format!("{what}: {}", brief(&code)), skip.reason()));
            self.mentions_only(d, text, line, j.gate.clone());
            return;
        }
        if code.trim().is_empty() {
            return;
        }
        if code.len() > MAX_COMMAND_BYTES {
            self.not_run.push((
                format!("{what}: {}", brief(&code)),
                format!("larger than {MAX_COMMAND_BYTES} bytes"),
            ));
            return;
        }
        let resolved = match runner {
            Runner::Shell => self.res.shell(&code),
            _ => self.res.placeholders(&code),
        };
        let mut dr = Draft::new(
            StepKind::CodeBlock,
            format!("{what}: {}", brief(&code)),
            runner.argv(&resolved),
            &self.ctx.workspace,
            src,
        );
        dr.gate = j.gate.clone();
        dr.scripts = self.res.scripts_in(&resolved);
        self.found.commands.push(dr);
        if runner == Runner::Shell {
            let lines = logical_lines(&code);
            let single = lines.iter().filter(|(_, l)| !l.trim().is_empty()).count() == 1;
            for (i, l) in &lines {
                let l = self.res.shell(l);
                self.shell_line(d, &l, line + i, j.gate.clone(), single);
            }
        } else {
            self.mentions_only(d, text, line, j.gate.clone());
        }
    }

    /// Mentions, `make` targets and invocations in one shell line of a command the plan runs.
    fn shell_line(&mut self, d: &Doc, l: &str, line: usize, gate: Option<String>, single: bool) {
        for m in self.res.index.find(l, "") {
            let shown = scripts::shown_in_line(l, m.start, m.end);
            // Covered: the whole line is this invocation (no operator before or after it).
            let covered = single
                && shown
                    .as_ref()
                    .is_some_and(|s| s.shell_args.is_none() && s.exact)
                && !l.contains(['|', ';', '&', '>', '<', '`', '(']);
            self.found.invocations.push(Invocation {
                script: m.script,
                shown,
                source: self.source(d, line),
                gate: gate.clone(),
                runs: true,
                covered,
            });
        }
        for (target, dir) in make_in_line(l) {
            self.found.make.push(MakeMention {
                target,
                dir,
                source: self.source(d, line),
                gate: gate.clone(),
                in_code: true,
            });
        }
    }

    /// Script mentions in text that does not run: references only.
    fn mentions_only(&mut self, d: &Doc, text: &str, first_line: usize, gate: Option<String>) {
        for m in self.res.index.find(text, "") {
            let line = first_line + markdown::line_of(text, m.start);
            self.found.invocations.push(Invocation {
                script: m.script,
                shown: None,
                source: self.source(d, line),
                gate: gate.clone(),
                runs: false,
                covered: false,
            });
        }
    }

    /// A command found in prose that the classifier accepted.
    fn instructed(&mut self, d: &Doc, cmd: &str, line: usize, j: &Judgement) {
        let cmd = cmd.trim().strip_prefix("$ ").unwrap_or(cmd.trim());
        if cmd.is_empty() || cmd.len() > MAX_COMMAND_BYTES {
            return;
        }
        let resolved = self.res.shell(cmd);
        let src = self.source(d, line);
        let mut dr = Draft::new(
            StepKind::InstructedCommand,
            format!("{src} instructed: {}", brief(cmd)),
            Runner::Shell.argv(&resolved),
            &self.ctx.workspace,
            src,
        );
        dr.gate = j.gate.clone();
        dr.scripts = self.res.scripts_in(&resolved);
        self.found.commands.push(dr);
        let single = !cmd.contains('\n');
        for (i, l) in logical_lines(cmd) {
            let l = self.res.shell(&l);
            self.shell_line(d, &l, line + i, j.gate.clone(), single);
        }
    }

    fn skipped(&mut self, d: &Doc, cmd: &str, line: usize, skip: &Skip, gate: Option<String>) {
        let src = self.source(d, line);
        self.not_run.push((
            format!("{src} inline command: {}", brief(cmd)),
            skip.reason(),
        ));
        self.mentions_only(d, cmd, line, gate);
    }

    /// A paragraph or list item.
    fn prose(
        &mut self,
        d: &Doc,
        text: &str,
        line: usize,
        list: Option<ListKind>,
        intro: &str,
        headings: &[String],
    ) {
        let intro = markdown::tail(intro, CONTEXT_BYTES);
        // Gates around the sentence, found once per block.
        let outer_gate = find_gate(text)
            .or_else(|| find_gate(intro))
            .or_else(|| headings.iter().find_map(|h| find_gate(h)));
        let all_spans = markdown::spans(text);
        let mut judged = 0usize;
        let mut next_span = 0usize;
        for (s0, s1) in markdown::sentences(text) {
            let sentence = &text[s0..s1];
            let sline = line + markdown::line_of(text, s0);
            while next_span < all_spans.len() && all_spans[next_span].0 < s0 {
                next_span += 1;
            }
            let mut spans: Vec<(usize, usize)> = Vec::new();
            while next_span < all_spans.len() && all_spans[next_span].1 <= s1 {
                let (a, b) = all_spans[next_span];
                spans.push((a - s0, b - s0));
                next_span += 1;
            }
            let sentence_gate = find_gate(sentence);
            for &(a, b) in &spans {
                let content = &sentence[a..b];
                let kind = look(content, &self.res.index);
                let at = line + markdown::line_of(text, s0 + a);
                if kind == Look::None {
                    self.mentions_only(d, content, at, sentence_gate.clone());
                    continue;
                }
                judged += 1;
                if judged > MAX_SPANS_PER_BLOCK {
                    if judged == MAX_SPANS_PER_BLOCK + 1 {
                        self.not_run.push((
                            format!("{} inline commands", self.source(d, at)),
                            format!("more than {MAX_SPANS_PER_BLOCK} in one paragraph"),
                        ));
                    }
                    continue;
                }
                let opens = sentence[..a].trim_end_matches('`').trim().is_empty() && s0 == 0;
                // A command alone on its line after prose ("… handles conversion:\n`cmd`")
                // reads like a one-line code block: judged like one.
                let line_start = text[..s0 + a].rfind('\n').map_or(0, |p| p + 1);
                let line_end = text[s0 + b..].find('\n').map_or(text.len(), |p| s0 + b + p);
                let alone = line_start > 0
                    && text[line_start..line_end]
                        .trim()
                        .trim_end_matches(['.', ',', ';'])
                        .trim_matches('`')
                        == content.trim()
                    && kind == Look::Strong;
                if alone {
                    let before = &text[..line_start];
                    let near_start = markdown::sentences(before).last().map_or(0, |&(s, _)| s);
                    let j = judge_block(&BlockContext {
                        near: markdown::tail(&before[near_start..], CONTEXT_BYTES),
                        rest: markdown::tail(&before[..near_start], CONTEXT_BYTES),
                        intro,
                        headings,
                        ..Default::default()
                    });
                    self.prose_command(d, content, at, j);
                    continue;
                }
                let (win, win_span, win_spans) = window(sentence, (a, b), &spans);
                let j = judge_inline(&InlineContext {
                    sentence: win,
                    span: Some(win_span),
                    all_spans: &win_spans,
                    outer_gate: outer_gate.clone(),
                    item_start: if opens { list } else { None },
                    intro,
                    headings,
                    strong: kind == Look::Strong,
                });
                match &j.run {
                    Ok(()) => self.instructed(d, content, at, &j),
                    Err(Skip::NotInstructed) if kind != Look::Strong => {
                        self.mentions_only(d, content, at, None);
                    }
                    Err(skip) => {
                        let skip = skip.clone();
                        self.skipped(d, content, at, &skip, j.gate.clone());
                    }
                }
            }
            // The sentence with its spans blanked: prose around the commands.
            let mut outside = String::with_capacity(sentence.len());
            let mut pos = 0;
            for &(a, b) in &spans {
                outside.push_str(&sentence[pos..a]);
                outside.push_str(&" ".repeat(b - a));
                pos = b;
            }
            outside.push_str(&sentence[pos..]);
            // Commands written without backticks after "run", and `$ ` lines.
            let mut handled_unquoted = false;
            let mut offset = 0;
            for l in outside.split('\n') {
                let lline = sline + markdown::line_of(sentence, offset);
                if let Some(cmd) = l.trim_start().strip_prefix("$ ") {
                    let j = judge_block(&BlockContext {
                        near: markdown::tail(&sentence[..offset], CONTEXT_BYTES),
                        rest: markdown::tail(text, CONTEXT_BYTES),
                        intro,
                        headings,
                        ..Default::default()
                    });
                    self.prose_command(d, cmd, lline, j);
                    handled_unquoted = true;
                } else if let Some((at, cmd)) = commands::unquoted_command(l, &self.res.index) {
                    let j = judge_inline(&InlineContext {
                        sentence: markdown::tail(&l[..at], CONTEXT_BYTES),
                        span: None,
                        all_spans: &[],
                        outer_gate: sentence_gate.clone().or_else(|| outer_gate.clone()),
                        item_start: None,
                        intro,
                        headings,
                        strong: true,
                    });
                    self.prose_command(d, &cmd, lline, j);
                    handled_unquoted = true;
                }
                offset += l.len() + 1;
            }
            // A numbered step (or a setup bullet) that is itself a command.
            if !handled_unquoted && spans.is_empty() && s0 == 0 && list.is_some() {
                let first = sentence.lines().next().unwrap_or("");
                let cmd = commands::cut_prose(first);
                let lower = cmd
                    .split_whitespace()
                    .next()
                    .is_some_and(|w| !w.chars().any(|c| c.is_uppercase()));
                if lower && look(&cmd, &self.res.index) == Look::Strong {
                    let j = judge_inline(&InlineContext {
                        sentence: "",
                        span: None,
                        all_spans: &[],
                        outer_gate: outer_gate.clone(),
                        item_start: list,
                        intro,
                        headings,
                        strong: true,
                    });
                    self.prose_command(d, &cmd, sline, j);
                    handled_unquoted = true;
                }
            }
            if !handled_unquoted {
                let gate = sentence_gate.clone().or_else(|| outer_gate.clone());
                self.mentions_only(d, &outside, sline, gate);
            }
            for (target, dir) in prose_make(&outside) {
                self.found.make.push(MakeMention {
                    target,
                    dir,
                    source: self.source(d, sline),
                    gate: sentence_gate.clone(),
                    in_code: false,
                });
            }
            for &(a, b) in &spans {
                for (target, dir) in make_in_line(&sentence[a..b]) {
                    self.found.make.push(MakeMention {
                        target,
                        dir,
                        source: self.source(d, sline),
                        gate: sentence_gate.clone(),
                        in_code: true,
                    });
                }
            }
        }
    }

    fn prose_command(&mut self, d: &Doc, cmd: &str, line: usize, j: Judgement) {
        match &j.run {
            Ok(()) => self.instructed(d, cmd, line, &j),
            Err(skip) => {
                let skip = skip.clone();
                self.skipped(d, cmd, line, &skip, j.gate.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuation_lines_join() {
        assert_eq!(
            logical_lines("a \\\n b\nc"),
            [(0, "a   b".to_string()), (2, "c".to_string())]
        );
    }
}
