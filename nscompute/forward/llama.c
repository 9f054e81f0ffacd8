/* llama.c - the decoder of the llama family, qwen3, qwen3moe, gpt-oss and qwen35(moe),
 * straight-line.
 *
 * Per layer (x is the residual stream, one row per token of the chunk):
 *     xb = rmsnorm(x) * attn_norm
 *     q, k, v = xb Wq^T, xb Wk^T, xb Wv^T            (+ biases when the file has them)
 *     qwen3: q, k = rmsnorm(q_head) * q_norm, rmsnorm(k_head) * k_norm   per head
 *     q, k = rope(q, pos), rope(k, pos)              (llama: normal pairs, qwen3: NeoX)
 *     cache k, v at pos
 *     ao = softmax(q k^T * scale, causal) v           (GQA: q head h reads kv head h / gqa)
 *         gpt-oss: sliding-window layers (even) see only the last `sliding_window` positions,
 *         and each head's sink logit joins the softmax denominator; the cpu pass keeps
 *         their K/V in a ring of window + n_batch - 1 positions (kvcache.h, the sequence
 *         cache's companion `swa`), the global layers' in the whole cache
 *     x += ao Wo^T
 *     xb = rmsnorm(x) * ffn_norm                     (gpt-oss: post_attention_norm)
 *     dense: x += (silu(xb Wgate^T) * (xb Wup^T)) Wdown^T   (SwiGLU, two row-contiguous phases)
 *     MoE (qwen3moe, gpt-oss): x += moe(xb)          (moe.h)
 * qwen35, qwen35moe: the layers the table marks recurrent replace the attention by
 *     x += deltanet(xb) (deltanet.h, Gated DeltaNet with a per-sequence state); the others
 *     are gated: attn_q gives per head [q | gate], ao *= sigmoid(gate) before Wo, and only
 *     they have KV cache rows (kv_slot); the FFN's norm is post_attention_norm, the MoE
 *     block adds a shared expert (moe.h).
 * then logits = (rmsnorm(x) * output_norm) Wout^T, Wout = token_embd when tied.
 * RoPE: normal, NeoX, linear scaling, llama3 factors, YaRN (gpt-oss).
 *
 * Which tensors these are, their shapes and the order a token reads them come from the
 * architecture table (modelfile/arch.h, through f->am); the flags of the architecture's entry
 * say what the tensors do not (NeoX pairs). Weight matrices are reached only through the
 * provider (weights.h); vectors (norms, biases, rope factors: the table's HELD reads) are
 * small and copied in once at init (held.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "forward_impl.h"
#include "llama.h"
#include "deltanet.h"
#include "ffn.h"
#include "ggml_type.h"
#include "moe.h"
#include "mtp.h"
#include "ops.h"
#include "rope.h"



/* ---------------------------------------------------------------- setup ---------------- */

/* f->arch_cut of a recurrent pass: forward.c let only a cut to 0 or into the mark's tokens
 * through; the latter rolls the state back (deltanet.h). */
static int s_rec_cut(struct ns_fwd *f, uint32_t seq, uint32_t keep)
{
	struct ns_llama *L = f->arch;
	int rc;

	if (!keep || seq)
		return 0; /* the next chunk at position 0 zeroes the state (another sequence is
			   * cut only to 0: ns_fwd_seq_truncate) */
	rc = ns_dnet_rollback(L->dnet, keep - f->rb_pos);
	if (rc < 0)
		ns_errf(f->err, sizeof(f->err), "forward: the recurrent state's log does not reach "
			"position %u (mark at %u)", keep, f->rb_pos);
	return rc;
}

static int s_rec_mark(struct ns_fwd *f, bool on)
{
	struct ns_llama *L = f->arch;

	if (!on) {
		ns_dnet_unmark(L->dnet);
		return 0;
	}
	return ns_dnet_mark(L->dnet, f->kv->n_past == 0);
}

static uint64_t s_rec_bytes(const struct ns_fwd *f)
{
	const struct ns_llama *L = f->arch;

	return ns_dnet_state_bytes(L->dnet);
}

