#!/usr/bin/env python3
"""make check-includes: the source files of src/ form no cycle, and the
library's layers stand on one another in order.

Two graphs, each over the files of src/ (and include/kvplan/ for the first):
  includes  a.c -> b.h when a.c says #include "b.h" (resolved as the Makefile's
            -I flags resolve it: the file's folder, include/, src/lib/, src/cli/);
  calls     a.c -> b.c when a.c's object uses a symbol b.c's object defines
            (nm of the objects given): how "a helper living in the dispatcher's
            file" shows, since both files include the same header.
Each strongly connected component of more than one file is a cycle; all are
printed with the symbols (or includes) on their edges.

Layers (docs/architecture.md): src/lib/base, model, engine, sim, then report
and src/ref (the decoder) side by side; the programs (src/cli, src/tui,
src/hub) above them all. An edge of either graph from a file to a layer that
its own may not use (LAYERS) is printed too. Each public header belongs to the
layer of its definitions (HEADERS), and a header of include/kvplan missing
from HEADERS is an error. The exit status is 1 when there is any finding.

usage: tests/cycles.py OBJ...   (objects built from src/**.c, under BUILD/)
"""
import os
import re
import subprocess
import sys

INCLUDE_DIRS = ["include", "src/lib", "src/cli"]

# what each layer may use, itself included
LAYERS = {
    "base": {"base"},
    "model": {"base", "model"},
    "engine": {"base", "model", "engine"},
    "sim": {"base", "model", "engine", "sim"},
    "report": {"base", "model", "engine", "sim", "report"},
    "ref": {"base", "model", "engine", "sim", "ref"},
}
HEADERS = {
    "api.h": "base", "error.h": "base", "io.h": "base", "num.h": "base", "render.h": "base",
    "model.h": "model", "format.h": "model", "wquant.h": "model", "gguf.h": "model", "hub.h": "model",
    "catalog.h": "model", "gpu.h": "model",
    "kv.h": "engine", "deploy.h": "engine", "settings.h": "engine", "emit.h": "engine", "log.h": "engine",
    "sim.h": "sim",
    "explain.h": "report", "sizing.h": "report", "chart.h": "report", "plan.h": "report", "explain_log.h": "report",
    "ref.h": "ref", "ref_serve.h": "ref", "ref_cuda.h": "ref",
}


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


def layer(f):
    """The layer of a file, or None for the programs (which may use every layer)."""
    parts = f.split("/")
    if parts[:2] == ["src", "lib"] and len(parts) > 3:
        return parts[2]
    if parts[:2] == ["src", "ref"]:
        return "ref"
    if parts[:2] == ["include", "kvplan"]:
        return HEADERS.get(parts[2], "?")
    return None


def layer_report(name, g):
    n = 0
    for a in sorted(g):
        la = layer(a)
        if la == "?":
            print(f"check-includes: {a} is in no layer (add it to HEADERS in tests/cycles.py)")
            n += 1
            continue
        if la is None:
            continue
        for b in sorted(g[a]):
            lb = layer(b)
            if lb not in (None, "?") and lb not in LAYERS[la]:
                syms = sorted(set(g[a][b]))
                print(f"check-includes: {name} from layer {la} up to {lb}: {a} -> {b}: {' '.join(syms[:4])}")
                n += 1
    return n


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
    inc, call = include_graph(sources()), call_graph(objs)
    n = report("include", inc) + report("call", call)
    up = layer_report("include", inc) + layer_report("call", call)
    if n or up:
        print(f"check-includes: {n} cycle(s) and {up} edge(s) against the layers in src/")
        return 1
    print(f"check-includes: no cycle among the includes of src/ and the calls between its {len(objs)} objects; "
          f"every edge goes down the layers {' < '.join(list(LAYERS)[:4])} < report, ref")
    return 0


if __name__ == "__main__":
    sys.exit(main())
