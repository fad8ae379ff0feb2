//! Q4_1 tile kernels: `y[t, r] = Σ_k W[r, k] x[t, k]` for the 32 rows of one row block, straight
//! from the Q4NX tiles (no repacking), at every [`KernelLevel`].
//!
//! A tile is 32 rows x 256 columns: 256 BF16 scales `d` and 256 BF16 mins `m` indexed
//! `g * 32 + r` (group `g` = 32 columns), then nibbles with row `r`, column `c` in byte
//! `(r / 16) * 2048 + c * 8 + (r % 16) / 2`, even rows in the low nibble. With activations
//! quantized per group (`x ≈ xq * sx`), one group contributes
//! `d * sx * Σ q * xq + m * Σ x`; the integer part `Σ q * xq` is what each SIMD level computes,
//! and it is exactly equal at every level.

use q4nx::dtype::bf16_to_f32;
use q4nx::tile::{
    TileLayout, GROUPS_PER_TILE as GROUPS, Q4_1_GROUP_BYTES as GROUP_BYTES, Q4_1_MINS_AT as MINS,
    Q4_1_NIBBLES_AT as NIBBLES, Q4_1_TILE_BYTES as TILE_BYTES, SCALES_AT as SCALES, TILE_COLS,
    TILE_ROWS,
};

use super::level::KernelLevel;
use super::quant::{QuantizedActivations, BATCH, BLOCK};

/// Most tokens one call of [`row_block`] computes; the caller loops over larger batches.
pub const MAX_TOKENS: usize = 8;
/// How far ahead of the tile being computed the SIMD kernels prefetch into L2, in tiles: far
/// enough that many requests are in flight at once, which is what keeps memory busy (measured
/// on the 2-thread decode: 88% of the read bandwidth with one L1 prefetch 4 tiles ahead, 92%
/// with this pair).
#[cfg(target_arch = "x86_64")]
const PREFETCH_L2_TILES: usize = 8;
/// ... and into L1, from L2, shortly before use.
#[cfg(target_arch = "x86_64")]
const PREFETCH_L1_TILES: usize = 2;
/// Steps of a whole tile: 8 groups in each of its 2 halves (one step reads 320 bytes).
#[cfg(target_arch = "x86_64")]
const STEPS_PER_TILE: usize = 2 * GROUPS;

