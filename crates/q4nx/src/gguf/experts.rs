//! Mixture-of-experts GGUFs as llama.cpp writes them: a layer's experts are one 3-D tensor per
//! projection, `blk.N.ffn_{gate,up,down}_exps.weight` of ggml dimensions `[cols, rows, experts]`
//! (expert `e`'s matrix is the `e`-th run of `rows` rows), its router `blk.N.ffn_gate_inp.weight`,
//! and the header counts them: `{arch}.expert_count`, `expert_used_count`,
//! `expert_feed_forward_length`.
//!
//! Hearth asks for each expert by its Hugging Face name
//! (`model.layers.{i}.mlp.experts.{e}.gate_proj.weight`); [`stacked_name`] says which 3-D
//! tensor holds it and [`expert_slice`] gives that expert's bytes as a tensor of its own: a
//! range of the file, nothing copied.

use crate::gguf::TensorInfo;

/// The 3-D GGUF tensor and the expert index behind Hearth's per-expert name `hf`
/// (`model.layers.{i}.mlp.experts.{e}.{gate,up,down}_proj.weight`), or `None` for any other
/// name.
pub(crate) fn stacked_name(hf: &str) -> Option<(String, usize)> {
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once(".mlp.experts.")?;
    let (expert, rest) = rest.split_once('.')?;
    let (proj, kind) = rest.split_once('.')?;
    let g = match proj {
        "gate_proj" => "ffn_gate_exps",
        "up_proj" => "ffn_up_exps",
        "down_proj" => "ffn_down_exps",
        _ => return None,
    };
    layer.parse::<usize>().ok()?;
    Some((format!("blk.{layer}.{g}.{kind}"), expert.parse().ok()?))
}

/// Expert `expert` of the 3-D tensor `stacked`, whose experts each have ggml dimensions `want`
/// (`[cols, rows]`, or `[len]` for a bias) and which holds `experts` of them: the expert's own
/// dimensions and byte range, named after the tensor and the expert. Refused in words when the
/// tensor is not `experts` matrices of `want`.
pub(crate) fn expert_slice(
    stacked: &TensorInfo,
    expert: usize,
    want: &[u64],
    experts: usize,
) -> Result<TensorInfo, String> {
    let name = &stacked.name;
    let mut whole = want.to_vec();
    whole.push(experts as u64);
    if stacked.dims != whole {
        return Err(format!(
            "tensor {name} has dimensions {:?}, the model's metadata implies {whole:?} \
             ({experts} experts of {want:?})",
            stacked.dims
        ));
    }
    let kind = stacked.kind;
    if !(want[0] as usize).is_multiple_of(kind.block_len()) {
        return Err(format!(
            "tensor {name} has rows of {} values, not whole {kind} blocks of {}",
            want[0],
            kind.block_len()
        ));
    }
    let elements: u64 = want.iter().product();
    let per = kind.bytes_for(elements as usize);
    if stacked.range.len() != per * experts {
        return Err(format!(
            "tensor {name} holds {} bytes; {experts} experts of {want:?} in {kind} take {}",
            stacked.range.len(),
            per * experts
        ));
    }
    if expert >= experts {
        return Err(format!(
            "tensor {name} has {experts} experts, none numbered {expert}"
        ));
    }
    let start = stacked.range.start + expert * per;
    Ok(TensorInfo {
        name: format!("{name} (expert {expert})"),
        dims: want.to_vec(),
        kind,
        range: start..start + per,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgmlType;

    fn stacked(dims: Vec<u64>, kind: GgmlType, bytes: usize) -> TensorInfo {
        TensorInfo {
            name: "blk.0.ffn_up_exps.weight".into(),
            dims,
            kind,
            range: 1000..1000 + bytes,
        }
    }

    #[test]
    fn names_map_to_the_stacked_tensor_and_expert() {
        assert_eq!(
            stacked_name("model.layers.12.mlp.experts.127.down_proj.weight"),
            Some(("blk.12.ffn_down_exps.weight".into(), 127))
        );
        assert_eq!(
            stacked_name("model.layers.0.mlp.experts.3.gate_proj.bias"),
            Some(("blk.0.ffn_gate_exps.bias".into(), 3))
        );
        for other in [
            "model.layers.0.mlp.gate_proj.weight",
            "model.layers.0.mlp.experts.x.up_proj.weight",
            "model.layers.x.mlp.experts.0.up_proj.weight",
            "model.layers.0.mlp.experts.0.other_proj.weight",
            "model.layers.0.mlp.experts.0",
        ] {
            assert_eq!(stacked_name(other), None, "{other}");
        }
    }

    #[test]
    fn an_expert_is_its_own_run_of_rows() {
        // 3 experts of 4 rows of 64 Q8_0 values: 2 blocks of 34 bytes a row.
        let t = stacked(vec![64, 4, 3], GgmlType::Q8_0, 3 * 4 * 68);
        let e = expert_slice(&t, 2, &[64, 4], 3).unwrap();
        assert_eq!(e.dims, [64, 4]);
        assert_eq!(e.range, 1000 + 2 * 272..1000 + 3 * 272);
        assert_eq!(e.name, "blk.0.ffn_up_exps.weight (expert 2)");
        // A bias stack (gpt-oss's): 4 experts of 32 f32 values.
        let t = stacked(vec![32, 4], GgmlType::F32, 4 * 32 * 4);
        let e = expert_slice(&t, 1, &[32], 4).unwrap();
        assert_eq!((e.dims, e.range), (vec![32], 1000 + 128..1000 + 256));
    }

    #[test]
    fn malformed_stacks_are_refused_in_words() {
        let ok = stacked(vec![64, 4, 3], GgmlType::Q8_0, 3 * 4 * 68);
        for (t, expert, want, experts, says) in [
            (
                ok.clone(),
                0,
                vec![64, 4],
                4,
                "implies [64, 4, 4] (4 experts",
            ),
            (ok.clone(), 0, vec![64, 8], 3, "has dimensions [64, 4, 3]"),
            (
                stacked(vec![64, 4], GgmlType::Q8_0, 4 * 68),
                0,
                vec![64, 4],
                3,
                "has dimensions [64, 4]",
            ),
            (
                stacked(vec![48, 4, 3], GgmlType::Q8_0, 0),
                0,
                vec![48, 4],
                3,
                "not whole Q8_0 blocks of 32",
            ),
            (
                stacked(vec![64, 4, 3], GgmlType::Q8_0, 100),
                0,
                vec![64, 4],
                3,
                "holds 100 bytes",
            ),
            (ok, 3, vec![64, 4], 3, "none numbered 3"),
        ] {
            let e = expert_slice(&t, expert, &want, experts).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }
}
