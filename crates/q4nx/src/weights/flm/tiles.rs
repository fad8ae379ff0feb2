//! FastFlowLM's tiles of 32 rows x 128 columns (its gpt-oss converter's `col_block_size`),
//! 2,560 bytes each, written into Hearth's tiles of 32 x 256, two FastFlowLM tiles (side by
//! side) to one of Hearth's, exactly:
//!
//! - **Q4_1**: 128 BF16 scales, 128 BF16 mins (index `group * 32 + row`, 4 groups), then 2,048
//!   bytes of nibbles, row `r`, column `c` at `(r / 16) * 1024 + c * 8 + (r % 16) / 2`, even
//!   rows low: Hearth's Q4_1 tile cut at column 128, so each part is copied whole.
//! - **MXFP4** (gpt-oss's experts, `_pack_MXFP4_q4nx`): 128 one-byte E8M0 scales (same index),
//!   padded with zeros to the 512 bytes the scales and mins of a Q4_1 tile take, then the codes
//!   as a Q4_1 tile's nibbles. A code is E2M1 (sign, 2 exponent bits, 1 mantissa bit); doubled,
//!   its magnitudes are the integers 0, 1, 2, 3, 4, 6, 8, 12, and the scale `e` halved is
//!   `2^(e - 128)`, as ggml decodes MXFP4 (`kvalues_mxfp4`, `GGML_E8M0_TO_FP32_HALF`). So each
//!   value is an int8 (-12..=12) times a power of two: a **Q8** value and scale, exactly. Every
//!   power from `2^-128` (e = 0) to `2^126` (e = 254) is a BF16 (those under `2^-126`, e = 0
//!   and 1, are BF16 subnormals, still exact); e = 255 is not a number in the OCP MX format
//!   (ggml would read `2^127`, whose values overflow once summed), so such a tile is refused.
//!   FastFlowLM also writes each row block's 32 expert biases (BF16) into bytes 128..192 of the
//!   row block's first tile; those bytes are left to the biases' own tensor, and any other
//!   non-zero padding byte means the tile is not MXFP4.
//!
//! Cost: a Q8 tile holds 8.5 bits a weight where MXFP4 holds 4.25 (5 in FastFlowLM's padded
//! tiles), so the experts take twice the bytes of their MXFP4, 1.7 times FastFlowLM's tiles
//! (gpt-oss-20b, whose K of 2,880 Hearth's tiles pad to 3,072: 21.7 GB, from 10.2 GB of
//! MXFP4 in a GGUF and 12.5 GB of FastFlowLM's tiles).

use half::bf16;

use crate::tile::{Q4_1_MINS_AT, Q4_1_NIBBLES_AT, Q8_VALUES_AT, SCALES_AT, TILE_ROWS};

/// Columns of one FastFlowLM gpt-oss tile.
pub(super) const HALF_COLS: usize = 128;
/// Bytes of one FastFlowLM gpt-oss tile, Q4_1 or MXFP4.
pub(super) const HALF_TILE_BYTES: usize = 2560;
/// Groups of 32 columns in one.
const HALF_GROUPS: usize = 4;
/// Scales (and mins) in one: a group's 32 rows, 4 groups.
const HALF_SCALES: usize = HALF_GROUPS * TILE_ROWS;
/// Where the codes start in one.
const HALF_CODES_AT: usize = 512;
/// Where FastFlowLM puts a row block's expert biases in its first MXFP4 tile.
const BIAS_BYTES: std::ops::Range<usize> = 128..192;

/// ggml's MXFP4 magnitudes doubled, by the code's low 3 bits.
const E2M1_DOUBLED: [i8; 8] = [0, 1, 2, 3, 4, 6, 8, 12];

/// Writes FastFlowLM's Q4_1 tile `from` (32 x 128) into half `half` (0: columns 0..128, 1:
/// 128..256) of Hearth's Q4_1 tile `to`.
pub(super) fn q4_1_into(from: &[u8], to: &mut [u8], half: usize) {
    let part = 2 * HALF_SCALES;
    for (at_from, at_to) in [(0, SCALES_AT), (part, Q4_1_MINS_AT)] {
        to[at_to + half * part..at_to + (half + 1) * part]
            .copy_from_slice(&from[at_from..at_from + part]);
    }
    let codes = HALF_COLS * 8;
    for rows in 0..2 {
        let (at_from, at_to) = (
            HALF_CODES_AT + rows * codes,
            Q4_1_NIBBLES_AT + rows * 2 * codes,
        );
        to[at_to + half * codes..at_to + (half + 1) * codes]
            .copy_from_slice(&from[at_from..at_from + codes]);
    }
}

