/* test_cuda_gemv_q8: ns_cuda_gemv_q8, the decode GEMV with int8 activations, for every
 * quantized type.
 *   (1) vs a double reference from the CPU's own quantized x (ns_kquant_x_scalar: xq, dx) and
 *       the CPU decoder's integers (struct ns_kdec: s, d, m per group of 16):
 *         ref = sum_g d_g dx_g I_g + m_g dx_g S_g,  I_g = sum s xq, S_g = sum xq (exact ints)
 *         |y - ref| <= (n_cols/16 + 16) * 2^-24 * sum_g (|d_g dx_g I_g| + |m_g dx_g S_g|)
 *       (the f32 roundings of the scaling and of the sums: a handful per term);
 *   (2) vs the exact f32-x product (double, ns_dequant_rows weights) within nscuda.h's bound
 *       E + (n_cols/16 + 320) * 2^-24 * (sum |W x| + E), E = sum_b dx_b / 2 * sum_b |W|;
 *   (3) vs the CPU's NS_ACT_Q8 scalar path: the CPU within (1)'s bound of ref too, and the two
 *       within twice that bound of each other;
 *   (4) windows of 1, 7 and 64 rows at other offsets bit-identical to the whole; 9001 rows
 *       (every type; several row groups per warp) vs a 4500-row window from row 3;
 *   (5) refusals: F32/F16/BF16 -ENOTSUP, partial blocks, misaligned windows and x -EINVAL; the
 *       widest n_cols that fits shared memory runs (checked as (3)) and 32 more is -E2BIG
 *       (the emulation has no limit: 2^20 columns run there);
 *   (6) x with a zero block, a NaN and an infinity behaves as the CPU (NaN rows where the CPU's
 *       are NaN, else within the bounds).
 * Shapes 4096, 2880 (32-element blocks), 256 columns; Q4_K also 14336; Q4_0 and MXFP4 also 96
 * (18- and 17-byte rows... 54 / 51 bytes: misaligned spans). Exit 77 without a GPU. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cuda_test.h"
#include "dequant.h"
#include "gemv.h"
#include "ggml_type.h"
#include "kern_internal.h"
#include "kt_util.h"

#define NR 70

struct qx {
	int8_t *q;
	float *dg, *sg;
	int32_t *c;
};

static void s_qx(const float *x, uint64_t nc, struct qx *o)
{
	o->q = calloc(nc, 1);
	o->dg = calloc(nc / 16, sizeof(float));
	o->sg = calloc(nc / 16, sizeof(float));
	o->c = calloc(nc / 4, sizeof(int32_t));
	if (!o->q || !o->dg || !o->sg || !o->c)
		CT_FAIL("out of memory");
	ns_kquant_x_scalar(x, nc, o->q, o->dg, o->sg, o->c);
}

static void s_qx_free(struct qx *o)
{
	free(o->q);
	free(o->dg);
	free(o->sg);
	free(o->c);
}

/* ref (1) of one row and sum |terms| */
static double s_ref(uint32_t type, const uint8_t *row, uint64_t nc, const struct qx *q,
		    double *abs_terms)
{
	const struct ns_kqtype *qt = ns_kq_get(type);
	struct ns_kdec dc;
	double r = 0, a = 0;

	if (!qt || !qt->dec)
		CT_FAIL("no decoder for type %u", type);
	for (uint64_t k0 = 0; k0 < nc; k0 += NS_KCHUNK) {
		const uint32_t n = (uint32_t)(nc - k0 < NS_KCHUNK ? nc - k0 : NS_KCHUNK);

		memset(&dc, 0, sizeof(dc));
		qt->dec(row + k0 / qt->blk_elems * qt->blk_bytes, n / qt->blk_elems, &dc);
		for (uint32_t g = 0; g < n / 16; g++) {
			int64_t I = 0, S = 0;

			for (int i = 0; i < 16; i++) {
				I += (int64_t)dc.s[16 * g + i] * q->q[k0 + 16 * g + i];
				S += q->q[k0 + 16 * g + i];
			}
			const double dx = q->dg[(k0 + 16 * g) / 16];
			const double t1 = (double)dc.d[g] * dx * (double)I;
			const double t2 = qt->has_min ? (double)dc.m[g] * dx * (double)S : 0.0;

			r += t1 + t2;
			a += fabs(t1) + fabs(t2);
		}
	}
	*abs_terms = a;
	return r;
}

