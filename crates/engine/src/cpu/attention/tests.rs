use super::*;
use crate::kv_cache::KvPrecision;

/// Per query head, straight from the definition.
fn reference(
    shape: AttentionShape,
    q: &[f32],
    tokens: usize,
    start: usize,
    k: &[f32],
    v: &[f32],
) -> Vec<f32> {
    let (hd, heads) = (shape.head_dim, shape.heads);
    let kv_dim = shape.kv_heads * hd;
    let group = heads / shape.kv_heads;
    let mut out = vec![0.0; tokens * heads * hd];
    for t in 0..tokens {
        for h in 0..heads {
            let kvh = h / group;
            let qh = &q[(t * heads + h) * hd..(t * heads + h + 1) * hd];
            let from = shape.first_seen(start + t);
            let mut s: Vec<f32> = (from..=start + t)
                .map(|p| {
                    let kp = &k[p * kv_dim + kvh * hd..p * kv_dim + (kvh + 1) * hd];
                    qh.iter().zip(kp).map(|(a, b)| a * b).sum::<f32>() * shape.scale
                })
                .collect();
            softmax(&mut s);
            for (p, w) in (from..).zip(&s) {
                for i in 0..hd {
                    out[(t * heads + h) * hd + i] += w * v[p * kv_dim + kvh * hd + i];
                }
            }
        }
    }
    out
}

#[test]
fn wide_kernels_compute_exactly_what_the_portable_ones_do() {
    // head_dim 40: two vectors of 16 columns (AVX-512) or five of 8 (AVX2), then a tail of 8;
    // 112: two passes of three vectors and one of one. 70 positions: key blocks in a pass of
    // three and one of two; 33, one of three; 16 and 1, one of one.
    let cases = [(8, 1, 70), (4, 1, 16), (6, 2, 33), (3, 1, 1)];
    for (hd, (heads, kv_heads, positions)) in
        [40, 112].into_iter().flat_map(|hd| cases.map(|c| (hd, c)))
    {
        let shape = AttentionShape {
            heads,
            kv_heads,
            head_dim: hd,
            scale: 0.3,
            window: None,
        };
        let mut cache = KvCache::new(1, positions, kv_heads, hd, KvPrecision::F32).unwrap();
        for p in 0..positions {
            let row: Vec<f32> = (0..kv_heads * hd)
                .map(|i| ((p * hd + i) as f32 * 0.37).sin())
                .collect();
            let half: Vec<f32> = row.iter().map(|x| x * 0.5).collect();
            cache.store(0, p, &row, &half);
        }
        let q: Vec<f32> = (0..heads * hd).map(|i| (i as f32 * 0.23).cos()).collect();
        let group_dim = heads / kv_heads * hd;
        let run = |kernels: &dyn Fn(Tile<'_, '_>, KvHead<'_>, &mut Scratch)| {
            let mut out = vec![f32::NAN; q.len()];
            for (kv_head, out) in out.chunks_exact_mut(group_dim).enumerate() {
                let head = KvHead {
                    cache: &cache,
                    level: KernelLevel::Scalar,
                    bf16: false,
                    in_register: false,
                    layer: 0,
                    kv_head,
                    sinks: None,
                };
                let tile = Tile {
                    q: &[&q[kv_head * group_dim..][..group_dim]],
                    out: &mut [out],
                    first: positions - 1,
                };
                kernels(tile, head, &mut Scratch::default());
            }
            out
        };
        let portable =
            run(&|tile, head, scratch| attend_group_with(Portable, shape, tile, head, scratch));
        assert!(portable.iter().all(|x| x.is_finite()));
        #[cfg(target_arch = "x86_64")]
        {
            if let Some(avx512) = wide::Avx512::detect() {
                for in_register in [true, false] {
                    let avx512 = avx512.with_broadcast_in_register(in_register);
                    let wide = run(&|tile, head, scratch| {
                        attend_group_with(avx512, shape, tile, head, scratch)
                    });
                    let what = format!("{shape:?}, {positions} positions, {in_register}");
                    assert_eq!(wide, portable, "AVX-512, broadcast in register: {what}");
                }
            }
            if let Some(avx2) = wide::Avx2::detect() {
                let wide =
                    run(&|tile, head, scratch| attend_group_with(avx2, shape, tile, head, scratch));
                assert_eq!(wide, portable, "AVX2, {shape:?}, {positions} positions");
            }
        }
    }
}

