/* check_log.c -- start-up logs read back (log.h) and explained beside kvplan's fit (explain_log.h).
 *
 * The logs are real, one file each under tests/data/engine-logs/raw/ with its source on line 1
 * (the excerpts of /work/shared/reference/engine-logs-train.json, and vLLM issue #21348). The
 * pasted forms (timestamps, process prefixes, ANSI colours, ranks interleaved) are made here
 * from a real log, line by line, so the figures they must give back are the real ones. */
#include "testutil.h"

#include <math.h>

#include "kvplan/explain_log.h"
#include "kvplan/io.h"
#include "kvplan/log.h"

#define RAW "tests/data/engine-logs/raw/"
#define LOGS "tests/data/engine-logs/"
#define GIB 1073741824.0

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = calloc(1, 1 << 20);
    ck_assert_ptr_nonnull(f);
    *len = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    return buf;
}

/* A log as the front end reads it: kvp_read_input (a file, or "-"), then kvp_log_parse. */
static enum kvp_status read_log(const char *path, struct kvp_log *log, struct kvp_error *err)
{
    char *text;
    uint64_t len;
    enum kvp_status st = kvp_read_input(path, KVP_LOG_FILE_MAX, &text, &len, err);
    if (st != KVP_OK)
        return st;
    st = kvp_log_parse(text, (size_t)len, path, log, err);
    free(text);
    return st;
}

/* ---- the real logs ---------------------------------------------------------------------------- */

