/* sim_workload.c -- workloads for the simulator: seeded synthetic traffic and
 * trace files (CSV or JSONL), docs/simulate.md "Workloads". */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/io.h"
#include "kvplan/num.h"
#include "kvplan/sim.h"
#include "sim_int.h"

/* ---- a deterministic generator: SplitMix64 (Steele, Lea, Flood 2014) ----
 * src/ref has a PCG of its own, internal to the decoder; the simulator keeps
 * its stream independent of it so either can change without the other's
 * results moving. */
KVP_WRAPS static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) /* in [0, 1) with 53 bits */
{
    return (double)(splitmix(s) >> 11) * 0x1.0p-53;
}

static uint32_t draw(uint64_t *s, struct kvp_range r)
{
    return r.lo == r.hi ? r.lo : r.lo + (uint32_t)(splitmix(s) % ((uint64_t)r.hi - r.lo + 1));
}

static enum kvp_status alloc_requests(struct kvp_workload *w, uint64_t n, struct kvp_error *err)
{
    w->req = calloc(n ? n : 1, sizeof *w->req);
    if (!w->req)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory for %llu requests", (unsigned long long)n);
    return KVP_OK;
}

enum kvp_status kvp_range_parse(const char *v, struct kvp_range *r, struct kvp_error *err)
{
    const char *dash = strchr(v, '-');
    uint64_t lo, hi;
    char a[32];
    enum kvp_status st;
    if (dash && (size_t)(dash - v) < sizeof a) {
        memcpy(a, v, (size_t)(dash - v));
        a[dash - v] = '\0';
        if ((st = kvp_parse_count(a, &lo, err)) != KVP_OK || (st = kvp_parse_count(dash + 1, &hi, err)) != KVP_OK)
            return st; /* the count's own status: USAGE, or RANGE past 64 bits */
    } else if ((st = kvp_parse_count(v, &lo, err)) != KVP_OK) {
        return st;
    } else {
        hi = lo;
    }
    if (lo == 0 || lo > hi || hi > UINT32_MAX)
        return kvp_fail(err, KVP_ERR_USAGE, "must be N or LO-HI with 1 <= LO <= HI < 2^32 (got '%.40s')", v);
    r->lo = (uint32_t)lo;
    r->hi = (uint32_t)hi;
    return KVP_OK;
}

/* ---- the synthetic workload's keys ---- */

static const struct kvp_synth_key synth_keys[] = {
    {"rate", "rate", "R", KVP_SYNTH_RATE, true, "requests per second, Poisson arrivals (0: all at once; default 1)"},
    {"prompt", "prompt", "N|LO-HI", KVP_SYNTH_RANGE, true, "prompt tokens, N or LO-HI drawn uniformly (default 1024)"},
    {"output", "output", "N|LO-HI", KVP_SYNTH_RANGE, true, "output tokens, N or LO-HI drawn uniformly (default 256)"},
    {"requests", "requests", "N", KVP_SYNTH_COUNT, true, "how many requests (default 1000)"},
    {"seed", "seed", "S", KVP_SYNTH_SEED, true, "the generator's seed: the same seed, the same workload (default 1)"},
    {"prefix", "prefix", "N", KVP_SYNTH_PREFIX, true,
     "tokens of a shared prefix (system prompt) at the start of prompts (default 0: none)"},
    {"prefix_share", "prefix-share", "F", KVP_SYNTH_FRACTION, true,
     "fraction of requests that start with the prefix, 0 to 1 (default 1 with a prefix)"},
    {"max_queue", "max-queue", "S", KVP_SYNTH_SECONDS, false,
     "seconds: sustained is no preemption and queueing p99 at most this (default 1)"},
};
_Static_assert(sizeof synth_keys / sizeof synth_keys[0] == KVP_SYNTH_KEYS, "KVP_SYNTH_KEYS counts the rows");

