#!/usr/bin/env python3
"""Hearth against llama.cpp on a mixture-of-experts GGUF: 4 layers of a real model's shape.

1. Writes once, into Hearth's bench cache, a GGUF of random weights in the shape of a released
   mixture of experts cut to 4 layers, with a small placeholder vocabulary (8192 ids; the
   benchmark feeds ids, never text), its keys and tensor names those llama.cpp's loader reads:
   - `--arch qwen3moe` (the default): Qwen3-30B-A3B (hidden 2048, 32 query heads of 128 over 4
     KV heads, q/k norms, 128 experts of width 768 per layer, 8 used per token). With `--type
     q4_k` (the default) every matrix is Q4_K, the experts as llama.cpp's 3-D
     `ffn_{gate,up,down}_exps` tensors: a Q4_K_M-like file without Q4_K_M's few Q6_K layers;
     with `--type q4_0` every matrix is Q4_0. The head is Q6_K.
   - `--arch gpt-oss`: gpt-oss-20b (its config.json: hidden 2880, 64 query heads of 64 over 8 KV
     heads, 32 experts of width 2880, 4 used, a window of 128 on the even layers, attention
     sinks, YaRN (factor 32 over an original context of 4096, base 150 000), biases on the
     attention, the router and the experts; the SwiGLU's limit 7.0 llama.cpp fixes rather than
     reads). As llama.cpp's converter writes the released file (`--type mxfp4`, the only one):
     the experts MXFP4 (3-D, gate and up separate), every other matrix Q8_0, the head too (2880
     is no multiple of 256, so no K-quant fits it).
   Routers, norms, biases and sinks are f32. Random codes and scales, the scales small enough
   that activations stay finite.
2. For each thread count, back to back, as bench/compare_gguf.py runs a dense file:
   `hearth bench --model FILE.gguf --json` (links the file, measures the machine's read
   bandwidth, medians of `--repetitions` runs of a `--prompt`-token prefill then `--generate`
   single-token decode steps), then llama.cpp (PyPI `llama-cpp-python`) on the same file.

The bandwidth fractions count the bytes one decode step actually reads, computed here from the
file: every attention matrix, bias, sink, norm and router, the head, one embedding row, and of
each layer's experts (and their biases) only the ones a token uses (`hearth bench` itself counts
every expert). Both engines read the same blocks. Prints a Markdown table and writes JSON to
`--out`.

    target/tools/python/bin/python bench/compare_moe_gguf.py --hearth target/release/hearth \\
        --threads 1 2 [--arch gpt-oss] [--type q4_0]
"""

import argparse
import faulthandler
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_llama_cpp import (  # noqa: E402
    add_run_arguments, cache_dir, compare_on_gguf, finish_gguf, placeholder_vocabulary, report_gguf)

# Each model's shape (its config.json), 4 of its layers (48 and 24), a small vocabulary.
SHAPES = {
    "qwen3moe": dict(name="qwen3moe-30b-a3b-shape-4-layers", types=["q4_k", "q4_0"],
                     hidden=2048, heads=32, kv_heads=4, head_dim=128, experts=128, used=8, width=768,
                     layers=4, vocab=8192, dense_width=6144, rope_theta=1e6, eps=1e-6, context=4096),
    "gpt-oss": dict(name="gpt-oss-20b-shape-4-layers", types=["mxfp4"],
                    hidden=2880, heads=64, kv_heads=8, head_dim=64, experts=32, used=4, width=2880,
                    layers=4, vocab=8192, dense_width=2880, rope_theta=150000.0, eps=1e-5,
                    context=131072, sliding_window=128, yarn_factor=32.0, yarn_original_context=4096,
                    swiglu_limit=7.0),
}
Q4_K_BYTES, Q6_K_BYTES, QK_K, Q4_0_BYTES, Q8_0_BYTES, MXFP4_BYTES = 144, 210, 256, 18, 34, 17


def f16_bytes(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).view(np.uint8).reshape(*values.shape, 2)


