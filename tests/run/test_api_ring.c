/* test_api_ring: the C API (neurostream.h) on a model whose sliding layers keep ring caches
 * (nscompute/forward/kvcache.h; argv[1]: tiny-gemma4 or tiny-gpt-oss, window 8, -c 640: rings
 * of 8 + 512 - 1 -> 528 positions). A rollback within the rings' bound (R + 1 - window = 521 back) and one past it
 * (nscompute refuses the cut, the engine evaluates the kept prefix again from 0: api.c
 * s_run_kept) both give the logits of the whole sequence evaluated at once, bit for bit;
 * without the re-evaluation the second would fail. */
#include "neurostream.h"
#include "run_testlib.h"

#define S_N 600u
#define S_CTX 640u

int main(int argc, char **argv)
{
	char model[PATH_MAX], err[512];
	struct ns_engine_opts o;
	struct ns_engine *e = NULL;
	int32_t ids[S_N];
	float *ref, *got;
	uint32_t nv;
	int rc;

	RT_CHECK(argc == 2, "usage: test_api_ring MODEL.gguf (under the oracle)");
	ns_test_require_oracle();
	ns_test_oracle_path(model, sizeof(model), argv[1]);
	ns_engine_opts_default(&o);
	o.n_ctx = S_CTX;
	o.threads = 2;
	rc = ns_engine_load(model, &o, &e, err, sizeof(err));
	RT_CHECK(rc == 0 && e, "load: %s", err);
	nv = ns_engine_n_vocab(e);
	for (uint32_t i = 0; i < S_N; i++)
		ids[i] = (int32_t)((i * 7919u + 13u) % 251u) + 3; /* past the special ids */
	ref = malloc((size_t)S_N * nv * sizeof(float));
	got = malloc((size_t)S_N * nv * sizeof(float));
	RT_CHECK(ref && got, "out of memory");
	RT_CHECK(ns_engine_logits(e, ids, S_N, ref) == 0, "logits: %s", ns_engine_error(e));

	RT_CHECK(ns_engine_eval(e, ids, S_N, NULL, false) == 0, "eval: %s", ns_engine_error(e));
	/* within the bound: nscompute cuts its rings back */
	RT_CHECK(ns_engine_rollback(e, S_N - 10) == 0 &&
		 ns_engine_eval(e, ids + S_N - 10, 10, got, true) == 0, "rollback by 10: %s",
		 ns_engine_error(e));
	RT_CHECK(!memcmp(got, ref + (size_t)(S_N - 10) * nv, 10ull * nv * sizeof(float)),
		 "after a rollback by 10: logits differ from the whole sequence's");
	/* past it: refused by nscompute, the prefix evaluated again */
	RT_CHECK(ns_engine_rollback(e, 50) == 0 &&
		 ns_engine_eval(e, ids + 50, S_N - 50, got, true) == 0, "rollback to 50: %s",
		 ns_engine_error(e));
	RT_CHECK(!memcmp(got, ref + 50ull * nv, (size_t)(S_N - 50) * nv * sizeof(float)) &&
		 ns_engine_n_past(e) == S_N,
		 "after a rollback to 50: logits differ from the whole sequence's (n_past %u)",
		 ns_engine_n_past(e));
	printf("%s -c %u: rollbacks by 10 and by %u (past the rings' 521) give the whole "
	       "sequence's logits bit for bit\n", argv[1], S_CTX, S_N - 50);
	ns_engine_free(&e);
	free(ref);
	free(got);
	return 0;
}
