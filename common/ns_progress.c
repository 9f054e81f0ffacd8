/* ns_progress.c - see ns_progress.h. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ns_progress.h"
#include "ns_util.h"

#define S_REDRAW_NS 100000000ull /* 0.1 s */

bool ns_progress_wanted(bool quiet)
{
	return !quiet && isatty(STDERR_FILENO);
}

char *ns_format_eta(double seconds, char *buf, size_t len)
{
	unsigned long long s;

	if (!(seconds >= 0) || seconds > 359999.0) { /* NaN, or over 99 hours */
		snprintf(buf, len, "--:--");
		return buf;
	}
	s = (unsigned long long)(seconds + 0.5);
	if (s >= 3600)
		snprintf(buf, len, "%llu:%02llu:%02llu", s / 3600, s / 60 % 60, s % 60);
	else
		snprintf(buf, len, "%llu:%02llu", s / 60, s % 60);
	return buf;
}

/* An amount in the line's unit: "1.50 MiB" for bytes, "1234" for counts. */
static char *s_amount(const struct ns_progress *p, double v, char *buf, size_t len)
{
	if (!p->unit)
		return ns_format_bytes((uint64_t)v, buf, len);
	snprintf(buf, len, v >= 100 || v == (double)(uint64_t)v ? "%.0f" : "%.1f", v);
	return buf;
}

static void s_draw(struct ns_progress *p, uint64_t now)
{
	double secs = (double)(now - p->t0_ns) / 1e9;
	double rate = secs > 0 ? (double)(p->done - p->resumed_from) / secs : 0;
	char done[32], total[32], speed[32], eta[32];
	unsigned pct = p->total ? (unsigned)(100.0 * (double)p->done / (double)p->total) : 100;
	const char *unit = p->unit ? p->unit : "";

	s_amount(p, (double)p->done, done, sizeof(done));
	s_amount(p, (double)p->total, total, sizeof(total));
	s_amount(p, rate, speed, sizeof(speed));
	ns_format_eta(rate > 0 && p->total > p->done ? (double)(p->total - p->done) / rate :
		      p->total <= p->done ? 0 : -1, eta, sizeof(eta));
	/* \r and erase-to-end-of-line: the line is rewritten where it stands */
	fprintf(stderr, "\r\033[K%s  %s / %s%s%s  %3u%%  %s%s%s/s  ETA %s", p->name, done, total,
		*unit ? " " : "", unit, pct > 100 ? 100 : pct, speed, *unit ? " " : "", unit, eta);
	fflush(stderr);
	p->last_ns = now;
}

void ns_progress_begin(struct ns_progress *p, bool on, const char *name, const char *unit,
		       uint64_t total, uint64_t already)
{
	size_t n = strlen(name);

	memset(p, 0, sizeof(*p));
	p->on = on;
	p->unit = unit;
	/* a long name keeps its end, where the quantization and shard number are */
	if (n < sizeof(p->name))
		snprintf(p->name, sizeof(p->name), "%s", name);
	else
		snprintf(p->name, sizeof(p->name), "...%s", name + n - (sizeof(p->name) - 4));
	p->total = total;
	p->done = p->resumed_from = already;
	p->t0_ns = ns_now_ns();
	if (p->on)
		s_draw(p, p->t0_ns);
}

void ns_progress_restart(struct ns_progress *p)
{
	p->done = p->resumed_from = 0;
	p->t0_ns = ns_now_ns();
}

void ns_progress_set(struct ns_progress *p, uint64_t done)
{
	uint64_t now;

	p->done = done;
	if (!p->on)
		return;
	now = ns_now_ns();
	if (now - p->last_ns >= S_REDRAW_NS)
		s_draw(p, now);
}

void ns_progress_add(struct ns_progress *p, uint64_t n)
{
	ns_progress_set(p, p->done + n);
}

void ns_progress_end(struct ns_progress *p)
{
	if (!p->on)
		return;
	s_draw(p, ns_now_ns());
	fputs("\r\033[K", stderr); /* the line goes; the caller's summary takes its place */
	fflush(stderr);
	p->on = false;
}
