#!/bin/sh
# run.sh -- run kvplan's libFuzzer harnesses (called by `make fuzz` / `make fuzz-smoke`).
#
#     sh tests/fuzz/run.sh BUILD_DIR SECONDS NAME...
#
# For each NAME (the Makefile's FUZZ_NAMES): replay every input under
# tests/data/fuzz-regressions/NAME/, then fuzz for SECONDS (0: no limit) from
# the corpus BUILD_DIR/corpus/NAME (seeded by the Makefile) with a 1 s
# per-input timeout (issue #20: no input costs more than a second, even under
# the sanitizers) and a 2 GiB memory limit; with FUZZ_RUNS set (make
# fuzz-long), until that many executions. A crash, leak, slow input or
# out-of-memory leaves BUILD_DIR/artifacts/NAME-* and makes the script fail.
# Prints one summary line per harness:
# "fuzz NAME: RUNS runs in S s (N exec/s), corpus C, ok" (or the find).
set -u
out=$1 secs=$2
shift 2
status=0
runs_opt=
[ -n "${FUZZ_RUNS:-}" ] && runs_opt=-runs=$FUZZ_RUNS
mkdir -p "$out/artifacts"
echo "fuzz: $(date -u '+%Y-%m-%d %H:%M UTC'), ${FUZZ_RUNS:-no} run limit, ${secs} s time limit (0: none), $(nproc) cores"
for name in "$@"; do
    bin=$out/fuzz_$name
    regress=tests/data/fuzz-regressions/$name
    if [ -d "$regress" ] && [ -n "$(ls -A "$regress" 2>/dev/null)" ]; then
        if ! "$bin" -rss_limit_mb=2048 -timeout=1 "$regress"/* >"$out/$name-regress.log" 2>&1; then
            echo "fuzz $name: a regression input fails again (see $out/$name-regress.log)"
            tail -30 "$out/$name-regress.log"
            status=1
            continue
        fi
    fi
    dict=
    [ -f "tests/fuzz/$name.dict" ] && dict=-dict=tests/fuzz/$name.dict
    start=$(date +%s)
    "$bin" -max_total_time="$secs" $runs_opt -timeout=1 -rss_limit_mb=2048 -print_final_stats=1 $dict \
        -artifact_prefix="$out/artifacts/$name-" "$out/corpus/$name" >"$out/$name.log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$name.log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out/$name.log")
    corpus=$(ls "$out/corpus/$name" | wc -l)
    if [ $rc -eq 0 ]; then
        echo "fuzz $name: ${runs:-?} runs in $took s (${rate:-?} exec/s), corpus $corpus, ok"
    else
        echo "fuzz $name: FAILED after ${runs:-?} runs (exit $rc); artifacts in $out/artifacts, log $out/$name.log"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz: )|runtime error|^    #[0-9] ' "$out/$name.log" | head -30
        status=1
    fi
done
exit $status
