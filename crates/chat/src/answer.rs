//! The answer loop every front end shares (the app, `hearth run`/`chat`, `hearth serve`): fit
//! the conversation into the context, generate on the chosen backend, apply stop strings, report
//! live numbers, measure power, and end with a receipt that says where the answer ran.
//!
//! Events go to the caller as they happen; returning `ControlFlow::Break(())` from the event
//! callback stops the answer (Stop in the app, a client that left the server).

use std::ops::ControlFlow;
use std::time::Instant;

use hearth_engine::{ChatOptions, PrefillProgress, StopReason};
use serde::{Deserialize, Serialize};

use crate::backend::{
    Backend, BackendError, BackendEvent, BackendInfo, BackendKind, BackendTimings, Input, Prompt,
    TokenCount,
};
use crate::clock::unix_now;
use crate::context::{self, FitError};
use crate::energy::{EnergyReport, Measurement, PowerMeter};
use crate::stop::StopFilter;

/// What to answer and how.
#[derive(Debug, Clone)]
pub struct AnswerRequest<'a> {
    /// The conversation (or raw text) to continue.
    pub input: Input,
    /// Sampling, answer length, thinking switch.
    pub options: ChatOptions,
    /// Strings that end the answer (it is cut before the first one). Applied here on every
    /// backend, since many servers ignore them; not under a JSON `options.format`, whose
    /// answer ends right after its value and could meet a stop string inside it.
    pub stops: Vec<String>,
    /// What measures the answer's energy (this computer's power sensors); None to take no
    /// readings.
    pub power: Option<&'a dyn PowerMeter>,
    /// Leave out the oldest turns when the conversation does not fit (the app and `hearth
    /// chat`); when false a conversation longer than the context is refused (the API, whose
    /// clients manage their own history).
    pub trim_to_fit: bool,
}

/// Live numbers while an answer is written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LiveStats {
    /// Answer pieces so far (about one per token).
    pub generated_tokens: usize,
    /// Seconds to the first piece, once it came.
    pub ttft_secs: Option<f64>,
    /// Speed since the first piece.
    pub tokens_per_second: Option<f64>,
    /// Seconds since the request.
    pub elapsed_secs: f64,
}

/// The answer begins: what the model reads and who answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerStart {
    /// Tokens of the prompt after fitting.
    pub prompt_tokens: TokenCount,
    /// The model's context length, when known.
    pub context_limit: Option<usize>,
    /// Oldest messages left out.
    pub trimmed_messages: usize,
    /// The backend answering.
    pub backend: BackendInfo,
}

/// What happens while answering, in order: `Started`, then `Reading` while the prompt is read
/// (only from backends that can tell, see [`BackendEvent::Reading`]), then `Text` and `Stats`
/// interleaved.
#[derive(Debug, Clone, PartialEq)]
pub enum AnswerEvent {
    /// The prompt fits and generation starts.
    Started(AnswerStart),
    /// How much of the prompt has been read, before the first text.
    Reading(PrefillProgress),
    /// A piece of the answer (stop strings already applied).
    Text(String),
    /// Live numbers, about ten times a second.
    Stats(LiveStats),
}

/// Why an answer ended, as people read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerStop {
    /// The model ended its turn.
    EndOfTurn,
    /// The answer reached its length limit.
    MaxTokens,
    /// The user (or client) stopped it.
    Cancelled,
    /// The context is full.
    ContextFull,
    /// A stop string was written.
    StopString,
}

impl AnswerStop {
    fn from_engine(reason: StopReason) -> Self {
        match reason {
            StopReason::EndOfTurn => AnswerStop::EndOfTurn,
            StopReason::MaxTokens => AnswerStop::MaxTokens,
            StopReason::Cancelled => AnswerStop::Cancelled,
            StopReason::ContextFull => AnswerStop::ContextFull,
        }
    }

