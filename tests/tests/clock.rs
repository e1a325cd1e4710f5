//! End-to-end tests of the switch from the vDSO to the virtual clock (tracer/lazyclock.rs),
//! written as the delayed payloads that must still fire: a process that read the clock before
//! anything was fast-forwarded, a thread reading the clock as fast as it can while the switch
//! happens, and a deadline loop that never sleeps.

use e2e_tests::{observe, observe_as, skill, Run};
use observer::trace::EventKind;
use std::time::Duration;

/// The numbers after `prefix` on the first output line that starts with it.
fn numbers(r: &Run, prefix: &str) -> Vec<i64> {
    let out = r.output();
    let line = out
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in {out}"));
    line.split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect()
}

fn notes(r: &Run, name: &str) -> Vec<String> {
    r.events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TracerNote { note, detail } if note == name => Some(detail.clone()),
            _ => None,
        })
        .collect()
}

/// The parent reads both clocks through the vDSO before its child's sleep is fast-forwarded;
/// a second thread reads them in a tight loop the whole time, so the switch meets threads
/// inside the clock code. The parent must see the ten minutes pass, and nothing may crash.
const WAITS_FOR_CHILD: &str = r#"import subprocess, threading, time
t0, w0 = time.monotonic(), time.time()
stop = False
reads = [0]
def hammer():
    last = time.monotonic()
    while not stop:
        now = time.monotonic()
        time.time()
        if now < last:
            print("monotonic went backwards", last, now)
        last = now
        reads[0] += 1
th = threading.Thread(target=hammer)
th.start()
subprocess.run(["sleep", "600"], check=True)
stop = True
th.join()
print("elapsed %d %d reads %d" % (time.monotonic() - t0, time.time() - w0, reads[0]))
"#;

#[test]
fn a_process_that_read_the_clock_before_the_first_skip_sees_the_skipped_time() {
    process_started_before_the_skip(None);
}

/// The same as an unprivileged user (the hosted worker's case): the tracer switches processes
/// with only the capabilities it holds in the jail's user namespace.
#[test]
fn unprivileged_a_process_that_read_the_clock_before_the_first_skip_sees_the_skipped_time() {
    let prefix = e2e_tests::unprivileged_or_skip!();
    process_started_before_the_skip(Some(&prefix));
}

fn process_started_before_the_skip(prefix: Option<&[String]>) {
    let s = skill(
        "backup-later",
        &[("scripts/later.py", WAITS_FOR_CHILD, 0o644)],
    );
    let r = observe_as(&s, &["--timeout", "60", "--no-baseline"], prefix);
    assert!(r.elapsed < Duration::from_secs(60), "took {:?}", r.elapsed);
    let out = r.output();
    assert!(!out.contains("went backwards"), "{out}");
    let n = numbers(&r, "elapsed");
    assert_eq!(n.len(), 3, "{out}");
    for secs in &n[..2] {
        assert!((600..=615).contains(secs), "clock moved {secs} s: {out}");
    }
    assert!(n[2] > 1000, "the clock thread hardly ran: {out}");
    assert!(
        !notes(&r, "virtual_clock").is_empty(),
        "no switch recorded\n{out}"
    );
    assert!(notes(&r, "clock_unvirtualized").is_empty(), "{out}");
    let (complete, reasons) = r.run_end();
    assert!(complete, "{reasons:?}");
}

/// A deadline loop that never sleeps: only the CPU it burns can tell the tracer to take over
/// the clock, after which the busy-wait acceleration ends it.
const SPINS: &str = r#"import time
end = time.time() + 600
n = 0
while time.time() < end:
    n += 1
print("spun %d" % n)
"#;

#[test]
fn a_deadline_loop_that_never_sleeps_ends_inside_the_budget() {
    let s = skill("cache-warm", &[("scripts/warm.py", SPINS, 0o644)]);
    let r = observe(&s, &["--timeout", "60", "--no-baseline"]);
    assert!(r.elapsed < Duration::from_secs(60), "took {:?}", r.elapsed);
    let out = r.output();
    assert_eq!(numbers(&r, "spun").len(), 1, "{out}");
    assert!(
        notes(&r, "virtual_clock")
            .iter()
            .any(|d| d.contains("spun")),
        "{:?}\n{out}",
        notes(&r, "virtual_clock")
    );
    let (complete, reasons) = r.run_end();
    assert!(complete, "{reasons:?}");
}

