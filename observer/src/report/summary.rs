//! The short human summary: verdict, score, top indicators with evidence, what was incomplete.

use super::{Report, Severity};

const TOP: usize = 8;

/// A few lines for people; everything else is in the JSON.
pub fn summary(r: &Report) -> String {
    let mut s = String::new();
    let digest = r
        .skill
        .digest
        .as_deref()
        .map(|d| format!(" {}", one_line(&d.chars().take(12).collect::<String>())))
        .unwrap_or_default();
    let fid = r
        .skill
        .fidelity
        .map(|f| format!(" [{}]", f.as_str()))
        .unwrap_or_default();
    s.push_str(&format!(
        "{}  score {}/100 ({})  {}{}{}  {} ms, {} events\n",
        r.verdict.as_str(),
        r.score,
        r.band.as_str(),
        one_line(&r.skill.name),
        digest,
        fid,
        r.run.duration_ms,
        r.run.events
    ));
    let shown: Vec<_> = r
        .indicators
        .iter()
        .filter(|i| i.severity != Severity::Info)
        .collect();
    for i in shown.iter().take(TOP) {
        s.push_str(&format!(
            "  {:<6} {:<24} {}  [events {}]\n",
            i.severity.as_str(),
            i.id,
            one_line(&i.summary),
            evidence(&i.evidence)
        ));
    }
    if shown.len() > TOP {
        s.push_str(&format!(
            "  … {} more indicator(s) in the report\n",
            shown.len() - TOP
        ));
    }
    let info = r.indicators.len() - shown.len();
    if info > 0 {
        s.push_str(&format!(
            "  ({info} informational finding(s) about declared behaviour)\n"
        ));
    }
    if let Some(p) = &r.plan {
        let c = &p.coverage;
        let mut line = format!(
            "  plan: {}/{} steps ran, {}/{} scripts executed",
            c.steps_run, c.steps_found, c.scripts_executed, c.scripts_bundled
        );
        if !p.ignored_gates.is_empty() {
            line.push_str(&format!(
                ", {} prose gate(s) run past",
                p.ignored_gates.len()
            ));
        }
        if let Some(d) = p.dated_pass_days {
            line.push_str(&format!(", dated pass +{d} d"));
        }
        s.push_str(&line);
        s.push('\n');
    }
    if !r.run.complete {
        s.push_str("  incomplete run:\n");
        for reason in &r.run.incomplete_reasons {
            s.push_str(&format!("    - {}\n", one_line(reason)));
        }
    }
    s
}

fn evidence(ev: &[u64]) -> String {
    const MAX: usize = 8;
    let mut parts: Vec<String> = ev.iter().take(MAX).map(|e| e.to_string()).collect();
    if ev.len() > MAX {
        parts.push(format!("+{}", ev.len() - MAX));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(",")
    }
}

/// Skill-controlled text must not forge extra lines or terminal escapes in the summary; very
/// long text is cut.
pub(crate) fn one_line(s: &str) -> String {
    const MAX: usize = 300;
    let mut out: String = s
        .chars()
        .take(MAX)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().count() > MAX {
        out.push('…');
    }
    out
}
