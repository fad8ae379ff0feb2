//! The AVX-512 and AVX2 (with FMA) kernels, fusing each multiply-add as the portable code
//! does.

use std::arch::x86_64::*;

use half::f16;

use super::{bf16, softmax, weighted_columns, Kernels, Value, KEY_BLOCK};

/// How far ahead of its loads a kernel asks for the cache's bytes. A decode step reads each
/// KV head's keys, then its values, in one stream. Measured on MiniCPM5-2B's shape at 4096
/// positions (2 threads, all 42 layers, the cache in DRAM): see bench/README.md; asking
/// 16 KiB ahead into L2 brings attention near its time with the cache in L3, where the
/// hardware prefetcher alone, or asking 8 KiB ahead into L1, leaves it waiting on memory.
/// Into L1, each request probably holds one of the core's few L1 miss buffers until its
/// line arrives, which caps one core's stream.
const AHEAD: usize = 16 * 1024;

/// Asks for the cache line [`AHEAD`] bytes past `p`, into L2. A hint only: that address
/// may lie past the end of the cache and is never read.
#[inline(always)]
fn prefetch_ahead<E>(p: *const E) {
    // SAFETY: prefetching reads nothing and cannot fault, whatever the address.
    unsafe { _mm_prefetch::<_MM_HINT_T1>(p.cast::<i8>().wrapping_add(AHEAD)) }
}

/// `acc + x · splat(*s)`, as `_mm512_fmadd_ps` computes it (rounded once), in one
/// `vfmadd231ps` that broadcasts `*s` as it loads it. Written out because LLVM hoists a
/// broadcast that two multiply-adds share into a `vbroadcastss` of its own: on Zen 4 that
/// extra instruction per pair of products made attention's arithmetic about 15% slower
/// (bench/README.md). Safety: `s` is readable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn fmadd_splat(acc: __m512, x: __m512, s: *const f32) -> __m512 {
    let mut acc = acc;
    // SAFETY: reads the one f32 at `s` (the caller's promise); touches no memory else.
    unsafe {
        std::arch::asm!(
            "vfmadd231ps {acc}, {x}, dword ptr [{s}]{{1to16}}",
            acc = inout(zmm_reg) acc,
            x = in(zmm_reg) x,
            s = in(reg) s,
            options(pure, readonly, nostack, preserves_flags),
        );
    }
    acc
}

/// Whether the value `offset` values of `E` into a run starts a 64-byte cache line (runs
/// start on one): the kernels prefetch once per line, at the loads that start one.
#[inline(always)]
fn starts_line<E>(offset: usize) -> bool {
    (offset * size_of::<E>()).is_multiple_of(64)
}

/// Proof that the CPU has AVX-512F (only [`Avx512::detect`] makes one), and how its kernels
/// broadcast a query or weight value ([`fmadd_each`]; from memory unless told otherwise).
#[derive(Clone, Copy)]
pub struct Avx512 {
    broadcast_in_register: bool,
}

impl Avx512 {
    pub fn detect() -> Option<Self> {
        is_x86_feature_detected!("avx512f").then_some(Avx512 {
            broadcast_in_register: false,
        })
    }

    /// The same kernels, broadcasting into a register or not (the sums are the same).
    pub fn with_broadcast_in_register(self, broadcast_in_register: bool) -> Self {
        Avx512 {
            broadcast_in_register,
        }
    }
}

impl Kernels for Avx512 {
    fn scores<const G: usize, E: Value>(
        self,
        q: &[f32],
        keys: &[E],
        scale: f32,
        scores: &mut [f32],
        stride: usize,
        first: usize,
    ) {
        check_scores::<G, E>(q, keys, scores, stride, first);
        // SAFETY: AVX-512F is present (self exists); the bounds were checked just above.
        unsafe {
            match self.broadcast_in_register {
                true => scores_avx512::<G, E, true>(q, keys, scale, scores, stride, first),
                false => scores_avx512::<G, E, false>(q, keys, scale, scores, stride, first),
            }
        }
    }

