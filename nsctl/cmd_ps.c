/* nsctl ps [--json] [--clean] - the live sessions of this user: their processes with pids (so a
 * profiler can attach to nsio by pid) and nsio's counters from the control segment.
 *
 * Sessions are found as runtime directories; a session is live while one of its processes
 * holds its lock (shm/session.h), whatever its pids say. Its "procs" file, written by nsctl run
 * (lines "NAME PID START [wrapped:CMD]" and "model PATH"), names the processes; one counts as
 * running only while its pid names a process with that start time (not a reused pid). Dead
 * sessions are not shown; --clean removes them (segments and runtime dirs of ours), as every
 * session start does. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_opt.h"
#include "commands.h"
#include "json_text.h"
#include "ns_util.h"
#include "session.h"

static bool s_alive(int pid, unsigned long long start)
{
	return ns_proc_alive(pid, start);
}

/* A session of nsctl serve: the "serve" file beside "procs" holds its address and model
 * (cmd_serve.c). JSON: a "serve" member. */
static void s_serve_line(const char *dir, bool json)
{
	char path[PATH_MAX + 16], line[1024];
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/serve", dir) >= (int)sizeof(path) ||
	    !(f = fopen(path, "r")))
		return;
	if (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (json) {
			json_t *v = ns_json_text(line, strlen(line));
			char *t = v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;

			if (t)
				printf(",\"serve\":%s", t);
			free(t);
			json_decref(v);
		} else {
			printf("  serve      %s\n", line);
		}
	}
	fclose(f);
}

struct s_show_ctx {
	bool json, first;
	int n;
};

/* Print one live session. */
static int s_show(const char *id, const char *dir, void *arg)
{
	char path[PATH_MAX + 16], line[PATH_MAX + 64], name[32], err[256];
	struct s_show_ctx *x = arg;
	struct ns_session *s = NULL;
	struct ns_stats_snapshot st;
	bool json = x->json;
	FILE *f;
	int n = 0;

	if (ns_session_probe(id) != 1 || snprintf(path, sizeof(path), "%s/procs", dir) >=
	    (int)sizeof(path))
		return 0;
	f = fopen(path, "r"); /* none: a session nsctl did not start (nsio's own, a test's) */
	if (json)
		printf("%s{\"session\":\"%s\",\"procs\":[", x->first ? "" : ",", id);
	else
		printf("session %s\n", id);
	x->first = false;
	x->n++;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long start = 0;
		int pid = 0;

		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "model ", 6)) {
			if (!json)
				printf("  model      %s\n", line + 6);
			continue;
		}
		if (sscanf(line, "%31s %d %llu", name, &pid, &start) != 3)
			continue;
		if (json)
			printf("%s{\"name\":\"%s\",\"pid\":%d,\"alive\":%s}", n++ ? "," : "", name,
			       pid, s_alive(pid, start) ? "true" : "false");
		else
			printf("  %-10s pid %-8d %s%s%s\n", name, pid,
			       s_alive(pid, start) ? "running" : "gone",
			       strstr(line, " wrapped:") ? ", under: " : "",
			       strstr(line, " wrapped:") ? strstr(line, " wrapped:") + 9 : "");
	}
	if (f)
		fclose(f);
	if (json)
		printf("]"); /* procs */
	s_serve_line(dir, json);
	if (ns_session_attach(id, false, &s, err, sizeof(err)) == 0) {
		ns_stats_snapshot(s->ctl, &st);
		if (json)
			printf(",\"nsio\":{\"pid\":%d,\"gen\":%u,\"bytes_requested\":%llu,"
			       "\"bytes_device\":%llu,\"requests\":%llu,\"cache_hits\":%llu,"
			       "\"stall_ns\":%llu,\"arena_bytes\":%llu,\"arena_reserved\":%llu,"
			       "\"arena_peak\":%llu,\"restarts\":%llu,\"rejected\":%llu}}",
			       st.nsio_pid, st.nsio_gen,
			       (unsigned long long)st.bytes_requested,
			       (unsigned long long)st.bytes_device, (unsigned long long)st.requests,
			       (unsigned long long)st.cache_hits, (unsigned long long)st.stall_ns,
			       (unsigned long long)st.arena_bytes, (unsigned long long)st.arena_reserved,
			       (unsigned long long)st.arena_peak, (unsigned long long)st.restarts,
			       (unsigned long long)st.rejected);
		else
			printf("  nsio       pid %d (the process itself; generation %u): %llu bytes requested, %llu read "
			       "from the device, %llu requests, %llu cache hits, stall %.1f ms, "
			       "arena %llu of %llu bytes reserved (peak %llu), %llu restarts, "
			       "%llu records rejected\n", st.nsio_pid, st.nsio_gen,
			       (unsigned long long)st.bytes_requested,
			       (unsigned long long)st.bytes_device, (unsigned long long)st.requests,
			       (unsigned long long)st.cache_hits, st.stall_ns / 1e6,
			       (unsigned long long)st.arena_reserved,
			       (unsigned long long)st.arena_bytes, (unsigned long long)st.arena_peak,
			       (unsigned long long)st.restarts, (unsigned long long)st.rejected);
		ns_session_destroy(&s);
	} else if (json) {
		printf("}");
	} else {
		printf("  (control segment not readable: %s)\n", err);
	}
	return 0;
}

enum { O_HELP = 1, O_JSON, O_CLEAN };

static const struct ns_opt s_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	{ "json", NULL, NS_OPT_SWITCH, O_JSON },
	{ "clean", NULL, NS_OPT_SWITCH, O_CLEAN },
};

struct s_args {
	bool json, clean;
};

static int s_on_opt(void *user, const struct ns_opt *o, const char *f, const char *v)
{
	struct s_args *a = user;

	(void)f;
	switch (o ? o->id : 0) {
	case O_HELP:
		printf("usage: nsctl ps [--json] [--clean]\n  --clean: remove the segments "
		       "and runtime dirs of this user's dead sessions first\n");
		exit(0);
	case O_JSON:
		a->json = true;
		return 0;
	case O_CLEAN:
		a->clean = true;
		return 0;
	}
	fprintf(stderr, "nsctl ps: unknown argument '%s' (usage: nsctl ps [--json] [--clean])\n",
		v);
	return -EINVAL;
}

int cmd_ps(int argc, char **argv)
{
	struct s_show_ctx x = { .first = true };
	struct s_args a = { 0 };
	bool clean;

	if (ns_opt_parse("nsctl ps", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt, &a))
		return 2;
	x.json = a.json;
	clean = a.clean;
	if (clean) {
		int n = ns_session_sweep();

		fprintf(stderr, "nsctl ps: removed %d dead session%s and stray segment%s\n", n,
			n == 1 ? "" : "s", n == 1 ? "" : "s");
	}
	if (x.json)
		printf("[");
	ns_session_each(s_show, &x);
	if (x.json)
		printf("]\n");
	else if (!x.n)
		printf("no live sessions\n");
	return 0;
}
