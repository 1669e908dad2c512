/* decoder.cu -- the reference decoder on an NVIDIA GPU (ref_cuda.h).
 *
 * Read it like decoder.c, one step for the whole batch at once:
 *   x = embed[token]                                         (B, H)
 *   per attention layer: k, v, q = W xb; rope; append k, v to the cache at pos;
 *                        o = softmax(q K^T / sqrt(dk)) V over the held window
 *   x += W2 (silu(W1 xb) * W3 xb)                            SwiGLU
 *   logits = lm_head @ rmsnorm(x)                            (B, V)
 * The newest position attends to its own K/V unrounded (as the CPU decoder
 * does); older positions are decoded from the cache format.
 *
 * The cache: one store per (layer, sequence, K|V). Static: one cudaMalloc of
 * held(context) rows (a ring when a window is smaller). Paged: blocks of
 * `block` rows, each its own cudaMalloc, allocated when a position first
 * needs one; a window reuses its ceil(W/N) blocks as a ring. Bookkeeping
 * (store descriptors, block tables, scratch, weights) is allocated before the
 * free-memory snapshot so the cudaMemGetInfo delta sees only the cache.
 *
 * Nothing here is verified on hardware in the commit that adds it: see
 * tests/gpu/run.sh.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

extern "C" { /* the library's C headers, ref.h included */
#include "kvplan/kv.h"
#include "kvplan/num.h"
#include "kvplan/ref.h"
#include "kvplan/ref_cuda.h"
}

#define NONE UINT64_MAX
#define CK(call)                                                                  \
    do {                                                                          \
        cudaError_t e_ = (call);                                                  \
        if (e_ != cudaSuccess)                                                    \
            return kvp_fail(err, KVP_ERR_IO, "cuda: %s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)

/* ---- formats on the device ------------------------------------------------ */

struct dfmt {
    int dtype;          /* enum kvp_dtype */
    int scale;          /* scale dtype (grouped) */
    uint32_t bits;      /* grouped: bits per code */
    uint32_t group;     /* grouped: values per group */
    uint32_t meta;      /* grouped: scale (+ zero point) bytes */
    int zp;             /* grouped: asymmetric */
    uint32_t d;         /* values per head */
    uint32_t cb;        /* grouped: code bytes of one head */
    uint64_t head;      /* bytes of one head's row */
    uint64_t row;       /* bytes of one token row: n_kv heads */
};

__device__ static float get_plain(int t, const uint8_t *p)
{
    switch (t) {
    case KVP_DTYPE_F32: { float f; memcpy(&f, p, 4); return f; }
    case KVP_DTYPE_F16: { __half_raw h; memcpy(&h.x, p, 2); return __half2float(__half(h)); }
    case KVP_DTYPE_BF16: { __nv_bfloat16_raw h; memcpy(&h.x, p, 2); return __bfloat162float(__nv_bfloat16(h)); }
    case KVP_DTYPE_FP8_E4M3: return __half2float(__half(__nv_cvt_fp8_to_halfraw(*p, __NV_E4M3)));
    default: return __half2float(__half(__nv_cvt_fp8_to_halfraw(*p, __NV_E5M2)));
    }
}

/* Rounds like codec.c: nearest-even, fp8 saturating at its largest finite value. */
__device__ static void put_plain(int t, float x, uint8_t *p)
{
    switch (t) {
    case KVP_DTYPE_F32: memcpy(p, &x, 4); break;
    case KVP_DTYPE_F16: { __half_raw h = __half_raw(__float2half_rn(x)); memcpy(p, &h.x, 2); break; }
    case KVP_DTYPE_BF16: { __nv_bfloat16_raw h = __nv_bfloat16_raw(__float2bfloat16_rn(x)); memcpy(p, &h.x, 2); break; }
    case KVP_DTYPE_FP8_E4M3: *p = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); break;
    default: *p = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); break;
    }
}

__device__ static uint32_t plain_size(int t)
{
    return t == KVP_DTYPE_F32 ? 4 : t == KVP_DTYPE_F16 || t == KVP_DTYPE_BF16 ? 2 : 1;
}

/* Value i of one head's row (ref_codec_decode_row's layout). */
__device__ static float load_elem(const struct dfmt &f, const uint8_t *head, uint32_t i)
{
    if (!f.bits)
        return get_plain(f.dtype, head + (uint64_t)i * plain_size(f.dtype));
    uint64_t bit = (uint64_t)i * f.bits;
    uint32_t q = (head[bit / 8] >> (bit % 8)) & ((1u << f.bits) - 1);
    const uint8_t *m = head + f.cb + (uint64_t)(i / f.group) * f.meta;
    float scale = get_plain(f.scale, m);
    if (f.zp)
        return (float)q * scale + get_plain(f.scale, m + plain_size(f.scale));
    return ((float)q - (float)(1u << (f.bits - 1))) * scale;
}

/* ---- stores ----------------------------------------------------------------- */

struct dstore {
    uint8_t *base;      /* static: held rows */
    uint8_t **table;    /* paged: block pointers (device array) */
    uint64_t cap;       /* static: rows in the ring */
    uint64_t ring;      /* paged: rows of the block ring (0 = no window) */
};

__device__ static uint8_t *row_of(const struct dstore &s, uint32_t block, uint64_t row, uint64_t pos)
{
    if (!block)
        return s.base + (pos % s.cap) * row;
    uint64_t slot = s.ring ? pos % s.ring : pos;
    return s.table[slot / block] + (slot % block) * row;
}

/* ---- kernels ---------------------------------------------------------------- */

__global__ static void k_embed(float *x, const float *embed, const uint32_t *tok, uint32_t H, uint32_t B)
{
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (uint64_t)H * B)
        x[i] = embed[(uint64_t)tok[i / H] * H + i % H];
}

