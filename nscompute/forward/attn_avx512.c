/* attn_avx512.c - the AVX-512 attention task (attn.h, attn_internal.h); head sizes are
 * multiples of 16.
 *
 * Exact (f32 cache): scores of 16 positions per step, one K tile row (element d of 16
 * positions) widened to two vectors of doubles and multiplied with q_d of up to 4 rows, d in
 * order: each lane is the reference's sequential double sum of one (row, position). The row's
 * softmax is ns_softmax itself. Values: 32 dimensions of up to 4 rows per pass, positions in
 * order, a row skipping the positions outside its context: each lane is the reference's
 * double sum of one output element.
 * Tiled (f16 / q8_0 in the cache): per block of NS_ATTN_BLK positions, float scores of up to
 * 8 rows at once, masked to each row's context; the running maximum m, denominator l and
 * value sums o (o and l rescaled by exp(m_old - m_new)); exp by a degree-6 polynomial on the
 * reduced argument (relative error ~1e-7). */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn_internal.h"
#include "ops.h"

/* ---------------------------------------------------------------- exact ---------------- */

/* Scores of rows [rs, rs + nr) (nr <= 4) for the 16 positions of K tile `tile`. */
static inline __attribute__((always_inline)) void
s_exact_scores(const struct ns_attn_task *t, const float *kt, uint32_t tile, uint32_t rs,
	       const int nr)
{
	const uint32_t dk = t->a->kv->dk;
	const uint64_t ldq = dk, lda = t->lda;
	__m512d lo[4], hi[4];
	const __m512 sc = _mm512_set1_ps(t->a->scale);

#pragma GCC unroll 4
	for (int r = 0; r < nr; r++)
		lo[r] = hi[r] = _mm512_setzero_pd();
	for (uint32_t d = 0; d < dk; d++) {
		__m512 k = _mm512_load_ps(kt + 16 * d);
		__m512d klo = _mm512_cvtps_pd(_mm512_castps512_ps256(k));
		__m512d khi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(k), 1)));

#pragma GCC unroll 4
		for (int r = 0; r < nr; r++) {
			__m512d q = _mm512_set1_pd(t->qd[(rs + r) * ldq + d]);

			lo[r] = _mm512_fmadd_pd(q, klo, lo[r]);
			hi[r] = _mm512_fmadd_pd(q, khi, hi[r]);
		}
	}
#pragma GCC unroll 4
	for (int r = 0; r < nr; r++) {
		__m512 s = _mm512_castpd_ps(_mm512_insertf64x4(
			_mm512_castpd256_pd512(_mm256_castps_pd(_mm512_cvtpd_ps(lo[r]))),
			_mm256_castps_pd(_mm512_cvtpd_ps(hi[r])), 1));

		_mm512_storeu_ps(t->att + (rs + r) * lda + 16ull * tile, _mm512_mul_ps(s, sc));
	}
}

/* out of rows [rs, rs + nr) (nr <= 4), dimensions [d0, d0 + 16 * nv) (nv 1 or 2 vectors
 * of 16 = 2 or 4 vectors of doubles). */
