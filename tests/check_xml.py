#!/usr/bin/env python3
"""Checks that kvplan's HTML and SVG are well-formed XML, with a real parser.

Parses the golden HTML/SVG (tests/data/golden/table/), the committed charts
(docs/charts/*.svg), and fresh output of `kvplan table --format html` and
`kvplan plot` from $KVPLAN_BIN. Each SVG must also be an <svg> root in the SVG
namespace with a title, axis titles and at least one polyline.
Run from the repository root: python3 tests/check_xml.py
"""
import glob
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
failures = 0


def fail(what, why):
    global failures
    failures += 1
    print(f"FAIL {what}: {why}")


def check_svg(path):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        return fail(path, f"not well-formed: {e}")
    if root.tag != SVG + "svg":
        return fail(path, f"root is {root.tag}, not svg")
    texts = ["".join(t.itertext()) for t in root.iter(SVG + "text")]
    if not any("context (tokens" in t for t in texts):
        fail(path, "no x-axis title")
    if not any("memory:" in t for t in texts):
        fail(path, "no y-axis title")
    if not list(root.iter(SVG + "polyline")):
        fail(path, "no data line")


def check_html(path):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        return fail(path, f"not well-formed: {e}")
    if root.tag != "html" or not list(root.iter("table")):
        fail(path, "no <html> root with a <table>")
    for table in root.iter("table"):
        width = len(table.find("thead/tr"))
        for tr in table.iter("tr"):
            if len(tr) != width:
                fail(path, f"a row of {len(tr)} cells in a table of {width} columns")


def main():
    files = sorted(glob.glob("tests/data/golden/table/*.svg")) + sorted(glob.glob("docs/charts/*.svg"))
    if not files:
        fail("tests/data/golden/table", "no SVG files found")
    for f in files:
        check_svg(f)
    for f in sorted(glob.glob("tests/data/golden/table/*.html")):
        check_html(f)
    binary = os.environ.get("KVPLAN_BIN", "build/rel/kvplan")
    env = dict(os.environ, KVPLAN_DATADIR="models")
    with tempfile.TemporaryDirectory() as tmp:
        html = os.path.join(tmp, "t.html")
        with open(html, "wb") as out:
            r = subprocess.run([binary, "table", "llama-3.1-8b", "gemma-3-27b", "--gpu", "h100", "--batches", "1,16",
                                "--format", "html"], stdout=out, env=env)
        if r.returncode != 0:
            fail("kvplan table --format html", f"exit {r.returncode}")
        else:
            check_html(html)
        svg = os.path.join(tmp, "p.svg")
        r = subprocess.run([binary, "plot", "llama-3.1-8b", "jamba-v0.1", "--kv-dtypes", "bf16,fp8", "--gpu", "h100",
                            "--svg", svg], env=env)
        if r.returncode != 0:
            fail("kvplan plot", f"exit {r.returncode}")
        else:
            check_svg(svg)
        leftovers = [f for f in os.listdir(tmp) if ".tmp." in f]
        if leftovers:
            fail("kvplan plot", f"temporary files left: {leftovers}")
    n = len(files) + len(glob.glob("tests/data/golden/table/*.html")) + 2
    print(f"xml: {n - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
