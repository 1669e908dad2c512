/* check_num.c -- checked arithmetic, count and byte parsing, byte formatting. */
#include <stdint.h>
#include <string.h>

#include "kvplan/num.h"
#include "testutil.h"


/* ---- kvp_parse_count ---------------------------------------------------- */

static const struct {
    const char *in;
    uint64_t want;
} good_counts[] = {
    {"0", 0},
    {"1", 1},
    {"4096", 4096},
    {"32k", 32768},
    {"32K", 32768},
    {"128K", 131072},
    {"128k", 131072},
    {"1M", 1048576},
    {"1m", 1048576},
    {"2g", 2147483648ull},
    {"1G", 1073741824ull},
    {"18446744073709551615", UINT64_MAX},
    {"17179869183G", 17179869183ull << 30}, /* the largest whole G that fits */
    {"0k", 0},
};

START_TEST(parse_count_good)
{
    for (size_t i = 0; i < N_ELEMS(good_counts); i++) {
        struct kvp_error err = {0};
        uint64_t v = 12345;
        ck_assert_kvp_ok(kvp_parse_count(good_counts[i].in, &v, &err), err);
        ck_assert_msg(v == good_counts[i].want, "'%s': got %llu, want %llu", good_counts[i].in,
                      (unsigned long long)v, (unsigned long long)good_counts[i].want);
    }
}
END_TEST

static const struct {
    const char *in;
    enum kvp_status code;
} bad_counts[] = {
    {"", KVP_ERR_USAGE},
    {"k", KVP_ERR_USAGE},
    {"abc", KVP_ERR_USAGE},
    {"32kb", KVP_ERR_USAGE},
    {"32 k", KVP_ERR_USAGE},
    {" 32", KVP_ERR_USAGE},
    {"32 ", KVP_ERR_USAGE},
    {"-1", KVP_ERR_USAGE},
    {"+1", KVP_ERR_USAGE},
    {"3.5k", KVP_ERR_USAGE},
    {"0x10", KVP_ERR_USAGE},
    {"32t", KVP_ERR_USAGE},
    {"32kk", KVP_ERR_USAGE},
    {"99999999999999999999", KVP_ERR_RANGE},
    {"18446744073709551616", KVP_ERR_RANGE},
    {"18446744073709551615k", KVP_ERR_RANGE},
    {"17179869184G", KVP_ERR_RANGE}, /* exactly 2^64 */
    {"17592186044416M", KVP_ERR_RANGE},
};

START_TEST(parse_count_bad)
{
    for (size_t i = 0; i < N_ELEMS(bad_counts); i++) {
        struct kvp_error err = {0};
        uint64_t v = 777;
        enum kvp_status st = kvp_parse_count(bad_counts[i].in, &v, &err);
        ck_assert_msg(st == bad_counts[i].code, "'%s': status %d, want %d", bad_counts[i].in, st,
                      bad_counts[i].code);
        ck_assert_uint_eq(err.code, bad_counts[i].code);
        ck_assert_uint_eq(v, 777); /* untouched on failure */
        ck_assert_msg(err.msg[0] != '\0', "'%s': empty message", bad_counts[i].in);
    }
}
END_TEST

START_TEST(parse_count_messages)
{
    static const struct {
        const char *in, *msg;
    } t[] = {
        {"32kb", "'32kb' is not a count (expected e.g. 4096, 32k, 1M)"},
        {"", "'' is not a count (expected e.g. 4096, 32k, 1M)"},
        {"99999999999999999999", "'99999999999999999999' does not fit in 64 bits"},
        {"18446744073709551615k", "'18446744073709551615k' does not fit in 64 bits"},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        struct kvp_error err = {0};
        uint64_t v;
        ck_assert_int_ne(kvp_parse_count(t[i].in, &v, &err), KVP_OK);
        ck_assert_str_eq(err.msg, t[i].msg);
        ck_assert_str_eq(err.file, "");
        ck_assert_uint_eq(err.line, 0);
    }
}
END_TEST

