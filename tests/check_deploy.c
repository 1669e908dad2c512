/* check_deploy.c -- engine profiles (kvp_fit_compute and the inverse
 * searches) against the engines' own sizing rules (docs: the reference
 * engines.md) and against bytes measured from a real llama.cpp (the oracle
 * notes, section "Measured"). Every expected number below was worked out by
 * hand from those rules; the comment next to it shows the arithmetic. The
 * tests run from the repository root. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvplan/catalog.h"
#include "kvplan/deploy.h"
#include "kvplan/explain.h"
#include "kvplan/format.h"
#include "kvplan/model.h"
#include "kvplan/num.h"
#include "kvplan/plan.h"
#include "kvplan/render.h"
#include "kvplan/settings.h"
#include "engine/profile.h" /* kvp_llamacpp_overrides */
#include "testutil.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* ---- helpers ------------------------------------------------------------ */

/* n layers of one spec: kind over H heads, KV heads of dim, window. */
static void uniform(struct kvp_model *m, const char *name, enum kvp_layer_kind kind, uint32_t n, uint32_t heads,
                    uint32_t kv, uint32_t dim, uint32_t window)
{
    struct kvp_layer_spec s = test_attn(kind, heads, kv, dim, window);
    test_blank(m, name);
    test_add(m, &s, n);
    test_validate(m);
}

/* The oracle's tiny llama shapes: E (hidden) over H4 KV2, L2, V32. */
static void tiny_llama(struct kvp_model *m, uint32_t hidden)
{
    uniform(m, "tiny-llama", KVP_LAYER_FULL, 2, 4, 2, hidden / 4, 0);
    m->hidden = hidden;
    m->intermediate = 2 * hidden;
    m->vocab = 32;
    m->max_context = 4096;
    test_validate(m);
}

/* The oracle's tiny gemma3: 6 layers, pattern 3 (layer il is SWA iff
 * il % 3 < 2, so layers 2 and 5 are full), window 128, on the tiny E128
 * shape (H4 KV2 hd32: 64 K and 64 V values per cell and layer). */
static void tiny_gemma3(struct kvp_model *m)
{
    struct kvp_layer_spec swa = test_attn(KVP_LAYER_SLIDING, 4, 2, 32, 128);
    struct kvp_layer_spec full = test_attn(KVP_LAYER_FULL, 4, 2, 32, 0);
    test_blank(m, "tiny-gemma3");
    snprintf(m->family, sizeof m->family, "gemma3"); /* llama.cpp applies windows by architecture */
    m->hidden = 128;
    m->intermediate = 256;
    m->vocab = 32;
    m->max_context = 4096;
    for (int rep = 0; rep < 2; rep++) {
        test_add(m, &swa, 2);
        test_add(m, &full, 1);
    }
    test_validate(m);
}

/* The hand-worked rule tests give the start-up reserve (0 unless set), so the
 * estimate of src/lib/engine/profile_reserve.c does not enter their arithmetic. */
static void reserve_given(struct kvp_deploy *d)
{
    d->activation_given = d->non_torch_given = true;
}

/* kvp_deploy_init for "engine@release". */
static void deploy_at(struct kvp_deploy *d, const char *engine, const struct kvp_model *m)
{
    struct kvp_error err = {0};
    enum kvp_engine_id e;
    uint32_t rel;
    ck_assert_kvp_ok(kvp_engine_parse(engine, &e, &rel, &err), err);
    kvp_deploy_init(d, e, m);
    d->release = rel;
}

static struct kvp_fit fit_ok(const struct kvp_model *m, const struct kvp_deploy *d)
{
    struct kvp_fit f;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_fit_compute(m, d, &f, &err), err);
    return f;
}

/* llama.cpp: K + V over both caches (non-SWA and SWA). */
static uint64_t cache_total(const struct kvp_fit *f)
{
    return f->cache[0].k_bytes + f->cache[0].v_bytes + f->cache[1].k_bytes + f->cache[1].v_bytes;
}

static uint64_t device_total(const struct kvp_fit *f)
{
    uint64_t t = 0;
    for (uint32_t i = 0; i < f->n_devices; i++)
        t += f->device[i].k_bytes + f->device[i].v_bytes;
    return t;
}

/* ---- vLLM: the real log ------------------------------------------------- */

/* A real vLLM log (RTX 3090, Llama-3.1-8B bf16, max_model_len 20000):
 * "Available KV cache memory: 3.81 GiB", "GPU KV cache size: 31,232 tokens",
 * "Maximum concurrency for 20,000 tokens per request: 1.56x".
 *   available = int(25318832210 * 0.9 - (16094101452 + 2222645576 + 375809638)) = 4094392323
 *   page = 2 * 16 * 8 * 128 * 2 = 65536; one group of 32 layers
 *   num_blocks = 4094392323 // 65536 // 32 = 1952; tokens = 1952 // 1 * 16 = 31232
 *   per request cdiv(20000, 16) = 1250 blocks -> 1952 / 1250 = 1.5616 */
START_TEST(vllm_real_log)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f;
    char buf[32];

    deploy_at(&d, "vllm@0.11.0", m);
    d.gpu_memory = (uint64_t)llround(23.58 * (double)GiB);
    d.util = 0.90;
    d.weights_memory = (uint64_t)llround(14.9888 * (double)GiB);
    d.activation_memory = (uint64_t)llround(2.07 * (double)GiB);
    d.non_torch_memory = (uint64_t)llround(0.35 * (double)GiB);
    d.context = 20000;
    ck_assert_uint_eq(d.gpu_memory, 25318832210ull);
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.block_size, 16);
    ck_assert_uint_eq(f.n_groups, 1);
    ck_assert_uint_eq(f.kv_budget_bytes, 4094392323ull);
    ck_assert_uint_eq(f.kv_bytes_per_token_per_gpu, 32 * 2 * 8 * 128 * 2);
    ck_assert_uint_eq(f.num_blocks, 1952);
    ck_assert_uint_eq(f.kv_tokens, 31232);
    ck_assert_uint_eq(f.request_bytes, 1250ull * 65536 * 32);
    ck_assert_double_eq_tol(f.max_concurrency, 1952.0 / 1250.0, 1e-9);
    snprintf(buf, sizeof buf, "%.2f", f.max_concurrency);
    ck_assert_str_eq(buf, "1.56");
    ck_assert(f.fits);
    kvp_model_free(m);
}
END_TEST

/* ---- real start-ups from settings alone ---------------------------------- */

/* Real engine start-ups replayed from what the user set: model, GPU memory as
 * the device reported it, tp, max_model_len, utilization, release, and
 * nothing measured -- the weights are computed and the start-up reserve is
 * estimated (src/lib/engine/profile_reserve.c). The logged KV budget and tokens are
 * the engines' own lines. Training cases are the ones the constants of the
 * estimate were read from: /work/shared/reference/engine-logs-train.json (the
 * id is theirs), vLLM #10511 at tp 2 (the NVLink NCCL figure) and three rows
 * of the vLLM 0.19.0 H100 matrix of jgchn/llm-d-planner (accuracy/results/
 * v0.19.0/results_raw.csv, one log per row under logs/: Llama-3.1-8B at tp 1
 * and 2, Qwen2.5-7B at tp 1; the non-torch and sampler figures). Every other
 * case is held out: no constant was chosen on it. The split was fixed before
 * kvplan was run on any of them (docs/engines.md says what was seen
 * anyway). `bound` is the error each case must stay
 * within (what it is today, rounded up: a regression guard, not a target);
 * docs/engines.md has the table of errors. */
#define LOGS "tests/data/engine-logs/"
#define M "models/"
#define H100 85028896768ull /* 79.19 GiB, as vLLM 0.19.0 prints it (jgchn runs, vLLM #21348) */
#define JG "jgchn/llm-d-planner v0.19.0 "
static const struct log_case {
    const char *id, *model, *engine, *weight_dtype, *kv_dtype;
    bool held_out;
    uint64_t gpu_memory, context, batched;
    uint32_t tp;
    double util;
    double kv_gib;    /* logged KV budget (2 decimals, GiB) */
    uint64_t tokens;  /* logged tokens (vLLM V0: blocks x 16); 0 = not logged */
    double bound;     /* |error| allowed on the budget and the tokens */
    uint64_t seqs;    /* --max-num-seqs given; 0 = the release's default */
} log_cases[] = {
    /* ---- training ---- */
    {"vllm#10517-20k", M "llama-3.1-8b.yaml", "vllm@0.7.3", NULL, NULL, false, 25318832210ull, 20000, 0, 1, 0.9, 3.81,
     1952 * 16, 0.03, 0},
    {"vllm#10517-29k", M "llama-3.1-8b.yaml", "vllm@0.7.3", NULL, NULL, false, 25318832210ull, 29000, 0, 1, 0.9, 2.89,
     1478 * 16, 0.06, 0},
    {"vllm#10511-llama3-8b-tp1", LOGS "llama-3-8b.yaml", "vllm@0.7.3", NULL, NULL, false, 85061827297ull, 8192, 0, 1,
     0.9, 53.29, 0, 0.05, 0},
    /* same thread, -tp 2: 71.29 - 7.48 - 3.58 - 1.26 = 58.97 GiB (the budget line itself is cut off) */
    {"vllm#10511-llama3-8b-tp2", LOGS "llama-3-8b.yaml", "vllm@0.7.3", NULL, NULL, false, 85061827297ull, 8192, 0, 2,
     0.9, 58.97, 0, 0.05, 0},
    /* `vllm serve` at max_model_len 131072 > 32000 turns chunked prefill on: 2048 tokens a step */
    {"vllm#13061", LOGS "qwen2.5-14b.yaml", "vllm@0.7.3", NULL, NULL, false, 25756696576ull, 131072, 2048, 2, 0.98,
     8.69, 0, 0.03, 0},
    /* vLLM 0.28.0 (the blog's `vllm serve Qwen/Qwen3-14B --disable-log-stats`: every default, so 0.21.0's
     * gpu_memory_utilization 0.92, config/cache.py, PR #38284) subtracts its CUDA-graph estimate (rule since
     * 0.21.0). The logged reserve (0.92 x 44.99 GiB - weights - KV) is 2.30 and 2.32 GiB here and 2.28 GiB in
     * the held-out tuned run below at 8 sequences: a cost that does not follow max_num_seqs, which kvplan
     * does not model (1.78 GiB estimated) */
    {"blog60168338778-qwen3-14b-l40s", LOGS "qwen3-14b.yaml", "vllm@0.21.0", NULL, NULL, false, 48305799168ull, 40960,
     0, 1, 0.92, 11.57, 75824, 0.05, 0},
    {"blog60168338778-qwen3-14b-awq-l40s", LOGS "qwen3-14b.yaml", "vllm@0.21.0", "int4:group=128", NULL, false,
     48305799168ull, 40960, 0, 1, 0.92, 29.63, 194192, 0.02, 0},
    /* a training process shares the T4: vLLM logs 0.01 GiB non-torch */
    {"idx55875904831-qwen2.5-1.5b-t4", LOGS "qwen2.5-1.5b.yaml", "vllm@0.7.3", NULL, NULL, false, 15633680957ull, 32768,
     0, 1, 0.5, 2.36, 5517 * 16, 0.16, 0},
    /* bitsandbytes 4-bit weights priced as int4 in groups of 64 */
    {"idx6934259882-phi4-bnb", LOGS "phi-4.yaml", "vllm@0.7.3", "int4:group=64", NULL, false, 84986665370ull, 512, 0, 1,
     0.7, 45.21, 14815 * 16, 0.02, 0},
    {"idx33122952765-qwen2.5-0.5b-bnb-47gib", LOGS "qwen2.5-0.5b.yaml", "vllm@0.7.3", "int4:group=64", NULL, false,
     51002736640ull, 32768, 0, 1, 0.78, 34.81, 190100 * 16, 0.02, 0},
    {JG "llama-3.1-8b tp1", M "llama-3.1-8b.yaml", "vllm@0.11.0", NULL, NULL, false, H100, 8192, 0, 1, 0.95, 58.11,
     476016, 0.01, 0},
    {JG "llama-3.1-8b tp2", M "llama-3.1-8b.yaml", "vllm@0.11.0", NULL, NULL, false, H100, 8192, 0, 2, 0.95, 63.76,
     1044688, 0.01, 0},
    {JG "qwen2.5-7b tp1", M "qwen2.5-7b.yaml", "vllm@0.11.0", NULL, NULL, false, H100, 8192, 0, 1, 0.95, 58.53, 1096000,
     0.01, 0},
    /* SGLang's docs notebook log (docs.sglang.ai/start/send_request.html, 2025-01-23): Llama-3.1-8B on one
     * H100, mem_fraction_static 0.88 (the tp rule), 78.81 GB free at "Load weight begin", 444,500 tokens of
     * 131,072 B. The free-at-start rule of profile_max_num_token was checked on it. */
    {"sglang-docs-send-request-llama-3.1-8b-h100", M "llama-3.1-8b.yaml", "sglang@0.4.6", NULL, NULL, false, H100,
     131072, 0, 1, 0, 444500 * 131072.0 / GiB, 444500, 0.01, 0},
    /* ---- held out ---- */
    /* vLLM with an LMCache connector reserves ~6 GiB more than the estimate */
    {"vllm#21348-vllm", M "qwen3-235b-a22b.yaml", "vllm@0.11.0", "fp8", NULL, true, H100, 40960, 0, 4, 0.9, 8.11,
     178880, 0.55, 0},
    {"vllm#21348-sglang", M "qwen3-235b-a22b.yaml", "sglang", "fp8", NULL, true, H100, 40960, 0, 4, 0.93,
     367404 * 48128.0 / GiB, 367404, 0.01, 0},
    /* sglang PR #4760 (2025-03-25, FA3 test): Meta-Llama-3.1-8B-Instruct, one H100 (Hopper: FA3), default
     * fraction; "avail mem=63.48 GB, mem usage=15.11 GB" after weights, 442,750 tokens */
    {"sglang#4760-llama-3.1-8b-h100", M "llama-3.1-8b.yaml", "sglang@0.4.6", NULL, NULL, true, H100, 131072, 0, 1, 0,
     442750 * 131072.0 / GiB, 442750, 0.01, 0},
    /* jerryzsj/my-deepseek-r1 README (2025-02-04): DeepSeek-R1-Distill-Qwen-7B (Qwen2.5-7B's shape) on an RTX
     * 3090 under WSL2, mem_fraction_static 0.88; 22.76 GB free at start (Windows holds the rest),
     * max_total_num_tokens=105531 of 57,344 B */
    {"jerryzsj/my-deepseek-r1 r1-distill-qwen-7b rtx3090", M "qwen2.5-7b.yaml", "sglang@0.4.6", NULL, NULL, true,
     25447170048ull, 131072, 0, 1, 0, 105531 * 57344.0 / GiB, 105531, 0.13, 0},
    /* Qwen3-14B, tp 4 on four RTX 4090s (24564 MiB), --mem-fraction-static 0.80, SGLang at commit ebaf86d4 (2026):
     * "avail mem=16.00 GB, mem usage=7.08 GB" after weights, 298,447 tokens of 40,960 B a rank (public project
     * notes found by text search, repository not identified) */
    {"sglang qwen3-14b 4xRTX4090 (notes, repository not identified)", LOGS "qwen3-14b.yaml", "sglang", NULL, NULL, true,
     25756696576ull, 40960, 0, 4, 0.80, 298447 * 40960.0 / GiB, 298447, 0.05, 0},
    /* didier-durand/llms-in-clouds docs/sglang.md (2025-03-08): QwQ-32B (Qwen2.5-32B's shape), tp 4 on the 4
     * L4s of a g6.12xlarge, mem_fraction_static 0.85 (tp >= 4), custom all-reduce off (PCIe); 46,611 tokens of
     * 65,536 B a rank */
    {"llms-in-clouds qwq-32b 4xL4", M "qwen2.5-32b.yaml", "sglang@0.4.6", NULL, NULL, true, 23612293120ull, 131072, 0,
     4, 0, 46611 * 65536.0 / GiB, 46611, 0.03, 0},
    /* vLLM 0.19.0 on an A100 80GB (79.15 GiB), --max-model-len 131072 --gpu-memory-utilization 0.65
     * (myoceane.fr/index.php/ai-vllm-a100-gemma-4/). Its "Model loading took 13.72 GiB" kvplan now
     * gives within 0.4% (13.67: the MXFP4 experts as vLLM pads them, vllm_mxfp4_loaded_weights);
     * the 3% this case met before was the 875 MiB of padding kvplan missed cancelling an
     * activation estimate about 1.8 GiB too high for this MoE: -4.8% of the budget now, the
     * estimate's error, left to issue #35's calibration */
    {"myoceane-gpt-oss-20b-a100", M "gpt-oss-20b.yaml", "vllm@0.11.0", NULL, NULL, true, 84986665370ull, 131072, 0, 1,
     0.65, 36.56, 0, 0.05, 0},
    /* vLLM PR #12569 (V1, Jan 2025): neuralmagic Llama-3.1-70B w8a8, --max-model-len 2048 --gpu-memory-utilization
     * 0.98, one 80 GB GPU (weights 67.72 GB leave no other card); 1381 blocks of 16 x 327,680 B */
    {"vllm#12569-llama-3.1-70b-w8a8", M "llama-3.1-70b.yaml", "vllm@0.11.0", "fp8:scale=channel", NULL, true, H100,
     2048, 0, 1, 0.98, 1381 * 16 * 327680.0 / GiB, 1381 * 16, 0.17, 0},
    /* the same machine across releases (accuracy/results/version-sweep/run_matrix.md): Qwen3-14B, tp 1,
     * max_model_len 8192; 0.15.0 and 0.16.0 logged a 5.64 GiB activation peak, 0.17.0 on 2.23 */
    {"jgchn/llm-d-planner version-sweep qwen3-14b v0.15.0", LOGS "qwen3-14b.yaml", "vllm@0.11.0", NULL, NULL, true,
     H100, 8192, 0, 1, 0.95, 41.94, 0, 0.09, 0},
    {"jgchn/llm-d-planner version-sweep qwen3-14b v0.16.0", LOGS "qwen3-14b.yaml", "vllm@0.11.0", NULL, NULL, true,
     H100, 8192, 0, 1, 0.95, 41.94, 0, 0.09, 0},
    {"jgchn/llm-d-planner version-sweep qwen3-14b v0.17.0", LOGS "qwen3-14b.yaml", "vllm@0.11.0", NULL, NULL, true,
     H100, 8192, 0, 1, 0.95, 45.34, 0, 0.01, 0},
    {"jgchn/llm-d-planner version-sweep qwen3-14b v0.18.0", LOGS "qwen3-14b.yaml", "vllm@0.11.0", NULL, NULL, true,
     H100, 8192, 0, 1, 0.95, 45.23, 0, 0.01, 0},
    {JG "qwen3-8b tp1", M "qwen3-8b.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 1, 0.95, 57.5, 418688, 0.01,
     0},
    {JG "phi-4 tp1", LOGS "phi-4.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 1, 0.95, 46.08, 241568, 0.01,
     0},
    {JG "qwen2.5-7b tp2", M "qwen2.5-7b.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 2, 0.95, 63.84, 2390592,
     0.01, 0},
    {JG "qwen2.5-7b tp4", M "qwen2.5-7b.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 4, 0.95, 67.34, 5043280,
     0.01, 0},
    {JG "llama-3.1-8b tp4", M "llama-3.1-8b.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 4, 0.95, 67.44,
     2209792, 0.01, 0},
    {JG "llama-3.1-8b kv fp8", M "llama-3.1-8b.yaml", "vllm@0.11.0", NULL, "fp8", true, H100, 8192, 0, 1, 0.95, 58.11,
     952032, 0.01, 0},
    {JG "llama-3.1-8b fp8 weights", M "llama-3.1-8b.yaml", "vllm@0.11.0", "fp8", NULL, true, H100, 8192, 0, 1, 0.95,
     64.61, 529248, 0.01, 0},
    {JG "llama-3.1-8b w4a16", M "llama-3.1-8b.yaml", "vllm@0.11.0", "int4:group=128", NULL, true, H100, 8192, 0, 1,
     0.95, 67.71, 554704, 0.01, 0},
    {JG "qwen3-30b-a3b tp1", M "qwen3-30b-a3b.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 1, 0.95, 15.41,
     168288, 0.05, 0},
    {JG "mixtral-8x7b tp2", M "mixtral-8x7b.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 2, 0.95, 28.44,
     465936, 0.02, 0},
    {JG "qwen2.5-72b tp2", M "qwen2.5-72b.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 2, 0.95, 3.04, 19920,
     0.10, 0},
    {JG "llama-3.3-70b fp8 tp2", M "llama-3.1-70b.yaml", "vllm@0.11.0", "fp8", NULL, true, H100, 8192, 0, 2, 0.95,
     37.28, 244304, 0.01, 0},
    {JG "llama-3.3-70b fp8 tp4", M "llama-3.1-70b.yaml", "vllm@0.11.0", "fp8", NULL, true, H100, 8192, 0, 4, 0.95,
     54.09, 708992, 0.01, 0},
    {JG "gemma-2-9b", M "gemma-2-9b.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 1, 0.95, 54.12, 168880, 0.01,
     0},
    {JG "gemma-2-27b", M "gemma-2-27b.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 1, 0.95, 20.59, 58672,
     0.01, 0},
    /* the vision tower in the weights (issue #31) took these from +2.7% and +8.0% */
    {JG "gemma-3-4b", M "gemma-3-4b.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 1, 0.95, 62.51, 468144, 0.02,
     0},
    {JG "gemma-3-27b", M "gemma-3-27b.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 1, 0.95, 19.53, 36560,
     0.04, 0},
    {JG "gpt-oss-20b", M "gpt-oss-20b.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 1, 0.95, 58.47, 1277184,
     0.02, 0},
    {JG "deepseek-v2-lite", M "deepseek-v2-lite.yaml", "vllm@0.11.0", NULL, NULL, true, H100, 8192, 0, 1, 0.95, 43.61,
     1505552, 0.02, 0},
    /* the same blog, held out (added with the 0.21.0 default; no constant chosen on it): Qwen3-14B-AWQ with
     * --gpu-memory-utilization 0.95 --max-model-len 1024 --max-num-seqs 8 --max-num-batched-tokens 8192,
     * "31.02 GiB (203,264 tok)" */
    {"blog60168338778-qwen3-14b-awq-tuned-l40s", LOGS "qwen3-14b.yaml", "vllm@0.21.0", "int4:group=128", NULL, true,
     48305799168ull, 1024, 8192, 1, 0.95, 31.02, 203264, 0.04, 8},
};
static struct kvp_deploy log_deploy(const struct log_case *c, const struct kvp_model *m)
{
    struct kvp_deploy d;
    deploy_at(&d, c->engine, m);
    d.gpu_memory = c->gpu_memory;
    d.tp = d.n_gpus = c->tp;
    d.util = c->util;
    d.context = c->context;
    d.max_batched_tokens = c->batched;
    d.max_num_seqs = c->seqs;
    if (c->weight_dtype)
        d.w = test_wstore(c->weight_dtype);
    if (c->kv_dtype)
        d.k = d.v = test_fmt(c->kv_dtype);
    return d;
}

