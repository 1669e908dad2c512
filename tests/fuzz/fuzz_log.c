/* fuzz_log.c -- libFuzzer harness: engine start-up logs (kvp_log_parse) and their explanation
 * beside kvplan's fit (kvp_log_explain, kvp_log_explain_render).
 *
 * The input is a log's text. Properties beyond "no crash": a failed parse has a message and a
 * place; a parsed figure has a line and is a plausible number; when the log gives the GPU's
 * memory, the explanation of llama-3.1-8b under its settings renders as text and JSON (an error
 * there must carry a message too). */
#include "fuzz_common.h"
#include "kvplan/explain_log.h"
#include "kvplan/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct kvp_model *m;
    static struct kvp_log log;
    static struct kvp_log_explain x;
    struct kvp_error err = {0};
    struct kvp_buf b = {0};
    enum kvp_status st;

    if (!m && kvp_model_load("models/llama-3.1-8b.yaml", &m, &err) != KVP_OK)
        abort();
    st = kvp_log_parse((const char *)data, size, "fuzz.log", &log, &err);
    fuzz_check_error(st, &err);
    if (st != KVP_OK)
        return 0;
    for (int f = 0; f < KVP_LOG_FIG_COUNT; f++)
        if (log.fig[f].line && !(log.fig[f].value >= 0 && log.fig[f].value < 9.0e18 && log.fig[f].line <= log.lines))
            abort();
    st = kvp_log_explain(&log, &log.settings, m, NULL, &x, &err);
    fuzz_check_error(st, &err);
    if (st == KVP_OK) {
        kvp_log_explain_render(&log, "fuzz.log", m, &x, KVP_OUT_TEXT, false, &b);
        kvp_log_explain_render(&log, "fuzz.log", m, &x, KVP_OUT_JSON, true, &b);
    }
    kvp_buf_release(&b);
    return 0;
}
