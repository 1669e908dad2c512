/* fetch.c -- kvplan-hub: fetches what kvplan reads of a Hugging Face Hub
 * model into kvplan's cache, and says where it put it.
 *
 *     kvplan-hub REF
 *
 * prints one line: "ok PATH" (the snapshot folder, or the GGUF file), or
 * "error CODE MESSAGE" (CODE an enum kvp_status), and exits 0 or 2. kvplan
 * (src/cli/hub.c) runs it when no cache holds REF (or --refresh asks
 * the Hub again where a branch is now); it always resolves the revision at
 * the Hub, and fetches only the files the commit's snapshot lacks. It is a program of its
 * own because kvplan is linked statically (Makefile) and libcurl cannot be:
 * only a command that fetches pays for loading libcurl and TLS.
 *
 * What it fetches (hub.h kvp_hub_plan), never the weights: the Hub's file
 * list of the revision (GET /api/models/ORG/NAME/revision/REV, its "sha"
 * the commit every later request pins), config.json, each safetensors
 * shard's 8-byte length and JSON header by two Range requests, a GGUF's
 * prefix by Range requests of 1 MiB until its header and tensor table parse
 * (kvp_model_parse_gguf: KVP_ERR_TRUNCATED asks for more). A server that
 * ignores Range (200 for a Range request) is refused before its body is
 * read; every answer is capped. Redirects are followed (the Hub sends LFS
 * files to its CDN); HF_TOKEN (or the token file huggingface_hub writes)
 * is sent as a Bearer token, never printed. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvplan/hub.h"
#include "kvplan/model.h"
#include "kvplan/render.h"

#define MAX_LIST (8u << 20)   /* the Hub's answer listing a repo */
#define MAX_CONFIG (4u << 20) /* config.json: model_load.c's cap on text configs */
#define MAX_ST_HEADER (4u << 20) /* safetensors.c's MAX_HEADER */
#define GGUF_STEP (1u << 20)
#define MAX_GGUF (64u << 20) /* model_load.c's cap on what it reads of a GGUF */

struct hub {
    CURL *curl;
    struct curl_slist *auth; /* "Authorization: Bearer ..." or NULL */
    struct kvp_hub_env env;
    struct kvp_hub_ref ref;
    long timeout; /* seconds: connecting, and the longest a transfer may stall */
};

/* One answer: its body (at most max bytes), status and X-Error-Code. */
struct answer {
    struct kvp_buf body;
    size_t max;
    bool ranged, over, ignored_range;
    char code[64];
    CURL *curl;
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    struct answer *a = ctx;
    long status = 0;
    curl_easy_getinfo(a->curl, CURLINFO_RESPONSE_CODE, &status);
    if (a->ranged && status == 200) { /* the whole file is coming: refuse it */
        a->ignored_range = true;
        return 0;
    }
    if (status >= 300) { /* an error's text: kept short, never a reason to stop */
        if (a->body.len + size * n <= 4096)
            kvp_buf_put(&a->body, p, size * n);
        return size * n;
    }
    if (a->body.len + size * n > a->max) {
        a->over = true;
        return 0;
    }
    kvp_buf_put(&a->body, p, size * n);
    return a->body.nomem ? 0 : size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    struct answer *a = ctx;
    size_t len = size * n, k = strlen("x-error-code:");
    if (len > k && strncasecmp(p, "x-error-code:", k) == 0) {
        const char *v = p + k;
        size_t m = len - k;
        while (m && (*v == ' ' || *v == '\t'))
            v++, m--;
        while (m && (v[m - 1] == '\r' || v[m - 1] == '\n' || v[m - 1] == ' '))
            m--;
        snprintf(a->code, sizeof a->code, "%.*s", (int)(m < sizeof a->code ? m : sizeof a->code - 1), v);
    }
    return len;
}

/* The failure of a transfer curl could not finish, said for a user. */
static enum kvp_status transfer_error(struct hub *h, CURLcode rc, const char *url, struct kvp_error *err)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        return kvp_fail(err, KVP_ERR_IO,
                        "cannot reach %s (%s): no network? With HF_HUB_OFFLINE=1 kvplan reads the caches only",
                        h->env.endpoint, curl_easy_strerror(rc));
    case CURLE_OPERATION_TIMEDOUT:
        return kvp_fail(err, KVP_ERR_IO, "%s stalled for %ld s and was given up (KVPLAN_HUB_TIMEOUT)", url,
                        h->timeout);
    default:
        return kvp_fail(err, KVP_ERR_IO, "%s: %s", url, curl_easy_strerror(rc));
    }
}

