/* srv_sched.h - the request queue and the scheduler thread of nsctl serve.
 *
 * Requests wait in arrival order in a bounded queue; each takes a free slot (srv_engine.h)
 * when one is there: the free slot whose cached tokens share the longest prefix with its
 * prompt (a chat's next turn finds its previous turn), else the one unused longest. The
 * scheduler thread owns the engine and runs steps: every active sequence advances in each
 * step, by one decoded token, or by a chunk of at most prefill_chunk prompt tokens (one
 * prefilling sequence per step, so a long prompt does not stall the others for long). New
 * requests join between steps. Per request it samples with the request's own sampler
 * (sampling.h, seeded by the request), so what a request generates does not depend on the
 * others.
 *
 * A cancelled request (client gone) leaves its slot at the next step boundary. When the
 * engine fails, every request in flight ends with an error; if nscompute is gone (-EPIPE)
 * the scheduler stops taking work and srv_sched_dead says so. */
#ifndef NSCTL_SRV_SCHED_H
#define NSCTL_SRV_SCHED_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "srv_engine.h"
#include "srv_req.h"

struct ns_tok;
struct srv_sched;

struct srv_sched_opts {
	uint32_t max_waiting;    /* requests waiting for a slot at most (then 503) */
	uint32_t prefill_chunk;  /* prompt tokens of one sequence per step */
	bool no_reuse;           /* always evaluate the whole prompt */
};

/* Starts the scheduler thread over eng (borrowed, driven only by that thread from now on
 * until srv_sched_stop) and tok (borrowed). Returns 0 or a negative errno. */
int srv_sched_start(struct srv_engine *eng, const struct ns_tok *tok,
		    const struct srv_sched_opts *o, struct srv_sched **out);

/* Stop: no new requests (srv_sched_submit: -ESHUTDOWN); waiting ones end with a 503 error;
 * active ones go on until they finish or until grace_ms has passed, then end with an error.
 * Joins the thread (the engine is the caller's again afterwards). Requests still held by
 * HTTP threads stay valid: take, wait and release go on working until srv_sched_free. A
 * second call does nothing. */
void srv_sched_stop(struct srv_sched *s, uint64_t grace_ms);
/* Stops (grace 0) if not stopped, frees *s, nulls it. Every request must be released. */
void srv_sched_free(struct srv_sched **s);

/* A request with its parameters (p is moved in: the request owns its buffers now; p is
 * zeroed). Returns the request (two references: release it with srv_sched_release once
 * done with it) or NULL when out of memory. */
struct srv_req *srv_req_new(struct srv_params *p);

/* Queue r. Returns 0, -EBUSY (the queue is full), -ESHUTDOWN (stopping or the engine is
 * gone). On error the scheduler's reference is dropped already. */
int srv_sched_submit(struct srv_sched *s, struct srv_req *r);

/* The HTTP side's view. All three lock the scheduler's mutex. */
/* Wait until r has output to take or is done, at most timeout_ms. Returns true when there
 * is something (or done). */
bool srv_sched_wait(struct srv_sched *s, struct srv_req *r, uint64_t timeout_ms);
/* Move r's pending output into the caller's buffers (appending; lps: the caller frees) and
 * copy its state. Returns true when r is done (finish, counts and error then final). */
struct srv_take {
	struct ns_text answer, reasoning;
	struct srv_token_lp *lps;
	uint32_t n_lps;
	uint32_t n_gen, n_cached;
	enum srv_finish finish;
	int err_status;
	char err[320];
	bool done;
	uint32_t position;        /* waiting: requests ahead of it in the queue */
};
void srv_sched_take(struct srv_sched *s, struct srv_req *r, struct srv_take *t);
void srv_take_free(struct srv_take *t);
/* The client is gone: stop generating for r. */
void srv_sched_cancel(struct srv_sched *s, struct srv_req *r);
/* Drop a reference (the last one frees r). */
void srv_sched_release(struct srv_sched *s, struct srv_req *r);

/* nscompute died: no more requests can be served (the server should stop). */
bool srv_sched_dead(struct srv_sched *s);

/* Counters for /health and the log. */
struct srv_sched_stats {
	uint32_t active, waiting, slots;
	uint64_t served, steps;
};
void srv_sched_stats(struct srv_sched *s, struct srv_sched_stats *out);

#endif
