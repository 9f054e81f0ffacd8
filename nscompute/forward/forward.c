/* forward.c - architecture dispatch and the checks every architecture shares. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward_impl.h"

bool ns_fwd_arch_supported(const char *arch)
{
	return !strcmp(arch, "llama") || !strcmp(arch, "qwen3") || !strcmp(arch, "qwen3moe") ||
	       !strcmp(arch, "gpt-oss");
}

int ns_fwd_alloc(const struct ns_model *m, struct ns_weights *w, uint32_t n_ctx,
		 uint32_t n_batch, ns_fwd_route_fn on_route, void *route_user, const char *backend,
		 struct ns_hparams *hp, struct ns_fwd **out, char *err, size_t errlen)
{
	struct ns_fwd *f;
	int rc;

	*out = NULL;
	if (n_ctx == 0) {
		ns_errf(err, errlen, "forward: n_ctx must be > 0");
		return -EINVAL;
	}
	rc = ns_hparams_load(m, hp, err, errlen);
	if (rc < 0)
		return rc;
	if (!ns_fwd_arch_supported(hp->arch)) {
		ns_errf(err, errlen, "forward: architecture '%s' is not supported by the %s "
			"forward pass (supported: llama, qwen3, qwen3moe, gpt-oss)", hp->arch,
			backend);
		return -EINVAL;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->w = w;
	f->n_ctx = n_ctx;
	f->n_batch = n_batch ? n_batch : 512;
	if (f->n_batch > f->n_ctx)
		f->n_batch = f->n_ctx;
	f->on_route = on_route;
	f->route_user = route_user;
	f->n_seq = 1;
	f->row_kv = calloc(f->n_batch, sizeof(*f->row_kv));
	f->row_pos = calloc(f->n_batch, sizeof(*f->row_pos));
	if (!f->row_kv || !f->row_pos) {
		ns_fwd_destroy(&f);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*out = f;
	return 0;
}

int ns_fwd_new(const struct ns_model *m, struct ns_weights *w, const struct ns_fwd_opts *opts,
	       struct ns_fwd **out, char *err, size_t errlen)
{
	struct ns_hparams hp;
	struct ns_fwd *f;
	int rc;

	*out = NULL;
	if (!opts) {
		ns_errf(err, errlen, "forward: no options");
		return -EINVAL;
	}
	rc = ns_fwd_alloc(m, w, opts->n_ctx, opts->n_batch, opts->on_route, opts->route_user,
			  "cpu", &hp, &f, err, errlen);
	if (rc < 0)
		return rc;
	rc = ns_llama_init(f, m, &hp, opts->ffn_rows, err, errlen);
	if (rc == 0 && opts->n_seq > 1)
		rc = ns_fwd_seqs_init(f, opts->n_seq, err, errlen); /* batch.c */
	if (rc < 0) {
		ns_fwd_destroy(&f);
		return rc;
	}
	*out = f;
	return 0;
}

/* The provider of ns_fwd_check: no matmul, and rows that read as zeros without a write: the
 * pass's setup reads rows only into buffers it calloc'd (llama.c s_vector, moe.c s_table), so
 * the pages of a large model's tables (gpt-oss-120b's expert biases: 160 MB) are never
 * touched. Nothing is read from disk. */
static int s_null_matmul(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
			 const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	(void)ctx, (void)tensor, (void)row0, (void)row_end, (void)x, (void)n_tok, (void)y,
		(void)ldy;
	return -ENOTSUP;
}

static int s_null_get_rows(void *ctx, uint32_t tensor, const int64_t *rows, uint64_t n,
			   float *dst)
{
	(void)ctx, (void)tensor, (void)rows, (void)n, (void)dst;
	return 0;
}

static const char *s_null_error(void *ctx)
{
	(void)ctx;
	return "model check only: no weights are read";
}

static const struct ns_weights_ops s_null_ops = {
	.name = "check",
	.matmul = s_null_matmul,
	.get_rows = s_null_get_rows,
	.last_error = s_null_error,
};

int ns_fwd_check(const struct ns_model *m, char *err, size_t errlen)
{
	struct ns_weights w = { .ops = &s_null_ops, .ctx = (void *)m, .model = m };
	struct ns_fwd *f = NULL;
	int rc = ns_fwd_new(m, &w, &(struct ns_fwd_opts){ .n_ctx = 1 }, &f, err, errlen);

	ns_fwd_destroy(&f);
	return rc;
}

