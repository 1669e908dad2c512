/* format.h -- storage formats for KV caches and weights, with their exact bytes.
 *
 * A format is an element type plus, for integer quantization, how values are
 * grouped and what metadata each group carries. Bytes always include the
 * metadata: q4_0 is 18 bytes per 32 values (4.5 bits), not 4 bits.
 *
 *     struct kvp_format f;
 *     kvp_format_parse("int2:group=32:axis=channel:residual=128", &f, &err);
 *     kvp_format_parse("q8_0", &f, &err);           // ggml block: 34 B / 32
 *     uint64_t b;
 *     kvp_format_row_bytes(&f, 128, &b, &err);      // one head's row: 136 B
 *     char name[64]; kvp_format_name(&f, name, sizeof name);
 *
 * Format strings: a type name, then optional ':key=value' settings that only
 * the integer types (int8, int4, int2) take:
 *   group=G      values per scale group (default 32)
 *   axis=token   groups run along the channels of one token (default)
 *   axis=channel groups run along G tokens of one channel (KIVI keys)
 *   scale=T      dtype of scale, zero-point and residual: f16 (default), bf16, f32
 *   zp=yes|no    asymmetric (scale + zero point, default) or symmetric (scale)
 *   residual=R   the newest tokens kept in the scale dtype (KIVI); with
 *                axis=channel, R must be a multiple of G
 *   outliers=F   fraction of values kept as fp32 value + int32 index (KVQuant
 *                dense-and-sparse), e.g. 0.01
 * A struct kvp_format is a plain value; nothing to free.
 */
#ifndef KVPLAN_FORMAT_H
#define KVPLAN_FORMAT_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"

enum kvp_dtype {
    KVP_DTYPE_F32,
    KVP_DTYPE_F16,
    KVP_DTYPE_BF16,
    KVP_DTYPE_FP8_E4M3,
    KVP_DTYPE_FP8_E5M2,
    KVP_DTYPE_INT8,
    KVP_DTYPE_INT4,
    KVP_DTYPE_INT2,
    KVP_DTYPE_Q8_0,
    KVP_DTYPE_Q4_0,
    KVP_DTYPE_Q4_1,
    KVP_DTYPE_Q5_0,
    KVP_DTYPE_Q5_1,
    KVP_DTYPE_IQ4_NL,
    KVP_DTYPE_MXFP4,
    KVP_DTYPE_NVFP4,
    /* weight storage only (GGUF files): */
    KVP_DTYPE_Q8_1,
    KVP_DTYPE_Q2_K,
    KVP_DTYPE_Q3_K,
    KVP_DTYPE_Q4_K,
    KVP_DTYPE_Q5_K,
    KVP_DTYPE_Q6_K,
    KVP_DTYPE_Q8_K,
    KVP_DTYPE_IQ2_XXS,
    KVP_DTYPE_IQ2_XS,
    KVP_DTYPE_IQ3_XXS,
    KVP_DTYPE_IQ1_S,
    KVP_DTYPE_IQ3_S,
    KVP_DTYPE_IQ2_S,
    KVP_DTYPE_IQ4_XS,
    KVP_DTYPE_IQ1_M,
    KVP_DTYPE_TQ1_0,
    KVP_DTYPE_TQ2_0,
    KVP_DTYPE_I8,
    KVP_DTYPE_I16,
    KVP_DTYPE_I32,
    KVP_DTYPE_I64,
    KVP_DTYPE_F64,
    KVP_DTYPE_COUNT
};

enum kvp_axis {
    KVP_AXIS_TOKEN,   /* a group is G channels of one token */
    KVP_AXIS_CHANNEL, /* a group is G tokens of one channel */
};

struct kvp_dtype_info {
    const char *name;     /* canonical name, e.g. "q4_0" */
    uint32_t block_elems; /* values per block (1 for plain types) */
    uint32_t block_bits;  /* bits per block, metadata included */
    bool grouped;         /* an integer type that takes group settings */
    int ggml;             /* enum ggml_type (ggml.h), -1 if ggml has none */
};

struct kvp_format {
    enum kvp_dtype dtype;
    /* integer types only: */
    uint32_t group;           /* values per scale group */
    enum kvp_axis axis;
    enum kvp_dtype scale;     /* scale, zero point and residual dtype */
    bool zero_point;
    uint32_t residual;        /* tokens kept in the scale dtype */
    uint32_t outliers_ppm;    /* outlier values per million */
};

/* The constant table entry for d. */
KVP_API const struct kvp_dtype_info *kvp_dtype_info(enum kvp_dtype d);

/* Look a dtype name up (case-insensitive; aliases fp16/half, fp32/float,
 * fp8 = fp8_e4m3, float16, bfloat16, float32). false if unknown. */
KVP_API bool kvp_dtype_from_name(const char *name, enum kvp_dtype *out);

/* The dtype of ggml type id t (a GGUF tensor's type). false if unknown. */
KVP_API bool kvp_dtype_from_ggml(uint32_t t, enum kvp_dtype *out);

/* A plain format of dtype d with the defaults for integer types. */
KVP_API struct kvp_format kvp_format_plain(enum kvp_dtype d);

/* Parse a format string (see above). */
KVP_API enum kvp_status kvp_format_parse(const char *s, struct kvp_format *out, struct kvp_error *err);

/* Canonical string that kvp_format_parse reads back to the same format:
 * defaults are omitted. Returns buf. */
KVP_API const char *kvp_format_name(const struct kvp_format *f, char *buf, uint32_t n);

/* Bytes of one token's row of n values (one head's channels) stored
 * token-wise: codes plus, for grouped types, one scale (and zero point) per
 * group of the row. Block types need n to be a multiple of their block
 * (as llama.cpp demands); an error names both numbers. */
KVP_API enum kvp_status kvp_format_row_bytes(const struct kvp_format *f, uint64_t n, uint64_t *out,
                                     struct kvp_error *err);

/* Bytes of n values stored in the scale dtype (the full-precision residual). */
KVP_API bool kvp_format_residual_bytes(const struct kvp_format *f, uint64_t n, uint64_t *out);

/* Can a paged cache (blocks of N tokens, every token one row of equal
 * bytes) hold f? Not when a token's bytes are not a fixed row of its own:
 * axis=channel groups span G tokens, and a residual keeps the newest tokens
 * in the scale dtype until they age into the format. KVP_ERR_UNSUPPORTED
 * with a message that starts "<which> format '<name>': "; KVP_OK otherwise. */
KVP_API enum kvp_status kvp_format_check_paged(const struct kvp_format *f, const char *which, struct kvp_error *err);

/* Bits per value averaged over a row of n values, metadata included (for display). */
KVP_API double kvp_format_bits_per_value(const struct kvp_format *f, uint64_t n);

#endif
