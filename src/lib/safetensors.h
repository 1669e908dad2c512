/* safetensors.h -- internal: stored bytes per dtype from the safetensors
 * headers in a folder (safetensors.c). */
#ifndef KVPLAN_SAFETENSORS_H
#define KVPLAN_SAFETENSORS_H

#include "kvplan/model.h"

/* Fill m->wtable from the *.safetensors headers in dir (m->n_layers must be
 * set: later layers are left out). No shards: KVP_OK, table untouched. A bad
 * header: an error at its file:line:col (lines of the JSON header). */
enum kvp_status kvp_safetensors_read(const char *dir, struct kvp_model *m, struct kvp_error *err);

#endif
