//! `hearth transcribe FILE`: the words spoken in a sound file (WAV, FLAC, MP3, Ogg Vorbis),
//! printed as text, or as JSON with timed segments; progress on stderr after each 30 s window.
//! The file is decoded, resampled and transcribed on this machine through the app's speech
//! door (`hearth_app::speech::hear`): on the NPU by FastFlowLM's Whisper when a usable NPU
//! with FastFlowLM is here (`--backend auto`, the default; the processor when it fails), else
//! by Hearth's own Whisper with the speech model found there when `--model` is not given.
//! Who heard it is said on stderr and in `--json`'s `backend` ("npu" or "cpu").

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;

use hearth_app::speech::{
    self, Heard, Limits, SpeechBackend, TranscribeOptions, TranscribeProgress,
};

use crate::terminal::safe;

/// Write down what is said in a sound file (WAV, FLAC, MP3, Ogg Vorbis), on this computer:
/// with FastFlowLM's Whisper on the NPU when a usable NPU with FastFlowLM is here, else with
/// Hearth's own Whisper on the processor.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The sound file.
    file: PathBuf,
    /// Who hears it: auto (the NPU when it is usable here, else the processor; the processor
    /// also when the NPU fails), npu (FastFlowLM's Whisper, or an error) or cpu.
    #[arg(long, value_name = "auto|npu|cpu", default_value = "auto", value_parser = parse_backend)]
    backend: SpeechBackend,
    /// The processor's speech model: a name in Hearth's speech models folder
    /// ($XDG_DATA_HOME/hearth/models/speech/NAME), or a Whisper model folder (faster-whisper's
    /// model.bin or transformers' model.safetensors). By default the first one installed.
    #[arg(long, value_name = "NAME|DIR")]
    model: Option<String>,
    /// The spoken language as a code ("en", "zh", "de", "fr", "es", ...); by default the model
    /// detects it from the first 30 seconds.
    #[arg(long, value_name = "CODE")]
    language: Option<String>,
    /// Ask the model for timestamps, so segments are sentences rather than 30 s windows
    /// (the processor's Whisper; FastFlowLM's gives one segment).
    #[arg(long)]
    timestamps: bool,
    /// Threads for the processor's model (default: one per physical core).
    #[arg(long)]
    threads: Option<usize>,
    /// The Python environment holding FastFlowLM (`<DIR>/bin/flm`, the FastFlow SDK's), instead
    /// of the one chosen in the desktop's Settings › NPU.
    #[arg(long, value_name = "DIR")]
    flm_env: Option<PathBuf>,
    /// Print one JSON object: model, backend ("npu" or "cpu"), language, duration_s, text and
    /// segments (start_s, end_s, text).
    #[arg(long)]
    json: bool,
}

fn parse_backend(value: &str) -> Result<SpeechBackend, String> {
    value.parse().map_err(|e: hearth_app::Error| e.message)
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let home = crate::model_args::home()?;
    speech::use_desktop_flm_env(&home, args.flm_env.clone());
    let options = TranscribeOptions {
        language: args.language.clone(),
        timestamps: args.timestamps,
        ..TranscribeOptions::default()
    };
    let name = args.file.display().to_string();
    let what = args
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.clone());
    let audio = speech::decode_file(&args.file, &Limits::default())
        .map_err(|e| speech::speech_error(&what, e))?;
    eprintln!("hearth: transcribing {}", safe(&name));
    let cpu = || {
        let folder = speech::find_speech_model(&home, args.model.as_deref())?;
        let model = speech::load_speech_model(&folder, args.threads.unwrap_or(0))?;
        eprintln!("hearth: {} hears it on the processor", safe(model.name()));
        let mut progress = |p: TranscribeProgress| {
            eprintln!("hearth: {:.0} of {:.0} s transcribed", p.done_s, p.total_s);
            ControlFlow::Continue(())
        };
        let transcript = model
            .transcribe(&audio, &options, &mut progress)
            .map_err(|e| speech::speech_error(&what, e))?;
        Ok((transcript, model.name().to_owned()))
    };
    let heard = speech::hear(&home, args.backend, &audio, args.language.as_deref(), cpu);
    speech::npu::stop_npu_speech();
    let heard = heard?;
    if let Some(failure) = &heard.npu_failure {
        eprintln!(
            "hearth: the NPU could not hear it ({}), so the processor did",
            safe(failure)
        );
    }
    eprintln!(
        "hearth: heard by {} on the {}",
        safe(&heard.model),
        match heard.heard {
            Heard::Npu => "npu (FastFlowLM)",
            Heard::Cpu => "cpu",
        }
    );
    let transcript = &heard.transcript;
    let mut out = std::io::stdout().lock();
    if args.json {
        let segments: Vec<serde_json::Value> = transcript
            .segments
            .iter()
            .map(|s| {
                serde_json::json!({
                    "start_s": round_ms(s.start_s),
                    "end_s": round_ms(s.end_s),
                    "text": s.text.trim(),
                })
            })
            .collect();
        let value = serde_json::json!({
            "model": heard.model,
            "backend": heard.heard.as_str(),
            "language": transcript.language,
            "duration_s": round_ms(transcript.duration_s),
            "text": transcript.text,
            "segments": segments,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        writeln!(out, "{}", safe(&transcript.text))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Seconds to the millisecond, as JSON shows them.
fn round_ms(seconds: f32) -> f64 {
    (f64::from(seconds) * 1000.0).round() / 1000.0
}
