/* test_arch_reads - every architecture's table entry (modelfile/arch.h) against its forward
 * passes and against nsplan's per-token bytes.
 *
 * A recording provider wraps the fused one. For each oracle model of a computed architecture
 * and each pass (the CPU pass, and the CUDA pass over the emulation with every weight staged
 * through the provider):
 *   - at creation the pass reads exactly the table's HELD tensors, each whole, in the
 *     table's order;
 *   - a prefill chunk of 3 tokens, then one decoded token, request exactly the expansion of
 *     the table's steps (arch.h): each MATRIX whole, each ROWS one row per token in order,
 *     each layer's expert group once per expert the chunk chose (ascending), members in
 *     the table's order, HELD never; nothing else, nothing out of order;
 *   - the bytes the decoded token requests equal nsplan_token_bytes of a plan with every
 *     weight on disk, for the experts that token chose (also with FFN windows of 7 rows, which
 *     interleave gate and up but read the same rows).
 * usage: test_arch_reads [MODEL...] (oracle-relative; default: the list below).
 * Exits 0 pass, 1 fail, 77 skip (no oracle outside CI). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cfwd.h"
#include "forward.h"
#include "ns_test.h"
#include "ns_util.h"
#include "plan.h"
#include "weights.h"
#include "weights_fused.h"

static int s_fails;

#define EXPECT(cond, ...) NS_EXPECT(s_fails, cond, __VA_ARGS__)

/* ---------------------------------------------------------------- recording provider --- */

struct s_call {
	char op;          /* 'm' matmul, 'v' visit (both: rows [a, b)), 'r' get_rows (row a) */
	uint32_t tensor;
	uint64_t a, b;
};

struct s_rec {
	struct ns_weights *inner;
	struct s_call *calls;
	size_t n, cap;
};

static void s_note(struct s_rec *r, char op, uint32_t tensor, uint64_t a, uint64_t b)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 256;
		struct s_call *c = realloc(r->calls, cap * sizeof(*c));

		if (!c) {
			fprintf(stderr, "out of memory\n");
			exit(1);
		}
		r->calls = c;
		r->cap = cap;
	}
	r->calls[r->n++] = (struct s_call){ op, tensor, a, b };
}

static int s_matmul(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		    const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	struct s_rec *r = ctx;

	s_note(r, 'm', tensor, row0, row_end);
	return ns_weights_matmul(r->inner, tensor, row0, row_end, x, n_tok, y, ldy);
}

static int s_get_rows(void *ctx, uint32_t tensor, const int64_t *rows, uint64_t n, float *dst)
{
	struct s_rec *r = ctx;

	for (uint64_t i = 0; i < n; i++)
		s_note(r, 'r', tensor, (uint64_t)rows[i], (uint64_t)rows[i] + 1);
	return ns_weights_get_rows(r->inner, tensor, rows, n, dst);
}

static int s_visit(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		   ns_weights_block_fn cb, void *cbctx)
{
	struct s_rec *r = ctx;

	s_note(r, 'v', tensor, row0, row_end);
	return ns_weights_visit(r->inner, tensor, row0, row_end, cb, cbctx);
}

static const char *s_last_error(void *ctx)
{
	return ns_weights_error(((struct s_rec *)ctx)->inner);
}

static void s_destroy(void *ctx)
{
	(void)ctx; /* the test owns the recorder */
}

static const struct ns_weights_ops s_rec_ops = {
	.name = "record", .matmul = s_matmul, .get_rows = s_get_rows, .visit = s_visit,
	.last_error = s_last_error, .destroy = s_destroy,
};

/* ---------------------------------------------------------------- expectations --------- */

/* The experts a chunk chose, per layer: (n_layer, n_expert) flags, from the routing reports. */
struct s_route {
	uint32_t n_layer, n_expert, n_used;
	uint8_t *chosen;
	uint32_t *last;   /* (n_layer, n_used) of the last token reported */
};

