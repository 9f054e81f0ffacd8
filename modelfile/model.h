/* model.h - a model as one tensor index over one or more GGUF shards.
 *
 * ns_model_open() accepts a single file or any shard of a split model
 * (NAME-0000K-of-0000N.gguf with split.count / split.no / split.tensors.count): it opens every
 * shard, checks that they belong together, and builds one index whose entries know their shard
 * and absolute offset. Metadata comes from shard 1 (split.no = 0), which carries it all.
 *
 * Ownership: the model owns its shards, names and index; ns_model_close(&m) frees them all and
 * nulls the pointer. Tensor pointers die with the model. */
#ifndef NS_MODEL_H
#define NS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

struct ns_model_tensor {
	const char *name;    /* points into the owning shard's header */
	uint32_t type;
	uint32_t n_dims;
	uint64_t ne[NS_GGUF_MAX_DIMS];
	uint32_t shard;      /* index into ns_model.shards */
	uint64_t file_offset; /* absolute offset inside that shard */
	uint64_t n_elems;
	uint64_t n_rows;     /* ne[1]*ne[2]*ne[3]: rows counted over all leading dims */
	uint64_t row_bytes;
	uint64_t n_bytes;
};

struct ns_model {
	uint32_t n_shards;
	struct ns_gguf **shards;   /* shards[0] holds the metadata */
	uint64_t n_tensors;
	struct ns_model_tensor *tensors; /* in shard order, then file order */
	uint64_t total_file_bytes;       /* sum of shard sizes */
	uint64_t total_tensor_bytes;
	/* open-addressing name index: slots hold tensor index + 1, 0 = empty */
	uint64_t n_slots;
	uint64_t *slots;
};

int ns_model_open(const char *path, struct ns_model **out, char *err, size_t errlen);
void ns_model_close(struct ns_model **m);

const struct ns_model_tensor *ns_model_find(const struct ns_model *m, const char *name);
/* Index of a tensor, or -1. */
int64_t ns_model_find_index(const struct ns_model *m, const char *name);

/* A vocabulary of n_tokens tokens against the tensors it indexes: token_embd.weight and
 * output.weight (where present) must have exactly n_tokens rows, as llama.cpp requires. With
 * fewer tokens the model samples ids no token spells; with more, prompt ids past the rows.
 * Returns 0, or -EINVAL with one line in err naming the file and the tensor. */
int ns_model_check_vocab(const struct ns_model *m, uint64_t n_tokens, char *err, size_t errlen);

/* Metadata of the model (shard 0). */
static inline const struct ns_gguf *ns_model_meta(const struct ns_model *m)
{
	return m->shards[0];
}

#endif
