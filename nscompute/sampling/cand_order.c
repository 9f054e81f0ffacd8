/* cand_order.c - the candidates' total order (sampling_internal.h's nss_before) and the
 * sorts both samplers use: a radix sort of the vocabulary, a heap selection of the first k. */
#include <stdlib.h>
#include <string.h>

#include "sampling_internal.h"

static int s_cmp_desc(const void *a, const void *b)
{
	return nss_before(a, b) ? -1 : nss_before(b, a) ? 1 : 0;
}

void nss_heap_down(struct ns_cand *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, last = i;
		struct ns_cand t;

		if (l < n && nss_before(&h[last], &h[l]))
			last = l;
		if (r < n && nss_before(&h[last], &h[r]))
			last = r;
		if (last == i)
			return;
		t = h[i];
		h[i] = h[last];
		h[last] = t;
		i = last;
	}
}

/* The k candidates that come first in the total order, moved to data[0..k) and sorted: the
 * same k, in the same order, as sorting all n and keeping k, in O(n log k): for small k far
 * cheaper than the whole vocabulary's sort (nss_sort_cands, ~2.6 ms at 152k on this machine). */
void nss_select_sorted(struct ns_cands *c, size_t k)
{
	struct ns_cand *d = c->data;

	for (size_t i = k / 2; i-- > 0;)
		nss_heap_down(d, k, i);
	for (size_t i = k; i < c->n; i++) {
		if (nss_before(&d[i], &d[0])) {
			struct ns_cand t = d[0];

			d[0] = d[i];
			d[i] = t;
			nss_heap_down(d, k, 0);
		}
	}
	nss_sort_cands(d, k, c->scratch);
}

/* nss_before's logit order as an unsigned key, smaller first: the logit mapped to an
 * order-preserving integer and flipped (higher first; -0 as +0; NaN after everything). */
static inline uint32_t s_radix_key(float f)
{
	uint32_t u;

	if (isnan(f))
		return UINT32_MAX;
	if (f == 0.0f)
		f = 0.0f;
	memcpy(&u, &f, sizeof(u));
	return ~(u & 0x80000000u ? ~u : u | 0x80000000u);
}

#define S_RADIX_BITS 8
#define S_RADIX_DIGITS 4 /* of the 32-bit key */
#define S_RADIX_MIN 2048 /* under it qsort is as fast */

struct s_radix_rec {
	uint32_t key;
	uint32_t at; /* index in the input */
};

typedef uint32_t s_radix_hist[S_RADIX_DIGITS][1u << S_RADIX_BITS];

void ns_sort_scratch_free(struct ns_sort_scratch *s)
{
	free(s->buf);
	s->buf = NULL;
	s->cap = 0;
}

/* Sort d[0..n) by nss_before, as qsort with s_cmp_desc would (the order is total: ids are
 * distinct token ids, >= 0): the records placed in id order first (a rank by id), then a
 * stable least-significant-digit radix sort on the logit's key, digits every key shares
 * skipped. A flat distribution's top-p sorts the whole vocabulary: 28 ms a token with qsort at
 * 152k on the development machine. sc: scratch kept between sorts (NULL: allocated here).
 * Falls back to qsort when ids are repeated, negative or sparse, or no scratch can be had. */
void nss_sort_cands(struct ns_cand *d, size_t n, struct ns_sort_scratch *sc)
{
	struct ns_sort_scratch own = { 0 };
	struct s_radix_rec *a, *b, *t;
	struct ns_cand *copy;
	s_radix_hist *hist;
	uint32_t *rank, n_ids = 0;
	size_t need;

	if (n < S_RADIX_MIN || n > UINT32_MAX / 8)
		goto fallback;
	for (size_t i = 0; i < n; i++) {
		if (d[i].id < 0)
			goto fallback;
		if ((uint32_t)d[i].id >= n_ids)
			n_ids = (uint32_t)d[i].id + 1;
	}
	if (n_ids > 8 * n) /* (a vocabulary's candidates: n_ids <= n_vocab) */
		goto fallback;
	/* hist, records a and b, a copy of d, the ranks: every size a multiple of 4 */
	need = sizeof(*hist) + n * (2 * sizeof(*a) + sizeof(*copy)) + (size_t)n_ids * 4;
	if (!sc)
		sc = &own;
	if (sc->cap < need) {
		void *p = realloc(sc->buf, need);

		if (!p)
			goto fallback;
		sc->buf = p;
		sc->cap = need;
	}
	hist = sc->buf;
	a = (struct s_radix_rec *)(hist + 1);
	b = a + n;
	copy = (struct ns_cand *)(b + n);
	rank = (uint32_t *)(copy + n);
	memset(hist, 0, sizeof(*hist));
	memset(rank, 0, (size_t)n_ids * 4);
	for (size_t i = 0; i < n; i++) {
		if (rank[d[i].id]) { /* a repeated id: no total order to keep */
			ns_sort_scratch_free(&own);
			goto fallback;
		}
		rank[d[i].id] = 1;
	}
	for (uint32_t id = 0, sum = 0; id < n_ids; id++) {
		uint32_t present = rank[id];

		rank[id] = sum;
		sum += present;
	}
	for (size_t i = 0; i < n; i++) {
		const uint32_t key = s_radix_key(d[i].logit);

		a[rank[d[i].id]] = (struct s_radix_rec){ key, (uint32_t)i };
		for (int g = 0; g < S_RADIX_DIGITS; g++)
			(*hist)[g][key >> (g * S_RADIX_BITS) & ((1u << S_RADIX_BITS) - 1)]++;
	}
	for (int g = 0; g < S_RADIX_DIGITS; g++) {
		const unsigned shift = (unsigned)g * S_RADIX_BITS;
		uint32_t *h = (*hist)[g], sum = 0;
		bool one_bucket = false;

		for (uint32_t v = 0; v < 1u << S_RADIX_BITS; v++) {
			uint32_t cnt = h[v];

			if (cnt == n)
				one_bucket = true;
			h[v] = sum;
			sum += cnt;
		}
		if (one_bucket) /* every key has this digit: the pass would move nothing */
			continue;
		for (size_t i = 0; i < n; i++) /* stable: equal keys stay in id order */
			b[h[a[i].key >> shift & ((1u << S_RADIX_BITS) - 1)]++] = a[i];
		t = a;
		a = b;
		b = t;
	}
	memcpy(copy, d, n * sizeof(*d));
	for (size_t i = 0; i < n; i++)
		d[i] = copy[a[i].at];
	ns_sort_scratch_free(&own);
	return;
fallback:
	qsort(d, n, sizeof(*d), s_cmp_desc);
}

void nss_sort(struct ns_cands *c)
{
	if (!c->sorted) {
		nss_sort_cands(c->data, c->n, c->scratch);
		c->sorted = true;
	}
}

