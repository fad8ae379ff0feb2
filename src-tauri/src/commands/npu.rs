//! The NPU area: the doctor's findings and idle power readings, over the `npu` crate.
//!
//! Energy per answer is measured around each generation with `hearth_npu::Telemetry` (start it before
//! the chat call, `mark_phase(hearth_npu::Phase::Decode)` at the first token, `finish(prompt_tokens,
//! generated_tokens)` after); these commands are what the status area polls between answers.
//!
//! The system is read under `Paths::system_root`: `/`, or `HEARTH_NPU_ROOT` when set (a fixture
//! tree from `tests/fixtures/npu/`, to see the app as it looks on a Ryzen AI laptop).

use std::sync::Mutex;

use tauri::{AppHandle, Runtime, State};

use super::blocking;
use crate::error::{CommandError, CommandResult};
use crate::npu_model::{self, Comparison};
use crate::state::AppState;

/// The power sources, found on first use and kept so CPU use is measured between readings.
#[derive(Default)]
pub struct PowerState {
    sources: Mutex<Option<hearth_npu::PowerSources>>,
}

/// Whether the NPU can run models here and, if not, what to fix (the `hearth doctor` report).
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn npu_status(app: State<'_, AppState>) -> CommandResult<hearth_npu::Diagnosis> {
    let root = app.paths.system_root.clone();
    // The NPU's own checks with FastFlowLM's `validate` folded in, each with its fix.
    blocking(move || Ok(hearth_backends::npu::npu_status(&root))).await
}

/// One reading of power and utilization. Reads sysfs only: it never wakes the NPU.
#[tauri::command]
pub async fn power_sample(
    app: State<'_, AppState>,
    state: State<'_, std::sync::Arc<PowerState>>,
) -> CommandResult<hearth_npu::PowerSample> {
    let state = std::sync::Arc::clone(state.inner());
    let root = app.paths.system_root.clone();
    blocking(move || {
        let mut guard = state.sources.lock().map_err(|_| {
            CommandError::new("internal", "The power readings stopped after an internal error. Restart the app to see them again.")
        })?;
        let sources = guard.get_or_insert_with(|| hearth_npu::PowerSources::discover(&root));
        Ok(sources.sample(0.0))
    })
    .await
}

/// Answers `prompt` with the model `name` on the NPU and then on the processor, greedily, and
/// returns both answers with their receipts (speed, time to first token, energy) and whether
/// the texts agree.
#[tauri::command]
pub async fn compare_backends<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    name: String,
    prompt: String,
) -> CommandResult<Comparison> {
    let state = state.inner().clone();
    let progress = super::session::loading_events(app);
    blocking(move || npu_model::compare(&state, &name, &prompt, progress)).await
}
