//! Hand-written traces for every indicator, firing and not firing, written as an attacker would.

mod exec_tests;
mod fs_tests;
mod net_tests;
mod run_tests;
