//! `hearth pull MODEL`: download a catalog model or any Hugging Face `owner/name` holding a
//! Q4NX or safetensors model, verify it, and register it.

use std::process::ExitCode;

use hearth_hub::{
    human_bytes, DownloadControl, DownloadOptions, HubClient, Phase, Progress, PullOutcome,
    PullRequest,
};

use crate::progress::{duration, StatusLine};
use crate::terminal::safe;

/// Arguments of `hearth pull`.
#[derive(clap::Args)]
pub struct Args {
    /// A catalog model (`hearth list --catalog`: minicpm5-2b, qwen3:1.7b, ...) or a Hugging
    /// Face repository `owner/name`, optionally `owner/name@revision`.
    pub model: String,
    /// Install under this name instead of the repository's.
    #[arg(long)]
    pub name: Option<String>,
    /// Branch, tag or commit to download. By default, the catalog's or `main`.
    #[arg(long)]
    pub revision: Option<String>,
    /// Never use the network (also HEARTH_OFFLINE=1 or HF_HUB_OFFLINE=1): only says whether
    /// the model is already installed.
    #[arg(long)]
    pub offline: bool,
}

/// Downloads with a progress line on stderr.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = crate::list::open_store()?;
    let client = HubClient::from_env(args.offline);
    let request = PullRequest {
        query: args.model.clone(),
        name: args.name,
        revision: args.revision,
    };
    let mut line = ProgressLine::new();
    let outcome = hearth_hub::pull(
        &store,
        &client,
        &request,
        &DownloadOptions::default(),
        &DownloadControl::new(),
        &mut |p| line.show(p),
    );
    line.finish();
    match outcome? {
        PullOutcome::Installed(model) => {
            println!(
                "installed {} ({}, {}) in {}",
                safe(&model.name),
                model.format,
                human_bytes(model.size_bytes),
                safe(&model.folder.display().to_string())
            );
            if let Some(entry) =
                hearth_hub::catalog::find(&args.model)?.filter(|e| !e.note.is_empty())
            {
                println!("note: {}", entry.note);
            }
        }
        PullOutcome::AlreadyInstalled(model) => {
            println!(
                "{} is already installed in {}",
                safe(&model.name),
                safe(&model.folder.display().to_string())
            );
        }
        PullOutcome::Paused {
            done_bytes,
            total_bytes,
        } => {
            println!(
                "paused at {} of {}; run the same command to resume",
                human_bytes(done_bytes),
                human_bytes(total_bytes)
            );
        }
        PullOutcome::Cancelled => println!("cancelled; the partial download was deleted"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Pull progress: a redrawn byte count on a terminal; lines on phase changes and messages.
struct ProgressLine {
    status: StatusLine,
    last_phase: Option<Phase>,
    hinted: bool,
}

impl ProgressLine {
    fn new() -> ProgressLine {
        ProgressLine {
            status: StatusLine::new(),
            last_phase: None,
            hinted: false,
        }
    }

    fn show(&mut self, p: &Progress) {
        let changed = self.last_phase != Some(p.phase);
        self.last_phase = Some(p.phase);
        if let Some(message) = &p.message {
            self.status.line(&format!("{}: {message}", p.name));
        }
        if p.phase == Phase::Downloading && self.status.is_live() {
            if !self.hinted {
                self.hinted = true;
                self.status.line(&format!(
                    "{}: downloading {} (Ctrl-C stops; the same command resumes)",
                    p.name,
                    human_bytes(p.total_bytes)
                ));
            }
            let percent = (p.done_bytes * 100).checked_div(p.total_bytes).unwrap_or(0);
            let eta = p
                .eta_secs
                .map(|s| format!(", {} left", duration(s)))
                .unwrap_or_default();
            self.status.redraw(&format!(
                "{} {}/{}  {} of {} ({percent}%)  {}/s{eta}",
                p.file.as_deref().unwrap_or(""),
                p.files_done + 1,
                p.file_count,
                human_bytes(p.done_bytes),
                human_bytes(p.total_bytes),
                human_bytes(p.bytes_per_sec as u64),
            ));
        } else if changed {
            let what = match p.phase {
                Phase::Resolving => "asking the Hub for the files".to_string(),
                Phase::Downloading => format!(
                    "downloading {} (Ctrl-C stops; the same command resumes)",
                    human_bytes(p.total_bytes)
                ),
                Phase::Retrying => "retrying".to_string(),
                Phase::Validating => "checking the weights".to_string(),
                Phase::Converting => "converting".to_string(),
                Phase::Registering => "registering".to_string(),
                Phase::Done => "done".to_string(),
                Phase::Paused => "paused".to_string(),
                Phase::Cancelled => "cancelled".to_string(),
            };
            self.status.line(&format!("{}: {what}", p.name));
        }
    }

    fn finish(&mut self) {
        self.status.finish();
    }
}
