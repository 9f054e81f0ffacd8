/* test_run_harmony: `nsctl run` on a harmony (gpt-oss) model: a copy of tiny-gpt-oss-F32 given
 * a chat template of the harmony family (the oracle's tiny models carry none; the weights are
 * random, so the replies are noise, but deterministic under greedy sampling).
 *   - `-p` with `--system` and `--reasoning high --print-prompt`: the prompt printed is the
 *     oracle's rendering of the same messages (vocab-hf/chat/gptoss-sys_user-low.txt, Python
 *     jinja2 of the real template) with "Reasoning: high" and today's date; --json carries
 *     "content" and "reasoning";
 *   - no --reasoning: "Reasoning: medium"; --final-only runs;
 *   - `--chat`: the second turn's prompt is the oracle's rendering of the two-turn
 *     conversation (gptoss-multi-low.txt) with the first reply being exactly what stdout
 *     showed of turn 1 (the final text only, no analysis);
 *   - `nsctl tokenize --chat --reasoning high` renders the same as --reasoning-effort high;
 *   - bad usage: --reasoning with a bad value, on a model without a harmony template,
 *     --final-only without one, --raw with --reasoning: exit 2 with one line.
 * Exit 0 pass, 1 fail, 77 oracle missing. */
#include <time.h>

#include "neurostream.h"
#include "ns_util.h"
#include "rt_template.h"

#define TEMPLATE "{# harmony #}<|start|>{{ m.role }}<|channel|>{{ m.channel }}<|message|>" \
	"{{ m.content }}<|end|>"

struct s_files {
	char out[128], err[128], in[128];
};

/* Run nsctl with args (NULL-terminated) and stdin from in (NULL: /dev/null). */
static int s_nsctl(const char *nsctl, const struct s_files *f, const char *in_text,
		   const char *const *args)
{
	char *a[40];
	int n = 0;
	pid_t pid;

	a[n++] = (char *)nsctl;
	for (; *args && n < 38; args++)
		a[n++] = (char *)*args;
	a[n] = NULL;
	if (in_text) {
		FILE *fi = fopen(f->in, "w");

		RT_CHECK(fi && fputs(in_text, fi) >= 0 && fclose(fi) == 0, "stdin file");
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		if (!freopen(in_text ? f->in : "/dev/null", "r", stdin) ||
		    !freopen(f->out, "w", stdout) || !freopen(f->err, "w", stderr))
			_exit(126);
		execv(a[0], a);
		_exit(127);
	}
	return rt_wait(pid);
}

/* s with every occurrence of from replaced by to (malloc'd). */
static char *s_replace(const char *s, const char *from, const char *to)
{
	size_t fl = strlen(from), tl = strlen(to), n = 0;
	char *out, *o;

	for (const char *p = s; (p = strstr(p, from)); p += fl)
		n++;
	out = malloc(strlen(s) + n * tl + 1);
	RT_CHECK(out, "oom");
	for (o = out; *s;) {
		if (!strncmp(s, from, fl)) {
			memcpy(o, to, tl);
			o += tl;
			s += fl;
		} else {
			*o++ = *s++;
		}
	}
	*o = 0;
	return out;
}

/* The oracle rendering rel with the fixed date replaced by today's (either of two dates:
 * the day may change while the test runs) and low by effort. */
static bool s_has_rendering(const char *hay, const char *rel, const char *effort,
			    const char *day0, const char *day1, const char *reply)
{
	char path[PATH_MAX], line[64];
	size_t len;
	char *t, *a, *b, *c;
	bool ok = false;

	ns_test_oracle_path(path, sizeof(path), rel);
	t = ns_test_read_file(path, &len);
	RT_CHECK(t, "%s", path);
	snprintf(line, sizeof(line), "Reasoning: %s", effort);
	a = s_replace(t, "Reasoning: low", line);
	b = reply ? s_replace(a, "<|message|>2 + 2 = 4.<|end|>", reply) : strdup(a);
	RT_CHECK(b, "oom");
	for (int d = 0; d < 2 && !ok; d++) {
		c = s_replace(b, "Current date: 2025-08-05", d ? day1 : day0);
		ok = strstr(hay, c) != NULL;
		if (!ok && d)
			fprintf(stderr, "expected rendering not found:\n%s\n", c);
		free(c);
	}
	free(t);
	free(a);
	free(b);
	return ok;
}

