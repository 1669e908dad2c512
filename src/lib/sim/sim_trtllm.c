/* sim_trtllm.c -- TensorRT-LLM 1.0.0's executor (the PyTorch backend):
 * the capacity scheduler (GUARANTEED_NO_EVICT), the micro-batch scheduler
 * and the KV cache manager's block reuse, one executor iteration per
 * simulated step, on the block pool of sim_int.h (docs/simulate.md, section
 * TensorRT-LLM, gives every rule with its source). */
#include "sim_int.h"

#define MAX_BATCH_SIZE 2048 /* llmapi/llm_args.py (BuildConfig) max_batch_size */
#define MAX_NUM_TOKENS 8192 /* max_num_tokens */

enum kvp_status kvp_sim_trtllm_config(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                                      struct kvp_sim_config *c, struct kvp_error *err)
{
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, l);
        if ((s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED) && s->window < d->context)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "simulate: trtllm with attention windows (one block pool per "
                            "window size, VSWA) is not simulated yet");
    }
    c->engine = KVP_SIM_TRTLLM;
    c->n_groups = 1;
    c->group[0] = (struct kvp_sim_group){KVP_LAYER_FULL, 0};
    c->block_size = f->block_size;     /* tokens_per_block */
    c->num_blocks = f->num_blocks + 1; /* the pool's block 0 is the simulator's null block, never used */
    c->max_batched_tokens = d->max_batched_tokens ? d->max_batched_tokens : MAX_NUM_TOKENS;
    c->max_num_seqs = d->max_num_seqs ? d->max_num_seqs : MAX_BATCH_SIZE;
    c->max_model_len = d->context;
    c->prefix_caching = true; /* KvCacheConfig.enable_block_reuse */
    if (f->num_blocks < 1)
        return kvp_fail(err, KVP_ERR_USAGE, "simulate: the pool has %llu blocks", (unsigned long long)f->num_blocks);
    return KVP_OK;
}

/* getRemainingBlocksToCompletion (beam 1): cdiv(prompt + max_new_tokens,
 * tokens_per_block) less the blocks the sequence holds. */
static uint64_t to_completion(const struct sim *s, const struct req *r)
{
    return kvp_cdiv((uint64_t)r->q->prompt + r->q->output, s->c->block_size) - r->len[0];
}

enum kvp_status kvp_sim_trtllm_check(const struct kvp_sim_config *c, const struct kvp_workload *w, uint32_t i,
                                     struct kvp_error *err)
{
    const struct kvp_sim_request *q = &w->req[i];
    uint64_t need = kvp_cdiv((uint64_t)q->prompt + q->output, c->block_size);
    if (q->prompt > c->max_batched_tokens)
        return kvp_fail_at(err, KVP_ERR_RANGE, w->name, q->line, q->line ? 1 : 0,
                           "request %u: %u prompt tokens are more than max_num_tokens %llu (trtllm's chunked "
                           "context is off by default)", i + 1, q->prompt, (unsigned long long)c->max_batched_tokens);
    if (need > c->num_blocks - 1)
        return kvp_fail_at(err, KVP_ERR_RANGE, w->name, q->line, q->line ? 1 : 0,
                           "request %u reserves %llu blocks to completion, more than the pool's %llu: "
                           "GUARANTEED_NO_EVICT never admits it", i + 1, (unsigned long long)need,
                           (unsigned long long)(c->num_blocks - 1));
    return KVP_OK;
}

/* findNewContextBlock: the first full block of the prompt not in the reuse
 * tree (primary or secondary), as its identity (0: every full block is there). */
static uint64_t new_context_block(const struct sim *s, const struct req *r, uint32_t uid, uint32_t *index)
{
    uint32_t bs = s->c->block_size;
    for (uint32_t i = 0; i < r->q->prompt / bs; i++) {
        uint64_t owner = owner_of(r, uid, i, bs);
        if (cache_get(&s->pool, owner, i, 0) == NONE && kvp_sim_tier_find(&s->tier, owner, i) == NONE) {
            *index = i;
            return owner;
        }
    }
    return 0;
}

/* beneficialToSkip: a new request whose first new context block another
 * request scheduled in this iteration will contribute waits a step, to reuse
 * it; otherwise it registers its own: this iteration's blocks are the
 * identities in tmp_key and tmp[n ..], nkeys of them. */
static bool skip(struct sim *s, uint32_t uid, uint32_t *nkeys)
{
    uint32_t index = 0;
    uint64_t owner = new_context_block(s, &s->r[uid], uid, &index);
    if (owner == 0)
        return false;
    for (uint32_t k = 0; k < *nkeys; k++)
        if (s->tmp_key[k] == owner && s->tmp[s->n + k] == index)
            return true;
    s->tmp_key[*nkeys] = owner;
    s->tmp[s->n + (*nkeys)++] = index;
    return false;
}

/* WindowBlockManager::getFreeBlock: the least recently freed primary block;
 * one that holds a reusable block is offloaded first when there is a
 * secondary (host) pool: its identity moves to the secondary pool's most
 * recent end, the least recent one there dropped to make room. */
static uint32_t take(struct sim *s)
{
    struct pool *p = &s->pool;
    uint32_t b = p->q.head;
    if (s->tier.n && p->owner[b]) {
        (void)kvp_sim_tier_room(&s->tier, 1); /* secondary blocks are all free (ref 0): it evicts the LRU one */
        kvp_sim_tier_put(&s->tier, p->owner[b], p->index[b], 0);
        s->out->offload_stored_blocks++;
    }
    return pool_take(p, 0);
}

