/* budget_defaults.c - available memory from /proc and the cgroup, and the default split
 * (see budget_defaults.h). */
#include "budget_defaults.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"

#define S_V1_UNLIMITED (1ull << 62)

static uint64_t s_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* MemAvailable in bytes, or NSPLAN_NO_LIMIT. */
static uint64_t s_mem_available(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[256];
	unsigned long long kb;
	uint64_t v = NSPLAN_NO_LIMIT;

	if (!f)
		return v;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
			if (kb <= UINT64_MAX / 1024)
				v = (uint64_t)kb * 1024;
			break;
		}
	}
	fclose(f);
	return v;
}

/* A limit file: a number, or "max". Returns 0 and *v (NSPLAN_NO_LIMIT for none), or -ENOENT. */
static int s_read_limit(const char *path, int version, uint64_t *v)
{
	FILE *f = fopen(path, "r");
	char buf[64] = "";
	char *end;
	unsigned long long n;

	if (!f)
		return -ENOENT;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -ENOENT;
	}
	fclose(f);
	buf[strcspn(buf, "\r\n")] = '\0';
	if (!strcmp(buf, "max")) {
		*v = NSPLAN_NO_LIMIT;
		return 0;
	}
	errno = 0;
	n = strtoull(buf, &end, 10);
	if (end == buf || *end || errno || buf[0] == '-')
		return -ENOENT;
	*v = version == 1 && n >= S_V1_UNLIMITED ? NSPLAN_NO_LIMIT : (uint64_t)n;
	return 0;
}

/* Controller list "a,b,memory" contains "memory"? */
static bool s_has_memory(const char *list, size_t len)
{
	const char *p = list, *e = list + len;

	while (p < e) {
		const char *c = memchr(p, ',', (size_t)(e - p));
		size_t n = (size_t)((c ? c : e) - p);
		if (n == 6 && !memcmp(p, "memory", 6))
			return true;
		p += n + 1;
	}
	return false;
}

/* v2: the tightest memory.max or memory.high along <root><path> and its ancestors (a container that sees
 * its cgroup as "/" reads <root>/memory.max). */
static void s_cgroup_v2(const char *root, const char *path, struct nsplan_mem_probe *out)
{
	char dir[512], file[600];
	size_t len;

	/* a path that climbs ("/../..": another namespace's view) names nothing under root */
	if (strstr(path, "/..") || !strcmp(path, "/"))
		path = "";
	snprintf(dir, sizeof(dir), "%s%s", root, path);
	for (;;) {
		/* memory.high throttles and reclaims, but a run that needs more than it stalls
		 * or is killed by an outer limit all the same: it counts as a limit too */
		static const char *const files[] = { "memory.max", "memory.high" };

		for (size_t i = 0; i < 2; i++) {
			uint64_t v;
			snprintf(file, sizeof(file), "%s/%s", dir, files[i]);
			if (!s_read_limit(file, 2, &v) &&
			    (!out->cgroup_file[0] || v < out->cgroup_limit)) {
				out->cgroup_limit = s_min(out->cgroup_limit, v);
				snprintf(out->cgroup_file, sizeof(out->cgroup_file), "%s", file);
			}
		}
		len = strlen(dir);
		if (len <= strlen(root))
			break;
		while (len > strlen(root) && dir[len - 1] != '/')
			len--;
		if (len > strlen(root))
			len--; /* drop the '/' too */
		dir[len] = '\0';
	}
	out->cgroup_version = 2; /* a v2 hierarchy without any limit file: unlimited */
}

static void s_cgroup_v1(const char *root, const char *path, struct nsplan_mem_probe *out)
{
	char file[600];
	uint64_t v;

	if (strstr(path, "/..") || !strcmp(path, "/"))
		path = "";
	snprintf(file, sizeof(file), "%s/memory%s/memory.limit_in_bytes", root, path);
	if (s_read_limit(file, 1, &v)) {
		snprintf(file, sizeof(file), "%s/memory/memory.limit_in_bytes", root);
		if (s_read_limit(file, 1, &v))
			return;
	}
	out->cgroup_version = 1;
	out->cgroup_limit = v;
	snprintf(out->cgroup_file, sizeof(out->cgroup_file), "%s", file);
}

