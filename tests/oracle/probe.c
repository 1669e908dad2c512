/* probe.c -- ask the real llama.cpp how many bytes its KV cache takes.
 *
 *     probe LIBDIR MODEL.gguf N_CTX TYPE_K TYPE_V N_SEQ SWA_FULL FA
 *
 * Loads MODEL with no_alloc and load_mode NONE (nothing is read or
 * allocated: the GGUF may be sparse), creates a context with these cache
 * settings and prints one line:
 *
 *     ok <kv bytes> <cells logged> <compute bytes>   the breakdown's `context` and
 *                                                    `compute` fields, exactly
 *     refused <llama.cpp's last error line>
 *
 *     probe LIBDIR MODEL.gguf decode N
 *
 * loads MODEL for real (random weights from kvplan export-gguf), decodes
 * tokens 1..N one at a time (flash attention off, f32 cache) and prints
 * "ok <n> <logit[0]> <logit[1]>" when every logit is finite.
 *
 *     probe LIBDIR MODEL.gguf logits N
 *
 * the same run over tokens 1 + (37 i) mod (vocab - 1), i = 0..N-1 (the
 * sequence tests/oracle/ref_logits.c feeds kvplan's reference decoder), one
 * token per llama_decode, printing one line per step: the step, then every
 * logit (%.9g). Flash attention off and an f32 K/V cache: the path that
 * stays within float rounding of a plain fp32 decoder.
 *
 *     probe LIBDIR SRC.gguf quantize OUT FTYPE...
 *
 * quantizes SRC to OUT-<FTYPE>.gguf with llama.cpp's own quantizer
 * (llama_model_quantize, default parameters, 2 threads) once per file type
 * (enum llama_ftype), then reads each one's tensor table back with ggml's GGUF reader and prints a line
 *
 *     <ftype> ok <bytes> <tensors> <type>:<bytes> ...   the sum of gguf_get_tensor_size, per type
 *     <ftype> refused <llama.cpp's reason>
 *
 * A file type the quantizer refuses for want of an importance matrix
 * (IQ1/IQ2/IQ3_XXS, Q2_K_S) is run again with one of ones for every matrix.
 * One process for many file types: the IQ quantizers build their grids once
 * per process (about 35 s for IQ1's).
 *
 * PROBE_NGL=N places the layers as -ngl N does, on one GPU (tests/oracle/fakegpu.c),
 * PROBE_NCMOE=N adds --n-cpu-moe N's overrides (common/arg.cpp: the expert tensors
 * blk.I.ffn_(up|down|gate|gate_up)_(ch|)exps of layers I < N in the CPU buffer type),
 * PROBE_NKVO=1 is --no-kv-offload; the ok line then ends with each buffer type's
 * bytes, " NAME=model/context/compute".
 *
 * TYPE_K/TYPE_V are ggml type names (f16, bf16, q8_0, q4_0, f32); FA is -1
 * (auto), 0 (off) or 1 (on). Exit 0 for both answers; 2 for bad usage.
 * Built against the headers of the same llama.cpp release (tests/oracle/run.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

void kvprobe_breakdown(struct llama_context *ctx, unsigned long long *model, unsigned long long *context,
                       unsigned long long *compute, char *out, size_t n);
ggml_backend_dev_t kvprobe_fake_gpu(void);

static char last_error[1024]; /* the last WARN/ERROR log line: llama.cpp's reason for a refusal */
static int verbose;

static void log_cb(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (verbose)
        fputs(text, stderr);
    if ((level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) && strlen(text) > 1) {
        snprintf(last_error, sizeof last_error, "%s", text);
        last_error[strcspn(last_error, "\n")] = '\0';
    }
}

static int type_from_name(const char *s, enum ggml_type *out)
{
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *n = ggml_type_name((enum ggml_type)t);
        if (n && strcmp(n, s) == 0) {
            *out = (enum ggml_type)t;
            return 1;
        }
    }
    return 0;
}

/* Decode n tokens and check the logits: the file's weights really load and run.
 * all: print every logit of every step (the `logits` mode) instead. */
