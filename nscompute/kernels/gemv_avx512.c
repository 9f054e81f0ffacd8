/* gemv_avx512.c - AVX-512 (F, BW, VL, VNNI) row kernel. Only this file is compiled for
 * AVX-512; gemv.c calls it when cpu_features.c says the CPU has it.
 *
 * Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4 and the float types go to gemv_avx512_fused.c. For the
 * other types, per row and tile of up to 16 tokens, each 256-element chunk is decoded once
 * (decode_simd.h), then multiplied with every token of the tile:
 *   NS_ACT_F32: the chunk is widened exactly to floats in L1 (w = s*d [+ m], mul then add as
 *     ggml), then FMA into 4 x 16 float lanes per token; lanes are summed at the end of the row.
 *   NS_ACT_Q8: vpdpbusd on (s + 128) as u8 and xq as s8, its accumulator preloaded with
 *     -128 * sum(xq) per 4 elements, so every 32-bit lane is the exact integer sum of s * xq over
 *     4 elements; lanes are scaled by d_g * dx_g and summed in float. */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

#include <immintrin.h>
#include <string.h>

#include "decode_simd.h"
#include "fp16.h"
#include "ggml_type.h"
#include "kern_internal.h"

/* Exact widening of a decoded chunk of n (multiple of 16) elements. */
static inline void s_to_f32(const struct ns_kdec *dc, uint32_t n, bool has_min, float *wf)
{
#pragma GCC unroll 4
	for (uint32_t g = 0; g < n / 16; g++) {
		__m128i b = _mm_load_si128((const __m128i *)(dc->s + 16 * g));
		__m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));

		v = _mm512_mul_ps(v, _mm512_set1_ps(dc->d[g]));
		if (has_min)
			v = _mm512_add_ps(v, _mm512_set1_ps(dc->m[g]));
		_mm512_store_ps(wf + 16 * g, v);
	}
}

/* Float-typed row: returns the n floats of elements [k0, k0 + n), converted into wf if needed. */
static inline const float *s_float_chunk(uint32_t type, const uint8_t *row, uint64_t k0,
					 uint32_t n, float *wf)
{
	uint32_t i = 0;

	if (type == NS_TYPE_F32)
		return (const float *)(const void *)(row + 4 * k0);
	const uint8_t *p = row + 2 * k0;
	if (type == NS_TYPE_F16) {
#pragma GCC unroll 4
		for (; i + 16 <= n; i += 16)
			_mm512_store_ps(wf + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 2 * i))));
		for (; i < n; i++)
			wf[i] = ns_fp16_to_fp32(ns_le16(p + 2 * i));
	} else {
		for (; i + 16 <= n; i += 16) {
			__m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p + 2 * i)));

			_mm512_store_ps(wf + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
		}
		for (; i < n; i++)
			wf[i] = ns_bf16_to_fp32(ns_le16(p + 2 * i));
	}
	return wf;
}

static inline void s_dot_f32(const float *w, const float *x, uint32_t n, __m512 *a)
{
	__m512 a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
	uint32_t i = 0;

	for (; i + 64 <= n; i += 64) {
		a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
		a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
		a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);
		a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);
	}
	for (; i + 16 <= n; i += 16)
		a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
	if (i < n) {
		__mmask16 m = (__mmask16)((1u << (n - i)) - 1);

		a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, x + i), a1);
	}
	a[0] = a0;
	a[1] = a1;
	a[2] = a2;
	a[3] = a3;
}

static void s_rows_f32(const struct ns_kjob *j, ns_kdec_fn dec, uint64_t r0, uint64_t r1)
{
	const struct ns_kqtype *qt = j->qt;
	_Alignas(64) float wf[NS_KCHUNK];
	struct ns_kdec dc;
	__m512 acc[NS_KTILE][4];

	memset(&dc, 0, sizeof(dc));
	for (uint64_t t0 = 0; t0 < j->n_tok; t0 += NS_KTILE) {
		uint32_t nt = (uint32_t)(j->n_tok - t0 < NS_KTILE ? j->n_tok - t0 : NS_KTILE);

		for (uint64_t r = r0; r < r1; r++) {
			const uint8_t *row = j->w + r * j->row_bytes;

			for (uint32_t t = 0; t < nt; t++)
				acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
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
				__m512 s = _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]),
							 _mm512_add_ps(acc[t][2], acc[t][3]));

				j->y[(t0 + t) * j->ldy + r] = _mm512_reduce_add_ps(s);
			}
		}
	}
}

