/* test_nsio_prop.c - property test of the streaming path: random request sequences (tensors,
 * row windows, block rows, lookahead, client count) at budgets from the minimum up; every block
 * must equal a plain pread of its rows and the arena's peak reservation must stay within the
 * budget. Each configuration runs its own session and nsio. */
#include <pthread.h>

#include "arena.h"
#include "io_testlib.h"

#define N_CONFIGS 12
#define SEQ_PER_CONFIG 200
#define MAX_THREADS 4

struct ctx {
	const char *session;
	const struct iot_ref *ref;
	uint32_t max_la;
	uint64_t seed;
	uint64_t blocks, bytes;
	struct ns_ctl *ctl;
	_Atomic uint64_t *progress;
	int failed;
};

static int s_check_block(void *arg, const struct ns_block *b)
{
	struct ctx *x = arg;

	if (!iot_block_ok(x->ref, b)) {
		fprintf(stderr, "block tensor %u rows %llu+%llu differs from pread\n", b->tensor,
			(unsigned long long)b->row0, (unsigned long long)b->nrows);
		x->failed = 1;
		return -EIO;
	}
	if (atomic_load(&x->ctl->arena.reserved) > x->ctl->arena_bytes) {
		fprintf(stderr, "arena reserved %llu > %llu\n",
			(unsigned long long)atomic_load(&x->ctl->arena.reserved),
			(unsigned long long)x->ctl->arena_bytes);
		x->failed = 1;
		return -EIO;
	}
	x->blocks++;
	x->bytes += b->nbytes;
	atomic_fetch_add(x->progress, 1);
	return 0;
}

/* Up to la+1 explicit requests, waited and retired in order; sometimes one is cancelled or
 * preceded by a prefetch of the same window. */
static int s_manual(struct ns_client *c, struct ctx *x, uint32_t la)
{
	uint64_t tickets[16], rows, n_t = ns_client_n_tensors(c);
	uint32_t k = 1 + (uint32_t)(iot_rand(&x->seed) % (la + 1));
	bool cancelled[16] = { 0 };
	char err[NS_ERR_LEN];
	int rc;

	for (uint32_t i = 0; i < k; i++) {
		uint64_t t = iot_rand(&x->seed) % n_t;
		struct ns_client_tensor ti;
		uint64_t r0, n;

		ns_client_tensor(c, t, &ti);
		rc = ns_stream_block_rows(c, t, 0, k - 1, &rows, err, sizeof(err));
		if (rc)
			return fprintf(stderr, "block rows: %s\n", err), rc;
		r0 = iot_rand(&x->seed) % ti.n_rows;
		n = 1 + iot_rand(&x->seed) % rows;
		if (n > ti.n_rows - r0)
			n = ti.n_rows - r0;
		if (iot_rand(&x->seed) % 8 == 0)
			ns_client_prefetch(c, t, r0, n);
		rc = ns_client_request(c, t, r0, n, &tickets[i]);
		if (rc)
			return fprintf(stderr, "request: %s\n", strerror(-rc)), rc;
		if (iot_rand(&x->seed) % 16 == 0) {
			ns_client_cancel(c, tickets[i]);
			cancelled[i] = true;
		}
	}
	for (uint32_t i = 0; i < k; i++) {
		struct ns_block b;

		if (cancelled[i])
			continue;
		rc = ns_client_wait(c, tickets[i], &b);
		if (rc)
			return fprintf(stderr, "wait: %s\n", strerror(-rc)), rc;
		rc = s_check_block(x, &b);
		ns_client_retire(c, &b);
		if (rc)
			return rc;
	}
	return 0;
}

static void *s_thread(void *arg)
{
	struct ctx *x = arg;
	struct ns_client *c;
	char err[NS_ERR_LEN];
	uint32_t ops = 1 + (uint32_t)(iot_rand(&x->seed) % 5);

	if (ns_client_open(x->session, NULL, &c, err, sizeof(err))) {
		fprintf(stderr, "client open: %s\n", err);
		x->failed = 1;
		return NULL;
	}
	for (uint32_t op = 0; op < ops && !x->failed; op++) {
		uint32_t la = (uint32_t)(iot_rand(&x->seed) % (x->max_la + 1));
		int rc;

		if (iot_rand(&x->seed) % 3 == 0) {
			rc = s_manual(c, x, la);
		} else {
			uint64_t t = iot_rand(&x->seed) % ns_client_n_tensors(c);
			struct ns_client_tensor ti;
			uint64_t r0, r1, br;

			ns_client_tensor(c, t, &ti);
			r0 = iot_rand(&x->seed) % ti.n_rows;
			r1 = ti.n_rows - r0 < 80 ? ti.n_rows - r0 : 80; /* windows of <= 80 rows */
			r1 = r0 + 1 + iot_rand(&x->seed) % r1;
			br = iot_rand(&x->seed) % 4 ? 1 + iot_rand(&x->seed) % 64 : 0;
			rc = ns_stream_linear(c, t, r0, r1, br, la, s_check_block, x);
			if (rc)
				fprintf(stderr, "stream tensor %llu [%llu,%llu) br %llu la %u: %s\n",
					(unsigned long long)t, (unsigned long long)r0,
					(unsigned long long)r1, (unsigned long long)br, la,
					strerror(-rc));
		}
		if (rc)
			x->failed = 1;
	}
	ns_client_close(&c);
	return NULL;
}

