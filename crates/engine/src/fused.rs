//! Matrices that read the same input (q, k and v; gate and up), as a model stores them: apart,
//! or fused into one matrix whose rows are theirs one after another (Phi-3's `qkv_proj` and
//! `gate_up_proj`). A fused matrix is borrowed from the weight file as it is, never split or
//! copied at load: it runs as ONE matmul into a scratch row per token, and each token's row is
//! then split into the outputs the rest of the forward pass reads (activations, a few KB).

use crate::cpu::CpuContext;
use crate::linear::Linear;

/// `N` projections of one input.
#[derive(Debug)]
pub(crate) enum SharedInput<'w, const N: usize> {
    /// Each its own matrix (run in one pool run where the kinds allow).
    Apart([Linear<'w>; N]),
    /// One matrix: output `i` is its rows `sum(rows[..i])..sum(rows[..=i])`.
    Fused {
        /// The stored matrix, `[sum(rows), K]`.
        matrix: Linear<'w>,
        /// Rows of each output.
        rows: [usize; N],
    },
}

impl<const N: usize> SharedInput<'_, N> {
    /// `outs[i] = x W_i^T` for `tokens` rows of `x`; `scratch` holds at least the fused
    /// matrix's rows per token when fused (unused apart).
    pub(crate) fn matmul(
        &self,
        cpu: &CpuContext,
        x: &[f32],
        tokens: usize,
        outs: [&mut [f32]; N],
        scratch: &mut [f32],
    ) {
        match self {
            SharedInput::Apart(matrices) => {
                // On the stack: a decode step runs this twice per layer.
                let mut outs = outs.into_iter();
                let mut pairs: [(&Linear<'_>, &mut [f32]); N] = std::array::from_fn(|i| {
                    (&matrices[i], outs.next().expect("one output per matrix"))
                });
                Linear::matmul_shared_input(cpu, &mut pairs, x, tokens);
            }
            SharedInput::Fused { matrix, rows } => {
                let width = matrix.rows();
                let fused = &mut scratch[..tokens * width];
                matrix.matmul(cpu, x, tokens, fused);
                split_rows(fused, width, rows, outs);
            }
        }
    }

    /// Weights, as model cards count them.
    pub(crate) fn parameters(&self) -> usize {
        let size = |l: &Linear<'_>| l.rows() * l.cols();
        match self {
            SharedInput::Apart(matrices) => matrices.iter().map(size).sum(),
            SharedInput::Fused { matrix, .. } => size(matrix),
        }
    }
}

/// Splits each `width`-long row of `fused` into consecutive pieces of `rows[i]` values, row `t`'s
/// piece `i` going to row `t` of `outs[i]`.
fn split_rows<const N: usize>(
    fused: &[f32],
    width: usize,
    rows: &[usize; N],
    mut outs: [&mut [f32]; N],
) {
    for (t, row) in fused.chunks_exact(width).enumerate() {
        let mut at = 0;
        for (out, &r) in outs.iter_mut().zip(rows) {
            out[t * r..(t + 1) * r].copy_from_slice(&row[at..at + r]);
            at += r;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tokens_row_is_split_in_order() {
        // Two tokens, a fused width of 2 + 1 + 1.
        let fused = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let (mut q, mut k, mut v) = ([0.0; 4], [0.0; 2], [0.0; 2]);
        split_rows(&fused, 4, &[2, 1, 1], [&mut q, &mut k, &mut v]);
        assert_eq!((q, k, v), ([1.0, 2.0, 5.0, 6.0], [3.0, 7.0], [4.0, 8.0]));
    }
}