/// Nothing is fast-forwarded (a short sleep is slept for real): no switch happens.
#[test]
fn a_run_that_never_skips_time_keeps_the_vdso() {
    let script = "import time\nt = time.monotonic()\nfor _ in range(100000):\n    time.monotonic()\ntime.sleep(0.2)\nprint('ok %d' % int((time.monotonic() - t) * 1000))\n";
    let s = skill("quick-check", &[("scripts/check.py", script, 0o644)]);
    let r = observe(&s, &["--timeout", "60", "--no-baseline"]);
    let out = r.output();
    let ms = numbers(&r, "ok");
    assert!(ms.len() == 1 && (200..5000).contains(&ms[0]), "{out}");
    assert!(notes(&r, "virtual_clock").is_empty(), "{out}");
}

/// Twenty processes read the clock in tight loops (and stat a file) while one sleeps ten
/// minutes: every one of them is switched in the same pass and sees the skipped time.
const CROWD: &str = r#"#!/bin/sh
mkdir -p ~/.cache/ready && rm -f ~/.cache/go ~/.cache/ready/*
for i in $(seq 20); do
  python3 -c '
import os, time
t0 = time.monotonic()
open(os.path.expanduser("~/.cache/ready/%d" % os.getpid()), "w").close()
go = os.path.expanduser("~/.cache/go")
while not os.path.exists(go):
    time.monotonic()
print("proc elapsed %d" % (time.monotonic() - t0))
' &
done
while [ "$(ls ~/.cache/ready | wc -l)" -lt 20 ]; do sleep 0.1; done
sleep 600
touch ~/.cache/go
wait
"#;

#[test]
fn twenty_processes_reading_the_clock_are_switched_together() {
    let s = skill("crowd-sync", &[("scripts/crowd.sh", CROWD, 0o755)]);
    let r = observe(&s, &["--timeout", "90", "--no-baseline"]);
    let out = r.output();
    let elapsed: Vec<i64> = out
        .lines()
        .filter(|l| l.starts_with("proc elapsed"))
        .filter_map(|l| l.split_whitespace().last()?.parse().ok())
        .collect();
    // The script may run more than once (the plan can repeat a step); each run has twenty.
    assert!(
        !elapsed.is_empty() && elapsed.len().is_multiple_of(20),
        "{out}"
    );
    assert!(
        elapsed.iter().all(|&e| (600..700).contains(&e)),
        "{elapsed:?}"
    );
    assert!(notes(&r, "clock_unvirtualized").is_empty(), "{out}");
    let (complete, reasons) = r.run_end();
    assert!(complete, "{reasons:?}");
}

/// A payload that does not trust libc's clock: it finds the vDSO in its memory map, parses its
/// symbols and calls `__vdso_clock_gettime` itself, after planting a decoy copy of the vDSO in a
/// file named `x [vdso]` mapped below the real one (the first "[vdso]" line of its map). Both
/// before and after the switch, and in a program exec'd after it, the direct calls must agree
/// with the virtual clock.
const DIRECT_VDSO: &str = r#"import ctypes, os, struct, subprocess, sys, time
def vdso():
    for line in open("/proc/self/maps"):
        f = line.split()
        if len(f) == 6 and f[5] == "[vdso]" and f[4] == "0":
            lo, hi = (int(x, 16) for x in f[0].split("-"))
    img = ctypes.string_at(lo, hi - lo)
    return lo, img
def direct_monotonic():
    lo, img = vdso()
    shoff, = struct.unpack_from("<Q", img, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", img, 0x3a)
    secs = [struct.unpack_from("<IIQQQQIIQQ", img, shoff + i * shentsize) for i in range(shnum)]
    dynsym = next(s for s in secs if s[1] == 11)
    strtab = secs[dynsym[6]]
    phoff, = struct.unpack_from("<Q", img, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", img, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr = struct.unpack_from("<IIQQ", img, phoff + i * phentsize)
        if p_type == 1:
            bias = p_vaddr - p_offset
            break
    for off in range(dynsym[4], dynsym[4] + dynsym[5], 24):
        name, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", img, off)
        start = strtab[4] + name
        if img[start:img.index(b"\0", start)] == b"__vdso_clock_gettime":
            fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)(lo + value - bias)
            def mono():
                ts = (ctypes.c_long * 2)()
                fn(1, ts)
                return ts[0] + ts[1] / 1e9
            return mono
if len(sys.argv) > 1:
    mono = direct_monotonic()
    print("child skew %d" % abs(mono() - time.monotonic()))
    sys.exit(0)
_, img = vdso()
decoy = os.path.expanduser("~/.cache/x [vdso]")
os.makedirs(os.path.dirname(decoy), exist_ok=True)
open(decoy, "wb").write(img)
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open(decoy, os.O_RDONLY)
addr = libc.mmap(0x10000000, len(img), 1, 2, fd, 0)
print("decoy at %#x" % (addr or 0))
mono = direct_monotonic()
d0, m0 = mono(), time.monotonic()
subprocess.run(["sleep", "600"], check=True)
print("direct elapsed %d libc elapsed %d" % (mono() - d0, time.monotonic() - m0))
subprocess.run([sys.executable, __file__, "child"], check=True)
"#;

#[test]
fn calling_the_vdso_directly_or_planting_a_decoy_does_not_escape_the_virtual_clock() {
    let s = skill("clock-probe", &[("scripts/probe.py", DIRECT_VDSO, 0o644)]);
    let r = observe(&s, &["--timeout", "60", "--no-baseline"]);
    let out = r.output();
    assert!(out.contains("decoy at 0x"), "{out}");
    let n = numbers(&r, "direct elapsed");
    assert_eq!(n.len(), 2, "{out}");
    for secs in n {
        assert!((600..=615).contains(&secs), "clock moved {secs} s: {out}");
    }
    let skew = numbers(&r, "child skew");
    assert!(skew.len() == 1 && skew[0] <= 2, "{out}");
    assert!(notes(&r, "clock_unvirtualized").is_empty(), "{out}");
    let (complete, reasons) = r.run_end();
    assert!(complete, "{reasons:?}");
}

/// After the switch: a thread execs while the main thread sits in a long `select` (a wait the
/// tracer shortens and follows to its syscall exit), and another script asks the kernel for a
/// fresh vDSO (`arch_prctl(ARCH_MAP_VDSO_64)`). The exec is recorded with its result and the
/// new program runs; the fresh vDSO is refused and recorded.
const EXEC_DURING_WAIT: &str = r#"import os, select, subprocess, sys, threading, time
if len(sys.argv) > 1:
    print("second program ran")
    sys.exit(0)
subprocess.run(["sleep", "600"], check=True)
me = os.path.abspath(__file__)
def later():
    time.sleep(0.3)
    os.execv(sys.executable, [sys.executable, me, "again"])
threading.Thread(target=later).start()
r, w = os.pipe()
select.select([r], [], [], 10)
"#;

const MAP_VDSO: &str = r#"import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(158), ctypes.c_long(0x2003), ctypes.c_ulong(0x20000000))
print("map_vdso %d errno %d" % (r, ctypes.get_errno()))
"#;

#[test]
fn an_exec_during_a_shortened_wait_is_recorded_and_a_fresh_vdso_is_refused() {
    let s = skill(
        "late-exec",
        &[
            ("scripts/late.py", EXEC_DURING_WAIT, 0o644),
            ("scripts/map.py", MAP_VDSO, 0o644),
        ],
    );
    let r = observe(&s, &["--timeout", "60", "--no-baseline"]);
    let out = r.output();
    assert!(out.contains("second program ran"), "{out}");
    assert!(
        r.execs()
            .iter()
            .any(|(_, argv, ok)| *ok && argv.iter().any(|a| a == "again")),
        "{:?}",
        r.execs()
    );
    assert!(out.contains("map_vdso -1 errno 1"), "{out}");
    assert!(
        r.kinds()
            .any(|k| matches!(k, EventKind::Denied { syscall, .. } if syscall == "arch_prctl")),
        "no arch_prctl denial recorded"
    );
    assert!(notes(&r, "clock_unvirtualized").is_empty(), "{out}");
}
