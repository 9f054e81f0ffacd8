/* gemv_avx512_fused.c - AVX-512 row kernels that unpack the hot types (Q8_0, Q4_0, Q4_K, Q5_K,
 * Q6_K, MXFP4) in registers, with no trip through the decoded chunk of gemv_avx512.c.
 *
 * F32, F16 and BF16 rows (any length) are widened in registers the same way.
 *
 * Each function multiplies one row with the tokens [t0, t0 + nt) of the job and writes nt
 * sums to out. Weights are unpacked once per 64 elements and used for every token of the
 * tile; each token's sums depend only on that token, so a token gives the same bits alone
 * (gemv) or inside any batch (gemm).
 *   f32 mode: w = (float)s * d_g [+ m_g] exactly as ns_dequant_rows, then FMA with x into four
 *     16-lane accumulators (one per group of 16 inside each 64 elements). The 4-bit types
 *     (Q4_0, Q4_K, MXFP4) build a 16-entry table of those exact weights per block or
 *     sub-block and pick from it with vpermps, instead of converting every value.
 *   q8 mode: vpdpbusd of unsigned weights with xq, its accumulator preloaded with the offset
 *     correction (-o * sum(xq) per 4 elements), so lanes hold exact integer sums of s * xq;
 *     scaled by d_g * dx_g per group of 16 and summed in one 16-lane float accumulator.
 * Scale vectors are built in registers: loading 64 bytes just written as smaller stores would
 * miss store forwarding (that alone halved the Q4_K / Q6_K speed). Per-group scales that
 * are broadcast one at a time are the opposite case: they are stored once and broadcast from
 * memory (s_reload), a load-port op, where a broadcast from a register takes the shuffle
 * port the table lookups and widenings need (Q4_K / Q5_K / Q6_K f32 +25..40% in L2).
 * Q4_K f32 computes the scales of up to 16 superblocks before multiplying them, so the
 * latency chain scale bytes -> table -> lookup is off the main loop. The weight stream is
 * prefetched S_PF_DIST bytes ahead. The MXFP4 q8 kernel uses AVX512-VBMI (vpermb) when the
 * CPU has it (Ice Lake and later), the older one otherwise. */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

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

/* ---- shared pieces ---- */

/* 64 signed values in z, group scales d[0..3] (and offsets m[0..3]) -> a[0..3] += w * x. */
/* 64 signed values in z with group scales d[0..3] (offsets m[0..3]) -> exact floats w[0..3]. */
static inline void s_f32_w64(__m512i z, const float *d, const float *m, __m512 *w)
{
	w[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_castsi512_si128(z)));
	w[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(z, 1)));
	w[2] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(z, 2)));
	w[3] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(z, 3)));
	w[0] = _mm512_mul_ps(w[0], _mm512_set1_ps(d[0]));
	w[1] = _mm512_mul_ps(w[1], _mm512_set1_ps(d[1]));
	w[2] = _mm512_mul_ps(w[2], _mm512_set1_ps(d[2]));
	w[3] = _mm512_mul_ps(w[3], _mm512_set1_ps(d[3]));
	if (m) {
		w[0] = _mm512_add_ps(w[0], _mm512_set1_ps(m[0]));
		w[1] = _mm512_add_ps(w[1], _mm512_set1_ps(m[1]));
		w[2] = _mm512_add_ps(w[2], _mm512_set1_ps(m[2]));
		w[3] = _mm512_add_ps(w[3], _mm512_set1_ps(m[3]));
	}
}

/* a[0..3] += w[0..3] * x[0..63] */
static inline void s_fma64(const __m512 *w, const float *x, __m512 *a)
{
	a[0] = _mm512_fmadd_ps(w[0], _mm512_loadu_ps(x), a[0]);
	a[1] = _mm512_fmadd_ps(w[1], _mm512_loadu_ps(x + 16), a[1]);
	a[2] = _mm512_fmadd_ps(w[2], _mm512_loadu_ps(x + 32), a[2]);
	a[3] = _mm512_fmadd_ps(w[3], _mm512_loadu_ps(x + 48), a[3]);
}

/* 32 values (one block) in the low half of z, scale d -> a[0..1] += w * x[0..31] */
static inline void s_f32_dot32(__m512i z, float d, const float *x, __m512 *a)
{
	__m512 w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_castsi512_si128(z)));
	__m512 w1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(z, 1)));

	a[0] = _mm512_fmadd_ps(_mm512_mul_ps(w0, _mm512_set1_ps(d)), _mm512_loadu_ps(x), a[0]);
	a[1] = _mm512_fmadd_ps(_mm512_mul_ps(w1, _mm512_set1_ps(d)), _mm512_loadu_ps(x + 16), a[1]);
}

static inline float s_sum4(const __m512 *a)
{
	return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
}

/* lanes 4k..4k+3 of the result = v[4c + k], k = 0..3 (groups of 16 to dpbusd lanes) */
static inline __m512i s_grp_idx(int c)
{
	return _mm512_setr_epi32(4 * c, 4 * c, 4 * c, 4 * c, 4 * c + 1, 4 * c + 1, 4 * c + 1,
				 4 * c + 1, 4 * c + 2, 4 * c + 2, 4 * c + 2, 4 * c + 2, 4 * c + 3,
				 4 * c + 3, 4 * c + 3, 4 * c + 3);
}

/* [a x 8 lanes, b x 8 lanes] */
static inline __m512 s_pair(float a, float b)
{
	return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(a)),
						   _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}

#define S_TOK(f, t) ((f)->t0 + (t))

