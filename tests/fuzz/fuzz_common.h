/* fuzz_common.h -- what every kvplan libFuzzer harness does with a parsed model.
 *
 * A harness parses its input with one parser; when the parse and
 * kvp_model_validate succeed, fuzz_engine() runs the engine on the model, so
 * arithmetic on hostile-but-valid shapes is fuzzed too:
 *
 *     struct kvp_model m;
 *     kvp_model_init(&m);
 *     if (kvp_model_parse_hf(text, n, "fuzz.json", &m, &err) == KVP_OK)
 *         fuzz_engine(&m, data, size);
 *     fuzz_check_error(st, &err);
 *
 * What counts as a bug (abort(), so libFuzzer keeps the input):
 *   - a failed call whose error has no message or no status code;
 *   - a successful engine call whose totals do not add up (a wrapped sum), or
 *     a fit that says it fits with a KV pool larger than the GPU;
 *   - a model that parses and validates but whose emitted YAML does not
 *     parse back, or parses back to a model that emits different YAML
 *     (what `kvplan import` promises);
 * plus everything ASan and UBSan report (overflow of signed or shift,
 * out-of-bounds, leaks) and libFuzzer's own timeout and memory limits.
 * Built only by `make fuzz` (clang -fsanitize=fuzzer,address,undefined).
 */
#ifndef KVPLAN_FUZZ_COMMON_H
#define KVPLAN_FUZZ_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/catalog.h"
#include "kvplan/deploy.h"
#include "kvplan/error.h"
#include "kvplan/format.h"
#include "kvplan/gpu.h"
#include "kvplan/kv.h"
#include "kvplan/model.h"
#include "kvplan/plan.h"
#include "kvplan/render.h"

/* Stop with a message libFuzzer shows above the stack. */
#define FUZZ_ASSERT(cond, ...)                                                     \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "fuzz: %s:%d: assertion '%s' failed: ", __FILE__,      \
                    __LINE__, #cond);                                              \
            fprintf(stderr, __VA_ARGS__);                                          \
            fputc('\n', stderr);                                                   \
            abort();                                                               \
        }                                                                          \
    } while (0)

/* A failed call must say why: a status and a non-empty, terminated message. */
static inline void fuzz_check_error(enum kvp_status st, const struct kvp_error *err)
{
    if (st == KVP_OK)
        return;
    FUZZ_ASSERT(err->code == st, "status %d but err.code %d (%s)", (int)st, (int)err->code, err->msg);
    FUZZ_ASSERT(memchr(err->msg, '\0', sizeof err->msg) != NULL, "unterminated message");
    FUZZ_ASSERT(err->msg[0] != '\0', "status %d with an empty message", (int)st);
}

/* Write size bytes of data to path (readers that take a path: plans, model
 * folders, baselines); abort on failure, which is the harness's, not kvplan's. */
static inline void fuzz_write(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s (run from the repository root after make fuzz-corpus)\n", path);
        abort();
    }
}

/* The shipped models and GPUs (models/, models/gpus.yaml), loaded once: plans resolve against them. */
static inline void fuzz_catalogs(struct kvp_catalog **models, struct kvp_gpu_catalog **gpus)
{
    static struct kvp_catalog *m;
    static struct kvp_gpu_catalog *g;
    struct kvp_error err = {0};

    if (!m && (kvp_catalog_load("models", &m, &err) != KVP_OK ||
               kvp_gpu_catalog_load("models/gpus.yaml", &g, &err) != KVP_OK)) {
        fprintf(stderr, "fuzz: run from the repository root: %s\n", err.msg);
        abort();
    }
    *models = m;
    *gpus = g;
}

/* A plan loaded from path, evaluated and rendered in every format: what
 * `kvplan check` does. Results must add up. */
