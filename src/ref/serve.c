/* serve.c -- the simulator's decisions replayed on a real paged block pool
 * (include/kvplan/ref_serve.h; docs/simulate.md, "--validate").
 *
 * Reading order: the pool (blocks of real memory, reference counts, the LRU
 * queue of free blocks, the hash of cached blocks), the requests (token ids,
 * block tables, chained block hashes), the prefix-hit search, the replay of
 * one decision, the comparison of each step. What is shared with the
 * simulator is only what it decided (sim.h's log) and what it claimed (its
 * series); every count here comes from this pool's own blocks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvplan/num.h"
#include "kvplan/ref_serve.h"
#include "ref_internal.h"

#define NONE UINT32_MAX
#define NULL_BLK 0u /* block 0 is never handed out (vLLM's null block) */

/* ---- the pool ---- */

struct blk {
    uint32_t ref;        /* requests holding it */
    uint32_t prev, next; /* the free queue (ref 0), least recently freed first */
    uint32_t hnext;      /* the next block of its hash bucket */
    uint32_t group;      /* the group it serves (NONE: never taken) */
    bool hashed;
    uint64_t hash;       /* chained hash of its tokens (hashed) */
    uint8_t **mem; /* (layers, 2): its memory per K/V store (a recurrent layer: its state) of its group's layers */
};

struct serve {
    const struct kvp_sim_config *c;
    const struct kvp_workload *w;
    const struct kvp_ref_model *rm;
    const struct kvp_model *shape;
    struct kvp_ref_cache *cache;
    struct kvp_ref_alloc alloc;
    uint32_t L, G;
    uint32_t *group_of;           /* (layers,) a layer's group, NONE: caches nothing */
    struct blk *b;
    uint64_t n;                   /* blocks, 0 the null block */
    uint32_t head, tail;
    uint64_t nfree, ncached;      /* blocks on the queue; those still hashed */
    uint64_t used[KVP_SIM_MAX_GROUPS];
    uint32_t *bucket;
    uint64_t mask;
    struct sreq *q;
    uint32_t *seq_req, *free_seq, nfree_seq; /* a cache sequence's request; free sequences */
    uint32_t running;                        /* requests holding a sequence */
    uint32_t *hit[KVP_SIM_MAX_GROUPS];      /* scratch: a hit's blocks per group */
    uint64_t hit_cap;
    float *logits, *fresh;
    uint8_t *dropped;                       /* what a read of a block the pool does not give reads (zeros) */
    uint64_t dropped_reads;                 /* rows the decoder asked for outside its request's table */
    uint32_t logit_left;                    /* logit checks still to do (UINT32_MAX: all) */
    struct kvp_serve_report *out;
};

struct sreq {
    uint32_t *tok;      /* prompt then generated ids */
    uint64_t ntok, computed;
    uint32_t generated, seq;
    uint32_t *table;    /* (groups, cap) block ids; NULL_BLK: dropped by a window */
    uint32_t cap;
    uint32_t len[KVP_SIM_MAX_GROUPS], cached[KVP_SIM_MAX_GROUPS];
    uint64_t *hash;     /* chained hash of block i (nhash known) */
    uint64_t nhash;
    bool running, done, verify; /* verify: admitted with a hit; its logits checked when its tokens are in */
};

