/* deploy.h -- engine profiles: how a real serving engine sizes its KV cache
 * on real GPUs, and what then fits.
 *
 * A profile is a version-pinned set of rules (page size, padding, grouping,
 * budget formula, defaults) read from the engine's source; docs/engines.md
 * gives each rule with the source it follows. Pure functions: no I/O, no
 * allocation; checked 64-bit byte arithmetic.
 *
 *     struct kvp_deploy d;
 *     kvp_deploy_init(&d, KVP_ENGINE_VLLM, model);
 *     d.gpu_memory = 25318913474;            // 23.58 GiB as the RTX 3090 reports it
 *     d.util = 0.90;
 *     d.weights_memory = 16093857628;        // measured, or 0 to compute
 *     d.activation_memory = 2222651392;       // measured; 0 and not *_given: estimated
 *     d.non_torch_memory = 375809638;
 *     d.context = 20000;
 *     struct kvp_fit fit;
 *     if (kvp_fit_compute(model, &d, &fit, &err) != KVP_OK) ...
 *     // fit.num_blocks == 1952, fit.kv_tokens == 31232, fit.max_concurrency == 1.5616
 *
 * Every figure is per GPU (one tensor- and pipeline-parallel rank): engines
 * size each rank alone and take the minimum across ranks. Under data
 * parallelism (d.dp > 1) the figures are one DP rank's; the deployment holds
 * dp times its tokens and requests. d.release picks a
 * named release (kvp_engine_parse("vllm@0.7.3", ...)); the start-up reserve
 * not given is estimated (kvp_reserve_estimate) and reported in fit.reserve.
 */
#ifndef KVPLAN_DEPLOY_H
#define KVPLAN_DEPLOY_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/kv.h"
#include "kvplan/error.h"
#include "kvplan/format.h"
#include "kvplan/model.h"

enum kvp_engine_id {
    KVP_ENGINE_IDEAL,
    KVP_ENGINE_VLLM,
    KVP_ENGINE_SGLANG,
    KVP_ENGINE_TRTLLM,
    KVP_ENGINE_LLAMACPP,
    KVP_ENGINE_HF_DYNAMIC,
    KVP_ENGINE_HF_STATIC,
    KVP_ENGINE_HF_QUANTIZED,
    KVP_ENGINE_COUNT
};

struct kvp_deploy;

struct kvp_engine_info {
    const char *name;    /* "vllm" */
    const char *version; /* the default release (the newest whose source was read) */
    const char *summary; /* one line */
    uint32_t block_size; /* default tokens per block/page (1 = no paging) */
};

/* Rule switches that differ between the releases of one engine. */
enum kvp_release_rule {
    KVP_REL_VLLM_V0 = 1u << 0,        /* vLLM V0 engine: profiling batch max(max_model_len, 2048),
                                       * "# GPU blocks" log, concurrency = tokens / max_model_len */
    KVP_REL_SGLANG_TP_FRACTION = 1u << 1, /* mem_fraction_static from a tp table (0.88 .. 0.79) */
    KVP_REL_LLAMACPP_PAD_FA = 1u << 2, /* cells padded to 256 with flash attention, 32 without */
    KVP_REL_LLAMACPP_MLA_V = 1u << 3,  /* MLA caches V too (before the V-less cache) */
    KVP_REL_SGLANG_NO_MAMBA = 1u << 4, /* before Mamba/linear-attention hybrids: their architectures are unknown */
    KVP_REL_VLLM_CUDA_GRAPHS = 1u << 5, /* vLLM subtracts its CUDA-graph estimate before the KV budget */
    KVP_REL_LLAMACPP_KQV_GRAPH = 1u << 6, /* llm_build_context's graph (src/llama.cpp llm_build_kqv): the compute
                                           * buffer keeps one hidden row beside the logits, 4 beside KQ */
    KVP_REL_OLLAMA = 1u << 7, /* Ollama's front end over llama-server: it picks the context, the batch and the
                               * streams that it passes (kvp_deploy_ollama) */
};