static inline __attribute__((always_inline)) void
s_exact_values(const struct ns_attn_task *t, uint32_t rs, const int nr, uint32_t d0, const int nv)
{
	const struct ns_attn *a = t->a;
	const uint64_t lda = t->lda;
	__m512d acc[4][4];
	uint32_t j0[4], p1[4], jlo = UINT32_MAX, jhi = 0;

#pragma GCC unroll 4
	for (int r = 0; r < nr; r++) {
		ns_attn_row_range(t, rs + r, &j0[r], &p1[r]);
		jlo = j0[r] < jlo ? j0[r] : jlo;
		jhi = p1[r] > jhi ? p1[r] : jhi;
#pragma GCC unroll 4
		for (int v = 0; v < 2 * nv; v++)
			acc[r][v] = _mm512_setzero_pd();
	}
	for (uint32_t j = jlo; j < jhi; j++) {
		const float *vr = (const float *)(const void *)ns_kvcache_vrow(a->kv, a->layer, t->hk, j) + d0;
		__m512d vd[4];

#pragma GCC unroll 4
		for (int v = 0; v < 2 * nv; v++)
			vd[v] = _mm512_cvtps_pd(_mm256_loadu_ps(vr + 8 * v));
#pragma GCC unroll 4
		for (int r = 0; r < nr; r++) {
			if (j < j0[r] || j >= p1[r])
				continue;
			__m512d p = _mm512_set1_pd((double)t->att[(rs + r) * lda + j]);

#pragma GCC unroll 4
			for (int v = 0; v < 2 * nv; v++)
				acc[r][v] = _mm512_fmadd_pd(p, vd[v], acc[r][v]);
		}
	}
#pragma GCC unroll 4
	for (int r = 0; r < nr; r++) {
		float *out = ns_attn_row_out(t, rs + r) + d0;

#pragma GCC unroll 4
		for (int v = 0; v < 2 * nv; v++)
			_mm256_storeu_ps(out + 8 * v, _mm512_cvtpd_ps(acc[r][v]));
	}
}

#define S_EXACT_SET(nr)                                                                     \
	static void s_sc##nr(const struct ns_attn_task *t, const float *kt, uint32_t tile,   \
			     uint32_t rs)                                                    \
	{                                                                                    \
		s_exact_scores(t, kt, tile, rs, nr);                                         \
	}                                                                                    \
	static void s_va##nr##_1(const struct ns_attn_task *t, uint32_t rs, uint32_t d0)     \
	{                                                                                    \
		s_exact_values(t, rs, nr, d0, 1);                                            \
	}                                                                                    \
	static void s_va##nr##_2(const struct ns_attn_task *t, uint32_t rs, uint32_t d0)     \
	{                                                                                    \
		s_exact_values(t, rs, nr, d0, 2);                                            \
	}
S_EXACT_SET(1)
S_EXACT_SET(2)
S_EXACT_SET(3)
S_EXACT_SET(4)

static void (*const s_sc[4])(const struct ns_attn_task *, const float *, uint32_t, uint32_t) = {
	s_sc1, s_sc2, s_sc3, s_sc4
};
static void (*const s_va[4][2])(const struct ns_attn_task *, uint32_t, uint32_t) = {
	{ s_va1_1, s_va1_2 }, { s_va2_1, s_va2_2 }, { s_va3_1, s_va3_2 }, { s_va4_1, s_va4_2 }
};

static void s_task_exact(const struct ns_attn_task *t)
{
	const struct ns_attn *a = t->a;
	const struct ns_kvcache *kv = a->kv;
	const uint32_t R = t->nt * t->G;
	uint32_t tlo = UINT32_MAX, thi = 0;

	for (uint32_t r = 0; r < R; r++) {
		const float *q = ns_attn_row_q(t, r);
		uint32_t j0, p1;

		for (uint32_t d = 0; d < kv->dk; d++)
			t->qd[(uint64_t)r * kv->dk + d] = (double)q[d];
		ns_attn_row_range(t, r, &j0, &p1);
		tlo = j0 / NS_KV_TILE < tlo ? j0 / NS_KV_TILE : tlo;
		thi = (p1 + NS_KV_TILE - 1) / NS_KV_TILE > thi ? (p1 + NS_KV_TILE - 1) / NS_KV_TILE : thi;
	}
	/* scores: each tile read once from memory for every row of the task */
	for (uint32_t tile = tlo; tile < thi; tile++) {
		const float *kt = (const float *)(const void *)ns_kvcache_ktile(kv, a->layer, t->hk, tile);

		for (uint32_t rs = 0; rs < R; rs += 4)
			s_sc[(R - rs < 4 ? R - rs : 4) - 1](t, kt, tile, rs);
	}
	for (uint32_t r = 0; r < R; r++) {
		const float *sink = ns_attn_row_sink(t, r);
		float *att = t->att + (uint64_t)r * t->lda;
		uint32_t j0, p1;

		ns_attn_row_range(t, r, &j0, &p1);
		if (sink)
			ns_softmax_sink(att + j0, p1 - j0, *sink);
		else
			ns_softmax(att + j0, p1 - j0);
	}
	for (uint32_t rs = 0; rs < R; rs += 4) {
		int nr = (int)(R - rs < 4 ? R - rs : 4);
		uint32_t d0 = 0;

		for (; d0 + 32 <= kv->dv; d0 += 32)
			s_va[nr - 1][1](t, rs, d0);
		if (d0 < kv->dv)
			s_va[nr - 1][0](t, rs, d0);
	}
}

