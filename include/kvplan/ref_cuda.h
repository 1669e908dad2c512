/* ref_cuda.h -- the reference decoder on an NVIDIA GPU (make CUDA=1), and the
 * host-side arithmetic that checks it.
 *
 * The CUDA decoder runs the same model as the CPU decoder (ref.h): the host
 * takes the CPU decoder's own weights for the same seed (kvp_cuda_weights_new
 * builds a kvp_ref_model), and copies them to the device. It runs
 * attention layers (full, sliding, chunked; MHA/GQA/MQA) with SwiGLU MLPs over
 * a KV cache that is contiguous (static: one allocation per layer, sequence
 * and K|V, a ring for windows) or paged (blocks of `block` tokens allocated on
 * demand), in f32, f16, bf16, fp8 (e4m3, e5m2) or int8/int4/int2 grouped along
 * the token (axis=token, no residual, no outliers). Every cache byte goes
 * through a counting cudaMalloc wrapper, so the count can be compared with
 * kvp_kv_compute, and the free-memory delta (cudaMemGetInfo) with the count
 * rounded by the driver's allocation granularity (struct kvp_cuda_gran).
 *
 *     struct kvp_cuda_opts o = {.ref = {.seed = 1, .hidden = 64, ...}, .policy = KVP_REF_STATIC,
 *                               .context = 256, .batch = 1, .block = 16, .k = fk, .v = fv};
 *     struct kvp_cuda_result r;
 *     if (kvp_cuda_validate(model, &o, &r, &err) != KVP_OK) ...   // CUDA=1 builds only
 *     // r.counted_bytes == kvp_kv_compute(...).total_bytes; r.delta_lo <= r.memgetinfo_delta <= r.delta_hi
 *
 * Without CUDA only the host side exists (weights, the fp32 host forward, the
 * granularity arithmetic); kvp_cuda_available() says which build this is.
 * Ownership: kvp_cuda_weights_new's result is the caller's, freed with
 * kvp_cuda_weights_free (NULL is a no-op). Nothing here prints or exits.
 */
#ifndef KVPLAN_REF_CUDA_H
#define KVPLAN_REF_CUDA_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"
#include "kvplan/format.h"
#include "kvplan/model.h"
#include "kvplan/ref.h"

