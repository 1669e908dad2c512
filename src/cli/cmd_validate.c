/* cmd_validate.c -- `kvplan validate MODEL`: run the reference decoder and
 * compare the bytes it allocates with the engine's prediction. */
#include <stdio.h>
#include <stdlib.h>
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
    {"scale", "S", "auto (default: hidden 64, MLP 128, vocab 256, 2 query heads per KV head), none, "
                   "or HIDDEN,MLP,VOCAB,QPERKV", NULL},
    {"threads", "N", "decoder threads (default: the online CPUs, at most 64; 1 = the calling thread only)", NULL},
    {"alloc-only", NULL, "fill the cache with synthetic entries through the same path instead of decoding", NULL},
    {"compute", NULL, "decode (the default; kept for scripts that ask for it)", NULL},
    {"fidelity", NULL, "quantization fidelity grid (KIVI) on a synthesized model: K/V axis x bits x residual; KVQuant: pre-RoPE keys, outliers", NULL},
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

struct run {
    uint64_t context, batch;
    const char *mode;       /* "compute" or "alloc-only" */
    struct kvp_kv_plan plan;
    uint64_t peak;          /* predicted: the dynamic policy's high-water mark, else total_bytes */
    struct kvp_ref_alloc a;
    uint64_t written[KVP_REF_TAG_COUNT]; /* bytes the codecs wrote (kvp_ref_cache_written) */
    uint64_t held[KVP_REF_TAG_COUNT];    /* paged: the engine's bytes of the held tokens (no blocks) */
    uint64_t rss_delta, tolerance;
    uint64_t rss_expected;  /* the cache's and its twin's bytes */
    bool match, rss_ok;
    double seconds;
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

/* One run at context T: predict, build, decode (or fill), measure. A twin
 * cache filled with 0x5A mirrors the cache (0xA5): every row goes through
 * the same codecs into both, and the two are compared for the bytes the
 * codecs wrote (kvp_ref_cache_written); the first cache's counts are what
 * is reported, and the resident memory after the run against both caches'
 * bytes. */
static int run_one(const struct kvp_model *m, const struct kvp_ref_model *rm, struct kvp_ref_cache_opts co,
                   bool alloc_only, struct run *r, struct kvp_error *err)
{
    struct kvp_kv_query q = {.context = r->context, .batch = r->batch, .k = co.k, .v = co.v,
                             .block = co.policy == KVP_REF_PAGED ? co.block : 0,
                             /* static preallocates for every step up to T (axis=channel: more
                              * than the bytes at T, see kvp_cache_capacity) */
                             .preallocated = co.policy == KVP_REF_STATIC};
    struct kvp_ref_cache *c = NULL, *c2 = NULL;
    struct kvp_ref_alloc a2 = {.canary = 0x5A};
    enum kvp_status st;

    if (kvp_kv_compute(m, &q, &r->plan, err) != KVP_OK)
        return cli_error(err);
    r->peak = r->plan.total_bytes; /* static and paged copy nothing */
    if (co.policy == KVP_REF_DYNAMIC && kvp_kv_dynamic_peak(m, &q, &r->peak, err) != KVP_OK)
        return cli_error(err);
    if (co.policy == KVP_REF_PAGED) {
        struct kvp_kv_plan held;
        q.block = 0;
        if (kvp_kv_compute(m, &q, &held, err) != KVP_OK)
            return cli_error(err);
        r->held[KVP_REF_K] = held.k_bytes, r->held[KVP_REF_V] = held.v_bytes, r->held[KVP_REF_STATE] = held.state_bytes;
    }
    r->mode = alloc_only ? "alloc-only" : "compute";
    co.context = r->context;
    co.batch = (uint32_t)r->batch;
    r->a = (struct kvp_ref_alloc){.canary = 0xA5};
    uint64_t before = kvp_ref_rss_bytes(), after;
    if ((st = kvp_ref_cache_new_twin(rm, &co, &r->a, &a2, &c, &c2, err)) != KVP_OK ||
        (st = drive(rm, c, r->context, r->batch, !alloc_only, co.policy, err)) || (st = kvp_ref_cache_written(c, c2, r->written, err)))
        goto out;
    /* static allocates (and touches) every byte up front, the others as
     * they go: the resident memory is read now, the decoder's scratch
     * freed, against both caches' bytes */
    kvp_ref_cache_trim(c);
    after = kvp_ref_rss_bytes();
    r->rss_expected = r->a.cur_total + a2.cur_total;
    uint64_t pages = r->a.live + a2.live;
    struct kvp_ref_alloc live = r->a; /* the counts while the cache is alive */
    kvp_ref_cache_free(c);
    kvp_ref_cache_free(c2);
    c = c2 = NULL;
    if (r->a.cur_total != 0 || a2.cur_total != 0) /* every byte must come back */
        return cli_usage_error("validate: %llu cache bytes were not freed",
                               (unsigned long long)(r->a.cur_total + a2.cur_total));
    r->a = live;
    r->rss_delta = after > before ? after - before : 0;
    /* malloc rounds each live allocation to pages (and keeps freed heap
     * pages): allow a page per live allocation plus 1 MiB of heap slack */
    r->tolerance = (pages + 1) * kvp_ref_page_bytes() + (1u << 20);
    r->match = r->a.cur[KVP_REF_K] == r->plan.k_bytes && r->a.cur[KVP_REF_V] == r->plan.v_bytes &&
               r->a.cur[KVP_REF_STATE] == r->plan.state_bytes && r->a.cur_total == r->plan.total_bytes &&
               r->a.peak_total == r->peak;
    /* every allocated byte written; paged: a sequence's last block may be
     * partly empty, so at least the held tokens' bytes */
    for (int t = 0; t < KVP_REF_TAG_COUNT; t++)
        r->match = r->match && r->written[t] <= r->a.cur[t] &&
                   r->written[t] >= (co.policy == KVP_REF_PAGED ? r->held[t] : r->a.cur[t]);
    /* dynamic: freed copies stay in malloc's heap, so only the lower bound holds */
    uint64_t hi = co.policy == KVP_REF_DYNAMIC ? UINT64_MAX : r->rss_expected + r->tolerance;
    uint64_t lo = r->rss_expected > r->tolerance ? r->rss_expected - r->tolerance : 0;
    r->rss_ok = r->rss_delta >= lo && r->rss_delta <= hi;
    return CLI_OK;
out:
    kvp_ref_cache_free(c);
    kvp_ref_cache_free(c2);
    return cli_error(err);
}

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
    uint64_t w = r->written[KVP_REF_K] + r->written[KVP_REF_V] + r->written[KVP_REF_STATE];
    kvp_buf_printf(b, "context %s x batch %llu, mode %s:\n", kvp_count_text(r->context, t, sizeof t),
                   (unsigned long long)r->batch, r->mode);
    kvp_buf_printf(b, "  %-7s %18s %18s %18s\n", "bytes", "predicted", "allocated", "written");
    uint64_t held[KVP_REF_TAG_COUNT + 1];
    for (int i = 0; i < KVP_REF_TAG_COUNT; i++)
        held[i] = pol == KVP_REF_PAGED ? r->held[i] : r->a.cur[i];
    held[KVP_REF_TAG_COUNT] = held[KVP_REF_K] + held[KVP_REF_V] + held[KVP_REF_STATE];
    row(b, "K", r->plan.k_bytes, r->a.cur[KVP_REF_K], r->written[KVP_REF_K], held[KVP_REF_K]);
    row(b, "V", r->plan.v_bytes, r->a.cur[KVP_REF_V], r->written[KVP_REF_V], held[KVP_REF_V]);
    row(b, "state", r->plan.state_bytes, r->a.cur[KVP_REF_STATE], r->written[KVP_REF_STATE], held[KVP_REF_STATE]);
    row(b, "total", r->plan.total_bytes, r->a.cur_total, w, held[KVP_REF_TAG_COUNT]);
    if (pol == KVP_REF_PAGED)
        kvp_buf_printf(b, "  (paged: a sequence's last block may be partly empty; written must cover the held tokens' "
                          "%llu B)\n", (unsigned long long)held[KVP_REF_TAG_COUNT]);
    kvp_buf_printf(b, "  %-7s %18s %18s %18s  %s\n", "peak", kvp_count_text(r->peak, t, sizeof t),
                   kvp_count_text(r->a.peak_total, t2, sizeof t2), "", r->peak == r->a.peak_total ? "ok" : "DIFFERS");
    kvp_buf_printf(b, "  %-7s %18s %18s %18s  %s (%s %llu B: a page per live allocation + 1 MiB)\n", "rss",
                   kvp_count_text(r->rss_expected, t, sizeof t), kvp_count_text(r->rss_delta, t2, sizeof t2), "",
                   r->rss_ok ? "ok" : "OUTSIDE",
                   pol == KVP_REF_DYNAMIC ? "at least the cache's and its twin's bytes -"
                                          : "the cache's and its twin's bytes +-",
                   (unsigned long long)r->tolerance);
}

