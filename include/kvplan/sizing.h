/* sizing.h -- sizing tables: KV-cache bytes of models over a grid of
 * contexts, batches and cache formats and, with a GPU, what fits; rendered
 * as text, Markdown, CSV, JSON or HTML into a kvp_buf.
 *
 * This is the seeds' ledger ("where the memory goes") for many models at once:
 * each model gets a header (layers, weights, KV per token) and one table per
 * batch, rows = contexts, columns = cache formats. One unit (B, KiB, MiB,
 * GiB, TiB; or SI) is chosen per table from its largest cell and stated in
 * its header; CSV and JSON carry exact bytes.
 *
 *     const struct kvp_model *models[] = {m};
 *     uint64_t ctx[] = {4096, 32768};
 *     uint64_t batch[] = {1};
 *     struct kvp_format fmt[] = {kvp_format_plain(KVP_DTYPE_BF16)};
 *     struct kvp_sizing s = {.models = models, .n_models = 1, .contexts = ctx, .n_contexts = 2,
 *                            .batches = batch, .n_batches = 1, .formats = fmt, .n_formats = 1};
 *     struct kvp_buf b = {0};
 *     if (kvp_sizing_render(&s, KVP_OUT_MD, &b, &err) != KVP_OK) ...
 *     fwrite(b.data, 1, b.len, stdout);
 *     kvp_buf_release(&b);
 *
 * Without a deployment the bytes are the ideal engine's (kvp_kv_compute: KV
 * caches plus recurrent state, whole model). With one (`deploy`, settings as
 * `kvplan fit` takes them: settings.h) every cell is sized as `kvplan fit`
 * sizes it: the settings applied to the model (the engine's defaults, vLLM's
 * default release when none is named), then K and V, context and concurrency
 * taken from the cell's format, context and batch. The bytes shown are then
 * the engine's per GPU (KV required, weights per GPU), with the maximum
 * concurrency and whether the cell fits. A cell past the model's maximum
 * context, or in a cache format the engine does not take, is marked and
 * left unsized with the reason (the engine would refuse it):
 *
 *     struct kvp_settings d;
 *     kvp_settings_clear(&d);
 *     kvp_settings_put(&d, "gpu", "h100", &err);
 *     kvp_settings_put(&d, "tp", "2", &err);
 *     s.deploy = &d; s.gpus = gpu_catalog;
 * The caller owns everything it passes; nothing is kept after the call.
 */
#ifndef KVPLAN_SIZING_H
#define KVPLAN_SIZING_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/deploy.h"
#include "kvplan/error.h"
#include "kvplan/format.h"
#include "kvplan/model.h"
#include "kvplan/render.h"
#include "kvplan/settings.h"

/* "text", "md", "csv", "json", "html"; false if unknown. */
KVP_API bool kvp_table_out_from_name(const char *s, enum kvp_out *out);

/* A display unit: its name and how many bytes one of it is. */
struct kvp_unit {
    const char *name; /* "GiB" */
    uint64_t bytes;   /* 1073741824 */
};

/* The largest IEC (or SI) unit not larger than max_bytes (B for 0): the
 * biggest figure then shows as at least 1. */
KVP_API struct kvp_unit kvp_unit_for(uint64_t max_bytes, bool si);

#define KVP_SIZING_MAX_AXIS 64 /* contexts, batches, formats each */
#define KVP_SIZING_MAX_GPUS 8  /* the GPU axis */
#define KVP_SIZING_WHY 200

