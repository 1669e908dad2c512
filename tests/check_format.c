/* check_format.c -- dtype table, format strings, exact row bytes. */
#include <stdint.h>
#include <string.h>

#include "kvplan/format.h"
#include "testutil.h"


/* Parse s, failing the test with the error's text if it does not parse. */
static struct kvp_format parse_ok(const char *s)
{
    struct kvp_format f;
    struct kvp_error err = {0};
    memset(&f, 0, sizeof f);
    ck_assert_kvp_ok(kvp_format_parse(s, &f, &err), err);
    return f;
}

static void assert_same_format(const struct kvp_format *a, const struct kvp_format *b, const char *what)
{
    ck_assert_msg(a->dtype == b->dtype, "%s: dtype %d vs %d", what, a->dtype, b->dtype);
    ck_assert_msg(a->group == b->group, "%s: group %u vs %u", what, a->group, b->group);
    ck_assert_msg(a->axis == b->axis, "%s: axis %d vs %d", what, a->axis, b->axis);
    ck_assert_msg(a->scale == b->scale, "%s: scale %d vs %d", what, a->scale, b->scale);
    ck_assert_msg(a->zero_point == b->zero_point, "%s: zero_point %d vs %d", what, a->zero_point,
                  b->zero_point);
    ck_assert_msg(a->residual == b->residual, "%s: residual %u vs %u", what, a->residual, b->residual);
    ck_assert_msg(a->outliers_ppm == b->outliers_ppm, "%s: outliers %u vs %u", what, a->outliers_ppm,
                  b->outliers_ppm);
}

/* ---- the dtype table ---------------------------------------------------- */

static const struct {
    enum kvp_dtype d;
    const char *name;
    uint32_t block_elems, block_bytes; /* block_bytes x 8 = block_bits */
    bool grouped;
} table[] = {
    {KVP_DTYPE_F32, "f32", 1, 4, false},
    {KVP_DTYPE_F16, "f16", 1, 2, false},
    {KVP_DTYPE_BF16, "bf16", 1, 2, false},
    {KVP_DTYPE_FP8_E4M3, "fp8_e4m3", 1, 1, false},
    {KVP_DTYPE_FP8_E5M2, "fp8_e5m2", 1, 1, false},
    {KVP_DTYPE_Q8_0, "q8_0", 32, 34, false},
    {KVP_DTYPE_Q4_0, "q4_0", 32, 18, false},
    {KVP_DTYPE_Q4_1, "q4_1", 32, 20, false},
    {KVP_DTYPE_Q5_0, "q5_0", 32, 22, false},
    {KVP_DTYPE_Q5_1, "q5_1", 32, 24, false},
    {KVP_DTYPE_IQ4_NL, "iq4_nl", 32, 18, false},
    {KVP_DTYPE_MXFP4, "mxfp4", 32, 17, false},
    {KVP_DTYPE_NVFP4, "nvfp4", 16, 9, false},
};

START_TEST(dtype_table)
{
    for (size_t i = 0; i < N_ELEMS(table); i++) {
        const struct kvp_dtype_info *t = kvp_dtype_info(table[i].d);
        enum kvp_dtype d = KVP_DTYPE_COUNT;
        ck_assert_str_eq(t->name, table[i].name);
        ck_assert_uint_eq(t->block_elems, table[i].block_elems);
        ck_assert_uint_eq(t->block_bits, table[i].block_bytes * 8);
        ck_assert_int_eq(t->grouped, table[i].grouped);
        ck_assert(kvp_dtype_from_name(table[i].name, &d));
        ck_assert_int_eq(d, table[i].d);
    }
    /* the integer types: bits per code, grouped */
    ck_assert_uint_eq(kvp_dtype_info(KVP_DTYPE_INT8)->block_bits, 8);
    ck_assert_uint_eq(kvp_dtype_info(KVP_DTYPE_INT4)->block_bits, 4);
    ck_assert_uint_eq(kvp_dtype_info(KVP_DTYPE_INT2)->block_bits, 2);
    ck_assert(kvp_dtype_info(KVP_DTYPE_INT8)->grouped);
    ck_assert(kvp_dtype_info(KVP_DTYPE_INT4)->grouped);
    ck_assert(kvp_dtype_info(KVP_DTYPE_INT2)->grouped);
}
END_TEST

