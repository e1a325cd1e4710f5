//! The dated pass: the plan's steps run a second time with the wall clock moved forward, so code
//! that waits for a date ("only after 2026-12-15", "30 days after install") acts inside the run.
//!
//! When: the bundle reads the date (any of the usual ways, in any language) or holds a future date
//! literal. The offset: past the latest future date literal found (so an "after X" check passes),
//! and at least [`DEFAULT_OFFSET_DAYS`] (typical "N days after install" bombs), at most
//! [`MAX_OFFSET_DAYS`]. A bundle with no date-reading code gets no dated pass: nothing in it can
//! tell one day from another (sleep-based delays are the virtual clock's job).

use super::{PlanContext, PlannedStep};
use crate::bundle::SkillUnit;

pub const DEFAULT_OFFSET_DAYS: i64 = 45;
pub const MAX_OFFSET_DAYS: i64 = 3 * 366;
const DAY_NS: i64 = 86_400 * 1_000_000_000;

/// Ways code reads the date or the time of day (lower-case; matched case-insensitively).
const DATE_READS: &[&str] = &[
    "datetime.now",
    "datetime.today",
    "datetime.utcnow",
    "date.today",
    "time.time(",
    "time.localtime",
    "time.gmtime",
    "time.strftime",
    ".strftime(",
    "date +%",
    "date -d",
    "date --date",
    "$(date",
    "`date",
    "new date(",
    "date.now(",
    ".gettime()",
    ".getfullyear(",
    ".getmonth(",
    ".getdate(",
    "time.now()",
    "localtime(",
    "gmtime(",
    "mktime(",
    "$epochseconds",
    "systemtime::now",
    "get-date",
    "strtotime(",
];

/// What the static text says about dates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DateChecks {
    /// Code that reads the date.
    pub reads_date: bool,
    /// Date literals (days since 1970-01-01), as `YYYY-MM-DD`, `YYYY/MM/DD`, `datetime(Y, M, D`
    /// or a 10-digit epoch.
    pub literals: Vec<i64>,
}

pub fn scan(text: &str) -> DateChecks {
    let lower = text.to_ascii_lowercase();
    let reads_date = DATE_READS.iter().any(|p| lower.contains(p));
    let mut literals = iso_dates(&lower);
    literals.extend(call_dates(&lower));
    literals.extend(epochs(&lower));
    DateChecks {
        reads_date,
        literals,
    }
}

