/* explain.h -- the derivation of every figure, with values substituted, so
 * a user can check it by hand (`kvplan size --explain`).
 *
 *     struct kvp_buf b = {0};
 *     kvp_explain_kv(model, &query, &plan, false, &b);
 *     kvp_explain_weights(model, &weights, false, &b);
 *
 * Appends text to b; the results passed in must come from the engine for the
 * same model and query.
 */
#ifndef KVPLAN_EXPLAIN_H
#define KVPLAN_EXPLAIN_H

#include <stdbool.h>

#include "kvplan/api.h"
#include "kvplan/deploy.h"
#include "kvplan/kv.h"
#include "kvplan/render.h"

KVP_API void kvp_explain_kv(const struct kvp_model *m, const struct kvp_kv_query *q, const struct kvp_kv_plan *p,
                    bool si, struct kvp_buf *b);
KVP_API void kvp_explain_weights(const struct kvp_model *m, const struct kvp_weights *w, bool si, struct kvp_buf *b);

/* One line for the stored split of the weights, e.g. "mxfp4 (experts) 56.99 GiB
 * + bf16 (the rest) 3.78 GiB [quantization_config (mxfp4)]"; one stored form
 * alone: "bf16". Returns buf. */
KVP_API const char *kvp_weights_split(const struct kvp_weights *w, bool si, char *buf, uint32_t n);

/* "weights": {"source", "file_type", "parts": [{"dtype", "classes", "params", "bytes"}]}
 * into an open JSON object. */
KVP_API void kvp_json_weights(struct kvp_json *j, const struct kvp_model *m, const struct kvp_weights *w);

/* "warnings": what the loader assumed or could not apply, into an open JSON object. */
KVP_API void kvp_json_model_warnings(struct kvp_json *j, const struct kvp_model *m);

/* The lines the engine itself would log for this deployment (vLLM's
 * capacity lines, llama.cpp's KV buffer and cache lines), one per line;
 * nothing for engines kvplan has no log format of. */
KVP_API void kvp_fit_log(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                         struct kvp_buf *b);

/* The engine's formula for each figure of f, with the values substituted. */
KVP_API void kvp_explain_fit(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f, bool si,
                     struct kvp_buf *b);

/* How kvp_fit_limits found each figure of l: the bisection's range and its edge (the memory left at the
 * longest context, short one token past it), which limit binds and the RoPE factor past the model's,
 * llama.cpp's -ngl and --n-cpu-moe answers with their host memory. */
KVP_API void kvp_explain_limits(const struct kvp_model *m, const struct kvp_deploy *d,
                                const struct kvp_fit_limits *l, bool si, struct kvp_buf *b);

#endif
