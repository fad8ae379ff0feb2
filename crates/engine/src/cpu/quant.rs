//! Activation quantization: each token's activations become int8 blocks of 32 (one block per
//! weight group) with one f32 scale per block, done once per matmul and shared by every row.

use super::level::KernelLevel;

/// Columns per quantization block: one Q4_1 group, so a block meets one scale and min.
pub const BLOCK: usize = q4nx::tile::GROUP;

/// Tokens per batch of the interleaved copy (`QuantizedActivations::interleave`) that a
/// prefill's 4-bit matmuls read: each tile is unpacked once for the whole batch (a last batch
/// may hold fewer). On MiniCPM5-2B's shape a 512-token prefill ran 1.21-1.23x as fast as with
/// the 8-token kernel, against 1.08-1.15x with batches of 16; 64 gained nothing more
/// (bench/README.md).
pub const BATCH: usize = 32;

/// The activations of `tokens` tokens, quantized to int8 blocks of [`BLOCK`].
///
/// For block `b` of token `t`: `x[k] ≈ xq[k] * scale[b]`, and `sum[b] = scale[b] * Σ xq[k]`,
/// the block's sum as its quantized values give it, which the Q4_1 min term `m * Σx` uses (as
/// ggml's Q8_1 does). The code and min terms then see the same rounded activations `x - e`, so
/// a row's error is `Σ w * e` with `w = d * q + m` centred on zero, instead of `d * Σ q * e`
/// with `q` in 0..=15, about twice as large, that the exact sum of `x` gave: on SmolLM2-135M
/// against llama.cpp that was mean KL 0.0127 and 97.9% top-1 agreement, now 0.0041 and 99.5%.
/// Buffers grow on demand and are reused, so a matmul allocates nothing once warm.
#[derive(Debug, Default, Clone)]
pub struct QuantizedActivations {
    tokens: usize,
    cols_padded: usize,
    groups: usize,
    xq: Vec<i8>,     // (tokens, cols_padded)
    scale: Vec<f32>, // (tokens, cols_padded / BLOCK)
    sum: Vec<f32>,   // (tokens, cols_padded / BLOCK)
    /// Tokens in the interleaved copy, from the first (0 until [`Self::interleave`]).
    interleaved: usize,
    batch_xq: Vec<i8>,  // (batches, cols_padded / BLOCK, BATCH, BLOCK)
    batch_ss: Vec<f32>, // (batches, cols_padded / BLOCK, 2, BATCH): scales, then sums
}

impl QuantizedActivations {
    /// An empty set; call [`QuantizedActivations::resize`] or [`QuantizedActivations::quantize`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Shapes the buffers for `tokens` tokens of `cols` columns (padded to [`q4nx::tile::TILE_COLS`]).
    pub fn resize(&mut self, tokens: usize, cols: usize) {
        self.tokens = tokens;
        self.cols_padded = q4nx::layout::padded_cols(cols);
        self.groups = cols.div_ceil(BLOCK);
        self.interleaved = 0;
        let blocks = tokens * self.cols_padded / BLOCK;
        self.xq.resize(tokens * self.cols_padded, 0);
        self.scale.resize(blocks, 0.0);
        self.sum.resize(blocks, 0.0);
    }

    /// Quantizes `x` (`[tokens, cols]` row-major) on the calling thread, with the `level`
    /// build of [`quantize_row`] (the same bytes at every level).
    pub fn quantize(&mut self, level: KernelLevel, x: &[f32], tokens: usize, cols: usize) {
        assert_eq!(
            x.len(),
            tokens * cols,
            "quantize: input is not [tokens, cols]"
        );
        self.resize(tokens, cols);
        for t in 0..tokens {
            let (xq, scale, sum) = self.token_mut(t);
            quantize_row(level, &x[t * cols..(t + 1) * cols], xq, scale, sum);
        }
    }

