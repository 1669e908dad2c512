/* sim.c -- vLLM V1's scheduler and block manager (0.11.0), and llama.cpp's
 * server slots, stepped over a workload (docs/simulate.md gives every rule
 * with the function it follows); the run also steps SGLang (sim_sglang.c)
 * and TensorRT-LLM (sim_trtllm.c). Reading order: the deployment's groups,
 * the per-request block tables (the pool is in sim_int.h), the schedulers,
 * the run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/num.h"
#include "kvplan/sim.h"
#include "engine/profile.h"
#include "sim_int.h"

#ifdef KVP_MUTATE_SIM  /* make check-mutation: a pool one block short, which --validate must catch */
#define SHORT_BY 1u
#else
#define SHORT_BY 0u
#endif
#ifndef KVP_SIM_AUDIT /* 1 in the fuzz build (Makefile): every run audits its pool (audit) */
#define KVP_SIM_AUDIT 0
#endif

/* ---- the deployment: groups as kvplan fit grouped them ---- */

/* The groups vLLM makes of rank view r (kvp_profile_vllm_groups), each named
 * by its kind. Checked against fit->n_groups, which the profile computed. */
static enum kvp_status vllm_groups(const struct prank *r, const struct kvp_fit *f, struct kvp_sim_config *c,
                                   struct kvp_error *err)
{
    struct kvp_vllm_groups g;
    enum kvp_status st;

    if ((st = kvp_profile_vllm_groups(r, true, &g, err)) != KVP_OK)
        return st;
    for (uint32_t j = 1; j < g.n && g.rule == KVP_VLLM_EQUAL_PAGES; j++)
        for (uint32_t k = 0; k < j; k++)
            if (g.type[j]->state == 0 && g.type[k]->state == 0 &&
                g.type[j]->k_row + g.type[j]->v_row != g.type[k]->k_row + g.type[k]->v_row)
                return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                                "simulate: a hybrid model whose attention pages differ (blocks of several sizes) is "
                                "not simulated yet");
    c->n_groups = 0;
    for (uint32_t j = 0; j < g.n; j++)
        for (uint64_t k = g.rule == KVP_VLLM_EQUAL_PAGES ? kvp_cdiv(g.layers[j], g.group_size) : j == 0; k > 0; k--) {
            if (c->n_groups == KVP_SIM_MAX_GROUPS)
                return kvp_fail(err, KVP_ERR_UNSUPPORTED, "simulate: more than %u KV-cache groups", KVP_SIM_MAX_GROUPS);
            c->group[c->n_groups++] = (struct kvp_sim_group){g.type[j]->s->kind, g.type[j]->s->window};
        }
    if (c->n_groups != f->n_groups)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "simulate: %u KV-cache groups here, %u in the fit (pipeline "
                        "stages grouped differently are not simulated yet)", c->n_groups, f->n_groups);
    return KVP_OK;
}

/* The CPU tier in blocks of the pool's page (vLLM's OffloadingConnector with
 * num_cpu_blocks, TRT-LLM's secondary pool of host_cache_size bytes), for the
 * engines that have one. */
static enum kvp_status offload_config(const struct kvp_deploy *d, const struct kvp_fit *f, struct kvp_sim_config *c,
                                      struct kvp_error *err)
{
    uint64_t page = f->num_blocks ? f->kv_pool_bytes / f->num_blocks : 0;
    if (c->engine != KVP_SIM_VLLM && c->engine != KVP_SIM_TRTLLM)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "simulate: --cpu-offload is simulated for vLLM V1 (the "
                        "OffloadingConnector) and TensorRT-LLM (host_cache_size); %s (%s) is not: %s",
                        kvp_engine_info(d->engine)->name, kvp_sim_scheduler(c->engine),
                        c->engine == KVP_SIM_SGLANG ? "SGLang's HiCache host tier is not modelled"
                        : c->engine == KVP_SIM_VLLM0 ? "vLLM V0 has no CPU tier beside swap space; use vllm (V1)"
                                                     : "llama.cpp keeps no KV tier in host memory");
    if (c->engine == KVP_SIM_VLLM && (c->n_groups != 1 || (c->group[0].kind != KVP_LAYER_FULL &&
                                                           c->group[0].kind != KVP_LAYER_MLA)))
        return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                        "simulate: --cpu-offload with vLLM takes one KV-cache group of "
                        "full attention (the OffloadingConnector of 0.11.0 loads into block group 0 only); this "
                        "model has %u group%s",
                        c->n_groups, c->n_groups == 1 ? " of windowed or recurrent layers" : "s");
    if (page == 0 || d->cpu_offload / page == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "simulate: --cpu-offload %llu bytes hold no block of %llu bytes",
                        (unsigned long long)d->cpu_offload, (unsigned long long)page);
    c->offload_blocks = d->cpu_offload / page;
    c->offload_block_bytes = (double)page;
    c->offload_bandwidth = KVP_SIM_HOST_LINK;
    return KVP_OK;
}

enum kvp_status kvp_sim_config_from_fit(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                                        double bandwidth, double peak_flops, struct kvp_sim_config *c,
                                        struct kvp_error *err)
{
    enum kvp_status st;
    struct prank r;

