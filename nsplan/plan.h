/* plan.h - the residency plan: where every tensor, or row window of one, lives.
 *
 * Tiers, fastest first: VRAM-Q (raw quantized bytes on the GPU), VRAM-F (tensors that are
 * already float: F32/F16/BF16), RAM (quantized bytes in the shm RAM cache), disk (streamed
 * through the arena). The planner is a pure function of the model index, the budgets and,
 * optionally, per-(layer, expert) hotness statistics.
 *
 * Priority (DESIGN.md, Residency): every placeable piece gets a class and a ratio
 * "bytes a token requests per byte held":
 *   class 0  small every-token matrices: attention (attn_*, ssm_*), the router
 *            (ffn_gate_inp*)                                             ratio 1
 *   class 1  the output projection (output.weight; token_embd when tied) ratio 1
 *   class 2  the other dense tensors (dense FFN, shared experts, ...)   ratio 1
 *   class 3  expert slabs, one per (tensor, expert): ratio n_used/n_expert, or with
 *            statistics hits[layer][e] / tokens[layer] (a hot expert moves forward)
 *   class 4  an untied input embedding: a token needs one row, so it is read by row on
 *            demand and never in RAM by default (opts.embd_resident lets it in last,
 *            with ratio row_bytes / n_bytes); in VRAM it may always go, last (the
 *            CUDA pass reads a token's row on the device instead of asking nsio).
 *   class 5  held tensors (the architecture table's HELD role, modelfile/arch.h: norms,
 *            biases, sinks, expert bias tables, conv kernels): compute copies them once
 *            at start and keeps them, so caching them saves no per-token byte   ratio 0;
 *            and tensors no token of the architecture reads (UNUSED): never cached,
 *            never predicted
 * A tensor's role (held, matrix, expert stack, read by row, tied head) is the table's
 * (ns_arch_role); for an architecture the table does not know, its shape says.
 * Pieces are sorted by (class 0/1 first, then ratio descending, then class, bytes ascending
 * within class 0 (a tiny tensor on disk costs a whole aligned read), layer, expert, tensor
 * index) and filled greedily: VRAM (budget minus reserve) first, then RAM, each piece
 * taking the largest whole-row prefix that still fits, so later, smaller pieces fill what is
 * left. A token embedding (tied or not) is placed whole or not at all: the row a token looks
 * up is then resident or not whatever the token, which keeps the prediction exact. Because
 * the order is by ratio, more RAM never predicts more disk bytes per token.
 *
 * Shared-memory record format (version NSPLAN_VERSION): a plan is published as one
 * struct nsplan_header (128 bytes) followed by n_entries struct nsplan_entry (32 bytes each),
 * sorted by (tensor, row_begin). The windows of one tensor partition [0, n_rows) exactly:
 * every tensor appears, no row twice. Readers validate with nsplan_records_check() before use.
 *
 * Ownership: nsplan_compute()/nsplan_update() return a plan the caller frees with
 * nsplan_destroy(&p); the plan copies what it needs and keeps no pointer into the model. */
#ifndef NSPLAN_PLAN_H
#define NSPLAN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hparams.h"
#include "model.h"

#define NSPLAN_MAGIC 0x314e414c50534e00ull /* "\0NSPLAN1" little-endian */
#define NSPLAN_VERSION 1u
#define NSPLAN_NO_EXPERT UINT32_MAX

enum nsplan_tier {
	NSPLAN_DISK = 0,   /* streamed through the arena, per token */
	NSPLAN_RAM = 1,    /* quantized bytes in the shm RAM cache */
	NSPLAN_VRAM_Q = 2, /* quantized bytes on the GPU */
	NSPLAN_VRAM_F = 3, /* float tensors on the GPU */
	NSPLAN_TIER_COUNT = 4,
};

enum nsplan_kind {
	NSPLAN_KIND_NORM = 0,   /* *norm* vectors */
	NSPLAN_KIND_VECTOR,     /* other 1-D tensors: biases, rope_freqs, sinks, scales */
	NSPLAN_KIND_ATTN,       /* attn_* matrices */
	NSPLAN_KIND_SSM,        /* ssm_* (linear attention / state space mixers) */
	NSPLAN_KIND_ROUTER,     /* ffn_gate_inp* */
	NSPLAN_KIND_OUTPUT,     /* output.weight, or a tied token_embd.weight */
	NSPLAN_KIND_FFN,        /* dense ffn_* (shared experts included) */
	NSPLAN_KIND_EXPERT,     /* routed expert slabs (*_exps*) */
	NSPLAN_KIND_EMBD,       /* untied token_embd.weight: by row on demand */
	NSPLAN_KIND_OTHER,
	NSPLAN_KIND_COUNT,
};

