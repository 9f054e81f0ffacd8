/* test_draft_model: the model drafter of speculative decoding (nscompute/compute_draft_model.c)
 * keeps its own KV cache in step with the target's sequence. Rounds as compute_spec.c drives
 * it: propose k tokens, keep a random prefix of them plus a replacement token (the target's
 * own, other than the rejected proposal), propose again. Every proposal must be the greedy
 * continuation a separate pass computes from scratch over the same sequence (ns_fwd reset,
 * the sequence evaluated, then argmax step by step): a drafter that does not cut its cache
 * back past rejected proposals, or evaluates tokens at shifted positions, fails. Also: a new
 * request that keeps a prefix of the sequence (NS_EVAL_KEEP) and one that keeps more than the
 * drafter knows (it starts over), k capped by the context, another vocabulary size refused.
 *
 * usage: test_draft_model MODEL_IN_ORACLE */
#include <stdlib.h>
#include <string.h>

#include "compute_draft_model.h"
#include "forward.h"
#include "model.h"
#include "ns_test.h"
#include "ns_util.h"
#include "weights_fused.h"

#define S_CTX 160
#define S_K 5

struct s_ref {
	struct ns_model *m;
	struct ns_weights *w;
	struct ns_fwd *f;
	float *logits;
	uint32_t n_vocab;
};

static uint32_t s_argmax(const float *x, uint32_t n)
{
	uint32_t b = 0;

	for (uint32_t i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

/* The greedy k tokens after seq (n), from scratch. */
static void s_ref_propose(struct s_ref *r, const int32_t *seq, uint32_t n, uint32_t k,
			  int32_t *out)
{
	ns_fwd_reset(r->f);
	NS_REQUIRE(ns_fwd_eval(r->f, seq, n, r->logits, false) == 0, "ref: %s",
		   ns_fwd_error(r->f));
	for (uint32_t i = 0; i < k; i++) {
		out[i] = (int32_t)s_argmax(r->logits, r->n_vocab);
		if (i + 1 < k)
			NS_REQUIRE(ns_fwd_eval(r->f, out + i, 1, r->logits, false) == 0, "ref: %s",
				   ns_fwd_error(r->f));
	}
}

static uint64_t s_rng(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void s_beat(void *user)
{
	(*(uint64_t *)user)++;
}

/* Proposals against the reference: how many of n_check rounds agree. */
static void s_check(struct nsc_dmodel *d, struct s_ref *r, const int32_t *seq, uint32_t n,
		    uint32_t k, int32_t *got, uint32_t *same, uint32_t *rounds)
{
	int32_t want[S_K];
	char err[NS_ERR_LEN];
	int rc = nsc_dmodel_propose(d, k, got, err, sizeof(err));

	NS_REQUIRE(rc == (int)k, "propose %u at %u: %d (%s)", k, n, rc, rc < 0 ? err : "");
	s_ref_propose(r, seq, n, k, want);
	*same += !memcmp(got, want, k * sizeof(*got));
	(*rounds)++;
}

int main(int argc, char **argv)
{
	char path[4096], err[NS_ERR_LEN];
	struct s_ref r = { 0 };
	struct ns_weights_fused_opts wo = { .n_threads = 1 };
	struct ns_fwd_opts fo = { .n_ctx = S_CTX };
	struct nsc_dmodel *d = NULL, *bad = NULL;
	int32_t seq[S_CTX], got[S_K];
	uint32_t n = 0, same = 0, rounds = 0;
	uint64_t rng = 26, beats = 0;

	ns_test_require_oracle();
	NS_REQUIRE(argc == 2, "usage: test_draft_model MODEL_IN_ORACLE");
	ns_test_oracle_path(path, sizeof(path), argv[1]);
	NS_REQUIRE(ns_model_open(path, &r.m, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_weights_fused_new(r.m, &wo, &r.w, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_fwd_new(r.m, r.w, &fo, &r.f, err, sizeof(err)) == 0, "%s", err);
	r.n_vocab = ns_fwd_n_vocab(r.f);
	NS_REQUIRE((r.logits = malloc(r.n_vocab * sizeof(*r.logits))), "oom");

	NS_REQUIRE(nsc_dmodel_open(path, S_CTX, 1, false, NULL, NULL, r.n_vocab + 1, &bad, err,
				   sizeof(err)) == -EINVAL && !bad && strstr(err, "vocabulary"),
		   "another vocabulary size: %s", err);
	NS_REQUIRE(nsc_dmodel_open(path, S_CTX, 1, false, s_beat, &beats, r.n_vocab, &d, err,
				   sizeof(err)) == 0, "%s", err);
	/* nscompute's heartbeat through the read: a beat per slice, one slice a tensor at least */
	NS_REQUIRE(beats >= r.m->n_tensors, "%llu beats reading %llu tensors",
		   (unsigned long long)beats, (unsigned long long)r.m->n_tensors);

	/* a prompt, then rounds of proposals partly kept */
	for (; n < 12; n++)
		seq[n] = (int32_t)(s_rng(&rng) % r.n_vocab);
	nsc_dmodel_begin(d, 0, seq, n);
	while (n + 2 * S_K + 2 < S_CTX) {
		uint32_t keep;

		s_check(d, &r, seq, n, S_K, got, &same, &rounds);
		keep = (uint32_t)(s_rng(&rng) % (S_K + 1)); /* proposals kept: 0 .. all */
		for (uint32_t i = 0; i < keep; i++) {
			seq[n++] = got[i];
			nsc_dmodel_accept(d, got[i]);
		}
		/* the target's token: after a rejection not the rejected proposal */
		do
			seq[n] = (int32_t)(s_rng(&rng) % r.n_vocab);
		while (keep < S_K && seq[n] == got[keep]);
		nsc_dmodel_accept(d, seq[n++]);
	}
	/* a new request keeping the first 20 positions, then 3 new tokens */
	n = 20;
	for (uint32_t i = 0; i < 3; i++)
		seq[n + i] = (int32_t)(s_rng(&rng) % r.n_vocab);
	nsc_dmodel_begin(d, n, seq + n, 3);
	n += 3;
	s_check(d, &r, seq, n, S_K, got, &same, &rounds);
	/* keeping more than it knows: its record starts at the request's tokens */
	nsc_dmodel_begin(d, S_CTX, seq, 7);
	s_check(d, &r, seq, 7, S_K, got, &same, &rounds);
	/* chunked and one-token evaluation may round apart on a near tie: allow one round */
	printf("%u of %u rounds proposed what a pass from scratch does\n", same, rounds);
	NS_REQUIRE(rounds >= 20 && same + 1 >= rounds, "drafter out of step: %u of %u rounds agree",
		   same, rounds);

	/* the context's end: proposals capped so its cache holds them */
	for (n = 0; n < S_CTX - 2; n++)
		seq[n] = (int32_t)(s_rng(&rng) % r.n_vocab);
	nsc_dmodel_begin(d, 0, seq, n);
	NS_REQUIRE(nsc_dmodel_propose(d, S_K, got, err, sizeof(err)) == 3,
		   "at the context's end: not 3 proposals (%s)", err);
	nsc_dmodel_free(&d);
	ns_fwd_destroy(&r.f);
	ns_weights_destroy(&r.w);
	ns_model_close(&r.m);
	free(r.logits);
	printf("ok\n");
	return 0;
}