START_TEST(dtype_aliases)
{
    static const struct {
        const char *name;
        bool ok;
        enum kvp_dtype d;
    } t[] = {
        {"fp16", true, KVP_DTYPE_F16},     {"half", true, KVP_DTYPE_F16},
        {"float16", true, KVP_DTYPE_F16},  {"F16", true, KVP_DTYPE_F16},
        {"fp32", true, KVP_DTYPE_F32},     {"float", true, KVP_DTYPE_F32},
        {"float32", true, KVP_DTYPE_F32},  {"bfloat16", true, KVP_DTYPE_BF16},
        {"BF16", true, KVP_DTYPE_BF16},    {"fp8", true, KVP_DTYPE_FP8_E4M3},
        {"e4m3", true, KVP_DTYPE_FP8_E4M3}, {"e5m2", true, KVP_DTYPE_FP8_E5M2},
        {"float8_e4m3fn", true, KVP_DTYPE_FP8_E4M3},
        {"Q4_0", true, KVP_DTYPE_Q4_0},    {"INT4", true, KVP_DTYPE_INT4},
        {"fp7", false, KVP_DTYPE_F32},     {"", false, KVP_DTYPE_F32},
        {"int3", false, KVP_DTYPE_F32},    {"q8", false, KVP_DTYPE_F32},
        {"f16 ", false, KVP_DTYPE_F32},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        enum kvp_dtype d = KVP_DTYPE_COUNT;
        bool ok = kvp_dtype_from_name(t[i].name, &d);
        ck_assert_msg(ok == t[i].ok, "'%s': got %d", t[i].name, ok);
        if (ok)
            ck_assert_int_eq(d, t[i].d);
        else
            ck_assert_int_eq(d, KVP_DTYPE_COUNT); /* untouched */
    }
}
END_TEST

START_TEST(plain_defaults)
{
    struct kvp_format f = kvp_format_plain(KVP_DTYPE_INT4);
    ck_assert_int_eq(f.dtype, KVP_DTYPE_INT4);
    ck_assert_uint_eq(f.group, 32);
    ck_assert_int_eq(f.axis, KVP_AXIS_TOKEN);
    ck_assert_int_eq(f.scale, KVP_DTYPE_F16);
    ck_assert(f.zero_point);
    ck_assert_uint_eq(f.residual, 0);
    ck_assert_uint_eq(f.outliers_ppm, 0);
}
END_TEST

/* ---- row bytes: one head's row of 128 values ------------------------------ */

static const struct {
    const char *fmt;
    uint64_t bytes;
} rows128[] = {
    {"f32", 512},
    {"f16", 256},
    {"bf16", 256},
    {"fp8", 128},
    {"fp8_e4m3", 128},
    {"fp8_e5m2", 128},
    {"q8_0", 136},   /* 4 blocks x 34 */
    {"q4_0", 72},    /* 4 x 18 */
    {"q4_1", 80},    /* 4 x 20 */
    {"q5_0", 88},    /* 4 x 22 */
    {"q5_1", 96},    /* 4 x 24 */
    {"iq4_nl", 72},  /* 4 x 18 */
    {"mxfp4", 68},   /* 4 x 17 */
    {"nvfp4", 72},   /* 8 x 9 */
    /* integer types: codes + per group of 32 an f16 scale and an f16 zero point */
    {"int8", 144},                     /* 128 + 4 x 4 */
    {"int4", 80},                      /* 64 + 16 */
    {"int2", 48},                      /* 32 + 16 */
    {"int4:zp=no", 72},                /* 64 + 4 x 2 */
    {"int4:group=64:scale=f32", 80},   /* 64 + 2 x 8 */
    {"int4:group=64:scale=f32:zp=no", 72},  /* 64 + 2 x 4 */
    {"int4:group=128", 68},            /* 64 + 1 x 4 */
    {"int8:group=128:scale=bf16:zp=no", 130},
    {"int4:group=48", 76},             /* 64 + ceil(128/48)=3 x 4 */
    {"int8:group=1", 640},             /* 128 + 128 x 4 */
    {"int2:group=256", 36},            /* one group covers the row */
    /* channel axis: the scales belong to G-token groups, not to the row */
    {"int4:axis=channel", 64},
    {"int2:group=32:axis=channel:residual=128", 32},
    /* residual and outliers do not change a quantized row */
    {"int4:residual=64", 80},
    {"int8:outliers=0.01", 144},
};

