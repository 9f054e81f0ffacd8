/* hf_config.c - config.json to the converter's hyperparameter keys (see hf_config.h). */
#include "hf_config.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gguf_meta.h"
#include "ns_util.h"

/* The checkpoint classes we translate and the GGUF architecture each becomes. */
static const struct {
	const char *hf;
	const char *arch;
	bool moe;
} s_archs[] = {
	{ "Qwen3_5ForCausalLM", "qwen35", false },
	{ "Qwen3_5ForConditionalGeneration", "qwen35", false },
	{ "Qwen3_5MoeForCausalLM", "qwen35moe", true },
	{ "Qwen3_5MoeForConditionalGeneration", "qwen35moe", true },
};

/* general.file_type of the converter's --outtype matching the checkpoint's dtype */
#define S_FTYPE_ALL_F32 0
#define S_FTYPE_MOSTLY_F16 1
#define S_FTYPE_MOSTLY_BF16 32

struct s_cfg {
	const char *path;
	const json_t *root, *text; /* text: text_config or NULL */
	char *err;
	size_t errlen;
};

/* A key as the converter sees it: text_config's value over the top level's. */
static const json_t *s_get(const struct s_cfg *c, const char *key)
{
	const json_t *v = c->text ? json_object_get(c->text, key) : NULL;

	return v ? v : json_object_get(c->root, key);
}

/* The first of keys present (the converter's find_hparam). */
static const json_t *s_find(const struct s_cfg *c, const char *const *keys)
{
	for (; *keys; keys++) {
		const json_t *v = s_get(c, *keys);

		if (v && !json_is_null(v))
			return v;
	}
	return NULL;
}

/* An integer in 0..max under one of keys; absent: *out = 0 and 0, or -EINVAL if required. */
static int s_uint(const struct s_cfg *c, const char *const *keys, uint64_t max, bool required,
		  uint32_t *out)
{
	const json_t *v = s_find(c, keys);

	*out = 0;
	if (!v) {
		if (!required)
			return 0;
		ns_errf(c->err, c->errlen, "%s: missing '%s'", c->path, keys[0]);
		return -EINVAL;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max) {
		ns_errf(c->err, c->errlen, "%s: '%s' is not an integer in 0..%" PRIu64, c->path,
			keys[0], max);
		return -EINVAL;
	}
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

static int s_num(const struct s_cfg *c, const json_t *v, const char *key, double *out)
{
	*out = NAN;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v) || !isfinite(json_number_value(v))) {
		ns_errf(c->err, c->errlen, "%s: '%s' is not a number", c->path, key);
		return -EINVAL;
	}
	*out = json_number_value(v);
	return 0;
}

#define S_KEYS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define S_DIM_MAX (1u << 24) /* no dimension of a real model comes near it */

static int s_arch(const struct s_cfg *c, struct ns_hf_config *h, bool *moe)
{
	const json_t *a = c->text ? json_object_get(c->text, "architectures") : NULL;
	const char *name;

	if (!a)
		a = json_object_get(c->root, "architectures");
	name = json_string_value(json_array_get(a, 0));
	if (!name) {
		ns_errf(c->err, c->errlen, "%s: no 'architectures' list naming the model class",
			c->path);
		return -EINVAL;
	}
	snprintf(h->hf_arch, sizeof(h->hf_arch), "%s", name);
	for (size_t i = 0; i < NS_ARRAY_LEN(s_archs); i++) {
		if (!strcmp(name, s_archs[i].hf)) {
			snprintf(h->arch, sizeof(h->arch), "%s", s_archs[i].arch);
			*moe = s_archs[i].moe;
			return 0;
		}
	}
	ns_errf(c->err, c->errlen, "%s: architecture '%s' cannot be read from safetensors (we "
		"translate Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration and their Moe "
		"classes; convert it to GGUF with llama.cpp)", c->path, name);
	return -EINVAL;
}

