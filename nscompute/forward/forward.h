/* forward.h - the decoder forward pass of the cpu backend.
 *
 * One ns_fwd evaluates one sequence: it owns a KV cache of n_ctx positions and appends the
 * tokens of each ns_fwd_eval call after the ones already there. A call with n > 1 is a
 * prefill: the batch goes through every weight together (one matmul per weight and chunk of
 * n_batch tokens), so weights are read once per chunk, not once per token.
 *
 * Architectures: those of the architecture table (modelfile/arch.h) with a cpu builder:
 * llama (llama 1/2/3, incl. llama3 rope_freqs factors), qwen3 (per-head q/k RMS norm, NeoX
 * RoPE), and the mixture-of-experts qwen3moe (qwen3 attention, softmax router, top-k
 * renormalised) and gpt-oss (biased projections, attention sinks, alternating sliding-window
 * layers, YaRN, top-k-then-softmax router, clamped SwiGLU experts with biases), the
 * hybrid qwen35 / qwen35moe (Gated DeltaNet layers whose recurrent state and conv history are
 * per sequence and fixed in size, carried across calls and zeroed when a call starts at
 * position 0; gated full attention; a shared expert beside the routed ones), Qwen3-VL's text
 * decoders qwen3vl / qwen3vlmoe on text (qwen3 / qwen3moe: at a text position every M-RoPE
 * section has the same position, so the interleaved M-RoPE is NeoX's), and through
 * gemma.h gemma3 and gemma4 (sliding and global layers of their own geometry and RoPE, KV-shared
 * layers, per-layer inputs, sandwich norms, GELU(tanh), soft-capped logits). The pass reads
 * exactly the table's reads, in its order; what it refuses, ns_arch_check refuses first (the
 * same checks, without a weight read), with a clear line.
 *
 * MoE: an expert is a row window of the stacked expert tensors (expert e of ffn_gate_exps owns
 * rows [e * n_ff_exp, (e + 1) * n_ff_exp)), so the provider only ever sees windows. In a
 * chunk, every expert chosen by any token is multiplied once over all the tokens routed to it.
 * The routing of a layer is reported (opts.on_route) before any expert weight is requested.
 * With opts.moe_predict a predicted routing of layer l + 1 is reported too, right after layer
 * l: it reads l + 1's router one more time and changes no value of the pass.
 *
 * Ownership: the model and the weight provider are borrowed and must outlive the ns_fwd;
 * ns_fwd_destroy(&f) frees the rest and nulls f. Not thread-safe. */
#ifndef NS_FORWARD_H
#define NS_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "weights.h"

struct ns_fwd;

/* The routing decision of one MoE layer for one chunk. Arrays are borrowed for the call. */
struct ns_fwd_route {
	uint32_t layer;
	uint32_t pos0;           /* position of the chunk's first token */
	uint32_t n_tok;          /* tokens in the chunk */
	uint32_t n_used;         /* experts per token */
	uint32_t n_expert;       /* experts in the layer */
	const int32_t *experts;  /* (n_tok, n_used) expert ids, highest router score first */
	const float *weights;    /* (n_tok, n_used) mixing weights of those experts */
	bool predicted;          /* a prediction (opts.moe_predict): layer's router applied to
				  * the previous layer's output before layer's attention ran; a
				  * guess for I/O scheduling, never used for the tokens */
};

/* Called once per MoE layer and chunk, after routing and before any expert row is read.
 * Return 0 to go on; a negative errno aborts the evaluation with that error. */
typedef int (*ns_fwd_route_fn)(void *user, const struct ns_fwd_route *route);

struct ns_fwd_opts {
	uint32_t n_ctx;    /* positions the KV cache holds; required, > 0 */
	uint32_t n_batch;  /* tokens per prefill chunk; 0 = 512 */
	uint32_t ffn_rows; /* neurons per gate/up window in FFN phase 1 (dense layers and each
			    * expert); 0 = whole width */
	uint32_t n_seq;    /* sequences, each with a KV cache of n_ctx positions
			    * (ns_fwd_eval_batch); 0 or 1: one, ns_fwd_eval's */
	int kv_k, kv_v;    /* KV cache element types, enum ns_kv_type (kvcache.h): 0 = f32 (exact),
			    * 1 = f16, 2 = q8_0 (head sizes multiples of 32) */
	ns_fwd_route_fn on_route; /* MoE routing reports, or NULL */
	void *route_user;         /* passed to on_route */
	bool attn_exact;          /* tests: attention over an f16 / q8_0 cache by the exact
				   * algorithm (attn.h; slower), as the CUDA pass's emulation
				   * computes it, instead of the tiled one */
	uint32_t n_rollback;      /* recurrent models (qwen35): tokens after a mark
				   * (ns_fwd_mark) that can be cut back, for speculative
				   * decoding; 0: none (no buffers). Other models: ignored */
	bool moe_predict;         /* with on_route: after each MoE layer l, route the next
				   * layer's router over l's output (normed by l + 1's ffn_norm,
				   * attention skipped, as pre-gating MoE does) and report it as a
				   * predicted route before l + 1's attention (cpu builder) */
};

