#!/usr/bin/env bash
# Installs what building, running or testing Hearth needs, and only what is missing:
#   scripts/setup.sh app|test|package
# - Debian/Ubuntu system packages (webkit2gtk, GTK and build tools; for tests also Xvfb,
#   ImageMagick, WebKitWebDriver, Chromium and iproute2 for the offline end-to-end run), through apt-get, as root or with sudo;
# - the npm packages in package-lock.json (npm ci) when node_modules is missing or stale;
# - for tests, tauri-driver (cargo install, into target/tools).
# A machine that already has everything needs no network.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-app}"

build_pkgs=(build-essential pkg-config file libssl-dev libxdo-dev libasound2-dev libwebkit2gtk-4.1-dev
  libjavascriptcoregtk-4.1-dev libsoup-3.0-dev libgtk-3-dev librsvg2-dev libayatana-appindicator3-dev
  python3-venv)  # python3-venv: pip fetches the starter model (scripts/starter-model.sh)
# libasound2-dev: the microphone (cpal over ALSA);
# xdotool: the e2e test types into GTK's file chooser; fonts-noto-cjk: Chinese screenshots show glyphs;
# fonts-noto-color-emoji: emoji in answers are drawn, not boxes (browser test "review #33");
# tesseract-ocr and its data: scans are read (documents' OCR tests), poppler-utils renders their pages;
# espeak-ng speaks the test sentences that speech recognition is checked on
test_pkgs=(xvfb xauth imagemagick webkit2gtk-driver chromium iproute2 xdotool fonts-noto-cjk fonts-noto-color-emoji
  tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim tesseract-ocr-deu tesseract-ocr-fra tesseract-ocr-spa
  poppler-utils espeak-ng)

wanted=("${build_pkgs[@]}")
[ "$mode" = test ] && wanted+=("${test_pkgs[@]}")

missing=()
for pkg in "${wanted[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done

if [ "${#missing[@]}" -gt 0 ]; then
  if ! command -v apt-get >/dev/null; then
    echo "setup: these system packages are missing and this is not a Debian/Ubuntu system: ${missing[*]}" >&2
    echo "setup: install the equivalents with your package manager, then run this again." >&2
    exit 1
  fi
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: installing ${missing[*]} needs root; run as root or install sudo" >&2; exit 1; }
    sudo=(sudo)
  fi
  echo "setup: installing system packages (apt-get): ${missing[*]}"
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: system packages present (${#wanted[@]} checked)"
fi

for tool in cargo node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "setup: '$tool' is missing. Install Rust (rustup, stable) and Node.js 20.19 or newer, then run this again." >&2
    exit 1
  fi
done

# npm packages: reinstall when the lock file changed since the last install.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm packages (npm ci)"
  npm ci --no-audit --no-fund
else
  echo "setup: npm packages present"
fi

if [ "$mode" = test ]; then
  tools="${CARGO_TARGET_DIR:-target}/tools"
  driver="$tools/bin/tauri-driver"
  if [ ! -x "$driver" ]; then
    # --debug: a WebDriver proxy needs no optimizing, and unoptimized it builds in about two
    # thirds of the CPU time (55 s against 86 s measured here), before anything else can start.
    echo "setup: installing tauri-driver (cargo install tauri-driver --version ^2 --locked --debug --root $tools)"
    cargo install tauri-driver --version "^2" --locked --debug --root "$tools"
  else
    echo "setup: tauri-driver present"
  fi
fi