/* Q4_K / Q5_K group scales and offsets built in registers (a 64-byte load of values stored
 * as two 32-byte halves would miss store forwarding): d[g] = d * sc[g/2],
 * m[g] = -(dmin * mn[g/2]), exactly as s_k4_dm_simd / the scalar decoder. */
static inline void s_k4_dm512(const uint8_t *b, __m512 *d, __m512 *m)
{
	uint64_t sc, mn;

	s_k4_sc_mn(b, &sc, &mn);
	__m128i s2 = _mm_cvtsi64_si128((long long)sc), m2 = _mm_cvtsi64_si128((long long)mn);

	s2 = _mm_unpacklo_epi8(s2, s2); /* each scale twice: groups 2i and 2i+1 */
	m2 = _mm_unpacklo_epi8(m2, m2);
	*d = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(s2)), _mm512_set1_ps(s_h2f(b)));
	*m = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m2)), _mm512_set1_ps(s_h2f(b + 2)));
	*m = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(*m), _mm512_set1_epi32((int)0x80000000u)));
}

/* Q6_K: the 16 signed scales times d, in registers */
static inline __m512 s_q6k_d512(const uint8_t *b)
{
	__m128i sc = _mm_loadu_si128((const __m128i *)(b + 192));

	return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)), _mm512_set1_ps(s_h2f(b + 208)));
}

/* Make the compiler read v[] back from memory: a broadcast from memory is a load-port op,
 * one from a register a shuffle-port op (the port the table lookups need). */
static inline void s_reload(float *v)
{
	__asm__ volatile("" : : "r"(v) : "memory");
}

/* Software prefetch distance into the weight stream, in bytes: the unpacking work between
 * loads keeps too few misses in flight for the hardware prefetcher alone. */
#ifndef S_PF_DIST
#define S_PF_DIST 4096
#endif

/* prefetch the lines of [p, p + n) + S_PF_DIST (never faults, even past the window) */
static inline void s_pf(const uint8_t *p, uint32_t n)
{
	for (uint32_t o = 0; o < n; o += 64)
		_mm_prefetch((const char *)p + S_PF_DIST + o, _MM_HINT_T0);
}

/* ---- Q8_0: 34-byte blocks, two per 64 elements ---- */

static inline __m512i s_q8_0_pair(const uint8_t *p, bool two)
{
	__m256i lo = _mm256_loadu_si256((const __m256i *)(p + 2));
	__m256i hi = two ? _mm256_loadu_si256((const __m256i *)(p + 36)) : _mm256_setzero_si256();

	return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

static inline __attribute__((always_inline)) void
s_q8_0_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	const struct ns_kjob *j = f->j;
	uint64_t nb = j->n_cols / 32;
	__m512 acc[NS_KTILE][4];

	for (uint32_t t = 0; t < nt; t++)
		acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
	for (uint64_t b = 0; b < nb; b += 2) {
		const uint8_t *p = row + 34 * b;
		bool two = b + 1 < nb;

		s_pf(p, 68);
		float d0 = s_h2f(p), d1 = two ? s_h2f(p + 34) : 0.0f;

		if (!two) { /* last odd block: 32 elements */
			__m512i z = s_q8_0_pair(p, two);

			for (uint32_t t = 0; t < nt; t++)
				s_f32_dot32(z, d0, j->x + S_TOK(f, t) * j->ldx + 32 * b, acc[t]);
			continue;
		}
		__m512 w[4];

		/* widened straight from memory (no extracts), the same products as s_f32_w64 */
#pragma GCC unroll 4
		for (int k = 0; k < 4; k++)
			w[k] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
						     (const __m128i *)(p + 2 + 34 * (k / 2) + 16 * (k % 2))))),
					     _mm512_set1_ps(k < 2 ? d0 : d1));
		for (uint32_t t = 0; t < nt; t++)
			s_fma64(w, j->x + S_TOK(f, t) * j->ldx + 32 * b, acc[t]);
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_sum4(acc[t]);
}

static inline __attribute__((always_inline)) void
s_q8_0_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	const struct ns_kjob *j = f->j;
	const __m512i x80 = _mm512_set1_epi8((char)0x80);
	uint64_t nb = j->n_cols / 32;
	__m512 acc[NS_KTILE];

	for (uint32_t t = 0; t < nt; t++)
		acc[t] = _mm512_setzero_ps();
	for (uint64_t b = 0; b < nb; b += 2) {
		const uint8_t *p = row + 34 * b;
		bool two = b + 1 < nb;

		s_pf(p, 68);
		/* a missing second block reads as s = -128 against xq = 0 and c4 = 0 (padding) */
		__m512i u = _mm512_xor_si512(s_q8_0_pair(p, two), x80);
		float d0 = s_h2f(p), d1 = two ? s_h2f(p + 34) : 0.0f;

		for (uint32_t t = 0; t < nt; t++) {
			uint64_t tt = S_TOK(f, t);
			const float *dxg = j->dxg + tt * j->ldg + 2 * b;
			__m512i dp = _mm512_dpbusd_epi32(_mm512_loadu_si512(j->c4 + tt * j->ldc + 8 * b), u,
							 _mm512_loadu_si512(j->xq + tt * j->ldq + 32 * b));

			acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), s_pair(d0 * dxg[0], d1 * dxg[2]), acc[t]);
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = _mm512_reduce_add_ps(acc[t]);
}

/* ---- MXFP4 (17-byte blocks, E8M0 scale) and Q4_0 (18-byte blocks, fp16 scale): 16 bytes of
 * nibbles per 32 elements, two blocks per 64 elements ---- */

/* [lo nibbles b0 | hi nibbles b0 | lo b1 | hi b1] mapped through tab (per 128-bit lane); p is
 * the first block, bs the block size, qo the offset of the nibbles in a block. */
