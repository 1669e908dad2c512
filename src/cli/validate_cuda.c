/* validate_cuda.c -- `kvplan validate MODEL --device cuda [--bench]`.
 *
 * Validation: the CUDA decoder's cache bytes (counted at cudaMalloc) against
 * kvp_kv_compute, the cudaMemGetInfo delta against the count rounded by the
 * driver's granularity (measured on the device), and its logits against the
 * CPU decoder's. Benchmark: decode tokens/s at contexts x batches against the
 * roofline bound (kvp_roofline) with the catalog bandwidth and with the
 * bandwidth a copy kernel measures in the same run. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kvplan/deploy.h"
#include "kvplan/gpu.h"
#include "kvplan/num.h"
#include "kvplan/ref_cuda.h"
#include "validate_cuda.h"

int cli_cuda_check(const struct cli_cuda_args *a, const struct kvp_model *m, const struct kvp_ref_cache_opts *co,
                   bool *cuda)
{
    struct kvp_error err = {0};
    const char *why;
    *cuda = false;
    if (a->device && strcmp(a->device, "cpu") != 0 && strcmp(a->device, "cuda") != 0)
        return cli_usage_error("--device must be cpu or cuda (got '%s')", a->device);
    *cuda = a->device && strcmp(a->device, "cuda") == 0;
    if (!*cuda && (a->bench || a->gpu))
        return cli_usage_error("--bench and --gpu need --device cuda");
    if (!*cuda)
        return CLI_OK;
    if (a->other)
        return cli_usage_error("--device cuda runs no --sweep, --alloc-only or --compute");
    if (co->policy == KVP_REF_DYNAMIC)
        return cli_usage_error("--device cuda: --policy must be static or paged (got 'dynamic')");
    for (int i = 0; i < 2; i++) {
        char name[64];
        const struct kvp_format *f = i ? &co->v : &co->k;
        if (!kvp_cuda_format_ok(f, &why)) {
            kvp_format_name(f, name, sizeof name);
            return cli_usage_error("--device cuda: the cache cannot store '%s' (%s)", name, why);
        }
    }
    if (kvp_cuda_model_ok(m, &err) != KVP_OK)
        return cli_error(&err);
    return CLI_OK;
}

#ifdef KVP_CUDA

static int validate(const struct kvp_model *m, const struct kvp_cuda_opts *o, enum kvp_out fmt)
{
    struct kvp_cuda_result r;
    struct kvp_error err = {0};
    struct kvp_buf b = {0};
    struct kvp_json j;
    char kn[64], vn[64], x[40], y[40], z[40];
    int rc;
    if (kvp_cuda_validate(m, o, &r, &err) != KVP_OK)
        return cli_error(&err);
    kvp_format_name(&o->k, kn, sizeof kn);
    kvp_format_name(&o->v, vn, sizeof vn);
    bool ok = r.bytes_ok && r.delta_ok && (!r.compared || r.logits_ok);
    if (fmt == KVP_OUT_JSON) {
        kvp_json_init(&j, &b);
        kvp_json_begin(&j, NULL, '{');
        kvp_json_str(&j, "model", m->name);
        kvp_json_str(&j, "device", r.device);
        kvp_json_str(&j, "policy", kvp_ref_policy_name(o->policy));
        kvp_json_str(&j, "k_dtype", kn);
        kvp_json_str(&j, "v_dtype", vn);
        kvp_json_u64(&j, "context", o->context);
        kvp_json_u64(&j, "batch", o->batch);
        kvp_json_u64(&j, "predicted_bytes", r.predicted_bytes);
        kvp_json_u64(&j, "cudamalloc_k_bytes", r.counted_k);
        kvp_json_u64(&j, "cudamalloc_v_bytes", r.counted_v);
        kvp_json_u64(&j, "cudamalloc_bytes", r.counted_bytes);
        kvp_json_u64(&j, "allocations", r.allocs);
        kvp_json_u64(&j, "memgetinfo_delta_bytes", r.memgetinfo_delta);
        kvp_json_u64(&j, "delta_lo_bytes", r.delta_lo);
        kvp_json_u64(&j, "delta_hi_bytes", r.delta_hi);
        kvp_json_u64(&j, "gran_page_bytes", r.gran.page);
        kvp_json_u64(&j, "gran_small_max_bytes", r.gran.small_max);
        kvp_json_double(&j, "logits_max_abs_err", r.max_abs_err);
        kvp_json_double(&j, "logits_max_abs", r.max_abs_logit);
        kvp_json_double(&j, "logits_tolerance", r.tolerance);
        kvp_json_bool(&j, "bytes_ok", r.bytes_ok);
        kvp_json_bool(&j, "delta_ok", r.delta_ok);
        kvp_json_bool(&j, "logits_ok", r.logits_ok);
        kvp_json_double(&j, "decode_seconds", r.seconds);
        kvp_json_bool(&j, "match", ok);
        kvp_json_end(&j, '}');
    } else {
        kvp_buf_printf(&b, "%s on %s: policy %s", m->name, r.device, kvp_ref_policy_name(o->policy));
        if (o->policy == KVP_REF_PAGED)
            kvp_buf_printf(&b, " (block %u)", o->block);
        kvp_buf_printf(&b, ", K %s, V %s, context %llu x batch %u\n", kn, vn, (unsigned long long)o->context, o->batch);
        kvp_buf_printf(&b, "  predicted KV bytes     %22s\n", kvp_count_text(r.predicted_bytes, x, sizeof x));
        kvp_buf_printf(&b, "  cudaMalloc bytes       %22s  %s (K %s, V %s; %llu allocations)\n",
                       kvp_count_text(r.counted_bytes, x, sizeof x), r.bytes_ok ? "ok" : "DIFFERS",
                       kvp_count_text(r.counted_k, y, sizeof y), kvp_count_text(r.counted_v, z, sizeof z),
                       (unsigned long long)r.allocs);
        kvp_buf_printf(&b, "  cudaMemGetInfo delta   %22s  %s [%s, ", kvp_count_text(r.memgetinfo_delta, x, sizeof x),
                       r.delta_ok ? "ok: within" : "OUTSIDE", kvp_count_text(r.delta_lo, y, sizeof y));
        kvp_buf_printf(&b, "%s]\n", kvp_count_text(r.delta_hi, z, sizeof z));
        kvp_buf_printf(&b, "  granularity (measured) page %s B, sub-allocated up to %s B, aligned %llu B\n",
                       kvp_count_text(r.gran.page, x, sizeof x), kvp_count_text(r.gran.small_max, y, sizeof y),
                       (unsigned long long)r.gran.small_align);
        if (r.compared)
            kvp_buf_printf(&b, "  logits vs CPU decoder  max |diff| %.3g, max |logit| %.3g, tolerance %.0e x max  %s\n",
                           r.max_abs_err, r.max_abs_logit, r.tolerance, r.logits_ok ? "ok" : "DIFFERS");
        kvp_buf_printf(
            &b, "  decode                 %.3f s for %llu steps\n\n%s\n", r.seconds, (unsigned long long)o->context,
            ok ? "match: cudaMalloc bytes equal the prediction, the delta is within the granularity, logits agree"
               : "MISMATCH: see the lines above");
    }
    rc = cli_write(&b);
    kvp_buf_release(&b);
    return rc == CLI_OK && !ok ? CLI_FAIL : rc;
}

static int bench(const struct cli_cuda_args *a, const struct kvp_model *m, struct kvp_cuda_opts o, enum kvp_out fmt)
{
    static const uint64_t contexts[] = {512, 2048, 8192, 32768};
    static const uint32_t batches[] = {1, 8, 32};
    const struct kvp_gpu_catalog *gc;
    const struct kvp_gpu *gpu = NULL;
    struct kvp_error err = {0};
    struct kvp_buf b = {0};
    struct kvp_json j;
    struct kvp_model run;
    char dev[256];
    uint64_t mem;
    double bw;
    int rc;

    if ((rc = cli_gpus(&gc)) != CLI_OK)
        return rc;
    if (kvp_cuda_device(dev, sizeof dev, &mem, &err) != KVP_OK || kvp_cuda_copy_bandwidth(&bw, &err) != KVP_OK)
        return cli_error(&err);
    if (a->gpu ? kvp_gpu_find(gc, a->gpu, &gpu, &err) != KVP_OK : !(gpu = kvp_cuda_gpu_guess(gc, dev, mem)))
        return a->gpu ? cli_error(&err) : cli_usage_error("no catalog GPU matches '%s': pass --gpu NAME", dev);
    kvp_cuda_model_as_run(m, &o.ref, &run);
    if (fmt == KVP_OUT_JSON) {
        kvp_json_init(&j, &b);
        kvp_json_begin(&j, NULL, '{');
        kvp_json_str(&j, "model", m->name);
        kvp_json_str(&j, "device", dev);
        kvp_json_str(&j, "catalog_gpu", gpu->id);
        kvp_json_double(&j, "catalog_bandwidth_bytes_per_s", (double)gpu->bandwidth_bytes_per_s);
        kvp_json_double(&j, "copy_bandwidth_bytes_per_s", bw);
        kvp_json_begin(&j, "points", '[');
    } else {
        kvp_buf_printf(&b, "%s on %s (catalog: %s): hidden %u, MLP %u, vocab %u, fp32 weights\n", m->name, dev, gpu->id,
                       run.hidden, run.intermediate, run.vocab);
        kvp_buf_printf(&b, "bandwidth: catalog %.0f GB/s, copy kernel %.0f GB/s (%.0f%% of the catalog)\n\n",
                       (double)gpu->bandwidth_bytes_per_s / 1e9, bw / 1e9,
                       100.0 * bw / (double)gpu->bandwidth_bytes_per_s);
        kvp_buf_printf(&b, "%8s %6s %12s %14s %8s %14s %8s\n", "context", "batch", "tokens/s", "bound catalog", "frac",
                       "bound copy", "frac");
    }
    enum { NC = sizeof contexts / sizeof *contexts, NB = sizeof batches / sizeof *batches };
    struct kvp_cuda_bench pts[NC * NB];
    if (kvp_cuda_bench(m, &o, contexts, NC, batches, NB, 17, pts, &err) != KVP_OK) {
        kvp_buf_release(&b);
        return cli_error(&err);
    }
    for (uint32_t i = 0; i < NC * NB; i++) {
        const struct kvp_cuda_bench *pt = &pts[i];
        struct kvp_deploy d;
        struct kvp_roofline rc1, rc2;
        kvp_deploy_init(&d, KVP_ENGINE_IDEAL, &run);
        d.k = o.k;
        d.v = o.v;
        d.w.kind = KVP_WSTORE_FORMAT; /* the decoder's weights are fp32 */
        d.w.q.f = kvp_format_plain(KVP_DTYPE_F32);
        d.context = pt->context;
        if (kvp_roofline(&run, &d, pt->batch, (double)gpu->bandwidth_bytes_per_s, gpu->bf16_flops, &rc1, &err) ||
            kvp_roofline(&run, &d, pt->batch, bw, gpu->bf16_flops, &rc2, &err)) {
            kvp_buf_release(&b);
            return cli_error(&err);
        }
        if (fmt == KVP_OUT_JSON) {
            kvp_json_begin(&j, NULL, '{');
            kvp_json_u64(&j, "context", pt->context);
            kvp_json_u64(&j, "batch", pt->batch);
            kvp_json_bool(&j, "skipped", pt->skipped);
            kvp_json_u64(&j, "steps", pt->steps);
            kvp_json_double(&j, "tokens_per_s", pt->tokens_per_s);
            kvp_json_double(&j, "bound_catalog_tokens_per_s", rc1.tokens_per_s);
            kvp_json_double(&j, "bound_copy_tokens_per_s", rc2.tokens_per_s);
            kvp_json_double(&j, "fraction_catalog", pt->skipped ? 0 : pt->tokens_per_s / rc1.tokens_per_s);
            kvp_json_double(&j, "fraction_copy", pt->skipped ? 0 : pt->tokens_per_s / rc2.tokens_per_s);
            kvp_json_end(&j, '}');
        } else if (pt->skipped) {
            kvp_buf_printf(&b, "%8llu %6u %12s  (the cache would not fit in free memory)\n",
                           (unsigned long long)pt->context, pt->batch, "-");
        } else {
            kvp_buf_printf(&b, "%8llu %6u %12.1f %14.1f %7.1f%% %14.1f %7.1f%%\n", (unsigned long long)pt->context,
                           pt->batch, pt->tokens_per_s, rc1.tokens_per_s, 100 * pt->tokens_per_s / rc1.tokens_per_s,
                           rc2.tokens_per_s, 100 * pt->tokens_per_s / rc2.tokens_per_s);
        }
    }
    if (fmt == KVP_OUT_JSON) {
        kvp_json_end(&j, ']');
        kvp_json_end(&j, '}');
    } else {
        kvp_buf_printf(&b, "\nbound = batch / ((fp32 weights + KV of the batch) / bandwidth), kvp_roofline; "
                           "16 steps timed after one warm-up, cache prefilled with synthetic rows;\n"
                           "layers of one spec share weights (as on the CPU), re-read from memory per layer\n");
    }
    rc = cli_write(&b);
    kvp_buf_release(&b);
    return rc;
}

int cli_validate_cuda(const struct cli_cuda_args *a, const struct kvp_model *m, struct kvp_ref_opts o,
                      const struct kvp_ref_cache_opts *co, uint64_t context, uint64_t batch, enum kvp_out fmt)
{
    struct kvp_cuda_opts c;
    memset(&c, 0, sizeof c);
    if (a->bench && !a->scale_given) { /* a roofline of a toy model measures kernel launches: real sizes */
        uint64_t seed = o.seed;
        memset(&o, 0, sizeof o);
        o.seed = seed;
    }
    c.ref = o;
    c.policy = co->policy;
    c.context = context;
    c.batch = (uint32_t)batch;
    c.block = co->block;
    c.k = co->k;
    c.v = co->v;
    c.compare = true;
    return a->bench ? bench(a, m, c, fmt) : validate(m, &c, fmt);
}
#endif
