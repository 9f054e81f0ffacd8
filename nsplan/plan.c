/* plan.c - the pure residency planner (see plan.h for the priority rules). */
#include "plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "ggml_type.h"
#include "ns_util.h"
#include "summary.h"

/* One placeable piece: a whole tensor, or one expert's slab of a stacked expert tensor. */
struct s_piece {
	uint32_t tensor;
	uint32_t expert;      /* NSPLAN_NO_EXPERT for whole tensors */
	uint64_t row0, rows;  /* the window of the tensor this piece covers */
	uint64_t row_bytes;
	int64_t layer;        /* -1 outside blk.N */
	double ratio;         /* bytes a token touches per byte held */
	double p_touch;       /* probability a token touches the piece (experts), else 1 */
	uint8_t kind;
	uint8_t cls;          /* priority class, see plan.h */
	bool eligible;        /* may be cached at all */
	bool whole_only;      /* all rows or none (a token embedding, see s_emit) */
	bool held;            /* compute copies it once at start and holds it (role HELD) */
	bool unused;          /* no token reads it (role UNUSED): never cached nor predicted */
	bool tied;            /* a tied token_embd: also one row per token for the lookup */
	uint8_t fast_tier;    /* VRAM-Q or VRAM-F by type */
	uint64_t vram_rows;   /* first vram_rows rows in VRAM, the next ram_rows in RAM */
	uint64_t ram_rows;
};

static uint8_t s_class(enum nsplan_kind k)
{
	switch (k) {
	case NSPLAN_KIND_NORM: case NSPLAN_KIND_VECTOR: case NSPLAN_KIND_ATTN:
	case NSPLAN_KIND_SSM: case NSPLAN_KIND_ROUTER:
		return 0;
	case NSPLAN_KIND_OUTPUT:
		return 1;
	case NSPLAN_KIND_EXPERT:
		return 3;
	case NSPLAN_KIND_EMBD:
		return 4;
	default:
		return 2;
	}
}

static bool s_float_type(uint32_t type)
{
	return type == NS_TYPE_F32 || type == NS_TYPE_F16 || type == NS_TYPE_BF16;
}

/* Experts stacked along the outermost dimension: n_exp slabs of n_rows / n_exp rows. */
static uint64_t s_expert_count(const struct ns_model_tensor *t)
{
	uint64_t n_exp = t->n_dims >= 2 ? t->ne[t->n_dims - 1] : 1;

	if (n_exp < 2 || n_exp > UINT32_MAX - 1 || t->n_rows % n_exp)
		return 1;
	return n_exp;
}

static double s_expert_prob(const struct ns_hparams *hp, const struct nsplan_hotness *hot,
			    int64_t layer, uint64_t e, uint64_t n_exp)
{
	double p;

	if (hot && hot->hits && hot->tokens && layer >= 0 && (uint64_t)layer < hot->n_layer &&
	    e < hot->n_expert && hot->tokens[layer] > 0) {
		p = (double)hot->hits[(uint64_t)layer * hot->n_expert + e] / (double)hot->tokens[layer];
		return p < 0 ? 0 : p > 1 ? 1 : p;
	}
	if (!hp->n_expert_used || hp->n_expert_used >= n_exp)
		return 1.0;
	return (double)hp->n_expert_used / (double)n_exp;
}

/* Pieces of a model: one per tensor, one per expert of a stacked expert tensor. */
static uint64_t s_count_pieces(const struct ns_model *m, const struct ns_hparams *hp)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		n += nsplan_tensor_kind(t, hp) == NSPLAN_KIND_EXPERT ? s_expert_count(t) : 1;
	}
	return n;
}

/* Each piece yields at most three windows (VRAM, RAM, disk); a 0-row tensor one. */
uint64_t nsplan_entry_bound(const struct ns_model *m, const struct ns_hparams *hp)
{
	return s_count_pieces(m, hp) * 3 + m->n_tensors;
}

