#!/usr/bin/env python3
"""shapes.py -- the worst inputs we can build under the size caps, timed.

    KVPLAN_BIN=build/rel/kvplan python3 tests/shapes.py [--limit SECONDS] [NAME...]

Writes each shape into a temporary folder (a config.json, a kvplan YAML
model, a plan with its includes, a GGUF header, a GPU catalog, each as
large as its cap allows), runs the kvplan command a user would, and checks
that it exits 0, 1 or 2 with the expected line on stderr within --limit
seconds of CPU (default 1, user + system, from getrusage of the child; the
least of up to three runs, a run over the limit being run again).
Prints one line per shape: name, bytes, CPU seconds, exit code, message.

Run by `make robust-time` (the release build), not by `make check`: a
timing bound belongs beside the benchmarks, and this one is meant to be
generous (each shape takes milliseconds; the bound is the issue's promise,
"no input under the size cap costs more than a second").
"""
import os
import re
import resource
import struct
import subprocess
import sys
import tempfile

MIB = 1 << 20
TEXT_CAP = 4 * MIB  # models, configs, GPU catalogs (src/lib/model/model.c, gpu.c)
PLAN_CAP = 1 * MIB  # plan files (src/lib/report/plan.c)
HF_HEAD = ('{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "vocab_size": 100, '
           '"max_position_embeddings": 4096, "num_attention_heads": 4, "intermediate_size": 128, '
           '"torch_dtype": "bfloat16"')
Y_HEAD = ("kvplan: 1\nname: x\nmax_context: 4096\nhidden: 64\nintermediate: 128\nvocab: 100\n"
          "specs:\n  a: {heads: 4, head_dim: 16}\n")


def fill(head, unit, tail, cap):
    """head + unit repeated + tail, as long as fits in cap bytes."""
    n = (cap - len(head) - len(tail)) // len(unit)
    return head + unit * n + tail


def upto(head, unit, tail, cap):
    """head + unit % 0, unit % 1, ... + tail, as long as fits in cap bytes."""
    parts, size, i = [head], len(head) + len(tail), 0
    while size + len(unit % i) <= cap:
        parts.append(unit % i)
        size += len(unit % i)
        i += 1
    return "".join(parts) + tail


def nested(open_, close, cap):
    n = (cap - 2) // (len(open_) + len(close))
    return open_ * n + close * n


# ---- GGUF -----------------------------------------------------------------
def gguf_types():
    """GGUF's value-type codes as src/lib/model/gguf_types.h numbers them (the one place that does)."""
    with open(os.path.join(os.path.dirname(__file__), "..", "src", "lib", "model", "gguf_types.h")) as f:
        return {name: int(code) for name, code in re.findall(r"GGUF_(\w+) = (\d+)", f.read())}


T = gguf_types()


def g_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def g_u32(key, v):
    return g_str(key) + struct.pack("<II", T["UINT32"], v)


def gguf(kvs, n_kv=None):
    body = b"".join(kvs)
    return struct.pack("<IIQQ", 0x46554747, 3, 0, len(kvs) if n_kv is None else n_kv) + body


def gguf_llama():
    return [g_str("general.architecture") + struct.pack("<I", T["STRING"]) + g_str("llama"),
            g_u32("llama.block_count", 2), g_u32("llama.embedding_length", 64),
            g_u32("llama.feed_forward_length", 128), g_u32("llama.context_length", 4096),
            g_u32("llama.attention.head_count", 4)]


def gguf_many_keys(cap):
    kvs = gguf_llama()
    size = sum(map(len, kvs)) + 24
    i = 0
    while size < cap - 64:
        kv = g_u32("k%x" % i, i)
        kvs.append(kv)
        size += len(kv)
        i += 1
    return gguf(kvs)


def gguf_token_array(cap):
    """tokenizer.ggml.tokens: as many one-byte strings as fit."""
    n = (cap - 512) // 9
    arr = g_str("tokenizer.ggml.tokens") + struct.pack("<IIQ", T["ARRAY"], T["STRING"], n) + (struct.pack("<Q", 1) + b"a") * n
    return gguf(gguf_llama() + [arr])


