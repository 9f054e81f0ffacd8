/* diff.c - re-planning with new expert statistics and the moves between two generations. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"
#include "plan.h"

/* Tier order for promoted/demoted: disk < RAM < VRAM (Q and F are one level). */
static unsigned s_level(unsigned tier)
{
	return tier >= NSPLAN_VRAM_Q ? 2 : tier;
}

static int s_push(struct nsplan_diff *d, uint64_t *cap, const struct nsplan_move *mv)
{
	struct nsplan_move *last = d->n_moves ? &d->moves[d->n_moves - 1] : NULL;

	if (last && last->tensor == mv->tensor && last->expert == mv->expert &&
	    last->row_end == mv->row_begin && last->from == mv->from && last->to == mv->to) {
		last->row_end = mv->row_end;
		last->bytes += mv->bytes;
		return 0;
	}
	if (d->n_moves == *cap) {
		uint64_t ncap = *cap ? *cap * 2 : 64;
		struct nsplan_move *nm = realloc(d->moves, ncap * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		d->moves = nm;
		*cap = ncap;
	}
	d->moves[d->n_moves++] = *mv;
	return 0;
}

int nsplan_diff_compute(const struct ns_model *m, const struct nsplan *a, const struct nsplan *b,
			struct nsplan_diff **out)
{
	const struct nsplan_entry *ea = a->entries, *eb = b->entries;
	uint64_t na = a->hdr.n_entries, nb = b->hdr.n_entries, ia = 0, ib = 0, cap = 0;
	struct nsplan_diff *d;

	*out = NULL;
	if (a->hdr.n_tensors != m->n_tensors || b->hdr.n_tensors != m->n_tensors)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->from_generation = a->hdr.generation;
	d->to_generation = b->hdr.generation;
	/* Both lists partition every tensor's rows in (tensor, row) order: walk them together. */
	while (ia < na && ib < nb) {
		const struct nsplan_entry *x = &ea[ia], *y = &eb[ib];
		uint64_t lo, hi;

		if (x->tensor != y->tensor || x->row_end == x->row_begin ||
		    y->row_end == y->row_begin) {
			/* empty windows, or lists out of step (cannot happen for checked plans) */
			if (x->row_end == x->row_begin)
				ia++;
			else if (y->row_end == y->row_begin)
				ib++;
			else if (x->tensor < y->tensor)
				ia++;
			else
				ib++;
			continue;
		}
		lo = x->row_begin > y->row_begin ? x->row_begin : y->row_begin;
		hi = x->row_end < y->row_end ? x->row_end : y->row_end;
		if (lo < hi && x->tier != y->tier) {
			struct nsplan_move mv = {
				.tensor = x->tensor, .expert = y->expert, .row_begin = lo, .row_end = hi,
				.bytes = (hi - lo) * m->tensors[x->tensor].row_bytes,
				.from = x->tier, .to = y->tier,
			};
			if (s_level(mv.to) > s_level(mv.from))
				d->bytes_promoted += mv.bytes;
			else
				d->bytes_demoted += mv.bytes;
			if (s_push(d, &cap, &mv)) {
				nsplan_diff_destroy(&d);
				return -ENOMEM;
			}
		}
		if (x->row_end == hi)
			ia++;
		if (y->row_end == hi)
			ib++;
	}
	*out = d;
	return 0;
}

void nsplan_diff_destroy(struct nsplan_diff **d)
{
	if (!d || !*d)
		return;
	free((*d)->moves);
	free(*d);
	*d = NULL;
}

int nsplan_update(const struct nsplan *old, const struct ns_model *m,
		  const struct ns_hparams *hp, const struct nsplan_hotness *stats,
		  struct nsplan **out, struct nsplan_diff **diff, char *err, size_t errlen)
{
	struct nsplan_opts o = old->opts;
	int ret;

	*out = NULL;
	*diff = NULL;
	if (old->hdr.generation == UINT32_MAX) {
		ns_errf(err, errlen, "plan generation counter exhausted");
		return -EOVERFLOW;
	}
	o.hot = stats;
	ret = nsplan_compute(m, hp, &o, old->hdr.generation + 1, out, err, errlen);
	if (ret)
		return ret;
	ret = nsplan_diff_compute(m, old, *out, diff);
	if (ret) {
		ns_errf(err, errlen, "cannot diff plan generations %u and %u: %s",
			old->hdr.generation, (*out)->hdr.generation, ret == -ENOMEM ?
			"out of memory" : "different models");
		nsplan_destroy(out);
		return ret;
	}
	return 0;
}
