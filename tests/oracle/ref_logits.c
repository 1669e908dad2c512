/* ref_logits.c -- the reference decoder's logits, for comparing with llama.cpp's.
 *
 *     ref_logits MODEL.yaml SEED N
 *
 * Builds kvplan's reference decoder (ref.h) of MODEL with weights of SEED
 * (the same floats `kvplan export-gguf MODEL FILE --ref-weights --seed SEED`
 * writes), decodes N tokens through an f32 static cache and prints one line
 * per step: the step, then every logit (%.9g: a float round-trips). The
 * tokens are those of tests/oracle/probe.c's `logits` mode:
 * token i = 1 + (37 i) mod (vocab - 1). Exit 0, 1 on an error, 2 on usage.
 * Built by tests/oracle/run.sh against build/rel/libkvplan.a.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kvplan/model.h"
#include "kvplan/ref.h"

int main(int argc, char **argv)
{
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_ref_model *rm = NULL;
    struct kvp_ref_cache *c = NULL;
    struct kvp_ref_alloc a = {0};
    float *logits = NULL;
    int n, rc = 1;

    if (argc != 4 || (n = atoi(argv[3])) <= 0) {
        fprintf(stderr, "usage: ref_logits MODEL.yaml SEED N\n");
        return 2;
    }
    struct kvp_ref_opts o = {.seed = strtoull(argv[2], NULL, 10)};
    if (kvp_model_load(argv[1], &m, &err) != KVP_OK || kvp_ref_model_new(m, &o, &rm, &err) != KVP_OK)
        goto out;
    struct kvp_ref_cache_opts co = {.policy = KVP_REF_STATIC, .context = (uint64_t)n, .batch = 1,
                                    .k = kvp_format_plain(KVP_DTYPE_F32), .v = kvp_format_plain(KVP_DTYPE_F32)};
    if (kvp_ref_cache_new(rm, &co, &a, &c, &err) != KVP_OK)
        goto out;
    uint32_t vocab = kvp_ref_vocab(rm);
    if (vocab < 2 || !(logits = malloc(vocab * sizeof *logits))) {
        fprintf(stderr, "ref_logits: vocab %u: cannot run\n", vocab);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        uint32_t tok = 1 + (uint32_t)(37u * (unsigned)i % (vocab - 1));
        if (kvp_ref_step(rm, c, 0, tok, logits, &err) != KVP_OK)
            goto out;
        printf("%d", i);
        for (uint32_t v = 0; v < vocab; v++)
            printf(" %.9g", logits[v]);
        printf("\n");
    }
    rc = 0;
out:
    if (rc && err.msg[0])
        fprintf(stderr, "ref_logits: %s\n", err.msg);
    free(logits);
    kvp_ref_cache_free(c);
    kvp_ref_model_free(rm);
    kvp_model_free(m);
    return rc;
}
