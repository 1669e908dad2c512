/* check_robust.c -- no input crashes, hangs, exhausts memory or silently misleads.
 *
 * core:   every input under tests/data/fuzz-regressions/<parser>/ (what the
 *         fuzzers of tests/fuzz/ once broke) goes through its parser and, when
 *         it parses, the engine, as the harness did; every tests/data/bad/
 *         model and config fails with a non-empty message. Run under ASan
 *         (make SANITIZE=address,undefined) and valgrind (make valgrind).
 * limits: one row per limit the parsers enforce -- file size, nesting depth,
 *         string and array lengths, numeric ranges, duplicate keys, wrong
 *         types -- each with the exact "file:line:col: message" it must give.
 *         docs/robustness.md tabulates them. Rows marked GAP were limits the
 *         library did not enforce when this suite was written; a failure
 *         names them "GAP" so a regression is recognisable.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz/fuzz_common.h"
#include "base/io.h"
#include "model/gguf_types.h"
#include "kvplan/model.h"
#include "kvplan/num.h"
#include "kvplan/plan.h"
#include "kvplan/render.h"
#include "kvplan/sim.h"
#include "testutil.h"

#define REGRESS_DIR "tests/data/fuzz-regressions"
#define BAD_DIR "tests/data/bad"

/* ---- helpers ------------------------------------------------------------ */

/* A whole file, malloc'd, NUL-terminated; *n its length. NULL if unreadable. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, got;

    *n = 0;
    if (!f)
        return NULL;
    do {
        if (*n + 65536 + 1 > cap) {
            char *nb;
            cap = cap ? cap * 2 : 131072;
            if (!(nb = realloc(buf, cap))) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        got = fread(buf + *n, 1, 65536, f);
        *n += got;
    } while (got > 0);
    fclose(f);
    buf[*n] = '\0';
    return buf;
}

/* The parsers a regression input can be meant for: the subdirectory name. */
enum target { T_YAML, T_HF, T_GGUF, T_NUM, T_COUNT };
static const char *const target_dirs[T_COUNT] = {"yaml", "hf", "gguf", "num"};

/* What the harness of t does with one input; the parse status. Aborts (a
 * signal Check reports) where the harness would have. */
static enum kvp_status feed(enum target t, const char *data, size_t n, struct kvp_error *err)
{
    struct kvp_model *m = malloc(sizeof *m);
    enum kvp_status st = KVP_OK;

    ck_assert_ptr_nonnull(m);
    kvp_model_init(m);
    switch (t) {
    case T_YAML: st = kvp_model_parse_yaml(data, n, "regress.yaml", m, err); break;
    case T_HF: st = kvp_model_parse_hf(data, n, "regress/config.json", m, err); break;
    case T_GGUF: st = kvp_model_parse_gguf((const uint8_t *)data, n, "regress.gguf", m, err); break;
    default: {
        uint64_t v;
        struct kvp_format f;
        st = kvp_parse_count(data, &v, err);
        fuzz_check_error(st, err);
        st = kvp_parse_bytes(data, &v, err);
        fuzz_check_error(st, err);
        st = kvp_format_parse(data, &f, err);
        break;
    }
    }
    fuzz_check_error(st, err);
    if (st == KVP_OK && t != T_NUM)
        fuzz_engine(m, (const uint8_t *)data, n);
    free(m);
    return st;
}

/* ---- core: the fuzzers' finds, the bad-input corpus ---------------------- */

START_TEST(fuzz_regressions)
{
    uint32_t n = 0;

    for (int t = 0; t < T_COUNT; t++) {
        char dir[256];
        DIR *d;
        struct dirent *e;

        snprintf(dir, sizeof dir, "%s/%s", REGRESS_DIR, target_dirs[t]);
        if (!(d = opendir(dir)))
            continue;
        while ((e = readdir(d))) {
            char path[512];
            size_t len;
            char *text;
            struct kvp_error err = {0};
            enum kvp_status st;

            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            text = slurp(path, &len);
            ck_assert_msg(text != NULL, "cannot read %s", path);
            st = feed((enum target)t, text, len, &err);
            ck_assert_msg(st == KVP_OK || err.msg[0], "%s: status %d with no message", path, st);
            free(text);
            n++;
        }
        closedir(d);
    }
    ck_assert_msg(n > 0, "no inputs under %s", REGRESS_DIR);
}
END_TEST

/* Every bad model and config fails through kvp_model_load with a message
 * (check_model and check_hf pin the exact texts). */
START_TEST(bad_corpus_fails_cleanly)
{
    DIR *d = opendir(BAD_DIR);
    struct dirent *e;
    uint32_t n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d))) {
        char path[512];
        struct kvp_model *m = NULL;
        struct kvp_error err = {0};
        size_t len = strlen(e->d_name);
        enum kvp_status st;

        if (strncmp(e->d_name, "model-", 6) != 0 && strncmp(e->d_name, "hf-", 3) != 0)
            continue;
        if (len > 4 && strcmp(e->d_name + len - 4, ".err") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", BAD_DIR, e->d_name);
        st = kvp_model_load(path, &m, &err);
        ck_assert_msg(st != KVP_OK, "%s loads", path);
        ck_assert_msg(err.msg[0] != '\0' && err.code == st, "%s: status %d, message '%s'", path, st, err.msg);
        ck_assert_ptr_null(m);
        n++;
    }
    closedir(d);
    ck_assert_uint_ge(n, 60);
}
END_TEST

/* ---- limits: text models and configs ------------------------------------- */