static const struct real {
    const char *file, *model;
    const char *opts[6][2]; /* what the log does not print, as a user passes it */
    enum kvp_engine_id engine;
    const char *release;    /* the release kvplan replays it with */
    double kv_gib;          /* the logged KV budget; 0 = not logged */
    uint32_t kv_line;
    double tokens;          /* the logged tokens (llama.cpp cells); 0 = not logged */
    double bound;           /* |kvplan - logged| / logged on the budget: today's error, rounded up */
    double replay_bound;    /* the same on the tokens or blocks kvplan gives at the logged budget (0: not checked) */
} reals[] = {
    {"vllm-10517-20k.log", "models/llama-3.1-8b.yaml", {{0}}, KVP_ENGINE_VLLM, "0.7.3", 3.81, 3, 0, 0.01, 0.002},
    {"vllm-10517-29k.log", "models/llama-3.1-8b.yaml", {{0}}, KVP_ENGINE_VLLM, "0.7.3", 2.89, 3, 23648, 0.05, 0.002},
    {"vllm-10511-llama3-8b-tp1.log", LOGS "llama-3-8b.yaml", {{"context", "8192"}, {"engine", "vllm@0.7.3"}},
     KVP_ENGINE_VLLM, "0.7.3", 53.29, 8, 0, 0.04, 0},
    {"vllm-13061.log", LOGS "qwen2.5-14b.yaml",
     {{"tp", "2"}, {"util", "0.98"}, {"gpu_memory", "25756696576B"}, {"max_num_batched_tokens", "2048"}},
     KVP_ENGINE_VLLM, "0.7.3", 8.69, 4, 81536, 0.02, 0}, /* the tokens are not the quoted budget's: unchecked */
    /* `vllm serve Qwen/Qwen3-14B` with every default (0.21.0's utilization 0.92): a reserve ~0.5 GiB over the
     * estimate (check_deploy.c's log cases) */
    {"blog60168338778-qwen3-14b-l40s.log", LOGS "qwen3-14b.yaml",
     {{"engine", "vllm@0.21.0"}, {"gpu_memory", "46068MiB"}},
     KVP_ENGINE_VLLM, "0.21.0", 11.57, 3, 75824, 0.05, 0.001},
    {"idx55875904831-qwen2.5-1.5b-t4.log", LOGS "qwen2.5-1.5b.yaml", {{0}}, KVP_ENGINE_VLLM, "0.7.3", 2.36, 4, 0,
     0.16, 0.002},
    {"idx6934259882-phi4-bnb.log", LOGS "phi-4.yaml", {{"weight_dtype", "int4:group=64"}}, KVP_ENGINE_VLLM, "0.7.3",
     45.21, 4, 0, 0.02, 0.001},
    {"idx33122952765-qwen2.5-0.5b-bnb-47gib.log", LOGS "qwen2.5-0.5b.yaml", {{"weight_dtype", "int4:group=64"}},
     KVP_ENGINE_VLLM, "0.7.3", 34.81, 4, 0, 0.02, 0.001},
    {"vllm-21348-vllm.log", "models/qwen3-235b-a22b.yaml",
     {{"engine", "vllm@0.11.0"}, {"tp", "4"}, {"gpu", "h100"}, {"weight_dtype", "fp8"}, {"context", "40960"}},
     /* an LMCache connector takes ~4 GiB kvplan does not model */
     KVP_ENGINE_VLLM, "0.11.0", 8.11, 2, 178880, 0.50, 0.012},
    {"vllm-21348-sglang.log", "models/qwen3-235b-a22b.yaml",
     {{"engine", "sglang"}, {"tp", "4"}, {"gpu", "h100"}, {"weight_dtype", "fp8"}, {"context", "40960"},
      {"util", "0.93"}}, KVP_ENGINE_SGLANG, "0.5.2", 16.46, 2, 367404, 0.01, 0.001},
    /* V1 worker lines with (EngineCore_DP0 pid=...) prefixes; the GPU is not in the log: the tokens at the logged
     * budget are exact, the budget itself is the H100's guess */
    {"lmcache-1739-qwen3-14b.log", LOGS "qwen3-14b.yaml", {{"engine", "vllm@0.11.0"}, {"gpu", "h100"}},
     KVP_ENGINE_VLLM, "0.11.0", 6.51, 2, 42656, 5.40, 0.001},
    /* TRT-LLM's C++ runtime: 9.18 GiB of buffers (runtime, decoder, context) the estimate misses */
    {"trtllm-1188-qwen2.5-coder-0.5b-a4000.log", LOGS "qwen2.5-0.5b.yaml", {{"gpu_memory", "16GiB"},
     {"weight_dtype", "int8"}}, KVP_ENGINE_TRTLLM, "1.0.0", 4.53, 7, 395776, 1.9, 0.001},
    /* the model is not named; 69,524,783,104 B / 132,608 tokens = 512 KiB a token: Llama-2-7B in f16 */
    {"trtllm-1400-a100.log", "models/llama-2-7b.yaml", {{"gpu", "a100-80gb"}}, KVP_ENGINE_TRTLLM, "1.0.0",
     69524783104.0 / GIB, 3, 132608, 0.10, 0.001},
    /* -ngl 24 --n-cpu-moe 14 on an M2 Pro: the KV cache is what -c asks, whatever the weights' split */
    {"llama.cpp-16188.log", "models/gpt-oss-20b.yaml", {{"engine", "llamacpp@b6182"}, {"gpu_memory", "32GiB"}},
     KVP_ENGINE_LLAMACPP, "b6182", 111.0 / 1024, 3, 4096, 0.001, 0},
};

static struct kvp_gpu_catalog *gpus;

