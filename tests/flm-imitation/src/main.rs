//! An imitation of FastFlowLM's `flm`, for Hearth's tests only.
//!
//! It behaves as the notes on FastFlowLM (`fastflowlm-integration.md`, §9) describe the real
//! one, as far as Hearth can see from outside: the verbs `version`, `--version`, `validate`, `list`,
//! `port`, `pull` and `serve` with their exit codes and exact lines; the environment variables
//! `FLM_CONFIG_PATH`, `FLM_MODEL_PATH`, `FLM_SERVE_PORT` and `FLM_DISABLE_UPDATE_CHECK`; the
//! start-up lines of `serve` (the socket listens before the model loads); exact-path routes;
//! SSE chunks with a final usage chunk and `[DONE]`; errors as HTTP 200 bodies; one job at a
//! time; the connection closed after every response; and the silent fallback to `llama3.2:1b`
//! for a model name it does not know. Answers come from Hearth's CPU engine on the model
//! folder the catalog names, so they are real text.
//!
//! Faults are chosen with `FLM_IMITATION_FAULT` (see [`Fault`]); `FLM_IMITATION_VERSION` sets
//! the version it reports (default 1.0.6) and `FLM_IMITATION_DELAY_SECS` how long `slow-start`
//! waits (default 30).
//!
//! Shortcuts, honestly: no NPU, no downloads (`pull` of a missing model fails), and the
//! `llama3.2:1b` fallback answers with the model already loaded when the catalog has no
//! `llama3.2:1b` entry (the real one would download it); the answer is labelled `llama3.2:1b`
//! either way, which is what a client can see.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hearth_engine::{ChatMessage, ChatOptions, LoadOptions, Model, Role, SamplingParams};
use serde_json::{json, Map, Value};

/// The tag the real server falls back to for an unknown model name.
const FALLBACK_TAG: &str = "llama3.2:1b";
/// The port FastFlowLM uses when none is given.
const DEFAULT_PORT: u16 = 52625;

/// What goes wrong, chosen by `FLM_IMITATION_FAULT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// `serve` waits `FLM_IMITATION_DELAY_SECS` after binding before it loads (and serves).
    SlowStart,
    /// `serve` exits 1 while loading, as when XRT cannot open the device.
    ExitAtStart,
    /// The model load fails; the server keeps serving with no model (as FastFlowLM does).
    LoadFails,
    /// The model folder is newer than the program: three warnings and exit 0, not serving.
    Incompatible,
    /// The process exits after the third chunk of the first streamed answer.
    CrashMidStream,
    /// Every answer is labelled `llama3.2:1b`, whatever was asked.
    WrongModel,
    /// The request's answer is an HTTP 200 body `{"error": ...}` from the engine.
    EngineError,
    /// `validate`: no NPU device.
    ValidateNoDevice,
    /// `validate`: firmware older than 1.1.
    ValidateOldFirmware,
    /// `validate`: locked-memory limit too low.
    ValidateMemlock,
    /// `validate`: kernel older than 6.17 (early return, other fields still true).
    ValidateOldKernel,
}

impl Fault {
    fn from_env() -> Fault {
        match std::env::var("FLM_IMITATION_FAULT")
            .unwrap_or_default()
            .as_str()
        {
            "slow-start" => Fault::SlowStart,
            "exit-at-start" => Fault::ExitAtStart,
            "load-fails" => Fault::LoadFails,
            "incompatible" => Fault::Incompatible,
            "crash-mid-stream" => Fault::CrashMidStream,
            "wrong-model" => Fault::WrongModel,
            "engine-error" => Fault::EngineError,
            "validate-no-device" => Fault::ValidateNoDevice,
            "validate-old-firmware" => Fault::ValidateOldFirmware,
            "validate-memlock" => Fault::ValidateMemlock,
            "validate-old-kernel" => Fault::ValidateOldKernel,
            _ => Fault::None,
        }
    }
}

/// The command line, as FastFlowLM's option parser reads it.
#[derive(Debug, Default)]
struct Args {
    positional: Vec<String>,
    json: bool,
    version: bool,
    help: bool,
    quiet: bool,
    force: bool,
    port: Option<i64>,
    host: Option<String>,
    ctx_len: Option<i64>,
    filter: Option<String>,
    q_len: Option<usize>,
}

