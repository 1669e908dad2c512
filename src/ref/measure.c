/* measure.c -- what the reference decoder measures: a run's bytes against
 * the engine's claim (kvplan validate), resident memory, quantization
 * fidelity (KIVI's experiment, its grid) and decode time. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ref_internal.h"

uint64_t kvp_ref_page_bytes(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (uint64_t)p : 4096;
}

uint64_t kvp_ref_rss_bytes(void)
{
    unsigned long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return resident * kvp_ref_page_bytes();
}

/* ---- the fidelity model ------------------------------------------------------ */

/* Its weights are shaped where they are drawn (model.c); this is its shape. */
enum kvp_status kvp_ref_kivi_model(uint64_t seed, struct kvp_model *m, struct kvp_ref_opts *o,
                                   struct kvp_error *err)
{
    struct kvp_layer_spec full = {.kind = KVP_LAYER_FULL, .n_heads = 8, .n_kv_heads = 4, .head_dim_k = 64,
                                  .head_dim_v = 64};
    kvp_model_init(m);
    strcpy(m->name, "kivi-synthetic");
    m->hidden = 64;
    m->intermediate = 128;
    m->vocab = 256;
    m->max_context = 4096;
    *o = (struct kvp_ref_opts){.seed = seed, .hidden = 64, .intermediate = 128, .vocab = 256, .q_per_kv = 2,
                               .key_outliers = 4, .outlier_gain = 20.0f, .heavy_tokens = 4, .heavy_gain = 4.5f,
                               .loud_tokens = 24, .value_gain = 5.0f};
    return kvp_model_add_layers(m, &full, 2, err);
}

/* ---- fidelity --------------------------------------------------------------- */

/* Squared norms accumulated over steps, so the ratios are over everything. */
struct acc {
    double k_err, k_ref, v_err, v_ref, s_err, s_ref, o_err, o_ref;
    double below, weights, top, heads; /* attention weights < 1/T; of all; top-10% mass; head-steps */
    double v_top, v_all;               /* value energy of the 10% largest rows; of all rows */
};

