#!/usr/bin/env bash
# Install the built .deb, check it put the binary, menu entry, icons and starter model in place,
# start the installed app and chat with it (the e2e test against /usr/bin/hearth-desktop),
# then remove it and check nothing is left. Needs root or sudo.
#   tests/e2e/deb.sh path/to/hearth.deb
set -euo pipefail
cd "$(dirname "$0")/../.."
deb="$1"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deb test: needs root or sudo to install $deb"; exit 1; }
  sudo=(sudo -n)
fi
pkg=$(dpkg-deb -f "$deb" Package)
echo "deb test: installing $pkg from $deb"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$(realpath "$deb")" >/dev/null
files=$(dpkg -L "$pkg")
check() { grep -qE "$1" <<<"$files" || { echo "deb test: the package has no $2"; "${sudo[@]}" dpkg -r "$pkg" >/dev/null; exit 1; }; }
check '^/usr/bin/hearth-desktop$' "binary /usr/bin/hearth-desktop"
check '^/usr/share/applications/.*\.desktop$' "desktop menu entry"
check '^/usr/share/icons/hicolor/.*/apps/hearth-desktop\.png$' "icons"
check '/models/starter/config\.json$' "bundled starter model"
check '/models/starter/model\.q4nx$' "bundled starter model weights"
desktop=$(grep -E '^/usr/share/applications/.*\.desktop$' <<<"$files")
grep -q '^Exec=hearth-desktop' "$desktop" || { echo "deb test: $desktop does not start hearth-desktop"; exit 1; }
if command -v desktop-file-validate >/dev/null; then desktop-file-validate "$desktop"; fi
echo "deb test: installed; menu entry $desktop; starting the installed app"
status=0
HEARTH_APP=/usr/bin/hearth-desktop HEARTH_E2E_BUILTIN=starter E2E_WEBVIEW=0 xvfb-run -a -s "-screen 0 1280x800x24" node tests/e2e/run.mjs || status=$?
echo "deb test: removing $pkg"
"${sudo[@]}" dpkg -r "$pkg" >/dev/null
if [ -e /usr/bin/hearth-desktop ] || [ -e "$desktop" ]; then
  echo "deb test: files left after removal"; exit 1
fi
[ "$status" -eq 0 ] || { echo "deb test: the installed app failed its run"; exit 1; }
echo "deb test: $pkg installed, started, answered and removed cleanly"
