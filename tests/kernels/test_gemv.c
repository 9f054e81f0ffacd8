/* test_gemv: fused kernels (every path this CPU has x both activation modes) against
 * ns_dequant_rows + a double-precision dot, with the error bounds stated in gemv.h; paths
 * against each other; SIMD decoders against the scalar ones byte for byte; bit-identical
 * outputs across windows, thread counts, token batches and y strides; the error contract.
 *
 * Matrices: random bytes with sane scale fields (any bytes are valid input for kernel-vs-dequant
 * checks; dequantization itself is proven bit-exact by test_dequant_oracle) and the oracle's
 * real tensors (zero rows, outliers, subnormal rows). */
#include <errno.h>
#include <math.h>

#include "dequant.h"
#include "gemv.h"
#include "ggml_type.h"
#include "kern_internal.h"
#include "e8m0_table.h"
#include "kt_rand_mat.h"

static uint64_t s_seed = 0x9E3779B97F4A7C15ull;
static int s_n_checks;
/* worst |err| / sum|w x| seen per path (1..3) and act */
static double s_worst[4][2];

static const enum ns_kpath s_paths[] = { NS_KPATH_SCALAR, NS_KPATH_AVX2, NS_KPATH_AVX512 };

/* Float summation tolerance of gemv.h, with room for the scalar path's chunk partials. */
static double s_ftol(uint64_t n_cols)
{
	return ((double)n_cols / 16 + 320) * 0x1p-24;
}

/* Check one matrix: every path x act against dequant + double dot, paths against each other,
 * windows / threads / batches bit-identical. */
