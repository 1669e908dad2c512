/* cmd_validate.c -- `kvplan validate MODEL`: run the reference decoder and
 * compare the bytes it allocates with the engine's prediction. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "kvplan/kv.h"
#include "kvplan/num.h"
#include "kvplan/ref.h"
#include "validate_cuda.h"

static struct cli_opt opts[] = {
    {"context", "N", "tokens per sequence (default: 256, or the model's max context if smaller)", NULL},
    {"batch", "B", "sequences (default 1)", NULL},
    {"kv-dtype", "T", "K and V cache format (default: the model's dtype)", NULL},
    {"k-dtype", "T", "K cache format", NULL},
    {"v-dtype", "T", "V cache format", NULL},
    {"policy", "P", "static (default), dynamic or paged", NULL},
    {"block-size", "N", "tokens per block for --policy paged (default 16)", NULL},
    {"sweep", NULL, "also validate at 1, at each window and block boundary -1/0/+1, and powers of two", NULL},
    {"scale", "S",
     "auto (default: hidden 64, MLP 128, vocab 256, 2 query heads per KV head), none, "
     "or HIDDEN,MLP,VOCAB,QPERKV",
     NULL},
    {"threads", "N", "decoder threads (default: the online CPUs, at most 64; 1 = the calling thread only)", NULL},
    {"alloc-only", NULL, "fill the cache with synthetic entries through the same path instead of decoding", NULL},
    {"compute", NULL, "decode (the default; kept for scripts that ask for it)", NULL},
    {"fidelity", NULL,
     "quantization fidelity grid (KIVI) on a synthesized model: K/V axis x bits x residual; KVQuant: pre-RoPE keys, "
     "outliers",
     NULL},
    {"seed", "N", "--fidelity: seed of the synthesized model and prompt (default 1)", NULL},
    {"prompt", "N", "--fidelity: random prompt tokens (default 128)", NULL},
    {"steps", "N", "--fidelity: greedy steps measured (default 128)", NULL},
    {"format", "F", "text (default) or json", NULL},
    {"device", "D", "cpu (default) or cuda: run the decoder on the GPU (a make CUDA=1 build)", NULL},
    {"bench", NULL, "with --device cuda: decode tokens/s against the roofline (default --scale none)", NULL},
    {"gpu", "NAME", "with --bench: the catalog GPU of the roofline (default: from the device name)", NULL},
    {NULL, NULL, NULL, NULL},
};

static const struct cli_cmd cmd = {
    "validate", "MODEL [options]",
    "Run the reference decoder with every cache byte counted and compare with the\n"
    "engine's prediction (ideal profile): K, V, recurrent state, total, peak; and the\n"
    "process's resident memory. Exit 1 when a count differs.",
    opts,
};

/* One run at one context: the engine's claim, what the decoder counted. */
struct run {
    uint64_t context, batch;
    const char *mode; /* "compute" or "alloc-only" */
    struct kvp_ref_claim claim;
    struct kvp_ref_check chk;
};

/* The options of a run of the CPU decoder. */
struct vopts {
    struct kvp_ref_cache_opts co;
    struct kvp_ref_opts o;
    uint64_t context, batch;
    bool alloc_only, sweep;
    enum kvp_out fmt;
};

static int parse_scale(const char *s, struct kvp_ref_opts *o)
{
    unsigned h, i, v, q;
    if (!s || strcmp(s, "auto") == 0) {
        o->hidden = 64;
        o->intermediate = 128;
        o->vocab = 256;
        o->q_per_kv = 2;
    } else if (strcmp(s, "none") == 0) {
        /* the real sizes */
    } else if (sscanf(s, "%u,%u,%u,%u", &h, &i, &v, &q) == 4 && h && i && v && q) {
        o->hidden = h;
        o->intermediate = i;
        o->vocab = v;
        o->q_per_kv = q;
    } else {
        return cli_usage_error("--scale must be auto, none or HIDDEN,MLP,VOCAB,QPERKV (got '%s')", s);
    }
    return CLI_OK;
}

/* The engine's claim for a run of co (its context and batch): the ideal
 * profile's bytes, static preallocated for every step up to T (axis=channel:
 * more than the bytes at T, see kvp_cache_capacity); dynamic's peak; paged:
 * the held tokens' bytes too (no blocks). */
