"""Perplexity of the demo model on the held-out chapters (never trained on).

The held-out text is tokenized with the model's tokenizer, documents joined by <|endoftext|>, and
cut into non-overlapping windows of --seq-len tokens; perplexity = exp(mean next-token NLL) over
every predicted token (--seq-len - 1 per window... precisely: positions 1..n of each window).

  --transformers DIR   an unquantized Hugging Face folder, run by transformers (f32, eager attention)
  --hearth DIR         any model folder, run by Hearth's engine through `hearth logits`
                       (binary from --hearth-bin, default `hearth` on PATH)

Usage: python3 eval_perplexity.py DATA_DIR TOKENIZER_JSON [--transformers DIR] [--hearth DIR ...]
"""

import argparse
import json
import math
import pathlib
import subprocess
import tempfile

import numpy as np
from tokenizers import Tokenizer

EOT = 0


def windows(data_dir: pathlib.Path, tokenizer: pathlib.Path, seq_len: int) -> list[list[int]]:
    tok = Tokenizer.from_file(str(tokenizer))
    docs = [d.strip() for d in (data_dir / "heldout.txt").read_text(encoding="utf-8").split("<|endoftext|>") if d.strip()]
    stream = [t for e in tok.encode_batch(docs) for t in e.ids + [EOT]]
    return [stream[i : i + seq_len] for i in range(0, len(stream) - seq_len + 1, seq_len)]


def nll_from_logits(logits: np.ndarray, tokens: list[int]) -> tuple[float, int]:
    """Sum of -log p(tokens[i+1] | tokens[..=i]) and the count of predicted tokens."""
    x = logits[:-1].astype(np.float64)
    x -= x.max(axis=1, keepdims=True)
    logp = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
    target = np.asarray(tokens[1:])
    return float(-logp[np.arange(len(target)), target].sum()), len(target)


def eval_transformers(model_dir: pathlib.Path, wins) -> tuple[float, int]:
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for w in wins:
            logits = model(input_ids=torch.tensor([w])).logits[0].numpy()
            s, n = nll_from_logits(logits, w)
            total, count = total + s, count + n
    return total, count


def eval_hearth(model_dir: pathlib.Path, wins, binary: str) -> tuple[float, int]:
    total, count = 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for w in wins:
            out = pathlib.Path(tmp) / "logits.json"
            cmd = [binary, "logits", "--model", str(model_dir), "--tokens", ",".join(map(str, w)), "--json"]
            with open(out, "w") as f:
                subprocess.run(cmd, stdout=f, check=True)
            rows = json.loads(out.read_text())
            if isinstance(rows, dict):
                rows = rows["logits"]
            s, n = nll_from_logits(np.asarray(rows, dtype=np.float32), w)
            total, count = total + s, count + n
    return total, count


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_dir", type=pathlib.Path)
    ap.add_argument("tokenizer", type=pathlib.Path)
    ap.add_argument("--transformers", type=pathlib.Path, action="append", default=[])
    ap.add_argument("--hearth", type=pathlib.Path, action="append", default=[])
    ap.add_argument("--hearth-bin", default="hearth")
    ap.add_argument("--seq-len", type=int, default=512)
    args = ap.parse_args()

    wins = windows(args.data_dir, args.tokenizer, args.seq_len)
    print(f"held-out: {len(wins)} windows of {args.seq_len} tokens")
    print("| model | run by | held-out tokens | NLL/token | perplexity |")
    print("|---|---|---|---|---|")
    runs = [("transformers (f32)", d, lambda d: eval_transformers(d, wins)) for d in args.transformers]
    runs += [("hearth", d, lambda d: eval_hearth(d, wins, args.hearth_bin)) for d in args.hearth]
    for label, d, fn in runs:
        total, count = fn(d)
        print(f"| {d.name} | {label} | {count} | {total / count:.4f} | {math.exp(total / count):.2f} |", flush=True)


if __name__ == "__main__":
    main()
