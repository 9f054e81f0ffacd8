/* test_forward_faults - the forward pass under failing providers and bad calls.
 *
 * A wrapper provider makes the N-th provider call fail (for every N up to the number of calls
 * a whole init + prefill + decode makes); each time ns_fwd_new or ns_fwd_eval must return an
 * error with a message, never crash or leak (run under ASan). Also: context overflow, bad token
 * ids, zero tokens, a refused architecture. Exits 0 pass, 1 fail, 77 skip (no oracle). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "ns_test.h"
#include "ns_util.h"
#include "weights.h"

struct s_faulty {
	struct ns_weights *inner;
	long calls;   /* provider calls so far */
	long fail_at; /* call number that fails (1-based); 0 = never */
};

static int s_should_fail(struct s_faulty *s)
{
	return ++s->calls == s->fail_at;
}

static int s_matmul(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end, const float *x,
		    uint64_t n_tok, float *y, uint64_t ldy)
{
	struct s_faulty *s = ctx;

	if (s_should_fail(s))
		return -EIO;
	return ns_weights_matmul(s->inner, tensor, row0, row_end, x, n_tok, y, ldy);
}

static int s_get_rows(void *ctx, uint32_t tensor, const int64_t *rows, uint64_t n, float *dst)
{
	struct s_faulty *s = ctx;

	if (s_should_fail(s))
		return -EIO;
	return ns_weights_get_rows(s->inner, tensor, rows, n, dst);
}

static const char *s_last_error(void *ctx)
{
	struct s_faulty *s = ctx;

	return s->calls == s->fail_at ? "injected fault" : ns_weights_error(s->inner);
}

static void s_destroy(void *ctx)
{
	(void)ctx; /* the test owns the wrapper */
}

static const struct ns_weights_ops s_ops = {
	.name = "faulty", .matmul = s_matmul, .get_rows = s_get_rows,
	.last_error = s_last_error, .destroy = s_destroy,
};

static int s_fail;

#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			s_fail = 1;                                                      \
		}                                                                        \
	} while (0)

/* init + 4-token prefill + 2 decode steps; returns 0 when everything succeeded, 1 when a
 * call failed cleanly, -1 on a contract violation. */
static int s_run_once(struct ns_model *m, struct ns_weights *w)
{
	const int32_t toks[4] = { 1, 403, 407, 261 };
	struct ns_fwd_opts o = { .n_ctx = 8, .n_batch = 3 };
	struct ns_fwd *f = NULL;
	char err[NS_ERR_LEN] = "";
	float logits[512 * 4];
	int32_t next = 5;
	int rc;

	rc = ns_fwd_new(m, w, &o, &f, err, sizeof(err));
	if (rc < 0)
		return f == NULL && strstr(err, "injected fault") ? 1 : -1;
	for (int step = 0; step < 3; step++) {
		rc = step == 0 ? ns_fwd_eval(f, toks, 4, logits, true)
			       : ns_fwd_eval(f, &next, 1, logits, false);
		if (rc < 0) {
			int good = rc == -EIO && strstr(ns_fwd_error(f), "injected fault");

			ns_fwd_destroy(&f);
			return good ? 1 : -1;
		}
	}
	ns_fwd_destroy(&f);
	return 0;
}

int main(void)
{
	struct ns_weights wrap = { .ops = &s_ops };
	struct s_faulty fy = { 0 };
	struct ns_model *m = NULL;
	struct ns_fwd *f = NULL;
	char path[1024], err[NS_ERR_LEN];
	long total, failed = 0;
	int32_t tok;
	float lg[512];

	ns_test_require_oracle();
	ns_test_oracle_path(path, sizeof(path), "models/stories260K.gguf");
	if (ns_model_open(path, &m, err, sizeof(err)) < 0 ||
	    ns_weights_ref_new(m, &fy.inner, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	wrap.ctx = &fy;
	wrap.model = m;

	/* count the calls of a clean run, then fail each of them in turn */
	CHECK(s_run_once(m, &wrap) == 0);
	total = fy.calls;
	CHECK(total > 20);
	for (long n = 1; n <= total; n++) {
		int r;

		fy.calls = 0;
		fy.fail_at = n;
		r = s_run_once(m, &wrap);
		CHECK(r == 1);
		failed += r == 1;
	}
	printf("fault injection: %ld of %ld provider calls failed cleanly\n", failed, total);
	fy.fail_at = 0;

	/* bad calls */
	CHECK(ns_fwd_new(m, &wrap, &(struct ns_fwd_opts){ .n_ctx = 2 }, &f, err, sizeof(err)) == 0);
	if (f) {
		const int32_t three[3] = { 1, 2, 3 };

		tok = 512;
		CHECK(ns_fwd_eval(f, &tok, 1, lg, false) == -EINVAL);
		tok = -1;
		CHECK(ns_fwd_eval(f, &tok, 1, lg, false) == -EINVAL);
		CHECK(ns_fwd_eval(f, three, 0, lg, false) == -EINVAL);
		CHECK(ns_fwd_eval(f, three, 3, lg, false) == -ENOSPC);
		CHECK(ns_fwd_n_past(f) == 0);
		CHECK(ns_fwd_eval(f, three, 2, lg, false) == 0 && ns_fwd_n_past(f) == 2);
		CHECK(ns_fwd_eval(f, three, 1, lg, false) == -ENOSPC);
		ns_fwd_reset(f);
		CHECK(ns_fwd_eval(f, three, 1, NULL, false) == 0 && ns_fwd_n_past(f) == 1);
		ns_fwd_destroy(&f);
		CHECK(f == NULL);
	}
	CHECK(ns_fwd_new(m, &wrap, &(struct ns_fwd_opts){ .n_ctx = 0 }, &f, err, sizeof(err)) ==
	      -EINVAL);
	ns_weights_destroy(&fy.inner);
	ns_model_close(&m);

	/* an architecture the forward pass does not run (a vision tower's "clip" file) */
	ns_test_oracle_path(path, sizeof(path), "hf/qwen3_vl/gguf/mmproj-qwen3_vl-f32.gguf");
	if (ns_model_open(path, &m, err, sizeof(err)) == 0 &&
	    ns_weights_ref_new(m, &fy.inner, err, sizeof(err)) == 0) {
		CHECK(ns_fwd_new(m, fy.inner, &(struct ns_fwd_opts){ .n_ctx = 4 }, &f, err,
				 sizeof(err)) == -EINVAL && f == NULL);
		printf("clip refused: %s\n", err);
	} else {
		CHECK(0);
	}
	ns_weights_destroy(&fy.inner);
	ns_model_close(&m);
	return s_fail;
}
