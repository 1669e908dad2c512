/* num.c -- parsing and formatting of counts and byte quantities. */
#include "kvplan/num.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool kvp_parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!s || !*s)
        return false;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s))
            return false;
        if (!kvp_mul(v, 10, &v) || !kvp_add(v, (uint64_t)(*s - '0'), &v))
            return false;
    }
    *out = v;
    return true;
}

enum kvp_status kvp_parse_count(const char *s, uint64_t *out, struct kvp_error *err)
{
    char digits[32];
    size_t n = 0;
    uint64_t v, mult = 1;

    while (s[n] && isdigit((unsigned char)s[n]))
        n++;
    if (n == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "'%s' is not a count (expected e.g. 4096, 32k, 1M)", s);
    if (n >= sizeof digits)
        return kvp_fail(err, KVP_ERR_RANGE, "'%s' does not fit in 64 bits", s);
    memcpy(digits, s, n);
    digits[n] = '\0';
    if (s[n]) {
        switch (s[n]) {
        case 'k': case 'K': mult = 1ull << 10; break;
        case 'm': case 'M': mult = 1ull << 20; break;
        case 'g': case 'G': mult = 1ull << 30; break;
        default:
            return kvp_fail(err, KVP_ERR_USAGE, "'%s' is not a count (expected e.g. 4096, 32k, 1M)", s);
        }
        if (s[n + 1])
            return kvp_fail(err, KVP_ERR_USAGE, "'%s' is not a count (expected e.g. 4096, 32k, 1M)", s);
    }
    if (!kvp_parse_u64(digits, &v) || !kvp_mul(v, mult, &v))
        return kvp_fail(err, KVP_ERR_RANGE, "'%s' does not fit in 64 bits", s);
    *out = v;
    return KVP_OK;
}

#define SIZE_POWER_MAX 4u /* TiB and TB: the largest unit a size is written in */

/* The bytes of unit name u, case-insensitive: the names of kvp_unit_name's
 * one table up to SIZE_POWER_MAX (B, KiB .. TiB, kB .. TB), the short K, M,
 * G, T (IEC) and none (bytes); 0 when u is no unit. */
static uint64_t unit_bytes(const char *u)
{
    uint64_t iec = 1, si = 1;
    if (*u == '\0')
        return 1;
    for (uint32_t p = 0; p <= SIZE_POWER_MAX; p++, iec <<= 10, si *= 1000) {
        if (strcasecmp(u, kvp_unit_name(p, false)) == 0 ||
            (p > 0 && u[1] == '\0' &&
             tolower((unsigned char)u[0]) == tolower((unsigned char)kvp_unit_name(p, false)[0])))
            return iec;
        if (strcasecmp(u, kvp_unit_name(p, true)) == 0)
            return si;
    }
    return 0;
}

/* whole * mult + round(frac * mult), exactly: whole is an integer, frac < 1. */
static bool scale(uint64_t whole, double frac, uint64_t mult, uint64_t *out)
{
    uint64_t v, part = (uint64_t)(frac * (double)mult + 0.5);
    return kvp_mul(whole, mult, &v) && kvp_add(v, part, out);
}

enum kvp_status kvp_parse_bytes(const char *s, uint64_t *out, struct kvp_error *err)
{
    const char *p = s;
    uint64_t whole = 0, mult;
    double frac = 0.0, place = 1.0;
    int ndig = 0;

    for (; isdigit((unsigned char)*p); p++, ndig++)
        if (!kvp_mul(whole, 10, &whole) || !kvp_add(whole, (uint64_t)(*p - '0'), &whole))
            return kvp_fail(err, KVP_ERR_RANGE, "'%s' does not fit in 64 bits", s);
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++, ndig++) {
            place /= 10.0;
            frac += (*p - '0') * place;
        }
    }
    if (ndig == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "'%s' is not a size (expected e.g. 80GiB, 80GB, 512MiB)", s);
    while (*p == ' ')
        p++;
    /* a bare number is a size in bytes only where it is plainly one: 0, or from 1 MiB on
     * (`--gpu-memory 80` is 80 GiB forgotten, never 80 bytes) */
    if (*p == '\0' && whole > 0 && whole < (1u << 20))
        return kvp_fail(err, KVP_ERR_USAGE,
                        "'%s' has no unit: write %sGiB, %sGB or %sB (units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; "
                        "a bare number means bytes only when 0 or from 1048576 on)", s, s, s, s);
    if ((mult = unit_bytes(p)) != 0) {
        if (!scale(whole, frac, mult, out))
            return kvp_fail(err, KVP_ERR_RANGE, "'%s' does not fit in 64 bits", s);
        return KVP_OK;
    }
    return kvp_fail(err, KVP_ERR_USAGE, "'%s' has an unknown unit (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s);
}

const char *kvp_unit_name(uint32_t power, bool si)
{
    static const char *const iec[KVP_UNIT_MAX + 1] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    static const char *const dec[KVP_UNIT_MAX + 1] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
    if (power > KVP_UNIT_MAX)
        power = KVP_UNIT_MAX;
    return si ? dec[power] : iec[power];
}

const char *kvp_bytes_text(uint64_t bytes, bool si, char *buf, uint32_t n)
{
    double base = si ? 1000.0 : 1024.0, v = (double)bytes;
    uint32_t u = 0;

    if (bytes < (si ? 1000u : 1024u)) {
        snprintf(buf, n, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    while (v >= base && u < KVP_UNIT_MAX) {
        v /= base;
        u++;
    }
    snprintf(buf, n, "%.2f %s", v, kvp_unit_name(u, si));
    return buf;
}

const char *kvp_count_text(uint64_t v, char *buf, uint32_t n)
{
    char digits[32], out[40];
    int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
    uint32_t o = 0;
    for (int i = 0; i < len; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
    /* never a misleading prefix: a buffer too small gets "?" */
    snprintf(buf, n, "%s", o < n ? out : "?");
    return buf;
}