/* out (B, H) = x * rsqrt(mean(x^2) + 1e-5) * g; a block per sequence. */
__global__ static void k_rmsnorm(float *out, const float *x, const float *g, uint32_t H)
{
    __shared__ double part[256];
    const float *xb = x + (uint64_t)blockIdx.x * H;
    double ss = 0;
    for (uint32_t i = threadIdx.x; i < H; i += blockDim.x)
        ss += (double)xb[i] * xb[i];
    part[threadIdx.x] = ss;
    __syncthreads();
    for (uint32_t s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    float r = 1.0f / sqrtf((float)(part[0] / (double)H) + 1e-5f);
    for (uint32_t i = threadIdx.x; i < H; i += blockDim.x)
        out[(uint64_t)blockIdx.x * H + i] = xb[i] * r * g[i];
}

#define MB 8 /* sequences per pass of a weight row */

/* out (B, n) (+)= x (B, d) @ W^T, W (n, d): a warp per output row, the row
 * read once per MB sequences (decode is bandwidth-bound on W). */
__global__ static void k_matmul(float *out, const float *W, const float *x, uint32_t n, uint32_t d, uint32_t B, int add)
{
    uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (warp >= n)
        return;
    const float *w = W + (uint64_t)warp * d;
    for (uint32_t b0 = 0; b0 < B; b0 += MB) {
        float acc[MB];
        uint32_t nb = B - b0 < MB ? B - b0 : MB;
        for (uint32_t b = 0; b < MB; b++)
            acc[b] = 0;
        for (uint32_t j = lane; j < d; j += 32) {
            float wj = w[j];
            for (uint32_t b = 0; b < nb; b++)
                acc[b] += wj * x[(uint64_t)(b0 + b) * d + j];
        }
        for (uint32_t b = 0; b < nb; b++) {
            float a = acc[b];
            for (int o = 16; o > 0; o /= 2)
                a += __shfl_down_sync(0xffffffffu, a, o);
            if (lane == 0) {
                float *dst = out + (uint64_t)(b0 + b) * n + warp;
                *dst = add ? *dst + a : a;
            }
        }
    }
}

/* Rotate pairs (2i, 2i+1) of h heads of d dims in each of B rows of `stride`. */
__global__ static void k_rope(float *x, uint32_t h, uint32_t d, uint32_t stride, uint32_t B, uint64_t pos)
{
    uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, pairs = d / 2;
    if (t >= (uint64_t)B * h * pairs)
        return;
    uint64_t b = t / (h * pairs), k = t / pairs % h, i = 2 * (t % pairs);
    double th = (double)pos * pow(10000.0, -(double)i / d);
    float c = (float)cos(th), s = (float)sin(th);
    float *p = x + b * stride + k * d + i, a = p[0], bb = p[1];
    p[0] = a * c - bb * s;
    p[1] = a * s + bb * c;
}

/* Encode rows x (B, n_kv*d) into the stores of this layer (stores[b*2 + kv])
 * at pos: a thread per (sequence, head, group) for grouped ints, per value
 * otherwise. */
__global__ static void k_append(const struct dstore *stores, int kv, struct dfmt f, uint32_t block, uint32_t n_kv,
                                const float *x, uint32_t B, uint64_t pos)
{
    uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t per = f.bits ? (f.d + f.group - 1) / f.group : f.d;
    if (t >= (uint64_t)B * n_kv * per)
        return;
    uint32_t b = (uint32_t)(t / ((uint64_t)n_kv * per)), h = (uint32_t)(t / per % n_kv), e = (uint32_t)(t % per);
    uint8_t *head = row_of(stores[b * 2 + kv], block, f.row, pos) + h * f.head;
    const float *xh = x + ((uint64_t)b * n_kv + h) * f.d;
    if (!f.bits) {
        put_plain(f.dtype, xh[e], head + (uint64_t)e * plain_size(f.dtype));
        return;
    }
    /* group_params + quantize of codec.c */
    uint32_t lo = e * f.group, n = f.d - lo < f.group ? f.d - lo : f.group, top = (1u << f.bits) - 1;
    float mn = xh[lo], mx = xh[lo], scale, zp = 0;
    for (uint32_t i = 1; i < n; i++) {
        mn = fminf(mn, xh[lo + i]);
        mx = fmaxf(mx, xh[lo + i]);
    }
    uint8_t *meta = head + f.cb + (uint64_t)e * f.meta;
    if (f.zp) {
        scale = (mx - mn) / (float)top;
        zp = mn;
    } else {
        scale = fmaxf(fabsf(mn), fabsf(mx)) / (float)((1u << (f.bits - 1)) - 1);
    }
    put_plain(f.scale, scale, meta);
    scale = get_plain(f.scale, meta);
    if (f.zp) {
        put_plain(f.scale, zp, meta + plain_size(f.scale));
        zp = get_plain(f.scale, meta + plain_size(f.scale));
    }
    for (uint32_t i = 0; i < n; i++) {
        float q = scale > 0 ? rintf((xh[lo + i] - zp) / scale) : 0;
        if (!f.zp)
            q += (float)(1u << (f.bits - 1));
        uint32_t c = q < 0 ? 0 : q > (float)top ? top : (uint32_t)q;
        uint64_t bit = (uint64_t)(lo + i) * f.bits;
        uint8_t *p = head + bit / 8; /* a group fills whole bytes: no other thread writes here */
        *p = (uint8_t)((*p & ~(top << (bit % 8))) | (c << (bit % 8)));
    }
}

/* o (B, hq*dv): a block per (head, sequence), a warp per position for the
 * scores, a thread per output dim for the weighted sum; att (B, hq, span). */
__global__ static void k_attend(const struct dstore *stores, struct dfmt fk, struct dfmt fv, uint32_t block,
                                const float *q, const float *knew, const float *vnew, float *o, float *att,
                                uint32_t hq, uint32_t hkv, uint64_t lo, uint64_t pos, uint64_t span)
{
    __shared__ float red[32];
    __shared__ double sred[32];
    uint32_t h = blockIdx.x, b = blockIdx.y, g = hq / hkv, kh = h / g;
    uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    uint64_t n = pos - lo + 1;
    const float *qh = q + ((uint64_t)b * hq + h) * fk.d;
    float *a = att + ((uint64_t)b * hq + h) * span, scale = 1.0f / sqrtf((float)fk.d);
    const struct dstore &sk = stores[b * 2], &sv = stores[b * 2 + 1];
    for (uint64_t j = lo + warp; j <= pos; j += nw) {
        float acc = 0;
        if (j == pos) {
            const float *kr = knew + ((uint64_t)b * hkv + kh) * fk.d;
            for (uint32_t i = lane; i < fk.d; i += 32)
                acc += qh[i] * kr[i];
        } else {
            const uint8_t *kr = row_of(sk, block, fk.row, j) + kh * fk.head;
            for (uint32_t i = lane; i < fk.d; i += 32)
                acc += qh[i] * load_elem(fk, kr, i);
        }
        for (int s = 16; s > 0; s /= 2)
            acc += __shfl_down_sync(0xffffffffu, acc, s);
        if (lane == 0)
            a[j - lo] = acc * scale;
    }
    __syncthreads();
    float mx = -INFINITY;
    for (uint64_t j = threadIdx.x; j < n; j += blockDim.x)
        mx = fmaxf(mx, a[j]);
    for (int s = 16; s > 0; s /= 2)
        mx = fmaxf(mx, __shfl_down_sync(0xffffffffu, mx, s));
    if (lane == 0)
        red[warp] = mx;
    __syncthreads();
    mx = red[0];
    for (uint32_t w = 1; w < nw; w++)
        mx = fmaxf(mx, red[w]);
    double sum = 0;
    for (uint64_t j = threadIdx.x; j < n; j += blockDim.x) {
        a[j] = expf(a[j] - mx);
        sum += a[j];
    }
    for (int s = 16; s > 0; s /= 2)
        sum += __shfl_down_sync(0xffffffffu, sum, s);
    __syncthreads(); /* every a[j] written before it is read below */
    if (lane == 0)
        sred[warp] = sum;
    __syncthreads();
    sum = 0;
    for (uint32_t w = 0; w < nw; w++)
        sum += sred[w];
    for (uint32_t i = threadIdx.x; i < fv.d; i += blockDim.x) {
        float acc = 0;
        for (uint64_t j = lo; j <= pos; j++) {
            float p = (float)(a[j - lo] / sum), v;
            if (j == pos)
                v = vnew[((uint64_t)b * hkv + kh) * fv.d + i];
            else
                v = load_elem(fv, row_of(sv, block, fv.row, j) + kh * fv.head, i);
            acc += p * v;
        }
        o[((uint64_t)b * hq + h) * fv.d + i] = acc;
    }
}

__global__ static void k_swiglu(float *h1, const float *h3, uint64_t n)
{
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        h1[i] = h1[i] / (1.0f + expf(-h1[i])) * h3[i];
}

__global__ static void k_copy(float4 *dst, const float4 *src, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

static unsigned grid_of(uint64_t threads, unsigned per)
{
    return (unsigned)((threads + per - 1) / per);
}

/* ---- counting cudaMalloc -------------------------------------------------- */

struct live { void *p; uint64_t bytes; int tag; };

struct dalloc {
    uint64_t cur[KVP_REF_TAG_COUNT], total;
    struct live *v;  /* live cache allocations */
    uint64_t n, cap;
};

static enum kvp_status dalloc_get(struct dalloc *a, int tag, uint64_t bytes, void **out, struct kvp_error *err)
{
    if (a->n == a->cap) {
        uint64_t cap = a->cap ? 2 * a->cap : 256;
        struct live *v = (struct live *)realloc(a->v, cap * sizeof *v);
        if (!v)
            return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
        a->v = v;
        a->cap = cap;
    }
    CK(cudaMalloc(out, (size_t)bytes));
    a->v[a->n].p = *out;
    a->v[a->n].bytes = bytes;
    a->v[a->n++].tag = tag;
    a->cur[tag] += bytes;
    a->total += bytes;
    return KVP_OK;
}

static void dalloc_release(struct dalloc *a)
{
    for (uint64_t i = 0; i < a->n; i++)
        cudaFree(a->v[i].p);
    free(a->v);
    memset(a, 0, sizeof *a);
}

/* ---- the decoder state ---------------------------------------------------- */

struct hstore { /* host view of a store */
    uint8_t **table;   /* paged: host copy of the block table */
    uint64_t nblocks, maxblocks;
};

struct gpu {
    const struct kvp_model *m;
    struct kvp_cuda_weights *hw;
    float *dw;                       /* weights on the device */
    uint32_t B, block;
    uint64_t context;                /* static: rows preallocated; paged: the most positions */
    struct dfmt *fk, *fv;            /* (layers,) */
    struct dstore *ds;               /* device: (layers, B, 2) */
    struct dstore *hs;               /* host copy */
    struct hstore *ht;               /* (layers, B, 2) */
    uint8_t **dtables;               /* device: every store's table, maxblocks each */
    float *x, *xb, *q, *k, *v, *o, *h1, *h3, *att, *logits; /* scratch (B, ...) */
    uint32_t *tok;
    uint64_t span;                   /* most positions attended */
    struct dalloc a;
    struct kvp_format kf, vf;
};

/* Free everything; keep_weights: all but the weights (host and device), so
 * that the next gpu_new of the same model and opts reuses them. */
static void gpu_free(struct gpu *g, bool keep_weights)
{
    struct kvp_cuda_weights *hw = g->hw;
    float *dw = g->dw;
    dalloc_release(&g->a);
    cudaFree(g->ds);
    cudaFree(g->dtables);
    cudaFree(g->x);
    cudaFree(g->att);
    cudaFree(g->tok);
    if (g->ht)
        for (uint64_t i = 0; i < (uint64_t)g->m->n_layers * g->B * 2; i++)
            free(g->ht[i].table);
    free(g->ht);
    free(g->hs);
    free(g->fk);
    free(g->fv);
    if (!keep_weights) {
        cudaFree(dw);
        kvp_cuda_weights_free(hw);
    }
    memset(g, 0, sizeof *g);
    if (keep_weights) {
        g->hw = hw;
        g->dw = dw;
    }
}

static enum kvp_status make_fmt(const struct kvp_format *f, uint32_t n_kv, uint32_t d, struct dfmt *out,
                                struct kvp_error *err)
{
    const struct kvp_dtype_info *t = kvp_dtype_info(f->dtype);
    const char *why;
    uint64_t hb;
    enum kvp_status st;
    if (!kvp_cuda_format_ok(f, &why))
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "the CUDA cache cannot store '%s' (%s)", t->name, why);
    if ((st = kvp_format_row_bytes(f, d, &hb, err)) != KVP_OK)
        return st;
    memset(out, 0, sizeof *out);
    out->dtype = f->dtype;
    out->d = d;
    out->head = hb;
    out->row = hb * n_kv;
    if (t->grouped) {
        out->bits = t->block_bits;
        out->group = f->group;
        out->scale = f->scale;
        out->zp = f->zero_point;
        out->meta = kvp_dtype_info(f->scale)->block_bits / 8 * (f->zero_point ? 2 : 1);
        out->cb = (uint32_t)(((uint64_t)d * out->bits + 7) / 8);
        if ((uint64_t)f->group * out->bits % 8)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "the CUDA cache needs groups of whole bytes (got %u x %u bits)",
                            f->group, out->bits);
    }
    return KVP_OK;
}

