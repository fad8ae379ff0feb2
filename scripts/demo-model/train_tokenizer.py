"""Train the demo model's byte-level BPE tokenizer on the training text (never the held-out text).

Usage: python3 train_tokenizer.py DATA_DIR OUT_TOKENIZER_JSON [--vocab 4096]
"""

import argparse
import json
import pathlib

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

# Ids 0, 1, 2 in this order: the config and tokenizer_config refer to them.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def training_texts(data_dir: pathlib.Path):
    for doc in (data_dir / "train.txt").read_text(encoding="utf-8").split("<|endoftext|>"):
        yield doc
    with open(data_dir / "chat.jsonl", encoding="utf-8") as f:
        for line in f:
            # Rendered as in training so role names ("user", "assistant") become single tokens.
            yield "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in json.loads(line)["messages"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_dir", type=pathlib.Path)
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--vocab", type=int, default=4096)
    args = ap.parse_args()

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_texts(args.data_dir), trainer=trainer)
    for i, t in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(t) == i, f"special token {t} got id {tok.token_to_id(t)}"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(args.out))
    sample = "Ownership is a set of rules that govern how a Rust program manages memory."
    print(f"vocab {tok.get_vocab_size()}; {len(tok.encode(sample).ids)} tokens for: {sample}")


if __name__ == "__main__":
    main()
