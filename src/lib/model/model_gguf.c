/* model_gguf.c -- read a model's shape from a GGUF header.
 *
 * A GGUF file (v2 and v3, little-endian) starts with
 *
 *     offset 0   "GGUF"            magic, 4 bytes
 *     offset 4   u32 version       2 or 3
 *     offset 8   u64 n_tensors     tensor infos after the key/value pairs
 *     offset 16  u64 n_kv          key/value pairs
 *     offset 24  n_kv pairs        key: u64 length + bytes; u32 type; value
 *     then       n_tensors infos   name; u32 n_dims; u64 ne[n_dims]; u32 type; u64 offset
 *
 * The data handed in may be a prefix of a much larger file: only the header
 * is read. Every length and count is checked against the bytes left before
 * it is used, so a hostile header gives an error naming the key and the file
 * offset, never a crash, a huge allocation or a long loop. Nothing is
 * allocated: values are kept as offsets into the caller's buffer.
 *
 * The header is walked twice. The first walk checks the structure of every
 * pair and finds general.architecture; the second (which cannot fail on
 * structure, only on a key kvplan reads appearing twice) takes the
 * `<arch>.` keys. Then the tensor infos are read: every tensor's type and
 * exact bytes (ne1*ne2*ne3 rows of ne0 values in its ggml type) make the
 * model's weight table (m->wtable, the weights as stored), and
 * output.weight (absent = tied embeddings) and token_embd.weight (vocab)
 * are noted.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kvplan/model.h"
#include "kvplan/num.h"
#include "kvplan/wquant.h"

#include "gguf_types.h"

/* ---- value types (gguf_types.h) ---------------------------------------- */

static const char *const type_names[GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};

