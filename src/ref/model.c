/* model.c -- the reference decoder's model: its shape as run (scaled widths,
 * the KV geometry kept, recurrent state shapes) and its seeded weights, the
 * one place they are drawn (cuda_host.c and weights_export.c read a
 * kvp_ref_model's tensors instead of drawing their own), the fidelity
 * model's shaping included. decoder.c runs it; cache.c sizes its stores
 * from its shapes. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/num.h"
#include "ref_internal.h"

/* ---- the fidelity model's weights (kvp_ref_kivi_model, measure.c) ------------ */

/* KIVI's argument rests on three properties of real models' layer inputs,
 * which random weights lack, so the fidelity model builds them in:
 *   1. outlier key channels: the same few channels of every K head are large
 *      for every token (KIVI, KVQuant), so per-token key groups that hold
 *      one lose the other channels' precision;
 *   2. sparse attention: a few heavy-hitter tokens take most of the mass
 *      (KIVI measures 84% of weights near zero), so the errors that count
 *      are those of the few attended tokens;
 *   3. values whose scale varies by token (loud tokens): a channel group of
 *      G tokens that holds a loud token takes its range, which per-channel
 *      quantization spreads onto the quiet, attended tokens of the group.
 * The last two are built from reserved hidden dims of the embeddings: dim 0
 * is a shared bias (a massive activation every token carries), dim 1 flags
 * the heavy hitters, dims 2..3 flag the loud tokens (two loud directions). */
enum { DIM_BIAS = 0, DIM_HEAVY = 1, DIM_LOUD = 2, N_LOUD = 2, DIMS_USED = DIM_LOUD + N_LOUD };
#define SPIKE 2.6457513f /* sqrt(7): u^3 of u ~ U[-1, 1) has rms 1/sqrt(7) */
static const float EMB_BIAS = 2.0f, EMB_FLAG = 3.0f; /* embedding entries; the rest are U[-1, 1) */

/* Token t's class from a seeded bijection of [0, vocab): rank < heavy are
 * heavy hitters, the next `loud` are loud, the others plain. */
struct classes { uint64_t a, b; };
static struct classes classes_of(const struct kvp_ref_opts *o, uint32_t vocab)
{
    struct pcg r;
    struct classes c;
    ref_pcg_seed(&r, o->seed, 13);
    for (;;) { /* a multiplier coprime with vocab makes t -> (a t + b) mod vocab a bijection */
        uint64_t x = ref_pcg_next(&r) % vocab, y = vocab;
        c.a = x;
        while (y) {
            uint64_t t = x % y;
            x = y;
            y = t;
        }
        if (x == 1 && c.a)
            break;
        if (vocab == 1) {
            c.a = 1;
            break;
        }
    }
    c.b = ref_pcg_next(&r) % vocab;
    return c;
}

static uint64_t rank_of(const struct classes *c, uint32_t vocab, uint32_t t)
{
    return (c->a * t + c->b) % vocab;
}

static bool shaped(const struct kvp_ref_opts *o, uint32_t H)
{
    return (o->heavy_tokens || o->loud_tokens) && H >= 2 * DIMS_USED;
}

/* Shape the embeddings (vocab, H) after their random fill, as o asks
 * (heavy-hitter and loud tokens); a no-op when o asks for neither. */
static void shape_embed(const struct kvp_ref_opts *o, uint32_t H, uint32_t vocab, float *embed)
{
    if (!shaped(o, H))
        return;
    struct classes c = classes_of(o, vocab);
    for (uint32_t t = 0; t < vocab; t++) {
        float *e = embed + (uint64_t)t * H;
        uint64_t k = rank_of(&c, vocab, t);
        for (uint32_t i = 0; i < DIMS_USED; i++)
            e[i] = 0;
        e[DIM_BIAS] = EMB_BIAS;
        if (k < o->heavy_tokens)
            e[DIM_HEAVY] = EMB_FLAG;
        else if (k < (uint64_t)o->heavy_tokens + o->loud_tokens)
            e[DIM_LOUD + k % N_LOUD] = EMB_FLAG;
    }
}