static int s_on_route(void *user, const struct ns_fwd_route *r)
{
	struct s_route *rt = user;

	if (r->layer >= rt->n_layer || r->n_expert != rt->n_expert || r->n_used != rt->n_used)
		return -EINVAL;
	for (uint64_t i = 0; i < (uint64_t)r->n_tok * r->n_used; i++)
		rt->chosen[(uint64_t)r->layer * rt->n_expert + (uint32_t)r->experts[i]] = 1;
	for (uint32_t k = 0; k < r->n_used; k++)
		rt->last[(uint64_t)r->layer * r->n_used + k] =
			(uint32_t)r->experts[(uint64_t)(r->n_tok - 1) * r->n_used + k];
	return 0;
}

/* What a chunk of tokens requests, from the table's steps (arch.h). */
static void s_expect(const struct ns_arch_model *am, const int32_t *toks, uint32_t n_tok,
		     const struct s_route *rt, char mm_op, struct s_rec *out)
{
	const struct ns_model *m = am->m;
	int32_t group = -2; /* the layer whose expert group was expanded last */

	for (uint64_t i = 0; i < am->n_steps; i++) {
		const struct ns_arch_step *s = &am->steps[i];

		if (s->role == NS_ROLE_ROWS) {
			for (uint32_t k = 0; k < n_tok; k++)
				s_note(out, 'r', s->tensor, (uint64_t)toks[k],
				       (uint64_t)toks[k] + 1);
		} else if (s->role == NS_ROLE_MATRIX) {
			s_note(out, mm_op, s->tensor, 0, m->tensors[s->tensor].n_rows);
		} else if (s->role == NS_ROLE_EXPERT && s->layer != group) {
			/* the layer's expert group at its first member: per chosen expert,
			 * ascending, each member's window in step order */
			group = s->layer;
			for (uint32_t e = 0; e < rt->n_expert; e++) {
				if (!rt->chosen[(uint64_t)s->layer * rt->n_expert + e])
					continue;
				for (uint64_t j = i; j < am->n_steps &&
				     am->steps[j].layer == s->layer; j++) {
					const struct ns_arch_step *g = &am->steps[j];
					const uint64_t rows = m->tensors[g->tensor].ne[1];

					if (g->role == NS_ROLE_EXPERT)
						s_note(out, mm_op, g->tensor, e * rows,
						       (e + 1) * rows);
				}
			}
		}
	}
}

/* The HELD steps, whole, in order: what a pass reads when it starts. */
static void s_expect_held(const struct ns_arch_model *am, struct s_rec *out)
{
	for (uint64_t i = 0; i < am->n_steps; i++)
		if (am->steps[i].role == NS_ROLE_HELD)
			for (uint64_t r = 0; r < am->m->tensors[am->steps[i].tensor].n_rows; r++)
				s_note(out, 'r', am->steps[i].tensor, r, r + 1);
}

/* Recorded against expected: the first difference, named. */
static void s_same(const char *what, const struct ns_model *m, const struct s_rec *got,
		   const struct s_rec *want)
{
	size_t i = 0;

	while (i < got->n && i < want->n && got->calls[i].op == want->calls[i].op &&
	       got->calls[i].tensor == want->calls[i].tensor &&
	       got->calls[i].a == want->calls[i].a && got->calls[i].b == want->calls[i].b)
		i++;
	if (i == got->n && i == want->n)
		return;
	EXPECT(0, "%s: call %zu of %zu (table: %zu) differs: got %c %s [%llu, %llu), table %c "
	       "%s [%llu, %llu)", what, i, got->n, want->n, i < got->n ? got->calls[i].op : '-',
	       i < got->n ? m->tensors[got->calls[i].tensor].name : "(none)",
	       (unsigned long long)(i < got->n ? got->calls[i].a : 0),
	       (unsigned long long)(i < got->n ? got->calls[i].b : 0),
	       i < want->n ? want->calls[i].op : '-',
	       i < want->n ? m->tensors[want->calls[i].tensor].name : "(none)",
	       (unsigned long long)(i < want->n ? want->calls[i].a : 0),
	       (unsigned long long)(i < want->n ? want->calls[i].b : 0));
}