KVP_WRAPS static uint64_t mix(uint64_t h)
{
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

/* vLLM's hash_block_tokens: the parent block's hash and this block's ids. */
KVP_WRAPS static uint64_t chain_hash(uint64_t parent, const uint32_t *t, uint32_t n)
{
    uint64_t h = mix(parent + 0x9e3779b97f4a7c15ull);
    for (uint32_t i = 0; i < n; i++)
        h = mix(h ^ t[i]) + i;
    return h;
}

static uint64_t bucket_of(const struct serve *s, uint64_t hash, uint32_t g)
{
    return mix(hash ^ g) & s->mask;
}

static void queue_remove(struct serve *s, uint32_t i)
{
    struct blk *x = &s->b[i];
    if (x->prev != NONE)
        s->b[x->prev].next = x->next;
    else
        s->head = x->next;
    if (x->next != NONE)
        s->b[x->next].prev = x->prev;
    else
        s->tail = x->prev;
    x->prev = x->next = NONE;
    s->nfree--;
    s->ncached -= x->hashed;
}

static void queue_append(struct serve *s, uint32_t i)
{
    struct blk *x = &s->b[i];
    x->prev = s->tail;
    x->next = NONE;
    if (s->tail != NONE)
        s->b[s->tail].next = i;
    else
        s->head = i;
    s->tail = i;
    s->nfree++;
    s->ncached += x->hashed;
}

/* The oldest cached block of group g with this hash, or NONE. */
static uint32_t lookup(const struct serve *s, uint64_t hash, uint32_t g)
{
    for (uint32_t i = s->bucket[bucket_of(s, hash, g)]; i != NONE; i = s->b[i].hnext)
        if (s->b[i].hash == hash && s->b[i].group == g)
            return i;
    return NONE;
}

static void hash_insert(struct serve *s, uint32_t i, uint64_t hash)
{
    uint32_t *p = &s->bucket[bucket_of(s, hash, s->b[i].group)];
    while (*p != NONE) /* at the tail: a lookup finds the oldest */
        p = &s->b[*p].hnext;
    *p = i;
    s->b[i].hnext = NONE;
    s->b[i].hash = hash;
    s->b[i].hashed = true;
}

static void hash_remove(struct serve *s, uint32_t i)
{
    uint32_t *p = &s->bucket[bucket_of(s, s->b[i].hash, s->b[i].group)];
    while (*p != i)
        p = &s->b[*p].hnext;
    *p = s->b[i].hnext;
    s->b[i].hashed = false;
}

static enum kvp_ref_tag tag_of(const struct serve *s, uint32_t l, int kv)
{
    return kvp_model_layer(s->shape, l)->kind == KVP_LAYER_RECURRENT ? KVP_REF_STATE : kv ? KVP_REF_V : KVP_REF_K;
}

/* The memory block i needs to serve group g: a block of every K/V store of
 * g's layers (a block that served another group gives its memory back). */
static enum kvp_status give_memory(struct serve *s, uint32_t i, uint32_t g, struct kvp_error *err)
{
    struct blk *x = &s->b[i];
    if (x->group == g && x->mem)
        return KVP_OK;
    if (!x->mem && !(x->mem = calloc((uint64_t)s->L * 2, sizeof *x->mem)))
        return kvp_fail(err, KVP_ERR_NOMEM, "validate: out of memory");
    for (uint32_t l = 0; l < s->L; l++)
        for (int kv = 0; kv < 2; kv++) {
            uint64_t bytes = ref_cache_block_bytes(s->cache, l, kv);
            uint8_t **p = &x->mem[2 * l + kv];
            if (*p)
                kvp_ref_alloc_put(&s->alloc, tag_of(s, l, kv), *p, bytes);
            *p = NULL;
            if (s->group_of[l] == g && bytes && !(*p = kvp_ref_alloc_get(&s->alloc, tag_of(s, l, kv), bytes)))
                return kvp_fail(err, KVP_ERR_NOMEM, "validate: out of memory for a block of %llu bytes",
                                (unsigned long long)bytes);
        }
    x->group = g;
    return KVP_OK;
}

/* A fresh block for group g: the queue's head, its hash evicted. */
static enum kvp_status take(struct serve *s, uint32_t g, uint32_t *out, struct kvp_error *err)
{
    uint32_t i = s->head;
    if (i == NONE)
        return kvp_fail(err, KVP_ERR_RANGE, "validate: the pool has no free block");
    queue_remove(s, i);
    if (s->b[i].hashed)
        hash_remove(s, i);
    s->b[i].ref = 1;
    s->used[g]++;
    *out = i;
    return give_memory(s, i, g, err);
}

static void touch(struct serve *s, uint32_t i)
{
    if (s->b[i].ref++ == 0) {
        queue_remove(s, i);
        s->used[s->b[i].group]++;
    }
}

static void release(struct serve *s, uint32_t i)
{
    if (i == NULL_BLK)
        return;
    if (--s->b[i].ref == 0) {
        s->used[s->b[i].group]--;
        queue_append(s, i);
    }
}

/* ---- requests ---- */

static uint32_t *table_of(const struct sreq *r, uint32_t g)
{
    return r->table + (uint64_t)g * r->cap;
}

/* Prompt ids: a shared prefix's from its id and the position, the rest
 * from the request and the position. */
static uint32_t prompt_token(const struct kvp_sim_request *q, uint32_t req, uint64_t pos, uint32_t vocab)
{
    uint64_t who = q->prefix_id && pos < q->prefix_tokens ? (uint64_t)q->prefix_id << 32 : (uint64_t)req + 1;
    return (uint32_t)(mix(mix(who) ^ pos) % vocab);
}

/* The chained hash of block i of r (its tokens must be known). */
static uint64_t block_hash(const struct serve *s, struct sreq *r, uint64_t i)
{
    uint32_t bs = s->c->block_size;
    for (; r->nhash <= i; r->nhash++)
        r->hash[r->nhash] = chain_hash(r->nhash ? r->hash[r->nhash - 1] : 0, r->tok + r->nhash * bs, bs);
    return r->hash[i];
}

static bool windowed(const struct serve *s, uint32_t g)
{
    enum kvp_layer_kind k = s->c->group[g].kind;
    return k == KVP_LAYER_SLIDING || k == KVP_LAYER_CHUNKED;
}

/* The first position any layer of group g reads for a query at pos: the
 * decoder's own windows (kvp_ref_window_lo). */
static uint64_t group_lo(const struct serve *s, uint32_t g, uint64_t pos)
{
    uint64_t lo = pos;
    for (uint32_t l = 0; l < s->L; l++)
        if (s->group_of[l] == g) {
            uint64_t x = kvp_ref_window_lo(kvp_model_layer(s->shape, l), pos);
            lo = x < lo ? x : lo;
        }
    return lo;
}

/* Blocks of r's windowed groups that no layer can read from its next
 * position on go back to the pool, last first. */
static void drop_unreadable(struct serve *s, struct sreq *r)
{
    for (uint32_t g = 0; g < s->G; g++) {
        uint32_t *t = table_of(r, g);
        uint64_t lo;
        if (!windowed(s, g))
            continue;
        lo = group_lo(s, g, r->computed) / s->c->block_size;
        for (uint64_t i = lo < r->len[g] ? lo : r->len[g]; i-- > 0;) {
            if (t[i] == NULL_BLK)
                break;
            release(s, t[i]);
            t[i] = NULL_BLK;
        }
    }
}

/* Blocks group g's table must hold for `tokens` tokens: one state slot for a
 * recurrent group, else every block a token falls in. */
static uint64_t blocks_for(const struct serve *s, uint32_t g, uint64_t tokens)
{
    return s->c->group[g].kind == KVP_LAYER_RECURRENT ? 1 : kvp_cdiv(tokens, s->c->block_size);
}

/* ---- prefix hits: vLLM's search, on this pool's hashes ---- */

static bool hit_groups(struct serve *s, struct sreq *r, uint64_t i, bool sliding, uint32_t *found)
{
    uint64_t h = block_hash(s, r, i);
    for (uint32_t g = 0; g < s->G; g++) {
        if ((s->c->group[g].kind == KVP_LAYER_SLIDING) != sliding)
            continue;
        if ((found[g] = lookup(s, h, g)) == NONE)
            return false;
    }
    return true;
}

/* The longest run of cached blocks r's ids give (full attention from the
 * start, stopping at a miss; a sliding group from the end, the last
 * cdiv(window - 1, block) blocks contiguous), at most ntok - 1 tokens;
 * the blocks in s->hit, the count in tokens. */
static uint64_t find_hit(struct serve *s, struct sreq *r)
{
    uint64_t bs = s->c->block_size, max = (r->ntok - 1) / bs, full = max, got;
    uint32_t f[KVP_SIM_MAX_GROUPS];
    bool any_full = false, any_sliding = false;
    if (!s->c->prefix_caching)
        return 0;
    for (uint32_t g = 0; g < s->G; g++) {
        any_sliding = any_sliding || s->c->group[g].kind == KVP_LAYER_SLIDING;
        any_full = any_full || s->c->group[g].kind != KVP_LAYER_SLIDING;
    }
    if (any_full)
        for (full = 0; full < max && hit_groups(s, r, full, false, f); full++)
            for (uint32_t g = 0; g < s->G; g++)
                if (s->c->group[g].kind != KVP_LAYER_SLIDING)
                    s->hit[g][full] = f[g];
    got = full;
    if (any_sliding) {
        uint64_t window = 0, need, run = 0, start = 0;
        bool found = false;
        for (uint32_t l = 0; l < s->L; l++)
            if (s->group_of[l] != NONE && s->c->group[s->group_of[l]].kind == KVP_LAYER_SLIDING)
                window = kvp_model_layer(s->shape, l)->window;
        need = kvp_cdiv(window - 1, bs);
        for (uint64_t i = full; i-- > 0;) {
            if (!hit_groups(s, r, i, true, f)) {
                run = 0;
                continue;
            }
            for (uint32_t g = 0; g < s->G; g++)
                if (s->c->group[g].kind == KVP_LAYER_SLIDING)
                    s->hit[g][i] = f[g];
            if (++run >= need) {
                found = true;
                start = i;
                break;
            }
        }
        got = found ? start + run : run;
        for (uint32_t g = 0; g < s->G; g++)
            if (s->c->group[g].kind == KVP_LAYER_SLIDING)
                for (uint64_t i = 0; i < (found ? start : 0); i++)
                    s->hit[g][i] = NULL_BLK;
    }
    return got * bs;
}

/* Fresh blocks r needs to hold `tokens` tokens with a hit of `hit` tokens
 * (s->hit): the blocks its tables lack, and the hit's blocks now free. */
static uint64_t blocks_needed(const struct serve *s, const struct sreq *r, uint64_t hit, uint64_t tokens)
{
    uint64_t need = 0, hb = hit / s->c->block_size;
    for (uint32_t g = 0; g < s->G; g++) {
        uint64_t want = blocks_for(s, g, tokens), have = r->len[g] + hb;
        need += want > have ? want - have : 0;
        for (uint64_t i = 0; i < hb; i++)
            need += s->hit[g][i] != NULL_BLK && s->b[s->hit[g][i]].ref == 0;
    }
    return need;
}

/* ---- the replay ---- */

static bool differ(struct serve *s, uint64_t step, const char *field, uint64_t claimed, uint64_t measured)
{
    struct kvp_serve_report *o = s->out;
    if (claimed == measured || !o->match)
        return claimed != measured;
    o->match = false;
    o->step = step;
    snprintf(o->field, sizeof o->field, "%s", field);
    o->claimed = claimed;
    o->measured = measured;
    return true;
}

/* The decoder's row hook (ref_cache_set_blocks): a written token must fall
 * in a block this pool gave the request's table, of the layer's group. */
static uint8_t *row_block(void *ctx, uint32_t layer, int kv, uint32_t seq, uint64_t index, bool make)
{
    struct serve *s = ctx;
    const struct sreq *r = &s->q[s->seq_req[seq]];
    uint32_t g = s->group_of[layer], b;
    if (g == NONE || index >= r->len[g] || (b = table_of(r, g)[index]) == NULL_BLK || s->b[b].group != g) {
        s->dropped_reads += !make; /* the decoder's window reaches a block the pool let go */
        return make ? NULL : s->dropped;
    }
    return s->b[b].mem[2 * layer + kv];
}

static void end_request(struct serve *s, struct sreq *r)
{
    for (uint32_t g = 0; g < s->G; g++) {
        uint32_t *t = table_of(r, g);
        for (uint32_t i = r->len[g]; i-- > 0;)
            release(s, t[i]);
        r->len[g] = r->cached[g] = 0;
    }
    kvp_ref_seq_end(s->cache, r->seq);
    s->free_seq[s->nfree_seq++] = r->seq;
    r->seq = NONE;
    r->running = false;
    s->running--;
    r->computed = 0;
}

static uint32_t argmax(const float *x, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        best = x[i] > x[best] ? i : best;
    return best;
}

/* A request served from a prefix hit: its logits against the same ids
 * decoded from scratch through a cache of its own. */
static enum kvp_status check_logits(struct serve *s, const struct sreq *r, uint64_t step, struct kvp_error *err)
{
    struct kvp_ref_alloc a = {0};
    struct kvp_ref_cache *c;
    struct kvp_ref_cache_opts co = {.policy = KVP_REF_STATIC, .context = r->ntok, .batch = 1,
                                    .k = kvp_format_plain(s->shape->dtype), .v = kvp_format_plain(s->shape->dtype)};
    enum kvp_status st = kvp_ref_cache_new(s->rm, &co, &a, &c, err);
    if (st == KVP_OK)
        st = kvp_ref_prefill(s->rm, c, 0, r->tok, r->ntok, s->fresh, err);
    kvp_ref_cache_free(c);
    if (st != KVP_OK)
        return st;
    s->out->decoded_tokens += r->ntok;
    if (!differ(s, step, "logits (prefix hit vs from scratch)", 0,
                memcmp(s->logits, s->fresh, kvp_ref_vocab(s->rm) * sizeof(float)) != 0))
        s->out->logit_checks++;
    if (s->logit_left != UINT32_MAX)
        s->logit_left--;
    return KVP_OK;
}

/* Hash every full block of r's computed tokens not yet hashed. */
static void cache_full_blocks(struct serve *s, struct sreq *r)
{
    uint64_t full = r->computed / s->c->block_size;
    if (!s->c->prefix_caching)
        return;
    for (uint32_t g = 0; g < s->G; g++) {
        uint32_t *t = table_of(r, g);
        for (uint64_t i = r->cached[g]; i < full && i < r->len[g]; i++)
            if (t[i] != NULL_BLK && !s->b[t[i]].hashed)
                hash_insert(s, t[i], block_hash(s, r, i));
        r->cached[g] = r->cached[g] > full ? r->cached[g] : (uint32_t)full;
    }
}

/* SCHEDULE: the pool finds the request's hit (an admission), drops what
 * its windows left, must supply the blocks, and the decoder computes the
 * tokens into them. */
static enum kvp_status schedule(struct serve *s, const struct kvp_sim_event *e, struct kvp_error *err)
{
    struct sreq *r = &s->q[e->req];
    uint64_t hit = 0, need;
    enum kvp_status st;
    bool last;
    if (e->admit) {
        hit = find_hit(s, r);
        s->out->hits_compared++;
        if (differ(s, e->step, "prefix_hit_tokens (admission)", e->hit, hit))
            return KVP_OK;
        if (s->nfree_seq == 0)
            return kvp_fail(err, KVP_ERR_RANGE, "validate: more requests running than the simulation's series shows");
        r->seq = s->free_seq[--s->nfree_seq];
        s->seq_req[r->seq] = e->req;
        r->running = true;
        s->running++;
        r->verify = hit > 0;
        s->out->hit_tokens += hit;
    } else {
        drop_unreadable(s, r);
    }
    need = blocks_needed(s, r, hit, r->computed + hit + e->tokens);
    s->out->supplies_checked++;
    if (differ(s, e->step, "blocks the pool could not supply", 0, need > s->nfree))
        return KVP_OK;
    /* every group's hits off the free queue before any group takes a new
     * block (vLLM's allocate_slots: touch, save_new_computed_blocks, then
     * allocate_new_blocks); a hit serving another group would be a block
     * owned twice: reported, never read */
    for (uint32_t g = 0; g < s->G; g++) {
        uint32_t *t = table_of(r, g);
        for (uint64_t i = 0; i < hit / s->c->block_size; i++) {
            uint32_t b = s->hit[g][i];
            if (b != NULL_BLK && differ(s, e->step, "KV-cache group of a prefix-hit block", g, s->b[b].group))
                return KVP_OK;
            if (b != NULL_BLK)
                touch(s, b);
            t[r->len[g]++] = b;
        }
        if (hit)
            r->cached[g] = r->len[g];
    }
    for (uint32_t g = 0; g < s->G; g++) {
        uint32_t *t = table_of(r, g);
        uint64_t want = blocks_for(s, g, r->computed + hit + e->tokens);
        while (r->len[g] < want)
            if ((st = take(s, g, &t[r->len[g]++], err)) != KVP_OK)
                return st;
    }
    if (hit)
        ref_cache_seq_skip(s->cache, r->seq, hit);
    r->computed += hit;
    last = r->computed + e->tokens == r->ntok;
    if ((st = kvp_ref_prefill(s->rm, s->cache, r->seq, r->tok + r->computed, e->tokens, last ? s->logits : NULL,
                              err)) != KVP_OK)
        return st;
    s->out->decoded_tokens += e->tokens;
    if (differ(s, e->step, "rows read outside the request's blocks", 0, s->dropped_reads))
        return KVP_OK;
    r->computed += e->tokens;
    cache_full_blocks(s, r);
    if (!last)
        return KVP_OK;
    if (r->verify && s->logit_left > 0 && (st = check_logits(s, r, e->step, err)) != KVP_OK)
        return st;
    r->verify = false;
    r->tok[r->ntok++] = argmax(s->logits, kvp_ref_vocab(s->rm)); /* greedy; computed next step */
    r->generated++;
    return KVP_OK;
}

/* PREEMPT and BLOCKED: the pool must really lack the blocks the request
 * asked for (free and evictable blocks < needed); PREEMPT then frees the
 * victim for recomputation. */
static void refuse(struct serve *s, const struct kvp_sim_event *e)
{
    struct sreq *r = &s->q[e->for_req];
    uint64_t hit = 0;
    if (e->kind == KVP_SIM_BLOCKED) {
        hit = find_hit(s, r);
        s->out->hits_compared++;
        if (differ(s, e->step, "prefix_hit_tokens (blocked admission)", e->hit, hit))
            return;
    } else {
        drop_unreadable(s, r);
    }
    s->out->preemptions_compared += e->kind == KVP_SIM_PREEMPT;
    if (differ(s, e->step, e->kind == KVP_SIM_PREEMPT ? "preemption (the pool could supply)"
                                                      : "blocked admission (the pool could supply)",
               0, blocks_needed(s, r, hit, r->computed + hit + e->tokens) <= s->nfree))
        return;
    if (e->kind == KVP_SIM_PREEMPT)
        end_request(s, &s->q[e->req]);
}

/* The pool's counts against the simulator's claims for step k. */
static void compare_step(struct serve *s, uint64_t k, const struct kvp_sim_step *claim)
{
    char f[32];
    differ(s, k, "running", claim->running, s->running);
    for (uint32_t g = 0; g < s->G; g++) {
        snprintf(f, sizeof f, "used_g%u", g);
        differ(s, k, f, claim->used[g], s->used[g]);
    }
    differ(s, k, "cached", claim->cached, s->ncached);
    differ(s, k, "free", claim->free, s->nfree - s->ncached);
    s->out->blocks_compared += s->G + 2;
    s->out->steps++;
}

/* After step k: a request with all its output is done and frees its blocks. */
static void finish_step(struct serve *s, const struct kvp_sim_event *e, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        struct sreq *r = &s->q[e[i].req];
        if (e[i].kind != KVP_SIM_SCHEDULE || !r->running || r->generated < s->w->req[e[i].req].output)
            continue;
        end_request(s, r);
        r->done = true;
    }
}

