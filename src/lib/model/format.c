/* format.c -- the dtype table and exact bytes of each storage format. */
#include "kvplan/format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kvplan/num.h"

/* Block sizes from ggml-common.h's static_asserts (q8_0: fp16 d + 32 int8 = 34 B;
 * q4_K: fp16 d, dmin + 12 B of scales + 128 B of codes = 144 B per 256),
 * OCP MX (mxfp4: 16 B of e2m1 + 1 B e8m0 scale per 32) and NVIDIA NVFP4
 * (8 B of e2m1 + 1 B fp8 scale per 16). The last column is enum ggml_type
 * (ggml.h), -1 where ggml has none. Types from q8_1 on are weight storage
 * only: no engine profile offers them for a cache. */
static const struct kvp_dtype_info dtypes[KVP_DTYPE_COUNT] = {
    [KVP_DTYPE_F32] = {"f32", 1, 32, false, 0},
    [KVP_DTYPE_F16] = {"f16", 1, 16, false, 1},
    [KVP_DTYPE_BF16] = {"bf16", 1, 16, false, 30},
    [KVP_DTYPE_FP8_E4M3] = {"fp8_e4m3", 1, 8, false, -1},
    [KVP_DTYPE_FP8_E5M2] = {"fp8_e5m2", 1, 8, false, -1},
    [KVP_DTYPE_INT8] = {"int8", 1, 8, true, -1},
    [KVP_DTYPE_INT4] = {"int4", 1, 4, true, -1},
    [KVP_DTYPE_INT2] = {"int2", 1, 2, true, -1},
    [KVP_DTYPE_Q8_0] = {"q8_0", 32, 34 * 8, false, 8},
    [KVP_DTYPE_Q4_0] = {"q4_0", 32, 18 * 8, false, 2},
    [KVP_DTYPE_Q4_1] = {"q4_1", 32, 20 * 8, false, 3},
    [KVP_DTYPE_Q5_0] = {"q5_0", 32, 22 * 8, false, 6},
    [KVP_DTYPE_Q5_1] = {"q5_1", 32, 24 * 8, false, 7},
    [KVP_DTYPE_IQ4_NL] = {"iq4_nl", 32, 18 * 8, false, 20},
    [KVP_DTYPE_MXFP4] = {"mxfp4", 32, 17 * 8, false, 39},
    [KVP_DTYPE_NVFP4] = {"nvfp4", 16, 9 * 8, false, -1},
    [KVP_DTYPE_Q8_1] = {"q8_1", 32, 36 * 8, false, 9},
    [KVP_DTYPE_Q2_K] = {"q2_K", 256, 84 * 8, false, 10},
    [KVP_DTYPE_Q3_K] = {"q3_K", 256, 110 * 8, false, 11},
    [KVP_DTYPE_Q4_K] = {"q4_K", 256, 144 * 8, false, 12},
    [KVP_DTYPE_Q5_K] = {"q5_K", 256, 176 * 8, false, 13},
    [KVP_DTYPE_Q6_K] = {"q6_K", 256, 210 * 8, false, 14},
    [KVP_DTYPE_Q8_K] = {"q8_K", 256, 292 * 8, false, 15},
    [KVP_DTYPE_IQ2_XXS] = {"iq2_xxs", 256, 66 * 8, false, 16},
    [KVP_DTYPE_IQ2_XS] = {"iq2_xs", 256, 74 * 8, false, 17},
    [KVP_DTYPE_IQ3_XXS] = {"iq3_xxs", 256, 98 * 8, false, 18},
    [KVP_DTYPE_IQ1_S] = {"iq1_s", 256, 50 * 8, false, 19},
    [KVP_DTYPE_IQ3_S] = {"iq3_s", 256, 110 * 8, false, 21},
    [KVP_DTYPE_IQ2_S] = {"iq2_s", 256, 82 * 8, false, 22},
    [KVP_DTYPE_IQ4_XS] = {"iq4_xs", 256, 136 * 8, false, 23},
    [KVP_DTYPE_IQ1_M] = {"iq1_m", 256, 56 * 8, false, 29},
    [KVP_DTYPE_TQ1_0] = {"tq1_0", 256, 54 * 8, false, 34},
    [KVP_DTYPE_TQ2_0] = {"tq2_0", 256, 66 * 8, false, 35},
    [KVP_DTYPE_I8] = {"i8", 1, 8, false, 24},
    [KVP_DTYPE_I16] = {"i16", 1, 16, false, 25},
    [KVP_DTYPE_I32] = {"i32", 1, 32, false, 26},
    [KVP_DTYPE_I64] = {"i64", 1, 64, false, 27},
    [KVP_DTYPE_F64] = {"f64", 1, 64, false, 28},
};

