/* mtp.c - Qwen3.5's MTP block as a drafter (mtp.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "dequant.h"
#include "forward_impl.h"
#include "gemv.h"
#include "ggml_type.h"
#include "llama.h"
#include "moe.h"
#include "mtp.h"
#include "ns_util.h"
#include "ops.h"
#include "rope.h"
#include "threadpool.h"

/* A matrix held as the file stores it (quantized bytes), multiplied by the fused kernels. */
struct s_mat {
	uint32_t type;
	uint64_t n_cols, n_rows;
	void *data;
};

struct ns_mtp {
	uint32_t E, n_head, n_head_kv, dk, n_ff, n_vocab, n_batch, n_ctx;
	uint64_t nq, nk, nv;
	struct s_mat eh, wq, wk, wv, wo, gate, up, down;
	/* qwen35moe: the router, the stacked experts (expert e: rows [e F, (e + 1) F) of
	 * gate/up, [e E, (e + 1) E) of down) and the shared expert (dense gate/up/down above,
	 * n_ff its width) scaled by sigmoid(x . shexp_gate) */
	struct s_mat router, gate_x, up_x, down_x;
	float *shexp_gate, *lgx, *wx, *hx, *ux, *yx;
	int32_t *selx;
	uint8_t *taken;
	uint32_t n_expert, n_used, n_ff_exp;
	bool moe, softmax_first, norm_w;
	float w_scale;
	float *attn_norm, *post_norm, *q_norm, *k_norm, *enorm, *hnorm, *head_norm_own;
	const float *head_norm; /* head_norm_own, or the trunk's output_norm */
	uint32_t embd_t, head_t; /* the provider's tensors for the embedding and the head */
	struct ns_kvcache *kv;   /* one layer; kv->n_past: the positions it holds */
	struct ns_attn_ws *ws;
	/* the trunk's h rows of its last chunk: positions h_pos0 .. h_pos0 + h_n - 1 */
	float *hid;
	uint32_t h_pos0, h_n;
	float *pend;            /* (E) h of the position before the next one the block runs */
	/* scratch for n_batch rows */
	int64_t *ids;
	float *e, *cat, *x, *xb, *xb2, *qg, *q, *k, *v, *ao, *hb, *hu, *cs, *hout, *lg;
	float *capture;
	uint64_t bytes;
};

static int s_alloc(struct ns_mtp *m, float **p, uint64_t a, uint64_t b)
{
	uint64_t n;

	if (ns_mul_u64_overflow(a, b, &n) || ns_mul_u64_overflow(n, sizeof(float), &n) ||
	    n > SIZE_MAX)
		return -EOVERFLOW;
	*p = calloc(1, n ? (size_t)n : 1);
	m->bytes += n;
	return *p ? 0 : -ENOMEM;
}

void ns_mtp_free(struct ns_mtp **mp)
{
	struct ns_mtp *m = *mp;
	struct s_mat *mats[] = { &m->eh, &m->wq, &m->wk, &m->wv, &m->wo, &m->gate, &m->up,
				 &m->down, &m->router, &m->gate_x, &m->up_x, &m->down_x };
	float *vecs[] = { m->attn_norm, m->post_norm, m->q_norm, m->k_norm, m->enorm, m->hnorm,
			  m->head_norm_own, m->hid, m->pend, m->e, m->cat, m->x, m->xb, m->xb2,
			  m->qg, m->q, m->k, m->v, m->ao, m->hb, m->hu, m->cs, m->hout, m->lg,
			  m->shexp_gate, m->lgx, m->wx, m->hx, m->ux, m->yx };

	if (!m)
		return;
	for (size_t i = 0; i < NS_ARRAY_LEN(mats); i++)
		free(mats[i]->data);
	for (size_t i = 0; i < NS_ARRAY_LEN(vecs); i++)
		free(vecs[i]);
	free(m->ids);
	free(m->selx);
	free(m->taken);
	ns_kvcache_destroy(&m->kv);
	ns_attn_ws_destroy(&m->ws);
	free(m);
	*mp = NULL;
}