/* Returns 0, or a negative errno with one line in err: -EINVAL for a model we cannot run
 * (architecture, missing tensor, shape, uncomputable type), -ENOMEM, or the provider's error. */
int ns_fwd_new(const struct ns_model *m, struct ns_weights *w, const struct ns_fwd_opts *opts,
	       struct ns_fwd **out, char *err, size_t errlen);

/* Evaluate n tokens at positions n_past .. n_past + n - 1 and advance n_past.
 * logits: all ? (n, n_vocab) : (n_vocab) of the last token; may be NULL to only fill the cache.
 * Returns 0, -EINVAL (bad token id, n == 0), -ENOSPC (context full), or a provider error;
 * ns_fwd_error says why. After an error the sequence must be reset. */
int ns_fwd_eval(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits, bool all);

/* A multimodal call (Qwen3-VL): rows whose input is an image embedding instead of a token,
 * every row's M-RoPE position, and the DeepStack features. Rows are those of the call. */
struct ns_fwd_mm {
	const uint8_t *is_embd;  /* (n): row t takes embd's row t in place of tokens[t] */
	const float *embd;       /* (n, n_embd); only the rows with is_embd are read */
	const float *deepstack;  /* (n_deepstack, n, n_embd): added to the hidden state of the
				  * rows with is_embd after text layer k < n_deepstack; NULL
				  * only for a model without DeepStack layers */
	uint32_t n_deepstack;    /* the model's n_deepstack_layers when deepstack is given */
	const int32_t *pos;      /* (n, 3): M-RoPE positions (temporal, height, width) */
};

/* ns_fwd_eval with images (architectures with M-RoPE on the llama builder: qwen3vl,
 * qwen3vlmoe, qwen35, qwen35moe; the cpu pass and the CUDA one, cfwd.h). Text evaluated later
 * by ns_fwd_eval continues at M-RoPE position (largest position of this call + 1), as
 * Transformers' rope deltas. Returns as ns_fwd_eval,
 * or -EINVAL for an architecture without M-RoPE, a position below 0, or DeepStack features
 * that do not match the model's. A sequence holding an image is cut back only to 0 or to a
 * position past its last image (ns_fwd_truncate refuses others). */
int ns_fwd_eval_mm(struct ns_fwd *f, const int32_t *tokens, uint32_t n,
		   const struct ns_fwd_mm *mm, float *logits, bool all);

/* One image of a multimodal prompt: the grid of tokens it becomes (frames, rows, columns,
 * after the tower's merge). */
struct ns_fwd_mm_grid {
	uint32_t t, h, w;
};

/* M-RoPE positions of a prompt as Transformers' get_rope_index computes them: each maximal
 * run of image_id in tokens stands for the next image (its length must be t * h * w); text
 * row i gets (p, p, p) with p counting on from pos0, an image's row at (t, y, x) of its grid
 * gets (p + t, p + y, p + x) and the text after it resumes at p + max(t, y, x) + 1.
 * pos: (n, 3), is_embd: (n) 1 at image rows. *next: the position after the prompt. Returns
 * 0, or -EINVAL with one line in err (a run of the wrong length, more or fewer runs than
 * images, positions past 2^31). */
int ns_fwd_mm_positions(const int32_t *tokens, uint32_t n, int32_t image_id,
			const struct ns_fwd_mm_grid *grids, uint32_t n_images, int32_t pos0,
			int32_t *pos, uint8_t *is_embd, int32_t *next, char *err, size_t errlen);

/* Several sequences in one evaluation (nsctl serve's batched decoding): token t of the batch
 * goes to sequence seq[t] (< n_seq, each with its own KV cache) at that sequence's next
 * position; a sequence's tokens keep their order. Every weight is read once per chunk of
 * n_batch tokens for all of them, and each row attends only to its own sequence, so a
 * sequence's logits are bit-identical to evaluating it alone (the kernels reduce each output
 * in an order fixed by the row, not the batch: nscompute/kernels/README.md). Positions
 * advance per sequence. */
struct ns_fwd_batch {
	const int32_t *tokens;    /* (n) */
	const uint32_t *seq;      /* (n) */
	uint32_t n;
	const uint32_t *out_rows; /* (n_out) ascending indices of the tokens whose logits come
				   * back, e.g. each sequence's last */
	uint32_t n_out;
	float *logits;            /* (n_out, n_vocab) */
};

/* Returns 0, -EINVAL (a bad token id, sequence or row list), -ENOSPC (a sequence's context
 * full: nothing evaluated), or a provider error; after a provider error every sequence of the
 * batch must be cut back (ns_fwd_seq_truncate) before it is used again. */
int ns_fwd_eval_batch(struct ns_fwd *f, const struct ns_fwd_batch *b);
uint32_t ns_fwd_n_seq(const struct ns_fwd *f);
/* Host bytes of the KV caches it allocated, every sequence's (0 for a pass whose caches live
 * elsewhere); what nsplan's fixed set counts (nsplan/fixed_mem.h). */
