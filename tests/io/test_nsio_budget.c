/* test_nsio_budget.c - nsio's start-up refusals and record validation:
 *  - a budget one page short of lookahead + 1 one-row blocks of the widest tensor is refused
 *    with exit 2 and a message naming that tensor and the smallest budget that works; exactly
 *    that budget works and streams the tensor row by row;
 *  - the client library refuses the same way (ns_stream_block_rows -> -ENOSPC);
 *  - bad command lines exit 2;
 *  - ring records with a bad tensor index, row range, lease or version get error completions
 *    and are counted, and nsio keeps serving. */
#include "arena.h"
#include "io_testlib.h"
#include "proto_all.h"
#include "ring.h"

static void s_bad_usage(const char *model)
{
	char out[4096];
	const char *a1[] = { "--mem-budget", "1MB", NULL };
	const char *a2[] = { "--model", model, "--mem-budget", "lots", NULL };
	const char *a3[] = { "--model", model, "--mem-budget", "1MB", "--queue-depth", "0", NULL };
	const char *a4[] = { "--model", model, "--session", "bad-id!", NULL };
	const char *a5[] = { "--model", model, "--mem-budget", "1MB", "--bogus", NULL };
	const char *a6[] = { "--model", "/nonexistent.gguf", "--mem-budget", "1MB", NULL };
	const char *a7[] = { "--model", model, "--block-bytes", "1000", "--mem-budget", "1MB",
			     NULL };
	const char *const *cases[] = { a1, a2, a3, a4, a5, a7 };

	for (size_t i = 0; i < NS_ARRAY_LEN(cases); i++) {
		int rc = iot_run_nsio(cases[i], out, sizeof(out));
		IOT_CHECK(rc == 2 && strstr(out, "nsio: "), "bad usage case %zu: exit %d, '%s'", i,
			  rc, out);
	}
	IOT_CHECK(iot_run_nsio(a6, out, sizeof(out)) != 0 && strstr(out, "nonexistent"),
		  "missing model: '%s'", out);
}

static void s_refuse_and_accept(const char *model, const struct iot_ref *ref)
{
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	struct ns_session *s;
	struct ns_client *c;
	char out[4096], err[NS_ERR_LEN], min_s[32], *line;
	uint64_t min = 0, worst = 0, rows;
	const char *args[12];
	pid_t pid;
	int rc;

	for (uint64_t i = 0; i < ref->m->n_tensors; i++) {
		const struct ns_model_tensor *t = &ref->m->tensors[i];
		uint64_t need = 3 * ns_span_max(t->file_offset, t->row_bytes, t->n_rows, 1, 4096);
		if (need > min) {
			min = need;
			worst = i;
		}
	}
	/* one page short: refused, naming the tensor and the budget */
	p.arena_bytes = min - 4096;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "session: %s", err);
	iot_cleanup_register(s, 0, model);
	args[0] = "--session"; args[1] = s->id; args[2] = "--model"; args[3] = model;
	args[4] = "--lookahead"; args[5] = "2"; args[6] = NULL;
	rc = iot_run_nsio(args, out, sizeof(out));
	snprintf(min_s, sizeof(min_s), "%llu bytes", (unsigned long long)min);
	line = strstr(out, "smallest budget that works");
	IOT_CHECK(rc == 2 && line && strstr(out, ref->m->tensors[worst].name) &&
		  strstr(out, min_s), "refusal: exit %d, '%s' (want tensor %s, %s)", rc, out,
		  ref->m->tensors[worst].name, min_s);
	printf("refused as expected: %s", out);
	ns_session_destroy(&s);
	/* the same with nsio creating its own session from --mem-budget */
	snprintf(min_s, sizeof(min_s), "%llu", (unsigned long long)(min - 4096));
	args[0] = "--model"; args[1] = model; args[2] = "--lookahead"; args[3] = "2";
	args[4] = "--mem-budget"; args[5] = min_s; args[6] = "--quiet"; args[7] = NULL;
	rc = iot_run_nsio(args, out, sizeof(out));
	IOT_CHECK(rc == 2 && strstr(out, "smallest budget"), "own session: %d '%s'", rc, out);

	/* exactly the minimum: works, one row per block for the widest tensor */
	p.arena_bytes = min;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "session: %s", err);
	{
		const char *extra[] = { "--lookahead", "2", "--quiet", NULL };
		pid = iot_start_nsio(s, model, extra);
	}
	iot_cleanup_register(s, pid, model);
	IOT_CHECK(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "open: %s", err);
	IOT_CHECK(ns_stream_block_rows(c, worst, 0, 2, &rows, err, sizeof(err)) == 0 && rows >= 1,
		  "block rows at the minimum: %s", err);
	rc = ns_stream_block_rows(c, worst, 0, 3, &rows, err, sizeof(err));
	IOT_CHECK(rc == -ENOSPC && strstr(err, ref->m->tensors[worst].name) &&
		  strstr(err, "smallest budget"), "client refusal: %d '%s'", rc, err);
	{
		struct ns_block b;
		uint64_t t, n = ref->m->tensors[worst].n_rows;

		for (uint64_t r = 0; r < n; r += rows) {
			uint64_t k = n - r < rows ? n - r : rows;
			IOT_CHECK(ns_client_request(c, worst, r, k, &t) == 0, "request");
			IOT_CHECK(ns_client_wait(c, t, &b) == 0, "wait");
			IOT_CHECK(iot_block_ok(ref, &b), "row %llu differs", (unsigned long long)r);
			IOT_CHECK(ns_client_retire(c, &b) == 0, "retire");
		}
	}
	ns_client_close(&c);
	IOT_CHECK(iot_stop_nsio(pid) == 0, "nsio exit");
	iot_cleanup_register(NULL, 0, model);
	ns_session_destroy(&s);
}