START_TEST(real_logs)
{
    const struct real *c = &reals[_i];
    struct kvp_log *log = malloc(sizeof *log);
    struct kvp_log_explain *x = malloc(sizeof *x);
    struct kvp_error err = {0};
    struct kvp_settings s;
    struct kvp_model *m = NULL;
    char path[256];
    snprintf(path, sizeof path, RAW "%s", c->file);
    ck_assert_kvp_ok(read_log(path, log, &err), err);
    ck_assert_int_eq(log->engine, c->engine);
    ck_assert_uint_eq(log->fig[KVP_LOG_KV_BUDGET].line, c->kv_line);
    ck_assert_msg(fabs(log->fig[KVP_LOG_KV_BUDGET].value / GIB - c->kv_gib) < 0.006, "%s: logged %.3f GiB", c->file,
                  log->fig[KVP_LOG_KV_BUDGET].value / GIB);
    if (c->tokens)
        ck_assert_double_eq(log->fig[KVP_LOG_KV_TOKENS].value, c->tokens);
    s = log->settings;
    for (int i = 0; i < 6 && c->opts[i][0]; i++)
        ck_assert_kvp_ok(kvp_settings_put(&s, c->opts[i][0], c->opts[i][1], &err), err);
    ck_assert_kvp_ok(kvp_model_load(c->model, &m, &err), err);
    ck_assert_kvp_ok(kvp_log_explain(log, &s, m, gpus, x, &err), err);
    ck_assert_str_eq(x->fit.release->version, c->release);
    for (uint32_t i = 0; i < x->n_rows; i++)
        if (x->row[i].fig == KVP_LOG_KV_BUDGET) {
            double e = (x->row[i].kvplan - x->row[i].logged) / x->row[i].logged;
            ck_assert_msg(fabs(e) <= c->bound, "%s: kvplan's KV budget %+.2f%% off, bound %.0f%%", c->file, 100 * e,
                          100 * c->bound);
            ck_assert_uint_eq(x->row[i].line, c->kv_line);
            ck_assert(x->row[i].term[0]);
        } else if ((x->row[i].fig == KVP_LOG_KV_TOKENS || x->row[i].fig == KVP_LOG_BLOCKS) && x->row[i].line &&
                   c->replay_bound > 0) {
            double e = (x->row[i].replay - x->row[i].logged) / x->row[i].logged;
            ck_assert_msg(fabs(e) <= c->replay_bound, "%s: %s at the logged budget %+.3f%% off", c->file,
                          kvp_log_fig_name(x->row[i].fig), 100 * e);
        }
    kvp_model_free(m);
    free(x);
    free(log);
}
END_TEST

/* vLLM V0's profile line: the activation peak is peak_torch_memory less the weights; every figure with its line */
START_TEST(v0_figures)
{
    struct kvp_log log;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(read_log(RAW "vllm-10517-20k.log", &log, &err), err);
    ck_assert(log.vllm_v0);
    ck_assert_uint_eq(log.fig[KVP_LOG_WEIGHTS].line, 2);
    ck_assert_double_eq_tol(log.fig[KVP_LOG_WEIGHTS].value / GIB, 14.9888, 1e-9);
    ck_assert_double_eq_tol(log.fig[KVP_LOG_ACTIVATION].value / GIB, 17.06 - 14.9888, 1e-9);
    ck_assert_double_eq_tol(log.fig[KVP_LOG_NON_TORCH].value / GIB, 0.35, 1e-9);
    ck_assert_double_eq_tol(log.fig[KVP_LOG_NON_TORCH].resolution / GIB, 0.005, 1e-12);
    ck_assert_double_eq(log.fig[KVP_LOG_BLOCKS].value, 1952);
    ck_assert_uint_eq(log.fig[KVP_LOG_CONCURRENCY].line, 5);
    ck_assert_double_eq_tol(log.fig[KVP_LOG_CONCURRENCY].value, 1.56, 1e-12);
    ck_assert_uint_eq(log.concurrency_context, 20000);
    ck_assert_str_eq(log.settings.value[kvp_setting_find("context")], "20000");
    ck_assert_uint_eq(log.setting_line[kvp_setting_find("context")], 5);
    ck_assert_str_eq(log.settings.value[kvp_setting_find("util")], "0.9");
    ck_assert_str_eq(log.settings.value[kvp_setting_find("engine")], "vllm@0.7.3");
    ck_assert_uint_eq(log.setting_line[0], 0); /* the release is assumed: no version printed */
}
END_TEST

/* The real log as users paste it: ANSI colours, a timestamp and a TP tag on every line, and
 * rank 1 interleaved before rank 0 with figures of its own. Rank 0's figures come back. */
