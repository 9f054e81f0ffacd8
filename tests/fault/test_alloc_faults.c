/* test_alloc_faults - every allocation of a short job made to fail in turn.
 *
 *   test_alloc_faults [JOB [N]]   JOB: model, tokenizer, forward, sampler (default: all);
 *                                 N: only that allocation (NS_ALLOC_FAULT_TRACE=1 prints its
 *                                 stack: run from the build dir with -rdynamic names)
 *
 * For each job (open a model and close it; build a tokenizer, encode, decode, stream-decode;
 * open + weights + forward pass + 4-token prefill + 2 decode steps with 2 threads; a sampler
 * chain) the allocations of a clean run are counted, then for every N from 1 to that count a
 * child process runs the job with the N-th allocation failing. The child must end by itself
 * (no signal, within 30 s) with either
 *   - a clean failure: a negative errno and a one-line message, or
 *   - a success whose output (logits, ids, text, token) equals the clean run's bit for bit
 *     (a failure the code recovered from, e.g. a smaller thread pool),
 * and in both cases with every block it allocated freed (the live-block count back where it
 * started: no leak). Exits 0 pass, 1 fail, 77 skip (no oracle, CI unset).
 * Not under the sanitizers (they own malloc; their run has the provider-call sweep). */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc_fault.h"
#include "forward.h"
#include "gguf.h"
#include "model.h"
#include "ns_test.h"
#include "ns_util.h"
#include "sampling.h"
#include "tokenizer.h"
#include "weights_fused.h"

/* What one run of a job produced: a digest of its output (compared with the clean run's when
 * it succeeds) and, when it failed, its message. */
struct s_result {
	int rc;          /* 0 or a negative errno */
	uint64_t digest; /* FNV-1a over the outputs; meaningful when rc == 0 */
	char err[NS_ERR_LEN];
};

static uint64_t s_fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

#define FNV0 0xcbf29ce484222325ull

static char s_model_path[4096];

static void s_job_model(struct s_result *r)
{
	struct ns_model *m = NULL;

	r->rc = ns_model_open(s_model_path, &m, r->err, sizeof(r->err));
	if (r->rc == 0) {
		r->digest = s_fnv(FNV0, &m->n_tensors, sizeof(m->n_tensors));
		r->digest = s_fnv(r->digest, &m->total_tensor_bytes, sizeof(m->total_tensor_bytes));
		ns_model_close(&m);
	}
}

static void s_job_tokenizer(struct s_result *r)
{
	static const char text[] = "Once upon a time, there was a little girl named Lily. "
				   "She liked to play outside!";
	struct ns_model *m = NULL;
	struct ns_tok *t = NULL;
	struct ns_detok *d = NULL;
	int32_t *ids = NULL;
	char *out = NULL;
	size_t n = 0, len = 0;

	r->rc = ns_model_open(s_model_path, &m, r->err, sizeof(r->err));
	if (r->rc < 0)
		return;
	t = ns_tok_new(m->shards[0], r->err, sizeof(r->err));
	if (!t) {
		r->rc = -EINVAL;
		goto out;
	}
	r->rc = ns_tok_encode(t, text, sizeof(text) - 1, true, false, &ids, &n);
	if (r->rc < 0) {
		snprintf(r->err, sizeof(r->err), "encode: %s", strerror(-r->rc));
		goto out;
	}
	r->rc = ns_tok_detokenize(t, ids, n, true, false, &out, &len);
	if (r->rc < 0) {
		snprintf(r->err, sizeof(r->err), "detokenize: %s", strerror(-r->rc));
		goto out;
	}
	r->digest = s_fnv(s_fnv(FNV0, ids, n * sizeof(*ids)), out, len);
	d = ns_detok_new(t, false, true);
	if (!d) {
		r->rc = -ENOMEM;
		snprintf(r->err, sizeof(r->err), "stream decoder: out of memory");
		goto out;
	}
	for (size_t i = 0; i <= n && r->rc == 0; i++) {
		const char *piece;
		size_t plen;

		r->rc = i < n ? ns_detok_feed(d, ids[i], &piece, &plen)
			      : ns_detok_flush(d, &piece, &plen);
		if (r->rc < 0)
			snprintf(r->err, sizeof(r->err), "stream decode: %s", strerror(-r->rc));
		else
			r->digest = s_fnv(r->digest, piece, plen);
	}
out:
	ns_detok_destroy(&d);
	free(out);
	free(ids);
	ns_tok_destroy(&t);
	ns_model_close(&m);
}

static void s_job_forward(struct s_result *r)
{
	const int32_t toks[4] = { 1, 403, 407, 261 };
	const struct ns_weights_fused_opts wo = { .n_threads = 2 };
	struct ns_fwd_opts fo = { .n_ctx = 8, .n_batch = 3 };
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	struct ns_fwd *f = NULL;
	float logits[512];
	int32_t next = 5;

	r->rc = ns_model_open(s_model_path, &m, r->err, sizeof(r->err));
	if (r->rc < 0)
		return;
	r->rc = ns_weights_fused_new(m, &wo, &w, r->err, sizeof(r->err));
	if (r->rc == 0)
		r->rc = ns_fwd_new(m, w, &fo, &f, r->err, sizeof(r->err));
	r->digest = FNV0;
	for (int step = 0; step < 3 && r->rc == 0; step++) {
		r->rc = step == 0 ? ns_fwd_eval(f, toks, 4, logits, false)
				  : ns_fwd_eval(f, &next, 1, logits, false);
		if (r->rc < 0)
			snprintf(r->err, sizeof(r->err), "%s", ns_fwd_error(f));
		else
			r->digest = s_fnv(r->digest, logits, sizeof(logits));
	}
	ns_fwd_destroy(&f);
	ns_weights_destroy(&w);
	ns_model_close(&m);
}

