/* gpu_need.c - see gpu_need.h. The allocations mirror nscompute/cuda/cfwd_vram.c cfwd_state:
 * one rounded allocation per buffer, in the same list (gemma: cfwd_gemma.c cfwd_gemma_state). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "fixed_mem.h"
#include "gpu_need.h"
#include "hparams.h"
#include "ns_util.h"
#include "plan.h"

/* *acc += a * b * c * sz rounded to the granule (an empty buffer still takes one granule);
 * false on overflow. */
static bool s_acc(uint64_t *acc, uint64_t a, uint64_t b, uint64_t c, uint64_t sz)
{
	uint64_t n;

	if (ns_mul_u64_overflow(a, b, &n) || ns_mul_u64_overflow(n, c, &n) ||
	    ns_mul_u64_overflow(n, sz, &n) || n > UINT64_MAX - NSPLAN_GPU_GRAN)
		return false;
	return !ns_add_u64_overflow(*acc, nsplan_gpu_round(n ? n : 1), acc);
}

uint64_t nsplan_gpu_attn_ws(uint64_t n_tok, uint64_t n_head, uint64_t n_ctx, uint64_t dv)
{
	const uint64_t chunks = (n_ctx + NSPLAN_GPU_ATTN_CHUNK - 1) / NSPLAN_GPU_ATTN_CHUNK;
	uint64_t r;

	if (ns_mul_u64_overflow(n_tok, n_head, &r) || ns_mul_u64_overflow(r, chunks, &r) ||
	    ns_mul_u64_overflow(r, dv + 2, &r) || ns_mul_u64_overflow(r, 4, &r))
		return UINT64_MAX;
	return r;
}

/* Tensor blk.<l>.<name>, or NULL. */
static const struct ns_model_tensor *s_layer_tensor(const struct ns_model *m, uint32_t l,
						    const char *name)
{
	char full[128];

	snprintf(full, sizeof(full), "blk.%u.%s", l, name);
	return ns_model_find(m, full);
}

/* Qwen3.5's recurrent layers (those with ssm_conv1d) as cfwd_vram.c s_dnet_state allocates
 * them: the history (K - 1, CH) and states (dk, inner) of all in one buffer, then the
 * chunk's scratch qkv (nb, CH), z (nb, inner), b, a (nb, n_v), o (nb, inner); with
 * n_rollback tokens of rollback (speculative decoding, cfwd_dnet.c): a copy of the states in
 * one buffer and every layer's log of n_rollback tokens' qkv, a and b (CH + 2 n_v floats
 * each) in another. *n_rec: their count. */
static bool s_recurrent(const struct ns_model *m, const struct ns_hparams *hp, uint64_t nb,
			uint32_t n_rollback, uint64_t *n_rec, uint64_t *acc)
{
	uint64_t dk = 0, inner = 0, K = 0, CH = 0, n_v = 0, per = 0, st = 0;

	*n_rec = 0;
	ns_hparams_get_u64(m, hp->arch, "ssm.state_size", &dk);
	ns_hparams_get_u64(m, hp->arch, "ssm.inner_size", &inner);
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct ns_model_tensor *conv = s_layer_tensor(m, l, "ssm_conv1d.weight");
		const struct ns_model_tensor *beta = s_layer_tensor(m, l, "ssm_beta.weight");

		if (!conv)
			continue;
		(*n_rec)++;
		K = conv->ne[0];
		CH = conv->ne[1];
		n_v = beta ? beta->n_rows : 0;
	}
	if (!*n_rec)
		return true;
	if (!K || ns_mul_u64_overflow(K - 1, CH, &per) || ns_mul_u64_overflow(dk, inner, &st) ||
	    ns_add_u64_overflow(per, st, &per))
		return false;
	if (!(s_acc(acc, *n_rec, per, 1, 4) && s_acc(acc, nb, CH, 1, 4) &&
	      s_acc(acc, nb, inner, 1, 4) && s_acc(acc, nb, n_v, 1, 4) &&
	      s_acc(acc, nb, n_v, 1, 4) && s_acc(acc, nb, inner, 1, 4)))
		return false;
	return !n_rollback || (CH <= UINT64_MAX - 2 * n_v && s_acc(acc, *n_rec, per, 1, 4) &&
			       s_acc(acc, *n_rec, n_rollback, CH + 2 * n_v, 4));
}

