//! Typed views of tensors borrowed from a memory map: dense vectors/matrices, quantized
//! tile matrices and a GGUF file's own row-major blocks. Nothing here copies weight bytes.

use crate::gguf::{rows8, GgmlType};
use crate::tile::{self, TILE_COLS, TILE_ROWS};
use crate::Dtype;

/// One tensor, borrowed from the memory map (no copy).
#[derive(Debug, Clone)]
pub enum Tensor<'a> {
    /// A plain tensor (BF16 norms and embedding in Q4NX; anything in safetensors).
    Dense(DenseTensor<'a>),
    /// A Q4_1 tile matrix (5120-byte tiles).
    Q4_1(TileMatrix<'a>),
    /// A Q8 tile matrix (8704-byte tiles).
    Q8(TileMatrix<'a>),
    /// A matrix in a GGUF file's own blocks (a linked GGUF's linear weights and embedding).
    Gguf(GgufMatrix<'a>),
}

impl<'a> Tensor<'a> {
    /// The tensor's name.
    pub fn name(&self) -> &'a str {
        match self {
            Tensor::Dense(t) => t.name,
            Tensor::Q4_1(t) | Tensor::Q8(t) => t.name,
            Tensor::Gguf(t) => t.name,
        }
    }

    /// Logical shape: the dense shape, or `[rows, padded cols]` of a tile matrix.
    pub fn shape(&self) -> Vec<usize> {
        match self {
            Tensor::Dense(t) => t.shape.clone(),
            Tensor::Q4_1(t) | Tensor::Q8(t) => vec![t.rows, t.cols],
            Tensor::Gguf(t) => vec![t.rows, t.cols],
        }
    }

    /// A short description for error messages ("BF16 [2048]", "Q4_1 tiles [256 x 2048]").
    pub fn describe(&self) -> String {
        match self {
            Tensor::Dense(t) => format!("{} {:?}", t.dtype, t.shape),
            Tensor::Q4_1(t) => format!("Q4_1 tiles [{} x {}]", t.rows, t.cols),
            Tensor::Q8(t) => format!("Q8 tiles [{} x {}]", t.rows, t.cols),
            Tensor::Gguf(t) => format!("GGUF {} [{} x {}]", t.kind, t.rows, t.cols),
        }
    }
}

/// A dense tensor in its stored dtype.
#[derive(Debug, Clone)]
pub struct DenseTensor<'a> {
    /// Tensor name.
    pub name: &'a str,
    /// Stored element type.
    pub dtype: Dtype,
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// The raw little-endian bytes (possibly unaligned).
    pub bytes: &'a [u8],
}

impl DenseTensor<'_> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.dtype.size()
    }

    /// Whether the tensor holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All elements as f32 (BF16, F16, F32 exactly; integer dtypes by value; F64 rounded).
    /// Booleans read as 0/1; FP8 dtypes are not decoded and give NaN.
    pub fn to_f32(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.len());
        self.extend_f32(self.bytes, &mut out);
        out
    }

    /// One row of a 2-D tensor as f32 into `out` (`out.len()` = columns), e.g. an embedding row.
    ///
    /// Panics if the tensor is not 2-D, `row` is out of range or `out` has the wrong length.
    pub fn row_to_f32(&self, row: usize, out: &mut [f32]) {
        assert_eq!(self.shape.len(), 2, "{} is not a matrix", self.name);
        let cols = self.shape[1];
        assert!(row < self.shape[0], "{}: row {row} out of range", self.name);
        assert_eq!(out.len(), cols);
        let size = self.dtype.size();
        let bytes = &self.bytes[row * cols * size..(row + 1) * cols * size];
        let mut v = Vec::with_capacity(cols);
        self.extend_f32(bytes, &mut v);
        out.copy_from_slice(&v);
    }

    fn extend_f32(&self, bytes: &[u8], out: &mut Vec<f32>) {
        if crate::dtype::extend_f32(self.dtype, bytes, out) {
            return;
        }
        let n = bytes.len() / self.dtype.size();
        let b4 = |i: usize| {
            [
                bytes[4 * i],
                bytes[4 * i + 1],
                bytes[4 * i + 2],
                bytes[4 * i + 3],
            ]
        };
        let b8 = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[8 * i..8 * i + 8]);
            b
        };
        for i in 0..n {
            let v = match self.dtype {
                Dtype::I8 => f32::from(bytes[i] as i8),
                Dtype::U8 => f32::from(bytes[i]),
                Dtype::Bool => f32::from(u8::from(bytes[i] != 0)),
                Dtype::I16 => f32::from(i16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]])),
                Dtype::U16 => f32::from(u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]])),
                Dtype::I32 => i32::from_le_bytes(b4(i)) as f32,
                Dtype::U32 => u32::from_le_bytes(b4(i)) as f32,
                Dtype::I64 => i64::from_le_bytes(b8(i)) as f32,
                Dtype::U64 => u64::from_le_bytes(b8(i)) as f32,
                Dtype::F64 => f64::from_le_bytes(b8(i)) as f32,
                _ => f32::NAN,
            };
            out.push(v);
        }
    }
}

