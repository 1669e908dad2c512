/* gguf_seeds.c -- write small GGUF v3 headers as seeds for fuzz_gguf.
 *
 *     build/fuzz/gguf_seeds DIR     # writes DIR/llama.gguf, DIR/gemma3.gguf, ...
 *
 * Each file is a header only (key/value pairs and tensor infos, no data),
 * covering the shapes kvp_model_parse_gguf reads: scalar and per-layer head
 * counts, sliding windows with a pattern key or array, MLA, experts, a token
 * list for the vocab, tied and untied embeddings. A plain C program so
 * `make fuzz` needs nothing beyond the compiler. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_types.h" /* the value-type codes, as the reader numbers them */


struct w {
    unsigned char buf[65536];
    size_t n;
    uint64_t n_kv, n_tensors;
};

static void put(struct w *w, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++)
        w->buf[w->n++] = (unsigned char)(v >> (8 * i));
}

static void str(struct w *w, const char *s)
{
    put(w, strlen(s), 8);
    memcpy(w->buf + w->n, s, strlen(s));
    w->n += strlen(s);
}

static void kv_u32(struct w *w, const char *k, uint32_t v)
{
    str(w, k);
    put(w, GGUF_UINT32, 4);
    put(w, v, 4);
    w->n_kv++;
}

static void kv_str(struct w *w, const char *k, const char *v)
{
    str(w, k);
    put(w, GGUF_STRING, 4);
    str(w, v);
    w->n_kv++;
}

static void kv_f32(struct w *w, const char *k, float f)
{
    uint32_t r;
    memcpy(&r, &f, 4);
    str(w, k);
    put(w, GGUF_FLOAT32, 4);
    put(w, r, 4);
    w->n_kv++;
}

/* An array of n elements of type t (4-byte ints or 1-byte bools) from vals. */
static void kv_arr(struct w *w, const char *k, uint32_t t, const uint32_t *vals, uint32_t n)
{
    str(w, k);
    put(w, GGUF_ARRAY, 4);
    put(w, t, 4);
    put(w, n, 8);
    for (uint32_t i = 0; i < n; i++)
        put(w, vals[i], t == GGUF_BOOL ? 1 : 4);
    w->n_kv++;
}

static void kv_tokens(struct w *w, uint32_t n)
{
    char tok[16];
    str(w, "tokenizer.ggml.tokens");
    put(w, GGUF_ARRAY, 4);
    put(w, GGUF_STRING, 4);
    put(w, n, 8);
    for (uint32_t i = 0; i < n; i++) {
        snprintf(tok, sizeof tok, "t%u", i);
        str(w, tok);
    }
    w->n_kv++;
}

static void tensor(struct w *w, const char *name, uint64_t ne0, uint64_t ne1)
{
    str(w, name);
    put(w, 2, 4);
    put(w, ne0, 8);
    put(w, ne1, 8);
    put(w, 1, 4); /* f16 */
    put(w, 0, 8);
    w->n_tensors++;
}

static void begin(struct w *w)
{
    memset(w, 0, sizeof *w);
    w->n = 24; /* the preamble is written by finish() */
}

