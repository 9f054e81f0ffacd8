/* nsctl mkmodel: write a random-weight GGUF in the shape of a real model. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ns_util.h"
#include "synth.h"

static void s_usage(FILE *f)
{
	fprintf(f, "usage: nsctl mkmodel --preset NAME -o FILE.gguf [--layers N] "
		   "[--quant f32|f16|q8_0|q4_0|q4_k_m|mxfp4] [--seed S] [--split N] [--force]\n"
		   "an existing FILE is refused unless --force (which replaces it)\npresets:");
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

int cmd_mkmodel(int argc, char **argv)
{
	struct ns_synth_opts o = { .preset = NULL, .seed = 1 };
	const char *out = NULL;
	char err[NS_ERR_LEN];
	uint64_t v, t0;
	bool force = false;
	int rc;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			s_usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--force")) {
			force = true;
			continue;
		}
		if (strcmp(a, "--preset") && strcmp(a, "-o") && strcmp(a, "--output") &&
		    strcmp(a, "--layers") && strcmp(a, "--seed") && strcmp(a, "--split") &&
		    strcmp(a, "--quant")) {
			fprintf(stderr, "nsctl mkmodel: unknown %s '%s' (try --help)\n",
				a[0] == '-' ? "option" : "argument", a);
			return 2;
		}
		if (!val) {
			fprintf(stderr, "nsctl mkmodel: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--preset")) {
			o.preset = val;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			out = val;
		} else if (!strcmp(a, "--layers")) {
			if (s_parse_u64(a, val, 1, 100000, &v))
				return 2;
			o.layers = (uint32_t)v;
		} else if (!strcmp(a, "--seed")) {
			if (s_parse_u64(a, val, 0, UINT64_MAX, &o.seed))
				return 2;
		} else if (!strcmp(a, "--split")) {
			if (s_parse_u64(a, val, 1, 9999, &v))
				return 2;
			o.split = (uint32_t)v;
		} else if (!strcmp(a, "--quant")) {
			if (ns_synth_parse_quant(val, &o.quant)) {
				fprintf(stderr, "nsctl mkmodel: unknown --quant '%s'\n", val);
				return 2;
			}
			o.quant_set = true;
		}
	}
	if (!o.preset || !out) {
		fprintf(stderr, "nsctl mkmodel: %s is required (usage: nsctl mkmodel --preset NAME "
			"-o FILE.gguf [options]; --help lists them and the presets)\n",
			!o.preset ? "--preset NAME" : "-o FILE");
		return 2;
	}
	t0 = ns_now_ns();
	o.no_replace = !force;
	rc = ns_synth_write(&o, out, err, sizeof(err));
	if (rc == -EEXIST) {
		fprintf(stderr, "nsctl mkmodel: %s (--force replaces it)\n", err);
		return 2;
	}
	if (rc) {
		fprintf(stderr, "nsctl mkmodel: %s\n", err);
		return rc == -EINVAL ? 2 : 1; /* a bad preset, layer count or split: usage */
	}
	fprintf(stderr, "nsctl mkmodel: wrote %s (%s) in %.2f s\n", out, o.preset,
		(double)(ns_now_ns() - t0) / 1e9);
	return 0;
}
