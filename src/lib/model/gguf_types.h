/* gguf_types.h -- GGUF's metadata value types, as ggml's gguf.h numbers them
 * (enum gguf_type): the reader (model_gguf.c) and the writer (gguf_write.c)
 * share them. Internal. */
#ifndef KVPLAN_GGUF_TYPES_H
#define KVPLAN_GGUF_TYPES_H

enum gguf_type {
    GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3,
    GGUF_UINT32 = 4, GGUF_INT32 = 5, GGUF_FLOAT32 = 6, GGUF_BOOL = 7,
    GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_UINT64 = 10, GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12, GGUF_TYPE_COUNT
};

#endif