/* ------------------------------------------------------------ loading ------------------ */

struct s_load {
	const struct ns_model *md;
	int *fds;
	uint32_t layer;
	void (*beat)(void *user); /* the caller's heartbeat, as the weights are read */
	void *user;
	char *err;
	size_t errlen;
};

/* blk.<layer>.<suffix>, or NULL (with a line unless optional) */
static const struct ns_model_tensor *s_find(struct s_load *ld, const char *suffix,
					    bool optional)
{
	char name[128];
	const struct ns_model_tensor *t;

	snprintf(name, sizeof(name), "blk.%u.%s", ld->layer, suffix);
	t = ns_model_find(ld->md, name);
	if (!t && !optional)
		ns_errf(ld->err, ld->errlen, "--draft mtp: the MTP block has no %s", name);
	return t;
}

static int s_read(struct s_load *ld, struct ns_mtp *m, const struct ns_model_tensor *t,
		  void **dst)
{
	int rc;

	if (t->n_bytes > SIZE_MAX || !(*dst = malloc(t->n_bytes ? (size_t)t->n_bytes : 1))) {
		ns_errf(ld->err, ld->errlen, "--draft mtp: out of memory for %s", t->name);
		return -ENOMEM;
	}
	m->bytes += t->n_bytes;
	rc = ns_model_read_tensor_sliced(ld->md, ld->fds, t, NS_MODEL_BEAT_SLICE, ld->beat,
					 ld->user, *dst);
	if (rc < 0)
		ns_errf(ld->err, ld->errlen, "--draft mtp: reading %s: %s", t->name, strerror(-rc));
	return rc;
}

/* matrix blk.L.suffix of n_cols x n_rows */
static int s_mat(struct s_load *ld, struct ns_mtp *m, const char *suffix, uint64_t n_cols,
		 uint64_t n_rows, struct s_mat *out)
{
	const struct ns_model_tensor *t = s_find(ld, suffix, false);

	if (!t)
		return -EINVAL;
	if (t->ne[0] != n_cols || t->n_rows != n_rows) {
		ns_errf(ld->err, ld->errlen, "--draft mtp: %s is [%llu, %llu], want [%llu, %llu]",
			t->name, (unsigned long long)t->ne[0], (unsigned long long)t->n_rows,
			(unsigned long long)n_cols, (unsigned long long)n_rows);
		return -EINVAL;
	}
	out->type = t->type;
	out->n_cols = n_cols;
	out->n_rows = n_rows;
	return s_read(ld, m, t, &out->data);
}

/* vector blk.L.suffix of n floats, dequantized; NULL and 0 when optional and absent */
static int s_vec(struct s_load *ld, struct ns_mtp *m, const char *suffix, uint64_t n,
		 bool optional, float **out)
{
	const struct ns_model_tensor *t = s_find(ld, suffix, optional);
	void *raw = NULL;
	int rc;

	*out = NULL;
	if (!t)
		return optional ? 0 : -EINVAL;
	if (t->n_elems != n) {
		ns_errf(ld->err, ld->errlen, "--draft mtp: %s has %llu elements, want %llu",
			t->name, (unsigned long long)t->n_elems, (unsigned long long)n);
		return -EINVAL;
	}
	if ((rc = s_read(ld, m, t, &raw)) == 0 && (rc = s_alloc(m, out, n, 1)) == 0 &&
	    (rc = ns_dequant_rows(t->type, raw, t->ne[0], t->n_rows, *out)) < 0)
		ns_errf(ld->err, ld->errlen, "--draft mtp: %s: a type we cannot read", t->name);
	m->bytes -= t->n_bytes; /* the raw copy goes */
	free(raw);
	return rc;
}

