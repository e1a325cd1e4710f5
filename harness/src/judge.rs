//! Compare what a case produced with what it must produce. Pure: the table and the tests use it.

use crate::expect::Expect;
use observer::report::{Report, Verdict};
use std::collections::BTreeSet;

/// The parts of a report the expectations speak about.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub verdict: Verdict,
    pub score: u32,
    pub complete: bool,
    /// Indicator ids that fired: every `INFO_*` present, and every `BEHAV_*` with a non-zero
    /// weight (a rule weighed to zero adds nothing, so it is as good as switched off).
    pub fired: BTreeSet<String>,
    pub incomplete_reasons: Vec<String>,
}

impl Observed {
    pub fn from_report(r: &Report) -> Observed {
        Observed {
            verdict: r.verdict,
            score: r.score,
            complete: r.run.complete,
            fired: r
                .indicators
                .iter()
                .filter(|i| i.weight > 0 || i.id.starts_with("INFO_"))
                .map(|i| i.id.clone())
                .collect(),
            incomplete_reasons: r.run.incomplete_reasons.clone(),
        }
    }
}

/// The result of one case.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Every expectation holds.
    Pass,
    /// A pending case whose expectations all hold now: its `pending` mark can go.
    PendingPasses,
    /// Only expectations marked pending fail.
    Pending,
    /// A hard expectation fails.
    Fail,
    /// The case could not be run or judged.
    Error(String),
}

