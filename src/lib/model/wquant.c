/* wquant.c -- stored forms of quantized weights and their exact bytes
 * (layouts and sources in docs/model-format.md, "Quantized checkpoints"). */
#include "kvplan/wquant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kvplan/num.h"

/* ---- roles and classes ------------------------------------------------------ */

enum kvp_wclass kvp_wrole_class(enum kvp_wrole r)
{
    switch (r) {
    case KVP_WR_TOKEN_EMBD: case KVP_WR_POS_EMBD:
        return KVP_WC_EMBED;
    case KVP_WR_OUTPUT:
        return KVP_WC_OUTPUT;
    case KVP_WR_FFN_GATE: case KVP_WR_FFN_UP: case KVP_WR_FFN_DOWN:
        return KVP_WC_MLP;
    case KVP_WR_EXP_GATE: case KVP_WR_EXP_UP: case KVP_WR_EXP_DOWN:
        return KVP_WC_EXPERTS;
    case KVP_WR_SHEXP_GATE: case KVP_WR_SHEXP_UP: case KVP_WR_SHEXP_DOWN:
        return KVP_WC_SHARED;
    case KVP_WR_ROUTER:
        return KVP_WC_ROUTER;
    case KVP_WR_VECTOR: case KVP_WR_COUNT:
        return KVP_WC_VECTOR;
    case KVP_WR_TOWER:
        return KVP_WC_TOWER;
    default:
        return KVP_WC_ATTN;
    }
}

static const char *const class_names[KVP_WC_COUNT] = {
    [KVP_WC_EMBED] = "embeddings", [KVP_WC_OUTPUT] = "lm_head", [KVP_WC_ATTN] = "attention",
    [KVP_WC_MLP] = "mlp", [KVP_WC_EXPERTS] = "experts", [KVP_WC_SHARED] = "shared_experts",
    [KVP_WC_ROUTER] = "router", [KVP_WC_VECTOR] = "vectors", [KVP_WC_TOWER] = "towers",
};

const char *kvp_wclass_name(enum kvp_wclass c)
{
    return class_names[c];
}

bool kvp_wclass_from_name(const char *s, enum kvp_wclass *out)
{
    for (int i = 0; i < KVP_WC_VECTOR; i++)
        if (strcmp(s, class_names[i]) == 0) {
            *out = (enum kvp_wclass)i;
            return true;
        }
    return false;
}

/* ---- stored forms ------------------------------------------------------------ */

/* The settings after the head of a stored-form string ("block=128x128", "zp" ...). */
static enum kvp_status wq_setting(struct kvp_wq *q, const char *full, char *key, struct kvp_error *err)
{
    char *val = strchr(key, '=');
    uint64_t v, v2;
    char *x;

    if (val)
        *val++ = '\0';
    if (strcmp(key, "tensor") == 0 && val && kvp_parse_u64(val, &v) && v <= 1u << 20) {
        q->tensor_bytes = (uint32_t)v;
    } else if (q->kind == KVP_WQ_FP8 && strcmp(key, "block") == 0) {
        if (!val || !(x = strchr(val, 'x')))
            return kvp_fail(err, KVP_ERR_USAGE, "weight format '%s': 'block' must be ROWSxCOLS, each 1..65536", full);
        *x = '\0';
        if (!kvp_parse_u64(val, &v) || !kvp_parse_u64(x + 1, &v2) || v == 0 || v2 == 0 || v > 65536 || v2 > 65536)
            return kvp_fail(err, KVP_ERR_USAGE, "weight format '%s': 'block' must be ROWSxCOLS, each 1..65536", full);
        q->block_rows = (uint32_t)v;
        q->group = (uint32_t)v2;
    } else if (q->kind == KVP_WQ_FP8 && !val && kvp_dtype_from_name(key, &q->scale) &&
               (q->scale == KVP_DTYPE_F16 || q->scale == KVP_DTYPE_BF16 || q->scale == KVP_DTYPE_F32)) {
        ;
    } else if (q->kind == KVP_WQ_FP8 && strcmp(key, "scale") == 0 && val &&
               (strcmp(val, "channel") == 0 || strcmp(val, "tensor") == 0)) {
        q->block_rows = strcmp(val, "channel") == 0;
        q->group = 0;
    } else if (q->kind == KVP_WQ_PACKED && strcmp(key, "bits") == 0 && val && kvp_parse_u64(val, &v) && v >= 2 &&
               v <= 8) {
        q->bits = (uint8_t)v;
    } else if (q->kind == KVP_WQ_PACKED && strcmp(key, "group") == 0 && val && kvp_parse_u64(val, &v) &&
               v <= 65536) {
        q->group = (uint32_t)v;
    } else if (q->kind == KVP_WQ_PACKED && strcmp(key, "scale") == 0 && val && kvp_dtype_from_name(val, &q->scale) &&
               (q->scale == KVP_DTYPE_F16 || q->scale == KVP_DTYPE_BF16 || q->scale == KVP_DTYPE_F32)) {
        ;
    } else if (q->kind == KVP_WQ_PACKED && !val && strcmp(key, "zp") == 0) {
        q->zero_point = true;
    } else if (q->kind == KVP_WQ_PACKED && !val && strcmp(key, "g_idx") == 0) {
        q->g_idx = true;
    } else if (q->kind == KVP_WQ_BNB4 && !val && strcmp(key, "double") == 0) {
        q->double_quant = true;
    } else {
        return kvp_fail(err, KVP_ERR_USAGE, "weight format '%s': unknown or bad setting '%s%s%s'", full, key,
                        val ? "=" : "", val ? val : "");
    }
    return KVP_OK;
}

