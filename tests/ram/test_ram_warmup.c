/* test_ram_warmup: `nsctl run --warmup` pins the experts the warm-up routes to most
 * (issue 7, expert cache), checked against an independent in-process reference forward pass.
 *
 *   test_ram_warmup NSCTL MODEL MEM_BUDGET RAM_BUDGET   (MODEL relative to the oracle dir)
 *
 * 1. Hit counters count exactly: the hits nsctl hands nsplan (FILE.plan) equal, per (layer,
 *    expert), the selections of a reference forward pass (fused provider, in process) over
 *    the warm-up's tokens; every layer's hits sum to tokens x n_used.
 * 2. The plan pins the most-hit experts: the plan nsplan publishes from those hits (recomputed
 *    here with nsplan_update from the reference counts) holds the hottest expert whole, and
 *    within any expert tensor no expert left out of RAM was hit more often than one held.
 * 3. Decoded tokens are identical with and without --warmup (and equal the reference's greedy
 *    continuation).
 * 4. Bytes requested while decoding drop by exactly the bytes of pinned expert rows the
 *    decoded tokens were routed to: req(no warmup) - req(warmup) = sum over decode steps,
 *    layers and the experts each step chose of (rows on disk in plan 1 - in plan 2) x row
 *    bytes, with the routing from the reference decode.
 * Exit 0 pass, 1 fail, 77 skip. */
#include "../run/run_testlib.h"
#include "forward.h"
#include "hparams.h"
#include "model.h"
#include "ns_util.h"
#include "plan.h"
#include "plan_stats.h"
#include "summary.h"
#include "weights_fused.h"

/* The warm-up: the prompt and the start of the (synthetic) model's greedy continuation, so
 * the experts it routes to most are ones the decode uses too (the drop is then positive; the
 * check is exact either way). */
#define S_WARMUP "Once upon a time, once upon a time: bIT b may do exicenser."
#define S_PROMPT "Once upon a time"
#define S_N_GEN 24
#define S_MAX_TOK 512
#define S_MAX_LAYER 16
#define S_MAX_EXPERT 64

struct s_route {
	uint64_t hits[S_MAX_LAYER][S_MAX_EXPERT];
	uint32_t n_layer, n_expert;
};

static int s_on_route(void *user, const struct ns_fwd_route *r)
{
	struct s_route *c = user;

	if (r->layer >= S_MAX_LAYER || r->n_expert > S_MAX_EXPERT)
		return -ERANGE;
	for (uint32_t t = 0; t < r->n_tok; t++)
		for (uint32_t k = 0; k < r->n_used; k++)
			c->hits[r->layer][r->experts[t * r->n_used + k]]++;
	return 0;
}

/* ids of text as `nsctl tokenize --ids` gives them (the engine's tokenization of -p). */
static uint32_t s_tokenize(const char *nsctl, const char *model, const char *text,
			   const char *out, const char *errf, int32_t *ids)
{
	char *a[] = { (char *)nsctl, "tokenize", (char *)model, "--ids", "--", (char *)text,
		      NULL };
	int rc = rt_run(a, out, errf);
	size_t len;
	char *s = ns_test_read_file(out, &len), *p;
	uint32_t n = 0;

	RT_CHECK(rc == 0 && s && s[0] == '[', "nsctl tokenize: exit %d", rc);
	for (p = s + 1; *p && *p != ']' && n < S_MAX_TOK;) {
		ids[n++] = (int32_t)strtol(p, &p, 10);
		while (*p == ',' || *p == ' ')
			p++;
	}
	free(s);
	return n;
}

static unsigned long long s_after(const char *text, const char *key)
{
	const char *p = text ? strstr(text, key) : NULL;
	unsigned long long v = 0;

	RT_CHECK(p && sscanf(p + strlen(key), "%llu", &v) == 1, "no \"%s\" in: %s", key,
		 text ? text : "(nothing)");
	return v;
}

struct s_run {
	char *text, *err;
	unsigned long long req_decode, n_decode;
};

static void s_nsctl_run(const char *nsctl, const char *model, char **argv_extra,
			const char *out, const char *errf, struct s_run *r)
{
	char *a[40] = { (char *)nsctl, "run", (char *)model, "-p", S_PROMPT, "-n", "24",
			"--temp", "0", "--ignore-eos", "-c", "256", "--json", NULL };
	size_t n = 13, len;
	const char *js;
	int rc;

	for (size_t i = 0; argv_extra[i]; i++)
		a[n++] = argv_extra[i];
	a[n] = NULL;
	rc = rt_run(a, out, errf);
	r->text = ns_test_read_file(out, &len);
	r->err = ns_test_read_file(errf, &len);
	rt_json_split(&r->text, &r->err); /* the --json object from stdout */
	RT_CHECK(rc == 0 && r->text && r->err, "nsctl run: exit %d: %s", rc,
		 r->err ? r->err : "");
	js = strstr(r->err, "{\"session\"");
	RT_CHECK(js, "no JSON summary in: %s", r->err);
	r->req_decode = s_after(js, "\"bytes_requested_decode\":");
	r->n_decode = s_after(js, "\"n_decode\":");
}

