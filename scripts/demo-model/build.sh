#!/usr/bin/env bash
# Rebuild Hearth's bundled demo model (models/demo) from Rust's own books (The Rust Programming
# Language, the Rustonomicon, the Reference, Rust by Example, the Edition Guide, the Cargo Book),
# shipped in the Rust toolchain's docs. CPU only: DEMO_TRAIN_MINUTES (default 72) of niced training,
# or DEMO_TRAIN_STEPS optimizer steps (default 4000) if those come first.
#
#   scripts/demo-model/build.sh [WORK_DIR] [RUST_HTML_DOCS_DIR]
#
# WORK_DIR (default: a new temporary directory) holds the text, checkpoints and the f32 model;
# a re-run with the same WORK_DIR resumes training from its checkpoint. RUST_HTML_DOCS_DIR defaults
# to `rustc --print sysroot`/share/doc/rust/html. Needs: pip install -r requirements.txt
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="${1:-$(mktemp -d)}"
book_args=()
if [[ $# -ge 2 ]]; then book_args=(--docs "$2"); fi
minutes="${DEMO_TRAIN_MINUTES:-72}"
steps="${DEMO_TRAIN_STEPS:-4000}"

python3 "$here/prepare_data.py" "$work/data" "${book_args[@]}"
python3 "$here/train_tokenizer.py" "$work/data" "$work/tokenizer.json"
nice python3 "$here/train.py" "$work/data" "$work/tokenizer.json" "$work/run" --steps "$steps" --minutes "$minutes"
python3 "$here/export.py" "$work/run" "$work/tokenizer.json" "$work/hf"

# Quantize to Q4NX with Hearth's own converter, then put the folder in place.
out="$repo/models/demo"
(cd "$repo" && cargo run --release -q -p hearth-cli -- convert "$work/hf" "$work/q4nx")
mkdir -p "$out"
cp "$work/q4nx/model.q4nx" "$work/hf/config.json" "$work/hf/tokenizer.json" \
   "$work/hf/tokenizer_config.json" "$work/hf/generation_config.json" "$out/"

python3 "$here/eval_perplexity.py" "$work/data" "$work/tokenizer.json" \
    --transformers "$work/hf" --hearth "$work/hf" --hearth "$out" \
    --hearth-bin "${CARGO_TARGET_DIR:-$repo/target}/release/hearth"
python3 "$here/chat_sample.py" "$work/hf" "What is ownership in Rust?" --greedy
echo "work dir: $work"
