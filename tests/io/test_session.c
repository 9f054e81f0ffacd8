/* test_session.c - session segments: names, O_EXCL, mode 0600, header checks, teardown, the
 * stale sweep of a dead owner's segments, and the SPSC ring across a fork. */
#include <sys/stat.h>

#include "io_testlib.h"
#include "layout.h"
#include "ring.h"

static void s_basic(void)
{
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	struct ns_session *s, *a, *dup;
	char err[NS_ERR_LEN], name[NS_SEG_NAME_LEN], path[300], id[NS_SESSION_ID_LEN + 1];
	struct stat st;

	p.arena_bytes = (1 << 20) + 100; /* rounded down to the alignment */
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "create: %s", err);
	snprintf(id, sizeof(id), "%s", s->id);
	IOT_CHECK(strlen(id) == NS_SESSION_ID_LEN, "random id length");
	IOT_CHECK(s->ctl->arena_bytes == 1 << 20, "arena rounding");
	IOT_CHECK(iot_shm_count(id) == 2, "two segments");
	ns_seg_name(name, sizeof(name), id, "ctl", err, sizeof(err));
	snprintf(path, sizeof(path), "/dev/shm%s", name);
	IOT_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "mode 0600");
	IOT_CHECK(stat(s->rundir, &st) == 0 && (st.st_mode & 0777) == 0700, "rundir 0700");
	{
		/* every other segment's name carries the control segment's random key: not
		 * derivable from the session id another user can see */
		char arena[NS_SEG_NAME_LEN], apath[300];

		IOT_CHECK(ns_seg_name(arena, sizeof(arena), id, "arena", err, sizeof(err)) == 0,
			  "arena name: %s", err);
		IOT_CHECK(strlen(arena) == strlen(name) - 4 + 1 + NS_SEG_KEY_LEN + 6 &&
			  strstr(arena, s->ctl->hdr.key) && !strstr(arena, "--"),
			  "keyed arena name %s (key %s)", arena, s->ctl->hdr.key);
		snprintf(apath, sizeof(apath), "/dev/shm%s", arena);
		IOT_CHECK(stat(apath, &st) == 0 && (st.st_mode & 0777) == 0600, "arena mode 0600");
		/* a segment of ours with a wider mode is refused when opened */
		IOT_CHECK(chmod(apath, 0644) == 0, "chmod");
		IOT_CHECK(ns_session_attach(id, false, &a, err, sizeof(err)) == -EPERM &&
			  strstr(err, "mode 0644") && strstr(err, "refusing"),
			  "mode 0644 refused: %s", err);
		IOT_CHECK(chmod(apath, 0600) == 0, "chmod back");
	}
	if (geteuid() == 0) {
		/* as root, another uid: its "plan" under the session's real (keyed) name is
		 * refused when opened, by owner, and nsplan's create path refuses it too */
		char plan[NS_SEG_NAME_LEN], ppath[300];
		struct ns_seg other;
		pid_t pid;
		int st2;

		IOT_CHECK(ns_seg_name(plan, sizeof(plan), id, "plan", err, sizeof(err)) == 0,
			  "plan name: %s", err);
		snprintf(ppath, sizeof(ppath), "/dev/shm%s", plan);
		pid = fork();
		if (pid == 0) {
			int fd;

			if (setgid(65534) || setuid(65534))
				_exit(2);
			fd = open(ppath, O_CREAT | O_EXCL | O_RDWR, 0666);
			_exit(fd >= 0 && fchmod(fd, 0666) == 0 && ftruncate(fd, 4096) == 0 ? 0 : 1);
		}
		IOT_CHECK(pid > 0 && waitpid(pid, &st2, 0) == pid && WIFEXITED(st2) &&
			  WEXITSTATUS(st2) == 0, "plant as uid 65534");
		IOT_CHECK(ns_seg_open(&other, id, "plan", 3, false, err, sizeof(err)) == -EPERM &&
			  strstr(err, "uid 65534"), "another uid's segment refused: %s", err);
		IOT_CHECK(ns_seg_create(&other, id, "plan", 3, 4096, err, sizeof(err)) == -EPERM &&
			  strstr(err, "uid 65534"), "create over another uid's: %s", err);
		IOT_CHECK(unlink(ppath) == 0, "remove the plant");
	}
	/* O_EXCL: the same id cannot be created twice */
	p.id = id;
	IOT_CHECK(ns_session_create(&p, &dup, err, sizeof(err)) == -EEXIST, "O_EXCL");
	IOT_CHECK(iot_shm_count(id) == 2, "failed create removed the original");
	/* attach sees the same memory; arena read-only */
	IOT_CHECK(ns_session_attach(id, false, &a, err, sizeof(err)) == 0, "attach: %s", err);
	s->arena[12345] = 0x5a;
	IOT_CHECK(a->arena[12345] == 0x5a && a->ctl->arena_bytes == 1 << 20, "shared view");
	/* a corrupted header is refused with a clear error */
	s->ctl->hdr.layout_version = 99;
	ns_session_destroy(&a);
	IOT_CHECK(ns_session_attach(id, false, &a, err, sizeof(err)) == -EPROTO &&
		  strstr(err, "layout version"), "version mismatch: %s", err);
	s->ctl->hdr.layout_version = NS_SEG_LAYOUT_VERSION;
	s->ctl->hdr.magic ^= 1;
	IOT_CHECK(ns_session_attach(id, false, &a, err, sizeof(err)) == -EPROTO &&
		  strstr(err, "magic"), "magic mismatch: %s", err);
	s->ctl->hdr.magic ^= 1;
	s->ctl->ring_slots = 7;
	IOT_CHECK(ns_session_attach(id, false, &a, err, sizeof(err)) == -EPROTO, "geometry");
	s->ctl->ring_slots = 256;
	IOT_CHECK(ns_session_attach("nope", false, &a, err, sizeof(err)) == -ENOENT, "absent");
	IOT_CHECK(ns_session_attach("../etc", false, &a, err, sizeof(err)) == -EINVAL, "bad id");
	{
		char rundir[PATH_MAX + 16];
		struct ns_seg other;

		snprintf(rundir, sizeof(rundir), "%s/ctl.ipc", s->rundir);
		IOT_CHECK(close(open(rundir, O_CREAT | O_WRONLY, 0600)) == 0, "endpoint file");
		/* a segment another module added to the session goes too */
		IOT_CHECK(ns_seg_create(&other, id, "plan", 77, 4096, err, sizeof(err)) == 0,
			  "extra segment: %s", err);
		ns_seg_unmap(&other);
		snprintf(rundir, sizeof(rundir), "%s", s->rundir);
		ns_session_destroy(&s);
		IOT_CHECK(stat(rundir, &st) != 0, "runtime dir left behind");
	}
	IOT_CHECK(iot_shm_count(id) == 0, "teardown unlinks");
	IOT_CHECK(stat(path, &st) != 0, "gone");
	/* bad parameters */
	p = (struct ns_session_params)NS_SESSION_PARAMS_DEFAULT;
	p.arena_bytes = 100;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == -EINVAL, "tiny budget");
	p.arena_bytes = 1 << 20;
	p.ring_slots = 100;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == -EINVAL, "ring slots");
}

