/* gguf_mix.c -- llama.cpp file types. PLACEHOLDER until the issue-15-gguf
 * branch lands its llama_tensor_get_type rules: every 2-D tensor gets the
 * file type's base type. */
#include <string.h>
#include <strings.h>

#include "kvplan/model.h"

static const struct {
    uint32_t ftype;
    const char *name;
    enum kvp_dtype base;
} ftypes[] = {
    {0, "F32", KVP_DTYPE_F32},      {1, "F16", KVP_DTYPE_F16},      {2, "Q4_0", KVP_DTYPE_Q4_0},
    {3, "Q4_1", KVP_DTYPE_Q4_1},    {7, "Q8_0", KVP_DTYPE_Q8_0},    {8, "Q5_0", KVP_DTYPE_Q5_0},
    {9, "Q5_1", KVP_DTYPE_Q5_1},    {10, "Q2_K", KVP_DTYPE_Q2_K},   {11, "Q3_K_S", KVP_DTYPE_Q3_K},
    {12, "Q3_K_M", KVP_DTYPE_Q3_K}, {13, "Q3_K_L", KVP_DTYPE_Q3_K}, {14, "Q4_K_S", KVP_DTYPE_Q4_K},
    {15, "Q4_K_M", KVP_DTYPE_Q4_K}, {16, "Q5_K_S", KVP_DTYPE_Q5_K}, {17, "Q5_K_M", KVP_DTYPE_Q5_K},
    {18, "Q6_K", KVP_DTYPE_Q6_K},   {30, "IQ4_XS", KVP_DTYPE_IQ4_XS}, {32, "BF16", KVP_DTYPE_BF16},
};
#define N_FTYPES (sizeof ftypes / sizeof ftypes[0])

bool kvp_gguf_ftype_from_name(const char *s, uint32_t *ftype)
{
    if (strncasecmp(s, "mostly_", 7) == 0)
        s += 7;
    for (size_t i = 0; i < N_FTYPES; i++)
        if (strcasecmp(s, ftypes[i].name) == 0) {
            *ftype = ftypes[i].ftype;
            return true;
        }
    return false;
}

const char *kvp_gguf_ftype_name(uint32_t ftype)
{
    for (size_t i = 0; i < N_FTYPES; i++)
        if (ftypes[i].ftype == ftype)
            return ftypes[i].name;
    return NULL;
}

void kvp_gguf_mix_begin(const struct kvp_model *m, struct kvp_gguf_mix_state *state)
{
    (void)m;
    memset(state, 0, sizeof *state);
}

enum kvp_dtype kvp_gguf_mix_type(const struct kvp_model *m, uint32_t ftype, const struct kvp_wtensor *t,
                                 struct kvp_gguf_mix_state *state)
{
    (void)m;
    (void)state;
    if (t->role == KVP_WR_VECTOR || t->rows == 1)
        return KVP_DTYPE_F32;
    for (size_t i = 0; i < N_FTYPES; i++)
        if (ftypes[i].ftype == ftype)
            return ftypes[i].base;
    return KVP_DTYPE_F16;
}
