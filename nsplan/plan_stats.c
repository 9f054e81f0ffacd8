/* stats.c - the text form of expert statistics (see stats.h). */
#include "plan_stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"

void nsplan_stats_free(struct nsplan_stats *st)
{
	free(st->hits);
	free(st->tokens);
	memset(st, 0, sizeof(*st));
}

/* Parse up to 3 unsigned decimal fields; returns the count, -1 on a malformed token. */
static int s_fields(char *p, uint64_t v[3])
{
	int n = 0;

	for (;;) {
		char *end;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '\n' || *p == '#')
			return n;
		if (n == 3 || *p < '0' || *p > '9')
			return -1;
		errno = 0;
		v[n++] = strtoull(p, &end, 10);
		if (errno || (*end && *end != ' ' && *end != '\t' && *end != '\n' && *end != '#'))
			return -1;
		p = end;
	}
}

int nsplan_stats_load(const char *path, uint32_t n_layer, uint32_t n_expert,
		      struct nsplan_stats *st, char *err, size_t errlen)
{
	FILE *f;
	char line[256];
	unsigned lineno = 0;
	int ret = 0;

	memset(st, 0, sizeof(*st));
	if (!n_layer || !n_expert) {
		ns_errf(err, errlen, "%s: the model has no experts to weigh", path);
		return -EINVAL;
	}
	st->hits = calloc((size_t)n_layer * n_expert, sizeof(*st->hits));
	st->tokens = calloc(n_layer, sizeof(*st->tokens));
	if (!st->hits || !st->tokens) {
		nsplan_stats_free(st);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f = fopen(path, "r");
	if (!f) {
		ret = -errno;
		ns_errf(err, errlen, "%s: %s", path, strerror(errno));
		nsplan_stats_free(st);
		return ret;
	}
	while (!ret && fgets(line, sizeof(line), f)) {
		uint64_t v[3];
		char *p = line;
		int n;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			ns_errf(err, errlen, "%s:%u: line too long", path, lineno);
			ret = -EINVAL;
			break;
		}
		while (*p == ' ' || *p == '\t')
			p++;
		if (!strncmp(p, "tokens", 6)) {
			n = s_fields(p + 6, v);
			if (n != 2 || v[0] >= n_layer) {
				ns_errf(err, errlen, "%s:%u: want 'tokens LAYER N' with LAYER < %u", path,
					lineno, n_layer);
				ret = -EINVAL;
			} else {
				st->tokens[v[0]] = v[1];
			}
			continue;
		}
		n = s_fields(p, v);
		if (n == 0)
			continue;
		if (n != 3 || v[0] >= n_layer || v[1] >= n_expert) {
			ns_errf(err, errlen, "%s:%u: want 'LAYER EXPERT HITS' with LAYER < %u, EXPERT < %u",
				path, lineno, n_layer, n_expert);
			ret = -EINVAL;
			break;
		}
		st->hits[v[0] * n_expert + v[1]] = v[2];
	}
	fclose(f);
	for (uint32_t l = 0; !ret && l < n_layer; l++)
		for (uint32_t e = 0; e < n_expert; e++)
			if (st->hits[(uint64_t)l * n_expert + e] > st->tokens[l]) {
				ns_errf(err, errlen, "%s: layer %u expert %u: %" PRIu64 " hits in %" PRIu64
					" tokens", path, l, e, st->hits[(uint64_t)l * n_expert + e],
					st->tokens[l]);
				ret = -EINVAL;
				break;
			}
	if (ret) {
		nsplan_stats_free(st);
		return ret;
	}
	st->hot = (struct nsplan_hotness){ .n_layer = n_layer, .n_expert = n_expert,
					   .hits = st->hits, .tokens = st->tokens };
	return 0;
}