/* Shape one attention spec's wq (hq*dk, H), wk (hkv*dk, H), wv (hkv*dv, H)
 * after their random fill (outlier key channels, heavy hitters, loud
 * values); no-ops when o asks for none. Uses its own PCG streams, so the
 * other weights stay those of the seed. */
static void shape_attention(const struct kvp_ref_opts *o, uint32_t H, uint32_t hq, uint32_t hkv, uint32_t dk,
                            uint32_t dv, float *wq, float *wk, float *wv)
{
    /* 1. outlier channels: the same few channels of every K head are large
     * for every token (what KIVI and KVQuant observe) */
    for (uint32_t h = 0; h < hkv; h++)
        for (uint32_t c = 0; c < o->key_outliers && c < dk; c++) {
            uint32_t ch = (c * 7 + 3) % dk;
            for (uint64_t j = 0; j < H; j++)
                wk[((uint64_t)h * dk + ch) * H + j] *= o->outlier_gain;
        }
    if (!shaped(o, H) || dk < 2)
        return;
    /* rmsnorm'd embedding entries: a plain token's bias dim, a flagged token's flag dim */
    float plain = sqrtf(((float)(H - DIMS_USED) / 3.0f + EMB_BIAS * EMB_BIAS) / (float)H);
    float flagged = sqrtf(((float)(H - DIMS_USED) / 3.0f + EMB_BIAS * EMB_BIAS + EMB_FLAG * EMB_FLAG) / (float)H);
    float xb = EMB_BIAS / plain, xf = EMB_FLAG / flagged;
    /* 2. heavy hitters: every query reads the bias dim into channel dk-2, the
     * heavy hitters' keys put their flag there. dk-2 is the slowest rope pair
     * (10000^(-(dk-2)/dk) rad per token), so the product stays ~constant over
     * thousands of positions: q.k/sqrt(dk) gains ~heavy_gain for them. */
    if (o->heavy_tokens) {
        float gk = o->heavy_gain * sqrtf((float)dk) / (xb * xf);
        for (uint32_t h = 0; h < hq; h++)
            wq[((uint64_t)h * dk + dk - 2) * H + DIM_BIAS] = 1.0f;
        for (uint32_t h = 0; h < hkv; h++)
            wk[((uint64_t)h * dk + dk - 2) * H + DIM_HEAVY] = gk;
    }
    /* 3. loud values: each loud flag dim writes a random spiky direction (u^3:
     * a few channels carry most of it) into every V head, with rms value_gain
     * x a plain token's value entry (sqrt(1/3) x its rmsnorm'd random part) */
    if (o->loud_tokens) {
        struct pcg r;
        float plain_v = sqrtf(1.0f / 3.0f) * sqrtf((float)(H - DIMS_USED) / (float)H) / plain;
        float g = o->value_gain * plain_v / xf * sqrtf(3.0f); /* U[-1,1) has rms 1/sqrt(3) */
        ref_pcg_seed(&r, o->seed, 17);
        for (uint64_t i = 0; i < (uint64_t)hkv * dv; i++)
            for (uint32_t f = 0; f < N_LOUD; f++) {
                float u = ref_pcg_float(&r);
                wv[i * H + DIM_LOUD + f] = g * u * u * u * SPIKE;
            }
    }
}

/* ---- the decoder's weights ---------------------------------------------------- */

/* a*b*c floats more from the arena (pass 1, arena NULL, only counts). An
 * overflowing count pins arena_used at UINT64_MAX, which later takes keep. */
static float *take(struct kvp_ref_model *rm, uint64_t a, uint64_t b, uint64_t c)
{
    float *p = rm->arena ? rm->arena + rm->arena_used : NULL;
    uint64_t n;
    if (!kvp_mul3(a, b, c, &n) || !kvp_add(rm->arena_used, n, &rm->arena_used))
        rm->arena_used = UINT64_MAX;
    return p;
}