static double rel_err(double got, double want)
{
    return (got - want) / want;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* From settings alone: every case within its bound. */
START_TEST(logs_from_settings)
{
    const struct log_case *c = &log_cases[_i];
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_deploy d;
    struct kvp_fit f;
    double eb, et;

    ck_assert_kvp_ok(kvp_model_load(c->model, &m, &err), err);
    d = log_deploy(c, m);
    f = fit_ok(m, &d);
    ck_assert(f.reserve.non_torch_est);
    eb = rel_err((double)f.kv_budget_bytes, c->kv_gib * GiB);
    ck_assert_msg(fabs(eb) <= c->bound, "%s: KV budget %.2f GiB, logged %.2f (%+.1f%%)", c->id,
                  (double)f.kv_budget_bytes / GiB, c->kv_gib, 100 * eb);
    if (c->tokens) {
        et = rel_err((double)f.kv_tokens, (double)c->tokens);
        ck_assert_msg(fabs(et) <= c->bound, "%s: %llu tokens, logged %llu (%+.1f%%)", c->id,
                      (unsigned long long)f.kv_tokens, (unsigned long long)c->tokens, 100 * et);
    }
    kvp_model_free(m);
}
END_TEST

/* The median |budget error| within 3%, training and held out apart, and most
 * held-out cases (more than half) within 10% -- over all cases and for each
 * engine with at least 4 held-out cases (vLLM, SGLang); with the logged
 * budget given, every logged token count within 1% -- 1.5% at tp > 1, where
 * the budget line is one rank's and the tokens the minimum over the ranks
 * (vLLM #21348: 8.11 GiB at 48,128 B a token is 180,928 tokens, logged
 * 178,880). */
static void check_errors(const char *what, double *errs, int n, int within10, bool held_out)
{
    if (n < 4)
        return;
    qsort(errs, (size_t)n, sizeof errs[0], cmp_double);
    ck_assert_msg(errs[n / 2] <= 0.03, "%s median budget error %.2f%%", what, 100 * errs[n / 2]);
    ck_assert_msg(!held_out || 2 * within10 > n, "%s: %d of %d cases within 10%%", what, within10, n);
}

START_TEST(logs_median_and_given)
{
    /* [engine: 0 all, 1 vLLM, 2 SGLang][held out] */
    static const char *const names[3][2] = {{"training", "held-out"},
                                            {"vLLM training", "vLLM held-out"},
                                            {"SGLang training", "SGLang held-out"}};
    double errs[3][2][N_ELEMS(log_cases)];
    int n[3][2] = {{0}}, within10[3][2] = {{0}};
    for (size_t i = 0; i < N_ELEMS(log_cases); i++) {
        const struct log_case *c = &log_cases[i];
        struct kvp_model *m = NULL;
        struct kvp_error err = {0};
        struct kvp_deploy d;
        struct kvp_fit f;
        double e;
        int eng = strncmp(c->engine, "sglang", 6) == 0 ? 2 : 1;
        ck_assert_kvp_ok(kvp_model_load(c->model, &m, &err), err);
        d = log_deploy(c, m);
        f = fit_ok(m, &d);
        e = fabs(rel_err((double)f.kv_budget_bytes, c->kv_gib * GiB));
        for (int j = 0; j < 2; j++) { /* all cases, then this engine's */
            int k = j ? eng : 0;
            errs[k][c->held_out][n[k][c->held_out]++] = e;
            within10[k][c->held_out] += e <= 0.10;
        }
        d.kv_memory = (uint64_t)llround(c->kv_gib * GiB);
        f = fit_ok(m, &d);
        if (c->tokens)
            ck_assert_msg(fabs(rel_err((double)f.kv_tokens, (double)c->tokens)) <= (c->tp > 1 ? 0.015 : 0.01),
                          "%s: %llu tokens, logged %llu",
                          c->id, (unsigned long long)f.kv_tokens, (unsigned long long)c->tokens);
        kvp_model_free(m);
    }
    for (int k = 0; k < 3; k++)
        for (int h = 0; h < 2; h++)
            check_errors(names[k][h], errs[k][h], n[k][h], within10[k][h], h);
    ck_assert_int_ge(n[2][1], 4); /* SGLang's held-out set is checked, not skipped */
}
END_TEST

/* Real llama.cpp start-ups (CUDA, one on the CPU) with every layer and the
 * output on one device, replayed from their command lines under the release
 * whose graph they ran (llamacpp@b4862: builds b2459 .. b4862,
 * llm_build_context in src/llama.cpp; src/lib/engine/profile_reserve.c
 * llamacpp_compute). f16 GGUF, flash attention off, the builds' default
 * n_ubatch 512 (capped at -b). The KV buffer is exact in every
 * build; the compute buffer is the largest phase of the older graph, whose
 * rule was read off the first three (ggml-org/ci, node
 * ggml-4-x86-cuda-v100, a Tesla V100-PCIE-16GB) and the logdetective pair
 * (they decided that the attention phase keeps four hidden rows whatever
 * the K/V width, not hidden + q, k, v); the last three are held out. The 2026 graph
 * (npm-3.22.1) over-estimates each: `before` is its error, kept as a check
 * that the two releases differ; docs/engines.md has the table. Weights:
 * the model buffers (CUDA0 + the CPU-mapped token embeddings) against
 * kvplan's f16 weights, where the excerpt prints them. */
#define CI "ggml-org/ci llama.cpp/"
static const struct llamacpp_log_case {
    const char *id, *model;
    uint64_t context, n_batch;
    double kv_mib, compute_mib, weights_mib; /* logged (KV, weights 0: not in the excerpt) */
    double before;                           /* the npm-3.22.1 estimate's error, at least */
} llamacpp_log_cases[] = {
    /* b2459 (d199ca79), open_llama_7b_v2 (Llama-2-7B's shapes), `main -ngl 999`: n_ctx 512, n_batch 512.
     * The logits phase: 512 x (32000 + 4096) x 4 = 70.50 MiB */
    {CI "d1/99ca79f2.../open_llama_7b_v2-tg-f16.log main", M "llama-2-7b.yaml", 512, 512, 256.00, 70.50,
     12603.02 + 250.00, 0.30},
    /* same build, `perplexity -c 2048 -b 512` (open_llama_7b_v2-ppl-shakespeare-f16.log prints the same):
     * KQ 512 x 2048 x 32 x 4 = 128 MiB + 4 x 512 x 4096 x 4 = 32 MiB + the mask 4 MiB = 164.00 */
    {CI "d1/99ca79f2.../open_llama_7b_v2-tg-f16.log perplexity -c 2048", M "llama-2-7b.yaml", 2048, 512, 1024.00,
     164.00, 12603.02 + 250.00, 0.12},
    /* b4862 (be421fc4), pythia-2.8B, `llama-cli -ngl 99 -c 0`: n_ctx 2048 (the model's), n_batch 2048
     * (pythia_2_8b-imatrix.log, -c 2048 -b 512, prints the same 162.00 MiB): KQ 128 MiB + (4 x 2560 + the
     * fused wqkv's 7680 - 2560) x 512 x 4 = 30 MiB + the mask 4 MiB */
    {CI "be/421fc429.../pythia_2_8b-tg-f16.log llama-cli -c 0", LOGS "pythia-2.8b.yaml", 2048, 2048, 640.00, 162.00,
     5049.71 + 245.62, 0.025},
    /* fedora-copr/logdetective PR #106 (2025-01-13, llama_new_context_with_model: a build of the same graph),
     * `llama-server` before and after `-c 32768`, n_batch 512, flash_attn 0, a 32-layer 4096-wide llama with
     * 8 KV heads and freq_base 1e6 (Mistral-7B-v0.2's shapes; the excerpt does not name it):
     * KQ 512 x 32768 x 32 x 4 = 2048 MiB + 32 + the mask 64 = 2144.00 MiB */
    {"fedora-copr/logdetective#106 -c 2048", LOGS "mistral-7b-v0.2.yaml", 2048, 512, 256.00, 164.00, 0, 0.06},
    {"fedora-copr/logdetective#106 -c 32768", LOGS "mistral-7b-v0.2.yaml", 32768, 512, 4096.00, 2144.00, 0, 0.005},
    /* held out (not used to choose anything, though it repeats the one-row logits phase): b4862's CPU node,
     * pythia-1.4B, `llama-imatrix -c 128 -b 128`
     * (the same graph and allocator; CPU compute buffer): 128 x (50304 + 2048) x 4 = 25.56 MiB; the KV line
     * is not in the excerpt kept (0: not checked) */
    {CI "be/421fc429.../ggml-2-x86-cpu/pythia_1_4b-imatrix.log", LOGS "pythia-1.4b.yaml", 128, 128, 0, 25.56, 0,
     0.035},
    /* held out, read after the rule was fixed: build 2490 (be07a032), the CPU node, open_llama_3b_v2 f16, `main`
     * (n_ctx 512, n_batch 512) and `perplexity -c 128 -b 128`: the logits phase 512 x (32000 + 3200) x 4 =
     * 68.75 MiB and 128 x 35200 x 4 = 17.19 MiB; KV 26 x 2 x 3200 x 2 B a cell, 128 cells = 40.625 MiB (printed
     * 40.63 and 40.62: the 2490 build pads 128 cells to 32, not 256); weights the CPU buffer */
    {CI "be/07a03217.../ggml-2-x86-cpu/open_llama_3b_v2-tg-f16.log main", LOGS "open-llama-3b-v2.yaml", 512, 512,
     162.50, 68.75, 6535.80, 0.11},
    {CI "be/07a03217.../ggml-2-x86-cpu/open_llama_3b_v2-tg-f16.log perplexity -c 128", LOGS "open-llama-3b-v2.yaml",
     128, 128, 40.625, 17.19, 6535.80, 0.09},
};
#undef CI
#undef M

/* Case c's start-up under engine, its deployment into *d. */
static struct kvp_fit llamacpp_log_fit(const struct llamacpp_log_case *c, const struct kvp_model *m,
                                       const char *engine, struct kvp_deploy *d)
{
    deploy_at(d, engine, m);
    d->gpu_memory = 17179869184ull; /* "15841 MiB free" on the V100; the buffers do not depend on it */
    d->context = c->context;
    d->n_batch = (uint32_t)c->n_batch;
    d->flash_attn = 0;
    return fit_ok(m, d);
}

START_TEST(llamacpp_cuda_logs)
{
    const struct llamacpp_log_case *c = &llamacpp_log_cases[_i];
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_deploy d;
    struct kvp_fit f;
    double e;

    ck_assert_kvp_ok(kvp_model_load(c->model, &m, &err), err);
    f = llamacpp_log_fit(c, m, "llamacpp@b4862", &d);
    ck_assert_msg(!c->kv_mib || f.kv_pool_bytes == (uint64_t)llround(c->kv_mib * MiB), "%s: KV %.2f MiB, logged %.2f",
                  c->id, (double)f.kv_pool_bytes / MiB, c->kv_mib);
    e = c->weights_mib ? rel_err((double)f.weights_bytes, c->weights_mib * MiB) : 0;
    ck_assert_msg(fabs(e) <= 0.005, "%s: weights %.2f MiB, logged %.2f (%+.2f%%)", c->id,
                  (double)f.weights_bytes / MiB, c->weights_mib, 100 * e);
    ck_assert(f.reserve.activation_est);
    e = rel_err((double)f.reserve.activation, c->compute_mib * MiB);
    ck_assert_msg(fabs(e) <= 0.01, "%s: compute buffer %.2f MiB, logged %.2f (%+.1f%%)", c->id,
                  (double)f.reserve.activation / MiB, c->compute_mib, 100 * e);
    f = llamacpp_log_fit(c, m, "llamacpp", &d);
    e = rel_err((double)f.reserve.activation, c->compute_mib * MiB);
    ck_assert_msg(e >= c->before, "%s: npm-3.22.1 compute buffer %.2f MiB, logged %.2f (%+.1f%%)", c->id,
                  (double)f.reserve.activation / MiB, c->compute_mib, 100 * e);
    kvp_model_free(m);
}
END_TEST

/* vLLM 0.21.0 and later subtract their CUDA-graph estimate (the log line
 * "CUDA graph memory profiling is enabled (default since v0.21.0)"). On an H100
 * max_num_seqs is 1024, so the graphs are captured at 51 sizes (1, 2, 4, 8 ...
 * 248 by 8, 256 ... 512 by 16), each holding about 4 x 512 x hidden x 2 B:
 * Llama-3.1-8B 51 x 512 x 4 x 4096 x 2 = 855,638,016 B (0.80 GiB; vLLM 0.19.0
 * printed its estimate, unsubtracted, as 0.84 GiB). 0.11.0 subtracts none, and
 * a given --cuda-graph-memory wins. 0.21.0's default utilization is 0.92
 * (config/cache.py, PR #38284), 0.11.0's 0.9. */
START_TEST(vllm_cuda_graph_estimate)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f, g;

    deploy_at(&d, "vllm@0.21.0", m);
    d.gpu_memory = H100;
    f = fit_ok(m, &d);
    ck_assert(f.reserve.cuda_graph_est);
    ck_assert_uint_eq(f.reserve.cuda_graph, 855638016ull);
    ck_assert(f.util == 0.92);
    deploy_at(&d, "vllm@0.11.0", m);
    d.gpu_memory = H100;
    ck_assert(fit_ok(m, &d).util == 0.90);
    d.util = 0.92; /* 0.21.0's default: the graphs are the only difference */
    g = fit_ok(m, &d);
    ck_assert(!g.reserve.cuda_graph_est);
    ck_assert_uint_eq(g.reserve.cuda_graph, 0);
    ck_assert_uint_eq(g.kv_budget_bytes - f.kv_budget_bytes, 855638016ull);
    deploy_at(&d, "vllm@0.21.0", m);
    d.gpu_memory = H100;
    d.cuda_graph_memory = GiB;
    f = fit_ok(m, &d);
    ck_assert(!f.reserve.cuda_graph_est);
    ck_assert_uint_eq(f.reserve.cuda_graph, GiB);
    kvp_model_free(m);
}
END_TEST

/* llama.cpp build 6182 (issue #16188): gpt-oss-20b, -c 4096, flash attention
 * off, n_ubatch 512. That build pads cells to 32 without flash attention
 * (get_padding), so the SWA cache holds PAD(128 + 512, 32) = 640 cells, not
 * 768: 12 layers x 640 x 8 x 64 x 2 B x 2 = 15.00 MiB; non-SWA 12 x 4096 x
 * 1024 x 2 = 96.00 MiB. Its compute buffer is estimated as the largest phase
 * of the micro-batch graph (src/lib/engine/profile_reserve.c, checked against the
 * real CPU build by make oracle): attention without flash attention, KQ
 * 512 x 4096 x 64 x 4 = 536,870,912 + q, k, v and four hidden rows
 * 512 x (4096 + 1024 + 4 x 2880) x 4 = 34,078,720 + the f32 mask
 * 512 x 4096 x 4 = 8,388,608 = 579,338,240 B (552.5 MiB), above the logits
 * 512 x (201088 + 2 x 2880) x 4 = 423,624,704. The log's Vulkan0 buffer is
 * 985.2 MiB (-44%): that run keeps the output layer on the CPU (-ngl 24 of
 * 24 layers) and 14 layers' experts there (--n-cpu-moe 14), a split graph
 * the estimate (every layer and the output on one device) does not model. */
START_TEST(llamacpp_b6182_log)
{
    struct kvp_model *m = test_load("gpt-oss-20b");
    struct kvp_deploy d;
    struct kvp_fit f;

    deploy_at(&d, "llamacpp@b6182", m);
    d.context = 4096;
    d.flash_attn = 0;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.cells, 4096);
    ck_assert_uint_eq(f.swa_cells, 640);
    ck_assert_uint_eq(f.cache[0].k_bytes + f.cache[0].v_bytes, 96 * MiB);
    ck_assert_uint_eq(f.cache[1].k_bytes + f.cache[1].v_bytes, 15 * MiB);
    ck_assert(f.reserve.activation_est);
    ck_assert_uint_eq(f.reserve.activation, 579338240ull);
    /* the current release pads to 256 either way: PAD(640, 256) = 768 */
    d.release = UINT32_MAX;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.swa_cells, 768);
    kvp_model_free(m);
}
END_TEST

/* ---- llama.cpp: the real log and the oracle ----------------------------- */

/* A real llama.cpp log: Qwen2.5-32B, -c 32768, -ctk q8_0 -ctv q8_0, layers
 * split 41 / 23 over two CUDA devices:
 *   llama_kv_cache: size = 4352.00 MiB (32768 cells, 64 layers, 1/1 seqs), K (q8_0): 2176.00 MiB, V (q8_0): 2176.00 MiB
 *   CUDA0 KV buffer size = 2788.00 MiB, CUDA1 KV buffer size = 1564.00 MiB
 * A row is 8 x 128 = 1024 values = 32 q8_0 blocks of 34 B = 1088 B; one
 * layer's K is 1088 x 32768 = 34 MiB (1024 % 512 == 0: no CUDA row padding;
 * 34 MiB is 128-aligned). K = 64 x 34 = 2176 MiB; CUDA0 = 41 x 68 = 2788,
 * CUDA1 = 23 x 68 = 1564 MiB. */
START_TEST(llamacpp_real_log)
{
    struct kvp_model *m = test_load("qwen2.5-32b");
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, m);
    d.context = 32768;
    d.k = d.v = test_fmt("q8_0");
    d.n_gpus = 2;
    d.split[0] = 41;
    d.split[1] = 23;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.cells, 32768);
    ck_assert_uint_eq(f.n_stream, 1);
    ck_assert_uint_eq(f.n_devices, 2);
    ck_assert_uint_eq(f.cache[0].layers, 64);
    ck_assert_uint_eq(f.cache[0].k_bytes, 2176 * MiB);
    ck_assert_uint_eq(f.cache[0].v_bytes, 2176 * MiB);
    ck_assert_uint_eq(f.cache[1].k_bytes + f.cache[1].v_bytes, 0);
    ck_assert_uint_eq(f.device[0].layers, 41);
    ck_assert_uint_eq(f.device[1].layers, 23);
    ck_assert_uint_eq(f.device[0].buffer_bytes, 2788 * MiB);
    ck_assert_uint_eq(f.device[1].buffer_bytes, 1564 * MiB);
    kvp_model_free(m);
}
END_TEST

/* The oracle's measured bytes on the shipped models (exact, from
 * llama_get_memory_breakdown of the real library). */
static const struct oracle_case {
    const char *model;
    uint64_t n_ctx;
    const char *k, *v;
    uint32_t n_seq;
    uint64_t bytes;          /* K + V, all caches */
    uint64_t cells, swa_cells; /* per stream (swa 0 = not checked) */
    uint32_t n_stream;
} oracle_cases[] = {
    /* L32, KV8 x hd128 = 1024 values: f16 2048 B, q8_0 1088 B, q4_0 576 B a row;
     * 32 layers x 2 (K, V) x 8192 cells x row */
    {"llama-3.1-8b", 8192, "f16", "f16", 1, 1073741824ull, 8192, 0, 1},
    {"llama-3.1-8b", 8192, "q8_0", "q8_0", 1, 570425344ull, 8192, 0, 1},
    {"llama-3.1-8b", 8192, "q4_0", "q4_0", 1, 301989888ull, 8192, 0, 1},
    /* Gemma3-27B: KV16 x hd128 f16 = 8192 B (K + V) a cell and layer;
     * 10 full x 32768 + 52 SWA x PAD(min(32768, 1024 + 512), 256) = 1536 */
    {"gemma-3-27b", 32768, "f16", "f16", 1, 3338665984ull, 32768, 1536, 1},
    /* n_seq 4: 4 streams of PAD(32768 / 4, 256) = 8192 cells; SWA 1536 a stream */
    {"gemma-3-27b", 32768, "f16", "f16", 4, 5301600256ull, 8192, 1536, 4},
    /* DeepSeek-V3 MLA: one K row of 512 + 64 = 576 values, V-less;
     * f16 61 x 16384 x 1152, q8_0 61 x 16384 x 612 (18 blocks of 34) */
    {"deepseek-v3", 16384, "f16", "f16", 1, 1151336448ull, 16384, 0, 1},
    {"deepseek-v3", 16384, "q8_0", "q8_0", 1, 611647488ull, 16384, 0, 1},
};

START_TEST(llamacpp_oracle_shipped)
{
    const struct oracle_case *c = &oracle_cases[_i];
    struct kvp_model *m = test_load(c->model);
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, m);
    d.context = c->n_ctx;
    d.k = test_fmt(c->k);
    d.v = test_fmt(c->v);
    d.n_seq = c->n_seq;
    f = fit_ok(m, &d);
    ck_assert_msg(cache_total(&f) == c->bytes, "%s n_ctx %llu %s/%s n_seq %u: %llu bytes, oracle %llu", c->model,
                  (unsigned long long)c->n_ctx, c->k, c->v, c->n_seq, (unsigned long long)cache_total(&f),
                  (unsigned long long)c->bytes);
    ck_assert_uint_eq(device_total(&f), c->bytes);
    ck_assert_uint_eq(f.cells, c->cells);
    ck_assert_uint_eq(f.n_stream, c->n_stream);
    if (c->swa_cells)
        ck_assert_uint_eq(f.swa_cells, c->swa_cells);
    kvp_model_free(m);
}
END_TEST

/* DeepSeek-V3 stores no V at all (V-less MLA cache). */
START_TEST(llamacpp_mla_v_less)
{
    struct kvp_model *m = test_load("deepseek-v3");
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, m);
    d.context = 16384;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.cache[0].layers, 61);
    ck_assert_uint_eq(f.cache[0].k_bytes, 61ull * 16384 * 576 * 2);
    ck_assert_uint_eq(f.cache[0].v_bytes, 0);
    kvp_model_free(m);
}
END_TEST

/* The oracle's tiny models, built in code. */
static const struct tiny_case {
    int gemma;      /* 0: tiny llama of `hidden`; 1: tiny gemma3 */
    uint32_t hidden;
    uint64_t n_ctx;
    const char *k, *v;
    uint32_t n_seq;
    bool swa_full;
    uint64_t bytes, cells, swa_cells;
    uint32_t n_stream;
} tiny_cases[] = {
    /* E64 hd16: KV2 x 16 = 32 values; f16 2 layers x 2 x 512 x 64 B */
    {0, 64, 512, "f16", "f16", 1, false, 131072, 512, 0, 1},
    {0, 64, 512, "f32", "f32", 1, false, 262144, 512, 0, 1},
    /* E128 hd32: 64 values a row: f16 128 B, q8_0 2 x 34 = 68 B, q4_0 2 x 18 = 36 B */
    {0, 128, 512, "f16", "f16", 1, false, 262144, 512, 0, 1},
    {0, 128, 512, "q8_0", "q8_0", 1, false, 139264, 512, 0, 1},
    {0, 128, 512, "q8_0", "f16", 1, false, 200704, 512, 0, 1},
    {0, 128, 512, "q4_0", "q4_0", 1, false, 73728, 512, 0, 1},
    {0, 128, 512, "bf16", "bf16", 1, false, 262144, 512, 0, 1},
    /* n_ctx 1000 is padded to 1024 cells */
    {0, 128, 1000, "f16", "f16", 1, false, 524288, 1024, 0, 1},
    /* n_seq 4: 4 streams of PAD(1024 / 4, 256) = 256 cells */
    {0, 128, 1024, "f16", "f16", 4, false, 524288, 256, 0, 4},
    /* not measured, engines.md 2.1: PAD(2000, 256) = 2048; PAD(2048 / 3, 256) = 768
     * cells in each of 3 streams: 2 layers x 256 B x 768 x 3 */
    {0, 128, 2000, "f16", "f16", 3, false, 1179648, 768, 0, 3},
    /* tiny gemma3: 2 full x 1024 + 4 SWA x PAD(min(1024, 128 + 512), 256) = 768 cells,
     * 256 B a cell and layer; swa_full: 6 x 1024 cells */
    {1, 128, 1024, "f16", "f16", 1, false, 1310720, 1024, 768, 1},
    {1, 128, 1024, "f16", "f16", 1, true, 1572864, 1024, 1024, 1},
};

START_TEST(llamacpp_oracle_tiny)
{
    const struct tiny_case *c = &tiny_cases[_i];
    struct kvp_model m;
    struct kvp_deploy d;
    struct kvp_fit f;

    if (c->gemma)
        tiny_gemma3(&m);
    else
        tiny_llama(&m, c->hidden);
    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, &m);
    d.context = c->n_ctx;
    d.k = test_fmt(c->k);
    d.v = test_fmt(c->v);
    d.n_seq = c->n_seq;
    d.swa_full = c->swa_full;
    f = fit_ok(&m, &d);
    ck_assert_msg(cache_total(&f) == c->bytes, "case %d: %llu bytes, oracle %llu", _i,
                  (unsigned long long)cache_total(&f), (unsigned long long)c->bytes);
    ck_assert_uint_eq(f.cells, c->cells);
    ck_assert_uint_eq(f.n_stream, c->n_stream);
    if (c->swa_cells)
        ck_assert_uint_eq(f.swa_cells, c->swa_cells);
}
END_TEST

/* llama.cpp -ngl (llama_model_base::load_tensors): of the 8 layers + the
 * output layer, the last N are on the GPU, i_gpu_start = max(8 + 1 - N, 0);
 * a layer's KV on its layer's device, all of it on the host with
 * --no-kv-offload. 8 full layers of H4 KV2 hd32 at 256 cells, f16: a layer's
 * K is 2 x 32 x 256 x 2 = 32,768 B and so is its V, 65,536 B a layer, a
 * multiple of both buffers' alignments (CUDA 128, CPU 32). */
static const struct {
    int32_t ngl;
    bool nkvo;
    uint32_t gpu_layers, gpu_model, host_model, gpu_kv, host_kv;
    bool output;
} ngl_cases[] = {
    {-1, false, 9, 8, 0, 8, 0, true},  /* default: all */
    {999, false, 9, 8, 0, 8, 0, true}, /* more than there are: all */
    {9, false, 9, 8, 0, 8, 0, true},
    {8, false, 8, 7, 1, 7, 1, true},   /* start 1: layer 0 on the host, the output on the GPU */
    {3, false, 3, 2, 6, 2, 6, true},   /* start 6: layers 6 and 7 */
    {1, false, 1, 0, 8, 0, 8, true},   /* the output layer alone */
    {0, false, 0, 0, 8, 0, 8, false},
    {3, true, 3, 2, 6, 0, 8, true},    /* -nkvo: the layers stay, their KV goes to the host */
};

