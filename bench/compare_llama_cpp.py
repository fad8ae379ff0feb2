#!/usr/bin/env python3
"""Hearth's CPU engine against llama.cpp on the same weights, same machine, same run.

1. `hearth bench --shape minicpm5-2b --json` (generates and caches the random-weight Q4NX model
   on first use, measures this machine's read bandwidth, prefills 512 and decodes 128 tokens,
   warm-up + 5 repetitions, medians).
2. The same random weights are written once as a Q4_1 GGUF beside the cached model (PyPI `gguf`):
   every Q4NX tile becomes GGUF Q4_1 blocks with the identical 4-bit codes, scales and mins
   (BF16 -> F16 is exact for these values); Q/K rows are permuted for llama.cpp's RoPE layout as
   llama.cpp's own converter does.
3. llama.cpp (PyPI `llama-cpp-python`, built from source on this machine) runs the same test:
   one warm-up, then 5 repetitions of a 512-token prefill and 128 single-token decode steps.
4. llama.cpp runs it again on its best 4-bit path: the GGUF requantized to Q4_0 by its own
   quantizer (`llama_model_quantize`, what `llama-quantize FILE OUT Q4_0` writes: Q4_0 matrices,
   its default type for the output head), which it repacks at load for its AVX2/AVX-512 kernels
   (`--no-extra-buffers` turns the repacking off). Its bandwidth fraction counts the bytes its
   own tensors hold.

For each thread count, Hearth then llama.cpp run back to back, and both bandwidth fractions use
the bandwidth Hearth measured in that same run. Prints a Markdown table and writes JSON to
`--out PATH` (default `bench/results/results.json`; bench/README.md names each kept file's run).

    python3 bench/compare_llama_cpp.py --hearth target/release/hearth --threads 1 2 [--no-extra-buffers]

With `--busy N` both engines run beside N busy-looping processes (`hearth bench --busy-loop`,
started before each engine loads and stopped after its runs): the contended row. `--prompt N`
gives the long-prompt rows.

With `--model DIR --gguf FILE` it compares a real model instead: `hearth bench --model DIR` (a
Q4NX folder, for example one `hearth import FILE` made) against llama.cpp on FILE itself.
"""

import argparse
import faulthandler
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import numpy as np

SHAPE = "minicpm5-2b"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hearth" / "bench" / SHAPE


