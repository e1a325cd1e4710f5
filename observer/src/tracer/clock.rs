//! Virtual time: sleeping does not buy a skill time, and the date can be moved.
//!
//! Every clock a jailed task reads (except CPU-time clocks) is `real + skipped` (wall clocks also
//! `+ wall_offset`). A long sleep is answered after a short real wait and its remainder is added
//! to `skipped`, so `sleep(900); check elapsed` stays consistent for every process in the jail.
//! The decisions here are pure; the tracer applies them (notify.rs answers clock reads and
//! sleeps, ptrace.rs shortens timed waits on file descriptors and futexes).

pub const NS_PER_SEC: i128 = 1_000_000_000;

/// How a clock id moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockKind {
    /// CLOCK_REALTIME and its variants: moved by skips and by the date offset.
    Wall,
    /// CLOCK_MONOTONIC/BOOTTIME and variants: moved by skips.
    Steady,
    /// Process/thread CPU clocks and unknown ids: left to the kernel.
    Cpu,
}

pub fn clock_kind(clk: i64) -> ClockKind {
    match clk {
        // REALTIME, REALTIME_COARSE, REALTIME_ALARM, TAI
        0 | 5 | 8 | 11 => ClockKind::Wall,
        // MONOTONIC, MONOTONIC_RAW, MONOTONIC_COARSE, BOOTTIME, BOOTTIME_ALARM
        1 | 4 | 6 | 7 | 9 => ClockKind::Steady,
        _ => ClockKind::Cpu,
    }
}

/// The jail's clock offsets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VirtualClock {
    /// Time skipped by fast-forwarded waits.
    pub skipped_ns: u64,
    /// `--clock-offset` plus the dated pass's offset (wall clocks only).
    pub wall_offset_ns: i64,
}

impl VirtualClock {
    /// What to add to the real reading of `clk`; `None` for clocks we leave alone.
    pub fn offset(&self, clk: i64) -> Option<i128> {
        match clock_kind(clk) {
            ClockKind::Wall => Some(self.skipped_ns as i128 + self.wall_offset_ns as i128),
            ClockKind::Steady => Some(self.skipped_ns as i128),
            ClockKind::Cpu => None,
        }
    }

    pub fn skip(&mut self, ns: u64) {
        self.skipped_ns = self.skipped_ns.saturating_add(ns);
    }
}

/// Thresholds of the fast-forward. Chosen so that a benign wait loop (poll a local server every
/// 100 ms for a few seconds) behaves as on a real machine, while neither one long sleep nor a long
/// sleep chopped into short ones costs real time.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// A single sleep at least this long is fast-forwarded at once.
    pub long_sleep_ns: u64,
    /// Real time a fast-forwarded sleep still takes (lets other tasks run, as a sleep would).
    pub sleep_cap_ns: u64,
    /// Real time short sleeps of one step may take before they are compressed too.
    pub real_sleep_budget_ns: u64,
    /// Real time a compressed short sleep takes.
    pub compressed_cap_ns: u64,
    /// A wait on file descriptors or a futex at least this long is shortened.
    pub fd_wait_long_ns: u64,
    /// Real time a shortened wait may take for its descriptors to become ready (a local proxy
    /// answers well within it, so network timeouts do not fire early).
    pub fd_wait_cap_ns: u64,
    /// Clock reads of one step before busy-waiting is assumed.
    pub busy_reads: u64,
    /// Time each further clock read adds (a `while time() < deadline` loop ends in seconds).
    pub busy_advance_ns: u64,
}

pub const POLICY: Policy = Policy {
    long_sleep_ns: 1_000_000_000,
    sleep_cap_ns: 10_000_000,
    real_sleep_budget_ns: 3_000_000_000,
    compressed_cap_ns: 1_000_000,
    fd_wait_long_ns: 2_000_000_000,
    fd_wait_cap_ns: 1_000_000_000,
    busy_reads: 50_000,
    busy_advance_ns: 5_000_000,
};

/// Real wait and skipped remainder of one wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPlan {
    pub real_ns: u64,
    pub skip_ns: u64,
}