static inline __m512i s_nib_pair(const uint8_t *p, uint32_t bs, uint32_t qo, bool two, __m512i tab)
{
	__m128i a = _mm_loadu_si128((const __m128i *)(p + qo));
	__m128i b = two ? _mm_loadu_si128((const __m128i *)(p + bs + qo)) : _mm_setzero_si128();
	__m512i z = _mm512_inserti32x4(_mm512_castsi128_si512(a), a, 1);
	const __m512i sh = _mm512_setr_epi64(0, 0, 0x0004000400040004ll, 0x0004000400040004ll, 0, 0,
					     0x0004000400040004ll, 0x0004000400040004ll);

	z = _mm512_inserti32x4(z, b, 2);
	z = _mm512_inserti32x4(z, b, 3);
	z = _mm512_and_si512(_mm512_srlv_epi16(z, sh), _mm512_set1_epi8(15));
	return _mm512_shuffle_epi8(tab, z);
}

static inline float s_e8m0_half(uint8_t e)
{
	return ns_e8m0_half_tab[e]; /* a load the broadcast folds into */
}

/* scale of the block at p */
static inline float s_nib_d(const uint8_t *p, bool q40)
{
	return q40 ? s_h2f(p) : s_e8m0_half(p[0]);
}

/* f32 mode of the nibble types: a 16-entry table per block holds the exact weights
 * (value * d, ggml's x0 * d), vpermps picks them by nibble (it reads the low 4 bits of each
 * index, so the low nibble needs no mask). */
static inline __attribute__((always_inline)) void
s_nib_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt, bool q40)
{
	const struct ns_kjob *j = f->j;
	const __m512 vals = q40 ? _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7)
				: _mm512_setr_ps(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
	uint32_t bs = q40 ? 18 : 17, qo = q40 ? 2 : 1;
	uint64_t nb = j->n_cols / 32;
	__m512 acc[NS_KTILE][4];

	for (uint32_t t = 0; t < nt; t++)
		acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
	/* blocks in pairs: the even one into lane groups 0, 1, the odd one into 2, 3 */
	for (uint64_t b = 0; b < nb; b += 2) {
		const uint8_t *p = row + bs * b;
		bool two = b + 1 < nb;
		__m512 w[4];

		if (b % 8 == 0)
			s_pf(p, 8 * bs);
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			const uint8_t *q = p + bs * (uint32_t)h;
			__m512 lut;
			__m512i n;

			if (h && !two) {
				w[2] = w[3] = _mm512_setzero_ps();
				break;
			}
			lut = _mm512_mul_ps(vals, _mm512_set1_ps(s_nib_d(q, q40)));
			n = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + qo)));
			w[2 * h] = _mm512_permutexvar_ps(n, lut);
			w[2 * h + 1] = _mm512_permutexvar_ps(_mm512_srli_epi32(n, 4), lut);
		}
		for (uint32_t t = 0; t < nt; t++) {
			const float *x = j->x + S_TOK(f, t) * j->ldx + 32 * b;

			if (two) {
				s_fma64(w, x, acc[t]);
			} else {
				acc[t][0] = _mm512_fmadd_ps(w[0], _mm512_loadu_ps(x), acc[t][0]);
				acc[t][1] = _mm512_fmadd_ps(w[1], _mm512_loadu_ps(x + 16), acc[t][1]);
			}
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_sum4(acc[t]);
}

static inline __attribute__((always_inline)) void
s_nib_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt, bool q40)
{
	const struct ns_kjob *j = f->j;
	/* unsigned operands: MXFP4 value + 128 (offset 128: preload c4 = -128 * sum(xq)),
	 * Q4_0 the raw nibble (value + 8: preload c4 / 16 = -8 * sum(xq)) */
	const __m512i tab = q40 ? _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
								      10, 11, 12, 13, 14, 15))
				: _mm512_broadcast_i32x4(_mm_setr_epi8((char)128, (char)129, (char)130,
								      (char)131, (char)132, (char)134,
								      (char)136, (char)140, (char)128, 127,
								      126, 125, 124, 122, 120, 116));
	uint32_t bs = q40 ? 18 : 17, qo = q40 ? 2 : 1;
	uint64_t nb = j->n_cols / 32;
	__m512 acc[NS_KTILE];

	for (uint32_t t = 0; t < nt; t++)
		acc[t] = _mm512_setzero_ps();
	for (uint64_t b = 0; b < nb; b += 2) {
		const uint8_t *p = row + bs * b;
		bool two = b + 1 < nb;

		s_pf(p, 2 * bs);
		__m512i u = s_nib_pair(p, bs, qo, two, tab);
		float d0 = s_nib_d(p, q40), d1 = two ? s_nib_d(p + bs, q40) : 0.0f;

		for (uint32_t t = 0; t < nt; t++) {
			uint64_t tt = S_TOK(f, t);
			const float *dxg = j->dxg + tt * j->ldg + 2 * b;
			__m512i c4 = _mm512_loadu_si512(j->c4 + tt * j->ldc + 8 * b);
			__m512i dp = _mm512_dpbusd_epi32(q40 ? _mm512_srai_epi32(c4, 4) : c4, u,
							 _mm512_loadu_si512(j->xq + tt * j->ldq + 32 * b));

			acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), s_pair(d0 * dxg[0], d1 * dxg[2]), acc[t]);
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = _mm512_reduce_add_ps(acc[t]);
}

/* MXFP4 f32 mode: as s_nib_f32_impl (same sums in the same order, so the same bits), with
 * the loop trimmed: four blocks per step with no per-block tests, token pointers hoisted. */
