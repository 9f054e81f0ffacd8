/* cfwd_dnet.c - a Gated DeltaNet layer's mixer on the device (qwen35, qwen35moe), as
 * nscompute/forward/deltanet.c computes it (deltanet.h; xb: the normed input, one row per
 * token of the chunk):
 *     qkv, z, b, a = xb Wqkv^T, xb Wgate^T, xb Wbeta^T, xb Walpha^T
 *     qkv = silu(conv(history, qkv))       the history carried from the previous chunk
 *     q, k = l2norm(q) / sqrt(dk), l2norm(k)   per key head
 *     o = the gated delta rule over the chunk's tokens in order (one state per value head)
 *     o = rmsnorm(o) * ssm_norm * silu(z)   per value head
 *     xb2 = o Wout^T                         x += xb2 in the next RMSNorm
 * The history and states live in VRAM (c->dn_state, zeroed by cfwd_eval.c when a chunk
 * starts at position 0).
 *
 * Rollback (speculative decoding; deltanet.h's contract, docs/decisions.md): a mark copies
 * every layer's history and state aside in VRAM (one device copy, c->dn_state0), and from
 * then on each chunk's recurrence inputs (qkv, a, b: what the projections made, before the
 * conv overwrites qkv) are copied to the layer's log in VRAM. A cut back to keep tokens after
 * the mark restores the copy and runs the same kernels (conv, L2 norms, delta rule: s_recur)
 * over the first keep logged tokens, no projection, so no weight is read again. The kernels
 * run the tokens one after another whatever the chunk (dnet.cu), so the state is the one a
 * pass that never saw the cut tokens would hold, bit for bit. */
#include <errno.h>
#include <math.h>

#include "cfwd_internal.h"
#include "deltanet.h"

/* The recurrence of layer d over n tokens: qkv_out = silu(conv(history, qkv_in)) (may be the
 * same buffer), q and k L2-normed in place, the delta rule from a and b into c->d_o. */
static int s_recur(struct ns_fwd *f, struct cfwd *c, const struct cfwd_dlayer *d,
		   const float *qkv_in, const float *a, const float *b, uint32_t n)
{
	const struct ns_dnet *D = c->L->dnet;
	const uint64_t kd = (uint64_t)D->n_k * D->dk;

	CFWD_TRY("conv1d", ns_cuda_conv1d_silu(c->d_qkv, qkv_in, d->hist, d->conv_w, D->CH, D->K,
					     n, c->cs));
	CFWD_TRY("l2norm", ns_cuda_l2norm(c->d_qkv, D->CH, D->n_k, D->dk, n, D->eps,
					1.0f / sqrtf((float)D->dk), c->cs));
	CFWD_TRY("l2norm", ns_cuda_l2norm(c->d_qkv + kd, D->CH, D->n_k, D->dk, n, D->eps, 1.0f,
					c->cs));
	CFWD_TRY("delta rule", ns_cuda_delta_rule(d->S, c->d_qkv, D->CH, a, b, d->dt_b, d->ssm_a,
						 D->n_k, D->n_v, D->dk, D->dv, n, c->d_o,
						 c->cs));
	return 0;
}

/* Layer d's log: qkv (rb_cap, CH), then a and b (rb_cap, n_v) each. */
static float *s_log_a(const struct cfwd *c, const struct cfwd_dlayer *d)
{
	return d->log + (uint64_t)c->rb_cap * c->L->dnet->CH;
}

static float *s_log_b(const struct cfwd *c, const struct cfwd_dlayer *d)
{
	return s_log_a(c, d) + (uint64_t)c->rb_cap * c->L->dnet->n_v;
}

/* The chunk's n tokens' inputs (c->d_qkv, d_a, d_b, before the conv) join layer d's log. */
static int s_log(struct ns_fwd *f, struct cfwd *c, struct cfwd_dlayer *d, uint32_t n)
{
	const struct ns_dnet *D = c->L->dnet;
	const uint64_t at = d->n_log;

	if (c->rb_lost || n > c->rb_cap - d->n_log) {
		c->rb_lost = true; /* the caller's bound was passed: refuse the rollback */
		return 0;
	}
	CFWD_TRY("rollback log", ns_cuda_d2d_async(d->log + at * D->CH, c->d_qkv,
						   (size_t)n * D->CH * sizeof(float), c->cs));
	CFWD_TRY("rollback log", ns_cuda_d2d_async(s_log_a(c, d) + at * D->n_v, c->d_a,
						   (size_t)n * D->n_v * sizeof(float), c->cs));
	CFWD_TRY("rollback log", ns_cuda_d2d_async(s_log_b(c, d) + at * D->n_v, c->d_b,
						   (size_t)n * D->n_v * sizeof(float), c->cs));
	d->n_log += n;
	return 0;
}