static uint64_t held_of(const struct kvp_cuda_layer *y, uint64_t T)
{
    return y->window && T > y->window ? y->window : T;
}

/* Weights (unless g holds them already, from the same model and opts),
 * scratch and cache bookkeeping: everything but the cache itself. g is
 * zeroed but for hw and dw. */
static enum kvp_status gpu_new(const struct kvp_model *m, const struct kvp_cuda_opts *o, struct gpu *g,
                               struct kvp_error *err)
{
    enum kvp_status st;
    uint64_t L = m->n_layers, wide = 1, nst, maxhq = 1;
    struct kvp_cuda_weights *hw = g->hw;
    float *dw = g->dw;
    memset(g, 0, sizeof *g);
    g->hw = hw;
    g->dw = dw;
    g->m = m;
    g->B = o->batch;
    g->block = o->policy == KVP_REF_PAGED ? o->block : 0;
    g->context = o->context;
    g->kf = o->k;
    g->vf = o->v;
    if (o->policy != KVP_REF_STATIC && o->policy != KVP_REF_PAGED)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "the CUDA cache is static or paged (got '%s')",
                        kvp_ref_policy_name(o->policy));
    if (o->batch == 0 || o->context == 0 || (g->block == 0 && o->policy == KVP_REF_PAGED))
        return kvp_fail(err, KVP_ERR_RANGE, "batch, context and block must be positive");
    if (!g->hw && (st = kvp_cuda_weights_new(m, &o->ref, &g->hw, err)) != KVP_OK)
        return st;
    nst = L * g->B * 2;
    g->fk = (struct dfmt *)calloc(L ? L : 1, sizeof *g->fk);
    g->fv = (struct dfmt *)calloc(L ? L : 1, sizeof *g->fv);
    g->hs = (struct dstore *)calloc(nst ? nst : 1, sizeof *g->hs);
    g->ht = (struct hstore *)calloc(nst ? nst : 1, sizeof *g->ht);
    if (!g->fk || !g->fv || !g->hs || !g->ht)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    g->span = 1;
    uint64_t maxblocks = 1;
    for (uint32_t l = 0; l < L; l++) {
        const struct kvp_cuda_layer *y = &g->hw->layer[l];
        if (y->kind == KVP_LAYER_NONE)
            continue;
        if ((st = make_fmt(&o->k, y->hkv, y->dk, &g->fk[l], err)) != KVP_OK ||
            (st = make_fmt(&o->v, y->hkv, y->dv, &g->fv[l], err)) != KVP_OK)
            return st;
        uint64_t a = (uint64_t)y->hq * (y->dk > y->dv ? y->dk : y->dv), h = held_of(y, o->context);
        wide = a > wide ? a : wide;
        maxhq = y->hq > maxhq ? y->hq : maxhq;
        wide = (uint64_t)y->hkv * (y->dk > y->dv ? y->dk : y->dv) > wide
                   ? (uint64_t)y->hkv * (y->dk > y->dv ? y->dk : y->dv)
                   : wide;
        g->span = h > g->span ? h : g->span;
        if (g->block) {
            uint64_t nb = kvp_cdiv(h, g->block);
            maxblocks = nb > maxblocks ? nb : maxblocks;
        }
    }
    uint64_t H = g->hw->hidden, I = g->hw->inter, V = g->hw->vocab, B = g->B;
    uint64_t per = 2 * H + 4 * wide + 2 * I + V; /* x xb q k v o h1 h3 logits */
    if (!g->dw) {
        CK(cudaMalloc(&g->dw, g->hw->n * sizeof(float)));
        CK(cudaMemcpy(g->dw, g->hw->w, g->hw->n * sizeof(float), cudaMemcpyHostToDevice));
    }
    CK(cudaMalloc(&g->x, B * per * sizeof(float)));
    g->xb = g->x + B * H;
    g->q = g->xb + B * H;
    g->k = g->q + B * wide;
    g->v = g->k + B * wide;
    g->o = g->v + B * wide;
    g->h1 = g->o + B * wide;
    g->h3 = g->h1 + B * I;
    g->logits = g->h3 + B * I;
    CK(cudaMalloc(&g->att, B * maxhq * g->span * sizeof(float))); /* (B, hq, span) scores */
    CK(cudaMalloc(&g->tok, B * sizeof(uint32_t)));
    CK(cudaMalloc(&g->ds, (nst ? nst : 1) * sizeof(struct dstore)));
    if (g->block) {
        CK(cudaMalloc(&g->dtables, (nst ? nst : 1) * maxblocks * sizeof(uint8_t *)));
        for (uint64_t i = 0; i < nst; i++) {
            g->hs[i].table = g->dtables + i * maxblocks;
            g->ht[i].maxblocks = maxblocks;
            if (!(g->ht[i].table = (uint8_t **)calloc(maxblocks, sizeof(uint8_t *))))
                return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
        }
        for (uint32_t l = 0; l < L; l++) {
            const struct kvp_cuda_layer *y = &g->hw->layer[l];
            for (uint64_t i = 0; i < 2 * B; i++)
                g->hs[l * 2 * B + i].ring = y->window ? kvp_cdiv(y->window, g->block) * g->block : 0;
        }
        CK(cudaMemcpy(g->ds, g->hs, nst * sizeof *g->ds, cudaMemcpyHostToDevice));
    }
    return KVP_OK;
}

