//! Q8 tile kernels: `y[t, r] = Σ_k W[r, k] x[t, k]` for the 32 rows of one row block, straight
//! from the Q4NX tiles, as [`super::q4_1`] does for 4-bit weights.
//!
//! A Q8 tile is 32 rows x 256 columns: 256 BF16 scales `d` indexed `g * 32 + r` (group `g` = 32
//! columns), then signed bytes with row `r`, column `c` at `(r / 16) * 4096 + c * 16 + r % 16`:
//! each column's 16 rows of a half side by side. With activations quantized per group
//! (`x ≈ xq * sx`), one group contributes `d * sx * Σ q * xq`. The integer sums `Σ q * xq` are
//! exactly equal at every level; the float part is one shared loop, so every level gives the
//! same bits.
//!
//! Output heads and embeddings imported from 8-bit GGUF weights are Q8 (an import never stores
//! a tensor below the precision the file gives it). On a small model the head is a large part
//! of every decode step: SmolLM2-135M's is 49 152 x 576.

use q4nx::tile::{
    TileLayout, GROUPS_PER_TILE as GROUPS, Q8_GROUP_BYTES as GROUP_BYTES,
    Q8_TILE_BYTES as TILE_BYTES, Q8_VALUES_AT as VALUES, SCALES_AT as SCALES, TILE_COLS, TILE_ROWS,
};

use super::level::KernelLevel;
use super::quant::{QuantizedActivations, BLOCK};

/// The integer sums of one tile against 256 quantized activations:
/// `out[g * 32 + r] = Σ_{c in group g} q[r, c] * xq[c]` (the scales' index order).
///
/// AVX-512 VNNI (with VBMI) has its own kernel; AVX2 and AVX-512BW use the AVX2 kernel; the
/// scalar level uses the scalar twin. Panics if `level` is not supported by this CPU or the slices are short.
pub fn tile_isums(level: KernelLevel, tile: &[u8], xq: &[i8]) -> [i32; TILE_ROWS * GROUPS] {
    assert!(tile.len() >= TILE_BYTES && xq.len() >= TILE_COLS);
    assert!(
        level.is_supported(),
        "kernel level {level} is not supported by this CPU"
    );
    let mut out = [0i32; TILE_ROWS * GROUPS];
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level was checked supported above; slice lengths were checked.
        KernelLevel::Avx512Vnni => unsafe { avx512vnni::tile_isums(tile, xq, &mut out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `runs_avx2` checked that this CPU has AVX2; slice lengths were checked.
        _ if runs_avx2(level) => unsafe { avx2::tile_isums(tile, xq, &mut out) },
        _ => scalar::tile_isums(tile, xq, &mut out),
    }
    out
}

/// Whether `level` runs the AVX2 kernel: the AVX2 level, and AVX-512BW (whose 512-bit
/// `vpmaddubsw` would need the same shuffles as AVX2 for no fewer instructions per byte) on a
/// CPU that has AVX2 too, as every AVX-512 CPU does.
fn runs_avx2(level: KernelLevel) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        matches!(level, KernelLevel::Avx2 | KernelLevel::Avx512Bw)
            && is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = level;
        false
    }
}

