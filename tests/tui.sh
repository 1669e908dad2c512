#!/bin/sh
# Drives `kvplan tui` in a real terminal (tmux, on a private socket) like a
# user: reads the screen at 80x24, types settings, resizes to 120x40, 20x5
# and 1x1, opens help, picks a model, saves a plan that `kvplan check`
# accepts, reopens it, and quits. Figures on screen are compared with what
# `kvplan fit` prints for the same settings, and the simulate view's with
# what `kvplan simulate` prints.
bin=${KVPLAN_BIN:-build/rel/kvplan}
if ! command -v tmux >/dev/null 2>&1; then
    # CI installs tmux; elsewhere say so rather than pass silently
    if [ -n "$CI" ]; then echo "tui: tmux is not installed"; exit 1; fi
    echo "tui: SKIPPED (tmux is not installed)"
    exit 0
fi
tmp=$(mktemp -d) || exit 2
sock="$tmp/tmux.sock"
t() { tmux -S "$sock" -f /dev/null "$@"; }
trap 't kill-server 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0

screen() { t capture-pane -t k -p 2>/dev/null; }

# wait (up to 15 s: CI machines can be busy) until the screen holds $1 as a fixed string
expect() {
    i=0
    while [ $i -lt 150 ]; do
        if screen | grep -qF -- "$1"; then pass=$((pass + 1)); return 0; fi
        sleep 0.1
        i=$((i + 1))
    done
    fail=$((fail + 1))
    echo "FAIL tui: screen lacks: $1 ($2)"
    screen | sed 's/^/    | /'
    return 1
}

# wait (up to 15 s) until the screen no longer holds $1
expect_gone() {
    i=0
    while [ $i -lt 150 ]; do
        if ! screen | grep -qF -- "$1"; then pass=$((pass + 1)); return 0; fi
        sleep 0.1
        i=$((i + 1))
    done
    fail=$((fail + 1))
    echo "FAIL tui: screen still holds: $1 ($2)"
    return 1
}

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL tui: $1"; }