static void json_run(struct kvp_json *j, const struct run *r)
{
    kvp_json_begin(j, NULL, '{');
    kvp_json_u64(j, "context", r->context);
    kvp_json_u64(j, "batch", r->batch);
    kvp_json_str(j, "mode", r->mode);
    kvp_json_u64(j, "predicted_k_bytes", r->plan.k_bytes);
    kvp_json_u64(j, "measured_k_bytes", r->a.cur[KVP_REF_K]);
    kvp_json_u64(j, "predicted_v_bytes", r->plan.v_bytes);
    kvp_json_u64(j, "measured_v_bytes", r->a.cur[KVP_REF_V]);
    kvp_json_u64(j, "predicted_state_bytes", r->plan.state_bytes);
    kvp_json_u64(j, "measured_state_bytes", r->a.cur[KVP_REF_STATE]);
    kvp_json_u64(j, "written_k_bytes", r->written[KVP_REF_K]);
    kvp_json_u64(j, "written_v_bytes", r->written[KVP_REF_V]);
    kvp_json_u64(j, "written_state_bytes", r->written[KVP_REF_STATE]);
    kvp_json_u64(j, "predicted_bytes", r->plan.total_bytes);
    kvp_json_u64(j, "measured_bytes", r->a.cur_total);
    kvp_json_u64(j, "written_bytes", r->written[KVP_REF_K] + r->written[KVP_REF_V] + r->written[KVP_REF_STATE]);
    kvp_json_u64(j, "predicted_peak_bytes", r->peak);
    kvp_json_u64(j, "peak_bytes", r->a.peak_total);
    kvp_json_u64(j, "rss_delta_bytes", r->rss_delta);
    kvp_json_u64(j, "rss_expected_bytes", r->rss_expected);
    kvp_json_u64(j, "rss_tolerance_bytes", r->tolerance);
    kvp_json_bool(j, "rss_ok", r->rss_ok);
    kvp_json_bool(j, "match", r->match);
    kvp_json_end(j, '}');
}