static int claim_of(const struct kvp_model *m, const struct kvp_ref_cache_opts *co, struct kvp_ref_claim *cl)
{
    struct kvp_kv_query q = {.context = co->context, .batch = co->batch, .k = co->k, .v = co->v,
                             .block = co->policy == KVP_REF_PAGED ? co->block : 0,
                             .preallocated = co->policy == KVP_REF_STATIC};
    struct kvp_kv_plan plan, held;
    struct kvp_error err = {0};

    if (kvp_kv_compute(m, &q, &plan, &err) != KVP_OK)
        return cli_error(&err);
    /* the peak: static and paged copy nothing */
    *cl = (struct kvp_ref_claim){.k = plan.k_bytes, .v = plan.v_bytes, .state = plan.state_bytes,
                                 .total = plan.total_bytes, .peak = plan.total_bytes};
    if (co->policy == KVP_REF_DYNAMIC && kvp_kv_dynamic_peak(m, &q, &cl->peak, &err) != KVP_OK)
        return cli_error(&err);
    if (co->policy == KVP_REF_PAGED) {
        q.block = 0;
        if (kvp_kv_compute(m, &q, &held, &err) != KVP_OK)
            return cli_error(&err);
        cl->held[KVP_REF_K] = held.k_bytes, cl->held[KVP_REF_V] = held.v_bytes;
        cl->held[KVP_REF_STATE] = held.state_bytes;
    }
    return CLI_OK;
}

/* ---- rendering a run ------------------------------------------------------ */

/* predicted, allocated and written: "ok" when the three agree (paged: the
 * written bytes are at least those of the held tokens, `held`) */
static void row(struct kvp_buf *b, const char *what, uint64_t pred, uint64_t meas, uint64_t wrote, uint64_t held)
{
    char p[40], q[40], w[40];
    kvp_buf_printf(b, "  %-7s %18s %18s %18s  %s\n", what, kvp_count_text(pred, p, sizeof p),
                   kvp_count_text(meas, q, sizeof q), kvp_count_text(wrote, w, sizeof w),
                   pred != meas ? "DIFFERS" : wrote > meas ? "OVERFLOW" : wrote < held ? "UNWRITTEN" : "ok");
}

static void text(struct kvp_buf *b, const struct run *r, enum kvp_ref_policy pol)
{
    char t[40], t2[40];
    const struct kvp_ref_claim *cl = &r->claim;
    const struct kvp_ref_check *k = &r->chk;
    uint64_t w = k->written[KVP_REF_K] + k->written[KVP_REF_V] + k->written[KVP_REF_STATE];
    kvp_buf_printf(b, "context %s x batch %llu, mode %s:\n", kvp_count_text(r->context, t, sizeof t),
                   (unsigned long long)r->batch, r->mode);
    kvp_buf_printf(b, "  %-7s %18s %18s %18s\n", "bytes", "predicted", "allocated", "written");
    uint64_t held[KVP_REF_TAG_COUNT + 1];
    for (int i = 0; i < KVP_REF_TAG_COUNT; i++)
        held[i] = pol == KVP_REF_PAGED ? cl->held[i] : k->a.cur[i];
    held[KVP_REF_TAG_COUNT] = held[KVP_REF_K] + held[KVP_REF_V] + held[KVP_REF_STATE];
    row(b, "K", cl->k, k->a.cur[KVP_REF_K], k->written[KVP_REF_K], held[KVP_REF_K]);
    row(b, "V", cl->v, k->a.cur[KVP_REF_V], k->written[KVP_REF_V], held[KVP_REF_V]);
    row(b, "state", cl->state, k->a.cur[KVP_REF_STATE], k->written[KVP_REF_STATE], held[KVP_REF_STATE]);
    row(b, "total", cl->total, k->a.cur_total, w, held[KVP_REF_TAG_COUNT]);
    if (pol == KVP_REF_PAGED)
        kvp_buf_printf(b, "  (paged: a sequence's last block may be partly empty; written must cover the held tokens' "
                          "%llu B)\n", (unsigned long long)held[KVP_REF_TAG_COUNT]);
    kvp_buf_printf(b, "  %-7s %18s %18s %18s  %s\n", "peak", kvp_count_text(cl->peak, t, sizeof t),
                   kvp_count_text(k->a.peak_total, t2, sizeof t2), "", cl->peak == k->a.peak_total ? "ok" : "DIFFERS");
    kvp_buf_printf(b, "  %-7s %18s %18s %18s  %s (%s %llu B: a page per live allocation + 1 MiB)\n", "rss",
                   kvp_count_text(k->rss_expected, t, sizeof t), kvp_count_text(k->rss_delta, t2, sizeof t2), "",
                   k->rss_ok ? "ok" : "OUTSIDE",
                   pol == KVP_REF_DYNAMIC ? "at least the cache's and its twin's bytes -"
                                          : "the cache's and its twin's bytes +-",
                   (unsigned long long)k->tolerance);
}

