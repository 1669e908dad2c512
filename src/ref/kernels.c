/* kernels.c -- the reference decoder's float32 kernels: matrix products
 * (rows or groups of vectors split among the model's threads), RMS norm,
 * RoPE and softmax (with its own exp). Each result is the same floats
 * whoever computes it and whichever clone runs (kernels.h, ref_internal.h). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "kvplan/num.h"

/* out[t][lo..hi) = W[lo..hi) (rows of d) @ x[t] (d,) for the nt vectors of
 * a chunk: each weight row is read once for all of them (one dot per row
 * and vector, the same floats as nt products of one vector). */
KVP_REF_HOT void ref_matvec_rows(float *const *out, const float *W, const float *const *x, uint64_t nt, uint64_t lo,
                                 uint64_t hi, uint64_t d)
{
    for (uint64_t t0 = 0; nt >= DOTS_MIN && t0 < nt; t0 += DOTS_NT) { /* DOTS_NT vectors, rows at a time */
        uint64_t m = nt - t0 < DOTS_NT ? nt - t0 : DOTS_NT;
        const float *xs[DOTS_NT];
        _Alignas(64) float res[DOTS_ROWS * DOTS_NT], xt[DOTS_COLS * DOTS_NT]; /* a column: one cache line */
        for (uint64_t t = 0; t < DOTS_NT; t++)
            xs[t] = x[t0 + (t < m ? t : m - 1)];
        if (d <= DOTS_COLS)
            dots_transpose(xs, 0, d, xt);
        for (uint64_t i = lo; i < hi; i += DOTS_ROWS) {
            uint64_t ni = hi - i < DOTS_ROWS ? hi - i : DOTS_ROWS;
            dots(W + i * d, d, ni, xs, d, xt, res);
            for (uint64_t r = 0; r < ni; r += 16) { /* a run of 16 rows per vector */
                uint64_t nr = ni - r < 16 ? ni - r : 16;
                v16 b[16];
                res_runs(res, r, nr, b);
                for (uint64_t t = 0; t < m; t++)
                    if (nr == 16)
                        V16_STORE(out[t0 + t] + i + r, b[t]);
                    else
                        for (uint64_t k = 0; k < nr; k++)
                            out[t0 + t][i + r + k] = b[t][k];
            }
        }
    }
    for (uint64_t i = lo; i < hi && nt < DOTS_MIN; i++)
        for (uint64_t t = 0; t < nt; t++)
            out[t][i] = dot(W + i * d, x[t], d);
}

/* Below this many multiply-adds (rows x columns x vectors) a product is too
 * short to pay for waking the pool (~10 us): 256 Ki is ~0.05 ms. */
#define MATVEC_PAR_MIN (1ull << 18)

struct mv_job {
    float *const *out;
    const float *W;
    const float *const *x;
    uint64_t nt, n, d;
    bool by_vectors; /* parts take groups of DOTS_NT vectors, each all rows */
};

static void mv_part(void *arg, uint32_t part, uint32_t parts)
{
    const struct mv_job *j = arg;
    if (j->by_vectors) {
        uint64_t g = kvp_cdiv(j->nt, DOTS_NT), t0 = g * part / parts * DOTS_NT, t1 = g * (part + 1) / parts * DOTS_NT;
        if (t1 > j->nt)
            t1 = j->nt;
        if (t0 < t1)
            ref_matvec_rows(j->out + t0, j->W, j->x + t0, t1 - t0, 0, j->n, j->d);
        return;
    }
    ref_matvec_rows(j->out, j->W, j->x, j->nt, j->n * part / parts, j->n * (part + 1) / parts, j->d);
}

/* Below this many rows per part a product of wide rows (more than
 * DOTS_COLS) is split by groups of vectors instead of rows, where there
 * are as many groups as parts: dots transposes a group's columns once per
 * block of rows, which few rows do not pay for. */
#define MATVEC_PART_ROWS 256

/* out[t] (n,) = W (n, d) @ x[t] (d,) for t < nt, rows (or groups of
 * vectors) split among the model's threads (kvp_ref_pool_run): each
 * product the same floats whoever computes it. */
