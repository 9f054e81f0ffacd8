/* bench_args.c - nsctl bench's command line and the configurations its sweeps make. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "budgets.h"
#include "cmd_opt.h"
#include "commands.h"
#include "diskbw.h"
#include "ctl_msg.h"
#include "draft_model.h"
#include "run_draft.h"
#include "ns_util.h"

static void s_usage(FILE *f)
{
	fprintf(f,
		"usage: nsctl bench MODEL [options]\n"
		"  -m, --model MODEL     the model (or as the first argument)\n"
		"  -p, --n-prompt N      prompt tokens of the pp test (512; 0: no pp test)\n"
		"  -n, --n-gen N         generated tokens of the tg test (128; 0: no tg test)\n"
		"  -r, --repetitions N   repeats (5)\n"
		"  -o, --output md|json|csv  output format (md)\n"
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
		"  -t, --threads N       compute threads (0: all CPUs)\n"
		"  -c, --ctx-size, --ctx N  context positions (4096)\n"
		"  -d, --n-depth LIST    decode (tg) after this many tokens in the context, as\n"
		"                        llama-bench's -d (default 0; pp is measured from an empty\n"
		"                        context)\n"
		"  --disk-repeats N      timed passes of the drive measurement (3)\n"
		"  --no-disk             skip the drive measurement (no roofline)\n"
		"  --no-plan             do not start nsplan\n"
		"  --run-ahead, --no-run-ahead  nsio reads the token's next matrices ahead\n"
		"                        (default: on for dense models)\n"
		"  --moe-predict on|off  MoE: prefetch each layer's predicted experts during its\n"
		"                        attention (default off; the pred hit %% column)\n"
		"  -q, --quiet           no progress line (drawn only when stderr is a terminal)\n"
		"  --draft LIST          speculative tg rows, one per drafter: none (the one-token\n"
		"                        decode), ngram (prompt lookup), oracle:ALPHA (drafts that\n"
		"                        agree with the target at rate ALPHA), DRAFT.gguf (a draft\n"
		"                        model, one at most); greedy generations after the tg\n"
		"                        prompt, each run's tokens checked against the others'\n"
		"  --draft-max N, --draft-min N  tokens drafted per pass, adaptive in [min, max]\n"
		"                        (16, 1), as nsctl run\n"
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

enum {
	O_HELP = 1, O_MODEL, O_NO_DISK, O_NO_PLAN, O_RUN_AHEAD, O_NO_RUN_AHEAD, O_PROMPT, O_GEN,
	O_REPEATS, O_DISK_REPEATS, O_OUTPUT, O_BUDGETS, O_RAM, O_VRAM, O_ACT, O_BACKEND, O_ROWS,
	O_LOOKAHEAD, O_THREADS, O_CTX, O_DEPTH, O_CTK, O_CTV, O_QUIET, O_MOE_PREDICT, O_DRAFT,
	O_DRAFT_MAX, O_DRAFT_MIN,
};

/* llama-bench's spellings where the meaning is the same (-p/--n-prompt, -n/--n-gen,
 * -r/--repetitions, -o/--output, -t/--threads, -d/--n-depth). */
static const struct ns_opt s_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	NSCTL_OPT_MODEL(O_MODEL),
	{ "no-disk", NULL, NS_OPT_SWITCH, O_NO_DISK },
	{ "no-plan", NULL, NS_OPT_SWITCH, O_NO_PLAN },
	{ "run-ahead", NULL, NS_OPT_SWITCH, O_RUN_AHEAD },
	{ "no-run-ahead", NULL, NS_OPT_SWITCH, O_NO_RUN_AHEAD },
	{ "moe-predict", NULL, NS_OPT_VALUE, O_MOE_PREDICT },
	{ "n-prompt", "-p", NS_OPT_VALUE, O_PROMPT },
	{ "n-gen", "-n", NS_OPT_VALUE, O_GEN },
	{ "repetitions", "-r", NS_OPT_VALUE, O_REPEATS },
	{ "disk-repeats", NULL, NS_OPT_VALUE, O_DISK_REPEATS },
	{ "output", "-o", NS_OPT_VALUE, O_OUTPUT },
	{ "budgets", "--mem-budget --mem-budgets", NS_OPT_VALUE, O_BUDGETS },
	{ "ram-budgets", "--ram-budget", NS_OPT_VALUE, O_RAM },
	{ "vram-budgets", "--vram-budget", NS_OPT_VALUE, O_VRAM },
	{ "act", NULL, NS_OPT_VALUE, O_ACT },
	{ "backend", NULL, NS_OPT_VALUE, O_BACKEND },
	{ "block-rows", NULL, NS_OPT_VALUE, O_ROWS },
	{ "lookahead", NULL, NS_OPT_VALUE, O_LOOKAHEAD },
	{ "threads", "-t", NS_OPT_VALUE, O_THREADS },
	{ "ctx-size", "-c --ctx", NS_OPT_VALUE, O_CTX },
	{ "n-depth", "-d", NS_OPT_VALUE, O_DEPTH },
	{ "cache-type-k", "-ctk", NS_OPT_VALUE, O_CTK },
	{ "cache-type-v", "-ctv", NS_OPT_VALUE, O_CTV },
	{ "quiet", "-q", NS_OPT_SWITCH, O_QUIET },
	{ "draft", NULL, NS_OPT_VALUE, O_DRAFT },
	{ "draft-max", NULL, NS_OPT_VALUE, O_DRAFT_MAX },
	{ "draft-min", NULL, NS_OPT_VALUE, O_DRAFT_MIN },
};

