/* layout.h - what lives inside a session's control segment.
 *
 *   ctl segment  "/ns-<user>-<id>-ctl"   read-write for nsio and clients
 *     struct ns_ctl                       header, geometry, nsio state, arena state, stats
 *     struct ns_client_slot[max_clients]  each followed by its two rings:
 *       req[ring_slots]  client -> nsio   (SPSC: client writes tail, nsio writes head)
 *       cpl[ring_slots]  nsio -> client   (SPSC: nsio writes tail, client writes head)
 *     struct ns_lease[lease_slots]        lease table, a ring in allocation order
 *     struct ns_tensor_entry[tensor_cap]  the model's tensors, published by nsio
 *   arena segment "/ns-<user>-<id>-arena" header page, then arena_bytes of weight bytes;
 *                                         nsio maps it read-write, compute read-only.
 *
 * Writers: only nsio writes the arena state, the lease table, the tensor table and completion
 * rings; a client writes its own request ring, its cpl_head and its slot claim. Every field a
 * reader takes from the other side is validated (see proto/ring_rec.h). */
#ifndef NS_SHM_LAYOUT_H
#define NS_SHM_LAYOUT_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "seg.h"

#define NS_RING_REC_BYTES 64
#define NS_TENSOR_NAME_LEN 64
#define NS_ARENA_DATA_OFFSET 4096u /* arena data starts one page into its segment */
#define NS_OWNER_NONE 0xffffffffu

enum ns_nsio_state {
	NS_NSIO_NONE = 0,       /* no nsio has attached yet */
	NS_NSIO_RECOVERING = 1, /* an nsio is rebuilding state; clients wait */
	NS_NSIO_RUNNING = 2,    /* tensor table published, requests served */
	NS_NSIO_STOPPED = 3,    /* nsio exited cleanly */
};

enum ns_client_state {
	NS_CLIENT_FREE = 0,
	NS_CLIENT_CLAIMED = 1, /* a client is initialising the slot */
	NS_CLIENT_ACTIVE = 2,
	NS_CLIENT_CLOSING = 3, /* client sent CLOSE; nsio frees the slot */
};

enum ns_lease_state {
	NS_LEASE_FREE = 0,
	NS_LEASE_ALLOC = 1,     /* bytes reserved, reads in flight */
	NS_LEASE_DELIVERED = 2, /* completion written for its owner */
	NS_LEASE_RETIRED = 3,   /* released, waiting for the tail to pass */
	NS_LEASE_ORPHAN = 4,    /* owner gone while reads were in flight */
	NS_LEASE_QUARANTINE = 5, /* reads of a killed nsio may still land here: not reusable yet */
};

/* Counters any process may read (ns_stats_snapshot). All monotonic except reserved. */
struct ns_stats {
	_Atomic uint64_t bytes_requested; /* weight bytes asked for: nrows * row_bytes */
	_Atomic uint64_t bytes_device;    /* bytes read from the device (aligned ranges) */
	_Atomic uint64_t reads;           /* I/O operations completed */
	_Atomic uint64_t requests;        /* read requests accepted */
	_Atomic uint64_t blocks_delivered;
	_Atomic uint64_t stall_ns;        /* time clients waited for a block not yet ready */
	_Atomic uint64_t arena_wait_ns;   /* time requests waited for arena space */
	_Atomic uint64_t cache_hits;      /* requests served by a block nsio had read ahead */
	_Atomic uint64_t rejected;        /* malformed or out-of-range records */
	_Atomic uint64_t stale_dropped;   /* requests of a previous nsio generation, dropped */
	_Atomic uint64_t short_reads;
	_Atomic uint64_t eagain;
	_Atomic uint64_t leases_reclaimed; /* leases of dead clients or dead nsio generations */
	_Atomic uint64_t restarts;        /* nsio attaches after the first */
	_Atomic uint64_t nsio_cpu_ns;     /* CPU time of the current nsio (updated ~10 Hz) */
	_Atomic uint64_t ahead_bytes;     /* gauge: arena bytes held by unclaimed read-ahead */
	/* MoE expert prediction (nscompute's --moe-predict, nsrouter, nsio NS_REQ_PREDICT) */
	_Atomic uint64_t predict_experts; /* nscompute: experts the real router chose in layers
					   * that had a prediction */
	_Atomic uint64_t predict_hits;    /* of them, the ones the prediction named */
	_Atomic uint64_t predict_reads;   /* nsio: predicted windows read into spare arena */
	_Atomic uint64_t predict_promoted; /* of them, asked for by the real plan's PREFETCH */
	_Atomic uint64_t predict_claims;  /* READs served by a predicted window never promoted
					   * (not counted in cache_hits: not the real plan's) */
	_Atomic uint64_t predict_skipped; /* predicted windows not read: no spare arena, or
					   * already queued or read ahead */
};

/* Liveness: each process of a session bumps its role's beat counter as it makes progress
 * (every pass of its loop, which wakes at least every 100 ms when idle, and, for the compute,
 * every weight block, token and wait tick) and publishes its pid there. The supervisor
 * (nsctl) takes a counter that stops moving for its stated time as a stopped or stuck
 * process. */
enum ns_beat_role {
	NS_BEAT_NONE = 0,       /* a client that publishes no beat */
	NS_BEAT_NSIO = 1,
	NS_BEAT_NSCOMPUTE = 2,
	NS_BEAT_NSPLAN = 3,
	NS_BEAT_NSROUTER = 4,
	NS_BEAT_COUNT = 5,
};

struct ns_beat {
	_Atomic uint64_t beats;
	_Atomic int32_t pid;    /* the process beating (not a wrapper around it) */
	uint32_t pad;
};

