/* held.h - the HELD tensors of a model (arch.h): norms, biases, sinks, rope factors, expert
 * bias tables, copied once from the weight provider when a forward pass starts and kept.
 *
 * The table says which tensors these are, so every builder and backend loads the same set
 * (the CPU pass multiplies with them in place; the CUDA pass uploads them) and nsplan's
 * prediction, which never counts them per token, agrees with both.
 *
 * Ownership: ns_held_load's store owns its floats; ns_held_free(&h) frees and nulls. */
#ifndef NS_HELD_H
#define NS_HELD_H

#include <stddef.h>
#include <stdint.h>

#include "arch.h"
#include "weights.h"

struct ns_held {
	uint32_t n_layer;
	float **v; /* ((n_layer + 1) * NS_SLOT_COUNT): (n_rows, n_cols) floats of each slot's
		    * tensor, global slots in row n_layer; NULL when not held or absent */
};

/* Copy every HELD step of am through the provider (one get_rows of all rows each). Returns 0,
 * -ENOMEM or the provider's error, with "forward: loading NAME: why" in err. */
int ns_held_load(const struct ns_arch_model *am, struct ns_weights *w, struct ns_held **out,
		 char *err, size_t errlen);

/* The floats of a slot at a layer (-1: global), or NULL. */
static inline const float *ns_held_get(const struct ns_held *h, int32_t layer, unsigned slot)
{
	return h->v[(uint64_t)(layer < 0 ? h->n_layer : (uint32_t)layer) * NS_SLOT_COUNT + slot];
}

void ns_held_free(struct ns_held **h);

#endif
