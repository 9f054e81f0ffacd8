/* cfwd.c - see cfwd.h: the pass's creation (the model description llama.c builds, then the
 * device: arena, streams, events, buffers, vectors, windows) and destruction, its stats, and
 * its error line. The rest: cfwd_internal.h's list. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cfwd_internal.h"
#include "gemma.h"
#include "ggml_type.h"
#include "plan.h"

int cfwd_fail(struct ns_fwd *f, const char *what, int rc)
{
	ns_errf(f->err, sizeof(f->err), "forward: %s failed on the GPU: %s", what,
		rc == -EIO ? ns_cuda_last_error() : strerror(-rc));
	return rc;
}

static void s_destroy(void *arch)
{
	struct cfwd *c = arch;

	if (!c)
		return;
	if (c->cs)
		ns_cuda_stream_sync(c->cs);
	if (c->xs)
		ns_cuda_stream_sync(c->xs);
	for (int i = 0; i < 2; i++)
		if (c->side[i])
			ns_cuda_stream_sync(c->side[i]);
	cfwd_prof_finish(c);
	ns_cuda_graph_destroy(&c->graph);
	for (int i = 0; i < 2; i++) {
		ns_cuda_event_destroy(&c->copied[i]);
		ns_cuda_event_destroy(&c->freed[i]);
		ns_cuda_event_destroy(&c->joined[i]);
		ns_cuda_stream_destroy(&c->side[i]);
	}
	ns_cuda_event_destroy(&c->fork);
	ns_cuda_stream_destroy(&c->cs);
	ns_cuda_stream_destroy(&c->xs);
	ns_vram_destroy(&c->vram);
	if (c->t) {
		for (uint64_t i = 0; i < c->m->n_tensors; i++)
			free(c->t[i].w);
		free(c->t);
	}
	free(c->dl);
	free(c->dheld);
	free(c->h_sel);
	free(c->h_tok);
	free(c->h_slot);
	free(c->h_w);
	free(c->h_start);
	free(c->h_fill);
	free(c->h_x);
	free(c->h_ids);
	free(c->h_pl);
	free(c->g_k);
	free(c->g_v);
	if (c->L_destroy)
		c->L_destroy(c->G ? (void *)c->G : (void *)c->L);
	free(c);
}

int ns_cfwd_probe(char *err, size_t errlen)
{
	if (ns_cuda_device_count() > 0)
		return 0;
	ns_errf(err, errlen, "cuda: no usable CUDA device (no GPU or no driver)");
	return -ENODEV;
}

/* n_head, dv: the attention workspace's geometry (gemma: the widest head) */
static int s_cuda_init(struct cfwd *c, const struct ns_cfwd_opts *o, uint32_t n_ctx,
		       uint32_t n_head, uint32_t dv, char *err, size_t errlen)
{
	struct ns_cfwd_need need;
	uint64_t budget, reserve, state;
	int rc;

	if ((rc = ns_cfwd_probe(err, errlen)) < 0 ||
	    (rc = ns_cuda_init(o->device, err, errlen)) < 0)
		return rc;
	if ((rc = ns_cfwd_vram_need(c->m, o, &need, err, errlen)) < 0)
		return rc;
	if (ns_cuda_attn_ws_bytes(o->n_batch, n_head, n_ctx, dv) !=
	    nsplan_gpu_attn_ws(o->n_batch, n_head, n_ctx, dv)) {
		ns_errf(err, errlen, "cuda: attention workspace sizes of attn.cu and gpu_need.c "
			"disagree (a build of mismatched sources)");
		return -EINVAL;
	}
	state = need.total - need.weights;
	reserve = o->reserve_vram ? o->reserve_vram : state;
	budget = o->vram_budget ? o->vram_budget : reserve + need.weights;
	if (reserve > budget) {
		ns_errf(err, errlen, "cuda: --reserve-vram %llu exceeds --vram-budget %llu",
			(unsigned long long)reserve, (unsigned long long)budget);
		return -EINVAL;
	}
	if (state > reserve) {
		ns_errf(err, errlen, "cuda: the KV cache (%llu B for %u positions), recurrent "
			"state (%llu B), scratch (%llu B), vectors (%llu B) and staging (%llu B) "
			"need %llu B of VRAM, more than the %llu B reserved for them",
			(unsigned long long)need.kv, n_ctx, (unsigned long long)need.recurrent,
			(unsigned long long)need.scratch, (unsigned long long)need.vectors,
			(unsigned long long)need.staging, (unsigned long long)state,
			(unsigned long long)reserve);
		return -ENOMEM;
	}
	if (need.weights > budget - state) {
		ns_errf(err, errlen, "cuda: the VRAM weights need %llu B, more than the %llu B "
			"--vram-budget %llu leaves after the KV cache, scratch, vectors and staging "
			"(%llu B)", (unsigned long long)need.weights,
			(unsigned long long)(budget - state), (unsigned long long)budget,
			(unsigned long long)state);
		return -ENOMEM;
	}
	if ((rc = ns_vram_new(budget, 0, &c->vram, err, errlen)) < 0)
		return rc;
	c->stage_bytes = need.staging / 2;
	if ((rc = cfwd_prof_init(c, err, errlen)) < 0)
		return rc;
	if ((rc = ns_cuda_stream_new(&c->cs)) < 0 || (rc = ns_cuda_stream_new(&c->xs)) < 0 ||
	    (rc = ns_cuda_event_new(&c->fork)) < 0)
		goto fail;
	for (int i = 0; i < 2; i++) {
		if ((rc = ns_cuda_event_new(&c->copied[i])) < 0 ||
		    (rc = ns_cuda_event_new(&c->freed[i])) < 0 ||
		    (rc = ns_cuda_event_new(&c->joined[i])) < 0 ||
		    (rc = ns_cuda_stream_new(&c->side[i])) < 0)
			goto fail;
		if ((rc = CFWD_DA(c, &c->stage[i], 1, c->stage_bytes, 1)) < 0)
			return rc;
	}
	return 0;
fail:
	ns_errf(err, errlen, "cuda: cannot create streams and events: %s", ns_cuda_last_error());
	return rc;
}

