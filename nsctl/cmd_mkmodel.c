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
		   "[--quant f32|f16|q8_0|q4_0|q4_k_m|mxfp4] [--seed S] [--split N]\npresets:");
	for (const char *const *p = ns_synth_presets; *p; p++)
		fprintf(f, " %s", *p);
	fprintf(f, "\n");
}

static int s_parse_u64(const char *opt, const char *v, uint64_t max, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(v, &end, 10);
	if (!*v || *end || errno || *out > max || v[0] == '-') {
		fprintf(stderr, "nsctl mkmodel: %s expects an integer up to %" PRIu64 ", got '%s'\n",
			opt, max, v);
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

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			s_usage(stdout);
			return 0;
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
			if (s_parse_u64(a, val, 100000, &v) || v == 0) {
				if (v == 0)
					fprintf(stderr, "nsctl mkmodel: --layers must be at least 1\n");
				return 2;
			}
			o.layers = (uint32_t)v;
		} else if (!strcmp(a, "--seed")) {
			if (s_parse_u64(a, val, UINT64_MAX, &o.seed))
				return 2;
		} else if (!strcmp(a, "--split")) {
			if (s_parse_u64(a, val, 9999, &v) || v == 0) {
				if (v == 0)
					fprintf(stderr, "nsctl mkmodel: --split must be at least 1\n");
				return 2;
			}
			o.split = (uint32_t)v;
		} else if (!strcmp(a, "--quant")) {
			if (ns_synth_parse_quant(val, &o.quant)) {
				fprintf(stderr, "nsctl mkmodel: unknown --quant '%s'\n", val);
				return 2;
			}
			o.quant_set = true;
		} else {
			fprintf(stderr, "nsctl mkmodel: unknown option '%s'\n", a);
			return 2;
		}
	}
	if (!o.preset || !out) {
		s_usage(stderr);
		return 2;
	}
	t0 = ns_now_ns();
	if (ns_synth_write(&o, out, err, sizeof(err))) {
		fprintf(stderr, "nsctl mkmodel: %s\n", err);
		return strstr(err, "unknown preset") || strstr(err, "--") ? 2 : 1;
	}
	fprintf(stderr, "nsctl mkmodel: wrote %s (%s) in %.2f s\n", out, o.preset,
		(double)(ns_now_ns() - t0) / 1e9);
	return 0;
}
