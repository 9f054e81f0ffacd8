/* io_testlib.h - helpers for the nsio tests (header-only): synthetic GGUF models, sessions
 * with a spawned nsio, reference preads, and the leak check of /dev/shm. */
#ifndef NS_IO_TESTLIB_H
#define NS_IO_TESTLIB_H

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "ggml_type.h"
#include "gguf_write.h"
#include "model.h"
#include "ns_util.h"
#include "seg.h"
#include "layout.h"
#include "session.h"
#include "ns_test.h"

#define IOT_FAIL(...) NS_FAIL(__VA_ARGS__)
#define IOT_CHECK(cond, ...) NS_REQUIRE(cond, __VA_ARGS__)

/* Deterministic bytes: byte at tensor offset off of tensor seed. */
static inline uint8_t iot_byte(uint64_t seed, uint64_t off)
{
	uint64_t x = (off / 8) * 0x9e3779b97f4a7c15ull + seed * 0xbf58476d1ce4e5b9ull;
	x ^= x >> 31;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 29;
	return (uint8_t)(x >> ((off % 8) * 8));
}

static inline int iot_fill(void *ctx, uint64_t off, void *dst, size_t n)
{
	uint64_t seed = (uint64_t)(uintptr_t)ctx;
	uint8_t *d = dst;

	for (size_t i = 0; i < n; i++)
		d[i] = iot_byte(seed, off + i);
	return 0;
}

struct iot_tensor_spec {
	uint32_t type;
	uint64_t ne0, ne1;
};

/* Write a model of the given tensors ("t0.weight", ...) to path. scale multiplies ne1. */
static inline void iot_write_model(const char *path, const struct iot_tensor_spec *spec,
				   size_t n, uint64_t scale)
{
	struct ns_gguf_writer *w = ns_gguf_writer_new(32);
	char err[NS_ERR_LEN], name[64];

	IOT_CHECK(w, "writer");
	ns_gguf_writer_set_str(w, "general.architecture", "llama");
	for (size_t i = 0; i < n; i++) {
		uint64_t ne[2] = { spec[i].ne0, spec[i].ne1 * scale };
		snprintf(name, sizeof(name), "t%zu.weight", i);
		IOT_CHECK(ns_gguf_writer_add_tensor_lazy(w, name, spec[i].type, 2, ne, iot_fill,
							 (void *)(uintptr_t)(i + 1)) == 0,
			  "add tensor %zu", i);
	}
	IOT_CHECK(ns_gguf_writer_write_file(w, path, err, sizeof(err)) == 0, "write %s: %s", path,
		  err);
	ns_gguf_writer_destroy(&w);
}

/* A varied small model: odd row sizes (misaligned rows), several types, 1 to 700 rows. */
static const struct iot_tensor_spec iot_small_model[] = {
	{ NS_TYPE_F32, 64, 3 },       /* 256 B rows */
	{ NS_TYPE_Q4_0, 96, 301 },    /* 54 B rows */
	{ NS_TYPE_Q8_0, 4096, 97 },   /* 4352 B rows: rows straddle pages */
	{ NS_TYPE_F16, 1000, 129 },   /* 2000 B rows */
	{ NS_TYPE_F32, 1, 1 },        /* one 4-byte row */
	{ NS_TYPE_Q4_0, 11008, 40 },  /* 6192 B rows */
	{ NS_TYPE_F32, 2048, 700 },   /* 8192 B rows, aligned */
	{ NS_TYPE_Q8_0, 32, 513 },    /* 34 B rows */
	{ NS_TYPE_F16, 5120, 33 },    /* 10240 B rows */
};

/* Path for a scratch file next to the build (never tmpfs unless the build is). */
static inline void iot_scratch(char *buf, size_t n, const char *what)
{
	const char *root = getenv("NS_BUILD_ROOT");

	snprintf(buf, n, "%s/tests/io/%s-%d.gguf", root && *root ? root : ".", what, (int)getpid());
}

struct iot_ref {
	int fd;
	struct ns_model *m;
};

