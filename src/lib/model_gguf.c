/* model_gguf.c -- GGUF header reader (not written yet). */
#include "kvplan/model.h"

enum kvp_status kvp_model_parse_gguf(const uint8_t *data, uint64_t len, const char *file,
                                     struct kvp_model *m, struct kvp_error *err)
{
    (void)data; (void)len; (void)m;
    return kvp_fail_at(err, KVP_ERR_UNSUPPORTED, file, 0, 0, "GGUF input is not supported yet");
}
