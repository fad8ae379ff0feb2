//! The byte layout of one FastFlowLM tile (32 rows x 256 columns of a weight matrix).
//!
//! Q4_1 (5120 bytes): 256 BF16 scales `d`, then 256 BF16 mins `m`, both indexed by
//! `j = group * 32 + row` (group = column / 32), then 4096 bytes of nibbles where row `r`,
//! column `c` sits in byte `(r / 16) * 2048 + c * 8 + (r % 16) / 2`, even rows in the low
//! nibble. Value = `nibble * d[j] + m[j]`.
//!
//! Q8 (8704 bytes): 256 BF16 scales (same index), then 8192 signed bytes where row `r`,
//! column `c` sits at `(r / 16) * 4096 + c * 16 + r % 16`. Value = `q * d[j]`.

use half::bf16;

use crate::dtype::bf16_to_f32;

/// Rows of a tile.
pub const TILE_ROWS: usize = 32;
/// Columns of a tile.
pub const TILE_COLS: usize = 256;
/// Columns sharing one scale (and min).
pub const GROUP: usize = 32;
/// Groups per tile row.
pub const GROUPS_PER_TILE: usize = TILE_COLS / GROUP;
/// Bytes of one Q4_1 tile.
pub const Q4_1_TILE_BYTES: usize = 5120;
/// Bytes of one Q8 tile.
pub const Q8_TILE_BYTES: usize = 8704;
/// Bytes of one Q4_K tile (newer MoE models; recognised, not supported).
pub const Q4_K_TILE_BYTES: usize = 4736;

/// Bytes one group (32 rows x 32 columns) takes in a Q4_1 tile: scales, mins and codes.
pub const Q4_1_GROUP_BYTES: usize = Q4_1_TILE_BYTES / GROUPS_PER_TILE;
/// Bytes one group takes in a Q8 tile: scales and values.
pub const Q8_GROUP_BYTES: usize = Q8_TILE_BYTES / GROUPS_PER_TILE;

/// Where the parts of a tile of `groups` groups lie (8 for a whole tile, fewer for a narrow
/// one); offsets from the tile's first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileLayout {
    /// Groups (of 32 columns) the tile holds.
    pub groups: usize,
}

impl TileLayout {
    /// A whole tile.
    pub const WHOLE: TileLayout = TileLayout {
        groups: GROUPS_PER_TILE,
    };

    /// The layout of a tile of `len` bytes of Q4_1 (`q8` false) or Q8 groups.
    pub fn of(len: usize, q8: bool) -> TileLayout {
        let group = if q8 { Q8_GROUP_BYTES } else { Q4_1_GROUP_BYTES };
        TileLayout {
            groups: len / group,
        }
    }

    /// Where a Q4_1 tile's BF16 mins start.
    pub fn q4_1_mins(self) -> usize {
        64 * self.groups
    }

    /// Where the codes of half `half` (rows `16 half ..`) of a Q4_1 tile start.
    pub fn q4_1_codes(self, half: usize) -> usize {
        128 * self.groups + half * 256 * self.groups
    }

    /// Where the values of half `half` of a Q8 tile start.
    pub fn q8_values(self, half: usize) -> usize {
        64 * self.groups + half * 512 * self.groups
    }
}

/// The parts of a whole tile that its narrow form with `groups` groups keeps, as (offset in
/// the whole tile, length), in the order the narrow tile stores them back to back. No part
/// moves to a higher offset, so a matrix can be narrowed in place, part after part.
pub fn narrow_pieces(q8: bool, groups: usize) -> Vec<(usize, usize)> {
    let (whole, narrow) = (TileLayout::WHOLE, TileLayout { groups });
    let mut pieces = vec![(0, 64 * groups)]; // scales
    if q8 {
        for half in 0..2 {
            pieces.push((
                whole.q8_values(half),
                narrow.q8_values(1) - narrow.q8_values(0),
            ));
        }
    } else {
        pieces.push((whole.q4_1_mins(), 64 * groups));
        for half in 0..2 {
            pieces.push((
                whole.q4_1_codes(half),
                narrow.q4_1_codes(1) - narrow.q4_1_codes(0),
            ));
        }
    }
    pieces
}

