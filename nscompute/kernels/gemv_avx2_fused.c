/* gemv_avx2_fused.c - AVX2 row kernels that unpack the hot types (Q8_0, Q4_K, Q6_K, MXFP4)
 * in registers; the AVX2 counterpart of gemv_avx512_fused.c (same contract and structure,
 * 32 elements per step).
 *   f32 mode: w = (float)s * d_g [+ m_g] exactly, FMA with x into four 8-lane accumulators.
 *   q8 mode: vpmaddubsw of an unsigned operand with a signed one, vpmaddwd with ones: exact
 *     integer sums of 4 products per 32-bit lane. Signed weights use |s| and sign(xq, s)
 *     (|s| <= 128, |xq| <= 127: a pair is at most 32512, no saturation); unsigned weights
 *     (Q4_K 0..15, Q6_K 0..63) go in directly, Q6_K's -32 offset added back exactly. */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include <immintrin.h>
#include <string.h>

#include "decode_simd.h"
#include "e8m0_table.h"
#include "ggml_type.h"
#include "kern_internal.h"

struct s_fx {
	const struct ns_kjob *j;
	uint64_t t0;
	uint32_t nt;
};

#define S_TOK(f, t) ((f)->t0 + (t))

/* software prefetch distance into the weight stream (see gemv_avx512_fused.c) */
#define S_PF_DIST 4096

static inline void s_pf(const uint8_t *p, uint32_t n)
{
	for (uint32_t o = 0; o < n; o += 64)
		_mm_prefetch((const char *)p + S_PF_DIST + o, _MM_HINT_T0);
}

/* 32 signed values in z, scales d[0] (elements 0..15) and d[1] (16..31), offsets m or NULL,
 * exact floats -> w[0..3] */
static inline void s_w32(__m256i z, const float *d, const float *m, __m256 *w)
{
	__m128i lo = _mm256_castsi256_si128(z), hi = _mm256_extracti128_si256(z, 1);

	w[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
	w[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
	w[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
	w[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
	w[0] = _mm256_mul_ps(w[0], _mm256_set1_ps(d[0]));
	w[1] = _mm256_mul_ps(w[1], _mm256_set1_ps(d[0]));
	w[2] = _mm256_mul_ps(w[2], _mm256_set1_ps(d[1]));
	w[3] = _mm256_mul_ps(w[3], _mm256_set1_ps(d[1]));
	if (m) {
		w[0] = _mm256_add_ps(w[0], _mm256_set1_ps(m[0]));
		w[1] = _mm256_add_ps(w[1], _mm256_set1_ps(m[0]));
		w[2] = _mm256_add_ps(w[2], _mm256_set1_ps(m[1]));
		w[3] = _mm256_add_ps(w[3], _mm256_set1_ps(m[1]));
	}
}

static inline void s_fma32(const __m256 *w, const float *x, __m256 *a)
{
	a[0] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(x), a[0]);
	a[1] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(x + 8), a[1]);
	a[2] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(x + 16), a[2]);
	a[3] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(x + 24), a[3]);
}

static inline float s_hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static inline float s_sum4(const __m256 *a)
{
	return s_hsum(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3])));
}

/* exact sums of 4 products per lane: signed s (32) with signed xq (32) */
static inline __m256i s_dot_ss(__m256i s, const int8_t *xq)
{
	__m256i x = _mm256_loadu_si256((const __m256i *)xq);
	__m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(s), _mm256_sign_epi8(x, s));

	return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* unsigned u (<= 63) with signed xq */
static inline __m256i s_dot_us(__m256i u, const int8_t *xq)
{
	__m256i p = _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)xq));

	return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* [a x 4 lanes, b x 4 lanes] */
static inline __m256 s_pair(float a, float b)
{
	return _mm256_insertf128_ps(_mm256_set1_ps(a), _mm_set1_ps(b), 1);
}

/* ---- 32-element block types: Q8_0 and MXFP4 ---- */

