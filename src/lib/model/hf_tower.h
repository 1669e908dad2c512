/* hf_tower.h -- internal: a multimodal Hugging Face config's vision tower
 * and projector, counted from its vision_config into the model's
 * tower_params and tower (model.h). Used by model_hf.c. */
#ifndef KVPLAN_HF_TOWER_H
#define KVPLAN_HF_TOWER_H

#include "kvplan/model.h"
#include "base/ydoc.h"

/* Count the tower of the config `root` (model_type `type`, e.g. "gemma3")
 * whose text model m is already read (m->hidden). No vision_config: nothing.
 * A tower or projector kvplan has no formula for is left out with a
 * warning; a malformed vision_config is an error at its place. */
enum kvp_status kvp_hf_tower_read(struct ydoc *d, yaml_node_t *root, const char *type, struct kvp_model *m,
                                  struct kvp_error *err);

#endif
