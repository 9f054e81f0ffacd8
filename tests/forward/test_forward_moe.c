/* test_forward_moe - routing reports, expert windows and hit counters of the MoE forward pass.
 *
 * usage: test_forward_moe MODEL PREFIX [--provider ref|fused]
 *   MODEL   MoE model path relative to the oracle dir (qwen3moe, gpt-oss)
 *   PREFIX  PREFIX.json relative to the oracle dir gives the prompt tokens
 *
 * The provider is wrapped so that every matmul window is logged next to the routing
 * callbacks. Checks, for a prefill in one chunk, in chunks of 5 with 100-row expert windows,
 * and for decode steps:
 *   - each layer's routing is reported before any row of its expert tensors is requested;
 *   - the expert rows requested between a layer's report and the next report are exactly the
 *     rows of the reported experts, each row once per tensor (one read per chunk), and every
 *     window lies inside one expert;
 *   - reports are well formed (n_tok = chunk, distinct ids in range, weights sum to 1);
 *   - ns_fwd_expert_hits equals the selections reported, n_tok * n_used per layer and token;
 *   - logits are bit-identical across one chunk, chunks of 5 / windows of 100, token by token;
 *   - a callback error aborts the evaluation before that layer's experts are read;
 *   - a provider failure at any call of init + chunked prefill + decode gives a clean error
 *     (run under ASan: no crash, no leak).
 * Exits 0 pass, 1 fail, 77 skip (no oracle). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "json_ints.h"
#include "ns_test.h"
#include "ns_util.h"
#include "weights.h"
#include "weights_fused.h"

#define MAX_TOK 64
#define MAX_EV 65536
#define MAX_LAYER 64

enum { EV_ROUTE, EV_MATMUL };

struct ev {
	int type;
	uint32_t layer;  /* route: layer; matmul: layer of the expert tensor or UINT32_MAX */
	uint32_t kind;   /* matmul of an expert tensor: 0 gate, 1 up, 2 down */
	uint64_t r0, r1; /* matmul window */
	uint64_t set;    /* route: bit e = expert e chosen by some token */
	uint32_t n_tok;  /* route: tokens; matmul: n_tok */
};

struct rec {
	struct ns_weights *inner;
	const struct ns_model *m;
	uint32_t n_layer, n_expert, n_used, n_embd, n_ff_exp;
	int64_t exp_tensor[MAX_LAYER][3]; /* tensor ids of gate/up/down exps */
	struct ev ev[MAX_EV];
	size_t n_ev;
	bool overflow;
	bool bad_report;
	uint64_t hits[MAX_LAYER][64];      /* selections seen in reports */
	uint32_t abort_layer;              /* callback fails at this layer; UINT32_MAX never */
	long calls;                        /* provider calls so far */
	long fail_at;                      /* call number that fails (1-based); 0 = never */
};

static struct ev *s_push(struct rec *r)
{
	if (r->n_ev == MAX_EV) {
		r->overflow = true;
		return NULL;
	}
	memset(&r->ev[r->n_ev], 0, sizeof(r->ev[0]));
	return &r->ev[r->n_ev++];
}

static int r_matmul(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		    const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	struct rec *r = ctx;
	struct ev *e;

	if (++r->calls == r->fail_at)
		return -EIO;
	e = s_push(r);
	if (e) {
		e->type = EV_MATMUL;
		e->layer = UINT32_MAX;
		for (uint32_t l = 0; l < r->n_layer; l++)
			for (uint32_t k = 0; k < 3; k++)
				if (r->exp_tensor[l][k] == (int64_t)tensor) {
					e->layer = l;
					e->kind = k;
				}
		e->r0 = row0;
		e->r1 = row_end;
		e->n_tok = (uint32_t)n_tok;
	}
	return ns_weights_matmul(r->inner, tensor, row0, row_end, x, n_tok, y, ldy);
}

static int r_get_rows(void *ctx, uint32_t tensor, const int64_t *rows, uint64_t n, float *dst)
{
	struct rec *r = ctx;

	if (++r->calls == r->fail_at)
		return -EIO;
	return ns_weights_get_rows(r->inner, tensor, rows, n, dst);
}

