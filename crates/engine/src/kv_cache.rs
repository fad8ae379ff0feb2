//! The key/value cache: for every layer, KV head and position of the context, the key (after
//! q/k-norm and RoPE) and the value. Allocated once, for the context length the model was loaded
//! with. KV heads are stored once, never replicated per query head.
//!
//! Values are laid out `[layer][kv_head][position][head_dim]`; keys `[layer][kv_head][position /
//! 16][head_dim][position % 16]`, 16 positions side by side, so attention computes the scores of
//! 16 positions per vector with no horizontal sums (see `cpu::attention`). Either way attention
//! for one KV head streams one contiguous run of memory.
//!
//! Precision follows the weights: a quantized (Q4NX) model keeps keys and values as f16, half
//! the memory and half the bytes read per token (f16 rounds at 2^-11, far below what Q4_1 weights
//! already change); a dense model keeps f32, so Hearth's reference path computes exactly what
//! transformers computes.
//!
//! LFM2's convolution layers keep their state per position beside the keys and values
//! ([`conv`]): copied, restored and truncated with them, and counted in the cache's size.
//!
//! Both halves live in anonymous memory advised for 2 MiB pages ([`Zeroed`]): a decode step
//! reads every position of every layer, and with 4 KiB pages that is a TLB miss every 2048
//! values.

use std::ops::Range;

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::weights_memory::gib;
use crate::Error;

mod conv;

pub use conv::ConvShape;
use conv::ConvState;

/// How keys and values are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvPrecision {
    /// 4 bytes per value, exact.
    F32,
    /// 2 bytes per value, IEEE half.
    F16,
}

impl KvPrecision {
    /// Bytes one stored value takes.
    fn bytes(self) -> u64 {
        match self {
            KvPrecision::F32 => 4,
            KvPrecision::F16 => 2,
        }
    }
}

/// The memory a cache of `capacity` positions needs, for the messages that refuse it.
#[derive(Debug, Clone, Copy)]
struct KvSize {
    capacity: usize,
    /// Bytes of keys and values (and convolution state) per position, all layers and heads.
    per_position: u64,
}

impl KvSize {
    fn bytes(self) -> u64 {
        self.per_position.saturating_mul(self.capacity as u64)
    }

    /// Refuses a cache larger than the `available` memory (`MemAvailable`; unknown passes):
    /// the kernel would hand out the map, then kill Hearth once the context fills.
    fn check_fits(self, available: Option<u64>) -> Result<(), Error> {
        match available {
            Some(free) if self.bytes() > free => {
                Err(self.error(&format!("this machine has {} available", gib(free))))
            }
            _ => Ok(()),
        }
    }

    /// The error for a cache that cannot be had, with `why`, naming its size and a context
    /// that would take at most half of what is available now.
    fn error(self, why: &str) -> Error {
        let fits = crate::weights_memory::available_memory()
            .map(|free| free / 2 / self.per_position.max(1))
            .filter(|&n| n > 0 && n < self.capacity as u64);
        let advice = match fits {
            Some(n) => format!("load the model with a shorter context, e.g. {n} tokens"),
            None => "load the model with a shorter context".to_owned(),
        };
        Error::InvalidLoadOption {
            reason: format!(
                "a context of {} tokens needs a KV cache of {} ({} bytes), and it cannot be \
                 allocated: {why}; {advice} (`--context` in hearth run, chat and serve), or \
                 close other programs",
                self.capacity,
                gib(self.bytes()),
                self.bytes()
            ),
        }
    }
}

/// Positions side by side in a block of the key layout.
pub const KEY_BLOCK: usize = 16;

/// Keys and values, laid out as the module documentation describes.
#[derive(Debug)]
pub struct KvCache {
    layers: usize,
    capacity: usize,
    /// `capacity` rounded up to whole key blocks: the positions stored per (layer, KV head).
    slots: usize,
    kv_heads: usize,
    head_dim: usize,
    keys: Store,
    values: Store,
    /// LFM2's convolution state, per position (models with convolution layers only).
    conv: Option<ConvState>,
}

