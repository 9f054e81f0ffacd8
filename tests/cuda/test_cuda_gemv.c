/* test_cuda_gemv: the fused decode GEMV and the tensor-core prefill GEMM of every type.
 *   GEMV vs the exact dot (double) of ns_dequant_rows weights:
 *     |y - exact| <= (n_cols/32 + 64) * 2^-23 * sum|w x|
 *   and vs the CPU scalar path (its own bound added, gemv.h).
 *   GEMM (f16 inputs, f32 accumulation) vs exact and vs GEMV per row:
 *     |y - exact| <= (2^-9 + n_cols * 2^-22) * sum|w x| + 1e-6
 *   Shapes 4096, 2880 (32-blocks) and 256 columns; Q8_0 also 65536 (x in global memory),
 *   MXFP4 and Q4_0 also 96 (odd row sizes: byte-wise staging).
 *   Determinism: rows computed in windows of 1, 7 and 64 rows (at other offsets, so in other
 *   places of a tile), tokens computed with n_tok 1 and 37, and the GEMM's x rows n_cols + 4
 *   apart instead of packed give identical bits.
 *   The GEMV checks run for each kernel family of ns_cuda_gemv_variant (nscuda_internal.h:
 *   1 gemv.cu, 2 and 3 gemv2.cu, 4 the per-type pick); each is deterministic on its own (they
 *   need not agree in bits). Then windows of 9001 rows (several row groups per warp in gemv2) vs
 *   exact, and a 4500-row window from row 3 bit-identical to the whole.
 *   Float rows whose length is not a multiple of 32 (the kernels' tail paths, stories260K's
 *   172-wide FFN-down): F32, F16 and BF16 at 33 and 172 columns through all of the above in
 *   every family (windows of 1/7/64 rows from rows 5 and 3: F16/BF16 rows of 33 columns are
 *   66 bytes, so those windows are only 2-byte aligned; the GEMM with ldx = n_cols, not a
 *   multiple of 4; token 5 alone: x only 4-byte aligned); 4100 columns (129 units, the tail in
 *   gemv2's fifth chunk) for one float type per family, 65543 (x from global memory) in
 *   families 1 and 2; 9001 rows at 172 (F16) and 33 (BF16) columns. The contract: such rows
 *   of a quantized type, float windows misaligned for their element and x misaligned for a
 *   float are -EINVAL.
 * Exit 77 without a GPU. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cuda_test.h"
#include "dequant.h"
#include "gemv.h"
#include "ggml_type.h"
#include "kt_util.h"
#include "nscuda_internal.h"

#define NR 70
#define NT 37

static void s_case(int var, int ti, uint64_t nc, uint64_t *seed)
{
	const uint32_t type = ct_types[ti];
	const char *nm = ct_type_names[ti];
	uint64_t rb;
	uint8_t *raw = ct_random_rows(type, nc, NR, seed, &rb);
	float *x = ct_random_floats(nc * NT, seed);
	float *w = malloc(nc * NR * 4), yv[NR], ycpu[NR], *ym = malloc(NR * NT * 4);
	double worst_v = 0, worst_m = 0;
	struct ns_kopts ko = { NS_KPATH_SCALAR, NS_ACT_F32, false };

	if (ns_dequant_rows(type, raw, nc, NR, w))
		CT_FAIL("cpu dequant");
	struct ns_pool *pool = ns_pool_new(1);

	if (!pool)
		CT_FAIL("pool");
	if (ns_gemm_ex(pool, &ko, type, raw, nc, NR, x, 1, ycpu, NR))
		CT_FAIL("cpu gemv");
	uint8_t *dw = ct_upload(raw, rb * NR);
	float *dx = ct_upload(x, nc * NT * 4), *dy = ct_dev(NR * NT * 4);

	CT_CHECK(ns_cuda_gemv_variant(var, type, dw, nc, NR, dx, dy, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(yv, dy, sizeof(yv));
	CT_CHECK(ns_cuda_gemm_prefill(type, dw, nc, NR, dx, nc, NT, dy, NR, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(ym, dy, NR * NT * 4);
	for (int r = 0; r < NR; r++) {
		double a, e = ct_dot(w + r * nc, x, nc, &a);
		double tv = (nc / 32 + 64) * 0x1p-23 * a;
		double tc = tv + (nc / 16 + 320) * 0x1p-24 * a;

		if (fabs(yv[r] - e) > tv)
			CT_FAIL("%s v%d gemv row %d: %.9g vs exact %.9g (tol %.3g)", nm, var, r, yv[r], e,
				tv);
		if (fabs(yv[r] - ycpu[r]) > tc)
			CT_FAIL("%s v%d gemv row %d: %.9g vs cpu %.9g (tol %.3g)", nm, var, r, yv[r],
				ycpu[r], tc);
		worst_v = fmax(worst_v, a > 0 ? fabs(yv[r] - e) / a : 0);
		for (int t = 0; t < NT; t++) {
			double at, et = ct_dot(w + r * nc, x + t * nc, nc, &at);
			double tm = (0x1p-9 + nc * 0x1p-22) * at + 1e-6;
			float g = ym[t * NR + r];

			if (fabs(g - et) > tm)
				CT_FAIL("%s gemm row %d tok %d: %.9g vs exact %.9g (tol %.3g)", nm, r, t,
					g, et, tm);
			if (t == 0 && fabs(g - yv[r]) > tm + tv)
				CT_FAIL("%s gemm row %d vs gemv: %.9g vs %.9g", nm, r, g, yv[r]);
			worst_m = fmax(worst_m, at > 0 ? fabs(g - et) / at : 0);
		}
	}
	/* windows: rows [a, a+n) as their own window, n = 1, 7, 64 */
	const int wins[3][2] = { { 5, 1 }, { 5, 7 }, { 3, 64 } };
	for (int k = 0; k < 3; k++) {
		const int a = wins[k][0], n = wins[k][1];
		float gv[NR], *gm = malloc(n * NT * 4);

		CT_CHECK(ns_cuda_gemv_variant(var, type, dw + a * rb, nc, n, dx, dy, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(gv, dy, n * 4);
		if (memcmp(gv, yv + a, n * 4))
			CT_FAIL("%s v%d gemv: window of %d rows at %d differs in bits", nm, var, n, a);
		CT_CHECK(ns_cuda_gemm_prefill(type, dw + a * rb, nc, n, dx, nc, NT, dy, n, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(gm, dy, n * NT * 4);
		for (int t = 0; t < NT; t++)
			if (memcmp(gm + t * n, ym + t * NR + a, n * 4))
				CT_FAIL("%s gemm: window of %d rows at %d, token %d differs in bits", nm,
					n, a, t);
		free(gm);
	}
	/* x rows further apart than n_cols (ldx = n_cols + 4, gemma4's stacked experts read
	 * 2 n_ff_exp apart): the same bits as packed rows (the GEMM is one kernel: once) */
	if (var == 1) {
		const uint64_t ldx = nc + 4;
		float *xp = calloc(ldx * NT, 4), *gp = malloc(NR * NT * 4);

		if (!xp || !gp)
			CT_FAIL("out of memory");
		for (int t = 0; t < NT; t++)
			memcpy(xp + t * ldx, x + t * nc, nc * 4);
		float *dxp = ct_upload(xp, ldx * NT * 4);

		CT_CHECK(ns_cuda_gemm_prefill(type, dw, nc, NR, dxp, ldx, NT, dy, NR, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(gp, dy, NR * NT * 4);
		if (memcmp(gp, ym, NR * NT * 4))
			CT_FAIL("%s gemm: x rows %llu apart differ in bits from packed rows", nm,
				(unsigned long long)ldx);
		ns_cuda_free(dxp);
		free(xp);
		free(gp);
	}
	/* one token alone (token 5) equals its row in the 37-token product */
	CT_CHECK(ns_cuda_gemm_prefill(type, dw, nc, NR, dx + 5 * nc, nc, 1, dy, NR, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(yv, dy, NR * 4);
	if (memcmp(yv, ym + 5 * NR, NR * 4))
		CT_FAIL("%s gemm: n_tok 1 differs in bits from n_tok %d", nm, NT);
	printf("v%d %-6s n_cols %5llu: gemv worst |err|/sum|wx| %.2e, gemm %.2e, windows 1/7/64, "
	       "x stride and n_tok 1/%d bit-identical\n", var, nm, (unsigned long long)nc, worst_v,
	       worst_m, NT);
	ns_cuda_free(dw);
	ns_cuda_free(dx);
	ns_cuda_free(dy);
	free(raw);
	free(x);
	free(w);
	free(ym);
	ns_pool_destroy(&pool);
}

/* Many rows (s_mr): every family vs exact; a window of s_mr / 2 rows from row 3 (other row groups,
 * other alignment) bit-identical to the same rows of the whole. gemv2's grid covers 32 rows
 * per SM at a time, so 68 per SM and a partial group give each warp two row groups and more:
 * 9001 on a 132-SM GPU, 93 on the one-SM emulation (tests/cuda/simt, where 9001 rows took 45
 * of the test's 65 s for nothing more). Set once in main from the device. */
static int s_mr = 9001;

static void s_many(int ti, uint64_t nc, uint64_t *seed)
{
	const uint32_t type = ct_types[ti];
	uint64_t rb;
	uint8_t *raw = ct_random_rows(type, nc, s_mr, seed, &rb);
	float *x = ct_random_floats(nc, seed);
	float *w = malloc(nc * s_mr * 4), *y = malloc(s_mr * 4), *yw = malloc(s_mr * 4);
	double *ex = malloc(s_mr * sizeof(double)), *ab = malloc(s_mr * sizeof(double));
	const char *env = getenv("NS_CUDA_GEMV");
	const int dv = env && env[0] >= '1' && env[0] <= '4' && !env[1] ? env[0] - '0' : 4;

	if (!w || !y || !yw || !ex || !ab)
		CT_FAIL("out of memory");
	if (ns_dequant_rows(type, raw, nc, s_mr, w))
		CT_FAIL("cpu dequant");
	for (int r = 0; r < s_mr; r++)
		ex[r] = ct_dot(w + (uint64_t)r * nc, x, nc, &ab[r]);
	uint8_t *dw = ct_upload(raw, rb * s_mr);
	float *dx = ct_upload(x, nc * 4), *dy = ct_dev(s_mr * 4);

	for (int var = 1; var <= 4; var++) {
		CT_CHECK(ns_cuda_gemv_variant(var, type, dw, nc, s_mr, dx, dy, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(y, dy, s_mr * 4);
		for (int r = 0; r < s_mr; r++) {
			double tv = (nc / 32 + 64) * 0x1p-23 * ab[r];

			if (!(fabs(y[r] - ex[r]) <= tv))
				CT_FAIL("%s v%d %d rows: row %d: %.9g vs exact %.9g (tol %.3g)",
					ct_type_names[ti], var, s_mr, r, y[r], ex[r], tv);
		}
		CT_CHECK(ns_cuda_gemv_variant(var, type, dw + 3 * rb, nc, s_mr / 2, dx, dy, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(yw, dy, s_mr / 2 * 4);
		if (memcmp(yw, y + 3, s_mr / 2 * 4))
			CT_FAIL("%s v%d: window of %d rows at 3 differs in bits", ct_type_names[ti],
				var, s_mr / 2);
		if (var == dv) { /* the public entry runs the family NS_CUDA_GEMV names */
			CT_CHECK(ns_cuda_gemv(type, dw, nc, s_mr, dx, dy, NULL));
			CT_CHECK(ns_cuda_sync());
			ct_download(yw, dy, s_mr * 4);
			if (memcmp(yw, y, s_mr * 4))
				CT_FAIL("%s: ns_cuda_gemv differs from variant %d", ct_type_names[ti],
					dv);
		}
	}
	printf("%-6s n_cols %5llu, %d rows: v1/v2/v3/v4 within the bound, window of %d at row 3 "
	       "bit-identical\n", ct_type_names[ti], (unsigned long long)nc, s_mr, s_mr / 2);
	ns_cuda_free(dw);
	ns_cuda_free(dx);
	ns_cuda_free(dy);
	free(raw);
	free(x);
	free(w);
	free(y);
	free(yw);
	free(ex);
	free(ab);
}

/* Windows the kernels refuse (or accept) for rows with a partial unit of 32. */
static void s_contract(void)
{
	uint8_t *dw = ct_dev(1 << 16);
	float *dx = ct_dev(1 << 16), *dy = ct_dev(1 << 16);

	CT_CHECK(ns_cuda_memset(dw, 0, 1 << 16));
	CT_CHECK(ns_cuda_memset(dx, 0, 1 << 16));
	const float *dx2 = (const float *)((const uint8_t *)dx + 2); /* misaligned x */

	for (int var = 1; var <= 4; var++) {
		if (ns_cuda_gemv_variant(var, NS_TYPE_Q8_0, dw, 48, 4, dx, dy, NULL) != -EINVAL ||
		    ns_cuda_gemv_variant(var, NS_TYPE_F16, dw + 1, 33, 4, dx, dy, NULL) !=
			    -EINVAL ||
		    ns_cuda_gemv_variant(var, NS_TYPE_BF16, dw + 3, 33, 4, dx, dy, NULL) !=
			    -EINVAL ||
		    ns_cuda_gemv_variant(var, NS_TYPE_F32, dw + 2, 33, 4, dx, dy, NULL) !=
			    -EINVAL ||
		    ns_cuda_gemv_variant(var, NS_TYPE_F16, dw + 2, 33, 4, dx2, dy, NULL) != -EINVAL)
			CT_FAIL("v%d: partial-unit contract", var);
		/* 2-byte aligned F16 and 4-byte aligned F32 windows of such rows are fine;
		 * whole-unit F16 rows keep their 16-byte rule */
		CT_CHECK(ns_cuda_gemv_variant(var, NS_TYPE_F16, dw + 2, 33, 4, dx, dy, NULL));
		CT_CHECK(ns_cuda_gemv_variant(var, NS_TYPE_F32, dw + 4, 33, 4, dx + 1, dy, NULL));
		if (ns_cuda_gemv_variant(var, NS_TYPE_F32, dw, 64, 4, dx + 1, dy, NULL) != -EINVAL)
			CT_FAIL("v%d: x of whole units must be 16-byte aligned", var);
		if (ns_cuda_gemv_variant(var, NS_TYPE_F16, dw + 2, 64, 4, dx, dy, NULL) != -EINVAL)
			CT_FAIL("v%d: a misaligned window of whole units", var);
	}
	if (ns_cuda_gemm_prefill(NS_TYPE_Q4_0, dw, 48, 4, dx, 48, 2, dy, 4, NULL) != -EINVAL ||
	    ns_cuda_gemm_prefill(NS_TYPE_F16, dw + 1, 33, 4, dx, 33, 2, dy, 4, NULL) != -EINVAL ||
	    ns_cuda_gemm_prefill(NS_TYPE_F16, dw, 64, 4, dx, 66, 2, dy, 4, NULL) != -EINVAL ||
	    ns_cuda_gemm_prefill(NS_TYPE_F16, dw, 33, 4, dx, 32, 2, dy, 4, NULL) != -EINVAL)
		CT_FAIL("gemm: partial-unit contract");
	CT_CHECK(ns_cuda_gemm_prefill(NS_TYPE_F16, dw + 2, 33, 4, dx, 35, 2, dy, 4, NULL));
	CT_CHECK(ns_cuda_sync());
	ns_cuda_free(dw);
	ns_cuda_free(dx);
	ns_cuda_free(dy);
	printf("partial units: quantized rows, misaligned windows and x refused; 2-byte aligned "
	       "F16 windows and any ldx accepted\n");
}

int main(void)
{
	uint64_t seed = 7;
	const int n_sm = ct_init("cuda_gemv");

	if (n_sm > 0 && 68 * n_sm + 25 < s_mr)
		s_mr = 68 * n_sm + 25;
	for (int var = 1; var <= 4; var++) {
		for (int ti = 0; ti < 14; ti++) {
			const struct ns_type_info *t = ns_type_get(ct_types[ti]);

			s_case(var, ti, 4096, &seed);
			if (t->block_elems == 32 || ct_types[ti] <= NS_TYPE_F16 ||
			    ct_types[ti] == NS_TYPE_BF16)
				s_case(var, ti, 2880, &seed);
			s_case(var, ti, 256, &seed);
		}
		/* x too large for shared memory (2048 units): the global-x path */
		s_case(var, 7, 65536, &seed);
		/* odd row sizes (51 and 54 bytes): windows staged with 1- and 2-byte copies */
		s_case(var, 13, 96, &seed);
		s_case(var, 3, 96, &seed);
	}
	/* several row groups per warp (gemv2's grid holds at most 2 blocks of 16 rows per SM);
	 * 512 columns: both warps of a group busy; 2880 columns: odd chunk count, rows aligned
	 * to 4 / 2 bytes */
	for (int ti = 0; ti < 14; ti++)
		s_many(ti, 512, &seed);
	s_many(7, 2880, &seed);
	s_many(3, 2880, &seed);
	s_many(13, 2880, &seed);
	s_many(12, 4096, &seed);
	/* float rows ending in a partial unit of 32 (ti 0..2: F32, F16, BF16); the larger shapes
	 * for one type per family (the file also runs on tests/cuda/simt, where time counts) */
	for (int var = 1; var <= 4; var++) {
		for (int ti = 0; ti < 3; ti++) {
			s_case(var, ti, 33, &seed);
			s_case(var, ti, 172, &seed);
		}
		s_case(var, var % 3, 4100, &seed); /* 129 units: 5 chunks, tail in the last */
		if (var <= 2) /* 2049 units: x from global memory (3, 4: float types take 2) */
			s_case(var, 1, 65543, &seed);
	}
	s_many(1, 172, &seed); /* stories260K's FFN-down shape, F16 */
	s_many(2, 33, &seed);  /* 66-byte rows: the 4500-row window only 2-byte aligned */
	s_contract();
	return 0;
}
