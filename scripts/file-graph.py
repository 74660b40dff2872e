#!/usr/bin/env python3
"""The file-level import graph of the workspace's crates.

An edge runs from a file to the file that defines the module a `crate::`,
`self::` or `super::` path names (`mod` declarations are not edges). Prints
every circle of files (a strongly connected set of two or more), every
up-import (a file importing from the file of one of its ancestor modules,
a `mod.rs` or the crate root), and, for each crate named with --layers,
every import that goes against the layer order of its top-level modules.

That order is read from the crate's `layers.txt`: one top-level module a
line, lowest first (`#` starts a comment); a module may import only from
modules listed above it, and every top-level module must be listed once.

Exits 1 when there is a circle, an up-import in a crate named with
--no-up-imports, or a layer break; 0 otherwise.

    scripts/file-graph.py [--root DIR] [--no-up-imports cgroup,cli]
                          [--layers supervisor]
"""
import argparse
import os
import re
import sys

PATH = re.compile(r"\b(crate|super(?:::super)*|self)::((?:[A-Za-z_]\w*::)*)"
                  r"(\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}|[A-Za-z_]\w*)")
INLINE_MOD = re.compile(r"\bmod\s+([A-Za-z_]\w*)\s*\{")


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    return [] if rel in (["lib"], ["main"]) else rel


def file_of(src, parts):
    """The file defining the longest prefix of module path `parts`."""
    for i in range(len(parts), -1, -1):
        p = parts[:i]
        if not p:
            for root in ("lib.rs", "main.rs"):
                if os.path.exists(os.path.join(src, root)):
                    return os.path.join(src, root)
            return None
        base = os.path.join(src, *p)
        for f in (base + ".rs", os.path.join(base, "mod.rs")):
            if os.path.exists(f):
                return f
    return None


def inline_spans(text):
    """(start, end, name) of every inline `mod name { ... }` block."""
    spans = []
    for m in INLINE_MOD.finditer(text):
        depth, i = 0, m.end() - 1
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        spans.append((m.end(), i, m.group(1)))
    return spans


def items(group):
    """The paths inside `{a, b::c, d::{e, f}}`, one level of nesting."""
    inner = group[1:-1]
    out = []
    for item in re.split(r",(?![^{]*\})", inner):
        item = item.strip()
        if item:
            out.append(re.split(r"\s+as\s+|::\{", item)[0])
    return out


def edges_of(root, crate):
    src = os.path.join(root, crate, "src")
    edges = {}
    for dirpath, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            me = module_of(src, path)
            text = open(path, encoding="utf-8").read()
            text = re.sub(r"//[^\n]*", "", text)
            spans = inline_spans(text)
            deps = set()
            for m in PATH.finditer(text):
                # `#[cfg(test)] mod tests` and other inline modules nest.
                here = me + [n for s, e, n in spans if s <= m.start() < e]
                head, prefix, last = m.group(1), m.group(2), m.group(3)
                tails = items(last) if last.startswith("{") else [last]
                for tail in tails:
                    rest = [p for p in (prefix + tail).split("::") if p and p != "self"]
                    if head == "crate":
                        parts = rest
                    elif head == "self":
                        parts = here + rest
                    else:
                        up = head.count("super")
                        parts = (here[:-up] if up <= len(here) else []) + rest
                    target = file_of(src, parts)
                    if target and os.path.abspath(target) != os.path.abspath(path):
                        deps.add(os.path.relpath(target, root))
            edges[os.path.relpath(path, root)] = deps
    return edges


def circles(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def read_layers(root, crate):
    """The top-level modules of `crate`, lowest first, from its layers.txt."""
    path = os.path.join(root, crate, "layers.txt")
    order = []
    for line in open(path, encoding="utf-8"):
        name = line.split("#", 1)[0].strip()
        if name:
            order.append(name)
    return order


def top_modules(src):
    """The crate root's modules: `src/x.rs` and `src/x/mod.rs`."""
    out = set()
    for name in os.listdir(src):
        full = os.path.join(src, name)
        if name.endswith(".rs") and name not in ("lib.rs", "main.rs"):
            out.add(name[:-3])
        elif os.path.isfile(os.path.join(full, "mod.rs")):
            out.add(name)
    return out


def layer_breaks(root, crate, edges):
    """Problems with `crate`'s layer order: modules missing from or unknown
    to layers.txt, and imports of a module from one listed below it."""
    src = os.path.join(root, crate, "src")
    order = read_layers(root, crate)
    rank = {m: i for i, m in enumerate(order)}
    out = []
    tops = top_modules(src)
    for m in sorted(set(order) - tops):
        out.append(f"{crate}/layers.txt lists {m}, which is not a module of {crate}")
    for m in sorted(tops - set(order)):
        out.append(f"{crate}/layers.txt does not list the module {m}")
    for m in sorted({m for m in order if order.count(m) > 1}):
        out.append(f"{crate}/layers.txt lists {m} more than once")
    for f, deps in sorted(edges.items()):
        me = module_of(src, os.path.join(root, f))
        for d in sorted(deps):
            dm = module_of(src, os.path.join(root, d))
            if not me or not dm or me[0] == dm[0]:
                continue
            a, b = me[0], dm[0]
            if a in rank and b in rank and rank[b] > rank[a]:
                out.append(f"{f} -> {d}  ({a} may not use {b}, a layer above it)")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=".")
    ap.add_argument("--no-up-imports", default="", help="comma-separated crate folders")
    ap.add_argument("--layers", default="",
                    help="comma-separated crate folders whose layers.txt to enforce")
    args = ap.parse_args()
    root = args.root
    crates = sorted(d for d in os.listdir(root)
                    if os.path.isfile(os.path.join(root, d, "Cargo.toml"))
                    and os.path.isdir(os.path.join(root, d, "src")))
    strict = {c for c in args.no_up_imports.split(",") if c}
    layered = [c for c in args.layers.split(",") if c]
    edges, ups, breaks = {}, [], []
    for crate in sorted(strict | set(layered)):
        if crate not in crates:
            print(f"no crate {crate} under {root}")
            return 1
    for crate in crates:
        ce = edges_of(root, crate)
        edges.update(ce)
        if crate in layered:
            breaks += layer_breaks(root, crate, ce)
        src = os.path.join(root, crate, "src")
        for f, deps in sorted(ce.items()):
            me = module_of(src, os.path.join(root, f))
            for d in sorted(deps):
                dm = module_of(src, os.path.join(root, d))
                if len(dm) < len(me) and me[:len(dm)] == dm:
                    ups.append((crate, f, d))
    found = circles(edges)
    bad = bool(found)
    print(f"circles of files: {len(found)}")
    for comp in found:
        print("  " + " <-> ".join(comp))
    print(f"up-imports: {len(ups)}")
    for crate, f, d in ups:
        mark = "  (not allowed here)" if crate in strict else ""
        bad |= crate in strict
        print(f"  {f} -> {d}{mark}")
    if layered:
        print(f"layer breaks: {len(breaks)}")
        for b in breaks:
            print("  " + b)
        bad |= bool(breaks)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
