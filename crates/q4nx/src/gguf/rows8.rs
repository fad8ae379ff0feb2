//! Q4_K, Q6_K and MXFP4 in groups of 8 rows: llama.cpp's repacking idea in a layout of our own, so
//! that one 256-bit vector holds the same 4 code bytes of 8 rows and a kernel needs no
//! horizontal sums. The group has exactly the bytes of its 8 row-major rows, only in another
//! order.
//!
//! # The layout
//!
//! Rows `8g .. 8g + 8` of a Q4_K matrix (`cols` a multiple of 256, `row_bytes = cols / 256 *
//! 144`) become group `g`, `8 * row_bytes` bytes at the offset the 8 rows had. Inside a group,
//! super-block `i` of the 8 rows is [`GROUP_BLOCK_BYTES`] (1152) bytes at offset `1152 i`:
//!
//! - bytes `0..16`: `d` of rows 0..8, as f16 (row `r` at `2r`);
//! - bytes `16..32`: `dmin` of rows 0..8, as f16 (row `r` at `16 + 2r`);
//! - bytes `32..128`: the 12 packed scale bytes: byte `k` (0..12) of row `r` at `32 + 8k + r`;
//! - bytes `128..1152`: the codes: for `n` in 0..4 (the pair of sub-blocks `2n`, `2n + 1`, whose
//!   codes are `qs[32n .. 32n + 32]`), for `c` in 0..8, for row `r` in 0..8, the 4 bytes
//!   `qs_r[32n + 4c .. 32n + 4c + 4]` at `128 + 256n + 32c + 4r`.
//!
//! So the 32 bytes at `128 + 256n + 32c` hold in their low nibbles weights `4c .. 4c + 4` of
//! sub-block `2n` of all 8 rows (row `r` in bytes `4r .. 4r + 4`), and in their high nibbles the
//! same of sub-block `2n + 1`. The 96 scale bytes are three 32-byte vectors `v0, v1, v2` (scale
//! bytes 0-3, 4-7, 8-11), from which the 6-bit scales and mins of all 8 rows come out with byte
//! operations, in byte lane `8k + r`: `sc_0..3 = v0 & 63`, `m_0..3 = v1 & 63`,
//! `sc_4..7 = (v2 & 15) | ((v0 >> 6) << 4)`, `m_4..7 = (v2 >> 4) | ((v1 >> 6) << 4)`.
//!
//! # Q6_K
//!
//! Q6_K's groups are made the same way (`row_bytes = cols / 256 * 210`, a row's super-block
//! `ql[128], qh[64], scales[16], d`): super-block `i` of the 8 rows is
//! [`GROUP_BLOCK_BYTES_Q6_K`] (1680) bytes at offset `1680 i`:
//!
//! - bytes `0..16`: `d` of rows 0..8, as f16 (row `r` at `2r`);
//! - bytes `16..144`: the 16 scales (i8): scale `s` of row `r` at `16 + 8s + r`;
//! - bytes `144..1168`: the low bits: for `n` in 0..2 (the half of 128 weights), `m` in 0..2,
//!   `c` in 0..8, row `r`: the 4 bytes `ql_r[64n + 32m + 4c ..][..4]` at
//!   `144 + 512n + 256m + 32c + 4r`;
//! - bytes `1168..1680`: the top bits: for `n` in 0..2, `c` in 0..8, row `r`: the 4 bytes
//!   `qh_r[32n + 4c ..][..4]` at `1168 + 256n + 32c + 4r`.
//!
//! So with `L_m` the 32 bytes at `144 + 512n + 256m + 32c` and `H` those at
//! `1168 + 256n + 32c`, the codes of weights `4c .. 4c + 4` of sub-block `4n + k` (32 weights
//! each) of all 8 rows, row `r` in bytes `4r .. 4r + 4`, are `(L_0 & 15) | (H & 3) << 4` (`k`
//! 0), `(L_1 & 15) | (H >> 2 & 3) << 4` (1), `L_0 >> 4 | (H >> 4 & 3) << 4` (2) and
//! `L_1 >> 4 | (H >> 6) << 4` (3); the scales of weights `16s .. 16s + 16` of the 8 rows are 8
//! bytes in a row, and the 128 scale bytes four 32-byte vectors.
//!
//! # MXFP4
//!
//! MXFP4's blocks hold 32 weights (`row_bytes = cols / 32 * 17`, a row's block `e, qs[16]`), so
//! its groups are made block by block: block `i` of the 8 rows is [`GROUP_BLOCK_BYTES_MXFP4`]
//! (136) bytes at offset `136 i`:
//!
//! - bytes `0..8`: the E8M0 scale `e` of rows 0..8 (row `r` at `r`);
//! - bytes `8..136`: the codes: for `c` in 0..4, row `r`: the 4 bytes `qs_r[4c .. 4c + 4]` at
//!   `8 + 32c + 4r`.
//!
//! So the 32 bytes at `8 + 32c` hold in their low nibbles weights `4c .. 4c + 4` of all 8 rows
//! (row `r` in bytes `4r .. 4r + 4`), and in their high nibbles weights `16 + 4c .. 16 + 4c + 4`.