static void s_check(const char *what, uint32_t type, const uint8_t *w, uint64_t n_cols,
		    uint64_t n_rows, uint64_t n_tok, struct ns_pool **pools)
{
	char tbuf[32];
	const struct ns_type_info *ti = ns_type_get(type);
	uint64_t rb = n_cols / ti->block_elems * ti->block_bytes;
	float *wf = malloc(n_cols * n_rows * 4 + 4);
	float *x = kt_rand_x(&s_seed, n_cols * n_tok);
	uint64_t ldy = n_rows + 3;
	float *y = malloc(n_tok * ldy * 4), *y2 = malloc(n_tok * ldy * 4);
	float *yref_q8 = malloc(n_tok * n_rows * 4);
	double *ref = malloc(n_tok * n_rows * sizeof(double)), *mass = malloc(n_tok * n_rows * 8);
	double *eq = malloc(n_tok * n_rows * sizeof(double));
	bool is_float = ti->block_elems == 1;

	const char *tn = ns_type_name(type, tbuf, sizeof(tbuf));
	if (ns_dequant_rows(type, w, n_cols, n_rows, wf))
		KT_FAIL("%s %s: dequant failed", what, tn);
	for (uint64_t t = 0; t < n_tok; t++) {
		const float *xt = x + t * n_cols;

		for (uint64_t r = 0; r < n_rows; r++) {
			const float *wr = wf + r * n_cols;
			double s = 0, a = 0, e = 0;

			for (uint64_t k = 0; k < n_cols; k++) {
				s += (double)wr[k] * xt[k];
				a += fabs((double)wr[k] * xt[k]);
			}
			/* Q8 bound: sum_b dx_b / 2 * sum_{k in b} |w_k| */
			for (uint64_t b = 0; !is_float && b < n_cols / 32; b++) {
				float amax = 0, dx;
				double sw = 0;

				for (int i = 0; i < 32; i++) {
					amax = fmaxf(amax, fabsf(xt[32 * b + i]));
					sw += fabs(wr[32 * b + i]);
				}
				dx = amax / 127.0f;
				e += dx / 2.0 * sw;
			}
			ref[t * n_rows + r] = s;
			mass[t * n_rows + r] = a;
			eq[t * n_rows + r] = e;
		}
	}
	for (size_t pi = 0; pi < sizeof(s_paths) / sizeof(s_paths[0]); pi++) {
		if (!ns_kpath_supported(s_paths[pi]))
			continue;
		for (int act = 0; act < 2; act++) {
			struct ns_kopts o = { s_paths[pi], (enum ns_act)act, true }; /* no_i8: these paths */
			bool q8 = act == NS_ACT_Q8 && !is_float;
			int rc;

			for (uint64_t i = 0; i < n_tok * ldy; i++)
				y[i] = -777.0f;
			rc = ns_gemm_ex(pools[1], &o, type, w, n_cols, n_rows, x, n_tok, y, ldy);
			if (rc)
				KT_FAIL("%s %s %s: ns_gemm_ex = %d", what, tn, ns_kpath_name(o.path), rc);
			for (uint64_t t = 0; t < n_tok; t++) {
				for (uint64_t r = n_rows; r < ldy; r++)
					if (y[t * ldy + r] != -777.0f)
						KT_FAIL("%s %s: wrote into the y stride gap", what, tn);
				for (uint64_t r = 0; r < n_rows; r++) {
					double got = y[t * ldy + r], want = ref[t * n_rows + r];
					double m = mass[t * n_rows + r];
					double tol = s_ftol(n_cols) * m + 1e-30;

					if (q8)
						tol = eq[t * n_rows + r] * 1.001 +
						      s_ftol(n_cols) * (m + eq[t * n_rows + r]) + 1e-30;
					if (m > 0 && fabs(got - want) / m > s_worst[o.path][q8])
						s_worst[o.path][q8] = fabs(got - want) / m;
					if (!(fabs(got - want) <= tol))
						KT_FAIL("%s %s n_cols %llu %s act %d row %llu tok %llu: got %.9g want %.9g (tol %.3g)",
							what, tn, (unsigned long long)n_cols, ns_kpath_name(o.path), act,
							(unsigned long long)r, (unsigned long long)t, got, want, tol);
					/* Q8 paths share their integer sums: they agree to float rounding */
					if (q8 && s_paths[pi] == NS_KPATH_SCALAR)
						yref_q8[t * n_rows + r] = (float)got;
					else if (q8 && fabs(got - yref_q8[t * n_rows + r]) >
							       2 * s_ftol(n_cols) * (m + eq[t * n_rows + r]) + 1e-30)
						KT_FAIL("%s %s %s: Q8 path disagrees with the scalar Q8 path (%.9g vs %.9g)",
							what, tn, ns_kpath_name(o.path), got, yref_q8[t * n_rows + r]);
					s_n_checks++;
				}
			}
			/* the same values from windows, other thread counts and single tokens */
			uint64_t cuts[][2] = { { 0, n_rows }, { n_rows / 2, n_rows }, { 1, n_rows },
					       { n_rows / 3, n_rows / 3 + 1 }, { n_rows - 1, n_rows } };
			for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
				uint64_t a = cuts[c][0], b = cuts[c][1];
				struct ns_pool *p = pools[c % 3];

				if (a >= b)
					continue;
				rc = ns_gemm_ex(p, &o, type, w + a * rb, n_cols, b - a, x, n_tok, y2, ldy);
				for (uint64_t t = 0; !rc && t < n_tok; t++)
					if (memcmp(y2 + t * ldy, y + t * ldy + a, (b - a) * 4))
						KT_FAIL("%s %s %s act %d: window [%llu,%llu) with %d threads not bit-identical",
							what, tn, ns_kpath_name(o.path), act, (unsigned long long)a,
							(unsigned long long)b, ns_pool_threads(p));
				if (rc)
					KT_FAIL("window call failed: %d", rc);
			}
			uint64_t t = n_tok - 1;
			rc = ns_gemv_ex(pools[2], &o, type, w, n_cols, n_rows, x + t * n_cols, y2);
			if (rc || memcmp(y2, y + t * ldy, n_rows * 4))
				KT_FAIL("%s %s %s act %d: gemv of the last token differs from its batch row",
					what, tn, ns_kpath_name(o.path), act);
		}
	}
	free(wf);
	free(x);
	free(y);
	free(y2);
	free(yref_q8);
	free(ref);
	free(mass);
	free(eq);
}

static void s_check_decoders(void)
{
	if (!ns_kpath_supported(NS_KPATH_AVX2))
		return;
	for (size_t i = 0; i < sizeof(kt_tys) / sizeof(kt_tys[0]); i++) {
		const struct ns_kqtype *qt = ns_kq_get(kt_tys[i].type);

		if (qt->is_float)
			continue;
		for (int rep = 0; rep < 50; rep++) {
			uint8_t *w = kt_rand_matrix(&s_seed, &kt_tys[i], 256, 1);
			struct ns_kdec a, b;

			memset(&a, 0, sizeof(a));
			memset(&b, 0, sizeof(b));
			qt->dec(w, qt->chunk_blocks, &a);
			if (!ns_kdec_avx2(qt->type, w, qt->chunk_blocks, &b))
				KT_FAIL("type %u has no SIMD decoder", qt->type);
			if (memcmp(&a, &b, sizeof(a)))
				KT_FAIL("type %u: SIMD decoder differs from the scalar one", qt->type);
			free(w);
		}
	}
	printf("SIMD decoders byte-identical to the scalar ones\n");
}

