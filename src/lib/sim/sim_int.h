/* sim_int.h -- the simulator's state shared by its engines (sim.c: vLLM V1
 * and llama.cpp, and the run; sim_sglang.c; sim_trtllm.c; sim_vllm0.c): vLLM's block pool
 * (ref counts, an LRU free queue, blocks cached by identity), which
 * TensorRT-LLM's reuse pool and vLLM V0 follow too, and the per-request state the run
 * steps. Internal to src/lib; docs/simulate.md gives the rules. */
#ifndef KVPLAN_SIM_INT_H
#define KVPLAN_SIM_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/deploy.h"
#include "kvplan/num.h"
#include "kvplan/sim.h"

#define NONE UINT32_MAX
#define NULL_BLOCK 0u /* BlockPool.null_block: block 0, taken off the free queue at start */

/* A list threaded through per-entry prev/next arrays, NONE-terminated, least
 * recent at the head: the pool's free queue and the offload tier's LRU order. */
struct lru {
    uint32_t head, tail;
    uint32_t *prev, *next;
};

static inline void lru_unlink(struct lru *l, uint32_t e)
{
    if (l->prev[e] != NONE)
        l->next[l->prev[e]] = l->next[e];
    else
        l->head = l->next[e];
    if (l->next[e] != NONE)
        l->prev[l->next[e]] = l->prev[e];
    else
        l->tail = l->prev[e];
    l->prev[e] = l->next[e] = NONE;
}

static inline void lru_append(struct lru *l, uint32_t e)
{
    l->prev[e] = l->tail;
    l->next[e] = NONE;
    if (l->tail != NONE)
        l->next[l->tail] = e;
    else
        l->head = e;
    l->tail = e;
}

/* ---- an index of ids by key: open addressing, linear probing ----
 * Each slot keeps its entry's 32-bit hash beside the id: a probe reads the
 * entry only when the hashes are equal, and a deletion's backward shift
 * finds an entry's home without rehashing it. The home is the hash's low
 * bits; the table has at least twice the slots of the entries it holds. */
struct hslot {
    uint32_t id; /* NONE: empty */
    uint32_t hash;
};

struct hindex {
    struct hslot *slot;
    uint64_t mask;
};

static inline void hx_free(struct hindex *x)
{
    free(x->slot);
    x->slot = NULL;
}

/* Room for `entries` ids, all slots empty; false when out of memory. */
static inline bool hx_init(struct hindex *x, uint64_t entries)
{
    uint64_t cap = 16;
    while (cap < 2 * entries)
        cap *= 2;
    free(x->slot);
    if (!(x->slot = malloc(cap * sizeof *x->slot)))
        return false;
    memset(x->slot, 0xff, cap * sizeof *x->slot);
    x->mask = cap - 1;
    return true;
}

/* The slot of the entry with hash h that same(key, id) accepts, or of the
 * empty slot it would take. */
static inline uint64_t hx_find(const struct hindex *x, uint32_t h, bool (*same)(const void *key, uint32_t id),
                               const void *key)
{
    uint64_t i = h & x->mask;
    for (; x->slot[i].id != NONE; i = (i + 1) & x->mask)
        if (x->slot[i].hash == h && same(key, x->slot[i].id))
            return i;
    return i;
}

/* Empty slot i (backward-shift deletion): an entry after it in the run
 * moves into the hole when its home is not between the hole and itself. */
static inline void hx_remove_at(struct hindex *x, uint64_t i)
{
    for (uint64_t j = (i + 1) & x->mask; x->slot[j].id != NONE; j = (j + 1) & x->mask) {
        uint64_t k = x->slot[j].hash & x->mask;
        if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
            x->slot[i] = x->slot[j];
            i = j;
        }
    }
    x->slot[i].id = NONE;
}

/* ---- the block pool (v1/core/block_pool.py) ----
 * ref counts; a free queue, least recently freed first (FreeKVCacheBlockQueue),
 * which holds both empty blocks and cached ones whose ref count fell to 0;
 * the cache: block identity -> blocks (cached_block_hash_to_block). A block's
 * identity stands for vLLM's chained hash: a block wholly inside a shared
 * prefix is (prefix id, index), any other is (request, index), so two blocks
 * are equal exactly when their token chains are. The blocks of one identity
 * are a chain (oldest first) from its head: a shared prefix's head is in a
 * hash index; a request's own are in an array of its own (struct heads),
 * since only that request ever looks them up, and gone once it finished (its
 * blocks keep their identity, counted as cached, until they are reused). */