static const char *r_last_error(void *ctx)
{
	struct rec *r = ctx;

	return r->calls == r->fail_at ? "injected fault" : ns_weights_error(r->inner);
}

static void r_destroy(void *ctx)
{
	(void)ctx; /* the wrapper lives on the caller's stack; the inner provider is theirs */
}

static const struct ns_weights_ops r_ops = {
	.name = "recorder",
	.matmul = r_matmul,
	.get_rows = r_get_rows,
	.last_error = r_last_error,
	.destroy = r_destroy,
};

static int r_route(void *user, const struct ns_fwd_route *rt)
{
	struct rec *r = user;
	struct ev *e = s_push(r);

	if (r->n_used == 0) /* learnt from the first report, then held to it */
		r->n_used = rt->n_used;
	if (rt->layer >= r->n_layer || rt->n_used != r->n_used || rt->n_used == 0 ||
	    rt->n_expert != r->n_expert)
		r->bad_report = true;
	for (uint32_t t = 0; t < rt->n_tok && !r->bad_report; t++) {
		double sum = 0.0;

		for (uint32_t s = 0; s < rt->n_used; s++) {
			const int32_t id = rt->experts[t * rt->n_used + s];

			if (id < 0 || (uint32_t)id >= r->n_expert) {
				r->bad_report = true;
				break;
			}
			for (uint32_t s2 = 0; s2 < s; s2++)
				if (rt->experts[t * rt->n_used + s2] == id)
					r->bad_report = true;
			sum += rt->weights[t * rt->n_used + s];
			r->hits[rt->layer][id]++;
			if (e)
				e->set |= 1ull << id;
		}
		if (fabs(sum - 1.0) > 1e-5)
			r->bad_report = true;
	}
	if (e) {
		e->type = EV_ROUTE;
		e->layer = rt->layer;
		e->n_tok = rt->n_tok;
	}
	return rt->layer == r->abort_layer ? -ECANCELED : 0;
}

/* Walk the log: every expert matmul sits in the span after its layer's report and covers
 * the reported experts' rows exactly once. Returns the number of violations. */
static int s_check_log(const struct rec *r, uint32_t want_n_tok_sum, const char *what)
{
	const uint64_t rows_per[3] = { r->n_ff_exp, r->n_ff_exp, r->n_embd };
	uint64_t max_rows = r->n_ff_exp > r->n_embd ? r->n_ff_exp : r->n_embd;
	uint8_t *cov = calloc(3 * (size_t)r->n_expert * max_rows, 1);
	int bad = 0;
	size_t i = 0;
	uint32_t n_tok_sum = 0, n_routes = 0;

	if (!cov)
		return 1;
	while (i < r->n_ev) {
		const struct ev *rt;
		size_t j;

		if (r->ev[i].type == EV_MATMUL) {
			if (r->ev[i].layer != UINT32_MAX) {
				fprintf(stderr, "%s: expert rows of layer %u read before any report\n",
					what, r->ev[i].layer);
				bad++;
			}
			i++;
			continue;
		}
		rt = &r->ev[i];
		n_routes++;
		if (rt->layer == 0)
			n_tok_sum += rt->n_tok;
		memset(cov, 0, 3 * (size_t)r->n_expert * max_rows);
		for (j = i + 1; j < r->n_ev && r->ev[j].type == EV_MATMUL; j++) {
			const struct ev *e = &r->ev[j];
			uint64_t ex;

			if (e->layer == UINT32_MAX)
				continue;
			ex = e->r0 / rows_per[e->kind];
			if (e->layer != rt->layer || e->r1 <= e->r0 ||
			    (e->r1 - 1) / rows_per[e->kind] != ex || !(rt->set >> ex & 1) ||
			    e->n_tok == 0) {
				fprintf(stderr, "%s: layer %u report, window %llu..%llu of layer %u "
					"tensor %u outside the reported experts\n", what, rt->layer,
					(unsigned long long)e->r0, (unsigned long long)e->r1,
					e->layer, e->kind);
				bad++;
				continue;
			}
			for (uint64_t row = e->r0; row < e->r1; row++)
				cov[((size_t)e->kind * r->n_expert + ex) * max_rows +
				    (row - ex * rows_per[e->kind])]++;
		}
		for (uint32_t k = 0; k < 3; k++)
			for (uint32_t ex = 0; ex < r->n_expert; ex++)
				for (uint64_t row = 0; row < rows_per[k]; row++) {
					uint8_t c = cov[((size_t)k * r->n_expert + ex) * max_rows + row];
					uint8_t want = (rt->set >> ex & 1) ? 1 : 0;

					if (c != want) {
						fprintf(stderr, "%s: layer %u tensor %u expert %u row "
							"%llu read %u times, expected %u\n", what,
							rt->layer, k, ex, (unsigned long long)row, c,
							want);
						bad++;
						row = rows_per[k]; /* one line per expert */
					}
				}
		i = j;
	}
	if (want_n_tok_sum && n_tok_sum != want_n_tok_sum) {
		fprintf(stderr, "%s: reports cover %u tokens, expected %u\n", what, n_tok_sum,
			want_n_tok_sum);
		bad++;
	}
	printf("  %s: %u reports, %zu provider calls, expert windows %s\n", what, n_routes,
	       r->n_ev - n_routes, bad ? "WRONG" : "exactly the reported experts, once");
	free(cov);
	return bad;
}