/* rope_parameters (or rope_scaling), with the global values mirrored in as the converter does */
static int s_rope(const struct s_cfg *c, struct ns_hf_config *h)
{
	const json_t *rp = s_get(c, "rope_parameters");
	const json_t *sec, *v;
	size_t i;
	int rc;

	if (!rp || json_is_null(rp))
		rp = s_get(c, "rope_scaling");
	if (rp && !json_is_object(rp) && !json_is_null(rp)) {
		ns_errf(c->err, c->errlen, "%s: 'rope_parameters' is not an object", c->path);
		return -EINVAL;
	}
	if (!json_is_object(rp))
		rp = NULL;
	v = rp ? json_object_get(rp, "rope_theta") : NULL;
	if (!v)
		v = s_find(c, S_KEYS("global_rope_theta", "rope_global_theta", "rope_theta_global",
				     "rope_theta", "rotary_emb_base"));
	if ((rc = s_num(c, v, "rope_theta", &h->rope_theta)))
		return rc;
	v = rp ? json_object_get(rp, "partial_rotary_factor") : NULL;
	if (!v)
		v = s_find(c, S_KEYS("partial_rotary_factor", "rope_pct", "rope_percent"));
	if ((rc = s_num(c, v, "partial_rotary_factor", &h->partial_rotary)))
		return rc;
	if (isnan(h->partial_rotary))
		h->partial_rotary = 0.25; /* Qwen3NextModel's default */
	if (h->partial_rotary <= 0 || h->partial_rotary > 1) {
		ns_errf(c->err, c->errlen, "%s: partial_rotary_factor %g is not in (0, 1]", c->path,
			h->partial_rotary);
		return -EINVAL;
	}
	/* Qwen3.5 always writes sections: the checkpoint's, else the upstream default */
	memcpy(h->mrope, (const int32_t[4]){ 11, 11, 10, 0 }, sizeof(h->mrope));
	sec = rp ? json_object_get(rp, "mrope_section") : NULL;
	if (sec) {
		if (!json_is_array(sec) || json_array_size(sec) > 4) {
			ns_errf(c->err, c->errlen, "%s: mrope_section is not a list of at most 4 "
				"integers", c->path);
			return -EINVAL;
		}
		memset(h->mrope, 0, sizeof(h->mrope));
		json_array_foreach(sec, i, v) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    json_integer_value(v) > S_DIM_MAX) {
				ns_errf(c->err, c->errlen, "%s: mrope_section holds '%s', not a "
					"dimension count", c->path, json_is_string(v) ?
					json_string_value(v) : "a non-integer");
				return -EINVAL;
			}
			h->mrope[i] = (int32_t)json_integer_value(v);
		}
	}
	h->rope_factor = NAN;
	v = rp ? json_object_get(rp, "rope_type") : NULL;
	if (!v && rp)
		v = json_object_get(rp, "type");
	snprintf(h->rope_type, sizeof(h->rope_type), "%s", json_is_string(v) ?
		 json_string_value(v) : "");
	if (!rp)
		return 0;
	if ((rc = s_num(c, json_object_get(rp, "factor"), "rope factor", &h->rope_factor)))
		return rc;
	v = json_object_get(rp, "original_max_position_embeddings");
	if (!strcmp(h->rope_type, "yarn") && !isnan(h->rope_factor) &&
	    (!json_is_integer(v) || json_integer_value(v) <= 0 ||
	     json_integer_value(v) > UINT32_MAX)) {
		ns_errf(c->err, c->errlen, "%s: yarn rope scaling needs "
			"original_max_position_embeddings", c->path);
		return -EINVAL;
	}
	h->rope_orig_ctx = json_is_integer(v) ? (uint32_t)json_integer_value(v) : 0;
	return 0;
}

/* layer_types, where present, must be what full_attention_interval says: layer i is full
 * attention exactly when (i + 1) % interval == 0 (llama.cpp's qwen35 rule). */