/* Carve every weight from the arena in ref_internal.h's order (pass 1 with
 * arena NULL counts). */
static void carve(struct kvp_ref_model *rm)
{
    uint64_t H = rm->hidden, I = rm->inter;
    rm->arena_used = 0;
    rm->embed = take(rm, rm->vocab, H, 1);
    rm->out_norm = take(rm, H, 1, 1);
    rm->lm_head = take(rm, rm->vocab, H, 1);
    for (uint32_t i = 0; i < rm->m.n_specs; i++) {
        const struct kvp_layer_spec *s = &rm->m.specs[i];
        struct ref_layer *w = &rm->w[i];
        w->attn_norm = take(rm, H, 1, 1);
        switch (s->kind) {
        case KVP_LAYER_FULL:
        case KVP_LAYER_SLIDING:
        case KVP_LAYER_CHUNKED:
            w->wk = take(rm, w->hkv, w->dk, H);
            w->wv = take(rm, w->hkv, w->dv, H);
            /* fallthrough */
        case KVP_LAYER_SHARED:
            w->wq = take(rm, w->hq, w->dk, H);
            w->wo = take(rm, H, w->hq, w->dv);
            break;
        case KVP_LAYER_MLA:
            w->wq = take(rm, w->hq, w->dk, H);
            w->wdkv = take(rm, w->rank, H, 1);
            w->wkr = take(rm, w->rope, H, 1);
            w->wuk = take(rm, w->hq, w->nope, w->rank);
            w->wuv = take(rm, w->hq, w->dv, w->rank);
            w->wo = take(rm, H, w->hq, w->dv);
            break;
        case KVP_LAYER_RECURRENT:
            w->ra = take(rm, w->S, 1, 1);
            w->rb = take(rm, w->S, 1, 1);
            w->rc = take(rm, w->S, 1, 1);
            w->rden = take(rm, w->S, 1, 1);
            break;
        default:
            break;
        }
        if (s->mlp != KVP_MLP_NONE) {
            w->ffn_norm = take(rm, H, 1, 1);
            w->w1 = take(rm, I, H, 1);
            w->w3 = take(rm, I, H, 1);
            w->w2 = take(rm, H, I, 1);
        }
    }
}

/* Uniform in [-a, a) with a = 1/sqrt(fan_in): unit-ish activations. */
static void fill(float *p, uint64_t n, uint64_t fan_in, struct pcg *r)
{
    float a = 1.0f / sqrtf((float)(fan_in ? fan_in : 1));
    for (uint64_t i = 0; i < n; i++)
        p[i] = a * ref_pcg_float(r);
}

static void ones(float *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        p[i] = 1.0f;
}

/* The only place the reference weights are drawn: cuda_host.c and
 * weights_export.c read a kvp_ref_model's tensors (ref_internal.h). One PCG32
 * stream (seed, stream 1) in this order: embed, lm_head, then per spec wk,
 * wv, wq, wo, MLA's, recurrent's, w1, w3, w2; measure.c's shaping uses its
 * own streams, so adding it leaves the other draws alone. */