    memset(c, 0, sizeof *c);
    if (f->refused[0])
        return kvp_fail(err, KVP_ERR_USAGE, "simulate: the engine would not start: %s", f->refused);
    if (d->dp > 1) /* one engine's scheduler; the ranks' router (and how it balances) is not modelled */
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "simulate: data-parallel ranks (dp %u) are not simulated yet: "
                        "simulate one rank (drop 'dp') with its share of the traffic", d->dp);
    if (d->engine == KVP_ENGINE_VLLM && !(f->release->rules & KVP_REL_VLLM_V0)) {
        c->engine = KVP_SIM_VLLM;
        c->num_blocks = f->num_blocks;
        c->block_size = f->block_size;
        c->max_batched_tokens = f->reserve.profile_tokens;
        c->max_num_seqs = f->reserve.profile_seqs;
        c->max_model_len = d->context;
        if ((st = kvp_profile_rank(m, d, 0, m->n_layers, &r, err)) != KVP_OK ||
            (st = vllm_groups(&r, f, c, err)) != KVP_OK)
            return st;
        /* V1 caches prefixes by default; 0.11.0 refuses it with Mamba layers and
         * has no hit rule for chunked local attention beside full attention here */
        c->prefix_caching = true;
        for (uint32_t g = 0, window = 0; g < c->n_groups; g++) {
            const struct kvp_sim_group *gr = &c->group[g];
            if (gr->kind == KVP_LAYER_RECURRENT || gr->kind == KVP_LAYER_CHUNKED ||
                (gr->kind == KVP_LAYER_SLIDING && window && gr->window != window))
                c->prefix_caching = false; /* the coordinator takes one other type beside full attention */
            window = gr->kind == KVP_LAYER_SLIDING ? gr->window : window;
        }
        if (c->num_blocks < 2)
            return kvp_fail(err, KVP_ERR_USAGE, "simulate: the pool has %llu blocks",
                            (unsigned long long)c->num_blocks);
    } else if (d->engine == KVP_ENGINE_LLAMACPP) {
        c->engine = KVP_SIM_LLAMACPP;
        c->n_groups = 1;
        c->group[0] = (struct kvp_sim_group){KVP_LAYER_FULL, 0};
        c->block_size = 1;
        c->max_num_seqs = f->n_seq ? f->n_seq : 1;
        c->max_model_len = f->kv_tokens / c->max_num_seqs; /* llama-server n_ctx_slot = n_ctx / n_parallel */
        c->num_blocks = c->max_model_len * c->max_num_seqs;
        c->max_batched_tokens = d->n_batch ? d->n_batch : 2048;
    } else if (d->engine == KVP_ENGINE_SGLANG) {
        if ((st = kvp_sim_sglang_config(d, f, c, err)) != KVP_OK)
            return st;
    } else if (d->engine == KVP_ENGINE_TRTLLM) {
        if ((st = kvp_sim_trtllm_config(m, d, f, c, err)) != KVP_OK)
            return st;
    } else if (d->engine == KVP_ENGINE_VLLM) {
        if ((st = kvp_sim_vllm0_config(m, d, f, c, err)) != KVP_OK)
            return st;
    } else {
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "simulate: %s is not simulated yet (vllm, vllm@0.11.0, "
                        "vllm@0.7.3, sglang, sglang@0.4.6, trtllm, llamacpp are)", kvp_engine_info(d->engine)->name);
    }
    if (d->cpu_offload && (st = offload_config(d, f, c, err)) != KVP_OK)
        return st;
    if (bandwidth > 0 && peak_flops > 0) {
        struct kvp_roofline one;
        struct kvp_deploy e = *d;
        e.context = 1;
        if ((st = kvp_roofline(m, &e, 1, bandwidth, peak_flops, &one, err)) != KVP_OK)
            return st;
        c->step.weight_bytes = (double)one.weight_bytes;
        c->step.host_read_s = (double)one.host_weight_bytes / one.host_bandwidth;
        c->step.host_copy_s = d->host_link && !d->unified_memory ? (double)one.stream_bytes / (double)d->host_link
                                                                   : c->step.host_read_s;
        c->step.flops_per_token = one.prefill_flops / d->tp; /* 2 x active params (+ one token's attention) */
        c->step.block_bytes = c->engine == KVP_SIM_VLLM || c->engine == KVP_SIM_TRTLLM || c->engine == KVP_SIM_VLLM0
                                  ? (double)f->kv_pool_bytes / (double)f->num_blocks
                                  : (double)f->kv_bytes_per_token_per_gpu; /* SGLang, llama.cpp: a token */
        c->step.bandwidth = bandwidth;
        c->step.peak_flops = peak_flops;
    }
    return KVP_OK;
}

/* A decision into out->log (note: when the config asks for one, --validate). */
static void log_decision(struct sim *s, enum kvp_sim_decision kind, uint32_t req, uint32_t for_req, uint64_t tokens,
                         uint64_t hit, bool admit)
{
    struct kvp_sim_result *o = s->out;
    if (o->nlog == s->log_cap) {
        uint64_t ncap = s->log_cap ? 2 * s->log_cap : 256;
        struct kvp_sim_event *p = realloc(o->log, ncap * sizeof *p);
        if (!p) {
            s->log_nomem = true;
            return;
        }
        o->log = p;
        s->log_cap = ncap;
    }
    o->log[o->nlog++] = (struct kvp_sim_event){o->steps, kind, req, for_req, tokens, hit, admit};
}

static inline void note(struct sim *s, enum kvp_sim_decision kind, uint32_t req, uint32_t for_req, uint64_t tokens,
                        uint64_t hit, bool admit)
{
    if (s->c->log_decisions && !s->log_nomem)
        log_decision(s, kind, req, for_req, tokens, hit, admit);
}

/* Blocks a group's table must hold for `tokens` tokens beyond the `have` it
 * holds (get_num_blocks_to_allocate's num_required_blocks less them; MambaManager:
 * block_size = max_model_len, one block); dividing only when the tokens pass
 * the blocks held, which a decode step's token mostly does not. */
static uint64_t more_blocks(const struct sim *s, uint32_t g, uint64_t tokens, uint64_t have)
{
    if (s->c->group[g].kind == KVP_LAYER_RECURRENT)
        return have ? 0 : 1;
    return tokens > have * s->c->block_size ? kvp_cdiv(tokens, s->c->block_size) - have : 0;
}

/* remove_skipped_blocks: blocks wholly before the window (SlidingWindowManager:
 * token num_computed - window + 1 on; ChunkedLocalAttentionManager: the
 * current chunk on) become the null block, freed last index first. */
static void remove_skipped(struct sim *s, struct req *r, uint32_t g)
{
    const struct kvp_sim_group *gr = &s->c->group[g];
    uint64_t first_useful;
    uint32_t *t = table(r, g);
    if (gr->kind == KVP_LAYER_SLIDING)
        first_useful = r->computed + 1 > gr->window ? (r->computed + 1 - gr->window) / s->c->block_size : 0;
    else if (gr->kind == KVP_LAYER_CHUNKED)
        first_useful = r->computed / gr->window * gr->window / s->c->block_size;
    else
        return;
    for (uint64_t k = first_useful < r->len[g] ? first_useful : r->len[g]; k > 0; k--) {
        uint64_t i = k - 1;
        if (t[i] == NULL_BLOCK)
            break;
        pool_release(&s->pool, t[i]);
        t[i] = NULL_BLOCK;
        r->live--;
    }
}

static bool hit_all(const struct sim *s, const struct req *r, uint32_t uid, uint32_t i, bool sliding, uint32_t *out)
{
    for (uint32_t g = 0; g < s->c->n_groups; g++) {
        bool is_sliding = s->c->group[g].kind == KVP_LAYER_SLIDING;
        uint32_t b;
        if (is_sliding != sliding)
            continue;
        b = cache_get(&s->pool, owner_of(r, uid, i, s->c->block_size), i, (uint8_t)g);
        if (b == NONE)
            return false;
        out[g] = b;
    }
    return true;
}

/* get_computed_blocks: the longest prefix hit (HybridKVCacheCoordinator:
 * full attention first, then the sliding groups within it;
 * FullAttentionManager.find_longest_cache_hit stops at the first miss,
 * SlidingWindowManager's scans from the end for cdiv(window - 1, block)
 * contiguous hits). At most num_tokens - 1 tokens, so that one is computed.
 * Fills s->hit and s->hit_len; returns the hit in tokens. */
static void clear_hit(struct sim *s)
{
    for (uint32_t g = 0; g < s->c->n_groups; g++)
        s->hit_len[g] = s->hit_free[g] = 0;
}

