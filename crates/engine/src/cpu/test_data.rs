//! Deterministic inputs shared by the kernels' tests (no crate, no clock), and the one clock
//! their by-hand speed measurements read: the thread's own time on the CPU.

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

/// This thread's time on the CPU so far, in seconds, where Linux reports it (`None` elsewhere).
pub fn on_cpu_seconds() -> Option<f64> {
    let sched = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
    let line = sched
        .lines()
        .find(|l| l.starts_with("se.sum_exec_runtime"))?;
    let ms: f64 = line.split(':').nth(1)?.trim().parse().ok()?;
    Some(ms / 1e3)
}
