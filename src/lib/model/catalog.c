/* catalog.c -- the directory of shipped models and MODEL resolution. */
#include "kvplan/catalog.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/io.h"

#define MAX_CATALOG 4096

static int by_name(const void *a, const void *b)
{
    const struct kvp_model *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static bool is_yaml(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && ((n > 5 && strcmp(name + n - 5, ".yaml") == 0) ||
                              (n > 4 && strcmp(name + n - 4, ".yml") == 0));
}

enum kvp_status kvp_catalog_load(const char *dir, struct kvp_catalog **out, struct kvp_error *err)
{
    DIR *d = opendir(dir);
    struct kvp_catalog *cat;
    struct dirent *e;
    enum kvp_status st = KVP_OK;

    if (!d)
        return kvp_fail_at(err, KVP_ERR_IO, dir, 0, 0, "cannot open the models directory");
    if (!(cat = calloc(1, sizeof *cat)) || !(cat->models = calloc(MAX_CATALOG, sizeof *cat->models))) {
        free(cat);
        closedir(d);
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory loading the catalog");
    }
    while (st == KVP_OK && (e = readdir(d)) != NULL) {
        char path[1024];
        if (!is_yaml(e->d_name))
            continue;
        if (strcmp(e->d_name, "gpus.yaml") == 0) /* the GPU catalog (gpu.h), not a model */
            continue;
        if (cat->n == MAX_CATALOG) {
            st = kvp_fail_at(err, KVP_ERR_RANGE, dir, 0, 0, "more than %d model files", MAX_CATALOG);
            break;
        }
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        st = kvp_model_load(path, &cat->models[cat->n], err);
        if (st == KVP_OK)
            cat->n++;
    }
    closedir(d);
    if (st != KVP_OK) {
        kvp_catalog_free(cat);
        return st;
    }
    qsort(cat->models, cat->n, sizeof *cat->models, by_name);
    for (uint32_t i = 1; i < cat->n; i++)
        if (strcmp(cat->models[i]->name, cat->models[i - 1]->name) == 0) {
            kvp_fail_at(err, KVP_ERR_SCHEMA, cat->models[i]->file, 0, 0, "model name '%s' is also used by %s",
                        cat->models[i]->name, cat->models[i - 1]->file);
            kvp_catalog_free(cat);
            return KVP_ERR_SCHEMA;
        }
    *out = cat;
    return KVP_OK;
}

/* Does the YAML text have a top-level `hf_id: s` line (quoted or not)?
 * With repo_only, s is matched against the part after the id's '/'. */
static bool says_hf_id(const char *text, const char *s, bool repo_only)
{
    size_t n = strlen(s);
    for (const char *p = text; (p = strstr(p, "hf_id:")) != NULL; p += 6) {
        const char *v = p + 6;
        if (p != text && p[-1] != '\n')
            continue;
        while (*v == ' ')
            v++;
        if (*v == '"' || *v == '\'')
            v++;
        if (repo_only) {
            const char *slash = v + strcspn(v, "/\"' \r\n#");
            if (*slash != '/')
                continue;
            v = slash + 1;
        }
        if (strncasecmp(v, s, n) == 0 && strchr("\"' \r\n#", v[n] ? v[n] : '\n'))
            return true;
    }
    return false;
}

/* The shipped model named s (dir/<s>.yaml) or, when s has a '/' or with
 * repo_only, the file whose hf_id says s; KVP_ERR_NOTFOUND when none. */
static enum kvp_status open_exact(const char *dir, const char *s, bool repo_only, struct kvp_model **out,
                                  struct kvp_error *err)
{
    char path[1024], lower[KVP_NAME_MAX];
    size_t n = strlen(s);
    DIR *d;
    struct dirent *e;

    if (n == 0 || n >= sizeof lower)
        return kvp_fail(err, KVP_ERR_NOTFOUND, "unknown model '%s'", s);
    for (size_t i = 0; i <= n; i++)
        lower[i] = (char)((s[i] >= 'A' && s[i] <= 'Z') ? s[i] - 'A' + 'a' : s[i]);
    if (!repo_only && !strchr(lower, '/') && strcmp(lower, "gpus") != 0 &&
        (size_t)snprintf(path, sizeof path, "%s/%s.yaml", dir, lower) < sizeof path && access(path, R_OK) == 0) {
        enum kvp_status st = kvp_model_load(path, out, err);
        if (st != KVP_OK || strcasecmp((*out)->name, s) == 0)
            return st;
        kvp_model_free(*out); /* a file named for another model: let the catalog decide */
        *out = NULL;
    }
    if ((!repo_only && !strchr(s, '/')) || !(d = opendir(dir)))
        return kvp_fail(err, KVP_ERR_NOTFOUND, "unknown model '%s'", s);
    while ((e = readdir(d)) != NULL) {
        char *text = NULL;
        uint64_t len;
        bool hit;
        if (!is_yaml(e->d_name) || strcmp(e->d_name, "gpus.yaml") == 0 ||
            (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path ||
            kvp_read_file(path, 1u << 20, &text, &len, NULL, err) != KVP_OK)
            continue;
        hit = says_hf_id(text, s, repo_only);
        free(text);
        if (hit) {
            closedir(d);
            return kvp_model_load(path, out, err);
        }
    }
    closedir(d);
    return kvp_fail(err, KVP_ERR_NOTFOUND, "unknown model '%s'", s);
}

const struct kvp_model *kvp_catalog_find(const struct kvp_catalog *cat, const char *s)
{
    for (uint32_t i = 0; cat && i < cat->n; i++)
        if (strcasecmp(cat->models[i]->name, s) == 0 ||
            (cat->models[i]->hf_id[0] && strcasecmp(cat->models[i]->hf_id, s) == 0))
            return cat->models[i];
    return NULL;
}

/* What a Hugging Face id of a fine-tune or a quantized variant says about
 * its weights, by suffix (case-insensitive): geometry from the base model,
 * storage from the usual checkpoint of that kind. */
static const struct variant {
    const char *suffix;
    const char *method, *wq; /* NULL: the same weights as the base */
    uint32_t classes;
} variants[] = {
    {"-instruct", NULL, NULL, 0}, {"-chat", NULL, NULL, 0}, {"-it", NULL, NULL, 0}, {"-base", NULL, NULL, 0},
    {"-hf", NULL, NULL, 0}, {"-gguf", NULL, NULL, 0},
    /* AutoAWQ's default: 4-bit, group 128, zero points */
    {"-awq", "awq", "packed:bits=4:group=128:zp", KVP_WC_LINEAR},
    /* Qwen/AutoGPTQ releases: 4- or 8-bit, group 128, qzeros and g_idx saved */
    {"-gptq-int4", "gptq", "packed:bits=4:group=128:zp:g_idx", KVP_WC_LINEAR},
    {"-gptq-int8", "gptq", "packed:bits=8:group=128:zp:g_idx", KVP_WC_LINEAR},
    {"-gptq", "gptq", "packed:bits=4:group=128:zp:g_idx", KVP_WC_LINEAR},
    /* FineGrainedFP8 (Qwen, DeepSeek) and llm-compressor FP8 releases differ only in the scales */
    {"-fp8", "fp8", "fp8_e4m3:block=128x128", KVP_WC_LINEAR},
    {"-fp8-dynamic", "compressed-tensors", "fp8_e4m3:scale=channel:bf16", KVP_WC_LINEAR},
    {"-bnb-4bit", "bitsandbytes", "nf4:double", KVP_WC_LINEAR},
    {"-fp4", "modelopt", "nvfp4:tensor=8", KVP_WC_LINEAR},
    {"-nvfp4", "modelopt", "nvfp4:tensor=8", KVP_WC_LINEAR},
    {"-quantized.w4a16", "compressed-tensors", "packed:bits=4:group=128:scale=bf16:tensor=16", KVP_WC_LINEAR},
    {"-w4a16", "compressed-tensors", "packed:bits=4:group=128:scale=bf16:tensor=16", KVP_WC_LINEAR},
};

static bool strip_suffix(char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    if (n <= k || strcasecmp(s + n - k, suf) != 0)
        return false;
    s[n - k] = '\0';
    return true;
}

/* The repo part of id s less its known suffixes, into base; *v is the last
 * quantizing suffix met (NULL if none). False when s has none of them. */
static bool variant_base(const char *s, char *base, size_t n, const struct variant **v)
{
    const char *slash = strrchr(s, '/');
    bool stripped = false, more = true;

    *v = NULL;
    if ((size_t)snprintf(base, n, "%s", slash ? slash + 1 : s) >= n)
        return false;
    while (more) {
        more = false;
        for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
            if (strip_suffix(base, variants[i].suffix)) {
                if (variants[i].method && !*v)
                    *v = &variants[i];
                more = stripped = true;
            }
    }
    return stripped;
}

/* The catalog model a variant id names: its base (variant_base) equal to a
 * model's name or the repo part of its hf_id. */
static const struct kvp_model *find_variant(const struct kvp_catalog *cat, const char *s, const struct variant **v)
{
    char base[KVP_NAME_MAX];
    if (!variant_base(s, base, sizeof base, v))
        return NULL;
    for (uint32_t i = 0; cat && i < cat->n; i++) {
        const char *id = strrchr(cat->models[i]->hf_id, '/');
        if (strcasecmp(cat->models[i]->name, base) == 0 || (id && strcasecmp(id + 1, base) == 0))
            return cat->models[i];
    }
    return NULL;
}

/* A copy of catalog model m that the caller owns. */
static enum kvp_status copy_model(const struct kvp_model *m, struct kvp_model **out, struct kvp_error *err)
{
    if (!(*out = malloc(sizeof **out)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    memcpy(*out, m, sizeof **out);
    return KVP_OK;
}

/* s names a variant of catalog model base (v: its storage, or NULL): a copy
 * with the variant's id and storage, said in a warning. */
static enum kvp_status open_variant(const struct kvp_model *base, const struct variant *v, const char *s,
                                    struct kvp_model **out, struct kvp_error *err)
{
    struct kvp_model *m;
    enum kvp_status st;
    if ((st = copy_model(base, out, err)) != KVP_OK)
        return st;
    m = *out;
    snprintf(m->hf_id, sizeof m->hf_id, "%s", s);
    if (!v) {
        kvp_model_warn(m, "'%s' is read as %s (the same geometry and weights)", s, base->name);
        return KVP_OK;
    }
    memset(&m->wscheme, 0, sizeof m->wscheme);
    snprintf(m->wscheme.method, sizeof m->wscheme.method, "%s", v->method);
    m->wscheme.classes = v->classes;
    m->wscheme.assumed = true;
    if ((st = kvp_wq_parse(v->wq, &m->wscheme.q, err)) != KVP_OK) {
        free(m);
        return st;
    }
    kvp_model_warn(m, "'%s' is read as %s with its projections stored as %s checkpoints store them (%s), "
                   "assumed from the id: pass its config.json for the exact storage", s, base->name, v->method, v->wq);
    return KVP_OK;
}

enum kvp_status kvp_catalog_open_one(const char *dir, const char *s, bool with_variants, struct kvp_model **out,
                                     struct kvp_error *err)
{
    char base[KVP_NAME_MAX];
    const struct variant *v;
    struct kvp_model *b = NULL;
    enum kvp_status st;

    if ((st = open_exact(dir, s, false, out, err)) != KVP_ERR_NOTFOUND || !with_variants ||
        !variant_base(s, base, sizeof base, &v))
        return st;
    /* a variant: its base by name, else by the repo part of an hf_id, as find_variant matches it */
    if ((st = open_exact(dir, base, false, &b, err)) == KVP_ERR_NOTFOUND)
        st = open_exact(dir, base, true, &b, err);
    if (st != KVP_OK)
        return st == KVP_ERR_NOTFOUND ? kvp_fail(err, st, "unknown model '%s'", s) : st;
    st = open_variant(b, v, s, out, err);
    kvp_model_free(b);
    return st;
}

bool kvp_model_ref_is_path(const char *s)
{
    static const char *const ext[] = {".yaml", ".yml", ".json", ".gguf"};
    size_t n = strlen(s);
    if (strchr(s, '/'))
        return true;
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t e = strlen(ext[i]);
        if (n > e && strcasecmp(s + n - e, ext[i]) == 0)
            return true;
    }
    return false;
}

/* A model loaded from a cache or fetched for Hub reference r: named as the
 * Hub names it, its source the reference and where it was found (its file
 * is the local copy's path). */
static enum kvp_status load_hub(const struct kvp_hub_ref *r, const char *path, const char *from,
                                struct kvp_model **out, struct kvp_error *err)
{
    enum kvp_status st = kvp_model_load(path, out, err);
    const char *slash = strchr(r->repo, '/');
    struct kvp_model *m = *out;
    bool gguf;
    if (st != KVP_OK)
        return st;
    if (slash) {
        size_t i;
        for (i = 0; slash[1 + i] && i + 1 < sizeof m->name; i++)
            m->name[i] = (char)tolower((unsigned char)slash[1 + i]);
        m->name[i] = '\0';
        if (strlen(r->repo) < sizeof m->hf_id)
            memcpy(m->hf_id, r->repo, strlen(r->repo) + 1);
    }
    /* a GGUF picked of a repo is named: ORG/NAME@REV: FILE */
    gguf = !r->url[0] && strlen(path) > 5 && strcasecmp(path + strlen(path) - 5, ".gguf") == 0;
    snprintf(m->source, sizeof m->source, "%.200s%s%.60s%s%.100s (%.50s)", r->url[0] ? r->url : r->repo,
             r->url[0] ? "" : "@", r->url[0] ? "" : r->rev, gguf ? ": " : "",
             gguf ? strrchr(path, '/') ? strrchr(path, '/') + 1 : path : "", from);
    return KVP_OK;
}

/* s as a Hub reference (hub.h): from huggingface_hub's cache, kvplan's,
 * then the fetcher. KVP_ERR_NOTFOUND with *tried set when s is one but
 * nothing answered for it (offline, no fetcher, the Hub unreachable: a
 * variant may still answer), with *tried false when s is none. */
static enum kvp_status open_hub(const struct kvp_catalog *cat, const char *s, struct kvp_model **out,
                                bool *tried, struct kvp_error *err)
{
    const struct kvp_hub_env *e = cat->hub;
    struct kvp_hub_ref r;
    char path[KVP_TEXT_MAX];
    enum kvp_status st;

    *tried = false;
    if ((st = kvp_hub_ref_parse(s, &r, err)) != KVP_OK)
        return st;
    *tried = true;
    if (kvp_hub_cache_find(e->hf_cache, &r, !e->refresh, path, sizeof path, err) == KVP_OK)
        return load_hub(&r, path, "the Hugging Face cache", out, err);
    if (kvp_hub_cache_find(e->cache, &r, !e->refresh, path, sizeof path, err) == KVP_OK)
        return load_hub(&r, path, "kvplan's cache", out, err);
    if (e->offline || !cat->fetch)
        return kvp_fail(err, KVP_ERR_NOTFOUND,
                        "'%s' is not in the Hugging Face cache (%s) or kvplan's (%s), and %s", s,
                        e->hf_cache[0] ? e->hf_cache : "no HOME", e->cache[0] ? e->cache : "no HOME",
                        e->offline ? "HF_HUB_OFFLINE is set" : "this build has no Hub client");
    if ((st = cat->fetch(s, &r, e, path, sizeof path, err)) != KVP_OK)
        return st;
    return load_hub(&r, path, e->endpoint, out, err);
}

enum kvp_status kvp_model_open(const struct kvp_catalog *cat, const char *s, struct kvp_model **out,
                               struct kvp_error *err)
{
    struct stat sb;
    const struct kvp_model *found;
    const struct variant *v;
    const char *best = NULL;
    const char **names;
    bool exists = stat(s, &sb) == 0, tried = false;
    struct kvp_error hub = {0};
    enum kvp_status st;

    if (exists && kvp_model_ref_is_path(s))
        return kvp_model_load(s, out, err);
    if ((found = kvp_catalog_find(cat, s)) != NULL) /* a file of a built-in's plain name does not shadow it */
        return copy_model(found, out, err);
    if (cat && cat->hub && (st = open_hub(cat, s, out, &tried, &hub)) != KVP_ERR_NOTFOUND &&
        !(st == KVP_ERR_IO && find_variant(cat, s, &v))) {
        if (st != KVP_OK)
            *err = hub;
        return st;
    }
    if ((found = find_variant(cat, s, &v)) != NULL) {
        if ((st = open_variant(found, v, s, out, err)) == KVP_OK && tried && hub.code == KVP_ERR_IO)
            kvp_model_warn(*out, "the Hub did not answer for '%s' (%s)", s, hub.msg);
        return st;
    }
    if (tried && (hub.code != KVP_ERR_NOTFOUND || !exists)) {
        *err = hub;
        return hub.code;
    }
    if (exists)
        return kvp_model_load(s, out, err);
    if (cat && cat->n && (names = malloc(cat->n * sizeof *names)) != NULL) {
        for (uint32_t i = 0; i < cat->n; i++)
            names[i] = cat->models[i]->name;
        best = kvp_closest(s, names, cat->n, 3);
        free(names);
    }
    if (best)
        return kvp_fail(err, KVP_ERR_NOTFOUND, "unknown model '%s' (did you mean '%s'? 'kvplan models' lists them)", s,
                        best);
    return kvp_fail(err, KVP_ERR_NOTFOUND,
                    "unknown model '%s': not a file, a built-in model ('kvplan models') or a Hugging Face id "
                    "(ORG/NAME[@REV], ORG/NAME:TYPE for a GGUF repo, hf://ORG/NAME/FILE.gguf, an https URL of a GGUF)",
                    s);
}

void kvp_catalog_free(struct kvp_catalog *cat)
{
    if (!cat)
        return;
    for (uint32_t i = 0; i < cat->n; i++)
        kvp_model_free(cat->models[i]);
    free(cat->models);
    free(cat);
}
