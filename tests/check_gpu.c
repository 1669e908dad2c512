/* check_gpu.c -- the GPU catalog: the shipped models/gpus.yaml, name
 * resolution, and each tests/data/bad/gpus-*.yaml failing with exactly the
 * text in its sibling .err file. Tests run from the repository root. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvplan/catalog.h"
#include "kvplan/gpu.h"
#include "testutil.h"

#define BAD_DIR TEST_BAD_DIR
#define SHIPPED "models/gpus.yaml"

/* ---- helpers ------------------------------------------------------------ */

static struct kvp_gpu_catalog *load_shipped(void)
{
    struct kvp_gpu_catalog *c = NULL;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_gpu_catalog_load(SHIPPED, &c, &err), err);
    ck_assert_ptr_nonnull(c);
    return c;
}

/* ---- the shipped catalog ------------------------------------------------ */

START_TEST(shipped_catalog)
{
    static const char *const required[] = {"h100-sxm", "h100-pcie", "h200",     "b200",     "a100-40gb",
                                           "a100-80gb", "l40s",     "l4",       "a10g",     "rtx-4090",
                                           "rtx-3090",  "mi300x",   "mi325x"};
    struct kvp_gpu_catalog *c = load_shipped();

    ck_assert_uint_ge(c->n, N_ELEMS(required));
    for (size_t i = 0; i < N_ELEMS(required); i++) {
        const struct kvp_gpu *g = NULL;
        struct kvp_error err = {0};
        ck_assert_kvp_ok(kvp_gpu_find(c, required[i], &g, &err), err);
        ck_assert_str_eq(g->id, required[i]);
        ck_assert_uint_gt(g->memory_bytes, 0);
        ck_assert_uint_gt(g->bandwidth_bytes_per_s, 0);
        ck_assert(g->bf16_flops > 0);
        ck_assert(g->fp8_flops >= 0);
        ck_assert(g->name[0] && g->source[0] && g->memory_source[0]);
    }
    kvp_gpu_catalog_free(c);
}
END_TEST

/* Figures pinned to their sources (see memory_source in the file). */
START_TEST(shipped_figures)
{
    static const struct {
        const char *id;
        uint64_t memory, bandwidth;
        double bf16, fp8;
        uint64_t link; /* host_link: PCIe 5.0 x16 one way 32 GT/s x 16 / 8 x 128 / 130 B/s, 4.0 half */
        bool unified;
    } want[] = {
        {"h100-sxm", 85028896768ull, 3350000000000ull, 989.4e12, 1978.9e12, 63015384615ull, false},
        {"a100-40gb", 42298834944ull, 1555000000000ull, 312e12, 0, 31507692307ull, false},
        {"a100-80gb", 84987740160ull, 2039000000000ull, 312e12, 0, 31507692307ull, false},
        {"rtx-3090", 25447170048ull, 936000000000ull, 71e12, 0, 31507692307ull, false},
        /* Apple: Metal's recommendedMaxWorkingSetSize as llama.cpp logs it (2/3 of the RAM in 16 KiB
         * pages up to 32 GB, 3/4 from 64 GB); one memory for CPU and GPU */
        {"mac-16gb", 699051ull * 16384, 68000000000ull, 2.6e12, 0, 0, true},
        {"mac-32gb", 1398102ull * 16384, 400000000000ull, 13.6e12, 0, 0, true},
        {"mac-64gb", 48ull << 30, 400000000000ull, 10.4e12, 0, 0, true},
        {"mac-96gb", 72ull << 30, 400000000000ull, 13.6e12, 0, 0, true},
        {"b200", 191502483456ull, 8000000000000ull, 2250e12, 4500e12, 0, false}, /* no PCIe generation given */
    };
    struct kvp_gpu_catalog *c = load_shipped();
    for (size_t i = 0; i < N_ELEMS(want); i++) {
        const struct kvp_gpu *g = NULL;
        struct kvp_error err = {0};
        ck_assert_kvp_ok(kvp_gpu_find(c, want[i].id, &g, &err), err);
        ck_assert_uint_eq(g->memory_bytes, want[i].memory);
        ck_assert_uint_eq(g->bandwidth_bytes_per_s, want[i].bandwidth);
        ck_assert_double_eq_tol(g->bf16_flops, want[i].bf16, 1e3);
        ck_assert_double_eq_tol(g->fp8_flops, want[i].fp8, 1e3);
        ck_assert_uint_eq(g->host_link_bytes_per_s, want[i].link);
        ck_assert_int_eq(g->unified_memory, want[i].unified);
    }
    /* "an 80 GB H100 reports 79.19 GiB", not 80 */
    {
        const struct kvp_gpu *g = NULL;
        struct kvp_error err = {0};
        ck_assert_kvp_ok(kvp_gpu_find(c, "h100", &g, &err), err);
        ck_assert_uint_eq((g->memory_bytes * 100 + (1ull << 29)) >> 30, 7919);
    }
    kvp_gpu_catalog_free(c);
}
END_TEST