START_TEST(pasted)
{
    size_t len, n = 0;
    char *clean = slurp(RAW "vllm-10517-20k.log", &len), *mixed = calloc(1, 1 << 20);
    struct kvp_log a, b;
    struct kvp_error err = {0};
    uint32_t line = 0;
    ck_assert_kvp_ok(kvp_log_parse(clean, len, "clean.log", &a, &err), err);
    for (char *s = clean, *nl; (nl = strchr(s, '\n')) != NULL; s = nl + 1, line++) {
        *nl = '\0';
        if (line > 0) /* rank 1 first, with another weights figure where rank 0 prints one */
            n += (size_t)sprintf(mixed + n, "\x1b[36m[2024-12-02 10:00:%02u TP1]\x1b[0m \x1b[32mINFO\x1b[0m %s\r\n",
                                 line, strstr(s, "took") ? "Loading model weights took 99.1234 GB" : s);
        n += (size_t)sprintf(mixed + n, "\x1b[36m[2024-12-02 10:00:%02u TP0]\x1b[0m \x1b[32mINFO\x1b[0m %s\r\n", line,
                             s);
    }
    ck_assert_kvp_ok(kvp_log_parse(mixed, n, "mixed.log", &b, &err), err);
    for (int f = 0; f < KVP_LOG_FIG_COUNT; f++) {
        ck_assert_msg(!a.fig[f].line == !b.fig[f].line, "%s", kvp_log_fig_name((enum kvp_log_fig)f));
        ck_assert_double_eq(a.fig[f].value, b.fig[f].value);
    }
    ck_assert_str_eq(b.settings.value[kvp_setting_find("context")], "20000");
    ck_assert_int_eq(b.engine, KVP_ENGINE_VLLM);
    free(clean);
    free(mixed);
}
END_TEST

/* vLLM V1 under multiprocessing: "(VllmWorker rank=N pid=P)" prefixes, rank 1 first; settings from
 * its "non-default args" dict read with vLLM's flag names (the figure phrases are vLLM 0.19's). */
START_TEST(v1_workers)
{
    static const char text[] =
        "INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.19.0\n"
        "INFO 05-01 10:00:00 [utils.py:1] non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct', "
        "'max_model_len': 8192, 'tensor_parallel_size': 2, 'gpu_memory_utilization': 0.95, 'kv_cache_dtype': 'fp8', "
        "'max_num_seqs': 64, 'enforce_eager': True, 'enable_lora': False, 'dtype': 'bfloat16'}\n"
        "(VllmWorker rank=1 pid=12) INFO [gpu_worker.py:1] Available KV cache memory: 60.00 GiB\n"
        "(VllmWorker rank=0 pid=11) INFO [gpu_worker.py:1] Model loading took 7.5100 GiB and 3.1 seconds\n"
        "(VllmWorker rank=0 pid=11) INFO [gpu_worker.py:1] Available KV cache memory: 63.76 GiB\n"
        "INFO [kv_cache_utils.py:1] GPU KV cache size: 1,044,688 tokens\n"
        "INFO [kv_cache_utils.py:1] Maximum concurrency for 8,192 tokens per request: 127.53x\n";
    struct kvp_log log;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_log_parse(text, sizeof text - 1, "v1.log", &log, &err), err);
    ck_assert_str_eq(log.version, "0.19.0");
    ck_assert_str_eq(log.model, "meta-llama/Llama-3.1-8B-Instruct");
    ck_assert_uint_eq(log.model_line, 2);
    ck_assert_str_eq(log.settings.value[kvp_setting_find("tp")], "2");
    ck_assert_str_eq(log.settings.value[kvp_setting_find("context")], "8192");
    ck_assert_str_eq(log.settings.value[kvp_setting_find("util")], "0.95");
    ck_assert_str_eq(log.settings.value[kvp_setting_find("kv_dtype")], "fp8");
    ck_assert_str_eq(log.settings.value[kvp_setting_find("max_num_seqs")], "64");
    ck_assert_str_eq(log.settings.value[kvp_setting_find("engine")], "vllm@0.11.0"); /* newest known <= 0.19.0 */
    ck_assert_uint_eq(log.fig[KVP_LOG_KV_BUDGET].line, 5);                            /* rank 0's, not rank 1's */
    ck_assert_double_eq_tol(log.fig[KVP_LOG_KV_BUDGET].value / GIB, 63.76, 1e-9);
    ck_assert_double_eq(log.fig[KVP_LOG_KV_TOKENS].value, 1044688);
    ck_assert_uint_eq(log.concurrency_context, 8192);
    ck_assert_str_eq(log.unmodelled, "");
}
END_TEST

