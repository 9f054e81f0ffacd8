/* nscuda.h - the CUDA backend's kernels and device plumbing, as a C API.
 *
 * Built only when meson finds nvcc (have_cuda). Every function is safe to call on a machine
 * without a GPU or driver: ns_cuda_device_count() returns 0 there and the rest return
 * -ENODEV. Errors are negative errno values; functions taking (err, errlen) also write one line
 * saying what failed, with figures.
 *
 * Pointers named dev_* are device memory (from a struct ns_vram or ns_cuda_malloc). Launches
 * are asynchronous on the given stream (NULL = the legacy default stream); a returned 0 means
 * the launch was accepted, not that the kernel finished: synchronize before reading results.
 *
 * Weight windows use the GGUF layout of nscompute/kernels/dequant.h: n_rows whole rows of
 * n_cols elements, row r at dev_w + r * row_bytes(type, n_cols). Supported types: F32, F16,
 * BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4 (others -ENOTSUP).
 * dev_w must be aligned to min(16, lowest set bit of the block size): any row window of a
 * tensor that starts 16-byte aligned is (else -EINVAL). Activations (dev_x) are 16-byte
 * aligned. Rows of the float types (F32, F16, BF16) may have any length; when n_cols is not
 * a multiple of 32 (quantized types: -EINVAL), dev_w needs only its element's alignment,
 * dev_x 4 bytes, and the prefill GEMM takes any ldx.
 *
 * Determinism: every output element of the GEMV and the prefill GEMM is reduced in an order that
 * depends only on (type, n_cols) and its own row and token, never on n_rows, the row's place in
 * the window, or n_tok; attention depends only on the query's own context length. */
#ifndef NS_CUDA_H
#define NS_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cudaStream_t and cudaEvent_t without including the CUDA headers. */
typedef struct CUstream_st *ns_cuda_stream_t;
typedef struct CUevent_st *ns_cuda_event_t;

/* ------------------------------------------------------------ device ------------------- */

/* Number of usable devices; 0 without a GPU, without a driver or with a too old driver. */
int ns_cuda_device_count(void);

struct ns_cuda_devinfo {
	char name[256];
	int cc_major, cc_minor;
	int n_sm;
	uint64_t total_bytes;     /* device memory */
	uint64_t free_bytes;      /* free at the time of the call */
	uint64_t l2_bytes;        /* L2 cache */
	uint64_t smem_optin;      /* shared memory a block can opt in to */
	int mem_clock_khz;        /* 0 when the runtime does not say */
	int mem_bus_bits;
};

/* Makes dev current for this thread and creates its context. */
int ns_cuda_init(int dev, char *err, size_t errlen);
int ns_cuda_device_info(int dev, struct ns_cuda_devinfo *out, char *err, size_t errlen);

/* Plain allocations and copies (tests, benchmarks; the backend uses struct ns_vram).
 * ns_cuda_h2d and ns_cuda_d2h are cudaMemcpy, on the legacy default stream. ns_cuda_h2d
 * from pageable memory returns once the bytes are staged; they reach the device in legacy-
 * stream order, which work on the streams of ns_cuda_stream_new (non-blocking) does not
 * wait for. Before such work reads them: ns_cuda_sync(), or upload on its stream with
 * ns_cuda_copy_h2d_async instead. ns_cuda_d2h waits only for the legacy stream: sync the
 * stream that produced the bytes first. */
int ns_cuda_malloc(void **dev_p, size_t bytes, char *err, size_t errlen);
void ns_cuda_free(void *dev_p);
int ns_cuda_h2d(void *dev_dst, const void *src, size_t bytes);
int ns_cuda_d2h(void *dst, const void *dev_src, size_t bytes);
int ns_cuda_d2d_async(void *dev_dst, const void *dev_src, size_t bytes, ns_cuda_stream_t s);
int ns_cuda_memset(void *dev_p, int byte, size_t bytes);
/* cudaMemsetAsync on stream s (ordered with its launches: a recurrent state's reset). */
int ns_cuda_memset_async(void *dev_p, int byte, size_t bytes, ns_cuda_stream_t s);
int ns_cuda_sync(void);                  /* whole device; reports asynchronous kernel errors */
int ns_cuda_stream_new(ns_cuda_stream_t *out);
void ns_cuda_stream_destroy(ns_cuda_stream_t *s);
int ns_cuda_stream_sync(ns_cuda_stream_t s);
/* Last CUDA error of this thread as text (after a -EIO). */
const char *ns_cuda_last_error(void);