/* Static: every store's rows up front (kvp_cache_bytes of its held tokens). */
static enum kvp_status cache_alloc_static(struct gpu *g, struct kvp_error *err)
{
    enum kvp_status st;
    for (uint32_t l = 0; l < g->m->n_layers; l++) {
        const struct kvp_cuda_layer *y = &g->hw->layer[l];
        if (y->kind == KVP_LAYER_NONE)
            continue;
        uint64_t h = held_of(y, g->context);
        for (uint32_t b = 0; b < g->B; b++)
            for (int kv = 0; kv < 2; kv++) {
                const struct kvp_format *f = kv ? &g->vf : &g->kf;
                uint64_t bytes, rows = kv ? g->fv[l].row : g->fk[l].row;
                struct dstore *s = &g->hs[((uint64_t)l * g->B + b) * 2 + kv];
                if ((st = kvp_cache_bytes(f, y->hkv, kv ? y->dv : y->dk, h, 0, &bytes, err)) != KVP_OK)
                    return st;
                if (bytes != h * rows)
                    return kvp_fail(err, KVP_ERR_UNSUPPORTED, "cache bytes %llu are not %llu rows of %llu bytes",
                                    (unsigned long long)bytes, (unsigned long long)h, (unsigned long long)rows);
                if ((st = dalloc_get(&g->a, kv ? KVP_REF_V : KVP_REF_K, bytes, (void **)&s->base, err)) != KVP_OK)
                    return st;
                s->cap = h;
            }
    }
    CK(cudaMemcpy(g->ds, g->hs, (uint64_t)g->m->n_layers * g->B * 2 * sizeof *g->ds, cudaMemcpyHostToDevice));
    return KVP_OK;
}