/* One named release of an engine: the rules kvplan applies for it. */
struct kvp_release {
    enum kvp_engine_id engine;
    const char *version; /* "0.11.0", "b6182" */
    const char *date;    /* the month it was tagged, "2025-10", bounded by the source; "-": not read */
    const char *source;  /* the source it was read from, one line */
    double util;         /* default memory fraction (vLLM utilization, TRT-LLM free
                          * fraction; 0: the engine's rule, as SGLang's; 1: none) */
    uint32_t rules;      /* KVP_REL_* */
};

KVP_API const struct kvp_engine_info *kvp_engine_info(enum kvp_engine_id e);
KVP_API bool kvp_engine_from_name(const char *s, enum kvp_engine_id *out);

/* The releases kvplan knows, newest of each engine first; *n gets the count. */
KVP_API const struct kvp_release *kvp_releases(uint32_t *n);
/* The release deploy d runs: d->release, else the engine's default. */
KVP_API const struct kvp_release *kvp_deploy_release(const struct kvp_deploy *d);
/* The engine and release as the user names them: "vllm" "0.21.0", and
 * "ollama" "0.32.15" for llamacpp's release "ollama-0.32.15". */
KVP_API void kvp_release_names(enum kvp_engine_id e, const struct kvp_release *r, const char **engine,
                               const char **version);
/* Parse "vllm", "vllm@0.11.0" or "llama.cpp@b6182" into engine and release
 * index (UINT32_MAX: the engine's default). "ollama" and "ollama@0.32.15" are
 * llamacpp's releases "ollama-..." (the newest when none is named): Ollama
 * runs llama-server. Errors: an unknown engine or a release kvplan does not
 * know (the message lists the known ones). */
KVP_API enum kvp_status kvp_engine_parse(const char *s, enum kvp_engine_id *engine, uint32_t *release,
                                 struct kvp_error *err);

#define KVP_MAX_STAGES 64
/* GB/s of host memory the roofline assumes when none is given: two channels of DDR5-6400
 * (2 x 8 B x 6.4 GT/s = 102.4), a desktop's best; servers' 8 to 12 channels give 300 to 600. */
#define KVP_HOST_BANDWIDTH_ASSUMED 102
/* ggml-cuda's offload_op (ggml-cuda.cu ggml_backend_cuda_device_offload_op): an op of this many
 * tokens or more whose weight is in host memory runs on the GPU, the weight copied over first */
#define KVP_OFFLOAD_MIN_BATCH 32

