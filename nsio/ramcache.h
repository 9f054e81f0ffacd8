/* ramcache.h - nsio's RAM tier: the plan's RAM windows, loaded through the arena.
 *
 * nsio reads the published plan (nsplan/plan_shm.h) and keeps every RAM-tier window of it in
 * the session's RAM segment (shm/ram_seg.h: its layout and the readers' checked view; nsio is
 * its only writer), data capacity --ram-budget.
 *
 * Two kinds of window:
 *   - fixed: every window that is not an expert slab. Placed at the front of data once, at the
 *     first generation, and never moved or dropped: compute maps the segment read-only and
 *     multiplies the ones that are a row prefix [0, rows) of their tensor in place
 *     (nscompute/forward/weights_stream.c), through rows[t] / off[t] (offset from data).
 *     dir.ready is stored (release) once they are all loaded, after the tables.
 *   - expert: a window inside an expert slab (nsplan_entry.expert != NSPLAN_NO_EXPERT). Never
 *     in rows[] / off[]; only nsio reads them, copying the resident rows of a request into its
 *     lease at the start of the request. So nothing outside nsio ever points into them, and a
 *     later plan generation may move, drop and add them between two requests.
 * nsio serves requests for resident rows (either kind) by copy; those rows are never bytes
 * requested.
 *
 * Filling: every window byte comes from the model file through the arena, in bounded chunks:
 * a chunk is one O_DIRECT (or buffered, where nsio's files are) read on a small io_uring ring
 * of its own into an unowned arena lease of at most io->chunk bytes, copied into the segment,
 * and the lease released. The arena's budget bounds the fill's transient memory, so a tensor
 * larger than the arena loads too. Fill reads are counted in the directory (fill_*), never in
 * the session's bytes_requested / bytes_device (those are per-token figures).
 *
 * Generations: nsio_ram_poll() picks up a new plan generation between requests: expert
 * windows the new plan keeps stay (moved, not re-read), windows it drops go at once (no lease
 * or reader points into them), new ones are filled by nsio_ram_fill_step() while requests are
 * served; a window is used only once it is complete. dir.plan_gen says which generation is
 * fully loaded. The fixed windows of later generations must equal the first's (they do: the
 * planner places non-expert tensors ahead of every expert slab); a plan that changes them
 * keeps the old fixed set (said once).
 *
 * Ownership: struct nsio_ram is owned by struct nsio (nsio_ram_destroy frees everything). */
#ifndef NSIO_RAMCACHE_H
#define NSIO_RAMCACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "ram_seg.h"

/* One resident (or loading) window: rows [row0, row1) of tensor at data offset off. */
struct nsio_ram_win {
	uint32_t tensor;
	bool expert;          /* movable expert window (see above) */
	bool ready;           /* complete: may be served */
	uint64_t row0, row1;
	uint64_t off;
	uint64_t bytes;
};

struct io_uring;
struct ns_ctl;

/* What the fill borrows from nsio. */
struct nsio_ram_io {
	struct ns_ctl *ctl;   /* arena allocator (nsio is its only caller) */
	uint8_t *arena;       /* the arena's data, read-write */
	const int *fds;       /* one per shard, opened as nsio reads (O_DIRECT where it works) */
	const int *bfds;      /* one per shard without O_DIRECT, for ns_model_read_rows (NULL
			       * when no tensor needs it) */
	uint64_t chunk;       /* most bytes one fill lease may hold (rounded down to align) */
};

struct nsio_ram {
	uint64_t budget;      /* --ram-budget */
	struct ns_ram_seg seg; /* the segment (seg.seg.base NULL when none) */
	struct ns_ram_dir *dir; /* == seg.dir, NULL when none */
	uint8_t *base;        /* its data, size bytes */
	char session[32];
	uint64_t size;        /* data capacity: the budget */
	uint64_t *rows;       /* [n_tensors] fixed row prefix of each tensor (compute's table) */
	uint64_t *off;        /* [n_tensors] offset of that prefix in base */
	uint64_t n_tensors;
	struct nsio_ram_win *win; /* n_win, sorted by (tensor, row0), owned */
	uint64_t n_win;
	uint64_t *first;      /* [n_tensors + 1]: first window of each tensor in win */
	uint64_t fixed_end;   /* data bytes of the fixed windows (the front of data) */
	uint64_t resident_bytes;
	uint64_t ignored;     /* RAM windows left out (did not fit beside the fixed set) */
	uint32_t plan_gen;    /* generation applied (its fill may still run) */
	uint32_t plan_seq;    /* the plan segment's seqlock value when last read */
	struct ns_seg plan;   /* the plan segment, mapped read-only once found */
	uint64_t fill_idx, fill_pos; /* next window to fill, bytes of it done */
	bool filling;
	bool said_fixed;
	struct io_uring *ring; /* the fill's own ring, made on first use */
	bool ready;           /* the first generation is loaded (or given up on) */
	uint64_t t_start;     /* when nsio began waiting for the plan */
	uint64_t t_poll;      /* last look for a new generation */
};

/* Look at the session's plan; if its generation is not the one applied, apply it: the first
 * creates the segment and queues every window for filling; a later one keeps, drops and
 * queues expert windows (see above). Returns 1 when a generation was applied, 0 when there is
 * nothing new, -EAGAIN while no plan is published yet, another negative errno with a line in
 * err (the current windows stay). */
int nsio_ram_poll(struct nsio_ram *rc, const struct ns_model *m, const char *session,
		  char *err, size_t errlen);

/* Fill one chunk of the first incomplete window through the arena. Returns 1 after a chunk,
 * 0 when every window is complete (dir.plan_gen is then the applied generation), -EAGAIN when
 * the arena has no room for a chunk now, another negative errno with a line in err (filling
 * stops; the incomplete windows are streamed). */
int nsio_ram_fill_step(struct nsio_ram *rc, const struct ns_model *m,
		       const struct nsio_ram_io *io, char *err, size_t errlen);

/* Rows of [row0, row0 + nrows) of tensor held in RAM, always a prefix of the window:
 * returns k in [0, nrows]; *src gets the address of row row0 in the cache when k > 0. */
uint64_t nsio_ram_prefix(const struct nsio_ram *rc, uint32_t tensor, uint64_t row0,
			 uint64_t nrows, uint64_t row_bytes, const uint8_t **src);

/* Unmap, and unlink the segment if this process created it. */
void nsio_ram_destroy(struct nsio_ram *rc);

#endif
