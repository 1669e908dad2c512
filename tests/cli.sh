#!/bin/sh
# Runs the CLI cases in tests/cli/cases.txt against $KVPLAN_BIN.
# A case is one line:  EXIT STREAM EXPECTED :: ARGS
#   EXIT      the exit code kvplan must return
#   STREAM    out or err: where EXPECTED must appear as a whole line, leading
#             blanks aside (or as a fixed substring of one, when it ends in '...')
#   ARGS      the arguments, split by the shell (quotes allowed)
# Lines starting with # and blank lines are skipped.
bin=${KVPLAN_BIN:-build/rel/kvplan}
cases=${1:-tests/cli/cases.txt}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0 n=0
while IFS= read -r line; do
    n=$((n + 1))
    case $line in ''|'#'*) continue ;; esac
    head=${line%% :: *} args=${line#* :: }
    code=${head%% *} rest=${head#* }
    stream=${rest%% *} want=${rest#* }
    want=$(printf '%s' "$want" | sed 's/^ *//')
    eval "set -- $args"
    KVPLAN_DATADIR=models "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    case $want in
        *...) grep -qF -- "${want%...}" "$tmp/$stream"; found=$? ;;
        *) sed 's/^ *//' "$tmp/$stream" | grep -qxF -- "$want"; found=$? ;;
    esac
    if [ "$got" -eq "$code" ] && [ $found -eq 0 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL $cases:$n: kvplan $args"
        echo "  want exit $code and in std$stream: $want"
        echo "  got exit $got; stdout:"; sed 's/^/    /' "$tmp/out" | head -20
        echo "  stderr:"; sed 's/^/    /' "$tmp/err" | head -5
    fi
done <"$cases"
echo "cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