void ref_matmat(const struct kvp_ref_model *rm, float *const *out, const float *W, const float *const *x, uint64_t nt,
                uint64_t n, uint64_t d)
{
    uint32_t parts = kvp_ref_pool_parts(rm->pool);
    struct mv_job job = {out, W, x, nt, n, d,
                         d > DOTS_COLS && n / parts < MATVEC_PART_ROWS && nt >= DOTS_NT * (uint64_t)parts};
    if (n < kvp_ref_pool_parts(rm->pool) || nt * n * d < MATVEC_PAR_MIN)
        mv_part(&job, 0, 1);
    else
        kvp_ref_pool_run(rm->pool, mv_part, &job);
}

/* out (n,) = W (n, d) @ x (d,) */
void ref_matvec(const struct kvp_ref_model *rm, float *out, const float *W, const float *x, uint64_t n, uint64_t d)
{
    ref_matmat(rm, &out, W, &x, 1, n, d);
}

void ref_rmsnorm(float *out, const float *x, const float *g, uint64_t n)
{
    double ss = 0;
    for (uint64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(ss / (double)n) + 1e-5f);
    for (uint64_t i = 0; i < n; i++)
        out[i] = x[i] * r * g[i];
}

/* The cosine and sine of pair (i, i+1) of d dims at pos (i even): of the
 * angle pos * 10000^(-i/d). */
void ref_rope_angle(uint32_t i, uint32_t d, uint64_t pos, float *cs)
{
    double th = (double)pos * pow(10000.0, -(double)i / d);
    cs[0] = (float)cos(th), cs[1] = (float)sin(th);
}

/* Rotate pairs (2i, 2i+1) of each of h heads of d dims by pos * 10000^(-2i/d)
 * (each pair's angle computed once for all heads). */
void ref_rope(float *x, uint32_t h, uint32_t d, uint32_t stride, uint64_t pos)
{
    for (uint32_t i = 0; i + 1 < d; i += 2) {
        float cs[2];
        ref_rope_angle(i, d, pos, cs);
        for (uint32_t k = 0; k < h; k++)
            rope_turn(x + (uint64_t)k * stride + i, cs);
    }
}

/* e^(x - m) for the n floats of x, in place, in float (so that the loop
 * runs 16 at a time; the decoder's own, so the same floats on every
 * machine and library; Cephes' expf): x = k ln 2 + r, k = round(x / ln 2),
 * r = (x - k c1) - k c2 (ln 2 = c1 + c2, c1 of 9 bits: k c1 exact), |r| <=
 * ln 2 / 2; e^r = 1 + r + r^2 p(r), p Cephes' minimax polynomial of degree
 * 5; times 2^k as 2^(k >> 1) 2^(k - (k >> 1)) from their bits (both normal
 * floats, so that a result in the subnormal range or near the largest
 * float is only rounded at the end). Within 1 ulp of e^x wherever it is a
 * normal float (0.99 at worst over every float of [-104, 89], against exp
 * in double; tests/check_ref.c `softmax_exponential`). x - m is clamped
 * to [-104, 89] first: e^x rounds to 0 below (-inf too) and to infinity
 * above; a NaN stays one. */
static KVP_REF_INLINE void exp_lanes(float *x, uint64_t n, float m)
{
    const float shift = 0x1.8p23f, inv_ln2 = 1.44269504088896341f, c1 = 0x1.63p-1f, c2 = -2.12194440e-4f;
    for (uint64_t i = 0; i < n; i++) {
        float v = x[i] - m, s1, s2;
        v = v < -104.0f ? -104.0f : v > 89.0f ? 89.0f : v; /* a NaN stays one */
        float c = v * inv_ln2 + shift, k = c - shift, r = (v - k * c1) - k * c2; /* k in c's low bits */
        float p = 1.9875691500e-4f;
        p = p * r + 1.3981999507e-3f;
        p = p * r + 8.3334519073e-3f;
        p = p * r + 4.1665795894e-2f;
        p = p * r + 1.6666665459e-1f;
        p = p * r + 5.0000001201e-1f;
        p = p * (r * r) + r + 1.0f;
        uint32_t b, b1, b2;
        memcpy(&b, &c, sizeof b);
        int32_t ki = (int32_t)(b - 0x4b400000u), k1 = ki >> 1; /* k: c's bits less shift's */
        b1 = (uint32_t)(k1 + 127) << 23;
        b2 = (uint32_t)(ki - k1 + 127) << 23;
        memcpy(&s1, &b1, sizeof s1);
        memcpy(&s2, &b2, sizeof s2);
        x[i] = p * s1 * s2;
    }
}

