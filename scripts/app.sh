#!/usr/bin/env bash
# npm run app: install what is missing, build the desktop app (release, with the UI embedded)
# and open it. A tiny demo model is bundled; the app says how to get a real one.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${CI:-}" = 1 ] && export CI=true   # the Tauri CLI rejects CI=1
bash scripts/setup.sh app
echo "app: building hearth-desktop (release; the first build takes several minutes)"
npx tauri build --no-bundle
target="${CARGO_TARGET_DIR:-target}"
echo "app: starting $target/release/hearth-desktop"
exec "$target/release/hearth-desktop" "$@"
