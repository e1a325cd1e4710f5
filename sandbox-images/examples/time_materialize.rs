//! Times materialization of each built-in image (used for docs/benchmarks.md).
//!
//! `observe` materializes once per process, so the first call (which also pays the per-process
//! registry probe) is reported apart from the average of the following ones. CPU time counts every
//! thread, from /proc/self/stat (10 ms ticks).

fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit(')').next().unwrap_or_default();
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    f.iter().sum::<f64>() * 10.0
}

fn main() {
    let n = 10;
    for (i, name) in ["linux", "darwin-sim"].into_iter().enumerate() {
        let image = sandbox_images::ImageSpec::builtin(name).expect("image");
        let once = || {
            let seed = planted_creds::Seed::random().expect("seed");
            let m = sandbox_images::materialize(&image, "demo", &[], &seed).expect("materialize");
            std::hint::black_box(m);
        };
        if i == 0 {
            let (t, c) = (std::time::Instant::now(), cpu_ms());
            once();
            println!(
                "{name}: first in process {:.1} ms ({:.0} ms CPU)",
                t.elapsed().as_secs_f64() * 1000.0,
                cpu_ms() - c
            );
        }
        let (t, c) = (std::time::Instant::now(), cpu_ms());
        for _ in 0..n {
            once();
        }
        println!(
            "{name}: {:.1} ms per materialization ({:.0} ms CPU)",
            t.elapsed().as_secs_f64() * 1000.0 / n as f64,
            (cpu_ms() - c) / n as f64
        );
    }
}