    /// Plain words for the receipt: "end of turn", "length limit", ...
    pub fn words(self) -> &'static str {
        match self {
            AnswerStop::EndOfTurn => "end of turn",
            AnswerStop::MaxTokens => "length limit",
            AnswerStop::Cancelled => "stopped",
            AnswerStop::ContextFull => "context full",
            AnswerStop::StopString => "stop string",
        }
    }

    /// OpenAI's `finish_reason`.
    pub fn finish_reason(self) -> &'static str {
        match self {
            AnswerStop::EndOfTurn | AnswerStop::StopString | AnswerStop::Cancelled => "stop",
            AnswerStop::MaxTokens | AnswerStop::ContextFull => "length",
        }
    }
}

/// How an answer was made: stored with it, shown under it, printed by `hearth run --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Receipt {
    /// The model's name.
    pub model_name: String,
    /// sha256 of the weights file, when known.
    pub model_sha256: Option<String>,
    /// Where it ran. Absent in receipts saved before backends existed: those ran on the CPU.
    #[serde(default = "cpu_kind")]
    pub backend_kind: BackendKind,
    /// The backend with detail ("cpu (avx2)", "remote (http://...)").
    pub backend: String,
    /// The device (CPU model name, NPU, server address).
    pub device: String,
    /// Version of the program that ran the model, when not Hearth (FastFlowLM's).
    #[serde(default)]
    pub runtime_version: Option<String>,
    /// Tokens the model read (after trimming).
    pub prompt_tokens: usize,
    /// Tokens it wrote.
    pub generated_tokens: usize,
    /// False when the token counts are estimates (a server that reported none).
    #[serde(default = "yes")]
    pub counts_exact: bool,
    /// Seconds from the request to the first answer text (wall clock, measured by Hearth).
    pub ttft_secs: f64,
    /// Seconds from the first answer text to the last (wall clock).
    pub decode_secs: f64,
    /// Decode speed (tokens after the first over `decode_secs`).
    pub tokens_per_second: f64,
    /// The backend's own timing fields, when it reports them.
    #[serde(default)]
    pub backend_timings: Option<BackendTimings>,
    /// "end of turn", "length limit", "stopped", "context full", "stop string".
    pub stop_reason: String,
    /// Oldest messages left out to fit the context.
    pub trimmed_messages: usize,
    /// Unix seconds.
    pub finished_at: i64,
    /// Energy of the answer, when power could be read.
    #[serde(default)]
    pub energy: Option<EnergyReport>,
}

fn cpu_kind() -> BackendKind {
    BackendKind::Cpu
}

fn yes() -> bool {
    true
}

/// A finished answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Its text (cut before any stop string).
    pub text: String,
    /// Why it ended.
    pub stop: AnswerStop,
    /// How it was made.
    pub receipt: Receipt,
}

/// Why an answer failed.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// It could not start (nothing was generated): the conversation does not fit, or the
    /// backend refused the prompt.
    #[error(transparent)]
    NotStarted(#[from] FitError),
    /// It failed after it started; `text` is what was written before the failure.
    #[error("{error}")]
    Failed {
        /// The answer so far.
        text: String,
        /// What went wrong.
        error: BackendError,
    },
}

impl AnswerError {
    /// A stable code for the UI and scripts.
    pub fn code(&self) -> &'static str {
        match self {
            AnswerError::NotStarted(FitError::TooLong { .. }) => "context",
            AnswerError::NotStarted(FitError::Backend(e))
            | AnswerError::Failed { error: e, .. } => e.code(),
        }
    }
}

