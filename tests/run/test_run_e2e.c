/* test_run_e2e: `nsctl run` as a user runs it, on stories260K.gguf: greedy, -n 32, the prompt
 * of golden/stories260K__once.json; --json's "content" on stdout must be the golden
 * greedy_text, under a memory budget far smaller than the model; the --json summary must show
 * the arena ceiling held; nothing may be left in /dev/shm or the runtime directory, and every
 * child must be gone. Also: bad usage exits 2 with one line. */
#include "run_testlib.h"

int main(int argc, char **argv)
{
	char nsctl_buf[PATH_MAX], model[PATH_MAX], path[PATH_MAX], out[128], errf[128], id[32];
	const char *nsctl = rt_nsctl(argc, argv, nsctl_buf, sizeof(nsctl_buf));
	char *json, *prompt, *want, *got, *err, *p;
	size_t len;
	unsigned long long peak = 0, budget = 0, req = 0;
	pid_t kids[3];
	int rc;

	ns_test_require_oracle();
	json = ns_test_read_file(ns_test_oracle_path(path, sizeof(path),
						     "golden/stories260K__once.json"), &len);
	RT_CHECK(json, "%s missing", path);
	prompt = rt_json_str(json, "prompt_text");
	want = rt_json_str(json, "greedy_text");
	RT_CHECK(prompt && want, "no prompt_text / greedy_text in %s", path);
	free(json);
	ns_test_oracle_path(model, sizeof(model), "models/stories260K.gguf");
	snprintf(out, sizeof(out), "/tmp/ns_run_e2e_%d.out", (int)getpid());
	snprintf(errf, sizeof(errf), "/tmp/ns_run_e2e_%d.err", (int)getpid());

	{
		char *a[] = { (char *)nsctl, "run", model, "-p", prompt, "-n", "32", "--temp", "0",
			      "--mem-budget", "64KB", "--ram-budget", "0", "--block-rows", "7",
			      "--json", NULL };
		rc = rt_run(a, out, errf);
	}
	got = ns_test_read_file(out, &len);
	err = ns_test_read_file(errf, &len);
	fprintf(stderr, "--- nsctl run stderr ---\n%s------\n", err ? err : "");
	RT_CHECK(rc == 0, "nsctl run: exit %d", rc);
	RT_CHECK(err && !strstr(err, "at shutdown") && !strstr(err, "Sanitizer"),
		 "a child did not end cleanly");
	{ /* --json: stdout is the object alone, the text in its "content" */
		char *content = got ? rt_json_str(got, "content") : NULL;

		RT_CHECK(got && got[0] == '{' && strchr(got, '\n') == got + strlen(got) - 1,
			 "--json: stdout is not one object on one line: '%s'", got ? got : "");
		RT_CHECK(content && !strcmp(content, want), "text differs:\n got: '%s'\nwant: '%s'",
			 content ? content : "", want);
		free(content);
	}
	printf("nsctl run stories260K greedy -n 32 at a 64 KiB budget: text equals the golden "
	       "greedy_text\n");
	RT_CHECK((p = strstr(got, "\"arena_peak\":")) && sscanf(p + 13, "%llu", &peak) == 1,
		 "no arena_peak in the --json summary");
	RT_CHECK((p = strstr(got, "\"arena_budget\":")) && sscanf(p + 15, "%llu", &budget) == 1,
		 "no arena_budget");
	RT_CHECK((p = strstr(got, "\"bytes_requested_decode\":")) &&
		 sscanf(p + 25, "%llu", &req) == 1, "no bytes_requested_decode");
	RT_CHECK(budget == 64 * 1024 && peak > 0 && peak <= budget, "arena peak %llu of %llu",
		 peak, budget);
	RT_CHECK(req > 10 * budget, "decode requested %llu bytes: the model was not streamed",
		 req);
	printf("arena peak %llu <= budget %llu; %llu weight bytes streamed while decoding\n", peak,
	       budget, req);
	RT_CHECK(rt_session_id(errf, id, sizeof(id)), "no session id on stderr");
	kids[0] = rt_child_pid(errf, "nsio");
	kids[1] = rt_child_pid(errf, "nscompute");
	kids[2] = rt_child_pid(errf, "nsplan");
	RT_CHECK(kids[0] > 0 && kids[1] > 0, "no child pids on stderr");
	for (int i = 0; i < 3; i++)
		RT_CHECK(!rt_pid_alive(kids[i]), "child %d still alive", (int)kids[i]);
	RT_CHECK(rt_shm_count(id) == 0, "shm segments of %s left behind", id);
	RT_CHECK(rt_rundir_count(id) == 0, "runtime dir of %s left behind", id);
	free(got);
	free(err);

	/* the same with nsio reading ahead along the per-token order */
	{
		char *a[] = { (char *)nsctl, "run", model, "-p", prompt, "-n", "32", "--temp", "0",
			      "--mem-budget", "64KB", "--run-ahead", "--no-plan", NULL };
		rc = rt_run(a, out, errf);
	}
	got = ns_test_read_file(out, &len);
	RT_CHECK(rc == 0 && got && !strncmp(got, want, strlen(want)), "--run-ahead: exit %d, "
		 "text '%s'", rc, got ? got : "");
	printf("--run-ahead: same text\n");
	free(got);

	/* bad usage: exit 2, one line */
	{
		char *a[] = { (char *)nsctl, "run", model, "--mem-budget", "lots", NULL };
		RT_CHECK(rt_run(a, out, errf) == 2, "bad --mem-budget: want exit 2");
		char *b[] = { (char *)nsctl, "run", "/nonexistent.gguf", NULL };
		RT_CHECK(rt_run(b, out, errf) == 2, "missing model: want exit 2");
		char *c[] = { (char *)nsctl, "run", model, "--backend", "tpu", NULL };
		RT_CHECK(rt_run(c, out, errf) == 2, "unknown backend: want exit 2");
		char *d[] = { (char *)nsctl, "run", model, "--mem-budget", "4KB", NULL };
		RT_CHECK(rt_run(d, out, errf) == 2, "budget below the smallest: want exit 2");
		err = ns_test_read_file(errf, &len);
		/* 5 blocks of one 688-byte row of blk.0.ffn_down, each widened to 8 KiB */
		RT_CHECK(err && strstr(err, "smallest") && strstr(err, "40960"), "no smallest "
			 "budget (40960) in '%s'", err ? err : "");
		free(err);
	}
	printf("bad usage and a too-small budget exit 2 with a message\n");
	free(prompt);
	free(want);
	unlink(out);
	unlink(errf);
	return 0;
}
