/* attn_internal.h - what the attention dispatcher (attn.c) shares with its paths.
 *
 * A task is one KV head and a block of at most NS_ATTN_TB query tokens: rows r = (token
 * t0 + r / G, head hk * G + r % G), G = n_head / n_head_kv, all reading the same K tiles and
 * V rows. Its scratch (one slot per running task):
 *   att : exact: [rows][lda] scores, then probabilities, by absolute position (lda = n_ctx
 *         rounded up to a whole tile)
 *   qd  : exact: [rows][dk] the queries widened to double
 *   s   : tiled: [rows][NS_ATTN_BLK] scores, then probabilities, of one block of positions
 *   o   : tiled: [rows][dv] running weighted sum of values
 *   m, l: tiled: [rows] running maximum and denominator */
#ifndef NS_ATTN_INTERNAL_H
#define NS_ATTN_INTERNAL_H

#include <stdbool.h>

#include "attn.h"

#define NS_ATTN_TB 4   /* query tokens per task */
#define NS_ATTN_BLK 64 /* positions per online-softmax step (tiled) */

struct ns_attn_task {
	const struct ns_attn *a;
	uint32_t hk;  /* KV head */
	uint32_t t0;  /* first token */
	uint32_t nt;  /* tokens */
	uint32_t G;   /* query heads per KV head */
	float *att;
	uint64_t lda;
	double *qd;
	float *s, *o, *m, *l;
};

/* Context of row r: positions [*j0, *p1). */
static inline void ns_attn_row_range(const struct ns_attn_task *t, uint32_t r, uint32_t *j0,
				     uint32_t *p1)
{
	const uint32_t e = t->a->pos0 + t->t0 + r / t->G + 1;

	*p1 = e;
	*j0 = t->a->window && e > t->a->window ? e - t->a->window : 0;
}

static inline const float *ns_attn_row_q(const struct ns_attn_task *t, uint32_t r)
{
	const struct ns_attn *a = t->a;

	return a->q + ((uint64_t)(t->t0 + r / t->G) * a->n_head + t->hk * t->G + r % t->G) *
			      a->kv->dk;
}

static inline float *ns_attn_row_out(const struct ns_attn_task *t, uint32_t r)
{
	const struct ns_attn *a = t->a;

	return a->out + ((uint64_t)(t->t0 + r / t->G) * a->n_head + t->hk * t->G + r % t->G) *
				a->kv->dv;
}

static inline const float *ns_attn_row_sink(const struct ns_attn_task *t, uint32_t r)
{
	return t->a->sinks ? &t->a->sinks[t->hk * t->G + r % t->G] : NULL;
}

/* Exact algorithm on a f32 cache? (else the tiled one) */
static inline bool ns_attn_exact(const struct ns_kvcache *kv)
{
	return kv->tk == NS_KV_F32 && kv->tv == NS_KV_F32;
}

void ns_attn_task_scalar(const struct ns_attn_task *t);
void ns_attn_task_avx512(const struct ns_attn_task *t);

/* The reference's computation of one row (attn.c), shared by ns_attn_reference and the
 * scalar exact path. */
void ns_attn_row_exact(const struct ns_attn *a, uint32_t tok, uint32_t h, float *att);

#endif