    /// Columns per token after padding to [`q4nx::tile::TILE_COLS`].
    pub fn cols_padded(&self) -> usize {
        self.cols_padded
    }

    /// Tiles per row block: [`q4nx::tile::TILE_COLS`] padded columns each.
    pub fn column_tiles(&self) -> usize {
        self.cols_padded / q4nx::tile::TILE_COLS
    }

    /// Blocks per token that hold real columns. The tiles pad K to whole tiles with zero
    /// columns, whose activations are zero too, so a kernel skips the blocks from here on:
    /// they would add nothing, and their bytes are never read (SmolLM2's K of 576 is padded
    /// to 768, a quarter of its tiles).
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// Of those, the ones in column tile `ct` (0 past the last).
    pub fn tile_groups(&self, ct: usize) -> usize {
        use q4nx::tile::GROUPS_PER_TILE;
        self.groups
            .saturating_sub(ct * GROUPS_PER_TILE)
            .min(GROUPS_PER_TILE)
    }

    /// Whether K was padded to whole tiles, so that the last tile of each row block holds
    /// groups that are never read. The kernels have a `PADDED` variant for such matrices; the
    /// others keep loops of a constant 8 groups, which the compiler unrolls (a loop over
    /// [`Self::tile_groups`] and the padding-aware look-ahead cost them 4–17% of a MiniCPM5-2B
    /// decode).
    pub fn is_padded(&self) -> bool {
        self.groups * BLOCK != self.cols_padded
    }

    /// The groups of column tile `ct` that a kernel's `PADDED` variant computes: all of them
    /// (a constant) without padding, else [`Self::tile_groups`].
    #[inline(always)]
    pub fn groups_in<const PADDED: bool>(&self, ct: usize) -> usize {
        if PADDED {
            self.tile_groups(ct)
        } else {
            q4nx::tile::GROUPS_PER_TILE
        }
    }

    /// Checks what every row-block kernel relies on, and returns its token count: `out` holds
    /// whole blocks of [`TILE_ROWS`](q4nx::tile::TILE_ROWS) rows, one per token from `t0`, all
    /// held here, and `tiles` holds one tile of `tile_bytes` per
    /// [`TILE_COLS`](q4nx::tile::TILE_COLS) padded columns, the last one narrow (only the
    /// groups of real columns, [`q4nx::tile::TileLayout`]) if `narrow`.
    pub fn check_row_block(
        &self,
        tiles: &[u8],
        tile_bytes: usize,
        narrow: bool,
        t0: usize,
        out: &[f32],
    ) -> usize {
        use q4nx::tile::TILE_ROWS;
        assert!(out.len().is_multiple_of(TILE_ROWS));
        let tokens = out.len() / TILE_ROWS;
        assert!(
            t0 + tokens <= self.tokens,
            "row_block: token range out of bounds"
        );
        let last = self.column_tiles().saturating_sub(1);
        let last_bytes = match narrow {
            true => tile_bytes / q4nx::tile::GROUPS_PER_TILE * self.tile_groups(last),
            false => tile_bytes,
        };
        assert_eq!(
            tiles.len(),
            last * tile_bytes + last_bytes,
            "row_block: tiles do not match the activation width"
        );
        tokens
    }