/* kvp_fit_limits (issue #33 item 2): each answer of the search is the edge a plain fit sees. The longest
 * context fits and one token more does not, with the model's limit lifted in the test's own copy (vLLM
 * refuses a max_model_len past it); which limit binds and the YaRN factor follow; under llama.cpp the
 * most -ngl fits and one more does not, the fewest --n-cpu-moe fits and one fewer does not. */
static const struct limits_case {
    const char *model, *engine;
    uint32_t tp;
    uint64_t gpu_gib, context; /* 0: the model's */
    const char *kv;
} limits_cases[] = {
    {"qwen3-30b-a3b", "llamacpp", 1, 24, 131072, "q8_0"}, /* the issue's 4090: the memory past the config's 40,960 */
    {"llama-3.1-8b", "vllm", 1, 80, 0, NULL},              /* the model's 131,072 binds */
    {"llama-3.1-70b", "vllm", 2, 80, 0, NULL},             /* the memory binds */
    {"llama-3.1-70b", "sglang", 2, 80, 0, NULL},
    {"qwen3-8b", "trtllm", 1, 24, 0, NULL},
    {"gemma-3-4b", "hf-dynamic", 1, 24, 0, NULL},
};

static bool fits_with(const struct kvp_model *m, const struct kvp_deploy *base, uint64_t ctx, int32_t ngl,
                      int32_t cpu_moe)
{
    struct kvp_deploy t = *base;
    struct kvp_fit f;
    t.context = ctx;
    t.n_gpu_layers = ngl;
    t.n_cpu_moe = cpu_moe;
    f = fit_ok(m, &t);
    return f.fits;
}

START_TEST(fit_limits_edges)
{
    const struct limits_case *c = &limits_cases[_i];
    struct kvp_model *m = test_load(c->model), lifted;
    struct kvp_deploy d;
    struct kvp_fit_limits l;
    struct kvp_error err = {0};

    deploy_at(&d, c->engine, m);
    d.tp = d.n_gpus = c->tp;
    d.gpu_memory = c->gpu_gib * GiB;
    if (c->context)
        d.context = c->context;
    if (c->kv) {
        ck_assert_kvp_ok(kvp_format_parse(c->kv, &d.k, &err), err);
        d.v = d.k;
    }
    if (d.engine == KVP_ENGINE_LLAMACPP)
        ck_assert_kvp_ok(kvp_wstore_parse("q4_k_m", true, &d.w, &err), err);
    ck_assert_kvp_ok(kvp_fit_limits(m, &d, &l, &err), err);
    lifted = *m;
    lifted.max_context = UINT32_MAX;
    ck_assert_uint_gt(l.memory_context, 0);
    ck_assert_msg(fits_with(&lifted, &d, l.memory_context, d.n_gpu_layers, d.n_cpu_moe), "%s %s: %llu does not fit",
                  c->model, c->engine, (unsigned long long)l.memory_context);
    ck_assert_msg(!fits_with(&lifted, &d, l.memory_context + 1, d.n_gpu_layers, d.n_cpu_moe),
                  "%s %s: %llu + 1 fits", c->model, c->engine, (unsigned long long)l.memory_context);
    ck_assert_uint_eq(l.model_context, m->max_context);
    ck_assert_int_eq(l.model_binds, l.memory_context > m->max_context);
    ck_assert(l.model_binds ? fabs(l.rope_factor * (double)m->max_context - (double)l.memory_context) < 1e-6
                            : l.rope_factor == 0.0);
    if (d.engine == KVP_ENGINE_LLAMACPP) {
        ck_assert_int_ge(l.max_gpu_layers, 0);
        ck_assert(fits_with(m, &d, d.context, (int32_t)l.max_gpu_layers, d.n_cpu_moe));
        ck_assert(l.max_gpu_layers > m->n_layers ||
                  !fits_with(m, &d, d.context, (int32_t)l.max_gpu_layers + 1, d.n_cpu_moe));
        ck_assert_int_ge(l.min_cpu_moe, 0);
        ck_assert(fits_with(m, &d, d.context, -1, (int32_t)l.min_cpu_moe));
        ck_assert(l.min_cpu_moe == 0 || !fits_with(m, &d, d.context, -1, (int32_t)l.min_cpu_moe - 1));
        ck_assert_uint_gt(l.host_at_min_cpu_moe, 0);
    } else {
        ck_assert_int_eq(l.max_gpu_layers, -1);
        ck_assert_int_eq(l.min_cpu_moe, -1);
    }
    kvp_model_free(m);
}
END_TEST

/* llama.cpp on Apple silicon (issue #33 item 3): real Metal start-up logs, the GPU the catalog's
 * working set (models/gpus.yaml, recommendedMaxWorkingSetSize). KV to the byte; the compute buffer
 * under the b4862 rules (the logs' builds are of late 2023, before it) within 10%; whether it fits
 * as the log's "(allocated / working set)" says.
 *  - https://github.com/ggml-org/llama.cpp/issues/4495, Mixtral on an M1 16GB, n_ctx 512, f16: "KV self
 *    size = 64.00 MiB", "compute buffer total size = 117.72 MiB", "(19626.77 / 10922.67)" and the
 *    warning that the allocation is over the working set.
 *  - https://github.com/ggml-org/llama.cpp/issues/3606, 32 GB (21845.34 MB): 'kv' 402.00 MB (the 2023
 *    build's 2 MiB header over 400 MiB: 40 layers x 5120 x 2 x 512 x f16, Llama-2-13B at n_ctx 512,
 *    the model inferred from it) and the graph's 'alloc' buffer 75.02 MB. */
static const struct metal_case {
    const char *model, *gpu, *weights;
    uint64_t context;
    double kv_mib, compute_mib;
    bool fits;
} metal_cases[] = {
    {"mixtral-8x7b", "mac-16gb", "q3_k_m", 512, 64.0, 117.72, false},
    {"llama-2-13b", "mac-32gb", "q5_k_m", 512, 402.0 - 2.0, 75.02, true},
};

START_TEST(llamacpp_metal_logs)
{
    const struct metal_case *c = &metal_cases[_i];
    struct kvp_model *m = test_load(c->model);
    struct kvp_gpu_catalog *gpus = NULL;
    const struct kvp_gpu *g = NULL;
    struct kvp_error err = {0};
    struct kvp_deploy d;
    struct kvp_fit f;
    double e;

    ck_assert_kvp_ok(kvp_gpu_catalog_load("models/gpus.yaml", &gpus, &err), err);
    ck_assert_kvp_ok(kvp_gpu_find(gpus, c->gpu, &g, &err), err);
    deploy_at(&d, "llamacpp@b4862", m);
    d.gpu_memory = g->memory_bytes;
    d.context = c->context;
    ck_assert_kvp_ok(kvp_wstore_parse(c->weights, true, &d.w, &err), err);
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.kv_pool_bytes, (uint64_t)llround(c->kv_mib * MiB));
    e = rel_err((double)f.reserve.activation, c->compute_mib * MiB);
    ck_assert_msg(fabs(e) <= 0.10, "%s: compute buffer %.2f MiB, logged %.2f (%+.1f%%)", c->model,
                  (double)f.reserve.activation / MiB, c->compute_mib, 100 * e);
    ck_assert_int_eq(f.fits, c->fits);
    kvp_gpu_catalog_free(gpus);
    kvp_model_free(m);
}
END_TEST

/* kvp_fit_llamacpp_auto: llama.cpp's --fit (common/fit.cpp common_params_fit_impl) with -c unset.
 * Unchanged when n_ctx_train leaves the 1 GiB target; else the linear context, a multiple of 256
 * at or above n_ctx_min, whose plain fit leaves the target and whose next 256 tokens do not (the
 * projection is linear in the context); layers next when even n_ctx_min does not leave it: the
 * false position ends on the most that leave the target, one more does not (step 3: -ngl; step
 * 4: a MoE model's full layers, the experts of the rest in host memory). */
static const struct fitp_case {
    const char *model, *weights;
    uint64_t gpu_bytes;
    enum kvp_params_fit_step step;
} fitp_cases[] = {
    {"qwen3-30b-a3b", "q4_k_m", 25756696576ull, KVP_PARAMS_FIT_UNCHANGED}, /* rtx-4090 */
    {"llama-3.1-8b", "q8_0", 25447170048ull, KVP_PARAMS_FIT_CONTEXT},      /* rtx-3090 */
    {"llama-3.1-70b", "q4_k_m", 48ull << 30, KVP_PARAMS_FIT_CONTEXT},      /* mac-64gb */
    {"llama-3.1-405b", "q4_k_m", 25756696576ull, KVP_PARAMS_FIT_LAYERS},   /* -ngl 13 of 127 */
    {"llama-3.1-70b", "q4_k_m", 25756696576ull, KVP_PARAMS_FIT_LAYERS},    /* -ngl 44 of 81 */
    {"qwen3-30b-a3b", "q8_0", 25756696576ull, KVP_PARAMS_FIT_EXPERTS},     /* 33 full layers of 48 */
    {"qwen3-30b-a3b", "f16", 25756696576ull, KVP_PARAMS_FIT_EXPERTS},      /* 16 */
    {"qwen3-30b-a3b", "f16", 4ull << 30, KVP_PARAMS_FIT_LAYERS},           /* dense-only layers, not all */
};

START_TEST(llamacpp_params_fit)
{
    const struct fitp_case *c = &fitp_cases[_i];
    struct kvp_model *m = test_load(c->model);
    struct kvp_deploy d;
    struct kvp_params_fit p;
    struct kvp_error err = {0};
    struct kvp_fit f;

    deploy_at(&d, "llamacpp", m);
    d.gpu_memory = c->gpu_bytes;
    ck_assert_kvp_ok(kvp_wstore_parse(c->weights, true, &d.w, &err), err);
    ck_assert_kvp_ok(kvp_fit_llamacpp_auto(m, &d, 1024 * MiB, 4096, 0, &p, &err), err);
    ck_assert_int_eq(p.step, c->step);
    d.context = p.n_ctx;
    f = fit_ok(m, &d);
    if (c->step == KVP_PARAMS_FIT_LAYERS || c->step == KVP_PARAMS_FIT_EXPERTS) {
        struct kvp_deploy g = d;
        ck_assert_uint_eq(p.n_ctx, 4096);
        ck_assert(!f.fits || f.free_bytes < 1024 * MiB);
        ck_assert_uint_lt(p.n_gpu_layers, m->n_layers + 2);
        /* its choice leaves the target; one layer more on the GPU (step 3), or one more full layer
         * (step 4), does not */
        g.n_gpu_layers = (int32_t)p.n_gpu_layers;
        g.cpu_moe_first = p.cpu_moe_first;
        g.n_cpu_moe = p.cpu_moe_first < m->n_layers ? -1 : 0;
        f = fit_ok(m, &g);
        ck_assert(f.fits && f.free_bytes >= 1024 * MiB);
        ck_assert_uint_eq(f.free_bytes, (uint64_t)((int64_t)(d.gpu_memory - f.reserve.non_torch) - p.used));
        if (c->step == KVP_PARAMS_FIT_EXPERTS) {
            ck_assert_uint_eq(p.n_gpu_layers, m->n_layers + 1);
            g.cpu_moe_first++;
        } else {
            g.n_gpu_layers++;
            if (m->n_experts)
                ck_assert_uint_eq(p.cpu_moe_first, m->n_layers + 1 - p.n_gpu_layers + 1); /* the first GPU layer full */
        }
        g.n_cpu_moe = g.cpu_moe_first < m->n_layers ? -1 : 0;
        f = fit_ok(m, &g);
        ck_assert(!f.fits || f.free_bytes < 1024 * MiB);
        d.n_gpu_layers = 20; /* given: --fit moves nothing itself */
        ck_assert_kvp_ok(kvp_fit_llamacpp_auto(m, &d, 1024 * MiB, 4096, 0, &p, &err), err);
        ck_assert(p.step != KVP_PARAMS_FIT_LAYERS && p.step != KVP_PARAMS_FIT_EXPERTS);
        d.n_gpu_layers = -1;
    } else {
        ck_assert(f.fits && f.free_bytes >= 1024 * MiB);
    }
    if (c->step == KVP_PARAMS_FIT_CONTEXT) {
        ck_assert_uint_eq(p.n_ctx % 256, 0);
        ck_assert_uint_lt(p.n_ctx, m->max_context);
        d.context = p.n_ctx + 256;
        f = fit_ok(m, &d);
        ck_assert(!f.fits || f.free_bytes < 1024 * MiB);
    }
    if (c->step == KVP_PARAMS_FIT_UNCHANGED)
        ck_assert_uint_eq(p.n_ctx, m->max_context);
    d.n_gpus = d.tp = 2; /* several devices: not modelled */
    ck_assert_kvp_ok(kvp_fit_llamacpp_auto(m, &d, 1024 * MiB, 4096, 0, &p, &err), err);
    ck_assert_int_eq(p.step, KVP_PARAMS_FIT_NONE);
    kvp_model_free(m);
}
END_TEST

/* --fit with -c given (the user's: step 2 keeps it, "context size set by user"): Llama-3.1-8B Q8_0
 * at -c 8192 on an RTX 3090 leaves the target, nothing changes; Llama-3.1-70B Q4_K_M at -c 32768 on
 * an RTX 4090 does not, and step 3 takes the most layers that leave it at that context. */
START_TEST(llamacpp_params_fit_given)
{
    struct kvp_model *small = test_load("llama-3.1-8b"), *m = test_load("llama-3.1-70b");
    struct kvp_deploy d;
    struct kvp_params_fit p;
    struct kvp_error err = {0};
    struct kvp_fit f;

    deploy_at(&d, "llamacpp", small);
    d.gpu_memory = 25447170048ull;
    d.w = test_wstore("q8_0");
    ck_assert_kvp_ok(kvp_fit_llamacpp_auto(small, &d, 1024 * MiB, 4096, 8192, &p, &err), err);
    ck_assert(p.ctx_given && p.step == KVP_PARAMS_FIT_UNCHANGED && p.n_ctx == 8192);
    deploy_at(&d, "llamacpp", m);
    d.gpu_memory = 25756696576ull;
    d.w = test_wstore("q4_k_m");
    ck_assert_kvp_ok(kvp_fit_llamacpp_auto(m, &d, 1024 * MiB, 4096, 32768, &p, &err), err);
    ck_assert(p.ctx_given && p.step == KVP_PARAMS_FIT_LAYERS && p.n_ctx == 32768);
    d.context = 32768;
    d.n_gpu_layers = (int32_t)p.n_gpu_layers;
    f = fit_ok(m, &d);
    ck_assert(f.fits && f.free_bytes >= 1024 * MiB);
    d.n_gpu_layers++;
    f = fit_ok(m, &d);
    ck_assert(!f.fits || f.free_bytes < 1024 * MiB);
    kvp_model_free(small);
    kvp_model_free(m);
}
END_TEST

START_TEST(llamacpp_ngl_placement)
{
    struct kvp_model m;
    struct kvp_deploy d;
    struct kvp_fit f;

    uniform(&m, "ngl", KVP_LAYER_FULL, 8, 4, 2, 32, 0);
    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, &m);
    reserve_given(&d);
    d.context = 256;
    d.n_gpu_layers = ngl_cases[_i].ngl;
    d.no_kv_offload = ngl_cases[_i].nkvo;
    f = fit_ok(&m, &d);
    ck_assert_uint_eq(f.gpu_layers, ngl_cases[_i].gpu_layers);
    ck_assert_int_eq(f.output_on_gpu, ngl_cases[_i].output);
    ck_assert_uint_eq(f.device[0].model_layers, ngl_cases[_i].gpu_model);
    ck_assert_uint_eq(f.host.model_layers, ngl_cases[_i].host_model);
    ck_assert_uint_eq(f.device[0].layers, ngl_cases[_i].gpu_kv);
    ck_assert_uint_eq(f.host.layers, ngl_cases[_i].host_kv);
    ck_assert_uint_eq(f.device[0].buffer_bytes, ngl_cases[_i].gpu_kv * 65536ull);
    ck_assert_uint_eq(f.host.buffer_bytes, ngl_cases[_i].host_kv * 65536ull);
    ck_assert_uint_eq(f.kv_bytes_required, ngl_cases[_i].gpu_kv * 65536ull); /* the GPU's KV bounds the fit */
    ck_assert(!f.weights_exact); /* no GGUF table: in proportion to the layers */
}
END_TEST

/* -ot PATTERN=CPU (llama.cpp common/arg.cpp; the loader's std::regex_search on each tensor's name):
 * Qwen3-30B-A3B's experts by name land where --n-cpu-moe puts the same number of layers' (its 48
 * MoE layers are alike): every layer's for exps, layers 10-29's for a range, 0-9's for \\d (one
 * digit, then a dot). A dense model has no expert tensors to match. */
START_TEST(llamacpp_override_tensor)
{
    static const struct {
        const char *spec;
        int32_t n_cpu_moe;
    } same[] = {
        {"exps=CPU", -1},
        {"blk\\.(1[0-9]|2[0-9])\\.ffn_.*_exps=CPU", 20},
        {"blk\\.\\d\\.ffn_(up|down|gate)_exps=CPU", 10},
        {"blk\\.[0-4]\\.ffn_.*_exps=CPU,blk\\.[5-9]\\.ffn_.*_exps\\.=CPU", 10}, /* two pairs */
    };
    static const struct {
        const char *spec, *msg;
    } bad[] = {
        {"ffn_(up|gate)_exps=CPU", "moves only some of layer 0's expert tensors"},
        {"attn_q=CPU", "matches blk.0.attn_q.weight"},
        {"output=CPU", "matches output_norm.weight"},
        {"exps=CUDA0", "only =CPU (host memory) is modelled"},
        {"ex(ps=CPU", "pattern 'ex(ps':"},
        {"=CPU", "want PATTERN=BUFFER"},
    };
    struct kvp_model *m = test_load("qwen3-30b-a3b"), *dense = test_load("llama-3.1-8b");
    struct kvp_deploy d, n;
    struct kvp_error err = {0};
    struct kvp_fit a, b;

    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, m);
    d.context = 4096;
    d.w = test_wstore("q4_k_m");
    for (size_t i = 0; i < N_ELEMS(same); i++) {
        n = d;
        memset(n.cpu_experts, 0, sizeof n.cpu_experts); /* the option's layers alone */
        n.n_cpu_moe = same[i].n_cpu_moe;
        ck_assert_kvp_ok(kvp_llamacpp_overrides(m, same[i].spec, &d, &err), err);
        a = fit_ok(m, &d);
        b = fit_ok(m, &n);
        ck_assert_msg(a.host.weights_bytes == b.host.weights_bytes && a.host.weights_bytes > 0, "%s", same[i].spec);
        ck_assert_uint_eq(a.device[0].weights_bytes, b.device[0].weights_bytes);
        ck_assert_uint_eq(a.host.expert_bytes, b.host.expert_bytes);
        ck_assert_uint_eq(a.reserve.activation, b.reserve.activation); /* the offloaded op's copy */
    }
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        ck_assert_int_ne(kvp_llamacpp_overrides(m, bad[i].spec, &d, &err), KVP_OK);
        ck_assert_msg(strstr(err.msg, bad[i].msg), "%s: %s", bad[i].spec, err.msg);
    }
    kvp_deploy_init(&n, KVP_ENGINE_LLAMACPP, dense);
    ck_assert_kvp_ok(kvp_llamacpp_overrides(dense, "exps=CPU", &n, &err), err);
    for (size_t i = 0; i < N_ELEMS(n.cpu_experts); i++)
        ck_assert_uint_eq(n.cpu_experts[i], 0);
    kvp_model_free(m);
    kvp_model_free(dense);
}
END_TEST

/* vLLM's LoRA slots (profile_vllm.c lora_stacks): Llama-3.1-8B, per layer and unit of rank, qkv A
 * 3 x 4096 + B 4096 + 8 x 256, o A 4096 + B 4096, gate_up A 2 x 4096 + B 2 x 14336, down A 14336 +
 * B 4096 = 81,920; x 32 layers x rank 64 x 4 slots x 2 B = 1,342,177,280 B in the weights. At tp 2
 * (2 slots of rank 16): 55,296 x 32 x 16 x 2 x 2 = 113,246,208 B a GPU. Refused: another engine,
 * MoE and MLA layers. */
START_TEST(vllm_lora_slots)
{
    struct kvp_model *m = test_load("llama-3.1-8b"), *moe = test_load("qwen3-30b-a3b");
    struct kvp_deploy d;
    struct kvp_fit no, lora;
    struct kvp_error err = {0};

    deploy_at(&d, "vllm@0.11.0", m);
    d.gpu_memory = 80 * GiB;
    reserve_given(&d);
    no = fit_ok(m, &d);
    d.max_loras = 4;
    d.max_lora_rank = 64;
    lora = fit_ok(m, &d);
    ck_assert_uint_eq(lora.lora_bytes, 1342177280ull);
    ck_assert_uint_eq(lora.weights_bytes - no.weights_bytes, 1342177280ull);
    ck_assert_uint_eq(no.kv_budget_bytes - lora.kv_budget_bytes, 1342177280ull);
    d.n_gpus = d.tp = 2;
    d.max_loras = 2;
    d.max_lora_rank = 0; /* vLLM's default, 16 */
    lora = fit_ok(m, &d);
    ck_assert_uint_eq(lora.lora_bytes, 113246208ull);
    deploy_at(&d, "sglang", m);
    d.gpu_memory = 80 * GiB;
    d.max_loras = 1;
    ck_assert_int_eq(kvp_fit_compute(m, &d, &lora, &err), KVP_ERR_UNSUPPORTED);
    ck_assert(strstr(err.msg, "modelled for vLLM only"));
    deploy_at(&d, "vllm", moe);
    d.gpu_memory = 80 * GiB;
    d.max_loras = 1;
    ck_assert_int_eq(kvp_fit_compute(moe, &d, &lora, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "LoRA of MoE layers is not modelled"), "%s", err.msg);
    kvp_model_free(m);
    kvp_model_free(moe);
}
END_TEST

/* Ollama v0.32.15's choices (kvp_deploy_ollama; server/routes.go Serve, server/sched.go
 * automaticGenerationBatch): num_ctx by the VRAM of every GPU together, at most the model's;
 * num_batch by the tokens, stepped down while its prediction (weights + 4 x L x fewest KV heads x
 * hidden / heads x tokens) leaves too little headroom. llama-3.1-8b: 32 layers, 8 KV heads, hidden
 * 4096 / 32 heads: 128 KiB per token in its prediction. */
static const struct {
    double gib;
    uint32_t gpus;
    const char *w;
    int fa;
    uint64_t context, batch;
} ollama_cases[] = {
    {23.99, 1, "q4_k_m", -1, 32768, 1024}, /* 4.6 + 4 GiB predicted: within 75% and the 768 MiB surcharge */
    {22.0, 1, "q4_k_m", -1, 4096, 512},    /* an L4's 22 GiB: under the 23 GiB tier */
    {79.19, 1, "q4_k_m", -1, 131072, 2048}, /* 262144 capped at the model's 131072; 20.6 GiB within 60% */
    {23.99, 2, "q4_k_m", -1, 131072, 2048}, /* two 24 GiB cards: 47.98 GiB, the top tier */
    {23.99, 1, "stored", -1, 32768, 512},  /* 15 + 4 GiB: past 75% of 24 GiB, 1024 steps down */
    {7.5, 1, "q4_k_m", 0, 4096, 512},      /* CUDA without flash attention: 512 ... */
};

START_TEST(ollama_choices)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_error err = {0};
    enum kvp_engine_id e;
    uint32_t rel;
    ck_assert_kvp_ok(kvp_engine_parse("ollama", &e, &rel, &err), err);
    ck_assert_int_eq(e, KVP_ENGINE_LLAMACPP);
    kvp_deploy_init(&d, e, m);
    d.release = rel;
    ck_assert(kvp_deploy_release(&d)->rules & KVP_REL_OLLAMA);
    d.gpu_memory = (uint64_t)(ollama_cases[_i].gib * (1ull << 30));
    d.n_gpus = ollama_cases[_i].gpus;
    d.compute_capability = 89;
    d.flash_attn = ollama_cases[_i].fa;
    d.w = test_wstore(ollama_cases[_i].w);
    kvp_deploy_ollama(m, &d, false, false);
    ck_assert_uint_eq(d.context, ollama_cases[_i].context);
    ck_assert_uint_eq(d.n_batch, ollama_cases[_i].batch);
    ck_assert_uint_eq(d.n_ubatch, ollama_cases[_i].batch);
    ck_assert_uint_eq(d.ollama_auto, KVP_OLLAMA_CONTEXT | KVP_OLLAMA_BATCH);
    kvp_model_free(m);
}
END_TEST