/* addSequence (loadOrAllocateBlocks): the prompt's full blocks found in the
 * reuse tree, from the first, at most prompt - 1 tokens' worth, are shared,
 * a block in the secondary pool onboarded into a new primary one
 * (onboardBlock); the rest are new; the context's full blocks are stored for
 * reuse (storeContextBlocks). addToken: a block more when a token crosses
 * into one. */
static void grow(struct sim *s, struct req *r, uint32_t uid, uint64_t tokens)
{
    uint32_t bs = s->c->block_size, *t = table(r, 0);
    uint64_t full = (tokens < r->tokens ? tokens : r->tokens) / bs;
    while (r->len[0] < kvp_cdiv(tokens, bs)) {
        t[r->len[0]++] = take(s);
        r->live++;
    }
    for (uint32_t i = r->cached[0]; s->c->prefix_caching && i < full; i++)
        cache_put(&s->pool, t[i], owner_of(r, uid, i, bs), i);
    r->cached[0] = r->cached[0] > full ? r->cached[0] : (uint32_t)full;
}

static void add_sequence(struct sim *s, uint32_t uid)
{
    struct req *r = &s->r[uid];
    uint32_t bs = s->c->block_size, *t = table(r, 0);
    uint64_t most = (r->tokens - 1) / bs, hit = 0, onboarded = 0;
    for (; s->c->prefix_caching && hit < most; hit++) {
        uint64_t owner = owner_of(r, uid, (uint32_t)hit, bs);
        uint32_t b = cache_get(&s->pool, owner, (uint32_t)hit, 0), e;
        if (b != NONE) {
            pool_touch(&s->pool, b, owner, (uint32_t)hit, 0);
        } else if ((e = kvp_sim_tier_find(&s->tier, owner, (uint32_t)hit)) != NONE) {
            kvp_sim_tier_drop(&s->tier, e); /* claimed, then swapped into a primary block */
            b = take(s);
            cache_put(&s->pool, b, owner, (uint32_t)hit);
            onboarded++;
        } else {
            break;
        }
        t[r->len[0]++] = b;
        r->live++;
    }
    r->cached[0] = (uint32_t)hit;
    r->computed = hit * bs;
    s->out->prefix_hit_tokens += (hit - onboarded) * bs;
    s->out->offload_hit_tokens += onboarded * bs;
    s->loaded += onboarded;
    grow(s, r, uid, r->tokens);
}

/* The waiting ring without the requests admitted this iteration (state R_RUNNING). */
static void drop_admitted(struct sim *s)
{
    uint32_t j = 0;
    for (uint32_t k = 0; k < s->nwait; k++) {
        uint32_t i = s->wait[(s->wait_head + k) % s->n];
        if (s->r[i].state == R_WAITING)
            s->wait[(s->wait_head + j++) % s->n] = i;
    }
    s->nwait = j;
}

/* GuaranteedNoEvictScheduler (capacityScheduler.cpp): the requests in
 * generation first, each reserving its blocks to completion out of the free
 * blocks (cached free blocks count as free); then new requests in arrival
 * order, skipped when beneficialToSkip, while their blocks to completion fit,
 * the first that does not fit ending it; at most max_batch_size. Then the
 * MicroBatchScheduler (microBatchScheduler.cpp) takes them in that order
 * while the tokens fit max_num_tokens (a generation 1, a context its whole
 * prompt: chunking is off), at most max_batch_size. */
void kvp_sim_trtllm_step(struct sim *s)
{
    const struct kvp_sim_config *c = s->c;
    int64_t avail = (int64_t)s->pool.nfree;
    uint32_t nsel = 0, nkeys = 0, nrun = s->nrun, *pick = s->tmp; /* the capacity scheduler's choice */
    uint64_t tokens = 0, count = 0;

    for (uint32_t k = 0; k < s->nrun && nsel < c->max_num_seqs; k++) {
        pick[nsel++] = s->run[k];
        avail -= (int64_t)to_completion(s, &s->r[s->run[k]]);
    }
    for (uint32_t k = 0; k < s->nwait; k++) {
        uint32_t i = s->wait[(s->wait_head + k) % s->n];
        int64_t need;
        if (c->prefix_caching && skip(s, i, &nkeys))
            continue;
        if (nsel >= c->max_num_seqs)
            break;
        need = (int64_t)to_completion(s, &s->r[i]);
        if (need > avail)
            break;
        pick[nsel++] = i;
        avail -= need;
    }
    for (uint32_t k = 0; k < nsel && count < c->max_num_seqs; k++) {
        uint32_t i = pick[k];
        struct req *r = &s->r[i];
        bool context = r->state == R_WAITING;
        uint64_t n = context ? r->tokens : 1;
        if (tokens + n > c->max_batched_tokens)
            break;
        tokens += n;
        count++;
        if (context) {
            r->state = R_RUNNING;
            s->run[s->nrun++] = i;
            add_sequence(s, i);
            schedule(s, i, r->tokens - r->computed);
        } else {
            grow(s, r, i, r->computed + 1);
            schedule(s, i, 1);
        }
    }
    if (s->nrun > nrun)
        drop_admitted(s);
}
