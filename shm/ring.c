/* ring.c - futex wrappers for the shared rings. */
#include "ring.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int ns_futex_wait(_Atomic uint32_t *word, uint32_t expect, uint64_t timeout_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(timeout_ns / 1000000000ull),
		.tv_nsec = (long)(timeout_ns % 1000000000ull),
	};
	long r = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expect,
			 timeout_ns ? &ts : NULL, NULL, 0);

	return r == 0 ? 0 : -errno;
}

void ns_futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, n, NULL, NULL, 0);
}
