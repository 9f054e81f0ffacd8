/* weights_provider.h - what the implementations of weights.h share (weights_ref.c,
 * weights_fused.c, weights_stream.c): the checks of a call's tensor, window and rows, the
 * dequantization of raw rows with its error line, the kernels' options and thread pool, a
 * full pread, and installing an ops table as a struct ns_weights. Each writes its error
 * line into err (the provider's last_error buffer) and returns a negative errno. */
#ifndef NS_WEIGHTS_PROVIDER_H
#define NS_WEIGHTS_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "gemv.h"
#include "threadpool.h"
#include "weights.h"

/* Tensor `tensor` of m, or NULL with "tensor index N out of range". */
const struct ns_model_tensor *ns_weights_tensor(const struct ns_model *m, uint32_t tensor,
						char *err, size_t errlen);

/* 0 when [row0, row_end) is a row window of t and ldy (a matmul's output row stride;
 * UINT64_MAX when there is none) holds it, else -EINVAL with a line. */
int ns_weights_check_window(const struct ns_model_tensor *t, uint64_t row0, uint64_t row_end,
			    uint64_t ldy, char *err, size_t errlen);

/* 0 when row is a row of t, else -EINVAL: "NAME: row R out of range (N rows)". */
int ns_weights_check_row(const struct ns_model_tensor *t, int64_t row, char *err,
			 size_t errlen);

/* dst (n_rows, ne[0]) = n_rows raw rows of t at src as float32 (ns_dequant_rows, bit-exact
 * with ggml's to_float), or the error: "NAME: cannot dequantize type T: why". */
int ns_weights_dequant(const struct ns_model_tensor *t, const void *src, uint64_t n_rows,
		       float *dst, char *err, size_t errlen);

/* y (n_tok, ldy) = x W^T over n_rows raw rows of t at w, by the fused kernels (ns_gemm_ex),
 * or the error: "NAME (TYPE): kernel failed: why". */
int ns_weights_gemm(struct ns_pool *pool, const struct ns_kopts *ko,
		    const struct ns_model_tensor *t, const void *w, uint64_t n_rows,
		    const float *x, uint64_t n_tok, float *y, uint64_t ldy, char *err,
		    size_t errlen);

/* The kernels' options (kpath: enum ns_kpath, it must run on this CPU; act: NS_ACT_Q8 or
 * else F32) and, for n_threads > 1, their pool (*pool NULL for one thread). */
int ns_weights_kernels(int n_threads, int kpath, int act, struct ns_kopts *ko,
		       struct ns_pool **pool, char *err, size_t errlen);

/* *out = a struct ns_weights over ops and ctx for m. On -ENOMEM ctx is destroyed with
 * ops->destroy, so a constructor can end with `return ns_weights_install(...)`. */
int ns_weights_install(const struct ns_weights_ops *ops, void *ctx, const struct ns_model *m,
		       struct ns_weights **out, char *err, size_t errlen);

#endif
