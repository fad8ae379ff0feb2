"""Turn Rust's own books (HTML shipped with the Rust toolchain docs) into training text.

The books, all MIT OR Apache-2.0: The Rust Programming Language, the Rustonomicon, the Rust
Reference, Rust by Example, the Edition Guide and the Cargo Book.

Writes, into OUT_DIR:
  train.txt      plain prose of the training pages, documents separated by a line "<|endoftext|>"
  heldout.txt    plain prose of the held-out pages (one in 20 of every book), never trained on
  chat.jsonl     chat pairs built programmatically from the training pages: {"messages": [...]}
  chapters.json  which page went where

Nothing is written by hand: every answer is a sentence or paragraph of the books themselves.
Code blocks, listings and figure captions are dropped so the model learns English prose.

Usage: python3 prepare_data.py OUT_DIR [--docs RUST_HTML_DOCS_DIR]
(default docs dir: `rustc --print sysroot`/share/doc/rust/html)
"""

import argparse
import html.parser
import json
import pathlib
import random
import re
import subprocess

SEP = "<|endoftext|>"
# The mdBooks under the docs dir that are used, in this order.
BOOKS = ["book", "nomicon", "reference", "rust-by-example", "edition-guide", "cargo"]
# One page in 20 (by table-of-contents position) is held out for perplexity.
HELDOUT_EVERY = 20
HELDOUT_OFFSET = 10
BLOCKS = {"p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "dt", "dd", "td", "th", "blockquote"}
SKIP = {"pre", "script", "style", "nav", "figure", "svg", "iframe", "table"}


def default_docs_dir() -> pathlib.Path:
    sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True, check=True)
    return pathlib.Path(sysroot.stdout.strip()) / "share" / "doc" / "rust" / "html"


def chapter_files(book: pathlib.Path) -> list[str]:
    """Pages in reading order, from the mdBook table of contents (toc-*.js or toc.html)."""
    tocs = sorted(book.glob("toc*.js")) + sorted(book.glob("toc.html"))
    if not tocs:
        raise SystemExit(f"no table of contents (toc*.js / toc.html) in {book}: is this an mdBook HTML dir?")
    names = re.findall(r'href="([A-Za-z0-9_/-]+\.html)"', tocs[0].read_text(encoding="utf-8"))
    seen, order = set(), []
    for name in names:
        if name not in seen and (book / name).is_file() and name not in ("title-page.html", "print.html"):
            seen.add(name)
            order.append(name)
    return order


class MainText(html.parser.HTMLParser):
    """Collects (kind, text) blocks inside <main>, where kind is 'h1'..'h6' or 'p'."""

    VOID = {"br", "img", "hr", "input", "meta", "link", "wbr", "source", "col", "area"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.in_main = False
        self.stack: list[tuple[str, bool]] = []  # (tag, skipped) of open elements inside <main>
        self.kind = None
        self.buf: list[str] = []
        self.blocks: list[tuple[str, str]] = []

    def skipping(self) -> bool:
        return any(skipped for _, skipped in self.stack)

    def flush(self):
        text = re.sub(r"\s+", " ", "".join(self.buf)).strip()
        if text and self.kind:
            self.blocks.append((self.kind, text))
        self.buf = []

    def handle_starttag(self, tag, attrs):
        if tag == "main":
            self.in_main = True
            return
        if not self.in_main:
            return
        if tag == "br":
            self.buf.append(" ")
        if tag in self.VOID:
            return
        cls = dict(attrs).get("class") or ""
        skipped = tag in SKIP or any(c in cls for c in ("caption", "file-name", "boring"))
        if tag in BLOCKS and not self.skipping() and not skipped:
            self.flush()
            self.kind = tag if re.fullmatch(r"h[1-6]", tag) else "p"
        self.stack.append((tag, skipped))

    def handle_endtag(self, tag):
        if tag == "main":
            self.flush()
            self.in_main = False
            return
        if not self.in_main or tag in self.VOID:
            return
        # Pop up to the matching open tag (tolerates unclosed <p>/<li>).
        for k in range(len(self.stack) - 1, -1, -1):
            if self.stack[k][0] == tag:
                del self.stack[k:]
                break
        if tag in BLOCKS and not self.skipping():
            self.flush()
            self.kind = None

    def handle_data(self, data):
        if self.in_main and not self.skipping() and self.kind:
            self.buf.append(data)


def extract(path: pathlib.Path) -> list[tuple[str, str]]:
    parser = MainText()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    out = []
    for kind, text in parser.blocks:
        text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
        text = text.replace("\u2014", " - ").replace("\u2013", "-").replace("\u00a0", " ")
        text = re.sub(r"\s+", " ", text).strip()
        # Drop listing references and stray one-word fragments.
        if re.match(r"^(Listing|Figure) \d+-\d+|^Filename:", text) or len(text) < 3:
            continue
        out.append((kind, text))
    return out


def page_text(blocks) -> str:
    return "\n\n".join(text for _, text in blocks)


SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in SENTENCE.split(paragraph) if s.strip()]


def first_sentences(paragraph: str, limit: int = 400) -> str:
    out = ""
    for s in sentences(paragraph):
        if out and len(out) + len(s) > limit:
            break
        out = (out + " " + s).strip()
    return out


def trim_answer(text: str) -> str:
    """Drops trailing sentences that introduce a code block ("... as shown here:")."""
    sents = sentences(text)
    while sents and sents[-1].endswith(":"):
        sents.pop()
    return " ".join(sents)


KEEP_CASE = {"Rust", "Cargo", "Unicode", "I/O", "API", "HTTP", "TCP", "UTF-8", "I", "OOP"}