fn parse_args(raw: &[String]) -> Result<Args, String> {
    let mut args = Args::default();
    let mut it = raw.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("the required argument for option '{name}' is missing"))
        };
        match a.as_str() {
            "--json" | "-j" => args.json = true,
            "--version" | "-v" => args.version = true,
            "--help" | "-h" => args.help = true,
            "--quiet" => args.quiet = true,
            "--force" => args.force = true,
            "--port" | "-p" => {
                args.port = Some(value(a)?.parse().map_err(|_| "invalid port".to_string())?)
            }
            "--host" => args.host = Some(value(a)?),
            "--ctx-len" | "-c" => {
                args.ctx_len = Some(
                    value(a)?
                        .parse()
                        .map_err(|_| "invalid ctx-len".to_string())?,
                )
            }
            "--filter" => args.filter = Some(value(a)?),
            "--q-len" | "-q" => {
                args.q_len = Some(value(a)?.parse().map_err(|_| "invalid q-len".to_string())?)
            }
            "--pmode"
            | "--socket"
            | "-s"
            | "--cors"
            | "--asr"
            | "-a"
            | "--embed"
            | "-e"
            | "--prefill-chunk-len"
            | "-pcl"
            | "--img-pre-resize"
            | "-r"
            | "--preemption" => {
                value(a)?;
            }
            s if s.starts_with('-') => return Err(format!("unrecognised option '{s}'")),
            s => args.positional.push(s.to_string()),
        }
    }
    Ok(args)
}

fn version() -> String {
    std::env::var("FLM_IMITATION_VERSION").unwrap_or_else(|_| "1.0.6".into())
}

fn main() {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse_args(&raw) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("Error: {e}");
            std::process::exit(1);
        }
    };
    if args.help {
        println!("FastFlowLM imitation (tests only)\nUsage: flm <command> [model_tag] [options]");
        std::process::exit(1);
    }
    if args.version {
        println!("FLM v{}", version());
        std::process::exit(1);
    }
    let Some(command) = args.positional.first().cloned() else {
        eprintln!("Error: Command is required");
        std::process::exit(1);
    };
    let catalog = match Catalog::find_and_read() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let fault = Fault::from_env();
    let code = match command.as_str() {
        "version" => {
            if args.json {
                println!("{{ \"version\": \"{}\" }}", version());
            } else {
                println!("FLM v{}", version());
            }
            0
        }
        "port" => {
            if args.json {
                println!("{{ \"port\": {DEFAULT_PORT} }}");
            } else {
                println!("Server Port: {DEFAULT_PORT}");
            }
            0
        }
        "validate" => validate(args.json, fault),
        "list" => list(&catalog, &args),
        "pull" => pull(&catalog, &args),
        "serve" => serve(catalog, &args, fault),
        "run" | "remove" | "check" | "bench" => match args.positional.get(1) {
            Some(tag) if catalog.is_tag(tag) => {
                eprintln!("Error: the imitation does not implement `{command}`");
                1
            }
            tag => {
                model_not_found(tag.map_or("", String::as_str));
                1
            }
        },
        other => {
            eprintln!("Error: Invalid command: {other}");
            1
        }
    };
    std::process::exit(code);
}

fn model_not_found(tag: &str) {
    println!("[ERROR]  Model not found: {tag}; Please check with `flm list` and try again.");
}