struct ns_arena_state {
	_Atomic uint64_t head_seq; /* next lease sequence number */
	_Atomic uint64_t tail_seq; /* oldest lease not yet swept */
	_Atomic uint64_t off_head; /* arena offset of the next allocation */
	_Atomic uint64_t reserved; /* bytes held by live leases */
	_Atomic uint64_t peak;     /* highest value reserved ever had */
};

struct ns_lease {
	_Atomic uint32_t state; /* enum ns_lease_state */
	uint32_t owner;         /* client slot, or NS_OWNER_NONE */
	uint64_t seq;           /* allocation sequence: the lease's generation */
	uint64_t off;           /* arena offset, multiple of ctl->align */
	uint64_t len;           /* reserved bytes, multiple of ctl->align */
	uint64_t ticket;        /* the owner's ticket */
	uint64_t client_epoch;  /* the owner's slot epoch */
	uint32_t cpl_pos;       /* completion ring position of its completion */
	uint32_t pad;
	uint64_t pad2;
};
_Static_assert(sizeof(struct ns_lease) == 64, "lease is one cache line");

struct ns_tensor_entry {
	char name[NS_TENSOR_NAME_LEN]; /* NUL-terminated, truncated if longer */
	uint32_t type;
	uint32_t shard;
	uint64_t file_offset;
	uint64_t n_rows;
	uint64_t row_bytes;
	uint64_t pad[4];
};
_Static_assert(sizeof(struct ns_tensor_entry) == 128, "tensor entry is 128 bytes");

struct ns_ring_rec {
	uint8_t b[NS_RING_REC_BYTES];
};

struct ns_client_slot {
	_Atomic uint32_t state; /* enum ns_client_state */
	_Atomic int32_t pid;
	_Atomic uint64_t epoch; /* bumped on every claim */
	alignas(64) _Atomic uint32_t req_head; /* nsio: next record to consume */
	alignas(64) _Atomic uint32_t req_tail; /* client: next record to write */
	_Atomic uint32_t req_waiting;          /* client sleeps on req_head (ring full) */
	alignas(64) _Atomic uint32_t cpl_head; /* client: next record to consume */
	alignas(64) _Atomic uint32_t cpl_tail; /* nsio: next record to write; futex word */
	_Atomic uint32_t cpl_waiting;          /* client sleeps on cpl_tail */
	alignas(64) uint8_t end_[];
};

struct ns_ctl {
	struct ns_seg_header hdr;
	/* geometry, fixed at creation */
	uint64_t arena_bytes;  /* usable arena bytes: the budget rounded down to align */
	uint64_t budget_bytes; /* the budget as given */
	uint32_t align;        /* lease and O_DIRECT granularity */
	uint32_t max_clients;
	uint32_t ring_slots;   /* power of two */
	uint32_t lease_slots;  /* power of two */
	uint32_t tensor_cap;
	uint32_t reserved0;
	uint64_t client_slot_bytes;
	uint64_t off_clients;
	uint64_t off_leases;
	uint64_t off_tensors;
	/* nsio */
	alignas(64) _Atomic int32_t nsio_pid;
	_Atomic uint32_t nsio_state; /* enum ns_nsio_state */
	_Atomic uint32_t nsio_gen;   /* == hdr.generation (low bits), futex word */
	_Atomic uint32_t doorbell;   /* clients bump it and wake nsio */
	_Atomic uint64_t n_tensors;
	_Atomic uint64_t model_hash; /* identifies the tensor table across nsio restarts */
	_Atomic uint32_t lookahead;  /* nsio's --lookahead, a default for clients */
	_Atomic uint32_t queue_depth;
	_Atomic uint64_t block_bytes; /* nsio's --block-bytes, a default for clients */
	_Atomic uint32_t direct;      /* 1: O_DIRECT reads, 0: buffered fallback */
	alignas(64) struct ns_arena_state arena;
	alignas(64) struct ns_stats stats;
	alignas(64) struct ns_beat beat[NS_BEAT_COUNT];
};

/* One beat of role r (NS_BEAT_NONE and out-of-range roles: nothing). */
static inline void ns_beat(struct ns_ctl *c, uint32_t r)
{
	if (r > NS_BEAT_NONE && r < NS_BEAT_COUNT)
		atomic_fetch_add_explicit(&c->beat[r].beats, 1, memory_order_relaxed);
}

/* The process of role r says who it is (its first beat). */
static inline void ns_beat_hello(struct ns_ctl *c, uint32_t r, int32_t pid)
{
	if (r > NS_BEAT_NONE && r < NS_BEAT_COUNT) {
		atomic_store(&c->beat[r].pid, pid);
		ns_beat(c, r);
	}
}

static inline struct ns_client_slot *ns_ctl_client(struct ns_ctl *c, uint32_t i)
{
	return (struct ns_client_slot *)((uint8_t *)c + c->off_clients + (uint64_t)i *
					 c->client_slot_bytes);
}

static inline struct ns_ring_rec *ns_slot_req(struct ns_ctl *c, struct ns_client_slot *s)
{
	(void)c;
	return (struct ns_ring_rec *)s->end_;
}

static inline struct ns_ring_rec *ns_slot_cpl(struct ns_ctl *c, struct ns_client_slot *s)
{
	return (struct ns_ring_rec *)s->end_ + c->ring_slots;
}

static inline struct ns_lease *ns_ctl_leases(struct ns_ctl *c)
{
	return (struct ns_lease *)((uint8_t *)c + c->off_leases);
}

static inline struct ns_tensor_entry *ns_ctl_tensors(struct ns_ctl *c)
{
	return (struct ns_tensor_entry *)((uint8_t *)c + c->off_tensors);
}

#endif