START_TEST(row_bytes_128)
{
    for (size_t i = 0; i < N_ELEMS(rows128); i++) {
        struct kvp_format f = parse_ok(rows128[i].fmt);
        struct kvp_error err = {0};
        uint64_t b = 0;
        ck_assert_kvp_ok(kvp_format_row_bytes(&f, 128, &b, &err), err);
        ck_assert_msg(b == rows128[i].bytes, "'%s': got %llu, want %llu", rows128[i].fmt,
                      (unsigned long long)b, (unsigned long long)rows128[i].bytes);
    }
}
END_TEST

/* Rows that are not a multiple of 32 for the integer types: bits round up to
 * whole bytes, the last group is partial but has its own scale. */
START_TEST(row_bytes_odd)
{
    static const struct {
        const char *fmt;
        uint64_t n, bytes;
    } t[] = {
        {"int2", 127, 32 + 16},  /* 254 bits -> 32 B; 4 groups */
        {"int4", 3, 2 + 4},      /* 12 bits -> 2 B; 1 group */
        {"int4", 1, 1 + 4},
        {"int8", 33, 33 + 8},
        {"int4:zp=no", 96, 48 + 6},
        {"f16", 1, 2},
        {"f32", 0, 0},
        {"int4", 0, 0},
        {"q8_0", 0, 0},
        {"q8_0", 32, 34},
        {"nvfp4", 16, 9},
        {"nvfp4", 48, 27},
        {"q4_0", 64, 36},
        {"mxfp4", 96, 51},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        struct kvp_format f = parse_ok(t[i].fmt);
        struct kvp_error err = {0};
        uint64_t b = 0;
        ck_assert_kvp_ok(kvp_format_row_bytes(&f, t[i].n, &b, &err), err);
        ck_assert_msg(b == t[i].bytes, "'%s' n=%llu: got %llu, want %llu", t[i].fmt,
                      (unsigned long long)t[i].n, (unsigned long long)b, (unsigned long long)t[i].bytes);
    }
}
END_TEST

/* Block types refuse rows that are not a whole number of blocks, naming both. */
START_TEST(row_bytes_block_refusal)
{
    static const struct {
        const char *fmt;
        uint64_t n;
        const char *msg;
    } t[] = {
        {"q8_0", 100, "q8_0 stores blocks of 32 values, which does not divide a row of 100"},
        {"q4_0", 80, "q4_0 stores blocks of 32 values, which does not divide a row of 80"},
        {"q4_1", 1, "q4_1 stores blocks of 32 values, which does not divide a row of 1"},
        {"q5_0", 31, "q5_0 stores blocks of 32 values, which does not divide a row of 31"},
        {"q5_1", 33, "q5_1 stores blocks of 32 values, which does not divide a row of 33"},
        {"iq4_nl", 72, "iq4_nl stores blocks of 32 values, which does not divide a row of 72"},
        {"mxfp4", 48, "mxfp4 stores blocks of 32 values, which does not divide a row of 48"},
        {"nvfp4", 24, "nvfp4 stores blocks of 16 values, which does not divide a row of 24"},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        struct kvp_format f = parse_ok(t[i].fmt);
        struct kvp_error err = {0};
        uint64_t b = 4242;
        ck_assert_int_eq(kvp_format_row_bytes(&f, t[i].n, &b, &err), KVP_ERR_RANGE);
        ck_assert_int_eq(err.code, KVP_ERR_RANGE);
        ck_assert_str_eq(err.msg, t[i].msg);
        ck_assert_uint_eq(b, 4242);
    }
}
END_TEST