/* A real V1 dump (LMCache PR #2522): a nested KVTransferConfig(...) value, the connector named as not modelled */
START_TEST(v1_real_args)
{
    struct kvp_log log;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(read_log(RAW "lmcache-2522-llama-3.2-1b.log", &log, &err), err);
    ck_assert_int_eq(log.engine, KVP_ENGINE_VLLM);
    ck_assert_str_eq(log.model, "meta-llama/Llama-3.2-1B-Instruct");
    ck_assert_uint_eq(log.model_line, 2);
    ck_assert_str_eq(log.settings.value[kvp_setting_find("context")], "1024");
    ck_assert_str_eq(log.settings.value[kvp_setting_find("util")], "0.35");
    ck_assert_str_eq(log.settings.value[kvp_setting_find("max_num_batched_tokens")], "8192");
    ck_assert_uint_eq(log.setting_line[kvp_setting_find("max_num_batched_tokens")], 5);
    ck_assert_ptr_nonnull(
        strstr(log.unmodelled, "kv_transfer_config=KVTransferConfig(kv_connector='LMCacheConnectorV1'"));
}
END_TEST

/* SGLang's ServerArgs(...) and its pool lines, with "[time TP0]" prefixes (phrases of SGLang 0.4) */
START_TEST(sglang_args)
{
    static const char text[] =
        "[2025-03-25 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-14B', tokenizer_path='Qwen/Qwen3-14B', "
        "dtype='auto', kv_cache_dtype='auto', quantization=None, context_length=40960, device='cuda', "
        "mem_fraction_static=0.8, max_running_requests=None, chunked_prefill_size=8192, tp_size=4, dp_size=1, "
        "page_size=1, json_model_override_args='{}', lora_paths=None)\n"
        "[2025-03-25 10:00:05 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=16.00 GB, "
        "mem usage=7.08 GB.\n"
        "[2025-03-25 10:00:05 TP1] KV Cache is allocated. #tokens: 1, K size: 1.00 GB, V size: 1.00 GB\n"
        "[2025-03-25 10:00:05 TP0] KV Cache is allocated. #tokens: 298447, K size: 5.69 GB, V size: 5.69 GB\n";
    struct kvp_log log;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_log_parse(text, sizeof text - 1, "sglang.log", &log, &err), err);
    ck_assert_int_eq(log.engine, KVP_ENGINE_SGLANG);
    ck_assert_str_eq(log.model, "Qwen/Qwen3-14B");
    ck_assert_str_eq(log.settings.value[kvp_setting_find("tp")], "4");
    ck_assert_str_eq(log.settings.value[kvp_setting_find("util")], "0.8");
    ck_assert_str_eq(log.settings.value[kvp_setting_find("context")], "40960");
    ck_assert_str_eq(log.settings.value[kvp_setting_find("block_size")], "1");
    ck_assert_double_eq_tol(log.fig[KVP_LOG_WEIGHTS].value / GIB, 7.08, 1e-9);
    ck_assert_double_eq(log.fig[KVP_LOG_KV_TOKENS].value, 298447);
    ck_assert_double_eq_tol(log.fig[KVP_LOG_KV_BUDGET].value / GIB, 11.38, 1e-9);
    ck_assert_uint_eq(log.fig[KVP_LOG_KV_BUDGET].line, 4);
}
END_TEST

