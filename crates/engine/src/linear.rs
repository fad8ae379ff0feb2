//! Matrix products: the one small type every weight matrix of the model goes through.
//!
//! This is the plain, correct version: each weight row is converted (dense bf16/f16/f32) or
//! dequantized (Q4_1/Q8 tiles, with `q4nx`'s reference dequantizer) to f32 and dotted with each
//! token's activations, summing in f32. A faster implementation (SIMD kernels over the tiles, a
//! thread pool) replaces the inside of [`Linear::matmul`] without changing its contract.

use q4nx::{DenseTensor, Dtype, Tensor, TileMatrix};

/// A dense weight matrix `W[rows, cols]` borrowed from the weight file, row-major, in its stored
/// dtype (bf16, f16 or f32, little-endian).
#[derive(Debug, Clone, Copy)]
pub struct DenseMatrix<'w> {
    /// Output features (N).
    pub rows: usize,
    /// Input features (K).
    pub cols: usize,
    /// Element type of `bytes`.
    pub dtype: DenseDtype,
    /// `rows * cols` elements.
    pub bytes: &'w [u8],
}

/// The dense element types the engine computes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenseDtype {
    /// bfloat16.
    Bf16,
    /// IEEE half.
    F16,
    /// IEEE single.
    F32,
}

impl DenseDtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DenseDtype::Bf16 | DenseDtype::F16 => 2,
            DenseDtype::F32 => 4,
        }
    }
}

/// A weight matrix `W[rows, cols]` in HF orientation (rows = output features).
#[derive(Debug)]
pub enum Linear<'w> {
    /// Unquantized weights.
    Dense(DenseMatrix<'w>),
    /// Q4_1 tiles; `cols` is the logical K (the tiles hold K padded to 256).
    Q4_1 {
        /// The tiles.
        matrix: TileMatrix<'w>,
        /// Logical input features.
        cols: usize,
    },
    /// Q8 tiles; `cols` is the logical K.
    Q8 {
        /// The tiles.
        matrix: TileMatrix<'w>,
        /// Logical input features.
        cols: usize,
    },
}

/// Why a tensor cannot be used as a matrix of the expected shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeError(pub String);

impl<'w> Linear<'w> {
    /// Wraps a tensor from the weight file as a `[rows, cols]` matrix, checking its shape and dtype.
    pub fn new(tensor: Tensor<'w>, rows: usize, cols: usize) -> Result<Self, ShapeError> {
        match tensor {
            Tensor::Dense(dense) => dense_matrix(&dense, rows, cols).map(Linear::Dense),
            Tensor::Q4_1(matrix) => {
                check_tiles(&matrix, rows, cols)?;
                Ok(Linear::Q4_1 { matrix, cols })
            }
            Tensor::Q8(matrix) => {
                check_tiles(&matrix, rows, cols)?;
                Ok(Linear::Q8 { matrix, cols })
            }
        }
    }

    /// Output features (N).
    pub fn rows(&self) -> usize {
        match self {
            Linear::Dense(d) => d.rows,
            Linear::Q4_1 { matrix, .. } | Linear::Q8 { matrix, .. } => matrix.rows,
        }
    }

    /// Logical input features (K, unpadded).
    pub fn cols(&self) -> usize {
        match self {
            Linear::Dense(d) => d.cols,
            Linear::Q4_1 { cols, .. } | Linear::Q8 { cols, .. } => *cols,
        }
    }

    /// Writes row `row` of W as f32 into `out[..cols]` (dense conversion or reference dequant).
    /// This is also how embeddings are looked up.
    pub fn row_f32(&self, row: usize, out: &mut [f32]) {
        match self {
            Linear::Dense(d) => {
                let size = d.dtype.size();
                let start = row * d.cols * size;
                convert(
                    d.dtype,
                    &d.bytes[start..start + d.cols * size],
                    &mut out[..d.cols],
                );
            }
            Linear::Q4_1 { matrix, cols } | Linear::Q8 { matrix, cols } => {
                let mut padded = vec![0.0f32; matrix.cols];
                matrix.dequantize_row(row, &mut padded);
                out[..*cols].copy_from_slice(&padded[..*cols]);
            }
        }
    }

    /// `out[t, n] = sum_k x[t, k] * W[n, k]` for `t` in `0..tokens`; `x` is `[tokens, cols]`
    /// row-major and `out` is `[tokens, rows]` row-major.
    pub fn matmul(&self, x: &[f32], tokens: usize, out: &mut [f32]) {
        let (rows, cols) = (self.rows(), self.cols());
        assert_eq!(
            x.len(),
            tokens * cols,
            "linear: input is not [tokens, cols]"
        );
        assert_eq!(
            out.len(),
            tokens * rows,
            "linear: output is not [tokens, rows]"
        );
        let mut w = vec![0.0f32; self.row_buffer_len()];
        for n in 0..rows {
            self.row_f32(n, &mut w);
            for t in 0..tokens {
                out[t * rows + n] = dot(&x[t * cols..(t + 1) * cols], &w[..cols]);
            }
        }
    }

