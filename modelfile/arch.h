/* arch.h - what one token of each architecture reads: the architecture table.
 *
 * One entry per architecture (general.architecture) says
 *   - its flags: the math its forward builder does that the tensors do not show (NeoX RoPE,
 *     the router's order, the FFN's activation, ...);
 *   - its hyperparameter rules: a function that reads the metadata into the values of the
 *     named dimensions (n_embd, heads, widths, ...) and into each layer's kinds (attention or
 *     recurrent, sliding window, own or shared K/V, dense or MoE FFN), and refuses what is
 *     missing or inconsistent;
 *   - its reads: every tensor one token reads, in the order the forward pass consumes them,
 *     each with the layer kinds it belongs to, whether the file must have it, a shape rule
 *     over the named dimensions, and its role:
 *       HELD    small (norms, biases, sinks, conv kernels, per-expert bias tables): copied to
 *               compute's memory once at start and never requested per token;
 *       MATRIX  multiplied whole by every token (a builder may cut it into row windows);
 *       EXPERT  a stack of experts [cols, rows per expert, n_expert]: a token multiplies the
 *               row windows of its chosen experts;
 *       ROWS    read by the row, the rows chosen by the token id (embedding tables).
 *     Global reads before the first per-layer read come before the layers, the others after.
 *
 * Binding a model to its entry (ns_arch_bind) runs the rules, finds the tensor of every read
 * at every layer, and checks presence, shape and type: that is the one check "can we run this
 * file" (ns_arch_check), which nsctl makes before it starts a process and the forward pass
 * makes when it starts. The bound model lists a token's reads in consumption order
 * (ns_arch_model.steps), which nsio's run-ahead schedule, nsrouter's expert order and the
 * tests read; a tensor's role (ns_arch_role) is what nsplan's held rule and per-token
 * prediction read.
 *
 * A decoded token's reads, expanded from the steps: each MATRIX step whole; each ROWS step one
 * row per token; a layer's EXPERT steps form its expert group, consumed at the place of the
 * first one: for every chosen expert, ascending by id, each member's window in step order;
 * HELD steps never. A builder may cut a MATRIX into row windows and interleave the windows of
 * reads that share an input (FFN gate and up), nothing else.
 *
 * Adding an architecture: one entry in arch_table.c (its reads, flags, rules; marked with no
 * builder until one computes it, so that info and plan describe it) and one forward builder.
 *
 * Ownership: the table is static and read-only. ns_arch_bind's model borrows the ns_model
 * (which must outlive it) and is freed with ns_arch_model_free(&am). */
#ifndef NS_ARCH_H
#define NS_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hparams.h"
#include "model.h"

enum ns_role {
	NS_ROLE_UNUSED,      /* in the file, read by no token of its architecture */
	NS_ROLE_HELD,
	NS_ROLE_MATRIX,
	NS_ROLE_EXPERT,
	NS_ROLE_ROWS,
	NS_ROLE_ROWS_MATRIX, /* both ROWS and MATRIX: a tied token embedding, looked up by row
			      * and multiplied whole as the output head */
	NS_ROLE_COUNT,
};