const struct kvp_synth_key *kvp_synth_key_at(uint32_t row)
{
    return row < KVP_SYNTH_KEYS ? &synth_keys[row] : NULL;
}

static const struct kvp_synth_key *synth_key(const char *key)
{
    for (size_t i = 0; i < KVP_SYNTH_KEYS; i++)
        if (strcmp(key, synth_keys[i].key) == 0 || strcmp(key, synth_keys[i].opt) == 0)
            return &synth_keys[i];
    return NULL;
}

/* A decimal number in [lo, hi] ("5", "0.5", "1e3"; not "0x10" or "inf"). */
static enum kvp_status real(const char *v, double lo, double hi, const char *what, double *out, struct kvp_error *err)
{
    char *end;
    double x = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || strspn(v, "+-0123456789.eE") != strlen(v) || !isfinite(x) || x < lo || x > hi)
        return kvp_fail(err, KVP_ERR_USAGE, "must be %s (got '%.40s')", what, v);
    *out = x;
    return KVP_OK;
}

/* A count in [lo, hi] as kvp_parse_count reads it. */
static enum kvp_status count(const char *v, uint64_t lo, uint64_t hi, const char *what, uint64_t *out,
                             struct kvp_error *err)
{
    enum kvp_status st = kvp_parse_count(v, out, err);
    if (st != KVP_OK)
        return st;
    if (*out < lo || *out > hi)
        return kvp_fail(err, KVP_ERR_USAGE, "must be %llu to %llu %s (got '%.40s')", (unsigned long long)lo,
                        (unsigned long long)hi, what, v);
    return KVP_OK;
}

enum kvp_status kvp_synth_set(struct kvp_synth *s, double *max_queue_s, const char *key, const char *v,
                              struct kvp_error *err)
{
    const struct kvp_synth def = KVP_SYNTH_DEFAULTS;
    const struct kvp_synth_key *k = synth_key(key);
    struct kvp_range *r;
    uint64_t u = 0;
    enum kvp_status st;

    if (!k)
        return kvp_fail(err, KVP_ERR_USAGE, "'%s' is not a workload key", key);
    r = strcmp(k->key, "prompt") == 0 ? &s->prompt : &s->output;
    switch (k->kind) {
    case KVP_SYNTH_RATE:
        if (!v)
            s->rate = def.rate;
        return v ? real(v, 0, INFINITY, "a number of requests/s >= 0", &s->rate, err) : KVP_OK;
    case KVP_SYNTH_RANGE:
        if (!v)
            *r = r == &s->prompt ? def.prompt : def.output;
        return v ? kvp_range_parse(v, r, err) : KVP_OK;
    case KVP_SYNTH_COUNT:
        if (v && (st = count(v, 1, KVP_SIM_MAX_REQUESTS, "requests", &u, err)) != KVP_OK)
            return st;
        s->requests = v ? (uint32_t)u : def.requests;
        return KVP_OK;
    case KVP_SYNTH_SEED:
        if (v && (st = kvp_parse_count(v, &u, err)) != KVP_OK)
            return st;
        s->seed = v ? u : def.seed;
        return KVP_OK;
    case KVP_SYNTH_PREFIX: /* NULL, 0 and "none" leave u at 0: no prefix */
        if (v && strcmp(v, "none") != 0 && (st = count(v, 0, UINT32_MAX, "tokens", &u, err)) != KVP_OK)
            return st;
        s->prefix_share = !u ? 0.0 : s->prefix ? s->prefix_share : 1.0;
        s->prefix = (uint32_t)u;
        return KVP_OK;
    case KVP_SYNTH_FRACTION:
        if (v && !s->prefix)
            return kvp_fail(err, KVP_ERR_USAGE, "needs a prefix (the shared tokens)");
        if (!v)
            s->prefix_share = s->prefix ? 1.0 : 0.0;
        return v ? real(v, 0, 1, "a fraction from 0 to 1", &s->prefix_share, err) : KVP_OK;
    case KVP_SYNTH_SECONDS:
        if (!v)
            *max_queue_s = KVP_SYNTH_MAX_QUEUE_S;
        return v ? real(v, 0, INFINITY, "a number of seconds >= 0", max_queue_s, err) : KVP_OK;
    }
    return KVP_OK;
}