static inline __attribute__((always_inline)) void
s_mx_w32(const uint8_t *q, __m512 vals, __m512 *w)
{
	__m512 lut = _mm512_mul_ps(vals, _mm512_set1_ps(s_e8m0_half(q[0])));
	__m512i n = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + 1)));

	w[0] = _mm512_permutexvar_ps(n, lut);
	w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(n, 4), lut);
}

static inline __attribute__((always_inline)) void
s_mxfp4_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	const struct ns_kjob *j = f->j;
	const __m512 vals = _mm512_setr_ps(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
	const float *x0 = j->x + f->t0 * j->ldx;
	uint64_t ldx = j->ldx, nb = j->n_cols / 32, b = 0;
	__m512 acc[NS_KTILE][4];

	for (uint32_t t = 0; t < nt; t++)
		acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
	for (; b + 4 <= nb; b += 4) {
		const uint8_t *p = row + 17 * b;
		__m512 w[8];

		if (b % 8 == 0)
			s_pf(p, 136);
		s_mx_w32(p, vals, w);
		s_mx_w32(p + 17, vals, w + 2);
		s_mx_w32(p + 34, vals, w + 4);
		s_mx_w32(p + 51, vals, w + 6);
		for (uint32_t t = 0; t < nt; t++) {
			const float *x = x0 + t * ldx + 32 * b;

			s_fma64(w, x, acc[t]);
			s_fma64(w + 4, x + 64, acc[t]);
		}
	}
	for (; b < nb; b += 2) { /* the last 1-3 blocks */
		const uint8_t *p = row + 17 * b;
		bool two = b + 1 < nb;
		__m512 w[4];

		s_mx_w32(p, vals, w);
		if (two)
			s_mx_w32(p + 17, vals, w + 2);
		for (uint32_t t = 0; t < nt; t++) {
			const float *x = x0 + t * ldx + 32 * b;

			if (two) {
				s_fma64(w, x, acc[t]);
			} else {
				acc[t][0] = _mm512_fmadd_ps(w[0], _mm512_loadu_ps(x), acc[t][0]);
				acc[t][1] = _mm512_fmadd_ps(w[1], _mm512_loadu_ps(x + 16), acc[t][1]);
			}
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_sum4(acc[t]);
}

/* MXFP4 q8 mode, two blocks (34 bytes) per step: one masked load, one vpermb placing each
 * block's 16 nibble bytes twice (lanes 0-31: block b, 32-63: block b + 1), a masked 16-bit
 * shift bringing the high nibbles of the second copies down, and a second vpermb mapping
 * nibble -> value + 128 (vpermb reads 6 index bits: the 16-entry table is repeated 4 times,
 * so the bits above the nibble need no mask). Scales: [d0 x 8 lanes, d1 x 8] times dxl.
 * Needs AVX512-VBMI (Ice Lake and later), checked at run time: without it (Cascade Lake)
 * MXFP4 q8 uses s_nib_q8_impl. */
static inline __attribute__((always_inline, target("avx512vbmi"))) __m512i
s_mx_u64(const uint8_t *p, bool whole, __mmask64 k, __m512i arr, __m512i lut)
{
	/* whole: the 64 bytes at p lie inside the row (no mask needed) */
	__m512i raw = whole ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(k, p);
	__m512i z = _mm512_permutexvar_epi8(arr, raw);

	z = _mm512_mask_srli_epi16(z, 0xff00ff00u, z, 4);
	return _mm512_permutexvar_epi8(z, lut);
}

static inline __attribute__((always_inline, target("avx512vbmi"))) void
s_mxfp4_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	const struct ns_kjob *j = f->j;
	const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8((char)128, (char)129, (char)130,
								 (char)131, (char)132, (char)134,
								 (char)136, (char)140, (char)128, 127,
								 126, 125, 124, 122, 120, 116));
	_Alignas(64) static const uint8_t arr_b[64] = {
		1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
		1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
		18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,
		18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,
	};
	const __m512i arr = _mm512_load_si512(arr_b);
	const int8_t *xq = j->xq + f->t0 * j->ldq;
	const int32_t *c4 = j->c4 + f->t0 * j->ldc;
	const float *dxl = j->dxl + f->t0 * j->ldc;
	uint64_t ldq = j->ldq, ldc = j->ldc, nb = j->n_cols / 32, b = 0;
	__m512 acc[NS_KTILE][2];

	for (uint32_t t = 0; t < nt; t++)
		acc[t][0] = acc[t][1] = _mm512_setzero_ps();
	/* four blocks (128 elements) per step, two accumulators; while six blocks remain the
	 * 64-byte loads stay inside the row and need no mask */
	for (; b + 4 <= nb; b += 4) {
		const uint8_t *p = row + 17 * b;
		bool whole = b + 6 <= nb;
		__m512i u[2];
		__m512 ws[2];

		s_pf(p, 68);
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			const uint8_t *q = p + 34 * h;

			u[h] = s_mx_u64(q, whole, 0x3ffffffffull, arr, lut);
			ws[h] = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(s_e8m0_half(q[0])),
						     _mm512_set1_ps(s_e8m0_half(q[17])));
		}
		for (uint32_t t = 0; t < nt; t++) {
#pragma GCC unroll 2
			for (int h = 0; h < 2; h++) {
				uint64_t o = 2 * (uint64_t)h + b;
				__m512i dp = _mm512_dpbusd_epi32(_mm512_loadu_si512(c4 + t * ldc + 8 * o), u[h],
								 _mm512_loadu_si512(xq + t * ldq + 32 * o));
				__m512 sc = _mm512_mul_ps(ws[h], _mm512_loadu_ps(dxl + t * ldc + 8 * o));

				acc[t][h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), sc, acc[t][h]);
			}
		}
	}
	/* the last 1-3 blocks, two at a time: a missing second block reads as zero bytes,
	 * value 0 (+128) against xq = 0 and c4 = 0 (padding), scale 0 */
	for (; b < nb; b += 2) {
		const uint8_t *p = row + 17 * b;
		bool two = b + 1 < nb;
		__m512i u = s_mx_u64(p, false, two ? 0x3ffffffffull : 0x1ffffull, arr, lut);
		__m512 ws = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(s_e8m0_half(p[0])),
						 _mm512_set1_ps(two ? s_e8m0_half(p[17]) : 0.0f));

		for (uint32_t t = 0; t < nt; t++) {
			__m512i dp = _mm512_dpbusd_epi32(_mm512_loadu_si512(c4 + t * ldc + 8 * b), u,
							 _mm512_loadu_si512(xq + t * ldq + 32 * b));
			__m512 sc = _mm512_mul_ps(ws, _mm512_loadu_ps(dxl + t * ldc + 8 * b));

			acc[t][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), sc, acc[t][0]);
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]));
}

