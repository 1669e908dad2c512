/* testutil.h -- shared helpers for the Check suites. */
#ifndef KVPLAN_TESTUTIL_H
#define KVPLAN_TESTUTIL_H

#include <check.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/catalog.h"
#include "kvplan/error.h"
#include "kvplan/format.h"
#include "kvplan/gpu.h"
#include "kvplan/io.h"
#include "kvplan/model.h"
#include "kvplan/settings.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Run one suite and return the number of failures (the test binary's exit code). */
static inline int run_suite(Suite *s)
{
    SRunner *r = srunner_create(s);
    int failed;
    srunner_run_all(r, CK_NORMAL);
    failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}

/* Fail the test with the error's text when st is not KVP_OK. */
#define ck_assert_kvp_ok(st, err)                                                           \
    do {                                                                                    \
        char ck_buf_[KVP_ERROR_TEXT_MAX];                                                   \
        enum kvp_status ck_st_ = (st);                                                      \
        ck_assert_msg(ck_st_ == KVP_OK, "status %d: %s", ck_st_,                            \
                      kvp_error_text(&(err), ck_buf_, sizeof ck_buf_));                     \
    } while (0)

/* ---- building models in code ---- */

/* Load models/<name>.yaml (must load); the caller frees it. */
/* kvp_settings_from_command as a front end calls it: the --config file the
 * command names read first (kvp_read_input), its text given. */
static inline enum kvp_status test_from_command(const char *const *argv, int argc, struct kvp_settings *s,
                                                char *model, size_t nmodel, struct kvp_buf *ignored,
                                                struct kvp_error *err)
{
    const char *path = kvp_command_config_path(argv, argc);
    char *text = NULL;
    uint64_t len = 0;
    enum kvp_status st;
    if (path && (st = kvp_read_input(path, KVP_COMMAND_CONFIG_MAX, &text, &len, err)) != KVP_OK)
        return st;
    st = kvp_settings_from_command(argv, argc, text, len, s, model, nmodel, ignored, err);
    free(text);
    return st;
}

static inline struct kvp_model *test_load(const char *name)
{
    char path[256];
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    snprintf(path, sizeof path, "models/%s.yaml", name);
    ck_assert_kvp_ok(kvp_model_load(path, &m, &err), err);
    ck_assert_ptr_nonnull(m);
    return m;
}

/* The shipped model and GPU catalogs (must load); test_catalogs_free frees both. */
static inline void test_catalogs_load(struct kvp_catalog **cat, struct kvp_gpu_catalog **gpus)
{
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_catalog_load("models", cat, &err), err);
    ck_assert_kvp_ok(kvp_gpu_catalog_load("models/gpus.yaml", gpus, &err), err);
}

static inline void test_catalogs_free(struct kvp_catalog **cat, struct kvp_gpu_catalog **gpus)
{
    kvp_catalog_free(*cat);
    kvp_gpu_catalog_free(*gpus);
    *cat = NULL;
    *gpus = NULL;
}

/* A format from its string (must parse). */
static inline struct kvp_format test_fmt(const char *s)
{
    struct kvp_format f;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_format_parse(s, &f, &err), err);
    return f;
}

/* Weights as s says (wquant.h: "stored", a format, a llama.cpp file type). */
static inline struct kvp_wstore test_wstore(const char *s)
{
    struct kvp_wstore w;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_wstore_parse(s, false, &w, &err), err);
    return w;
}

/* A model with the weight fields every validation needs and no layers yet. */
static inline void test_blank(struct kvp_model *m, const char *name)
{
    kvp_model_init(m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->hidden = 4096;
    m->intermediate = 11008;
    m->vocab = 32000;
    m->max_context = 1u << 20;
}

/* An attention spec with a dense MLP: kind, query heads, KV heads, head dim (K = V), window. */
static inline struct kvp_layer_spec test_attn(enum kvp_layer_kind kind, uint32_t heads, uint32_t kv, uint32_t dim,
                                              uint32_t window)
{
    struct kvp_layer_spec s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.mlp = KVP_MLP_DENSE;
    s.n_heads = heads;
    s.n_kv_heads = kv;
    s.head_dim_k = s.head_dim_v = dim;
    s.window = window;
    return s;
}

static inline void test_add(struct kvp_model *m, const struct kvp_layer_spec *s, uint32_t n)
{
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_model_add_layers(m, s, n, &err), err);
}

static inline void test_validate(const struct kvp_model *m)
{
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_model_validate(m, &err), err);
}

/* A whole file as a malloc'd, NUL-terminated string; NULL if it cannot be read. */
static inline char *test_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) == (size_t)n) {
            buf[n] = '\0';
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

static inline bool test_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static inline bool test_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A loader under test: load path, check that a failure left nothing built,
 * free what it built, and return its status (err filled on failure). */
typedef enum kvp_status (*test_loader)(const char *path, struct kvp_error *err);

#define TEST_BAD_DIR "tests/data/bad"

/* Every TEST_BAD_DIR/<prefix>*<suffix> must fail with exactly the one line of
 * its .err sibling, as "file:line:col: message". One run reports every
 * mismatch, not just the first. */
static inline void test_bad_files(const char *prefix, const char *suffix, test_loader load)
{
    DIR *d = opendir(TEST_BAD_DIR);
    struct dirent *e;
    int n = 0, wrong = 0;
    char report[8192] = "";

    ck_assert_msg(d != NULL, "cannot open " TEST_BAD_DIR);
    while ((e = readdir(d)) != NULL) {
        char path[512], errpath[520], got[KVP_ERROR_TEXT_MAX];
        struct kvp_error err = {0};
        enum kvp_status st;
        char *want;
        size_t len;

        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || !test_ends_with(e->d_name, suffix))
            continue;
        snprintf(path, sizeof path, TEST_BAD_DIR "/%s", e->d_name);
        snprintf(errpath, sizeof errpath, "%s.err", path);
        want = test_slurp(errpath);
        ck_assert_msg(want != NULL, "%s has no .err file", path);
        len = strlen(want);
        while (len && (want[len - 1] == '\n' || want[len - 1] == '\r'))
            want[--len] = '\0';
        st = load(path, &err);
        ck_assert_msg(st != KVP_OK, "%s loaded", path);
        ck_assert_int_eq(err.code, st);
        kvp_error_text(&err, got, sizeof got);
        if (strcmp(got, want) != 0) {
            size_t o = strlen(report);
            snprintf(report + o, sizeof report - o, "\n  got:  %s\n  want: %s", got, want);
            wrong++;
        }
        free(want);
        n++;
    }
    closedir(d);
    ck_assert_int_ge(n, 1);
    ck_assert_msg(wrong == 0, "%d of %d bad files give another error:%s", wrong, n, report);
}

#endif
