/* nsctl bench MODEL [-p 512] [-n 128] [-r 5] [-o md|json|csv] [sweeps]
 *
 * llama-bench's conventions on top of the C API (neurostream.h): a prompt-processing test
 * (pp<p>: the prompt evaluated from an empty context) and a generation test (tg<n>: n tokens
 * decoded), each repeated r times, reported as mean ± sd tokens per second, plus the streaming
 * figures: weight bytes read from the drive per token, stall ms per token, arena peak, cache
 * hit rate, and the roofline: the drive's O_DIRECT bandwidth measured in this run on the model
 * file itself (bench/diskbw.h, at nsio's read size and queue depth; passes before the runs,
 * one after every configuration and more at the end, the median of all) divided by the bytes
 * read from the drive per token, with the measured rate's ratio to it.
 *
 * Sweeps (comma lists): --budgets (arena), --ram-budgets, --vram-budgets, --block-rows,
 * --lookahead; every combination is a configuration. Each repeat loads every configuration
 * afresh (load and warm-up timed apart), in forward order on even repeats and backward on odd
 * ones, so drift of the machine spreads evenly. Decoding is teacher-forced
 * (ns_engine_decode_forced): one token sequence, cut from a fixed text with the model's
 * tokenizer before the runs, is fed to every run, so every configuration decodes the same
 * tokens whatever its logits (llama-bench feeds random ids instead; ours are text-like so an
 * MoE model routes as on prose). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "diskbw.h"
#include "hparams.h"
#include "model.h"
#include "neurostream.h"
#include "ns_util.h"
#include "plan.h"
#include "stats.h"
#include "table.h"

#define S_MAX_LIST 16
#define S_MAX_CONFIGS 64
/* nsio's defaults (nsio/nsio.h): the largest single read and the reads kept in flight */
#define S_NSIO_READ_BYTES (1ull << 20)
#define S_NSIO_QUEUE_DEPTH 16u
#define S_MAX_DISK_PASSES 512

/* Every timed pass of the drive over the run: before, between configurations, after. */
struct s_disk {
	double bps[S_MAX_DISK_PASSES];
	size_t n;
	bool failed;
};

static volatile sig_atomic_t s_interrupted; /* SIGINT/SIGTERM: the engine's cancel flag */

static void s_on_signal(int sig)
{
	s_interrupted = sig;
}

struct s_list {
	uint64_t v[S_MAX_LIST];
	size_t n;
};

struct s_opts {
	const char *model;
	uint32_t n_prompt, n_gen, repeats, disk_repeats;
	enum ns_table_fmt fmt;
	struct s_list budgets, ram, vram, rows, lookahead;
	int threads;
	uint32_t n_ctx;
	bool no_disk, no_plan;
	const char *backend; /* "cpu" (default) or "cuda" */
	bool act_q8;         /* --act q8 */
	int run_ahead;       /* -1 engine default (dense: on), 0 --no-run-ahead, 1 --run-ahead */
};

struct s_config {
	bool cuda;
	uint64_t mem, ram, vram, rows;
	int32_t lookahead; /* < 0: the engine's default */
};