/// The integer sums of one tile against 256 quantized activations:
/// `out[g * 32 + r] = Σ_{c in group g} q[r, c] * xq[c]` (the scales' index order).
///
/// Panics if `level` is not supported by this CPU. Only the tests call it (to compare the
/// levels' integer sums exactly); [`row_block`] is what the matmuls run.
#[cfg(test)]
pub fn tile_isums(level: KernelLevel, tile: &[u8], xq: &[i8]) -> [i32; TILE_ROWS * GROUPS] {
    assert!(tile.len() >= TILE_BYTES && xq.len() >= TILE_COLS);
    assert!(
        level.is_supported(),
        "kernel level {level} is not supported by this CPU"
    );
    let mut out = [0i32; TILE_ROWS * GROUPS];
    match level {
        KernelLevel::Scalar => scalar::tile_isums(tile, xq, &mut out),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level was checked supported above; slice lengths were checked.
        KernelLevel::Avx2 => unsafe { avx2::tile_isums(tile, xq, &mut out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        KernelLevel::Avx512Bw => unsafe { avx512bw::tile_isums(tile, xq, &mut out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        KernelLevel::Avx512Vnni => unsafe { avx512vnni::tile_isums(tile, xq, &mut out) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => scalar::tile_isums(tile, xq, &mut out),
    }
    out
}

/// Computes one row block for tokens `t0 .. t0 + out.len() / 32` of `acts`:
/// `out[t * 32 + r]` = row `r` of the block times token `t0 + t`.
///
/// `tiles` holds the block's `cols_padded / 256` tiles, in order, the last one narrow if
/// `narrow` (holding only the groups of real columns: [`TileLayout`]). At most [`MAX_TOKENS`]
/// tokens. Only the groups that hold real columns are read ([`QuantizedActivations::groups`]).
/// Panics if `level` is not supported or the sizes disagree.
pub fn row_block(
    level: KernelLevel,
    tiles: &[u8],
    narrow: bool,
    acts: &QuantizedActivations,
    t0: usize,
    out: &mut [f32],
) {
    let tokens = acts.check_row_block(tiles, TILE_BYTES, narrow, t0, out);
    assert!((1..=MAX_TOKENS).contains(&tokens));
    assert!(
        level.is_supported(),
        "kernel level {level} is not supported"
    );
    match level {
        KernelLevel::Scalar => scalar::row_block(tiles, narrow, acts, t0, out),
        #[cfg(target_arch = "x86_64")]
        KernelLevel::Avx2 => {
            // SAFETY: AVX2 and FMA are present and sizes were checked above.
            unsafe {
                match (narrow, acts.is_padded()) {
                    (true, _) => avx2::row_block::<true, true>(tiles, acts, t0, out),
                    (false, true) => avx2::row_block::<true, false>(tiles, acts, t0, out),
                    (false, false) => avx2::row_block::<false, false>(tiles, acts, t0, out),
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        KernelLevel::Avx512Bw => {
            // SAFETY: AVX-512F/BW are present and sizes were checked above.
            unsafe {
                match (narrow, acts.is_padded()) {
                    (true, _) => avx512bw::row_block::<true, true>(tiles, acts, t0, out),
                    (false, true) => avx512bw::row_block::<true, false>(tiles, acts, t0, out),
                    (false, false) => avx512bw::row_block::<false, false>(tiles, acts, t0, out),
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        KernelLevel::Avx512Vnni => {
            // SAFETY: AVX-512F/BW/VNNI/VBMI are present and sizes were checked above.
            unsafe {
                match (narrow, acts.is_padded()) {
                    (true, _) => avx512vnni::row_block::<true, true>(tiles, acts, t0, out),
                    (false, true) => avx512vnni::row_block::<true, false>(tiles, acts, t0, out),
                    (false, false) => avx512vnni::row_block::<false, false>(tiles, acts, t0, out),
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        _ => scalar::row_block(tiles, narrow, acts, t0, out),
    }
}

/// Whether `level` has [`row_block_interleaved`], the prefill kernel over interleaved batches.
pub fn has_interleaved_kernel(level: KernelLevel) -> bool {
    cfg!(target_arch = "x86_64") && level == KernelLevel::Avx512Vnni
}

/// Computes one row block for tokens `b * BATCH ..` of batch `b` of `acts`' interleaved copy
/// ([`QuantizedActivations::interleave`]), as many as `out` holds: a multiple of
/// [`MAX_TOKENS`], up to [`BATCH`]. `out[t * 32 + r]`, bit for bit what [`row_block`] gives for
/// those tokens at `level`.
///
/// Each tile is unpacked once for all of them, up to 4 times as many tokens as [`row_block`]
/// takes, and their activations are read at offsets fixed at compile time. Panics unless
/// [`has_interleaved_kernel`] says `level` has it, or if the sizes disagree.
pub fn row_block_interleaved(
    level: KernelLevel,
    tiles: &[u8],
    narrow: bool,
    acts: &QuantizedActivations,
    b: usize,
    out: &mut [f32],
) {
    let tokens = acts.check_row_block(tiles, TILE_BYTES, narrow, b * BATCH, out);
    assert!(
        tokens <= BATCH
            && tokens.is_multiple_of(MAX_TOKENS)
            && b * BATCH + tokens <= acts.interleaved(),
        "row_block_interleaved: {tokens} tokens of batch {b} are not interleaved groups of 8"
    );
    assert!(
        has_interleaved_kernel(level) && level.is_supported(),
        "kernel level {level} has no interleaved-batch kernel here"
    );
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX-512F/BW/VNNI/VBMI are present (the level is supported) and sizes were
    // checked above.
    unsafe {
        avx512vnni::row_block_interleaved(tiles, narrow, acts, b, out)
    }
}

/// The layout of a column tile with `groups` real groups in the kernels' `NARROW` variant
/// (narrow tiles: that many groups), else a whole tile. (The Q8 kernel's too.)
#[inline(always)]
pub(super) fn layout<const NARROW: bool>(groups: usize) -> TileLayout {
    if NARROW {
        TileLayout { groups }
    } else {
        TileLayout::WHOLE
    }
}

/// Requests the first tiles of `tiles` (up to the L2 prefetch distance; of a padded matrix in
/// the file's whole tiles, the real groups only, as the kernels read them): called where a
/// thread starts on a new run of row blocks, which the kernels' own look-ahead has not covered.
pub fn prefetch_start(tiles: &[u8], narrow: bool, acts: &QuantizedActivations) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0, _MM_HINT_T1};
        if narrow || !acts.is_padded() {
            let (near, far) = (
                PREFETCH_L1_TILES * TILE_BYTES,
                PREFETCH_L2_TILES * TILE_BYTES,
            );
            for offset in (0..tiles.len().min(far)).step_by(64) {
                let line = tiles[offset..].as_ptr().cast();
                // SAFETY: prefetching is a hint, and the address is inside `tiles`.
                unsafe {
                    if offset < near {
                        _mm_prefetch::<_MM_HINT_T0>(line)
                    } else {
                        _mm_prefetch::<_MM_HINT_T1>(line)
                    }
                }
            }
            return;
        }
        let blocks = tiles.len() / (acts.column_tiles() * TILE_BYTES).max(1);
        let steps = (blocks * Step::per_block(acts)).min(PREFETCH_L2_TILES * STEPS_PER_TILE);
        let mut step = Step::ahead_of(tiles.as_ptr(), acts, 0);
        for s in 0..steps {
            if s < PREFETCH_L1_TILES * STEPS_PER_TILE {
                step.request::<_MM_HINT_T0>();
            } else {
                step.request::<_MM_HINT_T1>();
            }
            step.advance(acts);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (tiles, narrow, acts);
}

/// Requests the 5 cache lines of step `step` (0..16) of the tiles at both prefetch distances
/// ahead of `tile`: one sixteenth of a tile per group step, so whole tiles arrive in time. (A
/// narrow tile of `g` groups is `2 g` steps of the same 320 bytes.)
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_ahead(tile: *const u8, step: usize) {
    let (far, near) = (
        PREFETCH_L2_TILES * TILE_BYTES,
        PREFETCH_L1_TILES * TILE_BYTES,
    );
    request_lines(tile.wrapping_add(step * 320), 320, far, near);
}

/// Requests, line by line, the `bytes` from `at + far` into L2 and those from `at + near` into
/// L1 (the Q8 kernels' look-ahead too).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn request_lines(at: *const u8, bytes: usize, far: usize, near: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0, _MM_HINT_T1};
    for line in (0..bytes).step_by(64) {
        // SAFETY: prefetching is a hint: it never faults, even past the end of the mapping.
        unsafe {
            _mm_prefetch::<_MM_HINT_T1>(at.wrapping_add(far + line).cast());
            _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(near + line).cast());
        }
    }
}

/// The kernels' look-ahead for step `step` of `tile` (group `g` of half `h` is step
/// `h * groups + g`): the [`Lookahead`]'s walk for a padded matrix in whole tiles, else
/// [`prefetch_ahead`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn look_ahead(lookahead: &mut Option<Lookahead<'_>>, tile: *const u8, step: usize) {
    match lookahead {
        Some(walk) => walk.step(),
        None => prefetch_ahead(tile, step),
    }
}

/// One step of the order every kernel reads a row block in (column tile by column tile, half 0
/// then half 1, group by group over the groups that hold real columns), continuing into the
/// row blocks after it. The kernels' look-ahead walks this order some steps in front of them,
/// so it requests exactly the lines they will read, and never the padding.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Step {
    tile: *const u8,
    column_tile: usize,
    half: usize,
    group: usize,
}

#[cfg(target_arch = "x86_64")]
impl Step {
    /// Steps in a row block as wide as `acts`: one per real group in each of the 2 halves.
    fn per_block(acts: &QuantizedActivations) -> usize {
        2 * acts.groups()
    }

    /// The step `ahead` steps after the first one of the row block starting at `block`, for
    /// row blocks as wide as `acts`.
    fn ahead_of(block: *const u8, acts: &QuantizedActivations, ahead: usize) -> Step {
        let per_block = Step::per_block(acts).max(1);
        let (blocks, mut rest) = (ahead / per_block, ahead % per_block);
        let mut column_tile = 0;
        while rest > 0 && rest >= 2 * acts.tile_groups(column_tile) {
            rest -= 2 * acts.tile_groups(column_tile);
            column_tile += 1;
        }
        let groups = acts.tile_groups(column_tile).max(1);
        Step {
            // Tiles are stored row block after row block, so the ones ahead follow on.
            tile: block.wrapping_add((blocks * acts.column_tiles() + column_tile) * TILE_BYTES),
            column_tile,
            half: rest / groups,
            group: rest % groups,
        }
    }

    /// Requests the lines this step reads with `HINT`: its group's 256 bytes of nibbles, and in
    /// half 0 the group's 32 scales and 32 mins (half 1 reads the same lines).
    #[inline(always)]
    fn request<const HINT: i32>(self) {
        use std::arch::x86_64::_mm_prefetch;
        let nibbles = self
            .tile
            .wrapping_add(NIBBLES + self.half * 2048 + self.group * 256);
        // SAFETY: prefetching is a hint: it never faults, even past the end of the mapping.
        unsafe {
            for line in 0..4 {
                _mm_prefetch::<HINT>(nibbles.wrapping_add(line * 64).cast());
            }
            if self.half == 0 {
                let index = 2 * self.group * TILE_ROWS;
                _mm_prefetch::<HINT>(self.tile.wrapping_add(SCALES + index).cast());
                _mm_prefetch::<HINT>(self.tile.wrapping_add(MINS + index).cast());
            }
        }
    }

    #[inline(always)]
    fn advance(&mut self, acts: &QuantizedActivations) {
        self.group += 1;
        if self.group >= acts.tile_groups(self.column_tile) {
            self.group = 0;
            self.half += 1;
            if self.half == 2 {
                self.half = 0;
                self.tile = self.tile.wrapping_add(TILE_BYTES);
                self.column_tile += 1;
                if self.column_tile == acts.column_tiles() {
                    self.column_tile = 0;
                }
            }
        }
    }
}

/// The look-ahead of the kernels' `PADDED` variant: requests the lines of the step
/// [`PREFETCH_L2_TILES`] whole tiles in front into L2 and of the step [`PREFETCH_L1_TILES`]
/// in front into L1, one step per step computed. (On a matrix without padding that is what
/// [`prefetch_ahead`] requests, at more cost.)
#[cfg(target_arch = "x86_64")]
struct Lookahead<'a> {
    acts: &'a QuantizedActivations,
    far: Step,
    near: Step,
}

#[cfg(target_arch = "x86_64")]
impl<'a> Lookahead<'a> {
    fn new(tiles: &[u8], acts: &'a QuantizedActivations) -> Lookahead<'a> {
        Lookahead {
            acts,
            far: Step::ahead_of(tiles.as_ptr(), acts, PREFETCH_L2_TILES * STEPS_PER_TILE),
            near: Step::ahead_of(tiles.as_ptr(), acts, PREFETCH_L1_TILES * STEPS_PER_TILE),
        }
    }

    #[inline(always)]
    fn step(&mut self) {
        use std::arch::x86_64::{_MM_HINT_T0, _MM_HINT_T1};
        self.far.request::<_MM_HINT_T1>();
        self.far.advance(self.acts);
        self.near.request::<_MM_HINT_T0>();
        self.near.advance(self.acts);
    }
}

fn bf16(bytes: &[u8], index: usize) -> f32 {
    bf16_to_f32(u16::from_le_bytes([bytes[2 * index], bytes[2 * index + 1]]))
}

/// The reference twin: plain loops in the order the format describes.
mod scalar {
    use super::*;

    pub fn tile_isums(tile: &[u8], xq: &[i8], out: &mut [i32; TILE_ROWS * GROUPS]) {
        let nibbles = &tile[NIBBLES..TILE_BYTES];
        for g in 0..GROUPS {
            for r in 0..TILE_ROWS {
                let mut sum = 0i32;
                for c in g * BLOCK..(g + 1) * BLOCK {
                    let byte = nibbles[(r / 16) * 2048 + c * 8 + (r % 16) / 2];
                    let q = if r % 2 == 0 { byte & 0x0F } else { byte >> 4 };
                    sum += i32::from(q) * i32::from(xq[c]);
                }
                out[g * TILE_ROWS + r] = sum;
            }
        }
    }

    /// A narrow last tile is widened back to a whole one (zeros where it holds no groups), so
    /// the twin reads every tile the one way the format describes.
    pub fn row_block(
        tiles: &[u8],
        narrow: bool,
        acts: &QuantizedActivations,
        t0: usize,
        out: &mut [f32],
    ) {
        out.fill(0.0);
        let mut widened = Vec::new();
        for ct in 0..acts.column_tiles() {
            let tile = acts.whole_tile(tiles, TILE_BYTES, narrow, ct, &mut widened);
            for (t, y) in out.chunks_exact_mut(TILE_ROWS).enumerate() {
                let xq = &acts.xq(t0 + t)[ct * TILE_COLS..(ct + 1) * TILE_COLS];
                let scales = &acts.scales(t0 + t)[ct * GROUPS..(ct + 1) * GROUPS];
                let sums = &acts.sums(t0 + t)[ct * GROUPS..(ct + 1) * GROUPS];
                let mut isums = [0i32; TILE_ROWS * GROUPS];
                tile_isums(tile, xq, &mut isums);
                for g in 0..acts.tile_groups(ct) {
                    for (r, y) in y.iter_mut().enumerate() {
                        let j = g * TILE_ROWS + r;
                        let d = bf16(&tile[SCALES..], j) * scales[g];
                        *y += d * isums[j] as f32 + bf16(&tile[MINS..], j) * sums[g];
                    }
                }
            }
        }
    }
}

/// In each 16-byte lane, interleaves two columns' 8 row-pair bytes:
/// `[a0 b0 a1 b1 .. a7 b7]`, so `vpmaddubsw` adds two columns of the same row.
#[cfg(target_arch = "x86_64")]
const PAIR_COLUMNS: [i8; 16] = [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15];

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::*;
    use std::arch::x86_64::*;

    /// Integer sums of one group (32 columns) for the 16 rows of half `h`: rows 0..8, 8..16.
    #[inline(always)]
    unsafe fn group_half(nib: *const u8, xq: *const i8) -> (__m256i, __m256i) {
        let pairs = _mm256_broadcastsi128_si256(_mm_loadu_si128(PAIR_COLUMNS.as_ptr().cast()));
        // Lane j of load l holds columns 4l + 2j and 4l + 2j + 1: pick their activations.
        let act_pattern = _mm256_setr_epi8(
            0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2,
            3, 2, 3,
        );
        let low = _mm256_set1_epi8(0x0F);
        let (mut even, mut odd) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for l in 0..8 {
            // SAFETY (caller): `nib` has 256 readable bytes and `xq` 32.
            let v = _mm256_shuffle_epi8(_mm256_loadu_si256(nib.add(32 * l).cast()), pairs);
            let x = _mm256_set1_epi32(xq.add(4 * l).cast::<i32>().read_unaligned());
            let x = _mm256_shuffle_epi8(x, act_pattern);
            let lo = _mm256_and_si256(v, low);
            let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            // Each i16 sums <= 16 products of at most 15 * 127: no overflow.
            even = _mm256_add_epi16(even, _mm256_maddubs_epi16(lo, x));
            odd = _mm256_add_epi16(odd, _mm256_maddubs_epi16(hi, x));
        }
        let widen = |v: __m256i| {
            _mm256_add_epi32(
                _mm256_cvtepi16_epi32(_mm256_castsi256_si128(v)),
                _mm256_cvtepi16_epi32(_mm256_extracti128_si256(v, 1)),
            )
        };
        let (even, odd) = (widen(even), widen(odd)); // row pairs p = 0..8
        let a = _mm256_unpacklo_epi32(even, odd); // rows 0..4 | 8..12
        let b = _mm256_unpackhi_epi32(even, odd); // rows 4..8 | 12..16
        (
            _mm256_permute2x128_si256(a, b, 0x20),
            _mm256_permute2x128_si256(a, b, 0x31),
        )
    }

    #[inline(always)]
    unsafe fn bf16x8(p: *const u8) -> __m256 {
        let v = _mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()));
        _mm256_castsi256_ps(_mm256_slli_epi32(v, 16))
    }

    #[cfg(test)]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn tile_isums(tile: &[u8], xq: &[i8], out: &mut [i32; TILE_ROWS * GROUPS]) {
        for g in 0..GROUPS {
            for h in 0..2 {
                let nib = tile.as_ptr().add(NIBBLES + h * 2048 + g * 256);
                let (a, b) = group_half(nib, xq.as_ptr().add(g * BLOCK));
                let dst = out.as_mut_ptr().add(g * TILE_ROWS + h * 16);
                _mm256_storeu_si256(dst.cast(), a);
                _mm256_storeu_si256(dst.add(8).cast(), b);
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn row_block<const PADDED: bool, const NARROW: bool>(
        tiles: &[u8],
        acts: &QuantizedActivations,
        t0: usize,
        out: &mut [f32],
    ) {
        for (t, y) in out.chunks_exact_mut(TILE_ROWS).enumerate() {
            let (xq, scales, sums) = (acts.xq(t0 + t), acts.scales(t0 + t), acts.sums(t0 + t));
            let mut acc = [_mm256_setzero_ps(); 4];
            let mut lookahead = (PADDED && !NARROW).then(|| Lookahead::new(tiles, acts));
            let mut base = tiles.as_ptr();
            for ct in 0..acts.column_tiles() {
                let groups = acts.groups_in::<PADDED>(ct);
                let layout = layout::<NARROW>(groups);
                for h in 0..2 {
                    for g in 0..groups {
                        let gi = ct * GROUPS + g;
                        look_ahead(&mut lookahead, base, h * layout.groups + g);
                        let sx = _mm256_set1_ps(scales[gi]);
                        let xs = _mm256_set1_ps(sums[gi]);
                        let nib = base.add(layout.q4_1_codes(h) + g * 256);
                        let (a, b) = group_half(nib, xq.as_ptr().add(gi * BLOCK));
                        for (i, isum) in [a, b].into_iter().enumerate() {
                            let j = g * TILE_ROWS + h * 16 + i * 8;
                            let d = _mm256_mul_ps(bf16x8(base.add(SCALES + 2 * j)), sx);
                            let m = bf16x8(base.add(layout.q4_1_mins() + 2 * j));
                            let k = 2 * h + i;
                            acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc[k]);
                            acc[k] = _mm256_fmadd_ps(m, xs, acc[k]);
                        }
                    }
                }
                // One past the end after the last tile: never read.
                base = base.wrapping_add(layout.groups * GROUP_BYTES);
            }
            for (k, a) in acc.iter().enumerate() {
                _mm256_storeu_ps(y.as_mut_ptr().add(8 * k), *a);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512bw {
    use super::*;
    use std::arch::x86_64::*;

    /// Integer sums of one group (32 columns) for the 16 rows of one half.
    #[inline(always)]
    unsafe fn group_half(nib: *const u8, xq: *const i8) -> __m512i {
        let pairs = _mm512_broadcast_i32x4(_mm_loadu_si128(PAIR_COLUMNS.as_ptr().cast()));
        // Lane j of load l holds columns 8l + 2j and 8l + 2j + 1: pick their activations.
        let act_pattern = _mm512_set_epi64(
            0x0706_0706_0706_0706,
            0x0706_0706_0706_0706,
            0x0504_0504_0504_0504,
            0x0504_0504_0504_0504,
            0x0302_0302_0302_0302,
            0x0302_0302_0302_0302,
            0x0100_0100_0100_0100,
            0x0100_0100_0100_0100,
        );
        let low = _mm512_set1_epi8(0x0F);
        let (mut even, mut odd) = (_mm512_setzero_si512(), _mm512_setzero_si512());
        for l in 0..4 {
            // SAFETY (caller): `nib` has 256 readable bytes and `xq` 32.
            let v = _mm512_shuffle_epi8(_mm512_loadu_si512(nib.add(64 * l).cast()), pairs);
            let x = _mm512_set1_epi64(xq.add(8 * l).cast::<i64>().read_unaligned());
            let x = _mm512_shuffle_epi8(x, act_pattern);
            let lo = _mm512_and_si512(v, low);
            let hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
            // Each i16 sums <= 8 products of at most 15 * 127: no overflow.
            even = _mm512_add_epi16(even, _mm512_maddubs_epi16(lo, x));
            odd = _mm512_add_epi16(odd, _mm512_maddubs_epi16(hi, x));
        }
        let widen = |v: __m512i| {
            let s = _mm512_add_epi32(
                _mm512_cvtepi16_epi32(_mm512_castsi512_si256(v)),
                _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(v, 1)),
            );
            _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1))
        };
        let (even, odd) = (widen(even), widen(odd)); // row pairs p = 0..8
        let a = _mm256_unpacklo_epi32(even, odd); // rows 0..4 | 8..12
        let b = _mm256_unpackhi_epi32(even, odd); // rows 4..8 | 12..16
        let first = _mm256_permute2x128_si256(a, b, 0x20);
        let second = _mm256_permute2x128_si256(a, b, 0x31);
        _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1)
    }

    #[cfg(test)]
    #[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
    pub unsafe fn tile_isums(tile: &[u8], xq: &[i8], out: &mut [i32; TILE_ROWS * GROUPS]) {
        for g in 0..GROUPS {
            for h in 0..2 {
                let nib = tile.as_ptr().add(NIBBLES + h * 2048 + g * 256);
                let v = group_half(nib, xq.as_ptr().add(g * BLOCK));
                _mm512_storeu_si512(out.as_mut_ptr().add(g * TILE_ROWS + h * 16).cast(), v);
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
    pub unsafe fn row_block<const PADDED: bool, const NARROW: bool>(
        tiles: &[u8],
        acts: &QuantizedActivations,
        t0: usize,
        out: &mut [f32],
    ) {
        for (t, y) in out.chunks_exact_mut(TILE_ROWS).enumerate() {
            let (xq, scales, sums) = (acts.xq(t0 + t), acts.scales(t0 + t), acts.sums(t0 + t));
            let mut acc = [_mm512_setzero_ps(); 2];
            let mut lookahead = (PADDED && !NARROW).then(|| Lookahead::new(tiles, acts));
            let mut base = tiles.as_ptr();
            for ct in 0..acts.column_tiles() {
                let groups = acts.groups_in::<PADDED>(ct);
                let layout = layout::<NARROW>(groups);
                for (h, acc) in acc.iter_mut().enumerate() {
                    for g in 0..groups {
                        let gi = ct * GROUPS + g;
                        look_ahead(&mut lookahead, base, h * layout.groups + g);
                        let sx = _mm512_set1_ps(scales[gi]);
                        let xs = _mm512_set1_ps(sums[gi]);
                        let isum = group_half(
                            base.add(layout.q4_1_codes(h) + g * 256),
                            xq.as_ptr().add(gi * BLOCK),
                        );
                        let j = g * TILE_ROWS + h * 16;
                        let d =
                            _mm512_mul_ps(super::avx512vnni::bf16x16(base.add(SCALES + 2 * j)), sx);
                        let m = super::avx512vnni::bf16x16(base.add(layout.q4_1_mins() + 2 * j));
                        *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, *acc);
                        *acc = _mm512_fmadd_ps(m, xs, *acc);
                    }
                }
                // One past the end after the last tile: never read.
                base = base.wrapping_add(layout.groups * GROUP_BYTES);
            }
            _mm512_storeu_ps(y.as_mut_ptr(), acc[0]);
            _mm512_storeu_ps(y.as_mut_ptr().add(16), acc[1]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx512vnni {
    use super::*;
    use std::arch::x86_64::*;

    /// `vpermt2b` indices taking (low nibbles, high nibbles) of 8 columns x 8 row pairs to
    /// 16 rows x 4 columns (row r in dword r): byte `r * 4 + i` = column `i`, row `r`.
    const fn row_major_index(first_column: usize) -> [u8; 64] {
        let mut idx = [0u8; 64];
        let mut r = 0;
        while r < 16 {
            let mut i = 0;
            while i < 4 {
                idx[r * 4 + i] = ((r & 1) * 64 + (first_column + i) * 8 + r / 2) as u8;
                i += 1;
            }
            r += 1;
        }
        idx
    }
    const COLUMNS_0_4: [u8; 64] = row_major_index(0);
    const COLUMNS_4_8: [u8; 64] = row_major_index(4);

    /// 16 BF16 values at `p` as f32 (also the Q8 kernel's scales).
    #[inline(always)]
    pub(in crate::cpu) unsafe fn bf16x16(p: *const u8) -> __m512 {
        let v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast()));
        _mm512_castsi512_ps(_mm512_slli_epi32(v, 16))
    }

    /// One group (32 columns) of one half (16 rows) as eight vectors of 16 rows x 4 columns
    /// (columns 4j..4j+4 in vector j), ready for `vpdpbusd`.
    #[inline(always)]
    unsafe fn unpack_group_half(nib: *const u8) -> [__m512i; 8] {
        let idx0 = _mm512_loadu_si512(COLUMNS_0_4.as_ptr().cast());
        let idx1 = _mm512_loadu_si512(COLUMNS_4_8.as_ptr().cast());
        let low = _mm512_set1_epi8(0x0F);
        let mut w = [_mm512_setzero_si512(); 8];
        for l in 0..4 {
            // SAFETY (caller): `nib` has 256 readable bytes.
            let v = _mm512_loadu_si512(nib.add(64 * l).cast());
            let lo = _mm512_and_si512(v, low);
            let hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
            w[2 * l] = _mm512_permutex2var_epi8(lo, idx0, hi);
            w[2 * l + 1] = _mm512_permutex2var_epi8(lo, idx1, hi);
        }
        w
    }

    /// Σ q * xq over the group for 16 rows; `xq` points at the group's 32 activations.
    #[inline(always)]
    unsafe fn dot(w: &[__m512i; 8], xq: *const i8) -> __m512i {
        let x = |j: usize| _mm512_set1_epi32(xq.add(4 * j).cast::<i32>().read_unaligned());
        let mut a = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], x(0));
        let mut b = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], x(1));
        for j in (2..8).step_by(2) {
            a = _mm512_dpbusd_epi32(a, w[j], x(j));
            b = _mm512_dpbusd_epi32(b, w[j + 1], x(j + 1));
        }
        _mm512_add_epi32(a, b)
    }

    /// One group's part of 16 row sums of one token: `acc + isum * (d * sx) + m * sum`, as a
    /// multiply, then two fused multiply-adds. Both kernels add a group this one way, which is
    /// what makes their results the same bits.
    #[inline(always)]
    unsafe fn add_group(
        acc: __m512,
        isum: __m512i,
        d: __m512,
        m: __m512,
        sx: f32,
        sum: f32,
    ) -> __m512 {
        let dsx = _mm512_mul_ps(d, _mm512_set1_ps(sx));
        let a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dsx, acc);
        _mm512_fmadd_ps(m, _mm512_set1_ps(sum), a)
    }

    #[cfg(test)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi,avx2,fma")]
    pub unsafe fn tile_isums(tile: &[u8], xq: &[i8], out: &mut [i32; TILE_ROWS * GROUPS]) {
        for g in 0..GROUPS {
            for h in 0..2 {
                let w = unpack_group_half(tile.as_ptr().add(NIBBLES + h * 2048 + g * 256));
                let v = dot(&w, xq.as_ptr().add(g * BLOCK));
                _mm512_storeu_si512(out.as_mut_ptr().add(g * TILE_ROWS + h * 16).cast(), v);
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi,avx2,fma")]
    pub unsafe fn row_block<const PADDED: bool, const NARROW: bool>(
        tiles: &[u8],
        acts: &QuantizedActivations,
        t0: usize,
        out: &mut [f32],
    ) {
        const { assert!(MAX_TOKENS == 8, "one arm per token count") };
        match out.len() / TILE_ROWS {
            8 => row_block_batch::<8, PADDED, NARROW>(tiles, acts, t0, out),
            7 => row_block_batch::<7, PADDED, NARROW>(tiles, acts, t0, out),
            6 => row_block_batch::<6, PADDED, NARROW>(tiles, acts, t0, out),
            5 => row_block_batch::<5, PADDED, NARROW>(tiles, acts, t0, out),
            4 => row_block_batch::<4, PADDED, NARROW>(tiles, acts, t0, out),
            3 => row_block_batch::<3, PADDED, NARROW>(tiles, acts, t0, out),
            2 => row_block_batch::<2, PADDED, NARROW>(tiles, acts, t0, out),
            _ => row_block_batch::<1, PADDED, NARROW>(tiles, acts, t0, out),
        }
    }

    /// Exactly `N` tokens (up to [`MAX_TOKENS`]), reading the tiles front to back once with the
    /// look-ahead: in each half of each tile the `N` accumulators of that half stay in
    /// registers and each unpacked group serves all `N` tokens. (Running one half over all the
    /// tiles and then the other kept them in registers too, but read each tile twice, half by
    /// half, with no look-ahead: a pass of 8 tokens that memory bounds, as a speculative
    /// verification is, took twice the time of a pass of 7.)
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi,avx2,fma")]
    #[allow(clippy::needless_range_loop)] // `t` indexes several parallel arrays
    unsafe fn row_block_batch<const N: usize, const PADDED: bool, const NARROW: bool>(
        tiles: &[u8],
        acts: &QuantizedActivations,
        t0: usize,
        out: &mut [f32],
    ) {
        let xq: [*const i8; N] = std::array::from_fn(|t| acts.xq(t0 + t).as_ptr());
        let scales: [*const f32; N] = std::array::from_fn(|t| acts.scales(t0 + t).as_ptr());
        let sums: [*const f32; N] = std::array::from_fn(|t| acts.sums(t0 + t).as_ptr());
        let mut acc = [[_mm512_setzero_ps(); N]; 2];
        let mut lookahead = (PADDED && !NARROW).then(|| Lookahead::new(tiles, acts));
        let mut base = tiles.as_ptr();
        for ct in 0..acts.column_tiles() {
            let groups = acts.groups_in::<PADDED>(ct);
            let layout = layout::<NARROW>(groups);
            for h in 0..2 {
                let mut half = acc[h];
                for g in 0..groups {
                    let gi = ct * GROUPS + g;
                    look_ahead(&mut lookahead, base, h * layout.groups + g);
                    let w = unpack_group_half(base.add(layout.q4_1_codes(h) + g * 256));
                    let j = g * TILE_ROWS + h * 16;
                    let d = bf16x16(base.add(SCALES + 2 * j));
                    let m = bf16x16(base.add(layout.q4_1_mins() + 2 * j));
                    for t in 0..N {
                        let isum = dot(&w, xq[t].add(gi * BLOCK));
                        half[t] =
                            add_group(half[t], isum, d, m, *scales[t].add(gi), *sums[t].add(gi));
                    }
                }
                acc[h] = half;
            }
            // One past the end after the last tile: never read.
            base = base.wrapping_add(layout.groups * GROUP_BYTES);
        }
        for t in 0..N {
            for h in 0..2 {
                _mm512_storeu_ps(out.as_mut_ptr().add(t * TILE_ROWS + h * 16), acc[h][t]);
            }
        }
    }

    /// Tokens whose sums [`dots`] interleaves: the batch kernel takes whole groups of them.
    const LANES: usize = MAX_TOKENS;

    /// [`dot`] for [`LANES`] consecutive tokens of an interleaved batch (`xq` at the first
    /// one's 32 values, the next ones after it), one chain of `vpdpbusd` each, interleaved
    /// token by token: the same integer sums, with 8 independent chains in flight instead of
    /// each token waiting for its own chain of 8 (a loop over tokens that the compiler kept
    /// rolled left the units waiting on that latency).
    #[inline(always)]
    unsafe fn dots(w: &[__m512i; 8], xq: *const i8) -> [__m512i; LANES] {
        let x = |t: usize, j: usize| {
            _mm512_set1_epi32(xq.add(t * BLOCK + 4 * j).cast::<i32>().read_unaligned())
        };
        let mut sums = [_mm512_setzero_si512(); LANES];
        for (j, &w) in w.iter().enumerate() {
            for (t, sum) in sums.iter_mut().enumerate() {
                *sum = _mm512_dpbusd_epi32(*sum, w, x(t, j));
            }
        }
        sums
    }

    /// [`row_block_interleaved`](super::row_block_interleaved): one arm per token count and
    /// padding, so every loop over tokens has a length fixed at compile time (a count read at
    /// run time made a 512-token prefill 7% slower).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi,avx2,fma")]
    pub unsafe fn row_block_interleaved(
        tiles: &[u8],
        narrow: bool,
        acts: &QuantizedActivations,
        b: usize,
        out: &mut [f32],
    ) {
        const { assert!(BATCH == 4 * LANES, "one arm per group of LANES tokens") };
        macro_rules! arms {
            ($($n:literal),*) => {
                match (out.len() / TILE_ROWS, narrow, acts.is_padded()) {
                    $(
                        ($n, true, _) => interleaved::<$n, true, true>(tiles, acts, b, out),
                        ($n, false, true) => interleaved::<$n, true, false>(tiles, acts, b, out),
                        ($n, false, false) => interleaved::<$n, false, false>(tiles, acts, b, out),
                    )*
                    (n, ..) => unreachable!("{n} tokens: checked to be whole groups of {LANES}"),
                }
            };
        }
        arms!(32, 24, 16, 8)
    }

    /// [`row_block_batch`]'s loop over the `N` tokens of interleaved batch `b` (whole groups of
    /// [`LANES`]). At 32 tokens its accumulators do not fit the 32 registers with the unpacked
    /// group, so the half not being computed waits in memory (once per tile and half: a few
    /// loads and stores per 3,000 instructions).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi,avx2,fma")]
    #[allow(clippy::needless_range_loop)] // `t` and `h` index several parallel arrays
    unsafe fn interleaved<const N: usize, const PADDED: bool, const NARROW: bool>(
        tiles: &[u8],
        acts: &QuantizedActivations,
        b: usize,
        out: &mut [f32],
    ) {
        let (xq, ss) = acts.batch(b);
        let mut acc = [[_mm512_setzero_ps(); N]; 2];
        let mut lookahead = (PADDED && !NARROW).then(|| Lookahead::new(tiles, acts));
        let mut base = tiles.as_ptr();
        for ct in 0..acts.column_tiles() {
            let groups = acts.groups_in::<PADDED>(ct);
            let layout = layout::<NARROW>(groups);
            for h in 0..2 {
                let mut half = acc[h];
                for g in 0..groups {
                    let gi = ct * GROUPS + g;
                    look_ahead(&mut lookahead, base, h * layout.groups + g);
                    let w = unpack_group_half(base.add(layout.q4_1_codes(h) + g * 256));
                    let j = g * TILE_ROWS + h * 16;
                    let d = bf16x16(base.add(SCALES + 2 * j));
                    let m = bf16x16(base.add(layout.q4_1_mins() + 2 * j));
                    // The group's values of the batch's tokens, and their scales and sums.
                    let x = xq.as_ptr().add(gi * BATCH * BLOCK);
                    let s = ss.as_ptr().add(gi * 2 * BATCH);
                    for t0 in (0..N).step_by(LANES) {
                        let isums = dots(&w, x.add(t0 * BLOCK));
                        for (i, isum) in isums.into_iter().enumerate() {
                            let t = t0 + i;
                            half[t] = add_group(half[t], isum, d, m, *s.add(t), *s.add(BATCH + t));
                        }
                    }
                }
                acc[h] = half;
            }
            // One past the end after the last tile: never read.
            base = base.wrapping_add(layout.groups * GROUP_BYTES);
        }
        for t in 0..N {
            for h in 0..2 {
                _mm512_storeu_ps(out.as_mut_ptr().add(t * TILE_ROWS + h * 16), acc[h][t]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_data::{extreme_xq, Lcg};

    /// Tiles with random nibbles and random small BF16 scales/mins.
    fn random_tiles(count: usize, rng: &mut Lcg) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(count * TILE_BYTES);
        for _ in 0..count {
            for _ in 0..512 {
                let v = half_bf16(rng.unit() * 0.05);
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            bytes.extend((0..4096).map(|_| rng.next() as u8));
        }
        bytes
    }

    fn half_bf16(v: f32) -> u16 {
        (v.to_bits() >> 16) as u16
    }

    #[test]
    fn integer_sums_equal_the_scalar_twin_at_every_level() {
        let mut rng = Lcg(7);
        let tile = random_tiles(1, &mut rng);
        let all_fifteen = {
            let mut t = tile.clone();
            t[NIBBLES..TILE_BYTES].fill(0xFF);
            t
        };
        let random_xq: Vec<i8> = (0..256).map(|_| (rng.next() % 255) as i8).collect();
        for (tile, xq) in [
            (&tile, &random_xq),
            (&all_fifteen, &extreme_xq()),
            (&tile, &extreme_xq()),
        ] {
            let reference = tile_isums(KernelLevel::Scalar, tile, xq);
            for level in KernelLevel::supported() {
                assert_eq!(
                    tile_isums(level, tile, xq).to_vec(),
                    reference.to_vec(),
                    "{level} integer sums differ from the scalar twin"
                );
            }
        }
    }

    #[test]
    fn scalar_isums_follow_the_documented_nibble_layout() {
        // Row 5, column 40: byte (5/16)*2048 + 40*8 + 5/2 = 322, high nibble (odd row).
        let mut tile = vec![0u8; TILE_BYTES];
        tile[NIBBLES + 322] = 0x90;
        let mut xq = vec![0i8; 256];
        xq[40] = -3;
        let sums = tile_isums(KernelLevel::Scalar, &tile, &xq);
        assert_eq!(sums[32 + 5], -27, "group 1, row 5");
        assert_eq!(sums.iter().filter(|&&s| s != 0).count(), 1);
    }

    /// Dequantizes the tiles of one row block to `[32][cols]` f32, straight from the layout.
    fn dequantize(tiles: &[u8]) -> Vec<Vec<f32>> {
        let col_tiles = tiles.len() / TILE_BYTES;
        let mut rows = vec![vec![0.0; col_tiles * 256]; 32];
        for (ct, tile) in tiles.chunks_exact(TILE_BYTES).enumerate() {
            for (r, row) in rows.iter_mut().enumerate() {
                for c in 0..256 {
                    let j = (c / 32) * 32 + r;
                    let byte = tile[NIBBLES + (r / 16) * 2048 + c * 8 + (r % 16) / 2];
                    let q = if r % 2 == 0 { byte & 15 } else { byte >> 4 };
                    row[ct * 256 + c] = f32::from(q) * bf16(tile, j) + bf16(&tile[MINS..], j);
                }
            }
        }
        rows
    }

    #[test]
    fn row_block_matches_float_reference_at_every_level_and_token_count() {
        let mut rng = Lcg(11);
        let cols = 600; // padded to 768: three tiles
        let tiles = random_tiles(3, &mut rng);
        let rows = dequantize(&tiles);
        for tokens in 1..=MAX_TOKENS {
            let x: Vec<f32> = (0..tokens * cols).map(|_| rng.unit()).collect();
            let mut acts = QuantizedActivations::new();
            acts.quantize(KernelLevel::Scalar, &x, tokens, cols);
            let mut reference = vec![0.0; tokens * 32];
            row_block(KernelLevel::Scalar, &tiles, false, &acts, 0, &mut reference);
            for t in 0..tokens {
                for r in 0..32 {
                    let exact: f32 = (0..cols).map(|k| rows[r][k] * x[t * cols + k]).sum();
                    let got = reference[t * 32 + r];
                    assert!(
                        (got - exact).abs() < 0.05,
                        "scalar row {r} token {t}: {got} vs {exact}"
                    );
                }
            }
            for level in KernelLevel::supported() {
                let mut out = vec![f32::NAN; tokens * 32];
                row_block(level, &tiles, false, &acts, 0, &mut out);
                for (a, b) in out.iter().zip(&reference) {
                    assert!(
                        (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                        "{level}: {a} vs scalar {b}"
                    );
                }
            }
        }
    }

    /// Group `g` (and every group after it) of column tile `ct` of a one-row-block `tiles`
    /// overwritten with `fill` bytes: scales, mins and nibbles.
    fn fill_groups_from(tiles: &mut [u8], ct: usize, g: usize, fill: u8) {
        let tile = &mut tiles[ct * TILE_BYTES..(ct + 1) * TILE_BYTES];
        for group in g..GROUPS {
            let j = 2 * group * TILE_ROWS;
            tile[SCALES + j..SCALES + j + 64].fill(fill);
            tile[MINS + j..MINS + j + 64].fill(fill);
            for h in 0..2 {
                let at = NIBBLES + h * 2048 + group * 256;
                tile[at..at + 256].fill(fill);
            }
        }
    }

    #[test]
    fn padding_groups_are_never_read() {
        // K = 600: 19 groups hold columns (the last one partly), the 5 after them pad the
        // third tile. Zero padding and NaN padding (0xFFFF scales and mins) must give the same
        // bits at every level and token count: the kernels skip those groups.
        let mut rng = Lcg(5);
        let cols = 600;
        let mut zeroed = random_tiles(3, &mut rng);
        fill_groups_from(&mut zeroed, 2, 3, 0);
        let mut poisoned = zeroed.clone();
        fill_groups_from(&mut poisoned, 2, 3, 0xFF);
        for tokens in [1, 3, MAX_TOKENS] {
            let x: Vec<f32> = (0..tokens * cols).map(|_| rng.unit()).collect();
            let mut acts = QuantizedActivations::new();
            acts.quantize(KernelLevel::Scalar, &x, tokens, cols);
            assert_eq!(acts.groups(), 19);
            for level in KernelLevel::supported() {
                let (mut a, mut b) = (vec![0.0; tokens * 32], vec![0.0; tokens * 32]);
                row_block(level, &zeroed, false, &acts, 0, &mut a);
                row_block(level, &poisoned, false, &acts, 0, &mut b);
                assert!(b.iter().all(|v| v.is_finite()), "{level} read the padding");
                let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "{level}, {tokens} tokens");
            }
        }
    }

    #[test]
    fn a_narrow_last_tile_gives_the_bits_of_the_whole_one() {
        // K = 600: the third tile holds 3 groups of real columns. Narrowed as
        // `Weights::copy_into_huge_pages` narrows it, every level and token count must give
        // the bits it gives on the whole tiles.
        let mut rng = Lcg(9);
        let cols = 600;
        let mut whole = random_tiles(3, &mut rng);
        fill_groups_from(&mut whole, 2, 3, 0);
        let mut narrow = whole[..2 * TILE_BYTES].to_vec();
        q4nx::tile::narrow_tile(&whole[2 * TILE_BYTES..], false, 3, &mut narrow);
        assert_eq!(narrow.len(), 2 * TILE_BYTES + 3 * GROUP_BYTES);
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for tokens in 1..=MAX_TOKENS {
            let x: Vec<f32> = (0..tokens * cols).map(|_| rng.unit()).collect();
            let mut acts = QuantizedActivations::new();
            acts.quantize(KernelLevel::Scalar, &x, tokens, cols);
            for level in KernelLevel::supported() {
                let (mut a, mut b) = (vec![0.0; tokens * 32], vec![0.0; tokens * 32]);
                row_block(level, &whole, false, &acts, 0, &mut a);
                row_block(level, &narrow, true, &acts, 0, &mut b);
                assert_eq!(bits(&a), bits(&b), "{level}, {tokens} tokens");
            }
        }
    }

    #[test]
    fn interleaved_batches_give_the_bits_of_row_block() {
        // Two whole batches and one of 16 tokens (3 tokens more are left to `row_block`), on
        // K = 512 (whole tiles), K = 600 in whole tiles with NaN padding (the `PADDED` variant
        // must skip it) and K = 600 narrowed: each batch gives, bit for bit, what `row_block`
        // gives for its tokens 8 at a time.
        let level = KernelLevel::Avx512Vnni;
        if !(has_interleaved_kernel(level) && level.is_supported()) {
            eprintln!("skipped: this CPU has no AVX-512 VNNI (the only batch kernel)");
            return;
        }
        let mut rng = Lcg(13);
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let mut padded = random_tiles(3, &mut rng);
        fill_groups_from(&mut padded, 2, 3, 0xFF);
        let mut narrow = padded[..2 * TILE_BYTES].to_vec();
        q4nx::tile::narrow_tile(&padded[2 * TILE_BYTES..], false, 3, &mut narrow);
        let whole = random_tiles(2, &mut rng);
        let (interleaved, tokens) = (2 * BATCH + 16, 2 * BATCH + 19);
        for (cols, tiles, is_narrow) in [
            (512, &whole, false),
            (600, &padded, false),
            (600, &narrow, true),
        ] {
            let mut x: Vec<f32> = (0..tokens * cols).map(|_| rng.unit()).collect();
            x[..cols].fill(-1.0); // a token of extreme values (-127 after quantization)
            let mut acts = QuantizedActivations::new();
            acts.quantize(KernelLevel::Scalar, &x, tokens, cols);
            acts.interleave(interleaved);
            for b in 0..interleaved.div_ceil(BATCH) {
                let n = BATCH.min(interleaved - b * BATCH);
                let mut batch = vec![f32::NAN; n * 32];
                row_block_interleaved(level, tiles, is_narrow, &acts, b, &mut batch);
                let mut eights = vec![f32::NAN; n * 32];
                for (i, part) in eights.chunks_exact_mut(MAX_TOKENS * 32).enumerate() {
                    let t0 = b * BATCH + i * MAX_TOKENS;
                    row_block(level, tiles, is_narrow, &acts, t0, part);
                }
                assert!(
                    batch.iter().all(|v| v.is_finite()),
                    "K {cols}: read the padding"
                );
                assert_eq!(
                    bits(&batch),
                    bits(&eights),
                    "K {cols}, narrow {is_narrow}, batch {b}"
                );
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn lookahead_walks_the_steps_the_kernels_compute() {
        // Row blocks of K = 600 (tiles of 8, 8 and 3 groups), walked over four row blocks: the
        // step `k` ahead of a block's start is the one `k` advances reach, and the order is
        // tile by tile, half by half, real group by real group.
        let mut acts = QuantizedActivations::new();
        acts.resize(1, 600);
        let base = std::ptr::null::<u8>();
        let mut expected = Vec::new();
        for block in 0..4 {
            for ct in 0..3 {
                for h in 0..2 {
                    for g in 0..acts.tile_groups(ct) {
                        expected.push(((block * 3 + ct) * TILE_BYTES, ct, h, g));
                    }
                }
            }
        }
        let as_tuple = |s: Step| (s.tile as usize, s.column_tile, s.half, s.group);
        let mut walked = Step::ahead_of(base, &acts, 0);
        for (k, want) in expected.iter().enumerate() {
            assert_eq!(as_tuple(walked), *want, "step {k} by advancing");
            assert_eq!(
                as_tuple(Step::ahead_of(base, &acts, k)),
                *want,
                "step {k} directly"
            );
            walked.advance(&acts);
        }
    }

    #[test]
    fn row_block_reads_the_requested_tokens() {
        let mut rng = Lcg(3);
        let tiles = random_tiles(1, &mut rng);
        let x: Vec<f32> = (0..4 * 256).map(|_| rng.unit()).collect();
        let mut acts = QuantizedActivations::new();
        acts.quantize(KernelLevel::Scalar, &x, 4, 256);
        let mut all = vec![0.0; 4 * 32];
        let mut last_two = vec![0.0; 2 * 32];
        for level in KernelLevel::supported() {
            row_block(level, &tiles, false, &acts, 0, &mut all);
            row_block(level, &tiles, false, &acts, 2, &mut last_two);
            assert_eq!(&all[64..], &last_two[..], "{level}");
        }
    }
}