static const struct {
    const char *alias;
    enum kvp_dtype d;
} aliases[] = {
    {"fp32", KVP_DTYPE_F32}, {"float32", KVP_DTYPE_F32}, {"float", KVP_DTYPE_F32},
    {"fp16", KVP_DTYPE_F16}, {"float16", KVP_DTYPE_F16}, {"half", KVP_DTYPE_F16},
    {"bfloat16", KVP_DTYPE_BF16}, {"fp8", KVP_DTYPE_FP8_E4M3}, {"e4m3", KVP_DTYPE_FP8_E4M3},
    {"e5m2", KVP_DTYPE_FP8_E5M2}, {"float8_e4m3fn", KVP_DTYPE_FP8_E4M3},
    {"float8_e5m2", KVP_DTYPE_FP8_E5M2},
};

const struct kvp_dtype_info *kvp_dtype_info(enum kvp_dtype d)
{
    return &dtypes[d];
}

bool kvp_dtype_from_ggml(uint32_t ggml_type, enum kvp_dtype *out)
{
    for (int i = 0; i < KVP_DTYPE_COUNT; i++) {
        if (dtypes[i].ggml >= 0 && (uint32_t)dtypes[i].ggml == ggml_type) {
            *out = (enum kvp_dtype)i;
            return true;
        }
    }
    return false;
}

bool kvp_dtype_from_name(const char *name, enum kvp_dtype *out)
{
    for (int i = 0; i < KVP_DTYPE_COUNT; i++) {
        if (strcasecmp(name, dtypes[i].name) == 0) {
            *out = (enum kvp_dtype)i;
            return true;
        }
    }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (strcasecmp(name, aliases[i].alias) == 0) {
            *out = aliases[i].d;
            return true;
        }
    }
    return false;
}

struct kvp_format kvp_format_plain(enum kvp_dtype d)
{
    struct kvp_format f;
    memset(&f, 0, sizeof f); /* padding too: formats are compared and copied as bytes */
    f.dtype = d;
    f.group = 32;
    f.axis = KVP_AXIS_TOKEN;
    f.scale = KVP_DTYPE_F16;
    f.zero_point = true;
    return f;
}

/* "f32, f16, ..." -- every name in the table, for messages; returns buf. */
static const char *dtype_list(char *buf, size_t n)
{
    buf[0] = '\0';
    for (int i = 0, o = 0; i < KVP_DTYPE_COUNT && o >= 0 && (size_t)o < n; i++)
        o += snprintf(buf + o, n - (size_t)o, "%s%s", i ? ", " : "", dtypes[i].name);
    return buf;
}

static uint32_t scale_bytes(const struct kvp_format *f)
{
    uint32_t one = dtypes[f->scale].block_bits / 8;
    return f->zero_point ? 2 * one : one;
}

