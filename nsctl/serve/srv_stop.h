/* srv_stop.h - stop strings over streamed text (OpenAI's "stop"): the text is handed on as it
 * comes, except a tail that could be the start of a stop string, which is held until the next
 * piece shows whether it is one. When a stop string appears, the text before it is handed on
 * and the rest is dropped, the stop string included.
 *
 * Lifecycle: srv_stop_init copies the strings; srv_stop_free. Not thread-safe. */
#ifndef NSCTL_SRV_STOP_H
#define NSCTL_SRV_STOP_H

#include <stdbool.h>
#include <stddef.h>

#include "run_report.h"

#define SRV_STOP_MAX 4      /* as OpenAI: up to 4 stop strings */
#define SRV_STOP_LEN 1024   /* bytes of one stop string at most */

struct srv_stop {
	char *s[SRV_STOP_MAX];
	size_t len[SRV_STOP_MAX];
	size_t n;
	struct ns_text held;  /* text not handed on yet */
	bool hit;             /* a stop string appeared: nothing more is handed on */
};

/* n <= SRV_STOP_MAX non-empty strings of at most SRV_STOP_LEN bytes (the caller checked).
 * Returns 0 or -ENOMEM. */
int srv_stop_init(struct srv_stop *st, const char *const *s, size_t n);
void srv_stop_free(struct srv_stop *st);

/* Add text; what is now final is appended to out. Returns 1 when a stop string appeared
 * (generation should end), 0, or -ENOMEM. */
int srv_stop_feed(struct srv_stop *st, const char *text, size_t len, struct ns_text *out);
/* End of the text: the held tail is final. Returns 0 or -ENOMEM. */
int srv_stop_flush(struct srv_stop *st, struct ns_text *out);

#endif
