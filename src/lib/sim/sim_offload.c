/* sim_offload.c -- the CPU offload tier the simulator's engines share: a
 * fixed number of host blocks holding block identities in LRU order, found
 * by identity (sim_int.h struct tier). vLLM V1 stores into it on compute
 * (sim.c), TensorRT-LLM on eviction (sim_trtllm.c); docs/simulate.md, "CPU
 * offload tier", gives the rules with their sources. */
#include "sim_int.h"

struct tier_key {
    const struct tier *t;
    uint64_t owner;
    uint32_t index;
};

static bool is_entry(const void *key, uint32_t e)
{
    const struct tier_key *k = key;
    return k->t->owner[e] == k->owner && k->t->index[e] == k->index;
}

static uint64_t tier_pos(const struct tier *t, uint64_t owner, uint32_t index)
{
    struct tier_key k = {t, owner, index};
    return hx_find(&t->by_id, key_hash(owner, index, 0), is_entry, &k);
}

uint32_t kvp_sim_tier_find(const struct tier *t, uint64_t owner, uint32_t index)
{
    return t->n ? t->by_id.slot[tier_pos(t, owner, index)].id : NONE;
}

void kvp_sim_tier_touch(struct tier *t, uint32_t e)
{
    lru_unlink(&t->lru, e);
    lru_append(&t->lru, e);
}

/* Off the list and out of the index. */
void kvp_sim_tier_drop(struct tier *t, uint32_t e)
{
    hx_remove_at(&t->by_id, tier_pos(t, t->owner[e], t->index[e]));
    lru_unlink(&t->lru, e);
    t->lru.next[e] = t->spare;
    t->spare = e;
    t->used--;
}

bool kvp_sim_tier_room(struct tier *t, uint64_t need)
{
    uint64_t have = t->n - t->used, evictable = 0;
    if (need <= have)
        return true;
    for (uint32_t e = t->lru.head; e != NONE && evictable < need - have; e = t->lru.next[e])
        evictable += t->ref[e] == 0;
    if (evictable < need - have)
        return false;
    for (uint32_t e = t->lru.head, nx; have < need; e = nx) {
        nx = t->lru.next[e];
        if (t->ref[e] == 0) {
            kvp_sim_tier_drop(t, e);
            have++;
        }
    }
    return true;
}

uint32_t kvp_sim_tier_put(struct tier *t, uint64_t owner, uint32_t index, int32_t ref)
{
    uint32_t e = t->spare;
    t->spare = t->lru.next[e];
    t->owner[e] = owner;
    t->index[e] = index;
    t->ref[e] = ref;
    t->pend[e] = NONE;
    t->by_id.slot[tier_pos(t, owner, index)] = (struct hslot){e, key_hash(owner, index, 0)};
    lru_append(&t->lru, e);
    t->used++;
    return e;
}

void kvp_sim_tier_free(struct tier *t)
{
    free(t->lru.prev);
    free(t->lru.next);
    free(t->pend);
    free(t->ref);
    free(t->owner);
    free(t->index);
    hx_free(&t->by_id);
    memset(t, 0, sizeof *t);
}

enum kvp_status kvp_sim_tier_init(struct tier *t, uint64_t n, struct kvp_error *err)
{
    memset(t, 0, sizeof *t);
    t->lru.head = t->lru.tail = t->spare = NONE;
    if (n == 0)
        return KVP_OK;
    if (n >= NONE)
        return kvp_fail(err, KVP_ERR_RANGE, "simulate: a CPU tier of %llu blocks is more than %u",
                        (unsigned long long)n, NONE - 1);
    t->n = n;
    t->lru.prev = malloc(n * sizeof *t->lru.prev);
    t->lru.next = malloc(n * sizeof *t->lru.next);
    t->pend = malloc(n * sizeof *t->pend);
    t->ref = malloc(n * sizeof *t->ref);
    t->owner = malloc(n * sizeof *t->owner);
    t->index = malloc(n * sizeof *t->index);
    if (!t->lru.prev || !t->lru.next || !t->pend || !t->ref || !t->owner || !t->index || !hx_init(&t->by_id, n)) {
        kvp_sim_tier_free(t);
        return kvp_fail(err, KVP_ERR_NOMEM, "simulate: out of memory for a CPU tier of %llu blocks",
                        (unsigned long long)n);
    }
    for (uint32_t k = (uint32_t)n; k > 0; k--) { /* the spare chain hands out entry 0 first */
        uint32_t e = k - 1;
        t->lru.next[e] = t->spare;
        t->spare = e;
    }
    return KVP_OK;
}
