//! Q4_K in groups of 8 rows: llama.cpp's repacking idea in a layout of our own, so that one
//! 256-bit vector holds the same 4 code bytes of 8 rows and a kernel needs no horizontal sums.
//! The group has exactly the bytes of its 8 row-major rows, only in another order.
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

/// Rows per group.
pub const ROWS: usize = 8;

/// Weights per Q4_K super-block.
const QK: usize = 256;
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

/// Bytes of one group of 8 rows of `cols` Q4_K columns; panics if `cols` is not a multiple of 256.
pub fn group_bytes(cols: usize) -> usize {
    assert!(
        cols.is_multiple_of(QK),
        "rows8: {cols} columns is not a multiple of the Q4_K super-block ({QK})"
    );
    ROWS * cols / QK * BLOCK_BYTES
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

/// Checks `input` and `output` are both one group of `cols` columns; `what` names the caller.
fn check_lengths(what: &str, input: usize, output: usize, cols: usize) {
    let want = group_bytes(cols);
    assert!(
        input == want && output == want,
        "rows8::{what}: {input} bytes in and {output} out, but 8 rows of {cols} Q4_K columns are \
         {want} bytes"
    );
}

/// Turns 8 row-major Q4_K rows of `cols` columns (`rows`) into one group (`out`). Panics if
/// either is not exactly [`group_bytes`]`(cols)` long.
pub fn interleave_q4_k(rows: &[u8], cols: usize, out: &mut [u8]) {
    check_lengths("interleave_q4_k", rows.len(), out.len(), cols);
    let row_bytes = cols / QK * BLOCK_BYTES;
    for (r, row) in rows.chunks_exact(row_bytes).enumerate() {
        for (block, group) in row
            .chunks_exact(BLOCK_BYTES)
            .zip(out.chunks_exact_mut(GROUP_BLOCK_BYTES))
        {
            for_each_piece(r, |from, to, len| {
                group[to..to + len].copy_from_slice(&block[from..from + len]);
            });
        }
    }
}

/// The inverse of [`interleave_q4_k`]: one group (`group`) back into 8 row-major rows (`out`).
/// Panics if either is not exactly [`group_bytes`]`(cols)` long.
pub fn deinterleave_q4_k(group: &[u8], cols: usize, out: &mut [u8]) {
    check_lengths("deinterleave_q4_k", group.len(), out.len(), cols);
    let row_bytes = cols / QK * BLOCK_BYTES;
    for (r, row) in out.chunks_exact_mut(row_bytes).enumerate() {
        for (block, group) in row
            .chunks_exact_mut(BLOCK_BYTES)
            .zip(group.chunks_exact(GROUP_BLOCK_BYTES))
        {
            for_each_piece(r, |from, to, len| {
                block[from..from + len].copy_from_slice(&group[to..to + len]);
            });
        }
    }
}

/// Turns a whole row-major Q4_K matrix of `rows` rows and `cols` columns into groups of 8 rows,
/// in place (group `g` where rows `8g .. 8g + 8` were), with one group-sized scratch buffer.
/// Panics if `rows` is not a multiple of 8 or `bytes` is not the matrix's length.
pub fn interleave_matrix_q4_k(bytes: &mut [u8], rows: usize, cols: usize) {
    assert!(
        rows.is_multiple_of(ROWS),
        "rows8::interleave_matrix_q4_k: {rows} rows is not a multiple of {ROWS}"
    );
    let group = group_bytes(cols);
    assert_eq!(
        bytes.len(),
        rows / ROWS * group,
        "rows8::interleave_matrix_q4_k: {} bytes are not {rows} rows of {cols} Q4_K columns",
        bytes.len()
    );
    let mut scratch = vec![0u8; group];
    for chunk in bytes.chunks_exact_mut(group) {
        scratch.copy_from_slice(chunk);
        interleave_q4_k(&scratch, cols, chunk);
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
            let rows = random_bytes(group_bytes(cols), cols as u64);
            let mut group = vec![0u8; rows.len()];
            interleave_q4_k(&rows, cols, &mut group);
            assert_ne!(group, rows, "the layout moves bytes");
            let mut back = vec![0u8; rows.len()];
            deinterleave_q4_k(&group, cols, &mut back);
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
        interleave_q4_k(&rows, cols, &mut g);
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
        let original = random_bytes(rows / 8 * group_bytes(cols), 99);
        let mut bytes = original.clone();
        interleave_matrix_q4_k(&mut bytes, rows, cols);
        let g = group_bytes(cols);
        for (before, after) in original.chunks_exact(g).zip(bytes.chunks_exact(g)) {
            let mut want = vec![0u8; g];
            interleave_q4_k(before, cols, &mut want);
            assert_eq!(after, want.as_slice());
            let mut back = vec![0u8; g];
            deinterleave_q4_k(after, cols, &mut back);
            assert_eq!(back, before);
        }
    }

    #[test]
    #[should_panic(expected = "not a multiple of 8")]
    fn a_matrix_of_rows_not_a_multiple_of_8_is_refused() {
        interleave_matrix_q4_k(&mut vec![0u8; 7 * 144], 7, 256);
    }

    #[test]
    #[should_panic(expected = "8 rows of 256 Q4_K columns are 1152 bytes")]
    fn a_short_group_is_refused() {
        interleave_q4_k(&[0u8; 1151], 256, &mut [0u8; 1152]);
    }

    #[test]
    #[should_panic(expected = "not a multiple of the Q4_K super-block")]
    fn columns_not_a_multiple_of_256_are_refused() {
        deinterleave_q4_k(&[0u8; 1152], 300, &mut [0u8; 1152]);
    }
}