/* A double as the shortest text strtod reads back to it. */
static const char *real_text(double v, char *buf, size_t n)
{
    snprintf(buf, n, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, n, "%.17g", v);
    return buf;
}

const char *kvp_synth_text(const struct kvp_synth *s, double max_queue_s, const char *key, char *buf, size_t n)
{
    const struct kvp_synth_key *k = synth_key(key);
    const struct kvp_range *r = &s->output;
    buf[0] = '\0';
    if (!k)
        return buf;
    if (strcmp(k->key, "prompt") == 0)
        r = &s->prompt;
    switch (k->kind) {
    case KVP_SYNTH_RATE:
        return real_text(s->rate, buf, n);
    case KVP_SYNTH_RANGE:
        if (r->lo == r->hi)
            snprintf(buf, n, "%" PRIu32, r->lo);
        else
            snprintf(buf, n, "%" PRIu32 "-%" PRIu32, r->lo, r->hi);
        return buf;
    case KVP_SYNTH_COUNT:
        snprintf(buf, n, "%" PRIu32, s->requests);
        return buf;
    case KVP_SYNTH_SEED:
        snprintf(buf, n, "%" PRIu64, s->seed);
        return buf;
    case KVP_SYNTH_PREFIX:
        if (s->prefix)
            snprintf(buf, n, "%" PRIu32, s->prefix);
        return buf;
    case KVP_SYNTH_FRACTION:
        return s->prefix ? real_text(s->prefix_share, buf, n) : buf;
    case KVP_SYNTH_SECONDS:
        return real_text(max_queue_s, buf, n);
    }
    return buf;
}

enum kvp_status kvp_synth_cost(const struct kvp_synth *s, uint64_t *cost, struct kvp_error *err)
{
    char g[5][32];
    uint64_t one = 0;
    bool ok = kvp_add((uint64_t)s->prompt.hi + s->output.hi, KVP_SIM_REQUEST_COST, &one) &&
              kvp_mul(s->requests, one, cost);

    if (ok && *cost <= KVP_SIM_BUDGET)
        return KVP_OK;
    return kvp_fail(err, KVP_ERR_USAGE,
                    "%s requests of up to %s + %s tokens cost %s%s token-steps, more than the simulator's budget "
                    "KVP_SIM_BUDGET of %s (requests x (prompt + output + %u)): fewer or shorter requests",
                    kvp_count_text(s->requests, g[0], sizeof g[0]), kvp_count_text(s->prompt.hi, g[1], sizeof g[1]),
                    kvp_count_text(s->output.hi, g[2], sizeof g[2]), ok ? "" : "more than ",
                    kvp_count_text(ok ? *cost : UINT64_MAX, g[3], sizeof g[3]),
                    kvp_count_text(KVP_SIM_BUDGET, g[4], sizeof g[4]), KVP_SIM_REQUEST_COST);
}

/* kvp_synth_cost for the requests a workload has (a trace's): each its prompt
 * and answer plus KVP_SIM_REQUEST_COST, summed. The sum stops past the budget,
 * so it never passes 10^8 + 2^33. */
