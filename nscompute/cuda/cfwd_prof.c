/* cfwd_prof.c - NS_CFWD_PROFILE=1: an event after every step of the pass, times summed per
 * kind, printed when the pass is destroyed (the events cost a microsecond or two each: a
 * diagnosis, not a benchmark). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfwd_internal.h"

int cfwd_prof_init(struct cfwd *c, char *err, size_t errlen)
{
	const char *on = getenv("NS_CFWD_PROFILE");
	int rc;

	if (!on || !strcmp(on, "0"))
		return 0;
	c->prof.ev = calloc(CFWD_PROF_EV, sizeof(*c->prof.ev));
	c->prof.kind = calloc(CFWD_PROF_EV, 1);
	if (!c->prof.ev || !c->prof.kind) {
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (int i = 0; i < CFWD_PROF_EV; i++) {
		if ((rc = ns_cuda_event_new(&c->prof.ev[i])) < 0) {
			ns_errf(err, errlen, "cuda: cannot create profiling events: %s",
				ns_cuda_last_error());
			return rc;
		}
	}
	c->prof.on = true;
	return 0;
}

void cfwd_mark(struct cfwd *c, int kind)
{
	struct cfwd_prof *p = &c->prof;

	if (!p->on || p->n >= CFWD_PROF_EV)
		return;
	if (ns_cuda_event_record(p->ev[p->n], c->cs) == 0)
		p->kind[p->n++] = (uint8_t)kind;
}

void cfwd_prof_collect(struct cfwd *c, uint64_t t0, uint32_t n)
{
	struct cfwd_prof *p = &c->prof;

	if (!p->on || ns_cuda_stream_sync(c->cs) < 0)
		return;
	for (uint32_t i = 1; i < p->n; i++) {
		float ms = 0;

		if (ns_cuda_event_ms(p->ev[i - 1], p->ev[i], &ms) == 0)
			p->ms[p->kind[i]] += ms;
	}
	p->n = 0;
	p->evals++;
	p->tokens += n;
	p->wall_ms += (ns_now_ns() - t0) / 1e6;
	p->host_ms += (c->prof_submit_ns - t0) / 1e6;
}

static void s_print(const struct cfwd *c)
{
	static const char *const names[CFWD_P_N] = { "embedding", "rmsnorm", "q/k/v/o matmul",
		"rope", "kv store", "attention", "ffn matmul", "add/bias/act", "router",
		"experts", "output head" };
	const struct cfwd_prof *p = &c->prof;
	double sum = 0;

	if (!p->on || !p->evals)
		return;
	for (int k = 0; k < CFWD_P_N; k++)
		sum += p->ms[k];
	fprintf(stderr, "cfwd profile: %llu evaluations, %llu tokens: wall %.3f ms/eval, host "
		"submission %.3f ms/eval, device steps %.3f ms/eval\n",
		(unsigned long long)p->evals, (unsigned long long)p->tokens, p->wall_ms / p->evals,
		p->host_ms / p->evals, sum / p->evals);
	for (int k = 0; k < CFWD_P_N; k++)
		if (p->ms[k] > 0)
			fprintf(stderr, "cfwd profile:   %-14s %8.3f ms/eval %5.1f%%\n", names[k],
				p->ms[k] / p->evals, 100.0 * p->ms[k] / sum);
}

void cfwd_prof_finish(struct cfwd *c)
{
	s_print(c);
	for (uint32_t i = 0; c->prof.ev && i < CFWD_PROF_EV; i++)
		ns_cuda_event_destroy(&c->prof.ev[i]);
	free(c->prof.ev);
	free(c->prof.kind);
	c->prof.ev = NULL;
	c->prof.kind = NULL;
	c->prof.on = false;
}