    fn weighted_values<const G: usize, E: Value>(
        self,
        weights: &[f32],
        stride: usize,
        first: usize,
        values: &[E],
        out: &mut [f32],
    ) {
        let whole = check_values::<G, E>(weights, stride, first, values, out, 16);
        let (w, v) = (weights, values);
        // SAFETY: AVX-512F is present (self exists); the bounds were checked just above.
        unsafe {
            match self.broadcast_in_register {
                true => values_avx512::<G, E, true>(w, stride, first, v, out, whole),
                false => values_avx512::<G, E, false>(w, stride, first, v, out, whole),
            }
        }
        weighted_columns(G, weights, stride, first, values, out, whole);
    }

    fn softmax(self, x: &mut [f32]) {
        // SAFETY: AVX-512F is present (self exists).
        unsafe { softmax_avx512(x) }
    }
}

/// Whether this core runs the AVX-512 kernels faster with each query or weight value
/// broadcast into a register once for the multiply-adds that share it, rather than from
/// memory inside each of them. Measured once per process, as `peak::bf16_dot_pays` is: the
/// scores kernel of a pass of 8 heads of 128 over 96 positions (24 KiB of keys, held in L1),
/// both ways, five times alternated, the fastest of each counts. On the Intel Xeon this was
/// built on the register makes the kernels 4-11% faster (a whole prefill about 1%); on Zen 4
/// a separate broadcast was measured 15% slower ([`fmadd_splat`]), so the register must win by
/// 5% to be chosen.
pub fn broadcast_in_register_pays() -> bool {
    static REGISTER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *REGISTER.get_or_init(|| {
        const G: usize = 8;
        let (hd, positions) = (128, 96);
        let q: Vec<f32> = (0..G * hd).map(|i| (i as f32 * 0.1).sin()).collect();
        let keys: Vec<f16> = (0..positions * hd)
            .map(|i| f16::from_f32((i as f32 * 0.3).cos()))
            .collect();
        let mut scores = vec![0.0; G * positions];
        let mut time = |register: bool| {
            let start = std::time::Instant::now();
            for _ in 0..50 {
                let kernels = Avx512 {
                    broadcast_in_register: register,
                };
                kernels.scores::<G, f16>(&q, &keys, 1.0, &mut scores, positions, 0);
                std::hint::black_box(&mut scores);
            }
            start.elapsed()
        };
        let (mut register, mut memory) = (std::time::Duration::MAX, std::time::Duration::MAX);
        for _ in 0..5 {
            register = register.min(time(true));
            memory = memory.min(time(false));
        }
        register.as_secs_f64() * 1.05 < memory.as_secs_f64()
    })
}

/// Proof that the CPU has AVX2, FMA and F16C: only [`Avx2::detect`] makes one.
#[derive(Clone, Copy)]
pub struct Avx2(());

impl Avx2 {
    pub fn detect() -> Option<Self> {
        (is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c"))
        .then_some(Avx2(()))
    }
}

impl Kernels for Avx2 {
    fn scores<const G: usize, E: Value>(
        self,
        q: &[f32],
        keys: &[E],
        scale: f32,
        scores: &mut [f32],
        stride: usize,
        first: usize,
    ) {
        check_scores::<G, E>(q, keys, scores, stride, first);
        let block = q.len() / G * KEY_BLOCK;
        for (b, keys) in keys.chunks_exact(block).enumerate() {
            let first = first + b * KEY_BLOCK;
            // SAFETY: AVX2, FMA and F16C are present (self exists); the bounds were checked above.
            unsafe { scores_avx2::<G, E>(q, keys, scale, scores, stride, first) }
        }
    }

    fn weighted_values<const G: usize, E: Value>(
        self,
        weights: &[f32],
        stride: usize,
        first: usize,
        values: &[E],
        out: &mut [f32],
    ) {
        let whole = check_values::<G, E>(weights, stride, first, values, out, 8);
        // SAFETY: AVX2 and FMA are present (self exists); the bounds were checked above.
        unsafe { values_avx2::<G, E>(weights, stride, first, values, out, whole) };
        weighted_columns(G, weights, stride, first, values, out, whole);
    }

