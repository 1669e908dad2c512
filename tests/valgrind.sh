#!/bin/sh
# make valgrind: each test binary given and ten CLI commands under memcheck,
# VALGRIND_JOBS processes at a time (default: the CPUs; memcheck runs a
# process's threads one at a time, so suites side by side are what uses a
# second core), the longest suites first. Memory errors and definite/indirect
# leaks fail it (any non-empty per-process log under build/valgrind/); a suite's
# own test failures are `make check`'s business. Suites fork (CK_FORK=yes) so
# Check's timeouts still bound a hanging test; a test that timed out or died of
# a signal was only partly checked, and that fails it too.
# Environment: VALGRIND_BIN (the kvplan binary), VALGRIND_EXCLUDE (Check tags
# left out), VALGRIND_JOBS.
command -v valgrind >/dev/null || { echo "valgrind: not installed (apt-get install valgrind)"; exit 1; }
bin=${VALGRIND_BIN:?}
jobs=${VALGRIND_JOBS:-$(nproc 2>/dev/null || echo 1)}
rm -rf build/valgrind && mkdir -p build/valgrind || exit 1
start=$(date +%s)

# one job: "suite PATH" or "cli N ARGS..."
run_one() {
    kind=$1; shift
    if [ "$kind" = suite ]; then
        name=$(basename "$1"); s=$(date +%s)
        KVPLAN_DATADIR=models KVPLAN_BIN=$bin CK_FORK=yes CK_TIMEOUT_MULTIPLIER=3 \
            CK_EXCLUDE_TAGS="$VALGRIND_EXCLUDE" valgrind -q --error-exitcode=1 --leak-check=full \
            --errors-for-leak-kinds=definite,indirect --log-file="build/valgrind/$name.%p.log" \
            "./$1" >"build/valgrind/$name.out" 2>&1
        rc=$?
        echo "valgrind: $1 (suite exit $rc, $(( $(date +%s) - s )) s): $(grep -h '^[0-9]*%: Checks' \
            "build/valgrind/$name.out")"
    else
        name=cli-$1; shift
        KVPLAN_DATADIR=models valgrind -q --error-exitcode=1 --leak-check=full \
            --errors-for-leak-kinds=definite,indirect --log-file="build/valgrind/$name.%p.log" \
            "./$bin" "$@" >/dev/null 2>&1
        echo "valgrind: kvplan $* (exit $?)"
    fi
}

# the jobs, one per line: the three largest suites first so they do not start last
{
    for t in "$@"; do
        case $t in */check_serve | */check_ref | */check_tui) echo "suite $t" ;; esac
    done
    for t in "$@"; do
        case $t in */check_serve | */check_ref | */check_tui) ;; *) echo "suite $t" ;; esac
    done
    i=0
    for args in "size llama-3.1-8b --context 128k --explain" "size deepseek-v3 --context 32k --format json" \
        "show gemma-3-27b" "models" "gpus" "import tests/data/hf/qwen3-next-80b-a3b-instruct.json" \
        "fit llama-3.1-8b --gpu rtx-3090 --context 20000" \
        "fit qwen2.5-32b --engine llamacpp --gpu rtx-4090 --gpus 2 --context 32768 --kv-dtype q8_0 --split 41,23" \
        "size tests/data/bad/model-window-zero.yaml" "size llama-3.1-8b --context 99999999999999999999"; do
        i=$((i + 1)); echo "cli $i $args"
    done
} >build/valgrind/jobs

# a pool of $jobs workers, each taking the next line of the list
next=build/valgrind/next
echo 0 >"$next"
worker() {
    while :; do
        line=$(flock "$next" sh -c 'n=$(cat "$0"); echo $((n + 1)) >"$0"; sed -n "$((n + 1))p" build/valgrind/jobs' \
            "$next")
        [ -z "$line" ] && return
        # shellcheck disable=SC2086 # the job's words
        run_one $line
    done
}
w=0
while [ $w -lt "$jobs" ]; do worker & w=$((w + 1)); done
wait

bad=$(find build/valgrind -name '*.log' -size +0 | sort)
cut=$(grep -l 'Test timeout expired\|Received signal' build/valgrind/*.out | sort)
echo "valgrind: $(ls build/valgrind/*.log | wc -l) processes checked in $(( $(date +%s) - start )) s, $jobs at a time"
if [ -n "$bad" ]; then
    for f in $bad; do echo "== $f"; head -40 "$f"; done
    echo "valgrind: memory errors or leaks in: $bad"; exit 1
fi
if [ -n "$cut" ]; then
    for f in $cut; do echo "== $f"; grep 'Test timeout expired\|Received signal' "$f"; done
    echo "valgrind: tests timed out or died in: $cut (only partly checked)"; exit 1
fi
echo "valgrind: no memory errors, no leaks, no test cut short"
