/* forward_impl.h - what forward.c (the dispatcher) and each architecture file share.
 * Internal to nsforward. */
#ifndef NS_FORWARD_IMPL_H
#define NS_FORWARD_IMPL_H

#include "arch.h"
#include "forward.h"
#include "held.h"
#include "kvcache.h"
#include "ns_util.h"

struct ns_llama;

struct ns_fwd {
	/* Evaluate one chunk of n <= n_batch tokens, row t at row_kv[t] / row_pos[t] (tokens
	 * already checked against n_tok_rows); write logits as ns_fwd_eval says, or the rows
	 * out_rows names; do not advance n_past. */
	int (*eval_chunk)(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
			  bool all);
	/* May sequence seq be cut back to keep positions (keep 0: a reset, always)? 0, or
	 * -ERANGE with f->err when a ring cache no longer holds what keep needs; NULL: any
	 * cut. Called before n_past changes. */
	int (*arch_cut)(struct ns_fwd *f, uint32_t seq, uint32_t keep);
	/* Recurrent passes: set (on) or drop (!on) the rollback mark at sequence 0's current
	 * position (ns_fwd_mark); NULL: no rollback. 0, or a negative errno. */
	int (*arch_mark)(struct ns_fwd *f, bool on);
	/* A pass on a device (the CUDA pass): ns_fwd_matmul from host-side code (the MTP
	 * block's head, mtp.h) runs there, over the weights the device holds; NULL: the
	 * provider's product on the host. Returns as ns_fwd_matmul. */
	int (*arch_matmul)(struct ns_fwd *f, uint32_t tensor, uint64_t row0, uint64_t row_end,
			   const float *x, uint64_t n_tok, float *y, uint64_t ldy);
	/* Host bytes of the recurrent state and its rollback buffers (0: none) */
	uint64_t (*arch_state_bytes)(const struct ns_fwd *f);
	void (*arch_destroy)(void *arch);
	void *arch;              /* the architecture's state, owned */
	struct ns_arch_model *am; /* the model bound to the architecture table, owned */
	struct ns_held *held;    /* its HELD tensors, owned (loaded by the builder) */
	struct ns_weights *w;    /* borrowed */
	struct ns_kvcache *kv;   /* owned: sequence 0's cache (ns_fwd_eval's) */
	struct ns_kvcache **seq_kv; /* (n_seq) every sequence's cache, seq_kv[0] == kv; owned
				     * (the others), NULL while n_seq is 1 */
	uint32_t n_seq;
	/* The chunk eval_chunk evaluates, row by row (forward.c fills them for every chunk):
	 * row t appends to the cache row_kv[t] at position row_pos[t]; with n_out_rows > 0 the
	 * logits written are those of rows out_rows[0..n_out_rows) (ascending), else as `all`
	 * says. */
	struct ns_kvcache **row_kv;  /* (n_batch) */
	uint32_t *row_pos;           /* (n_batch) */
	const uint32_t *out_rows;
	uint32_t n_out_rows;
	bool rows_ok;                /* eval_chunk honours row_kv, row_pos and out_rows (the
				      * cpu pass); else a chunk is one sequence's consecutive
				      * positions and `all` says which logits */
	bool recurrent;              /* recurrent layers (qwen35): their state is one sequence's
				      * and goes back only to 0 or, after ns_fwd_mark, into the
				      * marked tokens; one sequence */
	/* rollback of a recurrent sequence 0 (ns_fwd_mark): up to rb_cap tokens after the
	 * mark at rb_pos can be cut back while rb_on */
	uint32_t rb_cap, rb_pos;
	bool rb_on;
	/* ns_fwd_eval_mm: the call's multimodal input while it runs (row t of a chunk is row
	 * mm_row0 + t of the call's mm_n), else NULL; mm_ok when the builder reads it */
	const struct ns_fwd_mm *mm;
	uint32_t mm_row0, mm_n;
	bool mm_ok;
	int32_t rope_delta;      /* sequence 0: M-RoPE position of its next text row minus its
				  * cache position (0 without images) */
	uint32_t mm_end;         /* sequence 0: cache positions through its last image call */
	uint32_t n_ctx;
	uint32_t n_batch;
	uint32_t n_vocab;        /* logits per position */
	int kv_k, kv_v;          /* KV cache types (enum ns_kv_type), from the options */
	bool attn_exact;         /* ns_fwd_opts.attn_exact */
	uint64_t n_tok_rows;     /* valid token ids: [0, n_tok_rows) */
	ns_fwd_route_fn on_route; /* from the options, may be NULL */
	void *route_user;
	bool moe_predict;        /* from the options: report predicted routes (moe.h) */
	uint32_t n_moe_layer;    /* MoE only: layers and experts per layer of expert_hits */
	uint32_t n_expert;
	uint64_t *expert_hits;   /* (n_moe_layer, n_expert) selection counts, owned; NULL dense */
	uint64_t arch_cache_bytes; /* caches a builder keeps itself (gemma's per layer) */
	struct ns_mtp *mtp;      /* --draft mtp: the MTP block following sequence 0 (mtp.h),
				  * owned; NULL when not opened */
	const struct ns_llama *llama; /* the llama builder's model description (llama.h) of a
				       * pass built on it (the cpu pass's arch, the CUDA pass's
				       * own copy), else NULL: what the MTP block reads */
	bool mtp_h;              /* eval_chunk hands each chunk's h rows to mtp (llama.c,
				  * the CUDA pass's cfwd_eval.c) */
	char err[NS_ERR_LEN];
};

