/* synth.c - random-weight models in real shapes. See synth.h; the Qwen3.5 family is in
 * synth_qwen35.c, Gemma 4 in synth_gemma4.c. */
#include "synth.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp16.h"
#include "ggml_type.h"
#include "gguf_write.h"
#include "ns_util.h"
#include "synth_internal.h"

/* Dimensions of the published models (config.json of each), vocabularies at full size. */
static const struct preset s_presets[] = {
	{ "demo", "llama", 6, 512, 1536, 8, 4, 64, 4096, 4096, 500000.0, 1e-5,
	  0, 0, 0, 0, false, false, false, "llama-bpe", NS_SYNTH_Q4_K_M, NULL, NULL, NULL },
	{ "llama-8b", "llama", 32, 4096, 14336, 32, 8, 128, 128256, 131072, 500000.0, 1e-5,
	  0, 0, 0, 0, false, false, true, "llama-bpe", NS_SYNTH_Q4_K_M, NULL, NULL, NULL },
	{ "qwen3-8b", "qwen3", 36, 4096, 12288, 32, 8, 128, 151936, 40960, 1000000.0, 1e-6,
	  0, 0, 0, 0, true, false, false, "qwen2", NS_SYNTH_Q4_K_M, NULL, NULL, NULL },
	{ "qwen3-30b-a3b", "qwen3moe", 48, 2048, 6144, 32, 4, 128, 151936, 40960, 1000000.0, 1e-6,
	  128, 8, 768, 0, true, false, false, "qwen2", NS_SYNTH_Q4_K_M, NULL, NULL, NULL },
	{ "qwen3-235b-a22b", "qwen3moe", 94, 4096, 12288, 64, 4, 128, 151936, 40960, 1000000.0, 1e-6,
	  128, 8, 1536, 0, true, false, false, "qwen2", NS_SYNTH_Q4_K_M, NULL, NULL, NULL },
	{ "gpt-oss-120b", "gpt-oss", 36, 2880, 2880, 64, 8, 64, 201088, 131072, 150000.0, 1e-5,
	  128, 4, 2880, 128, false, false, false, "gpt-4o", NS_SYNTH_MXFP4, NULL, NULL, NULL },
	/* Qwen3.5 (vocab_size 248320, rope_theta 1e7, rms_norm_eps 1e-6, max_position_embeddings
	 * 262144 in all three). Sources, none of them the Hugging Face repository itself (not
	 * reachable from here): 4B: hidden 2560, 32 layers, ffn 9216, 16 heads / 4 kv of 256,
	 * tied, linear heads 16 k / 32 v - THUDM/slime scripts/models/qwen3.5-4B.sh (as copied
	 * by its users) and third-party copies of its config.json. 35B-A3B: hidden 2048, 40
	 * layers, 16 heads / 2 kv, 256 experts top-8 of 512, shared 512, linear 16 k / 32 v -
	 * THUDM/slime scripts/models/qwen3.5-35B-A3B.sh and transformers' Qwen3_5MoeTextConfig
	 * defaults ("Qwen/Qwen3.5-35B-A3B"); no intermediate_size, so no feed_forward_length, as
	 * in its published GGUF conversions. 397B-A17B: hidden 4096, 60 layers, 32 heads / 2
	 * kv, 512 experts top-10 of 1024, shared 1024, linear 16 k / 64 v - THUDM/slime
	 * scripts/models/qwen3.5-397B-A17B.sh (--moe-* flags) and test fixtures quoting its
	 * config.json (one, Megatron-Bridge's, gives shared_expert_intermediate_size 4096
	 * against 1024 in slime and the others: 1024 is used). n_ff of the MoE presets is 0 (no
	 * feed_forward_length key). */
	{ "qwen3.5-4b", "qwen35", 32, 2560, 9216, 16, 4, 256, 248320, 262144, 10000000.0, 1e-6,
	  0, 0, 0, 0, true, true, false, "qwen35", NS_SYNTH_Q4_K_M, &ns_synth_q35_4b, NULL, NULL },
	{ "qwen3.5-35b-a3b", "qwen35moe", 40, 2048, 0, 16, 2, 256, 248320, 262144, 10000000.0,
	  1e-6, 256, 8, 512, 0, true, false, false, "qwen35", NS_SYNTH_Q4_K_M, &ns_synth_q35_35b,
	  NULL, NULL },
	{ "qwen3.5-397b-a17b", "qwen35moe", 60, 4096, 0, 32, 2, 256, 248320, 262144, 10000000.0,
	  1e-6, 512, 10, 1024, 0, true, false, false, "qwen35", NS_SYNTH_Q4_K_M, &ns_synth_q35_397b,
	  NULL, NULL },
	/* Test models in the shape of ../shared/oracle/tiny/tiny-qwen35*.gguf (n_embd 256, 4
	 * layers, 4 heads / 2 KV of 64, linear heads 2 k / 4 v of 64, 16 rotary dims, vocab
	 * 512): the MTP block's tests write them with --mtp (llama.cpp's oracle in tools/). */
	{ "tiny-qwen35", "qwen35", 4, 256, 512, 4, 2, 64, 512, 4096, 10000000.0, 1e-6,
	  0, 0, 0, 0, true, true, false, "qwen35", NS_SYNTH_F32, &ns_synth_q35_tiny, NULL,
	  NULL },
	{ "tiny-qwen35moe", "qwen35moe", 4, 256, 0, 4, 2, 64, 512, 4096, 10000000.0, 1e-6,
	  8, 2, 128, 0, true, false, false, "qwen35", NS_SYNTH_F32, &ns_synth_q35_tiny, NULL,
	  NULL },
	/* Gemma 4 (vocab_size 262144, tied embeddings, rms_norm_eps 1e-6, head_dim 256 and
	 * global_head_dim 512, layer_types five sliding then one full, rope 1e4 sliding and 1e6
	 * proportional with partial_rotary_factor 0.25 on full layers, final_logit_softcapping
	 * 30). Sources, again not the Hugging Face repositories: 31B: hidden 5376, 60 layers,
	 * intermediate 21504, 32 heads, 16 KV heads (sliding) and num_global_key_value_heads 4,
	 * attention_k_eq_v true, sliding_window 1024, 262144 positions - two third-party copies
	 * of its config.json (a model-porting test's "official_size_config" table and a
	 * standalone config with the 60 layer_types) that agree. E4B: hidden 2560, 42 layers,
	 * intermediate 10240 (use_double_wide_mlp false), 8 heads / 2 KV, num_kv_shared_layers
	 * 18, hidden_size_per_layer_input 256, vocab_size_per_layer_input 262144, sliding_window
	 * 512, 131072 positions - four copies (MLX and CoreML ports' configs, a from-scratch
	 * notebook's table, a serving test) that agree. */
	{ "gemma-4-31b", "gemma4", 60, 5376, 21504, 32, 16, 512, 262144, 262144, 1000000.0, 1e-6,
	  0, 0, 0, 1024, true, true, false, "gpt-2", NS_SYNTH_Q4_K_M, NULL, &ns_synth_gemma4_31b, NULL },
	{ "gemma-4-e4b", "gemma4", 42, 2560, 10240, 8, 2, 512, 262144, 131072, 1000000.0, 1e-6,
	  0, 0, 0, 512, true, true, false, "gpt-2", NS_SYNTH_Q4_K_M, NULL, &ns_synth_gemma4_e4b, NULL },
	/* Gemma 4 26B-A4B (the common values above): hidden 2816, 30 layers, intermediate 2112
	 * (the dense FFN, a shared expert beside the routed ones), 16 heads, 8 KV heads sliding
	 * and num_global_key_value_heads 2, attention_k_eq_v true, enable_moe_block true,
	 * num_experts 128, top_k_experts 8, moe_intermediate_size 704, sliding_window 1024,
	 * 262144 positions - three third-party copies of its text_config found with the search
	 * tool (a Rust Gemma4Config test "parses_and_maps", a Go MLX parseTextConfig test
	 * "TestParseTextConfig26B", a Swift diffusion-gemma fixture), which agree but for one
	 * that gives 131072 positions; the tensors (router.proj, router.scale [hidden],
	 * router.per_expert_scale [128], experts.gate_up_proj [128, 1408, 2816],
	 * experts.down_proj [128, 2816, 704]) as a safetensors fixture of a MoE tool lists them.
	 * The tiny MoE is no published model: the oracle test's (tests/forward/
	 * test_gemma4_moe_oracle.py), small enough for F32 and llama.cpp's logits in the repo. */
	{ "gemma-4-26b-a4b", "gemma4", 30, 2816, 2112, 16, 8, 512, 262144, 262144, 1000000.0,
	  1e-6, 128, 8, 704, 1024, true, true, false, "gpt-2", NS_SYNTH_Q4_K_M, NULL,
	  &ns_synth_gemma4_26b, NULL },
	{ "gemma-4-moe-tiny", "gemma4", 6, 128, 96, 4, 2, 64, 512, 4096, 1000000.0, 1e-6,
	  16, 4, 64, 8, true, true, false, "gpt-2", NS_SYNTH_F32, NULL,
	  &ns_synth_gemma4_tiny_moe, NULL },
	/* Qwen3-VL (text_config: vocab_size 151936, rope_theta 5e6, rms_norm_eps 1e-6,
	 * max_position_embeddings 262144, mrope_section [24, 20, 20] interleaved, untied; the
	 * text dimensions are Qwen3-8B's and Qwen3-30B-A3B's, as the presets above) with the
	 * tower of synth_mmproj.c written beside as mmproj-<file> (vision_config: depth 27,
	 * hidden 1152, intermediate 4304, 16 heads, patch 16, merge 2, 2304 position embeddings,
	 * deepstack_visual_indexes [8, 16, 24], out_hidden_size = the text's hidden size).
	 * Sources, not the Hugging Face repositories themselves: transformers' Qwen3VLVisionConfig
	 * defaults (the tower), third-party copies of Qwen3-VL-30B-A3B-Instruct's config.json (an
	 * Omni-to-VL config test quoting its text and vision config: mrope [24, 20, 20], 128
	 * experts, deepstack [8, 16, 24], out_hidden_size 2048; an Ascend tutorial and model
	 * pages), and of Qwen3-VL-8B's (hidden 4096, 36 layers, 32 heads / 8 kv, head_dim 128). */
	{ "qwen3-vl-8b", "qwen3vl", 36, 4096, 12288, 32, 8, 128, 151936, 262144, 5000000.0, 1e-6,
	  0, 0, 0, 0, true, false, false, "qwen2", NS_SYNTH_Q4_K_M, NULL, NULL, &ns_synth_qwen3vl },
	{ "qwen3-vl-30b-a3b", "qwen3vlmoe", 48, 2048, 6144, 32, 4, 128, 151936, 262144, 5000000.0,
	  1e-6, 128, 8, 768, 0, true, false, false, "qwen2", NS_SYNTH_Q4_K_M, NULL, NULL,
	  &ns_synth_qwen3vl },
};

