/* stats.h - expert hit statistics as text, the planner's hotness input until nsrouter sends
 * them over ZeroMQ. Format, one record per line, '#' starts a comment:
 *     tokens LAYER N       tokens routed through LAYER
 *     LAYER EXPERT HITS    tokens that selected EXPERT in LAYER
 * Layers and experts out of range, malformed numbers and hits above a layer's tokens are
 * errors (the file is refused whole, the previous plan stays). */
#ifndef NSPLAN_STATS_H
#define NSPLAN_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "plan.h"

struct nsplan_stats {
	struct nsplan_hotness hot; /* points into the arrays below */
	uint64_t *hits;            /* [n_layer][n_expert], owned */
	uint64_t *tokens;          /* [n_layer], owned */
};

/* Returns 0, -ENOMEM, or -EINVAL/-errno with "path:line: problem" in err. */
int nsplan_stats_load(const char *path, uint32_t n_layer, uint32_t n_expert,
		      struct nsplan_stats *st, char *err, size_t errlen);
void nsplan_stats_free(struct nsplan_stats *st);

#endif
