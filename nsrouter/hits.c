/* hits.c - see hits.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "hits.h"
#include "ns_util.h"

int ns_rhits_new(uint32_t n_layer, uint32_t n_expert, uint32_t n_used, struct ns_rhits **out)
{
	struct ns_rhits *h;
	uint64_t n;

	*out = NULL;
	if (!n_layer || !n_expert || !n_used || ns_mul_u64_overflow(n_layer, n_expert, &n))
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->hits = calloc(n, sizeof(*h->hits));
	h->tokens = calloc(n_layer, sizeof(*h->tokens));
	if (!h->hits || !h->tokens) {
		ns_rhits_destroy(&h);
		return -ENOMEM;
	}
	h->n_layer = n_layer;
	h->n_expert = n_expert;
	h->n_used = n_used;
	*out = h;
	return 0;
}

void ns_rhits_destroy(struct ns_rhits **h)
{
	if (!h || !*h)
		return;
	free((*h)->hits);
	free((*h)->tokens);
	free(*h);
	*h = NULL;
}

void ns_rhits_add(struct ns_rhits *h, const struct ns_zrouter *d)
{
	uint64_t slots = 0;

	if (d->layer >= h->n_layer)
		return;
	for (uint32_t i = 0; i < d->n_used; i++) {
		/* weight: a token count, a small exact integer in a float */
		uint64_t w = d->weight[i] >= 1.0f && d->weight[i] < 1e9f ? (uint64_t)d->weight[i]
									    : 0;

		if (d->expert[i] >= h->n_expert)
			continue;
		h->hits[(uint64_t)d->layer * h->n_expert + d->expert[i]] += w;
		slots += w;
	}
	h->tokens[d->layer] += slots / h->n_used;
	h->dirty = true;
}

int ns_rhits_write(struct ns_rhits *h, const char *path)
{
	char tmp[4200];
	FILE *f;
	int rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "# nsrouter expert hits: tokens LAYER N / LAYER EXPERT HITS\n");
	for (uint32_t l = 0; l < h->n_layer; l++) {
		const uint64_t *row = h->hits + (uint64_t)l * h->n_expert;

		/* hits never exceed the tokens (each token picks an expert at most once) */
		fprintf(f, "tokens %u %" PRIu64 "\n", l, h->tokens[l]);
		for (uint32_t e = 0; e < h->n_expert; e++)
			if (row[e])
				fprintf(f, "%u %u %" PRIu64 "\n", l, e,
					row[e] < h->tokens[l] ? row[e] : h->tokens[l]);
	}
	if (ferror(f))
		rc = -EIO;
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		remove(tmp);
	else
		h->dirty = false;
	return rc;
}
