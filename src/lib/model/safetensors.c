/* safetensors.c -- the stored bytes of a Hugging Face checkpoint from its
 * safetensors headers alone (internal; kvp_model_load calls it for a folder
 * or a config.json with shards beside it).
 *
 * A .safetensors file opens with a little-endian u64 N and N bytes of JSON:
 *     {"__metadata__": {...}, "NAME": {"dtype": "BF16", "shape": [..],
 *      "data_offsets": [BEGIN, END]}, ...}
 * END - BEGIN is the tensor's exact stored size. Only the 8 + N bytes are
 * read. Which shards: every *.safetensors in the folder, but not
 * consolidated*.safetensors when others are there (Mistral's repos carry
 * both layouts of the same weights). A multimodal checkpoint's vision
 * (audio) tower and projector are counted and told apart by their names
 * (tower_of). Tensors of text layers past the model's n_layers (DeepSeek's
 * MTP layer) are not part of the model: they are left out, counted apart
 * (an engine loads them only as a draft) and said so. */
#include "safetensors.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/io.h"
#include "kvplan/num.h"
#include "base/ydoc.h"

#define MAX_SHARDS 4096
#define MAX_HEADER (4u << 20) /* as model.c caps JSON: libyaml builds a tree of it */

/* safetensors dtype names; integer and 1-byte storage types fold into the
 * kvp dtype of their width (U8 blocks and E8M0 scales count as i8). */
static bool st_dtype(const char *s, enum kvp_dtype *out)
{
    static const struct { const char *name; enum kvp_dtype d; } t[] = {
        {"F64", KVP_DTYPE_F64}, {"F32", KVP_DTYPE_F32}, {"F16", KVP_DTYPE_F16}, {"BF16", KVP_DTYPE_BF16},
        {"F8_E4M3", KVP_DTYPE_FP8_E4M3}, {"F8_E5M2", KVP_DTYPE_FP8_E5M2}, {"I64", KVP_DTYPE_I64},
        {"U64", KVP_DTYPE_I64}, {"I32", KVP_DTYPE_I32}, {"U32", KVP_DTYPE_I32}, {"I16", KVP_DTYPE_I16},
        {"U16", KVP_DTYPE_I16}, {"I8", KVP_DTYPE_I8}, {"U8", KVP_DTYPE_I8}, {"BOOL", KVP_DTYPE_I8},
        {"F8_E8M0", KVP_DTYPE_I8},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(s, t[i].name) == 0) {
            *out = t[i].d;
            return true;
        }
    return false;
}

/* A tensor's place in its shard's data: [begin, end) and its name (in the
 * shard's parsed header). */
struct span {
    uint64_t begin, end;
    const char *name;
};

struct tally {
    struct kvp_wtable tb;
    uint64_t total;
    struct span *span; /* this shard's tensors */
    uint64_t nspan, span_cap;
    uint64_t short_files; /* shards shorter than their data (headers alone) */
};

static void add(struct tally *t, enum kvp_dtype d, uint64_t elems, uint64_t bytes, bool expert, bool tower)
{
    uint32_t i;
    for (i = 0; i < t->tb.n && t->tb.rows[i].dtype != d; i++)
        ;
    if (i == t->tb.n) /* 16 dtype kinds at most fold into KVP_WTABLE_MAX rows */
        t->tb.rows[t->tb.n++] = (struct kvp_wtable_row){.dtype = d};
    t->tb.rows[i].tensors++;
    t->tb.rows[i].params += elems;
    t->tb.rows[i].bytes += bytes;
    if (expert)
        t->tb.expert_bytes += bytes;
    if (tower) {
        t->tb.tower_params += elems;
        t->tb.tower_bytes += bytes;
    }
}

/* Whether a tensor belongs to a vision (audio) tower or its projector: a
 * name component the multimodal classes of transformers give them
 * (Gemma 3, LLaVA and Mistral 3 vision_tower and multi_modal_projector,
 * Llama 4 vision_model, Qwen2-VL visual, Qwen2-Audio audio_tower). */
static bool tower_of(const char *name)
{
    static const char *const parts[] = {"vision_tower.", "vision_model.", "multi_modal_projector.", "visual.",
                                        "mm_projector.", "audio_tower.", "image_newline"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        const char *p = strstr(name, parts[i]);
        if (p && (p == name || p[-1] == '.'))
            return true;
    }
    return false;
}