uint64_t ns_fwd_cache_bytes(const struct ns_fwd *f);
/* Positions held by sequence seq (0: ns_fwd_n_past's). */
uint32_t ns_fwd_seq_n_past(const struct ns_fwd *f, uint32_t seq);
/* Keep only the first n_past positions of sequence seq. 0, or -EINVAL (seq out of range,
 * n_past past its end, or a recurrent pass cut anywhere but 0 or its end), or -ERANGE as
 * ns_fwd_truncate (the sequence's sliding-window ring, gpt-oss; nothing changes). */
int ns_fwd_seq_truncate(struct ns_fwd *f, uint32_t seq, uint32_t n_past);

/* Host bytes of the recurrent state (qwen35's conv histories and delta-rule states) and its
 * rollback buffers (opts.n_rollback); 0 for a model without one. nsplan's fixed set counts
 * the same (nsplan/fixed_mem.h, recurrent_bytes). */
uint64_t ns_fwd_state_bytes(const struct ns_fwd *f);

/* Speculative decoding on a recurrent model: mark sequence 0's current position P, so that
 * after up to opts.n_rollback more tokens (evaluated by ns_fwd_eval) ns_fwd_truncate may cut
 * back to any position from P on; the recurrent state is then recomputed from a copy taken
 * here and the tokens' logged projections (no weight read, bit-identical to never having
 * evaluated the cut tokens). A cut, a reset or more tokens than n_rollback drop the mark.
 * 0 (also for a model without a recurrent state: its KV cache is cut anywhere), or -ENOTSUP
 * (no rollback buffers: n_rollback 0; the CUDA pass keeps its copy and log in VRAM,
 * ns_cfwd_opts.n_rollback) with ns_fwd_error. */
int ns_fwd_mark(struct ns_fwd *f);

/* Forget the sequence (n_past = 0). */
void ns_fwd_reset(struct ns_fwd *f);

/* Keep only the first n_past positions (a prefix shared with what comes next). Returns 0,
 * or -EINVAL when n_past is past the sequence's end (or, for a recurrent pass, neither 0
 * nor the end nor at or after a mark: ns_fwd_mark), or -ERANGE when a sliding layer's ring
 * cache (gemma, gpt-oss) has overwritten positions the next token would read: a cut goes back
 * at most R + 1 - window positions from the furthest position written (R the ring's
 * positions, docs/decisions.md); the caller then evaluates the prefix again from 0
 * (ns_fwd_reset). Nothing changes on error. */
int ns_fwd_truncate(struct ns_fwd *f, uint32_t n_past);

uint32_t ns_fwd_n_vocab(const struct ns_fwd *f);
uint32_t ns_fwd_n_past(const struct ns_fwd *f);
uint32_t ns_fwd_n_ctx(const struct ns_fwd *f);
const char *ns_fwd_error(const struct ns_fwd *f);

/* Per-expert selection counters since ns_fwd_new: hits[l * n_expert + e] counts the
 * (token, expert) selections of expert e in layer l, prefill and decode alike. Returns NULL
 * (and 0 in both counts) for a dense model. The array belongs to f. */
const uint64_t *ns_fwd_expert_hits(const struct ns_fwd *f, uint32_t *n_layer,
				   uint32_t *n_expert);

/* --draft mtp (mtp.h): open the model's MTP block (qwen35, qwen35moe; cpu or CUDA pass, the
 * block on the host) beside the pass; from
 * then on it follows sequence 0 through ns_fwd_eval, ns_fwd_truncate and ns_fwd_reset. 0 (also
 * when open already), or -ENOENT (no MTP block), -ENOTSUP (one we do not run), -ENOMEM,
 * -errno, with one line in err. beat (may be NULL) is called with user as the block's weights
 * are read (ns_model_read_tensor_sliced): the caller's heartbeat through a long read. */
int ns_fwd_mtp_open(struct ns_fwd *f, void (*beat)(void *user), void *user, char *err,
		    size_t errlen);
/* Up to k greedy drafts after the pending token id (not yet evaluated, at n_past) into out,
 * chained through the block; logits (k, n_vocab) of each step when not NULL. Returns the
 * count (0: the block has no h for n_past, e.g. after a cut further back than the last call),
 * or a negative errno with ns_fwd_error. */
int ns_fwd_mtp_draft(struct ns_fwd *f, int32_t id, uint32_t k, int32_t *out, float *logits);
/* Tests: the block's logits of every row it follows, (n, n_vocab) per ns_fwd_eval chunk, into
 * logits (NULL: none, the default). */
void ns_fwd_mtp_capture(struct ns_fwd *f, float *logits);
/* Host bytes the open block holds (weights, cache, scratch); 0 when none. */
uint64_t ns_fwd_mtp_bytes(const struct ns_fwd *f);

void ns_fwd_destroy(struct ns_fwd **f);

#endif