/* ... 256 on 8 GiB or less past 4096 tokens; what the user gives stays, and nothing is chosen for it. */
START_TEST(ollama_given)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_error err = {0};
    enum kvp_engine_id e;
    uint32_t rel;
    ck_assert_kvp_ok(kvp_engine_parse("ollama@0.32.15", &e, &rel, &err), err);
    kvp_deploy_init(&d, e, m);
    d.release = rel;
    d.gpu_memory = 8ull << 30;
    d.compute_capability = 86;
    d.flash_attn = 0;
    d.context = 8192;
    kvp_deploy_ollama(m, &d, true, false);
    ck_assert_uint_eq(d.context, 8192);
    ck_assert_uint_eq(d.n_batch, 256);
    ck_assert_uint_eq(d.ollama_auto, KVP_OLLAMA_BATCH);
    d.n_batch = 333;
    kvp_deploy_ollama(m, &d, true, true);
    ck_assert_uint_eq(d.n_batch, 333);
    ck_assert_uint_eq(d.ollama_auto, 0);
    ck_assert_int_eq(kvp_engine_parse("ollama@0.1", &e, &rel, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "ollama: unknown release '0.1' (known: 0.32.15)");
    d.n_seq = 4; /* OLLAMA_NUM_PARALLEL=4 stands for llama */
    kvp_deploy_ollama(m, &d, true, true);
    ck_assert_uint_eq(d.n_seq, 4);
    kvp_model_free(m);
    m = test_load("qwen3-next-80b-a3b"); /* model_type qwen3_next: Ollama's qwen3next, one request at a time */
    kvp_deploy_init(&d, e, m);
    d.release = rel;
    d.gpu_memory = 80ull << 30;
    d.n_seq = 4;
    kvp_deploy_ollama(m, &d, false, false);
    ck_assert_uint_eq(d.n_seq, 1);
    ck_assert_uint_eq(d.ollama_auto, KVP_OLLAMA_PARALLEL | KVP_OLLAMA_CONTEXT | KVP_OLLAMA_BATCH);
    ck_assert_uint_eq(d.context, 262144);
    kvp_model_free(m);
}
END_TEST

/* Weights from a GGUF table (m->wtable.place, padded per buffer type): the
 * input stays on the host; a layer's group goes to its device, less its
 * experts under --n-cpu-moe; a tied output is token_embd copied to the GPU.
 * 8 layers of host 100 / GPU 128 B, experts host 64 / GPU 96 of those;
 * input 1000 B; output host 500 / GPU 600; token_embd GPU 300. At -ngl 3
 * (layers 6, 7 and the output on the GPU) with --n-cpu-moe 7 (layers 0..6):
 * GPU = (128 - 96) + 128 + 600 + 300 = 1,060; host = 1000 + 6 x 100 + 64 = 1,664. */
START_TEST(llamacpp_weights_placed)
{
    struct kvp_model m;
    struct kvp_deploy d;
    struct kvp_fit f;

    uniform(&m, "placed", KVP_LAYER_FULL, 8, 4, 2, 32, 0);
    m.wtable.placed = true;
    m.wtable.has_output = false;
    m.wtable.place[KVP_WPLACE_INPUT] = (struct kvp_wplace){1000, 1024, 0, 0};
    m.wtable.place[KVP_WPLACE_OUTPUT] = (struct kvp_wplace){500, 600, 0, 0};
    m.wtable.place[KVP_WPLACE_EMBD] = (struct kvp_wplace){288, 300, 0, 0};
    for (uint32_t il = 0; il < 8; il++)
        m.wtable.place[KVP_WPLACE_LAYER + il] = (struct kvp_wplace){100, 128, 64, 96};
    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, &m);
    reserve_given(&d);
    d.context = 256;
    d.n_gpu_layers = 3;
    d.n_cpu_moe = 7;
    f = fit_ok(&m, &d);
    ck_assert(f.weights_exact);
    ck_assert_uint_eq(f.device[0].weights_bytes, 1060);
    ck_assert_uint_eq(f.host.weights_bytes, 1664);
    ck_assert_uint_eq(f.weights_bytes, 1060);
    d.n_gpu_layers = 0; /* everything on the host, the output without its tied copy */
    d.n_cpu_moe = 0;
    f = fit_ok(&m, &d);
    ck_assert_uint_eq(f.device[0].weights_bytes, 0);
    ck_assert_uint_eq(f.host.weights_bytes, 1000 + 8 * 100 + 500);
    d.n_gpu_layers = -1; /* all, every layer's experts on the host: --cpu-moe */
    d.n_cpu_moe = -1;
    f = fit_ok(&m, &d);
    ck_assert_uint_eq(f.device[0].weights_bytes, 8 * 32 + 600 + 300);
    ck_assert_uint_eq(f.host.weights_bytes, 1000 + 8 * 64);
}
END_TEST

/* ---- vLLM rules at their edges ------------------------------------------ */

/* One full layer of 1 KV head x 64, bf16: a page is 2 x 16 x 64 x 2 = 4096 B.
 * 100 blocks of budget; a request of L tokens takes cdiv(L, 16) blocks. */
static const struct { uint64_t context, blocks; } block_cases[] = {
    {1, 1}, {16, 1}, {17, 2}, {32, 2}, {33, 3}, {1600, 100}, {1601, 101},
};

START_TEST(vllm_block_edges)
{
    struct kvp_model m;
    struct kvp_deploy d;
    struct kvp_fit f;

    uniform(&m, "one-block", KVP_LAYER_FULL, 1, 1, 1, 64, 0);
    kvp_deploy_init(&d, KVP_ENGINE_VLLM, &m);
    d.kv_memory = 100 * 4096;
    d.context = block_cases[_i].context;
    f = fit_ok(&m, &d);
    ck_assert_uint_eq(f.block_size, 16);
    ck_assert_uint_eq(f.num_blocks, 100);
    ck_assert_uint_eq(f.kv_tokens, 1600);
    ck_assert_uint_eq(f.request_bytes, block_cases[_i].blocks * 4096);
    ck_assert_double_eq_tol(f.max_concurrency, 100.0 / (double)block_cases[_i].blocks, 1e-9);
    ck_assert_int_eq(f.fits, block_cases[_i].blocks <= 100);
}
END_TEST

/* One sliding layer, W = 18, max_num_batched_tokens 16: a request takes
 * cdiv(min(W - 1 + 16, L), 16) + 1 blocks; W - 1 + 16 = 33. */
static const struct { uint64_t context, blocks; } sliding_cases[] = {
    {1, 2},     /* cdiv(1, 16) + 1 */
    {16, 2},    /* cdiv(16, 16) + 1 */
    {17, 3},    /* cdiv(17, 16) + 1 */
    {32, 3},    /* cdiv(32, 16) + 1 */
    {33, 4},    /* cdiv(33, 16) + 1 */
    {34, 4},    /* min(33, 34) = 33 */
    {100000, 4},
};

START_TEST(vllm_sliding_edges)
{
    struct kvp_model m;
    struct kvp_deploy d;
    struct kvp_fit f;

    uniform(&m, "one-sliding", KVP_LAYER_SLIDING, 1, 1, 1, 64, 18);
    kvp_deploy_init(&d, KVP_ENGINE_VLLM, &m);
    d.kv_memory = 120 * 4096;
    d.max_batched_tokens = 16;
    d.context = sliding_cases[_i].context;
    f = fit_ok(&m, &d);
    ck_assert_uint_eq(f.num_blocks, 120);
    ck_assert_uint_eq(f.request_bytes, sliding_cases[_i].blocks * 4096);
    ck_assert_double_eq_tol(f.max_concurrency, 120.0 / (double)sliding_cases[_i].blocks, 1e-9);
}
END_TEST

/* Hybrid grouping. group_size = max_n if max_n < 1.5 min_n else min_n;
 * cdiv(n, group_size) groups per type; num_blocks = avail // page // group_size;
 * logged tokens = num_blocks // n_groups * 16.
 *  gemma-3-27b: 52 sliding + 10 full -> 10; 1 + 6 = 7 groups; page
 *    2 x 16 x 16 x 128 x 2 = 131072; 10 GiB // 131072 // 10 = 8192 blocks;
 *    8192 // 7 * 16 = 18720 tokens. At 32768 tokens (mbt 8192) a request takes
 *    2048 (full) + 6 x (cdiv(min(1023 + 8192, 32768), 16) + 1) = 6 x 577 blocks = 5510.
 *  gpt-oss-20b: 12 + 12 -> group_size 12, 2 groups; page 2 x 16 x 8 x 64 x 2 =
 *    32768; 1 GiB // 32768 // 12 = 2730; 2730 // 2 * 16 = 21840 tokens. At 32768
 *    tokens: 2048 + cdiv(min(127 + 8192, 32768), 16) + 1 = 2048 + 521 = 2569. */
static const struct {
    const char *model;
    uint64_t kv_memory, context;
    uint32_t n_groups;
    uint64_t num_blocks, kv_tokens, request_blocks;
} hybrid_cases[] = {
    {"gemma-3-27b", 10 * GiB, 32768, 7, 8192, 18720, 5510},
    {"gpt-oss-20b", 1 * GiB, 32768, 2, 2730, 21840, 2569},
};

START_TEST(vllm_hybrid_groups)
{
    struct kvp_model *m = test_load(hybrid_cases[_i].model);
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
    d.kv_memory = hybrid_cases[_i].kv_memory;
    d.context = hybrid_cases[_i].context;
    d.max_batched_tokens = 8192;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.n_groups, hybrid_cases[_i].n_groups);
    ck_assert_uint_eq(f.num_blocks, hybrid_cases[_i].num_blocks);
    ck_assert_uint_eq(f.kv_tokens, hybrid_cases[_i].kv_tokens);
    ck_assert_uint_eq(f.kv_tokens, f.num_blocks / f.n_groups * 16);
    ck_assert_double_eq_tol(f.max_concurrency,
                            (double)hybrid_cases[_i].num_blocks / (double)hybrid_cases[_i].request_blocks, 1e-9);
    kvp_model_free(m);
}
END_TEST

/* MLA: blocks of 64 by default (FlashMLA), one latent of 512 + 64 per layer,
 * not divided by TP: 61 x 576 x 2 B at every tp. */
START_TEST(vllm_mla)
{
    struct kvp_model *m = test_load("deepseek-v3");
    struct kvp_deploy d;
    struct kvp_fit f1, f8;

    kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
    d.kv_memory = 4 * GiB;
    d.context = 4096;
    f1 = fit_ok(m, &d);
    ck_assert_uint_eq(f1.block_size, 64);
    ck_assert_uint_eq(f1.kv_bytes_per_token_per_gpu, 61 * 576 * 2);
    /* page = 64 x 576 x 2 = 73728 per layer; 61 layers in one group */
    ck_assert_uint_eq(f1.num_blocks, 4 * GiB / 73728 / 61);
    ck_assert_uint_eq(f1.request_bytes, 64ull * 73728 * 61); /* cdiv(4096, 64) blocks */
    d.tp = d.n_gpus = 8;
    f8 = fit_ok(m, &d);
    ck_assert_uint_eq(f8.kv_bytes_per_token_per_gpu, 61 * 576 * 2);
    ck_assert_uint_eq(f8.kv_bytes_per_token_per_gpu, f1.kv_bytes_per_token_per_gpu);
    ck_assert_uint_eq(f8.block_size, 64);
    kvp_model_free(m);
}
END_TEST

/* num_kv_heads = max(1, 8 // tp): tp 8 and tp 16 both hold one head of 128
 * per layer: 32 x 2 x 128 x 2 = 16384 B a token; tp 2: 4 heads. */
static const struct { uint32_t tp; uint64_t per_token; } tp_cases[] = {
    {1, 131072}, {2, 65536}, {4, 32768}, {8, 16384}, {16, 16384}, {32, 16384},
};

START_TEST(vllm_tp_heads)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
    d.kv_memory = 1 * GiB;
    d.context = 8192;
    d.tp = d.n_gpus = tp_cases[_i].tp;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.kv_bytes_per_token_per_gpu, tp_cases[_i].per_token);
    kvp_model_free(m);
}
END_TEST

/* fp8 stores one byte per value: half of bf16. */
START_TEST(vllm_fp8_halves)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f16, f8;

    kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
    d.kv_memory = 1 * GiB;
    d.context = 8192;
    f16 = fit_ok(m, &d);
    d.k = d.v = test_fmt("fp8_e4m3");
    f8 = fit_ok(m, &d);
    ck_assert_uint_eq(f16.kv_bytes_per_token_per_gpu, 131072);
    ck_assert_uint_eq(f8.kv_bytes_per_token_per_gpu, 65536);
    ck_assert_uint_eq(f8.num_blocks, 2 * f16.num_blocks); /* 1 GiB // 1 MiB vs // 2 MiB */
    ck_assert_uint_eq(f8.num_blocks, 1024);
    kvp_model_free(m);
}
END_TEST

/* ---- SGLang ------------------------------------------------------------- */

/* cell = H_kv,rank x (hd + hv) x layers x bytes (MLA: (r + rope) x layers x bytes);
 * rest_GiB = (total - weights) / 2^30 - total / 2^30 x (1 - fraction);
 * max_total_num_tokens = int(rest_GiB x 2^30) // cell. On an H100
 * (85028896768 B) with 16 GiB of weights (8 GiB a GPU at tp 2), fraction 0.88:
 *   rest = 57645559971 B (tp 1), 66235494563 B (tp 2, 8 GiB of weights). */
static const struct {
    const char *model;
    uint32_t tp;
    uint64_t weights, cell, tokens;
} sglang_cases[] = {
    {"llama-3.1-8b", 1, 16 * GiB, 8 * 256 * 32 * 2, 439800},   /* 57645559971 // 131072 */
    {"llama-3.1-8b", 2, 8 * GiB, 4 * 256 * 32 * 2, 1010673},   /* 66235494563 // 65536 */
    {"deepseek-v3", 1, 16 * GiB, 576 * 61 * 2, 820320},        /* 57645559971 // 70272 */
};

START_TEST(sglang_tokens)
{
    struct kvp_model *m = test_load(sglang_cases[_i].model);
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_SGLANG, m);
    d.gpu_memory = 85028896768ull;
    d.weights_memory = sglang_cases[_i].weights;
    d.util = 0.88;
    reserve_given(&d);
    d.tp = d.n_gpus = sglang_cases[_i].tp;
    d.context = 4096;
    f = fit_ok(m, &d);
    ck_assert_double_eq_tol(f.util, 0.88, 1e-12);
    ck_assert_uint_eq(f.kv_bytes_per_token_per_gpu, sglang_cases[_i].cell);
    ck_assert_uint_eq(f.kv_tokens, sglang_cases[_i].tokens);
    ck_assert_uint_eq(f.request_bytes, 4096 * sglang_cases[_i].cell);
    kvp_model_free(m);
}
END_TEST

/* mem_fraction_static from rule (b): an H100 reports 85028896768 B =
 * 81089.875 MiB (< 90 GiB): reserved (9.5 + P/2) x 1024 MiB;
 * tp 1: round((81089.875 - 10240) / 81089.875, 3) = 0.874;
 * tp 2: round((81089.875 - 10752) / 81089.875, 3) = 0.867. */
START_TEST(sglang_default_fraction)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_SGLANG, m);
    d.gpu_memory = 85028896768ull;
    d.context = 4096;
    ck_assert(d.util == 0.0);
    f = fit_ok(m, &d);
    ck_assert_double_eq_tol(f.util, 0.874, 1e-12);
    d.tp = d.n_gpus = 2;
    f = fit_ok(m, &d);
    ck_assert_double_eq_tol(f.util, 0.867, 1e-12);
    kvp_model_free(m);
}
END_TEST

/* ---- TensorRT-LLM ------------------------------------------------------- */

/* tokens_per_block 32; budget = (80 - 16 - 2 - 1 GiB) x 0.9 = 58948426137 B;
 * kv_tokens = budget // per_token; blocks = ceil(kv_tokens / 32).
 *   llama-3.1-8b bf16: 131072 B a token -> 449740 tokens, 14055 blocks
 *   deepseek-v3 (MLA, kv_factor 1): 576 x 61 x 2 = 70272 -> 838860, 26215 */
static const struct { const char *model; uint64_t per_token, tokens, blocks; } trt_cases[] = {
    {"llama-3.1-8b", 131072, 449740, 14055},
    {"deepseek-v3", 70272, 838860, 26215},
};

START_TEST(trtllm_blocks)
{
    struct kvp_model *m = test_load(trt_cases[_i].model);
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_TRTLLM, m);
    d.gpu_memory = 80 * GiB;
    d.weights_memory = 16 * GiB;
    d.activation_memory = 2 * GiB;
    d.non_torch_memory = 1 * GiB;
    d.context = 4096;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.block_size, 32);
    ck_assert_double_eq_tol(f.util, 0.9, 1e-12);
    ck_assert_uint_eq(f.kv_budget_bytes, 58948426137ull);
    ck_assert_uint_eq(f.kv_bytes_per_token_per_gpu, trt_cases[_i].per_token);
    ck_assert_uint_eq(f.kv_tokens, trt_cases[_i].tokens);
    ck_assert_uint_eq(f.num_blocks, trt_cases[_i].blocks);
    /* 4096 tokens = 128 blocks a request */
    ck_assert_double_eq_tol(f.max_concurrency, floor((double)trt_cases[_i].blocks / 128.0), 1e-9);
    kvp_model_free(m);
}
END_TEST

/* Real TensorRT-LLM start-ups (LLM API / PyTorch backend), replayed from
 * their settings: GPU memory as the device reports it, max_seq_len,
 * max_num_tokens, max_batch_size, free_gpu_memory_fraction, and nothing
 * measured. kv_gib is the budget TRT-LLM sized the cache from ("Estimated
 * max memory in KV cache", or max_tokens x bytes per token where only the
 * token count was printed), tokens the pool it allocated ("Allocated X GiB
 * for max tokens in paged KV cache (N)": blocks x 32). The releases differ
 * (0.20.0, 1.1.0rc3, 1.2.1); the budget formula of _util.py is the same in
 * all three (docs/engines.md). The reserve rule (profile_reserve.c
 * trtllm_reserve) was derived from the source, but the first two cases were
 * read before it was written: they count as training. The Qwen3-0.6B case
 * is held out: found after the rule was committed, nothing was changed for
 * it. bound: the budget error allowed from settings alone (what it is,
 * rounded up; 0 = not replayable from settings). */
#define SPARK 128526041088ull /* DGX Spark (GB10): 119.70 GiB device total, memory shared with the OS */
static const struct trtllm_log_case {
    const char *id, *model, *weight_dtype, *kv_dtype;
    bool held_out;
    uint64_t gpu_memory, max_seq_len, max_num_tokens, max_batch_size;
    double fraction;
    double kv_gib;   /* the budget, GiB */
    uint64_t tokens; /* blocks x 32 */
    double bound;
} trtllm_log_cases[] = {
    /* NVIDIA/TensorRT-LLM#6294 (2025-07, 0.20.0, trtllm-bench): nvidia/Llama-3.1-8B-Instruct-FP8 (FP8 KV from the
     * checkpoint) on an H100 80GB, fraction 0.8, max_num_tokens 23552, max_batch_size 4096, max_seq_len 157;
     * "free_gpu_memory_fraction and max_tokens are set (to 0.8 and 860308)", 860,320 tokens allocated. trtllm-bench
     * captures CUDA graphs up to max_batch_size (4096), kvplan assumes the LLM API's 128: +3.5% */
    {"TensorRT-LLM#6294 llama-3.1-8b-fp8 h100", "models/llama-3.1-8b.yaml", "fp8", "fp8", false, H100, 157, 23552, 4096,
     0.8, 860308 * 65536.0 / GiB, 860320, 0.04},
    /* lmontigny/lm7 docs (1.2.1, trtllm-serve defaults): SmolLM2-135M-Instruct on an RTX 4070 SUPER (12282 MiB)
     * under WSL2, --max_seq_len 2049; "Estimated max memory in KV cache : 9.06 GiB", primary blocks 13189, 422,048
     * tokens. Windows holds part of the card, which the estimate cannot know: +10.2% */
    {"lm7 docs smollm2-135m rtx4070super wsl2", LOGS "smollm2-135m.yaml", NULL, NULL, false, 12878610432ull, 2049, 8192,
     2048, 0.9, 9.06, 422048, 0.11},
    /* NVIDIA DGX Spark playbook log (2025-12, 1.1.0rc3): openai/gpt-oss-120b, max_batch_size 64, max_num_tokens 8192,
     * max_seq_len 131072, fraction 0.9: "Estimated max memory in KV cache : 5.95 GiB", kv size 73728 (every layer,
     * the sliding ones too: one window), 86,720 tokens. Unified memory: the 49.28 GiB "outside torch" is what the
     * system holds, not replayable from settings (trtllm_log_figures_given reads it as the third case) */
    {"DGX Spark gpt-oss-120b", "models/gpt-oss-120b.yaml", NULL, NULL, false, SPARK, 131072, 8192, 64, 0.9, 5.95, 86720,
     0},
    /* held out: an inference-stack evidence README (1.2.1, LLM API defaults, found by text search, repository not
     * identified): Qwen/Qwen3-Reranker-0.6B (Qwen3-0.6B's shapes) on one H100 80GB HBM3, max_seq_len inferred from
     * the config (40960); "Allocated 68.69 GiB for max tokens in paged KV cache (643136)" */
    {"qwen3-reranker-0.6b h100 (notes, repository not identified)", LOGS "qwen3-0.6b.yaml", NULL, NULL, true, H100,
     40960, 8192, 2048, 0.9, 68.69, 643136, 0.02},
};

static struct kvp_deploy trtllm_log_deploy(const struct trtllm_log_case *c, const struct kvp_model *m)
{
    struct kvp_deploy d;
    deploy_at(&d, "trtllm", m);
    d.gpu_memory = c->gpu_memory;
    d.util = c->fraction;
    d.context = c->max_seq_len;
    d.max_batched_tokens = c->max_num_tokens;
    d.max_num_seqs = c->max_batch_size;
    if (c->weight_dtype)
        d.w = test_wstore(c->weight_dtype);
    if (c->kv_dtype)
        d.k = d.v = test_fmt(c->kv_dtype);
    return d;
}

/* From settings alone the budget within the case's bound (held out: 3%); with the logged
 * budget given, the pool's tokens (blocks x 32) within 1%: one pool for
 * every layer, gpt-oss's sliding-window layers included. */
START_TEST(trtllm_logs)
{
    const struct trtllm_log_case *c = &trtllm_log_cases[_i];
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_deploy d;
    struct kvp_fit f;
    double e;

    ck_assert_kvp_ok(kvp_model_load(c->model, &m, &err), err);
    d = trtllm_log_deploy(c, m);
    if (c->bound > 0) {
        f = fit_ok(m, &d);
        ck_assert(f.reserve.activation_est && f.reserve.non_torch_est);
        e = rel_err((double)f.kv_budget_bytes, c->kv_gib * GiB);
        ck_assert_msg(fabs(e) <= c->bound, "%s: KV budget %.2f GiB, logged %.2f (%+.1f%%)", c->id,
                      (double)f.kv_budget_bytes / GiB, c->kv_gib, 100 * e);
        /* held out: within the 3% the other engines' held-out medians keep */
        ck_assert_msg(!c->held_out || fabs(e) <= 0.03, "%s (held out): %+.1f%%", c->id, 100 * e);
        e = rel_err((double)(f.num_blocks * f.block_size), (double)c->tokens);
        ck_assert_msg(fabs(e) <= c->bound, "%s: %llu tokens, logged %llu (%+.1f%%)", c->id,
                      (unsigned long long)(f.num_blocks * f.block_size), (unsigned long long)c->tokens, 100 * e);
    }
    d.kv_memory = (uint64_t)llround(c->kv_gib * GiB);
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.block_size, 32);
    e = rel_err((double)(f.num_blocks * f.block_size), (double)c->tokens);
    ck_assert_msg(fabs(e) <= 0.01, "%s: %llu tokens from the logged budget, logged %llu (%+.2f%%)", c->id,
                  (unsigned long long)(f.num_blocks * f.block_size), (unsigned long long)c->tokens, 100 * e);
    kvp_model_free(m);
}
END_TEST

/* The interval fit prints ("the estimate may be off by ..."; reserve.uncertainty) holds
 * the logged budget in at least 90% of the start-ups, training and held out apart
 * (its width was chosen on the training ones only: profile_reserve.c uncertainty).
 * Both coverages and each miss are printed; docs/engines.md, "The interval", lists them. */