START_TEST(row_bytes_overflow)
{
    static const struct {
        const char *fmt;
        uint64_t n;
    } t[] = {
        {"f32", UINT64_MAX},
        {"f16", 1ull << 63},
        {"int8", UINT64_MAX / 8 + 1},
        {"q8_0", (UINT64_MAX / 32) * 32},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        struct kvp_format f = parse_ok(t[i].fmt);
        struct kvp_error err = {0};
        uint64_t b = 99;
        ck_assert_msg(kvp_format_row_bytes(&f, t[i].n, &b, &err) == KVP_ERR_OVERFLOW, "'%s'", t[i].fmt);
        ck_assert_uint_eq(b, 99);
    }
    /* a row near the top of the range (n x 16 bits still fits) */
    {
        struct kvp_format f = parse_ok("f16");
        struct kvp_error err = {0};
        uint64_t b;
        ck_assert_kvp_ok(kvp_format_row_bytes(&f, (1ull << 60) - 1, &b, &err), err);
        ck_assert_uint_eq(b, ((1ull << 60) - 1) * 2);
    }
}
END_TEST

START_TEST(residual_bytes)
{
    static const struct {
        const char *fmt;
        uint64_t n, bytes;
    } t[] = {
        {"int2", 10, 20},
        {"int2:scale=bf16", 10, 20},
        {"int2:scale=f32", 10, 40},
        {"int4:group=64:scale=f32:residual=128", 128, 512},
        {"int8", 0, 0},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        struct kvp_format f = parse_ok(t[i].fmt);
        uint64_t b = 0;
        ck_assert(kvp_format_residual_bytes(&f, t[i].n, &b));
        ck_assert_uint_eq(b, t[i].bytes);
    }
    {
        struct kvp_format f = parse_ok("int2");
        uint64_t b = 7;
        ck_assert(!kvp_format_residual_bytes(&f, UINT64_MAX, &b));
        ck_assert_uint_eq(b, 7);
    }
}
END_TEST

START_TEST(bits_per_value)
{
    static const struct {
        const char *fmt;
        uint64_t n;
        double bits;
    } t[] = {
        {"f32", 128, 32.0},
        {"f16", 128, 16.0},
        {"fp8", 128, 8.0},
        {"q8_0", 128, 8.5},
        {"q4_0", 128, 4.5},  /* not 4 */
        {"q4_1", 128, 5.0},
        {"q5_0", 128, 5.5},
        {"q5_1", 128, 6.0},
        {"iq4_nl", 128, 4.5},
        {"mxfp4", 128, 4.25},
        {"nvfp4", 128, 4.5},
        {"int8", 128, 9.0},
        {"int4", 128, 5.0},
        {"int2", 128, 3.0},
        {"int4:zp=no", 128, 4.5},
        {"int2:axis=channel", 128, 3.0},
        {"int2:group=128:axis=channel:zp=no", 128, 2.125},
        {"int4:outliers=0.01", 128, 5.64},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        struct kvp_format f = parse_ok(t[i].fmt);
        double b = kvp_format_bits_per_value(&f, t[i].n);
        ck_assert_msg(b > t[i].bits - 1e-9 && b < t[i].bits + 1e-9, "'%s': got %.6f, want %.6f", t[i].fmt, b,
                      t[i].bits);
    }
}
END_TEST

/* ---- parsing settings ----------------------------------------------------- */

