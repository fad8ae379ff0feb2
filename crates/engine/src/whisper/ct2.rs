//! CTranslate2's `model.bin`: the binary a CTranslate2 converter writes (faster-whisper's models).
//!
//! Layout (all integers little-endian): `u32` binary version (Hearth reads 3 to 6), a string
//! spec name (version 2+; "WhisperSpec" here), `u32` spec revision (version 2+), `u32` variable
//! count, then per variable: string name, `u8` rank, `rank` x `u32` dims, `u8` dtype (version
//! 4+; 0 float32, 1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16), `u32` byte count, the bytes;
//! then (version 3+) `u32` alias count and per alias two strings, alias and target. A string is
//! a `u16` length counting a final NUL, then the bytes and the NUL.
//!
//! [`ModelBin::parse`] checks every count and size against the file before it trusts it: a
//! truncated file, a byte count that disagrees with the dims and dtype, a huge dim, a repeated
//! name or an alias to nothing is refused with what was found where. Nothing is copied: the
//! variables borrow the file's bytes.

use std::collections::BTreeMap;

/// Element types of CTranslate2 variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ct2Dtype {
    F32,
    I8,
    I16,
    I32,
    F16,
    Bf16,
}

impl Ct2Dtype {
    fn from_id(id: u8) -> Option<Ct2Dtype> {
        Some(match id {
            0 => Ct2Dtype::F32,
            1 => Ct2Dtype::I8,
            2 => Ct2Dtype::I16,
            3 => Ct2Dtype::I32,
            4 => Ct2Dtype::F16,
            5 => Ct2Dtype::Bf16,
            _ => return None,
        })
    }

    pub(crate) fn size(self) -> usize {
        match self {
            Ct2Dtype::I8 => 1,
            Ct2Dtype::I16 | Ct2Dtype::F16 | Ct2Dtype::Bf16 => 2,
            Ct2Dtype::F32 | Ct2Dtype::I32 => 4,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Ct2Dtype::F32 => "float32",
            Ct2Dtype::I8 => "int8",
            Ct2Dtype::I16 => "int16",
            Ct2Dtype::I32 => "int32",
            Ct2Dtype::F16 => "float16",
            Ct2Dtype::Bf16 => "bfloat16",
        }
    }
}

/// One variable, borrowing its bytes from the file.
#[derive(Debug, Clone)]
pub(crate) struct Variable<'a> {
    pub(crate) dims: Vec<usize>,
    pub(crate) dtype: Ct2Dtype,
    pub(crate) bytes: &'a [u8],
}

impl Variable<'_> {
    /// The value of a scalar integer or boolean variable (`num_heads`, `pre_norm`).
    pub(crate) fn scalar_int(&self) -> Option<i64> {
        if self.dims.iter().product::<usize>() != 1 {
            return None;
        }
        let b = self.bytes;
        Some(match self.dtype {
            Ct2Dtype::I8 => i64::from(b[0] as i8),
            Ct2Dtype::I16 => i64::from(i16::from_le_bytes([b[0], b[1]])),
            Ct2Dtype::I32 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            _ => return None,
        })
    }

    /// The elements widened to f32 (float types exactly; integers as their value).
    pub(crate) fn to_f32(&self) -> Vec<f32> {
        match self.dtype {
            Ct2Dtype::F32 => self
                .bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Ct2Dtype::F16 => self
                .bytes
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Ct2Dtype::Bf16 => self
                .bytes
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Ct2Dtype::I8 => self.bytes.iter().map(|&b| f32::from(b as i8)).collect(),
            Ct2Dtype::I16 => self
                .bytes
                .chunks_exact(2)
                .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])))
                .collect(),
            Ct2Dtype::I32 => self
                .bytes
                .chunks_exact(4)
                .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32)
                .collect(),
        }
    }
}

/// A parsed `model.bin`.
#[derive(Debug)]
pub(crate) struct ModelBin<'a> {
    pub(crate) version: u32,
    pub(crate) spec: String,
    pub(crate) revision: u32,
    variables: BTreeMap<String, Variable<'a>>,
    aliases: BTreeMap<String, String>,
}

/// The largest dim Hearth accepts: more than any vocabulary or width of a real model, small
/// enough that products of a few dims cannot overflow.
const MAX_DIM: usize = 1 << 24;
/// The largest rank of a variable.
const MAX_RANK: usize = 4;
/// More variables than any real model has (whisper large: about 1,300).
const MAX_VARIABLES: usize = 100_000;