static int decode(const char *path, int n, int all)
{
    struct llama_model_params mp = llama_model_default_params();
    struct llama_context_params cp = llama_context_default_params();
    struct llama_model *model;
    struct llama_context *ctx;
    const float *lg = NULL;
    int n_vocab;

    if (!(model = llama_model_load_from_file(path, mp))) {
        printf("refused %s\n", last_error[0] ? last_error : "model load failed");
        return 0;
    }
    cp.n_ctx = n > 256 ? (uint32_t)n : 256;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.n_threads = cp.n_threads_batch = 1;
    if (!(ctx = llama_init_from_model(model, cp))) {
        printf("refused %s\n", last_error[0] ? last_error : "context creation failed");
        return 0;
    }
    n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    for (int i = 0; i < n; i++) {
        llama_token tok = (llama_token)(all ? 1 + (37 * i) % (n_vocab - 1) : 1 + i % (n_vocab - 1));
        if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) {
            printf("refused decode failed at step %d\n", i);
            return 0;
        }
        lg = llama_get_logits_ith(ctx, -1);
        for (int v = 0; v < n_vocab; v++)
            if (!(lg[v] == lg[v]) || lg[v] > 1e30f || lg[v] < -1e30f) {
                printf("bad logit %d at step %d\n", v, i);
                return 1;
            }
        if (all) {
            printf("%d", i);
            for (int v = 0; v < n_vocab; v++)
                printf(" %.9g", lg[v]);
            printf("\n");
        }
    }
    if (all) {
        llama_free(ctx);
        llama_model_free(model);
        return 0;
    }
    printf("ok %d %.6f %.6f\n", n, lg ? lg[0] : 0.0f, lg ? lg[1] : 0.0f);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}

/* Logging to log_cb, the CPU backends from libdir (without them: "no backends are loaded"). */
static void init(const char *libdir)
{
    verbose = getenv("PROBE_VERBOSE") != NULL;
    llama_log_set(log_cb, NULL);
    ggml_backend_load_all_from_path(libdir);
    llama_backend_init();
}

/* Sum OUT's tensor bytes, per type too, as ggml's own reader sees them. */
static int table(const char *path)
{
    struct gguf_init_params gp = {true, NULL};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    unsigned long long total = 0, by_type[GGML_TYPE_COUNT] = {0};
    int64_t n;

    if (!g) {
        printf("refused cannot read %s\n", path);
        return 0;
    }
    n = gguf_get_n_tensors(g);
    for (int64_t i = 0; i < n; i++) {
        total += gguf_get_tensor_size(g, i);
        by_type[gguf_get_tensor_type(g, i)] += gguf_get_tensor_size(g, i);
    }
    printf("ok %llu %lld", total, (long long)n);
    for (int t = 0; t < GGML_TYPE_COUNT; t++)
        if (by_type[t])
            printf(" %s:%llu", ggml_type_name((enum ggml_type)t), by_type[t]);
    printf("\n");
    gguf_free(g);
    return 0;
}

/* An importance matrix of ones, ne0 * ne2 floats for every tensor of 2 or 3 dims of src. */
static struct llama_model_imatrix_data *ones_imatrix(const char *src, float **buf)
{
    struct gguf_init_params gp = {true, NULL};
    struct gguf_context *g = gguf_init_from_file(src, gp);
    struct llama_model_imatrix_data *im;
    size_t total = 0, at = 0;
    int64_t n, k = 0;

    if (!g)
        return NULL;
    n = gguf_get_n_tensors(g);
    for (int64_t i = 0; i < n; i++)
        total += (size_t)(gguf_get_tensor_ne(g, i)[0] * gguf_get_tensor_ne(g, i)[2]);
    im = calloc((size_t)n + 1, sizeof *im);
    *buf = malloc(total * sizeof **buf);
    if (!im || !*buf)
        return NULL;
    for (size_t j = 0; j < total; j++)
        (*buf)[j] = 1.0f;
    for (int64_t i = 0; i < n; i++) {
        const int64_t *ne = gguf_get_tensor_ne(g, i);
        if (ne[1] == 1)
            continue; /* 1-D: never quantized */
        im[k].name = strdup(gguf_get_tensor_name(g, i));
        im[k].data = *buf + at;
        im[k].size = (size_t)(ne[0] * ne[2]);
        at += im[k].size;
        k++;
    }
    gguf_free(g);
    return im;
}

/* Quantize src to out as ftype; 0 when it ran. */
static int quantize_one(const char *src, int ftype, const char *out, const struct llama_model_imatrix_data *im)
{
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();

    qp.ftype = (enum llama_ftype)ftype;
    qp.nthread = 2;
    qp.imatrix = im;
    last_error[0] = '\0';
    return llama_model_quantize(src, out, &qp) != 0;
}

