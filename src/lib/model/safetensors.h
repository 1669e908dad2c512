/* safetensors.h -- internal: stored bytes per dtype from the safetensors
 * headers in a folder (safetensors.c). */
#ifndef KVPLAN_SAFETENSORS_H
#define KVPLAN_SAFETENSORS_H

#include "kvplan/model.h"

/* Fill m->wtable from the *.safetensors headers in dir (m->n_layers must be
 * set: later layers are left out). No shards: KVP_OK, table untouched. A bad
 * header: an error at its file:line:col (lines of the JSON header). */
enum kvp_status kvp_safetensors_read(const char *dir, struct kvp_model *m, struct kvp_error *err);

/* Of the safetensors file names names[0..*n), the shards of the model: not
 * consolidated*.safetensors when others are there (Mistral's repos carry
 * both layouts of the same weights). Drops the others in place (freeing
 * them if owned); returns the new *n. */
uint32_t kvp_safetensors_pick(char **names, uint32_t *n, bool owned);

#endif
