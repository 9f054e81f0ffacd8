/* test_run_signals: failures of a running `nsctl run` (stories260K, mid-generation):
 *   1. SIGINT to nsctl: exit 130, children reaped, no /dev/shm segment or runtime dir left;
 *   2. nscompute SIGKILLed: a clean error naming it (exit 1), the same cleanliness;
 *   3. nsio SIGKILLed: nsctl restarts it, the generation finishes with exactly the text of an
 *      undisturbed run. */
#include <time.h>

#include "run_testlib.h"

#define S_NSIO_KILLS 12

static char s_model[PATH_MAX], s_out[128], s_err[128];
static const char *s_nsctl;

static pid_t s_start(const char *n)
{
	char *a[] = { (char *)s_nsctl, "run", s_model, "-p", "Once upon a time", "-n", (char *)n,
		      "--ignore-eos", "--temp", "0", "--mem-budget", "64KB", "--threads", "1",
		      NULL };

	/* no stale output of the previous run may be mistaken for this one's */
	unlink(s_out);
	unlink(s_err);
	return rt_start(a, s_out, s_err);
}

/* Wait until the generated text has at least n bytes and the pids are on stderr (20 s). */
static void s_wait_text(size_t n)
{
	for (int i = 0; i < 4000; i++) {
		struct stat st;

		if (stat(s_out, &st) == 0 && (size_t)st.st_size >= n &&
		    rt_child_pid(s_err, "nscompute") > 0)
			return;
		usleep(5000);
	}
	RT_CHECK(0, "no generated text within 20 s");
}

/* Nothing of the session may remain. */
static void s_check_clean(const char *what)
{
	char id[32];
	pid_t kids[3];

	RT_CHECK(rt_session_id(s_err, id, sizeof(id)), "%s: no session id on stderr", what);
	kids[0] = rt_child_pid(s_err, "nsio");
	kids[1] = rt_child_pid(s_err, "nscompute");
	kids[2] = rt_child_pid(s_err, "nsplan");
	for (int i = 0; i < 3; i++)
		RT_CHECK(!rt_pid_alive(kids[i]), "%s: child %d still alive", what, (int)kids[i]);
	RT_CHECK(rt_shm_count(id) == 0, "%s: shm segments of %s left behind", what, id);
	RT_CHECK(rt_rundir_count(id) == 0, "%s: runtime dir of %s left behind", what, id);
	printf("%s: children gone, no shm segment or runtime dir of session %s left\n", what, id);
}

static char *s_read(const char *path)
{
	size_t len;
	char *t = ns_test_read_file(path, &len);

	return t ? t : calloc(1, 1);
}

int main(int argc, char **argv)
{
	char nsctl_buf[PATH_MAX];
	char *err, *want, *got;
	pid_t pid, victim;
	int rc;

	s_nsctl = rt_nsctl(argc, argv, nsctl_buf, sizeof(nsctl_buf));
	ns_test_require_oracle();
	ns_test_oracle_path(s_model, sizeof(s_model), "models/stories260K.gguf");
	snprintf(s_out, sizeof(s_out), "/tmp/ns_run_sig_%d.out", (int)getpid());
	snprintf(s_err, sizeof(s_err), "/tmp/ns_run_sig_%d.err", (int)getpid());

	/* 1. Ctrl-C (and, while it runs, nsctl ps lists the session with live pids) */
	pid = s_start("4000");
	s_wait_text(8);
	{
		char ps_out[128], id[32], want[64], *t;
		char *a[] = { (char *)s_nsctl, "ps", "--json", NULL };
		size_t len;

		snprintf(ps_out, sizeof(ps_out), "/tmp/ns_run_sig_%d.ps", (int)getpid());
		RT_CHECK(rt_run(a, ps_out, NULL) == 0, "nsctl ps failed");
		t = ns_test_read_file(ps_out, &len);
		RT_CHECK(rt_session_id(s_err, id, sizeof(id)), "no session id");
		snprintf(want, sizeof(want), "{\"name\":\"nscompute\",\"pid\":%d,\"alive\":true}",
			 (int)rt_child_pid(s_err, "nscompute"));
		RT_CHECK(t && strstr(t, id) && strstr(t, want) && strstr(t, "\"bytes_requested\""),
			 "nsctl ps --json does not list %s with %s:\n%s", id, want, t ? t : "");
		free(t);
		unlink(ps_out);
		printf("nsctl ps --json lists the live session, its pids and nsio's counters\n");
	}
	kill(pid, SIGINT);
	rc = rt_wait(pid);
	err = s_read(s_err);
	RT_CHECK(rc == 130, "SIGINT: exit %d, want 130; stderr:\n%s", rc, err);
	RT_CHECK(strstr(err, "interrupted"), "SIGINT: no 'interrupted' line:\n%s", err);
	free(err);
	s_check_clean("SIGINT to nsctl");

	/* 2. nscompute killed */
	pid = s_start("4000");
	s_wait_text(8);
	victim = rt_child_pid(s_err, "nscompute");
	RT_CHECK(victim > 0, "no nscompute pid");
	kill(victim, SIGKILL);
	rc = rt_wait(pid);
	err = s_read(s_err);
	RT_CHECK(rc == 1, "nscompute killed: exit %d, want 1; stderr:\n%s", rc, err);
	RT_CHECK(strstr(err, "nscompute died"), "no 'nscompute died' line:\n%s", err);
	free(err);
	s_check_clean("nscompute SIGKILLed");

	/* 3. nsio killed: restarted, same text */
	pid = s_start("160");
	RT_CHECK(rt_wait(pid) == 0, "undisturbed run failed");
	want = s_read(s_out);
	/* several times: the takeover must never wait on arena space the client's kept leases
	 * hold (a restarted nsio once waited for its RAM tier to reload before serving, and the
	 * reload needed that space; it hung about one kill in twelve) */
	for (int round = 0; round < S_NSIO_KILLS; round++) {
		pid = s_start("160");
		s_wait_text(8);
		victim = rt_child_pid(s_err, "nsio");
		RT_CHECK(victim > 0, "no nsio pid");
		kill(victim, SIGKILL);
		rc = rt_wait(pid);
		err = s_read(s_err);
		got = s_read(s_out);
		RT_CHECK(rc == 0, "nsio killed (round %d): exit %d, want 0; stderr:\n%s", round,
			 rc, err);
		RT_CHECK(strstr(err, "restarting"), "nsio killed: no restart reported (did the "
			 "generation end first?):\n%s", err);
		RT_CHECK(!strcmp(got, want), "nsio killed: text differs:\n got: %s\nwant: %s",
			 got, want);
		if (round == S_NSIO_KILLS - 1)
			printf("nsio SIGKILLed mid-generation %d times: restarted, the %zu bytes of "
			       "text are unchanged\n", S_NSIO_KILLS, strlen(got));
		free(err);
		free(got);
	}
	free(want);
	s_check_clean("nsio SIGKILLed");
	unlink(s_out);
	unlink(s_err);
	return 0;
}