static inline void iot_ref_open(struct iot_ref *r, const char *path)
{
	char err[NS_ERR_LEN];

	IOT_CHECK(ns_model_open(path, &r->m, err, sizeof(err)) == 0, "model: %s", err);
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	IOT_CHECK(r->fd >= 0, "open %s", path);
}

static inline void iot_ref_close(struct iot_ref *r)
{
	close(r->fd);
	ns_model_close(&r->m);
}

/* Compare a block with a plain pread of the same rows. Returns true if equal. */
static inline bool iot_block_ok(const struct iot_ref *r, const struct ns_block *b)
{
	const struct ns_model_tensor *t = &r->m->tensors[b->tensor];
	uint64_t n = b->nrows * t->row_bytes;
	uint8_t *buf;
	bool ok;

	if (b->nbytes != n)
		return false;
	buf = malloc(n ? n : 1);
	if (!buf)
		return false;
	ok = pread(r->fd, buf, n, (off_t)(t->file_offset + b->row0 * t->row_bytes)) == (ssize_t)n &&
	     memcmp(buf, b->data, n) == 0;
	free(buf);
	return ok;
}

/* Start nsio on a session; waits until it serves. Exits the test on failure. */
static inline pid_t iot_start_nsio(struct ns_session *s, const char *model,
				   const char *const *extra)
{
	char path[4096];
	pid_t pid;
	int st = 0, rc;
	uint32_t gen = atomic_load(&s->ctl->nsio_gen);

	rc = ns_nsio_spawn(ns_nsio_path(path, sizeof(path)), s->id, model, extra, &pid);
	IOT_CHECK(rc == 0, "spawn %s: %s", path, strerror(-rc));
	rc = ns_nsio_wait_running(s->ctl, pid, gen, 20000, &st);
	IOT_CHECK(rc == 0, "nsio did not start (%s, status %d)", strerror(-rc), st);
	return pid;
}

