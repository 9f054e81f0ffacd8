/* forward.c - the cpu pass's start (the model bound to the architecture table, a builder
 * per family) and what every architecture shares: evaluation in chunks, accessors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward_impl.h"
#include "mtp.h"

/* The cpu pass's builder of each builder id of the table (arch.h). */
static int (*const s_builders[])(struct ns_fwd *f, uint32_t ffn_rows, char *err,
				 size_t errlen) = {
	[NS_BUILD_LLAMA] = ns_llama_init,
	[NS_BUILD_GEMMA] = ns_gemma_init,
};

int ns_fwd_alloc(const struct ns_model *m, struct ns_weights *w, uint32_t n_ctx,
		 uint32_t n_batch, ns_fwd_route_fn on_route, void *route_user, unsigned backend,
		 struct ns_fwd **out, char *err, size_t errlen)
{
	struct ns_arch_model *am = NULL;
	struct ns_fwd *f;
	int rc;

	*out = NULL;
	if (n_ctx == 0) {
		ns_errf(err, errlen, "forward: n_ctx must be > 0");
		return -EINVAL;
	}
	rc = ns_arch_bind_computed(m, backend, &am, err, errlen);
	if (rc < 0)
		return rc;
	f = calloc(1, sizeof(*f));
	if (!f) {
		ns_arch_model_free(&am);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->am = am;
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
	struct ns_fwd *f;
	int rc;

	*out = NULL;
	if (!opts) {
		ns_errf(err, errlen, "forward: no options");
		return -EINVAL;
	}
	rc = ns_fwd_alloc(m, w, opts->n_ctx, opts->n_batch, opts->on_route, opts->route_user,
			  NS_BACKEND_CPU, &f, err, errlen);
	if (rc < 0)
		return rc;
	f->moe_predict = opts->moe_predict && opts->on_route;
	if (opts->kv_k < NS_KV_F32 || opts->kv_k > NS_KV_Q8_0 || opts->kv_v < NS_KV_F32 ||
	    opts->kv_v > NS_KV_Q8_0) {
		ns_errf(err, errlen, "forward: unknown KV cache type %d/%d", opts->kv_k, opts->kv_v);
		ns_fwd_destroy(&f);
		return -EINVAL;
	}
	f->kv_k = opts->kv_k;
	f->kv_v = opts->kv_v;
	f->attn_exact = opts->attn_exact;
	f->rb_cap = opts->n_rollback; /* the builder sizes a recurrent state's buffers by it */
	if (f->am->arch->builder >= NS_ARRAY_LEN(s_builders) ||
	    !s_builders[f->am->arch->builder]) { /* the table and this list disagree */
		ns_errf(err, errlen, "forward: no cpu builder for %s", f->am->arch->name);
		rc = -EINVAL;
	} else {
		rc = s_builders[f->am->arch->builder](f, opts->ffn_rows, err, errlen);
	}
	if (rc == 0 && opts->n_seq > 1)
		rc = ns_fwd_seqs_init(f, opts->n_seq, err, errlen); /* batch.c */
	if (rc < 0) {
		ns_fwd_destroy(&f);
		return rc;
	}
	*out = f;
	return 0;
}

int ns_fwd_matmul(struct ns_fwd *f, uint32_t tensor, uint64_t row0, uint64_t row_end,
		  const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	int rc;

	if (f->arch_matmul) /* the pass's device (its own error line) */
		return f->arch_matmul(f, tensor, row0, row_end, x, n_tok, y, ldy);
	rc = ns_weights_matmul(f->w, tensor, row0, row_end, x, n_tok, y, ldy);
	if (rc < 0)
		ns_errf(f->err, sizeof(f->err), "forward: %s", ns_weights_error(f->w));
	return rc;
}

int ns_fwd_rows(struct ns_fwd *f, uint32_t tensor, const int64_t *ids, uint64_t n, float *y)
{
	int rc = ns_weights_get_rows(f->w, tensor, ids, n, y);

	if (rc < 0)
		ns_errf(f->err, sizeof(f->err), "forward: %s", ns_weights_error(f->w));
	return rc;
}

/* ns_fwd_eval and ns_fwd_eval_mm: the checks, then chunk by chunk (mm: that call's input) */
static int s_eval(struct ns_fwd *f, const int32_t *tokens, uint32_t n, const struct ns_fwd_mm *mm,
		  float *logits, bool all)
{
	int rc = 0;

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
	/* more tokens after the mark than its log holds: no cut back into them */
	if (f->rb_on && (uint64_t)f->kv->n_past + n - f->rb_pos > f->rb_cap)
		ns_fwd_unmark(f);
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
		f->mm = mm;
		f->mm_row0 = i0;
		f->mm_n = n;
		rc = f->eval_chunk(f, tokens + i0, nb, out, all);
		f->mm = NULL;
		if (rc < 0)
			return rc;
		f->kv->n_past += nb;
	}
	return rc;
}

int ns_fwd_eval(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits, bool all)
{
	return s_eval(f, tokens, n, NULL, logits, all);
}