static void init_weights(struct kvp_ref_model *rm)
{
    struct pcg r;
    uint64_t H = rm->hidden, I = rm->inter;
    ref_pcg_seed(&r, rm->o.seed, 1);
    for (uint64_t i = 0; i < (uint64_t)rm->vocab * H; i++)
        rm->embed[i] = ref_pcg_float(&r); /* rows of norm ~ sqrt(H/3) */
    ones(rm->out_norm, H);
    fill(rm->lm_head, (uint64_t)rm->vocab * H, H, &r);
    shape_embed(&rm->o, (uint32_t)H, rm->vocab, rm->embed);
    for (uint32_t i = 0; i < rm->m.n_specs; i++) {
        const struct kvp_layer_spec *s = &rm->m.specs[i];
        struct ref_layer *w = &rm->w[i];
        ones(w->attn_norm, H);
        if (w->wk) {
            fill(w->wk, (uint64_t)w->hkv * w->dk * H, H, &r);
            fill(w->wv, (uint64_t)w->hkv * w->dv * H, H, &r);
        }
        if (w->wq) {
            fill(w->wq, (uint64_t)w->hq * w->dk * H, H, &r);
            fill(w->wo, H * w->hq * w->dv, (uint64_t)w->hq * w->dv, &r);
        }
        if (w->wk) /* KIVI's outlier keys, heavy hitters, loud values */
            shape_attention(&rm->o, (uint32_t)H, w->hq, w->hkv, w->dk, w->dv, w->wq, w->wk, w->wv);
        if (s->kind == KVP_LAYER_MLA) {
            fill(w->wdkv, (uint64_t)w->rank * H, H, &r);
            fill(w->wkr, (uint64_t)w->rope * H, H, &r);
            fill(w->wuk, (uint64_t)w->hq * w->nope * w->rank, w->rank, &r);
            fill(w->wuv, (uint64_t)w->hq * w->dv * w->rank, w->rank, &r);
        }
        if (w->ra)
            for (uint64_t j = 0; j < w->S; j++) {
                w->ra[j] = 2.0f * ref_pcg_float(&r);          /* decay sigmoid(a) in (0.12, 0.88) */
                w->rb[j] = ref_pcg_float(&r);
                w->rc[j] = ref_pcg_float(&r) / sqrtf((float)(w->S / H + 1));
                w->rden[j] = 1.0f + expf(-w->ra[j]);
            }
        if (w->w1) {
            ones(w->ffn_norm, H);
            fill(w->w1, I * H, H, &r);
            fill(w->w3, I * H, H, &r);
            fill(w->w2, H * I, I, &r);
        }
    }
}

/* Elements of one sequence's recurrent state, from the shapes of the mixer
 * kind (the decoder's own statement, not the engine's count, which validate
 * compares it with): a causal conv keeps its last d_conv - 1 inputs of each
 * of its channels, and the recurrence a matrix per head:
 *   mamba   conv over x (d_inner);              SSM (d_inner, d_state)
 *   mamba2  conv over x, B, C (d_inner + 2 n_groups d_state);
 *                                               SSM (n_heads, v_head_dim, d_state)
 *   gdn     conv over q, k, v (2 n_k_heads k_head_dim + n_heads v_head_dim);
 *                                               delta-rule (n_heads, k_head_dim, v_head_dim)
 * false when it overflows 64 bits. */
static bool state_elems(const struct kvp_recurrent *r, uint64_t *out)
{
    uint64_t taps = r->d_conv ? r->d_conv - 1 : 0, ch, heads, rows, cols, a, b;
    switch (r->kind) {
    case KVP_REC_MAMBA:
        ch = r->d_inner, heads = 1, rows = r->d_inner, cols = r->d_state;
        break;
    case KVP_REC_MAMBA2:
        if (!kvp_mul3(2, r->n_groups, r->d_state, &ch) || !kvp_add(ch, r->d_inner, &ch))
            return false;
        heads = r->n_heads, rows = r->v_head_dim, cols = r->d_state;
        break;
    default: /* KVP_REC_GDN */
        if (!kvp_mul3(2, r->n_k_heads, r->k_head_dim, &ch) || !kvp_mul(r->n_heads, r->v_head_dim, &a) ||
            !kvp_add(ch, a, &ch))
            return false;
        heads = r->n_heads, rows = r->k_head_dim, cols = r->v_head_dim;
        break;
    }
    return kvp_mul(taps, ch, &a) && kvp_mul3(heads, rows, cols, &b) && kvp_add(a, b, out);
}

