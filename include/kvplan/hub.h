/* hub.h -- models named by a Hugging Face Hub reference: what the reference
 * says, where the local caches keep its files, what the Hub's answers mean,
 * and which of a repo's files kvplan reads.
 *
 * No HTTP here: the transfers are the Hub client's (src/hub/client.c, in
 * kvplan-hub over libcurl and in the page over fetch()), which
 * writes what it fetched into kvplan's cache in the layout below, so the
 * parsers read it as they read any local folder or file (kvp_model_load).
 *
 *     ORG/NAME                     a repo at its main branch
 *     ORG/NAME@REV                 at a branch, tag or 40-hex commit
 *     ORG/NAME:TYPE                a GGUF repo's file of llama.cpp type TYPE (Q4_K_M)
 *     hf://ORG/NAME[@REV][/PATH]   the same, or one file of the repo
 *     https://HOST/.../FILE.gguf   a GGUF by URL
 *
 * A cache root is laid out as huggingface_hub lays out its cache
 * (file_download.py, hf_hub_download): models--ORG--NAME/refs/REV holds the
 * commit a branch or tag resolved to, models--ORG--NAME/snapshots/COMMIT/
 * the files of that commit. kvplan's own cache keeps there the repo's file
 * list (.kvplan-files), config.json and only the headers of its weight files
 * (a safetensors shard's 8 + N bytes; a GGUF up to its tensor table), and a
 * GGUF fetched by URL under urls/HASH/FILE. Every file is written whole or
 * not at all (a temporary name, renamed), config.json last: a snapshot with
 * a config.json is complete.
 */
#ifndef KVPLAN_HUB_H
#define KVPLAN_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"

#define KVP_HUB_REPO_MAX 200 /* ORG/NAME: the Hub allows 96 characters for each */
#define KVP_HUB_REV_MAX 128
#define KVP_HUB_FILE_MAX 256
#define KVP_HUB_PATH_MAX 1024
#define KVP_HUB_MAX_FILES 20000 /* files listed for one repo */

struct kvp_hub_ref {
    char repo[KVP_HUB_REPO_MAX]; /* "ORG/NAME"; "" for a URL */
    char rev[KVP_HUB_REV_MAX];   /* "main" unless @REV */
    char file[KVP_HUB_FILE_MAX]; /* one file of the repo (hf://ORG/NAME/PATH); "" = the model */
    char type[32];               /* a GGUF's llama.cpp type after ':' ("Q4_K_M"); "" = none */
    char url[KVP_HUB_PATH_MAX];  /* an http(s) URL of a GGUF; "" for a repo */
};

/* s as a Hub reference. KVP_ERR_NOTFOUND when s has none of the shapes
 * above (a built-in's name, "./x.yaml"), so a caller tries the next kind;
 * KVP_ERR_USAGE for one of them written wrong ("org/", "a/b@", "a/b/c"). */
KVP_API enum kvp_status kvp_hub_ref_parse(const char *s, struct kvp_hub_ref *r, struct kvp_error *err);

/* Is rev a full commit hash (40 lower-case hex digits)? */
KVP_API bool kvp_hub_is_commit(const char *rev);

/* Where models are looked for and how, from the environment as
 * huggingface_hub reads it (constants.py): hf_cache is HF_HUB_CACHE, else
 * HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub; cache is KVPLAN_CACHE, else
 * $XDG_CACHE_HOME/kvplan, else ~/.cache/kvplan; endpoint is HF_ENDPOINT, else https://huggingface.co;
 * offline is HF_HUB_OFFLINE set to 1, true, yes or on. */
struct kvp_hub_env {
    char hf_cache[KVP_HUB_PATH_MAX];
    char cache[KVP_HUB_PATH_MAX];
    char endpoint[KVP_HUB_PATH_MAX];
    bool offline;
    bool refresh; /* re-resolve a branch or tag at the Hub instead of reading refs/ (--refresh) */
};
KVP_API void kvp_hub_env_read(struct kvp_hub_env *e);

/* FNV-1a (64 bits) of s, continuing from h (KVP_HUB_FNV_SEED to start):
 * the names of what the caches keep by URL. */
#define KVP_HUB_FNV_SEED 0xcbf29ce484222325u
KVP_API uint64_t kvp_hub_fnv(uint64_t h, const char *s);

/* The folder of r in cache root `root`: ROOT/models--ORG--NAME, or for a URL
 * ROOT/urls/HASH (FNV-1a of the URL). False when it does not fit in n. */
KVP_API bool kvp_hub_repo_dir(const char *root, const struct kvp_hub_ref *r, char *out, size_t n);

/* The local copy of r in cache root `root`, into path: the snapshot folder
 * (a config.json in it) or the GGUF file r picks. A branch or tag is read
 * from refs/ unless use_refs is false (a commit never needs it).
 * KVP_ERR_NOTFOUND when the cache does not have it. */
KVP_API enum kvp_status kvp_hub_cache_find(const char *root, const struct kvp_hub_ref *r, bool use_refs, char *path,
                                   size_t n, struct kvp_error *err);

/* What the Hub's /api/models/ORG/NAME/revision/REV answers (huggingface_hub
 * HfApi.model_info): the commit and the repo's files ("siblings"). */
struct kvp_hub_info {
    char sha[41];
    uint32_t n_files;
    char **files; /* repo-relative paths */
};
KVP_API enum kvp_status kvp_hub_info_parse(const char *json, uint64_t len, const char *what, struct kvp_hub_info *out,
                                   struct kvp_error *err);
KVP_API void kvp_hub_info_free(struct kvp_hub_info *info);

/* Of a repo's files, the GGUF that r names: r->file if it is one; else the
 * one of llama.cpp type r->type (the type a whole word of the file's name,
 * any case: "Qwen3-8B-Q4_K_M.gguf" is Q4_K_M, "UD-Q4_K_XL" is not Q4_K); with
 * no type the only GGUF, else Q4_K_M, the type llama.cpp's -hf takes when
 * none is named (common/arg.cpp, the "latest" tag). mmproj files (vision
 * projectors) are never picked; of a split GGUF (-00001-of-00003) only the
 * first part counts. The index, or -1 with an error listing the types there are. */
KVP_API int32_t kvp_hub_pick_gguf(char *const *files, uint32_t n, const struct kvp_hub_ref *r, struct kvp_error *err);

/* What kvplan fetches of a file. */
enum kvp_hub_part {
    KVP_HUB_WHOLE,       /* the whole file (config.json: text, capped) */
    KVP_HUB_SAFETENSORS, /* 8 bytes, then the N bytes of JSON they count */
    KVP_HUB_GGUF,        /* a prefix, grown until the header and tensor table parse */
};

/* The files of a repo (listed in files) that kvplan reads for r, in the
 * order to fetch them, config.json last; *model is the index of the GGUF
 * that is the model, or -1 when the model is the folder (config.json).
 * want and part have room for n. KVP_ERR_NOTFOUND naming what is missing. */
KVP_API enum kvp_status kvp_hub_plan(const struct kvp_hub_ref *r, char *const *files, uint32_t n, uint32_t *want,
                             enum kvp_hub_part *part, uint32_t *n_want, int32_t *model, struct kvp_error *err);

/* The error a user can act on for an HTTP answer of `status` with the
 * Hub's X-Error-Code `code` ("" if none) to a request for `what` (a file or
 * "the repo's file list") of r. */
KVP_API enum kvp_status kvp_hub_http_error(const struct kvp_hub_ref *r, const char *endpoint, long status,
                                           const char *code, const char *what, struct kvp_error *err);

#endif