/* Which group each layer's blocks belong to: the simulation's groups of its
 * kind (and window), its layers dealt out among them in order. */
static enum kvp_status assign_groups(struct serve *s, struct kvp_error *err)
{
    for (uint32_t l = 0; l < s->L; l++) {
        const struct kvp_layer_spec *sp = kvp_model_layer(s->shape, l);
        uint32_t cand[KVP_SIM_MAX_GROUPS], nc = 0, same = 0, before = 0;
        bool caches = ref_cache_block_bytes(s->cache, l, 0) > 0;
        s->group_of[l] = NONE;
        if (!caches)
            continue;
        for (uint32_t g = 0; g < s->G; g++)
            if (s->c->group[g].kind == sp->kind && (!(sp->kind == KVP_LAYER_SLIDING || sp->kind == KVP_LAYER_CHUNKED) ||
                                                    s->c->group[g].window == sp->window))
                cand[nc++] = g;
        if (nc == 0)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "validate: layer %u (%s) has no KV-cache group in the simulation",
                            l, kvp_layer_kind_name(sp->kind));
        for (uint32_t j = 0; j < s->L; j++) {
            const struct kvp_layer_spec *o = kvp_model_layer(s->shape, j);
            bool like = o->kind == sp->kind && o->window == sp->window;
            same += like;
            before += like && j < l;
        }
        s->group_of[l] = cand[(uint64_t)before * nc / same];
    }
    return KVP_OK;
}