START_TEST(parse_settings)
{
    struct kvp_format f = parse_ok("int2:group=32:axis=channel:residual=128");
    ck_assert_int_eq(f.dtype, KVP_DTYPE_INT2);
    ck_assert_uint_eq(f.group, 32);
    ck_assert_int_eq(f.axis, KVP_AXIS_CHANNEL);
    ck_assert_int_eq(f.scale, KVP_DTYPE_F16);
    ck_assert(f.zero_point);
    ck_assert_uint_eq(f.residual, 128);
    ck_assert_uint_eq(f.outliers_ppm, 0);

    f = parse_ok("int4:group=64:scale=f32:zp=no:outliers=0.01");
    ck_assert_int_eq(f.dtype, KVP_DTYPE_INT4);
    ck_assert_uint_eq(f.group, 64);
    ck_assert_int_eq(f.axis, KVP_AXIS_TOKEN);
    ck_assert_int_eq(f.scale, KVP_DTYPE_F32);
    ck_assert(!f.zero_point);
    ck_assert_uint_eq(f.outliers_ppm, 10000);

    f = parse_ok("INT8:scale=bfloat16");
    ck_assert_int_eq(f.dtype, KVP_DTYPE_INT8);
    ck_assert_int_eq(f.scale, KVP_DTYPE_BF16);

    f = parse_ok("int2:axis=channel:residual=0");
    ck_assert_uint_eq(f.residual, 0);

    f = parse_ok("int4:group=65536:residual=16777216:outliers=0.5");
    ck_assert_uint_eq(f.group, 65536);
    ck_assert_uint_eq(f.residual, 16777216);
    ck_assert_uint_eq(f.outliers_ppm, 500000);

    f = parse_ok("fp16");
    ck_assert_int_eq(f.dtype, KVP_DTYPE_F16);
}
END_TEST

#define ALL_TYPES                                                                                                      \
    "(f32, f16, bf16, fp8_e4m3, fp8_e5m2, int8, int4, int2, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4, nvfp4, "      \
    "q8_1, q2_K, q3_K, q4_K, q5_K, q6_K, q8_K, iq2_xxs, iq2_xs, iq3_xxs, iq1_s, iq3_s, iq2_s, iq4_xs, iq1_m, tq1_0, "  \
    "tq2_0, i8, i16, i32, i64, f64)"

