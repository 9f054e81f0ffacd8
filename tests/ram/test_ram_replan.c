/* test_ram_replan: nsio follows the plan's generations (nsio/ramcache.h) while serving.
 *
 * A session with nsplan (--ram-budget B --stats FILE) and nsio (--ram-budget B) on the MoE
 * model tiny-qwen3moe-Q4_K_M, a 256 KiB arena, read by a client of our own:
 *   1. generation 1 (uniform prior): reading every expert of every expert tensor requests
 *      exactly the bytes of its rows that the published plan does not place in RAM (a
 *      window's resident rows are a prefix of each expert read), and every block equals a
 *      plain pread of the file;
 *   2. new statistics + SIGHUP: nsplan publishes generation 2 (hot experts first); while the
 *      client keeps reading (checked against pread), nsio picks it up between requests and
 *      loads it (dir.plan_gen == 2) without stopping anyone;
 *   3. generation 2: the same reads request exactly what generation 2 leaves on disk; the
 *      hottest expert (layer 0, expert 0, kept from generation 1 and moved) is read with 0
 *      bytes requested;
 *   4. the directory's figures are exact: kept = expert bytes in both plans, dropped = the
 *      first plan's expert bytes not in the second, filled = generation 1's RAM bytes +
 *      generation 2's new bytes; no fill lease above the arena, the arena peak within it,
 *      and the fill never counted in bytes requested.
 * Exit 0 pass, 1 fail, 77 skip. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "client.h"
#include "hparams.h"
#include "layout.h"
#include "model.h"
#include "ns_test.h"
#include "ns_util.h"
#include "plan.h"
#include "plan_shm.h"
#include "ram_seg.h"
#include "seg.h"
#include "summary.h"
#include "session.h"

#define CHECK(cond, ...) NS_REQUIRE(cond, __VA_ARGS__)
#define S_ARENA (256u << 10)

static char s_model[PATH_MAX], s_stats[64], s_ram[32];

static uint64_t s_rows(void *ctx, uint64_t i)
{
	return ((const struct ns_model *)ctx)->tensors[i].n_rows;
}

static pid_t s_spawn_nsplan(const char *session)
{
	char exe[PATH_MAX];
	const char *root = getenv("NS_BUILD_ROOT");
	pid_t pid;

	snprintf(exe, sizeof(exe), "%s/nsplan/nsplan", root ? root : ".");
	pid = fork();
	if (pid == 0) {
		execl(exe, exe, "--session", session, s_model, "--ram-budget", s_ram, "--stats",
		      s_stats, "--quiet", (char *)NULL);
		_exit(127);
	}
	CHECK(pid > 0, "fork");
	return pid;
}

/* The plan of generation gen (waits up to 20 s), malloc'd. */
static void *s_plan(const char *session, const struct ns_model *m, uint32_t gen)
{
	char err[NS_ERR_LEN];
	size_t cap = 1 << 20, len;
	void *buf = malloc(cap);

	CHECK(buf, "malloc");
	for (int i = 0; i < 2000; i++) {
		struct ns_seg seg;

		if (nsplan_shm_open(&seg, session, err, sizeof(err)) == 0) {
			int r = nsplan_shm_read(&seg, buf, cap, &len);

			ns_seg_unmap(&seg);
			if (r == 0) {
				CHECK(nsplan_records_check(buf, len, m->n_tensors, s_rows, (void *)m, err,
							   sizeof(err)) == 0, "bad plan: %s", err);
				if (((struct nsplan_header *)buf)->generation == gen)
					return buf;
			}
		}
		usleep(10000);
	}
	NS_FAIL("no plan generation %u", gen);
}

/* Rows of [row0, row0 + n) of tensor t that a plan places in RAM as a window starting at or
 * before row0 (what nsio serves from RAM: a prefix of the request). */
static uint64_t s_resident_prefix(const void *plan, uint32_t t, uint64_t row0, uint64_t n)
{
	const struct nsplan_header *h = plan;
	const struct nsplan_entry *e = (const void *)(h + 1);

	for (uint64_t i = 0; i < h->n_entries; i++)
		if (e[i].tensor == t && e[i].tier == NSPLAN_RAM && e[i].row_begin <= row0 &&
		    row0 < e[i].row_end)
			return e[i].row_end - row0 < n ? e[i].row_end - row0 : n;
	return 0;
}