/* x[i] = e^(x[i] - m) for i < n (exp_lanes): 16 at a time, the last n mod
 * 16 through a vector of 16 (each value's floats whichever lane it is in). */
static KVP_REF_INLINE void exp_row(float *x, uint64_t n, float m)
{
    uint64_t n16 = n / 16 * 16;
    exp_lanes(x, n16, m);
    if (n16 < n) {
        float t[16] = {0};
        memcpy(t, x + n16, (n - n16) * sizeof *x);
        exp_lanes(t, 16, m);
        memcpy(x + n16, t, (n - n16) * sizeof *x);
    }
}

/* The largest of y[0..n) (n > 0), NaNs passed over (a NaN when all are):
 * the rule of a loop of m = y[i] > m || m != m ? y[i] : m, taken in 16
 * lanes (j mod 16; where n is not a multiple of 16, the last 16 values
 * again, a value taken twice changing no maximum) and then across them
 * (lanes l and l + 8, then 4 apart, 2, 1). A maximum does not depend on the
 * order it is taken in, but for the sign of a zero, which leaves x - max
 * and e^(x - max) as they are. */
static KVP_REF_INLINE float row_max(const float *y, uint64_t n)
{
    if (n < 16) {
        float m = y[0];
        for (uint64_t i = 1; i < n; i++)
            m = y[i] > m || m != m ? y[i] : m;
        return m;
    }
    float a[16]; /* a compare and a masked move per 16 values where it vectorizes */
    memcpy(a, y, sizeof a);
    for (uint64_t i = 16;; i += 16) {
        const float *b = y + (i + 16 <= n ? i : n - 16); /* the last 16 again: a value twice is taken once */
        for (uint32_t l = 0; l < 16; l++)
            a[l] = ((b[l] > a[l]) | (a[l] != a[l])) ? b[l] : a[l];
        if (i + 16 >= n)
            break;
    }
    for (uint32_t w = 8; w; w /= 2) /* then lanes l and l + w, w = 8, 4, 2, 1 */
        for (uint32_t l = 0; l < w; l++)
            a[l] = ((a[l + w] > a[l]) | (a[l] != a[l])) ? a[l + w] : a[l];
    return a[0];
}

/* Softmax of rows rows of n values, stride floats apart: each row's
 * maximum (fmaxf's: a NaN is passed over, without its call), x = e^(x -
 * max) (exp_row), the sum of those in order (in double), x times the
 * float nearest 1 / sum.
 * SOFTMAX_ROWS rows at a time, their maxima and sums side by side
 * (independent chains of dependent operations), each row's floats those of
 * its own loop. */
#define SOFTMAX_ROWS 8

KVP_REF_HOT void ref_softmax_rows(float *x, uint64_t stride, uint32_t rows, uint64_t n)
{
    for (uint32_t r0 = 0; r0 < rows; r0 += SOFTMAX_ROWS) {
        uint32_t k = rows - r0 < SOFTMAX_ROWS ? rows - r0 : SOFTMAX_ROWS;
        float *y[SOFTMAX_ROWS], m[SOFTMAX_ROWS];
        double sum[SOFTMAX_ROWS];
        for (uint32_t r = 0; r < SOFTMAX_ROWS; r++) { /* rows past k repeat the last one, not written */
            y[r] = x + (r0 + (r < k ? r : k - 1)) * stride;
            sum[r] = 0;
        }
        for (uint32_t r = 0; r < k; r++)
            m[r] = row_max(y[r], n);
        for (uint32_t r = 0; r < k; r++)
            exp_row(y[r], n, m[r]);
        for (uint64_t i = 0; i < n; i++)
            _Pragma("GCC unroll 8") for (uint32_t r = 0; r < SOFTMAX_ROWS; r++)
                sum[r] += y[r][i];
        for (uint32_t r = 0; r < k; r++) {
            float inv = (float)(1.0 / sum[r]);
            for (uint64_t i = 0; i < n; i++)
                y[r][i] *= inv;
        }
    }
}

void ref_softmax(float *x, uint64_t n)
{
    ref_softmax_rows(x, 0, 1, n);
}