/* ------------------------------------------------------------ VRAM --------------------- */

/* One cudaMalloc of the whole budget, sub-allocated first fit in 256-byte granules.
 * budget = 0 takes the free memory minus reserve; otherwise exactly budget bytes are taken
 * (refused with figures when budget + reserve exceeds the free memory).
 * Ownership: the arena owns the device memory; ns_vram_destroy(&v) frees it (allocations die
 * with it). Not thread-safe: one owner thread. */
struct ns_vram;

int ns_vram_new(uint64_t budget, uint64_t reserve, struct ns_vram **out, char *err,
		size_t errlen);
void ns_vram_destroy(struct ns_vram **v);
/* -ENOMEM with "need X, largest free Y of Z free of budget B" in err; never aborts. */
int ns_vram_alloc(struct ns_vram *v, uint64_t bytes, void **dev_p, char *err, size_t errlen);
/* p must come from ns_vram_alloc of v (else -EINVAL); NULL is ignored. */
int ns_vram_release(struct ns_vram *v, void *dev_p);
uint64_t ns_vram_budget(const struct ns_vram *v);
uint64_t ns_vram_used(const struct ns_vram *v);
uint64_t ns_vram_largest_free(const struct ns_vram *v);

/* ------------------------------------------------------------ transfers ---------------- */

/* Page-locks [p, p + bytes) in place (cudaHostRegister) so async copies from it overlap with
 * compute; ns_cuda_host_unregister(p) undoes it. -EIO with the reason in err. */
int ns_cuda_host_register(void *p, size_t bytes, char *err, size_t errlen);
int ns_cuda_host_unregister(void *p);
/* The same for memory the process may only read (a read-only shared mapping such as nsio's
 * arena): cudaHostRegisterReadOnly. Fails (-EIO, reason in err) where the device or platform
 * does not support it; undo with ns_cuda_host_unregister. */
int ns_cuda_host_register_ro(const void *p, size_t bytes, char *err, size_t errlen);
/* 1 when host address p lies in page-locked memory (registered or allocated pinned: copies
 * from it go by DMA), 0 when it is pageable (the driver bounces it through a staging buffer,
 * several times slower), negative errno on failure. */
int ns_cuda_host_pinned(const void *p);

int ns_cuda_event_new(ns_cuda_event_t *out);
void ns_cuda_event_destroy(ns_cuda_event_t *e);
/* Copy host -> device on stream s, then record done on it (when not NULL). From pageable
 * memory the bytes are staged before the call returns (src may be reused at once); from
 * page-locked memory they are read when the copy runs (src must stay until done). */
int ns_cuda_copy_h2d_async(void *dev_dst, const void *src, size_t bytes, ns_cuda_stream_t s,
			   ns_cuda_event_t done);
/* Make stream s (a compute stream) wait for event e before its next work. */
int ns_cuda_stream_wait(ns_cuda_stream_t s, ns_cuda_event_t e);
int ns_cuda_event_record(ns_cuda_event_t e, ns_cuda_stream_t s);
int ns_cuda_event_sync(ns_cuda_event_t e);
/* 1 when e has completed, 0 when not yet, negative on error. */
int ns_cuda_event_done(ns_cuda_event_t e);
/* Milliseconds between two recorded, completed events. */
int ns_cuda_event_ms(ns_cuda_event_t a, ns_cuda_event_t b, float *ms);

/* ------------------------------------------------------------ kernels ------------------ */

/* true when the kernels can compute type. */
bool ns_cuda_type_supported(uint32_t type);

/* dev_y: (n_rows, n_cols) float32, bit-identical to ns_dequant_rows. */
int ns_cuda_dequant(uint32_t type, const void *dev_w, uint64_t n_cols, uint64_t n_rows,
		    float *dev_y, ns_cuda_stream_t s);

/* Decode GEMV, fused dequantization: dev_y[r] = sum_k W[r,k] * dev_x[k].
 *   dev_x: (n_cols) float32, dev_y: (n_rows) float32.
 * One warp per two rows, weights read once, x staged in shared memory, f32 accumulation:
 *   |y - exact| <= (n_cols/32 + 64) * 2^-23 * sum_k |W[r,k] x[k]|   (tests/cuda). */
int ns_cuda_gemv(uint32_t type, const void *dev_w, uint64_t n_cols, uint64_t n_rows,
		 const float *dev_x, float *dev_y, ns_cuda_stream_t s);