static uint64_t lookup_hit(struct sim *s, struct req *r, uint32_t uid)
{
    const struct kvp_sim_config *c = s->c;
    uint64_t max_blocks = (r->tokens - 1) / c->block_size, full = max_blocks, other;
    uint32_t b[KVP_SIM_MAX_GROUPS];
    bool any_full = false, any_sliding = false;

    clear_hit(s);
    if (!c->prefix_caching)
        return 0;
    for (uint32_t g = 0; g < c->n_groups; g++) {
        any_sliding = any_sliding || c->group[g].kind == KVP_LAYER_SLIDING;
        any_full = any_full || c->group[g].kind != KVP_LAYER_SLIDING;
    }
    if (any_full) {
        for (full = 0; full < max_blocks && hit_all(s, r, uid, (uint32_t)full, false, b); full++)
            for (uint32_t g = 0; g < c->n_groups; g++)
                if (c->group[g].kind != KVP_LAYER_SLIDING)
                    s->hit[g][full] = b[g];
    }
    other = full;
    if (any_sliding) {
        uint32_t window = 0;
        uint64_t need, run = 0, start = 0;
        bool found = false;
        for (uint32_t g = 0; g < c->n_groups; g++)
            window = c->group[g].kind == KVP_LAYER_SLIDING ? c->group[g].window : window;
        need = kvp_cdiv(window - 1, c->block_size);
        for (uint64_t k = full; k > 0; k--) {
            uint64_t i = k - 1;
            if (hit_all(s, r, uid, (uint32_t)i, true, b)) {
                for (uint32_t g = 0; g < c->n_groups; g++)
                    if (c->group[g].kind == KVP_LAYER_SLIDING)
                        s->hit[g][i] = b[g];
                if (++run >= need) {
                    found = true;
                    start = i;
                    break;
                }
            } else {
                run = 0;
            }
        }
        other = found ? start + run : run; /* not found: the first `run` blocks still hit */
        for (uint32_t g = 0; g < c->n_groups; g++)
            if (c->group[g].kind == KVP_LAYER_SLIDING)
                for (uint64_t i = 0; i < (found ? start : 0); i++)
                    s->hit[g][i] = NULL_BLOCK;
    }
    for (uint32_t g = 0; g < c->n_groups; g++)
        s->hit_len[g] = (uint32_t)other; /* full attention cut to the other groups' hit */
    return other * c->block_size;
}

/* Group g's hit blocks from..to-1 on the free queue (allocate takes them off it). */
static uint32_t hits_free(const struct sim *s, uint32_t g, uint32_t from, uint32_t to)
{
    uint32_t n = 0;
    for (uint32_t i = from; i < to; i++)
        n += s->hit[g][i] != NULL_BLOCK && s->pool.ref[s->hit[g][i]] == 0;
    return n;
}

/* The hit of lookup_hit and its blocks on the free queue, worked out again
 * only as far as they may differ: a request blocked at the queue's head asks
 * every step (a 16,000-token prompt behind long answers: a thousand lookups
 * a step, 2.3 s for 200 requests). While its tokens are the same and no block
 * of its identities (its own, its prefix's) was cached or replaced, its hit
 * is the last one cut at the least index of an identity evicted since (full
 * attention's hit stops at the first miss; a sliding group's is looked up
 * again); the blocks cut were free (evicted) or kept their ref count, unless
 * one of its blocks left or joined the free queue (then they are counted). */
static uint64_t computed_blocks(struct sim *s, struct req *r, uint32_t uid)
{
    const struct kvp_sim_config *c = s->c;
    struct pool *p = &s->pool;
    bool sliding = false;
    for (uint32_t g = 0; g < c->n_groups; g++)
        sliding = sliding || c->group[g].kind == KVP_LAYER_SLIDING;
    if (uid == s->memo_uid && r->tokens == s->memo_tokens && !p->watch_changed &&
        (p->watch_cut == NONE || !sliding)) {
        uint32_t cut = p->watch_cut;
        if (cut < s->memo_hit / c->block_size) {
            for (uint32_t g = 0; g < c->n_groups && !p->watch_ref; g++)
                for (uint32_t i = cut; i < s->memo_len[g]; i++) {
                    uint32_t b = s->hit[g][i];
                    s->memo_free[g] -= b != NULL_BLOCK && (p->ref[b] == 0 ||
                                                           !same_key(p, b, owner_of(r, uid, i, c->block_size), i,
                                                                     (uint8_t)g));
                }
            s->memo_hit = (uint64_t)cut * c->block_size;
            for (uint32_t g = 0; g < c->n_groups; g++)
                s->memo_len[g] = cut;
        }
        for (uint32_t g = 0; g < c->n_groups && p->watch_ref; g++)
            s->memo_free[g] = hits_free(s, g, 0, s->memo_len[g]);
        if (KVP_SIM_AUDIT || c->audit) { /* the memo against a lookup afresh */
            bool same = lookup_hit(s, r, uid) == s->memo_hit;
            for (uint32_t g = 0; g < c->n_groups; g++)
                same = same && s->hit_len[g] == s->memo_len[g] && hits_free(s, g, 0, s->hit_len[g]) == s->memo_free[g];
            s->memo_wrong += !same;
        }
    } else {
        s->memo_hit = lookup_hit(s, r, uid);
        s->memo_uid = uid;
        s->memo_tokens = r->tokens;
        memcpy(s->memo_len, s->hit_len, sizeof s->memo_len);
        memset(s->memo_free, 0, sizeof s->memo_free);
        for (uint32_t g = 0; g < c->n_groups; g++)
            s->memo_free[g] = hits_free(s, g, 0, s->memo_len[g]);
        p->watch[0] = (uint64_t)uid + 1; /* owner_of's identities */
        p->watch[1] = r->q->prefix_id ? (uint64_t)r->q->prefix_id | 1ull << 63 : 0;
        p->watch_changed = false;
    }
    p->watch_cut = NONE;
    p->watch_ref = false;
    memcpy(s->hit_len, s->memo_len, sizeof s->hit_len);
    memcpy(s->hit_free, s->memo_free, sizeof s->hit_free);
    return s->memo_hit;
}

/* Tokens a group's table of `len` blocks holds (a state's one block: any number). */
static uint64_t holds(const struct kvp_sim_config *c, uint32_t g, uint64_t len)
{
    return c->group[g].kind == KVP_LAYER_RECURRENT ? (len ? UINT64_MAX : 0) : len * c->block_size;
}

/* The tokens below which the request's next allocate has nothing to do:
 * every group's blocks hold them, and no block of them fills (to be cached).
 * 0 with a windowed group (its blocks leave as the request computes). */
static uint64_t room(const struct sim *s, const struct req *r)
{
    const struct kvp_sim_config *c = s->c;
    uint64_t least = UINT64_MAX;
    for (uint32_t g = 0; g < c->n_groups; g++) {
        enum kvp_layer_kind kind = c->group[g].kind;
        uint64_t held = kvp_sat_add(holds(c, g, r->len[g]), 1), fills = ((uint64_t)r->cached[g] + 1) * c->block_size;
        if (kind == KVP_LAYER_SLIDING || kind == KVP_LAYER_CHUNKED)
            return 0;
        least = held < least ? held : least;
        least = c->prefix_caching && fills < least ? fills : least;
    }
    return least;
}

/* allocate_slots: room for `n_new` more tokens after `hit` cached ones (the
 * hit's blocks in s->hit), or false when the free queue is too short. */
