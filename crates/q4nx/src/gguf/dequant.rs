//! ggml's tensor types and their decoding to f32, exactly as ggml's reference
//! `dequantize_row_*` functions compute it (same block layouts, same order of float operations,
//! so the results are bit-identical).

use half::f16;

/// Elements in one K-quant super-block.
const QK_K: usize = 256;

/// A ggml element type that Hearth can decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    /// 4-byte float.
    F32,
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// 32 signed 8-bit values and an f16 scale.
    Q8_0,
    /// 32 4-bit values (minus 8) and an f16 scale.
    Q4_0,
    /// 32 4-bit values, an f16 scale and an f16 min.
    Q4_1,
    /// 32 5-bit values (minus 16) and an f16 scale.
    Q5_0,
    /// 32 5-bit values, an f16 scale and an f16 min.
    Q5_1,
    /// 256 4-bit values in 8 groups with 6-bit scales and mins.
    Q4_K,
    /// 256 5-bit values in 8 groups with 6-bit scales and mins.
    Q5_K,
    /// 256 6-bit values in 16 groups with 8-bit scales.
    Q6_K,
    /// 32 4-bit E2M1 values and a power-of-two E8M0 scale (OCP microscaling; gpt-oss's experts).
    MXFP4,
}

const ALL: [GgmlType; 12] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::MXFP4,
];

impl GgmlType {
    /// The type with ggml's number `id`, if Hearth decodes it.
    pub fn from_id(id: u32) -> Option<Self> {
        ALL.into_iter().find(|t| t.id() == id)
    }

    /// ggml's number for the type (`enum ggml_type`).
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q4_K => 12,
            GgmlType::Q5_K => 13,
            GgmlType::Q6_K => 14,
            GgmlType::BF16 => 30,
            GgmlType::MXFP4 => 39,
        }
    }

    /// ggml's name for the type.
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "F32",
            GgmlType::F16 => "F16",
            GgmlType::BF16 => "BF16",
            GgmlType::Q8_0 => "Q8_0",
            GgmlType::Q4_0 => "Q4_0",
            GgmlType::Q4_1 => "Q4_1",
            GgmlType::Q5_0 => "Q5_0",
            GgmlType::Q5_1 => "Q5_1",
            GgmlType::Q4_K => "Q4_K",
            GgmlType::Q5_K => "Q5_K",
            GgmlType::Q6_K => "Q6_K",
            GgmlType::MXFP4 => "MXFP4",
        }
    }

    /// The names of every supported type, for error messages.
    pub fn supported_names() -> String {
        ALL.map(GgmlType::name).join(", ")
    }

    /// Elements per block.
    pub fn block_len(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q8_0
            | GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::MXFP4 => 32,
            GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => QK_K,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q8_0 => 34,
            GgmlType::Q4_0 => 18,
            GgmlType::Q4_1 => 20,
            GgmlType::Q5_0 => 22,
            GgmlType::Q5_1 => 24,
            GgmlType::Q4_K => 144,
            GgmlType::Q5_K => 176,
            GgmlType::Q6_K => 210,
            GgmlType::MXFP4 => 17,
        }
    }

    /// Bits per weight, for choosing a precision at least as high.
    pub fn bits_per_weight(self) -> f64 {
        (self.block_bytes() * 8) as f64 / self.block_len() as f64
    }

    /// Bytes of `elements` values (a multiple of the block length).
    pub fn bytes_for(self, elements: usize) -> usize {
        elements / self.block_len() * self.block_bytes()
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[inline]
fn h(bytes: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

/// Decodes `bytes` (whole blocks of `kind`) into `out`, which holds exactly as many elements.
///
/// # Panics
/// If the lengths disagree; callers size both from the same tensor info.
pub fn dequantize(kind: GgmlType, bytes: &[u8], out: &mut [f32]) {
    let (bl, bb) = (kind.block_len(), kind.block_bytes());
    assert_eq!(bytes.len() / bb * bl, out.len(), "dequantize: lengths");
    assert_eq!(bytes.len() % bb, 0, "dequantize: whole blocks");
    for (x, y) in bytes.chunks_exact(bb).zip(out.chunks_exact_mut(bl)) {
        match kind {
            GgmlType::F32 => y[0] = f32::from_le_bytes([x[0], x[1], x[2], x[3]]),
            GgmlType::F16 => y[0] = h(x, 0),
            GgmlType::BF16 => y[0] = crate::dtype::bf16_to_f32(u16::from_le_bytes([x[0], x[1]])),
            GgmlType::Q8_0 => q8_0(x, y),
            GgmlType::Q4_0 => q4_0(x, y),
            GgmlType::Q4_1 => q4_1(x, y),
            GgmlType::Q5_0 => q5_0(x, y),
            GgmlType::Q5_1 => q5_1(x, y),
            GgmlType::Q4_K => q4_k(x, y),
            GgmlType::Q5_K => q5_k(x, y),
            GgmlType::Q6_K => q6_k(x, y),
            GgmlType::MXFP4 => mxfp4(x, y),
        }
    }
}

/// MXFP4's weights doubled (E2M1's values times 2), by 4-bit code: ggml's `kvalues_mxfp4`.
pub const MXFP4_VALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Half the E8M0 scale `e` (2^(e - 127) / 2 = 2^(e - 128)), exactly as ggml's
/// `ggml_e8m0_to_fp32_half` computes it: subnormal for `e` 0 and 1, 2^127 for 255.
pub fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        u32::from(e - 1) << 23
    };
    f32::from_bits(bits)
}