static inline void fuzz_plan_file(const char *path)
{
    struct kvp_catalog *models;
    struct kvp_gpu_catalog *gpus;
    struct kvp_plan plan = {0};
    struct kvp_plan_report rep = {0};
    struct kvp_error err = {0};
    enum kvp_status st;

    fuzz_catalogs(&models, &gpus);
    st = kvp_plan_load(&plan, path, models, gpus, &err);
    fuzz_check_error(st, &err);
    if (st == KVP_OK) {
        st = kvp_plan_evaluate(&plan, &rep, &err);
        fuzz_check_error(st, &err);
        if (st == KVP_OK) {
            for (int o = KVP_OUT_TEXT; o <= KVP_OUT_JUNIT; o++) {
                struct kvp_buf b = {0};
                kvp_plan_render(&rep, (enum kvp_out)o, o == KVP_OUT_TEXT, &b);
                kvp_buf_release(&b);
            }
            FUZZ_ASSERT(rep.passed + rep.failed == rep.n, "%u passed + %u failed != %u results", rep.passed,
                        rep.failed, rep.n);
        }
    }
    kvp_plan_report_release(&rep);
    kvp_plan_release(&plan);
}

/* A few bytes of the input, to vary the query without a second input. */
static inline uint64_t fuzz_pick(const uint8_t *data, size_t size, size_t at)
{
    uint64_t v = 0;
    for (size_t i = 0; i < 8 && size; i++)
        v = v << 8 | data[(at + i) % size];
    return v;
}

static inline void fuzz_kv(const struct kvp_model *m, uint64_t context, uint64_t batch, const char *fmt)
{
    struct kvp_kv_query q = {.context = context, .batch = batch};
    struct kvp_kv_plan p;
    struct kvp_error err = {0};
    enum kvp_status st;

    if (kvp_format_parse(fmt, &q.k, &err) != KVP_OK)
        abort(); /* the formats below are all valid */
    q.v = q.k;
    st = kvp_kv_compute(m, &q, &p, &err);
    fuzz_check_error(st, &err);
    if (st != KVP_OK)
        return;
    FUZZ_ASSERT(p.kv_bytes == p.k_bytes + p.v_bytes && p.kv_bytes >= p.k_bytes, "kv sum wrapped");
    FUZZ_ASSERT(p.total_bytes == p.kv_bytes + p.state_bytes && p.total_bytes >= p.kv_bytes, "total wrapped");
    FUZZ_ASSERT(p.kv_bytes_per_token == p.k_bytes_per_token + p.v_bytes_per_token, "per-token sum wrong");
}

static inline void fuzz_weights(const struct kvp_model *m, const char *fmt)
{
    struct kvp_wstore f;
    struct kvp_weights w;
    struct kvp_error err = {0};
    enum kvp_status st;

    if (kvp_wstore_parse(fmt, false, &f, &err) != KVP_OK)
        abort();
    st = kvp_weights_compute(m, &f, &w, &err);
    fuzz_check_error(st, &err);
    if (st == KVP_OK)
        FUZZ_ASSERT(w.active_params <= w.params && w.active_bytes <= w.bytes,
                    "active %llu of %llu params: an idle-expert count wrapped",
                    (unsigned long long)w.active_params, (unsigned long long)w.params);
}

static inline void fuzz_fit(const struct kvp_model *m, enum kvp_engine_id e, uint64_t context)
{
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};
    enum kvp_status st;

    kvp_deploy_init(&d, e, m);
    d.gpu_memory = 85899345920ull; /* 80 GiB */
    d.util = e == KVP_ENGINE_VLLM ? 0.9 : 0.0;
    d.context = context;
    d.concurrency = 4;
    st = kvp_fit_compute(m, &d, &f, &err);
    fuzz_check_error(st, &err);
    if (st == KVP_OK)
        FUZZ_ASSERT(!f.fits || f.kv_pool_bytes <= d.gpu_memory || e == KVP_ENGINE_LLAMACPP,
                    "%s says it fits with a pool of %llu bytes on a GPU of %llu", kvp_engine_info(e)->name,
                    (unsigned long long)f.kv_pool_bytes, (unsigned long long)d.gpu_memory);
}