static int s_build_pieces(const struct ns_model *m, const struct ns_hparams *hp,
			  const struct nsplan_opts *o, struct s_piece **out, uint64_t *n_out)
{
	uint64_t n = s_count_pieces(m, hp), k = 0;
	struct s_piece *pc;

	pc = calloc(n ? n : 1, sizeof(*pc));
	if (!pc)
		return -ENOMEM;
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		const enum ns_role role = ns_arch_role(hp, t);
		enum nsplan_kind kind = nsplan_tensor_kind(t, hp);
		bool held = role == NS_ROLE_HELD;
		uint64_t n_exp = kind == NSPLAN_KIND_EXPERT ? s_expert_count(t) : 1;
		uint64_t slab_rows = t->n_rows / n_exp;
		bool tied = role == NS_ROLE_ROWS_MATRIX;

		for (uint64_t e = 0; e < n_exp; e++) {
			struct s_piece *p = &pc[k++];
			p->tensor = (uint32_t)i;
			p->expert = n_exp > 1 ? (uint32_t)e : NSPLAN_NO_EXPERT;
			p->row0 = e * slab_rows;
			p->rows = slab_rows;
			p->row_bytes = t->row_bytes;
			p->layer = ns_tensor_layer(t->name);
			p->kind = (uint8_t)kind;
			p->cls = s_class(kind);
			p->fast_tier = s_float_type(t->type) ? NSPLAN_VRAM_F : NSPLAN_VRAM_Q;
			p->eligible = (kind != NSPLAN_KIND_EMBD || o->embd_resident) &&
				      role != NS_ROLE_UNUSED;
			/* a token looks up one row of a token embedding: cached whole or not at
			 * all, so whether that row is resident never depends on the token */
			p->whole_only = kind == NSPLAN_KIND_EMBD || tied;
			p->held = held;
			p->unused = role == NS_ROLE_UNUSED;
			p->tied = tied;
			p->p_touch = 1.0;
			p->ratio = 1.0;
			if (p->unused) {
				p->cls = 5;
				p->ratio = 0;
				p->p_touch = 0;
			} else if (held) {
				/* touched every token, but from compute's own copy: caching it
				 * saves no per-token byte, so it comes last */
				p->cls = 5;
				p->ratio = 0;
				if (ns_tensor_is_expert(t->name))
					p->p_touch = s_expert_prob(hp, NULL, -1, 0,
								   s_expert_count(t));
			} else if (n_exp > 1) {
				p->p_touch = s_expert_prob(hp, o->hot, p->layer, e, n_exp);
				p->ratio = p->p_touch;
			} else if (kind == NSPLAN_KIND_EMBD) {
				p->ratio = t->n_rows ? 1.0 / (double)t->n_rows : 0;
			}
		}
	}
	*out = pc;
	*n_out = n;
	return 0;
}

static int s_cmp_prio(const void *a, const void *b)
{
	const struct s_piece *x = *(const struct s_piece *const *)a;
	const struct s_piece *y = *(const struct s_piece *const *)b;
	unsigned gx = x->cls <= 1 ? x->cls : 2, gy = y->cls <= 1 ? y->cls : 2;

	if (gx != gy)
		return gx < gy ? -1 : 1;
	if (x->ratio != y->ratio)
		return x->ratio > y->ratio ? -1 : 1;
	if (x->cls != y->cls)
		return x->cls < y->cls ? -1 : 1;
	/* small every-token tensors smallest first: a tiny tensor left on disk costs a whole
	 * aligned device read for a few bytes */
	if (x->cls == 0 && x->rows * x->row_bytes != y->rows * y->row_bytes)
		return x->rows * x->row_bytes < y->rows * y->row_bytes ? -1 : 1;
	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	if (x->expert != y->expert)
		return x->expert < y->expert ? -1 : 1;
	if (x->tensor != y->tensor)
		return x->tensor < y->tensor ? -1 : 1;
	return 0;
}

/* Greedy fill of one tier in priority order: each piece takes the largest whole-row prefix of
 * its still-unplaced rows that fits what is left. Returns the bytes placed. An untied input
 * embedding may always take VRAM (last: its ratio is the smallest): the CUDA pass looks a
 * token's row up on the device, which spares every token a round trip to nsio for one row
 * (0.3 ms a token on the H200 machine's disk, 5% of an 8B model's decode step). */
static uint64_t s_fill(struct s_piece **order, uint64_t n, uint64_t budget, bool vram)
{
	uint64_t left = budget;

	for (uint64_t i = 0; i < n && left; i++) {
		struct s_piece *p = order[i];
		uint64_t free_rows = p->rows - p->vram_rows - p->ram_rows;
		uint64_t take;

		if (!(p->eligible || (vram && p->kind == NSPLAN_KIND_EMBD)) || !free_rows ||
		    !p->row_bytes)
			continue;
		take = left / p->row_bytes;
		if (take > free_rows)
			take = free_rows;
		if (p->whole_only && take != p->rows)
			continue;
		if (vram)
			p->vram_rows += take;
		else
			p->ram_rows += take;
		left -= take * p->row_bytes; /* take * row_bytes <= left: no overflow */
	}
	return budget - left;
}