static void s_destroy(void *arch)
{
	struct ns_llama *L = arch;

	if (!L)
		return;
	free(L->layers);
	ns_moe_destroy(&L->moe);
	ns_dnet_destroy(&L->dnet);
	free(L->ids);
	free(L->x);
	free(L->xb);
	free(L->xb2);
	free(L->q);
	free(L->qg);
	free(L->k);
	free(L->v);
	free(L->ao);
	free(L->hb);
	free(L->hu);
	free(L->cs);
	ns_attn_ws_destroy(&L->attn_ws);
	free(L);
}

/* *p = calloc(a * b floats), overflow-checked. */
static int s_alloc(float **p, uint64_t a, uint64_t b)
{
	uint64_t n;

	if (ns_mul_u64_overflow(a, b, &n) || ns_mul_u64_overflow(n, sizeof(float), &n) ||
	    n > SIZE_MAX)
		return -EOVERFLOW;
	*p = calloc(1, n ? (size_t)n : 1);
	return *p ? 0 : -ENOMEM;
}

/* The tensor of a slot at a layer (-1: global): a read the table requires, so present. */
static uint32_t s_t(const struct ns_fwd *f, int32_t layer, unsigned slot)
{
	return (uint32_t)ns_arch_tensor(f->am, layer, slot);
}

static void s_layer_init(struct ns_fwd *f, struct ns_llama *L, uint32_t l)
{
	struct ns_llama_layer *y = &L->layers[l];
	const struct ns_held *h = f->held;
	const int32_t i = (int32_t)l;

	y->recurrent = f->am->layer[l].kinds & NS_LAYER_RECURRENT;
	if (!y->recurrent) {
		y->wq = s_t(f, i, NS_T_ATTN_Q);
		y->wk = s_t(f, i, NS_T_ATTN_K);
		y->wv = s_t(f, i, NS_T_ATTN_V);
		y->wo = s_t(f, i, NS_T_ATTN_OUT);
		y->kv_slot = L->n_kv_layer++;
	}
	if (f->am->layer[l].kinds & NS_LAYER_DENSE) {
		y->w_gate = s_t(f, i, NS_T_FFN_GATE);
		y->w_up = s_t(f, i, NS_T_FFN_UP);
		y->w_down = s_t(f, i, NS_T_FFN_DOWN);
	}
	y->attn_norm = ns_held_get(h, i, NS_T_ATTN_NORM);
	y->ffn_norm = ns_held_get(h, i, NS_T_FFN_NORM);
	if (!y->ffn_norm) /* gpt-oss names it post_attention_norm */
		y->ffn_norm = ns_held_get(h, i, NS_T_ATTN_POST_NORM);
	y->q_norm = ns_held_get(h, i, NS_T_ATTN_Q_NORM);
	y->k_norm = ns_held_get(h, i, NS_T_ATTN_K_NORM);
	y->bq = ns_held_get(h, i, NS_T_ATTN_Q_B);
	y->bk = ns_held_get(h, i, NS_T_ATTN_K_B);
	y->bv = ns_held_get(h, i, NS_T_ATTN_V_B);
	y->bo = ns_held_get(h, i, NS_T_ATTN_OUT_B);
	y->sinks = ns_held_get(h, i, NS_T_ATTN_SINKS);
	y->window = f->am->layer[l].window;
}

/* YaRN as llama.cpp sets it up: ext_factor 1, beta_fast/slow (default 32/1) and the
 * original context from the metadata, and attn_factor = mscale(factor) / (1 + 0.1 ln factor)
 * (llama_context cancels the magnitude term ggml's rope multiplies in again), times
 * rope.scaling.attn_factor. Everything in float as llama.cpp computes it. */
static void s_yarn_init(const struct ns_model *m, const struct ns_hparams *hp,
			struct ns_llama *L)
{
	const float factor = 1.0f / L->rope.freq_scale;
	double beta_fast = 32.0, beta_slow = 1.0, log_mul = 0.0, attn = 1.0;
	float af;