/* Every matrix the kernels multiply has a type they compute, and whole 32-element units unless
 * it is a float type (F32/F16/BF16 rows may end in a partial unit: the kernels' tail paths).
 * The token embedding is read on the host (rows by id) unless it is also the output head. */
static int s_computable(const struct ns_model *m, const struct ns_hparams *hp, char *err,
			size_t errlen)
{
	char tb[32];

	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		const enum ns_role r = ns_arch_role(hp, t);
		const bool flt = t->type == NS_TYPE_F32 || t->type == NS_TYPE_F16 ||
				 t->type == NS_TYPE_BF16;

		if (r != NS_ROLE_MATRIX && r != NS_ROLE_EXPERT && r != NS_ROLE_ROWS_MATRIX)
			continue;
		if (!ns_cuda_type_supported(t->type)) {
			ns_errf(err, errlen, "cuda: %s is %s, a type the CUDA kernels do not "
				"compute (use the cpu backend)", t->name,
				ns_type_name(t->type, tb, sizeof(tb)));
			return -ENOTSUP;
		}
		if (t->ne[0] % 32 && !flt) {
			ns_errf(err, errlen, "cuda: %s (%s) has rows of %llu elements; the CUDA "
				"kernels need a multiple of 32 for quantized types (use the cpu "
				"backend)", t->name, ns_type_name(t->type, tb, sizeof(tb)),
				(unsigned long long)t->ne[0]);
			return -EINVAL;
		}
	}
	return 0;
}