static void s_rows_q8(const struct ns_kjob *j, ns_kdec_fn dec, uint64_t r0, uint64_t r1)
{
	const struct ns_kqtype *qt = j->qt;
	const __m512i x80 = _mm512_set1_epi8((char)0x80);
	__m512i idx[4];
	struct ns_kdec dc;
	__m512 acc[NS_KTILE], accm[NS_KTILE];

	for (int c = 0; c < 4; c++)
		idx[c] = _mm512_setr_epi32(4 * c, 4 * c, 4 * c, 4 * c, 4 * c + 1, 4 * c + 1, 4 * c + 1,
					   4 * c + 1, 4 * c + 2, 4 * c + 2, 4 * c + 2, 4 * c + 2,
					   4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 3);
	memset(&dc, 0, sizeof(dc));
	for (uint64_t t0 = 0; t0 < j->n_tok; t0 += NS_KTILE) {
		uint32_t nt = (uint32_t)(j->n_tok - t0 < NS_KTILE ? j->n_tok - t0 : NS_KTILE);

		for (uint64_t r = r0; r < r1; r++) {
			const uint8_t *row = j->w + r * j->row_bytes;

			for (uint32_t t = 0; t < nt; t++)
				acc[t] = accm[t] = _mm512_setzero_ps();
			for (uint64_t k0 = 0; k0 < j->n_cols; k0 += NS_KCHUNK) {
				uint32_t n = (uint32_t)(j->n_cols - k0 < NS_KCHUNK ? j->n_cols - k0 : NS_KCHUNK);
				uint64_t g0 = k0 / NS_KGROUP;

				if (n < NS_KCHUNK) { /* partial chunk: unused groups must scale to 0 */
					memset(dc.d, 0, sizeof(dc.d));
					memset(dc.m, 0, sizeof(dc.m));
				}
				dec(row + k0 / qt->blk_elems * qt->blk_bytes, n / qt->blk_elems, &dc);
				__m512 dm = _mm512_load_ps(dc.m);
				__m512 d = _mm512_load_ps(dc.d);

				for (uint32_t t = 0; t < nt; t++) {
					uint64_t tt = t0 + t;
					const int8_t *xq = j->xq + tt * j->ldq + k0;
					const int32_t *c4 = j->c4 + tt * j->ldc + k0 / 4;
					__m512 dd = _mm512_mul_ps(d, _mm512_loadu_ps(j->dxg + tt * j->ldg + g0));
					__m512 a = acc[t];

#pragma GCC unroll 4
					for (uint32_t c = 0; c < n; c += 64) {
						__m512i u = _mm512_xor_si512(_mm512_load_si512(dc.s + c), x80);
						__m512i xv = _mm512_loadu_si512(xq + c);
						__m512i dp = _mm512_dpbusd_epi32(_mm512_loadu_si512(c4 + c / 4), u, xv);
						__m512 sc = _mm512_permutexvar_ps(idx[c / 64], dd);

						a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), sc, a);
					}
					acc[t] = a;
					if (qt->has_min)
						accm[t] = _mm512_fmadd_ps(dm, _mm512_loadu_ps(j->xsg + tt * j->ldg + g0),
									  accm[t]);
				}
			}
			for (uint32_t t = 0; t < nt; t++)
				j->y[(t0 + t) * j->ldy + r] = _mm512_reduce_add_ps(acc[t]) +
							      _mm512_reduce_add_ps(accm[t]);
		}
	}
}

/* Bit-identical to ns_kquant_x_scalar: same max (NaN ignored), same divisions, same clamp and
 * round-to-nearest-even, exact integer sums. */
void ns_kquant_x_avx512(const float *x, uint64_t n_cols, int8_t *q, float *dg, float *sg, int32_t *c)
{
	const __m512 magic = _mm512_set1_ps(0x1.8p23f), lim = _mm512_set1_ps(127.0f);
	const __m256i ones = _mm256_set1_epi8(1);

	for (uint64_t b = 0; b < n_cols / 32; b++) {
		__m512 v[2], a[2];
		float amax, dx, id;

		for (int h = 0; h < 2; h++) {
			v[h] = _mm512_loadu_ps(x + 32 * b + 16 * h);
			a[h] = _mm512_abs_ps(v[h]);
			a[h] = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a[h], a[h], _CMP_ORD_Q), a[h]);
		}
		amax = _mm512_reduce_max_ps(_mm512_max_ps(a[0], a[1]));
		dx = amax / 127.0f;
		id = (dx > 0.0f && __builtin_isfinite(dx)) ? 1.0f / dx : 0.0f;
		__m512i qi[2];
		for (int h = 0; h < 2; h++) {
			__m512 t = _mm512_mul_ps(v[h], _mm512_set1_ps(id));
			__mmask16 in = _mm512_cmp_ps_mask(t, _mm512_sub_ps(_mm512_setzero_ps(), lim), _CMP_GE_OQ) &
				       _mm512_cmp_ps_mask(t, lim, _CMP_LE_OQ);
			__mmask16 pos = _mm512_cmp_ps_mask(t, _mm512_setzero_ps(), _CMP_GT_OQ);
			__mmask16 ord = _mm512_cmp_ps_mask(t, t, _CMP_ORD_Q);
			/* out of range: 127 if > 0, else -127 if not NaN, else 0 */
			__m512 o = _mm512_maskz_mov_ps(ord, _mm512_sub_ps(_mm512_setzero_ps(), lim));
			o = _mm512_mask_mov_ps(o, pos, lim);
			t = _mm512_mask_mov_ps(o, in, t);
			t = _mm512_sub_ps(_mm512_add_ps(t, magic), magic);
			qi[h] = _mm512_cvttps_epi32(t);
		}
		__m256i q8 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(qi[0])),
						     _mm512_cvtepi32_epi8(qi[1]), 1);
		_mm256_storeu_si256((__m256i *)(q + 32 * b), q8);
		/* sums of 4 (u8 ones x s8 q), then -128 * them; group sums from the same lanes */
		__m256i s4 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, q8);
		_mm256_storeu_si256((__m256i *)(c + 8 * b), _mm256_mullo_epi32(s4, _mm256_set1_epi32(-128)));
		int32_t l[8];
		_mm256_storeu_si256((__m256i *)l, s4);
		dg[2 * b] = dg[2 * b + 1] = dx;
		sg[2 * b] = dx * (float)(l[0] + l[1] + l[2] + l[3]);
		sg[2 * b + 1] = dx * (float)(l[4] + l[5] + l[6] + l[7]);
	}
}

void ns_krows_avx512(const struct ns_kjob *j, uint64_t r0, uint64_t r1)
{
	ns_kdec_fn dec = j->qt->is_float ? NULL : s_vdec_get(j->qt->type);

	if (ns_krows_avx512_fused(j, r0, r1))
		return;
	if (!dec)
		dec = j->qt->dec;
	if (j->q8)
		s_rows_q8(j, dec, r0, r1);
	else
		s_rows_f32(j, dec, r0, r1);
}

#pragma GCC pop_options