	ns_hparams_get_f64(m, hp->arch, "rope.scaling.yarn_beta_fast", &beta_fast);
	ns_hparams_get_f64(m, hp->arch, "rope.scaling.yarn_beta_slow", &beta_slow);
	ns_hparams_get_f64(m, hp->arch, "rope.scaling.yarn_log_multiplier", &log_mul);
	ns_hparams_get_f64(m, hp->arch, "rope.scaling.attn_factor", &attn);
	af = factor <= 1.0f ? 1.0f : 0.1f * logf(factor) + 1.0f;
	if (log_mul != 0.0) { /* mscale 1 over mscale_all_dims = log_mul */
		const float den = factor <= 1.0f ? 1.0f :
				  0.1f * (float)log_mul * logf(factor) + 1.0f;

		af = af / den;
	}
	af *= 1.0f / (1.0f + 0.1f * logf(factor));
	af *= (float)attn;
	ns_rope_yarn_init(&L->rope, hp->rope_orig_ctx ? hp->rope_orig_ctx : hp->n_ctx_train,
			  (float)beta_fast, (float)beta_slow, af);
}

/* Rope settings from the metadata: base (default 10000), linear scaling, llama3 factors,
 * YaRN (the table's rules have checked the dimensions and the scaling type). */
static void s_rope_init(struct ns_fwd *f, struct ns_llama *L)
{
	const struct ns_hparams *hp = &f->am->hp;
	const char *type = hp->rope_scaling_type;

	L->rope.n_dims = (uint32_t)(2 * f->am->dim[NS_DIM_ROPE_PAIRS]);
	L->rope.neox = f->am->arch->flags & NS_ARCH_ROPE_NEOX;
	L->rope.freq_base = hp->rope_freq_base > 0 ? (float)hp->rope_freq_base : 10000.0f;
	L->rope.freq_scale = hp->rope_scale > 0 ? (float)(1.0 / hp->rope_scale) : 1.0f;
	if (!strcmp(type, "none"))
		L->rope.freq_scale = 1.0f; /* llama.cpp never scales with type none */
	if (!strcmp(type, "yarn"))
		s_yarn_init(f->am->m, hp, L);
	L->rope_freqs = ns_held_get(f->held, -1, NS_T_ROPE_FREQS);
	L->rope.freq_factors = L->rope_freqs;
}

static int s_scratch_init(struct ns_llama *L, uint32_t n_batch)
{
	const uint64_t nb = n_batch;
	int rc;

	L->ids = calloc(n_batch, sizeof(*L->ids));
	if (!L->ids)
		return -ENOMEM;
	if ((rc = s_alloc(&L->x, nb, L->n_embd)) || (rc = s_alloc(&L->xb, nb, L->n_embd)) ||
	    (rc = s_alloc(&L->xb2, nb, L->n_embd)) ||
	    (rc = s_alloc(&L->q, nb, (uint64_t)L->n_head * L->dk)) ||
	    (L->gated_attn && (rc = s_alloc(&L->qg, nb, 2ull * L->n_head * L->dk))) ||
	    (rc = s_alloc(&L->k, nb, (uint64_t)L->n_head_kv * L->dk)) ||
	    (rc = s_alloc(&L->v, nb, (uint64_t)L->n_head_kv * L->dv)) ||
	    (rc = s_alloc(&L->ao, nb, (uint64_t)L->n_head * L->dv)) ||
	    (rc = s_alloc(&L->hb, nb, L->n_ff)) || (rc = s_alloc(&L->hu, nb, L->ffn_rows)) ||
	    (rc = s_alloc(&L->cs, L->rope.n_dims, 1)))
		return rc;
	return 0;
}

/* ---------------------------------------------------------------- forward -------------- */

static void s_add_bias(float *y, const float *b, uint32_t n_tok, uint64_t dim)
{
	if (!b)
		return;
	for (uint32_t t = 0; t < n_tok; t++)
		for (uint64_t i = 0; i < dim; i++)
			y[t * dim + i] += b[i];
}

/* The cache of layer y in a sequence's cache kv: its ring, or kv itself. */
static struct ns_kvcache *s_layer_kv(struct ns_kvcache *kv, const struct ns_llama_layer *y)
{
	return y->in_ring ? kv->swa : kv;
}

/* ao = attention of the chunk's queries over their caches (attn.h), on the provider's threads.
 * Row t is position row_pos[t] of the sequence whose cache is row_kv[t] (a batch mixes
 * sequences; a row sees only its own): the chunk goes to attn.h in runs of rows of one cache
 * at consecutive positions, each run a causal chunk of its own (one run for ns_fwd_eval's
 * chunks). */