/* One placed row window. 32 bytes, naturally aligned, no implicit padding. */
struct nsplan_entry {
	uint32_t tensor;     /* index into ns_model.tensors */
	uint8_t tier;        /* enum nsplan_tier */
	uint8_t kind;        /* enum nsplan_kind */
	uint16_t reserved;   /* 0 */
	uint64_t row_begin;  /* first row (rows counted over all leading dims, see model.h) */
	uint64_t row_end;    /* one past the last row */
	uint32_t generation; /* plan generation that wrote this entry */
	uint32_t expert;     /* expert index of an expert slab window, else NSPLAN_NO_EXPERT */
};
_Static_assert(sizeof(struct nsplan_entry) == 32, "plan entry is 32 bytes");

/* Header of a published plan. 128 bytes. All byte counts are exact integers. */
struct nsplan_header {
	uint64_t magic;          /* NSPLAN_MAGIC */
	uint32_t version;        /* NSPLAN_VERSION */
	uint32_t entry_bytes;    /* sizeof(struct nsplan_entry) */
	uint64_t n_entries;
	uint64_t n_tensors;      /* model tensors: every entry's tensor is below this */
	uint32_t generation;     /* bumped by every plan_update */
	uint32_t n_expert;       /* hparams, for the expected-value figures */
	uint32_t n_expert_used;
	uint32_t reserved0;
	uint64_t vram_budget;    /* --vram-budget (0: no GPU tier) */
	uint64_t reserve_vram;   /* part of vram_budget kept for KV and scratch */
	uint64_t ram_budget;     /* --ram-budget */
	uint64_t mem_budget;     /* --mem-budget (the arena) */
	uint64_t vram_used;      /* weight bytes placed in VRAM-Q + VRAM-F */
	uint64_t ram_used;       /* weight bytes placed in RAM */
	uint64_t disk_dense;     /* exact non-expert bytes a decoded token requests */
	uint64_t disk_expert_bytes; /* non-resident expert slab bytes (all experts) */
	uint8_t pad[128 - 8 - 4 - 4 - 8 - 8 - 4 * 4 - 8 * 8];
};
_Static_assert(sizeof(struct nsplan_header) == 128, "plan header is 128 bytes");

struct nsplan_budgets {
	uint64_t vram;         /* --vram-budget: GPU bytes for weights + reserve; 0: no GPU tier */
	uint64_t reserve_vram; /* --reserve-vram: the part of vram not given to weights */
	uint64_t ram;          /* --ram-budget: RAM cache for quantized weights */
	uint64_t mem;          /* --mem-budget: the streaming arena (not used for placement) */
};

/* Expert statistics: hits[l * n_expert + e] = tokens that selected expert e in layer l,
 * tokens[l] = tokens routed through layer l. Layers with tokens[l] == 0 use the uniform
 * prior n_used / n_expert. Read only during the call. */
struct nsplan_hotness {
	uint32_t n_layer;
	uint32_t n_expert;
	const uint64_t *hits;   /* [n_layer][n_expert] */
	const uint64_t *tokens; /* [n_layer] */
};

struct nsplan_opts {
	struct nsplan_budgets budgets;
	bool embd_resident; /* allow an untied input embedding into the caches (last) */
	const struct nsplan_hotness *hot; /* NULL: uniform prior */
};

/* Bytes-per-token prediction: exactly the weight bytes the forward pass requests from nsio
 * (nsio's bytes_requested) for one decoded token, split by where they come from:
 *   per token   every non-resident matrix row of a dense tensor, one row of an untied input
 *               embedding when it is on disk, a tied token_embd on disk whole (the logits)
 *               plus one row (the next token's embedding lookup), and of each expert slab
 *               its non-resident bytes when the router selects it;
 *   once        held tensors (role HELD) on disk: read when compute starts, kept,
 *               never requested again (held_disk);
 * "touched" is what compute reads per token wherever it lives (every dense tensor whole,
 * held ones included, one embedding row, experts by probability): the figure nsctl info
 * prints as weight bytes per token.
 * predicted disk bytes per token = disk_dense + disk_expert. */
struct nsplan_predict {
	uint64_t touched_dense;          /* exact, held non-expert tensors included */
	uint64_t resident_dense;         /* exact, resident part of touched_dense */
	uint64_t disk_dense;             /* exact non-expert bytes requested per token: the
					  * non-resident part of touched_dense less held tensors,
					  * plus tied_row */
	uint64_t tied_row;               /* a tied token_embd on disk: its lookup row, else 0 */
	uint64_t held_bytes;             /* held tensors (read once at start) */
	uint64_t held_disk;              /* the part of held_bytes read from disk at start */
	uint64_t expert_bytes;           /* routed expert slab bytes (bias tables are held) */
	uint64_t disk_expert_bytes;      /* non-resident expert slab bytes */
	double touched_expert;           /* expected, expert bias tables included */
	double disk_expert;              /* expected */
	double touched;                  /* touched_dense + touched_expert */
	double bytes_per_token;          /* disk_dense + disk_expert: the prediction */
	bool uniform;                    /* no statistics: the expert figures are exact rationals */
};