/* The head of a valid kvplan YAML model; rows append specs and layers. */
#define YHEAD "kvplan: 1\nname: x\nmax_context: 4096\nhidden: 64\nintermediate: 128\nvocab: 100\n"
#define YSPEC "specs:\n  a: {heads: 4, head_dim: 16}\n"
#define YOK YHEAD YSPEC "layers:\n  - {spec: a, count: 2}\n"

struct text_row {
    const char *what;
    enum target t;  /* T_YAML or T_HF */
    const char *text;
    const char *want; /* the whole error text; NULL: it must parse */
    bool gap;       /* a limit the library does not enforce yet */
};

/* An HF config with every required key, before the closing brace. */
#define HF_BASE "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64, " \
                "\"vocab_size\": 100, \"max_position_embeddings\": 4096, \"num_attention_heads\": 4, " \
                "\"intermediate_size\": 128, \"torch_dtype\": \"bfloat16\""

static const struct text_row text_rows[] = {
    {"baseline yaml", T_YAML, YOK, NULL, false},
    {"baseline hf", T_HF, HF_BASE "}", NULL, false},
    /* types */
    {"quoted number", T_YAML, "kvplan: 1\nname: x\nmax_context: 4096\nhidden: \"64\"\n",
     "t.yaml:4:9: 'hidden' must be an integer, not a string (got \"64\")", false},
    {"bool for a number", T_YAML, "kvplan: 1\nname: x\nmax_context: true\n",
     "t.yaml:3:14: 'max_context' must be an integer (got true)", false},
    {"number for a bool", T_YAML, YHEAD "qk_norm: 1\n" YSPEC "layers: [{spec: a}]\n",
     "t.yaml:7:10: 'qk_norm' must be true or false (got 1)", false},
    {"float for a count", T_YAML, "kvplan: 1\nname: x\nmax_context: 4096.0\n",
     "t.yaml:3:14: 'max_context' must be an integer (got 4096.0)", false},
    {"mapping for a number", T_YAML, "kvplan: 1\nname: x\nmax_context: {a: 1}\n",
     "t.yaml:3:14: 'max_context' must be an integer, not a mapping", false},
    {"hf quoted number", T_HF, HF_BASE ", \"head_dim\": \"16\"}",
     "t/config.json:1:211: 'head_dim' must be an integer, not a string (got \"16\")", false},
    {"hf bool as string", T_HF, HF_BASE ", \"tie_word_embeddings\": \"true\"}",
     "t/config.json:1:222: 'tie_word_embeddings' must be true or false (got true)", false},
    /* numeric ranges */
    {"negative", T_YAML, "kvplan: 1\nname: x\nmax_context: -1\n",
     "t.yaml:3:14: 'max_context' must not be negative (got -1)", false},
    {"u32 range", T_YAML, "kvplan: 1\nname: x\nmax_context: 8\nhidden: 4294967296\n",
     "t.yaml:4:9: 'hidden' must be at most 4294967295 (got 4294967296)", false},
    {"u64 range", T_YAML, "kvplan: 1\nname: x\nmax_context: 18446744073709551616\n",
     "t.yaml:3:14: 'max_context' does not fit in 64 bits (got 18446744073709551616)", false},
    {"zero hidden", T_YAML, "kvplan: 1\nname: x\nmax_context: 8\nhidden: 0\nvocab: 1\n" YSPEC "layers: [{spec: a}]\n",
     "t.yaml:4:9: 'hidden' must be positive", false},
    {"kv heads divide", T_YAML, YHEAD "specs:\n  a: {heads: 4, kv_heads: 3, head_dim: 16}\nlayers: [{spec: a}]\n",
     "t.yaml:9:9: layer 0 (full): 'kv_heads' must divide 'heads' (got 3 and 4)", false},
    {"zero head dim", T_YAML, YHEAD "specs:\n  a: {heads: 4, head_dim: 0}\nlayers: [{spec: a}]\n",
     "t.yaml:9:9: layer 0 (full): head dims must be positive (got 0 and 0)", false},
    {"hf kv heads divide", T_HF, HF_BASE ", \"num_key_value_heads\": 3}",
     "t/config.json:1:199: 'num_key_value_heads' must divide 'num_attention_heads' (got 3 and 4)", false},
    {"hf zero heads", T_HF,
     "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
     "\"vocab_size\": 100, \"max_position_embeddings\": 4096, \"num_attention_heads\": 0}",
     "t/config.json:1:120: 'num_attention_heads' must be positive (got 0)", false},
    /* was a GAP, fixed: upper bounds on dimensions, so that no product of three can wrap */
    {"head dim bound", T_YAML, YHEAD "specs:\n  a: {heads: 4, head_dim: 1048577}\nlayers: [{spec: a}]\n",
     "t.yaml:9:9: layer 0 (full): 'head_dim_k' must be at most 1048576 (got 1048577)", true},
    {"heads bound", T_YAML, YHEAD "specs:\n  a: {heads: 4294967295, kv_heads: 1, head_dim: 16}\nlayers: [{spec: a}]\n",
     "t.yaml:9:9: layer 0 (full): 'heads' must be at most 1048576 (got 4294967295)", true},
    {"hidden bound", T_YAML,
     "kvplan: 1\nname: x\nmax_context: 8\nhidden: 4294967295\nintermediate: 8\nvocab: 8\n" YSPEC
     "layers: [{spec: a}]\n",
     "t.yaml:9:9: 'hidden' must be at most 1048576 (got 4294967295)", true},
    {"experts bound", T_YAML,
     YHEAD "moe: {experts: 4000000000, active: 1, intermediate: 8}\n"
           "specs:\n  a: {heads: 4, head_dim: 16, mlp: moe}\nlayers: [{spec: a}]\n",
     "t.yaml:10:9: 'experts' must be at most 65536 (got 4000000000)", true},
    {"hf experts bound", T_HF, HF_BASE ", \"num_local_experts\": 4000000000, \"num_experts_per_tok\": 2}",
     "t/config.json:1:199: 'num_local_experts' must be at most 65536 (got 4000000000)", true},
    {"recurrent bound", T_YAML,
     YHEAD "specs:\n  r: {kind: recurrent, recurrent: {kind: mamba2, d_inner: 4294967295, "
           "d_state: 4294967295, d_conv: 4, n_groups: 4294967295, n_heads: 4294967295, v_head_dim: 4294967295}}\n"
           "layers: [{spec: r}]\n",
     "t.yaml:9:9: layer 0 (recurrent mamba2): 'd_inner' must be at most 1048576 (got 4294967295)", true},
    /* was a GAP, fixed: this model used to load and `kvplan size` showed 24 MiB of recurrent state: the
     * state's 4194304 x 4194304 x 2097152 elements wrap to 0 in kvp_recurrent_state_elems */
    {"recurrent state wrap", T_YAML,
     YHEAD "specs:\n  r: {kind: recurrent, recurrent: {kind: mamba2, d_inner: 8, "
           "d_state: 2097152, d_conv: 4, n_groups: 1, n_heads: 4194304, v_head_dim: 4194304}}\nlayers: [{spec: r}]\n",
     "t.yaml:9:9: layer 0 (recurrent mamba2): 'd_state' must be at most 1048576 (got 2097152)", true},
    /* lengths */
    {"long name", T_YAML,
     "kvplan: 1\nname: "
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
     "t.yaml:2:7: 'name' is longer than 95 characters", false},
    {"too many layers", T_YAML, YHEAD YSPEC "layers: [{spec: a, count: 1025}]\n",
     "t.yaml:9:10: the stack has more than 1024 layers (1025 with this item)", false},
    {"repeat too deep", T_YAML,
     YHEAD YSPEC "layers:\n- repeat: 1\n  layers:\n  - repeat: 1\n    layers:\n"
                 "    - repeat: 1\n      layers:\n      - repeat: 1\n        layers:\n        - repeat: 1\n          "
                 "layers: [{spec: a}]\n",
     "t.yaml:18:11: 'repeat' nested deeper than 4", false},
    {"repeat bound", T_YAML, YHEAD YSPEC "layers: [{repeat: 1025, layers: [{spec: a}]}]\n",
     "t.yaml:9:19: 'repeat' must be 1..1024 (got 1025)", false},
    /* was a GAP, fixed: an empty repeated list costs 1024^4 iterations and adds nothing */
    {"empty repeat", T_YAML, YHEAD YSPEC "layers:\n- {spec: a}\n- repeat: 2\n  layers: []\n",
     "t.yaml:12:11: 'layers' of a 'repeat' must not be empty", true},
    {"layer_types length", T_HF, HF_BASE ", \"layer_types\": [\"full_attention\"]}",
     "t/config.json:1:214: 'layer_types' must have one entry per layer (got 1 for 2 layers)", false},
    {"hf too many layers", T_HF, "{\"model_type\": \"llama\", \"num_hidden_layers\": 1025}",
     "t/config.json:1:25: 'num_hidden_layers' must be at most 1024 (got 1025)", false},
    /* structure */
    {"duplicate key", T_YAML, "kvplan: 1\nname: x\nname: y\n", "t.yaml:3:1: duplicate key 'name'", false},
    {"hf duplicate key", T_HF, "{\"model_type\": \"llama\", \"model_type\": \"opt\"}",
     "t/config.json:1:25: duplicate key 'model_type'", false},
    {"nesting depth", T_HF, "{\"a\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
     "t/config.json:1:39: nesting deeper than 32 levels", false},
    {"non-scalar key", T_YAML, "? [a]\n: 1\n", "t.yaml:1:3: a key must be a scalar, not a sequence", false},
    {"syntax", T_HF, "{\"a\": ", "t/config.json:2:1: did not find expected node content while parsing a flow node",
     false},
    {"empty", T_YAML, "", "t.yaml:1:1: the file is empty", false},
    {"alias bomb", T_YAML,
     "kvplan: 1\na: &a [1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: [*d, *d, *d, *d, *d, *d, *d, *d]\n",
     "t.yaml:2:1: unknown key 'a'", false},
    /* a file that is not a kvplan model shows its place, never its content (issue #37: a plan naming a
     * file of /etc/shadow's format printed its first line as an unknown key) */
    {"not a model", T_YAML, "root:$6$salt$hash:19000:0:99999:7:::\n",
     "t.yaml:1:1: missing required key 'kvplan': not a kvplan model (nothing of it is shown)", false},
    /* issue #20: aliases are counted expanded, and may not contain themselves */
    {"alias bomb over the node limit", T_YAML,
     "a: &a [1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: &e [*d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e]\n",
     "t.yaml:6:25: alias 'e' expands the document to more than 262144 nodes", false},
    {"recursive alias", T_YAML, "a: &a [*a]\n", "t.yaml:1:8: alias 'a' refers to a node that contains it", false},
    {"undefined alias", T_YAML, "a: *b\n", "t.yaml:1:4: undefined alias 'b'", false},
    /* was a GAP, fixed: a reader error (bad byte) has its place in problem_offset, not problem_mark, so
     * kvp_ydoc_load reported 1:1 for a NUL on line 2 */
    {"NUL in text", T_YAML, "kvplan: 1\nname: x\0y\n", "t.yaml:2:8: control characters are not allowed", true},
};