static int s_attention(struct ns_fwd *f, struct ns_llama *L, uint32_t l, uint32_t n)
{
	int rc = 0;

	for (uint32_t t0 = 0, t1; rc == 0 && t0 < n; t0 = t1) {
		for (t1 = t0 + 1; t1 < n && f->row_kv[t1] == f->row_kv[t0] &&
				  f->row_pos[t1] == f->row_pos[t0] + (t1 - t0); t1++)
			;
		const struct ns_attn a = {
			.kv = s_layer_kv(f->row_kv[t0], &L->layers[l]),
			.layer = L->layers[l].kv_slot,
			.q = L->q + (uint64_t)t0 * L->n_head * L->dk,
			.out = L->ao + (uint64_t)t0 * L->n_head * L->dv,
			.n_tok = t1 - t0, .pos0 = f->row_pos[t0], .n_head = L->n_head,
			.window = L->layers[l].window, .scale = L->attn_scale,
			.sinks = L->layers[l].sinks, .exact = f->attn_exact,
		};

		rc = ns_attn_run(ns_weights_pool(f->w), L->attn_ws, NS_KPATH_AUTO, &a);
	}
	if (rc < 0)
		ns_errf(f->err, sizeof(f->err), "forward: attention of layer %u: %s", l,
			rc == -ERANGE ? "its sliding-window ring no longer holds the positions "
			"the chunk reads" : strerror(-rc));
	return rc;
}

/* x += xb2   (n, n_embd): a sublayer's output joins the residual stream */
static void s_residual(struct ns_llama *L, uint32_t n)
{
	for (uint64_t i = 0; i < (uint64_t)n * L->n_embd; i++)
		L->x[i] += L->xb2[i];
}

/* qg (n, n_head, 2, dk) -> q (n, n_head * dk), and each token's gates packed to the front of
 * its qg row: gate of head h at qg[t * 2 nq + h * dk] (a later head's q or gate is never
 * overwritten before it is read). */
static void s_split_gate(struct ns_llama *L, uint32_t n)
{
	const uint64_t dk = L->dk, nq = (uint64_t)L->n_head * dk;

	for (uint32_t t = 0; t < n; t++) {
		float *row = L->qg + t * 2 * nq; /* (n_head, 2, dk) */

		for (uint32_t h = 0; h < L->n_head; h++)
			memcpy(L->q + t * nq + h * dk, row + h * 2 * dk, dk * sizeof(float));
		for (uint32_t h = 0; h < L->n_head; h++)
			memmove(row + h * dk, row + h * 2 * dk + dk, dk * sizeof(float));
	}
}

/* ao (n, n_head * dv) *= sigmoid(gate), dv == dk (checked at setup) */
static void s_apply_gate(struct ns_llama *L, uint32_t n)
{
	const uint64_t nq = (uint64_t)L->n_head * L->dk;

	for (uint32_t t = 0; t < n; t++) {
		const float *g = L->qg + t * 2 * nq; /* (nq) */
		float *o = L->ao + t * nq;           /* (nq) */

		for (uint64_t i = 0; i < nq; i++)
			o[i] *= 1.0f / (1.0f + expf(-g[i]));
	}
}

