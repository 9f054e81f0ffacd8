/* cfwd.c - see cfwd.h. The layer, straight-line, as llama.c runs it (x: residual stream on
 * the device, one row per token of the chunk):
 *     xb = rmsnorm(x) * attn_norm
 *     q, k, v = xb Wq^T, xb Wk^T, xb Wv^T (+ biases); qwen3: per-head q/k norm; rope
 *     K[l][pos0..], V[l][pos0..] = k, v;  ao = attention(q, K, V)   (window, sinks, GQA)
 *     x += ao Wo^T (+ bo)
 *     xb = rmsnorm(x) * ffn_norm
 *     dense: x += (silu(xb Wg^T) * (xb Wu^T)) Wd^T
 *     MoE: router on the device, decision to the host (reported, counted, grouped), then per
 *          used expert over its tokens: gather, gate/up (+ biases), act, down (+ bias),
 *          weighted scatter into (token, slot) rows, slots summed in routing order; x += that
 * logits = (rmsnorm(x) * output_norm) Wout^T, in groups of S_LOGIT_TOK tokens.
 * Each "x += ..." is left pending in xb2 and done by the next RMSNorm's launch
 * (ns_cuda_add_rmsnorm: the same bits as the add and the norm apart, one launch fewer).
 * Launches go on one compute stream, except a one-token step's q/k/v and gate/up GEMVs of
 * matrices whole in VRAM, which run side by side on two side streams (forked from and joined
 * back to it by events); the host waits only for the router decision of a MoE layer and for
 * the logits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfwd.h"
#include "ggml_type.h"
#include "llama.h"
#include "moe.h"
#include "ns_util.h"
#include "nscuda.h"
#include "gpu_need.h"
#include "plan.h"

#define S_GRAN NSPLAN_GPU_GRAN      /* ns_vram's allocation granule */
#define S_LOGIT_TOK NSPLAN_GPU_LOGIT_TOK /* tokens per output-head pass */

/* A VRAM window of one tensor. */
struct s_win {
	uint64_t rb, re;
	void *dev;  /* row rb */
};

struct s_tensor {
	struct s_win *w;  /* sorted by rb, disjoint */
	uint32_t n;
};

struct s_dlayer { /* device copies of a layer's vectors (NULL where the host has none) */
	float *attn_norm, *ffn_norm, *q_norm, *k_norm, *bq, *bk, *bv, *bo, *sinks;
	float *router_b, *gate_b, *up_b, *down_b;
};

/* NS_CFWD_PROFILE=1: an event after every step of the pass, times summed per kind, printed
 * when the pass is destroyed (the events cost a microsecond or two each: a diagnosis, not a
 * benchmark). */
enum { P_EMBD, P_NORM, P_ATTN_MM, P_ROPE, P_KV, P_ATTN, P_FFN_MM, P_ELEM, P_ROUTER, P_EXPERT,
       P_HEAD, P_N };
#define S_PROF_EV 8192

struct s_prof {
	bool on;
	ns_cuda_event_t *ev;      /* (S_PROF_EV) */
	uint8_t *kind;            /* (S_PROF_EV) kind of the step ending at ev[i] */
	uint32_t n;
	double ms[P_N];
	uint64_t evals, tokens;
	double wall_ms, host_ms;  /* whole evaluations; their submission (until the first wait) */
};

struct s_cuda {
	struct ns_llama *L;       /* the model description (llama.h), owned */
	void (*L_destroy)(void *);
	const struct ns_model *m;
	struct ns_weights *host;  /* borrowed */
	const struct ns_arch_model *am; /* the bound model (the forward pass's) */
	const struct ns_hparams *hp;    /* its hyperparameters */
	float **dheld;            /* ((n_layer + 1) * NS_SLOT_COUNT) device copies of the held
				   * tensors (held.h's layout), NULL where none */
	struct ns_vram *vram;
	ns_cuda_stream_t cs, xs;  /* compute, copy */
	ns_cuda_stream_t side[2]; /* decode: k, v (or up) GEMVs beside q (gate) on cs */
	ns_cuda_event_t fork, joined[2];
	ns_cuda_event_t copied[2], freed[2];
	void *stage[2];
	uint64_t stage_bytes;
	unsigned next_slot;
	struct s_tensor *t;       /* (n_tensors) VRAM windows */
	struct s_dlayer *dl;      /* (n_layer) */
	float *output_norm, *rope_freqs;
	float *kv_k, *kv_v;       /* (n_layer, n_ctx, kv_dim) */
	uint32_t kv_dim_k, kv_dim_v;
	/* scratch, n_batch tokens */
	float *x, *xb, *xb2, *q, *k, *v, *ao, *hb, *hu, *logits;
	void *attn_ws;
	/* MoE scratch */
	float *m_logits, *m_w, *m_xg, *m_hb, *m_hu, *m_yd, *m_ys;
	int32_t *m_sel, *m_tok, *m_slot;
	int32_t *h_sel, *h_tok, *h_slot;
	float *h_w;
	uint32_t *h_start, *h_fill;
	float *h_x;               /* (n_batch, n_embd) host embedding rows */
	int64_t *h_ids;
	struct ns_cfwd_stats st;
	uint64_t n_batch;
	struct s_prof prof;
	uint64_t prof_submit_ns;
	/* decode graph (cfwd.h) */
	int64_t *dev_pos;          /* (1) position of the token being decoded */
	const void *embd_dev;      /* the token embedding, whole in VRAM (s_embed), or NULL */
	ns_cuda_graph_t graph;     /* captured at the first graph-eligible decode */
	bool graph_ok;             /* dense, every matrix whole in VRAM, not disabled */
	bool capturing;            /* launches are being recorded: position from dev_pos */
	bool act_q8;               /* opts.act_q8 */
	bool res_pending;          /* xb2 is still to be added to x: the next RMSNorm does it
				    * (ns_cuda_add_rmsnorm, one launch instead of two) */
};

static void s_mark(struct s_cuda *c, int kind)
{
	struct s_prof *p = &c->prof;

	if (!p->on || p->n >= S_PROF_EV)
		return;
	if (ns_cuda_event_record(p->ev[p->n], c->cs) == 0)
		p->kind[p->n++] = (uint8_t)kind;
}

/* After the stream is idle: add the steps of this evaluation. */
static void s_prof_collect(struct s_cuda *c)
{
	struct s_prof *p = &c->prof;

	for (uint32_t i = 1; p->on && i < p->n; i++) {
		float ms = 0;

		if (ns_cuda_event_ms(p->ev[i - 1], p->ev[i], &ms) == 0)
			p->ms[p->kind[i]] += ms;
	}
	p->n = 0;
}

static void s_prof_print(const struct s_cuda *c)
{
	static const char *const names[P_N] = { "embedding", "rmsnorm", "q/k/v/o matmul",
		"rope", "kv store", "attention", "ffn matmul", "add/bias/act", "router",
		"experts", "output head" };
	const struct s_prof *p = &c->prof;
	double sum = 0;

	if (!p->on || !p->evals)
		return;
	for (int k = 0; k < P_N; k++)
		sum += p->ms[k];
	fprintf(stderr, "cfwd profile: %llu evaluations, %llu tokens: wall %.3f ms/eval, host "
		"submission %.3f ms/eval, device steps %.3f ms/eval\n",
		(unsigned long long)p->evals, (unsigned long long)p->tokens, p->wall_ms / p->evals,
		p->host_ms / p->evals, sum / p->evals);
	for (int k = 0; k < P_N; k++)
		if (p->ms[k] > 0)
			fprintf(stderr, "cfwd profile:   %-14s %8.3f ms/eval %5.1f%%\n", names[k],
				p->ms[k] / p->evals, 100.0 * p->ms[k] / sum);
}

/* ---------------------------------------------------------------- sizes ---------------- */

/* A tensor the kernels multiply or look rows up in (the table's roles: not held, read). */
static bool s_is_matrix(const struct ns_hparams *hp, const struct ns_model_tensor *t)
{
	const enum ns_role r = ns_arch_role(hp, t);

	return r != NS_ROLE_HELD && r != NS_ROLE_UNUSED;
}

