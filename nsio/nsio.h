/* nsio.h - the I/O server's state, shared by the files of the nsio executable only.
 *
 * One struct nsio holds everything the process owns: options, the session mapping, the model's
 * file descriptors, the io_uring ring, and the queues of requests between a client's ring and
 * its completion:
 *
 *   client req ring --pop/validate--> waitq (FIFO, waits for arena) --alloc--> chunks (<= block
 *   bytes each) --submit (<= queue depth)--> io_uring --reap--> lease complete --> cpl ring
 *
 * nsio is the only allocator of the arena (shm/arena.h): requests are served strictly in arrival
 * order, so a request that fits an empty arena is always served once older leases retire. */
#ifndef NSIO_NSIO_H
#define NSIO_NSIO_H

#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "layout.h"
#include "model.h"
#include "proto_all.h"
#include "ramcache.h"
#include "ring_fault.h"
#include "session.h"

struct nsio_opts {
	const char *model_path;
	const char *mmproj_path; /* --mmproj: a vision tower served beside the model, or NULL */
	const char *session;    /* NULL: create a random one */
	uint64_t mem_budget;    /* 0: take the session's */
	uint32_t queue_depth;   /* in-flight reads (16) */
	uint64_t block_bytes;   /* largest single read (1 MiB) */
	uint64_t block_rows;    /* run-ahead block rows (0: from block_bytes) */
	uint32_t lookahead;     /* blocks a consumer keeps in flight beyond the current one (2) */
	bool no_direct;         /* buffered reads even where O_DIRECT works */
	bool run_ahead;         /* read ahead along the static per-token tensor order */
	uint64_t quarantine_ms; /* after a restart, keep the dead nsio's in-flight ranges (1000) */
	bool quiet;
	uint64_t ram_budget;    /* --ram-budget: load the plan's RAM windows (0: none) */
	uint64_t plan_wait_ms;  /* how long to wait for the plan before streaming all (30000) */
};

/* A read request from accept to completion. */
struct nsio_req {
	struct nsio_req *next;  /* queue link */
	uint32_t client;        /* slot, or NS_OWNER_NONE for read-ahead */
	uint64_t epoch;         /* client slot epoch at accept */
	uint64_t ticket;
	uint32_t tensor;
	uint64_t row0, nrows;
	uint32_t shard;
	uint64_t file_off;      /* aligned start */
	uint64_t len;           /* aligned length = lease length */
	uint64_t first;         /* first wanted byte, relative to file_off */
	uint64_t want_end;      /* end of wanted bytes, relative to file_off */
	uint64_t disk_pos;      /* first byte read from disk (the rows before it came from RAM) */
	uint32_t lease;         /* lease slot once allocated */
	uint64_t lease_seq;
	uint32_t chunks_left;
	int status;
	bool allocated, done, evict;
	bool predicted;         /* NS_REQ_PREDICT: spare arena only, evicted first, its claims
				 * counted apart from cache_hits until a PREFETCH promotes it */
	bool promote;           /* a PREFETCH of a window a prediction read ahead: at its turn
				 * in the queue it moves that block to the ahead list's tail */
	uint64_t sched_idx;      /* read-ahead: schedule position */
	bool sync;              /* rows a checkpoint's converter would rewrite: made by
				 * ns_model_read_rows into the lease (serve.c), not read in chunks */
	uint64_t t_queued;
};

struct nsio_chunk {
	struct nsio_chunk *next;
	struct nsio_req *req;
	uint64_t pos, end;      /* relative to req->file_off */
	uint8_t stalls;         /* reads in a row that ended short of the next aligned offset */
};

