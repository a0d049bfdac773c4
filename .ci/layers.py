#!/usr/bin/env python3
"""Checks that the library's top-level modules import each other in one direction only.

For every top-level module of src/ (a file `src/x.rs` or a directory `src/x/`) it collects the
other top-level modules its code names: `crate::x` paths, the items of `use crate::{x, y::z}`
groups, `super::super::x` paths that climb to the crate root, and `crate::Name` where lib.rs
re-exports `Name` from module `x`. Comments, strings, `#[cfg(test)] mod ... { }` blocks and
`tests.rs` files are skipped, and so are src/bin/, lib.rs (the root, which names every module)
and loom_tests.rs. testing.rs (the test hooks' public face) is checked like every module: it may
reach anything, and nothing may import it (the hooks lower modules call live in hooks.rs). It fails, listing them, on
every pair of modules that import each other and on every longer cycle; otherwise it prints the
modules in an order in which each imports only modules before it.

Usage: python3 .ci/layers.py [SRC_DIR]   (default: src)
"""
import collections
import os
import re
import sys

SKIPPED = {"bin", "lib.rs", "loom_tests.rs"}
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# Strings, chars and comments, matched in one pass so that `//` inside a string is no comment.
NOISE = re.compile(r'\br(#*)".*?"\1|b?"(?:\\.|[^"\\])*"|b?\'(?:\\.|[^\'\\])\'|//[^\n]*|/\*.*?\*/', re.S)
TEST_MOD = re.compile(r"#\[cfg\((?![^\]]*not\(test\))[^\]]*\btest\b[^\]]*\)\]\s*mod\s+\w+\s*\{")


def blank(text, keep=""):
    """`keep` and as many line breaks as `text` has, so that line numbers stay right."""
    return keep + "\n" * text.count("\n")


def strip(src):
    """The code without comments, strings and `#[cfg(test)] mod tests { ... }` blocks."""
    src = NOISE.sub(lambda m: blank(m.group(0), "" if m.group(0)[0] == "/" else '""'), src)
    while m := TEST_MOD.search(src):
        depth, i = 1, m.end()
        while depth and i < len(src):
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        src = src[: m.start()] + blank(src[m.start() : i]) + src[i:]
    return src


def group_heads(src, start):
    """First path segment of each item of the `{...}` group opening at `start`."""
    depth, i, items, item = 0, start, [], ""
    while i < len(src):
        c = src[i]
        depth += {"{": 1, "}": -1}.get(c, 0)
        if depth == 0:
            break
        if depth == 1 and c == ",":
            items.append(item)
            item = ""
        elif not (depth == 1 and c == "{"):
            item += c
        i += 1
    items.append(item)
    return [m.group(0) for it in items if (m := re.match(IDENT, it.strip()))]


def names_at_root(src, depth):
    """(identifier, line) for each name `src` reaches right below the crate root; `depth` is the
    file's module depth (src/a.rs: 1, src/a/b.rs: 2), which `super::` climbs."""
    for m in re.finditer(r"\b(crate::|(?:super::)+)\s*(\{|" + IDENT + ")", src):
        if m.group(1) != "crate::" and m.group(1).count("super") < depth:
            continue  # stays inside the module
        line = src.count("\n", 0, m.start()) + 1
        for name in group_heads(src, m.start(2)) if m.group(2) == "{" else [m.group(2)]:
            yield name, line


def main(root):
    tops = {e[:-3] if e.endswith(".rs") else e for e in os.listdir(root) if e not in SKIPPED}
    # `crate::Name` for a name lib.rs re-exports from module `x` means `x`.
    reexports = {}
    lib = strip(open(os.path.join(root, "lib.rs")).read())
    for m in re.finditer(r"pub\s+use\s+(" + IDENT + r")::([^;]*);", lib):
        items = m.group(2).split("{")[-1].strip("} \n").split(",")
        for item in filter(None, (i.strip() for i in items)):
            reexports.setdefault(re.split(r"::|\s+as\s+", item)[-1].strip(), m.group(1))
    edges = collections.defaultdict(dict)  # module -> {imported module: "file:line"}
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        parts = [] if rel == "." else rel.split(os.sep)
        if parts and parts[0] in SKIPPED:
            continue
        for f in sorted(files):
            if not f.endswith(".rs") or f == "tests.rs" or (not parts and f in SKIPPED):
                continue
            path = os.path.join(d, f)
            module = parts + ([] if f == "mod.rs" else [f[:-3]])
            src = strip(open(path, errors="replace").read())
            for name, line in names_at_root(src, len(module)):
                target = name if name in tops else reexports.get(name)
                if target and target != module[0] and target not in edges[module[0]]:
                    edges[module[0]][target] = f"{os.path.relpath(path, root)}:{line}"
    problems = []
    for a in sorted(edges):
        for b in sorted(edges[a]):
            if a < b and a in edges.get(b, {}):
                problems.append(f"{a} <-> {b}: {edges[a][b]} names {b}, {edges[b][a]} names {a}")
    for scc in strongly_connected(tops, edges):
        if len(scc) > 2:
            problems.append("cycle through " + ", ".join(sorted(scc)))
    if problems:
        print("modules of src/ that import each other (imports must run down the layers):")
        print("\n".join("  " + p for p in problems))
        return 1
    order, placed = [], set()
    while len(order) < len(tops):  # no cycles, so some module always has all its imports placed
        ready = sorted(m for m in tops - placed if set(edges.get(m, {})) <= placed)
        order += ready
        placed |= set(ready)
    print(f"ok: {len(tops)} top-level modules, no import cycles; bottom to top:")
    print("  " + " ".join(order))
    return 0


def strongly_connected(nodes, edges):
    """Tarjan's strongly connected components of the graph."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = {stack.pop()}
            while v not in scc:
                scc.add(stack.pop())
            on.difference_update(scc)
            out.append(scc)

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "src"))
