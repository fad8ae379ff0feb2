"""Train Hearth's demo model: a tiny Llama (LlamaForCausalLM) with 8:1 grouped-query attention.

Trains for --steps optimizer steps or --minutes of wall-clock time, whichever ends first: the
cosine learning-rate schedule follows max(step fraction, time fraction), so a run on a busy machine
still decays to the end within its time budget. Saves a checkpoint every few minutes (re-running
the same command resumes from it), logs loss to OUT_DIR/train.log, and finally writes
OUT_DIR/final/ with save_pretrained (f32 safetensors).

Usage: nice python3 train.py DATA_DIR TOKENIZER_JSON OUT_DIR [--steps 1000] [--minutes 60]
"""

import argparse
import json
import math
import pathlib
import random
import time

import torch
from tokenizers import Tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

EOT, IM_START, IM_END = 0, 1, 2  # ids fixed by train_tokenizer.py
CHUNK_CHARS = 1500  # plain text is cut at paragraph boundaries into pieces about this long


# Longer than the 512-token training windows so a chat in the app is not cut short; RoPE runs at
# any position, but answers get worse past the trained length (README says so).
MAX_POSITIONS = 2048


def model_config(vocab_size: int) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=1,  # 8 query heads share one KV head, as in MiniCPM5
        head_dim=32,
        hidden_act="silu",
        max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=1e-6,
        rope_theta=5_000_000.0,
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=None,
        eos_token_id=[IM_END, EOT],
        pad_token_id=EOT,
    )


def render_chat(messages) -> str:
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def documents(data_dir: pathlib.Path, name: str) -> list[str]:
    return [d.strip() for d in (data_dir / name).read_text(encoding="utf-8").split("<|endoftext|>") if d.strip()]


def chunks(doc: str) -> list[str]:
    out, cur = [], ""
    for para in doc.split("\n\n"):
        if cur and len(cur) + len(para) > CHUNK_CHARS:
            out.append(cur)
            cur = ""
        cur = (cur + "\n\n" + para) if cur else para
    if cur:
        out.append(cur)
    return out


def encode_all(tok: Tokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids + [EOT] for e in tok.encode_batch(texts)]


def pack(pieces: list[list[int]], seq_len: int, rng: random.Random) -> torch.Tensor:
    """Shuffles pieces, concatenates them and cuts [n, seq_len + 1] rows (inputs + next-token targets)."""
    order = list(range(len(pieces)))
    rng.shuffle(order)
    stream = [t for i in order for t in pieces[i]]
    n = (len(stream) - 1) // seq_len
    rows = [stream[i * seq_len : i * seq_len + seq_len + 1] for i in range(n)]
    return torch.tensor(rows, dtype=torch.long)


def heldout_rows(tok: Tokenizer, data_dir: pathlib.Path, seq_len: int) -> torch.Tensor:
    stream = [t for ids in encode_all(tok, documents(data_dir, "heldout.txt")) for t in ids]
    n = (len(stream) - 1) // seq_len
    return torch.tensor([stream[i * seq_len : i * seq_len + seq_len + 1] for i in range(n)], dtype=torch.long)


