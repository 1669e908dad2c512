// breakdown.cpp -- exact bytes from llama.cpp's C++ memory breakdown (src/llama-ext.h).
#include "llama-ext.h"

extern "C" void kvprobe_breakdown(llama_context *ctx, unsigned long long *model, unsigned long long *context,
                                  unsigned long long *compute) {
    for (const auto &kv : llama_get_memory_breakdown(ctx)) {
        *model += kv.second.model; *context += kv.second.context; *compute += kv.second.compute;
    }
}