static enum kvp_status serve_init(struct serve *s, const struct kvp_model *m, const struct kvp_serve_opts *o,
                                  uint32_t batch, struct kvp_ref_model **rm, struct kvp_error *err)
{
    const struct kvp_sim_config *c = s->c;
    uint64_t cap = 16, vocab, most = 1;
    enum kvp_status st;
    struct kvp_ref_cache_opts co = {.policy = KVP_REF_PAGED, .context = 1, .batch = batch, .block = c->block_size};
    for (uint32_t i = 0; i < s->w->n; i++) /* a sequence holds at most the longest request */
        co.context = (uint64_t)s->w->req[i].prompt + s->w->req[i].output > co.context
                         ? (uint64_t)s->w->req[i].prompt + s->w->req[i].output
                         : co.context;
    if ((st = kvp_ref_model_new(m, &o->ref, rm, err)) != KVP_OK)
        return st;
    s->rm = *rm;
    s->shape = kvp_ref_model_shape(*rm);
    co.k = co.v = kvp_format_plain(s->shape->dtype);
    if ((st = kvp_ref_cache_new(s->rm, &co, &s->alloc, &s->cache, err)) != KVP_OK)
        return st;
    ref_cache_set_blocks(s->cache, row_block, s);
    s->L = s->shape->n_layers;
    s->G = c->n_groups;
    s->n = c->num_blocks;
    while (cap < 2 * s->n)
        cap *= 2;
    s->mask = cap - 1;
    vocab = kvp_ref_vocab(s->rm);
    s->group_of = malloc(s->L * sizeof *s->group_of);
    s->b = calloc(s->n, sizeof *s->b);
    s->bucket = malloc(cap * sizeof *s->bucket);
    s->q = calloc(s->w->n, sizeof *s->q);
    s->seq_req = calloc(batch, sizeof *s->seq_req);
    s->free_seq = malloc(batch * sizeof *s->free_seq);
    s->logits = malloc(vocab * sizeof *s->logits);
    s->fresh = malloc(vocab * sizeof *s->fresh);
    s->hit_cap = kvp_cdiv(c->max_model_len, c->block_size) + 1;
    for (uint32_t l = 0; l < s->shape->n_layers; l++)
        for (int kv = 0; kv < 2; kv++)
            most = ref_cache_block_bytes(s->cache, l, kv) > most ? ref_cache_block_bytes(s->cache, l, kv) : most;
    s->dropped = most <= SIZE_MAX ? calloc(1, (size_t)most) : NULL;
    if (!s->dropped || !s->group_of || !s->b || !s->bucket || !s->q || !s->seq_req || !s->free_seq || !s->logits ||
        !s->fresh)
        return kvp_fail(err, KVP_ERR_NOMEM, "validate: out of memory for %llu blocks", (unsigned long long)s->n);
    for (uint32_t g = 0; g < s->G; g++)
        if (!(s->hit[g] = malloc(s->hit_cap * sizeof *s->hit[g])))
            return kvp_fail(err, KVP_ERR_NOMEM, "validate: out of memory");
    memset(s->bucket, 0xff, cap * sizeof *s->bucket);
    for (uint32_t i = 0; i < batch; i++)
        s->free_seq[s->nfree_seq++] = batch - 1 - i;
    s->head = s->tail = NONE;
    s->b[NULL_BLK].ref = 1;
    for (uint64_t i = 0; i < s->n; i++) {
        s->b[i].group = NONE;
        s->b[i].prev = s->b[i].next = NONE;
        if (i != NULL_BLK)
            queue_append(s, (uint32_t)i);
    }
    for (uint32_t i = 0; i < s->w->n; i++) {
        const struct kvp_sim_request *q = &s->w->req[i];
        struct sreq *r = &s->q[i];
        uint64_t len = (uint64_t)q->prompt + q->output;
        r->cap = (uint32_t)kvp_cdiv(len, c->block_size) + 1;
        r->seq = NONE;
        r->tok = malloc(len * sizeof *r->tok);
        r->table = calloc((uint64_t)r->cap * s->G, sizeof *r->table);
        r->hash = malloc(r->cap * sizeof *r->hash);
        if (!r->tok || !r->table || !r->hash)
            return kvp_fail(err, KVP_ERR_NOMEM, "validate: out of memory for request %u", i + 1);
        for (uint64_t p = 0; p < q->prompt; p++)
            r->tok[p] = prompt_token(q, i, p, (uint32_t)vocab);
        r->ntok = q->prompt;
    }
    return assign_groups(s, err);
}

