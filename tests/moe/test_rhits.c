/* test_rhits.c - nsrouter's expert hit statistics (nsrouter/hits.c) are read back by nsplan's
 * own parser (nsplan_stats_load) with the counts they were given. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hits.h"
#include "plan_stats.h"
#include "ns_test.h"

#define CHECK(cond, ...) NS_REQUIRE(cond, __VA_ARGS__)

int main(void)
{
	char path[] = "/tmp/ns_rhits_XXXXXX", err[256];
	struct ns_rhits *h = NULL;
	struct nsplan_stats st;
	struct ns_zrouter d = { 0 };
	int fd = mkstemp(path);

	CHECK(fd >= 0, "mkstemp");
	close(fd);
	CHECK(ns_rhits_new(0, 8, 2, &h) < 0 && !h, "zero layers accepted");
	CHECK(ns_rhits_new(2, 8, 2, &h) == 0, "new");
	/* layer 1, a 3-token chunk: experts 1 (3 tokens), 4 (2), 7 (1) = 6 slots = 3 tokens */
	d.layer = 1;
	d.n_used = 3;
	d.expert[0] = 1, d.weight[0] = 3;
	d.expert[1] = 4, d.weight[1] = 2;
	d.expert[2] = 7, d.weight[2] = 1;
	ns_rhits_add(h, &d);
	/* layer 0, one token: experts 0 and 5; junk (expert 9, layer 5) is ignored */
	d.layer = 0;
	d.n_used = 3;
	d.expert[0] = 0, d.weight[0] = 1;
	d.expert[1] = 5, d.weight[1] = 1;
	d.expert[2] = 9, d.weight[2] = 1;
	ns_rhits_add(h, &d);
	d.layer = 5;
	ns_rhits_add(h, &d);
	CHECK(ns_rhits_write(h, path) == 0, "write");
	CHECK(nsplan_stats_load(path, 2, 8, &st, err, sizeof(err)) == 0, "nsplan refused: %s",
	      err);
	CHECK(st.tokens[0] == 1 && st.tokens[1] == 3, "tokens %llu %llu",
	      (unsigned long long)st.tokens[0], (unsigned long long)st.tokens[1]);
	CHECK(st.hits[0 * 8 + 0] == 1 && st.hits[0 * 8 + 5] == 1 && st.hits[0 * 8 + 1] == 0,
	      "layer 0 hits");
	CHECK(st.hits[1 * 8 + 1] == 3 && st.hits[1 * 8 + 4] == 2 && st.hits[1 * 8 + 7] == 1 &&
	      st.hits[1 * 8 + 0] == 0, "layer 1 hits");
	nsplan_stats_free(&st);
	ns_rhits_destroy(&h);
	CHECK(!h, "destroy nulls");
	unlink(path);
	printf("ok\n");
	return 0;
}