static int descending(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Sum of the largest ceil(n/10) of x (n,), sorted in place. */
static double top_tenth(float *x, uint64_t n)
{
    double s = 0;
    qsort(x, n, sizeof *x, descending);
    for (uint64_t j = 0; j < (n + 9) / 10; j++)
        s += x[j];
    return s;
}

/* Compare layer 0's caches of the fp32 run (a) and the quantized run (b) at
 * the state after token pos: keys, values, scores and outputs of the query
 * the layer-0 attention of the newest token uses (recomputed from its input,
 * which depends on no cache). */
static void compare(const struct kvp_ref_model *rm, const struct kvp_ref_cache *a, const struct kvp_ref_cache *b,
                    uint32_t token, uint64_t n, float *buf, struct acc *acc)
{
    const struct kvp_model *m = kvp_ref_model_shape(rm);
    const struct kvp_layer_spec *sp = kvp_model_layer(m, 0);
    uint32_t hkv = sp->n_kv_heads, hq = sp->n_heads, dk = sp->head_dim_k, dv = sp->head_dim_v, g = hq / hkv;
    uint64_t nk = (uint64_t)hkv * dk, nv = (uint64_t)hkv * dv;
    float *K = buf, *Kq = K + n * nk, *V = Kq + n * nk, *Vq = V + n * nv, *q = Vq + n * nv;
    float *sa = q + (uint64_t)hq * dk, *sb = sa + n, *oa = sb + n, *ob = oa + dv, *tmp = ob + dv; /* tmp (n,) */
    for (uint64_t j = 0; j < n; j++) {
        ref_cache_read_k(a, 0, 0, j, K + j * nk);
        ref_cache_read_k(b, 0, 0, j, Kq + j * nk);
        ref_cache_read_v(a, 0, 0, j, V + j * nv);
        ref_cache_read_v(b, 0, 0, j, Vq + j * nv);
        if (rm->o.pre_rope_keys) { /* both caches hold un-rotated keys */
            ref_rope(K + j * nk, hkv, dk, dk, j);
            ref_rope(Kq + j * nk, hkv, dk, dk, j);
        }
    }
    for (uint64_t i = 0; i < n * nk; i++) {
        acc->k_err += (double)(K[i] - Kq[i]) * (K[i] - Kq[i]);
        acc->k_ref += (double)K[i] * K[i];
    }
    for (uint64_t i = 0; i < n * nv; i++) {
        acc->v_err += (double)(V[i] - Vq[i]) * (V[i] - Vq[i]);
        acc->v_ref += (double)V[i] * V[i];
    }
    for (uint64_t j = 0; j < n; j++) { /* row energies of the fp32 values: how uneven they are */
        double e = 0;
        for (uint64_t i = 0; i < nv; i++)
            e += (double)V[j * nv + i] * V[j * nv + i];
        tmp[j] = (float)e;
        acc->v_all += e;
    }
    acc->v_top += top_tenth(tmp, n);
    kvp_ref_layer0_query(rm, token, n - 1, q);
    for (uint32_t h = 0; h < hq; h++) {
        const float *qh = q + (uint64_t)h * dk;
        uint32_t kh = h / g;
        for (uint64_t j = 0; j < n; j++) {
            float x = 0, y = 0;
            for (uint32_t i = 0; i < dk; i++) {
                x += qh[i] * K[j * nk + kh * dk + i];
                y += qh[i] * Kq[j * nk + kh * dk + i];
            }
            sa[j] = x / sqrtf((float)dk);
            sb[j] = y / sqrtf((float)dk);
            acc->s_err += (double)(sa[j] - sb[j]) * (sa[j] - sb[j]);
            acc->s_ref += (double)sa[j] * sa[j];
        }
        ref_softmax(sa, n);
        ref_softmax(sb, n);
        for (uint64_t j = 0; j < n; j++) { /* how sparse the fp32 attention is */
            acc->below += sa[j] < 1.0f / (float)n;
            tmp[j] = sa[j];
        }
        acc->weights += (double)n;
        acc->top += top_tenth(tmp, n);
        acc->heads += 1;
        memset(oa, 0, 2 * dv * sizeof(float));
        for (uint64_t j = 0; j < n; j++)
            for (uint32_t i = 0; i < dv; i++) {
                oa[i] += sa[j] * V[j * nv + kh * dv + i];
                ob[i] += sb[j] * Vq[j * nv + kh * dv + i];
            }
        for (uint32_t i = 0; i < dv; i++) {
            acc->o_err += (double)(oa[i] - ob[i]) * (oa[i] - ob[i]);
            acc->o_ref += (double)oa[i] * oa[i];
        }
    }
}

static uint32_t argmax(const float *x, uint32_t n)
{
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

enum kvp_status kvp_ref_fidelity(const struct kvp_ref_model *rm, const struct kvp_format *k,
                                 const struct kvp_format *v, uint64_t prompt, uint64_t steps, uint64_t seed,
                                 struct kvp_ref_fidelity *out, struct kvp_error *err)
{
    const struct kvp_model *m = kvp_ref_model_shape(rm);
    const struct kvp_layer_spec *sp = kvp_model_layer(m, 0);
    struct kvp_ref_alloc aa = {0}, ab = {0};
    struct kvp_ref_cache *a = NULL, *b = NULL;
    struct kvp_ref_cache_opts oa = {.policy = KVP_REF_DYNAMIC, .context = prompt + steps, .batch = 1,
                                    .k = kvp_format_plain(KVP_DTYPE_F32), .v = kvp_format_plain(KVP_DTYPE_F32)};
    struct kvp_ref_cache_opts ob = oa;
    uint32_t V = kvp_ref_vocab(rm), tok, agree = 0;
    struct acc acc = {0};
    struct pcg r;
    enum kvp_status st;
    float *la = NULL, *lb = NULL, *buf = NULL;
    uint64_t n = prompt + steps;

    memset(out, 0, sizeof *out);
    if (sp->kind != KVP_LAYER_FULL)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "fidelity needs a full-attention layer 0 (got '%s')",
                        kvp_layer_kind_name(sp->kind));
    if (prompt == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "'prompt' must be at least 1 (got 0)");
    ob.k = *k;
    ob.v = *v;
    uint64_t nk = (uint64_t)sp->n_kv_heads * sp->head_dim_k, nv = (uint64_t)sp->n_kv_heads * sp->head_dim_v;
    la = malloc(V * sizeof *la);
    lb = malloc(V * sizeof *lb);
    buf =
        malloc((2 * n * (nk + nv) + (uint64_t)sp->n_heads * sp->head_dim_k + 3 * n + 2 * sp->head_dim_v) * sizeof *buf);
    if (!la || !lb || !buf) {
        st = kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = kvp_ref_cache_new(rm, &oa, &aa, &a, err)) != KVP_OK || (st = kvp_ref_cache_new(rm, &ob, &ab, &b, err)))
        goto out;
    ref_pcg_seed(&r, seed, 7);
    tok = ref_pcg_next(&r) % V;
    for (uint64_t t = 0; t < n; t++) {
        if ((st = kvp_ref_step(rm, a, 0, tok, la, err)) || (st = kvp_ref_step(rm, b, 0, tok, lb, err)))
            goto out;
        if (t >= prompt) { /* the generated part: compare, then teacher-force the fp32 token */
            compare(rm, a, b, tok, t + 1, buf, &acc);
            agree += argmax(la, V) == argmax(lb, V);
        }
        tok = t + 1 < prompt ? ref_pcg_next(&r) % V : argmax(la, V);
    }
    out->key_err = sqrt(acc.k_err / (acc.k_ref + 1e-30));
    out->value_err = sqrt(acc.v_err / (acc.v_ref + 1e-30));
    out->score_err = sqrt(acc.s_err / (acc.s_ref + 1e-30));
    out->output_err = sqrt(acc.o_err / (acc.o_ref + 1e-30));
    out->agreement = steps ? (double)agree / (double)steps : 1.0;
    out->sparsity = acc.weights > 0 ? acc.below / acc.weights : 0;
    out->top_mass = acc.heads > 0 ? acc.top / acc.heads : 0;
    out->value_top = acc.v_all > 0 ? acc.v_top / acc.v_all : 0;
out:
    kvp_ref_cache_free(a);
    kvp_ref_cache_free(b);
    free(la);
    free(lb);
    free(buf);
    return st;
}

