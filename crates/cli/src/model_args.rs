//! Options shared by the verbs that run a model (`run`, `chat`, `serve`, `logits`, `generate`):
//! which model (an installed name or tag, or a folder), where it runs (`--backend`), how to load
//! it, how to sample, and how token ids are written on the command line. Finding the model and
//! choosing its backend go through the app's core (`hearth_app`), so `hearth` and the desktop
//! app choose the same way. (`logits` and `generate` load the folder straight into the engine
//! themselves: they check the engine by token ids.)

use std::path::PathBuf;

use anyhow::Context;
use hearth_app::models::LocalModel;
use hearth_app::session::{backend_for, KernelLevel, OpenOptions};
use hearth_app::{Home, Session};
use hearth_chat::{Backend, BackendKind, ChatOptions, ResponseFormat, SamplingParams};

/// This user's Hearth folders (XDG), with the model that came with Hearth.
pub fn home() -> anyhow::Result<Home> {
    Ok(Home::for_user(hearth_app::home::find_builtin_model(None))?)
}

/// Which model to load and how.
#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    /// The model: an installed model's name or tag (as `hearth list` shows it), or a model
    /// folder (config.json, model.q4nx or *.safetensors, and usually tokenizer.json). With
    /// `--backend remote`, the server's model id.
    #[arg(long, value_name = "NAME|DIR")]
    pub model: String,
    /// Context length in tokens (prompt plus answer) [default: min(4096, the model's maximum)].
    #[arg(long, value_name = "TOKENS", value_parser = crate::bounds::context())]
    pub context: Option<usize>,
    /// CPU threads for the matrix kernels [default: one per core].
    #[arg(long, env = "HEARTH_THREADS", value_parser = crate::bounds::threads())]
    pub threads: Option<usize>,
    /// SIMD level of the CPU kernels (avx512vnni, avx512bw, avx2, scalar) [default: the best this
    /// CPU has].
    #[arg(long, env = "HEARTH_KERNEL", value_name = "LEVEL")]
    pub kernel: Option<KernelLevel>,
}

impl ModelArgs {
    /// Finds the model: a folder that exists, else an installed model by name or tag.
    pub fn resolve(&self) -> anyhow::Result<LocalModel> {
        self.resolve_in(&home()?)
    }

    /// [`ModelArgs::resolve`] in `home`.
    pub fn resolve_in(&self, home: &Home) -> anyhow::Result<LocalModel> {
        let as_path = PathBuf::from(&self.model);
        if as_path.is_dir() {
            return Ok(LocalModel::folder(as_path));
        }
        if self.model.contains('/') {
            // A path, not a name: do not look it up among installed models.
            anyhow::bail!(
                "--model {}: the folder does not exist; give a model folder, or the name of an \
                 installed model (`hearth list` shows them)",
                as_path.display()
            );
        }
        let installed = home.store().get(&self.model).with_context(|| {
            format!(
                "--model {:?} is neither a model folder nor an installed model; `hearth list` \
                 shows the installed ones, `hearth pull` downloads one",
                self.model
            )
        })?;
        Ok(hearth_app::models::local_model(home, &installed.name)?)
    }

    /// How Hearth's engine opens it: threads, context length and kernel level.
    pub fn open_options(&self) -> OpenOptions {
        OpenOptions {
            threads: self.threads,
            context_length: self.context,
            kernel: self.kernel,
            ..OpenOptions::default()
        }
    }
}

/// Where the model runs.
#[derive(clap::Args, Debug)]
pub struct BackendArgs {
    /// Where to run the model: cpu (Hearth's engine), npu (FastFlowLM) or remote (an
    /// OpenAI-compatible server, with --url) [default: the best available for the model, as
    /// the app chooses: the NPU when FastFlowLM can run it here, else the CPU].
    #[arg(long, value_name = "cpu|npu|remote")]
    pub backend: Option<BackendKind>,
    /// The remote server's address, e.g. http://gpu-box:8000 (vLLM, llama-server, Ollama,
    /// another `hearth serve`). Implies --backend remote.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The environment variable holding the remote server's API key (the key itself is never
    /// written on the command line, where other users could see it).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
}

