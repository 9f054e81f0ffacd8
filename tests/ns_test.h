/* ns_test.h - helpers shared by the test programs (header-only).
 *
 * Reference data lives in ../shared/oracle (meson passes NS_ORACLE_DIR). A test that needs it
 * and cannot find it skips (exit 77) on a developer machine and fails when CI=true, so CI can
 * never go green by skipping its oracle checks. */
#ifndef NS_TEST_H
#define NS_TEST_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NS_TEST_SKIP 77

static inline const char *ns_test_oracle_dir(void)
{
	const char *d = getenv("NS_ORACLE_DIR");
	return (d && *d) ? d : "../shared/oracle";
}

/* Build "<oracle>/<rel>" into buf; returns buf. */
static inline char *ns_test_oracle_path(char *buf, size_t n, const char *rel)
{
	snprintf(buf, n, "%s/%s", ns_test_oracle_dir(), rel);
	return buf;
}

/* Exit 77 (skip) or 1 (CI=true) when the oracle directory is missing. Call first in main(). */
static inline void ns_test_require_oracle(void)
{
	struct stat st;
	const char *ci = getenv("CI");

	if (stat(ns_test_oracle_dir(), &st) == 0 && S_ISDIR(st.st_mode))
		return;
	if (ci && strcmp(ci, "true") == 0) {
		fprintf(stderr, "oracle data missing at %s and CI=true: failing\n",
			ns_test_oracle_dir());
		exit(1);
	}
	fprintf(stderr, "oracle data missing at %s: skipping\n", ns_test_oracle_dir());
	exit(NS_TEST_SKIP);
}

/* One "FAIL file:line: message" line on stderr. NS_FAIL exits 1; NS_REQUIRE exits 1 when cond
 * is false; NS_EXPECT counts the failure in `fails` and goes on (for tests that report all). */
#define NS_FAIL(...)                                                         \
	do {                                                                 \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);         \
		fprintf(stderr, __VA_ARGS__);                                \
		fputc('\n', stderr);                                         \
		exit(1);                                                     \
	} while (0)
#define NS_REQUIRE(cond, ...)                                                \
	do {                                                                 \
		if (!(cond))                                                 \
			NS_FAIL(__VA_ARGS__);                                \
	} while (0)
#define NS_EXPECT(fails, cond, ...)                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
			(fails)++;                                           \
		}                                                            \
	} while (0)

/* Cosine of two float vectors in double (1 for two zero vectors, 0 for one), and their
 * largest absolute difference (NaN wins: a NaN anywhere is never within a tolerance). */
static inline double ns_test_cosine(const float *a, const float *b, uint64_t n)
{
	double ab = 0, aa = 0, bb = 0;

	for (uint64_t i = 0; i < n; i++) {
		ab += (double)a[i] * b[i];
		aa += (double)a[i] * a[i];
		bb += (double)b[i] * b[i];
	}
	return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
}

static inline double ns_test_maxdiff(const float *a, const float *b, uint64_t n)
{
	double w = 0;

	for (uint64_t i = 0; i < n; i++) {
		const double d = fabs((double)a[i] - b[i]);

		w = d > w || d != d ? d : w;
	}
	return w;
}

/* Read a whole (small) file; returns malloc'd buffer or NULL. */
static inline void *ns_test_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	void *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		if (buf) {
			((char *)buf)[n] = '\0';
			*len = (size_t)n;
		}
	}
	fclose(f);
	return buf;
}

/* The unsigned integer after the first "key": in a JSON text; fails the test when absent. */
static inline uint64_t ns_test_json_u64(const char *json, const char *key)
{
	char k[96];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\":", key);
	NS_REQUIRE(json && (p = strstr(json, k)), "no %s in: %.400s", key, json ? json : "(none)");
	return strtoull(p + strlen(k), NULL, 10);
}

/* A whole text file, or the test fails. Caller frees. */
static inline char *ns_test_read_text(const char *path)
{
	size_t len;
	char *b = ns_test_read_file(path, &len);

	NS_REQUIRE(b, "cannot read %s", path);
	return b;
}

/* A scratch file path /tmp/<tag>_<pid>.<suffix>, removed at exit (also when a check fails).
 * ns_test_scratch(NULL, NULL) removes them (registered with atexit on first use). The
 * returned string lives until exit; at most 8 per test program. */
static inline char *ns_test_scratch(const char *tag, const char *suffix)
{
	static char paths[8][192];
	static int n;

	if (!tag) {
		for (int i = 0; i < n; i++)
			unlink(paths[i]);
		return NULL;
	}
	NS_REQUIRE(n < 8, "more than 8 scratch files");
	snprintf(paths[n], sizeof(paths[n]), "/tmp/%s_%d.%s", tag, (int)getpid(), suffix);
	return paths[n++];
}

static inline void ns_test_scratch_remove(void)
{
	ns_test_scratch(NULL, NULL);
}

#endif