static void json_run(struct kvp_json *j, const struct run *r)
{
    const struct kvp_ref_claim *cl = &r->claim;
    const struct kvp_ref_check *k = &r->chk;
    kvp_json_begin(j, NULL, '{');
    kvp_json_u64(j, "context", r->context);
    kvp_json_u64(j, "batch", r->batch);
    kvp_json_str(j, "mode", r->mode);
    kvp_json_u64(j, "predicted_k_bytes", cl->k);
    kvp_json_u64(j, "measured_k_bytes", k->a.cur[KVP_REF_K]);
    kvp_json_u64(j, "predicted_v_bytes", cl->v);
    kvp_json_u64(j, "measured_v_bytes", k->a.cur[KVP_REF_V]);
    kvp_json_u64(j, "predicted_state_bytes", cl->state);
    kvp_json_u64(j, "measured_state_bytes", k->a.cur[KVP_REF_STATE]);
    kvp_json_u64(j, "written_k_bytes", k->written[KVP_REF_K]);
    kvp_json_u64(j, "written_v_bytes", k->written[KVP_REF_V]);
    kvp_json_u64(j, "written_state_bytes", k->written[KVP_REF_STATE]);
    kvp_json_u64(j, "predicted_bytes", cl->total);
    kvp_json_u64(j, "measured_bytes", k->a.cur_total);
    kvp_json_u64(j, "written_bytes", k->written[KVP_REF_K] + k->written[KVP_REF_V] + k->written[KVP_REF_STATE]);
    kvp_json_u64(j, "predicted_peak_bytes", cl->peak);
    kvp_json_u64(j, "peak_bytes", k->a.peak_total);
    kvp_json_u64(j, "rss_delta_bytes", k->rss_delta);
    kvp_json_u64(j, "rss_expected_bytes", k->rss_expected);
    kvp_json_u64(j, "rss_tolerance_bytes", k->tolerance);
    kvp_json_bool(j, "rss_ok", k->rss_ok);
    kvp_json_bool(j, "match", k->match);
    kvp_json_end(j, '}');
}

/* What every run shares: the model, the policy, the formats, the scale. */
static void header(struct kvp_buf *b, struct kvp_json *j, const struct kvp_model *m, const struct kvp_model *shape,
                   const struct vopts *v)
{
    char kname[64], vname[64], sum[160];
    const struct kvp_ref_cache_opts *co = &v->co;
    kvp_format_name(&co->k, kname, sizeof kname);
    kvp_format_name(&co->v, vname, sizeof vname);
    if (v->fmt == KVP_OUT_JSON) {
        kvp_json_init(j, b);
        kvp_json_begin(j, NULL, '{');
        kvp_json_str(j, "model", m->name);
        kvp_json_str(j, "policy", kvp_ref_policy_name(co->policy));
        if (co->policy == KVP_REF_PAGED)
            kvp_json_u64(j, "block_size", co->block);
        kvp_json_str(j, "k_dtype", kname);
        kvp_json_str(j, "v_dtype", vname);
        kvp_json_u64(j, "scale_hidden", shape->hidden);
        kvp_json_u64(j, "scale_intermediate", shape->intermediate);
        kvp_json_u64(j, "scale_vocab", shape->vocab);
        kvp_json_begin(j, "runs", '[');
        return;
    }
    kvp_buf_printf(b, "%s: %s\n", m->name, kvp_model_layer_summary(m, sum, sizeof sum));
    if (co->policy == KVP_REF_PAGED)
        kvp_buf_printf(b, "policy paged (block %u), ", co->block);
    else
        kvp_buf_printf(b, "policy %s, ", kvp_ref_policy_name(co->policy));
    kvp_buf_printf(b, "K %s, V %s; scale: hidden %u, MLP %u, vocab %u (KV geometry as the model)\n\n", kname, vname,
                   shape->hidden, shape->intermediate, shape->vocab);
}

