/* fakegpu.c -- a GPU device for the CPU-only llama.cpp the oracle runs, so
 * that -ngl, --n-cpu-moe and --no-kv-offload place tensors on something
 * other than the CPU (tests/oracle/probe.c, PROBE_NGL).
 *
 * llama.cpp decides placement from the device list alone
 * (llama_model_base::load_tensors, llama_kv_cache's per-layer buft); the
 * probe loads with no_alloc, so nothing runs on the device: its buffers
 * are plain host memory under the buffer type "FAKE0". The buffer type
 * applies ggml-cuda's allocation rules (alignment 128; a quantized
 * tensor whose rows are not a multiple of 512 values gets one padded row:
 * ggml_backend_cuda_buffer_type_get_alloc_size) and the device
 * ggml-cuda's offload rule (an op with a batch of 32 or more runs on the
 * GPU: ggml_backend_cuda_device_offload_op), so the breakdown per buffer
 * type is what a CUDA build would report for the same layout. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend-impl.h"

#define FAKE_ALIGN 128
#define FAKE_ROW_PAD 512
#define FAKE_MIN_BATCH 32

static struct ggml_backend_device fake_dev;

static const char *buft_name(ggml_backend_buffer_type_t buft)
{
    (void)buft;
    return "FAKE0";
}

static ggml_backend_buffer_t buft_alloc(ggml_backend_buffer_type_t buft, size_t size)
{
    /* host memory from the CPU buffer type, relabelled as this type's */
    ggml_backend_buffer_t cpu = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), size);
    return cpu ? ggml_backend_buffer_init(buft, cpu->iface, cpu->context, size) : NULL;
}

static size_t buft_align(ggml_backend_buffer_type_t buft)
{
    (void)buft;
    return FAKE_ALIGN;
}

static size_t buft_alloc_size(ggml_backend_buffer_type_t buft, const struct ggml_tensor *t)
{
    size_t size = ggml_nbytes(t);
    (void)buft;
    if (ggml_is_quantized(t->type) && t->ne[0] % FAKE_ROW_PAD != 0)
        size += ggml_row_size(t->type, FAKE_ROW_PAD - t->ne[0] % FAKE_ROW_PAD);
    return size;
}

static bool buft_is_host(ggml_backend_buffer_type_t buft)
{
    (void)buft;
    return false;
}

static struct ggml_backend_buffer_type fake_buft = {
    {buft_name, buft_alloc, buft_align, NULL, buft_alloc_size, buft_is_host}, &fake_dev, NULL,
};

static const char *dev_name(ggml_backend_dev_t dev)
{
    (void)dev;
    return "FAKE0";
}

static void dev_memory(ggml_backend_dev_t dev, size_t *free_b, size_t *total)
{
    (void)dev;
    *free_b = *total = (size_t)1 << 40;
}

static enum ggml_backend_dev_type dev_type(ggml_backend_dev_t dev)
{
    (void)dev;
    return GGML_BACKEND_DEVICE_TYPE_GPU;
}

static void dev_props(ggml_backend_dev_t dev, struct ggml_backend_dev_props *p)
{
    memset(p, 0, sizeof *p);
    p->name = p->description = dev_name(dev);
    dev_memory(dev, &p->memory_free, &p->memory_total);
    p->type = GGML_BACKEND_DEVICE_TYPE_GPU;
}

static const char *be_name(ggml_backend_t b)
{
    (void)b;
    return "FAKE0";
}

static void be_free(ggml_backend_t b)
{
    free(b);
}

static enum ggml_status be_compute(ggml_backend_t b, struct ggml_cgraph *g)
{
    (void)b, (void)g;
    return GGML_STATUS_FAILED; /* the probe never computes (no_alloc) */
}

static ggml_backend_t dev_init(ggml_backend_dev_t dev, const char *params)
{
    static ggml_guid guid = {0x6b, 0x76, 0x70, 0x6c, 0x61, 0x6e, 0x66, 0x61, 0x6b, 0x65, 0x67, 0x70,
                             0x75, 0x30, 0x30, 0x31};
    ggml_backend_t b = calloc(1, sizeof *b);
    (void)params;
    if (!b)
        return NULL;
    b->guid = &guid;
    b->iface.get_name = be_name;
    b->iface.free = be_free;
    b->iface.graph_compute = be_compute;
    b->device = dev;
    return b;
}

static ggml_backend_buffer_type_t dev_buft(ggml_backend_dev_t dev)
{
    (void)dev;
    return &fake_buft;
}

static bool dev_supports_op(ggml_backend_dev_t dev, const struct ggml_tensor *op)
{
    (void)dev, (void)op;
    return true;
}

static bool dev_supports_buft(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft)
{
    (void)dev;
    return buft == &fake_buft;
}

/* ggml-cuda's get_op_batch_size */
static bool dev_offload_op(ggml_backend_dev_t dev, const struct ggml_tensor *op)
{
    int64_t n;
    (void)dev;
    switch (op->op) {
    case GGML_OP_GET_ROWS: n = 0; break;
    case GGML_OP_MUL_MAT: n = op->ne[1]; break;
    case GGML_OP_MUL_MAT_ID: case GGML_OP_ROPE: case GGML_OP_ROPE_BACK: n = op->ne[2]; break;
    default: n = ggml_nrows(op); break;
    }
    return n >= FAKE_MIN_BATCH;
}

static const char *reg_name(ggml_backend_reg_t reg)
{
    (void)reg;
    return "FAKE";
}

static size_t reg_count(ggml_backend_reg_t reg)
{
    (void)reg;
    return 1;
}

static ggml_backend_dev_t reg_dev(ggml_backend_reg_t reg, size_t i)
{
    (void)reg, (void)i;
    return &fake_dev;
}

static void *reg_proc(ggml_backend_reg_t reg, const char *name)
{
    (void)reg, (void)name;
    return NULL;
}

static struct ggml_backend_reg fake_reg = {GGML_BACKEND_API_VERSION, {reg_name, reg_count, reg_dev, reg_proc}, NULL};

ggml_backend_dev_t kvprobe_fake_gpu(void)
{
    fake_dev.iface.get_name = dev_name;
    fake_dev.iface.get_description = dev_name;
    fake_dev.iface.get_memory = dev_memory;
    fake_dev.iface.get_type = dev_type;
    fake_dev.iface.get_props = dev_props;
    fake_dev.iface.init_backend = dev_init;
    fake_dev.iface.get_buffer_type = dev_buft;
    fake_dev.iface.supports_op = dev_supports_op;
    fake_dev.iface.supports_buft = dev_supports_buft;
    fake_dev.iface.offload_op = dev_offload_op;
    fake_dev.reg = &fake_reg;
    return &fake_dev;
}
