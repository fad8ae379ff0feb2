//! Whisper's decoding rules and the walk over 30 s windows.
//!
//! Per window: features, encoder, then the prompt `<|startoftranscript|>`, the language token,
//! `<|transcribe|>` and (without timestamps) `<|notimestamps|>` (an English-only model's prompt
//! has no language or task token). The language, when not given, is the language token with the
//! highest logit after `<|startoftranscript|>` in the first window, and is kept for the rest.
//! At every step the model's suppressed tokens (`suppress_tokens`; without a list in the folder,
//! the task and start tokens) get no chance, and at the first step neither do the begin list
//! (`begin_suppress_tokens`: a lone space and end-of-text). With timestamps, OpenAI's timestamp
//! rules apply (timestamps in pairs and never going back, the first at most 1 s in, and a
//! timestamp forced when all timestamps together are likelier than any one text token).
//! Greedy: the highest logit, ties to the lowest id. A window ends at end-of-text or when the
//! model's positions (448) are full.
//!
//! Temperature fallback (asked for): when a window's average log-probability is below -1, or it
//! filled every position without ending (a repetition loop), it is decoded again by sampling at
//! 0.2, 0.4, ... 1.0 (a fixed seed per window, so results repeat) and the first that passes is
//! kept, else the last.

use std::ops::ControlFlow;

use super::mel::log_mel;
use super::model::{encode, DecoderState};
use super::{Segment, TranscribeOptions, TranscribeProgress, Transcript, Whisper};
use super::{SAMPLE_RATE, WINDOW_SAMPLES};
use crate::Error;

/// Seconds per timestamp token.
const TIMESTAMP_STEP: f32 = 0.02;
/// The first timestamp may be at most this many steps in (1 s).
const MAX_INITIAL_TIMESTAMP: u32 = 50;
const LOGPROB_THRESHOLD: f32 = -1.0;

/// What one decoding of a window gave.
struct Decoded {
    /// Sampled tokens (end-of-text not included).
    tokens: Vec<u32>,
    /// Whether it ended with end-of-text.
    ended: bool,
    avg_logprob: f32,
}

pub(crate) fn transcribe(
    w: &Whisper,
    samples: &[f32],
    options: &TranscribeOptions,
    progress: &mut dyn FnMut(TranscribeProgress) -> ControlFlow<()>,
) -> Result<Transcript, Error> {
    check_samples(samples)?;
    let total_s = samples.len() as f32 / SAMPLE_RATE as f32;
    let mut language = given_language(w, options)?;
    let mut segments = Vec::new();
    for (index, window) in samples.chunks(WINDOW_SAMPLES).enumerate() {
        let offset_s = (index * WINDOW_SAMPLES) as f32 / SAMPLE_RATE as f32;
        let window_s = window.len() as f32 / SAMPLE_RATE as f32;
        let encoded = encode_window(w, window)?;
        let lang = match &language {
            Some(l) => l.clone(),
            None => {
                let detected = detect_language(w, &encoded);
                language = Some(detected.clone());
                detected
            }
        };
        let decoded = decode_window(w, &encoded, &lang, options, index as u64);
        segments.extend(window_segments(
            w,
            &decoded.tokens,
            options.timestamps,
            offset_s,
            window_s,
        ));
        let done_s = offset_s + window_s;
        if progress(TranscribeProgress { done_s, total_s }).is_break() {
            return Err(Error::Cancelled);
        }
    }
    let text = segments
        .iter()
        .map(|s| s.text.as_str())
        .collect::<String>()
        .trim()
        .to_string();
    Ok(Transcript {
        language: language.unwrap_or_else(|| "en".into()),
        text,
        segments,
        duration_s: total_s,
    })
}

/// The greedy tokens of one window (end-of-text included when reached) and the language.
pub(crate) fn greedy_window_tokens(
    w: &Whisper,
    window: &[f32],
    options: &TranscribeOptions,
) -> Result<(String, Vec<u32>), Error> {
    check_samples(window)?;
    let encoded = encode_window(w, &window[..window.len().min(WINDOW_SAMPLES)])?;
    let lang = match given_language(w, options)? {
        Some(l) => l,
        None => detect_language(w, &encoded),
    };
    let prompt = prompt(w, &lang, options.timestamps);
    let mut decoded = decode_once(w, &encoded, &prompt, options.timestamps, None);
    if decoded.ended {
        decoded.tokens.push(w.vocab.eot);
    }
    Ok((lang, decoded.tokens))
}

fn check_samples(samples: &[f32]) -> Result<(), Error> {
    if samples.is_empty() {
        return Err(Error::Audio {
            reason: "there are no samples to transcribe".into(),
        });
    }
    if let Some(i) = samples.iter().position(|v| !v.is_finite()) {
        return Err(Error::Audio {
            reason: format!(
                "sample {i} is {}, not a number a sound can have; the audio was decoded wrongly",
                samples[i]
            ),
        });
    }
    Ok(())
}

