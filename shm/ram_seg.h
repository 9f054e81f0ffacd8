/* ram_seg.h - the RAM tier's segment "/ns-<user>-<session>-<key>-ram" (kind NS_SEG_RAM).
 *
 * nsio is its only writer (nsio/ramcache.h: what goes in and when); nscompute multiplies the
 * fixed row prefixes in place and nsctl waits for a plan generation to be loaded. Layout:
 *
 *   struct ns_seg_header    (shm/seg.h)
 *   struct ns_ram_dir       at NS_RAM_DIR_OFF: geometry, ready flag, generation, figures
 *   uint64_t rows[n_tensors]  fixed resident row prefix [0, rows[t]) of each tensor
 *   uint64_t off[n_tensors]   its offset in data
 *   data                    at dir.data_off (multiple of 64), data_bytes long
 *
 * rows[] / off[] are valid once dir.ready is 1 (stored with release after them) and never
 * change afterwards; expert windows are never in them (only nsio reads those). A reader takes
 * the geometry and the tables once, checks them against its own model, and keeps private
 * copies (struct ns_ram_view): nothing but the data bytes and the counters is read from the
 * shared mapping after the open. */
#ifndef NS_SHM_RAM_SEG_H
#define NS_SHM_RAM_SEG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seg.h"

#define NS_RAM_SEG_WHAT "ram"
#define NS_RAM_MAGIC 0x344d4152534e00ull /* "\0NSRAM4" (4: planned_bytes) */
#define NS_RAM_DIR_OFF ((uint64_t)sizeof(struct ns_seg_header))

struct ns_ram_dir {
	uint64_t magic;
	_Atomic uint32_t ready;   /* the fixed windows are loaded: rows[] / off[] are valid */
	uint32_t reserved;
	uint64_t n_tensors;
	uint64_t data_off;        /* from the segment base, multiple of 64 */
	uint64_t data_bytes;
	/* figures (nsio writes; tests and tools read). Monotonic unless said otherwise. */
	_Atomic uint64_t plan_gen;       /* plan generation whose windows are all loaded */
	_Atomic uint64_t generations;    /* plan generations applied */
	_Atomic uint64_t resident_bytes; /* gauge: bytes of complete windows */
	_Atomic uint64_t fill_bytes;     /* window bytes read from the model through the arena */
	_Atomic uint64_t fill_device;    /* bytes those reads took from the device (aligned) */
	_Atomic uint64_t fill_reads;     /* read operations of the fill */
	_Atomic uint64_t fill_lease_max; /* largest arena lease one fill chunk held */
	_Atomic uint64_t kept_bytes;     /* expert bytes a new generation kept (moved, not read) */
	_Atomic uint64_t dropped_bytes;  /* expert bytes a new generation dropped */
	_Atomic uint64_t planned_bytes;  /* gauge: bytes of every window of the applied
					  * generation, loaded or not (resident_bytes of it
					  * are loaded): a fill's progress */
};

/* The writer's view of a segment it created. */
struct ns_ram_seg {
	struct ns_seg seg;
	struct ns_ram_dir *dir;
	uint64_t *rows, *off;     /* the shared tables, [n_tensors] each */
	uint8_t *data;
};

/* Create the segment of session for n_tensors tensors and data_bytes of data (O_EXCL, 0600;
 * owner: the session's), with the tables rows/off copied in (not yet ready). Returns 0 or
 * -errno with a line in err. */
int ns_ram_seg_create(struct ns_ram_seg *r, const char *session, uint64_t n_tensors,
		      const uint64_t *rows, const uint64_t *off, uint64_t data_bytes, char *err,
		      size_t errlen);

/* The fixed windows are loaded: readers may take the tables (release). */
void ns_ram_seg_ready(struct ns_ram_seg *r);

/* A reader's checked, private view. */
struct ns_ram_view {
	struct ns_seg seg;
	const struct ns_ram_dir *dir; /* for the figures and plan_gen only */
	uint64_t n_tensors, data_bytes;
	uint64_t *rows, *off;     /* private copies, checked against the reader's model */
	const uint8_t *data;      /* the resident bytes (shared, read-only) */
};

/* Rows and row bytes of tensor t of the reader's model; false for t out of range. */
typedef bool (*ns_ram_tensor_fn)(void *ctx, uint64_t t, uint64_t *n_rows, uint64_t *row_bytes);

/* Map the session's RAM segment read-only and take its tables: -ENOENT when there is none,
 * -EAGAIN while its fixed windows are loading (call again later), -EPROTO (one line in err)
 * when its geometry or a window does not fit the segment or the reader's model of n_tensors
 * tensors (tensor_fn), -ENOMEM, or ns_seg_open's errors (-EPERM: not ours). */
int ns_ram_view_open(struct ns_ram_view *v, const char *session, uint64_t n_tensors,
		     ns_ram_tensor_fn tensor_fn, void *ctx, char *err, size_t errlen);
void ns_ram_view_close(struct ns_ram_view *v);

/* The fill's progress: *loaded of *planned window bytes of the applied generation. While the
 * first generation loads, the bytes read so far (fill_bytes: a window part-read counts);
 * later, the complete windows (resident_bytes). 0, -ENOENT when there is no segment yet,
 * -EPROTO (line in err) for one that is not a RAM segment, or ns_seg_open's errors. */
int ns_ram_seg_fill(const char *session, uint64_t *loaded, uint64_t *planned, char *err,
		    size_t errlen);

/* The plan generation whose windows nsio has loaded into the session's RAM segment: 0 with
 * *gen, -ENOENT when there is no segment, -EPROTO (line in err) for one that is not a RAM
 * segment, or ns_seg_open's errors. */
int ns_ram_seg_loaded(const char *session, uint64_t *gen, char *err, size_t errlen);

#endif