/* A count with more digits than any uint64_t is still a number that is too
 * big, not junk: it must say so (RANGE), like a 20-digit one does. */
START_TEST(parse_count_many_digits)
{
    struct kvp_error err = {0};
    uint64_t v;
    const char *s = "1234567890123456789012345678901234567890";
    ck_assert_int_eq(kvp_parse_count(s, &v, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(err.msg, "'1234567890123456789012345678901234567890' does not fit in 64 bits");
}
END_TEST

START_TEST(parse_count_null_err)
{
    uint64_t v = 5;
    /* err may be NULL: the status still says what happened */
    ck_assert_int_eq(kvp_parse_count("junk", &v, NULL), KVP_ERR_USAGE);
    ck_assert_int_eq(kvp_parse_count("99999999999999999999", &v, NULL), KVP_ERR_RANGE);
    ck_assert_int_eq(kvp_parse_count("8k", &v, NULL), KVP_OK);
    ck_assert_uint_eq(v, 8192);
}
END_TEST

/* ---- kvp_parse_u64 ------------------------------------------------------- */

START_TEST(parse_u64_edges)
{
    static const struct {
        const char *in;
        bool ok;
        uint64_t want;
    } t[] = {
        {"0", true, 0},
        {"007", true, 7},
        {"4096", true, 4096},
        {"18446744073709551615", true, UINT64_MAX},
        {"18446744073709551616", false, 0},
        {"99999999999999999999", false, 0},
        {"", false, 0},
        {"-1", false, 0},
        {"+1", false, 0},
        {"1 ", false, 0},
        {"1k", false, 0},
        {"1.0", false, 0},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        uint64_t v = 99;
        bool ok = kvp_parse_u64(t[i].in, &v);
        ck_assert_msg(ok == t[i].ok, "'%s': got %d", t[i].in, ok);
        ck_assert_uint_eq(v, t[i].ok ? t[i].want : 99);
    }
}
END_TEST

/* ---- kvp_parse_bytes ----------------------------------------------------- */

static const struct {
    const char *in;
    uint64_t want;
} good_bytes[] = {
    {"0B", 0},
    {"0", 0}, /* zero is zero in any unit */
    {"1B", 1},
    {"4096B", 4096},
    {"1048576", 1048576}, /* bare: bytes, from 1 MiB on */
    {"85899345920", 85899345920ull},
    {"100B", 100},
    {"100 B", 100},
    {"80GiB", 80ull << 30},
    {"80 GiB", 80ull << 30},
    {"80gib", 80ull << 30},
    {"80GB", 80000000000ull},
    {"80gb", 80000000000ull},
    {"80 GB", 80000000000ull},
    /* 79.19 x 2^30 = 85029615042.56, rounded to the nearest byte */
    {"79.19 GiB", 85029615043ull},
    {"79.19GiB", 85029615043ull},
    {"512MiB", 512ull << 20},
    {"1.5KB", 1500},
    {"1.5KiB", 1536},
    {"0.5 KiB", 512},
    {"2TiB", 2ull << 40},
    {"2TB", 2000000000000ull},
    {"3MB", 3000000},
    {"1.25 MiB", 1310720},
    {"16k", 16384}, /* the short IEC forms */
    {"1M", 1048576},
    {"1.B", 1},
    {".5KiB", 512},
    {"0.0001 B", 0},
    {"0.5 B", 1}, /* llround: halves away from zero */
    {"2.5B", 3},
};

START_TEST(parse_bytes_good)
{
    for (size_t i = 0; i < N_ELEMS(good_bytes); i++) {
        struct kvp_error err = {0};
        uint64_t v = 1;
        ck_assert_kvp_ok(kvp_parse_bytes(good_bytes[i].in, &v, &err), err);
        ck_assert_msg(v == good_bytes[i].want, "'%s': got %llu, want %llu", good_bytes[i].in,
                      (unsigned long long)v, (unsigned long long)good_bytes[i].want);
    }
}
END_TEST

static const struct {
    const char *in;
    enum kvp_status code;
} bad_bytes[] = {
    {"", KVP_ERR_USAGE},
    {"80", KVP_ERR_USAGE}, /* 80 GiB with the unit forgotten, not 80 bytes */
    {"1048575", KVP_ERR_USAGE},
    {"2.5", KVP_ERR_USAGE},
    {"GiB", KVP_ERR_USAGE},
    {".", KVP_ERR_USAGE},
    {"-1GiB", KVP_ERR_USAGE},
    {"80 GiBs", KVP_ERR_USAGE},
    {"80XB", KVP_ERR_USAGE},
    {"80 bytes", KVP_ERR_USAGE},
    {"80PiB", KVP_ERR_USAGE},
    {"80 G iB", KVP_ERR_USAGE},
    {"1e9", KVP_ERR_USAGE},
    {"1,5GB", KVP_ERR_USAGE},
    {"16EiB", KVP_ERR_USAGE},
    {"16777216TiB", KVP_ERR_RANGE},     /* exactly 2^64 */
    {"18446744073709551616", KVP_ERR_RANGE},
    {"99999999TB", KVP_ERR_RANGE},
};

START_TEST(parse_bytes_bad)
{
    for (size_t i = 0; i < N_ELEMS(bad_bytes); i++) {
        struct kvp_error err = {0};
        uint64_t v = 4242;
        enum kvp_status st = kvp_parse_bytes(bad_bytes[i].in, &v, &err);
        ck_assert_msg(st == bad_bytes[i].code, "'%s': status %d, want %d", bad_bytes[i].in, st,
                      bad_bytes[i].code);
        ck_assert_uint_eq(v, 4242);
    }
}
END_TEST

START_TEST(parse_bytes_messages)
{
    static const struct {
        const char *in, *msg;
    } t[] = {
        {"80 GiBs", "'80 GiBs' has an unknown unit (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"},
        {"80XB", "'80XB' has an unknown unit (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"},
        {"GiB", "'GiB' is not a size (expected e.g. 80GiB, 80GB, 512MiB)"},
        {"", "'' is not a size (expected e.g. 80GiB, 80GB, 512MiB)"},
        {"16777216TiB", "'16777216TiB' does not fit in 64 bits"},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        struct kvp_error err = {0};
        uint64_t v;
        ck_assert_int_ne(kvp_parse_bytes(t[i].in, &v, &err), KVP_OK);
        ck_assert_str_eq(err.msg, t[i].msg);
    }
}
END_TEST

START_TEST(parse_bytes_largest)
{
    /* the largest whole TiB count below 2^64 */
    struct kvp_error err = {0};
    uint64_t v;
    ck_assert_kvp_ok(kvp_parse_bytes("16777215TiB", &v, &err), err);
    ck_assert_uint_eq(v, 16777215ull << 40);
}
END_TEST

/* ---- kvp_bytes_text ---------------------------------------------------- */

static const struct {
    uint64_t in;
    bool si;
    const char *want;
} fmt_bytes[] = {
    {0, false, "0 B"},
    {1, false, "1 B"},
    {1023, false, "1023 B"},
    {1024, false, "1.00 KiB"},
    {1536, false, "1.50 KiB"},
    {524288, false, "512.00 KiB"},
    {1048576, false, "1.00 MiB"},
    {2176ull << 20, false, "2.12 GiB"},
    {2147483648ull, false, "2.00 GiB"},
    {17179869184ull, false, "16.00 GiB"},
    {68719476736ull, false, "64.00 GiB"},
    {85029615043ull, false, "79.19 GiB"},
    {1ull << 40, false, "1.00 TiB"},
    {1ull << 50, false, "1.00 PiB"},
    {UINT64_MAX, false, "16.00 EiB"},
    {0, true, "0 B"},
    {999, true, "999 B"},
    {1000, true, "1.00 kB"},
    {1500, true, "1.50 kB"},
    {80000000000ull, true, "80.00 GB"},
    {68719476736ull, true, "68.72 GB"},
    {4718592, true, "4.72 MB"},
    {9663676416ull, true, "9.66 GB"},
    {943718400000ull, true, "943.72 GB"},
    {1000000000000ull, true, "1.00 TB"},
    {UINT64_MAX, true, "18.45 EB"},
};

START_TEST(format_bytes_table)
{
    for (size_t i = 0; i < N_ELEMS(fmt_bytes); i++) {
        char buf[32];
        const char *r = kvp_bytes_text(fmt_bytes[i].in, fmt_bytes[i].si, buf, sizeof buf);
        ck_assert_ptr_eq(r, buf);
        ck_assert_msg(strcmp(buf, fmt_bytes[i].want) == 0, "%llu si=%d: got '%s', want '%s'",
                      (unsigned long long)fmt_bytes[i].in, fmt_bytes[i].si, buf, fmt_bytes[i].want);
    }
}
END_TEST

/* The one table of byte units, and its clamp past EiB. */
START_TEST(unit_names)
{
    static const char *const iec[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "EiB", "EiB"};
    static const char *const dec[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB", "EB", "EB"};
    for (uint32_t p = 0; p < N_ELEMS(iec); p++) {
        ck_assert_str_eq(kvp_unit_name(p, false), iec[p]);
        ck_assert_str_eq(kvp_unit_name(p, true), dec[p]);
    }
    ck_assert_str_eq(kvp_unit_name(UINT32_MAX, false), "EiB");
}
END_TEST

START_TEST(format_bytes_small_buffer)
{
    char buf[6];
    memset(buf, 'x', sizeof buf);
    kvp_bytes_text(68719476736ull, false, buf, sizeof buf);
    ck_assert_str_eq(buf, "64.00"); /* truncated, always terminated */
}
END_TEST

/* ---- kvp_count_text -------------------------------------------------- */

static const struct {
    uint64_t in;
    const char *want;
} grouped[] = {
    {0, "0"},
    {7, "7"},
    {999, "999"},
    {1000, "1,000"},
    {9999, "9,999"},
    {100000, "100,000"},
    {524288, "524,288"},
    {1234567, "1,234,567"},
    {4718592, "4,718,592"},
    {6738415616ull, "6,738,415,616"},
    {46702792704ull, "46,702,792,704"},
    {UINT64_MAX, "18,446,744,073,709,551,615"},
};

START_TEST(format_grouped_table)
{
    for (size_t i = 0; i < N_ELEMS(grouped); i++) {
        char buf[32];
        ck_assert_ptr_eq(kvp_count_text(grouped[i].in, buf, sizeof buf), buf);
        ck_assert_str_eq(buf, grouped[i].want);
    }
}
END_TEST

START_TEST(format_grouped_exact_buffer)
{
    char buf[10]; /* "1,234,567" + NUL */
    kvp_count_text(1234567, buf, sizeof buf);
    ck_assert_str_eq(buf, "1,234,567");
}
END_TEST

/* ---- kvp_mul / kvp_add / kvp_mul3 / kvp_cdiv ----------------------------- */

static const struct {
    uint64_t a, b;
    bool ok;
    uint64_t want;
} muls[] = {
    {0, 0, true, 0},
    {0, UINT64_MAX, true, 0},
    {UINT64_MAX, 0, true, 0},
    {1, UINT64_MAX, true, UINT64_MAX},
    {UINT64_MAX, 1, true, UINT64_MAX},
    {UINT64_MAX, 2, false, 0},
    {2, UINT64_MAX, false, 0},
    {UINT64_MAX, UINT64_MAX, false, 0},
    {1ull << 32, 1ull << 31, true, 1ull << 63},
    {1ull << 32, 1ull << 32, false, 0},
    {1ull << 63, 2, false, 0},
    {UINT32_MAX, UINT32_MAX, true, 0xFFFFFFFE00000001ull},
    {0x100000001ull, 0xFFFFFFFFull, true, UINT64_MAX},
    {0x100000001ull, 0x100000000ull, false, 0},
};

START_TEST(mul_edges)
{
    for (size_t i = 0; i < N_ELEMS(muls); i++) {
        uint64_t out = 12345;
        bool ok = kvp_mul(muls[i].a, muls[i].b, &out);
        ck_assert_msg(ok == muls[i].ok, "row %zu: got %d", i, ok);
        ck_assert_uint_eq(out, muls[i].ok ? muls[i].want : 12345);
    }
}
END_TEST

static const struct {
    uint64_t a, b;
    bool ok;
    uint64_t want;
} adds[] = {
    {0, 0, true, 0},
    {UINT64_MAX, 0, true, UINT64_MAX},
    {0, UINT64_MAX, true, UINT64_MAX},
    {UINT64_MAX, 1, false, 0},
    {1, UINT64_MAX, false, 0},
    {UINT64_MAX, UINT64_MAX, false, 0},
    {1ull << 63, 1ull << 63, false, 0},
    {(1ull << 63) - 1, 1ull << 63, true, UINT64_MAX},
};

START_TEST(add_edges)
{
    for (size_t i = 0; i < N_ELEMS(adds); i++) {
        uint64_t out = 6789;
        bool ok = kvp_add(adds[i].a, adds[i].b, &out);
        ck_assert_msg(ok == adds[i].ok, "row %zu: got %d", i, ok);
        ck_assert_uint_eq(out, adds[i].ok ? adds[i].want : 6789);
    }
}
END_TEST

START_TEST(mul3_and_cdiv)
{
    uint64_t out = 1;
    ck_assert(kvp_mul3(32, 32, 128, &out));
    ck_assert_uint_eq(out, 131072);
    ck_assert(kvp_mul3(1ull << 21, 1ull << 21, 1ull << 21, &out));
    ck_assert_uint_eq(out, 1ull << 63);
    out = 55;
    ck_assert(!kvp_mul3(1ull << 22, 1ull << 21, 1ull << 21, &out));
    ck_assert(!kvp_mul3(UINT64_MAX, 2, 0, &out)); /* the first product already wraps */
    ck_assert(kvp_mul3(UINT64_MAX, 1, 1, &out));
    ck_assert_uint_eq(out, UINT64_MAX);

    ck_assert_uint_eq(kvp_cdiv(0, 1), 0);
    ck_assert_uint_eq(kvp_cdiv(1, 1), 1);
    ck_assert_uint_eq(kvp_cdiv(7, 2), 4);
    ck_assert_uint_eq(kvp_cdiv(8, 2), 4);
    ck_assert_uint_eq(kvp_cdiv(254, 8), 32);
    ck_assert_uint_eq(kvp_cdiv(UINT64_MAX, 2), 1ull << 63);
    ck_assert_uint_eq(kvp_cdiv(UINT64_MAX, UINT64_MAX), 1);
    ck_assert_uint_eq(kvp_cdiv(UINT64_MAX, 1), UINT64_MAX);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("num");
    TCase *core = tcase_create("core");
    TCase *limits = tcase_create("limits");

    tcase_add_test(core, parse_count_good);
    tcase_add_test(core, parse_bytes_good);
    tcase_add_test(core, format_bytes_table);
    tcase_add_test(core, unit_names);
    tcase_add_test(core, format_grouped_table);
    tcase_add_test(core, mul3_and_cdiv);
    tcase_add_test(core, parse_count_messages);
    tcase_add_test(core, parse_bytes_messages);
    suite_add_tcase(s, core);

    tcase_add_test(limits, parse_count_bad);
    tcase_add_test(limits, parse_count_many_digits);
    tcase_add_test(limits, parse_count_null_err);
    tcase_add_test(limits, parse_u64_edges);
    tcase_add_test(limits, parse_bytes_bad);
    tcase_add_test(limits, parse_bytes_largest);
    tcase_add_test(limits, format_bytes_small_buffer);
    tcase_add_test(limits, format_grouped_exact_buffer);
    tcase_add_test(limits, mul_edges);
    tcase_add_test(limits, add_edges);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