use super::GgmlType;

/// Rows per group.
pub const ROWS: usize = 8;

/// Bytes of one Q4_K super-block of one row.
const BLOCK_BYTES: usize = 144;
/// Bytes of super-block `i` of all 8 rows of a group.
pub const GROUP_BLOCK_BYTES: usize = ROWS * BLOCK_BYTES;
/// Offset in a super-block of one row: the 12 scale bytes, then the 128 code bytes.
const SCALES: usize = 4;
const CODES: usize = 16;
/// Offset in a group's super-block: the `dmin`s, the scale bytes, the codes.
const G_DMIN: usize = 16;
const G_SCALES: usize = 32;
const G_CODES: usize = 128;

/// Bytes of one Q6_K super-block of one row.
const BLOCK_BYTES_Q6_K: usize = 210;
/// Bytes of super-block `i` of all 8 rows of a Q6_K group.
pub const GROUP_BLOCK_BYTES_Q6_K: usize = ROWS * BLOCK_BYTES_Q6_K;
/// Offset in a Q6_K super-block of one row: the top bits, the scales, `d`.
const QH: usize = 128;
const SC: usize = 192;
const D: usize = 208;
/// Offset in a Q6_K group's super-block: the scales, the low bits, the top bits.
const G6_SC: usize = 16;
const G6_QL: usize = 144;
const G6_QH: usize = 1168;

/// Bytes of block `i` of all 8 rows of an MXFP4 group.
pub const GROUP_BLOCK_BYTES_MXFP4: usize = ROWS * 17;
/// Offset in an MXFP4 group's block: the codes (after the 8 scales).
const GX_CODES: usize = 8;

/// Whether `kind`'s matrices can lie in groups of 8 rows (Q4_K, Q6_K, MXFP4).
pub fn groups(kind: GgmlType) -> bool {
    matches!(kind, GgmlType::Q4_K | GgmlType::Q6_K | GgmlType::MXFP4)
}

/// Bytes of one group of 8 rows of `cols` columns of `kind`; panics if `kind` has no groups or
/// `cols` is not whole blocks of it (256 for the K-quants, 32 for MXFP4).
pub fn group_bytes(kind: GgmlType, cols: usize) -> usize {
    assert!(
        groups(kind),
        "rows8: {kind} has no layout in groups of 8 rows"
    );
    let block = kind.block_len();
    assert!(
        cols.is_multiple_of(block),
        "rows8: {cols} columns is not a multiple of the {kind} block ({block})"
    );
    ROWS * kind.bytes_for(cols)
}