def q4_k(rng, *shape_rows_cols) -> np.ndarray:
    """Random Q4_K rows: `[..., rows, cols / 256 * 144]` bytes, d and dmin about 2e-4."""
    *lead, cols = shape_rows_cols
    blocks = rng.integers(0, 256, size=(*lead, cols // QK_K, Q4_K_BYTES), dtype=np.uint8)
    scale = rng.uniform(1e-4, 3e-4, size=(*lead, cols // QK_K, 2))
    blocks[..., 0:4] = f16_bytes(scale).reshape(*lead, cols // QK_K, 4)
    return blocks.reshape(*lead, cols // QK_K * Q4_K_BYTES)


def scaled_blocks32(rng, block_bytes, low, high, *shape_rows_cols) -> np.ndarray:
    """Random rows of a type of 32-value blocks led by an f16 scale d in [low, high) (Q4_0: 18
    bytes a block, Q8_0: 34): `[..., rows, cols / 32 * block_bytes]` bytes."""
    *lead, cols = shape_rows_cols
    blocks = rng.integers(0, 256, size=(*lead, cols // 32, block_bytes), dtype=np.uint8)
    blocks[..., 0:2] = f16_bytes(rng.uniform(low, high, size=(*lead, cols // 32)))
    return blocks.reshape(*lead, cols // 32 * block_bytes)


def q4_0(rng, *shape_rows_cols) -> np.ndarray:
    """Random Q4_0 rows, d about 5e-3."""
    return scaled_blocks32(rng, Q4_0_BYTES, 3e-3, 7e-3, *shape_rows_cols)


def q8_0(rng, *shape_rows_cols) -> np.ndarray:
    """Random Q8_0 rows, d about 2.8e-4: weights of about 0.02 rms, as a trained model's."""
    return scaled_blocks32(rng, Q8_0_BYTES, 2e-4, 3.5e-4, *shape_rows_cols)


def mxfp4(rng, *shape_rows_cols) -> np.ndarray:
    """Random MXFP4 rows: `[..., rows, cols / 32 * 17]` bytes, each block an E8M0 exponent byte
    then 16 bytes of 4-bit E2M1 codes. Exponents 119 and 120 scale the codes (±0 to ±6) by 2^-8
    and 2^-7 (llama.cpp doubles the codes and halves the scale): about 0.016-0.023 rms."""
    *lead, cols = shape_rows_cols
    blocks = rng.integers(0, 256, size=(*lead, cols // 32, MXFP4_BYTES), dtype=np.uint8)
    blocks[..., 0] = rng.integers(119, 121, size=(*lead, cols // 32), dtype=np.uint8)
    return blocks.reshape(*lead, cols // 32 * MXFP4_BYTES)


def q6_k(rng, rows, cols) -> np.ndarray:
    """Random Q6_K rows: `[rows, cols / 256 * 210]` bytes, d about 1e-3 (its int8 scales)."""
    blocks = rng.integers(0, 256, size=(rows, cols // QK_K, Q6_K_BYTES), dtype=np.uint8)
    blocks[..., 208:210] = f16_bytes(rng.uniform(5e-4, 1.5e-3, size=(rows, cols // QK_K)))
    return blocks.reshape(rows, cols // QK_K * Q6_K_BYTES)


def write_gguf(out: Path, arch: str, kind: str) -> None:
    import gguf

    T, F = gguf.GGMLQuantizationType, gguf.LlamaFileType
    # (linear, its type), (experts, their type), (head, its type), the file type
    if kind == "mxfp4":
        linear, experts, head, ftype = (q8_0, T.Q8_0), (mxfp4, T.MXFP4), (q8_0, T.Q8_0), F.MOSTLY_MXFP4_MOE
    elif kind == "q4_0":
        linear, experts, head, ftype = (q4_0, T.Q4_0), (q4_0, T.Q4_0), (q6_k, T.Q6_K), F.MOSTLY_Q4_0
    else:
        linear, experts, head, ftype = (q4_k, T.Q4_K), (q4_k, T.Q4_K), (q6_k, T.Q6_K), F.MOSTLY_Q4_K_M

    s = SHAPES[arch]
    gpt_oss = arch == "gpt-oss"
    h, q, kv = s["hidden"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    rng = np.random.default_rng(30)
    w = gguf.GGUFWriter(str(out) + ".partial", arch)
    w.add_name(s["name"])
    w.add_context_length(s["context"])
    w.add_embedding_length(h)
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["dense_width"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_rope_freq_base(s["rope_theta"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_expert_count(s["experts"])
    w.add_expert_used_count(s["used"])
    w.add_expert_feed_forward_length(s["width"])
    if gpt_oss:
        w.add_sliding_window(s["sliding_window"])
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(s["yarn_factor"])
        w.add_rope_scaling_orig_ctx_len(s["yarn_original_context"])
    w.add_file_type(ftype)
    placeholder_vocabulary(w, s["vocab"])

    norm = lambda n: rng.uniform(0.8, 1.2, n).astype(np.float32)  # noqa: E731
    bias = lambda *shape: rng.normal(0, 0.02, shape).astype(np.float32)  # noqa: E731
    w.add_tensor("token_embd.weight", linear[0](rng, s["vocab"], h), raw_dtype=linear[1])
    for i in range(s["layers"]):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", norm(h))
        if gpt_oss:
            w.add_tensor(b + "post_attention_norm.weight", norm(h))
            w.add_tensor(b + "attn_sinks.weight", rng.uniform(-1, 1, s["heads"]).astype(np.float32))
        else:
            w.add_tensor(b + "ffn_norm.weight", norm(h))
            w.add_tensor(b + "attn_q_norm.weight", norm(s["head_dim"]))
            w.add_tensor(b + "attn_k_norm.weight", norm(s["head_dim"]))
        for name, rows, cols in (("attn_q", q, h), ("attn_k", kv, h), ("attn_v", kv, h), ("attn_output", h, q)):
            w.add_tensor(b + name + ".weight", linear[0](rng, rows, cols), raw_dtype=linear[1])
            if gpt_oss:
                w.add_tensor(b + name + ".bias", bias(rows))
        e, width = s["experts"], s["width"]
        w.add_tensor(b + "ffn_gate_inp.weight", rng.normal(0, 0.05, (e, h)).astype(np.float32))
        if gpt_oss:
            w.add_tensor(b + "ffn_gate_inp.bias", rng.normal(0, 0.1, e).astype(np.float32))
        for name, rows, cols in (("ffn_gate_exps", width, h), ("ffn_up_exps", width, h), ("ffn_down_exps", h, width)):
            w.add_tensor(b + name + ".weight", experts[0](rng, e, rows, cols), raw_dtype=experts[1])
            if gpt_oss:
                w.add_tensor(b + name + ".bias", bias(e, rows))
    w.add_tensor("output_norm.weight", norm(h))
    w.add_tensor("output.weight", head[0](rng, s["vocab"], h), raw_dtype=head[1])
    finish_gguf(w, out)


def bytes_per_token(path: Path, arch: str) -> dict:
    """What one decode step reads from the file: every tensor but the embedding and the
    experts, one embedding row, and `used` of each layer's experts (each expert an equal share
    of its 3-D tensor, and of its biases' 2-D one)."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    used = int(reader.fields[f"{arch}.expert_used_count"].parts[-1][0])
    total, experts = 0, 0
    for t in reader.tensors:
        if t.name == "token_embd.weight":
            total += int(t.n_bytes) // int(t.shape[-1])
        elif "_exps." in t.name:
            part = int(t.n_bytes) * used // int(t.shape[-1])
            total += part
            experts += part
        else:
            total += int(t.n_bytes)
    return {"weight_bytes_per_token": total, "expert_bytes_per_token": experts,
            "file_bytes": path.stat().st_size}


def main() -> None:
    faulthandler.enable()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(ap, prompt=16)
    ap.add_argument("--arch", choices=list(SHAPES), default="qwen3moe", help="the model whose shape to write")
    ap.add_argument("--type", choices=["q4_k", "q4_0", "mxfp4"], default=None,
                    help="the block type of the file's matrices: q4_k (the default) or q4_0 for qwen3moe, "
                         "mxfp4 (the default and only one) for gpt-oss")
    ap.add_argument("--out", default=None, metavar="PATH", help="default bench/results/ARCH-gguf-TYPE.json")
    args = ap.parse_args()
    shape = SHAPES[args.arch]
    args.type = args.type or shape["types"][0]
    if args.type not in shape["types"]:
        ap.error(f"--arch {args.arch} is written as {' or '.join(shape['types'])}, not {args.type}")
    args.out = args.out or f"bench/results/{args.arch}-gguf-{args.type}.json"
    gguf_path = cache_dir().parent / f"{shape['name']}-{args.type}.gguf"
    if not gguf_path.exists():
        print(f"writing {gguf_path} (once)", file=sys.stderr, flush=True)
        gguf_path.parent.mkdir(parents=True, exist_ok=True)
        write_gguf(gguf_path, args.arch, args.type)
    reads = bytes_per_token(gguf_path, args.arch)

    results = compare_on_gguf(gguf_path, args, reads["weight_bytes_per_token"])
    mb = reads["weight_bytes_per_token"] / 1e6
    title = (f"{gguf_path.name} ({reads['file_bytes'] / 1e9:.2f} GB; a decode step reads {mb:.1f} MB, "
             f"{reads['expert_bytes_per_token'] / 1e6:.1f} MB of it experts): prefill {args.prompt} "
             f"tokens, decode {args.generate}, medians of {args.repetitions}")
    payload = {"gguf": gguf_path.name, "shape": {k: v for k, v in shape.items() if k != "types"}, "reads": reads}
    report_gguf(title, payload, results, args)


if __name__ == "__main__":
    main()