const char *const ns_synth_presets[] = {
	"demo", "llama-8b", "qwen3-8b", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b",
	"qwen3.5-4b", "qwen3.5-35b-a3b", "qwen3.5-397b-a17b", "gemma-4-31b", "gemma-4-e4b",
	"gemma-4-26b-a4b", "gemma-4-moe-tiny", "tiny-qwen35", "tiny-qwen35moe", NULL,
};

int ns_synth_parse_quant(const char *s, enum ns_synth_quant *q)
{
	static const struct { const char *name; enum ns_synth_quant q; } names[] = {
		{ "f32", NS_SYNTH_F32 },   { "f16", NS_SYNTH_F16 },   { "bf16", NS_SYNTH_BF16 },
		{ "q8_0", NS_SYNTH_Q8_0 },
		{ "q4_0", NS_SYNTH_Q4_0 }, { "q4_k_m", NS_SYNTH_Q4_K_M }, { "mxfp4", NS_SYNTH_MXFP4 },
	};
	for (size_t i = 0; i < NS_ARRAY_LEN(names); i++) {
		if (!strcasecmp(s, names[i].name)) {
			*q = names[i].q;
			return 0;
		}
	}
	return -EINVAL;
}

/* ---- deterministic random bytes ---- */

static uint64_t s_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t s_name_hash(const char *s, uint64_t seed)
{
	uint64_t h = 1469598103934665603ull ^ seed;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return s_mix(h);
}

