/* bench.h - the parts of `nsctl bench` (cmd_bench.c: the runs and the table):
 *   bench_args.c      the command line and the configurations it sweeps
 *   bench_workload.c  the pp prompt and the teacher-forced tg tokens
 *   bench_disk.c      the drive's O_DIRECT rate: the roofline, MoE's random-read limit
 *   bench_draft.c     --draft: the speculative tg rows (greedy, checked against each other) */
#ifndef NSCTL_BENCH_H
#define NSCTL_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "neurostream.h"
#include "table.h"

#define BENCH_MAX_LIST 16
#define BENCH_MAX_CONFIGS 64
/* nsio's defaults (nsio/nsio.h): the largest single read and the reads kept in flight */
#define BENCH_NSIO_READ_BYTES (1ull << 20)
#define BENCH_NSIO_QUEUE_DEPTH 16u
#define BENCH_MAX_DISK_PASSES 512
#define BENCH_MAX_DRAFTS 8

/* One drafter of --draft: the tg rows it gets are greedy generations with it. */
struct bench_draft {
	enum ns_gen_draft kind; /* NS_GEN_DRAFT_NONE: the one-token decode they are compared to */
	double alpha;           /* NS_GEN_DRAFT_ORACLE: the rate its drafts agree with the target */
	char name[64];          /* the row's label: "none", "ngram", "oracle:0.80", the file */
};

/* Every timed pass of the drive over the run: before, between configurations, after. */
struct bench_disk {
	double bps[BENCH_MAX_DISK_PASSES];
	size_t n;
	bool failed;
};

struct bench_list {
	uint64_t v[BENCH_MAX_LIST];
	size_t n;
};

struct bench_opts {
	const char *model;
	uint32_t n_prompt, n_gen, repeats, disk_repeats;
	enum ns_table_fmt fmt;
	struct bench_list budgets, ram, vram, rows, lookahead;
	int threads;
	uint32_t n_ctx;
	bool no_disk, no_plan;
	const char *backend; /* "cpu" (default) or "cuda" */
	bool act_q8;         /* --act q8 */
	int run_ahead;       /* -1 engine default (dense: on), 0 --no-run-ahead, 1 --run-ahead */
	bool moe_predict;     /* --moe-predict on */
	struct bench_list depths; /* -d: context filled before each tg test (0 = empty) */
	const char *ctk, *ctv;    /* -ctk / -ctv: KV cache types, NULL = f32 */
	bool quiet;               /* -q: no progress line on a terminal */
	/* --draft LIST: speculative tg rows, one per drafter ("none" first when listed); 0: the
	 * teacher-forced tg test */
	struct bench_draft drafts[BENCH_MAX_DRAFTS];
	size_t n_drafts;
	const char *draft_model;  /* the list's DRAFT.gguf (one at most), loaded by every engine */
	uint32_t draft_max, draft_min; /* 0: the engine's defaults */
};

struct bench_config {
	bool cuda;
	uint64_t mem, ram, vram, rows;
	int32_t lookahead; /* < 0: the engine's default */
};

/* A run's generated ids, to compare configurations. */
struct bench_ids {
	int32_t *ids;
	uint32_t n, cap;
	uint32_t n_want;   /* progress: "token k/n_want" on stderr while decoding */
	uint64_t t0;
};

/* Options from argv: 0, or -1 after one line on stderr (--help prints and exits 0). */
int bench_parse(struct bench_opts *o, int argc, char **argv);
/* The configurations the sweeps make, into c[BENCH_MAX_CONFIGS]; -1 (one line) when more. */
int bench_configs(const struct bench_opts *o, struct bench_config *c, size_t *n);
/* "mem 64.00 MiB, ram 0, vram 0, block rows 0, lookahead default" */
void bench_config_text(const struct bench_config *c, char *buf, size_t len);

/* The pp prompt of at most n tokens (malloc'd into *out, its token count *n_tok), or -errno. */
int bench_prompt(struct ns_engine *e, uint32_t n, char **out, uint32_t *n_tok);
/* The teacher-forced ids: n of them into out->ids (malloc'd), or -errno. */
int bench_forced(struct ns_engine *e, uint32_t n, struct bench_ids *out);
/* ns_engine's token callback: appends id to the bench_ids at user, shows progress. */
int bench_collect(const char *piece, size_t len, int32_t id, void *user);

/* The tg rows of one configuration and depth with drafters (cmd_bench.c's s_run_one): greedy
 * generations of o->n_gen tokens after prompt (n_prompt ids), one per drafter into rows[k]
 * (o->n_drafts of them). ref: the one-token decode's tokens, filled by the first call (from
 * the "none" row, else an untimed generation), which every later run must repeat exactly.
 * 0, or negative errno after one line (-EPROTO: a drafted run gave other tokens). */
int bench_draft_runs(struct ns_engine *e, const struct bench_opts *o, const int32_t *prompt,
		     uint32_t n_prompt, struct bench_ids *ref, struct ns_bench_row *rows);

/* passes timed passes of the drive (the model's largest shard) into disk; quiet: no lines. */
void bench_measure_disk(const struct bench_opts *o, const struct ns_model *m, uint32_t passes,
			bool quiet, struct bench_disk *disk);
/* MoE models: the drive's random-read rate and each tg row's ratio to the roofline it gives. */
void bench_moe_random_limit(const struct bench_opts *o, const struct ns_model *m,
			    const struct ns_bench_row *tg, size_t nc);

#endif