int ns_fwd_eval_mm(struct ns_fwd *f, const int32_t *tokens, uint32_t n,
		   const struct ns_fwd_mm *mm, float *logits, bool all)
{
	const uint32_t n_ds = f->am->hp.n_deepstack, past = f->kv->n_past;
	uint32_t end = 0; /* rows through the last image row */
	int64_t top = -1;
	int rc;

	if (!f->mm_ok || !mm || !mm->pos || !mm->is_embd || !mm->embd ||
	    (mm->deepstack ? mm->n_deepstack != n_ds : n_ds != 0)) {
		ns_errf(f->err, sizeof(f->err), "forward: %s", !f->mm_ok ?
			"this architecture takes no image input (M-RoPE)" : !mm || !mm->pos ||
			!mm->is_embd || !mm->embd ? "an image call without positions or embeddings" :
			"the image's DeepStack features do not match the model's layers");
		return -EINVAL;
	}
	for (uint64_t i = 0; i < 3ull * n; i++) {
		if (mm->pos[i] < 0 || mm->pos[i] >= INT32_MAX) {
			ns_errf(f->err, sizeof(f->err), "forward: M-RoPE position %d of row %llu",
				mm->pos[i], (unsigned long long)(i / 3));
			return -EINVAL;
		}
		top = mm->pos[i] > top ? mm->pos[i] : top;
	}
	for (uint32_t i = 0; i < n; i++)
		end = mm->is_embd[i] ? i + 1 : end;
	rc = s_eval(f, tokens, n, mm, logits, all);
	if (rc == 0) { /* text after it: position = cache position + delta */
		f->rope_delta = (int32_t)(top + 1 - (int64_t)f->kv->n_past);
		if (end)
			f->mm_end = past + end;
	}
	return rc;
}

void ns_fwd_unmark(struct ns_fwd *f)
{
	if (f->rb_on && f->arch_mark)
		(void)f->arch_mark(f, false);
	f->rb_on = false;
}

int ns_fwd_mark(struct ns_fwd *f)
{
	int rc;

	if (!f->recurrent)
		return 0; /* a KV cache is cut back anywhere */
	ns_fwd_unmark(f);
	if (!f->arch_mark || !f->rb_cap) {
		ns_errf(f->err, sizeof(f->err), "forward: this pass keeps no rollback buffers for "
			"its recurrent state");
		return -ENOTSUP;
	}
	if ((rc = f->arch_mark(f, true)) < 0)
		return rc;
	f->rb_pos = f->kv->n_past;
	f->rb_on = true;
	return 0;
}

void ns_fwd_reset(struct ns_fwd *f)
{
	ns_fwd_unmark(f);
	if (f->arch_cut)
		(void)f->arch_cut(f, 0, 0); /* a reset always may */
	f->kv->n_past = 0;
	f->rope_delta = 0;
	f->mm_end = 0;
	if (f->mtp)
		ns_mtp_cut(f->mtp, 0);
}

int ns_fwd_truncate(struct ns_fwd *f, uint32_t n_past)
{
	if (n_past > f->kv->n_past)
		return -EINVAL;
	if (f->recurrent && n_past && n_past != f->kv->n_past &&
	    !(f->rb_on && n_past >= f->rb_pos)) {
		ns_errf(f->err, sizeof(f->err), "forward: a recurrent state cannot go back to "
			"position %u of %u (only to 0%s)", n_past, f->kv->n_past,
			f->rb_on ? ", or to its mark or after" : "");
		return -EINVAL;
	}
	if (n_past && n_past < f->mm_end) { /* the M-RoPE offset before it is not kept */
		ns_errf(f->err, sizeof(f->err), "forward: a context with an image goes back "
			"only to 0 or past the image (position %u of %u)", n_past, f->mm_end);
		return -EINVAL;
	}
	if (f->arch_cut && n_past != f->kv->n_past) {
		int rc = f->arch_cut(f, 0, n_past);

		if (rc < 0)
			return rc;
		ns_fwd_unmark(f); /* a recurrent state was rolled back: the log is spent */
	}
	if (!n_past) {
		f->rope_delta = 0;
		f->mm_end = 0;
		ns_fwd_unmark(f);
	}
	f->kv->n_past = n_past; /* positions past it are written again before they are read */
	if (f->mtp) /* the MTP block's cache goes back with the trunk's (mtp.h) */
		ns_mtp_cut(f->mtp, n_past);
	return 0;
}

uint64_t ns_fwd_cache_bytes(const struct ns_fwd *f)
{
	uint64_t b = f->arch_cache_bytes;

	for (uint32_t s = 0; s < ns_fwd_n_seq(f); s++) {
		const struct ns_kvcache *c = s ? f->seq_kv[s] : f->kv;

		b += c && c->k ? ns_kvcache_bytes(c) : 0;
	}
	return b;
}

uint64_t ns_fwd_state_bytes(const struct ns_fwd *f)
{
	return f->arch_state_bytes ? f->arch_state_bytes(f) : 0;
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
	if ((*f)->mtp)
		ns_mtp_free(&(*f)->mtp);
	if ((*f)->arch_destroy)
		(*f)->arch_destroy((*f)->arch);
	for (uint32_t s = 1; (*f)->seq_kv && s < (*f)->n_seq; s++)
		ns_kvcache_destroy(&(*f)->seq_kv[s]);
	free((*f)->seq_kv);
	ns_kvcache_destroy(&(*f)->kv);
	free((*f)->row_kv);
	free((*f)->row_pos);
	ns_held_free(&(*f)->held);
	ns_arch_model_free(&(*f)->am);
	free((*f)->expert_hits);
	free(*f);
	*f = NULL;
}
