/* test_hf_stream - nsio serves a Hugging Face checkpoint's tensors as its GGUF conversion
 * holds them.
 *
 * A session with nsplan and nsio on hf/qwen3_5/model-bf16 (a 64 KiB arena; RAM budgets 0 and
 * 1 MiB, the second placing some windows in nsio's RAM tier, filled through the same reads),
 * read by a client of our own: every tensor in blocks of 1, 5 and 64 rows and whole (at most
 * a quarter of the arena), each
 * block dequantized and compared bit for bit with the same rows of llama.cpp's F32
 * conversion (hf/qwen3_5/gguf/qwen3_5-f32.gguf). Blocks inside one row run of a permuted
 * matrix are plain O_DIRECT reads from where the run lies; blocks across runs, and tensors
 * whose values the converter changes, are made by ns_model_read_rows in nsio.
 * Exit 0 pass, 1 fail, 77 oracle missing. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "dequant.h"
#include "layout.h"
#include "model.h"
#include "ns_test.h"
#include "ns_util.h"
#include "session.h"

#define CHECK(cond, ...) NS_REQUIRE(cond, __VA_ARGS__)
#define S_ARENA (64u << 10)

static char s_model[PATH_MAX];

static pid_t s_spawn_nsplan(const char *session, const char *ram)
{
	char exe[PATH_MAX];
	const char *root = getenv("NS_BUILD_ROOT");
	pid_t pid;

	snprintf(exe, sizeof(exe), "%s/nsplan/nsplan", root ? root : ".");
	pid = fork();
	if (pid == 0) {
		execl(exe, exe, "--session", session, s_model, "--ram-budget", ram, "--quiet",
		      (char *)NULL);
		_exit(127);
	}
	CHECK(pid > 0, "fork");
	return pid;
}

/* The conversion's tensors, dequantized once. */
struct s_ref {
	struct ns_model *m;
	float **f;
};

static void s_ref_load(struct s_ref *r, const char *rel)
{
	char path[PATH_MAX], err[NS_ERR_LEN];
	int *fds = NULL;

	ns_test_oracle_path(path, sizeof(path), rel);
	CHECK(ns_model_open(path, &r->m, err, sizeof(err)) == 0, "%s", err);
	CHECK(ns_model_open_fds(r->m, &fds, err, sizeof(err)) == 0, "%s", err);
	r->f = calloc(r->m->n_tensors, sizeof(*r->f));
	CHECK(r->f, "calloc");
	for (uint64_t i = 0; i < r->m->n_tensors; i++) {
		const struct ns_model_tensor *t = &r->m->tensors[i];
		uint8_t *raw = malloc((size_t)t->n_bytes);

		r->f[i] = malloc((size_t)(t->n_rows * t->ne[0] * sizeof(float)));
		CHECK(raw && r->f[i], "malloc");
		CHECK(ns_model_read_rows(r->m, fds, t, 0, t->n_rows, raw) == 0, "read %s", t->name);
		CHECK(ns_dequant_rows(t->type, raw, t->ne[0], t->n_rows, r->f[i]) == 0, "dequant");
		free(raw);
	}
	ns_model_close_fds(r->m, &fds);
}