static struct ns_fwd *s_fwd(const struct ns_model *m, struct ns_weights *w, struct rec *r,
			    uint32_t n_batch, uint32_t ffn_rows)
{
	struct ns_fwd_opts o = { .n_ctx = MAX_TOK, .n_batch = n_batch, .ffn_rows = ffn_rows,
				 .on_route = r ? r_route : NULL, .route_user = r };
	struct ns_fwd *f = NULL;
	char err[NS_ERR_LEN];

	if (ns_fwd_new(m, w, &o, &f, err, sizeof(err)) < 0)
		fprintf(stderr, "ns_fwd_new: %s\n", err);
	return f;
}

/* All-position logits of toks with the given batching, through the recorder. */
static float *s_run(const struct ns_model *m, struct ns_weights *w, struct rec *r,
		    const int32_t *toks, uint32_t n, uint32_t n_batch, uint32_t ffn_rows,
		    uint32_t *n_vocab)
{
	struct ns_fwd *f = s_fwd(m, w, r, n_batch, ffn_rows);
	float *lg;

	if (!f)
		return NULL;
	*n_vocab = ns_fwd_n_vocab(f);
	lg = malloc((size_t)n * *n_vocab * sizeof(float));
	if (r)
		r->n_ev = 0;
	if (!lg || ns_fwd_eval(f, toks, n, lg, true) < 0) {
		fprintf(stderr, "eval: %s\n", lg ? ns_fwd_error(f) : "out of memory");
		free(lg);
		lg = NULL;
	}
	ns_fwd_destroy(&f);
	return lg;
}

/* init + 5-token prefill in chunks of 3 + one decode step with r->fail_at armed: 0 when all
 * succeeded, 1 when the injected fault came back as a clean error, -1 otherwise. */
static int s_fault_run(const struct ns_model *m, struct ns_weights *w, struct rec *r,
		       const int32_t *toks)
{
	struct ns_fwd_opts o = { .n_ctx = 8, .n_batch = 3, .ffn_rows = 100, .on_route = r_route,
				 .route_user = r };
	struct ns_fwd *f = NULL;
	char err[NS_ERR_LEN] = "";
	int rc;

	r->calls = 0;
	r->n_ev = 0;
	rc = ns_fwd_new(m, w, &o, &f, err, sizeof(err));
	if (rc < 0)
		return f == NULL && rc == -EIO && strstr(err, "injected fault") ? 1 : -1;
	rc = ns_fwd_eval(f, toks, 5, NULL, false);
	if (rc == 0)
		rc = ns_fwd_eval(f, toks + 5, 1, NULL, false);
	if (rc < 0) {
		int good = rc == -EIO && strstr(ns_fwd_error(f), "injected fault");

		ns_fwd_destroy(&f);
		return good ? 1 : -1;
	}
	ns_fwd_destroy(&f);
	return 0;
}

