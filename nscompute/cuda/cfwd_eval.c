/* cfwd_eval.c - one chunk on the device: the embedding (looked up in VRAM when it is whole
 * there, else rows from the host provider), the layers (cfwd_layer.c), the output head in
 * groups of CFWD_LOGIT_TOK tokens and the logits to the caller. An image call (ns_fwd_eval_mm:
 * the embeddings in host rows, from either tower) uploads its image rows' embeddings over their tokens', every
 * row's M-RoPE positions, and after each of the first text layers the DeepStack features of
 * its image rows. A dense model whose every weight matrix is whole in VRAM decodes a token by
 * replaying one captured CUDA graph of the whole step (the position read from device memory),
 * with the plain path's bits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfwd_internal.h"
#include "mtp.h"

/* The layers and the output head of one token into c->logits: launched, or recorded when
 * c->capturing. */
static int s_step_body(struct ns_fwd *f, struct cfwd *c)
{
	const struct ns_llama *L = c->L;
	int rc;

	for (uint32_t l = 0; l < L->n_layer; l++)
		if ((rc = cfwd_attention_block(f, c, l, 1)) || (rc = cfwd_ffn_block(f, c, l, 1)))
			return rc;
	if ((rc = cfwd_norm(f, c, c->output_norm, 1)))
		return rc;
	return cfwd_matmul(f, L->output, 0, L->n_vocab, c->xb, 1, c->logits, L->n_vocab);
}

/* Logits to the caller (c->cs synchronized: the legacy-stream copy waits for nothing),
 * counted, and counted again when the destination is pageable. */
int cfwd_download(struct cfwd *c, float *dst, const float *dev_src, uint64_t bytes)
{
	c->st.logits_bytes += bytes;
	if (ns_cuda_host_pinned(dst) == 0) /* an error counts as pinned: only a figure */
		c->st.logits_pageable_bytes += bytes;
	return ns_cuda_d2h(dst, dev_src, bytes);
}

/* One decoded token by graph replay (x already holds its embedding). Returns 0, 1 when no
 * graph could be made (the caller takes the plain path; graphs stay off), or an error. */
static int s_eval_graph(struct ns_fwd *f, struct cfwd *c, float *logits)
{
	const int64_t pos = f->kv->n_past;
	int rc, rc_end;

	/* in c->cs, so the graph sees it (a pageable source is staged before the call returns) */
	CFWD_TRY("upload", ns_cuda_copy_h2d_async(c->dev_pos, &pos, sizeof(pos), c->cs, NULL));
	if (!c->graph) {
		rc = ns_cuda_graph_begin(c->cs);
		if (rc == 0) {
			c->capturing = true;
			rc = s_step_body(f, c);
			c->capturing = false;
			rc_end = ns_cuda_graph_end(c->cs, &c->graph); /* always ends the capture */
			rc = rc ? rc : rc_end;
		}
		if (rc < 0) {
			ns_cuda_graph_destroy(&c->graph);
			c->graph_ok = false;
			c->st.graphs = false;
			f->err[0] = 0;
			return 1;
		}
	}
	CFWD_TRY("graph", ns_cuda_graph_launch(c->graph, c->cs));
	CFWD_TRY("sync", ns_cuda_stream_sync(c->cs));
	CFWD_TRY("download", cfwd_download(c, logits, c->logits, (uint64_t)c->L->n_vocab * 4));
	return 0;
}

/* x = token_embd[tokens]   (n, n_embd). With the embedding whole in VRAM, each row is
 * dequantized there (the kernel is bit-exact with the CPU's dequantization, so x is the same
 * either way); otherwise the rows come from the host provider, a round trip to nsio. */
int cfwd_rows(struct ns_fwd *f, struct cfwd *c, uint32_t tensor, const void *dev_table,
	      uint64_t width, const int32_t *tokens, uint32_t n, float *dst, float *h_buf)
{
	const struct ns_model_tensor *te = &c->m->tensors[tensor];
	int rc;

	if (dev_table) {
		for (uint32_t t = 0; t < n; t++) {
			if (tokens[t] < 0 || (uint64_t)tokens[t] >= te->n_rows) {
				ns_errf(f->err, sizeof(f->err), "forward: token id %d is outside the "
					"vocabulary (%llu)", tokens[t],
					(unsigned long long)te->n_rows);
				return -EINVAL;
			}
			CFWD_TRY("embedding", ns_cuda_dequant(te->type, (const uint8_t *)dev_table +
							   (uint64_t)tokens[t] * te->row_bytes,
							   width, 1, dst + (uint64_t)t * width,
							   c->cs));
		}
		return 0;
	}
	for (uint32_t t = 0; t < n; t++)
		c->h_ids[t] = tokens[t];
	rc = ns_weights_get_rows(c->host, tensor, c->h_ids, n, h_buf);
	if (rc < 0) {
		ns_errf(f->err, sizeof(f->err), "forward: %s", ns_weights_error(c->host));
		return rc;
	}
	/* in c->cs, ordered before the launches that read dst (ns_cuda_h2d's legacy stream is
	 * not); h_buf is pageable, staged before the call returns, so it may be refilled at once */
	CFWD_TRY("upload", ns_cuda_copy_h2d_async(dst, h_buf, (uint64_t)n * width * 4, c->cs,
					       NULL));
	return 0;
}

