/* gemv.h - fused dequantize-and-multiply kernels over row windows of quantized weights.
 *
 * A row window is n_rows whole rows of n_cols elements, stored exactly as in the GGUF (row r at
 * w + r * row_bytes(type, n_cols)). The kernels read those bytes directly; weights are never
 * materialised as floats beyond one 256-element chunk in L1.
 *
 *   ns_gemv: y[r] = sum_k W[r,k] * x[k]                  x: [n_cols], y: [n_rows]
 *   ns_gemm: y[t*ldy + r] = sum_k W[r,k] * x[t*n_cols+k]  x: [n_tok][n_cols], y: [n_tok][ldy]
 * ns_gemm reads the window once per call (tokens are taken in tiles of 16 while a block of rows
 * stays in cache), so prefill does not pay the weight bytes once per token.
 *
 * Determinism: every output element is reduced by one thread in a fixed order that depends only
 * on (path, act, type, n_cols) and the row's bytes: never on n_rows, the row's position in the
 * window, n_tok or the thread count. Splitting a matrix into windows of any size gives
 * bit-identical outputs for a given path.
 *
 * Activations (enum ns_act):
 *   NS_ACT_F32 (default): every weight is dequantized exactly (bit-identical to
 *     ns_dequant_rows) and multiplied with the float activation with FMA; the only error is
 *     float summation order:
 *       |y - y_exact| <= (n_cols/16 + 320) * 2^-24 * sum_k |W[r,k] * x[k]|          (tested)
 *     (SIMD paths sum in 16/32 lanes, the scalar path in 256-element partials).
 *   NS_ACT_Q8: x is quantized once per call in blocks of 32 (as llama.cpp's Q8_0):
 *     dx_b = max|x_b| / 127, xq_k = round_to_nearest_even(x_k / dx_b) in [-127, 127]; the dot
 *     products run in exact integer arithmetic (AVX-512 VNNI vpdpbusd / AVX2 vpmaddubsw), then
 *     are scaled in float. Since |x_k - xq_k * dx_b| <= dx_b / 2:
 *       |y - y_exact| <= E + (n_cols/16 + 320) * 2^-24 * (sum_k |W[r,k] * x[k]| + E),
 *       E = sum_b (dx_b / 2) * sum_{k in b} |W[r,k]|                                 (tested)
 *     Several times faster for 4-bit types; on random data the error is typically 1e-3..1e-2
 *     of sum_k |W x| (more when a 32-block of x holds an outlier). The forward pass needs
 *     <= 2e-3 absolute vs f32 math on tiny models, hence NS_ACT_F32 is the default; users
 *     choose NS_ACT_Q8 with `--act q8` (nsctl run / logits / bench; tests/run checks it
 *     end to end against the oracle).
 *   Float types (F32, F16, BF16) always use float activations.
 *
 * Paths: NS_KPATH_AUTO picks the best the CPU supports at run time (AVX-512 F/BW/VL/VNNI, else
 * AVX2+FMA+F16C, else scalar); forcing an unsupported path returns -ENOTSUP. The scalar path is
 * portable C and is the reference for the others. Only the SIMD source files are compiled for
 * their ISA (#pragma GCC target), so the project itself needs no -mavx2. Q8_0, Q4_K, Q6_K
 * and MXFP4 (AVX-512 also Q4_0, Q5_K, F32, F16, BF16) are unpacked in registers
 * (gemv_avx512_fused.c, gemv_avx2_fused.c); the other types go through a decoded
 * 256-element chunk (gemv_avx512.c, gemv_avx2.c).
 *
 * Batches of NS_I8_MIN_TOK or more tokens with NS_ACT_Q8 run the int8 GEMM of gemm_i8.h
 * instead (same quantization of x, its own fixed order of scaling, identical on all its paths);
 * opts->no_i8 keeps them here.
 *
 * Ownership: w, x, y belong to the caller; y must not overlap w or x. The pool is only used for
 * the duration of the call; one pool serves one caller thread at a time. */
#ifndef NS_GEMV_H
#define NS_GEMV_H

#include <stdbool.h>
#include <stdint.h>

#include "threadpool.h"

enum ns_kpath {
	NS_KPATH_AUTO = 0,
	NS_KPATH_SCALAR = 1,
	NS_KPATH_AVX2 = 2,
	NS_KPATH_AVX512 = 3,
};

enum ns_act {
	NS_ACT_F32 = 0, /* default */
	NS_ACT_Q8 = 1,
};

/* Batches of at least this many tokens in NS_ACT_Q8 go to the int8 GEMM (gemm_i8.h) when the
 * CPU has its VNNI or AMX path and opts->path is AUTO or AVX512: its packed tiles beat the
 * per-row kernels from here on (bench_gemv), and its bits follow its own definition. */
#define NS_I8_MIN_TOK 16

struct ns_kopts {
	enum ns_kpath path;
	enum ns_act act;
	bool no_i8; /* keep q8 batches on the per-path row kernels (tests comparing paths) */
};

/* true when this CPU can run the path (AUTO and SCALAR always). */
bool ns_kpath_supported(enum ns_kpath path);
/* The path AUTO resolves to on this CPU. */
enum ns_kpath ns_kpath_best(void);
const char *ns_kpath_name(enum ns_kpath path);

/* Returns 0; -ENOTSUP for a type the kernels cannot compute (print it with ns_type_name) or an
 * unsupported forced path; -EINVAL for n_cols not a whole number of blocks, n_cols == 0, NULL
 * pointers with non-zero sizes or ldy < n_rows; -EOVERFLOW when sizes overflow; -ENOMEM.
 * p may be NULL (runs on the calling thread). opts may be NULL (AUTO, NS_ACT_F32). */
int ns_gemm_ex(struct ns_pool *p, const struct ns_kopts *opts, uint32_t type, const void *w,
	       uint64_t n_cols, uint64_t n_rows, const float *x, uint64_t n_tok, float *y,
	       uint64_t ldy);

/* The most heap one ns_gemm_ex call over n_tok rows of n_cols inputs takes for its copy of x
 * (aligned, strided) or its quantized activations (NS_ACT_Q8, the vnni path); not the i8
 * gemm's packing (ns_gemm_i8). UINT64_MAX on overflow. For callers that count memory. */
uint64_t ns_gemm_x_bytes(uint64_t n_tok, uint64_t n_cols);

static inline int ns_gemm(struct ns_pool *p, uint32_t type, const void *w, uint64_t n_cols,
			  uint64_t n_rows, const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	return ns_gemm_ex(p, 0, type, w, n_cols, n_rows, x, n_tok, y, ldy);
}

static inline int ns_gemv_ex(struct ns_pool *p, const struct ns_kopts *opts, uint32_t type,
			     const void *w, uint64_t n_cols, uint64_t n_rows, const float *x, float *y)
{
	return ns_gemm_ex(p, opts, type, w, n_cols, n_rows, x, 1, y, n_rows);
}

static inline int ns_gemv(struct ns_pool *p, uint32_t type, const void *w, uint64_t n_cols,
			  uint64_t n_rows, const float *x, float *y)
{
	return ns_gemm_ex(p, 0, type, w, n_cols, n_rows, x, 1, y, n_rows);
}

#endif
