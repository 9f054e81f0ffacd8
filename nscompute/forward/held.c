/* held.c - see held.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "held.h"
#include "ns_util.h"

void ns_held_free(struct ns_held **ph)
{
	struct ns_held *h;

	if (!ph || !*ph)
		return;
	h = *ph;
	for (uint64_t i = 0; h->v && i < ((uint64_t)h->n_layer + 1) * NS_SLOT_COUNT; i++)
		free(h->v[i]);
	free(h->v);
	free(h);
	*ph = NULL;
}

/* All rows of tensor t as floats into *out. */
static int s_load(const struct ns_model_tensor *t, uint32_t tensor, struct ns_weights *w,
		  float **out, char *err, size_t errlen)
{
	int64_t *rows = NULL;
	uint64_t n;
	int rc = -ENOMEM;

	if (!ns_mul_u64_overflow(t->n_rows, t->ne[0], &n) &&
	    !ns_mul_u64_overflow(n, sizeof(float), &n) && n <= SIZE_MAX &&
	    t->n_rows <= SIZE_MAX / sizeof(*rows)) {
		*out = calloc(1, n ? (size_t)n : 1);
		rows = calloc(t->n_rows ? (size_t)t->n_rows : 1, sizeof(*rows));
	}
	if (*out && rows) {
		for (uint64_t r = 0; r < t->n_rows; r++)
			rows[r] = (int64_t)r;
		rc = ns_weights_get_rows(w, tensor, rows, t->n_rows, *out);
	}
	if (rc < 0)
		ns_errf(err, errlen, "forward: loading %s: %s", t->name,
			rc == -ENOMEM ? "out of memory" : ns_weights_error(w));
	free(rows);
	return rc;
}

int ns_held_load(const struct ns_arch_model *am, struct ns_weights *w, struct ns_held **out,
		 char *err, size_t errlen)
{
	struct ns_held *h = calloc(1, sizeof(*h));
	int rc = 0;

	*out = NULL;
	if (h) {
		h->n_layer = am->n_layer;
		h->v = calloc(((uint64_t)am->n_layer + 1) * NS_SLOT_COUNT, sizeof(*h->v));
	}
	if (!h || !h->v) {
		free(h);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < am->n_steps && rc == 0; i++) {
		const struct ns_arch_step *s = &am->steps[i];
		const uint64_t at = (uint64_t)(s->layer < 0 ? am->n_layer : (uint32_t)s->layer) *
				    NS_SLOT_COUNT + s->slot;

		if (s->role == NS_ROLE_HELD)
			rc = s_load(&am->m->tensors[s->tensor], s->tensor, w, &h->v[at], err,
				    errlen);
	}
	if (rc < 0) {
		ns_held_free(&h);
		return rc;
	}
	*out = h;
	return 0;
}