static enum kvp_status parse_setting(struct kvp_format *f, const char *full, const char *key,
                                     const char *val, struct kvp_error *err)
{
    uint64_t v;
    if (strcmp(key, "group") == 0) {
        if (!kvp_parse_u64(val, &v) || v == 0 || v > 65536)
            return kvp_fail(err, KVP_ERR_USAGE, "format '%s': 'group' must be 1..65536 (got '%s')", full, val);
        f->group = (uint32_t)v;
    } else if (strcmp(key, "axis") == 0) {
        if (strcmp(val, "token") == 0)
            f->axis = KVP_AXIS_TOKEN;
        else if (strcmp(val, "channel") == 0)
            f->axis = KVP_AXIS_CHANNEL;
        else
            return kvp_fail(err, KVP_ERR_USAGE, "format '%s': 'axis' must be token or channel (got '%s')", full, val);
    } else if (strcmp(key, "scale") == 0) {
        enum kvp_dtype d;
        if (!kvp_dtype_from_name(val, &d) ||
            (d != KVP_DTYPE_F16 && d != KVP_DTYPE_BF16 && d != KVP_DTYPE_F32))
            return kvp_fail(err, KVP_ERR_USAGE, "format '%s': 'scale' must be f16, bf16 or f32 (got '%s')", full, val);
        f->scale = d;
    } else if (strcmp(key, "zp") == 0) {
        if (strcmp(val, "yes") == 0)
            f->zero_point = true;
        else if (strcmp(val, "no") == 0)
            f->zero_point = false;
        else
            return kvp_fail(err, KVP_ERR_USAGE, "format '%s': 'zp' must be yes or no (got '%s')", full, val);
    } else if (strcmp(key, "residual") == 0) {
        if (!kvp_parse_u64(val, &v) || v > 1u << 24)
            return kvp_fail(err, KVP_ERR_USAGE, "format '%s': 'residual' must be 0..16777216 (got '%s')", full, val);
        f->residual = (uint32_t)v;
    } else if (strcmp(key, "outliers") == 0) {
        char *end;
        double x = strtod(val, &end);
        if (*val == '\0' || *end != '\0' || !(x >= 0.0 && x <= 0.5))
            return kvp_fail(err, KVP_ERR_USAGE, "format '%s': 'outliers' must be a fraction 0..0.5 (got '%s')", full,
                            val);
        f->outliers_ppm = (uint32_t)(x * 1e6 + 0.5);
    } else {
        return kvp_fail(err, KVP_ERR_USAGE,
                        "format '%s': unknown setting '%s' (group, axis, scale, zp, residual, outliers)", full, key);
    }
    return KVP_OK;
}

enum kvp_status kvp_format_parse(const char *s, struct kvp_format *out, struct kvp_error *err)
{
    char buf[128], list[400], *save = NULL, *tok;
    struct kvp_format f;
    enum kvp_dtype d;
    enum kvp_status st;

    if (strlen(s) >= sizeof buf)
        return kvp_fail(err, KVP_ERR_USAGE, "format '%.40s...' is too long", s);
    strcpy(buf, s);
    tok = strtok_r(buf, ":", &save);
    if (!tok || !kvp_dtype_from_name(tok, &d))
        return kvp_fail(err, KVP_ERR_USAGE, "unknown format '%s' (%s)", s, dtype_list(list, sizeof list));
    f = kvp_format_plain(d);
    while ((tok = strtok_r(NULL, ":", &save)) != NULL) {
        char *eq = strchr(tok, '=');
        if (!dtypes[d].grouped)
            return kvp_fail(err, KVP_ERR_USAGE, "format '%s': '%s' takes no settings", s, dtypes[d].name);
        if (!eq)
            return kvp_fail(err, KVP_ERR_USAGE, "format '%s': setting '%s' needs '=value'", s, tok);
        *eq = '\0';
        if ((st = parse_setting(&f, s, tok, eq + 1, err)) != KVP_OK)
            return st;
    }
    if (f.axis == KVP_AXIS_CHANNEL && f.residual % f.group != 0)
        return kvp_fail(err, KVP_ERR_USAGE,
                        "format '%s': 'residual' must be a multiple of 'group' with axis=channel (got %u and %u)",
                        s, f.residual, f.group);
    *out = f;
    return KVP_OK;
}