impl Status {
    /// Whether this outcome makes the harness exit non-zero.
    pub fn fails_harness(&self) -> bool {
        matches!(self, Status::Fail | Status::Error(_))
    }
    pub fn label(&self) -> &'static str {
        match self {
            Status::Pass => "ok",
            Status::PendingPasses => "pending-ok",
            Status::Pending => "pending",
            Status::Fail => "FAIL",
            Status::Error(_) => "ERROR",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict_ok: bool,
    /// Indicators that must fire and did not (hard expectations).
    pub missing: Vec<String>,
    /// Indicators that must not fire and did.
    pub unexpected: Vec<String>,
    /// Indicators that must fire, are marked pending, and did not.
    pub pending_missing: Vec<String>,
    pub status: Status,
}

pub fn judge(e: &Expect, o: &Observed) -> Judgement {
    let verdict_ok = e.verdicts.contains(&o.verdict);
    let (pending_missing, missing): (Vec<String>, Vec<String>) = e
        .fire
        .iter()
        .filter(|id| !o.fired.contains(*id))
        .cloned()
        .partition(|id| e.pending_fire.contains(id));
    let unexpected: Vec<String> = e
        .not_fire
        .iter()
        .filter(|id| o.fired.contains(*id))
        .cloned()
        .collect();
    let all_hold = verdict_ok && missing.is_empty() && unexpected.is_empty();
    // The verdict follows from the indicators: while a pending indicator is missing, the verdict
    // the design calls for cannot be reached either, so it is soft too. Everything else is hard.
    let verdict_soft = !pending_missing.is_empty();
    let hard_ok = (verdict_ok || verdict_soft) && missing.is_empty() && unexpected.is_empty();
    let status = if e.wholly_pending() {
        if all_hold && pending_missing.is_empty() {
            Status::PendingPasses
        } else {
            Status::Pending
        }
    } else if !hard_ok {
        Status::Fail
    } else if !all_hold || !pending_missing.is_empty() {
        Status::Pending
    } else if e.pending.is_some() {
        Status::PendingPasses
    } else {
        Status::Pass
    };
    Judgement {
        verdict_ok,
        missing,
        unexpected,
        pending_missing,
        status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(extra: &str) -> Expect {
        Expect::parse(&format!(
            "kind = \"attack\"\nverdict = [\"MALICIOUS\", \"SUSPICIOUS\"]\n\
             fire = [\"BEHAV_CRED_ACCESS\", \"BEHAV_CANARY_EXFIL\"]\n\
             not_fire = [\"BEHAV_DESTRUCTIVE\"]\n{extra}"
        ))
        .unwrap()
    }

    fn obs(v: Verdict, fired: &[&str]) -> Observed {
        Observed {
            verdict: v,
            score: 0,
            complete: true,
            fired: fired.iter().map(|s| s.to_string()).collect(),
            incomplete_reasons: vec![],
        }
    }

    #[test]
    fn passes_only_when_everything_holds() {
        let e = expect("");
        let j = judge(
            &e,
            &obs(
                Verdict::Suspicious,
                &["BEHAV_CRED_ACCESS", "BEHAV_CANARY_EXFIL"],
            ),
        );
        assert_eq!(j.status, Status::Pass);
        let j = judge(&e, &obs(Verdict::Malicious, &["BEHAV_CRED_ACCESS"]));
        assert_eq!(j.status, Status::Fail);
        assert_eq!(j.missing, vec!["BEHAV_CANARY_EXFIL"]);
        let j = judge(
            &e,
            &obs(
                Verdict::Malicious,
                &[
                    "BEHAV_CRED_ACCESS",
                    "BEHAV_CANARY_EXFIL",
                    "BEHAV_DESTRUCTIVE",
                ],
            ),
        );
        assert_eq!(j.status, Status::Fail);
        assert_eq!(j.unexpected, vec!["BEHAV_DESTRUCTIVE"]);
        let j = judge(
            &e,
            &obs(
                Verdict::Incomplete,
                &["BEHAV_CRED_ACCESS", "BEHAV_CANARY_EXFIL"],
            ),
        );
        assert!(!j.verdict_ok);
        assert!(j.status.fails_harness());
    }

    #[test]
    fn narrowed_pending_keeps_the_rest_hard() {
        let e = expect("pending = \"egress\"\npending_fire = [\"BEHAV_CANARY_EXFIL\"]");
        let j = judge(&e, &obs(Verdict::Malicious, &["BEHAV_CRED_ACCESS"]));
        assert_eq!(j.status, Status::Pending);
        assert_eq!(j.pending_missing, vec!["BEHAV_CANARY_EXFIL"]);
        // The part that has landed must still hold.
        let j = judge(&e, &obs(Verdict::Malicious, &[]));
        assert_eq!(j.status, Status::Fail);
        assert_eq!(j.missing, vec!["BEHAV_CRED_ACCESS"]);
        let j = judge(
            &e,
            &obs(
                Verdict::Malicious,
                &["BEHAV_CRED_ACCESS", "BEHAV_CANARY_EXFIL"],
            ),
        );
        assert_eq!(j.status, Status::PendingPasses);
        // Without the pending indicator the verdict cannot be reached: soft.
        let j = judge(&e, &obs(Verdict::Clean, &["BEHAV_CRED_ACCESS"]));
        assert_eq!(j.status, Status::Pending);
        // With it, the verdict is hard again.
        let j = judge(
            &e,
            &obs(Verdict::Clean, &["BEHAV_CRED_ACCESS", "BEHAV_CANARY_EXFIL"]),
        );
        assert_eq!(j.status, Status::Fail);
    }

    #[test]
    fn wholly_pending_never_fails_but_says_when_it_passes() {
        let e = expect("pending = \"time fast-forward\"");
        let j = judge(&e, &obs(Verdict::Incomplete, &[]));
        assert_eq!(j.status, Status::Pending);
        assert!(!j.status.fails_harness());
        let j = judge(
            &e,
            &obs(
                Verdict::Malicious,
                &["BEHAV_CRED_ACCESS", "BEHAV_CANARY_EXFIL"],
            ),
        );
        assert_eq!(j.status, Status::PendingPasses);
    }

    #[test]
    fn zero_weight_behaviour_does_not_count_as_fired() {
        let mut r: Report = serde_json::from_str(SAMPLE).unwrap();
        r.indicators[0].weight = 0;
        let o = Observed::from_report(&r);
        assert!(!o.fired.contains("BEHAV_PERSISTENCE"));
        assert!(o.fired.contains("INFO_DECLARED_BEHAVIOUR"));
    }

    const SAMPLE: &str = r#"{"schema_version":1,
      "skill":{"name":"x","digest":null,"fidelity":"bundle"},
      "run":{"run_id":"r","os":"linux","started_at":"t","duration_ms":1,"complete":true,
             "incomplete_reasons":[],"events":1},
      "static_view":{"source":"builtin","categories":[],"declared_hosts":[]},
      "baseline":null,
      "profile":{"steps":[],"processes":[],"programs":[],"hosts":[],"files":[],
                 "credentials":[],"canary_hits":[],"denials":[],"notes":[]},
      "categories":[],
      "indicators":[
        {"id":"BEHAV_PERSISTENCE","severity":"high","summary":"s","evidence":[1],"weight":80},
        {"id":"INFO_DECLARED_BEHAVIOUR","severity":"info","summary":"s","evidence":[1],"weight":0}],
      "score":80,"band":"blocked","verdict":"MALICIOUS"}"#;
}