/* ---------------------------------------------------------------- tiled ---------------- */

/* exp(x) for x <= 0 (NaN never reaches it): x = n ln2 + r, |r| <= ln2 / 2, a degree-6 Taylor
 * polynomial of r, times 2^n (scalef: gradual underflow to 0). */
static inline __m512 s_exp(__m512 x)
{
	const __m512 l2e = _mm512_set1_ps(1.44269504088896341f);
	const __m512 ln2hi = _mm512_set1_ps(0.693359375f), ln2lo = _mm512_set1_ps(-2.12194440e-4f);
	__m512 n, r, p;

	x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
	n = _mm512_roundscale_ps(_mm512_mul_ps(x, l2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	r = _mm512_fnmadd_ps(n, ln2hi, x);
	r = _mm512_fnmadd_ps(n, ln2lo, r);
	p = _mm512_set1_ps(1.0f / 720);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	return _mm512_scalef_ps(p, n);
}

static inline float s_exp1(float x)
{
	return _mm512_cvtss_f32(s_exp(_mm512_set1_ps(x)));
}

/* Element d of the 16 positions of a K tile as floats. */
static inline __m512 s_krow(const struct ns_kvcache *kv, const uint8_t *kt, uint32_t d)
{
	switch (kv->tk) {
	case NS_KV_F16:
		return _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(const void *)(kt + 32ull * d)));
	case NS_KV_Q8_0: {
		__m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
			_mm_load_si128((const __m128i *)(const void *)(kt + 16ull * d))));
		__m512 s = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(
			kt + 16ull * kv->dk + 32ull * (d / 32))));

		return _mm512_mul_ps(v, s);
	}
	default:
		return _mm512_load_ps((const float *)(const void *)kt + 16ull * d);
	}
}

/* Dimensions [d0, d0 + 16) of V row vr as floats. */
static inline __m512 s_vseg(const struct ns_kvcache *kv, const uint8_t *vr, uint32_t d0)
{
	switch (kv->tv) {
	case NS_KV_F16:
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(vr + 2ull * d0)));
	case NS_KV_Q8_0: {
		const uint8_t *b = vr + 34ull * (d0 / 32);
		uint16_t h;

		memcpy(&h, b, 2);
		return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
					     _mm_loadu_si128((const __m128i *)(const void *)(b + 2 + d0 % 32)))),
				     _mm512_set1_ps(_cvtsh_ss(h)));
	}
	default:
		return _mm512_loadu_ps((const float *)(const void *)vr + d0);
	}
}

/* Scores of rows [rs, rs + nr) (nr <= 8) for tile `tile`, into s[r][col..col + 16). */
static inline __attribute__((always_inline)) void
s_tiled_scores(const struct ns_attn_task *t, const uint8_t *kt, uint32_t rs, const int nr,
	       uint32_t col)
{
	const struct ns_kvcache *kv = t->a->kv;
	__m512 acc[8];
	const float *q[8];

#pragma GCC unroll 8
	for (int r = 0; r < nr; r++) {
		acc[r] = _mm512_setzero_ps();
		q[r] = ns_attn_row_q(t, rs + r);
	}
	for (uint32_t d = 0; d < kv->dk; d++) {
		__m512 k = s_krow(kv, kt, d);

#pragma GCC unroll 8
		for (int r = 0; r < nr; r++)
			acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r][d]), k, acc[r]);
	}
