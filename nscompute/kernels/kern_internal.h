/* kern_internal.h - what the dispatcher (gemv.c) shares with the per-ISA row kernels.
 *
 * Every quantized type is decoded, one chunk of at most 256 elements at a time, into one common
 * form: signed 8-bit values s[i] and, per group of 16 elements, a float scale d[g] and (types
 * with a minimum) a float offset m[g]. The weight is then w[i] = (float)s[i] * d[i/16] (+ m[i/16]),
 * which is exactly how ggml's to_float computes it, so dequantizing through this form is
 * bit-exact. The scalar decoders (decode_scalar.c) are the reference; the SIMD decoders must
 * produce identical chunks (tested). Float types (F32, F16, BF16) skip this form. */
#ifndef NS_KERN_INTERNAL_H
#define NS_KERN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "gemv.h"

#define NS_KCHUNK 256              /* elements per decoded chunk */
#define NS_KGROUP 16               /* elements sharing one d/m */
#define NS_KNG (NS_KCHUNK / NS_KGROUP)
#define NS_KTILE 16                /* tokens multiplied per pass over a decoded chunk */

struct ns_kdec {
	_Alignas(64) int8_t s[NS_KCHUNK]; /* [256] values, first n of them valid */
	_Alignas(64) float d[NS_KNG];     /* [16] scale per group of 16 */
	_Alignas(64) float m[NS_KNG];     /* [16] additive offset per group (0 when !has_min) */
};

/* Decode nb consecutive blocks (nb * blk_elems <= 256) starting at src into out. Groups past
 * the decoded elements are left as they were (callers zero out once). */
typedef void (*ns_kdec_fn)(const uint8_t *src, uint32_t nb, struct ns_kdec *out);

struct ns_kqtype {
	uint32_t type;
	uint32_t blk_elems;    /* elements per block */
	uint32_t blk_bytes;    /* bytes per block */
	uint32_t chunk_blocks; /* blocks per 256-element chunk (1 for 256-element blocks) */
	bool has_min;          /* w = s*d + m, else w = s*d */
	bool is_float;         /* F32/F16/BF16: no int8 form, dec is NULL */
	ns_kdec_fn dec;        /* portable reference decoder */
};

/* Table entry of a type the kernels compute, or NULL. */
const struct ns_kqtype *ns_kq_get(uint32_t type);

/* Per-superblock scales of the K types (shared by the scalar and SIMD decoders). */
void ns_kdec_q2k_dm(const uint8_t *b, struct ns_kdec *o);
void ns_kdec_q3k_dm(const uint8_t *b, struct ns_kdec *o);
void ns_kdec_k4_dm(const uint8_t *b, struct ns_kdec *o); /* Q4_K and Q5_K */
void ns_kdec_q6k_dm(const uint8_t *b, struct ns_kdec *o);

/* Float conversion of one decoded chunk of n elements (scalar, exact). */
void ns_kdec_to_f32(const struct ns_kqtype *qt, const struct ns_kdec *dc, uint32_t n, float *dst);

/* One multiplication: rows [r0, r1) of a window, all n_tok tokens.
 *   w   : window bytes, row r at w + r * row_bytes
 *   x   : [n_tok][ldx] floats, y : [n_tok][ldy] floats, y[t*ldy + r]
 * When q8 is set (quantized type and NS_ACT_Q8) the activations were quantized once by the
 * dispatcher, per token t:
 *   xq  : [n_tok][ldq] int8, 32-element blocks, zero padded past n_cols
 *   dxg : [n_tok][ldg] scale of the 32-block holding group g (so each value twice), zero padded
 *   xsg : [n_tok][ldg] dxg[g] * (sum of xq over group g), zero padded
 *   c4  : [n_tok][ldc] -128 * (sum of xq over each 4 elements), zero padded (AVX-512 VNNI)
 *   dxl : [n_tok][ldc] scale of the 32-block holding each 4 elements (dxg at the granularity
 *         of a vpdpbusd lane), zero padded; filled for MXFP4 only (its AVX-512 q8 kernel) */
struct ns_kjob {
	const struct ns_kqtype *qt;
	const uint8_t *w;
	uint64_t row_bytes;
	uint64_t n_cols;
	const float *x;
	uint64_t ldx;
	uint64_t n_tok;
	float *y;
	uint64_t ldy;
	bool q8;
	const int8_t *xq;
	uint64_t ldq;
	const float *dxg;
	const float *xsg;
	uint64_t ldg;
	const int32_t *c4;
	const float *dxl;
	uint64_t ldc;
};

typedef void (*ns_krows_fn)(const struct ns_kjob *j, uint64_t r0, uint64_t r1);

void ns_krows_scalar(const struct ns_kjob *j, uint64_t r0, uint64_t r1);
void ns_krows_avx2(const struct ns_kjob *j, uint64_t r0, uint64_t r1);
void ns_krows_avx512(const struct ns_kjob *j, uint64_t r0, uint64_t r1);
/* Register-level kernels of the hot types; false when the type has none
 * (gemv_avx512_fused.c, gemv_avx2_fused.c). */
bool ns_krows_avx512_fused(const struct ns_kjob *j, uint64_t r0, uint64_t r1);
bool ns_krows_avx2_fused(const struct ns_kjob *j, uint64_t r0, uint64_t r1);

/* Activation quantizer of one token: x [n_cols] -> q [n_cols], dg/sg [n_cols/16], c [n_cols/4]
 * as described for struct ns_kjob. The SIMD ones give identical bytes (tested). */
void ns_kquant_x_scalar(const float *x, uint64_t n_cols, int8_t *q, float *dg, float *sg, int32_t *c);
void ns_kquant_x_avx512(const float *x, uint64_t n_cols, int8_t *q, float *dg, float *sg, int32_t *c);
void ns_kquant_x_avx2(const float *x, uint64_t n_cols, int8_t *q, float *dg, float *sg, int32_t *c);

/* SIMD decoders, exposed for the decoder-equality test: returns false when the path has no
 * SIMD decoder for that type (it then uses the scalar one). */
bool ns_kdec_avx2(uint32_t type, const uint8_t *src, uint32_t nb, struct ns_kdec *out);

#endif