/* Expert window bytes of plan a that plan b also has exactly (b NULL: all of a's). */
static uint64_t s_expert_bytes(const struct ns_model *m, const void *a, const void *b)
{
	const struct nsplan_header *ha = a, *hb = b;
	const struct nsplan_entry *ea = (const void *)(ha + 1);
	const struct nsplan_entry *eb = b ? (const void *)(hb + 1) : NULL;
	uint64_t sum = 0;

	for (uint64_t i = 0; i < ha->n_entries; i++) {
		bool in = !b;

		if (ea[i].tier != NSPLAN_RAM || ea[i].expert == NSPLAN_NO_EXPERT)
			continue;
		for (uint64_t j = 0; b && j < hb->n_entries && !in; j++)
			in = eb[j].tier == NSPLAN_RAM && eb[j].tensor == ea[i].tensor &&
			     eb[j].row_begin == ea[i].row_begin && eb[j].row_end == ea[i].row_end;
		if (in)
			sum += (ea[i].row_end - ea[i].row_begin) * m->tensors[ea[i].tensor].row_bytes;
	}
	return sum;
}

static uint64_t s_ram_bytes(const struct ns_model *m, const void *a)
{
	const struct nsplan_header *h = a;
	const struct nsplan_entry *e = (const void *)(h + 1);
	uint64_t sum = 0;

	for (uint64_t i = 0; i < h->n_entries; i++)
		if (e[i].tier == NSPLAN_RAM)
			sum += (e[i].row_end - e[i].row_begin) * m->tensors[e[i].tensor].row_bytes;
	return sum;
}

struct s_reader {
	struct ns_client *c;
	struct ns_ctl *ctl;
	const struct ns_model *m;
	int fd;
	uint8_t *ref;
	uint64_t reads;
};

/* Read rows [row0, row0 + n) of model tensor t through nsio, compare with pread; returns the
 * bytes nsio counted as requested for it. */
static uint64_t s_read(struct s_reader *r, uint32_t t, uint64_t row0, uint64_t n)
{
	const struct ns_model_tensor *mt = &r->m->tensors[t];
	int64_t ci = ns_client_find_tensor(r->c, mt->name);
	uint64_t before = atomic_load(&r->ctl->stats.bytes_requested), ticket, bytes;
	struct ns_block b;
	int rc;

	CHECK(ci >= 0, "nsio has no %s", mt->name);
	rc = ns_client_request(r->c, (uint64_t)ci, row0, n, &ticket);
	CHECK(rc == 0, "request %s rows %llu+%llu: %s", mt->name, (unsigned long long)row0,
	      (unsigned long long)n, strerror(-rc));
	rc = ns_client_wait(r->c, ticket, &b);
	CHECK(rc == 0, "wait %s: %s", mt->name, strerror(-rc));
	bytes = n * mt->row_bytes;
	CHECK(b.nbytes == bytes && b.row0 == row0 && b.nrows == n, "block geometry");
	CHECK(pread(r->fd, r->ref, bytes, (off_t)(mt->file_offset + row0 * mt->row_bytes)) ==
	      (ssize_t)bytes, "pread");
	CHECK(memcmp(r->ref, b.data, bytes) == 0, "%s rows %llu+%llu differ from the file",
	      mt->name, (unsigned long long)row0, (unsigned long long)n);
	ns_client_retire(r->c, &b);
	r->reads++;
	return atomic_load(&r->ctl->stats.bytes_requested) - before;
}

/* Read every expert of every expert tensor; check each read's requested bytes against plan.
 * Returns the total requested. */
static uint64_t s_read_experts(struct s_reader *r, const struct ns_hparams *hp,
			       const void *plan, const char *what)
{
	uint64_t total = 0, want_total = 0;

	for (uint32_t t = 0; t < r->m->n_tensors; t++) {
		const struct ns_model_tensor *mt = &r->m->tensors[t];
		uint64_t per;

		if (!strstr(mt->name, "_exps.weight"))
			continue;
		per = mt->n_rows / hp->n_expert;
		for (uint32_t e = 0; e < hp->n_expert; e++) {
			uint64_t row0 = e * per, got = s_read(r, t, row0, per);
			uint64_t want = (per - s_resident_prefix(plan, t, row0, per)) * mt->row_bytes;

			CHECK(got == want, "%s: %s expert %u: %llu bytes requested, the plan leaves "
			      "%llu on disk", what, mt->name, e, (unsigned long long)got,
			      (unsigned long long)want);
			total += got;
			want_total += want;
		}
	}
	printf("%s: every expert read once: %llu bytes requested = %llu the plan leaves on "
	       "disk\n", what, (unsigned long long)total, (unsigned long long)want_total);
	return total;
}