/* s with each byte that does not start a valid UTF-8 sequence (RFC 3629: no overlong form,
 * surrogate or code point past U+10FFFF) replaced by U+FFFD, as JSON text must be; s freed. */
static char *s_lossy(char *s)
{
	size_t n = s ? strlen(s) : 0, o = 0;
	unsigned char *p = (unsigned char *)s;
	char *out = s ? malloc(n * 3 + 1) : NULL;

	for (size_t k = 0; out && k < n;) {
		size_t l = p[k] < 0x80 ? 1 : p[k] < 0xc2 ? 0 : p[k] < 0xe0 ? 2 : p[k] < 0xf0 ? 3 :
			   p[k] < 0xf5 ? 4 : 0;

		for (size_t i = 1; l && i < l; i++)
			if (k + i >= n || (p[k + i] & 0xc0) != 0x80)
				l = 0;
		if (l == 3 && ((p[k] == 0xe0 && p[k + 1] < 0xa0) || (p[k] == 0xed && p[k + 1] >= 0xa0)))
			l = 0;
		if (l == 4 && ((p[k] == 0xf0 && p[k + 1] < 0x90) || (p[k] == 0xf4 && p[k + 1] >= 0x90)))
			l = 0;
		memcpy(out + o, l ? s + k : "\xef\xbf\xbd", l ? l : 3);
		o += l ? l : 3;
		k += l ? l : 1;
	}
	if (out)
		out[o] = 0;
	free(s);
	return out;
}

/* Rows of rows [r0, r1) of tensor t that plan p leaves on disk (not in RAM). */
static uint64_t s_disk_rows(const struct nsplan *p, uint32_t t, uint64_t r0, uint64_t r1)
{
	uint64_t disk = r1 - r0;

	for (uint64_t i = 0; i < p->hdr.n_entries; i++) {
		const struct nsplan_entry *e = &p->entries[i];
		uint64_t a = e->row_begin > r0 ? e->row_begin : r0;
		uint64_t b = e->row_end < r1 ? e->row_end : r1;

		if (e->tensor == t && e->tier == NSPLAN_RAM && a < b)
			disk -= b - a;
	}
	return disk;
}

