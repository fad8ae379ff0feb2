//! The AVX2 level (also the Avx512Bw level's): a 256-bit vector holds one sub-block's 32
//! codes, `vpmaddubsw` and `vpmaddwd` sum their products 4 by 4 into 8 words, and a tree of
//! `vphaddd` turns a super-block's 8 vectors into its 16 sums of 16 weights (Q6_K scales them
//! there) and then its 8 sub-block sums.

use std::arch::x86_64::*;

use q4nx::gguf::GgmlType;

use super::x86::{self, Codes, Q4K, Q5K, Q6K};
use crate::cpu::quant::QuantizedActivations;

/// See [`super::dot_rows`].
///
/// # Safety
/// AVX2 and FMA are present; the lengths were checked by the caller.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn dot_rows(
    kind: GgmlType,
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    x86::dot_rows::<Avx2>(kind, rows, cols, acts, t0, tokens, out)
}

/// See [`super::block_isums`].
///
/// # Safety
/// As [`dot_rows`]; `block` and `xq` hold a whole block and 256 values.
#[cfg(test)]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn block_isums(kind: GgmlType, block: &[u8], xq: &[i8]) -> [i32; 8] {
    x86::block_isums::<Avx2>(kind, block, xq)
}

struct Avx2;

/// A super-block's codes, sub-block by sub-block; for Q6_K also its 16 scales as words in the
/// order of the reduction's 16-weight sums: `[0, 2, 4, 6, 1, 3, 5, 7]` and the same plus 8.
struct Unpacked {
    codes: [__m256i; 8],
    scales: [__m256i; 2],
}

impl Codes for Avx2 {
    type W = Unpacked;

    #[inline(always)]
    unsafe fn unpack<const K: u8>(block: *const u8) -> Unpacked {
        let low4 = _mm256_set1_epi8(0x0f);
        let mut codes = [_mm256_setzero_si256(); 8];
        let mut scales = [_mm256_setzero_si256(); 2];
        if K == Q6K {
            let (ql, qh) = (block, block.add(128));
            let top2 = _mm256_set1_epi8(0x30);
            let bits = |v, mask| _mm256_and_si256(v, mask);
            for h in 0..2 {
                // Quarter k of half h: a nibble of ql (low for k < 2) under bits 2k, 2k + 1
                // of qh.
                let ql0 = _mm256_loadu_si256(ql.add(64 * h).cast());
                let ql1 = _mm256_loadu_si256(ql.add(64 * h + 32).cast());
                let high = _mm256_loadu_si256(qh.add(32 * h).cast());
                let c = &mut codes[4 * h..4 * h + 4];
                c[0] = _mm256_or_si256(bits(ql0, low4), bits(_mm256_slli_epi16::<4>(high), top2));
                c[1] = _mm256_or_si256(bits(ql1, low4), bits(_mm256_slli_epi16::<2>(high), top2));
                c[2] = _mm256_or_si256(bits(_mm256_srli_epi16::<4>(ql0), low4), bits(high, top2));
                c[3] = _mm256_or_si256(
                    bits(_mm256_srli_epi16::<4>(ql1), low4),
                    bits(_mm256_srli_epi16::<2>(high), top2),
                );
            }
            let order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
            let bytes = _mm_shuffle_epi8(_mm_loadu_si128(block.add(192).cast()), order);
            scales = [
                _mm256_cvtepi8_epi32(bytes),
                _mm256_cvtepi8_epi32(_mm_srli_si128::<8>(bytes)),
            ];
        } else {
            let qs = block.add(if K == Q4K { 16 } else { 48 });
            for n in 0..4 {
                let v = _mm256_loadu_si256(qs.add(32 * n).cast());
                codes[2 * n] = _mm256_and_si256(v, low4);
                codes[2 * n + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(v), low4);
            }
            if K == Q5K {
                // Bit j of qh[l] adds 16 to weight l of sub-block j: shifted to bit 4 (of
                // each byte: the shift is of 16-bit words, and the mask takes bit 4 alone).
                let qh = _mm256_loadu_si256(block.add(16).cast());
                let sixteen = _mm256_set1_epi8(16);
                for (j, codes) in codes.iter_mut().enumerate() {
                    let bit = match j {
                        0..4 => _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - j as i32)),
                        _ => _mm256_srl_epi16(qh, _mm_cvtsi32_si128(j as i32 - 4)),
                    };
                    *codes = _mm256_or_si256(*codes, _mm256_and_si256(bit, sixteen));
                }
            }
        }
        Unpacked { codes, scales }
    }

    #[inline(always)]
    unsafe fn isums<const K: u8>(w: &Unpacked, xq: *const i8) -> __m256i {
        let ones = _mm256_set1_epi16(1);
        let mut r = [_mm256_setzero_si256(); 8];
        for (j, r) in r.iter_mut().enumerate() {
            let x = _mm256_loadu_si256(xq.add(32 * j).cast());
            // Pairs: at most 2 * 63 * 128 in magnitude, so never saturated.
            let mut pairs = _mm256_maddubs_epi16(w.codes[j], x);
            if K == Q6K {
                // The codes' offset: Σ (q - 32) x = Σ q x - Σ 32 x.
                pairs = _mm256_sub_epi16(pairs, _mm256_maddubs_epi16(_mm256_set1_epi8(32), x));
            }
            *r = _mm256_madd_epi16(pairs, ones);
        }
        // Lane 0 of `a` holds the sums of the first 16 weights of sub-blocks 0..4, lane 1 of
        // the last 16; `b` the same of sub-blocks 4..8.
        let h = |x, y| _mm256_hadd_epi32(x, y);
        let mut a = h(h(r[0], r[1]), h(r[2], r[3]));
        let mut b = h(h(r[4], r[5]), h(r[6], r[7]));
        if K == Q6K {
            a = _mm256_mullo_epi32(a, w.scales[0]);
            b = _mm256_mullo_epi32(b, w.scales[1]);
        }
        _mm256_add_epi32(
            _mm256_permute2x128_si256::<0x20>(a, b),
            _mm256_permute2x128_si256::<0x31>(a, b),
        )
    }
}
