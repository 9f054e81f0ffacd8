/* fwd_logits - a test tool: the forward pass in this process, no pipeline.
 *
 *   fwd_logits MODEL --tokens ID[,ID...] -o FILE [--provider ref|fused] [--threads N]
 *              [--act f32|q8]
 *
 * Evaluates exactly the token ids (no BOS added) as one prompt with an in-process weight
 * provider - ref: pread + dequantize + double dot products; fused: every weight in RAM, the
 * fused kernels - and writes the logits of every position as little-endian float32
 * [n_tokens][n_vocab], as `nsctl logits` does through nsio and nscompute. Tests compare the
 * two bit for bit (tests/run/test_run_logits.c). Exit 0 ok, 1 failure, 2 bad input. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "gemv.h"
#include "model.h"
#include "ns_util.h"
#include "weights.h"
#include "weights_fused.h"

struct s_opts {
	const char *model, *tokens, *out, *provider;
	int threads;
	bool act_q8;
};

static int s_opts(int argc, char **argv, struct s_opts *o)
{
	uint64_t n;

	*o = (struct s_opts){ .provider = "fused", .threads = 1 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (a[0] != '-' && !o->model) {
			o->model = a;
			continue;
		}
		if (!v)
			return fprintf(stderr, "fwd_logits: %s needs a value\n", a), -EINVAL;
		i++;
		if (!strcmp(a, "--tokens"))
			o->tokens = v;
		else if (!strcmp(a, "-o"))
			o->out = v;
		else if (!strcmp(a, "--provider") && (!strcmp(v, "ref") || !strcmp(v, "fused")))
			o->provider = v;
		else if (!strcmp(a, "--act") && (!strcmp(v, "f32") || !strcmp(v, "q8")))
			o->act_q8 = !strcmp(v, "q8");
		else if (!strcmp(a, "--threads") && !ns_parse_count(v, 1, 1024, &n))
			o->threads = (int)n;
		else
			return fprintf(stderr, "fwd_logits: bad option %s %s\n", a, v), -EINVAL;
	}
	if (!o->model || !o->tokens || !o->out)
		return fprintf(stderr, "usage: fwd_logits MODEL --tokens ID[,ID...] -o FILE "
			       "[--provider ref|fused] [--threads N] [--act f32|q8]\n"), -EINVAL;
	return 0;
}

/* "1,2,3": each a count (ns_parse_count) below 2^31; malloc'd into *ids. */
static int s_ids(const char *text, int32_t **ids, uint32_t *n)
{
	char *copy = strdup(text), *save = NULL;
	size_t cap = 1;

	for (const char *c = text; *c; c++)
		cap += *c == ',';
	*ids = malloc(cap * sizeof(**ids));
	*n = 0;
	if (!copy || !*ids || cap > UINT32_MAX)
		return free(copy), -ENOMEM;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (ns_parse_count(t, 0, INT32_MAX, &v) < 0) {
			fprintf(stderr, "fwd_logits: --tokens: bad id '%s'\n", t);
			free(copy);
			return -EINVAL;
		}
		(*ids)[(*n)++] = (int32_t)v;
	}
	free(copy);
	return *n ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	struct ns_fwd *f = NULL;
	struct s_opts o;
	char err[NS_ERR_LEN];
	int32_t *ids = NULL;
	float *logits = NULL;
	uint32_t n = 0;
	uint64_t n_out;
	FILE *out;
	int rc, status = 2;

	if (s_opts(argc, argv, &o) < 0 || s_ids(o.tokens, &ids, &n) < 0)
		goto done;
	rc = ns_model_open(o.model, &m, err, sizeof(err));
	if (rc == 0 && !strcmp(o.provider, "fused"))
		rc = ns_weights_fused_new(m, &(struct ns_weights_fused_opts){
			.n_threads = o.threads, .act = o.act_q8 ? NS_ACT_Q8 : NS_ACT_F32 }, &w, err,
			sizeof(err));
	else if (rc == 0)
		rc = ns_weights_ref_new(m, &w, err, sizeof(err));
	if (rc == 0)
		rc = ns_fwd_new(m, w, &(struct ns_fwd_opts){ .n_ctx = n }, &f, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "fwd_logits: %s\n", err);
		status = rc == -EINVAL || rc == -ENOENT ? 2 : 1;
		goto done;
	}
	status = 1;
	if (ns_mul_u64_overflow(n, ns_fwd_n_vocab(f), &n_out) || n_out > SIZE_MAX / sizeof(float) ||
	    !(logits = malloc((size_t)n_out * sizeof(float)))) {
		fprintf(stderr, "fwd_logits: no memory for %u x %u logits\n", n, ns_fwd_n_vocab(f));
		goto done;
	}
	rc = ns_fwd_eval(f, ids, n, logits, true);
	if (rc < 0) {
		fprintf(stderr, "fwd_logits: %s\n", ns_fwd_error(f));
		status = rc == -EINVAL ? 2 : 1;
		goto done;
	}
	out = fopen(o.out, "wb");
	if (out) {
		bool wrote = fwrite(logits, sizeof(float), (size_t)n_out, out) == (size_t)n_out;

		if (fclose(out) == 0 && wrote)
			status = 0;
	}
	if (status)
		fprintf(stderr, "fwd_logits: cannot write %s\n", o.out);
done:
	free(logits);
	free(ids);
	ns_fwd_destroy(&f);
	ns_weights_destroy(&w);
	ns_model_close(&m);
	return status;
}