/* Contexts of --sweep: 1, each window and block boundary -1/0/+1, powers of two, T. */
static uint32_t sweep_points(const struct kvp_model *m, uint32_t block, uint64_t T, uint64_t *pts, uint32_t max)
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

/* ---- --fidelity: KIVI's experiment --------------------------------------- */

enum { FID_AXES = 4, FID_BITS = 3, FID_RESID = 3 };
static const char *const fid_axes[FID_AXES][2] = {
    {"channel", "token"}, {"token", "token"}, {"channel", "channel"}, {"token", "channel"}};
static const unsigned fid_bits[FID_BITS] = {2, 4, 8}, fid_resid[FID_RESID] = {0, 32, 128};

/* What the grid says about KIVI's claims, each comparison at equal other
 * settings: keys by K axis with values per-token, values by V axis with keys
 * per-channel, residual 0 unless named. */
struct kivi_check {
    bool keys, values, value_err_wrong_way, residual;
};

static struct kivi_check kivi_check(struct kvp_ref_fidelity r[FID_AXES][FID_BITS][FID_RESID])
{
    struct kivi_check c = {true, true, true, true};
    for (int b = 0; b < FID_BITS; b++) {
        c.keys = c.keys && r[0][b][0].score_err < r[1][b][0].score_err;
        c.values = c.values && r[0][b][0].output_err < r[2][b][0].output_err;
        if (fid_bits[b] == 2) /* where the errors are large enough to rank; 4 and 8 bits come out about equal */
            c.value_err_wrong_way = r[2][b][0].value_err < r[0][b][0].value_err;
        c.residual = c.residual && r[0][b][2].score_err < r[0][b][0].score_err;
    }
    return c;
}

/* KVQuant's two key techniques on the same model: keys per-channel or
 * per-token at 2 and 4 bits, with and without dense-and-sparse outliers
 * (1%), cached after RoPE (as everywhere else) or before it (un-rotated,
 * rotated after dequantizing); values int<bits> per-token, group 32. */
enum { KVQ_AXES = 2, KVQ_BITS = 2, KVQ_OUTL = 2, KVQ_ROPE = 2 };
static const unsigned kvq_bits[KVQ_BITS] = {2, 4};
static const char *const kvq_axes[KVQ_AXES] = {"channel", "token"}, *const kvq_outl[KVQ_OUTL] = {"", ":outliers=0.01"};

