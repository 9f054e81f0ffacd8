/* hf_config.h - a Hugging Face checkpoint's config.json: the architecture, the dimensions the
 * tensor translation needs, and the hyperparameters as the GGUF keys llama.cpp's converter
 * writes (convert_hf_to_gguf.py: TextModel, Qwen2MoeModel, Qwen3NextModel and the Qwen3.5
 * classes).
 *
 * Keys of a "text_config" object override the top level's, as the converter merges them.
 * Optional values the converter writes only when config.json has them are 0 / NAN here when
 * absent and then not written. */
#ifndef NS_HF_CONFIG_H
#define NS_HF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

struct ns_hf_config {
	char arch[32];            /* GGUF architecture: "qwen35", "qwen35moe" */
	char hf_arch[96];         /* architectures[0] as written */
	uint32_t n_layer;         /* num_hidden_layers (without MTP layers) */
	uint32_t n_mtp;           /* mtp_num_hidden_layers (0 when absent) */
	uint32_t n_embd;
	uint32_t n_vocab;         /* vocab_size, 0 if absent */
	bool tied_embeddings;     /* tie_word_embeddings */
	uint32_t file_type;       /* general.file_type from "dtype"/"torch_dtype" */
	/* attention */
	uint32_t n_ctx, n_ff, n_head, n_head_kv, head_dim; /* 0: absent */
	double rms_eps;           /* NAN: absent */
	double rope_theta;        /* NAN: absent */
	double partial_rotary;    /* of head_dim rotated (0.25 when absent) */
	int32_t mrope[4];         /* rope.dimension_sections, zero-padded */
	char rope_type[16];       /* rope_parameters.rope_type ("default", "linear", "yarn") */
	double rope_factor;       /* NAN: absent */
	uint32_t rope_orig_ctx;   /* yarn's original_max_position_embeddings */
	uint32_t full_attn_interval;
	/* Gated DeltaNet (linear attention) */
	uint32_t lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, conv_kernel;
	/* mixture of experts (0 for dense) */
	uint32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
};

/* Parse dir/config.json into c. Returns 0, or -ENOENT / -EINVAL with one line in err naming
 * the file and the problem (no config.json, not JSON, an architecture we cannot translate, a
 * missing or impossible dimension, layer_types that full_attention_interval cannot say). */
int ns_hf_config_load(const char *dir, struct ns_hf_config *c, char *err, size_t errlen);

/* Write the converter's general.* and <arch>.* keys into g (model_name: general.name).
 * n_mtp: the MTP layers the checkpoint holds, counted in block_count as the converter does.
 * Returns 0 or -ENOMEM. */
int ns_hf_config_write(const struct ns_hf_config *c, uint32_t n_mtp, const char *model_name,
		       struct ns_gguf *g);

#endif