/// The layout as moves: calls `each(from, to, len)` for every piece of one super-block of row
/// `r`, `from` its offset in the row's super-block and `to` in the group's: `d`, `dmin`, the 12
/// scale bytes one by one, the 32 runs of 4 code bytes. The one definition of the layout that
/// both directions use; moving pieces rather than bytes keeps regrouping a model's Q4_K
/// matrices at load a small part of copying them.
#[inline(always)]
fn for_each_piece(r: usize, mut each: impl FnMut(usize, usize, usize)) {
    each(0, 2 * r, 2);
    each(2, G_DMIN + 2 * r, 2);
    for k in 0..12 {
        each(SCALES + k, G_SCALES + 8 * k + r, 1);
    }
    for n in 0..4 {
        for c in 0..8 {
            each(
                CODES + 32 * n + 4 * c,
                G_CODES + 256 * n + 32 * c + 4 * r,
                4,
            );
        }
    }
}

/// The Q6_K twin of [`for_each_piece`]: `d`, the 16 scales one by one, the 32 runs of 4
/// low-bit bytes, the 16 runs of 4 top-bit bytes.
#[inline(always)]
fn for_each_piece_q6_k(r: usize, mut each: impl FnMut(usize, usize, usize)) {
    each(D, 2 * r, 2);
    for s in 0..16 {
        each(SC + s, G6_SC + 8 * s + r, 1);
    }
    for n in 0..2 {
        for m in 0..2 {
            for c in 0..8 {
                let (from, to) = (64 * n + 32 * m + 4 * c, 512 * n + 256 * m + 32 * c);
                each(from, G6_QL + to + 4 * r, 4);
            }
        }
    }
    for n in 0..2 {
        for c in 0..8 {
            each(QH + 32 * n + 4 * c, G6_QH + 256 * n + 32 * c + 4 * r, 4);
        }
    }
}

/// The MXFP4 twin of [`for_each_piece`]: `e`, then the 4 runs of 4 code bytes.
#[inline(always)]
fn for_each_piece_mxfp4(r: usize, mut each: impl FnMut(usize, usize, usize)) {
    each(0, r, 1);
    for c in 0..4 {
        each(1 + 4 * c, GX_CODES + 32 * c + 4 * r, 4);
    }
}

/// The pieces of `kind` ([`for_each_piece`], [`for_each_piece_q6_k`],
/// [`for_each_piece_mxfp4`]).
#[inline(always)]
fn pieces(kind: GgmlType, r: usize, each: impl FnMut(usize, usize, usize)) {
    match kind {
        GgmlType::Q4_K => for_each_piece(r, each),
        GgmlType::Q6_K => for_each_piece_q6_k(r, each),
        _ => for_each_piece_mxfp4(r, each),
    }
}

/// Checks `input` and `output` are both one group of `cols` columns of `kind`; `what` names
/// the caller.
fn check_lengths(what: &str, kind: GgmlType, input: usize, output: usize, cols: usize) {
    let want = group_bytes(kind, cols);
    assert!(
        input == want && output == want,
        "rows8::{what}: {input} bytes in and {output} out, but 8 rows of {cols} {kind} columns \
         are {want} bytes"
    );
}

/// Turns 8 row-major rows of `kind` (Q4_K, Q6_K or MXFP4), `cols` columns (`rows`), into one group
/// (`out`): each piece of a row's super-block to its place in the group's ([`pieces`]). Panics
/// on another kind or if either is not exactly [`group_bytes`] long.
pub fn interleave(kind: GgmlType, rows: &[u8], cols: usize, out: &mut [u8]) {
    check_lengths("interleave", kind, rows.len(), out.len(), cols);
    let (block_bytes, row_bytes) = (kind.block_bytes(), kind.bytes_for(cols));
    for (r, row) in rows.chunks_exact(row_bytes).enumerate() {
        for (block, group) in row
            .chunks_exact(block_bytes)
            .zip(out.chunks_exact_mut(ROWS * block_bytes))
        {
            pieces(kind, r, |from, to, len| {
                group[to..to + len].copy_from_slice(&block[from..from + len]);
            });
        }
    }
}