static const struct {
    const char *in, *msg;
} bad_formats[] = {
    {"fp7", "unknown format 'fp7' " ALL_TYPES},
    {"", "unknown format '' " ALL_TYPES},
    {":group=32", "unknown format ':group=32' " ALL_TYPES},
    {"int3:group=32", "unknown format 'int3:group=32' " ALL_TYPES},
    {"int4:foo=1", "format 'int4:foo=1': unknown setting 'foo' (group, axis, scale, zp, residual, outliers)"},
    {"int4:GROUP=64", "format 'int4:GROUP=64': unknown setting 'GROUP' (group, axis, scale, zp, residual, outliers)"},
    {"q8_0:group=32", "format 'q8_0:group=32': 'q8_0' takes no settings"},
    {"f16:zp=no", "format 'f16:zp=no': 'f16' takes no settings"},
    {"fp16:zp=no", "format 'fp16:zp=no': 'f16' takes no settings"},
    {"fp8:axis=channel", "format 'fp8:axis=channel': 'fp8_e4m3' takes no settings"},
    {"nvfp4:residual=128", "format 'nvfp4:residual=128': 'nvfp4' takes no settings"},
    {"int2:group=32:axis=channel:residual=100",
     "format 'int2:group=32:axis=channel:residual=100': 'residual' must be a multiple of 'group' with "
     "axis=channel (got 100 and 32)"},
    {"int2:axis=channel:group=64:residual=96",
     "format 'int2:axis=channel:group=64:residual=96': 'residual' must be a multiple of 'group' with "
     "axis=channel (got 96 and 64)"},
    {"int4:group=0", "format 'int4:group=0': 'group' must be 1..65536 (got '0')"},
    {"int4:group=65537", "format 'int4:group=65537': 'group' must be 1..65536 (got '65537')"},
    {"int4:group=x", "format 'int4:group=x': 'group' must be 1..65536 (got 'x')"},
    {"int4:group=", "format 'int4:group=': 'group' must be 1..65536 (got '')"},
    {"int4:group", "format 'int4:group': setting 'group' needs '=value'"},
    {"int4:axis=diag", "format 'int4:axis=diag': 'axis' must be token or channel (got 'diag')"},
    {"int4:scale=q8_0", "format 'int4:scale=q8_0': 'scale' must be f16, bf16 or f32 (got 'q8_0')"},
    {"int4:scale=fp8", "format 'int4:scale=fp8': 'scale' must be f16, bf16 or f32 (got 'fp8')"},
    {"int4:zp=maybe", "format 'int4:zp=maybe': 'zp' must be yes or no (got 'maybe')"},
    {"int4:residual=-1", "format 'int4:residual=-1': 'residual' must be 0..16777216 (got '-1')"},
    {"int4:residual=16777217", "format 'int4:residual=16777217': 'residual' must be 0..16777216 (got '16777217')"},
    {"int4:outliers=0.6", "format 'int4:outliers=0.6': 'outliers' must be a fraction 0..0.5 (got '0.6')"},
    {"int4:outliers=-0.1", "format 'int4:outliers=-0.1': 'outliers' must be a fraction 0..0.5 (got '-0.1')"},
    {"int4:outliers=abc", "format 'int4:outliers=abc': 'outliers' must be a fraction 0..0.5 (got 'abc')"},
    {"int4:outliers=", "format 'int4:outliers=': 'outliers' must be a fraction 0..0.5 (got '')"},
    {"int4:outliers=nan", "format 'int4:outliers=nan': 'outliers' must be a fraction 0..0.5 (got 'nan')"},
};

START_TEST(parse_errors)
{
    for (size_t i = 0; i < N_ELEMS(bad_formats); i++) {
        struct kvp_format f = kvp_format_plain(KVP_DTYPE_F16), before = f;
        struct kvp_error err = {0};
        enum kvp_status st = kvp_format_parse(bad_formats[i].in, &f, &err);
        ck_assert_msg(st == KVP_ERR_USAGE, "'%s': status %d", bad_formats[i].in, st);
        ck_assert_int_eq(err.code, KVP_ERR_USAGE);
        ck_assert_str_eq(err.msg, bad_formats[i].msg);
        assert_same_format(&f, &before, bad_formats[i].in); /* untouched */
    }
}
END_TEST

