//! `hearth list`: the installed models (and paused downloads), or the catalog with fit hints.

use std::path::PathBuf;
use std::process::ExitCode;

use hearth_hub::{human_bytes, Machine, Store};

/// Arguments of `hearth list`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON: every installed model with its name, folder, size, source and files.
    #[arg(long)]
    pub json: bool,
    /// Show the catalog of models Hearth knows, with whether each fits on this machine.
    #[arg(long)]
    pub catalog: bool,
}

/// The model store of this user, showing the bundled demo model as built in.
pub fn open_store() -> anyhow::Result<Store> {
    let store = Store::open_default()?;
    Ok(match demo_dir() {
        Some(dir) => store.with_builtin("demo", dir),
        None => store,
    })
}

/// Where the bundled demo model is: `HEARTH_DEMO_MODEL`, next to an installed binary
/// (`../share/hearth/models/demo`), or in the source tree for a development build.
fn demo_dir() -> Option<PathBuf> {
    let is_model = |dir: &PathBuf| dir.join("config.json").is_file();
    if let Some(dir) = std::env::var_os("HEARTH_DEMO_MODEL").map(PathBuf::from) {
        return is_model(&dir).then_some(dir);
    }
    let installed = std::env::current_exe().ok().and_then(|exe| {
        exe.parent()?
            .parent()
            .map(|p| p.join("share/hearth/models/demo"))
    });
    let source_tree = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../models/demo"));
    installed.into_iter().chain([source_tree]).find(is_model)
}

/// Prints the list.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = open_store()?;
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
    if args.json {
        println!("{}", serde_json::to_string_pretty(&models)?);
        return Ok(ExitCode::SUCCESS);
    }
    if models.is_empty() {
        println!(
            "No models installed. `hearth list --catalog` shows what `hearth pull` can fetch."
        );
    }
    for m in &models {
        println!(
            "{} {:<24} {:<20} {:>9}  {:<11} {:<7} {}",
            if m.is_default { "*" } else { " " },
            m.name,
            m.tag,
            human_bytes(m.size_bytes),
            m.format.to_string(),
            m.backends
                .iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join("+"),
            m.source
        );
    }
    for p in store.partial_downloads()? {
        println!(
            "  {:<24} paused at {} of {}: `hearth pull {}` resumes it, `hearth rm {}` deletes it",
            p.name,
            human_bytes(p.done_bytes),
            human_bytes(p.total_bytes),
            p.query,
            p.name
        );
    }
    Ok(ExitCode::SUCCESS)
}