/* Decode GEMV with int8 activations (`--act q8`, the CPU's NS_ACT_Q8 of kernels/gemv.h):
 * each block quantizes x per 32 exactly as ns_kquant_x_scalar (dx = max|x| / 127,
 * xq = round-to-nearest-even(x * (1 / dx)), clamped to [-127, 127]) into shared memory, the
 * weights' integers are multiplied with xq in exact integer arithmetic (dp4a), and each group's
 * integer sum is scaled in f32: y = sum_g d_g dx_g I_g (+ m_g dx_g sum xq_g). Quantized types
 * only: F32/F16/BF16 are -ENOTSUP (they take ns_cuda_gemv). Rows whose x does not fit the
 * block's shared memory are -E2BIG (the caller uses ns_cuda_gemv). Same window contract as
 * ns_cuda_gemv (alignment, -EINVAL); every row's operation order depends only on (type,
 * n_cols), so rows are bit-identical in any window. Error vs the exact product, with
 * E = sum_b (dx_b / 2) sum_{k in b} |W[r,k]|:
 *   |y - exact| <= E + (n_cols/16 + 320) * 2^-24 * (sum_k |W[r,k] x[k]| + E)   (tests/cuda). */
int ns_cuda_gemv_q8(uint32_t type, const void *dev_w, uint64_t n_cols, uint64_t n_rows,
		    const float *dev_x, float *dev_y, ns_cuda_stream_t s);

/* Prefill GEMM on tensor cores: dev_y[t * ldy + r] = sum_k W[r,k] * dev_x[t * ldx + k].
 *   dev_x: (n_tok, ldx) float32, dev_y: (n_tok, ldy) float32, ldx >= n_cols, ldy >= n_rows.
 * Tiles of W are dequantized into shared memory as f16, x is rounded to f16, products are
 * accumulated in f32 (error bound in nscompute/cuda/README.md). */
int ns_cuda_gemm_prefill(uint32_t type, const void *dev_w, uint64_t n_cols, uint64_t n_rows,
			 const float *dev_x, uint64_t ldx, uint64_t n_tok, float *dev_y,
			 uint64_t ldy, ns_cuda_stream_t s);

/* y = x / sqrt(mean(x^2) + eps) * w per row, as ns_rmsnorm (sum of squares in double).
 *   dev_x, dev_y: (n_tok, n); dev_w: (n) or NULL. y may equal x. */
int ns_cuda_rmsnorm(float *dev_y, const float *dev_x, const float *dev_w, uint32_t n,
		    uint32_t n_tok, float eps, ns_cuda_stream_t s);
/* The residual add and the next RMSNorm in one launch: dev_x += dev_res, then dev_y =
 * rmsnorm(dev_x) * dev_w, all (n_tok, n); the same bits as ns_cuda_add followed by
 * ns_cuda_rmsnorm. dev_y, dev_x and dev_res must be distinct (-EINVAL). */
int ns_cuda_add_rmsnorm(float *dev_y, float *dev_x, const float *dev_res, const float *dev_w,
			uint32_t n, uint32_t n_tok, float eps, ns_cuda_stream_t s);

/* RoPE parameters, as struct ns_rope (nscompute/forward/rope.h); freq_factors is device
 * memory (n_dims/2) or NULL. */
struct ns_cuda_rope {
	uint32_t n_dims;
	bool neox;
	float freq_base;
	float freq_scale;
	const float *dev_freq_factors;
	float ext_factor;
	float attn_factor;
	float corr_dims[2];
};

/* Rotate dev_x: (n_tok, n_heads, head_dim) in place; token t is at position pos0 + t. */
int ns_cuda_rope(const struct ns_cuda_rope *r, float *dev_x, uint32_t n_tok, uint32_t n_heads,
		 uint32_t head_dim, int64_t pos0, ns_cuda_stream_t s);

/* Interleaved M-RoPE (Qwen3-VL / Qwen3.5 image prompts; the CPU's ns_rope_angles_mrope): token t
 * of dev_x (n_tok, n_heads, head_dim) turns with its own three positions dev_pos[3 t + 0..2]
 * (temporal, height, width; int32 device memory): pair i with the height position when
 * i % 3 == 1 and i < 3 * sections[1], with the width position when i % 3 == 2 and
 * i < 3 * sections[2], else with the temporal one (sections: host memory, [0] and [3]
 * unused). Three equal positions p give ns_cuda_rope's bits at p. -EINVAL as ns_cuda_rope, or
 * for a NULL dev_pos or sections. */
