/* srv_engine.c - srv_engine.h over the engine of nsctl run (neurostream.h): nscompute keeps a
 * KV cache per slot (--parallel) and evaluates a step's sequences together (STEP,
 * ns_engine_step). This side keeps count of what each slot holds. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"
#include "srv_engine.h"

struct srv_engine {
	struct ns_engine *ns;
	uint32_t n_slots, n_vocab, n_ctx;
	uint32_t *cached;            /* (n_slots) positions each slot holds */
	struct ns_engine_seq *seqs;  /* (n_slots) a step's request */
	char err[512];
};

int srv_engine_open(const char *model, const struct ns_engine_opts *o, uint32_t n_slots,
		    struct srv_engine **out, char *err, size_t errlen)
{
	struct srv_engine *e = calloc(1, sizeof(*e));
	struct ns_engine_opts eo = *o;
	int rc;

	*out = NULL;
	if (!e || !n_slots || !(e->cached = calloc(n_slots, sizeof(*e->cached))) ||
	    !(e->seqs = calloc(n_slots, sizeof(*e->seqs)))) {
		srv_engine_close(&e);
		return ns_errf(err, errlen, n_slots ? "out of memory" : "no slots"),
		       n_slots ? -ENOMEM : -EINVAL;
	}
	e->n_slots = n_slots;
	eo.n_seq = n_slots;
	rc = ns_engine_load(model, &eo, &e->ns, err, errlen);
	if (rc < 0) {
		srv_engine_close(&e);
		return rc;
	}
	e->n_vocab = ns_engine_n_vocab(e->ns);
	e->n_ctx = ns_engine_n_ctx(e->ns);
	*out = e;
	return 0;
}

void srv_engine_close(struct srv_engine **ep)
{
	struct srv_engine *e = ep ? *ep : NULL;

	if (!e)
		return;
	ns_engine_free(&e->ns);
	free(e->cached);
	free(e->seqs);
	free(e);
	*ep = NULL;
}

int srv_engine_step(struct srv_engine *e, struct srv_eval *ev, uint32_t n)
{
	uint64_t seen = 0;
	int rc;

	if (!n || n > e->n_slots)
		return ns_errf(e->err, sizeof(e->err), "engine step of %u sequences", n), -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (ev[i].slot >= e->n_slots || (seen >> ev[i].slot & 1) || !ev[i].n ||
		    ev[i].keep > e->cached[ev[i].slot] || (uint64_t)ev[i].keep + ev[i].n > e->n_ctx)
			return ns_errf(e->err, sizeof(e->err), "engine step: slot %u keep %u + %u "
				       "tokens out of range", ev[i].slot, ev[i].keep, ev[i].n),
			       -EINVAL;
		seen |= 1ull << ev[i].slot;
		e->seqs[i] = (struct ns_engine_seq){ .slot = ev[i].slot, .keep = ev[i].keep,
						     .tokens = ev[i].tokens, .n = ev[i].n,
						     .logits = ev[i].logits };
	}
	rc = ns_engine_step(e->ns, e->seqs, n);
	if (rc == -ERANGE) { /* a cut refused before anything was evaluated: each slot holds
			      * at least its keep (srv_sched.c evaluates the refused one again) */
		ns_errf(e->err, sizeof(e->err), "%s", ns_engine_error(e->ns));
		for (uint32_t i = 0; i < n; i++)
			if (e->cached[ev[i].slot] > ev[i].keep)
				e->cached[ev[i].slot] = ev[i].keep;
		return rc;
	}
	if (rc < 0) {
		ns_errf(e->err, sizeof(e->err), "%s", ns_engine_error(e->ns));
		memset(e->cached, 0, e->n_slots * sizeof(*e->cached));
		return rc;
	}
	for (uint32_t i = 0; i < n; i++)
		e->cached[ev[i].slot] = ev[i].keep + ev[i].n;
	return 0;
}

uint32_t srv_engine_cached(const struct srv_engine *e, uint32_t slot)
{
	return slot < e->n_slots ? e->cached[slot] : 0;
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
