/* check_emit.c -- the launch command of a planned deployment
 * (kvplan/emit.h) and an engine's command read back as settings
 * (kvp_settings_from_command): the command names every flag that sizes
 * memory with the fit's value, and reading it back gives the same pool
 * (blocks, tokens, concurrency), engine by engine; flags kvplan does not
 * model are refused by name, others ignored and listed. */
#include <stdlib.h>
#include <string.h>

#include "kvplan/catalog.h"
#include "kvplan/emit.h"
#include "kvplan/gpu.h"
#include "kvplan/settings.h"
#include "testutil.h"

static struct kvp_catalog *cat;
static struct kvp_gpu_catalog *gpus;

static void load(void)
{
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_catalog_load("models", &cat, &err), err);
    ck_assert_kvp_ok(kvp_gpu_catalog_load("models/gpus.yaml", &gpus, &err), err);
}

static void unload(void)
{
    kvp_catalog_free(cat);
    kvp_gpu_catalog_free(gpus);
}

/* settings as "key=value ..." applied to model; the fit into *f. */
static void fit_of(const char *model, const struct kvp_settings *s, struct kvp_deploy *d, struct kvp_fit *f)
{
    const struct kvp_model *m = kvp_catalog_find(cat, model);
    const struct kvp_gpu *g;
    struct kvp_error err = {0};
    int bad;
    ck_assert_ptr_nonnull(m);
    ck_assert_kvp_ok(kvp_settings_apply(s, m, gpus, d, &g, &bad, &err), err);
    ck_assert_kvp_ok(kvp_fit_compute(m, d, f, &err), err);
}

