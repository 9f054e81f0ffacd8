/* decode_simd.h - AVX2 decoders into the common chunk form (kern_internal.h).
 *
 * Included by gemv_avx2.c and gemv_avx512.c after their `#pragma GCC target`, so every function
 * here is compiled for that file's ISA (both include AVX2 and F16C). They must produce exactly
 * what the scalar decoders in decode_scalar.c produce (tests compare them byte for byte).
 * Element order of every type is described in decode_scalar.c. */
#ifndef NS_DECODE_SIMD_H
#define NS_DECODE_SIMD_H

#include <immintrin.h>
#include <string.h>

#include "ggml_type.h"
#include "kern_internal.h"

static inline float s_h2f(const uint8_t *p)
{
	uint16_t h;

	memcpy(&h, p, 2);
	return _cvtsh_ss(h); /* F16C: exact, subnormals included */
}

/* 16 packed bytes -> 32 nibbles in element order: low nibbles then high nibbles. */
static inline __m256i s_nibbles32(const uint8_t *qs)
{
	__m128i q = _mm_loadu_si128((const __m128i *)qs);
	__m128i m = _mm_set1_epi8(15);

	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

/* 32 bits -> 32 bytes, byte e = 0x10 when bit e is set, else 0. */
static inline __m256i s_bits_to_0x10(uint32_t bits)
{
	const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
					      2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);

	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
	return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* 8 byte scales (the bytes of sc, lowest first) times d, each written twice:
 * out[2i] = out[2i+1] = d * byte_i; neg flips the sign (for mins: -(dmin * mn), exactly as the
 * scalar decoders). The bytes come in a register: reloading them from two just-written 32-bit
 * stores would miss store forwarding. */
static inline void s_scales8x2(uint64_t sc, float d, bool neg, float *out)
{
	__m128i b = _mm_cvtsi64_si128((long long)sc);
	__m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)), _mm256_set1_ps(d));

	if (neg)
		v = _mm256_xor_ps(v, _mm256_set1_ps(-0.0f));
	_mm256_store_ps(out, _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)));
	_mm256_store_ps(out + 8, _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)));
}

/* Q4_K / Q5_K: the 12 packed bytes hold 8 6-bit scales and 8 6-bit mins (see decode_scalar.c);
 * unpacked four at a time in 32-bit words. */
static inline void s_k4_sc_mn(const uint8_t *b, uint64_t *sc, uint64_t *mn)
{
	uint32_t a[3];

	memcpy(a, b + 4, 12);
	*sc = (a[0] & 0x3f3f3f3fu) |
	      (uint64_t)((a[2] & 0x0f0f0f0fu) | ((a[0] >> 2) & 0x30303030u)) << 32;
	*mn = (a[1] & 0x3f3f3f3fu) |
	      (uint64_t)(((a[2] >> 4) & 0x0f0f0f0fu) | ((a[1] >> 2) & 0x30303030u)) << 32;
}

static inline void s_k4_dm_simd(const uint8_t *b, struct ns_kdec *o)
{
	uint64_t sc, mn;

	s_k4_sc_mn(b, &sc, &mn);
	s_scales8x2(sc, s_h2f(b), false, o->d);
	s_scales8x2(mn, s_h2f(b + 2), true, o->m);
}

/* 16 signed byte scales times d. */
static inline void s_scales16_i8(const int8_t sc[16], float d, float *out)
{
	__m128i b = _mm_loadu_si128((const __m128i *)sc);
	__m256 dv = _mm256_set1_ps(d);

	_mm256_store_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), dv));
	_mm256_store_ps(out + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8))), dv));
}

static inline void s_st32(int8_t *dst, __m256i v)
{
	_mm256_store_si256((__m256i *)dst, v); /* dst is 32-byte aligned inside ns_kdec */
}

static void s_vdec_q4_0(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	for (uint32_t k = 0; k < nb; k++, b += 18) {
		o->d[2 * k] = o->d[2 * k + 1] = s_h2f(b);
		s_st32(o->s + 32 * k, _mm256_sub_epi8(s_nibbles32(b + 2), _mm256_set1_epi8(8)));
	}
}

static void s_vdec_q4_1(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	for (uint32_t k = 0; k < nb; k++, b += 20) {
		o->d[2 * k] = o->d[2 * k + 1] = s_h2f(b);
		o->m[2 * k] = o->m[2 * k + 1] = s_h2f(b + 2);
		s_st32(o->s + 32 * k, s_nibbles32(b + 4));
	}
}

static void s_vdec_q5_0(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	for (uint32_t k = 0; k < nb; k++, b += 22) {
		uint32_t qh;
		__m256i v;

		memcpy(&qh, b + 2, 4);
		v = _mm256_or_si256(s_nibbles32(b + 6), s_bits_to_0x10(qh));
		o->d[2 * k] = o->d[2 * k + 1] = s_h2f(b);
		s_st32(o->s + 32 * k, _mm256_sub_epi8(v, _mm256_set1_epi8(16)));
	}
}

static void s_vdec_q5_1(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	for (uint32_t k = 0; k < nb; k++, b += 24) {
		uint32_t qh;

		memcpy(&qh, b + 4, 4);
		o->d[2 * k] = o->d[2 * k + 1] = s_h2f(b);
		o->m[2 * k] = o->m[2 * k + 1] = s_h2f(b + 2);
		s_st32(o->s + 32 * k, _mm256_or_si256(s_nibbles32(b + 8), s_bits_to_0x10(qh)));
	}
}

