/* sim_sglang.c -- SGLang's scheduler, token pool and radix cache (0.5.2;
 * 0.4.6 where it differs), one scheduler iteration per simulated step
 * (docs/simulate.md, section SGLang, gives every rule with its source).
 * Reading order: the configuration, the radix tree (match, insert, locks,
 * LRU eviction), a request's tokens (cache_unfinished_req,
 * cache_finished_req, retraction), the prefill adder, the iteration. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

#define MAX_PREFILL_TOKENS 16384  /* server_args.py max_prefill_tokens */
#define CLIP_MAX_NEW_TOKENS 4096  /* schedule_policy.py CLIP_MAX_NEW_TOKENS_ESTIMATION (SGLANG_CLIP_...) */
#define INIT_NEW_TOKEN_RATIO 0.7  /* global_config.py default_init_new_token_ratio (x schedule_conservativeness 1) */
#define MIN_NEW_TOKEN_RATIO_FACTOR 0.14 /* default_min_new_token_ratio_factor */
#define NEW_TOKEN_RATIO_DECAY_STEPS 600 /* default_new_token_ratio_decay_steps */
#define RETRACT_DECODE_STEPS 20   /* global_config.py retract_decode_steps */
#define MIB (1024.0 * 1024.0)

/* ---- the deployment ---- */

enum kvp_status kvp_sim_sglang_config(const struct kvp_deploy *d, const struct kvp_fit *f, struct kvp_sim_config *c,
                                      struct kvp_error *err)
{
    double gpu_mib = (double)d->gpu_memory / MIB;
    if (f->block_size != 1)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "simulate: sglang with --block-size %u (page_size > 1: the paged "
                        "allocator and page-aligned radix keys) is not simulated yet", f->block_size);
    if (f->swa_cells)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "simulate: sglang's hybrid SWA pools (a full and a sliding-window "
                        "token pool) are not simulated yet");
    if (f->state_slots)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "simulate: sglang's Mamba state pool (MambaRadixCache) is not "
                        "simulated yet");
    c->engine = KVP_SIM_SGLANG;
    c->n_groups = 1;
    c->group[0] = (struct kvp_sim_group){KVP_LAYER_FULL, 0};
    c->block_size = 1;
    c->num_blocks = f->kv_tokens + 1; /* max_total_num_tokens, and slot 0 (padding) as the pool's null block */
    c->max_num_seqs = f->max_running;
    c->max_model_len = d->context;
    c->max_prefill_tokens = MAX_PREFILL_TOKENS;
    /* chunked_prefill_size when not given (server_args.py, from the card's memory in MiB) */
    if (d->max_batched_tokens)
        c->max_batched_tokens = d->max_batched_tokens;
    else if (kvp_deploy_release(d)->rules & KVP_REL_SGLANG_TP_FRACTION)
        c->max_batched_tokens = gpu_mib < 25000 ? 2048 : 8192; /* 0.4.6 __post_init__ */
    else
        c->max_batched_tokens = gpu_mib < 35 * 1024 ? 2048 : gpu_mib < 160 * 1024 ? 8192 : 16384;
    c->prefix_caching = true; /* the radix cache (--disable-radix-cache: ChunkCache) */
    if (c->num_blocks < 2)
        return kvp_fail(err, KVP_ERR_USAGE, "simulate: the token pool has %llu tokens",
                        (unsigned long long)f->kv_tokens);
    return KVP_OK;
}

/* ---- the radix tree (mem_cache/radix_cache.py) ----
 * A node holds the KV slots of `len` consecutive tokens from position
 * `start`; their identities are those of request `src`'s tokens there
 * (owner_of at a block of one token: the shared prefix's id inside it, else
 * the request's own), so two requests' tokens match exactly where their
 * token chains are equal. Node 0 is the root (lock 1, never evicted). */
struct node {
    uint32_t parent, nchild, next_free; /* parent NONE: deleted (or the root); next_free: the free list */
    uint32_t src, start, len;
    uint32_t lock;   /* lock_ref: requests whose prefix runs through the node */
    uint64_t access; /* last_access_time, as a counter */
};

/* A leaf as the eviction heap saw it: stale once the node's access moved,
 * it got a child or it was deleted. */
struct leaf {
    uint64_t access, evictions; /* evictions: the root's entry holds for the eviction that pushed it */
    uint32_t node;
};

