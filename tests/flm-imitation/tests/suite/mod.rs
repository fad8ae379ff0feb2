//! Hearth's NPU backend (`hearth_backends::npu`) against the FastFlowLM imitation built by this
//! package (`flm`), which answers with Hearth's CPU engine on the demo model. The suite runs
//! once per FastFlowLM release imitated: `npu_flm.rs` as 1.0.6, `npu_flm_0_9.rs` as 0.9.45
//! ([`super::FLM_VERSION`]).
//!
//! Each test gets its own folder: Hearth's registry and model folder (a link to `models/demo`),
//! a wrapper script `flm` that sets the imitation's fault and runs it (FastFlowLM's portable
//! install is such a wrapper too), and `xclbins/Demo-NPU2/` next to it, where FastFlowLM looks
//! for kernels.

use std::io::{BufRead, BufReader, Read};
use std::ops::ControlFlow;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_backends::npu::discover::{self, FlmProgram, Lookup};
use hearth_backends::npu::registry::FlmRegistry;
use hearth_backends::npu::{NpuBackend, NpuEvent, NpuOptions};
use hearth_backends::{selftest, CpuBackend};
use hearth_chat::answer::{answer, AnswerError, AnswerEvent, AnswerRequest, AnswerStop};
use hearth_chat::{BackendError, FailureKind, Input};
use hearth_engine::{ChatMessage, LoadOptions, Role};

const TAG: &str = "demo:5m";
const NAME: &str = "Demo-NPU2";

struct Fixture {
    dir: tempfile::TempDir,
    flm: PathBuf,
    registry: PathBuf,
    state: PathBuf,
}

fn demo_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo")
}

fn registry_json(models: &Path, family: &str) -> String {
    serde_json::json!({
        "model_path": models,
        "models": { "demo": { "5m": {
            "name": NAME,
            "url": "",
            "size": 5050000,
            "flm_min_version": "1.0.0",
            "files": ["config.json", "model.q4nx", "tokenizer.json", "tokenizer_config.json"],
            "default_context_length": 2048,
            "details": { "family": family, "think": false, "parameter_size": "5M",
                         "quantization_level": "Q4_1" },
            "footprint": 0.01
        } } }
    })
    .to_string()
}

