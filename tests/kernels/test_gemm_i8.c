/* test_gemm_i8: the int8 GEMM (gemm_i8.h) for every quantized type.
 *   - every path this machine has (scalar, VNNI, AMX emulated, AMX when the CPU and kernel
 *     grant it) gives the same bits, for token counts around the register and tile sizes,
 *     row counts around the 16-row panels, and 1/2/3-thread pools;
 *   - a token alone gives the bits it gets inside a batch, and a window of rows the bits of
 *     the same rows inside the whole matrix;
 *   - against ns_dequant_rows and a double-precision dot: within the int8 bound of gemv.h
 *     (E + float rounding), so the common definition itself is right, not only shared;
 *   - non-finite activations give NaN/inf in the same places on every path;
 *   - float types and paths this CPU lacks are refused with -ENOTSUP;
 *   - ns_gemm_ex with NS_ACT_Q8 hands batches of NS_I8_MIN_TOK tokens or more to it (AUTO or
 *     AVX512 path, where the CPU has VNNI), and keeps smaller ones and no_i8 on its kernels. */
#include <errno.h>
#include <math.h>

#include "dequant.h"
#include "gemm_i8.h"
#include "gemv.h"
#include "kt_rand_mat.h"
#include "ns_util.h"

static uint64_t s_seed = 0x2545F4914F6CDD1Dull;
static int s_n_same, s_n_bound;
static double s_worst;

static enum ns_i8path s_paths[4];
static int s_n_paths;

static bool s_same_bits(const float *a, const float *b, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint32_t ua, ub;

		memcpy(&ua, &a[i], 4);
		memcpy(&ub, &b[i], 4);
		if (ua != ub && !(isnan(a[i]) && isnan(b[i])))
			return false;
	}
	return true;
}

/* y = W x through path p on pool pool, every output written (y pre-filled with a marker). */
static float *s_run(struct ns_pool *pool, enum ns_i8path p, uint32_t type, const uint8_t *w,
		    uint64_t n_cols, uint64_t n_rows, const float *x, uint64_t n_tok, uint64_t ldy)
{
	float *y = malloc(n_tok * ldy * sizeof(float));
	int rc;

	for (uint64_t i = 0; i < n_tok * ldy; i++)
		y[i] = -12345.0f;
	rc = ns_gemm_i8(pool, p, type, w, n_cols, n_rows, x, n_tok, y, ldy);
	if (rc)
		KT_FAIL("ns_gemm_i8 %s type %u %llux%llu x %llu: %d", ns_i8path_name(p), type,
			(unsigned long long)n_rows, (unsigned long long)n_cols,
			(unsigned long long)n_tok, rc);
	for (uint64_t t = 0; t < n_tok; t++)
		for (uint64_t r = n_rows; r < ldy; r++)
			if (y[t * ldy + r] != -12345.0f)
				KT_FAIL("%s wrote past the window (row %llu)", ns_i8path_name(p),
					(unsigned long long)r);
	return y;
}

/* The bound of gemv.h's NS_ACT_Q8 for one output: E = sum_b dx_b / 2 * sum_{k in b} |w_k|,
 * plus float rounding over the sums. */
static void s_check_bound(uint32_t type, const uint8_t *w, uint64_t n_cols, uint64_t n_rows,
			  const float *x, uint64_t n_tok, const float *y, uint64_t ldy)
{
	float *wf = malloc(n_cols * n_rows * sizeof(float));

	if (ns_dequant_rows(type, w, n_cols, n_rows, wf))
		KT_FAIL("dequant type %u", type);
	for (uint64_t t = 0; t < n_tok; t++) {
		const float *xt = x + t * n_cols;

		for (uint64_t r = 0; r < n_rows; r++) {
			const float *wr = wf + r * n_cols;
			double exact = 0, abs = 0, e = 0;

			for (uint64_t b = 0; b < n_cols / 32; b++) {
				float amax = 0;
				double wsum = 0;

				for (int i = 0; i < 32; i++) {
					amax = fmaxf(amax, fabsf(xt[32 * b + i]));
					wsum += fabs(wr[32 * b + i]);
				}
				e += amax / 127.0 / 2 * wsum;
			}
			for (uint64_t k = 0; k < n_cols; k++) {
				exact += (double)wr[k] * xt[k];
				abs += fabs((double)wr[k] * xt[k]);
			}
			double err = fabs(y[t * ldy + r] - exact);
			double tol = e * 1.0001 + ((double)n_cols / 16 + 320) * 0x1p-24 * (abs + e);

			if (!(err <= tol))
				KT_FAIL("type %u row %llu tok %llu: %.9g vs exact %.9g (err %.3g > %.3g)",
					type, (unsigned long long)r, (unsigned long long)t,
					y[t * ldy + r], exact, err, tol);
			if (abs > 0 && err / abs > s_worst)
				s_worst = err / abs;
			s_n_bound++;
		}
	}
	free(wf);
}

