/* gemm_i8_vnni.c - the int8 GEMM's packing of weight panels and its AVX-512 VNNI kernel
 * (layouts in i8_internal.h, definition in gemm_i8.h).
 *
 * Kernel: a tile of NT tokens x 2 panels (32 rows). Per scale block, each token's int32 lanes
 * start at the panel's correction (-128 * sum s) and take B/4 vpdpbusd of the packed weights
 * with the token's 4 unsigned activation bytes broadcast, so lane i holds I_b of row i exactly;
 * then acc = fma(d * dx, (float)I_b, acc) (and fma(m, xs, acc)), block after block: the
 * scalar definition's operations on 16 rows at once. NT = 6 keeps 12 integer and 12 float
 * accumulators in registers. */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

#include <immintrin.h>
#include <string.h>

#include "decode_simd.h"
#include "i8_internal.h"

#define S_NT 6 /* tokens per register tile */

/* r[0..15] (row i: 16 dwords) -> r[c] = dword c of every row (a 16 x 16 transpose). */
static inline void s_transpose16(__m512i *r)
{
	__m512i t[16], u[16];

	for (int i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
	}
	/* u[4i + j], 128-bit lane L: dword 4L + j of rows 4i .. 4i + 3 */
	for (int i = 0; i < 4; i++) {
		u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
		u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
	}
	for (int j = 0; j < 4; j++) {
		__m512i p0 = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
		__m512i p1 = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
		__m512i q0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
		__m512i q1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(3, 2, 3, 2));

		r[j] = _mm512_shuffle_i32x4(p0, q0, _MM_SHUFFLE(2, 0, 2, 0));
		r[4 + j] = _mm512_shuffle_i32x4(p0, q0, _MM_SHUFFLE(3, 1, 3, 1));
		r[8 + j] = _mm512_shuffle_i32x4(p1, q1, _MM_SHUFFLE(2, 0, 2, 0));
		r[12 + j] = _mm512_shuffle_i32x4(p1, q1, _MM_SHUFFLE(3, 1, 3, 1));
	}
}

/* Decode 16 rows chunk by chunk (SIMD decoders where the type has one), interleave them by
 * 4 bytes with a 16 x 16 dword transpose per 64 columns, gather the scales, then the
 * corrections: -(vpdpbusd of 0x80 bytes with the packed block) = -128 * sum s per row. */
void ns_i8_pack(const struct ns_i8job *j, uint64_t r0, uint32_t n, uint8_t *base)
{
	const struct ns_kqtype *qt = j->qt;
	const uint32_t B = j->blk;
	ns_kdec_fn dec = s_vdec_get(qt->type);
	struct ns_i8panel p = ns_i8_panel(j, base);
	const __m512i ones = _mm512_set1_epi8((char)0x80);
	_Alignas(64) struct ns_kdec dc[NS_I8_PANEL];

	if (!dec)
		dec = qt->dec;
	memset(dc, 0, sizeof(dc)); /* rows past n stay zero: s = 0, d = m = 0 */
	for (uint64_t k0 = 0; k0 < j->n_cols; k0 += NS_KCHUNK) {
		uint32_t nk = (uint32_t)(j->n_cols - k0 < NS_KCHUNK ? j->n_cols - k0 : NS_KCHUNK);
		uint64_t b0 = k0 / B;
		int8_t *dst = p.wq + k0 * NS_I8_PANEL; /* [k/4][16][4] */
		uint32_t c = 0;

		for (uint32_t i = 0; i < n; i++)
			dec(j->w + (r0 + i) * j->row_bytes + k0 / qt->blk_elems * qt->blk_bytes,
			    nk / qt->blk_elems, &dc[i]);
		for (; c + 64 <= nk; c += 64) {
			__m512i r[16];

			for (int i = 0; i < 16; i++)
				r[i] = _mm512_load_si512(dc[i].s + c);
			s_transpose16(r);
			for (int i = 0; i < 16; i++)
				_mm512_store_si512(dst + (c / 4 + (uint32_t)i) * 64, r[i]);
		}
		for (; c < nk; c += 4) /* a last half slab (32-element types) */
			for (uint32_t i = 0; i < NS_I8_PANEL; i++)
				memcpy(dst + (c / 4) * 64 + 4 * i, dc[i].s + c, 4);
		for (uint32_t bb = 0; bb < nk / B; bb++)
			for (uint32_t i = 0; i < NS_I8_PANEL; i++) {
				p.d[(b0 + bb) * 16 + i] = dc[i].d[bb * B / NS_KGROUP];
				p.m[(b0 + bb) * 16 + i] = dc[i].m[bb * B / NS_KGROUP];
			}
		for (uint32_t bb = 0; bb < nk / B; bb++) {
			const int8_t *wb = dst + (uint64_t)bb * B * NS_I8_PANEL;
			__m512i v = _mm512_setzero_si512();

			for (uint32_t k4 = 0; k4 < B / 4; k4++)
				v = _mm512_dpbusd_epi32(v, ones, _mm512_load_si512(wb + 64 * k4));
			_mm512_store_si512(p.corr + (b0 + bb) * 16, _mm512_sub_epi32(_mm512_setzero_si512(), v));
		}
	}
}

