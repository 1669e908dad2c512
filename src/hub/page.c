/* page.c -- the Hub client's transport in the page (make web), and the
 * page's cli_hub_fetch: client.c runs unchanged in the browser.
 *
 * A request from WebAssembly is synchronous, and a synchronous request can
 * be neither capped nor given up, so this transport never makes one. It
 * answers from the files web/page.js wrote into the module's file system
 * before the command ran, ANSWERS/KEY, KEY naming the request (URL, range,
 * cap); a request with no answer yet is written to WANTS and counted
 * (h->pending), and the client goes on with the plan's other files, so one
 * run asks for every request it can know. page.js fetches them (Range,
 * cap, stall timeout, the refusal of a 200 to a Range request: the rules
 * curl.c's transfers follow), writes the answers into a fresh module
 * instance and runs the command again, until nothing is wanted. An answer
 * file is one line, then the body:
 *
 *     http STATUS X-ERROR-CODE   (the code "-" when none; the body of a 2xx
 *                                 answer follows, at most MAX + 1 bytes)
 *     unreachable WHY            (fetch() failed: no network, or CORS)
 *     stalled                    (no byte for TIMEOUT seconds)
 *
 * and a line of WANTS is "KEY FROM LEN MAX TIMEOUT URL" (LEN 0: no Range).
 * After a repo resolves, PINNED holds the reference pinned to its commit,
 * for the page's link. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "client.h"

#define ANSWERS "/hub/answers/" /* web/page.js's HUB_DIR: the folder page.js makes */
#define WANTS "/hub/wants"
#define PINNED "/hub/pinned"

/* FNV-1a (64 bits) of the request, in hex: the answer's file name. */
static void key_of(const char *url, uint64_t from, uint64_t len, size_t max, char key[17])
{
    char tail[80];
    snprintf(tail, sizeof tail, " %" PRIu64 " %" PRIu64 " %zu", from, len, max);
    snprintf(key, 17, "%016" PRIx64, kvp_hub_fnv(kvp_hub_fnv(KVP_HUB_FNV_SEED, url), tail));
}

/* An answer file into a: its line, then its body (cut past max). */
static enum kvp_status read_answer(FILE *f, struct hub *h, const char *url, size_t max, struct hub_answer *a,
                                   struct kvp_error *err)
{
    char line[KVP_ERROR_MSG_MAX], chunk[1 << 16];
    size_t k;

    if (!fgets(line, sizeof line, f))
        return kvp_fail(err, KVP_ERR_IO, "%s: the page's answer is empty", url);
    line[strcspn(line, "\n")] = '\0';
    if (strcmp(line, "stalled") == 0)
        return hub_stalled(h, url, err);
    if (strncmp(line, "unreachable ", 12) == 0)
        return kvp_fail(err, KVP_ERR_IO,
                        "cannot reach %s (%s): no network, or the server does not let a page read it (CORS)",
                        h->env.endpoint, line + 12);
    if (sscanf(line, "http %ld %63s", &a->status, a->code) != 2)
        return kvp_fail(err, KVP_ERR_IO, "%s: the page's answer '%.80s' is not one page.c reads", url, line);
    if (strcmp(a->code, "-") == 0)
        a->code[0] = '\0';
    while (!a->over && (k = fread(chunk, 1, sizeof chunk, f)) > 0) {
        a->over = a->body.len + k > max;
        kvp_buf_put(&a->body, chunk, a->over ? max - a->body.len : k);
    }
    return KVP_OK;
}

enum kvp_status hub_transfer(struct hub *h, const char *url, uint64_t from, uint64_t len, size_t max,
                             struct hub_answer *a, struct kvp_error *err)
{
    char key[17], path[sizeof ANSWERS + 16];
    enum kvp_status st;
    FILE *f;

    key_of(url, from, len, max, key);
    snprintf(path, sizeof path, "%s%s", ANSWERS, key);
    if ((f = fopen(path, "rb")) != NULL) {
        st = read_answer(f, h, url, max, a, err);
        fclose(f);
        return st;
    }
    if (strpbrk(url, "\r\n")) /* it would end its line of WANTS */
        return kvp_fail(err, KVP_ERR_USAGE, "'%.80s': a URL with a line break", url);
    if (!(f = fopen(WANTS, "a")))
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s: this build reaches the Hub only in its page (web/page.js)",
                        url);
    fprintf(f, "%s %" PRIu64 " %" PRIu64 " %zu %ld %s\n", key, from, len, max, h->timeout, url);
    if (fclose(f) != 0)
        return kvp_fail(err, KVP_ERR_IO, "%s: cannot write %s", url, WANTS);
    h->pending++;
    return kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s: not fetched yet", url);
}

/* ORG/NAME@COMMIT[:TYPE], or hf://ORG/NAME@COMMIT/FILE, into PINNED: a
 * link naming it gives the same answer later. Only the link needs it, so
 * a failure to write it is no error of the command. */
static void pin(const struct kvp_hub_ref *r, const char *commit)
{
    FILE *f = fopen(PINNED, "w");
    if (!f)
        return;
    if (r->file[0])
        fprintf(f, "hf://%s@%s/%s", r->repo, commit, r->file);
    else
        fprintf(f, "%s@%s%s%s", r->repo, commit, r->type[0] ? ":" : "", r->type);
    fclose(f);
}

enum kvp_status cli_hub_fetch(const char *ref, const struct kvp_hub_ref *r, const struct kvp_hub_env *env,
                              char *path, size_t n, struct kvp_error *err)
{
    struct hub h = {.env = *env};
    enum kvp_status st = hub_client_fetch(&h, ref, path, n, err);

    (void)r; /* the client parses ref itself, as kvplan-hub gets it as text */
    if (h.pending)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                        "'%s': %" PRIu32 " requests to %s are not answered yet: the page fetches them and runs the "
                        "command again", ref, h.pending, env->endpoint);
    if (st == KVP_OK && h.commit[0])
        pin(&h.ref, h.commit);
    return st;
}
