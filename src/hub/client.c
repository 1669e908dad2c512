/* client.c -- the Hub client (client.h): fetches what kvplan reads of a
 * Hugging Face Hub model into kvplan's cache, whatever carries the bytes.
 *
 * What it fetches (hub.h kvp_hub_plan), never the weights: the Hub's file
 * list of the revision (GET /api/models/ORG/NAME/revision/REV, its "sha"
 * the commit every later request pins), config.json, each safetensors
 * shard's 8-byte length and JSON header by two Range requests, a GGUF's
 * prefix by Range requests of 1 MiB until its header and tensor table parse
 * (kvp_model_parse_gguf: KVP_ERR_TRUNCATED asks for more). A server that
 * ignores Range (200 for a Range request) is refused before its body is
 * read; every answer is capped. The transport (hub_transfer) only carries
 * bytes: every judgement of an answer is made here, once for both. */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kvplan/model.h"

#define MAX_LIST (8u << 20)   /* the Hub's answer listing a repo */
#define MAX_CONFIG (4u << 20) /* config.json: model_load.c's cap on text configs */
#define MAX_ST_HEADER (4u << 20) /* safetensors.c's MAX_HEADER */
#define GGUF_STEP (1u << 20)
#define MAX_GGUF (64u << 20) /* model_load.c's cap on what it reads of a GGUF */

enum kvp_status hub_stalled(const struct hub *h, const char *url, struct kvp_error *err)
{
    return kvp_fail(err, KVP_ERR_IO, "%s stalled for %ld s and was given up (KVPLAN_HUB_TIMEOUT)", url, h->timeout);
}

/* GET url (bytes [from, from + len) when len) into a->body, capped at max:
 * a 2xx answer, or a 416 to a range past the end (nothing more); any other
 * is an error a user can act on. */
static enum kvp_status get(struct hub *h, const char *url, uint64_t from, uint64_t len, size_t max,
                           const char *what, struct hub_answer *a, struct kvp_error *err)
{
    enum kvp_status st;

    memset(a, 0, sizeof *a);
    if ((st = hub_transfer(h, url, from, len, max, a, err)) != KVP_OK)
        return st;
    if (len && a->status == 200) /* the whole file was coming */
        return kvp_fail(err, KVP_ERR_IO,
                        "%s: the server ignored the Range request (HTTP 200, the whole file): kvplan reads "
                        "headers only and does not download weights", url);
    if (a->over)
        return kvp_fail(err, KVP_ERR_RANGE, "%s: %s is larger than the %zu bytes kvplan reads of it", url, what, max);
    if (a->status == 416 && len)
        return KVP_OK;
    if (a->status != 200 && a->status != 206)
        return kvp_hub_http_error(&h->ref, h->env.endpoint, a->status, a->code, what, err);
    if (a->body.nomem)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory reading %s", url);
    return KVP_OK;
}

/* s with every byte but unreserved ones and '/' (keep_slash) %-escaped. */
static bool escape(const char *s, bool keep_slash, char *out, size_t n)
{
    size_t o = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     strchr("-._~", c) || (keep_slash && c == '/');
        if (o + 4 >= n)
            return false;
        o += (size_t)(plain ? snprintf(out + o, n - o, "%c", c) : snprintf(out + o, n - o, "%%%02X", c));
    }
    out[o] = '\0';
    return true;
}

/* mkdir -p of path's folders (not its last part). */
static enum kvp_status make_dirs(const char *path, struct kvp_error *err)
{
    char buf[KVP_HUB_PATH_MAX * 2];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return kvp_fail_at(err, KVP_ERR_IO, buf, 0, 0, "cannot make the cache folder: %s", strerror(errno));
        *p = '/';
    }
    return KVP_OK;
}

static enum kvp_status save(const struct kvp_buf *b, const char *path, struct kvp_error *err)
{
    enum kvp_status st = make_dirs(path, err);
    return st == KVP_OK ? kvp_buf_save(b, path, err) : st;
}

static uint64_t le64(const char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | (uint8_t)p[i];
    return v;
}

/* A safetensors shard's 8 + N bytes into out. */
static enum kvp_status fetch_safetensors(struct hub *h, const char *url, const char *name, struct kvp_buf *out,
                                         struct kvp_error *err)
{
    struct hub_answer a;
    uint64_t n;
    enum kvp_status st;

