/* num.c -- parsing and formatting of counts and byte quantities. */
#include "kvplan/num.h"

#include <ctype.h>
#include <math.h>
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
    if (n == 0 || n >= sizeof digits)
        return kvp_fail(err, KVP_ERR_USAGE, "'%s' is not a count (expected e.g. 4096, 32k, 1M)", s);
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

struct unit {
    const char *name;
    double mult;
};

static const struct unit units[] = {
    {"", 1.0}, {"b", 1.0},
    {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
    {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
    {"k", 1024.0}, {"m", 1048576.0}, {"g", 1073741824.0}, {"t", 1099511627776.0},
};

enum kvp_status kvp_parse_bytes(const char *s, uint64_t *out, struct kvp_error *err)
{
    const char *p = s;
    double whole = 0.0, frac = 0.0, scale = 1.0;
    int ndig = 0;

    while (isdigit((unsigned char)*p)) {
        whole = whole * 10.0 + (*p++ - '0');
        ndig++;
    }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            scale /= 10.0;
            frac += (*p++ - '0') * scale;
            ndig++;
        }
    }
    if (ndig == 0 || ndig > 24)
        return kvp_fail(err, KVP_ERR_USAGE, "'%s' is not a size (expected e.g. 80GiB, 80GB, 512MiB)", s);
    while (*p == ' ')
        p++;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(p, units[i].name) == 0) {
            double v = (whole + frac) * units[i].mult;
            if (!(v < 18446744073709551616.0))
                return kvp_fail(err, KVP_ERR_RANGE, "'%s' does not fit in 64 bits", s);
            *out = (uint64_t)llround(v);
            return KVP_OK;
        }
    }
    return kvp_fail(err, KVP_ERR_USAGE, "'%s' has an unknown unit (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s);
}

const char *kvp_format_bytes(uint64_t bytes, bool si, char *buf, uint32_t n)
{
    static const char *const iec[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    static const char *const dec[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
    double base = si ? 1000.0 : 1024.0, v = (double)bytes;
    int u = 0;

    if (bytes < (si ? 1000u : 1024u)) {
        snprintf(buf, n, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    while (v >= base && u < 6) {
        v /= base;
        u++;
    }
    snprintf(buf, n, "%.2f %s", v, si ? dec[u] : iec[u]);
    return buf;
}

const char *kvp_format_grouped(uint64_t v, char *buf, uint32_t n)
{
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
    uint32_t o = 0;
    for (int i = 0; i < len && o + 1 < n; i++) {
        if (i > 0 && (len - i) % 3 == 0 && o + 2 < n)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}
