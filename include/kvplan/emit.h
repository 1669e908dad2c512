/* emit.h -- the launch command of a planned deployment (src/lib/engine/emit.c).
 *
 *     struct kvp_buf b = {0};
 *     if (kvp_emit_command(m, &d, &f, &b, &err) == KVP_OK) fputs(b.data, stdout);
 *
 * `vllm serve`, `python3 -m sglang.launch_server`, `llama-server` or
 * `trtllm-serve` for d->engine, with every flag that changes the memory set
 * to the value the fit f used, release defaults included, so the engine's
 * start-up reproduces the planned pool. One line, then a `#` line naming
 * what has no flag (a reserve kvplan was given, a GGUF file to supply).
 * KVP_ERR_UNSUPPORTED for an engine without a command (ideal, hf-*) or a
 * cache format the engine's flag does not take (vLLM has no q8_0 cache).
 */
#ifndef KVPLAN_EMIT_H
#define KVPLAN_EMIT_H

#include "kvplan/api.h"
#include "kvplan/deploy.h"
#include "kvplan/render.h"

KVP_API enum kvp_status kvp_emit_command(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                                 struct kvp_buf *b, struct kvp_error *err);

#endif
