/* moe.h - the mixture-of-experts FFN block of qwen3moe and gpt-oss. Internal to nsforward.
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
 * act: SwiGLU silu(g) * u (qwen3moe), or gpt-oss's clamped swiglu_oai
 *     g' = min(g, 7), u' = clamp(u, -7, 7), h = g' * sigmoid(1.702 g') * (u' + 1).
 * Expert e of a stacked tensor [cols, rows_per_expert, n_expert] is the row window
 * [e * rows_per_expert, (e + 1) * rows_per_expert) of the provider's matmul; nothing else
 * of the expert tensors is ever requested.
 *
 * Ownership: ns_moe_new borrows the forward pass (provider, model) for loading; the ns_moe
 * owns its bias tables and scratch; ns_moe_destroy(&m) frees and nulls. */
#ifndef NS_MOE_H
#define NS_MOE_H

#include "forward_impl.h"

struct ns_moe;

/* Check and index the MoE tensors of every layer (blk.L.ffn_gate_inp, ffn_{gate,up,down}_exps
 * and, gpt-oss, their biases), allocate scratch for n_batch tokens and f->expert_hits.
 * ffn_rows: expert neurons per gate/up window (0 = n_ff_exp). Returns 0 or a negative errno
 * with one line in err (-EINVAL for a model we cannot run). */
int ns_moe_new(struct ns_fwd *f, const struct ns_model *m, const struct ns_hparams *hp,
	       uint32_t n_batch, uint32_t ffn_rows, struct ns_moe **out, char *err,
	       size_t errlen);

/* out: (n, n_embd) = the MoE block of layer `layer` applied to xb: (n, n_embd), n <= n_batch,
 * for the tokens at positions pos0... Returns 0, the callback's or the provider's error
 * (f->err says why). */
int ns_moe_eval(struct ns_fwd *f, struct ns_moe *moe, uint32_t layer, uint32_t pos0,
		const float *xb, uint32_t n, float *out);

void ns_moe_destroy(struct ns_moe **moe);

#endif