struct heads {
    uint32_t *at; /* [index * groups + group]: the chain head (NONE: none); NULL once the request finished */
    uint64_t n;   /* entries */
};

struct pool {
    uint64_t n, nfree, ncached_free;
    struct lru q;     /* the free queue */
    uint32_t *ref, *chain;
    uint64_t *owner;  /* identity's owner: 0 = no hash; prefix id | 2^63, or request + 1 */
    uint32_t *index;  /* identity's block index */
    uint8_t *grp;     /* group the block serves */
    struct hindex cache; /* the chain heads of shared-prefix identities */
    struct heads *own;   /* per request: the chain heads of its own identities */
    uint32_t groups;
    uint64_t used[KVP_SIM_MAX_GROUPS];
    uint64_t misowned; /* hits touched whose block lost the identity they were found by (must stay 0) */
    uint64_t unplaced; /* blocks cached under an identity past their request's blocks (must stay 0) */
    uint64_t watch[2];     /* the owners of the identities sim.c computed_blocks looked up (0: none) */
    bool watch_changed;    /* one of theirs cached since, or its oldest block replaced by a later one */
    bool watch_ref;        /* a block of theirs taken from or given back to the free queue */
    uint32_t watch_cut;    /* the least index of a watched identity evicted whole (NONE: none) */
};

static inline bool watched(const struct pool *p, uint64_t owner)
{
    return owner && (owner == p->watch[0] || owner == p->watch[1]);
}

KVP_WRAPS static inline uint32_t key_hash(uint64_t owner, uint32_t index, uint8_t g)
{
    uint64_t h = owner * 0x9e3779b97f4a7c15ull ^ ((uint64_t)index << 8 | g);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return (uint32_t)(h ^ (h >> 32));
}

struct block_key {
    const struct pool *p;
    uint64_t owner;
    uint32_t index;
    uint8_t g;
};

static inline bool same_key(const struct pool *p, uint32_t b, uint64_t owner, uint32_t index, uint8_t g)
{
    return p->owner[b] == owner && p->index[b] == index && p->grp[b] == g;
}

static inline bool is_block(const void *key, uint32_t b)
{
    const struct block_key *k = key;
    return same_key(k->p, b, k->owner, k->index, k->g);
}

static inline uint64_t find_slot(const struct pool *p, uint64_t owner, uint32_t index, uint8_t g)
{
    struct block_key k = {p, owner, index, g};
    return hx_find(&p->cache, key_hash(owner, index, g), is_block, &k);
}

static inline bool shared(uint64_t owner)
{
    return owner >> 63;
}

/* The cell of a request's own identity's chain head; NULL once the request
 * finished, or past its blocks (an identity it cannot have). */
static inline uint32_t *own_head(const struct pool *p, uint64_t owner, uint32_t index, uint8_t g)
{
    const struct heads *h = &p->own[owner - 1];
    uint64_t k = (uint64_t)index * p->groups + g;
    return h->at && k < h->n ? &h->at[k] : NULL;
}

/* get_cached_block: the oldest block with this identity, or NONE. */
static inline uint32_t cache_get(const struct pool *p, uint64_t owner, uint32_t index, uint8_t g)
{
    const uint32_t *h;
    if (shared(owner))
        return p->cache.slot[find_slot(p, owner, index, g)].id;
    return (h = own_head(p, owner, index, g)) ? *h : NONE;
}

/* A request's own identity past its blocks is an invariant broken:
 * counted (the run fails), the block left uncached. */
static inline void cache_put(struct pool *p, uint32_t b, uint64_t owner, uint32_t index)
{
    uint32_t *head;
    p->chain[b] = NONE;
    if (shared(owner)) {
        uint64_t i = find_slot(p, owner, index, p->grp[b]);
        if (p->cache.slot[i].id == NONE)
            p->cache.slot[i].hash = key_hash(owner, index, p->grp[b]);
        head = &p->cache.slot[i].id;
    } else if (!(head = own_head(p, owner, index, p->grp[b]))) {
        p->unplaced++;
        return;
    }
    p->watch_changed |= watched(p, owner);
    p->owner[b] = owner;
    p->index[b] = index;
    if (*head == NONE) {
        *head = b;
    } else { /* the same chain computed twice: kept after the first (dict order) */
        uint32_t x = *head;
        while (p->chain[x] != NONE)
            x = p->chain[x];
        p->chain[x] = b;
    }
}