/* Bytes of one fixed-size value; 0 for string and array. */
static uint64_t type_size(uint32_t t)
{
    static const uint8_t size[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < GGUF_TYPE_COUNT ? size[t] : 0;
}

static bool type_is_int(uint32_t t)
{
    return t <= GGUF_INT32 || t == GGUF_BOOL || t == GGUF_UINT64 || t == GGUF_INT64;
}

static bool type_is_signed(uint32_t t)
{
    return t == GGUF_INT8 || t == GGUF_INT16 || t == GGUF_INT32 || t == GGUF_INT64;
}

#define MAX_DIMS 4            /* GGML_MAX_DIMS */
#define MIN_KV_BYTES 13       /* u64 key length + u32 type + a 1-byte value */
#define MIN_TENSOR_BYTES 24   /* u64 name length + u32 n_dims + u32 type + u64 offset */

/* ---- the cursor: checked little-endian reads -------------------------- */

struct cursor {
    const uint8_t *data;
    uint64_t len;        /* bytes in data (maybe a prefix of the file) */
    uint64_t pos;        /* offset of the next unread byte */
    const char *file;
    struct kvp_error *err;
    /* what is being read, for messages, formatted by what() only on an error
     * (formatting it for each of 4 million keys took a second): */
    const char *item;    /* "key", "tensor", or the whole phrase ("the preamble") */
    uint64_t index;      /* UINT64_MAX: item is the whole phrase */
    const char *name;    /* the item's name once read, else NULL */
    uint64_t name_len;
    char what[160];
};

static uint64_t left(const struct cursor *c) { return c->len - c->pos; }

static void reading(struct cursor *c, const char *item, uint64_t index)
{
    c->item = item;
    c->index = index;
    c->name = NULL;
}

/* "key 3 ('llama.block_count')", "key 3 name" (before the name is read), "the preamble". */
static const char *what(struct cursor *c)
{
    if (c->index == UINT64_MAX)
        return c->item;
    if (!c->name)
        snprintf(c->what, sizeof c->what, "%s %" PRIu64 " name", c->item, c->index);
    else
        snprintf(c->what, sizeof c->what, "%s %" PRIu64 " ('%.*s')", c->item, c->index,
                 c->name_len > 80 ? 80 : (int)c->name_len, c->name);
    return c->what;
}

/* Fail unless n bytes remain at the cursor. */
static enum kvp_status need(struct cursor *c, uint64_t n)
{
    if (n <= left(c))
        return KVP_OK;
    return kvp_fail_at(c->err, KVP_ERR_TRUNCATED, c->file, 0, 0,
                       "truncated header: %s needs %" PRIu64 " bytes at offset %" PRIu64 ", %" PRIu64 " left",
                       what(c), n, c->pos, left(c));
}

/* Little-endian load of n (<= 8) bytes at p. */
static uint64_t load_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static enum kvp_status read_u32(struct cursor *c, uint32_t *out)
{
    enum kvp_status st = need(c, 4);
    if (st == KVP_OK) {
        *out = (uint32_t)load_le(c->data + c->pos, 4);
        c->pos += 4;
    }
    return st;
}

static enum kvp_status read_u64(struct cursor *c, uint64_t *out)
{
    enum kvp_status st = need(c, 8);
    if (st == KVP_OK) {
        *out = load_le(c->data + c->pos, 8);
        c->pos += 8;
    }
    return st;
}

/* A GGUF string: u64 byte length, then the bytes (no NUL). *s points into data. */
static enum kvp_status read_str(struct cursor *c, const char **s, uint64_t *n)
{
    enum kvp_status st;
    if ((st = read_u64(c, n)) != KVP_OK || (st = need(c, *n)) != KVP_OK)
        return st;
    *s = (const char *)c->data + c->pos;
    c->pos += *n;
    return KVP_OK;
}

/* ---- values ------------------------------------------------------------ */

/* One value, as read: scalars decoded, strings and arrays as offsets. */
struct gval {
    uint32_t type;
    uint64_t u;          /* integer or bool value (two's complement for signed) */
    double f;            /* float value */
    const char *s;       /* STRING: bytes in data */
    uint64_t slen;
    uint32_t elem;       /* ARRAY: element type */
    uint64_t count;      /* ARRAY: element count */
    uint64_t at;         /* ARRAY: offset of the first element */
};

static enum kvp_status bad_type(struct cursor *c, uint32_t t, const char *where)
{
    return kvp_fail_at(c->err, KVP_ERR_SYNTAX, c->file, 0, 0,
                       "%s has unknown %stype %" PRIu32 " at offset %" PRIu64, what(c), where, t,
                       c->pos - 4);
}

/* Read a fixed-size scalar of type t. */
static enum kvp_status read_scalar(struct cursor *c, uint32_t t, struct gval *v)
{
    uint64_t n = type_size(t), raw;
    enum kvp_status st = need(c, n);
    if (st != KVP_OK)
        return st;
    raw = load_le(c->data + c->pos, (unsigned)n);
    c->pos += n;
    v->type = t;
    v->u = raw;
    if (type_is_signed(t) && n < 8 && (raw >> (8 * n - 1)) & 1)
        v->u = raw | ~((UINT64_C(1) << (8 * n)) - 1); /* sign-extend */
    if (t == GGUF_FLOAT32) {
        float f;
        uint32_t r32 = (uint32_t)raw;
        memcpy(&f, &r32, 4);
        v->f = f;
    } else if (t == GGUF_FLOAT64) {
        memcpy(&v->f, &raw, 8);
    }
    return KVP_OK;
}

/* Skip an array's elements, checking the count against the bytes left first:
 * fixed-size elements in one step, strings one by one (each takes at least
 * 8 bytes, so the loop is bounded by the bytes left). */
static enum kvp_status skip_array(struct cursor *c, struct gval *v)
{
    uint64_t size = type_size(v->elem);
    if (v->elem == GGUF_ARRAY)
        return kvp_fail_at(c->err, KVP_ERR_UNSUPPORTED, c->file, 0, 0,
                           "%s is an array of arrays at offset %" PRIu64 " (not supported)", what(c),
                           v->at - 12);
    if (v->elem == GGUF_STRING) {
        if (v->count > left(c) / 8)
            return kvp_fail_at(c->err, KVP_ERR_TRUNCATED, c->file, 0, 0,
                               "truncated header: %s has %" PRIu64 " strings, more than fit in the %" PRIu64
                               " bytes left at offset %" PRIu64,
                               what(c), v->count, left(c), c->pos);
        for (uint64_t i = 0; i < v->count; i++) {
            const char *s;
            uint64_t n;
            enum kvp_status st = read_str(c, &s, &n);
            if (st != KVP_OK)
                return st;
        }
        return KVP_OK;
    }
    if (v->count > left(c) / size)
        return kvp_fail_at(c->err, KVP_ERR_TRUNCATED, c->file, 0, 0,
                           "truncated header: %s has %" PRIu64 " %s values, more than fit in the %" PRIu64
                           " bytes left at offset %" PRIu64,
                           what(c), v->count, type_names[v->elem], left(c), c->pos);
    c->pos += v->count * size; /* cannot overflow: count * size <= left */
    return KVP_OK;
}

/* Read one value of type t (already read) at the cursor. */
static enum kvp_status read_value(struct cursor *c, uint32_t t, struct gval *v)
{
    enum kvp_status st;
    memset(v, 0, sizeof *v);
    v->type = t;
    if (t >= GGUF_TYPE_COUNT)
        return bad_type(c, t, "value ");
    if (t == GGUF_STRING)
        return read_str(c, &v->s, &v->slen);
    if (t != GGUF_ARRAY)
        return read_scalar(c, t, v);
    if ((st = read_u32(c, &v->elem)) != KVP_OK)
        return st;
    if (v->elem >= GGUF_TYPE_COUNT)
        return bad_type(c, v->elem, "array element ");
    if ((st = read_u64(c, &v->count)) != KVP_OK)
        return st;
    v->at = c->pos;
    return skip_array(c, v);
}

/* Element i of an integer array v (already bounds-checked by skip_array). */
static uint64_t array_int(const struct cursor *c, const struct gval *v, uint64_t i)
{
    uint64_t n = type_size(v->elem), raw = load_le(c->data + v->at + i * n, (unsigned)n);
    if (type_is_signed(v->elem) && n < 8 && (raw >> (8 * n - 1)) & 1)
        raw |= ~((UINT64_C(1) << (8 * n)) - 1);
    return raw;
}

/* ---- what the header says ------------------------------------------------ */

/* One key kvplan reads: its value and whether it was there. */
struct kv {
    bool set;
    struct gval v;
    uint64_t index; /* which key/value pair it came from */
};

struct header {
    uint32_t version;
    uint64_t n_tensors, n_kv;
    uint64_t kv_end;            /* offset where the tensor infos start */
    char arch[64];              /* general.architecture */
    struct kv name, file_type, tokens, alignment, split_count, split_no;
    /* <arch>.* keys */
    struct kv block_count, embedding_length, feed_forward_length, context_length, vocab_size;
    struct kv head_count, head_count_kv, key_length, value_length;
    struct kv sliding_window, sliding_window_pattern;
    struct kv expert_count, expert_used_count, expert_ff, expert_shared_count, expert_shared_ff;
    struct kv leading_dense, kv_lora_rank, q_lora_rank, rope_dims, key_length_mla, value_length_mla;
    /* tensor infos */
    bool has_output;
    uint64_t embd_rows;         /* token_embd.weight ne[1], 0 if not seen */
    struct {
        uint64_t tensors, params, bytes;
    } by_dtype[KVP_DTYPE_COUNT]; /* the tensor table, summed per ggml type */
    uint64_t expert_bytes;      /* of tensors named *_exps* (routed experts) */
    uint64_t file_bytes;        /* the data section's end: what the file must hold */
    struct kvp_wplace place[KVP_WPLACE_MAX]; /* by where llama.cpp can put them (wquant.h) */
    struct kvp_wplace rope_freqs; /* copied into every layer (llama-model.cpp: TENSOR_DUPLICATED) */
};
_Static_assert(KVP_WPLACE_MAX == KVP_WPLACE_LAYER + KVP_MAX_LAYERS, "a placement group per layer");

/* Keys under `<arch>.`, with where each goes. */
struct key_slot {
    const char *suffix;
    size_t offset;              /* of the struct kv in struct header */
};

#define SLOT(s, f) {s, offsetof(struct header, f)}
static const struct key_slot arch_keys[] = {
    SLOT("block_count", block_count),
    SLOT("embedding_length", embedding_length),
    SLOT("feed_forward_length", feed_forward_length),
    SLOT("context_length", context_length),
    SLOT("vocab_size", vocab_size),
    SLOT("attention.head_count", head_count),
    SLOT("attention.head_count_kv", head_count_kv),
    SLOT("attention.key_length", key_length),
    SLOT("attention.value_length", value_length),
    SLOT("attention.sliding_window", sliding_window),
    SLOT("attention.sliding_window_pattern", sliding_window_pattern),
    SLOT("expert_count", expert_count),
    SLOT("expert_used_count", expert_used_count),
    SLOT("expert_feed_forward_length", expert_ff),
    SLOT("expert_shared_count", expert_shared_count),
    SLOT("expert_shared_feed_forward_length", expert_shared_ff),
    SLOT("leading_dense_block_count", leading_dense),
    SLOT("attention.kv_lora_rank", kv_lora_rank),
    SLOT("attention.q_lora_rank", q_lora_rank),
    SLOT("rope.dimension_count", rope_dims),
    SLOT("attention.key_length_mla", key_length_mla),
    SLOT("attention.value_length_mla", value_length_mla),
};

static bool key_is(const char *key, uint64_t n, const char *want)
{
    return strlen(want) == n && memcmp(key, want, n) == 0;
}

/* Store pair i into slot; a key seen twice is refused, as llama.cpp's reader does. */
static enum kvp_status store(struct cursor *c, struct kv *slot, const char *key, uint64_t n, const struct gval *v,
                             uint64_t i)
{
    if (slot->set)
        return kvp_fail_at(c->err, KVP_ERR_SYNTAX, c->file, 0, 0,
                           "duplicate key '%.*s' (keys %" PRIu64 " and %" PRIu64 ")", n > 80 ? 80 : (int)n, key,
                           slot->index, i);
    *slot = (struct kv){true, *v, i};
    return KVP_OK;
}

/* Store the value of pair i (key) in h when kvplan reads it. arch_known: the second walk. */
static enum kvp_status take_kv(struct cursor *c, struct header *h, const char *key, uint64_t n, const struct gval *v,
                               uint64_t i, bool arch_known)
{
    size_t alen = strlen(h->arch);

    if (!arch_known) {
        if (key_is(key, n, "general.architecture") && v->type == GGUF_STRING) {
            uint64_t k = v->slen < sizeof h->arch - 1 ? v->slen : sizeof h->arch - 1;
            memcpy(h->arch, v->s, k);
            h->arch[k] = '\0';
        }
        return KVP_OK;
    }
    if (key_is(key, n, "general.name"))
        return store(c, &h->name, key, n, v, i);
    if (key_is(key, n, "general.file_type"))
        return store(c, &h->file_type, key, n, v, i);
    if (key_is(key, n, "general.alignment"))
        return store(c, &h->alignment, key, n, v, i);
    if (key_is(key, n, "tokenizer.ggml.tokens"))
        return store(c, &h->tokens, key, n, v, i);
    if (key_is(key, n, "split.count")) /* llama.cpp gguf-split: LLM_KV_SPLIT_COUNT */
        return store(c, &h->split_count, key, n, v, i);
    if (key_is(key, n, "split.no"))
        return store(c, &h->split_no, key, n, v, i);
    if (alen == 0 || n <= alen + 1 || memcmp(key, h->arch, alen) != 0 || key[alen] != '.')
        return KVP_OK;
    for (size_t j = 0; j < sizeof arch_keys / sizeof arch_keys[0]; j++)
        if (key_is(key + alen + 1, n - alen - 1, arch_keys[j].suffix))
            return store(c, (struct kv *)((char *)h + arch_keys[j].offset), key, n, v, i);
    return KVP_OK;
}

/* Walk the n_kv pairs from offset 24, checking each; take_kv stores the ones kvplan reads. */
static enum kvp_status walk_kvs(struct cursor *c, struct header *h, bool arch_known)
{
    enum kvp_status st;

    c->pos = 24;
    for (uint64_t i = 0; i < h->n_kv; i++) {
        const char *key;
        uint64_t klen;
        uint32_t t;
        struct gval v;

        reading(c, "key", i);
        if ((st = read_str(c, &key, &klen)) != KVP_OK)
            return st;
        c->name = key;
        c->name_len = klen;
        if ((st = read_u32(c, &t)) != KVP_OK || (st = read_value(c, t, &v)) != KVP_OK)
            return st;
        if ((st = take_kv(c, h, key, klen, &v, i, arch_known)) != KVP_OK)
            return st;
    }
    h->kv_end = c->pos;
    return KVP_OK;
}

/* The fixed part: magic, version, n_tensors, n_kv (offsets 0..23). */
static enum kvp_status read_preamble(struct cursor *c, struct header *h)
{
    enum kvp_status st;

    reading(c, "the preamble", UINT64_MAX);
    if ((st = need(c, 4)) != KVP_OK)
        return st;
    if (memcmp(c->data, "GGUF", 4) != 0)
        return kvp_fail_at(c->err, KVP_ERR_SYNTAX, c->file, 0, 0, "not a GGUF file (no 'GGUF' magic)");
    c->pos = 4;
    if ((st = read_u32(c, &h->version)) != KVP_OK)
        return st;
    if (h->version == 0x02000000u || h->version == 0x03000000u)
        return kvp_fail_at(c->err, KVP_ERR_UNSUPPORTED, c->file, 0, 0,
                           "big-endian GGUF is not supported (version field 0x%08" PRIx32 ")", h->version);
    if (h->version != 2 && h->version != 3)
        return kvp_fail_at(c->err, KVP_ERR_UNSUPPORTED, c->file, 0, 0,
                           "GGUF version %" PRIu32 " is not supported (kvplan reads versions 2 and 3)",
                           h->version);
    if ((st = read_u64(c, &h->n_tensors)) != KVP_OK || (st = read_u64(c, &h->n_kv)) != KVP_OK)
        return st;
    if (h->n_kv > left(c) / MIN_KV_BYTES)
        return kvp_fail_at(c->err, KVP_ERR_TRUNCATED, c->file, 0, 0,
                           "truncated header: %" PRIu64 " key/value pairs do not fit in the %" PRIu64
                           " bytes left at offset %" PRIu64,
                           h->n_kv, left(c), c->pos);
    return KVP_OK;
}

/* Whether the n bytes at name contain the string part. */
static bool name_has(const char *name, uint64_t n, const char *part)
{
    size_t k = strlen(part);
    for (uint64_t i = 0; i + k <= n; i++)
        if (memcmp(name + i, part, k) == 0)
            return true;
    return false;
}

/* The group (KVP_WPLACE_*) llama.cpp places a tensor by, from its name
 * (llama-model.cpp create_tensor: the input, output or layer buft list);
 * NULL for rope_freqs, which every layer gets. Past KVP_MAX_LAYERS: none. */
static struct kvp_wplace *place_of(struct header *h, const char *name, uint64_t n)
{
    uint64_t il = 0, i = 4;
    if (n > 4 && memcmp(name, "blk.", 4) == 0) {
        for (; i < n && name[i] >= '0' && name[i] <= '9' && il < KVP_MAX_LAYERS; i++)
            il = il * 10 + (uint64_t)(name[i] - '0');
        return i > 4 && i < n && name[i] == '.' && il < KVP_MAX_LAYERS ? &h->place[KVP_WPLACE_LAYER + il] : NULL;
    }
    if (n >= 11 && memcmp(name, "rope_freqs.", 11) == 0)
        return &h->rope_freqs;
    if ((n >= 11 && memcmp(name, "token_embd.", 11) == 0) || (n >= 14 && memcmp(name, "position_embd.", 14) == 0))
        return &h->place[KVP_WPLACE_INPUT];
    return &h->place[KVP_WPLACE_OUTPUT]; /* output_norm, output and any other global tensor */
}

/* Add a tensor of `bytes` (ne0 values a row, ggml type `type`) to its group: padded
 * as the CPU buffer pads it, and as a CUDA device does (wquant.h). */
static bool place_tensor(struct header *h, const char *name, uint64_t nlen, uint32_t type, uint64_t ne0,
                         uint64_t bytes)
{
    enum kvp_dtype d;
    const struct kvp_dtype_info *info;
    struct kvp_wplace *p = place_of(h, name, nlen), one;
    uint64_t gpu = bytes, pad;
    bool exps = name_has(name, nlen, "_exps");

    if (!kvp_dtype_from_ggml(type, &d)) /* count_tensor took it: never */
        return false;
    info = kvp_dtype_info(d);
    if (!p)
        return true; /* an MTP layer past the text model's: not loaded */
    if (info->block_elems > 1 && ne0 % 512 != 0) {
        pad = (512 - ne0 % 512) / info->block_elems * (info->block_bits / 8);
        if (!kvp_add(gpu, pad, &gpu))
            return false;
    }
    if (!kvp_add(bytes, 31, &one.host) || !kvp_add(gpu, 127, &one.gpu))
        return false;
    one.host = one.host / 32 * 32;
    one.gpu = one.gpu / 128 * 128;
    if (key_is(name, nlen, "token_embd.weight"))
        h->place[KVP_WPLACE_EMBD] = one;
    return kvp_add(p->host, one.host, &p->host) && kvp_add(p->gpu, one.gpu, &p->gpu) &&
           (!exps || (kvp_add(p->exp_host, one.host, &p->exp_host) && kvp_add(p->exp_gpu, one.gpu, &p->exp_gpu)));
}

/* Add one tensor of ggml type `type` and shape ne to h's table: its bytes are
 * ne1*ne2*ne3 rows of ne0 values (ggml_nbytes for a contiguous tensor), every
 * product checked. at: the offset of the type field, for messages. */
static enum kvp_status count_tensor(struct cursor *c, struct header *h, const char *name, uint64_t nlen,
                                    uint32_t type, const uint64_t ne[MAX_DIMS], uint64_t at, uint64_t *out)
{
    enum kvp_dtype d;
    const struct kvp_dtype_info *info;
    uint64_t rows, params, row, bytes;
    struct kvp_error inner;

    if (!kvp_dtype_from_ggml(type, &d))
        return kvp_fail_at(c->err, KVP_ERR_UNSUPPORTED, c->file, 0, 0,
                           "%s has unknown ggml type %" PRIu32 " at offset %" PRIu64, what(c), type, at);
    info = kvp_dtype_info(d);
    if (ne[0] % info->block_elems != 0)
        return kvp_fail_at(c->err, KVP_ERR_SYNTAX, c->file, 0, 0,
                           "%s has rows of %" PRIu64 " values, not a multiple of the %s block of %" PRIu32
                           " at offset %" PRIu64,
                           what(c), ne[0], info->name, info->block_elems, at);
    if (!kvp_mul3(ne[1], ne[2], ne[3], &rows) || !kvp_mul(rows, ne[0], &params))
        return kvp_fail_at(c->err, KVP_ERR_OVERFLOW, c->file, 0, 0,
                           "%s has %" PRIu64 " x %" PRIu64 " x %" PRIu64 " x %" PRIu64
                           " values, more than 2^64, at offset %" PRIu64,
                           what(c), ne[0], ne[1], ne[2], ne[3], at);
    if (kvp_format_row_bytes(&(struct kvp_format){.dtype = d}, ne[0], &row, &inner) != KVP_OK ||
        !kvp_mul(row, rows, &bytes) || !kvp_add(h->by_dtype[d].bytes, bytes, &h->by_dtype[d].bytes) ||
        !kvp_add(h->by_dtype[d].params, params, &h->by_dtype[d].params))
        return kvp_fail_at(c->err, KVP_ERR_OVERFLOW, c->file, 0, 0,
                           "%s: its bytes in %s overflow 64 bits at offset %" PRIu64, what(c), info->name, at);
    h->by_dtype[d].tensors++;
    if (name_has(name, nlen, "_exps") && !kvp_add(h->expert_bytes, bytes, &h->expert_bytes))
        return kvp_fail_at(c->err, KVP_ERR_OVERFLOW, c->file, 0, 0,
                           "%s: expert bytes overflow 64 bits at offset %" PRIu64, what(c), at);
    *out = bytes;
    return KVP_OK;
}

/* general.alignment, 32 by default, a power of two (llama.cpp gguf.cpp
 * gguf_init_from_file_impl: "alignment %zu is not a power of 2"). */
static enum kvp_status alignment_of(const struct cursor *c, const struct header *h, uint64_t *out)
{
    const struct kv *k = &h->alignment;
    *out = 32;
    if (!k->set)
        return KVP_OK;
    if (!type_is_int(k->v.type) || k->v.u == 0 || k->v.u > UINT32_MAX || (k->v.u & (k->v.u - 1)) != 0)
        return kvp_fail_at(c->err, KVP_ERR_SCHEMA, c->file, 0, 0,
                           "'general.alignment' must be a power of 2 below 2^32 (key %" PRIu64 ")", k->index);
    *out = k->v.u;
    return KVP_OK;
}

/* Tensor infos from kv_end: the table of types and bytes; output.weight and
 * token_embd.weight's ne[1]. Dimensions past n_dims are 1, as in ggml. The
 * tensors lie one after the other in the data section, in the order of
 * their infos: each one's offset is the sum of the ones before, each
 * padded to the alignment, as llama.cpp requires (gguf.cpp
 * gguf_init_from_file_impl: "tensor '%s' has offset %" PRIu64 ", expected
 * %zu"): no tensor overlaps another, no byte is counted twice, and the end
 * of the data section is what the file must hold (h->file_bytes). */
static enum kvp_status read_tensor_infos(struct cursor *c, struct header *h)
{
    enum kvp_status st;
    uint64_t align, data = 0, start;

    if ((st = alignment_of(c, h, &align)) != KVP_OK)
        return st;

    c->pos = h->kv_end;
    if (h->n_tensors > left(c) / MIN_TENSOR_BYTES)
        return kvp_fail_at(c->err, KVP_ERR_TRUNCATED, c->file, 0, 0,
                           "truncated header: %" PRIu64 " tensor infos do not fit in the %" PRIu64
                           " bytes left at offset %" PRIu64,
                           h->n_tensors, left(c), c->pos);
    for (uint64_t i = 0; i < h->n_tensors; i++) {
        const char *name;
        uint64_t nlen, ne[MAX_DIMS] = {1, 1, 1, 1}, offset, type_at, bytes = 0;
        uint32_t n_dims, type;

        reading(c, "tensor", i);
        if ((st = read_str(c, &name, &nlen)) != KVP_OK)
            return st;
        c->name = name;
        c->name_len = nlen;
        if ((st = read_u32(c, &n_dims)) != KVP_OK)
            return st;
        if (n_dims > MAX_DIMS)
            return kvp_fail_at(c->err, KVP_ERR_SYNTAX, c->file, 0, 0,
                               "%s has %" PRIu32 " dimensions at offset %" PRIu64 " (at most %d)", what(c),
                               n_dims, c->pos - 4, MAX_DIMS);
        for (uint32_t d = 0; d < n_dims; d++)
            if ((st = read_u64(c, &ne[d])) != KVP_OK)
                return st;
        type_at = c->pos;
        if ((st = read_u32(c, &type)) != KVP_OK || (st = read_u64(c, &offset)) != KVP_OK ||
            (st = count_tensor(c, h, name, nlen, type, ne, type_at, &bytes)) != KVP_OK)
            return st;
        if (offset != data)
            return kvp_fail_at(c->err, KVP_ERR_SYNTAX, c->file, 0, 0,
                               "%s has offset %" PRIu64 ", expected %" PRIu64
                               " (the tensors before it, each padded to %" PRIu64 " bytes; llama.cpp refuses it)",
                               what(c), offset, data, align);
        if (!place_tensor(h, name, nlen, type, ne[0], bytes) || !kvp_add(bytes, align - 1, &bytes) ||
            !kvp_add(data, bytes / align * align, &data))
            return kvp_fail_at(c->err, KVP_ERR_OVERFLOW, c->file, 0, 0,
                               "%s: the data section overflows 64 bits at offset %" PRIu64, what(c), type_at);
        if (key_is(name, nlen, "output.weight"))
            h->has_output = true;
        if (key_is(name, nlen, "token_embd.weight") && n_dims >= 2)
            h->embd_rows = ne[1]; /* ne0 is the innermost (hidden) dim */
    }
    start = c->pos + (align - c->pos % align) % align; /* c->pos <= len, far below 2^64 - align */
    if (!kvp_add(start, data, &h->file_bytes))
        return kvp_fail_at(c->err, KVP_ERR_OVERFLOW, c->file, 0, 0,
                           "the data section of %" PRIu64 " bytes at offset %" PRIu64 " overflows 64 bits", data,
                           start);
    return KVP_OK;
}

/* ---- from header to model -------------------------------------------------- */

/* Context for the model-building checks: names keys as `<arch>.suffix`. */
struct build {
    const struct cursor *c;
    const struct header *h;
    struct kvp_model *m;
    const char *file;
    struct kvp_error *err;
};

/* The full key name of slot k, for messages. */
static const char *key_name(const struct build *b, const struct kv *k, char *buf, size_t n)
{
    for (size_t i = 0; i < sizeof arch_keys / sizeof arch_keys[0]; i++)
        if ((const char *)b->h + arch_keys[i].offset == (const char *)k) {
            snprintf(buf, n, "%s.%s", b->h->arch, arch_keys[i].suffix);
            return buf;
        }
    snprintf(buf, n, "%s", k == &b->h->file_type ? "general.file_type" : "?");
    return buf;
}

/* A non-negative integer that fits in 32 bits. */
static enum kvp_status int_u32(const struct build *b, const struct kv *k, uint64_t raw, uint32_t *out)
{
    char name[96];
    if (type_is_signed(k->v.type == GGUF_ARRAY ? k->v.elem : k->v.type) && (int64_t)raw < 0)
        return kvp_fail_at(b->err, KVP_ERR_RANGE, b->file, 0, 0, "'%s' must not be negative (got %" PRId64 ")",
                           key_name(b, k, name, sizeof name), (int64_t)raw);
    if (raw > UINT32_MAX)
        return kvp_fail_at(b->err, KVP_ERR_RANGE, b->file, 0, 0, "'%s' is too large (got %" PRIu64 ")",
                           key_name(b, k, name, sizeof name), raw);
    *out = (uint32_t)raw;
    return KVP_OK;
}

/* A scalar integer key, or def when absent. */
static enum kvp_status get_u32(const struct build *b, const struct kv *k, uint32_t def, uint32_t *out)
{
    char name[96];
    *out = def;
    if (!k->set)
        return KVP_OK;
    if (!type_is_int(k->v.type))
        return kvp_fail_at(b->err, KVP_ERR_SCHEMA, b->file, 0, 0, "'%s' must be an integer (got %s)",
                           key_name(b, k, name, sizeof name), type_names[k->v.type]);
    return int_u32(b, k, k->v.u, out);
}

/* A key that is an integer or a per-layer integer array of block_count entries. */
static enum kvp_status check_per_layer(const struct build *b, const struct kv *k, uint32_t n_layer)
{
    char name[96];
    if (!k->set || type_is_int(k->v.type))
        return KVP_OK;
    if (k->v.type != GGUF_ARRAY || !type_is_int(k->v.elem))
        return kvp_fail_at(b->err, KVP_ERR_SCHEMA, b->file, 0, 0,
                           "'%s' must be an integer or an array of integers (got %s)",
                           key_name(b, k, name, sizeof name),
                           k->v.type == GGUF_ARRAY ? "an array of another type" : type_names[k->v.type]);
    if (k->v.count != n_layer)
        return kvp_fail_at(b->err, KVP_ERR_SCHEMA, b->file, 0, 0,
                           "'%s' has %" PRIu64 " entries but '%s.block_count' is %" PRIu32,
                           key_name(b, k, name, sizeof name), k->v.count, b->h->arch, n_layer);
    return KVP_OK;
}

/* Layer il's value of a per-layer key (checked by check_per_layer), or def when absent. */
static enum kvp_status layer_u32(const struct build *b, const struct kv *k, uint32_t il, uint32_t def,
                                 uint32_t *out)
{
    if (k->set && k->v.type == GGUF_ARRAY)
        return int_u32(b, k, array_int(b->c, &k->v, il), out);
    return get_u32(b, k, def, out);
}

/* llama.cpp's built-in SWA pattern when the header has none (llama-model.cpp
 * set_swa_pattern): layer il slides iff il % n < n - 1; 0 = no built-in. */
static uint32_t default_swa_pattern(const char *arch)
{
    static const struct { const char *arch; uint32_t n; } table[] = {
        {"gemma2", 2}, {"gpt-oss", 2}, {"cohere2", 4}, {"olmo2", 4}, {"exaone4", 4},
        {"gemma3n", 5}, {"gemma3", 6}, {"gemma-embedding", 6}, {"phi3", 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(arch, table[i].arch) == 0)
            return table[i].n;
    return 0;
}

static bool arch_in(const char *arch, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(arch, *list) == 0)
            return true;
    return false;
}

/* Architectures whose keys this reader knows; others get a warning. */
static const char *const known_archs[] = {
    "llama", "mistral", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "gemma", "gemma2", "gemma3",
    "deepseek2", "phi3", "falcon", "mixtral", "granite", "olmo2", "cohere2", "gpt-oss", NULL,
};

/* Whether layer il slides, from the pattern key or the arch's default. */
static enum kvp_status layer_slides(const struct build *b, uint32_t il, bool *out)
{
    const struct kv *p = &b->h->sliding_window_pattern;
    uint32_t n;
    enum kvp_status st;

    *out = false;
    if (!b->h->sliding_window.set)
        return KVP_OK;
    if (p->set && p->v.type == GGUF_ARRAY) { /* per-layer bools: true = sliding */
        *out = array_int(b->c, &p->v, il) != 0;
        return KVP_OK;
    }
    if ((st = get_u32(b, p, default_swa_pattern(b->h->arch), &n)) != KVP_OK)
        return st;
    if (!p->set && n == 0)
        return KVP_OK; /* window without a pattern: llama.cpp caches every layer in full */
    *out = n == 0 || il % n < n - 1;
    return KVP_OK;
}

/* m->name: general.name lower-cased, spaces to '-', only [a-z0-9._-] kept; else the file's base name. */
static void set_name(struct kvp_model *m, const struct header *h, const char *file)
{
    const char *src = NULL, *base = strrchr(file, '/');
    uint64_t n = 0, o = 0;

    if (h->name.set && h->name.v.type == GGUF_STRING) {
        src = h->name.v.s;
        n = h->name.v.slen;
    }
    for (int pass = 0; pass < 2 && o == 0; pass++) {
        if (pass == 1) {
            src = base ? base + 1 : file;
            n = strlen(src);
            if (n > 5 && strcmp(src + n - 5, ".gguf") == 0)
                n -= 5;
        }
        for (uint64_t i = 0; i < n && o + 1 < sizeof m->name; i++) {
            char ch = src[i];
            if (ch >= 'A' && ch <= 'Z')
                ch = (char)(ch - 'A' + 'a');
            else if (ch == ' ')
                ch = '-';
            if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_')
                m->name[o++] = ch;
        }
    }
    m->name[o] = '\0';
    if (o == 0)
        snprintf(m->name, sizeof m->name, "gguf-model");
}

/* llama.cpp caches K and V in f16 by default whatever the weights are, and
 * kvplan's model dtype is also its default cache dtype, so a GGUF model is
 * f16. The weights are what the tensor table says (set_wtable). */
static void set_dtype(struct kvp_model *m)
{
    m->dtype = KVP_DTYPE_F16;
    m->state_dtype = KVP_DTYPE_F32; /* llama.cpp keeps recurrent state in f32 */
}

/* m->wtable from the tensor table: one row per ggml type, most bytes first
 * (ties in dtype order); the mixture is general.file_type's name. */
static enum kvp_status set_wtable(struct build *b)
{
    const struct header *h = b->h;
    struct kvp_wtable *t = &b->m->wtable;
    const char *mix = NULL;

    memset(t, 0, sizeof *t);
    t->file_bytes = h->file_bytes;
    for (int d = 0; d < KVP_DTYPE_COUNT; d++) {
        uint32_t i;
        if (h->by_dtype[d].tensors == 0)
            continue;
        if (t->n == KVP_WTABLE_MAX)
            return kvp_fail_at(b->err, KVP_ERR_UNSUPPORTED, b->file, 0, 0,
                               "the tensors use more than %d ggml types (kvplan keeps %d)", KVP_WTABLE_MAX,
                               KVP_WTABLE_MAX);
        for (i = t->n; i > 0 && t->rows[i - 1].bytes < h->by_dtype[d].bytes; i--)
            t->rows[i] = t->rows[i - 1];
        t->rows[i] = (struct kvp_wtable_row){(enum kvp_dtype)d, h->by_dtype[d].tensors, h->by_dtype[d].params,
                                             h->by_dtype[d].bytes};
        t->n++;
    }
    if (t->n == 0)
        return KVP_OK;
    t->expert_bytes = h->expert_bytes;
    t->placed = true;
    t->has_output = h->has_output;
    memcpy(t->place, h->place, sizeof t->place);
    for (uint32_t il = 0; il < KVP_MAX_LAYERS; il++) { /* each layer there is gets a copy of rope_freqs */
        struct kvp_wplace *p = &t->place[KVP_WPLACE_LAYER + il];
        if ((p->host || p->gpu) &&
            (!kvp_add(p->host, h->rope_freqs.host, &p->host) || !kvp_add(p->gpu, h->rope_freqs.gpu, &p->gpu)))
            return kvp_fail_at(b->err, KVP_ERR_OVERFLOW, b->file, 0, 0, "layer %" PRIu32 "'s tensors overflow 64 bits",
                               il);
    }
    snprintf(t->what, sizeof t->what, "GGUF tensor table");
    if (h->file_type.set && type_is_int(h->file_type.v.type) && h->file_type.v.u <= UINT32_MAX)
        mix = kvp_gguf_ftype_name((uint32_t)h->file_type.v.u);
    snprintf(t->mixture, sizeof t->mixture, "%s", mix ? mix : "");
    return KVP_OK;
}

/* Per-arch weight details that the header does not spell out. */
static void set_arch_details(struct kvp_model *m, const char *arch)
{
    static const char *const qkv_bias[] = {"qwen2", "qwen2moe", NULL};
    static const char *const qk_norm[] = {"qwen3", "qwen3moe", "gemma3", "olmo2", NULL};
    static const char *const four_norms[] = {"gemma2", "gemma3", "olmo2", NULL};

    m->attn_qkv_bias = arch_in(arch, qkv_bias);
    m->qk_norm = arch_in(arch, qk_norm);
    if (arch_in(arch, four_norms))
        m->norms_per_layer = 4;
    if (strcmp(arch, "falcon") == 0) { /* LayerNorm, GELU MLP of 2 matrices */
        m->norm = KVP_NORM_LAYER;
        m->act = KVP_ACT_PLAIN;
    }
}

/* The model-wide scalar fields. */
static enum kvp_status build_globals(struct build *b, uint32_t *n_layer)
{
    const struct header *h = b->h;
    struct kvp_model *m = b->m;
    uint32_t ctx = 0, vocab = 0;
    enum kvp_status st;

    if (!h->block_count.set)
        return kvp_fail_at(b->err, KVP_ERR_SCHEMA, b->file, 0, 0, "missing key '%s.block_count'", h->arch);
    if ((st = get_u32(b, &h->block_count, 0, n_layer)) != KVP_OK)
        return st;
    if (*n_layer == 0 || *n_layer > KVP_MAX_LAYERS)
        return kvp_fail_at(b->err, KVP_ERR_RANGE, b->file, 0, 0,
                           "'%s.block_count' must be 1..%u (got %" PRIu32 ")", h->arch, KVP_MAX_LAYERS, *n_layer);
    if (!h->embedding_length.set)
        return kvp_fail_at(b->err, KVP_ERR_SCHEMA, b->file, 0, 0, "missing key '%s.embedding_length'", h->arch);
    if (!h->head_count.set)
        return kvp_fail_at(b->err, KVP_ERR_SCHEMA, b->file, 0, 0, "missing key '%s.attention.head_count'",
                           h->arch);
    if ((st = get_u32(b, &h->embedding_length, 0, &m->hidden)) != KVP_OK ||
        (st = get_u32(b, &h->context_length, 0, &ctx)) != KVP_OK ||
        (st = get_u32(b, &h->vocab_size, 0, &vocab)) != KVP_OK ||
        (st = get_u32(b, &h->expert_count, 0, &m->n_experts)) != KVP_OK ||
        (st = get_u32(b, &h->expert_used_count, 0, &m->n_experts_active)) != KVP_OK ||
        (st = get_u32(b, &h->expert_shared_count, 0, &m->n_shared_experts)) != KVP_OK)
        return st;
    if ((st = check_per_layer(b, &h->head_count, *n_layer)) != KVP_OK ||
        (st = check_per_layer(b, &h->head_count_kv, *n_layer)) != KVP_OK ||
        (st = check_per_layer(b, &h->feed_forward_length, *n_layer)) != KVP_OK)
        return st;
    if (h->sliding_window_pattern.set && h->sliding_window_pattern.v.type == GGUF_ARRAY &&
        (st = check_per_layer(b, &h->sliding_window_pattern, *n_layer)) != KVP_OK)
        return st;
    m->max_context = ctx;
    if (ctx == 0)
        kvp_model_warn(m, "no '%s.context_length' in the header", h->arch);

    /* dense width: a per-layer array is not modelled; take its largest entry */
    if (h->feed_forward_length.set && h->feed_forward_length.v.type == GGUF_ARRAY) {
        for (uint32_t il = 0; il < *n_layer; il++) {
            uint32_t ff;
            if ((st = layer_u32(b, &h->feed_forward_length, il, 0, &ff)) != KVP_OK)
                return st;
            m->intermediate = ff > m->intermediate ? ff : m->intermediate;
        }
        kvp_model_warn(m, "'%s.feed_forward_length' varies by layer: the largest (%" PRIu32 ") is used",
                       h->arch, m->intermediate);
    } else if ((st = get_u32(b, &h->feed_forward_length, 0, &m->intermediate)) != KVP_OK) {
        return st;
    }
    /* experts: width defaults to the dense width (Mixtral ships as llama) */
    if ((st = get_u32(b, &h->expert_ff, m->intermediate, &m->expert_intermediate)) != KVP_OK ||
        (st = get_u32(b, &h->expert_shared_ff, m->expert_intermediate, &m->shared_intermediate)) != KVP_OK)
        return st;

    /* vocab: <arch>.vocab_size, else the token list's length, else token_embd.weight rows */
    if (vocab == 0 && h->tokens.set && h->tokens.v.type == GGUF_ARRAY && h->tokens.v.count <= UINT32_MAX)
        vocab = (uint32_t)h->tokens.v.count;
    if (vocab == 0 && h->embd_rows <= UINT32_MAX)
        vocab = (uint32_t)h->embd_rows;
    m->vocab = vocab;
    m->tied_embeddings = h->n_tensors > 0 && !h->has_output;
    return KVP_OK;
}

/* The shape of layer il. */
static enum kvp_status build_layer(struct build *b, uint32_t il, struct kvp_layer_spec *s, bool *no_kv)
{
    const struct header *h = b->h;
    struct kvp_model *m = b->m;
    uint32_t lead = 0, ff = 1, window = 0, kv_lora = 0;
    bool slides;
    enum kvp_status st;

    memset(s, 0, sizeof *s);
    if ((st = layer_u32(b, &h->head_count, il, 0, &s->n_heads)) != KVP_OK ||
        (st = layer_u32(b, &h->head_count_kv, il, s->n_heads, &s->n_kv_heads)) != KVP_OK ||
        (st = get_u32(b, &h->key_length, s->n_heads ? m->hidden / s->n_heads : 0, &s->head_dim_k)) != KVP_OK ||
        (st = get_u32(b, &h->value_length, s->head_dim_k, &s->head_dim_v)) != KVP_OK ||
        (st = get_u32(b, &h->leading_dense, 0, &lead)) != KVP_OK ||
        (st = get_u32(b, &h->kv_lora_rank, 0, &kv_lora)) != KVP_OK ||
        (st = get_u32(b, &h->sliding_window, 0, &window)) != KVP_OK ||
        (st = layer_slides(b, il, &slides)) != KVP_OK)
        return st;
    if (h->feed_forward_length.set && h->feed_forward_length.v.type == GGUF_ARRAY &&
        (st = layer_u32(b, &h->feed_forward_length, il, 0, &ff)) != KVP_OK)
        return st;

    /* MLP: routed experts after the leading dense blocks; a per-layer width of 0 is no MLP */
    s->mlp = m->n_experts > 0 && il >= lead ? KVP_MLP_MOE : ff == 0 ? KVP_MLP_NONE : KVP_MLP_DENSE;

    if (kv_lora > 0) {
        /* MLA (deepseek2): one latent of kv_lora_rank + rope dims per token. Head dims are the
         * decompressed ones: key_length_mla/value_length_mla, or key/value_length from older
         * converters that wrote nope+rope and v_head_dim there. */
        s->kind = KVP_LAYER_MLA;
        s->n_kv_heads = 1;
        s->kv_lora_rank = kv_lora;
        if ((st = get_u32(b, &h->key_length_mla, s->head_dim_k, &s->head_dim_k)) != KVP_OK ||
            (st = get_u32(b, &h->value_length_mla, s->head_dim_v, &s->head_dim_v)) != KVP_OK ||
            (st = get_u32(b, &h->rope_dims, 0, &s->qk_rope_dim)) != KVP_OK ||
            (st = get_u32(b, &h->q_lora_rank, 0, &s->q_lora_rank)) != KVP_OK)
            return st;
    } else if (s->n_kv_heads == 0) {
        s->kind = KVP_LAYER_NONE; /* recurrent or attention-free layer: no KV cache */
        *no_kv = true;
    } else if (slides && window > 0) {
        s->kind = KVP_LAYER_SLIDING;
        s->window = window;
    } else {
        s->kind = KVP_LAYER_FULL;
    }
    return KVP_OK;
}

static enum kvp_status build_model(struct build *b)
{
    struct kvp_model *m = b->m;
    uint32_t n_layer = 0, parts = 1, part = 0;
    bool no_kv = false;
    enum kvp_status st;

    snprintf(m->family, sizeof m->family, "%.63s", b->h->arch);
    snprintf(m->arch, sizeof m->arch, "%.*s", (int)sizeof m->arch - 1, b->h->arch);
    snprintf(m->source, sizeof m->source, "GGUF header of %s", b->file);
    set_name(m, b->h, b->file);
    if (!arch_in(b->h->arch, known_archs))
        kvp_model_warn(m, "architecture '%s' is not known to kvplan: only the generic keys were read",
                       b->h->arch);
    set_dtype(m);
    set_arch_details(m, b->h->arch);
    if ((st = set_wtable(b)) != KVP_OK || (st = build_globals(b, &n_layer)) != KVP_OK ||
        (st = get_u32(b, &b->h->split_count, 1, &parts)) != KVP_OK ||
        (st = get_u32(b, &b->h->split_no, 0, &part)) != KVP_OK)
        return st;
    if (parts > 1) /* the other parts' tensors are in their own files' tables */
        kvp_model_warn(m, "part %u of %u of a split GGUF (gguf-split): its tensor table lists this part's tensors "
                       "only, so the weights are this part's, not the model's", part + 1, parts);
    for (uint32_t il = 0; il < n_layer; il++) {
        struct kvp_layer_spec s;
        if ((st = build_layer(b, il, &s, &no_kv)) != KVP_OK)
            return st;
        if ((st = kvp_model_add_layers(m, &s, 1, b->err)) != KVP_OK) {
            kvp_error_place(b->err, b->file, 0, 0);
            return st;
        }
    }
    if (b->h->sliding_window.set && !b->h->sliding_window_pattern.set && default_swa_pattern(b->h->arch) == 0)
        kvp_model_warn(m, "'%s.attention.sliding_window' has no pattern: every layer is cached in full, "
                       "as llama.cpp does", b->h->arch);
    if (no_kv)
        kvp_model_warn(m, "layers with 0 KV heads are counted as cache-free (recurrent state is not read "
                       "from GGUF)");
    return KVP_OK;
}

/* ---- entry point ------------------------------------------------------------- */

enum kvp_status kvp_model_parse_gguf(const uint8_t *data, uint64_t len, const char *file,
                                     struct kvp_model *m, struct kvp_error *err)
{
    struct cursor c = {.data = data, .len = len, .pos = 0, .file = file, .err = err};
    struct header h;
    struct build b = {.c = &c, .h = &h, .m = m, .file = file, .err = err};
    enum kvp_status st;

    memset(&h, 0, sizeof h);
    if ((st = read_preamble(&c, &h)) != KVP_OK || (st = walk_kvs(&c, &h, false)) != KVP_OK)
        return st;
    if (h.arch[0] == '\0')
        return kvp_fail_at(err, KVP_ERR_SCHEMA, file, 0, 0, "missing key 'general.architecture'");
    if ((st = walk_kvs(&c, &h, true)) != KVP_OK || (st = read_tensor_infos(&c, &h)) != KVP_OK)
        return st;
    return build_model(&b);
}