/* An image call (ns_fwd_eval_mm; f->mm, rows mm_row0.. of its mm_n): dst[t] = src[mm_row0 + t]
 * for the chunk's image rows, uploaded a run of consecutive rows at a time (src: host (mm_n,
 * n_embd), the call's rows; dst: device (n, n_embd)). With add, the run lands in c->xb2 and
 * is added to dst there (xb2 must be free: no residual pending). */
static int s_mm_rows(struct ns_fwd *f, struct cfwd *c, uint32_t n, const float *src, float *dst,
		     bool add)
{
	const uint64_t D = c->L->n_embd;
	const uint8_t *is_embd = f->mm->is_embd + f->mm_row0;

	for (uint32_t a = 0, b; a < n; a = b) {
		for (b = a + 1; b < n && is_embd[b] == is_embd[a]; b++)
			;
		if (!is_embd[a])
			continue;
		/* in c->cs, ordered with the launches around it (pageable: staged at once) */
		CFWD_TRY("image rows", ns_cuda_copy_h2d_async((add ? c->xb2 : dst) + a * D,
							      src + ((uint64_t)f->mm_row0 + a) * D,
							      (b - a) * D * 4, c->cs, NULL));
		if (add)
			CFWD_TRY("deepstack", ns_cuda_add(dst + a * D, c->xb2 + a * D, (b - a) * D,
							 c->cs));
	}
	return 0;
}

/* An image call's chunk: the image rows' embeddings in place of their tokens' (x), every
 * row's M-RoPE positions to the device (cfwd_layer.c rotates with them). */
static int s_mm_input(struct ns_fwd *f, struct cfwd *c, uint32_t n)
{
	int rc;

	if (!c->mpos) /* ns_fwd_eval_mm admits only M-RoPE models (mm_ok), which have it */
		return cfwd_fail(f, "m-rope positions", -EINVAL);
	if ((rc = s_mm_rows(f, c, n, f->mm->embd, c->x, false)))
		return rc;
	CFWD_TRY("m-rope positions", ns_cuda_copy_h2d_async(c->mpos, f->mm->pos + 3ull * f->mm_row0,
							    3ull * n * 4, c->cs, NULL));
	return 0;
}

/* DeepStack: the tower's features of level l added to the image rows after text layer l,
 * as the CPU's x + xb2 + ds: the layer's pending residual first, then the features. */
static int s_deepstack(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n)
{
	const uint64_t D = c->L->n_embd;

	if (c->res_pending)
		CFWD_TRY("residual", ns_cuda_add(c->x, c->xb2, n * D, c->cs));
	c->res_pending = false;
	return s_mm_rows(f, c, n, f->mm->deepstack + (uint64_t)l * f->mm_n * D, c->x, true);
}

/* --draft mtp: the MTP block (mtp.h, on the host) follows the chunk with its h rows, the
 * hidden state after output_norm: x += xb2 (the last layer's residual) for all n rows and
 * their norm, by the kernel the head's rows take (k_rmsnorm reads x + res or x alike, so the
 * logits below keep their bits), downloaded into h_x (spent: the embedding rows). */
static int s_mtp_follow(struct ns_fwd *f, struct cfwd *c, const int32_t *tokens, uint32_t n)
{
	const struct ns_llama *L = c->L;

	if (c->res_pending)
		CFWD_TRY("residual + rmsnorm", ns_cuda_add_rmsnorm(c->xb, c->x, c->xb2, c->output_norm,
								L->n_embd, n, L->eps, c->cs));
	else
		CFWD_TRY("rmsnorm", ns_cuda_rmsnorm(c->xb, c->x, c->output_norm, L->n_embd, n,
						 L->eps, c->cs));
	c->res_pending = false;
	CFWD_TRY("sync", ns_cuda_stream_sync(c->cs));
	CFWD_TRY("MTP rows", ns_cuda_d2h(c->h_x, c->xb, (size_t)n * L->n_embd * sizeof(float)));
	return ns_mtp_follow(f, f->mtp, tokens, c->h_x, n, f->row_pos[0]);
}