struct kvp_deploy {
    enum kvp_engine_id engine;
    uint32_t release;           /* index into kvp_releases(); UINT32_MAX = the engine's default */
    uint64_t gpu_memory;        /* bytes per GPU as the device reports it */
    uint32_t compute_capability; /* the GPU's CUDA major * 10 + minor (kvp_gpu); 0 = not known */
    uint64_t host_link;         /* the GPU's link to host memory, bytes/s one way (kvp_gpu); 0 = not known */
    bool unified_memory;        /* the GPU's memory is the host's (kvp_gpu: Apple silicon) */
    uint32_t host_bandwidth;    /* GB/s the CPU reads host memory at (the roofline of host-resident weights
                                 * and KV); 0 = the GPU's on unified memory, else KVP_HOST_BANDWIDTH_ASSUMED */
    uint32_t n_gpus;            /* GPUs in all: kvp_deploy_gpus unless layers are split (llama.cpp) */
    uint32_t tp, pp;            /* tensor and pipeline parallel degrees (of one data-parallel rank) */
    uint32_t dp;                /* data-parallel ranks, each its own KV pool and scheduler (1 = none);
                                 * SGLang with dp_attention: attention DP inside the tp GPUs */
    bool dp_attention;          /* SGLang --enable-dp-attention: dp divides tp, attention split by tp / dp */
    bool expert_parallel;       /* vLLM --enable-expert-parallel, SGLang --ep-size tp: each GPU holds whole routed
                                 * experts, (E + redundant) / EP of them, EP = dp x tp (vLLM) or tp (SGLang) */
    uint32_t redundant_experts; /* EPLB's extra physical experts per MoE layer (vLLM num_redundant_experts,
                                 * SGLang --ep-num-redundant-experts); 0 = none */
    uint32_t max_loras;         /* vLLM --enable-lora --max-loras: LoRA slots on each GPU; 0 = no LoRA */
    uint32_t max_lora_rank;     /* vLLM --max-lora-rank; 0 = its default, 16 */
    double util;                /* 0 = the engine's default (SGLang: from its rule) */
    struct kvp_format k, v;     /* cache formats */
    struct kvp_wstore w;        /* weights as stored (zero), a format, or a llama.cpp file type */
    bool w_auto;                /* weight_dtype auto: w is the first rung of kvp_weights_ladder that fits */
    uint8_t w_auto_rejected;    /* auto: how many rungs do not fit (all of them: w is the last) */
    uint64_t weights_memory;    /* per GPU; 0 = computed: weights / (tp * pp) */
    uint64_t activation_memory; /* per GPU: activation peak, CUDA graphs, compute buffers */
    uint64_t non_torch_memory;  /* per GPU: NCCL, cuBLAS workspace, context */
    uint64_t cuda_graph_memory; /* per GPU: CUDA graphs subtracted before the KV budget */
    bool activation_given, non_torch_given; /* else estimated (kvp_reserve_estimate); CUDA graphs are
                                              * estimated only for a release that subtracts them */
    uint64_t kv_memory;         /* per GPU KV budget given outright (vLLM --kv-cache-memory); 0 = derive */
    uint64_t cpu_offload;       /* host memory per GPU for an offloaded KV tier (TRT-LLM host cache,
                                 * vLLM/LMCache CPU offload); 0 = none */
    uint64_t context;           /* tokens per request (vLLM max_model_len, llama.cpp -c) */
    uint64_t concurrency;       /* requests that must fit at `context` (0 = none asked) */
    uint32_t block_size;        /* 0 = the engine's default */
    uint64_t max_batched_tokens; /* vLLM max_num_batched_tokens (sliding/chunked reach, profiling batch);
                                  * 0 = the release's default */
    uint64_t max_num_seqs;      /* vLLM/SGLang sequences per step (profiling run); 0 = the release's default */
    uint32_t n_ubatch;          /* llama.cpp micro-batch (SWA reach), default 512, at most n_batch */
    uint32_t n_batch;           /* llama.cpp logical batch, default 2048 */
    uint32_t n_seq;             /* llama.cpp n_seq_max (streams), default 1 */
    bool kv_unified;            /* llama.cpp: one stream shared by all sequences */
    bool swa_full;              /* llama.cpp --swa-full: SWA layers get full size */
    bool mla_v;                 /* llama.cpp builds before 2026-01-24 also cached V for MLA */
    int flash_attn;             /* llama.cpp -fa: -1 auto (on where it can), 0 off, 1 on */
    uint32_t split[KVP_MAX_STAGES]; /* llama.cpp: layers per device (0s = even split) */
    int32_t n_gpu_layers;       /* llama.cpp -ngl: layers on the GPUs counted from the output end, the output
                                 * layer the last (n_layers + 1 = all); -1 = all, the default */
    int32_t n_cpu_moe;          /* llama.cpp --n-cpu-moe: the expert tensors of the first N layers stay in host
                                 * memory; -1 = all (--cpu-moe); 0 = none, the default */
    uint32_t cpu_moe_first;     /* where those N layers start: 0 (the option); --fit's overrides start later
                                 * (kvp_fit_llamacpp_auto), -1 then meaning up to the last layer */
    char override_tensor[128];  /* llama.cpp -ot as given ("exps=CPU"); "" = none */
    uint64_t cpu_experts[KVP_MAX_LAYERS / 64]; /* -ot: bit i, layer i's expert tensors in host memory */
    bool no_kv_offload;         /* llama.cpp --no-kv-offload: every layer's KV in host memory */
    uint32_t ollama_auto;       /* Ollama: KVP_OLLAMA_* of what its front end chose, not the user */
};