/* The verdict over every run. */
static void footer(struct kvp_buf *b, struct kvp_json *j, const struct vopts *v, bool all, bool rss_all)
{
    if (v->fmt == KVP_OUT_JSON) {
        kvp_json_end(j, ']');
        kvp_json_bool(j, "match", all);
        kvp_json_bool(j, "rss_ok", rss_all);
        kvp_json_end(j, '}');
        return;
    }
    kvp_buf_printf(b, "\n%s\n", !all ? "MISMATCH: a counted figure differs from the prediction or was not written"
                               : v->co.policy == KVP_REF_PAGED ? "match: every counted byte equals the prediction\n"
                                                                 "written: every held token's bytes (a last block may "
                                                                 "be partly empty)"
                                                               : "match: every counted byte equals the prediction\n"
                                                                 "written: every allocated byte (predicted = "
                                                                 "allocated = written)");
}

/* ---- --fidelity: KIVI's experiment (kvp_ref_fidelity_grid) ---------------- */

static void json_cell(struct kvp_json *j, const struct kvp_ref_fidelity_cell *c, int pre_rope)
{
    kvp_json_begin(j, NULL, '{');
    kvp_json_str(j, "k", c->k);
    kvp_json_str(j, "v", c->v);
    if (pre_rope >= 0)
        kvp_json_bool(j, "pre_rope_keys", pre_rope == 1);
    kvp_json_double(j, "key_err", c->f.key_err);
    kvp_json_double(j, "value_err", c->f.value_err);
    kvp_json_double(j, "score_err", c->f.score_err);
    kvp_json_double(j, "output_err", c->f.output_err);
    kvp_json_double(j, "agreement", c->f.agreement);
    kvp_json_end(j, '}');
}

static void fidelity_json(struct kvp_buf *b, const struct kvp_ref_fidelity_grid *g, uint64_t seed, uint64_t prompt,
                          uint64_t steps)
{
    const struct kvp_ref_fidelity *f0 = &g->kivi[0][0][0].f; /* the fp32 run's statistics are the same in every cell */
    const struct kvp_ref_opts *o = &g->o;
    struct kvp_json j;
    char desc[512];
    snprintf(desc, sizeof desc,
             "kivi-synthetic: 2 full layers, 8 query / 4 KV heads x 64, hidden 64, vocab 256; keys with %u outlier "
             "channels x%g; %u heavy-hitter tokens whose scores every query raises by ~%g; %u loud tokens with ~%gx "
             "larger values",
             o->key_outliers, (double)o->outlier_gain, o->heavy_tokens, (double)o->heavy_gain, o->loud_tokens,
             (double)o->value_gain);
    kvp_json_init(&j, b);
    kvp_json_begin(&j, NULL, '{');
    kvp_json_str(&j, "model", desc);
    kvp_json_bool(&j, "synthesized", true);
    kvp_json_u64(&j, "seed", seed);
    kvp_json_u64(&j, "prompt", prompt);
    kvp_json_u64(&j, "steps", steps);
    kvp_json_u64(&j, "group", 32);
    kvp_json_double(&j, "attention_below_1_over_T", f0->sparsity);
    kvp_json_double(&j, "attention_top10_mass", f0->top_mass);
    kvp_json_double(&j, "value_top10_energy", f0->value_top);
    kvp_json_bool(&j, "keys_per_channel_best", g->keys_per_channel_best);
    kvp_json_bool(&j, "values_per_token_best", g->values_per_token_best);
    kvp_json_bool(&j, "value_err_points_wrong_way", g->value_err_wrong_way);
    kvp_json_bool(&j, "residual_helps_channel_keys", g->residual_helps);
    kvp_json_bool(&j, "pre_rope_helps_channel_keys", g->pre_rope_helps);
    kvp_json_bool(&j, "outliers_lower_key_err", g->outliers_help);
    kvp_json_begin(&j, "kvquant", '[');
    for (int a = 0; a < KVP_REF_KVQ_AXES; a++)
        for (int bi = 0; bi < KVP_REF_KVQ_BITS; bi++)
            for (int oi = 0; oi < KVP_REF_KVQ_OUTL; oi++)
                for (int ro = 0; ro < KVP_REF_KVQ_ROPE; ro++)
                    json_cell(&j, &g->kvq[a][bi][oi][ro], ro);
    kvp_json_end(&j, ']');
    kvp_json_begin(&j, "results", '[');
    for (int a = 0; a < KVP_REF_KIVI_AXES; a++)
        for (int bi = 0; bi < KVP_REF_KIVI_BITS; bi++)
            for (int ri = 0; ri < KVP_REF_KIVI_RESID; ri++)
                json_cell(&j, &g->kivi[a][bi][ri], -1);
    kvp_json_end(&j, ']');
    kvp_json_end(&j, '}');
}