/* Tensor slots: a tensor's name, global ("output.weight") or per layer ("blk.N." + name). */
enum ns_slot {
	/* global */
	NS_T_TOKEN_EMBD,
	NS_T_PER_LAYER_TOKEN_EMBD, /* gemma4: per-layer inputs, looked up by token */
	NS_T_PER_LAYER_MODEL_PROJ,
	NS_T_PER_LAYER_PROJ_NORM,
	NS_T_ROPE_FREQS,
	NS_T_OUTPUT_NORM,
	NS_T_OUTPUT,
	/* per layer: attention */
	NS_T_ATTN_NORM,
	NS_T_ATTN_Q,
	NS_T_ATTN_Q_B,
	NS_T_ATTN_K,
	NS_T_ATTN_K_B,
	NS_T_ATTN_V,
	NS_T_ATTN_V_B,
	NS_T_ATTN_Q_NORM,
	NS_T_ATTN_K_NORM,
	NS_T_ATTN_SINKS,
	NS_T_ATTN_OUT,
	NS_T_ATTN_OUT_B,
	NS_T_ATTN_POST_NORM,       /* post_attention_norm: before the FFN (gpt-oss, qwen35) or
				    * on the attention output (gemma) */
	/* per layer: linear attention (Gated DeltaNet) */
	NS_T_ATTN_QKV,
	NS_T_ATTN_GATE,
	NS_T_SSM_CONV1D,
	NS_T_SSM_DT_B,
	NS_T_SSM_A,
	NS_T_SSM_BETA,
	NS_T_SSM_ALPHA,
	NS_T_SSM_NORM,
	NS_T_SSM_OUT,
	/* per layer: FFN */
	NS_T_FFN_NORM,
	NS_T_FFN_GATE,
	NS_T_FFN_UP,
	NS_T_FFN_DOWN,
	NS_T_FFN_POST_NORM,        /* post_ffw_norm */
	NS_T_FFN_GATE_INP,         /* the router */
	NS_T_FFN_GATE_INP_B,
	NS_T_FFN_GATE_EXPS,
	NS_T_FFN_GATE_EXPS_B,
	NS_T_FFN_UP_EXPS,
	NS_T_FFN_UP_EXPS_B,
	NS_T_FFN_DOWN_EXPS,
	NS_T_FFN_DOWN_EXPS_B,
	NS_T_FFN_GATE_INP_SHEXP,   /* the shared expert's gate (a vector) */
	NS_T_FFN_GATE_SHEXP,
	NS_T_FFN_UP_SHEXP,
	NS_T_FFN_DOWN_SHEXP,
	/* per layer: gemma4's per-layer input and output scale */
	NS_T_PLE_INP_GATE,
	NS_T_PLE_PROJ,
	NS_T_PLE_POST_NORM,
	NS_T_LAYER_OUT_SCALE,
	/* per layer: gemma4's MoE block (26B-A4B): the dense FFN is a shared expert beside the
	 * routed ones, each branch with its own norms, the router on a scaled unweighted norm */
	NS_T_FFN_POST_NORM_1,      /* the dense branch's output norm */
	NS_T_FFN_PRE_NORM_2,       /* the routed branch's input norm */
	NS_T_FFN_GATE_INP_SCALE,   /* (n_embd) on the router's input */
	NS_T_FFN_GATE_UP_EXPS,     /* gate and up of each expert in one stack (gate rows first) */
	NS_T_FFN_DOWN_EXPS_SCALE,  /* (n_expert) on each expert's down projection */
	NS_T_FFN_POST_NORM_2,      /* the routed branch's output norm */
	NS_SLOT_COUNT,
};

struct ns_slot_info {
	const char *name;  /* "attn_q.weight" (per layer, after "blk.N.") or "output.weight" */
	bool per_layer;
};

/* NULL for a value outside the enum. */
const struct ns_slot_info *ns_slot_info(unsigned slot);

/* Named dimensions of the shape rules; their values come from an architecture's rules, per
 * layer where they vary. */
enum ns_dim {
	NS_DIM_END,       /* ends a shape */
	NS_DIM_ONE,       /* 1 */
	NS_DIM_EMBD,      /* n_embd */
	NS_DIM_VOCAB,     /* rows of token_embd.weight */
	NS_DIM_HEAD,      /* attention heads */
	NS_DIM_HEAD_KV,   /* key/value heads */
	NS_DIM_DK,        /* key (and query) head size */
	NS_DIM_DV,        /* value head size */
	NS_DIM_Q,         /* n_head * dk */
	NS_DIM_Q_GATE,    /* 2 * n_head * dk: queries and their output gate (qwen35) */
	NS_DIM_K,         /* n_head_kv * dk */
	NS_DIM_V,         /* n_head_kv * dv */
	NS_DIM_O,         /* n_head * dv */
	NS_DIM_FF,        /* dense FFN width */
	NS_DIM_EXPERT,    /* experts per layer */
	NS_DIM_FF_EXP,    /* one expert's FFN width */
	NS_DIM_FF_SHEXP,  /* the shared expert's FFN width */
	NS_DIM_ROPE_PAIRS, /* rotated dimensions / 2: rope_freqs */
	NS_DIM_SSM_CONV,  /* convolution kernel width */
	NS_DIM_SSM_CH,    /* convolved channels: q, k and v of a linear-attention layer */
	NS_DIM_SSM_INNER, /* value heads * value head size */
	NS_DIM_SSM_HEADS, /* value heads (time_step_rank) */
	NS_DIM_SSM_DV,    /* value head size */
	NS_DIM_PLE,       /* per-layer input width (gemma4) */
	NS_DIM_PLE_ALL,   /* n_layer * PLE */
	NS_DIM_FF_EXP2,   /* 2 * n_ff_exp: gate and up of one expert stacked (gemma4) */
	NS_DIM_COUNT,
};

/* Name for messages ("n_embd"); "?" outside the enum. */
const char *ns_dim_name(unsigned dim);

/* Layer kinds, a set per layer. A read applies at a layer that has all of its `on` kinds and
 * none of its `off` kinds; a global read, where the model's layers together have them. */
