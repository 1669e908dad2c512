/* explain_log.h -- an engine's start-up log beside kvplan's fit for the
 * same settings: each logged figure with kvplan's, the difference, the
 * term that explains it, and what to change to get more KV cache.
 *
 *     struct kvp_log log;                       // kvp_log_parse (log.h)
 *     struct kvp_log_explain *x = malloc(sizeof *x);
 *     if (kvp_log_explain(&log, &log.settings, model, gpus, x, &err) != KVP_OK) ...
 *     kvp_log_explain_render(&log, model, x, KVP_OUT_TEXT, false, &b);
 *
 * The settings are the log's (log.settings) with whatever the caller
 * overrides; the ones neither gives are listed as assumed. The fit uses no
 * logged figure: the weights are computed and the reserve is estimated, as
 * `kvplan fit` does, so each difference is kvplan's error on that term. A
 * second fit ("replay") takes the logged KV budget as given, so the token,
 * block and concurrency figures are checked apart from the budget. The
 * caller owns x; nothing is allocated but the rendered text in b.
 */
#ifndef KVPLAN_EXPLAIN_LOG_H
#define KVPLAN_EXPLAIN_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/deploy.h"
#include "kvplan/gpu.h"
#include "kvplan/log.h"
#include "kvplan/render.h"
#include "kvplan/settings.h"

struct kvp_log_row {
    enum kvp_log_fig fig;
    double logged;   /* the log's figure (valid when line) */
    uint32_t line;   /* 0 = not logged */
    double kvplan;   /* kvplan's figure, same unit */
    double replay;   /* kvplan's with the logged KV budget given (tokens, blocks, concurrency); < 0: none */
    char term[200];  /* what the figure is made of, or what differs */
};

struct kvp_log_change {
    char what[200];      /* "activation peak 9.40 GiB from max_num_batched_tokens 16384: set 8192" */
    int64_t kv_bytes;    /* more KV budget per GPU (llama.cpp: room for KV) */
    int64_t kv_tokens;   /* more tokens (0 for llama.cpp, whose cache is what -c asks) */
};

#define KVP_LOG_CHANGES 4

struct kvp_log_explain {
    struct kvp_deploy d;
    const struct kvp_gpu *gpu;
    double host_weights; /* the log's weights on the host (llama.cpp), bytes */
    struct kvp_fit fit;
    bool have_replay;
    struct kvp_fit replay;
    struct kvp_log_row row[KVP_LOG_FIG_COUNT];
    uint32_t n_rows;
    char assumed[1024];  /* "kv_dtype bf16 (the model's), block_size 16 (the engine's default), ..." */
    struct kvp_log_change change[KVP_LOG_CHANGES];
    uint32_t n_changes;
};

/* Fit s (the log's settings, overridden as the caller likes) for model m
 * and compare with log's figures. Errors: those of kvp_settings_apply
 * (the setting's key prefixed) and kvp_fit_compute; no GPU memory in the
 * log nor in s (KVP_ERR_USAGE, saying what to pass). */
KVP_API enum kvp_status kvp_log_explain(const struct kvp_log *log, const struct kvp_settings *s,
                                        const struct kvp_model *m, const struct kvp_gpu_catalog *gpus,
                                        struct kvp_log_explain *x, struct kvp_error *err);

/* The comparison as text, md or json into b (name: the log's file). */
KVP_API void kvp_log_explain_render(const struct kvp_log *log, const char *name, const struct kvp_model *m,
                                    const struct kvp_log_explain *x, enum kvp_out fmt, bool si, struct kvp_buf *b);

#endif