/// The BF16 of the halved E8M0 scale `e`, `2^(e - 128)`; `None` for 255 (not a number).
pub(super) fn e8m0_halved(e: u8) -> Option<bf16> {
    match e {
        255 => None,
        // 2^-128 and 2^-127: the subnormals 32 and 64 times 2^-133.
        0 | 1 => Some(bf16::from_bits(0x20 << e)),
        // Exponent field e - 1, mantissa 0.
        _ => Some(bf16::from_bits(u16::from(e - 1) << 7)),
    }
}

/// Writes FastFlowLM's MXFP4 tile `from` (32 x 128) into half `half` of Hearth's Q8 tile `to`,
/// exactly. `first` says whether it is its row block's first tile (which may hold biases in
/// its padding). Errors say, in words, what is wrong with the tile.
pub(super) fn mxfp4_into_q8(
    from: &[u8],
    to: &mut [u8],
    half: usize,
    first: bool,
) -> Result<(), String> {
    let padding = &from[HALF_SCALES..HALF_CODES_AT];
    let stray = padding.iter().enumerate().find(|&(i, &b)| {
        let biases = first && BIAS_BYTES.contains(&(HALF_SCALES + i));
        b != 0 && !biases
    });
    if let Some((i, b)) = stray {
        return Err(format!(
            "byte {} of a tile is {b}, where MXFP4 tiles hold zeros (padding after the \
             scales): these are not MXFP4 tiles as FastFlowLM's gpt-oss converter writes them",
            HALF_SCALES + i
        ));
    }
    for (j, &e) in from[..HALF_SCALES].iter().enumerate() {
        let d = e8m0_halved(e).ok_or_else(|| {
            format!(
                "an MXFP4 scale (row {}, group {}) is 255, which the MX format reserves for \
                 \"not a number\": the file is damaged",
                j % TILE_ROWS,
                j / TILE_ROWS
            )
        })?;
        let at = SCALES_AT + 2 * (half * HALF_SCALES + j);
        to[at..at + 2].copy_from_slice(&d.to_le_bytes());
    }
    let codes = &from[HALF_CODES_AT..HALF_TILE_BYTES];
    for rows in 0..2 {
        for c in 0..HALF_COLS {
            let pairs = &codes[rows * HALF_COLS * 8 + c * 8..][..8];
            let out = Q8_VALUES_AT + rows * 4096 + (half * HALF_COLS + c) * 16;
            for (p, &byte) in pairs.iter().enumerate() {
                for (k, nibble) in [byte & 0x0f, byte >> 4].into_iter().enumerate() {
                    let magnitude = E2M1_DOUBLED[usize::from(nibble & 7)];
                    let q = if nibble & 8 != 0 {
                        -magnitude
                    } else {
                        magnitude
                    };
                    to[out + 2 * p + k] = q as u8;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tile::{
        q4_1_nibble_at, q8_value_at, scale, scale_index, Q4_1_TILE_BYTES, Q8_TILE_BYTES,
    };

    /// E2M1's values (as the OCP MX format defines them), by code.
    fn e2m1(code: u8) -> f32 {
        let magnitude = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0][usize::from(code & 7)];
        if code & 8 != 0 {
            -magnitude
        } else {
            magnitude
        }
    }

    /// An MXFP4 tile in FastFlowLM's packing whose (row, col) code is `code(r, c)` and whose
    /// (row, group) scale byte is `e(r, g)`.
    fn mxfp4_tile(code: impl Fn(usize, usize) -> u8, e: impl Fn(usize, usize) -> u8) -> Vec<u8> {
        let mut tile = vec![0u8; HALF_TILE_BYTES];
        for r in 0..TILE_ROWS {
            for g in 0..HALF_GROUPS {
                tile[g * TILE_ROWS + r] = e(r, g);
            }
            for c in 0..HALF_COLS {
                let at = HALF_CODES_AT + (r / 16) * 1024 + c * 8 + (r % 16) / 2;
                tile[at] |= code(r, c) << (4 * (r % 2));
            }
        }
        tile
    }

    /// The value at (row, col) of Hearth's Q8 tile.
    fn q8_value(tile: &[u8], r: usize, c: usize) -> f32 {
        f32::from(tile[q8_value_at(r, c)] as i8) * scale(tile, r, c / 32)
    }

    #[test]
    fn every_code_and_scale_becomes_its_exact_value_in_q8() {
        let code = |r: usize, c: usize| ((r * 7 + c * 3) % 16) as u8;
        // Every scale byte but 255 across the two halves, the extremes included.
        let e = |half: usize| move |r: usize, g: usize| ((half * 128 + g * 32 + r) % 255) as u8;
        let mut q8 = vec![0u8; Q8_TILE_BYTES];
        for half in 0..2 {
            let tile = mxfp4_tile(code, e(half));
            mxfp4_into_q8(&tile, &mut q8, half, false).unwrap();
        }
        for half in 0..2 {
            for r in 0..TILE_ROWS {
                for c in 0..HALF_COLS {
                    let g = c / 32;
                    let expected = e2m1(code(r, c)) * 2f32.powi(i32::from(e(half)(r, g)) - 127);
                    let got = q8_value(&q8, r, half * HALF_COLS + c);
                    // Equal as numbers: E2M1's -0 is Q8's 0.
                    assert_eq!(got, expected, "half {half} ({r}, {c})");
                }
            }
        }
    }

    #[test]
    fn the_extreme_scales_are_exact_bf16() {
        assert_eq!(e8m0_halved(0).unwrap().to_f32(), 2f32.powi(-128));
        assert_eq!(e8m0_halved(1).unwrap().to_f32(), 2f32.powi(-127));
        assert_eq!(e8m0_halved(2).unwrap().to_f32(), 2f32.powi(-126));
        assert_eq!(e8m0_halved(128).unwrap().to_f32(), 1.0);
        assert_eq!(e8m0_halved(254).unwrap().to_f32(), 2f32.powi(126));
        assert!(e8m0_halved(0).unwrap().to_f32().is_subnormal());
        assert!(e8m0_halved(255).is_none());
        // 12 x 2^-128, the smallest scale's largest value, survives as itself.
        let tile = mxfp4_tile(|_, _| 7, |_, _| 0);
        let mut q8 = vec![0u8; Q8_TILE_BYTES];
        mxfp4_into_q8(&tile, &mut q8, 1, false).unwrap();
        assert_eq!(q8_value(&q8, 31, 255), 12.0 * 2f32.powi(-128));
        assert_eq!(q8_value(&q8, 0, 0), 0.0, "the other half stays empty");
    }

    #[test]
    fn malformed_tiles_are_refused_in_words() {
        let mut q8 = vec![0u8; Q8_TILE_BYTES];
        let nan = mxfp4_tile(|_, _| 1, |r, g| if (r, g) == (5, 2) { 255 } else { 127 });
        let e = mxfp4_into_q8(&nan, &mut q8, 0, false).unwrap_err();
        assert!(
            e.contains("row 5, group 2") && e.contains("not a number"),
            "{e}"
        );

        // A Q4_1 tile's mins where MXFP4 has padding.
        let mut q4_1 = mxfp4_tile(|_, _| 1, |_, _| 127);
        q4_1[300] = 0x3c;
        let e = mxfp4_into_q8(&q4_1, &mut q8, 0, true).unwrap_err();
        assert!(e.contains("byte 300") && e.contains("not MXFP4"), "{e}");

        // Biases are allowed in a row block's first tile only.
        let mut biased = mxfp4_tile(|_, _| 1, |_, _| 127);
        biased[BIAS_BYTES].fill(0x3f);
        mxfp4_into_q8(&biased, &mut q8, 0, true).unwrap();
        let e = mxfp4_into_q8(&biased, &mut q8, 0, false).unwrap_err();
        assert!(e.contains("byte 128"), "{e}");
    }

    #[test]
    fn q4_1_halves_make_the_whole_tile() {
        // Two 128-column tiles with distinct bytes, and Hearth's tile they should make.
        let halves: Vec<Vec<u8>> = (0..2)
            .map(|h| {
                (0..HALF_TILE_BYTES)
                    .map(|i| (i * 31 + h * 17) as u8)
                    .collect()
            })
            .collect();
        let mut whole = vec![0u8; Q4_1_TILE_BYTES];
        for (h, tile) in halves.iter().enumerate() {
            q4_1_into(tile, &mut whole, h);
        }
        for (h, half) in halves.iter().enumerate() {
            for r in 0..TILE_ROWS {
                for g in 0..HALF_GROUPS {
                    let (from, to) = (g * TILE_ROWS + r, scale_index(r, h * HALF_GROUPS + g));
                    for (at_from, at_to) in [(0, SCALES_AT), (256, Q4_1_MINS_AT)] {
                        assert_eq!(
                            half[at_from + 2 * from..][..2],
                            whole[at_to + 2 * to..][..2]
                        );
                    }
                }
                for c in 0..HALF_COLS {
                    let from = HALF_CODES_AT + (r / 16) * 1024 + c * 8 + (r % 16) / 2;
                    let (to, high) = q4_1_nibble_at(r, h * HALF_COLS + c);
                    assert_eq!(high, r % 2 == 1);
                    let nibble = |b: u8| if high { b >> 4 } else { b & 15 };
                    assert_eq!(nibble(half[from]), nibble(whole[to]), "({r}, {c})");
                }
            }
        }
    }
}
