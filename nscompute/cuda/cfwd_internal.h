/* cfwd_internal.h - the state of the forward pass on a CUDA device (cfwd.h) and what its
 * files share. Internal to nscfwd:
 *   cfwd.c         creation and destruction, the device's streams and events, the error line
 *   cfwd_vram.c    VRAM: sizes, scratch and KV buffers, held-vector uploads, weight windows
 *   cfwd_matmul.c  a matrix times activations: resident windows in place, the rest staged
 *   cfwd_layer.c   the layer: norms, attention, dense and MoE FFN (its routed experts
 *                  shared with gemma4's MoE layers: cfwd_moe_routed)
 *   cfwd_dnet.c    a Gated DeltaNet layer's mixer (qwen35, qwen35moe)
 *   cfwd_gemma.c   gemma3 / gemma4: their caches and scratch, and their whole chunk
 *   cfwd_eval.c    one chunk: embedding, layers, head, logits; decode graphs
 *   cfwd_prof.c    NS_CFWD_PROFILE's timing of each step
 * Launches go on one compute stream (cs), except a one-token step's q/k/v and gate/up GEMVs
 * of matrices whole in VRAM, which run side by side on two side streams (forked from and
 * joined back to it by events); weights not in VRAM are copied on the copy stream (xs) into
 * two staging slots, the copy of block i+1 overlapping the kernel of block i. */
#ifndef NS_CFWD_INTERNAL_H
#define NS_CFWD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfwd.h"
#include "gpu_need.h"
#include "held.h"
#include "llama.h"
#include "moe.h"
#include "ns_util.h"
#include "nscuda.h"

#define CFWD_GRAN NSPLAN_GPU_GRAN           /* ns_vram's allocation granule */
#define CFWD_LOGIT_TOK NSPLAN_GPU_LOGIT_TOK /* tokens per output-head pass */

/* A VRAM window of one tensor. */
struct cfwd_win {
	uint64_t rb, re;
	void *dev;  /* row rb */
};

struct cfwd_tensor {
	struct cfwd_win *w;  /* sorted by rb, disjoint */
	uint32_t n;
};

struct cfwd_dlayer { /* device copies of a layer's vectors (NULL where the host has none) */
	float *attn_norm, *ffn_norm, *q_norm, *k_norm, *bq, *bk, *bv, *bo, *sinks;
	float *router_b, *gate_b, *up_b, *down_b;
	float *router_scale, *down_scale; /* (n_embd), (n_expert): gemma4's MoE */
	float *shexp_gate;               /* (n_embd) qwen35moe's shared-expert gate */
	float *conv_w, *dt_b, *ssm_a, *ssm_norm; /* a recurrent layer's (deltanet.h) */
	float *hist, *S;                 /* its state: in cfwd.dn_state, NULL elsewhere */
	float *log;                      /* its rollback log in cfwd.dn_log, or NULL */
	uint32_t n_log;                  /* tokens in it since the mark */
};

/* NS_CFWD_PROFILE=1: an event after every step of the pass, times summed per kind, printed
 * when the pass is destroyed (the events cost a microsecond or two each: a diagnosis, not a
 * benchmark). */
enum { CFWD_P_EMBD, CFWD_P_NORM, CFWD_P_ATTN_MM, CFWD_P_ROPE, CFWD_P_KV, CFWD_P_ATTN,
       CFWD_P_FFN_MM, CFWD_P_ELEM, CFWD_P_ROUTER, CFWD_P_EXPERT, CFWD_P_HEAD, CFWD_P_N };
#define CFWD_PROF_EV 8192

struct cfwd_prof {
	bool on;
	ns_cuda_event_t *ev;      /* (CFWD_PROF_EV) */
	uint8_t *kind;            /* (CFWD_PROF_EV) kind of the step ending at ev[i] */
	uint32_t n;
	double ms[CFWD_P_N];
	uint64_t evals, tokens;
	double wall_ms, host_ms;  /* whole evaluations; their submission (until the first wait) */
};

struct ns_gemma;