/* Claim a client slot by hand and talk raw records. */
static void s_bad_records(const char *model)
{
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	const char *extra[] = { "--quiet", NULL };
	struct ns_session *s;
	struct ns_client_slot *cs;
	struct ns_ctl *ctl;
	char err[NS_ERR_LEN];
	uint32_t gen;
	pid_t pid;
	struct { struct ns_req_rec r; int want; } cases[] = {
		{ { .version = 1, .op = NS_REQ_READ, .tensor = 9999, .nrows = 1 }, -EINVAL },
		{ { .version = 1, .op = NS_REQ_READ, .tensor = 1, .row0 = 300, .nrows = 2 }, -EINVAL },
		{ { .version = 1, .op = NS_REQ_READ, .tensor = 1, .row0 = 0, .nrows = 0 }, -EINVAL },
		{ { .version = 1, .op = NS_REQ_READ, .tensor = 1, .row0 = UINT64_MAX, .nrows = 2 },
		  -EINVAL },
		{ { .version = 1, .op = NS_REQ_RETIRE, .lease_idx = 5, .lease_seq = 12345 }, -EINVAL },
		{ { .version = 1, .op = NS_REQ_RETIRE, .lease_idx = 1u << 30 }, -EINVAL },
		{ { .version = 2, .op = NS_REQ_READ, .tensor = 1, .nrows = 1 }, -EPROTO },
		{ { .version = 1, .op = 77 }, -EPROTO },
	};

	p.arena_bytes = 1 << 20;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "session: %s", err);
	pid = iot_start_nsio(s, model, extra);
	iot_cleanup_register(s, pid, model);
	ctl = s->ctl;
	gen = atomic_load(&ctl->nsio_gen);
	cs = ns_ctl_client(ctl, 0);
	atomic_store(&cs->state, NS_CLIENT_CLAIMED);
	atomic_store(&cs->pid, getpid());
	atomic_fetch_add(&cs->epoch, 1);
	atomic_store(&cs->state, NS_CLIENT_ACTIVE);
	for (size_t i = 0; i < NS_ARRAY_LEN(cases); i++) {
		struct ns_cpl_rec cpl;
		int w;

		cases[i].r.ticket = 100 + i;
		cases[i].r.nsio_gen = gen;
		IOT_CHECK(ns_ring_push(ns_slot_req(ctl, cs), ctl->ring_slots, &cs->req_head,
				       &cs->req_tail, &cases[i].r), "push");
		atomic_fetch_add(&ctl->doorbell, 1);
		ns_futex_wake(&ctl->doorbell, 1);
		for (w = 0; w < 500; w++) {
			if (ns_ring_pop(ns_slot_cpl(ctl, cs), ctl->ring_slots, &cs->cpl_head,
					&cs->cpl_tail, &cpl))
				break;
			usleep(2000);
		}
		IOT_CHECK(w < 500, "case %zu: no error completion", i);
		IOT_CHECK(cpl.status == cases[i].want && cpl.ticket == 100 + i,
			  "case %zu: status %d ticket %llu", i, cpl.status,
			  (unsigned long long)cpl.ticket);
	}
	IOT_CHECK(atomic_load(&ctl->stats.rejected) == NS_ARRAY_LEN(cases), "rejected %llu",
		  (unsigned long long)atomic_load(&ctl->stats.rejected));
	/* still serving: a proper read works */
	{
		struct ns_req_rec r = { .version = 1, .op = NS_REQ_READ, .nsio_gen = gen,
					.ticket = 7, .tensor = 1, .row0 = 5, .nrows = 10 };
		struct ns_cpl_rec cpl;
		int w;

		IOT_CHECK(ns_ring_push(ns_slot_req(ctl, cs), ctl->ring_slots, &cs->req_head,
				       &cs->req_tail, &r), "push");
		atomic_fetch_add(&ctl->doorbell, 1);
		ns_futex_wake(&ctl->doorbell, 1);
		for (w = 0; w < 500; w++) {
			if (ns_ring_pop(ns_slot_cpl(ctl, cs), ctl->ring_slots, &cs->cpl_head,
					&cs->cpl_tail, &cpl))
				break;
			usleep(2000);
		}
		IOT_CHECK(w < 500 && cpl.status == 0 && cpl.nrows == 10, "good read after bad ones");
	}
	/* our slot's leases go back when we leave */
	atomic_store(&cs->state, NS_CLIENT_CLOSING);
	for (int w = 0; w < 300 && atomic_load(&ctl->arena.reserved); w++)
		usleep(10000);
	IOT_CHECK(atomic_load(&ctl->arena.reserved) == 0, "closing slot kept its lease");
	IOT_CHECK(iot_stop_nsio(pid) == 0, "nsio exit");
	iot_cleanup_register(NULL, 0, model);
	ns_session_destroy(&s);
}