int ns_cfwd_new(const struct ns_model *m, struct ns_weights *host,
		const struct ns_cfwd_opts *opts, struct ns_fwd **out, char *err, size_t errlen)
{
	struct ns_fwd *f;
	struct cfwd *c;
	uint32_t tok_embd;
	bool gemma;
	int rc;

	*out = NULL;
	if (!opts) {
		ns_errf(err, errlen, "cuda: no options");
		return -EINVAL;
	}
	rc = ns_fwd_alloc(m, host, opts->n_ctx, opts->n_batch, opts->on_route, opts->route_user,
			  NS_BACKEND_CUDA, &f, err, errlen);
	if (rc < 0)
		return rc;
	if ((rc = s_computable(m, &f->am->hp, err, errlen)) < 0) {
		ns_fwd_destroy(&f);
		return rc;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		ns_fwd_destroy(&f);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* the model description, as the CPU pass builds it, without its host state */
	gemma = f->am->arch->builder == NS_BUILD_GEMMA; /* gemma3, gemma4 and its MoE variant */
	rc = gemma ? ns_gemma_setup(f, 0, false, err, errlen) :
		     ns_llama_setup(f, 0, false, err, errlen);
	if (gemma)
		c->G = f->arch;
	else
		c->L = f->arch;
	c->L_destroy = f->arch_destroy;
	f->arch = c;
	f->arch_destroy = s_destroy;
	if (rc < 0)
		goto fail;
	f->eval_chunk = gemma ? cfwd_gemma_eval_chunk : cfwd_eval_chunk;
	c->m = m;
	c->am = f->am;
	c->hp = &f->am->hp;
	c->host = host;
	c->n_batch = f->n_batch;
	/* the cache's types: ns_cfwd_vram_need (s_cuda_init) refuses one the heads cannot hold */
	_Static_assert(NS_CUDA_KV_F32 == NS_KV_F32 && NS_CUDA_KV_F16 == NS_KV_F16 &&
		       NS_CUDA_KV_Q8_0 == NS_KV_Q8_0, "nscuda.h numbers the KV types as kv_type.h");
	c->kv_tk = (uint32_t)opts->kv_k;
	c->kv_tv = (uint32_t)opts->kv_v;
	f->kv_k = opts->kv_k;
	f->kv_v = opts->kv_v;
	if (!(c->t = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*c->t))) ||
	    !(c->dl = calloc(f->am->n_layer ? f->am->n_layer : 1, sizeof(*c->dl)))) {
		ns_errf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	{
		struct ns_cfwd_opts o = *opts;

		o.n_batch = f->n_batch;
		if ((rc = s_cuda_init(c, &o, f->n_ctx, gemma ? c->G->n_head : c->L->n_head,
				      gemma ? c->G->max_q / c->G->n_head : c->L->dv, err,
				      errlen)) < 0 ||
		    (rc = gemma ? cfwd_gemma_state(c, f->n_ctx, err, errlen) :
				  cfwd_state(c, f->n_ctx, o.n_rollback, err, errlen)) < 0 ||
		    (rc = cfwd_vectors(c, f->held, err, errlen)) < 0 ||
		    (rc = cfwd_windows(c, &o, err, errlen)) < 0)
			goto fail;
		/* the vectors and windows went up on the legacy stream (ns_cuda_h2d), which the
		 * pass's non-blocking streams do not wait for: they must have landed first */
		if ((rc = ns_cuda_sync()) < 0) {
			ns_errf(err, errlen, "cuda: uploading the weights failed: %s",
				ns_cuda_last_error());
			goto fail;
		}
	}
	/* --draft mtp (mtp.h): each chunk's h rows go down to the block on the host; its head
	 * comes back up (the head's VRAM windows, not a second read on the host) */
	f->mtp_h = !gemma;
	if (!gemma)
		f->arch_matmul = cfwd_host_matmul;
	/* a recurrent state's rollback (ns_fwd_mark): the device keeps the copy and the logs */
	if (c->L && c->L->dnet) {
		f->rb_cap = c->rb_cap;
		f->arch_mark = cfwd_dnet_mark;
		f->arch_cut = cfwd_dnet_cut;
	}
	/* a row lands at x + t * n_embd: the dequant kernel wants 16-byte aligned rows of x */
	tok_embd = gemma ? c->G->tok_embd : c->L->tok_embd;
	if (cfwd_whole(c, tok_embd) && (gemma ? c->G->n_embd : c->L->n_embd) % 4 == 0)
		c->embd_dev = c->t[tok_embd].w[0].dev;
	if (gemma && c->G->ple && cfwd_whole(c, c->G->ple_embd) &&
	    ((uint64_t)c->G->n_layer * c->G->ple) % 4 == 0)
		c->ple_dev = c->t[c->G->ple_embd].w[0].dev;
	/* recurrent models (qwen35) take the plain path: their graph was never run on a GPU;
	 * gemma too (its pass, cfwd_gemma.c, has no graph capture yet) */
	c->graph_ok = !opts->no_graphs && !gemma && !c->L->moe && !c->L->dnet &&
		      cfwd_all_resident(c);
	c->act_q8 = opts->act_q8;
	c->st.graphs = c->graph_ok;
	c->st.vram_budget = ns_vram_budget(c->vram);
	c->st.vram_used = ns_vram_used(c->vram);
	*out = f;
	return 0;
fail:
	ns_fwd_destroy(&f);
	return rc;
}

void ns_cfwd_stats(const struct ns_fwd *f, struct ns_cfwd_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (f && (f->eval_chunk == cfwd_eval_chunk || f->eval_chunk == cfwd_gemma_eval_chunk))
		*out = ((const struct cfwd *)f->arch)->st;
}