static void s_check(const struct kt_ty *ty, uint64_t n_cols, uint64_t n_rows, uint64_t n_tok,
		    struct ns_pool **pools)
{
	uint8_t *w = kt_rand_matrix(&s_seed, ty, n_cols, n_rows);
	float *x = kt_rand_x(&s_seed, n_cols * n_tok);
	uint64_t ldy = n_rows + 3;
	float *ref = s_run(NULL, NS_I8_SCALAR, ty->type, w, n_cols, n_rows, x, n_tok, ldy);
	uint64_t rb = n_cols / ty->be * ty->bb;

	s_check_bound(ty->type, w, n_cols, n_rows, x, n_tok, ref, ldy);
	for (int pi = 0; pi < s_n_paths; pi++)
		for (int th = 0; th < 3; th++) {
			float *y = s_run(pools[th], s_paths[pi], ty->type, w, n_cols, n_rows, x,
					 n_tok, ldy);

			if (!s_same_bits(y, ref, n_tok * ldy))
				KT_FAIL("type %u %llux%llu x %llu tokens: %s on %d threads differs "
					"from scalar", ty->type, (unsigned long long)n_rows,
					(unsigned long long)n_cols, (unsigned long long)n_tok,
					ns_i8path_name(s_paths[pi]), th + 1);
			free(y);
			s_n_same++;
		}
	/* token t alone, rows [r0, r1) alone: the same bits */
	for (int pi = 0; pi < s_n_paths; pi++) {
		uint64_t t = n_tok / 2, r0 = n_rows / 3, r1 = n_rows - n_rows / 4;
		float *y1 = s_run(pools[1], s_paths[pi], ty->type, w, n_cols, n_rows,
				  x + t * n_cols, 1, n_rows);
		float *yw = s_run(pools[1], s_paths[pi], ty->type, w + r0 * rb, n_cols, r1 - r0, x,
				  n_tok, r1 - r0);

		if (!s_same_bits(y1, ref + t * ldy, n_rows))
			KT_FAIL("type %u: %s, one token differs from the batch", ty->type,
				ns_i8path_name(s_paths[pi]));
		for (uint64_t tt = 0; tt < n_tok; tt++)
			if (!s_same_bits(yw + tt * (r1 - r0), ref + tt * ldy + r0, r1 - r0))
				KT_FAIL("type %u: %s, a row window differs from the matrix",
					ty->type, ns_i8path_name(s_paths[pi]));
		free(y1);
		free(yw);
	}
	free(ref);
	free(x);
	free(w);
}

static void s_check_nonfinite(struct ns_pool *pool)
{
	const struct kt_ty *ty = &kt_tys[10]; /* Q4_K */
	uint64_t n_cols = 512, n_rows = 20, n_tok = 3;
	uint8_t *w = kt_rand_matrix(&s_seed, ty, n_cols, n_rows);
	float *x = kt_rand_x(&s_seed, n_cols * n_tok);
	float *ref;

	x[5] = INFINITY;
	x[n_cols + 40] = NAN;
	x[2 * n_cols + 300] = -INFINITY;
	ref = s_run(NULL, NS_I8_SCALAR, ty->type, w, n_cols, n_rows, x, n_tok, n_rows);
	for (int pi = 0; pi < s_n_paths; pi++) {
		float *y = s_run(pool, s_paths[pi], ty->type, w, n_cols, n_rows, x, n_tok, n_rows);

		for (uint64_t i = 0; i < n_tok * n_rows; i++)
			if (isnan(y[i]) != isnan(ref[i]) || isinf(y[i]) != isinf(ref[i]))
				KT_FAIL("%s: output %llu is %g, scalar %g", ns_i8path_name(s_paths[pi]),
					(unsigned long long)i, y[i], ref[i]);
		free(y);
	}
	free(ref);
	free(x);
	free(w);
}

