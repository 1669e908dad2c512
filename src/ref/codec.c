/* codec.c -- the reference decoder's storage formats: float32 <-> bytes.
 *
 * The codec owns its layouts (codec_type below: bytes of a plain value,
 * bits of an integer code, values and bytes of a ggml block, written out
 * from the structs they encode); it never asks format.h or the engine what a
 * row costs, so that the cache's bytes are a measurement the engine's price
 * is compared with (tests/check_ref.c, `kvplan validate`). The layouts are
 * the ones format.h describes:
 *   plain:        n values of the dtype (fp8 by round-to-nearest on its grid)
 *   axis=token:   per head, ceil(d*bits/8) packed codes, then ceil(d/G)
 *                 groups' scale (+ zero point) in the scale dtype
 *   axis=channel: codes of whole G-token groups, packed over the whole cache,
 *                 and one scale (+ zero point) per channel per group
 *   ggml blocks of 32 (ggml-common.h's structs, little-endian, no padding):
 *     q8_0   34 B: fp16 d, 32 int8                         x = q*d
 *     q4_0   18 B: fp16 d, 16 B nibbles                    x = (q-8)*d
 *     q4_1   20 B: fp16 d, fp16 m, 16 B nibbles            x = q*d + m
 *     q5_0   22 B: fp16 d, 4 B high bits, 16 B nibbles     x = (q-16)*d
 *     q5_1   24 B: fp16 d, fp16 m, 4 B high bits, 16 B     x = q*d + m
 *     iq4_nl 18 B: fp16 d, 16 B nibbles                    x = kvalues_iq4nl[q]*d
 *     mxfp4  17 B: e8m0 e, 16 B e2m1 nibbles               x = e2m1[q]*2^(e-127)
 *   nibble j of a 32-block sits in byte j%16, low half for j < 16 (ggml's order);
 *   q5's fifth bit of value j is bit j of the 32-bit qh.
 *     nvfp4   9 B per 16: fp8 e4m3 scale s, 8 B e2m1 nibbles  x = e2m1[q]*s
 *   (ggml's block_nvfp4 groups four such sub-blocks into 36 B per 64; the
 *   engine prices one scale per 16, so a block here is one sub-block, laid
 *   out like ggml's: scale first, value j in byte j%8, low half for j < 8.)
 */
#include <math.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) /* clang's __builtin_cpu_supports lacks "f16c" */
#include <immintrin.h>
#define KVP_X86_HALF 1
#endif

#include "ref_internal.h"

/* ---- rng: PCG32 (O'Neill), a stream per (seed, stream) ----------------- */

void ref_pcg_seed(struct pcg *r, uint64_t seed, uint64_t stream)
{
    r->state = 0;
    r->inc = (stream << 1) | 1;
    ref_pcg_next(r);
    r->state += seed;
    ref_pcg_next(r);
}

uint32_t ref_pcg_next(struct pcg *r)
{
    uint64_t old = r->state;
    uint32_t x = (uint32_t)(((old >> 18) ^ old) >> 27), rot = (uint32_t)(old >> 59);
    r->state = old * 6364136223846793005ull + r->inc;
    return (x >> rot) | (x << ((32 - rot) & 31));
}

float ref_pcg_float(struct pcg *r)
{
    return (float)((double)ref_pcg_next(r) / 2147483648.0 - 1.0);
}

/* ---- scalar types ------------------------------------------------------ */

static uint32_t bits_of_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

