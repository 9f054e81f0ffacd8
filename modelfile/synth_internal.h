/* synth_internal.h - what synth.c shares with the per-family parts of the generator
 * (synth_qwen35.c): a preset, the tensor plan being built and how tensors join it. */
#ifndef NS_SYNTH_INTERNAL_H
#define NS_SYNTH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gguf_write.h"
#include "synth.h"

/* Qwen3.5's hybrid layers (config.json's linear_* keys, GGUF's ssm.* keys): three of every
 * full_attn_interval layers are Gated DeltaNet, the last full attention with a gated q. */
struct hybrid {
	uint32_t conv_kernel;          /* linear_conv_kernel_dim: ssm.conv_kernel */
	uint32_t k_heads, v_heads;     /* linear_num_key/value_heads: ssm.group_count/time_step_rank */
	uint32_t k_dim, v_dim;         /* linear_key/value_head_dim: ssm.state_size; inner = v_heads * v_dim */
	uint32_t full_attn_interval;
	uint32_t rope_dims;            /* head_dim * partial_rotary_factor */
	int32_t mrope[4];              /* mrope_section and a 0, rope.dimension_sections */
	uint32_t n_ff_shexp;           /* shared_expert_intermediate_size (MoE) */
};

extern const struct hybrid ns_synth_q35_4b, ns_synth_q35_35b, ns_synth_q35_397b, ns_synth_q35_tiny;

/* Gemma 4's layers (config.json's text_config; the preset's head_dim is global_head_dim). */
struct gemma4 {
	uint32_t swa_period;     /* layer_types: swa_period - 1 sliding layers, then a global one */
	uint32_t head_dim_swa;   /* head_dim: the sliding layers' */
	uint32_t n_head_kv_full; /* num_global_key_value_heads; 0: the sliding layers' count */
	bool k_eq_v;             /* attention_k_eq_v: a global layer's V is its K (no attn_v) */
	uint32_t n_embd_ple;     /* hidden_size_per_layer_input; 0: no per-layer inputs */
	uint32_t n_kv_shared;    /* num_kv_shared_layers: the last ones, on earlier layers' K/V */
	uint32_t rot_pairs;      /* global_head_dim * partial_rotary_factor / 2 */
	double rope_base_swa;
	float softcap;           /* final_logit_softcapping */
};

extern const struct gemma4 ns_synth_gemma4_31b, ns_synth_gemma4_e4b, ns_synth_gemma4_26b,
	ns_synth_gemma4_tiny_moe;

/* Qwen3-VL: the text model's M-RoPE sections and the vision tower written beside it as an
 * mmproj GGUF (config.json's vision_config; synth_mmproj.c). */
struct vl {
	int32_t mrope[4];            /* rope_scaling.mrope_section and a 0: rope.dimension_sections */
	uint32_t depth, width, n_ff, n_head; /* depth, hidden_size, intermediate_size, num_heads */
	uint32_t patch, merge, n_pos; /* patch_size, spatial_merge_size, num_position_embeddings */
	uint32_t n_deepstack;
	uint32_t deepstack[4];       /* deepstack_visual_indexes */
};

extern const struct vl ns_synth_qwen3vl;

struct preset {
	const char *name;
	const char *arch;
	uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab, n_ctx;
	double rope_base, rms_eps;
	uint32_t n_expert, n_expert_used, n_ff_exp, sliding_window;
	bool qk_norm, tied, rope_freqs;
	const char *tok_pre;
	enum ns_synth_quant dflt;
	const struct hybrid *hy; /* qwen35, qwen35moe: the Gated DeltaNet layers; NULL otherwise */
	const struct gemma4 *gm; /* gemma4: its layers; NULL otherwise */
	const struct vl *vl;     /* qwen3vl, qwen3vlmoe: M-RoPE and the tower; NULL otherwise */
};

/* ROLE_DECAY: Gated DeltaNet's ssm_a (-exp(A_log)), negative so the state decays;
 * ROLE_ROPE_FREQS: proportional RoPE's factors, 1 on the first `rotated` pairs, 1e30 after */
enum role { ROLE_MATRIX, ROLE_NORM, ROLE_BIAS, ROLE_DECAY, ROLE_ROPE_FREQS };