struct cfwd {
	struct ns_llama *L;       /* the model description (llama.h), owned; NULL for gemma */
	struct ns_gemma *G;       /* gemma3/gemma4's description (gemma.h), owned, or NULL */
	void (*L_destroy)(void *);
	const struct ns_model *m;
	struct ns_weights *host;  /* borrowed */
	const struct ns_arch_model *am; /* the bound model (the forward pass's) */
	const struct ns_hparams *hp;    /* its hyperparameters */
	float **dheld;            /* ((n_layer + 1) * NS_SLOT_COUNT) device copies of the held
				   * tensors (held.h's layout), NULL where none */
	struct ns_vram *vram;
	ns_cuda_stream_t cs, xs;  /* compute, copy */
	ns_cuda_stream_t side[2]; /* decode: k, v (or up) GEMVs beside q (gate) on cs */
	ns_cuda_event_t fork, joined[2];
	ns_cuda_event_t copied[2], freed[2];
	void *stage[2];
	uint64_t stage_bytes;
	unsigned next_slot;
	struct cfwd_tensor *t;       /* (n_tensors) VRAM windows */
	struct cfwd_dlayer *dl;      /* (n_layer) */
	float *output_norm, *rope_freqs;
	void *kv_k, *kv_v;        /* (n_kv_layer, n_ctx) rows of kv_row_k / kv_row_v bytes: a
				   * position's n_head_kv heads in the cache's type (nscuda.h
				   * "typed KV cache"); attention layers by kv_slot */
	uint32_t kv_dim_k, kv_dim_v; /* elements of a row */
	uint32_t kv_tk, kv_tv;    /* NS_CUDA_KV_* (= enum ns_kv_type) */
	uint64_t kv_row_k, kv_row_v;
	/* scratch, n_batch tokens */
	float *x, *xb, *xb2, *q, *k, *v, *ao, *hb, *hu, *logits;
	void *attn_ws;
	float *qg, *gate;         /* gated attention: attn_q's (n_batch, 2 nq), the gates (nq) */
	int32_t *mpos;            /* M-RoPE models (image prompts): a chunk's (n_batch, 3)
				   * positions of an ns_fwd_eval_mm call; NULL for others */
	/* recurrent layers (qwen35): the state of every one in one allocation (zeroed at
	 * position 0), and the scratch of a chunk (deltanet.h's names) */
	float *dn_state;
	uint64_t dn_state_bytes;
	float *d_qkv, *d_z, *d_b, *d_a, *d_o;
	/* their rollback (ns_fwd_mark, cfwd_dnet.c): dn_state as it was at the mark (same
	 * layout), and each layer's log of rb_cap tokens' recurrence inputs (rb_lost: a chunk
	 * did not fit) */
	float *dn_state0, *dn_log;
	uint32_t rb_cap;
	bool rb_logging, rb_lost;
	/* gemma (cfwd_gemma.c): each layer's own K and V (n_ctx rows of n_head_kv * dk elements
	 * in kv_tk / kv_tv) or NULL for a KV-shared layer, the per-layer inputs (n_batch,
	 * n_layer * ple) and a layer's gated input (n_batch, ple); host rows of
	 * per_layer_token_embd (n_batch, n_layer * ple) */
	void **g_k, **g_v;
	float *pl, *pg, *h_pl;
	const void *ple_dev;      /* per_layer_token_embd whole in VRAM, or NULL */
	/* MoE scratch (cfwd_moe_state); m_hb, m_hu are hb, hu; m_xm: gemma4's routed branch */
	float *m_logits, *m_w, *m_xg, *m_hb, *m_hu, *m_yd, *m_ys, *m_xm;
	int32_t *m_sel, *m_tok, *m_slot;
	int32_t *h_sel, *h_tok, *h_slot;
	float *h_w;
	uint32_t *h_start, *h_fill;
	float *h_x;               /* (n_batch, n_embd) host embedding rows */
	int64_t *h_ids;
	struct ns_cfwd_stats st;
	uint64_t n_batch;
	struct cfwd_prof prof;
	uint64_t prof_submit_ns;
	/* decode graph (cfwd.h) */
	int64_t *dev_pos;          /* (1) position of the token being decoded */
	const void *embd_dev;      /* the token embedding, whole in VRAM (s_embed), or NULL */
	ns_cuda_graph_t graph;     /* captured at the first graph-eligible decode */
	bool graph_ok;             /* dense, every matrix whole in VRAM, not disabled */
	bool capturing;            /* launches are being recorded: position from dev_pos */
	bool act_q8;               /* opts.act_q8 */
	bool res_pending;          /* xb2 is still to be added to x: the next RMSNorm does it
				    * (ns_cuda_add_rmsnorm, one launch instead of two) */
};