    fn softmax(self, x: &mut [f32]) {
        // SAFETY: AVX2 is present (self exists).
        unsafe { softmax_avx2(x) }
    }
}

/// Checks what the unchecked loads and stores of a scores kernel rely on.
fn check_scores<const G: usize, E>(
    q: &[impl Copy],
    keys: &[E],
    scores: &[f32],
    stride: usize,
    first: usize,
) {
    let hd = q.len() / G;
    let blocks = keys.len() / (hd * KEY_BLOCK).max(1);
    assert!(q.len() == G * hd && hd > 0 && blocks > 0 && keys.len() == blocks * hd * KEY_BLOCK);
    assert!(first + blocks * KEY_BLOCK <= stride && scores.len() >= G * stride);
}

/// Checks what the unchecked loads and stores of a weighted-values kernel rely on; returns
/// the columns it covers (whole multiples of `width`).
fn check_values<const G: usize, E>(
    weights: &[impl Copy],
    stride: usize,
    first: usize,
    values: &[E],
    out: &[f32],
    width: usize,
) -> usize {
    let hd = out.len() / G;
    assert!(hd > 0 && out.len() == G * hd && values.len().is_multiple_of(hd));
    assert!(first + values.len() / hd <= stride && weights.len() >= G * stride);
    hd / width * width
}

/// Key blocks side by side in one pass of a scores kernel: each query value then feeds three
/// multiply-adds, 24 sums in registers for a pass of 8 heads.
const BLOCKS: usize = 3;

/// Scores for the key blocks of `keys`, [`BLOCKS`] at a time, then the last one or two.
#[target_feature(enable = "avx512f")]
unsafe fn scores_avx512<const G: usize, E: Value, const REGISTER: bool>(
    q: &[f32],
    keys: &[E],
    scale: f32,
    scores: &mut [f32],
    stride: usize,
    first: usize,
) {
    let hd = q.len() / G;
    let blocks = keys.len() / (hd * KEY_BLOCK);
    let pass = Blocks {
        q: q.as_ptr(),
        hd,
        scale: _mm512_set1_ps(scale),
        scores: scores.as_mut_ptr(),
        stride,
    };
    let mut b = 0;
    while b + BLOCKS <= blocks {
        score_blocks::<G, BLOCKS, E, REGISTER>(&pass, keys.as_ptr(), b, first);
        b += BLOCKS;
    }
    match blocks - b {
        2 => score_blocks::<G, 2, E, REGISTER>(&pass, keys.as_ptr(), b, first),
        1 => score_blocks::<G, 1, E, REGISTER>(&pass, keys.as_ptr(), b, first),
        _ => {}
    }
}

/// What every call of [`score_blocks`] in one scores kernel shares.
struct Blocks {
    /// The pass's queries, `[head_dim][G]`.
    q: *const f32,
    hd: usize,
    scale: __m512,
    scores: *mut f32,
    stride: usize,
}

/// Scores of key blocks `b..b + N`: `N` vectors of 16 keys per `d` share each query value,
/// so the `G * N` sums stay in registers over the whole of `d`.
/// Safety: the bounds that `check_scores` checked for the kernel cover these blocks.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn score_blocks<const G: usize, const N: usize, E: Value, const REGISTER: bool>(
    pass: &Blocks,
    keys: *const E,
    b: usize,
    first: usize,
) {
    let hd = pass.hd;
    let k: [*const E; N] = std::array::from_fn(|i| keys.add((b + i) * hd * KEY_BLOCK));
    let mut acc = [[_mm512_setzero_ps(); N]; G];
    for d in 0..hd {
        if starts_line::<E>(d * KEY_BLOCK) {
            for k in k {
                prefetch_ahead(k.wrapping_add(d * KEY_BLOCK));
            }
        }
        // SAFETY (all loads and stores): the bounds checked by `check_scores`.
        let x: [__m512; N] = std::array::from_fn(|i| E::load16(k[i].add(d * KEY_BLOCK)));
        let qd = pass.q.add(d * G);
        for (g, acc) in acc.iter_mut().enumerate() {
            fmadd_each::<N, REGISTER>(acc, &x, qd.add(g));
        }
    }
    for (g, acc) in acc.iter().enumerate() {
        for (i, acc) in acc.iter().enumerate() {
            let at = pass
                .scores
                .add(g * pass.stride + first + (b + i) * KEY_BLOCK);
            _mm512_storeu_ps(at, _mm512_mul_ps(*acc, pass.scale));
        }
    }
}