static void kvq_format(int a, int bi, int oi, char *ks, char *vs, size_t n)
{
    snprintf(ks, n, "int%u:group=32:axis=%s%s", kvq_bits[bi], kvq_axes[a], kvq_outl[oi]);
    snprintf(vs, n, "int%u:group=32", kvq_bits[bi]);
}

/* Run the KVQuant table: post-RoPE keys on rm, pre-RoPE keys on a model of
 * the same seed built with pre_rope_keys (the same weights). */
static enum kvp_status kvquant(const struct kvp_ref_model *rm, const struct kvp_model *fm, struct kvp_ref_opts o,
                               uint64_t seed, uint64_t prompt, uint64_t steps,
                               struct kvp_ref_fidelity r[KVQ_AXES][KVQ_BITS][KVQ_OUTL][KVQ_ROPE], struct kvp_error *err)
{
    struct kvp_ref_model *pre;
    enum kvp_status st;
    o.pre_rope_keys = true;
    if ((st = kvp_ref_model_new(fm, &o, &pre, err)) != KVP_OK)
        return st;
    for (int a = 0; a < KVQ_AXES && st == KVP_OK; a++)
        for (int bi = 0; bi < KVQ_BITS && st == KVP_OK; bi++)
            for (int oi = 0; oi < KVQ_OUTL && st == KVP_OK; oi++)
                for (int ro = 0; ro < KVQ_ROPE && st == KVP_OK; ro++) {
                    char ks[96], vs[96];
                    struct kvp_format k, v;
                    kvq_format(a, bi, oi, ks, vs, sizeof ks);
                    if ((st = kvp_format_parse(ks, &k, err)) == KVP_OK && (st = kvp_format_parse(vs, &v, err)) == KVP_OK)
                        st = kvp_ref_fidelity(ro ? pre : rm, &k, &v, prompt, steps, seed, &r[a][bi][oi][ro], err);
                }
    kvp_ref_model_free(pre);
    return st;
}