static inline __m256i s_mxfp4_32(const uint8_t *p)
{
	const __m256i kv = _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
					    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);

	return _mm256_shuffle_epi8(kv, s_nibbles32(p + 1));
}

static inline float s_e8m0_half(uint8_t e)
{
	return ns_e8m0_half_tab[e];
}

static inline __attribute__((always_inline)) void
s_blk_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt, bool mx)
{
	const struct ns_kjob *j = f->j;
	uint64_t nb = j->n_cols / 32;
	__m256 acc[NS_KTILE][4];

	for (uint32_t t = 0; t < nt; t++)
		acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm256_setzero_ps();
	for (uint64_t b = 0; b < nb; b++) {
		const uint8_t *p = row + (mx ? 17 : 34) * b;
		__m256i z = mx ? s_mxfp4_32(p) : _mm256_loadu_si256((const __m256i *)(p + 2));
		float d = mx ? s_e8m0_half(p[0]) : s_h2f(p);
		float dd[2] = { d, d };

		if (b % 4 == 0)
			s_pf(p, 4 * (mx ? 17 : 34));
		__m256 w[4];

		s_w32(z, dd, NULL, w);
		for (uint32_t t = 0; t < nt; t++)
			s_fma32(w, j->x + S_TOK(f, t) * j->ldx + 32 * b, acc[t]);
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_sum4(acc[t]);
}

static inline __attribute__((always_inline)) void
s_blk_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt, bool mx)
{
	const struct ns_kjob *j = f->j;
	uint64_t nb = j->n_cols / 32;
	__m256 acc[NS_KTILE];

	for (uint32_t t = 0; t < nt; t++)
		acc[t] = _mm256_setzero_ps();
	for (uint64_t b = 0; b < nb; b++) {
		const uint8_t *p = row + (mx ? 17 : 34) * b;
		__m256i z = mx ? s_mxfp4_32(p) : _mm256_loadu_si256((const __m256i *)(p + 2));
		float d = mx ? s_e8m0_half(p[0]) : s_h2f(p);

		if (b % 4 == 0)
			s_pf(p, 4 * (mx ? 17 : 34));
		for (uint32_t t = 0; t < nt; t++) {
			uint64_t tt = S_TOK(f, t);
			__m256i dp = s_dot_ss(z, j->xq + tt * j->ldq + 32 * b);
			float sc = d * j->dxg[tt * j->ldg + 2 * b];

			acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dp), _mm256_set1_ps(sc), acc[t]);
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_hsum(acc[t]);
}

static inline __attribute__((always_inline)) void
s_q8_0_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	s_blk_f32_impl(f, row, out, nt, false);
}

static inline __attribute__((always_inline)) void
s_q8_0_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	s_blk_q8_impl(f, row, out, nt, false);
}

static inline __attribute__((always_inline)) void
s_mxfp4_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	s_blk_f32_impl(f, row, out, nt, true);
}

static inline __attribute__((always_inline)) void
s_mxfp4_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	s_blk_q8_impl(f, row, out, nt, true);
}

/* ---- Q4_K ---- */

static inline __attribute__((always_inline)) void
s_q4_k_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	const struct ns_kjob *j = f->j;
	uint64_t nsb = j->n_cols / 256;
	struct ns_kdec dm;
	__m256 acc[NS_KTILE][4];

	for (uint32_t t = 0; t < nt; t++)
		acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm256_setzero_ps();
	for (uint64_t sb = 0; sb < nsb; sb++) {
		const uint8_t *p = row + 144 * sb;

		s_pf(p, 144);
		s_k4_dm_simd(p, &dm);
#pragma GCC unroll 4
		for (int c = 0; c < 4; c++) {
			__m256i q = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * c));
			__m256 wl[4], wh[4];

			s_w32(_mm256_and_si256(q, _mm256_set1_epi8(15)), dm.d + 4 * c, dm.m + 4 * c, wl);
			s_w32(s_srl_mask(q, 4, 15), dm.d + 4 * c + 2, dm.m + 4 * c + 2, wh);
			for (uint32_t t = 0; t < nt; t++) {
				const float *x = j->x + S_TOK(f, t) * j->ldx + 256 * sb + 64 * c;

				s_fma32(wl, x, acc[t]);
				s_fma32(wh, x + 32, acc[t]);
			}
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_sum4(acc[t]);
}

