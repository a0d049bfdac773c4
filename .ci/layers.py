#!/usr/bin/env python3
"""Checks that the library's top-level modules import each other in one direction only.

For every top-level module of src/ (a file `src/x.rs` or a directory `src/x/`) it collects the
other top-level modules its code names: `crate::x` paths, the items of `use crate::{x, y::z}`
groups, `super::super::x` paths that climb to the crate root, and `crate::Name` where lib.rs
re-exports `Name` from module `x`. A folder in GROUPS (`shm/`, the shared-memory backend) is
checked by its parts: each child is a module of its own, `shm::ring`, `shm::layout`... Comments,
strings, `#[cfg(test)] mod ... { }` blocks and
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


# Folders that group a layer's parts (a backend): their children are checked as modules of
# their own, named `folder::child`, so that the parts of one backend may sit on either side of
# another module (the shared-memory layout below the waits, its ring and channel above them).
GROUPS = {"shm"}


def path_heads(src, i, base):
    """The paths that start at `src[i]` (after `crate::` or a `super::` chain), each as its
    first two segments below the crate root, given the `base` segments the chain stands for:
    `a::b::c` gives one, `a::{b, c::d}` one per item of the group."""
    segs = list(base)
    while True:
        m = re.compile(r"\s*(" + IDENT + r"|\{)").match(src, i)
        if not m:
            break
        if m.group(1) == "{":
            depth, j, item_start, out = 0, m.end(1) - 1, m.end(1), []
            while j < len(src):
                c = src[j]
                depth += {"{": 1, "}": -1}.get(c, 0)
                if depth == 0 or (depth == 1 and c == ","):
                    out += path_heads(src, item_start, segs) if src[item_start:j].strip() else []
                    item_start = j + 1
                    if depth == 0:
                        break
                j += 1
            return out
        segs.append(m.group(1))
        if len(segs) >= 2:
            break
        n = re.compile(r"\s*::").match(src, m.end())
        if not n:
            break
        i = n.end()
    return [segs[:2]] if segs else []


def names_at_root(src, module):
    """(unit, line) for each module of the crate `src` names: `crate::` paths, and `super::`
    chains that climb out of the file's `module` (its path: src/a.rs is ["a"], src/a/b.rs
    ["a", "b"]). A unit is a top-level module, or `group::child` inside a group."""
    for m in re.finditer(r"\b(crate|super)((?:\s*::\s*super)*)\s*::", src):
        if m.group(1) == "crate":
            base = []
        else:
            up = 1 + m.group(2).count("super")
            if up > len(module):
                continue
            base = module[: len(module) - up]
            if base and not (base[0] in GROUPS and len(base) == 1):
                continue  # stays inside a top-level module (or a group's part)
        line = src.count("\n", 0, m.start()) + 1
        for segs in path_heads(src, m.end(), base):
            if segs[0] in GROUPS and len(segs) > 1:
                yield f"{segs[0]}::{segs[1]}", line
            else:
                yield segs[0], line


def main(root):
    tops = {e[:-3] if e.endswith(".rs") else e for e in os.listdir(root) if e not in SKIPPED}
    for group in GROUPS & tops:
        tops.remove(group)
        tops |= {f"{group}::{e[:-3] if e.endswith('.rs') else e}"
                 for e in os.listdir(os.path.join(root, group)) if e != "mod.rs"}
    # `crate::Name` for a name lib.rs re-exports from module `x` means `x`.
    reexports = {}
    lib = strip(open(os.path.join(root, "lib.rs")).read())
    for m in re.finditer(r"pub\s+use\s+(" + IDENT + r")::([^;]*);", lib):
        heads = path_heads(lib, m.start(1), [])
        for segs in heads:
            unit = "::".join(segs) if segs[0] in GROUPS else segs[0]
            if len(heads) > 1:  # `pub use group::{a, b}`: each item is a part of its own
                reexports.setdefault(segs[-1], unit)
                continue
            for item in re.findall(IDENT + r"(?=\s*(?:,|\}|$))", m.group(2)):
                reexports.setdefault(item, unit)
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
            if not module or (module[0] in GROUPS and len(module) == 1):
                continue  # a group's mod.rs only declares its parts
            unit = f"{module[0]}::{module[1]}" if module[0] in GROUPS else module[0]
            src = strip(open(path, errors="replace").read())
            for name, line in names_at_root(src, module):
                target = name if name in tops else reexports.get(name)
                if target and target != unit and target not in edges[unit]:
                    edges[unit][target] = f"{os.path.relpath(path, root)}:{line}"
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
        ready = sorted(m for m in tops - placed if set(edges.get(m, {})) & tops <= placed)
        order += ready
        placed |= set(ready)
    print(f"ok: {len(tops)} modules, no import cycles; bottom to top:")
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
