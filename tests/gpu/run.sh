#!/bin/sh
# tests/gpu/run.sh -- the CUDA reference decoder on a machine WITH an NVIDIA GPU,
# in one go: build (make cuda-build, needs nvcc), validate (cache bytes vs
# kvp_kv_compute, cudaMemGetInfo delta vs the granularity model, logits vs the
# CPU decoder) over formats, policies and a sliding-window model, then the
# decode benchmark against the roofline. Writes everything to stdout and, when
# $OUT is set, to $OUT/gpu-run.txt (and the JSON runs to $OUT/*.json).
# Exit status: the number of failed steps (0 = every check held).
# Usage: sh tests/gpu/run.sh   (about 5 minutes on an H100/H200, most of it the benchmark)
cd "$(dirname "$0")/../.." || exit 2
log=${OUT:+$OUT/gpu-run.txt}
bin=build/cuda/kvplan
fails=0
say() { if [ -n "$log" ]; then printf '%s\n' "$*" | tee -a "$log"; else printf '%s\n' "$*"; fi; }
run() { # name, then kvplan arguments
    name=$1; shift
    say "== $name: kvplan $*"
    if [ -n "$OUT" ]; then
        KVPLAN_DATADIR=models timeout 300 "$bin" "$@" >"$OUT/$name.out" 2>&1; rc=$?
        tee -a "$log" <"$OUT/$name.out"
    else
        KVPLAN_DATADIR=models timeout 300 "$bin" "$@" 2>&1; rc=$?
    fi
    say "== $name: exit $rc"
    [ "$rc" -eq 0 ] || fails=$((fails + 1))
}
[ -z "$OUT" ] || mkdir -p "$OUT" && : >"${log:-/dev/null}"
say "== $(date -u) $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1)"
if [ ! -x "$bin" ]; then
    make cuda-build >"${OUT:-/tmp}/build.log" 2>&1 || { say "== make cuda-build failed:"; tail -30 "${OUT:-/tmp}/build.log"; exit 99; }
fi
run static-bf16   validate llama-3.1-8b --device cuda
run static-f32    validate llama-3.1-8b --device cuda --kv-dtype f32 --batch 4
run static-f16    validate llama-3.1-8b --device cuda --kv-dtype f16
run static-fp8    validate llama-3.1-8b --device cuda --kv-dtype fp8
run static-int8   validate llama-3.1-8b --device cuda --kv-dtype int8 --batch 3
run static-int4   validate qwen2.5-7b --device cuda --k-dtype int8 --v-dtype int4:group=64:zp=no
run paged-bf16    validate llama-3.1-8b --device cuda --policy paged --block-size 16 --batch 2
run paged-fp8     validate llama-3.1-8b --device cuda --policy paged --block-size 256 --kv-dtype fp8 --context 1000
run sliding       validate gemma-3-4b --device cuda --context 1100 --batch 2
run sliding-paged validate gemma-3-4b --device cuda --context 1100 --policy paged --block-size 64
run json          validate mistral-7b-v0.1 --device cuda --format json
run bench         validate llama-3.1-8b --device cuda --bench
say "== done: $fails failed"
exit $fails
