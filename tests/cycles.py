#!/usr/bin/env python3
"""make check-includes: the source files of src/ form no cycle.

Two graphs, each over the files of src/ (and include/kvplan/ for the first):
  includes  a.c -> b.h when a.c says #include "b.h" (resolved as the Makefile's
            -I flags resolve it: the file's folder, include/, src/lib/, src/cli/);
  calls     a.c -> b.c when a.c's object uses a symbol b.c's object defines
            (nm of the objects given): how "a helper living in the dispatcher's
            file" shows, since both files include the same header.
Each strongly connected component of more than one file is a cycle; all are
printed with the symbols (or includes) on their edges, and the exit status is
1 when there is any.

usage: tests/cycles.py OBJ...   (objects built from src/**.c, under BUILD/)
"""
import os
import re
import subprocess
import sys

INCLUDE_DIRS = ["include", "src/lib", "src/cli"]


def sources():
    out = []
    for top in ("src", "include/kvplan"):
        for d, _, files in os.walk(top):
            out += [os.path.join(d, f) for f in files if f.endswith((".c", ".h"))]
    return sorted(out)


def include_graph(files):
    g = {f: {} for f in files}
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                for base in [os.path.dirname(f)] + INCLUDE_DIRS:
                    p = os.path.normpath(os.path.join(base, m.group(1)))
                    if p in g:
                        g[f][p] = ["#include"]
                        break
    return g


def nm(obj, *flags):
    r = subprocess.run(["nm", *flags, obj], capture_output=True, text=True, check=True)
    return [ln.split() for ln in r.stdout.splitlines() if ln.strip()]


def call_graph(objs):
    """objs: build/rel/src/lib/x.o ...; nodes are the sources src/lib/x.c."""
    def src_of(o):
        i = o.find("src/")
        return o[i:-2] + ".c" if i >= 0 else o

    definer = {}
    for o in objs:
        for f in nm(o, "-g", "--defined-only"):
            if len(f) == 3:
                definer.setdefault(f[2], src_of(o))
    g = {src_of(o): {} for o in objs}
    for o in objs:
        a = src_of(o)
        for f in nm(o, "-u"):
            b = definer.get(f[-1])
            if b and b != a:
                g[a].setdefault(b, []).append(f[-1])
    return g


def cycles(g):
    """Tarjan's strongly connected components of more than one node."""
    index, low, on, stack, out = {}, {}, set(), [], []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g[v]:
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

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def report(name, g):
    found = cycles(g)
    for comp in found:
        print(f"check-includes: {name} cycle among {', '.join(comp)}:")
        for a in comp:
            for b in sorted(g[a]):
                if b in comp:
                    syms = sorted(set(g[a][b]))
                    more = f" (+{len(syms) - 4} more)" if len(syms) > 4 else ""
                    print(f"    {a} -> {b}: {' '.join(syms[:4])}{more}")
    return len(found)


def main():
    objs = [o for o in sys.argv[1:] if "/src/" in o]
    if not objs:
        sys.exit("usage: tests/cycles.py OBJ... (the objects of src/)")
    n = report("include", include_graph(sources())) + report("call", call_graph(objs))
    if n:
        print(f"check-includes: {n} cycle(s) in src/")
        return 1
    print(f"check-includes: no cycle among the includes of src/ and the calls between its {len(objs)} objects")
    return 0


if __name__ == "__main__":
    sys.exit(main())
