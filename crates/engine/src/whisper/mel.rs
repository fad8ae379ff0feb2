//! Whisper's log-mel front end, as transformers' `WhisperFeatureExtractor` computes it.
//!
//! One 30 s window (480,000 samples at 16 kHz, zero-padded when shorter) becomes `n_mels` rows
//! of 3000 frames: frames of 400 samples every 160 (the signal reflected by 200 samples at
//! both ends, so frame `t` is centred on sample `160 t`), a periodic Hann window, the power of
//! the 201 Fourier bins, Slaney-style mel filters (triangles between 0 and 8 kHz, areas
//! normalised), `log10(max(mel, 1e-10))`, everything below the window's maximum minus 8 raised
//! to it, then `(x + 4) / 4`. The transform is a direct DFT against a cosine/sine table and
//! everything is summed in f64; only the result is f32.

use crate::cpu::pool::ThreadPool;

/// Samples per frame (the Fourier transform's length).
pub(crate) const N_FFT: usize = 400;
/// Samples between frames.
pub(crate) const HOP: usize = 160;
/// Frames in one 30 s window.
pub(crate) const FRAMES: usize = 3000;
/// Fourier bins kept (`N_FFT / 2 + 1`).
const BINS: usize = N_FFT / 2 + 1;

/// The tables the front end needs for one mel count.
#[derive(Debug)]
pub(crate) struct MelFilters {
    n_mels: usize,
    /// `filters[m * BINS + f]`: weight of bin `f` in mel band `m`.
    filters: Vec<f64>,
    /// `cos(2π f n / N_FFT)` and `sin(...)` times the Hann window, `[BINS][N_FFT]`.
    cos: Vec<f64>,
    sin: Vec<f64>,
}

fn hz_to_mel(hz: f64) -> f64 {
    // Slaney: linear below 1 kHz (3 mels per 200 Hz), logarithmic above.
    let (f_sp, min_log_hz, min_log_mel) = (200.0 / 3.0, 1000.0, 15.0);
    let logstep = 6.4f64.ln() / 27.0;
    if hz >= min_log_hz {
        min_log_mel + (hz / min_log_hz).ln() / logstep
    } else {
        hz / f_sp
    }
}

fn mel_to_hz(mel: f64) -> f64 {
    let (f_sp, min_log_hz, min_log_mel) = (200.0 / 3.0, 1000.0, 15.0);
    let logstep = 6.4f64.ln() / 27.0;
    if mel >= min_log_mel {
        min_log_hz * (logstep * (mel - min_log_mel)).exp()
    } else {
        f_sp * mel
    }
}

impl MelFilters {
    pub(crate) fn new(n_mels: usize) -> MelFilters {
        let sample_rate = super::SAMPLE_RATE as f64;
        let fft_freqs: Vec<f64> = (0..BINS)
            .map(|f| f as f64 * (sample_rate / 2.0) / (BINS - 1) as f64)
            .collect();
        let (mel_min, mel_max) = (hz_to_mel(0.0), hz_to_mel(sample_rate / 2.0));
        let edges: Vec<f64> = (0..n_mels + 2)
            .map(|i| mel_to_hz(mel_min + (mel_max - mel_min) * i as f64 / (n_mels + 1) as f64))
            .collect();
        let mut filters = vec![0.0; n_mels * BINS];
        for m in 0..n_mels {
            let (lo, mid, hi) = (edges[m], edges[m + 1], edges[m + 2]);
            let norm = 2.0 / (hi - lo);
            for (f, &freq) in fft_freqs.iter().enumerate() {
                let down = (freq - lo) / (mid - lo);
                let up = (hi - freq) / (hi - mid);
                filters[m * BINS + f] = down.min(up).max(0.0) * norm;
            }
        }
        let mut cos = vec![0.0; BINS * N_FFT];
        let mut sin = vec![0.0; BINS * N_FFT];
        for n in 0..N_FFT {
            let hann = 0.5 - 0.5 * (2.0 * std::f64::consts::PI * n as f64 / N_FFT as f64).cos();
            for f in 0..BINS {
                // (f * n) mod N_FFT keeps the angle small, so the table is accurate.
                let angle = 2.0 * std::f64::consts::PI * ((f * n) % N_FFT) as f64 / N_FFT as f64;
                cos[f * N_FFT + n] = angle.cos() * hann;
                sin[f * N_FFT + n] = angle.sin() * hann;
            }
        }
        MelFilters {
            n_mels,
            filters,
            cos,
            sin,
        }
    }
}

