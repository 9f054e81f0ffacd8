/* alloc_fault.c - the process's malloc family, forwarding to glibc's, with the N-th
 * allocation made to fail on request (SQLite's OOM tests in our form).
 *
 * A program linked with this file replaces malloc, calloc, realloc, free, aligned_alloc,
 * posix_memalign and memalign for every caller in the process, libc's own strdup and
 * pthread_create included (glibc supports replacing them: it calls them through the PLT).
 * The real work is glibc's __libc_* entry points, so memory from any path can be freed by any
 * other. Not linked under the sanitizers, which replace the same symbols.
 *
 * State is process-global by necessity (malloc has no context argument); it lives in this
 * file only and is read and written atomically, so a forward pass's worker threads count too. */
#include <errno.h>
#include <execinfo.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "alloc_fault.h"

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t size);

static atomic_long s_calls;   /* allocation calls since ns_alloc_fault_arm */
static atomic_long s_fail_at; /* the call that fails (1-based); 0: none */
static atomic_long s_failed;  /* calls failed by request since arming */
static atomic_long s_live;    /* blocks handed out and not yet freed */
static atomic_int s_trace;    /* NS_ALLOC_FAULT_TRACE set: the failing call's stack on stderr */

void ns_alloc_fault_arm(long fail_at)
{
	void *frames[2];

	if (fail_at && getenv("NS_ALLOC_FAULT_TRACE")) {
		backtrace(frames, 2); /* loads the unwinder now, not inside malloc */
		atomic_store(&s_trace, 1);
	}
	atomic_store(&s_calls, 0);
	atomic_store(&s_failed, 0);
	atomic_store(&s_fail_at, fail_at);
}

long ns_alloc_fault_calls(void)
{
	return atomic_load(&s_calls);
}

long ns_alloc_fault_failed(void)
{
	return atomic_load(&s_failed);
}

long ns_alloc_fault_live(void)
{
	return atomic_load(&s_live);
}

/* true when this allocation is the one to fail */
static int s_refuse(void)
{
	long n = atomic_fetch_add(&s_calls, 1) + 1;

	if (n != atomic_load(&s_fail_at))
		return 0;
	atomic_fetch_add(&s_failed, 1);
	if (atomic_load(&s_trace)) {
		void *frames[32];

		backtrace_symbols_fd(frames, backtrace(frames, 32), STDERR_FILENO);
	}
	errno = ENOMEM;
	return 1;
}

static void *s_count(void *p)
{
	if (p)
		atomic_fetch_add(&s_live, 1);
	return p;
}

void *malloc(size_t size)
{
	return s_refuse() ? NULL : s_count(__libc_malloc(size));
}

void *calloc(size_t n, size_t size)
{
	return s_refuse() ? NULL : s_count(__libc_calloc(n, size));
}

void *realloc(void *p, size_t size)
{
	void *q;

	if (!p)
		return malloc(size);
	if (!size) {
		free(p);
		return NULL;
	}
	if (s_refuse())
		return NULL; /* p stays valid, as the contract says */
	q = __libc_realloc(p, size);
	return q;
}

void free(void *p)
{
	if (p)
		atomic_fetch_sub(&s_live, 1);
	__libc_free(p);
}

void *memalign(size_t align, size_t size)
{
	return s_refuse() ? NULL : s_count(__libc_memalign(align, size));
}

void *aligned_alloc(size_t align, size_t size)
{
	return memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p;

	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	p = memalign(align, size);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}
