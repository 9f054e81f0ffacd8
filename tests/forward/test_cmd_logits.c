/* test_cmd_logits - `nsctl logits` end to end: the file it writes against llama.cpp's logits,
 * and exit status 2 with one error line for bad input.
 * usage: test_cmd_logits NSCTL. Exits 0 pass, 1 fail, 77 skip (no oracle). */
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ns_test.h"

extern char **environ;

static int s_fail;

/* Run argv, stdout/stderr inherited; returns the exit status or -1. */
static int s_run(char *const argv[])
{
	pid_t pid;
	int st;

	if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
		return -1;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void s_expect(int got, int want, const char *what)
{
	printf("%s: exit %d (want %d) %s\n", what, got, want, got == want ? "ok" : "FAIL");
	if (got != want)
		s_fail = 1;
}

int main(int argc, char **argv)
{
	const char *toks = "302,417,288,356,471,265,399,330,444,281,376,459"; /* tiny seqA */
	char model[1024], gold_path[1024], out[256], bad_out[256];
	char *nsctl;
	float *got, *gold;
	size_t n_got = 0, n_gold = 0;
	double d = 0.0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s NSCTL\n", argv[0]);
		return 2;
	}
	nsctl = argv[1];
	ns_test_require_oracle();
	ns_test_oracle_path(model, sizeof(model), "tiny/tiny-llama-F32.gguf");
	ns_test_oracle_path(gold_path, sizeof(gold_path), "tiny/tiny-llama-F32.seqA.f32");
	snprintf(out, sizeof(out), "/tmp/ns_test_logits_%d.f32", (int)getpid());
	snprintf(bad_out, sizeof(bad_out), "/tmp/ns_test_logits_%d_missing/x.f32", (int)getpid());

	{
		char *a[] = { nsctl, "logits", model, "--tokens", (char *)toks, "-o", out,
			      "--mem-budget", "64MB", "--ram-budget", "1GB", "--block-rows",
			      "16", "--lookahead", "2", NULL };
		s_expect(s_run(a), 0, "logits tiny-llama-F32 seqA");
	}
	got = ns_test_read_file(out, &n_got);
	gold = ns_test_read_file(gold_path, &n_gold);
	unlink(out);
	if (!got || !gold || n_got != n_gold || n_got != 12 * 512 * sizeof(float)) {
		printf("output size %zu, golden %zu: FAIL\n", n_got, n_gold);
		return 1;
	}
	for (size_t i = 0; i < n_got / sizeof(float); i++)
		d = fmax(d, isnan(got[i]) ? INFINITY : fabs((double)got[i] - gold[i]));
	/* the engine is within 2.1e-6 here; see test_forward_golden's LOGIT_TOL */
	printf("max abs diff vs llama.cpp: %.3g (tol 1e-04) %s\n", d, d <= 1e-4 ? "ok" : "FAIL");
	s_fail |= !(d <= 1e-4);
	free(got);
	free(gold);

	{
		char *a[] = { nsctl, "logits", model, "--tokens", "1,512", "-o", out, NULL };
		s_expect(s_run(a), 2, "token id out of range");
	}
	{
		char *a[] = { nsctl, "logits", model, "--tokens", "1,,2", "-o", out, NULL };
		s_expect(s_run(a), 2, "malformed token list");
	}
	{
		char *a[] = { nsctl, "logits", model, "--tokens", "1", "-o", out, "--mem-budget",
			      "lots", NULL };
		s_expect(s_run(a), 2, "bad --mem-budget");
	}
	{
		char *a[] = { nsctl, "logits", model, "--tokens", "1", "-o", out, "--lookahead",
			      "-1", NULL };
		s_expect(s_run(a), 2, "bad --lookahead");
	}
	{
		char *a[] = { nsctl, "logits", model, "--tokens", "1", NULL };
		s_expect(s_run(a), 2, "missing -o");
	}
	{
		char *a[] = { nsctl, "logits", gold_path, "--tokens", "1", "-o", out, NULL };
		s_expect(s_run(a), 2, "not a GGUF file");
	}
	{
		char *a[] = { nsctl, "logits", model, "--tokens", "1", "-o", bad_out, NULL };
		s_expect(s_run(a), 1, "unwritable output");
	}
	unlink(out);
	return s_fail;
}