#pragma GCC unroll 8
	for (int r = 0; r < nr; r++)
		_mm512_store_ps(t->s + (rs + r) * NS_ATTN_BLK + col,
				_mm512_mul_ps(acc[r], _mm512_set1_ps(t->a->scale)));
}

#define S_TSC(nr)                                                                           \
	static void s_tsc##nr(const struct ns_attn_task *t, const uint8_t *kt, uint32_t rs,  \
			      uint32_t col)                                                  \
	{                                                                                    \
		s_tiled_scores(t, kt, rs, nr, col);                                          \
	}
S_TSC(1)
S_TSC(2)
S_TSC(3)
S_TSC(4)
S_TSC(5)
S_TSC(6)
S_TSC(7)
S_TSC(8)
static void (*const s_tsc[8])(const struct ns_attn_task *, const uint8_t *, uint32_t, uint32_t) = {
	s_tsc1, s_tsc2, s_tsc3, s_tsc4, s_tsc5, s_tsc6, s_tsc7, s_tsc8
};

/* Online softmax step of row r over the block [jb, jb + NS_ATTN_BLK): masks positions
 * outside its context, turns s into probabilities, rescales l and o. Returns false when the
 * row has no position in the block. */
static bool s_tiled_softmax(const struct ns_attn_task *t, uint32_t r, uint32_t jb)
{
	float *s = t->s + r * NS_ATTN_BLK, *o = t->o + (uint64_t)r * t->a->kv->dv;
	uint32_t j0, p1;
	__m512 v[NS_ATTN_BLK / 16], mx = _mm512_set1_ps(-INFINITY);
	float bm, c;

	ns_attn_row_range(t, r, &j0, &p1);
	if (p1 <= jb || j0 >= jb + NS_ATTN_BLK)
		return false;
	for (int i = 0; i < NS_ATTN_BLK / 16; i++) {
		__m512i pos = _mm512_add_epi32(_mm512_set1_epi32((int)(jb + 16 * i)),
					       _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
								 12, 13, 14, 15));
		__mmask16 in = _mm512_cmpge_epu32_mask(pos, _mm512_set1_epi32((int)j0)) &
			       _mm512_cmplt_epu32_mask(pos, _mm512_set1_epi32((int)p1));

		v[i] = _mm512_mask_blend_ps(in, _mm512_set1_ps(-INFINITY), _mm512_load_ps(s + 16 * i));
		mx = _mm512_max_ps(mx, v[i]);
	}
	bm = _mm512_reduce_max_ps(mx);
	if (bm < t->m[r])
		bm = t->m[r];
	c = t->m[r] == -INFINITY ? 0.0f : s_exp1(t->m[r] - bm);
	__m512 sum = _mm512_setzero_ps();
	for (int i = 0; i < NS_ATTN_BLK / 16; i++) {
		__mmask16 live = _mm512_cmp_ps_mask(v[i], _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
		__m512 p = _mm512_maskz_mov_ps(live, s_exp(_mm512_sub_ps(v[i], _mm512_set1_ps(bm))));

		_mm512_store_ps(s + 16 * i, p);
		sum = _mm512_add_ps(sum, p);
	}
	t->l[r] = t->l[r] * c + _mm512_reduce_add_ps(sum);
	t->m[r] = bm;
	for (uint32_t d = 0; d < t->a->kv->dv; d += 16)
		_mm512_store_ps(o + d, _mm512_mul_ps(_mm512_load_ps(o + d), _mm512_set1_ps(c)));
	return true;
}