/* Paged: the blocks position pos needs, allocated the first time. */
static enum kvp_status cache_ensure(struct gpu *g, uint64_t pos, struct kvp_error *err)
{
    enum kvp_status st;
    if (!g->block)
        return KVP_OK;
    for (uint32_t l = 0; l < g->m->n_layers; l++) {
        if (g->hw->layer[l].kind == KVP_LAYER_NONE)
            continue;
        for (uint64_t i = (uint64_t)l * g->B * 2; i < ((uint64_t)l + 1) * g->B * 2; i++) {
            struct hstore *h = &g->ht[i];
            uint64_t slot = g->hs[i].ring ? pos % g->hs[i].ring : pos, b = slot / g->block;
            if (b < h->nblocks)
                continue;
            if (b >= h->maxblocks)
                return kvp_fail(err, KVP_ERR_RANGE, "position %llu is past the context of %llu",
                                (unsigned long long)pos, (unsigned long long)g->context);
            int kv = (int)(i % 2);
            uint64_t bytes = (uint64_t)g->block * (kv ? g->fv[l].row : g->fk[l].row);
            if ((st = dalloc_get(&g->a, kv ? KVP_REF_V : KVP_REF_K, bytes, (void **)&h->table[b], err)) != KVP_OK)
                return st;
            CK(cudaMemcpy(g->hs[i].table + b, &h->table[b], sizeof(uint8_t *), cudaMemcpyHostToDevice));
            h->nblocks = b + 1;
        }
    }
    return KVP_OK;
}

static uint64_t lo_of(const struct kvp_cuda_layer *y, uint64_t pos)
{
    if (y->kind == KVP_LAYER_SLIDING && y->window && pos + 1 > y->window)
        return pos + 1 - y->window;
    if (y->kind == KVP_LAYER_CHUNKED && y->window)
        return pos - pos % y->window;
    return 0;
}

static void matmul(float *out, const float *W, const float *x, uint64_t n, uint64_t d, uint32_t B, int add)
{
    k_matmul<<<grid_of(n * 32, 256), 256>>>(out, W, x, (uint32_t)n, (uint32_t)d, B, add);
}