struct nsio {
	struct nsio_opts o;
	struct ns_session *sess;
	struct ns_ctl *ctl;
	bool created_session;
	struct ns_model *model;  /* the model's tensors, then the mmproj's (--mmproj) */
	/* The model alone: model's first n_text tensors (a view sharing model's arrays, never
	 * closed; its name index also knows the mmproj's names, which nothing here looks up).
	 * The RAM tier, the plan and the run-ahead schedule are the text model's: nsplan plans
	 * and nscompute's RAM view index its tensors only; the tower's are always streamed. */
	struct ns_model text;
	int *fds;               /* one per shard */
	int *bfds;              /* one per shard without O_DIRECT, for the rows made by
				 * ns_model_read_rows; NULL when the model has no such tensor */
	bool direct;            /* O_DIRECT on every shard */
	enum { NSIO_FAULT_NONE, NSIO_FAULT_UNALIGNED, NSIO_FAULT_TINY }
		fault_short_read; /* test hook NS_NSIO_FAULT_SHORT_READ (uring.c), read at open */
	struct ns_ring_fault fault; /* test hook NS_FAULT_RING=cpl:N (ring_fault.h) */
	bool fixed_files, fixed_bufs;
	uint64_t fixed_buf_span; /* bytes per registered buffer */
	struct io_uring ring;
	bool ring_ok;
	/* tensor table as validated copies */
	struct ns_rec_tensor *rt;
	/* queues */
	struct nsio_req *waitq, *waitq_tail;   /* accepted, waiting for arena space */
	struct nsio_chunk *chunkq, *chunkq_tail; /* ready to submit */
	struct nsio_chunk *chunk_free;
	struct nsio_req *ahead;                 /* read-ahead blocks (owner none), in order */
	uint32_t inflight;                      /* submitted reads */
	uint64_t pending_reqs;                  /* allocated, not yet complete */
	/* doorbell: a thread turns futex wake-ups of ctl->doorbell into eventfd reads */
	int efd;
	uint64_t efd_buf;
	bool efd_armed, need_submit;
	pthread_t bell;
	bool bell_started;
	_Atomic int bell_stop;
	/* run-ahead schedule: (tensor, row0, nrows) in per-token order */
	struct ns_zplan_item *sched;
	uint64_t n_sched, ahead_next;  /* next schedule block to read ahead */
	uint64_t *sched_first;         /* per tensor: its first schedule block */
	uint64_t *sched_rows;          /* per tensor: rows per schedule block (0: not in it) */
	uint64_t *sched_start;         /* per tensor: row of its first block (RAM prefix) */
	uint64_t ahead_bytes;          /* bytes held by read-ahead leases */
	uint64_t t_reap, t_cpu;
	uint64_t quarantine_until;     /* ns_now_ns() when quarantined leases may go, or 0 */
	bool restarted;                /* took over from a dead nsio (generation > 1): serve
					* while the RAM tier reloads, see nsio_serve */
	volatile sig_atomic_t *stop;
	volatile sig_atomic_t *dump; /* SIGUSR1: print the queues to stderr */
	volatile sig_atomic_t *no_plan; /* SIGUSR2: no plan will come (nsplan ended); the RAM
					 * tier stops waiting for one and streams everything */
	int exit_code;          /* nsio's exit code when serving ended by itself (0: none) */
	bool said_short;
	bool said_read_err;       /* a failed read was explained on stderr (once) */
	struct nsio_ram ram;    /* the RAM tier (ramcache.h) */
};

int nsio_parse_options(int argc, char **argv, struct nsio_opts *o);

/* Attach to (or create) the session, open the model, publish the tensor table, check the
 * budget, recover leases of a previous nsio. Exit-code style: 0, 1 runtime, 2 bad input. */
int nsio_attach(struct nsio *s);
/* Open shard files and the io_uring ring, register files and buffers where allowed. */
int nsio_uring_setup(struct nsio *s);
/* Serve until *stop. Returns 0 or 1. */
int nsio_serve(struct nsio *s);
void nsio_teardown(struct nsio *s);

/* serve.c: load the RAM tier once the plan is published; true once requests may be served */
bool nsio_ram_ready(struct nsio *s);

/* io_uring plumbing (uring.c) */
int nsio_submit_chunks(struct nsio *s);
void nsio_handle_cqe(struct nsio *s, struct io_uring_cqe *cqe);
int nsio_arm_doorbell(struct nsio *s);
/* serve.c: a request's last chunk finished / its lease goes back / it is handed over */
void nsio_req_done(struct nsio *s, struct nsio_req *r);
void nsio_release(struct nsio *s, struct nsio_req *r);
void nsio_deliver(struct nsio *s, struct nsio_req *r); /* frees r */
struct nsio_req *nsio_new_req(struct nsio *s, uint32_t client, uint64_t epoch, uint64_t ticket,
			      uint32_t tensor, uint64_t row0, uint64_t nrows, int *err);
int nsio_start_req(struct nsio *s, struct nsio_req *r); /* queue its chunks */

/* ahead.c: read-ahead */
void nsio_ahead_park(struct nsio *s, struct nsio_req *r);
void nsio_ahead_drop(struct nsio *s, struct nsio_req *r);
bool nsio_ahead_claim(struct nsio *s, uint32_t client, uint64_t epoch, uint64_t ticket,
		      uint32_t tensor, uint64_t row0, uint64_t nrows);
void nsio_ahead_follow(struct nsio *s, uint32_t tensor, uint64_t row0, uint64_t nrows);
bool nsio_ahead_evict_done(struct nsio *s);
/* A PREFETCH or PREDICT of a window already queued or read ahead: true when it needs no new
 * read (a duplicate, or a PREFETCH promoting a queued prediction); *promote set when it must
 * queue as a promotion of a predicted block on the ahead list (nsio_ahead_promote). */
bool nsio_ahead_hint(struct nsio *s, bool predict, uint32_t tensor, uint64_t row0,
		     uint64_t nrows, bool *promote);
/* A promotion's turn in the queue: the predicted block, if still there, moves to the ahead
 * list's tail as an ordinary read-ahead block (true); false when it is gone (evicted for a
 * real read): the promotion is then read as the ordinary PREFETCH it was. */
bool nsio_ahead_promote(struct nsio *s, const struct nsio_req *q);
/* Drop the predicted blocks no one promoted or claimed. Returns whether any went. */
bool nsio_ahead_evict_predicted(struct nsio *s);
int nsio_run_ahead(struct nsio *s);
/* Split an allocated request into chunks queued for submission. */
int nsio_queue_chunks(struct nsio *s, struct nsio_req *r);

/* budget.c: smallest arena holding lookahead+1 one-row blocks of every tensor; names the
 * tensor that needs it. */
uint64_t nsio_min_budget(const struct ns_model *m, uint32_t lookahead, uint32_t align,
			 uint64_t *worst_tensor, uint64_t *worst_span);
int nsio_build_schedule(struct nsio *s);

#define NSIO_UD_DOORBELL 1ull

#endif