/* The widest shared expert (qwen35moe), 0 without one. */
static uint64_t s_shexp_ff(const struct ns_model *m, const struct ns_hparams *hp)
{
	uint64_t w = 0;

	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct ns_model_tensor *t = s_layer_tensor(m, l, "ffn_gate_shexp.weight");

		if (t && t->n_rows > w)
			w = t->n_rows;
	}
	return w;
}

/* The pass's refusal of a KV cache type its head sizes cannot hold (q8_0: blocks of 32). */
static int s_kv_misfit(enum ns_kv_type tk, enum ns_kv_type tv, uint32_t dk, uint32_t dv,
		       char *err, size_t errlen)
{
	ns_errf(err, errlen, "a %s/%s KV cache needs head sizes that are multiples of 32 (K %u, "
		"V %u)", ns_kv_type_name(tk), ns_kv_type_name(tv), dk, dv);
	return -EINVAL;
}

/* gemma3 / gemma4 as nscompute/cuda/cfwd_gemma.c cfwd_gemma_state allocates them: a whole
 * K and a V cache of n_ctx positions for each layer with K/V of its own (in its head geometry;
 * a KV-shared layer reads another's and holds none), then x, xb, xb2, q, k, v, ao, hb (the
 * FFN, all per-layer inputs or a stacked expert's 2 n_ff_exp, the widest), hu (the FFN or
 * n_ff_exp, the wider), logits, the attention workspace (the widest head), the decode
 * position; gemma4 E: the per-layer inputs and a layer's gated input; gemma4 MoE: the routed
 * experts' scratch (cfwd_vram.c cfwd_moe_state: router logits, weights, gathered rows, expert
 * output, slot outputs; choices, token and slot lists) and their branch's output. The caches'
 * rows are of their types (tk, tv). */
static int s_gemma(const struct ns_model *m, uint32_t n_ctx, uint64_t nb, enum ns_kv_type tk,
		   enum ns_kv_type tv, uint64_t *kv, uint64_t *s, char *err, size_t errlen)
{
	struct ns_arch_model *am = NULL;
	uint64_t D, H, ple, all, V, max_dk = 0, max_kv = 0, max_ff = 0, ws, E = 0, K = 0, F = 0;
	uint64_t hbw, huw;
	bool ok = true;
	int rc = ns_arch_bind(m, &am, err, errlen);