# a fresh tmux server: killing the last session ends the server, and a new
# session started while it exits fails ("server exited unexpectedly")
fresh() {
    t kill-server 2>/dev/null
    i=0
    while [ -S "$sock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
}

start() { # $1: size WxH, $2: locale, rest: arguments
    size=$1 loc=$2
    shift 2
    fresh
    t new-session -d -s k -x "${size%x*}" -y "${size#*x}" \
        "env LANG=$loc LC_ALL=$loc KVPLAN_DATADIR=models $bin tui $*; sleep 30"
}

# the figure `kvplan fit` prints on the row named $1 (e.g. "max concurrency")
fit_value() {
    row=$1
    shift
    KVPLAN_DATADIR=models "$bin" fit "$@" | awk -v r="$row" 'index($0, r) == 1 { sub(r, ""); print $1; exit }'
}

# 1. 80x24: the default setup's figures, as kvplan fit gives them
start 80x24 C.UTF-8 llama-3.1-8b
tokens=$(fit_value "KV tokens" llama-3.1-8b --gpu h100)
conc=$(fit_value "max concurrency" llama-3.1-8b --gpu h100)
blocks=$(fit_value "blocks" llama-3.1-8b --gpu h100)
expect "$tokens tokens, $blocks blocks of 16" "kvplan fit: $tokens KV tokens, $blocks blocks"
expect "max concurrency $conc at 131,072 tokens" "kvplan fit: $conc"
expect "weights 14.96 GiB" "weights on the bar"
expect "KV 16.00 GiB" "KV on the bar"
expect "full       32 L x 131,072 tok = 16.00 GiB" "KV by layer kind"
expect "Roofline: decode >= " "roofline"
screen | grep -q "█" && ok || bad "no UTF-8 bar in a UTF-8 locale"
esc=$(printf '\033')
t capture-pane -t k -p -e | grep -q "$esc\[3[0-7]m\|$esc\[38;5;\|$esc\[3[0-7];" && ok || bad "no colours without NO_COLOR"

# 2. type context 8k and batch 32 (the fields: model, then settings.h's rows: engine gpu tp pp dp dp_attention gpus util
# context concurrency ...)
t send-keys -t k Down Down Down Down Down Down Down Down Down 8 k Enter Down 3 2 Enter
conc=$(fit_value "max concurrency" llama-3.1-8b --gpu h100 --context 8k --concurrency 32)
mctx=$(fit_value "max context" llama-3.1-8b --gpu h100 --context 8k --concurrency 32)
expect "max concurrency $conc at 8,192 tokens" "kvplan fit --context 8k --concurrency 32"
expect "max context $mctx at batch 32" "kvplan fit: max context $mctx"

# End and Home jump to the last and first field
t send-keys -t k End
expect "> host_bandwidth" "End selects the last field (the list scrolls)"
expect "42/42 Up/Dn, Lt/Rt, Enter: edit" "the field's place in the list"
t send-keys -t k Home
expect "> model" "Home selects the first field"

# 3. bigger, smaller, tiny, and back: redrawn each time, never dead
t resize-window -t k -x 120 -y 40
expect "max context $mctx at batch 32" "after resizing to 120x40"
expect "non-torch  = " "derivation at 120x40" # vllm 0.21.0's CUDA-graph lines push the budget's below the fold
t resize-window -t k -x 20 -y 5
expect "least 80x24 (now" "20x5 asks for a bigger terminal"
t resize-window -t k -x 1 -y 1
sleep 0.3
t resize-window -t k -x 80 -y 24
expect "max context $mctx at batch 32" "after 1x1 and back to 80x24"

# 3b. a wide terminal widens the chart: more columns, the chosen context marked on its axis
t resize-window -t k -x 160 -y 45
expect "^8k" "the chosen context on the chart's axis"
chart_cols() { # the bars on the chart's bottom row
    screen | sed -n '/^KV per GPU vs context/,$p' | grep -m1 '^ *0 ' | LC_ALL=C.UTF-8 grep -o '[▁▂▃▄▅▆▇█]' | wc -l
}
i=0
while [ "$(chart_cols)" -le 12 ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(chart_cols)" -gt 12 ] && ok || { bad "the chart at 160 columns has $(chart_cols) columns"; screen; }
util=$(fit_value "memory fraction" llama-3.1-8b --gpu h100)
expect "outside util $util: " "the memory outside the fraction, apart from the reserve"
t resize-window -t k -x 80 -y 24

# 4. help opens and any key closes it
t send-keys -t k '?'
expect "kvplan tui help" "help overlay"
t send-keys -t k x
expect_gone "kvplan tui help" "any key closes help"

# 4b. e: the launch command in the panel, as `kvplan fit --emit` prints it; x cycles back
t send-keys -t k e
expect "Launch command  x: switch" "e shows the launch command"
expect "vllm serve" "the launch command"
expect "--max-num-batched-tokens 8192" "its last flag, wrapped in the panel"
t send-keys -t k x
expect "Derivation: capacity" "x cycles back to the capacity derivation"

# 5. save a plan; kvplan check accepts it and it asserts the same setup
t send-keys -t k s
expect "save plan to:" "save prompt"
i=0
while [ $i -lt 40 ]; do t send-keys -t k BSpace; i=$((i + 1)); done
t send-keys -t k -l "$tmp/p.yaml"
t send-keys -t k Enter
expect "saved $tmp/p.yaml" "saved"
if [ -f "$tmp/p.yaml" ] && grep -q "concurrency: 32" "$tmp/p.yaml" && grep -q "context: 8192" "$tmp/p.yaml"; then ok; else bad "plan file missing or wrong"; fi
KVPLAN_DATADIR=models "$bin" check "$tmp/p.yaml" >"$tmp/check.out" 2>&1 && ok || { bad "kvplan check failed on the saved plan"; cat "$tmp/check.out"; }
ls "$tmp" | grep -q 'tmp' && bad "a temporary file was left beside the plan" || ok

# 5b. more GPUs: the TUI asks TP or PP; p gives pipeline stages, as kvplan fit --pp 4 computes them
t send-keys -t k Home Down Down Down Down Down Down Down 4 Enter
expect "4 GPUs: t = TP (tp 4 x pp 1), p = PP (tp 1 x pp 4)? Enter: t, Esc: cancel" "TP or PP?"
t send-keys -t k p
conc=$(fit_value "max concurrency" llama-3.1-8b --gpu h100 --context 8k --concurrency 32 --pp 4)
expect "4 GPUs: tp 1 x pp 4; fits: $conc requests of 8,192 tokens" "kvplan fit --pp 4"
t send-keys -t k 1 Enter
expect "kvplan tui: llama-3.1-8b on 1 x h100-sxm" "back to one GPU"

# 6. pick a model by typing a filter
t send-keys -t k m
expect "model: type to filter" "model picker"
t send-keys -t k -l "qwen3-8"
t send-keys -t k Enter
expect "kvplan tui: qwen3-8b on 1 x h100-sxm" "picked qwen3-8b"

# 7. q quits (the pane's command goes on to `sleep`, so the TUI is gone from it)
t send-keys -t k q
expect_gone "kvplan tui:" "q quits"

# 8. reopening the plan restores the setup; ASCII bars and no colour in the C locale
start 80x24 C "$tmp/p.yaml"
expect "max context $mctx at batch 32" "plan reopened" || cat "$tmp/p.yaml"
expect "[####" "ASCII bar in the C locale"
t send-keys -t k q

# 9. NO_COLOR is honoured (no colour escapes when the pane is captured with -e)
fresh
t new-session -d -s k -x 80 -y 24 "env NO_COLOR=1 LANG=C.UTF-8 KVPLAN_DATADIR=models $bin tui llama-3.1-8b; sleep 30"
expect "max concurrency" "NO_COLOR start"
t capture-pane -t k -p -e | grep -q "$esc\[3[0-7]m\|$esc\[38;5;\|$esc\[3[0-7];" && bad "colours despite NO_COLOR" || ok
t send-keys -t k q

# 10. the simulate view (w): the figures `kvplan simulate` prints for the same
# deployment and workload, a chart of the blocks over time, the highest
# sustained rate on r, a saved plan that `kvplan check` passes, and an engine
# not simulated shown as the library's message
sim_value() { # the text after row $1 of `kvplan simulate` (e.g. "preemptions")
    row=$1
    shift
    KVPLAN_DATADIR=models "$bin" simulate "$@" | awk -v r="$row" 'index($0, r) == 1 { sub(r " *", ""); print; exit }'
}
start 80x24 C.UTF-8 llama-3.1-8b
expect "w simulate" "the title names the key"
t send-keys -t k w
expect "simulate: llama-3.1-8b on 1 x h100-sxm" "w opens the simulate view"
peak=$(sim_value "peak KV" llama-3.1-8b --gpu h100)
expect "peak KV $peak" "kvplan simulate: peak KV $peak"
ttft=$(sim_value "TTFT p50/p90/p99" llama-3.1-8b --gpu h100 | awk '{ print "TTFT p50 " $1 " ms, p99 " $5 " ms" }')
expect "$ttft" "kvplan simulate: $ttft"
expect "KV blocks over time" "the chart"
expect "used, full" "the chart's legend"
# all at once, 2k prompts sharing a 1k prefix on half of them: preemptions
t send-keys -t k Enter 0 Enter Down Enter 2 k Enter Down Down Enter 5 0 0 Enter Down Down Enter 1 k Enter Down Enter 0 . 5 Enter
opts="--gpu h100 --rate 0 --prompt 2k --requests 500 --prefix 1k --prefix-share 0.5"
# shellcheck disable=SC2086
pre=$(sim_value "preemptions" llama-3.1-8b $opts)
# shellcheck disable=SC2086
hits=$(sim_value "prefix cache hits" llama-3.1-8b $opts | awk '{ print $1 " of " $3 " tokens" }')
expect "prefix_share   0.5" "typed fields"
expect "preemptions $pre" "kvplan simulate $opts: $pre preemptions"
expect "prefix hits $hits" "kvplan simulate: $hits"
t send-keys -t k r
# shellcheck disable=SC2086
rate=$(sim_value "max sustained rate" llama-3.1-8b $opts --find-max-rate | awk '{ print $1 }')
expect "highest sustained rate $rate requests/s" "kvplan simulate --find-max-rate: $rate"
t send-keys -t k s
expect "save plan to:" "save prompt in the simulate view"
i=0
while [ $i -lt 40 ]; do t send-keys -t k BSpace; i=$((i + 1)); done
t send-keys -t k -l "$tmp/sim.yaml"
t send-keys -t k Enter
# the run preempted: the limit is asked (0 unless typed), not taken from the run; the user's is its count
expect "the run preempted $pre times; max_preemptions to assert: 0_" "the limit asked"
t send-keys -t k BSpace
t send-keys -t k -l "$pre"
t send-keys -t k Enter
expect "saved $tmp/sim.yaml" "saved with the workload"
KVPLAN_DATADIR=models "$bin" check "$tmp/sim.yaml" >"$tmp/check.out" 2>&1 && grep -q "PASS      max_preemptions under tui: $pre" "$tmp/check.out" &&
    grep -q "PASS      min_sustained_rate under tui" "$tmp/check.out" && ok ||
    { bad "kvplan check of the plan with the view's workload"; cat "$tmp/sim.yaml" "$tmp/check.out"; }
t send-keys -t k Escape
expect "kvplan tui: llama-3.1-8b on 1 x h100-sxm" "Esc goes back to the fit view"
t send-keys -t k Down Enter h f - d y n a m i c Enter w
expect "Cannot simulate this setup:" "an engine not simulated"
expect "hf-dynamic is not simulated yet" "the library's message"
t send-keys -t k q
expect_gone "simulate:" "q quits from the simulate view"

# 11. the plan reopened: the view starts from its workload
start 80x24 C "$tmp/sim.yaml"
t send-keys -t k w
expect "requests       500" "the plan's workload in the view"
expect "preemptions $pre" "and its run"
t send-keys -t k q

# 12. llama.cpp partial offload: the host's part beside the GPU's bar, as fit's device table
start 120x40 C.UTF-8 qwen2.5-32b --engine llamacpp --gpu rtx-4090 --weight-dtype q4_k_m --n-gpu-layers 40 --context 32768
host=$(KVPLAN_DATADIR=models "$bin" fit qwen2.5-32b --engine llamacpp --gpu rtx-4090 --weight-dtype q4_k_m \
    --n-gpu-layers 40 --context 32768 |
    awk '$1 == "host" { printf "host RAM: weights %s %s (%s layers), KV %s %s (%s), compute %s %s", $3, $4, $2, $5,
        $6, $2, $7, $8; exit }')
[ -n "$host" ] || bad "kvplan fit prints no host row for -ngl 40"
expect "$host" "the host's part as kvplan fit's device table has it"
t send-keys -t k q

# 13. Ollama's release by the name the user types, whole (it read "llamacpp@ollama-0.3")
start 120x40 C qwen3-8b --engine ollama --gpu rtx-4090
expect "ollama@0.32.15" "the engine field names Ollama's release"
t send-keys -t k q

echo "tui: $pass passed, $fail failed"
[ $fail -eq 0 ]
