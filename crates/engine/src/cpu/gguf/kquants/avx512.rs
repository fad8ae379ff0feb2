//! The AVX-512 VNNI level: a 512-bit vector holds 64 codes (two sub-blocks, as the activations
//! lie), `vpdpbusd` sums their products 4 by 4 into 16 words, and one reduction turns a
//! super-block's 4 vectors into its 16 sums of 16 weights (Q6_K scales them there) and then
//! its 8 sub-block sums.

use std::arch::x86_64::*;

use q4nx::gguf::GgmlType;

use super::x86::{self, Codes, Q4K, Q5K, Q6K};
use crate::cpu::quant::QuantizedActivations;

/// See [`super::dot_rows`].
///
/// # Safety
/// AVX-512F/BW/VNNI are present; the lengths were checked by the caller.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
pub(super) unsafe fn dot_rows(
    kind: GgmlType,
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    x86::dot_rows::<Vnni>(kind, rows, cols, acts, t0, tokens, out)
}

/// See [`super::block_isums`].
///
/// # Safety
/// As [`dot_rows`]; `block` and `xq` hold a whole block and 256 values.
#[cfg(test)]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
pub(super) unsafe fn block_isums(kind: GgmlType, block: &[u8], xq: &[i8]) -> [i32; 8] {
    x86::block_isums::<Vnni>(kind, block, xq)
}

struct Vnni;

/// A super-block's codes: vector `v` holds weights `64 v .. 64 v + 64`; for Q6_K also its 16
/// scales as words in the order of the reduction's 16-weight sums (word `4 k + i` is the
/// scale of weights `16 (4 i + k) ..`).
struct Unpacked {
    codes: [__m512i; 4],
    scales: __m512i,
}

impl Codes for Vnni {
    type W = Unpacked;

    #[inline(always)]
    unsafe fn unpack<const K: u8>(block: *const u8) -> Unpacked {
        let low4 = _mm512_set1_epi8(0x0f);
        let mut codes = [_mm512_setzero_si512(); 4];
        let mut scales = _mm512_setzero_si512();
        if K == Q6K {
            let (ql, qh) = (block, block.add(128));
            let top2 = _mm512_set1_epi8(0x30);
            for h in 0..2 {
                // Half h: the low nibbles of its 64 ql bytes are weights 0..64, the high ones
                // 64..128; qh's bit pairs 0, 1, 2, 3 (from the low byte up) top quarters 0..4.
                let l = _mm512_loadu_si512(ql.add(64 * h).cast());
                let high = _mm256_loadu_si256(qh.add(32 * h).cast());
                let high = _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(high),
                    _mm256_srli_epi16::<2>(high),
                );
                codes[2 * h] = _mm512_or_si512(
                    _mm512_and_si512(l, low4),
                    _mm512_and_si512(_mm512_slli_epi16::<4>(high), top2),
                );
                codes[2 * h + 1] = _mm512_or_si512(
                    _mm512_and_si512(_mm512_srli_epi16::<4>(l), low4),
                    _mm512_and_si512(high, top2),
                );
            }
            let order = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
            let bytes = _mm_loadu_si128(block.add(192).cast());
            scales = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(bytes, order));
        } else {
            let qs = block.add(if K == Q4K { 16 } else { 48 });
            for h in 0..2 {
                // 64 bytes: the nibbles of sub-blocks 4h, 4h + 1 (bytes 0..32) and 4h + 2,
                // 4h + 3 (bytes 32..64), low nibble first.
                let z = _mm512_loadu_si512(qs.add(64 * h).cast());
                let lo = _mm512_and_si512(z, low4);
                let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(z), low4);
                codes[2 * h] = _mm512_shuffle_i64x2::<0x44>(lo, hi);
                codes[2 * h + 1] = _mm512_shuffle_i64x2::<0xee>(lo, hi);
            }
            if K == Q5K {
                // Bit j of qh[l] adds 16 to weight l of sub-block j.
                let qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(block.add(16).cast()));
                let sixteen = _mm512_set1_epi8(16);
                for (v, codes) in codes.iter_mut().enumerate() {
                    let bits = _mm512_inserti64x4::<1>(
                        _mm512_set1_epi8((1u8 << (2 * v)) as i8),
                        _mm256_set1_epi8((2u8 << (2 * v)) as i8),
                    );
                    let set = _mm512_test_epi8_mask(qh, bits);
                    *codes = _mm512_mask_add_epi8(*codes, set, *codes, sixteen);
                }
            }
        }
        Unpacked { codes, scales }
    }

    #[inline(always)]
    unsafe fn isums<const K: u8>(w: &Unpacked, xq: *const i8) -> __m256i {
        let zero = _mm512_setzero_si512();
        let mut r = [zero; 4];
        for (v, r) in r.iter_mut().enumerate() {
            let x = _mm512_loadu_si512(xq.add(64 * v).cast());
            *r = _mm512_dpbusd_epi32(zero, w.codes[v], x);
            if K == Q6K {
                // The codes' offset: Σ (q - 32) x = Σ q x - Σ 32 x.
                *r = _mm512_sub_epi32(*r, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(32), x));
            }
        }
        // Word 4k + i: the sum of lane k (16 weights) of r[i].
        let pairs =
            |a, b| _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
        let (t0, t1) = (pairs(r[0], r[1]), pairs(r[2], r[3]));
        let mut sixteens =
            _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
        if K == Q6K {
            sixteens = _mm512_mullo_epi32(sixteens, w.scales);
        }
        // Sub-block 2i is lanes 0 and 1 of r[i] (words i and 4 + i), 2i + 1 lanes 2 and 3.
        let first = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0);
        let second = _mm512_setr_epi32(4, 12, 5, 13, 6, 14, 7, 15, 0, 0, 0, 0, 0, 0, 0, 0);
        _mm512_castsi512_si256(_mm512_add_epi32(
            _mm512_permutexvar_epi32(first, sixteens),
            _mm512_permutexvar_epi32(second, sixteens),
        ))
    }
}
