#!/bin/sh
# Models by Hub reference, against the test Hub (tests/hub/server.py) on
# 127.0.0.1: configs, safetensors and GGUF headers fetched by Range requests,
# revisions, a gated repo, errors, the caches, offline use, plans.
# Usage: sh tests/hub.sh   (KVPLAN_BIN: the kvplan to run; kvplan-hub beside it)
bin=${KVPLAN_BIN:-build/rel/kvplan}
tmp=$(mktemp -d) || exit 2
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; sed 's/^/    /' "$tmp/out" "$tmp/err" | head -12; }

# run EXIT ARGS...: kvplan's stdout in $tmp/out, stderr in $tmp/err
run() {
    want=$1
    shift
    KVPLAN_DATADIR=models "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    [ "$got" -eq "$want" ] && return 0
    bad "kvplan $* exited $got, want $want"
    return 1
}
has() { grep -qF -- "$2" "$tmp/$1" && ok || bad "std$1 lacks: $2"; }
lacks() { grep -qF -- "$2" "$tmp/$1" && bad "std$1 has: $2" || ok; }
stat_of() { # the bytes (or requests) the server counted for a repo since the last reset
    python3 -c "import json, urllib.request as u; print(json.load(u.urlopen('http://127.0.0.1:$port/_stats'))['repos']['$1']['$2'])"
}
reset() { python3 -c "import urllib.request as u; u.urlopen(u.Request('http://127.0.0.1:$port/_reset', method='POST'))"; }

# a GGUF header: llama-3.1-8b's shape with a 1.4 MiB tokenizer list in front
# of it, so the prefix kvplan reads has to grow past one 1 MiB request
KVPLAN_DATADIR=models "$bin" export-gguf llama-3.1-8b "$tmp/sparse.gguf" --sparse >/dev/null || exit 2
python3 - "$tmp/sparse.gguf" "$tmp/tiny.gguf" <<'EOF' || exit 2
import os, struct, sys
src, dst = sys.argv[1:]
size = os.path.getsize(src)
with open(src, "rb") as f:
    head = f.read(4 << 20)  # the header and the start of the hole
magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", head)
key = b"tokenizer.ggml.tokens"
parts = [struct.pack("<Q", len(key)), key, struct.pack("<IIQ", 9, 8, 150000)]
for i in range(150000):
    t = b"tok%06d" % i
    parts += [struct.pack("<Q", len(t)), t]
pad = (-sum(map(len, parts))) % 32  # keep the data section's alignment: grow the last token
parts[-2:] = [struct.pack("<Q", len(t) + pad), t + b"_" * pad]
kv = b"".join(parts)
out = struct.pack("<4sIQQ", magic, version, n_tensors, n_kv + 1) + kv + head[24:]
with open(dst, "wb") as f:
    f.write(out)
print(size + len(kv), file=open(dst + ".size", "w"))
EOF
python3 tests/hub/make_repos.py "$tmp/repos.json" --gguf "$tmp/tiny.gguf:$(cat "$tmp/tiny.gguf.size")" || exit 2
python3 tests/hub/server.py --repos "$tmp/repos.json" --port-file "$tmp/port" &
server=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
port=$(cat "$tmp/port") || exit 2

export HF_ENDPOINT="http://127.0.0.1:$port" KVPLAN_CACHE="$tmp/cache" HF_HUB_CACHE="$tmp/hf" HOME="$tmp/home"
export KVPLAN_HUB_TIMEOUT=2
unset HF_TOKEN HF_TOKEN_PATH HF_HOME HF_HUB_OFFLINE XDG_CACHE_HOME

# 1. a repo by id: config.json and four shards' headers, exact weights, under 1 MiB moved
reset
run 0 size Qwen/Qwen2.5-7B-Instruct --format json && {
    has out '"params": 7615616512,'
    has out '"weight_bytes": 15231233024,'
    lacks err "headers alone"
}
b=$(stat_of Qwen/Qwen2.5-7B-Instruct bytes) n=$(stat_of Qwen/Qwen2.5-7B-Instruct requests)
[ "$b" -gt 1000 ] && [ "$b" -lt 1048576 ] && ok || bad "Qwen2.5-7B-Instruct: $b bytes moved, want under 1 MiB"
run 0 show Qwen/Qwen2.5-7B-Instruct --format json && {
    has out '"source": "Qwen/Qwen2.5-7B-Instruct@main (kvplan'"'"'s cache)",'
    has out '"max_context": 131072,'
}
# a second run is the cache's: no request
[ "$(stat_of Qwen/Qwen2.5-7B-Instruct requests)" -eq "$n" ] && ok || bad "the second run asked the Hub again"
# --refresh asks where main is now (one request), and fetches nothing it has
reset
run 0 size Qwen/Qwen2.5-7B-Instruct --refresh && has out "weights       14.19 GiB  15,231,233,024 B  7,615,616,512 params"
[ "$(stat_of Qwen/Qwen2.5-7B-Instruct requests)" -eq 1 ] && ok || bad "--refresh: want one request"

# kvplan import writes what was fetched as kvplan YAML
run 0 import Qwen/Qwen2.5-7B-Instruct && has out "hf_id: Qwen/Qwen2.5-7B-Instruct"
# --explain says where the model was read from and in which order it was looked for
run 0 size Qwen/Qwen2.5-7B-Instruct --explain && has out "  read from Qwen/Qwen2.5-7B-Instruct@main (kvplan's cache): not a path or a built-in name, so a Hub reference, looked up in the Hugging Face cache, kvplan's cache, then the Hub (docs/hub.md)"

# 2. a tag: its own commit and config
run 0 show Qwen/Qwen2.5-7B-Instruct@v1 --format json && has out '"max_context": 4096,'

