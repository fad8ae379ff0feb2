#!/usr/bin/env bash
# npm run app: install what is missing, build the desktop app (release, with the UI embedded)
# and open it. A tiny demo model is bundled; the app says how to get a real one.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${CI:-}" = 1 ] && export CI=true   # the Tauri CLI rejects CI=1
bash scripts/setup.sh app
target="${CARGO_TARGET_DIR:-target}"
# The starter assistant (SmolLM2-135M) is made with the hearth command, then bundled; without
# it the app opens on the tiny demo model.
echo "app: building the hearth command (release) to make the starter model"
config=()
# The embedding model (all-MiniLM-L6-v2) is bundled beside it.
if cargo build --release -p hearth-cli && bash scripts/starter-model.sh "$target/release/hearth" >/dev/null \
  && bash scripts/embedding-model.sh >/dev/null; then
  config=(--config src-tauri/tauri.starter.conf.json)
else
  echo "app: could not make the starter or the embedding model (see above); the app will open on the tiny demo model instead"
fi
echo "app: building hearth-desktop (release; the first build takes several minutes)"
npx tauri build --no-bundle "${config[@]}"
echo "app: starting $target/release/hearth-desktop"
exec "$target/release/hearth-desktop" "$@"
