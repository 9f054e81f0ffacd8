/* plan.c - see plan.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "client.h"
#include "model.h"
#include "ns_util.h"
#include "plan.h"
#include "resident.h"

/* An expert stack of the model (tensor mtensor, experts along ne[2]): nsio's index and the
 * blocks ns_stream_linear will cut it into. */
static int s_proj(const struct ns_model *m, struct ns_client *c, uint32_t mtensor,
		  uint64_t block_rows, uint32_t lookahead, struct ns_rproj *pr, char *err,
		  size_t errlen)
{
	const struct ns_model_tensor *t = &m->tensors[mtensor];
	int64_t ci = ns_client_find_tensor(c, t->name);
	int rc;

	if (ci < 0 || ci > UINT32_MAX) {
		ns_errf(err, errlen, "%s: nsio does not serve it (another model?)", t->name);
		return -EINVAL;
	}
	pr->tensor = (uint32_t)ci;
	pr->mtensor = mtensor;
	pr->expert_rows = t->ne[1];
	pr->row_bytes = t->row_bytes;
	rc = ns_stream_block_rows(c, pr->tensor, block_rows, lookahead, &pr->block_rows, err,
				  errlen);
	if (rc == 0 && pr->block_rows == 0)
		rc = -EINVAL;
	return rc;
}

int ns_rplan_new(const struct ns_model *m, struct ns_client *c, uint64_t block_rows,
		 uint32_t lookahead, struct ns_rplan **out, char *err, size_t errlen)
{
	struct ns_arch_model *am = NULL;
	struct ns_rplan *p;
	uint32_t any = 0;
	int rc;

	*out = NULL;
	rc = ns_arch_bind(m, &am, err, errlen);
	if (rc < 0)
		return rc;
	p = calloc(1, sizeof(*p));
	if (p)
		p->layer = calloc(am->n_layer ? am->n_layer : 1, sizeof(*p->layer));
	if (!p || !p->layer) {
		ns_arch_model_free(&am);
		free(p);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->n_layer = am->n_layer;
	/* the EXPERT steps, layer by layer, in the order a token reads them */
	for (uint64_t i = 0; i < am->n_steps && rc == 0; i++) {
		const struct ns_arch_step *st = &am->steps[i];
		struct ns_rlayer *y;

		if (st->role != NS_ROLE_EXPERT || st->layer < 0)
			continue;
		y = &p->layer[st->layer];
		if (y->n_proj == NS_RPLAN_MAX_PROJ) {
			ns_errf(err, errlen, "layer %d: more than %d expert stacks", st->layer,
				NS_RPLAN_MAX_PROJ);
			rc = -EINVAL;
			break;
		}
		rc = s_proj(m, c, st->tensor, block_rows, lookahead, &y->proj[y->n_proj++], err,
			    errlen);
		y->n_expert = (uint32_t)ns_arch_dim(am, st->layer, NS_DIM_EXPERT);
		any += !y->present;
		y->present = 1;
	}
	ns_arch_model_free(&am);
	if (rc == 0 && !any) {
		ns_errf(err, errlen, "the model has no expert stacks: nothing to route");
		rc = -ENOENT;
	}
	if (rc < 0) {
		ns_rplan_destroy(&p);
		return rc;
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

		for (uint32_t k = 0; k < y->n_proj; k++) {
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
