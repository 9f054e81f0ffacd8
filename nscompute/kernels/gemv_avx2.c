/* gemv_avx2.c - AVX2 + FMA + F16C row kernel. Only this file is compiled for AVX2; gemv.c
 * calls it when cpu_features.c says the CPU has it.
 *
 * Q8_0, Q4_K, Q6_K and MXFP4 go to gemv_avx2_fused.c; the other types use the same decoded-
 * chunk structure as gemv_avx512.c, 8 lanes wide:
 *   NS_ACT_F32: exact widening of each decoded chunk, FMA into 4 x 8 float lanes per token.
 *   NS_ACT_Q8: vpmaddubsw on |s| (u8) and sign(xq, s) (s8): |s| <= 128 and |xq| <= 127, so a
 *     pair sums to at most 2 * 128 * 127 = 32512 and never saturates; vpmaddwd with ones then
 *     gives the exact integer sum of s * xq over 4 elements per 32-bit lane. */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include <immintrin.h>
#include <string.h>

#include "decode_simd.h"
#include "fp16.h"
#include "ggml_type.h"
#include "kern_internal.h"

static inline void s_to_f32(const struct ns_kdec *dc, uint32_t n, bool has_min, float *wf)
{
#pragma GCC unroll 4
	for (uint32_t g = 0; g < n / 16; g++) {
		__m256 d = _mm256_set1_ps(dc->d[g]), m = _mm256_set1_ps(dc->m[g]);

#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			__m128i b = _mm_loadl_epi64((const __m128i *)(dc->s + 16 * g + 8 * h));
			__m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), d);

			if (has_min)
				v = _mm256_add_ps(v, m);
			_mm256_store_ps(wf + 16 * g + 8 * h, v);
		}
	}
}

static inline const float *s_float_chunk(uint32_t type, const uint8_t *row, uint64_t k0,
					 uint32_t n, float *wf)
{
	uint32_t i = 0;

	if (type == NS_TYPE_F32)
		return (const float *)(const void *)(row + 4 * k0);
	const uint8_t *p = row + 2 * k0;
	if (type == NS_TYPE_F16) {
#pragma GCC unroll 4
		for (; i + 8 <= n; i += 8)
			_mm256_store_ps(wf + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i))));
		for (; i < n; i++)
			wf[i] = ns_fp16_to_fp32(ns_le16(p + 2 * i));
	} else {
		for (; i + 8 <= n; i += 8) {
			__m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * i)));

			_mm256_store_ps(wf + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
		}
		for (; i < n; i++)
			wf[i] = ns_bf16_to_fp32(ns_le16(p + 2 * i));
	}
	return wf;
}

static inline void s_dot_f32(const float *w, const float *x, uint32_t n, __m256 *a)
{
	__m256 a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
	uint32_t i = 0;

	for (; i + 32 <= n; i += 32) {
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
		a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
		a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
		a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
	}
	for (; i + 8 <= n; i += 8)
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
	if (i < n) {
		__m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
		__m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)), lane);

		a1 = _mm256_fmadd_ps(_mm256_maskload_ps(w + i, m), _mm256_maskload_ps(x + i, m), a1);
	}
	a[0] = a0;
	a[1] = a1;
	a[2] = a2;
	a[3] = a3;
}