/// `acc[i] + x[i] · splat(*s)` for each `i`, rounded once each: the value at `s` loaded
/// once into a register for all of them (`REGISTER`), or broadcast from memory by each
/// multiply-add ([`fmadd_splat`]). The same sums either way; which is faster depends on the
/// core ([`broadcast_in_register_pays`]). Safety: `s` is readable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn fmadd_each<const N: usize, const REGISTER: bool>(
    acc: &mut [__m512; N],
    x: &[__m512; N],
    s: *const f32,
) {
    if REGISTER {
        let s = _mm512_set1_ps(*s);
        for (acc, x) in acc.iter_mut().zip(x) {
            *acc = _mm512_fmadd_ps(*x, s, *acc);
        }
    } else {
        for (acc, x) in acc.iter_mut().zip(x) {
            *acc = fmadd_splat(*acc, *x, s);
        }
    }
}

/// Columns of values summed in one pass of a weighted-values kernel (3 vectors of 16): each
/// weight then feeds three multiply-adds, 24 sums in registers for a pass of 8 heads.
const COLUMNS: usize = 3;

/// Columns `0..whole` (a multiple of 16) in pieces of [`COLUMNS`] vectors, then one or two.
#[target_feature(enable = "avx512f")]
unsafe fn values_avx512<const G: usize, E: Value, const REGISTER: bool>(
    weights: &[f32],
    stride: usize,
    first: usize,
    values: &[E],
    out: &mut [f32],
    whole: usize,
) {
    let hd = out.len() / G;
    let pass = Columns {
        weights: weights.as_ptr().add(first),
        stride,
        values: values.as_ptr(),
        positions: values.len() / hd,
        out: out.as_mut_ptr(),
        hd,
    };
    let vectors = whole / 16;
    let mut v = 0;
    while v + COLUMNS <= vectors {
        value_columns::<G, COLUMNS, E, REGISTER>(&pass, v * 16);
        v += COLUMNS;
    }
    match vectors - v {
        2 => value_columns::<G, 2, E, REGISTER>(&pass, v * 16),
        1 => value_columns::<G, 1, E, REGISTER>(&pass, v * 16),
        _ => {}
    }
}

/// What every call of [`value_columns`] in one weighted-values kernel shares.
struct Columns<E> {
    /// The weights of the first position, `G` rows `stride` apart.
    weights: *const f32,
    stride: usize,
    /// `[positions][hd]`.
    values: *const E,
    positions: usize,
    /// `[G][hd]`.
    out: *mut f32,
    hd: usize,
}

/// Columns `column..column + 16 N` of the pass's outputs: `N` vectors of values per position
/// share each weight, so the `G * N` sums stay in registers over all positions.
/// Safety: the bounds that `check_values` checked for the kernel cover these columns.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn value_columns<const G: usize, const N: usize, E: Value, const REGISTER: bool>(
    pass: &Columns<E>,
    column: usize,
) {
    let (hd, v, o) = (pass.hd, pass.values, pass.out);
    // SAFETY (all loads and stores): the bounds checked by `check_values`.
    let mut acc: [[__m512; N]; G] = std::array::from_fn(|g| {
        std::array::from_fn(|i| _mm512_loadu_ps(o.add(g * hd + column + 16 * i)))
    });
    for p in 0..pass.positions {
        let row = v.add(p * hd + column);
        for i in 0..N {
            if starts_line::<E>(column + 16 * i) {
                prefetch_ahead(row.wrapping_add(16 * i));
            }
        }
        let x: [__m512; N] = std::array::from_fn(|i| E::load16(row.add(16 * i)));
        for (g, acc) in acc.iter_mut().enumerate() {
            fmadd_each::<N, REGISTER>(acc, &x, pass.weights.add(g * pass.stride + p));
        }
    }
    for (g, acc) in acc.iter().enumerate() {
        for (i, acc) in acc.iter().enumerate() {
            _mm512_storeu_ps(o.add(g * hd + column + 16 * i), *acc);
        }
    }
}

#[target_feature(enable = "avx512f")]
unsafe fn softmax_avx512(x: &mut [f32]) {
    softmax(x)
}

