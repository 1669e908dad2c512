/* fuzz_plan.c -- libFuzzer harness: kvp_plan_load on a plan file, then
 * kvp_plan_evaluate and every renderer.
 *
 * kvp_plan_load reads a path, so each input is written to one temporary
 * file (build/fuzz/plan-input.yaml, relative to the repository root the
 * harness runs from); models resolve against models/ and GPUs against
 * models/gpus.yaml, loaded once. */
#include <stdio.h>

#include "fuzz_common.h"
#include "kvplan/catalog.h"
#include "kvplan/gpu.h"
#include "kvplan/plan.h"
#include "kvplan/render.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PLAN_INPUT "build/fuzz/plan-input.yaml"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct kvp_catalog *models;
    static struct kvp_gpu_catalog *gpus;
    static int loaded;
    struct kvp_plan plan = {0};
    struct kvp_plan_report rep = {0};
    struct kvp_error err = {0};
    enum kvp_status st;
    FILE *f;

    if (!loaded) {
        loaded = 1;
        if (kvp_catalog_load("models", &models, &err) != KVP_OK || kvp_gpu_catalog_load("models/gpus.yaml", &gpus, &err) != KVP_OK) {
            fprintf(stderr, "fuzz_plan: run from the repository root: %s\n", err.msg);
            abort();
        }
    }
    if (!(f = fopen(PLAN_INPUT, "wb")) || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    st = kvp_plan_load(&plan, PLAN_INPUT, models, gpus, &err);
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
    return 0;
}