/// Bytes a cache for `c` takes per position at `precision`: keys and values of its attention
/// layers, and the convolution state of its convolution layers (LFM2).
pub fn bytes_per_position(c: &q4nx::ModelConfig, precision: KvPrecision) -> u64 {
    let (layers, conv) = cache_layers(c);
    (layers as u64)
        .saturating_mul(c.num_key_value_heads as u64)
        .saturating_mul(c.head_dim as u64)
        .saturating_mul(2)
        .saturating_add(conv.values_per_position())
        .saturating_mul(precision.bytes())
}

/// The layers that keep keys and values, and the convolution layers' state, of `c`.
fn cache_layers(c: &q4nx::ModelConfig) -> (usize, ConvShape) {
    match &c.lfm2 {
        Some(p) => (
            p.attention_layers(),
            ConvShape {
                layers: p.convolution_layers(),
                channels: c.hidden_size,
            },
        ),
        None => (c.num_hidden_layers, ConvShape::default()),
    }
}

impl KvCache {
    /// The cache a model of config `c` needs for `capacity` positions: its attention layers'
    /// keys and values, and its convolution layers' state (see [`KvCache::with_conv`]).
    pub fn for_model(
        c: &q4nx::ModelConfig,
        capacity: usize,
        precision: KvPrecision,
    ) -> Result<Self, Error> {
        let (layers, conv) = cache_layers(c);
        Self::with_conv(
            layers,
            capacity,
            c.num_key_value_heads,
            c.head_dim,
            conv,
            precision,
        )
    }

    /// A zeroed cache for `capacity` positions of `layers` layers with `kv_heads` heads of
    /// `head_dim` values each. Fails, naming the size and a context that fits, when the cache
    /// needs more memory than the machine has available or the allocation itself fails.
    #[cfg(test)] // models take theirs from `for_model`
    pub fn new(
        layers: usize,
        capacity: usize,
        kv_heads: usize,
        head_dim: usize,
        precision: KvPrecision,
    ) -> Result<Self, Error> {
        Self::with_conv(
            layers,
            capacity,
            kv_heads,
            head_dim,
            ConvShape::default(),
            precision,
        )
    }

    /// As [`KvCache::new`], with the per-position state of `conv` convolution layers beside
    /// the keys and values (counted in the memory check).
    pub fn with_conv(
        layers: usize,
        capacity: usize,
        kv_heads: usize,
        head_dim: usize,
        conv: ConvShape,
        precision: KvPrecision,
    ) -> Result<Self, Error> {
        let slots = capacity.next_multiple_of(KEY_BLOCK);
        let size = KvSize {
            capacity,
            per_position: (layers as u64)
                .saturating_mul(kv_heads as u64)
                .saturating_mul(head_dim as u64)
                .saturating_mul(2)
                .saturating_add(conv.values_per_position())
                .saturating_mul(precision.bytes()),
        };
        size.check_fits(crate::weights_memory::available_memory())?;
        let len = layers
            .checked_mul(kv_heads)
            .and_then(|n| n.checked_mul(slots))
            .and_then(|n| n.checked_mul(head_dim))
            .ok_or_else(|| size.error("its size overflows this machine's addresses"))?;
        let store = || Store::new(precision, len).map_err(|e| size.error(&e.to_string()));
        let conv = (conv.layers > 0)
            .then(|| ConvState::new(conv, capacity, precision))
            .transpose()
            .map_err(|e| size.error(&e.to_string()))?;
        Ok(KvCache {
            layers,
            capacity,
            slots,
            kv_heads,
            head_dim,
            keys: store()?,
            values: store()?,
            conv,
        })
    }

    /// Positions the cache can hold (the context length).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How keys and values are stored.
    pub fn precision(&self) -> KvPrecision {
        match self.keys {
            Store::F32(_) => KvPrecision::F32,
            Store::F16(_) => KvPrecision::F16,
        }
    }

