//! The NPU suite (`suite/`) against the imitation as FastFlowLM 0.9.45, the 0.9.x line.

/// The release the imitation plays.
const FLM_VERSION: &str = "0.9.45";

mod suite;