int ns_cuda_rope_mrope(const struct ns_cuda_rope *r, float *dev_x, uint32_t n_tok,
		       uint32_t n_heads, uint32_t head_dim, const int32_t *dev_pos,
		       const uint32_t sections[4], ns_cuda_stream_t s);

/* dev_g = act(dev_g, dev_u), (n) each: SwiGLU silu(g) * u, or with oai gpt-oss's
 * clamp(g, max 7) * sigmoid(1.702 g) * (clamp(u, -7, 7) + 1). */
int ns_cuda_swiglu(float *dev_g, const float *dev_u, uint64_t n, bool oai, ns_cuda_stream_t s);

/* Row-wise softmax of dev_x: (n_rows, n) in place (exp in float, sum in double). */
int ns_cuda_softmax(float *dev_x, uint32_t n, uint32_t n_rows, ns_cuda_stream_t s);

/* MoE routing of n_tok tokens, as nscompute/forward/moe.c s_route:
 *   dev_logits: (n_tok, n_expert) (overwritten with scores), dev_sel: (n_tok, k) int32,
 *   dev_w: (n_tok, k). softmax_first: softmax over all, then top-k (else top-k then softmax of
 *   the k); norm_w: divide by the k-sum; then times w_scale. Ties keep the lowest id.
 *   n_expert <= 1024, k <= 32. */
int ns_cuda_router_topk(float *dev_logits, uint32_t n_tok, uint32_t n_expert, uint32_t k,
			bool softmax_first, bool norm_w, float w_scale, int32_t *dev_sel,
			float *dev_w, ns_cuda_stream_t s);

/* Greedy sampling: dev_out[t] = index of the largest of dev_x[t * n ...] (lowest on ties;
 * NaN never wins). dev_x: (n_tok, n). */
int ns_cuda_argmax(const float *dev_x, uint32_t n, uint32_t n_tok, int32_t *dev_out,
		   ns_cuda_stream_t s);

/* Attention over a float32 KV cache, causal, optional sliding window and sinks.
 * Query t (0 <= t < n_tok) sits at position pos0 + t and attends to positions j0..pos0+t,
 * j0 = 0 or pos0 + t + 1 - window when window > 0 and the context is longer.
 *   dev_q:   (n_tok, n_head, dk)
 *   dev_k:   (>= pos0 + n_tok, ldk) rows = positions, head hk at column hk * dk
 *   dev_v:   (>= pos0 + n_tok, ldv), head hk at column hk * dv
 *   dev_sinks: (n_head) sink logits or NULL
 *   dev_out: (n_tok, n_head, dv)
 *   dev_ws:  workspace of ns_cuda_attn_ws_bytes(n_tok, n_head, pos0 + n_tok, dv) bytes
 * Head h reads KV head h / (n_head / n_head_kv). The context is split in chunks of 256
 * positions counted from j0, each reduced by one block; the chunks are merged in order. So a
 * query's result depends only on its own context, whether computed in decode or prefill.
 * dk, dv <= 512. */
uint64_t ns_cuda_attn_ws_bytes(uint32_t n_tok, uint32_t n_head, uint64_t n_ctx, uint32_t dv);
int ns_cuda_attention(const float *dev_q, const float *dev_k, uint64_t ldk, const float *dev_v,
		      uint64_t ldv, uint32_t n_tok, uint64_t pos0, uint32_t n_head,
		      uint32_t n_head_kv, uint32_t dk, uint32_t dv, float scale, uint32_t window,
		      const float *dev_sinks, float *dev_out, void *dev_ws, ns_cuda_stream_t s);

/* ------------------------------------------------------------ typed KV cache ----------- */
/* f16 and q8_0 KV caches (the CPU's -ctk / -ctv, nscompute/forward/kvcache.h numbering).
 * A layer's cache is rows of positions, each row the n_head_kv heads of one position side by
 * side: float32, half (rounded to nearest even), or ggml's Q8_0 blocks (a half scale
 * d = max|x| / 127, then round(x / d) as int8, per 32 elements; the head sizes must be
 * multiples of 32). The f32 cache keeps ns_cuda_attention and its stores. */
#define NS_CUDA_KV_F32 0u
#define NS_CUDA_KV_F16 1u
#define NS_CUDA_KV_Q8_0 2u

struct ns_cuda_kv {
	void *dev_k, *dev_v;   /* (>= n positions, k_row / v_row bytes) */
	uint32_t tk, tv;       /* NS_CUDA_KV_* */
	uint64_t k_row, v_row; /* bytes per row: ns_cuda_kv_row_bytes(type, n_head_kv * dim) */
};