/* Shapes as run; query heads scaled, KV geometry kept. */
static enum kvp_status shape(struct kvp_ref_model *rm, struct kvp_error *err)
{
    for (uint32_t i = 0; i < rm->m.n_specs; i++) {
        struct kvp_layer_spec *s = &rm->m.specs[i];
        struct ref_layer *w = &rm->w[i];
        const struct kvp_layer_spec *src = s;
        if (s->kind == KVP_LAYER_SHARED) {
            if (s->shares >= rm->m.n_layers)
                return kvp_fail(err, KVP_ERR_RANGE, "shared layer reads layer %u of %u", s->shares, rm->m.n_layers);
            src = kvp_model_layer(&rm->m, s->shares);
            if (src->kind != KVP_LAYER_FULL && src->kind != KVP_LAYER_SLIDING && src->kind != KVP_LAYER_CHUNKED)
                return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                                "a shared layer must read an attention layer's cache (got '%s')",
                                kvp_layer_kind_name(src->kind));
        }
        if (s->kind == KVP_LAYER_MLA) {
            w->hq = s->n_heads;
            if (rm->o.q_per_kv && w->hq > rm->o.q_per_kv)
                w->hq = rm->o.q_per_kv;
            w->rope = s->qk_rope_dim;
            w->nope = s->head_dim_k - s->qk_rope_dim;
            w->dk = s->head_dim_k;
            w->dv = s->head_dim_v;
            w->rank = s->kv_lora_rank;
            w->hkv = 1;
        } else if (s->kind == KVP_LAYER_RECURRENT) {
            if (!state_elems(&s->rec, &w->S))
                return kvp_fail(err, KVP_ERR_OVERFLOW, "the recurrent state of model '%s' overflows 64 bits",
                                rm->m.name);
        } else if (s->kind != KVP_LAYER_NONE) {
            uint32_t hkv = src->n_kv_heads ? src->n_kv_heads : 1, g = s->n_heads / hkv;
            if (g == 0)
                g = 1;
            if (rm->o.q_per_kv && g > rm->o.q_per_kv)
                g = rm->o.q_per_kv;
            w->hkv = hkv;
            w->hq = hkv * g;
            w->dk = src->head_dim_k;
            w->dv = src->head_dim_v;
        }
        if (w->hq)
            s->n_heads = w->hq;
    }
    return KVP_OK;
}

/* ---- the persistent threads ------------------------------------------------ */

struct pool_worker {
    struct kvp_ref_pool *p;
    uint32_t part;
    pthread_t th;
};

struct kvp_ref_pool {
    pthread_mutex_t call;    /* one job at a time */
    pthread_mutex_t mu;      /* guards the fields below */
    pthread_cond_t go, done; /* a new job (or quit); the last part finished */
    kvp_ref_part_fn *fn;
    void *arg;
    uint64_t job;            /* jobs posted so far */
    uint32_t busy;           /* workers still running the current job */
    uint32_t n;              /* workers started */
    bool quit;
    struct pool_worker w[];
};

static void *pool_main(void *arg)
{
    struct pool_worker *w = arg;
    struct kvp_ref_pool *p = w->p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->job == seen && !p->quit)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit)
            break;
        seen = p->job;
        kvp_ref_part_fn *fn = p->fn;
        void *a = p->arg;
        pthread_mutex_unlock(&p->mu);
        fn(a, w->part, p->n + 1);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void pool_free(struct kvp_ref_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < p->n; i++)
        pthread_join(p->w[i].th, NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->call);
    free(p);
}

/* threads - 1 workers; fewer where a thread cannot start (results do not
 * depend on their number), NULL where none can or threads <= 1. */