/* A child creates a session and dies without teardown; the next create sweeps it. */
static void s_stale(void)
{
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	struct ns_session *s;
	char err[NS_ERR_LEN];
	pid_t pid;

	p.arena_bytes = 1 << 16;
	p.id = "staletest";
	ns_session_unlink("staletest");
	pid = fork();
	if (pid == 0) {
		struct ns_session *c;
		_exit(ns_session_create(&p, &c, err, sizeof(err)) == 0 ? 0 : 1);
	}
	IOT_CHECK(pid > 0 && waitpid(pid, NULL, 0) == pid, "child");
	IOT_CHECK(iot_shm_count("staletest") == 2, "child's segments exist");
	p.id = NULL;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "create: %s", err);
	IOT_CHECK(iot_shm_count("staletest") == 0, "stale segments swept");
	IOT_CHECK(iot_shm_count(s->id) == 2, "live session kept");
	IOT_CHECK(ns_session_sweep() == 0, "a live owner's session is not stale");
	ns_session_destroy(&s);
}

/* Stronger than a pid: the creator is gone but another process of the session still holds
 * it, so it is alive (not swept); once the holder is gone too, it is dead and swept, whatever
 * the pid would say. */
static void s_held(void)
{
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	struct ns_session *s, *h;
	char err[NS_ERR_LEN];
	int up[2], down[2]; /* holder -> test, test -> holder */
	pid_t owner, holder;
	char c;

	p.arena_bytes = 1 << 16;
	p.id = "heldtest";
	ns_session_unlink("heldtest");
	IOT_CHECK(pipe(up) == 0 && pipe(down) == 0, "pipe");
	owner = fork();
	if (owner == 0) {
		struct ns_session *o;

		if (ns_session_create(&p, &o, err, sizeof(err)))
			_exit(1);
		holder = fork(); /* an attached process that outlives the creator */
		if (holder == 0) {
			if (ns_session_attach("heldtest", false, &h, err, sizeof(err)))
				_exit(1);
			IOT_CHECK(write(up[1], "a", 1) == 1, "write");
			IOT_CHECK(read(down[0], &c, 1) == 1, "read"); /* until the test says */
			_exit(0);
		}
		_exit(0); /* the creator dies without teardown, the holder lives on */
	}
	IOT_CHECK(owner > 0 && waitpid(owner, NULL, 0) == owner, "creator");
	IOT_CHECK(read(up[0], &c, 1) == 1, "holder attached");
	IOT_CHECK(ns_session_probe("heldtest") == 1, "held session is alive");
	p.id = NULL;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "create: %s", err);
	IOT_CHECK(iot_shm_count("heldtest") == 2, "a held session is not swept");
	ns_session_destroy(&s);
	IOT_CHECK(write(down[1], "b", 1) == 1, "release holder");
	for (int i = 0; i < 200 && ns_session_probe("heldtest") != 0; i++)
		usleep(10000);
	IOT_CHECK(ns_session_probe("heldtest") == 0, "no holder left: dead");
	IOT_CHECK(ns_session_sweep() >= 1 && iot_shm_count("heldtest") == 0 &&
		  ns_session_probe("heldtest") == -ENOENT, "dead session swept");
	for (int i = 0; i < 2; i++) {
		close(up[i]);
		close(down[i]);
	}
}