def read_q4nx(path: Path):
    """The safetensors header and a memory map of the file."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r")
    return header, data, 8 + n


def bf16_to_f16(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float16)


def tiles_to_q4_1_blocks(tiles: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q4NX Q4_1 tiles [rows/32 * cols/256, 5120] -> GGUF Q4_1 rows [rows, cols/32 * 20] bytes."""
    rb, ct = rows // 32, cols // 256
    t = tiles.reshape(rb, ct, 5120)
    d = bf16_to_f16(t[:, :, :512].copy().view(np.uint16)).reshape(rb, ct, 8, 32)  # g, r
    m = bf16_to_f16(t[:, :, 512:1024].copy().view(np.uint16)).reshape(rb, ct, 8, 32)
    nib = t[:, :, 1024:].reshape(rb, ct, 2, 256, 8)  # half, column, row pair
    q = np.empty((rb, ct, 2, 8, 2, 256), dtype=np.uint8)  # half, pair, parity, column
    q[:, :, :, :, 0, :] = (nib & 0x0F).transpose(0, 1, 2, 4, 3)  # even rows: low nibble
    q[:, :, :, :, 1, :] = (nib >> 4).transpose(0, 1, 2, 4, 3)
    q = q.reshape(rb, ct, 32, 8, 32)  # row, group, column in group
    qs = q[..., :16] | (q[..., 16:] << 4)  # GGUF: element j low, j + 16 high
    out = np.empty((rb, 32, ct, 8, 20), dtype=np.uint8)
    out[..., 0:2] = d.transpose(0, 3, 1, 2).copy().view(np.uint8).reshape(rb, 32, ct, 8, 2)
    out[..., 2:4] = m.transpose(0, 3, 1, 2).copy().view(np.uint8).reshape(rb, 32, ct, 8, 2)
    out[..., 4:20] = qs.transpose(0, 2, 1, 3, 4)
    return out.reshape(rows, cols // 32 * 20)


def permute_rope_rows(blocks: np.ndarray, heads: int) -> np.ndarray:
    """HF rotate-half rows -> llama.cpp interleaved-pair rows (as convert_hf_to_gguf does)."""
    rows = blocks.shape[0]
    hd = rows // heads
    return blocks.reshape(heads, 2, hd // 2, -1).swapaxes(1, 2).reshape(rows, -1)


def write_gguf(q4nx_dir: Path, out: Path) -> None:
    import gguf

    cfg = json.loads((q4nx_dir / "config.json").read_text())
    header, data, base = read_q4nx(q4nx_dir / "model.q4nx")

    def raw(name):
        start, end = header[name]["data_offsets"]
        return data[base + start : base + end]

    hidden, inter = cfg["hidden_size"], cfg["intermediate_size"]
    heads, kv_heads, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    vocab, layers = cfg["vocab_size"], cfg["num_hidden_layers"]
    w = gguf.GGUFWriter(str(out) + ".partial", "llama")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(inter)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_1)
    placeholder_vocabulary(w, vocab)

    q4 = gguf.GGMLQuantizationType.Q4_1
    emb = bf16_to_f16(raw("model.embed_tokens.weight").view(np.uint16)).reshape(vocab, hidden)
    w.add_tensor("token_embd.weight", emb)
    names = {
        "self_attn.q_proj": ("attn_q", heads),
        "self_attn.k_proj": ("attn_k", kv_heads),
        "self_attn.v_proj": ("attn_v", None),
        "self_attn.o_proj": ("attn_output", None),
        "mlp.gate_proj": ("ffn_gate", None),
        "mlp.up_proj": ("ffn_up", None),
        "mlp.down_proj": ("ffn_down", None),
    }
    shapes = {
        "self_attn.q_proj": (heads * hd, hidden),
        "self_attn.k_proj": (kv_heads * hd, hidden),
        "self_attn.v_proj": (kv_heads * hd, hidden),
        "self_attn.o_proj": (hidden, heads * hd),
        "mlp.gate_proj": (inter, hidden),
        "mlp.up_proj": (inter, hidden),
        "mlp.down_proj": (hidden, inter),
    }
    for i in range(layers):
        p = f"model.layers.{i}."
        for hf, gg in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm")):
            norm = (raw(p + hf + ".weight").view(np.uint16).astype(np.uint32) << 16).view(np.float32)
            w.add_tensor(f"blk.{i}.{gg}.weight", norm.copy())
        for hf, (gg, rope_heads) in names.items():
            rows, cols = shapes[hf]
            blocks = tiles_to_q4_1_blocks(raw(p + hf + ".weight"), rows, cols)
            if rope_heads:
                blocks = permute_rope_rows(blocks, rope_heads)
            w.add_tensor(f"blk.{i}.{gg}.weight", blocks, raw_dtype=q4)
    norm = (raw("model.norm.weight").view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    w.add_tensor("output_norm.weight", norm.copy())
    w.add_tensor("output.weight", tiles_to_q4_1_blocks(raw("lm_head.weight"), vocab, hidden), raw_dtype=q4)
    finish_gguf(w, out)


def placeholder_vocabulary(w, vocab: int) -> None:
    """A placeholder SentencePiece vocabulary of `vocab` ids in GGUF writer `w`: `<unk>`, `<s>`,
    `</s>`, the 256 byte tokens, then `t259`...; the benchmarks feed token ids, never text."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"t{i}" for i in range(len(tokens), vocab)]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (vocab - 259))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


def finish_gguf(w, out: Path) -> None:
    """Writes GGUF writer `w` (opened on `out` + ".partial") and moves it to `out`, so that an
    interrupted run leaves no half file where the next run would take it for whole."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(str(out) + ".partial", out)


def requantized_q4_0(src: Path) -> Path:
    """`src` requantized to Q4_0 by llama.cpp's quantizer, written once into Hearth's bench cache."""
    import llama_cpp as L

    out = cache_dir().parent / f"{src.stem}-requantized-q4_0.gguf"
    if out.exists() and out.stat().st_mtime >= src.stat().st_mtime:
        return out
    print(f"requantizing {src.name} to Q4_0 with llama.cpp (once): {out}", file=sys.stderr, flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    params = L.llama_model_quantize_default_params()
    params.ftype = L.LLAMA_FTYPE_MOSTLY_Q4_0
    params.allow_requantize = True  # the source is already 4-bit: dequantized, then quantized
    params.nthread = os.cpu_count() or 1
    partial = out.with_name(out.name + ".partial")
    rc = L.llama_model_quantize(str(src).encode(), str(partial).encode(), params)
    if rc != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"llama.cpp could not requantize {src} to Q4_0 (llama_model_quantize returned {rc})")
    os.replace(partial, out)
    return out


def gguf_bytes_per_token(path: Path) -> dict:
    """What one decode step reads from a GGUF: every tensor but the embedding, one embedding row,
    and the embedding again as the head when the file ties them; with the head's type."""
    import gguf

    tensors = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    emb = tensors["token_embd.weight"]
    head = tensors.get("output.weight", emb)
    rows = int(emb.shape[-1])  # GGUF lists dimensions innermost first: [hidden, vocab]
    total = sum(int(t.n_bytes) for name, t in tensors.items() if name != "token_embd.weight")
    total += int(emb.n_bytes) // rows + (int(emb.n_bytes) if head is emb else 0)
    return {"weight_bytes_per_token": total, "head_type": head.tensor_type.name}


def run_hearth(hearth: str, threads: int, args) -> dict:
    model = ["--model", args.model] if args.model else ["--shape", SHAPE]
    cmd = [hearth, "bench", *model, "--threads", str(threads), "--json",
           "--prompt", str(args.prompt), "--generate", str(args.generate),
           "--repetitions", str(args.repetitions), "--busy", str(args.busy)]
    print("$", " ".join(cmd), file=sys.stderr, flush=True)
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def run_llama_cpp(gguf_path: Path, threads: int, args) -> dict:
    """llama.cpp's runs, beside `--busy` busy loops (the same ones `hearth bench --busy` starts)."""
    busy = [subprocess.Popen([args.hearth, "bench", "--busy-loop"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(args.busy)]
    try:
        return time_llama_cpp(gguf_path, threads, args)
    finally:
        for child in busy:
            child.kill()
            child.wait()


def time_llama_cpp(gguf_path: Path, threads: int, args) -> dict:
    import llama_cpp as L

    L.llama_backend_init()
    mparams = L.llama_model_default_params()
    if args.no_extra_buffers:
        mparams.use_extra_bufts = False
    else:
        # On a Xeon with AMX, llama.cpp 0.3.36 repacked Q4_1 for AMX and then crashed with a
        # segmentation fault in its first `llama_decode`, which no Python code can catch: say
        # beforehand what to do.
        print(f"llama.cpp: {gguf_path.name} with its extra buffer types (repacked weights); "
              "if it crashes, rerun with --no-extra-buffers", file=sys.stderr, flush=True)
    load = getattr(L, "llama_model_load_from_file", None) or L.llama_load_model_from_file
    model = load(str(gguf_path).encode(), mparams)
    if not model:
        raise RuntimeError(f"llama.cpp could not load {gguf_path}")
    cparams = L.llama_context_default_params()
    cparams.n_ctx = args.prompt + args.generate + 16
    cparams.n_batch = args.prompt
    cparams.n_ubatch = args.prompt
    cparams.n_threads = threads
    cparams.n_threads_batch = threads
    new_ctx = getattr(L, "llama_init_from_model", None) or L.llama_new_context_with_model
    ctx = new_ctx(model, cparams)
    vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))

    def clear():
        if hasattr(L, "llama_get_memory") and hasattr(L, "llama_memory_clear"):
            L.llama_memory_clear(L.llama_get_memory(ctx), True)
        elif hasattr(L, "llama_kv_self_clear"):
            L.llama_kv_self_clear(ctx)
        else:
            L.llama_kv_cache_clear(ctx)

    def decode(tokens):
        arr = (L.llama_token * len(tokens))(*tokens)
        rc = L.llama_decode(ctx, L.llama_batch_get_one(arr, len(tokens)))
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def one_run(seed, n_prompt, n_gen):
        rng = np.random.default_rng(seed)
        prompt = [int(t) for t in rng.integers(3, vocab - 1, n_prompt)]
        clear()
        t0 = time.perf_counter()
        decode(prompt)
        t1 = time.perf_counter()
        for i in range(n_gen):
            decode([int(prompt[i % n_prompt])])
        t2 = time.perf_counter()
        return n_prompt / (t1 - t0), n_gen / (t2 - t1)

    one_run(1001, min(64, args.prompt), 4)  # warm-up
    runs = [one_run(rep, args.prompt, args.generate) for rep in range(args.repetitions)]
    L.llama_free(ctx)
    (getattr(L, "llama_model_free", None) or L.llama_free_model)(model)
    return {
        "prefill_tokens_per_s": statistics.median(r[0] for r in runs),
        "decode_tokens_per_s": statistics.median(r[1] for r in runs),
        "prefill_samples": [r[0] for r in runs],
        "decode_samples": [r[1] for r in runs],
        "llama_cpp_python": L.__version__,
        "extra_buffer_types": not args.no_extra_buffers,
        "system_info": L.llama_print_system_info().decode(errors="replace").strip(),
    }


def add_run_arguments(ap, prompt: int) -> None:
    """The options every comparison takes: the binary, the thread counts, the test's size, the
    busy loops beside it and llama.cpp's extra buffer types."""
    ap.add_argument("--hearth", default="target/release/hearth", help="the hearth binary")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--prompt", type=int, default=prompt)
    ap.add_argument("--generate", type=int, default=128)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="run both engines beside N busy-looping processes (another program keeping N cores busy)")
    ap.add_argument("--no-extra-buffers", action="store_true",
                    help="turn off llama.cpp's extra buffer types (weight repacking and AMX): needed on a "
                         "VM whose CPU advertises AMX that the kernel does not enable, where llama.cpp's "
                         "AMX kernels die with SIGILL")


def with_fraction(x: dict, weight_bytes: int, bandwidth_gbps: float) -> dict:
    """`x` with the bytes a decode step reads and its decode's fraction of the bandwidth."""
    x["weight_bytes_per_token"] = weight_bytes
    x["roofline_fraction"] = x["decode_tokens_per_s"] * weight_bytes / (bandwidth_gbps * 1e9)
    return x


def compare_on_gguf(gguf_path: Path, args, weight_bytes: Optional[int] = None) -> list:
    """For each of `args.threads`, back to back: `hearth bench --model FILE.gguf` (which links the
    file), then llama.cpp on the same file. Both fractions use the bandwidth Hearth measured in
    that run and one count of the bytes a decode step reads: `weight_bytes` when given (a file
    of experts, of which a token reads only the ones it uses), else Hearth's count (every
    matrix, one embedding row)."""
    args.model = str(gguf_path)
    results = []
    for threads in args.threads:
        hearth = run_hearth(args.hearth, threads, args)
        print(f"llama.cpp, {threads} thread(s)", file=sys.stderr, flush=True)
        llama = run_llama_cpp(gguf_path, threads, args)
        if weight_bytes is not None:
            hearth["hearth_counted_bytes_per_token"] = hearth["weight_bytes_per_token"]
        reads = hearth["weight_bytes_per_token"] if weight_bytes is None else weight_bytes
        for x in (hearth, llama):
            with_fraction(x, reads, hearth["measured_read_bandwidth_gbps"])
        results.append({"threads": threads, "busy_processes": args.busy, "hearth": hearth, "llama_cpp": llama})
    return results


def table_row(threads: int, name: str, x: dict, bandwidth_gbps: float, digits: int = 1, last: tuple = ()) -> str:
    """One Markdown row: threads, engine, prefill and decode tokens/s, decode GB/s, its fraction
    of the measured bandwidth, then `last`."""
    gbps = x["decode_tokens_per_s"] * x["weight_bytes_per_token"] / 1e9
    cells = [str(threads), name, f"{x['prefill_tokens_per_s']:.{digits}f}", f"{x['decode_tokens_per_s']:.{digits}f}",
             f"{gbps:.2f}", f"{gbps / bandwidth_gbps:.0%} of {bandwidth_gbps:.1f} GB/s", *last]
    return "| " + " | ".join(cells) + " |"


def write_results(out: str, payload: dict) -> tuple:
    """Writes `payload` with the load average at the end as JSON to `out` (its folder created);
    returns that load average."""
    load = os.getloadavg()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**payload, "load_average_at_end": load}, indent=2) + "\n")
    return load


