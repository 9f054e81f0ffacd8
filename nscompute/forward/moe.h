/* moe.h - the mixture-of-experts FFN block of qwen3moe, gpt-oss, qwen35moe and gemma4.
 * Internal to nsforward.
 *
 * For a chunk of n tokens with normed input xb: (n, n_embd), one layer does
 *     logits = xb Wr^T (+ br)                          router, (n, n_expert)
 *     qwen3moe: p = softmax(logits); top-k of p; w = p[top] / sum(p[top]) (expert_weights_norm)
 *     gpt-oss:  top-k of logits; w = softmax(logits[top])
 *     report the routing (forward.h on_route), count hits
 *     for every expert e chosen by some token, once, over the m tokens routed to it:
 *         h = act(xg Wg_e^T (+ bg_e), xg Wu_e^T (+ bu_e))     xg: (m, n_embd) gathered rows
 *         d = h Wd_e^T (+ bd_e)                               (m, n_embd)
 *     out[t] = sum over t's slots in routing order of w[t, s] * d_{e(t,s)}[t]
 *     qwen35moe, then: out[t] += sigmoid(xb[t] . gate_inp_shexp) * shared_expert(xb[t])
 *         (a SwiGLU FFN, ffn.h, over all n tokens)
 * gemma4 (ns_moe_eval_routed): the router reads rmsnorm(xr) / sqrt(n_embd) * router_scale
 *     (no weight in the norm), gate and up of an expert are one stacked window (fused), the
 *     activation is GEGLU, and d is multiplied by down_scale[e] before its weight.
 * act: SwiGLU silu(g) * u (qwen3moe), GEGLU gelu_tanh(g) * u (gemma4), or gpt-oss's clamped
 * swiglu_oai
 *     g' = min(g, 7), u' = clamp(u, -7, 7), h = g' * sigmoid(1.702 g') * (u' + 1).
 * Expert e of a stacked tensor [cols, rows_per_expert, n_expert] is the row window
 * [e * rows_per_expert, (e + 1) * rows_per_expert) of the provider's matmul; nothing else
 * of the expert tensors is ever requested.
 *
 * Which tensors (the table's MoE reads, arch.h), the router's order and the activation (the
 * architecture's entry) come from the bound model f->am; the bias tables are held (f->held).
 *
 * Ownership: ns_moe_new borrows the forward pass; the ns_moe owns its scratch (the bias
 * tables belong to f->held); ns_moe_destroy(&m) frees and nulls. */
#ifndef NS_MOE_H
#define NS_MOE_H

#include <stdbool.h>
#include <stdint.h>

#include "ffn.h"
#include "forward_impl.h"

struct ns_moe_layer {
	uint32_t router;  /* ffn_gate_inp.weight   (n_expert rows, n_embd cols) */
	uint32_t gate;    /* ffn_gate_exps.weight  (n_expert * n_ff_exp, n_embd) */
	uint32_t up;      /* ffn_up_exps.weight    (n_expert * n_ff_exp, n_embd) */
	uint32_t down;    /* ffn_down_exps.weight  (n_expert * n_embd, n_ff_exp) */
	const float *router_b;  /* (n_expert) or NULL */
	const float *gate_b;    /* (n_expert, n_ff_exp) or NULL */
	const float *up_b;      /* (n_expert, n_ff_exp) or NULL */
	const float *down_b;    /* (n_expert, n_embd) or NULL */
	struct ns_ffn_w shexp;  /* the shared expert (qwen35moe), n_ff 0 when none */
	const float *shexp_gate; /* (n_embd) ffn_gate_inp_shexp, or NULL */
	bool fused;             /* gate == up: ffn_gate_up_exps (n_expert * 2 n_ff_exp rows,
				 * each expert's gate rows then its up rows; gemma4) */
	const float *router_scale; /* (n_embd) ffn_gate_inp.scale (gemma4), or NULL */
	const float *down_scale;   /* (n_expert) ffn_down_exps.scale (gemma4), or NULL */
};