/// `e: u8, qs: [u8; 16]`: element j is `MXFP4_VALUES[low nibble of qs[j]] * e8m0_half(e)`,
/// element j + 16 the high nibble's (ggml's `dequantize_row_mxfp4`).
fn mxfp4(x: &[u8], y: &mut [f32]) {
    let d = e8m0_half(x[0]);
    for j in 0..16 {
        y[j] = f32::from(MXFP4_VALUES[usize::from(x[1 + j] & 0x0f)]) * d;
        y[j + 16] = f32::from(MXFP4_VALUES[usize::from(x[1 + j] >> 4)]) * d;
    }
}

/// `d: f16, qs: [i8; 32]`.
fn q8_0(x: &[u8], y: &mut [f32]) {
    let d = h(x, 0);
    for (j, v) in y.iter_mut().enumerate() {
        *v = f32::from(x[2 + j] as i8) * d;
    }
}

/// `d: f16, qs: [u8; 16]`: element j in the low nibble of qs[j], j + 16 in the high one.
fn q4_0(x: &[u8], y: &mut [f32]) {
    let d = h(x, 0);
    let qs = &x[2..18];
    for j in 0..16 {
        let x0 = i32::from(qs[j] & 0x0f) - 8;
        let x1 = i32::from(qs[j] >> 4) - 8;
        y[j] = x0 as f32 * d;
        y[j + 16] = x1 as f32 * d;
    }
}

/// `d: f16, m: f16, qs: [u8; 16]`.
fn q4_1(x: &[u8], y: &mut [f32]) {
    let (d, m) = (h(x, 0), h(x, 2));
    let qs = &x[4..20];
    for j in 0..16 {
        y[j] = f32::from(qs[j] & 0x0f) * d + m;
        y[j + 16] = f32::from(qs[j] >> 4) * d + m;
    }
}

/// `d: f16, qh: u32 (the fifth bits), qs: [u8; 16]`.
fn q5_0(x: &[u8], y: &mut [f32]) {
    let d = h(x, 0);
    let qh = u32::from_le_bytes([x[2], x[3], x[4], x[5]]);
    let qs = &x[6..22];
    for j in 0..16 {
        let xh0 = ((qh >> j) << 4) & 0x10;
        let xh1 = (qh >> (j + 12)) & 0x10;
        let x0 = (u32::from(qs[j] & 0x0f) | xh0) as i32 - 16;
        let x1 = (u32::from(qs[j] >> 4) | xh1) as i32 - 16;
        y[j] = x0 as f32 * d;
        y[j + 16] = x1 as f32 * d;
    }
}