/* One decode step of every sequence at position pos; tokens (B,) on the host. */
static enum kvp_status step(struct gpu *g, const uint32_t *tokens, uint64_t pos, bool want_logits,
                            struct kvp_error *err)
{
    const struct kvp_cuda_weights *w = g->hw;
    const float *P = g->dw;
    uint64_t H = w->hidden, I = w->inter;
    uint32_t B = g->B;
    enum kvp_status st;
    if (pos >= g->context)
        return kvp_fail(err, KVP_ERR_RANGE, "position %llu is past the context of %llu", (unsigned long long)pos,
                        (unsigned long long)g->context);
    if ((st = cache_ensure(g, pos, err)) != KVP_OK)
        return st;
    CK(cudaMemcpy(g->tok, tokens, B * sizeof *tokens, cudaMemcpyHostToDevice));
    k_embed<<<grid_of(H * B, 256), 256>>>(g->x, P + w->embed, g->tok, (uint32_t)H, B);
    for (uint32_t l = 0; l < w->n_layers; l++) {
        const struct kvp_cuda_layer *y = &w->layer[l];
        if (y->kind != KVP_LAYER_NONE) {
            uint64_t nk = (uint64_t)y->hkv * y->dk, nv = (uint64_t)y->hkv * y->dv, nq = (uint64_t)y->hq * y->dk;
            uint64_t lo = lo_of(y, pos);
            const struct dstore *ds = g->ds + (uint64_t)l * B * 2;
            k_rmsnorm<<<B, 256>>>(g->xb, g->x, P + y->attn_norm, (uint32_t)H);
            matmul(g->k, P + y->wk, g->xb, nk, H, B, 0);
            matmul(g->v, P + y->wv, g->xb, nv, H, B, 0);
            matmul(g->q, P + y->wq, g->xb, nq, H, B, 0);
            k_rope<<<grid_of((uint64_t)B * y->hkv * (y->dk / 2), 256), 256>>>(g->k, y->hkv, y->dk, (uint32_t)nk, B,
                                                                              pos);
            k_rope<<<grid_of((uint64_t)B * y->hq * (y->dk / 2), 256), 256>>>(g->q, y->hq, y->dk, (uint32_t)nq, B, pos);
            uint32_t perk = g->fk[l].bits ? (y->dk + g->fk[l].group - 1) / g->fk[l].group : y->dk;
            uint32_t perv = g->fv[l].bits ? (y->dv + g->fv[l].group - 1) / g->fv[l].group : y->dv;
            k_append<<<grid_of((uint64_t)B * y->hkv * perk, 128), 128>>>(ds, 0, g->fk[l], g->block, y->hkv, g->k, B,
                                                                         pos);
            k_append<<<grid_of((uint64_t)B * y->hkv * perv, 128), 128>>>(ds, 1, g->fv[l], g->block, y->hkv, g->v, B,
                                                                         pos);
            dim3 grid(y->hq, B);
            k_attend<<<grid, 128>>>(ds, g->fk[l], g->fv[l], g->block, g->q, g->k, g->v, g->o, g->att, y->hq, y->hkv,
                                    lo, pos, g->span);
            matmul(g->x, P + y->wo, g->o, H, (uint64_t)y->hq * y->dv, B, 1);
        }
        if (y->w1 != NONE) {
            k_rmsnorm<<<B, 256>>>(g->xb, g->x, P + y->ffn_norm, (uint32_t)H);
            matmul(g->h1, P + y->w1, g->xb, I, H, B, 0);
            matmul(g->h3, P + y->w3, g->xb, I, H, B, 0);
            k_swiglu<<<grid_of(B * I, 256), 256>>>(g->h1, g->h3, B * I);
            matmul(g->x, P + y->w2, g->h1, H, I, B, 1);
        }
    }
    if (want_logits) {
        k_rmsnorm<<<B, 256>>>(g->xb, g->x, P + w->out_norm, (uint32_t)H);
        matmul(g->logits, P + w->lm_head, g->xb, w->vocab, H, B, 0);
    }
    CK(cudaGetLastError());
    return KVP_OK;
}

static uint32_t token_of(uint64_t t, uint32_t b, uint32_t vocab)
{
    return (uint32_t)((t * 2654435761u + b) % vocab); /* as cmd_validate.c */
}

/* Load every kernel now: with lazy module loading (CUDA 11.7+ default in 12)
 * a kernel's code is put in device memory at its first launch, which would
 * land inside the free-memory delta of the cache. */
static enum kvp_status preload_kernels(struct kvp_error *err)
{
    struct cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, k_embed));
    CK(cudaFuncGetAttributes(&fa, k_rmsnorm));
    CK(cudaFuncGetAttributes(&fa, k_matmul));
    CK(cudaFuncGetAttributes(&fa, k_rope));
    CK(cudaFuncGetAttributes(&fa, k_append));
    CK(cudaFuncGetAttributes(&fa, k_attend));
    CK(cudaFuncGetAttributes(&fa, k_swiglu));
    CK(cudaFuncGetAttributes(&fa, k_copy));
    return KVP_OK;
}

/* ---- the CPU decoder, for the logits -------------------------------------- */