/* What Ollama's front end chose for a deployment (kvp_deploy_ollama). */
enum {
    KVP_OLLAMA_CONTEXT = 1u << 0, /* num_ctx by total VRAM (4096 / 32768 / 262144), at most the model's */
    KVP_OLLAMA_BATCH = 1u << 1,   /* num_batch (-b and -ub) by context and headroom */
    KVP_OLLAMA_PARALLEL = 1u << 2, /* np 1: an architecture Ollama serves one request at a time */
};

/* The GPUs deployment d uses: dp x tp x pp (vLLM, SGLang without DP
 * attention, and the engines that run replicas), tp x pp under SGLang's DP
 * attention (its DP ranks share the tp GPUs). */
KVP_API uint64_t kvp_deploy_gpus(const struct kvp_deploy *d);

/* The expert-parallel group of deployment d (docs/engines.md, "Expert
 * parallelism"): dp x tp under vLLM (fused_moe/config.py
 * FusedMoEParallelConfig.make: ep_size = the tp flattened across dp), tp
 * under SGLang; 0 without expert_parallel. */
KVP_API uint64_t kvp_deploy_ep(const struct kvp_deploy *d);

/* The routed experts of one MoE layer on the busiest GPU under expert
 * parallelism: ceil((n_experts + redundant) / EP), whole experts (vLLM
 * fused_moe determine_expert_map gives the first (E + R) % EP ranks one
 * more); 0 without it or for a model without routed experts. */
KVP_API uint64_t kvp_deploy_experts_per_gpu(const struct kvp_model *m, const struct kvp_deploy *d);

/* "EP 8 (36 of 256 + 32 redundant routed experts a GPU), " for a deployment
 * under expert parallelism, "" otherwise: the words fit, table and check put
 * beside dp and tp. */
KVP_API const char *kvp_deploy_ep_text(const struct kvp_model *m, const struct kvp_deploy *d, char *buf, size_t n);

/* Defaults of engine e for model m: one GPU, tp = pp = dp = 1, the model's dtype
 * for cache and weights, the engine's block size and memory fraction. */
KVP_API void kvp_deploy_init(struct kvp_deploy *d, enum kvp_engine_id e, const struct kvp_model *m);

struct kvp_device_kv {
    uint32_t layers;    /* layers with their KV on this device */
    uint32_t model_layers; /* llama.cpp: repeating layers whose weights are on this device */
    uint64_t weights_bytes; /* llama.cpp: its model buffers (the GGUF's tensors padded as the buffer pads them) */
    uint64_t expert_bytes;  /* llama.cpp: of weights_bytes, the routed experts' tensors */
    uint64_t k_bytes;   /* sum of K tensor bytes (ggml_nbytes) */
    uint64_t v_bytes;
    uint64_t buffer_bytes; /* allocated: tensors padded to the buffer alignment */
    uint64_t cache_buffer[2]; /* buffer_bytes of the non-SWA [0] and SWA [1] caches */
    uint64_t rs_bytes;  /* recurrent state (llama_memory_recurrent, f32), a buffer of its own */
};

/* llama.cpp's caches: [0] non-SWA, [1] SWA (iSWA models have both). */
struct kvp_cache_sum {
    uint32_t layers;
    uint64_t k_bytes, v_bytes;
};

/* The start-up reserve the engine takes before the KV budget, per GPU: each
 * part as given, or estimated from the model's shapes and the settings
 * (src/lib/engine/profile_reserve.c; docs/engines.md gives the derivation and how
 * far it was off on real start-up logs). */