struct kvp_sizing {
    const struct kvp_model *const *models; /* validated models */
    uint32_t n_models;
    const uint64_t *contexts; /* tokens per sequence, rows */
    uint32_t n_contexts;
    const uint64_t *batches; /* sequences */
    uint32_t n_batches;
    const struct kvp_format *formats; /* cache formats (K and V alike), columns */
    uint32_t n_formats;
    bool si; /* SI units (GB) instead of IEC (GiB) */
    /* deployment, optional (NULL: ideal engine, whole model). Its context,
     * concurrency and cache formats are the cell's; it must name a GPU or its
     * memory (gpu, gpu_memory or kv_cache_memory). */
    const struct kvp_settings *deploy;
    const struct kvp_gpu_catalog *gpus; /* for deploy's "gpu" row (NULL when it has none) */
    /* with deploy, optional: a GPU axis, catalog names each taken in turn as
     * deploy's "gpu" (n_gpu_ids 0: deploy's own GPU, one column group) */
    const char *const *gpu_ids;
    uint32_t n_gpu_ids;
    /* one table for all models (rows = models, columns = every GPU x context
     * x batch x format; the axes of one value named in the caption): max
     * concurrency with a deployment, KV bytes without */
    bool combined;
};

/* One cell of the grid, computed. */
struct kvp_sizing_cell {
    uint64_t kv_bytes;     /* attention caches: ideal whole model, or the engine's KV required per GPU */
    uint64_t state_bytes;  /* recurrent state (ideal; 0 with a deployment) */
    uint64_t weight_bytes; /* ideal: whole model as stored; deployment: per GPU */
    double max_concurrency; /* requests of this context that fit (deployment only) */
    bool fits;             /* weights + reserve + batch requests fit (deployment only) */
    bool beyond;           /* deployment: the context is past the model's max (not sized) */
    bool unsupported;      /* deployment: the engine refuses the cell's cache format or shape (not sized) */
    char why[KVP_SIZING_WHY]; /* beyond or unsupported: the reason, in the engine's words where it has them */
};

/* The deployment s gives model mi on GPU gi of the GPU axis (0 without
 * one), as kvp_settings_apply gives it (before a cell's context,
 * concurrency and formats): for headers and for callers checking the
 * settings once. *gpu is the named GPU or NULL. Errors: as
 * kvp_settings_apply, and KVP_ERR_USAGE when no GPU memory is given. */
KVP_API enum kvp_status kvp_sizing_deploy(const struct kvp_sizing *s, uint32_t mi, uint32_t gi, struct kvp_deploy *d,
                                          const struct kvp_gpu **gpu, struct kvp_error *err);

/* Compute one cell: model mi, GPU gi (0 without a GPU axis), context ci,
 * batch bi, format fi. Errors: a format a head dim does not take, settings
 * the engine rejects, overflow. */
KVP_API enum kvp_status kvp_sizing_cell(const struct kvp_sizing *s, uint32_t mi, uint32_t gi, uint32_t ci, uint32_t bi,
                                        uint32_t fi, struct kvp_sizing_cell *out, struct kvp_error *err);

/* Render the whole grid in fmt, appending to b. Errors as kvp_sizing_cell,
 * plus an empty axis or one longer than KVP_SIZING_MAX_AXIS (KVP_ERR_USAGE;
 * a GPU axis without a deployment, or of more than KVP_SIZING_MAX_GPUS),
 * and KVP_ERR_NOMEM when b ran out of memory. */
KVP_API enum kvp_status kvp_sizing_render(const struct kvp_sizing *s, enum kvp_out fmt, struct kvp_buf *b,
                                  struct kvp_error *err);

/* Parse comma-separated lists: counts ("1k,4k,128k", kvp_parse_count each)
 * and cache formats ("bf16,fp8,q4_0", kvp_format_parse each), at most max
 * items into out, *n set to how many. Errors: an empty item, a bad item
 * (quoted), more than max. */
KVP_API enum kvp_status kvp_parse_count_list(const char *s, uint64_t *out, uint32_t max, uint32_t *n,
                                             struct kvp_error *err);
KVP_API enum kvp_status kvp_parse_format_list(const char *s, struct kvp_format *out, uint32_t max, uint32_t *n,
                                      struct kvp_error *err);

/* "4k" for 4096, "128k", "1M", else the plain count: how contexts are labelled. */
KVP_API const char *kvp_tokens_label(uint64_t tokens, char *buf, uint32_t n);

#endif
