/* fixed_mem.c - KV cache, recurrent state, scratch and overhead figures (see fixed_mem.h). */
#include "fixed_mem.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "kv_type.h"
#include "ns_util.h"

static const struct ns_model_tensor *s_layer_tensor(const struct ns_model *m, uint32_t il,
						    const char *what)
{
	char name[96];

	snprintf(name, sizeof(name), "blk.%u.%s", il, what);
	return ns_model_find(m, name);
}

/* Rows of a 2-D projection = its output width. */
static uint64_t s_width(const struct ns_model_tensor *t)
{
	return t ? t->n_rows : 0;
}

bool nsplan_layer_is_swa(const struct ns_model *m, const struct ns_hparams *hp, uint32_t il)
{
	const struct ns_gguf *g = ns_model_meta(m);
	const struct ns_gguf_value *arr;
	uint64_t period = 0;
	char key[128];

	if (!hp->sliding_window)
		return false;
	snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", hp->arch);
	arr = ns_gguf_get_arr(g, key);
	if (arr && il < arr->v.arr.n && arr->v.arr.item_type != NS_GGUF_STRING &&
	    arr->v.arr.item_type != NS_GGUF_ARRAY)
		return ns_gguf_arr_i64(arr, il) != 0;
	if (!ns_gguf_get_u64(g, key, &period) || period == 0) {
		if (!strcmp(hp->arch, "gemma2") || !strcmp(hp->arch, "gpt-oss"))
			period = 2;
		else if (!strcmp(hp->arch, "gemma3"))
			period = 6;
		else if (!strcmp(hp->arch, "cohere2"))
			period = 4;
		else
			return false;
	}
	return il % period < period - 1;
}

static uint64_t s_max4(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	uint64_t ab = a > b ? a : b, cd = c > d ? c : d;

	return ab > cd ? ab : cd;
}

static bool s_mac(uint64_t *acc, uint64_t a, uint64_t b)
{
	uint64_t p;

	return ns_mul_u64_overflow(a, b, &p) || ns_add_u64_overflow(*acc, p, acc);
}

int nsplan_fixed_compute(const struct ns_model *m, const struct ns_hparams *hp, uint32_t n_ctx,
			 uint64_t overhead, struct nsplan_fixed *out, char *err, size_t errlen)
{
	return nsplan_fixed_compute_kv(m, hp, n_ctx, 128, 128, overhead, out, err, errlen);
}

int nsplan_fixed_compute_kv(const struct ns_model *m, const struct ns_hparams *hp,
			    uint32_t n_ctx, uint32_t k_b32, uint32_t v_b32, uint64_t overhead,
			    struct nsplan_fixed *out, char *err, size_t errlen)
{
	uint64_t q_max = 0, k_max = 0, v_max = 0, ff_max, ao, wide, rows, sc = 0, B;
	uint64_t state_size = 0, inner_size = 0;
	const struct ns_arch *arch;
	bool ovf = false, ring;

	memset(out, 0, sizeof(*out));
	if (!n_ctx) {
		ns_errf(err, errlen, "context length must be at least 1");
		return -EINVAL;
	}
	out->n_ctx = n_ctx;
	out->overhead_bytes = overhead;
	arch = ns_arch_find(hp->arch);
	ring = arch && (arch->builder == NS_BUILD_GEMMA || arch->builder == NS_BUILD_LLAMA) &&
	       hp->sliding_window;
	ns_hparams_get_u64(m, hp->arch, "ssm.state_size", &state_size);
	ns_hparams_get_u64(m, hp->arch, "ssm.inner_size", &inner_size);
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		const struct ns_model_tensor *k = s_layer_tensor(m, il, "attn_k.weight");
		const struct ns_model_tensor *conv = s_layer_tensor(m, il, "ssm_conv1d.weight");
		uint64_t kw = s_width(k), vw, qw = s_width(s_layer_tensor(m, il, "attn_q.weight"));

