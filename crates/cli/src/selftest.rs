//! `hearth selftest`: does a backend compute what Hearth's CPU engine computes? Fixed prompts are
//! answered greedily on the backend and on the CPU engine, and each pair is compared: how many
//! leading tokens agree and where the answers part. A model that computes a different function
//! on the NPU (a converted variant, an engine that cannot decode it) shows up here. The
//! comparison is the app's ([`hearth_app::npu::selftest`], the one the app runs when it first
//! loads a model onto the NPU); this verb chooses the backend and prints.

use std::process::ExitCode;

use hearth_app::npu::{FidelityReport, SELFTEST_MAX_TOKENS};
use hearth_app::session::BackendKind;

use crate::model_args::{BackendArgs, ModelArgs};

/// Compare a backend's greedy answers with the CPU engine's on fixed prompts.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    backend: BackendArgs,
    /// Tokens per answer.
    #[arg(long, default_value_t = SELFTEST_MAX_TOKENS as u64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    max_tokens: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the verb. Exit code 0 when every answer agrees, 1 when one differs or fails.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let local = args.model.resolve()?;
    let kind = args.backend.kind(&args.model);
    anyhow::ensure!(
        kind != BackendKind::Cpu,
        "the CPU engine is the reference: choose another backend to compare with it (--backend \
         npu, or --backend remote --url URL)"
    );
    let mut candidate = args.backend.open_session(&args.model, false)?;
    let report = hearth_app::npu::selftest(
        &local,
        &args.model.open_options(),
        &mut candidate,
        args.max_tokens as usize,
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", crate::terminal::safe(&render(&report)));
    }
    Ok(if report.identical_count() == report.prompts.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The plain-text report: one line per prompt, then a verdict.
fn render(report: &FidelityReport) -> String {
    let mut out = format!(
        "Comparing {} with the reference {}:\n",
        report.candidate, report.reference
    );
    for p in &report.prompts {
        let line = match (
            &p.error,
            &p.divergence,
            p.agreeing_tokens,
            p.reference_tokens,
        ) {
            (Some(error), _, _, _) => format!("failed: {error}"),
            (None, None, _, _) => "same answer".to_owned(),
            (None, Some((reference, candidate)), Some(agree), Some(total)) => format!(
                "{agree} of {total} tokens agree, then the reference writes {reference:?} and \
                 the backend {candidate:?}"
            ),
            (None, Some((reference, candidate)), _, _) => format!(
                "the first {} characters agree, then the reference writes {reference:?} and the \
                 backend {candidate:?}",
                p.agreeing_chars
            ),
        };
        out.push_str(&format!("  {:?}: {line}\n", p.prompt));
    }
    let same = report.identical_count();
    let total = report.prompts.len();
    out.push_str(&if same == total {
        format!("All {total} answers are the same as the CPU engine's.\n")
    } else {
        format!(
            "{same} of {total} answers are the same as the CPU engine's: this backend does not \
             compute exactly what the CPU engine computes for this model.\n"
        )
    });
    out
}