static void interval_count(const char *id, bool held_out, const struct kvp_fit *f, double logged_gib, int n[2],
                           int in[2])
{
    double miss = (double)f->kv_budget_bytes - logged_gib * GiB;
    bool inside = fabs(miss) <= (double)f->reserve.uncertainty;
    n[held_out]++;
    in[held_out] += inside;
    if (!inside)
        printf("reserve interval misses %s: %+.2f GiB, interval +-%.2f GiB\n", id, miss / GiB,
               (double)f->reserve.uncertainty / GiB);
}

START_TEST(reserve_interval_covers_logs)
{
    int n[2] = {0}, in[2] = {0};
    for (size_t i = 0; i < N_ELEMS(log_cases) + N_ELEMS(trtllm_log_cases); i++) {
        bool trt = i >= N_ELEMS(log_cases);
        const struct log_case *c = trt ? NULL : &log_cases[i];
        const struct trtllm_log_case *t = trt ? &trtllm_log_cases[i - N_ELEMS(log_cases)] : NULL;
        struct kvp_model *m = NULL;
        if (trt && t->bound == 0) /* not replayable from settings (the DGX Spark's unified memory) */
            continue;
        struct kvp_error err = {0};
        struct kvp_deploy d;
        struct kvp_fit f;
        ck_assert_kvp_ok(kvp_model_load(trt ? t->model : c->model, &m, &err), err);
        d = trt ? trtllm_log_deploy(t, m) : log_deploy(c, m);
        f = fit_ok(m, &d);
        ck_assert(f.reserve.uncertainty > 0);
        interval_count(trt ? t->id : c->id, trt ? t->held_out : c->held_out, &f, trt ? t->kv_gib : c->kv_gib, n, in);
        kvp_model_free(m);
    }
    printf("reserve interval: training %d of %d inside, held out %d of %d\n", in[0], n[0], in[1], n[1]);
    for (int h = 0; h < 2; h++)
        ck_assert_msg(10 * in[h] >= 9 * n[h], "%s: %d of %d inside", h ? "held out" : "training", in[h], n[h]);
}
END_TEST

/* The DGX Spark log prints every figure of the budget: weights inside torch
 * 63.52 GiB (with the 0.56 GiB estimation KV cache, which the budget adds
 * back), 0.85 GiB of activations, 49.28 GiB outside torch. Given those the
 * budget is the logged 5.95 GiB and the pool 86,720 tokens; the forward pass
 * kvplan estimates for the same run (its MoE workspace as vLLM's fused-MoE)
 * is 0.61 GiB of the 0.85 measured -- checked as a bound, -29%. */
START_TEST(trtllm_log_figures_given)
{
    const struct trtllm_log_case *c = &trtllm_log_cases[2];
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_deploy d;
    struct kvp_fit f;
    double e;

    ck_assert_kvp_ok(kvp_model_load(c->model, &m, &err), err);
    d = trtllm_log_deploy(c, m);
    f = fit_ok(m, &d);
    e = rel_err((double)f.reserve.activation, 0.85 * GiB);
    ck_assert_msg(e < 0 && e > -0.30, "activation estimate %.2f GiB, logged 0.85 (%+.1f%%)",
                  (double)f.reserve.activation / GiB, 100 * e);
    d.weights_memory = (uint64_t)llround((63.52 - 0.56) * GiB);
    d.activation_memory = (uint64_t)llround(0.85 * GiB);
    d.non_torch_memory = (uint64_t)llround(49.28 * GiB);
    f = fit_ok(m, &d);
    e = rel_err((double)f.kv_budget_bytes, c->kv_gib * GiB);
    ck_assert_msg(fabs(e) <= 0.005, "budget %.3f GiB, logged %.2f", (double)f.kv_budget_bytes / GiB, c->kv_gib);
    e = rel_err((double)(f.num_blocks * f.block_size), (double)c->tokens);
    ck_assert_msg(fabs(e) <= 0.01, "%llu tokens, logged %llu", (unsigned long long)(f.num_blocks * f.block_size),
                  (unsigned long long)c->tokens);
    kvp_model_free(m);
}
END_TEST

/* ---- Hugging Face transformers ------------------------------------------ */

/* StaticCache: 2 x B x H_kv x max_cache_len x D x 2 B per layer; a sliding
 * layer min(W, max_cache_len). One full + one sliding (W 64) layer, KV2 x 32:
 *   context 100: 2 x 2 x 100 x 32 x 2 + 2 x 2 x 64 x 32 x 2 = 25600 + 16384
 *   context 50: 12800 + 12800 */
static const struct { uint64_t context, bytes; } static_cases[] = {
    {100, 41984}, {64, 32768}, {50, 25600}, {1, 512},
};

START_TEST(hf_static)
{
    struct kvp_model m;
    struct kvp_layer_spec full = test_attn(KVP_LAYER_FULL, 4, 2, 32, 0);
    struct kvp_layer_spec swa = test_attn(KVP_LAYER_SLIDING, 4, 2, 32, 64);
    struct kvp_deploy d;
    struct kvp_fit f;

    test_blank(&m, "full-and-sliding");
    test_add(&m, &full, 1);
    test_add(&m, &swa, 1);
    test_validate(&m);
    kvp_deploy_init(&d, KVP_ENGINE_HF_STATIC, &m);
    d.kv_memory = 1 * MiB;
    d.context = static_cases[_i].context;
    f = fit_ok(&m, &d);
    ck_assert_uint_eq(f.request_bytes, static_cases[_i].bytes);
}
END_TEST

/* DynamicCache, two full layers of KV2 x 32, bf16, T = 100 tokens:
 * held 2 layers x 2 (K, V) x 2 x 100 x 32 x 2 = 51200 B; the last update's
 * torch.cat([keys, new]) builds the new keys tensor while the old one
 * (99 tokens: 2 x 99 x 32 x 2 = 12672 B) is still alive: 63872 B at peak. */
START_TEST(hf_dynamic)
{
    struct kvp_model m;
    struct kvp_deploy d;
    struct kvp_fit f;

    uniform(&m, "two-layers", KVP_LAYER_FULL, 2, 4, 2, 32, 0);
    kvp_deploy_init(&d, KVP_ENGINE_HF_DYNAMIC, &m);
    d.kv_memory = 1 * MiB;
    d.context = 100;
    f = fit_ok(&m, &d);
    ck_assert_uint_eq(f.request_bytes, 51200 + 12672);
}
END_TEST

/* QuantizedCache defaults: int4, q_group_size 64 (one group per 64-value head
 * row), scale + zero point in the model dtype, residual up to R - 1 = 127
 * tokens in bf16. Two full layers of KV2 x 64, bf16:
 *   T = 1000: per tensor 873 quantized tokens = 2 x 64 x 873 = 111744 values:
 *     55872 B codes + 1746 groups x 2 x 2 B = 6984 B; residual 127 x 128 x 2 = 32512
 *     -> 95368 B; x 2 tensors x 2 layers = 381472
 *   T = 100 < 127: all residual, as bf16: 2 x 2 x 2 x 100 x 64 x 2 = 102400 */
static const struct { uint64_t context, bytes; } quant_cases[] = {
    {1000, 381472}, {100, 102400},
};

START_TEST(hf_quantized)
{
    struct kvp_model m;
    struct kvp_deploy d;
    struct kvp_fit f;

    uniform(&m, "two-layers-64", KVP_LAYER_FULL, 2, 4, 2, 64, 0);
    kvp_deploy_init(&d, KVP_ENGINE_HF_QUANTIZED, &m);
    d.kv_memory = 16 * MiB;
    d.context = quant_cases[_i].context;
    f = fit_ok(&m, &d);
    ck_assert_uint_eq(f.request_bytes, quant_cases[_i].bytes);
}
END_TEST

/* ---- ideal -------------------------------------------------------------- */

/* No paging: max_concurrency = floor(budget / request). Budget = 2e9 - 1e9
 * of weights at util 1; a request of 1000 tokens x 131072 B = 131072000:
 * floor(1e9 / 131072000) = 7. */
START_TEST(ideal_concurrency)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_IDEAL, m);
    d.gpu_memory = 2000000000ull;
    d.weights_memory = 1000000000ull;
    d.context = 1000;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.kv_budget_bytes, 1000000000ull);
    ck_assert_uint_eq(f.request_bytes, 131072000ull);
    ck_assert_double_eq_tol(f.max_concurrency, 7.0, 1e-12);
    ck_assert(f.fits);
    d.concurrency = 7;
    f = fit_ok(m, &d);
    ck_assert(f.fits);
    ck_assert_uint_eq(f.kv_bytes_required, 7 * 131072000ull);
    d.concurrency = 8;
    f = fit_ok(m, &d);
    ck_assert(!f.fits);
    ck_assert_uint_eq(f.short_bytes, 8 * 131072000ull - 1000000000ull);
    kvp_model_free(m);
}
END_TEST

/* ---- inverse questions -------------------------------------------------- */

/* vLLM, Llama-3.1-8B, 24 GiB, util 0.9, 15 GiB of weights at tp 1, 10
 * requests of 8192 tokens (512 blocks each):
 *   tp 1: int(24 GiB x 0.9) - 15 GiB = 7086696038 B // 2 MiB = 3379 blocks: 6.6 requests
 *   tp 2: weights 7.5 GiB, 4 heads a GPU (1 MiB a block):
 *         15139759718 // 1 MiB = 14438 blocks: 28.2 requests -> tp 2 */
/* ---- data parallelism (docs/engines.md, "Data parallelism") ---- */

#define H200_BYTES 150109945856ull /* 139.80 GiB as the catalog gives the H200 */

/* Weights per GPU with the routed experts over `experts` GPUs, attention
 * over `attn`, the token embedding over `embed` and the rest over `rest`. */
static uint64_t split_weights(const struct kvp_model *m, uint64_t experts, uint64_t attn, uint64_t embed,
                              uint64_t rest)
{
    struct kvp_weights w;
    struct kvp_error err = {0};
    uint64_t sum = 0;
    ck_assert_kvp_ok(kvp_weights_compute(m, NULL, &w, &err), err);
    for (uint32_t c = 0; c < KVP_WC_COUNT; c++)
        sum += kvp_cdiv(w.class_bytes[c], c == KVP_WC_EXPERTS ? experts : c == KVP_WC_ATTN ? attn
                                          : c == KVP_WC_EMBED  ? embed : rest);
    return sum;
}

/* vLLM --data-parallel-size 8 against --tensor-parallel-size 8 for an MLA MoE
 * model (DeepSeek-V3 on 8 x H200, util 0.9, reserve given as 0). vLLM (read at
 * main @002d6073, model_executor/layers/fused_moe/config.py
 * FusedMoEParallelConfig.make): the routed experts are sharded over the
 * flattened dp x tp group with or without --enable-expert-parallel
 * (flatten_tp_across_dp_and_pcp), the rest of each DP rank over its own tp;
 * every DP rank is an engine with its own pool. The MLA latent is one head
 * per layer on every TP rank: 61 x (512 + 64) x 2 B = 70,272 B a token either way.
 *   TP 8: weights = cdiv(all, 8); DP 8 x TP 1: weights = rest + cdiv(experts, 8);
 *   budget = int(0.9 x 150,109,945,856) - weights; blocks = budget / (64 x 70,272);
 *   the deployment holds 8 x one rank's tokens. */
START_TEST(dp_vllm_mla)
{
    struct kvp_model *m = test_load("deepseek-v3");
    struct kvp_deploy d;
    struct kvp_fit tp8, dp8;
    struct kvp_weights w;
    struct kvp_error err = {0};

    ck_assert_kvp_ok(kvp_weights_compute(m, NULL, &w, &err), err);
    deploy_at(&d, "vllm@0.11.0", m);
    d.gpu_memory = H200_BYTES;
    d.util = 0.9;
    reserve_given(&d);
    d.tp = d.n_gpus = 8;
    tp8 = fit_ok(m, &d);
    ck_assert_uint_eq(tp8.weights_bytes, kvp_cdiv(w.bytes, 8));
    d.tp = 1;
    d.dp = 8;
    ck_assert_uint_eq(kvp_deploy_gpus(&d), 8);
    dp8 = fit_ok(m, &d);
    ck_assert_uint_eq(dp8.weights_bytes, split_weights(m, 8, 1, 1, 1));
    ck_assert_uint_eq(tp8.kv_bytes_per_token_per_gpu, 70272);
    ck_assert_uint_eq(dp8.kv_bytes_per_token_per_gpu, 70272);
    ck_assert_uint_eq(dp8.kv_budget_bytes, (uint64_t)(0.9 * H200_BYTES) - dp8.weights_bytes);
    ck_assert_uint_eq(dp8.num_blocks, dp8.kv_budget_bytes / (64 * 70272));
    /* 135,098,951,270 - 84,143,822,764 = 50,955,128,506 -> 11,329 blocks;
     * 135,098,951,270 - 100,840,717,664 = 34,258,233,606 -> 7,617 */
    ck_assert_uint_eq(tp8.weights_bytes, 84143822764ull);
    ck_assert_uint_eq(dp8.weights_bytes, 100840717664ull); /* 17.77 GiB not experts replicated, 609 GiB / 8 */
    ck_assert_uint_eq(tp8.kv_tokens, 725056);
    ck_assert_uint_eq(dp8.kv_tokens, 487488);
    /* in all: 8 x 487,488 = 3,899,904 tokens, 5.38x TP 8's 725,056 */
    ck_assert_uint_eq(dp8.kv_tokens * d.dp, 3899904);
    /* the deployment's 16 requests of 16k: 2 a rank */
    d.context = 16384;
    d.concurrency = 16;
    dp8 = fit_ok(m, &d);
    ck_assert_uint_eq(dp8.kv_bytes_required, 2ull * 16384 * 70272);
    {   /* the roofline: the 16 requests' KV over 8 ranks of tp 1, the active experts over dp x tp (a lower bound) */
        struct kvp_roofline r;
        ck_assert_kvp_ok(kvp_roofline(m, &d, 16, 4.8e12, 1979e12, &r, &err), err);
        ck_assert_uint_eq(r.weight_bytes, kvp_cdiv(w.active_bytes - w.class_bytes[KVP_WC_EMBED], 8));
        ck_assert_uint_eq(r.kv_bytes, kvp_cdiv(16ull * 16384 * 70272, 8));
    }
    kvp_model_free(m);
}
END_TEST

/* vLLM #51454 (DeepSeek-V4-Flash-0731, 8 x B200, v0.25.0): DP 8 held 7.7x the
 * KV of TP 8, both with --enable-expert-parallel. The model is not in
 * kvplan's catalog and the issue's excerpt here gives no "Available KV cache
 * memory" lines, so its figures are not reproduced; what it measures is the
 * rule pinned here: an MLA rank's tokens depend on its budget alone (the
 * latent is the same on every TP rank), so DP 8 / TP 8 = 8 x budget(DP) /
 * budget(TP) -- exactly 8 on equal budgets, 7.7 when replicating the
 * non-expert weights costs 3.75% of the budget. DeepSeek-V3 with the log's
 * flags (util 0.95, fp8 cache, block 256) on B200 (178.35 GiB, capability
 * 10.0), reserve 0, under 0.11.0's rule, which makes the block CUTLASS MLA's
 * 128 (platforms/cuda.py; v0.25.0 keeps a --block-size given):
 * 8 x 2,307,712 / 2,782,976 = 6.63x (more of V3 is attention and dense layers). */
START_TEST(dp_vllm_51454_ratio)
{
    struct kvp_model *m = test_load("deepseek-v3");
    struct kvp_deploy d;
    struct kvp_fit tp8, dp8;
    struct kvp_error err = {0};

    deploy_at(&d, "vllm@0.11.0", m);
    d.gpu_memory = 191502483456ull;
    d.compute_capability = 100;
    d.util = 0.95;
    d.block_size = 256;
    ck_assert_kvp_ok(kvp_format_parse("fp8", &d.k, &err), err);
    d.v = d.k;
    reserve_given(&d);
    d.kv_memory = 40 * GiB; /* the same budget: exactly 8x */
    d.tp = d.n_gpus = 8;
    tp8 = fit_ok(m, &d);
    d.tp = 1;
    d.dp = 8;
    dp8 = fit_ok(m, &d);
    ck_assert_uint_eq(dp8.kv_tokens, tp8.kv_tokens);
    d.kv_memory = 0; /* the budget from the memory */
    dp8 = fit_ok(m, &d);
    d.tp = 8;
    d.dp = 1;
    tp8 = fit_ok(m, &d);
    /* 181,927,359,283 - 84,143,822,764 -> 21,742 blocks of 128 x 35,136 B; - 100,840,717,664 -> 18,029 */
    ck_assert_uint_eq(tp8.block_size, 128);
    ck_assert_uint_eq(tp8.kv_tokens, 2782976);
    ck_assert_uint_eq(dp8.kv_tokens, 2307712);
    ck_assert_double_eq_tol(8.0 * dp8.kv_tokens / tp8.kv_tokens, 8.0 * dp8.kv_budget_bytes / tp8.kv_budget_bytes,
                            0.001);
    ck_assert_double_eq_tol(8.0 * dp8.kv_tokens / tp8.kv_tokens, 6.633, 0.001);
    kvp_model_free(m);
}
END_TEST

/* SGLang --tp 8 --dp 8 --enable-dp-attention on DeepSeek-V3, 8 x H200, reserve
 * given as 0 (read at the server_args.py of the 0.5 series kvplan's sglang@0.5.2
 * follows, ServerArgs.__post_init__, and models/deepseek_v2.py):
 *   the GPUs are tp's 8 (dp divides tp: "assert self.tp_size % self.dp_size == 0");
 *   mem_fraction_static: reserved (12 + tp x pp / 2) GiB + 4 GiB "if self.enable_dp_attention"
 *     = 20 GiB: round((143,155 - 20,480) / 143,155, 3) = 0.857 (0.886 without);
 *   weights: attention over tp / dp = 1 (replicated), the token embedding whole
 *     (VocabParallelEmbedding(..., enable_tp=not is_dp_attention_enabled())), the rest over tp 8;
 *   the MLA latent is not split: 70,272 B a token on each GPU, each DP rank its own pool. */
START_TEST(dp_sglang_attention)
{
    struct kvp_model *m = test_load("deepseek-v3");
    struct kvp_deploy d;
    struct kvp_fit f, tp8;

    kvp_deploy_init(&d, KVP_ENGINE_SGLANG, m);
    d.gpu_memory = H200_BYTES;
    reserve_given(&d);
    d.tp = d.n_gpus = 8;
    tp8 = fit_ok(m, &d);
    ck_assert_double_eq_tol(tp8.util, 0.886, 1e-9);
    d.dp = 8;
    d.dp_attention = true;
    ck_assert_uint_eq(kvp_deploy_gpus(&d), 8);
    f = fit_ok(m, &d);
    ck_assert_double_eq_tol(f.util, 0.857, 1e-9);
    ck_assert_uint_eq(f.weights_bytes, split_weights(m, 8, 1, 1, 8));
    ck_assert_uint_eq(f.kv_bytes_per_token_per_gpu, 70272);
    /* rest = 139.80 GiB x 0.857 - weights, in GiB as floats; tokens = rest / 70,272 */
    ck_assert_uint_eq(f.kv_tokens, (uint64_t)(((double)H200_BYTES * 0.857 - (double)f.weights_bytes)) / 70272);
    /* 150,109,945,856 x 0.857 - 95,754,699,552 = 32,889,524,046 / 70,272 = 468,031 a rank, 3,744,248 in all;
     * tp 8 alone: x 0.886 - 84,143,822,764 = 48,853,589,264 / 70,272 = 695,207 in all (5.39x less) */
    ck_assert_uint_eq(f.weights_bytes, 95754699552ull);
    ck_assert_uint_eq(f.kv_tokens, 468031);
    ck_assert_uint_eq(tp8.kv_tokens, 695207);
    kvp_model_free(m);
}
END_TEST

/* SGLang's DP attention on a GQA model: the KV heads split over tp / dp, not
 * tp. Llama-3.1-70B (8 KV heads, 80 layers, head 128, bf16) at tp 8, dp 4:
 * attention tp 2, 4 heads a GPU: 80 x 2 x 4 x 128 x 2 B = 163,840 B a token
 * (tp 8 alone: 1 head, 40,960 B). */
START_TEST(dp_sglang_gqa_heads)
{
    struct kvp_model *m = test_load("llama-3.1-70b");
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_SGLANG, m);
    d.gpu_memory = H200_BYTES;
    reserve_given(&d);
    d.tp = d.n_gpus = 8;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.kv_bytes_per_token_per_gpu, 40960);
    d.dp = 4;
    d.dp_attention = true;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.kv_bytes_per_token_per_gpu, 163840);
    ck_assert_uint_eq(f.weights_bytes, split_weights(m, 8, 2, 1, 8));
    kvp_model_free(m);
}
END_TEST

/* A dense model's DP ranks are replicas (vLLM: no expert layer to shard over
 * dp x tp; SGLang without DP attention: the data-parallel controller's dp
 * schedulers of tp GPUs each; the reference engine and the Transformers caches
 * likewise): one rank is sized alone, the GPUs are dp x tp x pp, and the
 * deployment's requests are shared (20 of 8k over 2 ranks: 10 a rank). */
START_TEST(dp_replicas)
{
    static const enum kvp_engine_id engines[] = {KVP_ENGINE_VLLM, KVP_ENGINE_SGLANG, KVP_ENGINE_IDEAL,
                                                 KVP_ENGINE_HF_STATIC};
    struct kvp_model *m = test_load("llama-3.1-8b");
    for (size_t i = 0; i < N_ELEMS(engines); i++) {
        struct kvp_deploy d;
        struct kvp_fit one, two;
        kvp_deploy_init(&d, engines[i], m);
        d.gpu_memory = 80 * GiB;
        reserve_given(&d);
        d.context = 8192;
        d.concurrency = 10;
        one = fit_ok(m, &d);
        d.dp = d.n_gpus = 2;
        d.concurrency = 20;
        ck_assert_uint_eq(kvp_deploy_gpus(&d), 2);
        two = fit_ok(m, &d);
        ck_assert_uint_eq(two.weights_bytes, one.weights_bytes);
        ck_assert_uint_eq(two.kv_tokens, one.kv_tokens);
        ck_assert_uint_eq(two.kv_bytes_required, one.kv_bytes_required);
        ck_assert(two.fits == one.fits);
    }
    kvp_model_free(m);
}
END_TEST

/* The fewest GPUs for 16 requests of DeepSeek-V3's 163,840 tokens on H200s:
 * TP 8 holds 4 (the latent replicated on each rank), DP 8 holds 8 x 2 = 16 under
 * vLLM; SGLang's DP attention over tp 8 likewise. */
START_TEST(dp_min_gpus_mla)
{
    static const enum kvp_engine_id engines[] = {KVP_ENGINE_VLLM, KVP_ENGINE_SGLANG};
    struct kvp_model *m = test_load("deepseek-v3");
    for (size_t i = 0; i < N_ELEMS(engines); i++) {
        struct kvp_deploy d;
        struct kvp_error err = {0};
        uint32_t tp, dp;
        kvp_deploy_init(&d, engines[i], m);
        d.gpu_memory = H200_BYTES;
        d.util = 0.9;
        reserve_given(&d);
        d.concurrency = 16;
        ck_assert_kvp_ok(kvp_fit_min_gpus(m, &d, 64, &tp, &dp, &err), err);
        ck_assert_uint_eq(dp, 8);
        ck_assert_uint_eq(tp, engines[i] == KVP_ENGINE_SGLANG ? 8 : 1);
        d.concurrency = 1; /* both fit on 8: DP, which holds more, first */
        ck_assert_kvp_ok(kvp_fit_min_gpus(m, &d, 64, &tp, &dp, &err), err);
        ck_assert_uint_eq(dp, 8);
    }
    kvp_model_free(m);
}
END_TEST

/* Settings data parallelism refuses, in the engines' terms. */
static const struct dp_case {
    enum kvp_engine_id engine;
    uint32_t tp, dp, gpus;
    bool dp_attention;
    const char *msg;
} dp_cases[] = {
    {KVP_ENGINE_VLLM, 1, 2, 1, false, "dp x tp x pp = 2 x 1 x 1 uses 2 GPUs (got 1)"},
    {KVP_ENGINE_VLLM, 2, 2, 4, true, "'dp_attention' is SGLang's --enable-dp-attention (the engine is vllm)"},
    {KVP_ENGINE_SGLANG, 8, 3, 8, true, "SGLang's DP attention needs 1 < dp <= tp with dp dividing tp (got dp 3, tp 8)"},
    {KVP_ENGINE_SGLANG, 8, 8, 64, true, "DP attention runs inside tp: tp x pp = 8 x 1 uses 8 GPUs (got 64)"},
    {KVP_ENGINE_LLAMACPP, 1, 2, 2, false,
     "data parallelism is not modelled for llamacpp: size one replica (drop 'dp')"},
    {KVP_ENGINE_TRTLLM, 1, 2, 2, false, "data parallelism is not modelled for trtllm: size one replica (drop 'dp')"},
};

