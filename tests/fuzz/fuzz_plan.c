/* fuzz_plan.c -- libFuzzer harness: kvp_plan_load on a plan file, then
 * kvp_plan_evaluate and every renderer (fuzz_plan_file).
 *
 * kvp_plan_load reads a path, so each input is written to one temporary
 * file (build/fuzz/plan-input.yaml, relative to the repository root the
 * harness runs from); models resolve against models/ and GPUs against
 * models/gpus.yaml, loaded once. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PLAN_INPUT "build/fuzz/plan-input.yaml"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write(PLAN_INPUT, data, size);
    fuzz_plan_file(PLAN_INPUT);
    return 0;
}
