/* srv_engine.h - what nsctl serve needs of the pipeline: KV-cache slots, one per sequence,
 * and evaluation steps that advance several sequences at once.
 *
 * A slot holds the cache of one sequence: the positions [0, n) of the tokens evaluated into
 * it. A step names, for each sequence taking part, its slot, how many cached positions it
 * keeps (the rest are forgotten: a request that shares only a prefix with the slot's last
 * one) and the tokens to append after them; it returns the logits after each sequence's last
 * token. The server samples from them itself (per-request samplers, logprobs, stop strings).
 * Each sequence's logits are bit-identical to evaluating that sequence alone: a row of the
 * forward pass depends only on its own sequence (matmuls and attention are per row, reduced
 * in an order fixed by the kernel, not by the batch).
 *
 * The engine is driven by one thread (the server's scheduler). */
#ifndef NSCTL_SRV_ENGINE_H
#define NSCTL_SRV_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "neurostream.h"

struct srv_engine;

/* One sequence's part of a step. */
struct srv_eval {
	uint32_t slot;          /* 0 .. n_slots - 1, each at most once per step */
	uint32_t keep;          /* cached positions of the slot kept (<= srv_engine_cached) */
	const int32_t *tokens;  /* (n) appended at positions keep .. keep + n - 1 */
	uint32_t n;             /* >= 1; keep + n <= n_ctx */
	float *logits;          /* out: (n_vocab) after the last token, or NULL (a prefill
				 * chunk that does not end the prompt) */
};

/* Start the pipeline for model (as nsctl run starts it: o's budgets, backend, context) with
 * n_slots sequence slots of o->n_ctx positions each. Returns 0 with *out, or a negative
 * errno with one line in err (-EINVAL / -ENOSPC: bad model or options). */
int srv_engine_open(const char *model, const struct ns_engine_opts *o, uint32_t n_slots,
		    struct srv_engine **out, char *err, size_t errlen);
/* Stop every process, remove the session; nulls *e. Safe on NULL. */
void srv_engine_close(struct srv_engine **e);

/* Evaluate one step. Returns 0, -EINVAL (bad slot, keep or token: the caller's bug),
 * -EPIPE (nscompute died), -ECANCELED, or another negative errno; after an error every
 * slot is empty (srv_engine_cached 0). */
int srv_engine_step(struct srv_engine *e, struct srv_eval *ev, uint32_t n);

/* Positions held by a slot (what a step may keep). */
uint32_t srv_engine_cached(const struct srv_engine *e, uint32_t slot);

/* Check the children while idle (restart a dead nsio, nsplan or nsrouter). Returns 0 or
 * -EPIPE when nscompute is gone. */
int srv_engine_poll(struct srv_engine *e);

/* Make the step in progress return -ECANCELED (any thread, async-signal-safe). */
void srv_engine_cancel(struct srv_engine *e);

uint32_t srv_engine_n_slots(const struct srv_engine *e);
uint32_t srv_engine_n_vocab(const struct srv_engine *e);
uint32_t srv_engine_n_ctx(const struct srv_engine *e);
/* The engine underneath (session, pids, statistics). */
struct ns_engine *srv_engine_ns(struct srv_engine *e);
const char *srv_engine_error(const struct srv_engine *e);

#endif