static float float_of_bits(uint32_t x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* Round to nearest even, without branches the vectorizer cannot turn into
 * selects (Giesen's float_to_half_fast3_rtne): NaN -> 0x7e00 with its sign,
 * too large -> infinity; a subnormal half by adding 0.5 (the FPU rounds the
 * sum to the half's grid, to nearest even); a normal one by rebiasing the
 * exponent and adding 0xfff plus the kept mantissa's last bit before the
 * shift. tests/check_ref.c `half_conversions` runs every half and the
 * rounding boundaries of every exponent against a plain implementation. */
static uint16_t f32_to_f16(float f)
{
    const uint32_t f16max = (127u + 16) << 23, denorm = ((127u - 15) + (23 - 10) + 1) << 23;
    uint32_t x = bits_of_float(f), sign = x & 0x80000000u;
    x ^= sign;
    uint32_t big = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
    uint32_t sub = bits_of_float(float_of_bits(x) + float_of_bits(denorm)) - denorm;
    uint32_t norm = (x + ((uint32_t)(15 - 127) << 23) + 0xfff + ((x >> 13) & 1)) >> 13;
    uint32_t o = x >= f16max ? big : x < (113u << 23) ? sub : norm;
    return (uint16_t)(o | sign >> 16);
}

/* Exact for every half, branch-free likewise (Giesen's half_to_float): the
 * magnitude's bits shifted into place and the exponent rebiased, infinities
 * and NaNs (exponent 31) once more to 255; a subnormal m 2^-24 as
 * (2^-14 + m 2^-24) - 2^-14, which is exact. */
static float f16_to_f32(uint16_t h)
{
    uint32_t m = (uint32_t)(h & 0x7fff) << 13, e = m & 0x0f800000u;
    uint32_t norm = m + ((uint32_t)(127 - 15) << 23) + (e == 0x0f800000u ? (uint32_t)(128 - 16) << 23 : 0);
    uint32_t sub = bits_of_float(float_of_bits(m + (113u << 23)) - float_of_bits(113u << 23));
    return float_of_bits((e == 0 ? sub : norm) | (uint32_t)(h & 0x8000) << 16);
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fff + ((x >> 16) & 1); /* round to nearest even */
    return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* fp8 with `mb` mantissa bits and exponent bias `bias`: e4m3fn (max 448, no
 * infinities) or e5m2; values saturate at the largest finite number. */
static uint8_t f32_to_fp8(float f, int mb, int bias, float maxv)
{
    uint8_t sign = f < 0 ? 0x80 : 0;
    float a = fabsf(f);
    int e;
    if (!(a == a))
        return sign | 0x7f;
    if (a > maxv)
        a = maxv;
    if (a == 0)
        return sign;
    frexpf(a, &e);
    e -= 1; /* a = 1.m * 2^e */
    if (e < 1 - bias)
        e = 1 - bias; /* subnormal step */
    float step = ldexpf(1.0f, e - mb);
    float q = nearbyintf(a / step) * step;
    if (q > maxv)
        q = maxv;
    frexpf(q, &e);
    e -= 1;
    int be = e + bias;
    uint32_t mant;
    if (be <= 0) { /* subnormal */
        mant = (uint32_t)nearbyintf(q / ldexpf(1.0f, 1 - bias - mb));
        be = 0;
        if (mant >> mb) { be = 1; mant &= (1u << mb) - 1; }
    } else {
        mant = (uint32_t)nearbyintf((q / ldexpf(1.0f, e) - 1.0f) * (float)(1 << mb));
    }
    return (uint8_t)(sign | (be << mb) | mant);
}

static float fp8_to_f32(uint8_t b, int mb, int bias)
{
    int be = (b & 0x7f) >> mb;
    uint32_t mant = b & ((1u << mb) - 1);
    float v = be == 0 ? ldexpf((float)mant, 1 - bias - mb) : ldexpf(1.0f + (float)mant / (float)(1 << mb), be - bias);
    return (b & 0x80) ? -v : v;
}

/* ---- the layouts: one entry per type the codec stores ------------------- */

struct block_codec { /* one block of a ggml / MX / NV block type */
    void (*encode)(const float *x, uint8_t *b);
    void (*decode)(const uint8_t *b, float *x);
};

struct codec_type {
    uint32_t elems;  /* values per block: 1 for plain and integer types */
    uint32_t bytes;  /* plain: bytes per value; blocks: bytes per block */
    uint32_t bits;   /* integer types: bits per code (0 otherwise) */
    struct block_codec block; /* block types only */
};

static const struct codec_type *codec_type(enum kvp_dtype t);

bool ref_codec_known(enum kvp_dtype t)
{
    return codec_type(t) != NULL;
}

bool ref_codec_grouped(enum kvp_dtype t)
{
    const struct codec_type *c = codec_type(t);
    return c && c->bits;
}

uint32_t ref_codec_block_elems(enum kvp_dtype t)
{
    return codec_type(t)->elems;
}

uint32_t ref_codec_code_bits(enum kvp_dtype t)
{
    return codec_type(t)->bits;
}

/* f16 rows by the CPU's conversion instructions where it has them (x86-64
 * F16C, 8 values at a time; every AVX-512 CPU has them too): IEEE
 * conversions, exact from half and to nearest even to it (the immediate,
 * not MXCSR), so the floats and halves of f16_to_f32 and f32_to_f16,
 * except a NaN's payload, which the instructions keep: from a group holding
 * a NaN on, the row goes through those functions (the loops of
 * ref_codec_get_plain / put_plain), as do the last n mod 8 values, and
 * every value elsewhere. Each returns how many values it converted. */
#ifdef KVP_X86_HALF
__attribute__((target("avx,f16c"))) static uint64_t get_f16_f16c(const uint8_t *src, uint64_t n, float *x)
{
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i)));
        if (_mm256_movemask_ps(_mm256_cmp_ps(y, y, _CMP_UNORD_Q)))
            break;
        _mm256_storeu_ps(x + i, y);
    }
    return i;
}

__attribute__((target("avx,f16c"))) static uint64_t put_f16_f16c(const float *x, uint64_t n, uint8_t *dst)
{
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 y = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(y, y, _CMP_UNORD_Q)))
            break;
        _mm_storeu_si128((__m128i *)(void *)(dst + 2 * i),
                         _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return i;
}