/* Parse text as a model of kind t, validate it and, if it loads, run the
 * engine on it; the result must be `want` (the whole error text), or the
 * model must load when want is NULL. */
static void expect_text(const char *what, enum target t, const char *text, size_t len, const char *want, bool gap)
{
    const char *file = t == T_YAML ? "t.yaml" : "t/config.json";
    struct kvp_model *m = malloc(sizeof *m);
    struct kvp_error err = {0};
    char got[KVP_ERROR_TEXT_MAX];
    enum kvp_status st;

    ck_assert_ptr_nonnull(m);
    kvp_model_init(m);
    st = t == T_YAML ? kvp_model_parse_yaml(text, len, file, m, &err) : kvp_model_parse_hf(text, len, file, m, &err);
    if (st == KVP_OK)
        st = kvp_model_validate(m, &err);
    if (st == KVP_OK) {
        /* a model that loads must also survive the engine */
        fuzz_engine(m, (const uint8_t *)text, len);
        snprintf(got, sizeof got, "(loads)");
    } else {
        kvp_error_text(&err, got, sizeof got);
        ck_assert_msg(err.msg[0] != '\0', "%s: empty message", what);
    }
    free(m);
    if (!want)
        ck_assert_msg(st == KVP_OK, "%s: %s", what, got);
    else
        ck_assert_msg(strcmp(got, want) == 0, "%s%s:\n  want %s\n  got  %s", gap ? "GAP " : "", what, want, got);
}