/// Narrows the whole tile `tile` to its first `groups` groups, into `out`.
pub fn narrow_tile(tile: &[u8], q8: bool, groups: usize, out: &mut Vec<u8>) {
    for (at, len) in narrow_pieces(q8, groups) {
        out.extend_from_slice(&tile[at..at + len]);
    }
}

/// Writes the narrow tile `narrow` (Q8 if `q8`, else Q4_1) back into the whole tile `whole`,
/// zeros where it holds no groups: the inverse of [`narrow_tile`].
pub fn widen_tile(narrow: &[u8], q8: bool, whole: &mut [u8]) {
    whole.fill(0);
    let mut from = 0;
    for (at, len) in narrow_pieces(q8, TileLayout::of(narrow.len(), q8).groups) {
        whole[at..at + len].copy_from_slice(&narrow[from..from + len]);
        from += len;
    }
}

/// Where the 256 BF16 scales start in a Q4_1 or Q8 tile.
pub const SCALES_AT: usize = 0;
/// Where the 256 BF16 mins start in a Q4_1 tile.
pub const Q4_1_MINS_AT: usize = 512;
/// Where the 4096 bytes of nibbles start in a Q4_1 tile.
pub const Q4_1_NIBBLES_AT: usize = 1024;
/// Where the 8192 signed bytes start in a Q8 tile.
pub const Q8_VALUES_AT: usize = 512;

/// Index of the scale/min of (row, group) inside a tile.
#[inline]
pub fn scale_index(row: usize, group: usize) -> usize {
    group * TILE_ROWS + row
}

/// Byte offset (inside a Q4_1 tile) of the nibble of (row, col), and whether it is the high one.
#[inline]
pub fn q4_1_nibble_at(row: usize, col: usize) -> (usize, bool) {
    (
        Q4_1_NIBBLES_AT + (row / 16) * 2048 + col * 8 + (row % 16) / 2,
        row % 2 == 1,
    )
}

/// Byte offset (inside a Q8 tile) of the value of (row, col).
#[inline]
pub fn q8_value_at(row: usize, col: usize) -> usize {
    Q8_VALUES_AT + (row / 16) * 4096 + col * 16 + row % 16
}

#[inline]
fn bf16_at(tile: &[u8], offset: usize) -> f32 {
    bf16_to_f32(u16::from_le_bytes([tile[offset], tile[offset + 1]]))
}

/// Scale `d` of (row, group) of a Q4_1 or Q8 tile.
#[inline]
pub fn scale(tile: &[u8], row: usize, group: usize) -> f32 {
    bf16_at(tile, SCALES_AT + 2 * scale_index(row, group))
}

/// Min `m` of (row, group) of a Q4_1 tile.
#[inline]
pub fn min(tile: &[u8], row: usize, group: usize) -> f32 {
    bf16_at(tile, Q4_1_MINS_AT + 2 * scale_index(row, group))
}

/// The 4-bit code of (row, col) of a Q4_1 tile.
#[inline]
pub fn q4_1_code(tile: &[u8], row: usize, col: usize) -> u8 {
    let (byte, high) = q4_1_nibble_at(row, col);
    if high {
        tile[byte] >> 4
    } else {
        tile[byte] & 0x0f
    }
}

/// Dequantizes one row of a Q4_1 tile, whole or narrow, into `out[..256]` (`code * d + m`, in
/// f32; the columns a narrow tile does not hold are 0).
pub fn dequantize_q4_1_row(tile: &[u8], row: usize, out: &mut [f32]) {
    let layout = TileLayout::of(tile.len(), false);
    let codes = &tile[layout.q4_1_codes(row / 16)..];
    for g in 0..layout.groups {
        let j = scale_index(row, g);
        let d = bf16_at(tile, SCALES_AT + 2 * j);
        let m = bf16_at(tile, layout.q4_1_mins() + 2 * j);
        for (c, o) in out.iter_mut().enumerate().skip(g * GROUP).take(GROUP) {
            let byte = codes[c * 8 + (row % 16) / 2];
            let code = if row % 2 == 1 { byte >> 4 } else { byte & 0x0f };
            *o = f32::from(code) * d + m;
        }
    }
    out[layout.groups * GROUP..TILE_COLS].fill(0.0);
}

