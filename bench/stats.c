/* stats.c - mean, sample sd, median. See stats.h. */
#include "stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void ns_stats_mean_sd(const double *x, size_t n, double *mean, double *sd)
{
	double m = 0, ss = 0;

	*mean = 0;
	*sd = 0;
	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		m += x[i];
	m /= (double)n;
	for (size_t i = 0; i < n; i++)
		ss += (x[i] - m) * (x[i] - m); /* two passes: no cancellation for close samples */
	*mean = m;
	*sd = n > 1 ? sqrt(ss / (double)(n - 1)) : 0;
}

static int s_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int ns_stats_median(const double *x, size_t n, double *out)
{
	double v[NS_STATS_MAX_N];

	if (!n || n > NS_STATS_MAX_N)
		return -EINVAL;
	memcpy(v, x, n * sizeof(*v));
	qsort(v, n, sizeof(*v), s_cmp);
	*out = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	return 0;
}
