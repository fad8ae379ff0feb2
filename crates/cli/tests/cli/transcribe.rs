//! `hearth transcribe` end to end on the committed tiny Whisper (random weights: what it writes is
//! not words, so the test checks the shape of the run, not the text): a WAV becomes a transcript
//! with its segments under `--json`, progress goes to stderr, and a missing model or a file that
//! is not sound is a plain error with a failing exit code. On a ready NPU (the strix-ready
//! fixture tree) with FastFlowLM (the imitation, as the FastFlow SDK lays it out: its
//! model_list.json beside `flm`, Whisper pulled into `~/.config/flm/models`), FastFlowLM's
//! Whisper hears it and the output says "npu"; `--backend cpu` chooses the processor, and a
//! Whisper FastFlowLM has not downloaded is an error for `--backend npu` and a fallback to the
//! processor for `auto`.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn tiny_whisper() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/whisper/tiny")
}

/// A 16-bit mono WAV of `seconds` of a 440 Hz tone at `rate`.
fn wav(path: &Path, rate: u32, seconds: f32) {
    let samples: Vec<i16> = (0..(rate as f32 * seconds) as usize)
        .map(|i| {
            let t = i as f32 / rate as f32;
            ((t * 440.0 * std::f32::consts::TAU).sin() * 8000.0) as i16
        })
        .collect();
    let data = samples.len() as u32 * 2;
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"RIFF");
    bytes.extend_from_slice(&(36 + data).to_le_bytes());
    bytes.extend_from_slice(b"WAVEfmt ");
    bytes.extend_from_slice(&16u32.to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes()); // PCM
    bytes.extend_from_slice(&1u16.to_le_bytes()); // mono
    bytes.extend_from_slice(&rate.to_le_bytes());
    bytes.extend_from_slice(&(rate * 2).to_le_bytes());
    bytes.extend_from_slice(&2u16.to_le_bytes());
    bytes.extend_from_slice(&16u16.to_le_bytes());
    bytes.extend_from_slice(b"data");
    bytes.extend_from_slice(&data.to_le_bytes());
    for s in samples {
        bytes.extend_from_slice(&s.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_wav_becomes_a_transcript_with_segments_and_progress() {
    let home = tempfile::tempdir().unwrap();
    let audio = home.path().join("tone.wav");
    wav(&audio, 22_050, 2.0);
    let output = common::hearth(home.path())
        .args(["transcribe", "--json", "--language", "en", "--model"])
        .arg(tiny_whisper())
        .arg(&audio)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "hearth transcribe failed: {stderr}"
    );
    assert!(
        stderr.contains("transcribed"),
        "progress on stderr: {stderr}"
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["language"], "en", "{json}");
    assert!(
        json["text"].is_string() && json["segments"].is_array(),
        "{json}"
    );
    let duration = json["duration"].as_f64().or(json["duration_s"].as_f64());
    assert!(
        duration.is_some_and(|d| (d - 2.0).abs() < 0.05),
        "2 s resampled to 16 kHz: {json}"
    );
}

#[test]
fn a_file_that_is_not_sound_or_a_missing_model_is_a_plain_error() {
    let home = tempfile::tempdir().unwrap();
    let text = home.path().join("notes.wav");
    std::fs::write(&text, "these are notes, not sound").unwrap();
    let output = common::hearth(home.path())
        .args(["transcribe", "--model"])
        .arg(tiny_whisper())
        .arg(&text)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("notes.wav"), "names the file: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let audio = home.path().join("tone.wav");
    wav(&audio, 16_000, 1.0);
    let output = common::hearth(home.path())
        .arg("transcribe")
        .arg(&audio)
        .output()
        .unwrap();
    assert!(!output.status.success(), "no speech model in a fresh home");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("speech model"),
        "says what is missing: {stderr}"
    );
}

/// FastFlowLM 1.0.14 as the imitation, laid out as the FastFlow SDK installs it in `home`, with
/// its Whisper downloaded; None (and the test skipped) when the imitation is not built.
fn install_fastflowlm(home: &Path) -> Option<PathBuf> {
    let imitation = Path::new(env!("CARGO_BIN_EXE_hearth")).with_file_name("flm");
    if !imitation.is_file() {
        eprintln!(
            "SKIPPED: the FastFlowLM imitation is not built ({}); `cargo build -p flm-imitation` builds it",
            imitation.display()
        );
        return None;
    }
    let bin = home.join("venv/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let own = serde_json::json!({
        "model_path": "models",
        "models": { "whisper-v3": { "turbo": {
            "name": "Whisper-V3-Turbo-NPU2", "url": "", "size": 1000000000,
            "flm_min_version": "0.9.14", "asr": true,
            "files": ["config.json", "tokenizer.json", "tokenizer_config.json", "model.q4nx"],
            "default_context_length": 448,
            "details": { "family": "whisper-v3", "think": false, "parameter_size": "1B",
                         "quantization_level": "Q4_1" }
        } } }
    });
    std::fs::write(bin.join("model_list.json"), own.to_string()).unwrap();
    // The real flm reads the model list beside its own binary when FLM_CONFIG_PATH names none;
    // the imitation's binary lives elsewhere, so its wrapper says where.
    let flm = bin.join("flm");
    std::fs::write(
        &flm,
        format!(
            "#!/bin/sh\nexport FLM_IMITATION_VERSION=1.0.14\n[ -f \"$FLM_CONFIG_PATH\" ] || export FLM_CONFIG_PATH='{}'\nexec '{}' \"$@\"\n",
            bin.join("model_list.json").display(),
            imitation.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&flm, std::fs::Permissions::from_mode(0o755)).unwrap();
    let whisper = home.join(".config/flm/models/Whisper-V3-Turbo-NPU2");
    std::fs::create_dir_all(&whisper).unwrap();
    for file in [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "model.q4nx",
    ] {
        std::fs::write(whisper.join(file), "{}").unwrap();
    }
    Some(flm)
}

