#!/usr/bin/env python3
"""Write the REPOS.json that kvplan's tests serve with tests/hub/server.py.

    python3 tests/hub/make_repos.py OUT.json [--gguf PATH:PAD_TO]

REPOS.json maps a repo id "org/name" to
    {"gated": bool, "faults": ["no-range" | "stall", ...],
     "refs": {"main": COMMIT, "v1": COMMIT, ...},
     "commits": {COMMIT: {"files": {PATH: FILE, ...}}, ...}}
where COMMIT is 40 hex digits and FILE is one of
    {"path": "some/file"}                  bytes of a file (relative to the
                                           server's cwd, or absolute)
    {"path": "x.gguf", "pad_to": N}        those bytes, then zeros up to N bytes
    {"text": "..."}                        literal text (UTF-8)
    {"safetensors": [[NAME, DTYPE, SHAPE], ...]}   header + virtual zero data
plus, on any FILE, "truncate": N to serve only its first N bytes.

Commits are sha1("<repo id>@<label>"), label being "main" or "v1".
"""

import argparse
import hashlib
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
HF_CONFIGS = os.path.join(os.path.dirname(HERE), "data", "hf")

GB = 10 ** 9
DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}
DTYPE_SIZES = {"BF16": 2, "F16": 2, "F32": 4}


def commit_id(repo_id, label):
    return hashlib.sha1(f"{repo_id}@{label}".encode()).hexdigest()


def config_path(name):
    return os.path.join(HF_CONFIGS, name)


def load_config(name):
    with open(config_path(name)) as f:
        return json.load(f)


# -------------------------------------------------------- tensor lists


def llama_like_tensors(cfg):
    """[name, dtype, shape] as transformers saves llama/mistral/qwen2/qwen3."""
    mt = cfg["model_type"]
    if mt not in ("llama", "mistral", "qwen2", "qwen3"):
        raise ValueError(f"unsupported model_type {mt}")
    dtype = DTYPES[cfg.get("torch_dtype", "bfloat16")]
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    inter = cfg["intermediate_size"]
    vocab = cfg["vocab_size"]
    q_out, kv_out = heads * head_dim, kv_heads * head_dim
    bias = cfg.get("attention_bias", False) or mt == "qwen2"

    out = [["model.embed_tokens.weight", dtype, [vocab, hidden]]]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out.append([p + "input_layernorm.weight", dtype, [hidden]])
        out.append([p + "post_attention_layernorm.weight", dtype, [hidden]])
        out.append([p + "self_attn.q_proj.weight", dtype, [q_out, hidden]])
        out.append([p + "self_attn.k_proj.weight", dtype, [kv_out, hidden]])
        out.append([p + "self_attn.v_proj.weight", dtype, [kv_out, hidden]])
        out.append([p + "self_attn.o_proj.weight", dtype, [hidden, q_out]])
        if bias:
            out.append([p + "self_attn.q_proj.bias", dtype, [q_out]])
            out.append([p + "self_attn.k_proj.bias", dtype, [kv_out]])
            out.append([p + "self_attn.v_proj.bias", dtype, [kv_out]])
        if mt == "qwen3":
            out.append([p + "self_attn.q_norm.weight", dtype, [head_dim]])
            out.append([p + "self_attn.k_norm.weight", dtype, [head_dim]])
        out.append([p + "mlp.gate_proj.weight", dtype, [inter, hidden]])
        out.append([p + "mlp.up_proj.weight", dtype, [inter, hidden]])
        out.append([p + "mlp.down_proj.weight", dtype, [hidden, inter]])
    out.append(["model.norm.weight", dtype, [hidden]])
    if not cfg.get("tie_word_embeddings", False):
        out.append(["lm_head.weight", dtype, [vocab, hidden]])
    return out


def tensor_bytes(t):
    _, dtype, shape = t
    return DTYPE_SIZES[dtype] * math.prod(shape)


def split_shards(tensors, max_shard):
    """Split in order into shards of at most max_shard data bytes (a larger
    tensor gets a shard of its own), as transformers' save_pretrained does."""
    shards, size = [[]], 0
    for t in tensors:
        n = tensor_bytes(t)
        if shards[-1] and size + n > max_shard:
            shards.append([])
            size = 0
        shards[-1].append(t)
        size += n
    return shards


