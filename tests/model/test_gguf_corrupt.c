/* Truncation and bit-flip robustness: every GGUF in the oracle, cut at N random offsets
 * (NS_CORRUPT_TRIALS, default 400; `make test` takes 60 under the sanitizers; deep fuzzing
 * is `make fuzz`) and with random header bytes flipped N times, must either open
 * consistently or fail with one line -- never crash, hang or over-allocate (run under
 * ASan+UBSan in CI). The files live in a memfd so a trial costs no disk I/O. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf.h"
#include "ns_test.h"
#include "ns_util.h"

static char *s_files[256];
static int s_n_files;
static uint64_t s_rng = 0x243f6a8885a308d3ull;

static uint64_t s_rand(void)
{
	s_rng ^= s_rng << 13;
	s_rng ^= s_rng >> 7;
	s_rng ^= s_rng << 17;
	return s_rng;
}

static int s_collect(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	size_t n = strlen(path);

	(void)st;
	(void)ftw;
	if (flag == FTW_F && n > 5 && !strcmp(path + n - 5, ".gguf") && s_n_files < 256)
		s_files[s_n_files++] = strdup(path);
	return 0;
}

static void s_on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "test_gguf_corrupt: a trial hung\n";
	ssize_t w = write(2, msg, sizeof(msg) - 1);
	(void)w;
	_exit(1);
}

/* Opening must succeed with a self-consistent index, or fail with a one-line message. */
static int s_trial(const char *fdpath, uint64_t size, const char *what, uint64_t at)
{
	struct ns_gguf *g = NULL;
	char err[NS_ERR_LEN];
	int ret = ns_gguf_open(fdpath, &g, err, sizeof(err));

	if (ret == 0) {
		for (uint64_t i = 0; i < g->n_tensors; i++) {
			const struct ns_gguf_tensor *t = &g->tensors[i];
			if (t->file_offset + t->n_bytes > size || t->file_offset < g->data_offset) {
				fprintf(stderr, "%s at %llu: accepted tensor outside the file\n", what,
					(unsigned long long)at);
				ns_gguf_close(&g);
				return -1;
			}
		}
		ns_gguf_close(&g);
		return 0;
	}
	if (!strstr(err, "offset ") || strchr(err, '\n') || !err[0]) {
		fprintf(stderr, "%s at %llu: bad error line: %s\n", what, (unsigned long long)at, err);
		return -1;
	}
	return 0;
}

static int s_cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Files whose header is over 1 MiB (the 150k-200k-token vocabularies) cost ~40 ms a parse
 * (~200 ms under ASan): they get 15% of the trials so the suite stays within CI's time. */
#define S_BIG_HEADER_SHARE 15

static int s_file(const char *path, int *trials_io)
{
	int trials = *trials_io;
	uint8_t *data;
	size_t len = 0;
	struct ns_gguf *g = NULL;
	char err[NS_ERR_LEN], fdpath[64];
	uint64_t header_end;
	int fd, bad = 0;

	if (ns_gguf_open(path, &g, err, sizeof(err))) {
		fprintf(stderr, "oracle file does not open: %s\n", err);
		return 1;
	}
	header_end = g->data_offset < g->file_size ? g->data_offset : g->file_size;
	ns_gguf_close(&g);
	if (header_end > (1u << 20))
		trials = trials * S_BIG_HEADER_SHARE / 100 > 10 ? trials * S_BIG_HEADER_SHARE / 100 : 10;
	*trials_io = trials;
	data = ns_test_read_file(path, &len);
	if (!data)
		return 1;
	fd = memfd_create("gguf", 0);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len) {
		perror("memfd");
		return 1;
	}
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	/* Cut points in descending order: each trial only shrinks the file further, so no trial
	 * pays to restore the bytes the previous one removed. */
	uint64_t *cuts = malloc((size_t)trials * sizeof(*cuts));
	if (!cuts)
		return 1;
	for (int i = 0; i < trials; i++) /* half inside the header, where parsing happens */
		cuts[i] = (i & 1) ? s_rand() % len : s_rand() % (header_end + 1);
	qsort(cuts, (size_t)trials, sizeof(*cuts), s_cmp_desc);
	for (int i = 0; i < trials && !bad; i++) {
		alarm(20);
		if (ftruncate(fd, (off_t)cuts[i]) < 0)
			return 1;
		bad |= s_trial(fdpath, cuts[i], "truncated", cuts[i]) != 0;
	}
	free(cuts);
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, len, 0) != (ssize_t)len)
		return 1;
	for (int i = 0; i < trials && !bad; i++) {
		int flips = 1 + (int)(s_rand() % 4);
		uint64_t at[4];
		for (int k = 0; k < flips; k++) {
			at[k] = s_rand() % (header_end ? header_end : 1);
			uint8_t v = data[at[k]] ^ (uint8_t)(1u << (s_rand() % 8));
			if (s_rand() % 4 == 0)
				v = (uint8_t)s_rand(); /* sometimes a whole random byte */
			if (pwrite(fd, &v, 1, (off_t)at[k]) != 1)
				return 1;
		}
		alarm(20);
		bad |= s_trial(fdpath, len, "flipped", at[0]) != 0;
		for (int k = 0; k < flips; k++)
			if (pwrite(fd, data + at[k], 1, (off_t)at[k]) != 1)
				return 1;
	}
	alarm(0);
	close(fd);
	free(data);
	if (bad)
		fprintf(stderr, "FAIL: %s\n", path);
	return bad;
}

int main(void)
{
	const char *env = getenv("NS_CORRUPT_TRIALS");
	int trials = env ? atoi(env) : 400;
	int failed = 0;

	ns_test_require_oracle();
	signal(SIGALRM, s_on_alarm);
	if (nftw(ns_test_oracle_dir(), s_collect, 16, FTW_PHYS) != 0 || s_n_files == 0) {
		fprintf(stderr, "no GGUF files under %s\n", ns_test_oracle_dir());
		return 1;
	}
	for (int i = 0; i < s_n_files; i++) {
		uint64_t t0 = ns_now_ns();
		int n = trials;
		int bad = s_file(s_files[i], &n);
		printf("%s %s: %d truncations + %d flips in %.1f s\n", bad ? "FAIL" : "ok  ",
		       s_files[i], n, n, (double)(ns_now_ns() - t0) / 1e9);
		failed += bad;
		free(s_files[i]);
	}
	printf("%d passed, %d failed\n", s_n_files - failed, failed);
	return failed ? 1 : 0;
}