static enum kvp_status cpu_logits(const struct kvp_model *m, const struct kvp_cuda_opts *o, float *out,
                                  struct kvp_error *err)
{
    struct kvp_ref_model *rm = NULL;
    struct kvp_ref_cache *c = NULL;
    struct kvp_ref_alloc a;
    struct kvp_ref_cache_opts co;
    enum kvp_status st;
    memset(&a, 0, sizeof a);
    memset(&co, 0, sizeof co);
    co.policy = KVP_REF_STATIC;
    co.context = o->context;
    co.batch = o->batch;
    co.block = o->block;
    co.k = o->k;
    co.v = o->v;
    if ((st = kvp_ref_model_new(m, &o->ref, &rm, err)) != KVP_OK)
        return st;
    uint32_t V = kvp_ref_vocab(rm);
    if ((st = kvp_ref_cache_new(rm, &co, &a, &c, err)) == KVP_OK)
        for (uint64_t t = 0; t < o->context && st == KVP_OK; t++)
            for (uint32_t b = 0; b < o->batch && st == KVP_OK; b++)
                st = kvp_ref_step(rm, c, b, token_of(t, b, V), t + 1 == o->context ? out + (uint64_t)b * V : NULL, err);
    kvp_ref_cache_free(c);
    kvp_ref_model_free(rm);
    return st;
}

/* ---- entry points ----------------------------------------------------------- */

static enum kvp_status predicted(const struct kvp_model *m, const struct kvp_cuda_opts *o, uint64_t *out,
                                 struct kvp_error *err)
{
    struct kvp_kv_query q;
    struct kvp_kv_plan plan;
    enum kvp_status st;
    memset(&q, 0, sizeof q);
    q.context = o->context;
    q.batch = o->batch;
    q.block = o->policy == KVP_REF_PAGED ? o->block : 0;
    q.k = o->k;
    q.v = o->v;
    if ((st = kvp_kv_compute(m, &q, &plan, err)) == KVP_OK)
        *out = plan.total_bytes;
    return st;
}

static enum kvp_status validate(const struct kvp_model *m, const struct kvp_cuda_opts *o, struct kvp_cuda_result *r,
                                struct gpu *g, float **hl, float **cl, uint64_t **sizes, struct kvp_error *err)
{
    enum kvp_status st;
    struct cudaDeviceProp prop;
    size_t free0, free1, total;
    uint32_t *tok;
    cudaEvent_t e0, e1;
    float ms = 0;

    memset(r, 0, sizeof *r);
    CK(cudaGetDeviceProperties(&prop, 0));
    snprintf(r->device, sizeof r->device, "%s", prop.name);
    if ((st = predicted(m, o, &r->predicted_bytes, err)) != KVP_OK ||
        (st = kvp_cuda_measure_gran(&r->gran, err)) != KVP_OK || (st = gpu_new(m, o, g, err)) != KVP_OK ||
        (st = preload_kernels(err)) != KVP_OK)
        return st;
    uint64_t V = g->hw->vocab;
    *hl = (float *)calloc((uint64_t)o->batch * V, sizeof(float));
    *cl = (float *)calloc((uint64_t)o->batch * V, sizeof(float));
    if (!(tok = (uint32_t *)calloc(o->batch, sizeof *tok)) || !*hl || !*cl) {
        free(tok);
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    }
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaDeviceSynchronize());
    CK(cudaMemGetInfo(&free0, &total));
    st = g->block ? KVP_OK : cache_alloc_static(g, err);
    CK(cudaEventRecord(e0));
    for (uint64_t t = 0; t < o->context && st == KVP_OK; t++) {
        for (uint32_t b = 0; b < o->batch; b++)
            tok[b] = token_of(t, b, (uint32_t)V);
        st = step(g, tok, t, t + 1 == o->context, err);
    }
    free(tok);
    if (st != KVP_OK)
        return st;
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    r->seconds = ms / 1e3;
    CK(cudaMemGetInfo(&free1, &total));
    CK(cudaMemcpy(*hl, g->logits, (uint64_t)o->batch * V * sizeof(float), cudaMemcpyDeviceToHost));
    r->counted_k = g->a.cur[KVP_REF_K];
    r->counted_v = g->a.cur[KVP_REF_V];
    r->counted_bytes = g->a.total;
    r->allocs = g->a.n;
    r->memgetinfo_delta = free0 > free1 ? free0 - free1 : 0;
    if (!(*sizes = (uint64_t *)calloc(g->a.n + 1, sizeof(uint64_t))))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < g->a.n; i++)
        (*sizes)[i] = g->a.v[i].bytes;
    if ((st = kvp_cuda_gran_bounds(&r->gran, *sizes, g->a.n, &r->delta_lo, &r->delta_hi, err)) != KVP_OK)
        return st;
    r->bytes_ok = r->counted_bytes == r->predicted_bytes;
    r->delta_ok = r->memgetinfo_delta >= r->delta_lo && r->memgetinfo_delta <= r->delta_hi;
    r->tolerance = kvp_cuda_logit_tolerance(&o->k, &o->v);
    if (o->compare) {
        if ((st = cpu_logits(m, o, *cl, err)) != KVP_OK)
            return st;
        for (uint64_t i = 0; i < (uint64_t)o->batch * V; i++) {
            double d = fabs((double)(*hl)[i] - (*cl)[i]), c = fabs((double)(*cl)[i]);
            r->max_abs_err = d > r->max_abs_err || d != d ? d : r->max_abs_err;
            r->max_abs_logit = c > r->max_abs_logit ? c : r->max_abs_logit;
        }
        r->compared = true;
        r->logits_ok = r->max_abs_err <= r->tolerance * r->max_abs_logit;
    }
    return KVP_OK;
}

extern "C" enum kvp_status kvp_cuda_validate(const struct kvp_model *m, const struct kvp_cuda_opts *o,
                                             struct kvp_cuda_result *r, struct kvp_error *err)
{
    struct gpu g;
    float *hl = NULL, *cl = NULL;
    uint64_t *sizes = NULL;
    memset(&g, 0, sizeof g);
    enum kvp_status st = validate(m, o, r, &g, &hl, &cl, &sizes, err);
    gpu_free(&g, false);
    free(hl);
    free(cl);
    free(sizes);
    return st;
}

