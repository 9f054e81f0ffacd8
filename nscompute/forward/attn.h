/* attn.h - causal attention of a chunk of queries over the KV cache (kvcache.h), split across
 * threads by KV head and block of query tokens, vectorised where the CPU allows.
 *
 * For token t of the chunk (position p = pos0 + t) and query head h (KV head h / (n_head /
 * n_head_kv)), over the positions j0 .. p (j0 = 0, or p + 1 - window on a sliding layer):
 *     s_j = q . k_j * scale,  out = sum_j softmax(s)_j v_j
 * with the head's sink logit in the softmax denominator when sinks are given (gpt-oss).
 *
 * Two algorithms, chosen by the cache's types:
 *   exact (K and V f32): the reference's arithmetic (ns_attn_reference): every q . k_j summed
 *     in double in dimension order, rounded to float and scaled; the row's softmax by
 *     ns_softmax / ns_softmax_sink (ops.h) over all its scores; each output element summed in
 *     double in position order. The AVX-512 path computes the same sums 16 positions (scores)
 *     or 8 dimensions (values) per vector, with FMA on doubles (a product of two floats is
 *     exact in double, so fma rounds exactly as the reference's multiply-then-add), so its
 *     output is bit-identical to the reference's, for any chunking and thread count.
 *   tiled (any f16 or q8_0 in the cache): flash-style, in float: scores of a block of
 *     positions, a running maximum and denominator (online softmax), values accumulated and
 *     rescaled block by block, the sink joining at the end. Error against the reference over
 *     the dequantized cache is float rounding (tests/forward/test_attn.c bounds it).
 * Paths: scalar (portable; any head size) and AVX-512 (head sizes multiples of 16), picked at
 * run time like the kernels (NS_KPATH_*); a forced path the CPU lacks gives -ENOTSUP.
 *
 * Ownership: the workspace (ns_attn_ws_new) belongs to the caller and serves one call at a
 * time; q, out and the cache are borrowed for the call. */
#ifndef NS_ATTN_H
#define NS_ATTN_H

#include <stdbool.h>
#include <stdint.h>

#include "gemv.h"
#include "kvcache.h"
#include "threadpool.h"

struct ns_attn {
	const struct ns_kvcache *kv;
	uint32_t layer;
	const float *q;     /* (n_tok, n_head, dk) queries after RoPE */
	float *out;         /* (n_tok, n_head, dv) */
	uint32_t n_tok;
	uint32_t pos0;      /* position of token 0; the cache holds positions 0 .. pos0 + n_tok - 1 */
	uint32_t n_head;    /* a multiple of kv->n_head_kv */
	uint32_t window;    /* sliding window in positions, 0 = full causal */
	float scale;
	const float *sinks; /* (n_head) sink logits, or NULL */
	bool exact;         /* the exact algorithm on an f16 / q8_0 cache too (scalar, over the
			     * dequantized elements): what the CUDA pass's emulation computes,
			     * for tests (ns_fwd_opts.attn_exact) */
};

struct ns_attn_ws;

/* Workspace slots at most: a pool with more threads shares them (a task waits for a free
 * slot), so the scratch stays min(threads, NS_ATTN_MAX_SLOTS) tiles whatever --threads says;
 * nsplan counts this many (nsplan/fixed_mem.h NSPLAN_ATTN_THREADS). */
#define NS_ATTN_MAX_SLOTS 64

/* Scratch for min(n_threads, NS_ATTN_MAX_SLOTS) concurrent tasks of a cache of these
 * dimensions. NULL when out of memory or the sizes overflow. */
struct ns_attn_ws *ns_attn_ws_new(int n_threads, uint32_t n_head, uint32_t n_head_kv,
				  uint32_t dk, uint32_t dv, uint32_t n_ctx);
void ns_attn_ws_destroy(struct ns_attn_ws **ws);

/* Attention of a on pool p (may be NULL) through path (NS_KPATH_AUTO: the best this CPU has;
 * AVX2 runs the scalar code). Returns 0, -ENOTSUP for a path this CPU lacks, -EINVAL for
 * arguments that do not fit the cache or the workspace, -ERANGE when the cache is a ring
 * (kvcache.h) that no longer holds a position the chunk reads (its `lo` is past
 * pos0 + 1 - window, or the layer has no window). A ring gives the whole cache's result bit
 * for bit: only the addressing differs. */
int ns_attn_run(struct ns_pool *p, struct ns_attn_ws *ws, enum ns_kpath path,
		const struct ns_attn *a);

/* The reference, single-threaded: the forward pass's attention as it was written first
 * (double sums, ns_softmax), over the cache's elements as ns_kvcache_k_at / _v_at give them. */
void ns_attn_reference(const struct ns_attn *a, float *att_scratch /* (n_ctx) */);

#endif
