/* compute_draft.c - prompt-lookup and oracle drafters, the adaptive draft length
 * (compute_draft.h). */
#include <string.h>

#include "compute_draft.h"
#include "ctl_msg.h"

#define S_EMA 0.2 /* weight of a new measurement in the moving averages */

void nsc_draft_init(struct nsc_draft *d, uint32_t kind, uint32_t max, uint32_t min,
		    const int32_t *oracle, uint32_t n_oracle)
{
	memset(d, 0, sizeof(*d));
	d->kind = kind;
	d->max = max;
	d->min = min;
	d->oracle = oracle;
	d->n_oracle = n_oracle;
	d->accept = 0.5;
}

uint32_t nsc_draft_ngram(const int32_t *ctx, uint32_t n, uint32_t k, int32_t *out)
{
	for (uint32_t g = n > NSC_NGRAM_MAX ? NSC_NGRAM_MAX : n - (n > 0); g >= 1; g--) {
		const int32_t *key = ctx + n - g;
		uint32_t best = 0, from = 0;

		/* matches at j (ctx[j .. j + g) == key), the latest first; j + g < n, so a
		 * match is followed by at least one token */
		for (uint32_t j = n - g; j-- > 0 && best < k;) {
			uint32_t after = n - (j + g);

			if (memcmp(ctx + j, key, (size_t)g * sizeof(*ctx)))
				continue;
			if (after > best) {
				best = after;
				from = j + g;
			}
		}
		if (best) {
			best = best < k ? best : k;
			memcpy(out, ctx + from, (size_t)best * sizeof(*out));
			return best;
		}
	}
	return 0;
}

uint32_t nsc_draft_propose(const struct nsc_draft *d, const int32_t *ctx, uint32_t n,
			   uint32_t gen, uint32_t k, int32_t *out)
{
	/* k under min only when the context or n_predict leaves no more: min is then k */
	const uint32_t need = k < d->min ? k : d->min;
	uint32_t got = 0;

	if (k == 0)
		return 0;
	if (d->kind == NS_DRAFT_NGRAM) {
		got = nsc_draft_ngram(ctx, n, k, out);
	} else if (d->kind == NS_DRAFT_ORACLE) {
		for (uint64_t i = (uint64_t)gen + 1; i < d->n_oracle && got < k; i++)
			out[got++] = d->oracle[i];
	}
	return got >= need ? got : 0;
}

void nsc_draft_observe(struct nsc_draft *d, uint32_t drafted, uint32_t accepted, uint64_t ns)
{
	double t = (double)ns;

	d->n_pass++;
	if (!drafted) {
		d->one_ns = d->n_one++ ? (1 - S_EMA) * d->one_ns + S_EMA * t : t;
		return;
	}
	d->accept = (1 - S_EMA) * d->accept + S_EMA * (double)accepted / drafted;
	if (d->n_one) { /* the marginal cost of a token needs a one-token pass to compare */
		double extra = (t - d->one_ns) / drafted;

		extra = extra > 0 ? extra : 0;
		d->extra_ns = d->n_chunk++ ? (1 - S_EMA) * d->extra_ns + S_EMA * extra : extra;
	}
}

uint32_t nsc_draft_len(const struct nsc_draft *d)
{
	/* until both costs are measured, the cheaper guess is a drive-bound pass: max */
	double one = d->n_one && d->n_chunk ? d->one_ns : 1.0;
	double extra = d->n_one && d->n_chunk ? d->extra_ns : 0.0;
	double a = d->accept, best = -1.0, gain = 1.0, term = 1.0;
	uint32_t k_best = d->min;

	if (d->min == d->max) /* nothing to choose: no probes either */
		return d->min;
	if (d->n_pass == 1 || (d->n_pass && d->n_pass % NSC_DRAFT_PROBE == 0))
		return 0;
	for (uint32_t k = 1; k <= d->max; k++) {
		double rate;

		term *= a;
		gain += term; /* E(k) = 1 + a + ... + a^k */
		if (k < d->min)
			continue;
		rate = gain / (one + k * extra);
		if (rate > best * (1 + 1e-9)) { /* ties: the shorter draft */
			best = rate;
			k_best = k;
		}
	}
	return k_best;
}