# 3. a gated repo: no token, a token without access, the granted one (never printed)
run 2 size meta-llama/Llama-3.1-8B@main && has err "meta-llama/Llama-3.1-8B is gated and no token was sent: accept its license at https://huggingface.co/meta-llama/Llama-3.1-8B and set HF_TOKEN"
HF_TOKEN=hf_other run 2 size meta-llama/Llama-3.1-8B@main && has err "the token's account has no access"
HF_TOKEN=hf_granted_token run 0 size meta-llama/Llama-3.1-8B@main --format json && has out '"params": 8030261248,'
lacks err hf_granted_token
lacks out hf_granted_token
# the token file huggingface_hub writes
rm -rf "$tmp/cache"
printf 'hf_granted_token\n' >"$tmp/token"
HF_TOKEN_PATH="$tmp/token" run 0 size meta-llama/Llama-3.1-8B@main

# 4. errors a user can act on, exit 2, no output
run 2 size nobody/nothing && has err "no model 'nobody/nothing' at http://127.0.0.1:$port"
[ -s "$tmp/out" ] && bad "an error wrote to stdout" || ok
run 2 size Qwen/Qwen2.5-7B-Instruct@nope && has err "has no revision 'nope'"
reset
run 2 size test/no-range && has err "the server ignored the Range request (HTTP 200, the whole file)"
b=$(stat_of test/no-range bytes)
[ "$b" -lt 67108864 ] && ok || bad "no-range: $b bytes sent before kvplan stopped"
run 2 size test/truncated && has err "truncated"
t0=$(date +%s)
run 2 size test/stall && has err "stalled for 2 s"
[ $(($(date +%s) - t0)) -lt 15 ] && ok || bad "a stalled server held kvplan for $(($(date +%s) - t0)) s"
run 2 size test/tiny-GGUF:Q2_K && has err "test/tiny-GGUF@main has no Q2_K GGUF (it has tiny-Q4_K_M.gguf, tiny-Q8_0.gguf)"
run 2 size org/name@ && has err "'org/name@': the revision after '@' is a branch, tag or commit"

# 5. GGUF repos: the type llama.cpp's -hf takes by default, a named one, a file, a URL;
# the header grown past 1 MiB, the weights from its tensor table
reset
run 0 size test/tiny-GGUF --format json && has out '"weight_bytes": 16061054976,'
b=$(stat_of test/tiny-GGUF bytes)
hb=$(wc -c <"$tmp/tiny.gguf")
[ "$b" -lt $((hb + 1048576)) ] && ok || bad "tiny-GGUF: $b bytes moved for a header of at most $hb"
run 0 show test/tiny-GGUF --format json && has out '"source": "test/tiny-GGUF@main: tiny-Q4_K_M.gguf (kvplan'"'"'s cache)",'
run 0 show test/tiny-GGUF:q8_0 --format json && has out '"source": "test/tiny-GGUF@main: tiny-Q8_0.gguf (http://127.0.0.1:'"$port"')",'
run 0 show hf://test/tiny-GGUF/tiny-Q8_0.gguf && has out "32 layers: 32 full; hidden 4096, vocab 128256, f16, max context 131,072"
run 0 size "http://127.0.0.1:$port/test/tiny-GGUF/resolve/main/tiny-Q8_0.gguf" --format json &&
    has out '"weight_bytes": 16061054976,'

# 6. a plan names a Hub model; kvplan check reads it like the CLI
cat >"$tmp/plan.yaml" <<'EOF'
kvplan_plan: 1
deployments:
  - name: qwen
    model: Qwen/Qwen2.5-7B-Instruct
    gpu: h100
    context: 32768
    assert:
      - min_concurrency: 4
EOF
run 0 check "$tmp/plan.yaml" && has out "PASS      min_concurrency at 32,768 tokens"

# 7. with the server stopped: the cache answers; a variant of a built-in is read from its id
kill "$server"
wait "$server" 2>/dev/null
server=""
run 0 size Qwen/Qwen2.5-7B-Instruct --format json && has out '"params": 7615616512,'
run 0 size meta-llama/Llama-3.1-8B-Instruct && has err "the Hub did not answer for 'meta-llama/Llama-3.1-8B-Instruct' (cannot reach http://127.0.0.1:$port"
run 2 size acme/unknown && has err "cannot reach http://127.0.0.1:$port"

# 8. offline: huggingface_hub's cache, laid out as it writes it (a blob, a link to it)
export HF_HUB_OFFLINE=1
snap="$tmp/hf/models--acme--llama-like/snapshots/89ab89ab89ab89ab89ab89ab89ab89ab89ab89ab"
mkdir -p "$snap" "$tmp/hf/models--acme--llama-like/refs" "$tmp/hf/models--acme--llama-like/blobs"
cp tests/data/hf/llama-2-7b.json "$tmp/hf/models--acme--llama-like/blobs/0f0f"
ln -s ../../blobs/0f0f "$snap/config.json"
printf '89ab89ab89ab89ab89ab89ab89ab89ab89ab89ab' >"$tmp/hf/models--acme--llama-like/refs/main"
run 0 show acme/llama-like --format json && {
    has out '"source": "acme/llama-like@main (the Hugging Face cache)",'
    has out '"params": 6738415616,'
}
run 2 size acme/elsewhere && has err "'acme/elsewhere' is not in the Hugging Face cache ($tmp/hf) or kvplan's ($tmp/cache), and HF_HUB_OFFLINE is set"
run 0 size meta-llama/Llama-3.1-8B-Instruct && has err "is read as llama-3.1-8b (the same geometry and weights)"

echo "hub: $pass passed, $fail failed"
[ $fail -eq 0 ]