static inline __attribute__((always_inline)) void
s_mxfp4_q8_novbmi_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	s_nib_q8_impl(f, row, out, nt, false);
}

static inline __attribute__((always_inline)) void
s_q4_0_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	s_nib_f32_impl(f, row, out, nt, true);
}

static inline __attribute__((always_inline)) void
s_q4_0_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	s_nib_q8_impl(f, row, out, nt, true);
}

/* ---- Q4_K (144-byte superblocks) and Q5_K (176 bytes, + 32 bytes of high bits): 64 elements
 * = 32 bytes of nibbles (+ 2 high-bit planes) ---- */

static inline __m512i s_q4k_64(const uint8_t *qs)
{
	const __m512i sh = _mm512_setr_epi64(0, 0, 0, 0, 0x0004000400040004ll, 0x0004000400040004ll,
					     0x0004000400040004ll, 0x0004000400040004ll);
	__m512i z = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qs));

	return _mm512_and_si512(_mm512_srlv_epi16(z, sh), _mm512_set1_epi8(15));
}

/* Q5_K: values of elements 64c .. 64c+63 of the superblock at p: nibbles | high bit << 4, the
 * high bits of the low half in bit 2c of qh[l], of the high half in bit 2c+1. */
static inline __m512i s_q5k_64(const uint8_t *p, int c)
{
	__m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16)));
	__m512i cnt = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * c)),
					 _mm256_set1_epi16((short)(2 * c + 1)), 1);

	h = _mm512_and_si512(_mm512_srlv_epi16(h, cnt), _mm512_set1_epi8(1));
	return _mm512_or_si512(s_q4k_64(p + 48 + 32 * c), _mm512_slli_epi16(h, 4));
}

static inline __m512i s_k45_64(const uint8_t *p, int c, bool five)
{
	return five ? s_q5k_64(p, c) : s_q4k_64(p + 16 + 32 * c);
}

static inline __attribute__((always_inline)) void
s_k45_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt, bool five)
{
	const struct ns_kjob *j = f->j;
	uint64_t nsb = j->n_cols / 256;
	struct ns_kdec dm; /* only d[] and m[] are used */
	__m512 acc[NS_KTILE][4];

	for (uint32_t t = 0; t < nt; t++)
		acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
	for (uint64_t sb = 0; sb < nsb; sb++) {
		const uint8_t *p = row + (five ? 176 : 144) * sb;

		s_pf(p, five ? 176 : 144);
		s_k4_dm_simd(p, &dm);
		s_reload(dm.d);
		s_reload(dm.m);
#pragma GCC unroll 4
		for (int c = 0; c < 4; c++) {
			__m512 w[4];

			s_f32_w64(s_k45_64(p, c, five), dm.d + 4 * c, dm.m + 4 * c, w);
			for (uint32_t t = 0; t < nt; t++)
				s_fma64(w, j->x + S_TOK(f, t) * j->ldx + 256 * sb + 64 * c, acc[t]);
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_sum4(acc[t]);
}

static inline __attribute__((always_inline)) void
s_k45_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt, bool five)
{
	const struct ns_kjob *j = f->j;
	uint64_t nsb = j->n_cols / 256;
	__m512 acc[NS_KTILE], accm[NS_KTILE];
	__m512i idx[4];

	for (int c = 0; c < 4; c++)
		idx[c] = s_grp_idx(c);
	for (uint32_t t = 0; t < nt; t++)
		acc[t] = accm[t] = _mm512_setzero_ps();
	for (uint64_t sb = 0; sb < nsb; sb++) {
		const uint8_t *p = row + (five ? 176 : 144) * sb;
		__m512i z[4];

		__m512 d, m;

		s_pf(p, five ? 176 : 144);
		s_k4_dm512(p, &d, &m);
#pragma GCC unroll 4
		for (int c = 0; c < 4; c++)
			z[c] = s_k45_64(p, c, five); /* already unsigned: no offset */

		for (uint32_t t = 0; t < nt; t++) {
			uint64_t tt = S_TOK(f, t);
			const int8_t *xq = j->xq + tt * j->ldq + 256 * sb;
			__m512 dd = _mm512_mul_ps(d, _mm512_loadu_ps(j->dxg + tt * j->ldg + 16 * sb));
			__m512 a = acc[t];

#pragma GCC unroll 4
			for (int c = 0; c < 4; c++) {
				__m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), z[c],
								 _mm512_loadu_si512(xq + 64 * c));

				a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), _mm512_permutexvar_ps(idx[c], dd), a);
			}
			acc[t] = a;
			accm[t] = _mm512_fmadd_ps(m, _mm512_loadu_ps(j->xsg + tt * j->ldg + 16 * sb), accm[t]);
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = _mm512_reduce_add_ps(acc[t]) + _mm512_reduce_add_ps(accm[t]);
}

