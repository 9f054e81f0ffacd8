/* cand_steps.c - the first sampler: llama.cpp's steps one by one on a candidate list
 * (ns_cands: init, softmax, penalties, top-k, top-p, min-p, temperature, greedy, draw), each
 * usable alone; the reference the chain of sampler.c is checked against. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampling_internal.h"

void ns_cands_init(struct ns_cands *c, const float *logits, uint32_t n_vocab)
{
	for (uint32_t i = 0; i < n_vocab; i++) {
		c->data[i].id = (int32_t)i;
		c->data[i].logit = logits[i];
		c->data[i].p = 0.0f;
	}
	c->n = n_vocab;
	c->sorted = false;
}

double nss_fsum_total(const struct nss_fsum *f)
{
	double sum = 0.0;

	if (f->nan || (f->pinf && f->ninf))
		return NAN;
	if (f->pinf || f->ninf)
		return f->pinf ? INFINITY : -INFINITY;
	for (uint32_t e = 1; e < 255; e++)
		if (f->mant[e])
			sum += ldexp((double)(int64_t)f->mant[e], (int)e - 150);
	return sum;
}

double ns_cands_sum_p(const struct ns_cand *d, size_t n)
{
	struct nss_fsum f = { { 0 }, false, false, false };

	for (size_t i = 0; i < n; i++)
		nss_fsum_add(&f, d[i].p);
	return nss_fsum_total(&f);
}

/* p = exp(logit - first) / sum over data[0..n), with first the logit that comes first in
 * nss_before's order; the sum is ns_cands_sum_p's, so p depends on neither the order of data
 * nor on whether it was sorted. */
void nss_softmax_at(struct ns_cands *c, float first)
{
	double sum;

	for (size_t i = 0; i < c->n; i++) /* -inf logits (masked) get probability 0 */
		c->data[i].p = expf(c->data[i].logit - first);
	sum = ns_cands_sum_p(c->data, c->n);
	for (size_t i = 0; i < c->n; i++)
		c->data[i].p = (float)(c->data[i].p / sum);
}

void ns_cands_softmax(struct ns_cands *c)
{
	if (c->n == 0)
		return;
	nss_sort(c);
	nss_softmax_at(c, c->data[0].logit);
}

