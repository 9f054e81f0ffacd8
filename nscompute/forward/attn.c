/* attn.c - the attention dispatcher: argument checks, path choice, the split into tasks
 * (KV head x block of query tokens, longest contexts first) over the pool, per-task scratch
 * slots; the reference and the scalar path (see attn.h). */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "attn_internal.h"
#include "ns_util.h"
#include "ops.h"

struct ns_attn_ws {
	uint32_t n_slots;
	uint32_t rows;    /* rows per task at most: NS_ATTN_TB * G */
	uint32_t n_head, n_head_kv, dk, dv, n_ctx;
	uint64_t slot_floats; /* floats per slot (the doubles counted twice) */
	float *mem;
	_Atomic uint32_t *busy; /* [n_slots] */
};

struct ns_attn_ws *ns_attn_ws_new(int n_threads, uint32_t n_head, uint32_t n_head_kv,
				  uint32_t dk, uint32_t dv, uint32_t n_ctx)
{
	struct ns_attn_ws *ws;
	uint64_t rows, per, tot;

	if (n_threads > NS_ATTN_MAX_SLOTS)
		n_threads = NS_ATTN_MAX_SLOTS;
	if (n_threads < 1 || !n_head_kv || n_head % n_head_kv || !dk || !dv || !n_ctx)
		return NULL;
	rows = (uint64_t)NS_ATTN_TB * (n_head / n_head_kv);
	/* att + qd (2 floats a double) + s + o + m + l, each rounded to 16 floats */
	per = rows * ns_align_up_u64(n_ctx, NS_KV_TILE) + ns_align_up_u64(rows * dk * 2, 16) +
	      ns_align_up_u64(rows * NS_ATTN_BLK, 16) + ns_align_up_u64(rows * dv, 16) +
	      2 * ns_align_up_u64(rows, 16);
	if (rows * n_ctx / n_ctx != rows || ns_mul_u64_overflow(per, (uint64_t)n_threads, &tot) ||
	    tot > SIZE_MAX / 8)
		return NULL;
	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return NULL;
	ws->mem = aligned_alloc(64, (size_t)tot * 4);
	ws->busy = calloc((size_t)n_threads, sizeof(*ws->busy));
	if (!ws->mem || !ws->busy) {
		ns_attn_ws_destroy(&ws);
		return NULL;
	}
	ws->n_slots = (uint32_t)n_threads;
	ws->rows = (uint32_t)rows;
	ws->n_head = n_head;
	ws->n_head_kv = n_head_kv;
	ws->dk = dk;
	ws->dv = dv;
	ws->n_ctx = n_ctx;
	ws->slot_floats = per;
	for (uint32_t i = 0; i < ws->n_slots; i++)
		atomic_init(&ws->busy[i], 0);
	return ws;
}

void ns_attn_ws_destroy(struct ns_attn_ws **ws)
{
	if (!ws || !*ws)
		return;
	free((*ws)->mem);
	free((void *)(*ws)->busy);
	free(*ws);
	*ws = NULL;
}

/* ---------------------------------------------------------------- reference ------------ */

void ns_attn_row_exact(const struct ns_attn *a, uint32_t tok, uint32_t h, float *att)
{
	const struct ns_kvcache *kv = a->kv;
	const uint32_t hk = h / (a->n_head / kv->n_head_kv);
	const uint32_t p1 = a->pos0 + tok + 1; /* causal: itself and everything before */
	const uint32_t j0 = a->window && p1 > a->window ? p1 - a->window : 0;
	const uint32_t n_pos = p1 - j0;
	const float *qh = a->q + ((uint64_t)tok * a->n_head + h) * kv->dk; /* (dk) */
	float *out = a->out + ((uint64_t)tok * a->n_head + h) * kv->dv;    /* (dv) */

	/* scores: att[j - j0] = (q . k_j) * scale */
	for (uint32_t j = 0; j < n_pos; j++) {
		double acc = 0.0;

		for (uint32_t d = 0; d < kv->dk; d++)
			acc += (double)qh[d] * (double)ns_kvcache_k_at(kv, a->layer, hk, j0 + j, d);
		att[j] = (float)acc * a->scale;
	}
	if (a->sinks)
		ns_softmax_sink(att, n_pos, a->sinks[h]);
	else
		ns_softmax(att, n_pos);
	/* out = sum_j att[j - j0] * v_j */
	for (uint32_t d = 0; d < kv->dv; d++) {
		double acc = 0.0;

		for (uint32_t j = 0; j < n_pos; j++)
			acc += (double)att[j] * (double)ns_kvcache_v_at(kv, a->layer, hk, j0 + j, d);
		out[d] = (float)acc;
	}
}