/* The vLLM explanation names the activation term and the change that frees it */
START_TEST(explain_vllm)
{
    struct kvp_log log;
    struct kvp_log_explain *x = malloc(sizeof *x);
    struct kvp_error err = {0};
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_buf b = {0};
    ck_assert_kvp_ok(read_log(RAW "vllm-10517-20k.log", &log, &err), err);
    ck_assert_kvp_ok(kvp_log_explain(&log, &log.settings, m, NULL, x, &err), err);
    ck_assert_uint_gt(x->n_changes, 1);
    ck_assert_str_eq(x->change[0].what, "activation peak 2.07 GiB from max_num_batched_tokens 20000: set 10000");
    ck_assert_int_gt(x->change[0].kv_bytes, 0);
    ck_assert_ptr_nonnull(strstr(x->assumed, "release vllm@0.7.3 (no version printed; V0 worker lines)"));
    ck_assert_ptr_nonnull(strstr(x->assumed, "kv_dtype bf16"));
    kvp_log_explain_render(&log, "vllm.log", m, x, KVP_OUT_JSON, false, &b);
    ck_assert_ptr_nonnull(strstr(b.data, "\"figure\": \"kv_budget\""));
    ck_assert_ptr_nonnull(strstr(b.data, "\"engine_version\": \"0.7.3\""));
    kvp_buf_release(&b);
    kvp_log_explain_render(&log, "vllm.log", m, x, KVP_OUT_TEXT, false, &b);
    ck_assert_ptr_nonnull(strstr(b.data, "to get more KV"));
    kvp_buf_release(&b);
    kvp_model_free(m);
    free(x);
}
END_TEST

/* ---- limits ---------------------------------------------------------------------------------- */

START_TEST(binary_input)
{
    static const char text[] = "INFO vLLM API server version 0.7.3\nGPU blocks: 1\0x\n";
    struct kvp_log log;
    struct kvp_error err = {0};
    char buf[KVP_ERROR_TEXT_MAX];
    ck_assert_int_eq(kvp_log_parse(text, sizeof text - 1, "x.log", &log, &err), KVP_ERR_SYNTAX);
    ck_assert_str_eq(kvp_error_text(&err, buf, sizeof buf),
                     "x.log:2:14: not a text log (byte 0x00): paste the engine's output as text");
}
END_TEST