struct tensor_gen {
	char name[96];
	uint32_t type;
	uint32_t n_dims;
	uint64_t ne[4];
	enum role role;
	uint64_t seed;
	uint64_t unit_bytes; /* generation unit: one quant block, or 64 scalars */
	uint64_t n_bytes;
	uint32_t shard;
	uint64_t rotated; /* ROLE_ROPE_FREQS */
};

struct plan {
	const struct preset *p;
	enum ns_synth_quant q;
	uint32_t n_layer;
	bool mtp; /* qwen35/qwen35moe: one MTP block after the n_layer main layers */
	uint64_t seed;
	size_t n, cap;
	struct tensor_gen *t;
};

/* llama.cpp's use_more_bits: layer i of n gets the "more bits" type (attn_v, ffn_down) */
bool ns_synth_more_bits(uint32_t i, uint32_t n);
/* The matrix type of the plan's mix; kind: 0 ordinary, 1 "more bits" (attn_v/ffn_down), 2
 * output, 3 expert, 4 token embedding. */
uint32_t ns_synth_matrix_type(const struct plan *pl, int kind, uint64_t row_len);
/* Append a tensor (role other than ROLE_MATRIX: F32 whatever type); 0 or -errno. */
int ns_synth_add(struct plan *pl, const char *name, enum role role, uint32_t type,
		 uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2);
/* The same with a fourth dimension (a Conv2d kernel). */
int ns_synth_add4(struct plan *pl, const char *name, enum role role, uint32_t type,
		  uint32_t n_dims, const uint64_t ne[4]);

/* synth.c: write a plan's tensors (and, first, set_meta(w, user)'s keys) to path as one file. */
int ns_synth_write_plan(const struct ns_synth_opts *o, const struct plan *pl, const char *path,
			int (*set_meta)(struct ns_gguf_writer *w, const void *user), const void *user,
			char *err, size_t errlen);

/* One tensor of a plan's list (synth*.c): name from fmt, type from the plan's mix (kind as
 * for ns_synth_matrix_type; ROLE_MATRIX only, other roles are F32). Needs `pl` (struct plan
 * *) and `ret` (int) in scope; returns ret from the caller on failure. */
#define ADD(role, kind, nd, a, b, c, fmt, ...)                                              \
	do {                                                                                \
		char nm_[96];                                                               \
		snprintf(nm_, sizeof(nm_), fmt, __VA_ARGS__);                               \
		if ((ret = ns_synth_add(pl, nm_, role, ns_synth_matrix_type(pl, kind, a), nd, a, \
					b, c)))                                             \
			return ret;                                                         \
	} while (0)

/* synth_qwen35.c: the qwen35/qwen35moe tensors and keys of a preset with hy set */
int ns_synth_plan_qwen35(struct plan *pl);
int ns_synth_qwen35_meta(struct ns_gguf_writer *w, const struct preset *p);

/* synth_gemma4.c: the gemma4 tensors and keys of a preset with gm set; is layer l sliding;
 * how many of a cut to n_layer layers are KV-shared */
int ns_synth_plan_gemma4(struct plan *pl);
int ns_synth_gemma4_meta(struct ns_gguf_writer *w, const struct preset *p, uint32_t n_layer);
bool ns_synth_gemma4_slides(const struct gemma4 *g, uint32_t l);
uint32_t ns_synth_gemma4_shared(const struct preset *p, uint32_t n_layer);

/* synth_mmproj.c: the Qwen3-VL text keys (rope.dimension_sections, n_deepstack_layers) of a
 * preset with vl set; the path of the mmproj beside the model at path ("<dir>/mmproj-<file>");
 * the tower written there, its depth cut to o->max_vision_layers when set (the deepstack
 * layers moved to the same fractions of the cut). */
int ns_synth_qwen3vl_meta(struct ns_gguf_writer *w, const struct preset *p, uint32_t n_layer);
int ns_synth_mmproj_path(const char *path, char *out, size_t outlen);
int ns_synth_write_mmproj(const struct ns_synth_opts *o, const struct plan *text, const char *path,
			  char *err, size_t errlen);

#endif
