/* cfwd_vram.c - what the pass takes of VRAM and puts there: the sizes (ns_cfwd_vram_need),
 * the KV cache and scratch, the held vectors (uploaded from the table's HELD reads), and the
 * weight windows copied once from the host provider. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cfwd_internal.h"
#include "deltanet.h"

/* A tensor the kernels multiply or look rows up in (the table's roles: not held, read). */
static bool cfwd_is_matrix(const struct ns_hparams *hp, const struct ns_model_tensor *t)
{
	const enum ns_role r = ns_arch_role(hp, t);

	return r != NS_ROLE_HELD && r != NS_ROLE_UNUSED;
}

/* *acc += n rounded to the arena granule; false on overflow. */
static bool s_acc(uint64_t *acc, uint64_t a, uint64_t b)
{
	uint64_t n;

	return !ns_mul_u64_overflow(a, b, &n) && n <= UINT64_MAX - CFWD_GRAN &&
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
	if (o->kv_k < NS_KV_F32 || o->kv_k > NS_KV_Q8_0 || o->kv_v < NS_KV_F32 ||
	    o->kv_v > NS_KV_Q8_0) {
		ns_errf(err, errlen, "cuda: KV cache types %d/%d are not f32, f16 or q8_0",
			o->kv_k, o->kv_v);
		return -EINVAL;
	}
	rc = nsplan_gpu_need_rb(m, o->n_ctx, o->n_batch, o->stage_bytes,
				(enum ns_kv_type)o->kv_k, (enum ns_kv_type)o->kv_v, o->n_rollback,
				&g, err, errlen);
	if (rc == 0)
		rc = ns_hparams_load(m, &hp, err, errlen);
	if (rc < 0)
		return rc;
	n->kv = g.kv;
	n->recurrent = g.recurrent;
	n->scratch = g.scratch;
	n->vectors = g.vectors;
	n->staging = g.staging;
	for (uint64_t i = 0; o->all_resident && i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];

		if (cfwd_is_matrix(&hp, t) && !s_acc(&n->weights, t->n_bytes, 1))
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

/* *p = n floats (or bytes when sz is 1) of the arena. */
int cfwd_dalloc(struct cfwd *c, void **p, uint64_t a, uint64_t b, uint64_t sz, char *err,
		    size_t errlen)
{
	uint64_t n;

	if (ns_mul_u64_overflow(a, b, &n) || ns_mul_u64_overflow(n, sz, &n)) {
		ns_errf(err, errlen, "cuda: allocation size overflows");
		return -EOVERFLOW;
	}
	return ns_vram_alloc(c->vram, n ? n : 1, p, err, errlen);
}

/* Device copy of a host vector of n floats (NULL stays NULL). */
static int s_upload(struct cfwd *c, float **dev, const float *host, uint64_t n, char *err,
		    size_t errlen)
{
	int rc;

	*dev = NULL;
	if (!host)
		return 0;
	rc = CFWD_DA(c, dev, n, 1, 4);
	if (rc == 0 && (rc = ns_cuda_h2d(*dev, host, n * 4)) < 0)
		ns_errf(err, errlen, "cuda: copy to the device failed: %s", ns_cuda_last_error());
	return rc;
}

float *cfwd_dheld(const struct cfwd *c, int32_t layer, unsigned slot)
{
	return c->dheld[(uint64_t)(layer < 0 ? c->am->n_layer : (uint32_t)layer) * NS_SLOT_COUNT +
			slot];
}

/* Every held tensor (the table's HELD reads, as the host loaded them) to the device, then
 * the layers' named vectors from those copies. */
int cfwd_vectors(struct cfwd *c, const struct ns_held *held, char *err, size_t errlen)
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
	c->output_norm = cfwd_dheld(c, -1, NS_T_OUTPUT_NORM);
	c->rope_freqs = cfwd_dheld(c, -1, NS_T_ROPE_FREQS);
	for (uint32_t l = 0; l < am->n_layer; l++) {
		const int32_t y = (int32_t)l;
		struct cfwd_dlayer *d = &c->dl[l];

		d->attn_norm = cfwd_dheld(c, y, NS_T_ATTN_NORM);
		d->ffn_norm = cfwd_dheld(c, y, NS_T_FFN_NORM);
		if (!d->ffn_norm) /* gpt-oss names it post_attention_norm */
			d->ffn_norm = cfwd_dheld(c, y, NS_T_ATTN_POST_NORM);
		d->q_norm = cfwd_dheld(c, y, NS_T_ATTN_Q_NORM);
		d->k_norm = cfwd_dheld(c, y, NS_T_ATTN_K_NORM);
		d->bq = cfwd_dheld(c, y, NS_T_ATTN_Q_B);
		d->bk = cfwd_dheld(c, y, NS_T_ATTN_K_B);
		d->bv = cfwd_dheld(c, y, NS_T_ATTN_V_B);
		d->bo = cfwd_dheld(c, y, NS_T_ATTN_OUT_B);
		d->sinks = cfwd_dheld(c, y, NS_T_ATTN_SINKS);
		d->router_b = cfwd_dheld(c, y, NS_T_FFN_GATE_INP_B);
		d->gate_b = cfwd_dheld(c, y, NS_T_FFN_GATE_EXPS_B);
		d->up_b = cfwd_dheld(c, y, NS_T_FFN_UP_EXPS_B);
		d->down_b = cfwd_dheld(c, y, NS_T_FFN_DOWN_EXPS_B);
		d->router_scale = cfwd_dheld(c, y, NS_T_FFN_GATE_INP_SCALE);
		d->down_scale = cfwd_dheld(c, y, NS_T_FFN_DOWN_EXPS_SCALE);
		d->shexp_gate = cfwd_dheld(c, y, NS_T_FFN_GATE_INP_SHEXP);
		d->conv_w = cfwd_dheld(c, y, NS_T_SSM_CONV1D);
		d->dt_b = cfwd_dheld(c, y, NS_T_SSM_DT_B);
		d->ssm_a = cfwd_dheld(c, y, NS_T_SSM_A);
		d->ssm_norm = cfwd_dheld(c, y, NS_T_SSM_NORM);
	}
	return 0;
}