/// A JSON value printed as nlohmann's `dump(4)` prints it: keys sorted, four-space indent.
fn dump4(value: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let by_key: BTreeMap<&String, &Value> = m.iter().collect();
                let mut out = Map::new();
                for (k, v) in by_key {
                    out.insert(k.clone(), sorted(v));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    serde::Serialize::serialize(&sorted(value), &mut ser).expect("JSON values serialize");
    String::from_utf8(buf).expect("JSON is UTF-8")
}

// ---------------------------------------------------------------- the catalog (model_list.json)

struct Catalog {
    json: Value,
    /// `<models dir>/<model_path>`, joined as a filesystem path (an absolute `model_path` wins).
    model_root: PathBuf,
}

impl Catalog {
    fn find_and_read() -> Result<Catalog, String> {
        let exe_dir = std::env::current_exe()
            .ok()
            .and_then(|p| p.canonicalize().ok())
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let from_env = std::env::var("FLM_CONFIG_PATH")
            .ok()
            .filter(|p| !p.is_empty() && Path::new(p).exists());
        let path = match from_env {
            Some(p) => {
                eprintln!("[FLM]  Using custom model list path: {p}");
                PathBuf::from(p)
            }
            None if exe_dir.join("model_list.json").exists() => exe_dir.join("model_list.json"),
            None => {
                return Err("model_list.json not found. Please set FLM_CONFIG_PATH or place it next to the executable.".into())
            }
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|_| format!("Failed to open config file: {}", path.display()))?;
        let json: Value = serde_json::from_str(&text).map_err(|e| {
            format!("terminate called after throwing an instance of 'nlohmann::json_abi::detail::parse_error': {e}")
        })?;
        let models_dir = match std::env::var("FLM_MODEL_PATH") {
            Ok(p) if !p.is_empty() => PathBuf::from(p),
            _ => PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".config/flm"),
        };
        let _ = std::fs::create_dir_all(&models_dir);
        let model_root = models_dir.join(json["model_path"].as_str().unwrap_or("models"));
        Ok(Catalog { json, model_root })
    }

    /// Every `(family, size, entry)`, in key order.
    fn entries(&self) -> Vec<(String, String, Value)> {
        let mut out = Vec::new();
        if let Some(families) = self.json["models"].as_object() {
            let families: BTreeMap<_, _> = families.iter().collect();
            for (family, sizes) in families {
                if let Some(sizes) = sizes.as_object() {
                    let sizes: BTreeMap<_, _> = sizes.iter().collect();
                    for (size, entry) in sizes {
                        out.push((family.clone(), size.clone(), entry.clone()));
                    }
                }
            }
        }
        out
    }

    /// Whether the CLI accepts `tag` (a family or `family:size` key, compared exactly).
    fn is_tag(&self, tag: &str) -> bool {
        self.entries()
            .iter()
            .any(|(f, s, _)| tag == f || tag == format!("{f}:{s}"))
    }

    /// FastFlowLM's `rectify_model_tag`: drop a `prefix/`, and give a bare family its first
    /// size in key order.
    fn rectify(&self, tag: &str) -> String {
        let tag = tag.split_once('/').map_or(tag, |(_, t)| t);
        if tag.contains(':') {
            return tag.to_string();
        }
        self.entries()
            .into_iter()
            .find(|(f, _, _)| f == tag)
            .map_or(tag.to_string(), |(f, s, _)| format!("{f}:{s}"))
    }

    fn entry(&self, tag: &str) -> Option<Value> {
        self.entries()
            .into_iter()
            .find(|(f, s, _)| format!("{f}:{s}") == tag)
            .map(|(_, _, e)| e)
    }

    fn folder(&self, entry: &Value) -> PathBuf {
        self.model_root
            .join(entry["name"].as_str().unwrap_or_default())
    }

    fn installed(&self, entry: &Value) -> bool {
        let folder = self.folder(entry);
        entry["files"].as_array().is_some_and(|files| {
            files
                .iter()
                .all(|f| folder.join(f.as_str().unwrap_or("")).is_file())
        })
    }
}

// ---------------------------------------------------------------- validate, list, pull

fn validate(as_json: bool, fault: Fault) -> i32 {
    let old_kernel = fault == Fault::ValidateOldKernel;
    let no_device = fault == Fault::ValidateNoDevice;
    let old_fw = fault == Fault::ValidateOldFirmware;
    let low_memlock = fault == Fault::ValidateMemlock;
    let mut v = json!({
        "object": "npu_stack_validation",
        "platform": "linux",
        "kernel": if old_kernel { "6.11.0-29-generic" } else { "7.0.0-rc2" },
        "kernel_ok": !old_kernel,
        "amd_device_found": true,
        "all_fw_ok": true,
        "enough_cols": true,
        "memlock_ok": true,
        "devices": [],
    });
    if !old_kernel {
        if no_device {
            v["amd_device_found"] = json!(false);
        } else {
            v["drm_version"] = json!("0.6");
            let (minor, patch) = if old_fw { (0, 5) } else { (1, 2) };
            v["devices"] = json!([{
                "cols": 8, "device": "/dev/accel/accel0", "fw_build": 64, "fw_major": 1,
                "fw_minor": minor, "fw_ok": !old_fw, "fw_patch": patch
            }]);
            v["all_fw_ok"] = json!(!old_fw);
        }
        v["memlock_limit"] = json!(if low_memlock { "8388608" } else { "infinity" });
        v["memlock_ok"] = json!(!low_memlock);
    }
    let ready = !(old_kernel || no_device || old_fw || low_memlock);
    v["ready"] = json!(ready);
    if as_json {
        println!("{}", dump4(&v));
    } else {
        println!("[Linux]  Kernel: {}", v["kernel"].as_str().unwrap_or(""));
        if no_device {
            eprintln!("\x1b[31m[ERROR]  No NPU device found.\x1b[0m");
        } else if !old_kernel {
            println!("\x1b[32m[Linux]  NPU: /dev/accel/accel0 with 8 columns\x1b[0m");
        }
    }
    if ready {
        0
    } else {
        1
    }
}