/// A pure sleep of `d` ns by a step that has already slept `slept_real` ns for real.
pub fn plan_sleep(d: u64, slept_real: u64, p: &Policy) -> WaitPlan {
    let cap = if d >= p.long_sleep_ns {
        p.sleep_cap_ns
    } else if slept_real.saturating_add(d) <= p.real_sleep_budget_ns {
        return WaitPlan {
            real_ns: d,
            skip_ns: 0,
        };
    } else {
        p.compressed_cap_ns
    };
    let real = d.min(cap);
    WaitPlan {
        real_ns: real,
        skip_ns: d - real,
    }
}

/// A wait on descriptors (or a futex) with timeout `d`: `None` leaves it to the kernel; otherwise
/// the real timeout to use and the time to skip if it expires.
pub fn plan_fd_wait(d: u64, p: &Policy) -> Option<WaitPlan> {
    (d >= p.fd_wait_long_ns).then(|| WaitPlan {
        real_ns: p.fd_wait_cap_ns,
        skip_ns: d - p.fd_wait_cap_ns,
    })
}

/// Time a clock read adds once a step has read the clock `reads` times.
pub fn busy_advance(reads: u64, p: &Policy) -> u64 {
    if reads > p.busy_reads {
        p.busy_advance_ns
    } else {
        0
    }
}

/// A `struct timespec` as nanoseconds; `None` when invalid (the kernel answers EINVAL).
pub fn timespec_ns(b: &[u8; 16]) -> Option<i128> {
    let sec = i64::from_ne_bytes(b[0..8].try_into().ok()?);
    let nsec = i64::from_ne_bytes(b[8..16].try_into().ok()?);
    if !(0..1_000_000_000).contains(&nsec) {
        return None;
    }
    Some(sec as i128 * NS_PER_SEC + nsec as i128)
}

/// A `struct timeval` as nanoseconds; `None` when invalid.
pub fn timeval_ns(b: &[u8; 16]) -> Option<i128> {
    let sec = i64::from_ne_bytes(b[0..8].try_into().ok()?);
    let usec = i64::from_ne_bytes(b[8..16].try_into().ok()?);
    if !(0..1_000_000).contains(&usec) {
        return None;
    }
    Some(sec as i128 * NS_PER_SEC + usec as i128 * 1000)
}

pub fn ns_timespec(ns: i128) -> [u8; 16] {
    let sec = ns.div_euclid(NS_PER_SEC) as i64;
    let nsec = ns.rem_euclid(NS_PER_SEC) as i64;
    let mut b = [0u8; 16];
    b[0..8].copy_from_slice(&sec.to_ne_bytes());
    b[8..16].copy_from_slice(&nsec.to_ne_bytes());
    b
}

pub fn ns_timeval(ns: i128) -> [u8; 16] {
    let sec = ns.div_euclid(NS_PER_SEC) as i64;
    let usec = (ns.rem_euclid(NS_PER_SEC) / 1000) as i64;
    let mut b = [0u8; 16];
    b[0..8].copy_from_slice(&sec.to_ne_bytes());
    b[8..16].copy_from_slice(&usec.to_ne_bytes());
    b
}

/// The real reading of `clk`, in ns.
pub fn real_now(clk: i64) -> Result<i128, i32> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    if unsafe { libc::clock_gettime(clk as libc::clockid_t, &mut ts) } != 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL));
    }
    Ok(ts.tv_sec as i128 * NS_PER_SEC + ts.tv_nsec as i128)
}