/* *acc += n rounded to the arena granule; false on overflow. */
static bool s_acc(uint64_t *acc, uint64_t a, uint64_t b)
{
	uint64_t n;

	return !ns_mul_u64_overflow(a, b, &n) && n <= UINT64_MAX - S_GRAN &&
	       !ns_add_u64_overflow(*acc, nsplan_gpu_round(n ? n : 1), acc);
}

int ns_cfwd_vram_need(const struct ns_model *m, const struct ns_cfwd_opts *o,
		      struct ns_cfwd_need *n, char *err, size_t errlen)
{
	struct nsplan_gpu_need g;
	struct ns_hparams hp;
	int rc;

	memset(n, 0, sizeof(*n));
	if (!o->n_ctx) {
		ns_errf(err, errlen, "cuda: n_ctx must be > 0");
		return -EINVAL;
	}
	rc = nsplan_gpu_need(m, o->n_ctx, o->n_batch, o->stage_bytes, &g, err, errlen);
	if (rc == 0)
		rc = ns_hparams_load(m, &hp, err, errlen);
	if (rc < 0)
		return rc;
	n->kv = g.kv;
	n->scratch = g.scratch;
	n->vectors = g.vectors;
	n->staging = g.staging;
	for (uint64_t i = 0; o->all_resident && i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];

		if (s_is_matrix(&hp, t) && !s_acc(&n->weights, t->n_bytes, 1))
			goto overflow;
	}
	for (uint64_t i = 0; !o->all_resident && i < o->n_vram; i++) {
		const struct ns_cfwd_window *w = &o->vram[i];

		if (w->tensor >= m->n_tensors || w->row_begin >= w->row_end ||
		    w->row_end > m->tensors[w->tensor].n_rows) {
			ns_errf(err, errlen, "cuda: VRAM window %llu is not a row window of a "
				"tensor", (unsigned long long)i);
			return -EINVAL;
		}
		if (!s_acc(&n->weights, w->row_end - w->row_begin,
			   m->tensors[w->tensor].row_bytes))
			goto overflow;
	}
	/* the windows as allocated stand in for the slack a plan's reserve keeps for them */
	if (ns_add_u64_overflow(g.total - g.slack, n->weights, &n->total))
		goto overflow;
	return 0;
overflow:
	ns_errf(err, errlen, "cuda: VRAM sizes overflow");
	return -EOVERFLOW;
}

/* ---------------------------------------------------------------- setup ---------------- */

static void s_destroy(void *arch)
{
	struct s_cuda *c = arch;

	if (!c)
		return;
	if (c->cs)
		ns_cuda_stream_sync(c->cs);
	if (c->xs)
		ns_cuda_stream_sync(c->xs);
	for (int i = 0; i < 2; i++)
		if (c->side[i])
			ns_cuda_stream_sync(c->side[i]);
	s_prof_print(c);
	ns_cuda_graph_destroy(&c->graph);
	for (uint32_t i = 0; c->prof.ev && i < S_PROF_EV; i++)
		ns_cuda_event_destroy(&c->prof.ev[i]);
	free(c->prof.ev);
	free(c->prof.kind);
	for (int i = 0; i < 2; i++) {
		ns_cuda_event_destroy(&c->copied[i]);
		ns_cuda_event_destroy(&c->freed[i]);
		ns_cuda_event_destroy(&c->joined[i]);
		ns_cuda_stream_destroy(&c->side[i]);
	}
	ns_cuda_event_destroy(&c->fork);
	ns_cuda_stream_destroy(&c->cs);
	ns_cuda_stream_destroy(&c->xs);
	ns_vram_destroy(&c->vram);
	if (c->t) {
		for (uint64_t i = 0; i < c->m->n_tensors; i++)
			free(c->t[i].w);
		free(c->t);
	}
	free(c->dl);
	free(c->dheld);
	free(c->h_sel);
	free(c->h_tok);
	free(c->h_slot);
	free(c->h_w);
	free(c->h_start);
	free(c->h_fill);
	free(c->h_x);
	free(c->h_ids);
	if (c->L_destroy)
		c->L_destroy(c->L);
	free(c);
}

/* *p = n floats (or bytes when sz is 1) of the arena. */
static int s_dalloc(struct s_cuda *c, void **p, uint64_t a, uint64_t b, uint64_t sz, char *err,
		    size_t errlen)
{
	uint64_t n;

	if (ns_mul_u64_overflow(a, b, &n) || ns_mul_u64_overflow(n, sz, &n)) {
		ns_errf(err, errlen, "cuda: allocation size overflows");
		return -EOVERFLOW;
	}
	return ns_vram_alloc(c->vram, n ? n : 1, p, err, errlen);
}

#define S_DA(c, p, a, b, sz) s_dalloc(c, (void **)(p), a, b, sz, err, errlen)

/* Device copy of a host vector of n floats (NULL stays NULL). */
static int s_upload(struct s_cuda *c, float **dev, const float *host, uint64_t n, char *err,
		    size_t errlen)
{
	int rc;

	*dev = NULL;
	if (!host)
		return 0;
	rc = S_DA(c, dev, n, 1, 4);
	if (rc == 0 && (rc = ns_cuda_h2d(*dev, host, n * 4)) < 0)
		ns_errf(err, errlen, "cuda: copy to the device failed: %s", ns_cuda_last_error());
	return rc;
}

/* The device copy of a held slot at a layer (-1: global), or NULL. */
static float *s_dheld(const struct s_cuda *c, int32_t layer, unsigned slot)
{
	return c->dheld[(uint64_t)(layer < 0 ? c->am->n_layer : (uint32_t)layer) * NS_SLOT_COUNT +
			slot];
}

/* Every held tensor (the table's HELD reads, as the host loaded them) to the device, then
 * the layers' named vectors from those copies. */
static int s_vectors(struct s_cuda *c, const struct ns_held *held, char *err, size_t errlen)
{
	const struct ns_arch_model *am = c->am;
	int rc;

	c->dheld = calloc(((uint64_t)am->n_layer + 1) * NS_SLOT_COUNT, sizeof(*c->dheld));
	if (!c->dheld) {
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < am->n_steps; i++) {
		const struct ns_arch_step *st = &am->steps[i];
		const uint64_t at = (uint64_t)(st->layer < 0 ? am->n_layer : (uint32_t)st->layer) *
				    NS_SLOT_COUNT + st->slot;

		if (st->role == NS_ROLE_HELD &&
		    (rc = s_upload(c, &c->dheld[at], ns_held_get(held, st->layer, st->slot),
				   am->m->tensors[st->tensor].n_elems, err, errlen)))
			return rc;
	}
	c->output_norm = s_dheld(c, -1, NS_T_OUTPUT_NORM);
	c->rope_freqs = s_dheld(c, -1, NS_T_ROPE_FREQS);
	for (uint32_t l = 0; l < am->n_layer; l++) {
		const int32_t y = (int32_t)l;
		struct s_dlayer *d = &c->dl[l];

		d->attn_norm = s_dheld(c, y, NS_T_ATTN_NORM);
		d->ffn_norm = s_dheld(c, y, NS_T_FFN_NORM);
		if (!d->ffn_norm) /* gpt-oss names it post_attention_norm */
			d->ffn_norm = s_dheld(c, y, NS_T_ATTN_POST_NORM);
		d->q_norm = s_dheld(c, y, NS_T_ATTN_Q_NORM);
		d->k_norm = s_dheld(c, y, NS_T_ATTN_K_NORM);
		d->bq = s_dheld(c, y, NS_T_ATTN_Q_B);
		d->bk = s_dheld(c, y, NS_T_ATTN_K_B);
		d->bv = s_dheld(c, y, NS_T_ATTN_V_B);
		d->bo = s_dheld(c, y, NS_T_ATTN_OUT_B);
		d->sinks = s_dheld(c, y, NS_T_ATTN_SINKS);
		d->router_b = s_dheld(c, y, NS_T_FFN_GATE_INP_B);
		d->gate_b = s_dheld(c, y, NS_T_FFN_GATE_EXPS_B);
		d->up_b = s_dheld(c, y, NS_T_FFN_UP_EXPS_B);
		d->down_b = s_dheld(c, y, NS_T_FFN_DOWN_EXPS_B);
	}
	return 0;
}