/* ---- the fidelity grid ------------------------------------------------------ */

static const char *const kivi_axes[KVP_REF_KIVI_AXES][2] = {
    {"channel", "token"}, {"token", "token"}, {"channel", "channel"}, {"token", "channel"}};
static const unsigned kivi_bits[KVP_REF_KIVI_BITS] = {2, 4, 8}, kivi_resid[KVP_REF_KIVI_RESID] = {0, 32, 128};
static const char *const kvq_axes[KVP_REF_KVQ_AXES] = {"channel", "token"};
static const unsigned kvq_bits[KVP_REF_KVQ_BITS] = {2, 4};

/* Cell c's formats parsed, then its run on rm. */
static enum kvp_status fidelity_cell(const struct kvp_ref_model *rm, uint64_t seed, uint64_t prompt, uint64_t steps,
                                     struct kvp_ref_fidelity_cell *c, struct kvp_error *err)
{
    struct kvp_format k, v;
    enum kvp_status st;
    if ((st = kvp_format_parse(c->k, &k, err)) != KVP_OK || (st = kvp_format_parse(c->v, &v, err)) != KVP_OK)
        return st;
    return kvp_ref_fidelity(rm, &k, &v, prompt, steps, seed, &c->f, err);
}

/* The claims of g's cells: KIVI's keys by K axis with values per-token,
 * values by V axis with keys per-channel, residual 0 unless named;
 * KVQuant's per bit width. */
