/* test_rmsnorm - ns_rmsnorm (ops.h) against the definition y = x / sqrt(mean(x^2) + eps) * w,
 * computed here in double, on rows whose mean square is of the order of epsilon or below it,
 * where epsilon enters decides the result (the oracle models' rows have a mean square
 * near 1, where epsilon outside the square root moves the logits by only ~6e-4). Also a row
 * with a large mean square, an all-zero row (finite, zero) and the in-place, unweighted call.
 * Exits 0 pass, 1 fail. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ops.h"

#define N 96

/* float rounding of the sum, the scale and two products: a few ulps of a float */
#define REL_TOL 1e-6

static bool s_fail;

/* x = a deterministic, sign-alternating pattern of magnitudes amp/7 .. amp. */
static void s_row(float *x, uint32_t n, float amp)
{
	for (uint32_t i = 0; i < n; i++)
		x[i] = amp * (float)((i % 7) + 1) / 7.0f * (i & 1 ? -1.0f : 1.0f);
}

static void s_check(const char *what, const float *x, const float *w, uint32_t n, float eps,
		    bool in_place)
{
	float y[N], xin[N];
	double ss = 0.0, scale, worst = 0.0;

	for (uint32_t i = 0; i < n; i++) {
		xin[i] = x[i];
		ss += (double)x[i] * x[i];
	}
	scale = 1.0 / sqrt(ss / n + eps);
	if (in_place) {
		for (uint32_t i = 0; i < n; i++)
			y[i] = x[i];
		ns_rmsnorm(y, y, w, n, eps);
	} else {
		ns_rmsnorm(y, xin, w, n, eps);
	}
	for (uint32_t i = 0; i < n; i++) {
		double want = (double)x[i] * scale * (w ? w[i] : 1.0);
		double err = fabs((double)y[i] - want);
		double rel = err / fmax(fabs(want), 1e-30);

		if (!isfinite(y[i]))
			rel = INFINITY;
		else if (want == 0.0)
			rel = err == 0.0 ? 0.0 : INFINITY;
		if (rel > worst)
			worst = rel;
	}
	printf("%-46s mean square %.3g eps %.0e: worst rel err %.3g (tol %.0e) %s\n", what,
	       ss / n, (double)eps, worst, REL_TOL, worst <= REL_TOL ? "ok" : "FAIL");
	s_fail |= !(worst <= REL_TOL);
}

int main(void)
{
	float x[N], w[N];

	for (uint32_t i = 0; i < N; i++)
		w[i] = 0.5f + (float)(i % 5) * 0.25f;

	/* mean square ~1e-6, below llama's eps 1e-5 and gpt-oss's / qwen3's 1e-6 */
	s_row(x, N, 1.5e-3f);
	s_check("small row, weighted, eps 1e-5", x, w, N, 1e-5f, false);
	s_check("small row, weighted, eps 1e-6", x, w, N, 1e-6f, false);
	s_check("small row, unweighted, in place, eps 1e-5", x, NULL, N, 1e-5f, true);
	/* mean square ~1e-9: the norm is nearly x / sqrt(eps) */
	s_row(x, N, 5e-5f);
	s_check("tiny row, weighted, eps 1e-5", x, w, N, 1e-5f, false);
	/* mean square ~1e4: epsilon negligible */
	s_row(x, N, 150.0f);
	s_check("large row, weighted, eps 1e-5", x, w, N, 1e-5f, false);
	/* zero row: zero out, not NaN (the epsilon keeps the scale finite) */
	for (uint32_t i = 0; i < N; i++)
		x[i] = 0.0f;
	s_check("zero row, weighted, eps 1e-6", x, w, N, 1e-6f, false);
	/* an odd length (qk-norm rows are head-sized; the loop must not assume a multiple) */
	s_row(x, 37, 2e-3f);
	s_check("small row of 37, weighted, eps 1e-6", x, w, 37, 1e-6f, false);
	return s_fail ? 1 : 0;
}
