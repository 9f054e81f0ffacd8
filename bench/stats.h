/* stats.h - summary statistics of repeated measurements, as llama-bench reports them. */
#ifndef NS_BENCH_STATS_H
#define NS_BENCH_STATS_H

#include <stddef.h>

/* Mean and sample standard deviation (divisor n - 1) of x[0..n). sd is 0 when n < 2; both are
 * 0 when n == 0. NaN samples propagate. */
void ns_stats_mean_sd(const double *x, size_t n, double *mean, double *sd);

/* Median of x[0..n) (mean of the two middle values when n is even), sorting a copy of up to
 * NS_STATS_MAX_N values on the stack. Returns 0, or -EINVAL when n is 0 or above the cap. */
#define NS_STATS_MAX_N 1024
int ns_stats_median(const double *x, size_t n, double *out);

#endif