struct kvp_reserve {
    uint64_t activation;   /* the profiling run's activation peak (llama.cpp: compute buffers) */
    uint64_t non_torch;    /* NCCL, cuBLAS workspaces, CUDA context */
    uint64_t cuda_graph;   /* CUDA graphs: as given, else estimated where the release subtracts them */
    bool activation_est, non_torch_est, cuda_graph_est; /* estimated, not given */
    uint64_t profile_tokens; /* tokens of the profiling run (vLLM max_num_batched_tokens; llama.cpp n_ubatch) */
    uint64_t profile_seqs;   /* sequences whose logits it samples */
    uint64_t per_token;      /* activation bytes per profiled token */
    uint64_t logits;         /* the sampler's logits copies of profile_seqs (llama.cpp: the f32 output) */
    uint64_t uncertainty;    /* how far the estimate may be off (0 when all given) */
};

/* Estimate the parts of the reserve d does not give (pure; no errors). */
KVP_API void kvp_reserve_estimate(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_reserve *r);

struct kvp_fit {
    enum kvp_engine_id engine;
    const struct kvp_release *release; /* the release whose rules were applied */
    struct kvp_reserve reserve;    /* what was subtracted before the KV budget */
    char refused[512];             /* the engine's own error when it would not start ("" = starts) */
    uint32_t block_size;           /* tokens per block/page used */
    double util;                   /* memory fraction used */
    uint64_t kv_bytes_per_token_per_gpu; /* what one more token of one request costs on the busiest GPU */
    uint64_t request_bytes;        /* one request of `context` tokens under the engine's rounding, per GPU */
    uint64_t kv_bytes_required;    /* concurrency x request_bytes (llama.cpp: its allocation), per GPU */
    uint64_t weights_bytes;        /* per GPU, as the engine holds them */
    uint64_t weights_padding;      /* of which the engine adds at load (vLLM's MXFP4 expert padding; estimated) */
    char weights_load[192];        /* what it pads, in words ("" = the checkpoint's bytes as stored) */
    uint64_t lora_bytes;           /* vLLM: of weights_bytes, the LoRA slots' A and B stacks on the busiest GPU */
    uint64_t kv_budget_bytes;      /* per GPU, what the engine gives the KV cache */
    uint64_t kv_pool_bytes;        /* per GPU, what it allocates for it (blocks x page) */
    uint64_t kv_tokens;            /* token capacity (vLLM's logged figure) */
    uint64_t num_blocks;
    uint32_t n_groups;             /* vLLM KV cache groups; 1 elsewhere */
    double max_concurrency;        /* requests of `context` tokens that fit */
    uint64_t max_context;          /* longest request that fits `concurrency` (or 1) requests */
    uint64_t offload_tokens;       /* tokens the CPU tier holds: cpu_offload / bytes per token */
    double offload_concurrency;    /* requests of `context` tokens parked in the CPU tier */
    bool fits;                     /* weights + reserve + required KV fit in memory */
    uint64_t free_bytes;           /* per GPU memory left after weights, reserve and required KV (0 if short) */
    uint64_t short_bytes;          /* how much is missing when it does not fit */
    /* llama.cpp: cells and per-device tensors; SGLang: the sizes of its full and SWA token pools */
    uint64_t cells, swa_cells;
    uint32_t cell_pad;             /* llama.cpp: cells are padded to a multiple of this (256, or 32) */
    bool windows_ignored;          /* llama.cpp runs this family without its sliding window */
    uint32_t n_stream;
    uint32_t n_seq;                /* sequences (slots): -np, or --concurrency under llama.cpp */
    uint32_t n_devices;
    struct kvp_device_kv device[KVP_MAX_STAGES];
    /* llama.cpp: what stays in host memory (-ngl below all layers, --n-cpu-moe, --no-kv-offload, and the
     * token embeddings always): the layers whose KV is there, its KV buffer and model buffers */
    struct kvp_device_kv host;
    uint32_t gpu_layers;           /* llama.cpp: -ngl as applied, of n_layers + 1 (the output layer the last) */
    bool output_on_gpu;            /* llama.cpp: the output layer is on the last GPU */
    bool weights_exact;            /* llama.cpp: per-device weights from the GGUF tensor table, to the byte;
                                    * else estimated in proportion to the layers */
    uint64_t host_compute;         /* llama.cpp: the host's compute buffer (the graph's inputs), estimated */
    struct kvp_cache_sum cache[2]; /* llama.cpp's caches; SGLang's token pools, [1] the SWA pool */
    /* Mamba/linear-attention hybrids: the state pool beside the token pool
     * (SGLang's MambaPool; vLLM V0's MambaCacheManager, taken before the KV budget) */
    uint64_t state_slots;         /* SGLang max_mamba_cache_size; vLLM V0 the CUDA-graph batch of max_num_seqs */
    uint64_t state_bytes_per_req; /* mamba_cache_per_req: every recurrent layer's conv + ssm state on the rank */
    uint64_t state_conv_bytes, state_ssm_bytes; /* the pool's tensors: (slots + 1) states per layer */
    uint64_t max_running;         /* SGLang max_running_requests (0 elsewhere) */
};

