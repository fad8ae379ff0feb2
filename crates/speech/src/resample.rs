//! A band-limited resampler: a Kaiser-windowed sinc low-pass evaluated at each output sample's
//! exact position in the input (polyphase), streaming, so memory is the filter's length plus the
//! block being fed, whatever the recording's length.
//!
//! The contract: [`Resampler::new`] takes any two rates in [`MIN_RATE`]..=[`MAX_RATE`];
//! [`Resampler::push`] takes input in blocks of any size and appends what it can compute;
//! [`Resampler::finish`] appends the rest. The output of `n` input samples is exactly
//! `ceil(n * to / from)` samples, output sample `k` standing for input time `k * from / to`
//! (no delay). The low-pass is centred at 46% of the lower rate and stops before 50% of it
//! (at 16 kHz: flat within 0.05 dB to 6.8 kHz, at least 80 dB down from 8 kHz on: the tests
//! measure both), so nothing above the output's Nyquist frequency folds back into speech.
//!
//! How: the output position in the input advances by `from / to`, kept as an exact fraction
//! (`from / g` over `to / g`). With at most [`MAX_PHASES`] distinct fractional positions (every
//! common rate pair: 44.1 kHz to 16 kHz has 160), each has its own row of filter taps; other
//! pairs interpolate linearly between [`MAX_PHASES`] rows (the sinc is smooth enough at that
//! spacing for an error far below the stopband).

/// The lowest sample rate accepted, in Hz.
pub const MIN_RATE: u32 = 4_000;
/// The highest sample rate accepted, in Hz.
pub const MAX_RATE: u32 = 768_000;
/// Rows of precomputed taps at most; rate pairs with more fractional positions interpolate.
pub const MAX_PHASES: u64 = 4096;

/// Zero crossings of the sinc on each side of the centre, at the lower of the two rates.
const HALF_WIDTH: f64 = 48.0;
/// The cutoff as a fraction of the lower rate (0.5 would be its Nyquist frequency).
const CUTOFF: f64 = 0.46;
/// The Kaiser window's beta: about 90 dB of stopband attenuation.
const KAISER_BETA: f64 = 8.96;

/// Converts a stream of samples from one rate to another.
#[derive(Debug, Clone)]
pub struct Resampler {
    /// The input advances `step` / `phases_exact` samples per output sample.
    step: u64,
    phases_exact: u64,
    /// Input samples each output sample reads (twice the half-width).
    taps: usize,
    half: i64,
    /// Rows of taps, `rows + 1` of them (the last for interpolation), each `taps` long.
    table: Vec<f32>,
    rows: u64,
    /// `rows == phases_exact`: each position has its row, no interpolation.
    exact: bool,
    /// Input not yet consumed; `pending[0]` is input index `base` (negative: the zeros before
    /// the start).
    pending: Vec<f32>,
    base: i64,
    /// The next output's position: input index `ipos` plus `frac / phases_exact`.
    ipos: i64,
    frac: u64,
    /// Input samples pushed, and output samples given, so far.
    consumed: u64,
    produced: u64,
    /// Same rate: samples pass unchanged.
    identity: bool,
    from: u32,
    to: u32,
}

/// Why a resampler cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a sample rate of {rate} Hz is outside what Hearth reads ({MIN_RATE} to {MAX_RATE} Hz)")]
pub struct RateError {
    /// The rate refused.
    pub rate: u32,
}