/* Tokens [t0, t0 + nt) x panels pa (and pb when two) -> y. */
static inline __attribute__((always_inline)) void
s_tile(const struct ns_i8job *j, const struct ns_i8panel *pa, const struct ns_i8panel *pb,
       uint64_t t0, const int nt, const bool two, const uint32_t B, const bool has_min,
       uint64_t r0)
{
	__m512 fa[S_NT], fb[S_NT];
	__m512i ia[S_NT], ib[S_NT];
	const uint8_t *xu = j->xu + t0 * j->ldu;

#pragma GCC unroll 6
	for (int t = 0; t < nt; t++)
		fa[t] = fb[t] = _mm512_setzero_ps();
	for (uint64_t b = 0; b < j->nb; b++) {
		const int8_t *wa = pa->wq + b * B * NS_I8_PANEL;
		const int8_t *wb = two ? pb->wq + b * B * NS_I8_PANEL : NULL;
		__m512 da, db = _mm512_setzero_ps();

#pragma GCC unroll 6
		for (int t = 0; t < nt; t++) {
			ia[t] = _mm512_load_si512(pa->corr + b * 16);
			if (two)
				ib[t] = _mm512_load_si512(pb->corr + b * 16);
		}
#pragma GCC unroll 8
		for (uint32_t k4 = 0; k4 < B / 4; k4++) {
			__m512i va = _mm512_load_si512(wa + 64 * k4);
			__m512i vb = two ? _mm512_load_si512(wb + 64 * k4) : va;

#pragma GCC unroll 6
			for (int t = 0; t < nt; t++) {
				int32_t x4;

				memcpy(&x4, xu + t * j->ldu + b * B + 4 * k4, 4);
				__m512i xb = _mm512_set1_epi32(x4);

				ia[t] = _mm512_dpbusd_epi32(ia[t], xb, va);
				if (two)
					ib[t] = _mm512_dpbusd_epi32(ib[t], xb, vb);
			}
		}
		da = _mm512_load_ps(pa->d + b * 16);
		if (two)
			db = _mm512_load_ps(pb->d + b * 16);
#pragma GCC unroll 6
		for (int t = 0; t < nt; t++) {
			__m512 dx = _mm512_set1_ps(j->dxb[(t0 + t) * j->ldb + b]);

			fa[t] = _mm512_fmadd_ps(_mm512_mul_ps(da, dx), _mm512_cvtepi32_ps(ia[t]), fa[t]);
			if (two)
				fb[t] = _mm512_fmadd_ps(_mm512_mul_ps(db, dx), _mm512_cvtepi32_ps(ib[t]),
							fb[t]);
		}
		if (has_min) {
			__m512 ma = _mm512_load_ps(pa->m + b * 16);
			__m512 mb = two ? _mm512_load_ps(pb->m + b * 16) : ma;

#pragma GCC unroll 6
			for (int t = 0; t < nt; t++) {
				__m512 xs = _mm512_set1_ps(j->xsb[(t0 + t) * j->ldb + b]);

				fa[t] = _mm512_fmadd_ps(ma, xs, fa[t]);
				if (two)
					fb[t] = _mm512_fmadd_ps(mb, xs, fb[t]);
			}
		}
	}
	{
		uint64_t left = j->n_rows - r0;
		__mmask16 ka = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
		__mmask16 kb = left >= 32 ? 0xffff : left <= 16 ? 0 :
			       (__mmask16)((1u << (left - 16)) - 1);

#pragma GCC unroll 6
		for (int t = 0; t < nt; t++) {
			float *y = j->y + (t0 + t) * j->ldy + r0;

			_mm512_mask_storeu_ps(y, ka, fa[t]);
			if (two)
				_mm512_mask_storeu_ps(y + 16, kb, fb[t]);
		}
	}
}