#define NS_LAYER_ATTN      0x01u /* softmax attention over a KV cache */
#define NS_LAYER_SWA       0x02u /* ... within a sliding window */
#define NS_LAYER_KV_SHARED 0x04u /* ... over an earlier layer's K/V: none of its own */
#define NS_LAYER_RECURRENT 0x08u /* linear attention with a recurrent state (Gated DeltaNet) */
#define NS_LAYER_DENSE     0x10u /* dense FFN */
#define NS_LAYER_MOE       0x20u /* routed experts */
#define NS_LAYER_SHEXP     0x40u /* ... and a shared expert */
#define NS_LAYER_PLE       0x80u /* takes a per-layer input (gemma4) */

enum ns_need {
	NS_NEED_REQUIRED,
	NS_NEED_OPTIONAL,  /* read when the file has it (biases, rope factors) */
	NS_NEED_OR_EMBD,   /* absent: token_embd.weight is read in its place (a tied head) */
};

/* One read of the table. */
struct ns_arch_read {
	uint8_t slot;     /* enum ns_slot */
	uint8_t role;     /* enum ns_role: HELD, MATRIX, EXPERT or ROWS */
	uint8_t need;     /* enum ns_need */
	uint8_t on, off;  /* NS_LAYER_* it applies to */
	uint8_t dims[NS_GGUF_MAX_DIMS]; /* shape: ne[i] = dims[i]'s value, NS_DIM_END ends */
};

/* Flags: what a builder does that the tensors do not show, and what info describes. */
#define NS_ARCH_ROPE_NEOX      0x0001u /* NeoX pairs (x[i], x[i + n/2]); else (x[2i], x[2i+1]) */
#define NS_ARCH_QK_NORM        0x0002u /* per-head RMS norm of q and k before RoPE */
#define NS_ARCH_MOE            0x0004u /* routed experts (gemma4: on layers with a router) */
#define NS_ARCH_SHARED_EXPERT  0x0008u /* ... plus a gated shared expert */
#define NS_ARCH_SINKS          0x0010u /* a sink logit per head in the attention softmax */
#define NS_ARCH_SWA            0x0020u /* some layers attend within a sliding window */
#define NS_ARCH_RECURRENT      0x0040u /* some layers are linear attention (recurrent state) */
#define NS_ARCH_KV_SHARED      0x0080u /* some layers reuse an earlier layer's K/V */
#define NS_ARCH_PER_LAYER_EMBD 0x0100u /* per-layer inputs from a table read by token id */
#define NS_ARCH_SANDWICH_NORM  0x0200u /* norms on the attention and FFN outputs too */
#define NS_ARCH_EMBD_SCALE     0x0400u /* the input embedding is scaled by sqrt(n_embd) */
#define NS_ARCH_GATED_ATTN     0x0800u /* attention output times sigmoid of a gate */
#define NS_ARCH_MROPE          0x1000u /* multi-section RoPE (positions per section) */
#define NS_ARCH_DEEPSTACK      0x2000u /* vision features added to early layers' inputs */
#define NS_ARCH_LOGIT_SOFTCAP  0x4000u /* final logits soft-capped */
#define NS_ARCH_V_NORM         0x8000u /* V RMS-normed per head (no weight), attention scale 1
				       * (gemma4: the q/k/v norms bound the scores) */

/* How a MoE router turns logits into experts and weights. */
enum ns_router {
	NS_ROUTER_NONE,
	NS_ROUTER_SOFTMAX,      /* softmax over all experts, top-k, weights renormalised
				 * (llama.cpp expert_gating_func 1) */
	NS_ROUTER_TOPK_SOFTMAX, /* top-k of the logits, softmax over those k (func 3) */
};

/* The FFN's activation. */
enum ns_ffn_act {
	NS_FFN_SWIGLU,     /* silu(gate) * up */
	NS_FFN_SWIGLU_OAI, /* gpt-oss: clamped, sigmoid(1.702 g) */
	NS_FFN_GEGLU,      /* gelu(gate) * up (gemma) */
};

/* Forward builders (one per family of architectures) and the backends that have them. */
enum ns_builder {
	NS_BUILD_NONE,  /* described, not computed yet */
	NS_BUILD_LLAMA, /* nscompute/forward/llama.c (+ moe.c), nscompute/cuda/cfwd*.c */
	NS_BUILD_GEMMA, /* nscompute/forward/gemma*.c, nscompute/cuda/cfwd_gemma.c */
};
#define NS_BACKEND_CPU  0x1u
#define NS_BACKEND_CUDA 0x2u

struct ns_arch_model;

struct ns_arch {
	const char *name;        /* general.architecture */
	uint32_t flags;          /* NS_ARCH_* */
	uint8_t builder;         /* enum ns_builder */
	uint8_t backends;        /* NS_BACKEND_*: those with the builder */
	uint8_t router;          /* enum ns_router */
	uint8_t ffn_act;         /* enum ns_ffn_act */
	uint32_t swa_period;     /* sliding-window layers without a pattern key: l % period <
				  * period - 1 slide (0: every layer) */
	/* Fill am->dim, am->layer[].kinds, .dim, .window from am->hp and the metadata; -EINVAL
	 * with one line for what is missing or inconsistent. */
	int (*rules)(struct ns_arch_model *am, char *err, size_t errlen);
	const struct ns_arch_read *reads; /* consumption order */
	uint32_t n_reads;
};