static int quantize(const char *src, const char *prefix, int n, char **ftypes)
{
    struct llama_model_imatrix_data *im = NULL;
    float *buf = NULL;

    for (int i = 0; i < n; i++) {
        int ft = atoi(ftypes[i]);
        char out[4096];
        snprintf(out, sizeof out, "%s-%d.gguf", prefix, ft);
        int failed = quantize_one(src, ft, out, NULL);
        if (failed && strstr(last_error, "requires an imatrix")) {
            if (!im && !(im = ones_imatrix(src, &buf))) {
                printf("%d refused cannot build an imatrix for %s\n", ft, src);
                continue;
            }
            failed = quantize_one(src, ft, out, im);
        }
        printf("%d ", ft);
        if (failed) /* a line per file type, printed as soon as its file is complete */
            printf("refused %s\n", last_error[0] ? last_error : "llama_model_quantize failed");
        else
            table(out);
        fflush(stdout);
    }
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    struct llama_model_params mp;
    struct llama_context_params cp;
    struct llama_model *model;
    struct llama_context *ctx;
    enum ggml_type tk, tv;
    unsigned long long mb = 0, kb = 0, cb = 0;
    static char bufts[1024], patterns[64][64];
    static struct llama_model_tensor_buft_override over[65];
    ggml_backend_dev_t devs[2] = {NULL, NULL};

    if (argc == 5 && (strcmp(argv[3], "decode") == 0 || strcmp(argv[3], "logits") == 0)) {
        init(argv[1]);
        return decode(argv[2], atoi(argv[4]), strcmp(argv[3], "logits") == 0);
    }
    if (argc >= 6 && strcmp(argv[3], "quantize") == 0) {
        init(argv[1]);
        return quantize(argv[2], argv[4], argc - 5, argv + 5);
    }
    if (argc != 9 || !type_from_name(argv[4], &tk) || !type_from_name(argv[5], &tv)) {
        fprintf(stderr, "usage: probe LIBDIR MODEL.gguf N_CTX TYPE_K TYPE_V N_SEQ SWA_FULL FA\n");
        return 2;
    }
    init(argv[1]);
    mp = llama_model_default_params();
    mp.no_alloc = true;                  /* plan only */
    mp.load_mode = LLAMA_LOAD_MODE_NONE; /* mmap with no_alloc aborts */
    if (getenv("PROBE_NGL")) {
        devs[0] = kvprobe_fake_gpu();
        mp.devices = devs;
        mp.n_gpu_layers = atoi(getenv("PROBE_NGL"));
    }
    if (getenv("PROBE_NCMOE")) {
        int n = atoi(getenv("PROBE_NCMOE"));
        for (int i = 0; i < n && i < 64; i++) {
            snprintf(patterns[i], sizeof patterns[i], "blk\\.%d\\.ffn_(up|down|gate|gate_up)_(ch|)exps", i);
            over[i].pattern = patterns[i];
            over[i].buft = ggml_backend_cpu_buffer_type();
        }
        mp.tensor_buft_overrides = over;
    }
    if (!(model = llama_model_load_from_file(argv[2], mp))) {
        printf("refused %s\n", last_error[0] ? last_error : "model load failed");
        return 0;
    }
    cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)strtoul(argv[3], NULL, 10);
    cp.type_k = tk;
    cp.type_v = tv;
    cp.n_seq_max = (uint32_t)strtoul(argv[6], NULL, 10);
    cp.swa_full = atoi(argv[7]) != 0;
    cp.flash_attn_type = (enum llama_flash_attn_type)atoi(argv[8]);
    if (getenv("PROBE_UBATCH")) /* -ub; llama.cpp caps it at n_batch (2048) */
        cp.n_ubatch = (uint32_t)strtoul(getenv("PROBE_UBATCH"), NULL, 10);
    if (getenv("PROBE_BATCH")) /* -b */
        cp.n_batch = (uint32_t)strtoul(getenv("PROBE_BATCH"), NULL, 10);
    cp.n_threads = cp.n_threads_batch = 1;
    cp.offload_kqv = getenv("PROBE_NKVO") == NULL;
    last_error[0] = '\0';
    if (!(ctx = llama_init_from_model(model, cp))) {
        printf("refused %s\n", last_error[0] ? last_error : "context creation failed");
        llama_model_free(model);
        return 0;
    }
    kvprobe_breakdown(ctx, &mb, &kb, &cb, bufts, sizeof bufts);
    printf("ok %llu %u %llu%s\n", kb, llama_n_ctx(ctx), cb, getenv("PROBE_NGL") ? bufts : "");
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
