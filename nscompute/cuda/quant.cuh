/* quant.cuh - device decoders of every GGUF block type the backend computes.
 *
 * The unit of work is 32 consecutive elements of a row ("unit" u = elements 32u .. 32u+31):
 * every supported block holds a whole number of units (float types are cut in units of 32).
 * A quantized unit decodes to integers q[32] and, per group of 16 elements, a scale d[g] and
 * (types with a minimum) an offset m[g], exactly as nscompute/kernels/kern_internal.h's common
 * form, so that
 *     w[i] = q[i] * d[i/16] (+ m[i/16])
 * computed with round-to-nearest multiplies and adds (never fused) is bit-identical to
 * ns_dequant_rows and ggml. The block layouts are described in nscompute/kernels/decode_scalar.c.
 *
 * Alignment: a window pointer is aligned to the lowest set bit of the type's block size, at most
 * 16 (checked by the launchers: any row of a 16-byte aligned tensor qualifies), and rows and
 * blocks start at multiples of that, so each field's alignment below follows. */
#ifndef NS_CUDA_QUANT_CUH
#define NS_CUDA_QUANT_CUH

#ifndef NSQ_HOST_SHIM /* tests/cuda/test_quant_host.cc compiles this file for the CPU */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif
#include <stdint.h>

namespace nsq {

enum : int {
	F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11,
	Q4_K = 12, Q5_K = 13, Q6_K = 14, BF16 = 30, MXFP4 = 39,
};

/* Every supported type, for dispatch switches: X(type id). */
#define NSQ_TYPES(X) X(F32) X(F16) X(BF16) X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) \
	X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K) X(MXFP4)

/* Geometry: QK elements and BYTES bytes per block; FLT float type; MIN has offsets. */
template <int T> struct geo;
#define NSQ_GEO(t, qk, bytes, flt, mn) \
	template <> struct geo<t> { \
		static constexpr int QK = qk, BYTES = bytes, SUBS = qk / 32; \
		static constexpr bool FLT = flt, MIN = mn; \
	};
NSQ_GEO(F32, 32, 128, true, false)
NSQ_GEO(F16, 32, 64, true, false)
NSQ_GEO(BF16, 32, 64, true, false)
NSQ_GEO(Q4_0, 32, 18, false, false)
NSQ_GEO(Q4_1, 32, 20, false, true)
NSQ_GEO(Q5_0, 32, 22, false, false)
NSQ_GEO(Q5_1, 32, 24, false, true)
NSQ_GEO(Q8_0, 32, 34, false, false)
NSQ_GEO(Q2_K, 256, 84, false, true)
NSQ_GEO(Q3_K, 256, 110, false, false)
NSQ_GEO(Q4_K, 256, 144, false, true)
NSQ_GEO(Q5_K, 256, 176, false, true)
NSQ_GEO(Q6_K, 256, 210, false, false)
NSQ_GEO(MXFP4, 32, 17, false, false)
#undef NSQ_GEO

/* ---------------------------------------------------------------- loads ---------------- */

/* fp16 field at an even address. */
__device__ __forceinline__ float ldh(const uint8_t *p)
{
	return __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t *>(p)));
}

