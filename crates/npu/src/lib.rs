//! The XDNA 2 NPU on Linux: detection, plain-language diagnosis, and power telemetry.
//!
//! Everything here reads the system through a root directory (`/` on a real machine, a fixture
//! tree in tests), so every parser runs on real file layouts without an NPU.
//!
//! - [`diagnose`] answers "can the NPU path run here, and if not, what exactly do I do?": the
//!   device (XDNA 2, XDNA 1 or none), kernel, firmware, permission, a busy device and who holds
//!   it (the driver's hardware contexts name the process, else `/proc`; "another user's
//!   program" when neither shows one), the memlock limit, XRT (not needed by FastFlowLM's HRX
//!   build) and FastFlowLM, each reported apart with its fix.
//! - [`elf`] reads a binary's needed libraries, which tell FastFlowLM's HRX build from its XRT
//!   one.
//! - [`PowerSources`] reads power and utilization once, each value with its source or the reason
//!   it is missing ([`Metric`]): safe to poll while idle (it never wakes the NPU).
//! - [`DeviceContexts`] looks inside the device through the driver's ioctls, in pure Rust: every
//!   hardware context with its health, the free context slots, and the last error the NPU
//!   raised; [`check_faults_since`] tells a failed answer whether the NPU itself reported a fault.
//! - [`Telemetry`] samples about once a second on its own thread during a generation and
//!   [`TelemetryHandle::finish`] hands over the readings ([`Recording`]); the answer loop
//!   integrates them into joules.
//! - [`bounded`] runs FastFlowLM's processes with bounds on their output, their time and their
//!   lifetime: the doctor's version check here, and the chat crate's NPU backend.
//!
//! Sources, best first: amdgpu `gpu_metrics` v3.0 (NPU power and column activity, package
//! power, iGPU activity), the amdxdna hwmon, the amdxdna sensors ioctl (only while generating:
//! it wakes the NPU), the amdgpu hwmon (PPT = package), the battery (`power_supply`), and
//! `/proc/stat` for the CPU.

mod access;
mod battery;
pub mod bounded;
pub mod contexts;
mod cpu;
mod device;
mod diagnosis;
pub mod elf;
mod fsroot;
pub mod gpu_metrics;
mod hwmon;
pub mod ioctl;
mod limits;
mod metric;
mod sample;
pub mod software;
mod telemetry;

pub use access::{device_holders, device_is_busy, holder_words, Holder};
pub use contexts::{check_faults_since, DeviceContexts, FaultCheck, HwContext};
pub use device::{Detection, Generation, NpuDevice};
pub use diagnosis::{diagnose, diagnose_with, Check, CheckId, Diagnosis, Status};
pub use metric::Metric;
pub use sample::{PowerSample, PowerSources};
pub use telemetry::{Recording, Telemetry, TelemetryHandle, TelemetryOptions};