fn list(catalog: &Catalog, args: &Args) -> i32 {
    let filter = args.filter.as_deref().unwrap_or("all");
    if !matches!(filter, "all" | "installed" | "not-installed") {
        println!("[Error]  Invalid filter: please use 'all', 'installed', or 'not-installed'");
        return 1;
    }
    let mut models = Vec::new();
    for (family, size, entry) in catalog.entries() {
        let installed = catalog.installed(&entry);
        let keep = match filter {
            "installed" => installed,
            "not-installed" => !installed,
            _ => true,
        };
        if !keep {
            continue;
        }
        let tag = format!("{family}:{size}");
        let mut e = entry.clone();
        e["name"] = json!(tag);
        e["model"] = json!(tag);
        e["installed"] = json!(installed);
        models.push(e);
    }
    if args.json {
        println!("{}", dump4(&json!({ "models": models })));
    } else {
        println!("Models:");
        if models.is_empty() {
            println!("  No models found for the specified filter.");
        }
        for m in &models {
            let mark = if args.quiet {
                ""
            } else if m["installed"] == json!(true) {
                " ✅"
            } else {
                " ⏬"
            };
            println!("  - {}{mark}", m["name"].as_str().unwrap_or(""));
        }
    }
    0
}

fn pull(catalog: &Catalog, args: &Args) -> i32 {
    let tag = args.positional.get(1).map_or("", String::as_str);
    if !catalog.is_tag(tag) {
        model_not_found(tag);
        return 1;
    }
    let tag = catalog.rectify(tag);
    match catalog.entry(&tag) {
        Some(entry) if catalog.installed(&entry) && !args.force => {
            println!("[FLM]  Model is already downloaded.");
            println!("[FLM]  All required files are present.");
            0
        }
        _ => {
            println!("[ERROR]  Failed to pull model: {tag}");
            1
        }
    }
}

// ---------------------------------------------------------------- serve

/// The model on the "NPU": its tag, and the engine (None after a failed load: FastFlowLM's
/// `model-faker`).
struct Loaded {
    tag: String,
    model: Option<Model>,
}

struct Server {
    catalog: Catalog,
    ctx_len: Option<usize>,
    fault: Fault,
    q_len: usize,
    /// The NPU: one job at a time.
    npu: Mutex<Loaded>,
    /// Requests running or waiting for the NPU.
    waiting: AtomicUsize,
    /// Streamed answers so far (for `crash-mid-stream`).
    streams: AtomicUsize,
}

fn serve(catalog: Catalog, args: &Args, fault: Fault) -> i32 {
    let tag = args.positional.get(1).cloned();
    if let Some(t) = &tag {
        if !catalog.is_tag(t) {
            model_not_found(t);
            return 1;
        }
    }
    println!("\x1b[32m[Linux]  Memlock Limit: raised to 2560 MB\x1b[0m");
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
        catalog,
        ctx_len,
        fault,
        q_len: args.q_len.unwrap_or(10),
        npu: Mutex::new(Loaded {
            tag: "model-faker".into(),
            model: None,
        }),
        waiting: AtomicUsize::new(0),
        streams: AtomicUsize::new(0),
    });
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
            handle_connection(&server, stream);
        });
    }
    0
}