struct nsplan_tally {
	uint32_t n_tensors;                  /* tensors with at least one window of this group */
	uint64_t bytes;                      /* all bytes of the group */
	uint64_t tier_bytes[NSPLAN_TIER_COUNT];
};

struct nsplan {
	struct nsplan_header hdr;       /* what a published copy starts with */
	struct nsplan_entry *entries;   /* hdr.n_entries, owned */
	struct nsplan_opts opts;        /* as given; opts.hot is cleared (not kept) */
	struct nsplan_predict predict;
	struct nsplan_tally by_kind[NSPLAN_KIND_COUNT];
	struct nsplan_tally *by_layer;  /* [n_layers + 1]: the last one is "not in a layer" */
	uint32_t n_layers;
};

/* Plan the model under o's budgets. VRAM for weights is budgets.vram - reserve_vram (a reserve
 * above the budget is refused with -EINVAL). Returns 0, -ENOMEM, or -EINVAL / -EOVERFLOW with
 * a line in err. */
int nsplan_compute(const struct ns_model *m, const struct ns_hparams *hp,
		   const struct nsplan_opts *o, uint32_t generation, struct nsplan **out,
		   char *err, size_t errlen);

void nsplan_destroy(struct nsplan **p);

/* Most entries any plan of this model can have (sizes a shared-memory slot). */
uint64_t nsplan_entry_bound(const struct ns_model *m, const struct ns_hparams *hp);

/* Exact disk bytes of one decoded token whose router chose experts[l * n_used + k] (k < n_used)
 * in layer l < n_layer: pl's exact dense part plus the non-resident slab bytes of exactly those
 * experts. This is the figure nsio's bytes_requested must match for that token. Returns 0, or
 * -EINVAL for an expert index out of range. */
int nsplan_token_bytes(const struct nsplan *pl, const struct ns_model *m, const uint32_t *experts,
		       uint32_t n_layer, uint32_t n_used, uint64_t *out);

/* One range of rows whose tier changes between two plan generations. */
struct nsplan_move {
	uint32_t tensor;
	uint32_t expert;  /* NSPLAN_NO_EXPERT unless inside an expert slab */
	uint64_t row_begin, row_end;
	uint64_t bytes;
	uint8_t from, to; /* enum nsplan_tier */
};

struct nsplan_diff {
	uint32_t from_generation, to_generation;
	uint64_t n_moves;
	struct nsplan_move *moves;  /* owned, sorted by (tensor, row_begin) */
	uint64_t bytes_promoted;    /* bytes that become resident (or move to a faster tier) */
	uint64_t bytes_demoted;     /* bytes that leave a faster tier */
};

/* Re-plan with new statistics under the same budgets, without touching old (which stays valid
 * and in use until the caller swaps): *out gets generation old->hdr.generation + 1, *diff the
 * moves from old to new (the caller loads promoted ranges before publishing, evicts demoted
 * ones after). Either output may be freed independently. */
int nsplan_update(const struct nsplan *old, const struct ns_model *m,
		  const struct ns_hparams *hp, const struct nsplan_hotness *stats,
		  struct nsplan **out, struct nsplan_diff **diff, char *err, size_t errlen);

/* Moves between any two plans of the same model m (-EINVAL if they are of another). */
int nsplan_diff_compute(const struct ns_model *m, const struct nsplan *a, const struct nsplan *b,
			struct nsplan_diff **out);
void nsplan_diff_destroy(struct nsplan_diff **d);

/* Serialise header + entries into buf (nsplan_records_bytes() long). */
size_t nsplan_records_bytes(const struct nsplan *p);
void nsplan_records_write(const struct nsplan *p, void *buf);

/* Validate a published plan of len bytes for a model of n_tensors tensors whose row counts are
 * n_rows(i) (n_rows may be NULL to skip the coverage check): magic, version, entry size,
 * length, tiers, tensor indices, sorted non-overlapping windows that cover every tensor.
 * Returns 0 or -EPROTO with the first problem in err. */
int nsplan_records_check(const void *buf, size_t len, uint64_t n_tensors,
			 uint64_t (*n_rows)(void *ctx, uint64_t tensor), void *ctx,
			 char *err, size_t errlen);

const char *nsplan_tier_name(unsigned tier);  /* "VRAM-Q", "VRAM-F", "RAM", "disk" */
const char *nsplan_kind_name(unsigned kind);  /* "norm", "attn", ... */

/* Classification used by the planner (exposed for nsctl and tests): from the tensor's role
 * (ns_arch_role: held -> norm or vector, expert stack -> expert, read by row -> embd, tied
 * head -> output), then by name for the matrices (attn, ssm, router, ffn, output). */
enum nsplan_kind nsplan_tensor_kind(const struct ns_model_tensor *t, const struct ns_hparams *hp);

#endif