/* Bytes of a row of n elements of type t (q8_0: n / 32 blocks of 34 bytes); 0 for a type we
 * do not know or a q8_0 row that is not whole blocks. */
static inline uint64_t ns_cuda_kv_row_bytes(uint32_t t, uint64_t n)
{
	return t == NS_CUDA_KV_F32 ? 4 * n : t == NS_CUDA_KV_F16 ? 2 * n :
	       t == NS_CUDA_KV_Q8_0 && n % 32 == 0 ? n / 32 * 34 : 0;
}

/* Store n_tok rows: dev_k (n_tok, nk) and dev_v (n_tok, nv) floats into the cache rows of
 * positions pos0 .. pos0 + n_tok - 1, or (n_tok 1, graphs) of position *dev_pos when dev_pos
 * is not NULL. Returns 0, -EINVAL for sizes that do not fit the rows or types. */
int ns_cuda_kv_store(const struct ns_cuda_kv *kv, const float *dev_k, uint64_t nk,
		     const float *dev_v, uint64_t nv, uint32_t n_tok, uint64_t pos0,
		     const int64_t *dev_pos, ns_cuda_stream_t s);

/* ns_cuda_attention over a typed cache (kv), the same chunks, merge and order; elements are
 * widened to float where they are read. dev_pos not NULL (n_tok 1, graphs): the query sits
 * at *dev_pos < max_ctx, the workspace sized for max_ctx; else at pos0 + t. */
int ns_cuda_attention_kv(const float *dev_q, const struct ns_cuda_kv *kv, uint32_t n_tok,
			 uint64_t pos0, const int64_t *dev_pos, uint64_t max_ctx,
			 uint32_t n_head, uint32_t n_head_kv, uint32_t dk, uint32_t dv,
			 float scale, uint32_t window, const float *dev_sinks, float *dev_out,
			 void *dev_ws, ns_cuda_stream_t s);

/* ------------------------------------------------------------ forward-pass glue --------- */
/* Small element-wise kernels the forward pass needs between the big ones (glue.cu). Row
 * counts (n_tok, m) are at most 65535 (-EINVAL beyond). */

/* dev_y[i] += dev_x[i] for i < n. */
int ns_cuda_add(float *dev_y, const float *dev_x, uint64_t n, ns_cuda_stream_t s);

/* dev_y[t * ld + i] += dev_b[i] for t < n_tok, i < n (a bias on every token's row). */
int ns_cuda_add_rows(float *dev_y, uint64_t ld, const float *dev_b, uint64_t n, uint32_t n_tok,
		     ns_cuda_stream_t s);

/* dev_y[t * ld + i] = (dev_y[t * ld + i] * scale) * dev_w[i] for t < n_tok, i < n, rounded
 * after each product (gemma4's router input: rmsnorm(x) / sqrt(n_embd) * ffn_gate_inp.scale,
 * in nscompute/forward/moe.c's order). */
int ns_cuda_scale_rows(float *dev_y, uint64_t ld, float scale, const float *dev_w, uint64_t n,
		       uint32_t n_tok, ns_cuda_stream_t s);

/* dev_dst[i * n + j] = dev_src[dev_idx[i] * n + j] for i < m, j < n (MoE: the tokens routed
 * to one expert). dev_idx: (m) int32 device. */
int ns_cuda_gather_rows(float *dev_dst, const float *dev_src, const int32_t *dev_idx, uint32_t m,
			uint64_t n, ns_cuda_stream_t s);

/* dev_ys[dev_slot[i] * n + j] = dev_src[i * n + j] * dev_w[dev_slot[i]] for i < m, j < n (MoE:
 * one expert's outputs into their (token, slot) rows, weighted). dev_slot: (m) int32. */
int ns_cuda_scatter_scaled(float *dev_ys, const float *dev_src, const int32_t *dev_slot,
			   const float *dev_w, uint32_t m, uint64_t n, ns_cuda_stream_t s);

/* dev_y[t * n + j] = sum over s < k, in order s = 0, 1, ..., of dev_ys[(t * k + s) * n + j]
 * (the first term copied, the others added in float, as nscompute/forward/moe.c). */
int ns_cuda_sum_slots(float *dev_y, const float *dev_ys, uint32_t n_tok, uint32_t k, uint64_t n,
		      ns_cuda_stream_t s);

