//! The convolution state of LFM2's short-convolution layers, kept per position beside the keys
//! and values: for every convolution layer and position, the gated input `B * x` the layer's
//! depthwise convolution reads (`[layer][position][channel]`). A convolution of width `L` at
//! position `p` reads positions `p - L + 1 ..= p`, so keeping every position (not only the
//! last `L - 1`, as transformers' rolling state does) makes a rewind a truncation, exactly as
//! for keys and values, and a kept conversation is a copy of the first positions.
//!
//! Stored at the cache's precision: f16 for a quantized model, f32 for the reference path.

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::{KvPrecision, Store};

/// How many convolution layers keep a state and how wide each position's is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConvShape {
    /// Convolution layers (0: the model has none).
    pub layers: usize,
    /// Channels per position (the hidden size).
    pub channels: usize,
}

impl ConvShape {
    /// Values kept per position, all layers.
    pub(crate) fn values_per_position(self) -> u64 {
        (self.layers as u64).saturating_mul(self.channels as u64)
    }
}

/// The state of every convolution layer, for `capacity` positions.
#[derive(Debug)]
pub(crate) struct ConvState {
    shape: ConvShape,
    capacity: usize,
    values: Store,
}

impl ConvState {
    /// A zeroed state; the caller has checked that `len` fits (see `KvCache::with_conv`).
    pub(crate) fn new(
        shape: ConvShape,
        capacity: usize,
        precision: KvPrecision,
    ) -> std::io::Result<Self> {
        let len = shape
            .layers
            .checked_mul(capacity)
            .and_then(|n| n.checked_mul(shape.channels))
            .ok_or_else(|| std::io::Error::other("the size overflows"))?;
        Ok(ConvState {
            shape,
            capacity,
            values: Store::new(precision, len)?,
        })
    }

    pub(crate) fn size_bytes(&self) -> usize {
        self.values.size_bytes()
    }

    fn offset(&self, layer: usize, position: usize) -> usize {
        assert!(
            layer < self.shape.layers && position < self.capacity,
            "convolution state: layer or position past the cache"
        );
        (layer * self.capacity + position) * self.shape.channels
    }

    /// Stores the gated input of `position` in convolution layer `layer`.
    pub(crate) fn store(&mut self, layer: usize, position: usize, values: &[f32]) {
        debug_assert_eq!(values.len(), self.shape.channels);
        let at = self.offset(layer, position);
        self.values.write(at, values);
    }

    /// The stored gated input of `position` in layer `layer`, as f32, into `out`.
    pub(crate) fn read(&self, layer: usize, position: usize, out: &mut [f32]) {
        let at = self.offset(layer, position);
        let len = self.shape.channels;
        match &self.values {
            Store::F32(v) => out.copy_from_slice(&v[at..at + len]),
            Store::F16(v) => v[at..at + len].convert_to_f32_slice(out),
        }
    }

    /// A copy of positions `0..positions`, all layers, `[layer][position][channel]`.
    pub(crate) fn copy_rows(&self, positions: usize) -> std::io::Result<Store> {
        let len = positions * self.shape.channels;
        let precision = match self.values {
            Store::F32(_) => KvPrecision::F32,
            Store::F16(_) => KvPrecision::F16,
        };
        let mut rows = Store::new(precision, self.shape.layers * len)?;
        for layer in 0..self.shape.layers {
            rows.copy_from(layer * len, &self.values, self.offset(layer, 0), len);
        }
        Ok(rows)
    }

    /// Writes positions `0..positions` of `rows`, a copy of `kept` positions, back.
    pub(crate) fn load_rows(&mut self, rows: &Store, kept: usize, positions: usize) {
        let (len, stride) = (positions * self.shape.channels, kept * self.shape.channels);
        for layer in 0..self.shape.layers {
            let at = self.offset(layer, 0);
            self.values.copy_from(at, rows, layer * stride, len);
        }
    }

    /// Bytes a copy of `positions` positions takes.
    pub(crate) fn rows_bytes(&self, positions: usize) -> usize {
        let per_value = match self.values {
            Store::F32(_) => 4,
            Store::F16(_) => std::mem::size_of::<f16>(),
        };
        self.shape.layers * positions * self.shape.channels * per_value
    }
}
