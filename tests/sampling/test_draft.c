/* test_draft: the drafters and the adaptive draft length of nscompute/compute_draft.c. Prompt
 * lookup proposes the continuation of the longest n-gram's latest match (with k tokens after
 * it when one has them), nothing without a match; the oracle drafter proposes the tokens after
 * the pending one; fewer than min proposals count as none; the draft length is max for a
 * drive-bound pass (a further token costs nothing), min for a compute-bound one at a modest
 * acceptance, longer with a higher acceptance, and the second pass probes a one-token pass. */
#include <string.h>

#include "compute_draft.h"
#include "ctl_msg.h"
#include "ns_test.h"

static void s_expect(const int32_t *got, uint32_t n, const int32_t *want, uint32_t n_want,
		     const char *what)
{
	NS_REQUIRE(n == n_want, "%s: %u proposals, want %u", what, n, n_want);
	for (uint32_t i = 0; i < n; i++)
		NS_REQUIRE(got[i] == want[i], "%s: proposal %u is %d, want %d", what, i, got[i],
			   want[i]);
}

static void test_ngram(void)
{
	int32_t out[8];
	/* "1 2 3" (a 3-gram) is followed by 10; the 2-gram "2 3" latest by 20 */
	const int32_t longest[] = { 1, 2, 3, 10, 9, 2, 3, 20, 1, 2, 3 };
	/* "1 2" matches at 0 (then 5 5 5 ...) and at 3 (then 6 and the end) */
	const int32_t latest[] = { 1, 2, 5, 1, 2, 6, 7, 8, 1, 2 };
	const int32_t none[] = { 1, 2, 3, 4 };
	const int32_t w1[] = { 10, 9, 2 }, w2[] = { 6, 7, 8 }, w3[] = { 6 };

	s_expect(out, nsc_draft_ngram(longest, 11, 3, out), w1, 3, "longest n-gram first");
	s_expect(out, nsc_draft_ngram(latest, 10, 3, out), w2, 3, "latest match");
	s_expect(out, nsc_draft_ngram(latest, 10, 1, out), w3, 1, "k bounds it");
	NS_REQUIRE(nsc_draft_ngram(none, 4, 4, out) == 0, "no match: no proposal");
	NS_REQUIRE(nsc_draft_ngram(none, 1, 4, out) == 0, "one token: no proposal");
	NS_REQUIRE(nsc_draft_ngram(none, 0, 4, out) == 0, "no token: no proposal");
}

static void test_propose(void)
{
	const int32_t oracle[] = { 7, 8, 9, 10, 11 }, ctx[] = { 2, 1, 1 };
	const int32_t w[] = { 9, 10 };
	struct nsc_draft d;
	int32_t out[8];

	nsc_draft_init(&d, NS_DRAFT_ORACLE, 4, 2, oracle, 5);
	s_expect(out, nsc_draft_propose(&d, ctx, 3, 1, 2, out), w, 2, "oracle after token 1");
	NS_REQUIRE(nsc_draft_propose(&d, ctx, 3, 3, 4, out) == 0, "one oracle token left is "
		   "under min 2");
	NS_REQUIRE(nsc_draft_propose(&d, ctx, 3, 3, 1, out) == 1, "k 1 (the end near): min is 1");
	nsc_draft_init(&d, NS_DRAFT_NGRAM, 4, 2, NULL, 0);
	NS_REQUIRE(nsc_draft_propose(&d, ctx, 3, 0, 4, out) == 0, "ngram: one proposal (1) is "
		   "under min 2");
	d.min = 1;
	NS_REQUIRE(nsc_draft_propose(&d, ctx, 3, 0, 4, out) == 1 && out[0] == 1, "ngram: one "
		   "proposal (1) at min 1");
}

static void test_len(void)
{
	struct nsc_draft d;

	nsc_draft_init(&d, NS_DRAFT_NGRAM, 8, 2, NULL, 0);
	NS_REQUIRE(nsc_draft_len(&d) == 8, "nothing measured: max");
	nsc_draft_observe(&d, 8, 4, 1000);
	NS_REQUIRE(nsc_draft_len(&d) == 0, "the second pass probes a one-token pass");
	nsc_draft_observe(&d, 0, 0, 1000);
	for (int i = 0; i < 20; i++) /* drive-bound: 9 tokens cost what one does */
		nsc_draft_observe(&d, 8, 4, 1000);
	NS_REQUIRE(nsc_draft_len(&d) == 8, "drive-bound: max, got %u", nsc_draft_len(&d));

	nsc_draft_init(&d, NS_DRAFT_NGRAM, 8, 2, NULL, 0);
	nsc_draft_observe(&d, 0, 0, 1000);
	for (int i = 0; i < 20; i++) /* compute-bound: each token costs a pass */
		nsc_draft_observe(&d, 4, 2, 5000);
	NS_REQUIRE(nsc_draft_len(&d) == 2, "compute-bound at acceptance 0.5: min, got %u",
		   nsc_draft_len(&d));

	nsc_draft_init(&d, NS_DRAFT_NGRAM, 8, 1, NULL, 0);
	nsc_draft_observe(&d, 0, 0, 1000);
	for (int i = 0; i < 20; i++) /* a token costs a fifth of a pass; acceptance 0.8 */
		nsc_draft_observe(&d, 10, 8, 3000);
	/* E(k) / (1 + k / 5) at a ~ 0.8: 1.50 1.74 1.84 1.86 1.83 ... for k = 1, 2, ... */
	NS_REQUIRE(nsc_draft_len(&d) == 4, "acceptance 0.8, a token a fifth of a pass: k %u, "
		   "want 4", nsc_draft_len(&d));
	nsc_draft_init(&d, NS_DRAFT_NGRAM, 3, 3, NULL, 0);
	nsc_draft_observe(&d, 3, 0, 1000);
	NS_REQUIRE(nsc_draft_len(&d) == 3, "min == max: always that, no probe");
}

int main(void)
{
	test_ngram();
	test_propose();
	test_len();
	printf("ok: drafters and the adaptive draft length\n");
	return 0;
}
