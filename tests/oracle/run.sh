#!/bin/sh
# tests/oracle/run.sh -- check kvplan's llamacpp profile against the real llama.cpp, byte for byte.
#
# `make oracle` runs it from the source root. It installs the prebuilt CPU
# llama.cpp that the npm package @node-llama-cpp/linux-x64@3.22.1 ships
# (release v0.5.0), takes the matching headers from the git bundle inside
# `npm pack node-llama-cpp@3.22.1`, builds tests/oracle/probe.c against them,
# writes each model's real shape as a sparse GGUF (kvplan export-gguf
# --sparse), and for every configuration compares llama.cpp's exact KV bytes
# (its memory breakdown, no_alloc: nothing is allocated) with
# `kvplan fit --engine llamacpp --format json` (k_bytes + v_bytes). Where
# llama.cpp refuses a configuration, kvplan must refuse it too.
# Downloads are cached under build/oracle/, so a second run is fast.
# Exit 0: every row agrees (or the npm registry cannot be reached: skipped);
# 1: a mismatch; 2: the setup failed.
set -u

PKG_VERSION=3.22.1
PKG="@node-llama-cpp/linux-x64@$PKG_VERSION"
O=${ORACLE_DIR:-build/oracle}
KVPLAN=${KVPLAN_BIN:-build/rel/kvplan}
export KVPLAN_DATADIR=${KVPLAN_DATADIR:-models}
LIB="$O/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
SRC="$O/llama.cpp"

mkdir -p "$O/gguf" "$O/models" || exit 2
[ -x "$KVPLAN" ] || { echo "oracle: $KVPLAN is not built (run make first)" >&2; exit 2; }
cp "$KVPLAN" "$O/kvplan" && KVPLAN="$O/kvplan" || exit 2 # a snapshot: a rebuild during the run cannot change it