def gguf_many_tensors(cap):
    """as many one-dimensional tensor infos as fit."""
    kvs = gguf_llama() + [g_u32("llama.vocab_size", 100)]
    info = g_str("t") + struct.pack("<IQIQ", 1, 1, 0, 0)
    n = (cap - sum(map(len, kvs)) - 64) // len(info)
    return struct.pack("<IIQQ", 0x46554747, 3, n, len(kvs)) + b"".join(kvs) + info * n


def gguf_int_array(cap):
    """a per-layer array far longer than the layers."""
    n = (cap - 512) // 4
    arr = g_str("llama.attention.head_count_kv") + struct.pack("<IIQ", T["ARRAY"], T["INT32"], n) + b"\x01\x00\x00\x00" * n
    return gguf(gguf_llama() + [arr])


# ---- the shapes ------------------------------------------------------------
# (name, files {relative path: bytes or str}, argv after kvplan (FILE: the first file),
#  the text expected on stderr; "" when the command succeeds)
def shapes():
    s = []
    hf = "m/config.json"
    # the report: 200,000 nested brackets (400 KB), then as many as 4 MiB holds
    s.append(("hf-brackets-400k", {hf: HF_HEAD + ', "a": ' + nested("[", "]", 400000) + "}"},
              ["size", "FILE"], "nesting deeper than 32 levels"))
    s.append(("hf-brackets-4m", {hf: HF_HEAD + ', "a": ' + nested("[", "]", TEXT_CAP - 1024) + "}"},
              ["size", "FILE"], "nesting deeper than 32 levels"))
    s.append(("hf-objects-100k", {hf: "{" + '"a": {' * 100000 + "}" * 100001},
              ["size", "FILE"], "nesting deeper than 32 levels"))
    s.append(("yaml-flow-unterminated-1m", {"m.yaml": "[" * MIB}, ["size", "FILE"], "nesting deeper than 32 levels"))
    s.append(("yaml-block-deep", {"m.yaml": "".join("  " * i + "a:\n" for i in range(2000))},
              ["size", "FILE"], "nesting deeper than 32 levels"))
    s.append(("yaml-block-seq-deep", {"m.yaml": "- " * 1000000 + "1\n"}, ["size", "FILE"],
              "nesting deeper than 32 levels"))
    # flat and wide
    s.append(("hf-flat-list", {hf: fill(HF_HEAD + ', "layer_types": [', "1,", "1]}", TEXT_CAP)},
              ["size", "FILE"], "more than"))
    s.append(("hf-many-keys", {hf: upto(HF_HEAD, ', "k%x": 1', "}", TEXT_CAP)},
              ["size", "FILE"], ""))
    s.append(("hf-many-keys-under-cap", {hf: HF_HEAD + "".join(', "k%x": 1' % i for i in range(131000)) + "}"},
              ["size", "FILE"], ""))
    s.append(("hf-nested-lists-under-cap", {hf: fill(HF_HEAD + ', "a": [', "[" * 30 + "1" + "]" * 30 + ",", "1]}",
                                                     TEXT_CAP // 2)}, ["size", "FILE"], ""))
    s.append(("yaml-many-keys", {"m.yaml": upto(Y_HEAD, "k%x: 1\n", "", TEXT_CAP)},
              ["size", "FILE"], ""))
    s.append(("hf-empty-maps", {hf: fill(HF_HEAD + ', "a": [', "{},", "{}]}", TEXT_CAP)}, ["size", "FILE"], ""))
    # long scalars
    s.append(("hf-long-string", {hf: fill(HF_HEAD + ', "a": "', "x", '"}', TEXT_CAP)}, ["size", "FILE"], ""))
    s.append(("yaml-long-plain", {"m.yaml": fill(Y_HEAD + "x: ", "x", "\n", TEXT_CAP)}, ["size", "FILE"], ""))
    s.append(("yaml-long-folded", {"m.yaml": fill(Y_HEAD + "x: >\n", "  x\n", "", TEXT_CAP)}, ["size", "FILE"], ""))
    s.append(("hf-escapes", {hf: fill(HF_HEAD + ', "a": "', "\\u00e9", '"}', TEXT_CAP)}, ["size", "FILE"], ""))
    # 40,000 specs, 1024 layers each naming the last one
    s.append(("yaml-many-specs", {"m.yaml": "kvplan: 1\nname: x\nmax_context: 4096\nhidden: 64\nintermediate: 128\n"
                                  "vocab: 100\nspecs:\n" + "".join("  s%d: {heads: 4, head_dim: 16}\n" % i
                                                                    for i in range(40000))
                                  + "layers:\n" + "  - {spec: s39999}\n" * 1024}, ["size", "FILE"], ""))
    # directives: libyaml checks each %TAG against all before it
    s.append(("yaml-many-tag-directives", {"m.yaml": upto("", "%%TAG !t%x! tag:x:\n", "---\nkvplan: 1\n", TEXT_CAP)},
              ["size", "FILE"], ""))
    # anchors and aliases
    s.append(("yaml-many-aliases", {"m.yaml": fill("a: &a [1]\nb: [", "*a, ", "*a]\n", TEXT_CAP)},
              ["size", "FILE"], ""))
    s.append(("yaml-many-anchors", {"m.yaml": upto("a: [", "&a%x 1, ", "1]\n", TEXT_CAP // 2)
                                    + fill("b: [", "*a0, ", "1]\n", TEXT_CAP // 2)}, ["size", "FILE"], ""))
    # 1024 anchors and 1024 aliases with 2 KB names sharing all but their last characters
    names = ["a" * 2030 + "%04x" % i for i in range(1024)]
    s.append(("yaml-long-anchor-names", {"m.yaml": "a: [" + ", ".join("&%s 1" % n for n in names) + "]\nb: ["
                                         + ", ".join("*" + names[0] for _ in range(1024)) + "]\n"},
              ["size", "FILE"], ""))
    bomb = "a: &a0 [1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        "a%d: &a%d [%s]\n" % (i, i, ", ".join(["*a%d" % (i - 1)] * 8)) for i in range(1, 40))
    s.append(("yaml-alias-bomb", {"m.yaml": bomb}, ["size", "FILE"], ""))
    # plans: many deployments, includes, a DAG of includes
    dep = "  - {name: d%x, model: llama-3.1-8b, gpu: h100, context: 8k, assert: {fits: true}}\n"
    s.append(("plan-many-deployments", {"p.yaml": "kvplan_plan: 1\ndeployments:\n" + "".join(
        dep % i for i in range(PLAN_CAP // (len(dep) + 2)))}, ["check", "FILE"], ""))
    s.append(("plan-many-asserts", {"p.yaml": upto(
        "kvplan_plan: 1\ndeployments:\n  - {name: d, model: llama-3.1-8b, gpu: h100, assert: [",
        "{min_context: 8k, name: a%x}, ", "{fits: true}]}\n", PLAN_CAP)}, ["check", "FILE"], ""))
    dep3 = ("  - {name: d%x, model: llama-3.1-8b, gpu: h100, context: 8k, concurrency: 64,"
            " assert: {min_context: 8k, max_tpot_ms: 100}}\n")
    s.append(("plan-max-deployments-checks", {"p.yaml": "kvplan_plan: 1\ndeployments:\n" + "".join(
        dep3 % i for i in range(1024))}, ["check", "FILE"], ""))
    # a baseline as long as its 1 MiB cap, against 2048 results
    plan = "kvplan_plan: 1\ndeployments:\n" + "".join(dep3 % i for i in range(1024))
    s.append(("plan-long-baseline", {"p.yaml": plan, "b.json": upto(
        '{"kvplan_check": 1, "results": [', '{"id": "d%x/min_context", "measured": 1}, ', '{"id": "x", "measured": 1}]}',
        PLAN_CAP)}, ["check", "FILE", "--baseline", "DIR/b.json"], "more than 2048 results"))
    # a valid 4 MiB config (63 strings of 64 KiB the importer ignores), named by 1024 deployments
    big = HF_HEAD + "".join(', "x%d": "%s"' % (i, "a" * 65536) for i in range(63)) + "}"
    dep2 = "  - {name: d%x, model: big/config.json, gpu: h100, assert: {fits: true}}\n"
    s.append(("plan-big-model-1024-times", {
        "p.yaml": "kvplan_plan: 1\ndeployments:\n" + "".join(dep2 % i for i in range(1024)),
        "big/config.json": big}, ["check", "FILE"], ""))
    # 64 files of 64 KiB of comments, then one over the 4 MiB budget
    inc = {"p.yaml": "kvplan_plan: 1\ninclude: [" + ", ".join(["c.yaml"] * 62) + "]\ndeployments:\n" + dep % 0,
           "c.yaml": fill("kvplan_plan: 1\n", "# padding padding padding padding padding padding padding\n", "",
                          65535)}
    s.append(("plan-includes-64-files", inc, ["check", "FILE"], ""))
    inc = {"p.yaml": "kvplan_plan: 1\ninclude: [i1.yaml]\n" + "deployments:\n" + dep % 0}
    for lvl in range(1, 9):
        inc["i%d.yaml" % lvl] = "kvplan_plan: 1\ninclude: [" + ", ".join(["i%d.yaml" % (lvl + 1)] * 64) + "]\n" \
            if lvl < 8 else "kvplan_plan: 1\ndefaults: {engine: vllm}\n"
    s.append(("plan-include-dag", inc, ["check", "FILE"], ""))
    chain = {"p.yaml": "kvplan_plan: 1\ninclude: [c1.yaml]\ndeployments:\n" + dep % 0}
    for lvl in range(1, 10):
        chain["c%d.yaml" % lvl] = "kvplan_plan: 1\ninclude: [c%d.yaml]\n" % (lvl + 1)
    chain["c10.yaml"] = "kvplan_plan: 1\n"
    s.append(("plan-include-chain", chain, ["check", "FILE"], "nest"))
    s.append(("plan-brackets", {"p.yaml": nested("[", "]", PLAN_CAP - 16)}, ["check", "FILE"],
              "nesting deeper than 32 levels"))
    # GPU catalogs (kvplan reads DATADIR/gpus.yaml)
    gpu = ("  - {id: g%x, name: G, memory_bytes: 85899345920, memory_source: s, bandwidth_gbs: 3000, "
           "bf16_tflops: 900, fp8_tflops: 1800, source: s}\n")
    s.append(("gpus-many", {"d/gpus.yaml": "kvplan_gpus: 1\ngpus:\n" + "".join(
        gpu % i for i in range(TEXT_CAP // (len(gpu) + 2)))}, ["gpus"], "more than"))
    s.append(("gpus-brackets", {"d/gpus.yaml": nested("[", "]", TEXT_CAP - 16)}, ["gpus"],
              "nesting deeper than 32 levels"))
    # request traces: 4 MiB of distinct requests (SGLang's radix tree has one root child each: its
    # children were scanned, 3.7 s; issue #37), and every other simulated engine on the same (vLLM
    # 1.22 s in CI before a request's own blocks had their own heads; TRT-LLM 3.1 s in the issue)
    trace, i = ["arrival_s,prompt_tokens,output_tokens\n"], 0
    size = len(trace[0])
    while True:
        row = "%d.%03d,%d,%d\n" % (i // 200, i % 200 * 5, 50 + i % 250, 5 + i % 45)
        if size + len(row) > TEXT_CAP:
            break
        trace.append(row)
        size += len(row)
        i += 1
    trace = "".join(trace)
    for eng in ("sglang", "vllm", "vllm@0.7.3", "trtllm", "llamacpp"):
        s.append(("trace-4mib-" + eng, {"t.csv": trace},
                  ["simulate", "llama-3.1-8b", "--gpu", "h100", "--engine", eng, "--context", "4k", "--trace", "FILE"],
                  ""))
    # a workload past the simulator's budget (KVP_SIM_BUDGET), refused before a request is drawn: a plan's
    # 200 bytes of 'requests: 10000000' took 4.8 s and 2.9 GB at load (issue #37)
    s.append(("plan-workload-budget", {"p.yaml": "kvplan_plan: 1\nworkloads:\n  w: {requests: 10000000}\n"
                                                 "deployments:\n" + dep % 0}, ["check", "FILE"], "KVP_SIM_BUDGET"))
    # GGUF headers (the 64 MiB read cap)
    s.append(("gguf-many-keys", {"m.gguf": gguf_many_keys(64 * MIB)}, ["size", "FILE"], ""))
    s.append(("gguf-token-array", {"m.gguf": gguf_token_array(64 * MIB)}, ["size", "FILE"], ""))
    s.append(("gguf-many-tensors", {"m.gguf": gguf_many_tensors(64 * MIB)}, ["size", "FILE"], ""))
    s.append(("gguf-int-array", {"m.gguf": gguf_int_array(64 * MIB)}, ["size", "FILE"], "entries"))
    s.append(("gguf-n-kv-huge", {"m.gguf": gguf(gguf_llama(), n_kv=(1 << 64) - 1)}, ["size", "FILE"],
              "truncated header"))
    return s


def run(bin_, name, files, argv, want, limit, tmp):
    d = os.path.join(tmp, name)
    for rel, data in files.items():
        path = os.path.join(d, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
    first = os.path.join(d, next(iter(files)))
    env = dict(os.environ)
    env["KVPLAN_DATADIR"] = os.path.join(d, "d") if "d/gpus.yaml" in files else env.get("KVPLAN_DATADIR", "models")
    if "d/gpus.yaml" in files:  # a datadir of one GPU catalog and the models
        for m in os.listdir("models"):
            if m != "gpus.yaml":
                os.symlink(os.path.abspath(os.path.join("models", m)), os.path.join(d, "d", m))
    cmd = [bin_] + [first if a == "FILE" else a.replace("DIR", d) for a in argv]
    # the least CPU of up to three runs: a run over the limit is run again, since a busy machine inflates
    # one run's CPU time (a 4 MiB SGLang trace measured 0.73 s idle and 1.02 s in a loaded CI run); a
    # shape whose every run is over the limit fails
    for attempt in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               timeout=max(60, 30 * limit))
            rc, err = p.returncode, p.stderr.decode(errors="replace")
        except subprocess.TimeoutExpired:
            rc, err = "timeout", ""
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        run_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        cpu = run_cpu if attempt == 0 else min(cpu, run_cpu)
        if cpu <= limit or rc == "timeout":
            break
    size = sum(len(v) for v in files.values())
    line = err.strip().splitlines()[-1][-110:] if err.strip() else "(ok)"
    problems = []
    if rc not in (0, 1, 2):
        problems.append("exit %s" % rc)
    if cpu > limit:
        problems.append("%.2f s of CPU > %g s" % (cpu, limit))
    if want and want not in err:
        problems.append("stderr lacks %r" % want)
    if not want and rc == 2:
        pass  # a clean refusal is acceptable where success was possible
    print("%-28s %9d B %7.3f s  exit %-7s %s%s" % (name, size, cpu, rc, line, "  FAIL: " + "; ".join(problems)
                                                   if problems else ""), flush=True)
    return not problems


def main():
    args = sys.argv[1:]
    limit = 1.0
    if args[:1] == ["--limit"]:
        limit = float(args[1])
        args = args[2:]
    bin_ = os.environ.get("KVPLAN_BIN", "build/rel/kvplan")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, files, argv, want in shapes():
            if args and name not in args:
                continue
            ok &= run(bin_, name, files, argv, want, limit, tmp)
    print("shapes: %s" % ("all within %g s of CPU" % limit if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
