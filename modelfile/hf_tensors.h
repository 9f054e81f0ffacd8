/* hf_tensors.h - a checkpoint's safetensors tensors as the tensors llama.cpp's converter
 * writes (names, shapes, types, and the rewrites as struct ns_tensor_src); see hf_model.h. */
#ifndef NS_HF_TENSORS_H
#define NS_HF_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "hf_config.h"
#include "model.h"
#include "safetensors.h"

/* Fill m->tensors / m->n_tensors from the n_files safetensors files (file i is shard i) of a
 * checkpoint described by c; names and sources are allocated in m->hf. *n_mtp receives the
 * MTP layers found (their tensors are blk.<n_layer + i>.*, as the converter numbers them).
 * Returns 0, -ENOMEM, or -EINVAL with one line (a tensor no rule names, a dtype we cannot
 * compute, a shape the rewrite does not fit, an expert missing). */
int ns_hf_tensors_build(struct ns_model *m, const struct ns_hf_config *c,
			struct ns_st_file *const *files, uint32_t n_files, uint32_t *n_mtp,
			char *err, size_t errlen);

#endif
