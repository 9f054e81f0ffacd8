/* mtp.h - Qwen3.5's multi-token-prediction (MTP) block run as a drafter beside the cpu pass
 * or the CUDA pass (--draft mtp; the block runs on the host either way: the CUDA pass
 * downloads each chunk's h rows for it, cfwd_eval.c), as llama.cpp d32676d runs it (src/models/qwen35.cpp graph_mtp, driven by
 * common/speculative.cpp's draft-mtp).
 *
 * The block at position p takes token x_p and the trunk's h of position p - 1 (its hidden
 * state after output_norm, llama.cpp's h_nextn; zeros at p = 0) and predicts x_{p + 1}:
 *     x = eh_proj [rmsnorm(embd(x_p)) * enorm | rmsnorm(h) * hnorm]
 *     x += gated full attention over the block's own KV cache (attn_norm, q/k norms, the
 *          trunk's M-RoPE), x += SwiGLU FFN (post_attention_norm)
 *     h' = rmsnorm(x) * shared_head_norm (output_norm when absent), logits = h' head^T
 * (embedding and head: nextn.embed_tokens / shared_head_head when the file has them, else
 * the trunk's token_embd / output, through the pass's weight provider).
 *
 * Its cache follows the trunk's sequence: after every chunk the trunk evaluates (ns_fwd_eval)
 * the block runs over the chunk's positions, pairing each token with the previous position's
 * h (the last chunk's rows are kept for that), after cutting its cache back to where the
 * chunk starts: drafts it wrote past the trunk's end go. Drafting (ns_mtp_draft) chains k
 * steps from the trunk's end: step 0 the pending token with the trunk's last h, step i the
 * previous draft with the block's own h'. ns_fwd_truncate / ns_fwd_reset cut it with the
 * trunk. A lost h (a cut further back than the last chunk, an image call) costs acceptance,
 * never output: drafts are verified by the trunk.
 *
 * Weights: the block's matrices are read once from the file into RAM (the quantized bytes,
 * multiplied by the fused kernels) and its vectors dequantized; nsplan counts them in the
 * fixed set (docs/decisions.md: a block read k times per pass would cost k times its bytes
 * streamed). Dense qwen35 only: qwen35moe's MoE block is refused. */
#ifndef NS_MTP_H
#define NS_MTP_H

#include <stdint.h>

#include "forward.h"

struct ns_mtp;

/* The block of f's model (a pass of qwen35 / qwen35moe with nextn_predict_layers 1 that hands
 * it its h rows: the cpu pass, the CUDA pass): its weights into RAM, its cache of f's n_ctx
 * positions. 0, or -ENOENT (no MTP block), -ENOTSUP (another architecture, or a pass
 * that does not feed it), -ENOMEM, -EIO, with one
 * line in err. beat(user), when not NULL, as the weights are read (ns_fwd_mtp_open). */
int ns_mtp_new(struct ns_fwd *f, void (*beat)(void *user), void *user, struct ns_mtp **out,
	       char *err, size_t errlen);
void ns_mtp_free(struct ns_mtp **m);

/* The trunk evaluated tokens (n) at positions pos0.. with hidden rows h (n, n_embd, after
 * output_norm): the block's cache follows (forward's chunk hook). 0 or a negative errno. */
int ns_mtp_follow(struct ns_fwd *f, struct ns_mtp *m, const int32_t *tokens, const float *h,
		  uint32_t n, uint32_t pos0);

/* The trunk was cut back to keep positions. */
void ns_mtp_cut(struct ns_mtp *m, uint32_t keep);

/* Up to k greedy drafts after the pending token id (at the trunk's end) into out; logits
 * (k, n_vocab) of each step when not NULL. Returns the count (0: no h for the trunk's end,
 * or no room), or a negative errno with f's error. */
int ns_mtp_draft(struct ns_fwd *f, struct ns_mtp *m, int32_t id, uint32_t k, int32_t *out,
		 float *logits);

/* Tests: where ns_mtp_follow writes the block's logits of every row it runs ((n, n_vocab)
 * per call, rows as the call's), or NULL (the default: follow computes no head). */
void ns_mtp_capture(struct ns_mtp *m, float *logits);

/* Host bytes it holds: resident weights, cache, scratch. */
uint64_t ns_mtp_bytes(const struct ns_mtp *m);

#endif