struct sg {
    struct node *node;
    uint32_t nnode, cap, free_node; /* slots used; free list of deleted nodes (through .next_free) */
    struct hindex children;         /* the nodes by (parent, first token) */
    uint64_t clock;
    uint64_t size, available;      /* the token pool; free slots (token_to_kv_pool.available_size) */
    uint64_t evictable, protect;   /* tree slots with lock 0 (evictable_size_) and with lock > 0 */
    uint32_t *last_node;           /* per request: the node its prefix ends at (NONE: holds none) */
    uint64_t *plen, *priv;         /* per request: tree slots it holds (len(prefix_indices)); its own slots */
    struct leaf *heap;             /* eviction's min-heap of leaves, kept between evictions (stale
                                    * entries dropped as they surface); 3 x cap entries */
    struct leaf *run;              /* beside it, the leaves pushed in ascending access (most: a finished
                                    * request's last node is the newest), [run_head, run_end); 3 x cap */
    uint32_t *skip;                /* an eviction's locked leaves, put back after it; cap entries */
    uint64_t nheap, run_head, run_end, evictions;
    uint32_t *batch, nbatch;       /* the last prefill batch (extend), in order */
    bool last_extend;
    uint32_t chunked;              /* the request being prefilled in chunks (NONE: none) */
    bool batch_is_full;
    uint32_t nfinished;            /* requests finished by the last step */
    double ratio, min_ratio, decay; /* new_token_ratio and its floor and decay per decode step */
};

static struct node *nd(struct sg *g, uint32_t x)
{
    return &g->node[x];
}

/* The tokens of node x (from its start) that request q's tokens match. */
static uint64_t node_match(const struct sim *s, const struct node *x, uint32_t q)
{
    const struct kvp_sim_request *a = s->r[x->src].q, *b = s->r[q].q;
    uint64_t lim;
    if (x->src == q)
        return x->len;
    if (!a->prefix_id || a->prefix_id != b->prefix_id)
        return 0;
    lim = a->prefix_tokens < b->prefix_tokens ? a->prefix_tokens : b->prefix_tokens;
    return lim <= x->start ? 0 : lim - x->start < x->len ? lim - x->start : x->len;
}

/* The identity of request q's token at position pos (TreeNode.children's
 * key, the first token of a child): the shared prefix's token there, else
 * q's own. Two requests' tokens are equal exactly when these are
 * (node_match > 0 for a child starting there). */
static uint64_t token_key(const struct sim *s, uint32_t q, uint64_t pos)
{
    const struct kvp_sim_request *r = s->r[q].q;
    return r->prefix_id && r->prefix_tokens > pos ? (uint64_t)r->prefix_id | 1ull << 63 : (uint64_t)q + 1;
}

struct child_key {
    const struct sim *s;
    uint32_t parent;
    uint64_t key;
};

static bool is_child(const void *key, uint32_t c)
{
    const struct child_key *k = key;
    struct sg *g = k->s->sg;
    return nd(g, c)->parent == k->parent && token_key(k->s, nd(g, c)->src, nd(g, c)->start) == k->key;
}

/* The slot of parent's child with first token key, or of the empty slot it would take. */
static uint64_t child_slot(const struct sim *s, uint32_t parent, uint64_t key)
{
    struct child_key k = {s, parent, key};
    return hx_find(&s->sg->children, key_hash(key, parent, 0), is_child, &k);
}

/* The child of x whose first token is request q's token there (NONE: none):
 * a hash lookup, so a root with 40,000 children costs what one with two does. */
static uint32_t child_of(const struct sim *s, uint32_t x, uint32_t q)
{
    struct sg *g = s->sg;
    uint64_t pos = x ? (uint64_t)nd(g, x)->start + nd(g, x)->len : 0;
    return g->children.slot[child_slot(s, x, token_key(s, q, pos))].id;
}

/* Node c (its parent, src and start set) into the index of its parent's children. */
static void child_add(const struct sim *s, uint32_t c)
{
    struct sg *g = s->sg;
    const struct node *n = nd(g, c);
    uint64_t key = token_key(s, n->src, n->start);
    g->children.slot[child_slot(s, n->parent, key)] = (struct hslot){c, key_hash(key, n->parent, 0)};
    nd(g, n->parent)->nchild++;
}

/* Node c out of the index. */
static void child_remove(const struct sim *s, uint32_t c)
{
    struct sg *g = s->sg;
    const struct node *n = nd(g, c);
    hx_remove_at(&g->children, child_slot(s, n->parent, token_key(s, n->src, n->start)));
    nd(g, n->parent)->nchild--;
}

/* ---- the eviction heap ---- */

static void sift_up(struct sg *g, uint64_t i)
{
    while (i > 0 && g->heap[i].access < g->heap[(i - 1) / 2].access) {
        struct leaf t = g->heap[(i - 1) / 2];
        g->heap[(i - 1) / 2] = g->heap[i];
        g->heap[i] = t;
        i = (i - 1) / 2;
    }
}