/* E of nscuda.h's bound for one row of dequantized weights w */
static double s_e(const float *w, const struct qx *q, uint64_t nc)
{
	double e = 0;

	for (uint64_t b = 0; b < nc / 32; b++) {
		double s = 0;

		for (int i = 0; i < 32; i++)
			s += fabs((double)w[32 * b + i]);
		e += (double)q->dg[2 * b] / 2 * s;
	}
	return e;
}

/* checks (1)-(3) of rows [0, nr) of y (GPU) against the CPU; returns the worst (1) ratio */
static double s_check(int ti, const uint8_t *raw, uint64_t rb, uint64_t nc, uint64_t nr,
		      const float *x, const float *y, const char *what)
{
	const uint32_t type = ct_types[ti];
	const char *nm = ct_type_names[ti];
	struct ns_kopts ko = { NS_KPATH_SCALAR, NS_ACT_Q8, false };
	float *ycpu = malloc(nr * 4), *w = malloc(nc * 4);
	struct qx q;
	double worst = 0;

	if (!ycpu || !w)
		CT_FAIL("out of memory");
	s_qx(x, nc, &q);
	if (ns_gemm_ex(NULL, &ko, type, raw, nc, nr, x, 1, ycpu, nr))
		CT_FAIL("cpu q8 gemv");
	for (uint64_t r = 0; r < nr; r++) {
		double at, ref = s_ref(type, raw + r * rb, nc, &q, &at);
		const double b1 = (nc / 16 + 16) * 0x1p-24 * at;
		double awx, ex;

		if (ns_dequant_rows(type, raw + r * rb, nc, 1, w))
			CT_FAIL("cpu dequant");
		ex = ct_dot(w, x, nc, &awx);
		const double e = s_e(w, &q, nc);
		const double b2 = e + (nc / 16 + 320) * 0x1p-24 * (awx + e);

		if (!(fabs(y[r] - ref) <= b1))
			CT_FAIL("%s %s n_cols %llu row %llu: %.9g vs ref %.9g (tol %.3g)", nm, what,
				(unsigned long long)nc, (unsigned long long)r, y[r], ref, b1);
		if (!(fabs(ycpu[r] - ref) <= b1))
			CT_FAIL("%s %s n_cols %llu row %llu: cpu %.9g vs ref %.9g (tol %.3g): the "
				"reference is wrong", nm, what, (unsigned long long)nc,
				(unsigned long long)r, ycpu[r], ref, b1);
		if (!(fabs(y[r] - ycpu[r]) <= 2 * b1))
			CT_FAIL("%s %s n_cols %llu row %llu: %.9g vs cpu %.9g (tol %.3g)", nm, what,
				(unsigned long long)nc, (unsigned long long)r, y[r], ycpu[r],
				2 * b1);
		if (!(fabs(y[r] - ex) <= b2))
			CT_FAIL("%s %s n_cols %llu row %llu: %.9g vs exact %.9g (tol %.3g)", nm,
				what, (unsigned long long)nc, (unsigned long long)r, y[r], ex, b2);
		worst = fmax(worst, at > 0 ? fabs(y[r] - ref) / at : 0);
	}
	s_qx_free(&q);
	free(ycpu);
	free(w);
	return worst;
}