static inline __attribute__((always_inline)) void
s_q4_k_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	const struct ns_kjob *j = f->j;
	uint64_t nsb = j->n_cols / 256;
	struct ns_kdec dm;
	__m256 acc[NS_KTILE], accm[NS_KTILE];

	for (uint32_t t = 0; t < nt; t++)
		acc[t] = accm[t] = _mm256_setzero_ps();
	for (uint64_t sb = 0; sb < nsb; sb++) {
		const uint8_t *p = row + 144 * sb;
		__m256i u[8];

		s_pf(p, 144);
		s_k4_dm_simd(p, &dm);
#pragma GCC unroll 4
		for (int c = 0; c < 4; c++) {
			__m256i q = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * c));

			u[2 * c] = _mm256_and_si256(q, _mm256_set1_epi8(15));
			u[2 * c + 1] = s_srl_mask(q, 4, 15);
		}
		for (uint32_t t = 0; t < nt; t++) {
			uint64_t tt = S_TOK(f, t);
			const int8_t *xq = j->xq + tt * j->ldq + 256 * sb;
			const float *dxg = j->dxg + tt * j->ldg + 16 * sb;
			const float *xsg = j->xsg + tt * j->ldg + 16 * sb;
			__m256 a = acc[t];

#pragma GCC unroll 8
			for (int s = 0; s < 8; s++) /* 32-element sub-block s: one scale */
				a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s_dot_us(u[s], xq + 32 * s)),
						    _mm256_set1_ps(dm.d[2 * s] * dxg[2 * s]), a);
			acc[t] = a;
			__m256 am = _mm256_fmadd_ps(_mm256_load_ps(dm.m), _mm256_loadu_ps(xsg), accm[t]);
			accm[t] = _mm256_fmadd_ps(_mm256_load_ps(dm.m + 8), _mm256_loadu_ps(xsg + 8), am);
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_hsum(acc[t]) + s_hsum(accm[t]);
}

/* ---- Q6_K ---- */

/* Unsigned 6-bit values of elements 128n + 32k .. +31, k = 0..3 */
static inline void s_q6k_128(const uint8_t *p, int n, __m256i *q)
{
	const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
	__m256i l0 = _mm256_loadu_si256((const __m256i *)(p + 64 * n));
	__m256i l1 = _mm256_loadu_si256((const __m256i *)(p + 64 * n + 32));
	__m256i h = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * n));

	q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
	q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
	q[2] = _mm256_or_si256(s_srl_mask(l0, 4, 15), _mm256_and_si256(h, m30));
	q[3] = _mm256_or_si256(s_srl_mask(l1, 4, 15), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
}