/* The SIMD activation quantizers must give the reference quantizer's bytes exactly, with
 * zeros, -0, NaN, infinities, subnormals and huge values in the blocks. */
static void s_check_quantizer(void)
{
	enum { N = 32 * 40 };
	static const float special[] = { 0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-40f, -3e38f,
					 1e-30f, 127.0f, 0.5f };

	for (int rep = 0; rep < 40; rep++) {
		bool avx512 = rep % 2;
		float x[N];
		int8_t q[2][N];
		float dg[2][N / 16], sg[2][N / 16];
		int32_t c[2][N / 4];

		if (!ns_kpath_supported(avx512 ? NS_KPATH_AVX512 : NS_KPATH_AVX2))
			continue;

		for (int i = 0; i < N; i++) {
			double u = kt_rand(&s_seed);
			int blk = i / 32;

			x[i] = kt_normal(&s_seed) * (float)(blk % 5 == 0 ? 1e-3 : 1.0);
			if (blk % 7 == 1 && u < 0.2)
				x[i] = special[(int)(kt_rand(&s_seed) * 10)];
			if (blk % 11 == 3)
				x[i] = 0.0f;
			if (blk % 13 == 4)
				x[i] = 1e-41f * (float)(i % 3);
		}
		for (int k = 0; k < 2; k++) {
			memset(q[k], 0x55, sizeof(q[k]));
			memset(dg[k], 0x55, sizeof(dg[k]));
			memset(sg[k], 0x55, sizeof(sg[k]));
			memset(c[k], 0x55, sizeof(c[k]));
		}
		ns_kquant_x_scalar(x, N, q[0], dg[0], sg[0], c[0]);
		if (avx512)
			ns_kquant_x_avx512(x, N, q[1], dg[1], sg[1], c[1]);
		else
			ns_kquant_x_avx2(x, N, q[1], dg[1], sg[1], c[1]);
		if (memcmp(q[0], q[1], sizeof(q[0])) || memcmp(dg[0], dg[1], sizeof(dg[0])) ||
		    memcmp(sg[0], sg[1], sizeof(sg[0])) || memcmp(c[0], c[1], sizeof(c[0])))
			KT_FAIL("%s activation quantizer differs from the reference (rep %d)",
				avx512 ? "AVX-512" : "AVX2", rep);
	}
	printf("SIMD activation quantizers byte-identical to the reference\n");
}

/* The E8M0 table the SIMD kernels use must hold ggml's E8M0_TO_FP32_HALF bit pattern. */
static void s_check_e8m0_table(void)
{
	for (uint32_t e = 0; e < 256; e++) {
		uint32_t want = e < 2 ? 0x00200000u << e : (e - 1) << 23, got;

		memcpy(&got, &ns_e8m0_half_tab[e], 4);
		if (got != want)
			KT_FAIL("E8M0 table entry %u is %08x, want %08x", e, got, want);
	}
}