START_TEST(text_limits)
{
    const struct text_row *r = &text_rows[_i];
    size_t len = strlen(r->text);

    if (strcmp(r->what, "NUL in text") == 0)
        len = sizeof "kvplan: 1\nname: x\0y\n" - 1;
    expect_text(r->what, r->t, r->text, len, r->want, r->gap);
}
END_TEST

/* ---- limits: the worst shapes under the size cap (issue #20) -------------- */

/* Each is refused at the first event over a limit, so it costs what its
 * first few bytes cost; `make robust-time` (tests/shapes.py) times them
 * through the CLI at full size. */

/* head, n copies of unit, tail: malloc'd. */
static char *repeated(const char *head, const char *unit, size_t n, const char *tail)
{
    size_t h = strlen(head), u = strlen(unit), t = strlen(tail);
    char *s = malloc(h + n * u + t + 1), *o = s;

    ck_assert_ptr_nonnull(s);
    memcpy(o, head, h);
    o += h;
    for (size_t i = 0; i < n; i++, o += u)
        memcpy(o, unit, u);
    memcpy(o, tail, t + 1);
    return s;
}

/* The issue's config.json: 200,000 nested brackets (400 KB) took 65 s. */
static char *issue_brackets(void)
{
    char *s = repeated("{\"a\": ", "[", 200000, ""), *closed = repeated(s, "]", 200000, "}");
    free(s);
    return closed;
}
static char *nested_objects(void) { return repeated("", "{\"a\": ", 100000, "1"); }
static char *unterminated_flow(void) { return repeated("", "[", 1u << 20, ""); }
/* 262142 items: with the root, its key and the list, one node over the limit */
static char *flat_list_over(void) { return repeated("{\"a\": [", "1,", 262141, "1]}"); }
static char *flat_list_at(void) { return repeated("{\"a\": [", "1,", 262140, "1]}"); }
static char *long_scalar_over(void) { return repeated("kvplan: 1\nname: ", "x", 65537, "\n"); }
static char *long_scalar_at(void) { return repeated("kvplan: 1\nname: ", "x", 65536, "\n"); }
static char *many_anchors(void) { return repeated("a: [", "&a 1, ", 1025, "1]\n"); }
static char *many_aliases(void) { return repeated("a: &a 1\nb: [", "*a, ", 1025, "1]\n"); }
static char *many_directives(void) { return repeated("# tags\n\n", "%TAG !t! tag:x:\n", 65, "---\nkvplan: 1\n"); }

struct shape_row {
    const char *what;
    enum target t;
    char *(*make)(void);
    const char *want;
};

static const struct shape_row shape_rows[] = {
    {"200,000 nested brackets", T_HF, issue_brackets, "t/config.json:1:39: nesting deeper than 32 levels"},
    {"100,000 nested objects", T_HF, nested_objects, "t/config.json:1:194: nesting deeper than 32 levels"},
    {"unterminated flow sequence", T_YAML, unterminated_flow, "t.yaml:1:34: nesting deeper than 32 levels"},
    {"nodes over the limit", T_HF, flat_list_over, "t/config.json:1:524290: more than 262144 nodes"},
    {"nodes at the limit", T_HF, flat_list_at, "t/config.json:1:1: missing required key 'model_type'"},
    {"scalar over the limit", T_YAML, long_scalar_over, "t.yaml:2:7: a scalar longer than 65536 bytes (got 65537)"},
    {"scalar at the limit", T_YAML, long_scalar_at, "t.yaml:2:7: 'name' is longer than 95 characters"},
    {"anchors", T_YAML, many_anchors, "t.yaml:1:6149: more than 1024 anchors"},
    {"aliases", T_YAML, many_aliases, "t.yaml:2:4101: more than 1024 aliases"},
    {"directives", T_YAML, many_directives, "t.yaml:67:1: more than 64 directives"},
};

START_TEST(shape_limits)
{
    const struct shape_row *r = &shape_rows[_i];
    char *text = r->make();

    expect_text(r->what, r->t, text, strlen(text), r->want, false);
    free(text);
}
END_TEST

/* ---- limits: validation of built models ---------------------------------- */

/* Was a GAP, fixed: the engine multiplies up to four of these in 64 bits; without an upper
 * bound a product can wrap (weights.c: gate * heads * head_dim) or a loop run
 * 2^32 times (weights.c moe(): one iteration per expert). */
struct bound_row {
    const char *field;
    void (*set)(struct kvp_model *m);
    const char *want;
};

