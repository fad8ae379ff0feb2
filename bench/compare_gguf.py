#!/usr/bin/env python3
"""Hearth's CPU engine on a GGUF's own blocks against llama.cpp on the same file, same run.

For each thread count, back to back:

1. `hearth bench --model FILE.gguf --json` links the file (`q4nx::gguf::link_gguf`: read where it
   lies, every matrix run on its GGUF blocks) into the bench cache, measures this machine's read
   bandwidth, and times a warm-up and `--repetitions` runs of a `--prompt`-token prefill followed
   by `--generate` single-token decode steps (medians).
2. llama.cpp (PyPI `llama-cpp-python`, built from source on this machine, driven through its C
   API as bench/compare_llama_cpp.py does) runs the same test on the same file.

Both bandwidth fractions use the bandwidth Hearth measured in that run and the bytes one decode
step reads of the file as `hearth bench` counts them (every matrix, one embedding row, the
embedding again as the head when the file ties them): both engines read the same blocks. Prints a Markdown table and writes JSON
to `--out`.

    target/tools/python/bin/python bench/compare_gguf.py --hearth target/release/hearth \\
        --gguf target/real-models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf --threads 1 2
"""

import argparse
import faulthandler
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_llama_cpp import run_hearth, run_llama_cpp  # noqa: E402


def main() -> None:
    faulthandler.enable()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hearth", default="target/release/hearth", help="the hearth binary")
    ap.add_argument("--gguf", required=True, metavar="FILE", help="the GGUF file both engines run")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--generate", type=int, default=128)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="run both engines beside N busy-looping processes")
    ap.add_argument("--no-extra-buffers", action="store_true",
                    help="turn off llama.cpp's extra buffer types (weight repacking and AMX)")
    ap.add_argument("--out", default="bench/results/gguf.json", metavar="PATH")
    args = ap.parse_args()
    gguf_path = Path(args.gguf)
    args.model = str(gguf_path)  # run_hearth's --model: hearth bench links a GGUF file itself

    results = []
    for threads in args.threads:
        hearth = run_hearth(args.hearth, threads, args)
        print(f"llama.cpp, {threads} thread(s)", file=sys.stderr, flush=True)
        llama = run_llama_cpp(gguf_path, threads, args)
        llama["weight_bytes_per_token"] = hearth["weight_bytes_per_token"]  # the same file's blocks
        bw = hearth["measured_read_bandwidth_gbps"] * 1e9
        for x in (hearth, llama):
            x["roofline_fraction"] = x["decode_tokens_per_s"] * x["weight_bytes_per_token"] / bw
        results.append({"threads": threads, "busy_processes": args.busy, "hearth": hearth, "llama_cpp": llama})

    load = os.getloadavg()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"gguf": gguf_path.name, "load_average_at_end": load, "results": results},
                              indent=2) + "\n")
    print(f"{gguf_path.name}: prefill {args.prompt} tokens, decode {args.generate}, "
          f"medians of {args.repetitions}")
    print(f"| threads | engine | prefill tok/s | decode tok/s | decode GB/s "
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