		if (conv) {
			uint64_t conv_elems = 0, ssm_elems = 0;
			out->n_rec_layers++;
			ovf |= s_mac(&conv_elems, conv->ne[0] ? conv->ne[0] - 1 : 0, conv->ne[1]);
			ovf |= s_mac(&ssm_elems, state_size, inner_size);
			uint64_t log_elems = 0, heads = s_width(s_layer_tensor(m, il,
							   "ssm_beta.weight"));

			/* the state, its copy and the log of the rollback (see fixed_mem.h) */
			ovf |= s_mac(&log_elems, NSPLAN_ROLLBACK_TOKENS, conv->ne[1] + 2 * heads);
			ovf |= s_mac(&out->recurrent_bytes, conv_elems + ssm_elems, 4);
			ovf |= s_mac(&out->rollback_bytes, conv_elems + ssm_elems, 4);
			ovf |= s_mac(&out->rollback_bytes, log_elems, 4);
			ovf |= conv_elems + ssm_elems < conv_elems;
		}
		if (!k && !conv && s_layer_tensor(m, il, "attn_qkv.weight"))
			kw = (uint64_t)hp->n_head_kv * hp->head_dim_k; /* fused QKV projection */
		if (!kw)
			continue;
		vw = s_width(s_layer_tensor(m, il, "attn_v.weight"));
		if (!vw)
			vw = k ? kw : (uint64_t)hp->n_head_kv * hp->head_dim_v;
		uint64_t ctx = n_ctx;
		out->n_kv_layers++;
		/* a sliding layer keeps a ring of its window and a chunk (kv_type.h
		 * ns_kv_ring_positions, as nscompute/forward/gemma.c and llama.c (gpt-oss)
		 * allocate on the cpu pass) */
		if (nsplan_layer_is_swa(m, hp, il)) {
			out->n_swa_layers++;
			if (ring) {
				ctx = ns_kv_ring_positions(hp->sliding_window,
							   n_ctx < NSPLAN_PREFILL_BATCH ? n_ctx :
							   NSPLAN_PREFILL_BATCH, n_ctx);
				out->ring_positions = ctx < n_ctx ? (uint32_t)ctx : 0;
			}
		}
		/* widths < 2^32 and b32 <= 128: the products fit; K in whole tiles */
		ovf |= s_mac(&out->kv_bytes, (ctx + NSPLAN_KV_TILE - 1) / NSPLAN_KV_TILE *
			     NSPLAN_KV_TILE, kw * k_b32 / 32);
		ovf |= s_mac(&out->kv_bytes, ctx, vw * v_b32 / 32);
		if (!qw)
			qw = (uint64_t)hp->n_head * hp->head_dim_k;
		q_max = qw > q_max ? qw : q_max;
		k_max = kw > k_max ? kw : k_max;
		v_max = vw > v_max ? vw : v_max;
	}
	B = n_ctx < NSPLAN_PREFILL_BATCH ? n_ctx : NSPLAN_PREFILL_BATCH;
	out->batch = (uint32_t)B;
	ff_max = hp->n_ff > hp->n_ff_exp ? hp->n_ff : hp->n_ff_exp;
	ao = (uint64_t)hp->n_head * hp->head_dim_v;
	wide = s_max4(hp->n_embd, q_max > ao ? q_max : ao, ff_max, 2 * ff_max);
	ovf |= s_mac(&sc, B, 3ull * hp->n_embd + q_max + k_max + v_max + ao + 3 * ff_max);
	ovf |= s_mac(&sc, B, wide);
	/* attention: one tile of NSPLAN_ATTN_TB query tokens x the group's heads per thread */
	rows = (uint64_t)NSPLAN_ATTN_TB * (hp->n_head_kv && hp->n_head > hp->n_head_kv ?
					   hp->n_head / hp->n_head_kv : 1);
	ovf |= s_mac(&sc, (uint64_t)NSPLAN_ATTN_THREADS * rows,
		     (uint64_t)n_ctx + 2 * hp->head_dim_k + 64 + hp->head_dim_v + 32);
	if (hp->n_expert)
		ovf |= s_mac(&sc, B, hp->n_expert + 3ull * hp->n_expert_used +
			     (2ull + hp->n_expert_used) * hp->n_embd + 3ull * hp->n_ff_exp);
	/* gemma4's MoE (nscompute/forward/moe.c, gemma.c): the router's own input, the fused
	 * gate_up of one expert and the routed branch's output beside the dense one */
	if (hp->n_expert && s_layer_tensor(m, 0, "ffn_gate_inp.scale"))
		ovf |= s_mac(&sc, B, 2ull * hp->n_embd + 2ull * hp->n_ff_exp);
	ovf |= s_mac(&sc, NSPLAN_VOCAB_FLOATS, hp->n_vocab);
	ovf |= ns_mul_u64_overflow(sc, 4, &out->scratch_bytes);
	out->total = out->kv_bytes;
	ovf |= ns_add_u64_overflow(out->total, out->recurrent_bytes, &out->total);
	ovf |= ns_add_u64_overflow(out->total, out->rollback_bytes, &out->total);
	ovf |= ns_add_u64_overflow(out->total, out->scratch_bytes, &out->total);
	ovf |= ns_add_u64_overflow(out->total, out->overhead_bytes, &out->total);
	out->margin_bytes = out->total / NSPLAN_MARGIN_DIV + NSPLAN_MARGIN_MIN;
	ovf |= ns_add_u64_overflow(out->total, out->margin_bytes, &out->total);
	if (ovf) {
		ns_errf(err, errlen, "fixed memory for a context of %u overflows 64 bits", n_ctx);
		return -EOVERFLOW;
	}
	return 0;
}

