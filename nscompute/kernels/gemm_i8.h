/* gemm_i8.h - int8 GEMM for prefill and small batches: quantized weights times activations
 * quantized to int8, with exact integer sums and one fixed order of float scaling, so every
 * path (scalar, AVX-512 VNNI, AMX) gives the same bits.
 *
 *   ns_gemm_i8: y[t*ldy + r] = sum_k W[r,k] * x[t*n_cols + k]    x: [n_tok][n_cols]
 *
 * The definition (the scalar path is written exactly like this; the others must agree bit for
 * bit, tests/kernels/test_gemm_i8.c):
 *   activations, per token, per 32 elements as llama.cpp's Q8_0 and gemv.h's NS_ACT_Q8:
 *     dx = max|x| / 127, xq = round_to_nearest_even(x / dx) in [-127, 127]
 *   weights, decoded exactly (kern_internal.h): w_k = s_k * d + m, s_k int8, one (d, m) per
 *     scale block of B elements: B = 32 for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, Q4_K, Q5_K;
 *     B = 16 for Q2_K, Q3_K, Q6_K (their scales change every 16 elements)
 *   per row r and token t, blocks b in column order, in float with fused multiply-adds:
 *     I_b   = sum_{k in b} s_k * xq_k                       (int32, exact)
 *     acc   = fma(d_b * dx_b, (float)I_b, acc)
 *     acc   = fma(m_b, xs_b, acc)       types with a minimum only; xs_b = dx_b * (float)sum xq_k
 *   y = acc (acc starts at +0).
 * This is not gemv.h's NS_ACT_Q8 sum order (that one is per 16-group and path-dependent), so
 * the two may differ in the last bits; the error bound of NS_ACT_Q8 holds for both.
 *
 * Paths: SCALAR (portable C, the reference), VNNI (AVX-512 F/BW/VL/VNNI vpdpbusd on weights
 * packed 16 rows x 4 bytes per register), AMX (AMX-TILE/INT8 tdpbusd tiles of 16 tokens x 16
 * rows, the scales applied with AVX-512; the AMX state is requested from the kernel once with
 * arch_prctl(ARCH_REQ_XCOMP_PERM) and the path is unsupported when that is refused), and
 * AMX_EMU: the AMX kernel's own code with every tile instruction carried out in C, so the tile
 * layout, configuration and scaling are tested on CPUs without AMX. AUTO picks AMX, else VNNI,
 * else SCALAR.
 *
 * Float weight types (F32, F16, BF16) have no int8 form: -ENOTSUP (the caller keeps float
 * activations for them, as gemv.h does).
 *
 * Threads: the rows are cut into tasks of a few 16-row panels; each task decodes and packs its
 * panels once and multiplies every token with them, so the pool stays busy across rows and
 * tokens; each output element is still reduced by one thread in the order above.
 *
 * Ownership: w, x, y belong to the caller; y must not overlap w or x. */
#ifndef NS_GEMM_I8_H
#define NS_GEMM_I8_H

#include <stdbool.h>
#include <stdint.h>

#include "threadpool.h"

enum ns_i8path {
	NS_I8_AUTO = 0,
	NS_I8_SCALAR = 1,
	NS_I8_VNNI = 2,
	NS_I8_AMX = 3,
	NS_I8_AMX_EMU = 4, /* needs the VNNI path's CPU features (AVX-512) */
};

/* true when this CPU (and, for AMX, the kernel) can run the path; AUTO and SCALAR always. */
bool ns_i8path_supported(enum ns_i8path path);
/* What AUTO resolves to here. */
enum ns_i8path ns_i8path_best(void);
const char *ns_i8path_name(enum ns_i8path path);

/* Does the int8 GEMM compute this ggml type (every quantized type the kernels decode)? */
bool ns_gemm_i8_type(uint32_t type);

/* Returns 0; -ENOTSUP for a type without an int8 form or an unsupported path; -EINVAL for
 * n_cols not a whole number of blocks, n_cols == 0, NULL pointers with non-zero sizes or
 * ldy < n_rows (n_tok > 1); -EOVERFLOW when sizes overflow; -ENOMEM. p may be NULL. */
int ns_gemm_i8(struct ns_pool *p, enum ns_i8path path, uint32_t type, const void *w,
	       uint64_t n_cols, uint64_t n_rows, const float *x, uint64_t n_tok, float *y,
	       uint64_t ldy);

#endif