static int s_attention_block(struct ns_fwd *f, struct ns_llama *L, uint32_t l, uint32_t n)
{
	struct ns_llama_layer *y = &L->layers[l];
	const uint64_t nq = (uint64_t)L->n_head * L->dk;
	const uint64_t nk = (uint64_t)L->n_head_kv * L->dk;
	const uint64_t nv = (uint64_t)L->n_head_kv * L->dv;
	int rc;

	/* xb = rmsnorm(x) * attn_norm   (n, n_embd) */
	for (uint32_t t = 0; t < n; t++)
		ns_rmsnorm(L->xb + (uint64_t)t * L->n_embd, L->x + (uint64_t)t * L->n_embd,
			   y->attn_norm, L->n_embd, L->eps);
	if (y->recurrent) { /* x += deltanet(xb)   (n, n_embd) */
		/* one sequence (ns_fwd_seqs_init): the chunk's rows are consecutive */
		rc = ns_dnet_eval(f, L->dnet, l, f->row_pos[0], L->xb, n, L->xb2);
		if (rc)
			return rc;
		s_residual(L, n);
		return 0;
	}
	/* q (n, nq) (gated: [q | gate] per head into qg, then split), k (n, nk), v (n, nv) */
	if ((rc = L->gated_attn ? ns_fwd_matmul(f, y->wq, 0, 2 * nq, L->xb, n, L->qg, 2 * nq) :
				  ns_fwd_matmul(f, y->wq, 0, nq, L->xb, n, L->q, nq)) ||
	    (rc = ns_fwd_matmul(f, y->wk, 0, nk, L->xb, n, L->k, nk)) ||
	    (rc = ns_fwd_matmul(f, y->wv, 0, nv, L->xb, n, L->v, nv)))
		return rc;
	if (L->gated_attn)
		s_split_gate(L, n);
	s_add_bias(L->q, y->bq, n, nq);
	s_add_bias(L->k, y->bk, n, nk);
	s_add_bias(L->v, y->bv, n, nv);
	for (uint32_t t = 0; t < n; t++) {
		float *qt = L->q + t * nq; /* (n_head, dk) */
		float *kt = L->k + t * nk; /* (n_head_kv, dk) */

		if (y->q_norm) { /* qwen3: per-head RMS norm before rope */
			for (uint32_t h = 0; h < L->n_head; h++)
				ns_rmsnorm(qt + (uint64_t)h * L->dk, qt + (uint64_t)h * L->dk,
					   y->q_norm, L->dk, L->eps);
			for (uint32_t h = 0; h < L->n_head_kv; h++)
				ns_rmsnorm(kt + (uint64_t)h * L->dk, kt + (uint64_t)h * L->dk,
					   y->k_norm, L->dk, L->eps);
		}
		if (f->mm) /* an image call: every row's own (t, h, w) */
			ns_rope_angles_mrope(&L->rope, f->mm->pos + 3ull * (f->mm_row0 + t),
					     f->am->hp.rope_sections, L->cs);
		else /* text: (t, t, t), past the images of sequence 0 */
			ns_rope_angles(&L->rope, (int64_t)f->row_pos[t] +
				       (f->row_kv[t] == f->kv ? f->rope_delta : 0), L->cs);
		ns_rope_rotate(&L->rope, L->cs, qt, L->n_head, L->dk);
		ns_rope_rotate(&L->rope, L->cs, kt, L->n_head_kv, L->dk);
		/* into the cache of the row's own sequence */
		ns_kvcache_store(s_layer_kv(f->row_kv[t], y), y->kv_slot, f->row_pos[t], kt,
				 L->v + t * nv);
	}
	if ((rc = s_attention(f, L, l, n)))
		return rc;
	if (L->gated_attn)
		s_apply_gate(L, n);
	/* x += ao Wo^T   (n, n_embd) */
	rc = ns_fwd_matmul(f, y->wo, 0, L->n_embd, L->ao, n, L->xb2, L->n_embd);
	if (rc)
		return rc;
	s_add_bias(L->xb2, y->bo, n, L->n_embd);
	s_residual(L, n);
	return 0;
}

static int s_ffn_block(struct ns_fwd *f, struct ns_llama *L, uint32_t l, uint32_t n)
{
	struct ns_llama_layer *y = &L->layers[l];
	const struct ns_ffn_w ffn = { y->w_gate, y->w_up, y->w_down, L->n_ff };
	int rc;

	/* xb = rmsnorm(x) * ffn_norm   (n, n_embd) */
	for (uint32_t t = 0; t < n; t++)
		ns_rmsnorm(L->xb + (uint64_t)t * L->n_embd, L->x + (uint64_t)t * L->n_embd,
			   y->ffn_norm, L->n_embd, L->eps);
	if (L->moe) { /* x += moe(xb)   (n, n_embd) */
		rc = ns_moe_eval(f, L->moe, l, f->row_pos[0], L->xb, n, L->xb2);
		if (rc)
			return rc;
		s_residual(L, n);
		return 0;
	}
	/* x += ffn(xb)   (n, n_embd), SwiGLU (ffn.h) */
	rc = ns_ffn_swiglu(f, &ffn, L->n_embd, L->ffn_rows, L->xb, n, L->hb, L->hu, L->xb2);
	if (rc)
		return rc;
	s_residual(L, n);
	return 0;
}