/// Loads the model of `tag` with the server's context length.
fn load(server: &Server, tag: &str) -> Result<Model, String> {
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

/// One HTTP request read from a connection.
struct Request {
    method: String,
    target: String,
    content_type: String,
    body: Vec<u8>,
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut length = 0usize;
    let mut content_type = String::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            break;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = v.trim().parse().unwrap_or(0),
                "content-type" => content_type = v.trim().to_ascii_lowercase(),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        target,
        content_type,
        body,
    })
}

/// Writes a whole response and closes the connection (FastFlowLM closes after each response,
/// although it does not say `Connection: close`).
fn respond(mut stream: &TcpStream, status: u16, body: &Value) {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nAccess-Control-Allow-Origin: *\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Both);
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn handle_connection(server: &Server, stream: TcpStream) {
    let Some(req) = read_request(&stream) else {
        return;
    };
    println!("==========================================================");
    println!("[⬇️ ]  Incoming Request: {}", req.method);
    println!("[LOG]  Target: {}", req.target);
    let route = format!("{} {}", req.method, req.target);
    match route.as_str() {
        "GET /api/version" | "GET /v1/version" => {
            respond(&stream, 200, &json!({"version": version()}))
        }
        "GET /api/tags" => {
            let models: Vec<Value> = server
                .catalog
                .entries()
                .into_iter()
                .map(|(f, s, e)| {
                    json!({"name": format!("{f}:{s}"), "model": format!("{f}:{s}"), "details": {
                        "family": e["details"]["family"], "parameter_size": e["details"]["parameter_size"],
                        "quantization_level": e["details"]["quantization_level"]}})
                })
                .collect();
            respond(&stream, 200, &json!({ "models": models }))
        }
        "GET /v1/models" => {
            let now = unix_secs();
            let data: Vec<Value> = server
                .catalog
                .entries()
                .into_iter()
                .map(|(f, s, _)| json!({"id": format!("{f}:{s}"), "object": "model", "created": now, "owned_by": "FastFlowLM"}))
                .collect();
            respond(&stream, 200, &json!({"object": "list", "data": data}))
        }
        "GET /api/ps" => {
            let npu = server.npu.lock().unwrap_or_else(|e| e.into_inner());
            let entry = server.catalog.entry(&npu.tag).unwrap_or(Value::Null);
            respond(
                &stream,
                200,
                &json!({"models": [{"name": npu.tag, "model": npu.tag, "size": entry["size"],
                    "details": entry["details"], "expires_at": "2099-01-01T00:00:00.000000000+00:00"}]}),
            )
        }
        "GET /api/npu/status" => {
            let busy = server.waiting.load(Ordering::SeqCst) > 0;
            respond(
                &stream,
                200,
                &json!({"npu_available": !busy, "active_requests": server.waiting.load(Ordering::SeqCst),
                        "message": if busy { "NPU is currently in use" } else { "NPU is available" }}),
            )
        }
        "POST /v1/chat/completions" => {
            let body: Value = match serde_json::from_slice(&req.body) {
                Ok(v) => v,
                Err(_) if req.content_type.contains("application/json") => {
                    return respond(&stream, 400, &json!({"error": "Invalid JSON"}))
                }
                Err(_) => Value::Null,
            };
            chat_completions(server, &stream, &body);
        }
        _ => respond(&stream, 404, &json!({"error": "Not Found"})),
    }
}

/// Releases a place in the NPU queue when dropped.
struct QueuePlace<'a>(&'a AtomicUsize);

impl Drop for QueuePlace<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Holds the NPU for 333 ms after a job when others wait, as FastFlowLM's queue does.
struct Cooldown<'a>(&'a AtomicUsize);

impl Drop for Cooldown<'_> {
    fn drop(&mut self) {
        if self.0.load(Ordering::SeqCst) > 1 {
            std::thread::sleep(Duration::from_millis(333));
        }
    }
}