/* Q4_K f32 mode: per 32-element sub-block a 16-entry table of exact weights
 * (d1 * q - m1, ggml's rounding), picked by nibble with vpermps. The sub-block scales and
 * offsets of superblock sb + 1 are computed (one ymm each, stored) while superblock sb is
 * multiplied: the latency chain scale bytes -> table -> lookup then overlaps the work of the
 * previous superblock, and the scalar unpacking fills issue slots the vector work leaves.
 * Each table is one FMA of two broadcast loads: d1 = d * sc has at most 17 significant bits
 * (fp16 times a 6-bit scale), so d1 * q (q < 16) is exact in float and fma(q, d1, -m1)
 * rounds exactly as ggml's d1 * q - m1. */
static inline void s_k4_dm16(const uint8_t *p, float *dm)
{
	uint64_t sc, mn;

	s_k4_sc_mn(p, &sc, &mn);
	__m256 dv = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc))),
				  _mm256_set1_ps(s_h2f(p)));
	__m256 mv = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mn))),
				  _mm256_set1_ps(s_h2f(p + 2)));

	_mm256_store_ps(dm, dv);                                           /* d * sc[8] */
	_mm256_store_ps(dm + 8, _mm256_xor_ps(mv, _mm256_set1_ps(-0.0f))); /* -(dmin * mn)[8] */
}

/* Superblocks [sb0, sb1) of one row into the nt tokens' accumulators acc[t][0..3]. */
static inline __attribute__((always_inline)) void
s_q4_k_f32_range(const struct s_fx *f, const uint8_t *row, __m512 (*acc)[4], uint32_t nt,
		 uint64_t sb0, uint64_t sb1)
{
	const struct ns_kjob *j = f->j;
	const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	_Alignas(64) float dm[2][16]; /* [2][16]: superblocks sb and sb + 1 (s_k4_dm16) */

	s_k4_dm16(row + 144 * sb0, dm[sb0 & 1]);
	for (uint64_t sb = sb0; sb < sb1; sb++) {
		const uint8_t *p = row + 144 * sb;
		const float *ds = dm[sb & 1], *ms = dm[sb & 1] + 8;
		__m512 w[4][4]; /* the superblock's 256 exact weights */

		if (sb + 1 < sb1)
			s_k4_dm16(p + 144, dm[(sb + 1) & 1]);
		s_reload(&dm[0][0]);
		s_pf(p, 144);
#pragma GCC unroll 4
		for (int c = 0; c < 4; c++) {
			const uint8_t *qs = p + 16 + 32 * c;
			__m512 lo = _mm512_fmadd_ps(iota, _mm512_set1_ps(ds[2 * c]), _mm512_set1_ps(ms[2 * c]));
			__m512 hi = _mm512_fmadd_ps(iota, _mm512_set1_ps(ds[2 * c + 1]), _mm512_set1_ps(ms[2 * c + 1]));
			__m512i q0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));
			__m512i q1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qs + 16)));

			w[c][0] = _mm512_permutexvar_ps(q0, lo);
			w[c][1] = _mm512_permutexvar_ps(q1, lo);
			w[c][2] = _mm512_permutexvar_ps(_mm512_srli_epi32(q0, 4), hi);
			w[c][3] = _mm512_permutexvar_ps(_mm512_srli_epi32(q1, 4), hi);
		}
		/* per token, the accumulators stay in registers for the whole superblock */
		for (uint32_t t = 0; t < nt; t++) {
			const float *x = j->x + S_TOK(f, t) * j->ldx + 256 * sb;
			__m512 a[4] = { acc[t][0], acc[t][1], acc[t][2], acc[t][3] };

#pragma GCC unroll 4
			for (int c = 0; c < 4; c++)
				s_fma64(w[c], x + 64 * c, a);
			acc[t][0] = a[0];
			acc[t][1] = a[1];
			acc[t][2] = a[2];
			acc[t][3] = a[3];
		}
	}
}

static inline __attribute__((always_inline)) void
s_q4_k_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	__m512 acc[NS_KTILE][4];

	for (uint32_t t = 0; t < nt; t++)
		acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
	s_q4_k_f32_range(f, row, acc, nt, 0, f->j->n_cols / 256);
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_sum4(acc[t]);
}

static inline __attribute__((always_inline)) void
s_q4_k_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	s_k45_q8_impl(f, row, out, nt, false);
}

static inline __attribute__((always_inline)) void
s_q5_k_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	s_k45_f32_impl(f, row, out, nt, true);
}

static inline __attribute__((always_inline)) void
s_q5_k_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	s_k45_q8_impl(f, row, out, nt, true);
}

/* ---- Q6_K: 210-byte superblocks; 128 elements = 64 bytes ql + 32 bytes qh ---- */

/* Unsigned 6-bit values (0..63) of elements 128n .. 128n+127 as two zmm of 64. */
static inline void s_q6k_128(const uint8_t *p, int n, __m512i *a, __m512i *b)
{
	const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
	const __m512i shl = _mm512_setr_epi64(0x0004000400040004ll, 0x0004000400040004ll,
					      0x0004000400040004ll, 0x0004000400040004ll,
					      0x0002000200020002ll, 0x0002000200020002ll,
					      0x0002000200020002ll, 0x0002000200020002ll);
	const __m512i shr = _mm512_setr_epi64(0, 0, 0, 0, 0x0002000200020002ll, 0x0002000200020002ll,
					      0x0002000200020002ll, 0x0002000200020002ll);
	__m512i l = _mm512_loadu_si512(p + 64 * n);
	__m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 128 + 32 * n)));

	*a = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(_mm512_sllv_epi16(h, shl), m30));
	*b = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
			     _mm512_and_si512(_mm512_srlv_epi16(h, shr), m30));
}