START_TEST(dp_refused)
{
    const struct dp_case *c = &dp_cases[_i];
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};
    kvp_deploy_init(&d, c->engine, m);
    d.gpu_memory = 80 * GiB;
    d.tp = c->tp;
    d.dp = c->dp;
    d.n_gpus = c->gpus;
    d.dp_attention = c->dp_attention;
    ck_assert_int_eq(kvp_fit_compute(m, &d, &f, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, c->msg);
    kvp_model_free(m);
}
END_TEST

/* Expert parallelism (docs/engines.md, "Expert parallelism"; vLLM main
 * @002d6073 fused_moe/config.py FusedMoEParallelConfig.make: under
 * --enable-expert-parallel ep_size = the tp flattened over dp, each device
 * owns whole experts; expert_map_manager.py determine_expert_map: the first
 * (E + R) % EP ranks hold one more; SGLang FusedMoE: (E + R) / ep experts
 * of tp / ep slices, (E + R) / tp experts' bytes a GPU). Per-GPU weights
 * against the same deployment without EP, in bytes from the configs:
 *   Qwen3-30B-A3B (128 experts, 48 layers, hidden 2048, expert 768, bf16), vLLM
 *     dp 3 x tp 2: one expert is 48 x 3 x 2048 x 768 x 2 B = 452,984,832 B; EP 6
 *     gives the busiest GPU 22, not 128 / 6: (22 - 128 / 6) x 452,984,832 =
 *     301,989,888 B more;
 *   DeepSeek-V3 (256 experts, 58 MoE layers, 7168 x 2048, fp8 128x128 blocks
 *     with a float scale each), vLLM dp 8 + EPLB 32 redundant: 36 experts, not
 *     32; one is 58 x 3 x (7168 x 2048 + 56 x 16 x 4) B = 2,554,954,752 B, four
 *     10,219,819,008 B more;
 *   SGLang tp 8 dp 8 DP attention without redundant experts: the same bytes. */
START_TEST(ep_weights)
{
    static const struct {
        const char *model, *engine;
        uint32_t tp, dp, redundant;
        bool dp_attention;
        uint64_t more, local;
    } cases[] = {
        {"qwen3-30b-a3b", "vllm", 2, 3, 0, false, 301989888ull, 22},
        {"deepseek-v3", "vllm", 1, 8, 32, false, 10219819008ull, 36},
        {"deepseek-v3", "sglang", 8, 8, 0, true, 0, 32},
        {"deepseek-v3", "sglang", 8, 1, 8, false, 2554954752ull, 33},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_model *m = test_load(cases[i].model);
        struct kvp_deploy d;
        struct kvp_fit no, ep;
        deploy_at(&d, cases[i].engine, m);
        d.gpu_memory = H200_BYTES;
        reserve_given(&d);
        d.tp = cases[i].tp;
        d.dp = cases[i].dp;
        d.dp_attention = cases[i].dp_attention;
        d.n_gpus = (uint32_t)kvp_deploy_gpus(&d);
        no = fit_ok(m, &d);
        ck_assert_uint_eq(kvp_deploy_experts_per_gpu(m, &d), 0);
        d.expert_parallel = true;
        d.redundant_experts = cases[i].redundant;
        ep = fit_ok(m, &d);
        ck_assert_uint_eq(kvp_deploy_experts_per_gpu(m, &d), cases[i].local);
        ck_assert_uint_eq(ep.weights_bytes - no.weights_bytes, cases[i].more);
        ck_assert_uint_eq(ep.kv_bytes_per_token_per_gpu, no.kv_bytes_per_token_per_gpu);
        kvp_model_free(m);
    }
}
END_TEST

/* gpt-oss-120b's MXFP4 experts on 4 H100s (Marlin: intermediate to 128, hidden
 * to 256): TP 4 pads each expert's 2880 / 4 = 720 to 768 (6.7%); EP 4 holds 32
 * whole experts whose 2880 pads to 2944 (2.2%), so the padding is smaller and
 * the experts' stored bytes the same (128 / 4 = 32 whole). */
START_TEST(ep_mxfp4_padding)
{
    struct kvp_model *m = test_load("gpt-oss-120b");
    struct kvp_deploy d;
    struct kvp_fit tp, ep;
    deploy_at(&d, "vllm@0.11.0", m);
    d.gpu_memory = 80 * GiB;
    d.compute_capability = 90;
    reserve_given(&d);
    d.tp = d.n_gpus = 4;
    tp = fit_ok(m, &d);
    d.expert_parallel = true;
    ep = fit_ok(m, &d);
    ck_assert_str_eq(tp.weights_load, "MXFP4 experts padded for Marlin: intermediate per partition 720 -> 768, "
                                      "hidden 2880 -> 3072");
    ck_assert_str_eq(ep.weights_load, "MXFP4 experts padded for Marlin: intermediate per expert (whole, expert "
                                      "parallel) 2880 -> 2944, hidden 2880 -> 3072");
    ck_assert_uint_eq(tp.weights_bytes - tp.weights_padding, ep.weights_bytes - ep.weights_padding);
    ck_assert_uint_lt(ep.weights_padding, tp.weights_padding);
    kvp_model_free(m);
}
END_TEST

/* What expert parallelism refuses, in the engines' terms. */
static const struct ep_case {
    const char *model, *engine;
    uint32_t tp, dp, redundant;
    bool ep;
    const char *msg;
} ep_cases[] = {
    {"deepseek-v3", "vllm", 1, 8, 30, true,
     "vLLM's EPLB spreads the experts evenly: 256 + 30 redundant must be a multiple of EP = dp x tp = 8"},
    {"deepseek-v3", "sglang", 8, 1, 4, true,
     "SGLang splits the experts evenly: 256 + 4 redundant must be a multiple of the EP size tp = 8"},
    {"deepseek-v3", "vllm", 8, 1, 8, false,
     "redundant experts are EPLB's, under expert parallelism (add 'expert_parallel')"},
    {"llama-3.1-8b", "vllm", 2, 1, 2, true, "redundant experts need routed experts (llama-3.1-8b has none)"},
    {"deepseek-v3", "trtllm", 8, 1, 0, true,
     "expert parallelism is modelled for vLLM and SGLang, not trtllm (drop 'expert_parallel')"},
};

START_TEST(ep_refused)
{
    const struct ep_case *c = &ep_cases[_i];
    struct kvp_model *m = test_load(c->model);
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};
    deploy_at(&d, c->engine, m);
    d.gpu_memory = H200_BYTES;
    d.tp = c->tp;
    d.dp = c->dp;
    d.n_gpus = (uint32_t)kvp_deploy_gpus(&d);
    d.expert_parallel = c->ep;
    d.redundant_experts = c->redundant;
    ck_assert_int_eq(kvp_fit_compute(m, &d, &f, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, c->msg);
    kvp_model_free(m);
}
END_TEST

START_TEST(inverse_min_gpus)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};
    uint32_t tp = 99, dp = 99;

    deploy_at(&d, "vllm@0.11.0", m);
    d.gpu_memory = 24 * GiB;
    d.util = 0.9;
    d.weights_memory = 15 * GiB;
    reserve_given(&d);
    d.context = 8192;
    d.concurrency = 10;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.num_blocks, 3379);
    ck_assert(!f.fits);
    ck_assert_kvp_ok(kvp_fit_min_gpus(m, &d, 8, &tp, &dp, &err), err);
    ck_assert_uint_eq(tp, 2);
    ck_assert_uint_eq(dp, 1); /* not MLA: pure TP */
    /* the same by hand at tp 2 */
    d.tp = d.n_gpus = 2;
    d.weights_memory = 15 * GiB / 2;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.num_blocks, 14438);
    ck_assert(f.fits);
    /* no more than one GPU allowed: none fits */
    d.tp = d.n_gpus = 1;
    d.weights_memory = 15 * GiB;
    ck_assert_kvp_ok(kvp_fit_min_gpus(m, &d, 1, &tp, &dp, &err), err);
    ck_assert_uint_eq(tp, 0);
    kvp_model_free(m);
}
END_TEST

/* Same GPU, 4 requests of 8192 tokens = 2048 blocks = 4 GiB: int(24 GiB x u)
 * >= 19 GiB from u = 19/24 = 0.79166.. -> 0.792 (24 x 0.792 = 19.008 GiB);
 * 0.791 gives 18.984 GiB. */
START_TEST(inverse_min_util)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};
    double util = -1;

    deploy_at(&d, "vllm@0.11.0", m);
    d.gpu_memory = 24 * GiB;
    d.weights_memory = 15 * GiB;
    reserve_given(&d);
    d.context = 8192;
    d.concurrency = 4;
    ck_assert_kvp_ok(kvp_fit_min_util(m, &d, &util, &err), err);
    ck_assert_double_eq_tol(util, 0.792, 1e-9);
    d.util = 0.792;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.num_blocks, 2052);
    ck_assert(f.fits);
    d.util = 0.791;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.num_blocks, 2039);
    ck_assert(!f.fits);
    /* 40 requests need 40 GiB of KV: no fraction of 24 GiB fits */
    d.util = 0;
    d.concurrency = 40;
    ck_assert_kvp_ok(kvp_fit_min_util(m, &d, &util, &err), err);
    ck_assert(util == 0.0);
    kvp_model_free(m);
}
END_TEST

/* ---- roofline ----------------------------------------------------------- */

/* Llama-3.1-8B bf16 holds 8030261248 parameters = 16060522496 B, all read
 * each step but the token embedding (untied: 128256 x 4096 x 2 = 1050673152 B),
 * of which a step reads its rows; one request of 1000 tokens holds 131072000 B
 * of KV. */
START_TEST(roofline_decode)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_roofline r;
    struct kvp_error err = {0};

    kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
    d.context = 1000;
    ck_assert_kvp_ok(kvp_roofline(m, &d, 1, 3.35e12, 989e12, &r, &err), err);
    ck_assert_uint_eq(r.weight_bytes, 16060522496ull - 1050673152ull);
    ck_assert_uint_eq(r.kv_bytes, 131072000ull);
    ck_assert_double_eq_tol(r.tpot_s, 15140921344.0 / 3.35e12, 1e-15);
    ck_assert_double_eq_tol(r.tokens_per_s, 3.35e12 / 15140921344.0, 1e-9);
    ck_assert_uint_eq(r.host_weight_bytes + r.host_kv_bytes + r.stream_bytes, 0); /* vLLM: nothing on the host */
    kvp_model_free(m);
}
END_TEST

/* llama.cpp with tensors in host memory: Llama-3.1-8B bf16 at -ngl 17 keeps 16 of its 32 layers
 * there (the estimate, no GGUF table: half the weights, the embeddings' half among them, which a
 * step only indexes), and their KV; the CPU reads them at the host's bandwidth, 102 GB/s assumed.
 * A prompt of 1000 tokens is two micro-batches of 32 tokens or more (512 + 488): each copies the
 * host's weights to the GPU over the link. */
START_TEST(roofline_host_layers)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_roofline r;
    struct kvp_weights w;
    struct kvp_error err = {0};
    const uint64_t embd = 1050673152ull, kv = 131072000ull, link = 31507692307ull;

    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, m);
    d.context = 1000;
    d.n_gpu_layers = 17;
    d.host_link = link;
    ck_assert_kvp_ok(kvp_weights_compute(m, &d.w, &w, &err), err);
    ck_assert_kvp_ok(kvp_roofline(m, &d, 1, 1.008e12, 165.2e12, &r, &err), err);
    ck_assert_uint_eq(r.host_kv_bytes, kv / 2);
    ck_assert_uint_eq(r.kv_bytes, kv / 2);
    ck_assert_uint_eq(r.host_weight_bytes + r.weight_bytes, w.active_bytes - embd);
    ck_assert_uint_le(r.host_weight_bytes > r.weight_bytes ? r.host_weight_bytes - r.weight_bytes
                      : r.weight_bytes - r.host_weight_bytes, 1);
    ck_assert_uint_eq(r.stream_bytes, r.host_weight_bytes); /* dense: every host byte is read */
    ck_assert(r.host_bandwidth_assumed && r.host_bandwidth == KVP_HOST_BANDWIDTH_ASSUMED * 1e9 && !r.streamed);
    ck_assert_double_eq_tol(r.tpot_s, (double)(r.weight_bytes + kv / 2) / 1.008e12 +
                            (double)(r.host_weight_bytes + kv / 2) / 102e9, 1e-12);
    ck_assert_double_eq_tol(r.prefill_stream_s, 2.0 * (double)r.stream_bytes / (double)link, 1e-12);
    ck_assert(r.ttft_s == (r.prefill_stream_s > r.prefill_compute_s ? r.prefill_stream_s : r.prefill_compute_s));
    /* unified memory (Apple silicon): the CPU reads the GPU's memory, nothing is copied */
    d.unified_memory = true;
    d.host_link = 0;
    ck_assert_kvp_ok(kvp_roofline(m, &d, 1, 0.4e12, 13.6e12, &r, &err), err);
    ck_assert(r.host_bandwidth == 0.4e12 && !r.host_bandwidth_assumed && r.prefill_stream_s == 0);
    ck_assert(r.ttft_s == r.prefill_compute_s);
    /* all layers on the GPU: nothing in host memory but the embeddings, which a step only indexes */
    d.n_gpu_layers = -1;
    ck_assert_kvp_ok(kvp_roofline(m, &d, 1, 1.008e12, 165.2e12, &r, &err), err);
    ck_assert_uint_eq(r.host_weight_bytes + r.host_kv_bytes + r.stream_bytes, 0);
    ck_assert_uint_eq(r.weight_bytes, w.active_bytes - embd);
    kvp_model_free(m);
}
END_TEST

/* Qwen3-30B-A3B bf16 with --cpu-moe: every layer's 128 experts in host memory, 48 x 128 x 3 x 768 x
 * 2048 x 2 B = 57,982,058,496 B, of which a decode step reads its 8 active: 3,623,878,656 B at the
 * host's bandwidth (given: 400 GB/s). A batch of 32 makes ggml-cuda run the expert ops on the
 * GPU instead, copying all 57,982,058,496 B over the link every step. */
START_TEST(roofline_cpu_moe)
{
    struct kvp_model *m = test_load("qwen3-30b-a3b");
    struct kvp_deploy d;
    struct kvp_roofline r;
    struct kvp_error err = {0};
    const uint64_t experts = 57982058496ull, link = 63015384615ull;

    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, m);
    d.context = 4096;
    d.n_cpu_moe = -1;
    d.host_bandwidth = 400;
    d.host_link = link;
    ck_assert_kvp_ok(kvp_roofline(m, &d, 1, 3.35e12, 989e12, &r, &err), err);
    ck_assert_uint_le(r.stream_bytes > experts ? r.stream_bytes - experts : experts - r.stream_bytes, 64);
    ck_assert_uint_le(r.host_weight_bytes > experts / 16 ? r.host_weight_bytes - experts / 16
                      : experts / 16 - r.host_weight_bytes, 64);
    ck_assert_uint_eq(r.host_kv_bytes, 0);
    ck_assert(!r.host_bandwidth_assumed && r.host_bandwidth == 400e9 && !r.streamed);
    ck_assert_double_eq_tol(r.host_s, (double)r.host_weight_bytes / 400e9, 1e-12);
    ck_assert_double_eq_tol(r.prefill_stream_s, 8.0 * (double)r.stream_bytes / (double)link, 1e-12);
    ck_assert_kvp_ok(kvp_roofline(m, &d, 32, 3.35e12, 989e12, &r, &err), err);
    ck_assert(r.streamed);
    ck_assert_double_eq_tol(r.host_s, (double)r.stream_bytes / (double)link, 1e-12);
    kvp_model_free(m);
}
END_TEST

/* ---- limits: refusals --------------------------------------------------- */

/* llama.cpp refuses a block type that does not divide the head dim, in its
 * own words ("K cache type q8_0 with block size 32 does not divide
 * n_embd_head_k=16", measured from the real library). */
START_TEST(llamacpp_block_refused)
{
    struct kvp_model m, *hd80 = NULL;
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};

    tiny_llama(&m, 64); /* hd 16 */
    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, &m);
    d.context = 512;
    d.k = d.v = test_fmt("q8_0");
    ck_assert_int_eq(kvp_fit_compute(&m, &d, &f, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "K cache type q8_0 with block size 32 does not divide n_embd_head_k=16") != NULL,
                  "%s", err.msg);

    ck_assert_kvp_ok(kvp_model_load("tests/data/hd80.yaml", &hd80, &err), err);
    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, hd80);
    d.context = 512;
    d.k = test_fmt("q8_0");
    ck_assert_int_eq(kvp_fit_compute(hd80, &d, &f, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "K cache type q8_0 with block size 32 does not divide n_embd_head_k=80") != NULL,
                  "%s", err.msg);
    d.k = test_fmt("q4_0");
    ck_assert_int_eq(kvp_fit_compute(hd80, &d, &f, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "K cache type q4_0 with block size 32 does not divide n_embd_head_k=80") != NULL,
                  "%s", err.msg);
    d.k = test_fmt("f16"); /* f16 and bf16 have blocks of 1 */
    d.v = test_fmt("bf16");
    f = fit_ok(hd80, &d);
    /* 4 layers x KV2 x 80 x 2 B x 512 cells x 2 (K, V) */
    ck_assert_uint_eq(cache_total(&f), 4ull * 2 * 80 * 2 * 512 * 2);
    kvp_model_free(hd80);
}
END_TEST

/* MLA needs K and V of one type ("model does not support different K and V
 * cache types"). */
START_TEST(llamacpp_mla_types_refused)
{
    struct kvp_model *m = test_load("deepseek-v3");
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};

    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, m);
    d.context = 16384;
    d.k = test_fmt("q8_0");
    d.v = test_fmt("f16");
    ck_assert_int_eq(kvp_fit_compute(m, &d, &f, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "model does not support different K and V cache types") != NULL, "%s", err.msg);
    kvp_model_free(m);
}
END_TEST

/* vLLM has one --kv-cache-dtype and no ggml block types. */
static const struct { const char *k, *v; } vllm_refused[] = {
    {"fp8_e4m3", "bf16"}, {"bf16", "fp8_e4m3"}, {"q4_0", "q4_0"}, {"q8_0", "q8_0"}, {"int4", "int4"},
};

START_TEST(vllm_formats_refused)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};

    kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
    d.kv_memory = 1 * GiB;
    d.context = 8192;
    d.k = test_fmt(vllm_refused[_i].k);
    d.v = test_fmt(vllm_refused[_i].v);
    ck_assert_int_eq(kvp_fit_compute(m, &d, &f, &err), KVP_ERR_UNSUPPORTED);
    ck_assert(err.msg[0] != '\0');
    kvp_model_free(m);
}
END_TEST

/* ---- what the engines refuse, and rules checked against their source ---- */

/* vLLM would not start when one request of max_model_len does not fit:
 * 0.7.3 (V0) worker/worker.py raise_if_cache_size_invalid (vllm#10517's 29k line: 1478
 * blocks of 16 = 23,648 tokens), 0.11.0 v1/core/kv_cache_utils.py
 * check_enough_kv_cache_memory (131,072 tokens x 128 KiB = 16 GiB needed,
 * 4 GiB available: 32,768 tokens estimated). */
START_TEST(vllm_does_not_start)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f;

    deploy_at(&d, "vllm@0.7.3", m);
    d.gpu_memory = 24 * GiB;
    d.kv_memory = 1478 * 2 * MiB;
    d.context = 29000;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.kv_tokens, 23648);
    ck_assert(!f.fits);
    ck_assert_str_eq(f.refused, "The model's max seq len (29000) is larger than the maximum number of tokens that can "
                                "be stored in KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing "
                                "`max_model_len` when initializing the engine.");
    d.context = 20000; /* starts */
    f = fit_ok(m, &d);
    ck_assert_str_eq(f.refused, "");
    kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
    d.gpu_memory = 24 * GiB;
    d.kv_memory = 4 * GiB;
    f = fit_ok(m, &d);
    ck_assert(!f.fits);
    ck_assert_str_eq(f.refused, "To serve at least one request with the models's max seq len (131072), (16.00 GiB KV "
                                "cache is needed, which is larger than the available KV cache memory (4.00 GiB). Based "
                                "on the available memory, the estimated maximum model length is 32768. Try increasing "
                                "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.");
    kvp_model_free(m);
}
END_TEST

/* llama.cpp (both releases): LLAMA_MAX_SEQ 256 (src/llama-context.cpp "n_seq_max must be <= 256")
 * is invalid input; OPT has no llama-arch.cpp entry, so it never loads. */
START_TEST(llamacpp_refusals)
{
    struct kvp_model *m = test_load("llama-3.1-8b"), *opt = test_load("opt-13b");
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};

    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, m);
    d.context = 4096;
    d.n_seq = 300;
    ck_assert_int_eq(kvp_fit_compute(m, &d, &f, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "llama.cpp: n_seq_max must be <= 256 (got 300)");
    d.n_seq = 256;
    f = fit_ok(m, &d);
    ck_assert_str_eq(f.refused, "");
    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, opt);
    d.context = 2048;
    d.gpu_memory = 80 * GiB;
    f = fit_ok(opt, &d);
    ck_assert(!f.fits);
    ck_assert_str_eq(f.refused, "llama_model_load: error loading model: error loading model architecture: unknown "
                                "model architecture: 'opt'");
    kvp_model_free(opt);
    kvp_model_free(m);
}
END_TEST

/* llama.cpp (both releases, npm-3.22.1 and b6182) src/llama-context.cpp
 * llama_context::llama_context: n_ubatch = min(n_ubatch, n_batch), n_batch 2048 by
 * default; the SWA cache of gemma-3-27b (window 1024) at -ub 4096 is
 * PAD(1024 + 2048, 256) = 3072 cells, at -b 4096 -ub 4096 PAD(5120, 256) = 5120. */
START_TEST(llamacpp_ubatch_capped)
{
    struct kvp_model *m = test_load("gemma-3-27b");
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, m);
    d.context = 32768;
    d.n_ubatch = 4096;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.swa_cells, 3072);
    d.n_batch = 4096;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.swa_cells, 5120);
    kvp_model_free(m);
}
END_TEST

/* llama.cpp --concurrency N --context T: N slots (-np N) of T tokens share
 * -c N*T, one stream each without --kv-unified (npm-3.22.1 src/llama-context.cpp
 * llama_context: n_ctx_seq = n_ctx / n_seq_max, kv_unified off in libllama's
 * default context params): 4 x 8192 cells of
 * 32 x 8 x 128 x 2 x 2 B = 128 KiB = 4 GiB; fits, concurrency 4 and the log's
 * "4/4 seqs" agree. */
START_TEST(llamacpp_concurrency_slots)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, m);
    d.gpu_memory = 80 * GiB;
    d.context = 8192;
    d.concurrency = 4;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.n_seq, 4);
    ck_assert_uint_eq(f.n_stream, 4);
    ck_assert_uint_eq(f.cells, 8192);
    ck_assert_uint_eq(cache_total(&f), 4 * GiB);
    ck_assert(f.fits);
    ck_assert_double_eq(f.max_concurrency, 4.0);
    ck_assert_uint_ge(f.max_context, 8192);
    /* weights 14.96 GiB + 4 GiB of slots + the estimated reserve > 19 GiB */
    d.gpu_memory = 19 * GiB;
    f = fit_ok(m, &d);
    ck_assert(!f.fits);
    ck_assert_double_eq(f.max_concurrency, 0.0);
    kvp_model_free(m);
}
END_TEST

/* vllm 0.11.0 v1/core/kv_cache_utils.py get_kv_cache_configs: the layers of all
 * stages are grouped once (gemma-3-27b: group size 10; 1 full + 6 sliding
 * groups, each type's layers dealt out strided, layers[i::num_groups]) and
 * projected onto each stage. At pp 2 each stage holds 31 layers, 5 full and
 * 26 sliding; its largest projected group keeps 5 layers, so
 * 10 GiB // 131072 // 5 = 16384 blocks and 16384 // 7 * 16 = 37440 tokens.
 * (Consecutive runs of 10, as kvplan grouped before issue #35, kept 10 layers
 * in a stage's group: 8192 blocks, half.) A request's blocks do not change:
 * 5510. */
START_TEST(vllm_pp_groups_whole_model)
{
    struct kvp_model *m = test_load("gemma-3-27b");
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
    d.kv_memory = 10 * GiB;
    d.context = 32768;
    d.max_batched_tokens = 8192;
    d.pp = d.n_gpus = 2;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.n_groups, 7);
    ck_assert_uint_eq(f.num_blocks, 16384);
    ck_assert_uint_eq(f.kv_tokens, 37440);
    ck_assert_double_eq_tol(f.max_concurrency, 16384.0 / 5510.0, 1e-9);
    kvp_model_free(m);
}
END_TEST

