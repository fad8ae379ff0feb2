//! What the comparisons with llama.cpp read from one row of logits.

/// log softmax in f64.
pub fn log_softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    let log_z = max + sum.ln();
    row.iter().map(|&v| v as f64 - log_z).collect()
}

/// The most likely token.
pub fn argmax(row: &[f32]) -> usize {
    (0..row.len())
        .max_by(|&a, &b| row[a].total_cmp(&row[b]))
        .unwrap()
}

/// How far the most likely token's logit is ahead of the second's.
pub fn margin(row: &[f32]) -> f32 {
    let best = argmax(row);
    let second = (0..row.len())
        .filter(|&i| i != best)
        .map(|i| row[i])
        .fold(f32::NEG_INFINITY, f32::max);
    row[best] - second
}

/// The largest |a - b| over all rows, divided by the spread (standard deviation) of `b`'s
/// values: how far two engines' logits are, on the scale of the logits.
pub fn spread_relative_distance(a: &[Vec<f32>], b: &[Vec<f32>]) -> f64 {
    let all: Vec<f64> = b.iter().flatten().map(|&v| f64::from(v)).collect();
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    let std = (all.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / all.len() as f64).sqrt();
    let max = a
        .iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| f64::from((x - y).abs()))
        .fold(0.0, f64::max);
    max / std
}
