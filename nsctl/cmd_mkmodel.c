/* nsctl mkmodel: write a random-weight GGUF in the shape of a real model. */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_opt.h"
#include "commands.h"
#include "ns_opt.h"
#include "ns_progress.h"
#include "ns_util.h"
#include "synth.h"

static void s_usage(FILE *f)
{
	fprintf(f, "usage: nsctl mkmodel --preset NAME -o FILE.gguf [--layers N] "
		   "[--quant f32|f16|bf16|q8_0|q4_0|q4_k_m|mxfp4] [-s|--seed S] [--split N] [--force]\n"
		   "       [--mtp] (qwen3.5 presets: with the checkpoint's MTP block, for --draft mtp)\n"
		   "       [-q|--quiet]\n"
		   "an existing FILE is refused unless --force (which replaces it); a progress line\n"
		   "shows on a terminal (not with --quiet)\n"
		   "qwen3-vl-*: the vision tower too, as mmproj-<file> beside FILE (F16; f32, bf16\n"
		   "or q8_0 with that --quant), found there by run, logits and plan\npresets:");
	for (const char *const *p = ns_synth_presets; *p; p++)
		fprintf(f, " %s", *p);
	fprintf(f, "\n");
}

/* A count in min..max (ns_parse_count). */
static int s_parse_u64(const char *opt, const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	if (ns_parse_count(v, min, max, out) < 0) {
		fprintf(stderr, "nsctl mkmodel: %s expects an integer in %" PRIu64 "..%" PRIu64
			", got '%s'\n", opt, min, max, v);
		return -1;
	}
	return 0;
}

enum {
	O_HELP = 1, O_FORCE, O_PRESET, O_OUTPUT, O_LAYERS, O_SEED, O_SPLIT, O_QUANT, O_QUIET,
	O_MTP,
};

static const struct ns_opt s_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	{ "force", NULL, NS_OPT_SWITCH, O_FORCE },
	{ "mtp", NULL, NS_OPT_SWITCH, O_MTP },
	{ "preset", NULL, NS_OPT_VALUE, O_PRESET },
	{ "output", "-o", NS_OPT_VALUE, O_OUTPUT },
	{ "layers", NULL, NS_OPT_VALUE, O_LAYERS },
	{ "seed", "-s", NS_OPT_VALUE, O_SEED },
	{ "split", NULL, NS_OPT_VALUE, O_SPLIT },
	{ "quant", NULL, NS_OPT_VALUE, O_QUANT },
	{ "quiet", "-q", NS_OPT_SWITCH, O_QUIET },
};

struct s_args {
	struct ns_synth_opts o;
	const char *out;
	bool force, quiet, help;
	struct ns_progress prog; /* "writing FILE", on a terminal */
};

static int s_on_opt(void *user, const struct ns_opt *opt, const char *f, const char *v)
{
	struct s_args *a = user;
	uint64_t u;

	if (!opt) {
		fprintf(stderr, "nsctl mkmodel: unknown argument '%s' (try --help)\n", v);
		return -EINVAL;
	}
	switch (opt->id) {
	case O_HELP:
		a->help = true;
		return 0;
	case O_MTP:
		a->o.mtp = true;
		return 0;
	case O_FORCE:
		a->force = true;
		return 0;
	case O_QUIET:
		a->quiet = true;
		return 0;
	case O_PRESET:
		a->o.preset = v;
		return 0;
	case O_OUTPUT:
		a->out = v;
		return 0;
	case O_LAYERS:
		if (s_parse_u64(f, v, 1, 100000, &u))
			return -EINVAL;
		a->o.layers = (uint32_t)u;
		return 0;
	case O_SEED:
		return s_parse_u64(f, v, 0, UINT64_MAX, &a->o.seed) ? -EINVAL : 0;
	case O_SPLIT:
		if (s_parse_u64(f, v, 1, 9999, &u))
			return -EINVAL;
		a->o.split = (uint32_t)u;
		return 0;
	case O_QUANT:
		if (ns_synth_parse_quant(v, &a->o.quant)) {
			fprintf(stderr, "nsctl mkmodel: unknown --quant '%s'\n", v);
			return -EINVAL;
		}
		a->o.quant_set = true;
		return 0;
	}
	return -EINVAL;
}

/* ns_synth_opts.progress: the line starts with the first bytes made (the total is known). */
static void s_progress(void *user, uint64_t n, uint64_t total)
{
	struct s_args *a = user;

	if (!a->prog.total && !a->prog.done) {
		char name[64];

		snprintf(name, sizeof(name), "writing %s", a->o.preset);
		ns_progress_begin(&a->prog, ns_progress_wanted(a->quiet), name, NULL, total, 0);
	}
	ns_progress_add(&a->prog, n);
}

int cmd_mkmodel(int argc, char **argv)
{
	struct s_args a = { .o = { .preset = NULL, .seed = 1 } };
	char err[NS_ERR_LEN];
	uint64_t t0;
	int rc;

	if (ns_opt_parse("nsctl mkmodel", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt,
			 &a) < 0)
		return 2;
	if (a.help) {
		s_usage(stdout);
		return 0;
	}
	if (!a.o.preset || !a.out) {
		fprintf(stderr, "nsctl mkmodel: %s is required (usage: nsctl mkmodel --preset NAME "
			"-o FILE.gguf [options]; --help lists them and the presets)\n",
			!a.o.preset ? "--preset NAME" : "-o FILE");
		return 2;
	}
	t0 = ns_now_ns();
	a.o.no_replace = !a.force;
	a.o.progress = s_progress;
	a.o.progress_user = &a;
	rc = ns_synth_write(&a.o, a.out, err, sizeof(err));
	ns_progress_end(&a.prog);
	if (rc == -EEXIST) {
		fprintf(stderr, "nsctl mkmodel: %s (--force replaces it)\n", err);
		return 2;
	}
	if (rc) {
		fprintf(stderr, "nsctl mkmodel: %s\n", err);
		return rc == -EINVAL ? 2 : 1; /* a bad preset, layer count or split: usage */
	}
	{
		char tower[4096];
		bool vl = ns_synth_tower_path(a.o.preset, a.out, tower, sizeof(tower)) == 1;

		fprintf(stderr, "nsctl mkmodel: wrote %s%s%s (%s) in %.2f s\n", a.out,
			vl ? " and its vision tower " : "", vl ? tower : "", a.o.preset,
			(double)(ns_now_ns() - t0) / 1e9);
	}
	return 0;
}