/* The recurrent layers' history and states, one allocation (one reset), and their scratch;
 * with rollback (rb_cap tokens, cfwd_dnet.c) a copy of the states (one allocation: one copy
 * per mark) and the layers' logs: nsplan/gpu_need.c counts the same. */
static int s_dnet_state(struct cfwd *c, uint32_t rb_cap, char *err, size_t errlen)
{
	const struct ns_dnet *D = c->L->dnet;
	const uint64_t nb = c->n_batch, vd = (uint64_t)D->n_v * D->dv;
	const uint64_t per = ((uint64_t)D->K - 1) * D->CH + vd * D->dk; /* floats of a layer */
	const uint64_t used0 = ns_vram_used(c->vram);
	uint64_t n_rec = 0;
	int rc;

	for (uint32_t l = 0; l < c->L->n_layer; l++)
		n_rec += c->L->layers[l].recurrent;
	if ((rc = CFWD_DA(c, &c->dn_state, n_rec * per, 1, 4)) ||
	    (rc = CFWD_DA(c, &c->d_qkv, nb, D->CH, 4)) || (rc = CFWD_DA(c, &c->d_z, nb, vd, 4)) ||
	    (rc = CFWD_DA(c, &c->d_b, nb, D->n_v, 4)) || (rc = CFWD_DA(c, &c->d_a, nb, D->n_v, 4)) ||
	    (rc = CFWD_DA(c, &c->d_o, nb, vd, 4)))
		return rc;
	if (rb_cap && ((rc = CFWD_DA(c, &c->dn_state0, n_rec * per, 1, 4)) ||
		       (rc = CFWD_DA(c, &c->dn_log, n_rec * rb_cap, D->CH + 2ull * D->n_v, 4))))
		return rc;
	c->rb_cap = c->dn_log ? rb_cap : 0;
	c->dn_state_bytes = n_rec * per * 4;
	c->st.recurrent_bytes = ns_vram_used(c->vram) - used0; /* test_cfwd: == the need's */
	for (uint32_t l = 0, i = 0; l < c->L->n_layer; l++) {
		if (!c->L->layers[l].recurrent)
			continue;
		c->dl[l].hist = c->dn_state + (uint64_t)i * per;
		c->dl[l].S = c->dl[l].hist + ((uint64_t)D->K - 1) * D->CH;
		if (c->rb_cap) /* qkv (rb_cap, CH), then a and b (rb_cap, n_v) */
			c->dl[l].log = c->dn_log + (uint64_t)i * rb_cap * (D->CH + 2ull * D->n_v);
		i++;
	}
	return 0;
}

