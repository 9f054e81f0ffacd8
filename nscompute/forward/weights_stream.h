/* weights_stream.h - weight provider that streams every tensor through nsio.
 *
 * matmul over a row window [row0, row_end): the window is streamed with ns_stream_linear in
 * blocks of at most block_rows whole rows (lookahead + 1 blocks in flight, shrunk to fit the
 * arena), and each block is multiplied by the fused kernel (ns_gemm_ex, NS_ACT_F32) straight
 * from the arena bytes, writing the block's rows of y. Every output row is computed inside one
 * block by a kernel whose reduction order does not depend on the window (gemv.h), so results
 * are bit-identical to weights_fused and across block sizes and budgets.
 *
 * get_rows: each run of consecutive rows is streamed the same way and dequantized with
 * ns_dequant_rows (embedding lookups: one row per token; norm vectors and other 1-D tensors are
 * read once, when the forward pass loads them at ns_fwd_new).
 *
 * The RAM tier (opts.session): once nsio has published its RAM segment (shm/ram_seg.h;
 * looked for at each call until a first block has come from nsio, which nsio serves only
 * after loading it), the resident row prefix of a window is multiplied (or dequantized) in
 * place from the read-only mapping by the same kernels, and only the rest is streamed: a
 * window may be split, results stay bit-identical. Tensors are matched by name between the model and nsio's tensor table.
 *
 * Ownership: the client is borrowed (one thread: the forward pass's) and must outlive the
 * provider; the model likewise. The provider owns its thread pool. */
#ifndef NS_WEIGHTS_STREAM_H
#define NS_WEIGHTS_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weights.h"

struct ns_client;

struct ns_weights_stream_opts {
	int n_threads;       /* kernel threads including the caller; <= 0: 1 */
	uint64_t block_rows; /* rows per block; 0 = whole window (shrunk to fit the arena) */
	uint32_t lookahead;  /* blocks in flight after the current one */
	const char *session; /* multiply rows nsio holds in its RAM tier in place (the segment
			      * of shm/ram_seg.h, mapped read-only); NULL: stream all */
	int act;             /* enum ns_act of the kernels (gemv.h): 0 = NS_ACT_F32, exact
			      * weights; NS_ACT_Q8, activations quantized per 32 as llama.cpp */
	/* Told of the RAM segment's read-only mapping: once with mapped = true when the
	 * provider starts using it (from inside a matmul / get_rows / visit call), once with
	 * mapped = false just before it is unmapped (at destroy). The GPU backend page-locks it
	 * there. NULL: nobody is told. */
	void (*on_ram_map)(void *ctx, const void *base, size_t bytes, bool mapped);
	void *on_ram_map_ctx;
	/* Told of every product window before its rows are read (tensor: the model's index):
	 * the pass's place, for progress reports. NULL: nobody is told. */
	void (*on_window)(void *ctx, uint32_t tensor);
	void *on_window_ctx;
};

/* Counters since creation. */
struct ns_weights_stream_stats {
	uint64_t blocks;     /* blocks multiplied or dequantized */
	uint64_t bytes;      /* weight bytes those blocks carried */
	uint64_t wait_ns;    /* time in streamed calls outside the matmul kernels (waiting
			      * for blocks, dequantizing embedding rows) */
};

int ns_weights_stream_new(const struct ns_model *m, struct ns_client *c,
			  const struct ns_weights_stream_opts *opts, struct ns_weights **out,
			  char *err, size_t errlen);

/* Stats of a provider made by ns_weights_stream_new (zeros for another provider). */
void ns_weights_stream_stats(const struct ns_weights *w, struct ns_weights_stream_stats *out);

#endif
