/* fuzz_baseline.c -- libFuzzer harness: kvp_plan_baseline_apply, a baseline
 * (`kvplan check --format json`, --write-baseline) read against the report of
 * docs/examples/fleet.yaml, evaluated once; then every renderer on the
 * compared report (what `kvplan check --baseline FILE` prints).
 *
 * Each input is written to build/fuzz/baseline-input.json (the reader takes
 * a path). Properties beyond "no crash": a result regresses only where the
 * baseline has a figure for it, and the results still add up (passed +
 * failed + regressed). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASELINE_INPUT "build/fuzz/baseline-input.json"

static struct kvp_plan_report *report(void)
{
    static struct kvp_plan plan;
    static struct kvp_plan_report rep;
    static int done;
    struct kvp_catalog *models;
    struct kvp_gpu_catalog *gpus;
    struct kvp_error err = {0};

    if (!done) {
        done = 1;
        fuzz_catalogs(&models, &gpus);
        if (kvp_plan_load(&plan, "docs/examples/fleet.yaml", models, gpus, &err) != KVP_OK ||
            kvp_plan_evaluate(&plan, &rep, &err) != KVP_OK) {
            fprintf(stderr, "fuzz_baseline: docs/examples/fleet.yaml: %s\n", err.msg);
            abort();
        }
    }
    return &rep;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kvp_plan_report *rep = report();
    struct kvp_error err = {0};
    enum kvp_status st;

    fuzz_write(BASELINE_INPUT, data, size);
    st = kvp_plan_baseline_apply(rep, BASELINE_INPUT, 0.05, &err);
    fuzz_check_error(st, &err);
    if (st != KVP_OK)
        return 0;
    for (uint32_t i = 0; i < rep->n; i++)
        FUZZ_ASSERT(!rep->results[i].regressed || rep->results[i].has_baseline, "result %u regressed from nothing", i);
    for (int o = KVP_OUT_TEXT; o <= KVP_OUT_JUNIT; o++) {
        struct kvp_buf b = {0};
        kvp_plan_render(rep, (enum kvp_out)o, o == KVP_OUT_TEXT, &b);
        kvp_buf_release(&b);
    }
    FUZZ_ASSERT(rep->passed + rep->failed + rep->regressed == rep->n,
                "%u passed + %u failed + %u regressed != %u results", rep->passed, rep->failed, rep->regressed, rep->n);
    return 0;
}