static int s_rec_init(struct rec *r, const struct ns_model *m, struct ns_weights *inner)
{
	const struct ns_model_tensor *t;
	char name[96];
	static const char *const kinds[3] = { "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps" };

	memset(r, 0, sizeof(*r));
	r->inner = inner;
	r->m = m;
	r->abort_layer = UINT32_MAX;
	for (uint32_t l = 0; l < MAX_LAYER; l++) {
		snprintf(name, sizeof(name), "blk.%u.ffn_gate_exps.weight", l);
		if (ns_model_find_index(m, name) < 0)
			break;
		for (uint32_t k = 0; k < 3; k++) {
			snprintf(name, sizeof(name), "blk.%u.%s.weight", l, kinds[k]);
			r->exp_tensor[l][k] = ns_model_find_index(m, name);
		}
		r->n_layer = l + 1;
	}
	t = ns_model_find(m, "blk.0.ffn_gate_exps.weight");
	if (!r->n_layer || !t || t->ne[2] > 64) {
		fprintf(stderr, "not a MoE model with at most 64 experts\n");
		return -1;
	}
	r->n_embd = (uint32_t)t->ne[0];
	r->n_ff_exp = (uint32_t)t->ne[1];
	r->n_expert = (uint32_t)t->ne[2];
	return 0;
}