static struct leaf heap_pop(struct sg *g)
{
    struct leaf top = g->heap[0];
    uint64_t i = 0, n = --g->nheap;
    g->heap[0] = g->heap[n];
    for (;;) {
        uint64_t l = 2 * i + 1, r = l + 1, m = i;
        struct leaf t;
        if (l < n && g->heap[l].access < g->heap[m].access)
            m = l;
        if (r < n && g->heap[r].access < g->heap[m].access)
            m = r;
        if (m == i)
            return top;
        t = g->heap[m];
        g->heap[m] = g->heap[i];
        g->heap[i] = t;
        i = m;
    }
}

static bool is_leaf(const struct sg *g, uint32_t x)
{
    return g->node[x].parent != NONE && g->node[x].nchild == 0;
}

/* Is e still a leaf with the access it had? (The root's entry: only in the eviction that pushed it.) */
static bool current(const struct sg *g, const struct leaf *e)
{
    return e->node == 0 ? e->evictions == g->evictions
                        : is_leaf(g, e->node) && g->node[e->node].access == e->access;
}

/* The current entries of e[from..to) moved to e[0..), in order; how many. */
static uint64_t keep_current(const struct sg *g, struct leaf *e, uint64_t from, uint64_t to)
{
    uint64_t n = 0;
    for (uint64_t i = from; i < to; i++)
        if (current(g, &e[i]))
            e[n++] = e[i];
    return n;
}

/* Node x, a leaf now (or the root left childless by an eviction), onto the
 * run when it is the newest there, else onto the heap; a full run or heap
 * is first cut to the current leaves (at most cap). */
static void push_leaf(struct sg *g, uint32_t x)
{
    struct leaf e = {g->node[x].access, g->evictions, x};
    if (g->run_head == g->run_end || g->run[g->run_end - 1].access <= e.access) {
        if (g->run_end == 3ull * g->cap) { /* a subsequence of a sorted run is one */
            g->run_end = keep_current(g, g->run, g->run_head, g->run_end);
            g->run_head = 0;
        }
        g->run[g->run_end++] = e;
        return;
    }
    if (g->nheap == 3ull * g->cap) {
        uint64_t n = keep_current(g, g->heap, 0, g->nheap); /* a subsequence of a heap is not one: sifted again */
        g->nheap = 0;
        for (uint64_t i = 0; i < n; i++) {
            g->heap[g->nheap] = g->heap[i];
            sift_up(g, g->nheap++);
        }
    }
    g->heap[g->nheap] = e;
    sift_up(g, g->nheap++);
}

/* The least recently accessed entry of the run and the heap; false when both are empty. */
static bool leaf_pop(struct sg *g, struct leaf *e)
{
    if (g->run_head < g->run_end && (g->nheap == 0 || g->run[g->run_head].access < g->heap[0].access))
        *e = g->run[g->run_head++];
    else if (g->nheap > 0)
        *e = heap_pop(g);
    else
        return false;
    return true;
}

/* The children's index for cap nodes: twice as many slots, the live nodes put back. */
static enum kvp_status index_for(const struct sim *s, uint32_t cap, struct kvp_error *err)
{
    struct sg *g = s->sg;
    if (!hx_init(&g->children, cap))
        return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory for %u radix nodes", cap);
    for (uint32_t x = 1; x < g->nnode; x++)
        if (nd(g, x)->parent != NONE) {
            nd(g, nd(g, x)->parent)->nchild--; /* child_add counts it again */
            child_add(s, x);
        }
    return KVP_OK;
}

/* Room for `extra` more nodes without growing (a finish's insert takes at most two). */
static enum kvp_status reserve(const struct sim *s, uint32_t extra, struct kvp_error *err)
{
    struct sg *g = s->sg;
    while (g->cap - g->nnode < extra) {
        uint32_t cap = g->cap * 2;
        struct node *p = realloc(g->node, (uint64_t)cap * sizeof *p);
        struct leaf *h = realloc(g->heap, 3ull * cap * sizeof *h), *r = realloc(g->run, 3ull * cap * sizeof *r);
        uint32_t *k = realloc(g->skip, (uint64_t)cap * sizeof *k);
        enum kvp_status st;
        if (p)
            g->node = p;
        if (h)
            g->heap = h;
        if (r)
            g->run = r;
        if (k)
            g->skip = k;
        if (!p || !h || !r || !k || cap >= NONE)
            return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory for %u radix nodes", cap);
        g->cap = cap;
        if ((st = index_for(s, cap, err)) != KVP_OK)
            return st;
    }
    return KVP_OK;
}

