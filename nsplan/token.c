/* token.c - the exact disk bytes of one token for a given routing (see plan.h). */
#include <errno.h>

#include "plan.h"
#include "summary.h"

int nsplan_token_bytes(const struct nsplan *pl, const struct ns_model *m, const uint32_t *experts,
		       uint32_t n_layer, uint32_t n_used, uint64_t *out)
{
	uint64_t sum = pl->predict.disk_dense;

	for (uint64_t i = 0; i < (uint64_t)n_layer * n_used; i++)
		if (pl->hdr.n_expert && experts[i] >= pl->hdr.n_expert)
			return -EINVAL;
	for (uint64_t i = 0; i < pl->hdr.n_entries; i++) {
		const struct nsplan_entry *e = &pl->entries[i];
		int64_t l;

		if (e->tier != NSPLAN_DISK || e->expert == NSPLAN_NO_EXPERT)
			continue;
		l = ns_tensor_layer(m->tensors[e->tensor].name);
		if (l < 0 || (uint64_t)l >= n_layer)
			continue;
		for (uint32_t k = 0; k < n_used; k++)
			if (experts[(uint64_t)l * n_used + k] == e->expert) {
				sum += (e->row_end - e->row_begin) * m->tensors[e->tensor].row_bytes;
				break;
			}
	}
	*out = sum;
	return 0;
}