enum kvp_status kvp_wq_parse(const char *s, struct kvp_wq *out, struct kvp_error *err)
{
    char buf[128], head[128], *save = NULL, *tok;
    struct kvp_wq q;
    const char *colon = strchr(s, ':');
    size_t hn = colon ? (size_t)(colon - s) : strlen(s);
    enum kvp_status st;

    if (strlen(s) >= sizeof buf)
        return kvp_fail(err, KVP_ERR_USAGE, "weight format '%.40s...' is too long", s);
    memset(&q, 0, sizeof q); /* padding too: a model holding it is compared as bytes */
    q.kind = KVP_WQ_FORMAT;
    q.scale = KVP_DTYPE_F16;
    memcpy(head, s, hn);
    head[hn] = '\0';
    if (strcasecmp(head, "fp8") == 0 || strcasecmp(head, "fp8_e4m3") == 0 || strcasecmp(head, "fp8_e5m2") == 0) {
        q.kind = KVP_WQ_FP8;
        q.f = kvp_format_plain(strcasecmp(head, "fp8_e5m2") == 0 ? KVP_DTYPE_FP8_E5M2 : KVP_DTYPE_FP8_E4M3);
        q.scale = KVP_DTYPE_F32;
        q.block_rows = 0; /* per tensor unless a setting says */
        if (!colon) {     /* a bare fp8 is the plain format: codes only */
            q.kind = KVP_WQ_FORMAT;
            memcpy(out, &q, sizeof q);
            return KVP_OK;
        }
    } else if (strcasecmp(head, "packed") == 0) {
        q.kind = KVP_WQ_PACKED;
        q.bits = 4;
        q.group = 128;
    } else if (strcasecmp(head, "nf4") == 0 || strcasecmp(head, "fp4") == 0) {
        q.kind = KVP_WQ_BNB4;
        q.nf4 = strcasecmp(head, "nf4") == 0;
    } else if (strcasecmp(s, "int8:bnb") == 0) {
        q.kind = KVP_WQ_BNB8;
        memcpy(out, &q, sizeof q);
        return KVP_OK;
    } else {
        /* a format.h string, optionally ending in :tensor=N */
        const char *t = strstr(s, ":tensor=");
        char fbuf[128];
        size_t fn = t ? (size_t)(t - s) : strlen(s);
        memcpy(fbuf, s, fn);
        fbuf[fn] = '\0';
        if ((st = kvp_format_parse(fbuf, &q.f, err)) != KVP_OK)
            return st;
        if (t) {
            strcpy(buf, t + 1);
            if ((st = wq_setting(&q, s, buf, err)) != KVP_OK)
                return st;
        }
        memcpy(out, &q, sizeof q);
        return KVP_OK;
    }
    strcpy(buf, s);
    tok = strtok_r(buf, ":", &save);
    while ((tok = strtok_r(NULL, ":", &save)) != NULL)
        if ((st = wq_setting(&q, s, tok, err)) != KVP_OK)
            return st;
    memcpy(out, &q, sizeof q);
    return KVP_OK;
}

const char *kvp_wq_name(const struct kvp_wq *q, char *buf, uint32_t n)
{
    int o = 0;
#define APPEND(...) \
    do { if (o >= 0 && (uint32_t)o < n) o += snprintf(buf + o, n - (uint32_t)o, __VA_ARGS__); } while (0)
    buf[0] = '\0';
    switch (q->kind) {
    case KVP_WQ_FORMAT:
        kvp_format_name(&q->f, buf, n);
        o = (int)strlen(buf);
        break;
    case KVP_WQ_FP8:
        APPEND("%s", kvp_dtype_info(q->f.dtype)->name);
        if (q->group)
            APPEND(":block=%ux%u", q->block_rows, q->group);
        else
            APPEND(":scale=%s", q->block_rows ? "channel" : "tensor");
        if (q->scale != KVP_DTYPE_F32)
            APPEND(":%s", kvp_dtype_info(q->scale)->name);
        break;
    case KVP_WQ_PACKED:
        APPEND("packed:bits=%u:group=%u", q->bits, q->group);
        if (q->scale != KVP_DTYPE_F16)
            APPEND(":scale=%s", kvp_dtype_info(q->scale)->name);
        if (q->zero_point)
            APPEND(":zp");
        if (q->g_idx)
            APPEND(":g_idx");
        break;
    case KVP_WQ_BNB4:
        APPEND("%s%s", q->nf4 ? "nf4" : "fp4", q->double_quant ? ":double" : "");
        break;
    default:
        APPEND("int8:bnb");
        break;
    }
    if (q->tensor_bytes)
        APPEND(":tensor=%u", q->tensor_bytes);
#undef APPEND
    return buf;
}