	if (rc < 0)
		return rc;
	D = am->dim[NS_DIM_EMBD];
	H = am->dim[NS_DIM_HEAD];
	ple = am->dim[NS_DIM_PLE];
	V = am->dim[NS_DIM_VOCAB];
	if (am->kinds & NS_LAYER_MOE) { /* as gemma.c, which makes the experts' description */
		E = am->dim[NS_DIM_EXPERT];
		K = am->hp.n_expert_used;
		F = am->dim[NS_DIM_FF_EXP];
	}
	for (uint32_t l = 0; ok && l < am->n_layer; l++) {
		const struct ns_arch_layer *al = &am->layer[l];
		const uint64_t dk = al->dim[NS_DIM_DK], w = al->dim[NS_DIM_HEAD_KV] * dk;

		max_dk = dk > max_dk ? dk : max_dk;
		max_kv = w > max_kv ? w : max_kv;
		max_ff = al->dim[NS_DIM_FF] > max_ff ? al->dim[NS_DIM_FF] : max_ff;
		if (!(al->kinds & NS_LAYER_KV_SHARED) &&
		    (!ns_kv_type_fits(tk, (uint32_t)dk) || !ns_kv_type_fits(tv, (uint32_t)dk))) {
			ns_arch_model_free(&am);
			return s_kv_misfit(tk, tv, (uint32_t)dk, (uint32_t)dk, err, errlen);
		}
		if (!(al->kinds & NS_LAYER_KV_SHARED))
			ok = s_acc(kv, n_ctx, ns_kv_row_bytes(tk, (uint32_t)w), 1, 1) &&
			     s_acc(kv, n_ctx, ns_kv_row_bytes(tv, (uint32_t)w), 1, 1);
	}
	all = (uint64_t)am->n_layer * ple;
	ws = nsplan_gpu_attn_ws(nb, H, n_ctx, max_dk);
	ns_arch_model_free(&am);
	hbw = all > max_ff ? all : max_ff;
	hbw = hbw > 2 * F ? hbw : 2 * F;
	huw = max_ff > F ? max_ff : F;
	ok = ok && ws != UINT64_MAX && s_acc(s, nb, D, 1, 4) && s_acc(s, nb, D, 1, 4) &&
	     s_acc(s, nb, D, 1, 4) && s_acc(s, nb, H * max_dk, 1, 4) &&
	     s_acc(s, nb, max_kv, 1, 4) && s_acc(s, nb, max_kv, 1, 4) &&
	     s_acc(s, nb, H * max_dk, 1, 4) && s_acc(s, nb, hbw, 1, 4) && s_acc(s, nb, huw, 1, 4) &&
	     s_acc(s, nb < NSPLAN_GPU_LOGIT_TOK ? nb : NSPLAN_GPU_LOGIT_TOK, V, 1, 4) &&
	     s_acc(s, 1, 1, 1, ws) && s_acc(s, 1, 1, 1, 8) &&
	     (!ple || (s_acc(s, nb, all, 1, 4) && s_acc(s, nb, ple, 1, 4))) &&
	     (!E || (s_acc(s, nb, E, 1, 4) && s_acc(s, nb, K, 1, 4) && s_acc(s, nb, D, 1, 4) &&
		     s_acc(s, nb, D, 1, 4) && s_acc(s, nb * K, D, 1, 4) && s_acc(s, nb, K, 1, 4) &&
		     s_acc(s, nb, K, 1, 4) && s_acc(s, nb, K, 1, 4) && s_acc(s, nb, D, 1, 4)));
	if (ok)
		return 0;
	ns_errf(err, errlen, "GPU sizes overflow (n_ctx %u, n_batch %llu)", n_ctx,
		(unsigned long long)nb);
	return -EOVERFLOW;
}

int nsplan_gpu_need(const struct ns_model *m, uint32_t n_ctx, uint32_t n_batch,
		    uint64_t stage_bytes, enum ns_kv_type tk, enum ns_kv_type tv,
		    struct nsplan_gpu_need *n, char *err, size_t errlen)
{
	return nsplan_gpu_need_rb(m, n_ctx, n_batch, stage_bytes, tk, tv, NSPLAN_ROLLBACK_TOKENS,
				  n, err, errlen);
}