static void settings_of(const char *text, struct kvp_settings *s)
{
    char buf[512], *save = NULL;
    struct kvp_error err = {0};
    snprintf(buf, sizeof buf, "%s", text);
    kvp_settings_clear(s);
    for (char *kv = strtok_r(buf, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(kv, '=');
        ck_assert_ptr_nonnull(eq);
        *eq = '\0';
        ck_assert_kvp_ok(kvp_settings_put(s, kv, eq + 1, &err), err);
    }
}

/* Split a command line at spaces, as the shell would the emitted ones: a word in single quotes (vLLM's
 * --eplb-config JSON) has no space inside and loses its quotes. */
static int split_words(char *line, char **argv, int cap)
{
    int n = 0;
    char *save = NULL;
    for (char *w = strtok_r(line, " \n", &save); w && n < cap; w = strtok_r(NULL, " \n", &save)) {
        size_t len = strlen(w);
        if (len >= 2 && w[0] == '\'' && w[len - 1] == '\'') {
            w[len - 1] = '\0';
            w++;
        }
        argv[n++] = w;
    }
    return n;
}

static const struct emit_case {
    const char *model, *settings, *command, *kept; /* kept: settings the command cannot say (the GPU) */
} cases[] = {
    {"llama-3.1-70b", "gpu=h100 tp=4 weight_dtype=fp8 context=8192 concurrency=64",
     "vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 4 --pipeline-parallel-size 1 --max-model-len 8192 "
     "--gpu-memory-utilization 0.92 --kv-cache-dtype auto --block-size 16 --max-num-seqs 1024 "
     "--max-num-batched-tokens 8192 --quantization fp8",
     "gpu=h100 concurrency=64"},
    {"gemma-3-27b", "gpu=h100 context=32k concurrency=2 kv_dtype=fp8",
     "vllm serve google/gemma-3-27b-it --tensor-parallel-size 1 --pipeline-parallel-size 1 --max-model-len 32768 "
     "--gpu-memory-utilization 0.92 --kv-cache-dtype fp8 --block-size 16 --max-num-seqs 1024 "
     "--max-num-batched-tokens 8192",
     "gpu=h100 concurrency=2"},
    {"llama-3.1-8b", "gpu=h100 kv_cache_memory=20GiB context=16k",
     "vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 1 --pipeline-parallel-size 1 --max-model-len 16384 "
     "--kv-cache-memory-bytes 21474836480 --kv-cache-dtype auto --block-size 16 --max-num-seqs 1024 "
     "--max-num-batched-tokens 8192",
     "gpu=h100"},
    {"gpt-oss-20b", "engine=sglang gpu=h100 context=32k concurrency=8",
     "python3 -m sglang.launch_server --model-path openai/gpt-oss-20b --tp-size 1 --pp-size 1 --context-length 32768 "
     "--mem-fraction-static 0.874 --kv-cache-dtype auto --page-size 1 --max-running-requests 4096",
     "gpu=h100 concurrency=8"},
    {"qwen2.5-32b", "engine=llamacpp gpu=rtx-4090 gpus=2 context=32768 kv_dtype=q8_0 split=41,23 weight_dtype=q4_0",
     "llama-server -m qwen2.5-32b.gguf -c 32768 -np 1 -ngl 999 -ctk q8_0 -ctv q8_0 -fa auto -b 2048 -ub 512 -ts 41,23",
     "gpu=rtx-4090 gpus=2 weight_dtype=q4_0"},
    /* partial offload: 20 of 33 layers (the output layer one of them) on the GPU, KV in host memory */
    {"llama-3.1-8b", "engine=llamacpp gpu=rtx-4090 context=8192 n_gpu_layers=20 no_kv_offload=true weight_dtype=q4_k_m",
     "llama-server -m llama-3.1-8b.gguf -c 8192 -np 1 -ngl 20 -nkvo -ctk f16 -ctv f16 -fa auto -b 2048 -ub 512",
     "gpu=rtx-4090 weight_dtype=q4_k_m"},
    {"qwen3-30b-a3b", "engine=llamacpp gpu=rtx-4090 context=32768 n_cpu_moe=12 kv_dtype=q8_0 weight_dtype=q4_k_m",
     "llama-server -m qwen3-30b-a3b.gguf -c 32768 -np 1 -ngl 999 --n-cpu-moe 12 -ctk q8_0 -ctv q8_0 -fa auto -b 2048 "
     "-ub 512",
     "gpu=rtx-4090 weight_dtype=q4_k_m"},
    /* vLLM's LoRA slots, every flag written */
    {"llama-3.1-8b", "gpu=h100 context=8192 max_loras=4 max_lora_rank=64",
     "vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 1 --pipeline-parallel-size 1 --max-model-len 8192 "
     "--gpu-memory-utilization 0.92 --kv-cache-dtype auto --block-size 16 --max-num-seqs 1024 "
     "--max-num-batched-tokens 8192 --enable-lora --max-loras 4 --max-lora-rank 64",
     "gpu=h100"},
    /* -ot: the experts of layers 10-29 to host memory by name (quoted: the shell would read the pattern) */
    {"qwen3-30b-a3b",
     "engine=llamacpp gpu=rtx-4090 context=32768 override_tensor=blk\\.(1[0-9]|2[0-9])\\.ffn_.*_exps=CPU "
     "weight_dtype=q4_k_m",
     "llama-server -m qwen3-30b-a3b.gguf -c 32768 -np 1 -ngl 999 -ot 'blk\\.(1[0-9]|2[0-9])\\.ffn_.*_exps=CPU' "
     "-ctk f16 -ctv f16 -fa auto -b 2048 -ub 512",
     "gpu=rtx-4090 weight_dtype=q4_k_m"},
    /* data parallelism (docs/engines.md, "Data parallelism"): vLLM's ranks, SGLang's DP attention inside tp */
    {"deepseek-v3", "gpu=h200 dp=8 context=32k concurrency=64",
     "vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 1 --pipeline-parallel-size 1 --data-parallel-size 8 "
     "--max-model-len 32768 --gpu-memory-utilization 0.92 --kv-cache-dtype auto --block-size 64 --max-num-seqs 1024 "
     "--max-num-batched-tokens 8192",
     "gpu=h200 concurrency=64"},
    {"deepseek-v3", "engine=sglang gpu=h200 tp=8 dp=8 dp_attention=true context=32k",
     "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 --pp-size 1 --dp-size 8 "
     "--enable-dp-attention --context-length 32768 --mem-fraction-static 0.857 --kv-cache-dtype auto --page-size 1 "
     "--max-running-requests 4096",
     "gpu=h200"},
    /* expert parallelism (docs/engines.md, "Expert parallelism"): vLLM's EPLB redundant experts in
     * --eplb-config's JSON, SGLang's --ep-size tp */
    {"deepseek-v3", "gpu=h200 dp=8 expert_parallel=true redundant_experts=32 context=32k",
     "vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 1 --pipeline-parallel-size 1 --data-parallel-size 8 "
     "--enable-expert-parallel --enable-eplb --eplb-config '{\"num_redundant_experts\":32}' --max-model-len 32768 "
     "--gpu-memory-utilization 0.92 --kv-cache-dtype auto --block-size 64 --max-num-seqs 1024 "
     "--max-num-batched-tokens 8192",
     "gpu=h200"},
    {"deepseek-v3", "engine=sglang gpu=h200 tp=8 dp=8 dp_attention=true expert_parallel=true redundant_experts=8 "
     "context=32k",
     "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 --pp-size 1 --dp-size 8 "
     "--enable-dp-attention --ep-size 8 --ep-num-redundant-experts 8 --context-length 32768 --mem-fraction-static "
     "0.857 --kv-cache-dtype auto --page-size 1 --max-running-requests 4096",
     "gpu=h200"},
    /* Ollama: its environment; the model is `ollama run`'s, given apart */
    {"llama-3.1-8b", "engine=ollama gpu=rtx-4090 context=8192 n_seq=2 kv_dtype=q8_0 flash_attn=on weight_dtype=q4_k_m",
     "OLLAMA_CONTEXT_LENGTH=8192 OLLAMA_NUM_PARALLEL=2 OLLAMA_KV_CACHE_TYPE=q8_0 OLLAMA_FLASH_ATTENTION=1 ollama serve",
     "gpu=rtx-4090 weight_dtype=q4_k_m"},
    {"llama-3.1-8b", "engine=trtllm gpu=h100 context=8k",
     "trtllm-serve meta-llama/Llama-3.1-8B --tp_size 1 --pp_size 1 --max_seq_len 8192 --max_batch_size 2048 "
     "--max_num_tokens 8192 --kv_cache_free_gpu_memory_fraction 0.9",
     "gpu=h100"},
};

START_TEST(emit_and_read_back)
{
    const struct emit_case *c = &cases[_i];
    struct kvp_settings s, back, kept;
    struct kvp_deploy d, d2;
    struct kvp_fit f, f2;
    struct kvp_buf b = {0}, ignored = {0};
    struct kvp_error err = {0};
    char line[1024], model[256], *argv[64], *nl;
    int argc;

    load();
    settings_of(c->settings, &s);
    fit_of(c->model, &s, &d, &f);
    ck_assert_kvp_ok(kvp_emit_command(kvp_catalog_find(cat, c->model), &d, &f, &b, &err), err);
    ck_assert_ptr_nonnull(nl = strchr(b.data, '\n'));
    snprintf(line, sizeof line, "%.*s", (int)(nl - b.data), b.data);
    ck_assert_str_eq(line, c->command);
    argc = split_words(line, argv, 64);
    ck_assert_kvp_ok(test_from_command((const char *const *)argv, argc, &back, model, sizeof model, &ignored,
                                               &err), err);
    ck_assert_uint_eq(ignored.len, 0);
    settings_of(c->kept, &kept);
    kvp_settings_overlay(&back, &kept);
    fit_of(!model[0] || strstr(model, ".gguf") ? c->model : kvp_catalog_find(cat, model)->name, &back, &d2, &f2);
    ck_assert_uint_eq(d2.n_batch, d.n_batch);
    ck_assert_uint_eq(f2.num_blocks, f.num_blocks);
    ck_assert_uint_eq(f2.kv_tokens, f.kv_tokens);
    ck_assert_uint_eq(f2.block_size, f.block_size);
    ck_assert(f2.max_concurrency == f.max_concurrency);
    ck_assert_int_eq(f2.fits, f.fits);
    kvp_buf_release(&b);
    kvp_buf_release(&ignored);
    unload();
}
END_TEST

/* Flags that size memory and that kvplan does not model are refused by
 * name; flags that do not size memory are listed as ignored; a program
 * that is no engine, and a command without a model, are errors. */
START_TEST(commands_refused_and_ignored)
{
    static const struct {
        const char *line, *msg;
    } bad[] = {
        {"python3 -m sglang.launch_server --model-path m --enable-lora --max-loras-per-batch 4",
         "--enable-lora: it changes the memory, and kvplan models vLLM's LoRA only"},
        {"vllm serve m --enable-lora --fully-sharded-loras", "--fully-sharded-loras: it changes the memory"},
        {"vllm serve m --cpu-offload-gb 10", "--cpu-offload-gb: it changes the memory"},
        {"vllm serve m --enable-expert-parallel --all2all-backend deepep_low_latency",
         "--all2all-backend deepep_low_latency: its all-to-all buffers change the memory"},
        {"python3 -m sglang.launch_server --model-path m --tp 8 --enable-deepep-moe",
         "--enable-deepep-moe: it changes"},
        {"python3 -m sglang.launch_server --model-path m --tp 8 --ep-size none", "--ep-size none: a positive count"},
        {"trtllm-serve m --tp_size 8 --ep_size 8", "--ep_size: it changes the memory"},
        {"vllm serve m --eplb-config '{\"num_redundant_experts\":32'", "did not find expected ',' or '}'"},
        {"llama-server -m f.gguf -ot exps=CUDA0", "-ot exps=CUDA0: 'exps=CUDA0': only =CPU (host memory) is modelled"},
        {"llama-server -m f.gguf -ot exps", "-ot exps: 'exps': want PATTERN=BUFFER, e.g. exps=CPU"},
        {"vllm serve m --quantization awq", "--quantization awq: a quantized checkpoint"},
        {"vllm serve m --tensor-parallel-size two", "--tensor-parallel-size two:"},
        {"ollama list", "'ollama': not an engine command kvplan reads"},
        {"OLLAMA_GPU_OVERHEAD=1073741824 ollama serve", "OLLAMA_GPU_OVERHEAD: it changes the memory"},
        {"CUDA_VISIBLE_DEVICES=0", "no engine command after '--'"},
        {"python3 -m http.server", "not an engine kvplan reads"},
        {"vllm serve --port 8000", "the vllm command names no model"},
    };
    struct kvp_settings s;
    struct kvp_buf ignored = {0};
    struct kvp_error err = {0};
    char line[256], model[128], *argv[32];
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        int argc;
        snprintf(line, sizeof line, "%s", bad[i].line);
        argc = split_words(line, argv, 32);
        ck_assert_int_ne(test_from_command((const char *const *)argv, argc, &s, model, sizeof model, &ignored,
                                                   &err), KVP_OK);
        ck_assert_msg(strstr(err.msg, bad[i].msg), "%s: %s", bad[i].line, err.msg);
    }
    kvp_buf_release(&ignored); /* what the refused commands listed before failing */
    snprintf(line, sizeof line, "vllm serve m --port 8000 --host 0.0.0.0 --trust-remote-code --max-model-len=4096 "
             "--tp 2 --kv-cache-dtype bfloat16");
    ck_assert_kvp_ok(test_from_command((const char *const *)argv, split_words(line, argv, 32), &s, model,
                                               sizeof model, &ignored, &err), err);
    ck_assert_str_eq(model, "m");
    ck_assert_str_eq(ignored.data, "--port, --host, --trust-remote-code");
    ck_assert_str_eq(s.value[kvp_setting_find("context")], "4096");
    ck_assert_str_eq(s.value[kvp_setting_find("tp")], "2");
    ck_assert_str_eq(s.value[kvp_setting_find("kv_dtype")], "bf16");
    ck_assert_str_eq(s.value[kvp_setting_find("engine")], "vllm");
    kvp_buf_release(&ignored);
    /* the environment before the program: Ollama's settings; another engine's noted as ignored */
    snprintf(line, sizeof line, "env CUDA_VISIBLE_DEVICES=0,1 OLLAMA_CONTEXT_LENGTH=16384 OLLAMA_FLASH_ATTENTION=false "
             "ollama run m --verbose");
    ck_assert_kvp_ok(test_from_command((const char *const *)argv, split_words(line, argv, 32), &s, model,
                                       sizeof model, &ignored, &err), err);
    ck_assert_str_eq(model, "m");
    ck_assert_str_eq(s.value[kvp_setting_find("engine")], "ollama");
    ck_assert_str_eq(s.value[kvp_setting_find("context")], "16384");
    ck_assert_str_eq(s.value[kvp_setting_find("flash_attn")], "off");
    ck_assert_str_eq(ignored.data, "CUDA_VISIBLE_DEVICES, --verbose");
    kvp_buf_release(&ignored);
    snprintf(line, sizeof line, "VLLM_USE_V1=1 vllm serve m");
    ck_assert_kvp_ok(test_from_command((const char *const *)argv, split_words(line, argv, 32), &s, model,
                                       sizeof model, &ignored, &err), err);
    ck_assert_str_eq(ignored.data, "VLLM_USE_V1");
    kvp_buf_release(&ignored);
    /* data parallelism: vLLM's -dp (--data-parallel-size), SGLang's --dp and its DP-attention switch */
    snprintf(line, sizeof line, "vllm serve m -dp 8 --enable-expert-parallel --enable-eplb --num-redundant-experts 32 "
             "--all2all-backend allgather_reducescatter");
    ck_assert_kvp_ok(test_from_command((const char *const *)argv, split_words(line, argv, 32), &s, model,
                                       sizeof model, &ignored, &err), err);
    ck_assert_str_eq(s.value[kvp_setting_find("expert_parallel")], "true");
    ck_assert_str_eq(s.value[kvp_setting_find("redundant_experts")], "32"); /* 0.11.0's deprecated spelling */
    ck_assert_uint_eq(ignored.len, 0);
    /* SGLang's --ep-size: 1 is none, more is expert parallelism; its legacy --enable-ep-moe the same */
    snprintf(line, sizeof line, "python3 -m sglang.launch_server --model-path m --tp 8 --ep-size 1");
    ck_assert_kvp_ok(test_from_command((const char *const *)argv, split_words(line, argv, 32), &s, model,
                                       sizeof model, &ignored, &err), err);
    ck_assert_uint_eq((s.given >> kvp_setting_find("expert_parallel")) & 1u, 0);
    snprintf(line, sizeof line, "python3 -m sglang.launch_server --model-path m --tp 8 --enable-ep-moe");
    ck_assert_kvp_ok(test_from_command((const char *const *)argv, split_words(line, argv, 32), &s, model,
                                       sizeof model, &ignored, &err), err);
    ck_assert_str_eq(s.value[kvp_setting_find("expert_parallel")], "true");
    snprintf(line, sizeof line, "vllm serve m --data-parallel-size 8");
    ck_assert_kvp_ok(test_from_command((const char *const *)argv, split_words(line, argv, 32), &s, model,
                                               sizeof model, &ignored, &err), err);
    ck_assert_str_eq(s.value[kvp_setting_find("dp")], "8");
    snprintf(line, sizeof line, "python3 -m sglang.launch_server --model-path m --enable-dp-attention --dp 8 --tp 8");
    ck_assert_kvp_ok(test_from_command((const char *const *)argv, split_words(line, argv, 32), &s, model,
                                               sizeof model, &ignored, &err), err);
    ck_assert_str_eq(s.value[kvp_setting_find("dp")], "8");
    ck_assert_str_eq(s.value[kvp_setting_find("dp_attention")], "true");
    kvp_buf_release(&ignored);
}
END_TEST