static void fidelity_claims(struct kvp_ref_fidelity_grid *g)
{
    g->keys_per_channel_best = g->values_per_token_best = g->residual_helps = true;
    g->pre_rope_helps = g->outliers_help = true;
    for (int b = 0; b < KVP_REF_KIVI_BITS; b++) {
        const struct kvp_ref_fidelity *kc = &g->kivi[0][b][0].f, *kt = &g->kivi[1][b][0].f, *vc = &g->kivi[2][b][0].f;
        g->keys_per_channel_best = g->keys_per_channel_best && kc->score_err < kt->score_err;
        g->values_per_token_best = g->values_per_token_best && kc->output_err < vc->output_err;
        if (g->kivi_bits[b] == 2) /* where the errors are large enough to rank; 4 and 8 bits come out about equal */
            g->value_err_wrong_way = vc->value_err < kc->value_err;
        g->residual_helps = g->residual_helps && g->kivi[0][b][2].f.score_err < kc->score_err;
    }
    for (int b = 0; b < KVP_REF_KVQ_BITS; b++) {
        g->pre_rope_helps = g->pre_rope_helps && g->kvq[0][b][0][1].f.score_err < g->kvq[0][b][0][0].f.score_err;
        for (int a = 0; a < KVP_REF_KVQ_AXES; a++)
            g->outliers_help = g->outliers_help && g->kvq[a][b][1][0].f.key_err < g->kvq[a][b][0][0].f.key_err;
    }
}

enum kvp_status kvp_ref_fidelity_grid(uint64_t seed, uint64_t prompt, uint64_t steps,
                                      struct kvp_ref_fidelity_grid *g, struct kvp_error *err)
{
    struct kvp_model fm;
    struct kvp_ref_opts pre_o;
    struct kvp_ref_model *rm[2] = {NULL, NULL}; /* keys cached after RoPE, before it (the same weights) */
    enum kvp_status st;

    memset(g, 0, sizeof *g);
    memcpy(g->kivi_axes, kivi_axes, sizeof kivi_axes);
    memcpy(g->kivi_bits, kivi_bits, sizeof kivi_bits);
    memcpy(g->kivi_resid, kivi_resid, sizeof kivi_resid);
    memcpy(g->kvq_axes, kvq_axes, sizeof kvq_axes);
    memcpy(g->kvq_bits, kvq_bits, sizeof kvq_bits);
    if ((st = kvp_ref_kivi_model(seed, &fm, &g->o, err)) != KVP_OK || (st = kvp_ref_model_new(&fm, &g->o, &rm[0], err)))
        return st;
    for (int a = 0; a < KVP_REF_KIVI_AXES && st == KVP_OK; a++)
        for (int b = 0; b < KVP_REF_KIVI_BITS && st == KVP_OK; b++)
            for (int r = 0; r < KVP_REF_KIVI_RESID && st == KVP_OK; r++) {
                struct kvp_ref_fidelity_cell *c = &g->kivi[a][b][r];
                snprintf(c->k, sizeof c->k, "int%u:group=32:axis=%s:residual=%u", kivi_bits[b], kivi_axes[a][0],
                         kivi_resid[r]);
                snprintf(c->v, sizeof c->v, "int%u:group=32:axis=%s:residual=%u", kivi_bits[b], kivi_axes[a][1],
                         kivi_resid[r]);
                st = fidelity_cell(rm[0], seed, prompt, steps, c, err);
            }
    pre_o = g->o;
    pre_o.pre_rope_keys = true;
    if (st == KVP_OK)
        st = kvp_ref_model_new(&fm, &pre_o, &rm[1], err);
    for (int a = 0; a < KVP_REF_KVQ_AXES && st == KVP_OK; a++)
        for (int b = 0; b < KVP_REF_KVQ_BITS && st == KVP_OK; b++)
            for (int oi = 0; oi < KVP_REF_KVQ_OUTL && st == KVP_OK; oi++)
                for (int ro = 0; ro < KVP_REF_KVQ_ROPE && st == KVP_OK; ro++) {
                    struct kvp_ref_fidelity_cell *c = &g->kvq[a][b][oi][ro];
                    snprintf(c->k, sizeof c->k, "int%u:group=32:axis=%s%s", kvq_bits[b], kvq_axes[a],
                             oi ? ":outliers=0.01" : "");
                    snprintf(c->v, sizeof c->v, "int%u:group=32", kvq_bits[b]);
                    st = fidelity_cell(rm[ro], seed, prompt, steps, c, err);
                }
    kvp_ref_model_free(rm[0]);
    kvp_ref_model_free(rm[1]);
    if (st == KVP_OK)
        fidelity_claims(g);
    return st;
}

