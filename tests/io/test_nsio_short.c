/* test_nsio_short.c - a model file shorter than its tensors say:
 *  - truncated before nsio starts (the last tensor's second half past the end): nsio exits 2
 *    with one line naming the file and the tensor;
 *  - truncated while nsio serves it: a request for rows past the new end completes with an
 *    error (not a hang, not stale bytes), nsio says which rows and that the file now ends
 *    early, and the rows still in the file keep being served byte-exact.
 * Every wait is bounded by an alarm: a hang fails the test. */
#include "io_testlib.h"

#define S_LIMIT_S 60 /* the whole test; a hang is a failure, not a CI timeout */

/* The byte at which the last tensor's row `row` starts: cut there, rows row.. are past EOF. */
static uint64_t s_cut_at(const struct ns_model_tensor *t, uint64_t row)
{
	return t->file_offset + row * t->row_bytes;
}

static void s_refused_at_start(const char *short_model, const struct ns_model_tensor *t)
{
	char out[4096];
	const char *args[] = { "--model", short_model, "--mem-budget", "8MB", NULL };
	int rc = iot_run_nsio(args, out, sizeof(out));
	char *nl = strchr(out, '\n');

	IOT_CHECK(rc == 2 && strstr(out, short_model) && strstr(out, t->name) &&
		  strstr(out, "truncated") && nl && !nl[1],
		  "short file at start: exit %d, '%s' (want exit 2, one line naming %s)", rc, out,
		  t->name);
	printf("refused at start: %s", out);
}

/* Request rows [row0, row0 + nrows) of tensor ti and wait; the wait's status. */
static int s_read(struct ns_client *c, uint64_t ti, uint64_t row0, uint64_t nrows,
		  const struct iot_ref *ref, bool *same)
{
	struct ns_block b;
	uint64_t ticket;
	int rc;

	IOT_CHECK(ns_client_request(c, ti, row0, nrows, &ticket) == 0, "request");
	rc = ns_client_wait(c, ticket, &b);
	if (rc < 0)
		return rc;
	*same = iot_block_ok(ref, &b);
	IOT_CHECK(ns_client_retire(c, &b) == 0, "retire");
	return 0;
}

static void s_truncated_in_use(const char *model, const struct iot_ref *ref, uint64_t ti,
			       uint64_t cut_row, const char *log)
{
	const struct ns_model_tensor *t = &ref->m->tensors[ti];
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	const char *extra[] = { "--quiet", NULL };
	struct ns_session *s;
	struct ns_client *c;
	char err[NS_ERR_LEN], said[4096] = "";
	int saved, lfd, rc;
	bool same = false;
	FILE *f;
	pid_t pid;

	p.arena_bytes = 8 << 20;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "session: %s", err);
	/* nsio's stderr (inherited) into the log file */
	lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	IOT_CHECK(lfd >= 0, "open %s", log);
	fflush(stderr);
	saved = dup(2);
	IOT_CHECK(saved >= 0 && dup2(lfd, 2) == 2, "dup2");
	pid = iot_start_nsio(s, model, extra);
	dup2(saved, 2);
	close(saved);
	close(lfd);
	iot_cleanup_register(s, pid, model);
	IOT_CHECK(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "open: %s", err);

	IOT_CHECK(s_read(c, 0, 0, 1, ref, &same) == 0 && same, "before the cut");
	IOT_CHECK(truncate(model, (off_t)s_cut_at(t, cut_row)) == 0, "truncate: %s",
		  strerror(errno));
	rc = s_read(c, ti, cut_row, 2, ref, &same);
	IOT_CHECK(rc < 0, "rows past the new end were served (%s)", same ? "same bytes" :
		  "other bytes");
	printf("rows %llu..%llu of %s past the new end: %s\n", (unsigned long long)cut_row,
	       (unsigned long long)cut_row + 2, t->name, strerror(-rc));
	/* the rows still in the file: served, byte-exact */
	IOT_CHECK(s_read(c, ti, cut_row - 2, 2, ref, &same) == 0 && same, "rows before the cut");
	IOT_CHECK(s_read(c, 0, 0, 1, ref, &same) == 0 && same, "first tensor");

	ns_client_close(&c);
	IOT_CHECK(iot_stop_nsio(pid) == 0, "nsio exit");
	iot_cleanup_register(NULL, 0, model);
	ns_session_destroy(&s);
	f = fopen(log, "r");
	IOT_CHECK(f, "read %s", log);
	said[fread(said, 1, sizeof(said) - 1, f)] = '\0';
	fclose(f);
	unlink(log);
	IOT_CHECK(strstr(said, t->name) && strstr(said, "now ends at"),
		  "nsio said: '%s' (want the tensor and 'now ends at')", said);
	printf("nsio said: %s", said);
}

int main(void)
{
	char model[4096], short_model[4096], log[4096];
	struct iot_ref ref;
	const struct ns_model_tensor *t;
	uint64_t ti, cut_row;

	alarm(S_LIMIT_S);
	iot_scratch(model, sizeof(model), "short");
	iot_scratch(short_model, sizeof(short_model), "short-cut");
	iot_scratch(log, sizeof(log), "short-log");
	iot_cleanup_register(NULL, 0, model);
	iot_write_model(model, iot_small_model, NS_ARRAY_LEN(iot_small_model), 1);
	iot_ref_open(&ref, model);
	ti = ref.m->n_tensors - 1; /* the last tensor in the file: its rows end the data */
	t = &ref.m->tensors[ti];
	for (uint64_t i = 0; i < ref.m->n_tensors; i++)
		if (ref.m->tensors[i].file_offset > t->file_offset)
			t = &ref.m->tensors[ti = i];
	cut_row = t->n_rows / 2;
	IOT_CHECK(cut_row >= 2, "tensor %s too short", t->name);

	/* the same model again (the bytes are deterministic), cut inside tensor t */
	iot_write_model(short_model, iot_small_model, NS_ARRAY_LEN(iot_small_model), 1);
	IOT_CHECK(truncate(short_model, (off_t)s_cut_at(t, cut_row)) == 0, "truncate: %s",
		  strerror(errno));
	s_refused_at_start(short_model, t);
	unlink(short_model);

	s_truncated_in_use(model, &ref, ti, cut_row, log);
	iot_ref_close(&ref);
	unlink(model);
	printf("ok\n");
	return 0;
}
