/* check_command.c -- real launch commands, taken from public issue threads,
 * read as settings (kvp_settings_from_command, include/kvplan/settings.h):
 * each gives the settings that the engine's start-up log in the same thread
 * shows it took (vLLM's `args: Namespace(...)` / `non-default args: {...}` /
 * "Maximum concurrency for N tokens", SGLang's `server_args=ServerArgs(...)`
 * / "Rank 0: ... context_len=", llama.cpp's `n_ctx`, `type_k`), a value the
 * engine took by default is not given by the command (kvplan applies the
 * default itself), and the flags listed as ignored are ones that do not size
 * memory. Commands whose flags size memory in ways kvplan does not model are
 * refused, naming the flag.
 *
 * Each command is as posted, continuation lines joined; environment-variable
 * prefixes (CUDA_VISIBLE_DEVICES=0, VLLM_USE_V1=1) and wrappers (docker run
 * ..., uv run ...) are dropped, as noted case by case. */
#include <stdlib.h>
#include <string.h>

#include "kvplan/render.h"
#include "kvplan/settings.h"
#include "testutil.h"

#define MAX_WORDS 64

/* Split line into argv words as a POSIX shell would for these commands:
 * blanks separate words, '...' keeps everything, "..." keeps everything but
 * a backslash before " or \, a backslash outside quotes escapes the next
 * character. The words are written into buf (of size n). Returns the word
 * count, -1 on an unclosed quote or no room. */
static int split_shell(const char *line, char *buf, size_t n, char **argv, int cap)
{
    size_t o = 0;
    int argc = 0;
    const char *p = line;
    while (*p) {
        char quote = 0;
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            break;
        if (argc == cap)
            return -1;
        argv[argc++] = buf + o;
        for (; *p && (quote || (*p != ' ' && *p != '\t' && *p != '\n')); p++) {
            char c = *p;
            if (quote == '\'' ? c == '\'' : quote == '"' ? c == '"' : c == '\'' || c == '"') {
                quote = quote ? 0 : c;
                continue;
            }
            if (c == '\\' && quote != '\'' && p[1] && (!quote || p[1] == '"' || p[1] == '\\'))
                c = *++p;
            if (o + 1 >= n)
                return -1;
            buf[o++] = c;
        }
        if (quote || o + 1 >= n)
            return -1;
        buf[o++] = '\0';
    }
    return argc;
}

START_TEST(split_shell_quotes)
{
    char buf[256], *argv[8];
    ck_assert_int_eq(split_shell("a 'b c' \"d \\\" e\" f\\ g --x=\"y\"", buf, sizeof buf, argv, 8), 5);
    ck_assert_str_eq(argv[0], "a");
    ck_assert_str_eq(argv[1], "b c");
    ck_assert_str_eq(argv[2], "d \" e");
    ck_assert_str_eq(argv[3], "f g");
    ck_assert_str_eq(argv[4], "--x=y");
    ck_assert_int_eq(split_shell("a 'b", buf, sizeof buf, argv, 8), -1);
}
END_TEST