static struct kvp_ref_pool *pool_new(uint32_t threads)
{
    if (threads <= 1)
        return NULL;
    if (threads > KVP_REF_MAX_THREADS)
        threads = KVP_REF_MAX_THREADS;
    struct kvp_ref_pool *p = calloc(1, sizeof *p + (threads - 1) * sizeof p->w[0]);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->call, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    pthread_mutex_lock(&p->mu); /* workers read n only once a job is posted */
    for (uint32_t i = 0; i + 1 < threads; i++) {
        p->w[p->n] = (struct pool_worker){.p = p, .part = p->n + 1};
        if (pthread_create(&p->w[p->n].th, NULL, pool_main, &p->w[p->n]) != 0)
            break;
        p->n++;
    }
    pthread_mutex_unlock(&p->mu);
    if (p->n == 0) {
        pool_free(p);
        return NULL;
    }
    return p;
}

uint32_t kvp_ref_pool_parts(const struct kvp_ref_pool *pool)
{
    return pool ? pool->n + 1 : 1;
}

void kvp_ref_pool_run(struct kvp_ref_pool *pool, kvp_ref_part_fn *fn, void *arg)
{
    if (!pool) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&pool->call);
    pthread_mutex_lock(&pool->mu);
    pool->fn = fn, pool->arg = arg, pool->busy = pool->n;
    pool->job++;
    pthread_cond_broadcast(&pool->go);
    pthread_mutex_unlock(&pool->mu);
    fn(arg, 0, pool->n + 1);
    pthread_mutex_lock(&pool->mu);
    while (pool->busy)
        pthread_cond_wait(&pool->done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
    pthread_mutex_unlock(&pool->call);
}

enum kvp_status kvp_ref_model_new(const struct kvp_model *m, const struct kvp_ref_opts *o,
                                  struct kvp_ref_model **out, struct kvp_error *err)
{
    struct kvp_ref_model *rm = calloc(1, sizeof *rm);
    enum kvp_status st;
    *out = NULL;
    if (!rm)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    rm->m = *m;
    rm->o = *o;
    if (rm->o.outlier_gain == 0)
        rm->o.outlier_gain = 20.0f;
    rm->hidden = o->hidden ? o->hidden : m->hidden;
    rm->inter = o->intermediate ? o->intermediate : (m->intermediate ? m->intermediate : m->expert_intermediate);
    rm->vocab = o->vocab ? o->vocab : m->vocab;
    if (rm->hidden == 0 || rm->vocab == 0 || rm->inter == 0) {
        free(rm);
        return kvp_fail(err, KVP_ERR_RANGE, "model '%s' has no hidden, intermediate or vocab size", m->name);
    }
    rm->m.hidden = rm->hidden;
    rm->m.intermediate = rm->inter;
    rm->m.vocab = rm->vocab;
    if ((st = shape(rm, err)) != KVP_OK) {
        free(rm);
        return st;
    }
    carve(rm);
    rm->arena_n = rm->arena_used;
    if (rm->arena_n == UINT64_MAX) {
        free(rm);
        return kvp_fail(err, KVP_ERR_OVERFLOW, "the weights of model '%s' overflow 64 bits (scale it down)", m->name);
    }
    if (rm->arena_n > SIZE_MAX / sizeof(float) || !(rm->arena = malloc((size_t)rm->arena_n * sizeof(float)))) {
        uint64_t n = rm->arena_n;
        free(rm);
        return kvp_fail(err, KVP_ERR_NOMEM, "cannot allocate %llu weights of model '%s' (scale it down)",
                        (unsigned long long)n, m->name);
    }
    carve(rm);
    init_weights(rm);
    rm->pool = pool_new(rm->o.threads);
    *out = rm;
    return KVP_OK;
}

void kvp_ref_model_free(struct kvp_ref_model *rm)
{
    if (!rm)
        return;
    pool_free(rm->pool);
    free(rm->arena);
    free(rm);
}

uint32_t kvp_ref_vocab(const struct kvp_ref_model *rm)
{
    return rm->vocab;
}

const struct kvp_model *kvp_ref_model_shape(const struct kvp_ref_model *rm)
{
    return &rm->m;
}