/// The key block in two halves of 8 positions.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_avx2<const G: usize, E: Value>(
    q: &[f32],
    keys: &[E],
    scale: f32,
    scores: &mut [f32],
    stride: usize,
    first: usize,
) {
    let hd = q.len() / G;
    let (q, keys) = (q.as_ptr(), keys.as_ptr());
    for lane in [0, 8] {
        let mut acc = [_mm256_setzero_ps(); G];
        for d in 0..hd {
            if lane == 0 && starts_line::<E>(d * KEY_BLOCK) {
                prefetch_ahead(keys.wrapping_add(d * KEY_BLOCK));
            }
            // SAFETY (all loads and stores): the bounds checked by `check_scores`.
            let k = E::load8(keys.add(d * KEY_BLOCK + lane));
            for (g, acc) in acc.iter_mut().enumerate() {
                let qd = _mm256_set1_ps(*q.add(d * G + g));
                *acc = _mm256_fmadd_ps(qd, k, *acc);
            }
        }
        let scale = _mm256_set1_ps(scale);
        for (g, acc) in acc.iter().enumerate() {
            let at = scores.as_mut_ptr().add(g * stride + first + lane);
            _mm256_storeu_ps(at, _mm256_mul_ps(*acc, scale));
        }
    }
}

/// Columns `0..whole` in pieces of 8: one vector per head in registers across positions.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn values_avx2<const G: usize, E: Value>(
    weights: &[f32],
    stride: usize,
    first: usize,
    values: &[E],
    out: &mut [f32],
    whole: usize,
) {
    let hd = out.len() / G;
    let positions = values.len() / hd;
    let (w, v, o) = (weights.as_ptr(), values.as_ptr(), out.as_mut_ptr());
    for column in (0..whole).step_by(8) {
        // SAFETY (all loads and stores): the bounds checked by `check_values`.
        let mut acc: [__m256; G] = std::array::from_fn(|g| _mm256_loadu_ps(o.add(g * hd + column)));
        for p in 0..positions {
            if starts_line::<E>(column) {
                prefetch_ahead(v.wrapping_add(p * hd + column));
            }
            let vp = E::load8(v.add(p * hd + column));
            for (g, acc) in acc.iter_mut().enumerate() {
                let wg = _mm256_set1_ps(*w.add(g * stride + first + p));
                *acc = _mm256_fmadd_ps(wg, vp, *acc);
            }
        }
        for (g, acc) in acc.iter().enumerate() {
            _mm256_storeu_ps(o.add(g * hd + column), *acc);
        }
    }
}

#[target_feature(enable = "avx2")]
unsafe fn softmax_avx2(x: &mut [f32]) {
    softmax(x)
}

/// `acc + pairs(x) · pairs(splat(*s))`, one `vdpbf16ps` that broadcasts the pair at `s` as
/// it loads it (as [`fmadd_splat`] does for f32). Safety: `s` is readable.
#[inline]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn dot_splat(acc: __m512, x: __m512i, s: *const u32) -> __m512 {
    let mut acc = acc;
    // SAFETY: reads the one u32 at `s` (the caller's promise); touches no memory else.
    unsafe {
        std::arch::asm!(
            "vdpbf16ps {acc}, {x}, dword ptr [{s}]{{1to16}}",
            acc = inout(zmm_reg) acc,
            x = in(zmm_reg) x,
            s = in(reg) s,
            options(pure, readonly, nostack, preserves_flags),
        );
    }
    acc
}

/// Proof that the CPU has AVX-512F, BW and BF16: only [`Avx512Bf16::detect`] makes one.
#[derive(Clone, Copy)]
pub struct Avx512Bf16(());

impl Avx512Bf16 {
    pub fn detect() -> Option<Self> {
        (is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512bf16"))
        .then_some(Avx512Bf16(()))
    }
}

impl bf16::Kernels for Avx512Bf16 {
    fn key_pairs(self, keys: &[f16], hd: usize, out: &mut Vec<u32>) {
        assert!(hd.is_multiple_of(2) && keys.len().is_multiple_of(hd * KEY_BLOCK));
        out.clear();
        out.resize(keys.len() / 2, 0);
        // SAFETY: the CPU has the features (self exists); `out` holds half as many u32 as
        // `keys` has values, a whole number of 32-value rows pairs.
        unsafe { key_pairs_avx512(keys, out) }
    }