/* The start every backend's constructor shares: n_ctx > 0, the model bound to the table by
 * an architecture with a builder in `backend` (NS_BACKEND_*; else -EINVAL with the line that
 * names it), and *out allocated with its context, batch (0 = 512, at most n_ctx), weights and
 * routing set; the rest is the caller's (ns_fwd_destroy frees it on failure). */
int ns_fwd_alloc(const struct ns_model *m, struct ns_weights *w, uint32_t n_ctx,
		 uint32_t n_batch, ns_fwd_route_fn on_route, void *route_user, unsigned backend,
		 struct ns_fwd **out, char *err, size_t errlen);

/* Drop sequence 0's rollback mark, if any (forward.c). */
void ns_fwd_unmark(struct ns_fwd *f);

/* batch.c: caches for sequences 1 .. n_seq - 1 shaped as f->kv (set up by the
 * architecture). Returns 0, or -ENOMEM / -EINVAL (a pass without a host cache) with a line. */
int ns_fwd_seqs_init(struct ns_fwd *f, uint32_t n_seq, char *err, size_t errlen);

/* A builder's provider calls with the provider's error copied into f->err ("forward: ...").
 * y (n_tok, ldy) = x (n_tok, cols) times rows [row0, row_end) of a weight; rows: the rows
 * ids[0..n) of a row-read tensor, dequantized into y. Return as ns_weights_matmul /
 * ns_weights_get_rows. */
int ns_fwd_matmul(struct ns_fwd *f, uint32_t tensor, uint64_t row0, uint64_t row_end,
		  const float *x, uint64_t n_tok, float *y, uint64_t ldy);
int ns_fwd_rows(struct ns_fwd *f, uint32_t tensor, const int64_t *ids, uint64_t n, float *y);

/* llama.c: the NS_BUILD_LLAMA architectures (llama, qwen3, qwen3moe, gpt-oss; the MoE ones
 * through moe.h). Fills f->eval_chunk, arch, arch_destroy, held, kv, n_vocab, n_tok_rows
 * (MoE: n_moe_layer, n_expert, expert_hits). */
int ns_llama_init(struct ns_fwd *f, uint32_t ffn_rows, char *err, size_t errlen);

/* gemma.c: the NS_BUILD_GEMMA architectures (gemma3, gemma4). Fills f->eval_chunk, arch,
 * arch_destroy, held, kv (n_past only: each layer owns its cache), n_vocab, n_tok_rows. */
int ns_gemma_init(struct ns_fwd *f, uint32_t ffn_rows, char *err, size_t errlen);

#endif