/* Lower bounds from the roofline, per GPU, for `batch` sequences at d->context. */
struct kvp_roofline {
    uint64_t weight_bytes;  /* active weights one decode step reads on a GPU (routed experts: top-k; of an
                             * untied token embedding only its rows, so none) */
    uint64_t kv_bytes;      /* live KV of the batch one step reads on a GPU */
    /* llama.cpp with tensors in host memory (-ngl, --n-cpu-moe, --no-kv-offload): what stays there */
    uint64_t host_weight_bytes; /* active weights of the step in host memory, read by the CPU */
    uint64_t host_kv_bytes;     /* live KV in host memory, read by the CPU */
    uint64_t stream_bytes;      /* the host's weight tensors, whole, that ggml copies to the GPU for an op of
                                 * 32 tokens or more (ggml-cuda offload_op; the token embedding's rows stay) */
    double host_bandwidth;      /* bytes/s of the host terms */
    bool host_bandwidth_assumed; /* KVP_HOST_BANDWIDTH_ASSUMED: none given, the GPU's memory not unified */
    bool streamed;              /* batch >= 32 over a known link: the step copies stream_bytes instead */
    double host_s;              /* of tpot: the host's share (its reads, or the copies over host_link) */
    double tpot_s;          /* time per output token >= (weights + KV) / bandwidth (+ host_s) */
    double tokens_per_s;    /* batch / tpot */
    double prefill_flops;   /* one prompt of `context` tokens: 2 x active params x T + attention */
    double prefill_compute_s; /* FLOPs / (peak x tp) */
    uint64_t ubatch;         /* llama.cpp: the prompt's micro-batch, min(n_ubatch, n_batch, context) */
    double prefill_stream_s; /* llama.cpp: the prompt's micro-batches of 32 tokens or more x stream_bytes / link */
    double ttft_s;          /* time to first token >= max(prefill_compute_s, prefill_stream_s) */
};

/* bandwidth in bytes/s and peak FLOP/s of one GPU; the host's from d (host_bandwidth, host_link,
 * unified_memory). */
KVP_API enum kvp_status kvp_roofline(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t batch,
                             double bandwidth, double peak_flops, struct kvp_roofline *r, struct kvp_error *err);

/* Size the KV cache of m under d's engine rules. Errors: a format the engine
 * does not support (with the engine's own refusal where it has one), a
 * model shape it cannot run, settings the engine rejects as invalid
 * (KVP_ERR_USAGE, in its words), overflow. A deployment that is valid but
 * would not start (the KV cache cannot hold one request) returns KVP_OK with
 * fit->refused set to the engine's message and fits false. */
KVP_API enum kvp_status kvp_fit_compute(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *fit,
                                struct kvp_error *err);

/* weight_dtype auto: the stored forms d's engine serves, least lossy first,
 * each rung fewer bytes than the one before for m (a rung that is not is
 * left out: an int4 checkpoint has no fp8 rung). llama.cpp (or a GGUF
 * model): as stored, then the file types q8_0, q6_k, q5_k_m, q4_k_m, q3_k_m,
 * q2_k; the other engines: as stored, fp8, int4:group=128 (AWQ/GPTQ W4A16).
 * Writes *n <= KVP_WLADDER_MAX rungs. Errors: kvp_weights_compute's. */