enum kvp_status kvp_sim_workload_cost(const struct kvp_workload *w, struct kvp_error *err)
{
    uint64_t cost = 0;
    for (uint32_t i = 0; i < w->n; i++) {
        const struct kvp_sim_request *q = &w->req[i];
        char g[3][32];
        cost += (uint64_t)q->prompt + q->output + KVP_SIM_REQUEST_COST;
        if (cost > KVP_SIM_BUDGET)
            return kvp_fail_at(err, KVP_ERR_USAGE, w->name, q->line, q->line ? 1 : 0,
                               "request %u: the first %s requests cost %s token-steps, more than the simulator's "
                               "budget KVP_SIM_BUDGET of %s (requests x (prompt + output + %u)): fewer or shorter "
                               "requests",
                               i + 1, kvp_count_text(i + 1, g[0], sizeof g[0]), kvp_count_text(cost, g[1], sizeof g[1]),
                               kvp_count_text(KVP_SIM_BUDGET, g[2], sizeof g[2]), KVP_SIM_REQUEST_COST);
    }
    return KVP_OK;
}

enum kvp_status kvp_workload_synth(const struct kvp_synth *s, struct kvp_workload *w, struct kvp_error *err)
{
    uint64_t st = s->seed, cost;
    double t = 0.0;
    enum kvp_status rc;

    memset(w, 0, sizeof *w);
    if (s->requests == 0 || s->requests > KVP_SIM_MAX_REQUESTS)
        return kvp_fail(err, KVP_ERR_USAGE, "the request count must be 1..%u (got %u)", KVP_SIM_MAX_REQUESTS,
                        s->requests);
    if (s->prompt.lo == 0 || s->prompt.lo > s->prompt.hi || s->output.lo == 0 || s->output.lo > s->output.hi)
        return kvp_fail(err, KVP_ERR_USAGE, "prompt and output lengths must be positive ranges LO-HI");
    if (!(s->rate >= 0.0) || !isfinite(s->rate))
        return kvp_fail(err, KVP_ERR_USAGE, "the rate must be a finite number of requests per second >= 0 (got %g)",
                        s->rate);
    if (!(s->prefix_share >= 0.0 && s->prefix_share <= 1.0))
        return kvp_fail(err, KVP_ERR_USAGE, "the prefix share must be 0..1 (got %g)", s->prefix_share);
    if (s->prefix > s->prompt.lo)
        return kvp_fail(err, KVP_ERR_USAGE, "the shared prefix (%u tokens) is longer than the shortest prompt (%u)",
                        s->prefix, s->prompt.lo);
    if ((rc = kvp_synth_cost(s, &cost, err)) != KVP_OK)
        return rc;
    if ((rc = alloc_requests(w, s->requests, err)) != KVP_OK)
        return rc;
    w->n = s->requests;
    for (uint32_t i = 0; i < s->requests; i++) {
        struct kvp_sim_request *q = &w->req[i];
        if (s->rate > 0.0)
            t += -log1p(-uniform01(&st)) / s->rate; /* exponential gaps: a Poisson process */
        if (t > KVP_SIM_MAX_ARRIVAL_S) {
            kvp_workload_free(w);
            return kvp_fail(err, KVP_ERR_USAGE,
                            "at %g requests/s request %u would arrive after %.3g s (%.3g years); the latest "
                            "arrival is %g s: a higher rate or fewer requests",
                            s->rate, i + 1, t, t / (365.25 * 86400), KVP_SIM_MAX_ARRIVAL_S);
        }
        q->arrival_s = t;
        q->prompt = draw(&st, s->prompt);
        q->output = draw(&st, s->output);
        /* drawn for every request, so the share changes which requests share, not the lengths */
        if (uniform01(&st) < s->prefix_share && s->prefix) {
            q->prefix_id = 1;
            q->prefix_tokens = s->prefix;
        }
    }
    return KVP_OK;
}

void kvp_workload_free(struct kvp_workload *w)
{
    if (!w)
        return;
    free(w->req);
    w->req = NULL;
    w->n = 0;
}

/* ---- traces ---- */

enum field { F_ARRIVAL, F_PROMPT, F_OUTPUT, F_PREFIX_ID, F_PREFIX_TOKENS, F_COUNT };
static const char *const field_names[F_COUNT] = {"arrival_s", "prompt_tokens", "output_tokens", "prefix_id",
                                                 "prefix_tokens"};

