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
 * starts at position 0). */
#include <math.h>

#include "cfwd_internal.h"
#include "deltanet.h"

int cfwd_dnet_block(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n)
{
	const struct ns_dnet *D = c->L->dnet;
	const struct ns_dnet_layer *y = &D->layers[l];
	const struct cfwd_dlayer *d = &c->dl[l];
	const uint64_t vd = (uint64_t)D->n_v * D->dv, kd = (uint64_t)D->n_k * D->dk;
	int rc;

	/* qkv (n, CH), z (n, vd), b (n, n_v), a (n, n_v): the table's order */
	if ((rc = cfwd_matmul(f, y->qkv, 0, D->CH, c->xb, n, c->d_qkv, D->CH)) ||
	    (rc = cfwd_matmul(f, y->gate, 0, vd, c->xb, n, c->d_z, vd)) ||
	    (rc = cfwd_matmul(f, y->beta, 0, D->n_v, c->xb, n, c->d_b, D->n_v)) ||
	    (rc = cfwd_matmul(f, y->alpha, 0, D->n_v, c->xb, n, c->d_a, D->n_v)))
		return rc;
	cfwd_mark(c, CFWD_P_ATTN_MM);
	CFWD_TRY("conv1d", ns_cuda_conv1d_silu(c->d_qkv, c->d_qkv, d->hist, d->conv_w, D->CH, D->K,
					     n, c->cs));
	CFWD_TRY("l2norm", ns_cuda_l2norm(c->d_qkv, D->CH, D->n_k, D->dk, n, D->eps,
					1.0f / sqrtf((float)D->dk), c->cs));
	CFWD_TRY("l2norm", ns_cuda_l2norm(c->d_qkv + kd, D->CH, D->n_k, D->dk, n, D->eps, 1.0f,
					c->cs));
	CFWD_TRY("delta rule", ns_cuda_delta_rule(d->S, c->d_qkv, D->CH, c->d_a, c->d_b, d->dt_b,
						 d->ssm_a, D->n_k, D->n_v, D->dk, D->dv, n, c->d_o,
						 c->cs));
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