int main(int argc, char **argv)
{
	const char *provider = "ref";
	char path[2048], rel[1024], err[NS_ERR_LEN];
	int64_t toks64[MAX_TOK];
	int32_t toks[MAX_TOK];
	size_t n_tok = 0, len;
	struct ns_model *m = NULL;
	struct ns_weights *inner = NULL;
	static struct rec r;
	struct ns_weights w = { .ops = &r_ops, .ctx = &r };
	float *a = NULL, *b = NULL, *c = NULL;
	uint32_t n_vocab = 0, nl, ne;
	struct ns_fwd *f;
	const uint64_t *hits;
	char *json;
	int bad = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: %s MODEL PREFIX [--provider ref|fused]\n", argv[0]);
		return 2;
	}
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--provider") && i + 1 < argc)
			provider = argv[++i];
		else
			return fprintf(stderr, "bad argument %s\n", argv[i]), 2;
	}
	ns_test_require_oracle();
	snprintf(rel, sizeof(rel), "%s.json", argv[2]);
	json = ns_test_read_file(ns_test_oracle_path(path, sizeof(path), rel), &len);
	if (!json || json_ints(json, "tokens", toks64, MAX_TOK - 4, &n_tok) || n_tok < 2) {
		fprintf(stderr, "%s: cannot read tokens\n", path);
		return 1;
	}
	free(json);
	for (size_t i = 0; i < n_tok; i++)
		toks[i] = (int32_t)toks64[i];
	if (ns_model_open(ns_test_oracle_path(path, sizeof(path), argv[1]), &m, err,
			  sizeof(err)) < 0)
		return fprintf(stderr, "open: %s\n", err), 1;
	if (!strcmp(provider, "ref")) {
		if (ns_weights_ref_new(m, &inner, err, sizeof(err)) < 0)
			return fprintf(stderr, "provider: %s\n", err), 1;
	} else if (!strcmp(provider, "fused")) {
		if (ns_weights_fused_new(m, NULL, &inner, err, sizeof(err)) < 0)
			return fprintf(stderr, "provider: %s\n", err), 1;
	} else {
		return fprintf(stderr, "unknown provider %s\n", provider), 2;
	}
	w.model = m;
	if (s_rec_init(&r, m, inner) < 0)
		return 1;
	printf("%s [%s]: %u MoE layers, %u experts, %zu tokens\n", argv[1], provider, r.n_layer,
	       r.n_expert, n_tok);

	/* 1. prefill in one chunk, then decode steps; hits against the reports */
	f = s_fwd(m, &w, &r, 0, 0);
	if (!f)
		return 1;
	n_vocab = ns_fwd_n_vocab(f);
	a = malloc(n_tok * n_vocab * sizeof(float));
	if (!a || ns_fwd_eval(f, toks, (uint32_t)n_tok, a, true) < 0)
		return fprintf(stderr, "eval: %s\n", ns_fwd_error(f)), 1;
	bad += s_check_log(&r, (uint32_t)n_tok, "prefill, one chunk");
	for (int step = 0; step < 3; step++) {
		int32_t tok = toks[step];

		r.n_ev = 0;
		if (ns_fwd_eval(f, &tok, 1, NULL, false) < 0)
			return fprintf(stderr, "decode: %s\n", ns_fwd_error(f)), 1;
		bad += s_check_log(&r, 1, "decode step");
	}
	hits = ns_fwd_expert_hits(f, &nl, &ne);
	if (!hits || nl != r.n_layer || ne != r.n_expert) {
		fprintf(stderr, "expert hits: %p, %u layers, %u experts\n", (const void *)hits, nl,
			ne);
		bad++;
	} else {
		uint64_t total = 0;
		bool same = true;

		for (uint32_t l = 0; l < nl; l++)
			for (uint32_t e = 0; e < ne; e++) {
				same &= hits[(uint64_t)l * ne + e] == r.hits[l][e];
				total += hits[(uint64_t)l * ne + e];
			}
		printf("  expert hits: %llu selections (%zu tokens x %u layers x %u used: %s), "
		       "%s\n", (unsigned long long)total, n_tok + 3, nl, r.n_used,
		       total == (n_tok + 3) * nl * r.n_used ? "equal" : "DIFFERENT",
		       same ? "equal to the reports" : "DIFFERENT from the reports");
		bad += !same || total != (n_tok + 3) * nl * r.n_used || r.n_used == 0;
	}
	if (r.bad_report || r.overflow) {
		fprintf(stderr, "malformed routing report or log overflow\n");
		bad++;
	}
	ns_fwd_destroy(&f);

	/* 2. chunks of 5 and 100-row expert windows; 3. token by token: same bits */
	b = s_run(m, &w, &r, toks, (uint32_t)n_tok, 5, 100, &n_vocab);
	if (b)
		bad += s_check_log(&r, (uint32_t)n_tok, "chunks of 5, windows of 100 rows");
	c = s_run(m, &w, NULL, toks, (uint32_t)n_tok, 1, 0, &n_vocab);
	if (!b || !c || memcmp(a, b, n_tok * n_vocab * sizeof(float)) ||
	    memcmp(a, c, n_tok * n_vocab * sizeof(float))) {
		fprintf(stderr, "batched and token-by-token logits differ\n");
		bad++;
	} else {
		printf("  one chunk, chunks of 5 / windows of 100, token by token: bit-identical\n");
	}

	/* 4. a failing callback stops the pass before that layer's experts */
	r.abort_layer = r.n_layer - 1;
	f = s_fwd(m, &w, &r, 0, 0);
	if (f) {
		int rc;

		r.n_ev = 0;
		rc = ns_fwd_eval(f, toks, (uint32_t)n_tok, NULL, false);
		for (size_t i = 0; i < r.n_ev; i++)
			if (r.ev[i].type == EV_MATMUL && r.ev[i].layer == r.abort_layer)
				rc = 0; /* expert rows of the aborted layer were read */
		printf("  callback error at layer %u: %s (%s)\n", r.abort_layer,
		       rc == -ECANCELED ? "evaluation stopped" : "NOT STOPPED", ns_fwd_error(f));
		bad += rc != -ECANCELED;
		ns_fwd_destroy(&f);
	} else {
		bad++;
	}

	/* 5. a provider fault at every call */
	r.abort_layer = UINT32_MAX;
	r.fail_at = 0;
	if (n_tok >= 6 && s_fault_run(m, &w, &r, toks) == 0) {
		long total = r.calls, clean = 0;

		for (r.fail_at = 1; r.fail_at <= total; r.fail_at++)
			clean += s_fault_run(m, &w, &r, toks) == 1;
		printf("  provider faults: %ld of %ld calls failed cleanly\n", clean, total);
		bad += clean != total;
		r.fail_at = 0;
	} else {
		fprintf(stderr, "fault run without faults failed\n");
		bad++;
	}

	free(a);
	free(b);
	free(c);
	ns_weights_destroy(&inner);
	ns_model_close(&m);
	printf("%s\n", bad ? "FAIL" : "ok");
	return bad ? 1 : 0;
}