static const struct real_case {
    const char *url;      /* the thread the command and its log come from */
    const char *line;     /* the command as posted (see the header) */
    const char *engine;   /* the engine the program names */
    const char *model;    /* the model the command names */
    const char *logged;   /* "key=value ..." as the log shows them; "key=-": the log shows the engine's default */
    const char *unlogged; /* settings the command gives that the log excerpt does not show */
    const char *ignored;  /* the flags reported ignored, none of which sizes memory */
    const char *refused;  /* or: the refusal names one of these ("A|B") */
} cases[] = {
    /* ---- vLLM ---- */
    {"https://github.com/vllm-project/vllm/pull/12569", /* VLLM_USE_V1=1 dropped */
     "vllm serve neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8 --max-model-len 2048 "
     "--gpu-memory-utilization 0.98",
     "vllm", "neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8",
     "context=2048", /* "Maximum concurrency for 2048 tokens per request: 10.79x" */
     "util=0.98", "", NULL},
    {"https://github.com/vllm-project/vllm/issues/13124",
     "vllm serve /home/lzh/llm_model/Qwen/Qwen2___5-VL-72B-Instruct --dtype auto --host 127.0.0.1 --port 6006 "
     "--tensor-parallel-size 4",
     "vllm", "/home/lzh/llm_model/Qwen/Qwen2___5-VL-72B-Instruct",
     "", /* v0.7.2 `args: Namespace(model_tag='/home/lzh/...', host='127.0.0.1', port=6006, ...` (cut there) */
     "tp=4", "--host, --port", NULL},
    {"https://github.com/vllm-project/vllm/pull/12604",
     "vllm serve /media/data1/sparks_openai_api/hf_models/Qwen2.5-VL-7B-Instruct --tensor-parallel-size 2 "
     "--dtype bfloat16",
     "vllm", "/media/data1/sparks_openai_api/hf_models/Qwen2.5-VL-7B-Instruct",
     "", /* v0.7.1 `args: Namespace(model_tag=..., host=None, port=8000, ...` (cut there) */
     "tp=2", "", NULL},
    {"https://github.com/QwenLM/Qwen3-VL/issues/261",
     "python3 -m vllm.entrypoints.openai.api_server --port 8000 --model /llm_weights/Qwen2-VL-72B-Instruct "
     "--pipeline-parallel-size 2 --tensor-parallel-size 4 --swap-space 16 --gpu-memory-utilization 0.9 "
     "--dtype auto --served-model-name Qwen2-VL-72B-Instruct",
     "vllm", "/llm_weights/Qwen2-VL-72B-Instruct",
     "pp=2", /* "NotImplementedError: Pipeline parallelism is only supported for ...": pp > 1 was taken */
     "tp=4 util=0.9", "--port, --swap-space, --served-model-name", NULL},
    {"https://github.com/vllm-project/vllm/issues/42587", /* the command block is cut in the stored thread: its
                                                            * flags as the log's non-default args give them */
     "vllm serve /root/.cache/modelscope/hub/models/LLM-Research/Meta-Llama-3___1-8B-Instruct --host 127.0.0.1 "
     "--port 19409 --kv-cache-dtype bfloat16",
     "vllm", "/root/.cache/modelscope/hub/models/LLM-Research/Meta-Llama-3___1-8B-Instruct",
     /* v0.14.1 `non-default args: {..., 'kv_cache_dtype': 'bfloat16'}`, "Using max model len 131072" (the
      * model's), "Chunked prefill is enabled with max_num_batched_tokens=8192" (the release's default) */
     "kv_dtype=bf16 context=- max_num_batched_tokens=- tp=- pp=-", "", "--host, --port", NULL},
    {"https://github.com/intel/llm-scaler/issues/129", /* the script's $model and $served_model_name as it sets
                                                         * them; its export lines dropped */
     "python3 -m vllm.entrypoints.openai.api_server --model /llm/models/DeepSeek-R1-Distill-Qwen-14B "
     "--served-model-name DeepSeek-R1-Distill-Qwen-14B --dtype=float16 --enforce-eager --port 8000 --host 0.0.0.0 "
     "--trust-remote-code --disable-sliding-window --gpu-memory-util=0.96 --max-num-batched-tokens=4096 "
     "--disable-log-requests --max-model-len=33000 --block-size 64 --quantization fp8 -tp=1",
     "vllm", "/llm/models/DeepSeek-R1-Distill-Qwen-14B",
     "context=33000", /* "the model's max seq len (33000)" */
     "util=0.96 max_num_batched_tokens=4096 block_size=64 weight_dtype=fp8 tp=1", /* util: argparse's abbreviation */
     "--served-model-name, --enforce-eager, --port, --host, --trust-remote-code, --disable-sliding-window, "
     "--disable-log-requests",
     NULL},
    {"https://github.com/vllm-project/vllm/issues/16570", /* VLLM_USE_V1=0 CUDA_VISIBLE_DEVICES=4,5,6,7 dropped; the
                                                            * posted line wraps inside 8009 and video=0 */
     "vllm serve /data/ps/pretrained_model/Qwen/Qwen2.5-VL-72B-Instruct/ --dtype bfloat16 --port 8009 "
     "--trust-remote-code --served-model-name qwen2vl --tensor-parallel-size 4 --gpu-memory-utilization 0.95 "
     "--max-num-seqs 2 --max-model-len 4096 --limit-mm-per-prompt image=1,video=0",
     "vllm", NULL, NULL, NULL, NULL, "--limit-mm-per-prompt"}, /* v0.7.3 Namespace(... port=8009 ...) */
    {"https://github.com/vllm-project/vllm/issues/15737",
     "python -m vllm.entrypoints.openai.api_server --model Qwen2.5-VL-32B-Instruct --port 8000 --host 0.0.0.0 "
     "--dtype bfloat16 --tensor_parallel_size 2 --limit-mm-per-prompt image=5,video=5",
     "vllm", NULL, NULL, NULL, NULL, "--limit-mm-per-prompt"}, /* v0.8.2 Namespace(... dtype='bfloat16' ...) */
    {"https://github.com/vllm-project/recipes/pull/12",
     "vllm serve /tmp/model/Qwen3-Coder-480B-A35B-Instruct-FP8 --served-model-name Qwen3-Coder-480B-A35B-FP8 -dp=8 "
     "--enable-expert-parallel --enable-auto-tool-choice --tool-call-parser qwen3_coder",
     "vllm", "/tmp/model/Qwen3-Coder-480B-A35B-Instruct-FP8", "context=-", /* "the models's max seq len (262144)" */
     "dp=8 expert_parallel=true", "--served-model-name, --enable-auto-tool-choice, --tool-call-parser", NULL},
    {"https://github.com/vllm-project/vllm/issues/15664", /* CUDA_VISIBLE_DEVICES=0 VLLM_USE_V1=0 dropped */
     "vllm serve Llama-3_3-Nemotron-Super-49B-v1-4bit-GPTQ/ --trust-remote-code -q gptq --max-model-len 32768",
     "vllm", NULL, NULL, NULL, NULL, "-q gptq"},
    /* ---- SGLang ---- */
    {"https://github.com/sgl-project/sglang/issues/7227", /* inside `docker run ... lmsysorg/sglang:blackwell` */
     "python -m sglang.launch_server --model-path Qwen/Qwen3-4B-FP8 --port 8000 --context-length 60000",
     "sglang", "Qwen/Qwen3-4B-FP8",
     "context=60000 util=- kv_dtype=-", /* context_length=60000, mem_fraction_static=0.909 (SGLang's own), auto */
     "", "--port", NULL},
    {"https://github.com/sgl-project/sglang/issues/7883",
     "python -m sglang.launch_server --model-path "
     "/home/zigzagcai/downloaded_huggingface/models--Qwen--Qwen3-8B/snapshots/2069b3fae1114555f3c020c81410e51fa0f656f2",
     "sglang",
     "/home/zigzagcai/downloaded_huggingface/models--Qwen--Qwen3-8B/snapshots/2069b3fae1114555f3c020c81410e51fa0f656f2",
     /* context_length=None, mem_fraction_static=0.874, page_size=1, tp_size=1, pp_size=1, kv_cache_dtype='auto' */
     "context=- util=- block_size=- tp=- pp=- kv_dtype=-", "", "", NULL},
    {"https://github.com/sgl-project/sglang/issues/3765",
     "python -m sglang.launch_server --model-path /root/sdb2/DeepSeek-R1-Distill-Qwen-32B --context-length 32768 "
     "--tensor-parallel-size 2 --chunked-prefill-size 4096 --enable-p2p-check --host 172.16.21.155 --port 8020 "
     "--mem-fraction-static 0.5",
     "sglang", "/root/sdb2/DeepSeek-R1-Distill-Qwen-32B",
     "context=32768 util=0.5 kv_dtype=-", /* context_length=32768, mem_fraction_static=0.5, kv_cache_dtype='auto' */
     "tp=2", "--chunked-prefill-size, --enable-p2p-check, --host, --port", NULL},
    {"https://github.com/sgl-project/sglang/pull/210",
     "python -m sglang.launch_server --model-path /path/to/bagel_mixtral_AWQ --port 30000 --tp 2",
     "sglang", "/path/to/bagel_mixtral_AWQ",
     "tp=2 context=-", /* "Rank 0: ... context_len=32768", "Rank 1: ...": two ranks, the model's context */
     "", "--port", NULL},
    {"https://github.com/sgl-project/sglang/pull/210", /* the PR's second command */
     "python -m sglang.launch_server --model-path /path/to/bagel_mixtral_AWQ --port 30000 --tp 2 --context-length 8192",
     "sglang", "/path/to/bagel_mixtral_AWQ",
     "tp=2 context=8192", /* "Rank 0: max_total_num_token=135505, max_prefill_num_token=22584, context_len=8192" */
     "", "--port", NULL},
    {"https://github.com/sgl-project/sglang/issues/4048",
     "python -m sglang.launch_server --model-path /models/deepseek-ai/deepseek-r1 --host 0.0.0.0 --port 8100 "
     "--tensor-parallel-size 8 --mem-fraction-static 0.9 --trust-remote-code --context-length 163840 "
     "--chunked-prefill-size 4096 --served-model-name DeepSeek-R1-Sglang-160k",
     "sglang", "/models/deepseek-ai/deepseek-r1",
     "", /* "[TP5] Input length (160062 tokens) exceeds the maximum allowed length (59862 tokens)" */
     "tp=8 util=0.9 context=163840",
     "--host, --port, --trust-remote-code, --chunked-prefill-size, --served-model-name", NULL},
    {"https://github.com/sgl-project/sglang/issues/4895",
     "python3 -m sglang.launch_server --model-path  /llm/model/google/gemma-3-27b-it-int4-awq/ --host 0.0.0.0 "
     "--port 30000 --trust-remote-code --context-length 4096",
     "sglang", "/llm/model/google/gemma-3-27b-it-int4-awq/",
     /* context_length=4096, kv_cache_dtype='auto', mem_fraction_static=0.88 (SGLang's own), page_size=1, tp_size=1 */
     "context=4096 kv_dtype=- util=- block_size=- tp=-", "", "--host, --port, --trust-remote-code", NULL},
    /* ---- llama.cpp ---- */
    {"https://github.com/ggml-org/llama.cpp/issues/11681",
     "./llama-server --model models/deepseek-v3-q2_k_xs-00001-of-00005.gguf --alias full --host 0.0.0.0 --port 55055 "
     "--ctx-size 0 --cache-type-k q5_0 --slot-save-path \"saved_slots.kvc\" --threads 94 --threads-http 12 "
     "--parallel 6 --mirostat 2 --mirostat-ent 5.7 --mirostat-lr 0.14",
     "llamacpp", "models/deepseek-v3-q2_k_xs-00001-of-00005.gguf",
     /* the report with its log: "run with `--ctx-size 0 --parallel 6` ... it divides the total ctx by 6", the
      * model's 163840 cells over 6 sequences; the K cache's type is not in the stored excerpt */
     "context=- n_seq=6", "k_dtype=q5_0",
     "--alias, --host, --port, --slot-save-path, --threads, --threads-http, --mirostat, --mirostat-ent, "
     "--mirostat-lr",
     NULL},
    {"https://github.com/ggml-org/llama.cpp/issues/12414", /* the engine took n_ctx = 4294967295 and failed */
     "./llama.cpp/build/bin/llama-server -t 8 -tb 16 --host 192.168.1.140 --port 20480 "
     "-m ./models/Qwen2.5-14B-Instruct-1M-IQ4_XS.gguf -c -1 -ctk q8_0 -ctv q8_0 -fa -ngl 999",
     "llamacpp", NULL, NULL, NULL, NULL, "-c -1"},
    {"https://github.com/ggml-org/llama.cpp/issues/10186", /* "new slot n_ctx_slot = 8192"; 35 of 88 layers */
     "/llama-server --model Mistral-Large-Instruct-2407-IQ3_XXS.gguf -c 8192 -ngl 35",
     "llamacpp", "Mistral-Large-Instruct-2407-IQ3_XXS.gguf", "context=8192", "n_gpu_layers=35", "", NULL},
    {"https://github.com/ggml-org/llama.cpp/issues/11200", /* "kv_size = 32768, ... type_k = 'q8_0', type_v = 'q8_0'" */
     "llama-server -a qwenv25coder-32b --host 0.0.0.0 --port 8081 -b 512 -ub 256 -ts 10,6 --threads 8 -ngl 99 "
     "-c 32768 --flash-attn --cache-type-k q8_0 --cache-type-v q8_0 -m qwen2.5-coder:32b-instruct-q8_0.gguf "
     "-md qwen2.5-coder:1.5b-instruct-q8_0.gguf -devd CUDA1 -ngld 99 --draft-max 10 --draft-min 4 --top-k 4",
     "llamacpp", NULL, NULL, NULL, NULL, "-ngl 99|-md"},
};

