//! `flm serve`: the start-up lines, the socket bound before the model loads, and one thread
//! per connection.

use std::net::TcpListener;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_engine::{LoadOptions, Model};
use serde_json::Value;

use crate::args::Args;
use crate::catalog::Catalog;
use crate::prompt_cache::PromptCache;
use crate::setup::{Fault, Release};
use crate::{device, http, verbs, DEFAULT_PORT};

/// The model on the "NPU": its tag, and the engine (None after a failed load: FastFlowLM's
/// `model-faker`).
pub struct Loaded {
    pub tag: String,
    pub model: Option<Model>,
    /// What the model's KV cache holds, and the rule that decides whether it is reused.
    pub cache: PromptCache,
}

pub struct Server {
    pub release: Release,
    pub catalog: Catalog,
    pub ctx_len: Option<usize>,
    pub fault: Fault,
    pub q_len: usize,
    /// The NPU: one job at a time.
    pub npu: Mutex<Loaded>,
    /// Requests running or waiting for the NPU.
    pub waiting: AtomicUsize,
    /// Streamed answers so far (for `crash-mid-stream`).
    pub streams: AtomicUsize,
    /// Started with `--asr 1`: Whisper is loaded, `/v1/audio/transcriptions` answers.
    pub asr: bool,
}

pub fn serve(release: Release, catalog: Catalog, args: &Args, fault: Fault) -> i32 {
    let tag = args.positional.get(1).cloned();
    if let Some(t) = &tag {
        if !catalog.is_tag(t) {
            verbs::model_not_found(t);
            return 1;
        }
    }
    // FastFlowLM raises locked memory to the model's size + 1 GB for Whisper + 512 MiB.
    let memlock_mb = if args.asr { 2560 + 1000 } else { 2560 };
    println!("\x1b[32m[Linux]  Memlock Limit: raised to {memlock_mb} MB\x1b[0m");
    if args.asr {
        println!(
            "\x1b[32m[FLM]  ASR mode enabled: loading {}\x1b[0m",
            crate::asr::ASR_MODEL
        );
    }
    let update_check_off = std::env::var("FLM_DISABLE_UPDATE_CHECK")
        .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"));
    if !update_check_off {
        println!("[Warning]  Version check timed out; continuing without update info.");
    }
    let port = match args.port.filter(|p| (1..=65535).contains(p)) {
        Some(p) => {
            println!("[FLM]  Using user-specified port: {p}");
            p as u16
        }
        None => {
            let p = std::env::var("FLM_SERVE_PORT")
                .ok()
                .and_then(|v| v.parse::<u16>().ok())
                .filter(|p| *p > 0)
                .unwrap_or(DEFAULT_PORT);
            println!("[FLM]  Using environment-specified port: {p}");
            p
        }
    };
    let host = args.host.clone().unwrap_or_else(|| "127.0.0.1".into());
    // The socket listens before the model loads: connections wait unanswered meanwhile.
    let listener = match TcpListener::bind((host.as_str(), port)) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            eprintln!("Error: bind: Address already in use [system:98]");
            return 1;
        }
        Err(e) => {
            eprintln!("Error: bind: {e}");
            return 1;
        }
    };
    let ctx_len = args
        .ctx_len
        .filter(|c| *c > 0)
        .map(|c| (c as usize).max(512));
    let server = Arc::new(Server {
        release,
        catalog,
        ctx_len,
        fault,
        q_len: args.q_len.unwrap_or(10),
        npu: Mutex::new(Loaded {
            tag: "model-faker".into(),
            model: None,
            cache: PromptCache::default(),
        }),
        waiting: AtomicUsize::new(0),
        streams: AtomicUsize::new(0),
        asr: args.asr,
    });
    // FastFlowLM loads Whisper first, from the entry `whisper-v3:turbo` of the model list it
    // reads, before the chat model (none with no tag: `model-faker`, Whisper alone). The real
    // one pulls a Whisper that is not downloaded, and with no such entry falls back to another
    // model's; the imitation downloads nothing and says what is missing.
    if args.asr {
        if device::open() == device::Open::Busy {
            eprintln!("Error: No such device with index '0'");
            return 1;
        }
        let entry = server.catalog.entry(crate::asr::ASR_MODEL);
        let problem = match &entry {
            None => Some(format!("no {} in the model list", crate::asr::ASR_MODEL)),
            Some(e) if !server.catalog.installed(e) => Some(format!(
                "{} is not downloaded in {} and the imitation downloads nothing",
                crate::asr::ASR_MODEL,
                server.catalog.folder(e).display()
            )),
            Some(_) => None,
        };
        if let Some(problem) = problem {
            eprintln!("\x1b[31m[ERROR]  Failed to load ASR model: {problem}\x1b[0m");
            return 1;
        }
    }
    if fault == Fault::SlowStart {
        let secs: f64 = std::env::var("FLM_IMITATION_DELAY_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(30.0);
        std::thread::sleep(Duration::from_secs_f64(secs));
    }
    if let Some(tag) = &tag {
        let tag = server.catalog.rectify(tag);
        let entry = server.catalog.entry(&tag).unwrap_or(Value::Null);
        println!(
            "[FLM]  Loading model: {}",
            server.catalog.folder(&entry).display()
        );
        match fault {
            Fault::ExitAtStart => {
                eprintln!("Error: No such device with index '0'");
                return 1;
            }
            Fault::Incompatible => {
                println!("[WARNING]  The model is newer than this FastFlowLM.");
                println!("[WARNING]  Please update FastFlowLM to run it.");
                println!("[WARNING]  Model: {tag}");
                return 0;
            }
            _ => {}
        }
        // Up to 1.0.7 the device is opened here, to load the model (1.0.8 opened it at start).
        if device::open() == device::Open::Busy {
            eprintln!("Error: No such device with index '0'");
            return 1;
        }
        let mut npu = server.npu.lock().unwrap_or_else(|e| e.into_inner());
        match load(&server, &tag) {
            Ok(model) => {
                npu.tag = tag;
                npu.model = Some(model);
            }
            Err(what) => {
                eprintln!("\x1b[31m[ERROR]  Failed to load model: {what}\x1b[0m");
                eprintln!("\x1b[31m[Error]  Failed to load default model: {tag}\x1b[0m");
            }
        }
    }
    println!("[FLM]  Starting server on port {port}...");
    println!("[FLM]  WebServer started on port {port} with 10 I/O threads");
    println!("[FLM]  Press Ctrl+C to stop.");
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let server = Arc::clone(&server);
        std::thread::spawn(move || {
            http::handle_connection(&server, stream);
        });
    }
    0
}

/// Loads the model of `tag` with the server's context length.
pub fn load(server: &Server, tag: &str) -> Result<Model, String> {
    if server.fault == Fault::LoadFails {
        return Err("runlist failed execution (ERT_CMD_STATE_TIMEOUT)".into());
    }
    let entry = server
        .catalog
        .entry(tag)
        .ok_or_else(|| format!("no catalog entry for {tag}"))?;
    let folder = server.catalog.folder(&entry);
    let context_length = server
        .ctx_len
        .or_else(|| entry["default_context_length"].as_u64().map(|c| c as usize));
    Model::load(
        &folder,
        &LoadOptions {
            context_length,
            threads: Some(1),
            ..LoadOptions::default()
        },
    )
    .map_err(|e| e.to_string())
}