/* Bytes of one rows x cols matrix in q (not KVP_WQ_FORMAT), or false on overflow. */
static bool matrix_bytes(const struct kvp_wq *q, uint64_t rows, uint64_t cols, uint64_t *out)
{
    uint64_t n, codes, meta = 0, sb = kvp_dtype_info(q->scale)->block_bits / 8;

    if (!kvp_mul(rows, cols, &n))
        return false;
    switch (q->kind) {
    case KVP_WQ_FP8: /* e4m3 codes; scale_inv f32 per block, row or tensor */
        codes = n;
        meta = q->group ? kvp_cdiv(rows, q->block_rows) * kvp_cdiv(cols, q->group) * sb
                        : (q->block_rows ? rows * sb : sb);
        break;
    case KVP_WQ_PACKED: { /* qweight int32 [ceil(cols*bits/32), rows]; scales [groups, rows];
                           * qzeros int32 [groups, ceil(rows*bits/32)]; g_idx int32 [cols] */
        uint64_t groups = q->group ? kvp_cdiv(cols, q->group) : 1;
        codes = kvp_cdiv(cols * q->bits, 32) * 4 * rows;
        meta = groups * rows * sb;
        if (q->zero_point)
            meta += groups * kvp_cdiv(rows * q->bits, 32) * 4;
        if (q->g_idx)
            meta += cols * 4;
        break;
    }
    case KVP_WQ_BNB4: { /* uint8 codes [n/2]; absmax per 64: f32, or uint8 + f32 per 256 absmax
                         * + the 256-entry f32 nested code and its f32 offset; the 16-entry f32 quant_map */
        uint64_t blocks = kvp_cdiv(n, 64);
        codes = kvp_cdiv(n, 2);
        meta = (q->double_quant ? blocks + kvp_cdiv(blocks, 256) * 4 + 256 * 4 + 4 : blocks * 4) + 16 * 4;
        break;
    }
    case KVP_WQ_BNB8: /* int8 codes + SCB: f32 per row */
        codes = n;
        meta = rows * 4;
        break;
    default: /* KVP_WQ_FORMAT: rows of its format, priced by the caller */
        return false;
    }
    /* every term above is at most a few times n, which did not overflow: only the sum can */
    return kvp_add(codes, meta, out);
}

enum kvp_status kvp_wq_tensor_bytes(const struct kvp_wq *q, const struct kvp_wtensor *t, uint64_t *out,
                                    struct kvp_error *err)
{
    uint64_t one, row;
    bool ok;
    if (q->kind == KVP_WQ_FORMAT) { /* a block type that does not divide the row is an error, not an overflow */
        enum kvp_status st = kvp_format_row_bytes(&q->f, t->cols, &row, err);
        if (st != KVP_OK)
            return st;
        ok = kvp_mul(t->rows, row, &one);
    } else {
        ok = t->rows <= (1ull << 40) && t->cols <= (1ull << 40) && matrix_bytes(q, t->rows, t->cols, &one);
    }
    if (!ok || !kvp_add(one, q->tensor_bytes, &one) || !kvp_mul(one, t->count, out))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "a %llu x %llu weight overflows 64 bits",
                        (unsigned long long)t->rows, (unsigned long long)t->cols);
    return KVP_OK;
}

/* ---- the deployment's choice --------------------------------------------------- */

enum kvp_status kvp_wstore_parse(const char *s, bool gguf, struct kvp_wstore *out, struct kvp_error *err)
{
    struct kvp_wstore ws = {.kind = KVP_WSTORE_CHECKPOINT};
    struct kvp_wq q;
    enum kvp_dtype d;
    uint32_t ftype;
    enum kvp_status st;

    if (strcmp(s, "stored") == 0 || strcmp(s, "checkpoint") == 0) {
        *out = ws;
        return KVP_OK;
    }
    /* a file type that is no block type (q4_k_m), or any file type in a GGUF context */
    if (kvp_gguf_ftype_from_name(s, &ftype) && (gguf || !kvp_dtype_from_name(s, &d))) {
        ws.kind = KVP_WSTORE_GGUF;
        ws.ftype = ftype;
        *out = ws;
        return KVP_OK;
    }
    if ((st = kvp_wq_parse(s, &q, err)) != KVP_OK)
        return st;
    ws.kind = KVP_WSTORE_FORMAT;
    ws.q = q;
    *out = ws;
    return KVP_OK;
}

const char *kvp_wstore_name(const struct kvp_wstore *ws, char *buf, uint32_t n)
{
    const char *name;
    switch (ws->kind) {
    case KVP_WSTORE_CHECKPOINT:
        snprintf(buf, n, "stored");
        return buf;
    case KVP_WSTORE_GGUF:
        name = kvp_gguf_ftype_name(ws->ftype);
        snprintf(buf, n, "%s", name ? name : "?");
        for (char *p = buf; *p; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        return buf;
    default:
        return kvp_wq_name(&ws->q, buf, n);
    }
}
