/* test_threadpool: every task of every run executes exactly once, on pools of 1..4 threads,
 * over many back-to-back runs (the spin/sleep hand-over), with sleeps between some runs so the
 * workers fall asleep; bad sizes are refused. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "threadpool.h"

struct s_ctx {
	_Atomic uint32_t *hits;
	_Atomic uint64_t sum;
};

static void s_task(void *c, uint64_t t)
{
	struct s_ctx *ctx = c;

	atomic_fetch_add(&ctx->hits[t], 1);
	atomic_fetch_add(&ctx->sum, t);
}

int main(void)
{
	enum { MAX_TASKS = 1000 };
	_Atomic uint32_t *hits = calloc(MAX_TASKS, sizeof(*hits));

	if (ns_pool_new(0) || ns_pool_new(-3)) {
		fprintf(stderr, "FAIL: bad thread counts accepted\n");
		return 1;
	}
	for (int n = 1; n <= 4; n++) {
		struct ns_pool *p = ns_pool_new(n);

		if (!p || ns_pool_threads(p) != n) {
			fprintf(stderr, "FAIL: pool of %d\n", n);
			return 1;
		}
		for (int run = 0; run < 2000; run++) {
			uint64_t n_tasks = (uint64_t)(run * 7919) % MAX_TASKS;
			struct s_ctx ctx = { .hits = hits };

			memset((void *)hits, 0, MAX_TASKS * sizeof(*hits));
			atomic_init(&ctx.sum, 0);
			ns_pool_run(p, s_task, &ctx, n_tasks);
			for (uint64_t t = 0; t < MAX_TASKS; t++)
				if (atomic_load(&hits[t]) != (t < n_tasks)) {
					fprintf(stderr, "FAIL: %d threads, run %d: task %llu ran %u times\n",
						n, run, (unsigned long long)t, atomic_load(&hits[t]));
					return 1;
				}
			if (atomic_load(&ctx.sum) != (n_tasks ? n_tasks * (n_tasks - 1) / 2 : 0)) {
				fprintf(stderr, "FAIL: task sum\n");
				return 1;
			}
			if (run % 500 == 17) { /* let the workers go to sleep */
				struct timespec ts = { 0, 2000000 };

				nanosleep(&ts, NULL);
			}
		}
		ns_pool_destroy(&p);
		if (p) {
			fprintf(stderr, "FAIL: destroy did not null the pointer\n");
			return 1;
		}
		ns_pool_destroy(&p); /* no-op */
	}
	ns_pool_run(NULL, s_task, &(struct s_ctx){ .hits = hits }, 3); /* NULL pool: caller runs */
	free((void *)hits);
	printf("thread pool ok\n");
	return 0;
}