/* x[t] = (add ? x[t] + : ) src[mm_row0 + t] for the chunk's rows that are image rows
 * (src: (mm_n, n_embd), the call's rows) */
static void s_mm_rows(const struct ns_fwd *f, const struct ns_llama *L, uint32_t n,
		      const float *src, float *x, bool add)
{
	for (uint32_t t = 0; t < n; t++) {
		const uint64_t r = (uint64_t)f->mm_row0 + t;
		const float *s = src + r * L->n_embd;
		float *d = x + (uint64_t)t * L->n_embd;

		if (!f->mm->is_embd[r])
			continue;
		if (!add) {
			memcpy(d, s, (size_t)L->n_embd * sizeof(float));
			continue;
		}
		for (uint32_t i = 0; i < L->n_embd; i++)
			d[i] += s[i];
	}
}

static int s_eval_chunk(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
			bool all)
{
	struct ns_llama *L = f->arch;
	uint32_t t0;
	int rc;

	/* x = token_embd[tokens]   (n, n_embd) */
	for (uint32_t t = 0; t < n; t++)
		L->ids[t] = tokens[t];
	rc = ns_weights_get_rows(f->w, L->tok_embd, L->ids, n, L->x);
	if (rc < 0) {
		ns_errf(f->err, sizeof(f->err), "forward: %s", ns_weights_error(f->w));
		return rc;
	}
	if (f->mm) /* an image's rows: its embeddings instead */
		s_mm_rows(f, L, n, f->mm->embd, L->x, false);
	for (uint32_t l = 0; l < L->n_layer; l++) {
		if ((rc = s_attention_block(f, L, l, n)) || (rc = s_ffn_block(f, L, l, n)))
			return rc;
		/* DeepStack: the tower's features of level l added after text layer l */
		if (f->mm && f->mm->deepstack && l < f->mm->n_deepstack)
			s_mm_rows(f, L, n, f->mm->deepstack + (uint64_t)l * f->mm_n * L->n_embd,
				  L->x, true);
		/* MoE prediction: l + 1's router over l's output, reported before l + 1's
		 * attention so its expert reads can start meanwhile (moe.h) */
		if (L->moe && f->moe_predict && l + 1 < L->n_layer &&
		    (rc = ns_moe_predict(f, L->moe, l + 1, f->row_pos[0], L->x, n,
					 L->layers[l + 1].ffn_norm, L->eps)))
			return rc;
	}
	/* --draft mtp: the MTP block follows sequence 0 with the chunk's h rows (its hidden
	 * state after output_norm, as llama.cpp's h_nextn) */
	if (f->mtp && !f->n_out_rows) {
		for (uint32_t t = 0; t < n; t++)
			ns_rmsnorm(L->xb + (uint64_t)t * L->n_embd, L->x + (uint64_t)t * L->n_embd,
				   L->output_norm, L->n_embd, L->eps);
		if ((rc = ns_mtp_follow(f, f->mtp, tokens, L->xb, n, f->row_pos[0])))
			return rc;
	}
	if (!logits)
		return 0;
	if (f->n_out_rows) { /* a batch: the rows asked for, gathered   (n_out_rows, n_vocab) */
		for (uint32_t k = 0; k < f->n_out_rows; k++)
			ns_rmsnorm(L->xb + (uint64_t)k * L->n_embd,
				   L->x + (uint64_t)f->out_rows[k] * L->n_embd, L->output_norm,
				   L->n_embd, L->eps);
		return ns_fwd_matmul(f, L->output, 0, L->n_vocab, L->xb, f->n_out_rows, logits,
				L->n_vocab);
	}
	/* logits = (rmsnorm(x) * output_norm) Wout^T   (all ? n : 1, n_vocab) */
	t0 = all ? 0 : n - 1;
	for (uint32_t t = t0; t < n; t++)
		ns_rmsnorm(L->xb + (uint64_t)t * L->n_embd, L->x + (uint64_t)t * L->n_embd,
			   L->output_norm, L->n_embd, L->eps);
	return ns_fwd_matmul(f, L->output, 0, L->n_vocab, L->xb + (uint64_t)t0 * L->n_embd,
			     n - t0, logits, L->n_vocab);
}