/// The inverse of [`interleave`]: one group (`group`) back into 8 row-major rows (`out`).
pub fn deinterleave(kind: GgmlType, group: &[u8], cols: usize, out: &mut [u8]) {
    check_lengths("deinterleave", kind, group.len(), out.len(), cols);
    let (block_bytes, row_bytes) = (kind.block_bytes(), kind.bytes_for(cols));
    for (r, row) in out.chunks_exact_mut(row_bytes).enumerate() {
        for (block, group) in row
            .chunks_exact_mut(block_bytes)
            .zip(group.chunks_exact(ROWS * block_bytes))
        {
            pieces(kind, r, |from, to, len| {
                block[from..from + len].copy_from_slice(&group[to..to + len]);
            });
        }
    }
}

/// Turns a whole row-major matrix of `kind` (Q4_K, Q6_K or MXFP4), `rows` rows of `cols` columns, into
/// groups of 8 rows in place (group `g` where rows `8g .. 8g + 8` were), with one group-sized
/// scratch buffer. Panics on another kind, if `rows` is not a multiple of 8 or `bytes` is not
/// the matrix's length.
pub fn interleave_matrix(kind: GgmlType, bytes: &mut [u8], rows: usize, cols: usize) {
    assert!(
        rows.is_multiple_of(ROWS),
        "rows8::interleave_matrix: {rows} rows is not a multiple of {ROWS}"
    );
    let group = group_bytes(kind, cols);
    assert_eq!(
        bytes.len(),
        rows / ROWS * group,
        "rows8::interleave_matrix: {} bytes are not {rows} rows of {cols} {kind} columns",
        bytes.len()
    );
    let mut scratch = vec![0u8; group];
    for chunk in bytes.chunks_exact_mut(group) {
        scratch.copy_from_slice(chunk);
        interleave(kind, &scratch, cols, chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut s = seed | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn round_trip_on_random_bytes() {
        for cols in [256, 512, 2048] {
            let rows = random_bytes(group_bytes(GgmlType::Q4_K, cols), cols as u64);
            let mut group = vec![0u8; rows.len()];
            interleave(GgmlType::Q4_K, &rows, cols, &mut group);
            assert_ne!(group, rows, "the layout moves bytes");
            let mut back = vec![0u8; rows.len()];
            deinterleave(GgmlType::Q4_K, &group, cols, &mut back);
            assert_eq!(back, rows);
        }
    }

    #[test]
    fn every_byte_lands_where_the_layout_says() {
        // Two super-blocks whose fields are marked with their row and super-block, checked
        // field by field against the layout in the module doc.
        let cols = 512;
        let row_bytes = 2 * BLOCK_BYTES;
        let mut rows = vec![0u8; 8 * row_bytes];
        for r in 0..8 {
            for i in 0..2 {
                let block = &mut rows[r * row_bytes + i * BLOCK_BYTES..][..BLOCK_BYTES];
                block[0..2].copy_from_slice(&[0x10 + r as u8, 0x20 + i as u8]); // d
                block[2..4].copy_from_slice(&[0x30 + r as u8, 0x40 + i as u8]); // dmin
                for k in 0..12 {
                    block[4 + k] = (16 * k + r + 8 * i) as u8;
                }
                for l in 0..128 {
                    block[16 + l] = (l as u8).wrapping_mul(2) ^ ((r as u8) << 5) ^ ((i as u8) << 4);
                }
            }
        }
        let mut g = vec![0u8; rows.len()];
        interleave(GgmlType::Q4_K, &rows, cols, &mut g);
        for i in 0..2 {
            let sb = &g[i * GROUP_BLOCK_BYTES..][..GROUP_BLOCK_BYTES];
            for r in 0..8 {
                let block = &rows[r * row_bytes + i * BLOCK_BYTES..][..BLOCK_BYTES];
                assert_eq!(sb[2 * r..2 * r + 2], [0x10 + r as u8, 0x20 + i as u8]);
                assert_eq!(sb[16 + 2 * r..18 + 2 * r], [0x30 + r as u8, 0x40 + i as u8]);
                for k in 0..12 {
                    assert_eq!(sb[32 + 8 * k + r], (16 * k + r + 8 * i) as u8);
                }
                for n in 0..4 {
                    for c in 0..8 {
                        let at = 128 + 256 * n + 32 * c + 4 * r;
                        let from = 16 + 32 * n + 4 * c;
                        assert_eq!(sb[at..at + 4], block[from..from + 4], "r {r} n {n} c {c}");
                    }
                }
            }
        }
        // A hand-checked few: row 3's byte 5 of qs (n 0, c 1, e 1) of super-block 0.
        assert_eq!(g[128 + 32 + 12 + 1], rows[3 * row_bytes + 16 + 5]);
        // Row 7's scale byte 11 of super-block 1.
        assert_eq!(g[GROUP_BLOCK_BYTES + 32 + 88 + 7], (16 * 11 + 7 + 8) as u8);
    }

    #[test]
    fn a_three_group_matrix_in_place() {
        let cols = 768;
        let rows = 24;
        let original = random_bytes(rows / 8 * group_bytes(GgmlType::Q4_K, cols), 99);
        let mut bytes = original.clone();
        interleave_matrix(GgmlType::Q4_K, &mut bytes, rows, cols);
        let g = group_bytes(GgmlType::Q4_K, cols);
        for (before, after) in original.chunks_exact(g).zip(bytes.chunks_exact(g)) {
            let mut want = vec![0u8; g];
            interleave(GgmlType::Q4_K, before, cols, &mut want);
            assert_eq!(after, want.as_slice());
            let mut back = vec![0u8; g];
            deinterleave(GgmlType::Q4_K, after, cols, &mut back);
            assert_eq!(back, before);
        }
    }

    #[test]
    fn q6_k_round_trip_on_random_bytes() {
        for cols in [256, 512, 2048] {
            let rows = random_bytes(group_bytes(GgmlType::Q6_K, cols), cols as u64 + 5);
            let mut group = vec![0u8; rows.len()];
            interleave(GgmlType::Q6_K, &rows, cols, &mut group);
            assert_ne!(group, rows, "the layout moves bytes");
            let mut back = vec![0u8; rows.len()];
            deinterleave(GgmlType::Q6_K, &group, cols, &mut back);
            assert_eq!(back, rows);
        }
    }

    #[test]
    fn every_q6_k_byte_lands_where_the_layout_says() {
        let cols = 512;
        let bb = BLOCK_BYTES_Q6_K;
        let row_bytes = 2 * bb;
        let rows = random_bytes(8 * row_bytes, 17);
        let mut g = vec![0u8; rows.len()];
        interleave(GgmlType::Q6_K, &rows, cols, &mut g);
        for i in 0..2 {
            let sb = &g[i * GROUP_BLOCK_BYTES_Q6_K..][..GROUP_BLOCK_BYTES_Q6_K];
            for r in 0..8 {
                let block = &rows[r * row_bytes + i * bb..][..bb];
                assert_eq!(sb[2 * r..2 * r + 2], block[208..210], "d");
                for s in 0..16 {
                    assert_eq!(sb[16 + 8 * s + r], block[192 + s], "scale {s}");
                }
                for n in 0..2 {
                    for c in 0..8 {
                        for m in 0..2 {
                            let at = 144 + 512 * n + 256 * m + 32 * c + 4 * r;
                            let from = 64 * n + 32 * m + 4 * c;
                            assert_eq!(sb[at..at + 4], block[from..from + 4], "ql {n} {m} {c}");
                        }
                        let at = 1168 + 256 * n + 32 * c + 4 * r;
                        let from = 128 + 32 * n + 4 * c;
                        assert_eq!(sb[at..at + 4], block[from..from + 4], "qh {n} {c}");
                    }
                }
            }
        }
        // Hand-checked: row 5's ql byte 70 (n 1, m 0, c 1, e 2) of super-block 1.
        let at = GROUP_BLOCK_BYTES_Q6_K + 144 + 512 + 32 + 20 + 2;
        assert_eq!(g[at], rows[5 * row_bytes + bb + 70]);
    }

    #[test]
    fn a_three_group_q6_k_matrix_in_place() {
        let (cols, rows) = (768, 24);
        let original = random_bytes(rows / 8 * group_bytes(GgmlType::Q6_K, cols), 101);
        let mut bytes = original.clone();
        interleave_matrix(GgmlType::Q6_K, &mut bytes, rows, cols);
        let g = group_bytes(GgmlType::Q6_K, cols);
        for (before, after) in original.chunks_exact(g).zip(bytes.chunks_exact(g)) {
            let mut want = vec![0u8; g];
            interleave(GgmlType::Q6_K, before, cols, &mut want);
            assert_eq!(after, want.as_slice());
        }
        assert!(groups(GgmlType::Q6_K) && groups(GgmlType::Q4_K) && !groups(GgmlType::Q5_K));
        assert_eq!(group_bytes(GgmlType::Q6_K, 256), 1680);
    }

    #[test]
    fn every_mxfp4_byte_lands_where_the_layout_says_and_comes_back() {
        // 2880 columns (gpt-oss's): 90 blocks, not a multiple of 256.
        let cols = 2880;
        let row_bytes = cols / 32 * 17;
        let rows = random_bytes(8 * row_bytes, 23);
        let mut g = vec![0u8; rows.len()];
        interleave(GgmlType::MXFP4, &rows, cols, &mut g);
        for i in 0..cols / 32 {
            let b = &g[i * GROUP_BLOCK_BYTES_MXFP4..][..GROUP_BLOCK_BYTES_MXFP4];
            for r in 0..8 {
                let block = &rows[r * row_bytes + i * 17..][..17];
                assert_eq!(b[r], block[0], "block {i} row {r}: e");
                for c in 0..4 {
                    let at = 8 + 32 * c + 4 * r;
                    assert_eq!(b[at..at + 4], block[1 + 4 * c..5 + 4 * c], "{i} {r} {c}");
                }
            }
        }
        // Hand-checked: row 6's code byte 9 (c 2, byte 1) of block 3.
        assert_eq!(
            g[3 * 136 + 8 + 64 + 24 + 1],
            rows[6 * row_bytes + 3 * 17 + 10]
        );
        let mut back = vec![0u8; rows.len()];
        deinterleave(GgmlType::MXFP4, &g, cols, &mut back);
        assert_eq!(back, rows);
        let mut whole = rows.repeat(2);
        interleave_matrix(GgmlType::MXFP4, &mut whole, 16, cols);
        assert_eq!(whole, g.repeat(2));
        assert_eq!(group_bytes(GgmlType::MXFP4, 32), 136);
    }

    #[test]
    #[should_panic(expected = "40 columns is not a multiple of the MXFP4 block (32)")]
    fn mxfp4_columns_not_whole_blocks_are_refused() {
        group_bytes(GgmlType::MXFP4, 40);
    }

    #[test]
    #[should_panic(expected = "8 rows of 256 Q6_K columns are 1680 bytes")]
    fn a_short_q6_k_group_is_refused() {
        deinterleave(GgmlType::Q6_K, &[0u8; 1680], 256, &mut [0u8; 1679]);
    }

    #[test]
    #[should_panic(expected = "Q5_K has no layout in groups of 8 rows")]
    fn a_kind_without_groups_is_refused() {
        interleave_matrix(GgmlType::Q5_K, &mut [0u8; 8 * 176], 8, 256);
    }

    #[test]
    #[should_panic(expected = "not a multiple of 8")]
    fn a_matrix_of_rows_not_a_multiple_of_8_is_refused() {
        interleave_matrix(GgmlType::Q4_K, &mut vec![0u8; 7 * 144], 7, 256);
    }

    #[test]
    #[should_panic(expected = "8 rows of 256 Q4_K columns are 1152 bytes")]
    fn a_short_group_is_refused() {
        interleave(GgmlType::Q4_K, &[0u8; 1151], 256, &mut [0u8; 1152]);
    }

    #[test]
    #[should_panic(expected = "300 columns is not a multiple of the Q4_K block (256)")]
    fn columns_not_a_multiple_of_256_are_refused() {
        deinterleave(GgmlType::Q4_K, &[0u8; 1152], 300, &mut [0u8; 1152]);
    }
}
