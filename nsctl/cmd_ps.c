/* nsctl ps [--json] - the live sessions of this user: their processes with pids (so a profiler
 * can attach to nsio by pid) and nsio's counters from the control segment.
 *
 * Sessions are found as runtime directories holding a "procs" file written by nsctl run
 * (lines "NAME PID [wrapped:CMD]" and "model PATH"); one whose nsctl is dead is reported as
 * stale (the next session start sweeps it). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "json_text.h"
#include "ns_util.h"
#include "session.h"

static bool s_alive(int pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
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

/* Print one session; returns 1 if it was listed. */
static int s_show(const char *id, const char *dir, bool json, bool *first)
{
	char path[PATH_MAX + 16], line[PATH_MAX + 64], name[32], err[256];
	struct ns_session *s = NULL;
	struct ns_stats_snapshot st;
	FILE *f;
	int nsctl_pid = 0, n = 0;

	if (snprintf(path, sizeof(path), "%s/procs", dir) >= (int)sizeof(path) ||
	    !(f = fopen(path, "r")))
		return 0;
	if (json)
		printf("%s{\"session\":\"%s\",\"procs\":[", *first ? "" : ",", id);
	else
		printf("session %s\n", id);
	*first = false;
	while (fgets(line, sizeof(line), f)) {
		int pid = 0;

		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "model ", 6)) {
			if (!json)
				printf("  model      %s\n", line + 6);
			continue;
		}
		if (sscanf(line, "%31s %d", name, &pid) != 2)
			continue;
		if (!strcmp(name, "nsctl"))
			nsctl_pid = pid;
		if (json)
			printf("%s{\"name\":\"%s\",\"pid\":%d,\"alive\":%s}", n++ ? "," : "", name,
			       pid, s_alive(pid) ? "true" : "false");
		else
			printf("  %-10s pid %-8d %s%s%s\n", name, pid,
			       s_alive(pid) ? "running" : "gone",
			       strstr(line, " wrapped:") ? ", under: " : "",
			       strstr(line, " wrapped:") ? strstr(line, " wrapped:") + 9 : "");
	}
	fclose(f);
	if (json)
		printf("]"); /* procs */
	s_serve_line(dir, json);
	if (ns_session_attach(id, false, &s, err, sizeof(err)) == 0) {
		ns_stats_snapshot(s->ctl, &st);
		if (json)
			printf(",\"stale\":%s,\"nsio\":{\"pid\":%d,\"gen\":%u,\"bytes_requested\":%llu,"
			       "\"bytes_device\":%llu,\"requests\":%llu,\"cache_hits\":%llu,"
			       "\"stall_ns\":%llu,\"arena_bytes\":%llu,\"arena_reserved\":%llu,"
			       "\"arena_peak\":%llu,\"restarts\":%llu,\"rejected\":%llu}}",
			       s_alive(nsctl_pid) ? "false" : "true", st.nsio_pid, st.nsio_gen,
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
			       "%llu records rejected%s\n", st.nsio_pid, st.nsio_gen,
			       (unsigned long long)st.bytes_requested,
			       (unsigned long long)st.bytes_device, (unsigned long long)st.requests,
			       (unsigned long long)st.cache_hits, st.stall_ns / 1e6,
			       (unsigned long long)st.arena_reserved,
			       (unsigned long long)st.arena_bytes, (unsigned long long)st.arena_peak,
			       (unsigned long long)st.restarts, (unsigned long long)st.rejected,
			       s_alive(nsctl_pid) ? "" : " (stale: its nsctl is gone)");
		ns_session_destroy(&s);
	} else if (json) {
		printf(",\"stale\":true}");
	} else {
		printf("  (control segment not readable: %s)\n", err);
	}
	return 1;
}

int cmd_ps(int argc, char **argv)
{
	char probe[PATH_MAX], parent[PATH_MAX], *slash, *base;
	bool json = false, first = true;
	size_t plen;
	struct dirent *de;
	DIR *d;
	int n = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: nsctl ps [--json]\n");
			return 0;
		} else {
			fprintf(stderr, "nsctl ps: unknown %s '%s' (usage: nsctl ps [--json])\n",
				argv[i][0] == '-' ? "option" : "argument", argv[i]);
			return 2;
		}
	}
	/* the runtime dir of a session "X", minus the "X": the parent dir and name prefix */
	if (ns_session_rundir("X", probe, sizeof(probe)) < 0 || !(slash = strrchr(probe, '/'))) {
		fprintf(stderr, "nsctl ps: cannot find the runtime directory\n");
		return 1;
	}
	*slash = 0;
	snprintf(parent, sizeof(parent), "%s", probe[0] ? probe : "/");
	base = slash + 1;
	plen = strlen(base) - 1; /* without the "X" */
	if (json)
		printf("[");
	d = opendir(parent);
	while (d && (de = readdir(d))) {
		char dir[PATH_MAX * 2];
		const char *id;

		if (strncmp(de->d_name, base, plen) || !de->d_name[plen])
			continue;
		id = de->d_name + plen;
		if (strlen(id) > NS_SESSION_ID_LEN)
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", parent, de->d_name);
		n += s_show(id, dir, json, &first);
	}
	if (d)
		closedir(d);
	if (json)
		printf("]\n");
	else if (!n)
		printf("no live sessions\n");
	return 0;
}