uint64_t nsplan_process_overhead(const struct ns_model *m)
{
	uint64_t meta = m->total_file_bytes > m->total_tensor_bytes ?
			m->total_file_bytes - m->total_tensor_bytes : 0;
	uint64_t o;

	/* file sizes < 2^63 and small factors: saturate rather than wrap */
	if (ns_mul_u64_overflow(meta, NSPLAN_META_FACTOR, &o) ||
	    ns_add_u64_overflow(o, (uint64_t)NSPLAN_N_PROCESSES * NSPLAN_PROC_BASE, &o))
		return UINT64_MAX;
	return o;
}

int nsplan_mtp_bytes(const struct ns_model *m, const struct ns_hparams *hp, uint32_t n_ctx,
		     uint64_t *bytes, char *err, size_t errlen)
{
	static const char *const mats[] = { "nextn.eh_proj", "attn_q", "attn_k", "attn_v",
					    "attn_output", "ffn_gate", "ffn_up", "ffn_down" };
	static const char *const mats_moe[] = { "nextn.eh_proj", "attn_q", "attn_k", "attn_v",
						"attn_output", "ffn_gate_shexp", "ffn_up_shexp",
						"ffn_down_shexp", "ffn_gate_inp", "ffn_gate_exps",
						"ffn_up_exps", "ffn_down_exps" };
	static const char *const vecs[] = { "attn_norm", "post_attention_norm", "attn_q_norm",
					    "attn_k_norm", "nextn.enorm", "nextn.hnorm",
					    "nextn.shared_head_norm" };
	const uint64_t E = hp->n_embd, dk = hp->head_dim_k, nb = n_ctx < 512 ? n_ctx : 512;
	const uint64_t nq = (uint64_t)hp->n_head * dk, nk = (uint64_t)hp->n_head_kv * dk;
	const struct ns_model_tensor *t, *ff, *te = ns_model_find(m, "token_embd.weight");
	const struct ns_model_tensor *router;
	const char *const *mat;
	size_t n_mat;
	struct nsplan_fixed kv;
	uint64_t sum = 0, rows, n_ff;
	char name[128];
	int rc;

	*bytes = 0;
	if (!hp->n_nextn)
		return ns_errf(err, errlen, "--draft mtp: the model has no MTP block"), -ENOENT;
	snprintf(name, sizeof(name), "blk.%u.ffn_gate_inp.weight", hp->n_layer);
	router = ns_model_find(m, name); /* qwen35moe: an MoE FFN and a shared expert */
	mat = router ? mats_moe : mats;
	n_mat = router ? sizeof(mats_moe) / sizeof(mats_moe[0]) : sizeof(mats) / sizeof(mats[0]);
	snprintf(name, sizeof(name), router ? "blk.%u.ffn_gate_shexp.weight" :
		 "blk.%u.ffn_gate.weight", hp->n_layer);
	if (!(ff = ns_model_find(m, name)))
		return ns_errf(err, errlen, "--draft mtp: the MTP block has no %s", name), -EINVAL;
	n_ff = ff->n_rows;
	for (size_t i = 0; i < n_mat; i++) {
		snprintf(name, sizeof(name), "blk.%u.%s.weight", hp->n_layer, mat[i]);
		if (!(t = ns_model_find(m, name)))
			return ns_errf(err, errlen, "--draft mtp: the MTP block has no %s", name),
			       -EINVAL;
		sum += t->n_bytes;
	}
	for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) {
		snprintf(name, sizeof(name), "blk.%u.%s.weight", hp->n_layer, vecs[i]);
		if ((t = ns_model_find(m, name)))
			sum += 4 * t->n_elems; /* dequantized (shared_head_norm may be absent) */
	}
	/* its cache: one of the pass's f32 KV layers (all alike in qwen35) */
	rc = nsplan_fixed_compute_kv(m, hp, n_ctx, 128, 128, 0, &kv, err, errlen);
	if (rc < 0)
		return rc;
	if (kv.n_kv_layers)
		sum += kv.kv_bytes / kv.n_kv_layers;
	/* scratch (mtp.c s_scratch): per row h, e, x, xb, xb2, h' (E each), [e | h] (2E),
	 * [q | gate] (2 nq), q and ao (nq), k and v (nk), gate and up (n_ff); once pend (E),
	 * rope angles (2 dk), one step's logits (n_vocab); the ids (8 bytes a row) */
	rows = 6 * E + 2 * E + 2 * nq + 2 * nq + 2 * nk + 2 * n_ff;
	sum += 4 * (nb * rows + E + 2 * dk + (te ? te->ne[1] : hp->n_vocab)) + 8 * nb;
	if (router) { /* one token's routing and one expert at a time: logits, weights, the
		       * expert's gate and up, the shared expert's row; ids and taken flags */
		snprintf(name, sizeof(name), "blk.%u.ffn_gate_inp_shexp.weight", hp->n_layer);
		if ((t = ns_model_find(m, name)))
			sum += 4 * t->n_elems;
		sum += 4 * (router->n_rows + hp->n_expert_used + 2ull * hp->n_ff_exp + E) +
		       4ull * hp->n_expert_used + router->n_rows;
	}
	*bytes = sum;
	return 0;
}