    /// Column tile `ct` of a row block's `tiles` (laid out as [`Self::check_row_block`] checks)
    /// as a whole tile of `tile_bytes`: a narrow last tile is widened into `widened`, zeros
    /// where it holds no groups. For the scalar twins, which read every tile the one way the
    /// format describes.
    pub fn whole_tile<'t>(
        &self,
        tiles: &'t [u8],
        tile_bytes: usize,
        narrow: bool,
        ct: usize,
        widened: &'t mut Vec<u8>,
    ) -> &'t [u8] {
        let tile = &tiles[ct * tile_bytes..tiles.len().min((ct + 1) * tile_bytes)];
        if !(narrow && ct + 1 == self.column_tiles()) {
            return tile;
        }
        widened.resize(tile_bytes, 0);
        let q8 = tile_bytes == q4nx::tile::Q8_TILE_BYTES;
        q4nx::tile::widen_tile(tile, q8, widened);
        widened
    }

    /// Quantized values of token `t` (`cols_padded` of them).
    pub fn xq(&self, t: usize) -> &[i8] {
        &self.xq[t * self.cols_padded..(t + 1) * self.cols_padded]
    }

    /// Block scales of token `t`.
    pub fn scales(&self, t: usize) -> &[f32] {
        let blocks = self.cols_padded / BLOCK;
        &self.scale[t * blocks..(t + 1) * blocks]
    }

    /// Block sums of token `t` as its quantized values give them (`scale * Σ xq`).
    pub fn sums(&self, t: usize) -> &[f32] {
        let blocks = self.cols_padded / BLOCK;
        &self.sum[t * blocks..(t + 1) * blocks]
    }

    /// Copies the first `tokens` tokens, in batches of [`BATCH`] (the last one may hold
    /// fewer), into the interleaved layout the prefill kernel reads ([`Self::batch`]).
    pub fn interleave(&mut self, tokens: usize) {
        assert!(
            tokens <= self.tokens,
            "interleave: more tokens than quantized"
        );
        let blocks = self.cols_padded / BLOCK;
        let batches = tokens.div_ceil(BATCH);
        self.interleaved = tokens;
        self.batch_xq.resize(batches * blocks * BATCH * BLOCK, 0);
        self.batch_ss.resize(batches * blocks * 2 * BATCH, 0.0);
        for t in 0..tokens {
            let (b, i) = (t / BATCH, t % BATCH);
            for block in 0..blocks {
                let at = (b * blocks + block) * BATCH;
                let to = (at + i) * BLOCK;
                let from = t * self.cols_padded + block * BLOCK;
                self.batch_xq[to..to + BLOCK].copy_from_slice(&self.xq[from..from + BLOCK]);
                self.batch_ss[2 * at + i] = self.scale[t * blocks + block];
                self.batch_ss[2 * at + BATCH + i] = self.sum[t * blocks + block];
            }
        }
    }

    /// Tokens in the interleaved copy (the first ones): 0 until [`Self::interleave`], and
    /// after every [`Self::resize`].
    pub fn interleaved(&self) -> usize {
        self.interleaved
    }

    /// Batch `b` (tokens `b * BATCH ..`, up to [`BATCH`] of them) interleaved, block by block:
    /// the block's values of the batch's tokens one after the other (`BATCH * BLOCK` bytes),
    /// and its `BATCH` scales then `BATCH` sums (the places of tokens a last batch does not
    /// hold keep old values). So a kernel that computes the batch's tokens together reads
    /// each block of all of them from one place, at offsets fixed when it is compiled.
    pub fn batch(&self, b: usize) -> (&[i8], &[f32]) {
        assert!(
            b * BATCH < self.interleaved,
            "batch {b} was not interleaved"
        );
        let blocks = self.cols_padded / BLOCK;
        let (values, ss) = (blocks * BATCH * BLOCK, blocks * 2 * BATCH);
        (
            &self.batch_xq[b * values..(b + 1) * values],
            &self.batch_ss[b * ss..(b + 1) * ss],
        )
    }

    /// Mutable buffers of token `t`: (values, scales, sums).
    pub fn token_mut(&mut self, t: usize) -> (&mut [i8], &mut [f32], &mut [f32]) {
        let blocks = self.cols_padded / BLOCK;
        (
            &mut self.xq[t * self.cols_padded..(t + 1) * self.cols_padded],
            &mut self.scale[t * blocks..(t + 1) * blocks],
            &mut self.sum[t * blocks..(t + 1) * blocks],
        )
    }

    /// Raw mutable parts for filling disjoint tokens from several threads:
    /// (values, scales, sums) of every token.
    pub fn parts_mut(&mut self) -> (&mut [i8], &mut [f32], &mut [f32]) {
        (&mut self.xq, &mut self.scale, &mut self.sum)
    }
}

