//! `hearth list`: the installed models (and paused downloads), or the catalog with fit hints.

use std::process::ExitCode;

use serde::Serialize;

use hearth_chat::{Availability, BackendKind};
use hearth_hub::{human_bytes, Machine, Store};

use crate::terminal::safe;

/// Arguments of `hearth list`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON: every installed model with its name, folder, size, source and files.
    #[arg(long)]
    pub json: bool,
    /// Show the catalog of models Hearth knows, with whether each fits on this machine.
    #[arg(long)]
    pub catalog: bool,
    /// Show the models other programs keep on this computer (Ollama, LM Studio, Jan, the
    /// Hugging Face cache) and whether Hearth can import them. Those folders are only read.
    #[arg(long, conflicts_with = "catalog")]
    pub found: bool,
}

/// The model store of this user, as the app opens it (`hearth_app::Home::store`): showing the
/// model that came with Hearth (the starter or the demo) as built in; models it installs must
/// pass the engine's chat template check.
pub fn open_store() -> anyhow::Result<Store> {
    Ok(crate::model_args::home()?.store())
}

/// An installed model as `hearth list --json` prints it: the registry's facts, whether the
/// NPU can run it here (with the reason when not), and whether its NPU kernels were verified
/// ("kernels verified (N)" or "no kernel list").
#[derive(Serialize)]
struct Listed<'a> {
    #[serde(flatten)]
    model: &'a hearth_hub::InstalledModel,
    npu: bool,
    npu_reason: Option<&'a str>,
    kernels: String,
}

/// Prints the list.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.found {
        return list_found(args.json);
    }
    let home = crate::model_args::home()?;
    let store = home.store();
    if args.catalog {
        let machine = Machine::measure(&store)?;
        let items = hearth_hub::catalog_view(&store, &machine)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&items)?);
            return Ok(ExitCode::SUCCESS);
        }
        for item in items {
            let e = &item.entry;
            let state = if item.installed {
                "installed"
            } else if item.partial.is_some() {
                "paused"
            } else {
                ""
            };
            println!(
                "{:<20} {:<28} {:>9}  {:<11} {:<9} {}",
                e.id,
                e.repo,
                human_bytes(e.download_bytes),
                e.format.to_string(),
                e.backends
                    .iter()
                    .map(|b| b.to_string())
                    .collect::<Vec<_>>()
                    .join("+"),
                state
            );
            println!("{:<20} {}", "", item.fit.hint);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let models = store.list()?;
    // Where each can run, as the app decides it (the built-in model on the processor only,
    // FastFlowLM's verdict and its known issues for the others).
    let local = hearth_app::models::local_models(&home);
    let npu: Vec<Availability> = models
        .iter()
        .map(|m| {
            local
                .iter()
                .find(|l| l.name == m.name)
                .and_then(|l| l.backends.iter().find(|b| b.kind == BackendKind::Npu))
                .cloned()
                .unwrap_or_else(|| {
                    Availability::unusable(BackendKind::Npu, "Hearth does not list this model")
                })
        })
        .collect();
    if args.json {
        let listed: Vec<Listed> = models
            .iter()
            .zip(&npu)
            .map(|(model, npu)| Listed {
                model,
                npu: npu.usable,
                npu_reason: npu.reason.as_deref(),
                kernels: hearth_hub::kernel_status(&model.folder, &model.files).words(),
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&listed)?);
        return Ok(ExitCode::SUCCESS);
    }
    if models.is_empty() {
        println!(
            "No models installed. `hearth list --catalog` shows what `hearth pull` can fetch."
        );
    }
    for (m, npu) in models.iter().zip(&npu) {
        let runs = if npu.usable { "npu+cpu" } else { "cpu" };
        println!(
            "{} {:<24} {:<20} {:>9}  {:<11} {:<7} {:<11} {}",
            if m.is_default { "*" } else { " " },
            safe(&m.name),
            safe(&m.tag),
            human_bytes(m.size_bytes),
            m.format.to_string(),
            runs,
            safe(&m.source),
            safe(&hearth_hub::kernel_status(&m.folder, &m.files).words())
        );
    }
    // Why the NPU cannot run them, once when the reason is the same for all (no FastFlowLM).
    let mut reasons: Vec<&str> = npu.iter().filter_map(|a| a.reason.as_deref()).collect();
    reasons.dedup();
    match reasons.as_slice() {
        [] => {}
        [one] if npu.len() > 1 => println!("NPU: {}", safe(one)),
        _ => {
            for (m, a) in models.iter().zip(&npu) {
                if let Some(reason) = &a.reason {
                    println!("NPU, {}: {}", safe(&m.name), safe(reason));
                }
            }
        }
    }
    for p in store.partial_downloads()? {
        println!(
            "  {:<24} paused at {} of {}: `hearth pull {}` resumes it, `hearth rm {}` deletes it",
            safe(&p.name),
            human_bytes(p.done_bytes),
            human_bytes(p.total_bytes),
            safe(&p.query),
            safe(&p.name)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `hearth list --found`: the models found on this computer, as a table or JSON.
fn list_found(json: bool) -> anyhow::Result<ExitCode> {
    let found = hearth_hub::scan_found(&hearth_hub::FoundRoots::from_env());
    if json {
        println!("{}", serde_json::to_string_pretty(&found)?);
        return Ok(ExitCode::SUCCESS);
    }
    if found.is_empty() {
        println!(
            "No models found in the folders of Ollama, LM Studio, Jan or the Hugging Face cache."
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<36} {:<12} {:>9}  {:<18} runs",
        "name", "source", "size", "architecture"
    );
    for m in &found {
        let source = match m.source {
            hearth_hub::FoundSource::Ollama => "ollama",
            hearth_hub::FoundSource::Lmstudio => "lmstudio",
            hearth_hub::FoundSource::Jan => "jan",
            hearth_hub::FoundSource::Huggingface => "huggingface",
        };
        let runs = if m.runnable {
            "yes".to_string()
        } else {
            format!("no: {}", m.reason.as_deref().unwrap_or("unknown"))
        };
        println!(
            "{:<36} {:<12} {:>9}  {:<18} {}",
            safe(&m.name),
            source,
            human_bytes(m.size_bytes),
            safe(m.architecture.as_deref().unwrap_or("?")),
            safe(&runs)
        );
        println!("{:<36} {}", "", safe(&m.path.display().to_string()));
    }
    if let Some(m) = found.iter().find(|m| m.runnable) {
        println!(
            "Import one with `hearth import PATH --name NAME`, for example: hearth import {} --name {}",
            safe(&m.path.display().to_string()),
            safe(&m.import_name)
        );
        println!("Hearth converts or copies it; the original is only read.");
    }
    Ok(ExitCode::SUCCESS)
}