int main(int argc, char **argv)
{
	char nsctl_buf[PATH_MAX], model[PATH_MAX];
	char *out, *errf, *stats, *plan_file;
	char err[NS_ERR_LEN], ids_text[8192] = "";
	const char *nsctl = rt_nsctl(argc, argv, nsctl_buf, sizeof(nsctl_buf));
	static int32_t wids[S_MAX_TOK], pids[S_MAX_TOK], gen[S_N_GEN + 1];
	static struct s_route ref_warm, ref_dec;
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	struct ns_weights *w = NULL;
	struct ns_fwd *f = NULL;
	struct ns_fwd_opts fo = { .n_ctx = 1024, .on_route = s_on_route };
	struct nsplan_opts po = { 0 };
	struct nsplan_stats st = { 0 };
	struct nsplan *p1 = NULL, *p2 = NULL;
	struct nsplan_diff *diff = NULL;
	struct s_run r0, r1;
	uint32_t nw, np, n_vocab;
	uint64_t ram, expect_drop = 0;
	float *logits;

	RT_CHECK(argc == 5, "usage: test_ram_warmup NSCTL MODEL MEM_BUDGET RAM_BUDGET");
	ns_test_require_oracle();
	ns_test_oracle_path(model, sizeof(model), argv[2]);
	RT_CHECK(ns_parse_bytes(argv[4], &ram) == 0, "RAM budget '%s'", argv[4]);
	atexit(ns_test_scratch_remove);
	out = ns_test_scratch("ns_ram_warm", "out");
	errf = ns_test_scratch("ns_ram_warm", "err");
	stats = ns_test_scratch("ns_ram_warm", "hits");
	plan_file = ns_test_scratch("ns_ram_warm", "hits.plan");
	RT_CHECK(ns_model_open(model, &m, err, sizeof(err)) == 0 &&
		 ns_hparams_load(m, &hp, err, sizeof(err)) == 0, "%s", err);
	RT_CHECK(hp.n_expert && hp.n_layer <= S_MAX_LAYER && hp.n_expert <= S_MAX_EXPERT,
		 "want a small MoE model");

	/* reference: the warm-up's routing, then the greedy run's decode routing */
	nw = s_tokenize(nsctl, model, S_WARMUP, out, errf, wids);
	np = s_tokenize(nsctl, model, S_PROMPT, out, errf, pids);
	RT_CHECK(ns_weights_fused_new(m, NULL, &w, err, sizeof(err)) == 0, "fused: %s", err);
	fo.route_user = &ref_warm;
	RT_CHECK(ns_fwd_new(m, w, &fo, &f, err, sizeof(err)) == 0, "ns_fwd_new: %s", err);
	n_vocab = ns_fwd_n_vocab(f);
	logits = malloc((size_t)n_vocab * sizeof(float));
	RT_CHECK(logits && ns_fwd_eval(f, wids, nw, NULL, false) == 0, "warm-up eval: %s",
		 ns_fwd_error(f));
	ns_fwd_destroy(&f);
	fo.route_user = &ref_dec;
	RT_CHECK(ns_fwd_new(m, w, &fo, &f, err, sizeof(err)) == 0, "ns_fwd_new: %s", err);
	RT_CHECK(ns_fwd_eval(f, pids, np, logits, false) == 0, "prompt eval: %s",
		 ns_fwd_error(f));
	memset(&ref_dec, 0, sizeof(ref_dec)); /* only decode steps count below */
	for (int i = 0; i < S_N_GEN; i++) {
		int32_t best = 0;

		for (uint32_t v = 1; v < n_vocab; v++)
			if (logits[v] > logits[best])
				best = (int32_t)v;
		gen[i] = best;
		snprintf(ids_text + strlen(ids_text), sizeof(ids_text) - strlen(ids_text), "%s%d",
			 i ? "," : "", best);
		if (i + 1 < S_N_GEN) /* the last token is generated, never evaluated */
			RT_CHECK(ns_fwd_eval(f, &gen[i], 1, logits, false) == 0, "decode: %s",
				 ns_fwd_error(f));
	}
	ns_fwd_destroy(&f);
	ns_weights_destroy(&w);
	free(logits);

	/* the pipeline without and with --warmup */
	{
		char *x0[] = { "--mem-budget", argv[3], "--ram-budget", argv[4], NULL };
		char *x1[] = { "--mem-budget", argv[3], "--ram-budget", argv[4], "--warmup",
			       S_WARMUP, "--expert-stats", stats, "--verbose", NULL };

		s_nsctl_run(nsctl, model, x0, out, errf, &r0);
		s_nsctl_run(nsctl, model, x1, out, errf, &r1);
	}
	printf("warm-up: %u tokens; prompt %u tokens; %llu decode steps\n", nw, np, r0.n_decode);
	RT_CHECK(strstr(r1.err, "nsctl run: warmup: ") &&
		 s_after(strstr(r1.err, "nsctl run: warmup: "), "warmup: ") == nw,
		 "the run's warm-up is not %u tokens: %s", nw, r1.err);
	RT_CHECK(strstr(r1.err, "nsio: RAM tier: plan generation 2:"),
		 "nsio never loaded plan generation 2:\n%s", r1.err);
	RT_CHECK(strcmp(r0.text, r1.text) == 0, "text differs with --warmup:\n%s\nwithout:\n%s",
		 r1.text, r0.text);
	RT_CHECK(r0.n_decode == S_N_GEN - 1 && r1.n_decode == r0.n_decode, "decode steps %llu/%llu",
		 r0.n_decode, r1.n_decode);
	{ /* 3: the reference's greedy continuation is the run's text */
		char *a[] = { (char *)nsctl, "detokenize", model, "--hide-special", ids_text,
			      NULL };
		size_t len;
		char *t;

		RT_CHECK(rt_run(a, out, errf) == 0 && (t = ns_test_read_file(out, &len)),
			 "nsctl detokenize");
		t = s_lossy(t); /* --json's "content" holds U+FFFD for bytes that are not UTF-8 */
		RT_CHECK(t && strncmp(t, r0.text, strlen(r0.text) - 1) == 0,
			 "the reference's greedy text differs:\n%s\nrun:\n%s", t, r0.text);
		free(t);
	}

	/* 1: exact counts */
	RT_CHECK(nsplan_stats_load(plan_file, hp.n_layer, hp.n_expert, &st, err, sizeof(err)) == 0,
		 "%s", err);
	for (uint32_t l = 0; l < hp.n_layer; l++) {
		uint64_t sum = 0;

		RT_CHECK(st.tokens[l] == nw, "layer %u: %llu tokens counted, the warm-up has %u", l,
			 (unsigned long long)st.tokens[l], nw);
		for (uint32_t e = 0; e < hp.n_expert; e++) {
			RT_CHECK(st.hits[l * hp.n_expert + e] == ref_warm.hits[l][e],
				 "layer %u expert %u: %llu hits counted, the reference routed %llu", l,
				 e, (unsigned long long)st.hits[l * hp.n_expert + e],
				 (unsigned long long)ref_warm.hits[l][e]);
			sum += st.hits[l * hp.n_expert + e];
		}
		RT_CHECK(sum == (uint64_t)nw * hp.n_expert_used, "layer %u: %llu hits, want %u x %u",
			 l, (unsigned long long)sum, nw, hp.n_expert_used);
	}
	printf("hit counters: every (layer, expert) equals the reference's routing; each layer "
	       "sums to %u x %u\n", nw, hp.n_expert_used);

	/* 2: the plans, as nsplan makes them (generation 1 uniform, 2 from the counts) */
	po.budgets.ram = ram;
	RT_CHECK(ns_parse_bytes(argv[3], &po.budgets.mem) == 0, "mem budget");
	RT_CHECK(nsplan_compute(m, &hp, &po, 1, &p1, err, sizeof(err)) == 0 &&
		 nsplan_update(p1, m, &hp, &st.hot, &p2, &diff, err, sizeof(err)) == 0, "%s", err);
	{
		uint64_t best = 0, bl = 0, be = 0;

		for (uint32_t l = 0; l < hp.n_layer; l++)
			for (uint32_t e = 0; e < hp.n_expert; e++)
				if (ref_warm.hits[l][e] > best) {
					best = ref_warm.hits[l][e];
					bl = l;
					be = e;
				}
		for (uint32_t t = 0; t < m->n_tensors; t++) {
			const struct ns_model_tensor *mt = &m->tensors[t];
			uint64_t per = mt->n_rows / hp.n_expert, lo_in = UINT64_MAX, hi_out = 0;
			int64_t l = ns_tensor_layer(mt->name);

			if (!ns_tensor_is_expert(mt->name) || l < 0)
				continue;
			if ((uint64_t)l == bl)
				RT_CHECK(s_disk_rows(p2, t, be * per, (be + 1) * per) == 0,
					 "the hottest expert (layer %llu, %llu: %llu hits) is not whole "
					 "in RAM in %s", (unsigned long long)bl,
					 (unsigned long long)be, (unsigned long long)best, mt->name);
			for (uint32_t e = 0; e < hp.n_expert; e++) {
				uint64_t h = ref_warm.hits[l][e];

				if (s_disk_rows(p2, t, e * per, (e + 1) * per) < per)
					lo_in = h < lo_in ? h : lo_in;
				else
					hi_out = h > hi_out ? h : hi_out;
			}
			RT_CHECK(lo_in == UINT64_MAX || hi_out <= lo_in, "%s: an expert hit %llu times "
				 "is left out while one hit %llu times is pinned", mt->name,
				 (unsigned long long)hi_out, (unsigned long long)lo_in);
		}
		printf("plan generation 2: hottest expert (layer %llu, expert %llu, %llu hits) whole "
		       "in RAM; no expert left out is hotter than one pinned; %llu bytes promoted\n",
		       (unsigned long long)bl, (unsigned long long)be, (unsigned long long)best,
		       (unsigned long long)diff->bytes_promoted);
	}

	/* 4: the exact drop of decode bytes */
	for (uint32_t t = 0; t < m->n_tensors; t++) {
		const struct ns_model_tensor *mt = &m->tensors[t];
		uint64_t per = mt->n_rows / hp.n_expert;
		int64_t l = ns_tensor_layer(mt->name);

		if (!ns_tensor_is_expert(mt->name) || l < 0)
			continue;
		for (uint32_t e = 0; e < hp.n_expert; e++) {
			uint64_t d1 = s_disk_rows(p1, t, e * per, (e + 1) * per);
			uint64_t d2 = s_disk_rows(p2, t, e * per, (e + 1) * per);

			expect_drop += ref_dec.hits[l][e] * (d1 - d2) * mt->row_bytes;
		}
	}
	printf("decode bytes requested: %llu without warm-up, %llu with: drop %lld, expected "
	       "%lld from the pinned rows the %llu decode steps were routed to\n", r0.req_decode,
	       r1.req_decode, (long long)(r0.req_decode - r1.req_decode), (long long)expect_drop,
	       r0.n_decode);
	RT_CHECK((int64_t)(r0.req_decode - r1.req_decode) == (int64_t)expect_drop,
		 "decode bytes dropped by %lld, expected %lld", (long long)(r0.req_decode -
		 r1.req_decode), (long long)expect_drop);

	nsplan_diff_destroy(&diff);
	nsplan_destroy(&p1);
	nsplan_destroy(&p2);
	nsplan_stats_free(&st);
	ns_model_close(&m);
	free(r0.text);
	free(r0.err);
	free(r1.text);
	free(r1.err);
	rt_json_used();
	printf("ok\n");
	return 0;
}