static enum kvp_status new_node(const struct sim *s, uint32_t *out, struct kvp_error *err)
{
    struct sg *g = s->sg;
    if (g->free_node != NONE) {
        *out = g->free_node;
        g->free_node = nd(g, *out)->next_free;
        return KVP_OK;
    }
    enum kvp_status st = reserve(s, 1, err);
    if (st == KVP_OK)
        *out = g->nnode++;
    return st;
}

/* _split_node: x keeps its tail after m tokens; a new node (fresh access
 * time, x's lock) takes its head and x's place under its parent. */
static enum kvp_status split(const struct sim *s, uint32_t x, uint32_t m, uint32_t *head, struct kvp_error *err)
{
    struct sg *g = s->sg;
    enum kvp_status st;
    uint32_t h;
    if ((st = new_node(s, &h, err)) != KVP_OK)
        return st;
    child_remove(s, x);
    *nd(g, h) = (struct node){nd(g, x)->parent, 0, NONE, nd(g, x)->src, nd(g, x)->start, m, nd(g, x)->lock,
                              ++g->clock};
    child_add(s, h); /* in x's place: the same first token */
    nd(g, x)->parent = h;
    nd(g, x)->start += m;
    nd(g, x)->len -= m;
    child_add(s, x);
    *head = h;
    return KVP_OK;
}

/* match_prefix (_match_prefix_helper): the longest cached prefix of request
 * q's first `key` tokens, splitting the node it ends inside; every node on
 * the way is touched. *last gets the node it ends at. */
static enum kvp_status match_prefix(struct sim *s, uint32_t q, uint64_t key, uint32_t *last, uint64_t *matched,
                                    struct kvp_error *err)
{
    struct sg *g = s->sg;
    uint32_t x = 0, c;
    uint64_t d = 0;
    enum kvp_status st;
    nd(g, 0)->access = ++g->clock;
    while (d < key && (c = child_of(s, x, q)) != NONE) {
        uint64_t m = node_match(s, nd(g, c), q);
        nd(g, c)->access = ++g->clock;
        if (nd(g, c)->nchild == 0)
            push_leaf(g, c); /* its entry with the old access is stale now */
        m = m < key - d ? m : key - d;
        if (m < nd(g, c)->len) {
            if ((st = split(s, c, (uint32_t)m, &x, err)) != KVP_OK)
                return st;
            d += m;
            break;
        }
        x = c;
        d += m;
    }
    *last = x;
    *matched = d;
    return KVP_OK;
}

/* insert (_insert_helper): request q's first `key` tokens into the tree; the
 * part not there yet becomes a new leaf (lock 0, evictable). *had gets the
 * tokens that were there already (their slots are the caller's duplicates). */
static enum kvp_status insert(struct sim *s, uint32_t q, uint64_t key, uint64_t *had, struct kvp_error *err)
{
    struct sg *g = s->sg;
    uint32_t x, leaf;
    uint64_t d;
    enum kvp_status st;
    if ((st = match_prefix(s, q, key, &x, &d, err)) != KVP_OK) /* the same walk, a partial node split */
        return st;
    *had = d;
    if (d == key)
        return KVP_OK;
    if ((st = new_node(s, &leaf, err)) != KVP_OK)
        return st;
    *nd(g, leaf) = (struct node){x, 0, NONE, q, (uint32_t)d, (uint32_t)(key - d), 0, ++g->clock};
    child_add(s, leaf);
    push_leaf(g, leaf);
    g->evictable += key - d;
    return KVP_OK;
}

/* inc_lock_ref / dec_lock_ref: from x up to the root, a node whose lock
 * leaves or reaches 0 moves between the evictable and protected sizes. */
static void lock(struct sg *g, uint32_t x, bool on)
{
    for (; x != 0 && x != NONE; x = nd(g, x)->parent) {
        struct node *n = nd(g, x);
        if (on && n->lock++ == 0) {
            g->evictable -= n->len;
            g->protect += n->len;
        } else if (!on && --n->lock == 0) {
            g->evictable += n->len;
            g->protect -= n->len;
        }
    }
}

/* evict: leaves, least recently used first, until `tokens` slots are freed;
 * a locked leaf is skipped, a parent left childless joins the heap, the
 * root ends it. Whole nodes are freed, so it may free more than asked.
 * SGLang collects the leaves afresh each time (_collect_leaves); the run and
 * the heap here are kept between evictions, their stale entries dropped as
 * they come up, so the order is the same (accesses are unique) and an
 * eviction costs the leaves it frees, not the whole tree. */