/* The model catalog skips gpus.yaml, which lives in the same directory. */
START_TEST(model_catalog_skips_gpus)
{
    struct kvp_catalog *cat = NULL;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_catalog_load("models", &cat, &err), err);
    ck_assert_uint_gt(cat->n, 0);
    kvp_catalog_free(cat);
}
END_TEST

START_TEST(find_names)
{
    static const struct {
        const char *name, *id;
    } cases[] = {
        {"h100-sxm", "h100-sxm"},   /* id */
        {"h100", "h100-sxm"},       /* alias */
        {"H100", "h100-sxm"},       /* case */
        {"A100", "a100-80gb"},      /* alias, case */
        {"a100-40GB", "a100-40gb"}, /* id, case */
        {"h100-p", "h100-pcie"},    /* unique prefix */
        {"mi300", "mi300x"},        /* unique prefix */
        {"l4", "l4"},               /* exact beats the prefix of l40s */
        {"l40", "l40s"},            /* unique prefix */
        {"4090", "rtx-4090"},       /* alias */
        {"rtx-30", "rtx-3090"},     /* unique prefix */
        {"a100-sxm4-4", "a100-40gb"}, /* prefix of an alias */
        {"rtx3090", "rtx-3090"},    /* '-' does not count */
        {"RTX 3090", "rtx-3090"},   /* nor ' ' or case */
        {"H100_SXM", "h100-sxm"},   /* nor '_' */
        {"h100p", "h100-pcie"},     /* a unique prefix, spelt without '-' */
    };
    struct kvp_gpu_catalog *c = load_shipped();
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        const struct kvp_gpu *g = NULL;
        struct kvp_error err = {0};
        ck_assert_kvp_ok(kvp_gpu_find(c, cases[i].name, &g, &err), err);
        ck_assert_msg(strcmp(g->id, cases[i].id) == 0, "'%s' found %s, want %s", cases[i].name, g->id, cases[i].id);
    }
    kvp_gpu_catalog_free(c);
}
END_TEST

/* ---- limits ------------------------------------------------------------- */

START_TEST(find_errors)
{
    static const struct {
        const char *name, *msg;
    } cases[] = {
        {"rtx", "ambiguous GPU 'rtx' (rtx-4090, rtx-3090)"},
        {"h1", "ambiguous GPU 'h1' (h100-sxm, h100-pcie)"},
        {"mi3", "ambiguous GPU 'mi3' (mi300x, mi325x)"},
        {"h300", "unknown GPU 'h300' (h100-sxm, h100-pcie, h200, b200, a100-40gb, a100-80gb, l40s, l4, a10g, "
                 "rtx-4090, rtx-3090, mi300x, mi325x, m1-16gb, m2-max-32gb, m1-max-64gb, m2-max-96gb)"},
        {"", "unknown GPU '' (h100-sxm, h100-pcie, h200, b200, a100-40gb, a100-80gb, l40s, l4, a10g, "
             "rtx-4090, rtx-3090, mi300x, mi325x, m1-16gb, m2-max-32gb, m1-max-64gb, m2-max-96gb)"},
    };
    struct kvp_gpu_catalog *c = load_shipped();
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        const struct kvp_gpu *g = NULL;
        struct kvp_error err = {0};
        ck_assert_int_eq(kvp_gpu_find(c, cases[i].name, &g, &err), KVP_ERR_NOTFOUND);
        ck_assert_ptr_null(g);
        ck_assert_int_eq(err.code, KVP_ERR_NOTFOUND);
        ck_assert_str_eq(err.msg, cases[i].msg);
    }
    kvp_gpu_catalog_free(c);
}
END_TEST

START_TEST(find_in_empty)
{
    const struct kvp_gpu *g = NULL;
    struct kvp_error err = {0};
    ck_assert_int_eq(kvp_gpu_find(NULL, "h100", &g, &err), KVP_ERR_NOTFOUND);
    ck_assert_str_eq(err.msg, "unknown GPU 'h100' (the catalog is empty)");
    kvp_gpu_catalog_free(NULL); /* a no-op */
}
END_TEST

/* kvp_gpu_catalog_load_for: an exact id or alias reads the catalog up to its GPU
 * (and gets the GPU the whole catalog has); a prefix, a typo or an ambiguous
 * name gets the whole catalog, so kvp_gpu_find answers as it does there. */
