#!/usr/bin/env python3
"""Where each question's answer ranks: the rank (1-50) of the first passage that recall.py would
count as answering it, by keyword and by embeddings, or "-" when it is not in the first 50.
Says how far a question recall@5 misses is from being found. Run after recall.py (it reuses that
library).

  bench/documents/ranks.py [--hearth target/release/hearth]
"""
import argparse
import json
import os

import recall

DEPTH = 50


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hearth", default=os.path.join(recall.ROOT, "target", "release", "hearth"))
    args = parser.parse_args()
    with open(os.path.join(recall.HERE, "questions.json"), encoding="utf-8") as f:
        spec = json.load(f)
    with open(os.path.join(recall.HERE, "gold.json"), encoding="utf-8") as f:
        gold = json.load(f)
    files = [os.path.join(recall.BENCH, "docs", d["file"]) for d in spec["documents"].values()]
    home = os.path.join(recall.BENCH, "home")
    env = dict(os.environ, XDG_DATA_HOME=home, HOME=home)
    recall.K = DEPTH
    print(f"{'id':>3} {'document':<22}{'paraphrased':>12}{'keyword':>9}{'semantic':>10}")
    for q in spec["questions"]:
        ranks = []
        for ranking in ("keyword", "semantic"):
            result, _, _ = recall.search(args.hearth, files, q["question"], ranking, env)
            rank = next((i for i, p in enumerate(result["passages"], 1)
                         if recall.answered({"passages": [p]}, gold[str(q["id"])])), None)
            ranks.append(str(rank) if rank else "-")
        print(f"{q['id']:>3} {q['document']:<22}{'yes' if q['paraphrased'] else 'no':>12}"
              f"{ranks[0]:>9}{ranks[1]:>10}")


if __name__ == "__main__":
    main()