static void evict(struct sim *s, uint64_t tokens)
{
    struct sg *g = s->sg;
    uint64_t freed = 0;
    uint32_t nskip = 0;
    if (tokens == 0 || !s->c->prefix_caching)
        return;
    g->evictions++;
    struct leaf e;
    while (freed < tokens && leaf_pop(g, &e)) {
        uint32_t x = e.node, p;
        if (!current(g, &e))
            continue;
        if (x == 0)
            break;
        if (nd(g, x)->lock > 0) {
            g->skip[nskip++] = x; /* still a leaf: back on the heap after this eviction */
            continue;
        }
        p = nd(g, x)->parent;
        freed += nd(g, x)->len;
        g->available += nd(g, x)->len;
        g->evictable -= nd(g, x)->len;
        child_remove(s, x);
        nd(g, x)->next_free = g->free_node;
        nd(g, x)->parent = NONE;
        g->free_node = x;
        if (nd(g, p)->nchild == 0)
            push_leaf(g, p);
    }
    for (uint32_t i = 0; i < nskip; i++)
        push_leaf(g, g->skip[i]);
}

/* The figures the run records: tokens referenced by requests, cached free
 * (evictable) and empty slots. */
static void sync(struct sim *s)
{
    struct sg *g = s->sg;
    s->pool.used[0] = g->size - g->available - g->evictable;
    s->pool.nfree = g->available + g->evictable;
    s->pool.ncached_free = g->evictable;
}

/* alloc_token_slots: when the free slots are too few, evict(n) first (the
 * whole n, not the shortfall). */
static enum kvp_status alloc_slots(struct sim *s, uint64_t n, struct kvp_error *err)
{
    struct sg *g = s->sg;
    if (g->available < n)
        evict(s, n);
    if (g->available < n)
        return kvp_fail(err, KVP_ERR_RANGE, "simulate: sglang's token pool ran out (%llu slots asked, %llu free)",
                        (unsigned long long)n, (unsigned long long)g->available);
    g->available -= n;
    return KVP_OK;
}

/* ---- a request's tokens (radix_cache.py cache_unfinished_req / cache_finished_req) ---- */

static void hold(struct sim *s, uint32_t i)
{
    s->r[i].live = s->sg->plen[i] + s->sg->priv[i];
}

/* Insert request i's computed tokens; the slots the tree had already are
 * freed as duplicates; its new prefix (all of them) is locked in place of the old. */
static enum kvp_status cache_unfinished(struct sim *s, uint32_t i, struct kvp_error *err)
{
    struct sg *g = s->sg;
    uint64_t key = s->r[i].computed, had, m;
    uint32_t last;
    enum kvp_status st;
    if (!s->c->prefix_caching)
        return KVP_OK; /* ChunkCache: the request keeps its slots */
    if ((st = insert(s, i, key, &had, err)) != KVP_OK || (st = match_prefix(s, i, key, &last, &m, err)) != KVP_OK)
        return st;
    g->available += had - g->plen[i];
    g->priv[i] -= key - g->plen[i];
    lock(g, last, true);
    lock(g, g->last_node[i], false);
    g->last_node[i] = last;
    g->plen[i] = key;
    hold(s, i);
    return KVP_OK;
}

void kvp_sim_sglang_finish(struct sim *s, struct req *r)
{
    struct sg *g = s->sg;
    uint32_t i = (uint32_t)(r - s->r);
    uint64_t had = 0;
    struct kvp_error err = {0};
    g->nfinished++;
    if (!s->c->prefix_caching) {
        g->available += g->priv[i];
    } else {
        /* token_ids = (origin_input_ids + output_ids)[:-1]: the computed tokens. The step
         * reserved two nodes for every request it scheduled, so this insert cannot fail. */
        (void)insert(s, i, r->computed, &had, &err);
        g->available += had - g->plen[i];
        lock(g, g->last_node[i], false);
    }
    g->last_node[i] = NONE;
    g->plen[i] = g->priv[i] = 0;
    r->live = 0;
    sync(s);
}

/* ScheduleBatch.retract_decode, one request: its own slots freed, its
 * prefix unlocked (it stays cached), back to the end of the waiting queue. */
static void retract(struct sim *s, uint32_t i)
{
    struct sg *g = s->sg;
    g->available += g->priv[i];
    lock(g, g->last_node[i], false);
    g->last_node[i] = NONE;
    g->plen[i] = g->priv[i] = 0;
    s->r[i].live = 0;
    s->r[i].computed = 0;
    s->r[i].state = R_WAITING;
    s->wait[(s->wait_head + s->nwait++) % s->n] = i;
    s->out->preemptions++;
}