impl Resampler {
    /// A resampler from `from` Hz to `to` Hz.
    pub fn new(from: u32, to: u32) -> Result<Resampler, RateError> {
        for rate in [from, to] {
            if !(MIN_RATE..=MAX_RATE).contains(&rate) {
                return Err(RateError { rate });
            }
        }
        let g = gcd(u64::from(from), u64::from(to));
        let step = u64::from(from) / g;
        let phases_exact = u64::from(to) / g;
        let identity = from == to;
        // In input samples: the filter is as wide as HALF_WIDTH zero crossings at the lower rate.
        let ratio = f64::from(from) / f64::from(to);
        let stretch = ratio.max(1.0);
        let half = (HALF_WIDTH * stretch).ceil() as i64;
        let taps = (2 * half) as usize;
        // Cycles per input sample.
        let cutoff = CUTOFF / stretch;
        let rows = phases_exact.min(MAX_PHASES);
        let exact = rows == phases_exact;
        let mut table = Vec::new();
        if !identity {
            table.reserve((rows as usize + 1) * taps);
            for row in 0..=rows {
                let frac = row as f64 / rows as f64;
                for k in 0..taps {
                    // Distance from the output position to input tap k.
                    let d = frac + (half - 1) as f64 - k as f64;
                    table.push(kernel(d, cutoff, half as f64) as f32);
                }
            }
        }
        Ok(Resampler {
            step,
            phases_exact,
            taps,
            half,
            table,
            rows,
            exact,
            pending: vec![0.0; half as usize],
            base: -half,
            ipos: 0,
            frac: 0,
            consumed: 0,
            produced: 0,
            identity,
            from,
            to,
        })
    }

    /// The input rate, in Hz.
    pub fn from_rate(&self) -> u32 {
        self.from
    }

    /// The output rate, in Hz.
    pub fn to_rate(&self) -> u32 {
        self.to
    }

    /// Feeds `input` and appends to `out` every output sample that can be computed now.
    pub fn push(&mut self, input: &[f32], out: &mut Vec<f32>) {
        self.consumed += input.len() as u64;
        if self.identity {
            out.extend_from_slice(input);
            self.produced += input.len() as u64;
            return;
        }
        self.pending.extend_from_slice(input);
        self.run(None, out);
    }

    /// Appends the last output samples (the input is taken to be silent after its end), so the
    /// whole output is `ceil(input * to / from)` samples. The resampler is spent afterwards.
    pub fn finish(&mut self, out: &mut Vec<f32>) {
        if self.identity {
            return;
        }
        let total = (u128::from(self.consumed) * u128::from(self.phases_exact))
            .div_ceil(u128::from(self.step)) as u64;
        // Enough silence that every remaining output's window is whole.
        self.pending.resize(self.pending.len() + self.taps + 1, 0.0);
        self.run(Some(total), out);
    }

    /// Computes outputs while their window is in `pending` (and, finishing, up to `limit`).
    fn run(&mut self, limit: Option<u64>, out: &mut Vec<f32>) {
        let available_end = self.base + self.pending.len() as i64; // one past the last sample
        loop {
            if limit.is_some_and(|l| self.produced >= l) {
                break;
            }
            let first = self.ipos - self.half + 1;
            if first + self.taps as i64 > available_end {
                break;
            }
            let start = (first - self.base) as usize;
            let window = &self.pending[start..start + self.taps];
            out.push(self.sample(window));
            self.produced += 1;
            self.frac += self.step;
            self.ipos += (self.frac / self.phases_exact) as i64;
            self.frac %= self.phases_exact;
        }
        // Drop what no later output reads.
        let first = self.ipos - self.half + 1;
        let drop = (first - self.base).clamp(0, self.pending.len() as i64) as usize;
        if drop > 0 {
            self.pending.drain(..drop);
            self.base += drop as i64;
        }
    }

    /// The output at the current position from its input window.
    fn sample(&self, window: &[f32]) -> f32 {
        let taps = self.taps;
        if self.exact {
            let row = self.frac as usize;
            return dot(window, &self.table[row * taps..(row + 1) * taps]);
        }
        let at = self.frac as f64 * self.rows as f64 / self.phases_exact as f64;
        let row = (at.floor() as usize).min(self.rows as usize - 1);
        let w = (at - row as f64) as f32;
        let a = dot(window, &self.table[row * taps..(row + 1) * taps]);
        let b = dot(window, &self.table[(row + 1) * taps..(row + 2) * taps]);
        a + (b - a) * w
    }
}