def weight_files(cfg, max_shard=5 * GB):
    """The safetensors files (and index) of a checkpoint, as REPOS.json entries."""
    tensors = llama_like_tensors(cfg)
    shards = split_shards(tensors, max_shard)
    if len(shards) == 1:
        return {"model.safetensors": {"safetensors": tensors}}
    files, weight_map = {}, {}
    for k, shard in enumerate(shards, 1):
        name = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
        files[name] = {"safetensors": shard}
        for t in shard:
            weight_map[t[0]] = name
    index = {"metadata": {"total_size": sum(map(tensor_bytes, tensors))},
             "weight_map": dict(sorted(weight_map.items()))}
    files["model.safetensors.index.json"] = {"text": json.dumps(index, indent=2) + "\n"}
    return files


# --------------------------------------------------------------- repos


def model_repo(repo_id, config_name, gated=False, faults=(), max_shard=5 * GB,
               truncate=None):
    """A repo with config.json, README.md and safetensors on branch main."""
    files = {"config.json": {"path": config_path(config_name)},
             "README.md": {"text": f"# {repo_id}\n\nFake repo for kvplan's tests.\n"}}
    files.update(weight_files(load_config(config_name), max_shard))
    if truncate is not None:
        files["model.safetensors"]["truncate"] = truncate
    main = commit_id(repo_id, "main")
    return {"gated": gated, "faults": list(faults), "refs": {"main": main},
            "commits": {main: {"files": files}}}


def qwen_repo():
    """Qwen2.5-7B-Instruct: main, and tag v1 -> an older commit whose
    config.json has max_position_embeddings 4096."""
    repo_id = "Qwen/Qwen2.5-7B-Instruct"
    repo = model_repo(repo_id, "qwen2.5-7b.json")
    main = repo["refs"]["main"]
    v1 = commit_id(repo_id, "v1")
    cfg = load_config("qwen2.5-7b.json")
    cfg["max_position_embeddings"] = 4096
    files = dict(repo["commits"][main]["files"])
    files["config.json"] = {"text": json.dumps(cfg, indent=2) + "\n"}
    repo["refs"]["v1"] = v1
    repo["commits"][v1] = {"files": files}
    return repo


def gguf_repo(path, pad_to):
    repo_id = "test/tiny-GGUF"
    weights = {"path": os.path.abspath(path), "pad_to": pad_to}
    main = commit_id(repo_id, "main")
    files = {"tiny-Q4_K_M.gguf": dict(weights), "tiny-Q8_0.gguf": dict(weights),
             "README.md": {"text": "# tiny GGUF\n\nFake GGUF repo for kvplan's tests.\n"}}
    return {"gated": False, "faults": [], "refs": {"main": main},
            "commits": {main: {"files": files}}}


def all_repos(gguf=None):
    one_file = 10 ** 15  # no sharding: a single model.safetensors
    repos = {
        "meta-llama/Llama-3.1-8B": model_repo("meta-llama/Llama-3.1-8B",
                                              "llama-3.1-8b.json", gated=True),
        "Qwen/Qwen2.5-7B-Instruct": qwen_repo(),
        # The real Mistral-7B-v0.1 was saved with 10 GB shards: 2 files.
        "mistralai/Mistral-7B-v0.1": model_repo("mistralai/Mistral-7B-v0.1",
                                                "mistral-7b-v0.1.json", max_shard=10 * GB),
        "test/no-range": model_repo("test/no-range", "llama-3.1-8b.json",
                                    faults=["no-range"], max_shard=one_file),
        "test/stall": model_repo("test/stall", "llama-3.1-8b.json",
                                 faults=["stall"], max_shard=one_file),
        "test/truncated": model_repo("test/truncated", "llama-3.1-8b.json",
                                     max_shard=one_file, truncate=64),
    }
    if gguf:
        repos["test/tiny-GGUF"] = gguf_repo(*gguf)
    return repos


def parse_gguf(value):
    path, sep, pad_to = value.rpartition(":")
    if not sep or not path or not pad_to.isdigit():
        raise argparse.ArgumentTypeError("expected PATH:PAD_TO")
    return path, int(pad_to)


def main():
    ap = argparse.ArgumentParser(description="write REPOS.json for tests/hub/server.py")
    ap.add_argument("out")
    ap.add_argument("--gguf", type=parse_gguf, metavar="PATH:PAD_TO",
                    help="add test/tiny-GGUF serving PATH padded to PAD_TO bytes")
    args = ap.parse_args()
    repos = all_repos(args.gguf)
    tmp = f"{args.out}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(repos, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