fn given_language(w: &Whisper, options: &TranscribeOptions) -> Result<Option<String>, Error> {
    let Some(code) = &options.language else {
        return Ok(if w.vocab.multilingual() {
            None
        } else {
            Some("en".into())
        });
    };
    let code = code.trim().to_ascii_lowercase();
    if w.vocab.language_token(&code).is_none() {
        let known = w.vocab.language_codes().join(", ");
        return Err(Error::Audio {
            reason: format!(
                "this Whisper model does not know the language {code:?}; it knows: {known}"
            ),
        });
    }
    Ok(Some(code))
}

fn encode_window(w: &Whisper, window: &[f32]) -> Result<Vec<f32>, Error> {
    let features = log_mel(&w.mel_filters, w.cpu.pool(), window);
    encode(&w.cpu, &w.weights, &w.config, &features)
}

/// The language whose token has the highest logit after `<|startoftranscript|>`.
fn detect_language(w: &Whisper, encoded: &[f32]) -> String {
    let mut state = DecoderState::new(&w.cpu, &w.weights, &w.config, encoded);
    let mut logits = vec![0.0; w.config.vocab_size];
    state.feed(&w.cpu, &w.weights, &[w.vocab.sot], &mut logits);
    let mut best: Option<(&str, f32)> = None;
    for (code, id) in &w.vocab.languages {
        let l = logits[*id as usize];
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((code, l));
        }
    }
    best.map_or_else(|| "en".into(), |(c, _)| c.to_string())
}

fn prompt(w: &Whisper, language: &str, timestamps: bool) -> Vec<u32> {
    let v = &w.vocab;
    let mut p = vec![v.sot];
    if v.multilingual() {
        p.push(v.language_token(language).unwrap_or(v.sot));
        p.push(v.transcribe);
    }
    if !timestamps {
        p.push(v.no_timestamps);
    }
    p
}

fn decode_window(
    w: &Whisper,
    encoded: &[f32],
    language: &str,
    options: &TranscribeOptions,
    window: u64,
) -> Decoded {
    let prompt = prompt(w, language, options.timestamps);
    let greedy = decode_once(w, encoded, &prompt, options.timestamps, None);
    if !options.temperature_fallback || passes(&greedy) {
        return greedy;
    }
    let mut last = greedy;
    for step in 1..=5u64 {
        let temperature = 0.2 * step as f32;
        let seed = 0x5EED_0000 ^ (window << 8) ^ step;
        last = decode_once(
            w,
            encoded,
            &prompt,
            options.timestamps,
            Some((temperature, seed)),
        );
        if passes(&last) {
            break;
        }
    }
    last
}

fn passes(d: &Decoded) -> bool {
    d.ended && d.avg_logprob >= LOGPROB_THRESHOLD
}

/// One decoding of a window: greedy, or sampled at `(temperature, seed)`.
fn decode_once(
    w: &Whisper,
    encoded: &[f32],
    prompt: &[u32],
    timestamps: bool,
    sampling: Option<(f32, u64)>,
) -> Decoded {
    let (c, v) = (&w.config, &w.vocab);
    let mut state = DecoderState::new(&w.cpu, &w.weights, c, encoded);
    let mut logits = vec![0.0f32; c.vocab_size];
    state.feed(&w.cpu, &w.weights, prompt, &mut logits);
    let default_suppress: Vec<u32> = [
        Some(v.translate),
        Some(v.transcribe),
        Some(v.sot),
        v.sot_prev,
        v.sot_lm,
        v.no_speech,
    ]
    .into_iter()
    .flatten()
    .collect();
    let suppress = c.suppress_tokens.as_deref().unwrap_or(&default_suppress);
    let default_begin: Vec<u32> = v.blank.into_iter().chain([v.eot]).collect();
    let begin = c.begin_suppress_tokens.as_deref().unwrap_or(&default_begin);
    let mut rng = sampling.map_or(0, |(_, seed)| seed | 1);
    let mut tokens = Vec::new();
    let mut sum_logprob = 0.0f64;
    let mut ended = false;
    loop {
        for &t in suppress {
            logits[t as usize] = f32::NEG_INFINITY;
        }
        if tokens.is_empty() {
            for &t in begin {
                logits[t as usize] = f32::NEG_INFINITY;
            }
        }
        if timestamps {
            apply_timestamp_rules(w, &tokens, &mut logits);
        }
        let next = match sampling {
            None => argmax(&logits),
            Some((temperature, _)) => sample(&logits, temperature, &mut rng),
        };
        sum_logprob += f64::from(log_softmax_at(&logits, next));
        if next == v.eot {
            ended = true;
            break;
        }
        tokens.push(next);
        if prompt.len() + tokens.len() >= c.max_target_positions {
            break;
        }
        state.feed(&w.cpu, &w.weights, &[next], &mut logits);
    }
    let count = tokens.len() + usize::from(ended);
    Decoded {
        tokens,
        ended,
        avg_logprob: (sum_logprob / count.max(1) as f64) as f32,
    }
}