static void s_cleanup(void)
{
	if (s_stats[0])
		unlink(s_stats);
}

static void s_write_stats(const char *text)
{
	FILE *f = fopen(s_stats, "w");

	CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", s_stats);
}

static bool s_tensor_dims(void *ctx, uint64_t t, uint64_t *n_rows, uint64_t *row_bytes)
{
	const struct ns_model *m = ctx;

	if (t >= m->n_tensors)
		return false;
	*n_rows = m->tensors[t].n_rows;
	*row_bytes = m->tensors[t].row_bytes;
	return true;
}

int main(void)
{
	struct ns_session_params sp = NS_SESSION_PARAMS_DEFAULT;
	struct ns_session *s = NULL;
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	struct ns_seg ramseg;
	struct ns_ram_view rv;
	const struct ns_ram_dir *d;
	struct s_reader r = { 0 };
	char err[NS_ERR_LEN], nsio_path[PATH_MAX];
	const char *extra[] = { "--ram-budget", s_ram, "--quiet", NULL };
	void *p1, *p2;
	uint64_t ram = 600000, fill1, hot_req = 0, during = 0, peak;
	pid_t planner, io;
	int fd, st, rc;

	ns_test_require_oracle();
	ns_test_oracle_path(s_model, sizeof(s_model), "tiny/tiny-qwen3moe-Q4_K_M.gguf");
	snprintf(s_ram, sizeof(s_ram), "%" PRIu64, ram);
	snprintf(s_stats, sizeof(s_stats), "/tmp/ns-ram-replan-XXXXXX");
	fd = mkstemp(s_stats);
	CHECK(fd >= 0, "mkstemp");
	close(fd);
	atexit(s_cleanup); /* also when a check fails */
	s_write_stats("# no statistics yet\n");
	CHECK(ns_model_open(s_model, &m, err, sizeof(err)) == 0 &&
	      ns_hparams_load(m, &hp, err, sizeof(err)) == 0, "%s", err);
	CHECK(hp.n_expert == 8, "want an 8-expert model");
	sp.arena_bytes = S_ARENA;
	CHECK(ns_session_create(&sp, &s, err, sizeof(err)) == 0, "session: %s", err);

	planner = s_spawn_nsplan(s->id);
	p1 = s_plan(s->id, m, 1);
	rc = ns_nsio_spawn(ns_nsio_path(nsio_path, sizeof(nsio_path)), s->id, s_model, extra, &io);
	CHECK(rc == 0, "spawn nsio: %s", strerror(-rc));
	rc = ns_nsio_wait_running(s->ctl, io, 0, 20000, &st);
	CHECK(rc == 0, "nsio did not start (%s, status %d)", strerror(-rc), st);
	CHECK(ns_client_open(s->id, NULL, &r.c, err, sizeof(err)) == 0, "client: %s", err);
	r.ctl = ns_client_ctl(r.c);
	r.m = m;
	r.fd = open(s_model, O_RDONLY | O_CLOEXEC);
	r.ref = malloc(S_ARENA);
	CHECK(r.fd >= 0 && r.ref, "open / malloc");

	/* 1 */
	s_read(&r, 0, 0, 1); /* nsio serves once generation 1 is loaded (segment made then) */
	CHECK(ns_ram_view_open(&rv, s->id, m->n_tensors, s_tensor_dims, m, err,
			       sizeof(err)) == 0, "RAM segment: %s", err);
	d = rv.dir;
	CHECK(atomic_load(&d->plan_gen) == 1, "generation %llu loaded, want 1",
	      (unsigned long long)atomic_load(&d->plan_gen));
	fill1 = atomic_load(&d->fill_bytes);
	CHECK(fill1 == s_ram_bytes(m, p1) && fill1 == ((struct nsplan_header *)p1)->ram_used,
	      "generation 1 filled %llu bytes, the plan places %llu", (unsigned long long)fill1,
	      (unsigned long long)s_ram_bytes(m, p1));
	CHECK(s_expert_bytes(m, p1, NULL) > 0, "generation 1 caches no expert: raise the budget");
	{ /* the fill's progress as nsctl reads it (ns_ram_seg_fill): all of the plan loaded */
		uint64_t res = 0, plan = 0;

		CHECK(ns_ram_seg_fill(s->id, &res, &plan, err, sizeof(err)) == 0, "fill: %s", err);
		CHECK(plan == fill1 && res == plan, "fill figures %llu of %llu, want %llu of it",
		      (unsigned long long)res, (unsigned long long)plan, (unsigned long long)fill1);
	}
	s_read_experts(&r, &hp, p1, "generation 1");

	/* 2: layer 0 expert 0 (cached by generation 1 too) is hit by 95 of 100 tokens, layer 1
	 * expert 5 by 90, layer 0 expert 1 (partly cached by generation 1) by only 10 */
	s_write_stats("tokens 0 100\ntokens 1 100\n0 0 95\n0 3 60\n0 1 10\n0 6 30\n0 2 5\n"
		      "1 5 90\n1 2 50\n1 7 30\n1 0 30\n");
	CHECK(kill(planner, SIGHUP) == 0, "SIGHUP nsplan");
	for (int i = 0; i < 4000 && atomic_load(&d->plan_gen) != 2; i++) {
		const struct ns_model_tensor *mt = &m->tensors[i % m->n_tensors];

		s_read(&r, i % (uint32_t)m->n_tensors, 0, mt->n_rows < 16 ? mt->n_rows : 16);
		during++;
		usleep(2000);
	}
	CHECK(atomic_load(&d->plan_gen) == 2, "nsio did not load generation 2");
	printf("generation 2 picked up and loaded while %llu reads were served\n",
	       (unsigned long long)during);
	p2 = s_plan(s->id, m, 2);

	/* 3 */
	s_read_experts(&r, &hp, p2, "generation 2");
	for (uint32_t t = 0; t < m->n_tensors; t++) {
		const struct ns_model_tensor *mt = &m->tensors[t];
		uint64_t per = mt->n_rows / hp.n_expert;

		if (!strstr(mt->name, "_exps.weight") || ns_tensor_layer(mt->name) != 0)
			continue;
		hot_req += s_read(&r, t, 0, per);
	}
	CHECK(hot_req == 0, "the hottest expert requested %llu bytes", (unsigned long long)hot_req);

	/* 4 */
	{
		uint64_t kept = s_expert_bytes(m, p2, p1), e1 = s_expert_bytes(m, p1, NULL);
		uint64_t new2 = s_ram_bytes(m, p2) - s_ram_bytes(m, p1) + e1 - kept;

		printf("directory: kept %llu (plans: %llu), dropped %llu (%llu), filled %llu "
		       "(%llu + %llu), %llu reads, lease max %llu, arena %u\n",
		       (unsigned long long)atomic_load(&d->kept_bytes), (unsigned long long)kept,
		       (unsigned long long)atomic_load(&d->dropped_bytes),
		       (unsigned long long)(e1 - kept),
		       (unsigned long long)atomic_load(&d->fill_bytes), (unsigned long long)fill1,
		       (unsigned long long)new2, (unsigned long long)atomic_load(&d->fill_reads),
		       (unsigned long long)atomic_load(&d->fill_lease_max), S_ARENA);
		CHECK(atomic_load(&d->kept_bytes) == kept && kept > 0, "kept bytes");
		CHECK(atomic_load(&d->dropped_bytes) == e1 - kept, "dropped bytes");
		CHECK(atomic_load(&d->fill_bytes) == fill1 + new2, "filled bytes");
		CHECK(atomic_load(&d->resident_bytes) == s_ram_bytes(m, p2), "resident bytes");
		CHECK(atomic_load(&d->planned_bytes) == s_ram_bytes(m, p2), "planned bytes %llu",
		      (unsigned long long)atomic_load(&d->planned_bytes));
		CHECK(atomic_load(&d->generations) == 2, "generations applied");
	}
	peak = atomic_load(&r.ctl->arena.peak);
	CHECK(atomic_load(&d->fill_lease_max) <= r.ctl->arena_bytes && peak <= r.ctl->arena_bytes,
	      "fill lease %llu / arena peak %llu over the arena %llu",
	      (unsigned long long)atomic_load(&d->fill_lease_max), (unsigned long long)peak,
	      (unsigned long long)r.ctl->arena_bytes);

	ns_ram_view_close(&rv);
	ns_client_close(&r.c);
	kill(io, SIGTERM);
	waitpid(io, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nsio exit status %#x", st);
	kill(planner, SIGTERM);
	waitpid(planner, &st, 0);
	CHECK(ns_seg_open(&ramseg, s->id, NS_RAM_SEG_WHAT, NS_SEG_RAM, false, err,
			  sizeof(err)) == -ENOENT, "RAM segment left behind");
	close(r.fd);
	free(r.ref);
	free(p1);
	free(p2);
	ns_session_destroy(&s);
	ns_model_close(&m);
	printf("ok\n");
	return 0;
}