#ifdef __cplusplus
extern "C" {
#endif

/* true in a CUDA=1 build (KVP_CUDA defined), false otherwise. */
KVP_API bool kvp_cuda_available(void);

/* ---- the driver's allocation granularity (a model) --------------------- */

/* HYPOTHESIS, to verify on a GPU (kvp_cuda_measure_gran measures it): the
 * driver maps device memory in pages of `page` bytes (2 MiB); a cudaMalloc
 * larger than `small_max` gets its own pages (rounded up to whole pages);
 * smaller ones are sub-allocated, each aligned to `small_align` bytes, from
 * shared pages, so they move the free-memory figure only when a new page is
 * mapped. */
struct kvp_cuda_gran {
    uint64_t page;        /* bytes of one mapped page (2 MiB) */
    uint64_t small_max;   /* largest sub-allocated request, bytes (1 MiB) */
    uint64_t small_align; /* alignment of a sub-allocation, bytes (512) */
};

/* The hypothesis above: 2 MiB, 1 MiB, 512 B. */
KVP_API struct kvp_cuda_gran kvp_cuda_gran_default(void);

/* Bytes that one request of `bytes` occupies: whole pages above small_max,
 * small_align multiples at or below. Errors: a zero page or alignment, overflow. */
KVP_API enum kvp_status kvp_cuda_gran_round(const struct kvp_cuda_gran *g, uint64_t bytes, uint64_t *out,
                                    struct kvp_error *err);

/* Bounds on the free-memory delta of n live requests sizes[0..n): large ones
 * add exactly their pages; the sub-allocated ones S (rounded) add between
 * (ceil(S/page) - 1) pages (a partly used page was already mapped) and
 * ceil(S/page) + 1 pages (their sub-allocations straddle one more page). */
KVP_API enum kvp_status kvp_cuda_gran_bounds(const struct kvp_cuda_gran *g, const uint64_t *sizes, uint64_t n,
                                     uint64_t *lo, uint64_t *hi, struct kvp_error *err);

/* Fit a model to measured (request, free-memory delta) pairs, requests
 * ascending: page = the smallest positive delta seen for a request above
 * 1 MiB, small_max = the largest request whose delta was 0 (or below one
 * page), small_align kept from the hypothesis. Errors: no positive delta. */
KVP_API enum kvp_status kvp_cuda_gran_fit(const uint64_t *req, const uint64_t *delta, uint32_t n,
                                          struct kvp_cuda_gran *out, struct kvp_error *err);

/* ---- the model as the CUDA decoder runs it -------------------------------- */

/* KVP_OK when every layer of m is full, sliding or chunked attention (or has
 * no mixer); otherwise KVP_ERR_UNSUPPORTED naming the first other layer. */
KVP_API enum kvp_status kvp_cuda_model_ok(const struct kvp_model *m, struct kvp_error *err);

/* m scaled by o as the decoders run it (kvp_ref_model_shape without building
 * weights): hidden, MLP and vocab replaced, query heads per KV head capped. */
KVP_API void kvp_cuda_model_as_run(const struct kvp_model *m, const struct kvp_ref_opts *o, struct kvp_model *out);

struct kvp_gpu;
struct kvp_gpu_catalog;
/* The catalog GPU of a device named `device` (cudaGetDeviceProperties, e.g.
 * "NVIDIA H100 80GB HBM3") with `memory` bytes: an id found whole in the
 * name (words joined by '-', case ignored) beats an id's first word ("h100"),
 * ties go to the closest memory, then to file order. NULL when none matches. */
KVP_API const struct kvp_gpu *kvp_cuda_gpu_guess(const struct kvp_gpu_catalog *c, const char *device, uint64_t memory);

/* ---- the model's weights on the host ------------------------------------ */

/* One layer as run; weight offsets in floats into kvp_cuda_weights.w,
 * UINT64_MAX where the layer has none. */
struct kvp_cuda_layer {
    enum kvp_layer_kind kind;      /* full, sliding, chunked or none */
    uint32_t hq, hkv, dk, dv;      /* query heads, KV heads, K/Q and V head dims */
    uint64_t window;               /* sliding window or chunk, tokens; 0 = all */
    uint64_t attn_norm, wq, wk, wv, wo;   /* (H,) (hq*dk,H) (hkv*dk,H) (hkv*dv,H) (H,hq*dv) */
    uint64_t ffn_norm, w1, w3, w2;        /* (H,) (I,H) (I,H) (H,I) */
};

struct kvp_cuda_weights {
    uint32_t hidden, inter, vocab, n_layers;
    uint64_t embed, out_norm, lm_head; /* (V,H) (H,) (V,H) offsets */
    struct kvp_cuda_layer *layer;      /* (n_layers,) layers of a spec share weights */
    float *w;                          /* every weight, n floats */
    uint64_t n;
};

/* The CPU decoder's weights for m under o (ref.h kvp_ref_model_new's own).
 * Errors: a layer kind the CUDA decoder does not run (MLA, shared, recurrent:
 * the message names it), a missing hidden/MLP/vocab size, no memory. */
KVP_API enum kvp_status kvp_cuda_weights_new(const struct kvp_model *m, const struct kvp_ref_opts *o,
                                     struct kvp_cuda_weights **out, struct kvp_error *err);
KVP_API void kvp_cuda_weights_free(struct kvp_cuda_weights *w);

/* Logits (vocab,) of the last of n tokens by the float32 recurrence the
 * kernels implement, on the host, without a cache (tests the weights and the
 * math against kvp_ref_recompute). Errors: a token outside the vocabulary, no memory. */
KVP_API enum kvp_status kvp_cuda_host_logits(const struct kvp_cuda_weights *w, const uint32_t *tokens, uint64_t n,
                                     float *logits, struct kvp_error *err);

/* Whether the CUDA cache stores format f: plain f32/f16/bf16/fp8, or a grouped
 * int with axis=token, no residual and no outliers. false: *why says why. */
KVP_API bool kvp_cuda_format_ok(const struct kvp_format *f, const char **why);

/* Logits agreement tolerance, relative to the largest |logit| of the CPU
 * decoder: 1e-3 when both caches are f32/f16/bf16 (only the summation order
 * differs), 2e-2 with fp8 or int codes (a value on a rounding boundary may
 * land one code apart). A stated bound, to confirm on a GPU. */
KVP_API double kvp_cuda_logit_tolerance(const struct kvp_format *k, const struct kvp_format *v);

/* ---- on the device (CUDA=1 builds; elsewhere KVP_ERR_UNSUPPORTED) ------- */

struct kvp_cuda_opts {
    struct kvp_ref_opts ref;     /* seed and scaling, as for the CPU decoder */
    enum kvp_ref_policy policy;  /* static or paged */
    uint64_t context;            /* tokens per sequence */
    uint32_t batch;              /* sequences */
    uint32_t block;              /* paged: tokens per block */
    struct kvp_format k, v;
    bool compare;                /* also run the CPU decoder and compare logits */
};

struct kvp_cuda_result {
    char device[256];            /* cudaGetDeviceProperties name */
    uint64_t predicted_bytes;    /* kvp_kv_compute total (paged: block-rounded) */
    uint64_t counted_k, counted_v, counted_bytes; /* bytes passed to cudaMalloc for the cache */
    uint64_t allocs;             /* cache allocations alive at the end */
    uint64_t memgetinfo_delta;   /* free before the cache - free after the run, bytes */
    uint64_t delta_lo, delta_hi; /* kvp_cuda_gran_bounds of the live allocations */
    struct kvp_cuda_gran gran;   /* as measured on this device */
    double max_abs_err;          /* max |gpu - cpu| over the last step's logits of every sequence */
    double max_abs_logit;        /* max |cpu| */
    double tolerance;            /* kvp_cuda_logit_tolerance */
    bool compared, logits_ok, bytes_ok, delta_ok;
    double seconds;              /* GPU decode wall time */
};

KVP_API enum kvp_status kvp_cuda_validate(const struct kvp_model *m, const struct kvp_cuda_opts *o,
                                          struct kvp_cuda_result *r, struct kvp_error *err);

/* Name and total memory (bytes) of device 0. */
KVP_API enum kvp_status kvp_cuda_device(char *name, uint64_t n, uint64_t *memory, struct kvp_error *err);

/* Measure the granularity: cudaMalloc sizes 1 B .. 4 MiB one at a time and
 * read the cudaMemGetInfo delta of each (then kvp_cuda_gran_fit). */
KVP_API enum kvp_status kvp_cuda_measure_gran(struct kvp_cuda_gran *out, struct kvp_error *err);

/* Device-to-device copy bandwidth of a 1 GiB copy kernel, bytes/s (read + write). */
KVP_API enum kvp_status kvp_cuda_copy_bandwidth(double *bytes_per_s, struct kvp_error *err);

struct kvp_cuda_bench {
    uint64_t context;
    uint32_t batch;
    uint32_t steps;              /* decode steps timed (after one warm-up) */
    double seconds;
    double tokens_per_s;         /* batch * steps / seconds */
    bool skipped;                /* would not fit in free memory */
};

/* Decode tokens/s at every (context, batch) of contexts x batches, into
 * out[c * n_batches + b]: the weights go to the device once; for each point
 * the cache is filled to `context` tokens with synthetic rows (no prefill
 * compute), one step warms up, then steps - 1 decode steps of the whole
 * batch are timed with CUDA events. A point whose cache would not fit in
 * nine tenths of the free memory is skipped. Errors: steps < 2, CUDA errors. */
KVP_API enum kvp_status kvp_cuda_bench(const struct kvp_model *m, const struct kvp_cuda_opts *o,
                                       const uint64_t *contexts, uint32_t n_contexts, const uint32_t *batches,
                                       uint32_t n_batches, uint32_t steps, struct kvp_cuda_bench *out,
                                       struct kvp_error *err);

#ifdef __cplusplus
}
#endif

#endif