static int s_scratch(struct ns_mtp *m)
{
	const uint64_t nb = m->n_batch;
	int rc;

	if (!(m->ids = calloc(nb, sizeof(*m->ids))))
		return -ENOMEM;
	m->bytes += nb * sizeof(*m->ids); /* nsplan_mtp_bytes counts what this allocates */
	if ((rc = s_alloc(m, &m->hid, nb, m->E)) || (rc = s_alloc(m, &m->pend, m->E, 1)) ||
	    (rc = s_alloc(m, &m->e, nb, m->E)) || (rc = s_alloc(m, &m->cat, nb, 2ull * m->E)) ||
	    (rc = s_alloc(m, &m->x, nb, m->E)) || (rc = s_alloc(m, &m->xb, nb, m->E)) ||
	    (rc = s_alloc(m, &m->xb2, nb, m->E)) || (rc = s_alloc(m, &m->qg, nb, 2 * m->nq)) ||
	    (rc = s_alloc(m, &m->q, nb, m->nq)) || (rc = s_alloc(m, &m->k, nb, m->nk)) ||
	    (rc = s_alloc(m, &m->v, nb, m->nv)) || (rc = s_alloc(m, &m->ao, nb, m->nq)) ||
	    (rc = s_alloc(m, &m->hb, nb, m->n_ff)) || (rc = s_alloc(m, &m->hu, nb, m->n_ff)) ||
	    (rc = s_alloc(m, &m->cs, 2ull * m->dk, 1)) || (rc = s_alloc(m, &m->hout, nb, m->E)) ||
	    (rc = s_alloc(m, &m->lg, m->n_vocab, 1)))
		return rc;
	if (!m->moe)
		return 0;
	/* one token's routing and one expert's activations at a time */
	if (!(m->selx = calloc(m->n_used, sizeof(*m->selx))) ||
	    !(m->taken = calloc(m->n_expert, 1)))
		return -ENOMEM;
	m->bytes += m->n_used * sizeof(*m->selx) + m->n_expert;
	if ((rc = s_alloc(m, &m->lgx, m->n_expert, 1)) || (rc = s_alloc(m, &m->wx, m->n_used, 1)) ||
	    (rc = s_alloc(m, &m->hx, m->n_ff_exp, 1)) || (rc = s_alloc(m, &m->ux, m->n_ff_exp, 1)) ||
	    (rc = s_alloc(m, &m->yx, m->E, 1)))
		return rc;
	return 0;
}

