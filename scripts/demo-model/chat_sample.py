"""Ask the unquantized demo model questions through transformers, using the folder's own chat
template (tokenizer_config.json) and generation settings, to check it answers in English.

Usage: python3 chat_sample.py HF_MODEL_DIR "What is ownership in Rust?" [--greedy] [--seed 0]
"""

import argparse

import torch
from transformers import AutoTokenizer, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("questions", nargs="+")
    ap.add_argument("--greedy", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=120)
    args = ap.parse_args()

    tok = AutoTokenizer.from_pretrained(args.model_dir)
    model = LlamaForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    for q in args.questions:
        torch.manual_seed(args.seed)
        ids = tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, return_tensors="pt")
        if not isinstance(ids, torch.Tensor):
            ids = ids["input_ids"]
        extra = {"do_sample": False} if args.greedy else {}
        out = model.generate(ids, max_new_tokens=args.max_new_tokens, **extra)
        print(f"Q: {q}\nA: {tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True).strip()}\n", flush=True)


if __name__ == "__main__":
    main()
