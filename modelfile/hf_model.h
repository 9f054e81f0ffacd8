/* hf_model.h - a Hugging Face safetensors checkpoint opened as a struct ns_model (model.h).
 *
 * MODEL may be the checkpoint directory, its model.safetensors, its
 * model.safetensors.index.json, or any shard the index names. The directory must hold
 * config.json. What comes out is what llama.cpp's convert_hf_to_gguf.py would write for it
 * (with --outtype of the checkpoint's own dtype), without writing anything:
 *  - metadata: config.json (hf_config.h) and tokenizer.json (hf_vocab.h) as GGUF keys, held
 *    in shard 0's struct ns_gguf (whose n_tensors is 0: the model index has the tensors);
 *  - tensors: the converter's names and shapes (hf_tensors.c). Matrices keep the file's
 *    type (BF16, F16, F32) and stream by row window from the safetensors files; the rows a
 *    converter permutes are a row mapping (struct ns_row_run), the values it changes (1-D
 *    tensors, ssm_conv1d, the shared-expert gate: F32 as the converter writes them) a
 *    struct ns_tensor_src op applied by ns_model_read_rows.
 * A problem (no config.json, a corrupt or short header, an index naming a missing shard, a
 * tensor past its file's end, a dtype we cannot compute, a tensor of the wrong shape) is one
 * line "FILE: ..." and -EINVAL/-ENOENT. */
#ifndef NS_HF_MODEL_H
#define NS_HF_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* A directory, a *.safetensors file or a *.safetensors.index.json (by name and type). */
bool ns_hf_is_checkpoint(const char *path);

/* vocab: read tokenizer.json and friends into the metadata (ns_model_open_flags). */
int ns_hf_open(const char *path, bool vocab, struct ns_model **out, char *err, size_t errlen);

/* What a checkpoint model owns besides the struct ns_model arrays: tensor names, sources,
 * runs and column maps, freed together. */
void ns_hf_store_free(struct ns_hf_store **s);
/* n bytes (zeroed) owned by the store; NULL when out of memory. */
void *ns_hf_store_alloc(struct ns_hf_store *s, size_t n);

#endif