/* ------------------------------------------------------------ Qwen3.5 ------------------ */
/* The Gated DeltaNet layers and gates of qwen35 / qwen35moe, as nscompute/forward/deltanet.c
 * and llama.c / moe.c compute them (the emulation runs those functions: emu/emu_dnet.c).
 * dnet.cu: conv, L2 norm, delta rule; ops.cu: the gated norm and the sigmoid gates; glue.cu:
 * the [q | gate] split.
 * Row counts (n_tok, n_rows) are at most 65535 unless said otherwise (-EINVAL beyond). */

/* Causal depthwise conv1d with a carried history, then SiLU: for each channel ch < n_ch and
 * token t in order, y[t][ch] = silu(sum_{j < K-1} hist[j][ch] w[ch][j] + x[t][ch] w[ch][K-1])
 * (float, oldest tap first), then the history drops its oldest row and x[t] becomes its
 * newest. dev_x, dev_y: (n_tok, n_ch), y may equal x; dev_hist: (K - 1, n_ch), updated;
 * dev_w: (n_ch, K). 1 <= K <= 16; any n_tok. */
int ns_cuda_conv1d_silu(float *dev_y, const float *dev_x, float *dev_hist, const float *dev_w,
			uint32_t n_ch, uint32_t K, uint32_t n_tok, ns_cuda_stream_t s);

/* L2 normalisation per head, in place: row (t, h) at dev_x + t * ld + h * dim, t < n_tok,
 * h < n_heads, becomes x / max(|x|, eps) * scale (sum of squares in double). */
int ns_cuda_l2norm(float *dev_x, uint64_t ld, uint32_t n_heads, uint32_t dim, uint32_t n_tok,
		   float eps, float scale, ns_cuda_stream_t s);

/* The gated delta rule over n_tok tokens in order (any n_tok), one state per value head:
 *   dev_qkv: (n_tok, ld) rows [q (n_k, dk) | k (n_k, dk) | v (n_v, dv)] (normalised q, k)
 *   dev_a, dev_b: (n_tok, n_v) decay and beta logits; dev_dt_b, dev_ssm_a: (n_v)
 *   dev_S: (n_v, dk, dv) the states, advanced; dev_o: (n_tok, n_v * dv)
 * For value head h (key head h mod n_k): decay = exp(softplus(a + dt_b) * ssm_a),
 * beta = sigmoid(b); S *= decay; d = (v - S^T k) * beta; S += k d^T; o = S^T q. Each output
 * column's sums run over the key dimension in order, as the CPU's. dk, dv <= 1024,
 * n_v <= 65535, n_v a multiple of n_k. */
int ns_cuda_delta_rule(float *dev_S, const float *dev_qkv, uint64_t ld, const float *dev_a,
		       const float *dev_b, const float *dev_dt_b, const float *dev_ssm_a,
		       uint32_t n_k, uint32_t n_v, uint32_t dk, uint32_t dv, uint32_t n_tok,
		       float *dev_o, ns_cuda_stream_t s);

/* dev_y = rmsnorm(dev_x) * dev_w * silu(dev_z) per row of n, all (n_rows, n) (the DeltaNet
 * output's gated norm; ns_cuda_rmsnorm's arithmetic, then the gate). y may equal x.
 * n_rows any up to INT32_MAX. */
int ns_cuda_rmsnorm_gated(float *dev_y, const float *dev_x, const float *dev_w,
			  const float *dev_z, uint32_t n, uint32_t n_rows, float eps,
			  ns_cuda_stream_t s);

/* Gated attention's query projection split: dev_qg (n_tok, n_head, 2, dim) [q | gate] per
 * head -> dev_q (n_tok, n_head * dim) and dev_g (n_tok, n_head * dim). Copies (exact). */
int ns_cuda_split_gate(float *dev_q, float *dev_g, const float *dev_qg, uint32_t n_head,
		       uint32_t dim, uint32_t n_tok, ns_cuda_stream_t s);

/* dev_y[i] *= sigmoid(dev_g[i]) for i < n (the gated attention's output). */
int ns_cuda_mul_sigmoid(float *dev_y, const float *dev_g, uint64_t n, ns_cuda_stream_t s);

/* The shared expert's scale: per token t < n_tok, g = sigmoid(dev_x[t] . dev_gw) (n each),
 * then dev_y[t] += dev_src[t] * g. All rows (n_tok, n). */
int ns_cuda_add_sigmoid_scaled(float *dev_y, const float *dev_src, const float *dev_x,
			       const float *dev_gw, uint64_t n, uint32_t n_tok,
			       ns_cuda_stream_t s);

