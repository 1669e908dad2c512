#!/bin/sh
# Runs the CLI cases in tests/cli/cases.txt against $KVPLAN_BIN.
# A case is one line:  [release] EXIT STREAM EXPECTED :: ARGS
#   release   only in a build without sanitizers (KVPLAN_CLI_SANITIZED unset):
#             the float-heavy runs (the fidelity grid, window sweeps) whose
#             memory safety smaller cases already prove under ASan
#   EXIT      the exit code kvplan must return
#   STREAM    out or err: where EXPECTED must appear as a whole line, leading
#             blanks aside (or as a fixed substring of one, when it ends in '...')
#   ARGS      the arguments, split by the shell (quotes allowed)
# Lines starting with # and blank lines are skipped. Each distinct ARGS runs
# once: cases with the same ARGS check the same run's exit code and output.
bin=${KVPLAN_BIN:-build/rel/kvplan}
cases=${1:-tests/cli/cases.txt}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/runs"
pass=0 fail=0 skip=0 n=0
while IFS= read -r line; do
    n=$((n + 1))
    case $line in ''|'#'*) continue ;; esac
    case $line in
        'release '*)
            [ -n "${KVPLAN_CLI_SANITIZED:-}" ] && { skip=$((skip + 1)); continue; }
            line=${line#release } ;;
    esac
    head=${line%% :: *} args=${line#* :: }
    code=${head%% *} rest=${head#* }
    stream=${rest%% *} want=${rest#* }
    want=$(printf '%s' "$want" | sed 's/^ *//')
    # the run of these ARGS: its number in $tmp/runs, made on first use
    run=$(grep -nxF -- "$args" "$tmp/runs" | head -n 1 | cut -d: -f1)
    if [ -z "$run" ]; then
        printf '%s\n' "$args" >>"$tmp/runs"
        run=$(wc -l <"$tmp/runs" | tr -d ' ')
        eval "set -- $args"
        KVPLAN_DATADIR=models "$bin" "$@" >"$tmp/out.$run" 2>"$tmp/err.$run"
        echo $? >"$tmp/exit.$run"
    fi
    got=$(cat "$tmp/exit.$run")
    case $want in
        *...) grep -qF -- "${want%...}" "$tmp/$stream.$run"; found=$? ;;
        *) sed 's/^ *//' "$tmp/$stream.$run" | grep -qxF -- "$want"; found=$? ;;
    esac
    if [ "$got" -eq "$code" ] && [ $found -eq 0 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL $cases:$n: kvplan $args"
        echo "  want exit $code and in std$stream: $want"
        echo "  got exit $got; stdout:"; sed 's/^/    /' "$tmp/out.$run" | head -20
        echo "  stderr:"; sed 's/^/    /' "$tmp/err.$run" | head -5
    fi
done <"$cases"
echo "cli: $(wc -l <"$tmp/runs" | tr -d ' ') runs of kvplan"
echo "cli: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
