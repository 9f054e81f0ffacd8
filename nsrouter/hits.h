/* hits.h - expert hit statistics per (layer, expert), written as the text nsplan reads
 * (nsplan/plan_stats.h: "tokens LAYER N" and "LAYER EXPERT HITS" lines).
 *
 * Ownership: ns_rhits_new allocates, ns_rhits_destroy(&h) frees and nulls. */
#ifndef NS_ROUTER_HITS_H
#define NS_ROUTER_HITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zmsg.h"

struct ns_rhits {
	uint32_t n_layer, n_expert, n_used;
	uint64_t *hits;    /* (n_layer, n_expert) tokens that chose the expert */
	uint64_t *tokens;  /* (n_layer) tokens routed */
	bool dirty;        /* changed since the last write */
};

int ns_rhits_new(uint32_t n_layer, uint32_t n_expert, uint32_t n_used, struct ns_rhits **out);
void ns_rhits_destroy(struct ns_rhits **h);
/* Count a decision (weights = tokens per expert, as nscompute publishes them). Out-of-range
 * layers or experts are ignored. */
void ns_rhits_add(struct ns_rhits *h, const struct ns_zrouter *d);
/* Write path atomically (path.tmp, rename). Returns 0 or -errno. */
int ns_rhits_write(struct ns_rhits *h, const char *path);

#endif
