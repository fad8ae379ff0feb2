#!/usr/bin/env python3
"""Hearth against llama.cpp on a mixture-of-experts GGUF: 4 layers of Qwen3-30B-A3B's real shape.

1. Writes once, into Hearth's bench cache, a `qwen3moe` GGUF of random weights in the shape of
   Qwen3-30B-A3B cut to 4 layers (hidden 2048, 32 query heads of 128 over 4 KV heads, q/k norms,
   128 experts of width 768 per layer, 8 used per token) and a small placeholder vocabulary
   (8192 ids; the benchmark feeds ids, never text). With `--type q4_k` (the default) every
   matrix is Q4_K (the experts as llama.cpp's 3-D `ffn_{gate,up,down}_exps` tensors): a
   Q4_K_M-like file without Q4_K_M's few Q6_K layers; with `--type q4_0` every matrix is Q4_0.
   The head is Q6_K, the routers and norms f32. Random codes and scales, the scales small
   enough that activations stay finite.
2. For each thread count, back to back, as bench/compare_gguf.py runs a dense file:
   `hearth bench --model FILE.gguf --json` (links the file, measures the machine's read
   bandwidth, medians of `--repetitions` runs of a `--prompt`-token prefill then `--generate`
   single-token decode steps), then llama.cpp (PyPI `llama-cpp-python`) on the same file.

The bandwidth fractions count the bytes one decode step actually reads, computed here from the
file: every attention matrix, norm and router, the head, one embedding row, and of each layer's
experts only the 8 a token uses (`hearth bench` itself counts every expert). Both engines read
the same blocks. Prints a Markdown table and writes JSON to `--out`.

    target/tools/python/bin/python bench/compare_moe_gguf.py --hearth target/release/hearth \\
        --threads 1 2 [--type q4_0]
"""

import argparse
import faulthandler
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_llama_cpp import cache_dir, run_hearth, run_llama_cpp  # noqa: E402

# Qwen3-30B-A3B's shape (its config.json), 4 of its 48 layers, a small vocabulary.
SHAPE = dict(hidden=2048, heads=32, kv_heads=4, head_dim=128, experts=128, used=8, width=768,
             layers=4, vocab=8192, dense_width=6144, rope_theta=1e6, eps=1e-6, context=4096)
Q4_K_BYTES, Q6_K_BYTES, QK_K, Q4_0_BYTES = 144, 210, 256, 18


def f16_bytes(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).view(np.uint8).reshape(*values.shape, 2)