def sentence_case(h: str) -> str:
    """'Ignoring Tests Unless Specifically Requested' -> 'ignoring tests unless specifically requested'."""
    words = []
    for w in h.split():
        plain = w.strip("(),.:;'\"")
        if plain in KEEP_CASE or not plain[:1].isupper() or any(c.isupper() for c in plain[1:]) or "_" in plain:
            words.append(w)
        else:
            words.append(w[0].lower() + w[1:])
    return " ".join(words)


def clean_heading(h: str) -> str:
    h = re.sub(r"^(Chapter|Appendix) [0-9A-Z]+:?\s*", "", h).strip()
    h = re.sub(r"^\d+(\.\d+)*\s+", "", h)
    return h.rstrip("?").strip()


HEADING_QUESTIONS = [
    "Tell me about {h}.",
    "Can you explain {h}?",
    "What should I know about {h}?",
    "Explain {h} in Rust.",
    "{H}?",
]
DEFINITION_QUESTIONS = [
    "What is {x}?",
    "What is {x} in Rust?",
    "What are {x}?",
    "Can you explain what {x} is?",
    "Define {x}.",
    "What does {x} mean in Rust?",
]
# "<term> is/are a/an/the/one ..." at the start of a sentence: a definition written by the book.
DEFINITION = re.compile(r"^(?:An? |The )?([A-Za-z_][\w:<>&' -]{1,40}?) (is|are) (a|an|the|one|how|what|when|used|called) ")


def chat_pairs(pages, rng: random.Random) -> list[dict]:
    pairs = []
    for blocks in pages:
        # Heading -> the paragraph(s) right after it.
        for i, (kind, text) in enumerate(blocks):
            if kind.startswith("h"):
                body = [t for k, t in blocks[i + 1 : i + 4] if k == "p"]
                if not body or len(body[0]) < 80:
                    continue
                h = clean_heading(text)
                if not h or len(h) > 70:
                    continue
                q = rng.choice(HEADING_QUESTIONS)
                hl = sentence_case(h)
                answer = body[0] if len(body[0]) < 700 else first_sentences(body[0], 600)
                if len(body) > 1 and len(answer) + len(body[1]) < 700:
                    answer += " " + body[1]
                answer = trim_answer(answer)
                if len(answer) < 60:
                    continue
                for q in rng.sample(HEADING_QUESTIONS, 2):
                    pairs.append({"question": q.format(h=hl, H=h), "answer": answer})
        # Definition sentences -> "What is X?"
        for kind, text in blocks:
            if kind != "p":
                continue
            sents = sentences(text)
            for j, s in enumerate(sents):
                m = DEFINITION.match(s)
                if not m or len(s) < 40 or len(s) > 400:
                    continue
                term = m.group(1).strip()
                if term.lower() in {"this", "that", "it", "there", "here", "what", "which", "one", "each",
                                    "the", "these", "those", "they", "we", "you", "this code", "this program"}:
                    continue
                if ": " in term or len(term.split()) > 4 or term.lower().startswith(("this ", "that ", "these ", "those ", "our ", "your ", "its ")):
                    continue
                answer = s
                if j + 1 < len(sents) and len(answer) + len(sents[j + 1]) < 500:
                    answer += " " + sents[j + 1]
                answer = trim_answer(answer)
                if len(answer) < 40:
                    continue
                x = term if term[:2].isupper() or "_" in term or "::" in term else term[0].lower() + term[1:]
                for q in rng.sample(DEFINITION_QUESTIONS, 2):
                    pairs.append({"question": q.format(x=x), "answer": answer})
    out = []
    for p in pairs:
        messages = []
        if rng.random() < 0.3:
            messages.append({"role": "system", "content": "You are a helpful assistant."})
        messages.append({"role": "user", "content": p["question"]})
        messages.append({"role": "assistant", "content": p["answer"]})
        out.append({"messages": messages})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=pathlib.Path)
    ap.add_argument("--docs", type=pathlib.Path, default=None, help="the Rust HTML docs directory")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    docs = args.docs or default_docs_dir()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)

    train_pages, heldout_pages, split = [], [], {"train": [], "heldout": []}
    for book in BOOKS:
        for i, name in enumerate(chapter_files(docs / book)):
            blocks = extract(docs / book / name)
            if not blocks:
                continue
            if i % HELDOUT_EVERY == HELDOUT_OFFSET:
                heldout_pages.append(blocks)
                split["heldout"].append(f"{book}/{name}")
            else:
                train_pages.append(blocks)
                split["train"].append(f"{book}/{name}")

    (args.out_dir / "train.txt").write_text(f"\n{SEP}\n".join(page_text(b) for b in train_pages) + "\n", encoding="utf-8")
    (args.out_dir / "heldout.txt").write_text(f"\n{SEP}\n".join(page_text(b) for b in heldout_pages) + "\n", encoding="utf-8")
    pairs = chat_pairs(train_pages, rng)
    with open(args.out_dir / "chat.jsonl", "w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    (args.out_dir / "chapters.json").write_text(json.dumps(split, indent=1) + "\n", encoding="utf-8")
    train_chars = sum(len(page_text(b)) for b in train_pages)
    held_chars = sum(len(page_text(b)) for b in heldout_pages)
    print(f"pages: {len(train_pages)} train ({train_chars} chars), {len(heldout_pages)} held out ({held_chars} chars)")
    print(f"held out: {', '.join(split['heldout'])}")
    print(f"chat pairs: {len(pairs)}")


if __name__ == "__main__":
    main()