    fn value_pairs(self, values: &[f16], hd: usize, out: &mut Vec<u32>) {
        assert!(hd > 0 && values.len().is_multiple_of(hd));
        out.clear();
        out.resize((values.len() / hd).div_ceil(2) * hd, 0);
        let whole = hd / 16 * 16;
        // SAFETY: the CPU has the features (self exists); the lengths were set just above.
        unsafe { value_pairs_avx512(values, hd, whole, out) };
        bf16::value_pairs_from(values, hd, whole, out);
    }

    fn scores<const G: usize>(
        self,
        q: &[u32],
        keys: &[u32],
        scale: f32,
        scores: &mut [f32],
        stride: usize,
        first: usize,
    ) {
        check_scores::<G, u32>(q, keys, scores, stride, first);
        // SAFETY: the CPU has the features (self exists); the bounds were checked just
        // above (the same shapes as f32 scores, with `head_dim / 2` pairs).
        unsafe { scores_bf16::<G>(q, keys, scale, scores, stride, first) }
    }

    fn weighted_values<const G: usize>(
        self,
        weights: &[u32],
        half_stride: usize,
        first: usize,
        values: &[u32],
        out: &mut [f32],
    ) {
        let whole = check_values::<G, u32>(weights, half_stride, first, values, out, 32);
        // SAFETY: the CPU has the features (self exists); the bounds were checked just above.
        unsafe { values_bf16::<G>(weights, half_stride, first, values, out, whole) };
        bf16::weighted_columns(G, weights, half_stride, first, values, out, whole);
    }

    fn softmax(self, x: &mut [f32]) {
        // SAFETY: AVX-512F is present (self exists).
        unsafe { softmax_avx512(x) }
    }
}

/// Element `2p` of a pair vector is `p` of the first row, `2p + 1` is `p` of the second.
const INTERLEAVE: [u16; 32] = {
    let mut index = [0u16; 32];
    let mut p = 0;
    while p < 16 {
        index[2 * p] = p as u16;
        index[2 * p + 1] = 16 + p as u16;
        p += 1;
    }
    index
};

/// 16 values of each of two rows as 16 pairs: widened exactly, rounded to BF16 by
/// `vcvtne2ps2bf16`, interleaved.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn pairs16(first: __m512, second: __m512) -> __m512i {
    let index = _mm512_loadu_si512(INTERLEAVE.as_ptr().cast());
    // The second row's values go to the upper half, the first row's to the lower.
    let both: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(second, first));
    _mm512_permutexvar_epi16(index, both)
}

/// Each two rows of 16 keys (`d` and `d + 1` of a block) into 16 pairs.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn key_pairs_avx512(keys: &[f16], out: &mut [u32]) {
    let (k, o) = (keys.as_ptr(), out.as_mut_ptr());
    for row in 0..keys.len() / 32 {
        let at = k.add(row * 32);
        prefetch_ahead(at);
        // SAFETY (loads and stores): `keys` holds `32 · rows` values, `out` half as many.
        let first = _mm512_cvtph_ps(_mm256_loadu_si256(at.cast()));
        let second = _mm512_cvtph_ps(_mm256_loadu_si256(at.add(16).cast()));
        _mm512_storeu_si512(o.add(row * 16).cast(), pairs16(first, second));
    }
}

/// Columns `0..whole` (pieces of 16) of each pair of value rows; the second row of an odd
/// last pair is zero.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn value_pairs_avx512(values: &[f16], hd: usize, whole: usize, out: &mut [u32]) {
    let positions = values.len() / hd;
    let (v, o) = (values.as_ptr(), out.as_mut_ptr());
    for p2 in 0..positions.div_ceil(2) {
        let row = v.add(2 * p2 * hd);
        let second = 2 * p2 + 1 < positions;
        for column in (0..whole).step_by(16) {
            if starts_line::<f16>(column) {
                prefetch_ahead(row.wrapping_add(column));
                prefetch_ahead(row.wrapping_add(hd + column));
            }
            // SAFETY (loads and stores): rows `2 p2` (and `2 p2 + 1` if `second`) are in
            // `values`; `out` holds `hd` pairs per pair of rows.
            let a = _mm512_cvtph_ps(_mm256_loadu_si256(row.add(column).cast()));
            let b = if second {
                _mm512_cvtph_ps(_mm256_loadu_si256(row.add(hd + column).cast()))
            } else {
                _mm512_setzero_ps()
            };
            _mm512_storeu_si512(o.add(p2 * hd + column).cast(), pairs16(a, b));
        }
    }
}