/// Dequantizes one row of a Q8 tile, whole or narrow, into `out[..256]` (`q * d`, in f32; the
/// columns a narrow tile does not hold are 0).
pub fn dequantize_q8_row(tile: &[u8], row: usize, out: &mut [f32]) {
    let layout = TileLayout::of(tile.len(), true);
    let values = &tile[layout.q8_values(row / 16)..];
    for g in 0..layout.groups {
        let d = bf16_at(tile, SCALES_AT + 2 * scale_index(row, g));
        for (c, o) in out.iter_mut().enumerate().skip(g * GROUP).take(GROUP) {
            *o = f32::from(values[c * 16 + row % 16] as i8) * d;
        }
    }
    out[layout.groups * GROUP..TILE_COLS].fill(0.0);
}

/// Packs one Q4_1 tile from logical arrays: `codes[row][col]` (0..=15),
/// `d[row][group]` and `m[row][group]` already rounded to BF16. `tile` must be 5120 zeroed or
/// overwritable bytes.
pub fn pack_q4_1_tile(
    codes: &[[u8; TILE_COLS]; TILE_ROWS],
    d: &[[bf16; GROUPS_PER_TILE]; TILE_ROWS],
    m: &[[bf16; GROUPS_PER_TILE]; TILE_ROWS],
    tile: &mut [u8],
) {
    debug_assert_eq!(tile.len(), Q4_1_TILE_BYTES);
    for r in 0..TILE_ROWS {
        for g in 0..GROUPS_PER_TILE {
            let j = scale_index(r, g);
            tile[SCALES_AT + 2 * j..SCALES_AT + 2 * j + 2].copy_from_slice(&d[r][g].to_le_bytes());
            tile[Q4_1_MINS_AT + 2 * j..Q4_1_MINS_AT + 2 * j + 2]
                .copy_from_slice(&m[r][g].to_le_bytes());
        }
    }
    // Two rows (r even, r + 1) share each byte.
    for r in (0..TILE_ROWS).step_by(2) {
        for (c, (&even, &odd)) in codes[r].iter().zip(&codes[r + 1]).enumerate() {
            let (byte, _) = q4_1_nibble_at(r, c);
            tile[byte] = (even & 0x0f) | (odd << 4);
        }
    }
}