/// Quantizes one token: `x` (its logical columns) into `xq` (padded length, a multiple of
/// [`BLOCK`]) with symmetric per-block scales `max|x| / 127` and block sums `scale * Σ xq`
/// (see [`QuantizedActivations`]).
///
/// Decode calls this on the calling thread before every matmul while the other threads wait.
/// The AVX-512 levels run [`quantize_row_avx512`]; the others run its twin
/// ([`quantize_blocks`], plain arithmetic on fixed-size blocks), compiled for AVX2 at that
/// level. Every level gives the same bytes.
///
/// Panics if `level` is not supported by this CPU.
pub fn quantize_row(
    level: KernelLevel,
    x: &[f32],
    xq: &mut [i8],
    scale: &mut [f32],
    sum: &mut [f32],
) {
    assert!(
        xq.len().is_multiple_of(BLOCK) && x.len() <= xq.len() && scale.len() == xq.len() / BLOCK,
        "quantize_row: buffers do not fit the row"
    );
    assert!(
        level.is_supported(),
        "kernel level {level} is not supported"
    );
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level's features were checked above.
        KernelLevel::Avx512Bw | KernelLevel::Avx512Vnni => unsafe {
            quantize_row_avx512(x, xq, scale, sum)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        KernelLevel::Avx2 => unsafe { quantize_row_avx2(x, xq, scale, sum) },
        _ => quantize_blocks(x, xq, scale, sum),
    }
}