/* ------------------------------------------------------------ Gemma -------------------- */
/* The element-wise steps of gemma3 / gemma4 (gemma.cu), as nscompute/forward/gemma_eval.c
 * computes them (the emulation runs ops.c's ns_gelu_tanh and the same expressions:
 * emu/emu_gemma.c). Norms, RoPE, attention and matmuls are the kernels above. */

/* dev_g[r][i] = gelu_tanh(dev_g[r][i]) * dev_u[r][i] for i < n, r < n_rows, rows ldg and ldu
 * floats apart (the FFN's gate and up, and the per-layer input gate times that layer's slice
 * of the per-layer inputs). gelu_tanh: ns_gelu_tanh's expression in float. */
int ns_cuda_geglu(float *dev_g, uint64_t ldg, const float *dev_u, uint64_t ldu, uint64_t n,
		  uint32_t n_rows, ns_cuda_stream_t s);

/* dev_x[i] *= (dev_scale ? *dev_scale : scale) for i < n (the embedding's sqrt(n_embd), the
 * per-layer projection's 1/sqrt(n_embd), a layer's output scale held on the device). */
int ns_cuda_scale(float *dev_x, uint64_t n, float scale, const float *dev_scale,
		  ns_cuda_stream_t s);

/* dev_x[i] = cap * tanh(dev_x[i] / cap) for i < n (final logit soft-capping); cap > 0. */
int ns_cuda_softcap(float *dev_x, uint64_t n, float cap, ns_cuda_stream_t s);

/* dev_pl[i] = (dev_proj[i] + dev_pl[i] * row_scale) * mix_scale for i < n (gemma4 E: the
 * per-layer inputs from the table's rows and the normed projection of the embedding). */
int ns_cuda_ple_mix(float *dev_pl, const float *dev_proj, uint64_t n, float row_scale,
		    float mix_scale, ns_cuda_stream_t s);

/* ------------------------------------------------------------ vision tower ------------- */
/* The steps of the Qwen3-VL / Qwen3.5 vision tower (nscompute/vision/vision.h) that the text
 * pass lacks (tower.cu; attn.cu: the bidirectional attention), as nscompute/vision/
 * vision_ops.c computes them (the emulation restates those expressions: emu/emu_tower.c).
 * Row counts up to INT32_MAX. */

/* LayerNorm with bias per row of n: y = (float)((x - mean) / sqrt(var + eps)) * w + b, the
 * mean and the (biased) variance in double, the product and the sum rounded in float. dev_x,
 * dev_y: (n_rows, n), y may equal x; dev_w, dev_b: (n). */
int ns_cuda_layernorm(float *dev_y, const float *dev_x, const float *dev_w, const float *dev_b,
		      uint32_t n, uint32_t n_rows, float eps, ns_cuda_stream_t s);

/* In place, dev_x[i] for i < n: erf false: GELU's tanh approximation (gelu_pytorch_tanh),
 * true: the exact GELU 0.5 x (1 + erf(x / sqrt 2)); computed in double, rounded once. */
int ns_cuda_gelu(float *dev_x, uint64_t n, bool erf, ns_cuda_stream_t s);

/* The tower's 2-D rotary embedding (rotate-half): n rows of dev_x, `stride` floats apart, each
 * n_heads heads of head_dim, rotated in place with the table dev_cs (n, head_dim): row p's
 * [cos (head_dim/2) | sin (head_dim/2)], pairs (i, i + head_dim/2):
 *   x_i' = x_i c_i - x_{i+h} s_i,  x_{i+h}' = x_{i+h} c_i + x_i s_i   (float, no fused mad).
 * head_dim even, stride >= n_heads * head_dim. */
int ns_cuda_rope_table(float *dev_x, uint64_t n, uint64_t stride, uint32_t n_heads,
		       uint32_t head_dim, const float *dev_cs, ns_cuda_stream_t s);

/* Float32 GEMM: dev_y[t * ldy + r] = sum_k W[r,k] dev_x[t * ldx + k], W (n_rows, n_cols)
 * float32 rows (dequantize other types first: ns_cuda_dequant). No f16 rounding (the
 * prefill GEMM's tensor cores round x and W to f16, ~5e-4 relative over a tower): each output
 * summed by one thread with fused multiply-adds in column order, so it depends only on its row,
 * token and n_cols; |y - exact| <= n_cols 2^-23 sum_k |W[r,k] x[k]|. ldx >= n_cols,
 * ldy >= n_rows, any alignment of 4 bytes. n_tok <= 65535 * 64. */
int ns_cuda_sgemm(const float *dev_w, uint64_t n_cols, uint64_t n_rows, const float *dev_x,
		  uint64_t ldx, uint64_t n_tok, float *dev_y, uint64_t ldy, ns_cuda_stream_t s);