static inline float s_hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static void s_rows_f32(const struct ns_kjob *j, ns_kdec_fn dec, uint64_t r0, uint64_t r1)
{
	const struct ns_kqtype *qt = j->qt;
	_Alignas(64) float wf[NS_KCHUNK];
	struct ns_kdec dc;
	__m256 acc[NS_KTILE][4];

	memset(&dc, 0, sizeof(dc));
	for (uint64_t t0 = 0; t0 < j->n_tok; t0 += NS_KTILE) {
		uint32_t nt = (uint32_t)(j->n_tok - t0 < NS_KTILE ? j->n_tok - t0 : NS_KTILE);

		for (uint64_t r = r0; r < r1; r++) {
			const uint8_t *row = j->w + r * j->row_bytes;

			for (uint32_t t = 0; t < nt; t++)
				acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm256_setzero_ps();
			for (uint64_t k0 = 0; k0 < j->n_cols; k0 += NS_KCHUNK) {
				uint32_t n = (uint32_t)(j->n_cols - k0 < NS_KCHUNK ? j->n_cols - k0 : NS_KCHUNK);
				const float *w;

				if (qt->is_float) {
					w = s_float_chunk(qt->type, row, k0, n, wf);
				} else {
					dec(row + k0 / qt->blk_elems * qt->blk_bytes, n / qt->blk_elems, &dc);
					s_to_f32(&dc, n, qt->has_min, wf);
					w = wf;
				}
				for (uint32_t t = 0; t < nt; t++)
					s_dot_f32(w, j->x + (t0 + t) * j->ldx + k0, n, acc[t]);
			}
			for (uint32_t t = 0; t < nt; t++) {
				__m256 s = _mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]),
							 _mm256_add_ps(acc[t][2], acc[t][3]));

				j->y[(t0 + t) * j->ldy + r] = s_hsum(s);
			}
		}
	}
}

static void s_rows_q8(const struct ns_kjob *j, ns_kdec_fn dec, uint64_t r0, uint64_t r1)
{
	const struct ns_kqtype *qt = j->qt;
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i idx[4];
	struct ns_kdec dc;
	__m256 acc[NS_KTILE], accm[NS_KTILE];

	for (int c = 0; c < 4; c++)
		idx[c] = _mm256_setr_epi32(2 * c, 2 * c, 2 * c, 2 * c, 2 * c + 1, 2 * c + 1, 2 * c + 1,
					   2 * c + 1);
	memset(&dc, 0, sizeof(dc));
	for (uint64_t t0 = 0; t0 < j->n_tok; t0 += NS_KTILE) {
		uint32_t nt = (uint32_t)(j->n_tok - t0 < NS_KTILE ? j->n_tok - t0 : NS_KTILE);

		for (uint64_t r = r0; r < r1; r++) {
			const uint8_t *row = j->w + r * j->row_bytes;

			for (uint32_t t = 0; t < nt; t++)
				acc[t] = accm[t] = _mm256_setzero_ps();
			for (uint64_t k0 = 0; k0 < j->n_cols; k0 += NS_KCHUNK) {
				uint32_t n = (uint32_t)(j->n_cols - k0 < NS_KCHUNK ? j->n_cols - k0 : NS_KCHUNK);
				uint64_t g0 = k0 / NS_KGROUP;

				if (n < NS_KCHUNK) {
					memset(dc.d, 0, sizeof(dc.d));
					memset(dc.m, 0, sizeof(dc.m));
				}
				dec(row + k0 / qt->blk_elems * qt->blk_bytes, n / qt->blk_elems, &dc);
				__m256 dlo = _mm256_load_ps(dc.d), dhi = _mm256_load_ps(dc.d + 8);
				__m256 mlo = _mm256_load_ps(dc.m), mhi = _mm256_load_ps(dc.m + 8);

				for (uint32_t t = 0; t < nt; t++) {
					uint64_t tt = t0 + t;
					const int8_t *xq = j->xq + tt * j->ldq + k0;
					const float *dxg = j->dxg + tt * j->ldg + g0;
					__m256 ddlo = _mm256_mul_ps(dlo, _mm256_loadu_ps(dxg));
					__m256 ddhi = _mm256_mul_ps(dhi, _mm256_loadu_ps(dxg + 8));
					__m256 a = acc[t];

#pragma GCC unroll 4
					for (uint32_t c = 0; c < n; c += 32) {
						__m256i sv = _mm256_load_si256((const __m256i *)(dc.s + c));
						__m256i xv = _mm256_loadu_si256((const __m256i *)(xq + c));
						__m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(sv),
										 _mm256_sign_epi8(xv, sv));
						__m256 sc = _mm256_permutevar8x32_ps(c < 128 ? ddlo : ddhi,
										     idx[(c / 32) % 4]);

						p = _mm256_madd_epi16(p, ones);
						a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sc, a);
					}
					acc[t] = a;
					if (qt->has_min) {
						const float *xsg = j->xsg + tt * j->ldg + g0;
						__m256 am = _mm256_fmadd_ps(mlo, _mm256_loadu_ps(xsg), accm[t]);

						accm[t] = _mm256_fmadd_ps(mhi, _mm256_loadu_ps(xsg + 8), am);
					}
				}
			}
			for (uint32_t t = 0; t < nt; t++)
				j->y[(t0 + t) * j->ldy + r] = s_hsum(acc[t]) + s_hsum(accm[t]);
		}
	}
}

