/* weights_export.c -- the reference decoder's weights by llama.cpp tensor name (see ref.h).
 *
 * Nothing is drawn here: kvp_ref_weights_new builds the decoder's own model
 * (kvp_ref_model_new, the one generator; ref_internal.h) and
 * kvp_ref_weights_get points into its tensors by GGUF name. tests/oracle
 * compares the decoder's logits with llama.cpp's on a GGUF of these weights.
 *
 * The decoder stores every matrix row-major (out, in): row i holds the
 * weights of output i. GGUF's ne0 is the innermost dimension, so the same
 * bytes are the tensor ne = [in, out] that llama.cpp multiplies as W x.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

struct kvp_ref_weights {
    struct kvp_ref_model *rm; /* owned */
};

enum kvp_status kvp_ref_weights_new(const struct kvp_model *m, const struct kvp_ref_opts *o,
                                    struct kvp_ref_weights **out, struct kvp_error *err)
{
    struct kvp_ref_weights *w;
    enum kvp_status st;

    *out = NULL;
    for (uint32_t i = 0; i < m->n_specs; i++) { /* what arch llama holds */
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
    if ((st = kvp_ref_model_new(m, o, &w->rm, err)) != KVP_OK) {
        free(w);
        return st;
    }
    *out = w;
    return KVP_OK;
}

void kvp_ref_weights_free(struct kvp_ref_weights *w)
{
    if (!w)
        return;
    kvp_ref_model_free(w->rm);
    free(w);
}

/* A per-layer tensor of y by its short name; ne as GGUF has it. */
static const float *layer_get(const struct kvp_ref_model *rm, const struct ref_layer *y, const char *t, uint64_t ne[2])
{
    uint64_t H = rm->hidden, I = rm->inter;
    const float *p;
    if (strcmp(t, "attn_norm") == 0)
        p = y->attn_norm, ne[0] = H, ne[1] = 1;
    else if (strcmp(t, "attn_q") == 0)
        p = y->wq, ne[0] = H, ne[1] = (uint64_t)y->hq * y->dk;
    else if (strcmp(t, "attn_k") == 0)
        p = y->wk, ne[0] = H, ne[1] = (uint64_t)y->hkv * y->dk;
    else if (strcmp(t, "attn_v") == 0)
        p = y->wv, ne[0] = H, ne[1] = (uint64_t)y->hkv * y->dv;
    else if (strcmp(t, "attn_output") == 0)
        p = y->wo, ne[0] = (uint64_t)y->hq * y->dv, ne[1] = H;
    else if (strcmp(t, "ffn_norm") == 0)
        p = y->ffn_norm, ne[0] = H, ne[1] = 1;
    else if (strcmp(t, "ffn_gate") == 0) /* silu(gate) * up: decoder.c's w1 and w3 */
        p = y->w1, ne[0] = H, ne[1] = I;
    else if (strcmp(t, "ffn_up") == 0)
        p = y->w3, ne[0] = H, ne[1] = I;
    else if (strcmp(t, "ffn_down") == 0)
        p = y->w2, ne[0] = I, ne[1] = H;
    else
        return NULL;
    return p;
}

const float *kvp_ref_weights_get(const struct kvp_ref_weights *w, const char *name, uint64_t ne[2])
{
    const struct kvp_ref_model *rm = w->rm;
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
        p = rm->embed, e[0] = rm->hidden, e[1] = rm->vocab;
    else if (strcmp(t, "output_norm") == 0)
        p = rm->out_norm, e[0] = rm->hidden, e[1] = 1;
    else if (strcmp(t, "output") == 0)
        p = rm->lm_head, e[0] = rm->hidden, e[1] = rm->vocab;
    else if (sscanf(t, "blk.%u.%n", &il, &used) == 1 && used > 0 && il < rm->m.n_layers &&
             strncmp(t, "blk.", 4) == 0 && t[4] >= '0' && t[4] <= '9')
        p = layer_get(rm, &rm->w[rm->m.layer_spec[il]], t + used, e);
    if (p) {
        ne[0] = e[0];
        ne[1] = e[1];
    }
    return p;
}
