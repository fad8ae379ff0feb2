//! From token hidden states to one sentence vector, as sentence-transformers does it:
//! the mean over a text's tokens (its attention mask: `[CLS]` and `[SEP]` included, padding
//! not), then L2 normalization (`torch.nn.functional.normalize`, norm floored at 1e-12).

/// The mean of the `len` rows of width `dim` starting at row `start` of `hidden`.
pub(crate) fn mean_rows(hidden: &[f32], dim: usize, start: usize, len: usize) -> Vec<f32> {
    let mut sum = vec![0.0f64; dim];
    for row in hidden[start * dim..(start + len) * dim].chunks_exact(dim) {
        for (s, v) in sum.iter_mut().zip(row) {
            *s += f64::from(*v);
        }
    }
    sum.iter().map(|s| (s / len.max(1) as f64) as f32).collect()
}

/// `v / max(|v|, 1e-12)`: a unit vector (a zero vector stays zero).
pub(crate) fn normalize(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let scale = 1.0 / norm.max(1e-12);
    for x in &mut v {
        *x = (f64::from(*x) * scale) as f32;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_covers_only_the_given_rows() {
        let hidden = [1.0, 2.0, 3.0, 4.0, 100.0, 100.0];
        assert_eq!(mean_rows(&hidden, 2, 0, 2), vec![2.0, 3.0]);
        assert_eq!(mean_rows(&hidden, 2, 2, 1), vec![100.0, 100.0]);
    }

    #[test]
    fn normalize_gives_unit_length_and_keeps_zero() {
        assert_eq!(normalize(vec![3.0, 4.0]), vec![0.6, 0.8]);
        assert_eq!(normalize(vec![0.0, 0.0]), vec![0.0, 0.0]);
    }
}