/// How often live numbers are sent.
const STATS_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Answers `request` on `backend`, sending events to `on_event` (which may stop the answer).
// The error is made once per answer and carries the partial text by value; boxing it would only
// move the allocation.
#[allow(clippy::result_large_err)]
pub fn answer(
    backend: &mut dyn Backend,
    request: AnswerRequest<'_>,
    on_event: &mut dyn FnMut(AnswerEvent) -> ControlFlow<()>,
) -> Result<Answer, AnswerError> {
    let started = Instant::now();
    let AnswerRequest {
        input,
        mut options,
        stops,
        power,
        trim_to_fit,
    } = request;
    let info = backend.info().clone();
    if crate::backend::has_pictures(&input) && !backend.sees_pictures() {
        return Err(AnswerError::NotStarted(FitError::Backend(
            BackendError::sees_no_pictures(&info),
        )));
    }
    let limit = info.context_length;
    let (prompt, trimmed) = prepare(backend, input, &options, limit, trim_to_fit)?;
    if let Some(limit) = limit {
        // Never ask for more than the context has room for.
        options.max_tokens = options
            .max_tokens
            .min(limit.saturating_sub(prompt.count.tokens))
            .max(1);
    }
    let prompt_count = prompt.count;
    if on_event(AnswerEvent::Started(AnswerStart {
        prompt_tokens: prompt_count,
        context_limit: limit,
        trimmed_messages: trimmed,
        backend: info.clone(),
    }))
    .is_break()
    {
        return Ok(cancelled_before_start(&info, prompt_count, trimmed));
    }

    // Prefill and decode are measured apart: decode begins with the first piece.
    let measurement = power.map(|meter| Measurement::start(meter, info.kind));

    // A JSON answer ends after its value by itself; a stop string met inside it (a "\n\n" in
    // a string, a "}") would cut it short of parsing.
    let stops = if options.format.is_text() {
        stops
    } else {
        if !stops.is_empty() {
            tracing::debug!(?stops, "stop strings left out under a JSON format");
        }
        Vec::new()
    };
    let mut filter = StopFilter::new(stops);
    let mut text = String::new();
    let mut pieces = 0usize;
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    let mut last_stats = started - STATS_EVERY;
    let mut stopped_by_caller = false;
    let live = |pieces: usize, first: Option<Instant>| {
        let now = Instant::now();
        LiveStats {
            generated_tokens: pieces,
            ttft_secs: first.map(|f| (f - started).as_secs_f64()),
            tokens_per_second: first.and_then(|f| {
                let secs = (now - f).as_secs_f64();
                (pieces > 1 && secs > 0.0).then(|| (pieces - 1) as f64 / secs)
            }),
            elapsed_secs: (now - started).as_secs_f64(),
        }
    };
    let result = backend.generate(prompt, &options, &mut |event| {
        let piece = match event {
            BackendEvent::Reading(progress) => {
                if on_event(AnswerEvent::Reading(progress)).is_break() {
                    stopped_by_caller = true;
                    return ControlFlow::Break(());
                }
                return ControlFlow::Continue(());
            }
            BackendEvent::Text(piece) => piece,
        };
        if piece.is_empty() {
            // Nothing written (a remote backend waiting): only a chance to stop.
            if on_event(AnswerEvent::Stats(live(pieces, first))).is_break() {
                stopped_by_caller = true;
                return ControlFlow::Break(());
            }
            return ControlFlow::Continue(());
        }
        let now = Instant::now();
        if first.is_none() {
            first = Some(now);
            if let Some(m) = &measurement {
                m.decode_began();
            }
        }
        last = Some(now);
        pieces += 1;
        let released = filter.push(piece);
        if !released.is_empty() {
            text.push_str(&released);
            if on_event(AnswerEvent::Text(released)).is_break() {
                stopped_by_caller = true;
                return ControlFlow::Break(());
            }
        }
        if now - last_stats >= STATS_EVERY {
            last_stats = now;
            if on_event(AnswerEvent::Stats(live(pieces, first))).is_break() {
                stopped_by_caller = true;
                return ControlFlow::Break(());
            }
        }
        if filter.stopped() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });

    let generation = match result {
        Ok(generation) => generation,
        Err(error) => {
            // Keep what was held back as a possible stop string: it is part of the answer.
            text.push_str(&filter.finish());
            return Err(AnswerError::Failed { text, error });
        }
    };
    let rest = filter.finish();
    if !rest.is_empty() {
        text.push_str(&rest);
        let _ = on_event(AnswerEvent::Text(rest));
    }
    let stop = if filter.stopped() {
        AnswerStop::StopString
    } else if stopped_by_caller {
        AnswerStop::Cancelled
    } else {
        AnswerStop::from_engine(generation.stop_reason)
    };
    let generated = generation.generated_tokens;
    let ttft_secs = first.map_or(0.0, |f| (f - started).as_secs_f64());
    let decode_secs = match (first, last) {
        (Some(f), Some(l)) => (l - f).as_secs_f64(),
        _ => 0.0,
    };
    let tokens_per_second = if generated.tokens > 1 && decode_secs > 0.0 {
        (generated.tokens - 1) as f64 / decode_secs
    } else {
        0.0
    };
    let energy = measurement.map(|m| m.finish(generation.prompt_tokens.tokens, generated.tokens));
    let timings = generation.timings;
    let receipt = Receipt {
        generated_tokens: generated.tokens,
        counts_exact: generation.prompt_tokens.exact && generated.exact,
        ttft_secs,
        decode_secs,
        tokens_per_second,
        backend_timings: (timings != BackendTimings::default()).then_some(timings),
        energy,
        ..Receipt::unmeasured(&info, generation.prompt_tokens, stop, trimmed)
    };
    let _ = on_event(AnswerEvent::Stats(live(pieces, first)));
    Ok(Answer {
        text,
        stop,
        receipt,
    })
}