static uint64_t s_min_budget(const struct ns_model *m, uint32_t la)
{
	uint64_t best = 0;

	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		uint64_t need = (la + 1) * ns_span_max(t->file_offset, t->row_bytes, t->n_rows, 1,
							4096);
		if (need > best)
			best = need;
	}
	return best;
}

int main(void)
{
	char model[4096], shm_model[256], err[NS_ERR_LEN], la_s[16], qd_s[16], bb_s[32];
	struct iot_ref ref;
	uint64_t seed = 0x1234567ull, total_seq = 0, total_blocks = 0, total_bytes = 0;
	_Atomic uint64_t progress = 0;
	struct iot_watchdog wd = { .progress = &progress, .stall_s = 30 };

	signal(SIGPIPE, SIG_IGN);
	if (getenv("IOT_SEED")) /* reproduce or explore: IOT_SEED=N */
		seed = strtoull(getenv("IOT_SEED"), NULL, 0) | 1;
	printf("seed %llu\n", (unsigned long long)seed);
	iot_scratch(model, sizeof(model), "prop");
	iot_write_model(model, iot_small_model, NS_ARRAY_LEN(iot_small_model), 1);
	/* most configurations read a tmpfs copy (O_DIRECT there since Linux 6.6, else the
	 * buffered fallback): same code paths, no dependence on a shared, busy disk; every
	 * fourth reads the build directory's file with O_DIRECT on the real device */
	snprintf(shm_model, sizeof(shm_model), "/dev/shm/nstest-prop-%d.gguf", (int)getpid());
	iot_cleanup_register(NULL, 0, model);
	iot_cleanup_file(shm_model);
	iot_write_model(shm_model, iot_small_model, NS_ARRAY_LEN(iot_small_model), 1);
	iot_ref_open(&ref, model);
	IOT_CHECK(pthread_create(&wd.th, NULL, iot_watchdog_main, &wd) == 0, "watchdog");
	for (int cfg = 0; cfg < N_CONFIGS; cfg++) {
		struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
		struct ns_session *s;
		struct ns_stats_snapshot st;
		uint32_t la = (uint32_t)(iot_rand(&seed) % 5);
		uint64_t min = s_min_budget(ref.m, la);
		const char *extra[12];
		size_t ne = 0;
		pid_t pid;
		int rc;
		char p_id[NS_SESSION_ID_LEN + 1];

		if (cfg == 0)
			p.arena_bytes = min;
		else if (cfg == 1)
			p.arena_bytes = min + 4096 * (1 + iot_rand(&seed) % 4);
		else if (cfg == N_CONFIGS - 1)
			p.arena_bytes = 64ull << 20;
		else
			p.arena_bytes = min + iot_rand(&seed) % (min * 8);
		p.lease_slots = cfg % 3 == 0 ? 8 : 1024; /* also exercise lease-slot exhaustion */
		rc = ns_session_create(&p, &s, err, sizeof(err));
		IOT_CHECK(rc == 0, "session: %s", err);
		snprintf(p_id, sizeof(p_id), "%s", s->id);
		snprintf(la_s, sizeof(la_s), "%u", la);
		snprintf(qd_s, sizeof(qd_s), "%u", 1 + (unsigned)(iot_rand(&seed) % 32));
		snprintf(bb_s, sizeof(bb_s), "%llu",
			 (unsigned long long)(4096 * (1 + iot_rand(&seed) % 64)));
		extra[ne++] = "--lookahead";
		extra[ne++] = la_s;
		extra[ne++] = "--queue-depth";
		extra[ne++] = qd_s;
		extra[ne++] = "--block-bytes";
		extra[ne++] = bb_s;
		extra[ne++] = "--quiet";
		if (cfg % 2)
			extra[ne++] = "--run-ahead";
		if (cfg % 4 == 3)
			extra[ne++] = "--no-direct";
		extra[ne] = NULL;
		pid = iot_start_nsio(s, cfg % 4 == 1 ? model : shm_model, extra);
		iot_cleanup_register(s, pid, model);
		atomic_store(&wd.ctl, s->ctl);
		atomic_store(&wd.nsio, pid);
		for (int q = 0; q < SEQ_PER_CONFIG; q++) {
			struct ctx x[MAX_THREADS];
			pthread_t th[MAX_THREADS];
			int nt = 1 + (int)(iot_rand(&seed) % MAX_THREADS);
			uint64_t t_seq = ns_now_ns();

			for (int i = 0; i < nt; i++) {
				x[i] = (struct ctx){ .session = s->id, .ref = &ref, .max_la = la,
						     .seed = iot_rand(&seed) | 1, .ctl = s->ctl,
						     .progress = &progress };
				IOT_CHECK(pthread_create(&th[i], NULL, s_thread, &x[i]) == 0,
					  "thread");
			}
			for (int i = 0; i < nt; i++) {
				pthread_join(th[i], NULL);
				IOT_CHECK(!x[i].failed, "config %d (budget %llu, lookahead %u) "
					  "sequence %d thread %d failed", cfg,
					  (unsigned long long)p.arena_bytes, la, q, i);
				total_blocks += x[i].blocks;
				total_bytes += x[i].bytes;
			}
			/* every client closed: the arena drains down to the read-ahead */
			for (int w = 0; w < 300; w++) {
				uint64_t res = atomic_load(&s->ctl->arena.reserved) -
					       atomic_load(&s->ctl->stats.ahead_bytes);
				if (res == 0)
					break;
				if (w == 299 && getenv("IOT_DUMP")) {
					char cmd[256];
					snprintf(cmd, sizeof(cmd), "%s %s", getenv("IOT_DUMP"), s->id);
					if (system(cmd)) {}
				}
				IOT_CHECK(w < 299, "config %d sequence %d: %llu bytes still reserved",
					  cfg, q, (unsigned long long)res);
				usleep(10000);
			}
			total_seq++;
			if (getenv("IOT_VERBOSE"))
				fprintf(stderr, "cfg %d seq %d: %d threads, %.1f ms\n", cfg, q, nt,
					(ns_now_ns() - t_seq) / 1e6);
		}
		/* everything retired: the arena drains (in-flight reads of cancelled requests
		 * and read-ahead may take a moment) */
		ns_stats_snapshot(s->ctl, &st);
		IOT_CHECK(st.arena_peak <= st.arena_bytes && st.arena_bytes <= p.arena_bytes,
			  "peak %llu > arena %llu", (unsigned long long)st.arena_peak,
			  (unsigned long long)st.arena_bytes);
		IOT_CHECK(st.rejected == 0, "config %d: %llu records rejected", cfg,
			  (unsigned long long)st.rejected);
		printf("config %2d: budget %9llu (min %8llu) lookahead %u qd %3s bb %7s %s%s %s: "
		       "peak %9llu, %llu reads, %llu hits\n", cfg, (unsigned long long)p.arena_bytes,
		       (unsigned long long)min, la, qd_s, bb_s, cfg % 2 ? "run-ahead " : "",
		       cfg % 4 == 3 ? "buffered" : "direct", cfg % 4 == 1 ? "disk" : "tmpfs",
		       (unsigned long long)st.arena_peak,
		       (unsigned long long)st.reads, (unsigned long long)st.cache_hits);
		atomic_store(&wd.nsio, 0);
		atomic_store(&wd.ctl, NULL);
		IOT_CHECK(iot_stop_nsio(pid) == 0, "nsio exit status");
		iot_cleanup_register(NULL, 0, model);
		ns_session_destroy(&s);
		IOT_CHECK(iot_shm_count(p_id) == 0, "segments of session %s left in /dev/shm", p_id);
	}
	atomic_store(&wd.stop, 1);
	pthread_join(wd.th, NULL);
	iot_ref_close(&ref);
	unlink(model);
	unlink(shm_model);
	iot_cleanup_file(NULL);
	printf("%llu sequences, %llu blocks, %llu bytes verified\n",
	       (unsigned long long)total_seq, (unsigned long long)total_blocks,
	       (unsigned long long)total_bytes);
	return 0;
}
