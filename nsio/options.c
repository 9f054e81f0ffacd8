/* options.c - nsio's command line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsio.h"
#include "ns_opt.h"
#include "ns_util.h"

static void s_usage(FILE *f)
{
	fprintf(f,
		"usage: nsio --model PATH [--session ID] [--mem-budget BYTES] [options]\n"
		"  -m, --model PATH    GGUF model (any shard of a split model)\n"
		"  --mmproj PATH       also serve a vision tower's tensors (an mmproj GGUF), after\n"
		"                      the model's in the tensor table, streamed like them\n"
		"  --session ID        attach to session ID (created if absent); default: new\n"
		"  --mem-budget BYTES  streaming arena size, binary units (64MB = 64 MiB)\n"
		"  --queue-depth N     reads in flight (16)\n"
		"  --block-bytes BYTES largest single read (1MB)\n"
		"  --block-rows N      rows per run-ahead block, as the consumer streams them (0: as\n"
		"                      large as the arena allows, like ns_stream_linear)\n"
		"  --lookahead N       blocks a consumer keeps in flight after the current one (2)\n"
		"  --run-ahead         read ahead along the per-token tensor order\n"
		"  --no-direct         buffered reads instead of O_DIRECT\n"
		"  --restart-quarantine-ms N  after taking over from a killed nsio, keep its\n"
		"                      in-flight ranges unused this long (1000)\n"
		"  --ram-budget BYTES  load the published plan's RAM windows and serve them from RAM\n"
		"                      (must equal the plan's --ram-budget; 0: stream everything)\n"
		"  --plan-wait-ms N    wait this long for the plan, then stream everything (30000)\n"
		"  --quiet             no informational lines\n");
}

static int s_u64(const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	if (ns_parse_count(v, lo, hi, out) < 0) {
		fprintf(stderr, "nsio: %s '%s' is not an integer in %llu..%llu\n", opt, v,
			(unsigned long long)lo, (unsigned long long)hi);
		return -EINVAL;
	}
	return 0;
}

static int s_bytes(const char *opt, const char *v, uint64_t *out)
{
	if (ns_parse_bytes(v, out) != 0 || *out == 0) {
		fprintf(stderr, "nsio: %s '%s' is not a byte count (e.g. 64MB)\n", opt, v);
		return -EINVAL;
	}
	return 0;
}

enum {
	O_MODEL = 1, O_SESSION, O_BUDGET, O_QD, O_BB, O_BR, O_LA, O_NODIRECT, O_AHEAD, O_QUIET,
	O_HELP, O_QUAR, O_RAM, O_PLANWAIT, O_MMPROJ,
};

/* The spellings nsctl passes (engine_args.c, nsio/spawn.c), llama.cpp's -m besides. */
static const struct ns_opt s_opts[] = {
	{ "model", "-m", NS_OPT_VALUE, O_MODEL },
	{ "mmproj", NULL, NS_OPT_VALUE, O_MMPROJ },
	{ "session", NULL, NS_OPT_VALUE, O_SESSION },
	{ "mem-budget", NULL, NS_OPT_VALUE, O_BUDGET },
	{ "queue-depth", NULL, NS_OPT_VALUE, O_QD },
	{ "block-bytes", NULL, NS_OPT_VALUE, O_BB },
	{ "block-rows", NULL, NS_OPT_VALUE, O_BR },
	{ "lookahead", NULL, NS_OPT_VALUE, O_LA },
	{ "no-direct", NULL, NS_OPT_SWITCH, O_NODIRECT },
	{ "run-ahead", NULL, NS_OPT_SWITCH, O_AHEAD },
	{ "quiet", NULL, NS_OPT_SWITCH, O_QUIET },
	{ "restart-quarantine-ms", NULL, NS_OPT_VALUE, O_QUAR },
	{ "ram-budget", NULL, NS_OPT_VALUE, O_RAM },
	{ "plan-wait-ms", NULL, NS_OPT_VALUE, O_PLANWAIT },
	{ "help", "-h", NS_OPT_SWITCH, O_HELP },
};

struct s_parse {
	struct nsio_opts *o;
	bool help;
};

/* One option (opt NULL: an argument, refused) spelled f: 0, -ECANCELED for --help, or
 * -EINVAL after one line. */
static int s_on_opt(void *user, const struct ns_opt *opt, const char *f, const char *v)
{
	struct s_parse *ps = user;
	struct nsio_opts *o = ps->o;
	uint64_t x;

	if (!opt) {
		fprintf(stderr, "nsio: unexpected argument '%s'\n", v);
		return -EINVAL;
	}
	switch (opt->id) {
	case O_MODEL:
		o->model_path = v;
		return 0;
	case O_MMPROJ:
		o->mmproj_path = v;
		return 0;
	case O_SESSION:
		o->session = v;
		return 0;
	case O_BUDGET:
		return s_bytes(f, v, &o->mem_budget);
	case O_QD:
		if (s_u64(f, v, 1, 4096, &x))
			return -EINVAL;
		o->queue_depth = (uint32_t)x;
		return 0;
	case O_BB:
		if (s_bytes(f, v, &o->block_bytes))
			return -EINVAL;
		if (o->block_bytes % 4096 || o->block_bytes > (1ull << 30)) {
			fprintf(stderr, "nsio: %s must be a multiple of 4 KiB, at most 1 GiB\n", f);
			return -EINVAL;
		}
		return 0;
	case O_BR:
		return s_u64(f, v, 0, UINT32_MAX, &o->block_rows);
	case O_LA:
		if (s_u64(f, v, 0, 1024, &x))
			return -EINVAL;
		o->lookahead = (uint32_t)x;
		return 0;
	case O_NODIRECT:
		o->no_direct = true;
		return 0;
	case O_AHEAD:
		o->run_ahead = true;
		return 0;
	case O_QUIET:
		o->quiet = true;
		return 0;
	case O_QUAR:
		return s_u64(f, v, 0, 600000, &o->quarantine_ms);
	case O_RAM:
		if (ns_parse_bytes(v, &o->ram_budget) != 0) {
			fprintf(stderr, "nsio: %s '%s' is not a byte count (e.g. 64MB)\n", f, v);
			return -EINVAL;
		}
		return 0;
	case O_PLANWAIT:
		return s_u64(f, v, 0, 600000, &o->plan_wait_ms);
	case O_HELP:
		s_usage(stdout);
		ps->help = true;
		return -ECANCELED;
	}
	return -EINVAL;
}

int nsio_parse_options(int argc, char **argv, struct nsio_opts *o)
{
	struct s_parse ps = { .o = o };

	memset(o, 0, sizeof(*o));
	o->queue_depth = 16;
	o->block_bytes = 1ull << 20;
	o->lookahead = 2;
	o->quarantine_ms = 1000;
	o->plan_wait_ms = 30000;
	if (ns_opt_parse("nsio", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt, &ps))
		return ps.help ? -1 : 2;
	if (!o->model_path) {
		fprintf(stderr, "nsio: --model PATH is required (try --help)\n");
		return 2;
	}
	if (o->session && ns_session_arg_check("nsio", o->session) < 0)
		return 2;
	return 0;
}