/* The table's entry for general.architecture, or NULL. */
const struct ns_arch *ns_arch_find(const char *name);
/* The i-th entry (table order), NULL past the end. */
const struct ns_arch *ns_arch_at(size_t i);
/* "llama, qwen3, ..." of the architectures some backend in `backends` computes. */
void ns_arch_computed_list(unsigned backends, char *buf, size_t len);

/* One layer of a bound model. */
struct ns_arch_layer {
	uint32_t kinds;                 /* NS_LAYER_* */
	uint32_t window;                /* positions a sliding-window layer sees, else 0 */
	uint64_t dim[NS_DIM_COUNT];     /* the named dimensions at this layer */
};

/* One read of one token: a present tensor, in consumption order. */
struct ns_arch_step {
	uint32_t tensor;  /* index in the model */
	int32_t layer;    /* -1: global */
	uint8_t slot;     /* enum ns_slot */
	uint8_t role;     /* the read's role (a tied head: token_embd as MATRIX) */
};

struct ns_arch_model {
	const struct ns_arch *arch;
	const struct ns_model *m;       /* borrowed */
	struct ns_hparams hp;
	uint32_t n_layer;
	uint32_t kinds;                 /* every layer's kinds together */
	uint64_t dim[NS_DIM_COUNT];     /* model-wide values (layer dims start as these) */
	struct ns_arch_layer *layer;    /* (n_layer) */
	int64_t *tensor;                /* ((n_layer + 1) * NS_SLOT_COUNT): the tensor of each
					 * slot, global slots in row n_layer; -1 when absent */
	struct ns_arch_step *steps;     /* (n_steps) */
	uint64_t n_steps;
	/* MoE routing from the metadata (rules) */
	bool moe_norm_w;                /* renormalise the k weights to sum 1 */
	float moe_w_scale;              /* then scale them (1: none) */
};

/* Bind m to its architecture's entry and check it against it: the rules, then every read at
 * every layer (present unless optional, the shape, a type we can compute), and no tensor the
 * table names at a layer that does not read it. Returns 0, -EINVAL with one line in err
 * ("forward: ..."; an architecture the table does not know names itself), -ENOMEM. Computed
 * or not: ns_arch_check also asks for a builder. */
int ns_arch_bind(const struct ns_model *m, struct ns_arch_model **out, char *err,
		 size_t errlen);
void ns_arch_model_free(struct ns_arch_model **am);

/* ns_arch_bind for an architecture that some backend in `backends` computes (a builder
 * first: else -EINVAL, "forward: architecture 'X' is described but not computed yet
 * (computed: ...)" or "... is not supported (...)"). */
int ns_arch_bind_computed(const struct ns_model *m, unsigned backends,
			  struct ns_arch_model **out, char *err, size_t errlen);

/* Can some backend in `backends` run m? A builder for its architecture, then ns_arch_bind's
 * checks; reads no weight and allocates only the bound model. 0, -EINVAL with one line,
 * -ENOMEM. */
int ns_arch_check(const struct ns_model *m, unsigned backends, char *err, size_t errlen);

/* Can m be described (planned)? 0 for an architecture the table does not know (described by
 * its shapes) or one it knows that binds; else as ns_arch_bind. */
int ns_arch_check_described(const struct ns_model *m, char *err, size_t errlen);

/* The tensor of a slot at a layer (-1: global), or -1. */
static inline int64_t ns_arch_tensor(const struct ns_arch_model *am, int32_t layer,
				     unsigned slot)
{
	return am->tensor[(uint64_t)(layer < 0 ? am->n_layer : (uint32_t)layer) * NS_SLOT_COUNT +
			  slot];
}

/* A dimension's value at a layer (-1: model-wide). */
static inline uint64_t ns_arch_dim(const struct ns_arch_model *am, int32_t layer, unsigned dim)
{
	return layer < 0 ? am->dim[dim] : am->layer[layer].dim[dim];
}

/* The role of tensor t of a model with hyperparameters hp: from the table when it knows
 * hp->arch (by name: a tensor the architecture does not read is UNUSED; a tied token_embd is
 * ROWS_MATRIX), else by shape (one row: HELD; *_exps.bias: HELD; *_exps: EXPERT;
 * token_embd: ROWS, or ROWS_MATRIX when tied; other: MATRIX). Agrees with the steps of a
 * bound model. */
enum ns_role ns_arch_role(const struct ns_hparams *hp, const struct ns_model_tensor *t);

const char *ns_role_name(unsigned role);

#endif