impl BackendArgs {
    /// The backend chosen on the command line, or the best one for the model, by the app's
    /// rule (`hearth_app::session::best_backend`).
    pub fn kind(&self, model: &ModelArgs) -> BackendKind {
        match (self.backend, &self.url) {
            (Some(kind), _) => kind,
            (None, Some(_)) => BackendKind::Remote,
            (None, None) => match home().and_then(|home| Ok((model.resolve_in(&home)?, home))) {
                Ok((local, home)) => backend_for(&home, &local, None),
                Err(_) => BackendKind::Cpu,
            },
        }
    }

    /// Opens the backend for `model`.
    pub fn open(&self, model: &ModelArgs) -> anyhow::Result<Box<dyn Backend>> {
        Ok(self.open_session(model, false)?.backend)
    }

    /// Opens `model` on the NPU even when FastFlowLM is known to fail with it
    /// (`hearth run --npu-anyway`, for testers).
    pub fn open_npu_anyway(&self, model: &ModelArgs) -> anyhow::Result<Session> {
        if matches!(self.backend, Some(kind) if kind != BackendKind::Npu) || self.url.is_some() {
            anyhow::bail!("--npu-anyway runs the model on the NPU: leave out --backend and --url, or give --backend npu");
        }
        self.open_session(model, true)
    }

    /// Opens `model` where `--backend` says, or where the app would (`Session::open`).
    pub fn open_session(&self, model: &ModelArgs, npu_anyway: bool) -> anyhow::Result<Session> {
        let home = home()?;
        if self.backend == Some(BackendKind::Remote) || self.url.is_some() {
            return self.connect_remote(&home, &model.model);
        }
        let local = model.resolve_in(&home)?;
        let kind = match npu_anyway {
            true => BackendKind::Npu,
            false => backend_for(&home, &local, self.backend),
        };
        let options = OpenOptions {
            npu_anyway,
            // Loading a model onto the NPU takes a while: say what is happening.
            npu_events: Some(Box::new(|event| eprintln!("hearth: {}", event.words()))),
            require_chat: false,
            ..model.open_options()
        };
        let opened = Session::open(&home, &local, kind, options);
        match kind {
            BackendKind::Cpu => opened
                .with_context(|| format!("could not load the model in {}", local.path.display())),
            _ => Ok(opened?),
        }
    }

    /// Connects to `model` on the remote server: `--url` (with the key from `--api-key-env`),
    /// else the one saved in the app's settings (`remote.json` in Hearth's config folder, with
    /// its key).
    fn connect_remote(&self, home: &Home, model: &str) -> anyhow::Result<Session> {
        let key = match &self.api_key_env {
            Some(var) => Some(std::env::var(var).with_context(|| {
                format!("--api-key-env {var}: that environment variable is not set")
            })?),
            None => None,
        };
        let config = hearth_app::remote::server(home, self.url.as_deref(), key.as_deref())?
            .context(
                "--backend remote needs a server: give --url http://HOST:PORT, or set one in the \
                 app (Settings, Remote server)",
            )?;
        Ok(Session::connect_remote(&config, model)?)
    }
}

