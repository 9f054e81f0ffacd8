/* hparams.h - architecture hyperparameters read from a model's GGUF metadata.
 *
 * Keys follow llama.cpp's "<arch>.<name>" convention. Fields a file does not carry stay 0
 * (or are derived the way llama.cpp derives them: head_dim = n_embd / n_head, ...). */
#ifndef NS_HPARAMS_H
#define NS_HPARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct ns_hparams {
	char arch[64];  /* general.architecture */
	char name[128]; /* general.name, may be empty */
	bool has_block_count;
	uint32_t n_layer;     /* the main layers: block_count less n_nextn */
	uint32_t n_nextn;     /* nextn_predict_layers: MTP blocks after the main layers (Qwen3.5
			       * checkpoints carry one); 0 when absent or not below block_count */
	uint32_t n_embd;
	uint32_t n_ff;        /* dense FFN width (feed_forward_length; first value if per-layer) */
	uint32_t n_head;
	uint32_t n_head_kv;
	uint32_t head_dim_k;  /* attention.key_length, or n_embd / n_head */
	uint32_t head_dim_v;  /* attention.value_length, or head_dim_k */
	uint32_t n_ctx_train;
	uint32_t n_vocab;     /* vocab_size, else tokenizer.ggml.tokens length, else embd rows */
	uint32_t n_expert;
	uint32_t n_expert_used;
	uint32_t n_ff_exp;    /* expert_feed_forward_length */
	uint32_t n_expert_shared;
	uint32_t sliding_window;
	uint32_t rope_dims;   /* rope.dimension_count, or head_dim_k */
	uint32_t rope_sections[4]; /* rope.dimension_sections (M-RoPE: rotary pairs per
				    * position axis t, h, w, e), all 0 when absent */
	uint32_t n_deepstack; /* n_deepstack_layers (Qwen3-VL: text layers that take the
			       * tower's intermediate features), 0 when absent */
	double rope_freq_base;
	double rope_scale;    /* rope.scaling.factor, 0 if none */
	char rope_scaling_type[32];
	uint32_t rope_orig_ctx;
	double rms_eps;
	double norm_eps;
	bool tied_embeddings; /* no output.weight: the LM head reuses token_embd.weight */
	char tokenizer_model[32]; /* tokenizer.ggml.model: "gpt2", "llama", ... */
	char tokenizer_pre[64];
	bool has_chat_template;
};

/* Read hyperparameters. Returns 0, or -EINVAL with a line in err when the metadata is
 * inconsistent (for example n_head that does not divide n_embd where needed). Missing keys
 * are not errors here: a computation that needs one refuses the model itself. */
int ns_hparams_load(const struct ns_model *m, struct ns_hparams *hp, char *err, size_t errlen);

/* "<arch>.<suffix>" lookup helpers used by every architecture. */
bool ns_hparams_get_u64(const struct ns_model *m, const char *arch, const char *suffix,
			uint64_t *out);
bool ns_hparams_get_f64(const struct ns_model *m, const char *arch, const char *suffix,
			double *out);

#endif