#define KVP_WLADDER_MAX 8
KVP_API enum kvp_status kvp_weights_ladder(const struct kvp_model *m, const struct kvp_deploy *d,
                                           struct kvp_wstore *out, uint32_t *n, struct kvp_error *err);

/* d->w = the first rung of the ladder with which d's target (concurrency
 * requests of context tokens) fits under kvp_fit_compute, else the last
 * rung; sets w_auto and w_auto_rejected (the rungs that do not fit). A rung the
 * engine refuses (an unsupported format) counts as not fitting. */
KVP_API enum kvp_status kvp_deploy_pick_weights(const struct kvp_model *m, struct kvp_deploy *d,
                                                struct kvp_error *err);

/* Ollama's choices where the user made none (Ollama v0.32.15, which runs
 * llama-server b10488 with -c num_ctx x np, -np np, -b and -ub num_batch):
 * num_ctx by the VRAM of every GPU together (server/routes.go Serve: >= 47
 * GiB 262144, >= 23 GiB 32768, else 4096), at most the model's trained
 * context (server/sched.go effectiveContext); num_batch (server/sched.go
 * automaticGenerationBatch) 2048 past 32768 tokens, 1024 past 4096, else 512,
 * a step down while Ollama's own prediction (PredictServerVRAM: the weights +
 * 2 x layers x fewest KV heads x hidden / heads x tokens x 2 bytes) leaves
 * less headroom than 40% (2048) or 25% (1024) of the memory or the batch's
 * surcharge (2 GiB, 768 MiB) past 80% of it; on CUDA without flash attention
 * 512, or 256 on 8 GiB or less past 4096 tokens; np 1, whatever is given,
 * for the architectures it serves one request at a time (server/sched.go:
 * mllama, qwen3vl(moe), qwen35(moe), qwen3next, lfm2(moe), nemotron_h*).
 * context_given and batch_given: the user's. Sets d->ollama_auto. */
KVP_API void kvp_deploy_ollama(const struct kvp_model *m, struct kvp_deploy *d, bool context_given,
                               bool batch_given);

/* The inverse questions, for a target concurrency at d->context: the fewest
 * GPUs (grown by powers of two, up to max_gpus), and the lowest memory
 * fraction (to 0.001) that fit. 0 when none does. At each GPU count the
 * fewest-GPUs search tries pure TP and, for an MLA model under vLLM (dp
 * ranks of tp 1) or SGLang (DP attention, dp = tp), data parallelism, DP
 * first, and keeps the one whose deployment holds the most requests in all;
 * *tp_out and *dp_out get its degrees (dp 1: pure TP). The requests counted
 * against the target are the whole deployment's (dp x one rank's). */
KVP_API enum kvp_status kvp_fit_min_gpus(const struct kvp_model *m, const struct kvp_deploy *d, uint32_t max_gpus,
                                 uint32_t *tp_out, uint32_t *dp_out, struct kvp_error *err);
KVP_API enum kvp_status kvp_fit_min_util(const struct kvp_model *m, const struct kvp_deploy *d, double *util_out,
                                 struct kvp_error *err);

/* The inverse questions llama.cpp's --fit answers, asked of any engine, each found by one bisection over
 * the engine's whole fit at each value (src/lib/engine/deploy.c bisect):
 *  - memory_context: the longest context of d's requests (d->concurrency of them) the memory holds, the
 *    model's trained limit lifted as RoPE scaling lifts it (vLLM's derived max_model_len, llama.cpp's
 *    n_ctx_train warning), up to llama.cpp's uint32_t n_ctx; 0 when one token does not fit.
 *  - model_context: the model's limit (config max_position_embeddings); model_binds: it is the lower of
 *    the two, and past it the model needs RoPE scaling of rope_factor = memory_context / model_context
 *    (YaRN's factor over the original length) to run memory_context.
 *  - llama.cpp with a GPU memory, at d->context: max_gpu_layers, the most -ngl (of n_layers + 1) that
 *    fits with d's other settings; min_cpu_moe (an MoE model), the fewest --n-cpu-moe that fits with
 *    every layer on the GPUs; -1 when none does. host_at_*: the host memory at that setting (host model
 *    and KV buffers, recurrent state, host compute buffer), the least host RAM of each way to fit.
 * Errors: the deployment's (kvp_fit_compute's) where every value is refused alike. */
