//! Times one materialization of each built-in image (used for docs/benchmarks.md).
fn main() {
    for name in ["linux", "darwin-sim"] {
        let image = sandbox_images::ImageSpec::builtin(name).expect("image");
        let t = std::time::Instant::now();
        let n = 5;
        for _ in 0..n {
            let seed = planted_creds::Seed::random().expect("seed");
            let m = sandbox_images::materialize(&image, "demo", &[], &seed).expect("materialize");
            std::hint::black_box(m);
        }
        println!(
            "{name}: {:.1} ms per materialization",
            t.elapsed().as_secs_f64() * 1000.0 / n as f64
        );
    }
}
