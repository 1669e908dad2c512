#!/usr/bin/env python3
"""plan_cli.py -- `kvplan check` end to end: exit codes, the JSON report read
by a real JSON parser, the JUnit report read by a real XML parser and checked
against the JUnit structure CI systems read, baselines both ways, and atomic
report writes. Run from the source tree: KVPLAN_BIN=build/rel/kvplan python3 tests/plan_cli.py"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

BIN = os.environ.get("KVPLAN_BIN", "build/rel/kvplan")
EXAMPLE = "docs/examples/llama-3.1-70b-fp8-4xh100.yaml"
failures = 0
passes = 0


def run(*args):
    env = dict(os.environ, KVPLAN_DATADIR="models")
    p = subprocess.run([BIN, "check", *args], capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr


def expect(cond, what):
    global failures, passes
    if cond:
        passes += 1
    else:
        failures += 1
        print("FAIL plan_cli: " + what)


def plan(tmp, name, asserts, util=None):
    text = open(EXAMPLE).read()
    head = text[: text.index("    assert:")]
    if util:
        head += "    util: %s\n" % util
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(head + "    assert:\n" + asserts)
    return path


def check_junit(path, tests, failed):
    root = ET.parse(path).getroot()
    expect(root.tag == "testsuites", "junit root is <testsuites>")
    expect(int(root.get("tests")) == tests, "junit tests=%s, want %d" % (root.get("tests"), tests))
    expect(int(root.get("failures")) == failed, "junit failures=%s, want %d" % (root.get("failures"), failed))
    cases = root.findall("./testsuite/testcase")
    expect(len(cases) == tests, "junit has %d testcases, want %d" % (len(cases), tests))
    expect(sum(1 for c in cases if c.find("failure") is not None) == failed, "junit <failure> count")
    for s in root.findall("testsuite"):
        n = len(s.findall("testcase"))
        f = sum(1 for c in s.findall("testcase") if c.find("failure") is not None)
        expect(int(s.get("tests")) == n and int(s.get("failures")) == f, "testsuite counts match its cases")
    for c in cases:
        expect(c.get("name") and c.get("classname") and c.get("file"), "testcase has name, classname, file")
        fl = c.find("failure")
        if fl is not None:
            expect(fl.get("message") and fl.text and "=" in fl.text, "a failure carries its derivation")
    return root


def main():
    tmp = tempfile.mkdtemp(prefix="kvplan-check-")
    try:
        # every example passes; text, JSON and JUnit agree
        rc, out, err = run("docs/examples/fleet.yaml", EXAMPLE)
        expect(rc == 0, "examples pass (rc %d): %s" % (rc, err))
        rc, out, err = run(EXAMPLE, "--format", "json")
        expect(rc == 0, "json rc 0")
        doc = json.loads(out)
        expect(doc["kvplan_check"] == 1 and doc["passed"] is True, "json header")
        expect(doc["summary"] == {"deployments": 1, "assertions": 8, "passed": 8, "failed": 0, "regressed": 0},
               "json summary %r" % doc["summary"])
        keys = {"id", "test", "deployment", "kind", "file", "line", "column", "context", "concurrency", "workload", "measured", "limit",
                "op", "unit", "pass", "status", "baseline", "change", "regressed", "derivation"}
        for r in doc["results"]:
            expect(set(r) == keys, "result keys %r" % sorted(set(r) ^ keys))
        byid = {r["id"]: r for r in doc["results"]}
        expect(byid["llama70b-fp8-4xh100/min_context"]["measured"] == 10320, "min_context measured 10320")
        expect(byid["llama70b-fp8-4xh100/max_kv_bytes_per_token"]["measured"] == 81920, "80 KiB per token")

        # a failing assertion: exit 1, its derivation in every format
        bad = plan(tmp, "bad.yaml", "      - fits: true\n      - min_concurrency: 100\n")
        rc, out, err = run(bad)
        expect(rc == 1, "failing plan exits 1 (got %d)" % rc)
        expect("FAIL      min_concurrency at 8,192 tokens: 80.73 (want >= 100.00)" in out, "text shows the failure")
        expect("num_blocks = budget // (page * group_size)" in out, "text shows the derivation")
        junit = os.path.join(tmp, "report.xml")
        rc, out, err = run(bad, "--format", "junit", "--output", junit)
        expect(rc == 1, "junit run exits 1")
        check_junit(junit, 2, 1)
        expect("FAIL" in out, "with --output the text report still goes to stdout")
        rc, out, err = run(bad, "--format", "json")
        doc = json.loads(out)
        expect(doc["passed"] is False and doc["summary"]["failed"] == 1, "json records the failure")
        expect(doc["results"][1]["status"] == "fail" and "80.7305" in doc["results"][1]["derivation"],
               "json failure has the derivation")
        check_junit(junit, 2, 1)

        # invalid plans: exit 2, file:line:col, nothing on stdout, no report written over a good one
        good = open(junit).read()
        rc, out, err = run("tests/data/bad/plan-unknown-key.yaml", "--format", "junit", "--output", junit)
        expect(rc == 2 and out == "", "invalid plan exits 2 with no report (rc %d)" % rc)
        expect(err.strip() == "kvplan: " + open("tests/data/bad/plan-unknown-key.yaml.err").read().strip(),
               "invalid plan message: " + err)
        expect(open(junit).read() == good, "an invalid plan leaves the earlier report alone")
        rc, out, err = run(EXAMPLE, "tests/data/bad/plan-version.yaml")
        expect(rc == 2 and "PASS" not in out, "one invalid plan among good ones never reports a pass")
        rc, out, err = run(EXAMPLE, "--output", os.path.join(tmp, "no-such-dir", "r.xml"))
        expect(rc == 2 and "cannot write '" in err and "no-such-dir/r.xml': No such file or directory" in err, "unwritable report is an error: " + err)
        expect(sorted(os.listdir(tmp)) == ["bad.yaml", "report.xml"], "no temporary files left: %r" % os.listdir(tmp))
        rc, out, err = run(EXAMPLE, "--format", "xml")
        expect(rc == 2 and "--format must be text, json or junit (got 'xml')" in err, "bad --format")
        rc, out, err = run()
        expect(rc == 2 and "which plan?" in err, "no plan given")

        # baselines: record, compare unchanged, worse (fails), better (passes)
        base = os.path.join(tmp, "base.json")
        asserts = "      - min_concurrency: 1\n      - min_headroom: 0\n"
        p90 = plan(tmp, "p90.yaml", asserts, util="0.90")
        rc, out, err = run(p90, "--write-baseline", base)
        expect(rc == 0 and json.load(open(base))["kvplan_check"] == 1, "baseline written")
        rc, out, err = run(p90, "--baseline", base)
        expect(rc == 0 and "0 regressed (held, but worse than the baseline by more than 5%" in out,
               "same plan: no regression")
        p80 = plan(tmp, "p80.yaml", asserts, util="0.80")
        rc, out, err = run(p80, "--baseline", base, "--format", "json")
        doc = json.loads(out)
        expect(rc == 1 and doc["summary"]["regressed"] == 2, "worse plan regresses (rc %d)" % rc)
        s = doc["summary"]
        expect(s["passed"] == 0 and s["passed"] + s["failed"] + s["regressed"] == s["assertions"],
               "a regression is counted apart from passes: %r" % s)
        r0 = doc["results"][0]
        expect(r0["status"] == "regressed" and r0["regressed"] and r0["change"] < -0.05, "regression recorded")
        rc, out, err = run(p80, "--baseline", base, "--tolerance", "90%")
        expect(rc == 0, "within a 90% tolerance it passes (headroom -89% under vllm 0.21.0)")
        rc, out, err = run(p80, "--baseline", base, "--format", "junit", "--output", junit)
        check_junit(junit, 2, 2)
        p95 = plan(tmp, "p95.yaml", asserts, util="0.95")
        rc, out, err = run(p95, "--baseline", base)
        expect(rc == 0, "a better plan passes against the baseline")
        rc, out, err = run(p90, "--baseline", base, "--tolerance", "-3")
        expect(rc == 2, "negative tolerance is a usage error")
        before = open(base).read()
        rc, out, err = run(bad, "--write-baseline", base)
        expect(rc == 1 and open(base).read() == before and "not writing the baseline" in err,
               "a failing run does not overwrite the baseline")
        rc, out, err = run(p90, "--baseline", "tests/data/bad/plan-version.yaml")
        expect(rc == 2 and "missing required key 'kvplan_check'" in err, "a plan is not a baseline: " + err)

        # JUnit test names carry no numbers: changing a limit or context keeps each test's history
        names = []
        for i, lim in enumerate(("100", "50")):
            pth = plan(tmp, "n%d.yaml" % i, "      - min_concurrency: %s\n      - min_concurrency: 2\n"
                       "        context: %d\n      - max_tpot_ms: 1000\n" % (lim, 4096 * (i + 1)))
            rc, out, err = run(pth, "--format", "junit", "--output", junit)
            names.append([c.get("name") for c in ET.parse(junit).getroot().iter("testcase")])
        expect(names[0] == names[1] and names[0][1].endswith("/min_concurrency#2"),
               "junit names stable and numbered by order: %r" % names)
        props = {p.get("name") for p in ET.parse(junit).getroot().iter("property")}
        expect({"context", "concurrency", "measured", "limit", "id"} <= props, "junit properties carry the numbers")

        # a deployment that does not hold its requests: max_tpot_ms fails, never passes
        pth = plan(tmp, "huge.yaml", "      - max_tpot_ms: 100000\n        concurrency: 100000\n")
        rc, out, err = run(pth, "--format", "json")
        doc = json.loads(out)
        expect(rc == 1 and doc["results"][0]["status"] == "fail" and "no decode step to time" in
               doc["results"][0]["derivation"], "max_tpot_ms on requests that do not fit fails")

        # the loader's warnings reach JSON and JUnit
        cfg = os.path.join(tmp, "cfg")
        os.mkdir(cfg)
        shutil.copy("tests/data/hf/gpt-oss-20b.json", os.path.join(cfg, "config.json"))
        with open(os.path.join(tmp, "w.yaml"), "w") as f:
            f.write("kvplan_plan: 1\ndeployments:\n  - name: oss\n    model: ./cfg\n    gpu: h100\n"
                    "    context: 8192\n    assert:\n      - fits: true\n")
        rc, out, err = run(os.path.join(tmp, "w.yaml"), "--format", "json")
        doc = json.loads(out)
        expect(rc == 0 and doc["deployments"][0]["warnings"] == ["no 'torch_dtype' in the config: assumed bf16"],
               "json deployment warnings: %r" % doc["deployments"][0].get("warnings"))
        rc, out, err = run(os.path.join(tmp, "w.yaml"), "--format", "junit", "--output", junit)
        errs = [e.text for e in ET.parse(junit).getroot().iter("system-err")]
        expect(errs and "assumed bf16" in errs[0], "junit system-err carries the warnings")
    finally:
        shutil.rmtree(tmp)
    print("plan_cli: %d passed, %d failed" % (passes, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
