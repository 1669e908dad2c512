/* curl.c -- kvplan-hub: the Hub client (client.c) over libcurl. It fetches
 * what kvplan reads of a Hugging Face Hub model into kvplan's cache, and
 * says where it put it.
 *
 *     kvplan-hub REF
 *
 * prints one line: "ok PATH" (the snapshot folder, or the GGUF file), or
 * "error CODE MESSAGE" (CODE an enum kvp_status), and exits 0 or 2. kvplan
 * (src/cli/hub.c) runs it when no cache holds REF (or --refresh asks
 * the Hub again where a branch is now). It is a program of its own because
 * kvplan is linked statically (Makefile) and libcurl cannot be: only a
 * command that fetches pays for loading libcurl and TLS.
 *
 * Redirects are followed (the Hub sends LFS files to its CDN); HF_TOKEN (or
 * the token file huggingface_hub writes) is sent as a Bearer token, never
 * printed. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client.h"

struct hub_link {
    CURL *curl;
    struct curl_slist *auth; /* "Authorization: Bearer ..." or NULL */
};

/* One transfer's progress: what on_body and on_header write into. */
struct transfer {
    struct hub_answer *a;
    size_t max;
    bool ranged, stopped; /* stopped: cut on purpose (past max, or a 200 to a Range request) */
    CURL *curl;
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    struct transfer *t = ctx;
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    if (t->ranged && status == 200) { /* the whole file is coming: refuse it */
        t->stopped = true;
        return 0;
    }
    if (status >= 300) /* an error's text: the status and X-Error-Code say it all */
        return size * n;
    if (t->a->body.len + size * n > t->max) {
        t->a->over = t->stopped = true;
        return 0;
    }
    kvp_buf_put(&t->a->body, p, size * n);
    return t->a->body.nomem ? 0 : size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    struct transfer *t = ctx;
    size_t len = size * n, k = strlen("x-error-code:");
    if (len > k && strncasecmp(p, "x-error-code:", k) == 0) {
        const char *v = p + k;
        size_t m = len - k;
        while (m && (*v == ' ' || *v == '\t'))
            v++, m--;
        while (m && (v[m - 1] == '\r' || v[m - 1] == '\n' || v[m - 1] == ' '))
            m--;
        snprintf(t->a->code, sizeof t->a->code, "%.*s", (int)(m < sizeof t->a->code ? m : sizeof t->a->code - 1), v);
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
        return hub_stalled(h, url, err);
    default:
        return kvp_fail(err, KVP_ERR_IO, "%s: %s", url, curl_easy_strerror(rc));
    }
}

enum kvp_status hub_transfer(struct hub *h, const char *url, uint64_t from, uint64_t len, size_t max,
                             struct hub_answer *a, struct kvp_error *err)
{
    struct transfer t = {.a = a, .max = max, .ranged = len > 0, .curl = h->link->curl};
    CURL *c = h->link->curl;
    char range[64];
    CURLcode rc;

    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h->link->auth);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, h->timeout);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, h->timeout);
    if (len) {
        snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)from, (unsigned long long)(from + len - 1));
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    } else {
        curl_easy_setopt(c, CURLOPT_RANGE, NULL);
    }
    rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
    return rc == CURLE_OK || t.stopped ? KVP_OK : transfer_error(h, rc, url, err);
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
    struct hub_link link = {0};
    char tok[512], header[600];
    enum kvp_status st;

    if (!(link.curl = curl_easy_init()))
        return kvp_fail(err, KVP_ERR_NOMEM, "libcurl did not start");
    if (read_token(tok, sizeof tok)) {
        snprintf(header, sizeof header, "Authorization: Bearer %s", tok);
        link.auth = curl_slist_append(NULL, header);
        memset(tok, 0, sizeof tok);
        memset(header, 0, sizeof header);
    }
    curl_easy_setopt(link.curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(link.curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(link.curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(link.curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(link.curl, CURLOPT_USERAGENT, "kvplan/" KVP_VERSION);
    curl_easy_setopt(link.curl, CURLOPT_NOSIGNAL, 1L);
    h->link = &link;
    st = hub_client_fetch(h, ref, out, n, err);
    curl_slist_free_all(link.auth);
    curl_easy_cleanup(link.curl);
    return st;
}

int main(int argc, char **argv)
{
    struct hub h;
    struct kvp_error err = {0};
    char path[KVP_HUB_PATH_MAX * 2];
    enum kvp_status st;

    memset(&h, 0, sizeof h);
    kvp_hub_env_read(&h.env);
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: kvplan-hub REF   (kvplan runs it for a model by Hub reference: kvplan(1), MODEL)\n");
        return 2;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        printf("error %d libcurl did not start\n", KVP_ERR_IO);
        return 2;
    }
    st = run(&h, argv[1], path, sizeof path, &err);
    curl_global_cleanup();
    if (st != KVP_OK) {
        char text[KVP_ERROR_TEXT_MAX];
        printf("error %d %s\n", st, kvp_error_text(&err, text, sizeof text));
        return 2;
    }
    printf("ok %s\n", path);
    return 0;
}
