#!/usr/bin/env bash
# Fetches the retrieval bench's documents from Debian documentation packages (free licenses,
# pinned versions) into ${HEARTH_BENCH_DOCS:-target/bench-documents}/docs/, and two long PDFs for
# the indexing-speed target (gnuplot's 311-page manual, the Debian Reference's 260 pages). Nothing here is committed; a second run reuses what is there.
#   bench/documents/fetch.sh        # prints the docs folder on stdout
# Needs apt-get (the package archive is the one network this bench uses) and dpkg-deb.
set -euo pipefail
cd "$(dirname "$0")/../.."

out="${HEARTH_BENCH_DOCS:-target/bench-documents}"
mkdir -p "$out/debs" "$out/unpacked" "$out/docs"
out="$(cd "$out" && pwd)"

# package=version, and member -> file name, as questions.json lists them (plus the big PDF).
packages="maint-guide=1.2.53 debian-reference-en=2.100 debian-reference-zh-cn=2.100 \
debian-policy=4.6.2.0 developers-reference=12.18 gnuplot-doc=5.4.4+dfsg1-2"
members=(
  "usr/share/doc/maint-guide/maint-guide.en.txt.gz maint-guide.en.txt"
  "usr/share/debian-reference/ch04.en.html debian-reference-ch04.en.html"
  "usr/share/debian-reference/ch04.zh-cn.html debian-reference-ch04.zh-cn.html"
  "usr/share/doc/debian-policy/fhs/fhs-3.0.pdf.gz fhs-3.0.pdf"
  "usr/share/developers-reference/developers-reference.epub developers-reference.epub"
  "usr/share/debian-reference/debian-reference.en.pdf debian-reference.en.pdf"
  "usr/share/doc/gnuplot/gnuplot.pdf gnuplot.pdf"
)

for pv in $packages; do
  name="${pv%%=*}"
  if ! ls "$out/debs/${name}_"*.deb >/dev/null 2>&1; then
    echo "fetching $pv" >&2
    (cd "$out/debs" && apt-get download "$pv" >&2)
  fi
  deb=$(ls "$out/debs/${name}_"*.deb | head -1)
  stamp="$out/unpacked/.$(basename "$deb")"
  if [ ! -f "$stamp" ]; then
    dpkg-deb -x "$deb" "$out/unpacked"
    touch "$stamp"
  fi
done

for entry in "${members[@]}"; do
  member="${entry% *}"
  file="${entry#* }"
  [ -f "$out/docs/$file" ] && continue
  case "$member" in
    *.gz) gzip -dc "$out/unpacked/$member" >"$out/docs/$file.part" ;;
    *) cp "$out/unpacked/$member" "$out/docs/$file.part" ;;
  esac
  mv "$out/docs/$file.part" "$out/docs/$file"
done
echo "$out/docs"