static int s_layer_types(const struct s_cfg *c, const struct ns_hf_config *h)
{
	const json_t *lt = s_get(c, "layer_types");
	const json_t *v;
	size_t i;

	if (!lt)
		return 0;
	if (!json_is_array(lt) || json_array_size(lt) != h->n_layer) {
		ns_errf(c->err, c->errlen, "%s: layer_types does not list %u layers", c->path,
			h->n_layer);
		return -EINVAL;
	}
	json_array_foreach(lt, i, v) {
		const char *s = json_string_value(v);
		bool full = (i + 1) % h->full_attn_interval == 0;

		if (!s || strcmp(s, full ? "full_attention" : "linear_attention")) {
			ns_errf(c->err, c->errlen, "%s: layer_types[%zu] is '%s' but "
				"full_attention_interval %u makes it %s", c->path, i, s ? s : "?",
				h->full_attn_interval, full ? "full_attention" : "linear_attention");
			return -EINVAL;
		}
	}
	return 0;
}

static void s_file_type(const struct s_cfg *c, struct ns_hf_config *h)
{
	const char *d = json_string_value(s_find(c, S_KEYS("dtype", "torch_dtype")));

	h->file_type = S_FTYPE_ALL_F32;
	if (d && !strcmp(d, "bfloat16"))
		h->file_type = S_FTYPE_MOSTLY_BF16;
	else if (d && !strcmp(d, "float16"))
		h->file_type = S_FTYPE_MOSTLY_F16;
}