/// Packs one Q8 tile from logical arrays: `values[row][col]` and `d[row][group]`.
pub fn pack_q8_tile(
    values: &[[i8; TILE_COLS]; TILE_ROWS],
    d: &[[bf16; GROUPS_PER_TILE]; TILE_ROWS],
    tile: &mut [u8],
) {
    debug_assert_eq!(tile.len(), Q8_TILE_BYTES);
    for r in 0..TILE_ROWS {
        for (g, scale) in d[r].iter().enumerate() {
            let j = scale_index(r, g);
            tile[SCALES_AT + 2 * j..SCALES_AT + 2 * j + 2].copy_from_slice(&scale.to_le_bytes());
        }
        for (c, &v) in values[r].iter().enumerate() {
            tile[q8_value_at(r, c)] = v as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte positions checked by hand against the layout in the notes.
    #[test]
    fn hand_checked_q4_1_tile() {
        let mut codes = [[0u8; TILE_COLS]; TILE_ROWS];
        let zero = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
        let mut d = zero;
        let mut m = zero;
        codes[0][0] = 0x3; // byte 1024, low nibble
        codes[1][0] = 0x5; // byte 1024, high nibble
        codes[2][1] = 0x7; // byte 1024 + 1*8 + 1, low
        codes[17][255] = 0xf; // byte 1024 + 2048 + 255*8 + 0, high
        codes[30][32] = 0x9; // byte 1024 + 2048 + 32*8 + 7, low
        d[0][0] = bf16::from_f32(1.0); // j = 0 -> bytes 0..2 = 0x3f80 LE
        d[5][1] = bf16::from_f32(2.0); // j = 32 + 5 = 37 -> bytes 74..76 = 0x4000 LE
        m[31][7] = bf16::from_f32(-1.0); // j = 7*32 + 31 = 255 -> bytes 512 + 510 = 0xbf80 LE
        let mut tile = vec![0u8; Q4_1_TILE_BYTES];
        pack_q4_1_tile(&codes, &d, &m, &mut tile);
        let mut expected = vec![0u8; Q4_1_TILE_BYTES];
        expected[0..2].copy_from_slice(&[0x80, 0x3f]);
        expected[74..76].copy_from_slice(&[0x00, 0x40]);
        expected[1022..1024].copy_from_slice(&[0x80, 0xbf]);
        expected[1024] = 0x53;
        expected[1024 + 8 + 1] = 0x07;
        expected[1024 + 2048 + 255 * 8] = 0xf0;
        expected[1024 + 2048 + 32 * 8 + 7] = 0x09;
        assert_eq!(tile, expected, "every byte of the tile");
        assert_eq!(q4_1_code(&tile, 17, 255), 0xf);
        assert_eq!(q4_1_code(&tile, 16, 255), 0);
        let mut row = [0f32; TILE_COLS];
        dequantize_q4_1_row(&tile, 31, &mut row);
        assert_eq!(row[224..256], [-1.0; 32], "row 31, group 7: m = -1, d = 0");
        dequantize_q4_1_row(&tile, 0, &mut row);
        assert_eq!(row[0], 3.0);
        assert_eq!(row[1], 0.0);
    }

    #[test]
    fn a_narrow_tile_keeps_its_groups_and_widens_back_with_zeros() {
        for (q8, whole_len) in [(false, Q4_1_TILE_BYTES), (true, Q8_TILE_BYTES)] {
            let whole: Vec<u8> = (0..whole_len).map(|i| (i % 253) as u8 + 1).collect();
            let mut narrow = Vec::new();
            narrow_tile(&whole, q8, 3, &mut narrow);
            assert_eq!(TileLayout::of(narrow.len(), q8).groups, 3, "q8 {q8}");
            let mut widened = vec![0xAA; whole_len];
            widen_tile(&narrow, q8, &mut widened);
            let mut a = [0f32; TILE_COLS];
            let mut b = [0f32; TILE_COLS];
            for row in [0, 15, 16, 31] {
                let dequantize = if q8 {
                    dequantize_q8_row
                } else {
                    dequantize_q4_1_row
                };
                dequantize(&whole, row, &mut a);
                dequantize(&narrow, row, &mut b);
                assert_eq!(a[..96], b[..96], "q8 {q8}, row {row}");
                assert!(b[96..].iter().all(|v| *v == 0.0), "q8 {q8}, row {row}");
                dequantize(&widened, row, &mut b);
                assert_eq!(a[..96], b[..96], "q8 {q8}, row {row}, widened");
            }
            // What the narrow tile dropped reads back as zeros.
            let kept: usize = narrow_pieces(q8, 3).iter().map(|(_, len)| len).sum();
            assert_eq!(widened.iter().filter(|&&b| b != 0).count(), kept);
        }
    }

    #[test]
    fn hand_checked_q8_tile() {
        let mut values = [[0i8; TILE_COLS]; TILE_ROWS];
        let mut d = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
        values[0][0] = -1; // byte 512
        values[15][1] = 5; // byte 512 + 16 + 15
        values[16][0] = 7; // byte 512 + 4096
        d[15][0] = bf16::from_f32(0.5); // j = 15 -> bytes 30..32
        let mut tile = vec![0u8; Q8_TILE_BYTES];
        pack_q8_tile(&values, &d, &mut tile);
        let mut expected = vec![0u8; Q8_TILE_BYTES];
        expected[30..32].copy_from_slice(&[0x00, 0x3f]);
        expected[512] = 0xff;
        expected[512 + 31] = 5;
        expected[512 + 4096] = 7;
        assert_eq!(tile, expected);
        let mut row = [0f32; TILE_COLS];
        dequantize_q8_row(&tile, 15, &mut row);
        assert_eq!(row[1], 2.5);
    }
}
