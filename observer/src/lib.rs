//! skill-observer: run an AI-agent skill in a kernel jail and judge what it does.
//!
//! Modules follow the pipeline of DESIGN.md: bundle → statics → image/creds → agent → jail/trace →
//! egress → analyse → report.

pub mod agent;
pub mod analyse;
pub mod baseline;
pub mod bundle;
pub mod cancel;
pub mod doctor;
pub mod egress;
pub mod events;
pub mod image;
pub mod jail;
pub mod limits;
pub mod model;
pub mod report;
pub mod run;
pub mod statics;
pub mod trace;
pub mod tracer;
pub mod util;

#[cfg(test)]
pub(crate) mod testutil;