/* _maybe_evict_cached_block. */
static inline void cache_evict(struct pool *p, uint32_t b)
{
    uint64_t owner = p->owner[b], i = 0;
    bool mine = watched(p, owner);
    uint32_t *head;
    if (shared(owner)) {
        i = find_slot(p, owner, p->index[b], p->grp[b]);
        head = &p->cache.slot[i].id;
    } else if (!(head = own_head(p, owner, p->index[b], p->grp[b]))) {
        p->owner[b] = 0;
        return; /* its request finished: nothing looks it up */
    }
    p->owner[b] = 0;
    if (*head != b) {
        uint32_t x = *head;
        while (p->chain[x] != b)
            x = p->chain[x];
        p->chain[x] = p->chain[b];
    } else if (p->chain[b] != NONE) {
        *head = p->chain[b];
        p->watch_changed |= mine;
    } else {
        if (shared(owner))
            hx_remove_at(&p->cache, i);
        else
            *head = NONE;
        if (mine && p->index[b] < p->watch_cut)
            p->watch_cut = p->index[b];
    }
}

static inline void queue_remove(struct pool *p, uint32_t b)
{
    lru_unlink(&p->q, b);
    p->nfree--;
    p->ncached_free -= p->owner[b] != 0;
}

static inline void queue_append(struct pool *p, uint32_t b)
{
    lru_append(&p->q, b);
    p->nfree++;
    p->ncached_free += p->owner[b] != 0;
}

/* get_new_blocks: pop the least recently freed block, evicting its hash. */
static inline uint32_t pool_take(struct pool *p, uint8_t g)
{
    uint32_t b = p->q.head;
    queue_remove(p, b);
    if (p->owner[b])
        cache_evict(p, b);
    p->ref[b] = 1;
    p->grp[b] = g;
    p->used[g]++;
    return b;
}

/* touch: a cache hit of group g, found by identity (owner, index), takes a
 * reference (off the free queue if it was free). A block that no longer
 * holds that identity is an invariant broken (a new block of another group
 * or request took the hit first: one block owned twice): counted, and the
 * run fails. */
static inline void pool_touch(struct pool *p, uint32_t b, uint64_t owner, uint32_t index, uint8_t g)
{
    p->misowned += !same_key(p, b, owner, index, g);
    if (p->ref[b]++ == 0) {
        p->watch_ref |= watched(p, p->owner[b]);
        queue_remove(p, b);
        p->used[p->grp[b]]++;
    }
}

/* free_blocks: drop a reference; at 0 the block joins the free queue's tail
 * (its hash kept until it is reused). */
static inline void pool_release(struct pool *p, uint32_t b)
{
    if (b == NULL_BLOCK)
        return;
    if (--p->ref[b] == 0) {
        p->watch_ref |= watched(p, p->owner[b]);
        p->used[p->grp[b]]--;
        queue_append(p, b);
    }
}

static inline void pool_free(struct pool *p)
{
    free(p->ref);
    free(p->q.prev);
    free(p->q.next);
    free(p->chain);
    free(p->owner);
    free(p->index);
    free(p->grp);
    free(p->own);
    hx_free(&p->cache);
}

/* n blocks, all free but the null block, for `requests` requests of `groups` groups. */
static inline enum kvp_status pool_init(struct pool *p, uint64_t n, uint32_t requests, uint32_t groups,
                                        struct kvp_error *err)
{
    memset(p, 0, sizeof *p);
    if (n >= NONE)
        return kvp_fail(err, KVP_ERR_RANGE, "simulate: %llu blocks are more than %u", (unsigned long long)n, NONE - 1);
    p->n = n;
    p->groups = groups;
    p->own = calloc(requests ? requests : 1, sizeof *p->own);
    p->ref = calloc(n, sizeof *p->ref);
    p->q.prev = malloc(n * sizeof *p->q.prev);
    p->q.next = malloc(n * sizeof *p->q.next);
    p->chain = malloc(n * sizeof *p->chain);
    p->owner = calloc(n, sizeof *p->owner);
    p->index = calloc(n, sizeof *p->index);
    p->grp = calloc(n, sizeof *p->grp);
    if (!p->ref || !p->q.prev || !p->q.next || !p->chain || !p->owner || !p->index || !p->grp || !p->own ||
        !hx_init(&p->cache, n)) {
        pool_free(p);
        return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory for %llu blocks", (unsigned long long)n);
    }
    p->q.head = p->q.tail = NONE;
    p->ref[NULL_BLOCK] = 1; /* the null block is never free */
    p->q.prev[NULL_BLOCK] = p->q.next[NULL_BLOCK] = NONE;
    for (uint32_t b = 1; b < n; b++)
        queue_append(p, b);
    return KVP_OK;
}