static bool allocate_slots(struct sim *s, struct req *r, uint32_t uid, uint64_t hit, uint64_t n_new)
{
    const struct kvp_sim_config *c = s->c;
    uint64_t need_tokens = r->computed + hit + n_new, want = 0;

    for (uint32_t g = 0; g < c->n_groups; g++)
        remove_skipped(s, r, g);
    for (uint32_t g = 0; g < c->n_groups; g++) {
        /* and the evictable hits, which come off the free queue */
        want += more_blocks(s, g, need_tokens, (uint64_t)r->len[g] + s->hit_len[g]) + s->hit_free[g];
    }
    if (want + SHORT_BY > s->pool.nfree) {
        if (hit) /* a hit of no tokens is no blocks: nothing to clear */
            clear_hit(s);
        return false;
    }
    /* touch, then save_new_computed_blocks: every group's hits leave the
     * free queue before any group takes a new block, or a group's new
     * block could be a hit another group is about to reuse */
    for (uint32_t g = 0; g < c->n_groups; g++) {
        uint32_t *t = table(r, g);
        for (uint32_t i = 0; i < s->hit_len[g]; i++) {
            uint32_t b = s->hit[g][i];
            if (b != NULL_BLOCK) {
                pool_touch(&s->pool, b, owner_of(r, uid, i, c->block_size), i, (uint8_t)g);
                r->live++;
            }
            t[r->len[g]++] = b;
        }
        if (s->hit_len[g]) /* a new request: its hit is cached already */
            r->cached[g] = r->len[g];
    }
    /* allocate_new_blocks, then cache_blocks, group by group */
    for (uint32_t g = 0; g < c->n_groups; g++) {
        uint32_t *t = table(r, g);
        uint64_t upto = need_tokens < r->tokens ? need_tokens : r->tokens;
        for (uint64_t k = more_blocks(s, g, need_tokens, r->len[g]); k > 0; k--) {
            t[r->len[g]++] = pool_take(&s->pool, (uint8_t)g);
            r->live++;
        }
        /* cache_blocks: every full block of the tokens computed by this step */
        if (c->prefix_caching && upto >= ((uint64_t)r->cached[g] + 1) * c->block_size) {
            uint64_t full = upto / c->block_size;
            for (uint32_t i = r->cached[g]; i < full; i++)
                if (t[i] != NULL_BLOCK)
                    cache_put(&s->pool, t[i], owner_of(r, uid, i, c->block_size), i);
            r->cached[g] = r->cached[g] > full ? r->cached[g] : (uint32_t)full;
        }
    }
    if (hit)
        clear_hit(s);
    r->room = room(s, r);
    return true;
}

/* allocate_slots, returning at once below the request's room (struct req;
 * the hit is 0 then: the room is 0 without blocks). */
static inline bool allocate(struct sim *s, struct req *r, uint32_t uid, uint64_t hit, uint64_t n_new)
{
    return r->computed + hit + n_new < r->room || allocate_slots(s, r, uid, hit, n_new);
}

/* KVCacheManager.free: each group's blocks, last first, so that a request's
 * tail is evicted before its (more shareable) head. The blocks it was
 * storing to the CPU tier become ready (finished or preempted: the
 * connector's complete_store). */
static void free_request(struct sim *s, struct req *r)
{
    for (uint32_t e = r->pend; e != NONE; e = s->tier.pend[e]) /* complete_store: its stores are ready */
        s->tier.ref[e] = 0;
    r->pend = NONE;
    for (uint32_t g = 0; g < s->c->n_groups; g++) {
        uint32_t *t = table(r, g);
        for (uint32_t k = r->len[g]; k > 0; k--) {
            uint32_t i = k - 1;
            pool_release(&s->pool, t[i]);
        }
        r->len[g] = r->cached[g] = 0;
    }
    r->live = 0;
    r->room = 0;
}

/* OffloadingConnectorScheduler.get_num_new_matched_tokens: every full block
 * of the request is touched in the tier's LRU (last first: its first block
 * ends the most recent), then the ready blocks from the end of the GPU hit
 * on, while contiguous, are the tokens loaded instead of computed; at most
 * num_tokens - 1 tokens with the GPU hit (so that one is computed). */
static uint64_t offload_hit(struct sim *s, const struct req *r, uint32_t uid, uint64_t hit)
{
    struct tier *t = &s->tier;
    uint32_t bs = s->c->block_size, e;
    uint64_t i, most = (r->tokens - 1) / bs;
    if (!t->n)
        return 0;
    for (uint64_t k = r->tokens / bs; k > 0; k--)
        if ((e = kvp_sim_tier_find(t, owner_of(r, uid, (uint32_t)(k - 1), bs), (uint32_t)(k - 1))) != NONE)
            kvp_sim_tier_touch(t, e);
    for (i = hit / bs; i < most; i++)
        if ((e = kvp_sim_tier_find(t, owner_of(r, uid, (uint32_t)i, bs), (uint32_t)i)) == NONE || t->ref[e] < 0)
            break;
    return (i - hit / bs) * bs;
}

/* update_state_after_alloc: the loaded blocks (prepare_load) are pinned in
 * the tier until the step ends (complete_load); storing resumes after them. */
static void offload_load(struct sim *s, struct req *r, uint32_t uid, uint64_t hit, uint64_t ext)
{
    uint32_t bs = s->c->block_size;
    r->load_first = (uint32_t)(hit / bs);
    r->load_n = (uint32_t)(ext / bs);
    for (uint32_t i = r->load_first; i < r->load_first + r->load_n; i++)
        s->tier.ref[kvp_sim_tier_find(&s->tier, owner_of(r, uid, i, bs), i)]++;
    r->next_stored = r->load_first + r->load_n;
    s->loaded += r->load_n;
    s->out->offload_hit_tokens += ext;
}

/* _get_reqs_to_store, once the step is scheduled: each scheduled request's
 * full blocks of its computed + scheduled tokens from _next_stored_block_idx
 * on go to LRUOffloadingManager.prepare_store (the new requests first, then
 * the running: yield_req_data's order). Those not in the tier are stored,
 * room made by evicting the least recently used ready blocks; without that
 * room nothing is stored and the request tries again next step. Storing
 * touches its blocks up to there; they are ready when it finishes or is
 * preempted. Then the step's loads complete. */
static void offload_store(struct sim *s)
{
    struct tier *t = &s->tier;
    uint32_t bs = s->c->block_size, e;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t k = 0; k < s->nsched; k++) {
            uint32_t uid = s->sched[k], nstore = 0;
            struct req *r = &s->r[uid];
            uint64_t end = (r->computed + s->sched_n[k]) / bs;
            if (r->fresh != (pass == 0) || end <= r->next_stored)
                continue;
            for (uint32_t i = r->next_stored; i < end; i++)
                if (kvp_sim_tier_find(t, owner_of(r, uid, i, bs), i) == NONE)
                    s->scratch[nstore++] = i;
            if (!kvp_sim_tier_room(t, nstore))
                continue;
            for (uint32_t j = 0; j < nstore; j++) {
                e = kvp_sim_tier_put(t, owner_of(r, uid, s->scratch[j], bs), s->scratch[j], -1);
                t->pend[e] = r->pend;
                r->pend = e;
            }
            r->next_stored = (uint32_t)end;
            s->out->offload_stored_blocks += nstore;
            for (uint64_t b = nstore ? end : 0; b > 0; b--) /* block b - 1, last first */
                if ((e = kvp_sim_tier_find(t, owner_of(r, uid, (uint32_t)(b - 1), bs), (uint32_t)(b - 1))) != NONE)
                    kvp_sim_tier_touch(t, e);
        }
    for (uint32_t k = 0; k < s->nsched; k++) {
        struct req *r = &s->r[s->sched[k]];
        for (uint32_t i = r->load_first; i < r->load_first + r->load_n; i++)
            t->ref[kvp_sim_tier_find(t, owner_of(r, s->sched[k], i, bs), i)]--;
        r->load_n = 0;
    }
}