/* One --draft entry t into d (none, ngram, oracle:ALPHA, else a draft model's file, into
 * *file): 0, or -1 after one line. */
static int s_draft_one(const char *t, struct bench_draft *d, const char **file, const char *all)
{
	const char *slash;

	*d = (struct bench_draft){ .kind = NS_GEN_DRAFT_NONE };
	if (!strcmp(t, "none") || !strcmp(t, "ngram")) {
		d->kind = t[0] == 'n' && t[1] == 'g' ? NS_GEN_DRAFT_NGRAM : NS_GEN_DRAFT_NONE;
		snprintf(d->name, sizeof(d->name), "%s",
			 d->kind == NS_GEN_DRAFT_NGRAM ? "ngram" : "none");
		return 0;
	}
	if (!strncmp(t, "oracle:", 7)) {
		char *end;

		d->kind = NS_GEN_DRAFT_ORACLE;
		d->alpha = strtod(t + 7, &end);
		if (end == t + 7 || *end || !(d->alpha >= 0 && d->alpha <= 1)) {
			fprintf(stderr, "nsctl bench: --draft %s: oracle:ALPHA takes a rate in 0..1\n",
				t);
			return -1;
		}
		snprintf(d->name, sizeof(d->name), "oracle:%.2f", d->alpha);
		return 0;
	}
	if (*file) {
		fprintf(stderr, "nsctl bench: --draft %s: one draft model at most\n", all);
		return -1;
	}
	*file = t;
	d->kind = NS_GEN_DRAFT_MODEL;
	slash = strrchr(t, '/');
	snprintf(d->name, sizeof(d->name), "%.63s", slash ? slash + 1 : t); /* the label only */
	return 0;
}