    /// Bytes the cache occupies.
    pub fn size_bytes(&self) -> usize {
        self.keys.size_bytes()
            + self.values.size_bytes()
            + self.conv.as_ref().map_or(0, ConvState::size_bytes)
    }

    /// Stores the gated input of `position` in convolution layer `layer` (LFM2).
    pub(crate) fn store_conv(&mut self, layer: usize, position: usize, values: &[f32]) {
        assert!(
            position < self.capacity,
            "KV cache: position past the context"
        );
        let conv = self.conv.as_mut().expect("a cache with convolution state");
        conv.store(layer, position, values);
    }

    /// The stored gated input of `position` in convolution layer `layer`, as f32 (LFM2).
    pub(crate) fn read_conv(&self, layer: usize, position: usize, out: &mut [f32]) {
        let conv = self.conv.as_ref().expect("a cache with convolution state");
        conv.read(layer, position, out);
    }

    /// Where the value of `position` starts; also where the key block holding `position` starts
    /// when `position` is a multiple of [`KEY_BLOCK`].
    fn offset(&self, layer: usize, head: usize, position: usize) -> usize {
        debug_assert!(layer < self.layers && head < self.kv_heads && position < self.slots);
        ((layer * self.kv_heads + head) * self.slots + position) * self.head_dim
    }

    /// Stores the key and value of `position` in `layer`: `kv_heads * head_dim` values each,
    /// head after head, as the projections produce them.
    pub fn store(&mut self, layer: usize, position: usize, key: &[f32], value: &[f32]) {
        let hd = self.head_dim;
        debug_assert!(key.len() == self.kv_heads * hd && value.len() == key.len());
        assert!(
            position < self.capacity,
            "KV cache: position past the context"
        );
        let (block, lane) = (position / KEY_BLOCK * KEY_BLOCK, position % KEY_BLOCK);
        for head in 0..self.kv_heads {
            let key_block = self.offset(layer, head, block);
            for (d, &k) in key[head * hd..(head + 1) * hd].iter().enumerate() {
                self.keys.set(key_block + d * KEY_BLOCK + lane, k);
            }
            let at = self.offset(layer, head, position);
            self.values.write(at, &value[head * hd..(head + 1) * hd]);
        }
    }

    /// The stored key blocks covering `positions` (which must start on a block) in `layer`
    /// for KV head `head`, as [`CacheValue`] `E` (the cache's precision): `[head_dim][16]`
    /// per block, the last block's lanes past `positions` holding whatever was stored there.
    pub(crate) fn key_run<E: CacheValue>(
        &self,
        layer: usize,
        head: usize,
        positions: Range<usize>,
    ) -> &[E] {
        assert!(
            positions.start.is_multiple_of(KEY_BLOCK),
            "key reads start on a block"
        );
        let at = self.offset(layer, head, positions.start);
        let len = positions.len().div_ceil(KEY_BLOCK) * KEY_BLOCK * self.head_dim;
        run(&self.keys, at, len)
    }

    /// The stored values of `positions` in `layer` for KV head `head`, `[position][head_dim]`,
    /// as [`key_run`](Self::key_run) gives keys.
    pub(crate) fn value_run<E: CacheValue>(
        &self,
        layer: usize,
        head: usize,
        positions: Range<usize>,
    ) -> &[E] {
        let at = self.offset(layer, head, positions.start);
        run(&self.values, at, positions.len() * self.head_dim)
    }

    /// Bytes a copy of positions `0..positions` takes ([`KvCache::copy_rows`]).
    pub(crate) fn rows_bytes(&self, positions: usize) -> usize {
        let (keys, values) = self.row_lens(positions);
        self.layers * self.kv_heads * (keys + values) * self.precision().bytes() as usize
            + self.conv.as_ref().map_or(0, |c| c.rows_bytes(positions))
    }

