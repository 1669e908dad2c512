/* client.h -- kvplan's Hub client: what it fetches of a model by Hub
 * reference, in which order and with which caps, into kvplan's cache
 * (client.c), over one transport call, hub_transfer, that each program
 * provides once:
 *
 *     curl.c   libcurl, in the kvplan-hub program the native kvplan runs
 *     page.c   the page: answers the browser fetched (web/page.js), and the
 *              requests it has no answer for yet, written down for the page
 *
 *     struct hub h = {0};
 *     kvp_hub_env_read(&h.env);
 *     h.link = ...;  (the transport's own state)
 *     if (hub_client_fetch(&h, "Qwen/Qwen3-32B", path, sizeof path, &err) == KVP_OK) ...
 *
 * The caller owns h and what h.link points to; the client allocates nothing
 * that outlives a call.
 */
#ifndef KVPLAN_HUB_CLIENT_H
#define KVPLAN_HUB_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvplan/error.h"
#include "kvplan/hub.h"
#include "kvplan/render.h"

struct hub_link; /* the transport's state: curl.c's or page.c's */

struct hub {
    struct kvp_hub_env env;
    struct kvp_hub_ref ref;
    long timeout;          /* seconds: connecting, and the longest a transfer may stall (KVPLAN_HUB_TIMEOUT) */
    uint32_t pending;      /* requests the transport has no answer for yet (page.c); the client goes on
                            * with the plan's other files so that one round asks for all it can */
    char commit[41];       /* the commit the revision resolved to; "" for a GGUF by URL */
    struct hub_link *link;
};

/* One answer to a GET: the status of the last response (redirects
 * followed), the Hub's X-Error-Code ("" when none), and the body of a 2xx
 * answer. */
struct hub_answer {
    long status;
    char code[64];
    struct kvp_buf body;
    bool over; /* the body went past max bytes: the transfer was cut there */
};

/* The transport: GET url, bytes [from, from + len) when len > 0, into a
 * (zeroed by the caller). The body is cut past max bytes (a->over) and not
 * read at all when a Range request is answered 200 (the whole file is
 * coming), nor for an error status. KVP_OK whenever an answer came, of any
 * status (the client judges it); an error when none did: the server could
 * not be reached or stalled, or (page.c, h->pending counted) the answer is
 * not there yet. */
enum kvp_status hub_transfer(struct hub *h, const char *url, uint64_t from, uint64_t len, size_t max,
                             struct hub_answer *a, struct kvp_error *err);

/* A transfer given up after h->timeout seconds without a byte. */
enum kvp_status hub_stalled(const struct hub *h, const char *url, struct kvp_error *err);

/* Fetches what kvplan reads of ref (a Hub reference, hub.h) into
 * h->env.cache, and puts where it is in out: the snapshot folder, or the
 * GGUF file. The revision is always resolved at the Hub; only the files the
 * commit's snapshot lacks are fetched. */
enum kvp_status hub_client_fetch(struct hub *h, const char *ref, char *out, size_t n, struct kvp_error *err);

#endif