/* Bit-identical to ns_kquant_x_scalar (see ns_kquant_x_avx512). */
void ns_kquant_x_avx2(const float *x, uint64_t n_cols, int8_t *q, float *dg, float *sg, int32_t *c)
{
	const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	const __m256 magic = _mm256_set1_ps(0x1.8p23f), lim = _mm256_set1_ps(127.0f);
	const __m256 nlim = _mm256_set1_ps(-127.0f), zero = _mm256_setzero_ps();

	for (uint64_t b = 0; b < n_cols / 32; b++) {
		__m256 v[4], m = zero;
		__m256i qi[4];
		float amax, dx, id;

		for (int h = 0; h < 4; h++) {
			v[h] = _mm256_loadu_ps(x + 32 * b + 8 * h);
			__m256 a = _mm256_and_ps(v[h], absm);
			m = _mm256_max_ps(m, _mm256_and_ps(a, _mm256_cmp_ps(a, a, _CMP_ORD_Q)));
		}
		__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
		m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
		m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
		amax = _mm_cvtss_f32(m4);
		dx = amax / 127.0f;
		id = (dx > 0.0f && __builtin_isfinite(dx)) ? 1.0f / dx : 0.0f;
		for (int h = 0; h < 4; h++) {
			__m256 t = _mm256_mul_ps(v[h], _mm256_set1_ps(id));
			__m256 in = _mm256_and_ps(_mm256_cmp_ps(t, nlim, _CMP_GE_OQ), _mm256_cmp_ps(t, lim, _CMP_LE_OQ));
			__m256 o = _mm256_and_ps(_mm256_cmp_ps(t, t, _CMP_ORD_Q), nlim);

			o = _mm256_blendv_ps(o, lim, _mm256_cmp_ps(t, zero, _CMP_GT_OQ));
			t = _mm256_blendv_ps(o, t, in);
			t = _mm256_sub_ps(_mm256_add_ps(t, magic), magic);
			qi[h] = _mm256_cvttps_epi32(t);
		}
		/* packs work per 128-bit lane: fix the order with one dword permute */
		__m256i w16a = _mm256_packs_epi32(qi[0], qi[1]), w16b = _mm256_packs_epi32(qi[2], qi[3]);
		__m256i q8 = _mm256_packs_epi16(w16a, w16b);

		q8 = _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
		_mm256_storeu_si256((__m256i *)(q + 32 * b), q8);
		__m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q8),
					       _mm256_set1_epi16(1));
		_mm256_storeu_si256((__m256i *)(c + 8 * b), _mm256_mullo_epi32(s4, _mm256_set1_epi32(-128)));
		int32_t l[8];
		_mm256_storeu_si256((__m256i *)l, s4);
		dg[2 * b] = dg[2 * b + 1] = dx;
		sg[2 * b] = dx * (float)(l[0] + l[1] + l[2] + l[3]);
		sg[2 * b + 1] = dx * (float)(l[4] + l[5] + l[6] + l[7]);
	}
}

void ns_krows_avx2(const struct ns_kjob *j, uint64_t r0, uint64_t r1)
{
	ns_kdec_fn dec = j->qt->is_float ? NULL : s_vdec_get(j->qt->type);

	if (ns_krows_avx2_fused(j, r0, r1))
		return;
	if (!dec)
		dec = j->qt->dec;
	if (j->q8)
		s_rows_q8(j, dec, r0, r1);
	else
		s_rows_f32(j, dec, r0, r1);
}

bool ns_kdec_avx2(uint32_t type, const uint8_t *src, uint32_t nb, struct ns_kdec *out)
{
	ns_kdec_fn dec = s_vdec_get(type);

	if (!dec)
		return false;
	dec(src, nb, out);
	return true;
}

#pragma GCC pop_options