/// A fixture whose `flm` runs the imitation with `fault` and extra environment.
fn fixture_with(fault: &str, env: &[(&str, &str)]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data/hearth");
    let models = data.join("models");
    std::fs::create_dir_all(&models).unwrap();
    std::os::unix::fs::symlink(demo_model().canonicalize().unwrap(), models.join(NAME)).unwrap();
    let registry = data.join("model_list.json");
    std::fs::write(&registry, registry_json(&models, "llama3")).unwrap();
    let bin = dir.path().join("flm-install");
    std::fs::create_dir_all(bin.join("xclbins").join(NAME)).unwrap();
    let flm = bin.join("flm");
    // The install's own catalog (FastFlowLM ships one): only what Hearth passes in
    // FLM_CONFIG_PATH has the demo model.
    let stock = bin.join("model_list.json");
    std::fs::write(
        &stock,
        registry_json(&models, "llama3")
            .replace("\"demo\"", "\"llama3.2\"")
            .replace("\"5m\"", "\"1b\""),
    )
    .unwrap();
    let mut script = format!(
        "#!/bin/sh\nexport FLM_IMITATION_FAULT='{fault}'\nexport FLM_IMITATION_VERSION='{}'\n: \"${{FLM_CONFIG_PATH:={}}}\"\nexport FLM_CONFIG_PATH\n",
        super::FLM_VERSION,
        stock.display()
    );
    for (k, v) in env {
        script.push_str(&format!("export {k}='{v}'\n"));
    }
    script.push_str(&format!("exec '{}' \"$@\"\n", env!("CARGO_BIN_EXE_flm")));
    std::fs::write(&flm, script).unwrap();
    std::fs::set_permissions(&flm, std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = dir.path().join("state");
    Fixture {
        dir,
        flm,
        registry,
        state,
    }
}

fn fixture(fault: &str) -> Fixture {
    fixture_with(fault, &[])
}

impl Fixture {
    fn program(&self) -> FlmProgram {
        discover::find(&Lookup {
            hearth_flm: Some(self.flm.clone()),
            path: None,
            standard: PathBuf::from("/nonexistent"),
            ..Lookup::default()
        })
        .unwrap()
    }

    fn options(&self) -> NpuOptions {
        NpuOptions {
            start_timeout: Duration::from_secs(60),
            idle_stop: None,
            read_timeout: Duration::from_secs(60),
            ..NpuOptions::new(&self.state)
        }
    }

    fn backend(&self) -> NpuBackend {
        self.backend_with(self.options())
    }

    fn backend_with(&self, options: NpuOptions) -> NpuBackend {
        NpuBackend::open(self.program(), &self.registry, TAG, options).unwrap()
    }

    /// Runs the imitation with `args` and nothing else set, returning (exit code, stdout,
    /// stderr).
    fn run_bare(&self, args: &[&str]) -> (i32, String, String) {
        let mut cmd = Command::new(&self.flm);
        cmd.args(args).env_remove("FLM_CONFIG_PATH");
        let out = output(&mut cmd);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs the imitation with `args` and the registry, returning (exit code, stdout, stderr).
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let mut cmd = Command::new(&self.flm);
        cmd.args(args)
            .env("FLM_CONFIG_PATH", &self.registry)
            .env("FLM_MODEL_PATH", self.registry.parent().unwrap());
        let out = output(&mut cmd);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// Tests that start FastFlowLM run one at a time: Hearth runs at most one per process, so a
/// second test's server would stop the first's.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static NPU: Mutex<()> = Mutex::new(());
    NPU.lock().unwrap_or_else(|e| e.into_inner())
}

fn chat(text: &str) -> Input {
    Input::Chat(vec![ChatMessage::new(Role::User, text)])
}

fn request(text: &str, max_tokens: usize) -> AnswerRequest<'static> {
    AnswerRequest {
        input: chat(text),
        options: selftest::greedy_options(max_tokens),
        stops: Vec::new(),
        power: None,
        trim_to_fit: true,
    }
}

fn failure_kind(e: &BackendError) -> Option<FailureKind> {
    match e {
        BackendError::Failed { kind, .. } => Some(*kind),
        _ => None,
    }
}

/// Whether process `pid` is gone (or a zombie waiting for its parent).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn wait_gone(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    gone(pid)
}

/// Live processes whose environment names this fixture's registry (the imitation's servers).
fn servers_of(f: &Fixture) -> Vec<u32> {
    let needle = format!("FLM_CONFIG_PATH={}", f.registry.display());
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) && !gone(pid) {
            pids.push(pid);
        }
    }
    pids
}

// ---------------------------------------------------------------- the imitation itself

#[test]
fn imitation_verbs_print_what_flm_prints() {
    let f = fixture("");
    assert_eq!(f.run(&["version"]).0, 0);
    let v = super::FLM_VERSION;
    assert_eq!(f.run(&["version"]).1, format!("FLM v{v}\n"));
    let (code, out, _) = f.run(&["version", "--json"]);
    assert_eq!((code, out), (0, format!("{{ \"version\": \"{v}\" }}\n")));
    let (code, out, _) = f.run(&["--version"]);
    assert_eq!((code, out), (1, format!("FLM v{v}\n")), "--version exits 1");
    let (code, out, _) = f.run(&["list", "--json", "--filter", "installed"]);
    assert_eq!(code, 0);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["models"][0]["name"], TAG, "name is the tag");
    assert_eq!(list["models"][0]["installed"], true);
    assert!(out.contains("\n    \"models\""), "four-space indent: {out}");
    let (code, out, _) = f.run(&["serve", "nope:1b"]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("[ERROR]  Model not found: nope:1b"),
        "{out}"
    );
    let bare = output(
        Command::new(&f.flm)
            .arg("list")
            .env("FLM_CONFIG_PATH", "/nonexistent/model_list.json"),
    );
    assert_eq!(bare.status.code(), Some(1), "no model_list.json: exit 1");
    assert!(String::from_utf8_lossy(&bare.stderr).contains("model_list.json not found"));
}

#[test]
fn a_taken_port_fails_like_flm() {
    let f = fixture("");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (code, _, err) = f.run(&["serve", TAG, "--port", &port]);
    assert_eq!(code, 1);
    assert!(err.contains("Error: bind: Address already in use"), "{err}");
}

