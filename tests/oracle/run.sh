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
# Then, on the same weights, the reference decoder's logits against
# llama.cpp's (section 5): `export-gguf --ref-weights` writes the decoder's
# own f32 weights, tests/oracle/ref_logits.c prints its logits and the
# probe's `logits` mode prints llama.cpp's (flash attention off, f32 cache).
# Then (section 6), weights by llama.cpp file type: llama.cpp's own quantizer
# (llama_model_quantize) against kvplan's reading of the result and its
# prediction from the unquantized file. Section 7: the compute buffer llama.cpp
# reserves against kvplan's estimate of it (within 10%). Section 8: where each
# tensor lives under -ngl, --n-cpu-moe and --no-kv-offload (a fake GPU in the
# probe): weights and KV per device and in host memory, byte for byte.
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
if [ ! -x "$PROBE" ] || [ tests/oracle/probe.c -nt "$PROBE" ] || [ tests/oracle/breakdown.cpp -nt "$PROBE" ] ||
    [ tests/oracle/fakegpu.c -nt "$PROBE" ]; then
    echo "oracle: building $PROBE"
    ${CC:-cc} -O1 -Wall -c tests/oracle/probe.c -I"$SRC/include" -I"$SRC/ggml/include" -o "$O/probe.o" &&
        ${CC:-cc} -O1 -Wall -c tests/oracle/fakegpu.c -I"$SRC/ggml/include" -I"$SRC/ggml/src" -o "$O/fakegpu.o" &&
        ${CXX:-c++} -std=c++17 -O1 -c tests/oracle/breakdown.cpp -I"$SRC/include" -I"$SRC/src" \
            -I"$SRC/ggml/include" -o "$O/breakdown.o" &&
        ${CXX:-c++} "$O/probe.o" "$O/fakegpu.o" "$O/breakdown.o" -L"$LIB" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so \
            -l:libggml-base.so -Wl,-rpath,"$(cd "$LIB" && pwd)" -o "$PROBE" || exit 2
fi
LIBABS=$(cd "$LIB" && pwd)
REFL="$O/ref_logits"
if [ ! -x "$REFL" ] || [ tests/oracle/ref_logits.c -nt "$REFL" ] || [ build/rel/libkvplan.a -nt "$REFL" ]; then
    echo "oracle: building $REFL"
    ${CC:-cc} -std=c11 -O1 -Wall -Iinclude tests/oracle/ref_logits.c build/rel/libkvplan.a \
        $(pkg-config --libs yaml-0.1 2>/dev/null || echo -lyaml) -lm -pthread -o "$REFL" || exit 2