    if ((st = get(h, url, 0, 8, 8, name, &a, err)) != KVP_OK)
        goto done;
    if (a.body.len < 8) {
        st = kvp_fail(err, KVP_ERR_TRUNCATED, "%s: %zu bytes, not a safetensors file (no header length)", name,
                      a.body.len);
        goto done;
    }
    if ((n = le64(a.body.data)) < 2 || n > MAX_ST_HEADER) {
        st = kvp_fail(err, KVP_ERR_RANGE, "%s: a safetensors header of %llu bytes (kvplan reads up to %u MiB)", name,
                      (unsigned long long)n, MAX_ST_HEADER >> 20);
        goto done;
    }
    kvp_buf_put(out, a.body.data, 8);
    kvp_buf_release(&a.body);
    if ((st = get(h, url, 8, n, (size_t)n, name, &a, err)) == KVP_OK && a.body.len != n)
        st = kvp_fail(err, KVP_ERR_TRUNCATED, "%s: truncated: the header says %llu bytes, the server sent %zu", name,
                      (unsigned long long)n, a.body.len);
    if (st == KVP_OK)
        kvp_buf_put(out, a.body.data, a.body.len);
done:
    kvp_buf_release(&a.body);
    return st;
}

/* A GGUF's prefix, grown a MiB at a time until its header parses. */
static enum kvp_status fetch_gguf(struct hub *h, const char *url, const char *name, struct kvp_buf *out,
                                  struct kvp_error *err)
{
    static struct kvp_model m; /* 100 KB: not on the stack */
    struct hub_answer a;
    enum kvp_status st;

    for (;;) {
        size_t had = out->len;
        if (out->len >= MAX_GGUF)
            return kvp_fail(err, KVP_ERR_RANGE, "%s: its header is larger than the %u MiB kvplan reads", name,
                            MAX_GGUF >> 20);
        if ((st = get(h, url, out->len, GGUF_STEP, GGUF_STEP, name, &a, err)) != KVP_OK) {
            kvp_buf_release(&a.body);
            return st;
        }
        kvp_buf_put(out, a.body.data, a.body.len);
        kvp_buf_release(&a.body);
        if (out->nomem)
            return kvp_fail(err, KVP_ERR_NOMEM, "out of memory reading %s", name);
        kvp_model_init(&m);
        st = kvp_model_parse_gguf((const uint8_t *)out->data, out->len, name, &m, err);
        if (st != KVP_ERR_TRUNCATED || out->len == had || out->len - had < GGUF_STEP)
            return st; /* parsed, a real error, or the file ended */
    }
}

/* One file of the plan into the snapshot, unless it is there already. */
static enum kvp_status fetch_file(struct hub *h, const char *snap, const char *name, enum kvp_hub_part part,
                                  struct kvp_error *err)
{
    char path[KVP_HUB_PATH_MAX * 2], url[KVP_HUB_PATH_MAX * 3], esc[KVP_HUB_FILE_MAX * 3], repo[KVP_HUB_REPO_MAX];
    struct kvp_buf b = {0};
    struct hub_answer a;
    struct stat sb;
    enum kvp_status st = KVP_OK;

    if ((size_t)snprintf(path, sizeof path, "%s/%s", snap, name) >= sizeof path)
        return kvp_fail(err, KVP_ERR_RANGE, "'%s': the cache path is too long", name);
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
        return KVP_OK;
    if (!escape(name, true, esc, sizeof esc) || !escape(h->ref.repo, true, repo, sizeof repo) ||
        (size_t)snprintf(url, sizeof url, "%s/%s/resolve/%s/%s", h->env.endpoint, repo, strrchr(snap, '/') + 1, esc) >=
            sizeof url)
        return kvp_fail(err, KVP_ERR_RANGE, "'%s': the URL is too long", name);
    if (part == KVP_HUB_WHOLE) {
        if ((st = get(h, url, 0, 0, MAX_CONFIG, name, &a, err)) == KVP_OK)
            kvp_buf_put(&b, a.body.data, a.body.len);
        kvp_buf_release(&a.body);
    } else if (part == KVP_HUB_SAFETENSORS) {
        st = fetch_safetensors(h, url, name, &b, err);
    } else {
        st = fetch_gguf(h, url, name, &b, err);
    }
    if (st == KVP_OK)
        st = save(&b, path, err);
    kvp_buf_release(&b);
    return st;
}

/* The repo's file list at the revision: its commit and files. */
static enum kvp_status list_repo(struct hub *h, struct kvp_hub_info *info, struct kvp_error *err)
{
    char url[KVP_HUB_PATH_MAX * 2], repo[KVP_HUB_REPO_MAX * 3], rev[KVP_HUB_REV_MAX * 3];
    struct hub_answer a;
    enum kvp_status st;

    if (!escape(h->ref.repo, true, repo, sizeof repo) || !escape(h->ref.rev, false, rev, sizeof rev) ||
        (size_t)snprintf(url, sizeof url, "%s/api/models/%s/revision/%s", h->env.endpoint, repo, rev) >= sizeof url)
        return kvp_fail(err, KVP_ERR_RANGE, "the Hub URL of '%s' is too long", h->ref.repo);
    if ((st = get(h, url, 0, 0, MAX_LIST, "the repo's file list", &a, err)) == KVP_OK)
        st = kvp_hub_info_parse(a.body.data ? a.body.data : "", a.body.len, url, info, err);
    kvp_buf_release(&a.body);
    return st;
}

/* The plan's files into the snapshot. A transport still waiting for an
 * answer (h->pending) does not end the round: the later files' first
 * requests are known already, and asked for in the same round. */