void ns_attn_reference(const struct ns_attn *a, float *att_scratch)
{
	for (uint32_t t = 0; t < a->n_tok; t++)
		for (uint32_t h = 0; h < a->n_head; h++)
			ns_attn_row_exact(a, t, h, att_scratch);
}

/* ---------------------------------------------------------------- scalar path ---------- */

/* Tiled algorithm of one row in portable float (the AVX-512 tiled kernel's arithmetic, one
 * element at a time). */
static void s_row_tiled(const struct ns_attn_task *t, uint32_t r)
{
	const struct ns_attn *a = t->a;
	const struct ns_kvcache *kv = a->kv;
	const float *q = ns_attn_row_q(t, r), *sink = ns_attn_row_sink(t, r);
	float *o = t->o, *out = ns_attn_row_out(t, r), m = -INFINITY, l = 0.0f;
	uint32_t j0, p1;

	ns_attn_row_range(t, r, &j0, &p1);
	memset(o, 0, kv->dv * sizeof(float));
	for (uint32_t jb = j0; jb < p1; jb += NS_ATTN_BLK) {
		uint32_t n = p1 - jb < NS_ATTN_BLK ? p1 - jb : NS_ATTN_BLK;
		float bm = -INFINITY, c, sum = 0.0f;

		for (uint32_t j = 0; j < n; j++) {
			float acc = 0.0f;

			for (uint32_t d = 0; d < kv->dk; d++)
				acc = fmaf(q[d], ns_kvcache_k_at(kv, a->layer, t->hk, jb + j, d), acc);
			t->s[j] = acc * a->scale;
			bm = fmaxf(bm, t->s[j]);
		}
		if (bm == -INFINITY || isnan(bm))
			bm = m == -INFINITY ? 0.0f : m;
		if (bm < m)
			bm = m;
		c = m == -INFINITY ? 0.0f : expf(m - bm);
		for (uint32_t j = 0; j < n; j++) {
			t->s[j] = expf(t->s[j] - bm);
			sum += t->s[j];
		}
		l = l * c + sum;
		for (uint32_t d = 0; d < kv->dv; d++) {
			float acc = o[d] * c;

			for (uint32_t j = 0; j < n; j++)
				acc = fmaf(t->s[j], ns_kvcache_v_at(kv, a->layer, t->hk, jb + j, d), acc);
			o[d] = acc;
		}
		m = bm;
	}
	if (sink) {
		float mm = fmaxf(m, *sink), c = expf(m - mm);

		l = l * c + expf(*sink - mm);
		for (uint32_t d = 0; d < kv->dv; d++)
			o[d] *= c;
	}
	for (uint32_t d = 0; d < kv->dv; d++)
		out[d] = o[d] / l;
}

void ns_attn_task_scalar(const struct ns_attn_task *t)
{
	for (uint32_t r = 0; r < t->nt * t->G; r++) {
		if (ns_attn_exact(t->a->kv) || t->a->exact)
			ns_attn_row_exact(t->a, t->t0 + r / t->G, t->hk * t->G + r % t->G, t->att);
		else
			s_row_tiled(t, r);
	}
}

/* ---------------------------------------------------------------- dispatch ------------- */

struct s_run {
	const struct ns_attn *a;
	struct ns_attn_ws *ws;
	uint32_t n_tb; /* token blocks */
	uint32_t G;
	void (*fn)(const struct ns_attn_task *t);
};

