/* test_nsio_kill.c - failure model of the streaming path.
 *  1. nsio is killed (SIGKILL) at random points of a long streaming run by two clients and
 *     restarted on the same session: every block still equals a pread of its rows, the stream
 *     never fails, and the arena stays within its budget.
 *  2. A client process killed while holding leases (and with reads in flight): nsio returns
 *     its bytes to the arena.
 *  Nothing may be left behind: no nsio process, no segment in /dev/shm. */
#include <pthread.h>

#include "io_testlib.h"

#define N_KILLS 8
#define N_STREAMERS 2

struct streamer {
	const char *session;
	const struct iot_ref *ref;
	struct ns_ctl *ctl;
	_Atomic int *stop;
	uint64_t seed, blocks, passes;
	_Atomic uint64_t *progress;
	int failed;
};

static int s_check(void *arg, const struct ns_block *b)
{
	struct streamer *x = arg;

	if (!iot_block_ok(x->ref, b)) {
		fprintf(stderr, "tensor %u rows %llu+%llu differ from pread\n", b->tensor,
			(unsigned long long)b->row0, (unsigned long long)b->nrows);
		x->failed = 1;
		return -EIO;
	}
	x->blocks++;
	atomic_fetch_add(x->progress, 1);
	return 0;
}

static void *s_stream(void *arg)
{
	struct streamer *x = arg;
	struct ns_client_opts o = { .dead_timeout_ms = 30000 };
	struct ns_client *c;
	char err[NS_ERR_LEN];

	if (ns_client_open(x->session, &o, &c, err, sizeof(err))) {
		fprintf(stderr, "open: %s\n", err);
		x->failed = 1;
		return NULL;
	}
	/* whole passes over every tensor until the killer is done, then one more */
	while (!x->failed) {
		int last = atomic_load(x->stop);

		for (uint64_t t = 0; t < ns_client_n_tensors(c) && !x->failed; t++) {
			struct ns_client_tensor ti;
			uint64_t br = 1 + iot_rand(&x->seed) % 32;
			int rc;

			ns_client_tensor(c, t, &ti);
			rc = ns_stream_linear(c, t, 0, ti.n_rows, br, 2, s_check, x);
			if (rc) {
				fprintf(stderr, "stream tensor %llu: %s\n", (unsigned long long)t,
					strerror(-rc));
				x->failed = 1;
			}
		}
		x->passes++;
		if (last)
			break;
	}
	ns_client_close(&c);
	return NULL;
}

static void s_kill_nsio_during_stream(const char *model, const struct iot_ref *ref)
{
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	/* a shorter quarantine than the default 1 s so the streams move between kills */
	const char *extra[] = { "--lookahead", "2", "--queue-depth", "8", "--block-bytes", "16K",
				"--restart-quarantine-ms", "250", "--quiet", NULL };
	struct streamer x[N_STREAMERS];
	pthread_t th[N_STREAMERS];
	struct ns_session *s;
	struct ns_stats_snapshot st;
	char err[NS_ERR_LEN], id[NS_SESSION_ID_LEN + 1];
	_Atomic int stop = 0;
	uint64_t seed = 0xfeedull;
	_Atomic uint64_t progress = 0;
	struct iot_watchdog wd = { .progress = &progress, .stall_s = 40 };
	pid_t pid;

	p.arena_bytes = 256 << 10;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "session: %s", err);
	snprintf(id, sizeof(id), "%s", s->id);
	pid = iot_start_nsio(s, model, extra);
	iot_cleanup_register(s, pid, model);
	atomic_store(&wd.ctl, s->ctl);
	atomic_store(&wd.nsio, pid);
	IOT_CHECK(pthread_create(&wd.th, NULL, iot_watchdog_main, &wd) == 0, "watchdog");
	for (int i = 0; i < N_STREAMERS; i++) {
		x[i] = (struct streamer){ .session = s->id, .ref = ref, .ctl = s->ctl,
					  .stop = &stop, .seed = 77 + (uint64_t)i,
					  .progress = &progress };
		IOT_CHECK(pthread_create(&th[i], NULL, s_stream, &x[i]) == 0, "thread");
	}
	for (int k = 0; k < N_KILLS; k++) {
		usleep((useconds_t)(50000 + iot_rand(&seed) % 400000));
		kill(pid, SIGKILL);
		IOT_CHECK(waitpid(pid, NULL, 0) == pid, "waitpid nsio");
		usleep((useconds_t)(iot_rand(&seed) % 50000));
		pid = iot_start_nsio(s, model, extra);
		iot_cleanup_register(s, pid, model);
		atomic_store(&wd.nsio, pid);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < N_STREAMERS; i++) {
		pthread_join(th[i], NULL);
		IOT_CHECK(!x[i].failed, "streamer %d failed", i);
		IOT_CHECK(x[i].passes >= 2, "streamer %d made %llu passes", i,
			  (unsigned long long)x[i].passes);
	}
	atomic_store(&wd.stop, 1);
	pthread_join(wd.th, NULL);
	ns_stats_snapshot(s->ctl, &st);
	printf("nsio killed %d times: %llu + %llu blocks verified, %llu restarts, %llu leases "
	       "reclaimed, %llu stale requests dropped, peak %llu of %llu\n", N_KILLS,
	       (unsigned long long)x[0].blocks, (unsigned long long)x[1].blocks,
	       (unsigned long long)st.restarts, (unsigned long long)st.leases_reclaimed,
	       (unsigned long long)st.stale_dropped, (unsigned long long)st.arena_peak,
	       (unsigned long long)st.arena_bytes);
	IOT_CHECK(st.restarts == N_KILLS, "restarts %llu", (unsigned long long)st.restarts);
	IOT_CHECK(st.arena_peak <= st.arena_bytes, "arena peak over budget");
	IOT_CHECK(st.rejected == 0, "%llu records rejected", (unsigned long long)st.rejected);
	IOT_CHECK(iot_stop_nsio(pid) == 0, "nsio exit status");
	iot_cleanup_register(NULL, 0, model);
	ns_session_destroy(&s);
	IOT_CHECK(iot_shm_count(id) == 0, "segments of %s left behind", id);
}