static void s_fill_random(uint8_t *p, size_t n, uint64_t *state)
{
	while (n >= 8) {
		uint64_t v = s_mix((*state)++);
		memcpy(p, &v, 8);
		p += 8;
		n -= 8;
	}
	if (n) {
		uint64_t v = s_mix((*state)++);
		memcpy(p, &v, n);
	}
}

static float s_uniform(uint64_t *state, float a)
{
	return ((float)(s_mix((*state)++) >> 40) / (float)(1ull << 24) * 2.0f - 1.0f) * a;
}

static void s_put_f16(uint8_t *p, float v)
{
	uint16_t h = ns_f32_to_fp16(v);

	memcpy(p, &h, 2);
}

/* One generation unit (u = unit index) of a tensor, fully determined by (seed, u). */
static void s_make_unit(const struct tensor_gen *t, uint64_t u, uint8_t *b)
{
	uint64_t st = s_mix(t->seed ^ (u * 0x632be59bd9b4e019ull));
	size_t n = (size_t)t->unit_bytes;

	switch (t->type) {
	case NS_TYPE_F32:
		for (size_t i = 0; i < n / 4; i++) {
			float v = t->role == ROLE_ROPE_FREQS ? (u * (n / 4) + i < t->rotated ? 1.0f
											 : 1e30f)
				: t->role == ROLE_NORM ? 1.0f + s_uniform(&st, 0.05f)
				: t->role == ROLE_DECAY ? -1.0f + s_uniform(&st, 0.05f)
				: t->role == ROLE_BIAS ? s_uniform(&st, 0.01f) : s_uniform(&st, 0.05f);
			memcpy(b + 4 * i, &v, 4);
		}
		return;
	case NS_TYPE_F16:
		for (size_t i = 0; i < n / 2; i++)
			s_put_f16(b + 2 * i, s_uniform(&st, 0.05f));
		return;
	case NS_TYPE_BF16: /* the float's top half (the values are exact in 16 bits or not: noise) */
		for (size_t i = 0; i < n / 2; i++) {
			float v = s_uniform(&st, 0.05f);
			uint32_t u;

			memcpy(&u, &v, 4);
			b[2 * i] = (uint8_t)(u >> 16);
			b[2 * i + 1] = (uint8_t)(u >> 24);
		}
		return;
	default:
		break;
	}
	s_fill_random(b, n, &st);
	switch (t->type) {
	case NS_TYPE_Q4_0: /* d, qs[16] */
	case NS_TYPE_Q8_0: /* d, qs[32] */
		s_put_f16(b, t->type == NS_TYPE_Q8_0 ? 0.05f / 127 : 0.05f / 8);
		break;
	case NS_TYPE_Q5_0: /* d, qh[4], qs[16] */
		s_put_f16(b, 0.05f / 16);
		break;
	case NS_TYPE_Q5_1: /* d, m, qh[4], qs[16] */
		s_put_f16(b, 0.05f / 31);
		s_put_f16(b + 2, -0.025f);
		break;
	case NS_TYPE_Q4_K: /* d, dmin, scales[12], qs[128] */
		s_put_f16(b, 0.05f / (63 * 15));
		s_put_f16(b + 2, 0.025f / (63 * 8));
		break;
	case NS_TYPE_Q5_K: /* d, dmin, scales[12], qh[32], qs[128] */
		s_put_f16(b, 0.05f / (63 * 31));
		s_put_f16(b + 2, 0.025f / (63 * 16));
		break;
	case NS_TYPE_Q6_K: /* ql[128], qh[64], scales[16], d */
		s_put_f16(b + 208, 0.05f / (127 * 32));
		break;
	case NS_TYPE_MXFP4: /* e (e8m0), qs[16]: |w| <= 6 * 2^(e-127) */
		b[0] = (uint8_t)(119 + (b[0] % 3));
		break;
	default:
		break;
	}
}

