#!/usr/bin/env python3
"""make check-symbols: libkvplan exports its public interface and nothing else.

The public interface is what the headers of include/kvplan declare with
KVP_API (api.h). The archive's exports are `nm -g --defined-only` of it; the
sanitizers' own markers (__asan_*, __odr_asan_*, __ubsan_*) aside. Both ways:
an export no header declares is an internal name leaking; a declaration with
no definition is a stale header line. Exit 1 on either.

usage: tests/symbols.py LIBKVPLAN.a
"""
import glob
import re
import subprocess
import sys

DECL = re.compile(r"\bKVP_API\b[^;{(]*?\b(kvp_\w+)\s*[\(\[]")


def declared():
    names = set()
    for h in sorted(glob.glob("include/kvplan/*.h")):
        text = open(h, encoding="utf-8").read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        names.update(m.group(1) for m in DECL.finditer(text.replace("\n", " ")))
    return names


def exported(lib):
    out = subprocess.run(["nm", "-g", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and not re.match(r"__(odr_)?(asan|ubsan)|__sanitizer", f[2]):
            names.add(f[2])
    return names


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tests/symbols.py LIBKVPLAN.a")
    pub, exp = declared(), exported(sys.argv[1])
    leak, stale = sorted(exp - pub), sorted(pub - exp)
    if leak:
        print(f"check-symbols: {sys.argv[1]} exports {len(leak)} name(s) no header declares with KVP_API:", *leak)
    if stale:
        print(f"check-symbols: include/kvplan declares {len(stale)} name(s) with KVP_API that the library does not define:",
              *stale)
    if leak or stale:
        return 1
    print(f"check-symbols: {sys.argv[1]} exports exactly the {len(pub)} names include/kvplan declares with KVP_API")
    return 0


if __name__ == "__main__":
    sys.exit(main())