/// How tokens are chosen and how many.
#[derive(clap::Args, Debug)]
pub struct SamplingArgs {
    /// Sampling temperature; 0 always takes the most likely token.
    #[arg(long, default_value_t = SamplingParams::default().temperature, value_parser = crate::bounds::temperature)]
    pub temperature: f32,
    /// Sample among the K most likely tokens only (0: all).
    #[arg(long, default_value_t = SamplingParams::default().top_k, value_parser = crate::bounds::count(0..=crate::bounds::MAX_TOP_K))]
    pub top_k: usize,
    /// Sample among the most likely tokens whose probabilities add up to P.
    #[arg(long, default_value_t = SamplingParams::default().top_p, value_parser = crate::bounds::top_p)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one.
    #[arg(long, default_value_t = SamplingParams::default().min_p, value_parser = crate::bounds::min_p)]
    pub min_p: f32,
    /// Penalize tokens already in the conversation (1: off).
    #[arg(long, default_value_t = SamplingParams::default().repetition_penalty, value_parser = crate::bounds::penalty)]
    pub repetition_penalty: f32,
    /// Random seed: the same seed and settings give the same answer.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop after this many generated tokens.
    #[arg(long, default_value_t = ChatOptions::default().max_tokens, value_parser = crate::bounds::count(1..=crate::bounds::MAX_TOKENS))]
    pub max_tokens: usize,
    /// Speculative decoding (drafts copied from earlier in the conversation, checked in one
    /// pass): on (wherever a draft is found) or off [default: while drafts save time]. The
    /// answer is the same token for token either way, for the same seed.
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    pub speculative: Option<bool>,
}

impl SamplingArgs {
    /// The engine's options; `enable_thinking` is passed to the chat template when set.
    pub fn options(&self, enable_thinking: Option<bool>) -> ChatOptions {
        ChatOptions {
            sampling: SamplingParams {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                repetition_penalty: self.repetition_penalty,
                seed: self.seed,
            },
            max_tokens: self.max_tokens,
            enable_thinking,
            speculative: self.speculative,
            format: ResponseFormat::Text,
        }
    }
}

/// Parses token ids written as `1,2,3` (commas and/or spaces).
pub fn parse_tokens(text: &str) -> anyhow::Result<Vec<u32>> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.parse::<u32>().with_context(|| {
                format!("--tokens: {part:?} is not a token id (write ids like 1,2,3)")
            })
        })
        .collect()
}

/// Ends a verb that wrote to stdout: a closed pipe (`hearth logits ... | head`) is a normal end.
pub fn finish_output(result: std::io::Result<()>) -> anyhow::Result<std::process::ExitCode> {
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(std::process::ExitCode::SUCCESS),
    }
}

/// One line about an answer for people, on stderr: where it ran, tokens and timings.
pub fn describe_receipt(r: &hearth_chat::Receipt) -> String {
    let approx = if r.counts_exact { "" } else { "about " };
    let rate = if r.tokens_per_second > 0.0 {
        format!(", {:.1} tok/s", r.tokens_per_second)
    } else {
        String::new()
    };
    format!(
        "{} on {} ({}): {approx}{} prompt tokens, first text after {:.2} s, {approx}{} tokens in \
         {:.2} s{rate} ({})",
        r.model_name,
        r.device,
        r.backend,
        r.prompt_tokens,
        r.ttft_secs,
        r.generated_tokens,
        r.decode_secs,
        r.stop_reason
    )
}

/// One line of timings for people, on stderr.
pub fn describe_stats(stats: &hearth_chat::GenerationStats) -> String {
    let rate = stats
        .decode_tokens_per_sec()
        .map_or_else(String::new, |r| format!(", {r:.1} tok/s"));
    format!(
        "{} prompt tokens in {:.2} s, first token after {:.2} s, {} tokens in {:.2} s{rate} ({:?})",
        stats.prompt_tokens,
        stats.prefill_secs,
        stats.ttft_secs,
        stats.generated_tokens,
        stats.decode_secs,
        stats.stop_reason
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_with_commas_or_spaces() {
        assert_eq!(parse_tokens("1,2, 3 4").unwrap(), [1, 2, 3, 4]);
        assert!(parse_tokens("").unwrap().is_empty());
    }

    #[test]
    fn a_bad_token_says_which() {
        let err = parse_tokens("1,x").unwrap_err().to_string();
        assert!(err.contains("\"x\""), "{err}");
    }
}
