/* test_nsplan_proc.c - the nsplan process: publishes the plan of a session in shm (identical
 * to the in-process plan), re-plans on SIGHUP with new statistics (next generation, the hot
 * expert cached), survives SIGKILL + restart (the generation count continues, readers keep
 * the last plan meanwhile), unlinks its segment on SIGTERM. Exit 0 pass, 1 fail, 77 skip. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ns_test.h"
#include "ns_util.h"
#include "plan.h"
#include "plan_shm.h"
#include "session.h"
#include "summary.h"

static int s_fail;

#define CHECK(cond, ...) NS_EXPECT(s_fail, cond, __VA_ARGS__)

static char s_model[1024], s_stats[256], s_ram[32], s_exe[1024];

static uint64_t s_rows(void *ctx, uint64_t i)
{
	return ((const struct ns_model *)ctx)->tensors[i].n_rows;
}

static pid_t s_spawn(const char *session)
{
	pid_t pid = fork();

	if (pid == 0) {
		execl(s_exe, s_exe, "--session", session, s_model, "--ram-budget", s_ram,
		      "--stats", s_stats, "--quiet", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Wait up to 20 s for a valid plan of generation >= gen; copy it into buf. */
static int s_wait_plan(const char *session, const struct ns_model *m, uint32_t gen, void *buf,
		       size_t cap, size_t *len)
{
	char err[NS_ERR_LEN];
	struct ns_seg seg;
	int ret = -ETIMEDOUT;

	for (int i = 0; i < 2000; i++) {
		if (nsplan_shm_open(&seg, session, err, sizeof(err)) == 0) {
			int r = nsplan_shm_read(&seg, buf, cap, len);
			ns_seg_unmap(&seg);
			if (r == 0) {
				if (nsplan_records_check(buf, *len, m->n_tensors, s_rows, (void *)m, err,
							 sizeof(err))) {
					CHECK(0, "published plan invalid: %s", err);
					return -EPROTO;
				}
				if (((const struct nsplan_header *)buf)->generation >= gen)
					return 0;
			}
		}
		usleep(10000);
	}
	return ret;
}

static void s_write_stats(const char *text)
{
	FILE *f = fopen(s_stats, "w");

	if (!f) {
		CHECK(0, "cannot write %s", s_stats);
		return;
	}
	fputs(text, f);
	fclose(f);
}

int main(void)
{
	struct ns_session_params sp = NS_SESSION_PARAMS_DEFAULT;
	struct ns_session *s = NULL;
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	struct nsplan *ref = NULL;
	struct nsplan_opts o = { 0 };
	char err[NS_ERR_LEN];
	const char *root = getenv("NS_BUILD_ROOT");
	/* tiny-qwen3moe-F32: attention and router matrices, the output, 3 expert slabs (the
	 * 6144 bytes of norms are held by compute and cached last: not in this budget) */
	const uint64_t ram = 2 * 786432 + 2 * 8192 + 524288 + 3 * 262144;
	size_t cap, len = 0;
	uint8_t *buf;
	pid_t pid;
	int status = 0, fd;

	ns_test_require_oracle();
	snprintf(s_exe, sizeof(s_exe), "%s/nsplan/nsplan", root ? root : ".");
	ns_test_oracle_path(s_model, sizeof(s_model), "tiny/tiny-qwen3moe-F32.gguf");
	snprintf(s_ram, sizeof(s_ram), "%" PRIu64, ram);
	snprintf(s_stats, sizeof(s_stats), "/tmp/ns-test-stats-XXXXXX");
	fd = mkstemp(s_stats);
	if (fd < 0) {
		perror("mkstemp");
		return 1;
	}
	close(fd);
	s_write_stats("# no statistics yet\n");
	if (ns_model_open(s_model, &m, err, sizeof(err)) || ns_hparams_load(m, &hp, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	sp.arena_bytes = 4ull << 20;
	if (ns_session_create(&sp, &s, err, sizeof(err))) {
		fprintf(stderr, "session: %s\n", err);
		ns_model_close(&m);
		return 1;
	}
	cap = sizeof(struct nsplan_header) + nsplan_entry_bound(m, &hp) * sizeof(struct nsplan_entry);
	buf = malloc(cap);
	o.budgets.ram = ram;
	o.budgets.mem = s->ctl->budget_bytes;
	if (!buf || nsplan_compute(m, &hp, &o, 1, &ref, err, sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		return 1;
	}

	/* 1: the published plan is the in-process one */
	pid = s_spawn(s->id);
	CHECK(s_wait_plan(s->id, m, 1, buf, cap, &len) == 0, "no plan published");
	CHECK(len == nsplan_records_bytes(ref), "published %zu bytes, want %zu", len,
	      nsplan_records_bytes(ref));
	if (len == nsplan_records_bytes(ref)) {
		uint8_t *want = malloc(len);
		if (want) {
			nsplan_records_write(ref, want);
			CHECK(!memcmp(want, buf, len), "published plan differs from nsplan_compute");
			free(want);
		}
	}

	/* 2: statistics -> generation 2 caches the hot expert (layer 1, expert 5) */
	s_write_stats("tokens 0 100\ntokens 1 100\n0 0 20\n0 1 20\n1 5 90\n1 2 30\n");
	kill(pid, SIGHUP);
	CHECK(s_wait_plan(s->id, m, 2, buf, cap, &len) == 0, "no generation 2 after SIGHUP");
	{
		const struct nsplan_entry *e = (const void *)(buf + sizeof(struct nsplan_header));
		uint64_t n = ((const struct nsplan_header *)buf)->n_entries, hot = 0;
		for (uint64_t i = 0; i < n; i++)
			if (e[i].kind == NSPLAN_KIND_EXPERT && e[i].tier == NSPLAN_RAM) {
				CHECK(e[i].expert == 5 && ns_tensor_layer(m->tensors[e[i].tensor].name) == 1,
				      "cached expert %u of %s", e[i].expert, m->tensors[e[i].tensor].name);
				hot++;
			}
		CHECK(hot == 3, "%" PRIu64 " expert windows cached, want 3", hot);
	}
	/* a malformed statistics file keeps generation 2 */
	s_write_stats("1 99 5\n");
	kill(pid, SIGHUP);
	usleep(300000);
	CHECK(s_wait_plan(s->id, m, 2, buf, cap, &len) == 0 &&
	      ((const struct nsplan_header *)buf)->generation == 2, "bad stats changed the plan");

	/* 3: SIGKILL: the plan stays readable; a restart continues at generation 3 */
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	CHECK(s_wait_plan(s->id, m, 2, buf, cap, &len) == 0, "plan gone after SIGKILL");
	s_write_stats("tokens 1 10\n1 5 9\n");
	pid = s_spawn(s->id);
	CHECK(s_wait_plan(s->id, m, 3, buf, cap, &len) == 0, "restart did not publish generation 3");

	/* 4: SIGTERM: exit 0 and the segment is gone */
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "nsplan exit status %#x", status);
	{
		struct ns_seg seg;
		CHECK(nsplan_shm_open(&seg, s->id, err, sizeof(err)) == -ENOENT,
		      "plan segment left behind");
	}

	nsplan_destroy(&ref);
	free(buf);
	ns_session_destroy(&s);
	ns_model_close(&m);
	unlink(s_stats);
	if (s_fail) {
		fprintf(stderr, "%d failures\n", s_fail);
		return 1;
	}
	printf("ok\n");
	return 0;
}