static void serve_free(struct serve *s)
{
    for (uint64_t i = 0; s->b && i < s->n; i++) {
        for (uint32_t l = 0; s->b[i].mem && l < s->L; l++)
            for (int kv = 0; kv < 2; kv++)
                kvp_ref_alloc_put(&s->alloc, tag_of(s, l, kv), s->b[i].mem[2 * l + kv],
                                  ref_cache_block_bytes(s->cache, l, kv));
        free(s->b[i].mem);
    }
    for (uint32_t i = 0; s->q && i < s->w->n; i++) {
        free(s->q[i].tok);
        free(s->q[i].table);
        free(s->q[i].hash);
    }
    for (uint32_t g = 0; g < KVP_SIM_MAX_GROUPS; g++)
        free(s->hit[g]);
    kvp_ref_cache_free(s->cache);
    free(s->group_of);
    free(s->b);
    free(s->bucket);
    free(s->q);
    free(s->seq_req);
    free(s->free_seq);
    free(s->logits);
    free(s->fresh);
    free(s->dropped);
}

/* What the replay will compute: the tokens the log schedules, and the cached
 * rows their attention reads (each token at position p reads p + 1, windows
 * aside: an upper bound), following each request's computed tokens through
 * admissions (from the claimed hit) and preemptions (back to 0). */