static int s_load(const struct s_cfg *c, struct ns_hf_config *h)
{
	bool moe = false;
	const json_t *tie;
	int rc;

	if ((rc = s_arch(c, h, &moe)) ||
	    (rc = s_uint(c, S_KEYS("num_hidden_layers", "n_layers", "n_layer", "num_layers"), 4096,
			 true, &h->n_layer)) ||
	    (rc = s_uint(c, S_KEYS("mtp_num_hidden_layers"), 64, false, &h->n_mtp)) ||
	    (rc = s_uint(c, S_KEYS("hidden_size", "n_embd", "dim"), S_DIM_MAX, true, &h->n_embd)) ||
	    (rc = s_uint(c, S_KEYS("vocab_size"), INT32_MAX, false, &h->n_vocab)) ||
	    (rc = s_uint(c, S_KEYS("max_position_embeddings", "n_ctx", "n_positions", "max_length",
				   "max_sequence_length", "model_max_length"), UINT32_MAX, false,
			 &h->n_ctx)) ||
	    (rc = s_uint(c, S_KEYS("prefix_dense_intermediate_size", "dense_intermediate_size",
				   "intermediate_size", "n_inner", "hidden_dim"), S_DIM_MAX, false,
			 &h->n_ff)) ||
	    (rc = s_uint(c, S_KEYS("num_attention_heads", "n_head", "n_heads"), S_DIM_MAX, true,
			 &h->n_head)) ||
	    (rc = s_uint(c, S_KEYS("num_key_value_heads", "n_kv_heads"), S_DIM_MAX, false,
			 &h->n_head_kv)) ||
	    (rc = s_uint(c, S_KEYS("head_dim"), S_DIM_MAX, false, &h->head_dim)) ||
	    (rc = s_uint(c, S_KEYS("full_attention_interval"), 4096, false,
			 &h->full_attn_interval)) ||
	    (rc = s_uint(c, S_KEYS("linear_num_key_heads"), S_DIM_MAX, true, &h->lin_k_heads)) ||
	    (rc = s_uint(c, S_KEYS("linear_num_value_heads"), S_DIM_MAX, true, &h->lin_v_heads)) ||
	    (rc = s_uint(c, S_KEYS("linear_key_head_dim"), S_DIM_MAX, true, &h->lin_k_dim)) ||
	    (rc = s_uint(c, S_KEYS("linear_value_head_dim"), S_DIM_MAX, true, &h->lin_v_dim)) ||
	    (rc = s_uint(c, S_KEYS("linear_conv_kernel_dim"), 1024, true, &h->conv_kernel)) ||
	    (rc = s_uint(c, S_KEYS("num_local_experts", "num_experts", "n_routed_experts"), 1u << 16,
			 moe, &h->n_expert)) ||
	    (rc = s_uint(c, S_KEYS("num_experts_per_tok", "num_experts_per_token", "top_k_experts"),
			 1u << 16, moe, &h->n_expert_used)) ||
	    (rc = s_uint(c, S_KEYS("moe_intermediate_size"), S_DIM_MAX, moe, &h->n_ff_exp)) ||
	    (rc = s_uint(c, S_KEYS("shared_expert_intermediate_size"), S_DIM_MAX, false,
			 &h->n_ff_shexp)) ||
	    (rc = s_num(c, s_find(c, S_KEYS("rms_norm_eps", "norm_eps")), "rms_norm_eps",
			&h->rms_eps)) ||
	    (rc = s_rope(c, h)))
		return rc;
	if (!h->full_attn_interval)
		h->full_attn_interval = 4; /* the converter's default */
	if (!h->n_layer || !h->n_embd || !h->n_head || !h->lin_k_heads || !h->lin_v_heads ||
	    !h->lin_k_dim || !h->lin_v_dim || !h->conv_kernel ||
	    h->lin_v_heads % h->lin_k_heads) {
		ns_errf(c->err, c->errlen, "%s: impossible dimensions (layers %u, hidden %u, heads "
			"%u, linear key/value heads %u/%u: the value heads must be a multiple of "
			"the key heads)", c->path, h->n_layer, h->n_embd, h->n_head, h->lin_k_heads,
			h->lin_v_heads);
		return -EINVAL;
	}
	if ((uint64_t)h->lin_k_heads * h->lin_k_dim > S_DIM_MAX ||
	    (uint64_t)h->lin_v_heads * h->lin_v_dim > S_DIM_MAX) {
		ns_errf(c->err, c->errlen, "%s: linear attention %u x %u key and %u x %u value "
			"dimensions are too large", c->path, h->lin_k_heads, h->lin_k_dim,
			h->lin_v_heads, h->lin_v_dim);
		return -EINVAL;
	}
	if (moe && (!h->n_expert || !h->n_expert_used || h->n_expert_used > h->n_expert ||
		    !h->n_ff_exp)) {
		ns_errf(c->err, c->errlen, "%s: impossible experts (%u, %u per token, width %u)",
			c->path, h->n_expert, h->n_expert_used, h->n_ff_exp);
		return -EINVAL;
	}
	if ((rc = s_layer_types(c, h)))
		return rc;
	tie = s_get(c, "tie_word_embeddings");
	h->tied_embeddings = json_is_true(tie);
	s_file_type(c, h);
	return 0;
}

int ns_hf_config_load(const char *dir, struct ns_hf_config *h, char *err, size_t errlen)
{
	char path[4096];
	json_error_t je;
	json_t *root;
	struct s_cfg c = { .path = path, .err = err, .errlen = errlen };
	int rc;

	memset(h, 0, sizeof(*h));
	if (snprintf(path, sizeof(path), "%s/config.json", dir) >= (int)sizeof(path)) {
		ns_errf(err, errlen, "%s: path too long", dir);
		return -ENAMETOOLONG;
	}
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		FILE *f = fopen(path, "r");

		if (!f) {
			ns_errf(err, errlen, "%s: no config.json (a Hugging Face checkpoint directory "
				"needs one)", dir);
			return -ENOENT;
		}
		fclose(f);
		ns_errf(err, errlen, "%s: line %d: not valid JSON (%s)", path, je.line, je.text);
		return -EINVAL;
	}
	c.root = root;
	c.text = json_object_get(root, "text_config");
	if (!json_is_object(root) || (c.text && !json_is_object(c.text))) {
		ns_errf(err, errlen, "%s: not a JSON object with an optional text_config object",
			path);
		json_decref(root);
		return -EINVAL;
	}
	rc = s_load(&c, h);
	json_decref(root);
	return rc;
}

