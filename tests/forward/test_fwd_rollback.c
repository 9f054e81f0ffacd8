/* test_fwd_rollback - a recurrent model's state rolled back past rejected drafts (ns_fwd_mark,
 * deltanet.h) is the state of a pass that never saw them: bit for bit.
 *
 * Pass F (opts.n_rollback) is driven as speculative decoding drives it: before each chunk of
 * 1 + K tokens (the pending token and K drafts, the first j of them right, the rest wrong) a
 * mark, then the chunk with every row's logits, then a cut back to the pending token and the
 * j right drafts. j runs over 0 .. K, so a rejection falls at every position of a chunk (and
 * j = K keeps all). After every cut, a fresh pass G evaluates the kept sequence from 0 and
 * then the same next chunk: the two chunks' logits must be equal bit for bit, as must the
 * rows of the chunks before the cut. The first chunk starts at position 0 (a mark on a
 * sequence that starts there). Also: a cut before the mark, a cut without a mark and a cut
 * after more tokens than n_rollback are refused (-EINVAL) and change nothing; a cut to 0
 * always goes. Args: a recurrent GGUF under the oracle. Exit 0 pass, 1 fail, 77 skip (oracle
 * missing outside CI, or no CUDA device for the CUDA build).
 *
 * Built twice: here over the cpu pass, and by tests/cuda with NS_TEST_CFWD over the CUDA pass
 * (cfwd.h; the host emulation of the kernels, or a GPU): its copy and log live in VRAM, and
 * its arena's recurrent part is what ns_cfwd_vram_need counts with the rollback buffers. F
 * takes chunks of S_NB tokens, so a chunk of 1 + K tokens goes in three and its replay too.
 * Over the real kernels (a GPU, or their sources under tests/cuda/simt) NS_TEST_CFWD_TOKENWISE
 * is set: the f16 prefill GEMM rounds unlike the one-token GEMV (a chunk and a one-call
 * prefix differ by up to 3e-2 on these models before any rollback), so F and G both go one
 * token at a time (S_NB 1: the log fills and the replay runs token by token) and the
 * comparison stays bit for bit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#ifdef NS_TEST_CFWD
#include "cfwd.h"
#endif
#include "ns_test.h"
#include "ns_util.h"
#include "weights.h"

#define S_CTX 128u
#define S_K 4u     /* drafts per chunk */
#define S_STEPS 15u
#ifdef NS_TEST_CFWD_TOKENWISE
#define S_NB 1u    /* F's and G's tokens per chunk */
#define S_NB_G 1u
#else
#define S_NB 2u    /* F's tokens per chunk */
#define S_NB_G 0u  /* G's: the default */
#endif
#ifdef NS_TEST_CFWD
#define S_WHICH "the CUDA pass, "
#else
#define S_WHICH ""
#endif

/* The "true" sequence the target follows, and a wrong draft at position i. */
static int32_t s_tok(uint32_t i)
{
	return (int32_t)((i * 7919u + 13u) % 251u);
}

static int32_t s_wrong(uint32_t i)
{
	return (int32_t)((s_tok(i) + 17u + i % 5u) % 251u);
}

static void s_same(const float *a, const float *b, uint64_t n, const char *what, uint32_t step)
{
	for (uint64_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof(float)))
			NS_FAIL("step %u, %s: logit %llu is %.9g after the rollback, %.9g from "
				"scratch", step, what, (unsigned long long)i, a[i], b[i]);
}

/* A pass of the build's backend with n_rollback tokens of rollback and n_batch per chunk */
static int s_new(struct ns_model *m, struct ns_weights *w, uint32_t n_rollback,
		 uint32_t n_batch, struct ns_fwd **out, char *err, size_t errlen)
{
#ifdef NS_TEST_CFWD
	struct ns_cfwd_opts o = { .n_ctx = S_CTX, .n_batch = n_batch, .n_rollback = n_rollback };
	struct ns_cfwd_need need, need0;
	struct ns_cfwd_stats st;
	int rc = ns_cfwd_new(m, w, &o, out, err, errlen);

	if (rc < 0)
		return rc;
	/* the rollback buffers are in the arena's recurrent part, counted as allocated */
	ns_cfwd_stats(*out, &st);
	NS_REQUIRE(ns_cfwd_vram_need(m, &o, &need, err, errlen) == 0, "need: %s", err);
	o.n_rollback = 0;
	NS_REQUIRE(ns_cfwd_vram_need(m, &o, &need0, err, errlen) == 0, "need: %s", err);
	NS_REQUIRE(st.recurrent_bytes == need.recurrent && st.vram_used == need.total &&
		   (n_rollback ? need.recurrent > need0.recurrent : need.total == need0.total),
		   "VRAM: recurrent %llu B allocated, %llu B counted (%llu without rollback)",
		   (unsigned long long)st.recurrent_bytes, (unsigned long long)need.recurrent,
		   (unsigned long long)need0.recurrent);
	return 0;
#else
	struct ns_fwd_opts o = { .n_ctx = S_CTX, .n_batch = n_batch, .n_rollback = n_rollback };

	return ns_fwd_new(m, w, &o, out, err, errlen);
#endif
}

/* G from scratch: the kept sequence [0, pos) in one call, then chunk (n) into out. */
static void s_scratch(struct ns_fwd *g, uint32_t pos, const int32_t *chunk, uint32_t n,
		      float *out)
{
	int32_t ids[S_CTX];

	ns_fwd_reset(g);
	for (uint32_t i = 0; i < pos; i++)
		ids[i] = s_tok(i);
	if (pos && ns_fwd_eval(g, ids, pos, NULL, false))
		NS_FAIL("scratch prefix of %u: %s", pos, ns_fwd_error(g));
	if (ns_fwd_eval(g, chunk, n, out, true))
		NS_FAIL("scratch chunk at %u: %s", pos, ns_fwd_error(g));
}

