/* fuzz_safetensors.c -- libFuzzer harness: a safetensors shard's header
 * (safetensors.c), read as kvp_model_load reads a model folder: a fixed
 * config.json (a 2-layer Llama, hidden 32, vocabulary 64: the corpus's
 * tensors tile it) beside the input as
 * model.safetensors, in build/fuzz/safetensors/. A model that loads goes
 * through the engine (fuzz_engine), so its weights table is priced.
 *
 * Beyond "no crash": spans, claims and totals are the reader's to check
 * (a wrapped sum is a finding through fuzz_engine's checks). */
#include <sys/stat.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ST_DIR "build/fuzz/safetensors"

static const char config[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 32,\n"
    " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 2,\n"
    " \"num_key_value_heads\": 1, \"vocab_size\": 64, \"max_position_embeddings\": 4096,\n"
    " \"torch_dtype\": \"bfloat16\", \"tie_word_embeddings\": false}\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    enum kvp_status st;

    if (!ready) {
        ready = 1;
        mkdir(ST_DIR, 0755);
        fuzz_write(ST_DIR "/config.json", config, sizeof config - 1);
    }
    fuzz_write(ST_DIR "/model.safetensors", data, size);
    st = kvp_model_load(ST_DIR, &m, &err);
    fuzz_check_error(st, &err);
    if (st == KVP_OK)
        fuzz_engine(m, data, size);
    kvp_model_free(m);
    return 0;
}
