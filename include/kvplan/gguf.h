/* gguf.h -- write a model's shape as a GGUF v3 file that llama.cpp loads.
 *
 * The file has the model's real geometry (layers, heads, head dims, windows,
 * MLA ranks, vocab, MLP width) under one of llama.cpp's architectures, and
 * either seeded random weights (f32, small models: llama.cpp can decode with
 * them) or no weights at all: a sparse file whose header and tensor infos
 * are written and whose data is a hole up to the full length, which is all
 * llama.cpp needs to plan its memory without allocating (no_alloc with
 * load_mode NONE). tests/oracle uses both to check kvplan against llama.cpp.
 *
 *     struct kvp_gguf_options o = {0};
 *     o.sparse = true;                 // real-size shape, ~100 KB on disk
 *     if (kvp_gguf_write(model, "build/llama-3.1-8b.gguf", &o, &err) != KVP_OK) ...
 *     // o.arch == "llama", o.n_tensors == 291, o.file_bytes == 16060522784
 *
 * Architectures: "llama" (full attention, MHA/GQA/MQA, optional q/k/v
 * biases), "gemma3" (full and sliding layers, q/k norms, 4 norms a layer) and
 * "deepseek2" (MLA). A shape the architecture cannot express (a LayerNorm, a
 * sliding layer under llama, MoE other than llama's Mixtral-style routed
 * experts without `dense_moe`, ...) is refused with a
 * message naming the field. The file is written to a temporary name next to
 * `path` and renamed over it, so a failed write leaves no partial file.
 * Nothing is kept after the call; the options struct is the caller's.
 *
 * With o.weights the data comes from the caller: `kvplan export-gguf
 * --ref-weights` passes the reference decoder's (ref.h kvp_ref_weights_new)
 * with its norm epsilon and untied lm_head, so llama.cpp runs the same model.
 */
#ifndef KVPLAN_GGUF_H
#define KVPLAN_GGUF_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"
#include "kvplan/model.h"

struct kvp_gguf_options {
    /* inputs (a zeroed struct gives the defaults) */
    const char *arch;       /* "llama", "gemma3", "deepseek2"; NULL = chosen from the layer kinds */
    bool sparse;            /* header only, the data a hole: f16 matrices, f32 norms */
    bool dense_moe;         /* write MoE layers as a dense MLP of `intermediate` (KV unchanged) */
    uint64_t seed;          /* weights U(-0.1, 0.1) from this seed; norms are 1.0 */
    uint64_t max_dense_bytes; /* refuse a non-sparse file larger than this; 0 = 4 GiB */
    /* Dense weights from the caller instead of random ones (NULL = random):
     * called once per tensor with its GGUF name ("blk.0.attn_q.weight") and
     * element count, it returns that many f32 values (ne0 innermost), owned
     * by the caller, or NULL when it has no such tensor of that size (the
     * write fails naming it). Norms are asked for too. Arch llama only. */
    const float *(*weights)(void *ctx, const char *name, uint64_t n);
    void *weights_ctx;
    float rms_eps;          /* attention.layer_norm_rms_epsilon; 0 = 1e-6 */
    float rope_base;        /* rope.freq_base; 0 = 10000 */
    bool untied;            /* write output.weight even when the model ties its embeddings */
    /* outputs, filled on success */
    char arch_out[16];      /* the architecture written */
    uint64_t n_tensors;
    uint64_t header_bytes;  /* header + tensor infos + padding: the data starts here */
    uint64_t file_bytes;    /* full length of the file */
};

/* Architectures the writer knows, NULL-terminated: {"llama", "gemma3", "deepseek2", NULL}. */
extern KVP_API const char *const kvp_gguf_archs[];

/* Write m as GGUF to path (atomically). Errors: KVP_ERR_UNSUPPORTED for a
 * shape the architecture cannot express, KVP_ERR_USAGE for an unknown arch,
 * KVP_ERR_RANGE for a dense file over the size limit, KVP_ERR_IO, NOMEM,
 * OVERFLOW. */
KVP_API enum kvp_status kvp_gguf_write(const struct kvp_model *m, const char *path, struct kvp_gguf_options *opt,
                               struct kvp_error *err);

#endif
