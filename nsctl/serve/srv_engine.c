/* srv_engine.c - srv_engine.h over the engine of nsctl run (neurostream.h): one nscompute
 * context, the sequences of a step evaluated one after another.
 *
 * nscompute holds one sequence's cache. The slot whose tokens it holds is "resident": a step on
 * it cuts the cache to the kept prefix and appends. A step on another slot evaluates that
 * slot's kept tokens again from an empty context before the new ones. Rows do not depend
 * on how tokens were grouped into evaluations, so this gives the same logits as a cache that
 * had been kept, only later. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"
#include "srv_engine.h"

struct srv_slot_toks {
	int32_t *ids;   /* (cap) the tokens of the slot's cache: positions [0, n) */
	uint32_t n, cap;
};

struct srv_engine {
	struct ns_engine *ns;
	uint32_t n_slots, n_vocab, n_ctx;
	struct srv_slot_toks *slots; /* (n_slots) */
	int64_t resident;            /* slot whose tokens nscompute holds, -1: none */
	int32_t *scratch;            /* (n_ctx) a slot's kept tokens + new ones */
	char err[512];
};

int srv_engine_open(const char *model, const struct ns_engine_opts *o, uint32_t n_slots,
		    struct srv_engine **out, char *err, size_t errlen)
{
	struct srv_engine *e = calloc(1, sizeof(*e));
	int rc;

	*out = NULL;
	if (!e || !n_slots || !(e->slots = calloc(n_slots, sizeof(*e->slots)))) {
		free(e);
		return ns_errf(err, errlen, n_slots ? "out of memory" : "no slots"),
		       n_slots ? -ENOMEM : -EINVAL;
	}
	e->n_slots = n_slots;
	e->resident = -1;
	rc = ns_engine_load(model, o, &e->ns, err, errlen);
	if (rc == 0) {
		e->n_vocab = ns_engine_n_vocab(e->ns);
		e->n_ctx = ns_engine_n_ctx(e->ns);
		if (!(e->scratch = malloc((size_t)e->n_ctx * sizeof(*e->scratch)))) {
			ns_errf(err, errlen, "out of memory");
			rc = -ENOMEM;
		}
	}
	if (rc < 0) {
		srv_engine_close(&e);
		return rc;
	}
	*out = e;
	return 0;
}

void srv_engine_close(struct srv_engine **ep)
{
	struct srv_engine *e = ep ? *ep : NULL;

	if (!e)
		return;
	ns_engine_free(&e->ns);
	for (uint32_t i = 0; i < e->n_slots; i++)
		free(e->slots[i].ids);
	free(e->slots);
	free(e->scratch);
	free(e);
	*ep = NULL;
}

static void s_forget_all(struct srv_engine *e)
{
	for (uint32_t i = 0; i < e->n_slots; i++)
		e->slots[i].n = 0;
	e->resident = -1;
}

/* The slot's tokens become ids[0, n). */
static int s_slot_set(struct srv_slot_toks *s, const int32_t *ids, uint32_t n)
{
	if (n > s->cap) {
		int32_t *p = realloc(s->ids, (size_t)n * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->ids = p;
		s->cap = n;
	}
	memmove(s->ids, ids, (size_t)n * sizeof(*ids));
	s->n = n;
	return 0;
}

static int s_eval_one(struct srv_engine *e, struct srv_eval *ev)
{
	struct srv_slot_toks *s;
	uint32_t total;
	int rc;

	if (ev->slot >= e->n_slots || !ev->n || ev->keep > e->slots[ev->slot].n ||
	    (uint64_t)ev->keep + ev->n > e->n_ctx)
		return ns_errf(e->err, sizeof(e->err), "engine step: slot %u keep %u + %u tokens "
			       "out of range", ev->slot, ev->keep, ev->n), -EINVAL;
	s = &e->slots[ev->slot];
	total = ev->keep + ev->n;
	ev->recomputed = 0;
	if (e->resident == ev->slot && ns_engine_n_past(e->ns) == s->n) {
		/* cut to the kept prefix, append */
		rc = ns_engine_eval(e->ns, ev->keep, ev->tokens, ev->n, ev->logits);
	} else { /* bring the slot's kept tokens back into the context first */
		memcpy(e->scratch, s->ids, (size_t)ev->keep * sizeof(int32_t));
		memcpy(e->scratch + ev->keep, ev->tokens, (size_t)ev->n * sizeof(int32_t));
		e->resident = -1;
		ev->recomputed = ev->keep;
		rc = ns_engine_eval(e->ns, 0, e->scratch, total, ev->logits);
	}
	if (rc == 0) {
		/* tokens may point into the slot's own array: copy through scratch */
		memcpy(e->scratch + ev->keep, ev->tokens, (size_t)ev->n * sizeof(int32_t));
		memcpy(e->scratch, s->ids, (size_t)ev->keep * sizeof(int32_t));
		rc = s_slot_set(s, e->scratch, total);
		e->resident = ev->slot;
	}
	if (rc < 0) {
		if (rc != -ENOMEM)
			ns_errf(e->err, sizeof(e->err), "%s", ns_engine_error(e->ns));
		else
			ns_errf(e->err, sizeof(e->err), "out of memory");
	}
	return rc;
}

int srv_engine_step(struct srv_engine *e, struct srv_eval *ev, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		int rc = s_eval_one(e, &ev[i]);

		if (rc < 0) {
			s_forget_all(e);
			return rc;
		}
	}
	return 0;
}

uint32_t srv_engine_cached(const struct srv_engine *e, uint32_t slot)
{
	return slot < e->n_slots ? e->slots[slot].n : 0;
}

int srv_engine_poll(struct srv_engine *e)
{
	int rc = ns_engine_poll(e->ns);

	if (rc < 0)
		ns_errf(e->err, sizeof(e->err), "%s", ns_engine_error(e->ns));
	return rc;
}

void srv_engine_cancel(struct srv_engine *e)
{
	ns_engine_cancel(e->ns);
}

uint32_t srv_engine_n_slots(const struct srv_engine *e)
{
	return e->n_slots;
}

uint32_t srv_engine_n_vocab(const struct srv_engine *e)
{
	return e->n_vocab;
}

uint32_t srv_engine_n_ctx(const struct srv_engine *e)
{
	return e->n_ctx;
}

struct ns_engine *srv_engine_ns(struct srv_engine *e)
{
	return e->ns;
}

const char *srv_engine_error(const struct srv_engine *e)
{
	return e->err;
}
