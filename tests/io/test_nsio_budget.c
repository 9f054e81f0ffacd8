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

/* Run nsio with args, capture stderr; returns exit status. */
static int s_run_nsio(const char *const *args, char *out, size_t n)
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
		int rc = s_run_nsio(cases[i], out, sizeof(out));
		IOT_CHECK(rc == 2 && strstr(out, "nsio: "), "bad usage case %zu: exit %d, '%s'", i,
			  rc, out);
	}
	IOT_CHECK(s_run_nsio(a6, out, sizeof(out)) != 0 && strstr(out, "nonexistent"),
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
	rc = s_run_nsio(args, out, sizeof(out));
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
	rc = s_run_nsio(args, out, sizeof(out));
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
	iot_ref_close(&ref);
	unlink(model);
	printf("ok\n");
	return 0;
}
