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
/// AVX-512 VNNI (with VBMI) has its own kernel; the other levels use the scalar twin.
/// Panics if `level` is not supported by this CPU or the slices are short.
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
        _ => scalar::tile_isums(tile, xq, &mut out),
    }
    out
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
        for ct in 0..acts.column_tiles() {
            let groups = acts.groups_in::<PADDED>(ct);
            let layout = crate::cpu::q4_1::layout::<NARROW>(groups);
            let xq = xq.map(|xq| xq.add(ct * TILE_COLS));
            for g in 0..groups {
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
            acts.quantize(&x, tokens, cols);
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
            acts.quantize(&x, tokens, cols);
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
}
