/* kernels.h -- the reference decoder's small float32 kernels that its hot
 * loops inline: dot products (one, and many vectors at once through 16 x 16
 * transposes in registers), weighted value sums, a RoPE turn. Static, so
 * that each KVP_REF_HOT clone compiles them for its own ISA. Included by
 * decoder.c and kernels.c only; the kernels that are called instead (matrix
 * products, RMS norm, RoPE, softmax) are declared in ref_internal.h and
 * defined in kernels.c. */
#ifndef KVPLAN_REF_KERNELS_H
#define KVPLAN_REF_KERNELS_H

#include <stdint.h>
#include <string.h>

#include "ref_internal.h"


/* Sixteen floats as one value (GNU C's vector extension, GCC and clang):
 * one AVX-512 register, two AVX2 or four SSE ones, whichever clone runs;
 * an operation on it is sixteen independent float operations, each
 * rounded as the scalar one (nothing contracted), so every clone gives the
 * same floats. Loaded and stored by memcpy (any alignment); passed by
 * pointer (a vector argument's ABI depends on the ISA). */
typedef float v16 __attribute__((vector_size(16 * sizeof(float))));
#define V16_LOAD(v, p) memcpy(&(v), (p), sizeof(v16))
#define V16_STORE(p, v) memcpy((p), &(v), sizeof(v16))

/* a (n,) . b (n,) in sixteen partial sums (lanes j mod 16, folded pairwise
 * at the end; the tail into lane 0): they break the chain of dependent adds,
 * so the loop runs at memory speed instead of at the FP add latency, and the
 * order is fixed, so a result never depends on who computes it. Every dot
 * product of the cached step (projections, scores) has these floats. */
static KVP_REF_INLINE float dot(const float *a, const float *b, uint64_t n)
{
    v16 acc = {0}, x, y;
    uint64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        V16_LOAD(x, a + j);
        V16_LOAD(y, b + j);
        acc += x * y;
    }
    for (; j < n; j++) /* the tail, n mod 16 values, into lane 0 */
        acc[0] += a[j] * b[j];
    float v[8]; /* lanes l and l + 8, then four apart, then ((0 + 1) + (2 + 3)) */
    for (uint32_t k = 0; k < 8; k++)
        v[k] = acc[k] + acc[k + 8];
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

/* dot of DOTS_NT vectors side by side, bit for bit: one row's dot with 16
 * vectors x_t at once, their columns transposed (xt (columns, DOTS_NT):
 * column c of all sixteen is one v16), each of dot's sixteen lanes one v16
 * (a[l][t]: lane l of the row's dot with x_t), so that a column is one
 * multiply and one add and no lane is folded before the row is done; the
 * lanes folded at the end as dot folds them, sixteen results at once. A
 * block of at most DOTS_COLS columns of xt at a time (32 KiB, in L1). */
#define DOTS_NT 16
#define DOTS_COLS 512
#define DOTS_ROWS 32

typedef int32_t v16i __attribute__((vector_size(16 * sizeof(int32_t))));

/* Lanes of a and b (16 each) chosen by 16 constant indices, b's from 16 on:
 * GCC's and clang's spellings of the one shuffle. */
#if defined(__clang__)
#define SHUFFLE16(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUFFLE16(a, b, ...) __builtin_shuffle(a, b, (v16i){__VA_ARGS__})
#endif
#define UNPAREN(...) __VA_ARGS__

/* Rows r[i] and r[i + s] (i without bit s) exchange their s-lane blocks:
 * after the steps s = 8, 4, 2, 1 the 16 x 16 block r is transposed. lo and
 * hi: the parenthesized indices of the two new rows. */
#define TRANSPOSE_STEP(r, s, lo, hi)                                                                    \
    do {                                                                                              \
        _Pragma("GCC unroll 16") for (uint32_t i = 0; i < 16; i++) if (!(i & (s))) {                   \
            v16 a_ = (r)[i], b_ = (r)[i + (s)];                                                         \
            (r)[i] = SHUFFLE16(a_, b_, UNPAREN lo);                                                     \
            (r)[i + (s)] = SHUFFLE16(a_, b_, UNPAREN hi);                                               \
        }                                                                                             \
    } while (0)

