//! `hearth serve`: a local OpenAI-compatible HTTP API over one model, for other programs on this
//! machine. It can front any backend: Hearth's engine, the NPU, or a remote server.

use std::io::Write;
use std::net::{IpAddr, TcpListener};
use std::process::ExitCode;

use anyhow::Context;
use hearth_chat::BackendKind;
use hearth_server::{AppState, ServerOptions, DEFAULT_QUEUE};

use crate::model_args::{BackendArgs, ModelArgs};

/// Serve a model over a local OpenAI-compatible API.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    backend: BackendArgs,
    /// Address to listen on. Anything but a loopback address exposes the model to the network.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 11435)]
    port: u16,
    /// Requests that may wait while one is answered; more get "busy" (503).
    #[arg(long, default_value_t = DEFAULT_QUEUE,
          value_parser = crate::bounds::count(0..=hearth_server::MAX_QUEUE as u64))]
    queue: usize,
    /// Also accept requests addressed to this host name (repeatable; for a server exposed on a
    /// network with --host, e.g. --allow-host mylaptop.lan).
    #[arg(long, value_name = "NAME")]
    allow_host: Vec<String>,
}

/// Runs the verb: loads the model, binds, prints how to call it, serves until interrupted.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let backend = match args.backend.kind(&args.model) {
        BackendKind::Cpu => {
            let local = args.model.resolve()?;
            let cpu = hearth_chat::CpuBackend::open(
                &local.dir,
                &local.name,
                &args.model.load_options(),
                local.sha256,
            )
            .with_context(|| format!("could not load the model in {}", local.dir.display()))?;
            cpu.require_chat()?;
            Box::new(cpu) as Box<dyn hearth_chat::Backend>
        }
        _ => args.backend.open(&args.model)?,
    };
    let mut allowed_hosts = args.allow_host;
    if !args.host.is_loopback() {
        eprintln!(
            "warning: listening on {}, not on loopback: other machines on the network can use \
             this model without any password. Use the default --host 127.0.0.1 to keep it \
             private.",
            args.host
        );
        if !args.host.is_unspecified() {
            allowed_hosts.push(args.host.to_string());
        }
    }
    let options = ServerOptions {
        queue: args.queue,
        allowed_hosts,
        ..ServerOptions::default()
    };
    let state = AppState::new(backend, options);
    let listener = TcpListener::bind((args.host, args.port)).with_context(|| {
        format!(
            "could not listen on {}:{}; is another server using the port? Try --port with \
             another number (or 0 for any free port)",
            args.host, args.port
        )
    })?;
    let address = listener.local_addr()?;
    let base = match address.ip() {
        ip if ip.is_unspecified() => format!("http://127.0.0.1:{}", address.port()),
        _ => format!("http://{address}"),
    };
    let model_id = crate::terminal::safe(state.model_id()).into_owned();
    // How to call it. Whoever started the server may stop reading its output (a closed pipe):
    // that must not stop the server, so write errors are ignored.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "Hearth is serving {model_id} at {base}/v1 (OpenAI-compatible). Ctrl-C stops it."
    )
    .and_then(|()| writeln!(out, "Try:"))
    .and_then(|()| {
        writeln!(
            out,
            "  curl {base}/v1/chat/completions -H 'Content-Type: application/json' \\\n    \
             -d '{{\"model\": \"{model_id}\", \"messages\": [{{\"role\": \"user\", \"content\": \"Hello!\"}}]}}'"
        )
    })
    .and_then(|()| out.flush());
    drop(out);
    hearth_server::serve_blocking(listener, state).context("the server stopped")?;
    Ok(ExitCode::SUCCESS)
}