/* The layer index in "model.layers.61.mlp..." or -1. */
static long layer_of(const char *name)
{
    const char *l = strstr(name, "layers.");
    char *end;
    long v;
    if (!l)
        return -1;
    v = strtol(l + 7, &end, 10);
    return end != l + 7 && *end == '.' ? v : -1;
}

/* One tensor entry of a header. */
static enum kvp_status tensor(struct ydoc *d, const char *name, yaml_node_t *v, const struct kvp_model *m,
                              struct tally *t, struct kvp_error *err)
{
    yaml_node_t *off = kvp_ydoc_get(d, v, "data_offsets"), *shape = kvp_ydoc_get(d, v, "shape");
    char dt[16];
    enum kvp_dtype dtype;
    uint64_t o[2], elems = 1, bytes = 0;
    bool fits = true, tower;
    enum kvp_status st;
    int i = 0;

    if ((st = kvp_ydoc_want_map(d, v, "a tensor entry", err)) != KVP_OK ||
        (st = kvp_ydoc_get_str(d, v, "dtype", true, dt, sizeof dt, err)) != KVP_OK)
        return st;
    if (!st_dtype(dt, &dtype))
        return kvp_ydoc_fail(d, kvp_ydoc_get(d, v, "dtype"), err, KVP_ERR_SCHEMA, "'%s': unknown dtype '%s'", name, dt);
    if (!off || (st = kvp_ydoc_want_seq(d, off, "'data_offsets'", err)) != KVP_OK)
        return off ? st : kvp_ydoc_fail(d, v, err, KVP_ERR_SCHEMA, "'%s' has no 'data_offsets'", name);
    for (yaml_node_item_t *it = off->data.sequence.items.start; it < off->data.sequence.items.top; it++, i++)
        if (i >= 2 || (st = kvp_ydoc_u64(d, kvp_ydoc_node(d, *it), "'data_offsets'", &o[i], err)) != KVP_OK)
            return i >= 2 ? kvp_ydoc_fail(d, off, err, KVP_ERR_SCHEMA, "'data_offsets' must be [begin, end]") : st;
    if (i != 2 || o[1] < o[0])
        return kvp_ydoc_fail(d, off, err, KVP_ERR_SCHEMA, "'%s': 'data_offsets' must be [begin, end] with end >= begin",
                         name);
    if (shape && (st = kvp_ydoc_want_seq(d, shape, "'shape'", err)) != KVP_OK)
        return st;
    for (yaml_node_item_t *it = shape ? shape->data.sequence.items.start : NULL;
         shape && it < shape->data.sequence.items.top; it++) {
        uint64_t x;
        if ((st = kvp_ydoc_u64(d, kvp_ydoc_node(d, *it), "'shape'", &x, err)) != KVP_OK)
            return st;
        if (!kvp_mul(elems, x, &elems))
            return kvp_ydoc_fail(d, shape, err, KVP_ERR_OVERFLOW, "'%s': shape overflows 64 bits", name);
    }
    /* safetensors' Metadata::validate: a tensor's bytes are its shape's values times its dtype's size */
    if (shape && (!(fits = kvp_mul(elems, kvp_dtype_info(dtype)->block_bits / 8, &bytes)) || bytes != o[1] - o[0]))
        return kvp_ydoc_fail(d, off, err, KVP_ERR_SCHEMA,
                             "'%s': 'data_offsets' span %" PRIu64 " bytes, its shape and dtype %s make %s", name,
                             o[1] - o[0], dt, fits ? "another size" : "more than 2^64");
    if (t->nspan == t->span_cap) {
        uint64_t cap = t->span_cap ? 2 * t->span_cap : 256;
        struct span *ns = realloc(t->span, cap * sizeof *ns);
        if (!ns)
            return kvp_fail(err, KVP_ERR_NOMEM, "out of memory reading the safetensors header");
        t->span = ns;
        t->span_cap = cap;
    }
    t->span[t->nspan++] = (struct span){o[0], o[1], name};
    tower = tower_of(name);
    if (!tower && layer_of(name) >= (long)m->n_layers) {
        t->tb.mtp_tensors++;
        t->tb.mtp_bytes += o[1] - o[0];
        return KVP_OK;
    }
    if (!kvp_add(t->total, o[1] - o[0], &t->total))
        return kvp_ydoc_fail(d, off, err, KVP_ERR_OVERFLOW, "'%s': the shards' sizes overflow 64 bits", name);
    add(t, dtype, elems, o[1] - o[0], strstr(name, ".experts.") != NULL, tower);
    return KVP_OK;
}

