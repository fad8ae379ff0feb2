#!/usr/bin/env python3
"""Gold character ranges for the retrieval bench, and the paraphrase check.

For each question of questions.json, finds its quote in the text Hearth extracts from the
document (crates/documents/examples/sections.rs, the texts whose character ranges `hearth search`
reports), ignoring whitespace and quotation marks (a file's line breaks and typographic quotes
differ between formats), and writes gold.json: per question the file, section index, place and
character range [start, end) of the quote in that section's text (a Python str slice).

Then checks that every question marked paraphrased shares no content word with its quote:
English words are compared by their first five letters (so "install" and "installation" count
as shared) after dropping function words; Chinese text by its pairs of adjacent characters.

  bench/documents/gold.py [--check]   # --check: compare with the committed gold.json
Needs bench/documents/fetch.sh first (it prints the docs folder this reads).
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DOCS = os.environ.get("HEARTH_BENCH_DOCS", os.path.join(ROOT, "target", "bench-documents"))

IGNORED = set(" \t\r\n\u00a0\u3000\"'`\u2018\u2019\u201c\u201d*")

STOPWORDS = set("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can can't cannot could did do does doing don't down during each else
few for from further had has have having he her here hers herself him himself his how i if in
into is isn't it it's its itself just me more most must my myself no nor not now of off on once
only or other our ours ourselves out over own same she should shouldn't so some such than that
the their theirs them themselves then there these they this those through to too under until up
upon very was we were what when where which while who whom why will with would you your yours
yourself yourselves may might i'm i've s t can't won't let us one
""".split())


def sections_of(path):
    """What Hearth extracts from the file at `path`."""
    example = [
        "cargo", "run", "--quiet", "--release", "-p", "hearth-documents", "--example",
        "sections", "--", path,
    ]
    out = subprocess.run(example, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["sections"]


def normalized(text):
    """`text` without ignored characters, lowercased, and the index in `text` of each kept one."""
    kept, where = [], []
    for i, c in enumerate(text):
        if c not in IGNORED:
            kept.append(c.lower())
            where.append(i)
    return "".join(kept), where


def locate(quote, sections):
    """(section index, start, end) of `quote` in `sections`, or None."""
    needle, _ = normalized(quote)
    for index, section in enumerate(sections):
        hay, where = normalized(section["text"])
        at = hay.find(needle)
        if at >= 0:
            return index, where[at], where[at + len(needle) - 1] + 1
    return None


def content_words(text):
    words = re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())
    return {w[:5] for w in words if w not in STOPWORDS}


def cjk_bigrams(text):
    runs = re.findall(r"[\u3400-\u4dbf\u4e00-\u9fff]+", text)
    return {run[i:i + 2] for run in runs for i in range(len(run) - 1)}


def shared(question, quote):
    return sorted((content_words(question) & content_words(quote))
                  | (cjk_bigrams(question) & cjk_bigrams(quote)))


def main():
    with open(os.path.join(HERE, "questions.json"), encoding="utf-8") as f:
        spec = json.load(f)
    failures = []
    for q in spec["questions"]:
        if q["paraphrased"]:
            common = shared(q["question"], q["quote"])
            if common:
                failures.append(f"question {q['id']} is marked paraphrased but shares {common}")
    gold = {}
    for key, doc in spec["documents"].items():
        path = os.path.join(DOCS, "docs", doc["file"])
        try:
            sections = sections_of(path)
        except subprocess.CalledProcessError as e:
            failures.append(f"{doc['file']}: Hearth cannot read it yet ({e.stderr.strip()})")
            continue
        for q in spec["questions"]:
            if q["document"] != key:
                continue
            found = locate(q["quote"], sections)
            if found is None:
                failures.append(f"question {q['id']}: quote not found in {doc['file']}")
                continue
            index, start, end = found
            gold[str(q["id"])] = {
                "file": doc["file"],
                "section": index,
                "place": sections[index]["place"],
                "chars": [start, end],
                "text": sections[index]["text"][start:end],
            }
    out = os.path.join(HERE, "gold.json")
    if "--check" in sys.argv:
        with open(out, encoding="utf-8") as f:
            committed = json.load(f)
        for qid, g in gold.items():
            if committed.get(qid) != g:
                failures.append(f"question {qid}: gold range differs from gold.json")
    else:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(gold, f, ensure_ascii=False, indent=1, sort_keys=True)
            f.write("\n")
    for failure in failures:
        print(f"gold: {failure}", file=sys.stderr)
    print(f"gold: {len(gold)} of {len(spec['questions'])} questions located; "
          f"{sum(q['paraphrased'] for q in spec['questions'])} paraphrased", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
