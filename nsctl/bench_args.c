/* bench_args.c - nsctl bench's command line and the configurations its sweeps make. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "budgets.h"
#include "commands.h"
#include "diskbw.h"
#include "ns_util.h"

static void s_usage(FILE *f)
{
	fprintf(f,
		"usage: nsctl bench MODEL [options]\n"
		"  -p N                  prompt tokens of the pp test (512; 0: no pp test)\n"
		"  -n N                  generated tokens of the tg test (128; 0: no tg test)\n"
		"  -r N                  repeats (5)\n"
		"  -o md|json|csv        output format (md)\n"
		"  --budgets LIST        streaming arena sizes, e.g. 64MB,256MB,1GB\n"
		"  --ram-budgets LIST    RAM cache budgets (0: none). With neither list, one\n"
		"                        configuration with the budgets nsctl run and nsctl plan\n"
		"                        choose (from MemAvailable and the cgroup limit); with\n"
		"                        only --budgets, no RAM cache\n"
		"  --vram-budgets LIST   GPU budgets (cuda backend)\n"
		"  --backend cpu|cuda    compute process (nscompute or nscompute-cuda)\n"
		"  --act f32|q8          kernels' activations (f32 default; q8 as llama.cpp; cuda:\n"
		"                        decode GEMVs of quantized weights)\n"
		"  -ctk, --cache-type-k T, -ctv, --cache-type-v T\n"
		"                        KV cache element types: f32 (default, exact), f16, q8_0\n"
		"  --block-rows LIST     rows per streamed block (0: whole tensors)\n"
		"  --lookahead LIST      blocks in flight after the current one\n"
		"  --threads N           compute threads (0: all CPUs)\n"
		"  -c, --ctx N           context positions (4096)\n"
		"  -d, --n-depth LIST    decode (tg) after this many tokens in the context, as\n"
		"                        llama-bench's -d (default 0; pp is measured from an empty\n"
		"                        context)\n"
		"  --disk-repeats N      timed passes of the drive measurement (3)\n"
		"  --no-disk             skip the drive measurement (no roofline)\n"
		"  --no-plan             do not start nsplan\n"
		"  --run-ahead, --no-run-ahead  nsio reads the token's next matrices ahead\n"
		"                        (default: on for dense models)\n"
		"The table goes to stdout; progress and timings go to stderr.\n");
}

/* A count in min..max (ns_parse_count). */
static int s_u64(const char *flag, const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	if (ns_parse_count(v, min, max, out) < 0) {
		fprintf(stderr, "nsctl bench: %s expects an integer in %" PRIu64 "..%" PRIu64
			", got '%s'\n", flag, min, max, v);
		return -1;
	}
	return 0;
}