struct cursor {
    const char *name, *p, *end, *line_start;
    uint32_t line;
    struct kvp_error *err;
};

static enum kvp_status fail_here(struct cursor *c, enum kvp_status code, const char *at, const char *msg,
                                 const char *arg)
{
    return kvp_fail_at(c->err, code, c->name, c->line, (uint32_t)(at - c->line_start) + 1, msg, arg);
}

static bool number_char(char ch)
{
    return (ch >= '0' && ch <= '9') || ch == '.' || ch == 'e' || ch == 'E' || ch == '+' || ch == '-';
}

/* s[0..n) as strtod reads it when it is digits with at most one point and
 * at most 15 digits in all (Clinger's fast path: the digits and the power of
 * ten are exact doubles, and the division is correctly rounded, as strtod's
 * result is); false for any other form, which strtod reads. */
static bool short_decimal(const char *s, size_t n, double *out)
{
    static const double pow10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
    uint64_t m = 0;
    unsigned digits = 0, frac = 0;
    bool point = false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.' && !point) {
            point = true;
        } else if (s[i] >= '0' && s[i] <= '9' && digits < 15) {
            m = m * 10 + (uint64_t)(s[i] - '0');
            digits++;
            frac += point;
        } else {
            return false;
        }
    }
    if (digits == 0)
        return false;
    *out = (double)m / pow10[frac];
    return true;
}

/* A number at p: the arrival a non-negative decimal, the others unsigned
 * integers below 2^32. *next gets the first character after it. */
static enum kvp_status number(struct cursor *c, enum field f, const char *p, const char **next, double *out)
{
    char buf[64];
    size_t n = 0;
    char *e;
    while (p + n < c->end && number_char(p[n]) && n < sizeof buf - 1)
        n++;
    if (n == 0)
        return fail_here(c, KVP_ERR_SYNTAX, p, "expected a number for '%s'", field_names[f]);
    if (!short_decimal(p, n, out)) {
        memcpy(buf, p, n);
        buf[n] = '\0';
        *out = strtod(buf, &e);
        if (*e != '\0' || !isfinite(*out) || *out < 0.0)
            return fail_here(c, KVP_ERR_RANGE, p, "'%s' must be a non-negative number", field_names[f]);
    }
    if (f == F_ARRIVAL && *out > KVP_SIM_MAX_ARRIVAL_S)
        return fail_here(c, KVP_ERR_RANGE, p, "'%s' must be at most 1e9 s (31.7 years)", field_names[f]);
    if (f != F_ARRIVAL && (*out != floor(*out) || *out > 4294967295.0))
        return fail_here(c, KVP_ERR_RANGE, p, "'%s' must be an integer below 2^32", field_names[f]);
    *next = p + n;
    return KVP_OK;
}

/* The per-request checks, at the line's start. */
static enum kvp_status check_request(struct cursor *c, const bool *seen, const double *v, double prev,
                                     struct kvp_sim_request *q)
{
    for (int f = 0; f < F_COUNT; f++)
        if (!seen[f] && f < F_PREFIX_ID)
            return fail_here(c, KVP_ERR_SYNTAX, c->line_start, "missing '%s'", field_names[f]);
    if (seen[F_PREFIX_ID] != seen[F_PREFIX_TOKENS])
        return fail_here(c, KVP_ERR_SYNTAX, c->line_start, "'%s' needs prefix_id and prefix_tokens together",
                         seen[F_PREFIX_ID] ? "prefix_id" : "prefix_tokens");
    q->arrival_s = v[F_ARRIVAL];
    q->prompt = (uint32_t)v[F_PROMPT];
    q->output = (uint32_t)v[F_OUTPUT];
    q->prefix_id = seen[F_PREFIX_ID] ? (uint32_t)v[F_PREFIX_ID] : 0;
    q->prefix_tokens = seen[F_PREFIX_ID] ? (uint32_t)v[F_PREFIX_TOKENS] : 0;
    q->line = c->line;
    if (q->arrival_s < prev)
        return fail_here(c, KVP_ERR_RANGE, c->line_start, "arrivals must not go back in time (%s)",
                         "sort the trace by arrival_s");
    if (q->prompt == 0 || q->output == 0)
        return fail_here(c, KVP_ERR_RANGE, c->line_start, "'%s' must be at least 1",
                         q->prompt == 0 ? "prompt_tokens" : "output_tokens");
    if (q->prefix_tokens > q->prompt)
        return fail_here(c, KVP_ERR_RANGE, c->line_start, "'%s' is longer than the prompt", "prefix_tokens");
    return KVP_OK;
}