/* The tile with every shape argument a constant: nt tokens, one or two panels, B, minimum. */
#define S_TILE_FN(name, nt, two, B, mn)                                                    \
	static void name(const struct ns_i8job *j, const struct ns_i8panel *pa,            \
			 const struct ns_i8panel *pb, uint64_t t0, uint64_t r0)             \
	{                                                                                   \
		s_tile(j, pa, pb, t0, nt, two, B, mn, r0);                                  \
	}
#define S_TILE_SET(nt)                                                                      \
	S_TILE_FN(s_t##nt##_1_16, nt, false, 16, false)                                     \
	S_TILE_FN(s_t##nt##_2_16, nt, true, 16, false)                                      \
	S_TILE_FN(s_t##nt##_1_16m, nt, false, 16, true)                                     \
	S_TILE_FN(s_t##nt##_2_16m, nt, true, 16, true)                                      \
	S_TILE_FN(s_t##nt##_1_32, nt, false, 32, false)                                     \
	S_TILE_FN(s_t##nt##_2_32, nt, true, 32, false)                                      \
	S_TILE_FN(s_t##nt##_1_32m, nt, false, 32, true)                                     \
	S_TILE_FN(s_t##nt##_2_32m, nt, true, 32, true)
S_TILE_SET(1)
S_TILE_SET(2)
S_TILE_SET(3)
S_TILE_SET(4)
S_TILE_SET(5)
S_TILE_SET(6)

typedef void (*s_tile_fn)(const struct ns_i8job *, const struct ns_i8panel *,
			  const struct ns_i8panel *, uint64_t, uint64_t);

#define S_ROW(nt)                                                                           \
	{ s_t##nt##_1_16, s_t##nt##_2_16, s_t##nt##_1_16m, s_t##nt##_2_16m,                 \
	  s_t##nt##_1_32, s_t##nt##_2_32, s_t##nt##_1_32m, s_t##nt##_2_32m }
static const s_tile_fn s_tiles[S_NT][8] = { S_ROW(1), S_ROW(2), S_ROW(3),
					    S_ROW(4), S_ROW(5), S_ROW(6) };

void ns_i8_panels_vnni(const struct ns_i8job *j, uint8_t *panels, uint32_t np, uint64_t r0)
{
	uint32_t v = (j->blk == 32 ? 4 : 0) + (j->has_min ? 2 : 0);

	for (uint64_t t0 = 0; t0 < j->n_tok; t0 += S_NT) {
		uint64_t nt = j->n_tok - t0 < S_NT ? j->n_tok - t0 : S_NT;

		for (uint32_t p = 0; p < np; p += 2) {
			struct ns_i8panel pa = ns_i8_panel(j, panels + p * j->panel_bytes);
			bool two = p + 1 < np;
			struct ns_i8panel pb = two ? ns_i8_panel(j, panels + (p + 1) * j->panel_bytes) : pa;

			s_tiles[nt - 1][v + (two ? 1 : 0)](j, &pa, &pb, t0, r0 + (uint64_t)p * NS_I8_PANEL);
		}
	}
}

#pragma GCC pop_options