@torch.no_grad()
def mean_loss(model, rows: torch.Tensor, batch: int) -> float:
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(rows), batch):
        b = rows[i : i + batch]
        logits = model(input_ids=b[:, :-1]).logits.float()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), b[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
        count += b[:, 1:].numel()
    model.train()
    return total / count


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_dir", type=pathlib.Path)
    ap.add_argument("tokenizer", type=pathlib.Path)
    ap.add_argument("out_dir", type=pathlib.Path)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--chat-repeat", type=int, default=2, help="how many times each chat pair appears per epoch")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--checkpoint-minutes", type=float, default=5.0)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    log = open(args.out_dir / "train.log", "a", encoding="utf-8")

    def say(msg: str):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    tok = Tokenizer.from_file(str(args.tokenizer))
    text_pieces = encode_all(tok, [c for d in documents(args.data_dir, "train.txt") for c in chunks(d)])
    with open(args.data_dir / "chat.jsonl", encoding="utf-8") as f:
        chats = [render_chat(json.loads(line)["messages"]) for line in f]
    chat_pieces = encode_all(tok, chats)
    pieces = text_pieces + chat_pieces * args.chat_repeat
    held = heldout_rows(tok, args.data_dir, args.seq_len)
    say(f"train: {sum(map(len, text_pieces))} text tokens, {sum(map(len, chat_pieces))} chat tokens x{args.chat_repeat}; "
        f"held out: {held.numel()} tokens")

    config = model_config(tok.get_vocab_size())
    model = LlamaForCausalLM(config)
    params = sum(p.numel() for p in model.parameters())
    say(f"parameters: {params} ({params / 1e6:.2f} M)")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))

    state = {"step": 0, "epoch": 0, "pos": 0, "elapsed": 0.0}
    ckpt = args.out_dir / "checkpoint.pt"
    if ckpt.exists():
        saved = torch.load(ckpt, weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        state = saved["state"]
        say(f"resumed from {ckpt} at step {state['step']} ({state['elapsed'] / 60:.1f} min)")

    def save():
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, tmp)
        tmp.replace(ckpt)

    budget = args.minutes * 60
    warmup = 30  # steps of linear warm-up
    rows = pack(pieces, args.seq_len, random.Random(args.seed + state["epoch"]))
    model.train()
    start = time.time() - state["elapsed"]
    last_ckpt = time.time()
    smooth = None
    def progress() -> float:
        return max(state["step"] / args.steps, state["elapsed"] / budget)

    while progress() < 1.0:
        if state["pos"] + args.batch > len(rows):
            state["epoch"] += 1
            state["pos"] = 0
            rows = pack(pieces, args.seq_len, random.Random(args.seed + state["epoch"]))
        batch = rows[state["pos"] : state["pos"] + args.batch]
        state["pos"] += args.batch
        lr = args.lr * min(1.0, (state["step"] + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress())))
        for g in opt.param_groups:
            g["lr"] = lr
        logits = model(input_ids=batch[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        state["step"] += 1
        state["elapsed"] = time.time() - start
        smooth = loss.item() if smooth is None else 0.95 * smooth + 0.05 * loss.item()
        if state["step"] % 25 == 0:
            tps = state["step"] * args.batch * args.seq_len / state["elapsed"]
            say(f"step {state['step']} epoch {state['epoch']} {state['elapsed'] / 60:.1f} min lr {lr:.2e} "
                f"loss {loss.item():.3f} (smoothed {smooth:.3f}) ~{tps:.0f} tok/s")
        if time.time() - last_ckpt > args.checkpoint_minutes * 60:
            save()
            last_ckpt = time.time()
            # A quarter of the held-out windows: enough to watch the trend, cheap on a busy machine.
            say(f"checkpoint at step {state['step']}; held-out loss (first quarter) "
                f"{mean_loss(model, held[: len(held) // 4], args.batch):.3f}")
    save()

    train_eval = pack(pieces, args.seq_len, random.Random(12345))[: len(held)]
    train_loss, held_loss = mean_loss(model, train_eval, args.batch), mean_loss(model, held, args.batch)
    say(f"final: step {state['step']}, {state['epoch']} epochs, train loss {train_loss:.3f}, "
        f"held-out loss {held_loss:.3f} (perplexity {math.exp(held_loss):.2f})")
    final = args.out_dir / "final"
    model.save_pretrained(final, safe_serialization=True)
    json.dump({"steps": state["step"], "epochs": state["epoch"], "minutes": state["elapsed"] / 60, "params": params,
               "train_loss": train_loss, "heldout_loss": held_loss}, open(args.out_dir / "result.json", "w"), indent=1)
    say(f"saved {final}")


if __name__ == "__main__":
    main()
