/* msg_fault.c - an LD_PRELOAD shim that makes the N-th ZeroMQ message of one process fail
 * (tests/fault/test_msg_faults.py).
 *
 *   NS_FAULT_MSG_PROC=nscompute   the process (its short name) whose messages count; others
 *                                 pass through untouched
 *   NS_FAULT_MSG_AT=N             the N-th zmq_send/zmq_msg_send/zmq_recv/zmq_msg_recv of that
 *                                 process (1-based, successful or not) fails; 0: count only
 *   NS_FAULT_MSG_MODE=fail        ... returns -1 with errno ETERM (the context went away), or
 *                    =corrupt     ... is delivered (recv) or sent (send) with its envelope's
 *                                 magic flipped: the decoders must refuse it
 *   NS_FAULT_MSG_COUNT=FILE       at exit the process appends "NAME CALLS" to FILE
 *
 * Linked into nothing: the daemons call libzmq through the PLT, so preloading this library
 * puts its functions first; the real ones come from dlsym(RTLD_NEXT). Calls from several
 * threads count atomically. Not usable under the sanitizers (their runtime must come first). */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static atomic_long s_calls;

/* 1: this call is the N-th of the chosen process; 0: pass it through */
static int s_is_target(void)
{
	const char *proc = getenv("NS_FAULT_MSG_PROC");
	const char *at = getenv("NS_FAULT_MSG_AT");
	long n;

	if (!proc || strcmp(proc, program_invocation_short_name))
		return 0;
	n = atomic_fetch_add(&s_calls, 1) + 1;
	return at && atol(at) == n;
}

static int s_corrupt_mode(void)
{
	const char *m = getenv("NS_FAULT_MSG_MODE");

	return m && !strcmp(m, "corrupt");
}

static void *s_real(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);

	if (!f) {
		fprintf(stderr, "msg_fault: %s not found\n", name);
		abort();
	}
	return f;
}

static void s_flip(void *buf, size_t n)
{
	if (n)
		((unsigned char *)buf)[0] ^= 0x5a;
}

int zmq_send(void *sock, const void *buf, size_t len, int flags)
{
	int (*real)(void *, const void *, size_t, int) = s_real("zmq_send");
	unsigned char copy[4096];

	if (!s_is_target())
		return real(sock, buf, len, flags);
	if (!s_corrupt_mode() || len > sizeof(copy)) {
		errno = ETERM;
		return -1;
	}
	memcpy(copy, buf, len);
	s_flip(copy, len);
	return real(sock, copy, len, flags);
}

int zmq_msg_send(zmq_msg_t *msg, void *sock, int flags)
{
	int (*real)(zmq_msg_t *, void *, int) = s_real("zmq_msg_send");

	if (!s_is_target())
		return real(msg, sock, flags);
	if (!s_corrupt_mode()) {
		errno = ETERM;
		return -1;
	}
	s_flip(zmq_msg_data(msg), zmq_msg_size(msg));
	return real(msg, sock, flags);
}

int zmq_recv(void *sock, void *buf, size_t len, int flags)
{
	int (*real)(void *, void *, size_t, int) = s_real("zmq_recv");
	int n = real(sock, buf, len, flags);

	if (n < 0 || !s_is_target()) /* only delivered messages count on this side */
		return n;
	if (!s_corrupt_mode()) {
		errno = ETERM;
		return -1;
	}
	s_flip(buf, (size_t)n < len ? (size_t)n : len);
	return n;
}

int zmq_msg_recv(zmq_msg_t *msg, void *sock, int flags)
{
	int (*real)(zmq_msg_t *, void *, int) = s_real("zmq_msg_recv");
	int n = real(msg, sock, flags);

	if (n < 0 || !s_is_target())
		return n;
	if (!s_corrupt_mode()) {
		errno = ETERM;
		return -1;
	}
	s_flip(zmq_msg_data(msg), zmq_msg_size(msg));
	return n;
}

__attribute__((destructor)) static void s_report(void)
{
	const char *path = getenv("NS_FAULT_MSG_COUNT");
	const char *proc = getenv("NS_FAULT_MSG_PROC");
	FILE *f;

	if (!path || !proc || strcmp(proc, program_invocation_short_name))
		return;
	f = fopen(path, "a");
	if (!f)
		return;
	fprintf(f, "%s %ld\n", program_invocation_short_name, atomic_load(&s_calls));
	fclose(f);
}