def q4_k(rng, *shape_rows_cols) -> np.ndarray:
    """Random Q4_K rows: `[..., rows, cols / 256 * 144]` bytes, d and dmin about 2e-4."""
    *lead, cols = shape_rows_cols
    blocks = rng.integers(0, 256, size=(*lead, cols // QK_K, Q4_K_BYTES), dtype=np.uint8)
    scale = rng.uniform(1e-4, 3e-4, size=(*lead, cols // QK_K, 2))
    blocks[..., 0:4] = f16_bytes(scale).reshape(*lead, cols // QK_K, 4)
    return blocks.reshape(*lead, cols // QK_K * Q4_K_BYTES)


def q4_0(rng, *shape_rows_cols) -> np.ndarray:
    """Random Q4_0 rows: `[..., rows, cols / 32 * 18]` bytes, d about 5e-3."""
    *lead, cols = shape_rows_cols
    blocks = rng.integers(0, 256, size=(*lead, cols // 32, Q4_0_BYTES), dtype=np.uint8)
    blocks[..., 0:2] = f16_bytes(rng.uniform(3e-3, 7e-3, size=(*lead, cols // 32)))
    return blocks.reshape(*lead, cols // 32 * Q4_0_BYTES)


def q6_k(rng, rows, cols) -> np.ndarray:
    """Random Q6_K rows: `[rows, cols / 256 * 210]` bytes, d about 1e-3 (its int8 scales)."""
    blocks = rng.integers(0, 256, size=(rows, cols // QK_K, Q6_K_BYTES), dtype=np.uint8)
    blocks[..., 208:210] = f16_bytes(rng.uniform(5e-4, 1.5e-3, size=(rows, cols // QK_K)))
    return blocks.reshape(rows, cols // QK_K * Q6_K_BYTES)


def write_gguf(out: Path, kind: str) -> None:
    import gguf

    if kind == "q4_0":
        quant, qtype, ftype = q4_0, gguf.GGMLQuantizationType.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0
    else:
        quant, qtype, ftype = q4_k, gguf.GGMLQuantizationType.Q4_K, gguf.LlamaFileType.MOSTLY_Q4_K_M

    s = SHAPE
    h, q, kv = s["hidden"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    rng = np.random.default_rng(30)
    w = gguf.GGUFWriter(str(out) + ".partial", "qwen3moe")
    w.add_name("qwen3moe-30b-a3b-shape-4-layers")
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
    w.add_file_type(ftype)
    # A placeholder SentencePiece vocabulary, as compare_llama_cpp.py writes one.
    vocab = s["vocab"]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"t{i}" for i in range(len(tokens), vocab)]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (vocab - 259))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    k4, k6 = qtype, gguf.GGMLQuantizationType.Q6_K
    norm = lambda n: rng.uniform(0.8, 1.2, n).astype(np.float32)  # noqa: E731
    w.add_tensor("token_embd.weight", quant(rng, vocab, h), raw_dtype=k4)
    for i in range(s["layers"]):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", norm(h))
        w.add_tensor(b + "ffn_norm.weight", norm(h))
        w.add_tensor(b + "attn_q_norm.weight", norm(s["head_dim"]))
        w.add_tensor(b + "attn_k_norm.weight", norm(s["head_dim"]))
        for name, rows, cols in (("attn_q", q, h), ("attn_k", kv, h), ("attn_v", kv, h), ("attn_output", h, q)):
            w.add_tensor(b + name + ".weight", quant(rng, rows, cols), raw_dtype=k4)
        w.add_tensor(b + "ffn_gate_inp.weight", rng.normal(0, 0.05, (s["experts"], h)).astype(np.float32))
        e, width = s["experts"], s["width"]
        w.add_tensor(b + "ffn_gate_exps.weight", quant(rng, e, width, h), raw_dtype=k4)
        w.add_tensor(b + "ffn_up_exps.weight", quant(rng, e, width, h), raw_dtype=k4)
        w.add_tensor(b + "ffn_down_exps.weight", quant(rng, e, h, width), raw_dtype=k4)
    w.add_tensor("output_norm.weight", norm(h))
    w.add_tensor("output.weight", q6_k(rng, vocab, h), raw_dtype=k6)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(str(out) + ".partial", out)


def bytes_per_token(path: Path) -> dict:
    """What one decode step reads from the file: every tensor but the embedding and the
    experts, one embedding row, and `used` of each layer's experts (each expert an equal share
    of its 3-D tensor)."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    used = int(reader.fields["qwen3moe.expert_used_count"].parts[-1][0])
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
    ap.add_argument("--hearth", default="target/release/hearth", help="the hearth binary")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--generate", type=int, default=128)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="run both engines beside N busy-looping processes")
    ap.add_argument("--no-extra-buffers", action="store_true",
                    help="turn off llama.cpp's extra buffer types (weight repacking)")
    ap.add_argument("--type", choices=["q4_k", "q4_0"], default="q4_k",
                    help="the block type of the file's matrices")
    ap.add_argument("--out", default=None, metavar="PATH",
                    help="default bench/results/qwen3moe-gguf-TYPE.json")
    args = ap.parse_args()
    args.out = args.out or f"bench/results/qwen3moe-gguf-{args.type}.json"
    gguf_path = cache_dir().parent / f"qwen3moe-30b-a3b-shape-4-layers-{args.type}.gguf"
    if not gguf_path.exists():
        print(f"writing {gguf_path} (once)", file=sys.stderr, flush=True)
        gguf_path.parent.mkdir(parents=True, exist_ok=True)
        write_gguf(gguf_path, args.type)
    args.model = str(gguf_path)
    reads = bytes_per_token(gguf_path)

    results = []
    for threads in args.threads:
        hearth = run_hearth(args.hearth, threads, args)
        print(f"llama.cpp, {threads} thread(s)", file=sys.stderr, flush=True)
        llama = run_llama_cpp(gguf_path, threads, args)
        hearth["hearth_counted_bytes_per_token"] = hearth["weight_bytes_per_token"]
        bw = hearth["measured_read_bandwidth_gbps"] * 1e9
        for x in (hearth, llama):
            x["weight_bytes_per_token"] = reads["weight_bytes_per_token"]
            x["roofline_fraction"] = x["decode_tokens_per_s"] * x["weight_bytes_per_token"] / bw
        results.append({"threads": threads, "busy_processes": args.busy, "hearth": hearth, "llama_cpp": llama})

    load = os.getloadavg()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"gguf": gguf_path.name, "shape": SHAPE, "reads": reads,
                               "load_average_at_end": load, "results": results}, indent=2) + "\n")
    mb = reads["weight_bytes_per_token"] / 1e6
    print(f"{gguf_path.name} ({reads['file_bytes'] / 1e9:.2f} GB; a decode step reads {mb:.1f} MB, "
          f"{reads['expert_bytes_per_token'] / 1e6:.1f} MB of it experts): prefill {args.prompt} "
          f"tokens, decode {args.generate}, medians of {args.repetitions}")
    print("| threads | engine | prefill tok/s | decode tok/s | decode GB/s "
          "| fraction of measured read bandwidth | Hearth / llama.cpp decode |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        h, l = r["hearth"], r["llama_cpp"]
        bw = h["measured_read_bandwidth_gbps"]
        ratio = h["decode_tokens_per_s"] / l["decode_tokens_per_s"]
        for name, x, rel in (("Hearth (" + h["kernel_level"] + ")", h, f"{ratio:.2f}"), ("llama.cpp", l, "")):
            gbps = x["decode_tokens_per_s"] * x["weight_bytes_per_token"] / 1e9
            print(f"| {r['threads']} | {name} | {x['prefill_tokens_per_s']:.1f} | "
                  f"{x['decode_tokens_per_s']:.1f} | {gbps:.2f} | {gbps / bw:.0%} of {bw:.1f} GB/s | {rel} |")
    print(f"\nbusy processes beside each engine: {args.busy}; "
          f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