static int s_state(struct s_cuda *c, uint32_t n_ctx, char *err, size_t errlen)
{
	const struct ns_llama *L = c->L;
	const uint64_t nb = c->n_batch;
	const uint64_t nq = (uint64_t)L->n_head * L->dk, nk = (uint64_t)L->n_head_kv * L->dk;
	const uint64_t nv = (uint64_t)L->n_head_kv * L->dv, no = (uint64_t)L->n_head * L->dv;
	const uint64_t F = L->moe ? L->moe->n_ff_exp : 0;
	const uint64_t ff = L->n_ff > F ? L->n_ff : F;
	int rc;

	c->kv_dim_k = (uint32_t)nk;
	c->kv_dim_v = (uint32_t)nv;
	if ((rc = S_DA(c, &c->kv_k, (uint64_t)L->n_layer * n_ctx, nk, 4)) ||
	    (rc = S_DA(c, &c->kv_v, (uint64_t)L->n_layer * n_ctx, nv, 4)) ||
	    (rc = S_DA(c, &c->x, nb, L->n_embd, 4)) || (rc = S_DA(c, &c->xb, nb, L->n_embd, 4)) ||
	    (rc = S_DA(c, &c->xb2, nb, L->n_embd, 4)) || (rc = S_DA(c, &c->q, nb, nq, 4)) ||
	    (rc = S_DA(c, &c->k, nb, nk, 4)) || (rc = S_DA(c, &c->v, nb, nv, 4)) ||
	    (rc = S_DA(c, &c->ao, nb, no, 4)) || (rc = S_DA(c, &c->hb, nb, ff ? ff : 1, 4)) ||
	    (rc = S_DA(c, &c->hu, nb, ff ? ff : 1, 4)) ||
	    (rc = S_DA(c, &c->logits, nb < S_LOGIT_TOK ? nb : S_LOGIT_TOK, L->n_vocab, 4)) ||
	    (rc = S_DA(c, &c->attn_ws, 1, 1,
		       ns_cuda_attn_ws_bytes((uint32_t)nb, L->n_head, n_ctx, L->dv))) ||
	    (rc = S_DA(c, &c->dev_pos, 1, 1, 8)))
		return rc;
	if (L->moe) {
		const uint64_t E = L->moe->n_expert, K = L->moe->n_used;

		if ((rc = S_DA(c, &c->m_logits, nb, E, 4)) || (rc = S_DA(c, &c->m_w, nb, K, 4)) ||
		    (rc = S_DA(c, &c->m_xg, nb, L->n_embd, 4)) ||
		    (rc = S_DA(c, &c->m_yd, nb, L->n_embd, 4)) ||
		    (rc = S_DA(c, &c->m_ys, nb * K, L->n_embd, 4)) ||
		    (rc = S_DA(c, &c->m_sel, nb, K, 4)) || (rc = S_DA(c, &c->m_tok, nb, K, 4)) ||
		    (rc = S_DA(c, &c->m_slot, nb, K, 4)))
			return rc;
		c->m_hb = c->hb;
		c->m_hu = c->hu;
		if (!(c->h_sel = calloc(nb * K, sizeof(int32_t))) ||
		    !(c->h_tok = calloc(nb * K, sizeof(int32_t))) ||
		    !(c->h_slot = calloc(nb * K, sizeof(int32_t))) ||
		    !(c->h_w = calloc(nb * K, sizeof(float))) ||
		    !(c->h_start = calloc(E + 1, sizeof(uint32_t))) ||
		    !(c->h_fill = calloc(E, sizeof(uint32_t))))
			goto oom;
	}
	if (!(c->h_x = calloc(nb * L->n_embd, sizeof(float))) ||
	    !(c->h_ids = calloc(nb, sizeof(int64_t))))
		goto oom;
	return 0;
oom:
	ns_errf(err, errlen, "out of memory");
	return -ENOMEM;
}

static int s_win_cmp(const void *a, const void *b)
{
	const struct ns_cfwd_window *x = a, *y = b;

	if (x->tensor != y->tensor)
		return x->tensor < y->tensor ? -1 : 1;
	return x->row_begin < y->row_begin ? -1 : x->row_begin > y->row_begin;
}

/* visit callback filling one VRAM window: copies block rows to their place. */
struct s_fill {
	uint8_t *dev;      /* row rb of the window */
	uint64_t rb, row_bytes;
};

static int s_fill_cb(void *ctx, uint64_t row0, uint64_t nrows, const void *data)
{
	struct s_fill *f = ctx;

	return ns_cuda_h2d(f->dev + (row0 - f->rb) * f->row_bytes, data, nrows * f->row_bytes);
}

/* Allocate and fill the VRAM windows (all_resident: every matrix, whole, the token embedding
 * too). */
static int s_windows(struct s_cuda *c, const struct ns_cfwd_opts *o, char *err, size_t errlen)
{
	const struct ns_model *m = c->m;
	struct ns_cfwd_window *w = NULL;
	uint64_t n = 0;
	int rc = 0;

	if (o->all_resident) {
		w = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*w));
		if (!w)
			goto oom;
		for (uint64_t i = 0; i < m->n_tensors; i++) {
			const struct ns_model_tensor *t = &m->tensors[i];

			if (!s_is_matrix(c->hp, t))
				continue;
			w[n++] = (struct ns_cfwd_window){ (uint32_t)i, 0, t->n_rows };
		}
	} else if (o->n_vram) {
		w = calloc(o->n_vram, sizeof(*w));
		if (!w)
			goto oom;
		memcpy(w, o->vram, o->n_vram * sizeof(*w));
		n = o->n_vram;
	}
	if (n)
		qsort(w, n, sizeof(*w), s_win_cmp);
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		const struct ns_model_tensor *t;
		struct s_tensor *st;
		struct s_fill f;
		void *dev;

		if (w[i].tensor >= m->n_tensors || w[i].row_begin >= w[i].row_end ||
		    w[i].row_end > m->tensors[w[i].tensor].n_rows ||
		    (i && w[i].tensor == w[i - 1].tensor && w[i].row_begin < w[i - 1].row_end)) {
			ns_errf(err, errlen, "cuda: VRAM windows overlap or leave their tensor");
			rc = -EINVAL;
			break;
		}
		t = &m->tensors[w[i].tensor];
		rc = S_DA(c, &dev, w[i].row_end - w[i].row_begin, t->row_bytes, 1);
		if (rc < 0)
			break;
		st = &c->t[w[i].tensor];
		if (!(st->n & (st->n - 1)) || !st->w) { /* grow at powers of two */
			struct s_win *nw = realloc(st->w, (st->n ? 2 * st->n : 1) * sizeof(*nw));

			if (!nw) {
				free(w);
				goto oom;
			}
			st->w = nw;
		}
		st->w[st->n++] = (struct s_win){ w[i].row_begin, w[i].row_end, dev };
		f = (struct s_fill){ dev, w[i].row_begin, t->row_bytes };
		rc = ns_weights_visit(c->host, w[i].tensor, w[i].row_begin, w[i].row_end,
				      s_fill_cb, &f);
		if (rc < 0)
			ns_errf(err, errlen, "cuda: loading %s rows %llu..%llu into VRAM: %s",
				t->name, (unsigned long long)w[i].row_begin,
				(unsigned long long)w[i].row_end,
				rc == -ENOTSUP ? "the weight provider hands out no raw bytes" :
				rc == -EIO ? ns_cuda_last_error() : ns_weights_error(c->host));
		c->st.vram_bytes += (w[i].row_end - w[i].row_begin) * t->row_bytes;
	}
	free(w);
	return rc;
oom:
	ns_errf(err, errlen, "out of memory");
	return -ENOMEM;
}

/* ---------------------------------------------------------------- matmul --------------- */