/* Child: hold three blocks and have two more in flight, tell the parent, wait to die. */
static void s_child_client(const char *session, int fd)
{
	struct ns_client *c;
	struct ns_block b[3];
	uint64_t t[5];
	char err[NS_ERR_LEN];

	if (ns_client_open(session, NULL, &c, err, sizeof(err)))
		_exit(3);
	for (int i = 0; i < 5; i++)
		if (ns_client_request(c, 6, (uint64_t)i * 3, 3, &t[i]))
			_exit(4);
	for (int i = 0; i < 3; i++)
		if (ns_client_wait(c, t[i], &b[i]))
			_exit(5);
	if (write(fd, "x", 1) != 1)
		_exit(6);
	for (;;)
		pause();
}

static void s_kill_client(const char *model)
{
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	const char *extra[] = { "--quiet", NULL };
	struct ns_session *s;
	struct ns_stats_snapshot st;
	char err[NS_ERR_LEN], id[NS_SESSION_ID_LEN + 1], ch;
	int fds[2], w;
	pid_t pid, child;

	p.arena_bytes = 1 << 20;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "session: %s", err);
	snprintf(id, sizeof(id), "%s", s->id);
	pid = iot_start_nsio(s, model, extra);
	iot_cleanup_register(s, pid, model);
	IOT_CHECK(pipe(fds) == 0, "pipe");
	child = fork();
	IOT_CHECK(child >= 0, "fork");
	if (child == 0) {
		close(fds[0]);
		s_child_client(s->id, fds[1]);
	}
	close(fds[1]);
	IOT_CHECK(read(fds[0], &ch, 1) == 1, "client child failed before holding its blocks");
	close(fds[0]);
	ns_stats_snapshot(s->ctl, &st);
	IOT_CHECK(st.arena_reserved >= 3 * 3 * 8192, "child holds only %llu bytes",
		  (unsigned long long)st.arena_reserved);
	printf("client holds %llu arena bytes; killing it\n",
	       (unsigned long long)st.arena_reserved);
	kill(child, SIGKILL);
	IOT_CHECK(waitpid(child, NULL, 0) == child, "waitpid child");
	for (w = 0; w < 300; w++) {
		ns_stats_snapshot(s->ctl, &st);
		if (st.arena_reserved == 0 && st.live_leases == 0)
			break;
		usleep(10000);
	}
	IOT_CHECK(w < 300, "dead client's %llu bytes never returned",
		  (unsigned long long)st.arena_reserved);
	printf("dead client's leases returned after ~%d ms (%llu reclaimed)\n", w * 10,
	       (unsigned long long)st.leases_reclaimed);
	/* the slot is free again: a new client can use the whole arena */
	{
		struct ns_client *c;
		uint64_t t;
		struct ns_block b;

		IOT_CHECK(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "open: %s", err);
		IOT_CHECK(ns_client_request(c, 6, 0, 100, &t) == 0, "request");
		IOT_CHECK(ns_client_wait(c, t, &b) == 0, "wait");
		IOT_CHECK(ns_client_retire(c, &b) == 0, "retire");
		ns_client_close(&c);
	}
	IOT_CHECK(iot_stop_nsio(pid) == 0, "nsio exit status");
	iot_cleanup_register(NULL, 0, model);
	ns_session_destroy(&s);
	IOT_CHECK(iot_shm_count(id) == 0, "segments of %s left behind", id);
}

int main(void)
{
	char model[4096];
	struct iot_ref ref;

	signal(SIGPIPE, SIG_IGN);
	iot_scratch(model, sizeof(model), "kill");
	iot_write_model(model, iot_small_model, NS_ARRAY_LEN(iot_small_model), 1);
	iot_cleanup_register(NULL, 0, model);
	iot_ref_open(&ref, model);
	s_kill_client(model);
	s_kill_nsio_during_stream(model, &ref);
	iot_ref_close(&ref);
	unlink(model);
	return 0;
}
