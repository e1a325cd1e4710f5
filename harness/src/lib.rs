//! The regression harness: a corpus of attack and benign skills with expectations, run live
//! through `observe` or replayed from recorded traces through the current analyser
//! (docs/harness.md).

pub mod corpus;
pub mod expect;
pub mod judge;
pub mod live;
pub mod replay;
pub mod table;

use corpus::Case;
use expect::Expect;
use judge::{judge, Judgement, Observed, Status};
use std::time::Duration;

/// One case's outcome, live or replayed.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub name: String,
    pub expect: Expect,
    pub observed: Result<Observed, String>,
    pub judgement: Option<Judgement>,
    pub elapsed: Duration,
}

impl CaseResult {
    pub fn new(case: &Case, observed: Result<Observed, String>, elapsed: Duration) -> CaseResult {
        let judgement = observed.as_ref().ok().map(|o| judge(&case.expect, o));
        CaseResult {
            name: case.name.clone(),
            expect: case.expect.clone(),
            observed,
            judgement,
            elapsed,
        }
    }

    pub fn status(&self) -> Status {
        match (&self.observed, &self.judgement) {
            (Err(e), _) => Status::Error(e.clone()),
            (Ok(_), Some(j)) => j.status.clone(),
            (Ok(_), None) => Status::Error("not judged".into()),
        }
    }
}

/// Whether the harness as a whole fails: any non-pending case that does not pass.
pub fn any_failure(results: &[CaseResult]) -> bool {
    results.iter().any(|r| r.status().fails_harness())
}