static void s_check_contract(struct ns_pool *p)
{
	uint8_t w[4096] = { 0 };
	float x[256] = { 0 }, y[8];
	uint32_t unsup[] = { NS_TYPE_IQ2_XXS, NS_TYPE_IQ4_XS, NS_TYPE_TQ2_0, NS_TYPE_NVFP4,
			     NS_TYPE_Q8_K, NS_TYPE_I32, 33, 999 };

	for (size_t i = 0; i < sizeof(unsup) / sizeof(unsup[0]); i++)
		if (ns_gemv(p, unsup[i], w, 256, 1, x, y) != -ENOTSUP)
			KT_FAIL("type %u not refused with -ENOTSUP", unsup[i]);
	if (ns_gemv(p, NS_TYPE_Q4_K, w, 128, 1, x, y) != -EINVAL)
		KT_FAIL("Q4_K with 128 columns accepted");
	if (ns_gemv(p, NS_TYPE_Q8_0, w, 0, 1, x, y) != -EINVAL)
		KT_FAIL("zero columns accepted");
	if (ns_gemm(p, NS_TYPE_Q8_0, w, 32, 4, x, 2, y, 3) != -EINVAL)
		KT_FAIL("ldy < n_rows accepted");
	if (ns_gemv(p, NS_TYPE_Q8_0, w, 32, 0, x, y) != 0)
		KT_FAIL("zero rows refused");
	if (ns_gemv(p, NS_TYPE_Q8_0, NULL, 32, 1, x, y) != -EINVAL)
		KT_FAIL("NULL weights accepted");
	if (ns_gemm(p, NS_TYPE_Q8_0, w, 32, UINT64_MAX / 8, x, 1, y, 1) != -EOVERFLOW)
		KT_FAIL("overflowing window accepted");
	printf("error contract ok\n");
}

/* Oracle tensors: real quantized bytes with zero rows, outliers, subnormal rows. */
static void s_check_oracle(struct ns_pool **pools)
{
	static const char *files[] = { "f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0",
				       "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "mxfp4" };
	static const char *names[] = { "a.c256.r1", "b.c256.r7", "d.c768.r5", "f.c2880.r40",
				       "g.c2880.r8.e4", "i.c1024.r16.t", "j.c4096.r8", "k.c2816.r4.e2" };

	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		char path[1024], err[512];
		struct ns_model *m = NULL;

		snprintf(path, sizeof(path), "%s/quant/%s.gguf", ns_test_oracle_dir(), files[f]);
		if (ns_model_open(path, &m, err, sizeof(err)))
			KT_FAIL("%s", err);
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			const struct ns_model_tensor *t = ns_model_find(m, names[i]);

			if (!t)
				continue; /* K-quant files lack the 2880 tensors */
			uint8_t *raw = kt_read_rows(m, t, 0, t->n_rows);
			s_check(names[i], t->type, raw, t->ne[0], t->n_rows, i % 2 ? 3 : 6, pools);
			free(raw);
		}
		ns_model_close(&m);
	}
	printf("oracle tensors ok\n");
}

int main(void)
{
	struct ns_pool *pools[3] = { ns_pool_new(1), ns_pool_new(2), ns_pool_new(3) };
	static const uint64_t cols32[] = { 32, 64, 96, 288, 2880, 5760 };
	static const uint64_t cols256[] = { 256, 512, 2816, 4096 };
	static const uint64_t colsf[] = { 1, 7, 33, 255, 2880 };

	ns_test_require_oracle();
	if (!pools[0] || !pools[1] || !pools[2])
		KT_FAIL("ns_pool_new failed");
	printf("best path: %s\n", ns_kpath_name(ns_kpath_best()));
	s_check_decoders();
	s_check_e8m0_table();
	s_check_quantizer();
	s_check_contract(pools[1]);
	for (size_t i = 0; i < sizeof(kt_tys) / sizeof(kt_tys[0]); i++) {
		const uint64_t *cols = kt_tys[i].be == 1 ? colsf : kt_tys[i].be == 32 ? cols32 : cols256;
		size_t nc = kt_tys[i].be == 1 ? 5 : kt_tys[i].be == 32 ? 6 : 4;

		for (size_t c = 0; c < nc; c++) {
			/* 2-3 tokens: per-token tiles; >= 4: the packed batch path */
			uint64_t n_rows = c % 2 ? 13 : 7, n_tok = c == 1 ? 19 : c % 2 ? 2 : 5;
			uint8_t *w = kt_rand_matrix(&s_seed, &kt_tys[i], cols[c], n_rows);

			s_check("random", kt_tys[i].type, w, cols[c], n_rows, n_tok, pools);
			free(w);
		}
	}
	printf("random matrices ok\n");
	s_check_oracle(pools);
	printf("%d outputs checked\n", s_n_checks);
	for (int pi = 1; pi < 4; pi++)
		printf("%-6s worst |err|/sum|w x|: f32 act %.3g, q8 act %.3g\n",
		       ns_kpath_name((enum ns_kpath)pi), s_worst[pi][0], s_worst[pi][1]);
	for (int i = 0; i < 3; i++)
		ns_pool_destroy(&pools[i]);
	return 0;
}
