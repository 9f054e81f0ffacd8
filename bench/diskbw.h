/* diskbw.h - the drive's O_DIRECT read bandwidth on a given file, measured with io_uring.
 *
 * The limit a streaming engine is held against: reads of block_bytes at queue depth
 * queue_depth, at block-aligned offsets of the file itself (sequential or uniformly random),
 * with O_DIRECT so the page cache cannot flatter the figure. One warm-up pass is run and
 * dropped, then `repeats` timed passes, each over at least 1 GiB or the whole file when it is
 * smaller; the result is the median pass.
 *
 * Stateless: each call opens, measures and closes. Buffers are the callee's. */
#ifndef NS_DISKBW_H
#define NS_DISKBW_H

#include <stddef.h>
#include <stdint.h>

#define NS_DISKBW_MAX_REPEATS 64
#define NS_DISKBW_MIN_PASS_BYTES (1ull << 30)

enum ns_diskbw_pattern {
	NS_DISKBW_SEQ,  /* consecutive blocks from offset 0, wrapping at the end of the file */
	NS_DISKBW_RAND, /* uniformly random block-aligned offsets (fixed seed) */
};

struct ns_diskbw_opts {
	uint64_t block_bytes;  /* read size; a multiple of 4096, at most the file size */
	uint32_t queue_depth;  /* reads in flight, 1..4096 */
	uint32_t repeats;      /* timed passes after the warm-up, 1..NS_DISKBW_MAX_REPEATS */
	uint64_t pass_bytes;   /* 0: max(1 GiB, ...) capped at the file; else at least one block */
	enum ns_diskbw_pattern pattern;
	uint64_t seed;         /* RAND offsets */
};

struct ns_diskbw_result {
	double median_bps;     /* bytes per second of the median pass */
	double min_bps, max_bps;
	double pass_bps[NS_DISKBW_MAX_REPEATS]; /* every timed pass, in run order */
	uint32_t repeats;
	uint64_t pass_bytes;   /* bytes each pass read */
	uint64_t file_bytes;
};

/* Fill o with the defaults: 1 MiB blocks, queue depth 16, 3 repeats, sequential. */
void ns_diskbw_opts_default(struct ns_diskbw_opts *o);

/* Measure path. Returns 0, or -errno with one line in err (-EINVAL for bad options or a file
 * system without O_DIRECT support). */
int ns_diskbw_measure(const char *path, const struct ns_diskbw_opts *o,
		      struct ns_diskbw_result *r, char *err, size_t errlen);

#endif
