//! Text output: the per-case table, the pending list, the failure diff and the confusion summary.

use crate::expect::Kind;
use crate::judge::Status;
use crate::CaseResult;
use observer::report::Verdict;
use std::collections::BTreeMap;
use std::fmt::Write;

const VERDICTS: [Verdict; 4] = [
    Verdict::Clean,
    Verdict::Suspicious,
    Verdict::Malicious,
    Verdict::Incomplete,
];

fn expected_label(r: &CaseResult) -> String {
    r.expect
        .verdicts
        .iter()
        .map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join("|")
}

fn got_label(r: &CaseResult) -> String {
    match &r.observed {
        Ok(o) => format!("{} {}", o.verdict.as_str(), o.score),
        Err(_) => "error".into(),
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

fn pad(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n >= w {
        s.to_string()
    } else {
        format!("{s}{}", " ".repeat(w - n))
    }
}

/// The table: one row per case, in corpus order.
pub fn render_table(results: &[CaseResult]) -> String {
    let rows: Vec<[String; 7]> = results
        .iter()
        .map(|r| {
            let (missing, unexpected) = match &r.judgement {
                Some(j) => {
                    let mut m = j.missing.clone();
                    m.extend(j.pending_missing.iter().map(|p| format!("{p}(pending)")));
                    (list(&m), list(&j.unexpected))
                }
                None => ("-".into(), "-".into()),
            };
            [
                r.status().label().to_string(),
                r.name.clone(),
                expected_label(r),
                got_label(r),
                missing,
                unexpected,
                format!("{:.1}s", r.elapsed.as_secs_f64()),
            ]
        })
        .collect();
    let head = [
        "status",
        "case",
        "expected",
        "got",
        "missing",
        "unexpected",
        "time",
    ];
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String]| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&pad(c, w[i] + 2));
            }
        }
        s.trim_end().to_string()
    };
    let h: Vec<String> = head.iter().map(|s| s.to_string()).collect();
    let _ = writeln!(out, "{}", line(&h));
    for row in &rows {
        let _ = writeln!(out, "{}", line(row));
    }
    out
}

/// What went wrong, one block per failing case, naming the case, the verdict and each indicator.
pub fn render_failures(results: &[CaseResult]) -> String {
    let mut out = String::new();
    for r in results.iter().filter(|r| r.status().fails_harness()) {
        let _ = writeln!(out, "FAIL {}", r.name);
        match (&r.observed, &r.judgement) {
            (Err(e), _) => {
                let _ = writeln!(out, "  error: {e}");
            }
            (Ok(o), Some(j)) => {
                if !j.verdict_ok {
                    let _ = writeln!(
                        out,
                        "  verdict: expected {}, got {} (score {})",
                        expected_label(r),
                        o.verdict.as_str(),
                        o.score
                    );
                    if !o.complete {
                        let _ =
                            writeln!(out, "  run incomplete: {}", o.incomplete_reasons.join("; "));
                    }
                }
                for m in &j.missing {
                    let _ = writeln!(out, "  - {m} must fire and did not");
                }
                for u in &j.unexpected {
                    let _ = writeln!(out, "  + {u} fired and must not");
                }
                let _ = writeln!(out, "  fired: {}", fired_list(o));
            }
            (Ok(_), None) => {}
        }
    }
    out
}

fn fired_list(o: &crate::judge::Observed) -> String {
    let v: Vec<String> = o.fired.iter().cloned().collect();
    list(&v)
}