static void s_job_sampler(struct s_result *r)
{
	struct ns_sampler_params p;
	struct ns_sampler *s = NULL;
	float logits[512];

	ns_sampler_params_default(&p);
	p.temperature = 0.8f;
	p.top_k = 40;
	p.top_p = 0.9f;
	p.seed = 7;
	p.repeat_penalty = 1.1f; /* the history buffer too */
	for (int i = 0; i < 512; i++)
		logits[i] = (float)((i * 7919) % 512) / 64.0f;
	r->rc = ns_sampler_new(&p, 512, &s);
	if (r->rc < 0) {
		snprintf(r->err, sizeof(r->err), "sampler: %s", strerror(-r->rc));
		return;
	}
	r->digest = FNV0;
	for (int i = 0; i < 4; i++) {
		int32_t t = ns_sampler_sample(s, logits);

		if (t < 0) {
			r->rc = t;
			snprintf(r->err, sizeof(r->err), "sample: %s", strerror(-t));
			break;
		}
		ns_sampler_accept(s, t);
		r->digest = s_fnv(r->digest, &t, sizeof(t));
	}
	ns_sampler_destroy(&s);
}

struct s_job {
	const char *name;
	void (*run)(struct s_result *r);
};

static const struct s_job s_jobs[] = {
	{ "model", s_job_model },
	{ "tokenizer", s_job_tokenizer },
	{ "forward", s_job_forward },
	{ "sampler", s_job_sampler },
};

/* The job with the n-th allocation failing, in a child. Returns 0 when the child's ending
 * satisfied the contract, 1 otherwise (with a line on stderr). */
static int s_try(const struct s_job *j, long n, const struct s_result *clean)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		struct s_result r = { 0 };
		long live0 = ns_alloc_fault_live();
		long live1;

		alarm(30);
		ns_alloc_fault_arm(n);
		j->run(&r);
		ns_alloc_fault_arm(0);
		live1 = ns_alloc_fault_live();
		if (live1 != live0) {
			fprintf(stderr, "%s, allocation %ld failing: %ld block(s) leaked (rc %d)\n",
				j->name, n, live1 - live0, r.rc);
			_exit(1);
		}
		if (r.rc == 0 && r.digest != clean->digest) {
			fprintf(stderr, "%s, allocation %ld failing: succeeded with a different "
				"output\n", j->name, n);
			_exit(1);
		}
		if (r.rc < 0 && (!r.err[0] || strchr(r.err, '\n'))) {
			fprintf(stderr, "%s, allocation %ld failing: rc %d without a one-line "
				"message ('%s')\n", j->name, n, r.rc, r.err);
			_exit(1);
		}
		_exit(r.rc < 0 ? 3 : 2); /* 3: failed cleanly, 2: recovered */
	}
	if (waitpid(pid, &status, 0) < 0) {
		perror("waitpid");
		return 1;
	}
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "%s, allocation %ld failing: killed by signal %d%s\n", j->name, n,
			WTERMSIG(status), WTERMSIG(status) == SIGALRM ? " (hung 30 s)" : "");
		return 1;
	}
	return WEXITSTATUS(status) == 1 ? 1 : 0;
}

static int s_sweep(const struct s_job *j, long only)
{
	struct s_result warm = { 0 }, clean = { 0 };
	long live0, total, bad = 0;

	/* once to let libc set up what it keeps for the process (a finished thread's cached
	 * stack and TLS, stdio buffers), then the counted run */
	j->run(&warm);
	live0 = ns_alloc_fault_live();
	ns_alloc_fault_arm(0);
	j->run(&clean);
	total = ns_alloc_fault_calls();
	if (clean.rc < 0) {
		fprintf(stderr, "%s: the clean run failed: %s\n", j->name, clean.err);
		return 1;
	}
	if (ns_alloc_fault_live() != live0) {
		fprintf(stderr, "%s: the clean run leaked %ld block(s)\n", j->name,
			ns_alloc_fault_live() - live0);
		return 1;
	}
	if (total < 2) {
		fprintf(stderr, "%s: only %ld allocations counted: the hook is not in place\n",
			j->name, total);
		return 1;
	}
	for (long n = only ? only : 1; n <= (only ? only : total); n++)
		bad += s_try(j, n, &clean);
	printf("%s: %ld allocations, each failed in turn: %ld broke the contract\n", j->name,
	       total, bad);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	int fails = 0;
	bool any = false;

	ns_test_require_oracle();
	ns_test_oracle_path(s_model_path, sizeof(s_model_path), "models/stories260K.gguf");
	for (size_t i = 0; i < sizeof(s_jobs) / sizeof(s_jobs[0]); i++) {
		if (argc > 1 && strcmp(argv[1], s_jobs[i].name))
			continue;
		any = true;
		fails += s_sweep(&s_jobs[i], argc > 2 ? atol(argv[2]) : 0);
	}
	if (!any) {
		fprintf(stderr, "usage: test_alloc_faults [model|tokenizer|forward|sampler [N]]\n");
		return 2;
	}
	return fails ? 1 : 0;
}