/* Superblocks [sb0, sb1) of one row into the nt tokens' accumulators acc[t][0..3]. */
static inline __attribute__((always_inline)) void
s_q6_k_f32_range(const struct s_fx *f, const uint8_t *row, __m512 (*acc)[4], uint32_t nt,
		 uint64_t sb0, uint64_t sb1)
{
	const struct ns_kjob *j = f->j;
	const __m512i off = _mm512_set1_epi8(32);
	_Alignas(64) float d[16];

	for (uint64_t sb = sb0; sb < sb1; sb++) {
		const uint8_t *p = row + 210 * sb;
		__m512 w[4][4]; /* the superblock's 256 exact weights, 64 per entry in x order */

		s_pf(p, 210);
		s_scales16_i8((const int8_t *)(p + 192), s_h2f(p + 208), d);
		s_reload(d);
#pragma GCC unroll 2
		for (int n = 0; n < 2; n++) {
			__m512i a, b;

			s_q6k_128(p, n, &a, &b);
			s_f32_w64(_mm512_sub_epi8(a, off), d + 8 * n, NULL, w[2 * n]);
			s_f32_w64(_mm512_sub_epi8(b, off), d + 8 * n + 4, NULL, w[2 * n + 1]);
		}
		/* per token, the accumulators stay in registers for the whole superblock (as
		 * Q4_K's); the products and their order per accumulator are the same as one
		 * 128-element half after the other, so are the bits */
		for (uint32_t t = 0; t < nt; t++) {
			const float *x = j->x + S_TOK(f, t) * j->ldx + 256 * sb;
			__m512 a4[4] = { acc[t][0], acc[t][1], acc[t][2], acc[t][3] };

#pragma GCC unroll 4
			for (int c = 0; c < 4; c++)
				s_fma64(w[c], x + 64 * c, a4);
			acc[t][0] = a4[0];
			acc[t][1] = a4[1];
			acc[t][2] = a4[2];
			acc[t][3] = a4[3];
		}
	}
}

static inline __attribute__((always_inline)) void
s_q6_k_f32_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	__m512 acc[NS_KTILE][4];

	for (uint32_t t = 0; t < nt; t++)
		acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
	s_q6_k_f32_range(f, row, acc, nt, 0, f->j->n_cols / 256);
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_sum4(acc[t]);
}

static inline __attribute__((always_inline)) void
s_q6_k_q8_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	const struct ns_kjob *j = f->j;
	uint64_t nsb = j->n_cols / 256;
	__m512 acc[NS_KTILE];
	__m512i idx[4];

	for (int c = 0; c < 4; c++)
		idx[c] = s_grp_idx(c);
	for (uint32_t t = 0; t < nt; t++)
		acc[t] = _mm512_setzero_ps();
	for (uint64_t sb = 0; sb < nsb; sb++) {
		const uint8_t *p = row + 210 * sb;
		__m512i z[4];

		s_pf(p, 210);
		s_q6k_128(p, 0, &z[0], &z[1]);
		s_q6k_128(p, 1, &z[2], &z[3]);
		__m512 dv = s_q6k_d512(p);

		for (uint32_t t = 0; t < nt; t++) {
			uint64_t tt = S_TOK(f, t);
			const int8_t *xq = j->xq + tt * j->ldq + 256 * sb;
			const int32_t *c4 = j->c4 + tt * j->ldc + 64 * sb;
			__m512 dd = _mm512_mul_ps(dv, _mm512_loadu_ps(j->dxg + tt * j->ldg + 16 * sb));
			__m512 a = acc[t];

#pragma GCC unroll 4
			for (int c = 0; c < 4; c++) {
				/* s = q - 32: preload -32 * sum(xq) per 4 = c4 / 4 (c4 = -128 * sum) */
				__m512i init = _mm512_srai_epi32(_mm512_loadu_si512(c4 + 16 * c), 2);
				__m512i dp = _mm512_dpbusd_epi32(init, z[c], _mm512_loadu_si512(xq + 64 * c));

				a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), _mm512_permutexvar_ps(idx[c], dd), a);
			}
			acc[t] = a;
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = _mm512_reduce_add_ps(acc[t]);
}

/* ---- F32 / F16 / BF16: any row length; converted in registers (exact) ---- */

/* 16 floats of element i of a float-typed row, the first `lanes` of them (others 0) */
static inline __m512 s_float16(uint32_t type, const uint8_t *row, uint64_t i, __mmask16 k)
{
	if (type == NS_TYPE_F32)
		return _mm512_maskz_loadu_ps(k, row + 4 * i);
	__m256i h = _mm256_maskz_loadu_epi16(k, row + 2 * i);
	if (type == NS_TYPE_F16)
		return _mm512_cvtph_ps(h);
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __attribute__((always_inline)) void
s_float_impl(const struct s_fx *f, const uint8_t *row, float *out, uint32_t nt)
{
	const struct ns_kjob *j = f->j;
	uint32_t type = j->qt->type;
	uint64_t n = j->n_cols, i = 0;
	__m512 acc[NS_KTILE][4];

	for (uint32_t t = 0; t < nt; t++)
		acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
	for (; i + 64 <= n; i += 64) {
		__m512 w[4];

#pragma GCC unroll 4
		for (int k = 0; k < 4; k++)
			w[k] = s_float16(type, row, i + 16 * k, 0xffff);
		for (uint32_t t = 0; t < nt; t++)
			s_fma64(w, j->x + S_TOK(f, t) * j->ldx + i, acc[t]);
	}
	for (; i < n; i += 16) { /* tail: 16 at a time, the last one masked */
		__mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
		__m512 w = s_float16(type, row, i, k);

		for (uint32_t t = 0; t < nt; t++)
			acc[t][0] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(k, j->x + S_TOK(f, t) * j->ldx + i),
						    acc[t][0]);
	}
	for (uint32_t t = 0; t < nt; t++)
		out[t] = s_sum4(acc[t]);
}