START_TEST(load_for_one)
{
    struct kvp_gpu_catalog *all = load_shipped();
    struct kvp_error err = {0};

    for (uint32_t i = 0; i < all->n; i++) {
        const struct kvp_gpu *want = &all->gpus[i];
        for (uint32_t a = 0; a <= want->n_aliases; a++) {
            const char *name = a == 0 ? want->id : want->aliases[a - 1];
            struct kvp_gpu_catalog *part = NULL;
            const struct kvp_gpu *g;
            ck_assert_kvp_ok(kvp_gpu_catalog_load_for(SHIPPED, name, &part, &err), err);
            ck_assert_uint_eq(part->n, i + 1); /* read up to its GPU, no further */
            ck_assert_kvp_ok(kvp_gpu_find(part, name, &g, &err), err);
            ck_assert_str_eq(g->id, want->id);
            ck_assert_uint_eq(g->memory_bytes, want->memory_bytes);
            ck_assert_str_eq(g->memory_source, want->memory_source);
            kvp_gpu_catalog_free(part);
        }
    }
    static const char *const whole[] = {"mi3", "rtx", "H100-S", "h300", "", "100"};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
        struct kvp_gpu_catalog *c = NULL;
        const struct kvp_gpu *g = NULL, *h = NULL;
        struct kvp_error e1 = {0}, e2 = {0};
        ck_assert_kvp_ok(kvp_gpu_catalog_load_for(SHIPPED, whole[i], &c, &err), err);
        ck_assert_uint_eq(c->n, all->n);
        enum kvp_status s1 = kvp_gpu_find(c, whole[i], &g, &e1), s2 = kvp_gpu_find(all, whole[i], &h, &e2);
        ck_assert_int_eq(s1, s2);
        if (s1 == KVP_OK)
            ck_assert_str_eq(g->id, h->id);
        else
            ck_assert_str_eq(e1.msg, e2.msg);
        kvp_gpu_catalog_free(c);
    }
    kvp_gpu_catalog_free(all);
}
END_TEST

/* A guessed cut that would split a scalar: x1's source is a double-quoted
 * scalar whose second line looks like the next GPU, so reading up to that
 * line fails and kvp_gpu_catalog_load_for reads the whole file, as kvp_gpu_catalog_load. */
START_TEST(load_for_split_scalar)
{
    static const char text[] = "kvplan_gpus: 1\n"
                               "gpus:\n"
                               "  - id: x1\n"
                               "    name: X1\n"
                               "    memory_bytes: 1000\n"
                               "    memory_source: m\n"
                               "    bandwidth_gbs: 1\n"
                               "    bf16_tflops: 1\n"
                               "    fp8_tflops: 0\n"
                               "    source: \"first line\n"
                               "  - id: x2 is still x1's source\"\n"
                               "  - id: x3\n"
                               "    name: X3\n"
                               "    memory_bytes: 3000\n"
                               "    memory_source: m\n"
                               "    bandwidth_gbs: 1\n"
                               "    bf16_tflops: 1\n"
                               "    fp8_tflops: 0\n"
                               "    source: s\n";
    char path[] = "/tmp/check-gpu-XXXXXX";
    int fd = mkstemp(path);
    struct kvp_gpu_catalog *part = NULL, *all = NULL;
    struct kvp_error err = {0};
    const struct kvp_gpu *g;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    ck_assert_kvp_ok(kvp_gpu_catalog_load(path, &all, &err), err);
    ck_assert_uint_eq(all->n, 2);
    ck_assert_kvp_ok(kvp_gpu_catalog_load_for(path, "x1", &part, &err), err);
    ck_assert_uint_eq(part->n, 2);
    ck_assert_kvp_ok(kvp_gpu_find(part, "x1", &g, &err), err);
    ck_assert_str_eq(g->source, all->gpus[0].source);
    ck_assert_str_eq(g->source, "first line - id: x2 is still x1's source");
    kvp_gpu_catalog_free(part);
    kvp_gpu_catalog_free(all);
    unlink(path);
}
END_TEST

START_TEST(load_missing_file)
{
    struct kvp_gpu_catalog *c = NULL;
    struct kvp_error err = {0};
    char text[KVP_ERROR_TEXT_MAX];
    ck_assert_int_eq(kvp_gpu_catalog_load(BAD_DIR "/no-such-gpus.yaml", &c, &err), KVP_ERR_IO);
    ck_assert_ptr_null(c);
    ck_assert_str_eq(kvp_error_text(&err, text, sizeof text), BAD_DIR "/no-such-gpus.yaml: cannot open the file");
}
END_TEST

static enum kvp_status load_gpus(const char *path, struct kvp_error *err)
{
    struct kvp_gpu_catalog *c = NULL, *d = NULL;
    struct kvp_error e2 = {0};
    enum kvp_status st = kvp_gpu_catalog_load(path, &c, err);
    if (st != KVP_OK)
        ck_assert_ptr_null(c);
    kvp_gpu_catalog_free(c);
    /* for a name that is no GPU's, kvp_gpu_catalog_load_for fails the same way */
    ck_assert_int_eq(kvp_gpu_catalog_load_for(path, "no-such-gpu", &d, &e2), st);
    ck_assert_str_eq(e2.msg, err->msg);
    kvp_gpu_catalog_free(d);
    return st;
}

START_TEST(bad_files)
{
    test_bad_files("gpus-", ".yaml", load_gpus);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu");
    TCase *core = tcase_create("core");
    TCase *limits = tcase_create("limits");

    tcase_add_test(core, shipped_catalog);
    tcase_add_test(core, shipped_figures);
    tcase_add_test(core, model_catalog_skips_gpus);
    tcase_add_test(core, find_names);
    suite_add_tcase(s, core);

    tcase_add_test(limits, find_errors);
    tcase_add_test(limits, find_in_empty);
    tcase_add_test(core, load_for_one);
    tcase_add_test(core, load_for_split_scalar);
    tcase_add_test(limits, load_missing_file);
    tcase_add_test(limits, bad_files);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