static int by_begin(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

/* safetensors' Metadata::validate and SafeTensors::deserialize: the
 * tensors, by offset, tile the data from 0 without a hole or an overlap,
 * and the data ends where the file does. A file shorter than that is a
 * header alone (counted: the caller warns); a longer one, or a hole, or an
 * overlap (bytes counted twice) is an error. */
static enum kvp_status check_spans(const char *path, uint64_t header_end, struct tally *t, struct kvp_error *err)
{
    struct stat sb;
    uint64_t end = 0, need;
    if (t->nspan) /* a header of no tensor has no span array: qsort's argument must not be NULL */
        qsort(t->span, t->nspan, sizeof *t->span, by_begin);
    for (uint64_t i = 0; i < t->nspan; i++) {
        if (t->span[i].begin != end)
            return kvp_fail_at(err, KVP_ERR_SCHEMA, path, 0, 0,
                               "'%s' begins at byte %" PRIu64 " of the data, where %s ends at %" PRIu64
                               " (safetensors allows no hole and no overlap)",
                               t->span[i].name, t->span[i].begin, i ? t->span[i - 1].name : "nothing", end);
        end = t->span[i].end;
    }
    t->nspan = 0;
    if (stat(path, &sb) != 0)
        return kvp_fail_at(err, KVP_ERR_IO, path, 0, 0, "cannot read the file's length");
    if (!kvp_add(header_end, end, &need))
        return kvp_fail_at(err, KVP_ERR_OVERFLOW, path, 0, 0, "the tensors' data overflows 64 bits");
    if ((uint64_t)sb.st_size > need)
        return kvp_fail_at(err, KVP_ERR_SCHEMA, path, 0, 0,
                           "the tensors' data ends at byte %" PRIu64 ", the file at %" PRIu64
                           " (safetensors: the data must end where the file does)",
                           need, (uint64_t)sb.st_size);
    t->short_files += (uint64_t)sb.st_size < need;
    return KVP_OK;
}

/* One shard's header into t. */
static enum kvp_status shard(const char *path, const struct kvp_model *m, struct tally *t, struct kvp_error *err)
{
    char *head = NULL;
    uint64_t len = 0, n = 0;
    bool more = false;
    struct ydoc d;
    yaml_node_t *root;
    enum kvp_status st;

    if ((st = kvp_read_file(path, 8, &head, &len, &more, err)) != KVP_OK)
        return st;
    for (int i = 0; i < 8 && len == 8; i++)
        n |= (uint64_t)(uint8_t)head[i] << (8 * i);
    free(head);
    if (len < 8 || n < 2)
        return kvp_fail_at(err, KVP_ERR_SYNTAX, path, 0, 0, "not a safetensors file: no header length");
    if (n > MAX_HEADER)
        return kvp_fail_at(err, KVP_ERR_RANGE, path, 0, 0, "safetensors header of %" PRIu64 " bytes (at most %u MiB)",
                           n, MAX_HEADER >> 20);
    if ((st = kvp_read_file(path, 8 + n, &head, &len, &more, err)) != KVP_OK)
        return st;
    if (len < 8 + n) {
        free(head);
        return kvp_fail_at(err, KVP_ERR_TRUNCATED, path, 0, 0,
                           "truncated: the header says %" PRIu64 " bytes, the file has %" PRIu64, n, len - 8);
    }
    /* the JSON starts at byte 8: errors count lines and columns from there */
    st = kvp_ydoc_load(&d, head + 8, n, path, err);
    if (st == KVP_OK) {
        root = kvp_ydoc_root(&d);
        if (!root || root->type != YAML_MAPPING_NODE)
            st = kvp_ydoc_fail(&d, root, err, KVP_ERR_SCHEMA, "a safetensors header must be a JSON object");
        for (yaml_node_pair_t *p = root ? root->data.mapping.pairs.start : NULL;
             st == KVP_OK && root && p < root->data.mapping.pairs.top; p++) {
            const char *name = kvp_ydoc_scalar(kvp_ydoc_node(&d, p->key));
            if (name && strcmp(name, "__metadata__") != 0)
                st = tensor(&d, name, kvp_ydoc_node(&d, p->value), m, t, err);
        }
        if (st == KVP_OK)
            st = check_spans(path, 8 + n, t, err);
        t->nspan = 0;
        kvp_ydoc_release(&d);
    }
    free(head);
    return st;
}

static bool has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

uint32_t kvp_safetensors_pick(char **names, uint32_t *n, bool owned)
{
    uint32_t plain = 0, k = *n;
    for (uint32_t i = 0; i < k; i++)
        plain += strncmp(names[i], "consolidated", 12) != 0;
    /* both layouts: keep the transformers one */
    for (uint32_t i = 0; plain && plain < k && i < k;)
        if (strncmp(names[i], "consolidated", 12) == 0) {
            if (owned)
                free(names[i]);
            names[i] = names[--k];
        } else {
            i++;
        }
    return *n = k;
}

/* The shard names in dir, sorted. */
static enum kvp_status shard_names(const char *dir, char ***out, uint32_t *n, struct kvp_error *err)
{
    DIR *dp = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    uint32_t k = 0;

    *out = NULL;
    *n = 0;
    if (!dp)
        return KVP_OK;
    while ((e = readdir(dp)) != NULL) {
        if (!has_suffix(e->d_name, ".safetensors"))
            continue;
        if (k == MAX_SHARDS || !(names = realloc(names, (k + 1) * sizeof *names)) ||
            !(names[k] = strdup(e->d_name))) {
            closedir(dp);
            for (uint32_t i = 0; names && i < k; i++)
                free(names[i]);
            free(names);
            return kvp_fail(err, k == MAX_SHARDS ? KVP_ERR_RANGE : KVP_ERR_NOMEM,
                            "'%s': more than %d safetensors files, or out of memory", dir, MAX_SHARDS);
        }
        k++;
    }
    closedir(dp);
    kvp_safetensors_pick(names, &k, true);
    if (k)
        qsort(names, k, sizeof *names, by_name);
    *out = names;
    *n = k;
    return KVP_OK;
}

enum kvp_status kvp_safetensors_read(const char *dir, struct kvp_model *m, struct kvp_error *err)
{
    struct tally t;
    struct stat sb;
    char **names, path[KVP_TEXT_MAX + 64];
    uint32_t n;
    enum kvp_status st;

    memset(&t, 0, sizeof t);
    if ((st = shard_names(dir, &names, &n, err)) != KVP_OK || n == 0)
        return st;
    for (uint32_t i = 0; i < n && st == KVP_OK; i++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= sizeof path)
            st = kvp_fail(err, KVP_ERR_RANGE, "path '%.60s...' is too long", dir);
        else
            st = shard(path, m, &t, err);
    }
    for (uint32_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(t.span);
    if (st != KVP_OK)
        return st;
    /* most bytes first */
    for (uint32_t i = 1; i < t.tb.n; i++)
        for (uint32_t j = i; j > 0 && t.tb.rows[j].bytes > t.tb.rows[j - 1].bytes; j--) {
            struct kvp_wtable_row r = t.tb.rows[j];
            t.tb.rows[j] = t.tb.rows[j - 1];
            t.tb.rows[j - 1] = r;
        }
    snprintf(t.tb.what, sizeof t.tb.what, "safetensors headers (%u file%s)", n, n == 1 ? "" : "s");
    m->wtable = t.tb;
    /* a snapshot kvplan's Hub client wrote (hub.h: its .kvplan-files) holds headers by design */
    if ((size_t)snprintf(path, sizeof path, "%s/.kvplan-files", dir) < sizeof path && stat(path, &sb) == 0)
        t.short_files = 0;
    if (t.short_files)
        kvp_model_warn(m, "%" PRIu64 " of %u safetensors files end before their tensors' data: headers alone (or "
                       "truncated files), so the weights are their headers' claims, not bytes the files hold",
                       t.short_files, n);
    if (t.tb.mtp_tensors)
        kvp_model_warn(m, "%" PRIu64 " tensors (%" PRIu64 " B) of layers past num_hidden_layers (MTP) are not "
                       "counted in the weights", t.tb.mtp_tensors, t.tb.mtp_bytes);
    return KVP_OK;
}
