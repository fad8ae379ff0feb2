//! `hearth serve`: a local HTTP API for other programs on this machine, in OpenAI's shape
//! (`/v1/...`) and Ollama's (`/api/...`). Without `--model` it serves every installed model,
//! loading the one a request names on Hearth's engine; with `--model` it serves that one, on
//! any backend: Hearth's engine, the NPU, or a remote server.

use std::io::Write;
use std::net::{IpAddr, TcpListener};
use std::process::ExitCode;

use anyhow::Context;
use hearth_app::session::KernelLevel;
use hearth_chat::BackendKind;
use hearth_server::{
    AppState, EmbeddingSource, KeepAlive, LoadSettings, LocalModels, ServerOptions, DEFAULT_QUEUE,
};

use crate::model_args::{BackendArgs, ModelArgs};

/// Serve models over a local OpenAI- and Ollama-compatible API.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Serve only this model: an installed model's name or tag, or a model folder (with
    /// `--backend remote`, the server's model id). Without it, every installed model is served
    /// and the one a request names is loaded on demand.
    #[arg(long, value_name = "NAME|DIR")]
    model: Option<String>,
    /// Context length in tokens (prompt plus answer) [default: min(4096, the model's maximum)].
    /// A request's `num_ctx` above it loads the model again with that much.
    #[arg(long, value_name = "TOKENS", value_parser = crate::bounds::context())]
    context: Option<usize>,
    /// CPU threads for the matrix kernels [default: one per core].
    #[arg(long, env = "HEARTH_THREADS", value_parser = crate::bounds::threads())]
    threads: Option<usize>,
    /// SIMD level of the CPU kernels (avx512vnni, avx512bw, avx2, scalar) [default: the best this
    /// CPU has].
    #[arg(long, env = "HEARTH_KERNEL", value_name = "LEVEL")]
    kernel: Option<KernelLevel>,
    #[command(flatten)]
    backend: BackendArgs,
    /// Address to listen on. Anything but a loopback address exposes the models to the network.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to listen on (0: any free port; 11434 is the port Ollama's clients call).
    #[arg(long, env = "HEARTH_PORT", default_value_t = 11435)]
    port: u16,
    /// Requests that may wait while one is answered; more get "busy" (503).
    #[arg(long, default_value_t = DEFAULT_QUEUE,
          value_parser = crate::bounds::count(0..=hearth_server::MAX_QUEUE as u64))]
    queue: usize,
    /// Also accept requests addressed to this host name (repeatable; for a server exposed on a
    /// network with --host, e.g. --allow-host mylaptop.lan).
    #[arg(long, value_name = "NAME")]
    allow_host: Vec<String>,
    /// Also answer web pages and apps from this origin, with CORS headers (repeatable, or
    /// comma-separated in HEARTH_ORIGINS; one `*` matches anything), e.g. app://obsidian.md,
    /// vscode-webview://*, chrome-extension://ID. Pages on this machine (localhost) are always
    /// answered.
    #[arg(
        long,
        env = "HEARTH_ORIGINS",
        value_name = "ORIGIN",
        value_delimiter = ','
    )]
    allow_origin: Vec<String>,
    /// How long a model stays loaded after a request that does not say (`keep_alive`):
    /// seconds, or a duration such as 5m or 1h; -1 keeps it loaded [default: 5m; with --model,
    /// -1].
    #[arg(long, env = "HEARTH_KEEP_ALIVE", value_name = "DURATION",
          value_parser = parse_keep_alive, allow_hyphen_values = true)]
    keep_alive: Option<KeepAlive>,
    /// Folder of the sentence-embedding model that /v1/embeddings and /api/embed answer with
    /// by default (a BERT encoder: config.json, model.safetensors, tokenizer.json) [default:
    /// the bundled all-MiniLM-L6-v2, when this installation has it]. Installed embedding
    /// models (`hearth pull qwen3-embedding-0.6b`) are served beside it, by their names.
    #[arg(long, env = "HEARTH_EMBEDDING_MODEL", value_name = "DIR")]
    embedding_model: Option<std::path::PathBuf>,
}

fn parse_keep_alive(text: &str) -> Result<KeepAlive, String> {
    match text.trim().parse::<f64>() {
        Ok(seconds) => KeepAlive::from_seconds(seconds),
        Err(_) => KeepAlive::parse(text),
    }
}

/// Runs the verb: opens the models, binds, prints how to call it, serves until interrupted.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut allowed_hosts = args.allow_host.clone();
    if !args.host.is_loopback() {
        eprintln!(
            "warning: listening on {}, not on loopback: other machines on the network can use \
             these models without any password. Use the default --host 127.0.0.1 to keep it \
             private.",
            args.host
        );
        if !args.host.is_unspecified() {
            allowed_hosts.push(args.host.to_string());
        }
    }
    let allowed_origins: Vec<String> = args
        .allow_origin
        .iter()
        .map(|o| o.trim().to_owned())
        .filter(|o| !o.is_empty())
        .collect();
    let options = ServerOptions {
        queue: args.queue,
        allowed_hosts,
        allowed_origins,
        keep_alive: args.keep_alive.unwrap_or(if args.model.is_some() {
            KeepAlive::Forever
        } else {
            hearth_server::DEFAULT_KEEP_ALIVE
        }),
        embedding_models: embedding_sources(&args)?,
        // Transcription runs here from the speech models folder, whatever the chat model is.
        speech_models_dir: Some(hearth_app::speech::speech_models_dir(
            &crate::model_args::home()?,
        )),
        speech_home: Some(crate::model_args::home()?),
        ..ServerOptions::default()
    };
    let state = open_models(&args, options)?;
    let listener = TcpListener::bind((args.host, args.port)).with_context(|| {
        format!(
            "could not listen on {}:{}; is another server (Ollama?) using the port? Try --port \
             with another number (or 0 for any free port)",
            args.host, args.port
        )
    })?;
    let address = listener.local_addr()?;
    let base = match address.ip() {
        ip if ip.is_unspecified() => format!("http://127.0.0.1:{}", address.port()),
        _ => format!("http://{address}"),
    };
    print_usage(&state, &base);
    hearth_server::serve_blocking(listener, state).context("the server stopped")?;
    Ok(ExitCode::SUCCESS)
}

