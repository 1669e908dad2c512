/* weights_export.c -- the reference decoder's weights by llama.cpp tensor name (see ref.h).
 *
 * decoder.c keeps its weights private, so this file regenerates them the
 * way kvp_ref_model_new does: the same shapes (decoder.c shape()), the same
 * PCG32 stream (seed, stream 1) drawn in the same order (embed, lm_head,
 * then per spec wk, wv, wq, wo, w1, w3, w2) with the same shaping calls
 * (measure.c's ref_shape_embed, ref_shape_attention). tests/oracle compares
 * the decoder's logits with llama.cpp's on a GGUF of these weights, so a
 * drift from decoder.c shows there as a logits mismatch.
 *
 * The decoder stores every matrix row-major (out, in): row i holds the
 * weights of output i. GGUF's ne0 is the innermost dimension, so the same
 * bytes are the tensor ne = [in, out] that llama.cpp multiplies as W x.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/num.h"
#include "ref_internal.h"

/* One spec's tensors, offsets in floats into the arena. */
struct spec_w {
    uint32_t hq, hkv, dk, dv;
    uint64_t attn_norm, wq, wk, wv, wo, ffn_norm, w1, w3, w2;
};

struct kvp_ref_weights {
    struct kvp_model m; /* layer_spec maps a layer to its spec's tensors */
    uint64_t hidden, inter, vocab;
    uint64_t embed, out_norm, lm_head;
    struct spec_w s[KVP_MAX_SPECS];
    float *p;
};

/* Uniform in [-a, a) with a = 1/sqrt(fan_in): decoder.c fill(). */
static void fill(float *p, uint64_t n, uint64_t fan_in, struct pcg *r)
{
    float a = 1.0f / sqrtf((float)(fan_in ? fan_in : 1));
    for (uint64_t i = 0; i < n; i++)
        p[i] = a * pcg_float(r);
}

static void ones(float *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        p[i] = 1.0f;
}

/* n floats more; false when the count overflows. */
static bool take(uint64_t *used, uint64_t n, uint64_t *at)
{
    *at = *used;
    return kvp_add(*used, n, used);
}

static bool mul(uint64_t a, uint64_t b, uint64_t c, uint64_t *out)
{
    return kvp_mul3(a, b, c, out);
}

/* Shapes (decoder.c shape()) and offsets; false on overflow. */
static bool layout(struct kvp_ref_weights *w, const struct kvp_ref_opts *o, uint64_t *used)
{
    uint64_t H = w->hidden, I = w->inter, n;
    *used = 0;
    if (!mul(w->vocab, H, 1, &n) || !take(used, n, &w->embed) || !take(used, H, &w->out_norm) ||
        !take(used, n, &w->lm_head))
        return false;
    for (uint32_t i = 0; i < w->m.n_specs; i++) {
        const struct kvp_layer_spec *s = &w->m.specs[i];
        struct spec_w *y = &w->s[i];
        uint32_t hkv = s->n_kv_heads ? s->n_kv_heads : 1, g = s->n_heads / hkv;
        if (g == 0)
            g = 1;
        if (o->q_per_kv && g > o->q_per_kv)
            g = o->q_per_kv;
        y->hkv = hkv;
        y->hq = hkv * g;
        y->dk = s->head_dim_k;
        y->dv = s->head_dim_v;
        if (!take(used, H, &y->attn_norm))
            return false;
        /* decoder.c carve(): wk, wv, then wq, wo */
        if (!mul(y->hkv, y->dk, H, &n) || !take(used, n, &y->wk) || !mul(y->hkv, y->dv, H, &n) ||
            !take(used, n, &y->wv) || !mul(y->hq, y->dk, H, &n) || !take(used, n, &y->wq) ||
            !mul(y->hq, y->dv, H, &n) || !take(used, n, &y->wo))
            return false;
        if (!take(used, H, &y->ffn_norm) || !mul(I, H, 1, &n) || !take(used, n, &y->w1) || !take(used, n, &y->w3) ||
            !take(used, n, &y->w2))
            return false;
    }
    return true;
}

/* decoder.c init_weights(), for the kinds accepted. */
static void draw(struct kvp_ref_weights *w, const struct kvp_ref_opts *o)
{
    struct pcg r;
    uint64_t H = w->hidden, I = w->inter;
    float *p = w->p;
    pcg_seed(&r, o->seed, 1);
    for (uint64_t i = 0; i < w->vocab * H; i++)
        p[w->embed + i] = pcg_float(&r);
    ones(p + w->out_norm, H);
    fill(p + w->lm_head, w->vocab * H, H, &r);
    ref_shape_embed(o, (uint32_t)H, (uint32_t)w->vocab, p + w->embed);
    for (uint32_t i = 0; i < w->m.n_specs; i++) {
        const struct spec_w *y = &w->s[i];
        ones(p + y->attn_norm, H);
        fill(p + y->wk, (uint64_t)y->hkv * y->dk * H, H, &r);
        fill(p + y->wv, (uint64_t)y->hkv * y->dv * H, H, &r);
        fill(p + y->wq, (uint64_t)y->hq * y->dk * H, H, &r);
        fill(p + y->wo, H * y->hq * y->dv, (uint64_t)y->hq * y->dv, &r);
        ref_shape_attention(o, (uint32_t)H, y->hq, y->hkv, y->dk, y->dv, p + y->wq, p + y->wk, p + y->wv);
        ones(p + y->ffn_norm, H);
        fill(p + y->w1, I * H, H, &r);
        fill(p + y->w3, I * H, H, &r);
        fill(p + y->w2, H * I, I, &r);
    }
}