static uint64_t s_bytes(const struct ns_model *m, const struct s_rec *r)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < r->n; i++)
		sum += (r->calls[i].b - r->calls[i].a) * m->tensors[r->calls[i].tensor].row_bytes;
	return sum;
}

/* ---------------------------------------------------------------- one model ------------ */

struct s_case {
	const char *rel;
	struct ns_model *m;
	struct ns_arch_model *am;
	struct nsplan *plan;  /* every weight on disk */
	struct s_rec rec;
	struct s_route rt;
};

static struct ns_fwd *s_new(struct s_case *c, bool cuda, uint32_t ffn_rows)
{
	struct ns_weights w = { .ops = &s_rec_ops, .ctx = &c->rec, .model = c->m };
	static struct ns_weights sw; /* the pass borrows the provider struct: keep it alive */
	struct ns_fwd *f = NULL;
	char err[NS_ERR_LEN];
	int rc;

	sw = w;
	if (cuda) {
		const struct ns_cfwd_opts o = { .n_ctx = 16, .no_graphs = true,
						.on_route = s_on_route, .route_user = &c->rt };

		rc = ns_cfwd_new(c->m, &sw, &o, &f, err, sizeof(err));
	} else {
		const struct ns_fwd_opts o = { .n_ctx = 16, .ffn_rows = ffn_rows,
					       .on_route = s_on_route, .route_user = &c->rt };

		rc = ns_fwd_new(c->m, &sw, &o, &f, err, sizeof(err));
	}
	EXPECT(rc == 0, "%s: %s pass: %s", c->rel, cuda ? "cuda" : "cpu", err);
	return rc == 0 ? f : NULL;
}

static void s_reset_route(struct s_route *rt)
{
	memset(rt->chosen, 0, (size_t)rt->n_layer * (rt->n_expert ? rt->n_expert : 1));
}

/* One pass: creation, a 3-token chunk, a decoded token; calls against the table. */
static void s_pass(struct s_case *c, bool cuda, uint32_t ffn_rows)
{
	const int32_t prompt[3] = { 7, 302 % (int32_t)c->am->dim[NS_DIM_VOCAB], 3 };
	const int32_t next = 11;
	const char mm = cuda ? 'v' : 'm';
	struct s_rec want = { 0 };
	struct ns_fwd *f;
	float *logits;
	char what[256];

	c->rec.n = 0;
	f = s_new(c, cuda, ffn_rows);
	if (!f)
		return;
	logits = malloc((size_t)ns_fwd_n_vocab(f) * 3 * sizeof(float));
	if (!logits)
		exit(1);
	if (ffn_rows == 0) {
		snprintf(what, sizeof(what), "%s [%s] at creation", c->rel, cuda ? "cuda" : "cpu");
		s_expect_held(c->am, &want);
		s_same(what, c->m, &c->rec, &want);
	}
	/* a chunk of three */
	c->rec.n = want.n = 0;
	s_reset_route(&c->rt);
	EXPECT(ns_fwd_eval(f, prompt, 3, logits, true) == 0, "%s: %s", c->rel, ns_fwd_error(f));
	if (ffn_rows == 0) {
		snprintf(what, sizeof(what), "%s [%s] prefill of 3", c->rel, cuda ? "cuda" : "cpu");
		s_expect(c->am, prompt, 3, &c->rt, mm, &want);
		s_same(what, c->m, &c->rec, &want);
	}
	/* a decoded token, and its bytes against the plan's */
	c->rec.n = want.n = 0;
	s_reset_route(&c->rt);
	EXPECT(ns_fwd_eval(f, &next, 1, logits, false) == 0, "%s: %s", c->rel, ns_fwd_error(f));
	snprintf(what, sizeof(what), "%s [%s, ffn windows %u] decoded token", c->rel,
		 cuda ? "cuda" : "cpu", ffn_rows);
	if (ffn_rows == 0) {
		s_expect(c->am, &next, 1, &c->rt, mm, &want);
		s_same(what, c->m, &c->rec, &want);
	}
	{
		uint64_t plan_bytes = 0;
		int rc = nsplan_token_bytes(c->plan, c->m, c->rt.last, c->rt.n_layer,
					    c->rt.n_used, &plan_bytes);

		EXPECT(rc == 0 && plan_bytes == s_bytes(c->m, &c->rec), "%s: requested %llu "
		       "bytes, nsplan predicts %llu", what,
		       (unsigned long long)s_bytes(c->m, &c->rec), (unsigned long long)plan_bytes);
	}
	free(want.calls);
	free(logits);
	ns_fwd_destroy(&f);
}