static void s_vdec_q8_0(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	for (uint32_t k = 0; k < nb; k++, b += 34) {
		o->d[2 * k] = o->d[2 * k + 1] = s_h2f(b);
		s_st32(o->s + 32 * k, _mm256_loadu_si256((const __m256i *)(b + 2)));
	}
}

static void s_vdec_mxfp4(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	const __m256i kv = _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
					    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);

	for (uint32_t k = 0; k < nb; k++, b += 17) {
		uint8_t e = b[0];
		uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
		float d;

		memcpy(&d, &bits, 4);
		o->d[2 * k] = o->d[2 * k + 1] = d;
		s_st32(o->s + 32 * k, _mm256_shuffle_epi8(kv, s_nibbles32(b + 1)));
	}
}

/* (v >> sh) & mask on bytes, sh a run-time count */
static inline __m256i s_srl_mask(__m256i v, int sh, int mask)
{
	return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(sh)), _mm256_set1_epi8((char)mask));
}

static void s_vdec_q2_k(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	(void)nb;
	ns_kdec_q2k_dm(b, o);
	for (int n = 0; n < 2; n++) {
		__m256i q = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * n));

		for (int j = 0; j < 4; j++)
			s_st32(o->s + 128 * n + 32 * j, s_srl_mask(q, 2 * j, 3));
	}
}

static void s_vdec_q3_k(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	const __m256i hm = _mm256_loadu_si256((const __m256i *)b);

	(void)nb;
	ns_kdec_q3k_dm(b, o);
	for (int n = 0; n < 2; n++) {
		__m256i q = _mm256_loadu_si256((const __m256i *)(b + 32 + 32 * n));

		for (int j = 0; j < 4; j++) {
			__m256i bit = _mm256_set1_epi8((char)(1 << (4 * n + j)));
			__m256i unset = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), _mm256_setzero_si256());
			__m256i four = _mm256_and_si256(unset, _mm256_set1_epi8(4));

			s_st32(o->s + 128 * n + 32 * j, _mm256_sub_epi8(s_srl_mask(q, 2 * j, 3), four));
		}
	}
}

static void s_vdec_q4_k(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	(void)nb;
	s_k4_dm_simd(b, o);
	for (int j = 0; j < 4; j++) {
		__m256i q = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * j));

		s_st32(o->s + 64 * j, _mm256_and_si256(q, _mm256_set1_epi8(15)));
		s_st32(o->s + 64 * j + 32, s_srl_mask(q, 4, 15));
	}
}

static void s_vdec_q5_k(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));

	(void)nb;
	s_k4_dm_simd(b, o);
	for (int j = 0; j < 4; j++) {
		__m256i q = _mm256_loadu_si256((const __m256i *)(b + 48 + 32 * j));
		__m256i h1 = _mm256_slli_epi16(s_srl_mask(qh, 2 * j, 1), 4);
		__m256i h2 = _mm256_slli_epi16(s_srl_mask(qh, 2 * j + 1, 1), 4);

		s_st32(o->s + 64 * j, _mm256_or_si256(_mm256_and_si256(q, _mm256_set1_epi8(15)), h1));
		s_st32(o->s + 64 * j + 32, _mm256_or_si256(s_srl_mask(q, 4, 15), h2));
	}
}

static void s_vdec_q6_k(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
	const __m256i off = _mm256_set1_epi8(32);

	(void)nb;
	s_scales16_i8((const int8_t *)(b + 192), s_h2f(b + 208), o->d);
	for (int n = 0; n < 2; n++) {
		__m256i l0 = _mm256_loadu_si256((const __m256i *)(b + 64 * n));
		__m256i l1 = _mm256_loadu_si256((const __m256i *)(b + 64 * n + 32));
		__m256i h = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * n));
		__m256i q1 = _mm256_or_si256(_mm256_and_si256(l0, m4),
					     _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
		__m256i q2 = _mm256_or_si256(_mm256_and_si256(l1, m4),
					     _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
		__m256i q3 = _mm256_or_si256(s_srl_mask(l0, 4, 15), _mm256_and_si256(h, m30));
		__m256i q4 = _mm256_or_si256(s_srl_mask(l1, 4, 15),
					     _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));

		s_st32(o->s + 128 * n, _mm256_sub_epi8(q1, off));
		s_st32(o->s + 128 * n + 32, _mm256_sub_epi8(q2, off));
		s_st32(o->s + 128 * n + 64, _mm256_sub_epi8(q3, off));
		s_st32(o->s + 128 * n + 96, _mm256_sub_epi8(q4, off));
	}
}

/* The SIMD decoder of a type, or NULL. */
static inline ns_kdec_fn s_vdec_get(uint32_t type)
{
	switch (type) {
	case NS_TYPE_Q4_0: return s_vdec_q4_0;
	case NS_TYPE_Q4_1: return s_vdec_q4_1;
	case NS_TYPE_Q5_0: return s_vdec_q5_0;
	case NS_TYPE_Q5_1: return s_vdec_q5_1;
	case NS_TYPE_Q8_0: return s_vdec_q8_0;
	case NS_TYPE_MXFP4: return s_vdec_mxfp4;
	case NS_TYPE_Q2_K: return s_vdec_q2_k;
	case NS_TYPE_Q3_K: return s_vdec_q3_k;
	case NS_TYPE_Q4_K: return s_vdec_q4_k;
	case NS_TYPE_Q5_K: return s_vdec_q5_k;
	case NS_TYPE_Q6_K: return s_vdec_q6_k;
	default: return NULL;
	}
}

#endif
