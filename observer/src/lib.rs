//! skill-observer: run an AI-agent skill in a kernel jail and judge what it does.
//!
//! Modules follow the pipeline of DESIGN.md: bundle → statics → image/creds → agent → jail/trace →
//! egress → analyse → report.

pub mod egress;
pub mod model;
pub mod trace;