def print_load(busy: int, load: tuple) -> None:
    print(f"\nbusy processes beside each engine: {busy}; "
          f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def report_gguf(title: str, payload: dict, results: list, args) -> None:
    """Writes `payload` and `results` to `args.out` and prints `title` and compare_on_gguf's
    table, with Hearth's decode speed over llama.cpp's."""
    load = write_results(args.out, {**payload, "results": results})
    print(title)
    print("| threads | engine | prefill tok/s | decode tok/s | decode GB/s "
          "| fraction of measured read bandwidth | Hearth / llama.cpp decode |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        h, l = r["hearth"], r["llama_cpp"]
        bw = h["measured_read_bandwidth_gbps"]
        ratio = h["decode_tokens_per_s"] / l["decode_tokens_per_s"]
        print(table_row(r["threads"], "Hearth (" + h["kernel_level"] + ")", h, bw, last=(f"{ratio:.2f}",)))
        print(table_row(r["threads"], "llama.cpp", l, bw, last=("",)))
    print_load(args.busy, load)


def main() -> None:
    # A crash inside llama.cpp (a segmentation fault) ends the process; this prints where.
    faulthandler.enable()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(ap, prompt=512)
    ap.add_argument("--out", default="bench/results/results.json", metavar="PATH",
                    help="where to write the JSON results (its folder is created if missing)")
    ap.add_argument("--no-q4-0", action="store_true",
                    help="skip llama.cpp's run on the GGUF requantized to Q4_0")
    ap.add_argument("--model", metavar="DIR", help="a real Q4NX model folder for hearth bench (with --gguf)")
    ap.add_argument("--gguf", metavar="FILE", help="the GGUF that folder was imported from, for llama.cpp")
    args = ap.parse_args()
    if bool(args.model) != bool(args.gguf):
        ap.error("--model and --gguf go together: the Q4NX folder and the GGUF it was imported from")

    results = []
    for threads in args.threads:
        hearth = run_hearth(args.hearth, threads, args)  # also generates the cached model
        gguf_path = Path(args.gguf) if args.gguf else cache_dir() / "model-q4_1.gguf"
        if not args.gguf and not gguf_path.exists():
            print(f"writing {gguf_path} (once)", file=sys.stderr, flush=True)
            write_gguf(cache_dir(), gguf_path)
        print(f"llama.cpp, {threads} thread(s)", file=sys.stderr, flush=True)
        llama = run_llama_cpp(gguf_path, threads, args)
        bw = hearth["measured_read_bandwidth_gbps"]
        with_fraction(llama, hearth["weight_bytes_per_token"], bw)  # the same codes
        row = {"threads": threads, "busy_processes": args.busy, "hearth": hearth, "llama_cpp": llama}
        if not args.no_q4_0:
            q4_0_path = requantized_q4_0(gguf_path)
            print(f"llama.cpp on Q4_0, {threads} thread(s)", file=sys.stderr, flush=True)
            q4_0 = run_llama_cpp(q4_0_path, threads, args)
            reads = gguf_bytes_per_token(q4_0_path)
            q4_0["head_type"] = reads["head_type"]
            row["llama_cpp_q4_0"] = with_fraction(q4_0, reads["weight_bytes_per_token"], bw)
        results.append(row)

    load = write_results(args.out, {"results": results})
    print(f"| threads | engine | prefill {args.prompt} tok/s | decode {args.generate} tok/s "
          "| decode GB/s | fraction of measured read bandwidth |")
    print("|---|---|---|---|---|---|")
    for r in results:
        h = r["hearth"]
        bw = h["measured_read_bandwidth_gbps"]
        rows = [("Hearth (" + h["kernel_level"] + ")", h), ("llama.cpp Q4_1", r["llama_cpp"])]
        if "llama_cpp_q4_0" in r:
            q4_0 = r["llama_cpp_q4_0"]
            repack = ", repacked" if q4_0["extra_buffer_types"] else ""
            rows.append((f"llama.cpp Q4_0 (head {q4_0['head_type']}{repack})", q4_0))
        for name, x in rows:
            print(table_row(r["threads"], name, x, bw, digits=2))
    print_load(args.busy, load)


if __name__ == "__main__":
    main()
