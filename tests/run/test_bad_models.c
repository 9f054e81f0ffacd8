/* test_bad_models.c - nsio and its client when the model file shrinks under a running nsio
 * (the process-level cases are in test_bad_models.py).
 *
 * A model is written next to the build, nsio serves it (O_DIRECT, then buffered with
 * --no-direct), a client reads every tensor once; then the file is truncated at a point that is
 * not 4 KiB-aligned, inside the rows of one tensor. Every read must end (watchdog: 20 s):
 *   - rows wholly before the cut: delivered, equal to a pread of the same bytes;
 *   - rows that straddle the cut or lie after it: an error completion, -EIO (the data is not
 *     there: neither a hang waiting for bytes, nor a block of zeros, nor an error that blames
 *     the request, such as -EINVAL from an O_DIRECT read continued at an unaligned offset);
 *   - nsio keeps serving (a good read afterwards works) and exits 0 on SIGTERM.
 * Then O_DIRECT reads cut short at unaligned counts inside the file, and reads that return
 * less than one block there (s_case_short_reads).
 * Exit 0 pass, 1 fail. */
#include "io_testlib.h"

#include <sys/stat.h>

static void *s_watchdog(void *arg)
{
	(void)arg;
	sleep(20);
	fprintf(stderr, "FAIL: a read did not end within 20 s (hang)\n");
	iot_cleanup_run();
	_exit(1);
}

/* Read rows [row0, row0 + n) of tensor t; returns the wait's status. ok: compare with pread. */
static int s_read(struct ns_client *c, const struct iot_ref *ref, uint64_t t, uint64_t row0,
		  uint64_t n, bool *same)
{
	struct ns_block b;
	uint64_t tk;
	int rc;

	IOT_CHECK(ns_client_request(c, t, row0, n, &tk) == 0, "request");
	rc = ns_client_wait(c, tk, &b);
	if (rc == 0) {
		*same = iot_block_ok(ref, &b);
		ns_client_retire(c, &b);
	}
	return rc;
}

