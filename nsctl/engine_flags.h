/* engine_flags.h - the pipeline's command-line flags, shared by nsctl run and nsctl serve
 * (budgets, backend, context, kernels, wrappers, nsio read-ahead), the number parsers their
 * values use, and the budget checks and defaults made before any process starts. Every
 * message starts with `who` ("nsctl run"). */
#ifndef NSCTL_ENGINE_FLAGS_H
#define NSCTL_ENGINE_FLAGS_H

#include <stdbool.h>
#include <stdint.h>

#include "neurostream.h"

struct nsctl_engine_args {
	struct ns_engine_opts eo;
	bool mem_given, ram_given; /* else nsctl plan's defaults fill them */
	uint32_t n_seq;            /* sequences whose KV caches the fixed set holds (serve's
				    * --parallel; 1 for run) */
};

void nsctl_engine_args_init(struct nsctl_engine_args *a);

/* The usage text of these flags (lines of "  --flag ...  what"). */
extern const char nsctl_engine_usage[];

/* One flag: returns 1 when flag is one of the pipeline's without a value, 2 when it is one
 * with a value (v, which may be NULL: then -EINVAL, "missing value"), 0 when it is none of
 * them, -EINVAL after one line on stderr for a bad value. */
int nsctl_engine_flag(struct nsctl_engine_args *a, const char *who, const char *flag,
		      const char *v);

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
