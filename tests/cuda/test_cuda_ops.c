/* test_cuda_ops: RMSNorm (and fused with the residual add: bits of the two apart), RoPE
 * (normal, NeoX, YaRN; interleaved M-RoPE at per-token positions), SwiGLU (plain, gpt-oss),
 * softmax, router top-k, rows scaled by a vector (gemma4's router input, bit for bit) and
 * greedy argmax against nscompute/forward's CPU versions. exp/sin/cos differ by a few ulps
 * between CUDA and glibc, so values are compared within a relative 2e-6 (RoPE: 2e-5 of the
 * vector's largest element, angles up to ~6000 rad); indices exactly. Exit 77 without a GPU. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cuda_test.h"
#include "ops.h"
#include "rope.h"

static void s_close(const char *what, const float *got, const float *want, uint64_t n,
		    double rel, double abs_tol)
{
	for (uint64_t i = 0; i < n; i++)
		if (!(fabs(got[i] - want[i]) <= rel * fabs(want[i]) + abs_tol))
			CT_FAIL("%s[%llu]: %.9g vs cpu %.9g", what, (unsigned long long)i, got[i],
				want[i]);
}

static void s_rope_case(const char *nm, bool neox, bool yarn, uint64_t *seed)
{
	enum { NT = 5, NH = 4, HD = 128 };
	const int64_t pos0 = 6000;
	struct ns_rope r = { .n_dims = 96, .neox = neox, .freq_base = 10000.0f,
			     .freq_scale = yarn ? 0.25f : 1.0f };
	float *x = ct_random_floats(NT * NH * HD, seed), *ref = malloc(NT * NH * HD * 4);
	float *got = malloc(NT * NH * HD * 4), cs[HD];

	if (yarn)
		ns_rope_yarn_init(&r, 4096, 32.0f, 1.0f, 1.0f);
	memcpy(ref, x, NT * NH * HD * 4);
	for (int t = 0; t < NT; t++) {
		ns_rope_angles(&r, pos0 + t, cs);
		ns_rope_rotate(&r, cs, ref + t * NH * HD, NH, HD);
	}
	struct ns_cuda_rope g = { r.n_dims, r.neox, r.freq_base, r.freq_scale, NULL,
				  r.ext_factor, r.attn_factor, { r.corr_dims[0], r.corr_dims[1] } };
	float *dx = ct_upload(x, NT * NH * HD * 4);
	CT_CHECK(ns_cuda_rope(&g, dx, NT, NH, HD, pos0, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(got, dx, NT * NH * HD * 4);
	s_close(nm, got, ref, NT * NH * HD, 0, 2e-5 * 5.0);
	/* the graph variant, position from device memory: the last token, in bits */
	const int64_t last = pos0 + NT - 1;
	float one[NH * HD];
	int64_t *dpos = ct_upload(&last, sizeof(last));
	CT_CHECK(ns_cuda_h2d(dx, x + (NT - 1) * NH * HD, sizeof(one)));
	CT_CHECK(ns_cuda_rope_at(&g, dx, NH, HD, dpos, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(one, dx, sizeof(one));
	if (memcmp(one, got + (NT - 1) * NH * HD, sizeof(one)))
		CT_FAIL("%s: ns_cuda_rope_at differs in bits from ns_cuda_rope", nm);
	/* decode's fused launch: q and k rotated, k and v stored in cache rows (row strides
	 * wider than the rows; v not a multiple of anything), position from the host and from
	 * the device: the bits of ns_cuda_rope and plain copies */
	for (int at = 0; at < 2; at++) {
		enum { NKV = 2, NV = 2 * HD - 3, LDK = NKV * HD + 3, LDV = NV + 5 };
		const uint64_t rows = (uint64_t)last + 1;
		float *k = ct_random_floats(NKV * HD, seed), *v = ct_random_floats(NV, seed);
		float kref[NKV * HD], q1[NH * HD], k1[NKV * HD], krow[LDK], vrow[LDV];
		float *dk = ct_upload(k, sizeof(kref)), *dv = ct_upload(v, NV * 4);
		float *dkc = ct_dev(rows * LDK * 4), *dvc = ct_dev(rows * LDV * 4);
		float *dkr = ct_upload(k, sizeof(kref));

		CT_CHECK(ns_cuda_memset(dkc, 0, rows * LDK * 4));
		CT_CHECK(ns_cuda_memset(dvc, 0, rows * LDV * 4));
		CT_CHECK(ns_cuda_rope(&g, dkr, 1, NKV, HD, last, NULL));
		CT_CHECK(ns_cuda_h2d(dx, x + (NT - 1) * NH * HD, sizeof(one)));
		CT_CHECK(ns_cuda_rope_kv_store(&g, dx, NH, dk, NKV, HD, dv, NV, dkc, LDK, dvc, LDV,
					       at ? -1 : last, at ? dpos : NULL, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(kref, dkr, sizeof(kref));
		ct_download(q1, dx, sizeof(q1));
		ct_download(k1, dk, sizeof(k1));
		ct_download(krow, dkc + last * LDK, sizeof(krow));
		ct_download(vrow, dvc + last * LDV, sizeof(vrow));
		if (memcmp(q1, one, sizeof(q1)) || memcmp(k1, kref, sizeof(k1)))
			CT_FAIL("%s: rope_kv_store (%s) rotates q or k differently from ns_cuda_rope",
				nm, at ? "dev_pos" : "pos");
		if (memcmp(krow, kref, sizeof(kref)) || memcmp(vrow, v, NV * 4))
			CT_FAIL("%s: rope_kv_store (%s): cache rows are not k and v", nm,
				at ? "dev_pos" : "pos");
		for (int i = NKV * HD; i < LDK; i++) /* nothing past the row */
			if (krow[i] != 0.0f)
				CT_FAIL("%s: rope_kv_store wrote past the K row", nm);
		for (int i = NV; i < LDV; i++)
			if (vrow[i] != 0.0f)
				CT_FAIL("%s: rope_kv_store wrote past the V row", nm);
		ct_download(vrow, dvc + (last - 1) * LDV, sizeof(vrow));
		for (int i = 0; i < LDV; i++)
			if (vrow[i] != 0.0f)
				CT_FAIL("%s: rope_kv_store wrote another row", nm);
		if (ns_cuda_rope_kv_store(&g, dx, NH, dk, NKV, HD, dv, NV, dkc, NKV * HD - 1, dvc,
					  LDV, last, NULL, NULL) != -EINVAL)
			CT_FAIL("%s: rope_kv_store with a K stride below the row not refused", nm);
		ns_cuda_free(dk);
		ns_cuda_free(dv);
		ns_cuda_free(dkc);
		ns_cuda_free(dvc);
		ns_cuda_free(dkr);
		free(k);
		free(v);
	}
	ns_cuda_free(dpos);
	ns_cuda_free(dx);
	free(x);
	free(ref);
	free(got);
}

/* Interleaved M-RoPE (image prompts): every token at its own (temporal, height, width),
 * against the CPU's ns_rope_angles_mrope + ns_rope_rotate; n_dims the whole head (Qwen3-VL's
 * 24/20/20 sections of 64 pairs) and part of it (Qwen3.5's partial rotation, 11/11/10 of 32
 * pairs on 128-wide heads: dimensions past n_dims untouched). Positions up to 6000 as
 * s_rope_case's. Three equal positions give ns_cuda_rope's bits at that position; a NULL
 * position buffer or sections is refused. */
static void s_mrope_case(const char *nm, uint32_t n_dims, const uint32_t sec[4],
			 uint64_t *seed)
{
	enum { NT = 7, NH = 3, HD = 128 };
	/* text (p, p, p), image rows at (p, p + y, p + x), text after at a jump */
	static const int32_t pos[NT * 3] = { 5, 5, 5,	       6, 6, 6,	      7, 7, 7,
					     7, 7, 8,	       7, 8, 7,	      7, 8, 8,
					     5990, 5990, 5990 };
	struct ns_rope r = { .n_dims = n_dims, .neox = true, .freq_base = 5000000.0f,
			     .freq_scale = 1.0f };
	struct ns_cuda_rope g = { r.n_dims, r.neox, r.freq_base, r.freq_scale, NULL,
				  r.ext_factor, r.attn_factor, { r.corr_dims[0], r.corr_dims[1] } };
	float *x = ct_random_floats(NT * NH * HD, seed), *ref = malloc(NT * NH * HD * 4);
	float *got = malloc(NT * NH * HD * 4), *one = malloc(NH * HD * 4), cs[HD];
	float *dx = ct_upload(x, NT * NH * HD * 4);
	int32_t *dpos = ct_upload(pos, sizeof(pos));

	memcpy(ref, x, NT * NH * HD * 4);
	for (int t = 0; t < NT; t++) {
		ns_rope_angles_mrope(&r, pos + 3 * t, sec, cs);
		ns_rope_rotate(&r, cs, ref + t * NH * HD, NH, HD);
	}
	CT_CHECK(ns_cuda_rope_mrope(&g, dx, NT, NH, HD, dpos, sec, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(got, dx, NT * NH * HD * 4);
	s_close(nm, got, ref, NT * NH * HD, 0, 2e-5 * 5.0);
	for (int t = 0; t < NT; t++) /* unrotated dimensions pass through, in bits */
		for (int h = 0; h < NH; h++)
			if (memcmp(got + (t * NH + h) * HD + n_dims, x + (t * NH + h) * HD + n_dims,
				   (HD - n_dims) * 4))
				CT_FAIL("%s: dimensions past n_dims %u changed", nm, n_dims);
	/* a token whose positions differ turns differently from its temporal position alone */
	CT_CHECK(ns_cuda_h2d(dx, x + 3 * NH * HD, NH * HD * 4));
	CT_CHECK(ns_cuda_rope(&g, dx, 1, NH, HD, pos[9], NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(one, dx, NH * HD * 4);
	if (!memcmp(one, got + 3 * NH * HD, NH * HD * 4))
		CT_FAIL("%s: (7, 7, 8) rotated as plain RoPE at 7 (width section unused)", nm);
	/* text rows: ns_cuda_rope's bits at p */
	for (int t = 0; t < NT; t++) {
		if (pos[3 * t] != pos[3 * t + 1] || pos[3 * t] != pos[3 * t + 2])
			continue;
		CT_CHECK(ns_cuda_h2d(dx, x + t * NH * HD, NH * HD * 4));
		CT_CHECK(ns_cuda_rope(&g, dx, 1, NH, HD, pos[3 * t], NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(one, dx, NH * HD * 4);
		if (memcmp(one, got + t * NH * HD, NH * HD * 4))
			CT_FAIL("%s: token %d at (%d, %d, %d) differs in bits from ns_cuda_rope at "
				"%d", nm, t, pos[3 * t], pos[3 * t], pos[3 * t], pos[3 * t]);
	}
	if (ns_cuda_rope_mrope(&g, dx, NT, NH, HD, NULL, sec, NULL) != -EINVAL ||
	    ns_cuda_rope_mrope(&g, dx, NT, NH, HD, dpos, NULL, NULL) != -EINVAL)
		CT_FAIL("%s: a NULL position buffer or sections not refused", nm);
	ns_cuda_free(dx);
	ns_cuda_free(dpos);
	free(x);
	free(ref);
	free(got);
	free(one);
}

int main(void)
{
	uint64_t seed = 11;
	enum { N = 5000, NT = 6, E = 128, K = 8 };

	ct_init("cuda_ops");
	/* rmsnorm, weighted and not */
	float *x = ct_random_floats(N * NT, &seed), *w = ct_random_floats(N, &seed);
	float *ref = malloc(N * NT * 4), *got = malloc(N * NT * 4);
	float *dx = ct_upload(x, N * NT * 4), *dw = ct_upload(w, N * 4), *dy = ct_dev(N * NT * 4);
	for (int wt = 0; wt < 2; wt++) {
		for (int t = 0; t < NT; t++)
			ns_rmsnorm(ref + t * N, x + t * N, wt ? w : NULL, N, 1e-6f);
		CT_CHECK(ns_cuda_rmsnorm(dy, dx, wt ? dw : NULL, N, NT, 1e-6f, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(got, dy, N * NT * 4);
		s_close("rmsnorm", got, ref, N * NT, 2e-6, 0);
	}
	/* residual add + rmsnorm in one launch: the bits of ns_cuda_add then ns_cuda_rmsnorm
	 * (x and y both), at N and at a width that is not a multiple of the block */
	for (int wd = 0; wd < 2; wd++) {
		const uint32_t n = wd ? 2881 : N;
		float *r = ct_random_floats(N * NT, &seed), *gx = malloc(N * NT * 4);
		float *dxa = ct_upload(x, N * NT * 4), *dxb = ct_upload(x, N * NT * 4);
		float *dr = ct_upload(r, N * NT * 4), *dyb = ct_dev(N * NT * 4);

		CT_CHECK(ns_cuda_add(dxa, dr, (uint64_t)n * NT, NULL));
		CT_CHECK(ns_cuda_rmsnorm(dy, dxa, dw, n, NT, 1e-6f, NULL));
		CT_CHECK(ns_cuda_add_rmsnorm(dyb, dxb, dr, dw, n, NT, 1e-6f, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(ref, dy, (uint64_t)n * NT * 4);
		ct_download(got, dyb, (uint64_t)n * NT * 4);
		if (memcmp(ref, got, (uint64_t)n * NT * 4))
			CT_FAIL("add_rmsnorm (n %u): y differs in bits from add + rmsnorm", n);
		ct_download(ref, dxa, (uint64_t)n * NT * 4);
		ct_download(gx, dxb, (uint64_t)n * NT * 4);
		if (memcmp(ref, gx, (uint64_t)n * NT * 4))
			CT_FAIL("add_rmsnorm (n %u): x differs in bits from add + rmsnorm", n);
		for (uint64_t i = 0; i < (uint64_t)n * NT; i++) /* and x is really x + r */
			if (gx[i] != x[i] + r[i])
				CT_FAIL("add_rmsnorm: x[%llu] %.9g is not %.9g + %.9g",
					(unsigned long long)i, gx[i], x[i], r[i]);
		if (ns_cuda_add_rmsnorm(dxb, dxb, dr, dw, n, NT, 1e-6f, NULL) != -EINVAL)
			CT_FAIL("add_rmsnorm with y == x not refused");
		ns_cuda_free(dxa);
		ns_cuda_free(dxb);
		ns_cuda_free(dr);
		ns_cuda_free(dyb);
		free(r);
		free(gx);
	}
	/* rope */
	s_rope_case("rope normal", false, false, &seed);
	s_rope_case("rope neox", true, false, &seed);
	s_rope_case("rope yarn neox", true, true, &seed);
	{
		static const uint32_t vl[4] = { 24, 20, 20, 0 }, q35[4] = { 11, 11, 10, 0 };

		s_mrope_case("m-rope 24/20/20", 128, vl, &seed);
		s_mrope_case("m-rope partial 11/11/10", 64, q35, &seed);
	}
	/* swiglu: gate x*4 so the gpt-oss clamps are reached */
	for (int oai = 0; oai < 2; oai++) {
		float *g = malloc(N * 4);
		for (int i = 0; i < N; i++) {
			g[i] = 4.0f * x[i];
			float u = 4.0f * w[i], xg = g[i];
			if (!oai) {
				ref[i] = ns_silu(xg) * u;
			} else {
				xg = 7.0f < xg ? 7.0f : xg;
				u = u < -7.0f ? -7.0f : 7.0f < u ? 7.0f : u;
				ref[i] = xg / (1.0f + expf(1.702f * (-xg))) * (u + 1.0f);
			}
		}
		float *u4 = malloc(N * 4);
		for (int i = 0; i < N; i++)
			u4[i] = 4.0f * w[i];
		float *dg = ct_upload(g, N * 4), *du = ct_upload(u4, N * 4);
		CT_CHECK(ns_cuda_swiglu(dg, du, N, oai, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(got, dg, N * 4);
		s_close(oai ? "swiglu_oai" : "swiglu", got, ref, N, 2e-6, 1e-30);
		ns_cuda_free(dg);
		ns_cuda_free(du);
		free(g);
		free(u4);
	}
	/* softmax rows */
	memcpy(ref, x, N * NT * 4);
	for (int t = 0; t < NT; t++)
		ns_softmax(ref + t * N, N);
	CT_CHECK(ns_cuda_h2d(dy, x, N * NT * 4));
	CT_CHECK(ns_cuda_softmax(dy, N, NT, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(got, dy, N * NT * 4);
	s_close("softmax", got, ref, N * NT, 2e-6, 1e-12);
	/* router: both modes; CPU mirror of moe.c s_route */
	for (int mode = 0; mode < 2; mode++) {
		const bool sf = mode == 0, norm = mode == 0;
		float lg[NT * E], wr[NT * K], wg[NT * K];
		int32_t sr[NT * K], sg[NT * K];

		memcpy(lg, x, sizeof(lg));
		for (int t = 0; t < NT; t++) {
			float *l = lg + t * E;
			unsigned char taken[E] = { 0 };

			if (sf)
				ns_softmax(l, E);
			for (int s = 0; s < K; s++) {
				int best = E;
				for (int e = 0; e < E; e++)
					if (!taken[e] && (best == E || l[e] > l[best]))
						best = e;
				taken[best] = 1;
				sr[t * K + s] = best;
				wr[t * K + s] = l[best];
			}
			if (!sf)
				ns_softmax(wr + t * K, K);
			if (norm) {
				double sum = 0;
				for (int s = 0; s < K; s++)
					sum += wr[t * K + s];
				for (int s = 0; s < K; s++)
					wr[t * K + s] /= (float)sum;
			}
			for (int s = 0; s < K; s++)
				wr[t * K + s] *= 2.5f;
		}
		float *dl = ct_upload(x, sizeof(lg)), *dwt = ct_dev(sizeof(wg));
		int32_t *ds = ct_dev(sizeof(sg));
		CT_CHECK(ns_cuda_router_topk(dl, NT, E, K, sf, norm, 2.5f, ds, dwt, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(sg, ds, sizeof(sg));
		ct_download(wg, dwt, sizeof(wg));
		if (memcmp(sg, sr, sizeof(sg)))
			CT_FAIL("router mode %d: experts differ", mode);
		s_close("router weights", wg, wr, NT * K, 4e-6, 0);
		ns_cuda_free(dl);
		ns_cuda_free(dwt);
		ns_cuda_free(ds);
	}
	/* scale_rows (gemma4's router input): (y * s) * w[i] on rows ld apart, the gap between
	 * them untouched, bit for bit the CPU's expression (moe.c s_router) */
	{
		enum { SN = 1000, SLD = 1027, ST = 5 };
		float *y = ct_random_floats((uint64_t)SLD * ST, &seed);
		float *sw = ct_random_floats(SN, &seed);
		float *want = malloc((uint64_t)SLD * ST * 4), *sg = malloc((uint64_t)SLD * ST * 4);
		const float sc = 1.0f / sqrtf((float)SN);

		if (!want || !sg)
			CT_FAIL("out of memory");
		memcpy(want, y, (uint64_t)SLD * ST * 4);
		for (int t = 0; t < ST; t++)
			for (int i = 0; i < SN; i++)
				want[t * SLD + i] = want[t * SLD + i] * sc * sw[i];
		float *dys = ct_upload(y, (uint64_t)SLD * ST * 4), *dsw = ct_upload(sw, SN * 4);
		CT_CHECK(ns_cuda_scale_rows(dys, SLD, sc, dsw, SN, ST, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(sg, dys, (uint64_t)SLD * ST * 4);
		if (memcmp(sg, want, (uint64_t)SLD * ST * 4))
			for (int i = 0; i < SLD * ST; i++)
				if (sg[i] != want[i])
					CT_FAIL("scale_rows[%d]: %.9g vs cpu %.9g", i, sg[i], want[i]);
		if (ns_cuda_scale_rows(dys, SN - 1, sc, dsw, SN, ST, NULL) != -EINVAL ||
		    ns_cuda_scale_rows(dys, SLD, sc, NULL, SN, ST, NULL) != -EINVAL)
			CT_FAIL("scale_rows: a row stride below n or no vector not refused");
		ns_cuda_free(dys);
		ns_cuda_free(dsw);
		free(y);
		free(sw);
		free(want);
		free(sg);
	}
	/* argmax, with a tie won by the lower index */
	x[N + 4000] = 100.0f;
	x[N + 4001] = 100.0f;
	x[3 * N + 17] = 100.0f;
	CT_CHECK(ns_cuda_h2d(dx, x, N * NT * 4));
	int32_t *di = ct_dev(NT * 4), am[NT];
	CT_CHECK(ns_cuda_argmax(dx, N, NT, di, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(am, di, sizeof(am));
	for (int t = 0; t < NT; t++) {
		int best = 0;
		for (int i = 1; i < N; i++)
			if (x[t * N + i] > x[t * N + best])
				best = i;
		if (am[t] != best)
			CT_FAIL("argmax token %d: %d vs cpu %d", t, am[t], best);
	}
	printf("rmsnorm, add_rmsnorm x2, rope (+ rope_kv_store x2) x3, swiglu x2, softmax, router x2, "
	       "scale_rows, argmax: ok\n");
	return 0;
}