/// `d: f16, m: f16, qh: u32, qs: [u8; 16]`.
fn q5_1(x: &[u8], y: &mut [f32]) {
    let (d, m) = (h(x, 0), h(x, 2));
    let qh = u32::from_le_bytes([x[4], x[5], x[6], x[7]]);
    let qs = &x[8..24];
    for j in 0..16 {
        let xh0 = ((qh >> j) << 4) & 0x10;
        let xh1 = (qh >> (j + 12)) & 0x10;
        let x0 = u32::from(qs[j] & 0x0f) | xh0;
        let x1 = u32::from(qs[j] >> 4) | xh1;
        y[j] = x0 as f32 * d + m;
        y[j + 16] = x1 as f32 * d + m;
    }
}

/// The 6-bit scale and min of group `j` (0..8) from the 12 packed bytes of a K-quant block.
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// `d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128]`.
fn q4_k(x: &[u8], y: &mut [f32]) {
    let (d, min) = (h(x, 0), h(x, 2));
    let scales = &x[4..16];
    let qs = &x[16..144];
    for (n, chunk) in y.chunks_exact_mut(64).enumerate() {
        let q = &qs[n * 32..n * 32 + 32];
        let (sc, m) = scale_min_k4(2 * n, scales);
        let (d1, m1) = (d * f32::from(sc), min * f32::from(m));
        let (sc, m) = scale_min_k4(2 * n + 1, scales);
        let (d2, m2) = (d * f32::from(sc), min * f32::from(m));
        for l in 0..32 {
            chunk[l] = d1 * f32::from(q[l] & 0x0f) - m1;
            chunk[l + 32] = d2 * f32::from(q[l] >> 4) - m2;
        }
    }
}

/// `d: f16, dmin: f16, scales: [u8; 12], qh: [u8; 32], qs: [u8; 128]`.
fn q5_k(x: &[u8], y: &mut [f32]) {
    let (d, min) = (h(x, 0), h(x, 2));
    let scales = &x[4..16];
    let qh = &x[16..48];
    let qs = &x[48..176];
    for (n, chunk) in y.chunks_exact_mut(64).enumerate() {
        let ql = &qs[n * 32..n * 32 + 32];
        let (u1, u2) = (1u8 << (2 * n), 2u8 << (2 * n));
        let (sc, m) = scale_min_k4(2 * n, scales);
        let (d1, m1) = (d * f32::from(sc), min * f32::from(m));
        let (sc, m) = scale_min_k4(2 * n + 1, scales);
        let (d2, m2) = (d * f32::from(sc), min * f32::from(m));
        for l in 0..32 {
            let hi1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let hi2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            chunk[l] = d1 * f32::from((ql[l] & 0x0f) + hi1) - m1;
            chunk[l + 32] = d2 * f32::from((ql[l] >> 4) + hi2) - m2;
        }
    }
}

