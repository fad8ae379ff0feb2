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
if [ ! -f models/demo/config.json ]; then
  echo "package: models/demo is missing: the package bundles the demo model, so it cannot be built" >&2
  exit 1
fi
npx tauri build "${args[@]}"
target="${CARGO_TARGET_DIR:-target}"
deb=$(ls -t "$target/$profile/bundle/deb/"*.deb | head -n1)
echo "package: built $deb ($(du -h "$deb" | cut -f1))"