static bool s_float_type(uint32_t type)
{
	return type == NS_TYPE_F32 || type == NS_TYPE_F16 || type == NS_TYPE_BF16;
}

/* y[t * ldy + r] for r < nrows = W rows at dev_w times x (n_tok, n_cols). */
static int s_kernel(struct s_cuda *c, const struct ns_model_tensor *t, const void *dev_w,
		    uint64_t nrows, const float *x, uint64_t n_tok, float *y, uint64_t ldy,
		    ns_cuda_stream_t cs)
{
	if (n_tok == 1 && c->act_q8 && !s_float_type(t->type)) {
		/* -E2BIG: x too wide for the kernel's shared memory (decided by n_cols alone, so
		 * every window of the tensor takes the same kernel) */
		const int rc = ns_cuda_gemv_q8(t->type, dev_w, t->ne[0], nrows, x, y, cs);

		if (rc != -E2BIG) {
			c->st.q8_gemvs += rc == 0; /* a graph's launches count once, at capture */
			return rc;
		}
	}
	if (n_tok == 1)
		return ns_cuda_gemv(t->type, dev_w, t->ne[0], nrows, x, y, cs);
	return ns_cuda_gemm_prefill(t->type, dev_w, t->ne[0], nrows, x, t->ne[0], n_tok, y, ldy,
				    cs);
}

struct s_mm {
	struct s_cuda *c;
	const struct ns_model_tensor *t;
	uint64_t row0;     /* row of y's column 0 */
	const float *x;
	uint64_t n_tok;
	float *y;
	uint64_t ldy;
};

/* visit callback of a streamed window: through the staging slots, in pieces that fit. */
static int s_stage_cb(void *ctx, uint64_t row0, uint64_t nrows, const void *data)
{
	struct s_mm *k = ctx;
	struct s_cuda *c = k->c;
	const uint64_t rb = k->t->row_bytes;
	const uint64_t per = c->stage_bytes / rb; /* >= 1: staging holds the widest row */
	const uint8_t *src = data;
	ns_cuda_event_t last = NULL;
	int rc = 0;

	if (ns_cuda_host_pinned(data) == 0) /* an error counts as pinned: only a figure */
		c->st.staged_pageable_bytes += nrows * rb;
	for (uint64_t r = 0; r < nrows && rc == 0; r += per) {
		const uint64_t n = nrows - r < per ? nrows - r : per;
		const unsigned s = c->next_slot;

		c->next_slot ^= 1;
		/* the slot's previous kernel must be done before the copy overwrites it */
		if ((rc = ns_cuda_stream_wait(c->xs, c->freed[s])) ||
		    (rc = ns_cuda_copy_h2d_async(c->stage[s], src + r * rb, n * rb, c->xs,
						 c->copied[s])) ||
		    (rc = ns_cuda_stream_wait(c->cs, c->copied[s])) ||
		    (rc = s_kernel(c, k->t, c->stage[s], n, k->x, k->n_tok,
				   k->y + (row0 + r - k->row0), k->ldy, c->cs)) ||
		    (rc = ns_cuda_event_record(c->freed[s], c->cs)))
			break;
		last = c->copied[s];
		c->st.staged_blocks++;
		c->st.staged_bytes += n * rb;
	}
	/* data dies when we return: its copies must have left it */
	if (rc == 0 && last)
		rc = ns_cuda_event_sync(last);
	return rc;
}

/* The error line of a failed matmul kernel on tensor t; returns rc. */
static int s_kernel_fail(struct ns_fwd *f, const struct ns_model_tensor *t, int rc)
{
	char tb[32];

	ns_errf(f->err, sizeof(f->err), "forward: %s (%s): CUDA kernel failed: %s", t->name,
		ns_type_name(t->type, tb, sizeof(tb)),
		rc == -EIO ? ns_cuda_last_error() : strerror(-rc));
	return rc;
}

/* y (n_tok, ldy) = x W[row0:row_end]^T, resident windows in place, the rest staged. */
static int s_matmul(struct ns_fwd *f, uint32_t tensor, uint64_t row0, uint64_t row_end,
		    const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	struct s_cuda *c = f->arch;
	const struct ns_model_tensor *t = &c->m->tensors[tensor];
	const struct s_tensor *st = &c->t[tensor];
	struct s_mm k = { c, t, row0, x, n_tok, y, ldy };
	uint64_t r = row0;
	int rc = 0;

	for (uint32_t i = 0; i <= st->n && r < row_end && rc == 0; i++) {
		/* rows [r, gap_end) before window i are not resident */
		const uint64_t gap_end = i < st->n && st->w[i].rb < row_end ? st->w[i].rb : row_end;

		if (i < st->n && st->w[i].re <= r)
			continue;
		if (r < gap_end) {
			rc = ns_weights_visit(c->host, tensor, r, gap_end, s_stage_cb, &k);
			if (rc < 0) {
				ns_errf(f->err, sizeof(f->err), "forward: %s rows %llu..%llu: %s",
					t->name, (unsigned long long)r,
					(unsigned long long)gap_end,
					rc == -ENOTSUP ? "no raw bytes from the weight provider" :
					rc == -EIO || rc == -ENODEV ? ns_cuda_last_error() :
					ns_weights_error(c->host));
				return rc;
			}
			r = gap_end;
		}
		if (i < st->n && r < row_end) { /* resident part of window i */
			const struct s_win *w = &st->w[i];
			const uint64_t e = w->re < row_end ? w->re : row_end;

			rc = s_kernel(c, t, (const uint8_t *)w->dev + (r - w->rb) * t->row_bytes,
				      e - r, x, n_tok, y + (r - row0), ldy, c->cs);
			r = e;
		}
	}
	return rc < 0 ? s_kernel_fail(f, t, rc) : rc;
}

/* ---------------------------------------------------------------- forward -------------- */

static int s_cuda_fail(struct ns_fwd *f, const char *what, int rc)
{
	ns_errf(f->err, sizeof(f->err), "forward: %s failed on the GPU: %s", what,
		rc == -EIO ? ns_cuda_last_error() : strerror(-rc));
	return rc;
}

#define S_TRY(what, call)                                                                    \
	do {                                                                                 \
		int s_rc_ = (call);                                                          \
		if (s_rc_ < 0)                                                               \
			return s_cuda_fail(f, what, s_rc_);                                  \
	} while (0)

static void s_rope_of(const struct s_cuda *c, struct ns_cuda_rope *r)
{
	const struct ns_rope *h = &c->L->rope;

	*r = (struct ns_cuda_rope){ .n_dims = h->n_dims, .neox = h->neox,
				    .freq_base = h->freq_base, .freq_scale = h->freq_scale,
				    .dev_freq_factors = c->rope_freqs,
				    .ext_factor = h->ext_factor, .attn_factor = h->attn_factor,
				    .corr_dims = { h->corr_dims[0], h->corr_dims[1] } };
}

static bool s_whole(const struct s_cuda *c, uint32_t t);

/* One token times n_mat (<= 3) whole matrices that share x: y[i] (rows of tensor[i]) = x
 * W_i^T. When every one is whole in VRAM, the first runs on the compute stream and the
 * others at the same time on the side streams (small GEMVs one after another leave most of
 * the GPU idle), and the compute stream waits for them before going on; otherwise one after
 * another through s_matmul. The same kernels either way: the same bits. */
