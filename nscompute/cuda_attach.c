/* cuda_attach.c - the cuda backend's part of nscompute (built into nscompute-cuda only): the
 * VRAM windows of the plan nsplan published, and the CUDA forward pass over the streaming
 * provider (weights not in VRAM come through nsio as on the cpu backend, then are copied to
 * the device block by block). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfwd.h"
#include "client.h"
#include "compute_draft_model.h"
#include "compute_eval.h"
#include "ctl_msg.h"
#include "model.h"
#include "ns_util.h"
#include "nscuda.h"
#include "plan.h"
#include "plan_shm.h"
#include "seg.h"
#include "vision_vram.h"

#define S_PLAN_WAIT_MS 30000

static uint64_t s_n_rows(void *ctx, uint64_t tensor)
{
	return ((const struct ns_model *)ctx)->tensors[tensor].n_rows;
}

/* The plan's VRAM-Q / VRAM-F windows: waits for nsplan's first publish. */
static int s_plan_windows(struct nsc_proc *p, struct ns_cfwd_window **out, uint64_t *n_out,
			  char *err, size_t errlen)
{
	struct ns_seg seg = { 0 };
	size_t cap = 1 << 20, len = 0;
	void *buf = NULL;
	int rc = -ENOENT;

	*out = NULL;
	*n_out = 0;
	for (int waited = 0; waited < S_PLAN_WAIT_MS; waited += 20) {
		if (!seg.base && nsplan_shm_open(&seg, p->session, err, errlen) < 0) {
			usleep(20000);
			continue;
		}
		for (;;) {
			void *nb = realloc(buf, cap);

			if (!nb) {
				rc = -ENOMEM;
				goto done;
			}
			buf = nb;
			rc = nsplan_shm_read(&seg, buf, cap, &len);
			if (rc != -ENOSPC || cap >= (1u << 30))
				break;
			cap *= 2;
		}
		if (rc != -ENOENT && rc != -EAGAIN)
			break;
		usleep(20000);
	}
	if (rc == 0)
		rc = nsplan_records_check(buf, len, p->m->n_tensors, s_n_rows, p->m, err, errlen);
	if (rc == 0) {
		const struct nsplan_header *h = buf;
		const struct nsplan_entry *e = (const struct nsplan_entry *)(h + 1);
		struct ns_cfwd_window *w = calloc(h->n_entries ? h->n_entries : 1, sizeof(*w));
		uint64_t n = 0;

		if (!w) {
			rc = -ENOMEM;
			goto done;
		}
		for (uint64_t i = 0; i < h->n_entries; i++)
			if (e[i].tier == NSPLAN_VRAM_Q || e[i].tier == NSPLAN_VRAM_F)
				w[n++] = (struct ns_cfwd_window){ e[i].tensor, e[i].row_begin,
								  e[i].row_end };
		*out = w;
		*n_out = n;
	} else if (rc == -ENOENT || rc == -EAGAIN) {
		ns_errf(err, errlen, "no residency plan was published within %d s (nsplan not "
			"running?): cannot tell which weights belong in VRAM", S_PLAN_WAIT_MS / 1000);
	} else if (rc == -ENOMEM) {
		ns_errf(err, errlen, "out of memory");
	}
done:
	free(buf);
	if (seg.base)
		ns_seg_unmap(&seg);
	return rc < 0 ? rc : 0;
}

/* The draft model's VRAM (--draft-model on cuda): its arena comes out of --vram-budget, as
 * nsctl counted it (nsplan's reserve holds it: budgets.c); one line when it cannot. */
static int s_draft_need(struct nsc_proc *p, uint64_t *need, char *err, size_t errlen)
{
	char why[NS_ERR_LEN], a[32], b[32];
	int rc;

	*need = 0;
	if (!p->draft_path || !p->n_ctx) /* no -c: the pass refuses it below */
		return 0;
	rc = nsc_dmodel_vram_need(p->draft_path, p->n_ctx, need, why, sizeof(why));
	if (rc < 0)
		return ns_errf(err, errlen, "--draft-model %.200s: %.200s", p->draft_path, why), rc;
	if (p->vram_budget && *need >= p->vram_budget)
		return ns_errf(err, errlen, "--draft-model %.200s: its %s of VRAM (weights, KV cache "
			       "and scratch at -c %u) does not fit in --vram-budget %s",
			       p->draft_path, ns_format_bytes(*need, a, sizeof(a)), p->n_ctx,
			       ns_format_bytes(p->vram_budget, b, sizeof(b))), -ENOMEM;
	return 0;
}

/* The vision tower's VRAM (--mmproj on cuda): the arena of the largest image the limits and
 * -c let through (vision_vram.h, the figure nsctl reserves), taken out of --vram-budget
 * beside the draft's; one line when the two do not leave the pass anything. */