/// Computes one row block for tokens `t0 .. t0 + out.len() / 32` of `acts`:
/// `out[t * 32 + r]` = row `r` of the block times token `t0 + t`.
///
/// `tiles` holds the block's `cols_padded / 256` tiles, in order, the last one narrow if
/// `narrow` ([`TileLayout`]). Only the groups that hold real columns count
/// ([`QuantizedActivations::groups`]; the AVX-512 VNNI kernel reads no others). Panics if
/// `level` is not supported or the sizes disagree.
pub fn row_block(
    level: KernelLevel,
    tiles: &[u8],
    narrow: bool,
    acts: &QuantizedActivations,
    t0: usize,
    out: &mut [f32],
) {
    acts.check_row_block(tiles, TILE_BYTES, narrow, t0, out);
    assert!(
        level.is_supported(),
        "kernel level {level} is not supported by this CPU"
    );
    #[cfg(target_arch = "x86_64")]
    if level == KernelLevel::Avx512Vnni {
        // SAFETY: the level was checked supported above; sizes were checked.
        unsafe {
            match (narrow, acts.is_padded()) {
                (true, _) => avx512vnni::row_block::<true, true>(tiles, acts, t0, out),
                (false, true) => avx512vnni::row_block::<true, false>(tiles, acts, t0, out),
                (false, false) => avx512vnni::row_block::<false, false>(tiles, acts, t0, out),
            }
        };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if runs_avx2(level) {
        // SAFETY: `runs_avx2` checked that this CPU has AVX2; sizes were checked.
        unsafe {
            match (narrow, acts.is_padded()) {
                (true, _) => avx2::row_block::<true, true>(tiles, acts, t0, out),
                (false, true) => avx2::row_block::<true, false>(tiles, acts, t0, out),
                (false, false) => avx2::row_block::<false, false>(tiles, acts, t0, out),
            }
        };
        return;
    }
    // The scalar twin widens a narrow last tile back to a whole one (zeros where it holds no
    // groups) and reads every tile the one way the format describes.
    out.fill(0.0);
    let mut widened = Vec::new();
    for ct in 0..acts.column_tiles() {
        let tile = acts.whole_tile(tiles, TILE_BYTES, narrow, ct, &mut widened);
        let d = scales(tile);
        for (t, y) in out.chunks_exact_mut(TILE_ROWS).enumerate() {
            let xq = &acts.xq(t0 + t)[ct * TILE_COLS..(ct + 1) * TILE_COLS];
            let sx = &acts.scales(t0 + t)[ct * GROUPS..(ct + 1) * GROUPS];
            let isums = tile_isums(level, tile, xq);
            for (g, &sx) in sx.iter().enumerate().take(acts.tile_groups(ct)) {
                let j = g * TILE_ROWS;
                for ((y, d), isum) in y.iter_mut().zip(&d[j..]).zip(&isums[j..]) {
                    *y += d * sx * *isum as f32;
                }
            }
        }
    }
}

/// How far ahead of the group being computed the SIMD kernels ask for the tiles' bytes: into
/// L2 and, nearer, into L1. Without it the hardware prefetchers alone left SmolLM2-135M's
/// 2-thread decode 0.89x as fast (its head is Q8: bench/README.md).
#[cfg(target_arch = "x86_64")]
const AHEAD_L2: usize = 64 * 1024;
#[cfg(target_arch = "x86_64")]
const AHEAD_L1: usize = 8 * 1024;

/// Requests one group's worth of bytes ([`GROUP_BYTES`]) at both distances past `at`. A
/// kernel's row blocks lie one after another, so a pointer walked over them a group at a time
/// asks for every line once, in the order the kernel reads them (over whole tiles with padding
/// groups, which are skipped, it falls a little behind that distance).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn request_ahead(at: *const u8) {
    crate::cpu::q4_1::request_lines(at, GROUP_BYTES, AHEAD_L2, AHEAD_L1);
}

/// The tile's 256 BF16 scales as f32, in their index order.
fn scales(tile: &[u8]) -> [f32; TILE_ROWS * GROUPS] {
    let mut d = [0.0; TILE_ROWS * GROUPS];
    for (d, bytes) in d.iter_mut().zip(tile[SCALES..].chunks_exact(2)) {
        *d = f32::from_bits(u32::from(u16::from_le_bytes([bytes[0], bytes[1]])) << 16);
    }
    d
}

/// The reference twin: plain loops in the order the format describes.
mod scalar {
    use super::*;