struct fill_ctx {
	const struct tensor_gen *t;
	const struct ns_synth_opts *o; /* its progress callback */
	uint64_t total;                /* tensor bytes of the whole model */
	uint8_t unit[512];
};

static int s_fill(void *vctx, uint64_t off, void *dst, size_t n)
{
	struct fill_ctx *c = vctx;
	const struct tensor_gen *t = c->t;
	uint8_t *out = dst;

	if (c->o->progress)
		c->o->progress(c->o->progress_user, n, c->total);

	while (n) {
		uint64_t u = off / t->unit_bytes, in = off % t->unit_bytes;
		size_t take = (size_t)(t->unit_bytes - in) < n ? (size_t)(t->unit_bytes - in) : n;

		if (in == 0 && take == t->unit_bytes) {
			s_make_unit(t, u, out);
		} else {
			s_make_unit(t, u, c->unit);
			memcpy(out, c->unit + in, take);
		}
		out += take;
		off += take;
		n -= take;
	}
	return 0;
}

/* ---- the tensor list of each architecture ---- */

bool ns_synth_more_bits(uint32_t i, uint32_t n)
{
	return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The matrix type of a quant mix; kind: 0 ordinary, 1 "more bits" (attn_v/ffn_down), 2 output,
 * 3 expert, 4 token embedding. */
uint32_t ns_synth_matrix_type(const struct plan *pl, int kind, uint64_t row_len)
{
	uint32_t t;

	switch (pl->q) {
	case NS_SYNTH_F32: t = NS_TYPE_F32; break;
	case NS_SYNTH_F16: t = NS_TYPE_F16; break;
	case NS_SYNTH_BF16: t = NS_TYPE_BF16; break;
	case NS_SYNTH_Q8_0: t = NS_TYPE_Q8_0; break;
	case NS_SYNTH_Q4_0: t = kind == 2 ? NS_TYPE_Q6_K : NS_TYPE_Q4_0; break;
	case NS_SYNTH_MXFP4: t = kind == 3 ? NS_TYPE_MXFP4 : NS_TYPE_Q8_0; break;
	default: t = kind == 2 || kind == 1 ? NS_TYPE_Q6_K : NS_TYPE_Q4_K; break;
	}
	if (row_len % ns_type_get(t)->block_elems) {
		/* llama-quant.cpp's fallback for rows its type cannot hold: K-quants to the
		 * 32-block type of their size, F16 where even that does not fit */
		t = t == NS_TYPE_Q4_K ? NS_TYPE_Q5_0 : t == NS_TYPE_Q5_K ? NS_TYPE_Q5_1 : NS_TYPE_Q8_0;
		if (row_len % 32)
			t = NS_TYPE_F16;
	}
	return t;
}

int ns_synth_add4(struct plan *pl, const char *name, enum role role, uint32_t type,
		  uint32_t n_dims, const uint64_t ne[4])
{
	struct tensor_gen *t;
	const struct ns_type_info *ti;
	uint64_t row;

	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? pl->cap * 2 : 256;
		struct tensor_gen *nt = realloc(pl->t, cap * sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		pl->t = nt;
		pl->cap = cap;
	}
	t = &pl->t[pl->n++];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->role = role;
	t->type = role == ROLE_MATRIX ? type : NS_TYPE_F32;
	t->n_dims = n_dims;
	for (uint32_t d = 0; d < 4; d++)
		t->ne[d] = d < n_dims ? ne[d] : 1;
	t->seed = s_name_hash(name, pl->seed);
	ti = ns_type_get(t->type);
	t->unit_bytes = ti->block_elems == 1 ? 64ull * ti->block_bytes : ti->block_bytes;
	if (ns_type_row_bytes(t->type, t->ne[0], &row))
		return -EINVAL;
	t->n_bytes = row * t->ne[1] * t->ne[2] * t->ne[3];
	if (ti->block_elems == 1 && t->n_bytes % t->unit_bytes)
		t->unit_bytes = ti->block_bytes; /* short 1-D tensors: per-scalar units */
	return 0;
}

int ns_synth_add(struct plan *pl, const char *name, enum role role, uint32_t type,
		 uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2)
{
	const uint64_t ne[4] = { ne0, ne1, ne2, 1 };

	return ns_synth_add4(pl, name, role, type, n_dims, ne);
}

static int s_plan_tensors(struct plan *pl)
{
	const struct preset *p = pl->p;
	uint64_t E = p->n_embd, hd = p->head_dim, V = p->n_vocab;
	uint64_t q_out = (uint64_t)p->n_head * hd, kv_out = (uint64_t)p->n_head_kv * hd;
	bool oss = !strcmp(p->arch, "gpt-oss");
	int ret;

	if (p->hy)
		return ns_synth_plan_qwen35(pl);
	if (p->gm)
		return ns_synth_plan_gemma4(pl);
	ADD(ROLE_MATRIX, 4, 2, E, V, 1, "%s", "token_embd.weight");
	ADD(ROLE_NORM, 0, 1, E, 1, 1, "%s", "output_norm.weight");
	if (!p->tied)
		ADD(ROLE_MATRIX, 2, 2, E, V, 1, "%s", "output.weight");
	if (p->rope_freqs)
		ADD(ROLE_NORM, 0, 1, hd / 2, 1, 1, "%s", "rope_freqs.weight");
	for (uint32_t l = 0; l < pl->n_layer; l++) {
		int more = ns_synth_more_bits(l, pl->n_layer) ? 1 : 0;
		ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.attn_norm.weight", l);
		ADD(ROLE_MATRIX, 0, 2, E, q_out, 1, "blk.%u.attn_q.weight", l);
		ADD(ROLE_MATRIX, 0, 2, E, kv_out, 1, "blk.%u.attn_k.weight", l);
		ADD(ROLE_MATRIX, more, 2, E, kv_out, 1, "blk.%u.attn_v.weight", l);
		ADD(ROLE_MATRIX, 0, 2, q_out, E, 1, "blk.%u.attn_output.weight", l);
		if (p->qk_norm) {
			ADD(ROLE_NORM, 0, 1, hd, 1, 1, "blk.%u.attn_q_norm.weight", l);
			ADD(ROLE_NORM, 0, 1, hd, 1, 1, "blk.%u.attn_k_norm.weight", l);
		}
		if (oss) {
			ADD(ROLE_BIAS, 0, 1, q_out, 1, 1, "blk.%u.attn_q.bias", l);
			ADD(ROLE_BIAS, 0, 1, kv_out, 1, 1, "blk.%u.attn_k.bias", l);
			ADD(ROLE_BIAS, 0, 1, kv_out, 1, 1, "blk.%u.attn_v.bias", l);
			ADD(ROLE_BIAS, 0, 1, E, 1, 1, "blk.%u.attn_output.bias", l);
			ADD(ROLE_BIAS, 0, 1, p->n_head, 1, 1, "blk.%u.attn_sinks.weight", l);
			ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.post_attention_norm.weight", l);
		} else {
			ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.ffn_norm.weight", l);
		}
		if (p->n_expert) {
			uint64_t F = p->n_ff_exp, X = p->n_expert;
			/* the router stays F32 in every llama.cpp mix */
			if ((ret = ns_synth_add(pl, "", ROLE_MATRIX, NS_TYPE_F32, 2, E, X, 1)))
				return ret;
			snprintf(pl->t[pl->n - 1].name, sizeof(pl->t[0].name), "blk.%u.ffn_gate_inp.weight", l);
			pl->t[pl->n - 1].seed = s_name_hash(pl->t[pl->n - 1].name, pl->seed);
			ADD(ROLE_MATRIX, 3, 3, E, F, X, "blk.%u.ffn_gate_exps.weight", l);
			ADD(ROLE_MATRIX, 3, 3, E, F, X, "blk.%u.ffn_up_exps.weight", l);
			ADD(ROLE_MATRIX, oss ? 3 : more, 3, F, E, X, "blk.%u.ffn_down_exps.weight", l);
			if (oss) {
				ADD(ROLE_BIAS, 0, 1, X, 1, 1, "blk.%u.ffn_gate_inp.bias", l);
				ADD(ROLE_BIAS, 0, 2, F, X, 1, "blk.%u.ffn_gate_exps.bias", l);
				ADD(ROLE_BIAS, 0, 2, F, X, 1, "blk.%u.ffn_up_exps.bias", l);
				ADD(ROLE_BIAS, 0, 2, E, X, 1, "blk.%u.ffn_down_exps.bias", l);
			}
		} else {
			ADD(ROLE_MATRIX, 0, 2, E, p->n_ff, 1, "blk.%u.ffn_gate.weight", l);
			ADD(ROLE_MATRIX, 0, 2, E, p->n_ff, 1, "blk.%u.ffn_up.weight", l);
			ADD(ROLE_MATRIX, more, 2, p->n_ff, E, 1, "blk.%u.ffn_down.weight", l);
		}
	}
	return 0;
}

/* ---- metadata ---- */

/* GPT-2 byte-level alphabet: printable bytes map to themselves, the rest to U+0100 upward. */
static void s_byte_symbol(unsigned b, char out[4])
{
	unsigned cp;

	if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
		cp = b;
	} else {
		unsigned k = 0;
		for (unsigned x = 0; x < b; x++)
			if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255)))
				k++;
		cp = 256 + k;
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		out[1] = 0;
	} else {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		out[2] = 0;
	}
}