/* The model's premises and the KIVI table. */
static void kivi_text(struct kvp_buf *b, const struct kvp_ref_fidelity_grid *g, uint64_t seed, uint64_t prompt,
                      uint64_t steps)
{
    const struct kvp_ref_fidelity *f0 = &g->kivi[0][0][0].f;
    const struct kvp_ref_opts *o = &g->o;
    kvp_buf_printf(b,
                   "quantization fidelity (KIVI's experiment) on a SYNTHESIZED model, seed %llu:\n"
                   "  kivi-synthetic: 2 full layers, 8 query / 4 KV heads x 64, hidden 64, vocab 256\n"
                   "  keys: %u outlier channels x%g in every K head\n"
                   "  attention: %u heavy-hitter tokens whose scores every query raises by ~%g; on the fp32\n"
                   "    cache %.1f%% of attention weights are below 1/T and the top 10%% of tokens hold %.1f%% of\n"
                   "    the mass (KIVI measures 84.3%% near zero on real models)\n"
                   "  values: %u loud tokens with ~%gx larger values; the 10%% largest rows hold %.1f%% of the\n"
                   "    value energy\n"
                   "prompt %llu random tokens, then %llu greedy steps (the fp32 token is fed to both); group 32;\n"
                   "errors relative (Frobenius) on layer 0; agree = greedy tokens equal to the fp32 cache's\n\n",
                   (unsigned long long)seed, o->key_outliers, (double)o->outlier_gain, o->heavy_tokens,
                   (double)o->heavy_gain, 100 * f0->sparsity, 100 * f0->top_mass, o->loud_tokens,
                   (double)o->value_gain, 100 * f0->value_top, (unsigned long long)prompt, (unsigned long long)steps);
    kvp_buf_printf(b, "%-8s %-8s %4s %5s %9s %9s %9s %9s %6s\n", "K axis", "V axis", "bits", "resid", "key err",
                   "val err", "score err", "out err", "agree");
    for (int a = 0; a < KVP_REF_KIVI_AXES; a++)
        for (int bi = 0; bi < KVP_REF_KIVI_BITS; bi++)
            for (int ri = 0; ri < KVP_REF_KIVI_RESID; ri++) {
                const struct kvp_ref_fidelity *f = &g->kivi[a][bi][ri].f;
                kvp_buf_printf(b, "%-8s %-8s %4u %5u %9.4f %9.4f %9.4f %9.4f %6.3f\n", g->kivi_axes[a][0],
                               g->kivi_axes[a][1], g->kivi_bits[bi], g->kivi_resid[ri], f->key_err, f->value_err,
                               f->score_err, f->output_err, f->agreement);
            }
}

/* Field x of the KIVI cells (axes a, bits 2/4/8, residual r): "%.4f/%.4f/%.4f". */
#define KIVI3(g, a, r, x) (g)->kivi[a][0][r].f.x, (g)->kivi[a][1][r].f.x, (g)->kivi[a][2][r].f.x

