//! The NPU area: the doctor's findings, power readings, and one prompt on the NPU and the
//! processor side by side. Energy per answer is measured inside the answer loop.

use hearth_app::npu::Comparison;
use hearth_app::App;
use tauri::{AppHandle, Runtime, State};

use super::blocking;
use crate::error::CommandResult;

/// Whether the NPU can run models here and, if not, what to fix (the `hearth doctor` report).
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn npu_status(app: State<'_, App>) -> CommandResult<hearth_app::npu::Diagnosis> {
    let app = app.inner().clone();
    blocking(move || Ok(app.npu_status())).await
}

/// One reading of power and utilization. Reads sysfs only: it never wakes the NPU.
#[tauri::command]
pub async fn power_sample(app: State<'_, App>) -> CommandResult<hearth_app::npu::PowerSample> {
    let app = app.inner().clone();
    blocking(move || Ok(app.power_sample())).await
}

/// Answers `prompt` with the model `name` on the NPU and then on the processor, greedily, and
/// returns both answers with their receipts (speed, time to first token, energy) and whether
/// the texts agree.
#[tauri::command]
pub async fn compare_backends<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
    name: String,
    prompt: String,
) -> CommandResult<Comparison> {
    let app = app.inner().clone();
    let progress = super::session::loading_events(window);
    blocking(move || app.compare_backends(&name, &prompt, progress)).await
}