/* vllm 0.11.0 platforms/cuda.py: the MLA backend by the GPU's compute
 * capability (issue #35: kvplan used 64 everywhere): CUTLASS MLA on a
 * Blackwell (10.0) forces blocks of 128, FlashMLA on Hopper (9.x) 64, and
 * elsewhere (an A100's 8.0, an L40S's 8.9: Triton MLA) the block stays 16;
 * an unknown capability (a memory given without a GPU) is taken as Hopper. */
START_TEST(vllm_mla_block_by_gpu)
{
    static const struct {
        uint32_t cc, block;
    } cases[] = {{100, 128}, {90, 64}, {80, 16}, {89, 16}, {0, 64}};
    struct kvp_model *m = test_load("deepseek-v2-lite");
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_deploy d;
        struct kvp_fit f;
        kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
        d.kv_memory = 1 * GiB;
        d.context = 4096;
        d.compute_capability = cases[i].cc;
        f = fit_ok(m, &d);
        ck_assert_uint_eq(f.block_size, cases[i].block);
    }
    kvp_model_free(m);
}
END_TEST

/* vllm 0.11.0 platforms/cuda.py check_and_update_config: the MLA backend's block
 * replaces --block-size whenever it differs (block_size != 128 for CUTLASS MLA,
 * != 64 for FlashMLA), larger ones too; Triton MLA (an A100) keeps the user's. */
START_TEST(vllm_mla_block_forced)
{
    static const struct {
        uint32_t cc, given, block;
    } cases[] = {{90, 16, 64}, {90, 128, 64}, {0, 256, 64}, {100, 64, 128}, {100, 256, 128}, {80, 32, 32}};
    struct kvp_model *m = test_load("deepseek-v2-lite");
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_deploy d;
        struct kvp_fit f;
        kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
        d.kv_memory = 1 * GiB;
        d.context = 4096;
        d.compute_capability = cases[i].cc;
        d.block_size = cases[i].given;
        f = fit_ok(m, &d);
        ck_assert_uint_eq(f.block_size, cases[i].block);
    }
    kvp_model_free(m);
}
END_TEST

/* sglang 0.5.2 configs/model_config.py is_hybrid_swa_model: Gemma 3 is not in its list, so
 * it is one pool of full-attention cells (kv_tokens = budget // cell);
 * gpt-oss is: its full pool gets total / (0.8 n_swa + n_full) = 24/21.6 of that. */
START_TEST(sglang_swa_only_listed)
{
    static const struct { const char *model; bool hybrid; } cases[] = {{"gemma-3-27b", false}, {"gpt-oss-20b", true}};
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_model *m = test_load(cases[i].model);
        struct kvp_deploy d;
        struct kvp_fit f;
        uint64_t flat;
        kvp_deploy_init(&d, KVP_ENGINE_SGLANG, m);
        d.kv_memory = 4 * GiB;
        d.context = 8192;
        f = fit_ok(m, &d);
        flat = 4 * GiB / f.kv_bytes_per_token_per_gpu;
        if (cases[i].hybrid)
            ck_assert_uint_gt(f.kv_tokens, flat);
        else
            ck_assert_uint_eq(f.kv_tokens, flat);
        kvp_model_free(m);
    }
}
END_TEST

/* The releases: names parse, unknown ones are refused with the known list. */
START_TEST(engine_releases)
{
    struct kvp_error err = {0};
    enum kvp_engine_id e;
    uint32_t rel, n;
    const struct kvp_release *r = kvp_releases(&n);
    struct kvp_deploy d;
    struct kvp_model *m = test_load("llama-3.1-8b");

    ck_assert_kvp_ok(kvp_engine_parse("vllm", &e, &rel, &err), err);
    ck_assert_int_eq(e, KVP_ENGINE_VLLM);
    ck_assert_uint_eq(rel, UINT32_MAX);
    kvp_deploy_init(&d, e, m);
    ck_assert_str_eq(kvp_deploy_release(&d)->version, kvp_engine_info(e)->version);
    ck_assert_kvp_ok(kvp_engine_parse("llama.cpp@b6182", &e, &rel, &err), err);
    ck_assert_int_eq(e, KVP_ENGINE_LLAMACPP);
    ck_assert_str_eq(r[rel].version, "b6182");
    ck_assert_int_eq(kvp_engine_parse("vllm@0.1.0", &e, &rel, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "vllm: unknown release '0.1.0' (known: 0.21.0, 0.11.0, 0.7.3)");
    kvp_model_free(m);
}
END_TEST

/* llama.cpp's longest context is the memory's bound, found with every term
 * at that context, not clamped at the model's trained length (issue #33:
 * Qwen3-30B-A3B Q4_K_M with q8_0 KV on a 24 GB card said 40,960, its
 * max_position_embeddings, beside "fits NO" at 128K): the answer fits and
 * one token more does not. */
START_TEST(llamacpp_max_context_is_the_memory_bound)
{
    struct kvp_model *m = test_load("qwen3-30b-a3b");
    struct kvp_deploy d;
    struct kvp_fit f, at;
    struct kvp_error err = {0};
    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, m);
    d.gpu_memory = 25756696576ull; /* rtx-4090 in models/gpus.yaml */
    d.w = test_wstore("q4_k_m");
    d.k = d.v = test_fmt("q8_0");
    d.context = 128 * 1024;
    ck_assert_kvp_ok(kvp_fit_compute(m, &d, &f, &err), err);
    ck_assert(!f.fits);
    ck_assert_uint_gt(f.max_context, m->max_context);
    d.context = f.max_context;
    ck_assert_kvp_ok(kvp_fit_compute(m, &d, &at, &err), err);
    ck_assert(at.fits);
    ck_assert_uint_eq(at.max_context, f.max_context);
    d.context = f.max_context + 1;
    ck_assert_kvp_ok(kvp_fit_compute(m, &d, &at, &err), err);
    ck_assert(!at.fits);
    kvp_model_free(m);
}
END_TEST

/* vLLM 0.11.0 model_executor/layers/linear.py QKVParallelLinear: the KV
 * heads split over tp, or are replicated when tp >= them; either way one
 * must divide the other, or the model does not load (issue #35: phi-4's 10
 * KV heads at tp 4 were answered). qwen2.5-7b: 28 heads, 4 KV heads;
 * phi-4: 40 heads, 10 KV heads (the issue's case; at tp 20 replicated twice). */
START_TEST(vllm_kv_heads_divide_tp)
{
    static const struct {
        const char *model;
        uint32_t tp;
        const char *msg; /* NULL: loads */
    } cases[] = {
        {"models/qwen2.5-7b.yaml", 2, NULL},
        {"models/qwen2.5-7b.yaml", 4, NULL},
        {"models/qwen2.5-7b.yaml", 7,
         "vllm: AssertionError: 7 is not divisible by 4 (QKVParallelLinear: 4 KV heads at tensor parallel size 7; "
         "the model does not load)"},
        {"models/qwen2.5-7b.yaml", 14,
         "vllm: AssertionError: 14 is not divisible by 4 (QKVParallelLinear: 4 KV heads at tensor parallel size 14; "
         "the model does not load)"},
        {"models/qwen2.5-7b.yaml", 28, NULL}, /* 4 KV heads replicated 7 times */
        {LOGS "phi-4.yaml", 4, "vllm: AssertionError: 10 is not divisible by 4 (QKVParallelLinear: 10 KV heads at "
                               "tensor parallel size 4; the model does not load)"},
        {LOGS "phi-4.yaml", 5, NULL},
        {LOGS "phi-4.yaml", 20, NULL},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_model *m = NULL;
        struct kvp_deploy d;
        struct kvp_fit f;
        struct kvp_error err = {0};
        ck_assert_kvp_ok(kvp_model_load(cases[i].model, &m, &err), err);
        kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
        d.tp = d.n_gpus = cases[i].tp;
        d.gpu_memory = 80 * GiB;
        d.context = 8192;
        if (!cases[i].msg) {
            ck_assert_kvp_ok(kvp_fit_compute(m, &d, &f, &err), err);
        } else {
            ck_assert_int_eq(kvp_fit_compute(m, &d, &f, &err), KVP_ERR_USAGE);
            ck_assert_str_eq(err.msg, cases[i].msg);
        }
        kvp_model_free(m);
    }
}
END_TEST

/* vLLM 0.11.0 groups a hybrid model's layers of one type strided,
 * layers[i::num_groups] (kv_cache_utils.py, PR #23974), so each pipeline
 * stage holds about 1/pp of every group: gemma-3-27b (52 sliding + 10 full
 * layers, group size 10, 6 + 1 groups) at pp 2 has stage groups of 5 layers,
 * twice the blocks of consecutive runs (69,276 where kvplan said 34,638;
 * the independent re-implementation of 0.11.0 saw the same factor: 96,289
 * against 48,144, issue #35); qwen3-next at pp 2 on an H200 likewise. */
START_TEST(vllm_pp_groups_strided)
{
    static const struct {
        const char *model;
        uint64_t gpu_memory, blocks;
    } cases[] = {
        {"gemma-3-27b", 85028896768ull, 68631}, /* h100-sxm; 69,276 before its vision tower was counted */
        {"qwen3-next-80b-a3b", 150109945856ull, 7920}, /* h200 */
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_model *m = test_load(cases[i].model);
        struct kvp_deploy d;
        struct kvp_fit f;
        struct kvp_error err = {0};
        deploy_at(&d, "vllm@0.11.0", m);
        d.pp = d.n_gpus = 2;
        d.gpu_memory = cases[i].gpu_memory;
        ck_assert_kvp_ok(kvp_fit_compute(m, &d, &f, &err), err);
        ck_assert_uint_eq(f.num_blocks, cases[i].blocks);
        kvp_model_free(m);
    }
}
END_TEST

/* Issue #35's own figures, from an independent re-implementation of vLLM
 * 0.11.0 (layers[i::num_groups], kv_cache_utils.py, PR #23974): gemma-3-27b
 * at pp 2 96,289 blocks where kvplan said 48,144, qwen3-next 9,440 where it
 * said 4,720. Both pin one KV budget: 96,289 pages of 5 x 131,072 B and 9,440
 * of 6 x 1,114,112 B bound it to [63,103,959,040, 63,104,614,400), so the
 * figures were taken on a budget of 63.104 GB (--kv-cache-memory), not from
 * a GPU's memory; consecutive runs put the global group size (10, 12) on
 * each stage instead: 48,144 and 4,720, half. */
START_TEST(vllm_pp_groups_issue_figures)
{
    static const struct {
        const char *model;
        uint64_t blocks, page, global_gs;
    } cases[] = {{"gemma-3-27b", 96289, 131072, 10}, {"qwen3-next-80b-a3b", 9440, 1114112, 12}};
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_model *m = test_load(cases[i].model);
        struct kvp_deploy d;
        struct kvp_fit f;
        kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
        d.pp = d.n_gpus = 2;
        d.kv_memory = 63104000000ull;
        d.context = 8192;
        f = fit_ok(m, &d);
        ck_assert_uint_eq(f.num_blocks, cases[i].blocks);
        ck_assert_uint_eq(f.kv_pool_bytes / f.num_blocks, cases[i].page * cases[i].global_gs / 2);
        ck_assert_uint_eq(d.kv_memory / (cases[i].page * cases[i].global_gs), cases[i].blocks / 2);
        kvp_model_free(m);
    }
}
END_TEST

/* vLLM 0.11.0 allocates MXFP4 experts with padded sizes
 * (model_executor/layers/quantization/mxfp4.py Mxfp4MoEMethod.create_weights,
 * the backend from get_mxfp4_backend): gpt-oss-120b on an H100 logs "Model
 * loading took 65.97 GiB" (vllm issues #23278, #33155, #27508; the checkpoint
 * holds 60.77 GiB) and gpt-oss-20b on an A100 "13.72 GiB" (myoceane.fr, vLLM
 * 0.19.0): the weights kvplan holds are within 1% of both, and the 120b on
 * one H100 no longer fits 32K (it said "fits, 7.52 GiB of KV"). The padding
 * is checked against the tensors' own arithmetic: per MoE layer, E experts of
 * gate_up (2i x h) and down (h x i) as MXFP4 codes (1/2 byte) and e8m0
 * scales (1 byte per 32), and bf16 biases (2i + h), at the padded partition
 * less the checkpoint's share; Marlin pads i to 128 and h to 256 (an A100, an
 * H100, a 10.3 Blackwell: is_device_capability(100) is exact), FlashInfer on
 * a 10.0 B200 both to 256; at tp 4 the 120b's partition of 720 becomes 768. */
static uint64_t mxfp4_experts(uint64_t experts, uint64_t i, uint64_t h)
{
    return experts * (3 * i * h * 17 / 32 + 4 * i + 2 * h);
}

START_TEST(vllm_mxfp4_loaded_weights)
{
    static const struct {
        const char *model;
        uint64_t gpu_memory;
        uint32_t cc, tp, ipad, hpad;
        double logged_gib; /* 0: no log */
        const char *backend;
    } cases[] = {
        {"gpt-oss-120b", 85028896768ull, 90, 1, 2944, 3072, 65.97, "Marlin"},
        {"gpt-oss-20b", 84987740160ull, 80, 1, 2944, 3072, 13.72, "Marlin"},
        {"gpt-oss-120b", 191502483456ull, 100, 1, 3072, 3072, 0, "FlashInfer MXFP4 BF16 (SM100)"},
        {"gpt-oss-120b", 191502483456ull, 103, 1, 2944, 3072, 0, "Marlin"},
        {"gpt-oss-120b", 85028896768ull, 90, 4, 768, 3072, 0, "Marlin"},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_model *m = test_load(cases[i].model);
        struct kvp_deploy d;
        struct kvp_fit f;
        uint64_t e = m->n_experts, h = m->hidden, in = m->expert_intermediate, want;
        char what[192];
        kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
        d.gpu_memory = cases[i].gpu_memory;
        d.compute_capability = cases[i].cc;
        d.tp = d.n_gpus = cases[i].tp;
        d.context = 32768;
        d.concurrency = 4;
        f = fit_ok(m, &d);
        want = m->n_layers * (mxfp4_experts(e, cases[i].ipad, cases[i].hpad) -
                              kvp_cdiv(mxfp4_experts(e, in, h), cases[i].tp));
        ck_assert_uint_eq(f.weights_padding, want);
        snprintf(what, sizeof what,
                 "MXFP4 experts padded for %s: intermediate per partition %llu -> %u, hidden %llu -> %u",
                 cases[i].backend, (unsigned long long)(in / cases[i].tp), cases[i].ipad, (unsigned long long)h,
                 cases[i].hpad);
        ck_assert_str_eq(f.weights_load, what);
        if (cases[i].logged_gib > 0)
            ck_assert_msg(fabs(rel_err((double)f.weights_bytes, cases[i].logged_gib * GiB)) < 0.01, "%s: %.2f GiB",
                          cases[i].model, (double)f.weights_bytes / GiB);
        if (i == 0)
            ck_assert(!f.fits);
        kvp_model_free(m);
    }
}
END_TEST

/* ---- limits: usage errors ----------------------------------------------- */

static const struct usage_case {
    enum kvp_engine_id engine;
    uint32_t tp, pp, n_gpus;
    double util;
    uint64_t gpu_memory, context;
    const char *msg;
} usage_cases[] = {
    {KVP_ENGINE_VLLM, 0, 1, 1, 0.9, 24 * GiB, 8192, "'tp', 'pp' and the GPU count must be positive"},
    {KVP_ENGINE_VLLM, 1, 0, 1, 0.9, 24 * GiB, 8192, "'tp', 'pp' and the GPU count must be positive"},
    {KVP_ENGINE_VLLM, 1, 1, 0, 0.9, 24 * GiB, 8192, "'tp', 'pp' and the GPU count must be positive"},
    {KVP_ENGINE_VLLM, 1, 33, 33, 0.9, 24 * GiB, 8192,
     "'pp' must be at most 64 and at most the layer count 32 (got 33)"},
    {KVP_ENGINE_VLLM, 2, 1, 1, 0.9, 24 * GiB, 8192, "tp x pp = 2 x 1 needs 2 GPUs (got 1)"},
    /* GPUs the split leaves idle: asked, not assumed (llama.cpp splits layers over --gpus itself) */
    {KVP_ENGINE_SGLANG, 1, 1, 2, 0.9, 24 * GiB, 8192,
     "2 GPUs, but tp x pp = 1 x 1 uses 1 of them: set 'tp' (or 'pp') so that tp x pp = 2 to split the model "
     "over them, or 'dp' for data-parallel ranks of tp x pp each"},
    {KVP_ENGINE_VLLM, 1, 1, 1, 1.5, 24 * GiB, 8192, "the memory fraction must be 0..1 (got 1.5)"},
    {KVP_ENGINE_SGLANG, 1, 1, 1, -0.1, 24 * GiB, 8192, "the memory fraction must be 0..1 (got -0.1)"},
    {KVP_ENGINE_VLLM, 1, 1, 1, 0.9, 0, 8192, "vllm needs the GPU memory (a GPU, or its memory in bytes)"},
    {KVP_ENGINE_SGLANG, 1, 1, 1, 0.9, 0, 8192, "sglang needs the GPU memory (a GPU, or its memory in bytes)"},
    {KVP_ENGINE_TRTLLM, 1, 1, 1, 0.9, 0, 8192, "trtllm needs the GPU memory (a GPU, or its memory in bytes)"},
    {KVP_ENGINE_VLLM, 1, 1, 1, 0.9, 24 * GiB, 0, "the context must be positive"},
    /* vllm config/model.py verify_with_parallel_config and _get_and_verify_max_len */
    {KVP_ENGINE_VLLM, 3, 1, 3, 0.9, 24 * GiB, 8192,
     "vllm: Total number of attention heads (32) must be divisible by tensor parallel size (3)."},
    {KVP_ENGINE_VLLM, 1, 1, 1, 0.9, 24 * GiB, 200000,
     "vllm: User-specified max_model_len (200000) is greater than the derived max_model_len "
     "(max_position_embeddings=131072 in model's config.json). To allow overriding this maximum, set the env var "
     "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"},
};

START_TEST(usage_errors)
{
    const struct usage_case *c = &usage_cases[_i];
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};

    kvp_deploy_init(&d, c->engine, m);
    d.tp = c->tp;
    d.pp = c->pp;
    d.n_gpus = c->n_gpus;
    d.util = c->util;
    d.gpu_memory = c->gpu_memory;
    d.context = c->context;
    ck_assert_int_eq(kvp_fit_compute(m, &d, &f, &err), KVP_ERR_USAGE);
    ck_assert_int_eq(err.code, KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, c->msg);
    kvp_model_free(m);
}
END_TEST

/* 2^10 requests of 2^62 tokens: an overflow error, or a clean "does not fit"
 * whose byte counts did not wrap (a request of 2^62 tokens costs at least
 * 2^62 bytes, so a smaller figure is a wrapped one). */
START_TEST(overflow_context)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    enum kvp_engine_id e = (enum kvp_engine_id)_i;
    const char *name = kvp_engine_info(e)->name;
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};
    enum kvp_status st;

    kvp_deploy_init(&d, e, m);
    d.gpu_memory = 80 * GiB;
    d.context = 1ull << 62;
    d.concurrency = 1ull << 10;
    st = kvp_fit_compute(m, &d, &f, &err);
    kvp_model_free(m); /* before the asserts: nothing leaks when one fails without fork */
    /* vLLM refuses a max_model_len beyond the model's; llama.cpp runs the
     * 2^10 requests as 2^10 slots, beyond its 256 */
    if (e == KVP_ENGINE_VLLM || e == KVP_ENGINE_LLAMACPP) {
        ck_assert_msg(st == KVP_ERR_USAGE, "%s: status %d (%s)", name, st, err.msg);
        return;
    }
    ck_assert_msg(st == KVP_OK || st == KVP_ERR_OVERFLOW, "%s: status %d (%s)", name, st, err.msg);
    if (st == KVP_OK) {
        ck_assert_msg(!f.fits, "%s: 2^10 requests of 2^62 tokens fit (required %llu B, request %llu B)", name,
                      (unsigned long long)f.kv_bytes_required, (unsigned long long)f.request_bytes);
        ck_assert_msg(f.request_bytes >= (1ull << 62) && f.kv_bytes_required >= f.request_bytes,
                      "%s: wrapped figures: request %llu B, required %llu B", name,
                      (unsigned long long)f.request_bytes, (unsigned long long)f.kv_bytes_required);
        ck_assert(f.max_concurrency < 1.0);
    }
}
END_TEST

/* The roofline needs a positive bandwidth and peak. */
static const struct { double bandwidth, peak; } roofline_bad[] = {
    {0.0, 989e12}, {3.35e12, 0.0}, {-1.0, 989e12}, {NAN, 989e12},
};

START_TEST(roofline_refused)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_roofline r;
    struct kvp_error err = {0};

    kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
    d.context = 1000;
    ck_assert_int_eq(kvp_roofline(m, &d, 1, roofline_bad[_i].bandwidth, roofline_bad[_i].peak, &r, &err),
                     KVP_ERR_USAGE);
    ck_assert(err.msg[0] != '\0');
    kvp_model_free(m);
}
END_TEST

/* A layer split that does not add up to the model's layers is refused. */
START_TEST(llamacpp_bad_split)
{
    struct kvp_model *m = test_load("qwen2.5-32b");
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};

    kvp_deploy_init(&d, KVP_ENGINE_LLAMACPP, m);
    d.context = 4096;
    d.n_gpus = 2;
    d.split[0] = 40;
    d.split[1] = 23;
    ck_assert_int_eq(kvp_fit_compute(m, &d, &f, &err), KVP_ERR_USAGE);
    ck_assert(err.msg[0] != '\0');
    kvp_model_free(m);
}
END_TEST


/* ---- rules per release, each with its source (h16b) ---- */

/* The engine's log lines for f, into a string the caller frees. */
static char *fit_log(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f)
{
    struct kvp_buf b = {0};
    char *s;
    kvp_fit_log(m, d, f, &b);
    s = strdup(b.len ? b.data : "");
    kvp_buf_release(&b);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* The log lines of llamacpp@b4862 are that build's (llama_kv_cache_init,
 * llama_init_from_model), with the compute buffer of its graph: pythia-2.8B
 * at -c 2048 on the ggml-org/ci V100 node printed these three lines in build
 * 4528 (c64d2bec; the compute line without kvplan's "(estimated)"), and b4862
 * logs the same figures (the prefix is 4528's until PR #12181's llama_context;
 * build 3472 and the logdetective #106 build print the same figures from
 * llama_new_context_with_model). */
START_TEST(llamacpp_b4862_log_lines)
{
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_deploy d;
    struct kvp_fit f;
    char *log;

    ck_assert_kvp_ok(kvp_model_load(LOGS "pythia-2.8b.yaml", &m, &err), err);
    f = llamacpp_log_fit(&llamacpp_log_cases[2], m, "llamacpp@b4862", &d);
    log = fit_log(m, &d, &f);
    ck_assert_msg(strstr(log, "llama_kv_cache_init:      CUDA0 KV buffer size =   640.00 MiB\n") &&
                  strstr(log, "llama_init_from_model: KV self size  =  640.00 MiB, K (f16):  320.00 MiB, "
                         "V (f16):  320.00 MiB\n") &&
                  strstr(log, "llama_init_from_model:      CUDA0 compute buffer size =   162.00 MiB (estimated)\n"),
                  "%s", log);
    free(log);
    kvp_model_free(m);
}
END_TEST

/* sglang 0.5.2 model_runner_kv_cache_mixin.py handle_max_mamba_cache and
 * init_memory_pool, configs/mamba_utils.py mamba_cache_per_req, server_args.py
 * defaults (mamba_full_memory_ratio 0.9, mamba_ssm_dtype float32, conv
 * bfloat16). qwen3-next-80b-a3b at tp 2 with 19 GiB given: 36 Gated DeltaNet
 * layers of conv 3 x 8192 / 2 x 2 B + ssm 32 x 128 x 128 / 2 x 4 B =
 * 1,073,152 B, so 38,633,472 B a request; Mamba memory 19 x 0.9 / 1.9 = 9 GiB
 * -> int(9 GiB // 38,633,472) = 250 slots; rest 20,401,094,656 - 250 x
 * 38,633,472 = 10,742,726,656 B; cell 12 full layers x 1 head x 512 x 2 B =
 * 12,288 -> 874,245 tokens; max_running_requests min(4096, 250 // 3) = 83
 * caps the 106 requests of 8,192 tokens the token pool holds. MambaPool
 * allocates size + 1 states per layer. */
START_TEST(sglang_mamba_pool)
{
    struct kvp_model *m = test_load("qwen3-next-80b-a3b");
    struct kvp_deploy d;
    struct kvp_fit f;
    char *log;

    kvp_deploy_init(&d, KVP_ENGINE_SGLANG, m);
    d.kv_memory = 19 * GiB;
    d.tp = d.n_gpus = 2;
    d.context = 8192;
    reserve_given(&d);
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.state_bytes_per_req, 38633472);
    ck_assert_uint_eq(f.state_slots, 250);
    ck_assert_uint_eq(f.kv_bytes_per_token_per_gpu, 12288);
    ck_assert_uint_eq(f.kv_budget_bytes, 10742726656ull);
    ck_assert_uint_eq(f.kv_tokens, 874245);
    ck_assert_uint_eq(f.max_running, 83);
    ck_assert_double_eq(f.max_concurrency, 83.0);
    ck_assert_uint_eq(f.state_conv_bytes, 251ull * 36 * 24576);
    ck_assert_uint_eq(f.state_ssm_bytes, 251ull * 36 * 1048576);
    ck_assert_uint_eq(f.cache[0].k_bytes, (874245ull + 1) * 12 * 256 * 2);
    log = fit_log(m, &d, &f);
    ck_assert_str_eq(log, "Mamba Cache is allocated. max_mamba_cache_size: 250, conv_state size: 0.21GB, "
                          "ssm_state size: 8.82GB \n"
                          "KV Cache is allocated. #tokens: 874245, K size: 5.00 GB, V size: 5.00 GB\n"
                          "max_total_num_tokens=874245\n");
    free(log);
    d.concurrency = 84; /* more than max_running_requests: no context serves them */
    f = fit_ok(m, &d);
    ck_assert(!f.fits);
    ck_assert_uint_eq(f.max_context, 0);
    kvp_model_free(m);
}
END_TEST