/* Read every tensor of m through c in blocks of `rows` (0: whole); compare with ref. */
static uint64_t s_read_all(struct ns_client *c, const struct ns_model *m, const struct s_ref *ref,
			   uint64_t rows)
{
	uint64_t blocks = 0;
	float *f = NULL;

	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		int64_t ci = ns_client_find_tensor(c, t->name);
		int64_t ri = ns_model_find_index(ref->m, t->name);
		uint64_t step = rows ? rows : t->n_rows, most = S_ARENA / 4 / t->row_bytes;

		if (step > most) /* a block must fit the arena beside the ones in flight */
			step = most;

		CHECK(ci >= 0 && ri >= 0, "no %s in nsio's table or the conversion", t->name);
		f = realloc(f, (size_t)(step * t->ne[0] * sizeof(float)));
		CHECK(f, "realloc");
		for (uint64_t r0 = 0; r0 < t->n_rows; r0 += step) {
			uint64_t n = t->n_rows - r0 < step ? t->n_rows - r0 : step, ticket;
			struct ns_block b;
			int rc = ns_client_request(c, (uint64_t)ci, r0, n, &ticket);

			CHECK(rc == 0, "request %s: %s", t->name, strerror(-rc));
			rc = ns_client_wait(c, ticket, &b);
			CHECK(rc == 0, "%s rows %" PRIu64 "+%" PRIu64 ": %s", t->name, r0, n,
			      strerror(-rc));
			CHECK(b.nbytes == n * t->row_bytes, "%s: block of %" PRIu64 " bytes", t->name,
			      (uint64_t)b.nbytes);
			CHECK(ns_dequant_rows(t->type, b.data, t->ne[0], n, f) == 0, "dequant");
			CHECK(!memcmp(f, ref->f[ri] + r0 * t->ne[0], (size_t)(n * t->ne[0]) *
				      sizeof(float)), "%s rows %" PRIu64 "+%" PRIu64 " served by nsio "
			      "differ from the conversion", t->name, r0, n);
			ns_client_retire(c, &b);
			blocks++;
		}
	}
	free(f);
	return blocks;
}

static void s_session(const struct s_ref *ref, const char *ram)
{
	struct ns_session_params sp = NS_SESSION_PARAMS_DEFAULT;
	struct ns_session *s = NULL;
	struct ns_client *c = NULL;
	struct ns_model *m = NULL;
	char err[NS_ERR_LEN], nsio_path[PATH_MAX];
	const char *extra[] = { "--ram-budget", ram, "--quiet", NULL };
	const uint64_t sizes[] = { 1, 5, 64, 0 };
	uint64_t blocks = 0;
	pid_t planner, io;
	int st, rc;

	CHECK(ns_model_open(s_model, &m, err, sizeof(err)) == 0, "%s", err);
	sp.arena_bytes = S_ARENA;
	CHECK(ns_session_create(&sp, &s, err, sizeof(err)) == 0, "session: %s", err);
	planner = s_spawn_nsplan(s->id, ram);
	rc = ns_nsio_spawn(ns_nsio_path(nsio_path, sizeof(nsio_path)), s->id, s_model, extra, &io);
	CHECK(rc == 0, "spawn nsio: %s", strerror(-rc));
	rc = ns_nsio_wait_running(s->ctl, io, 0, 20000, &st);
	CHECK(rc == 0, "nsio did not start (%s, status %d)", strerror(-rc), st);
	CHECK(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "client: %s", err);
	for (size_t i = 0; i < NS_ARRAY_LEN(sizes); i++)
		blocks += s_read_all(c, m, ref, sizes[i]);
	printf("--ram-budget %s: %" PRIu64 " blocks of every tensor (1, 5, 64 rows, whole) "
	       "served by nsio equal the conversion; %llu bytes requested, %llu read, arena peak "
	       "%llu of %u\n", ram, blocks,
	       (unsigned long long)atomic_load(&s->ctl->stats.bytes_requested),
	       (unsigned long long)atomic_load(&s->ctl->stats.bytes_device),
	       (unsigned long long)atomic_load(&s->ctl->arena.peak), S_ARENA);
	CHECK(atomic_load(&s->ctl->arena.peak) <= S_ARENA, "arena over budget");
	ns_client_close(&c);
	kill(io, SIGTERM);
	kill(planner, SIGTERM);
	CHECK(waitpid(io, &st, 0) == io && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "nsio ended with status %d", st);
	waitpid(planner, &st, 0);
	ns_session_destroy(&s);
	ns_model_close(&m);
}

int main(void)
{
	struct s_ref ref = { 0 };

	ns_test_require_oracle();
	ns_test_oracle_path(s_model, sizeof(s_model), "hf/qwen3_5/model-bf16");
	s_ref_load(&ref, "hf/qwen3_5/gguf/qwen3_5-f32.gguf");
	s_session(&ref, "0");
	s_session(&ref, "1048576");
	for (uint64_t i = 0; i < ref.m->n_tensors; i++)
		free(ref.f[i]);
	free(ref.f);
	ns_model_close(&ref.m);
	return 0;
}