/* GET url (bytes [from, from + len) when len) into a->body, capped at max. */
static enum kvp_status get(struct hub *h, const char *url, uint64_t from, uint64_t len, size_t max,
                           const char *what, struct answer *a, struct kvp_error *err)
{
    char range[64];
    long status = 0;
    CURLcode rc;

    memset(a, 0, sizeof *a);
    a->max = max;
    a->ranged = len > 0;
    a->curl = h->curl;
    curl_easy_setopt(h->curl, CURLOPT_URL, url);
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, h->auth);
    curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h->curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, a);
    if (len) {
        snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)from, (unsigned long long)(from + len - 1));
        curl_easy_setopt(h->curl, CURLOPT_RANGE, range);
    } else {
        curl_easy_setopt(h->curl, CURLOPT_RANGE, NULL);
    }
    rc = curl_easy_perform(h->curl);
    curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
    if (a->ignored_range)
        return kvp_fail(err, KVP_ERR_IO,
                        "%s: the server ignored the Range request (HTTP 200, the whole file): kvplan reads "
                        "headers only and does not download weights", url);
    if (a->over)
        return kvp_fail(err, KVP_ERR_RANGE, "%s: %s is larger than the %zu bytes kvplan reads of it", url, what, max);
    if (rc != CURLE_OK)
        return transfer_error(h, rc, url, err);
    if (status == 416 && len) /* the range starts past the end: nothing more */
        return KVP_OK;
    if (status != 200 && status != 206)
        return kvp_hub_http_error(&h->ref, h->env.endpoint, status, a->code, what, err);
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
    struct answer a;
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
    struct answer a;
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
    struct answer a;
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
    struct answer a;
    enum kvp_status st;

    if (!escape(h->ref.repo, true, repo, sizeof repo) || !escape(h->ref.rev, false, rev, sizeof rev) ||
        (size_t)snprintf(url, sizeof url, "%s/api/models/%s/revision/%s", h->env.endpoint, repo, rev) >= sizeof url)
        return kvp_fail(err, KVP_ERR_RANGE, "the Hub URL of '%s' is too long", h->ref.repo);
    if ((st = get(h, url, 0, 0, MAX_LIST, "the repo's file list", &a, err)) == KVP_OK)
        st = kvp_hub_info_parse(a.body.data ? a.body.data : "", a.body.len, url, info, err);
    kvp_buf_release(&a.body);
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
    if ((st = save(&b, path, err)) != KVP_OK)
        goto done;
    for (uint32_t i = 0; i < n_want && st == KVP_OK; i++)
        st = fetch_file(h, snap, info.files[want[i]], part[i], err);
    if (st == KVP_OK && !kvp_hub_is_commit(h->ref.rev)) {
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

/* HF_TOKEN, else the file HF_TOKEN_PATH, HF_HOME/token or
 * ~/.cache/huggingface/token names (huggingface_hub constants.py). */
static bool read_token(char *tok, size_t n)
{
    const char *v = getenv("HF_TOKEN"), *home = getenv("HOME");
    char path[KVP_HUB_PATH_MAX];
    FILE *f;
    size_t k;

    if (v && *v)
        return (size_t)snprintf(tok, n, "%s", v) < n;
    if ((v = getenv("HF_TOKEN_PATH")) && *v)
        snprintf(path, sizeof path, "%s", v);
    else if ((v = getenv("HF_HOME")) && *v)
        snprintf(path, sizeof path, "%s/token", v);
    else if (home)
        snprintf(path, sizeof path, "%s/.cache/huggingface/token", home);
    else
        return false;
    if (!(f = fopen(path, "r")))
        return false;
    k = fread(tok, 1, n - 1, f);
    fclose(f);
    tok[k] = '\0';
    tok[strcspn(tok, "\r\n")] = '\0';
    return tok[0] != '\0';
}

static enum kvp_status run(struct hub *h, const char *ref, char *out, size_t n, struct kvp_error *err)
{
    char tok[512], header[600];
    const char *t = getenv("KVPLAN_HUB_TIMEOUT");
    enum kvp_status st;

    if ((st = kvp_hub_ref_parse(ref, &h->ref, err)) != KVP_OK)
        return st == KVP_ERR_NOTFOUND ? kvp_fail(err, KVP_ERR_USAGE, "'%s' is not a Hub reference", ref) : st;
    if (!h->env.cache[0])
        return kvp_fail(err, KVP_ERR_IO, "no cache folder: set XDG_CACHE_HOME or HOME");
    h->timeout = t && atol(t) > 0 ? atol(t) : 30;
    if (!(h->curl = curl_easy_init()))
        return kvp_fail(err, KVP_ERR_NOMEM, "libcurl did not start");
    if (read_token(tok, sizeof tok)) {
        snprintf(header, sizeof header, "Authorization: Bearer %s", tok);
        h->auth = curl_slist_append(NULL, header);
        memset(tok, 0, sizeof tok);
        memset(header, 0, sizeof header);
    }
    curl_easy_setopt(h->curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h->curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(h->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h->curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT, h->timeout);
    curl_easy_setopt(h->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h->curl, CURLOPT_LOW_SPEED_TIME, h->timeout);
    curl_easy_setopt(h->curl, CURLOPT_USERAGENT, "kvplan/" KVP_VERSION);
    curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
    st = h->ref.url[0] ? fetch_url(h, out, n, err) : fetch_repo(h, out, n, err);
    curl_slist_free_all(h->auth);
    curl_easy_cleanup(h->curl);
    return st;
}

int main(int argc, char **argv)
{
    struct hub h;
    struct kvp_error err = {0};
    char path[KVP_HUB_PATH_MAX * 2];
    const char *ref = NULL;
    enum kvp_status st;

    memset(&h, 0, sizeof h);
    kvp_hub_env_read(&h.env);
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: kvplan-hub REF   (kvplan runs it for a model by Hub reference: kvplan(1), MODEL)\n");
        return 2;
    }
    ref = argv[1];
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        printf("error %d libcurl did not start\n", KVP_ERR_IO);
        return 2;
    }
    st = run(&h, ref, path, sizeof path, &err);
    curl_global_cleanup();
    if (st != KVP_OK) {
        char text[KVP_ERROR_TEXT_MAX];
        printf("error %d %s\n", st, kvp_error_text(&err, text, sizeof text));
        return 2;
    }
    printf("ok %s\n", path);
    return 0;
}