# ---- 1. the prebuilt libraries and the matching headers (cached) ----------
if [ ! -f "$LIB/libllama.v0.5.0.so" ] || [ ! -f "$SRC/include/llama.h" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "oracle: SKIP: npm is not installed, cannot fetch llama.cpp"; exit 0
    fi
    if ! npm view "$PKG" version >/dev/null 2>&1; then
        echo "oracle: SKIP: the npm registry cannot be reached, cannot fetch $PKG"; exit 0
    fi
fi
if [ ! -f "$LIB/libllama.v0.5.0.so" ]; then
    echo "oracle: npm install $PKG"
    npm install --no-save --no-audit --no-fund --prefix "$O/npm" "$PKG" >"$O/npm.log" 2>&1 ||
        { cat "$O/npm.log" >&2; exit 2; }
fi
if [ ! -f "$SRC/include/llama.h" ]; then
    echo "oracle: npm pack node-llama-cpp@$PKG_VERSION (headers: the llama.cpp git bundle it ships)"
    rm -rf "$O/pack" "$SRC" && mkdir -p "$O/pack" &&
        (cd "$O/pack" && npm pack "node-llama-cpp@$PKG_VERSION" >pack.log 2>&1 &&
         tar xzf "node-llama-cpp-$PKG_VERSION.tgz" package/llama/gitRelease.bundle) &&
        git clone -q "$O/pack/package/llama/gitRelease.bundle" "$SRC" &&
        rm -rf "$O/pack" || { echo "oracle: cannot get the llama.cpp headers" >&2; exit 2; }
fi

# ---- 2. the probe ----------------------------------------------------------
PROBE="$O/probe"
if [ ! -x "$PROBE" ] || [ tests/oracle/probe.c -nt "$PROBE" ] || [ tests/oracle/breakdown.cpp -nt "$PROBE" ]; then
    echo "oracle: building $PROBE"
    ${CC:-cc} -O1 -Wall -c tests/oracle/probe.c -I"$SRC/include" -I"$SRC/ggml/include" -o "$O/probe.o" &&
        ${CXX:-c++} -std=c++17 -O1 -c tests/oracle/breakdown.cpp -I"$SRC/include" -I"$SRC/src" \
            -I"$SRC/ggml/include" -o "$O/breakdown.o" &&
        ${CXX:-c++} "$O/probe.o" "$O/breakdown.o" -L"$LIB" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so \
            -l:libggml-base.so -Wl,-rpath,"$(cd "$LIB" && pwd)" -o "$PROBE" || exit 2
fi
LIBABS=$(cd "$LIB" && pwd)

# ---- 3. models: shipped ones, plus small shapes for MQA, head dim 16 and SWA layouts
tiny() { # name, specs+layers text, tied embeddings (default true)
    printf 'kvplan: 1\nname: %s\ndtype: f16\nmax_context: 131072\nhidden: 256\nintermediate: 512\nvocab: 64\ntied_embeddings: %s\n%s\n' \
        "$1" "${3:-true}" "$2" >"$O/models/$1.yaml"
}
tiny oracle-mqa-hd16 'specs:
  attn: {kind: full, heads: 4, kv_heads: 1, head_dim: 16}
layers:
  - {spec: attn, count: 3}'
tiny oracle-gemma3-irregular 'family: gemma3
qk_norm: true
norms_per_layer: 4
specs:
  local: {kind: sliding, window: 300, heads: 4, kv_heads: 2, head_dim: 64}
  global: {kind: full, heads: 4, kv_heads: 2, head_dim: 64}
layers:
  - {spec: local, count: 2}
  - {spec: global, count: 1}
  - {spec: local, count: 1}
  - {spec: global, count: 2}'
tiny oracle-mla 'specs:
  mla: {kind: mla, heads: 4, head_dim_k: 48, head_dim_v: 32, kv_lora_rank: 64, qk_rope_dim: 16, q_lora_rank: 96}
layers:
  - {spec: mla, count: 3}' false

# falcon-7b is refused by the export (LayerNorm and a plain MLP: arch llama cannot express it)
# and shown as a skip. mistral-7b-v0.1 runs as arch llama, which llama.cpp runs without its
# 4096-token window: kvplan's llamacpp profile must size it with full layers too.
MODELS="llama-3.1-8b qwen2.5-7b llama-2-7b mistral-7b-v0.1 gemma-3-4b gemma-3-27b deepseek-v2-lite deepseek-v3
$O/models/oracle-mqa-hd16.yaml $O/models/oracle-gemma3-irregular.yaml $O/models/oracle-mla.yaml falcon-7b"
CONTEXTS="1000 4096 32769"
TYPES="f16/f16 bf16/bf16 q8_0/q8_0 q4_0/q4_0 q8_0/f16"

pass=0 fail=0 skip=0
TABLE="$O/table.md"
printf '| model | ctx | K | V | seqs | swa_full | fa | llama.cpp bytes | kvplan bytes | result |\n|---|---:|---|---|---:|---:|---|---:|---:|---|\n' >"$TABLE"
NOTES="$O/notes.txt"
: >"$NOTES"

row() { printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$@" >>"$TABLE"
        printf '%-26s %6s %-5s %-5s %2s %2s %4s %14s %14s  %s\n' "$@"; }

# compare MODEL GGUF CTX K V SEQS SWA FA
compare() {
    name=$(basename "$1" .yaml)
    lc=$(GGML_NO_BACKTRACE=1 "$PROBE" "$LIBABS" "$2" "$3" "$4" "$5" "$6" "$7" "$8" 2>"$O/probe.err")
    prc=$?
    set -- "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8"
    extra=""
    [ "$7" = 1 ] && extra="--swa-full"
    [ "$8" = 0 ] && extra="$extra --flash-attn off"
    kj=$("$KVPLAN" fit "$1" --engine llamacpp --gpu-memory 1TiB --context "$3" --k-dtype "$4" --v-dtype "$5" \
        --n-seq "$6" $extra --format json 2>"$O/kvplan.err")
    krc=$?
    fa=auto; [ "$8" = 0 ] && fa=off
    case $prc:$lc in
    0:ok*) lb=$(echo "$lc" | cut -d' ' -f2) ;;
    0:refused*) lb=refused ;;
    *) # llama.cpp aborted (GGML_ASSERT): it cannot run this configuration either
       lb=refused lc="refused (aborts) $(grep -m1 -i 'assert\|error' "$O/probe.err")" ;;
    esac
    if [ $krc -le 1 ] && [ -n "$kj" ]; then
        kb=$(printf '%s\n' "$kj" | awk -F: '/"(k|v)_bytes"/ { gsub(/[ ,]/, "", $2); s += $2 } END { printf "%.0f", s }')
        ndev=$(printf '%s\n' "$kj" | grep -c '"buffer_bytes"')
        [ "$ndev" = 1 ] || kb="$kb ($ndev devices)"
    else
        kb=refused
    fi
    if [ "$lb" = refused ] && [ "$kb" = refused ]; then
        res="both refuse"; pass=$((pass + 1))
        printf '%s ctx %s K %s V %s fa %s:\n  llama.cpp: %s\n  kvplan:    %s\n' "$name" "$3" "$4" "$5" "$fa" \
            "${lc#refused }" "$(tail -1 "$O/kvplan.err")" >>"$NOTES"
    elif [ "$lb" = "$kb" ]; then
        res=equal; pass=$((pass + 1))
    else
        res=MISMATCH; fail=$((fail + 1))
        printf 'MISMATCH %s ctx %s K %s V %s seqs %s swa_full %s fa %s: llama.cpp %s, kvplan %s\n  llama.cpp: %s\n  kvplan: %s\n' \
            "$name" "$3" "$4" "$5" "$6" "$7" "$fa" "$lb" "$kb" "$lc" "$(tail -1 "$O/kvplan.err")" >>"$NOTES"
    fi
    row "$name" "$3" "$4" "$5" "$6" "$7" "$fa" "$lb" "$kb" "$res"
}