static enum kvp_status work_of(const struct kvp_sim_result *r, uint32_t n, uint64_t *tokens, uint64_t *rows,
                               struct kvp_error *err)
{
    uint64_t *done = calloc(n ? n : 1, sizeof *done);
    if (!done)
        return kvp_fail(err, KVP_ERR_NOMEM, "validate: out of memory");
    *tokens = *rows = 0;
    for (uint64_t i = 0; i < r->nlog; i++) {
        const struct kvp_sim_event *e = &r->log[i];
        if (e->kind == KVP_SIM_PREEMPT) {
            done[e->req] = 0;
        } else if (e->kind == KVP_SIM_SCHEDULE) {
            uint64_t c = (e->admit ? e->hit : done[e->req]);
            *tokens = kvp_sat_add(*tokens, e->tokens);
            *rows =
                kvp_sat_add(*rows, kvp_sat_add(kvp_sat_mul(e->tokens, c), kvp_sat_mul(e->tokens, e->tokens + 1) / 2));
            done[e->req] = c + e->tokens;
        }
    }
    free(done);
    return KVP_OK;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The decoder's token budget: o's, or KVP_SERVE_MAX_TOKENS. */
static uint64_t token_budget(const struct kvp_serve_opts *o)
{
    return o->max_tokens ? o->max_tokens : KVP_SERVE_MAX_TOKENS;
}

enum kvp_status kvp_serve_check_workload(const struct kvp_workload *w, const struct kvp_serve_opts *o,
                                         struct kvp_error *err)
{
    uint64_t budget = token_budget(o), least = 0;
    for (uint32_t i = 0; i < w->n && least <= budget; i++)
        least += w->req[i].output;
    if (least <= budget)
        return KVP_OK;
    return kvp_fail(err, KVP_ERR_USAGE, "--validate: the requests' answers alone are more than the decoder's budget of "
                    "%llu tokens (a smaller workload: fewer or shorter requests)", (unsigned long long)budget);
}

enum kvp_status kvp_serve_validate(const struct kvp_model *m, const struct kvp_sim_config *c,
                                   const struct kvp_workload *w, const struct kvp_sim_result *r,
                                   const struct kvp_serve_opts *o, struct kvp_serve_report *out,
                                   struct kvp_error *err)
{
    struct serve s;
    struct kvp_ref_model *rm = NULL;
    enum kvp_status st = KVP_OK;
    uint64_t tokens = 0, rows = 0, row_bytes = 0, e = 0;
    uint64_t budget = token_budget(o);
    uint64_t read_budget = o->max_read_bytes ? o->max_read_bytes : KVP_SERVE_MAX_READ;
    uint32_t batch = 1;
    double t0 = now_s();

