//! Deterministic inputs shared by the kernels' tests (no crate, no clock).

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
