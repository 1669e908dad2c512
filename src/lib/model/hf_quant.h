/* hf_quant.h -- internal: a Hugging Face quantization_config into the
 * model's struct kvp_wscheme (wquant.h). Used by model_hf.c. */
#ifndef KVPLAN_HF_QUANT_H
#define KVPLAN_HF_QUANT_H

#include "kvplan/model.h"
#include "base/ydoc.h"

struct hf_quant_ctx {
    struct ydoc *d;
    struct kvp_model *m; /* m->dtype is already read: scales of some methods are stored in it */
    struct kvp_error *err;
};

/* Read quantization_config q into c->m->wscheme. A method kvplan does not
 * model leaves the scheme empty and warns; a malformed config is an error at
 * its place. */
enum kvp_status kvp_hf_quant_read(struct hf_quant_ctx *c, yaml_node_t *q);

#endif