    pub fn tile_isums(tile: &[u8], xq: &[i8], out: &mut [i32; TILE_ROWS * GROUPS]) {
        let values = &tile[VALUES..TILE_BYTES];
        for g in 0..GROUPS {
            for r in 0..TILE_ROWS {
                let mut sum = 0i32;
                for c in g * BLOCK..(g + 1) * BLOCK {
                    let q = values[(r / 16) * 4096 + c * 16 + r % 16] as i8;
                    sum += i32::from(q) * i32::from(xq[c]);
                }
                out[g * TILE_ROWS + r] = sum;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512vnni {
    use super::*;
    use crate::cpu::q4_1::avx512vnni::bf16x16;
    use std::arch::x86_64::*;

    /// For 64 bytes holding 4 columns x 16 rows (column-major, as a tile half stores them):
    /// output byte `r * 4 + j` takes input byte `j * 16 + r`, so each 32-bit lane holds one
    /// row's 4 columns, the operand order of `vpdpbusd`.
    const ROWS_TO_LANES: [u8; 64] = {
        let mut index = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            index[i] = ((i % 4) * 16 + i / 4) as u8;
            i += 1;
        }
        index
    };

    /// The integer sums of group `g` of `tile` for rows 0..16 and 16..32, for each of `N`
    /// tokens whose activations for the tile's columns start at `xq[t]`: each 64-byte run of
    /// weights is turned into row lanes once and serves all `N`.
    ///
    /// `vpdpbusd` multiplies unsigned by signed bytes. The weights are signed, so each is
    /// flipped to `q + 128` (xor 0x80) and `128 * Σ xq` is subtracted after: exact in i32.
    #[inline(always)]
    unsafe fn group_sums<const N: usize>(
        tile: *const u8,
        layout: TileLayout,
        g: usize,
        xq: &[*const i8; N],
    ) -> [[__m512i; 2]; N] {
        let index = _mm512_loadu_si512(ROWS_TO_LANES.as_ptr().cast());
        let flip = _mm512_set1_epi8(0x80u8 as i8);
        let mut acc = [[_mm512_setzero_si512(); 2]; N];
        let mut offset = [_mm512_setzero_si512(); N];
        for c in (g * BLOCK..(g + 1) * BLOCK).step_by(4) {
            // SAFETY (caller): the tile holds group `g` as `layout` lays it out, and each
            // `xq[t]` 256 values.
            let w = [0, 1].map(|h| {
                let w = _mm512_loadu_si512(tile.add(layout.q8_values(h) + c * 16).cast());
                _mm512_xor_si512(_mm512_permutexvar_epi8(index, w), flip)
            });
            for ((acc, offset), xq) in acc.iter_mut().zip(&mut offset).zip(xq) {
                let x = _mm512_set1_epi32(xq.add(c).cast::<i32>().read_unaligned());
                *offset = _mm512_dpbusd_epi32(*offset, flip, x);
                acc[0] = _mm512_dpbusd_epi32(acc[0], w[0], x);
                acc[1] = _mm512_dpbusd_epi32(acc[1], w[1], x);
            }
        }
        std::array::from_fn(|t| acc[t].map(|acc| _mm512_sub_epi32(acc, offset[t])))
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi")]
    pub unsafe fn tile_isums(tile: &[u8], xq: &[i8], out: &mut [i32; TILE_ROWS * GROUPS]) {
        for g in 0..GROUPS {
            let [sums] = group_sums(tile.as_ptr(), TileLayout::WHOLE, g, &[xq.as_ptr()]);
            for (h, sums) in sums.into_iter().enumerate() {
                _mm512_storeu_si512(out.as_mut_ptr().add(g * TILE_ROWS + h * 16).cast(), sums);
            }
        }
    }

    /// Tokens that share one read of the tiles (their sums and accumulators fit in registers).
    const BATCH: usize = 4;

    /// [`super::row_block`] with the float part in registers, [`BATCH`] tokens at a time.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi")]
    pub unsafe fn row_block<const PADDED: bool, const NARROW: bool>(
        tiles: &[u8],
        acts: &QuantizedActivations,
        t0: usize,
        out: &mut [f32],
    ) {
        for (b, y) in out.chunks_mut(BATCH * TILE_ROWS).enumerate() {
            let t = t0 + b * BATCH;
            match y.len() / TILE_ROWS {
                4 => batch::<4, PADDED, NARROW>(tiles, acts, t, y),
                3 => batch::<3, PADDED, NARROW>(tiles, acts, t, y),
                2 => batch::<2, PADDED, NARROW>(tiles, acts, t, y),
                _ => batch::<1, PADDED, NARROW>(tiles, acts, t, y),
            }
        }
    }

    /// `N` tokens over one read of the tiles ([`group_sums`] serves all `N`). Each group adds
    /// `(d * sx) * isum` to the 32 row sums, multiplied then added (no fused multiply-add), in
    /// the scalar twin's order, so the bits are the same.
    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // `t` indexes several parallel arrays
    unsafe fn batch<const N: usize, const PADDED: bool, const NARROW: bool>(
        tiles: &[u8],
        acts: &QuantizedActivations,
        t0: usize,
        out: &mut [f32],
    ) {
        let xq: [*const i8; N] = std::array::from_fn(|t| acts.xq(t0 + t).as_ptr());
        let sx: [*const f32; N] = std::array::from_fn(|t| acts.scales(t0 + t).as_ptr());
        let mut acc = [[_mm512_setzero_ps(); 2]; N];
        let mut base = tiles.as_ptr();
        let mut ahead = base;
        for ct in 0..acts.column_tiles() {
            let groups = acts.groups_in::<PADDED>(ct);
            let layout = crate::cpu::q4_1::layout::<NARROW>(groups);
            let xq = xq.map(|xq| xq.add(ct * TILE_COLS));
            for g in 0..groups {
                request_ahead(ahead);
                ahead = ahead.wrapping_add(GROUP_BYTES);
                let isums = group_sums(base, layout, g, &xq);
                for t in 0..N {
                    let sx = _mm512_set1_ps(*sx[t].add(ct * GROUPS + g));
                    for h in 0..2 {
                        let d = bf16x16(base.add(SCALES + 2 * (g * TILE_ROWS + h * 16)));
                        let sums = _mm512_cvtepi32_ps(isums[t][h]);
                        let term = _mm512_mul_ps(_mm512_mul_ps(d, sx), sums);
                        acc[t][h] = _mm512_add_ps(acc[t][h], term);
                    }
                }
            }
            // One past the end after the last tile: never read.
            base = base.wrapping_add(layout.groups * GROUP_BYTES);
        }
        for (t, y) in out.chunks_exact_mut(TILE_ROWS).enumerate() {
            _mm512_storeu_ps(y.as_mut_ptr(), acc[t][0]);
            _mm512_storeu_ps(y.as_mut_ptr().add(16), acc[t][1]);
        }
    }
}

/// The AVX2 kernel, for CPUs without AVX-512 VNNI. `vpmaddubsw` multiplies unsigned by signed
/// bytes into pairs summed in i16, so each product is taken as `|q| * (xq * sign q)`: at most
/// 128 * 127, a pair at most 32 512, which fits i16 (activations are -127..=127, never -128).
/// `vpmaddwd` by ones then sums the two pairs of a row into i32, exactly.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::*;
    use std::arch::x86_64::*;

    /// Within each 128-bit lane of 8 bytes of column `a` then 8 of column `b` (rows `i..i+8`):
    /// row `i + j`'s `a` and `b` side by side.
    const PAIR_ROWS: [i8; 16] = [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15];

    /// 16 rows x 4 columns of a tile half (columns `c..c+4`, 64 bytes from `p`) as each row's
    /// 4 bytes in one 32-bit lane, the order of the activations `xq[c..c+4]`: rows 0..4 | 8..12
    /// and rows 4..8 | 12..16.
    #[inline(always)]
    unsafe fn rows_to_lanes(p: *const u8) -> [__m256i; 2] {
        let pairs = _mm256_broadcastsi128_si256(_mm_loadu_si128(PAIR_ROWS.as_ptr().cast()));
        // SAFETY (caller): `p` has 64 readable bytes. Columns c | c+1, then c+2 | c+3, each
        // rearranged to rows 0..8 | rows 8..16 of the two columns side by side. (No closures
        // here: a closure does not inherit the caller's target features, and its intrinsics
        // would become calls.)
        let ab = _mm256_loadu_si256(p.cast());
        let cd = _mm256_loadu_si256(p.add(32).cast());
        let ab = _mm256_shuffle_epi8(_mm256_permute4x64_epi64(ab, 0b11_01_10_00), pairs);
        let cd = _mm256_shuffle_epi8(_mm256_permute4x64_epi64(cd, 0b11_01_10_00), pairs);
        [_mm256_unpacklo_epi16(ab, cd), _mm256_unpackhi_epi16(ab, cd)]
    }

    /// The integer sums of group `g` of `tile` for rows 0..16 and 16..32 (each as rows
    /// 0..8, 8..16 of the half), for each of `N` tokens whose activations for the tile's
    /// columns start at `xq[t]`.
    #[inline(always)]
    unsafe fn group_sums<const N: usize>(
        tile: *const u8,
        layout: TileLayout,
        g: usize,
        xq: &[*const i8; N],
    ) -> [[__m256i; 4]; N] {
        let ones = _mm256_set1_epi16(1);
        // Per half: rows 0..4 | 8..12 and rows 4..8 | 12..16.
        let mut acc = [[_mm256_setzero_si256(); 4]; N];
        for c in (g * BLOCK..(g + 1) * BLOCK).step_by(4) {
            // SAFETY (caller): the tile holds group `g` as `layout` lays it out, and each
            // `xq[t]` 256 values.
            let [w0, w1] = rows_to_lanes(tile.add(layout.q8_values(0) + c * 16));
            let [w2, w3] = rows_to_lanes(tile.add(layout.q8_values(1) + c * 16));
            let w = [w0, w1, w2, w3];
            let mut magnitude = w;
            for m in &mut magnitude {
                *m = _mm256_abs_epi8(*m);
            }
            for (acc, xq) in acc.iter_mut().zip(xq) {
                let x = _mm256_set1_epi32(xq.add(c).cast::<i32>().read_unaligned());
                for i in 0..4 {
                    let pairs = _mm256_maddubs_epi16(magnitude[i], _mm256_sign_epi8(x, w[i]));
                    acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(pairs, ones));
                }
            }
        }
        // Back to row order: rows 0..8 and 8..16 of each half.
        for [a0, a1, b0, b1] in &mut acc {
            (*a0, *a1, *b0, *b1) = (
                _mm256_permute2x128_si256(*a0, *a1, 0x20),
                _mm256_permute2x128_si256(*a0, *a1, 0x31),
                _mm256_permute2x128_si256(*b0, *b1, 0x20),
                _mm256_permute2x128_si256(*b0, *b1, 0x31),
            );
        }
        acc
    }

    #[target_feature(enable = "avx2")]
    pub unsafe fn tile_isums(tile: &[u8], xq: &[i8], out: &mut [i32; TILE_ROWS * GROUPS]) {
        for g in 0..GROUPS {
            let [sums] = group_sums(tile.as_ptr(), TileLayout::WHOLE, g, &[xq.as_ptr()]);
            for (i, sums) in sums.into_iter().enumerate() {
                _mm256_storeu_si256(out.as_mut_ptr().add(g * TILE_ROWS + i * 8).cast(), sums);
            }
        }
    }

    /// Tokens that share one read of the tiles (fewer than AVX-512's 4: AVX2 has 16 vector
    /// registers, and each token holds 4 integer sums and 4 float accumulators).
    const BATCH: usize = 2;

    /// [`super::row_block`] with the float part in registers, [`BATCH`] tokens at a time.
    #[target_feature(enable = "avx2")]
    pub unsafe fn row_block<const PADDED: bool, const NARROW: bool>(
        tiles: &[u8],
        acts: &QuantizedActivations,
        t0: usize,
        out: &mut [f32],
    ) {
        for (b, y) in out.chunks_mut(BATCH * TILE_ROWS).enumerate() {
            let t = t0 + b * BATCH;
            match y.len() / TILE_ROWS {
                2 => batch::<2, PADDED, NARROW>(tiles, acts, t, y),
                _ => batch::<1, PADDED, NARROW>(tiles, acts, t, y),
            }
        }
    }

    /// `N` tokens over one read of the tiles. Each group adds `(d * sx) * isum` to the 32 row
    /// sums, multiplied then added (no fused multiply-add), in the scalar twin's order, so the
    /// bits are the same.
    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // `t` indexes several parallel arrays
    unsafe fn batch<const N: usize, const PADDED: bool, const NARROW: bool>(
        tiles: &[u8],
        acts: &QuantizedActivations,
        t0: usize,
        out: &mut [f32],
    ) {
        let xq: [*const i8; N] = std::array::from_fn(|t| acts.xq(t0 + t).as_ptr());
        let sx: [*const f32; N] = std::array::from_fn(|t| acts.scales(t0 + t).as_ptr());
        let mut acc = [[_mm256_setzero_ps(); 4]; N];
        let mut base = tiles.as_ptr();
        let mut ahead = base;
        for ct in 0..acts.column_tiles() {
            let groups = acts.groups_in::<PADDED>(ct);
            let layout = crate::cpu::q4_1::layout::<NARROW>(groups);
            let xq = xq.map(|xq| xq.add(ct * TILE_COLS));
            for g in 0..groups {
                request_ahead(ahead);
                ahead = ahead.wrapping_add(GROUP_BYTES);
                let isums = group_sums(base, layout, g, &xq);
                for t in 0..N {
                    let sx = _mm256_set1_ps(*sx[t].add(ct * GROUPS + g));
                    for i in 0..4 {
                        let d = bf16x8(base.add(SCALES + 2 * (g * TILE_ROWS + i * 8)));
                        let sums = _mm256_cvtepi32_ps(isums[t][i]);
                        let term = _mm256_mul_ps(_mm256_mul_ps(d, sx), sums);
                        acc[t][i] = _mm256_add_ps(acc[t][i], term);
                    }
                }
            }
            // One past the end after the last tile: never read.
            base = base.wrapping_add(layout.groups * GROUP_BYTES);
        }
        for (t, y) in out.chunks_exact_mut(TILE_ROWS).enumerate() {
            for i in 0..4 {
                _mm256_storeu_ps(y.as_mut_ptr().add(i * 8), acc[t][i]);
            }
        }
    }

    /// 8 BF16 values from `p` as f32.
    #[inline(always)]
    unsafe fn bf16x8(p: *const u8) -> __m256 {
        // SAFETY (caller): `p` has 16 readable bytes.
        let v = _mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()));
        _mm256_castsi256_ps(_mm256_slli_epi32(v, 16))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_data::{extreme_xq, Lcg};
    use half::bf16;
    use q4nx::tile::{dequantize_q8_row, pack_q8_tile};

    /// Tiles with random signed bytes (all 256 values, -128 included) and small BF16 scales.
    fn random_tiles(count: usize, rng: &mut Lcg) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(count * TILE_BYTES);
        for _ in 0..count {
            let mut values = [[0i8; TILE_COLS]; TILE_ROWS];
            let mut d = [[bf16::ZERO; GROUPS]; TILE_ROWS];
            for (row, scales) in values.iter_mut().zip(&mut d) {
                row.iter_mut().for_each(|v| *v = rng.next() as i8);
                scales
                    .iter_mut()
                    .for_each(|s| *s = bf16::from_f32(rng.unit() * 0.01));
            }
            let mut tile = vec![0u8; TILE_BYTES];
            pack_q8_tile(&values, &d, &mut tile);
            bytes.extend(tile);
        }
        bytes
    }