/// Pending cases, apart: why each is pending, and which now pass.
pub fn render_pending(results: &[CaseResult]) -> String {
    let mut out = String::new();
    for r in results {
        let st = r.status();
        if !matches!(st, Status::Pending | Status::PendingPasses) {
            continue;
        }
        let reason = r.expect.pending.as_deref().unwrap_or("");
        let what = match (&st, &r.judgement, &r.observed) {
            (Status::PendingPasses, _, _) => "now passes: remove its pending mark".to_string(),
            (_, Some(j), Ok(o)) => {
                let mut parts = Vec::new();
                if !j.verdict_ok {
                    parts.push(format!(
                        "verdict {} (wants {})",
                        o.verdict.as_str(),
                        expected_label(r)
                    ));
                }
                let mut m = j.missing.clone();
                m.extend(j.pending_missing.iter().cloned());
                if !m.is_empty() {
                    parts.push(format!("missing {}", m.join(",")));
                }
                if !j.unexpected.is_empty() {
                    parts.push(format!("unexpected {}", j.unexpected.join(",")));
                }
                parts.join("; ")
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  {:<8} {}: {what}\n           ({reason})",
            st.label(),
            r.name
        );
    }
    out
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub tp: u32,
    pub fp: u32,
    pub tn: u32,
    pub fn_: u32,
}

/// Per indicator: TP/FN over the cases that require it, FP/TN over the cases that forbid it, and
/// how many benign cases it fired on at all (listed or not).
pub fn indicator_confusion(results: &[CaseResult]) -> BTreeMap<String, (Counts, u32)> {
    let mut m: BTreeMap<String, (Counts, u32)> = BTreeMap::new();
    for r in results {
        let Ok(o) = &r.observed else { continue };
        for id in &r.expect.fire {
            let c = &mut m.entry(id.clone()).or_default().0;
            if o.fired.contains(id) {
                c.tp += 1
            } else {
                c.fn_ += 1
            }
        }
        for id in &r.expect.not_fire {
            let c = &mut m.entry(id.clone()).or_default().0;
            if o.fired.contains(id) {
                c.fp += 1
            } else {
                c.tn += 1
            }
        }
        if r.expect.kind == Kind::Benign {
            for id in o.fired.iter().filter(|i| !i.starts_with("INFO_")) {
                m.entry(id.clone()).or_default().1 += 1;
            }
        }
    }
    m
}

/// Per verdict V: TP = got V and V is acceptable; FP = got V and it is not; FN = V is the case's
/// first (design) verdict and the case got no acceptable one; TN = the rest.
pub fn verdict_confusion(results: &[CaseResult]) -> Vec<(Verdict, Counts)> {
    VERDICTS
        .iter()
        .map(|&v| {
            let mut c = Counts::default();
            for r in results {
                let Ok(o) = &r.observed else { continue };
                let acceptable = &r.expect.verdicts;
                if o.verdict == v {
                    if acceptable.contains(&v) {
                        c.tp += 1
                    } else {
                        c.fp += 1
                    }
                } else if acceptable.first() == Some(&v) && !acceptable.contains(&o.verdict) {
                    c.fn_ += 1
                } else {
                    c.tn += 1
                }
            }
            (v, c)
        })
        .collect()
}

/// Attack vs benign: an attack is detected when it got SUSPICIOUS or MALICIOUS; a benign case is
/// a false alarm when it did.
pub fn detection(results: &[CaseResult]) -> Counts {
    let mut c = Counts::default();
    for r in results {
        let Ok(o) = &r.observed else { continue };
        let flagged = matches!(o.verdict, Verdict::Suspicious | Verdict::Malicious);
        match (r.expect.kind, flagged) {
            (Kind::Attack, true) => c.tp += 1,
            (Kind::Attack, false) => c.fn_ += 1,
            (Kind::Benign, true) => c.fp += 1,
            (Kind::Benign, false) => c.tn += 1,
            (Kind::Control, _) => {}
        }
    }
    c
}

pub fn render_confusion(results: &[CaseResult]) -> String {
    let mut out = String::new();
    let d = detection(results);
    let _ = writeln!(
        out,
        "detection (attack flagged SUSPICIOUS/MALICIOUS): TP {} FN {} | benign: TN {} FP {}",
        d.tp, d.fn_, d.tn, d.fp
    );
    let _ = writeln!(out, "per verdict:      TP   FP   FN   TN");
    for (v, c) in verdict_confusion(results) {
        let _ = writeln!(
            out,
            "  {:<12} {:>4} {:>4} {:>4} {:>4}",
            v.as_str(),
            c.tp,
            c.fp,
            c.fn_,
            c.tn
        );
    }
    let _ = writeln!(
        out,
        "per indicator:               TP   FN   FP   TN  benign-hits"
    );
    for (id, (c, b)) in indicator_confusion(results) {
        let _ = writeln!(
            out,
            "  {:<25} {:>4} {:>4} {:>4} {:>4} {:>6}",
            id, c.tp, c.fn_, c.fp, c.tn, b
        );
    }
    out
}

/// Everything, in the order people read it; `mode` is `run` or `replay`.
pub fn render_all(mode: &str, results: &[CaseResult], wall: std::time::Duration) -> String {
    let mut out = render_table(results);
    let pending = render_pending(results);
    if !pending.is_empty() {
        let _ = writeln!(out, "\npending (reported, not failing):\n{pending}");
    }
    let _ = writeln!(out, "\n{}", render_confusion(results));
    let fails = render_failures(results);
    if !fails.is_empty() {
        let _ = writeln!(out, "{fails}");
    }
    let count = |f: fn(&Status) -> bool| results.iter().filter(|r| f(&r.status())).count();
    let _ = writeln!(
        out,
        "harness {mode}: {} cases in {:.1}s: {} passed, {} failed, {} pending ({} of them now pass)",
        results.len(),
        wall.as_secs_f64(),
        count(|s| *s == Status::Pass),
        count(|s| s.fails_harness()),
        count(|s| matches!(s, Status::Pending | Status::PendingPasses)),
        count(|s| *s == Status::PendingPasses),
    );
    // The plain closing line test-result readers understand; pending cases count as skipped.
    let _ = writeln!(
        out,
        "{mode}: {} passed, {} failed, {} skipped",
        count(|s| *s == Status::Pass),
        count(|s| s.fails_harness()),
        count(|s| matches!(s, Status::Pending | Status::PendingPasses)),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::Case;
    use crate::expect::Expect;
    use crate::judge::Observed;
    use std::time::Duration;

    fn result(name: &str, expect: &str, v: Verdict, fired: &[&str]) -> CaseResult {
        let case = Case {
            name: name.into(),
            dir: std::path::PathBuf::from("/nonexistent"),
            expect: Expect::parse(expect).unwrap(),
        };
        let o = Observed {
            verdict: v,
            score: 0,
            complete: true,
            fired: fired.iter().map(|s| s.to_string()).collect(),
            incomplete_reasons: vec![],
        };
        CaseResult::new(&case, Ok(o), Duration::from_millis(1500))
    }

    fn sample() -> Vec<CaseResult> {
        let atk = "kind = \"attack\"\nverdict = [\"MALICIOUS\"]\nfire = [\"BEHAV_PERSISTENCE\"]\n";
        let ben = "kind = \"benign\"\nverdict = [\"CLEAN\"]\nnot_fire = [\"BEHAV_PERSISTENCE\"]\n";
        vec![
            result("a1", atk, Verdict::Malicious, &["BEHAV_PERSISTENCE"]),
            result("a2", atk, Verdict::Clean, &[]),
            result("b1", ben, Verdict::Clean, &[]),
            result(
                "b2",
                ben,
                Verdict::Suspicious,
                &["BEHAV_PERSISTENCE", "BEHAV_DRIFT"],
            ),
        ]
    }

    #[test]
    fn confusion_counts_follow_the_definitions() {
        let r = sample();
        let d = detection(&r);
        assert_eq!(
            d,
            Counts {
                tp: 1,
                fn_: 1,
                tn: 1,
                fp: 1
            }
        );
        let ind = indicator_confusion(&r);
        let (c, benign_hits) = ind["BEHAV_PERSISTENCE"];
        assert_eq!(
            c,
            Counts {
                tp: 1,
                fn_: 1,
                fp: 1,
                tn: 1
            }
        );
        assert_eq!(benign_hits, 1);
        assert_eq!(ind["BEHAV_DRIFT"].1, 1);
        let v: BTreeMap<&str, Counts> = verdict_confusion(&r)
            .into_iter()
            .map(|(v, c)| (v.as_str(), c))
            .collect();
        assert_eq!(
            v["MALICIOUS"],
            Counts {
                tp: 1,
                fp: 0,
                fn_: 1,
                tn: 2
            }
        );
        assert_eq!(
            v["CLEAN"],
            Counts {
                tp: 1,
                fp: 1,
                fn_: 1,
                tn: 1
            }
        );
        assert_eq!(
            v["SUSPICIOUS"],
            Counts {
                tp: 0,
                fp: 1,
                fn_: 0,
                tn: 3
            }
        );
    }

    #[test]
    fn the_table_and_the_diff_name_what_went_wrong() {
        let r = sample();
        let t = render_table(&r);
        assert!(t.lines().next().unwrap().starts_with("status"));
        let row = t.lines().find(|l| l.contains(" a2 ")).unwrap();
        assert!(
            row.starts_with("FAIL") && row.contains("BEHAV_PERSISTENCE"),
            "{row}"
        );
        assert!(row.contains("CLEAN 0") && row.ends_with("1.5s"), "{row}");
        let f = render_failures(&r);
        assert!(
            f.contains("FAIL a2\n  verdict: expected MALICIOUS, got CLEAN"),
            "{f}"
        );
        assert!(
            f.contains("- BEHAV_PERSISTENCE must fire and did not"),
            "{f}"
        );
        assert!(f.contains("FAIL b2") && f.contains("+ BEHAV_PERSISTENCE fired and must not"));
        assert!(!f.contains("FAIL a1") && !f.contains("FAIL b1"));
        let all = render_all("replay", &r, Duration::from_secs(1));
        assert!(
            all.ends_with("replay: 2 passed, 2 failed, 0 skipped\n"),
            "{all}"
        );
    }
}
