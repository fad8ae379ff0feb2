#!/usr/bin/env python3
"""Recall@5 of `hearth search --json` on the question set, for keyword, semantic and combined
ranking, with query latency and peak memory.

A question counts as answered when one of the first five passages is from its gold section
(gold.json) and covers at least half of the gold range. Every question searches all five
documents at once. The library lives in target/bench-documents/home (indexed by the first
question, then reused: a file is read again only when it changes).

  bench/documents/fetch.sh && bench/documents/gold.py --check
  cargo build --release -p hearth-cli
  bench/documents/recall.py [--hearth target/release/hearth] [--json out.json]
      [--ranking keyword]   # only these rankings (repeatable); keyword needs no model
      [--rerank-model NAME|DIR ...]  # also "reranked": combined's first 20 judged by each model
"""
import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BENCH = os.environ.get("HEARTH_BENCH_DOCS", os.path.join(ROOT, "target", "bench-documents"))
RANKINGS = ["keyword", "semantic", "combined"]
K = 5


def search(hearth, files, question, ranking, env, rerank=None):
    command = ["/usr/bin/time", "-f", "%M", hearth, "search", "--json", "--limit", str(K),
               "--ranking", ranking]
    if rerank:
        command += ["--rerank", rerank]
    for f in files:
        command += ["--file", f]
    command.append(question)
    started = time.monotonic()
    run = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.monotonic() - started
    if run.returncode not in (0, 1):
        sys.exit(f"recall: hearth search failed ({run.returncode}): {run.stderr.strip()}")
    max_rss_kb = int(run.stderr.strip().splitlines()[-1])
    return json.loads(run.stdout), wall, max_rss_kb


def answered(result, gold):
    start, end = gold["chars"]
    for p in result["passages"][:K]:
        if os.path.basename(p["file"]) != gold["file"] or p["section"] != gold["section"]:
            continue
        a, b = p["chars"]
        if min(b, end) - max(a, start) >= (end - start) / 2:
            return True
    return False


def write_json(path, rows):
    if path:
        with open(path + ".partial", "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
        os.replace(path + ".partial", path)


def other_documents(home, files):
    """Files in the library besides the bench's: BM25's term statistics cover the whole index,
    so they change the keyword ranks (and the combined recall) of the bench's questions."""
    db = os.path.join(home, "hearth", "documents.db")
    if not os.path.exists(db):
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        paths = [row[0] for row in conn.execute("SELECT path FROM documents")]
    return sorted(set(paths) - {os.path.abspath(f) for f in files})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hearth", default=os.path.join(ROOT, "target", "release", "hearth"))
    parser.add_argument("--json", help="also write the per-question results here")
    parser.add_argument("--ranking", action="append", choices=RANKINGS,
                        help="measure only this ranking (repeatable; by default all three)")
    parser.add_argument("--rerank-model", action="append", default=[],
                        help="also rank combined's first 20 again with this model (repeatable)")
    parser.add_argument("--only", help="only these question ids, in this order (comma-separated)")
    args = parser.parse_args()
    rankings = args.ranking or RANKINGS
    with open(os.path.join(HERE, "questions.json"), encoding="utf-8") as f:
        spec = json.load(f)
    with open(os.path.join(HERE, "gold.json"), encoding="utf-8") as f:
        gold = json.load(f)
    files = [os.path.join(BENCH, "docs", d["file"]) for d in spec["documents"].values()]
    home = os.path.join(BENCH, "home")
    os.makedirs(home, exist_ok=True)
    env = dict(os.environ, XDG_DATA_HOME=home, HOME=home)
    language = {key: d["language"] for key, d in spec["documents"].items()}

    questions = spec["questions"]
    if args.only:
        by_id = {q["id"]: q for q in questions}
        try:
            questions = [by_id[int(i)] for i in args.only.split(",")]
        except (KeyError, ValueError):
            sys.exit(f"recall: --only takes question ids 1-{len(by_id)} separated by commas, "
                     f"not {args.only!r}")
    # Each reranker is a stage of its own, named after its model.
    stages = [(r, r, None) for r in rankings] + [
        (f"reranked:{os.path.basename(os.path.normpath(m))}", "combined", m)
        for m in args.rerank_model]
    rankings = [name for name, _, _ in stages]
    rows = []
    for name, ranking, model in stages:
        for q in questions:
            result, wall, rss = search(args.hearth, files, q["question"], ranking, env, model)
            rows.append({
                "id": q["id"], "ranking": name, "language": language[q["document"]],
                "paraphrased": q["paraphrased"],
                "answered": answered(result, gold[str(q["id"])]),
                "search_ms": result["timings"]["search_ms"]
                + (result["timings"].get("rerank_ms") or 0.0),
                "index_ms": result["timings"]["index_ms"],
                "wall_s": wall, "max_rss_kb": rss,
            })
            if model:
                print(f"{name} q{q['id']}: {'hit' if rows[-1]['answered'] else 'miss'} "
                      f"{rows[-1]['search_ms'] / 1e3:.1f} s", file=sys.stderr, flush=True)
                # A reranked question takes minutes: what finished is kept if the run is stopped.
                write_json(args.json, rows)

    def recall(selected):
        return sum(r["answered"] for r in selected) / len(selected) if selected else float("nan")

    print(f"recall@{K} over {len(questions)} questions, {len(files)} documents")
    print(f"{'ranking':<10}{'all':>7}{'english':>9}{'chinese':>9}{'verbatim':>10}"
          f"{'paraphr.':>10}{'search ms (median/max)':>25}{'peak RSS MB':>13}")
    for ranking in rankings:
        mine = [r for r in rows if r["ranking"] == ranking]
        ms = [r["search_ms"] for r in mine]
        print(f"{ranking:<10}{recall(mine):>7.2f}"
              f"{recall([r for r in mine if r['language'] == 'en']):>9.2f}"
              f"{recall([r for r in mine if r['language'] == 'zh']):>9.2f}"
              f"{recall([r for r in mine if not r['paraphrased']]):>10.2f}"
              f"{recall([r for r in mine if r['paraphrased']]):>10.2f}"
              f"{statistics.median(ms):>15.1f} / {max(ms):>6.1f}"
              f"{max(r['max_rss_kb'] for r in mine) / 1024:>13.0f}")
    missed = {ranking: [r["id"] for r in rows if r["ranking"] == ranking and not r["answered"]]
              for ranking in rankings}
    for ranking, ids in missed.items():
        print(f"missed by {ranking}: {ids}")
    others = other_documents(home, files)
    if others:
        print(f"warning: the library also holds {len(others)} other file(s) ({', '.join(others)}); "
              "BM25 counts their words too, so these numbers are not the bench's: use an empty "
              "HEARTH_BENCH_DOCS home or remove them")
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