static bool blank(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    return p == e;
}

static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    return p;
}

/* CSV: the header names the columns (the three required, the two prefix
 * columns optional, any order); every row has exactly those cells. */
static enum kvp_status csv_header(struct cursor *c, const char *e, int *col, int *ncols)
{
    const char *p = c->p;
    *ncols = 0;
    while (p <= e) {
        const char *s = skip_ws(p, e), *q = s;
        int f;
        while (q < e && *q != ',')
            q++;
        const char *t = q;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t' || t[-1] == '\r'))
            t--;
        for (f = 0; f < F_COUNT; f++)
            if ((size_t)(t - s) == strlen(field_names[f]) && memcmp(s, field_names[f], (size_t)(t - s)) == 0)
                break;
        if (f == F_COUNT || *ncols == F_COUNT)
            return fail_here(c, KVP_ERR_SCHEMA, s, "unknown column (expected %s)",
                             "arrival_s,prompt_tokens,output_tokens[,prefix_id,prefix_tokens]");
        for (int i = 0; i < *ncols; i++)
            if (col[i] == f)
                return fail_here(c, KVP_ERR_SCHEMA, s, "column '%s' given twice", field_names[f]);
        col[(*ncols)++] = f;
        p = q + 1;
    }
    return KVP_OK;
}

static enum kvp_status csv_row(struct cursor *c, const char *e, const int *col, int ncols, bool *seen, double *v)
{
    const char *p = c->p;
    for (int i = 0; i < ncols; i++) {
        p = skip_ws(p, e);
        if (i > 0) {
            if (p >= e || *p != ',')
                return fail_here(c, KVP_ERR_SYNTAX, p, "a row needs a cell for every column ('%s' is missing)",
                                 field_names[col[i]]);
            p = skip_ws(p + 1, e);
        }
        if (number(c, (enum field)col[i], p, &p, &v[col[i]]) != KVP_OK)
            return c->err->code;
        seen[col[i]] = true;
    }
    p = skip_ws(p, e);
    if (p < e)
        return fail_here(c, KVP_ERR_SYNTAX, p, "unexpected text after the last column ('%s')", "remove it");
    return KVP_OK;
}

/* JSONL: {"key": number, ...} with the keys above, nothing nested. */
static enum kvp_status jsonl_row(struct cursor *c, const char *e, bool *seen, double *v)
{
    const char *p = skip_ws(c->p, e) + 1; /* past '{' */
    for (bool first = true;; first = false) {
        int f;
        p = skip_ws(p, e);
        if (p < e && *p == '}' && first)
            break;
        if (p >= e || *p != '"')
            return fail_here(c, KVP_ERR_SYNTAX, p, "expected a key in double quotes%s", "");
        const char *k = ++p;
        while (p < e && *p != '"')
            p++;
        for (f = 0; f < F_COUNT; f++)
            if ((size_t)(p - k) == strlen(field_names[f]) && memcmp(k, field_names[f], (size_t)(p - k)) == 0)
                break;
        if (f == F_COUNT)
            return fail_here(c, KVP_ERR_SCHEMA, k, "unknown key (expected %s)",
                             "arrival_s, prompt_tokens, output_tokens, prefix_id, prefix_tokens");
        if (seen[f])
            return fail_here(c, KVP_ERR_SCHEMA, k, "key '%s' given twice", field_names[f]);
        p = skip_ws(p + 1, e);
        if (p >= e || *p != ':')
            return fail_here(c, KVP_ERR_SYNTAX, p, "expected ':' after '%s'", field_names[f]);
        p = skip_ws(p + 1, e);
        if (number(c, (enum field)f, p, &p, &v[f]) != KVP_OK)
            return c->err->code;
        seen[f] = true;
        p = skip_ws(p, e);
        if (p < e && *p == ',') {
            p++;
            continue;
        }
        if (p < e && *p == '}')
            break;
        return fail_here(c, KVP_ERR_SYNTAX, p, "expected ',' or '}'%s", "");
    }
    p = skip_ws(p + 1, e);
    if (p < e)
        return fail_here(c, KVP_ERR_SYNTAX, p, "unexpected text after the object ('%s')", "one object per line");
    return KVP_OK;
}