static int s_matmul_par(struct ns_fwd *f, uint32_t n_mat, const uint32_t *tensor,
			const float *x, float *const *y)
{
	struct s_cuda *c = f->arch;
	bool par = n_mat >= 2 && n_mat <= 3;
	int rc = 0;

	for (uint32_t i = 0; i < n_mat && par; i++)
		par = s_whole(c, tensor[i]);
	for (uint32_t i = 0; i < n_mat && !par && rc == 0; i++) {
		const uint64_t rows = c->m->tensors[tensor[i]].n_rows;

		rc = s_matmul(f, tensor[i], 0, rows, x, 1, y[i], rows);
	}
	if (!par)
		return rc;
	S_TRY("fork", ns_cuda_event_record(c->fork, c->cs));
	for (uint32_t i = n_mat; i-- > 0;) { /* the side streams' first, then the compute's */
		const struct ns_model_tensor *t = &c->m->tensors[tensor[i]];
		ns_cuda_stream_t st = i ? c->side[i - 1] : c->cs;

		if (i)
			S_TRY("fork", ns_cuda_stream_wait(st, c->fork));
		rc = s_kernel(c, t, c->t[tensor[i]].w[0].dev, t->n_rows, x, 1, y[i], t->n_rows,
			      st);
		if (rc < 0)
			return s_kernel_fail(f, t, rc);
		if (i)
			S_TRY("join", ns_cuda_event_record(c->joined[i - 1], st));
	}
	for (uint32_t i = 1; i < n_mat; i++)
		S_TRY("join", ns_cuda_stream_wait(c->cs, c->joined[i - 1]));
	return 0;
}

/* xb = rmsnorm(x) * w   (n, n_embd), the pending residual added to x first */
static int s_norm(struct ns_fwd *f, struct s_cuda *c, const float *w, uint32_t n)
{
	const struct ns_llama *L = c->L;

	if (c->res_pending) {
		c->res_pending = false;
		S_TRY("residual + rmsnorm", ns_cuda_add_rmsnorm(c->xb, c->x, c->xb2, w, L->n_embd,
								n, L->eps, c->cs));
	} else {
		S_TRY("rmsnorm", ns_cuda_rmsnorm(c->xb, c->x, w, L->n_embd, n, L->eps, c->cs));
	}
	s_mark(c, P_NORM);
	return 0;
}

static int s_attention_block(struct ns_fwd *f, struct s_cuda *c, uint32_t l, uint32_t n)
{
	const struct ns_llama *L = c->L;
	const struct ns_llama_layer *y = &L->layers[l];
	const struct s_dlayer *d = &c->dl[l];
	const uint32_t pos0 = f->kv->n_past;
	const uint64_t nq = (uint64_t)L->n_head * L->dk, nk = c->kv_dim_k, nv = c->kv_dim_v;
	float *Kl = c->kv_k + (uint64_t)l * f->n_ctx * nk; /* (n_ctx, nk) */
	float *Vl = c->kv_v + (uint64_t)l * f->n_ctx * nv; /* (n_ctx, nv) */
	struct ns_cuda_rope r;
	int rc;

	/* x += xb2 (the previous layer's pending residual); xb = rmsnorm(x) * attn_norm */
	if ((rc = s_norm(f, c, d->attn_norm, n)))
		return rc;
	/* q (n, nq), k (n, nk), v (n, nv); one token: side by side when resident */
	if (n == 1) {
		const uint32_t qkv[3] = { y->wq, y->wk, y->wv };
		float *const out[3] = { c->q, c->k, c->v };

		if ((rc = s_matmul_par(f, 3, qkv, c->xb, out)))
			return rc;
	} else if ((rc = s_matmul(f, y->wq, 0, nq, c->xb, n, c->q, nq)) ||
		   (rc = s_matmul(f, y->wk, 0, nk, c->xb, n, c->k, nk)) ||
		   (rc = s_matmul(f, y->wv, 0, nv, c->xb, n, c->v, nv))) {
		return rc;
	}
	if (d->bq)
		S_TRY("bias", ns_cuda_add_rows(c->q, nq, d->bq, nq, n, c->cs));
	if (d->bk)
		S_TRY("bias", ns_cuda_add_rows(c->k, nk, d->bk, nk, n, c->cs));
	if (d->bv)
		S_TRY("bias", ns_cuda_add_rows(c->v, nv, d->bv, nv, n, c->cs));
	s_mark(c, P_ATTN_MM);
	if (d->q_norm) { /* qwen3: per-head RMS norm before rope */
		S_TRY("q norm", ns_cuda_rmsnorm(c->q, c->q, d->q_norm, L->dk, n * L->n_head,
						L->eps, c->cs));
		S_TRY("k norm", ns_cuda_rmsnorm(c->k, c->k, d->k_norm, L->dk, n * L->n_head_kv,
						L->eps, c->cs));
		s_mark(c, P_NORM);
	}
	s_rope_of(c, &r);
	if (n == 1) {
		/* one launch: q, k rotated at pos0; K[l][pos0] = k, V[l][pos0] = v (a graph reads
		 * the position from dev_pos when replayed) */
		S_TRY("rope + KV store",
		      ns_cuda_rope_kv_store(&r, c->q, L->n_head, c->k, L->n_head_kv, L->dk, c->v,
					    nv, Kl, nk, Vl, nv, pos0,
					    c->capturing ? c->dev_pos : NULL, c->cs));
		s_mark(c, P_ROPE);
		/* ao (1, n_head * dv) */
		if (c->capturing)
			S_TRY("attention",
			      ns_cuda_attention_at(c->q, Kl, nk, Vl, nv, c->dev_pos, f->n_ctx,
						   L->n_head, L->n_head_kv, L->dk, L->dv,
						   L->attn_scale, y->window, d->sinks, c->ao,
						   c->attn_ws, c->cs));
		else
			S_TRY("attention",
			      ns_cuda_attention(c->q, Kl, nk, Vl, nv, 1, pos0, L->n_head,
						L->n_head_kv, L->dk, L->dv, L->attn_scale,
						y->window, d->sinks, c->ao, c->attn_ws, c->cs));
		s_mark(c, P_ATTN);
	} else {
		S_TRY("rope", ns_cuda_rope(&r, c->q, n, L->n_head, L->dk, pos0, c->cs));
		S_TRY("rope", ns_cuda_rope(&r, c->k, n, L->n_head_kv, L->dk, pos0, c->cs));
		s_mark(c, P_ROPE);
		/* cache rows pos0 .. pos0 + n - 1 */
		S_TRY("KV copy", ns_cuda_d2d_async(Kl + (uint64_t)pos0 * nk, c->k,
						   (uint64_t)n * nk * 4, c->cs));
		S_TRY("KV copy", ns_cuda_d2d_async(Vl + (uint64_t)pos0 * nv, c->v,
						   (uint64_t)n * nv * 4, c->cs));
		s_mark(c, P_KV);
		/* ao (n, n_head * dv) */
		S_TRY("attention", ns_cuda_attention(c->q, Kl, nk, Vl, nv, n, pos0, L->n_head,
						     L->n_head_kv, L->dk, L->dv, L->attn_scale,
						     y->window, d->sinks, c->ao, c->attn_ws,
						     c->cs));
		s_mark(c, P_ATTN);
	}
	/* x += ao Wo^T (+ bo)   (n, n_embd) */
	rc = s_matmul(f, y->wo, 0, L->n_embd, c->ao, n, c->xb2, L->n_embd);
	if (rc)
		return rc;
	if (d->bo)
		S_TRY("bias", ns_cuda_add_rows(c->xb2, L->n_embd, d->bo, L->n_embd, n, c->cs));
	s_mark(c, P_ATTN_MM);
	c->res_pending = true; /* x += xb2 in the FFN's RMSNorm */
	return 0;
}

/* Host side of a MoE layer's decision: order = slots grouped by expert (tokens ascending). */
static void s_group(struct s_cuda *c, const struct ns_moe *mo, uint32_t n)
{
	const uint32_t E = mo->n_expert, K = mo->n_used, n_slot = n * K;

	memset(c->h_start, 0, (E + 1) * sizeof(*c->h_start));
	for (uint32_t i = 0; i < n_slot; i++)
		c->h_start[c->h_sel[i] + 1]++;
	for (uint32_t e = 0; e < E; e++) {
		c->h_start[e + 1] += c->h_start[e];
		c->h_fill[e] = c->h_start[e];
	}
	for (uint32_t i = 0; i < n_slot; i++) {
		const uint32_t j = c->h_fill[c->h_sel[i]]++;

		c->h_slot[j] = (int32_t)i;
		c->h_tok[j] = (int32_t)(i / K);
	}
}