/* vLLM's and SGLang's --config FILE: the file's flags as if written on the
 * command line, the command line's own winning (its model too); a flag the
 * file holds that kvplan refuses is an error at the file's place. */
START_TEST(config_file_read_first)
{
    static const struct {
        const char *with_file, *flat;
    } same[] = {
        {"vllm serve --config tests/data/engine-args/vllm.yaml",
         "vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 2 --max-model-len 16384 "
         "--gpu-memory-utilization 0.85 --kv-cache-dtype fp8"},
        {"vllm serve --config tests/data/engine-args/vllm.yaml --max-model-len 8192 --tensor-parallel-size 1",
         "vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 1 --max-model-len 8192 "
         "--gpu-memory-utilization 0.85 --kv-cache-dtype fp8"},
        {"vllm serve Qwen/Qwen3-8B --config=tests/data/engine-args/vllm.yaml",
         "vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2 --max-model-len 16384 --gpu-memory-utilization 0.85 "
         "--kv-cache-dtype fp8"},
        {"python3 -m sglang.launch_server --config tests/data/engine-args/sglang.yaml",
         "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp-size 2 --context-length 32768 "
         "--mem-fraction-static 0.8"},
    };
    struct kvp_settings a, b;
    struct kvp_buf ignored = {0};
    struct kvp_error err = {0};
    char line[512], ma[128], mb[128], *argv[32];
    for (size_t i = 0; i < N_ELEMS(same); i++) {
        snprintf(line, sizeof line, "%s", same[i].with_file);
        ck_assert_kvp_ok(test_from_command((const char *const *)argv, split_words(line, argv, 32), &a, ma,
                                                   sizeof ma, &ignored, &err), err);
        snprintf(line, sizeof line, "%s", same[i].flat);
        ck_assert_kvp_ok(test_from_command((const char *const *)argv, split_words(line, argv, 32), &b, mb,
                                                   sizeof mb, &ignored, &err), err);
        ck_assert_str_eq(ma, mb);
        ck_assert_uint_eq(a.given, b.given);
        for (uint32_t r = 0; r < kvp_settings_count(); r++)
            ck_assert_msg(strcmp(a.value[r], b.value[r]) == 0, "%s: %s", same[i].with_file,
                          kvp_setting_at(r)->key);
    }
    kvp_buf_release(&ignored);
    snprintf(line, sizeof line, "vllm serve --config tests/data/engine-args/vllm.yaml");
    ck_assert_kvp_ok(test_from_command((const char *const *)argv, split_words(line, argv, 32), &a, ma,
                                               sizeof ma, &ignored, &err), err);
    ck_assert_str_eq(ignored.data, "--enable-prefix-caching, --port"); /* enforce-eager: false is no flag */
    kvp_buf_release(&ignored);
    /* a switch in the file counts as on the command line: --enable-lora makes --max-loras count */
    snprintf(line, sizeof line, "vllm serve --config tests/data/engine-args/lora.yaml");
    ck_assert_kvp_ok(test_from_command((const char *const *)argv, split_words(line, argv, 32), &a, ma,
                                               sizeof ma, &ignored, &err), err);
    ck_assert_str_eq(a.value[kvp_setting_find("max_loras")], "2");
    kvp_buf_release(&ignored);
    snprintf(line, sizeof line, "vllm serve --config tests/data/engine-args/refused.yaml");
    ck_assert_int_eq(test_from_command((const char *const *)argv, split_words(line, argv, 32), &a, ma,
                                               sizeof ma, &ignored, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.file, "tests/data/engine-args/refused.yaml");
    ck_assert_uint_eq(err.line, 3);
    ck_assert_uint_eq(err.col, 1);
    ck_assert_str_eq(err.msg, "--cpu-offload-gb: it changes the memory, and kvplan does not model it yet");
    kvp_buf_release(&ignored);
    /* the library reads no file: a --config without its text is refused, not read behind the caller */
    snprintf(line, sizeof line, "vllm serve --config tests/data/engine-args/vllm.yaml");
    ck_assert_int_eq(kvp_settings_from_command((const char *const *)argv, split_words(line, argv, 32), NULL, 0, &a,
                                               ma, sizeof ma, &ignored, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "--config tests/data/engine-args/vllm.yaml: the file's text is not given here");
    kvp_buf_release(&ignored);
    snprintf(line, sizeof line, "llama-server -m x.gguf --config y.yaml");
    ck_assert_ptr_null(kvp_command_config_path((const char *const *)argv, split_words(line, argv, 32)));
    snprintf(line, sizeof line, "python3 -m sglang.launch_server --config=s.yaml");
    ck_assert_str_eq(kvp_command_config_path((const char *const *)argv, split_words(line, argv, 32)), "s.yaml");
}
END_TEST

/* Engines without a launch command, and caches an engine's flag cannot take. */
START_TEST(emit_refusals)
{
    static const struct {
        const char *model, *settings, *msg;
    } bad[] = {
        {"llama-3.1-8b", "engine=ideal gpu=h100", "ideal has no launch command to emit"},
        {"llama-3.1-8b", "gpu=h100 kv_dtype=fp8_e5m2 engine=sglang k_dtype=fp8_e5m2", NULL},
    };
    load();
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        struct kvp_settings s;
        struct kvp_deploy d;
        struct kvp_fit f;
        struct kvp_buf b = {0};
        struct kvp_error err = {0};
        settings_of(bad[i].settings, &s);
        fit_of(bad[i].model, &s, &d, &f);
        if (bad[i].msg) {
            ck_assert_int_eq(kvp_emit_command(kvp_catalog_find(cat, bad[i].model), &d, &f, &b, &err),
                             KVP_ERR_UNSUPPORTED);
            ck_assert_msg(strstr(err.msg, bad[i].msg), "%s", err.msg);
        } else {
            ck_assert_kvp_ok(kvp_emit_command(kvp_catalog_find(cat, bad[i].model), &d, &f, &b, &err), err);
            ck_assert_ptr_nonnull(strstr(b.data, "--kv-cache-dtype fp8_e5m2"));
        }
        kvp_buf_release(&b);
    }
    unload();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emit");
    TCase *core = tcase_create("core");
    tcase_set_timeout(core, 60);
    tcase_add_loop_test(core, emit_and_read_back, 0, (int)N_ELEMS(cases));
    tcase_add_test(core, commands_refused_and_ignored);
    tcase_add_test(core, config_file_read_first);
    tcase_add_test(core, emit_refusals);
    suite_add_tcase(s, core);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
