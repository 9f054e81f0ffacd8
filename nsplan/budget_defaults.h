/* budget_defaults.h - how much memory a run may take when the user names no budget.
 *
 * Available memory = the smaller of MemAvailable (/proc/meminfo) and the cgroup memory limit:
 *   v2: /proc/self/cgroup has "0::<path>"; the limit is the smallest memory.max or memory.high
 *       ("max" = none) of <root>/<path> and every cgroup above it
 *   v1: a line "<n>:...memory...:<path>"; the limit is <root>/memory/<path>/memory.limit_in_bytes
 *       (values of 2^62 and above are v1's "no limit")
 * When <root>/<path>/... is absent (a container sees its own cgroup as its root), the file at
 * the root itself is read. Every path is injectable for tests.
 *
 * The split of the available memory A (NSPLAN_DEFAULT_SPLIT):
 *   headroom  H = max(A / 16, 64 MiB), never more than A: page cache, the kernel, other programs
 *   fixed     F = KV cache + recurrent state + scratch + process overhead (fixed_mem.h)
 *   usable    U = A - H - F
 *   arena (--mem-budget)  M = min(want, max(min_arena, U / 4)), where
 *             want = (lookahead + 1) * ns_stream_slot_bytes(max(block_bytes, max_row_bytes)):
 *             lookahead + 1 blocks of the default block size, never less than the minimum;
 *             for an MoE model at least twice the routed-expert bytes one token reads in one
 *             layer, so nsrouter's layer-wide prefetch fits beside the blocks in use (on a
 *             GPT-OSS-shaped model: 0.64 -> 0.89 of the drive roofline, bench/README.md)
 *   RAM cache (--ram-budget) R = min(U - M, cacheable bytes of the model)
 *   VRAM: 0 (nsplan does not probe GPUs; name --vram-budget to use one)
 * A user-given budget is kept and the others are derived from what it leaves.
 * If U < min_arena the run cannot work: refused with the smallest workable figures. */
#ifndef NSPLAN_BUDGET_DEFAULTS_H
#define NSPLAN_BUDGET_DEFAULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan.h"

#define NSPLAN_DEFAULT_BLOCK_BYTES (1ull << 20) /* nsio's default largest read */
#define NSPLAN_MIN_HEADROOM (64ull << 20)
#define NSPLAN_NO_LIMIT UINT64_MAX

struct nsplan_mem_paths {
	const char *meminfo;      /* NULL: /proc/meminfo */
	const char *self_cgroup;  /* NULL: /proc/self/cgroup */
	const char *cgroup_root;  /* NULL: /sys/fs/cgroup */
};

struct nsplan_mem_probe {
	uint64_t mem_available;   /* MemAvailable, NSPLAN_NO_LIMIT if unreadable */
	int cgroup_version;       /* 0: none found, 1 or 2 */
	uint64_t cgroup_limit;    /* NSPLAN_NO_LIMIT: "max" or none */
	char cgroup_file[640];    /* the limit file read, "" if none */
	uint64_t available;       /* min(mem_available, cgroup_limit) */
};

/* Returns 0, or -ENOENT with a line in err when neither figure could be read. */
int nsplan_mem_probe(const struct nsplan_mem_paths *paths, struct nsplan_mem_probe *out,
		     char *err, size_t errlen);

struct nsplan_default_in {
	uint64_t available;       /* from the probe */
	uint64_t fixed;           /* nsplan_fixed.total */
	uint64_t min_arena;       /* ns_stream_min_budget(max_row_bytes, lookahead) */
	uint64_t max_row_bytes;
	uint64_t cacheable;       /* bytes the RAM cache could hold usefully */
	uint32_t lookahead;       /* NS_DEFAULT_LOOKAHEAD */
	uint64_t block_bytes;     /* NSPLAN_DEFAULT_BLOCK_BYTES */
	uint64_t layer_expert_bytes; /* routed-expert bytes a token reads in one layer
				      * (expert bytes / n_layer * n_used / n_expert); 0: dense */
	bool ram_given, mem_given; /* keep b->ram / b->mem as they are */
};

struct nsplan_default_out {
	uint64_t headroom;
	uint64_t usable;          /* A - H - F */
	uint64_t arena_want;
};

/* Fill the budgets not given. Returns 0, or -ENOSPC with one line naming the smallest
 * workable figures when the memory cannot hold the fixed set and the minimum arena. */
int nsplan_default_budgets(const struct nsplan_default_in *in, struct nsplan_budgets *b,
			   struct nsplan_default_out *out, char *err, size_t errlen);

#endif
