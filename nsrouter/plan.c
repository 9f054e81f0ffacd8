/* plan.c - see plan.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "model.h"
#include "ns_util.h"
#include "plan.h"
#include "resident.h"

static const char *const s_proj[3] = { "gate", "up", "down" };

/* The stack of one projection, or -ENOENT when the layer has none. */
static int s_find(const struct ns_model *m, struct ns_client *c, uint32_t layer, int k,
		  uint64_t block_rows, uint32_t lookahead, struct ns_rproj *pr,
		  uint32_t *n_expert, char *err, size_t errlen)
{
	char name[96];
	const struct ns_model_tensor *t;
	int64_t ci;
	int rc;

	snprintf(name, sizeof(name), "blk.%u.ffn_%s_exps.weight", layer, s_proj[k]);
	t = ns_model_find(m, name);
	if (!t)
		return -ENOENT;
	ci = ns_client_find_tensor(c, name);
	if (ci < 0 || ci > UINT32_MAX || t->n_dims != 3 || t->ne[1] == 0 || t->ne[2] == 0) {
		ns_errf(err, errlen, "%s: %s", name, ci < 0 ? "nsio does not serve it (another "
			"model?)" : "not a stack of experts (ne[2])");
		return -EINVAL;
	}
	pr->tensor = (uint32_t)ci;
	pr->mtensor = (uint32_t)(t - m->tensors);
	pr->expert_rows = t->ne[1];
	pr->row_bytes = t->row_bytes;
	*n_expert = (uint32_t)t->ne[2];
	rc = ns_stream_block_rows(c, pr->tensor, block_rows, lookahead, &pr->block_rows, err,
				  errlen);
	if (rc == 0 && pr->block_rows == 0)
		rc = -EINVAL;
	return rc;
}

int ns_rplan_new(const struct ns_model *m, struct ns_client *c, uint64_t block_rows,
		 uint32_t lookahead, struct ns_rplan **out, char *err, size_t errlen)
{
	struct ns_rplan *p = calloc(1, sizeof(*p));
	uint32_t n = 0, any = 0;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	/* layers: count upwards while any blk.L tensor exists */
	for (;;) {
		char name[64];
		int found = 0;

		snprintf(name, sizeof(name), "blk.%u.", n);
		for (uint64_t i = 0; i < m->n_tensors && !found; i++)
			found = !strncmp(m->tensors[i].name, name, strlen(name));
		if (!found || n == 100000)
			break;
		n++;
	}
	p->n_layer = n;
	p->layer = calloc(n ? n : 1, sizeof(*p->layer));
	if (!p->layer) {
		free(p);
		return -ENOMEM;
	}
	for (uint32_t l = 0; l < n; l++) {
		struct ns_rlayer *y = &p->layer[l];
		int rc = 0, k;

		for (k = 0; k < 3 && rc == 0; k++) {
			uint32_t ne = 0;

			rc = s_find(m, c, l, k, block_rows, lookahead, &y->proj[k], &ne, err,
				    errlen);
			if (rc == 0 && k > 0 && ne != y->n_expert) {
				ns_errf(err, errlen, "layer %u: expert stacks disagree on the expert "
					"count", l);
				rc = -EINVAL;
			}
			y->n_expert = ne;
		}
		if (rc == -ENOENT && k == 1)
			continue; /* a dense layer */
		if (rc) {
			if (rc == -ENOENT)
				ns_errf(err, errlen, "layer %u: ffn_%s_exps missing", l,
					s_proj[k - 1]);
			ns_rplan_destroy(&p);
			return rc;
		}
		y->present = 1;
		any++;
	}
	if (!any) {
		ns_errf(err, errlen, "the model has no expert tensors (ffn_*_exps): nothing to "
			"route");
		ns_rplan_destroy(&p);
		return -ENOENT;
	}
	*out = p;
	return 0;
}

void ns_rplan_destroy(struct ns_rplan **pp)
{
	if (!pp || !*pp)
		return;
	free((*pp)->layer);
	free(*pp);
	*pp = NULL;
}

int ns_rplan_build(const struct ns_rplan *p, const struct ns_zrouter *d, uint64_t max_bytes,
		   const struct ns_rres *res, uint32_t skip_first, struct ns_zplan *plan,
		   struct ns_rbuild *out)
{
	struct ns_rbuild bs = { 0 };
	const struct ns_rlayer *y;
	uint64_t total = 0;
	uint32_t n = 0;

	if (out)
		*out = bs;
	if (d->layer >= p->n_layer || !p->layer[d->layer].present)
		return -EINVAL;
	y = &p->layer[d->layer];
	plan->layer = d->layer;
	for (uint32_t i = 0; i < d->n_used; i++)
		if (d->expert[i] >= y->n_expert)
			return -EINVAL;
	for (uint32_t i = 0; i < d->n_used; i++) {
		const uint32_t e = d->expert[i];

		for (int k = 0; k < 3; k++) {
			const struct ns_rproj *pr = &y->proj[k];
			const uint64_t r0 = (uint64_t)e * pr->expert_rows, end = r0 + pr->expert_rows;

			for (uint64_t r = r0; r < end; r += pr->block_rows) {
				const uint64_t nr = end - r < pr->block_rows ? end - r
									     : pr->block_rows;
				const uint64_t b = nr * pr->row_bytes;
				const bool first = bs.blocks++ < skip_first;

				if (res && ns_rres_covered(res, pr->mtensor, r, nr)) {
					bs.resident_windows++;
					bs.resident_bytes += b;
					continue;
				}
				if (n == NS_ZMSG_MAX_PLAN || (max_bytes && total + b > max_bytes))
					goto out;
				total += b;
				if (first) {
					bs.first_left++;
					continue;
				}
				plan->item[n++] = (struct ns_zplan_item){
					.tensor = pr->tensor, .row0 = r, .nrows = nr };
			}
		}
	}
out:
	plan->n_items = n;
	if (out)
		*out = bs;
	return (int)n;
}