/// Quantized matrix W[N, K] as FastFlowLM tiles: 32 rows x 256 cols, row-block major
/// (tile `t = (n / 32) * (K / 256) + k / 256`). The tile size (5120 for Q4_1, 8704 for Q8)
/// follows from `bytes.len()`.
#[derive(Debug, Clone, Copy)]
pub struct TileMatrix<'a> {
    /// Tensor name.
    pub name: &'a str,
    /// N, a multiple of 32.
    pub rows: usize,
    /// K padded to a multiple of 256 (the padding dequantizes to 0).
    pub cols: usize,
    /// Groups (of 32 columns) the last tile of each row block holds: 8, as files store them,
    /// or fewer once [`crate::Weights::copy_into_huge_pages`] narrowed a padded matrix to the
    /// groups of its real columns ([`tile::TileLayout`]).
    pub last_groups: usize,
    /// All tiles back to back.
    pub bytes: &'a [u8],
}

impl<'a> TileMatrix<'a> {
    /// Bytes of one Q4_1 tile.
    pub const Q4_1_TILE_BYTES: usize = tile::Q4_1_TILE_BYTES;
    /// Bytes of one Q8 tile.
    pub const Q8_TILE_BYTES: usize = tile::Q8_TILE_BYTES;

    /// Number of 32-row blocks (N / 32).
    pub fn row_blocks(&self) -> usize {
        self.rows / TILE_ROWS
    }

    /// Number of 256-column tiles per row block (K / 256).
    pub fn col_tiles(&self) -> usize {
        self.cols / TILE_COLS
    }

    /// Bytes per whole tile (5120 or 8704).
    pub fn tile_bytes(&self) -> usize {
        let groups = self.col_tiles().saturating_sub(1) * tile::GROUPS_PER_TILE + self.last_groups;
        self.bytes.len() / (self.row_blocks() * groups).max(1) * tile::GROUPS_PER_TILE
    }

    /// Whether the tiles are Q8 (8704 bytes) rather than Q4_1 (5120 bytes).
    pub fn is_q8(&self) -> bool {
        self.tile_bytes() == Self::Q8_TILE_BYTES
    }

    /// Whether the last tile of each row block is narrow (holds fewer than 8 groups).
    pub fn is_narrow(&self) -> bool {
        self.last_groups < tile::GROUPS_PER_TILE
    }

    /// Bytes of the last tile of a row block (narrow or not).
    fn last_tile_bytes(&self) -> usize {
        self.tile_bytes() / tile::GROUPS_PER_TILE * self.last_groups
    }

    /// Bytes of one row block's tiles (the last one narrow or not).
    pub fn row_block_bytes(&self) -> usize {
        self.col_tiles().saturating_sub(1) * self.tile_bytes() + self.last_tile_bytes()
    }

    /// The bytes of one tile (the last of a row block may be narrow).
    pub fn tile(&self, row_block: usize, col_tile: usize) -> &'a [u8] {
        let whole = self.tile_bytes();
        let start = row_block * self.row_block_bytes() + col_tile * whole;
        let len = if col_tile + 1 == self.col_tiles() {
            self.last_tile_bytes()
        } else {
            whole
        };
        &self.bytes[start..start + len]
    }

    /// Reference (scalar) dequantization of one row; `out.len()` must equal `cols`.
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        assert_eq!(out.len(), self.cols, "{}: output row length", self.name);
        let (rb, r) = (row / TILE_ROWS, row % TILE_ROWS);
        let q8 = self.is_q8();
        for (ct, chunk) in out.chunks_exact_mut(TILE_COLS).enumerate() {
            let tile = self.tile(rb, ct);
            if q8 {
                tile::dequantize_q8_row(tile, r, chunk);
            } else {
                tile::dequantize_q4_1_row(tile, r, chunk);
            }
        }
    }

    /// The whole matrix as f32, `[rows * cols]` row-major.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0f32; self.rows * self.cols];
        for (row, chunk) in out.chunks_exact_mut(self.cols.max(1)).enumerate() {
            self.dequantize_row(row, chunk);
        }
        out
    }
}

/// A matrix `W[rows, cols]` as a GGUF file stores it: row-major, each row `cols / block_len`
/// consecutive blocks of `kind` (see [`GgmlType`]), borrowed from the file's map; or, in a
/// copy of the weights, a Q4_K, Q6_K or MXFP4 matrix regrouped in 8 rows (`grouped`).
#[derive(Debug, Clone, Copy)]
pub struct GgufMatrix<'a> {
    /// Tensor name (Hugging Face's).
    pub name: &'a str,
    /// The block type.
    pub kind: GgmlType,
    /// N, output features.
    pub rows: usize,
    /// K, input features: a multiple of `kind.block_len()`.
    pub cols: usize,
    /// `rows * kind.bytes_for(cols)` bytes.
    pub bytes: &'a [u8],
    /// Whether the rows lie in groups of 8 ([`crate::gguf::rows8`]: Q4_K, Q6_K and MXFP4 only, each
    /// group where its 8 rows would be), as [`crate::Weights::copy_into_huge_pages`] regroups
    /// them; else row after row.
    pub grouped: bool,
}