/* Model on tmpfs: where O_DIRECT is refused (kernels before 6.6; forced otherwise with the
 * NS_NSIO_FAULT_NO_DIRECT fault injection), nsio says so once and reads buffered, same bytes. */
static void s_tmpfs(void)
{
	char model[256], out[8192], err[NS_ERR_LEN];
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	struct ns_session *s;
	struct iot_ref ref;
	struct ns_client *c;
	const char *args[8];
	int fds[2], st;
	size_t got = 0;
	ssize_t r;
	pid_t pid;

	snprintf(model, sizeof(model), "/dev/shm/nstest-model-%d.gguf", (int)getpid());
	iot_write_model(model, iot_small_model, NS_ARRAY_LEN(iot_small_model), 1);
	iot_cleanup_register(NULL, 0, model);
	iot_ref_open(&ref, model);
	p.arena_bytes = 1 << 20;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "session: %s", err);
	iot_cleanup_register(s, 0, model);
	args[0] = ns_nsio_path(out, sizeof(out));
	args[1] = "--session"; args[2] = s->id; args[3] = "--model"; args[4] = model;
	args[5] = NULL;
	IOT_CHECK(pipe(fds) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		setenv("NS_NSIO_FAULT_NO_DIRECT", "1", 1);
		execv(args[0], (char *const *)args);
		_exit(127);
	}
	close(fds[1]);
	IOT_CHECK(ns_nsio_wait_running(s->ctl, pid, 0, 20000, &st) == 0, "nsio on tmpfs");
	iot_cleanup_register(s, pid, model);
	IOT_CHECK(atomic_load(&s->ctl->direct) == 0, "O_DIRECT on tmpfs?");
	IOT_CHECK(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "open: %s", err);
	for (uint64_t t = 0; t < ns_client_n_tensors(c); t++) {
		struct ns_client_tensor ti;
		struct ns_block b;
		uint64_t tk, n;

		ns_client_tensor(c, t, &ti);
		n = ti.n_rows < 7 ? ti.n_rows : 7;
		IOT_CHECK(ns_client_request(c, t, ti.n_rows - n, n, &tk) == 0, "request");
		IOT_CHECK(ns_client_wait(c, tk, &b) == 0, "wait");
		IOT_CHECK(iot_block_ok(&ref, &b), "tmpfs block of tensor %llu differs",
			  (unsigned long long)t);
		ns_client_retire(c, &b);
	}
	ns_client_close(&c);
	IOT_CHECK(iot_stop_nsio(pid) == 0, "nsio exit");
	while (got + 1 < sizeof(out) && (r = read(fds[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = '\0';
	close(fds[0]);
	{
		char *first = strstr(out, "O_DIRECT refused");
		IOT_CHECK(first && !strstr(first + 1, "O_DIRECT refused"),
			  "fallback not announced exactly once: '%s'", out);
	}
	iot_cleanup_register(NULL, 0, model);
	ns_session_destroy(&s);
	iot_ref_close(&ref);
	unlink(model);
}

/* A model split over two shards: nsio opens and registers both; blocks from either equal a
 * pread of the right shard file. */
static void s_split(void)
{
	char base[4096], path[2][4096], err[NS_ERR_LEN], name[32];
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	const char *extra[] = { "--quiet", "--queue-depth", "3", "--block-bytes", "8K", NULL };
	struct ns_session *s;
	struct ns_model *m;
	struct ns_client *c;
	int fds[2];
	pid_t pid;

	iot_scratch(base, sizeof(base), "split");
	base[strlen(base) - 5] = '\0'; /* drop ".gguf" */
	for (int k = 0; k < 2; k++) {
		struct ns_gguf_writer *w = ns_gguf_writer_new(32);

		snprintf(path[k], sizeof(path[k]), "%s-%05d-of-00002.gguf", base, k + 1);
		ns_gguf_writer_set_str(w, "general.architecture", "llama");
		ns_gguf_writer_set_u32(w, "split.count", 2);
		ns_gguf_writer_set_u32(w, "split.no", (uint32_t)k);
		ns_gguf_writer_set_u32(w, "split.tensors.count", 6);
		for (int i = 0; i < 3; i++) {
			const struct iot_tensor_spec *sp = &iot_small_model[k * 3 + i];
			uint64_t ne[2] = { sp->ne0, sp->ne1 };
			snprintf(name, sizeof(name), "s%d.weight", k * 3 + i);
			ns_gguf_writer_add_tensor_lazy(w, name, sp->type, 2, ne, iot_fill,
						       (void *)(uintptr_t)(k * 3 + i + 1));
		}
		IOT_CHECK(ns_gguf_writer_write_file(w, path[k], err, sizeof(err)) == 0, "%s", err);
		ns_gguf_writer_destroy(&w);
		fds[k] = open(path[k], O_RDONLY);
	}
	IOT_CHECK(ns_model_open(path[1], &m, err, sizeof(err)) == 0 && m->n_shards == 2,
		  "split model: %s", err);
	p.arena_bytes = 1 << 20;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "session: %s", err);
	pid = iot_start_nsio(s, path[1], extra); /* any shard names the model */
	iot_cleanup_register(s, pid, path[0]);
	IOT_CHECK(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "open: %s", err);
	IOT_CHECK(ns_client_n_tensors(c) == 6, "tensors over both shards");
	for (uint64_t t = 0; t < 6; t++) {
		const struct ns_model_tensor *mt = &m->tensors[t];
		struct ns_block b;
		uint64_t tk, n = mt->n_rows < 50 ? mt->n_rows : 50, r0 = mt->n_rows - n;
		uint8_t *want = malloc(n * mt->row_bytes);

		IOT_CHECK(ns_client_request(c, t, r0, n, &tk) == 0 && ns_client_wait(c, tk, &b) == 0,
			  "read tensor %llu", (unsigned long long)t);
		IOT_CHECK(pread(fds[mt->shard], want, n * mt->row_bytes,
				(off_t)(mt->file_offset + r0 * mt->row_bytes)) ==
			  (ssize_t)(n * mt->row_bytes) && !memcmp(want, b.data, b.nbytes),
			  "tensor %llu (shard %u) differs", (unsigned long long)t, mt->shard);
		ns_client_retire(c, &b);
		free(want);
	}
	ns_client_close(&c);
	IOT_CHECK(iot_stop_nsio(pid) == 0, "nsio exit");
	iot_cleanup_register(NULL, 0, path[0]);
	ns_session_destroy(&s);
	ns_model_close(&m);
	for (int k = 0; k < 2; k++) {
		close(fds[k]);
		unlink(path[k]);
	}
}

struct s_count {
	const struct iot_ref *ref;
	uint64_t blocks;
};

static int s_ok_block(void *ctx, const struct ns_block *b)
{
	struct s_count *k = ctx;

	k->blocks++;
	return iot_block_ok(k->ref, b) ? 0 : -EIO;
}

/* --run-ahead: a consumer streaming the tensors in file order with nsio's lookahead and block
 * rows finds most blocks already read (cache hits), and the bytes are still right. rows:
 * --block-rows as given to nsio and to the consumer ("0": as large as the arena allows). */
static void s_run_ahead(const char *model, const struct iot_ref *ref, const char *rows)
{
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	const char *extra[] = { "--quiet", "--run-ahead", "--lookahead", "1", "--block-rows", rows,
				NULL };
	struct ns_session *s;
	struct ns_client *c;
	struct s_count k = { .ref = ref };
	char err[NS_ERR_LEN];
	uint64_t hits;
	pid_t pid;

	p.arena_bytes = 4 << 20;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "session: %s", err);
	pid = iot_start_nsio(s, model, extra);
	iot_cleanup_register(s, pid, model);
	IOT_CHECK(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "open: %s", err);
	for (int pass = 0; pass < 3; pass++) {
		for (uint64_t t = 0; t < ns_client_n_tensors(c); t++) {
			struct ns_client_tensor ti;

			ns_client_tensor(c, t, &ti);
			IOT_CHECK(ns_stream_linear(c, t, 0, ti.n_rows, strtoull(rows, NULL, 10), 1,
						   s_ok_block, &k) == 0, "stream %llu",
				  (unsigned long long)t);
			usleep(2000); /* compute time: lets nsio run ahead */
		}
	}
	ns_client_close(&c);
	hits = atomic_load(&s->ctl->stats.cache_hits);
	printf("run-ahead, --block-rows %s: %llu of %llu blocks were read ahead\n", rows,
	       (unsigned long long)hits, (unsigned long long)k.blocks);
	IOT_CHECK(hits * 4 >= k.blocks, "run-ahead (--block-rows %s) served only %llu of %llu "
		  "blocks", rows, (unsigned long long)hits, (unsigned long long)k.blocks);
	IOT_CHECK(atomic_load(&s->ctl->arena.peak) <= s->ctl->arena_bytes, "peak");
	IOT_CHECK(iot_stop_nsio(pid) == 0, "nsio exit");
	iot_cleanup_register(NULL, 0, model);
	ns_session_destroy(&s);
}

int main(void)
{
	char model[4096];
	struct iot_ref ref;

	signal(SIGPIPE, SIG_IGN);
	iot_scratch(model, sizeof(model), "budget");
	iot_write_model(model, iot_small_model, NS_ARRAY_LEN(iot_small_model), 1);
	iot_cleanup_register(NULL, 0, model);
	iot_ref_open(&ref, model);
	s_bad_usage(model);
	s_refuse_and_accept(model, &ref);
	s_bad_records(model);
	s_run_ahead(model, &ref, "16");
	s_run_ahead(model, &ref, "0");
	iot_ref_close(&ref);
	unlink(model);
	s_tmpfs();
	s_split();
	printf("ok\n");
	return 0;
}
