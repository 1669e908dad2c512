// breakdown.cpp -- exact bytes from llama.cpp's C++ memory breakdown (src/llama-ext.h).
#include <cstdio>
#include <cstring>

#include "llama-ext.h"

// The sums over buffer types, and "NAME=model/context/compute ..." per buffer type into out.
extern "C" void kvprobe_breakdown(llama_context *ctx, unsigned long long *model, unsigned long long *context,
                                  unsigned long long *compute, char *out, size_t n) {
    size_t o = 0;
    out[0] = '\0';
    for (const auto &kv : llama_get_memory_breakdown(ctx)) {
        *model += kv.second.model; *context += kv.second.context; *compute += kv.second.compute;
        if (o < n)
            o += snprintf(out + o, n - o, " %s=%zu/%zu/%zu", ggml_backend_buft_name(kv.first), kv.second.model,
                          kv.second.context, kv.second.compute);
    }
}