int cfwd_moe_state(struct cfwd *c, const struct ns_moe *mo, char *err, size_t errlen)
{
	const uint64_t nb = c->n_batch, E = mo->n_expert, K = mo->n_used, D = mo->n_embd;
	int rc;

	if ((rc = CFWD_DA(c, &c->m_logits, nb, E, 4)) || (rc = CFWD_DA(c, &c->m_w, nb, K, 4)) ||
	    (rc = CFWD_DA(c, &c->m_xg, nb, D, 4)) || (rc = CFWD_DA(c, &c->m_yd, nb, D, 4)) ||
	    (rc = CFWD_DA(c, &c->m_ys, nb * K, D, 4)) || (rc = CFWD_DA(c, &c->m_sel, nb, K, 4)) ||
	    (rc = CFWD_DA(c, &c->m_tok, nb, K, 4)) || (rc = CFWD_DA(c, &c->m_slot, nb, K, 4)))
		return rc;
	c->m_hb = c->hb;
	c->m_hu = c->hu;
	if (!(c->h_sel = calloc(nb * K, sizeof(int32_t))) ||
	    !(c->h_tok = calloc(nb * K, sizeof(int32_t))) ||
	    !(c->h_slot = calloc(nb * K, sizeof(int32_t))) ||
	    !(c->h_w = calloc(nb * K, sizeof(float))) ||
	    !(c->h_start = calloc(E + 1, sizeof(uint32_t))) ||
	    !(c->h_fill = calloc(E, sizeof(uint32_t)))) {
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

int cfwd_state(struct cfwd *c, uint32_t n_ctx, uint32_t rb_cap, char *err, size_t errlen)
{
	const struct ns_llama *L = c->L;
	const uint64_t nb = c->n_batch;
	const uint64_t nq = (uint64_t)L->n_head * L->dk, nk = (uint64_t)L->n_head_kv * L->dk;
	const uint64_t nv = (uint64_t)L->n_head_kv * L->dv, no = (uint64_t)L->n_head * L->dv;
	const uint64_t F = L->moe ? L->moe->n_ff_exp : 0, Fs = L->moe ? L->moe->n_ff_shexp : 0;
	const uint64_t ff = L->n_ff > F ? (L->n_ff > Fs ? L->n_ff : Fs) : (F > Fs ? F : Fs);
	int rc;

	c->kv_dim_k = (uint32_t)nk;
	c->kv_dim_v = (uint32_t)nv;
	c->kv_row_k = ns_cuda_kv_row_bytes(c->kv_tk, nk); /* ns_cfwd_new checked the types */
	c->kv_row_v = ns_cuda_kv_row_bytes(c->kv_tv, nv);
	if ((rc = CFWD_DA(c, &c->kv_k, (uint64_t)L->n_kv_layer * n_ctx, c->kv_row_k, 1)) ||
	    (rc = CFWD_DA(c, &c->kv_v, (uint64_t)L->n_kv_layer * n_ctx, c->kv_row_v, 1)) ||
	    (rc = CFWD_DA(c, &c->x, nb, L->n_embd, 4)) || (rc = CFWD_DA(c, &c->xb, nb, L->n_embd, 4)) ||
	    (rc = CFWD_DA(c, &c->xb2, nb, L->n_embd, 4)) || (rc = CFWD_DA(c, &c->q, nb, nq, 4)) ||
	    (rc = CFWD_DA(c, &c->k, nb, nk, 4)) || (rc = CFWD_DA(c, &c->v, nb, nv, 4)) ||
	    (rc = CFWD_DA(c, &c->ao, nb, no, 4)) || (rc = CFWD_DA(c, &c->hb, nb, ff ? ff : 1, 4)) ||
	    (rc = CFWD_DA(c, &c->hu, nb, ff ? ff : 1, 4)) ||
	    (rc = CFWD_DA(c, &c->logits, nb < CFWD_LOGIT_TOK ? nb : CFWD_LOGIT_TOK, L->n_vocab, 4)) ||
	    (rc = CFWD_DA(c, &c->attn_ws, 1, 1,
		       ns_cuda_attn_ws_bytes((uint32_t)nb, L->n_head, n_ctx, L->dv))) ||
	    (rc = CFWD_DA(c, &c->dev_pos, 1, 1, 8)))
		return rc;
	if (L->gated_attn && ((rc = CFWD_DA(c, &c->qg, nb, 2 * nq, 4)) ||
			      (rc = CFWD_DA(c, &c->gate, nb, nq, 4))))
		return rc;
	/* images: each row's (temporal, height, width) (ns_cuda_rope_mrope) */
	if ((c->am->arch->flags & NS_ARCH_MROPE) && c->hp->rope_sections[0] &&
	    (rc = CFWD_DA(c, &c->mpos, nb, 3, 4)))
		return rc;
	if (L->dnet && (rc = s_dnet_state(c, rb_cap, err, errlen)))
		return rc;
	if (L->moe && (rc = cfwd_moe_state(c, L->moe, err, errlen)))
		return rc;
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
int cfwd_windows(struct cfwd *c, const struct ns_cfwd_opts *o, char *err, size_t errlen)
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

			if (!cfwd_is_matrix(c->hp, t))
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
		struct cfwd_tensor *st;
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
		rc = CFWD_DA(c, &dev, w[i].row_end - w[i].row_begin, t->row_bytes, 1);
		if (rc < 0)
			break;
		st = &c->t[w[i].tensor];
		if (!(st->n & (st->n - 1)) || !st->w) { /* grow at powers of two */
			struct cfwd_win *nw = realloc(st->w, (st->n ? 2 * st->n : 1) * sizeof(*nw));

			if (!nw) {
				free(w);
				goto oom;
			}
			st->w = nw;
		}
		st->w[st->n++] = (struct cfwd_win){ w[i].row_begin, w[i].row_end, dev };
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

/* Tensor t whole in one VRAM window. */
bool cfwd_whole(const struct cfwd *c, uint32_t t)
{
	const struct cfwd_tensor *st = &c->t[t];

	return st->n == 1 && st->w[0].rb == 0 && st->w[0].re == c->m->tensors[t].n_rows;
}

/* Every matrix a decode step multiplies (the table's MATRIX reads) is whole in VRAM: no
 * staging, so the step can be captured. */
bool cfwd_all_resident(const struct cfwd *c)
{
	for (uint64_t i = 0; i < c->am->n_steps; i++)
		if (c->am->steps[i].role == NS_ROLE_MATRIX && !cfwd_whole(c, c->am->steps[i].tensor))
			return false;
	return true;
}