/// Reads the file front to back, every read checked against what is left.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let left = self.bytes.len() - self.at;
        if n > left {
            return Err(format!(
                "the file is truncated: {what} needs {n} bytes at offset {}, only {left} are left",
                self.at
            ));
        }
        let slice = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(slice)
    }

    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, String> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn string(&mut self, what: &str) -> Result<String, String> {
        let len = usize::from(self.u16(what)?);
        if len == 0 {
            return Err(format!(
                "{what} at offset {} has length 0 (a string counts its final NUL)",
                self.at - 2
            ));
        }
        let bytes = self.take(len, what)?;
        if bytes[len - 1] != 0 {
            return Err(format!("{what} does not end with a NUL byte"));
        }
        String::from_utf8(bytes[..len - 1].to_vec())
            .map_err(|_| format!("{what} is not UTF-8 text"))
    }
}

impl<'a> ModelBin<'a> {
    /// Parses a whole `model.bin`. The error says what is wrong in plain words.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<ModelBin<'a>, String> {
        let mut r = Reader { bytes, at: 0 };
        let version = r.u32("the binary version")?;
        if !(3..=6).contains(&version) {
            return Err(format!(
                "binary version {version} is not one Hearth reads (3 to 6); convert the model \
                 again with a current CTranslate2 (ct2-transformers-converter)"
            ));
        }
        let spec = r.string("the spec name")?;
        let revision = r.u32("the spec revision")?;
        let count = r.u32("the variable count")? as usize;
        if count > MAX_VARIABLES {
            return Err(format!(
                "it says it holds {count} variables, more than any model has"
            ));
        }
        let mut variables = BTreeMap::new();
        for index in 0..count {
            let name = r.string(&format!("the name of variable {index}"))?;
            let rank = usize::from(r.u8(&format!("the rank of {name}"))?);
            if rank > MAX_RANK {
                return Err(format!(
                    "variable {name} has rank {rank}, more than {MAX_RANK}"
                ));
            }
            let mut dims = Vec::with_capacity(rank);
            for _ in 0..rank {
                let dim = r.u32(&format!("a dim of {name}"))? as usize;
                if dim > MAX_DIM {
                    return Err(format!(
                        "variable {name} has a dim of {dim}, more than the {MAX_DIM} Hearth accepts"
                    ));
                }
                dims.push(dim);
            }
            let dtype_id = if version >= 4 {
                r.u8(&format!("the dtype of {name}"))?
            } else {
                0
            };
            let dtype = Ct2Dtype::from_id(dtype_id).ok_or_else(|| {
                format!("variable {name} has dtype {dtype_id}, which is not a CTranslate2 type")
            })?;
            let byte_count = r.u32(&format!("the byte count of {name}"))? as usize;
            let elements = dims
                .iter()
                .try_fold(1usize, |acc, &d| acc.checked_mul(d))
                .ok_or_else(|| format!("variable {name}'s dims {dims:?} overflow"))?;
            let want = elements
                .checked_mul(dtype.size())
                .ok_or_else(|| format!("variable {name}'s size overflows"))?;
            if byte_count != want {
                return Err(format!(
                    "variable {name} says it has {byte_count} bytes, but {dims:?} of {} needs {want}",
                    dtype.name()
                ));
            }
            let data = r.take(byte_count, &format!("the data of {name}"))?;
            if variables
                .insert(
                    name.clone(),
                    Variable {
                        dims,
                        dtype,
                        bytes: data,
                    },
                )
                .is_some()
            {
                return Err(format!("variable {name} appears twice"));
            }
        }
        let mut aliases = BTreeMap::new();
        if version >= 3 {
            let count = r.u32("the alias count")? as usize;
            if count > MAX_VARIABLES {
                return Err(format!(
                    "it says it holds {count} aliases, more than any model has"
                ));
            }
            for index in 0..count {
                let alias = r.string(&format!("alias {index}"))?;
                let target = r.string(&format!("the target of alias {alias}"))?;
                if !variables.contains_key(&target) {
                    return Err(format!(
                        "alias {alias} points at {target}, which the file does not hold"
                    ));
                }
                aliases.insert(alias, target);
            }
        }
        if r.at != bytes.len() {
            return Err(format!(
                "{} bytes follow the last alias; the file is not one model.bin",
                bytes.len() - r.at
            ));
        }
        Ok(ModelBin {
            version,
            spec,
            revision,
            variables,
            aliases,
        })
    }

    /// A variable by name (or by an alias of it).
    pub(crate) fn get(&self, name: &str) -> Option<&Variable<'a>> {
        self.variables
            .get(name)
            .or_else(|| self.aliases.get(name).and_then(|t| self.variables.get(t)))
    }

    /// Every variable and alias name.
    pub(crate) fn names(&self) -> Vec<String> {
        self.variables
            .keys()
            .chain(self.aliases.keys())
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a model.bin of version 6 with the given variables and aliases.
    pub(crate) fn write(vars: &[(&str, &[u32], u8, Vec<u8>)], aliases: &[(&str, &str)]) -> Vec<u8> {
        fn string(out: &mut Vec<u8>, s: &str) {
            out.extend_from_slice(&((s.len() + 1) as u16).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
            out.push(0);
        }
        let mut out = Vec::new();
        out.extend_from_slice(&6u32.to_le_bytes());
        string(&mut out, "WhisperSpec");
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(vars.len() as u32).to_le_bytes());
        for (name, dims, dtype, data) in vars {
            string(&mut out, name);
            out.push(dims.len() as u8);
            for d in *dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.push(*dtype);
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(data);
        }
        out.extend_from_slice(&(aliases.len() as u32).to_le_bytes());
        for (a, t) in aliases {
            string(&mut out, a);
            string(&mut out, t);
        }
        out
    }

    fn sample() -> Vec<u8> {
        let f16s: Vec<u8> = [1.0f32, -2.0, 0.5, 3.0, 0.0, 1.5]
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect();
        write(
            &[
                ("a/weight", &[2, 3], 4, f16s),
                ("a/num_heads", &[], 2, 8i16.to_le_bytes().to_vec()),
            ],
            &[("b/weight", "a/weight")],
        )
    }

    #[test]
    fn reads_variables_scalars_and_aliases() {
        let bytes = sample();
        let bin = ModelBin::parse(&bytes).unwrap();
        assert_eq!(
            (bin.version, bin.spec.as_str(), bin.revision),
            (6, "WhisperSpec", 3)
        );
        let a = bin.get("a/weight").unwrap();
        assert_eq!(a.dims, vec![2, 3]);
        assert_eq!(a.to_f32(), vec![1.0, -2.0, 0.5, 3.0, 0.0, 1.5]);
        assert_eq!(bin.get("b/weight").unwrap().to_f32(), a.to_f32());
        assert_eq!(bin.get("a/num_heads").unwrap().scalar_int(), Some(8));
        assert!(bin.get("c").is_none());
        assert_eq!(bin.names().len(), 3);
    }

    #[test]
    fn every_truncation_is_refused_without_panic() {
        let bytes = sample();
        for len in 0..bytes.len() {
            let err = ModelBin::parse(&bytes[..len]).unwrap_err();
            assert!(!err.is_empty(), "cut at {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(ModelBin::parse(&longer)
            .unwrap_err()
            .contains("follow the last alias"));
    }

    #[test]
    fn lying_sizes_dtypes_ranks_and_dims_are_refused() {
        let wrong_size = write(&[("w", &[2, 2], 4, vec![0; 6])], &[]);
        assert!(ModelBin::parse(&wrong_size)
            .unwrap_err()
            .contains("needs 8"));
        let bad_dtype = write(&[("w", &[1], 9, vec![0; 4])], &[]);
        assert!(ModelBin::parse(&bad_dtype).unwrap_err().contains("dtype 9"));
        let huge = write(&[("w", &[u32::MAX, u32::MAX], 0, vec![])], &[]);
        assert!(ModelBin::parse(&huge).unwrap_err().contains("more than"));
        let rank = write(&[("w", &[1, 1, 1, 1, 1], 0, vec![0; 4])], &[]);
        assert!(ModelBin::parse(&rank).unwrap_err().contains("rank 5"));
        let twice = write(
            &[("w", &[1], 0, vec![0; 4]), ("w", &[1], 0, vec![0; 4])],
            &[],
        );
        assert!(ModelBin::parse(&twice).unwrap_err().contains("twice"));
        let dangling = write(&[("w", &[1], 0, vec![0; 4])], &[("x", "nothing")]);
        assert!(ModelBin::parse(&dangling)
            .unwrap_err()
            .contains("does not hold"));
        let mut version = sample();
        version[0] = 99;
        assert!(ModelBin::parse(&version)
            .unwrap_err()
            .contains("version 99"));
    }
}
