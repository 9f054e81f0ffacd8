/* options.c - nsio's command line. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsio.h"
#include "ns_util.h"

static void s_usage(FILE *f)
{
	fprintf(f,
		"usage: nsio --model PATH [--session ID] [--mem-budget BYTES] [options]\n"
		"  --model PATH        GGUF model (any shard of a split model)\n"
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

int nsio_parse_options(int argc, char **argv, struct nsio_opts *o)
{
	enum { O_MODEL = 256, O_SESSION, O_BUDGET, O_QD, O_BB, O_BR, O_LA, O_NODIRECT, O_AHEAD,
	       O_QUIET, O_HELP, O_QUAR, O_RAM, O_PLANWAIT };
	static const struct option opts[] = {
		{ "model", required_argument, NULL, O_MODEL },
		{ "session", required_argument, NULL, O_SESSION },
		{ "mem-budget", required_argument, NULL, O_BUDGET },
		{ "queue-depth", required_argument, NULL, O_QD },
		{ "block-bytes", required_argument, NULL, O_BB },
		{ "block-rows", required_argument, NULL, O_BR },
		{ "lookahead", required_argument, NULL, O_LA },
		{ "no-direct", no_argument, NULL, O_NODIRECT },
		{ "run-ahead", no_argument, NULL, O_AHEAD },
		{ "quiet", no_argument, NULL, O_QUIET },
		{ "restart-quarantine-ms", required_argument, NULL, O_QUAR },
		{ "ram-budget", required_argument, NULL, O_RAM },
		{ "plan-wait-ms", required_argument, NULL, O_PLANWAIT },
		{ "help", no_argument, NULL, O_HELP },
		{ 0 },
	};
	uint64_t v;
	int c;

	memset(o, 0, sizeof(*o));
	o->queue_depth = 16;
	o->block_bytes = 1ull << 20;
	o->lookahead = 2;
	o->quarantine_ms = 1000;
	o->plan_wait_ms = 30000;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_MODEL: o->model_path = optarg; break;
		case O_SESSION: o->session = optarg; break;
		case O_BUDGET:
			if (s_bytes("--mem-budget", optarg, &o->mem_budget))
				return 2;
			break;
		case O_QD:
			if (s_u64("--queue-depth", optarg, 1, 4096, &v))
				return 2;
			o->queue_depth = (uint32_t)v;
			break;
		case O_BB:
			if (s_bytes("--block-bytes", optarg, &o->block_bytes))
				return 2;
			if (o->block_bytes % 4096 || o->block_bytes > (1ull << 30)) {
				fprintf(stderr, "nsio: --block-bytes must be a multiple of 4 KiB, "
					"at most 1 GiB\n");
				return 2;
			}
			break;
		case O_BR:
			if (s_u64("--block-rows", optarg, 0, UINT32_MAX, &o->block_rows))
				return 2;
			break;
		case O_LA:
			if (s_u64("--lookahead", optarg, 0, 1024, &v))
				return 2;
			o->lookahead = (uint32_t)v;
			break;
		case O_NODIRECT: o->no_direct = true; break;
		case O_AHEAD: o->run_ahead = true; break;
		case O_QUIET: o->quiet = true; break;
		case O_QUAR:
			if (s_u64("--restart-quarantine-ms", optarg, 0, 600000, &o->quarantine_ms))
				return 2;
			break;
		case O_RAM:
			if (ns_parse_bytes(optarg, &o->ram_budget) != 0) {
				fprintf(stderr, "nsio: --ram-budget '%s' is not a byte count "
					"(e.g. 64MB)\n", optarg);
				return 2;
			}
			break;
		case O_PLANWAIT:
			if (s_u64("--plan-wait-ms", optarg, 0, 600000, &o->plan_wait_ms))
				return 2;
			break;
		case O_HELP: s_usage(stdout); return -1;
		default:
			fprintf(stderr, "nsio: unknown option or missing value: '%s' (try --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "nsio: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!o->model_path) {
		fprintf(stderr, "nsio: --model PATH is required (try --help)\n");
		return 2;
	}
	if (o->session && ns_session_arg_check("nsio", o->session) < 0)
		return 2;
	return 0;
}