/* The row of key (must exist). */
static int row_of(const char *key)
{
    int row = kvp_setting_find(key);
    ck_assert_msg(row >= 0, "no setting '%s'", key);
    return row;
}

/* Check "key=value ..." against s: each value as given ("-": not given);
 * the rows named are added to *mask. */
static void check_pairs(const char *url, const char *pairs, const struct kvp_settings *s, uint64_t *mask)
{
    char buf[512], *save = NULL;
    snprintf(buf, sizeof buf, "%s", pairs);
    for (char *kv = strtok_r(buf, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(kv, '=');
        int row;
        ck_assert_ptr_nonnull(eq);
        *eq = '\0';
        row = row_of(kv);
        if (strcmp(eq + 1, "-") == 0) {
            ck_assert_msg(!((s->given >> row) & 1u), "%s: %s given (%s), the log shows the engine's default", url,
                          kv, s->value[row]);
            continue;
        }
        ck_assert_msg((s->given >> row) & 1u, "%s: %s not given", url, kv);
        ck_assert_msg(strcmp(s->value[row], eq + 1) == 0, "%s: %s is '%s', the log shows '%s'", url, kv,
                      s->value[row], eq + 1);
        *mask |= 1ull << row;
    }
}

/* The refusal's message names one of "A|B" first (followed by ':' or ' '). */
static bool names_one(const char *msg, const char *alternatives)
{
    char buf[128], *save = NULL;
    snprintf(buf, sizeof buf, "%s", alternatives);
    for (char *a = strtok_r(buf, "|", &save); a; a = strtok_r(NULL, "|", &save))
        if (strncmp(msg, a, strlen(a)) == 0 && (msg[strlen(a)] == ':' || msg[strlen(a)] == ' '))
            return true;
    return false;
}

START_TEST(real_commands)
{
    const struct real_case *c = &cases[_i];
    struct kvp_settings s;
    struct kvp_buf ignored = {0};
    struct kvp_error err = {0};
    char words[2048], *argv[MAX_WORDS], model[256];
    uint64_t mask = 1u; /* the engine row */
    enum kvp_status st;
    int argc;

    argc = split_shell(c->line, words, sizeof words, argv, MAX_WORDS);
    ck_assert_int_gt(argc, 0);
    st = test_from_command((const char *const *)argv, argc, &s, model, sizeof model, &ignored, &err);
    if (c->refused) {
        ck_assert_msg(st != KVP_OK, "%s: not refused", c->url);
        ck_assert_msg(names_one(err.msg, c->refused), "%s: '%s' names none of %s", c->url, err.msg, c->refused);
        kvp_buf_release(&ignored);
        return;
    }
    ck_assert_kvp_ok(st, err);
    ck_assert_str_eq(s.value[row_of("engine")], c->engine);
    ck_assert_str_eq(model, c->model);
    check_pairs(c->url, c->logged, &s, &mask);
    check_pairs(c->url, c->unlogged, &s, &mask);
    ck_assert_msg(s.given == mask, "%s: rows given %#llx, expected %#llx", c->url, (unsigned long long)s.given,
                  (unsigned long long)mask);
    ck_assert_str_eq(ignored.len ? ignored.data : "", c->ignored);
    kvp_buf_release(&ignored);
}
END_TEST

/* The spellings the real commands above use, one by one: what each engine's
 * parser makes of them. */
START_TEST(engine_spellings)
{
    static const struct {
        const char *line, *key, *value, *ignored; /* value NULL: the row is not given */
    } ok[] = {
        {"vllm serve m --dtype half", "weight_dtype", NULL, ""}, /* 16-bit: what kvplan sizes */
        {"vllm serve m --dtype=float16", "weight_dtype", NULL, ""},
        {"python3 -m sglang.launch_server --model-path m --dtype bfloat16", "weight_dtype", NULL, ""},
        {"llama-server -m f.gguf -c 0", "context", NULL, ""}, /* 0 = loaded from model */
        {"llama-server -m f.gguf --ctx-size 0 -np 2", "n_seq", "2", ""},
        {"vllm serve m --gpu-memory-util=0.96", "util", "0.96", ""}, /* argparse's abbreviation */
        {"vllm serve m --max-model 4096", "context", "4096", ""},
        {"python3 -m sglang.launch_server --model-path m --mem-frac 0.8", "util", "0.8", ""},
        {"vllm serve m -tp=2", "tp", "2", ""},
        {"python3 -m sglang.launch_server --model-path m --tensor-parallel-size 4", "tp", "4", ""},
        {"python3 -m sglang.launch_server --model-path m --pipeline-parallel-size 2", "pp", "2", ""},
        {"trtllm-serve m --tp_size 2", "tp", "2", ""},
        {"llama-server -m f.gguf -fa -c 4096", "flash_attn", "true", ""}, /* -fa without a value (before on|off) */
        /* another engine's flag is not this one's: vLLM 0.5's argparse took vllm#6211's `--max-seq-len 63040` for
         * --max-seq-len-to-capture (TRT-LLM's --max_seq_len is the context) */
        {"python3 -m vllm.entrypoints.openai.api_server --dtype float16 --trust-remote-code --model "
         "DeepSeek-Coder-V2-Lite-Instruct --port 9000 --host 0.0.0.0 --tensor-parallel-size 2 --max-seq-len 63040 "
         "--max-model-len 30720",
         "context", "30720", "--trust-remote-code, --port, --host, --max-seq-len"},
        {"vllm serve m --max-seq-len 63040", "context", NULL, "--max-seq-len"},
        {"vllm serve m --ctx-size 4096", "context", NULL, "--ctx-size"},
        {"llama-server -m f.gguf --max-model-len 4096", "context", NULL, "--max-model-len"},
        /* ngram drafts from the prompt on the CPU: no draft weights, KV or lookahead slots (docs/engines.md) */
        {"vllm serve m --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 5, "
         "\"prompt_lookup_max\": 4}'", "context", NULL, "--speculative-config"},
        /* EPLB's redundant experts in --eplb-config's JSON, the window keys sizing nothing */
        {"vllm serve m -dp 8 --enable-expert-parallel --enable-eplb --eplb-config '{\"window_size\": 1000, "
         "\"num_redundant_experts\": 32}'", "redundant_experts", "32", ""},
        {"python3 -m sglang.launch_server --model-path m --tp 8 --ep-size 8 --ep-num-redundant-experts 0",
         "expert_parallel", "true", ""},
        /* vLLM's LoRA: --enable-lora is one slot, --max-loras more; without --enable-lora no LoRA */
        {"vllm serve m --enable-lora --max-lora-rank 64", "max_loras", "1", ""},
        {"vllm serve m --max-loras 4 --enable-lora", "max_loras", "4", ""},
        {"vllm serve m --max-loras 4", "max_loras", NULL, "--max-loras (without --enable-lora)"},
        /* -ngl auto: the default, --fit's (common/arg.cpp: -1) */
        {"llama-server -m f.gguf -ngl auto -c 4096", "n_gpu_layers", NULL, ""},
        /* each -ot adds its pairs to the list (common/arg.cpp) */
        {"llama-server -m f.gguf -ot 'blk\\.[0-9]\\.ffn_.*_exps=CPU' --override-tensor exps=CPU", "override_tensor",
         "blk\\.[0-9]\\.ffn_.*_exps=CPU,exps=CPU", ""},
    };
    static const struct {
        const char *line, *msg;
    } bad[] = {
        {"vllm serve m --dtype float32", "--dtype float32: weights in 32 bits are not modelled"},
        {"vllm serve m --max-num 8", "--max-num: an abbreviation of more than one flag (--max-num-"},
        {"llama-server -m f.gguf -md d.gguf", "-md: it changes the memory"},
        {"llama-server -m f.gguf --model-draft d.gguf", "--model-draft: it changes the memory"},
        {"vllm serve m --speculative-model d", "--speculative-model: it changes the memory"},
        {"vllm serve m --speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'",
         "--speculative-config: method 'mtp' adds a draft's weights and KV cache"},
        {"vllm serve m --speculative-config '{\"model\": \"yuhuili/EAGLE-LLaMA3.1-Instruct-8B\"}'",
         "--speculative-config: method '?' adds a draft's weights"},
        {"python3 -m sglang.launch_server --model-path m --speculative-algorithm EAGLE",
         "--speculative-algorithm: it changes the memory"},
        {"python3 -m sglang.launch_server --model-path m --speculative-draft-model-path d",
         "--speculative-draft-model-path: it changes the memory"},
    };
    struct kvp_settings s;
    struct kvp_buf ignored = {0};
    struct kvp_error err = {0};
    char words[512], *argv[MAX_WORDS], model[128];
    for (size_t i = 0; i < N_ELEMS(ok); i++) {
        int argc = split_shell(ok[i].line, words, sizeof words, argv, MAX_WORDS), row = row_of(ok[i].key);
        ck_assert_int_gt(argc, 0);
        ck_assert_kvp_ok(test_from_command((const char *const *)argv, argc, &s, model, sizeof model,
                                                   &ignored, &err), err);
        ck_assert_str_eq(ignored.len ? ignored.data : "", ok[i].ignored);
        kvp_buf_release(&ignored);
        if (!ok[i].value)
            ck_assert_msg(!((s.given >> row) & 1u), "%s: %s given", ok[i].line, ok[i].key);
        else
            ck_assert_msg((s.given >> row) & 1u && strcmp(s.value[row], ok[i].value) == 0, "%s: %s is '%s'",
                          ok[i].line, ok[i].key, s.value[row]);
    }
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        int argc = split_shell(bad[i].line, words, sizeof words, argv, MAX_WORDS);
        ck_assert_int_gt(argc, 0);
        ck_assert_int_ne(test_from_command((const char *const *)argv, argc, &s, model, sizeof model,
                                                   &ignored, &err), KVP_OK);
        ck_assert_msg(strstr(err.msg, bad[i].msg) == err.msg, "%s: %s", bad[i].line, err.msg);
    }
    kvp_buf_release(&ignored);
}
END_TEST

static Suite *command_suite(void)
{
    Suite *s = suite_create("command");
    TCase *core = tcase_create("core");
    tcase_add_test(core, split_shell_quotes);
    tcase_add_loop_test(core, real_commands, 0, (int)N_ELEMS(cases));
    tcase_add_test(core, engine_spellings);
    suite_add_tcase(s, core);
    return s;
}

int main(void)
{
    return run_suite(command_suite());
}
