/* ring_fault.c - see ring_fault.h. */
#include "ring_fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ns_ring_fault_init(struct ns_ring_fault *f, const char *side)
{
	const char *v = getenv("NS_FAULT_RING");
	size_t n = strlen(side);
	char *end;

	memset(f, 0, sizeof(*f));
	if (!v || strncmp(v, side, n) || v[n] != ':')
		return;
	f->nth = strtoull(v + n + 1, &end, 10);
	if (*end)
		f->nth = 0;
}

bool ns_ring_fault_hit(struct ns_ring_fault *f, const char *who)
{
	if (!f->nth || ++f->count != f->nth)
		return false;
	fprintf(stderr, "%s: test hook NS_FAULT_RING: record %" PRIu64 " made malformed\n", who,
		f->nth);
	return true;
}