static int s_moe_block(struct ns_fwd *f, struct s_cuda *c, uint32_t l, uint32_t n)
{
	const struct ns_moe *mo = c->L->moe;
	const struct ns_moe_layer *y = &mo->layers[l];
	const struct s_dlayer *d = &c->dl[l];
	const uint32_t E = mo->n_expert, K = mo->n_used, D = mo->n_embd, F = mo->n_ff_exp;
	uint64_t *hits = f->expert_hits + (uint64_t)l * E;
	int rc;

	/* router: logits (n, E) (+ bias), then each token's K experts and weights */
	rc = s_matmul(f, y->router, 0, E, c->xb, n, c->m_logits, E);
	if (rc)
		return rc;
	if (d->router_b)
		S_TRY("bias", ns_cuda_add_rows(c->m_logits, E, d->router_b, E, n, c->cs));
	S_TRY("router", ns_cuda_router_topk(c->m_logits, n, E, K, mo->softmax_first, mo->norm_w,
					    mo->w_scale, c->m_sel, c->m_w, c->cs));
	S_TRY("router", ns_cuda_stream_sync(c->cs));
	S_TRY("router", ns_cuda_d2h(c->h_sel, c->m_sel, (uint64_t)n * K * 4));
	S_TRY("router", ns_cuda_d2h(c->h_w, c->m_w, (uint64_t)n * K * 4));
	for (uint32_t i = 0; i < n * K; i++) {
		if (c->h_sel[i] < 0 || (uint32_t)c->h_sel[i] >= E) {
			ns_errf(f->err, sizeof(f->err), "forward: the GPU router chose expert %d "
				"of %u in layer %u", c->h_sel[i], E, l);
			return -EIO;
		}
	}
	if (f->on_route) {
		const struct ns_fwd_route r = {
			.layer = l, .pos0 = f->kv->n_past, .n_tok = n, .n_used = K, .n_expert = E,
			.experts = c->h_sel, .weights = c->h_w,
		};

		rc = f->on_route(f->route_user, &r);
		if (rc < 0) {
			ns_errf(f->err, sizeof(f->err), "forward: routing callback of layer %u "
				"failed: %s", l, strerror(-rc));
			return rc;
		}
	}
	for (uint32_t i = 0; i < n * K; i++)
		hits[c->h_sel[i]]++;
	s_group(c, mo, n);
	/* in c->cs, before the gathers and scatters that read them (pageable: staged at once) */
	S_TRY("upload", ns_cuda_copy_h2d_async(c->m_tok, c->h_tok, (uint64_t)n * K * 4, c->cs,
					       NULL));
	S_TRY("upload", ns_cuda_copy_h2d_async(c->m_slot, c->h_slot, (uint64_t)n * K * 4, c->cs,
					       NULL));
	s_mark(c, P_ROUTER);
	for (uint32_t e = 0; e < E; e++) {
		const uint32_t a = c->h_start[e], mt = c->h_start[e + 1] - a;
		const uint64_t g0 = (uint64_t)e * F, d0 = (uint64_t)e * D;

		if (mt == 0)
			continue;
		/* xg (mt, D) = the rows of xb routed to e */
		S_TRY("gather", ns_cuda_gather_rows(c->m_xg, c->xb, c->m_tok + a, mt, D, c->cs));
		/* hb (mt, F) = act(xg Wg_e^T + bg, xg Wu_e^T + bu) */
		if ((rc = s_matmul(f, y->gate, g0, g0 + F, c->m_xg, mt, c->m_hb, F)) ||
		    (rc = s_matmul(f, y->up, g0, g0 + F, c->m_xg, mt, c->m_hu, F)))
			return rc;
		if (d->gate_b)
			S_TRY("bias", ns_cuda_add_rows(c->m_hb, F, d->gate_b + g0, F, mt, c->cs));
		if (d->up_b)
			S_TRY("bias", ns_cuda_add_rows(c->m_hu, F, d->up_b + g0, F, mt, c->cs));
		S_TRY("activation", ns_cuda_swiglu(c->m_hb, c->m_hu, (uint64_t)mt * F, mo->oai,
						   c->cs));
		/* yd (mt, D) = hb Wd_e^T + bd */
		rc = s_matmul(f, y->down, d0, d0 + D, c->m_hb, mt, c->m_yd, D);
		if (rc)
			return rc;
		if (d->down_b)
			S_TRY("bias", ns_cuda_add_rows(c->m_yd, D, d->down_b + d0, D, mt, c->cs));
		/* ys[t][s] = w[t][s] * yd */
		S_TRY("scatter", ns_cuda_scatter_scaled(c->m_ys, c->m_yd, c->m_slot + a, c->m_w, mt,
							D, c->cs));
		s_mark(c, P_EXPERT);
	}
	/* xb2[t] = ys[t][0] + ys[t][1] + ... in routing order; x += xb2 in the next RMSNorm */
	S_TRY("slot sum", ns_cuda_sum_slots(c->xb2, c->m_ys, n, K, D, c->cs));
	s_mark(c, P_ELEM);
	c->res_pending = true;
	return 0;
}

static int s_ffn_block(struct ns_fwd *f, struct s_cuda *c, uint32_t l, uint32_t n)
{
	const struct ns_llama *L = c->L;
	const struct ns_llama_layer *y = &L->layers[l];
	const uint64_t ff = L->n_ff;
	int rc;

	/* x += xb2 (attention's residual); xb = rmsnorm(x) * ffn_norm   (n, n_embd) */
	if ((rc = s_norm(f, c, c->dl[l].ffn_norm, n)))
		return rc;
	if (L->moe)
		return s_moe_block(f, c, l, n);
	/* hb (n, n_ff) = silu(xb Wg^T) * (xb Wu^T); one token: side by side when resident */
	if (n == 1) {
		const uint32_t gu[2] = { y->w_gate, y->w_up };
		float *const out[2] = { c->hb, c->hu };

		if ((rc = s_matmul_par(f, 2, gu, c->xb, out)))
			return rc;
	} else if ((rc = s_matmul(f, y->w_gate, 0, ff, c->xb, n, c->hb, ff)) ||
		   (rc = s_matmul(f, y->w_up, 0, ff, c->xb, n, c->hu, ff))) {
		return rc;
	}
	s_mark(c, P_FFN_MM);
	S_TRY("swiglu", ns_cuda_swiglu(c->hb, c->hu, (uint64_t)n * ff, false, c->cs));
	s_mark(c, P_ELEM);
	/* x += hb Wd^T   (n, n_embd) */
	rc = s_matmul(f, y->w_down, 0, L->n_embd, c->hb, n, c->xb2, L->n_embd);
	if (rc)
		return rc;
	s_mark(c, P_FFN_MM);
	c->res_pending = true; /* x += xb2 in the next RMSNorm */
	return 0;
}

static int s_eval_layers(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
			 bool all);

/* The layers and the output head of one token into c->logits: launched, or recorded when
 * c->capturing. */
static int s_step_body(struct ns_fwd *f, struct s_cuda *c)
{
	const struct ns_llama *L = c->L;
	int rc;

	for (uint32_t l = 0; l < L->n_layer; l++)
		if ((rc = s_attention_block(f, c, l, 1)) || (rc = s_ffn_block(f, c, l, 1)))
			return rc;
	if ((rc = s_norm(f, c, c->output_norm, 1)))
		return rc;
	return s_matmul(f, L->output, 0, L->n_vocab, c->xb, 1, c->logits, L->n_vocab);
}

/* Logits to the caller (c->cs synchronized: the legacy-stream copy waits for nothing),
 * counted, and counted again when the destination is pageable. */
static int s_download(struct s_cuda *c, float *dst, const float *dev_src, uint64_t bytes)
{
	c->st.logits_bytes += bytes;
	if (ns_cuda_host_pinned(dst) == 0) /* an error counts as pinned: only a figure */
		c->st.logits_pageable_bytes += bytes;
	return ns_cuda_d2h(dst, dev_src, bytes);
}

/* One decoded token by graph replay (x already holds its embedding). Returns 0, 1 when no
 * graph could be made (the caller takes the plain path; graphs stay off), or an error. */
