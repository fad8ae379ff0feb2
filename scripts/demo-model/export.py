"""Assemble a complete Hugging Face model folder from a training run (f32 safetensors).

The folder is what Hearth's converter reads (`hearth convert SRC OUT`); the same tokenizer and
template files are then copied next to model.q4nx in models/demo/.

Usage: python3 export.py TRAIN_OUT_DIR TOKENIZER_JSON OUT_DIR
"""

import argparse
import json
import pathlib
import shutil

from transformers import LlamaForCausalLM

# ChatML, as MiniCPM5 and Qwen write it; add_generation_prompt opens the assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def tokenizer_config(max_length: int) -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_length,
        "added_tokens_decoder": {
            str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True}
            for i, t in enumerate(SPECIAL)
        },
        "chat_template": CHAT_TEMPLATE,
    }


def generation_config() -> dict:
    return {
        "bos_token_id": None,
        "eos_token_id": [2, 0],
        "pad_token_id": 0,
        "do_sample": True,
        "temperature": 0.7,
        "top_k": 40,
        "top_p": 0.9,
        "repetition_penalty": 1.1,
    }


def write_metadata(folder: pathlib.Path, tokenizer_json: pathlib.Path, max_length: int):
    """tokenizer.json, tokenizer_config.json and generation_config.json beside the weights."""
    shutil.copyfile(tokenizer_json, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(max_length), indent=2) + "\n")
    (folder / "generation_config.json").write_text(json.dumps(generation_config(), indent=2) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("train_out", type=pathlib.Path)
    ap.add_argument("tokenizer", type=pathlib.Path)
    ap.add_argument("out", type=pathlib.Path)
    args = ap.parse_args()

    model = LlamaForCausalLM.from_pretrained(args.train_out / "final", dtype="float32")
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    # transformers 5 writes rope_parameters.rope_theta; older readers look for a top-level rope_theta.
    config_path = args.out / "config.json"
    config = json.loads(config_path.read_text())
    config.setdefault("rope_theta", config.get("rope_parameters", {}).get("rope_theta"))
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    # save_pretrained writes its own generation_config.json; ours (with sampling defaults) replaces it.
    write_metadata(args.out, args.tokenizer, model.config.max_position_embeddings)
    print(f"wrote {args.out}: {sorted(p.name for p in args.out.iterdir())}")


if __name__ == "__main__":
    main()