/* A free slot. With no more pool threads than slots one is always free; with more (over
 * NS_ATTN_MAX_SLOTS threads) a task waits for one, yielding its CPU between passes. */
static uint32_t s_claim(struct ns_attn_ws *ws)
{
	for (;;) {
		for (uint32_t i = 0; i < ws->n_slots; i++) {
			uint32_t free_ = 0;

			if (atomic_compare_exchange_strong(&ws->busy[i], &free_, 1))
				return i;
		}
		sched_yield();
	}
}

static void s_task(void *ctx, uint64_t i)
{
	const struct s_run *run = ctx;
	struct ns_attn_ws *ws = run->ws;
	const uint32_t n_head_kv = run->a->kv->n_head_kv;
	/* the last token blocks (longest contexts) first, so the pool ends evenly */
	const uint32_t tb = run->n_tb - 1 - (uint32_t)(i / n_head_kv);
	const uint32_t slot = s_claim(ws);
	float *base = ws->mem + slot * ws->slot_floats;
	const uint64_t rows = ws->rows;
	struct ns_attn_task t = {
		.a = run->a, .hk = (uint32_t)(i % n_head_kv), .t0 = tb * NS_ATTN_TB, .G = run->G,
	};

	t.nt = run->a->n_tok - t.t0 < NS_ATTN_TB ? run->a->n_tok - t.t0 : NS_ATTN_TB;
	t.att = base;
	t.lda = ns_align_up_u64(ws->n_ctx, NS_KV_TILE);
	t.qd = (double *)(void *)(base + rows * t.lda);
	t.s = (float *)(void *)(t.qd) + ns_align_up_u64(rows * ws->dk * 2, 16);
	t.o = t.s + ns_align_up_u64(rows * NS_ATTN_BLK, 16);
	t.m = t.o + ns_align_up_u64(rows * ws->dv, 16);
	t.l = t.m + ns_align_up_u64(rows, 16);
	run->fn(&t);
	atomic_store(&ws->busy[slot], 0);
}

int ns_attn_run(struct ns_pool *p, struct ns_attn_ws *ws, enum ns_kpath path,
		const struct ns_attn *a)
{
	const struct ns_kvcache *kv = a->kv;
	struct s_run run;

	if (path == NS_KPATH_AUTO)
		path = ns_kpath_best();
	if (!ns_kpath_supported(path))
		return -ENOTSUP;
	if (!kv->n_head_kv || a->n_head % kv->n_head_kv || a->layer >= kv->n_layer ||
	    (uint64_t)a->pos0 + a->n_tok > kv->n_ctx || a->n_head != ws->n_head ||
	    kv->n_head_kv != ws->n_head_kv || kv->dk != ws->dk || kv->dv != ws->dv ||
	    kv->n_ctx > ws->n_ctx)
		return -EINVAL;
	if (a->n_tok == 0)
		return 0;
	if (ns_kvcache_is_ring(kv)) {
		/* every position the chunk reads, pos0 + 1 - window .., must still be in the ring
		 * (a full-causal read of a ring, or a ring too small for the chunk, fails here) */
		const uint32_t need = a->window && a->pos0 + 1 > a->window ?
				      a->pos0 + 1 - a->window : 0;

		if (!a->window || need < kv->lo)
			return -ERANGE;
	}
	run = (struct s_run){ .a = a, .ws = ws, .G = a->n_head / kv->n_head_kv,
			      .n_tb = (a->n_tok + NS_ATTN_TB - 1) / NS_ATTN_TB };
	/* a forced exact pass over a typed cache: the scalar rows (the AVX-512 exact kernel
	 * reads f32 tiles) */
	run.fn = path == NS_KPATH_AVX512 && kv->dk % 16 == 0 && kv->dv % 16 == 0 &&
			 (ns_attn_exact(kv) || !a->exact)
			 ? ns_attn_task_avx512 : ns_attn_task_scalar;
	ns_pool_run(p, s_task, &run, (uint64_t)run.n_tb * kv->n_head_kv);
	return 0;
}