const char *kvp_format_name(const struct kvp_format *f, char *buf, uint32_t n)
{
    struct kvp_format def = kvp_format_plain(f->dtype);
    int o = snprintf(buf, n, "%s", dtypes[f->dtype].name);

    if (!dtypes[f->dtype].grouped)
        return buf;
#define APPEND(...) \
    do { if (o >= 0 && (uint32_t)o < n) o += snprintf(buf + o, n - (uint32_t)o, __VA_ARGS__); } while (0)
    if (f->group != def.group)
        APPEND(":group=%u", f->group);
    if (f->axis != def.axis)
        APPEND(":axis=%s", f->axis == KVP_AXIS_CHANNEL ? "channel" : "token");
    if (f->scale != def.scale)
        APPEND(":scale=%s", dtypes[f->scale].name);
    if (f->zero_point != def.zero_point)
        APPEND(":zp=%s", f->zero_point ? "yes" : "no");
    if (f->residual)
        APPEND(":residual=%u", f->residual);
    if (f->outliers_ppm)
        APPEND(":outliers=%g", f->outliers_ppm / 1e6);
#undef APPEND
    return buf;
}

enum kvp_status kvp_format_row_bytes(const struct kvp_format *f, uint64_t n, uint64_t *out,
                                     struct kvp_error *err)
{
    const struct kvp_dtype_info *t = &dtypes[f->dtype];
    uint64_t bits, bytes, meta;

    if (t->block_elems > 1) {
        if (n % t->block_elems != 0)
            return kvp_fail(err, KVP_ERR_RANGE,
                            "%s stores blocks of %u values, which does not divide a row of %llu",
                            t->name, t->block_elems, (unsigned long long)n);
        if (!kvp_mul(n / t->block_elems, t->block_bits / 8, out))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "row of %llu values overflows", (unsigned long long)n);
        return KVP_OK;
    }
    if (!kvp_mul(n, t->block_bits, &bits))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "row of %llu values overflows", (unsigned long long)n);
    bytes = kvp_cdiv(bits, 8);
    if (t->grouped && f->axis == KVP_AXIS_TOKEN) {
        if (!kvp_mul(kvp_cdiv(n, f->group), scale_bytes(f), &meta) || !kvp_add(bytes, meta, &bytes))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "row of %llu values overflows", (unsigned long long)n);
    }
    *out = bytes;
    return KVP_OK;
}

bool kvp_format_residual_bytes(const struct kvp_format *f, uint64_t n, uint64_t *out)
{
    return kvp_mul(n, dtypes[f->scale].block_bits / 8, out);
}

enum kvp_status kvp_format_check_paged(const struct kvp_format *f, const char *which, struct kvp_error *err)
{
    char name[64];
    if (!dtypes[f->dtype].grouped || (f->axis == KVP_AXIS_TOKEN && f->residual == 0))
        return KVP_OK;
    kvp_format_name(f, name, sizeof name);
    if (f->axis == KVP_AXIS_CHANNEL)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                        "%s format '%s': a paged cache stores each token as a row of equal bytes, and axis=channel "
                        "groups span %u tokens (use policy static or dynamic, or axis=token)",
                        which, name, f->group);
    return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                    "%s format '%s': a paged cache stores each token as a row of equal bytes, and a residual keeps "
                    "the newest %u tokens in %s until they age into the format (use policy static or dynamic)",
                    which, name, f->residual, dtypes[f->scale].name);
}

double kvp_format_bits_per_value(const struct kvp_format *f, uint64_t n)
{
    const struct kvp_dtype_info *t = &dtypes[f->dtype];
    double bits = (double)t->block_bits / t->block_elems;
    if (t->grouped && f->axis == KVP_AXIS_TOKEN && n)
        bits += 8.0 * scale_bytes(f) * (double)kvp_cdiv(n, f->group) / (double)n;
    else if (t->grouped)
        bits += 8.0 * scale_bytes(f) / f->group;
    if (f->outliers_ppm)
        bits += f->outliers_ppm / 1e6 * 64.0;
    return bits;
}