/* KIVI's claims, each with the figures it compares. */
static void kivi_claims_text(struct kvp_buf *b, const struct kvp_ref_fidelity_grid *g)
{
    kvp_buf_printf(b, "\nKIVI's claims, 2 / 4 / 8 bits, no residual unless named:\n");
    kvp_buf_printf(b, "keys per-channel < per-token on score error (V per-token): %s (%.4f/%.4f/%.4f vs "
                      "%.4f/%.4f/%.4f)\n",
                   g->keys_per_channel_best ? "yes" : "NO", KIVI3(g, 0, 0, score_err), KIVI3(g, 1, 0, score_err));
    kvp_buf_printf(b, "values per-token < per-channel on output error (K per-channel): %s (%.4f/%.4f/%.4f vs "
                      "%.4f/%.4f/%.4f)\n",
                   g->values_per_token_best ? "yes" : "NO", KIVI3(g, 0, 0, output_err), KIVI3(g, 2, 0, output_err));
    kvp_buf_printf(b, "value reconstruction error points the wrong way (per-channel < per-token at 2 bits): %s "
                      "(%.4f/%.4f/%.4f vs %.4f/%.4f/%.4f)\n",
                   g->value_err_wrong_way ? "yes" : "NO", KIVI3(g, 2, 0, value_err), KIVI3(g, 0, 0, value_err));
    kvp_buf_printf(b, "residual 128 lowers per-channel keys' score error: %s (%.4f/%.4f/%.4f vs %.4f/%.4f/%.4f); "
                      "residual 32 = 0 for axis=channel,\n  which always keeps the open group's T mod 32 tokens "
                      "unquantized\n",
                   g->residual_helps ? "yes" : "NO", KIVI3(g, 0, 2, score_err), KIVI3(g, 0, 0, score_err));
}

/* The KVQuant table and its claims. */
static void kvquant_text(struct kvp_buf *b, const struct kvp_ref_fidelity_grid *g)
{
    kvp_buf_printf(b, "\nKVQuant: keys cached before RoPE (rotated after dequantizing; the same bytes) and\n"
                      "dense-and-sparse outliers (1%% of each token's values kept as fp32 + int32 index);\n"
                      "V int<bits>:group=32 per-token\n");
    kvp_buf_printf(b, "%-8s %4s %8s %5s %9s %9s %9s %6s\n", "K axis", "bits", "outliers", "RoPE", "key err",
                   "score err", "out err", "agree");
    for (int a = 0; a < KVP_REF_KVQ_AXES; a++)
        for (int bi = 0; bi < KVP_REF_KVQ_BITS; bi++)
            for (int oi = 0; oi < KVP_REF_KVQ_OUTL; oi++)
                for (int ro = 0; ro < KVP_REF_KVQ_ROPE; ro++) {
                    const struct kvp_ref_fidelity *f = &g->kvq[a][bi][oi][ro].f;
                    kvp_buf_printf(b, "%-8s %4u %8s %5s %9.4f %9.4f %9.4f %6.3f\n", g->kvq_axes[a], g->kvq_bits[bi],
                                   oi ? "0.01" : "0", ro ? "pre" : "post", f->key_err, f->score_err, f->output_err,
                                   f->agreement);
                }
    const struct kvp_ref_fidelity_cell(*q)[KVP_REF_KVQ_BITS][KVP_REF_KVQ_OUTL][KVP_REF_KVQ_ROPE] = g->kvq;
    kvp_buf_printf(b, "pre-RoPE lowers per-channel keys' score error (2/4 bits): %s (%.4f/%.4f vs %.4f/%.4f)\n",
                   g->pre_rope_helps ? "yes" : "NO", q[0][0][0][1].f.score_err, q[0][1][0][1].f.score_err,
                   q[0][0][0][0].f.score_err, q[0][1][0][0].f.score_err);
    kvp_buf_printf(b, "outliers=0.01 lowers key error (per-channel, per-token; 2/4 bits; post-RoPE): %s "
                      "(%.4f/%.4f, %.4f/%.4f vs %.4f/%.4f, %.4f/%.4f)\n",
                   g->outliers_help ? "yes" : "NO", q[0][0][1][0].f.key_err, q[0][1][1][0].f.key_err,
                   q[1][0][1][0].f.key_err, q[1][1][1][0].f.key_err, q[0][0][0][0].f.key_err,
                   q[0][1][0][0].f.key_err, q[1][0][0][0].f.key_err, q[1][1][0][0].f.key_err);
}