START_TEST(no_engine)
{
    static const char text[] = "hello\nworld\n";
    struct kvp_log log;
    struct kvp_error err = {0};
    char buf[KVP_ERROR_TEXT_MAX];
    ck_assert_int_eq(kvp_log_parse(text, sizeof text - 1, "x.log", &log, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_str_eq(kvp_error_text(&err, buf, sizeof buf),
                     "x.log:1:1: no line of a vLLM, SGLang, llama.cpp or TRT-LLM start-up found in 2 lines");
    ck_assert_int_eq(kvp_log_parse("", 0, "e.log", &log, &err), KVP_ERR_UNSUPPORTED);
}
END_TEST

/* A line past 16 KiB is read up to there; numbers at the end of the buffer stop at its end */
START_TEST(long_line)
{
    size_t n = 40000;
    char *text = malloc(n + 64);
    struct kvp_log log;
    struct kvp_error err = {0};
    memset(text, 'a', n);
    static const char head[] = "vLLM non-default args: {'max_model_len': ";
    memcpy(text, head, sizeof head - 1);
    memcpy(text + 16383 - 3, "123", 3);
    n += (size_t)sprintf(text + n, "\nAvailable KV cache memory: 1.00 GiB");
    ck_assert_kvp_ok(kvp_log_parse(text, n, "long.log", &log, &err), err);
    ck_assert_uint_eq(log.lines, 2);
    ck_assert_double_eq(log.fig[KVP_LOG_KV_BUDGET].value, GIB);
    free(text);
}
END_TEST

/* Every tests/data/bad/log-*.log fails with exactly the text of its .err file */
START_TEST(bad_logs)
{
    DIR *dir = opendir("tests/data/bad");
    struct dirent *e;
    int n = 0;
    ck_assert_ptr_nonnull(dir);
    while ((e = readdir(dir)) != NULL) {
        char path[512], want[KVP_ERROR_TEXT_MAX + 2], got[KVP_ERROR_TEXT_MAX];
        size_t len = strlen(e->d_name), wlen;
        struct kvp_log log;
        struct kvp_error err = {0};
        FILE *f;
        if (strncmp(e->d_name, "log-", 4) != 0 || len < 5 || strcmp(e->d_name + len - 4, ".log") != 0)
            continue;
        snprintf(path, sizeof path, "tests/data/bad/%s.err", e->d_name);
        ck_assert_ptr_nonnull(f = fopen(path, "r"));
        wlen = fread(want, 1, sizeof want - 1, f);
        fclose(f);
        want[wlen && want[wlen - 1] == '\n' ? wlen - 1 : wlen] = '\0';
        snprintf(path, sizeof path, "tests/data/bad/%s", e->d_name);
        ck_assert_int_ne(read_log(path, &log, &err), KVP_OK);
        ck_assert_str_eq(kvp_error_text(&err, got, sizeof got), want);
        n++;
    }
    closedir(dir);
    ck_assert_int_ge(n, 2);
}
END_TEST

/* "-" reads the standard input */
START_TEST(stdin_input)
{
    struct kvp_log log;
    struct kvp_error err = {0};
    ck_assert_ptr_nonnull(freopen(RAW "vllm-21348-sglang.log", "r", stdin));
    ck_assert_kvp_ok(read_log("-", &log, &err), err);
    ck_assert_int_eq(log.engine, KVP_ENGINE_SGLANG);
    ck_assert_double_eq(log.fig[KVP_LOG_KV_TOKENS].value, 367404);
}
END_TEST

/* Only the first 262,144 lines worth searching are searched: a start-up is at the top, and the first print wins */
START_TEST(search_cap)
{
    size_t n = 0, cap = 300000 * 32 + 128;
    char *text = malloc(cap);
    struct kvp_log log;
    struct kvp_error err = {0};
    n += (size_t)sprintf(text + n, "vLLM API server version 0.7.3\nGPU blocks: 7\n");
    for (int i = 0; i < 300000; i++)
        n += (size_t)sprintf(text + n, "request %07d done\n", i);
    n += (size_t)sprintf(text + n, "Available KV cache memory: 1.00 GiB\n");
    ck_assert_kvp_ok(kvp_log_parse(text, n, "big.log", &log, &err), err);
    ck_assert_uint_eq(log.lines, 300003);
    ck_assert_double_eq(log.fig[KVP_LOG_BLOCKS].value, 7);
    ck_assert_uint_eq(log.fig[KVP_LOG_KV_BUDGET].line, 0);
    free(text);
}
END_TEST

START_TEST(missing_gpu)
{
    static const char text[] = "INFO Available KV cache memory: 8.11 GiB\n";
    struct kvp_log log;
    struct kvp_log_explain *x = malloc(sizeof *x);
    struct kvp_error err = {0};
    struct kvp_model *m = test_load("llama-3.1-8b");
    ck_assert_kvp_ok(kvp_log_parse(text, sizeof text - 1, "x.log", &log, &err), err);
    ck_assert_int_eq(kvp_log_explain(&log, &log.settings, m, NULL, x, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "the log does not give the GPU's memory: pass --gpu NAME or --gpu-memory SIZE");
    kvp_model_free(m);
    free(x);
}
END_TEST

static Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *core = tcase_create("core"), *limits = tcase_create("limits");
    tcase_add_loop_test(core, real_logs, 0, (int)N_ELEMS(reals));
    tcase_add_test(core, v0_figures);
    tcase_add_test(core, pasted);
    tcase_add_test(core, v1_workers);
    tcase_add_test(core, v1_real_args);
    tcase_add_test(core, sglang_args);
    tcase_add_test(core, explain_vllm);
    tcase_add_test(limits, binary_input);
    tcase_add_test(limits, no_engine);
    tcase_add_test(limits, long_line);
    tcase_add_test(limits, missing_gpu);
    tcase_add_test(limits, search_cap);
    tcase_add_test(limits, bad_logs);
    tcase_add_test(limits, stdin_input);
    suite_add_tcase(s, core);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    struct kvp_error err = {0};
    int rc;
    if (kvp_gpu_catalog_load("models/gpus.yaml", &gpus, &err) != KVP_OK)
        return 2;
    rc = run_suite(log_suite());
    kvp_gpu_catalog_free(gpus);
    return rc;
}
