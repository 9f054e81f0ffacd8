/* budget.c - the smallest arena that can stream every tensor, and the run-ahead schedule. */
#include <errno.h>
#include <stdlib.h>

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

/* The per-token order of a dense model: every tensor in file order (llama.cpp writes them in
 * layer order, the order the forward pass reads them), cut into blocks exactly as
 * ns_stream_linear cuts them for --block-rows (0: as large as the arena allows) and
 * --lookahead. nsio reads along it ahead of the consumer; a READ for exactly one of these
 * blocks is then served from the read-ahead. */
int nsio_build_schedule(struct nsio *s)
{
	const struct ns_model *m = s->model;
	uint64_t n = 0, cap = 0;

	for (int pass = 0; pass < 2; pass++) {
		for (uint64_t i = 0; i < m->n_tensors; i++) {
			const struct ns_model_tensor *t = &m->tensors[i];
			uint64_t rows, need;

			if (t->n_rows == 0 || t->row_bytes == 0 ||
			    ns_block_rows_fit(s->ctl->arena_bytes, s->ctl->align, s->o.lookahead,
					      t->file_offset, t->row_bytes, t->n_rows,
					      s->o.block_rows, &rows, &need))
				continue;
			if (pass == 1) {
				s->sched_first[i] = n;
				s->sched_rows[i] = rows;
			}
			for (uint64_t r = 0; r < t->n_rows; r += rows) {
				if (pass == 1) {
					s->sched[n].tensor = (uint32_t)i;
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
				return 0;
			s->sched = calloc(cap, sizeof(*s->sched));
			s->sched_first = calloc(m->n_tensors, sizeof(uint64_t));
			s->sched_rows = calloc(m->n_tensors, sizeof(uint64_t));
			if (!s->sched || !s->sched_first || !s->sched_rows)
				return -ENOMEM;
		}
	}
	s->n_sched = n;
	return 0;
}