/// [`quantize_blocks`] in 512-bit vectors, block by block: the block's two vectors, their
/// largest magnitude and values' sum reduced across lanes, and the same rounding trick.
/// Bit for bit the twin's result on finite values (the maximum of magnitudes and the integer
/// sum do not depend on order; the rest is the same IEEE operations). The twin compiled for
/// these instructions kept each block's maximum and sum as scalar chains: 1.3 ns per value,
/// where this takes a fifth of that.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
unsafe fn quantize_row_avx512(x: &[f32], xq: &mut [i8], scale: &mut [f32], sum: &mut [f32]) {
    use std::arch::x86_64::*;
    let whole = x.len() / BLOCK;
    for b in 0..whole {
        // SAFETY (caller): `x` holds `whole` blocks, `xq` at least as many, and `scale` and
        // `sum` one per block of `xq` (checked by `quantize_row`).
        let p = x.as_ptr().add(b * BLOCK);
        let (lo, hi) = (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
        let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
        let inverse = if amax > 0.0 { 127.0 / amax } else { 0.0 };
        let round = |v: __m512| {
            let shifted = _mm512_add_ps(
                _mm512_mul_ps(v, _mm512_set1_ps(inverse)),
                _mm512_set1_ps(MAGIC),
            );
            _mm512_sub_epi32(
                _mm512_castps_si512(shifted),
                _mm512_set1_epi32(MAGIC.to_bits() as i32),
            )
        };
        let (qlo, qhi) = (round(lo), round(hi));
        let out = xq.as_mut_ptr().add(b * BLOCK);
        _mm_storeu_si128(out.cast(), _mm512_cvtepi32_epi8(qlo));
        _mm_storeu_si128(out.add(16).cast(), _mm512_cvtepi32_epi8(qhi));
        let total = _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
        scale[b] = amax / 127.0;
        sum[b] = scale[b] * total as f32;
    }
    // The partial block at the end of `x` and the padding blocks after it.
    let done = whole * BLOCK;
    quantize_blocks(
        &x[done..],
        &mut xq[done..],
        &mut scale[whole..],
        &mut sum[whole..],
    );
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn quantize_row_avx2(x: &[f32], xq: &mut [i8], scale: &mut [f32], sum: &mut [f32]) {
    quantize_blocks(x, xq, scale, sum)
}

/// [`quantize_row`]'s arithmetic: the scalar twin, compiled into each caller's instructions.
#[inline(always)]
fn quantize_blocks(x: &[f32], xq: &mut [i8], scale: &mut [f32], sum: &mut [f32]) {
    for (b, out) in xq.chunks_exact_mut(BLOCK).enumerate() {
        let start = (b * BLOCK).min(x.len());
        let values = &x[start..(start + BLOCK).min(x.len())];
        let mut block = [0.0f32; BLOCK];
        block[..values.len()].copy_from_slice(values);
        let amax = abs_max(&block);
        let inverse = if amax > 0.0 { 127.0 / amax } else { 0.0 };
        let mut total = 0i32;
        for (q, v) in out.iter_mut().zip(block) {
            // |v * inverse| <= 127 up to rounding, so it rounds into -127..=127.
            let rounded = round_to_int(v * inverse);
            *q = rounded as i8;
            total += rounded;
        }
        scale[b] = amax / 127.0;
        sum[b] = scale[b] * total as f32;
    }
}

/// `max |v|` of one block, in 8 lanes.
#[inline(always)]
fn abs_max(block: &[f32; BLOCK]) -> f32 {
    let mut max = [0.0f32; 8];
    for part in block.chunks_exact(8) {
        for i in 0..8 {
            max[i] = max[i].max(part[i].abs());
        }
    }
    max.into_iter().fold(0.0, f32::max)
}

/// Rounds to the nearest integer (ties to even) for `|v| < 2^22`: adding `1.5 * 2^23` leaves
/// no fraction bits, and the integer sits in the low bits of the sum. Integer arithmetic the
/// compiler vectorizes, where `f32::round` is a libm call and `as` a saturating conversion.
/// Also `exp`'s split into a power of two.
#[inline(always)]
pub(super) fn round_to_int(v: f32) -> i32 {
    (v + MAGIC).to_bits() as i32 - MAGIC.to_bits() as i32
}

/// `1.5 * 2^23`, [`round_to_int`]'s shift (and the AVX-512 kernel's, lane by lane).
const MAGIC: f32 = 12_582_912.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_within_half_a_step() {
        let x: Vec<f32> = (0..300)
            .map(|i| ((i * 7919) % 263) as f32 / 13.0 - 10.0)
            .collect();
        let mut acts = QuantizedActivations::new();
        acts.quantize(KernelLevel::Scalar, &x, 1, 300);
        assert_eq!(acts.cols_padded(), 512);
        for (k, v) in x.iter().enumerate() {
            let s = acts.scales(0)[k / BLOCK];
            let back = f32::from(acts.xq(0)[k]) * s;
            assert!(
                (back - v).abs() <= s * 0.5 + 1e-6,
                "column {k}: {v} came back as {back}"
            );
        }
        assert!(acts.xq(0)[300..].iter().all(|&q| q == 0), "padding is zero");
        // Each block's sum is its quantized values' sum times its scale, exactly.
        for b in 0..512 / BLOCK {
            let q: i32 = acts.xq(0)[b * BLOCK..(b + 1) * BLOCK]
                .iter()
                .map(|&q| i32::from(q))
                .sum();
            assert_eq!(acts.sums(0)[b], acts.scales(0)[b] * q as f32, "block {b}");
        }
    }

    #[test]
    fn interleaved_batches_hold_each_tokens_values_scales_and_sums() {
        let (tokens, cols) = (2 * BATCH + 13, 300);
        let x: Vec<f32> = (0..tokens * cols)
            .map(|i| ((i * 7919) % 263) as f32 / 13.0 - 10.0)
            .collect();
        let mut acts = QuantizedActivations::new();
        acts.quantize(KernelLevel::Scalar, &x, tokens, cols);
        assert_eq!(
            acts.interleaved(),
            0,
            "nothing is interleaved before it is asked for"
        );
        // Two whole batches and 8 tokens of a third; the last 5 tokens are left out.
        acts.interleave(2 * BATCH + 8);
        assert_eq!(acts.interleaved(), 2 * BATCH + 8);
        let blocks = acts.cols_padded() / BLOCK;
        for b in 0..3 {
            let (values, ss) = acts.batch(b);
            for block in 0..blocks {
                for i in 0..BATCH.min(2 * BATCH + 8 - b * BATCH) {
                    let t = b * BATCH + i;
                    let at = (block * BATCH + i) * BLOCK;
                    assert_eq!(
                        values[at..at + BLOCK],
                        acts.xq(t)[block * BLOCK..(block + 1) * BLOCK]
                    );
                    assert_eq!(ss[block * 2 * BATCH + i], acts.scales(t)[block]);
                    assert_eq!(ss[block * 2 * BATCH + BATCH + i], acts.sums(t)[block]);
                }
            }
        }
        acts.resize(tokens, cols);
        assert_eq!(acts.interleaved(), 0, "a resize forgets the copy");
    }

    #[test]
    fn every_level_quantizes_to_the_same_bytes() {
        // Ordinary values, a block of zeros, huge and tiny magnitudes, ties, a partial last
        // block and signed zeros: each level's build gives the scalar build's bytes and bits.
        let mut x: Vec<f32> = (0..300)
            .map(|i| ((i * 7919) % 263) as f32 / 13.0 - 10.0)
            .collect();
        x[32..64].fill(0.0);
        x[64] = 3.0e38;
        x[65] = -1.0e-38;
        x[96..128].copy_from_slice(&[0.5f32, -0.5, 127.0, -127.0].repeat(8));
        x[128] = -0.0;
        // And 64 rows of random values whose magnitudes span 2^-40 to 2^40 block by block.
        let mut rng = crate::cpu::test_data::Lcg(17);
        let random: Vec<f32> = (0..64 * 300)
            .map(|i| rng.unit() * 2f32.powi((i / BLOCK % 81) as i32 - 40))
            .collect();
        let quantized = |x: &[f32], level: KernelLevel| {
            let tokens = x.len() / 300;
            let mut acts = QuantizedActivations::new();
            acts.quantize(level, x, tokens, 300);
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            (0..tokens)
                .map(|t| {
                    (
                        acts.xq(t).to_vec(),
                        bits(acts.scales(t)),
                        bits(acts.sums(t)),
                    )
                })
                .collect::<Vec<_>>()
        };
        for x in [&x, &random] {
            let scalar = quantized(x, KernelLevel::Scalar);
            for level in KernelLevel::supported() {
                assert!(
                    quantized(x, level) == scalar,
                    "{level} quantizes differently"
                );
            }
        }
    }

    #[test]
    fn rounding_is_to_nearest_with_ties_to_even() {
        let cases = [
            (0.4, 0),
            (0.5, 0),
            (1.5, 2),
            (2.5, 2),
            (-0.6, -1),
            (-127.2, -127),
            (126.7, 127),
        ];
        for (v, rounded) in cases {
            assert_eq!(round_to_int(v), rounded, "{v}");
        }
    }

    #[test]
    fn zero_blocks_have_zero_scale_and_values() {
        let mut acts = QuantizedActivations::new();
        acts.quantize(KernelLevel::Scalar, &[0.0; 64], 2, 32);
        assert!(acts.xq(1).iter().all(|&q| q == 0));
        assert_eq!(acts.scales(1)[0], 0.0);
    }

    #[test]
    fn extreme_value_maps_to_127() {
        let mut x = vec![0.5f32; 32];
        x[3] = -4.0;
        let mut acts = QuantizedActivations::new();
        acts.quantize(KernelLevel::Scalar, &x, 1, 32);
        assert_eq!(acts.xq(0)[3], -127);
        assert_eq!(acts.xq(0)[0], 16);
    }
}