impl<'a> GgufMatrix<'a> {
    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.kind.bytes_for(self.cols)
    }

    /// Row `row` decoded to f32 exactly as ggml decodes it; `out.len()` must equal `cols`.
    /// A grouped matrix's row is first taken out of its group.
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        assert_eq!(out.len(), self.cols, "{}: output row length", self.name);
        let n = self.row_bytes();
        if !self.grouped {
            return crate::gguf::dequantize(self.kind, &self.bytes[row * n..(row + 1) * n], out);
        }
        let (group, r) = (row / rows8::ROWS, row % rows8::ROWS);
        let size = rows8::ROWS * n;
        let mut rows = vec![0u8; size];
        rows8::deinterleave(
            self.kind,
            &self.bytes[group * size..(group + 1) * size],
            self.cols,
            &mut rows,
        );
        crate::gguf::dequantize(self.kind, &rows[r * n..(r + 1) * n], out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_conversions() {
        let t = DenseTensor {
            name: "x",
            dtype: Dtype::I32,
            shape: vec![2],
            bytes: &[1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff],
        };
        assert_eq!(t.to_f32(), vec![1.0, -1.0]);
        let bytes = [0x80, 0x3f, 0x00, 0x40, 0x40, 0x40, 0x80, 0x40];
        let m = DenseTensor {
            name: "m",
            dtype: Dtype::Bf16,
            shape: vec![2, 2],
            bytes: &bytes,
        };
        let mut row = [0f32; 2];
        m.row_to_f32(1, &mut row);
        assert_eq!(row, [3.0, 4.0]);
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn tiles_are_row_block_major() {
        // 64 x 512: 2 row blocks x 2 col tiles; tile t has d = t + 1 everywhere, codes 1.
        let mut bytes = vec![0u8; 4 * tile::Q4_1_TILE_BYTES];
        for (t, tile_bytes) in bytes.chunks_exact_mut(tile::Q4_1_TILE_BYTES).enumerate() {
            let d = half::bf16::from_f32((t + 1) as f32).to_le_bytes();
            for j in 0..256 {
                tile_bytes[2 * j..2 * j + 2].copy_from_slice(&d);
            }
            tile_bytes[1024..].fill(0x11);
        }
        let m = TileMatrix {
            name: "w",
            rows: 64,
            cols: 512,
            last_groups: 8,
            bytes: &bytes,
        };
        assert_eq!(
            (m.row_blocks(), m.col_tiles(), m.tile_bytes()),
            (2, 2, 5120)
        );
        let all = m.dequantize();
        assert_eq!(all[0], 1.0, "row 0, col 0 -> tile 0");
        assert_eq!(all[300], 2.0, "row 0, col 300 -> tile 1");
        assert_eq!(all[40 * 512 + 10], 3.0, "row 40, col 10 -> tile 2");
        assert_eq!(all[63 * 512 + 511], 4.0, "row 63, col 511 -> tile 3");
    }

    #[test]
    fn a_grouped_matrix_gives_the_rows_of_the_file() {
        // 16 rows of 512 columns of random blocks (each block's f16 factors small and finite),
        // row-major and regrouped: every row decodes to the same values.
        for kind in [GgmlType::Q4_K, GgmlType::Q6_K] {
            let (rows, cols) = (16, 512);
            let mut s = 7u32;
            let mut bytes: Vec<u8> = (0..rows * kind.bytes_for(cols))
                .map(|_| {
                    s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (s >> 24) as u8
                })
                .collect();
            for block in bytes.chunks_exact_mut(kind.block_bytes()) {
                match kind {
                    GgmlType::Q6_K => block[208..210].copy_from_slice(&[0x00, 0x1c]),
                    _ => block[0..4].copy_from_slice(&[0x00, 0x1c, 0x00, 0x18]),
                }
            }
            let mut groups = bytes.clone();
            rows8::interleave_matrix(kind, &mut groups, rows, cols);
            let matrix = |bytes, grouped| GgufMatrix {
                name: "m",
                kind,
                rows,
                cols,
                bytes,
                grouped,
            };
            let (plain, grouped) = (matrix(&bytes, false), matrix(&groups, true));
            for row in 0..rows {
                let (mut want, mut got) = (vec![0f32; cols], vec![0f32; cols]);
                plain.dequantize_row(row, &mut want);
                grouped.dequantize_row(row, &mut got);
                assert!(want.iter().all(|v| v.is_finite()));
                assert_eq!(got, want, "{kind} row {row}");
            }
        }
    }
}