static void set_heads(struct kvp_model *m) { m->specs[0].n_heads = m->specs[0].n_kv_heads = 1u << 21; }
static void set_head_dim(struct kvp_model *m) { m->specs[0].head_dim_k = m->specs[0].head_dim_v = 1u << 21; }
static void set_hidden(struct kvp_model *m) { m->hidden = 1u << 21; }
static void set_vocab(struct kvp_model *m) { m->vocab = UINT32_MAX; }
static void set_experts(struct kvp_model *m)
{
    m->n_experts = 1u << 17;
    m->n_experts_active = 1;
    m->expert_intermediate = 8;
}
static void set_window(struct kvp_model *m)
{
    m->specs[0].kind = KVP_LAYER_SLIDING;
    m->specs[0].window = 0;
}

static const struct bound_row bound_rows[] = {
    {"heads", set_heads, "layer 0 (full): 'heads' must be at most 1048576 (got 2097152)"},
    {"head_dim", set_head_dim, "layer 0 (full): 'head_dim_k' must be at most 1048576 (got 2097152)"},
    {"hidden", set_hidden, "'hidden' must be at most 1048576 (got 2097152)"},
    {"vocab", set_vocab, "'vocab' must be at most 16777216 (got 4294967295)"},
    {"experts", set_experts, "'experts' must be at most 65536 (got 131072)"},
    {"window", set_window, "layer 0 (sliding): 'window' must be positive (got 0)"}, /* enforced today */
};

START_TEST(validate_bounds)
{
    const struct bound_row *r = &bound_rows[_i];
    struct kvp_model *m = malloc(sizeof *m);
    struct kvp_layer_spec s = {.kind = KVP_LAYER_FULL, .n_heads = 4, .n_kv_heads = 4, .head_dim_k = 16,
                               .head_dim_v = 16};
    struct kvp_error err = {0};
    enum kvp_status st;

    ck_assert_ptr_nonnull(m);
    kvp_model_init(m);
    m->hidden = 64;
    m->intermediate = 128;
    m->vocab = 100;
    m->max_context = 4096;
    ck_assert_kvp_ok(kvp_model_add_layers(m, &s, 2, &err), err);
    ck_assert_kvp_ok(kvp_model_validate(m, &err), err);
    r->set(m);
    st = kvp_model_validate(m, &err);
    free(m);
    ck_assert_msg(st == KVP_ERR_RANGE && strcmp(err.msg, r->want) == 0, "%s: want '%s', got status %d '%s'",
                  r->field, r->want, st, st ? err.msg : "(valid)");
}
END_TEST

/* ---- limits: GGUF ---------------------------------------------------------- */

struct gbuf {
    uint8_t d[4096];
    size_t n;
    uint64_t n_kv;
};

static void g_le(struct gbuf *b, uint64_t v, unsigned n)
{
    ck_assert_uint_le(b->n + n, sizeof b->d);
    for (unsigned i = 0; i < n; i++)
        b->d[b->n++] = (uint8_t)(v >> (8 * i));
}

static void g_str(struct gbuf *b, const char *s)
{
    g_le(b, strlen(s), 8);
    ck_assert_uint_le(b->n + strlen(s), sizeof b->d);
    memcpy(b->d + b->n, s, strlen(s));
    b->n += strlen(s);
}

static void g_u32(struct gbuf *b, const char *key, uint32_t v)
{
    g_str(b, key);
    g_le(b, GGUF_UINT32, 4);
    g_le(b, v, 4);
    b->n_kv++;
}

static void g_i32_array(struct gbuf *b, const char *key, const int32_t *v, uint32_t n)
{
    g_str(b, key);
    g_le(b, GGUF_ARRAY, 4);
    g_le(b, GGUF_INT32, 4);
    g_le(b, n, 8);
    for (uint32_t i = 0; i < n; i++)
        g_le(b, (uint32_t)v[i], 4);
    b->n_kv++;
}

/* A llama header: 2 layers, hidden 64, 4 heads, context 4096, vocab 100. */
static void g_llama(struct gbuf *b, uint32_t layers)
{
    memset(b, 0, sizeof *b);
    g_le(b, 0x46554747u, 4);
    g_le(b, 3, 4);
    g_le(b, 0, 8);
    g_le(b, 0, 8); /* n_kv, patched by g_end */
    g_str(b, "general.architecture");
    g_le(b, GGUF_STRING, 4);
    g_str(b, "llama");
    b->n_kv++;
    g_u32(b, "llama.block_count", layers);
    g_u32(b, "llama.embedding_length", 64);
    g_u32(b, "llama.feed_forward_length", 128);
    g_u32(b, "llama.context_length", 4096);
    g_u32(b, "llama.vocab_size", 100);
}

static void g_end(struct gbuf *b)
{
    for (unsigned i = 0; i < 8; i++)
        b->d[16 + i] = (uint8_t)(b->n_kv >> (8 * i));
}

struct gguf_row {
    const char *what;
    void (*build)(struct gbuf *b);
    const char *want; /* NULL: it must load */
    bool gap;
};

static void gg_ok(struct gbuf *b) { g_llama(b, 2); g_u32(b, "llama.attention.head_count", 4); }
static void gg_layers(struct gbuf *b) { g_llama(b, 1025); g_u32(b, "llama.attention.head_count", 4); }
static void gg_per_layer_len(struct gbuf *b)
{
    static const int32_t heads[3] = {4, 4, 4};
    g_llama(b, 2);
    g_i32_array(b, "llama.attention.head_count", heads, 3);
}
static void gg_negative(struct gbuf *b)
{
    static const int32_t heads[2] = {4, -4};
    g_llama(b, 2);
    g_i32_array(b, "llama.attention.head_count", heads, 2);
}
static void gg_n_kv(struct gbuf *b)
{
    gg_ok(b);
    b->n_kv = UINT64_MAX;
}
static void gg_string_len(struct gbuf *b)
{
    gg_ok(b);
    g_le(b, UINT64_MAX - 4, 8); /* a key whose length runs past the end */
    b->n_kv++;
}
static void gg_duplicate(struct gbuf *b)
{
    gg_ok(b);
    g_u32(b, "llama.attention.head_count", 8);
}

