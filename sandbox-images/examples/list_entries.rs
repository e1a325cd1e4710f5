//! Lists the entries of a materialised image (for debugging image definitions).
fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "linux".into());
    let image = sandbox_images::ImageSpec::builtin(&name).expect("image");
    let seed = planted_creds::Seed::random().expect("seed");
    let m = sandbox_images::materialize(&image, "demo", &[], &seed).expect("materialize");
    for e in &m.entries {
        match e {
            sandbox_images::Entry::Dir { path, .. } => println!("d {path}"),
            sandbox_images::Entry::File { path, .. } => println!("f {path}"),
            sandbox_images::Entry::Symlink { path, target } => println!("l {path} -> {target}"),
        }
    }
}
