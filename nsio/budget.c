/* budget.c - the smallest arena that can stream every tensor, and the run-ahead schedule. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "nsio.h"
#include "ns_util.h"
#include "plan.h"

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

/* Consumption rank of a layer's matrix: llama.c's order (forward/llama.c, moe.c). */
static const char *const s_layer_order[] = {
	"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
	"ffn_gate_inp.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
};

struct s_sched_key {
	uint64_t layer; /* 0: before the layers; blk.L: L + 1; the output head: last */
	uint64_t rank;  /* within the layer */
	uint32_t tensor;
};

static int s_key_cmp(const void *a, const void *b)
{
	const struct s_sched_key *x = a, *y = b;

	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

/* Whether a decoded token reads tensor t whole, in order, and where it sits in that order.
 * Left out: held tensors (read once at start), the rows of an untied token embedding (one
 * per token, which one is not known ahead) and routed experts (nsrouter's job). */
static bool s_sched_key(const struct ns_model *m, uint32_t i, bool tied,
			struct s_sched_key *k)
{
	const struct ns_model_tensor *t = &m->tensors[i];
	unsigned layer;
	int n = 0;

	if (t->n_rows == 0 || t->row_bytes == 0 || nsplan_tensor_held(t) ||
	    strstr(t->name, "_exps"))
		return false;
	*k = (struct s_sched_key){ .layer = 0, .rank = i, .tensor = i };
	if (!strcmp(t->name, "token_embd.weight")) {
		if (!tied)
			return false;
		k->layer = UINT64_MAX; /* tied: it is the output head */
	} else if (!strcmp(t->name, "output.weight")) {
		k->layer = UINT64_MAX;
	} else if (sscanf(t->name, "blk.%u.%n", &layer, &n) == 1 && n > 0) {
		k->layer = (uint64_t)layer + 1;
		k->rank = NS_ARRAY_LEN(s_layer_order) + (uint64_t)i;
		for (size_t j = 0; j < NS_ARRAY_LEN(s_layer_order); j++)
			if (!strcmp(t->name + n, s_layer_order[j]))
				k->rank = j;
	}
	return true;
}

/* The per-token order of a dense model: the matrices a decoded token reads (s_sched_key), in
 * the order the forward pass reads them (by layer, llama.c's order inside one, the output
 * head last), each from the end of its RAM-resident prefix (once the RAM tier is loaded) and
 * cut into blocks exactly as ns_stream_linear cuts them for --block-rows (0: as large as the
 * arena allows) and --lookahead. nsio reads along it ahead of the consumer; a READ for
 * exactly one of these blocks is then served from the read-ahead. Built at attach and again
 * when the RAM tier is ready. */
int nsio_build_schedule(struct nsio *s)
{
	const struct ns_model *m = s->model;
	const bool tied = ns_model_find(m, "output.weight") == NULL;
	struct s_sched_key *keys;
	uint64_t n = 0, cap = 0, nk = 0;

	free(s->sched);
	free(s->sched_first);
	free(s->sched_rows);
	free(s->sched_start);
	s->sched = NULL;
	s->sched_first = s->sched_rows = s->sched_start = NULL;
	s->n_sched = s->ahead_next = 0;
	keys = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*keys));
	s->sched_first = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(uint64_t));
	s->sched_rows = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(uint64_t));
	s->sched_start = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(uint64_t));
	if (!keys || !s->sched_first || !s->sched_rows || !s->sched_start) {
		free(keys);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < m->n_tensors; i++)
		if (s_sched_key(m, (uint32_t)i, tied, &keys[nk]))
			nk++;
	qsort(keys, nk, sizeof(*keys), s_key_cmp);
	for (int pass = 0; pass < 2; pass++) {
		for (uint64_t j = 0; j < nk; j++) {
			const uint32_t i = keys[j].tensor;
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
				free(keys);
				return -ENOMEM;
			}
		}
	}
	free(keys);
	s->n_sched = n;
	return 0;
}
