/* test_fwd_ring - the sliding layers' ring caches (kvcache.h; gemma.c, and llama.c for
 * gpt-oss) change no bit of the logits, and a cut back is honoured only as far as the rings
 * allow.
 *
 * Two passes over the same model and context: one with chunks of 8 tokens (n_batch 8: the
 * sliding layers keep rings of window + 7 positions, rounded up to 16), one with n_batch =
 * n_ctx (every cache whole). Both are fed the same synthetic sequence, long enough to wrap
 * the rings many times, in the same chunks (so the only difference is the rings): every
 * logit equal bit for bit. Then the rollback bound (docs/decisions.md): a cut back by
 * R + 1 - window positions from the furthest position written is accepted and continues bit
 * for bit as the whole pass; one position further is refused (-ERANGE, with a line) and
 * leaves the pass as it was; after a reset the prefix evaluated again (what nscompute's
 * callers do) gives the whole pass's logits again. Also: fewer cache bytes than whole.
 * With a third argument 2 (gpt-oss: llama.c keeps a ring per sequence) the same for two
 * sequences in batches whose rows alternate between them (ns_fwd_eval_batch), and a cut of
 * sequence 1 (ns_fwd_seq_truncate) within and past the bound, sequence 0 untouched.
 * Args: a GGUF under the oracle, its sliding window[, 2]. Exit 0 pass, 1 fail, 77 skip
 * (oracle missing outside CI). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "ns_test.h"
#include "ns_util.h"
#include "weights.h"

#define S_CTX 200u
#define S_CHUNK 8u

static int32_t s_tok(uint32_t i)
{
	return (int32_t)((i * 7919u + 13u) % 251u);
}

/* Evaluate tokens [from, to) of the synthetic sequence (offset `salt`) in chunks of at most
 * S_CHUNK, all logits into out (rows from row 0). */
static void s_feed(struct ns_fwd *f, uint32_t from, uint32_t to, uint32_t salt, float *out)
{
	const uint32_t nv = ns_fwd_n_vocab(f);
	int32_t ids[S_CHUNK];

	for (uint32_t i = from, k = 0; i < to; k++) {
		/* chunk lengths 8, 3, 8, 1, ... so chunks start anywhere in a ring */
		uint32_t n = k % 2 ? (k % 4 == 1 ? 3 : 1) : S_CHUNK;

		n = to - i < n ? to - i : n;
		for (uint32_t t = 0; t < n; t++)
			ids[t] = s_tok(i + t + salt);
		if (ns_fwd_eval(f, ids, n, out + (uint64_t)(i - from) * nv, true))
			NS_FAIL("eval at %u: %s", i, ns_fwd_error(f));
		i += n;
	}
}

static void s_same(const float *a, const float *b, uint64_t n, const char *what)
{
	for (uint64_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof(float)))
			NS_FAIL("%s: logit %llu is %.9g with rings, %.9g with whole caches", what,
				(unsigned long long)i, a[i], b[i]);
}

/* Both sequences of a two-sequence pass, tokens [from, to) of each (sequence s with salt
 * + 500 s), in batches of at most S_CHUNK rows alternating between them (each row its own
 * run of attention), every row's logits: out (to - from, 2, n_vocab). */
static void s_feed2(struct ns_fwd *f, uint32_t from, uint32_t to, uint32_t salt, float *out)
{
	const uint32_t nv = ns_fwd_n_vocab(f);
	uint32_t rows[S_CHUNK], seq[S_CHUNK];
	int32_t ids[S_CHUNK];

	for (uint32_t t = 0; t < S_CHUNK; t++)
		rows[t] = t;
	for (uint32_t i = from, k = 0; i < to; k++) {
		uint32_t n = k % 3 == 1 ? 1 : S_CHUNK / 2; /* 4 + 4 rows, or 1 + 1 */
		struct ns_fwd_batch b = { .tokens = ids, .seq = seq, .out_rows = rows,
					  .logits = out + (uint64_t)(i - from) * 2 * nv };

		n = to - i < n ? to - i : n;
		for (uint32_t t = 0; t < 2 * n; t++) {
			seq[t] = t % 2;
			ids[t] = s_tok(i + t / 2 + salt + 500 * seq[t]);
		}
		b.n = b.n_out = 2 * n;
		if (ns_fwd_eval_batch(f, &b))
			NS_FAIL("batch at %u: %s", i, ns_fwd_error(f));
		i += n;
	}
}