static int s_eval_layers(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
			 bool all)
{
	struct cfwd *c = f->arch;
	const struct ns_llama *L = c->L;
	uint32_t t0;
	int rc;

	/* x = token_embd[tokens]   (n, n_embd) */
	rc = cfwd_rows(f, c, L->tok_embd, c->embd_dev, L->n_embd, tokens, n, c->x, c->h_x);
	if (rc < 0)
		return rc;
	if (f->mm && (rc = s_mm_input(f, c, n))) /* an image's rows: its embeddings instead */
		return rc;
	c->res_pending = false; /* x is the embedding: nothing to add */
	/* a new sequence: no conv history, zero DeltaNet states (deltanet.h) */
	if (c->dn_state && f->kv->n_past == 0)
		CFWD_TRY("state reset", ns_cuda_memset_async(c->dn_state, 0, c->dn_state_bytes, c->cs));
	cfwd_mark(c, CFWD_P_EMBD);
	/* the graph rotates at the cache position: not an image call, nor text after one */
	if (n == 1 && logits && c->graph_ok && !c->prof.on && !f->mm && !f->rope_delta &&
	    !f->mtp) {
		rc = s_eval_graph(f, c, logits);
		if (rc <= 0)
			return rc;
		c->res_pending = false; /* a failed capture may have left it set */
	}
	for (uint32_t l = 0; l < L->n_layer; l++) {
		if ((rc = cfwd_attention_block(f, c, l, n)) || (rc = cfwd_ffn_block(f, c, l, n)))
			return rc;
		if (f->mm && f->mm->deepstack && l < f->mm->n_deepstack &&
		    (rc = s_deepstack(f, c, l, n)))
			return rc;
	}
	c->prof_submit_ns = c->prof.on ? ns_now_ns() : 0;
	if (f->mtp && (rc = s_mtp_follow(f, c, tokens, n)))
		return rc;
	if (!logits)
		return ns_cuda_stream_sync(c->cs) < 0 ? cfwd_fail(f, "sync", -EIO) : 0;
	/* logits = (rmsnorm(x) * output_norm) Wout^T   (all ? n : 1, n_vocab) */
	t0 = all ? 0 : n - 1;
	for (uint32_t g = t0; g < n; g += CFWD_LOGIT_TOK) {
		const uint32_t m = n - g < CFWD_LOGIT_TOK ? n - g : CFWD_LOGIT_TOK;

		const uint64_t at = (uint64_t)g * L->n_embd;

		/* x += xb2 (the last layer's residual) for these rows, then the norm */
		if (c->res_pending)
			CFWD_TRY("residual + rmsnorm",
			      ns_cuda_add_rmsnorm(c->xb, c->x + at, c->xb2 + at, c->output_norm,
						  L->n_embd, m, L->eps, c->cs));
		else
			CFWD_TRY("rmsnorm", ns_cuda_rmsnorm(c->xb, c->x + at, c->output_norm,
							 L->n_embd, m, L->eps, c->cs));
		rc = cfwd_matmul(f, L->output, 0, L->n_vocab, c->xb, m, c->logits, L->n_vocab);
		if (rc)
			return rc;
		cfwd_mark(c, CFWD_P_HEAD);
		if (g == t0)
			c->prof_submit_ns = c->prof.on ? ns_now_ns() : 0;
		if (g + m >= n)
			c->res_pending = false;
		CFWD_TRY("sync", ns_cuda_stream_sync(c->cs));
		CFWD_TRY("download", cfwd_download(c, logits + (uint64_t)(g - t0) * L->n_vocab, c->logits,
					     (uint64_t)m * L->n_vocab * 4));
	}
	return 0;
}

int cfwd_timed_chunk(struct ns_fwd *f, cfwd_chunk_fn eval, const int32_t *tokens, uint32_t n,
		     float *logits, bool all)
{
	struct cfwd *c = f->arch;
	uint64_t t0 = c->prof.on ? ns_now_ns() : 0;
	int rc;

	c->prof.n = 0;
	cfwd_mark(c, CFWD_P_EMBD); /* the start: its own time is not counted */
	rc = eval(f, tokens, n, logits, all);
	if (rc == 0)
		cfwd_prof_collect(c, t0, n);
	return rc;
}

int cfwd_eval_chunk(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
		    bool all)
{
	return cfwd_timed_chunk(f, s_eval_layers, tokens, n, logits, all);
}