/* A run's generated ids, to compare configurations. */
struct s_ids {
	int32_t *ids;
	uint32_t n, cap;
	uint32_t n_want;   /* progress: "token k/n_want" on stderr while decoding */
	uint64_t t0;
};

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
		"  --block-rows LIST     rows per streamed block (0: whole tensors)\n"
		"  --lookahead LIST      blocks in flight after the current one\n"
		"  --threads N           compute threads (0: all CPUs)\n"
		"  -c, --ctx N           context positions (4096)\n"
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
static int s_list(const char *flag, const char *v, bool sizes, uint64_t max, struct s_list *l)
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
		if (l->n == S_MAX_LIST) {
			fprintf(stderr, "nsctl bench: %s: at most %d values\n", flag, S_MAX_LIST);
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

static int s_parse(struct s_opts *o, int argc, char **argv)
{
	uint64_t x;

	*o = (struct s_opts){ .n_prompt = 512, .n_gen = 128, .repeats = 5, .disk_repeats = 3,
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
	return 0;
}

/* The cartesian product of the sweeps; an unswept dimension is the engine's default. */
static int s_configs(const struct s_opts *o, struct s_config *c, size_t *n)
{
	const struct s_list none = { .v = { 0 }, .n = 1 };
	const struct s_list *mem = o->budgets.n ? &o->budgets : &none;
	const struct s_list *ram = o->ram.n ? &o->ram : &none;
	const struct s_list *vram = o->vram.n ? &o->vram : &none;
	const struct s_list *rows = o->rows.n ? &o->rows : &none;
	size_t nla = o->lookahead.n ? o->lookahead.n : 1;

	*n = 0;
	for (size_t a = 0; a < mem->n; a++)
		for (size_t b = 0; b < ram->n; b++)
			for (size_t d = 0; d < vram->n; d++)
				for (size_t r = 0; r < rows->n; r++)
					for (size_t l = 0; l < nla; l++) {
						if (*n == S_MAX_CONFIGS) {
							fprintf(stderr, "nsctl bench: more than %d "
								"configurations\n", S_MAX_CONFIGS);
							return -1;
						}
						c[(*n)++] = (struct s_config){
							o->backend && !strcmp(o->backend, "cuda"),
							mem->v[a], ram->v[b], vram->v[d], rows->v[r],
							o->lookahead.n ? (int32_t)o->lookahead.v[l] : -1 };
					}
	return 0;
}

/* llama-bench's model_type: "qwen3 8B Q4_K - Medium". */
static void s_model_name(const struct ns_model *m, uint64_t n_params, char *buf, size_t len)
{
	static const struct { uint32_t ft; const char *name; } ftypes[] = {
		{ 0, "all F32" }, { 1, "F16" }, { 2, "Q4_0" }, { 7, "Q8_0" }, { 15, "Q4_K - Medium" },
		{ 14, "Q4_K - Small" }, { 17, "Q5_K - Medium" }, { 18, "Q6_K" }, { 32, "BF16" },
		{ 38, "MXFP4 MoE" },
	};
	const struct ns_gguf *g = m->shards[0];
	const char *arch = ns_gguf_get_str(g, "general.architecture");
	const char *ft = "unknown type";
	char size[32];
	uint64_t v;

	if (ns_gguf_get_u64(g, "general.file_type", &v))
		for (size_t i = 0; i < NS_ARRAY_LEN(ftypes); i++)
			if (ftypes[i].ft == v)
				ft = ftypes[i].name;
	if (n_params >= 1000000000ull)
		snprintf(size, sizeof(size), "%.0fB", (double)n_params / 1e9);
	else
		snprintf(size, sizeof(size), "%.0fM", (double)n_params / 1e6);
	snprintf(buf, len, "%s %s %s", arch ? arch : "?", size, ft);
}

/* Words for the pp prompt, cut to at most n tokens (BOS included) by bisection on its length. */
static int s_prompt(struct ns_engine *e, uint32_t n, char **out, uint32_t *n_tok)
{
	static const char *const words[] = { "the", "river", "stone", "light", "over", "quiet",
		"market", "seven", "winter", "paper", "garden", "north", "signal", "copper" };
	size_t cap = (size_t)n * 8 + 64, used = 0, lo = 0, hi;
	char *text = malloc(cap + 1);
	int rc = 0;

	if (!text)
		return -ENOMEM;
	for (uint64_t k = 0; used + 16 < cap; k++) {
		uint64_t h = k * 0x9e3779b97f4a7c15ull;
		used += (size_t)snprintf(text + used, cap + 1 - used, "%s%s", used ? " " : "",
					  words[(h >> 32) % NS_ARRAY_LEN(words)]);
	}
	hi = used;
	*n_tok = 0;
	while (lo < hi) { /* the longest prefix with at most n tokens */
		size_t mid = lo + (hi - lo + 1) / 2;
		char save = text[mid];
		int32_t *ids = NULL;
		size_t nt = 0;

		text[mid] = 0;
		rc = ns_engine_tokenize(e, text, true, &ids, &nt);
		text[mid] = save;
		free(ids);
		if (rc < 0)
			break;
		if (nt <= n) {
			lo = mid;
			*n_tok = (uint32_t)nt;
		} else {
			hi = mid - 1;
		}
	}
	if (rc < 0) {
		free(text);
		return rc;
	}
	text[lo] = 0;
	*out = text;
	return 0;
}

static int s_collect(const char *piece, size_t len, int32_t id, void *user)
{
	struct s_ids *s = user;

	(void)piece;
	(void)len;
	if (id < 0)
		return 0;
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 256;
		int32_t *p = realloc(s->ids, cap * sizeof(*p));
		if (!p)
			return 1;
		s->ids = p;
		s->cap = cap;
	}
	s->ids[s->n++] = id;
	if (s->n_want)
		fprintf(stderr, "\rnsctl bench: tg token %u/%u, %.1f s ", s->n, s->n_want,
			(double)(ns_now_ns() - s->t0) / 1e9);
	return 0;
}

/* The drive is measured on the largest shard of the model. */
static const struct ns_gguf *s_largest_shard(const struct ns_model *m)
{
	const struct ns_gguf *big = m->shards[0];

	for (uint32_t i = 1; i < m->n_shards; i++)
		if (m->shards[i]->file_size > big->file_size)
			big = m->shards[i];
	return big;
}

/* An MoE token's expert reads are scattered over the file, so beside the sequential roofline
 * (the table's, conservative) print the drive's random-read rate at the same read size and
 * queue depth, and each tg row's ratio to the roofline it gives. Dense models: nothing. */
static void s_moe_random_limit(const struct s_opts *o, const struct ns_model *m,
			       const struct ns_bench_row *tg, size_t nc)
{
	struct ns_diskbw_opts d;
	struct ns_diskbw_result r;
	const struct ns_gguf *big = s_largest_shard(m);
	char err[NS_ERR_LEN];
	bool moe = false;

	for (uint64_t i = 0; i < m->n_tensors && !moe; i++)
		moe = strstr(m->tensors[i].name, "_exps") != NULL;
	if (!moe || o->no_disk)
		return;
	ns_diskbw_opts_default(&d);
	d.block_bytes = S_NSIO_READ_BYTES;
	d.queue_depth = S_NSIO_QUEUE_DEPTH;
	d.repeats = 3;
	d.pattern = NS_DISKBW_RAND;
	if (ns_diskbw_measure(big->path, &d, &r, err, sizeof(err))) {
		fprintf(stderr, "nsctl bench: random-read measurement failed: %s\n", err);
		return;
	}
	fprintf(stderr, "nsctl bench: MoE: expert reads are scattered; random %" PRIu64 "-byte "
		"reads at queue depth %u: %.3f GB/s (median of 3 passes)\n", d.block_bytes,
		d.queue_depth, r.median_bps / 1e9);
	for (size_t i = 0; i < nc; i++) {
		double mean, sd;

		if (!tg[i].n_samples || !(tg[i].bytes_per_token > 0))
			continue;
		ns_stats_mean_sd(tg[i].ts, tg[i].n_samples, &mean, &sd);
		fprintf(stderr, "nsctl bench: MoE: configuration %zu: tg %.3f t/s against a "
			"random-read roofline of %.3f t/s: ratio %.2f\n", i + 1, mean,
			r.median_bps / tg[i].bytes_per_token,
			mean / (r.median_bps / tg[i].bytes_per_token));
	}
}

/* The teacher-forced sequence: n ids of the pp words (BOS first when the vocabulary adds one),
 * the text repeated when its tokens run short. */
static int s_forced(struct ns_engine *e, uint32_t n, struct s_ids *out)
{
	char *text = NULL;
	int32_t *ids = NULL;
	uint32_t nt = 0;
	size_t n_ids = 0;
	int rc;

	if ((rc = s_prompt(e, n, &text, &nt)) < 0)
		return rc;
	rc = ns_engine_tokenize(e, text, true, &ids, &n_ids);
	free(text);
	if (rc < 0)
		return rc;
	if (n_ids == 0) {
		free(ids);
		return -EINVAL;
	}
	if (!(out->ids = malloc((size_t)n * sizeof(*out->ids)))) {
		free(ids);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		size_t k = i; /* past the end: repeat the text after its first token */

		if (k >= n_ids)
			k = n_ids > 1 ? 1 + (k - 1) % (n_ids - 1) : 0;
		out->ids[i] = ids[k];
	}
	out->n = n;
	free(ids);
	return 0;
}

static void s_fill_budgets(struct ns_bench_row *r, const struct s_config *c, const char *model,
			   uint64_t size, uint64_t n_params, double disk_bps)
{
	ns_bench_row_init(r);
	snprintf(r->model, sizeof(r->model), "%s", model);
	snprintf(r->backend, sizeof(r->backend), "%s", c->cuda ? "CUDA" : "CPU");
	r->size_bytes = size;
	r->n_params = n_params;
	r->mem_budget = c->mem;
	r->ram_budget = c->ram;
	r->vram_budget = c->vram;
	r->block_rows = (uint32_t)c->rows;
	r->lookahead = c->lookahead < 0 ? 0 : (uint32_t)c->lookahead;
	r->disk_bps = disk_bps;
	r->bytes_per_token = 0;
	r->req_bytes_per_token = 0;
	r->stall_ms_per_token = 0;
	r->arena_peak = 0;
	r->cache_hit_rate = 0;
}

/* Running means of the per-repeat streaming figures (finalised by dividing by n_samples). */
static void s_accumulate(struct ns_bench_row *r, double bytes_tok, double req_tok, double stall,
			 double peak, double hit)
{
	r->bytes_per_token += bytes_tok;
	r->req_bytes_per_token += req_tok;
	r->stall_ms_per_token += stall;
	if (peak > r->arena_peak)
		r->arena_peak = peak;
	r->cache_hit_rate += hit;
}

static void s_finish(struct ns_bench_row *r)
{
	if (!r->n_samples) {
		r->bytes_per_token = r->req_bytes_per_token = r->stall_ms_per_token = -1;
		r->arena_peak = r->cache_hit_rate = -1;
		return;
	}
	r->bytes_per_token /= (double)r->n_samples;
	r->req_bytes_per_token /= (double)r->n_samples;
	r->stall_ms_per_token /= (double)r->n_samples;
	r->cache_hit_rate /= (double)r->n_samples;
}

static void s_config_text(const struct s_config *c, char *buf, size_t len)
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

/* The planner's bytes per decoded token under c's budgets (what `nsctl plan` prints), or -1. */
static double s_plan_bytes(const struct ns_model *m, const struct s_config *c)
{
	struct ns_hparams hp;
	struct nsplan_opts po = { .budgets = { .vram = c->vram, .ram = c->ram, .mem = c->mem } };
	struct nsplan *pl = NULL;
	char err[NS_ERR_LEN];
	double b;

	if (ns_hparams_load(m, &hp, err, sizeof(err)) ||
	    nsplan_compute(m, &hp, &po, 1, &pl, err, sizeof(err))) {
		fprintf(stderr, "nsctl bench: no plan prediction: %s\n", err);
		return -1;
	}
	b = pl->predict.bytes_per_token;
	nsplan_destroy(&pl);
	return b;
}

/* One repeat of one configuration: load, warm up, pp, tg. Returns 0 or negative errno (exit 2
 * material when -EINVAL/-ENOSPC). */
static int s_run_one(const struct s_opts *o, const struct s_config *c, const char *pp_text,
		     struct ns_bench_row *pp, struct ns_bench_row *tg, const struct s_ids *forced,
		     double times[3])
{
	struct ns_engine_opts eo;
	struct ns_engine *e = NULL;
	struct ns_gen_params g;
	struct ns_engine_stats st;
	struct s_ids got = { 0 };
	char err[NS_ERR_LEN];
	uint64_t t0;
	int rc;

	ns_engine_opts_default(&eo);
	eo.mem_budget = c->mem;
	eo.ram_budget = c->ram;
	eo.vram_budget = c->vram;
	eo.backend = o->backend ? o->backend : "cpu";
	eo.act_q8 = o->act_q8;
	if (o->run_ahead >= 0)
		eo.run_ahead = o->run_ahead;
	eo.block_rows = c->rows;
	eo.lookahead = c->lookahead;
	eo.threads = o->threads;
	eo.no_plan = o->no_plan;
	if (o->n_ctx)
		eo.n_ctx = o->n_ctx;
	eo.cancel = &s_interrupted;
	t0 = ns_now_ns();
	rc = ns_engine_load(o->model, &eo, &e, err, sizeof(err));
	times[0] = (double)(ns_now_ns() - t0) / 1e9;
	if (rc < 0) {
		fprintf(stderr, "\nnsctl bench: %s\n", err);
		return rc;
	}
	ns_gen_params_default(&g);
	g.temperature = 0;
	g.no_stop = true;
	g.repeat_penalty = 1.0f;
	/* warm-up: one short generation (children's page-ins, kernel dispatch, first reads) */
	g.n_predict = 1;
	t0 = ns_now_ns();
	rc = ns_engine_generate(e, "The", &g, NULL, NULL);
	times[1] = (double)(ns_now_ns() - t0) / 1e9;
	if (rc == 0 && o->n_prompt) {
		g.n_predict = 0;
		rc = ns_engine_generate(e, pp_text, &g, NULL, NULL);
		if (rc == 0) {
			ns_engine_stats(e, &st);
			times[2] = st.prefill_s;
			if (st.prefill_tok_s > 0 && pp->n_samples < NS_BENCH_MAX_SAMPLES) {
				double dev = st.n_prompt ? (double)st.dev_prefill / st.n_prompt : 0;
				pp->ts[pp->n_samples++] = st.prefill_tok_s;
				double req = st.n_prompt ? (double)st.req_prefill / st.n_prompt
							 : 0;

				s_accumulate(pp, dev, req, st.stall_ms_per_token,
					     (double)st.arena_peak, st.cache_hit_rate);
			}
		}
	}
	if (rc == 0 && o->n_gen) {
		got.n_want = o->n_gen;
		got.t0 = ns_now_ns();
		/* forced->ids: one prompt token, then the n_gen tokens to decode */
		rc = ns_engine_decode_forced(e, forced->ids, 1, forced->ids + 1, o->n_gen, NULL,
					     s_collect, &got);
		if (rc == 0 && (got.n != o->n_gen ||
				memcmp(got.ids, forced->ids + 1, got.n * sizeof(*got.ids)))) {
			fprintf(stderr, "\nnsctl bench: decoded %u tokens, not the %u forced ones\n",
				got.n, o->n_gen);
			rc = -EPROTO;
		} else if (rc == 0) {
			ns_engine_stats(e, &st);
			if (st.decode_tok_s > 0 && tg->n_samples < NS_BENCH_MAX_SAMPLES) {
				double b = st.dev_gb_per_token > 0 ? st.dev_gb_per_token
								   : st.gb_per_token;
				tg->ts[tg->n_samples++] = st.decode_tok_s;
				s_accumulate(tg, b * 1e9, (double)st.req_decode / st.n_decode,
					     st.stall_ms_per_token, (double)st.arena_peak,
					     st.cache_hit_rate);
			}
		}
	}
	if (rc < 0 && rc != -EPROTO)
		fprintf(stderr, "\nnsctl bench: %s\n", s_interrupted ? "interrupted"
								   : ns_engine_error(e));
	free(got.ids);
	ns_engine_free(&e);
	return rc;
}

/* passes timed passes of the drive into d (nothing when it failed once already). */
static void s_measure_disk(const struct s_opts *o, const struct ns_model *m, uint32_t passes,
			  bool quiet, struct s_disk *disk)
{
	struct ns_diskbw_opts d;
	struct ns_diskbw_result r;
	const struct ns_gguf *big = s_largest_shard(m);
	char err[NS_ERR_LEN];

	if (o->no_disk || disk->failed)
		return;
	ns_diskbw_opts_default(&d);
	d.block_bytes = S_NSIO_READ_BYTES;
	d.queue_depth = S_NSIO_QUEUE_DEPTH;
	d.repeats = passes;
	d.pattern = NS_DISKBW_SEQ;
	if (!quiet)
		fprintf(stderr, "nsctl bench: measuring the drive: O_DIRECT reads of %" PRIu64
			" bytes, queue depth %u, on %s ...", d.block_bytes, d.queue_depth, big->path);
	if (ns_diskbw_measure(big->path, &d, &r, err, sizeof(err))) {
		fprintf(stderr, "\nnsctl bench: drive measurement failed (%s); no roofline\n", err);
		disk->failed = true;
		return;
	}
	for (uint32_t i = 0; i < r.repeats && disk->n < S_MAX_DISK_PASSES; i++)
		disk->bps[disk->n++] = r.pass_bps[i];
	if (!quiet)
		fprintf(stderr, " %.3f GB/s (median of %u passes of %.2f GB; min %.3f, max %.3f)\n",
			r.median_bps / 1e9, r.repeats, (double)r.pass_bytes / 1e9, r.min_bps / 1e9,
			r.max_bps / 1e9);
}

int cmd_bench(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = s_on_signal };
	struct s_opts o;
	struct s_config cfg[S_MAX_CONFIGS];
	struct ns_bench_row *pp = NULL, *tg = NULL, *out = NULL;
	struct ns_model *m = NULL;
	struct s_ids forced = { 0 };
	struct ns_engine *probe = NULL;
	struct ns_engine_opts eo;
	struct s_disk *disk = NULL;
	char err[NS_ERR_LEN], name[96], *pp_text = NULL;
	uint64_t n_params = 0;
	uint32_t pp_tokens = 0;
	double disk_bps = -1;
	size_t nc = 0, nrow = 0;
	int rc = 0, exit_code = 0;

	if (s_parse(&o, argc, argv))
		return 2;
	if (!o.budgets.n && !o.ram.n) { /* as nsctl run: what nsctl plan would choose */
		uint64_t mem = 0, ram = 0;
		char line[320];

		if ((rc = nsctl_pick_budgets("nsctl bench", o.model, o.n_ctx, 1, false, &mem, false,
					     &ram, line, sizeof(line))))
			return rc;
		fprintf(stderr, "%s\n", line);
		o.budgets = (struct s_list){ .v = { mem }, .n = 1 };
		o.ram = (struct s_list){ .v = { ram }, .n = 1 };
	}
	if (s_configs(&o, cfg, &nc))
		return 2;
	if ((rc = ns_model_open(o.model, &m, err, sizeof(err)))) {
		fprintf(stderr, "nsctl bench: %s\n", err);
		return rc == -EINVAL ? 2 : 1;
	}
	/* each configuration's budgets checked as nsctl run checks named ones, before anything
	 * starts: the arena's least and what memory holds (nsctl_check_budgets), the cuda pass's
	 * fixed set within each VRAM budget */
	{
		uint64_t mems[S_MAX_CONFIGS], rams[S_MAX_CONFIGS];

		for (size_t i = 0; i < nc; i++) {
			mems[i] = cfg[i].mem;
			rams[i] = cfg[i].ram;
		}
		rc = nsctl_check_budgets("nsctl bench", o.model, mems, rams, nc);
		for (size_t i = 0; i < o.vram.n && cfg[0].cuda && !rc; i++)
			if (o.vram.v[i])
				rc = nsctl_check_vram("nsctl bench", o.model, o.n_ctx, o.vram.v[i], 0);
		if (rc) {
			exit_code = rc;
			goto done;
		}
	}
	for (uint64_t i = 0; i < m->n_tensors; i++)
		n_params += m->tensors[i].n_elems;
	s_model_name(m, n_params, name, sizeof(name));
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	pp = calloc(nc, sizeof(*pp));
	tg = calloc(nc, sizeof(*tg));
	out = calloc(2 * nc, sizeof(*out));
	disk = calloc(1, sizeof(*disk));
	if (!pp || !tg || !out || !disk) {
		fprintf(stderr, "nsctl bench: out of memory\n");
		exit_code = 1;
		goto done;
	}
	for (size_t i = 0; i < nc; i++) {
		s_fill_budgets(&pp[i], &cfg[i], name, m->total_tensor_bytes, n_params, -1);
		s_fill_budgets(&tg[i], &cfg[i], name, m->total_tensor_bytes, n_params, -1);
		pp[i].n_prompt = o.n_prompt;
		tg[i].n_gen = o.n_gen;
		tg[i].plan_bytes_per_token = s_plan_bytes(m, &cfg[i]);
	}
	/* the pp prompt and the tg tokens, cut with the model's tokenizer (first configuration's
	 * engine) */
	if (o.n_prompt || o.n_gen) {
		ns_engine_opts_default(&eo);
		eo.mem_budget = cfg[0].mem;
		eo.block_rows = cfg[0].rows;
		eo.lookahead = cfg[0].lookahead;
		eo.no_plan = true;
		eo.cancel = &s_interrupted;
		rc = ns_engine_load(o.model, &eo, &probe, err, sizeof(err));
		if (rc == 0 && o.n_prompt)
			rc = s_prompt(probe, o.n_prompt, &pp_text, &pp_tokens);
		else if (rc < 0)
			fprintf(stderr, "nsctl bench: %s\n", err);
		if (rc == 0 && o.n_gen)
			rc = s_forced(probe, o.n_gen + 1, &forced);
		ns_engine_free(&probe);
		if (rc < 0) {
			exit_code = rc == -EINVAL || rc == -ENOSPC ? 2 : 1;
			goto done;
		}
		if (o.n_prompt && pp_tokens != o.n_prompt)
			fprintf(stderr, "nsctl bench: the pp prompt has %u tokens (of %u asked)\n",
				pp_tokens, o.n_prompt);
	}
	s_measure_disk(&o, m, o.disk_repeats, false, disk);
	for (uint32_t r = 0; r < o.repeats && !s_interrupted; r++) {
		for (size_t k = 0; k < nc && !s_interrupted; k++) {
			size_t i = r % 2 ? nc - 1 - k : k; /* alternate the sweep order */
			double times[3] = { 0 };
			char what[160];

			s_config_text(&cfg[i], what, sizeof(what));
			fprintf(stderr, "\rnsctl bench: repeat %u/%u, configuration %zu/%zu (%s) ...",
				r + 1, o.repeats, k + 1, nc, what);
			rc = s_run_one(&o, &cfg[i], pp_text, &pp[i], &tg[i], &forced, times);
			if (rc < 0) {
				exit_code = s_interrupted ? 130 : rc == -EINVAL || rc == -ENOSPC ? 2 : 1;
				goto done;
			}
			fprintf(stderr, "\rnsctl bench: repeat %u/%u, configuration %zu/%zu (%s): load "
				"%.2f s, warm-up %.2f s, prefill %.2f s", r + 1, o.repeats, k + 1, nc,
				what, times[0], times[1], times[2]);
			if (tg[i].n_samples)
				fprintf(stderr, ", tg %.2f t/s", tg[i].ts[tg[i].n_samples - 1]);
			fputc('\n', stderr);
			/* one pass of the drive between configurations: the limit is sampled
			 * across the run, not only at its ends */
			s_measure_disk(&o, m, 1, true, disk);
		}
	}
	if (s_interrupted) {
		exit_code = 130;
		goto done;
	}
	s_measure_disk(&o, m, o.disk_repeats, false, disk);
	if (disk->n && !disk->failed && ns_stats_median(disk->bps, disk->n, &disk_bps) == 0) {
		double mean, sd;

		ns_stats_mean_sd(disk->bps, disk->n, &mean, &sd);
		fprintf(stderr, "nsctl bench: roofline bandwidth %.3f GB/s: median of %zu drive passes "
			"over the run (mean %.3f ± %.3f)\n", disk_bps / 1e9, disk->n, mean / 1e9,
			sd / 1e9);
		for (size_t i = 0; i < nc; i++)
			pp[i].disk_bps = tg[i].disk_bps = disk_bps;
	}
	for (size_t i = 0; i < nc; i++) {
		if (o.n_prompt) {
			s_finish(&pp[i]);
			out[nrow++] = pp[i];
		}
		if (o.n_gen) {
			s_finish(&tg[i]);
			out[nrow++] = tg[i];
		}
	}
	if (o.n_gen && disk_bps > 0)
		s_moe_random_limit(&o, m, tg, nc);
	if (ns_table_print(stdout, o.fmt, out, nrow) < 0) {
		fprintf(stderr, "nsctl bench: cannot write the table\n");
		exit_code = 1;
	}
done:
	free(pp_text);
	free(disk);
	free(forced.ids);
	free(pp);
	free(tg);
	free(out);
	ns_model_close(&m);
	return exit_code;
}
