/* test_run_chat: chat through the C API and `nsctl run --chat`, on a copy of tiny-qwen3-F32
 * given a Qwen3 chat template (the oracle's tiny models carry none; the weights are random,
 * so the replies are noise, but deterministic under greedy sampling):
 *   - a second turn answers exactly as a fresh engine given the whole conversation (whether
 *     nsctl kept the shared prefix of the context or evaluated everything again);
 *   - after ns_engine_reset the first turn answers as before;
 *   - `nsctl run --chat` reads turns from stdin, honours /reset and /quit, exits 0;
 *   - a model without a chat template: ns_engine_chat is -EINVAL. */
#include "neurostream.h"
#include "rt_template.h"

#define TEMPLATE RT_QWEN3_TEMPLATE

struct s_acc {
	char text[8192];
	size_t len;
};

static int s_on_token(const char *piece, size_t len, int32_t id, void *user)
{
	struct s_acc *a = user;

	(void)id;
	if (len < sizeof(a->text) - a->len) {
		memcpy(a->text + a->len, piece, len);
		a->len += len;
		a->text[a->len] = 0;
	}
	return 0;
}

static struct ns_engine *s_load(const char *model)
{
	struct ns_engine_opts o;
	struct ns_engine *e = NULL;
	char err[512];

	ns_engine_opts_default(&o);
	o.mem_budget = 256 << 10;
	o.threads = 1;
	o.no_plan = true;
	o.n_ctx = 512;
	RT_CHECK(ns_engine_load(model, &o, &e, err, sizeof(err)) == 0, "load: %s", err);
	return e;
}

int main(int argc, char **argv)
{
	char src[PATH_MAX], model[128], out[128], errf[128], in[128], nsctl_buf[PATH_MAX];
	const char *nsctl = rt_nsctl(argc, argv, nsctl_buf, sizeof(nsctl_buf));
	struct ns_gen_params g;
	struct ns_engine *e, *f;
	struct s_acc r1 = { 0 }, r2 = { 0 }, r1b = { 0 }, r2b = { 0 }, junk = { 0 };
	int rc;

	ns_test_require_oracle();
	ns_test_oracle_path(src, sizeof(src), "tiny/tiny-qwen3-F32.gguf");
	snprintf(model, sizeof(model), "/tmp/ns_run_chat_%d.gguf", (int)getpid());
	snprintf(out, sizeof(out), "/tmp/ns_run_chat_%d.out", (int)getpid());
	snprintf(errf, sizeof(errf), "/tmp/ns_run_chat_%d.err", (int)getpid());
	snprintf(in, sizeof(in), "/tmp/ns_run_chat_%d.in", (int)getpid());
	rt_copy_with_template(src, model, TEMPLATE);

	ns_gen_params_default(&g);
	g.temperature = 0;
	g.n_predict = 12;
	e = s_load(model);
	{
		struct ns_engine_msg m1[] = { { "user", "hello there" } };

		rc = ns_engine_chat(e, m1, 1, &g, s_on_token, &r1);
		RT_CHECK(rc == 0 && r1.len, "turn 1: rc %d: %s", rc, ns_engine_error(e));
		struct ns_engine_msg m2[] = { { "user", "hello there" }, { "assistant", r1.text },
					      { "user", "and again" } };
		rc = ns_engine_chat(e, m2, 3, &g, s_on_token, &r2);
		RT_CHECK(rc == 0 && r2.len, "turn 2: rc %d: %s", rc, ns_engine_error(e));
		ns_engine_reset(e);
		rc = ns_engine_chat(e, m1, 1, &g, s_on_token, &r1b);
		RT_CHECK(rc == 0 && !strcmp(r1.text, r1b.text), "after reset: '%s' vs '%s'",
			 r1b.text, r1.text);
		f = s_load(model);
		rc = ns_engine_chat(f, m2, 3, &g, s_on_token, &r2b);
		RT_CHECK(rc == 0 && !strcmp(r2.text, r2b.text), "fresh engine, turn 2: '%s' vs '%s'",
			 r2b.text, r2.text);
		ns_engine_free(&f);
	}
	ns_engine_free(&e);
	printf("chat: turn 2 = a fresh engine's answer to the whole conversation; reset "
	       "repeats turn 1\n");

	/* a model without a template */
	ns_test_oracle_path(src, sizeof(src), "tiny/tiny-qwen3-F32.gguf");
	e = s_load(src);
	{
		struct ns_engine_msg m1[] = { { "user", "hi" } };

		RT_CHECK(ns_engine_chat(e, m1, 1, &g, s_on_token, &junk) == -EINVAL,
			 "no template: want -EINVAL");
	}
	ns_engine_free(&e);

	/* the command line */
	{
		FILE *fi = fopen(in, "w");
		char *a[] = { (char *)nsctl, "run", model, "--chat", "-n", "6", "--temp", "0",
			      "--mem-budget", "256KB", "-c", "512", "--no-plan", NULL };
		size_t len;
		char *err;
		pid_t pid;

		RT_CHECK(fi, "stdin file");
		fputs("hello there\nand again\n/reset\nhello there\n/quit\nnot read\n", fi);
		fclose(fi);
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			if (!freopen(in, "r", stdin) || !freopen(out, "w", stdout) ||
			    !freopen(errf, "w", stderr))
				_exit(126);
			execv(a[0], a);
			_exit(127);
		}
		rc = rt_wait(pid);
		err = ns_test_read_file(errf, &len);
		RT_CHECK(rc == 0, "nsctl run --chat: exit %d\n%s", rc, err ? err : "");
		RT_CHECK(err && strstr(err, "(conversation reset)"), "no reset line:\n%s", err);
		{
			int n = 0;

			for (char *p = err; (p = strstr(p, "prefill ")); p++)
				n++;
			RT_CHECK(n == 3, "%d summary lines, want 3 (three turns)", n);
		}
		free(err);
	}
	printf("nsctl run --chat: three turns, /reset, /quit\n");
	if (!getenv("NS_KEEP")) unlink(model);
	unlink(out);
	unlink(errf);
	unlink(in);
	return 0;
}