static int s_tower_need(struct nsc_proc *p, uint64_t draft, uint64_t *need, char *err,
			size_t errlen)
{
	const struct ns_image_limits lim = { .max_tokens = p->img_max_tokens,
					     .min_pixels = p->img_min_pixels,
					     .max_pixels = p->img_max_pixels };
	struct ns_model *m = NULL;
	struct ns_vision_hparams hp;
	struct ns_vision_vram vn;
	char why[NS_ERR_LEN], a[32], b[32];
	int rc;

	*need = 0;
	if (!p->mmproj_path || !p->n_ctx) /* no -c: the pass refuses it below */
		return 0;
	rc = ns_model_open(p->mmproj_path, &m, why, sizeof(why));
	if (rc == 0)
		rc = ns_vision_hparams_load(m, &hp, why, sizeof(why));
	if (rc == 0)
		rc = ns_vision_vram_largest(m, &hp, &lim, p->n_ctx, &vn, NULL, why, sizeof(why));
	ns_model_close(&m);
	if (rc < 0)
		return ns_errf(err, errlen, "--mmproj %.200s: %.200s", p->mmproj_path, why), rc;
	*need = vn.total;
	if (p->vram_budget && (draft >= p->vram_budget || *need >= p->vram_budget - draft))
		return ns_errf(err, errlen, "--mmproj %.200s: the vision tower's %s of VRAM (the "
			       "largest image at -c %u) does not fit in --vram-budget %s",
			       p->mmproj_path, ns_format_bytes(*need, a, sizeof(a)), p->n_ctx,
			       ns_format_bytes(p->vram_budget, b, sizeof(b))), -ENOMEM;
	return 0;
}

/* A heartbeat per slice of the draft's upload: the stall watch must not take it for a hang. */
static void s_beat(void *c)
{
	ns_client_beat(c);
}

/* The draft model resident in VRAM beside the pass (compute_draft_cuda.c). */
static int s_draft_open(struct nsc_proc *p, uint64_t need, char *err, size_t errlen)
{
	char why[NS_ERR_LEN], a[32], b[32];
	struct ns_cfwd_stats st, pst;
	int rc;

	rc = nsc_dmodel_open_cuda(p->draft_path, ns_fwd_n_ctx(p->f), p->act_q8,
				  ns_fwd_n_vocab(p->f), need, s_beat, p->c, &p->dm, why, sizeof(why));
	if (rc < 0)
		return ns_errf(err, errlen, "--draft-model %.200s: %.200s", p->draft_path, why), rc;
	ns_cfwd_stats(nsc_dmodel_fwd(p->dm), &st);
	ns_cfwd_stats(p->f, &pst);
	fprintf(stderr, "nscompute: cuda: draft model: %s of weights in VRAM, arena %s; the two "
		"arenas %" PRIu64 " B of --vram-budget %" PRIu64 " B\n",
		ns_format_bytes(st.vram_bytes, a, sizeof(a)),
		ns_format_bytes(st.vram_budget, b, sizeof(b)), st.vram_budget + pst.vram_budget,
		p->vram_budget);
	return 0;
}