/* o of rows rs, rs + 1 (two when both) += sum over the block of p_j v_j, 16 dims at a time. */
static void s_tiled_values(const struct ns_attn_task *t, uint32_t rs, bool two, uint32_t jb,
			   uint32_t n)
{
	const struct ns_kvcache *kv = t->a->kv;
	const uint32_t dv = kv->dv;
	const float *pa = t->s + rs * NS_ATTN_BLK, *pb = pa + NS_ATTN_BLK;
	float *oa = t->o + (uint64_t)rs * dv, *ob = oa + dv;

	for (uint32_t d0 = 0; d0 < dv; d0 += 128) {
		const uint32_t nd = dv - d0 < 128 ? (dv - d0) / 16 : 8;
		__m512 a[8], b[8];

		for (uint32_t i = 0; i < nd; i++) {
			a[i] = _mm512_load_ps(oa + d0 + 16 * i);
			b[i] = two ? _mm512_load_ps(ob + d0 + 16 * i) : a[i];
		}
		for (uint32_t j = 0; j < n; j++) {
			const uint8_t *vr = ns_kvcache_vrow(kv, t->a->layer, t->hk, jb + j);
			__m512 p = _mm512_set1_ps(pa[j]), q = _mm512_set1_ps(two ? pb[j] : 0.0f);

			for (uint32_t i = 0; i < nd; i++) {
				__m512 v = s_vseg(kv, vr, d0 + 16 * i);

				a[i] = _mm512_fmadd_ps(p, v, a[i]);
				if (two)
					b[i] = _mm512_fmadd_ps(q, v, b[i]);
			}
		}
		for (uint32_t i = 0; i < nd; i++) {
			_mm512_store_ps(oa + d0 + 16 * i, a[i]);
			if (two)
				_mm512_store_ps(ob + d0 + 16 * i, b[i]);
		}
	}
}

static void s_task_tiled(const struct ns_attn_task *t)
{
	const struct ns_attn *a = t->a;
	const struct ns_kvcache *kv = a->kv;
	const uint32_t R = t->nt * t->G;
	uint32_t jlo = UINT32_MAX, jhi = 0;

	for (uint32_t r = 0; r < R; r++) {
		uint32_t j0, p1;

		ns_attn_row_range(t, r, &j0, &p1);
		jlo = j0 < jlo ? j0 : jlo;
		jhi = p1 > jhi ? p1 : jhi;
		t->m[r] = -INFINITY;
		t->l[r] = 0.0f;
		memset(t->o + (uint64_t)r * kv->dv, 0, kv->dv * sizeof(float));
	}
	for (uint32_t jb = jlo / NS_KV_TILE * NS_KV_TILE; jb < jhi; jb += NS_ATTN_BLK) {
		uint32_t n = jhi - jb < NS_ATTN_BLK ? jhi - jb : NS_ATTN_BLK;

		for (uint32_t tile = 0; tile * NS_KV_TILE < n; tile++) {
			const uint8_t *kt = ns_kvcache_ktile(kv, a->layer, t->hk, jb / NS_KV_TILE + tile);

			for (uint32_t rs = 0; rs < R; rs += 8)
				s_tsc[(R - rs < 8 ? R - rs : 8) - 1](t, kt, rs, tile * NS_KV_TILE);
		}
		/* scores past jhi (stale) are outside every row's context: masked there */
		for (uint32_t r = 0; r < R; r += 2) {
			bool la = s_tiled_softmax(t, r, jb);
			bool lb = r + 1 < R && s_tiled_softmax(t, r + 1, jb);

			if (la)
				s_tiled_values(t, r, lb, jb, n);
			else if (lb)
				s_tiled_values(t, r + 1, false, jb, n);
		}
	}
	for (uint32_t r = 0; r < R; r++) {
		const float *sink = ns_attn_row_sink(t, r);
		float *o = t->o + (uint64_t)r * kv->dv, *out = ns_attn_row_out(t, r);
		float l = t->l[r], c = 1.0f;

		if (sink) {
			float mm = fmaxf(t->m[r], *sink);

			c = s_exp1(t->m[r] - mm);
			l = l * c + s_exp1(*sink - mm);
		}
		__m512 f = _mm512_set1_ps(c / l);
		for (uint32_t d = 0; d < kv->dv; d += 16)
			_mm512_storeu_ps(out + d, _mm512_mul_ps(_mm512_load_ps(o + d), f));
	}
}

void ns_attn_task_avx512(const struct ns_attn_task *t)
{
	if (ns_attn_exact(t->a->kv))
		s_task_exact(t);
	else
		s_task_tiled(t);
}

#pragma GCC pop_options