/// What requests name the bundled embedding model (all-MiniLM-L6-v2).
const BUNDLED_EMBEDDING_MODEL: &str = "all-minilm-l6-v2";

/// The embedding models: `--embedding-model` (named after its folder), else the bundled one;
/// then every installed embedding model, by its name.
fn embedding_sources(args: &Args) -> anyhow::Result<Vec<EmbeddingSource>> {
    let mut sources: Vec<EmbeddingSource> = first_embedding_source(args)?.into_iter().collect();
    let store = crate::list::open_store()?;
    for model in store.list()? {
        if model.is_embedding() && model.folder.is_dir() {
            sources.push(EmbeddingSource {
                name: model.name,
                folder: model.folder,
            });
        }
    }
    Ok(sources)
}

/// `--embedding-model` (named after its folder), else the bundled model.
fn first_embedding_source(args: &Args) -> anyhow::Result<Option<EmbeddingSource>> {
    if let Some(dir) = &args.embedding_model {
        let folder =
            hearth_documents::find_embedding_model(Some(dir.clone()), None).with_context(|| {
                format!(
                    "--embedding-model {}: no config.json there; give the folder of a BERT \
                     sentence-embedding model (config.json, model.safetensors, tokenizer.json)",
                    dir.display()
                )
            })?;
        let name = folder.file_name().map_or_else(
            || "embedding".to_owned(),
            |n| n.to_string_lossy().into_owned(),
        );
        return Ok(Some(EmbeddingSource { name, folder }));
    }
    Ok(
        hearth_documents::find_embedding_model(None, None).map(|folder| EmbeddingSource {
            name: BUNDLED_EMBEDDING_MODEL.to_owned(),
            folder,
        }),
    )
}

/// The server's models: the one `--model` names (loaded now, so a bad model fails here), or
/// every model the app lists, loaded on demand.
fn open_models(args: &Args, options: ServerOptions) -> anyhow::Result<AppState> {
    let load = LoadSettings {
        context_length: args.context,
        threads: args.threads,
        kernel: args.kernel,
    };
    let home = crate::model_args::home()?;
    let Some(name) = &args.model else {
        if args.backend.backend.is_some_and(|k| k != BackendKind::Cpu) || args.backend.url.is_some()
        {
            anyhow::bail!(
                "--backend npu and --backend remote serve one model: give it with --model"
            );
        }
        let models = hearth_app::models::local_models(&home);
        if models.is_empty() {
            eprintln!(
                "warning: no model is installed yet; `hearth pull` downloads one, and the server \
                 serves it once restarted"
            );
        }
        return Ok(AppState::on_demand(
            LocalModels::new(home, models, load),
            options,
        ));
    };
    let model = ModelArgs {
        model: name.clone(),
        context: args.context,
        threads: args.threads,
        kernel: args.kernel,
    };
    if args.backend.kind(&model) != BackendKind::Cpu {
        return Ok(AppState::new(args.backend.open(&model)?, options));
    }
    let local = model.resolve_in(&home)?;
    let (name, path) = (local.name.clone(), local.path.clone());
    let state = AppState::on_demand(LocalModels::new(home, vec![local], load), options);
    state.preload(&name).map_err(|e| {
        anyhow::anyhow!(
            "could not load the model in {}: {}",
            path.display(),
            e.message()
        )
    })?;
    Ok(state)
}

/// How to call it. Whoever started the server may stop reading its output (a closed pipe):
/// that must not stop the server, so write errors are ignored.
fn print_usage(state: &AppState, base: &str) {
    let names = state.model_names();
    let first = names
        .first()
        .map(|n| crate::terminal::safe(n).into_owned())
        .unwrap_or_else(|| "MODEL".to_owned());
    let listed = names
        .iter()
        .map(|n| crate::terminal::safe(n).into_owned())
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "Hearth is serving {listed} at {base} (OpenAI-compatible at {base}/v1, \
         Ollama-compatible at {base}/api). Ctrl-C stops it."
    )
    .and_then(|()| writeln!(out, "Try:"))
    .and_then(|()| {
        writeln!(
            out,
            "  curl {base}/v1/chat/completions -H 'Content-Type: application/json' \\\n    \
             -d '{{\"model\": \"{first}\", \"messages\": [{{\"role\": \"user\", \"content\": \"Hello!\"}}]}}'"
        )
    })
    .and_then(|()| {
        writeln!(
            out,
            "  curl {base}/api/chat -d '{{\"model\": \"{first}\", \"messages\": \
             [{{\"role\": \"user\", \"content\": \"Hello!\"}}]}}'"
        )
    })
    .and_then(|()| out.flush());
}