/* --draft LIST into o->drafts, "none" moved first (the rows the others are compared to). */
static int s_drafts(struct bench_opts *o, const char *v)
{
	static char buf[4096]; /* the draft model's path points into it: one --draft per run */
	char *t = buf;

	if (o->n_drafts) {
		fprintf(stderr, "nsctl bench: --draft once (a comma list sweeps drafters)\n");
		return -1;
	}
	if (strlen(v) >= sizeof(buf) || !*v) {
		fprintf(stderr, "nsctl bench: --draft: empty or too long\n");
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", v);
	for (char *comma = buf; comma;) {
		struct bench_draft d;

		if ((comma = strchr(t, ',')))
			*comma = '\0';
		if (!*t) {
			fprintf(stderr, "nsctl bench: --draft: empty value in '%s'\n", v);
			return -1;
		}
		if (o->n_drafts == BENCH_MAX_DRAFTS) {
			fprintf(stderr, "nsctl bench: --draft: at most %d drafters\n",
				BENCH_MAX_DRAFTS);
			return -1;
		}
		if (s_draft_one(t, &d, &o->draft_model, v))
			return -1;
		for (size_t i = 0; i < o->n_drafts; i++)
			if (!strcmp(o->drafts[i].name, d.name)) {
				fprintf(stderr, "nsctl bench: --draft: %s twice\n", d.name);
				return -1;
			}
		if (d.kind == NS_GEN_DRAFT_NONE) { /* first */
			memmove(o->drafts + 1, o->drafts, o->n_drafts * sizeof(*o->drafts));
			o->drafts[0] = d;
		} else {
			o->drafts[o->n_drafts] = d;
		}
		o->n_drafts++;
		if (comma)
			t = comma + 1;
	}
	return 0;
}

/* One option (opt NULL: the model) spelled f: 0, or -1 after one line. */
static int s_on_opt(void *user, const struct ns_opt *opt, const char *f, const char *v)
{
	struct bench_opts *o = user;
	uint64_t x;

	switch (opt ? opt->id : O_MODEL) {
	case O_HELP:
		s_usage(stdout);
		exit(0);
	case O_NO_DISK:
		o->no_disk = true;
		return 0;
	case O_NO_PLAN:
		o->no_plan = true;
		return 0;
	case O_RUN_AHEAD:
	case O_NO_RUN_AHEAD:
		o->run_ahead = opt->id == O_RUN_AHEAD;
		return 0;
	case O_MOE_PREDICT:
		if (strcmp(v, "on") && strcmp(v, "off")) {
			fprintf(stderr, "nsctl bench: --moe-predict on|off (got '%s')\n", v);
			return -EINVAL;
		}
		o->moe_predict = !strcmp(v, "on");
		return 0;
	case O_QUIET:
		o->quiet = true;
		return 0;
	case O_MODEL:
		if (o->model) {
			fprintf(stderr, "nsctl bench: one model only ('%s')\n", v);
			return -1;
		}
		o->model = v;
		return 0;
	case O_PROMPT:
		if (s_u64(f, v, 0, 65536, &x))
			return -1;
		o->n_prompt = (uint32_t)x;
		return 0;
	case O_GEN:
		if (s_u64(f, v, 0, 65536, &x))
			return -1;
		o->n_gen = (uint32_t)x;
		return 0;
	case O_REPEATS:
		if (s_u64(f, v, 1, NS_BENCH_MAX_SAMPLES, &x))
			return -1;
		o->repeats = (uint32_t)x;
		return 0;
	case O_DISK_REPEATS:
		if (s_u64(f, v, 1, NS_DISKBW_MAX_REPEATS, &x))
			return -1;
		o->disk_repeats = (uint32_t)x;
		return 0;
	case O_OUTPUT:
		if (ns_table_parse_fmt(v, &o->fmt)) {
			fprintf(stderr, "nsctl bench: %s expects md, json or csv, got '%s'\n", f, v);
			return -1;
		}
		return 0;
	case O_BUDGETS:
		return s_list(f, v, true, 0, &o->budgets);
	case O_RAM:
		return s_list(f, v, true, 0, &o->ram);
	case O_VRAM:
		return s_list(f, v, true, 0, &o->vram);
	case O_ACT:
		if (strcmp(v, "f32") && strcmp(v, "q8")) {
			fprintf(stderr, "nsctl bench: %s f32|q8 (got '%s')\n", f, v);
			return -1;
		}
		o->act_q8 = !strcmp(v, "q8");
		return 0;
	case O_BACKEND:
		if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
			fprintf(stderr, "nsctl bench: %s cpu|cuda (got '%s')\n", f, v);
			return -1;
		}
		o->backend = v;
		return 0;
	case O_ROWS:
		return s_list(f, v, false, UINT32_MAX, &o->rows);
	case O_LOOKAHEAD:
		return s_list(f, v, false, 1024, &o->lookahead);
	case O_THREADS:
		if (s_u64(f, v, 0, 1024, &x))
			return -1;
		o->threads = (int)x;
		return 0;
	case O_CTX:
		if (s_u64(f, v, 1, 1u << 24, &x))
			return -1;
		o->n_ctx = (uint32_t)x;
		return 0;
	case O_DEPTH:
		return s_list(f, v, false, 1u << 24, &o->depths);
	case O_DRAFT:
		return s_drafts(o, v);
	case O_DRAFT_MAX:
	case O_DRAFT_MIN:
		if (s_u64(f, v, 1, NS_CMSG_MAX_DRAFT, &x))
			return -1;
		*(opt->id == O_DRAFT_MAX ? &o->draft_max : &o->draft_min) = (uint32_t)x;
		return 0;
	case O_CTK:
	case O_CTV: /* f may be an abbreviation getopt_long took: name the flag meant */
		return nsctl_kv_set("nsctl bench", nsctl_kv_is_flag(f) ? f : opt->id == O_CTK ?
				    "--cache-type-k" : "--cache-type-v", v, &o->ctk, &o->ctv) ? -1 : 0;
	}
	return -1;
}

/* --draft's combinations: one line and -1 for those that cannot run. */
static int bench_check_drafts(const struct bench_opts *o)
{
	uint32_t max = o->draft_max ? o->draft_max : 16, min = o->draft_min ? o->draft_min : 1;
	char err[NS_ERR_LEN];

	if (!o->n_drafts && (o->draft_max || o->draft_min)) {
		fprintf(stderr, "nsctl bench: --draft-max and --draft-min go with --draft\n");
		return -1;
	}
	if (!o->n_drafts)
		return 0;
	if (!o->n_gen) {
		fprintf(stderr, "nsctl bench: --draft drafts tg tokens: -n 0 leaves none\n");
		return -1;
	}
	if (min > max) {
		fprintf(stderr, "nsctl bench: --draft-min %u is over --draft-max %u\n", min, max);
		return -1;
	}
	if (o->draft_model && nsctl_draft_compatible(o->model, o->draft_model, err,
						     sizeof(err)) < 0) {
		fprintf(stderr, "nsctl bench: %s\n", err);
		return -1;
	}
	return 0;
}

int bench_parse(struct bench_opts *o, int argc, char **argv)
{
	*o = (struct bench_opts){ .n_prompt = 512, .n_gen = 128, .repeats = 5, .disk_repeats = 3,
			      .fmt = NS_TABLE_MD, .run_ahead = -1 };
	if (ns_opt_parse("nsctl bench", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt, o))
		return -1;
	if (!o->model) {
		fprintf(stderr, "nsctl bench: no MODEL given (usage: nsctl bench MODEL [options]; "
			"--help lists them)\n");
		return -1;
	}
	if (!o->n_prompt && !o->n_gen) {
		fprintf(stderr, "nsctl bench: -p 0 and -n 0 leave nothing to measure\n");
		return -1;
	}
	if (bench_check_drafts(o))
		return -1;
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