static int s_eval_graph(struct ns_fwd *f, struct s_cuda *c, float *logits)
{
	const int64_t pos = f->kv->n_past;
	int rc, rc_end;

	/* in c->cs, so the graph sees it (a pageable source is staged before the call returns) */
	S_TRY("upload", ns_cuda_copy_h2d_async(c->dev_pos, &pos, sizeof(pos), c->cs, NULL));
	if (!c->graph) {
		rc = ns_cuda_graph_begin(c->cs);
		if (rc == 0) {
			c->capturing = true;
			rc = s_step_body(f, c);
			c->capturing = false;
			rc_end = ns_cuda_graph_end(c->cs, &c->graph); /* always ends the capture */
			rc = rc ? rc : rc_end;
		}
		if (rc < 0) {
			ns_cuda_graph_destroy(&c->graph);
			c->graph_ok = false;
			c->st.graphs = false;
			f->err[0] = 0;
			return 1;
		}
	}
	S_TRY("graph", ns_cuda_graph_launch(c->graph, c->cs));
	S_TRY("sync", ns_cuda_stream_sync(c->cs));
	S_TRY("download", s_download(c, logits, c->logits, (uint64_t)c->L->n_vocab * 4));
	return 0;
}

/* One chunk, timed when profiling. */
static int s_eval_chunk(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
			bool all)
{
	struct s_cuda *c = f->arch;
	uint64_t t0 = c->prof.on ? ns_now_ns() : 0;
	int rc;

	c->prof.n = 0;
	s_mark(c, P_EMBD); /* the start: its own time is not counted */
	rc = s_eval_layers(f, tokens, n, logits, all);
	if (c->prof.on && rc == 0 && ns_cuda_stream_sync(c->cs) == 0) {
		s_prof_collect(c);
		c->prof.evals++;
		c->prof.tokens += n;
		c->prof.wall_ms += (ns_now_ns() - t0) / 1e6;
		c->prof.host_ms += (c->prof_submit_ns - t0) / 1e6;
	}
	return rc;
}

/* x = token_embd[tokens]   (n, n_embd). With the embedding whole in VRAM, each row is
 * dequantized there (the kernel is bit-exact with the CPU's dequantization, so x is the same
 * either way); otherwise the rows come from the host provider, a round trip to nsio. */
static int s_embed(struct ns_fwd *f, struct s_cuda *c, const int32_t *tokens, uint32_t n)
{
	const struct ns_llama *L = c->L;
	const struct ns_model_tensor *te = &c->m->tensors[L->tok_embd];
	int rc;

	if (c->embd_dev) {
		for (uint32_t t = 0; t < n; t++) {
			if (tokens[t] < 0 || (uint64_t)tokens[t] >= te->n_rows) {
				ns_errf(f->err, sizeof(f->err), "forward: token id %d is outside the "
					"vocabulary (%llu)", tokens[t],
					(unsigned long long)te->n_rows);
				return -EINVAL;
			}
			S_TRY("embedding", ns_cuda_dequant(te->type, (const uint8_t *)c->embd_dev +
							   (uint64_t)tokens[t] * te->row_bytes,
							   L->n_embd, 1,
							   c->x + (uint64_t)t * L->n_embd, c->cs));
		}
		return 0;
	}
	for (uint32_t t = 0; t < n; t++)
		c->h_ids[t] = tokens[t];
	rc = ns_weights_get_rows(c->host, L->tok_embd, c->h_ids, n, c->h_x);
	if (rc < 0) {
		ns_errf(f->err, sizeof(f->err), "forward: %s", ns_weights_error(c->host));
		return rc;
	}
	/* in c->cs, ordered before the launches that read x (ns_cuda_h2d's legacy stream is not);
	 * h_x is pageable, staged before the call returns, so it may be refilled at once */
	S_TRY("upload", ns_cuda_copy_h2d_async(c->x, c->h_x, (uint64_t)n * L->n_embd * 4, c->cs,
					       NULL));
	return 0;
}

static int s_eval_layers(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
			 bool all)
{
	struct s_cuda *c = f->arch;
	const struct ns_llama *L = c->L;
	uint32_t t0;
	int rc;

	/* x = token_embd[tokens]   (n, n_embd) */
	rc = s_embed(f, c, tokens, n);
	if (rc < 0)
		return rc;
	c->res_pending = false; /* x is the embedding: nothing to add */
	s_mark(c, P_EMBD);
	if (n == 1 && logits && c->graph_ok && !c->prof.on) {
		rc = s_eval_graph(f, c, logits);
		if (rc <= 0)
			return rc;
		c->res_pending = false; /* a failed capture may have left it set */
	}
	for (uint32_t l = 0; l < L->n_layer; l++) {
		if ((rc = s_attention_block(f, c, l, n)) || (rc = s_ffn_block(f, c, l, n)))
			return rc;
	}
	c->prof_submit_ns = c->prof.on ? ns_now_ns() : 0;
	if (!logits)
		return ns_cuda_stream_sync(c->cs) < 0 ? s_cuda_fail(f, "sync", -EIO) : 0;
	/* logits = (rmsnorm(x) * output_norm) Wout^T   (all ? n : 1, n_vocab) */
	t0 = all ? 0 : n - 1;
	for (uint32_t g = t0; g < n; g += S_LOGIT_TOK) {
		const uint32_t m = n - g < S_LOGIT_TOK ? n - g : S_LOGIT_TOK;

		const uint64_t at = (uint64_t)g * L->n_embd;

		/* x += xb2 (the last layer's residual) for these rows, then the norm */
		if (c->res_pending)
			S_TRY("residual + rmsnorm",
			      ns_cuda_add_rmsnorm(c->xb, c->x + at, c->xb2 + at, c->output_norm,
						  L->n_embd, m, L->eps, c->cs));
		else
			S_TRY("rmsnorm", ns_cuda_rmsnorm(c->xb, c->x + at, c->output_norm,
							 L->n_embd, m, L->eps, c->cs));
		rc = s_matmul(f, L->output, 0, L->n_vocab, c->xb, m, c->logits, L->n_vocab);
		if (rc)
			return rc;
		s_mark(c, P_HEAD);
		if (g == t0)
			c->prof_submit_ns = c->prof.on ? ns_now_ns() : 0;
		if (g + m >= n)
			c->res_pending = false;
		S_TRY("sync", ns_cuda_stream_sync(c->cs));
		S_TRY("download", s_download(c, logits + (uint64_t)(g - t0) * L->n_vocab, c->logits,
					     (uint64_t)m * L->n_vocab * 4));
	}
	return 0;
}

/* ---------------------------------------------------------------- creation ------------- */

int ns_cfwd_probe(char *err, size_t errlen)
{
	if (ns_cuda_device_count() > 0)
		return 0;
	ns_errf(err, errlen, "cuda: no usable CUDA device (no GPU or no driver)");
	return -ENODEV;
}

