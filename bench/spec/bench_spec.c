/* bench_spec - speculative streaming (issue 26): decode speed and bytes read per generated
 * token with a controlled drafter, against the one-token decode and the drive's roofline
 * measured in the same run.
 *
 *   bench_spec MODEL [--mem-budget 256MB] [--ram-budget 0] [--block-rows N] [-n 64] [-r 3]
 *              [--alphas 0.5,0.7,0.8,0.9] [--draft-max 8] [--draft-min 1] [--no-disk]
 *              [--draft DRAFT.gguf]
 *
 * A first greedy pass gives the target's tokens; for each alpha the test-only oracle drafter
 * (NS_GEN_DRAFT_ORACLE, neurostream.h) proposes those tokens, each replaced by another at rate
 * 1 - alpha (fixed seed), so a draft agrees with the target at rate alpha. Every drafted run
 * must give the first pass's tokens (greedy), else the bench fails. --draft: one more row, a
 * real drafter: DRAFT.gguf (same vocabulary) resident in nscompute (NS_GEN_DRAFT_MODEL); its
 * agreement is whatever that model's greedy continuation gives. Medians over -r repeats,
 * the configurations interleaved. The roofline: the drive's O_DIRECT read bandwidth on the
 * model file (bench/diskbw.h) / the one-token decode's bytes read per token. Prints a
 * markdown table; "GB read / token" is what nsio read from the device per generated token.
 * Exit 0, 1 on a failure (a different token, a load that fails). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diskbw.h"
#include "neurostream.h"
#include "ns_util.h"
#include "stats.h"

#define S_MAX_ALPHA 8
#define S_MAX_REP 16

struct s_ids {
	int32_t *v;
	uint32_t n, cap;
};

static int s_tok(const char *piece, size_t len, int32_t id, void *user)
{
	struct s_ids *o = user;

	(void)piece;
	(void)len;
	if (id >= 0 && o->n < o->cap)
		o->v[o->n++] = id;
	return 0;
}

struct s_opts {
	const char *model, *draft; /* draft: a draft model's row (NULL: none) */
	uint64_t mem, ram, rows;
	uint32_t n, reps, n_alpha, dmax, dmin;
	double alpha[S_MAX_ALPHA];
	bool no_disk;
};

static int s_parse(struct s_opts *o, int argc, char **argv)
{
	o->mem = 256ull << 20;
	o->n = 64;
	o->reps = 3;
	o->dmax = 8;
	o->dmin = 1;
	o->n_alpha = 4;
	o->alpha[0] = 0.5;
	o->alpha[1] = 0.7;
	o->alpha[2] = 0.8;
	o->alpha[3] = 0.9;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--no-disk")) {
			o->no_disk = true;
			continue;
		}
		if (a[0] != '-') {
			o->model = a;
			continue;
		}
		if (!v)
			return fprintf(stderr, "bench_spec: %s needs a value\n", a), -EINVAL;
		i++;
		if (!strcmp(a, "--mem-budget") || !strcmp(a, "--ram-budget")) {
			if (ns_parse_bytes(v, a[2] == 'm' ? &o->mem : &o->ram))
				return fprintf(stderr, "bench_spec: %s %s: a size\n", a, v), -EINVAL;
		} else if (!strcmp(a, "--draft")) {
			o->draft = v;
		} else if (!strcmp(a, "--block-rows")) {
			o->rows = strtoull(v, NULL, 10);
		} else if (!strcmp(a, "-n")) {
			o->n = (uint32_t)strtoul(v, NULL, 10);
		} else if (!strcmp(a, "-r")) {
			o->reps = (uint32_t)strtoul(v, NULL, 10);
		} else if (!strcmp(a, "--draft-max")) {
			o->dmax = (uint32_t)strtoul(v, NULL, 10);
		} else if (!strcmp(a, "--draft-min")) {
			o->dmin = (uint32_t)strtoul(v, NULL, 10);
		} else if (!strcmp(a, "--alphas")) {
			char *end = (char *)v;

			o->n_alpha = 0;
			while (*end && o->n_alpha < S_MAX_ALPHA) {
				o->alpha[o->n_alpha] = strtod(end, &end);
				if (o->alpha[o->n_alpha] < 0 || o->alpha[o->n_alpha] > 1)
					return fprintf(stderr, "bench_spec: alphas in [0, 1]\n"), -EINVAL;
				o->n_alpha++;
				end += *end == ',';
			}
		} else {
			return fprintf(stderr, "bench_spec: unknown option or bad value: %s %s\n", a,
				       v), -EINVAL;
		}
	}
	if (!o->model || !o->n || o->n > 4096 || !o->reps || o->reps > S_MAX_REP || !o->n_alpha)
		return fprintf(stderr, "bench_spec: MODEL, -n 1..4096, -r 1..%d, one alpha at "
			       "least\n", S_MAX_REP), -EINVAL;
	return 0;
}