fn sampling(body: &Value) -> Result<ChatOptions, String> {
    let mut options = ChatOptions {
        sampling: SamplingParams::default(),
        ..ChatOptions::default()
    };
    let float = |key: &str| -> Result<Option<f32>, String> {
        match body.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64().map(|f| f as f32)),
            Some(other) => Err(format!(
                "[json.exception.type_error.302] type must be number, but is {}",
                type_name(other)
            )),
        }
    };
    if let Some(t) = float("temperature")? {
        options.sampling.temperature = t;
    }
    if let Some(p) = float("top_p")? {
        options.sampling.top_p = p;
    }
    if let Some(r) = float("repetition_penalty")? {
        options.sampling.repetition_penalty = r;
    }
    if let Some(k) = float("top_k")? {
        options.sampling.top_k = k.max(0.0) as usize;
    }
    // FastFlowLM reads min_p into an int: anything below 1 becomes 0.
    if let Some(m) = float("min_p")? {
        options.sampling.min_p = m.trunc();
    }
    let max = match (body.get("max_tokens"), body.get("max_completion_tokens")) {
        (Some(v), _) | (None, Some(v)) => v.as_i64().ok_or_else(|| {
            format!(
                "[json.exception.type_error.302] type must be number, but is {}",
                type_name(v)
            )
        })?,
        (None, None) => 4096,
    };
    options.max_tokens = if max <= 0 { usize::MAX } else { max as usize };
    Ok(options)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn messages(body: &Value) -> Result<Vec<ChatMessage>, String> {
    let list = body["messages"]
        .as_array()
        .ok_or("[json.exception.type_error.302] type must be array, but is null")?;
    let mut out: Vec<ChatMessage> = Vec::new();
    for m in list {
        let role = match m["role"].as_str() {
            Some("system") => Role::System,
            Some("assistant") => Role::Assistant,
            _ => Role::User,
        };
        let content = match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        };
        // Consecutive user or system messages are merged, as FastFlowLM does.
        match out.last_mut() {
            Some(last) if last.role == role && role != Role::Assistant => {
                last.content.push('\n');
                last.content.push_str(&content);
            }
            _ => out.push(ChatMessage::new(role, content)),
        }
    }
    Ok(out)
}

