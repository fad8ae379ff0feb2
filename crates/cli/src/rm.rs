//! `hearth rm NAME`: unregister a model and delete its files (or a paused download); for a
//! speech model (`whisper-base`), delete the folder Hearth downloaded into `models/speech/`.

use std::process::ExitCode;

use hearth_hub::human_bytes;

/// Arguments of `hearth rm`.
#[derive(clap::Args)]
pub struct Args {
    /// Name (or tag) of the installed model, as `hearth list` shows it.
    pub name: String,
}

/// Removes the model and says how much disk that freed.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = crate::list::open_store()?;
    let removed = match hearth_hub::speech::folder_name(&store, &args.name)? {
        Some(name) => hearth_hub::speech::remove(&store, &name)?,
        None => store.remove(&args.name)?,
    };
    println!(
        "removed {}: freed {}",
        crate::terminal::safe(&removed.name),
        human_bytes(removed.freed_bytes)
    );
    Ok(ExitCode::SUCCESS)
}