static int fidelity(enum kvp_out fmt, uint64_t seed, uint64_t prompt, uint64_t steps)
{
    struct kvp_ref_fidelity_grid g; /* 52 cells, ~10 KiB */
    struct kvp_error err = {0};
    struct kvp_buf b = {0};
    int rc;
    if (kvp_ref_fidelity_grid(seed, prompt, steps, &g, &err) != KVP_OK)
        return cli_error(&err);
    if (fmt == KVP_OUT_JSON) {
        fidelity_json(&b, &g, seed, prompt, steps);
    } else {
        kivi_text(&b, &g, seed, prompt, steps);
        kivi_claims_text(&b, &g);
        kvquant_text(&b, &g);
    }
    rc = cli_write(&b);
    kvp_buf_release(&b);
    return rc;
}

static int fidelity_opts(enum kvp_out fmt)
{
    uint64_t seed = 1, prompt = 128, steps = 128;
    int rc;
    if ((rc = cli_count(&cmd, "seed", 0, &seed)) || (rc = cli_count(&cmd, "prompt", 1, &prompt)) ||
        (rc = cli_count(&cmd, "steps", 0, &steps)))
        return rc;
    if (prompt + steps > 4096)
        return cli_usage_error("--prompt plus --steps must be at most 4096 (got %llu)",
                               (unsigned long long)(prompt + steps));
    return fidelity(fmt, seed, prompt, steps);
}

/* ---- the command ----------------------------------------------------------- */

/* The options that need the model: context (at most its max by default),
 * batch, block, formats (its dtype by default), threads. */
static int run_opts(const struct kvp_model *m, struct vopts *v)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t block = 16, threads = cpus < 1 ? 1 : cpus > KVP_REF_MAX_THREADS ? KVP_REF_MAX_THREADS : (uint64_t)cpus;
    int rc;
    v->context = m->max_context < 256 ? m->max_context : 256;
    v->batch = 1;
    v->co.k = v->co.v = kvp_format_plain(m->dtype);
    if ((rc = cli_count(&cmd, "context", 1, &v->context)) || (rc = cli_count(&cmd, "batch", 1, &v->batch)) ||
        (rc = cli_count(&cmd, "block-size", 1, &block)) || (rc = cli_format(&cmd, "kv-dtype", &v->co.k)) ||
        (rc = cli_format(&cmd, "kv-dtype", &v->co.v)) || (rc = cli_format(&cmd, "k-dtype", &v->co.k)) ||
        (rc = cli_format(&cmd, "v-dtype", &v->co.v)))
        return rc;
    if (v->batch > 4096 || block > (1u << 20))
        return cli_usage_error("--batch must be at most 4096 and --block-size at most 1M");
    if ((rc = cli_count(&cmd, "threads", 1, &threads)))
        return rc;
    if (threads > KVP_REF_MAX_THREADS)
        return cli_usage_error("--threads must be at most %d (got %llu)", KVP_REF_MAX_THREADS,
                               (unsigned long long)threads);
    v->o.threads = (uint32_t)threads;
    v->co.block = (uint32_t)block;
    v->co.batch = (uint32_t)v->batch;
    return CLI_OK;
}

/* --device cuda (validate_cuda.c): *done when it ran there, or was refused. */
static int cuda_path(const struct kvp_model *m, const struct vopts *v, bool *done)
{
    struct cli_cuda_args ca = {cli_opt(&cmd, "device"), cli_opt(&cmd, "bench") != NULL, cli_opt(&cmd, "gpu"),
                               cli_opt(&cmd, "sweep") || cli_opt(&cmd, "alloc-only") || cli_opt(&cmd, "compute"),
                               cli_opt(&cmd, "scale") != NULL};
    int rc = cli_cuda_check(&ca, m, &v->co, done);
    if (rc != CLI_OK) {
        *done = true;
    } else if (*done) {
#ifdef KVP_CUDA
        rc = cli_validate_cuda(&ca, m, v->o, &v->co, v->context, v->batch, v->fmt);
#else
        rc = cli_usage_error("built without CUDA: rebuild with make CUDA=1");
#endif
    }
    return rc;
}