/* Bidirectional attention (the vision tower's, one frame): query t < n_q attends to every
 * one of the n_kv keys, no mask, no sinks, no window.
 *   dev_q: (n_q, ldq) rows, head h at column h * dk; dev_k: (n_kv, ldk); dev_v: (n_kv, ldv)
 *   dev_out: (n_q, n_head, dv); dev_ws: ns_cuda_attn_ws_bytes(n_q, n_head, n_kv, dv) bytes
 * The chunks and merge of ns_cuda_attention over positions 0..n_kv-1 (so a query's result
 * depends only on itself and the keys: the caller may cut the queries in blocks).
 * n_head_kv = n_head; dk, dv <= 512; n_q, n_head <= 65535. */
int ns_cuda_attention_full(const float *dev_q, uint64_t ldq, const float *dev_k, uint64_t ldk,
			   const float *dev_v, uint64_t ldv, uint32_t n_q, uint64_t n_kv,
			   uint32_t n_head, uint32_t dk, uint32_t dv, float scale,
			   float *dev_out, void *dev_ws, ns_cuda_stream_t s);

/* ------------------------------------------------------------ graphs -------------------- */
/* A decode step replayed as a CUDA graph reads its position from device memory: these
 * variants of ns_cuda_rope, ns_cuda_attention (one token) and of the KV-cache write take it
 * from dev_pos (one int64 on the device), so one captured graph serves every position. Same
 * arithmetic as the plain calls: bit-identical results. */

/* One decode token's RoPE and KV-cache write in one launch: dev_q (n_head heads) and dev_k
 * (n_head_kv heads) of head_dim rotated in place as ns_cuda_rope at position p, then
 * dev_k_cache[p * ld_k + i] = dev_k[i] (i < n_head_kv * head_dim) and
 * dev_v_cache[p * ld_v + i] = dev_v[i] (i < nv), with p = *dev_pos when dev_pos is not NULL
 * (graphs), else pos. The same bits as two ns_cuda_rope(_at) calls and the two row stores. */
int ns_cuda_rope_kv_store(const struct ns_cuda_rope *r, float *dev_q, uint32_t n_head,
			  float *dev_k, uint32_t n_head_kv, uint32_t head_dim, const float *dev_v,
			  uint64_t nv, float *dev_k_cache, uint64_t ld_k, float *dev_v_cache,
			  uint64_t ld_v, int64_t pos, const int64_t *dev_pos, ns_cuda_stream_t s);
/* ns_cuda_rope for one token at position *dev_pos. */
int ns_cuda_rope_at(const struct ns_cuda_rope *r, float *dev_x, uint32_t n_heads,
		    uint32_t head_dim, const int64_t *dev_pos, ns_cuda_stream_t s);

/* ns_cuda_attention for one query at position *dev_pos < max_ctx; dev_ws sized by
 * ns_cuda_attn_ws_bytes(1, n_head, max_ctx, dv). */
int ns_cuda_attention_at(const float *dev_q, const float *dev_k, uint64_t ldk,
			 const float *dev_v, uint64_t ldv, const int64_t *dev_pos,
			 uint64_t max_ctx, uint32_t n_head, uint32_t n_head_kv, uint32_t dk,
			 uint32_t dv, float scale, uint32_t window, const float *dev_sinks,
			 float *dev_out, void *dev_ws, ns_cuda_stream_t s);

/* dev_dst[*dev_pos * ld + i] = dev_src[i] for i < n (a KV-cache row). */
int ns_cuda_store_row(float *dev_dst, uint64_t ld, const float *dev_src, uint64_t n,
		      const int64_t *dev_pos, ns_cuda_stream_t s);

typedef struct CUgraphExec_st *ns_cuda_graph_t;

/* Record what is launched on s (nothing runs) until ns_cuda_graph_end, which instantiates
 * it. Host copies and synchronisations are not allowed in between. -ENOTSUP where graphs
 * are not available (the emulation). */
int ns_cuda_graph_begin(ns_cuda_stream_t s);
/* Ends the capture; *out = the executable graph (NULL and an error if the capture failed). */
int ns_cuda_graph_end(ns_cuda_stream_t s, ns_cuda_graph_t *out);
int ns_cuda_graph_launch(ns_cuda_graph_t g, ns_cuda_stream_t s);
void ns_cuda_graph_destroy(ns_cuda_graph_t *g);

#ifdef __cplusplus
}
#endif

#endif