/* ---- entry ---- */

/* Tiles of one token (gemv) get their own copy of each kernel with the accumulators in
 * registers; larger tiles keep them on the stack. */
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
S_SPECIALIZE(s_mxfp4_q8_novbmi)

static __attribute__((target("avx512vbmi"))) void s_mxfp4_q8(const struct s_fx *f, const uint8_t *row,
							       float *out)
{
	if (f->nt == 1)
		s_mxfp4_q8_impl(f, row, out, 1);
	else
		s_mxfp4_q8_impl(f, row, out, f->nt);
}
S_SPECIALIZE(s_q4_k_f32)
S_SPECIALIZE(s_q4_k_q8)
S_SPECIALIZE(s_q6_k_f32)
S_SPECIALIZE(s_q6_k_q8)
S_SPECIALIZE(s_float)
S_SPECIALIZE(s_q4_0_f32)
S_SPECIALIZE(s_q4_0_q8)
S_SPECIALIZE(s_q5_k_f32)
S_SPECIALIZE(s_q5_k_q8)


typedef void (*s_fused_fn)(const struct s_fx *f, const uint8_t *row, float *out);

/* Batches of f32 Q4_K / Q6_K rows (a verification chunk's or a prompt's): a tile's
 * activations are 16 KiB per token, so row after row over whole rows streams the tile's x
 * from L2 (9 tokens: 144 KiB per row), and the per-token work, not the weights' unpacking,
 * set the price of every further token (a 9-token product cost 8-10 one-token ones). Here
 * S_RB rows advance together S_CB superblocks at a time: the tokens' x of those columns
 * (S_CB KiB per token) stay in L1 for the S_RB rows. Each (row, token) accumulator sees the
 * same products in the same order as ns_krows' whole-row kernel, so the bits are the same. */
#ifndef S_RB
#define S_RB 4
#endif
#ifndef S_CB
#define S_CB 2
#endif

static void s_k_f32_blocked(const struct ns_kjob *j, const struct s_fx *f, uint64_t r0,
			    uint64_t r1, bool q6)
{
	const uint64_t nsb = j->n_cols / 256;
	__m512 acc[S_RB][NS_KTILE][4];

	for (uint64_t r = r0; r < r1; r += S_RB) {
		uint32_t nr = (uint32_t)(r1 - r < S_RB ? r1 - r : S_RB);

		for (uint32_t i = 0; i < nr; i++)
			for (uint32_t t = 0; t < f->nt; t++)
				acc[i][t][0] = acc[i][t][1] = acc[i][t][2] = acc[i][t][3] =
					_mm512_setzero_ps();
		for (uint64_t sb = 0; sb < nsb; sb += S_CB) {
			uint64_t e = sb + S_CB < nsb ? sb + S_CB : nsb;

			for (uint32_t i = 0; i < nr; i++) {
				const uint8_t *row = j->w + (r + i) * j->row_bytes;

				if (q6)
					s_q6_k_f32_range(f, row, acc[i], f->nt, sb, e);
				else
					s_q4_k_f32_range(f, row, acc[i], f->nt, sb, e);
			}
		}
		for (uint32_t i = 0; i < nr; i++)
			for (uint32_t t = 0; t < f->nt; t++)
				j->y[(f->t0 + t) * j->ldy + r + i] = s_sum4(acc[i][t]);
	}
}

bool ns_krows_avx512_fused(const struct ns_kjob *j, uint64_t r0, uint64_t r1)
{
	s_fused_fn fn;
	bool q8 = j->q8;

	switch (j->qt->type) {
	case NS_TYPE_Q8_0: fn = q8 ? s_q8_0_q8 : s_q8_0_f32; break;
	case NS_TYPE_MXFP4:
		fn = !q8 ? s_mxfp4_f32 : __builtin_cpu_supports("avx512vbmi") ? s_mxfp4_q8 : s_mxfp4_q8_novbmi;
		break;
	case NS_TYPE_Q4_K: fn = q8 ? s_q4_k_q8 : s_q4_k_f32; break;
	case NS_TYPE_Q6_K: fn = q8 ? s_q6_k_q8 : s_q6_k_f32; break;
	case NS_TYPE_Q4_0: fn = q8 ? s_q4_0_q8 : s_q4_0_f32; break;
	case NS_TYPE_Q5_K: fn = q8 ? s_q5_k_q8 : s_q5_k_f32; break;
	case NS_TYPE_F32:
	case NS_TYPE_F16:
	case NS_TYPE_BF16: fn = s_float; break;
	default: return false;
	}
	for (uint64_t t0 = 0; t0 < j->n_tok; t0 += NS_KTILE) {
		struct s_fx f = { j, t0, (uint32_t)(j->n_tok - t0 < NS_KTILE ? j->n_tok - t0 : NS_KTILE) };

		if (f.nt > 1 && !q8 && (j->qt->type == NS_TYPE_Q4_K || j->qt->type == NS_TYPE_Q6_K)) {
			s_k_f32_blocked(j, &f, r0, r1, j->qt->type == NS_TYPE_Q6_K);
			continue;
		}
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