int ns_mtp_new(struct ns_fwd *f, void (*beat)(void *user), void *user, struct ns_mtp **out,
	       char *err, size_t errlen)
{
	const struct ns_hparams *hp = &f->am->hp;
	const struct ns_llama *L = f->llama;
	struct s_load ld = { .md = f->am->m, .layer = hp->n_layer, .beat = beat, .user = user,
			     .err = err, .errlen = errlen };
	const struct ns_model_tensor *t;
	struct ns_mtp *m;
	char name[128];
	int rc;

	*out = NULL;
	if (!hp->n_nextn) {
		ns_errf(err, errlen, "--draft mtp: %s has no MTP block (no %s.nextn_predict_layers)",
			hp->name[0] ? hp->name : "the model", hp->arch);
		return -ENOENT;
	}
	if ((strcmp(hp->arch, "qwen35") && strcmp(hp->arch, "qwen35moe")) || !f->mtp_h || !L) {
		ns_errf(err, errlen, "--draft mtp: runs the MTP block of qwen35 / qwen35moe (not "
			"%s%s)", hp->arch, f->mtp_h ? "" : " on this pass");
		return -ENOTSUP;
	}
	if (!(m = calloc(1, sizeof(*m)))) {
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m->E = L->n_embd;
	m->n_head = L->n_head;
	m->n_head_kv = L->n_head_kv;
	m->dk = L->dk;
	m->nq = (uint64_t)m->n_head * m->dk;
	m->nk = m->nv = (uint64_t)m->n_head_kv * m->dk;
	m->n_vocab = L->n_vocab;
	m->n_batch = f->n_batch;
	m->n_ctx = f->n_ctx;
	snprintf(name, sizeof(name), "blk.%u.ffn_gate_inp.weight", ld.layer);
	m->moe = ns_model_find(ld.md, name) != NULL;
	snprintf(name, sizeof(name), m->moe ? "blk.%u.ffn_gate_shexp.weight" :
		 "blk.%u.ffn_gate.weight", ld.layer);
	t = ns_model_find(ld.md, name);
	if (!t) {
		ns_errf(err, errlen, "--draft mtp: the MTP block has no %s", name);
		rc = -EINVAL;
		goto fail;
	}
	m->n_ff = (uint32_t)t->n_rows;
	if (m->moe) { /* qwen35moe: the trunk's routing rules (moe.c) */
		m->n_expert = (uint32_t)f->am->dim[NS_DIM_EXPERT];
		m->n_used = hp->n_expert_used;
		m->n_ff_exp = (uint32_t)f->am->dim[NS_DIM_FF_EXP];
		m->softmax_first = f->am->arch->router == NS_ROUTER_SOFTMAX;
		m->norm_w = f->am->moe_norm_w;
		m->w_scale = f->am->moe_w_scale;
		if (!m->n_expert || !m->n_used || m->n_used > m->n_expert || !m->n_ff_exp) {
			ns_errf(err, errlen, "--draft mtp: the MTP block's experts (%u of %u, width "
				"%u)", m->n_used, m->n_expert, m->n_ff_exp);
			rc = -EINVAL;
			goto fail;
		}
	}
	if ((rc = ns_model_open_fds(ld.md, &ld.fds, err, errlen)))
		goto fail;
	if (m->moe &&
	    ((rc = s_mat(&ld, m, "ffn_gate_inp.weight", m->E, m->n_expert, &m->router)) ||
	     (rc = s_mat(&ld, m, "ffn_gate_exps.weight", m->E,
			 (uint64_t)m->n_ff_exp * m->n_expert, &m->gate_x)) ||
	     (rc = s_mat(&ld, m, "ffn_up_exps.weight", m->E,
			 (uint64_t)m->n_ff_exp * m->n_expert, &m->up_x)) ||
	     (rc = s_mat(&ld, m, "ffn_down_exps.weight", m->n_ff_exp,
			 (uint64_t)m->E * m->n_expert, &m->down_x)) ||
	     (rc = s_vec(&ld, m, "ffn_gate_inp_shexp.weight", m->E, false, &m->shexp_gate))))
		goto fail;
	if ((rc = s_mat(&ld, m, "nextn.eh_proj.weight", 2ull * m->E, m->E, &m->eh)) ||
	    (rc = s_mat(&ld, m, "attn_q.weight", m->E, 2 * m->nq, &m->wq)) ||
	    (rc = s_mat(&ld, m, "attn_k.weight", m->E, m->nk, &m->wk)) ||
	    (rc = s_mat(&ld, m, "attn_v.weight", m->E, m->nv, &m->wv)) ||
	    (rc = s_mat(&ld, m, "attn_output.weight", m->nq, m->E, &m->wo)) ||
	    (rc = s_mat(&ld, m, m->moe ? "ffn_gate_shexp.weight" : "ffn_gate.weight", m->E,
			m->n_ff, &m->gate)) ||
	    (rc = s_mat(&ld, m, m->moe ? "ffn_up_shexp.weight" : "ffn_up.weight", m->E, m->n_ff,
			&m->up)) ||
	    (rc = s_mat(&ld, m, m->moe ? "ffn_down_shexp.weight" : "ffn_down.weight", m->n_ff,
			m->E, &m->down)) ||
	    (rc = s_vec(&ld, m, "attn_norm.weight", m->E, false, &m->attn_norm)) ||
	    (rc = s_vec(&ld, m, "post_attention_norm.weight", m->E, false, &m->post_norm)) ||
	    (rc = s_vec(&ld, m, "attn_q_norm.weight", m->dk, false, &m->q_norm)) ||
	    (rc = s_vec(&ld, m, "attn_k_norm.weight", m->dk, false, &m->k_norm)) ||
	    (rc = s_vec(&ld, m, "nextn.enorm.weight", m->E, false, &m->enorm)) ||
	    (rc = s_vec(&ld, m, "nextn.hnorm.weight", m->E, false, &m->hnorm)) ||
	    (rc = s_vec(&ld, m, "nextn.shared_head_norm.weight", m->E, true,
			&m->head_norm_own)))
		goto fail;
	m->head_norm = m->head_norm_own ? m->head_norm_own : L->output_norm;
	/* the block's own embedding and head when the file has them, else the trunk's */
	snprintf(name, sizeof(name), "blk.%u.nextn.embed_tokens.weight", ld.layer);
	m->embd_t = ns_model_find(ld.md, name) ? (uint32_t)ns_model_find_index(ld.md, name) :
						 L->tok_embd;
	snprintf(name, sizeof(name), "blk.%u.nextn.shared_head_head.weight", ld.layer);
	m->head_t = ns_model_find(ld.md, name) ? (uint32_t)ns_model_find_index(ld.md, name) :
						 L->output;
	if ((rc = ns_kvcache_new(1, m->n_ctx, m->n_head_kv, m->dk, m->dk, NS_KV_F32, NS_KV_F32,
				 &m->kv)) ||
	    (rc = s_scratch(m))) {
		ns_errf(err, errlen, "--draft mtp: cannot allocate its cache and scratch: %s",
			strerror(-rc));
		goto fail;
	}
	m->bytes += ns_kvcache_bytes(m->kv);
	{
		struct ns_pool *pool = ns_weights_pool(f->w);

		m->ws = ns_attn_ws_new(pool ? ns_pool_threads(pool) : 1, m->n_head, m->n_head_kv,
				       m->dk, m->dk, m->n_ctx);
	}
	if (!m->ws) {
		ns_errf(err, errlen, "--draft mtp: out of memory for attention scratch");
		rc = -ENOMEM;
		goto fail;
	}
	ns_model_close_fds(ld.md, &ld.fds);
	*out = m;
	return 0;
fail:
	if (ld.fds)
		ns_model_close_fds(ld.md, &ld.fds);
	ns_mtp_free(&m);
	return rc;
}

/* ------------------------------------------------------------ the block ---------------- */

static int s_mm(struct ns_fwd *f, const struct s_mat *w, const float *x, uint32_t n, float *y)
{
	int rc = ns_gemm_ex(ns_weights_pool(f->w), NULL, w->type, w->data, w->n_cols, w->n_rows,
			    x, n, y, w->n_rows);

	if (rc < 0)
		ns_errf(f->err, sizeof(f->err), "forward: the MTP block's matmul: %s",
			strerror(-rc));
	return rc;
}

/* One expert's rows of a stacked matrix as a matrix of its own. */
static struct s_mat s_expert(const struct s_mat *w, uint32_t e, uint64_t rows)
{
	uint64_t rb = 0;
	struct s_mat x = { w->type, w->n_cols, rows, NULL };

	(void)ns_type_row_bytes(w->type, w->n_cols, &rb); /* the loader read it with this size */
	x.data = (uint8_t *)w->data + (uint64_t)e * rows * rb;
	return x;
}

/* qwen35moe: xb2 (n, E) holds the shared expert's SwiGLU; scale it by sigmoid(xb .
 * shexp_gate) and add the routed experts, each token's top k by the trunk's rules (moe.h),
 * summed in slot order. */
static int s_moe(struct ns_fwd *f, struct ns_mtp *m, uint32_t n)
{
	const uint32_t E = m->E, F = m->n_ff_exp;
	int rc;

	for (uint32_t t = 0; t < n; t++) {
		const float *x = m->xb + (uint64_t)E * t;
		float *o = m->xb2 + (uint64_t)E * t;

		memcpy(m->yx, o, (size_t)E * sizeof(float)); /* the shared expert's output */
		memset(o, 0, (size_t)E * sizeof(float));
		if ((rc = s_mm(f, &m->router, x, 1, m->lgx)))
			return rc;
		ns_moe_route_token(m->lgx, m->n_expert, m->n_used, m->softmax_first, m->norm_w,
				   m->w_scale, m->taken, m->selx, m->wx);
		for (uint32_t s = 0; s < m->n_used; s++) {
			const uint32_t e = (uint32_t)m->selx[s];
			struct s_mat g = s_expert(&m->gate_x, e, F), u = s_expert(&m->up_x, e, F);
			struct s_mat d = s_expert(&m->down_x, e, E);

			if ((rc = s_mm(f, &g, x, 1, m->hx)) || (rc = s_mm(f, &u, x, 1, m->ux)))
				return rc;
			for (uint32_t i = 0; i < F; i++)
				m->hx[i] = ns_silu(m->hx[i]) * m->ux[i];
			if ((rc = s_mm(f, &d, m->hx, 1, m->e))) /* (the embedding rows are spent) */
				return rc;
			for (uint32_t i = 0; i < E; i++)
				o[i] += m->wx[s] * m->e[i];
		}
		ns_moe_shexp_add(o, m->yx, x, m->shexp_gate, E);
	}
	return 0;
}

/* Run the block over n rows: tokens ids, h rows h (n, E), at the cache's end; hout (n, E)
 * the block's h', logits (n, n_vocab) when not NULL. */
static int s_block(struct ns_fwd *f, struct ns_mtp *m, const int32_t *ids, const float *h,
		   uint32_t n, float *logits)
{
	const struct ns_llama *L = f->llama;
	const uint32_t E = m->E, pos0 = m->kv->n_past;
	const uint64_t nq = m->nq, nk = m->nk, nv = m->nv;
	int rc;

	if (pos0 + n > m->n_ctx)
		return -ENOSPC;
	for (uint32_t t = 0; t < n; t++)
		m->ids[t] = ids[t];
	if ((rc = ns_fwd_rows(f, m->embd_t, m->ids, n, m->e)))
		return rc;
	/* cat = [rmsnorm(e) * enorm | rmsnorm(h) * hnorm]   (n, 2E); x = cat eh_proj^T */
	for (uint32_t t = 0; t < n; t++) {
		float *c = m->cat + 2ull * E * t;

		ns_rmsnorm(c, m->e + (uint64_t)E * t, m->enorm, E, L->eps);
		ns_rmsnorm(c + E, h + (uint64_t)E * t, m->hnorm, E, L->eps);
	}
	if ((rc = s_mm(f, &m->eh, m->cat, n, m->x)))
		return rc;
	/* gated attention (llama.c's s_attention_block for a gated layer) */
	for (uint32_t t = 0; t < n; t++)
		ns_rmsnorm(m->xb + (uint64_t)E * t, m->x + (uint64_t)E * t, m->attn_norm, E,
			   L->eps);
	if ((rc = s_mm(f, &m->wq, m->xb, n, m->qg)) || (rc = s_mm(f, &m->wk, m->xb, n, m->k)) ||
	    (rc = s_mm(f, &m->wv, m->xb, n, m->v)))
		return rc;
	for (uint32_t t = 0; t < n; t++) {
		const float *row = m->qg + t * 2 * nq; /* (n_head, 2, dk): [q | gate] */
		float *qt = m->q + t * nq, *kt = m->k + t * nk;

		for (uint32_t hd = 0; hd < m->n_head; hd++) {
			memcpy(qt + (uint64_t)hd * m->dk, row + 2ull * hd * m->dk,
			       m->dk * sizeof(float));
			ns_rmsnorm(qt + (uint64_t)hd * m->dk, qt + (uint64_t)hd * m->dk, m->q_norm,
				   m->dk, L->eps);
		}
		for (uint32_t hd = 0; hd < m->n_head_kv; hd++)
			ns_rmsnorm(kt + (uint64_t)hd * m->dk, kt + (uint64_t)hd * m->dk, m->k_norm,
				   m->dk, L->eps);
		ns_rope_angles(&L->rope, (int64_t)pos0 + t, m->cs);
		ns_rope_rotate(&L->rope, m->cs, qt, m->n_head, m->dk);
		ns_rope_rotate(&L->rope, m->cs, kt, m->n_head_kv, m->dk);
		ns_kvcache_store(m->kv, 0, pos0 + t, kt, m->v + t * nv);
	}
	{
		const struct ns_attn a = { .kv = m->kv, .layer = 0, .q = m->q, .out = m->ao,
					   .n_tok = n, .pos0 = pos0, .n_head = m->n_head,
					   .scale = L->attn_scale };

		if ((rc = ns_attn_run(ns_weights_pool(f->w), m->ws, NS_KPATH_AUTO, &a)) < 0) {
			ns_errf(f->err, sizeof(f->err), "forward: the MTP block's attention: %s",
				strerror(-rc));
			return rc;
		}
	}
	m->kv->n_past = pos0 + n;
	for (uint32_t t = 0; t < n; t++) { /* ao *= sigmoid(gate) */
		const float *g = m->qg + t * 2 * nq;
		float *o = m->ao + t * nq;

		for (uint32_t hd = 0; hd < m->n_head; hd++)
			for (uint32_t i = 0; i < m->dk; i++)
				o[(uint64_t)hd * m->dk + i] *=
					1.0f / (1.0f + expf(-g[(2ull * hd + 1) * m->dk + i]));
	}
	if ((rc = s_mm(f, &m->wo, m->ao, n, m->xb2)))
		return rc;
	for (uint64_t i = 0; i < (uint64_t)n * E; i++)
		m->x[i] += m->xb2[i];
	/* x += SwiGLU(rmsnorm(x) * post_attention_norm) */
	for (uint32_t t = 0; t < n; t++)
		ns_rmsnorm(m->xb + (uint64_t)E * t, m->x + (uint64_t)E * t, m->post_norm, E, L->eps);
	if ((rc = s_mm(f, &m->gate, m->xb, n, m->hb)) || (rc = s_mm(f, &m->up, m->xb, n, m->hu)))
		return rc;
	for (uint64_t i = 0; i < (uint64_t)n * m->n_ff; i++)
		m->hb[i] = ns_silu(m->hb[i]) * m->hu[i];
	if ((rc = s_mm(f, &m->down, m->hb, n, m->xb2)))
		return rc;
	if (m->moe && (rc = s_moe(f, m, n)))
		return rc;
	for (uint64_t i = 0; i < (uint64_t)n * E; i++)
		m->x[i] += m->xb2[i];
	/* h' = rmsnorm(x) * shared_head_norm; logits = h' head^T */
	for (uint32_t t = 0; t < n; t++)
		ns_rmsnorm(m->hout + (uint64_t)E * t, m->x + (uint64_t)E * t, m->head_norm, E,
			   L->eps);
	if (!logits)
		return 0;
	return ns_fwd_matmul(f, m->head_t, 0, m->n_vocab, m->hout, n, logits, m->n_vocab);
}

/* m->pend = the trunk's h of position p - 1 (zeros for p = 0); false when not kept */
static bool s_pending(struct ns_mtp *m, uint32_t p)
{
	if (p == 0) {
		memset(m->pend, 0, (size_t)m->E * sizeof(float));
		return true;
	}
	if (p - 1 < m->h_pos0 || p - 1 >= m->h_pos0 + m->h_n)
		return false;
	memcpy(m->pend, m->hid + (uint64_t)(p - 1 - m->h_pos0) * m->E,
	       (size_t)m->E * sizeof(float));
	return true;
}

void ns_mtp_cut(struct ns_mtp *m, uint32_t keep)
{
	if (m->kv->n_past > keep)
		m->kv->n_past = keep;
	if (m->h_pos0 + m->h_n > keep)
		m->h_n = keep > m->h_pos0 ? keep - m->h_pos0 : 0;
}

int ns_mtp_follow(struct ns_fwd *f, struct ns_mtp *m, const int32_t *tokens, const float *h,
		  uint32_t n, uint32_t pos0)
{
	const uint64_t E = m->E;
	bool known;
	int rc;

	/* its drafts past the trunk's end go: the chunk's positions are written again */
	ns_mtp_cut(m, pos0);
	known = m->kv->n_past == pos0 && s_pending(m, pos0);
	if (!known) /* a lost h: the block starts over here, its earlier positions empty */
		memset(m->pend, 0, (size_t)E * sizeof(float));
	m->kv->n_past = pos0;
	/* rows (token p, h of p - 1): the pending h, then the chunk's own h but its last */
	memcpy(m->xb2, m->pend, (size_t)E * sizeof(float));
	if (n > 1)
		memcpy(m->xb2 + E, h, (size_t)(n - 1) * E * sizeof(float));
	memcpy(m->hid, h, (size_t)n * E * sizeof(float));
	m->h_pos0 = pos0;
	m->h_n = n;
	rc = s_block(f, m, tokens, m->xb2, n, m->capture);
	return rc == -ENOSPC ? 0 : rc; /* the trunk reports a full context itself */
}

int ns_mtp_draft(struct ns_fwd *f, struct ns_mtp *m, int32_t id, uint32_t k, int32_t *out,
		 float *logits)
{
	const uint32_t P = f->kv->n_past;
	int rc;

	ns_mtp_cut(m, P);
	if (k == 0 || m->kv->n_past != P || !s_pending(m, P))
		return 0;
	if (k > m->n_ctx - P)
		k = m->n_ctx - P;
	memcpy(m->xb2, m->pend, (size_t)m->E * sizeof(float));
	for (uint32_t i = 0; i < k; i++) {
		float *lg = logits ? logits + (uint64_t)i * m->n_vocab : m->lg;
		uint32_t best = 0;

		if ((rc = s_block(f, m, &id, m->xb2, 1, lg)) < 0)
			return rc;
		for (uint32_t j = 1; j < m->n_vocab; j++)
			if (lg[j] > lg[best])
				best = j;
		out[i] = id = (int32_t)best;
		memcpy(m->xb2, m->hout, (size_t)m->E * sizeof(float)); /* the block's own h' */
	}
	return (int)k;
}

void ns_mtp_capture(struct ns_mtp *m, float *logits)
{
	m->capture = logits;
}

uint64_t ns_mtp_bytes(const struct ns_mtp *m)
{
	return m ? m->bytes : 0;
}

/* ------------------------------------------------------------ forward.h ---------------- */

int ns_fwd_mtp_open(struct ns_fwd *f, void (*beat)(void *user), void *user, char *err,
		    size_t errlen)
{
	if (f->mtp)
		return 0;
	return ns_mtp_new(f, beat, user, &f->mtp, err, errlen);
}

int ns_fwd_mtp_draft(struct ns_fwd *f, int32_t id, uint32_t k, int32_t *out, float *logits)
{
	if (!f->mtp) {
		ns_errf(f->err, sizeof(f->err), "forward: no MTP block open (ns_fwd_mtp_open)");
		return -EINVAL;
	}
	if (id < 0 || (uint64_t)id >= f->n_tok_rows) {
		ns_errf(f->err, sizeof(f->err), "forward: token id %d out of range", id);
		return -EINVAL;
	}
	return ns_mtp_draft(f, f->mtp, id, k, out, logits);
}

void ns_fwd_mtp_capture(struct ns_fwd *f, float *logits)
{
	if (f->mtp)
		ns_mtp_capture(f->mtp, logits);
}

uint64_t ns_fwd_mtp_bytes(const struct ns_fwd *f)
{
	return ns_mtp_bytes(f->mtp);
}