    #[test]
    fn integer_sums_equal_the_scalar_twin_at_every_level() {
        let mut rng = Lcg(5);
        let tile = random_tiles(1, &mut rng);
        let extremes = {
            let mut t = tile.clone();
            t[VALUES..].fill(0x80); // -128 everywhere
            t
        };
        let random_xq: Vec<i8> = (0..256).map(|_| (rng.next() % 255) as i8).collect();
        let extreme_xq = extreme_xq();
        for (tile, xq) in [
            (&tile, &random_xq),
            (&extremes, &extreme_xq),
            (&tile, &extreme_xq),
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
    fn scalar_isums_follow_the_documented_layout() {
        // Row 21, column 40: byte 4096 + 40*16 + 5 of the values.
        let mut tile = vec![0u8; TILE_BYTES];
        tile[VALUES + 4096 + 40 * 16 + 5] = (-7i8) as u8;
        let mut xq = vec![0i8; 256];
        xq[40] = 3;
        let sums = tile_isums(KernelLevel::Scalar, &tile, &xq);
        assert_eq!(sums[32 + 21], -21, "group 1, row 21");
        assert_eq!(sums.iter().filter(|&&s| s != 0).count(), 1);
    }

    #[test]
    fn row_block_matches_the_float_product_and_is_the_same_at_every_level() {
        let mut rng = Lcg(9);
        let cols = 600; // padded to 768: three tiles
        let tiles = random_tiles(3, &mut rng);
        let rows: Vec<Vec<f32>> = (0..TILE_ROWS)
            .map(|r| {
                let mut row = vec![0.0; 768];
                for (ct, tile) in tiles.chunks_exact(TILE_BYTES).enumerate() {
                    dequantize_q8_row(tile, r, &mut row[ct * 256..(ct + 1) * 256]);
                }
                row
            })
            .collect();
        for tokens in [1, 2, 3, 6, 9] {
            let x: Vec<f32> = (0..tokens * cols).map(|_| rng.unit()).collect();
            let mut acts = QuantizedActivations::new();
            acts.quantize(KernelLevel::Scalar, &x, tokens, cols);
            let mut reference = vec![0.0; tokens * 32];
            row_block(KernelLevel::Scalar, &tiles, false, &acts, 0, &mut reference);
            for t in 0..tokens {
                for (r, row) in rows.iter().enumerate() {
                    let xt = &x[t * cols..(t + 1) * cols];
                    let exact: f32 = xt.iter().zip(row).map(|(x, w)| x * w).sum();
                    // Each activation moves by at most half its block's step (max|x| / 254).
                    let bound: f32 = 1e-4
                        + xt.chunks(BLOCK)
                            .zip(row.chunks(BLOCK))
                            .map(|(xb, wb)| {
                                let step = xb.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 254.0;
                                step * wb.iter().map(|w| w.abs()).sum::<f32>() * 1.01
                            })
                            .sum::<f32>();
                    let got = reference[t * 32 + r];
                    assert!(
                        (got - exact).abs() <= bound,
                        "row {r} token {t}: {got} vs {exact}, bound {bound}"
                    );
                }
            }
            for level in KernelLevel::supported() {
                let mut out = vec![f32::NAN; tokens * 32];
                row_block(level, &tiles, false, &acts, 0, &mut out);
                assert_eq!(out, reference, "{level} differs from the scalar twin");
            }
        }
    }

    #[test]
    fn padding_groups_add_nothing_and_their_scales_are_never_read() {
        // K = 600 leaves groups 3..8 of the third tile as padding: NaN scales (0xFFFF) and
        // any values there change no bit at any level.
        let mut rng = Lcg(4);
        let cols = 600;
        let zeroed = {
            let mut tiles = random_tiles(3, &mut rng);
            let tile = &mut tiles[2 * TILE_BYTES..];
            tile[SCALES + 2 * 3 * TILE_ROWS..SCALES + 512].fill(0);
            for h in 0..2 {
                tile[VALUES + h * 4096 + 3 * BLOCK * 16..VALUES + (h + 1) * 4096].fill(0);
            }
            tiles
        };
        let mut poisoned = zeroed.clone();
        let tile = &mut poisoned[2 * TILE_BYTES..];
        tile[SCALES + 2 * 3 * TILE_ROWS..SCALES + 512].fill(0xFF);
        for h in 0..2 {
            tile[VALUES + h * 4096 + 3 * BLOCK * 16..VALUES + (h + 1) * 4096].fill(0x81);
        }
        for tokens in [1, 3, 5] {
            let x: Vec<f32> = (0..tokens * cols).map(|_| rng.unit()).collect();
            let mut acts = QuantizedActivations::new();
            acts.quantize(KernelLevel::Scalar, &x, tokens, cols);
            for level in KernelLevel::supported() {
                let (mut a, mut b) = (vec![0.0; tokens * 32], vec![0.0; tokens * 32]);
                row_block(level, &zeroed, false, &acts, 0, &mut a);
                row_block(level, &poisoned, false, &acts, 0, &mut b);
                assert!(
                    b.iter().all(|v| v.is_finite()),
                    "{level} used a padding scale"
                );
                assert_eq!(a, b, "{level}, {tokens} tokens");
                // The same tiles narrowed (the third keeps its 3 groups of real columns), as
                // `Weights::copy_into_huge_pages` narrows them: the same bits.
                let mut narrow = zeroed[..2 * TILE_BYTES].to_vec();
                q4nx::tile::narrow_tile(&zeroed[2 * TILE_BYTES..], true, 3, &mut narrow);
                assert_eq!(narrow.len(), 2 * TILE_BYTES + 3 * GROUP_BYTES);
                let mut c = vec![0.0; tokens * 32];
                row_block(level, &narrow, true, &acts, 0, &mut c);
                let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&c), "{level}, {tokens} tokens, narrow");
            }
        }
    }

