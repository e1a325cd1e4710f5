//! Sandbox image definitions (data under images/).