static void s_today(char *buf, size_t n)
{
	time_t now = time(NULL);
	struct tm tm;

	RT_CHECK(gmtime_r(&now, &tm) && strftime(buf, n, "Current date: %Y-%m-%d", &tm), "date");
}

int main(int argc, char **argv)
{
	char src[PATH_MAX], model[128], nsctl_buf[PATH_MAX], day0[64], day1[64];
	const char *nsctl = rt_nsctl(argc, argv, nsctl_buf, sizeof(nsctl_buf));
	struct s_files f;
	size_t len;
	char *out, *err;
	int rc;

	ns_test_require_oracle();
	s_today(day0, sizeof(day0));
	ns_test_oracle_path(src, sizeof(src), "tiny/tiny-gpt-oss-F32.gguf");
	snprintf(model, sizeof(model), "/tmp/ns_run_harmony_%d.gguf", (int)getpid());
	snprintf(f.out, sizeof(f.out), "/tmp/ns_run_harmony_%d.out", (int)getpid());
	snprintf(f.err, sizeof(f.err), "/tmp/ns_run_harmony_%d.err", (int)getpid());
	snprintf(f.in, sizeof(f.in), "/tmp/ns_run_harmony_%d.in", (int)getpid());
	rt_copy_with_template(src, model, TEMPLATE);

	{ /* -p, --system, --reasoning high, --json */
		const char *args[] = { "run", model, "--system", "You are a helpful assistant.",
				       "-p", "What is the capital of France?", "--reasoning",
				       "high", "--print-prompt", "-n", "6", "--temp", "0", "-c",
				       "512", "--no-plan", "--threads", "1", "--json", NULL };
		char *j;

		rc = s_nsctl(nsctl, &f, NULL, args);
		err = ns_test_read_file(f.err, &len);
		s_today(day1, sizeof(day1));
		RT_CHECK(rc == 0 && err, "nsctl run --reasoning high: exit %d\n%s", rc,
			 err ? err : "");
		RT_CHECK(s_has_rendering(err, "vocab-hf/chat/gptoss-sys_user-low.txt", "high", day0,
					 day1, NULL), "prompt with Reasoning: high:\n%s", err);
		free(err);
		err = ns_test_read_file(f.out, &len); /* --json: the object on stdout */
		j = err ? strstr(err, "{\"session\":") : NULL;
		RT_CHECK(j == err && strstr(j, "\"content\":\"") && strstr(j, "\"reasoning\":\""),
			 "--json without content/reasoning on stdout:\n%s", err ? err : "");
		free(err);
	}
	printf("nsctl run -p --reasoning high: the oracle's rendering with Reasoning: high\n");

	for (int final_only = 0; final_only < 2; final_only++) { /* default effort */
		const char *args[] = { "run", model, "-p", "What is 2+2?", "--print-prompt", "-n",
				       "4", "--temp", "0", "-c", "512", "--no-plan", "--threads",
				       "1", final_only ? "--final-only" : "--verbose", NULL };

		rc = s_nsctl(nsctl, &f, NULL, args);
		err = ns_test_read_file(f.err, &len);
		RT_CHECK(rc == 0 && err, "nsctl run (final_only %d): exit %d\n%s", final_only, rc,
			 err ? err : "");
		RT_CHECK(strstr(err, "\n\nReasoning: medium\n\n") &&
			 strstr(err, "<|start|>user<|message|>What is 2+2?<|end|><|start|>assistant"
				"\n"), "default prompt:\n%s", err);
		RT_CHECK(!final_only || !strstr(err, "[analysis]"), "--final-only showed analysis");
		free(err);
	}
	printf("nsctl run: Reasoning: medium by default; --final-only runs\n");

	{ /* --chat: the second prompt holds turn 1's final text only */
		const char *args[] = { "run", model, "--chat", "--reasoning", "low",
				       "--print-prompt", "-n", "6", "--temp", "0", "-c", "512",
				       "--no-plan", "--threads", "1", NULL };
		const char *head = "<|start|>assistant<|channel|>final<|message|>";
		const char *tail = "<|end|><|start|>user<|message|>And multiplied by 10?";
		char *p2, *a, *b, *reply;

		rc = s_nsctl(nsctl, &f, "What is 2+2?\nAnd multiplied by 10?\n/quit\n", args);
		err = ns_test_read_file(f.err, &len);
		out = ns_test_read_file(f.out, &len);
		s_today(day1, sizeof(day1));
		RT_CHECK(rc == 0 && err && out, "nsctl run --chat: exit %d\n%s", rc, err ? err : "");
		p2 = strstr(err, "<|start|>system");
		p2 = p2 ? strstr(p2 + 1, "<|start|>system") : NULL;
		RT_CHECK(p2 && (a = strstr(p2, head)) && (b = strstr(a, tail)),
			 "no second prompt:\n%s", err);
		a += strlen(head);
		reply = strndup(a, (size_t)(b - a));
		RT_CHECK(reply, "oom");
		RT_CHECK(!strncmp(out, reply, strlen(reply)) && out[strlen(reply)] == '\n',
			 "history reply '%s' is not what stdout showed of turn 1:\n%s", reply, out);
		RT_CHECK(!strstr(p2, "<|channel|>analysis"), "analysis kept in the history");
		{
			char *msg = malloc(strlen(reply) + 32);

			RT_CHECK(msg, "oom");
			sprintf(msg, "<|message|>%s<|end|>", reply);
			RT_CHECK(s_has_rendering(p2, "vocab-hf/chat/gptoss-multi-low.txt", "low",
						 day0, day1, msg), "second prompt:\n%s", p2);
			free(msg);
		}
		free(reply);
		free(out);
		free(err);
	}
	printf("nsctl run --chat: turn 2's prompt = the oracle's rendering with turn 1's "
	       "final text\n");

	{ /* nsctl tokenize takes --reasoning as --reasoning-effort */
		const char *args[] = { "tokenize", model, "--chat", "--chat-date", "2025-08-05",
				       "--print-prompt", "--reasoning", "high", "--system",
				       "You are a helpful assistant.", "What is the capital of France?",
				       NULL };

		rc = s_nsctl(nsctl, &f, NULL, args);
		out = ns_test_read_file(f.out, &len);
		RT_CHECK(rc == 0 && out && s_has_rendering(out, "vocab-hf/chat/gptoss-sys_user-low.txt",
							   "high", "Current date: 2025-08-05",
							   "Current date: 2025-08-05", NULL),
			 "nsctl tokenize --reasoning high: exit %d\n%s", rc, out ? out : "");
		free(out);
	}
	printf("nsctl tokenize --reasoning high: the oracle's rendering with Reasoning: high\n");

	{ /* bad usage */
		const char *bad[][12] = {
			{ "run", model, "-p", "x", "--reasoning", "extreme", NULL },
			{ "run", src, "-p", "x", "--reasoning", "high", "-c", "512", "--no-plan",
			  NULL },
			{ "run", src, "-p", "x", "--final-only", "-c", "512", "--no-plan", NULL },
			{ "run", model, "-p", "x", "--raw", "--reasoning", "low", NULL },
		};

		for (size_t i = 0; i < NS_ARRAY_LEN(bad); i++) {
			char *nl;

			rc = s_nsctl(nsctl, &f, NULL, bad[i]);
			err = ns_test_read_file(f.err, &len);
			RT_CHECK(rc == 2 && err, "bad usage %zu: exit %d, want 2\n%s", i, rc,
				 err ? err : "");
			nl = strrchr(err, '\n');
			RT_CHECK(nl && nl[1] == 0 && strstr(err, "nsctl run: ") &&
				 (strstr(err, "reasoning") || strstr(err, "harmony")),
				 "bad usage %zu: message:\n%s", i, err);
			free(err);
		}
	}
	printf("nsctl run: bad --reasoning / --final-only / --raw uses exit 2\n");
	if (!getenv("NS_KEEP"))
		unlink(model);
	unlink(f.out);
	unlink(f.err);
	unlink(f.in);
	return 0;
}
