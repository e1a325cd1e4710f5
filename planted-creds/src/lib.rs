//! Canary credentials (see issue 4).