/// `hearth` on a ready NPU with the FastFlowLM `flm`.
fn on_npu(home: &Path, flm: &Path) -> std::process::Command {
    let mut command = common::hearth(home);
    command
        .env(
            "HEARTH_NPU_ROOT",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/npu/strix-ready"),
        )
        .env("HEARTH_FLM", flm)
        .env("PATH", "/usr/bin:/bin")
        .env_remove("FLM_MODEL_PATH");
    command
}

#[test]
fn on_a_ready_npu_fastflowlm_hears_it_and_the_output_says_so() {
    let home = tempfile::tempdir().unwrap();
    let Some(flm) = install_fastflowlm(home.path()) else {
        return;
    };
    let audio = home.path().join("tone.wav");
    wav(&audio, 22_050, 2.0);
    let output = on_npu(home.path(), &flm)
        .args(["transcribe", "--json"])
        .arg(&audio)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["backend"], "npu", "{json} {stderr}");
    assert_eq!(json["model"], "whisper-v3:turbo", "{json}");
    // The imitation describes what arrived: 2 s resampled to 16 kHz, whole.
    assert!(
        json["text"]
            .as_str()
            .unwrap()
            .starts_with("heard 2.000 seconds of 16000 Hz audio in 1 channel(s), 64000 bytes"),
        "{json}"
    );
    assert!(stderr.contains("on the npu"), "{stderr}");
    // A speech-only FastFlowLM: started with --asr 1 and no chat model.
    let log = std::fs::read_to_string(home.path().join("state/hearth/fastflowlm.log")).unwrap();
    assert!(
        log.contains(" serve  --ctx-len 512") && log.contains("--asr 1"),
        "{log}"
    );

    // --backend cpu: the processor's Whisper.
    let output = on_npu(home.path(), &flm)
        .args([
            "transcribe",
            "--json",
            "--backend",
            "cpu",
            "--language",
            "en",
            "--model",
        ])
        .arg(tiny_whisper())
        .arg(&audio)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["backend"], "cpu", "{json}");
}

#[test]
fn a_whisper_fastflowlm_lacks_fails_npu_and_falls_back_on_auto() {
    let home = tempfile::tempdir().unwrap();
    let Some(flm) = install_fastflowlm(home.path()) else {
        return;
    };
    std::fs::remove_file(
        home.path()
            .join(".config/flm/models/Whisper-V3-Turbo-NPU2/model.q4nx"),
    )
    .unwrap();
    let audio = home.path().join("tone.wav");
    wav(&audio, 16_000, 1.0);
    let output = on_npu(home.path(), &flm)
        .args(["transcribe", "--backend", "npu"])
        .arg(&audio)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("flm pull whisper-v3:turbo"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let output = on_npu(home.path(), &flm)
        .args(["transcribe", "--json", "--language", "en", "--model"])
        .arg(tiny_whisper())
        .arg(&audio)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["backend"], "cpu", "{json}");
    assert!(stderr.contains("the NPU could not hear it"), "{stderr}");
    let output = on_npu(home.path(), &flm)
        .args(["transcribe", "--backend", "gpu"])
        .arg(&audio)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("auto, npu or cpu"));
}

/// POSTs `wav` to `/v1/audio/transcriptions` of `served` as a multipart form; the raw answer.
fn post_transcription(served: &common::Served, wav: &[u8], format: &str) -> String {
    use std::io::{Read, Write};
    let boundary = "hearth-test-boundary-91";
    let mut body = Vec::new();
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"response_format\"\r\n\r\n{format}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"tone.wav\"\r\nContent-Type: audio/wav\r\n\r\n").as_bytes(),
    );
    body.extend_from_slice(wav);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let mut stream = std::net::TcpStream::connect(served.address()).unwrap();
    write!(
        stream,
        "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: {}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        served.address(),
        body.len()
    )
    .unwrap();
    stream.write_all(&body).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn the_server_hears_on_the_npu_and_says_so_in_a_header_and_a_field() {
    let home = tempfile::tempdir().unwrap();
    let Some(flm) = install_fastflowlm(home.path()) else {
        return;
    };
    let audio = home.path().join("tone.wav");
    wav(&audio, 16_000, 1.0);
    let bytes = std::fs::read(&audio).unwrap();
    let mut command = on_npu(home.path(), &flm);
    command.args(["serve", "--port", "0"]);
    let served = common::serve(command);
    let answer = post_transcription(&served, &bytes, "json");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("x-hearth-backend: npu"),
        "{answer}"
    );
    let body = &answer[answer.find("\r\n\r\n").unwrap() + 4..];
    let json: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(json["backend"], "npu", "{json}");
    assert!(
        json["text"]
            .as_str()
            .unwrap()
            .starts_with("heard 1.000 seconds of 16000 Hz audio"),
        "{json}"
    );
}