static void s_check_routing(struct ns_pool *pool)
{
	const struct kt_ty *ty = &kt_tys[12]; /* Q6_K */
	uint64_t n_cols = 512, n_rows = 24;
	uint8_t *w = kt_rand_matrix(&s_seed, ty, n_cols, n_rows);
	float *x = kt_rand_x(&s_seed, n_cols * NS_I8_MIN_TOK);

	if (!ns_kpath_supported(NS_KPATH_AVX512) || ns_i8path_best() == NS_I8_SCALAR) {
		printf("no AVX-512 VNNI: ns_gemm_ex keeps every batch (routing not checked)\n");
	} else {
		for (uint64_t n_tok = NS_I8_MIN_TOK - 1; n_tok <= NS_I8_MIN_TOK; n_tok++) {
			float *yi = s_run(pool, NS_I8_AUTO, ty->type, w, n_cols, n_rows, x, n_tok, n_rows);
			float *yg = malloc(n_tok * n_rows * 4), *yk = malloc(n_tok * n_rows * 4);
			struct ns_kopts ko = { NS_KPATH_AUTO, NS_ACT_Q8, false };
			struct ns_kopts kk = { NS_KPATH_AUTO, NS_ACT_Q8, true };
			bool routed = n_tok >= NS_I8_MIN_TOK;

			if (ns_gemm_ex(pool, &ko, ty->type, w, n_cols, n_rows, x, n_tok, yg, n_rows) ||
			    ns_gemm_ex(pool, &kk, ty->type, w, n_cols, n_rows, x, n_tok, yk, n_rows))
				KT_FAIL("ns_gemm_ex failed");
			if (routed ? !s_same_bits(yg, yi, n_tok * n_rows)
				   : !s_same_bits(yg, yk, n_tok * n_rows))
				KT_FAIL("ns_gemm_ex with %llu q8 tokens did not %s", (unsigned long long)n_tok,
					routed ? "run the int8 GEMM" : "keep its own kernels");
			if (s_same_bits(yk, yi, n_tok * n_rows))
				KT_FAIL("the int8 GEMM and the q8 row kernels agree to the bit here: "
					"the routing check cannot tell them apart");
			free(yi);
			free(yg);
			free(yk);
		}
	}
	free(x);
	free(w);
}

static void s_check_contract(void)
{
	float x[64] = { 0 }, y[4];
	uint8_t w[4 * 64 * 4] = { 0 };

	if (ns_gemm_i8(NULL, NS_I8_SCALAR, NS_TYPE_F32, w, 64, 1, x, 1, y, 1) != -ENOTSUP ||
	    ns_gemm_i8(NULL, NS_I8_SCALAR, NS_TYPE_F16, w, 64, 1, x, 1, y, 1) != -ENOTSUP)
		KT_FAIL("float weights were not refused");
	if (ns_gemm_i8(NULL, NS_I8_SCALAR, NS_TYPE_Q8_0, w, 48, 1, x, 1, y, 1) != -EINVAL)
		KT_FAIL("a partial block was not refused");
	if (ns_gemm_i8(NULL, NS_I8_SCALAR, NS_TYPE_Q8_0, w, 64, 2, x, 2, y, 1) != -EINVAL)
		KT_FAIL("ldy < n_rows was not refused");
	if (ns_gemm_i8(NULL, NS_I8_SCALAR, NS_TYPE_Q8_0, NULL, 64, 1, x, 1, y, 1) != -EINVAL)
		KT_FAIL("NULL weights were not refused");
	for (int p = NS_I8_VNNI; p <= NS_I8_AMX_EMU; p++)
		if (!ns_i8path_supported((enum ns_i8path)p) &&
		    ns_gemm_i8(NULL, (enum ns_i8path)p, NS_TYPE_Q8_0, w, 64, 1, x, 1, y, 1) !=
			    -ENOTSUP)
			KT_FAIL("unsupported path %s was not refused", ns_i8path_name(p));
}

int main(void)
{
	struct ns_pool *pools[3] = { ns_pool_new(1), ns_pool_new(2), ns_pool_new(3) };
	static const uint64_t toks[] = { 1, 2, 5, 6, 7, 13, 16, 17, 40 };
	static const uint64_t rows[] = { 1, 7, 16, 33, 50, 16, 64, 21, 3 };

	if (!pools[0] || !pools[1] || !pools[2])
		KT_FAIL("ns_pool_new failed");
	for (int p = NS_I8_VNNI; p <= NS_I8_AMX_EMU; p++)
		if (ns_i8path_supported((enum ns_i8path)p))
			s_paths[s_n_paths++] = (enum ns_i8path)p;
	printf("int8 GEMM paths here: scalar");
	for (int i = 0; i < s_n_paths; i++)
		printf(", %s", ns_i8path_name(s_paths[i]));
	printf(" (auto: %s)\n", ns_i8path_name(ns_i8path_best()));
	if (!ns_i8path_supported(NS_I8_AMX))
		printf("AMX not granted here (CPU or kernel): the AMX kernel runs emulated only\n");
	s_check_contract();
	for (size_t i = 0; i < NS_ARRAY_LEN(kt_tys); i++) {
		const struct kt_ty *ty = &kt_tys[i];

		if (!ns_gemm_i8_type(ty->type))
			continue;
		for (size_t c = 0; c < NS_ARRAY_LEN(toks); c++) {
			uint64_t n_cols = ty->be == 32 ? 32 * (1 + c * 7) : 256 * (1 + c % 4);

			s_check(ty, n_cols, rows[c], toks[c], pools);
		}
	}
	s_check_nonfinite(pools[1]);
	s_check_routing(pools[1]);
	printf("%d path/thread comparisons bit-identical, %d outputs within the int8 bound "
	       "(worst |err|/sum|w x| %.3g)\n", s_n_same, s_n_bound, s_worst);
	for (int i = 0; i < 3; i++)
		ns_pool_destroy(&pools[i]);
	return 0;
}
