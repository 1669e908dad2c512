/* model_load.c -- a model from a path: read the file (bounded), dispatch on
 * its kind (GGUF magic, .json, else kvplan YAML) to its parser, validate.
 *
 * The dispatcher has a file of its own: the parsers build models with
 * model.c's functions, and model.c calls none of them, so the sources form no
 * cycle (make check-includes). */
#include "kvplan/model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/io.h"
#include "safetensors.h"

#define KVP_MAX_FILE_BYTES (64u << 20) /* read at most this much: a GGUF's header is read in part */
#define KVP_MAX_TEXT_BYTES (4u << 20)  /* YAML/JSON configs are kilobytes: libyaml's tree of 64 MiB would be GiBs */

static bool has_suffix(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcasecmp(s + a - b, suffix) == 0;
}

/* A config.json, then the safetensors headers beside it (safetensors.c). */
static enum kvp_status parse_hf_folder(const char *text, uint64_t len, const char *file, struct kvp_model *m,
                                       struct kvp_error *err)
{
    char dir[KVP_TEXT_MAX + 16];
    const char *slash = strrchr(file, '/');
    enum kvp_status st = kvp_model_parse_hf(text, len, file, m, err);
    if (st != KVP_OK)
        return st;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - file) : 1, slash ? file : ".");
    return kvp_safetensors_read(dir, m, err);
}

/* A GGUF's tensor table is a claim about the file: llama.cpp refuses a
 * tensor whose data lies past the file's end (llama-model-loader.cpp,
 * llama_tensor_weight: "tensor data is not within the file bounds, model is
 * corrupted or incomplete"). kvplan reads only the header, and a header
 * alone is an input it takes (cut from a file, dropped on the page, read
 * from the Hub), so a file shorter than its data section is said so in a
 * warning: its weights are the table's claims (contiguous, their sums
 * checked, read_tensor_infos), not bytes the file holds. */
static enum kvp_status gguf_check_length(const char *file, struct kvp_model *m, struct kvp_error *err)
{
    struct stat sb;
    if (stat(file, &sb) != 0)
        return kvp_fail_at(err, KVP_ERR_IO, file, 0, 0, "cannot read the file's length");
    if ((uint64_t)sb.st_size < m->wtable.file_bytes)
        kvp_model_warn(m,
                       "the file ends at byte %" PRIu64 ", its tensor table places data up to byte %" PRIu64
                       ": a header alone (or a truncated file), so the weights are the table's claims, not "
                       "bytes the file holds",
                       (uint64_t)sb.st_size, m->wtable.file_bytes);
    return KVP_OK;
}

enum kvp_status kvp_model_load(const char *path, struct kvp_model **out, struct kvp_error *err)
{
    char file[KVP_TEXT_MAX + 16];
    struct stat sb;
    struct kvp_model *m;
    char *text = NULL;
    uint64_t len = 0;
    bool truncated = false, gguf;
    enum kvp_status st;

    if (strlen(path) >= KVP_TEXT_MAX)
        return kvp_fail(err, KVP_ERR_USAGE, "path '%.60s...' is too long", path);
    snprintf(file, sizeof file, "%s", path);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(file, sizeof file, "%s/config.json", path);
    if ((st = kvp_read_file(file, KVP_MAX_FILE_BYTES, &text, &len, &truncated, err)) != KVP_OK)
        return st;
    gguf = len >= 4 && memcmp(text, "GGUF", 4) == 0;
    if (truncated && !gguf) {
        free(text);
        return kvp_fail_at(err, KVP_ERR_RANGE, file, 0, 0, "the file is larger than %u MiB",
                           KVP_MAX_FILE_BYTES >> 20);
    }
    if (!gguf && len > KVP_MAX_TEXT_BYTES) {
        free(text);
        return kvp_fail_at(err, KVP_ERR_RANGE, file, 0, 0, "the file is larger than %u MiB",
                           KVP_MAX_TEXT_BYTES >> 20);
    }
    if (!(m = malloc(sizeof *m))) {
        free(text);
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory loading '%s'", file);
    }
    kvp_model_init(m);
    if (gguf) {
        if ((st = kvp_model_parse_gguf((const uint8_t *)text, len, file, m, err)) == KVP_OK)
            st = gguf_check_length(file, m, err);
    } else if (has_suffix(file, ".json"))
        st = parse_hf_folder(text, len, file, m, err);
    else
        st = kvp_model_parse_yaml(text, len, file, m, err);
    free(text);
    if (st == KVP_OK)
        snprintf(m->file, sizeof m->file, "%s", file);
    if (st == KVP_OK && (st = kvp_model_validate(m, err)) != KVP_OK)
        kvp_error_place(err, file, 0, 0);
    if (st != KVP_OK) {
        free(m);
        return st;
    }
    *out = m;
    return KVP_OK;
}

void kvp_model_free(struct kvp_model *m)
{
    free(m);
}