enum kvp_status kvp_ref_weights_new(const struct kvp_model *m, const struct kvp_ref_opts *o,
                                    struct kvp_ref_weights **out, struct kvp_error *err)
{
    struct kvp_ref_weights *w;
    struct kvp_ref_opts ro = *o; /* as kvp_ref_model_new keeps it */
    uint64_t used;

    *out = NULL;
    if (ro.outlier_gain == 0)
        ro.outlier_gain = 20.0f;
    for (uint32_t i = 0; i < m->n_specs; i++) {
        const struct kvp_layer_spec *s = &m->specs[i];
        if (s->kind != KVP_LAYER_FULL && s->kind != KVP_LAYER_SLIDING && s->kind != KVP_LAYER_CHUNKED)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                            "cannot export the reference decoder's weights of '%s': a layer is '%s' "
                            "(full, sliding or chunked attention only)", m->name, kvp_layer_kind_name(s->kind));
        if (s->mlp == KVP_MLP_NONE)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                            "cannot export the reference decoder's weights of '%s': a layer has no MLP", m->name);
    }
    if (!(w = calloc(1, sizeof *w)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    w->m = *m;
    w->hidden = o->hidden ? o->hidden : m->hidden;
    w->inter = o->intermediate ? o->intermediate : (m->intermediate ? m->intermediate : m->expert_intermediate);
    w->vocab = o->vocab ? o->vocab : m->vocab;
    if (w->hidden == 0 || w->vocab == 0 || w->inter == 0) {
        free(w);
        return kvp_fail(err, KVP_ERR_RANGE, "model '%s' has no hidden, intermediate or vocab size", m->name);
    }
    if (!layout(w, o, &used) || used > SIZE_MAX / sizeof(float) || !(w->p = malloc((size_t)used * sizeof(float)))) {
        free(w);
        return kvp_fail(err, KVP_ERR_NOMEM, "cannot allocate the weights of model '%s' (scale it down)", m->name);
    }
    draw(w, &ro);
    *out = w;
    return KVP_OK;
}

void kvp_ref_weights_free(struct kvp_ref_weights *w)
{
    if (!w)
        return;
    free(w->p);
    free(w);
}

/* A per-layer tensor of y by its short name; ne as GGUF has it. */
static const float *layer_get(const struct kvp_ref_weights *w, const struct spec_w *y, const char *t, uint64_t ne[2])
{
    uint64_t H = w->hidden, I = w->inter, off;
    if (strcmp(t, "attn_norm") == 0)
        off = y->attn_norm, ne[0] = H, ne[1] = 1;
    else if (strcmp(t, "attn_q") == 0)
        off = y->wq, ne[0] = H, ne[1] = (uint64_t)y->hq * y->dk;
    else if (strcmp(t, "attn_k") == 0)
        off = y->wk, ne[0] = H, ne[1] = (uint64_t)y->hkv * y->dk;
    else if (strcmp(t, "attn_v") == 0)
        off = y->wv, ne[0] = H, ne[1] = (uint64_t)y->hkv * y->dv;
    else if (strcmp(t, "attn_output") == 0)
        off = y->wo, ne[0] = (uint64_t)y->hq * y->dv, ne[1] = H;
    else if (strcmp(t, "ffn_norm") == 0)
        off = y->ffn_norm, ne[0] = H, ne[1] = 1;
    else if (strcmp(t, "ffn_gate") == 0) /* silu(gate) * up: decoder.c's w1 and w3 */
        off = y->w1, ne[0] = H, ne[1] = I;
    else if (strcmp(t, "ffn_up") == 0)
        off = y->w3, ne[0] = H, ne[1] = I;
    else if (strcmp(t, "ffn_down") == 0)
        off = y->w2, ne[0] = I, ne[1] = H;
    else
        return NULL;
    return w->p + off;
}

const float *kvp_ref_weights_get(const struct kvp_ref_weights *w, const char *name, uint64_t ne[2])
{
    char t[64];
    size_t n = strlen(name);
    uint64_t e[2];
    const float *p = NULL;
    unsigned il;
    int used = 0;

    if (n >= sizeof t)
        return NULL;
    memcpy(t, name, n + 1);
    if (n > 7 && strcmp(t + n - 7, ".weight") == 0)
        t[n - 7] = '\0';
    if (strcmp(t, "token_embd") == 0)
        p = w->p + w->embed, e[0] = w->hidden, e[1] = w->vocab;
    else if (strcmp(t, "output_norm") == 0)
        p = w->p + w->out_norm, e[0] = w->hidden, e[1] = 1;
    else if (strcmp(t, "output") == 0)
        p = w->p + w->lm_head, e[0] = w->hidden, e[1] = w->vocab;
    else if (sscanf(t, "blk.%u.%n", &il, &used) == 1 && used > 0 && il < w->m.n_layers &&
             strncmp(t, "blk.", 4) == 0 && t[4] >= '0' && t[4] <= '9')
        p = layer_get(w, &w->s[w->m.layer_spec[il]], t + used, e);
    if (p) {
        ne[0] = e[0];
        ne[1] = e[1];
    }
    return p;
}
