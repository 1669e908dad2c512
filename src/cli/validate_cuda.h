/* validate_cuda.h -- `kvplan validate --device cuda [--bench]`: the GPU path
 * of cmd_validate.c (src/cli/validate_cuda.c). Private to the CLI. */
#ifndef KVPLAN_CLI_VALIDATE_CUDA_H
#define KVPLAN_CLI_VALIDATE_CUDA_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/model.h"
#include "kvplan/ref.h"
#include "kvplan/render.h"

struct cli_cuda_args {
    const char *device;  /* --device: NULL, "cpu" or "cuda" */
    bool bench;          /* --bench */
    const char *gpu;     /* --gpu NAME: the catalog entry for the roofline */
    bool other;          /* --sweep, --alloc-only or --compute given */
    bool scale_given;    /* --scale given (--bench defaults to the real sizes) */
};

/* Host-side checks, in every build: *cuda says whether the GPU path runs.
 * Usage errors (exit 2): an unknown device; --bench or --gpu without
 * --device cuda; with cuda: other CPU-only options, policy dynamic, a cache
 * format or a layer kind the CUDA decoder does not run. */
int cli_cuda_check(const struct cli_cuda_args *a, const struct kvp_model *m, const struct kvp_ref_cache_opts *co,
                   bool *cuda);

/* Run it; defined in CUDA=1 builds only (cmd_validate.c calls it under #ifdef KVP_CUDA). */
int cli_validate_cuda(const struct cli_cuda_args *a, const struct kvp_model *m, struct kvp_ref_opts o,
                      const struct kvp_ref_cache_opts *co, uint64_t context, uint64_t batch, enum kvp_out fmt);

#endif