    /// Values per (layer, KV head) of the keys and of the values of positions `0..positions`:
    /// the key blocks covering them, and their value rows.
    fn row_lens(&self, positions: usize) -> (usize, usize) {
        let blocks = positions.div_ceil(KEY_BLOCK);
        (
            blocks * KEY_BLOCK * self.head_dim,
            positions * self.head_dim,
        )
    }

    /// A copy of the keys and values of positions `0..positions`, all layers and heads, in the
    /// cache's layout without the room for later positions; fails when the memory for it
    /// cannot be had.
    pub(crate) fn copy_rows(&self, positions: usize) -> std::io::Result<KvRows> {
        assert!(positions <= self.capacity, "KV rows past the context");
        let (key_len, value_len) = self.row_lens(positions);
        let heads = self.layers * self.kv_heads;
        let precision = self.precision();
        let mut rows = KvRows {
            positions,
            shape: (self.layers, self.kv_heads, self.head_dim),
            keys: Store::new(precision, heads * key_len)?,
            values: Store::new(precision, heads * value_len)?,
            conv: self
                .conv
                .as_ref()
                .map(|c| c.copy_rows(positions))
                .transpose()?,
        };
        for layer in 0..self.layers {
            for head in 0..self.kv_heads {
                let i = layer * self.kv_heads + head;
                let at = self.offset(layer, head, 0);
                rows.keys.copy_from(i * key_len, &self.keys, at, key_len);
                rows.values
                    .copy_from(i * value_len, &self.values, at, value_len);
            }
        }
        Ok(rows)
    }

    /// Writes positions `0..positions` of `rows` (all of them or fewer) back, all layers and
    /// heads. The key block holding the last position is copied whole: its lanes past
    /// `positions` take the copy's, as a cache truncated there keeps whatever it held, and
    /// attention never reads them before they are stored again.
    pub(crate) fn load_rows(&mut self, rows: &KvRows, positions: usize) {
        assert!(
            positions <= rows.positions,
            "KV rows: fewer kept than asked"
        );
        assert!(
            rows.shape == (self.layers, self.kv_heads, self.head_dim)
                && rows.conv.is_some() == self.conv.is_some(),
            "KV rows of another model"
        );
        if let (Some(conv), Some(kept)) = (self.conv.as_mut(), rows.conv.as_ref()) {
            conv.load_rows(kept, rows.positions, positions);
        }
        let (key_len, value_len) = self.row_lens(positions);
        let (key_stride, value_stride) = self.row_lens(rows.positions);
        for layer in 0..self.layers {
            for head in 0..self.kv_heads {
                let i = layer * self.kv_heads + head;
                let at = self.offset(layer, head, 0);
                self.keys.copy_from(at, &rows.keys, i * key_stride, key_len);
                self.values
                    .copy_from(at, &rows.values, i * value_stride, value_len);
            }
        }
    }

    /// The key blocks covering `positions` as f32 (the tests' view of the cache).
    #[cfg(test)]
    pub fn read_keys(&self, layer: usize, head: usize, positions: Range<usize>) -> Vec<f32> {
        match self.precision() {
            KvPrecision::F32 => self.key_run::<f32>(layer, head, positions).to_vec(),
            KvPrecision::F16 => self.key_run::<f16>(layer, head, positions).to_f32_vec(),
        }
    }

    /// The values of `positions` as f32 (the tests' view of the cache).
    #[cfg(test)]
    pub fn read_values(&self, layer: usize, head: usize, positions: Range<usize>) -> Vec<f32> {
        match self.precision() {
            KvPrecision::F32 => self.value_run::<f32>(layer, head, positions).to_vec(),
            KvPrecision::F16 => self.value_run::<f16>(layer, head, positions).to_f32_vec(),
        }
    }
}