/// Prepares the input, leaving out old turns of a conversation that does not fit (with `trim`),
/// or refusing a prompt that leaves no room for an answer.
#[allow(clippy::result_large_err)] // as `answer`
fn prepare(
    backend: &mut dyn Backend,
    input: Input,
    options: &ChatOptions,
    limit: Option<usize>,
    trim: bool,
) -> Result<(Prompt, usize), FitError> {
    let (messages, limit) = match (input, limit) {
        (Input::Chat(messages), Some(limit)) if trim => (messages, limit),
        (input, limit) => {
            let prompt = backend.prepare(input, options)?;
            if let Some(limit) = limit {
                if prompt.count.tokens >= limit {
                    return Err(FitError::TooLong {
                        needed: prompt.count.tokens + 1,
                        limit,
                    });
                }
            }
            return Ok((prompt, 0));
        }
    };
    let reserve = context::answer_reserve(options.max_tokens, limit);
    // Both closures need the backend (one reads it, one writes it); fit never runs them at once.
    let backend = std::cell::RefCell::new(backend);
    let fitted = context::fit(
        messages,
        limit,
        reserve,
        &mut |m| {
            backend.borrow().count_text(&m.content).tokens
                + m.pictures
                    .iter()
                    .map(crate::picture::picture_tokens)
                    .sum::<usize>()
        },
        &mut |kept| backend.borrow_mut().prepare(Input::Chat(kept), options),
    )?;
    Ok((fitted.prompt, fitted.trimmed))
}

fn cancelled_before_start(info: &BackendInfo, prompt: TokenCount, trimmed: usize) -> Answer {
    Answer {
        text: String::new(),
        stop: AnswerStop::Cancelled,
        receipt: Receipt::unmeasured(info, prompt, AnswerStop::Cancelled, trimmed),
    }
}

impl Receipt {
    /// The receipt of an answer from `info` to a prompt of `prompt` tokens, before anything was
    /// generated or measured: no tokens, no timings, no energy.
    fn unmeasured(
        info: &BackendInfo,
        prompt: TokenCount,
        stop: AnswerStop,
        trimmed: usize,
    ) -> Self {
        Receipt {
            model_name: info.model.clone(),
            model_sha256: info.model_sha256.clone(),
            backend_kind: info.kind,
            backend: info.label.clone(),
            device: info.device.clone(),
            runtime_version: info.runtime_version.clone(),
            prompt_tokens: prompt.tokens,
            generated_tokens: 0,
            counts_exact: prompt.exact,
            ttft_secs: 0.0,
            decode_secs: 0.0,
            tokens_per_second: 0.0,
            backend_timings: None,
            stop_reason: stop.words().to_owned(),
            trimmed_messages: trimmed,
            finished_at: unix_now() as i64,
            energy: None,
        }
    }
}
