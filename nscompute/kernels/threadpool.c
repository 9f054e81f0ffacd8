/* threadpool.c - persistent workers woken per run by a generation counter (see threadpool.h).
 *
 * Decoding calls the kernels back to back (one matrix after another), so waking a sleeping
 * thread for each call would cost more than a small matrix takes. After each run the workers,
 * and the caller waiting for them, spin for up to S_SPIN_NS on the atomic counters before
 * falling back to the mutex/condition variables; the spin is short and yields the core now and
 * then, so idle pools and other processes on shared cores lose little. */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#define S_SPIN_NS 50000 /* 50 us */

struct ns_pool {
	int n_threads;          /* workers + the calling thread */
	int n_started;          /* workers actually running */
	pthread_t *threads;     /* [n_threads - 1] */
	pthread_mutex_t lock;
	pthread_cond_t start;   /* workers sleep here for a new generation */
	pthread_cond_t done;    /* the caller sleeps here for n_started check-ins */
	_Atomic uint64_t gen;   /* bumped (under lock) by every run */
	_Atomic bool stop;
	_Atomic int n_done;     /* workers finished with the current generation */
	ns_pool_fn fn;          /* written before gen is bumped, read after it is seen */
	void *ctx;
	uint64_t n_tasks;
	_Atomic uint64_t next;  /* next unclaimed task */
};

static uint64_t s_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void s_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void s_work(struct ns_pool *p, ns_pool_fn fn, void *ctx, uint64_t n_tasks)
{
	for (;;) {
		uint64_t t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);

		if (t >= n_tasks)
			return;
		fn(ctx, t);
	}
}

/* Spin until gen != seen or stop, for at most S_SPIN_NS; true when it changed. */
static bool s_spin_gen(struct ns_pool *p, uint64_t seen)
{
	uint64_t t0 = s_now();

	for (int i = 1;; i++) {
		if (atomic_load_explicit(&p->gen, memory_order_acquire) != seen ||
		    atomic_load_explicit(&p->stop, memory_order_relaxed))
			return true;
		s_relax();
		if (i % 64 == 0) {
			if (s_now() - t0 > S_SPIN_NS)
				return false;
			sched_yield(); /* cores shared with other work: let it run */
		}
	}
}

static void *s_worker(void *arg)
{
	struct ns_pool *p = arg;
	uint64_t seen = 0;

	for (;;) {
		if (!s_spin_gen(p, seen)) {
			pthread_mutex_lock(&p->lock);
			while (!atomic_load(&p->stop) && atomic_load(&p->gen) == seen)
				pthread_cond_wait(&p->start, &p->lock);
			pthread_mutex_unlock(&p->lock);
		}
		if (atomic_load(&p->stop))
			break;
		seen = atomic_load_explicit(&p->gen, memory_order_acquire);
		s_work(p, p->fn, p->ctx, p->n_tasks);
		if (atomic_fetch_add_explicit(&p->n_done, 1, memory_order_acq_rel) + 1 == p->n_started) {
			pthread_mutex_lock(&p->lock);
			pthread_cond_signal(&p->done);
			pthread_mutex_unlock(&p->lock);
		}
	}
	return NULL;
}

struct ns_pool *ns_pool_new(int n_threads)
{
	struct ns_pool *p;

	if (n_threads < 1 || n_threads > 1024)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->n_threads = n_threads;
	atomic_init(&p->gen, 0);
	atomic_init(&p->stop, false);
	atomic_init(&p->n_done, 0);
	atomic_init(&p->next, 0);
	if (pthread_mutex_init(&p->lock, NULL)) {
		free(p);
		return NULL;
	}
	if (pthread_cond_init(&p->start, NULL)) {
		pthread_mutex_destroy(&p->lock);
		free(p);
		return NULL;
	}
	if (pthread_cond_init(&p->done, NULL)) {
		pthread_cond_destroy(&p->start);
		pthread_mutex_destroy(&p->lock);
		free(p);
		return NULL;
	}
	if (n_threads > 1) {
		p->threads = calloc((size_t)n_threads - 1, sizeof(*p->threads));
		if (!p->threads) {
			ns_pool_destroy(&p);
			return NULL;
		}
	}
	for (int i = 0; i < n_threads - 1; i++) {
		if (pthread_create(&p->threads[i], NULL, s_worker, p)) {
			ns_pool_destroy(&p);
			return NULL;
		}
		p->n_started++;
	}
	return p;
}

void ns_pool_destroy(struct ns_pool **pp)
{
	struct ns_pool *p = pp ? *pp : NULL;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	atomic_store(&p->stop, true);
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; i < p->n_started; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->start);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
	*pp = NULL;
}

int ns_pool_threads(const struct ns_pool *p)
{
	return p ? p->n_started + 1 : 1;
}

void ns_pool_run(struct ns_pool *p, ns_pool_fn fn, void *ctx, uint64_t n_tasks)
{
	if (n_tasks == 0)
		return;
	if (!p || p->n_started == 0 || n_tasks == 1) {
		for (uint64_t t = 0; t < n_tasks; t++)
			fn(ctx, t);
		return;
	}
	p->fn = fn;
	p->ctx = ctx;
	p->n_tasks = n_tasks;
	atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
	atomic_store_explicit(&p->next, 0, memory_order_relaxed);
	pthread_mutex_lock(&p->lock);
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->lock);

	s_work(p, fn, ctx, n_tasks);

	uint64_t t0 = s_now();
	for (int i = 1; atomic_load_explicit(&p->n_done, memory_order_acquire) < p->n_started; i++) {
		s_relax();
		if (i % 64 == 0) {
			if (s_now() - t0 > S_SPIN_NS)
				break;
			sched_yield();
		}
	}
	pthread_mutex_lock(&p->lock);
	while (atomic_load_explicit(&p->n_done, memory_order_acquire) < p->n_started)
		pthread_cond_wait(&p->done, &p->lock);
	pthread_mutex_unlock(&p->lock);
}
