//! The jail process alone (stage 1, the tracer, and the jail's init), without the supervisor:
//! a binary a fraction of `observe`'s size, so the exec every run makes of it loads faster.
//! `observe` runs it from its own directory when it is there, and runs a copy of itself otherwise.

fn main() {
    if std::env::args().nth(1).as_deref() == Some(observer::jail::stage1::STAGE1_ARG) {
        observer::jail::stage1::main();
    }
    eprintln!("observe-jail is started by observe, not by hand");
    std::process::exit(2);
}