/* ---- the CPU offload tier (sim_offload.c) ----
 * A fixed number of host blocks, each holding one block identity (as the
 * pool's), in LRU order (vLLM's LRUOffloadingManager OrderedDict; TRT-LLM's
 * secondary free queue), found by identity. ref: -1 while being stored (not
 * ready: not found, not evicted), 0 ready, > 0 being loaded (not evicted).
 * pend chains the entries one request is storing (struct req.pend). */
struct tier {
    uint64_t n, used;
    struct lru lru;
    uint32_t spare;                   /* the free entries, chained by lru.next */
    uint32_t *pend;
    int32_t *ref;
    uint64_t *owner;
    uint32_t *index;
    struct hindex by_id;              /* the entries by identity */
};

/* The workload within KVP_SIM_BUDGET (sim_workload.c), checked before a run
 * allocates for it: KVP_ERR_USAGE at the request that passes it. */
enum kvp_status kvp_sim_workload_cost(const struct kvp_workload *w, struct kvp_error *err);

enum kvp_status kvp_sim_tier_init(struct tier *t, uint64_t n, struct kvp_error *err);
void kvp_sim_tier_free(struct tier *t);
/* The entry holding identity (owner, index), or NONE (also without a tier). */
uint32_t kvp_sim_tier_find(const struct tier *t, uint64_t owner, uint32_t index);
/* Make e the most recently used. */
void kvp_sim_tier_touch(struct tier *t, uint32_t e);
void kvp_sim_tier_drop(struct tier *t, uint32_t e);
/* Free `need` entries by evicting the least recently used ones with ref 0;
 * false (nothing evicted) when there are not that many. */
bool kvp_sim_tier_room(struct tier *t, uint64_t need);
/* A new most recent entry (the caller made room). */
uint32_t kvp_sim_tier_put(struct tier *t, uint64_t owner, uint32_t index, int32_t ref);

/* ---- requests and their block tables (single_type_kv_cache_manager.py) ---- */

enum rstate { R_PENDING, R_WAITING, R_RUNNING, R_DONE };

struct req {
    const struct kvp_sim_request *q;
    enum rstate state;
    uint64_t tokens;   /* prompt + generated (Request.num_tokens) */
    uint64_t computed; /* num_computed_tokens */
    uint32_t generated;
    /* from arrival to finish, one allocation (sim.c kvp_sim_run): per group the blocks in its
     * table and the blocks cached, then n_groups block tables of cap entries each (NULL_BLOCK:
     * skipped; cap 0 where the engine keeps none), then with a pool the request's own heads */
    uint32_t *len, *cached, *table;
    uint32_t cap;
    uint64_t live;     /* blocks other than the null block it holds (llama.cpp: cells) */
    uint64_t room;     /* vLLM: allocate has nothing to do below these tokens (sim.c room) */
    bool started;
    bool fresh;        /* vLLM: first scheduled this step (scheduled_new_reqs) */
    uint32_t next_stored; /* vLLM offload: _next_stored_block_idx */
    uint32_t pend;     /* vLLM offload: the tier entries it is storing (chained by tier.pend), NONE: none */
    uint32_t load_first, load_n; /* vLLM offload: blocks loaded this step (pinned until its end) */
    double first_sched, first_token, finish;
};

