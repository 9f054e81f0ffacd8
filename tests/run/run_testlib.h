/* run_testlib.h - helpers of the tests/run programs (header-only): running nsctl with its
 * output in files, JSON strings from oracle sidecars, leftovers of a session. */
#ifndef NS_RUN_TESTLIB_H
#define NS_RUN_TESTLIB_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "forward/json_ints.h"
#include "ns_test.h"

#define RT_CHECK(cond, ...) NS_REQUIRE(cond, __VA_ARGS__)

/* Start argv with stdout and stderr redirected to files (NULL: inherited). */
static inline pid_t rt_start(char *const argv[], const char *out, const char *err)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		if (out) {
			int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd < 0 || dup2(fd, 1) < 0)
				_exit(126);
			close(fd);
		}
		if (err) {
			int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd < 0 || dup2(fd, 2) < 0)
				_exit(126);
			close(fd);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Exit code (128 + signal when killed), -1 on failure. */
static inline int rt_wait(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline int rt_run(char *const argv[], const char *out, const char *err)
{
	return rt_wait(rt_start(argv, out, err));
}

/* The decoded JSON string at a top-level key (\" \\ \/ \n \t \uXXXX below 0x80 only),
 * malloc'd, or NULL. */
static inline char *rt_json_str(const char *json, const char *key)
{
	const char *p = json_member(json, key, strlen(key));
	char *out, *o;

	if (!p || *(p = json_ws(p)) != '"' || !(out = malloc(strlen(p) + 1)))
		return NULL;
	for (o = out, p++; *p && *p != '"'; p++) {
		if (*p != '\\') {
			*o++ = *p;
			continue;
		}
		switch (*++p) {
		case 'n': *o++ = '\n'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			unsigned v;

			if (sscanf(p + 1, "%4x", &v) != 1 || v >= 0x80) {
				free(out);
				return NULL;
			}
			*o++ = (char)v;
			p += 4;
			break;
		}
		case 0: free(out); return NULL;
		default: *o++ = *p; break;
		}
	}
	*o = 0;
	return out;
}

/* nsctl run --json puts the object alone on stdout. For tests written when it went to stderr
 * after the text on stdout: *text (stdout, the object) becomes its "content" plus the final
 * newline, and the object is appended to *err. false (both left as they were) when stdout is
 * not such an object. */
static inline bool rt_json_split(char **text, char **err)
{
	char *content, *both;
	size_t n;

	if (!*text || !*err || strncmp(*text, "{\"session\"", 10) ||
	    !(content = rt_json_str(*text, "content")))
		return false;
	n = strlen(*err) + strlen(*text) + 1;
	if (!(both = malloc(n)))
		abort(); /* a test's few bytes */
	snprintf(both, n, "%s%s", *err, *text);
	free(*text);
	if (!(*text = malloc(strlen(content) + 2)))
		abort();
	snprintf(*text, strlen(content) + 2, "%s\n", content);
	free(content);
	free(*err);
	*err = both;
	return true;
}

/* The session id nsctl run printed on stderr ("session ID:"), into id (17 bytes). */
static inline bool rt_session_id(const char *err_file, char *id, size_t n)
{
	size_t len;
	char *t = ns_test_read_file(err_file, &len), *p;
	bool ok = false;

	if (t && (p = strstr(t, "session ")) && sscanf(p + 8, "%16[A-Za-z0-9_]", id) == 1)
		ok = strlen(id) < n;
	free(t);
	return ok;
}

/* A pid nsctl run printed on stderr ("NAME pid N"), or 0. */
static inline pid_t rt_child_pid(const char *err_file, const char *name)
{
	size_t len;
	char *t = ns_test_read_file(err_file, &len), *p, pat[64];
	int pid = 0;

	snprintf(pat, sizeof(pat), "%s pid ", name);
	if (t && (p = strstr(t, pat)))
		pid = atoi(p + strlen(pat));
	free(t);
	return pid;
}

/* /dev/shm entries whose name contains the session id. */
static inline int rt_shm_count(const char *id)
{
	struct dirent *de;
	DIR *d = opendir("/dev/shm");
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (strstr(de->d_name, id))
			n++;
	closedir(d);
	return n;
}

/* Runtime directories (XDG_RUNTIME_DIR or /tmp) whose name ends with the id. */
static inline int rt_rundir_count(const char *id)
{
	const char *dirs[2] = { getenv("XDG_RUNTIME_DIR"), "/tmp" };
	int n = 0;

	for (int i = 0; i < 2; i++) {
		struct dirent *de;
		DIR *d = dirs[i] && *dirs[i] ? opendir(dirs[i]) : NULL;

		while (d && (de = readdir(d))) {
			size_t l = strlen(de->d_name), k = strlen(id);

			if (!strncmp(de->d_name, "neurostream-", 12) && l >= k &&
			    !strcmp(de->d_name + l - k, id))
				n++;
		}
		if (d)
			closedir(d);
	}
	return n;
}

static inline bool rt_pid_alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* nsctl under test: argv[1] of the test, else $NS_BUILD_ROOT/nsctl/nsctl. */
static inline const char *rt_nsctl(int argc, char **argv, char *buf, size_t n)
{
	const char *root = getenv("NS_BUILD_ROOT");

	if (argc > 1 && argv[1][0] == '/')
		return argv[1];
	snprintf(buf, n, "%s/nsctl/nsctl", root ? root : ".");
	return buf;
}

/* Every helper of json_ints.h counts as used in every test. */
static inline void rt_json_used(void)
{
	(void)json_ints;
}

#endif