static void s_model(const char *rel)
{
	struct s_case c = { .rel = rel };
	struct ns_weights *fused = NULL;
	const struct nsplan_opts po = { 0 };
	char path[2048], err[NS_ERR_LEN];

	if (ns_model_open(ns_test_oracle_path(path, sizeof(path), rel), &c.m, err, sizeof(err)) ||
	    ns_arch_bind(c.m, &c.am, err, sizeof(err)) ||
	    nsplan_compute(c.m, &c.am->hp, &po, 0, &c.plan, err, sizeof(err)) ||
	    ns_weights_fused_new(c.m, NULL, &fused, err, sizeof(err))) {
		EXPECT(0, "%s: %s", rel, err);
		goto out;
	}
	c.rec.inner = fused;
	c.rt.n_layer = c.am->n_layer;
	c.rt.n_expert = c.am->hp.n_expert;
	c.rt.n_used = c.am->hp.n_expert_used;
	c.rt.chosen = calloc((size_t)c.rt.n_layer * (c.rt.n_expert ? c.rt.n_expert : 1), 1);
	c.rt.last = calloc((size_t)c.rt.n_layer * (c.rt.n_used ? c.rt.n_used : 1),
			   sizeof(uint32_t));
	if (!c.rt.chosen || !c.rt.last)
		exit(1);
	s_pass(&c, false, 0);
	s_pass(&c, false, 7);
	if (c.am->arch->backends & NS_BACKEND_CUDA)
		s_pass(&c, true, 0);
	printf("%s: %s, %llu steps: the passes read what the table says\n", rel,
	       c.am->arch->name, (unsigned long long)c.am->n_steps);
out:
	free(c.rt.chosen);
	free(c.rt.last);
	free(c.rec.calls);
	ns_weights_destroy(&fused);
	nsplan_destroy(&c.plan);
	ns_arch_model_free(&c.am);
	ns_model_close(&c.m);
}

static const char *const s_models[] = {
	"models/stories260K.gguf", "models/stories260K-Q4_0.gguf",
	"models/synth-llama-k256-Q4_K_M.gguf", "tiny/tiny-llama-F32.gguf",
	"tiny/tiny-llama-Q8_0.gguf", "tiny/tiny-qwen3-F32.gguf", "tiny/tiny-qwen3-Q4_K_M.gguf",
	"tiny/tiny-qwen3moe-F32.gguf", "tiny/tiny-qwen3moe-Q4_K_M.gguf",
	"tiny/tiny-gpt-oss-F32.gguf", "tiny/tiny-gpt-oss-MXFP4_MOE.gguf",
	"tiny/split/tiny-qwen3-F32-00001-of-00003.gguf",
	"tiny/tiny-qwen35-F32.gguf", "tiny/tiny-qwen35-Q4_K_M.gguf",
	"tiny/tiny-qwen35moe-F32.gguf", "tiny/tiny-qwen35moe-Q4_K_M.gguf",
};

int main(int argc, char **argv)
{
	ns_test_require_oracle();
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			s_model(argv[i]);
	} else {
		for (size_t i = 0; i < NS_ARRAY_LEN(s_models); i++)
			s_model(s_models[i]);
	}
	if (s_fails) {
		fprintf(stderr, "%d failure(s)\n", s_fails);
		return 1;
	}
	return 0;
}
