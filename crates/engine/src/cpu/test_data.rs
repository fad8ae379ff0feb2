//! Deterministic inputs shared by the kernels' tests (no crate, no clock), and the timing of
//! their by-hand speed measurements (the only clocks read here, by ignored tests alone).

/// A linear congruential generator.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        self.next() as f32 / (1u64 << 31) as f32 * 2.0 - 1.0
    }
}

/// 256 quantized activations at the ends of their range (-127 and 127), the largest sums a tile
/// kernel meets.
pub fn extreme_xq() -> Vec<i8> {
    (0..256)
        .map(|c| if c % 3 == 0 { -127 } else { 127 })
        .collect()
}

/// The speed of two ways of computing from the same weights, `run(way)` (0 or 1) one pass over
/// `bytes` bytes of them: GB/s at the median of 7 passes of each way, interleaved, by the wall
/// clock and by this thread's time on the CPU (a busy host's other work taken out; NaN where
/// Linux does not report it).
pub fn two_ways_gbs(bytes: usize, mut run: impl FnMut(usize)) -> [(f64, f64); 2] {
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..7 {
        for (way, times) in times.iter_mut().enumerate() {
            let (start, cpu) = (std::time::Instant::now(), on_cpu_seconds());
            run(way);
            let cpu = on_cpu_seconds().zip(cpu).map(|(end, start)| end - start);
            times.push((start.elapsed().as_secs_f64(), cpu.unwrap_or(f64::NAN)));
        }
    }
    times.map(|times| {
        let median = |pick: fn(&(f64, f64)) -> f64| {
            let mut t: Vec<f64> = times.iter().map(pick).collect();
            t.sort_by(f64::total_cmp);
            bytes as f64 / t[3] / 1e9
        };
        (median(|t| t.0), median(|t| t.1))
    })
}

/// This thread's time on the CPU so far, in seconds, where Linux reports it (`None` elsewhere).
fn on_cpu_seconds() -> Option<f64> {
    let sched = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
    let line = sched
        .lines()
        .find(|l| l.starts_with("se.sum_exec_runtime"))?;
    let ms: f64 = line.split(':').nth(1)?.trim().parse().ok()?;
    Some(ms / 1e3)
}