static bool has_f16c(void)
{
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
}
/* How many of a row's first values the instructions converted, 0 without them. */
#define F16_HW(call) (has_f16c() ? (call) : 0)
#else
#define F16_HW(call) 0
#endif

uint32_t ref_codec_plain_size(enum kvp_dtype t)
{
    return codec_type(t)->bytes;
}

/* Bulk conversions: one switch per call, a plain loop per type (the
 * attention reads every cached row through here). */
KVP_REF_HOT void ref_codec_put_plain(enum kvp_dtype t, const float *x, uint64_t n, uint8_t *dst)
{
    uint16_t h;
    switch (t) {
    case KVP_DTYPE_F32:
        memcpy(dst, x, n * 4);
        break;
    case KVP_DTYPE_F16:
        for (uint64_t i = F16_HW(put_f16_f16c(x, n, dst)); i < n; i++) {
            h = f32_to_f16(x[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    case KVP_DTYPE_BF16:
        for (uint64_t i = 0; i < n; i++) {
            h = f32_to_bf16(x[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    case KVP_DTYPE_FP8_E4M3:
        for (uint64_t i = 0; i < n; i++)
            dst[i] = f32_to_fp8(x[i], 3, 7, 448.0f);
        break;
    default: /* e5m2 */
        for (uint64_t i = 0; i < n; i++)
            dst[i] = f32_to_fp8(x[i], 2, 15, 57344.0f);
        break;
    }
}

KVP_REF_HOT void ref_codec_get_plain(enum kvp_dtype t, const uint8_t *src, uint64_t n, float *x)
{
    uint16_t h;
    switch (t) {
    case KVP_DTYPE_F32:
        memcpy(x, src, n * 4);
        break;
    case KVP_DTYPE_F16:
        for (uint64_t i = F16_HW(get_f16_f16c(src, n, x)); i < n; i++) {
            memcpy(&h, src + 2 * i, 2);
            x[i] = f16_to_f32(h);
        }
        break;
    case KVP_DTYPE_BF16:
        for (uint64_t i = 0; i < n; i++) {
            memcpy(&h, src + 2 * i, 2);
            x[i] = bf16_to_f32(h);
        }
        break;
    case KVP_DTYPE_FP8_E4M3:
        for (uint64_t i = 0; i < n; i++)
            x[i] = fp8_to_f32(src[i], 3, 7);
        break;
    default:
        for (uint64_t i = 0; i < n; i++)
            x[i] = fp8_to_f32(src[i], 2, 15);
        break;
    }
}

/* ---- grouped integers -------------------------------------------------- */

static uint32_t bits_of(const struct kvp_format *f)
{
    return codec_type(f->dtype)->bits;
}

uint32_t ref_codec_meta_size(const struct kvp_format *f)
{
    return ref_codec_plain_size(f->scale) * (f->zero_point ? 2 : 1);
}

static void put_code(uint8_t *codes, uint64_t i, uint32_t bits, uint32_t q)
{
    uint64_t bit = i * bits;
    codes[bit / 8] = (uint8_t)(codes[bit / 8] & ~(((1u << bits) - 1) << (bit % 8)));
    codes[bit / 8] = (uint8_t)(codes[bit / 8] | (q << (bit % 8)));
}

static uint32_t get_code(const uint8_t *codes, uint64_t i, uint32_t bits)
{
    uint64_t bit = i * bits;
    return (codes[bit / 8] >> (bit % 8)) & ((1u << bits) - 1);
}

/* Scale and zero point of values x[0..n) (stride s), rounded through the
 * scale dtype so that encode and decode use the same numbers. Asymmetric:
 * x = q*scale + zp, q in [0, 2^B-1]; symmetric: x = (q - 2^(B-1))*scale. */
static void group_params(const struct kvp_format *f, const float *x, uint64_t n, uint64_t s, uint8_t *meta,
                         float *scale, float *zp)
{
    uint32_t bits = bits_of(f), sz = ref_codec_plain_size(f->scale);
    float lo = x[0], hi = x[0];
    for (uint64_t i = 1; i < n; i++) { /* fminf/fmaxf skip a NaN: an outlier left out */
        lo = fminf(lo, x[i * s]);
        hi = fmaxf(hi, x[i * s]);
    }
    if (lo != lo) /* every value of the group is an outlier */
        lo = hi = 0;
    if (f->zero_point) {
        *scale = (hi - lo) / (float)((1u << bits) - 1);
        *zp = lo;
    } else {
        float m = fmaxf(fabsf(lo), fabsf(hi));
        *scale = m / (float)((1u << (bits - 1)) - 1);
        *zp = 0;
    }
    ref_codec_put_plain(f->scale, scale, 1, meta);
    ref_codec_get_plain(f->scale, meta, 1, scale);
    if (f->zero_point) {
        ref_codec_put_plain(f->scale, zp, 1, meta + sz);
        ref_codec_get_plain(f->scale, meta + sz, 1, zp);
    }
}

static uint32_t quantize(const struct kvp_format *f, float x, float scale, float zp)
{
    uint32_t bits = bits_of(f), top = (1u << bits) - 1;
    if (x != x) /* an outlier: its code is never read back */
        return 0;
    float q = scale > 0 ? nearbyintf((x - zp) / scale) : 0;
    if (!f->zero_point)
        q += (float)(1u << (bits - 1));
    return q < 0 ? 0 : q > (float)top ? top : (uint32_t)q;
}

/* The value of code q under scale s and zero point z (asymmetric), or of
 * the symmetric code about 2^(B-1): the one formula of every grouped read. */
static float dequant(const struct kvp_format *f, uint32_t bits, uint32_t q, float s, float z)
{
    return f->zero_point ? (float)q * s + z : ((float)q - (float)(1u << (bits - 1))) * s;
}

float ref_codec_dequantize(const struct kvp_format *f, const uint8_t *codes, uint64_t i, const uint8_t *meta)
{
    float m[2] = {0, 0};
    ref_codec_get_plain(f->scale, meta, f->zero_point ? 2 : 1, m);
    return dequant(f, bits_of(f), get_code(codes, i, bits_of(f)), m[0], m[1]);
}

/* The block decoders read up to META_RUN groups' scales (and zero points,
 * which follow each scale) in one conversion, then decode their codes. */
#define META_RUN 64u

/* The meta of k <= META_RUN groups at meta into m: scale then zero point
 * (0 when symmetric) of group i at m[2i], m[2i + 1]. */
static void read_meta(const struct kvp_format *f, const uint8_t *meta, uint64_t k, float *m)
{
    float t[2 * META_RUN];
    uint64_t per = f->zero_point ? 2 : 1;
    ref_codec_get_plain(f->scale, meta, k * per, t);
    for (uint64_t i = 0; i < k; i++) {
        m[2 * i] = t[i * per];
        m[2 * i + 1] = per == 2 ? t[i * per + 1] : 0;
    }
}

/* ---- ggml blocks (ggml-quants.c reference quantizers) ------------------ */

static void q8_0_encode(const float *x, uint8_t *b)
{
    float amax = 0;
    for (int i = 0; i < 32; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d ? 1.0f / d : 0;
    uint16_t h = f32_to_f16(d);
    memcpy(b, &h, 2);
    for (int i = 0; i < 32; i++)
        b[2 + i] = (uint8_t)(int8_t)nearbyintf(x[i] * id);
}

static void q8_0_decode(const uint8_t *b, float *x)
{
    uint16_t h;
    memcpy(&h, b, 2);
    float d = f16_to_f32(h);
    for (int i = 0; i < 32; i++)
        x[i] = (float)(int8_t)b[2 + i] * d;
}

static void q4_0_encode(const float *x, uint8_t *b)
{
    float amax = 0, max = 0;
    for (int i = 0; i < 32; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    float d = max / -8.0f, id = d ? 1.0f / d : 0;
    uint16_t h = f32_to_f16(d);
    memcpy(b, &h, 2);
    for (int i = 0; i < 16; i++) {
        int q0 = (int)(x[i] * id + 8.5f), q1 = (int)(x[16 + i] * id + 8.5f);
        q0 = q0 > 15 ? 15 : q0 < 0 ? 0 : q0;
        q1 = q1 > 15 ? 15 : q1 < 0 ? 0 : q1;
        b[2 + i] = (uint8_t)(q0 | (q1 << 4));
    }
}

static void q4_0_decode(const uint8_t *b, float *x)
{
    uint16_t h;
    memcpy(&h, b, 2);
    float d = f16_to_f32(h);
    for (int i = 0; i < 16; i++) {
        x[i] = (float)((b[2 + i] & 15) - 8) * d;
        x[16 + i] = (float)((b[2 + i] >> 4) - 8) * d;
    }
}

static void put_f16(uint8_t *b, float v)
{
    uint16_t h = f32_to_f16(v);
    memcpy(b, &h, 2);
}

static float get_f16(const uint8_t *b)
{
    uint16_t h;
    memcpy(&h, b, 2);
    return f16_to_f32(h);
}

/* Smallest and largest of a block of 32, for the asymmetric q4_1 / q5_1. */
static void min_max32(const float *x, float *lo, float *hi)
{
    *lo = x[0];
    *hi = x[0];
    for (int i = 1; i < 32; i++) {
        *lo = fminf(*lo, x[i]);
        *hi = fmaxf(*hi, x[i]);
    }
}

/* q4_1: codes (x - min) / d rounded half up, d = (max - min) / 15. The
 * rounding uses the float d and min, as ggml does; only the stored ones are
 * fp16. */
static void q4_1_encode(const float *x, uint8_t *b)
{
    float lo, hi;
    min_max32(x, &lo, &hi);
    float d = (hi - lo) / 15.0f, id = d ? 1.0f / d : 0;
    put_f16(b, d);
    put_f16(b + 2, lo);
    for (int i = 0; i < 16; i++) {
        int q0 = (int)((x[i] - lo) * id + 0.5f), q1 = (int)((x[16 + i] - lo) * id + 0.5f);
        q0 = q0 > 15 ? 15 : q0;
        q1 = q1 > 15 ? 15 : q1;
        b[4 + i] = (uint8_t)(q0 | (q1 << 4));
    }
}

static void q4_1_decode(const uint8_t *b, float *x)
{
    float d = get_f16(b), m = get_f16(b + 2);
    for (int i = 0; i < 16; i++) {
        x[i] = (float)(b[4 + i] & 15) * d + m;
        x[16 + i] = (float)(b[4 + i] >> 4) * d + m;
    }
}

/* Five-bit codes q[0..32) into 16 bytes of low nibbles and a 32-bit qh. */
static void q5_pack(const int *q, uint8_t *qh_at, uint8_t *qs)
{
    uint32_t qh = 0;
    for (int i = 0; i < 16; i++) {
        qs[i] = (uint8_t)((q[i] & 15) | ((q[16 + i] & 15) << 4));
        qh |= (uint32_t)((q[i] >> 4) & 1) << i;
        qh |= (uint32_t)((q[16 + i] >> 4) & 1) << (16 + i);
    }
    qh_at[0] = (uint8_t)qh; /* little-endian, as ggml's memcpy on x86 and ARM */
    qh_at[1] = (uint8_t)(qh >> 8);
    qh_at[2] = (uint8_t)(qh >> 16);
    qh_at[3] = (uint8_t)(qh >> 24);
}

static int q5_code(const uint8_t *qh_at, const uint8_t *qs, int j)
{
    uint32_t qh = (uint32_t)qh_at[0] | (uint32_t)qh_at[1] << 8 | (uint32_t)qh_at[2] << 16 | (uint32_t)qh_at[3] << 24;
    int lo = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
    return lo | (int)(((qh >> j) & 1) << 4);
}

/* q5_0: like q4_0 with 32 levels: d = max / -16 (max the signed value of
 * largest magnitude), code x/d + 16.5 truncated, at most 31. */
static void q5_0_encode(const float *x, uint8_t *b)
{
    float amax = 0, max = 0;
    int q[32];
    for (int i = 0; i < 32; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    float d = max / -16.0f, id = d ? 1.0f / d : 0;
    put_f16(b, d);
    for (int i = 0; i < 32; i++) {
        q[i] = (int)(x[i] * id + 16.5f);
        q[i] = q[i] > 31 ? 31 : q[i] < 0 ? 0 : q[i];
    }
    q5_pack(q, b + 2, b + 6);
}

static void q5_0_decode(const uint8_t *b, float *x)
{
    float d = get_f16(b);
    for (int j = 0; j < 32; j++)
        x[j] = (float)(q5_code(b + 2, b + 6, j) - 16) * d;
}

/* q5_1: d = (max - min) / 31, code (x - min)/d rounded half up. */
static void q5_1_encode(const float *x, uint8_t *b)
{
    float lo, hi;
    int q[32];
    min_max32(x, &lo, &hi);
    float d = (hi - lo) / 31.0f, id = d ? 1.0f / d : 0;
    put_f16(b, d);
    put_f16(b + 2, lo);
    for (int i = 0; i < 32; i++) {
        q[i] = (int)((x[i] - lo) * id + 0.5f);
        q[i] = q[i] > 31 ? 31 : q[i]; /* ggml does not clamp; (x-min)/d <= 31 + rounding */
    }
    q5_pack(q, b + 4, b + 8);
}

static void q5_1_decode(const uint8_t *b, float *x)
{
    float d = get_f16(b), m = get_f16(b + 2);
    for (int j = 0; j < 32; j++)
        x[j] = (float)q5_code(b + 4, b + 8, j) * d + m;
}

/* iq4_nl: the non-linear grid of ggml (kvalues_iq4nl). */
static const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* Index of the grid value nearest v (ties to the lower), by bisection. */
static int iq4nl_index(float v)
{
    if (v <= iq4nl_values[0])
        return 0;
    if (v >= iq4nl_values[15])
        return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < iq4nl_values[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - iq4nl_values[hi - 1] < iq4nl_values[hi] - v ? hi - 1 : hi;
}

/* quantize_row_iq4_nl_ref (ntry = -1, no importance weights): a first
 * scale max / -127 picks each value's grid index, then d is the weighted
 * least-squares scale sum(w q x) / sum(w q^2) with w = x^2 for those
 * indices. A block below 1e-15 in magnitude stores d = 0. */
static void iq4_nl_encode(const float *x, uint8_t *b)
{
    float amax = 0, max = 0;
    int q[32];
    for (int i = 0; i < 32; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    float d = 0;
    if (amax < 1e-15f) {
        for (int i = 0; i < 32; i++)
            q[i] = 8; /* value 1: any code decodes to 0 with d = 0 */
    } else {
        float id = (float)iq4nl_values[0] / max, sumqx = 0, sumq2 = 0;
        for (int i = 0; i < 32; i++) {
            q[i] = iq4nl_index(id * x[i]);
            float v = iq4nl_values[q[i]], w = x[i] * x[i];
            sumqx += w * v * x[i];
            sumq2 += w * v * v;
        }
        d = sumq2 > 0 ? sumqx / sumq2 : 0;
    }
    put_f16(b, d);
    for (int i = 0; i < 16; i++)
        b[2 + i] = (uint8_t)(q[i] | (q[16 + i] << 4));
}

static void iq4_nl_decode(const uint8_t *b, float *x)
{
    float d = get_f16(b);
    for (int i = 0; i < 16; i++) {
        x[i] = (float)iq4nl_values[b[2 + i] & 15] * d;
        x[16 + i] = (float)iq4nl_values[b[2 + i] >> 4] * d;
    }
}

/* e2m1 by code: bit 3 the sign, bits 0-2 the magnitude index. */
static const float e2m1_values[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

/* The e2m1 code whose value times s is nearest v; ties go to the lower code
 * (ggml's best_index_mxfp4 scans in code order and keeps a strict best). */
static uint8_t e2m1_index(float v, float s)
{
    uint8_t best = 0;
    float err = fabsf(e2m1_values[0] * s - v);
    for (uint8_t i = 1; i < 16; i++) {
        float e = fabsf(e2m1_values[i] * s - v);
        if (e < err) {
            best = i;
            err = e;
        }
    }
    return best;
}

/* mxfp4 (OCP MX v1.0): shared exponent floor(log2(amax)) - 2 (e2m1's
 * largest exponent), biased by 127 into one e8m0 byte, clamped to the
 * finite codes 0..254 (255 is NaN). */
static void mxfp4_encode(const float *x, uint8_t *b)
{
    float amax = 0;
    for (int i = 0; i < 32; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    int e = 0;
    if (amax > 0) {
        float l = floorf(log2f(amax)) - 2 + 127;
        e = l < 0 ? 0 : l > 254 ? 254 : (int)l;
    }
    float s = ldexpf(1.0f, e - 127);
    b[0] = (uint8_t)e;
    for (int i = 0; i < 16; i++)
        b[1 + i] = (uint8_t)(e2m1_index(x[i], s) | (e2m1_index(x[16 + i], s) << 4));
}

static void mxfp4_decode(const uint8_t *b, float *x)
{
    float s = ldexpf(1.0f, (int)b[0] - 127);
    for (int i = 0; i < 16; i++) {
        x[i] = e2m1_values[b[1 + i] & 15] * s;
        x[16 + i] = e2m1_values[b[1 + i] >> 4] * s;
    }
}

/* nvfp4: scale amax / 6 (6 = e2m1's largest) rounded to e4m3 (saturating at
 * 448), then each value's nearest e2m1 code at the stored scale. NVIDIA's
 * second, per-tensor fp32 scale is not stored (a KV row has none). */
static void nvfp4_encode(const float *x, uint8_t *b)
{
    float amax = 0, s;
    for (int i = 0; i < 16; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    b[0] = f32_to_fp8(amax / 6.0f, 3, 7, 448.0f);
    s = fp8_to_f32(b[0], 3, 7);
    for (int i = 0; i < 8; i++)
        b[1 + i] = (uint8_t)(e2m1_index(x[i], s) | (e2m1_index(x[8 + i], s) << 4));
}

static void nvfp4_decode(const uint8_t *b, float *x)
{
    float s = fp8_to_f32(b[0], 3, 7);
    for (int i = 0; i < 8; i++) {
        x[i] = e2m1_values[b[1 + i] & 15] * s;
        x[8 + i] = e2m1_values[b[1 + i] >> 4] * s;
    }
}

/* Every type the cache stores, its bytes from the structs above (ggml's
 * block_q8_0 is an fp16 d and 32 int8: 2 + 32 bytes). A type missing here
 * (a weight-only type) is refused by the cache (cache.c check_format). */
static const struct codec_type *codec_type(enum kvp_dtype t)
{
    static const struct codec_type table[KVP_DTYPE_COUNT] = {
        [KVP_DTYPE_F32] = {1, 4, 0, {NULL, NULL}},
        [KVP_DTYPE_F16] = {1, 2, 0, {NULL, NULL}},
        [KVP_DTYPE_BF16] = {1, 2, 0, {NULL, NULL}},
        [KVP_DTYPE_FP8_E4M3] = {1, 1, 0, {NULL, NULL}},
        [KVP_DTYPE_FP8_E5M2] = {1, 1, 0, {NULL, NULL}},
        [KVP_DTYPE_INT8] = {1, 0, 8, {NULL, NULL}},
        [KVP_DTYPE_INT4] = {1, 0, 4, {NULL, NULL}},
        [KVP_DTYPE_INT2] = {1, 0, 2, {NULL, NULL}},
        [KVP_DTYPE_Q8_0] = {32, 2 + 32, 0, {q8_0_encode, q8_0_decode}},
        [KVP_DTYPE_Q4_0] = {32, 2 + 16, 0, {q4_0_encode, q4_0_decode}},
        [KVP_DTYPE_Q4_1] = {32, 2 + 2 + 16, 0, {q4_1_encode, q4_1_decode}},
        [KVP_DTYPE_Q5_0] = {32, 2 + 4 + 16, 0, {q5_0_encode, q5_0_decode}},
        [KVP_DTYPE_Q5_1] = {32, 2 + 2 + 4 + 16, 0, {q5_1_encode, q5_1_decode}},
        [KVP_DTYPE_IQ4_NL] = {32, 2 + 16, 0, {iq4_nl_encode, iq4_nl_decode}},
        [KVP_DTYPE_MXFP4] = {32, 1 + 16, 0, {mxfp4_encode, mxfp4_decode}},
        [KVP_DTYPE_NVFP4] = {16, 1 + 8, 0, {nvfp4_encode, nvfp4_decode}},
    };
    return (unsigned)t < KVP_DTYPE_COUNT && table[t].elems ? &table[t] : NULL;
}

/* ---- rows (token-wise) ------------------------------------------------- */

static uint64_t head_row_bytes(const struct kvp_format *f, uint32_t d)
{
    const struct codec_type *t = codec_type(f->dtype);
    if (t->bits)
        return ((uint64_t)d * t->bits + 7) / 8 + (uint64_t)((d + f->group - 1) / f->group) * ref_codec_meta_size(f);
    return (uint64_t)d / t->elems * t->bytes;
}

uint64_t ref_codec_row_bytes(const struct kvp_format *f, uint32_t n_kv, uint32_t d)
{
    return head_row_bytes(f, d) * n_kv;
}

void ref_codec_encode_row(const struct kvp_format *f, uint32_t n_kv, uint32_t d, const float *x, uint8_t *dst)
{
    const struct codec_type *t = codec_type(f->dtype);
    uint64_t hb = head_row_bytes(f, d);
    for (uint32_t h = 0; h < n_kv; h++, x += d, dst += hb) {
        if (t->block.encode) {
            for (uint32_t b = 0; b < d / t->elems; b++)
                t->block.encode(x + (uint64_t)b * t->elems, dst + (uint64_t)b * t->bytes);
        } else if (t->bits) {
            uint64_t cb = ((uint64_t)d * t->bits + 7) / 8;
            memset(dst, 0, cb);
            for (uint32_t g = 0; g * f->group < d; g++) {
                uint32_t lo = g * f->group, n = d - lo < f->group ? d - lo : f->group;
                uint8_t *meta = dst + cb + (uint64_t)g * ref_codec_meta_size(f);
                float scale, zp;
                group_params(f, x + lo, n, 1, meta, &scale, &zp);
                for (uint32_t i = 0; i < n; i++)
                    put_code(dst, lo + i, t->bits, quantize(f, x[lo + i], scale, zp));
            }
        } else {
            ref_codec_put_plain(f->dtype, x, d, dst);
        }
    }
}

/* One head's d values of a token-axis grouped row: META_RUN groups' meta at
 * a time, then each group's codes under its scale. */
static void decode_head_groups(const struct kvp_format *f, uint32_t bits, uint32_t d, const uint8_t *src, float *x)
{
    uint64_t cb = ((uint64_t)d * bits + 7) / 8, ng = (d + (uint64_t)f->group - 1) / f->group;
    float m[2 * META_RUN];
    for (uint64_t g0 = 0; g0 < ng; g0 += META_RUN) {
        uint64_t k = ng - g0 < META_RUN ? ng - g0 : META_RUN;
        read_meta(f, src + cb + g0 * ref_codec_meta_size(f), k, m);
        for (uint64_t g = g0; g < g0 + k; g++) {
            uint64_t lo = g * f->group, hi = lo + f->group < d ? lo + f->group : d;
            float sc = m[2 * (g - g0)], z = m[2 * (g - g0) + 1];
            for (uint64_t i = lo; i < hi; i++)
                x[i] = dequant(f, bits, get_code(src, i, bits), sc, z);
        }
    }
}

void ref_codec_decode_row(const struct kvp_format *f, uint32_t n_kv, uint32_t d, const uint8_t *src, float *x)
{
    const struct codec_type *t = codec_type(f->dtype);
    uint64_t hb = head_row_bytes(f, d);
    for (uint32_t h = 0; h < n_kv; h++, x += d, src += hb) {
        if (t->block.decode) {
            for (uint32_t b = 0; b < d / t->elems; b++)
                t->block.decode(src + (uint64_t)b * t->bytes, x + (uint64_t)b * t->elems);
        } else if (t->bits) {
            decode_head_groups(f, t->bits, d, src, x);
        } else {
            ref_codec_get_plain(f->dtype, src, d, x);
        }
    }
}

/* ---- channel-axis groups ----------------------------------------------- */

void ref_codec_encode_groups(const struct kvp_format *f, uint64_t n, uint64_t g, const float *x, uint8_t *codes,
                         uint8_t *meta)
{
    uint32_t bits = bits_of(f);
    for (uint64_t c = 0; c < n; c++) {
        uint8_t *m = meta + (g * n + c) * ref_codec_meta_size(f);
        float scale, zp;
        group_params(f, x + c, f->group, n, m, &scale, &zp);
        for (uint64_t j = 0; j < f->group; j++)
            put_code(codes, (g * n + c) * f->group + j, bits, quantize(f, x[j * n + c], scale, zp));
    }
}

void ref_codec_move_codes(const struct kvp_format *f, uint8_t *dst, uint64_t di, const uint8_t *src, uint64_t si,
                      uint64_t count)
{
    uint32_t bits = bits_of(f);
    uint64_t i = 0;
    if (di * bits % 8 == 0 && si * bits % 8 == 0) { /* whole bytes, then the codes of a last partial byte */
        memcpy(dst + di * bits / 8, src + si * bits / 8, count * bits / 8);
        i = count * bits / 8 * 8 / bits;
    }
    for (; i < count; i++)
        put_code(dst, di + i, bits, get_code(src, si + i, bits));
}

void ref_codec_decode_span(const struct kvp_format *f, uint64_t n, uint64_t g, uint64_t j0, uint64_t j1, uint64_t c0,
                           uint64_t cnt, const uint8_t *codes, const uint8_t *meta, float *out)
{
    uint32_t bits = bits_of(f);
    float m[2 * META_RUN];
    for (uint64_t a = 0; a < cnt; a += META_RUN) {
        uint64_t k = cnt - a < META_RUN ? cnt - a : META_RUN, c = g * n + c0 + a;
        read_meta(f, meta + c * ref_codec_meta_size(f), k, m);
        for (uint64_t j = j0; j < j1; j++) { /* the run's codes (a line per channel) stay in L1 over its tokens */
            float *o = out + (j - j0) * cnt + a;
            for (uint64_t i = 0; i < k; i++)
                o[i] = dequant(f, bits, get_code(codes, (c + i) * f->group + j, bits), m[2 * i], m[2 * i + 1]);
        }
    }
}

/* ---- dense-and-sparse outliers (KVQuant) --------------------------------- */

uint64_t ref_codec_outliers(const struct kvp_format *f, uint64_t n)
{
    return (n * f->outliers_ppm + 999999) / 1000000; /* the engine's ceil(F * n) */
}

/* a ranks above b: larger magnitude, then the lower index (a total order,
 * so the chosen set does not depend on the scan) */
static bool outranks(const struct codec_okey *a, const struct codec_okey *b)
{
    return a->mag > b->mag || (a->mag == b->mag && a->idx < b->idx);
}

/* Restore the min-heap (root = the lowest-ranked kept value) below i. */
static void sift_down(struct codec_okey *h, uint64_t k, uint64_t i)
{
    for (;;) {
        uint64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < k && outranks(&h[m], &h[l]))
            m = l;
        if (r < k && outranks(&h[m], &h[r]))
            m = r;
        if (m == i)
            return;
        struct codec_okey t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

void ref_codec_split_outliers(const struct kvp_format *f, uint64_t n, float *x, struct codec_okey *heap, uint8_t *dst)
{
    uint64_t k = ref_codec_outliers(f, n), have = 0;
    if (k > n)
        k = n;
    for (uint64_t i = 0; i < n; i++) {
        struct codec_okey e = {fabsf(x[i]), (uint32_t)i};
        if (have < k) {
            heap[have++] = e;
            if (have == k) /* heapify once full */
                for (uint64_t j = k / 2; j-- > 0;)
                    sift_down(heap, k, j);
        } else if (k && outranks(&e, &heap[0])) {
            heap[0] = e;
            sift_down(heap, k, 0);
        }
    }
    for (uint64_t j = 0; j < k; j++) {
        int32_t idx = (int32_t)heap[j].idx;
        memcpy(dst + 8 * j, &x[heap[j].idx], 4);
        memcpy(dst + 8 * j + 4, &idx, 4);
        x[heap[j].idx] = NAN;
    }
}

void ref_codec_merge_outliers(const struct kvp_format *f, uint64_t n, const uint8_t *src, uint64_t lo, uint64_t cnt,
                              float *x)
{
    uint64_t k = ref_codec_outliers(f, n);
    if (k > n)
        k = n;
    for (uint64_t j = 0; j < k; j++) {
        int32_t idx;
        float v;
        memcpy(&v, src + 8 * j, 4);
        memcpy(&idx, src + 8 * j + 4, 4);
        if (idx >= 0 && (uint64_t)idx < n && (uint64_t)idx >= lo && (uint64_t)idx - lo < cnt)
            x[idx - lo] = v;
    }
}