fn chat_completions(server: &Server, stream: &TcpStream, body: &Value) {
    let queued = server.waiting.fetch_add(1, Ordering::SeqCst);
    let _place = QueuePlace(&server.waiting);
    if queued > server.q_len {
        return respond(
            stream,
            503,
            &json!({"error": format!("NPU is in use and request queue is full (limit: {}). Please try again later.", server.q_len)}),
        );
    }
    let mut npu = server.npu.lock().unwrap_or_else(|e| e.into_inner());
    // Declared after the lock: dropped before it, so the lock is held through the cooldown.
    let _cooldown = Cooldown(&server.waiting);
    let started = Instant::now();
    // Which model: the request's tag if known, else FastFlowLM's silent fallback.
    let asked = body["model"].as_str().map(str::to_string);
    let mut tag = match &asked {
        None => npu.tag.clone(),
        Some(a) => {
            let t = server.catalog.rectify(a);
            if server.catalog.entry(&t).is_some() {
                t
            } else {
                eprintln!("\x1b[31m[ERROR]  Model tag '{a}' is not supported; using default model: {FALLBACK_TAG}\x1b[0m");
                FALLBACK_TAG.to_string()
            }
        }
    };
    if tag != npu.tag && server.catalog.entry(&tag).is_some() {
        std::thread::sleep(Duration::from_millis(50));
        npu.model = None;
        match load(server, &tag) {
            Ok(m) => {
                npu.model = Some(m);
                npu.tag = tag.clone();
            }
            Err(what) => {
                eprintln!("[ERROR]  Failed to load model: {what}");
                npu.tag = "model-faker".into();
                return respond(
                    stream,
                    200,
                    &json!({"error": format!("Failed to load {tag} model!")}),
                );
            }
        }
    }
    let load_secs = started.elapsed().as_secs_f64();
    if server.fault == Fault::WrongModel {
        tag = FALLBACK_TAG.to_string();
    }
    let Some(model) = npu.model.as_mut() else {
        return respond(
            stream,
            200,
            &json!({"error": format!("Failed to load {tag} model!")}),
        );
    };
    if server.fault == Fault::EngineError {
        return respond(
            stream,
            200,
            &json!({"error": "runlist failed execution (ERT_CMD_STATE_TIMEOUT)"}),
        );
    }
    let (msgs, mut options) = match messages(body).and_then(|m| Ok((m, sampling(body)?))) {
        Ok(x) => x,
        Err(e) => return respond(stream, 200, &json!({ "error": e })),
    };
    let context = model.info().context_length;
    let prompt = match model.tokenize_chat(&msgs, &options) {
        Ok(p) => p,
        Err(e) => return respond(stream, 200, &json!({"error": e.to_string()})),
    };
    if prompt.len() >= context {
        return respond(
            stream,
            400,
            &json!({"error": {"message": "Max length reached!", "type": "model_error", "code": 400}}),
        );
    }
    options.max_tokens = options.max_tokens.min(context - prompt.len());
    let id = format!(
        "chatcmpl-{:024x}",
        started.elapsed().as_nanos() ^ unix_secs() as u128
    );
    let created = unix_secs();
    let streaming = body["stream"].as_bool().unwrap_or(false);
    let crash = server.fault == Fault::CrashMidStream
        && streaming
        && server.streams.fetch_add(1, Ordering::SeqCst) == 0;
    let mut writer = stream;
    if streaming {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nAccess-Control-Allow-Origin: *\r\n\r\n";
        if writer.write_all(head.as_bytes()).is_err() {
            return;
        }
    }
    let mut text = String::new();
    let mut chunks = 0usize;
    let mut client_gone = false;
    let result = model.generate_text(&prompt, &options, &mut |piece: &str| {
        text.push_str(piece);
        if !streaming {
            return ControlFlow::Continue(());
        }
        let chunk = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": tag,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": piece}, "finish_reason": null}]});
        if send_event(&mut writer, &chunk.to_string()).is_err() {
            client_gone = true;
            return ControlFlow::Break(());
        }
        chunks += 1;
        if crash && chunks == 3 {
            eprintln!("[imitation]  crashing mid-stream as asked (FLM_IMITATION_FAULT=crash-mid-stream)");
            std::process::exit(139);
        }
        ControlFlow::Continue(())
    });
    println!("[FLM]  Model RAW Output:");
    println!("{text}");
    let stats = match result {
        Ok(s) => s,
        Err(e) if !streaming => return respond(stream, 200, &json!({"error": e.to_string()})),
        Err(_) => {
            // An error after streaming began: FastFlowLM sends no final chunk.
            let _ = writer.shutdown(Shutdown::Both);
            return;
        }
    };
    let finish = if client_gone {
        "cancel"
    } else if stats.stop_reason == hearth_engine::StopReason::MaxTokens {
        "length"
    } else {
        "stop"
    };
    let rate = |n: usize, secs: f64| {
        if secs > 0.0 {
            json!(n as f64 / secs)
        } else {
            Value::Null
        }
    };
    let decode_rate = stats
        .decode_tokens_per_sec()
        .map_or(Value::Null, |r| json!(r));
    let mut usage = json!({
        "prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.generated_tokens,
        "total_tokens": stats.prompt_tokens + stats.generated_tokens,
        "kv_token_occupancy_rate_percentage": 100.0 * (stats.prompt_tokens + stats.generated_tokens) as f64 / context as f64,
        "load_duration": load_secs, "prefill_duration_ttft": stats.prefill_secs,
        "decoding_duration": stats.decode_secs,
        "prefill_speed_tps": rate(stats.prompt_tokens, stats.prefill_secs),
        "decoding_speed_tps": decode_rate,
    });
    if streaming {
        usage["active_kv_tokens"] = json!(stats.prompt_tokens + stats.generated_tokens);
        usage["max_kv_token_capacity"] = json!(context);
        let last = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": tag,
            "system_fingerprint": "fp_0123456789abcdef",
            "choices": [{"index": 0, "delta": {"content": null}, "finish_reason": finish}],
            "usage": usage});
        let _ = send_event(&mut writer, &last.to_string());
        let _ = send_event(&mut writer, "[DONE]");
        let _ = writer.write_all(b"0\r\n\r\n");
        let _ = writer.flush();
        let _ = writer.shutdown(Shutdown::Both);
    } else {
        respond(
            stream,
            200,
            &json!({"id": "fastflowlm-chat-completion", "object": "chat.completion", "created": created,
                "model": tag, "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                "logprobs": null, "finish_reason": "stop"}], "usage": usage, "service_tier": "default"}),
        );
    }
}

/// One SSE event as one HTTP chunk: `data: <payload>\n\n`.
fn send_event(writer: &mut &TcpStream, payload: &str) -> std::io::Result<()> {
    let event = format!("data: {payload}\n\n");
    write!(writer, "{:x}\r\n{event}\r\n", event.len())?;
    writer.flush()
}
