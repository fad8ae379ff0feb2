#!/usr/bin/env python3
"""How to fuse keyword and semantic rankings, measured: takes each question's first 50 passages
by keyword and by embeddings (hearth search --json --limit 50) and computes recall@5 of several
fusion rules over them, so that the rule `hearth search --ranking combined` uses is chosen by
numbers, not by habit. Run after recall.py (it reuses that library).

  bench/documents/fusion.py [--hearth target/release/hearth]
"""
import argparse
import json
import os

import recall

DEPTH = 50


def fused(keyword, semantic, rule):
    """Passage keys in fused order. `keyword`, `semantic`: lists of passage keys, best first."""
    kind, a, b = rule
    scores = {}
    if kind == "rrf":  # weighted reciprocal rank fusion: w / (k + rank)
        k, w_sem = a, b
        for rank, key in enumerate(keyword, 1):
            scores[key] = scores.get(key, 0) + 1 / (k + rank)
        for rank, key in enumerate(semantic, 1):
            scores[key] = scores.get(key, 0) + w_sem / (k + rank)
        return sorted(scores, key=lambda key: -scores[key])
    if kind == "take":  # the first `a` of semantic, then keyword's, then the rest of semantic
        out = []
        for key in semantic[:a] + keyword + semantic[a:]:
            if key not in out:
                out.append(key)
        return out
    raise ValueError(kind)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hearth", default=os.path.join(recall.ROOT, "target", "release", "hearth"))
    args = parser.parse_args()
    here = recall.HERE
    with open(os.path.join(here, "questions.json"), encoding="utf-8") as f:
        spec = json.load(f)
    with open(os.path.join(here, "gold.json"), encoding="utf-8") as f:
        gold = json.load(f)
    files = [os.path.join(recall.BENCH, "docs", d["file"]) for d in spec["documents"].values()]
    home = os.path.join(recall.BENCH, "home")
    env = dict(os.environ, XDG_DATA_HOME=home, HOME=home)
    lists = []
    for q in spec["questions"]:
        per = {}
        for ranking in ("keyword", "semantic"):
            command_k = recall.K
            recall.K = DEPTH
            result, _, _ = recall.search(args.hearth, files, q["question"], ranking, env)
            recall.K = command_k
            per[ranking] = result["passages"]
        lists.append((q, per))

    def key(p):
        return (os.path.basename(p["file"]), p["section"], p["chars"][0], p["chars"][1])

    rules = [("rrf", 60, 1.0), ("rrf", 60, 1.5), ("rrf", 60, 2.0), ("rrf", 60, 3.0),
             ("rrf", 10, 1.0), ("rrf", 10, 2.0), ("rrf", 5, 2.0), ("take", 3, 0), ("take", 4, 0)]
    print(f"recall@5 by fusion rule over {len(lists)} questions")
    for rule in rules:
        hit = 0
        for q, per in lists:
            passages = {key(p): p for p in per["keyword"] + per["semantic"]}
            order = fused([key(p) for p in per["keyword"]], [key(p) for p in per["semantic"]], rule)
            top = {"passages": [passages[k] for k in order[:recall.K]]}
            hit += recall.answered(top, gold[str(q["id"])])
        print(f"  {rule}: {hit / len(lists):.2f}")


if __name__ == "__main__":
    main()