enum kvp_status kvp_workload_parse(const char *text, uint64_t len, const char *name, struct kvp_workload *w,
                                   struct kvp_error *err)
{
    struct cursor c = {.name = name, .p = text, .end = text + len, .err = err};
    uint64_t lines = 1;
    int col[F_COUNT], ncols = -1; /* -1: not decided; 0: JSONL */
    enum kvp_status rc;

    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    for (uint64_t i = 0; i + 1 < len; i++) /* lines begun: a last newline begins none */
        lines += text[i] == '\n';
    if (lines > KVP_SIM_MAX_REQUESTS + 1) /* a CSV header and KVP_SIM_MAX_REQUESTS requests */
        return kvp_fail_at(err, KVP_ERR_RANGE, name, 0, 0, "more than %u requests", KVP_SIM_MAX_REQUESTS);
    if ((rc = alloc_requests(w, lines, err)) != KVP_OK)
        return rc;
    for (const char *e; c.p < c.end; c.p = e < c.end ? e + 1 : c.end) {
        bool seen[F_COUNT] = {false};
        double v[F_COUNT] = {0};
        e = memchr(c.p, '\n', (size_t)(c.end - c.p));
        e = e ? e : c.end;
        c.line++;
        c.line_start = c.p;
        if (blank(c.p, e) || *skip_ws(c.p, e) == '#')
            continue;
        if (ncols < 0) {
            if (*skip_ws(c.p, e) == '{') {
                ncols = 0;
            } else {
                if ((rc = csv_header(&c, e, col, &ncols)) != KVP_OK)
                    goto fail;
                continue;
            }
        }
        if (w->n == KVP_SIM_MAX_REQUESTS) {
            rc = kvp_fail_at(err, KVP_ERR_RANGE, name, c.line, 1, "more than %u requests", KVP_SIM_MAX_REQUESTS);
            goto fail;
        }
        if ((rc = ncols == 0 ? jsonl_row(&c, e, seen, v) : csv_row(&c, e, col, ncols, seen, v)) != KVP_OK ||
            (rc = check_request(&c, seen, v, w->n ? w->req[w->n - 1].arrival_s : 0.0, &w->req[w->n])) != KVP_OK)
            goto fail;
        w->n++;
    }
    if (w->n == 0) {
        rc = kvp_fail_at(err, KVP_ERR_SYNTAX, name, c.line ? c.line : 1, 1, "the trace has no requests");
        goto fail;
    }
    return KVP_OK;
fail:
    kvp_workload_free(w);
    return rc;
}

enum kvp_status kvp_workload_load(const char *path, struct kvp_workload *w, struct kvp_error *err)
{
    char *text;
    uint64_t len;
    enum kvp_status rc;
    memset(w, 0, sizeof *w);
    if ((rc = kvp_read_file(path, 256ull << 20, &text, &len, NULL, err)) != KVP_OK)
        return rc;
    rc = kvp_workload_parse(text, len, path, w, err);
    free(text);
    return rc;
}
