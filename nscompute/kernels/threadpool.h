/* threadpool.h - a persistent pool of worker threads for the row-parallel kernels.
 *
 * ns_pool_new(n) starts n - 1 workers once; each ns_pool_run() wakes them, and the calling
 * thread works too, so n threads share the tasks. Tasks are claimed one at a time from an atomic
 * counter (cores shared with other work still finish evenly). No thread is created per call.
 *
 * Ownership: the caller owns the pool and destroys it with ns_pool_destroy(&p) (joins the
 * workers, nulls p). One thread at a time may call ns_pool_run on a pool. */
#ifndef NS_THREADPOOL_H
#define NS_THREADPOOL_H

#include <stdint.h>

struct ns_pool;

/* Task function: runs task number `task` (0 <= task < n_tasks) of the current run. */
typedef void (*ns_pool_fn)(void *ctx, uint64_t task);

/* n_threads >= 1 (1 = no workers). Returns NULL on bad n_threads or failed allocation/start. */
struct ns_pool *ns_pool_new(int n_threads);
void ns_pool_destroy(struct ns_pool **p);
int ns_pool_threads(const struct ns_pool *p);

/* Runs fn(ctx, t) for every t in [0, n_tasks) across the pool; returns when all are done. */
void ns_pool_run(struct ns_pool *p, ns_pool_fn fn, void *ctx, uint64_t n_tasks);

#endif