struct kvp_fit_limits {
    uint64_t memory_context;
    uint64_t edge_free, edge_short; /* memory left at memory_context, short at one token more */
    uint64_t search_top;          /* the search's upper end */
    uint64_t model_context;
    bool model_binds;
    double rope_factor;           /* 0 unless model_binds */
    int64_t max_gpu_layers;       /* -1: none fits (or not llama.cpp) */
    uint64_t host_at_max_gpu_layers;
    int64_t min_cpu_moe;          /* -1: none fits (or a dense model, or not llama.cpp) */
    uint64_t host_at_min_cpu_moe;
};
KVP_API enum kvp_status kvp_fit_limits(const struct kvp_model *m, const struct kvp_deploy *d,
                                       struct kvp_fit_limits *l, struct kvp_error *err);

/* What llama.cpp's own --fit (on by default in the npm-3.22.1 build: common/fit.cpp
 * common_params_fit_impl, -fitt the margin, 1024 MiB, -fitc the least context, 4096) chooses
 * for -c when it is not given, one device and one sequence, from kvplan's projections of the
 * device memory (model + KV + compute buffers) against the free memory (gpu_memory less the
 * non-torch reserve): step 1, the model's n_ctx_train leaves the margin: unchanged; step 2, the
 * context linear between n_ctx_min and n_ctx_train on the memory target, rounded down to 256;
 * else at n_ctx_min step 3 fills layers back to front by false position (-ngl; a MoE model's
 * layers "dense-only", their experts in host memory, but the first GPU layer's), and step 4 (a MoE
 * model whose dense tensors all fit) turns dense-only layers full front to back; its last try, part
 * of one more layer's experts (LAYER_FRACTION_UP, GATE, ATTN), is not reproduced. ABORT: -ngl or
 * --n-cpu-moe given (llama.cpp: "already set by user, abort"; it runs with them). step NONE: not
 * modelled (another engine, no GPU memory, several GPUs or sequences). With n_ctx given (the
 * user's -c, 0 = unset) step 2 changes nothing ("context size set by user") and steps 3 and 4 run at
 * it. */
enum kvp_params_fit_step {
    KVP_PARAMS_FIT_NONE,
    KVP_PARAMS_FIT_UNCHANGED,
    KVP_PARAMS_FIT_CONTEXT,
    KVP_PARAMS_FIT_LAYERS,
    KVP_PARAMS_FIT_EXPERTS,
    KVP_PARAMS_FIT_ABORT,
};
struct kvp_params_fit {
    enum kvp_params_fit_step step;
    bool ctx_given;         /* the user's -c: step 2 keeps it */
    uint64_t n_ctx;
    int64_t used_at_max, used_at_min; /* projected device bytes at n_ctx_train and at n_ctx_min */
    uint32_t n_gpu_layers;  /* LAYERS, EXPERTS: the -ngl it sets, of n_layers + 1 */
    uint32_t cpu_moe_first; /* LAYERS, EXPERTS: the experts of layers [cpu_moe_first, n_layers) in host memory
                             * (n_layers: none); the layers under -ngl are there whole */
    int64_t used;           /* LAYERS, EXPERTS: projected device bytes with them */
};
KVP_API enum kvp_status kvp_fit_llamacpp_auto(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t margin,
                                              uint32_t n_ctx_min, uint64_t n_ctx, struct kvp_params_fit *p,
                                              struct kvp_error *err);

#endif