static int s_cuda_init(struct s_cuda *c, const struct ns_cfwd_opts *o, uint32_t n_ctx,
		       char *err, size_t errlen)
{
	struct ns_cfwd_need need;
	uint64_t budget, reserve, state;
	int rc;

	if ((rc = ns_cfwd_probe(err, errlen)) < 0 ||
	    (rc = ns_cuda_init(o->device, err, errlen)) < 0)
		return rc;
	if ((rc = ns_cfwd_vram_need(c->m, o, &need, err, errlen)) < 0)
		return rc;
	if (ns_cuda_attn_ws_bytes(o->n_batch, c->L->n_head, n_ctx, c->L->dv) !=
	    nsplan_gpu_attn_ws(o->n_batch, c->L->n_head, n_ctx, c->L->dv)) {
		ns_errf(err, errlen, "cuda: attention workspace sizes of attn.cu and gpu_need.c "
			"disagree (a build of mismatched sources)");
		return -EINVAL;
	}
	state = need.total - need.weights;
	reserve = o->reserve_vram ? o->reserve_vram : state;
	budget = o->vram_budget ? o->vram_budget : reserve + need.weights;
	if (reserve > budget) {
		ns_errf(err, errlen, "cuda: --reserve-vram %llu exceeds --vram-budget %llu",
			(unsigned long long)reserve, (unsigned long long)budget);
		return -EINVAL;
	}
	if (state > reserve) {
		ns_errf(err, errlen, "cuda: the KV cache (%llu B for %u positions), scratch (%llu "
			"B), vectors (%llu B) and staging (%llu B) need %llu B of VRAM, more than "
			"the %llu B reserved for them", (unsigned long long)need.kv, n_ctx,
			(unsigned long long)need.scratch, (unsigned long long)need.vectors,
			(unsigned long long)need.staging, (unsigned long long)state,
			(unsigned long long)reserve);
		return -ENOMEM;
	}
	if (need.weights > budget - state) {
		ns_errf(err, errlen, "cuda: the VRAM weights need %llu B, more than the %llu B "
			"--vram-budget %llu leaves after the KV cache, scratch, vectors and staging "
			"(%llu B)", (unsigned long long)need.weights,
			(unsigned long long)(budget - state), (unsigned long long)budget,
			(unsigned long long)state);
		return -ENOMEM;
	}
	if ((rc = ns_vram_new(budget, 0, &c->vram, err, errlen)) < 0)
		return rc;
	c->stage_bytes = need.staging / 2;
	if (getenv("NS_CFWD_PROFILE") && strcmp(getenv("NS_CFWD_PROFILE"), "0")) {
		c->prof.ev = calloc(S_PROF_EV, sizeof(*c->prof.ev));
		c->prof.kind = calloc(S_PROF_EV, 1);
		if (!c->prof.ev || !c->prof.kind) {
			ns_errf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		for (int i = 0; i < S_PROF_EV; i++)
			if ((rc = ns_cuda_event_new(&c->prof.ev[i])) < 0)
				goto fail;
		c->prof.on = true;
	}
	if ((rc = ns_cuda_stream_new(&c->cs)) < 0 || (rc = ns_cuda_stream_new(&c->xs)) < 0 ||
	    (rc = ns_cuda_event_new(&c->fork)) < 0)
		goto fail;
	for (int i = 0; i < 2; i++) {
		if ((rc = ns_cuda_event_new(&c->copied[i])) < 0 ||
		    (rc = ns_cuda_event_new(&c->freed[i])) < 0 ||
		    (rc = ns_cuda_event_new(&c->joined[i])) < 0 ||
		    (rc = ns_cuda_stream_new(&c->side[i])) < 0)
			goto fail;
		if ((rc = S_DA(c, &c->stage[i], 1, c->stage_bytes, 1)) < 0)
			return rc;
	}
	return 0;
fail:
	ns_errf(err, errlen, "cuda: cannot create streams and events: %s", ns_cuda_last_error());
	return rc;
}

/* Tensor t whole in one VRAM window. */
static bool s_whole(const struct s_cuda *c, uint32_t t)
{
	const struct s_tensor *st = &c->t[t];

	return st->n == 1 && st->w[0].rb == 0 && st->w[0].re == c->m->tensors[t].n_rows;
}

/* Every matrix a decode step multiplies (the table's MATRIX reads) is whole in VRAM: no
 * staging, so the step can be captured. */
static bool s_all_resident(const struct s_cuda *c)
{
	for (uint64_t i = 0; i < c->am->n_steps; i++)
		if (c->am->steps[i].role == NS_ROLE_MATRIX && !s_whole(c, c->am->steps[i].tensor))
			return false;
	return true;
}

/* Every matrix the kernels multiply has a type they compute, and whole 32-element units unless
 * it is a float type (F32/F16/BF16 rows may end in a partial unit: the kernels' tail paths).
 * The token embedding is read on the host (rows by id) unless it is also the output head. */
static int s_computable(const struct ns_model *m, const struct ns_hparams *hp, char *err,
			size_t errlen)
{
	char tb[32];

	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		const enum ns_role r = ns_arch_role(hp, t);
		const bool flt = t->type == NS_TYPE_F32 || t->type == NS_TYPE_F16 ||
				 t->type == NS_TYPE_BF16;

		if (r != NS_ROLE_MATRIX && r != NS_ROLE_EXPERT && r != NS_ROLE_ROWS_MATRIX)
			continue;
		if (!ns_cuda_type_supported(t->type)) {
			ns_errf(err, errlen, "cuda: %s is %s, a type the CUDA kernels do not "
				"compute (use the cpu backend)", t->name,
				ns_type_name(t->type, tb, sizeof(tb)));
			return -ENOTSUP;
		}
		if (t->ne[0] % 32 && !flt) {
			ns_errf(err, errlen, "cuda: %s (%s) has rows of %llu elements; the CUDA "
				"kernels need a multiple of 32 for quantized types (use the cpu "
				"backend)", t->name, ns_type_name(t->type, tb, sizeof(tb)),
				(unsigned long long)t->ne[0]);
			return -EINVAL;
		}
	}
	return 0;
}

int ns_cfwd_new(const struct ns_model *m, struct ns_weights *host,
		const struct ns_cfwd_opts *opts, struct ns_fwd **out, char *err, size_t errlen)
{
	struct ns_fwd *f;
	struct s_cuda *c;
	int rc;

	*out = NULL;
	if (!opts) {
		ns_errf(err, errlen, "cuda: no options");
		return -EINVAL;
	}
	rc = ns_fwd_alloc(m, host, opts->n_ctx, opts->n_batch, opts->on_route, opts->route_user,
			  NS_BACKEND_CUDA, &f, err, errlen);
	if (rc < 0)
		return rc;
	if ((rc = s_computable(m, &f->am->hp, err, errlen)) < 0) {
		ns_fwd_destroy(&f);
		return rc;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		ns_fwd_destroy(&f);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* the model description, as the CPU pass builds it, without its host state */
	rc = ns_llama_setup(f, 0, false, err, errlen);
	c->L = f->arch;
	c->L_destroy = f->arch_destroy;
	f->arch = c;
	f->arch_destroy = s_destroy;
	if (rc < 0)
		goto fail;
	f->eval_chunk = s_eval_chunk;
	c->m = m;
	c->am = f->am;
	c->hp = &f->am->hp;
	c->host = host;
	c->n_batch = f->n_batch;
	if (!(c->t = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*c->t))) ||
	    !(c->dl = calloc(c->L->n_layer, sizeof(*c->dl)))) {
		ns_errf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	{
		struct ns_cfwd_opts o = *opts;

		o.n_batch = f->n_batch;
		if ((rc = s_cuda_init(c, &o, f->n_ctx, err, errlen)) < 0 ||
		    (rc = s_state(c, f->n_ctx, err, errlen)) < 0 ||
		    (rc = s_vectors(c, f->held, err, errlen)) < 0 ||
		    (rc = s_windows(c, &o, err, errlen)) < 0)
			goto fail;
		/* the vectors and windows went up on the legacy stream (ns_cuda_h2d), which the
		 * pass's non-blocking streams do not wait for: they must have landed first */
		if ((rc = ns_cuda_sync()) < 0) {
			ns_errf(err, errlen, "cuda: uploading the weights failed: %s",
				ns_cuda_last_error());
			goto fail;
		}
	}
	/* a row lands at x + t * n_embd: the dequant kernel wants 16-byte aligned rows of x */
	if (s_whole(c, c->L->tok_embd) && c->L->n_embd % 4 == 0)
		c->embd_dev = c->t[c->L->tok_embd].w[0].dev;
	c->graph_ok = !opts->no_graphs && !c->L->moe && s_all_resident(c);
	c->act_q8 = opts->act_q8;
	c->st.graphs = c->graph_ok;
	c->st.vram_budget = ns_vram_budget(c->vram);
	c->st.vram_used = ns_vram_used(c->vram);
	*out = f;
	return 0;
fail:
	ns_fwd_destroy(&f);
	return rc;
}

void ns_cfwd_stats(const struct ns_fwd *f, struct ns_cfwd_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (f && f->eval_chunk == s_eval_chunk)
		*out = ((const struct s_cuda *)f->arch)->st;
}
