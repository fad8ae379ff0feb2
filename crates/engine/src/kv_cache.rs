//! The key/value cache: for every layer and every position of the context, the keys (after
//! q/k-norm and RoPE) and values of each KV head. Allocated once, for the context length the model
//! was loaded with. KV heads are stored once, never replicated per query head.

/// Keys and values as f32, laid out `[layer][position][kv_head * head_dim]`.
#[derive(Debug)]
pub struct KvCache {
    layers: usize,
    capacity: usize,
    kv_dim: usize,
    keys: Vec<f32>,   // (layers, capacity, kv_dim)
    values: Vec<f32>, // (layers, capacity, kv_dim)
}

impl KvCache {
    /// A zeroed cache for `capacity` positions of `layers` layers, `kv_dim` floats each.
    pub fn new(layers: usize, capacity: usize, kv_dim: usize) -> Self {
        let len = layers * capacity * kv_dim;
        KvCache {
            layers,
            capacity,
            kv_dim,
            keys: vec![0.0; len],
            values: vec![0.0; len],
        }
    }

    /// Positions the cache can hold (the context length).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes the cache occupies.
    pub fn size_bytes(&self) -> usize {
        (self.keys.len() + self.values.len()) * std::mem::size_of::<f32>()
    }

    fn offset(&self, layer: usize, position: usize) -> usize {
        debug_assert!(layer < self.layers && position < self.capacity);
        (layer * self.capacity + position) * self.kv_dim
    }

    /// Stores the key and value (`kv_dim` floats each) of `position` in `layer`.
    pub fn store(&mut self, layer: usize, position: usize, key: &[f32], value: &[f32]) {
        let at = self.offset(layer, position);
        self.keys[at..at + self.kv_dim].copy_from_slice(key);
        self.values[at..at + self.kv_dim].copy_from_slice(value);
    }

    /// The key of `position` in `layer` for KV head `head` (`head_dim` floats).
    pub fn key(&self, layer: usize, position: usize, head: usize, head_dim: usize) -> &[f32] {
        let at = self.offset(layer, position) + head * head_dim;
        &self.keys[at..at + head_dim]
    }

    /// The value of `position` in `layer` for KV head `head` (`head_dim` floats).
    pub fn value(&self, layer: usize, position: usize, head: usize, head_dim: usize) -> &[f32] {
        let at = self.offset(layer, position) + head * head_dim;
        &self.values[at..at + head_dim]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_heads_read_back_per_layer_and_position() {
        let mut cache = KvCache::new(2, 3, 4);
        cache.store(1, 2, &[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]);
        assert_eq!(cache.key(1, 2, 1, 2), &[3.0, 4.0]);
        assert_eq!(cache.value(1, 2, 0, 2), &[5.0, 6.0]);
        assert_eq!(cache.key(0, 2, 0, 4), &[0.0; 4], "other layers untouched");
        assert_eq!(cache.size_bytes(), 2 * 2 * 3 * 4 * 4);
    }
}