/* ---- validation ------------------------------------------------------------- */

/* Decode (or fill) every sequence of c to T tokens, the sequences taking
 * turns by chunks of DRIVE_CHUNK tokens (kvp_ref_prefill reads the cache
 * once per chunk); the dynamic policy's turns are single tokens when there
 * are several sequences, as its predicted peak assumes. */
#define DRIVE_CHUNK 32
static enum kvp_status drive(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, uint64_t T, uint64_t batch,
                             bool compute, enum kvp_ref_policy policy, struct kvp_error *err)
{
    enum kvp_status st = KVP_OK;
    uint64_t chunk = policy == KVP_REF_DYNAMIC && batch > 1 ? 1 : DRIVE_CHUNK;
    uint32_t tok[DRIVE_CHUNK];
    for (uint64_t t = 0; t < T && st == KVP_OK; t += chunk)
        for (uint32_t b = 0; b < batch && st == KVP_OK; b++) {
            uint64_t n = T - t < chunk ? T - t : chunk;
            for (uint64_t i = 0; i < n && !compute && st == KVP_OK; i++)
                st = kvp_ref_fill(rm, c, b, err);
            for (uint64_t i = 0; i < n && compute; i++)
                tok[i] = (uint32_t)(((t + i) * 2654435761u + b) % kvp_ref_vocab(rm));
            if (compute)
                st = kvp_ref_prefill(rm, c, b, tok, n, NULL, err);
        }
    return st;
}

/* out's verdicts from its counts: every figure equal to the claim, every
 * allocated byte written (paged: a sequence's last block may be partly
 * empty, so at least the held tokens' bytes), the resident memory within
 * its tolerance. */
static void judge(const struct kvp_ref_claim *claim, enum kvp_ref_policy policy, struct kvp_ref_check *out)
{
    const struct kvp_ref_alloc *a = &out->a;
    out->match = a->cur[KVP_REF_K] == claim->k && a->cur[KVP_REF_V] == claim->v &&
                 a->cur[KVP_REF_STATE] == claim->state && a->cur_total == claim->total && a->peak_total == claim->peak;
    for (int t = 0; t < KVP_REF_TAG_COUNT; t++)
        out->match = out->match && out->written[t] <= a->cur[t] &&
                     out->written[t] >= (policy == KVP_REF_PAGED ? claim->held[t] : a->cur[t]);
    /* dynamic: freed copies stay in malloc's heap, so only the lower bound holds */
    uint64_t hi = policy == KVP_REF_DYNAMIC ? UINT64_MAX : out->rss_expected + out->tolerance;
    uint64_t lo = out->rss_expected > out->tolerance ? out->rss_expected - out->tolerance : 0;
    out->rss_ok = out->rss_delta >= lo && out->rss_delta <= hi;
}

/* A twin cache filled with 0x5A mirrors the cache (0xA5): every row goes
 * through the same codecs into both, and the two are compared for the bytes
 * the codecs wrote (kvp_ref_cache_written); the first cache's counts are
 * what is reported, and the resident memory after the run against both
 * caches' bytes. */
enum kvp_status kvp_ref_validate(const struct kvp_ref_model *rm, const struct kvp_ref_cache_opts *co,
                                 bool compute, const struct kvp_ref_claim *claim, struct kvp_ref_check *out,
                                 struct kvp_error *err)
{
    struct kvp_ref_cache *c = NULL, *c2 = NULL;
    struct kvp_ref_alloc a2 = {.canary = 0x5A};
    enum kvp_status st;