int nsc_cuda_attach(struct nsc_proc *p, char *err, size_t errlen)
{
	struct ns_cfwd_window *w = NULL;
	struct ns_cfwd_opts o = { 0 };
	struct ns_cfwd_stats st;
	uint64_t n = 0, draft = 0;
	int rc = s_draft_need(p, &draft, err, errlen);

	if (rc == 0)
		rc = s_tower_need(p, draft, &p->tower_vram, err, errlen);

	if (rc == 0 && p->vram_budget)
		rc = s_plan_windows(p, &w, &n, err, errlen);
	if (rc < 0)
		return rc;
	o.n_ctx = p->n_ctx;
	o.act_q8 = p->act_q8; /* int8 activations in decode GEMVs, as the CPU's --act q8 */
	o.kv_k = p->kv_k;     /* -ctk / -ctv: the cache the CPU pass would keep */
	o.kv_v = p->kv_v;
	/* the draft's and the tower's arenas out of the budget (s_tower_need: they leave some) */
	o.vram_budget = p->vram_budget ? p->vram_budget - draft - p->tower_vram : 0;
	o.reserve_vram = 0; /* exactly what KV, scratch, vectors and staging take */
	o.vram = w;
	o.n_vram = n;
	o.on_route = nsc_route_cb;
	o.route_user = p;
	/* speculative decoding on a recurrent model: a pass's tokens can be cut back
	 * (ns_fwd_mark); the copy and log are in VRAM, nsplan's reserve counts them */
	o.n_rollback = 1 + NS_CMSG_MAX_DRAFT;
	rc = ns_cfwd_new(p->m, p->w, &o, &p->f, err, errlen);
	free(w);
	if (rc == 0) { /* page-locked, the arena's blocks go to the device by DMA */
		const void *base;
		uint64_t bytes;
		char e[256];

		ns_client_arena_map(p->c, &base, &bytes);
		if (ns_cuda_host_register_ro(base, bytes, e, sizeof(e)) == 0)
			p->arena_pinned = base;
		else
			fprintf(stderr, "nscompute: cuda: the arena stays pageable (%s); copies from "
				"it are slower\n", e);
	}
	if (rc == 0) {
		char a[32], b[32], c[32];

		ns_cfwd_stats(p->f, &st);
		fprintf(stderr, "nscompute: cuda: %s of weights in %llu VRAM windows, arena %s "
			"(%s used)\n", ns_format_bytes(st.vram_bytes, a, sizeof(a)),
			(unsigned long long)n, ns_format_bytes(st.vram_budget, b, sizeof(b)),
			ns_format_bytes(st.vram_used, c, sizeof(c)));
	}
	if (rc == 0 && p->draft_path)
		rc = s_draft_open(p, draft, err, errlen);
	if (rc == 0 && p->vram_budget && p->tower_vram) /* the budget's three shares, exact */
		fprintf(stderr, "nscompute: cuda: --vram-budget %" PRIu64 " B: the pass's arena %"
			PRIu64 " B, the draft model's %" PRIu64 " B, the vision tower's %" PRIu64
			" B\n", p->vram_budget, st.vram_budget, draft, p->tower_vram);
	return rc;
}

/* Larger buffers hold a prompt's logits for `nsctl logits`, copied once: locking them would
 * cost more than it saves. 64 MiB is over a hundred rows of a 150k vocabulary. */
#define S_PIN_LOGITS_MAX (64u << 20)

void nsc_cuda_logits_pin(struct nsc_proc *p)
{
	const size_t bytes = (size_t)p->logits_cap * sizeof(float);
	char e[256];

	if (!p->cuda || !p->logits || p->logits_pinned || bytes > S_PIN_LOGITS_MAX)
		return;
	if (ns_cuda_host_register(p->logits, bytes, e, sizeof(e)) == 0)
		p->logits_pinned = p->logits;
	else
		fprintf(stderr, "nscompute: cuda: the logits buffer stays pageable (%s); each "
			"token's copy is slower\n", e);
}

void nsc_cuda_logits_unpin(struct nsc_proc *p)
{
	if (p->logits_pinned)
		ns_cuda_host_unregister((void *)p->logits_pinned);
	p->logits_pinned = NULL;
}

void nsc_cuda_ram_map(void *ctx, const void *base, size_t bytes, bool mapped)
{
	struct nsc_proc *p = ctx;
	char e[256];

	if (!mapped) {
		if (p->ram_pinned == base)
			ns_cuda_host_unregister((void *)base);
		p->ram_pinned = NULL;
		return;
	}
	if (ns_cuda_host_register_ro(base, bytes, e, sizeof(e)) == 0)
		p->ram_pinned = base;
	else
		fprintf(stderr, "nscompute: cuda: nsio's RAM tier stays pageable (%s); copies from "
			"it are slower\n", e);
}

void nsc_cuda_detach(struct nsc_proc *p)
{
	struct ns_cfwd_stats st;

	if (p->f) {
		char a[32], b[32];

		ns_cfwd_stats(p->f, &st);
		if (st.staged_blocks)
			fprintf(stderr, "nscompute: cuda: staged %s in %llu blocks, %s of it from "
				"pageable memory\n", ns_format_bytes(st.staged_bytes, a, sizeof(a)),
				(unsigned long long)st.staged_blocks,
				ns_format_bytes(st.staged_pageable_bytes, b, sizeof(b)));
		if (st.q8_gemvs)
			fprintf(stderr, "nscompute: cuda: %llu decode GEMVs with int8 activations\n",
				(unsigned long long)st.q8_gemvs);
		if (st.logits_bytes)
			fprintf(stderr, "nscompute: cuda: copied %s of logits, %s of it to pageable "
				"memory\n", ns_format_bytes(st.logits_bytes, a, sizeof(a)),
				ns_format_bytes(st.logits_pageable_bytes, b, sizeof(b)));
	}
	nsc_dmodel_free(&p->dm); /* its own arena */
	ns_fwd_destroy(&p->f); /* device work done before the arena is unlocked */
	if (p->arena_pinned)
		ns_cuda_host_unregister((void *)p->arena_pinned);
	p->arena_pinned = NULL;
}
