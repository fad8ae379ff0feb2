//! Element types of the safetensors container.

/// A safetensors dtype. Every name the format defines is listed, so an error can say
/// "unsupported dtype U8" rather than "unknown".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// bfloat16.
    Bf16,
    /// IEEE half.
    F16,
    /// IEEE single.
    F32,
    /// IEEE double.
    F64,
    /// Signed byte; Q4NX stores quantized tiles as I8.
    I8,
    /// Unsigned byte.
    U8,
    /// Signed 16-bit.
    I16,
    /// Unsigned 16-bit.
    U16,
    /// Signed 32-bit.
    I32,
    /// Unsigned 32-bit.
    U32,
    /// Signed 64-bit.
    I64,
    /// Unsigned 64-bit.
    U64,
    /// One byte per boolean.
    Bool,
    /// 8-bit float, 4 exponent bits.
    F8E4M3,
    /// 8-bit float, 5 exponent bits.
    F8E5M2,
}

impl Dtype {
    /// Parses the header spelling (`"BF16"`, `"I8"`, ...).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "BF16" => Dtype::Bf16,
            "F16" => Dtype::F16,
            "F32" => Dtype::F32,
            "F64" => Dtype::F64,
            "I8" => Dtype::I8,
            "U8" => Dtype::U8,
            "I16" => Dtype::I16,
            "U16" => Dtype::U16,
            "I32" => Dtype::I32,
            "U32" => Dtype::U32,
            "I64" => Dtype::I64,
            "U64" => Dtype::U64,
            "BOOL" => Dtype::Bool,
            "F8_E4M3" => Dtype::F8E4M3,
            "F8_E5M2" => Dtype::F8E5M2,
            _ => return None,
        })
    }

    /// The header spelling.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "BF16",
            Dtype::F16 => "F16",
            Dtype::F32 => "F32",
            Dtype::F64 => "F64",
            Dtype::I8 => "I8",
            Dtype::U8 => "U8",
            Dtype::I16 => "I16",
            Dtype::U16 => "U16",
            Dtype::I32 => "I32",
            Dtype::U32 => "U32",
            Dtype::I64 => "I64",
            Dtype::U64 => "U64",
            Dtype::Bool => "BOOL",
            Dtype::F8E4M3 => "F8_E4M3",
            Dtype::F8E5M2 => "F8_E5M2",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::I8 | Dtype::U8 | Dtype::Bool | Dtype::F8E4M3 | Dtype::F8E5M2 => 1,
            Dtype::Bf16 | Dtype::F16 | Dtype::I16 | Dtype::U16 => 2,
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::F64 | Dtype::I64 | Dtype::U64 => 8,
        }
    }

    /// Whether weights of this dtype can be read as floats (and so converted).
    pub fn is_float(self) -> bool {
        matches!(self, Dtype::Bf16 | Dtype::F16 | Dtype::F32)
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The f32 a bfloat16 stands for: its bits are the upper half of that f32, so this is exact
/// (NaN payloads included) and a shift, cheap enough for the hot loops that read BF16 scales.
#[inline(always)]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// Decodes little-endian elements of a float dtype (BF16, F16, F32) into `out`, one f32 per
/// element, `out.len()` elements. Returns false, writing nothing, for any other dtype.
pub fn decode_f32(dtype: Dtype, bytes: &[u8], out: &mut [f32]) -> bool {
    match dtype {
        Dtype::Bf16 => {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = bf16_to_f32(u16::from_le_bytes([b[0], b[1]]));
            }
        }
        Dtype::F16 => {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
            }
        }
        Dtype::F32 => {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        _ => return false,
    }
    true
}

/// Converts little-endian elements of a float dtype to f32, appending to `out`.
/// Returns false (and appends nothing) for a dtype that is not BF16/F16/F32.
pub(crate) fn extend_f32(dtype: Dtype, bytes: &[u8], out: &mut Vec<f32>) -> bool {
    if !dtype.is_float() {
        return false;
    }
    let start = out.len();
    out.resize(start + bytes.len() / dtype.size(), 0.0);
    decode_f32(dtype, bytes, &mut out[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in [
            "BF16", "F16", "F32", "F64", "I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64",
            "BOOL", "F8_E4M3", "F8_E5M2",
        ] {
            assert_eq!(Dtype::from_name(name).unwrap().name(), name);
        }
        assert_eq!(Dtype::from_name("Q4_0"), None);
    }

    #[test]
    fn float_conversion() {
        let mut out = Vec::new();
        assert!(extend_f32(Dtype::Bf16, &[0x80, 0x3f, 0x00, 0xc0], &mut out));
        assert_eq!(out, vec![1.0, -2.0]);
        assert!(!extend_f32(Dtype::I8, &[1], &mut out));
        assert_eq!(out.len(), 2, "nothing appended for I8");
    }

    #[test]
    fn bf16_decoding_is_the_upper_half_of_an_f32() {
        for v in [1.0f32, -2.5, 0.0, -0.0, 3.0e38, 1.0e-38, f32::INFINITY] {
            let bits = half::bf16::from_f32(v).to_bits();
            assert_eq!(
                bf16_to_f32(bits),
                half::bf16::from_bits(bits).to_f32(),
                "{v}"
            );
        }
        let mut out = [0.0; 2];
        assert!(decode_f32(Dtype::F16, &[0x00, 0x3c, 0x00, 0xc0], &mut out));
        assert_eq!(out, [1.0, -2.0]);
        assert!(!decode_f32(Dtype::U8, &[1, 2], &mut out));
    }
}