/* ---- the prefill adder (managers/schedule_policy.py PrefillAdder) ---- */

enum add { ADD_CONTINUE, ADD_NO_TOKEN, ADD_OTHER };

struct adder {
    double total_offset;   /* rem_total_token_offset */
    uint64_t cur_offset;   /* cur_rem_token_offset */
    int64_t rem_input, rem_chunk;
    uint32_t n;            /* can_run_list */
    uint32_t new_chunked;
};

static double rem_total(const struct sg *g, const struct adder *a)
{
    return (double)(g->available + g->evictable) - a->total_offset;
}

static enum add budget_state(const struct sg *g, const struct adder *a)
{
    if (rem_total(g, a) <= 0 || (double)(g->available + g->evictable) - (double)a->cur_offset <= 0)
        return ADD_NO_TOKEN;
    if (a->rem_input <= 0 || a->rem_chunk <= 0)
        return ADD_OTHER;
    return ADD_CONTINUE;
}

/* _prefill_one_req */
static void take(struct adder *a, uint64_t extend, uint64_t max_new)
{
    a->total_offset += (double)(extend + max_new);
    a->cur_offset += extend;
    a->rem_input -= (int64_t)extend;
    a->rem_chunk -= (int64_t)extend;
}

static uint64_t clip(uint64_t n)
{
    return n < CLIP_MAX_NEW_TOKENS ? n : CLIP_MAX_NEW_TOKENS;
}

/* add_one_req (the radix cache's path): the prefix match (at most fill - 1
 * tokens), then the prompt's remaining tokens plus its clipped
 * max_new_tokens must stay below what is free and evictable less the
 * running requests' reservation; a prompt longer than what is left of the
 * chunk is cut there (and becomes the chunked request). */
static enum kvp_status add_one(struct sim *s, struct adder *a, uint32_t i, enum add *res, uint64_t *extend,
                               bool *admitted, struct kvp_error *err)
{
    struct sg *g = s->sg;
    struct req *r = &s->r[i];
    uint64_t m = 0, total, max_new = clip(r->q->output);
    uint32_t last = 0;
    enum kvp_status st;
    *admitted = false;
    if (s->c->prefix_caching && (st = match_prefix(s, i, r->tokens - 1, &last, &m, err)) != KVP_OK)
        return st;
    *extend = r->tokens - m;
    total = *extend + max_new;
    if ((double)total >= rem_total(g, a)) {
        *res = ADD_NO_TOKEN;
        return KVP_OK;
    }
    if ((int64_t)*extend > a->rem_input && a->n != 0) {
        *res = ADD_OTHER;
        return KVP_OK;
    }
    lock(g, last, true); /* _lock_node, kept when admitted */
    if ((double)total > rem_total(g, a)) {
        lock(g, last, false);
        *res = ADD_NO_TOKEN;
        return KVP_OK;
    }
    if ((int64_t)*extend <= a->rem_chunk) {
        take(a, *extend, max_new);
    } else {
        *extend = (uint64_t)a->rem_chunk; /* trunc_len (page 1) */
        a->new_chunked = i;
        take(a, *extend, 0);
    }
    g->last_node[i] = last;
    g->plen[i] = m;
    r->computed = m;
    s->out->prefix_hit_tokens += m;
    a->n++;
    *admitted = true;
    *res = budget_state(g, a);
    return KVP_OK;
}

/* get_new_batch_prefill: the chunked request's next chunk first, then the
 * waiting queue in order (policy fcfs) while fewer than
 * max_running_requests run and the adder continues; NO_TOKEN or the limit
 * marks the batch full until a request leaves it. Allocates the batch's
 * new slots and schedules it; false when there is none. */
static enum kvp_status prefill(struct sim *s, bool *any, struct kvp_error *err)
{
    const struct kvp_sim_config *c = s->c;
    struct sg *g = s->sg;
    struct adder a = {0, 0, (int64_t)c->max_prefill_tokens, (int64_t)c->max_batched_tokens, 0, NONE};
    uint64_t want = 0;
    enum kvp_status st;

