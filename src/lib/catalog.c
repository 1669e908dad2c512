/* catalog.c -- the directory of shipped models and MODEL resolution. */
#include "kvplan/catalog.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

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

const struct kvp_model *kvp_catalog_find(const struct kvp_catalog *cat, const char *s)
{
    for (uint32_t i = 0; cat && i < cat->n; i++)
        if (strcasecmp(cat->models[i]->name, s) == 0 ||
            (cat->models[i]->hf_id[0] && strcasecmp(cat->models[i]->hf_id, s) == 0))
            return cat->models[i];
    return NULL;
}

/* Edit distance, case-insensitive, for "did you mean". */
static unsigned distance(const char *a, const char *b)
{
    unsigned row[KVP_NAME_MAX + 1];
    size_t n = strlen(b);
    if (n > KVP_NAME_MAX)
        return 1000;
    for (size_t j = 0; j <= n; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; a[i - 1]; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= n; j++) {
            unsigned up = row[j];
            unsigned cost = (a[i - 1] | 32) != (b[j - 1] | 32);
            unsigned best = diag + cost;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[n];
}

enum kvp_status kvp_model_open(const struct kvp_catalog *cat, const char *s, struct kvp_model **out,
                               struct kvp_error *err)
{
    struct stat sb;
    const struct kvp_model *found;
    const char *best = NULL;
    unsigned best_d = 4;

    if (stat(s, &sb) == 0)
        return kvp_model_load(s, out, err);
    if ((found = kvp_catalog_find(cat, s)) != NULL) {
        if (!(*out = malloc(sizeof **out)))
            return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
        memcpy(*out, found, sizeof **out);
        return KVP_OK;
    }
    if (strlen(s) < KVP_NAME_MAX)
        for (uint32_t i = 0; cat && i < cat->n; i++) {
            unsigned dist = distance(s, cat->models[i]->name);
            if (dist < best_d) {
                best_d = dist;
                best = cat->models[i]->name;
            }
        }
    if (best)
        return kvp_fail(err, KVP_ERR_NOTFOUND, "unknown model '%s' (did you mean '%s'? 'kvplan models' lists them)", s, best);
    return kvp_fail(err, KVP_ERR_NOTFOUND, "unknown model '%s' (not a file; 'kvplan models' lists the built-in ones)", s);
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