START_TEST(parse_too_long)
{
    char s[200];
    struct kvp_format f;
    struct kvp_error err = {0};
    memset(s, 'a', sizeof s - 1);
    s[sizeof s - 1] = '\0';
    memcpy(s, "int4:group=", 11);
    ck_assert_int_eq(kvp_format_parse(s, &f, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "format 'int4:group=aaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' is too long");
}
END_TEST

/* ---- canonical names round trip ----------------------------------------- */

static const struct {
    const char *in, *name;
} names[] = {
    {"f32", "f32"},
    {"fp32", "f32"},
    {"float", "f32"},
    {"f16", "f16"},
    {"fp16", "f16"},
    {"half", "f16"},
    {"float16", "f16"},
    {"bf16", "bf16"},
    {"bfloat16", "bf16"},
    {"fp8", "fp8_e4m3"},
    {"e4m3", "fp8_e4m3"},
    {"fp8_e5m2", "fp8_e5m2"},
    {"e5m2", "fp8_e5m2"},
    {"Q8_0", "q8_0"},
    {"q4_0", "q4_0"},
    {"q4_1", "q4_1"},
    {"q5_0", "q5_0"},
    {"q5_1", "q5_1"},
    {"iq4_nl", "iq4_nl"},
    {"mxfp4", "mxfp4"},
    {"nvfp4", "nvfp4"},
    {"int8", "int8"},
    {"int4", "int4"},
    {"int2", "int2"},
    {"int4:group=32", "int4"},
    {"int4:axis=token", "int4"},
    {"int4:zp=yes", "int4"},
    {"int4:scale=f16", "int4"},
    {"int4:residual=0", "int4"},
    {"int4:outliers=0", "int4"},
    {"int4:zp=no", "int4:zp=no"},
    {"int4:scale=bf16", "int4:scale=bf16"},
    {"int2:scale=fp32", "int2:scale=f32"},
    {"int4:group=64:scale=f32", "int4:group=64:scale=f32"},
    {"int4:scale=f32:group=64", "int4:group=64:scale=f32"},
    {"int2:group=32:axis=channel:residual=128", "int2:axis=channel:residual=128"},
    {"int2:residual=128:axis=channel", "int2:axis=channel:residual=128"},
    {"int8:outliers=0.01", "int8:outliers=0.01"},
    {"int4:residual=64", "int4:residual=64"},
    {"int4:outliers=0.000001", "int4:outliers=1e-06"},
    {"int2:group=128:axis=channel:scale=bf16:zp=no:residual=256:outliers=0.005",
     "int2:group=128:axis=channel:scale=bf16:zp=no:residual=256:outliers=0.005"},
};

START_TEST(name_round_trip)
{
    for (size_t i = 0; i < N_ELEMS(names); i++) {
        struct kvp_format f = parse_ok(names[i].in), g;
        char buf[128], again[128];
        ck_assert_ptr_eq(kvp_format_name(&f, buf, sizeof buf), buf);
        ck_assert_msg(strcmp(buf, names[i].name) == 0, "'%s': name '%s', want '%s'", names[i].in, buf,
                      names[i].name);
        g = parse_ok(buf);
        assert_same_format(&f, &g, names[i].in);
        kvp_format_name(&g, again, sizeof again);
        ck_assert_str_eq(again, buf);
    }
}
END_TEST

/* Every plain dtype's format names itself by its table name. */
START_TEST(name_of_plain)
{
    for (int d = 0; d < KVP_DTYPE_COUNT; d++) {
        struct kvp_format f = kvp_format_plain((enum kvp_dtype)d), g;
        char buf[64];
        kvp_format_name(&f, buf, sizeof buf);
        ck_assert_str_eq(buf, kvp_dtype_info((enum kvp_dtype)d)->name);
        g = parse_ok(buf);
        assert_same_format(&f, &g, buf);
    }
}
END_TEST

START_TEST(name_small_buffer)
{
    struct kvp_format f = parse_ok("int2:group=128:axis=channel:residual=256");
    char buf[8];
    kvp_format_name(&f, buf, sizeof buf);
    ck_assert_uint_lt(strlen(buf), sizeof buf); /* truncated, terminated */
    ck_assert_str_eq(buf, "int2:gr");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("format");
    TCase *core = tcase_create("core");
    TCase *limits = tcase_create("limits");

    tcase_add_test(core, dtype_table);
    tcase_add_test(core, dtype_aliases);
    tcase_add_test(core, plain_defaults);
    tcase_add_test(core, row_bytes_128);
    tcase_add_test(core, residual_bytes);
    tcase_add_test(core, bits_per_value);
    tcase_add_test(core, parse_settings);
    tcase_add_test(core, name_round_trip);
    tcase_add_test(core, name_of_plain);
    suite_add_tcase(s, core);

    tcase_add_test(limits, row_bytes_odd);
    tcase_add_test(limits, row_bytes_block_refusal);
    tcase_add_test(limits, row_bytes_overflow);
    tcase_add_test(limits, parse_errors);
    tcase_add_test(limits, parse_too_long);
    tcase_add_test(limits, name_small_buffer);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