/* "<arch>.<suffix>" */
static const char *s_key(char *buf, size_t n, const char *arch, const char *suffix)
{
	snprintf(buf, n, "%s.%s", arch, suffix);
	return buf;
}

int ns_hf_config_write(const struct ns_hf_config *h, uint32_t n_mtp, const char *model_name,
		       struct ns_gguf *g)
{
	const char *a = h->arch;
	uint32_t rope_dim = h->head_dim ? h->head_dim : h->n_embd / h->n_head;
	char k[128];
	int rc = 0;

#define S_U32(suffix, v) (rc = rc ? rc : ns_gguf_meta_u32(g, s_key(k, sizeof(k), a, suffix), (v)))
#define S_F32(suffix, v) (rc = rc ? rc : ns_gguf_meta_f32(g, s_key(k, sizeof(k), a, suffix), \
							  (float)(v)))
	rc = ns_gguf_meta_str(g, "general.architecture", a, strlen(a));
	rc = rc ? rc : ns_gguf_meta_str(g, "general.type", "model", 5);
	rc = rc ? rc : ns_gguf_meta_str(g, "general.name", model_name, strlen(model_name));
	S_U32("block_count", h->n_layer + n_mtp);
	if (h->n_ctx)
		S_U32("context_length", h->n_ctx);
	S_U32("embedding_length", h->n_embd);
	if (h->n_ff)
		S_U32("feed_forward_length", h->n_ff);
	S_U32("attention.head_count", h->n_head);
	if (h->n_head_kv)
		S_U32("attention.head_count_kv", h->n_head_kv);
	if (!strcmp(h->rope_type, "linear") && !isnan(h->rope_factor)) {
		rc = rc ? rc : ns_gguf_meta_str(g, s_key(k, sizeof(k), a, "rope.scaling.type"),
						"linear", 6);
		S_F32("rope.scaling.factor", h->rope_factor);
	} else if (!strcmp(h->rope_type, "yarn") && !isnan(h->rope_factor)) {
		rc = rc ? rc : ns_gguf_meta_str(g, s_key(k, sizeof(k), a, "rope.scaling.type"),
						"yarn", 4);
		S_F32("rope.scaling.factor", h->rope_factor);
		S_U32("rope.scaling.original_context_length", h->rope_orig_ctx);
	}
	rc = rc ? rc : ns_gguf_meta_arr_i32(g, s_key(k, sizeof(k), a, "rope.dimension_sections"),
					    h->mrope, 4);
	if (!isnan(h->rope_theta))
		S_F32("rope.freq_base", h->rope_theta);
	if (!isnan(h->rms_eps))
		S_F32("attention.layer_norm_rms_epsilon", h->rms_eps);
	if (h->n_expert) {
		S_U32("expert_count", h->n_expert);
		S_U32("expert_used_count", h->n_expert_used);
	}
	if (h->head_dim) {
		S_U32("attention.key_length", h->head_dim);
		S_U32("attention.value_length", h->head_dim);
	}
	rc = rc ? rc : ns_gguf_meta_u32(g, "general.file_type", h->file_type);
	if (h->n_ff_exp)
		S_U32("expert_feed_forward_length", h->n_ff_exp);
	if (h->n_ff_shexp)
		S_U32("expert_shared_feed_forward_length", h->n_ff_shexp);
	S_U32("ssm.conv_kernel", h->conv_kernel);
	S_U32("ssm.state_size", h->lin_k_dim);
	S_U32("ssm.group_count", h->lin_k_heads);
	S_U32("ssm.time_step_rank", h->lin_v_heads);
	S_U32("ssm.inner_size", h->lin_v_dim * h->lin_v_heads);
	S_U32("full_attention_interval", h->full_attn_interval);
	S_U32("rope.dimension_count", (uint32_t)(rope_dim * h->partial_rotary));
	if (n_mtp)
		S_U32("nextn_predict_layers", n_mtp);
#undef S_U32
#undef S_F32
	return rc;
}
