/* sim_vllm0.c -- vLLM V0's scheduler (0.7.3: core/scheduler.py, the
 * default policy without chunked prefill) and its block manager
 * (core/block_manager.py, prefix caching off by default) on the block pool
 * of sim_int.h (docs/simulate.md, section vLLM V0, gives every rule). */
#include "sim_int.h"

#define WATERMARK 0.01     /* CacheConfig.gpu_memory_utilization's sibling: watermark, of the GPU blocks */
#define LONG_CONTEXT 32768 /* engine/arg_utils.py: above it `vllm serve` turns chunked prefill on */

enum kvp_status kvp_sim_vllm0_config(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                                     struct kvp_sim_config *c, struct kvp_error *err)
{
    for (uint32_t l = 0; l < m->n_layers; l++)
        if (kvp_model_layer(m, l)->kind != KVP_LAYER_FULL && kvp_model_layer(m, l)->kind != KVP_LAYER_MLA)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "simulate: vllm@0.7.3 (V0) with layers other than full "
                            "attention (its sliding-window block tables, the Mamba cache) is not simulated yet");
    if (d->context > LONG_CONTEXT && !d->max_batched_tokens)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "simulate: vllm@0.7.3 (V0) above %u tokens of context (`vllm "
                        "serve` turns chunked prefill on there) is not simulated yet", LONG_CONTEXT);
    c->engine = KVP_SIM_VLLM0;
    c->n_groups = 1;
    c->group[0] = (struct kvp_sim_group){KVP_LAYER_FULL, 0};
    c->block_size = f->block_size;
    c->num_blocks = f->num_blocks + 1; /* every GPU block is usable; block 0 here is the simulator's null block */
    c->max_batched_tokens = f->reserve.profile_tokens; /* SchedulerConfig: max(max_model_len, 2048) */
    c->max_num_seqs = f->reserve.profile_seqs;         /* 256 */
    c->max_model_len = d->context;
    c->prefix_caching = false; /* CacheConfig.enable_prefix_caching: off in V0 */
    if (f->num_blocks < 1)
        return kvp_fail(err, KVP_ERR_USAGE, "simulate: the pool has %llu blocks", (unsigned long long)f->num_blocks);
    return KVP_OK;
}

static uint64_t watermark(const struct sim *s)
{
    return (uint64_t)(WATERMARK * (double)(s->c->num_blocks - 1));
}

enum kvp_status kvp_sim_vllm0_check(const struct kvp_sim_config *c, const struct kvp_workload *w, uint32_t i,
                                    struct kvp_error *err)
{
    const struct kvp_sim_request *q = &w->req[i];
    uint64_t limit = c->max_model_len < c->max_batched_tokens ? c->max_model_len : c->max_batched_tokens;
    uint64_t len = (uint64_t)q->prompt + q->output - 1; /* the longest prompt a preempted request comes back with */
    uint64_t blocks = c->num_blocks - 1, need = kvp_cdiv(len, c->block_size);
    if (len > limit) /* _get_prompt_limit */
        return kvp_fail_at(err, KVP_ERR_RANGE, w->name, q->line, q->line ? 1 : 0,
                           "request %u: %llu tokens (prompt + output - 1, as a recomputed prompt) are more than the "
                           "prompt limit %llu", i + 1, (unsigned long long)len, (unsigned long long)limit);
    if (blocks - need < (uint64_t)(WATERMARK * (double)blocks) || need > blocks) /* can_allocate: NEVER */
        return kvp_fail_at(err, KVP_ERR_RANGE, w->name, q->line, q->line ? 1 : 0,
                           "request %u needs %llu blocks, more than the pool's %llu less the watermark", i + 1,
                           (unsigned long long)need, (unsigned long long)blocks);
    return KVP_OK;
}

/* _preempt_by_recompute: the sequence's blocks freed, its tokens (prompt and
 * output so far) a new prompt; it returns to the queue's front. */
static void recompute(struct sim *s, uint32_t v)
{
    struct req *r = &s->r[v];
    uint32_t *t = table(r, 0);
    for (uint32_t k = r->len[0]; k > 0; k--) {
        uint32_t i = k - 1;
        pool_release(&s->pool, t[i]);
    }
    r->len[0] = 0;
    r->live = 0;
    r->computed = 0;
    r->state = R_WAITING;
    s->wait_head = (s->wait_head + s->n - 1) % s->n; /* waiting.extendleft(preempted) */
    s->wait[s->wait_head] = v;
    s->nwait++;
    s->out->preemptions++;
}

/* Room for the request's tokens (BlockTable.append_token_ids): a block more
 * when its last one is full. */
static void append(struct sim *s, struct req *r, uint64_t tokens)
{
    uint32_t *t = table(r, 0);
    while (r->len[0] < kvp_cdiv(tokens, s->c->block_size)) {
        t[r->len[0]++] = pool_take(&s->pool, 0);
        r->live++;
    }
}

/* Scheduler._schedule_default: waiting requests first, in order, while
 * can_allocate (free blocks less the prompt's stay at or above the watermark),
 * the token budget and max_num_seqs allow; if any was scheduled the step is
 * theirs alone. Otherwise the running requests decode, in order; one whose
 * next token needs a block when none is free preempts the last running
 * request (recompute: a single-sequence group), or itself when it is the
 * last. */
void kvp_sim_vllm0_step(struct sim *s)
{
    const struct kvp_sim_config *c = s->c;
    uint64_t budget = 0;
    uint32_t n = 0, k, nrun = s->nrun;

    while (s->nwait > 0) { /* _schedule_prefills */
        uint32_t i = s->wait[s->wait_head];
        struct req *r = &s->r[i];
        uint64_t need = kvp_cdiv(r->tokens, c->block_size);
        if (s->pool.nfree < need || s->pool.nfree - need < watermark(s)) /* AllocStatus.LATER */
            break;
        if (budget >= c->max_batched_tokens || budget + r->tokens > c->max_batched_tokens ||
            nrun + n + 1 > c->max_num_seqs)
            break;
        s->wait_head = (s->wait_head + 1) % s->n;
        s->nwait--;
        r->state = R_RUNNING;
        append(s, r, r->tokens);
        s->run[s->nrun++] = i;
        schedule(s, i, r->tokens);
        budget += r->tokens;
        n++;
    }
    if (n > 0)
        return;
    for (k = 0; k < s->nrun;) { /* _schedule_running: the queue's front first */
        uint32_t i = s->run[k];
        struct req *r = &s->r[i];
        bool self = false;
        while (kvp_cdiv(r->tokens, c->block_size) > r->len[0] && s->pool.nfree == 0) { /* can_append_slots */
            if (s->nrun - 1 > k) {
                recompute(s, s->run[--s->nrun]);
            } else {
                recompute(s, i);
                s->nrun--;
                self = true;
                break;
            }
        }
        if (self)
            break;
        append(s, r, r->tokens);
        schedule(s, i, 1);
        k++;
    }
}