static void s_case(bool direct)
{
	static const struct iot_tensor_spec spec[] = {
		{ NS_TYPE_F32, 2048, 40 },   /* 8192 B rows, aligned */
		{ NS_TYPE_Q8_0, 4096, 60 },  /* 4352 B rows: rows straddle pages */
		{ NS_TYPE_F16, 1000, 50 },   /* 2000 B rows */
	};
	const char *extra_direct[] = { "--quiet", "--block-bytes", "64K", NULL };
	const char *extra_buffered[] = { "--quiet", "--block-bytes", "64K", "--no-direct", NULL };
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	char model[4000], errpath[4096], err[NS_ERR_LEN];
	int efd, saved;
	struct ns_session *s;
	struct ns_client *c;
	struct iot_ref ref;
	const struct ns_model_tensor *t1;
	uint64_t cut, cut_row;
	bool same = false;
	pid_t pid;
	int rc;

	iot_scratch(model, sizeof(model), direct ? "badmodel-direct" : "badmodel-buffered");
	iot_write_model(model, spec, NS_ARRAY_LEN(spec), 1);
	iot_ref_open(&ref, model);
	p.arena_bytes = 4 << 20;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "session: %s", err);
	/* nsio's stderr goes to a file: it must explain the failed reads once */
	snprintf(errpath, sizeof(errpath), "%s.stderr", model);
	efd = open(errpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	saved = dup(2);
	IOT_CHECK(efd >= 0 && saved >= 0 && dup2(efd, 2) == 2, "redirect stderr");
	pid = iot_start_nsio(s, model, direct ? extra_direct : extra_buffered);
	dup2(saved, 2);
	close(saved);
	iot_cleanup_register(s, pid, model);
	iot_cleanup_file(errpath);
	IOT_CHECK(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "client: %s", err);
	for (uint64_t t = 0; t < ns_client_n_tensors(c); t++) {
		struct ns_client_tensor ti;

		ns_client_tensor(c, t, &ti);
		IOT_CHECK(s_read(c, &ref, t, 0, ti.n_rows, &same) == 0 && same,
			  "tensor %llu before the cut", (unsigned long long)t);
	}

	/* cut tensor t1 (Q8_0, 4352 B rows) 3017 bytes into its row 20: not 4 KiB-aligned */
	t1 = &ref.m->tensors[1];
	cut_row = 20;
	cut = t1->file_offset + cut_row * t1->row_bytes + 3017;
	IOT_CHECK(cut % 4096 != 0, "cut %llu is aligned", (unsigned long long)cut);
	IOT_CHECK(truncate(model, (off_t)cut) == 0, "truncate: %s", strerror(errno));

	/* wholly before the cut: intact bytes */
	rc = s_read(c, &ref, 0, 0, 40, &same);
	IOT_CHECK(rc == 0 && same, "%s: tensor 0 (before the cut): status %d, same %d",
		  direct ? "O_DIRECT" : "buffered", rc, same);
	rc = s_read(c, &ref, 1, 0, cut_row, &same);
	IOT_CHECK(rc == 0 && same, "%s: tensor 1 rows 0..%llu (before the cut): status %d",
		  direct ? "O_DIRECT" : "buffered", (unsigned long long)cut_row, rc);
	/* straddling: the first rows are there, the rest is not */
	rc = s_read(c, &ref, 1, cut_row - 2, 8, &same);
	IOT_CHECK(rc == -EIO, "%s: rows straddling the end of the file: status %d (%s), want -EIO",
		  direct ? "O_DIRECT" : "buffered", rc, rc ? strerror(-rc) : "delivered");
	/* the cut row alone (its first 3017 bytes exist) */
	rc = s_read(c, &ref, 1, cut_row, 1, &same);
	IOT_CHECK(rc == -EIO, "%s: the row cut in two: status %d (%s), want -EIO",
		  direct ? "O_DIRECT" : "buffered", rc, rc ? strerror(-rc) : "delivered");
	/* wholly after the cut */
	rc = s_read(c, &ref, 2, 10, 5, &same);
	IOT_CHECK(rc == -EIO, "%s: rows after the end of the file: status %d (%s), want -EIO",
		  direct ? "O_DIRECT" : "buffered", rc, rc ? strerror(-rc) : "delivered");
	/* nsio still serves */
	rc = s_read(c, &ref, 0, 3, 7, &same);
	IOT_CHECK(rc == 0 && same, "%s: a good read after the failed ones: status %d",
		  direct ? "O_DIRECT" : "buffered", rc);
	ns_client_close(&c);
	IOT_CHECK(iot_stop_nsio(pid) == 0, "nsio exit status");
	{
		char out[4096], want[256];
		ssize_t n = pread(efd, out, sizeof(out) - 1, 0);
		const char *hit, *nl;

		out[n > 0 ? n : 0] = '\0';
		snprintf(want, sizeof(want), "t1.weight rows %llu..%llu need bytes ",
			 (unsigned long long)cut_row - 2, (unsigned long long)cut_row + 6);
		hit = strstr(out, want);
		snprintf(want, sizeof(want), "but the file now ends at %llu (truncated while in use?)",
			 (unsigned long long)cut);
		nl = strchr(out, '\n');
		IOT_CHECK(hit && strstr(hit, want) && nl && !strchr(nl + 1, '\n'),
			  "%s: nsio's stderr does not explain the short file in one line: '%s'",
			  direct ? "O_DIRECT" : "buffered", out);
	}
	close(efd);
	unlink(errpath);
	iot_cleanup_register(NULL, 0, model);
	ns_session_destroy(&s);
	iot_ref_close(&ref);
	unlink(model);
	printf("ok: %s: reads across a shrunken file end with -EIO, intact rows are served\n",
	       direct ? "O_DIRECT" : "buffered");
}