/// OpenAI's timestamp rules on the logits of the next token after `sampled`.
fn apply_timestamp_rules(w: &Whisper, sampled: &[u32], logits: &mut [f32]) {
    let v = &w.vocab;
    let begin = v.timestamp_begin as usize;
    logits[v.no_timestamps as usize] = f32::NEG_INFINITY;
    if begin >= logits.len() {
        return;
    }
    let is_ts = |t: u32| t >= v.timestamp_begin;
    let last_ts = sampled.last().is_some_and(|&t| is_ts(t));
    let penultimate_ts = sampled.len() < 2 || is_ts(sampled[sampled.len() - 2]);
    if last_ts {
        if penultimate_ts {
            logits[begin..].fill(f32::NEG_INFINITY);
        } else {
            logits[..v.eot as usize].fill(f32::NEG_INFINITY);
        }
    }
    if let Some(&last) = sampled.iter().rev().find(|&&t| is_ts(t)) {
        let floor = if last_ts && !penultimate_ts {
            last
        } else {
            last + 1
        };
        let end = (floor as usize).min(logits.len());
        logits[begin..end].fill(f32::NEG_INFINITY);
    }
    if sampled.is_empty() {
        logits[..begin].fill(f32::NEG_INFINITY);
        let last_allowed = begin + MAX_INITIAL_TIMESTAMP as usize;
        if last_allowed + 1 < logits.len() {
            logits[last_allowed + 1..].fill(f32::NEG_INFINITY);
        }
    }
    // If all timestamps together are likelier than the likeliest text token, take a timestamp.
    let lse = |xs: &[f32]| {
        let max = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if max == f32::NEG_INFINITY {
            return max;
        }
        max + xs.iter().map(|&x| (x - max).exp()).sum::<f32>().ln()
    };
    let ts_mass = lse(&logits[begin..]);
    let text_max = logits[..begin]
        .iter()
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    if ts_mass > text_max {
        logits[..begin].fill(f32::NEG_INFINITY);
    }
}

fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

fn log_softmax_at(logits: &[f32], i: u32) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits
        .iter()
        .map(|&l| f64::from(l - max).exp())
        .sum::<f64>();
    (f64::from(logits[i as usize] - max) - sum.ln()) as f32
}

/// A token drawn from `softmax(logits / temperature)` with a xorshift generator.
fn sample(logits: &[f32], temperature: f32, state: &mut u64) -> u32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f64> = logits
        .iter()
        .map(|&l| f64::from((l - max) / temperature).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    let mut target = (*state >> 11) as f64 / (1u64 << 53) as f64 * total;
    for (i, &wt) in weights.iter().enumerate() {
        if target < wt {
            return i as u32;
        }
        target -= wt;
    }
    argmax(logits)
}

/// The segments of one window's tokens.
fn window_segments(
    w: &Whisper,
    tokens: &[u32],
    timestamps: bool,
    offset_s: f32,
    window_s: f32,
) -> Vec<Segment> {
    let v = &w.vocab;
    // Timestamps past the audio (a last window shorter than 30 s) are held at its end.
    let end_s = offset_s + window_s;
    let time = |t: u32| (offset_s + (t - v.timestamp_begin) as f32 * TIMESTAMP_STEP).min(end_s);
    if !timestamps {
        let text = v.decode(tokens);
        if text.trim().is_empty() {
            return Vec::new();
        }
        return vec![Segment {
            start_s: offset_s,
            end_s: offset_s + window_s,
            text,
        }];
    }
    let mut segments = Vec::new();
    let mut start: Option<f32> = None;
    let mut text_tokens: Vec<u32> = Vec::new();
    for &t in tokens {
        if t >= v.timestamp_begin {
            match start {
                Some(s) if !text_tokens.is_empty() => {
                    segments.push(Segment {
                        start_s: s,
                        end_s: time(t),
                        text: v.decode(&text_tokens),
                    });
                    text_tokens.clear();
                    start = None;
                }
                _ => start = Some(time(t)),
            }
        } else {
            text_tokens.push(t);
        }
    }
    if !text_tokens.is_empty() {
        segments.push(Segment {
            start_s: start.unwrap_or(offset_s),
            end_s: offset_s + window_s,
            text: v.decode(&text_tokens),
        });
    }
    segments.retain(|s| !s.text.trim().is_empty());
    segments
}