static int fidelity(enum kvp_out fmt, uint64_t seed, uint64_t prompt, uint64_t steps)
{
    struct kvp_ref_fidelity kq[KVQ_AXES][KVQ_BITS][KVQ_OUTL][KVQ_ROPE]; /* (K axis, bits, outliers, pre-RoPE) */
    struct kvp_ref_fidelity res[FID_AXES][FID_BITS][FID_RESID]; /* (K/V axes, bits, residual) */
    struct kvp_ref_opts o;
    struct kvp_model fm;
    struct kvp_ref_model *rm;
    struct kvp_error err = {0};
    struct kvp_buf b = {0};
    struct kvp_json j;
    char desc[512];

    if (kvp_ref_kivi_model(seed, &fm, &o, &err) != KVP_OK || kvp_ref_model_new(&fm, &o, &rm, &err) != KVP_OK)
        return cli_error(&err);
    for (int a = 0; a < FID_AXES; a++)
        for (int bi = 0; bi < FID_BITS; bi++)
            for (int ri = 0; ri < FID_RESID; ri++) {
                char ks[96], vs[96];
                struct kvp_format k, v;
                snprintf(ks, sizeof ks, "int%u:group=32:axis=%s:residual=%u", fid_bits[bi], fid_axes[a][0], fid_resid[ri]);
                snprintf(vs, sizeof vs, "int%u:group=32:axis=%s:residual=%u", fid_bits[bi], fid_axes[a][1], fid_resid[ri]);
                if (kvp_format_parse(ks, &k, &err) || kvp_format_parse(vs, &v, &err) ||
                    kvp_ref_fidelity(rm, &k, &v, prompt, steps, seed, &res[a][bi][ri], &err)) {
                    kvp_ref_model_free(rm);
                    return cli_error(&err);
                }
            }
    if (kvquant(rm, &fm, o, seed, prompt, steps, kq, &err) != KVP_OK) {
        kvp_ref_model_free(rm);
        return cli_error(&err);
    }
    kvp_ref_model_free(rm);
    /* KVQuant's claims on this model, per bit width: pre-RoPE lowers
     * per-channel keys' score error; 1% outliers lower key error on both axes */
    bool pre_helps = true, outl_helps = true;
    for (int bi = 0; bi < KVQ_BITS; bi++) {
        pre_helps = pre_helps && kq[0][bi][0][1].score_err < kq[0][bi][0][0].score_err;
        for (int a = 0; a < KVQ_AXES; a++)
            outl_helps = outl_helps && kq[a][bi][1][0].key_err < kq[a][bi][0][0].key_err;
    }
    const struct kvp_ref_fidelity *f0 = &res[0][0][0]; /* the fp32 run's statistics are the same in every cell */
    struct kivi_check c = kivi_check(res);
    snprintf(desc, sizeof desc,
             "kivi-synthetic: 2 full layers, 8 query / 4 KV heads x 64, hidden 64, vocab 256; keys with %u outlier "
             "channels x%g; %u heavy-hitter tokens whose scores every query raises by ~%g; %u loud tokens with ~%gx "
             "larger values",
             o.key_outliers, (double)o.outlier_gain, o.heavy_tokens, (double)o.heavy_gain, o.loud_tokens,
             (double)o.value_gain);
    if (fmt == KVP_OUT_JSON) {
        kvp_json_init(&j, &b);
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
        kvp_json_bool(&j, "keys_per_channel_best", c.keys);
        kvp_json_bool(&j, "values_per_token_best", c.values);
        kvp_json_bool(&j, "value_err_points_wrong_way", c.value_err_wrong_way);
        kvp_json_bool(&j, "residual_helps_channel_keys", c.residual);
        kvp_json_bool(&j, "pre_rope_helps_channel_keys", pre_helps);
        kvp_json_bool(&j, "outliers_lower_key_err", outl_helps);
        kvp_json_begin(&j, "kvquant", '[');
        for (int a = 0; a < KVQ_AXES; a++)
            for (int bi = 0; bi < KVQ_BITS; bi++)
                for (int oi = 0; oi < KVQ_OUTL; oi++)
                    for (int ro = 0; ro < KVQ_ROPE; ro++) {
                        const struct kvp_ref_fidelity *f = &kq[a][bi][oi][ro];
                        char ks[96], vs[96];
                        kvq_format(a, bi, oi, ks, vs, sizeof ks);
                        kvp_json_begin(&j, NULL, '{');
                        kvp_json_str(&j, "k", ks);
                        kvp_json_str(&j, "v", vs);
                        kvp_json_bool(&j, "pre_rope_keys", ro == 1);
                        kvp_json_double(&j, "key_err", f->key_err);
                        kvp_json_double(&j, "value_err", f->value_err);
                        kvp_json_double(&j, "score_err", f->score_err);
                        kvp_json_double(&j, "output_err", f->output_err);
                        kvp_json_double(&j, "agreement", f->agreement);
                        kvp_json_end(&j, '}');
                    }
        kvp_json_end(&j, ']');
        kvp_json_begin(&j, "results", '[');
    } else {
        kvp_buf_printf(&b,
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
                       (unsigned long long)seed, o.key_outliers, (double)o.outlier_gain, o.heavy_tokens,
                       (double)o.heavy_gain, 100 * f0->sparsity, 100 * f0->top_mass, o.loud_tokens, (double)o.value_gain,
                       100 * f0->value_top, (unsigned long long)prompt, (unsigned long long)steps);
        kvp_buf_printf(&b, "%-8s %-8s %4s %5s %9s %9s %9s %9s %6s\n", "K axis", "V axis", "bits", "resid", "key err",
                       "val err", "score err", "out err", "agree");
    }
    for (int a = 0; a < FID_AXES; a++)
        for (int bi = 0; bi < FID_BITS; bi++)
            for (int ri = 0; ri < FID_RESID; ri++) {
                const struct kvp_ref_fidelity *f = &res[a][bi][ri];
                if (fmt == KVP_OUT_JSON) {
                    char ks[96], vs[96];
                    snprintf(ks, sizeof ks, "int%u:group=32:axis=%s:residual=%u", fid_bits[bi], fid_axes[a][0], fid_resid[ri]);
                    snprintf(vs, sizeof vs, "int%u:group=32:axis=%s:residual=%u", fid_bits[bi], fid_axes[a][1], fid_resid[ri]);
                    kvp_json_begin(&j, NULL, '{');
                    kvp_json_str(&j, "k", ks);
                    kvp_json_str(&j, "v", vs);
                    kvp_json_double(&j, "key_err", f->key_err);
                    kvp_json_double(&j, "value_err", f->value_err);
                    kvp_json_double(&j, "score_err", f->score_err);
                    kvp_json_double(&j, "output_err", f->output_err);
                    kvp_json_double(&j, "agreement", f->agreement);
                    kvp_json_end(&j, '}');
                } else {
                    kvp_buf_printf(&b, "%-8s %-8s %4u %5u %9.4f %9.4f %9.4f %9.4f %6.3f\n", fid_axes[a][0], fid_axes[a][1],
                                   fid_bits[bi], fid_resid[ri], f->key_err, f->value_err, f->score_err, f->output_err,
                                   f->agreement);
                }
            }
    if (fmt == KVP_OUT_JSON) {
        kvp_json_end(&j, ']');
        kvp_json_end(&j, '}');
    } else {
        struct kvp_ref_fidelity(*r)[FID_BITS][FID_RESID] = res;
        kvp_buf_printf(&b, "\nKIVI's claims, 2 / 4 / 8 bits, no residual unless named:\n");
        kvp_buf_printf(&b, "keys per-channel < per-token on score error (V per-token): %s (%.4f/%.4f/%.4f vs %.4f/%.4f/%.4f)\n",
                       c.keys ? "yes" : "NO", r[0][0][0].score_err, r[0][1][0].score_err, r[0][2][0].score_err,
                       r[1][0][0].score_err, r[1][1][0].score_err, r[1][2][0].score_err);
        kvp_buf_printf(&b, "values per-token < per-channel on output error (K per-channel): %s (%.4f/%.4f/%.4f vs %.4f/%.4f/%.4f)\n",
                       c.values ? "yes" : "NO", r[0][0][0].output_err, r[0][1][0].output_err, r[0][2][0].output_err,
                       r[2][0][0].output_err, r[2][1][0].output_err, r[2][2][0].output_err);
        kvp_buf_printf(&b, "value reconstruction error points the wrong way (per-channel < per-token at 2 bits): %s "
                           "(%.4f/%.4f/%.4f vs %.4f/%.4f/%.4f)\n",
                       c.value_err_wrong_way ? "yes" : "NO", r[2][0][0].value_err, r[2][1][0].value_err,
                       r[2][2][0].value_err, r[0][0][0].value_err, r[0][1][0].value_err, r[0][2][0].value_err);
        kvp_buf_printf(&b, "residual 128 lowers per-channel keys' score error: %s (%.4f/%.4f/%.4f vs %.4f/%.4f/%.4f); "
                           "residual 32 = 0 for axis=channel,\n  which always keeps the open group's T mod 32 tokens "
                           "unquantized\n",
                       c.residual ? "yes" : "NO", r[0][0][2].score_err, r[0][1][2].score_err, r[0][2][2].score_err,
                       r[0][0][0].score_err, r[0][1][0].score_err, r[0][2][0].score_err);
        kvp_buf_printf(&b, "\nKVQuant: keys cached before RoPE (rotated after dequantizing; the same bytes) and\n"
                           "dense-and-sparse outliers (1%% of each token's values kept as fp32 + int32 index);\n"
                           "V int<bits>:group=32 per-token\n");
        kvp_buf_printf(&b, "%-8s %4s %8s %5s %9s %9s %9s %6s\n", "K axis", "bits", "outliers", "RoPE", "key err",
                       "score err", "out err", "agree");
        for (int a = 0; a < KVQ_AXES; a++)
            for (int bi = 0; bi < KVQ_BITS; bi++)
                for (int oi = 0; oi < KVQ_OUTL; oi++)
                    for (int ro = 0; ro < KVQ_ROPE; ro++) {
                        const struct kvp_ref_fidelity *f = &kq[a][bi][oi][ro];
                        kvp_buf_printf(&b, "%-8s %4u %8s %5s %9.4f %9.4f %9.4f %6.3f\n", kvq_axes[a], kvq_bits[bi],
                                       oi ? "0.01" : "0", ro ? "pre" : "post", f->key_err, f->score_err, f->output_err,
                                       f->agreement);
                    }
        kvp_buf_printf(&b, "pre-RoPE lowers per-channel keys' score error (2/4 bits): %s (%.4f/%.4f vs %.4f/%.4f)\n",
                       pre_helps ? "yes" : "NO", kq[0][0][0][1].score_err, kq[0][1][0][1].score_err,
                       kq[0][0][0][0].score_err, kq[0][1][0][0].score_err);
        kvp_buf_printf(&b, "outliers=0.01 lowers key error (per-channel, per-token; 2/4 bits; post-RoPE): %s "
                           "(%.4f/%.4f, %.4f/%.4f vs %.4f/%.4f, %.4f/%.4f)\n",
                       outl_helps ? "yes" : "NO", kq[0][0][1][0].key_err, kq[0][1][1][0].key_err,
                       kq[1][0][1][0].key_err, kq[1][1][1][0].key_err, kq[0][0][0][0].key_err,
                       kq[0][1][0][0].key_err, kq[1][0][0][0].key_err, kq[1][1][0][0].key_err);
    }
    int rc = cli_write(&b);
    kvp_buf_release(&b);
    return rc;
}