/// The features of one window: `n_mels` rows of [`FRAMES`], row-major. Samples past 30 s are
/// ignored; a shorter window is padded with silence.
pub(crate) fn log_mel(filters: &MelFilters, pool: &ThreadPool, window: &[f32]) -> Vec<f32> {
    let len = super::WINDOW_SAMPLES;
    let mut padded = vec![0.0f64; len + N_FFT];
    // Reflect by N_FFT / 2 at both ends (numpy's "reflect": the edge sample is not repeated).
    let half = N_FFT / 2;
    let signal = |i: usize| window.get(i).map_or(0.0, |&v| f64::from(v));
    for (i, p) in padded.iter_mut().enumerate() {
        let pos = i as isize - half as isize;
        let src = if pos < 0 {
            (-pos) as usize
        } else if pos as usize >= len {
            2 * (len - 1) - pos as usize
        } else {
            pos as usize
        };
        *p = signal(src);
    }
    let n_mels = filters.n_mels;
    // log10 of each frame's mel energies, frame-major while computing.
    let mut logs = vec![0.0f64; FRAMES * n_mels];
    const FRAMES_PER_PIECE: usize = 50;
    pool.for_each_piece_mut(&mut logs, FRAMES_PER_PIECE * n_mels, &|piece, out| {
        let mut power = [0.0f64; BINS];
        for (i, frame_out) in out.chunks_exact_mut(n_mels).enumerate() {
            let t = piece * FRAMES_PER_PIECE + i;
            let frame = &padded[t * HOP..t * HOP + N_FFT];
            for (f, p) in power.iter_mut().enumerate() {
                let (mut re, mut im) = (0.0f64, 0.0f64);
                let (c, s) = (
                    &filters.cos[f * N_FFT..(f + 1) * N_FFT],
                    &filters.sin[f * N_FFT..(f + 1) * N_FFT],
                );
                for n in 0..N_FFT {
                    re += frame[n] * c[n];
                    im += frame[n] * s[n];
                }
                *p = re * re + im * im;
            }
            for (m, value) in frame_out.iter_mut().enumerate() {
                let row = &filters.filters[m * BINS..(m + 1) * BINS];
                let energy: f64 = row.iter().zip(&power).map(|(w, p)| w * p).sum();
                *value = energy.max(1e-10).log10();
            }
        }
    });
    let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut features = vec![0.0f32; n_mels * FRAMES];
    for t in 0..FRAMES {
        for m in 0..n_mels {
            let v = logs[t * n_mels + m].max(max - 8.0);
            features[m * FRAMES + t] = ((v + 4.0) / 4.0) as f32;
        }
    }
    features
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slaney_scale_round_trips_and_bends_at_1khz() {
        for hz in [0.0, 100.0, 999.0, 1000.0, 4000.0, 8000.0] {
            assert!((mel_to_hz(hz_to_mel(hz)) - hz).abs() < 1e-9);
        }
        assert!((hz_to_mel(1000.0) - 15.0).abs() < 1e-12);
    }

    #[test]
    fn filters_are_triangles_with_slaney_area() {
        let f = MelFilters::new(80);
        assert_eq!(f.filters.len(), 80 * BINS);
        for m in 0..80 {
            let row = &f.filters[m * BINS..(m + 1) * BINS];
            assert!(row.iter().all(|&w| w >= 0.0));
            assert!(row.iter().any(|&w| w > 0.0), "band {m} is empty");
        }
    }

    #[test]
    fn a_tone_lights_the_band_of_its_frequency_and_silence_is_flat() {
        let f = MelFilters::new(80);
        let pool = ThreadPool::new(1);
        let tone: Vec<f32> = (0..16_000)
            .map(|i| (2.0 * std::f32::consts::PI * 1000.0 * i as f32 / 16_000.0).sin())
            .collect();
        let mel = log_mel(&f, &pool, &tone);
        let frame = 50;
        let column: Vec<f32> = (0..80).map(|m| mel[m * FRAMES + frame]).collect();
        let loudest = (0..80)
            .max_by(|&a, &b| column[a].total_cmp(&column[b]))
            .unwrap();
        let centre = mel_to_hz(hz_to_mel(0.0) + (hz_to_mel(8000.0)) * (loudest + 1) as f64 / 81.0);
        assert!(
            (centre - 1000.0).abs() < 100.0,
            "band {loudest} centred at {centre} Hz"
        );
        let silence = log_mel(&f, &pool, &[]);
        assert!(silence.iter().all(|&v| v == silence[0]));
    }
}