/* splitmix64 */
static uint64_t s_rng(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct s_row {
	double tok_s[S_MAX_REP], gb[S_MAX_REP], acc[S_MAX_REP], ppt[S_MAX_REP];
};

static const char *s_prompt = "The quick brown fox jumps over the lazy dog. A journey of a "
			      "thousand miles begins with a single step.";

/* One generation; its figures into row[rep]. 0, or -1 when it failed or its tokens differ
 * from want (NULL: none to compare with). */
static int s_run(struct ns_engine *e, const struct ns_gen_params *g, struct s_ids *out,
		 const struct s_ids *want, struct s_row *row, uint32_t rep)
{
	struct ns_engine_stats st;

	out->n = 0;
	if (ns_engine_generate(e, s_prompt, g, s_tok, out) < 0) {
		fprintf(stderr, "bench_spec: %s\n", ns_engine_error(e));
		return -1;
	}
	if (want && (out->n != want->n || memcmp(out->v, want->v, want->n * sizeof(int32_t)))) {
		fprintf(stderr, "bench_spec: a drafted run's tokens differ from the one-token "
			"decode's\n");
		return -1;
	}
	ns_engine_stats(e, &st);
	row->tok_s[rep] = st.decode_tok_s;
	row->gb[rep] = st.dev_gb_per_token; /* read from the drive */
	row->acc[rep] = st.accept_rate;
	row->ppt[rep] = st.draft ? st.passes_per_token : 1.0;
	return 0;
}

static double s_med(const double *x, uint32_t n)
{
	double m = 0;

	ns_stats_median(x, n, &m);
	return m;
}

int main(int argc, char **argv)
{
	static struct s_row rows[2 + S_MAX_ALPHA]; /* one-token, alphas, the draft model */
	struct s_opts o = { 0 };
	struct ns_engine_opts eo;
	struct ns_engine *e = NULL;
	struct ns_gen_params g;
	struct s_ids base = { 0 }, out = { 0 };
	int32_t *oracle[S_MAX_ALPHA] = { 0 };
	struct ns_diskbw_result bw = { 0 };
	double one_tok_s, one_gb, roof = 0;
	char err[512];
	int rc = 1;

	if (s_parse(&o, argc, argv) < 0)
		return 2;
	if (!o.no_disk) {
		struct ns_diskbw_opts d;

		ns_diskbw_opts_default(&d);
		if (ns_diskbw_measure(o.model, &d, &bw, err, sizeof(err)) < 0) {
			fprintf(stderr, "bench_spec: drive bandwidth: %s\n", err);
			return 1;
		}
	}
	ns_engine_opts_default(&eo);
	eo.mem_budget = o.mem;
	eo.ram_budget = o.ram;
	eo.block_rows = o.rows;
	eo.n_ctx = 512 + o.n;
	eo.draft_model = o.draft;
	base.cap = out.cap = o.n;
	base.v = calloc(o.n, sizeof(int32_t));
	out.v = calloc(o.n, sizeof(int32_t));
	for (uint32_t a = 0; a < o.n_alpha; a++)
		if (!(oracle[a] = calloc(o.n, sizeof(int32_t))))
			goto out;
	if (!base.v || !out.v)
		goto out;
	if (ns_engine_load(o.model, &eo, &e, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench_spec: %s\n", err);
		goto out;
	}
	ns_gen_params_default(&g);
	g.temperature = 0;
	g.n_predict = (int32_t)o.n;
	g.no_stop = true;
	if (s_run(e, &g, &base, NULL, &rows[0], 0) < 0) /* the target's tokens (and a warm-up) */
		goto out;
	for (uint32_t a = 0; a < o.n_alpha; a++) {
		uint64_t x = 0x5eed + a;

		for (uint32_t i = 0; i < base.n; i++)
			oracle[a][i] = s_rng(&x) % 1000000 < o.alpha[a] * 1e6 ? base.v[i] :
				       (int32_t)((base.v[i] + 1 + s_rng(&x) % (ns_engine_n_vocab(e) - 1)) %
						 ns_engine_n_vocab(e));
	}
	for (uint32_t r = 0; r < o.reps; r++) {
		struct ns_gen_params d = g;

		if (s_run(e, &g, &out, &base, &rows[0], r) < 0)
			goto out;
		d.draft = NS_GEN_DRAFT_ORACLE;
		d.draft_max = o.dmax;
		d.draft_min = o.dmin;
		d.n_draft_oracle = base.n;
		for (uint32_t a = 0; a < o.n_alpha; a++) {
			d.draft_oracle = oracle[a];
			if (s_run(e, &d, &out, &base, &rows[1 + a], r) < 0)
				goto out;
		}
		d.draft = NS_GEN_DRAFT_MODEL;
		d.draft_oracle = NULL;
		d.n_draft_oracle = 0;
		if (o.draft && s_run(e, &d, &out, &base, &rows[1 + o.n_alpha], r) < 0)
			goto out;
	}
	one_tok_s = s_med(rows[0].tok_s, o.reps);
	one_gb = s_med(rows[0].gb, o.reps);
	if (!o.no_disk && one_gb > 0)
		roof = bw.median_bps / (one_gb * 1e9);
	printf("model %s, --mem-budget %llu MiB --ram-budget %llu MiB, -n %u, %u repeats, "
	       "draft %u..%u%s%s\n", o.model, (unsigned long long)(o.mem >> 20),
	       (unsigned long long)(o.ram >> 20), o.n, o.reps, o.dmin, o.dmax,
	       o.draft ? ", draft model " : "", o.draft ? o.draft : "");
	if (!o.no_disk)
		printf("drive: %.2f GB/s O_DIRECT on the model file; one-token roofline %.2f tok/s\n",
		       bw.median_bps / 1e9, roof);
	printf("\n| decode | agreement | tok/s | GB read / token | accepted | passes / token | "
	       "x one-token | x roofline |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
	for (uint32_t a = 0; a <= o.n_alpha + (o.draft != NULL); a++) {
		double t = s_med(rows[a].tok_s, o.reps);
		char x_roof[32] = "n/a";

		if (roof > 0)
			snprintf(x_roof, sizeof(x_roof), "%.2f", t / roof);
		if (a == 0)
			printf("| one-token | - ");
		else if (a > o.n_alpha)
			printf("| draft model | - ");
		else
			printf("| drafted | %.2f ", o.alpha[a - 1]);
		printf("| %.2f | %.4f | %.2f | %.3f | %.2f | %s |\n", t, s_med(rows[a].gb, o.reps),
		       a ? s_med(rows[a].acc, o.reps) : 0.0, s_med(rows[a].ppt, o.reps),
		       one_tok_s > 0 ? t / one_tok_s : 0, x_roof);
	}
	printf("\nevery drafted run gave the one-token decode's %u tokens\n", base.n);
	rc = 0;
out:
	ns_engine_free(&e);
	for (uint32_t a = 0; a < o.n_alpha; a++)
		free(oracle[a]);
	free(base.v);
	free(out.v);
	return rc;
}