int cmd_validate(int argc, char **argv)
{
    const char *pos[1], *pname;
    int npos, rc;
    struct kvp_model *m = NULL;
    struct kvp_ref_model *rm = NULL;
    struct kvp_error err = {0};
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct kvp_ref_cache_opts co = {.policy = KVP_REF_STATIC, .block = 16};
    struct kvp_ref_opts o = {.seed = 1};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t context = 256, batch = 1, block = 16, pts[64];
    uint64_t threads = cpus < 1 ? 1 : cpus > KVP_REF_MAX_THREADS ? KVP_REF_MAX_THREADS : (uint64_t)cpus;
    uint32_t npts = 1;
    struct kvp_buf b = {0};
    struct kvp_json j;
    bool all = true, rss_all = true;
    char kname[64], vname[64];

    if ((rc = cli_parse(&cmd, argc, argv, pos, 1, &npos)) != CLI_OK)
        return rc;
    if ((rc = cli_out(&cmd, &fmt, false)) != CLI_OK)
        return rc;
    if (fmt != KVP_OUT_TEXT && fmt != KVP_OUT_JSON)
        return cli_usage_error("validate: --format must be text or json");
    if (cli_opt(&cmd, "fidelity")) {
        uint64_t seed = 1, prompt = 128, steps = 128;
        if ((rc = cli_count(&cmd, "seed", 0, &seed)) || (rc = cli_count(&cmd, "prompt", 1, &prompt)) ||
            (rc = cli_count(&cmd, "steps", 0, &steps)))
            return rc;
        if (prompt + steps > 4096)
            return cli_usage_error("--prompt plus --steps must be at most 4096 (got %llu)",
                                   (unsigned long long)(prompt + steps));
        return fidelity(fmt, seed, prompt, steps);
    }
    if (npos != 1)
        return cli_usage_error("validate: which model? (usage: kvplan validate MODEL [options])");
    if (cli_opt(&cmd, "alloc-only") && cli_opt(&cmd, "compute"))
        return cli_usage_error("validate: --alloc-only and --compute exclude each other");
    if ((pname = cli_opt(&cmd, "policy")) && !kvp_ref_policy_from_name(pname, &co.policy))
        return cli_usage_error("--policy must be static, dynamic or paged (got '%s')", pname);
    if ((rc = parse_scale(cli_opt(&cmd, "scale"), &o)) != CLI_OK || (rc = cli_model(pos[0], &m)) != CLI_OK)
        return rc;
    if (m->max_context < context)
        context = m->max_context;
    co.k = co.v = kvp_format_plain(m->dtype);
    if ((rc = cli_count(&cmd, "context", 1, &context)) || (rc = cli_count(&cmd, "batch", 1, &batch)) ||
        (rc = cli_count(&cmd, "block-size", 1, &block)) || (rc = cli_format(&cmd, "kv-dtype", &co.k)) ||
        (rc = cli_format(&cmd, "kv-dtype", &co.v)) || (rc = cli_format(&cmd, "k-dtype", &co.k)) ||
        (rc = cli_format(&cmd, "v-dtype", &co.v)))
        goto out;
    if (batch > 4096 || block > (1u << 20)) {
        rc = cli_usage_error("--batch must be at most 4096 and --block-size at most 1M");
        goto out;
    }
    if ((rc = cli_count(&cmd, "threads", 1, &threads)))
        goto out;
    if (threads > KVP_REF_MAX_THREADS) {
        rc = cli_usage_error("--threads must be at most %d (got %llu)", KVP_REF_MAX_THREADS, (unsigned long long)threads);
        goto out;
    }
    o.threads = (uint32_t)threads;
    co.block = (uint32_t)block;
    {
        struct cli_cuda_args ca = {cli_opt(&cmd, "device"), cli_opt(&cmd, "bench") != NULL, cli_opt(&cmd, "gpu"),
                                   cli_opt(&cmd, "sweep") || cli_opt(&cmd, "alloc-only") || cli_opt(&cmd, "compute"),
                                   cli_opt(&cmd, "scale") != NULL};
        bool cuda;
        if ((rc = cli_cuda_check(&ca, m, &co, &cuda)) != CLI_OK || cuda) {
#ifdef KVP_CUDA
            if (rc == CLI_OK)
                rc = cli_validate_cuda(&ca, m, o, &co, context, batch, fmt);
#else
            if (rc == CLI_OK)
                rc = cli_usage_error("built without CUDA: rebuild with make CUDA=1");
#endif
            goto out;
        }
    }
    if (kvp_ref_model_new(m, &o, &rm, &err) != KVP_OK) {
        rc = cli_error(&err);
        goto out;
    }
    pts[0] = context;
    if (cli_opt(&cmd, "sweep"))
        npts = sweep_points(m, co.policy == KVP_REF_PAGED ? co.block : 0, context, pts, 64);
    kvp_format_name(&co.k, kname, sizeof kname);
    kvp_format_name(&co.v, vname, sizeof vname);
    if (fmt == KVP_OUT_JSON) {
        kvp_json_init(&j, &b);
        kvp_json_begin(&j, NULL, '{');
        kvp_json_str(&j, "model", m->name);
        kvp_json_str(&j, "policy", kvp_ref_policy_name(co.policy));
        if (co.policy == KVP_REF_PAGED)
            kvp_json_u64(&j, "block_size", co.block);
        kvp_json_str(&j, "k_dtype", kname);
        kvp_json_str(&j, "v_dtype", vname);
        kvp_json_u64(&j, "scale_hidden", kvp_ref_model_shape(rm)->hidden);
        kvp_json_u64(&j, "scale_intermediate", kvp_ref_model_shape(rm)->intermediate);
        kvp_json_u64(&j, "scale_vocab", kvp_ref_model_shape(rm)->vocab);
        kvp_json_begin(&j, "runs", '[');
    } else {
        char sum[160];
        kvp_buf_printf(&b, "%s: %s\n", m->name, kvp_model_layer_summary(m, sum, sizeof sum));
        kvp_buf_printf(&b, "policy %s%s, K %s, V %s; scale: hidden %u, MLP %u, vocab %u (KV geometry as the model)\n\n",
                       kvp_ref_policy_name(co.policy), co.policy == KVP_REF_PAGED ? " (block " : "", kname, vname,
                       kvp_ref_model_shape(rm)->hidden, kvp_ref_model_shape(rm)->intermediate, kvp_ref_model_shape(rm)->vocab);
        if (co.policy == KVP_REF_PAGED) { /* fix the line: say the block size */
            b.len = 0;
            kvp_buf_printf(&b, "%s: %s\n", m->name, kvp_model_layer_summary(m, sum, sizeof sum));
            kvp_buf_printf(&b, "policy paged (block %u), K %s, V %s; scale: hidden %u, MLP %u, vocab %u (KV geometry as the model)\n\n",
                           co.block, kname, vname, kvp_ref_model_shape(rm)->hidden,
                           kvp_ref_model_shape(rm)->intermediate, kvp_ref_model_shape(rm)->vocab);
        }
    }
    for (uint32_t i = 0; i < npts; i++) {
        struct run r = {.context = pts[i], .batch = batch};
        if ((rc = run_one(m, rm, co, cli_opt(&cmd, "alloc-only") != NULL, &r, &err)) != CLI_OK)
            goto out;
        all = all && r.match;
        rss_all = rss_all && r.rss_ok;
        if (fmt == KVP_OUT_JSON)
            json_run(&j, &r);
        else
            text(&b, &r, co.policy);
    }
    if (fmt == KVP_OUT_JSON) {
        kvp_json_end(&j, ']');
        kvp_json_bool(&j, "match", all);
        kvp_json_bool(&j, "rss_ok", rss_all);
        kvp_json_end(&j, '}');
    } else {
        kvp_buf_printf(&b, "\n%s\n", !all ? "MISMATCH: a counted figure differs from the prediction or was not written"
                                   : co.policy == KVP_REF_PAGED ? "match: every counted byte equals the prediction\n"
                                                                  "written: every held token's bytes (a last block may be partly empty)"
                                                                : "match: every counted byte equals the prediction\n"
                                                                  "written: every allocated byte (predicted = allocated = written)");
    }
    rc = cli_write(&b);
    if (rc == CLI_OK && !all)
        rc = CLI_FAIL;
out:
    kvp_buf_release(&b);
    kvp_ref_model_free(rm);
    kvp_model_free(m);
    return rc;
}