/// `ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16`.
fn q6_k(x: &[u8], y: &mut [f32]) {
    let d = h(x, 208);
    for (n, chunk) in y.chunks_exact_mut(128).enumerate() {
        let ql = &x[n * 64..n * 64 + 64];
        let qh = &x[128 + n * 32..128 + n * 32 + 32];
        let sc = &x[192 + n * 8..192 + n * 8 + 8];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i8 - 32;
            let q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            chunk[l] = d * f32::from(sc[is] as i8) * f32::from(q1);
            chunk[l + 32] = d * f32::from(sc[is + 2] as i8) * f32::from(q2);
            chunk[l + 64] = d * f32::from(sc[is + 4] as i8) * f32::from(q3);
            chunk[l + 96] = d * f32::from(sc[is + 6] as i8) * f32::from(q4);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16b(v: f32) -> [u8; 2] {
        f16::from_f32(v).to_le_bytes()
    }

    fn run(kind: GgmlType, block: &[u8]) -> Vec<f32> {
        assert_eq!(block.len(), kind.block_bytes(), "test block size");
        let mut out = vec![0f32; kind.block_len()];
        dequantize(kind, block, &mut out);
        out
    }

    #[test]
    fn ids_round_trip_and_sizes_match_ggml() {
        for t in ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
        }
        assert_eq!(GgmlType::from_id(9), None, "Q8_1 is not a weight type");
        assert_eq!(GgmlType::Q4_K.bits_per_weight(), 4.5);
        assert_eq!(GgmlType::Q6_K.bits_per_weight(), 6.5625);
        assert_eq!(GgmlType::Q8_0.bits_per_weight(), 8.5);
    }

    #[test]
    fn floats() {
        assert_eq!(run(GgmlType::F32, &1.25f32.to_le_bytes()), [1.25]);
        assert_eq!(run(GgmlType::F16, &[0x00, 0x3c]), [1.0]);
        assert_eq!(run(GgmlType::BF16, &[0x80, 0xbf]), [-1.0]);
    }

    #[test]
    fn q8_0_block() {
        let mut b = f16b(0.5).to_vec();
        b.extend((0..32).map(|i| (i as i8 - 16) as u8));
        let y = run(GgmlType::Q8_0, &b);
        assert_eq!(y[0], -8.0);
        assert_eq!(y[31], 7.5);
    }

    #[test]
    fn q4_0_block() {
        let mut b = f16b(2.0).to_vec();
        // qs[0] = 0xF0: element 0 = (0 - 8) * 2, element 16 = (15 - 8) * 2.
        b.push(0xf0);
        b.extend([0x88; 15]);
        let y = run(GgmlType::Q4_0, &b);
        assert_eq!((y[0], y[16], y[1], y[31]), (-16.0, 14.0, 0.0, 0.0));
    }

    #[test]
    fn q4_1_block() {
        let mut b = f16b(0.25).to_vec();
        b.extend(f16b(-1.0));
        b.push(0x3a); // element 0 = 10 * 0.25 - 1, element 16 = 3 * 0.25 - 1
        b.extend([0u8; 15]);
        let y = run(GgmlType::Q4_1, &b);
        assert_eq!((y[0], y[16], y[1]), (1.5, -0.25, -1.0));
    }

    #[test]
    fn q5_0_block() {
        let mut b = f16b(1.0).to_vec();
        // qh bit 0 -> fifth bit of element 0; bit 16 + 1 -> fifth bit of element 17.
        b.extend(((1u32 << 0) | (1u32 << 17)).to_le_bytes());
        b.push(0x21); // element 0 low nibble 1, element 16 high nibble 2
        b.push(0x30); // element 1 low 0, element 17 high 3
        b.extend([0u8; 14]);
        let y = run(GgmlType::Q5_0, &b);
        assert_eq!(y[0], (16 + 1 - 16) as f32);
        assert_eq!(y[16], (2 - 16) as f32);
        assert_eq!(y[1], -16.0);
        assert_eq!(y[17], (16 + 3 - 16) as f32);
    }

    #[test]
    fn q5_1_block() {
        let mut b = f16b(0.5).to_vec();
        b.extend(f16b(1.0));
        b.extend((1u32 << 31).to_le_bytes()); // fifth bit of element 31
        b.extend([0u8; 15]);
        b.push(0xf0); // element 15 low 0, element 31 high 15
        let y = run(GgmlType::Q5_1, &b);
        assert_eq!(y[31], 31.0 * 0.5 + 1.0);
        assert_eq!(y[15], 1.0);
    }

    #[test]
    fn q4_k_block() {
        let mut b = f16b(2.0).to_vec();
        b.extend(f16b(0.5));
        let mut scales = [0u8; 12];
        scales[0] = 3; // group 0 scale 3
        scales[4] = 5; // group 0 min 5
        scales[1] = 7; // group 1 scale 7, min 0
                       // group 4: scale = (scales[8] & 15) | (scales[0] >> 6) << 4; min = scales[8] >> 4 | ...
        scales[8] = 0x21; // scale 1, min 2
        scales[0] |= 0x40; // + 16 to group 4's scale
        b.extend(scales);
        let mut qs = [0u8; 128];
        qs[0] = 0x94; // element 0 = low 4 (group 0), element 32 = high 9 (group 1)
        qs[64] = 0x0a; // element 128 = low 10 (group 4)
        b.extend(qs);
        let y = run(GgmlType::Q4_K, &b);
        assert_eq!(y[0], 2.0 * 3.0 * 4.0 - 0.5 * 5.0);
        assert_eq!(y[32], 2.0 * 7.0 * 9.0);
        assert_eq!(y[128], 2.0 * 17.0 * 10.0 - 0.5 * 2.0);
        assert_eq!(y[1], -2.5, "code 0 of group 0: minus the min");
    }

    #[test]
    fn q5_k_block() {
        let mut b = f16b(1.0).to_vec();
        b.extend(f16b(1.0));
        let mut scales = [0u8; 12];
        scales[2] = 1; // group 2 scale 1, min 0
        scales[3] = 2; // group 3 scale 2
        b.extend(scales);
        let mut qh = [0u8; 32];
        qh[0] = 0b0000_0100; // u1 for the second 64 (group 2) of element 0 -> 64
        qh[1] = 0b0000_1000; // u2 for group 3, element 1 -> 64 + 32 + 1
        b.extend(qh);
        let mut qs = [0u8; 128];
        qs[32] = 0x03; // group 2 element 0 low nibble 3
        qs[33] = 0x50; // group 3 element 1 high nibble 5
        b.extend(qs);
        let y = run(GgmlType::Q5_K, &b);
        assert_eq!(y[64], 16.0 + 3.0);
        assert_eq!(y[97], 2.0 * (16.0 + 5.0));
        assert_eq!(y[0], 0.0);
    }

    #[test]
    fn q6_k_block() {
        let mut ql = [0u8; 128];
        let mut qh = [0u8; 64];
        let mut sc = [0i8; 16];
        ql[0] = 0x21; // element 0 low 1, element 64 high 2
        qh[0] = 0b11_00_00_10; // element 0 hi 2, element 96 hi 3
        sc[0] = 3;
        sc[4] = -2;
        sc[6] = 1;
        ql[64 + 5] = 0x0f; // second half: element 128 + 5, low 15
        sc[8] = 4;
        let mut b = ql.to_vec();
        b.extend(qh);
        b.extend(sc.map(|s| s as u8));
        b.extend(f16b(0.5));
        let y = run(GgmlType::Q6_K, &b);
        assert_eq!(y[0], 0.5 * 3.0 * ((1 | (2 << 4)) - 32) as f32);
        assert_eq!(y[64], 0.5 * -2.0 * (2 - 32) as f32);
        assert_eq!(y[96], 0.5 * 1.0 * ((3 << 4) - 32) as f32);
        assert_eq!(y[133], 0.5 * 4.0 * (15 - 32) as f32);
    }

    /// The blocks and gguf-py's values of `tests/fixtures/gguf/mxfp4-cases.bin` (see
    /// `write_mxfp4_cases.py`).
    fn mxfp4_cases() -> (Vec<u8>, Vec<f32>) {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/gguf/mxfp4-cases.bin"
        );
        let bytes = std::fs::read(path).expect("mxfp4-cases.bin");
        let n = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
        let blocks = bytes[4..4 + n * 17].to_vec();
        let values = bytes[4 + n * 17..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect::<Vec<_>>();
        assert_eq!(values.len(), n * 32);
        (blocks, values)
    }

    #[test]
    fn mxfp4_decodes_as_gguf_py_does_bit_for_bit() {
        assert_eq!(GgmlType::from_id(39), Some(GgmlType::MXFP4));
        assert_eq!(GgmlType::MXFP4.bits_per_weight(), 4.25);
        let (blocks, want) = mxfp4_cases();
        let mut got = vec![0f32; want.len()];
        dequantize(GgmlType::MXFP4, &blocks, &mut got);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "value {i}: {g} against {w}");
        }
        // Every scale byte appears, the subnormal and overflowing ones included.
        assert_eq!(e8m0_half(0), 2f32.powi(-128));
        assert_eq!(e8m0_half(1), 2f32.powi(-127));
        assert_eq!(e8m0_half(128), 1.0);
        assert_eq!(e8m0_half(255), 2f32.powi(127));
        // Low nibbles are elements 0..16, high nibbles 16..32.
        let mut block = [0u8; 17];
        block[0] = 128;
        block[1] = 0x97; // low 7 (12), high 9 (-1)
        let y = run(GgmlType::MXFP4, &block);
        assert_eq!((y[0], y[16], y[1]), (12.0, -1.0, 0.0));
    }
}
