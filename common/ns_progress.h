/* ns_progress.h - one progress line on a terminal, redrawn in place at most ten times a
 * second: name, done of total (bytes, or a count of a unit: "tok", "configurations"),
 * percent, rate and ETA. nsctl pull's downloads, mkmodel's writing, bench's configurations.
 * The rate counts only what this run did (a resumed download starts from its partial bytes).
 * The line is erased at the end, so the caller's summary takes its place. */
#ifndef NS_PROGRESS_H
#define NS_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ns_progress {
	bool on;           /* false: every call does nothing but count */
	const char *unit;  /* NULL: bytes (binary units); else a count's unit, not owned */
	char name[48];
	uint64_t total, done, resumed_from;
	uint64_t t0_ns, last_ns;
};

/* Whether to draw: stderr is a terminal and the user did not ask for quiet. */
bool ns_progress_wanted(bool quiet);

void ns_progress_begin(struct ns_progress *p, bool on, const char *name, const char *unit,
		       uint64_t total, uint64_t already);
void ns_progress_add(struct ns_progress *p, uint64_t n);
void ns_progress_set(struct ns_progress *p, uint64_t done);
/* Back to zero: a download's server sent the whole file where a range was asked. */
void ns_progress_restart(struct ns_progress *p);
void ns_progress_end(struct ns_progress *p);
/* "1:02:03", "4:05" from seconds; "--:--" when unknown (negative, NaN) or over 99 hours. */
char *ns_format_eta(double seconds, char *buf, size_t len);

#endif