    fn row_buffer_len(&self) -> usize {
        match self {
            Linear::Dense(d) => d.cols,
            Linear::Q4_1 { matrix, .. } | Linear::Q8 { matrix, .. } => matrix.cols,
        }
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn dense_matrix<'w>(
    dense: &DenseTensor<'w>,
    rows: usize,
    cols: usize,
) -> Result<DenseMatrix<'w>, ShapeError> {
    let dtype = dense_dtype(dense.dtype)
        .ok_or_else(|| ShapeError(format!("dtype {:?} is not bf16, f16 or f32", dense.dtype)))?;
    if dense.shape != [rows, cols] {
        return Err(ShapeError(format!(
            "shape is {:?}, expected [{rows}, {cols}]",
            dense.shape
        )));
    }
    if dense.bytes.len() != rows * cols * dtype.size() {
        return Err(ShapeError(format!(
            "holds {} bytes, expected {}",
            dense.bytes.len(),
            rows * cols * dtype.size()
        )));
    }
    Ok(DenseMatrix {
        rows,
        cols,
        dtype,
        bytes: dense.bytes,
    })
}

fn check_tiles(matrix: &TileMatrix<'_>, rows: usize, cols: usize) -> Result<(), ShapeError> {
    let padded = cols.div_ceil(256) * 256;
    if matrix.rows != rows || matrix.cols != padded {
        return Err(ShapeError(format!(
            "quantized shape is [{}, {}], expected [{rows}, {padded}] (K={cols} padded to 256)",
            matrix.rows, matrix.cols
        )));
    }
    Ok(())
}

/// The engine's dense dtype for a stored dtype, if it computes with it.
pub(crate) fn dense_dtype(dtype: Dtype) -> Option<DenseDtype> {
    match dtype {
        Dtype::Bf16 => Some(DenseDtype::Bf16),
        Dtype::F16 => Some(DenseDtype::F16),
        Dtype::F32 => Some(DenseDtype::F32),
        _ => None,
    }
}

/// Converts little-endian `bytes` of `dtype` into `out` (`out.len()` elements).
pub(crate) fn convert(dtype: DenseDtype, bytes: &[u8], out: &mut [f32]) {
    match dtype {
        DenseDtype::Bf16 => {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16);
            }
        }
        DenseDtype::F16 => {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
            }
        }
        DenseDtype::F32 => {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn dense_matmul_matches_hand_computation() {
        // W = [[1, 2, 3], [4, 5, 6]], x = [[1, 0, -1], [2, 1, 0]]
        let bytes = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let linear = Linear::Dense(DenseMatrix {
            rows: 2,
            cols: 3,
            dtype: DenseDtype::F32,
            bytes: &bytes,
        });
        let mut out = [0.0; 4];
        linear.matmul(&[1.0, 0.0, -1.0, 2.0, 1.0, 0.0], 2, &mut out);
        assert_eq!(out, [-2.0, -2.0, 4.0, 13.0]);
    }

    #[test]
    fn bf16_and_f16_rows_convert_exactly() {
        let values = [1.5f32, -2.25, 0.0, 65504.0];
        let bf16: Vec<u8> = values
            .iter()
            .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
            .collect();
        let f16: Vec<u8> = values
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
            .collect();
        let mut out = [0.0; 4];
        convert(DenseDtype::F16, &f16, &mut out);
        assert_eq!(out, values);
        convert(DenseDtype::Bf16, &bf16, &mut out[..3]);
        assert_eq!(out[..3], values[..3]);
    }

    #[test]
    fn q4_1_matmul_equals_dense_matmul_on_dequantized_weights() {
        let (rows, cols) = (32, 40);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let tiles = q4nx::quantize_q4_1_tiles(&w, rows, cols);
        let matrix = TileMatrix {
            name: "w",
            rows,
            cols: 256,
            bytes: &tiles,
        };
        let dequantized: Vec<f32> = matrix
            .dequantize()
            .chunks(256)
            .flat_map(|row| row[..cols].to_vec())
            .collect();
        let dense_bytes = f32_bytes(&dequantized);
        let dense = Linear::Dense(DenseMatrix {
            rows,
            cols,
            dtype: DenseDtype::F32,
            bytes: &dense_bytes,
        });
        let quantized = Linear::Q4_1 { matrix, cols };
        let x: Vec<f32> = (0..2 * cols).map(|i| (i as f32 * 0.37).sin()).collect();
        let (mut a, mut b) = (vec![0.0; 2 * rows], vec![0.0; 2 * rows]);
        dense.matmul(&x, 2, &mut a);
        quantized.matmul(&x, 2, &mut b);
        assert_eq!(
            a, b,
            "same weights and same summation order give identical sums"
        );
    }
}
