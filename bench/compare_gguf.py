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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_llama_cpp import add_run_arguments, compare_on_gguf, report_gguf  # noqa: E402


def main() -> None:
    faulthandler.enable()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(ap, prompt=16)
    ap.add_argument("--gguf", required=True, metavar="FILE", help="the GGUF file both engines run")
    ap.add_argument("--out", default="bench/results/gguf.json", metavar="PATH")
    args = ap.parse_args()
    gguf_path = Path(args.gguf)
    results = compare_on_gguf(gguf_path, args)
    title = f"{gguf_path.name}: prefill {args.prompt} tokens, decode {args.generate}, medians of {args.repetitions}"
    report_gguf(title, {"gguf": gguf_path.name}, results, args)


if __name__ == "__main__":
    main()