/* Qwen2/3's added tokens that image prompts use (tokenizer_config.json's added_tokens_decoder) */
static const struct { uint32_t id; const char *text; } s_qwen_specials[] = {
	{ 151643, "<|endoftext|>" },    { 151644, "<|im_start|>" },   { 151645, "<|im_end|>" },
	{ 151652, "<|vision_start|>" }, { 151653, "<|vision_end|>" }, { 151654, "<|vision_pad|>" },
	{ 151655, "<|image_pad|>" },    { 151656, "<|video_pad|>" },
};
/* the smallest vocabulary that keeps them clear of the bytes and the three specials */
#define S_VL_MIN_VOCAB (151936u - 151643u + 259u)

static int s_add_vocab(struct ns_gguf_writer *w, const struct preset *p)
{
	static const char *const specials[] = { "<|bos|>", "<|eos|>", "<|eot|>" };
	uint32_t n = p->n_vocab;
	char **toks = calloc(n, sizeof(*toks));
	int32_t *types = calloc(n, sizeof(*types));
	int ret = -ENOMEM;

	if (!toks || !types)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		char buf[32];
		if (i < 256) {
			s_byte_symbol(i, buf);
			types[i] = 1;
		} else if (i < 256 + NS_ARRAY_LEN(specials)) {
			snprintf(buf, sizeof(buf), "%s", specials[i - 256]);
			types[i] = 3;
		} else {
			/* filler words "Ġab", "Ġac", ...: noise that reads like text */
			char word[16];
			uint32_t v = i - 259, k = 0;
			do {
				word[k++] = (char)('a' + v % 26);
				v /= 26;
			} while (v && k < sizeof(word) - 1);
			word[k] = 0;
			snprintf(buf, sizeof(buf), "\xc4\xa0%s", word);
			types[i] = 1;
		}
		toks[i] = strdup(buf);
		if (!toks[i])
			goto out;
	}
	/* Qwen-VL's specials at their ids counted from the vocabulary's end (the real ids at
	 * full size): the chat markers and the image placeholder run writes */
	for (size_t k = 0; p->vl && k < NS_ARRAY_LEN(s_qwen_specials); k++) {
		uint32_t id = n - (151936u - s_qwen_specials[k].id);

		free(toks[id]);
		if (!(toks[id] = strdup(s_qwen_specials[k].text)))
			goto out;
		types[id] = 3;
	}
	if ((ret = ns_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2")) ||
	    (ret = ns_gguf_writer_set_str(w, "tokenizer.ggml.pre", p->tok_pre)) ||
	    (ret = ns_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, n)) ||
	    (ret = ns_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", 5 /* I32 */, types, n)) ||
	    (ret = ns_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", NULL, 0)) ||
	    (ret = ns_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 256)) ||
	    (ret = ns_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 257)) ||
	    (ret = ns_gguf_writer_set_u32(w, "tokenizer.ggml.eot_token_id", 258)) ||
	    (ret = ns_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token",
					   !strcmp(p->arch, "llama") || p->gm)))
		goto out;
	ret = 0;
