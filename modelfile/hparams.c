/* hparams.c - architecture hyperparameters from GGUF metadata (llama.cpp key names). */
#include "hparams.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ns_util.h"

bool ns_hparams_get_u64(const struct ns_model *m, const char *arch, const char *suffix,
			uint64_t *out)
{
	const struct ns_gguf *g = ns_model_meta(m);
	const struct ns_gguf_value *arr;
	char key[256];

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	if (ns_gguf_get_u64(g, key, out))
		return true;
	/* Some architectures store per-layer values as arrays; the first is representative. */
	arr = ns_gguf_get_arr(g, key);
	if (arr && arr->v.arr.n > 0 && ns_gguf_vtype_size(arr->v.arr.item_type) &&
	    arr->v.arr.item_type != NS_GGUF_F32 && arr->v.arr.item_type != NS_GGUF_F64) {
		int64_t v = ns_gguf_arr_i64(arr, 0);
		if (v >= 0) {
			*out = (uint64_t)v;
			return true;
		}
	}
	return false;
}

bool ns_hparams_get_f64(const struct ns_model *m, const char *arch, const char *suffix,
			double *out)
{
	char key[256];

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	return ns_gguf_get_f64(ns_model_meta(m), key, out);
}

static uint32_t s_u32(const struct ns_model *m, const char *arch, const char *suffix,
		      uint32_t dflt)
{
	uint64_t v;

	if (!ns_hparams_get_u64(m, arch, suffix, &v) || v > UINT32_MAX)
		return dflt;
	return (uint32_t)v;
}

static void s_copy(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

int ns_hparams_load(const struct ns_model *m, struct ns_hparams *hp, char *err, size_t errlen)
{
	const struct ns_gguf *g = ns_model_meta(m);
	const struct ns_gguf_value *tokens;
	const struct ns_model_tensor *embd;
	const char *a;
	uint64_t v;

	memset(hp, 0, sizeof(*hp));
	s_copy(hp->arch, sizeof(hp->arch), ns_gguf_get_str(g, "general.architecture"));
	s_copy(hp->name, sizeof(hp->name), ns_gguf_get_str(g, "general.name"));
	a = hp->arch;
	hp->has_block_count = ns_hparams_get_u64(m, a, "block_count", &v);
	hp->n_layer = hp->has_block_count && v <= UINT32_MAX ? (uint32_t)v : 0;
	/* llama.cpp's converter counts the MTP blocks in block_count: every pass here runs the
	 * main layers, the MTP drafter (nscompute/forward/mtp.h) the blocks after them */
	if (ns_hparams_get_u64(m, a, "nextn_predict_layers", &v) && v && v < hp->n_layer) {
		hp->n_nextn = (uint32_t)v;
		hp->n_layer -= hp->n_nextn;
	}
	hp->n_embd = s_u32(m, a, "embedding_length", 0);
	hp->n_ff = s_u32(m, a, "feed_forward_length", 0);
	hp->n_head = s_u32(m, a, "attention.head_count", 0);
	hp->n_head_kv = s_u32(m, a, "attention.head_count_kv", hp->n_head);
	hp->head_dim_k = s_u32(m, a, "attention.key_length",
			       hp->n_head ? hp->n_embd / hp->n_head : 0);
	hp->head_dim_v = s_u32(m, a, "attention.value_length", hp->head_dim_k);
	hp->n_ctx_train = s_u32(m, a, "context_length", 0);
	hp->n_expert = s_u32(m, a, "expert_count", 0);
	hp->n_expert_used = s_u32(m, a, "expert_used_count", 0);
	hp->n_ff_exp = s_u32(m, a, "expert_feed_forward_length", 0);
	hp->n_expert_shared = s_u32(m, a, "expert_shared_count", 0);
	hp->sliding_window = s_u32(m, a, "attention.sliding_window", 0);
	hp->rope_dims = s_u32(m, a, "rope.dimension_count", hp->head_dim_k);
	hp->n_deepstack = s_u32(m, a, "n_deepstack_layers", 0);
	{
		char key[256];
		const struct ns_gguf_value *sec;

		snprintf(key, sizeof(key), "%s.rope.dimension_sections", a);
		sec = ns_gguf_get_arr(g, key);
		for (uint64_t i = 0; sec && ns_gguf_vtype_size(sec->v.arr.item_type) &&
		     sec->v.arr.item_type != NS_GGUF_F32 && sec->v.arr.item_type != NS_GGUF_F64 &&
		     i < sec->v.arr.n && i < 4; i++) {
			int64_t v = ns_gguf_arr_i64(sec, i);

			hp->rope_sections[i] = v > 0 && v <= UINT32_MAX ? (uint32_t)v : 0;
		}
	}
	if (!ns_hparams_get_f64(m, a, "rope.freq_base", &hp->rope_freq_base))
		hp->rope_freq_base = 10000.0;
	if (!ns_hparams_get_f64(m, a, "rope.scaling.factor", &hp->rope_scale))
		hp->rope_scale = 0;
	{
		char key[256];
		snprintf(key, sizeof(key), "%s.rope.scaling.type", a);
		s_copy(hp->rope_scaling_type, sizeof(hp->rope_scaling_type), ns_gguf_get_str(g, key));
	}
	hp->rope_orig_ctx = s_u32(m, a, "rope.scaling.original_context_length", 0);
	if (!ns_hparams_get_f64(m, a, "attention.layer_norm_rms_epsilon", &hp->rms_eps))
		hp->rms_eps = 0;
	if (!ns_hparams_get_f64(m, a, "attention.layer_norm_epsilon", &hp->norm_eps))
		hp->norm_eps = 0;
	hp->tied_embeddings = !ns_model_find(m, "output.weight");
	s_copy(hp->tokenizer_model, sizeof(hp->tokenizer_model),
	       ns_gguf_get_str(g, "tokenizer.ggml.model"));
	s_copy(hp->tokenizer_pre, sizeof(hp->tokenizer_pre), ns_gguf_get_str(g, "tokenizer.ggml.pre"));
	hp->has_chat_template = ns_gguf_get_str(g, "tokenizer.chat_template") != NULL;

	tokens = ns_gguf_get_arr(g, "tokenizer.ggml.tokens");
	embd = ns_model_find(m, "token_embd.weight");
	hp->n_vocab = s_u32(m, a, "vocab_size", 0);
	if (!hp->n_vocab && tokens && tokens->v.arr.n <= UINT32_MAX)
		hp->n_vocab = (uint32_t)tokens->v.arr.n;
	if (!hp->n_vocab && embd && embd->n_dims >= 2 && embd->ne[1] <= UINT32_MAX)
		hp->n_vocab = (uint32_t)embd->ne[1];

	if (hp->n_head && hp->n_head_kv && hp->n_head % hp->n_head_kv) {
		ns_errf(err, errlen, "%s: offset 0: %s.attention.head_count %u is not a multiple of "
			"head_count_kv %u", g->path, a, hp->n_head, hp->n_head_kv);
		return -EINVAL;
	}
	if (hp->n_expert && hp->n_expert_used > hp->n_expert) {
		ns_errf(err, errlen, "%s: offset 0: %s.expert_used_count %u exceeds expert_count %u",
			g->path, a, hp->n_expert_used, hp->n_expert);
		return -EINVAL;
	}
	return 0;
}