/* Scheduler.schedule (v1/core/sched/scheduler.py), FCFS: the running
 * requests first, each as far as the token budget goes, preempting the last
 * running request (recompute: its blocks freed, computed tokens 0, back to
 * the front of the queue) until its blocks fit; then, if nothing was
 * preempted, waiting requests in order while the budget, max_num_seqs and the
 * blocks allow (chunked prefill: a prompt may take what is left of the
 * budget); the first that does not fit stops the queue. With a CPU tier, a
 * waiting request's blocks found there after its GPU hit are loaded, not
 * computed (they take blocks, not budget), and the step's blocks are stored. */
static void vllm_step(struct sim *s)
{
    const struct kvp_sim_config *c = s->c;
    uint64_t budget = c->max_batched_tokens;
    bool preempted = false;

    for (uint32_t k = 0; k < s->nrun && budget > 0;) {
        uint32_t i = s->run[k];
        struct req *r = &s->r[i];
        uint64_t n = r->tokens - r->computed;
        bool ok = true;
        n = n < budget ? n : budget;
        r->fresh = false;
        while (!allocate(s, r, i, 0, n)) {
            uint32_t v = s->run[--s->nrun];
            free_request(s, &s->r[v]);
            s->r[v].computed = 0;
            s->r[v].state = R_WAITING;
            s->wait_head = (s->wait_head + s->n - 1) % s->n;
            s->wait[s->wait_head] = v;
            s->nwait++;
            s->out->preemptions++;
            note(s, KVP_SIM_PREEMPT, v, i, n, 0, false);
            preempted = true;
            if (v == i) {
                ok = false;
                break;
            }
        }
        if (!ok)
            break;
        note(s, KVP_SIM_SCHEDULE, i, i, n, 0, false);
        schedule(s, i, n);
        budget -= n;
        k++;
    }
    while (!preempted && s->nwait > 0 && budget > 0 && s->nrun < c->max_num_seqs) {
        uint32_t i = s->wait[s->wait_head];
        struct req *r = &s->r[i];
        uint64_t hit = computed_blocks(s, r, i), ext = offload_hit(s, r, i, hit), n = r->tokens - hit - ext;
        n = n < budget ? n : budget;
        if (!allocate(s, r, i, hit, ext + n)) {
            note(s, KVP_SIM_BLOCKED, i, i, n, hit, true);
            break;
        }
        if (ext)
            offload_load(s, r, i, hit, ext);
        r->fresh = !r->started;
        s->wait_head = (s->wait_head + 1) % s->n;
        s->nwait--;
        s->run[s->nrun++] = i;
        r->state = R_RUNNING;
        r->computed = hit + ext;
        s->out->prefix_hit_tokens += hit;
        note(s, KVP_SIM_SCHEDULE, i, i, n, hit, true);
        schedule(s, i, n);
        budget -= n;
    }
    if (s->tier.n)
        offload_store(s);
}

/* llama-server's update_slots (tools/server/server.cpp): a free slot takes the
 * next request; each llama_decode batch gets one token of every generating
 * slot first, then prompt tokens of the slots still reading theirs, in slot
 * order, up to n_batch. A slot's cells are its request's tokens; nothing is
 * shared or preempted. */
static void llamacpp_step(struct sim *s)
{
    uint64_t budget = s->c->max_batched_tokens;
    while (s->nwait > 0 && s->nrun < s->c->max_num_seqs) {
        uint32_t i = s->wait[s->wait_head];
        s->wait_head = (s->wait_head + 1) % s->n;
        s->nwait--;
        s->run[s->nrun++] = i;
        s->r[i].state = R_RUNNING;
    }
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t k = 0; k < s->nrun && budget > 0; k++) {
            struct req *r = &s->r[s->run[k]];
            bool prompt = r->computed < r->q->prompt;
            uint64_t n = r->tokens - r->computed;
            if (prompt != (pass == 1))
                continue;
            n = n < budget ? n : budget;
            schedule(s, s->run[k], n);
            budget -= n;
            s->pool.used[0] += n;
            r->live += n;
        }
}

/* ---- the run ---- */

static double step_time(const struct kvp_sim_config *c, uint64_t tokens, uint64_t blocks)
{
    double t = c->step.fixed_s + c->step.per_token_s * (double)tokens;
    if (c->step.bandwidth > 0) {
        double mem = (c->step.weight_bytes + c->step.block_bytes * (double)blocks) / c->step.bandwidth;
        double comp = c->step.flops_per_token * (double)tokens / c->step.peak_flops;
        mem = (mem > comp ? mem : comp) + (tokens >= KVP_OFFLOAD_MIN_BATCH ? c->step.host_copy_s : c->step.host_read_s);
        t = t > mem ? t : mem;
    }
    return t;
}

/* The most blocks request q can hold at once: full attention its whole length,
 * a window what the window and one step's chunk reach, a state one block. */
static uint64_t request_peak(const struct kvp_sim_config *c, const struct kvp_sim_request *q)
{
    uint64_t len = (uint64_t)q->prompt + q->output - 1, blocks = 0;
    if (c->engine == KVP_SIM_LLAMACPP)
        return len;
    for (uint32_t g = 0; g < c->n_groups; g++) {
        const struct kvp_sim_group *gr = &c->group[g];
        uint64_t b = kvp_cdiv(len, c->block_size);
        if (gr->kind == KVP_LAYER_RECURRENT)
            b = 1;
        else if (gr->kind == KVP_LAYER_SLIDING || gr->kind == KVP_LAYER_CHUNKED) {
            uint64_t w = kvp_cdiv(kvp_sat_add(gr->window, c->max_batched_tokens), c->block_size) + 1;
            b = b < w ? b : w;
        }
        blocks += b;
    }
    return blocks;
}

/* v's n values in ascending order (key and tmp: n each): a least significant
 * digit radix sort of their bits made unsigned-ordered, 8 bits a pass, a
 * byte every key shares skipped (a time's sign and most of its exponent).
 * O(n): a 4 MiB trace's 281,490 requests sorted three times took a tenth of
 * its simulation through qsort. */
static void sort_values(double *v, uint64_t *key, uint64_t *tmp, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &v[i], sizeof u);
        key[i] = u >> 63 ? ~u : u | 1ull << 63;
    }
    for (unsigned shift = 0; shift < 64; shift += 8) {
        uint64_t count[256] = {0}, pos = 0, *t;
        for (uint64_t i = 0; i < n; i++)
            count[key[i] >> shift & 255]++;
        if (count[key[0] >> shift & 255] == n)
            continue;
        for (unsigned b = 0; b < 256; b++) {
            uint64_t c = count[b];
            count[b] = pos;
            pos += c;
        }
        for (uint64_t i = 0; i < n; i++)
            tmp[count[key[i] >> shift & 255]++] = key[i];
        t = key;
        key = tmp;
        tmp = t;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t u = key[i] >> 63 ? key[i] & ~(1ull << 63) : ~key[i];
        memcpy(&v[i], &u, sizeof u);
    }
}