/* emit -> parse -> emit must reach a fixed point. */
static inline void fuzz_roundtrip(const struct kvp_model *m)
{
    struct kvp_error err = {0};
    struct kvp_model *back;
    char *y1 = NULL, *y2 = NULL;
    enum kvp_status st = kvp_model_emit_yaml(m, &y1, &err);

    fuzz_check_error(st, &err);
    if (st != KVP_OK)
        return;
    if (!(back = malloc(sizeof *back)))
        abort();
    kvp_model_init(back);
    st = kvp_model_parse_yaml(y1, strlen(y1), "emitted.yaml", back, &err);
    FUZZ_ASSERT(st == KVP_OK, "the emitted YAML does not parse back: %s:%u:%u: %s\n%s", err.file, err.line,
                err.col, err.msg, y1);
    st = kvp_model_emit_yaml(back, &y2, &err);
    FUZZ_ASSERT(st == KVP_OK, "the re-read model does not emit: %s", err.msg);
    FUZZ_ASSERT(strcmp(y1, y2) == 0, "emit(parse(emit(m))) differs:\n%s\n----\n%s", y1, y2);
    free(y1);
    free(y2);
    free(back);
}

#ifdef KVP_FUZZ_SKIP_KNOWN
/* Exploration builds only (make fuzz never defines it): skip the shapes of
 * gaps already reported (docs/robustness.md), so a long run finds new ones
 * instead of the same hang again. Mirrors the bounds proposed there. */
static inline bool fuzz_known_gap(const struct kvp_model *m)
{
    const uint32_t big = 1u << 20;
    if (m->hidden > big || m->intermediate > big || m->vocab > big || m->n_experts > (1u << 16) ||
        m->n_shared_experts > (1u << 16) || m->expert_intermediate > big || m->shared_intermediate > big ||
        m->learned_positions > (1u << 24))
        return true;
    for (uint32_t i = 0; i < m->n_specs; i++) {
        const struct kvp_layer_spec *s = &m->specs[i];
        const struct kvp_recurrent *r = &s->rec;
        if (s->n_heads > big || s->n_kv_heads > big || s->head_dim_k > big || s->head_dim_v > big ||
            s->kv_lora_rank > big || s->q_lora_rank > big || r->d_inner > big || r->d_state > big ||
            r->d_conv > big || r->dt_rank > big || r->n_groups > big || r->n_heads > big || r->n_k_heads > big ||
            r->k_head_dim > big || r->v_head_dim > big)
            return true;
    }
    return false;
}
#endif

/* The engine on a model its parser accepted. */
static inline void fuzz_engine(const struct kvp_model *m, const uint8_t *data, size_t size)
{
    struct kvp_error err = {0};
    enum kvp_status st = kvp_model_validate(m, &err);
    uint64_t ctx, pick = fuzz_pick(data, size, size / 2);

    fuzz_check_error(st, &err);
    if (st != KVP_OK)
        return;
#ifdef KVP_FUZZ_SKIP_KNOWN
    if (fuzz_known_gap(m))
        return;
#endif
    ctx = m->max_context;
    fuzz_kv(m, ctx, 1, "f16");
    fuzz_kv(m, 1 + pick % (1u << 24), 1 + (pick >> 40) % 4096, "bf16");
    fuzz_kv(m, ctx, 64, "q4_0");
    fuzz_kv(m, 1 + pick % 100000, 3, "int4:group=64:axis=channel:residual=128");
    fuzz_kv(m, ctx, 1, "int2:outliers=0.01");
    fuzz_weights(m, "bf16");
    fuzz_weights(m, "q4_0");
    fuzz_weights(m, "q4_k_m"); /* llama.cpp's mixture, tensor by tensor (gguf_mix.c) */
    fuzz_fit(m, KVP_ENGINE_VLLM, ctx > (1u << 20) ? (1u << 20) : ctx);
    fuzz_fit(m, KVP_ENGINE_LLAMACPP, ctx > 4096 ? 4096 : ctx);
    fuzz_fit(m, KVP_ENGINE_SGLANG, 1 + pick % 65536);
    fuzz_fit(m, KVP_ENGINE_TRTLLM, 1 + pick % 65536);
    fuzz_roundtrip(m);
}

#endif