/* "64MB,256MB,1GB" (sizes) or "0,64,256" (counts) into l. */
static int s_list(const char *flag, const char *v, bool sizes, uint64_t max, struct bench_list *l)
{
	char buf[1024], *t = buf;

	if (strlen(v) >= sizeof(buf)) {
		fprintf(stderr, "nsctl bench: %s: list too long\n", flag);
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", v);
	l->n = 0;
	for (char *comma = buf; comma;) {
		comma = strchr(t, ',');
		if (comma)
			*comma = '\0';
		if (!*t) {
			fprintf(stderr, "nsctl bench: %s: empty value in '%s'\n", flag, v);
			return -1;
		}
		if (l->n == BENCH_MAX_LIST) {
			fprintf(stderr, "nsctl bench: %s: at most %d values\n", flag, BENCH_MAX_LIST);
			return -1;
		}
		if (sizes) {
			if (ns_parse_bytes(t, &l->v[l->n]) < 0) {
				fprintf(stderr, "nsctl bench: %s: bad size '%s'\n", flag, t);
				return -1;
			}
		} else if (s_u64(flag, t, 0, max, &l->v[l->n])) {
			return -1;
		}
		l->n++;
		if (comma)
			t = comma + 1;
	}
	if (!l->n) {
		fprintf(stderr, "nsctl bench: %s: empty list\n", flag);
		return -1;
	}
	return 0;
}

int bench_parse(struct bench_opts *o, int argc, char **argv)
{
	uint64_t x;

	*o = (struct bench_opts){ .n_prompt = 512, .n_gen = 128, .repeats = 5, .disk_repeats = 3,
			      .fmt = NS_TABLE_MD, .run_ahead = -1 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			s_usage(stdout);
			exit(0);
		} else if (!strcmp(a, "--no-disk")) {
			o->no_disk = true;
			continue;
		} else if (!strcmp(a, "--no-plan")) {
			o->no_plan = true;
			continue;
		} else if (!strcmp(a, "--run-ahead") || !strcmp(a, "--no-run-ahead")) {
			o->run_ahead = !strcmp(a, "--run-ahead");
			continue;
		} else if (a[0] != '-' || !a[1]) {
			if (o->model) {
				fprintf(stderr, "nsctl bench: one model only ('%s')\n", a);
				return -1;
			}
			o->model = a;
			continue;
		}
		if (!v) {
			fprintf(stderr, "nsctl bench: %s needs a value\n", a);
			return -1;
		}
		i++;
		if (!strcmp(a, "-p")) {
			if (s_u64(a, v, 0, 65536, &x))
				return -1;
			o->n_prompt = (uint32_t)x;
		} else if (!strcmp(a, "-n")) {
			if (s_u64(a, v, 0, 65536, &x))
				return -1;
			o->n_gen = (uint32_t)x;
		} else if (!strcmp(a, "-r")) {
			if (s_u64(a, v, 1, NS_BENCH_MAX_SAMPLES, &x))
				return -1;
			o->repeats = (uint32_t)x;
		} else if (!strcmp(a, "--disk-repeats")) {
			if (s_u64(a, v, 1, NS_DISKBW_MAX_REPEATS, &x))
				return -1;
			o->disk_repeats = (uint32_t)x;
		} else if (!strcmp(a, "-o")) {
			if (ns_table_parse_fmt(v, &o->fmt)) {
				fprintf(stderr, "nsctl bench: -o expects md, json or csv, got '%s'\n", v);
				return -1;
			}
		} else if (!strcmp(a, "--budgets") || !strcmp(a, "--mem-budget")) {
			if (s_list(a, v, true, 0, &o->budgets))
				return -1;
		} else if (!strcmp(a, "--ram-budgets") || !strcmp(a, "--ram-budget")) {
			if (s_list(a, v, true, 0, &o->ram))
				return -1;
		} else if (!strcmp(a, "--vram-budgets") || !strcmp(a, "--vram-budget")) {
			if (s_list(a, v, true, 0, &o->vram))
				return -1;
		} else if (!strcmp(a, "--act")) {
			if (strcmp(v, "f32") && strcmp(v, "q8")) {
				fprintf(stderr, "nsctl bench: --act f32|q8 (got '%s')\n", v);
				return -1;
			}
			o->act_q8 = !strcmp(v, "q8");
		} else if (!strcmp(a, "--backend")) {
			if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
				fprintf(stderr, "nsctl bench: --backend cpu|cuda (got '%s')\n", v);
				return -1;
			}
			o->backend = v;
		} else if (!strcmp(a, "--block-rows")) {
			if (s_list(a, v, false, UINT32_MAX, &o->rows))
				return -1;
		} else if (!strcmp(a, "--lookahead")) {
			if (s_list(a, v, false, 1024, &o->lookahead))
				return -1;
		} else if (!strcmp(a, "--threads")) {
			if (s_u64(a, v, 0, 1024, &x))
				return -1;
			o->threads = (int)x;
		} else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
			if (s_u64(a, v, 1, 1u << 24, &x))
				return -1;
			o->n_ctx = (uint32_t)x;
		} else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth")) {
			if (s_list(a, v, false, 1u << 24, &o->depths))
				return -1;
		} else if (nsctl_kv_is_flag(a)) {
			if (nsctl_kv_set("nsctl bench", a, v, &o->ctk, &o->ctv))
				return -1;
		} else {
			fprintf(stderr, "nsctl bench: unknown option '%s' (try --help)\n", a);
			return -1;
		}
	}
	if (!o->model) {
		fprintf(stderr, "nsctl bench: no MODEL given (usage: nsctl bench MODEL [options]; "
			"--help lists them)\n");
		return -1;
	}
	if (!o->n_prompt && !o->n_gen) {
		fprintf(stderr, "nsctl bench: -p 0 and -n 0 leave nothing to measure\n");
		return -1;
	}
	if (!o->depths.n)
		o->depths = (struct bench_list){ .v = { 0 }, .n = 1 };
	for (size_t i = 0; i < o->depths.n && o->n_gen; i++)
		if (o->depths.v[i] + 1 + o->n_gen > (o->n_ctx ? o->n_ctx : NSCTL_DEFAULT_CTX)) {
			fprintf(stderr, "nsctl bench: -d %llu and -n %u need a context of %llu (-c)\n",
				(unsigned long long)o->depths.v[i], o->n_gen,
				(unsigned long long)o->depths.v[i] + 1 + o->n_gen);
			return -1;
		}
	return 0;
}

/* The cartesian product of the sweeps; an unswept dimension is the engine's default. */
int bench_configs(const struct bench_opts *o, struct bench_config *c, size_t *n)
{
	const struct bench_list none = { .v = { 0 }, .n = 1 };
	const struct bench_list *mem = o->budgets.n ? &o->budgets : &none;
	const struct bench_list *ram = o->ram.n ? &o->ram : &none;
	const struct bench_list *vram = o->vram.n ? &o->vram : &none;
	const struct bench_list *rows = o->rows.n ? &o->rows : &none;
	size_t nla = o->lookahead.n ? o->lookahead.n : 1;

	*n = 0;
	for (size_t a = 0; a < mem->n; a++)
		for (size_t b = 0; b < ram->n; b++)
			for (size_t d = 0; d < vram->n; d++)
				for (size_t r = 0; r < rows->n; r++)
					for (size_t l = 0; l < nla; l++) {
						if (*n == BENCH_MAX_CONFIGS) {
							fprintf(stderr, "nsctl bench: more than %d "
								"configurations\n", BENCH_MAX_CONFIGS);
							return -1;
						}
						c[(*n)++] = (struct bench_config){
							o->backend && !strcmp(o->backend, "cuda"),
							mem->v[a], ram->v[b], vram->v[d], rows->v[r],
							o->lookahead.n ? (int32_t)o->lookahead.v[l] : -1 };
					}
	return 0;
}

void bench_config_text(const struct bench_config *c, char *buf, size_t len)
{
	char m[32] = "default", r[32] = "0", v[32] = "0", la[16] = "default"; /* ram, vram 0: none */

	if (c->mem)
		ns_format_bytes(c->mem, m, sizeof(m));
	if (c->ram)
		ns_format_bytes(c->ram, r, sizeof(r));
	if (c->vram)
		ns_format_bytes(c->vram, v, sizeof(v));
	if (c->lookahead >= 0)
		snprintf(la, sizeof(la), "%d", c->lookahead);
	snprintf(buf, len, "mem %s, ram %s, vram %s, block rows %" PRIu64 ", lookahead %s", m, r,
		 v, c->rows, la);
}
