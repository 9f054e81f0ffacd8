/* engine_log.c - the library's own lines (a child restarted, given up on, ending badly):
 * to the embedding program's log callback when it set one (ns_log_set), else to stderr, as
 * "neurostream: ...". The one piece of process-wide state of the library, as the callback
 * is the program's, not an engine's: load-time lines come before any engine exists. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "engine_internal.h"

static struct {
	pthread_mutex_t lock;
	ns_log_fn fn;
	void *user;
} s_log = { .lock = PTHREAD_MUTEX_INITIALIZER };

void ns_log_set(ns_log_fn fn, void *user)
{
	pthread_mutex_lock(&s_log.lock);
	s_log.fn = fn;
	s_log.user = user;
	pthread_mutex_unlock(&s_log.lock);
}

void nse_log(enum ns_log_level level, const char *fmt, ...)
{
	char line[512];
	ns_log_fn fn;
	void *user;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&s_log.lock);
	fn = s_log.fn;
	user = s_log.user;
	pthread_mutex_unlock(&s_log.lock);
	if (fn)
		fn(level, line, user);
	else
		fprintf(stderr, "neurostream: %s\n", line);
}