/* ---------------------------------------------------------------- cfwd.c ---------------- */

/* "forward: WHAT failed on the GPU: why" into f->err; returns rc. */
int cfwd_fail(struct ns_fwd *f, const char *what, int rc);

/* A call returning a negative errno: on failure, the pass's error line and return. */
#define CFWD_TRY(what, call)                                                                 \
	do {                                                                                 \
		int cfwd_rc_ = (call);                                                       \
		if (cfwd_rc_ < 0)                                                            \
			return cfwd_fail(f, what, cfwd_rc_);                                 \
	} while (0)

/* ---------------------------------------------------------------- cfwd_vram.c ----------- */

/* *p = a * b elements of sz bytes of the arena; -EOVERFLOW, or ns_vram_alloc's error. */
int cfwd_dalloc(struct cfwd *c, void **p, uint64_t a, uint64_t b, uint64_t sz, char *err,
		size_t errlen);
#define CFWD_DA(c, p, a, b, sz) cfwd_dalloc(c, (void **)(p), a, b, sz, err, errlen)

/* The KV cache and the scratch of n_batch tokens (device), the MoE bookkeeping (host). */
int cfwd_state(struct cfwd *c, uint32_t n_ctx, uint32_t rb_cap, char *err, size_t errlen);
/* The routed experts' scratch of n_batch tokens for mo (device: router logits, weights,
 * gathered rows, expert output, slot outputs, choices, token and slot lists; host: their
 * copies and the grouping), for both passes; hb and hu (already allocated, wide enough for
 * an expert's activation) are its m_hb, m_hu. nsplan/gpu_need.c counts the same. */
int cfwd_moe_state(struct cfwd *c, const struct ns_moe *mo, char *err, size_t errlen);
/* Every held tensor to the device, and the layers' named vectors from those copies. */
int cfwd_vectors(struct cfwd *c, const struct ns_held *held, char *err, size_t errlen);
/* Allocate and fill the VRAM windows (all_resident: every matrix, whole). */
int cfwd_windows(struct cfwd *c, const struct ns_cfwd_opts *o, char *err, size_t errlen);
/* The device copy of the held slot of a layer (-1: global), or NULL. */
float *cfwd_dheld(const struct cfwd *c, int32_t layer, unsigned slot);
/* Tensor t whole in one VRAM window? */
bool cfwd_whole(const struct cfwd *c, uint32_t t);
/* Every matrix a decode step multiplies whole in VRAM (capturable)? */
bool cfwd_all_resident(const struct cfwd *c);

/* The typed cache (nscuda.h) of rows k, v: n_head_kv * dk and n_head_kv * dv elements. */
static inline struct ns_cuda_kv cfwd_kv(const struct cfwd *c, void *k, void *v, uint64_t nk,
					uint64_t nv)
{
	return (struct ns_cuda_kv){ .dev_k = k, .dev_v = v, .tk = c->kv_tk, .tv = c->kv_tv,
				    .k_row = ns_cuda_kv_row_bytes(c->kv_tk, nk),
				    .v_row = ns_cuda_kv_row_bytes(c->kv_tv, nv) };
}

/* ---------------------------------------------------------------- cfwd_matmul.c --------- */

/* y (n_tok, ldy) = x W[row0:row_end]^T, resident windows in place, the rest staged. */
int cfwd_matmul(struct ns_fwd *f, uint32_t tensor, uint64_t row0, uint64_t row_end,
		const float *x, uint64_t n_tok, float *y, uint64_t ldy);
/* cfwd_matmul with x's rows ldx >= n_cols floats apart (gemma4's stacked experts: the
 * activation in the gate half of each [gate | up] row). */
int cfwd_matmul_ld(struct ns_fwd *f, uint32_t tensor, uint64_t row0, uint64_t row_end,
		   const float *x, uint64_t ldx, uint64_t n_tok, float *y, uint64_t ldy);
/* struct ns_fwd's arch_matmul (forward_impl.h): host-side code's product (the MTP block's head,
 * mtp.h) on the device, resident windows in place, the rest staged: x (n_tok, cols) up into
 * xb, the product into c->logits, down into y, CFWD_LOGIT_TOK rows at a time (cols <= n_embd,
 * rows <= n_vocab; else -EINVAL). Between chunks, or after a chunk's layers (xb, logits
 * spent). */