static void s_tally(struct nsplan_tally *t, uint64_t bytes, unsigned tier)
{
	t->tier_bytes[tier] += bytes;
}

/* Entries in (tensor, row) order; predictions and tallies from the same windows. */
static int s_emit(struct nsplan *pl, const struct ns_model *m, const struct ns_hparams *hp,
		  const struct s_piece *pc, uint64_t n)
{
	struct nsplan_predict *pr = &pl->predict;
	uint64_t cap = nsplan_entry_bound(m, hp), k = 0;
	uint64_t last_tensor = UINT64_MAX;

	pl->entries = calloc(cap ? cap : 1, sizeof(*pl->entries));
	if (!pl->entries)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		const struct s_piece *p = &pc[i];
		const struct ns_model_tensor *t = &m->tensors[p->tensor];
		uint64_t rows[3] = { p->vram_rows, p->ram_rows, p->rows - p->vram_rows - p->ram_rows };
		uint8_t tiers[3] = { p->fast_tier, NSPLAN_RAM, NSPLAN_DISK };
		uint64_t r = p->row0, slab = p->rows * p->row_bytes, res = (rows[0] + rows[1]) * p->row_bytes;
		struct nsplan_tally *lt = &pl->by_layer[p->layer >= 0 ? (uint64_t)p->layer : pl->n_layers];
		struct nsplan_tally *kt = &pl->by_kind[p->kind];

		if (p->tensor != last_tensor) {
			kt->n_tensors++;
			lt->n_tensors++;
			last_tensor = p->tensor;
		}
		kt->bytes += slab;
		lt->bytes += slab;
		for (unsigned w = 0; w < 3; w++) {
			struct nsplan_entry *e;
			if (!rows[w] && !(w == 2 && p->rows == 0))
				continue;
			e = &pl->entries[k++];
			e->tensor = p->tensor;
			e->tier = tiers[w];
			e->kind = p->kind;
			e->row_begin = r;
			e->row_end = r + rows[w];
			e->generation = pl->hdr.generation;
			e->expert = p->expert;
			r += rows[w];
			s_tally(kt, rows[w] * p->row_bytes, tiers[w]);
			s_tally(lt, rows[w] * p->row_bytes, tiers[w]);
			if (tiers[w] == NSPLAN_RAM)
				pl->hdr.ram_used += rows[w] * p->row_bytes;
			else if (tiers[w] != NSPLAN_DISK)
				pl->hdr.vram_used += rows[w] * p->row_bytes;
		}
		if (p->unused) {
			continue; /* no token reads it: nothing to predict */
		} else if (p->held) {
			/* read once at start (from disk when not resident), never per token */
			pr->held_bytes += slab;
			pr->held_disk += slab - res;
			if (ns_tensor_is_expert(t->name)) { /* bias table: expected like its slabs */
				pr->touched_expert += (double)slab * p->p_touch;
			} else {
				pr->touched_dense += slab;
				pr->resident_dense += res;
			}
		} else if (p->expert != NSPLAN_NO_EXPERT) {
			pr->expert_bytes += slab;
			pr->disk_expert_bytes += slab - res;
			pr->touched_expert += (double)slab * p->p_touch;
			pr->disk_expert += (double)(slab - res) * p->p_touch;
		} else if (p->kind == NSPLAN_KIND_EMBD) {
			/* a token reads one row; cached only whole, so the row is resident or not */
			uint64_t one = p->rows ? t->row_bytes : 0;
			pr->touched_dense += one;
			pr->resident_dense += res == slab ? one : 0;
			pr->disk_dense += res == slab ? 0 : one;
		} else {
			pr->touched_dense += slab;
			pr->resident_dense += res;
			pr->disk_dense += slab - res;
			/* a tied embedding on disk: the whole matrix for the logits, and once
			 * more the row of the next token's embedding lookup */
			if (p->tied && res != slab && p->rows) {
				pr->tied_row = t->row_bytes;
				pr->disk_dense += t->row_bytes;
			}
		}
	}
	pl->hdr.n_entries = k;
	pr->touched = (double)pr->touched_dense + pr->touched_expert;
	pr->bytes_per_token = (double)pr->disk_dense + pr->disk_expert;
	pl->hdr.disk_dense = pr->disk_dense;
	pl->hdr.disk_expert_bytes = pr->disk_expert_bytes;
	return 0;
}