#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn scores_bf16<const G: usize>(
    q: &[u32],
    keys: &[u32],
    scale: f32,
    scores: &mut [f32],
    stride: usize,
    first: usize,
) {
    let half = q.len() / G;
    let block = half * KEY_BLOCK;
    let blocks = keys.len() / block;
    let (q, keys, scores) = (q.as_ptr(), keys.as_ptr(), scores.as_mut_ptr());
    let scale = _mm512_set1_ps(scale);
    // Two blocks at a time share each broadcast of q, as in the f32 kernel.
    let mut b = 0;
    while b + 2 <= blocks {
        let (k0, k1) = (keys.add(b * block), keys.add((b + 1) * block));
        let mut acc0 = [_mm512_setzero_ps(); G];
        let mut acc1 = [_mm512_setzero_ps(); G];
        for d2 in 0..half {
            // SAFETY (all loads and stores): the bounds checked by `check_scores`.
            let x0 = _mm512_loadu_si512(k0.add(d2 * KEY_BLOCK).cast());
            let x1 = _mm512_loadu_si512(k1.add(d2 * KEY_BLOCK).cast());
            for g in 0..G {
                let qd = q.add(g * half + d2);
                acc0[g] = dot_splat(acc0[g], x0, qd);
                acc1[g] = dot_splat(acc1[g], x1, qd);
            }
        }
        for g in 0..G {
            let at = scores.add(g * stride + first + b * KEY_BLOCK);
            _mm512_storeu_ps(at, _mm512_mul_ps(acc0[g], scale));
            _mm512_storeu_ps(at.add(KEY_BLOCK), _mm512_mul_ps(acc1[g], scale));
        }
        b += 2;
    }
    if b < blocks {
        let k0 = keys.add(b * block);
        let mut acc = [_mm512_setzero_ps(); G];
        for d2 in 0..half {
            let x0 = _mm512_loadu_si512(k0.add(d2 * KEY_BLOCK).cast());
            for (g, acc) in acc.iter_mut().enumerate() {
                *acc = dot_splat(*acc, x0, q.add(g * half + d2));
            }
        }
        for (g, acc) in acc.iter().enumerate() {
            let at = scores.add(g * stride + first + b * KEY_BLOCK);
            _mm512_storeu_ps(at, _mm512_mul_ps(*acc, scale));
        }
    }
}

/// Columns `0..whole` in pieces of 32: two vectors per head stay in registers across all
/// pairs of positions.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn values_bf16<const G: usize>(
    weights: &[u32],
    half_stride: usize,
    first: usize,
    values: &[u32],
    out: &mut [f32],
    whole: usize,
) {
    let hd = out.len() / G;
    let pairs = values.len() / hd;
    let (w, v, o) = (weights.as_ptr(), values.as_ptr(), out.as_mut_ptr());
    for column in (0..whole).step_by(32) {
        // SAFETY (all loads and stores): the bounds checked by `check_values`.
        let mut lo: [__m512; G] = std::array::from_fn(|g| _mm512_loadu_ps(o.add(g * hd + column)));
        let mut hi: [__m512; G] =
            std::array::from_fn(|g| _mm512_loadu_ps(o.add(g * hd + column + 16)));
        for p2 in 0..pairs {
            let v0 = _mm512_loadu_si512(v.add(p2 * hd + column).cast());
            let v1 = _mm512_loadu_si512(v.add(p2 * hd + column + 16).cast());
            for g in 0..G {
                let wg = w.add(g * half_stride + first + p2);
                lo[g] = dot_splat(lo[g], v0, wg);
                hi[g] = dot_splat(hi[g], v1, wg);
            }
        }
        for g in 0..G {
            _mm512_storeu_ps(o.add(g * hd + column), lo[g]);
            _mm512_storeu_ps(o.add(g * hd + column + 16), hi[g]);
        }
    }
}
