/* engine_flags.h - the pipeline's command-line flags, shared by nsctl run and nsctl serve
 * (budgets, backend, context, kernels, wrappers, nsio read-ahead), the number parsers their
 * values use, and the budget checks and defaults made before any process starts. Every
 * message starts with `who` ("nsctl run"). */
#ifndef NSCTL_ENGINE_FLAGS_H
#define NSCTL_ENGINE_FLAGS_H

#include <stdbool.h>
#include <stdint.h>

#include "neurostream.h"
#include "ns_opt.h"

#define NSCTL_NGL_UNSET (-1)
#define NSCTL_NGL_ALL ((int64_t)1 << 31) /* -ngl -1 / all: every layer */

struct nsctl_engine_args {
	struct ns_engine_opts eo;
	bool mem_given, ram_given; /* else nsctl plan's defaults fill them */
	bool backend_given;
	bool no_warmup;            /* llama.cpp's --no-warmup: accepted, we never warm up so */
	uint32_t batch;            /* llama.cpp's -b: checked, no effect (0: not given) */
	int64_t ngl;               /* llama.cpp's -ngl: layers' worth of VRAM, NSCTL_NGL_UNSET
				    * or NSCTL_NGL_ALL; nsctl_engine_budgets applies it */
	uint32_t n_seq;            /* sequences whose KV caches the fixed set holds (serve's
				    * --parallel; 1 for run) */
};

/* The pipeline's options as an ns_opt table (ids NSE_O_*), appended to run's and serve's own
 * tables for ns_opt_parse: their callback hands these ids to nsctl_engine_opt. */
enum {
	NSE_O_MEM = 1000, NSE_O_RAM, NSE_O_VRAM, NSE_O_RESERVE, NSE_O_NGL, NSE_O_BLOCK_ROWS,
	NSE_O_LOOKAHEAD, NSE_O_BACKEND, NSE_O_CTX, NSE_O_BATCH, NSE_O_ACT, NSE_O_CTK, NSE_O_CTV,
	NSE_O_THREADS, NSE_O_STALL, NSE_O_WRAP, NSE_O_STATS, NSE_O_REASONING, NSE_O_RUN_AHEAD, NSE_O_MOE_PREDICT,
	NSE_O_NO_RUN_AHEAD, NSE_O_NO_PLAN, NSE_O_NO_WARMUP, NSE_O_VERBOSE, NSE_O_CHAT_TEMPLATE,
};
#define NSCTL_ENGINE_N_OPTS 25
extern const struct ns_opt nsctl_engine_opts[NSCTL_ENGINE_N_OPTS];

/* One option of that table: its value v (NULL for a switch) as the user spelled it (f, for
 * messages). 0, or -EINVAL after one line on stderr. */
int nsctl_engine_opt(struct nsctl_engine_args *a, const char *who, const struct ns_opt *o,
		     const char *f, const char *v);

void nsctl_engine_args_init(struct nsctl_engine_args *a);

/* The usage text of these flags (lines of "  --flag ...  what"). */
extern const char nsctl_engine_usage[];

/* The checks after every flag is read (--reserve-vram needs --vram-budget). Returns 0 or
 * -EINVAL after one line. */
int nsctl_engine_args_check(struct nsctl_engine_args *a, const char *who);

/* Before the pipeline starts: a --vram-budget checked against the cuda pass's needs; named
 * budgets checked against the memory available; budgets not named chosen as nsctl plan
 * chooses them (printed on stderr). Returns 0 or an exit code (1, 2) after one line. */
int nsctl_engine_budgets(struct nsctl_engine_args *a, const char *who, const char *model);

/* Values: a number in lo..hi (strtod, whole string), a count in lo..hi (decimal digits, as
 * ns_parse_count), a size with binary units (ns_parse_bytes). 0, or -EINVAL after one line
 * "WHO: FLAG: bad value 'V' (...)". */
int nsctl_arg_num(const char *who, const char *flag, const char *v, double lo, double hi,
		  double *out);
int nsctl_arg_count(const char *who, const char *flag, const char *v, uint64_t lo, uint64_t hi,
		    uint64_t *out);
int nsctl_arg_size(const char *who, const char *flag, const char *v, uint64_t *out);

#endif
