/* budget.c - the smallest arena that can stream every tensor, and the run-ahead schedule. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "arena.h"
#include "nsio.h"
#include "ns_util.h"

uint64_t nsio_min_budget(const struct ns_model *m, uint32_t lookahead, uint32_t align,
			 uint64_t *worst_tensor, uint64_t *worst_span)
{
	uint64_t best = 0;

	*worst_tensor = 0;
	*worst_span = 0;
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		uint64_t span, need;

		if (t->n_rows == 0)
			continue;
		span = ns_span_max(t->file_offset, t->row_bytes, t->n_rows, 1, align);
		if (span == 0 || ns_mul_u64_overflow(span, (uint64_t)lookahead + 1, &need))
			return UINT64_MAX;
		if (need > best) {
			best = need;
			*worst_tensor = i;
			*worst_span = span;
		}
	}
	return best;
}

/* The matrices one decoded token multiplies whole, in the order the forward pass reads them:
 * the MATRIX steps of the model bound to the architecture table (modelfile/arch.h; the
 * output head last, a tied token_embd there too). Left out: held tensors (read once at
 * start), rows of an embedding table (which rows is not known ahead) and routed experts
 * (nsrouter plans those). A file the table cannot bind (nsctl refuses such a model before
 * nsio starts; tests serve raw tensor sets) is taken in file order, every tensor of more than
 * one row. order: (n_tensors) capacity. */
static uint64_t s_token_order(const struct ns_model *m, uint32_t *order)
{
	struct ns_arch_model *am = NULL;
	char err[NS_ERR_LEN];
	uint64_t n = 0;

	if (ns_arch_bind(m, &am, err, sizeof(err)) < 0) {
		for (uint64_t i = 0; i < m->n_tensors; i++)
			if (m->tensors[i].n_rows > 1)
				order[n++] = (uint32_t)i;
		return n;
	}
	for (uint64_t i = 0; i < am->n_steps; i++)
		if (am->steps[i].role == NS_ROLE_MATRIX)
			order[n++] = am->steps[i].tensor;
	ns_arch_model_free(&am);
	return n;
}

/* The per-token order of a dense model: the matrices a decoded token reads, in the order the
 * forward pass reads them (s_token_order), each from the end of its RAM-resident prefix
 * (once the RAM tier is loaded) and
 * cut into blocks exactly as ns_stream_linear cuts them for --block-rows (0: as large as the
 * arena allows) and --lookahead. nsio reads along it ahead of the consumer; a READ for
 * exactly one of these blocks is then served from the read-ahead. Built at attach and again
 * when the RAM tier is ready. */
int nsio_build_schedule(struct nsio *s)
{
	const struct ns_model *m = &s->text; /* the tower is read per image, not per token */
	uint32_t *order;
	uint64_t n = 0, cap = 0, nk;

	free(s->sched);
	free(s->sched_first);
	free(s->sched_rows);
	free(s->sched_start);
	s->sched = NULL;
	s->sched_first = s->sched_rows = s->sched_start = NULL;
	s->n_sched = s->ahead_next = 0;
	order = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*order));
	s->sched_first = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(uint64_t));
	s->sched_rows = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(uint64_t));
	s->sched_start = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(uint64_t));
	if (!order || !s->sched_first || !s->sched_rows || !s->sched_start) {
		free(order);
		return -ENOMEM;
	}
	nk = s_token_order(m, order);
	for (int pass = 0; pass < 2; pass++) {
		for (uint64_t j = 0; j < nk; j++) {
			const uint32_t i = order[j];
			const struct ns_model_tensor *t = &m->tensors[i];
			uint64_t rows, need, r0 = 0;

			if (s->ram.ready && s->ram.rows && i < s->ram.n_tensors)
				r0 = s->ram.rows[i]; /* compute multiplies that prefix in place */
			if (r0 >= t->n_rows ||
			    ns_block_rows_fit(s->ctl->arena_bytes, s->ctl->align, s->o.lookahead,
					      t->file_offset, t->row_bytes, t->n_rows,
					      s->o.block_rows, &rows, &need))
				continue;
			if (pass == 1) {
				s->sched_first[i] = n;
				s->sched_rows[i] = rows;
				s->sched_start[i] = r0;
			}
			for (uint64_t r = r0; r < t->n_rows; r += rows) {
				if (pass == 1) {
					s->sched[n].tensor = i;
					s->sched[n].row0 = r;
					s->sched[n].nrows = t->n_rows - r < rows ? t->n_rows - r : rows;
				}
				n++;
			}
		}
		if (pass == 0) {
			cap = n;
			n = 0;
			if (cap == 0)
				break;
			s->sched = calloc(cap, sizeof(*s->sched));
			if (!s->sched) {
				free(order);
				return -ENOMEM;
			}
		}
	}
	free(order);
	s->n_sched = n;
	return 0;
}
