//! `hearth bench` end to end on the tiny random shape: the figures its JSON promises (the
//! comparison script and README read them). Speed itself is never asserted.

use std::path::Path;
use std::process::Command;

/// `hearth bench --json ARGS` with a small bandwidth probe, its XDG folders under `home`: the
/// JSON it printed.
fn bench(home: &Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .arg("bench")
        .args(["--json", "--probe-mib", "8"])
        .args(args)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .output()
        .expect("hearth runs");
    assert!(
        out.status.success(),
        "hearth bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn bench_json_reports_speed_bandwidth_and_memory() {
    let home = tempfile::tempdir().unwrap();
    let json = bench(
        home.path(),
        &[
            "--shape",
            "tiny",
            "--threads",
            "1",
            "--prompt",
            "8",
            "--generate",
            "4",
            "--repetitions",
            "1",
        ],
    );
    for key in [
        "decode_tokens_per_s",
        "prefill_tokens_per_s",
        "weight_bytes_per_token",
        "measured_read_bandwidth_gbps",
        "roofline_fraction",
        "peak_memory_bytes",
        "first_token_secs",
        "page_cache_read_secs",
    ] {
        let value = json[key].as_f64();
        assert!(
            value.is_some_and(|v| v > 0.0),
            "{key} is a positive number: {json}"
        );
    }
    assert_eq!(json["threads"], 1);
    assert_eq!(json["prompt_tokens"], 8);
    assert_eq!(json["repetitions"], 1);
    assert_eq!(json["bandwidth_samples_gbps"].as_array().unwrap().len(), 10);
    assert!(json["kernel_level"].is_string());
    // "register" or "memory" where attention's AVX-512 f32 kernels run, else null.
    let avx512 = json["kernel_level"].as_str().unwrap().starts_with("avx512");
    let broadcast = &json["attention_broadcast"];
    match avx512 && json["attention_products"] == "f32" {
        true => assert!(broadcast == "register" || broadcast == "memory", "{json}"),
        false => assert!(broadcast.is_null(), "{json}"),
    }
    assert!(
        home.path().join("cache/hearth/bench/tiny").is_dir(),
        "the random model is cached under XDG_CACHE_HOME"
    );
}

/// `--repeat-task` on the bundled demo model, sampled: both tasks run off, on and by default,
/// and every answer is the plain one token for token (the bench reports it; speed is not
/// asserted).
#[test]
fn repeat_task_answers_are_the_plain_answers_when_sampled() {
    let home = tempfile::tempdir().unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo");
    let json = bench(
        home.path(),
        &[
            "--model",
            demo.to_str().unwrap(),
            "--threads",
            "1",
            "--prompt",
            "8",
            "--generate",
            "24",
            "--repetitions",
            "2",
            "--repeat-task",
            "--task-temperature",
            "0.7",
        ],
    );
    let tasks = json["tasks"].as_array().unwrap();
    let names: Vec<_> = tasks.iter().map(|t| t["task"].as_str().unwrap()).collect();
    assert_eq!(names, ["repeat", "free"]);
    for task in tasks {
        assert_eq!(task["same_tokens"], true, "{task}");
        for key in ["plain_samples", "speculative_samples", "default_samples"] {
            assert_eq!(task[key].as_array().map(Vec::len), Some(2), "{key}: {task}");
        }
    }
    let temperature = json["task_temperature"].as_f64().unwrap();
    assert!((temperature - 0.7).abs() < 1e-6, "{temperature}");
}

/// `--switch`: coming back to a conversation reads its new message and the answer's last token
/// with the KV store, the whole prompt without it.
#[test]
fn switch_reads_only_the_new_message_with_the_kv_store() {
    let home = tempfile::tempdir().unwrap();
    let json = bench(
        home.path(),
        &[
            "--shape",
            "tiny",
            "--threads",
            "1",
            "--prompt",
            "40",
            "--repetitions",
            "2",
            "--switch",
        ],
    );
    let prompt = json["read_whole"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!(
        prompt,
        40 + 16 + 16,
        "A, its answer, the new message: {json}"
    );
    assert_eq!(json["kept"]["tokens_read"], serde_json::json!([17, 17]));
    assert_eq!(
        json["read_whole"]["tokens_read"],
        serde_json::json!([prompt, prompt])
    );
    assert!(json["kv_store_budget_bytes"].as_u64().unwrap() > 0);
}
