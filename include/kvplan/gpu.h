/* gpu.h -- the GPU catalog: memory as each device reports it, bandwidth and
 * peak dense tensor throughput, and resolving what a user types as GPU.
 *
 * Memory is what the device itself reports (an "80 GB" H100 reports 79.19
 * GiB), so that a plan's budget starts from the same figure as the engine's.
 * The file format is described in docs/gpus.md and atop models/gpus.yaml.
 *
 *     struct kvp_gpu_catalog *gc = NULL;
 *     struct kvp_error err = {0};
 *     if (kvp_gpu_catalog_load("models/gpus.yaml", &gc, &err) != KVP_OK) ...;
 *     const struct kvp_gpu *g;
 *     if (kvp_gpu_find(gc, "H100", &g, &err) == KVP_OK)     // id, alias or unique prefix; case, -, _ and space ignored
 *         printf("%s: %llu bytes\n", g->id, (unsigned long long)g->memory_bytes);
 *     kvp_gpu_catalog_free(gc);
 *
 * The catalog owns its GPUs until kvp_gpu_catalog_free; kvp_gpu_find returns a
 * pointer into it.
 */
#ifndef KVPLAN_GPU_H
#define KVPLAN_GPU_H

#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"
#include "kvplan/format.h"

#define KVP_GPU_ID_MAX 32       /* id and alias length, NUL included */
#define KVP_GPU_ALIASES_MAX 4
#define KVP_GPU_NAME_MAX 96
#define KVP_GPU_SOURCE_MAX 512
#define KVP_GPU_CATALOG_MAX 256 /* GPUs in one file */

struct kvp_gpu {
    char id[KVP_GPU_ID_MAX]; /* lower case: a-z 0-9 '-' '.' */
    char aliases[KVP_GPU_ALIASES_MAX][KVP_GPU_ID_MAX];
    uint32_t n_aliases;
    char name[KVP_GPU_NAME_MAX];
    uint64_t memory_bytes;          /* total as the device reports it (cudaMemGetInfo total), > 0 */
    uint64_t bandwidth_bytes_per_s; /* bandwidth_gbs * 10^9 */
    double bf16_flops;              /* peak dense bf16 tensor FLOP/s: bf16_tflops * 10^12, > 0 */
    double fp8_flops;               /* peak dense fp8 FLOP/s; 0 = no fp8 */
    uint32_t compute_capability;    /* CUDA major * 10 + minor (90 Hopper, 100 B200); 0 = not CUDA or unknown */
    uint64_t host_link_bytes_per_s; /* host_link pcie3..pcie6: one direction of an x16 link; 0 = unknown or unified */
    bool unified_memory;            /* host_link unified: the host's memory is the GPU's (Apple silicon) */
    char source[KVP_GPU_SOURCE_MAX];        /* vendor datasheet of bandwidth and FLOP/s */
    char memory_source[KVP_GPU_SOURCE_MAX]; /* where memory_bytes was seen */
};

struct kvp_gpu_catalog {
    uint32_t n;
    struct kvp_gpu *gpus; /* n, in file order */
};

/* Load a GPU catalog file (kvplan_gpus: 1). Unknown or duplicate keys, wrong
 * types, a zero memory, bandwidth or bf16 figure, a bad id and an id or alias
 * used twice (ignoring case) are errors at the offending node's
 * file:line:col. On success *out is a catalog the caller frees with
 * kvp_gpu_catalog_free; on failure *out is untouched. */
KVP_API enum kvp_status kvp_gpu_catalog_load(const char *path, struct kvp_gpu_catalog **out, struct kvp_error *err);

/* kvp_gpu_catalog_load for a command that needs the one GPU `name`: when name is an
 * exact id or alias, only the GPUs up to and including its own are read and
 * checked (the rest of the file is not, so an error after it goes
 * unreported); otherwise the whole file is loaded, so a prefix, a typo and
 * every error get kvp_gpu_catalog_load's and kvp_gpu_find's answers. Then
 * kvp_gpu_find(*out, name) finds what it finds in the whole catalog. */
KVP_API enum kvp_status kvp_gpu_catalog_load_for(const char *path, const char *name, struct kvp_gpu_catalog **out,
                                  struct kvp_error *err);

/* Resolve name, ignoring case and the separators -, _ and space ("rtx3090" is
 * rtx-3090): an exact id or alias, else the one GPU with an
 * id or alias that starts with name ("mi300" -> mi300x). An unknown or
 * ambiguous name is KVP_ERR_NOTFOUND, with the choices in the message:
 * "unknown GPU 'h300' (h100-sxm, h100-pcie, ...)" or
 * "ambiguous GPU 'rtx' (rtx-4090, rtx-3090)". *out points into c. */
KVP_API enum kvp_status kvp_gpu_find(const struct kvp_gpu_catalog *c, const char *name, const struct kvp_gpu **out,
                             struct kvp_error *err);

/* Free a catalog; NULL is a no-op. */
KVP_API void kvp_gpu_catalog_free(struct kvp_gpu_catalog *c);

/* The dense tensor peak for matmuls on codes of dtype d: the fp8 peak for
 * fp8 codes where the GPU has one, else the bf16 peak. */
KVP_API double kvp_gpu_peak_flops(const struct kvp_gpu *g, enum kvp_dtype d);

#endif