static enum kvp_status fetch_files(struct hub *h, const char *snap, const struct kvp_hub_info *info,
                                   const uint32_t *want, const enum kvp_hub_part *part, uint32_t n_want,
                                   struct kvp_error *err)
{
    enum kvp_status st = KVP_OK;
    for (uint32_t i = 0; i < n_want && (st == KVP_OK || h->pending); i++) {
        enum kvp_status one = fetch_file(h, snap, info->files[want[i]], part[i], err);
        st = st == KVP_OK ? one : st;
    }
    return st;
}

/* Everything kvplan reads of a repo at a revision, then refs/REV. */
static enum kvp_status fetch_repo(struct hub *h, char *out, size_t n, struct kvp_error *err)
{
    char dir[KVP_HUB_PATH_MAX], snap[KVP_HUB_PATH_MAX + 64], path[KVP_HUB_PATH_MAX + 128];
    struct kvp_hub_info info;
    uint32_t *want = NULL, n_want = 0;
    enum kvp_hub_part *part = NULL;
    int32_t model;
    struct kvp_buf b = {0};
    enum kvp_status st;

    if (!kvp_hub_repo_dir(h->env.cache, &h->ref, dir, sizeof dir))
        return kvp_fail(err, KVP_ERR_RANGE, "the cache path of '%s' is too long", h->ref.repo);
    if ((st = list_repo(h, &info, err)) != KVP_OK)
        return st;
    snprintf(h->commit, sizeof h->commit, "%s", info.sha);
    snprintf(snap, sizeof snap, "%s/snapshots/%s", dir, info.sha);
    if (!(want = malloc((info.n_files + 1) * sizeof *want)) || !(part = malloc((info.n_files + 1) * sizeof *part))) {
        st = kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = kvp_hub_plan(&h->ref, info.files, info.n_files, want, part, &n_want, &model, err)) != KVP_OK)
        goto done;
    for (uint32_t i = 0; i < info.n_files; i++)
        kvp_buf_printf(&b, "%s\n", info.files[i]);
    snprintf(path, sizeof path, "%s/.kvplan-files", snap);
    if ((st = save(&b, path, err)) != KVP_OK || (st = fetch_files(h, snap, &info, want, part, n_want, err)) != KVP_OK)
        goto done;
    if (!kvp_hub_is_commit(h->ref.rev)) {
        struct kvp_buf sha = {0};
        kvp_buf_printf(&sha, "%s", info.sha);
        st = (size_t)snprintf(path, sizeof path, "%s/refs/%s", dir, h->ref.rev) < sizeof path
                 ? save(&sha, path, err)
                 : kvp_fail(err, KVP_ERR_RANGE, "the cache path of '%s' is too long", h->ref.repo);
        kvp_buf_release(&sha);
    }
    if (st == KVP_OK && (size_t)(model < 0 ? snprintf(out, n, "%s", snap)
                                           : snprintf(out, n, "%s/%s", snap, info.files[model])) >= n)
        st = kvp_fail(err, KVP_ERR_RANGE, "the cache path of '%s' is too long", h->ref.repo);
done:
    kvp_buf_release(&b);
    free(want);
    free(part);
    kvp_hub_info_free(&info);
    return st;
}

/* A GGUF by URL: its prefix under urls/HASH/. */
static enum kvp_status fetch_url(struct hub *h, char *out, size_t n, struct kvp_error *err)
{
    char dir[KVP_HUB_PATH_MAX];
    struct kvp_buf b = {0};
    enum kvp_status st;

    if (!kvp_hub_repo_dir(h->env.cache, &h->ref, dir, sizeof dir) ||
        (size_t)snprintf(out, n, "%s/%s", dir, strrchr(h->ref.url, '/') + 1) >= n)
        return kvp_fail(err, KVP_ERR_RANGE, "the cache path of '%s' is too long", h->ref.url);
    if ((st = fetch_gguf(h, h->ref.url, h->ref.url, &b, err)) == KVP_OK)
        st = save(&b, out, err);
    kvp_buf_release(&b);
    return st;
}

enum kvp_status hub_client_fetch(struct hub *h, const char *ref, char *out, size_t n, struct kvp_error *err)
{
    const char *t = getenv("KVPLAN_HUB_TIMEOUT");
    enum kvp_status st;

    if ((st = kvp_hub_ref_parse(ref, &h->ref, err)) != KVP_OK)
        return st == KVP_ERR_NOTFOUND ? kvp_fail(err, KVP_ERR_USAGE, "'%s' is not a Hub reference", ref) : st;
    if (!h->env.cache[0])
        return kvp_fail(err, KVP_ERR_IO, "no cache folder: set XDG_CACHE_HOME or HOME");
    h->timeout = t && atol(t) > 0 ? atol(t) : 30;
    return h->ref.url[0] ? fetch_url(h, out, n, err) : fetch_repo(h, out, n, err);
}