    *any = false;
    g->nbatch = 0;
    if ((g->batch_is_full || s->nwait == 0) && g->chunked == NONE)
        return KVP_OK;
    if (s->nrun >= c->max_num_seqs) {
        g->batch_is_full = true;
        return KVP_OK;
    }
    for (uint32_t k = 0; k < s->nrun; k++) {
        const struct req *r = &s->r[s->run[k]];
        a.total_offset += (double)clip(r->q->output - r->generated) * g->ratio;
    }
    if (g->chunked != NONE) { /* add_chunked_req */
        struct req *r = &s->r[g->chunked];
        uint64_t extend = r->tokens - r->computed;
        bool truncated = (int64_t)extend > a.rem_chunk;
        extend = truncated ? (uint64_t)a.rem_chunk : extend;
        take(&a, extend, truncated ? 0 : clip(r->q->output));
        a.n++;
        g->batch[g->nbatch++] = g->chunked;
        schedule(s, g->chunked, extend);
        want += extend;
        g->chunked = truncated ? g->chunked : NONE;
    }
    while (s->nwait > 0) {
        uint32_t i = s->wait[s->wait_head];
        uint64_t extend;
        enum add res;
        bool admitted;
        if (s->nrun + a.n >= c->max_num_seqs) {
            g->batch_is_full = true;
            break;
        }
        if ((st = add_one(s, &a, i, &res, &extend, &admitted, err)) != KVP_OK)
            return st;
        if (admitted) { /* off the queue, into the batch */
            s->wait_head = (s->wait_head + 1) % s->n;
            s->nwait--;
            s->r[i].state = R_RUNNING;
            g->batch[g->nbatch++] = i;
            schedule(s, i, extend);
            want += extend;
            if (a.new_chunked == i)
                g->chunked = i;
        }
        if (res != ADD_CONTINUE) {
            if (res == ADD_NO_TOKEN)
                g->batch_is_full = true;
            break;
        }
    }
    if (g->nbatch == 0)
        return KVP_OK;
    if ((st = alloc_slots(s, want, err)) != KVP_OK) /* prepare_for_extend */
        return st;
    for (uint32_t k = 0; k < s->nsched; k++) {
        g->priv[s->sched[k]] += s->sched_n[k];
        hold(s, s->sched[k]);
    }
    *any = true;
    return KVP_OK;
}

/* retract_decode: by (output tokens, -prompt tokens) descending, the last
 * first (the fewest generated, then the longest prompt, then the latest
 * in the batch), at least one and until retract_decode_steps tokens per
 * remaining request are free (evicting what the retraction unlocked) or one
 * is left; new_token_ratio becomes (decoded + steps x n) / max_new_tokens
 * of those left, at most 1. */
struct rkey {
    uint32_t generated, prompt, pos, id;
};

/* The order sorted_indices ends up in: descending, stable on the batch order. */
static int cmp_rkey(const void *x, const void *y)
{
    const struct rkey *a = x, *b = y;
    if (a->generated != b->generated)
        return a->generated < b->generated ? 1 : -1;
    if (a->prompt != b->prompt)
        return a->prompt > b->prompt ? 1 : -1;
    return a->pos > b->pos ? 1 : -1;
}

static enum kvp_status retract_decode(struct sim *s, struct kvp_error *err)
{
    struct sg *g = s->sg;
    uint32_t n = s->nrun, j = 0;
    uint64_t decoded = 0, max_new = 0;
    bool first = true;
    struct rkey *o = malloc(n * sizeof *o);
    if (!o)
        return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory");
    for (uint32_t k = 0; k < n; k++)
        o[k] = (struct rkey){s->r[s->run[k]].generated, s->r[s->run[k]].q->prompt, k, s->run[k]};
    qsort(o, n, sizeof *o, cmp_rkey);
    while (g->available < (uint64_t)RETRACT_DECODE_STEPS * n || first) {
        if (n == 1)
            break;
        first = false;
        retract(s, o[--n].id);
        if ((uint64_t)RETRACT_DECODE_STEPS * n > g->available)
            evict(s, (uint64_t)RETRACT_DECODE_STEPS * n - g->available);
    }
    for (uint32_t k = 0; k < s->nrun; k++)
        if (s->r[s->run[k]].state == R_RUNNING)
            s->run[j++] = s->run[k];
    s->nrun = j;
    for (uint32_t k = 0; k < s->nrun; k++) {
        decoded += s->r[s->run[k]].generated;
        max_new += s->r[s->run[k]].q->output;
    }
    g->ratio = ((double)decoded + RETRACT_DECODE_STEPS * (double)s->nrun) / (double)max_new;
    g->ratio = g->ratio < 1.0 ? g->ratio : 1.0;
    free(o);
    return KVP_OK;
}

/* ---- the iteration (managers/scheduler.py get_next_batch_to_run) ---- */