static void percentiles(double *v, uint64_t *scratch, uint64_t n, struct kvp_percentiles *p)
{
    double sum = 0;
    memset(p, 0, sizeof *p);
    if (n == 0)
        return;
    sort_values(v, scratch, scratch + n, n);
    for (uint64_t i = 0; i < n; i++)
        sum += v[i];
    p->mean = sum / (double)n;
    /* nearest rank: the smallest value with at least p of the values at or below it */
    p->p50 = v[(uint64_t)ceil(0.50 * (double)n) - 1];
    p->p90 = v[(uint64_t)ceil(0.90 * (double)n) - 1];
    p->p99 = v[(uint64_t)ceil(0.99 * (double)n) - 1];
}

static enum kvp_status summarize(struct sim *s, struct kvp_error *err)
{
    struct kvp_sim_result *o = s->out;
    double *v = malloc((s->n ? s->n : 1) * sizeof *v);
    uint64_t k, *scratch = malloc((s->n ? 2 * (uint64_t)s->n : 1) * sizeof *scratch);
    if (!v || !scratch) {
        free(v);
        free(scratch);
        return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory");
    }
    for (k = 0; k < s->n; k++)
        v[k] = s->r[k].first_token - s->r[k].q->arrival_s;
    percentiles(v, scratch, k, &o->ttft);
    for (k = 0; k < s->n; k++)
        v[k] = s->r[k].first_sched - s->r[k].q->arrival_s;
    percentiles(v, scratch, k, &o->queue);
    k = 0;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->r[i].q->output > 1)
            v[k++] = (s->r[i].finish - s->r[i].first_token) / (s->r[i].q->output - 1);
    percentiles(v, scratch, k, &o->tpot);
    free(v);
    free(scratch);
    o->throughput = o->duration_s > 0 ? (double)o->output_tokens / o->duration_s : 0.0;
    return KVP_OK;
}

static enum kvp_status record(struct sim *s, bool keep, double t_end, uint64_t tokens, uint64_t *cap,
                              struct kvp_error *err)
{
    struct kvp_sim_result *o = s->out;
    uint64_t used = 0;
    struct kvp_sim_step *st;
    for (uint32_t g = 0; g < s->c->n_groups; g++)
        used += s->pool.used[g];
    o->peak_blocks = used > o->peak_blocks ? used : o->peak_blocks;
    o->steps++;
    if (!keep)
        return KVP_OK;
    if (o->steps > *cap) {
        uint64_t ncap = *cap ? *cap * 2 : 1024;
        struct kvp_sim_step *p = realloc(o->series, ncap * sizeof *p);
        if (!p)
            return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory for %llu steps", (unsigned long long)ncap);
        o->series = p;
        *cap = ncap;
    }
    st = &o->series[o->steps - 1];
    memset(st, 0, sizeof *st);
    st->time_s = t_end;
    st->running = s->nrun;
    st->waiting = s->nwait;
    st->scheduled_tokens = tokens;
    memcpy(st->used, s->pool.used, sizeof st->used);
    if (s->c->engine == KVP_SIM_LLAMACPP) {
        st->free = s->pool.n - used;
    } else {
        st->cached = s->pool.ncached_free;
        st->free = s->pool.nfree - s->pool.ncached_free;
    }
    st->offloaded = s->tier.used;
    return KVP_OK;
}

/* After the step: computed tokens advance; a request that caught up with
 * its tokens samples one (its first: TTFT); one with all its output is
 * finished and frees its blocks (llama.cpp: its slot). Returns how many
 * finished. */
static uint32_t advance(struct sim *s, double t_end)
{
    uint32_t finished = 0;
    uint64_t sampled = 0;
    for (uint32_t k = 0; k < s->nsched; k++) {
        struct req *r = &s->r[s->sched[k]];
        r->computed += s->sched_n[k];
        if (r->computed < r->tokens)
            continue;
        if (r->generated++ == 0)
            r->first_token = t_end;
        r->tokens++;
        sampled++;
        if (r->generated < r->q->output)
            continue;
        r->finish = t_end;
        r->state = R_DONE;
        finished++;
        if (s->c->engine == KVP_SIM_LLAMACPP)
            s->pool.used[0] -= r->live;
        else if (s->c->engine == KVP_SIM_SGLANG)
            kvp_sim_sglang_finish(s, r);
        else
            free_request(s, r);
        if (s->pool.own)
            s->pool.own[s->sched[k]].at = NULL;
        free(r->len);
        r->len = r->cached = r->table = NULL;
    }
    uint32_t j = 0;
    s->out->output_tokens += sampled;
    for (uint32_t k = 0; finished && k < s->nrun; k++) /* the finished leave the running list */
        if (s->r[s->run[k]].state == R_RUNNING)
            s->run[j++] = s->run[k];
    s->nrun = finished ? j : s->nrun;
    return finished;
}

/* The pool's invariants after a step (c->audit, or KVP_SIM_AUDIT), over
 * the block tables of the running requests, the only holders of blocks: a
 * table holds its request's computed tokens (a state: one block); a
 * block serves the group whose table holds it; its ref count is its
 * holders; a block two requests hold is a cached one (shared by a prefix
 * hit); each group's used count is its distinct blocks; used and free make
 * the pool. O(blocks held) a step, with s->held (a count per block, left at
 * 0). The first broken one in why. */
static void audit_tables(struct sim *s, uint64_t *distinct, char *why, size_t n)
{
    const struct pool *p = &s->pool;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t k = 0; k < s->nrun; k++) {
            const struct req *r = &s->r[s->run[k]];
            for (uint32_t g = 0; g < s->c->n_groups && pass == 0; g++)
                if (holds(s->c, g, r->len[g]) < r->computed && !why[0])
                    snprintf(why, n, "request %u's table of group %u holds %u blocks for %llu computed tokens",
                             s->run[k] + 1, g, r->len[g], (unsigned long long)r->computed);
            for (uint32_t g = 0; g < s->c->n_groups; g++)
                for (uint32_t i = 0; i < r->len[g]; i++) {
                    uint32_t b = table(r, g)[i];
                    if (b == NULL_BLOCK || (pass == 1 && s->held[b] == 0)) {
                        continue;
                    } else if (pass == 0) {
                        if (p->grp[b] != g && !why[0])
                            snprintf(why, n, "block %u is in KV-cache groups %u and %u", b, p->grp[b], g);
                        distinct[g] += s->held[b]++ == 0;
                        continue;
                    }
                    if (s->held[b] != p->ref[b] && !why[0])
                        snprintf(why, n, "block %u is held %u times, its ref count is %u", b, s->held[b], p->ref[b]);
                    if (s->held[b] > 1 && p->owner[b] == 0 && !why[0])
                        snprintf(why, n, "block %u is held by %u requests and not cached (no prefix hit shares it)",
                                 b, s->held[b]);
                    s->held[b] = 0;
                }
        }
}

