/* fuzz_hub.c -- libFuzzer harness: what kvplan reads from the Hub and from
 * the user about it (hub.h): a reference (the input's first line) and the
 * Hub's answer listing a repo (the rest, JSON), then the files planned for
 * the reference and the GGUF picked among them.
 *
 * Properties beyond "no crash": a parsed reference has a repo or a URL and
 * a revision; a parsed answer has a 40-hex commit and only relative paths
 * without ".."; a plan lists each file at most once, indices within the
 * list, config.json last when the model is the folder, and a GGUF that is
 * a listed file otherwise. */
#include <string.h>

#include "fuzz_common.h"
#include "kvplan/hub.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_plan(const struct kvp_hub_ref *r, const struct kvp_hub_info *info)
{
    uint32_t *want = malloc((info->n_files + 1) * sizeof *want), n = 0;
    enum kvp_hub_part *part = malloc((info->n_files + 1) * sizeof *part);
    int32_t model;
    struct kvp_error err = {0};
    enum kvp_status st;

    if (!want || !part)
        abort();
    st = kvp_hub_plan(r, info->files, info->n_files, want, part, &n, &model, &err);
    fuzz_check_error(st, &err);
    if (st == KVP_OK) {
        if (n == 0 || n > info->n_files || (model >= 0 && (n != 1 || (uint32_t)model != want[0])))
            abort();
        if (model < 0 && (part[n - 1] != KVP_HUB_WHOLE || strcmp(info->files[want[n - 1]], "config.json") != 0))
            abort();
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = i + 1; j < n; j++)
                if (want[i] >= info->n_files || want[i] == want[j])
                    abort();
    }
    free(want);
    free(part);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t k = nl ? (size_t)(nl - data) : size;
    char *line = malloc(k + 1);
    struct kvp_hub_ref r;
    struct kvp_hub_info info;
    struct kvp_error err = {0};
    enum kvp_status st, sti;

    if (!line)
        abort();
    memcpy(line, data, k);
    line[k] = '\0';
    st = kvp_hub_ref_parse(line, &r, &err);
    if (st != KVP_ERR_NOTFOUND)
        fuzz_check_error(st, &err);
    if (st == KVP_OK && (!(r.repo[0] || r.url[0]) || (r.repo[0] && !r.rev[0])))
        abort();
    err = (struct kvp_error){0};
    sti = kvp_hub_info_parse(nl ? (const char *)nl + 1 : "", nl ? size - k - 1 : 0, "fuzz.json", &info, &err);
    fuzz_check_error(sti, &err);
    if (sti == KVP_OK) {
        if (!kvp_hub_is_commit(info.sha))
            abort();
        for (uint32_t i = 0; i < info.n_files; i++)
            if (info.files[i][0] == '/' || strstr(info.files[i], ".."))
                abort();
        if (st == KVP_OK && r.repo[0])
            check_plan(&r, &info);
        kvp_hub_info_free(&info);
    }
    free(line);
    return 0;
}