/// The keys and values of the first positions of a [`KvCache`], copied out of it
/// ([`KvCache::copy_rows`]) to be written back later ([`KvCache::load_rows`]): per layer and
/// KV head, the key blocks covering them, then (in the other half) their value rows, at the
/// cache's precision.
#[derive(Debug)]
pub(crate) struct KvRows {
    positions: usize,
    /// Layers, KV heads and head_dim of the cache they came from.
    shape: (usize, usize, usize),
    keys: Store,
    values: Store,
    /// The convolution state of those positions (LFM2), `[layer][position][channel]`.
    conv: Option<Store>,
}

impl KvRows {
    /// Bytes they occupy.
    pub(crate) fn size_bytes(&self) -> usize {
        self.keys.size_bytes()
            + self.values.size_bytes()
            + self.conv.as_ref().map_or(0, Store::size_bytes)
    }
}

/// `len` values of `store` from `at`, as `E`.
fn run<E: CacheValue>(store: &Store, at: usize, len: usize) -> &[E] {
    let values = E::of(store).expect("the cache is read at its own precision");
    &values[at..at + len]
}

/// What the cache stores keys and values as, read back as f32 exactly.
pub(crate) trait CacheValue: Copy + Send + Sync + 'static {
    /// The value as f32 (exact).
    fn to_f32(self) -> f32;
    /// The values of `store`, if it holds this type.
    fn of(store: &Store) -> Option<&[Self]>;
}

impl CacheValue for f32 {
    fn to_f32(self) -> f32 {
        self
    }
    fn of(store: &Store) -> Option<&[f32]> {
        match store {
            Store::F32(v) => Some(v),
            Store::F16(_) => None,
        }
    }
}

impl CacheValue for f16 {
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn of(store: &Store) -> Option<&[f16]> {
        match store {
            Store::F16(v) => Some(v),
            Store::F32(_) => None,
        }
    }
}

/// One of the two halves of the cache, in its precision.
#[derive(Debug)]
pub(crate) enum Store {
    F32(Zeroed<f32>),
    F16(Zeroed<f16>),
}

impl Store {
    fn new(precision: KvPrecision, len: usize) -> std::io::Result<Self> {
        Ok(match precision {
            KvPrecision::F32 => Store::F32(Zeroed::new(len)?),
            KvPrecision::F16 => Store::F16(Zeroed::new(len)?),
        })
    }

    fn size_bytes(&self) -> usize {
        match self {
            Store::F32(v) => v.len() * 4,
            Store::F16(v) => v.len() * 2,
        }
    }

    /// Copies `len` values of `src` from `from` to `at`, bit for bit (`src` has this
    /// precision).
    fn copy_from(&mut self, at: usize, src: &Store, from: usize, len: usize) {
        match (self, src) {
            (Store::F32(d), Store::F32(s)) => d[at..at + len].copy_from_slice(&s[from..from + len]),
            (Store::F16(d), Store::F16(s)) => d[at..at + len].copy_from_slice(&s[from..from + len]),
            _ => panic!("KV rows are copied between stores of one precision"),
        }
    }

    fn write(&mut self, at: usize, src: &[f32]) {
        match self {
            Store::F32(v) => v[at..at + src.len()].copy_from_slice(src),
            Store::F16(v) => v[at..at + src.len()].convert_from_f32_slice(src),
        }
    }

    fn set(&mut self, at: usize, value: f32) {
        match self {
            Store::F32(v) => v[at] = value,
            Store::F16(v) => v[at] = f16::from_f32(value),
        }
    }
}

/// Types whose all-zero bytes are the value 0 and whose every bit pattern is a value.
///
/// # Safety
/// Implement only for such types (plain IEEE floats).
pub(crate) unsafe trait ZeroBits: Copy {}
// SAFETY: IEEE floats: zero bits are +0.0, and every bit pattern is a number or a NaN.
unsafe impl ZeroBits for f32 {}
// SAFETY: as above (`f16` is a transparent `u16`).
unsafe impl ZeroBits for f16 {}