/* NB bytes (NB % 4 == 0) at an address aligned to A bytes, as little-endian words. */
template <int NB, int A>
__device__ __forceinline__ void ldw(const uint8_t *p, uint32_t (&w)[NB / 4])
{
	if constexpr (A >= 16) {
#pragma unroll
		for (int i = 0; i < NB / 16; i++) {
			uint4 v = reinterpret_cast<const uint4 *>(p)[i];
			w[4 * i] = v.x; w[4 * i + 1] = v.y; w[4 * i + 2] = v.z; w[4 * i + 3] = v.w;
		}
	} else if constexpr (A >= 8) {
#pragma unroll
		for (int i = 0; i < NB / 8; i++) {
			uint2 v = reinterpret_cast<const uint2 *>(p)[i];
			w[2 * i] = v.x; w[2 * i + 1] = v.y;
		}
	} else if constexpr (A >= 4) {
#pragma unroll
		for (int i = 0; i < NB / 4; i++)
			w[i] = reinterpret_cast<const uint32_t *>(p)[i];
	} else if constexpr (A >= 2) {
		const uint16_t *h = reinterpret_cast<const uint16_t *>(p);
#pragma unroll
		for (int i = 0; i < NB / 4; i++)
			w[i] = (uint32_t)h[2 * i] | ((uint32_t)h[2 * i + 1] << 16);
	} else {
#pragma unroll
		for (int i = 0; i < NB / 4; i++)
			w[i] = (uint32_t)p[4 * i] | ((uint32_t)p[4 * i + 1] << 8) |
			       ((uint32_t)p[4 * i + 2] << 16) | ((uint32_t)p[4 * i + 3] << 24);
	}
}

/* byte i of a word array (i a compile-time constant after unrolling) */
template <int N>
__device__ __forceinline__ uint32_t byte_of(const uint32_t (&w)[N], int i)
{
	return (w[i >> 2] >> (8 * (i & 3))) & 0xffu;
}

/* E8M0 exponent to 2^(e-128) (ggml E8M0_TO_FP32_HALF). */
__device__ __forceinline__ float e8m0_half(uint32_t e)
{
	uint32_t bits = e < 2 ? 0x00200000u << e : (e - 1) << 23;
	return __uint_as_float(bits);
}

/* MXFP4 nibble to 2 * E2M1 value: {0,1,2,3,4,6,8,12} with the sign in bit 3. */
__device__ __forceinline__ int kv_mxfp4(uint32_t nib)
{
	int v = (int)__byte_perm(0x03020100u, 0x0C080604u, nib & 7u) & 0xff;
	return (nib & 8u) ? -v : v;
}

/* Q4_K / Q5_K: 6-bit scale and min j of the 12 packed bytes at q (ggml get_scale_min_k4). */
__device__ __forceinline__ void k4_scale_min(const uint8_t *q, int j, int *sc, int *mn)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*mn = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
		*mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* Q3_K: 6-bit scale i of the 12 packed bytes at p, as stored (bias 32 not removed). */