int cfwd_dnet_block(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n)
{
	const struct ns_dnet *D = c->L->dnet;
	const struct ns_dnet_layer *y = &D->layers[l];
	struct cfwd_dlayer *d = &c->dl[l];
	const uint64_t vd = (uint64_t)D->n_v * D->dv;
	int rc;

	/* qkv (n, CH), z (n, vd), b (n, n_v), a (n, n_v): the table's order */
	if ((rc = cfwd_matmul(f, y->qkv, 0, D->CH, c->xb, n, c->d_qkv, D->CH)) ||
	    (rc = cfwd_matmul(f, y->gate, 0, vd, c->xb, n, c->d_z, vd)) ||
	    (rc = cfwd_matmul(f, y->beta, 0, D->n_v, c->xb, n, c->d_b, D->n_v)) ||
	    (rc = cfwd_matmul(f, y->alpha, 0, D->n_v, c->xb, n, c->d_a, D->n_v)))
		return rc;
	cfwd_mark(c, CFWD_P_ATTN_MM);
	if (c->rb_logging && (rc = s_log(f, c, d, n)))
		return rc;
	if ((rc = s_recur(f, c, d, c->d_qkv, c->d_a, c->d_b, n)))
		return rc;
	CFWD_TRY("gated norm", ns_cuda_rmsnorm_gated(c->d_o, c->d_o, d->ssm_norm, c->d_z, D->dv,
						    n * D->n_v, D->eps, c->cs));
	cfwd_mark(c, CFWD_P_ATTN);
	/* x += o Wout^T   (n, n_embd) */
	rc = cfwd_matmul(f, y->out, 0, c->L->n_embd, c->d_o, n, c->xb2, c->L->n_embd);
	if (rc)
		return rc;
	cfwd_mark(c, CFWD_P_ATTN_MM);
	c->res_pending = true; /* x += xb2 in the FFN's RMSNorm */
	return 0;
}

/* ---------------------------------------------------------------- rollback ------------- */

int cfwd_dnet_mark(struct ns_fwd *f, bool on)
{
	struct cfwd *c = f->arch;

	c->rb_logging = false;
	if (!on)
		return 0;
	if (!c->rb_cap)
		return -ENOTSUP;
	/* the next chunk starts the sequence (cfwd_eval.c zeroes the state): the copy is zero */
	if (f->kv->n_past == 0)
		CFWD_TRY("rollback mark", ns_cuda_memset_async(c->dn_state0, 0, c->dn_state_bytes,
							       c->cs));
	else
		CFWD_TRY("rollback mark", ns_cuda_d2d_async(c->dn_state0, c->dn_state,
							    c->dn_state_bytes, c->cs));
	for (uint32_t l = 0; l < c->L->n_layer; l++)
		c->dl[l].n_log = 0;
	c->rb_logging = true;
	c->rb_lost = false;
	return 0;
}

int cfwd_dnet_cut(struct ns_fwd *f, uint32_t seq, uint32_t keep)
{
	struct cfwd *c = f->arch;
	const struct ns_dnet *D = c->L->dnet;
	uint32_t k;
	int rc;

	if (!keep || seq)
		return 0; /* the next chunk at position 0 zeroes the state */
	k = keep - f->rb_pos; /* forward.c let only keep >= rb_pos through */
	for (uint32_t l = 0; c->rb_logging && !c->rb_lost && l < c->L->n_layer; l++) {
		if (c->dl[l].log && k > c->dl[l].n_log) {
			c->rb_lost = true;
			break;
		}
	}
	if (!c->rb_logging || c->rb_lost) {
		ns_errf(f->err, sizeof(f->err), "forward: the recurrent state's log does not reach "
			"position %u (mark at %u)", keep, f->rb_pos);
		return -ERANGE;
	}
	c->rb_logging = false; /* the log is spent, whatever happens below */
	CFWD_TRY("rollback", ns_cuda_d2d_async(c->dn_state, c->dn_state0, c->dn_state_bytes,
					       c->cs));
	/* the recurrence again over the kept tokens from their logged inputs, n_batch at a time
	 * (the scratch's rows): the kernels' operations in the pass's order, so the same bits */
	for (uint32_t l = 0; l < c->L->n_layer; l++) {
		const struct cfwd_dlayer *d = &c->dl[l];

		if (!d->log)
			continue;
		for (uint32_t t0 = 0; t0 < k; t0 += (uint32_t)c->n_batch) {
			const uint32_t nt = k - t0 < c->n_batch ? k - t0 : (uint32_t)c->n_batch;

			if ((rc = s_recur(f, c, d, d->log + (uint64_t)t0 * D->CH,
					  s_log_a(c, d) + (uint64_t)t0 * D->n_v,
					  s_log_b(c, d) + (uint64_t)t0 * D->n_v, nt)))
				return rc;
		}
	}
	return 0;
}