/// `len` zeros of `T` in anonymous memory advised for huge pages, which the kernel hands out
/// already zeroed (so nothing is written until a position is stored).
pub(crate) struct Zeroed<T> {
    map: memmap2::MmapMut,
    len: usize,
    _values: std::marker::PhantomData<T>,
}

impl<T: ZeroBits> Zeroed<T> {
    /// Maps `len` zeros; fails when the size overflows or the kernel refuses the map.
    fn new(len: usize) -> std::io::Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| std::io::Error::other("the size overflows"))?
            .max(1);
        let map = memmap2::MmapMut::map_anon(bytes)?;
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        Ok(Zeroed {
            map,
            len,
            _values: std::marker::PhantomData,
        })
    }
}

impl<T: ZeroBits> std::ops::Deref for Zeroed<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the map is page-aligned and holds `len` values of `T` (any bit pattern is
        // one, `ZeroBits`), and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast(), self.len) }
    }
}

impl<T: ZeroBits> std::ops::DerefMut for Zeroed<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().cast(), self.len) }
    }
}

impl<T> std::fmt::Debug for Zeroed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zeroed").field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_heads_read_back_per_layer_head_and_position() {
        let mut cache = KvCache::new(2, 3, 2, 2, KvPrecision::F32).unwrap();
        cache.store(1, 2, &[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]);
        cache.store(1, 1, &[-1.0, -2.0, -3.0, -4.0], &[0.5; 4]);
        let out = cache.read_values(1, 1, 1..3);
        assert_eq!(out, [0.5, 0.5, 7.0, 8.0], "head 1, positions 1 and 2");
        assert_eq!(cache.read_values(1, 0, 2..3), [5.0, 6.0]);
        assert_eq!(
            cache.read_values(0, 0, 0..2),
            [0.0; 4],
            "other layers untouched"
        );
        // Three positions take one block of 16 per (layer, head), keys and values alike.
        assert_eq!(cache.size_bytes(), 2 * (2 * 2 * 16 * 2) * 4);
    }

    #[test]
    fn keys_read_back_as_blocks_of_sixteen_positions_side_by_side() {
        let (positions, head_dim) = (20, 3);
        let mut cache = KvCache::new(1, positions, 2, head_dim, KvPrecision::F32).unwrap();
        let key = |p: usize, head: usize, d: usize| (p * 100 + head * 10 + d) as f32;
        for p in 0..positions {
            let k: Vec<f32> = (0..2 * head_dim).map(|i| key(p, i / 3, i % 3)).collect();
            cache.store(0, p, &k, &[0.0; 6]);
        }
        let out = cache.read_keys(0, 1, 0..positions);
        assert_eq!(out.len(), 2 * KEY_BLOCK * head_dim, "whole blocks");
        for p in 0..positions {
            for d in 0..head_dim {
                let (block, lane) = (p / KEY_BLOCK, p % KEY_BLOCK);
                let got = out[(block * head_dim + d) * KEY_BLOCK + lane];
                assert_eq!(got, key(p, 1, d), "position {p}, dim {d}");
            }
        }
        // Past the last stored position: zeros, never another head's keys.
        assert_eq!(out[head_dim * KEY_BLOCK + positions % KEY_BLOCK], 0.0);
    }

    #[test]
    #[should_panic(expected = "start on a block")]
    fn key_reads_must_start_on_a_block() {
        let cache = KvCache::new(1, 40, 1, 2, KvPrecision::F32).unwrap();
        cache.read_keys(0, 0, 3..20);
    }

    #[test]
    fn f16_cache_rounds_to_half_and_takes_half_the_memory() {
        let mut cache = KvCache::new(1, 16, 1, 4, KvPrecision::F16).unwrap();
        let key = [1.0, 1.0 / 3.0, -65504.0, 1e-3];
        cache.store(0, 3, &key, &key);
        let out = cache.read_values(0, 0, 3..4);
        for (got, want) in out.iter().zip(key) {
            assert_eq!(*got, f16::from_f32(want).to_f32());
            assert!((got - want).abs() <= want.abs() * 1e-3);
        }
        let keys = cache.read_keys(0, 0, 0..4);
        for (d, want) in key.iter().enumerate() {
            assert_eq!(keys[d * KEY_BLOCK + 3], f16::from_f32(*want).to_f32());
        }
        assert_eq!(cache.precision(), KvPrecision::F16);
        assert_eq!(cache.size_bytes(), 2 * 16 * 4 * 2);
    }

    /// A cache of 2 layers, 2 KV heads of 3 values, `positions` stored with values that name
    /// their layer, position, head and dim.
    fn filled(precision: KvPrecision, capacity: usize, positions: usize, sign: f32) -> KvCache {
        let mut cache = KvCache::new(2, capacity, 2, 3, precision).unwrap();
        for layer in 0..2 {
            for p in 0..positions {
                let k: Vec<f32> = (0..6)
                    .map(|i| sign * (layer * 1000 + p * 10 + i) as f32)
                    .collect();
                let v: Vec<f32> = k.iter().map(|x| x + 0.5).collect();
                cache.store(layer, p, &k, &v);
            }
        }
        cache
    }

    #[test]
    fn copied_rows_load_back_bit_for_bit_at_either_precision() {
        for precision in [KvPrecision::F32, KvPrecision::F16] {
            let source = filled(precision, 40, 21, 1.0);
            let rows = source.copy_rows(21).unwrap();
            assert_eq!(rows.positions, 21);
            assert_eq!(rows.size_bytes(), source.rows_bytes(21));
            // Keys take two blocks of 16, values 21 rows, per layer and head.
            let values = 2 * 2 * (32 * 3 + 21 * 3);
            assert_eq!(rows.size_bytes(), values * precision.bytes() as usize);

            // Into a cache holding another sequence: the first 18 positions become the copy's.
            let mut cache = filled(precision, 40, 30, -1.0);
            cache.load_rows(&rows, 18);
            for layer in 0..2 {
                for head in 0..2 {
                    assert_eq!(
                        cache.read_values(layer, head, 0..18),
                        source.read_values(layer, head, 0..18),
                        "{precision:?}, layer {layer}, head {head}"
                    );
                    let keys = cache.read_keys(layer, head, 0..18);
                    let want = source.read_keys(layer, head, 0..18);
                    for p in 0..18 {
                        for d in 0..3 {
                            let at = (p / KEY_BLOCK * 3 + d) * KEY_BLOCK + p % KEY_BLOCK;
                            assert_eq!(keys[at], want[at], "key of position {p}");
                        }
                    }
                    assert_eq!(
                        cache.read_values(layer, head, 18..30),
                        filled(precision, 40, 30, -1.0).read_values(layer, head, 18..30),
                        "values past the loaded positions are the cache's own"
                    );
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "another model")]
    fn rows_of_another_shape_are_refused() {
        let rows = filled(KvPrecision::F32, 16, 4, 1.0).copy_rows(4).unwrap();
        let mut other = KvCache::new(2, 16, 1, 3, KvPrecision::F32).unwrap();
        other.load_rows(&rows, 4);
    }

    #[test]
    fn a_cache_larger_than_the_available_memory_is_refused_naming_its_size() {
        let size = KvSize {
            capacity: 1 << 20,
            per_position: 11_520,
        };
        let err = size.check_fits(Some(8 << 30)).unwrap_err().to_string();
        assert!(
            err.contains("1048576 tokens")
                && err.contains("12079595520 bytes")
                && err.contains("shorter context"),
            "the message names the context, the size and what to do: {err}"
        );
        assert!(size.check_fits(Some(16 << 30)).is_ok(), "it fits in 16 GiB");
        assert!(
            size.check_fits(None).is_ok(),
            "unknown memory is not refused"
        );
    }

    #[test]
    fn a_cache_the_kernel_cannot_map_is_an_error_not_a_panic() {
        // 2^61 bytes: past any machine's memory, and past the 47-bit address space.
        let result = Zeroed::<f32>::new(1 << 59);
        assert!(result.is_err(), "the map is refused");
        let err = KvCache::new(1 << 16, 1 << 20, 64, 128, KvPrecision::F32).unwrap_err();
        assert!(
            matches!(err, Error::InvalidLoadOption { .. }) && err.to_string().contains("bytes"),
            "{err}"
        );
    }

    #[test]
    fn convolution_state_is_copied_restored_and_counted_with_the_keys_and_values() {
        for precision in [KvPrecision::F32, KvPrecision::F16] {
            let conv = ConvShape {
                layers: 2,
                channels: 5,
            };
            let mut cache = KvCache::with_conv(1, 20, 1, 2, conv, precision).unwrap();
            let bytes = precision.bytes() as usize;
            // Keys and values: 32 slots of 2 values each; the state: 20 positions of 5.
            assert_eq!(cache.size_bytes(), (2 * 32 * 2 + 2 * 20 * 5) * bytes);
            let row = |layer: usize, p: usize, sign: f32| -> Vec<f32> {
                (0..5)
                    .map(|c| sign * (layer * 100 + p * 10 + c) as f32)
                    .collect()
            };
            let fill = |cache: &mut KvCache, positions: usize, sign: f32| {
                for layer in 0..2 {
                    for p in 0..positions {
                        cache.store_conv(layer, p, &row(layer, p, sign));
                    }
                }
            };
            fill(&mut cache, 12, 1.0);
            let rows = cache.copy_rows(12).unwrap();
            assert_eq!(rows.size_bytes(), cache.rows_bytes(12));
            // One key block of 16 positions, 12 value rows, 12 positions of state per layer.
            assert_eq!(rows.size_bytes(), (16 * 2 + 12 * 2 + 2 * 12 * 5) * bytes);
            // Another sequence, then the first 9 positions of the copy back.
            fill(&mut cache, 15, -1.0);
            cache.load_rows(&rows, 9);
            let mut out = [0.0; 5];
            for layer in 0..2 {
                for p in 0..15 {
                    cache.read_conv(layer, p, &mut out);
                    let sign = if p < 9 { 1.0 } else { -1.0 };
                    assert_eq!(
                        out[..],
                        row(layer, p, sign)[..],
                        "{precision:?} {layer} {p}"
                    );
                }
            }
        }
    }

    #[test]
    fn lfm2_1_2b_keeps_about_40_kib_of_convolution_state_a_position() {
        let config = q4nx::ModelConfig::from_json(
            r#"{"architectures": ["Lfm2ForCausalLM"], "hidden_size": 2048,
                "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
                "block_ff_dim": 12288, "vocab_size": 65536, "conv_L_cache": 3,
                "layer_types": ["conv", "conv", "full_attention", "conv", "conv",
                    "full_attention", "conv", "conv", "full_attention", "conv",
                    "full_attention", "conv", "full_attention", "conv", "full_attention",
                    "conv"]}"#,
        )
        .unwrap();
        // 10 convolution layers of 2048 channels, 6 attention layers of 8 KV heads of 64.
        let conv = 10 * 2048 * 2;
        let kv = 6 * 8 * 64 * 2 * 2;
        assert_eq!(conv, 40 << 10);
        assert_eq!(bytes_per_position(&config, KvPrecision::F16), conv + kv);
        assert_eq!(
            bytes_per_position(&config, KvPrecision::F32),
            2 * (conv + kv)
        );
    }

    #[test]
    fn a_cache_whose_size_overflows_is_an_error() {
        let err = KvCache::new(usize::MAX, 1 << 20, 8, 128, KvPrecision::F16).unwrap_err();
        assert!(err.to_string().contains("KV cache"), "{err}");
    }
}