static const struct gguf_row gguf_rows[] = {
    {"baseline", gg_ok, NULL, false},
    {"block_count", gg_layers, "t.gguf: 'llama.block_count' must be 1..1024 (got 1025)", false},
    {"per-layer length", gg_per_layer_len,
     "t.gguf: 'llama.attention.head_count' has 3 entries but 'llama.block_count' is 2", false},
    {"negative", gg_negative, "t.gguf: 'llama.attention.head_count' must not be negative (got -4)", false},
    {"n_kv", gg_n_kv,
     "t.gguf: truncated header: 18446744073709551615 key/value pairs do not fit in the 267 bytes left at offset 24",
     false},
    {"string length", gg_string_len,
     "t.gguf: truncated header: key 7 name needs 18446744073709551611 bytes at offset 299, 0 left", false},
    /* was a GAP, fixed: llama.cpp's gguf reader refuses a repeated key; kvplan took the last silently */
    {"duplicate key", gg_duplicate, "t.gguf: duplicate key 'llama.attention.head_count' (keys 6 and 7)", true},
};

START_TEST(gguf_limits)
{
    const struct gguf_row *r = &gguf_rows[_i];
    struct gbuf *b = malloc(sizeof *b);
    struct kvp_model *m = malloc(sizeof *m);
    struct kvp_error err = {0};
    char got[KVP_ERROR_TEXT_MAX];
    enum kvp_status st;

    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(m);
    r->build(b);
    g_end(b);
    kvp_model_init(m);
    st = kvp_model_parse_gguf(b->d, b->n, "t.gguf", m, &err);
    if (st == KVP_OK)
        st = kvp_model_validate(m, &err);
    if (st == KVP_OK)
        fuzz_engine(m, b->d, b->n);
    snprintf(got, sizeof got, "(loads)");
    if (st != KVP_OK)
        kvp_error_text(&err, got, sizeof got);
    free(m);
    free(b);
    if (!r->want)
        ck_assert_msg(st == KVP_OK, "%s: %s", r->what, got);
    else
        ck_assert_msg(strcmp(got, r->want) == 0, "%s%s:\n  want %s\n  got  %s", r->gap ? "GAP " : "", r->what,
                      r->want, got);
}
END_TEST

/* ---- limits: quantities (the CLI's option values) ---------------------------- */

struct num_row {
    const char *in;
    int kind;         /* 0 count, 1 bytes, 2 format */
    const char *want; /* error message, or NULL for success */
};

static const struct num_row num_rows[] = {
    {"18446744073709551615", 0, NULL},
    {"18446744073709551616", 0, "'18446744073709551616' does not fit in 64 bits"},
    {"17179869184G", 0, "'17179869184G' does not fit in 64 bits"},
    {"123456789012345678901234567890123", 0, "'123456789012345678901234567890123' does not fit in 64 bits"},
    {"-1", 0, "'-1' is not a count (expected e.g. 4096, 32k, 1M)"},
    {"32kk", 0, "'32kk' is not a count (expected e.g. 4096, 32k, 1M)"},
    {"", 0, "'' is not a count (expected e.g. 4096, 32k, 1M)"},
    {"16777216TiB", 1, "'16777216TiB' does not fit in 64 bits"},
    {"99999999999999999999", 1, "'99999999999999999999' does not fit in 64 bits"},
    {"1e9", 1, "'1e9' has an unknown unit (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"},
    {".", 1, "'.' is not a size (expected e.g. 80GiB, 80GB, 512MiB)"},
    {"-80GiB", 1, "'-80GiB' is not a size (expected e.g. 80GiB, 80GB, 512MiB)"},
    {"int4:group=0", 2, "format 'int4:group=0': 'group' must be 1..65536 (got '0')"},
    {"q4_0:group=32", 2, "format 'q4_0:group=32': 'q4_0' takes no settings"},
};

START_TEST(num_limits)
{
    const struct num_row *r = &num_rows[_i];
    struct kvp_error err = {0};
    struct kvp_format f;
    uint64_t v;
    enum kvp_status st = r->kind == 0 ? kvp_parse_count(r->in, &v, &err)
                       : r->kind == 1 ? kvp_parse_bytes(r->in, &v, &err)
                                      : kvp_format_parse(r->in, &f, &err);
    if (!r->want)
        ck_assert_kvp_ok(st, err);
    else
        ck_assert_msg(st != KVP_OK && strcmp(err.msg, r->want) == 0, "'%s': want '%s', got status %d '%s'",
                      r->in, r->want, st, st ? err.msg : "");
}
END_TEST

/* ---- limits: big files ---------------------------------------------------------- */