#[test]
fn the_imitation_serves_exact_paths_and_falls_back_silently() {
    let _npu = serial();
    let f = fixture("");
    let mut backend = f.backend();
    backend.start().unwrap();
    let port = port_of(&backend);
    let tags = raw(port, "GET /api/tags HTTP/1.1\r\n\r\n");
    assert!(tags.starts_with("HTTP/1.1 200"), "{tags}");
    assert!(tags.contains(TAG));
    assert!(raw(port, "GET /api/tags?x=1 HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(raw(port, "GET /v1/models/ HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    let body = serde_json::json!({"model": "no-such-model", "stream": true, "max_tokens": 4,
        "temperature": 0.0, "messages": [{"role": "user", "content": "Hi"}]});
    let reply = post(port, &body);
    assert!(reply.contains("Transfer-Encoding: chunked"), "{reply}");
    let events: Vec<&str> = reply
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    let first: serde_json::Value = serde_json::from_str(events[0]).unwrap();
    assert_eq!(
        first["model"], "llama3.2:1b",
        "unknown names get llama3.2:1b"
    );
    let usage: serde_json::Value = serde_json::from_str(events[events.len() - 2]).unwrap();
    assert!(usage["usage"]["decoding_duration"].is_number(), "{usage}");
    assert_eq!(events.last(), Some(&"[DONE]"));
    assert!(reply.ends_with("0\r\n\r\n"), "the last chunk: {reply:?}");
    let null_temperature = serde_json::json!({"model": TAG, "stream": true, "temperature": null,
        "messages": [{"role": "user", "content": "Hi"}]});
    let reply = post(port, &null_temperature);
    assert!(
        reply.starts_with("HTTP/1.1 200"),
        "errors come as HTTP 200: {reply}"
    );
    assert!(reply.contains("\"error\""), "{reply}");
}

/// The port of `backend`'s running server, from the log's start-up line.
fn port_of(backend: &NpuBackend) -> u16 {
    let log = std::fs::read_to_string(backend.log_path()).unwrap();
    let line = log
        .lines()
        .rfind(|l| l.contains("WebServer started on port"))
        .expect("a start-up line")
        .to_string();
    line.split("port ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|p| p.parse().ok())
        .expect("a port number")
}

/// Sends `request` as it is and reads the reply to its end (the server closes the connection).
fn raw(port: u16, request: &str) -> String {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    reply
}

fn post(port: u16, body: &serde_json::Value) -> String {
    let body = body.to_string();
    raw(
        port,
        &format!(
            "POST /v1/chat/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

// ---------------------------------------------------------------- the prompt cache

/// A message, and an edit of it that FastFlowLM's checksum does not see: as JSON text
/// (`"Tell me about a red cat, ...`) the 8-byte words " red cat" and " big dog" are swapped,
/// and a sum of words does not see their order.
const CAT: &str = "Tell me about a red cat, not a  big dog.";
const CAT_EDITED: &str = "Tell me about a big dog, not a  red cat.";

fn greedy_answer(backend: &mut dyn hearth_chat::Backend, messages: &[ChatMessage]) -> String {
    let request = AnswerRequest {
        input: Input::Chat(messages.to_vec()),
        ..request("", 12)
    };
    answer(backend, request, &mut |_| ControlFlow::Continue(()))
        .unwrap()
        .text
}

/// The edited conversation: the first message edited, the answer kept, a new question.
fn edited(first_answer: &str) -> Vec<ChatMessage> {
    vec![
        ChatMessage::new(Role::User, CAT_EDITED),
        ChatMessage::new(Role::Assistant, first_answer),
        ChatMessage::new(Role::User, "Which animal?"),
    ]
}

fn completion(port: u16, messages: &[ChatMessage]) -> String {
    let messages: Vec<serde_json::Value> = messages
        .iter()
        .map(|m| serde_json::json!({"role": m.role.as_str(), "content": m.content}))
        .collect();
    let body = serde_json::json!({"model": TAG, "stream": false, "max_tokens": 12,
        "temperature": 0.0, "top_k": 1, "messages": messages});
    let reply = post(port, &body);
    let json = reply.split("\r\n\r\n").nth(1).expect("a body");
    let v: serde_json::Value = serde_json::from_str(json).expect("JSON");
    v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("an answer: {v}"))
        .to_string()
}

#[test]
fn the_imitation_reuses_its_cache_for_an_edit_its_checksum_misses() {
    let _npu = serial();
    let f = fixture("");
    let mut backend = f.backend();
    backend.start().unwrap();
    let port = port_of(&backend);
    let first = completion(port, &[ChatMessage::new(Role::User, CAT)]);
    let edited = edited(&first);
    completion(port, &edited);
    let log = std::fs::read_to_string(backend.log_path()).unwrap();
    assert!(
        log.contains("[FLM]  Use cached prompt!"),
        "the edit collides: {log}"
    );
    let read = log
        .lines()
        .rfind(|l| l.contains("the model reads"))
        .expect("what the model read");
    if super::FLM_VERSION.starts_with("1.") {
        assert!(read.contains(CAT), "1.0.x reads the old text: {read}");
    } else {
        assert!(
            read.contains(CAT_EDITED),
            "0.9.45's token check reads the edit: {read}"
        );
    }
}

#[test]
fn an_edited_conversation_is_answered_from_the_edit() {
    let _npu = serial();
    let f = fixture("");
    let mut backend = f.backend();
    let first = greedy_answer(&mut backend, &[ChatMessage::new(Role::User, CAT)]);
    let edited = edited(&first);
    let on_npu = greedy_answer(&mut backend, &edited);
    let log = std::fs::read_to_string(backend.log_path()).unwrap();
    assert!(
        !log.contains("Use cached prompt!"),
        "Hearth cleared the cache first: {log}"
    );
    let read = log
        .lines()
        .rfind(|l| l.contains("the model reads"))
        .expect("what the model read");
    assert!(read.contains(CAT_EDITED), "the edit is read: {read}");
    // A conversation that goes on is still taken from the cache.
    let mut next = edited.clone();
    next.push(ChatMessage::new(Role::Assistant, on_npu.clone()));
    next.push(ChatMessage::new(Role::User, "Thanks."));
    greedy_answer(&mut backend, &next);
    let log = std::fs::read_to_string(backend.log_path()).unwrap();
    assert_eq!(log.matches("Use cached prompt!").count(), 1, "{log}");
    drop(backend);
    let mut cpu = CpuBackend::open(&demo_model(), NAME, &LoadOptions::default(), None).unwrap();
    assert_eq!(on_npu, greedy_answer(&mut cpu, &edited));
}

// ---------------------------------------------------------------- discovery

#[test]
fn discovery_follows_hearth_flm_then_path() {
    let f = fixture("");
    let p = f.program();
    assert_eq!(p.version, super::FLM_VERSION);
    assert_eq!(p.path, f.flm);
    let on_path = discover::find(&Lookup {
        hearth_flm: None,
        path: Some(f.flm.parent().unwrap().as_os_str().to_owned()),
        standard: PathBuf::from("/nonexistent"),
        ..Lookup::default()
    })
    .unwrap();
    assert_eq!(on_path.path, f.flm);
}

#[test]
fn an_install_without_its_own_model_list_still_runs_hearths_models() {
    let _npu = serial();
    let f = fixture("");
    std::fs::remove_file(f.flm.with_file_name("model_list.json")).unwrap();
    let (code, _, err) = f.run_bare(&["version", "--json"]);
    assert_eq!(
        code, 1,
        "FastFlowLM needs a model list for every verb: {err}"
    );
    // The version comes from --version, validate and serve get Hearth's registry.
    let mut backend = f.backend();
    backend.start().unwrap();
    assert!(backend.server_pid().is_some());
}

#[test]
fn an_old_flm_is_refused_with_the_version_needed() {
    let f = fixture_with("", &[("FLM_IMITATION_VERSION", "0.9.44")]);
    let e = discover::find(&Lookup {
        hearth_flm: Some(f.flm.clone()),
        path: None,
        standard: PathBuf::from("/nonexistent"),
        ..Lookup::default()
    })
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("0.9.44") && text.contains(discover::MIN_VERSION),
        "{text}"
    );
}

#[test]
fn validate_failures_fold_into_the_npu_status_with_fixes() {
    // `validate_with`: other tests' servers may run in this process, beside which `validate`
    // starts no second FastFlowLM.
    let ok = discover::validate_with(&fixture("").program(), None).unwrap();
    assert!(ok.ready);
    for (fault, words) in [
        ("validate-no-device", "no NPU device"),
        ("validate-old-firmware", "1.0.5.64"),
        ("validate-memlock", "8388608"),
        ("validate-old-kernel", "6.17"),
    ] {
        let f = fixture(fault);
        let report = discover::validate_with(&f.program(), None).unwrap();
        assert!(!report.ready, "{fault}");
        assert_eq!(report.checks.len(), 1, "{fault}: {:?}", report.checks);
        assert!(
            report.checks[0].summary.contains(words),
            "{fault}: {:?}",
            report.checks
        );
        assert!(report.checks[0].fix.is_some());
        let empty = tempfile::tempdir().unwrap();
        let mut diagnosis = hearth_npu::diagnose(empty.path());
        let before = diagnosis.checks.len();
        discover::fold_validate(&mut diagnosis, &report);
        assert_eq!(diagnosis.checks.len(), before + 1);
        assert!(!diagnosis.ready);
    }
}

#[test]
fn npu_support_needs_an_engine_and_kernels() {
    let f = fixture("");
    let program = f.program();
    let file = FlmRegistry::read(&f.registry).unwrap();
    let (_, entry) = file.find(TAG).unwrap();
    let none = Path::new("/nonexistent");
    assert!(discover::npu_support_with(&program, entry, Some(none)).usable);
    let mut other = entry.clone();
    other.name = "Other-NPU2".into();
    let a = discover::npu_support_with(&program, &other, Some(none));
    assert!(!a.usable && a.reason.unwrap().contains("xclbins/Other-NPU2"));
    let mut llama = entry.clone();
    llama.details.family = "llama".into();
    let a = discover::npu_support_with(&program, &llama, Some(none));
    assert!(!a.usable && a.reason.unwrap().contains("\"llama\""));
}

#[test]
fn a_model_known_to_fail_runs_on_the_processor_unless_tried_anyway() {
    let _npu = serial();
    let f = fixture("");
    const PACK: &str = "MiniCPM5-2B-NPU2";
    let models = f.registry.parent().unwrap().join("models");
    std::os::unix::fs::symlink(demo_model().canonicalize().unwrap(), models.join(PACK)).unwrap();
    std::fs::create_dir_all(f.flm.with_file_name("xclbins").join(PACK)).unwrap();
    let registry = registry_json(&models, "llama3")
        .replace(NAME, PACK)
        .replace("\"demo\"", "\"minicpm5\"")
        .replace("\"5m\"", "\"2b\"");
    std::fs::write(&f.registry, registry).unwrap();
    let open = |anyway: bool| {
        NpuBackend::open(
            f.program(),
            &f.registry,
            "minicpm5:2b",
            NpuOptions {
                npu_anyway: anyway,
                ..f.options()
            },
        )
    };
    if super::FLM_VERSION.starts_with("1.") {
        let e = open(false).expect_err("refused");
        let text = e.to_string();
        assert!(
            text.contains("runs on the processor here") && text.contains("issue 712"),
            "{text}"
        );
    } else {
        assert!(open(false).is_ok(), "issue 712 was not reported on 0.9.45");
    }
    // A tester tries it anyway: the imitation runs it (real FastFlowLM fails at the first token).
    let mut backend = open(true).unwrap();
    let done = answer(&mut backend, request("Hi", 4), &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap();
    assert!(done.receipt.generated_tokens > 0);
}

// ---------------------------------------------------------------- answering

#[test]
fn answers_stream_with_receipts_and_match_the_cpu() {
    let _npu = serial();
    let f = fixture("");
    let mut backend = f.backend();
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    backend.set_event_sink(Box::new(move |e| seen.lock().unwrap().push(e.clone())));
    let mut streamed = String::new();
    let done = answer(&mut backend, request("What is a crate?", 24), &mut |e| {
        if let AnswerEvent::Text(t) = e {
            streamed.push_str(&t);
        }
        ControlFlow::Continue(())
    })
    .unwrap();
    assert!(!done.text.is_empty());
    assert_eq!(done.text, streamed);
    let r = &done.receipt;
    assert_eq!(r.runtime_version.as_deref(), Some(super::FLM_VERSION));
    assert_eq!(
        r.backend,
        format!("npu (FastFlowLM {})", super::FLM_VERSION)
    );
    let timings = r.backend_timings.clone().expect("FastFlowLM's timings");
    assert!(timings.decode_secs.is_some() && timings.prefill_secs.is_some());
    assert!(timings.load_secs.is_some());
    let events = events.lock().unwrap().clone();
    assert!(
        matches!(
            &events[..],
            [
                NpuEvent::Loading { ctx_len: 512, .. },
                NpuEvent::Ready { .. }
            ]
        ),
        "{events:?}"
    );
    assert_eq!(events[0].words(), "Loading demo:5m onto the NPU...");
    let log = backend.log_path();
    let mode = std::fs::metadata(&log).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // The same engine answers behind the imitation: greedy answers agree exactly.
    let mut cpu = CpuBackend::open(&demo_model(), NAME, &LoadOptions::default(), None).unwrap();
    let report = selftest::run(&mut backend, &mut cpu, &selftest::PROMPTS[..2], 16);
    assert_eq!(report.identical_count(), 2, "{report:#?}");
    assert!(report.prompts[0].agreeing_tokens.unwrap() > 0);
}

#[test]
fn stop_drops_the_stream_and_the_server_keeps_serving() {
    let _npu = serial();
    let f = fixture("");
    let mut backend = f.backend();
    let pieces = std::cell::Cell::new(0);
    let stopped = answer(
        &mut backend,
        request("Tell me about Rust.", 200),
        &mut |e| {
            if matches!(e, AnswerEvent::Text(_)) {
                pieces.set(pieces.get() + 1);
                if pieces.get() == 2 {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        },
    )
    .unwrap();
    assert_eq!(stopped.stop, AnswerStop::Cancelled);
    let pid = backend.server_pid().unwrap();
    let again = answer(&mut backend, request("What is a trait?", 8), &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap();
    assert!(!again.text.is_empty());
    assert_eq!(backend.server_pid(), Some(pid), "same server");
}

#[test]
fn a_failed_model_load_is_seen_in_the_log() {
    let _npu = serial();
    let f = fixture("load-fails");
    let mut backend = f.backend();
    let e = backend.start().unwrap_err();
    assert_eq!(failure_kind(&e), Some(FailureKind::NotReady));
    let text = e.to_string();
    assert!(text.contains("could not load demo:5m"), "{text}");
    assert!(text.contains("ERT_CMD_STATE_TIMEOUT"), "{text}");
    assert_eq!(backend.server_pid(), None);
    assert!(
        servers_of(&f).is_empty(),
        "the half-started server was stopped"
    );
}

#[test]
fn a_failing_validate_stops_the_start_with_its_fix() {
    let _npu = serial();
    let f = fixture("validate-memlock");
    let mut backend = f.backend();
    let e = backend.start().unwrap_err();
    assert_eq!(failure_kind(&e), Some(FailureKind::NotReady));
    let text = e.to_string();
    assert!(
        text.contains("8388608") && text.contains("To fix:"),
        "{text}"
    );
    assert_eq!(backend.server_pid(), None);
}

#[test]
fn an_exit_at_start_shows_its_last_lines() {
    let _npu = serial();
    let f = fixture("exit-at-start");
    let e = f.backend().start().unwrap_err();
    let text = e.to_string();
    assert!(text.contains("exit code 1"), "{text}");
    assert!(text.contains("No such device with index '0'"), "{text}");
}

#[test]
fn readiness_has_a_time_limit() {
    let _npu = serial();
    let f = fixture_with("slow-start", &[("FLM_IMITATION_DELAY_SECS", "30")]);
    let started = Instant::now();
    let e = f
        .backend_with(NpuOptions {
            start_timeout: Duration::from_secs(2),
            ..f.options()
        })
        .start()
        .unwrap_err();
    assert_eq!(failure_kind(&e), Some(FailureKind::Timeout), "{e}");
    assert!(started.elapsed() < Duration::from_secs(15));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !servers_of(&f).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(servers_of(&f).is_empty(), "the slow server was stopped");
}

#[test]
fn a_crash_mid_answer_keeps_the_text_and_restarts_once() {
    let _npu = serial();
    let f = fixture("crash-mid-stream");
    let mut backend = f.backend();
    let e = answer(
        &mut backend,
        request("Tell me about Rust.", 64),
        &mut |_| ControlFlow::Continue(()),
    )
    .unwrap_err();
    let AnswerError::Failed { text, error } = e else {
        panic!("expected a failure after the start: {e}");
    };
    assert!(!text.is_empty(), "the partial answer is kept");
    assert_eq!(failure_kind(&error), Some(FailureKind::Cut));
    let message = error.to_string();
    eprintln!("what the user reads:\n{message}");
    assert!(message.contains("exit code 139"), "{message}");
    assert!(
        message.contains("crashing mid-stream"),
        "its log lines: {message}"
    );
    assert!(message.contains("restarted it"), "{message}");
    let restarted = backend.server_pid().expect("restarted once");
    // The imitation crashes on the first answer of every process: the restarted one too.
    let e = answer(
        &mut backend,
        request("Tell me about Rust.", 64),
        &mut |_| ControlFlow::Continue(()),
    )
    .unwrap_err();
    assert!(e.to_string().contains("left it stopped"), "{e}");
    assert!(wait_gone(restarted, Duration::from_secs(5)));
    assert_eq!(backend.server_pid(), None);
    let e = answer(&mut backend, request("Hi", 4), &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap_err();
    assert_eq!(
        e.code(),
        "not_ready",
        "the caller falls back to the CPU: {e}"
    );
}

#[test]
fn an_answer_from_another_model_is_refused() {
    let _npu = serial();
    let f = fixture("wrong-model");
    let mut backend = f.backend();
    let e = answer(&mut backend, request("Hi", 8), &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap_err();
    eprintln!("what the user reads:\n{e}");
    assert_eq!(e.code(), "wrong_model", "{e}");
    assert!(e.to_string().contains("llama3.2:1b"), "{e}");
}

#[test]
fn an_error_body_is_reported() {
    let _npu = serial();
    let f = fixture("engine-error");
    let mut backend = f.backend();
    let e = answer(&mut backend, request("Hi", 8), &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap_err();
    assert_eq!(e.code(), "server", "{e}");
    assert!(e.to_string().contains("ERT_CMD_STATE_TIMEOUT"), "{e}");
}

#[test]
fn an_error_after_the_answer_began_keeps_the_text_so_far() {
    let _npu = serial();
    let f = fixture("error-mid-stream");
    let mut backend = f.backend();
    let e = answer(
        &mut backend,
        request("Tell me about Rust.", 64),
        &mut |_| ControlFlow::Continue(()),
    )
    .unwrap_err();
    let AnswerError::Failed { text, error } = e else {
        panic!("expected a failure after the start: {e}");
    };
    assert!(!text.is_empty(), "the partial answer is kept");
    let message = error.to_string();
    if super::FLM_VERSION.starts_with("1.") {
        assert!(
            message.contains("ERT_CMD_STATE_TIMEOUT"),
            "1.0.x says why in the stream: {message}"
        );
    } else {
        assert_eq!(
            failure_kind(&error),
            Some(FailureKind::Cut),
            "0.9.45 cuts the stream: {message}"
        );
    }
    assert!(backend.server_pid().is_some(), "FastFlowLM lives on");
}

#[test]
fn a_longer_conversation_restarts_with_a_larger_context() {
    let _npu = serial();
    let f = fixture("");
    let mut backend = f.backend();
    backend.start().unwrap();
    let first = backend.server_pid().unwrap();
    let long = "Rust is a language. ".repeat(200);
    answer(&mut backend, request(&long, 8), &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap();
    let second = backend.server_pid().unwrap();
    assert_ne!(first, second);
    assert!(wait_gone(first, Duration::from_secs(7)));
    let log = std::fs::read_to_string(backend.log_path()).unwrap();
    assert!(log.contains("--ctx-len 512"), "{log}");
    assert!(
        log.contains("--ctx-len 1024") || log.contains("--ctx-len 2048"),
        "{log}"
    );
}

// ---------------------------------------------------------------- lifecycle

#[test]
fn idle_and_drop_stop_the_server() {
    let _npu = serial();
    let f = fixture("");
    let mut backend = f.backend_with(NpuOptions {
        idle_stop: Some(Duration::from_millis(500)),
        ..f.options()
    });
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    backend.set_event_sink(Box::new(move |e| seen.lock().unwrap().push(e.clone())));
    backend.start().unwrap();
    let pid = backend.server_pid().unwrap();
    assert!(wait_gone(pid, Duration::from_secs(10)), "stopped when idle");
    assert_eq!(backend.server_pid(), None);
    let deadline = Instant::now() + Duration::from_secs(5);
    let stopped = || {
        events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, NpuEvent::Stopped { .. }))
    };
    while !stopped() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(stopped(), "the idle stop is reported");
    backend.start().unwrap();
    let pid = backend.server_pid().unwrap();
    drop(backend);
    assert!(gone(pid), "stopped when the backend is dropped");
}

#[test]
fn one_fastflowlm_at_a_time() {
    let _npu = serial();
    let f = fixture("");
    let mut first = f.backend();
    let mut second = f.backend();
    first.start().unwrap();
    let pid = first.server_pid().unwrap();
    second.start().unwrap();
    assert_eq!(first.server_pid(), None, "the first gave the NPU up");
    assert!(wait_gone(pid, Duration::from_secs(7)));
    let again = answer(&mut first, request("Hi", 4), &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap();
    assert!(!again.text.is_empty() || again.receipt.generated_tokens > 0);
    assert_eq!(second.server_pid(), None, "and took it back");
}

/// Not a test on its own: the helper process of `no_orphan_when_hearth_is_killed`, which runs
/// this test binary with `HEARTH_TEST_HOLD_FLM` set.
#[test]
fn helper_hold_a_server() {
    let Ok(dir) = std::env::var("HEARTH_TEST_HOLD_FLM") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let program = discover::find(&Lookup {
        hearth_flm: Some(dir.join("flm-install/flm")),
        path: None,
        standard: PathBuf::from("/nonexistent"),
        ..Lookup::default()
    })
    .unwrap();
    let mut backend = NpuBackend::open(
        program,
        &dir.join("data/hearth/model_list.json"),
        TAG,
        NpuOptions {
            idle_stop: None,
            ..NpuOptions::new(dir.join("state"))
        },
    )
    .unwrap();
    backend.start().unwrap();
    println!("FLM-PID {}", backend.server_pid().unwrap());
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn no_orphan_when_hearth_is_killed() {
    let f = fixture("");
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::helper_hold_a_server",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("HEARTH_TEST_HOLD_FLM", f.dir.path())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(f.dir.path().join("helper.err")).unwrap())
        .spawn()
        .unwrap();
    let stdout = helper.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(pid) = line.split("FLM-PID ").nth(1) {
                let _ = tx.send(pid.trim().parse::<u32>().unwrap());
            }
        }
    });
    let pid = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(pid) => pid,
        Err(_) => {
            let _ = helper.kill();
            let _ = helper.wait();
            let err = std::fs::read_to_string(f.dir.path().join("helper.err")).unwrap_or_default();
            panic!("the helper did not start a server: {err}");
        }
    };
    assert!(!gone(pid));
    // SIGKILL: no destructor runs in the helper.
    helper.kill().unwrap();
    helper.wait().unwrap();
    let gone_in_time = wait_gone(pid, Duration::from_secs(10));
    if !gone_in_time {
        // SAFETY: kill has no memory effects; the pid is the orphan this test just made.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
    assert!(gone_in_time, "FastFlowLM {pid} outlived its parent");
}

#[test]
fn the_log_is_drained_and_rotated_by_the_backend() {
    let _npu = serial();
    let f = fixture("");
    let mut backend = f.backend();
    backend.start().unwrap();
    let mut text = String::new();
    std::fs::File::open(backend.log_path())
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert!(text.contains("[FLM]  WebServer started on port"), "{text}");
    assert!(
        text.contains("[Linux]  Memlock Limit: raised to") && !text.contains('\x1b'),
        "colours are removed: {text}"
    );
}

/// Runs `cmd` to its end. A script a test has just written can be busy for a moment: another
/// test thread that forks while the script is open for writing holds it until its child has
/// exec'd, and exec of a file open for writing fails with ETXTBSY; that is retried.
fn output(cmd: &mut Command) -> std::process::Output {
    for _ in 0..200 {
        match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(Duration::from_millis(10));
            }
            result => return result.expect("the imitation runs"),
        }
    }
    panic!("{cmd:?} stayed busy (ETXTBSY) for 2 s");
}
