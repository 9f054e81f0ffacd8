/* sampling_internal.h - what the two samplers of sampling.h share, internal to
 * libnssampling: the candidates' total order and its sorts (cand_order.c), an exact sum of
 * floats in any order and the repetition penalty of one logit (cand_steps.c). */
#ifndef NS_SAMPLING_INTERNAL_H
#define NS_SAMPLING_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "sampling.h"

/* The candidates' total order: a higher logit first, a NaN logit after every number (it never
 * wins), equal logits by lower id. True when a comes before b. */
static inline bool nss_before(const struct ns_cand *a, const struct ns_cand *b)
{
	const bool na = isnan(a->logit), nb = isnan(b->logit);

	if (na != nb)
		return nb;
	if (!na && a->logit != b->logit)
		return a->logit > b->logit;
	return a->id < b->id;
}

/* Min-heap on nss_before (the root is the candidate that comes last): sift h[i] down. */
void nss_heap_down(struct ns_cand *h, size_t n, size_t i);

/* Sort d[0..n) by nss_before (cand_order.c says how). sc: scratch kept between sorts, or NULL. */
void nss_sort_cands(struct ns_cand *d, size_t n, struct ns_sort_scratch *sc);

/* Sort c's candidates unless they are sorted. */
void nss_sort(struct ns_cands *c);

/* top-p selects the first k of the vocabulary while k <= n / NSS_SELECT_MAX_DIV, then sorts it
 * whole: past that, a heap selection costs more than the radix sort (nss_sort_cands). */
#define NSS_SELECT_MAX_DIV 64

/* The k candidates that come first, moved to data[0..k) and sorted (cand_order.c). */
void nss_select_sorted(struct ns_cands *c, size_t k);

/* qsort order of int32_t, ascending. */
int nss_cmp_i32(const void *a, const void *b);

/* An exact sum of floats in any order. Each float is an integer mantissa times a power of
 * two, so the mantissas are summed exactly per exponent (2^32 of 24 bits fit in 64) and the
 * 254 exact sums added up from the smallest at the end. Why: top-p on unsorted candidates
 * must cut where the walk over the sorted ones does, and a sum in double rounds differently
 * in another order. */
struct nss_fsum {
	uint64_t mant[256]; /* by biased exponent; two's complement for negative terms */
	bool nan, pinf, ninf;
};

static inline void nss_fsum_add(struct nss_fsum *f, float v)
{
	uint32_t bits, e, m;

	memcpy(&bits, &v, sizeof(bits));
	e = (bits >> 23) & 0xff;
	m = bits & 0x7fffff;
	if (e == 0xff) {
		if (m)
			f->nan = true;
		else if (bits >> 31)
			f->ninf = true;
		else
			f->pinf = true;
		return;
	}
	if (e)
		m |= 0x800000; /* normal: the hidden bit */
	else
		e = 1;         /* subnormal: the smallest exponent, no hidden bit */
	f->mant[e] += bits >> 31 ? (uint64_t)0 - m : m;
}

double nss_fsum_total(const struct nss_fsum *f);

/* p = exp(logit - first) / sum over c's candidates (cand_steps.c). */
void nss_softmax_at(struct ns_cands *c, float first);

/* A logit of a token seen cnt > 0 times in the history, penalized (llama.cpp's order). */
void nss_penalize(float *l, size_t cnt, float repeat, float freq, float present);

#endif