/* Write n bytes of text to a temporary file made of lines from `line`. */
static void write_file(const char *path, const char *head, const char *line, size_t bytes, const char *tail)
{
    FILE *f = fopen(path, "wb");
    size_t n = 0, ll = strlen(line);
    ck_assert_ptr_nonnull(f);
    fputs(head, f);
    for (unsigned i = 0; n < bytes; i++) {
        n += (size_t)fprintf(f, line, i);
        (void)ll;
    }
    fputs(tail, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* The 64 MiB read cap of kvp_model_load is enforced today. */
START_TEST(file_over_read_cap)
{
    const char *path = "build/check_robust-64mib.yaml";
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    char got[KVP_ERROR_TEXT_MAX];

    write_file(path, "", "# %08u padding padding padding padding padding padding padding\n", (64u << 20) + 1, "");
    ck_assert_int_ne(kvp_model_load(path, &m, &err), KVP_OK);
    remove(path);
    ck_assert_str_eq(kvp_error_text(&err, got, sizeof got),
                     "build/check_robust-64mib.yaml: the file is larger than 64 MiB");
}
END_TEST

/* Was a GAP, fixed: a text config is kilobytes; 64 MiB of YAML is gigabytes of libyaml
 * nodes. Proposed: 4 MiB for YAML/JSON (GGUF keeps 64 MiB of header). */
START_TEST(text_file_cap)
{
    const char *path = "build/check_robust-5mib.json";
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    char got[KVP_ERROR_TEXT_MAX];

    write_file(path, "{\"model_type\": \"llama\"\n", "# %08u padding padding padding padding padding padding\n",
               5u << 20, "}\n");
    ck_assert_int_ne(kvp_model_load(path, &m, &err), KVP_OK);
    remove(path);
    ck_assert_str_eq(kvp_error_text(&err, got, sizeof got),
                     "build/check_robust-5mib.json: the file is larger than 4 MiB");
}
END_TEST

/* A FIFO, a directory or a device given as a model, a plan, a GPU catalog
 * or a trace is an error naming what it is, at once: opening a FIFO for
 * reading used to wait for a writer forever (a hang, found by the hostile
 * test of issue #37): without the check this test times out. */
START_TEST(only_regular_files)
{
    const char *fifo = "build/check_robust-fifo.yaml";
    static const char *const others[] = {"build", "/dev/null"};
    static const char *const what[] = {"a directory", "a device"};
    struct kvp_model *m = NULL;
    struct kvp_gpu_catalog *g = NULL;
    struct kvp_plan p = {0};
    struct kvp_workload w = {0};
    struct kvp_error err = {0};
    char got[KVP_ERROR_TEXT_MAX];

    remove(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(kvp_model_load(fifo, &m, &err), KVP_ERR_IO);
    ck_assert_str_eq(kvp_error_text(&err, got, sizeof got), "build/check_robust-fifo.yaml: a FIFO, not a regular file");
    ck_assert_int_eq(kvp_gpu_catalog_load(fifo, &g, &err), KVP_ERR_IO);
    ck_assert_int_eq(kvp_plan_load(&p, fifo, NULL, NULL, &err), KVP_ERR_IO);
    kvp_plan_release(&p);
    ck_assert_int_eq(kvp_workload_load(fifo, &w, &err), KVP_ERR_IO);
    ck_assert_str_eq(kvp_error_text(&err, got, sizeof got), "build/check_robust-fifo.yaml: a FIFO, not a regular file");
    remove(fifo);
    for (int i = 0; i < 2; i++) { /* a model's directory is read as a Hugging Face folder: its config.json */
        ck_assert_int_eq(kvp_gpu_catalog_load(others[i], &g, &err), KVP_ERR_IO);
        ck_assert_msg(strstr(err.msg, what[i]) != NULL, "%s: %s", others[i], err.msg);
    }
}
END_TEST

/* Every file the CLI writes goes through kvp_buf_save: a temporary file
 * beside the target, renamed, so the target is the old file or the whole
 * new one; a FIFO or a device as the target is refused; a process killed
 * while it writes leaves no temporary file (export-gguf killed by SIGTERM
 * left gigabytes of one, simulate --svg truncated the old chart before
 * writing: issue #37). */
START_TEST(writes_whole_or_not_at_all)
{
    const char *path = "build/check_robust-out.txt", *fifo = "build/check_robust-out.fifo";
    struct kvp_buf b = {0};
    struct kvp_error err = {0};
    char *back, tmp[256];
    DIR *dir;
    struct dirent *e;
    int fd, status;
    pid_t pid;

    kvp_buf_printf(&b, "new contents\n");
    remove(path);
    ck_assert_kvp_ok(kvp_buf_save(&b, path, &err), err);
    ck_assert_ptr_nonnull(back = test_slurp(path));
    ck_assert_str_eq(back, "new contents\n");
    free(back);
    remove(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(kvp_buf_save(&b, fifo, &err), KVP_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "is not a regular file"));
    remove(fifo);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) { /* a writer killed before its rename */
        if (kvp_tmp_beside(path, tmp, sizeof tmp, &fd, &err) == KVP_OK)
            raise(SIGTERM);
        _exit(3);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    ck_assert_ptr_nonnull(dir = opendir("build"));
    while ((e = readdir(dir)) != NULL)
        ck_assert_msg(strncmp(e->d_name, "check_robust-out.txt.tmp", 24) != 0, "left behind: %s", e->d_name);
    closedir(dir);
    ck_assert_ptr_nonnull(back = test_slurp(path)); /* the old file stays */
    ck_assert_str_eq(back, "new contents\n");
    free(back);
    remove(path);
    kvp_buf_release(&b);
}
END_TEST

/* Was a GAP, fixed: the duplicate-key check compares every pair of keys of a mapping
 * (ydoc.c walk()), so 80,000 keys (1 MB) take 79 s and a 60 MiB file hours.
 * A 1 MB config must be answered within the test timeout. */
START_TEST(many_keys_in_time)
{
    size_t cap = 64u * 60000 + 64, o = 0;
    char *s = malloc(cap);
    struct kvp_model *m = malloc(sizeof *m);
    struct kvp_error err = {0};
    enum kvp_status st;

    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(m);
    o += (size_t)snprintf(s, cap, "{\"model_type\": \"llama\"");
    for (unsigned i = 0; i < 60000; i++)
        o += (size_t)snprintf(s + o, cap - o, ", \"id2label_%u\": %u", i, i);
    o += (size_t)snprintf(s + o, cap - o, "}");
    kvp_model_init(m);
    st = kvp_model_parse_hf(s, o, "big/config.json", m, &err);
    free(s);
    free(m);
    ck_assert_msg(st != KVP_OK && err.msg[0], "status %d '%s'", st, err.msg);
    ck_assert_str_eq(err.msg, "missing required key 'num_hidden_layers'");
}
END_TEST

/* ---- limits: plans (issue #20) ------------------------------------------------ */

#define PLAN "build/check_robust-plan.yaml"
#define PLAN_DEP "  - {name: d%05u, model: ../models/llama-3.1-8b.yaml, gpu_memory: 80GiB, assert: {fits: true}}\n"
#define PLAN_CHECK "      - {fits: true, name: a%05u}\n"
#define PLAN_INC "  - check_robust-inc.yaml # %05u\n"

/* Write PLAN of head, `lines` copies of line (a format of one index), tail. */
static void write_plan(const char *head, const char *line, unsigned lines, const char *tail)
{
    char one[256];
    size_t len = (size_t)snprintf(one, sizeof one, line, 0u);
    write_file(PLAN, head, line, (lines - 1) * len + 1, tail);
}

static void plan_deployments(void) { write_plan("kvplan_plan: 1\ndeployments:\n", PLAN_DEP, 1025, ""); }
static void plan_checks(void)
{
    write_plan("kvplan_plan: 1\ndeployments:\n  - name: d\n    model: ../models/llama-3.1-8b.yaml\n"
               "    gpu_memory: 80GiB\n    assert:\n", PLAN_CHECK, 2049, "");
}
static void plan_files(void)
{
    write_file("build/check_robust-inc.yaml", "kvplan_plan: 1\n", "", 0, "");
    write_plan("kvplan_plan: 1\ninclude:\n", PLAN_INC, 64, "");
}
static void plan_bytes(void)
{
    write_file("build/check_robust-inc.yaml", "kvplan_plan: 1\n", "# %08u padding padding padding padding padding\n",
               1000000, "");
    write_plan("kvplan_plan: 1\ninclude:\n", PLAN_INC, 5, "");
}

struct plan_row {
    const char *what;
    void (*write)(void);
    const char *want;
};

static const struct plan_row plan_rows[] = {
    {"deployments", plan_deployments, PLAN ":1027:5: more than 1024 deployments"},
    {"assertions", plan_checks, PLAN ":7:7: more than 2048 assertions in the plan (2049 with these)"},
    {"files", plan_files, "build/check_robust-inc.yaml: more than 64 plan files with the includes"},
    {"bytes", plan_bytes, "build/check_robust-inc.yaml: the plan and its includes are larger than 4 MiB"},
};

START_TEST(plan_limits)
{
    const struct plan_row *r = &plan_rows[_i];
    struct kvp_plan p = {0};
    struct kvp_error err = {0};
    char got[KVP_ERROR_TEXT_MAX] = "(loads)";

    r->write();
    if (kvp_plan_load(&p, PLAN, NULL, NULL, &err) != KVP_OK)
        kvp_error_text(&err, got, sizeof got);
    kvp_plan_release(&p);
    remove(PLAN);
    remove("build/check_robust-inc.yaml");
    ck_assert_msg(strcmp(got, r->want) == 0, "%s:\n  want %s\n  got  %s", r->what, r->want, got);
}
END_TEST

/* A baseline holds one result per assertion, so at most KVP_PLAN_MAX_CHECKS:
 * each is looked up among the report's results. */
START_TEST(baseline_results)
{
    struct kvp_plan_report r = {0};
    struct kvp_error err = {0};
    char got[KVP_ERROR_TEXT_MAX] = "(applies)";

    write_plan("{\"kvplan_check\": 1, \"results\": [\n", "  {\"id\": \"d/a%05u\", \"measured\": 1},\n", 2049, "]}\n");
    if (kvp_plan_baseline_apply(&r, PLAN, 0.0, &err) != KVP_OK)
        kvp_error_text(&err, got, sizeof got);
    remove(PLAN);
    ck_assert_str_eq(got, PLAN ":1:32: more than 2048 results (a plan has at most 2048 assertions)");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("robust");
    TCase *core = tcase_create("core"), *lim = tcase_create("limits");

    tcase_add_test(core, fuzz_regressions);
    tcase_add_test(core, bad_corpus_fails_cleanly);
    tcase_set_timeout(core, 20);
    tcase_add_loop_test(lim, text_limits, 0, (int)N_ELEMS(text_rows));
    tcase_add_loop_test(lim, shape_limits, 0, (int)N_ELEMS(shape_rows));
    tcase_add_loop_test(lim, validate_bounds, 0, (int)N_ELEMS(bound_rows));
    tcase_add_loop_test(lim, gguf_limits, 0, (int)N_ELEMS(gguf_rows));
    tcase_add_loop_test(lim, num_limits, 0, (int)N_ELEMS(num_rows));
    tcase_add_test(lim, file_over_read_cap);
    tcase_add_test(lim, only_regular_files);
    tcase_add_test(lim, writes_whole_or_not_at_all);
    tcase_add_test(lim, text_file_cap);
    tcase_add_test(lim, many_keys_in_time);
    tcase_add_loop_test(lim, plan_limits, 0, (int)N_ELEMS(plan_rows));
    tcase_add_test(lim, baseline_results);
    tcase_set_timeout(lim, 10);
    suite_add_tcase(s, core);
    suite_add_tcase(s, lim);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