fi

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
    [ -n "${PROBE_UBATCH:-}" ] && extra="$extra --n-ubatch $PROBE_UBATCH"
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
        ndev=$(printf '%s\n' "$kj" | awk '/"devices"/ { d = 1 } /"host"/ { d = 0 } d && /"buffer_bytes"/ { n++ }
            END { print n + 0 }')
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
    # n_seq_max is at most 256 (both refuse 300); -ub 4096 is capped at n_batch 2048 (SWA cells)
    if [ "$name" = llama-3.1-8b ]; then
        compare "$model" "$gguf" 4096 f16 f16 256 0 -1
        compare "$model" "$gguf" 4096 f16 f16 300 0 -1
    fi
    if [ $swa = 1 ]; then
        export PROBE_UBATCH=4096
        compare "$model" "$gguf" 32768 f16 f16 1 0 -1
        unset PROBE_UBATCH
    fi
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

# ---- 5. logits on the same weights: the reference decoder against llama.cpp ----
# Both sides compute in fp32 on the same floats; they differ only in rounding
# (summation order, expf, RoPE angles in float vs double), measured at
# ~2e-7 of max |logit|. The bound, 2e-6 of max |logit| over every step and
# vocab entry, is 10x that, and still catches a convention off by a hair:
# rms eps 1e-6 instead of 1e-5 moves the logits by 1.2e-5 relative, a RoPE
# base of 10001 instead of 10000 by 3.6e-6 (GQA shape below, measured once
# by patching the GGUF); a wrong rope pairing, eps or untied head is ~1e-1.
LTOL=${ORACLE_LOGITS_TOL:-2e-6} # the bound can be set for a run, to see the check fail
LSTEPS=32
LTABLE="$O/logits.md"
printf '| shape | heads / kv heads x head dim | layers | steps | vocab | max abs(logit) | max abs(delta) | relative | bound | result |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n' >"$LTABLE"
refmodel() { # name, heads, kv heads, head dim, layers, tied
    printf 'kvplan: 1\nname: %s\ndtype: f32\nmax_context: 4096\nhidden: 256\nintermediate: 512\nvocab: 512\ntied_embeddings: %s\nspecs:\n  attn: {kind: full, heads: %s, kv_heads: %s, head_dim: %s}\nlayers:\n  - {spec: attn, count: %s}\n' \
        "$1" "$6" "$2" "$3" "$4" "$5" >"$O/models/$1.yaml"
}
refmodel oracle-ref-gqa 8 2 32 4 true
refmodel oracle-ref-mqa 6 1 48 4 true # 6 x 48 = 288 != hidden: key_length is read, not derived
refmodel oracle-ref-mha 4 4 64 3 false
seed=11
for model in oracle-ref-gqa oracle-ref-mqa oracle-ref-mha; do
    seed=$((seed + 1))
    yaml="$O/models/$model.yaml" gguf="$O/gguf/$model.gguf"
    layers=$(sed -n 's/.*count: \([0-9]*\)}/\1/p' "$yaml")
    geo=$(sed -n 's/.*heads: \([0-9]*\), kv_heads: \([0-9]*\), head_dim: \([0-9]*\)}/\1 \/ \2 x \3/p' "$yaml")
    if ! "$KVPLAN" export-gguf "$yaml" "$gguf" --ref-weights --seed $seed >/dev/null 2>"$O/export.err" ||
        ! "$REFL" "$yaml" $seed $LSTEPS >"$O/$model.ref.txt" 2>"$O/ref.err" ||
        ! GGML_NO_BACKTRACE=1 "$PROBE" "$LIBABS" "$gguf" logits $LSTEPS >"$O/$model.llama.txt" 2>"$O/probe.err"; then
        echo "MISMATCH logits $model: cannot run: $(cat "$O/export.err" "$O/ref.err") $(head -c 300 "$O/$model.llama.txt")" >>"$NOTES"
        fail=$((fail + 1))
        continue
    fi
    # steps, max |delta| over steps x vocab, max |logit| (reference), their ratio; "bad" when the runs differ in shape
    r=$(awk 'NR == FNR { for (i = 2; i <= NF; i++) ref[$1, i] = $i; nf[$1] = NF; next }
        { if (!($1 in nf) || nf[$1] != NF) { bad = 1; next }
          for (i = 2; i <= NF; i++) { d = $i - ref[$1, i]; if (d < 0) d = -d; if (d > md) md = d
              a = ref[$1, i]; if (a < 0) a = -a; if (a > ma) ma = a }
          n++; v = NF - 1 }
        END { if (bad || n == 0 || ma == 0) { print "bad"; exit }
              printf "%d %d %.4g %.3g %.3g\n", n, v, ma, md, md / ma }' "$O/$model.ref.txt" "$O/$model.llama.txt")
    set -- $r
    if [ "$1" = bad ] || [ "$1" != $LSTEPS ] || [ "$(wc -l <"$O/$model.ref.txt")" != $LSTEPS ]; then
        res=MISMATCH; fail=$((fail + 1))
        echo "MISMATCH logits $model: the runs differ in steps or vocab ($r)" >>"$NOTES"
        set -- - - - - -
    elif awk -v r="$5" -v t=$LTOL 'BEGIN { exit !(r <= t) }'; then
        res=within; pass=$((pass + 1))
    else
        res=MISMATCH; fail=$((fail + 1))
        echo "MISMATCH logits $model: max |dlogit| $4 is $5 of max |logit| $3, over the bound $LTOL" >>"$NOTES"
    fi
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$model" "$geo" "$layers" "$1" "$2" "$3" "$4" "$5" $LTOL "$res" >>"$LTABLE"
    echo "logits $model ($geo, $layers layers, seed $seed, fa off, f32 cache): $1 steps x $2 vocab, max |logit| $3," \
        "max |dlogit| $4 = $5 relative (bound $LTOL): $res" >>"$NOTES"
done

# ---- 6. weights by file type: llama.cpp's quantizer against kvplan ----------
# For each shape and llama.cpp file type: llama_model_quantize (the probe's
# `quantize` mode, all of a shape's file types in one process) turns kvplan's
# sparse f16 export SRC into OUT and reads OUT's tensor table back with
# ggml's reader (sum of gguf_get_tensor_size).
# (a) kvplan reads OUT: `kvplan size OUT` weight_bytes (the GGUF tensor table)
#     must equal it to the byte;
# (b) kvplan predicts it from SRC: `kvplan size SRC --weight-dtype FTYPE`
#     (gguf_mix.c, llama.cpp's rules) must be within 2%; exact is reported.
# The shapes have real layer counts (attn_v and ffn_down rules by position):
# 32 layers with GQA 4; 80 layers with GQA 8 (llama.cpp's 70B rule); hidden
# 320 with MHA and tied embeddings (no K-quant block divides a row: every
# fallback); and the MLA (3-D attn_k_b/attn_v_b) and gemma3 shapes of section 3.
QTABLE="$O/quant.md"
printf '| shape | file type | llama.cpp bytes | kvplan table | (a) | kvplan predicted | (b) |\n|---|---|---:|---:|---|---:|---|\n' >"$QTABLE"
wqmodel() { # name, hidden, intermediate, vocab, tied, heads, kv heads, head dim, layers
    printf 'kvplan: 1\nname: %s\ndtype: f16\nmax_context: 4096\nhidden: %s\nintermediate: %s\nvocab: %s\ntied_embeddings: %s\nspecs:\n  attn: {kind: full, heads: %s, kv_heads: %s, head_dim: %s}\nlayers:\n  - {spec: attn, count: %s}\n' \
        "$@" >"$O/models/$1.yaml"
}
wqmodel oracle-wq-gqa 256 768 512 false 8 2 32 32
wqmodel oracle-wq-80 256 512 256 false 8 1 32 80
wqmodel oracle-wq-odd 320 864 500 true 5 5 64 12
# name:llama_ftype id (include/llama.h)
FT_ALL="q4_0:2 q4_1:3 q5_0:8 q5_1:9 q8_0:7 f16:1 bf16:32 q2_k:10 q2_k_s:21 q3_k_s:11 q3_k_m:12 q3_k_l:13
q4_k_s:14 q4_k_m:15 q5_k_s:16 q5_k_m:17 q6_k:18 iq4_nl:25 iq4_xs:30 iq3_s:26 iq3_m:27 iq3_xs:22 iq3_xxs:23
iq2_xxs:19 iq2_xs:20 iq2_s:28 iq2_m:29 iq1_s:24 iq1_m:31 tq1_0:36 tq2_0:37 mxfp4_moe:38"
FT_KQ="q4_0:2 q8_0:7 q2_k:10 q3_k_s:11 q3_k_m:12 q3_k_l:13 q4_k_s:14 q4_k_m:15 q5_k_m:17 q6_k:18 iq4_xs:30 iq3_s:26"
FT_FEW="q4_0:2 q8_0:7 q2_k:10 q4_k_m:15 q6_k:18 iq4_xs:30 mxfp4_moe:38"
weight_bytes() { "$KVPLAN" size "$@" --format json 2>"$O/kvplan.err" | sed -n 's/.*"weight_bytes": *\([0-9]*\).*/\1/p' | head -1; }
qstart=$(date +%s)
for job in "oracle-wq-gqa:$FT_ALL" "oracle-wq-80:$FT_KQ" "oracle-wq-odd:$FT_ALL" "oracle-mla:$FT_FEW" \
    "oracle-gemma3-irregular:$FT_FEW"; do
    model=${job%%:*} src="$O/gguf/${job%%:*}-f16.gguf" out="$O/gguf/quantized"
    if ! "$KVPLAN" export-gguf "$O/models/$model.yaml" "$src" --sparse >/dev/null 2>"$O/export.err"; then
        echo "MISMATCH weights $model: export refused: $(cat "$O/export.err")" >>"$NOTES"; fail=$((fail + 1))
        continue
    fi
    ids=$(for ft in ${job#*:}; do printf '%s ' "${ft#*:}"; done)
    # one line per file type as the quantizer finishes it (OUT-<id>.gguf); the
    # loop runs in a subshell, so it leaves its verdicts in the table only
    GGML_NO_BACKTRACE=1 "$PROBE" "$LIBABS" "$src" quantize "$out" $ids 2>"$O/probe.err" | while read -r id lc; do
        name=$(for ft in ${job#*:}; do [ "${ft#*:}" = "$id" ] && echo "${ft%:*}"; done)
        q="$out-$id.gguf"
        if [ "${lc%% *}" != ok ]; then
            echo "MISMATCH weights $model $name: llama.cpp cannot quantize: $lc" >>"$NOTES"
            printf '| %s | %s | refused | | MISMATCH | | |\n' "$model" "$name" >>"$QTABLE"; continue
        fi
        lb=$(echo "$lc" | cut -d' ' -f2)
        kt=$(weight_bytes "$q"); kt=${kt:-refused}
        kp=$(weight_bytes "$src" --weight-dtype "$name"); kp=${kp:-refused}
        rm -f "$q"
        ra=MISMATCH rb=MISMATCH
        [ "$kt" = "$lb" ] && ra=equal
        if [ "$kp" = "$lb" ]; then rb=equal
        elif [ "$kp" != refused ]; then
            rb=$(awk -v p="$kp" -v l="$lb" 'BEGIN { d = (p - l) / l * 100; printf "%+.2f%%", d; exit !(d <= 2 && d >= -2) }') ||
                rb="MISMATCH $rb"
        fi
        case "$ra $rb" in *MISMATCH*)
            printf 'MISMATCH weights %s %s: llama.cpp %s (%s), kvplan table %s, predicted %s %s\n' "$model" "$name" \
                "$lb" "$(echo "$lc" | cut -d' ' -f4-)" "$kt" "$kp" "$(tail -1 "$O/kvplan.err")" >>"$NOTES" ;;
        esac
        printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$model" "$name" "$lb" "$kt" "$ra" "$kp" "$rb" >>"$QTABLE"
    done
done
nq=$(grep -c '^| oracle' "$QTABLE") qbad=$(grep -c 'MISMATCH' "$QTABLE")
pass=$((pass + nq - qbad)) fail=$((fail + qbad))
echo "weights by file type: $nq quantizations in $(($(date +%s) - qstart)) s, table in $QTABLE" >>"$NOTES"

# ---- 7. compute buffers: llama.cpp's graph reserve against kvplan's estimate ----
# The probe's breakdown `compute` field (what llama_init_from_model reserves
# for the worst-case micro-batch, CPU backend) against `kvplan fit --format
# json` activation_bytes, over shapes (GQA, large vocab, SWA, MLA, a wide MLP),
# contexts, -ub/-b, flash attention and -np. kvplan reads the same GGUF the
# probe loads, so both see the same shape (MoE layers written dense: these
# rows check dense MLPs only). kvplan's formula was read off the llama-3.1-8b
# rows (the MLA latents off deepseek-v2-lite at -c 16384, the MLP phase off
# mixtral-8x7b's dense 14336-wide MLPs); a row agrees within CTOL percent.
CTOL=10
CTABLE="$O/compute.md"
printf '| model | ctx | -ub | -b | fa | -np | llama.cpp compute B | kvplan B | error | result |\n|---|---:|---:|---:|---|---:|---:|---:|---:|---|\n' >"$CTABLE"
cmodel() { # name: the GGUF of section 3, or exported here
    [ -f "$O/gguf/$1.gguf" ] || "$KVPLAN" export-gguf "$1" "$O/gguf/$1.gguf" --sparse --dense-moe >/dev/null 2>"$O/export.err"
}
for model in llama-3.1-8b qwen2.5-7b gemma-3-4b deepseek-v2-lite mixtral-8x7b; do
    if ! cmodel "$model"; then
        echo "oracle: skip compute $model: $(cat "$O/export.err")" | tee -a "$NOTES"; skip=$((skip + 1)); continue
    fi
    for ctx in 1000 4096 16384; do for ub in 512 2048; do for b in 2048 256; do for fa in 0 1; do for np in 1 4; do
        [ "$b" = 256 ] && [ "$ub" = 2048 ] || [ "$b" = 2048 ] || continue
        lc=$(PROBE_UBATCH=$ub PROBE_BATCH=$b GGML_NO_BACKTRACE=1 "$PROBE" "$LIBABS" "$O/gguf/$model.gguf" $ctx f16 f16 \
            $np 0 $fa 2>"$O/probe.err")
        fo=on; [ $fa = 0 ] && fo=off
        kb=$("$KVPLAN" fit "$O/gguf/$model.gguf" --engine llamacpp --gpu-memory 1TiB --context $ctx --n-seq $np --n-ubatch $ub \
            --n-batch $b --flash-attn $fo --format json 2>"$O/kvplan.err" |
            awk -F: '/"activation_bytes"/ { gsub(/[ ,]/, "", $2); print $2 }')
        lb=$(echo "$lc" | awk '$1 == "ok" { print $4 }')
        if [ -z "$lb" ] || [ -z "$kb" ]; then
            res=MISMATCH err="" fail=$((fail + 1))
            echo "MISMATCH compute $model ctx $ctx ub $ub b $b fa $fa np $np: llama.cpp '$lc', kvplan '$kb' $(tail -1 "$O/kvplan.err")" >>"$NOTES"
        else
            err=$(awk -v k="$kb" -v l="$lb" 'BEGIN { printf "%+.1f%%", (k - l) / l * 100 }')
            if awk -v k="$kb" -v l="$lb" -v t=$CTOL 'BEGIN { d = (k - l) / l * 100; exit !(d <= t && d >= -t) }'; then
                res=within pass=$((pass + 1))
            else
                res=MISMATCH fail=$((fail + 1))
                echo "MISMATCH compute $model ctx $ctx ub $ub b $b fa $fa np $np: llama.cpp $lb, kvplan $kb ($err)" >>"$NOTES"
            fi
        fi
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$model" $ctx $ub $b $fa $np "$lb" "$kb" "$err" "$res" >>"$CTABLE"
    done; done; done; done; done
done
echo "compute buffers: $(grep -c '| within' "$CTABLE") of $(($(grep -c '^| ' "$CTABLE") - 1)) rows within $CTOL%, worst $(awk -F'|' 'NR > 2 { e = $10; gsub(/[ %+]/, "", e); e += 0; e = e < 0 ? -e : e; if (e > m) m = e } END { printf "%.1f%%", m }' "$CTABLE"), table in $CTABLE" >>"$NOTES"

# ---- 8. where each tensor lives: -ngl, --n-cpu-moe, --no-kv-offload --------
# The probe gives llama.cpp one GPU (tests/oracle/fakegpu.c: a device with
# ggml-cuda's alignment, row padding and offload rule) and reports each buffer
# type's model and context bytes; kvplan fit on the same GGUF gives devices[0]
# (weights_bytes, buffer_bytes + recurrent_bytes) and host. Both figures of
# both places must be equal, byte for byte. The compute buffers are kvplan's
# estimates (activation_bytes, host compute_bytes), shown with their error,
# not checked.
PTABLE="$O/placement.md"
{ printf '| model | -ngl | --n-cpu-moe | -nkvo | K/V | GPU weights | GPU KV | host weights | host KV '
  printf '| kvplan GPU weights | kvplan GPU KV | kvplan host weights | kvplan host KV | result '
  printf '| GPU compute: llama.cpp: kvplan est. | host compute: llama.cpp: kvplan est. |\n'
  printf '|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n'; } >"$PTABLE"
placement() { # name gguf ngl ncmoe nkvo kv
    env PROBE_NGL=$3 ${4:+PROBE_NCMOE=$4} ${5:+PROBE_NKVO=1} GGML_NO_BACKTRACE=1 \
        "$PROBE" "$LIBABS" "$2" 4096 "$6" "$6" 1 0 -1 >"$O/place.out" 2>"$O/probe.err"
    lc=$(cat "$O/place.out")
    # FAKE0=model/context/compute CPU=...
    lg=$(echo "$lc" | tr ' ' '\n' | awk -F'[=/]' '$1 == "FAKE0" { print $2, $3, $4 }')
    lh=$(echo "$lc" | tr ' ' '\n' | awk -F'[=/]' '$1 == "CPU" { print $2, $3, $4 }')
    kj=$("$KVPLAN" fit "$2" --engine llamacpp --gpu-memory 1TiB --context 4096 --kv-dtype "$6" --n-gpu-layers "$3" \
        ${4:+--n-cpu-moe $4} ${5:+--no-kv-offload} --format json 2>"$O/kvplan.err")
    kv=$(printf '%s\n' "$kj" | awk '/"devices"/ { d = 1 } /"host"/ { d = 2 }
        d && /"(weights|buffer|recurrent)_bytes"/ { v = $2; gsub(/[ ,]/, "", v); n = $1
            if (n ~ /weights/) w[d] = v; else kvb[d] += v }
        /"activation_bytes"/ { a = $2; gsub(/[ ,]/, "", a) }
        d == 2 && /"compute_bytes"/ { hc = $2; gsub(/[ ,]/, "", hc) }
        END { printf "%s %s %s %s %s %s", w[1], kvb[1], w[2], kvb[2], a, hc }')
    if [ "${lc%% *}" = refused ] && [ -z "$kj" ]; then # both refuse (a cache type the head dim cannot take)
        pass=$((pass + 1))
        printf '| %s | %s | %s | %s | %s | refused | | | | refused | | | | both refuse | | |\n' "$1" "$3" "${4:-0}" \
            "${5:+yes}" "$6" >>"$PTABLE"
        return
    fi
    set -- "$1" "$3" "${4:-0}" "${5:+yes}" "$6" $lg $lh $kv
    # 1 name 2 ngl 3 ncmoe 4 nkvo 5 kv; llama.cpp 6 gw 7 gkv 8 gc 9 hw 10 hkv 11 hc;
    # kvplan 12 gw 13 gkv 14 hw 15 hkv 16 act 17 host compute
    if [ $# -lt 17 ]; then
        res=MISMATCH; fail=$((fail + 1))
        echo "MISMATCH placement $1 -ngl $2 --n-cpu-moe $3 ${4:+-nkvo }$5: llama.cpp '$lc'," \
            "kvplan '$kv' $(tail -1 "$O/kvplan.err")" >>"$NOTES"
        printf '| %s | %s | %s | %s | %s | | | | | | | | | MISMATCH | | |\n' "$1" "$2" "$3" "${4:-no}" "$5" >>"$PTABLE"
        return
    fi
    if [ "$6 $7 $9 ${10}" = "${12} ${13} ${14} ${15}" ]; then
        res=equal; pass=$((pass + 1))
    else
        res=MISMATCH; fail=$((fail + 1))
        echo "MISMATCH placement $1 -ngl $2 --n-cpu-moe $3 ${4:+-nkvo }$5: llama.cpp GPU $6/$7 host $9/${10}," \
            "kvplan GPU ${12}/${13} host ${14}/${15}" >>"$NOTES"
    fi
    est='BEGIN { if (l > 0) printf "%s (%+.1f%%)", k, (k - l) / l * 100; else printf "%s", k }'
    cerr=$(awk -v k="${16}" -v l="$8" "$est") herr=$(awk -v k="${17}" -v l="${11}" "$est")
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s: %s | %s: %s |\n' \
        "$1" "$2" "$3" "${4:-no}" "$5" \
        "$6" "$7" "$9" "${10}" "${12}" "${13}" "${14}" "${15}" "$res" "$8" "$cerr" "${11}" "$herr" >>"$PTABLE"
}
# shapes: dense GQA (llama-3.1-8b), SWA (gemma-3-4b), MLA (deepseek-v2-lite, its MoE written dense), routed
# experts (mixtral-8x7b's real shape and a small one), and the tied small MQA shape of section 3
tiny oracle-moe 'moe: {experts: 8, active: 2, intermediate: 128}
specs:
  attn: {kind: full, heads: 4, kv_heads: 2, head_dim: 64, mlp: moe}
layers:
  - {spec: attn, count: 4}' false
for job in llama-3.1-8b:32:dense gemma-3-4b:34:dense deepseek-v2-lite:27:dense oracle-mqa-hd16:3:dense \
    mixtral-8x7b:32:moe "$O/models/oracle-moe.yaml:4:moe"; do
    model=${job%%:*} rest=${job#*:}; nl=${rest%%:*} kind=${rest#*:}
    name=$(basename "$model" .yaml) gguf="$O/gguf/$name-place.gguf"
    case $kind in dense) dm=--dense-moe ;; *) dm= ;; esac
    [ -f "$O/models/$name.yaml" ] && model="$O/models/$name.yaml"
    if ! "$KVPLAN" export-gguf "$model" "$gguf" --sparse $dm >/dev/null 2>"$O/export.err"; then
        echo "MISMATCH placement $name: export refused: $(cat "$O/export.err")" >>"$NOTES"; fail=$((fail + 1)); continue
    fi
    half=$((nl / 2))
    for ngl in 0 1 $half $nl $((nl + 1)); do
        placement "$name" "$gguf" $ngl "" "" f16
    done
    placement "$name" "$gguf" $half "" "" q8_0
    placement "$name" "$gguf" $half "" 1 f16
    placement "$name" "$gguf" $((nl + 1)) "" 1 q8_0
    if [ $kind = moe ]; then
        placement "$name" "$gguf" $((nl + 1)) $half "" f16
        placement "$name" "$gguf" $((nl + 1)) $nl "" q8_0
        placement "$name" "$gguf" $half $((half + 1)) "" f16
        placement "$name" "$gguf" $((nl + 1)) 1 1 f16
    fi
    rm -f "$gguf"
done
echo "placement: $(($(grep -c '^| ' "$PTABLE") - 1)) rows, $(grep -c '| equal |' "$PTABLE") equal," \
    "$(grep -c '| both refuse |' "$PTABLE") both refuse, table in $PTABLE" >>"$NOTES"

echo
cat "$NOTES"
echo
echo "oracle: llama.cpp v0.5.0 ($PKG): $pass agree, $fail mismatch, $skip skipped; tables in $TABLE, $LTABLE, $QTABLE, $CTABLE, $PTABLE"
[ $fail -eq 0 ]