/// Days since the epoch of a civil date (proleptic Gregorian), `None` if not a real date.
pub fn days_from_civil(y: i64, m: i64, d: i64) -> Option<i64> {
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || !(1970..=2200).contains(&y) {
        return None;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_len = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if d > month_len[(m - 1) as usize] {
        return None;
    }
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

fn digits_at(b: &[u8], i: usize, n: usize) -> Option<i64> {
    let s = b.get(i..i + n)?;
    if !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// `YYYY-MM-DD`, `YYYY/MM/DD`, `YYYY.MM.DD`, `YYYYMMDD` after a non-digit.
fn iso_dates(t: &str) -> Vec<i64> {
    let b = t.as_bytes();
    let mut out = Vec::new();
    for i in 0..b.len() {
        if i > 0 && b[i - 1].is_ascii_digit() {
            continue;
        }
        let Some(y) = digits_at(b, i, 4) else {
            continue;
        };
        let sep = b.get(i + 4).copied();
        let date = match sep {
            Some(s @ (b'-' | b'/' | b'.')) if b.get(i + 7) == Some(&s) => {
                match (digits_at(b, i + 5, 2), digits_at(b, i + 8, 2)) {
                    (Some(m), Some(d)) => days_from_civil(y, m, d),
                    _ => None,
                }
            }
            _ if !b.get(i + 8).is_some_and(u8::is_ascii_digit) => {
                match (digits_at(b, i + 4, 2), digits_at(b, i + 6, 2)) {
                    (Some(m), Some(d)) => days_from_civil(y, m, d),
                    _ => None,
                }
            }
            _ => None,
        };
        out.extend(date);
    }
    out
}

/// `datetime(2026, 12, 15` / `date(2026,12,15` / JavaScript `Date(2026, 11, 15` (0-based
/// month: both readings are kept, the later one wins anyway).
fn call_dates(t: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for (pos, _) in t.match_indices("date(") {
        let rest = &t[pos + 5..];
        let nums: Vec<i64> = rest
            .split(')')
            .next()
            .unwrap_or("")
            .split(',')
            .take(3)
            .map(|s| s.trim().parse::<i64>().unwrap_or(-1))
            .collect();
        if let [y, m, d] = nums[..] {
            out.extend(days_from_civil(y, m, d));
            out.extend(days_from_civil(y, m + 1, d));
        }
    }
    out
}

/// 10-digit numbers that are epoch seconds between 2020 and 2040.
fn epochs(t: &str) -> Vec<i64> {
    let b = t.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()) {
            let end = (i..b.len())
                .find(|&j| !b[j].is_ascii_digit())
                .unwrap_or(b.len());
            if end - i == 10 {
                if let Some(v) = digits_at(b, i, 10) {
                    if (1_577_836_800..2_208_988_800).contains(&v) {
                        out.push(v / 86_400);
                    }
                }
            }
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// The dated pass's offset in days, or `None` when the bundle gives no reason for one.
pub fn offset_days(checks: &DateChecks, today: i64) -> Option<i64> {
    let future: Vec<i64> = checks
        .literals
        .iter()
        .copied()
        .filter(|&d| d > today && d - today <= MAX_OFFSET_DAYS)
        .collect();
    if !checks.reads_date && future.is_empty() {
        return None;
    }
    let past_latest = future.iter().max().map(|d| d - today + 1).unwrap_or(0);
    Some(past_latest.clamp(DEFAULT_OFFSET_DAYS, MAX_OFFSET_DAYS))
}

/// Every text file of the bundle, scanned together.
pub fn scan_unit(unit: &SkillUnit) -> DateChecks {
    let mut all = DateChecks::default();
    for f in unit.files.values() {
        if let Some(t) = f.text() {
            let c = scan(t);
            all.reads_date |= c.reads_date;
            all.literals.extend(c.literals);
        }
    }
    all
}

/// The steps of the dated pass: each planned step again (trigger variations included), with the
/// clock moved by `days`. Steps beyond the plan's limit are left out (the first pass is whole).
pub fn dated_steps(steps: &[PlannedStep], days: i64, ctx: &PlanContext) -> Vec<PlannedStep> {
    let room = ctx.max_steps.saturating_sub(steps.len());
    steps
        .iter()
        .take(room)
        .enumerate()
        .map(|(k, s)| {
            let mut d = s.clone();
            d.id = (steps.len() + k) as u32;
            d.label = format!("dated pass (+{days} d): {}", s.label);
            d.clock_offset_ns = days.saturating_mul(DAY_NS);
            d
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn today() -> i64 {
        days_from_civil(2026, 11, 30).expect("date")
    }

    #[test]
    fn civil_days_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), Some(0));
        assert_eq!(days_from_civil(2000, 3, 1), Some(11_017));
        assert_eq!(days_from_civil(2026, 2, 29), None);
        assert_eq!(days_from_civil(2028, 2, 29).map(|d| d > 0), Some(true));
        assert_eq!(days_from_civil(2026, 13, 1), None);
    }

    #[test]
    fn date_bombs_in_several_languages_are_seen() {
        let py =
            "import datetime\nif datetime.date.today() >= datetime.date(2026, 12, 15):\n  go()";
        let c = scan(py);
        assert!(c.reads_date);
        assert_eq!(offset_days(&c, today()), Some(DEFAULT_OFFSET_DAYS));
        let sh = "[ \"$(date +%Y%m%d)\" -gt 20270601 ] && curl x";
        let c = scan(sh);
        assert!(c.reads_date);
        // Past the literal, not just the default.
        let want = days_from_civil(2027, 6, 1).expect("date") - today() + 1;
        assert_eq!(offset_days(&c, today()), Some(want));
        let js = "if (Date.now() > 1798761600000) { run() }";
        assert!(scan(js).reads_date);
        let epoch = "if time.time() > 1798761600: run()";
        let c = scan(epoch);
        assert!(c.literals.contains(&(1_798_761_600 / 86_400)));
    }

    #[test]
    fn no_date_code_no_pass_and_far_dates_are_capped() {
        assert_eq!(
            offset_days(&scan("print('hello')\nx = 2 + 2"), today()),
            None
        );
        // A version string or copyright year is not a date read; past dates do not matter.
        assert_eq!(offset_days(&scan("# (c) 2019-01-02 v1.2.3"), today()), None);
        let far = scan("if date.today() > date(2090, 1, 1): go()");
        assert_eq!(offset_days(&far, today()), Some(DEFAULT_OFFSET_DAYS));
    }
}
