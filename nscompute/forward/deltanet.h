/* deltanet.h - the Gated DeltaNet (linear attention) mixer of qwen35 / qwen35moe, with its
 * per-sequence recurrent state. Internal to nsforward.
 *
 * For a chunk of n tokens with normed input xb: (n, n_embd), a recurrent layer does
 *     qkv = xb Wqkv^T      (n, CH)   CH = 2 * n_k * dk + n_v * dv
 *     z   = xb Wgate^T     (n, n_v * dv)
 *     b   = xb Wbeta^T     (n, n_v),  beta = sigmoid(b)
 *     a   = xb Walpha^T    (n, n_v),  g = softplus(a + dt_bias) * ssm_a   (ssm_a = -exp(A_log))
 * then token by token, in order:
 *     c = silu(causal depthwise conv of qkv over the last K inputs: the K - 1 before the token
 *         come from the conv history, which carries over from the previous chunk)
 *     q, k, v = c split; q, k L2-normalised per head (x / max(|x|, eps), as ggml), q / sqrt(dk)
 *     per value head h (key head h mod n_k: ggml's tiled broadcast; the converter stores the
 *     value heads in that order):
 *         S = S * exp(g_h)                       S: (dk, dv) the head's state
 *         d = (v_h - S^T k) * beta_h
 *         S = S + k d^T
 *         o_h = S^T q
 *     o_h = rmsnorm(o_h) * ssm_norm * silu(z_h)
 * and out = o Wout^T (n, n_embd). Evaluating token by token makes whole, chunked and
 * one-token-at-a-time evaluation bit-identical.
 *
 * State: per recurrent layer the conv history (K - 1, CH) and the states (n_v, dk, dv), all
 * f32, fixed size whatever the context (ns_dnet_state_bytes; nsplan counts the same). A chunk
 * that starts at position 0 starts from zero state: the sequence was reset.
 *
 * Rollback (f->rb_cap > 0, speculative decoding: docs/decisions.md): ns_dnet_mark copies every
 * layer's state and history aside and from then on logs each token's recurrence input (its
 * qkv projections, alpha and beta logits: CH + 2 n_v floats, far smaller than the state), up
 * to rb_cap tokens; ns_dnet_rollback(keep) restores the copy and runs the recurrence again
 * (conv + delta rule, no projection, so no weight is read) over the first keep logged tokens.
 * The result is bit-identical to a pass that never saw the tokens after them. Buffers: per
 * layer one more state and history and rb_cap log rows, allocated with the state and counted
 * with it (ns_dnet_state_bytes, nsplan/fixed_mem.h).
 *
 * Ownership: ns_dnet_new borrows the forward pass (its bound model and held vectors); the
 * ns_dnet owns its state and scratch; ns_dnet_destroy(&d) frees and nulls. */
#ifndef NS_DELTANET_H
#define NS_DELTANET_H

#include <stdbool.h>
#include <stdint.h>

#include "forward_impl.h"

struct ns_dnet;

/* State and scratch for f->am's recurrent layers, n_batch tokens per chunk. Returns 0, or
 * -EINVAL/-ENOMEM/-EOVERFLOW with one line in err. */
int ns_dnet_new(struct ns_fwd *f, uint32_t n_batch, struct ns_dnet **out, char *err,
		size_t errlen);

/* out: (n, n_embd) = the mixer of recurrent layer `layer` applied to xb: (n, n_embd) for the
 * tokens at positions pos0 ... pos0 + n - 1, advancing that layer's state. Returns 0 or the
 * provider's error (f->err says why). */
int ns_dnet_eval(struct ns_fwd *f, struct ns_dnet *d, uint32_t layer, uint32_t pos0,
		 const float *xb, uint32_t n, float *out);

/* Copy the state aside (zero: take a zero state, the next chunk starts at position 0) and log
 * the tokens evaluated from now on. 0, or -ENOTSUP without rollback buffers. */
int ns_dnet_mark(struct ns_dnet *d, bool zero);
/* Stop logging (the mark is dropped). */
void ns_dnet_unmark(struct ns_dnet *d);
/* The state after the first keep tokens since the mark, recomputed from the copy and the log;
 * the mark is dropped. 0, or -ERANGE (no mark, or more tokens than the log holds). */
int ns_dnet_rollback(struct ns_dnet *d, uint32_t keep);
/* Bytes of the recurrent states, histories and rollback buffers. */
uint64_t ns_dnet_state_bytes(const struct ns_dnet *d);

void ns_dnet_destroy(struct ns_dnet **d);

#endif