/* The CPU decoder at each context (one, or the sweep's), each run's claim
 * asked of the engine, measured by the decoder, rendered. */
static int validate_cpu(const struct kvp_model *m, struct vopts *v)
{
    struct kvp_ref_model *rm = NULL;
    struct kvp_error err = {0};
    struct kvp_buf b = {0};
    struct kvp_json j;
    uint64_t pts[64] = {v->context};
    uint32_t npts = 1;
    bool all = true, rss_all = true;
    int rc = CLI_OK;

    if (kvp_ref_model_new(m, &v->o, &rm, &err) != KVP_OK)
        return cli_error(&err);
    if (v->sweep)
        npts = kvp_ref_sweep_points(m, v->co.policy == KVP_REF_PAGED ? v->co.block : 0, v->context, pts, 64);
    header(&b, &j, m, kvp_ref_model_shape(rm), v);
    for (uint32_t i = 0; i < npts && rc == CLI_OK; i++) {
        struct run r = {.context = pts[i], .batch = v->batch, .mode = v->alloc_only ? "alloc-only" : "compute"};
        v->co.context = pts[i];
        if ((rc = claim_of(m, &v->co, &r.claim)) != CLI_OK)
            break;
        if (kvp_ref_validate(rm, &v->co, !v->alloc_only, &r.claim, &r.chk, &err) != KVP_OK) {
            rc = cli_error(&err);
            break;
        }
        all = all && r.chk.match;
        rss_all = rss_all && r.chk.rss_ok;
        if (v->fmt == KVP_OUT_JSON)
            json_run(&j, &r);
        else
            text(&b, &r, v->co.policy);
    }
    if (rc == CLI_OK) {
        footer(&b, &j, v, all, rss_all);
        rc = cli_write(&b);
    }
    if (rc == CLI_OK && !all)
        rc = CLI_FAIL;
    kvp_buf_release(&b);
    kvp_ref_model_free(rm);
    return rc;
}

int cmd_validate(int argc, char **argv)
{
    const char *pos[1], *pname;
    int npos, rc;
    struct kvp_model *m = NULL;
    struct vopts v = {.co = {.policy = KVP_REF_STATIC, .block = 16}, .o = {.seed = 1}, .fmt = KVP_OUT_TEXT};
    bool done;

    if ((rc = cli_parse(&cmd, argc, argv, pos, 1, &npos)) != CLI_OK || (rc = cli_out(&cmd, &v.fmt, false)) != CLI_OK)
        return rc;
    if (v.fmt != KVP_OUT_TEXT && v.fmt != KVP_OUT_JSON)
        return cli_usage_error("validate: --format must be text or json");
    if (cli_opt(&cmd, "fidelity"))
        return fidelity_opts(v.fmt);
    if (npos != 1)
        return cli_usage_error("validate: which model? (usage: kvplan validate MODEL [options])");
    if (cli_opt(&cmd, "alloc-only") && cli_opt(&cmd, "compute"))
        return cli_usage_error("validate: --alloc-only and --compute exclude each other");
    if ((pname = cli_opt(&cmd, "policy")) && !kvp_ref_policy_from_name(pname, &v.co.policy))
        return cli_usage_error("--policy must be static, dynamic or paged (got '%s')", pname);
    if ((rc = parse_scale(cli_opt(&cmd, "scale"), &v.o)) != CLI_OK || (rc = cli_model(pos[0], &m)) != CLI_OK)
        return rc;
    v.alloc_only = cli_opt(&cmd, "alloc-only") != NULL;
    v.sweep = cli_opt(&cmd, "sweep") != NULL;
    if ((rc = run_opts(m, &v)) == CLI_OK && (rc = cuda_path(m, &v, &done)) == CLI_OK && !done)
        rc = validate_cpu(m, &v);
    kvp_model_free(m);
    return rc;
}
