/* bench_workload.c - what nsctl bench feeds every configuration: the pp prompt (words cut
 * to the asked token count) and one teacher-forced tg sequence. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "ns_util.h"

/* Words for the pp prompt, cut to at most n tokens (BOS included) by bisection on its length. */
int bench_prompt(struct ns_engine *e, uint32_t n, char **out, uint32_t *n_tok)
{
	static const char *const words[] = { "the", "river", "stone", "light", "over", "quiet",
		"market", "seven", "winter", "paper", "garden", "north", "signal", "copper" };
	size_t cap = (size_t)n * 8 + 64, used = 0, lo = 0, hi;
	char *text = malloc(cap + 1);
	int rc = 0;

	if (!text)
		return -ENOMEM;
	for (uint64_t k = 0; used + 16 < cap; k++) {
		uint64_t h = k * 0x9e3779b97f4a7c15ull;
		used += (size_t)snprintf(text + used, cap + 1 - used, "%s%s", used ? " " : "",
					  words[(h >> 32) % NS_ARRAY_LEN(words)]);
	}
	hi = used;
	*n_tok = 0;
	while (lo < hi) { /* the longest prefix with at most n tokens */
		size_t mid = lo + (hi - lo + 1) / 2;
		char save = text[mid];
		int32_t *ids = NULL;
		size_t nt = 0;

		text[mid] = 0;
		rc = ns_engine_tokenize(e, text, true, &ids, &nt);
		text[mid] = save;
		free(ids);
		if (rc < 0)
			break;
		if (nt <= n) {
			lo = mid;
			*n_tok = (uint32_t)nt;
		} else {
			hi = mid - 1;
		}
	}
	if (rc < 0) {
		free(text);
		return rc;
	}
	text[lo] = 0;
	*out = text;
	return 0;
}

int bench_collect(const char *piece, size_t len, int32_t id, void *user)
{
	struct bench_ids *s = user;

	(void)piece;
	(void)len;
	if (id < 0)
		return 0;
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 256;
		int32_t *p = realloc(s->ids, cap * sizeof(*p));
		if (!p)
			return 1;
		s->ids = p;
		s->cap = cap;
	}
	s->ids[s->n++] = id;
	if (s->n_want)
		fprintf(stderr, "\rnsctl bench: tg token %u/%u, %.1f s ", s->n, s->n_want,
			(double)(ns_now_ns() - s->t0) / 1e9);
	return 0;
}

/* The teacher-forced sequence: n ids of the pp words (BOS first when the vocabulary adds one),
 * the text repeated when its tokens run short. */
int bench_forced(struct ns_engine *e, uint32_t n, struct bench_ids *out)
{
	char *text = NULL;
	int32_t *ids = NULL;
	uint32_t nt = 0;
	size_t n_ids = 0;
	int rc;

	if ((rc = bench_prompt(e, n, &text, &nt)) < 0)
		return rc;
	rc = ns_engine_tokenize(e, text, true, &ids, &n_ids);
	free(text);
	if (rc < 0)
		return rc;
	if (n_ids == 0) {
		free(ids);
		return -EINVAL;
	}
	if (!(out->ids = malloc((size_t)n * sizeof(*out->ids)))) {
		free(ids);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		size_t k = i; /* past the end: repeat the text after its first token */

		if (k >= n_ids)
			k = n_ids > 1 ? 1 + (k - 1) % (n_ids - 1) : 0;
		out->ids[i] = ids[k];
	}
	out->n = n;
	free(ids);
	return 0;
}