/* sglang model_runner_kv_cache_mixin.py set_num_tokens_hybrid_swa and
 * SWAKVPool (its SWA pool built first, as the log of sglang PR #18039 shows):
 * gpt-oss-20b with 5 GiB, cell 24 layers x 8 x 64 x 2 x 2 B = 49,152 ->
 * 109,226 tokens; full = int(109,226 x 24 / (0.8 x 12 + 12)) = 121,362,
 * swa = int(121,362 x 0.8) = 97,089; K of each pool (tokens + 1) x 12 layers x
 * 1,024 B. */
START_TEST(sglang_swa_pool_log)
{
    struct kvp_model *m = test_load("gpt-oss-20b");
    struct kvp_deploy d;
    struct kvp_fit f;
    char *log;

    kvp_deploy_init(&d, KVP_ENGINE_SGLANG, m);
    d.kv_memory = 5 * GiB;
    d.context = 8192;
    reserve_given(&d);
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.kv_tokens, 121362);
    ck_assert_uint_eq(f.swa_cells, 97089);
    ck_assert_uint_eq(f.cache[0].k_bytes, 121363ull * 12 * 1024);
    ck_assert_uint_eq(f.cache[1].k_bytes, 97090ull * 12 * 1024);
    log = fit_log(m, &d, &f);
    ck_assert_str_eq(log, "Use sliding window memory pool. full_layer_tokens=121362, swa_layer_tokens=97089\n"
                          "KV Cache is allocated. #tokens: 97089, K size: 1.11 GB, V size: 1.11 GB\n"
                          "KV Cache is allocated. #tokens: 121362, K size: 1.39 GB, V size: 1.39 GB\n"
                          "max_total_num_tokens=121362\n");
    free(log);
    kvp_model_free(m);
}
END_TEST

/* sglang 0.4.6 predates Mamba/linear-attention hybrids: models/registry.py
 * _raise_for_unsupported, so the server does not start (exit 1). */
START_TEST(sglang_mamba_before_support)
{
    static const struct { const char *model, *arch; } cases[] = {
        {"qwen3-next-80b-a3b", "Model architectures ['Qwen3NextForCausalLM'] are not supported for now."},
        {"jamba-v0.1", "Model architectures ['JambaForCausalLM'] are not supported for now."},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_model *m = test_load(cases[i].model);
        struct kvp_deploy d;
        struct kvp_fit f;
        deploy_at(&d, "sglang@0.4.6", m);
        d.gpu_memory = 150 * GiB;
        d.tp = d.n_gpus = 2;
        d.context = 8192;
        f = fit_ok(m, &d);
        ck_assert(!f.fits);
        ck_assert_msg(strncmp(f.refused, cases[i].arch, strlen(cases[i].arch)) == 0, "%s", f.refused);
        deploy_at(&d, "sglang@0.5.2", m);
        d.gpu_memory = 150 * GiB;
        d.tp = d.n_gpus = 2;
        d.context = 8192;
        f = fit_ok(m, &d);
        ck_assert_str_eq(f.refused, "");
        ck_assert_uint_gt(f.state_slots, 0);
        kvp_model_free(m);
    }
}
END_TEST

/* vllm 0.7.3 (V0) model_executor/models/mamba_cache.py MambaCacheManager:
 * jamba-v0.1 at tp 2 keeps 256 (max_num_seqs, a CUDA-graph batch size)
 * states of its 28 Mamba layers in bf16, (3 x 8192 / 2 + 8192 x 16 / 2) x 2 B
 * = 155,648 B a layer: 1,115,684,864 B inside the profiled peak. The KV blocks
 * hold the 4 attention layers: 16 x 4 heads x 128 x 2 x 2 B x 4 = 131,072 B;
 * int(80 GiB x 0.9) - 30 GiB - 1,115,684,864 = 43,981,471,744 B -> 335,552
 * blocks, 5,368,832 tokens, 163.84 requests of 32,768. --max-num-seqs 100 pads
 * to 104 states. Gated DeltaNet came after V0: Qwen3-Next does not start. */
START_TEST(vllm_v0_mamba_cache)
{
    struct kvp_model *m = test_load("jamba-v0.1"), *next = test_load("qwen3-next-80b-a3b");
    struct kvp_deploy d;
    struct kvp_fit f;

    deploy_at(&d, "vllm@0.7.3", m);
    d.gpu_memory = 80 * GiB;
    d.util = 0.9;
    d.weights_memory = 30 * GiB;
    d.tp = d.n_gpus = 2;
    d.context = 32768;
    reserve_given(&d);
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.state_slots, 256);
    ck_assert_uint_eq(f.state_conv_bytes + f.state_ssm_bytes, 1115684864ull);
    ck_assert_uint_eq(f.kv_budget_bytes, 43981471744ull);
    ck_assert_uint_eq(f.num_blocks, 335552);
    ck_assert_uint_eq(f.kv_tokens, 5368832);
    ck_assert_double_eq_tol(f.max_concurrency, 5368832.0 / 32768.0, 1e-12);
    d.max_num_seqs = 100;
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.state_slots, 104);
    deploy_at(&d, "vllm@0.7.3", next);
    d.gpu_memory = 150 * GiB;
    d.tp = d.n_gpus = 2;
    d.context = 8192;
    f = fit_ok(next, &d);
    ck_assert_str_eq(f.refused, "Model architectures ['Qwen3NextForCausalLM'] are not supported for now. Supported "
                                "architectures: (vllm 0.7.3's list, which has no Gated DeltaNet hybrid)");
    kvp_model_free(next);
    kvp_model_free(m);
}
END_TEST

/* FlashMLA's 64-token blocks (vllm PR #13747, merged 2025-02-27) postdate
 * 0.7.3 (2025-02-20): there an MLA model keeps the 16-token blocks, one page
 * 16 x (512 + 64) x 2 B per layer for deepseek-v2-lite; 0.11.0 forces 64. */
START_TEST(vllm_mla_block_by_release)
{
    struct kvp_model *m = test_load("deepseek-v2-lite");
    struct kvp_deploy d;
    struct kvp_fit f;

    deploy_at(&d, "vllm@0.7.3", m);
    d.kv_memory = 4 * GiB;
    d.context = 4096;
    reserve_given(&d);
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.block_size, 16);
    ck_assert_uint_eq(f.num_blocks, 4 * GiB / (16ull * 576 * 2 * m->n_layers));
    deploy_at(&d, "vllm@0.11.0", m);
    d.kv_memory = 4 * GiB;
    d.context = 4096;
    reserve_given(&d);
    f = fit_ok(m, &d);
    ck_assert_uint_eq(f.block_size, 64);
    kvp_model_free(m);
}
END_TEST

/* vllm 0.11.0 v1/core/kv_cache_utils.py _report_kv_cache_config logs
 * "GPU KV cache size" as num_blocks // len(kv_cache_groups) * min_block_size,
 * also for hybrids, where it is not max_concurrency x max_model_len (vllm
 * issue #40691 shows 0.19.0 still logging it so; PR #40694 proposed the
 * product). qwen3-next at tp 2: one attention group and the Mamba groups share
 * the blocks. */
START_TEST(vllm_hybrid_tokens_logged)
{
    struct kvp_model *m = test_load("qwen3-next-80b-a3b");
    struct kvp_deploy d;
    struct kvp_fit f;

    kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
    d.kv_memory = 20 * GiB;
    d.tp = d.n_gpus = 2;
    d.context = 8192;
    reserve_given(&d);
    f = fit_ok(m, &d);
    ck_assert_uint_gt(f.n_groups, 1);
    ck_assert_uint_eq(f.kv_tokens, f.num_blocks / f.n_groups * f.block_size);
    ck_assert_uint_ne(f.kv_tokens, (uint64_t)(f.max_concurrency * 8192.0));
    kvp_model_free(m);
}
END_TEST

/* llama.cpp cell padding by release: npm-3.22.1 (src/llama-context.cpp after
 * PR #19067) pads to 256 whatever -fa says; b6182
 * (llama-kv-cache-unified.cpp get_padding) 256 with -fa on, 32 without. */
START_TEST(llamacpp_padding_by_release)
{
    static const struct { const char *engine; int fa; uint32_t pad; uint64_t cells; } cases[] = {
        {"llamacpp@npm-3.22.1", 0, 256, 4352}, {"llamacpp@npm-3.22.1", 1, 256, 4352},
        {"llamacpp@b6182", 0, 32, 4128}, {"llamacpp@b6182", 1, 256, 4352},
    };
    struct kvp_model *m = test_load("llama-3.1-8b");
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_deploy d;
        struct kvp_fit f;
        deploy_at(&d, cases[i].engine, m);
        d.context = 4100;
        d.flash_attn = cases[i].fa;
        reserve_given(&d);
        f = fit_ok(m, &d);
        ck_assert_uint_eq(f.cell_pad, cases[i].pad);
        ck_assert_uint_eq(f.cells, cases[i].cells);
    }
    kvp_model_free(m);
}
END_TEST

/* profile_trtllm.c multiplies bytes checked: a budget near 2^64 rounds its
 * pool up past 64 bits and is an overflow error, not a wrapped size. */
START_TEST(trtllm_overflow_checked)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};

    kvp_deploy_init(&d, KVP_ENGINE_TRTLLM, m);
    d.kv_memory = UINT64_MAX;
    d.context = 4096;
    ck_assert_int_eq(kvp_fit_compute(m, &d, &f, &err), KVP_ERR_OVERFLOW);
    ck_assert(err.msg[0] != '\0');
    kvp_model_free(m);
}
END_TEST

/* llama.cpp --concurrency N in a plan (issue #16 item 5): kvplan check reads
 * the same -np 4 -c 4 x 8192 deployment as kvplan fit, so fits and
 * min_concurrency agree (PASS, 4.00) and the log says 4/4 seqs. */
START_TEST(llamacpp_concurrency_in_plan)
{
    static const char text[] = "kvplan_plan: 1\n"
                               "deployments:\n"
                               "  - name: llama8b-llamacpp\n"
                               "    model: llama-3.1-8b\n"
                               "    gpu: h100\n"
                               "    engine: llamacpp\n"
                               "    context: 8192\n"
                               "    concurrency: 4\n"
                               "    assert:\n"
                               "      - fits: true\n"
                               "      - min_concurrency: 4\n";
    char dir[] = "/tmp/kvplan-deploy-XXXXXX", path[64], *log;
    struct kvp_catalog *models = NULL;
    struct kvp_gpu_catalog *gpus = NULL;
    struct kvp_plan p = {0};
    struct kvp_plan_report r = {0};
    struct kvp_error err = {0};
    struct kvp_fit f;
    FILE *fp;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/plan.yaml", dir);
    ck_assert_ptr_nonnull(fp = fopen(path, "w"));
    fputs(text, fp);
    ck_assert_int_eq(fclose(fp), 0);
    ck_assert_kvp_ok(kvp_catalog_load("models", &models, &err), err);
    ck_assert_kvp_ok(kvp_gpu_catalog_load("models/gpus.yaml", &gpus, &err), err);
    ck_assert_kvp_ok(kvp_plan_load(&p, path, models, gpus, &err), err);
    ck_assert_kvp_ok(kvp_plan_evaluate(&p, &r, &err), err);
    ck_assert_uint_eq(r.n, 2);
    ck_assert_uint_eq(r.failed, 0);
    ck_assert(r.results[0].pass);
    ck_assert_double_eq(r.results[1].measured, 4.0);
    f = fit_ok(p.deps[0].model, &p.deps[0].d);
    ck_assert(f.fits);
    ck_assert_double_eq(f.max_concurrency, 4.0);
    log = fit_log(p.deps[0].model, &p.deps[0].d, &f);
    ck_assert_msg(strstr(log, "(  8192 cells,  32 layers,  4/4 seqs)") != NULL, "%s", log);
    free(log);
    kvp_plan_report_release(&r);
    kvp_plan_release(&p);
    kvp_gpu_catalog_free(gpus);
    kvp_catalog_free(models);
    ck_assert_int_eq(remove(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* ---- weight_dtype auto ---------------------------------------------------- */

/* The rung picked is the first that fits the target and every rung before
 * it does not; the ladder falls strictly in bytes. Llama-3.1-70B at 131,072
 * tokens on one H100 (79.19 GiB): llama.cpp's f16 cache needs 40 GiB, so of
 * stored 131.4 GiB, q8_0 69.8, q6_k 53.9, q5_k_m 46.5, q4_k_m 39.6 and
 * q3_k_m 31.9 GiB only q3_k_m leaves room for it; vLLM's int4 (37.8 GiB)
 * does not fit 0.9 x 79.19 GiB with the cache, its smallest rung, so all
 * three rungs are rejected and int4 is kept to say by how much. On a
 * 100 GiB card, 4 x 8,192 tokens (10 GiB of bf16 cache): stored 131.4 GiB
 * cannot load, fp8 67.7 GiB leaves a 20.2 GiB budget: fp8. */
static const struct auto_case {
    const char *engine;
    uint64_t gpu_memory, context, concurrency;
    const char *want;
    uint32_t rejected;
} auto_cases[] = {
    {"llamacpp", H100, 131072, 1, "q3_k_m", 5},
    {"vllm", H100, 131072, 1, "int4:group=128", 3},
    {"vllm", H100, 32768, 1, "int4:group=128", 2},
    {"vllm", 100 * GiB, 8192, 4, "fp8_e4m3", 1},
};

START_TEST(weight_dtype_auto)
{
    const struct auto_case *c = &auto_cases[_i];
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_wstore rung[KVP_WLADDER_MAX];
    struct kvp_weights w;
    struct kvp_deploy d;
    uint32_t n;
    uint64_t last = UINT64_MAX;
    char name[64];

    ck_assert_kvp_ok(kvp_model_load("models/llama-3.1-70b.yaml", &m, &err), err);
    deploy_at(&d, c->engine, m);
    d.gpu_memory = c->gpu_memory;
    d.context = c->context;
    d.concurrency = c->concurrency;
    ck_assert_kvp_ok(kvp_weights_ladder(m, &d, rung, &n, &err), err);
    ck_assert_uint_eq(n, strcmp(c->engine, "llamacpp") == 0 ? 7 : 3);
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_kvp_ok(kvp_weights_compute(m, &rung[i], &w, &err), err);
        ck_assert_uint_lt(w.bytes, last);
        last = w.bytes;
    }
    ck_assert_kvp_ok(kvp_deploy_pick_weights(m, &d, &err), err);
    ck_assert(d.w_auto);
    ck_assert_str_eq(kvp_wstore_name(&d.w, name, sizeof name), c->want);
    ck_assert_uint_eq(d.w_auto_rejected, c->rejected);
    for (uint32_t i = 0; i <= d.w_auto_rejected && i < n; i++) {
        struct kvp_deploy t = d;
        struct kvp_fit f;
        t.w = rung[i];
        f = fit_ok(m, &t);
        ck_assert_msg((f.fits && f.max_concurrency >= (double)c->concurrency) == (i == c->rejected), "rung %u", i);
    }
    kvp_model_free(m);
}
END_TEST

/* A checkpoint already near 4 bits has no fp8 rung (it is larger), and a
 * setting of "auto" is kept as such when printed, so a saved plan asks again. */
START_TEST(weight_dtype_auto_rungs_shrink)
{
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_settings st;
    struct kvp_deploy d;
    const struct kvp_gpu *g = NULL;
    struct kvp_wstore rung[KVP_WLADDER_MAX];
    uint32_t n;
    int bad;
    char text[KVP_SETTING_VALUE_MAX];

    ck_assert_kvp_ok(kvp_model_load("models/gpt-oss-20b.yaml", &m, &err), err);
    deploy_at(&d, "vllm", m);
    ck_assert_kvp_ok(kvp_weights_ladder(m, &d, rung, &n, &err), err);
    ck_assert_uint_eq(n, 2); /* MXFP4 experts 13.76 GB; fp8 22.08 GB is left out; int4:group=128 12.84 GB */
    ck_assert_str_eq(kvp_wstore_name(&rung[1], text, sizeof text), "int4:group=128");
    kvp_settings_clear(&st);
    ck_assert_kvp_ok(kvp_settings_put(&st, "gpu_memory", "16GiB", &err), err);
    ck_assert_kvp_ok(kvp_settings_put(&st, "weight_dtype", "auto", &err), err);
    ck_assert_kvp_ok(kvp_settings_put(&st, "context", "4096", &err), err);
    ck_assert_kvp_ok(kvp_settings_apply(&st, m, NULL, &d, &g, &bad, &err), err);
    ck_assert(d.w_auto);
    ck_assert_str_eq(kvp_setting_text((uint32_t)kvp_setting_find("weight_dtype"), &d, g, text, sizeof text), "auto");
    kvp_model_free(m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("deploy");
    TCase *core = tcase_create("core");
    TCase *limits = tcase_create("limits");

    tcase_add_test(core, vllm_real_log);
    tcase_add_loop_test(core, logs_from_settings, 0, (int)N_ELEMS(log_cases));
    tcase_add_test(core, logs_median_and_given);
    tcase_add_test(core, reserve_interval_covers_logs);
    tcase_add_loop_test(core, llamacpp_cuda_logs, 0, (int)N_ELEMS(llamacpp_log_cases));
    tcase_add_test(core, vllm_cuda_graph_estimate);
    tcase_add_test(core, llamacpp_b6182_log);
    tcase_add_test(core, llamacpp_b4862_log_lines);
    tcase_add_test(core, llamacpp_ubatch_capped);
    tcase_add_test(core, llamacpp_max_context_is_the_memory_bound);
    tcase_add_test(core, vllm_kv_heads_divide_tp);
    tcase_add_test(core, vllm_pp_groups_strided);
    tcase_add_test(core, vllm_pp_groups_issue_figures);
    tcase_add_test(core, vllm_mla_block_by_gpu);
    tcase_add_test(core, vllm_mxfp4_loaded_weights);
    tcase_add_test(core, llamacpp_concurrency_slots);
    tcase_add_test(core, vllm_mla_block_forced);
    tcase_add_test(core, vllm_pp_groups_whole_model);
    tcase_add_test(core, sglang_swa_only_listed);
    tcase_add_test(core, engine_releases);
    tcase_add_test(core, llamacpp_real_log);
    tcase_add_loop_test(core, llamacpp_oracle_shipped, 0, (int)N_ELEMS(oracle_cases));
    tcase_add_test(core, llamacpp_mla_v_less);
    tcase_add_loop_test(core, llamacpp_oracle_tiny, 0, (int)N_ELEMS(tiny_cases));
    tcase_add_loop_test(core, vllm_block_edges, 0, (int)N_ELEMS(block_cases));
    tcase_add_loop_test(core, vllm_sliding_edges, 0, (int)N_ELEMS(sliding_cases));
    tcase_add_loop_test(core, vllm_hybrid_groups, 0, (int)N_ELEMS(hybrid_cases));
    tcase_add_test(core, vllm_mla);
    tcase_add_loop_test(core, vllm_tp_heads, 0, (int)N_ELEMS(tp_cases));
    tcase_add_test(core, vllm_fp8_halves);
    tcase_add_loop_test(core, sglang_tokens, 0, (int)N_ELEMS(sglang_cases));
    tcase_add_test(core, sglang_default_fraction);
    tcase_add_loop_test(core, trtllm_blocks, 0, (int)N_ELEMS(trt_cases));
    tcase_add_loop_test(core, trtllm_logs, 0, (int)N_ELEMS(trtllm_log_cases));
    tcase_add_test(core, trtllm_log_figures_given);
    tcase_add_loop_test(core, hf_static, 0, (int)N_ELEMS(static_cases));
    tcase_add_test(core, hf_dynamic);
    tcase_add_loop_test(core, hf_quantized, 0, (int)N_ELEMS(quant_cases));
    tcase_add_test(core, ideal_concurrency);
    tcase_add_loop_test(core, weight_dtype_auto, 0, (int)N_ELEMS(auto_cases));
    tcase_add_test(core, weight_dtype_auto_rungs_shrink);
    tcase_add_test(core, inverse_min_gpus);
    tcase_add_test(core, dp_vllm_mla);
    tcase_add_test(core, dp_vllm_51454_ratio);
    tcase_add_test(core, dp_sglang_attention);
    tcase_add_test(core, dp_sglang_gqa_heads);
    tcase_add_test(core, dp_replicas);
    tcase_add_test(core, dp_min_gpus_mla);
    tcase_add_loop_test(core, dp_refused, 0, (int)N_ELEMS(dp_cases));
    tcase_add_test(core, ep_weights);
    tcase_add_test(core, ep_mxfp4_padding);
    tcase_add_loop_test(core, ep_refused, 0, (int)N_ELEMS(ep_cases));
    tcase_add_test(core, inverse_min_util);
    tcase_add_test(core, roofline_decode);
    tcase_add_test(core, roofline_host_layers);
    tcase_add_test(core, roofline_cpu_moe);
    tcase_add_test(core, llamacpp_override_tensor);
    tcase_add_test(core, llamacpp_params_fit_given);
    tcase_add_test(core, vllm_lora_slots);
    tcase_add_test(core, sglang_mamba_pool);
    tcase_add_test(core, sglang_mamba_before_support);
    tcase_add_test(core, sglang_swa_pool_log);
    tcase_add_test(core, vllm_v0_mamba_cache);
    tcase_add_test(core, vllm_hybrid_tokens_logged);
    tcase_add_test(core, vllm_mla_block_by_release);
    tcase_add_test(core, llamacpp_padding_by_release);
    tcase_add_test(core, llamacpp_concurrency_in_plan);
    tcase_add_loop_test(core, llamacpp_ngl_placement, 0, (int)N_ELEMS(ngl_cases));
    tcase_add_loop_test(core, fit_limits_edges, 0, (int)N_ELEMS(limits_cases));
    tcase_add_loop_test(core, llamacpp_metal_logs, 0, (int)N_ELEMS(metal_cases));
    tcase_add_loop_test(core, llamacpp_params_fit, 0, (int)N_ELEMS(fitp_cases));
    tcase_add_test(core, llamacpp_weights_placed);
    suite_add_tcase(s, core);

    tcase_add_test(limits, llamacpp_block_refused);
    tcase_add_test(limits, vllm_does_not_start);
    tcase_add_test(limits, llamacpp_refusals);
    tcase_add_test(limits, llamacpp_mla_types_refused);
    tcase_add_loop_test(limits, vllm_formats_refused, 0, (int)N_ELEMS(vllm_refused));
    tcase_add_loop_test(limits, usage_errors, 0, (int)N_ELEMS(usage_cases));
    tcase_add_loop_test(limits, overflow_context, 0, KVP_ENGINE_COUNT);
    tcase_add_loop_test(limits, roofline_refused, 0, (int)N_ELEMS(roofline_bad));
    tcase_add_test(limits, llamacpp_bad_split);
    tcase_add_loop_test(core, ollama_choices, 0, sizeof ollama_cases / sizeof ollama_cases[0]);
    tcase_add_test(core, ollama_given);
    tcase_add_test(limits, trtllm_overflow_checked);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