static void s_case(int ti, uint64_t nc, uint64_t *seed)
{
	const uint32_t type = ct_types[ti];
	const char *nm = ct_type_names[ti];
	uint64_t rb;
	uint8_t *raw = ct_random_rows(type, nc, NR, seed, &rb);
	float *x = ct_random_floats(nc, seed), yv[NR], gv[NR];
	uint8_t *dw = ct_upload(raw, rb * NR);
	float *dx = ct_upload(x, nc * 4), *dy = ct_dev(NR * 4);

	CT_CHECK(ns_cuda_gemv_q8(type, dw, nc, NR, dx, dy, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(yv, dy, sizeof(yv));
	const double worst = s_check(ti, raw, rb, nc, NR, x, yv, "q8");
	/* windows: rows [a, a+n) as their own window, n = 1, 7, 64 */
	const int wins[3][2] = { { 5, 1 }, { 5, 7 }, { 3, 64 } };
	for (int k = 0; k < 3; k++) {
		const int a = wins[k][0], n = wins[k][1];

		CT_CHECK(ns_cuda_gemv_q8(type, dw + a * rb, nc, n, dx, dy, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(gv, dy, n * 4);
		if (memcmp(gv, yv + a, n * 4))
			CT_FAIL("%s q8 n_cols %llu: window of %d rows at %d differs in bits", nm,
				(unsigned long long)nc, n, a);
	}
	printf("%-6s n_cols %5llu: worst |y - ref|/sum|terms| %.2e, vs exact and cpu q8 within "
	       "the bounds, windows 1/7/64 bit-identical\n", nm, (unsigned long long)nc, worst);
	ns_cuda_free(dw);
	ns_cuda_free(dx);
	ns_cuda_free(dy);
	free(raw);
	free(x);
}

/* Many rows (MR): every row within the bounds; a window of MR / 2 rows from row 3 identical. */
#define MR 9001

static void s_many(int ti, uint64_t nc, uint64_t *seed)
{
	const uint32_t type = ct_types[ti];
	uint64_t rb;
	uint8_t *raw = ct_random_rows(type, nc, MR, seed, &rb);
	float *x = ct_random_floats(nc, seed), *y = malloc(MR * 4), *yw = malloc(MR * 4);
	uint8_t *dw = ct_upload(raw, rb * MR);
	float *dx = ct_upload(x, nc * 4), *dy = ct_dev(MR * 4);

	if (!y || !yw)
		CT_FAIL("out of memory");
	CT_CHECK(ns_cuda_gemv_q8(type, dw, nc, MR, dx, dy, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(y, dy, MR * 4);
	s_check(ti, raw, rb, nc, MR, x, y, "many");
	CT_CHECK(ns_cuda_gemv_q8(type, dw + 3 * rb, nc, MR / 2, dx, dy, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(yw, dy, MR / 2 * 4);
	if (memcmp(yw, y + 3, MR / 2 * 4))
		CT_FAIL("%s q8: window of %d rows at 3 differs in bits", ct_type_names[ti], MR / 2);
	printf("%-6s n_cols %5llu, %d rows: within the bounds, window of %d at row 3 "
	       "bit-identical\n", ct_type_names[ti], (unsigned long long)nc, MR, MR / 2);
	ns_cuda_free(dw);
	ns_cuda_free(dx);
	ns_cuda_free(dy);
	free(raw);
	free(x);
	free(y);
	free(yw);
}

/* (6): zero block (units 0), a NaN (unit 1), then an infinity (unit 2) in a second run */
static void s_special(int ti, uint64_t *seed)
{
	const uint32_t type = ct_types[ti];
	const uint64_t nc = 256;
	uint64_t rb;
	uint8_t *raw = ct_random_rows(type, nc, NR, seed, &rb);
	float *x = ct_random_floats(nc, seed), y[NR], ycpu[NR];
	struct ns_kopts ko = { NS_KPATH_SCALAR, NS_ACT_Q8, false };
	uint8_t *dw = ct_upload(raw, rb * NR);
	float *dx = ct_dev(nc * 4), *dy = ct_dev(NR * 4);
	struct qx q;

	for (int i = 0; i < 32; i++)
		x[i] = 0.0f;
	x[40] = NAN;
	s_qx(x, nc, &q);
	if (q.dg[0] != 0.0f || q.q[40] != 0 || !(q.dg[2] > 0.0f))
		CT_FAIL("cpu quantizer: zero block / NaN");
	s_qx_free(&q);
	CT_CHECK(ns_cuda_h2d(dx, x, nc * 4));
	CT_CHECK(ns_cuda_gemv_q8(type, dw, nc, NR, dx, dy, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(y, dy, sizeof(y));
	/* (1) and (3) hold with NaN taken as 0 (the quantizer's); (2) is NaN: compare with x
	 * where the NaN is 0 */
	x[40] = 0.0f;
	s_check(ti, raw, rb, nc, NR, x, y, "zero block + NaN");
	x[70] = INFINITY;
	CT_CHECK(ns_cuda_h2d(dx, x, nc * 4));
	CT_CHECK(ns_cuda_gemv_q8(type, dw, nc, NR, dx, dy, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(y, dy, sizeof(y));
	if (ns_gemm_ex(NULL, &ko, type, raw, nc, NR, x, 1, ycpu, NR))
		CT_FAIL("cpu q8 gemv");
	for (int r = 0; r < NR; r++)
		if (isnan(ycpu[r]) != isnan(y[r]) || isinf(ycpu[r]) != isinf(y[r]))
			CT_FAIL("%s infinity in x: row %d: %g vs cpu %g", ct_type_names[ti], r,
				y[r], ycpu[r]);
	printf("%-6s zero block, NaN and infinity in x as the CPU\n", ct_type_names[ti]);
	ns_cuda_free(dw);
	ns_cuda_free(dx);
	ns_cuda_free(dy);
	free(raw);
	free(x);
}

/* (5) */
static void s_contract(uint64_t *seed)
{
	uint8_t *dw = ct_dev(1 << 16);
	float *dx = ct_dev(1 << 16), *dy = ct_dev(1 << 16);

	CT_CHECK(ns_cuda_memset(dw, 0, 1 << 16));
	CT_CHECK(ns_cuda_memset(dx, 0, 1 << 16));
	if (ns_cuda_gemv_q8(NS_TYPE_F32, dw, 64, 4, dx, dy, NULL) != -ENOTSUP ||
	    ns_cuda_gemv_q8(NS_TYPE_F16, dw, 64, 4, dx, dy, NULL) != -ENOTSUP ||
	    ns_cuda_gemv_q8(NS_TYPE_BF16, dw, 33, 4, dx, dy, NULL) != -ENOTSUP ||
	    ns_cuda_gemv_q8(1234, dw, 64, 4, dx, dy, NULL) != -ENOTSUP)
		CT_FAIL("float / unknown types must be -ENOTSUP");
	if (ns_cuda_gemv_q8(NS_TYPE_Q8_0, dw, 48, 4, dx, dy, NULL) != -EINVAL ||
	    ns_cuda_gemv_q8(NS_TYPE_Q4_K, dw, 128, 4, dx, dy, NULL) != -EINVAL ||
	    ns_cuda_gemv_q8(NS_TYPE_Q4_K, dw, 0, 4, dx, dy, NULL) != -EINVAL ||
	    ns_cuda_gemv_q8(NS_TYPE_Q4_K, dw + 8, 256, 4, dx, dy, NULL) != -EINVAL ||
	    ns_cuda_gemv_q8(NS_TYPE_Q8_0, dw + 1, 32, 4, dx, dy, NULL) != -EINVAL ||
	    ns_cuda_gemv_q8(NS_TYPE_Q8_0, dw, 32, 4, dx + 1, dy, NULL) != -EINVAL ||
	    ns_cuda_gemv_q8(NS_TYPE_Q8_0, dw, 32, 4, NULL, dy, NULL) != -EINVAL ||
	    ns_cuda_gemv_q8(NS_TYPE_Q8_0, NULL, 32, 4, dx, dy, NULL) != -EINVAL)
		CT_FAIL("partial blocks, misaligned windows or x must be -EINVAL");
	/* MXFP4 windows need no alignment, Q8_0 two bytes; no rows: nothing to do */
	CT_CHECK(ns_cuda_gemv_q8(NS_TYPE_MXFP4, dw + 1, 32, 4, dx, dy, NULL));
	CT_CHECK(ns_cuda_gemv_q8(NS_TYPE_Q8_0, dw + 2, 32, 4, dx, dy, NULL));
	CT_CHECK(ns_cuda_gemv_q8(NS_TYPE_Q8_0, dw, 32, 0, dx, dy, NULL));
	CT_CHECK(ns_cuda_sync());
	ns_cuda_free(dw);
	ns_cuda_free(dx);
	ns_cuda_free(dy);

	/* the widest Q8_0 row that fits shared memory (bisection over multiples of 32 up to
	 * 2^20), checked as (3); 32 more columns are -E2BIG */
	const uint64_t top = 1 << 20;
	uint64_t rb;
	uint8_t *raw = ct_random_rows(NS_TYPE_Q8_0, top, 1, seed, &rb);
	float *x = ct_random_floats(top, seed), y;
	uint8_t *dwb = ct_upload(raw, rb);
	float *dxb = ct_upload(x, top * 4), *dyb = ct_dev(4);
	uint64_t lo = 32, hi = top + 32; /* lo fits; hi is the first known not to (or beyond) */
	int rc = ns_cuda_gemv_q8(NS_TYPE_Q8_0, dwb, top, 1, dxb, dyb, NULL);

	if (rc == 0) {
		lo = top;
	} else if (rc == -E2BIG) {
		hi = top;
		while (hi - lo > 32) {
			const uint64_t mid = (lo + hi) / 2 / 32 * 32;

			rc = ns_cuda_gemv_q8(NS_TYPE_Q8_0, dwb, mid, 1, dxb, dyb, NULL);
			if (rc == 0)
				lo = mid;
			else if (rc == -E2BIG)
				hi = mid;
			else
				CT_FAIL("q8_0 %llu columns: %d", (unsigned long long)mid, rc);
		}
		if (lo < 50000)
			CT_FAIL("only %llu columns fit", (unsigned long long)lo);
		if (ns_cuda_gemv_q8(NS_TYPE_Q8_0, dwb, lo + 32, 1, dxb, dyb, NULL) != -E2BIG)
			CT_FAIL("%llu columns must be -E2BIG", (unsigned long long)lo + 32);
	} else {
		CT_FAIL("q8_0 %llu columns: %d", (unsigned long long)top, rc);
	}
	CT_CHECK(ns_cuda_gemv_q8(NS_TYPE_Q8_0, dwb, lo, 1, dxb, dyb, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(&y, dyb, 4);
	s_check(7, raw, rb, lo, 1, x, &y, "widest");
	printf("refusals as ns_cuda_gemv; widest q8_0 row %llu columns%s\n",
	       (unsigned long long)lo, lo == top ? " (no shared-memory limit)" : ", +32: -E2BIG");
	ns_cuda_free(dwb);
	ns_cuda_free(dxb);
	ns_cuda_free(dyb);
	free(raw);
	free(x);
}

int main(void)
{
	uint64_t seed = 11;

	ct_init("cuda_gemv_q8");
	s_contract(&seed);
	for (int ti = 3; ti < 14; ti++) { /* the quantized types */
		const struct ns_type_info *t = ns_type_get(ct_types[ti]);

		s_case(ti, 4096, &seed);
		if (t->block_elems == 32)
			s_case(ti, 2880, &seed);
		s_case(ti, 256, &seed);
		s_special(ti, &seed);
	}
	s_case(10, 14336, &seed); /* q4_k, the FFN-down width of 8B models */
	s_case(3, 96, &seed);     /* q4_0: 54-byte rows, windows 2-byte aligned */
	s_case(13, 96, &seed);    /* mxfp4: 51-byte rows, odd windows */
	for (int ti = 3; ti < 14; ti++) /* several row groups per warp, every type */
		s_many(ti, 512, &seed);
	s_many(7, 2880, &seed);  /* q8_0: 3060-byte rows, the window at row 3 4-byte aligned */
	s_many(13, 2880, &seed); /* mxfp4: 1530-byte rows, 2-byte aligned */
	return 0;
}