#[test]
fn grouped_heads_match_per_head_reference() {
    // Groups of 8, 4, 3, 2 and 1 query heads per KV head, and 12 and 9 (passes of 4 and 3).
    for (heads, kv_heads) in [
        (16, 2),
        (8, 2),
        (4, 2),
        (9, 3),
        (2, 2),
        (1, 1),
        (12, 1),
        (18, 2),
    ] {
        let shape = AttentionShape {
            heads,
            kv_heads,
            head_dim: 24,
            scale: 1.0 / 24f32.sqrt(),
            window: None,
        };
        grouped_heads_match_per_head_reference_for(shape);
    }
}

/// Sliding-window layers: windows inside one key block, cutting the second run of the cache,
/// reaching back into the first run, and longer than the sequence.
#[test]
fn sliding_windows_match_the_per_head_reference() {
    for window in [1, 3, 70, POSITIONS + 50, 10 * POSITIONS] {
        let shape = AttentionShape {
            heads: 8,
            kv_heads: 2,
            head_dim: 24,
            scale: 1.0 / 24f32.sqrt(),
            window: Some(window),
        };
        grouped_heads_match_per_head_reference_for(shape);
    }
}

fn grouped_heads_match_per_head_reference_for(shape: AttentionShape) {
    // Two runs of the cache read at a time, the second partial in its last key block.
    let (tokens, start) = (5, POSITIONS + 65);
    let kv_dim = shape.kv_heads * shape.head_dim;
    let q_dim = shape.heads * shape.head_dim;
    let positions = start + tokens;
    let wave = |i: usize, f: f32| (i as f32 * f).sin();
    let q: Vec<f32> = (0..tokens * q_dim).map(|i| wave(i, 0.23) * 2.0).collect();
    for precision in [KvPrecision::F32, KvPrecision::F16] {
        // What the cache holds: the values as stored at its precision.
        let stored = |f: f32| -> Vec<f32> {
            (0..positions * kv_dim)
                .map(|i| match precision {
                    KvPrecision::F32 => wave(i, f),
                    KvPrecision::F16 => half::f16::from_f32(wave(i, f)).to_f32(),
                })
                .collect()
        };
        let (k, v) = (stored(0.37), stored(0.11));
        let mut cache = KvCache::new(2, positions + 3, shape.kv_heads, 24, precision).unwrap();
        for p in 0..positions {
            let row = p * kv_dim..(p + 1) * kv_dim;
            cache.store(1, p, &k[row.clone()], &v[row]);
        }
        let expected = reference(shape, &q, tokens, start, &k, &v);
        for threads in [1, 3] {
            let mut cpu = CpuContext::best(threads);
            cpu.set_bf16_attention(false);
            let mut out = vec![f32::NAN; q.len()];
            causal_attention(&cpu, shape, &q, tokens, start, &cache, 1, &mut out);
            for (a, b) in out.iter().zip(&expected) {
                assert!(
                    (a - b).abs() < 1e-5,
                    "{shape:?} {precision:?}, {threads} threads: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn the_scalar_level_runs_the_portable_kernels() {
    assert_eq!(Width::for_level(KernelLevel::Scalar), Width::Portable);
    #[cfg(target_arch = "x86_64")]
    if KernelLevel::Avx2.is_supported() {
        assert_eq!(Width::for_level(KernelLevel::Avx2), Width::Avx2);
    }
}

/// The level a context is made with reaches the kernels (and the f16 widening of the cache),
/// and every level gives the portable kernels' result bit for bit (f32 products; BF16
/// products against their twin: `bf16_kernels_compute_exactly_what_their_twin_does`).
#[test]
fn every_level_gives_the_scalar_levels_result_exactly() {
    // Passes of 4 heads, and of 3 (SmolLM2's 9 heads over 3).
    // A window that starts in the second run of the cache, and one that reaches the first.
    for (heads, kv_heads, window) in [
        (8, 2, None),
        (9, 3, None),
        (8, 2, Some(20)),
        (4, 1, Some(90)),
    ] {
        let shape = AttentionShape {
            heads,
            kv_heads,
            head_dim: 40,
            scale: 0.3,
            window,
        };
        every_level_gives_the_scalar_levels_result_exactly_for(shape);
    }
}

fn every_level_gives_the_scalar_levels_result_exactly_for(shape: AttentionShape) {
    // Past the first run of the cache read at a time.
    let (tokens, start) = (3, POSITIONS + 30);
    let positions = start + tokens;
    let kv_dim = shape.kv_heads * shape.head_dim;
    let q: Vec<f32> = (0..tokens * shape.heads * 40)
        .map(|i| (i as f32 * 0.23).cos())
        .collect();
    for precision in [KvPrecision::F32, KvPrecision::F16] {
        let mut cache = KvCache::new(1, positions, shape.kv_heads, 40, precision).unwrap();
        for p in 0..positions {
            let row: Vec<f32> = (0..kv_dim)
                .map(|i| ((p * kv_dim + i) as f32 * 0.37).sin())
                .collect();
            cache.store(0, p, &row, &row);
        }
        let run = |level| {
            let mut out = vec![f32::NAN; q.len()];
            let mut cpu = CpuContext::new(2, level);
            cpu.set_bf16_attention(false);
            causal_attention(&cpu, shape, &q, tokens, start, &cache, 0, &mut out);
            out
        };
        let scalar = run(KernelLevel::Scalar);
        assert!(scalar.iter().all(|x| x.is_finite()));
        for level in KernelLevel::supported() {
            assert_eq!(run(level), scalar, "{level}, {precision:?}, {shape:?}");
        }
    }
}

/// A prefill attends its tokens in tiles; each token's output must be what attending it
/// alone gives, bit for bit (speculative decoding and the KV cache's prefix reuse rely on
/// it), at every level, for tiles that are full, partial, cross key blocks, and cross the
/// runs of the cache read at a time.
#[test]
fn tiles_of_tokens_give_each_tokens_result_alone_exactly() {
    let shape = AttentionShape {
        heads: 8,
        kv_heads: 2,
        head_dim: 40,
        scale: 0.3,
        window: None,
    };
    let q_dim = shape.heads * shape.head_dim;
    let kv_dim = shape.kv_heads * shape.head_dim;
    for (tokens, start) in [
        (2 * TILE + 3, 0),
        (TILE, 29),
        (5, 60),
        (TILE, POSITIONS - 3),
        (5, POSITIONS + 60),
    ] {
        let positions = start + tokens;
        let mut cache = KvCache::new(1, positions, shape.kv_heads, 40, KvPrecision::F16).unwrap();
        for p in 0..positions {
            let row: Vec<f32> = (0..kv_dim)
                .map(|i| ((p * kv_dim + i) as f32 * 0.37).sin())
                .collect();
            let values: Vec<f32> = row.iter().map(|x| x * 0.7 - 0.1).collect();
            cache.store(0, p, &row, &values);
        }
        let q: Vec<f32> = (0..tokens * q_dim)
            .map(|i| (i as f32 * 0.23).cos())
            .collect();
        for (level, bf16) in KernelLevel::supported()
            .into_iter()
            .flat_map(|level| [(level, false), (level, true)])
        {
            let mut cpu = CpuContext::new(2, level);
            cpu.set_bf16_attention(bf16);
            let mut tiled = vec![f32::NAN; q.len()];
            causal_attention(&cpu, shape, &q, tokens, start, &cache, 0, &mut tiled);
            let mut alone = vec![f32::NAN; q.len()];
            for (t, (q, out)) in q
                .chunks_exact(q_dim)
                .zip(alone.chunks_exact_mut(q_dim))
                .enumerate()
            {
                causal_attention(&cpu, shape, q, 1, start + t, &cache, 0, out);
            }
            assert!(alone.iter().all(|x| x.is_finite()));
            let products = if cpu.bf16_attention() { "bf16" } else { "f32" };
            assert_eq!(
                tiled, alone,
                "{level} {products}, {tokens} tokens from {start}"
            );
        }
    }
}

/// The wide kernels load f16 keys and values straight from the cache: every f16 bit
/// pattern must come out as the f32 the portable kernels use (NaNs as some NaN).
#[cfg(target_arch = "x86_64")]
#[test]
fn cached_halves_load_as_their_exact_f32() {
    use std::arch::x86_64::*;
    let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let same = |got: &[f32], src: &[f16], what: &str| {
        for (a, h) in got.iter().zip(src) {
            let b = h.to_f32();
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{what}, {h:?}: {a} vs {b}"
            );
        }
    };
    if wide::Avx512::detect().is_some() {
        for chunk in all.chunks_exact(16) {
            let mut got = [0.0f32; 16];
            // SAFETY: AVX-512F was detected; 16 values are readable and writable.
            unsafe { _mm512_storeu_ps(got.as_mut_ptr(), f16::load16(chunk.as_ptr())) };
            same(&got, chunk, "load16");
        }
    }
    if wide::Avx2::detect().is_some() {
        for chunk in all.chunks_exact(8) {
            let mut got = [0.0f32; 8];
            // SAFETY: AVX2 and F16C were detected; 8 values are readable and writable.
            unsafe { load8_f16c(chunk, &mut got) };
            same(&got, chunk, "load8");
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn load8_f16c(src: &[f16], out: &mut [f32; 8]) {
    std::arch::x86_64::_mm256_storeu_ps(out.as_mut_ptr(), f16::load8(src.as_ptr()));
}

#[test]
fn softmax_sums_to_one_and_survives_large_values() {
    let mut x = [1000.0, 1000.0, f32::NEG_INFINITY];
    softmax(&mut x);
    assert_eq!(x, [0.5, 0.5, 0.0]);
    // Longer than one 16-lane chunk, with a tail.
    let mut x: Vec<f32> = (0..37).map(|i| (i as f32 * 0.7).sin() * 30.0).collect();
    let want: Vec<f64> = {
        let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
        let e: Vec<f64> = x.iter().map(|&v| (v as f64 - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        e.iter().map(|v| v / sum).collect()
    };
    softmax(&mut x);
    for (got, want) in x.iter().zip(want) {
        assert!(
            (*got as f64 - want).abs() <= want * 1e-6 + 1e-12,
            "{got} vs {want}"
        );
    }
}

/// `bf16::attend_group` with `kernels` for the tokens `start..start + tokens` (one tile),
/// KV head by KV head.
fn bf16_group(
    kernels: impl bf16::Kernels,
    shape: AttentionShape,
    cache: &KvCache,
    q: &[f32],
    start: usize,
) -> Vec<f32> {
    let q_dim = shape.heads * shape.head_dim;
    let group_dim = q_dim / shape.kv_heads;
    let tokens = q.len() / q_dim;
    assert!(tokens <= TILE);
    let mut out = vec![f32::NAN; q.len()];
    for kv_head in 0..shape.kv_heads {
        let at = |t: usize| t * q_dim + kv_head * group_dim;
        let qs: Vec<&[f32]> = (0..tokens).map(|t| &q[at(t)..][..group_dim]).collect();
        let mut outs: Vec<Vec<f32>> = vec![vec![f32::NAN; group_dim]; tokens];
        let mut out_refs: Vec<&mut [f32]> = outs.iter_mut().map(|o| &mut o[..]).collect();
        let head = KvHead {
            cache,
            level: KernelLevel::Scalar,
            bf16: true,
            in_register: false,
            layer: 0,
            kv_head,
            sinks: None,
        };
        let tile = Tile {
            q: &qs,
            out: &mut out_refs,
            first: start,
        };
        bf16::attend_group(kernels, shape, tile, head, &mut Scratch::default());
        for (t, o) in outs.iter().enumerate() {
            out[at(t)..][..group_dim].copy_from_slice(o);
        }
    }
    out
}

/// An f16 cache of `positions` rows of keys and values from `wave`.
fn f16_cache(shape: AttentionShape, positions: usize, scale: f32) -> KvCache {
    let kv_dim = shape.kv_heads * shape.head_dim;
    let mut cache = KvCache::new(
        1,
        positions,
        shape.kv_heads,
        shape.head_dim,
        KvPrecision::F16,
    )
    .unwrap();
    for p in 0..positions {
        let row: Vec<f32> = (0..kv_dim)
            .map(|i| ((p * kv_dim + i) as f32 * 0.37).sin() * scale)
            .collect();
        let values: Vec<f32> = row.iter().map(|x| x * 0.7 - 0.1).collect();
        cache.store(0, p, &row, &values);
    }
    cache
}

/// The AVX-512 BF16 kernels give their twin's bits: heads of 40 (a piece of 32 columns and
/// 8 left to the twin's code), 64 and 128, groups of 8, 4, 3, 2 and 1, tiles from the first
/// position and past the first run of the cache read at a time, odd and even lengths.
#[test]
fn bf16_kernels_compute_exactly_what_their_twin_does() {
    #[cfg(target_arch = "x86_64")]
    let Some(avx512) = wide::Avx512Bf16::detect() else {
        return; // no BF16 dot products on this CPU
    };
    #[cfg(not(target_arch = "x86_64"))]
    return;
    #[cfg(target_arch = "x86_64")]
    for (heads, kv_heads, head_dim, window) in [
        (16, 2, 128, None),
        (9, 3, 64, None),
        (8, 2, 40, None),
        (4, 2, 64, None),
        (2, 1, 40, None),
        (3, 3, 64, None),
        (8, 2, 64, Some(7)),
        (4, 1, 40, Some(40)),
    ] {
        let shape = AttentionShape {
            heads,
            kv_heads,
            head_dim,
            scale: 1.0 / (head_dim as f32).sqrt(),
            window,
        };
        for (tokens, start) in [(TILE, 0), (1, 0), (3, 30), (5, POSITIONS + 37), (TILE, 95)] {
            let cache = f16_cache(shape, start + tokens, 1.0);
            let q: Vec<f32> = (0..tokens * heads * head_dim)
                .map(|i| (i as f32 * 0.23).cos() * 2.0)
                .collect();
            let twin = bf16_group(bf16::Portable, shape, &cache, &q, start);
            assert!(twin.iter().all(|x| x.is_finite()));
            let wide = bf16_group(avx512, shape, &cache, &q, start);
            assert_eq!(wide, twin, "{shape:?}, {tokens} tokens from {start}");
        }
    }
}

/// `dot2` is one lane of `vdpbf16ps` on this CPU, bit for bit, across the exponent range:
/// subnormal inputs and results, infinities and NaNs (as some NaN) included.
#[cfg(target_arch = "x86_64")]
#[test]
fn dot2_is_what_vdpbf16ps_computes() {
    use std::arch::x86_64::*;
    if wide::Avx512Bf16::detect().is_none() {
        return;
    }
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn hardware(acc: &[f32; 16], a: &[u32; 16], b: &[u32; 16]) -> [f32; 16] {
        let (acc, a, b) = (
            _mm512_loadu_ps(acc.as_ptr()),
            _mm512_loadu_si512(a.as_ptr().cast()),
            _mm512_loadu_si512(b.as_ptr().cast()),
        );
        let a: __m512bh = std::mem::transmute(a);
        let b: __m512bh = std::mem::transmute(b);
        let sum = _mm512_dpbf16_ps(acc, a, b);
        let mut out = [0.0; 16];
        _mm512_storeu_ps(out.as_mut_ptr(), sum);
        out
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    // A value of a random sign, significand and exponent near `scale`'s.
    let mut value = |scale: i32| -> f32 {
        let r = next();
        let exponent = (scale + (r % 24) as i32 - 12).clamp(0, 255) as u32;
        f32::from_bits((r >> 32) as u32 & 0x807f_ffff | exponent << 23)
    };
    for scale in [127, 20, 5, 1, 240, 250] {
        for _ in 0..2000 {
            let acc: [f32; 16] = std::array::from_fn(|_| value(scale));
            let mut half = || -> u32 { value(scale / 2 + 63).to_bits() >> 16 };
            let a: [u32; 16] = std::array::from_fn(|_| half() | half() << 16);
            let b: [u32; 16] = std::array::from_fn(|_| half() | half() << 16);
            // SAFETY: the features were detected.
            let got = unsafe { hardware(&acc, &a, &b) };
            for i in 0..16 {
                let want = super::bf16::dot2(acc[i], a[i], b[i]);
                assert!(
                    got[i].to_bits() == want.to_bits() || (got[i].is_nan() && want.is_nan()),
                    "{} + {a:08x?}·{b:08x?}: {} vs {want}",
                    acc[i],
                    got[i]
                );
            }
        }
    }
}

/// `to_bf16` rounds as `vcvtne2ps2bf16` does, on every f16 widened (what the cache holds)
/// and on f32 bit patterns across the range (what queries and weights are).
#[cfg(target_arch = "x86_64")]
#[test]
fn to_bf16_rounds_as_the_hardware_does() {
    use std::arch::x86_64::*;
    if wide::Avx512Bf16::detect().is_none() {
        return;
    }
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn hardware(x: &[f32; 16]) -> [u16; 16] {
        let both = _mm512_cvtne2ps_pbh(_mm512_setzero_ps(), _mm512_loadu_ps(x.as_ptr()));
        let mut out = [0u16; 32];
        let both: __m512i = std::mem::transmute(both);
        _mm512_storeu_si512(out.as_mut_ptr().cast(), both);
        std::array::from_fn(|i| out[i])
    }
    let halves = (0..=u16::MAX).map(|h| f16::from_bits(h).to_f32());
    let patterns = (0..1u64 << 20).map(|i| f32::from_bits((i * 4093 + i / 7) as u32));
    let all: Vec<f32> = halves.chain(patterns).collect();
    for chunk in all.chunks_exact(16) {
        let x: [f32; 16] = chunk.try_into().unwrap();
        // SAFETY: the features were detected.
        let got = unsafe { hardware(&x) };
        for (x, got) in x.iter().zip(got) {
            let want = super::bf16::to_bf16(*x);
            let nan = |h: u16| f32::from_bits(u32::from(h) << 16).is_nan();
            assert!(
                got == want || (nan(got) && nan(want)),
                "{x:e}: {got:04x} vs {want:04x}"
            );
        }
    }
}

/// With BF16 products each output moves from the f32 one by at most the rounding of the
/// products' inputs (2^-9 each) carried through: the scores by `scale · Σ_d |q_d k_d|` times
/// 2^-7 (q and k rounded, with margin), which moves the softmax weights by at most twice
/// that relatively, and the weighted sum by `Σ_p w_p |v_p|` times that plus 2^-7 (w and v
/// rounded). Asserted per output on MiniCPM5-2B's and SmolLM2's head shapes, tokens past
/// 300 positions, and the largest share of the bound printed.
#[test]
fn bf16_products_stay_within_their_bound_of_f32() {
    if !KernelLevel::detect().has_bf16_dot() {
        return;
    }
    for (heads, kv_heads, hd) in [(16, 2, 128), (9, 3, 64)] {
        let shape = AttentionShape {
            heads,
            kv_heads,
            head_dim: hd,
            scale: 1.0 / (hd as f32).sqrt(),
            window: None,
        };
        let (tokens, start) = (TILE, 300);
        let positions = start + tokens;
        let cache = f16_cache(shape, positions, 1.5);
        let q: Vec<f32> = (0..tokens * heads * hd)
            .map(|i| (i as f32 * 0.23).cos() * 2.0)
            .collect();
        let run = |bf16: bool| {
            let mut cpu = CpuContext::best(2);
            cpu.set_bf16_attention(bf16);
            let mut out = vec![f32::NAN; q.len()];
            causal_attention(&cpu, shape, &q, tokens, start, &cache, 0, &mut out);
            out
        };
        let (exact, bf16) = (run(false), run(true));
        assert_ne!(exact, bf16, "BF16 products ran");
        // The stored keys and values as f32, and the exact weights.
        let kv_dim = kv_heads * hd;
        let rows = |of: fn(f32) -> f32| -> Vec<f32> {
            (0..positions * kv_dim)
                .map(|i| f16::from_f32(of((i as f32 * 0.37).sin() * 1.5)).to_f32())
                .collect()
        };
        let (k, v) = (rows(|x| x), rows(|x| x * 0.7 - 0.1));
        let eps = 2f32.powi(-7);
        let mut worst = 0.0f32;
        for t in 0..tokens {
            for h in 0..heads {
                let kvh = h / (heads / kv_heads);
                let qh = &q[(t * heads + h) * hd..][..hd];
                let key = |p: usize| &k[p * kv_dim + kvh * hd..][..hd];
                let score_error = (0..=start + t)
                    .map(|p| {
                        qh.iter()
                            .zip(key(p))
                            .map(|(a, b)| (a * b).abs())
                            .sum::<f32>()
                    })
                    .fold(0.0, f32::max)
                    * shape.scale
                    * eps;
                let mut w: Vec<f32> = (0..=start + t)
                    .map(|p| qh.iter().zip(key(p)).map(|(a, b)| a * b).sum::<f32>())
                    .map(|s| s * shape.scale)
                    .collect();
                softmax(&mut w);
                for c in 0..hd {
                    let magnitude: f32 = w
                        .iter()
                        .enumerate()
                        .map(|(p, w)| w * v[p * kv_dim + kvh * hd + c].abs())
                        .sum();
                    let bound = magnitude * (2.0 * score_error + eps) + 1e-6;
                    let at = (t * heads + h) * hd + c;
                    let error = (bf16[at] - exact[at]).abs();
                    assert!(
                        error <= bound,
                        "token {t} head {h} column {c}: {error} > {bound}"
                    );
                    worst = worst.max(error / bound);
                }
            }
        }
        println!("{shape:?}: the largest error is {worst:.3} of its bound");
    }
}

/// A dense model's f32 cache is attended exactly whether BF16 products are allowed or not.
#[test]
fn an_f32_cache_stays_exact_with_bf16_allowed() {
    let shape = AttentionShape {
        heads: 8,
        kv_heads: 2,
        head_dim: 64,
        scale: 0.125,
        window: None,
    };
    let (tokens, start) = (5, 40);
    let kv_dim = shape.kv_heads * shape.head_dim;
    let mut cache = KvCache::new(1, start + tokens, 2, 64, KvPrecision::F32).unwrap();
    for p in 0..start + tokens {
        let row: Vec<f32> = (0..kv_dim)
            .map(|i| ((p * kv_dim + i) as f32 * 0.37).sin())
            .collect();
        cache.store(0, p, &row, &row);
    }
    let q: Vec<f32> = (0..tokens * 8 * 64)
        .map(|i| (i as f32 * 0.23).cos())
        .collect();
    let run = |bf16: bool| {
        let mut cpu = CpuContext::best(2);
        cpu.set_bf16_attention(bf16);
        let mut out = vec![f32::NAN; q.len()];
        causal_attention(&cpu, shape, &q, tokens, start, &cache, 0, &mut out);
        out
    };
    assert_eq!(run(true), run(false));
}

/// Not a check: times attention on MiniCPM5-2B's shape (16 query heads over 2 KV heads of
/// 128, an f16 cache) for bench/README.md. `HEARTH_ATTENTION="P L N T"` (default
/// `4096 42 1 2`): N tokens (1, a decode step; 64, a prefill chunk) at the end of P cached
/// positions, in each of L layers (42 hold 180 MB: memory; 1 stays in L3), on T threads.
/// Prints the median of 20 runs through the layers for f32 products and, alternating with
/// them, for BF16 products where this CPU has them.
#[test]
#[ignore = "a timing probe, run by hand: bench/README.md"]
fn time_attention_on_minicpm5_shape() {
    let setting = std::env::var("HEARTH_ATTENTION").unwrap_or("4096 42 1 2".into());
    let numbers: Vec<usize> = setting.split_whitespace().flat_map(str::parse).collect();
    let &[positions, layers, tokens, threads] = numbers.as_slice() else {
        panic!("HEARTH_ATTENTION is \"positions layers tokens threads\", not {setting:?}");
    };
    let (heads, kv_heads, hd) = (16, 2, 128);
    let shape = AttentionShape {
        heads,
        kv_heads,
        head_dim: hd,
        scale: 1.0 / (hd as f32).sqrt(),
        window: None,
    };
    let mut cache = KvCache::new(layers, positions, kv_heads, hd, KvPrecision::F16).unwrap();
    for p in 0..positions {
        let row: Vec<f32> = (0..kv_heads * hd)
            .map(|i| ((p * 7 + i) as f32 * 0.37).sin())
            .collect();
        for layer in 0..layers {
            cache.store(layer, p, &row, &row);
        }
    }
    let mut cpu = CpuContext::best(threads);
    let q: Vec<f32> = (0..tokens * heads * hd)
        .map(|i| (i as f32 * 0.23).cos())
        .collect();
    let mut out = vec![0.0; q.len()];
    let start = positions - tokens;
    // f32 and BF16 products (where this CPU has them) alternate run by run.
    let sides = if cpu.level().has_bf16_dot() { 2 } else { 1 };
    let mut secs = vec![Vec::new(); sides];
    for run in 0..20 * sides {
        cpu.set_bf16_attention(run % sides == 1);
        let clock = std::time::Instant::now();
        for layer in 0..layers {
            causal_attention(&cpu, shape, &q, tokens, start, &cache, layer, &mut out);
        }
        secs[run % sides].push(clock.elapsed().as_secs_f64());
    }
    for (side, secs) in secs.iter_mut().enumerate() {
        secs.sort_by(f64::total_cmp);
        let median = secs[secs.len() / 2];
        let pairs = (tokens * start + tokens * (tokens + 1) / 2) * layers;
        let fmas = (pairs * heads * hd * 2) as f64;
        println!(
            "{positions} positions, {tokens} tokens, {layers} layers, {threads} threads, \
             {} products: {:.3} ms, {:.1} G multiply-adds/s",
            ["f32", "bf16"][side],
            median * 1e3,
            fmas / median / 1e9
        );
    }
}

/// Not a check: times the AVX-512 f32 products of a pass of 8 heads of 128 (MiniCPM5's) with
/// each query or weight value broadcast into a register and from memory, over runs of keys
/// and values held in L1 (96 positions) and in L2 (960), for bench/README.md. Which of the
/// two a model uses is measured when it loads (`wide::broadcast_in_register_pays`).
#[cfg(target_arch = "x86_64")]
#[test]
#[ignore = "a timing probe, run by hand: bench/README.md"]
fn time_broadcasts() {
    const G: usize = 8;
    let Some(avx512) = wide::Avx512::detect() else {
        return println!("no AVX-512F here");
    };
    let hd = 128;
    let q: Vec<f32> = (0..G * hd).map(|i| (i as f32 * 0.1).sin()).collect();
    for positions in [96, 960] {
        let cache: Vec<f16> = (0..positions * hd)
            .map(|i| f16::from_f32((i as f32 * 0.3).cos()))
            .collect();
        let weights = vec![1.0 / positions as f32; G * positions];
        let mut scores = vec![0.0; G * positions];
        let mut out = vec![0.0; G * hd];
        let macs = (G * hd * positions * 100) as f64;
        // Register and memory alternate; the fastest of 20 rounds of 100 calls each counts.
        let mut best = [[f64::INFINITY; 2]; 2];
        for _ in 0..20 {
            for (side, in_register) in [true, false].into_iter().enumerate() {
                let kernels = avx512.with_broadcast_in_register(in_register);
                let clock = std::time::Instant::now();
                for _ in 0..100 {
                    kernels.scores::<G, f16>(&q, &cache, 1.0, &mut scores, positions, 0);
                    std::hint::black_box(&mut scores);
                }
                best[0][side] = best[0][side].min(clock.elapsed().as_secs_f64());
                let clock = std::time::Instant::now();
                for _ in 0..100 {
                    kernels.weighted_values::<G, f16>(&weights, positions, 0, &cache, &mut out);
                    std::hint::black_box(&mut out);
                }
                best[1][side] = best[1][side].min(clock.elapsed().as_secs_f64());
            }
        }
        for (product, [register, memory]) in ["scores", "weighted values"].iter().zip(best) {
            println!(
                "{positions} positions, {product}: {:.1} G multiply-adds/s broadcast in a \
                 register, {:.1} from memory",
                macs / register / 1e9,
                macs / memory / 1e9
            );
        }
    }
}