static int finish(struct w *w, const char *dir, const char *name)
{
    char path[1024];
    FILE *f;
    size_t end = w->n;

    w->n = 0;
    put(w, 0x46554747u, 4); /* "GGUF" */
    put(w, 3, 4);
    put(w, w->n_tensors, 8);
    put(w, w->n_kv, 8);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(f = fopen(path, "wb")) || fwrite(w->buf, 1, end, f) != end || fclose(f) != 0) {
        fprintf(stderr, "gguf_seeds: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

static void common(struct w *w, const char *arch, uint32_t layers, uint32_t hidden, uint32_t heads)
{
    char k[96];
    kv_str(w, "general.architecture", arch);
    kv_str(w, "general.name", arch);
    kv_u32(w, "general.file_type", 1);
#define ARCH_U32(suffix, v) (snprintf(k, sizeof k, "%s." suffix, arch), kv_u32(w, k, v))
    ARCH_U32("block_count", layers);
    ARCH_U32("embedding_length", hidden);
    ARCH_U32("feed_forward_length", hidden * 3);
    ARCH_U32("context_length", 8192);
    ARCH_U32("attention.head_count", heads);
#undef ARCH_U32
}

int main(int argc, char **argv)
{
    static struct w w;
    const char *dir = argc > 1 ? argv[1] : ".";
    uint32_t kv[8] = {2, 2, 0, 2, 4, 4, 0, 4}, swa[8] = {1, 1, 1, 0, 1, 1, 1, 0};
    int bad = 0;

    /* llama: GQA, untied, vocab from the token list */
    begin(&w);
    common(&w, "llama", 4, 256, 8);
    kv_u32(&w, "llama.attention.head_count_kv", 2);
    kv_f32(&w, "llama.rope.freq_base", 500000.0f);
    kv_tokens(&w, 64);
    tensor(&w, "token_embd.weight", 256, 64);
    tensor(&w, "output.weight", 256, 64);
    bad |= finish(&w, dir, "llama.gguf");

    /* per-layer KV heads with attention-free layers, vocab from token_embd */
    begin(&w);
    common(&w, "granite", 8, 128, 4);
    kv_arr(&w, "granite.attention.head_count_kv", GGUF_INT32, kv, 8);
    tensor(&w, "token_embd.weight", 128, 1000);
    bad |= finish(&w, dir, "per-layer-kv.gguf");

    /* gemma3: sliding window with the built-in pattern, key/value lengths */
    begin(&w);
    common(&w, "gemma3", 12, 640, 4);
    kv_u32(&w, "gemma3.attention.head_count_kv", 1);
    kv_u32(&w, "gemma3.attention.key_length", 256);
    kv_u32(&w, "gemma3.attention.value_length", 256);
    kv_u32(&w, "gemma3.attention.sliding_window", 512);
    kv_u32(&w, "gemma3.vocab_size", 262144);
    bad |= finish(&w, dir, "gemma3.gguf");

    /* gpt-oss: a per-layer sliding pattern array of bools, experts */
    begin(&w);
    common(&w, "gpt-oss", 8, 256, 8);
    kv_u32(&w, "gpt-oss.attention.head_count_kv", 2);
    kv_u32(&w, "gpt-oss.attention.sliding_window", 128);
    kv_arr(&w, "gpt-oss.attention.sliding_window_pattern", GGUF_BOOL, swa, 8);
    kv_u32(&w, "gpt-oss.expert_count", 32);
    kv_u32(&w, "gpt-oss.expert_used_count", 4);
    kv_u32(&w, "gpt-oss.expert_feed_forward_length", 512);
    kv_u32(&w, "gpt-oss.vocab_size", 2000);
    bad |= finish(&w, dir, "gpt-oss.gguf");

    /* deepseek2: MLA with leading dense blocks and shared experts */
    begin(&w);
    common(&w, "deepseek2", 6, 512, 16);
    kv_u32(&w, "deepseek2.attention.head_count_kv", 1);
    kv_u32(&w, "deepseek2.attention.kv_lora_rank", 128);
    kv_u32(&w, "deepseek2.attention.q_lora_rank", 192);
    kv_u32(&w, "deepseek2.rope.dimension_count", 16);
    kv_u32(&w, "deepseek2.attention.key_length_mla", 48);
    kv_u32(&w, "deepseek2.attention.value_length_mla", 32);
    kv_u32(&w, "deepseek2.leading_dense_block_count", 1);
    kv_u32(&w, "deepseek2.expert_count", 16);
    kv_u32(&w, "deepseek2.expert_used_count", 2);
    kv_u32(&w, "deepseek2.expert_shared_count", 1);
    kv_u32(&w, "deepseek2.expert_feed_forward_length", 256);
    kv_u32(&w, "deepseek2.vocab_size", 1024);
    bad |= finish(&w, dir, "deepseek2.gguf");
    return bad;
}