__device__ __forceinline__ int q3k_scale(const uint8_t *p, int i)
{
	int lo = i < 8 ? (p[i] & 15) : (p[i - 8] >> 4);
	int hi = (p[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
	return lo | (hi << 4);
}

/* ---------------------------------------------------------------- units ---------------- */

/* Quantized unit s of block b: q[32], d[2], m[2] (m only for MIN types). */
template <int T>
__device__ __forceinline__ void unit(const uint8_t *b, int s, int (&q)[32], float (&d)[2],
				     float (&m)[2])
{
	m[0] = m[1] = 0.0f;
	if constexpr (T == Q4_0) {
		uint32_t w[4];
		ldw<16, 2>(b + 2, w);
		d[0] = d[1] = ldh(b);
#pragma unroll
		for (int j = 0; j < 16; j++) {
			q[j] = (int)(byte_of(w, j) & 15) - 8;
			q[j + 16] = (int)(byte_of(w, j) >> 4) - 8;
		}
	} else if constexpr (T == Q4_1) {
		uint32_t w[4];
		ldw<16, 4>(b + 4, w);
		d[0] = d[1] = ldh(b);
		m[0] = m[1] = ldh(b + 2);
#pragma unroll
		for (int j = 0; j < 16; j++) {
			q[j] = (int)(byte_of(w, j) & 15);
			q[j + 16] = (int)(byte_of(w, j) >> 4);
		}
	} else if constexpr (T == Q5_0 || T == Q5_1) {
		constexpr bool M = T == Q5_1;
		constexpr int off = M ? 4 : 2;
		uint32_t w[4], h[1];
		ldw<4, M ? 4 : 2>(b + off, h);
		ldw<16, M ? 8 : 2>(b + off + 4, w);
		d[0] = d[1] = ldh(b);
		if constexpr (M)
			m[0] = m[1] = ldh(b + 2);
		constexpr int bias = M ? 0 : 16;
#pragma unroll
		for (int j = 0; j < 16; j++) {
			q[j] = (int)((byte_of(w, j) & 15) | (((h[0] >> j) & 1) << 4)) - bias;
			q[j + 16] = (int)((byte_of(w, j) >> 4) | (((h[0] >> (j + 16)) & 1) << 4)) - bias;
		}
	} else if constexpr (T == Q8_0) {
		uint32_t w[8];
		ldw<32, 2>(b + 2, w);
		d[0] = d[1] = ldh(b);
#pragma unroll
		for (int j = 0; j < 32; j++)
			q[j] = (int)(int8_t)byte_of(w, j);
	} else if constexpr (T == MXFP4) {
		uint32_t w[4];
		ldw<16, 1>(b + 1, w);
		d[0] = d[1] = e8m0_half(b[0]);
#pragma unroll
		for (int j = 0; j < 16; j++) {
			q[j] = kv_mxfp4(byte_of(w, j) & 15);
			q[j + 16] = kv_mxfp4(byte_of(w, j) >> 4);
		}
	} else if constexpr (T == Q2_K) {
		const int n = s >> 2, j = s & 3;
		uint32_t w[8];
		ldw<32, 4>(b + 16 + 32 * n, w);
		const float dd = ldh(b + 80), dmin = ldh(b + 82);
#pragma unroll
		for (int l = 0; l < 32; l++)
			q[l] = (int)((byte_of(w, l) >> (2 * j)) & 3);
#pragma unroll
		for (int g = 0; g < 2; g++) {
			const uint32_t sc = b[2 * s + g];
			d[g] = __fmul_rn(dd, (float)(sc & 15));
			m[g] = -__fmul_rn(dmin, (float)(sc >> 4));
		}
	} else if constexpr (T == Q3_K) {
		const int n = s >> 2, j = s & 3;
		uint32_t w[8], hm[8];
		ldw<32, 2>(b + 32 + 32 * n, w);
		ldw<32, 2>(b, hm);
		const float dd = ldh(b + 108);
#pragma unroll
		for (int l = 0; l < 32; l++) {
			const int v = (int)((byte_of(w, l) >> (2 * j)) & 3);
			const int hb = (int)((byte_of(hm, l) >> (4 * n + j)) & 1);
			q[l] = v - (hb ? 0 : 4);
		}
#pragma unroll
		for (int g = 0; g < 2; g++)
			d[g] = __fmul_rn(dd, (float)(q3k_scale(b + 96, 2 * s + g) - 32));
	} else if constexpr (T == Q4_K || T == Q5_K) {
		const int j = s >> 1, hi = s & 1;
		uint32_t w[8];
		int sc, mn;
		ldw<32, 16>(b + (T == Q4_K ? 16 : 48) + 32 * j, w);
		k4_scale_min(b + 4, s, &sc, &mn);
		d[0] = d[1] = __fmul_rn(ldh(b), (float)sc);
		m[0] = m[1] = -__fmul_rn(ldh(b + 2), (float)mn);
		if constexpr (T == Q4_K) {
#pragma unroll
			for (int l = 0; l < 32; l++)
				q[l] = (int)(hi ? byte_of(w, l) >> 4 : byte_of(w, l) & 15);
		} else {
			uint32_t h[8];
			ldw<32, 16>(b + 16, h);
#pragma unroll
			for (int l = 0; l < 32; l++) {
				const uint32_t nib = hi ? byte_of(w, l) >> 4 : byte_of(w, l) & 15;
				q[l] = (int)(nib | (((byte_of(h, l) >> (2 * j + hi)) & 1) << 4));
			}
		}
	} else if constexpr (T == Q6_K) {
		const int n = s >> 2, k = s & 3;
		uint32_t w[8], h[8];
		ldw<32, 2>(b + 64 * n + ((k & 1) ? 32 : 0), w);
		ldw<32, 2>(b + 128 + 32 * n, h);
		const float dd = ldh(b + 208);
#pragma unroll
		for (int l = 0; l < 32; l++) {
			const uint32_t nib = k < 2 ? byte_of(w, l) & 15 : byte_of(w, l) >> 4;
			const uint32_t hb = (byte_of(h, l) >> (2 * k)) & 3;
			q[l] = (int)(nib | (hb << 4)) - 32;
		}
#pragma unroll
		for (int g = 0; g < 2; g++)
			d[g] = __fmul_rn(dd, (float)(int8_t)b[192 + 8 * n + 2 * k + g]);
	}
}

/* Float unit s of block b: w[32]. */
template <int T>
__device__ __forceinline__ void unitf(const uint8_t *b, int s, float (&w)[32])
{
	if constexpr (T == F32) {
		const float4 *p = reinterpret_cast<const float4 *>(b + 128 * s);
#pragma unroll
		for (int i = 0; i < 8; i++) {
			float4 v = p[i];
			w[4 * i] = v.x; w[4 * i + 1] = v.y; w[4 * i + 2] = v.z; w[4 * i + 3] = v.w;
		}
	} else {
		uint32_t r[16];
		ldw<64, 16>(b + 64 * s, r);
#pragma unroll
		for (int i = 0; i < 32; i++) {
			const uint16_t h = (uint16_t)(r[i >> 1] >> (16 * (i & 1)));
			if constexpr (T == F16)
				w[i] = __half2float(__ushort_as_half(h));
			else
				w[i] = __uint_as_float((uint32_t)h << 16);
		}
	}
}

/* ---------------------------------------------------------------- partial units -------- */
/* Float rows whose length is not a multiple of 32 (launch.cuh: "tail" rows) are aligned only to
 * their element and may end the allocation: they are read element by element, the n (1..32)
 * elements of a unit that the row holds, and the rest of the unit is taken as 0. */

/* Element i of a float-type row. */
template <int T>
__device__ __forceinline__ float elt(const uint8_t *row, uint64_t i)
{
	if constexpr (T == F32) {
		return reinterpret_cast<const float *>(row)[i];
	} else {
		const uint16_t h = reinterpret_cast<const uint16_t *>(row)[i];

		if constexpr (T == F16)
			return __half2float(__ushort_as_half(h));
		else
			return __uint_as_float((uint32_t)h << 16);
	}
}

/* Unit u of a float row holding n of its elements: w[32], zeros from w[n] on. */
template <int T>
__device__ __forceinline__ void unitf_part(const uint8_t *row, uint32_t u, uint32_t n,
					   float (&w)[32])
{
	const uint64_t e0 = 32 * (uint64_t)u;

#pragma unroll
	for (int i = 0; i < 32; i++)
		w[i] = (uint32_t)i < n ? elt<T>(row, e0 + i) : 0.0f;
}

/* dot_unit of a float row's unit holding n elements: the same operations as dot_unit's float
 * path on the zero-padded unit (xv from xv[n] on must be finite; the kernels pass zeros). */
template <int T>
__device__ __forceinline__ float dot_unit_part(const uint8_t *row, uint32_t u, uint32_t n,
					       const float (&xv)[32])
{
	float w[32], a0 = 0.0f, a1 = 0.0f;

	unitf_part<T>(row, u, n, w);
#pragma unroll
	for (int i = 0; i < 16; i++) {
		a0 = fmaf(w[i], xv[i], a0);
		a1 = fmaf(w[i + 16], xv[i + 16], a1);
	}
	return a0 + a1;
}

/* The 32 activations of unit u from x laid out as units of `stride` floats (32 in global
 * memory, the GEMV kernels' padded 36 in shared memory), 16-byte aligned. */
__device__ __forceinline__ void load_x_unit(const float *x, uint32_t u, uint32_t stride,
					    float (&xv)[32])
{
	const float4 *p = reinterpret_cast<const float4 *>(x + (uint64_t)u * stride);
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const float4 v = p[i];

		xv[4 * i] = v.x;
		xv[4 * i + 1] = v.y;
		xv[4 * i + 2] = v.z;
		xv[4 * i + 3] = v.w;
	}
}

/* x of a row whose last unit holds `last` (1..31) elements, copied into shared memory by the
 * block's threads (thread tid of n_threads) as n_units units of `pad` floats each (unit u at
 * xs + u * pad), zeros after x[n_cols - 1]; the caller synchronizes before reading xs. */
__device__ __forceinline__ void stage_x_part(float *xs, const float *x, uint32_t n_units,
					     uint32_t last, uint32_t pad, uint32_t tid,
					     uint32_t n_threads)
{
	const uint32_t nx = (n_units - 1) * 32 + last;

	for (uint32_t i = tid; i < n_units * 32; i += n_threads)
		xs[(i / 32) * pad + i % 32] = i < nx ? x[i] : 0.0f;
}

/* The n (1..32) activations x[32u ..] of unit u, zeros from xv[n] on (x only 4-byte
 * aligned; nothing past x[32u + n - 1] is read). */
__device__ __forceinline__ void load_x_part(const float *x, uint32_t u, uint32_t n,
					    float (&xv)[32])
{
	const float *p = x + 32 * (uint64_t)u;

#pragma unroll
	for (int i = 0; i < 32; i++)
		xv[i] = (uint32_t)i < n ? p[i] : 0.0f;
}

/* Exact float of an integer in [-128, 127] without I2F (a quarter-rate conversion): the
 * float 2^23 + 128 + q has q + 128 in its low mantissa bits. */
__device__ __forceinline__ float small_f(int q)
{
	return __fsub_rn(__int_as_float(0x4B000000 | (q + 128)), 8388736.0f);
}

/* Exact float32 weights of unit u of a row. */
template <int T>
__device__ __forceinline__ void deq_unit(const uint8_t *row, uint32_t u, float (&w)[32])
{
	using G = geo<T>;
	const uint8_t *b = row + (uint64_t)(u / G::SUBS) * G::BYTES;
	const int s = (int)(u % G::SUBS);

	if constexpr (G::FLT) {
		unitf<T>(b, s, w);
	} else {
		int q[32];
		float d[2], m[2];
		unit<T>(b, s, q, d, m);
#pragma unroll
		for (int i = 0; i < 32; i++) {
			const float p = __fmul_rn(small_f(q[i]), d[i >> 4]);
			w[i] = G::MIN ? __fadd_rn(p, m[i >> 4]) : p;
		}
	}
}

/* Four biased bytes (byte j = element j + BIAS, 0..255) to exact floats without integer-to-
 * float conversions (a quarter-rate pipe): each byte becomes the half 1024 + byte (0x64 as its
 * high byte), a half subtraction removes 1024 + BIAS exactly, and half-to-float widening
 * runs on the FMA pipe. */
template <int BIAS>
__device__ __forceinline__ void bytes_f(uint32_t qb, float &f0, float &f1, float &f2, float &f3)
{
	const __half2 off = __half2half2(__ushort_as_half((unsigned short)(0x6400 + BIAS)));
	const uint32_t lo = __byte_perm(qb, 0x64646464u, 0x4240); /* bytes 0, 2 */
	const uint32_t hi = __byte_perm(qb, 0x64646464u, 0x4341); /* bytes 1, 3 */
	const float2 a = __half22float2(__hsub2(*reinterpret_cast<const __half2 *>(&lo), off));
	const float2 c = __half22float2(__hsub2(*reinterpret_cast<const __half2 *>(&hi), off));
	f0 = a.x; f1 = c.x; f2 = a.y; f3 = c.y;
}

/* sum over 16 elements (4 byte words) of q * x */
template <int BIAS>
__device__ __forceinline__ float dot16(const uint32_t *qb, const float *x)
{
	float a = 0.0f;
#pragma unroll
	for (int k = 0; k < 4; k++) {
		float f0, f1, f2, f3;
		bytes_f<BIAS>(qb[k], f0, f1, f2, f3);
		a = fmaf(f0, x[4 * k], a);
		a = fmaf(f1, x[4 * k + 1], a);
		a = fmaf(f2, x[4 * k + 2], a);
		a = fmaf(f3, x[4 * k + 3], a);
	}
	return a;
}

__device__ __forceinline__ float sum16(const float *x)
{
	float a = 0.0f;
#pragma unroll
	for (int i = 0; i < 16; i++)
		a += x[i];
	return a;
}

/* Whether dot_unit has a byte-word path for T (else it decodes through unit()). */
template <int T> struct fast { static constexpr bool ON = T == Q4_0 || T == Q8_0 ||
	T == Q4_K || T == Q5_K || T == Q6_K || T == MXFP4; };

/* sum_i w[i] * x[i] over unit u of a row; xv: the unit's 32 activations.
 * Quantized types factor the scales out of each group of 16: d * sum(q x) + m * sum(x). */
template <int T>
__device__ __forceinline__ float dot_unit(const uint8_t *row, uint32_t u, const float (&xv)[32])
{
	using G = geo<T>;
	const uint8_t *b = row + (uint64_t)(u / G::SUBS) * G::BYTES;
	const int s = (int)(u % G::SUBS);

	if constexpr (G::FLT) {
		float w[32], a0 = 0.0f, a1 = 0.0f;
		unitf<T>(b, s, w);
#pragma unroll
		for (int i = 0; i < 16; i++) {
			a0 = fmaf(w[i], xv[i], a0);
			a1 = fmaf(w[i + 16], xv[i + 16], a1);
		}
		return a0 + a1;
	} else if constexpr (T == Q4_0 || T == Q8_0) {
		uint32_t qb[8];
		const float d = ldh(b);
		if constexpr (T == Q4_0) {
			uint32_t w[4];
			ldw<16, 2>(b + 2, w);
#pragma unroll
			for (int k = 0; k < 4; k++) {
				qb[k] = w[k] & 0x0F0F0F0Fu;
				qb[k + 4] = (w[k] >> 4) & 0x0F0F0F0Fu;
			}
		} else {
			ldw<32, 2>(b + 2, qb);
#pragma unroll
			for (int k = 0; k < 8; k++)
				qb[k] ^= 0x80808080u;
		}
		constexpr int BIAS = T == Q4_0 ? 8 : 128;
		return d * (dot16<BIAS>(qb, xv) + dot16<BIAS>(qb + 4, xv + 16));
	} else if constexpr (T == Q4_K || T == Q5_K) {
		const int j = s >> 1, hi = s & 1;
		uint32_t w[8];
		int sc, mn;
		ldw<32, 16>(b + (T == Q4_K ? 16 : 48) + 32 * j, w);
#pragma unroll
		for (int k = 0; k < 8; k++)
			w[k] = (hi ? w[k] >> 4 : w[k]) & 0x0F0F0F0Fu;
		if constexpr (T == Q5_K) {
			uint32_t h[8];
			ldw<32, 16>(b + 16, h);
#pragma unroll
			for (int k = 0; k < 8; k++)
				w[k] |= ((h[k] >> (2 * j + hi)) & 0x01010101u) << 4;
		}
		k4_scale_min(b + 4, s, &sc, &mn);
		const float d = __fmul_rn(ldh(b), (float)sc);
		const float m = -__fmul_rn(ldh(b + 2), (float)mn);
		const float a = dot16<0>(w, xv) + dot16<0>(w + 4, xv + 16);
		return fmaf(d, a, m * (sum16(xv) + sum16(xv + 16)));
	} else if constexpr (T == Q6_K) {
		const int n = s >> 2, k = s & 3;
		uint32_t w[8], h[8];
		ldw<32, 2>(b + 64 * n + ((k & 1) ? 32 : 0), w);
		ldw<32, 2>(b + 128 + 32 * n, h);
#pragma unroll
		for (int i = 0; i < 8; i++)
			w[i] = ((k < 2 ? w[i] : w[i] >> 4) & 0x0F0F0F0Fu) |
			       (((h[i] >> (2 * k)) & 0x03030303u) << 4);
		const float dd = ldh(b + 208);
		const float d0 = __fmul_rn(dd, (float)(int8_t)b[192 + 8 * n + 2 * k]);
		const float d1 = __fmul_rn(dd, (float)(int8_t)b[192 + 8 * n + 2 * k + 1]);
		return fmaf(d0, dot16<32>(w, xv), d1 * dot16<32>(w + 4, xv + 16));
	} else if constexpr (T == MXFP4) {
		/* E2M1 nibble -> the half with bits sign << 15 | (nib & 7) << 9, which is
		 * E2M1 * 2^-14 exactly (subnormals included); w = 2 E2M1 d = half * 2^15 * d */
		uint32_t w[4];
		ldw<16, 1>(b + 1, w);
		float a = 0.0f;
#pragma unroll
		for (int k = 0; k < 4; k++) {
			/* nibbles: low of bytes 0..3 = elements 4k..4k+3, high = 16+4k.. */
			const uint32_t v = w[k];
			const uint32_t l02 = ((v << 12) & 0x80008000u) | ((v << 9) & 0x0E000E00u);
			const uint32_t l13 = ((v << 4) & 0x80008000u) | ((v << 1) & 0x0E000E00u);
			const uint32_t h02 = ((v << 8) & 0x80008000u) | ((v << 5) & 0x0E000E00u);
			const uint32_t h13 = (v & 0x80008000u) | ((v >> 3) & 0x0E000E00u);
			const float2 p = __half22float2(*reinterpret_cast<const __half2 *>(&l02));
			const float2 q = __half22float2(*reinterpret_cast<const __half2 *>(&l13));
			const float2 r = __half22float2(*reinterpret_cast<const __half2 *>(&h02));
			const float2 t = __half22float2(*reinterpret_cast<const __half2 *>(&h13));
			a = fmaf(p.x, xv[4 * k], a);
			a = fmaf(q.x, xv[4 * k + 1], a);
			a = fmaf(p.y, xv[4 * k + 2], a);
			a = fmaf(q.y, xv[4 * k + 3], a);
			a = fmaf(r.x, xv[16 + 4 * k], a);
			a = fmaf(t.x, xv[16 + 4 * k + 1], a);
			a = fmaf(r.y, xv[16 + 4 * k + 2], a);
			a = fmaf(t.y, xv[16 + 4 * k + 3], a);
		}
		return (a * 32768.0f) * e8m0_half(b[0]);
	} else {
		int q[32];
		float d[2], m[2], a0 = 0.0f, a1 = 0.0f;
		unit<T>(b, s, q, d, m);
#pragma unroll
		for (int i = 0; i < 16; i++) {
			a0 = fmaf((float)q[i], xv[i], a0);
			a1 = fmaf((float)q[i + 16], xv[i + 16], a1);
		}
		float r = fmaf(d[0], a0, d[1] * a1);
		if constexpr (G::MIN)
			r = fmaf(m[0], sum16(xv), fmaf(m[1], sum16(xv + 16), r));
		return r;
	}
}

/* the 32 activations of unit u (16-byte aligned) */
__device__ __forceinline__ void load_x(const float *x, uint32_t u, float (&xv)[32])
{
	const float4 *p = reinterpret_cast<const float4 *>(x + 32 * (uint64_t)u);
#pragma unroll
	for (int i = 0; i < 8; i++) {
		float4 v = p[i];
		xv[4 * i] = v.x; xv[4 * i + 1] = v.y; xv[4 * i + 2] = v.z; xv[4 * i + 3] = v.w;
	}
}

} /* namespace nsq */

#endif
