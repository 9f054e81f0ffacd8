/* session.h - a neurostream session: runtime directory plus control and arena segments.
 *
 *   struct ns_session *s;
 *   struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
 *   p.arena_bytes = 64ull << 20;
 *   ns_session_create(&p, &s, err, sizeof(err));   // owner: unlinks everything on destroy
 *   ... spawn nsio --session s->id ...
 *   ns_session_destroy(&s);
 *
 * ns_session_attach() maps an existing session (nsio, clients); its destroy only unmaps.
 *
 * Liveness: the runtime dir holds a file "lock" on which every process of the session (the
 * creator from ns_session_create, every attacher from ns_session_attach) holds a shared
 * flock for as long as it has the session. A session is alive while anyone holds it; when
 * the lock can be taken exclusively, every process of it is gone, whatever pids were reused
 * since. ns_session_sweep() (called by every create, and by nsctl ps --clean) removes the
 * segments and runtime dirs of our dead sessions. */
#ifndef NS_SHM_SESSION_H
#define NS_SHM_SESSION_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "layout.h"
#include "seg.h"

struct ns_session_params {
	uint64_t arena_bytes;  /* the --mem-budget; rounded down to align for use */
	uint32_t align;        /* lease granularity, power of two >= 512 (4096) */
	uint32_t max_clients;  /* 1..1024 (32) */
	uint32_t ring_slots;   /* power of two 8..65536 (256) */
	uint32_t lease_slots;  /* power of two 8..1M (1024) */
	uint32_t tensor_cap;   /* 1..1M (16384) */
	const char *id;        /* NULL: random */
};

/* The runtime dir's lock file (see above). */
#define NS_SESSION_LOCK "lock"

#define NS_SESSION_PARAMS_DEFAULT \
	{ .arena_bytes = 0, .align = 4096, .max_clients = 32, .ring_slots = 256, \
	  .lease_slots = 1024, .tensor_cap = 16384, .id = NULL }

struct ns_session {
	char id[NS_SESSION_ID_LEN + 1];
	bool owner;          /* created here: destroy unlinks segments and the runtime dir */
	bool arena_writable;
	struct ns_seg ctl_seg;
	struct ns_seg arena_seg;
	struct ns_ctl *ctl;  /* == ctl_seg.base */
	uint8_t *arena;      /* arena data: arena_seg.base + NS_ARENA_DATA_OFFSET */
	int lock_fd;         /* the runtime dir's lock, held shared (-1: none) */
	char rundir[PATH_MAX];
};

/* Create a new session (sweeping dead ones first). Returns 0 or -errno with a line in err:
 * -EEXIST when the id is taken, -EPERM when a segment of it exists that another user made. */
int ns_session_create(const struct ns_session_params *p, struct ns_session **out, char *err,
		      size_t errlen);

/* Map an existing session; the arena read-write only for nsio. Verifies both headers and the
 * control geometry. -ENOENT if no such session. */
int ns_session_attach(const char *id, bool arena_writable, struct ns_session **out, char *err,
		      size_t errlen);

/* Unmap; when owner, also unlink the session's segments (all of them, other modules' too)
 * and remove the runtime directory. Releases the lock either way. */
void ns_session_destroy(struct ns_session **s);

/* Give up ownership (e.g. hand it to a child) or take it (nsio that created its own). */
static inline void ns_session_set_owner(struct ns_session *s, bool owner)
{
	s->owner = owner;
}

/* Runtime directory path of a session id. */
int ns_session_rundir(const char *id, char *buf, size_t n);

/* Remove every segment and the runtime dir of a session id (best effort). */
void ns_session_unlink(const char *id);

/* Hold the session's lock (shared) for this process: returns the fd to keep open, or -errno
 * with a line in err (-ENOENT: no runtime dir or lock, the session is gone). */
int ns_session_hold(const char *id, char *err, size_t errlen);

/* Is anyone holding the session? 1 alive, 0 dead (its lock is free, or there has been no lock
 * for a minute), -ENOENT without a runtime dir. */
int ns_session_probe(const char *id);

/* Call fn for every runtime dir of ours (session id, its path); stops at a non-zero return,
 * which it returns. */
int ns_session_each(int (*fn)(const char *id, const char *dir, void *arg), void *arg);

/* Remove the segments and runtime dirs of our dead sessions (ns_session_probe), and segments
 * of ours with no runtime dir whose owner (pid + start time) is gone or that are unreadable
 * and older than a minute. Returns the number of sessions and segments removed. */
int ns_session_sweep(void);

/* Is the process that created the session still there (pid and start time)? */
bool ns_session_owner_alive(const struct ns_ctl *ctl);

/* Read the stats block into plain numbers. */
struct ns_stats_snapshot {
	uint64_t bytes_requested, bytes_device, reads, requests, blocks_delivered, stall_ns,
		arena_wait_ns, cache_hits, rejected, stale_dropped, short_reads, eagain,
		leases_reclaimed, restarts, nsio_cpu_ns, ahead_bytes;
	uint64_t predict_experts, predict_hits, predict_reads, predict_promoted, predict_claims,
		predict_skipped;
	uint64_t arena_bytes, arena_reserved, arena_peak, live_leases;
	uint32_t nsio_gen, nsio_state;
	int32_t nsio_pid;
};
void ns_stats_snapshot(struct ns_ctl *ctl, struct ns_stats_snapshot *out);

#endif
