//! The places a model runs, each behind [`hearth_chat::Backend`]:
//!
//! - [`cpu`]: Hearth's own engine on this computer's processor;
//! - [`npu`]: the NPU through FastFlowLM, a child process Hearth starts, watches and stops;
//! - [`remote`]: a model on an OpenAI-compatible server elsewhere;
//! - [`power`]: this computer's power sensors, measuring what an answer costs;
//! - [`selftest`]: does another backend write what the CPU engine writes for the same model?
//!
//! The answer loop that drives a backend, and the types it speaks, are in `hearth_chat`.

pub mod cpu;
pub mod npu;
pub mod power;
pub mod remote;
pub mod selftest;

pub use cpu::CpuBackend;
pub use npu::NpuBackend;
pub use power::Sensors;
pub use remote::{RemoteBackend, RemoteConfig};
// What opening a model on the CPU takes, where a model folder's chat template is and the check
// it passes before Hearth keeps it: the engine's, named here for the app that opens models.
pub use hearth_engine::cpu::KernelLevel;
pub use hearth_engine::{check_chat_template, template_source, LoadOptions};