    memset(out, 0, sizeof *out);
    out->a.canary = 0xA5;
    uint64_t before = kvp_ref_rss_bytes(), after;
    if ((st = kvp_ref_cache_new_twin(rm, co, &out->a, &a2, &c, &c2, err)) != KVP_OK ||
        (st = drive(rm, c, co->context, co->batch, compute, co->policy, err)) ||
        (st = kvp_ref_cache_written(c, c2, out->written, err))) {
        kvp_ref_cache_free(c);
        kvp_ref_cache_free(c2);
        return st;
    }
    /* static allocates (and touches) every byte up front, the others as
     * they go: the resident memory is read now, the decoder's scratch
     * freed, against both caches' bytes */
    kvp_ref_cache_trim(c);
    after = kvp_ref_rss_bytes();
    out->rss_expected = out->a.cur_total + a2.cur_total;
    uint64_t pages = out->a.live + a2.live;
    struct kvp_ref_alloc live = out->a; /* the counts while the cache is alive */
    kvp_ref_cache_free(c);
    kvp_ref_cache_free(c2);
    if (out->a.cur_total != 0 || a2.cur_total != 0) /* every byte must come back */
        return kvp_fail(err, KVP_ERR_USAGE, "validate: %llu cache bytes were not freed",
                        (unsigned long long)(out->a.cur_total + a2.cur_total));
    out->a = live;
    out->rss_delta = after > before ? after - before : 0;
    /* malloc rounds each live allocation to pages (and keeps freed heap
     * pages): allow a page per live allocation plus 1 MiB of heap slack */
    out->tolerance = (pages + 1) * kvp_ref_page_bytes() + (1u << 20);
    judge(claim, co->policy, out);
    return KVP_OK;
}

uint32_t kvp_ref_sweep_points(const struct kvp_model *m, uint32_t block, uint64_t T, uint64_t *pts, uint32_t max)
{
    uint32_t n = 0;
#define ADD(x) do { uint64_t x_ = (x); if (x_ >= 1 && x_ <= T && n < max) pts[n++] = x_; } while (0)
    ADD(1);
    for (uint32_t i = 0; i < m->n_specs; i++)
        if (m->specs[i].window) {
            ADD(m->specs[i].window - 1);
            ADD(m->specs[i].window);
            ADD(m->specs[i].window + 1);
        }
    if (block) {
        ADD(block - 1);
        ADD(block);
        ADD(block + 1);
    }
    for (uint64_t p = 2; p < T; p *= 2)
        ADD(p);
    ADD(T);
#undef ADD
    for (uint32_t i = 1; i < n; i++) /* sort, unique */
        for (uint32_t j = i; j > 0 && pts[j] < pts[j - 1]; j--) {
            uint64_t t = pts[j]; pts[j] = pts[j - 1]; pts[j - 1] = t;
        }
    uint32_t u = 0;
    for (uint32_t i = 0; i < n; i++)
        if (u == 0 || pts[i] != pts[u - 1])
            pts[u++] = pts[i];
    return u;
}

/* ---- time ------------------------------------------------------------------- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum kvp_status kvp_ref_time_step(const struct kvp_ref_model *rm, uint64_t n, double *cached_s,
                                  double *recompute_s, struct kvp_error *err)
{
    struct kvp_ref_alloc a = {0};
    struct kvp_ref_cache *c = NULL;
    struct kvp_ref_cache_opts o = {.policy = KVP_REF_STATIC, .context = n + 1, .batch = 1,
                                   .k = kvp_format_plain(KVP_DTYPE_F32), .v = kvp_format_plain(KVP_DTYPE_F32)};
    uint32_t *tok = malloc((n + 1) * sizeof *tok);
    float *logits = malloc(kvp_ref_vocab(rm) * sizeof *logits);
    enum kvp_status st;
    double t0;
    if (!tok || !logits) {
        st = kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (uint64_t i = 0; i <= n; i++)
        tok[i] = (uint32_t)((i * 2654435761u) % kvp_ref_vocab(rm));
    if ((st = kvp_ref_cache_new(rm, &o, &a, &c, err)) != KVP_OK)
        goto out;
    for (uint64_t i = 0; i < n; i++)
        if ((st = kvp_ref_step(rm, c, 0, tok[i], NULL, err)) != KVP_OK)
            goto out;
    t0 = now();
    if ((st = kvp_ref_step(rm, c, 0, tok[n], logits, err)) != KVP_OK)
        goto out;
    *cached_s = now() - t0;
    t0 = now();
    st = kvp_ref_recompute(rm, tok, n + 1, logits, err);
    *recompute_s = now() - t0;
out:
    kvp_ref_cache_free(c);
    free(tok);
    free(logits);
    return st;
}