static enum kvp_status audit(struct sim *s, struct kvp_error *err)
{
    const struct pool *p = &s->pool;
    uint64_t distinct[KVP_SIM_MAX_GROUPS] = {0}, used = 0;
    char why[128] = "";
    audit_tables(s, distinct, why, sizeof why);
    for (uint32_t g = 0; g < s->c->n_groups; g++) {
        used += p->used[g];
        if (distinct[g] != p->used[g] && !why[0])
            snprintf(why, sizeof why, "group %u holds %llu blocks, counted %llu", g, (unsigned long long)distinct[g],
                     (unsigned long long)p->used[g]);
    }
    if (used + p->nfree != p->n - 1 && !why[0])
        snprintf(why, sizeof why, "%llu used and %llu free blocks in a pool of %llu", (unsigned long long)used,
                 (unsigned long long)p->nfree, (unsigned long long)(p->n - 1));
    if (why[0])
        return kvp_fail(err, KVP_ERR_RANGE, "simulate: step %llu: %s (the simulator's invariant; please report it)",
                        (unsigned long long)s->out->steps + 1, why);
    return KVP_OK;
}

static void sim_free(struct sim *s)
{
    pool_free(&s->pool);
    for (uint32_t i = 0; s->r && i < s->n; i++)
        free(s->r[i].len);
    free(s->r);
    free(s->wait);
    free(s->run);
    free(s->sched);
    free(s->sched_n);
    for (uint32_t g = 0; g < KVP_SIM_MAX_GROUPS; g++)
        free(s->hit[g]);
    free(s->tmp);
    free(s->tmp_key);
    free(s->scratch);
    free(s->held);
    kvp_sim_tier_free(&s->tier);
    kvp_sim_sglang_free(s);
}

static enum kvp_status sim_init(struct sim *s, const struct kvp_sim_config *c, const struct kvp_workload *w,
                                struct kvp_error *err)
{
    enum kvp_status st;
    struct kvp_sim_result *out = s->out;
    memset(s, 0, sizeof *s);
    s->memo_uid = NONE;
    s->out = out;
    s->c = c;
    s->n = w->n;
    if (c->engine == KVP_SIM_VLLM || c->engine == KVP_SIM_TRTLLM || c->engine == KVP_SIM_VLLM0) {
        if ((st = pool_init(&s->pool, c->num_blocks, w->n, c->n_groups, err)) != KVP_OK)
            return st;
        if ((KVP_SIM_AUDIT || c->audit) && !(s->held = calloc(c->num_blocks, sizeof *s->held)))
            return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory for %llu blocks",
                            (unsigned long long)c->num_blocks);
    } else if (c->engine == KVP_SIM_SGLANG) {
        if ((st = kvp_sim_sglang_init(s, err)) != KVP_OK)
            return st;
    } else {
        s->pool.n = c->num_blocks;
    }
    if ((st = kvp_sim_tier_init(&s->tier, c->offload_blocks, err)) != KVP_OK)
        return st;
    if (c->offload_blocks && c->engine == KVP_SIM_VLLM &&
        !(s->scratch = malloc((kvp_cdiv(c->max_model_len, c->block_size) + 1) * sizeof *s->scratch)))
        return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory");
    if (c->engine == KVP_SIM_TRTLLM &&
        (!(s->tmp = malloc(2 * (uint64_t)w->n * sizeof *s->tmp)) || !(s->tmp_key = malloc(w->n * sizeof *s->tmp_key))))
        return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory for %u requests", w->n);
    s->r = calloc(w->n, sizeof *s->r);
    s->wait = malloc(w->n * sizeof *s->wait);
    s->run = malloc(w->n * sizeof *s->run);
    s->sched = malloc(w->n * sizeof *s->sched);
    s->sched_n = malloc(w->n * sizeof *s->sched_n);
    s->hit_cap = kvp_cdiv(c->max_model_len, c->block_size) + 1;
    for (uint32_t g = 0; g < c->n_groups && c->engine == KVP_SIM_VLLM; g++)
        if (!(s->hit[g] = malloc(s->hit_cap * sizeof *s->hit[g])))
            return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory");
    if (!s->r || !s->wait || !s->run || !s->sched || !s->sched_n)
        return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory for %u requests", w->n);
    for (uint32_t i = 0; i < w->n; i++) {
        const struct kvp_sim_request *q = &w->req[i];
        struct req *r = &s->r[i];
        uint64_t len = (uint64_t)q->prompt + q->output,
                 pool = c->engine == KVP_SIM_LLAMACPP ? c->max_model_len : c->num_blocks - 1;
        r->q = q;
        r->tokens = q->prompt;
        r->pend = NONE;
        s->out->prompt_tokens += q->prompt;
        if (len > UINT32_MAX)
            return kvp_fail_at(err, KVP_ERR_RANGE, w->name, q->line, q->line ? 1 : 0,
                               "request %u: %llu tokens are more than the simulator's 2^32 - 1", i + 1,
                               (unsigned long long)len);
        if (len > c->max_model_len)
            return kvp_fail_at(err, KVP_ERR_RANGE, w->name, q->line, q->line ? 1 : 0,
                               "request %u: %u prompt + %u output tokens are more than max_model_len %llu", i + 1,
                               q->prompt, q->output, (unsigned long long)c->max_model_len);
        if (request_peak(c, q) > pool)
            return kvp_fail_at(err, KVP_ERR_RANGE, w->name, q->line, q->line ? 1 : 0,
                               "request %u needs %llu blocks, more than the pool's %llu: it could never run", i + 1,
                               (unsigned long long)request_peak(c, q), (unsigned long long)pool);
        if (c->engine == KVP_SIM_TRTLLM && (st = kvp_sim_trtllm_check(c, w, i, err)) != KVP_OK)
            return st;
        if (c->engine == KVP_SIM_VLLM0 && (st = kvp_sim_vllm0_check(c, w, i, err)) != KVP_OK)
            return st;
        /* SGLang keeps no block table (the radix tree and the counts in sim_sglang.c hold its
         * slots), nor llama.cpp (a slot's cells are counted): a 4 MiB trace queued on one slot
         * held 280 MB of tables nothing read */
        r->cap = c->engine == KVP_SIM_SGLANG || c->engine == KVP_SIM_LLAMACPP
                     ? 0
                     : (uint32_t)kvp_cdiv(len, c->block_size);
    }
    return KVP_OK;
}

enum kvp_status kvp_sim_run(const struct kvp_sim_config *c, const struct kvp_workload *w, bool keep_series,
                            struct kvp_sim_result *out, struct kvp_error *err)
{
    struct sim s;
    enum kvp_status st;
    uint32_t next = 0, done = 0;
    uint64_t cap = 0;
    double t = 0.0;