int nsplan_gpu_need_rb(const struct ns_model *m, uint32_t n_ctx, uint32_t n_batch,
		       uint64_t stage_bytes, enum ns_kv_type tk, enum ns_kv_type tv,
		       uint32_t n_rollback, struct nsplan_gpu_need *n, char *err, size_t errlen)
{
	struct ns_hparams hp;
	const struct ns_model_tensor *out, *g0;
	uint64_t nb, nq, nk, nv, no, ff, F, Fs, E, K, D, V, ws, s = 0, kv = 0, row_max = 0, n_rec;
	const struct ns_arch *arch;
	bool ok;
	int rc;

	memset(n, 0, sizeof(*n));
	if (!n_ctx) {
		ns_errf(err, errlen, "GPU sizes: n_ctx must be > 0");
		return -EINVAL;
	}
	rc = ns_hparams_load(m, &hp, err, errlen);
	if (rc < 0)
		return rc;
	out = ns_model_find(m, "output.weight");
	if (!out)
		out = ns_model_find(m, "token_embd.weight");
	g0 = ns_model_find(m, "blk.0.ffn_gate_exps.weight");
	if (!hp.n_layer || !hp.n_embd || !hp.n_head || !hp.head_dim_k || !hp.head_dim_v || !out) {
		ns_errf(err, errlen, "GPU sizes: %s hyperparameters incomplete", hp.arch);
		return -EINVAL;
	}
	nb = n_batch ? n_batch : NSPLAN_GPU_NBATCH;
	if (nb > n_ctx)
		nb = n_ctx;
	D = hp.n_embd;
	V = out->n_rows;
	nq = (uint64_t)hp.n_head * hp.head_dim_k;
	nk = (uint64_t)hp.n_head_kv * hp.head_dim_k;
	nv = (uint64_t)hp.n_head_kv * hp.head_dim_v;
	no = (uint64_t)hp.n_head * hp.head_dim_v;
	E = hp.n_expert;
	K = hp.n_expert_used;
	F = E ? (hp.n_ff_exp ? hp.n_ff_exp : g0 ? g0->ne[1] : 0) : 0;
	ff = E ? F : hp.n_ff;
	Fs = s_shexp_ff(m, &hp);
	ff = Fs > ff ? Fs : ff;
	ws = nsplan_gpu_attn_ws(nb, hp.n_head, n_ctx, hp.head_dim_v);
	arch = ns_arch_find(hp.arch);
	if (arch && arch->builder == NS_BUILD_GEMMA) {
		rc = s_gemma(m, n_ctx, nb, tk, tv, &kv, &s, err, errlen);
		if (rc < 0)
			return rc;
		ok = true;
		goto held;
	}
	if (!ns_kv_type_fits(tk, hp.head_dim_k) || !ns_kv_type_fits(tv, hp.head_dim_v))
		return s_kv_misfit(tk, tv, hp.head_dim_k, hp.head_dim_v, err, errlen);
	/* cfwd_vram.c cfwd_state: K, V of the attention layers (not the recurrent ones), rows of
	 * a position's heads in the cache's types; x, xb, xb2, q, k, v, ao, hb, hu, logits,
	 * attention workspace, the decode graph's position */
	ok = s_recurrent(m, &hp, nb, n_rollback, &n_rec, &n->recurrent) && n_rec <= hp.n_layer &&
	     s_acc(&kv, hp.n_layer - n_rec, n_ctx, ns_kv_row_bytes(tk, (uint32_t)nk), 1) &&
	     s_acc(&kv, hp.n_layer - n_rec, n_ctx, ns_kv_row_bytes(tv, (uint32_t)nv), 1) &&
	     s_acc(&s, nb, D, 1, 4) && s_acc(&s, nb, D, 1, 4) && s_acc(&s, nb, D, 1, 4) &&
	     s_acc(&s, nb, nq, 1, 4) && s_acc(&s, nb, nk, 1, 4) && s_acc(&s, nb, nv, 1, 4) &&
	     s_acc(&s, nb, no, 1, 4) && s_acc(&s, nb, ff ? ff : 1, 1, 4) &&
	     s_acc(&s, nb, ff ? ff : 1, 1, 4) &&
	     s_acc(&s, nb < NSPLAN_GPU_LOGIT_TOK ? nb : NSPLAN_GPU_LOGIT_TOK, V, 1, 4) &&
	     ws != UINT64_MAX && s_acc(&s, 1, 1, 1, ws) && s_acc(&s, 1, 1, 1, 8);
	/* gated attention (qwen35): attn_q's [q | gate] rows, then the gates */
	if (ok && arch && (arch->flags & NS_ARCH_GATED_ATTN))
		ok = s_acc(&s, nb, 2 * nq, 1, 4) && s_acc(&s, nb, nq, 1, 4);
	/* M-RoPE (a model that takes images): a chunk's three positions per row, int32 */
	if (ok && arch && (arch->flags & NS_ARCH_MROPE) && hp.rope_sections[0])
		ok = s_acc(&s, nb, 3, 1, 4);
	/* MoE: router logits, weights, gathered rows, expert output, slot outputs; sel, tok, slot */
	if (ok && E)
		ok = s_acc(&s, nb, E, 1, 4) && s_acc(&s, nb, K, 1, 4) && s_acc(&s, nb, D, 1, 4) &&
		     s_acc(&s, nb, D, 1, 4) && s_acc(&s, nb * K, D, 1, 4) &&
		     s_acc(&s, nb, K, 1, 4) && s_acc(&s, nb, K, 1, 4) && s_acc(&s, nb, K, 1, 4);
held:
	for (uint64_t i = 0; ok && i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];

		const enum ns_role role = ns_arch_role(&hp, t);

		/* the held tensors go up as they are (the table's HELD reads, cfwd s_vectors);
		 * every other tensor a token reads is a placeable piece, or one per expert */
		if (role == NS_ROLE_HELD) {
			ok = s_acc(&n->vectors, t->n_elems, 1, 1, 4);
		} else if (role != NS_ROLE_UNUSED && t->n_rows > 1) {
			row_max = t->row_bytes > row_max ? t->row_bytes : row_max;
			ok = !ns_add_u64_overflow(n->slack, NSPLAN_GPU_GRAN *
						  (role == NS_ROLE_EXPERT && t->ne[2] > 1 ?
						   t->ne[2] : 1), &n->slack);
		}
	}
	n->kv = kv;
	n->scratch = s;
	n->staging = stage_bytes ? stage_bytes : NSPLAN_GPU_STAGE;
	if (n->staging < row_max)
		n->staging = row_max;
	n->staging = 2 * nsplan_gpu_round(n->staging);
	if (!ok || ns_add_u64_overflow(n->kv, n->scratch, &n->total) ||
	    ns_add_u64_overflow(n->total, n->recurrent, &n->total) ||
	    ns_add_u64_overflow(n->total, n->vectors, &n->total) ||
	    ns_add_u64_overflow(n->total, n->staging, &n->total) ||
	    ns_add_u64_overflow(n->total, n->slack, &n->total)) {
		ns_errf(err, errlen, "GPU sizes overflow (n_ctx %u, n_batch %llu)", n_ctx,
			(unsigned long long)nb);
		return -EOVERFLOW;
	}
	return 0;
}

