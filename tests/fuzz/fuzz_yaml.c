/* fuzz_yaml.c -- libFuzzer harness: kvp_model_parse_yaml, then the engine. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kvp_model *m = malloc(sizeof *m);
    struct kvp_error err = {0};
    enum kvp_status st;

    if (!m)
        abort();
    kvp_model_init(m);
    /* no NUL terminator: the parser must honour len */
    st = kvp_model_parse_yaml((const char *)data, size, "fuzz.yaml", m, &err);
    fuzz_check_error(st, &err);
    if (st == KVP_OK)
        fuzz_engine(m, data, size);
    free(m);
    return 0;
}