struct sim {
    const struct kvp_sim_config *c;
    struct pool pool;
    struct req *r;
    uint32_t n;
    uint32_t *wait, wait_head, nwait; /* a ring of n entries, FCFS; preempted requests go to its front */
    uint32_t *run, nrun;
    uint32_t *hit[KVP_SIM_MAX_GROUPS]; /* scratch: a cache hit's blocks per group */
    uint32_t hit_len[KVP_SIM_MAX_GROUPS];
    uint32_t hit_free[KVP_SIM_MAX_GROUPS]; /* of them, blocks on the free queue (evictable hits) */
    uint64_t hit_cap;
    uint32_t memo_uid;                 /* the request s->hit was looked up for (NONE: none), */
    uint64_t memo_tokens, memo_hit;    /* at how many tokens, and the hit in tokens */
    uint32_t memo_len[KVP_SIM_MAX_GROUPS], memo_free[KVP_SIM_MAX_GROUPS]; /* s->hit_len, s->hit_free */
    uint64_t memo_wrong;               /* audit: memos a lookup afresh disagreed with (must stay 0) */
    uint32_t *sched, *sched_n, nsched; /* this step's requests and tokens */
    double now;                        /* the step's start */
    struct kvp_sim_result *out;
    struct sg *sg;                     /* SGLang's radix cache and scheduler state (sim_sglang.c) */
    uint32_t *tmp;                     /* TRT-LLM: 2 n entries of scratch */
    uint64_t *tmp_key;                 /* TRT-LLM: n block identities of scratch */
    struct tier tier;                  /* the CPU offload tier (c->offload_blocks entries) */
    uint64_t loaded;                   /* blocks loaded from the tier this step */
    uint32_t *scratch;                 /* vLLM with a tier: one request's block indices */
    uint32_t *held;                    /* KVP_SIM_AUDIT: a count per pool block (sim.c audit) */
    uint64_t log_cap;                  /* out->log's room (log_decisions: vLLM V1 only) */
    bool log_nomem;
};

static inline uint64_t owner_of(const struct req *r, uint32_t uid, uint32_t i, uint32_t block)
{
    if (r->q->prefix_id && (uint64_t)(i + 1) * block <= r->q->prefix_tokens)
        return (uint64_t)r->q->prefix_id | 1ull << 63;
    return (uint64_t)uid + 1;
}

static inline uint32_t *table(const struct req *r, uint32_t g)
{
    return r->table + (uint64_t)g * r->cap;
}

static inline void schedule(struct sim *s, uint32_t i, uint64_t n)
{
    struct req *r = &s->r[i];
    if (!r->started) {
        r->started = true;
        r->first_sched = s->now;
    }
    s->sched[s->nsched] = i;
    s->sched_n[s->nsched++] = (uint32_t)n;
}

/* ---- the engines beside vLLM V1 and llama.cpp ---- */

/* sim_sglang.c: the token pool and limits SGLang runs with (page_size 1 only). */
enum kvp_status kvp_sim_sglang_config(const struct kvp_deploy *d, const struct kvp_fit *f, struct kvp_sim_config *c,
                                      struct kvp_error *err);
/* The radix cache's state in s->sg (freed by kvp_sim_sglang_free, NULL-safe). */
enum kvp_status kvp_sim_sglang_init(struct sim *s, struct kvp_error *err);
/* One scheduler iteration: a prefill (extend) batch, else a decode batch (retracting when full). */
enum kvp_status kvp_sim_sglang_step(struct sim *s, struct kvp_error *err);
/* Request r finished: cache_finished_req. */
void kvp_sim_sglang_finish(struct sim *s, struct req *r);
void kvp_sim_sglang_free(struct sim *s);

/* sim_trtllm.c: the block pool and limits TRT-LLM's PyTorch backend runs with. */
enum kvp_status kvp_sim_trtllm_config(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                                      struct kvp_sim_config *c, struct kvp_error *err);
/* Whether request q (1-based `i` in w) can ever run under c (KVP_ERR_RANGE at its line if not). */
enum kvp_status kvp_sim_trtllm_check(const struct kvp_sim_config *c, const struct kvp_workload *w, uint32_t i,
                                     struct kvp_error *err);
/* One executor iteration: the capacity scheduler, the micro-batch scheduler, the blocks. */
void kvp_sim_trtllm_step(struct sim *s);

/* sim_vllm0.c: vLLM V0's pool and limits (full attention only, no chunked prefill). */
enum kvp_status kvp_sim_vllm0_config(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                                     struct kvp_sim_config *c, struct kvp_error *err);
/* Whether request q (1-based `i` in w) can ever run under c (KVP_ERR_RANGE at its line if not). */
enum kvp_status kvp_sim_vllm0_check(const struct kvp_sim_config *c, const struct kvp_workload *w, uint32_t i,
                                    struct kvp_error *err);
/* One Scheduler._schedule_default step. */
void kvp_sim_vllm0_step(struct sim *s);

#endif