int nsplan_gpu_resident_need(const struct ns_model *m, uint32_t n_ctx, uint64_t stage_bytes,
			     uint64_t *bytes, char *err, size_t errlen)
{
	struct nsplan_gpu_need g;
	struct ns_hparams hp;
	uint64_t w = 0;
	int rc;

	*bytes = 0;
	/* no rollback buffers: a draft pass is never cut back into a mark (cfwd.h) */
	rc = nsplan_gpu_need_rb(m, n_ctx, 0, stage_bytes, NS_KV_F32, NS_KV_F32, 0, &g, err,
				errlen);
	if (rc == 0)
		rc = ns_hparams_load(m, &hp, err, errlen);
	if (rc < 0)
		return rc;
	/* every tensor the pass multiplies or looks rows up in, whole: one allocation each
	 * (cfwd_vram.c cfwd_windows with all_resident); they replace the windows' slack */
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		const enum ns_role role = ns_arch_role(&hp, t);

		if (role == NS_ROLE_HELD || role == NS_ROLE_UNUSED)
			continue;
		if (!s_acc(&w, t->n_bytes, 1, 1, 1))
			goto overflow;
	}
	if (!ns_add_u64_overflow(g.total - g.slack, w, bytes))
		return 0;
overflow:
	ns_errf(err, errlen, "GPU sizes overflow (%llu tensors)", (unsigned long long)m->n_tensors);
	return -EOVERFLOW;
}
