/* compute_draft.h - the drafters of speculative generation and the adaptive draft length.
 *
 * A drafter proposes the tokens that follow a context; nscompute then evaluates the pending
 * token and the proposals as one chunk (one read of the weights) and keeps the agreeing
 * prefix (compute_spec.c). Both drafters here are deterministic (their distribution is one
 * hot), which the acceptance rule relies on (sampling.h, ns_sampler_verify).
 *
 * The draft length k: the count of tokens a pass yields with k drafts, when each draft is
 * accepted with probability a (measured), is E(k) = 1 + a + ... + a^k; a pass of k + 1 tokens
 * costs one + k * extra (one: a one-token pass, extra: what each further token adds, both
 * measured). k in [min, max] maximises E(k) / cost(k): a drive-bound pass (extra ~ 0) drafts
 * max, a compute-bound one (extra ~ one) drafts min; until both costs are measured, max.
 * Pure functions: tests/sampling/test_draft.c. */
#ifndef NS_COMPUTE_DRAFT_H
#define NS_COMPUTE_DRAFT_H

#include <stdint.h>

#define NSC_NGRAM_MAX 4 /* the longest n-gram the lookup tries first */

struct nsc_draft {
	uint32_t kind;           /* enum ns_draft_kind (ctl_msg.h) */
	uint32_t max, min;       /* 1 <= min <= max */
	const int32_t *oracle;   /* NS_DRAFT_ORACLE: generated token i is proposed as oracle[i] */
	uint32_t n_oracle;
	/* measured (nsc_draft_observe): exponential moving averages */
	double accept;           /* probability that a draft is accepted; starts at 0.5 */
	double one_ns;           /* a one-token pass; 0: none measured yet */
	double extra_ns;         /* what each token beyond the first adds to a pass */
	uint32_t n_one, n_chunk; /* passes of each kind measured */
	uint32_t n_pass;         /* passes observed */
};

#define NSC_DRAFT_PROBE 64 /* every this many passes one is a one-token pass (its cost) */

/* A drafter of kind with its bounds (oracle: NULL / 0 unless NS_DRAFT_ORACLE). */
void nsc_draft_init(struct nsc_draft *d, uint32_t kind, uint32_t max, uint32_t min,
		    const int32_t *oracle, uint32_t n_oracle);

/* Prompt lookup: the last g tokens of ctx (n), for g from NSC_NGRAM_MAX down to 1, looked up
 * earlier in ctx; the first g with a match proposes what followed its latest match that has
 * k tokens after it (else the one with the most). Up to k tokens into out; returns how many
 * (0: no match). */
uint32_t nsc_draft_ngram(const int32_t *ctx, uint32_t n, uint32_t k, int32_t *out);

/* Up to k proposals for the tokens after ctx (n tokens, the last of them generated token
 * number gen, counting from 0) into out; fewer than min(d->min, k) count as none (0). */
uint32_t nsc_draft_propose(const struct nsc_draft *d, const int32_t *ctx, uint32_t n,
			   uint32_t gen, uint32_t k, int32_t *out);

/* A pass of 1 + drafted tokens took ns and accepted `accepted` of the drafts. */
void nsc_draft_observe(struct nsc_draft *d, uint32_t drafted, uint32_t accepted, uint64_t ns);

/* The draft length for the next pass, in [min, max] (the measurements above); 0 for the
 * second pass and every NSC_DRAFT_PROBE-th, whose one-token cost is measured. min == max:
 * always that (no probes). */
uint32_t nsc_draft_len(const struct nsc_draft *d);

#endif