/* Two sequences: rings against whole caches, and a cut of sequence 1 by the bound (accepted)
 * and by one more (refused, nothing changed). */
static void s_two_seqs(struct ns_model *m, struct ns_weights *w, uint32_t bound)
{
	struct ns_fwd_opts ro = { .n_ctx = S_CTX, .n_batch = S_CHUNK, .n_seq = 2 };
	struct ns_fwd_opts wo = { .n_ctx = S_CTX, .n_batch = S_CTX, .n_seq = 2 };
	const uint32_t len = S_CTX - 40;
	struct ns_fwd *ring = NULL, *whole = NULL;
	char err[NS_ERR_LEN];
	uint64_t nv;
	float *lr, *lw;
	int rc;

	NS_REQUIRE(ns_fwd_new(m, w, &ro, &ring, err, sizeof(err)) == 0 &&
		   ns_fwd_new(m, w, &wo, &whole, err, sizeof(err)) == 0, "two sequences: %s",
		   err);
	nv = ns_fwd_n_vocab(ring);
	lr = malloc((uint64_t)len * 2 * nv * sizeof(float));
	lw = malloc((uint64_t)len * 2 * nv * sizeof(float));
	if (!lr || !lw)
		NS_FAIL("out of memory");
	s_feed2(ring, 0, len, 0, lr);
	s_feed2(whole, 0, len, 0, lw);
	s_same(lr, lw, (uint64_t)len * 2 * nv, "two sequences");
	/* sequence 1 back by the bound: accepted; both continue as the whole pass */
	if ((rc = ns_fwd_seq_truncate(ring, 1, len - bound)) ||
	    ns_fwd_seq_truncate(whole, 1, len - bound))
		NS_FAIL("sequence 1 cut back by %u (the bound) refused: %d %s", bound, rc,
			ns_fwd_error(ring));
	/* one further (from its furthest position written, len): refused, nothing changed */
	rc = ns_fwd_seq_truncate(ring, 1, len - bound - 1);
	if (rc != -ERANGE || !strstr(ns_fwd_error(ring), "evaluate from the start") ||
	    ns_fwd_seq_n_past(ring, 1) != len - bound || ns_fwd_seq_n_past(ring, 0) != len)
		NS_FAIL("sequence 1 cut back by %u (past the bound %u) gave %d, n_past %u: %s",
			bound + 1, bound, rc, ns_fwd_seq_n_past(ring, 1), ns_fwd_error(ring));
	if (ns_fwd_seq_truncate(ring, 0, len - bound) || ns_fwd_seq_truncate(whole, 0, len - bound))
		NS_FAIL("sequence 0 cut back by the bound refused: %s", ns_fwd_error(ring));
	s_feed2(ring, len - bound, len - bound + 20, 3000, lr);
	s_feed2(whole, len - bound, len - bound + 20, 3000, lw);
	s_same(lr, lw, 20ull * 2 * nv, "two sequences after a cut within the bound");
	printf("two sequences: rings bit-identical over %u positions each; sequence 1's cut "
	       "by %u accepted, by %u refused\n", len + 20, bound, bound + 1);
	free(lr);
	free(lw);
	ns_fwd_destroy(&ring);
	ns_fwd_destroy(&whole);
}

