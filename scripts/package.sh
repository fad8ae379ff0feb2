#!/usr/bin/env bash
# npm run package: build the Debian package (release) with the Tauri bundler.
# Pass --debug to build a debug package (what the test run installs).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${CI:-}" = 1 ] && export CI=true   # the Tauri CLI rejects CI=1
bash scripts/setup.sh package
profile=release
args=(--bundles deb)
if [ "${1:-}" = --debug ]; then
  profile=debug
  args+=(--debug)
fi
target="${CARGO_TARGET_DIR:-target}"
# The package bundles the starter assistant (SmolLM2-135M), made with the hearth command.
cargo build -p hearth-cli $([ "$profile" = release ] && echo --release)
if ! bash scripts/starter-model.sh "$target/$profile/hearth" >/dev/null; then
  echo "package: could not make the starter model (see above), which the package bundles" >&2
  exit 1
fi
# And the sentence-embedding model (all-MiniLM-L6-v2) of the document index and /v1/embeddings.
if ! bash scripts/embedding-model.sh >/dev/null; then
  echo "package: could not make the embedding model (see above), which the package bundles" >&2
  exit 1
fi
npx tauri build "${args[@]}" --config src-tauri/tauri.starter.conf.json
deb=$(ls -t "$target/$profile/bundle/deb/"*.deb | head -n1)
echo "package: built $deb ($(du -h "$deb" | cut -f1))"