/* Run nsio with args (NULL-terminated), its stdout and stderr into out; its exit status. */
static inline int iot_run_nsio(const char *const *args, char *out, size_t n)
{
	char path[4096];
	const char *argv[32];
	int fds[2], st;
	size_t k = 0, got = 0;
	ssize_t r;
	pid_t pid;

	argv[k++] = ns_nsio_path(path, sizeof(path));
	for (size_t i = 0; args[i]; i++)
		argv[k++] = args[i];
	argv[k] = NULL;
	IOT_CHECK(pipe(fds) == 0, "pipe");
	pid = fork();
	IOT_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		dup2(fds[1], 2);
		dup2(fds[1], 1);
		close(fds[0]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	while (got + 1 < n && (r = read(fds[0], out + got, n - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = '\0';
	close(fds[0]);
	IOT_CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline int iot_stop_nsio(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Number of /dev/shm entries of a session. */
static inline int iot_shm_count(const char *id)
{
	char user[32], pre[96];
	struct dirent *de;
	DIR *d = opendir("/dev/shm");
	int n = 0;

	if (!d)
		return 0;
	ns_seg_user(user, sizeof(user));
	snprintf(pre, sizeof(pre), "ns-%s-%s-", user, id);
	while ((de = readdir(d)))
		if (strncmp(de->d_name, pre, strlen(pre)) == 0)
			n++;
	closedir(d);
	return n;
}

/* On a failing exit: stop the registered nsio, unlink the session and the model file, so a
 * failed test leaves no process, segment or scratch file behind. */
struct iot_cleanup {
	pid_t pid;
	char session[NS_SESSION_ID_LEN + 1];
	char model[4096];
	char extra_file[4096]; /* a second scratch file (iot_cleanup_file) */
	bool armed;
};
static struct iot_cleanup iot_cleanup_state;

static inline void iot_cleanup_run(void)
{
	struct iot_cleanup *c = &iot_cleanup_state;

	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
	}
	if (c->session[0])
		ns_session_unlink(c->session);
	if (c->model[0])
		unlink(c->model);
	if (c->extra_file[0])
		unlink(c->extra_file);
}

static inline void iot_cleanup_file(const char *path)
{
	snprintf(iot_cleanup_state.extra_file, sizeof(iot_cleanup_state.extra_file), "%s",
		 path ? path : "");
}

static inline void iot_cleanup_signal(int sig)
{
	iot_cleanup_run(); /* dying anyway (meson's timeout): leave nothing behind */
	signal(sig, SIG_DFL);
	raise(sig);
}

/* s == NULL: the session is gone (keeps the model for the final cleanup). */
static inline void iot_cleanup_register(struct ns_session *s, pid_t pid, const char *model)
{
	struct iot_cleanup *c = &iot_cleanup_state;

	if (!c->armed) {
		atexit(iot_cleanup_run);
		signal(SIGTERM, iot_cleanup_signal);
		signal(SIGINT, iot_cleanup_signal);
		c->armed = true;
	}
	c->pid = pid;
	snprintf(c->session, sizeof(c->session), "%s", s ? s->id : "");
	snprintf(c->model, sizeof(c->model), "%s", model ? model : "");
}

/* Print the control segment's leases and client slots (diagnostics of a stall). */
static inline void iot_dump_ctl(struct ns_ctl *c)
{
	uint64_t head = atomic_load(&c->arena.head_seq), tail = atomic_load(&c->arena.tail_seq);

	fprintf(stderr, "ctl: nsio pid %d gen %u state %u, arena %llu reserved %llu peak %llu, "
		"leases [%llu, %llu)\n", (int)atomic_load(&c->nsio_pid), atomic_load(&c->nsio_gen),
		atomic_load(&c->nsio_state), (unsigned long long)c->arena_bytes,
		(unsigned long long)atomic_load(&c->arena.reserved),
		(unsigned long long)atomic_load(&c->arena.peak), (unsigned long long)tail,
		(unsigned long long)head);
	for (uint64_t q = tail; q != head && q - tail < 64; q++) {
		struct ns_lease *l = &ns_ctl_leases(c)[q & (c->lease_slots - 1)];
		fprintf(stderr, "  lease %llu: state %u owner %d epoch %llu ticket %llu off %llu len "
			"%llu cpl_pos %u\n", (unsigned long long)l->seq, atomic_load(&l->state),
			l->owner == NS_OWNER_NONE ? -1 : (int)l->owner,
			(unsigned long long)l->client_epoch, (unsigned long long)l->ticket,
			(unsigned long long)l->off, (unsigned long long)l->len, l->cpl_pos);
	}
	for (uint32_t i = 0; i < c->max_clients; i++) {
		struct ns_client_slot *cs = ns_ctl_client(c, i);
		if (atomic_load(&cs->state) == NS_CLIENT_FREE)
			continue;
		fprintf(stderr, "  client %u: state %u pid %d epoch %llu req %u/%u cpl %u/%u "
			"waiting %u\n", i, atomic_load(&cs->state), (int)atomic_load(&cs->pid),
			(unsigned long long)atomic_load(&cs->epoch), atomic_load(&cs->req_head),
			atomic_load(&cs->req_tail), atomic_load(&cs->cpl_head),
			atomic_load(&cs->cpl_tail), atomic_load(&cs->cpl_waiting));
	}
}

/* Watchdog: if *progress stops moving for stall_s seconds, dump nsio (SIGUSR1) and the
 * control segment, then fail: a hang becomes a diagnosed failure, not a timeout. */
struct iot_watchdog {
	_Atomic uint64_t *progress;
	_Atomic int stop;
	struct ns_ctl *_Atomic ctl;
	_Atomic pid_t nsio;
	unsigned stall_s;
	pthread_t th;
};

static inline void *iot_watchdog_main(void *arg)
{
	struct iot_watchdog *w = arg;
	uint64_t last = ~0ull;
	unsigned still = 0;

	while (!atomic_load(&w->stop)) {
		uint64_t now = atomic_load(w->progress);

		sleep(1);
		still = now == last ? still + 1 : 0;
		last = now;
		if (still < w->stall_s)
			continue;
		fprintf(stderr, "STALL: no progress for %u s\n", still);
		if (atomic_load(&w->nsio) > 0)
			kill(atomic_load(&w->nsio), SIGUSR1);
		sleep(1);
		if (atomic_load(&w->ctl))
			iot_dump_ctl(atomic_load(&w->ctl));
		exit(1);
	}
	return NULL;
}

static inline uint64_t iot_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

#endif
