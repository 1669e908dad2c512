/* measure.c -- what the reference decoder measures besides bytes: resident
 * memory, quantization fidelity (KIVI's experiment) and decode time. */
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
            kvp_ref_rope(K + j * nk, hkv, dk, dk, j);
            kvp_ref_rope(Kq + j * nk, hkv, dk, dk, j);
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
        kvp_ref_softmax(sa, n);
        kvp_ref_softmax(sb, n);
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
    buf = malloc((2 * n * (nk + nv) + (uint64_t)sp->n_heads * sp->head_dim_k + 3 * n + 2 * sp->head_dim_v) * sizeof *buf);
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