    memset(out, 0, sizeof *out);
    if (w->n == 0 || c->max_batched_tokens == 0 || c->max_num_seqs == 0 || c->block_size == 0 || c->n_groups == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "simulate: an empty workload or a zero limit");
    if (!(c->step.fixed_s + c->step.per_token_s > 0) && !(c->step.bandwidth > 0 && c->step.peak_flops > 0))
        return kvp_fail(err, KVP_ERR_USAGE, "simulate: the step time needs a roofline (a GPU) or a step-time model");
    if (c->offload_blocks && ((c->engine != KVP_SIM_VLLM && c->engine != KVP_SIM_TRTLLM) || c->n_groups != 1))
        return kvp_fail(err, KVP_ERR_USAGE,
                        "simulate: a CPU tier needs vLLM V1 or TensorRT-LLM with one KV-cache group");
    if ((st = kvp_sim_workload_cost(w, err)) != KVP_OK)
        return st;
    s.out = out;
    if ((st = sim_init(&s, c, w, err)) != KVP_OK)
        goto out;
    out->pool_blocks = c->engine == KVP_SIM_LLAMACPP ? c->num_blocks : c->num_blocks - 1;
    while (done < w->n) {
        uint64_t tokens = 0, blocks = 0;
        double t_end;
        while (next < w->n && w->req[next].arrival_s <= t) {
            struct req *r = &s.r[next];
            /* its counts, its block tables, then (with a pool) its own heads */
            uint64_t n = (uint64_t)r->cap * c->n_groups, counts = 2 * (uint64_t)c->n_groups;
            if (!(r->len = malloc((counts + (s.pool.own ? 2 : 1) * n) * sizeof *r->len))) {
                st = kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory for request %u's blocks", next + 1);
                goto out;
            }
            memset(r->len, 0, (counts + n) * sizeof *r->len);
            r->cached = r->len + c->n_groups;
            r->table = r->len + counts;
            if (s.pool.own) {
                s.pool.own[next] = (struct heads){r->table + n, n};
                memset(r->table + n, 0xff, n * sizeof *r->table);
            }
            r->state = R_WAITING;
            s.wait[(s.wait_head + s.nwait++) % s.n] = next++;
        }
        s.nsched = 0;
        s.loaded = 0;
        s.now = t;
        if (c->engine == KVP_SIM_VLLM)
            vllm_step(&s);
        else if (c->engine == KVP_SIM_SGLANG && (st = kvp_sim_sglang_step(&s, err)) != KVP_OK)
            goto out;
        else if (c->engine == KVP_SIM_TRTLLM)
            kvp_sim_trtllm_step(&s);
        else if (c->engine == KVP_SIM_VLLM0)
            kvp_sim_vllm0_step(&s);
        else if (c->engine == KVP_SIM_LLAMACPP)
            llamacpp_step(&s);
        if (s.held && (st = audit(&s, err)) != KVP_OK)
            goto out;
        if (s.nsched == 0) {
            if (next < w->n) { /* idle until the next arrival */
                t = t > w->req[next].arrival_s ? t : w->req[next].arrival_s;
                continue;
            }
            st = kvp_fail(err, KVP_ERR_RANGE, "simulate: no request can be scheduled (%u waiting)", s.nwait);
            goto out;
        }
        for (uint32_t k = 0; k < s.nsched; k++) {
            struct req *r = &s.r[s.sched[k]];
            tokens += s.sched_n[k];
            blocks += r->live;
        }
        t_end = t + step_time(c, tokens, blocks);
        if (s.loaded) { /* the loads from the CPU tier, serialised with the step: a bound */
            double load_s = (double)s.loaded * c->offload_block_bytes /
                            (c->offload_bandwidth > 0 ? c->offload_bandwidth : KVP_SIM_HOST_LINK);
            out->offload_loaded_blocks += s.loaded;
            out->offload_load_s += load_s;
            t_end += load_s;
        }
        if ((st = record(&s, keep_series, t_end, tokens, &cap, err)) != KVP_OK)
            goto out;
        done += advance(&s, t_end);
        t = t_end;
    }
    out->duration_s = t;
    if (s.log_nomem)
        st = kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory for the decision log");
    else if (s.memo_wrong)
        st = kvp_fail(err, KVP_ERR_RANGE, "simulate: %llu prefix hits of a blocked request were not those a lookup "
                      "finds (the simulator's invariant; please report it)", (unsigned long long)s.memo_wrong);
    else if (s.pool.unplaced)
        st = kvp_fail(err, KVP_ERR_RANGE, "simulate: %llu blocks were cached past their request's length (the "
                      "simulator's invariant; please report it)", (unsigned long long)s.pool.unplaced);
    else if (s.pool.misowned)
        st = kvp_fail(err, KVP_ERR_RANGE, "simulate: %llu prefix hits reused a block another KV-cache group or "
                      "request had taken as a new block (the simulator's invariant; please report it)",
                      (unsigned long long)s.pool.misowned);
    else
        st = summarize(&s, err);
out:
    sim_free(&s);
    if (st != KVP_OK)
        kvp_sim_result_free(out);
    return st;
}

const char *kvp_sim_unit(enum kvp_sim_engine e)
{
    return e == KVP_SIM_LLAMACPP ? "cells" : e == KVP_SIM_SGLANG ? "tokens" : "blocks";
}

const char *kvp_sim_scheduler(enum kvp_sim_engine e)
{
    return e == KVP_SIM_LLAMACPP ? "llama.cpp slots"
           : e == KVP_SIM_SGLANG ? "SGLang scheduler"
           : e == KVP_SIM_TRTLLM ? "TensorRT-LLM scheduler"
           : e == KVP_SIM_VLLM0  ? "vLLM V0 scheduler"
                                 : "vLLM V1 scheduler";
}

void kvp_sim_result_free(struct kvp_sim_result *r)
{
    if (!r)
        return;
    free(r->series);
    r->series = NULL;
    r->steps = 0;
    free(r->log);
    r->log = NULL;
    r->nlog = 0;
}

bool kvp_sim_sustained(const struct kvp_sim_result *r, double max_queue_s)
{
    return r->preemptions == 0 && r->queue.p99 <= max_queue_s;
}

/* Whether workload s at `rate` is sustained under c. */
static enum kvp_status sustained_at(const struct kvp_sim_config *c, const struct kvp_synth *s, double rate,
                                    double max_queue_s, bool *ok, struct kvp_error *err)
{
    struct kvp_synth x = *s;
    struct kvp_workload w;
    struct kvp_sim_result r;
    enum kvp_status st;
    x.rate = rate;
    if ((st = kvp_workload_synth(&x, &w, err)) != KVP_OK)
        return st;
    st = kvp_sim_run(c, &w, false, &r, err);
    kvp_workload_free(&w);
    if (st == KVP_OK)
        *ok = kvp_sim_sustained(&r, max_queue_s);
    kvp_sim_result_free(&r);
    return st;
}

enum kvp_status kvp_sim_max_rate(const struct kvp_sim_config *c, const struct kvp_synth *s, double max_queue_s,
                                 double *rate, struct kvp_error *err)
{
    double lo = 0.0, hi = 1.0 / 1024;
    enum kvp_status st;
    bool ok = true;

    *rate = 0.0;
    /* double until it is not sustained (2^-10 .. 2^30 per second), then bisect to 1% */
    for (int i = 0; i < 40 && ok; i++) {
        if ((st = sustained_at(c, s, hi, max_queue_s, &ok, err)) != KVP_OK)
            return st;
        if (ok) {
            lo = hi;
            hi *= 2;
        }
    }
    while (!ok && hi - lo > 0.01 * hi) {
        double mid = (lo + hi) / 2;
        bool mid_ok = false;
        if ((st = sustained_at(c, s, mid, max_queue_s, &mid_ok, err)) != KVP_OK)
            return st;
        if (mid_ok)
            lo = mid;
        else
            hi = mid;
    }
    *rate = lo;
    return KVP_OK;
}
