/* ramcache.h - nsio's RAM tier: the plan's RAM windows, loaded once at start.
 *
 * nsio reads the published plan (nsplan/plan_shm.h), keeps the RAM-tier windows that are a
 * row prefix [0, rows) of their tensor (the planner places the largest whole-row prefix that
 * fits, see plan.h), and loads them from the model files into the shm segment
 * "/ns-<user>-<session>-ram" (nsio is its only writer), in bounded chunks of block_bytes each:
 *
 *   struct ns_seg_header | struct nsio_ram_dir | rows[n_tensors] | off[n_tensors] | data
 *
 * data holds the plan's ram_used bytes (never more than --ram-budget); rows[t] is the resident
 * row prefix of tensor t (model index), off[t] its offset from the start of data. dir.ready
 * is stored (release) after everything else. Compute maps the segment read-only and multiplies
 * resident rows in place (nscompute/forward/weights_stream.c); nsio serves requests for
 * resident rows by copying them into the lease. Either way they are not bytes requested.
 *
 * Ownership: struct nsio_ram is owned by struct nsio (nsio_ram_destroy frees everything). */
#ifndef NSIO_RAMCACHE_H
#define NSIO_RAMCACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "seg.h"

#define NSIO_RAM_SEG_KIND 4u /* until shm/seg.h names it */
#define NSIO_RAM_SEG_WHAT "ram"
#define NSIO_RAM_MAGIC 0x314d4152534e00ull /* "\0NSRAM1" */

struct nsio_ram_dir {
	uint64_t magic;
	_Atomic uint32_t ready;
	uint32_t reserved;
	uint64_t n_tensors;
	uint64_t data_off;    /* from the segment base, multiple of 64 */
	uint64_t data_bytes;
};

struct nsio_ram {
	uint64_t budget;      /* --ram-budget */
	struct ns_seg seg;    /* the segment (base NULL when nothing is resident) */
	uint8_t *base;        /* its data, size bytes */
	char session[32];
	uint64_t size;
	uint64_t *rows;       /* [n_tensors] resident row prefix of each tensor */
	uint64_t *off;        /* [n_tensors] offset of that prefix in base */
	uint64_t n_tensors;
	uint64_t resident_bytes;
	uint64_t ignored;     /* RAM windows that are not a row prefix (streamed instead) */
	bool ready;           /* loaded (or given up on) */
	uint64_t t_start;     /* when nsio began waiting for the plan */
};

/* Try once to read the plan of session and load its RAM windows. Returns 0 when loaded (or
 * nothing to load), -EAGAIN while the plan is not published yet (the segment absent, or its
 * header not written yet: err says why), another negative errno with a line in err on
 * failure. The load opens its own buffered descriptors on m's shard paths
 * (the page cache is dropped behind each chunk); the arena is not used, so a tensor larger
 * than the arena loads too. */
int nsio_ram_load(struct nsio_ram *rc, const struct ns_model *m, const char *session,
		  int32_t owner_pid, uint64_t chunk_bytes, char *err, size_t errlen);

/* Rows of [row0, row0 + nrows) of tensor held in RAM, always a prefix of the window:
 * returns k in [0, nrows]; *src gets the address of row row0 in the cache when k > 0. */
uint64_t nsio_ram_prefix(const struct nsio_ram *rc, uint32_t tensor, uint64_t row0,
			 uint64_t nrows, uint64_t row_bytes, const uint8_t **src);

/* Unmap, and unlink the segment if this process created it. */
void nsio_ram_destroy(struct nsio_ram *rc);

#endif
