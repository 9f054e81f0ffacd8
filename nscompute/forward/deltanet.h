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
#include <stddef.h>
#include <stdint.h>

#include "forward_impl.h"

/* One recurrent layer's weights (the table's reads, arch.h) and, with host state, its state. */
struct ns_dnet_layer {
	uint32_t qkv, gate, beta, alpha, out; /* matrices (tensor indices) */
	const float *conv_w;  /* (CH, K) ssm_conv1d: K taps per channel, oldest first */
	const float *dt_b;    /* (n_v) ssm_dt.bias */
	const float *ssm_a;   /* (n_v) -exp(A_log) */
	const float *norm;    /* (dv) ssm_norm */
	float *hist;          /* (K - 1, CH) the last K - 1 conv inputs, oldest first (host) */
	float *S;             /* (n_v, dk, dv) states (host) */
	/* rollback (rb_cap > 0): hist and S as they were at the mark, and the recurrence's
	 * input of every token since, (rb_cap, CH + 2 n_v): qkv projections, alpha, beta */
	float *hist0, *S0, *log;
	uint32_t n_log;       /* tokens in log */
};

/* The description (dims, tensors, vectors: read by the CUDA pass too, cfwd_dnet.c) and, for
 * the CPU pass, the state and scratch. */
struct ns_dnet {
	uint32_t n_embd, n_k, n_v, dk, dv, K, CH, n_layer;
	float eps;
	struct ns_dnet_layer *layers;  /* (n_layer) indexed by model layer; unused for attention */
	/* scratch, sized for n_batch tokens (host state only) */
	float *qkv;   /* (n_batch, CH) projections, then conv outputs */
	float *z;     /* (n_batch, n_v * dv) output gate */
	float *b;     /* (n_batch, n_v) beta logits */
	float *a;     /* (n_batch, n_v) decay logits */
	float *o;     /* (n_batch, n_v * dv) gated, normed outputs */
	float *conv;  /* (CH) one token's conv output */
	float *kv;    /* (dv) S^T k of one head */
	uint32_t rb_cap;  /* tokens a mark can cover (0: no rollback buffers) */
	bool logging;     /* a mark is set: each chunk's inputs go to the layers' logs */
	bool log_lost;    /* more than rb_cap tokens came after the mark: no rollback */
	uint64_t state_bytes; /* host state and rollback buffers (ns_dnet_state_bytes) */
};

/* The description of f->am's recurrent layers and, with host_state, their state and scratch
 * for n_batch tokens per chunk. Returns 0, or -EINVAL/-ENOMEM/-EOVERFLOW with one line in
 * err. */
int ns_dnet_new(struct ns_fwd *f, uint32_t n_batch, bool host_state, struct ns_dnet **out,
		char *err, size_t errlen);

/* out: (n, n_embd) = the mixer of recurrent layer `layer` applied to xb: (n, n_embd) for the
 * tokens at positions pos0 ... pos0 + n - 1, advancing that layer's state. Returns 0 or the
 * provider's error (f->err says why). */
int ns_dnet_eval(struct ns_fwd *f, struct ns_dnet *d, uint32_t layer, uint32_t pos0,
		 const float *xb, uint32_t n, float *out);

/* The steps of one token, the only definition of their arithmetic on the host (the CUDA
 * emulation, nscompute/cuda/emu/emu_dnet.c, runs these too):
 * c (CH) = silu(conv of hist (K - 1, CH) and x (CH) with w (CH, K)), then x joins hist. */
void ns_dnet_conv_token(const float *w, float *hist, uint32_t K, uint32_t CH, const float *x,
			float *c);
/* x (n) = x / max(|x|, eps) * extra_scale, the sum of squares in double (ggml_l2_norm). */
void ns_dnet_l2norm(float *x, uint32_t n, float eps, float extra_scale);
/* The state's decay exp(softplus(a + dt_b) * ssm_a) and the write strength sigmoid(b). */
float ns_dnet_decay(float a, float dt_b, float ssm_a);
float ns_dnet_beta(float b);
/* The delta rule of one value head: S (dk, dv) *= decay; d = (v - S^T k) * beta;
 * S += k d^T; o (dv) = S^T q. kv: (dv) scratch. */
void ns_dnet_rule(float *S, const float *q, const float *k, const float *v, float decay,
		  float beta, uint32_t dk, uint32_t dv, float *kv, float *o);
/* o (n) = rmsnorm(o) * w * silu(z): the head's output norm gated by z. */
void ns_dnet_gated_norm(float *o, const float *w, const float *z, uint32_t n, float eps);
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