static enum kvp_status iteration(struct sim *s, struct kvp_error *err)
{
    struct sg *g = s->sg;
    bool shrunk = g->nfinished > 0, any;
    enum kvp_status st;
    g->nfinished = 0;
    if (g->last_extend) {
        /* process_batch_result_prefill inserted the finished prompts; the chunked
         * request's chunk is inserted now; the rest merge into the running batch */
        for (uint32_t k = 0; k < g->nbatch; k++) {
            uint32_t i = g->batch[k];
            if (i == g->chunked || s->r[i].state != R_RUNNING)
                continue;
            if ((st = cache_unfinished(s, i, err)) != KVP_OK)
                return st;
            s->run[s->nrun++] = i;
        }
        if (g->chunked != NONE) {
            if ((st = cache_unfinished(s, g->chunked, err)) != KVP_OK)
                return st;
            g->batch_is_full = false;
        }
        if (shrunk)
            g->batch_is_full = false;
        shrunk = false;
    }
    g->last_extend = false;
    if ((st = prefill(s, &any, err)) != KVP_OK)
        return st;
    if (any) {
        g->last_extend = true;
        return KVP_OK;
    }
    if (shrunk) /* update_running_batch's filter_batch dropped finished requests */
        g->batch_is_full = false;
    if (s->nrun > 0) {
        if (g->available < s->nrun) /* check_decode_mem */
            evict(s, s->nrun);
        if (g->available < s->nrun) {
            if ((st = retract_decode(s, err)) != KVP_OK)
                return st;
            g->batch_is_full = false;
        } else {
            g->ratio = g->ratio - g->decay > g->min_ratio ? g->ratio - g->decay : g->min_ratio;
        }
        if ((st = alloc_slots(s, s->nrun, err)) != KVP_OK) /* prepare_for_decode */
            return st;
        for (uint32_t k = 0; k < s->nrun; k++) {
            g->priv[s->run[k]]++;
            hold(s, s->run[k]);
            schedule(s, s->run[k], 1);
        }
    } else {
        g->ratio = INIT_NEW_TOKEN_RATIO; /* idle: new_token_ratio back to its start */
    }
    return KVP_OK;
}

/* An iteration that runs nothing but leaves the batch no longer full (its
 * last requests finished) is followed at once by another, which may prefill. */
enum kvp_status kvp_sim_sglang_step(struct sim *s, struct kvp_error *err)
{
    enum kvp_status st;
    for (int pass = 0; pass < 2 && s->nsched == 0; pass++)
        if ((st = iteration(s, err)) != KVP_OK)
            return st;
    sync(s);
    return reserve(s, 2 * s->nsched + 2, err);
}

/* ---- life cycle ---- */

enum kvp_status kvp_sim_sglang_init(struct sim *s, struct kvp_error *err)
{
    struct sg *g = calloc(1, sizeof *g);
    enum kvp_status st;
    if (!(s->sg = g))
        return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory");
    g->cap = 1024;
    g->node = malloc(g->cap * sizeof *g->node);
    g->heap = malloc(3ull * g->cap * sizeof *g->heap);
    g->run = malloc(3ull * g->cap * sizeof *g->run);
    g->skip = malloc(g->cap * sizeof *g->skip);
    g->last_node = malloc(s->n * sizeof *g->last_node);
    g->plen = calloc(s->n, sizeof *g->plen);
    g->priv = calloc(s->n, sizeof *g->priv);
    g->batch = malloc(s->n * sizeof *g->batch);
    if (!g->node || !g->heap || !g->run || !g->skip || !g->last_node || !g->plen || !g->priv || !g->batch)
        return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory for %u requests", s->n);
    for (uint32_t i = 0; i < s->n; i++)
        g->last_node[i] = NONE;
    g->node[0] = (struct node){NONE, 0, NONE, 0, 0, 0, 1, 0};
    g->nnode = 1;
    if ((st = index_for(s, g->cap, err)) != KVP_OK)
        return st;
    g->free_node = NONE;
    g->size = g->available = s->c->num_blocks - 1;
    g->chunked = NONE;
    g->ratio = INIT_NEW_TOKEN_RATIO;
    g->min_ratio = INIT_NEW_TOKEN_RATIO * MIN_NEW_TOKEN_RATIO_FACTOR;
    g->decay = (g->ratio - g->min_ratio) / NEW_TOKEN_RATIO_DECAY_STEPS;
    s->pool.n = s->c->num_blocks;
    sync(s);
    return KVP_OK;
}

void kvp_sim_sglang_free(struct sim *s)
{
    struct sg *g = s->sg;
    if (!g)
        return;
    free(g->node);
    hx_free(&g->children);
    free(g->heap);
    free(g->run);
    free(g->skip);
    free(g->last_node);
    free(g->plen);
    free(g->priv);
    free(g->batch);
    free(g);
    s->sg = NULL;
}