printf '%-26s %6s %-5s %-5s %2s %2s %4s %14s %14s  %s\n' model ctx K V sq sw fa llama.cpp kvplan result
for model in $MODELS; do
    name=$(basename "$model" .yaml)
    gguf="$O/gguf/$name.gguf"
    arch=""
    [ "$name" = mistral-7b-v0.1 ] && arch="--arch llama" # as llama.cpp's converter writes it
    if ! "$KVPLAN" export-gguf "$model" "$gguf" --sparse --dense-moe $arch >/dev/null 2>"$O/export.err"; then
        echo "oracle: skip $name: $(cat "$O/export.err")" | tee -a "$NOTES"
        skip=$((skip + 1))
        continue
    fi
    swa=0
    grep -q sliding_window "$gguf" 2>/dev/null && swa=1
    for ctx in $CONTEXTS; do
        for kv in $TYPES; do
            for seqs in 1 4; do
                compare "$model" "$gguf" "$ctx" "${kv%/*}" "${kv#*/}" "$seqs" 0 -1
                [ $swa = 1 ] && compare "$model" "$gguf" "$ctx" "${kv%/*}" "${kv#*/}" "$seqs" 1 -1
            done
        done
    done
    # flash attention off: a quantized V needs it (llama.cpp refuses), a quantized K alone does not
    compare "$model" "$gguf" 4096 q8_0 f16 1 0 0
    compare "$model" "$gguf" 4096 f16 q8_0 1 0 0
done

# ---- 4. the random weights load and run: 32 decode steps with finite logits ----
for model in oracle-mqa-hd16 oracle-gemma3-irregular oracle-mla; do
    gguf="$O/gguf/$model-dense.gguf"
    if "$KVPLAN" export-gguf "$O/models/$model.yaml" "$gguf" --seed 1 >/dev/null 2>"$O/export.err" &&
        out=$(GGML_NO_BACKTRACE=1 "$PROBE" "$LIBABS" "$gguf" decode 32 2>/dev/null) && [ "${out%% *}" = ok ]; then
        echo "decode $model (random f32 weights, fa off, f32 cache): $out" >>"$NOTES"; pass=$((pass + 1))
    else
        echo "MISMATCH decode $model: $(cat "$O/export.err") ${out:-}" >>"$NOTES"; fail=$((fail + 1))
    fi
done

echo
cat "$NOTES"
echo
echo "oracle: llama.cpp v0.5.0 ($PKG): $pass agree, $fail mismatch, $skip skipped; table in $TABLE"
[ $fail -eq 0 ]