/* The 16 x 16 block r transposed in registers (r[i][j] <-> r[j][i]). */
static KVP_REF_INLINE void transpose16(v16 *r)
{
    TRANSPOSE_STEP(r, 8, (0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                   (8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31));
    TRANSPOSE_STEP(r, 4, (0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
                   (4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31));
    TRANSPOSE_STEP(r, 2, (0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
                   (2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31));
    TRANSPOSE_STEP(r, 1, (0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
                   (1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31));
}

/* b[v] = results r0..r0 + nr - 1 (nr <= 16) of vector v of dots' res
 * (rows by DOTS_NT vectors): 16 rows turned in registers into a run per
 * vector (lanes past nr repeat the last row). */
static KVP_REF_INLINE void res_runs(const float *res, uint64_t r0, uint64_t nr, v16 *b)
{
    _Pragma("GCC unroll 16") for (uint32_t i = 0; i < 16; i++)
        V16_LOAD(b[i], res + (r0 + (i < nr ? i : nr - 1)) * DOTS_NT);
    transpose16(b);
}

/* xt = columns c0..c1 of the DOTS_NT vectors x: 16 columns at a time
 * transposed in registers, the last c1 - c0 mod 16 one by one. */
static KVP_REF_INLINE void dots_transpose(const float *const *x, uint64_t c0, uint64_t c1, float *xt)
{
    uint64_t c = c0;
    for (; c + 16 <= c1; c += 16) {
        v16 r[16];
        _Pragma("GCC unroll 16") for (uint32_t t = 0; t < 16; t++)
            V16_LOAD(r[t], x[t] + c);
        transpose16(r);
        _Pragma("GCC unroll 16") for (uint32_t i = 0; i < 16; i++)
            V16_STORE(xt + (c - c0 + i) * DOTS_NT, r[i]);
    }
    for (; c < c1; c++)
        for (uint64_t t = 0; t < DOTS_NT; t++)
            xt[(c - c0) * DOTS_NT + t] = x[t][c];
}

/* a[l] += w[c] xt[c - c0] for the columns c of [c0, c1) in order: column c
 * into lane c mod 16 below n16 (d - d mod 16), into lane 0 from there on
 * (dot's tail). c0 is a multiple of 16, and so is c1 where it is below n16.
 * a is the caller's local array: inlined, it stays in registers. */
static KVP_REF_INLINE void dots_add(v16 *a, const float *w, const float *xt, uint64_t c0, uint64_t c1, uint64_t n16)
{
    uint64_t c = c0, m = c1 < n16 ? c1 : n16;
    for (; c < m; c += 16) {
        _Pragma("GCC unroll 16")
        for (uint32_t l = 0; l < 16; l++) {
            v16 x;
            V16_LOAD(x, xt + (c - c0 + l) * DOTS_NT);
            a[l] += w[c + l] * x;
        }
    }
    for (; c < c1; c++) {
        v16 x;
        V16_LOAD(x, xt + (c - c0) * DOTS_NT);
        a[0] += w[c] * x;
    }
}

/* *out = dot's fold of the lanes a[0..15]: lanes l and l + 8, then those
 * sums four apart, then ((0 + 1) + (2 + 3)); sixteen folds at once. */
static KVP_REF_INLINE void lanes_fold(const v16 *a, v16 *out)
{
    v16 v[8], u[4];
    _Pragma("GCC unroll 8")
    for (uint32_t k = 0; k < 8; k++)
        v[k] = a[k] + a[k + 8];
    _Pragma("GCC unroll 4")
    for (uint32_t k = 0; k < 4; k++)
        u[k] = v[k] + v[k + 4];
    *out = (u[0] + u[1]) + (u[2] + u[3]);
}

/* res (ni, DOTS_NT) = rows A + i sa (i < ni <= DOTS_ROWS) . x[t] (d,), the
 * same floats as dot; xt holds x's columns already when d <= DOTS_COLS
 * (the caller transposed them once for many rows), else it is scratch for
 * a block of them, the lanes of every row kept in acc between blocks. */
static KVP_REF_INLINE void dots(const float *A, uint64_t sa, uint64_t ni, const float *const *x, uint64_t d, float *xt,
                                float *res)
{
    uint64_t n16 = d / 16 * 16;
    v16 a[16], f;
    if (d <= DOTS_COLS) { /* one block: the lanes never leave the registers */
        for (uint64_t i = 0; i < ni; i++) {
            _Pragma("GCC unroll 16")
            for (uint32_t l = 0; l < 16; l++)
                a[l] = (v16){0};
            dots_add(a, A + i * sa, xt, 0, d, n16);
            lanes_fold(a, &f);
            V16_STORE(res + i * DOTS_NT, f);
        }
        return;
    }
    v16 acc[DOTS_ROWS * 16];
    memset(acc, 0, ni * 16 * sizeof *acc);
    for (uint64_t c0 = 0; c0 < d; c0 += DOTS_COLS) {
        uint64_t c1 = c0 + DOTS_COLS < d ? c0 + DOTS_COLS : d;
        dots_transpose(x, c0, c1, xt);
        for (uint64_t i = 0; i < ni; i++) {
            memcpy(a, acc + i * 16, sizeof a);
            dots_add(a, A + i * sa, xt, c0, c1, n16);
            memcpy(acc + i * 16, a, sizeof a);
        }
    }
    for (uint64_t i = 0; i < ni; i++) {
        lanes_fold(acc + i * 16, &f);
        V16_STORE(res + i * DOTS_NT, f);
    }
}

/* Vectors of a chunk below which dots does not pay for its transposes (a
 * last group of fewer than DOTS_NT is padded with its last vector). */
#define DOTS_MIN 8

/* Tokens whose value sums share the rows they read (wsum): at most
 * WSUM_NQ, each row's values loaded once for all of them. */
#define WSUM_NQ 4

/* o[q] (16 k,) += p[q][j] v_j for j < m in order, v_j = v + j stride, for
 * the nq outputs sharing the rows, k = 1, 4 or 8 (nq k <= 16): nq k
 * independent chains of adds, in registers for the whole run. nq and k are
 * constants where it is inlined. */
static KVP_REF_INLINE void wsum_run(float *const *o, const float *const *p, uint32_t nq, const float *v, uint64_t m,
                                    uint64_t stride, uint32_t k)
{
    v16 a[WSUM_NQ][8];
    _Pragma("GCC unroll 4") for (uint32_t q = 0; q < nq; q++)
        memcpy(a[q], o[q], k * sizeof(v16));
    for (uint64_t j = 0; j < m; j++) {
        const float *r = v + j * stride;
        _Pragma("GCC unroll 8")
        for (uint32_t i = 0; i < k; i++) {
            v16 x;
            V16_LOAD(x, r + 16 * i);
            _Pragma("GCC unroll 4")
            for (uint32_t q = 0; q < nq; q++)
                a[q][i] += p[q][j] * x;
        }
    }
    _Pragma("GCC unroll 4") for (uint32_t q = 0; q < nq; q++)
        memcpy(o[q], a[q], k * sizeof(v16));
}

/* wsum for a constant nq (1, 2 or 4): 128 values at a time (nq <= 2), 64,
 * then 16, then one. */
static KVP_REF_INLINE void wsum_nq(float *const *o, const float *const *p, uint32_t nq, const float *v, uint64_t m,
                                   uint64_t stride, uint32_t d)
{
    uint32_t i = 0;
    float *oi[WSUM_NQ];
#define WSUM_AT(k)                                                \
    do {                                                          \
        for (uint32_t q = 0; q < nq; q++)                         \
            oi[q] = o[q] + i;                                     \
        wsum_run(oi, p, nq, v + i, m, stride, k);                 \
    } while (0)
    for (; nq <= 2 && i + 128 <= d; i += 128)
        WSUM_AT(8);
    for (; i + 64 <= d; i += 64)
        WSUM_AT(4);
    for (; i + 16 <= d; i += 16)
        WSUM_AT(1);
#undef WSUM_AT
    for (; i < d; i++) /* the last d mod 16 values */
        for (uint32_t q = 0; q < nq; q++)
            for (uint64_t j = 0; j < m; j++)
                o[q][i] += p[q][j] * v[j * stride + i];
}

/* o[q] (d,) += p[q][j] v_j for j < m, q < nq (1 to WSUM_NQ): each o[q][i]
 * gets its products in the order of a loop over j of o[q][i] += p[q][j]
 * v_j[i]. Three outputs run as four, the last one twice (the same floats
 * into the same place). */
static KVP_REF_INLINE void wsum(float *const *o, const float *const *p, uint32_t nq, const float *v, uint64_t m,
                                uint64_t stride, uint32_t d)
{
    if (nq == 1) {
        wsum_nq(o, p, 1, v, m, stride, d);
    } else if (nq == 2) {
        wsum_nq(o, p, 2, v, m, stride, d);
    } else {
        float *o4[WSUM_NQ];
        const float *p4[WSUM_NQ];
        for (uint32_t q = 0; q < WSUM_NQ; q++)
            o4[q] = o[q < nq ? q : nq - 1], p4[q] = p[q < nq ? q : nq - 1];
        wsum_nq(o4, p4, WSUM_NQ, v, m, stride, d);
    }
}

/* Pair x[0], x[1] turned by the angle of cs (ref_rope_angle). */
static KVP_REF_INLINE void rope_turn(float *x, const float *cs)
{
    float a = x[0], b = x[1];
    x[0] = a * cs[0] - b * cs[1];
    x[1] = a * cs[1] + b * cs[0];
}

/* ref_rope with the angles of a table (decoder.c's rope_table): the same floats. */
static KVP_REF_INLINE void rope_by(float *x, uint32_t h, uint32_t d, uint32_t stride, const float *cs)
{
    for (uint32_t k = 0; k < h; k++)
        for (uint32_t i = 0; i + 1 < d; i += 2)
            rope_turn(x + (uint64_t)k * stride + i, cs + i);
}

#endif
