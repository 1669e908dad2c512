/* chart.h -- SVG charts of memory against context: weights and KV cache
 * stacked, one line per series (a model in a cache format), the GPU's
 * capacity as a horizontal line, and under it the part the engine may use
 * (vLLM's util of it) where a deployment gives one. The library writes the SVG text itself into
 * a kvp_buf; no image library.
 *
 *     struct kvp_chart *c = calloc(1, sizeof *c);
 *     kvp_chart_init(c, "llama-3.1-8b", "batch 1, ideal engine");
 *     uint64_t ctx[] = {1024, 4096, 32768, 131072};
 *     kvp_chart_set_x(c, ctx, 4, &err);
 *     struct kvp_format f = kvp_format_plain(KVP_DTYPE_BF16);
 *     kvp_chart_add(c, m, &f, "weights + KV in bf16", &err);  // at each context
 *     c->capacity = 84929347584; snprintf(c->capacity_label, ..., "h100-sxm");
 *     struct kvp_buf b = {0};
 *     if (kvp_chart_svg(c, &b, &err) == KVP_OK) fwrite(b.data, 1, b.len, f);
 *     kvp_buf_release(&b); free(c);
 *
 * Axes: context on log2 (each doubling one step), memory on log2 bytes with
 * ticks labelled in IEC units, so a 4 KiB-per-token model and a 4 MiB one
 * read on one chart. Series whose `group` is equal share a weights line;
 * when every series shares one, the weights are drawn as a band under the
 * curves. The output is deterministic: same input, same bytes.
 * A struct kvp_chart is a plain value the caller owns.
 */
#ifndef KVPLAN_CHART_H
#define KVPLAN_CHART_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/deploy.h"
#include "kvplan/error.h"
#include "kvplan/format.h"
#include "kvplan/model.h"
#include "kvplan/render.h"

#define KVP_CHART_MAX_POINTS 64
#define KVP_CHART_MAX_SERIES 16
#define KVP_CHART_TEXT 192

struct kvp_chart_series {
    char label[KVP_CHART_TEXT];        /* the legend's text: "llama-3.1-8b: weights + KV in bf16" */
    char model[KVP_NAME_MAX];          /* the model's name */
    uint32_t group;                    /* series of one model share a group (its weights line) */
    uint64_t weights;                  /* bytes, constant in the context */
    uint32_t n_points;                 /* the x up to the model's max context: drawn, the rest not */
    uint64_t kv[KVP_CHART_MAX_POINTS]; /* KV cache + recurrent state bytes at each x < n_points
                                        * (kvp_chart_add_fit: start-up reserve + KV required, per GPU) */
    uint64_t reserve[KVP_CHART_MAX_POINTS]; /* kvp_chart_add_fit: the start-up reserve in kv[] (activations,
                                             * non-torch, CUDA graphs); 0 otherwise */
    uint64_t max_context;              /* kvp_chart_add_fit: the longest context `kvplan fit` gives
                                        * for c->batch requests (0: none fits), drawn as a vertical
                                        * line where it falls on the x axis; 0 otherwise */
    double max_concurrency;            /* kvp_chart_add_fit: requests of the deployment's context that fit */
};

struct kvp_chart {
    char title[KVP_CHART_TEXT];
    char subtitle[KVP_CHART_TEXT];
    uint32_t n_x;
    uint64_t x[KVP_CHART_MAX_POINTS]; /* contexts in tokens, strictly increasing, >= 1 */
    uint32_t n_series;
    struct kvp_chart_series series[KVP_CHART_MAX_SERIES];
    uint64_t batch;                      /* sequences kvp_chart_add sizes the KV for; 0 = 1 */
    uint64_t capacity;                   /* bytes; 0 = no capacity line */
    char capacity_label[KVP_CHART_TEXT]; /* "1 x h100-sxm" */
    uint64_t usable;                     /* bytes of the capacity the engine may use, drawn as the line the
                                          * curves stop at, the rest a band above it; 0 = all of it.
                                          * kvp_chart_add_fit sets it from the first deployment that has a
                                          * memory fraction: weights + reserve + KV budget + state pool
                                          * (vLLM: util x GPU memory) */
    double util;                         /* that deployment's memory fraction, for the legend */
};

/* Zero c and set its title and subtitle. */
KVP_API void kvp_chart_init(struct kvp_chart *c, const char *title, const char *subtitle);

/* The contexts: 1..KVP_CHART_MAX_POINTS of them, strictly increasing, >= 1. */
KVP_API enum kvp_status kvp_chart_set_x(struct kvp_chart *c, const uint64_t *x, uint32_t n, struct kvp_error *err);

/* Append a series for model m with K and V in format f, c->batch sequences
 * (0 = 1), ideal engine: weights as the checkpoint stores them plus KV (and recurrent state) at each
 * x. The group is the model's: series of the same model name share one.
 * Errors: too many series, a format the model's head dims do not take. */
KVP_API enum kvp_status kvp_chart_add(struct kvp_chart *c, const struct kvp_model *m, const struct kvp_format *f,
                              const char *label, struct kvp_error *err);

/* Append a series for model m under deployment d (deploy.h; settings.h's
 * kvp_settings_apply gives one as `kvplan fit` does), per GPU: the weights
 * on one GPU, and at each x the engine's start-up reserve plus the KV that
 * c->batch requests of x tokens need under its rules (kvp_fit_compute with
 * d's context and concurrency replaced). max_context and max_concurrency are
 * kvp_fit_compute's for d itself with c->batch requests. Errors: as
 * kvp_chart_add, and what kvp_fit_compute refuses. */
KVP_API enum kvp_status kvp_chart_add_fit(struct kvp_chart *c, const struct kvp_model *m, const struct kvp_deploy *d,
                                  const char *label, struct kvp_error *err);

/* Render c as a standalone SVG document into b. Errors: no x or no series
 * (KVP_ERR_USAGE), out of memory. */
KVP_API enum kvp_status kvp_chart_svg(const struct kvp_chart *c, struct kvp_buf *b, struct kvp_error *err);

#endif