/// The low-pass's impulse response at distance `d` input samples: a sinc with its first zero
/// at `1 / (2 cutoff)`, scaled for unit gain at 0 Hz, under a Kaiser window `half` wide.
fn kernel(d: f64, cutoff: f64, half: f64) -> f64 {
    let x = d / half;
    if x.abs() >= 1.0 {
        return 0.0;
    }
    let arg = 2.0 * cutoff * d;
    let sinc = if arg.abs() < 1e-12 {
        1.0
    } else {
        (std::f64::consts::PI * arg).sin() / (std::f64::consts::PI * arg)
    };
    2.0 * cutoff * sinc * bessel_i0(KAISER_BETA * (1.0 - x * x).sqrt()) / bessel_i0(KAISER_BETA)
}

/// The modified Bessel function of the first kind, order 0 (its power series).
fn bessel_i0(x: f64) -> f64 {
    let quarter = x * x / 4.0;
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..64 {
        term *= quarter / (k * k) as f64;
        sum += term;
        if term < sum * 1e-17 {
            break;
        }
    }
    sum
}

/// A dot product in eight independent sums (so it vectorizes).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0.0f32; 8];
    let chunks = a.len() / 8;
    for i in 0..chunks {
        let (x, y) = (&a[i * 8..i * 8 + 8], &b[i * 8..i * 8 + 8]);
        for j in 0..8 {
            sums[j] += x[j] * y[j];
        }
    }
    let mut total: f32 = sums.iter().sum();
    for i in chunks * 8..a.len() {
        total += a[i] * b[i];
    }
    total
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Resamples a whole signal at once.
pub fn resample(input: &[f32], from: u32, to: u32) -> Result<Vec<f32>, RateError> {
    let mut resampler = Resampler::new(from, to)?;
    let mut out =
        Vec::with_capacity((input.len() as u64 * u64::from(to) / u64::from(from)) as usize + 1);
    resampler.push(input, &mut out);
    resampler.finish(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(freq: f64, rate: u32, seconds: f64, amplitude: f64) -> Vec<f32> {
        let n = (seconds * f64::from(rate)) as usize;
        (0..n)
            .map(|i| {
                (amplitude * (2.0 * std::f64::consts::PI * freq * i as f64 / f64::from(rate)).sin())
                    as f32
            })
            .collect()
    }

    /// The amplitude of `freq` in `signal` (a windowed single-bin DFT over the middle, away
    /// from the edges), relative to a full-scale sine.
    fn amplitude_at(signal: &[f32], rate: u32, freq: f64) -> f64 {
        let middle = &signal[signal.len() / 4..signal.len() * 3 / 4];
        let n = middle.len() as f64;
        let (mut re, mut im, mut wsum) = (0.0, 0.0, 0.0);
        for (i, &x) in middle.iter().enumerate() {
            // Hann window: leakage from other frequencies stays far below what is measured.
            let w = 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n).cos();
            let phase = 2.0 * std::f64::consts::PI * freq * i as f64 / f64::from(rate);
            re += f64::from(x) * w * phase.cos();
            im += f64::from(x) * w * phase.sin();
            wsum += w;
        }
        2.0 * (re * re + im * im).sqrt() / wsum
    }

    fn db(x: f64) -> f64 {
        20.0 * x.log10()
    }

    #[test]
    fn a_sine_keeps_its_frequency_and_level() {
        for (from, freq) in [
            (44_100, 1000.0),
            (48_000, 440.0),
            (22_050, 3000.0),
            (8_000, 1000.0),
            (96_000, 6000.0),
            (44_101, 2500.0), // interpolated rows
        ] {
            let input = sine(freq, from, 1.0, 0.5);
            let out = resample(&input, from, 16_000).unwrap();
            assert_eq!(
                out.len() as u64,
                (input.len() as u64 * 16_000).div_ceil(u64::from(from)),
                "{from} Hz"
            );
            let level = amplitude_at(&out, 16_000, freq);
            assert!(
                (level - 0.5).abs() < 0.5 * 0.002,
                "{from} Hz: {freq} Hz at {level}"
            );
            // Its neighbours are empty: the frequency did not move.
            for off in [-150.0, 150.0] {
                let other = amplitude_at(&out, 16_000, freq + off);
                assert!(
                    db(other / 0.5) < -60.0,
                    "{from} Hz: energy at {}",
                    freq + off
                );
            }
            // Sample by sample, the output is the sine at 16 kHz (away from the edges).
            let expect = sine(freq, 16_000, 1.0, 0.5);
            let max_err = (2000..14_000)
                .map(|i| (out[i] - expect[i]).abs())
                .fold(0.0f32, f32::max);
            assert!(
                max_err < 2e-3,
                "{from} Hz: differs from the ideal by {max_err}"
            );
        }
    }

    #[test]
    fn frequencies_above_8_khz_do_not_fold_back() {
        for (from, freq) in [
            (44_100, 9_000.0),
            (48_000, 12_000.0),
            (44_100, 20_000.0),
            (96_000, 8_500.0),
        ] {
            let input = sine(freq, from, 1.0, 1.0);
            let out = resample(&input, from, 16_000).unwrap();
            // Where it would land, folded about 8 kHz (and the whole output's energy).
            let folded = (16_000.0 - freq % 16_000.0f64).abs().min(freq % 16_000.0);
            let alias = amplitude_at(&out, 16_000, folded);
            let rms = (out[4000..12_000]
                .iter()
                .map(|&x| f64::from(x).powi(2))
                .sum::<f64>()
                / 8000.0)
                .sqrt();
            assert!(
                db(alias) < -80.0,
                "{freq} Hz from {from} Hz folds to {folded} Hz at {} dB",
                db(alias)
            );
            assert!(
                db(rms) < -75.0,
                "{freq} Hz from {from} Hz leaves {} dB",
                db(rms)
            );
        }
    }

    #[test]
    fn the_passband_is_flat_to_6_8_khz() {
        for freq in [100.0, 2000.0, 5000.0, 6800.0] {
            let out = resample(&sine(freq, 44_100, 1.0, 1.0), 44_100, 16_000).unwrap();
            let level = amplitude_at(&out, 16_000, freq);
            assert!(db(level).abs() < 0.05, "{freq} Hz at {} dB", db(level));
        }
    }

    #[test]
    fn blocks_of_any_size_give_the_same_output() {
        let input = sine(1234.0, 44_100, 0.3, 0.7);
        let whole = resample(&input, 44_100, 16_000).unwrap();
        for block in [1, 7, 100, 4096] {
            let mut r = Resampler::new(44_100, 16_000).unwrap();
            let mut out = Vec::new();
            for chunk in input.chunks(block) {
                r.push(chunk, &mut out);
            }
            r.finish(&mut out);
            assert_eq!(out, whole, "blocks of {block}");
        }
    }

    #[test]
    fn same_rate_passes_through_and_empty_stays_empty() {
        let input = sine(500.0, 16_000, 0.1, 0.3);
        assert_eq!(resample(&input, 16_000, 16_000).unwrap(), input);
        assert!(resample(&[], 44_100, 16_000).unwrap().is_empty());
        assert_eq!(resample(&[0.25], 48_000, 16_000).unwrap().len(), 1);
    }

    #[test]
    fn rates_out_of_range_are_refused() {
        assert_eq!(
            Resampler::new(1, 16_000).unwrap_err(),
            RateError { rate: 1 }
        );
        assert!(Resampler::new(0, 16_000).is_err());
        assert!(Resampler::new(MAX_RATE + 1, 16_000).is_err());
        assert!(Resampler::new(MAX_RATE, 16_000).is_ok());
        assert!(Resampler::new(MIN_RATE, 16_000).is_ok());
    }
}