static int s_check_model(const struct ns_model *m, char *err, size_t errlen)
{
	if (m->n_tensors >= UINT32_MAX) {
		ns_errf(err, errlen, "model has %" PRIu64 " tensors, more than a plan can index",
			m->n_tensors);
		return -EINVAL;
	}
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		uint64_t b;
		const struct ns_model_tensor *t = &m->tensors[i];
		if (ns_mul_u64_overflow(t->n_rows, t->row_bytes, &b) || b != t->n_bytes) {
			ns_errf(err, errlen, "tensor %s: %" PRIu64 " rows of %" PRIu64
				" bytes do not make its %" PRIu64 " bytes", t->name, t->n_rows,
				t->row_bytes, t->n_bytes);
			return -EINVAL;
		}
	}
	return 0;
}

int nsplan_compute(const struct ns_model *m, const struct ns_hparams *hp,
		   const struct nsplan_opts *o, uint32_t generation, struct nsplan **out,
		   char *err, size_t errlen)
{
	const struct nsplan_budgets *b = &o->budgets;
	struct s_piece *pc = NULL, **order = NULL;
	struct nsplan *pl;
	uint64_t n = 0;
	uint32_t n_layers = hp->n_layer;
	int ret;

	*out = NULL;
	if (b->vram && b->reserve_vram > b->vram) {
		ns_errf(err, errlen, "--reserve-vram %" PRIu64 " exceeds --vram-budget %" PRIu64,
			b->reserve_vram, b->vram);
		return -EINVAL;
	}
	ret = s_check_model(m, err, errlen);
	if (ret)
		return ret;
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		int64_t l = ns_tensor_layer(m->tensors[i].name);
		if (l >= 0 && (uint64_t)l + 1 > n_layers)
			n_layers = (uint32_t)l + 1;
	}
	pl = calloc(1, sizeof(*pl));
	if (!pl)
		return -ENOMEM;
	pl->n_layers = n_layers;
	pl->by_layer = calloc((size_t)n_layers + 1, sizeof(*pl->by_layer));
	ret = pl->by_layer ? s_build_pieces(m, hp, o, &pc, &n) : -ENOMEM;
	if (!ret) {
		order = malloc((n ? n : 1) * sizeof(*order));
		ret = order ? 0 : -ENOMEM;
	}
	if (ret) {
		ns_errf(err, errlen, "out of memory planning %" PRIu64 " tensors", m->n_tensors);
		free(pc);
		nsplan_destroy(&pl);
		return ret;
	}
	for (uint64_t i = 0; i < n; i++)
		order[i] = &pc[i];
	qsort(order, n, sizeof(*order), s_cmp_prio);

	pl->opts = *o;
	pl->opts.hot = NULL;
	pl->hdr.magic = NSPLAN_MAGIC;
	pl->hdr.version = NSPLAN_VERSION;
	pl->hdr.entry_bytes = sizeof(struct nsplan_entry);
	pl->hdr.n_tensors = m->n_tensors;
	pl->hdr.generation = generation;
	pl->hdr.n_expert = hp->n_expert;
	pl->hdr.n_expert_used = hp->n_expert_used;
	pl->hdr.vram_budget = b->vram;
	pl->hdr.reserve_vram = b->reserve_vram;
	pl->hdr.ram_budget = b->ram;
	pl->hdr.mem_budget = b->mem;
	pl->predict.uniform = o->hot == NULL;
	if (b->vram > b->reserve_vram)
		s_fill(order, n, b->vram - b->reserve_vram, true);
	s_fill(order, n, b->ram, false);
	ret = s_emit(pl, m, hp, pc, n);
	free(order);
	free(pc);
	if (ret) {
		ns_errf(err, errlen, "out of memory writing the plan");
		nsplan_destroy(&pl);
		return ret;
	}
	*out = pl;
	return 0;
}

void nsplan_destroy(struct nsplan **p)
{
	if (!p || !*p)
		return;
	free((*p)->entries);
	free((*p)->by_layer);
	free(*p);
	*p = NULL;
}
