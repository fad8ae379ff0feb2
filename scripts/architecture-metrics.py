#!/usr/bin/env python3
# Usage: python3 scripts/architecture-metrics.py [ROOT] [--json]  (ROOT defaults to this checkout)
"""Architecture figures of a Hearth tree, the ones issue 47 asks to count before and after.

Standard library only. Prints a plain table, or with `--json` one JSON object, of:

1. modules: the non-test `.rs` files under `crates/*/src` and `src-tauri/src`, per crate and in
   total. A file is a test file when it is named `tests.rs`, sits under a `tests/` folder, or is
   declared by a `#[cfg(test)] mod name;`.
2. crate uses: for each workspace crate (`crates/*`, `src-tauri`), the other workspace crates its
   `Cargo.toml` lists as normal dependencies (`[dependencies]` and `[target.*.dependencies]`),
   and, separately, the ones its non-test source names (`hearth_x::…` paths).
3. import cycles inside crates: the strongly connected components (Tarjan) of more than one module
   in each crate's graph module -> module. The rule that draws an edge from module file A to B:
   - A's non-test code (code under any `#[cfg(test)]` attribute is left out) holds a path that
     starts with `crate::`, `super::` or `self::`, in a `use` tree or anywhere in the code;
   - the path is walked down the module files as far as they go (a path into a submodule uses
     that submodule's file); the name after the last module is then looked up in that module: an
     item defined there (fn, struct, enum, trait, type, const, static, macro, inline mod) makes
     the module the target; a name the module only imports (`use`, `pub use`, also bare relative
     re-exports like `pub use app::App;` in lib.rs) is followed to where it comes from. So a child
     using its parent through `super::` counts when it names an item the parent defines, and
     `crate::App` counts as a use of the file that defines `App`, not of lib.rs;
   - a parent declaring `mod child;` is not a use, nor is a bare path such as `child::f()`;
   - a path that resolves to A itself, or to a file that is not a module, draws no edge.
   This rule finds, on the tree before issue 47 (commit a122592), the six cycles its review
   listed.
4. files over 1,000 lines: non-test `.rs` files anywhere in the tree, outside the CPU kernels
   (`crates/engine/src/cpu/`), with their line counts.
5. IPC round trips of a first message: not measured here. When `ui/src/lib/first-message.test.ts`
   exists, that vitest test is run with `HEARTH_PRINT_IPC_COUNT=1` and its line
   `first message IPC round trips: N` is read; otherwise the figure is "not measured".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

KERNELS = Path("crates/engine/src/cpu")
IPC_TEST = Path("ui/src/lib/first-message.test.ts")
IPC_LINE = re.compile(r"first message IPC round trips:\s*(\d+)")
SKIP_DIRS = {"target", "node_modules", ".git"}
ITEM_KEYWORDS = {"fn", "struct", "enum", "union", "trait", "type", "const", "static", "mod"}
PATH_ROOTS = {"crate", "super", "self"}


# --- Rust lexing: identifiers and punctuation, with comments, strings and chars dropped ---------

TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*)
  | (?P<raw_string>(?:br|cr|r)(?P<hashes>\#*)")
  | (?P<string>(?:b|c)?"(?:\\.|[^"\\])*")
  | (?P<char>b?'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])')
  | (?P<lifetime>'[A-Za-z_][A-Za-z0-9_]*)
  | (?P<ident>(?:r\#)?[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>[0-9][0-9A-Za-z_.]*)
  | (?P<path_sep>::)
  | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def tokens(text: str) -> list[str]:
    """The identifiers and punctuation of Rust source, `::` as one token."""
    out: list[str] = []
    i = 0
    while i < len(text):
        m = TOKEN.match(text, i)
        kind = m.lastgroup
        if m.group("raw_string"):
            end = text.find('"' + m.group("hashes"), m.end())
            i = len(text) if end < 0 else end + 1 + len(m.group("hashes"))
            continue
        if kind == "block_comment":
            depth, j = 1, m.end()
            while depth and j < len(text):
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            i = j
            continue
        i = m.end()
        if kind in ("ident", "path_sep", "punct"):
            out.append(m.group(kind).removeprefix("r#"))
    return out


def is_test_attribute(toks: list[str], i: int) -> tuple[bool, int]:
    """Whether `#[...]` starting at toks[i] is a cfg that holds only under test; and its end."""
    depth, j = 0, i + 1
    while j < len(toks):
        depth += {"[": 1, "]": -1}.get(toks[j], 0)
        j += 1
        if depth == 0:
            break
    body = toks[i + 2 : j - 1]
    return (body[:1] == ["cfg"] and "test" in body and "not" not in body), j


def item_end(toks: list[str], i: int) -> int:
    """The index after the item starting at toks[i]: past its `;` or its first `{…}` block."""
    depth = 0
    while i < len(toks):
        t = toks[i]
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        elif t == ";" and depth == 0:
            return i + 1
        elif t == "{" and depth == 0:
            braces = 0
            while i < len(toks):
                braces += {"{": 1, "}": -1}.get(toks[i], 0)
                i += 1
                if braces == 0:
                    return i
        i += 1
    return i


def strip_test_code(toks: list[str]) -> tuple[list[str], list[str]]:
    """The tokens without items under `#[cfg(test)]`, and the names of `#[cfg(test)] mod x;`."""
    kept: list[str] = []
    test_mod_files: list[str] = []
    i = 0
    while i < len(toks):
        if toks[i] == "#" and i + 1 < len(toks) and toks[i + 1] == "[":
            test, j = is_test_attribute(toks, i)
            if test:
                while j + 1 < len(toks) and toks[j] == "#" and toks[j + 1] == "[":
                    _, j = is_test_attribute(toks, j)
                end = item_end(toks, j)
                item = toks[j:end]
                if "mod" in item and item[-1] == ";":
                    test_mod_files.append(item[item.index("mod") + 1])
                i = end
                continue
        kept.append(toks[i])
        i += 1
    return kept, test_mod_files


# --- Module files of a crate ---------------------------------------------------------------------


def module_path(src: Path, file: Path) -> tuple[str, ...]:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
        parts.pop()
    return tuple(parts)


class Module:
    """One module file: its path in the crate, its non-test tokens, what it defines and imports."""

    def __init__(self, src: Path, file: Path, toks: list[str]):
        self.file = file
        self.path = module_path(src, file)
        self.toks = toks
        self.defined: set[str] = set()
        self.imports: dict[str, list[str]] = {}  # local name -> path as written
        self.globs: list[list[str]] = []
        self.paths: list[tuple[tuple[str, ...], list[str]]] = []  # (inline mod scope, path)
        self._read()

    def _read(self) -> None:
        toks, i, depth = self.toks, 0, 0
        inline: list[tuple[str, int]] = []  # inline mods open, with the brace depth inside them
        while i < len(toks):
            t = toks[i]
            scope = self.path + tuple(name for name, _ in inline)
            if t == "{":
                depth += 1
            elif t == "}":
                depth -= 1
                if inline and inline[-1][1] > depth:
                    inline.pop()
            elif t == "use" and (i == 0 or toks[i - 1] != "::"):
                end = toks.index(";", i) if ";" in toks[i:] else len(toks)
                for path, alias, glob in use_tree(toks[i + 1 : end]):
                    if depth == 0:
                        if glob:
                            self.globs.append(path)
                        elif alias != "_":
                            self.imports[alias or path[-1]] = path
                    self.paths.append((scope, path))
                i = end
                continue
            elif t in ITEM_KEYWORDS and i + 1 < len(toks) and is_name(toks[i + 1]):
                if depth == 0 and not (t == "const" and toks[i + 1] == "fn"):
                    self.defined.add(toks[i + 1])
                if t == "mod" and i + 2 < len(toks) and toks[i + 2] == "{":
                    inline.append((toks[i + 1], depth + 1))
            elif t == "macro_rules" and depth == 0 and i + 2 < len(toks):
                self.defined.add(toks[i + 2])
            elif t in PATH_ROOTS and i + 1 < len(toks) and toks[i + 1] == "::":
                if i == 0 or toks[i - 1] not in ("::", "in"):
                    path, j = [t], i + 1
                    while j + 1 < len(toks) and toks[j] == "::" and is_name(toks[j + 1]):
                        path.append(toks[j + 1])
                        j += 2
                    self.paths.append((scope, path))
                    i = j
                    continue
            i += 1


def is_name(tok: str) -> bool:
    return tok[:1].isalpha() or tok[:1] == "_"


def use_tree(toks: list[str]) -> list[tuple[list[str], str | None, bool]]:
    """The paths of a `use` tree: (segments, `as` name, whether it ends in `*`)."""
    out: list[tuple[list[str], str | None, bool]] = []

    def tree(i: int, prefix: list[str]) -> int:
        path = list(prefix)
        while i < len(toks):
            t = toks[i]
            if t == "::":
                i += 1
            elif t == "*":
                out.append((path, None, True))
                return i + 1
            elif t == "{":
                i += 1
                while i < len(toks) and toks[i] != "}":
                    i = tree(i, path)
                    if i < len(toks) and toks[i] == ",":
                        i += 1
                return i + 1
            elif is_name(t) and t != "as":
                if t == "self" and path and path != ["self"]:
                    i += 1  # `a::{self, …}` names `a` itself
                    continue
                path.append(t)
                i += 1
            else:
                break
        alias = None
        if i + 1 < len(toks) and toks[i] == "as":
            alias, i = toks[i + 1], i + 2
        if path:
            out.append((path, alias, False))
        return i

    start = 1 if toks[:1] == ["::"] else 0
    tree(start, [])
    return out


class Crate:
    """A workspace crate: its name, Cargo.toml, and non-test module files."""

    def __init__(self, root: Path, directory: Path):
        manifest = tomllib.loads((directory / "Cargo.toml").read_text())
        self.dir = directory
        self.name = "src-tauri" if directory.name == "src-tauri" else directory.name
        self.package = manifest["package"]["name"]
        self.lib = manifest.get("lib", {}).get("name", self.package.replace("-", "_"))
        self.deps = dependency_packages(manifest)
        self.rel = directory.relative_to(root)
        src = directory / "src"
        files = sorted(src.rglob("*.rs")) if src.is_dir() else []
        parsed: dict[Path, tuple[list[str], list[str]]] = {}
        for f in files:
            parsed[f] = strip_test_code(tokens(f.read_text(errors="replace")))
        test_files = {f for f in files if is_test_file(f.relative_to(src))}
        for f, (_, test_mods) in parsed.items():
            here = f.parent if f.name in ("mod.rs", "lib.rs", "main.rs") else f.with_suffix("")
            for name in test_mods:
                test_files |= {here / f"{name}.rs", here / name / "mod.rs"}
        test_dirs = {f.parent for f in test_files if f.name == "mod.rs"}
        self.modules = [
            Module(src, f, parsed[f][0])
            for f in files
            if f not in test_files and not any(d in f.parents for d in test_dirs)
        ]
        self.by_path = {m.path: m for m in self.modules if m.file.name != "main.rs"}
        if () not in self.by_path:
            self.by_path.update({m.path: m for m in self.modules if m.file.name == "main.rs"})

    def resolve(self, scope: tuple[str, ...], path: list[str], seen: int = 0) -> Module | None:
        """The module file a path written in module `scope` leads to (the rule in the doc)."""
        head, rest = path[0], list(path[1:])
        if head == "crate":
            base: list[str] = []
        elif head in ("self", "super"):
            base = list(scope)
            if head == "super":
                base = base[:-1]
            while rest[:1] == ["super"]:
                base, rest = base[:-1], rest[1:]
        elif (*scope, head) in self.by_path:
            base, rest = [*scope, head], rest
        else:
            return None
        while rest and (*base, rest[0]) in self.by_path:
            base.append(rest.pop(0))
        # Inline modules have no file of their own: step up to the file that holds them.
        while tuple(base) not in self.by_path and base:
            base.pop()
        module = self.by_path.get(tuple(base))
        if module is None or not rest or seen > 8 or rest[0] in module.defined:
            return module
        if rest[0] in module.imports:
            found = self.resolve(module.path, module.imports[rest[0]] + rest[1:], seen + 1)
            return found or module
        for glob in module.globs:
            found = self.resolve(module.path, glob + rest, seen + 1)
            if found is not None and found is not module and rest[0] in found.defined:
                return found
        return module

    def edges(self) -> dict[Module, set[Module]]:
        graph: dict[Module, set[Module]] = {m: set() for m in self.modules}
        for m in self.modules:
            for scope, path in m.paths:
                if path[0] not in PATH_ROOTS:
                    continue
                target = self.resolve(scope, path)
                if target is not None and target is not m:
                    graph[m].add(target)
        return graph

    def named_crates(self, libs: dict[str, str]) -> set[str]:
        named = set()
        for m in self.modules:
            toks = m.toks
            for i, t in enumerate(toks[:-1]):
                if t in libs and libs[t] != self.name and toks[i + 1] == "::":
                    if i < 2 or toks[i - 1] != "::" or not is_name(toks[i - 2]):
                        named.add(libs[t])
        return named


def is_test_file(rel: Path) -> bool:
    return rel.name == "tests.rs" or "tests" in rel.parts[:-1]


def dependency_packages(manifest: dict) -> set[str]:
    """Package names of the normal dependencies (including target-specific ones)."""
    tables = [manifest.get("dependencies", {})]
    tables += [t.get("dependencies", {}) for t in manifest.get("target", {}).values()]
    return {
        (spec.get("package", name) if isinstance(spec, dict) else name)
        for table in tables
        for name, spec in table.items()
    }


def tarjan(graph: dict[Module, set[Module]]) -> list[list[Module]]:
    index: dict[Module, int] = {}
    low: dict[Module, int] = {}
    stack: list[Module] = []
    on_stack: set[Module] = set()
    components: list[list[Module]] = []

    def visit(v: Module) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v], key=lambda m: m.file):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w is v:
                    break
            components.append(component)

    sys.setrecursionlimit(10_000)
    for v in sorted(graph, key=lambda m: m.file):
        if v not in index:
            visit(v)
    return [c for c in components if len(c) > 1]


# --- The figures ---------------------------------------------------------------------------------


def workspace_crates(root: Path) -> list[Crate]:
    dirs = sorted(p.parent for p in (root / "crates").glob("*/Cargo.toml"))
    if (root / "src-tauri" / "Cargo.toml").is_file():
        dirs.append(root / "src-tauri")
    return [Crate(root, d) for d in dirs]


def long_files(root: Path, crates: list[Crate]) -> list[dict]:
    test_files = set()
    for crate in crates:
        module_files = {m.file for m in crate.modules}
        test_files |= {f for f in (crate.dir / "src").rglob("*.rs") if f not in module_files}
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and d != "tests")
        for name in filenames:
            f = Path(dirpath) / name
            rel = f.relative_to(root)
            if name.endswith(".rs") and name != "tests.rs" and f not in test_files:
                if KERNELS in rel.parents:
                    continue
                lines = len(f.read_text(errors="replace").splitlines())
                if lines > 1000:
                    out.append({"file": rel.as_posix(), "lines": lines})
    return sorted(out, key=lambda x: -x["lines"])


def first_message_ipc(root: Path) -> dict:
    if not (root / IPC_TEST).is_file():
        return {"round_trips": None, "note": "not measured"}
    command = ["npx", "vitest", "run", "--config", "ui/vite.config.ts", IPC_TEST.as_posix()]
    env = dict(os.environ, HEARTH_PRINT_IPC_COUNT="1")
    try:
        run = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    except OSError as e:
        return {"round_trips": None, "note": f"not measured: could not run npx ({e})"}
    found = IPC_LINE.search(run.stdout + run.stderr)
    if found is None:
        note = f"not measured: {IPC_TEST} printed no count (exit {run.returncode}); run it by hand"
        return {"round_trips": None, "note": note}
    return {"round_trips": int(found.group(1)), "note": ""}


def measure(root: Path) -> dict:
    crates = workspace_crates(root)
    libs = {c.lib: c.name for c in crates}
    packages = {c.package: c.name for c in crates}
    uses, cycles = {}, []
    for c in crates:
        declared = sorted(packages[p] for p in c.deps if p in packages and packages[p] != c.name)
        uses[c.name] = {"cargo": declared, "source": sorted(c.named_crates(libs))}
        for component in tarjan(c.edges()):
            files = sorted(m.file.relative_to(c.dir / "src").as_posix() for m in component)
            cycles.append({"crate": c.name, "files": files})
    return {
        "root": root.name,
        "modules": {
            "per_crate": {c.name: len(c.modules) for c in crates},
            "total": sum(len(c.modules) for c in crates),
        },
        "crate_uses": {
            "per_crate": uses,
            "cargo_edges": sum(len(u["cargo"]) for u in uses.values()),
            "source_edges": sum(len(u["source"]) for u in uses.values()),
        },
        "import_cycles": {"count": len(cycles), "cycles": cycles},
        "files_over_1000_lines": long_files(root, crates),
        "first_message_ipc": first_message_ipc(root),
    }


def table(m: dict) -> str:
    lines = [f"modules: {m['modules']['total']}"]
    for name, n in m["modules"]["per_crate"].items():
        lines.append(f"  {name:<12} {n}")
    u = m["crate_uses"]
    lines.append(
        f"crate-to-crate uses: {u['cargo_edges']} in Cargo.toml, "
        f"{u['source_edges']} named in source"
    )
    for name, deps in u["per_crate"].items():
        cargo = ", ".join(deps["cargo"]) or "-"
        source = "same" if deps["source"] == deps["cargo"] else ", ".join(deps["source"]) or "-"
        lines.append(f"  {name:<12} {cargo}  (source: {source})")
    cycles = m["import_cycles"]
    lines.append(f"import cycles inside crates: {cycles['count']}")
    for c in cycles["cycles"]:
        lines.append(f"  {c['crate']:<12} {', '.join(c['files'])}")
    long = m["files_over_1000_lines"]
    lines.append(f"files over 1,000 lines (outside {KERNELS.as_posix()}/): {len(long)}")
    for f in long:
        lines.append(f"  {f['lines']:>6}  {f['file']}")
    ipc = m["first_message_ipc"]
    trips = ipc["round_trips"] if ipc["round_trips"] is not None else ipc["note"]
    lines.append(f"IPC round trips of a first message: {trips}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = Path(__file__).resolve().parent.parent
    parser.add_argument("root", nargs="?", default=here, type=Path, help="a Hearth checkout")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    root = args.root.resolve()
    if not (root / "Cargo.toml").is_file():
        message = f"architecture-metrics: no Cargo.toml in {root}; pass a Hearth checkout"
        print(message, file=sys.stderr)
        return 2
    figures = measure(root)
    print(json.dumps(figures, indent=2) if args.json else table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