/// Parses a clock offset such as `3d`, `12h`, `90m`, `45s`, `-1d` or `2w`.
pub fn parse_offset(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let split = body
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(body.len());
    let (num, unit) = body.split_at(split);
    let n: i64 = num
        .parse()
        .map_err(|_| format!("clock offset {s:?}: expected a number and a unit (s, m, h, d, w)"))?;
    let mult: i64 = match unit {
        "s" | "" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        other => return Err(format!("clock offset {s:?}: unknown unit {other:?}")),
    };
    let secs = n
        .checked_mul(mult)
        .filter(|v| *v <= 100 * 365 * 86_400)
        .ok_or_else(|| format!("clock offset {s:?} is too large (at most 100 years)"))?;
    let ns = secs * 1_000_000_000;
    Ok(if neg { -ns } else { ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_are_classified() {
        assert_eq!(clock_kind(libc::CLOCK_REALTIME as i64), ClockKind::Wall);
        assert_eq!(clock_kind(libc::CLOCK_MONOTONIC as i64), ClockKind::Steady);
        assert_eq!(clock_kind(libc::CLOCK_BOOTTIME as i64), ClockKind::Steady);
        assert_eq!(
            clock_kind(libc::CLOCK_PROCESS_CPUTIME_ID as i64),
            ClockKind::Cpu
        );
        // Dynamic per-process CPU clocks are negative ids.
        assert_eq!(clock_kind(-6), ClockKind::Cpu);
        let c = VirtualClock {
            skipped_ns: 5,
            wall_offset_ns: -2,
        };
        assert_eq!(c.offset(0), Some(3));
        assert_eq!(c.offset(1), Some(5));
        assert_eq!(c.offset(2), None);
    }

    #[test]
    fn one_long_sleep_is_skipped_at_once() {
        let p = POLICY;
        let w = plan_sleep(900 * 1_000_000_000, 0, &p);
        assert_eq!(w.real_ns, p.sleep_cap_ns);
        assert_eq!(w.real_ns + w.skip_ns, 900 * 1_000_000_000);
    }

    #[test]
    fn short_sleeps_are_real_until_the_budget_is_spent() {
        let p = POLICY;
        let d = 100_000_000;
        assert_eq!(
            plan_sleep(d, 0, &p),
            WaitPlan {
                real_ns: d,
                skip_ns: 0
            }
        );
        // A long sleep chopped into 0.9 s pieces: after the budget every piece is compressed.
        let mut slept = 0u64;
        let mut virt = 0u64;
        for _ in 0..1000 {
            let w = plan_sleep(900_000_000, slept, &p);
            slept += w.real_ns;
            virt += w.real_ns + w.skip_ns;
        }
        assert_eq!(virt, 900 * 1_000_000_000);
        assert!(slept < 5 * 1_000_000_000, "real time spent: {slept}");
    }

    #[test]
    fn fd_waits_keep_a_real_window() {
        let p = POLICY;
        assert_eq!(plan_fd_wait(500_000_000, &p), None);
        let w = plan_fd_wait(30 * 1_000_000_000, &p).expect("shortened");
        assert_eq!(w.real_ns, p.fd_wait_cap_ns);
        assert_eq!(w.real_ns + w.skip_ns, 30 * 1_000_000_000);
    }

    #[test]
    fn busy_reads_accelerate_only_past_the_threshold() {
        let p = POLICY;
        assert_eq!(busy_advance(10, &p), 0);
        assert_eq!(busy_advance(p.busy_reads + 1, &p), p.busy_advance_ns);
    }

    #[test]
    fn time_structs_round_trip_and_reject_garbage() {
        let t = ns_timespec(12 * NS_PER_SEC + 345);
        assert_eq!(timespec_ns(&t), Some(12 * NS_PER_SEC + 345));
        let v = ns_timeval(3 * NS_PER_SEC + 7_000);
        assert_eq!(timeval_ns(&v), Some(3 * NS_PER_SEC + 7_000));
        let mut bad = ns_timespec(0);
        bad[8..16].copy_from_slice(&2_000_000_000i64.to_ne_bytes());
        assert_eq!(timespec_ns(&bad), None);
        let mut neg = ns_timespec(0);
        neg[8..16].copy_from_slice(&(-1i64).to_ne_bytes());
        assert_eq!(timespec_ns(&neg), None);
    }

    #[test]
    fn offsets_parse() {
        assert_eq!(parse_offset("3d"), Ok(3 * 86_400 * 1_000_000_000));
        assert_eq!(parse_offset("-12h"), Ok(-12 * 3600 * 1_000_000_000));
        assert_eq!(parse_offset("+90m"), Ok(90 * 60 * 1_000_000_000));
        assert_eq!(parse_offset("2w"), Ok(14 * 86_400 * 1_000_000_000));
        assert!(parse_offset("3 days").is_err());
        assert!(parse_offset("d").is_err());
        assert!(parse_offset("99999999999999d").is_err());
    }
}