int nsplan_mem_probe(const struct nsplan_mem_paths *paths, struct nsplan_mem_probe *out,
		     char *err, size_t errlen)
{
	const char *meminfo = paths && paths->meminfo ? paths->meminfo : "/proc/meminfo";
	const char *self = paths && paths->self_cgroup ? paths->self_cgroup : "/proc/self/cgroup";
	const char *root = paths && paths->cgroup_root ? paths->cgroup_root : "/sys/fs/cgroup";
	char line[1024], v1path[512] = "", v2path[512] = "";
	bool have_v1 = false, have_v2 = false;
	FILE *f;

	memset(out, 0, sizeof(*out));
	out->cgroup_limit = NSPLAN_NO_LIMIT;
	out->mem_available = s_mem_available(meminfo);
	f = fopen(self, "r");
	while (f && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		line[strcspn(line, "\r\n")] = '\0';
		if (!c2 || c2[1] != '/')
			continue;
		if (!strncmp(line, "0::", 3)) {
			snprintf(v2path, sizeof(v2path), "%s", c2 + 1);
			have_v2 = true;
		} else if (s_has_memory(c1 + 1, (size_t)(c2 - c1 - 1))) {
			snprintf(v1path, sizeof(v1path), "%s", c2 + 1);
			have_v1 = true;
		}
	}
	if (f)
		fclose(f);
	/* A v1 memory controller wins on hybrid systems: the v2 tree then has no memory files. */
	if (have_v1)
		s_cgroup_v1(root, v1path, out);
	else if (have_v2)
		s_cgroup_v2(root, v2path, out);
	out->available = s_min(out->mem_available, out->cgroup_limit);
	if (out->available == NSPLAN_NO_LIMIT) {
		ns_errf(err, errlen, "cannot tell how much memory is available: no MemAvailable in %s "
			"and no cgroup memory limit; name --ram-budget and --mem-budget", meminfo);
		return -ENOENT;
	}
	return 0;
}

int nsplan_default_budgets(const struct nsplan_default_in *in, struct nsplan_budgets *b,
			   struct nsplan_default_out *out, char *err, size_t errlen)
{
	uint64_t A = in->available, H, need, U, M, slot_rows, arena;
	bool ovf;
	char s1[32], s2[32], s3[32], s4[32], s5[32];

	memset(out, 0, sizeof(*out));
	H = A / 16 > NSPLAN_MIN_HEADROOM ? A / 16 : NSPLAN_MIN_HEADROOM;
	H = s_min(H, A);
	out->headroom = H;
	arena = in->mem_given ? b->mem : in->min_arena;
	ovf = ns_add_u64_overflow(H, in->fixed, &need) || ns_add_u64_overflow(need, arena, &need) ||
	      (in->ram_given && ns_add_u64_overflow(need, b->ram, &need));
	if (ovf || need > A) {
		uint64_t least = in->fixed + in->min_arena + H; /* <= need: no overflow if !ovf */
		ns_errf(err, errlen, "only %s of memory available, the run needs at least %s: fixed "
			"set %s (KV cache, scratch, processes at this context) + arena %s + headroom %s%s; "
			"smallest workable: --mem-budget %" PRIu64 " --ram-budget 0 with %" PRIu64
			" bytes available, or a smaller -c",
			ns_format_bytes(A, s1, sizeof(s1)),
			ovf ? "more than 2^64 bytes" : ns_format_bytes(need, s2, sizeof(s2)),
			ns_format_bytes(in->fixed, s3, sizeof(s3)), ns_format_bytes(arena, s4, sizeof(s4)),
			ns_format_bytes(H, s5, sizeof(s5)), in->ram_given ? " + the RAM budget" : "",
			in->min_arena, least);
		return -ENOSPC;
	}
	U = A - H - in->fixed;
	out->usable = U;
	slot_rows = in->block_bytes > in->max_row_bytes ? in->block_bytes : in->max_row_bytes;
	out->arena_want = (uint64_t)(in->lookahead + 1) * ns_stream_slot_bytes(slot_rows);
	if (in->layer_expert_bytes <= UINT64_MAX / 2 && 2 * in->layer_expert_bytes > out->arena_want)
		out->arena_want = 2 * in->layer_expert_bytes;
	if (!in->mem_given) {
		uint64_t share = U / 4 > in->min_arena ? U / 4 : in->min_arena;
		b->mem = s_min(out->arena_want, share);
	}
	M = b->mem;
	if (!in->ram_given)
		b->ram = s_min(U > M ? U - M : 0, in->cacheable);
	return 0;
}
