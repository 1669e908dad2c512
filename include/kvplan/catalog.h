/* catalog.h -- the shipped models: a directory of kvplan YAML files, and
 * resolving what a user types as MODEL.
 *
 *     struct kvp_catalog *cat = NULL;
 *     kvp_catalog_load("/usr/local/share/kvplan/models", &cat, &err);
 *     struct kvp_model *m = NULL;
 *     kvp_model_open(cat, "Llama-3.1-8B", &m, &err);   // id, HF id or a path
 *     ...
 *     kvp_model_free(m);
 *     kvp_catalog_free(cat);
 *
 * The catalog owns its models (sorted by name) until kvp_catalog_free;
 * kvp_model_open returns a model the caller owns.
 */
#ifndef KVPLAN_CATALOG_H
#define KVPLAN_CATALOG_H

#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"
#include "kvplan/hub.h"
#include "kvplan/model.h"

/* Fetches what no cache holds of Hub reference ref (parsed: r) into
 * kvplan's cache (hub.h's layout), the local path of the model into path:
 * the CLI's kvplan-hub. */
typedef enum kvp_status (*kvp_hub_fetch_fn)(const char *ref, const struct kvp_hub_ref *r,
                                            const struct kvp_hub_env *env, char *path, size_t n,
                                            struct kvp_error *err);

struct kvp_catalog {
    uint32_t n;
    struct kvp_model **models;
    /* models by Hub reference (hub.h), set by a front end: where the caches
     * are (NULL: no Hub references), and the fetcher (NULL: caches only) */
    const struct kvp_hub_env *hub;
    kvp_hub_fetch_fn fetch;
};

/* Load every *.yaml in dir. A file that fails to load fails the whole call
 * with its error: shipped data must be valid. */
KVP_API enum kvp_status kvp_catalog_load(const char *dir, struct kvp_catalog **out, struct kvp_error *err);

/* The catalog model whose name or hf_id equals s, ignoring case; NULL if none. */
KVP_API const struct kvp_model *kvp_catalog_find(const struct kvp_catalog *cat, const char *s);

/* The shipped model whose name or hf_id is s (ignoring case), loaded alone:
 * dir/<s>.yaml for a name, else the file whose `hf_id:` line says s (read as
 * text, not parsed); with `with_variants`, else the catalog model s is a
 * fine-tune or quantized variant of (kvp_model_open). KVP_ERR_NOTFOUND when
 * no file is it: the caller falls back to the whole catalog (Hub
 * references, suggestions). */
KVP_API enum kvp_status kvp_catalog_open_one(const char *dir, const char *s, bool with_variants, struct kvp_model **out,
                                     struct kvp_error *err);

/* Does a model reference name a file: a '/' in it, or a model file's
 * extension (.yaml .yml .json .gguf)? "./llama-3.1-8b" does, "llama-3.1-8b"
 * does not. */
KVP_API bool kvp_model_ref_is_path(const char *s);

/* Resolve MODEL, in this order: an existing file or directory given as a
 * path (kvp_model_ref_is_path); a catalog name or HF id (cat may be NULL);
 * a Hub reference (hub.h; with cat->hub) from huggingface_hub's cache, then
 * kvplan's, then fetched (cat->fetch, unless offline); a fine-tune or
 * quantized variant of a catalog model read from its id (when the Hub did
 * not answer: offline, unreachable); an existing file of that plain name.
 * So a file in the working directory named like a built-in never shadows
 * it: it is read only as ./NAME. An unknown name is KVP_ERR_NOTFOUND with
 * the closest names suggested. */
KVP_API enum kvp_status kvp_model_open(const struct kvp_catalog *cat, const char *s, struct kvp_model **out,
                               struct kvp_error *err);

KVP_API void kvp_catalog_free(struct kvp_catalog *cat);

#endif