int cfwd_host_matmul(struct ns_fwd *f, uint32_t tensor, uint64_t row0, uint64_t row_end,
		     const float *x, uint64_t n_tok, float *y, uint64_t ldy);
/* One token times n_mat (<= 3) whole matrices sharing x, side by side when resident. */
int cfwd_matmul_par(struct ns_fwd *f, uint32_t n_mat, const uint32_t *tensor, const float *x,
		    float *const *y);

/* ---------------------------------------------------------------- cfwd_layer.c ---------- */

/* xb = rmsnorm(x) * w   (n, n_embd), the pending residual added to x first */
int cfwd_norm(struct ns_fwd *f, struct cfwd *c, const float *w, uint32_t n);
int cfwd_attention_block(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n);
int cfwd_ffn_block(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n);
/* out (n, n_embd) = the routed experts of MoE layer l (moe.h's ns_moe_eval_routed): the
 * router over xr (its own norm and scale first where the layer has router_scale, gemma4),
 * the decision to the host (bounds-checked, reported through f->on_route, counted, grouped),
 * each used expert once over the rows of xe routed to it, the slots weighted and summed in
 * routing order. No shared expert (the caller's). xr and xe may be the same; out must be
 * none of the MoE scratch. */
int cfwd_moe_routed(struct ns_fwd *f, struct cfwd *c, const struct ns_moe *mo, uint32_t l,
		    const float *xr, const float *xe, uint32_t n, float *out);

/* ---------------------------------------------------------------- cfwd_dnet.c ----------- */

/* x += deltanet(rmsnorm(x) * attn_norm) of recurrent layer l, pending in xb2 (the norm
 * already done by the caller: xb). */
int cfwd_dnet_block(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n);
/* struct ns_fwd's arch_mark and arch_cut of a recurrent pass (forward_impl.h, deltanet.h's
 * contract on the device): the mark copies the states aside and starts the logs; a cut back
 * into the marked tokens restores the copy and runs the recurrence over the kept ones. */
int cfwd_dnet_mark(struct ns_fwd *f, bool on);
int cfwd_dnet_cut(struct ns_fwd *f, uint32_t seq, uint32_t keep);

/* ---------------------------------------------------------------- cfwd_gemma.c ---------- */

/* gemma: every own-KV layer's whole cache, the scratch (nsplan/gpu_need.c counts the same),
 * the host buffers. */
int cfwd_gemma_state(struct cfwd *c, uint32_t n_ctx, char *err, size_t errlen);
/* struct ns_fwd's eval_chunk of the gemma pass. */
int cfwd_gemma_eval_chunk(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
			  bool all);

/* ---------------------------------------------------------------- cfwd_eval.c ----------- */

/* dst (n, width) = the rows of tensor at tokens: dequantized on the device from dev_table
 * (the tensor whole in VRAM) when not NULL, else from the host provider through h_buf
 * (n * width floats of host memory). The token embedding, gemma4's per-layer table. */
int cfwd_rows(struct ns_fwd *f, struct cfwd *c, uint32_t tensor, const void *dev_table,
	      uint64_t width, const int32_t *tokens, uint32_t n, float *dst, float *h_buf);
/* Logits to the caller (c->cs synchronized), counted. */
int cfwd_download(struct cfwd *c, float *dst, const float *dev_src, uint64_t bytes);

/* One chunk of an architecture's pass, timed when profiling (both passes' eval_chunk). */
typedef int (*cfwd_chunk_fn)(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
			     bool all);
int cfwd_timed_chunk(struct ns_fwd *f, cfwd_chunk_fn eval, const int32_t *tokens, uint32_t n,
		     float *logits, bool all);
/* struct ns_fwd's eval_chunk of the pass. */
int cfwd_eval_chunk(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
		    bool all);

/* ---------------------------------------------------------------- cfwd_prof.c ----------- */

/* NS_CFWD_PROFILE set and not 0: the events; else nothing. */
int cfwd_prof_init(struct cfwd *c, char *err, size_t errlen);
/* An event after a step of kind (CFWD_P_*) when profiling. */
void cfwd_mark(struct cfwd *c, int kind);
/* After an evaluation of n tokens started at t0 (ns_now_ns): wait for it, add its steps. */
void cfwd_prof_collect(struct cfwd *c, uint64_t t0, uint32_t n);
/* The profile on stderr (at destruction), then its events freed. */
void cfwd_prof_finish(struct cfwd *c);

#endif