    memset(out, 0, sizeof *out);
    out->match = true;
    if (c->engine != KVP_SIM_VLLM)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "--validate replays vLLM's paged block pool; other engines' "
                        "schedulers (llama.cpp: fixed slots) are not validated yet");
    if (!r->series || !c->log_decisions || r->steps == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "--validate needs the simulation's series and decision log");
    if ((st = work_of(r, w->n, &tokens, &rows, err)) != KVP_OK)
        return st;
    if (tokens > budget)
        return kvp_fail(err, KVP_ERR_USAGE, "--validate: the decoder would compute %llu tokens, more than its budget "
                        "of %llu (a smaller workload: fewer or shorter requests)", (unsigned long long)tokens,
                        (unsigned long long)budget);
    for (uint64_t k = 0; k < r->steps; k++)
        batch = r->series[k].running + 1u > batch ? r->series[k].running + 1u : batch;
    batch = batch < w->n ? batch : w->n;
    memset(&s, 0, sizeof s);
    s.c = c;
    s.w = w;
    s.out = out;
    s.logit_left = o->logit_checks ? o->logit_checks : UINT32_MAX;
    if ((st = serve_init(&s, m, o, batch, &rm, err)) != KVP_OK)
        goto done;
    for (uint32_t l = 0; l < s.L; l++)
        for (int kv = 0; kv < 2 && kvp_model_layer(s.shape, l)->kind != KVP_LAYER_RECURRENT; kv++)
            row_bytes += ref_cache_block_bytes(s.cache, l, kv) / c->block_size;
    if (kvp_sat_mul(tokens, row_bytes) > KVP_SERVE_MAX_MEMORY) {
        st = kvp_fail(err, KVP_ERR_USAGE, "--validate: %llu tokens of %llu B could need %.1f GiB of blocks, more "
                      "than %.0f GiB (a smaller workload: fewer or shorter requests)", (unsigned long long)tokens,
                      (unsigned long long)row_bytes, (double)kvp_sat_mul(tokens, row_bytes) / 1073741824.0,
                      (double)KVP_SERVE_MAX_MEMORY / 1073741824.0);
        goto done;
    }
    if (kvp_sat_mul(rows, row_bytes) > read_budget) {
        st = kvp_fail(err, KVP_ERR_USAGE, "--validate: the decoder's attention would read %llu cached rows of %llu B "
                      "(%.0f GB), more than its budget of %.0f GB (a smaller workload: fewer or shorter requests)",
                      (unsigned long long)rows, (unsigned long long)row_bytes,
                      (double)kvp_sat_mul(rows, row_bytes) / 1e9, (double)read_budget / 1e9);
        goto done;
    }
    for (uint64_t k = 0; k < r->steps && out->match; k++) {
        uint64_t first = e;
        for (; e < r->nlog && r->log[e].step == k && out->match && st == KVP_OK; e++) {
            const struct kvp_sim_event *x = &r->log[e];
            if (x->kind == KVP_SIM_SCHEDULE)
                st = schedule(&s, x, err);
            else
                refuse(&s, x);
        }
        if (st != KVP_OK)
            goto done;
        if (!out->match)
            break;
        compare_step(&s, k, &r->series[k]);
        finish_step(&s, r->log + first, e - first);
    }
    for (uint32_t i = 0; i < w->n && out->match; i++)
        if (differ(&s, r->steps, "requests finished", 1, s.q[i].done))
            break;
    out->peak_bytes = s.alloc.peak_total;
done:
    serve_free(&s);
    kvp_ref_model_free(rm);
    out->wall_s = now_s() - t0;
    return st;
}