extern "C" enum kvp_status kvp_cuda_device(char *name, uint64_t n, uint64_t *memory, struct kvp_error *err)
{
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    snprintf(name, (size_t)n, "%s", prop.name);
    *memory = prop.totalGlobalMem;
    return KVP_OK;
}

extern "C" enum kvp_status kvp_cuda_measure_gran(struct kvp_cuda_gran *out, struct kvp_error *err)
{
    enum { N = 24 };
    uint64_t req[N], delta[N];
    uint32_t n = 0;
    CK(cudaFree(0)); /* create the context first: its own memory is not ours */
    for (uint64_t s = 1; s <= (4u << 20) && n < N; s *= 2) {
        size_t f0, f1, total;
        void *p;
        CK(cudaDeviceSynchronize());
        CK(cudaMemGetInfo(&f0, &total));
        CK(cudaMalloc(&p, (size_t)s));
        CK(cudaMemGetInfo(&f1, &total));
        cudaFree(p);
        req[n] = s;
        delta[n++] = f0 > f1 ? f0 - f1 : 0;
    }
    return kvp_cuda_gran_fit(req, delta, n, out, err);
}

extern "C" enum kvp_status kvp_cuda_copy_bandwidth(double *bytes_per_s, struct kvp_error *err)
{
    const uint64_t bytes = 1ull << 30;
    float4 *a = NULL, *b = NULL;
    cudaEvent_t e0, e1;
    float ms = 0;
    CK(cudaMalloc(&a, bytes));
    if (cudaMalloc(&b, bytes) != cudaSuccess) {
        cudaFree(a);
        return kvp_fail(err, KVP_ERR_NOMEM, "cannot allocate 2 GiB for the copy kernel");
    }
    CK(cudaMemset(a, 0, bytes));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    k_copy<<<4096, 256>>>(b, a, bytes / sizeof(float4)); /* warm-up */
    CK(cudaEventRecord(e0));
    for (int i = 0; i < 10; i++)
        k_copy<<<4096, 256>>>(b, a, bytes / sizeof(float4));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    *bytes_per_s = 10.0 * 2.0 * (double)bytes / (ms / 1e3); /* read + write */
    return KVP_OK;
}

/* One point; g holds the weights from the previous point (or none yet). */
static enum kvp_status bench(const struct kvp_model *m, const struct kvp_cuda_opts *o, uint32_t steps,
                             struct kvp_cuda_bench *out, struct gpu *g, struct kvp_error *err)
{
    struct kvp_cuda_opts big = *o;
    uint64_t need;
    size_t fr, total;
    enum kvp_status st;
    uint32_t *tok;
    cudaEvent_t e0, e1;
    float ms = 0;

    memset(out, 0, sizeof *out);
    out->context = o->context;
    out->batch = o->batch;
    big.context = o->context + steps;
    if ((st = predicted(m, &big, &need, err)) != KVP_OK)
        return st;
    if (!g->hw && (st = gpu_new(m, &big, g, err)) != KVP_OK) /* the weights first: they are in the free figure */
        return st;
    gpu_free(g, true);
    CK(cudaMemGetInfo(&fr, &total));
    if (need > fr / 10 * 9) { /* the cache and a tenth for scratch */
        out->skipped = true;
        return KVP_OK;
    }
    if ((st = gpu_new(m, &big, g, err)) != KVP_OK || (st = g->block ? KVP_OK : cache_alloc_static(g, err)) != KVP_OK)
        return st;
    for (uint64_t p = 0; p < g->context && g->block; p++) /* paged: every block, before the clock */
        if ((st = cache_ensure(g, p, err)) != KVP_OK)
            return st;
    /* a synthetic prefix: byte 0x3c is a small finite value in every format */
    for (uint64_t i = 0; i < g->a.n; i++)
        CK(cudaMemset(g->a.v[i].p, 0x3c, g->a.v[i].bytes));
    if (!(tok = (uint32_t *)calloc(o->batch, sizeof *tok)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    st = step(g, tok, o->context, false, err); /* warm-up, not timed */
    if (st == KVP_OK && cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess) {
        cudaEventRecord(e0);
        for (uint32_t s = 1; s < steps && st == KVP_OK; s++)
            st = step(g, tok, o->context + s, false, err);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    free(tok);
    if (st != KVP_OK)
        return st;
    CK(cudaGetLastError());
    out->steps = steps - 1;
    out->seconds = ms / 1e3;
    out->tokens_per_s = out->seconds > 0 ? (double)o->batch * out->steps / out->seconds : 0;
    return KVP_OK;
}

extern "C" enum kvp_status kvp_cuda_bench(const struct kvp_model *m, const struct kvp_cuda_opts *o,
                                          const uint64_t *contexts, uint32_t n_contexts, const uint32_t *batches,
                                          uint32_t n_batches, uint32_t steps, struct kvp_cuda_bench *out,
                                          struct kvp_error *err)
{
    struct gpu g;
    enum kvp_status st = KVP_OK;
    memset(&g, 0, sizeof g);
    if (steps < 2)
        return kvp_fail(err, KVP_ERR_RANGE, "a benchmark needs at least 2 steps (got %u)", steps);
    for (uint32_t c = 0; c < n_contexts && st == KVP_OK; c++)
        for (uint32_t b = 0; b < n_batches && st == KVP_OK; b++) {
            struct kvp_cuda_opts p = *o;
            p.context = contexts[c];
            p.batch = batches[b];
            st = bench(m, &p, steps, &out[(uint64_t)c * n_batches + b], &g, err);
            gpu_free(&g, true);
        }
    gpu_free(&g, false);
    return st;
}