struct ns_moe {
	uint32_t n_layer, n_embd, n_ff_exp, n_expert, n_used, ffn_rows;
	bool softmax_first; /* softmax over all logits, then top-k (else top-k, then softmax) */
	bool norm_w;        /* divide the k weights by their sum */
	float w_scale;      /* then multiply them by expert_weights_scale; 1 without */
	bool oai;           /* swiglu_oai activation (else SwiGLU) */
	bool gelu;          /* GEGLU gelu_tanh(g) * u (gemma4; else as oai says) */
	float eps;          /* rms_eps: the router's own norm (router_scale) */
	struct ns_moe_layer *layers; /* (n_layer) */
	/* scratch, sized for n_batch tokens */
	float *logits;    /* (n_batch, n_expert) router logits, then scores */
	int32_t *sel;     /* (n_batch, n_used) chosen experts */
	float *wts;       /* (n_batch, n_used) their weights */
	uint8_t *taken;   /* (n_expert) top-k bookkeeping of one token */
	uint32_t *start;  /* (n_expert + 1) first slot of each expert in order */
	uint32_t *fill;   /* (n_expert) fill cursor */
	uint32_t *order;  /* (n_batch * n_used) slot ids t * n_used + s, grouped by expert */
	float *xg;        /* (n_batch, n_embd) inputs gathered for one expert */
	float *hb;        /* (n_batch, n_ff_exp) expert activation */
	float *hu;        /* (n_batch, ffn_rows) up projection of one window */
	float *yd;        /* (n_batch, n_embd) down projection of one expert */
	float *ys;        /* (n_batch, n_used, n_embd) weighted output of each slot */
	uint32_t n_ff_shexp; /* the shared expert's width, 0 without one */
	uint32_t shexp_rows; /* its neurons per gate/up window */
	float *sh;        /* (n_batch, n_ff_shexp) shared expert activation */
	float *shu;       /* (n_batch, shexp_rows) its up projection of one window */
	float *xr;        /* (n_batch, n_embd) the router's input (router_scale) */
	float *hg;        /* (n_batch, 2 n_ff_exp) gate and up of one fused expert, or NULL */
};

/* A predicted routing of layer `layer` for the chunk's n tokens at pos0: the layer's router
 * over x: (n, n_embd), the residual stream after layer - 1 (before layer's attention), normed
 * with norm (layer's ffn_norm), reported through f->on_route with predicted set. Only the
 * MoE scratch (xg, xr, logits, sel, wts, taken) is written, and ns_moe_eval writes all of it
 * again before reading it, so the pass's values never depend on a prediction. Does nothing
 * past the last layer or without on_route. A layer with router_scale (gemma4) routes x
 * itself through its own norm (norm is not read). Returns 0, the provider's or the callback's
 * error (f->err says why). */
int ns_moe_predict(struct ns_fwd *f, struct ns_moe *moe, uint32_t layer, uint32_t pos0,
		   const float *x, uint32_t n, const float *norm, float eps);

/* Index the MoE tensors of every layer (blk.L.ffn_gate_inp, ffn_{gate,up,down}_exps and,
 * where the file has them, their biases) from f->am, allocate scratch for n_batch tokens and
 * f->expert_hits. ffn_rows: expert neurons per gate/up window (0 = n_ff_exp). Returns 0 or a
 * negative errno with one line in err. */
int ns_moe_new(struct ns_fwd *f, uint32_t n_batch, uint32_t ffn_rows, struct ns_moe **out,
	       char *err, size_t errlen);

/* out: (n, n_embd) = the MoE block of layer `layer` applied to xb: (n, n_embd), n <= n_batch,
 * for the tokens at positions pos0... Returns 0, the callback's or the provider's error
 * (f->err says why). */
int ns_moe_eval(struct ns_fwd *f, struct ns_moe *moe, uint32_t layer, uint32_t pos0,
		const float *xb, uint32_t n, float *out);

/* ns_moe_eval with the router on its own input xr: (n, n_embd) (gemma4: the residual stream,
 * which a layer with router_scale normalises without weight, scales by 1/sqrt(n_embd) and
 * by router_scale before the router, as llama.cpp's gemma4 graph), the experts on xb. */
int ns_moe_eval_routed(struct ns_fwd *f, struct ns_moe *moe, uint32_t layer, uint32_t pos0,
		       const float *xr, const float *xb, uint32_t n, float *out);

void ns_moe_destroy(struct ns_moe **moe);

/* The router of one token: lg (E) logits, overwritten with scores -> sel, w (K), as the
 * header comment says (softmax_first: qwen3moe; else gpt-oss; then norm_w, w_scale). Top-k
 * keeps the lowest expert id among equal scores. taken: (E) scratch. Also the reference the
 * CUDA emulation routes with. */
void ns_moe_route_token(float *lg, uint32_t E, uint32_t K, bool softmax_first, bool norm_w,
			float w_scale, uint8_t *taken, int32_t *sel, float *w);

/* One token's shared-expert term: o (D) += sh (D) * sigmoid(x (D) . gw (D)), the dot in
 * float in order. Also what the CUDA emulation computes (ns_cuda_add_sigmoid_scaled). */
void ns_moe_shexp_add(float *o, const float *sh, const float *x, const float *gw, uint32_t D);

#endif