int main(int argc, char **argv)
{
	char path[1024], err[NS_ERR_LEN];
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	struct ns_fwd *ring = NULL, *whole = NULL;
	struct ns_fwd_opts ro = { .n_ctx = S_CTX, .n_batch = S_CHUNK };
	struct ns_fwd_opts wo = { .n_ctx = S_CTX, .n_batch = S_CTX };
	uint32_t nv, keep, bound;
	float *lr, *lw;
	int rc;

	if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "2")))
		NS_FAIL("usage: test_fwd_ring MODEL.gguf WINDOW [2]");
	ns_test_require_oracle();
	NS_REQUIRE(ns_model_open(ns_test_oracle_path(path, sizeof(path), argv[1]), &m, err,
				 sizeof(err)) == 0 &&
		   ns_weights_ref_new(m, &w, err, sizeof(err)) == 0 &&
		   ns_fwd_new(m, w, &ro, &ring, err, sizeof(err)) == 0 &&
		   ns_fwd_new(m, w, &wo, &whole, err, sizeof(err)) == 0, "%s: %s", argv[1], err);
	nv = ns_fwd_n_vocab(ring);
	lr = malloc((uint64_t)S_CTX * nv * sizeof(float));
	lw = malloc((uint64_t)S_CTX * nv * sizeof(float));
	if (!lr || !lw)
		NS_FAIL("out of memory");
	/* the model's sliding window (argv[2], what the file says): rings of
	 * ceil16(window + 7) positions, the bound R + 1 - window */
	{
		const uint32_t win = (uint32_t)strtoul(argv[2], NULL, 10);
		const uint32_t R = (win + S_CHUNK - 1 + 15) / 16 * 16;

		bound = R + 1 - win;
		if (!win || R * 3 > S_CTX - 40)
			NS_FAIL("window %u: the rings (%u) would not wrap 3 times in %u", win, R,
				S_CTX - 40);
	}
	if (ns_fwd_cache_bytes(ring) >= ns_fwd_cache_bytes(whole))
		NS_FAIL("the ring pass holds %llu cache bytes, the whole one %llu",
			(unsigned long long)ns_fwd_cache_bytes(ring),
			(unsigned long long)ns_fwd_cache_bytes(whole));

	/* 1. the same sequence, the same chunks */
	s_feed(ring, 0, S_CTX - 40, 0, lr);
	s_feed(whole, 0, S_CTX - 40, 0, lw);
	s_same(lr, lw, (uint64_t)(S_CTX - 40) * nv, "the sequence");

	/* 2. a cut back by the bound: accepted, continues as the whole pass */
	keep = S_CTX - 40 - bound;
	if ((rc = ns_fwd_truncate(ring, keep)) || ns_fwd_truncate(whole, keep))
		NS_FAIL("a cut back by %u (the bound) to %u was refused: %d %s", bound, keep, rc,
			ns_fwd_error(ring));
	s_feed(ring, keep, keep + 20, 1000, lr);
	s_feed(whole, keep, keep + 20, 1000, lw);
	s_same(lr, lw, 20ull * nv, "after a cut back within the bound");

	/* 3. one further: refused, nothing changed */
	keep = keep + 20 - bound - 1;
	rc = ns_fwd_truncate(ring, keep);
	if (rc != -ERANGE || !strstr(ns_fwd_error(ring), "evaluate from the start") ||
	    ns_fwd_n_past(ring) != keep + bound + 1)
		NS_FAIL("a cut back by %u (past the bound %u) gave %d, n_past %u: %s", bound + 1,
			bound, rc, ns_fwd_n_past(ring), ns_fwd_error(ring));
	printf("cut back by %u refused: %s\n", bound + 1, ns_fwd_error(ring));
	/* what the caller does then: from the start, the kept prefix and the new tokens */
	if (ns_fwd_truncate(whole, keep))
		NS_FAIL("whole cut: %s", ns_fwd_error(whole));
	ns_fwd_reset(ring);
	{
		float *pre = malloc((uint64_t)S_CTX * nv * sizeof(float));
		const uint32_t split = S_CTX - 40 - bound; /* the prefix's own history */

		if (!pre)
			NS_FAIL("out of memory");
		s_feed(ring, 0, split, 0, pre);
		s_feed(ring, split, keep, 1000, pre);
		free(pre);
	}
	s_feed(ring, keep, keep + 30, 2000, lr);
	s_feed(whole, keep, keep + 30, 2000, lw);
	s_same(lr, lw, 30ull * nv, "after a refused cut, evaluated again from the start");

	printf("%s: rings bit-identical to whole caches over %u positions; cut back by %u "
	       "accepted, by %u refused; cache bytes %llu vs %llu\n", argv[1], S_CTX - 40 + 50,
	       bound, bound + 1, (unsigned long long)ns_fwd_cache_bytes(ring),
	       (unsigned long long)ns_fwd_cache_bytes(whole));
	if (argc == 4)
		s_two_seqs(m, w, bound);
	free(lr);
	free(lw);
	ns_fwd_destroy(&ring);
	ns_fwd_destroy(&whole);
	ns_weights_destroy(&w);
	ns_model_close(&m);
	return 0;
}