int nss_cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* Occurrences of id in the sorted array h (n). */
static size_t s_count(const int32_t *h, size_t n, int32_t id)
{
	size_t lo = 0, hi = n, c = 0;

	while (lo < hi) { /* first index with h[i] >= id */
		size_t mid = lo + (hi - lo) / 2;

		if (h[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo + c < n && h[lo + c] == id)
		c++;
	return c;
}

/* A logit of a token seen cnt > 0 times in the history, penalized (llama.cpp's order). */
void nss_penalize(float *l, size_t cnt, float repeat, float freq, float present)
{
	*l = *l <= 0 ? *l * repeat : *l / repeat;
	*l -= (float)cnt * freq + present;
}

/* last: the history, already sorted ascending (ns_sampler sorts it). */
static void s_penalties_sorted(struct ns_cands *c, const int32_t *last, size_t n_last,
			       float repeat, float freq, float present)
{
	for (size_t i = 0; i < c->n; i++) {
		size_t cnt = s_count(last, n_last, c->data[i].id);

		if (cnt)
			nss_penalize(&c->data[i].logit, cnt, repeat, freq, present);
	}
	c->sorted = false;
}

void ns_sample_penalties(struct ns_cands *c, const int32_t *last, size_t n_last, float repeat,
			 float freq, float present)
{
	int32_t *h;

	if (n_last == 0 || (repeat == 1.0f && freq == 0.0f && present == 0.0f))
		return;
	h = malloc(n_last * sizeof(*h));
	if (!h) { /* fall back to a linear count per candidate: same result, slower */
		for (size_t i = 0; i < c->n; i++) {
			size_t cnt = 0;

			for (size_t j = 0; j < n_last; j++)
				cnt += last[j] == c->data[i].id;
			if (cnt)
				nss_penalize(&c->data[i].logit, cnt, repeat, freq, present);
		}
		c->sorted = false;
		return;
	}
	memcpy(h, last, n_last * sizeof(*h));
	qsort(h, n_last, sizeof(*h), nss_cmp_i32);
	s_penalties_sorted(c, h, n_last, repeat, freq, present);
	free(h);
}

void ns_sample_top_k(struct ns_cands *c, int32_t k)
{
	if (k <= 0 || (size_t)k >= c->n)
		return;
	if (!c->sorted)
		nss_select_sorted(c, (size_t)k);
	c->n = (size_t)k;
	c->sorted = true;
}

/* The index of the candidate that comes first in nss_before's order. */
static size_t s_first(const struct ns_cands *c)
{
	size_t best = 0;

	for (size_t i = 1; i < c->n; i++)
		if (nss_before(&c->data[i], &c->data[best]))
			best = i;
	return best;
}

/* The sorted walk: keep data[0..i] for the first i where the mass reaches p. Returns true
 * when it cut within the first k (those sorted); cum carries the mass of data[0..from). */
static bool s_top_p_walk(struct ns_cands *c, float p, size_t min_keep, size_t from, size_t k,
			 double *cum)
{
	for (size_t i = from; i < k; i++) {
		*cum += c->data[i].p;
		if (*cum >= p && i + 1 >= min_keep) {
			c->n = i + 1;
			return true;
		}
	}
	return false;
}

void ns_sample_top_p(struct ns_cands *c, float p, size_t min_keep)
{
	double cum = 0.0;
	size_t k = 64, done = 0;

	if (p >= 1.0f || c->n == 0)
		return;
	if (c->sorted) {
		ns_cands_softmax(c);
		s_top_p_walk(c, p, min_keep, 0, c->n, &cum);
		return;
	}
	/* Unsorted (top-k off): the probabilities of all candidates, then the first k selected
	 * and walked, k growing eightfold until the mass is reached. A language model's nucleus
	 * is usually a few dozen tokens: one selection, not a sort of the vocabulary. Same p,
	 * same set, same order as sorting first (the sum does not depend on the order). */
	nss_softmax_at(c, c->data[s_first(c)].logit);
	while (k < c->n) {
		nss_select_sorted(c, k); /* data[0..k) sorted, and the first done of them unchanged */
		if (s_top_p_walk(c, p, min_keep, done, k, &cum)) {
			c->sorted = true;
			return;
		}
		done = k;
		k = k * 8 > c->n / NSS_SELECT_MAX_DIV ? c->n : k * 8;
	}
	nss_sort(c);
	s_top_p_walk(c, p, min_keep, done, c->n, &cum);
}

static void s_swap(struct ns_cand *a, struct ns_cand *b)
{
	struct ns_cand t = *a;

	*a = *b;
	*b = t;
}

void ns_sample_min_p(struct ns_cands *c, float p, size_t min_keep)
{
	float min_logit;
	size_t i, best, kept = 1;
	bool cut = false;

	if (p <= 0.0f || c->n == 0)
		return;
	if (!c->sorted && min_keep <= 1) {
		/* Unsorted (top-k off): the sorted walk below keeps the first candidate and then
		 * every one until the first number under the threshold, i.e. every number at or
		 * over it, and the NaNs (sorted last) only when no number was cut. The same set
		 * here in two passes; then only the survivors are sorted, not the vocabulary. */
		best = s_first(c);
		min_logit = c->data[best].logit + logf(p);
		if (!isnan(min_logit)) { /* (all NaN: the walk keeps them all) */
			s_swap(&c->data[0], &c->data[best]);
			for (i = 1; i < c->n; i++) {
				if (c->data[i].logit >= min_logit)
					s_swap(&c->data[kept++], &c->data[i]);
				else if (!isnan(c->data[i].logit))
					cut = true;
			}
			for (i = kept; !cut && i < c->n; i++)
				if (isnan(c->data[i].logit))
					s_swap(&c->data[kept++], &c->data[i]);
			c->n = kept;
		}
		nss_sort(c);
		return;
	}
	nss_sort(c);
	min_logit = c->data[0].logit + logf(p);
	for (i = 1; i < c->n; i++)
		if (c->data[i].logit < min_logit && i >= min_keep)
			break;
	c->n = i;
}

void ns_sample_temp(struct ns_cands *c, float t)
{
	if (t <= 0.0f) { /* greedy: only the best survives */
		int32_t best = ns_sample_greedy(c);

		for (size_t i = 0; i < c->n; i++)
			if (c->data[i].id == best) {
				c->data[0] = c->data[i];
				break;
			}
		c->n = c->n ? 1 : 0;
		c->sorted = true;
		return;
	}
	for (size_t i = 0; i < c->n; i++)
		c->data[i].logit /= t;
}

int32_t ns_sample_greedy(const struct ns_cands *c)
{
	size_t best = 0;

	if (c->n == 0)
		return -1;
	/* nss_before's order, with the common case (numbers) first */
	for (size_t i = 1; i < c->n; i++) {
		const struct ns_cand *a = &c->data[i], *b = &c->data[best];

		if (a->logit > b->logit || (a->logit == b->logit && a->id < b->id) ||
		    (isnan(b->logit) && nss_before(a, b)))
			best = i;
	}
	return c->data[best].id;
}

double ns_rng_uniform(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return (double)(z >> 11) * (1.0 / 9007199254740992.0); /* 53 bits */
}

int32_t ns_sample_draw(struct ns_cands *c, uint64_t *rng)
{
	double u, cum = 0.0;

	if (c->n == 0)
		return -1;
	ns_cands_softmax(c);
	u = ns_rng_uniform(rng);
	for (size_t i = 0; i < c->n; i++) {
		cum += c->data[i].p;
		if (u < cum)
			return c->data[i].id;
	}
	return c->data[c->n - 1].id; /* rounding left u just above the total */
}