/* O_DIRECT reads that stop short at an unaligned count in the middle of the file (forced with
 * nsio's test hook NS_NSIO_FAULT_SHORT_READ=1: reads over 8 KiB complete 1000 bytes short):
 * nsio must read the rest again from an aligned offset. Continuing at the unaligned position
 * fails with -EINVAL on ext4/XFS (and reads whatever a more lenient filesystem returns).
 * NS_NSIO_FAULT_SHORT_READ=tiny: a chunk's first read returns 512 bytes, less than one block,
 * with no aligned progress; nsio must try the read again, not fail it as if the file ended
 * there. Every tensor must come back equal to a pread of its bytes, and nsio must have seen
 * short reads. */
static void s_case_short_reads(const char *mode)
{
	static const struct iot_tensor_spec spec[] = {
		{ NS_TYPE_F32, 2048, 40 },   /* 8192 B rows */
		{ NS_TYPE_Q8_0, 4096, 60 },  /* 4352 B rows: rows straddle pages */
		{ NS_TYPE_F16, 1000, 50 },   /* 2000 B rows */
	};
	const char *extra[] = { "--quiet", "--block-bytes", "64K", NULL };
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	char model[4000], err[NS_ERR_LEN];
	struct ns_session *s;
	struct ns_client *c;
	struct iot_ref ref;
	bool same = false;
	uint64_t shorts;
	pid_t pid;
	int rc;

	iot_scratch(model, sizeof(model), "badmodel-short");
	iot_write_model(model, spec, NS_ARRAY_LEN(spec), 1);
	iot_ref_open(&ref, model);
	p.arena_bytes = 4 << 20;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "session: %s", err);
	IOT_CHECK(setenv("NS_NSIO_FAULT_SHORT_READ", mode, 1) == 0, "setenv");
	pid = iot_start_nsio(s, model, extra);
	unsetenv("NS_NSIO_FAULT_SHORT_READ");
	iot_cleanup_register(s, pid, model);
	IOT_CHECK(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "client: %s", err);
	for (uint64_t t = 0; t < ns_client_n_tensors(c); t++) {
		struct ns_client_tensor ti;

		ns_client_tensor(c, t, &ti);
		rc = s_read(c, &ref, t, 0, ti.n_rows, &same);
		IOT_CHECK(rc == 0 && same, "short O_DIRECT reads (%s): tensor %llu: status %d "
			  "(%s), same %d", mode, (unsigned long long)t, rc, rc ? strerror(-rc) : "delivered",
			  same);
		rc = s_read(c, &ref, t, 1, ti.n_rows - 2, &same);
		IOT_CHECK(rc == 0 && same, "short O_DIRECT reads (%s): tensor %llu rows 1..%llu: "
			  "status %d (%s)", mode, (unsigned long long)t,
			  (unsigned long long)ti.n_rows - 1, rc, rc ? strerror(-rc) : "delivered");
	}
	shorts = atomic_load(&s->ctl->stats.short_reads);
	ns_client_close(&c);
	IOT_CHECK(iot_stop_nsio(pid) == 0, "nsio exit status");
	IOT_CHECK(atomic_load(&s->ctl->direct) == 1 && shorts > 0,
		  "the test hook forced no short O_DIRECT read (direct %d, %llu short reads)",
		  (int)atomic_load(&s->ctl->direct), (unsigned long long)shorts);
	iot_cleanup_register(NULL, 0, model);
	ns_session_destroy(&s);
	iot_ref_close(&ref);
	unlink(model);
	printf("ok: O_DIRECT reads stopped short (%s: %llu) are finished from an aligned offset\n",
	       mode, (unsigned long long)shorts);
}

int main(void)
{
	pthread_t wd;

	IOT_CHECK(pthread_create(&wd, NULL, s_watchdog, NULL) == 0, "watchdog");
	pthread_detach(wd);
	s_case(true);
	s_case(false);
	s_case_short_reads("1");
	s_case_short_reads("tiny");
	return 0;
}