/* f->arch_cut: a cut of sequence seq back to keep needs positions keep + 1 - window ..
 * keep - 1 of its ring (the next token's window); a ring that overwrote one refuses. */
static int s_cut(struct ns_fwd *f, uint32_t seq, uint32_t keep)
{
	const struct ns_llama *L = f->arch;
	struct ns_kvcache *ring = (seq ? f->seq_kv[seq] : f->kv)->swa;
	const uint32_t w = L->ring_window;

	if (!ring)
		return 0;
	if (!keep) {
		ring->lo = 0; /* everything is written again before it is read */
		return 0;
	}
	if (ring->lo > (keep + 1 > w ? keep + 1 - w : 0)) {
		ns_errf(f->err, sizeof(f->err), "forward: cannot go back to position %u%s: the "
			"sliding-window layers' cache (a ring of %u positions, window %u) no "
			"longer holds position %u; evaluate from the start", keep,
			seq ? " of a sequence" : "", ring->n_slot, w, ring->lo - 1);
		return -ERANGE;
	}
	return 0;
}

/* The KV caches of sequence 0: the sliding layers in a ring of their own (kvcache.h swa)
 * when it holds fewer than n_ctx positions, the others whole; kv_slot numbers each layer in
 * its cache. -EINVAL: a type that does not fit the head size. */
static int s_caches_init(struct ns_fwd *f, struct ns_llama *L)
{
	const enum ns_kv_type tk = (enum ns_kv_type)f->kv_k, tv = (enum ns_kv_type)f->kv_v;
	uint32_t n_ring = 0, n_whole = 0, R;
	int rc;

	for (uint32_t l = 0; l < L->n_layer; l++)
		if (!L->layers[l].recurrent && L->layers[l].window > L->ring_window)
			L->ring_window = L->layers[l].window;
	R = ns_kv_ring_positions(L->ring_window, f->n_batch, f->n_ctx);
	for (uint32_t l = 0; l < L->n_layer && R < f->n_ctx; l++) {
		struct ns_llama_layer *y = &L->layers[l];

		if (y->recurrent)
			continue;
		y->in_ring = y->window != 0;
		y->kv_slot = y->in_ring ? n_ring++ : n_whole++;
	}
	L->n_ring_layer = n_ring;
	rc = ns_kvcache_new(n_ring ? n_whole : L->n_kv_layer, f->n_ctx, L->n_head_kv, L->dk,
			    L->dv, tk, tv, &f->kv);
	if (rc == 0 && n_ring) {
		rc = ns_kvcache_new_ring(n_ring, f->n_ctx, R, L->n_head_kv, L->dk, L->dv, tk, tv,
					 &f->kv->swa);
		f->arch_cut = s_cut;
	}
	return rc;
}

