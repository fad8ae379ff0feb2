#!/usr/bin/env python3
"""Compares PDF text extractors on real, freely licensed PDFs from Debian documentation packages.

For each PDF, poppler's `pdftotext` is the yardstick: each candidate's words are counted against
its words page by page (recall: the share of pdftotext's words the candidate also gives on that
page; precision: the share of the candidate's words pdftotext also gives, which drops when words
run together or come out as garbage). Speed is the median over RUNS runs of parsing and
extracting every page from bytes in memory, in pages per second; peak memory is the process's
maximum resident set.

    python3 bench/pdf_extractors/compare.py [--runs 3]

It downloads the packages with `apt-get download` and unpacks them with `dpkg-deb -x` into
target/bench-pdf/ (never committed), installs poppler-utils with apt-get when `pdftotext` is
missing (as root), builds bench/pdf_extractors in release mode, and writes every figure to
bench/out/pdf_extractors.json. The table it prints is the one in bench/README.md.
"""

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "target" / "bench-pdf"
TARGET_DIR = ROOT / "target" / "bench-pdf-extractors"
BINARY = TARGET_DIR / "release" / "pdf-extractors-bench"
OUT = ROOT / "bench" / "out" / "pdf_extractors.json"

# (package, path inside it): technical manuals made by TeX, in English and in Chinese, and one
# of more than 300 pages (the size Hearth must keep searchable within 10 s).
PDFS = [
    ("debian-reference-en", "usr/share/debian-reference/debian-reference.en.pdf"),
    ("debian-reference-zh-cn", "usr/share/debian-reference/debian-reference.zh-cn.pdf"),
    ("gnuplot-doc", "usr/share/doc/gnuplot/gnuplot.pdf"),
    ("asymptote-doc", "usr/share/doc/asymptote/asymptote.pdf"),
    ("asymptote-doc", "usr/share/doc/asymptote/asyRefCard.pdf"),
]
EXTRACTORS = ["pdf-extract", "lopdf", "pdf_oxide"]

CJK = "\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff"
# A CJK character is a word of its own (its runs have no spaces to split them); elsewhere a
# word is a run of letters and digits.
WORD = re.compile(f"[{CJK}]|[^\\W_{CJK}]+")


def words(text):
    return collections.Counter(WORD.findall(text.lower()))


def fetch_pdfs():
    """The PDFs' paths, downloading and unpacking their packages once."""
    CACHE.mkdir(parents=True, exist_ok=True)
    unpacked = CACHE / "root"
    for package in sorted({package for package, _ in PDFS}):
        marker = CACHE / f"{package}.unpacked"
        if marker.exists():
            continue
        subprocess.run(["apt-get", "download", package], cwd=CACHE, check=True)
        deb = max(CACHE.glob(f"{package}_*.deb"), key=os.path.getmtime)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
        marker.touch()
    return [unpacked / path for _, path in PDFS]


def ensure_pdftotext():
    if shutil.which("pdftotext"):
        return
    subprocess.run(["apt-get", "install", "-y", "poppler-utils"], check=True)


def run_measured(command):
    """(stdout, peak resident memory in MiB) of a command."""
    with subprocess.Popen(command, stdout=subprocess.PIPE) as process:
        output = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{command[0]} failed with {process.returncode}")
    return output, usage.ru_maxrss / 1024


def pdftotext_pages(pdf, runs):
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        output, _ = run_measured(["pdftotext", "-enc", "UTF-8", str(pdf), "-"])
        seconds.append(time.perf_counter() - start)
    pages = output.decode("utf-8", "replace").split("\f")
    return pages[:-1] if pages and not pages[-1].strip() else pages, seconds


def score(reference_pages, pages):
    """Recall and precision of words against the reference, page by page when the counts agree
    (so text put on the wrong page counts as missing), else over the whole document."""
    if len(pages) != len(reference_pages):
        reference_pages, pages = ["".join(reference_pages)], ["".join(pages)]
    common = found = expected = 0
    for reference, page in zip(reference_pages, pages):
        want, got = words(reference), words(page)
        common += sum((want & got).values())
        expected += sum(want.values())
        found += sum(got.values())
    return common / max(expected, 1), common / max(found, 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    pdfs = fetch_pdfs()
    ensure_pdftotext()
    subprocess.run(
        ["cargo", "build", "--release", "--manifest-path",
         str(ROOT / "bench" / "pdf_extractors" / "Cargo.toml")],
        env={**os.environ, "CARGO_TARGET_DIR": str(TARGET_DIR)},
        check=True,
    )

    results = []
    print("| PDF | pages | extractor | word recall | word precision | pages/s | peak MiB |")
    print("|---|---|---|---|---|---|---|")
    for pdf in pdfs:
        reference, reference_seconds = pdftotext_pages(pdf, args.runs)
        pages_per_second = len(reference) / statistics.median(reference_seconds)
        print(f"| {pdf.name} | {len(reference)} | pdftotext (yardstick) | 1 | 1 | "
              f"{pages_per_second:.0f} | |")
        for extractor in EXTRACTORS:
            output, peak = run_measured([str(BINARY), extractor, str(pdf), str(args.runs)])
            result = json.loads(output)
            row = {"pdf": pdf.name, "extractor": extractor, "seconds": result["seconds"],
                   "peak_mib": round(peak, 1), "reference_pages": len(reference)}
            if "error" in result:
                row["error"] = result["error"]
                print(f"| {pdf.name} | {len(reference)} | {extractor} | failed: "
                      f"{result['error'][:60]} | | | {peak:.0f} |")
            else:
                recall, precision = score(reference, result["pages"])
                median = statistics.median(result["seconds"])
                row.update(pages=len(result["pages"]), recall=round(recall, 4),
                           precision=round(precision, 4),
                           pages_per_second=round(len(result["pages"]) / median, 1))
                print(f"| {pdf.name} | {len(result['pages'])} | {extractor} | {recall:.3f} | "
                      f"{precision:.3f} | {row['pages_per_second']:.0f} | {peak:.0f} |")
            results.append(row)
        results.append({"pdf": pdf.name, "extractor": "pdftotext", "seconds": reference_seconds,
                        "pages": len(reference)})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=1) + "\n")
    print(f"figures: {OUT.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
