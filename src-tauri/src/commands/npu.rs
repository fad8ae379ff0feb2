//! The NPU area: the doctor's findings and idle power readings, over the `npu` crate.
//!
//! Energy per answer is measured around each generation with `npu::Telemetry` (start it before
//! the chat call, `mark_phase(npu::Phase::Decode)` at the first token, `finish(prompt_tokens,
//! generated_tokens)` after); these commands are what the status area polls between answers.
//!
//! The system is read under `/`, or under `HEARTH_NPU_ROOT` when set (a fixture tree from
//! `tests/fixtures/npu/`, to see the app as it looks on a Ryzen AI laptop).

use std::path::PathBuf;
use std::sync::Mutex;

use tauri::State;

use super::blocking;
use crate::error::{CommandError, CommandResult};

/// The power sources, found on first use and kept so CPU use is measured between readings.
#[derive(Default)]
pub struct PowerState {
    sources: Mutex<Option<npu::PowerSources>>,
}

/// Where the system is read: `HEARTH_NPU_ROOT`, else `/`.
pub fn system_root() -> PathBuf {
    std::env::var_os("HEARTH_NPU_ROOT")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Whether the NPU can run models here and, if not, what to fix (the `hearth doctor` report).
#[tauri::command]
#[tracing::instrument]
pub async fn npu_status() -> CommandResult<npu::Diagnosis> {
    blocking(|| Ok(npu::diagnose(&system_root()))).await
}

/// One reading of power and utilization. Reads sysfs only: it never wakes the NPU.
#[tauri::command]
pub async fn power_sample(
    state: State<'_, std::sync::Arc<PowerState>>,
) -> CommandResult<npu::PowerSample> {
    let state = std::sync::Arc::clone(state.inner());
    blocking(move || {
        let mut guard = state.sources.lock().map_err(|_| {
            CommandError::new("internal", "The power readings stopped after an internal error. Restart the app to see them again.")
        })?;
        let sources = guard.get_or_insert_with(|| npu::PowerSources::discover(&system_root()));
        Ok(sources.sample(0.0))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_live_system_by_default() {
        // The variable is not set in tests, so the app reads `/` like `hearth doctor` does.
        if std::env::var_os("HEARTH_NPU_ROOT").is_none() {
            assert_eq!(system_root(), PathBuf::from("/"));
        }
    }
}
