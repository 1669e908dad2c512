/* num.h -- checked 64-bit byte arithmetic, quantity parsing and formatting.
 *
 * Every byte count in kvplan is a uint64_t computed through these helpers: a
 * product or sum that would wrap is reported, never returned.
 *
 *     uint64_t bytes;
 *     if (!kvp_mul3(layers, heads, dim, &bytes)) ... overflow ...
 *     uint64_t ctx;
 *     kvp_parse_count("128k", &ctx, &err);           // 131072
 *     kvp_parse_bytes("80GB", &mem, &err);           // 80000000000
 *     char s[32]; kvp_bytes_text(68719476736, 0, s, sizeof s);  // "64.00 GiB"
 *
 * Nothing here allocates; all state is the caller's.
 */
#ifndef KVPLAN_NUM_H
#define KVPLAN_NUM_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"

/* Marks a function whose unsigned arithmetic wraps on purpose (hashes and
 * random generators, never byte counts), so that the fuzz build's
 * -fsanitize=unsigned-integer-overflow leaves it alone. */
#if defined(__clang__)
#define KVP_WRAPS __attribute__((no_sanitize("unsigned-integer-overflow")))
#else
#define KVP_WRAPS
#endif

/* *out = a*b (a+b); false, and *out untouched, if the result does not fit. */
static inline bool kvp_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return false;
    *out = r;
    return true;
}

static inline bool kvp_add(uint64_t a, uint64_t b, uint64_t *out)
{
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return false;
    *out = r;
    return true;
}

static inline bool kvp_mul3(uint64_t a, uint64_t b, uint64_t c, uint64_t *out)
{
    uint64_t t;
    return kvp_mul(a, b, &t) && kvp_mul(t, c, out);
}

/* Saturating forms, for searches that only compare against a limit:
 * UINT64_MAX stands for "more than fits". Never use them for a figure that
 * is reported; those go through kvp_mul/kvp_add and fail on overflow. */
static inline uint64_t kvp_sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t kvp_sat_add(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* ceil(a/b) for b > 0, without overflow. */
static inline uint64_t kvp_cdiv(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* Parse a count: digits with an optional suffix k/K (x1024), m/M (x2^20),
 * g/G (x2^30), e.g. "32k", "128K", "1M", "4096". Token counts are powers of
 * two by custom ("128k context" = 131072). Errors: empty, junk, overflow. */
KVP_API enum kvp_status kvp_parse_count(const char *s, uint64_t *out, struct kvp_error *err);

/* Parse a byte quantity: a decimal number (fractions allowed) with a unit:
 * B, KiB, MiB, GiB, TiB (IEC, x1024^n) or KB, MB, GB, TB (SI, x1000^n); a
 * bare number is bytes. "80GiB", "79.19 GiB", "80GB". The result is rounded
 * to the nearest byte. */
KVP_API enum kvp_status kvp_parse_bytes(const char *s, uint64_t *out, struct kvp_error *err);

/* Parse a plain unsigned decimal integer that fits in 64 bits ("0", "4096"). */
KVP_API bool kvp_parse_u64(const char *s, uint64_t *out);

/* The name of 1024^power bytes (B, KiB, MiB, GiB, TiB, PiB, EiB) or, when si
 * is true, of 1000^power bytes (B, kB, MB, GB, TB, PB, EB): the one table of
 * byte units. A power past KVP_UNIT_MAX (EiB, the largest in 64 bits) names
 * KVP_UNIT_MAX. */
#define KVP_UNIT_MAX 6u
KVP_API const char *kvp_unit_name(uint32_t power, bool si);

/* Format bytes with two decimals in IEC units (B, KiB, MiB, GiB, TiB) or, when
 * si is true, SI units (B, kB, MB, GB, TB). Returns buf. */
KVP_API const char *kvp_bytes_text(uint64_t bytes, bool si, char *buf, uint32_t n);

/* Format an integer with thousands separators: 1234567 -> "1,234,567"; "?" if
 * it does not fit in n bytes (27 always suffice). */
KVP_API const char *kvp_count_text(uint64_t v, char *buf, uint32_t n);

#endif