int ns_fwd_eval(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits, bool all)
{
	if (n == 0) {
		ns_errf(f->err, sizeof(f->err), "forward: no tokens to evaluate");
		return -EINVAL;
	}
	if ((uint64_t)f->kv->n_past + n > f->n_ctx) {
		ns_errf(f->err, sizeof(f->err),
			"forward: context full: %u positions used + %u new > n_ctx %u",
			f->kv->n_past, n, f->n_ctx);
		return -ENOSPC;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (tokens[i] < 0 || (uint64_t)tokens[i] >= f->n_tok_rows) {
			ns_errf(f->err, sizeof(f->err),
				"forward: token id %d at index %u out of range [0, %llu)",
				tokens[i], i, (unsigned long long)f->n_tok_rows);
			return -EINVAL;
		}
	}
	for (uint32_t i0 = 0; i0 < n; i0 += f->n_batch) {
		uint32_t nb = n - i0 < f->n_batch ? n - i0 : f->n_batch;
		bool last_chunk = i0 + nb == n;
		float *out = NULL;
		int rc;

		/* all: this chunk's rows of (n, n_vocab); last: only the final chunk writes */
		if (logits && all)
			out = logits + (uint64_t)i0 * f->n_vocab;
		else if (logits && last_chunk)
			out = logits;
		for (uint32_t t = 0; t < nb; t++) { /* one sequence: consecutive positions */
			f->row_kv[t] = f->kv;
			f->row_pos[t] = f->kv->n_past + t;
		}
		f->n_out_rows = 0;
		rc = f->eval_chunk(f, tokens + i0, nb, out, all);
		if (rc < 0)
			return rc;
		f->kv->n_past += nb;
	}
	return 0;
}

void ns_fwd_reset(struct ns_fwd *f)
{
	f->kv->n_past = 0;
}

int ns_fwd_truncate(struct ns_fwd *f, uint32_t n_past)
{
	if (n_past > f->kv->n_past)
		return -EINVAL;
	f->kv->n_past = n_past; /* positions past it are written again before they are read */
	return 0;
}

uint32_t ns_fwd_n_vocab(const struct ns_fwd *f)
{
	return f->n_vocab;
}

uint32_t ns_fwd_n_past(const struct ns_fwd *f)
{
	return f->kv->n_past;
}

uint32_t ns_fwd_n_ctx(const struct ns_fwd *f)
{
	return f->n_ctx;
}

const char *ns_fwd_error(const struct ns_fwd *f)
{
	return f->err;
}

const uint64_t *ns_fwd_expert_hits(const struct ns_fwd *f, uint32_t *n_layer,
				   uint32_t *n_expert)
{
	*n_layer = f->expert_hits ? f->n_moe_layer : 0;
	*n_expert = f->expert_hits ? f->n_expert : 0;
	return f->expert_hits;
}

void ns_fwd_destroy(struct ns_fwd **f)
{
	if (!f || !*f)
		return;
	if ((*f)->arch_destroy)
		(*f)->arch_destroy((*f)->arch);
	for (uint32_t s = 1; (*f)->seq_kv && s < (*f)->n_seq; s++)
		ns_kvcache_destroy(&(*f)->seq_kv[s]);
	free((*f)->seq_kv);
	ns_kvcache_destroy(&(*f)->kv);
	free((*f)->row_kv);
	free((*f)->row_pos);
	free((*f)->expert_hits);
	free(*f);
	*f = NULL;
}

/* Does t have the shape want[0..n_want) (n_want <= NS_GGUF_MAX_DIMS)? Every dimension is
 * compared: those past n_want (and past the tensor's own n_dims, which the reader sets to 1)
 * must be 1. On a mismatch, writes "forward: NAME has shape [a, b, ...], expected [...]"
 * with all of the tensor's n_dims dimensions and returns -EINVAL. */
int ns_fwd_shape_check(const struct ns_model_tensor *t, const char *name,
		       const uint64_t *want, uint32_t n_want, char *err, size_t errlen)
{
	char got[160], exp[160];
	uint32_t nd = t->n_dims ? t->n_dims : 1;
	size_t gl = 0, el = 0;
	bool same = true;

	for (uint32_t i = 0; i < NS_GGUF_MAX_DIMS; i++)
		if (t->ne[i] != (i < n_want ? want[i] : 1))
			same = false;
	if (same)
		return 0;
	if (nd > NS_GGUF_MAX_DIMS)
		nd = NS_GGUF_MAX_DIMS;
	got[0] = exp[0] = '\0';
	for (uint32_t i = 0; i < nd && gl < sizeof(got); i++)
		gl += (size_t)snprintf(got + gl, sizeof(got) - gl, "%s%llu", i ? ", " : "",
				       (unsigned long long)t->ne[i]);
	for (uint32_t i = 0; i < n_want && el < sizeof(exp); i++)
		el += (size_t)snprintf(exp + el, sizeof(exp) - el, "%s%llu", i ? ", " : "",
				       (unsigned long long)want[i]);
	ns_errf(err, errlen, "forward: %s has shape [%s], expected [%s]", name, got, exp);
	return -EINVAL;
}