/* Producer child, consumer parent, through the shared request ring, with futex waits. */
static void s_ring_fork(void)
{
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	struct ns_session *s;
	struct ns_client_slot *cs;
	char err[NS_ERR_LEN];
	const uint64_t N = 200000;
	pid_t pid;

	p.arena_bytes = 1 << 16;
	p.ring_slots = 8;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "create: %s", err);
	cs = ns_ctl_client(s->ctl, 3);
	pid = fork();
	if (pid == 0) {
		for (uint64_t i = 0; i < N; i++) {
			struct ns_ring_rec r;
			memcpy(r.b, &i, 8);
			while (!ns_ring_push(ns_slot_req(s->ctl, cs), 8, &cs->req_head,
					     &cs->req_tail, &r))
				ns_futex_wait(&cs->req_head, atomic_load(&cs->req_head), 1000000);
			ns_futex_wake(&cs->req_tail, 1);
		}
		_exit(0);
	}
	for (uint64_t i = 0; i < N; i++) {
		struct ns_ring_rec r;
		uint64_t v;

		while (!ns_ring_pop(ns_slot_req(s->ctl, cs), 8, &cs->req_head, &cs->req_tail, &r))
			ns_futex_wait(&cs->req_tail, atomic_load(&cs->req_tail), 1000000);
		ns_futex_wake(&cs->req_head, 1);
		memcpy(&v, r.b, 8);
		IOT_CHECK(v == i, "ring order: got %llu want %llu", (unsigned long long)v,
			  (unsigned long long)i);
	}
	IOT_CHECK(waitpid(pid, NULL, 0) == pid, "producer");
	/* a corrupt peer position is refused, not trusted */
	atomic_store(&cs->req_tail, atomic_load(&cs->req_head) + 1000);
	{
		struct ns_ring_rec r;
		IOT_CHECK(!ns_ring_pop(ns_slot_req(s->ctl, cs), 8, &cs->req_head, &cs->req_tail, &r),
			  "inconsistent ring accepted");
	}
	ns_session_destroy(&s);
}

int main(void)
{
	s_basic();
	s_stale();
	s_held();
	s_ring_fork();
	printf("ok\n");
	return 0;
}