out:
	for (uint32_t i = 0; toks && i < n; i++)
		free(toks[i]);
	free(toks);
	free(types);
	return ret;
}

/* llama.cpp's llama_ftype of each mix, stored as general.file_type. */
static uint32_t s_file_type(enum ns_synth_quant q)
{
	switch (q) {
	case NS_SYNTH_F32: return 0;
	case NS_SYNTH_F16: return 1;
	case NS_SYNTH_BF16: return 32;
	case NS_SYNTH_Q4_0: return 2;
	case NS_SYNTH_Q8_0: return 7;
	case NS_SYNTH_Q4_K_M: return 15;
	case NS_SYNTH_MXFP4: return 38; /* MXFP4_MOE */
	}
	return 0;
}

static int s_add_meta(struct ns_gguf_writer *w, const struct plan *pl)
{
	const struct preset *p = pl->p;
	char key[128], name[96];
	int ret = 0;

#define KEY(suffix) (snprintf(key, sizeof(key), "%s.%s", p->arch, suffix), key)
	snprintf(name, sizeof(name), "neurostream synthetic %s (random weights)", p->name);
	if ((ret = ns_gguf_writer_set_str(w, "general.architecture", p->arch)) ||
	    (ret = ns_gguf_writer_set_str(w, "general.type", "model")) ||
	    (ret = ns_gguf_writer_set_str(w, "general.name", name)) ||
	    (ret = ns_gguf_writer_set_u32(w, "general.quantization_version", 2)) ||
	    (ret = ns_gguf_writer_set_u32(w, "general.file_type", s_file_type(pl->q))) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("block_count"), pl->n_layer + pl->mtp)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("context_length"), p->n_ctx)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("embedding_length"), p->n_embd)) ||
	    (p->n_ff && (ret = ns_gguf_writer_set_u32(w, KEY("feed_forward_length"), p->n_ff))) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("attention.head_count"), p->n_head)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), p->n_head_kv)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("attention.key_length"), p->head_dim)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("attention.value_length"), p->head_dim)) ||
	    (ret = ns_gguf_writer_set_f32(w, KEY("rope.freq_base"), (float)p->rope_base)) ||
	    (ret = ns_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)p->rms_eps)))
		return ret;
	/* convert_hf_to_gguf writes these two for llama only */
	if (!strcmp(p->arch, "llama") &&
	    ((ret = ns_gguf_writer_set_u32(w, KEY("rope.dimension_count"), p->head_dim)) ||
	     (ret = ns_gguf_writer_set_u32(w, KEY("vocab_size"), p->n_vocab))))
		return ret;
	if (p->n_expert &&
	    ((ret = ns_gguf_writer_set_u32(w, KEY("expert_count"), p->n_expert)) ||
	     (ret = ns_gguf_writer_set_u32(w, KEY("expert_used_count"), p->n_expert_used)) ||
	     (ret = ns_gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), p->n_ff_exp))))
		return ret;
	if (p->sliding_window &&
	    (ret = ns_gguf_writer_set_u32(w, KEY("attention.sliding_window"), p->sliding_window)))
		return ret;
	if (!strcmp(p->arch, "gpt-oss") && /* its YaRN */
	    ((ret = ns_gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn")) ||
	     (ret = ns_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 32.0f)) ||
	     (ret = ns_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), 4096)) ||
	     (ret = ns_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_fast"), 32.0f)) ||
	     (ret = ns_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_slow"), 1.0f))))
		return ret;
	if (p->hy && (ret = ns_synth_qwen35_meta(w, p)))
		return ret;
	if (pl->mtp && (ret = ns_gguf_writer_set_u32(w, KEY("nextn_predict_layers"), 1)))
		return ret;
	if (p->gm && (ret = ns_synth_gemma4_meta(w, p, pl->n_layer)))
		return ret;
	if (p->vl && (ret = ns_synth_qwen3vl_meta(w, p, pl->n_layer)))
		return ret;
#undef KEY
	return s_add_vocab(w, p);
}

static int s_set_u16(struct ns_gguf_writer *w, const char *key, uint16_t v)
{
	struct ns_gguf_value val = { .type = NS_GGUF_U16 };

	val.v.u64 = v;
	return ns_gguf_writer_set_value(w, key, &val);
}

/* Shard s of n: path itself, or "<path without .gguf>-0000s-of-0000n.gguf". */
static void s_shard_path(char *buf, size_t n, const char *path, size_t plen, uint32_t s,
			 uint32_t n_shards)
{
	if (n_shards == 1)
		snprintf(buf, n, "%s", path);
	else
		snprintf(buf, n, "%.*s-%05u-of-%05u.gguf", (int)(plen - 5), path, s + 1, n_shards);
}

int ns_synth_write(const struct ns_synth_opts *o, const char *path, char *err, size_t errlen)
{
	const struct preset *p = NULL;
	struct preset shrunk;
	struct plan pl = { 0 };
	struct fill_ctx *ctx = NULL;
	uint32_t n_shards = o->split > 1 ? o->split : 1;
	uint64_t total = 0;
	size_t plen = strlen(path);
	int ret = 0;

	for (size_t i = 0; i < NS_ARRAY_LEN(s_presets); i++)
		if (!strcmp(o->preset, s_presets[i].name))
			p = &s_presets[i];
	if (!p) {
		ns_errf(err, errlen, "unknown preset '%s'", o->preset);
		return -EINVAL;
	}
	if (o->layers > p->n_layer) {
		ns_errf(err, errlen, "--layers %u exceeds the %u layers of %s", o->layers, p->n_layer,
			p->name);
		return -EINVAL;
	}
	if (n_shards > 9999) { /* llama-gguf-split's limit; keeps the shard cut's products small */
		ns_errf(err, errlen, "--split %u: at most 9999 shards", n_shards);
		return -EINVAL;
	}
	if (n_shards > 1 && (plen < 5 || strcmp(path + plen - 5, ".gguf"))) {
		ns_errf(err, errlen, "%s: a split model's path must end in .gguf", path);
		return -EINVAL;
	}
	shrunk = *p;
	if (o->max_vocab && o->max_vocab < shrunk.n_vocab)
		shrunk.n_vocab = o->max_vocab;
	if (o->max_experts && o->max_experts < shrunk.n_expert)
		shrunk.n_expert = o->max_experts;
	if (p->vl && shrunk.n_vocab < S_VL_MIN_VOCAB) {
		ns_errf(err, errlen, "max_vocab %u too small for %s (its image tokens need %u)",
			o->max_vocab, p->name, S_VL_MIN_VOCAB);
		return -EINVAL;
	}
	if ((o->max_vocab && o->max_vocab < 512) ||
	    (shrunk.n_expert && shrunk.n_expert < shrunk.n_expert_used)) {
		ns_errf(err, errlen, "max_vocab %u / max_experts %u too small for %s", o->max_vocab,
			o->max_experts, p->name);
		return -EINVAL;
	}
	pl.p = &shrunk;
	pl.q = o->quant_set ? o->quant : p->dflt;
	pl.n_layer = o->layers ? o->layers : p->n_layer;
	pl.seed = o->seed;
	if (o->mtp && !p->hy) {
		ns_errf(err, errlen, "--mtp: %s has no MTP block (the qwen3.5 presets have one)",
			p->name);
		return -EINVAL;
	}
	pl.mtp = o->mtp;
	if ((ret = s_plan_tensors(&pl)))
		goto out;
	if (n_shards > pl.n) {
		ns_errf(err, errlen, "--split %u: the model has only %zu tensors", n_shards, pl.n);
		ret = -EINVAL;
		goto out;
	}
	for (size_t i = 0; i < pl.n; i++)
		total += pl.t[i].n_bytes;
	/* Cut shards by bytes, in tensor order, never leaving one empty: tensor i goes to the
	 * shard its byte offset falls in, but at most one shard past tensor i - 1's (a large
	 * tensor must not jump over a shard) and at least n_shards - (n - i) (the tensors left
	 * must still reach the last shard). The shard number rises by 0 or 1 per tensor from 0
	 * to n_shards - 1, so every shard gets a tensor. */
	{
		uint64_t acc = 0;
		uint32_t prev = 0;

		for (size_t i = 0; i < pl.n; i++) {
			/* acc < 2^50 (the largest preset in f32 is 2^40) and n_shards <= 9999 */
			uint32_t by_bytes = (uint32_t)(acc * n_shards / (total ? total : 1));
			uint32_t s = by_bytes > prev ? prev + 1 : prev;
			uint64_t least = n_shards > pl.n - i ? n_shards - (pl.n - i) : 0;

			if (s < least)
				s = (uint32_t)least;
			pl.t[i].shard = s;
			prev = s;
			acc += pl.t[i].n_bytes;
		}
	}
	ctx = calloc(pl.n, sizeof(*ctx));
	if (!ctx) {
		ret = -ENOMEM;
		goto out;
	}
	if (o->no_replace && p->vl) {
		char mm[4096];

		if ((ret = ns_synth_mmproj_path(path, mm, sizeof(mm))) < 0)
			ns_errf(err, errlen, "%s: path too long", path);
		else if (access(mm, F_OK) == 0)
			ret = (ns_errf(err, errlen, "%s exists; not replaced", mm), -EEXIST);
	}
	for (uint32_t s = 0; o->no_replace && s < n_shards && !ret; s++) {
		char shard_path[4096];

		s_shard_path(shard_path, sizeof(shard_path), path, plen, s, n_shards);
		if (access(shard_path, F_OK) == 0) {
			ns_errf(err, errlen, "%s exists; not replaced", shard_path);
			ret = -EEXIST;
		}
	}
	for (uint32_t s = 0; s < n_shards && !ret; s++) {
		struct ns_gguf_writer *w = ns_gguf_writer_new(32);
		char shard_path[4096];

		if (!w) {
			ret = -ENOMEM;
			break;
		}
		s_shard_path(shard_path, sizeof(shard_path), path, plen, s, n_shards);
		if (s == 0)
			ret = s_add_meta(w, &pl);
		if (!ret && n_shards > 1) {
			ret = s_set_u16(w, "split.no", (uint16_t)s);
			if (!ret)
				ret = s_set_u16(w, "split.count", (uint16_t)n_shards);
			if (!ret)
				ret = ns_gguf_writer_set_i32(w, "split.tensors.count", (int32_t)pl.n);
		}
		for (size_t i = 0; i < pl.n && !ret; i++) {
			if (pl.t[i].shard != s)
				continue;
			ctx[i].t = &pl.t[i];
			ctx[i].o = o;
			ctx[i].total = total;
			ret = ns_gguf_writer_add_tensor_lazy(w, pl.t[i].name, pl.t[i].type,
							     pl.t[i].n_dims, pl.t[i].ne,
							     o->no_data ? NULL : s_fill, &ctx[i]);
		}
		if (!ret)
			ret = o->no_replace ? ns_gguf_writer_write_new(w, shard_path, err, errlen)
					    : ns_gguf_writer_write_file(w, shard_path, err, errlen);
		else
			ns_errf(err, errlen, "%s: cannot build the model (%s)", shard_path, strerror(-ret));
		ns_gguf_writer_destroy(&w);
	}
	/* the tower beside the model, as llama.cpp's conversion writes it (synth_mmproj.c) */
	if (!ret && p->vl)
		ret = ns_synth_write_mmproj(o, &pl, path, err, errlen);
out:
	if (ret == -ENOMEM)
		ns_errf(err, errlen, "out of memory while generating %s", path);
	free(ctx);
	free(pl.t);
	return ret;
}

int ns_synth_tower_path(const char *preset, const char *path, char *out, size_t outlen)
{
	for (size_t i = 0; i < NS_ARRAY_LEN(s_presets); i++)
		if (!strcmp(preset, s_presets[i].name) && s_presets[i].vl)
			return ns_synth_mmproj_path(path, out, outlen) < 0 ? -ENAMETOOLONG : 1;
	return 0;
}

int ns_synth_write_plan(const struct ns_synth_opts *o, const struct plan *pl, const char *path,
			int (*set_meta)(struct ns_gguf_writer *w, const void *user), const void *user,
			char *err, size_t errlen)
{
	struct ns_gguf_writer *w = ns_gguf_writer_new(32);
	struct fill_ctx *ctx = calloc(pl->n ? pl->n : 1, sizeof(*ctx));
	uint64_t total = 0;
	int ret = 0;

	if (!w || !ctx) {
		ret = -ENOMEM;
		ns_errf(err, errlen, "out of memory while generating %s", path);
		goto out;
	}
	for (size_t i = 0; i < pl->n; i++)
		total += pl->t[i].n_bytes;
	ret = set_meta(w, user);
	for (size_t i = 0; i < pl->n && !ret; i++) {
		ctx[i].t = &pl->t[i];
		ctx[i].o = o;
		ctx[i].total = total;
		ret = ns_gguf_writer_add_tensor_lazy(w, pl->t[i].name, pl->t[i].type,
						     pl->t[i].n_dims, pl->t[i].ne,
						     o->no_data ? NULL : s_fill, &ctx[i]);
	}
	if (!ret)
		ret = o->no_replace ? ns_gguf_writer_write_new(w, path, err, errlen)
				    : ns_gguf_writer_write_file(w, path, err, errlen);
	else
		ns_errf(err, errlen, "%s: cannot build the model (%s)", path, strerror(-ret));
out:
	ns_gguf_writer_destroy(&w);
	free(ctx);
	return ret;
}
