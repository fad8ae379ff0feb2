//! The NPU suite (`suite/`) against the imitation as FastFlowLM 1.0.6, the 1.0.x line.

/// The release the imitation plays.
const FLM_VERSION: &str = "1.0.6";

mod suite;
