/* hub_progress.c - a download's progress line on a terminal: name, bytes of total, percent,
 * rate and ETA, redrawn in place at most ten times a second. The rate counts only what came
 * over the network in this run (a resumed file starts from its partial bytes). */
#include <stdio.h>
#include <string.h>

#include "hub.h"
#include "ns_util.h"

#define S_REDRAW_NS 100000000ull /* 0.1 s */

char *hub_format_eta(double seconds, char *buf, size_t len)
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

static void s_draw(struct hub_progress *p, uint64_t now)
{
	double secs = (double)(now - p->t0_ns) / 1e9;
	double rate = secs > 0 ? (double)(p->done - p->resumed_from) / secs : 0;
	char done[32], total[32], speed[32], eta[32];
	unsigned pct = p->total ? (unsigned)(100.0 * (double)p->done / (double)p->total) : 100;

	ns_format_bytes(p->done, done, sizeof(done));
	ns_format_bytes(p->total, total, sizeof(total));
	ns_format_bytes((uint64_t)rate, speed, sizeof(speed));
	hub_format_eta(rate > 0 ? (double)(p->total - p->done) / rate : -1, eta, sizeof(eta));
	/* \r and erase-to-end-of-line: the line is rewritten where it stands */
	fprintf(stderr, "\r\033[K%s  %s / %s  %3u%%  %s/s  ETA %s", p->name, done, total,
		pct > 100 ? 100 : pct, speed, eta);
	fflush(stderr);
	p->last_ns = now;
}

void hub_progress_begin(struct hub_progress *p, bool on, const char *name, uint64_t total,
			uint64_t already)
{
	size_t n = strlen(name);

	memset(p, 0, sizeof(*p));
	p->on = on;
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

void hub_progress_restart(struct hub_progress *p)
{
	p->done = p->resumed_from = 0;
	p->t0_ns = ns_now_ns();
}

void hub_progress_add(struct hub_progress *p, uint64_t n)
{
	uint64_t now;

	p->done += n;
	if (!p->on)
		return;
	now = ns_now_ns();
	if (now - p->last_ns >= S_REDRAW_NS)
		s_draw(p, now);
}

void hub_progress_end(struct hub_progress *p)
{
	if (!p->on)
		return;
	s_draw(p, ns_now_ns());
	fputs("\r\033[K", stderr); /* the line goes; the caller's summary takes its place */
	fflush(stderr);
	p->on = false;
}