static inline __attribute__((always_inline)) void
s_q6_k_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	const struct ns_kjob *j = f->j;
	const __m256i off = _mm256_set1_epi8(32);
	uint64_t nsb = j->n_cols / 256;
	_Alignas(32) float d[16];
	__m256 acc[NS_KTILE][4];

	for (uint32_t t = 0; t < nt; t++)
		acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm256_setzero_ps();
	for (uint64_t sb = 0; sb < nsb; sb++) {
		const uint8_t *p = row + 210 * sb;

		s_pf(p, 210);
		s_scales16_i8((const int8_t *)(p + 192), s_h2f(p + 208), d);
#pragma GCC unroll 2
		for (int n = 0; n < 2; n++) {
			__m256i q[4];

			s_q6k_128(p, n, q);
#pragma GCC unroll 4
			for (int k = 0; k < 4; k++) {
				__m256 w[4];

				s_w32(_mm256_sub_epi8(q[k], off), d + 8 * n + 2 * k, NULL, w);
				for (uint32_t t = 0; t < nt; t++)
					s_fma32(w, j->x + S_TOK(f, t) * j->ldx + 256 * sb + 128 * n + 32 * k,
						acc[t]);
			}
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_sum4(acc[t]);
}

static inline __attribute__((always_inline)) void
s_q6_k_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	const struct ns_kjob *j = f->j;
	uint64_t nsb = j->n_cols / 256;
	_Alignas(32) float d[16];
	__m256 acc[NS_KTILE];

	for (uint32_t t = 0; t < nt; t++)
		acc[t] = _mm256_setzero_ps();
	for (uint64_t sb = 0; sb < nsb; sb++) {
		const uint8_t *p = row + 210 * sb;
		__m256i q[8];

		s_pf(p, 210);
		s_scales16_i8((const int8_t *)(p + 192), s_h2f(p + 208), d);
		s_q6k_128(p, 0, q);
		s_q6k_128(p, 1, q + 4);
		for (uint32_t t = 0; t < nt; t++) {
			uint64_t tt = S_TOK(f, t);
			const int8_t *xq = j->xq + tt * j->ldq + 256 * sb;
			const int32_t *c4 = j->c4 + tt * j->ldc + 64 * sb;
			const float *dxg = j->dxg + tt * j->ldg + 16 * sb;
			__m256 a = acc[t];

#pragma GCC unroll 8
			for (int k = 0; k < 8; k++) { /* elements 32k..32k+31: groups 2k, 2k+1 */
				__m256i corr = _mm256_srai_epi32(_mm256_loadu_si256((const __m256i *)(c4 + 8 * k)), 2);
				__m256i dp = _mm256_add_epi32(s_dot_us(q[k], xq + 32 * k), corr);

				a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dp),
						    s_pair(d[2 * k] * dxg[2 * k], d[2 * k + 1] * dxg[2 * k + 1]), a);
			}
			acc[t] = a;
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_hsum(acc[t]);
}

/* ---- entry ---- */

#define S_SPECIALIZE(name)                                                           \
	static void name(const struct s_fx *f, const uint8_t *row, float *out)        \
	{                                                                             \
		if (f->nt == 1)                                                       \
			name##_impl(f, row, out, 1);                                  \
		else                                                                  \
			name##_impl(f, row, out, f->nt);                              \
	}

S_SPECIALIZE(s_q8_0_f32)
S_SPECIALIZE(s_q8_0_q8)
S_SPECIALIZE(s_mxfp4_f32)
S_SPECIALIZE(s_mxfp4_q8)
S_SPECIALIZE(s_q4_k_f32)
S_SPECIALIZE(s_q4_k_q8)
S_SPECIALIZE(s_q6_k_f32)
S_SPECIALIZE(s_q6_k_q8)

typedef void (*s_fused_fn)(const struct s_fx *f, const uint8_t *row, float *out);

bool ns_krows_avx2_fused(const struct ns_kjob *j, uint64_t r0, uint64_t r1)
{
	s_fused_fn fn;
	bool q8 = j->q8;

	switch (j->qt->type) {
	case NS_TYPE_Q8_0: fn = q8 ? s_q8_0_q8 : s_q8_0_f32; break;
	case NS_TYPE_MXFP4: fn = q8 ? s_mxfp4_q8 : s_mxfp4_f32; break;
	case NS_TYPE_Q4_K: fn = q8 ? s_q4_k_q8 : s_q4_k_f32; break;
	case NS_TYPE_Q6_K: fn = q8 ? s_q6_k_q8 : s_q6_k_f32; break;
	default: return false;
	}
	for (uint64_t t0 = 0; t0 < j->n_tok; t0 += NS_KTILE) {
		struct s_fx f = { j, t0, (uint32_t)(j->n_tok - t0 < NS_KTILE ? j->n_tok - t0 : NS_KTILE) };

		for (uint64_t r = r0; r < r1; r++) {
			float out[NS_KTILE];

			fn(&f, j->w + r * j->row_bytes, out);
			for (uint32_t t = 0; t < f.nt; t++)
				j->y[(t0 + t) * j->ldy + r] = out[t];
		}
	}
	return true;
}

#pragma GCC pop_options