int main(int argc, char **argv)
{
	char path[1024], err[NS_ERR_LEN];
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	struct ns_fwd *f = NULL, *g = NULL;
	int32_t chunk[1 + S_K], big[2 + S_K];
	float *lf, *lg;
	uint32_t nv, pos = 0, n_cuts = 0;

	if (argc != 2)
		NS_FAIL("usage: test_fwd_rollback MODEL.gguf (under the oracle)");
	ns_test_require_oracle();
#ifdef NS_TEST_CFWD
	if (ns_cfwd_probe(err, sizeof(err)) < 0) {
		printf("skip: %s\n", err);
		return 77;
	}
#endif
	NS_REQUIRE(ns_model_open(ns_test_oracle_path(path, sizeof(path), argv[1]), &m, err,
				 sizeof(err)) == 0 &&
		   ns_weights_ref_new(m, &w, err, sizeof(err)) == 0 &&
		   s_new(m, w, 1 + S_K, S_NB, &f, err, sizeof(err)) == 0 &&
		   s_new(m, w, 0, S_NB_G, &g, err, sizeof(err)) == 0, "%s: %s", argv[1], err);
	nv = ns_fwd_n_vocab(f);
	lf = calloc((uint64_t)(2 + S_K) * nv, sizeof(float));
	lg = calloc((uint64_t)(2 + S_K) * nv, sizeof(float));
	NS_REQUIRE(lf && lg, "out of memory");
	/* a pass without rollback buffers refuses the mark with a line */
	NS_REQUIRE(ns_fwd_mark(g) == -ENOTSUP && strstr(ns_fwd_error(g), "rollback"),
		   "a mark without buffers: %s", ns_fwd_error(g));

	for (uint32_t step = 0; step < S_STEPS; step++) {
		const uint32_t j = step % (S_K + 1); /* drafts kept */

		chunk[0] = s_tok(pos);
		for (uint32_t i = 1; i <= S_K; i++)
			chunk[i] = i <= j ? s_tok(pos + i) : s_wrong(pos + i);
		NS_REQUIRE(ns_fwd_mark(f) == 0, "mark at %u: %s", pos, ns_fwd_error(f));
		NS_REQUIRE(ns_fwd_eval(f, chunk, 1 + S_K, lf, true) == 0, "chunk at %u: %s", pos,
			   ns_fwd_error(f));
		s_scratch(g, pos, chunk, 1 + S_K, lg);
		s_same(lf, lg, (uint64_t)(1 + S_K) * nv, "the chunk", step);
		if (step == 3) { /* a cut before the mark: refused, nothing changes */
			NS_REQUIRE(ns_fwd_truncate(f, pos - 1) == -EINVAL &&
				   ns_fwd_n_past(f) == pos + 1 + S_K,
				   "a cut before the mark was taken");
		}
		NS_REQUIRE(ns_fwd_truncate(f, pos + 1 + j) == 0, "cut to %u (mark %u): %s",
			   pos + 1 + j, pos, ns_fwd_error(f));
		n_cuts += j < S_K;
		pos += 1 + j;
		/* the mark is spent: a second cut into the chunk is refused */
		if (j < S_K && j > 0)
			NS_REQUIRE(ns_fwd_truncate(f, pos - 1) == -EINVAL,
				   "a second cut after the rollback was taken");
	}
	/* the pass after all those cuts still agrees with one from scratch (plain decode) */
	chunk[0] = s_tok(pos);
	NS_REQUIRE(ns_fwd_eval(f, chunk, 1, lf, true) == 0, "decode: %s", ns_fwd_error(f));
	s_scratch(g, pos, chunk, 1, lg);
	s_same(lf, lg, nv, "one token after the cuts", S_STEPS);
	pos++;
	/* more tokens after the mark than n_rollback: the mark is dropped, a cut refused */
	for (uint32_t i = 0; i < 2 + S_K; i++)
		big[i] = s_tok(pos + i);
	NS_REQUIRE(ns_fwd_mark(f) == 0 && ns_fwd_eval(f, big, 2 + S_K, lf, true) == 0,
		   "a long chunk: %s", ns_fwd_error(f));
	NS_REQUIRE(ns_fwd_truncate(f, pos + 1) == -EINVAL && ns_fwd_n_past(f) == pos + 2 + S_K,
		   "a cut past the log's reach was taken");
	/* to 0: always; and the sequence starts again from zero state */
	NS_REQUIRE(ns_fwd_truncate(f, 0) == 0, "cut to 0: %s", ns_fwd_error(f));
	chunk[0] = s_tok(0);
	NS_REQUIRE(ns_fwd_eval(f, chunk, 1, lf, true) == 0, "after 0: %s", ns_fwd_error(f));
	s_scratch(g, 0, chunk, 1, lg);
	s_same(lf, lg, nv, "after a cut to 0", S_STEPS + 1);
	NS_REQUIRE(n_cuts >= S_STEPS * S_K / (S_K + 1) && pos > S_K,
		   "too few rollbacks: %u", n_cuts);
	printf("ok: %s%s: %u rollbacks over %u positions (chunks of %u in pieces of %u), logits "
	       "bit-identical to a pass from scratch; cuts before the mark or past the log "
	       "refused\n", S_WHICH, argv[1], n_cuts, pos, 1 + S_K, S_NB);
	free(lf);
	free(lg);
	ns_fwd_destroy(&f);
	ns_fwd_destroy(&g);
	ns_weights_destroy(&w);
	ns_model_close(&m);
	return 0;
}
