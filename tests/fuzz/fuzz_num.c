/* fuzz_num.c -- libFuzzer harness: the CLI's quantity parsers
 * (kvp_parse_count, kvp_parse_bytes, kvp_parse_u64, kvp_format_parse).
 *
 * The input is one NUL-terminated string. Properties beyond "no crash":
 * a parsed count or byte size reads back from its decimal form to the same
 * value; a parsed format's canonical name parses to the same name; and the
 * format sizes the KV cache and weights of a small built-in model without a
 * wrapped sum. */
#include <inttypes.h>

#include "fuzz_common.h"
#include "kvplan/num.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A GQA model with one sliding layer, built in code. */
static void small_model(struct kvp_model *m)
{
    struct kvp_layer_spec full = {.kind = KVP_LAYER_FULL, .n_heads = 32, .n_kv_heads = 8,
                                  .head_dim_k = 128, .head_dim_v = 128};
    struct kvp_layer_spec swa = full;
    struct kvp_error err = {0};

    swa.kind = KVP_LAYER_SLIDING;
    swa.window = 4096;
    kvp_model_init(m);
    snprintf(m->name, sizeof m->name, "fuzz-gqa");
    m->hidden = 4096;
    m->intermediate = 14336;
    m->vocab = 128256;
    m->max_context = 131072;
    if (kvp_model_add_layers(m, &full, 3, &err) != KVP_OK || kvp_model_add_layers(m, &swa, 1, &err) != KVP_OK)
        abort();
}

static void check_format(const char *s, const struct kvp_format *f)
{
    char name[128], again[128];
    struct kvp_format g;
    struct kvp_error err = {0};
    struct kvp_model *m = malloc(sizeof *m);
    struct kvp_kv_query q = {.context = 131072, .batch = 7, .k = *f, .v = *f};
    struct kvp_kv_plan p;
    struct kvp_weights w;
    struct kvp_wstore ws;
    memset(&ws, 0, sizeof ws);
    uint64_t row;
    enum kvp_status st;

    kvp_format_name(f, name, sizeof name);
    st = kvp_format_parse(name, &g, &err);
    FUZZ_ASSERT(st == KVP_OK, "'%s' parsed, its name '%s' does not: %s", s, name, err.msg);
    kvp_format_name(&g, again, sizeof again);
    FUZZ_ASSERT(strcmp(name, again) == 0, "'%s' -> '%s' -> '%s'", s, name, again);
    st = kvp_format_row_bytes(f, 128, &row, &err);
    fuzz_check_error(st, &err);
    if (!m)
        abort();
    small_model(m);
    st = kvp_kv_compute(m, &q, &p, &err);
    fuzz_check_error(st, &err);
    if (st == KVP_OK)
        FUZZ_ASSERT(p.kv_bytes == p.k_bytes + p.v_bytes && p.kv_bytes >= p.k_bytes, "kv sum wrapped");
    ws.kind = KVP_WSTORE_FORMAT; /* every projection in the fuzzed format */
    ws.q.kind = KVP_WQ_FORMAT;
    ws.q.f = *f;
    st = kvp_weights_compute(m, &ws, &w, &err);
    fuzz_check_error(st, &err);
    free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1), dec[32];
    struct kvp_error err = {0};
    struct kvp_format f;
    uint64_t v, back;
    enum kvp_status st;

    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';

    st = kvp_parse_count(s, &v, &err);
    fuzz_check_error(st, &err);
    if (st == KVP_OK) {
        snprintf(dec, sizeof dec, "%" PRIu64, v);
        FUZZ_ASSERT(kvp_parse_count(dec, &back, &err) == KVP_OK && back == v, "count '%s' = %s reads back wrong", s,
                    dec);
    }
    err = (struct kvp_error){0};
    st = kvp_parse_bytes(s, &v, &err);
    fuzz_check_error(st, &err);
    if (st == KVP_OK) {
        snprintf(dec, sizeof dec, "%" PRIu64 "B", v);
        FUZZ_ASSERT(kvp_parse_bytes(dec, &back, &err) == KVP_OK && back == v, "bytes '%s' = %s reads back wrong", s,
                    dec);
    }
    if (kvp_parse_u64(s, &v)) {
        snprintf(dec, sizeof dec, "%" PRIu64, v);
        FUZZ_ASSERT(kvp_parse_u64(dec, &back) && back == v, "u64 '%s' reads back wrong", s);
    }
    err = (struct kvp_error){0};
    st = kvp_format_parse(s, &f, &err);
    fuzz_check_error(st, &err);
    if (st == KVP_OK)
        check_format(s, &f);
    free(s);
    return 0;
}