    /// Every level against the scalar twin, bit for bit, at every token count a row block is
    /// given in practice (1 to 9: a decode step, draft passes, and batches of 4 and 2 with a
    /// remainder), starting at token 0 and 1, for whole tiles with and without padding
    /// columns and for the same matrix narrowed.
    #[test]
    fn every_level_equals_the_scalar_twin_at_every_token_count_narrow_and_whole() {
        let mut rng = Lcg(17);
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for cols in [600usize, 768] {
            let real_groups = cols.div_ceil(BLOCK) - 2 * GROUPS;
            let mut tiles = random_tiles(3, &mut rng);
            // Padding groups of a narrowed tile read as zeros in the scalar twin's widening.
            let last = &mut tiles[2 * TILE_BYTES..];
            last[SCALES + 2 * real_groups * TILE_ROWS..SCALES + 512].fill(0);
            for h in 0..2 {
                last[VALUES + h * 4096 + real_groups * BLOCK * 16..VALUES + (h + 1) * 4096].fill(0);
            }
            let mut narrow = tiles[..2 * TILE_BYTES].to_vec();
            q4nx::tile::narrow_tile(&tiles[2 * TILE_BYTES..], true, real_groups, &mut narrow);
            for tokens in 1..=10 {
                let x: Vec<f32> = (0..tokens * cols).map(|_| rng.unit() * 3.0).collect();
                let mut acts = QuantizedActivations::new();
                acts.quantize(KernelLevel::Scalar, &x, tokens, cols);
                for t0 in [0, 1].into_iter().filter(|&t0| t0 < tokens) {
                    let n = tokens - t0;
                    let mut reference = vec![0.0; n * 32];
                    row_block(
                        KernelLevel::Scalar,
                        &tiles,
                        false,
                        &acts,
                        t0,
                        &mut reference,
                    );
                    for level in KernelLevel::supported() {
                        for (tiles, is_narrow) in [(&tiles, false), (&narrow, true)] {
                            let mut out = vec![f32::NAN; n * 32];
                            row_block(level, tiles, is_narrow, &acts, t0, &mut out);
                            assert_eq!(
                                bits(&out),
                                bits(&reference),
                                "{level}, {cols} columns, tokens {t0}..{tokens}, \
                                 narrow: {is_narrow}: differs from the scalar twin"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The AVX2 kernel's weight shuffle, checked against the layout on its own: a single
    /// nonzero weight at each row and column of a group lands in that row's sum.
    #[test]
    fn avx2_sums_find_each_row_and_column() {
        if !KernelLevel::Avx2.is_supported() {
            return;
        }
        let xq: Vec<i8> = (0..256).map(|c| (c % 127) as i8 - 63).collect();
        for r in 0..TILE_ROWS {
            for c in [0, 1, 2, 3, 37, 255] {
                let mut tile = vec![0u8; TILE_BYTES];
                tile[VALUES + (r / 16) * 4096 + c * 16 + r % 16] = (-128i8) as u8;
                let sums = tile_isums(KernelLevel::Avx2, &tile, &xq);
                let expected = -128 * i32::from(xq[c]);
                assert_eq!(
                    sums[(c / BLOCK) * TILE_ROWS + r],
                    expected,
                    "row {r} column {c}"
                );
                assert_eq!(
                    sums.iter().filter(|&&s| s != 0).count(),
                    usize::from(expected != 0),
                    "row {r} column {c}: only its own sum moves"
                );
            }
        }
    }

    /// Not a check: times one token through SmolLM2-135M's Q8 output head (49 152 x 576, K
    /// padded to 768) on one thread at every level this CPU has, the levels alternating within
    /// each of 15 rounds, for bench/README.md. Prints each level's median and the median of
    /// its per-round ratios to the scalar twin.
    #[test]
    #[ignore = "a timing probe, run by hand: bench/README.md"]
    fn time_q8_head_on_smollm2_shape() {
        let (rows, cols) = (49_152, 576);
        let mut rng = Lcg(3);
        let blocks = rows / TILE_ROWS;
        let tiles = random_tiles(blocks * 3, &mut rng);
        let x: Vec<f32> = (0..cols).map(|_| rng.unit()).collect();
        let mut acts = QuantizedActivations::new();
        acts.quantize(KernelLevel::Scalar, &x, 1, cols);
        let mut out = vec![0.0; TILE_ROWS];
        let levels = KernelLevel::supported();
        let mut secs = vec![Vec::new(); levels.len()];
        for _ in 0..15 {
            for (level, secs) in levels.iter().zip(&mut secs) {
                let clock = std::time::Instant::now();
                for block in tiles.chunks_exact(3 * TILE_BYTES) {
                    row_block(*level, block, false, &acts, 0, &mut out);
                }
                secs.push(clock.elapsed().as_secs_f64());
            }
        }
        let median = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        for (level, s) in levels.iter().zip(&secs) {
            let ratios: Vec<f64> = secs[0].iter().zip(s).map(|(a, b)| a / b).collect();
            println!(
                "{:<10} {:.3} ms, {:.2}x the scalar twin's speed (median of round ratios)",
                level.name(),
                median(s) * 1e3,
                median(&ratios)
            );
        }
    }
}