int ns_llama_setup(struct ns_fwd *f, uint32_t ffn_rows, bool host_state, char *err,
		   size_t errlen)
{
	const struct ns_arch_model *am = f->am;
	const struct ns_hparams *hp = &am->hp;
	struct ns_llama *L;
	double scale = 0.0;
	int rc;

	L = calloc(1, sizeof(*L));
	if (!L || !(L->layers = calloc(am->n_layer, sizeof(*L->layers)))) {
		free(L);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->arch = L;
	f->arch_destroy = s_destroy;
	f->eval_chunk = s_eval_chunk;
	f->rows_ok = host_state; /* s_eval_chunk reads row_kv / row_pos / out_rows */
	f->llama = L;
	f->mtp_h = host_state; /* s_eval_chunk feeds the MTP block (a backend: its own pass) */
	L->n_embd = (uint32_t)am->dim[NS_DIM_EMBD];
	L->n_layer = am->n_layer;
	L->n_head = (uint32_t)am->dim[NS_DIM_HEAD];
	L->n_head_kv = (uint32_t)am->dim[NS_DIM_HEAD_KV];
	L->dk = (uint32_t)am->dim[NS_DIM_DK];
	L->dv = (uint32_t)am->dim[NS_DIM_DV];
	L->n_ff = (uint32_t)am->dim[NS_DIM_FF]; /* MoE: 0, the dense width is unused */
	L->n_ctx = f->n_ctx;
	L->eps = (float)hp->rms_eps;
	L->ffn_rows = ffn_rows && ffn_rows < L->n_ff ? ffn_rows : L->n_ff;
	L->gated_attn = am->arch->flags & NS_ARCH_GATED_ATTN;
	if (L->gated_attn && L->dk != L->dv) { /* the gate multiplies the output per element */
		ns_errf(err, errlen, "forward: %s gated attention needs equal key and value head "
			"sizes (%u, %u)", hp->arch, L->dk, L->dv);
		return -EINVAL;
	}
	/* llama.attention.scale overrides 1/sqrt(head_dim) (granite-style files) */
	if (ns_hparams_get_f64(am->m, hp->arch, "attention.scale", &scale) && scale > 0)
		L->attn_scale = (float)scale;
	else
		L->attn_scale = 1.0f / sqrtf((float)L->dk);
	/* the vocabulary: the embedding's rows; the head (token_embd when tied) has as many */
	L->tok_embd = s_t(f, -1, NS_T_TOKEN_EMBD);
	L->output = s_t(f, -1, NS_T_OUTPUT);
	f->n_tok_rows = am->m->tensors[L->tok_embd].n_rows;
	L->n_vocab = f->n_vocab = (uint32_t)am->dim[NS_DIM_VOCAB];
	rc = ns_held_load(am, f->w, &f->held, err, errlen);
	if (rc < 0)
		return rc;
	L->output_norm = ns_held_get(f->held, -1, NS_T_OUTPUT_NORM);
	s_rope_init(f, L);
	for (uint32_t l = 0; l < L->n_layer; l++)
		s_layer_init(f, L, l);
	if ((am->kinds & NS_LAYER_MOE) &&
	    (rc = ns_moe_new(f, f->n_batch, ffn_rows, &L->moe, err, errlen)))
		return rc;
	f->recurrent = am->kinds & NS_LAYER_RECURRENT;
	if (f->recurrent &&
	    (rc = ns_dnet_new(f, f->n_batch, host_state, &L->dnet, err, errlen)))
		return rc;
	/* images (ns_fwd_eval_mm): M-RoPE with its sections in the file (the CUDA pass reads
	 * the same call: cfwd_eval.c) */
	f->mm_ok = (am->arch->flags & NS_ARCH_MROPE) && hp->rope_sections[0];
	if (!host_state) { /* n_past only: the backend keeps its own cache and state */
		f->kv = calloc(1, sizeof(*f->kv));
		if (!f->kv) {
			ns_errf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		f->kv->n_ctx = f->n_ctx;
		return 0;
	}
	if (f->recurrent) { /* the state's rollback (ns_fwd_mark) */
		f->arch_cut = s_rec_cut;
		f->arch_mark = s_rec_mark;
		f->arch_state_bytes = s_rec_bytes;
	}
	rc = s_caches_init(f, L);
	if (rc == -EINVAL) {
		ns_errf(err, errlen, "forward: a %s/%s KV cache needs head sizes that are multiples "
			"of 32 (K %u, V %u)", ns_kv_type_name((enum ns_kv_type)f->kv_k),
			ns_kv_type_name((enum ns_kv_type)f->kv_v), L->dk, L->dv);
		return rc;
	}
	if (rc == 0)
		rc = s_scratch_init(L, f->n_batch);
	if (rc == 0) {
		struct ns_pool *pool = ns_weights_pool(f->w);

		L->attn_ws = ns_attn_ws_new(pool ? ns_pool_threads(pool) : 1, L->n_head,
					    L->n_head_kv, L->dk, L->dv, f->n_ctx);
		if (!L->attn_ws)
			rc = -ENOMEM;
	}
	if (rc < 0)
		ns_errf(err, errlen, "forward: cannot allocate the KV cache and scratch for "
			"n_ctx %u, n_batch %u: %s", f->n_ctx, f->n_batch, strerror(-rc));
	return rc;
}

int ns_llama_init(struct ns_fwd *f, uint32_t ffn_rows, char *err, size_t errlen)
{
	return ns_llama_setup(f, ffn_rows, true, err, errlen);
}
