/* compute_image.c - see compute_image.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "compute_eval.h"
#include "compute_image.h"
#include "ctl_msg.h"
#include "forward.h"
#include "gguf.h"
#include "hparams.h"
#include "image_embed.h"
#include "model.h"
#include "ns_util.h"
#include "weights_stream.h"
#ifdef NS_WITH_CUDA
#include "ctower.h"
#endif

struct nsc_tower {
	struct ns_model *m;      /* the mmproj */
	struct ns_weights *w;    /* its tensors, streamed through nsio (which serves the mmproj
				  * beside the model: nsio --mmproj) */
	struct ns_vision *v;
	struct ns_vision_hparams hp;
#ifdef NS_WITH_CUDA
	struct ns_ctower *ct;    /* --backend cuda: the tower's pass on the device, or NULL */
#endif
};

/* What IMAGES said, for the next EVAL. */
struct nsc_images {
	bool bad;                /* a malformed IMAGES: the EVAL is refused */
	struct ns_cmsg_images m; /* paths point into strbuf */
	char *strbuf;
};

static void s_beat(void *c)
{
	ns_client_beat(c);
}

int nsc_tower_open(const char *path, const struct ns_model *text,
		   const struct ns_weights_stream_opts *wo, struct ns_client *c,
		   struct nsc_tower **out, char *err, size_t errlen)
{
	/* the text provider's threads, blocks and lookahead; no RAM tier (nsplan plans the
	 * text model's tensors only: a tower weight is read once per image, a text weight once
	 * per token); exact float activations, as the references */
	struct ns_weights_stream_opts so = { .n_threads = wo->n_threads,
					     .block_rows = wo->block_rows,
					     .lookahead = wo->lookahead };
	const int threads = wo->n_threads;
	struct ns_vision_opts vo = { .n_threads = threads, .progress = c ? s_beat : NULL,
				     .progress_user = c };
	struct nsc_tower *t = calloc(1, sizeof(*t));
	struct ns_hparams thp;
	char why[NS_ERR_LEN];
	int rc;

	*out = NULL;
	if (!t)
		return ns_errf(err, errlen, "out of memory"), -ENOMEM;
	rc = ns_model_open(path, &t->m, why, sizeof(why));
	if (rc == 0 && !ns_vision_is_mmproj(t->m)) {
		snprintf(why, sizeof(why), "not a vision tower (mmproj)");
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = ns_vision_hparams_load(t->m, &t->hp, why, sizeof(why));
	if (rc == 0 && (rc = ns_hparams_load(text, &thp, why, sizeof(why))) == 0 &&
	    thp.n_embd != t->hp.n_embd_out) {
		snprintf(why, sizeof(why), "its projection_dim %u is not the model's n_embd %u",
			 t->hp.n_embd_out, thp.n_embd);
		rc = -EINVAL;
	} else if (rc == 0 && thp.n_deepstack != t->hp.n_deepstack) {
		snprintf(why, sizeof(why), "%u DeepStack feature(s), the model takes %u",
			 t->hp.n_deepstack, thp.n_deepstack);
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = ns_weights_stream_new(t->m, c, &so, &t->w, why, sizeof(why));
	if (rc == 0)
		rc = ns_vision_new(t->m, t->w, &vo, &t->v, why, sizeof(why));
	if (rc < 0) {
		ns_errf(err, errlen, "--mmproj %.200s: %.200s", path, why);
		if (rc != -ENOMEM)
			rc = -EINVAL;
		nsc_tower_free(&t);
		return rc;
	}
	*out = t;
	return 0;
}

void nsc_tower_free(struct nsc_tower **tp)
{
	struct nsc_tower *t = tp ? *tp : NULL;

	if (!t)
		return;
#ifdef NS_WITH_CUDA
	if (t->ct) {
		struct ns_ctower_stats st;
		char b[32];

		ns_ctower_stats(t->ct, &st);
		fprintf(stderr, "nscompute: cuda: vision tower: %llu image(s) on the device, %s of "
			"weights staged in %llu GEMMs, arena %llu B (%llu B used)\n",
			(unsigned long long)st.encodes,
			ns_format_bytes(st.staged_bytes, b, sizeof(b)),
			(unsigned long long)st.matmuls, (unsigned long long)st.vram_arena,
			(unsigned long long)st.vram_used);
	}
	ns_ctower_destroy(&t->ct);
#endif
	ns_vision_destroy(&t->v);
	ns_weights_destroy(&t->w);
	ns_model_close(&t->m);
	free(t);
	*tp = NULL;
}

#ifdef NS_WITH_CUDA
int nsc_tower_cuda(struct nsc_tower *t, uint64_t arena, bool firm, struct ns_client *c,
		   char *err, size_t errlen)
{
	/* firm: every image in an arena of exactly `arena` bytes (its share of --vram-budget),
	 * one that needs more refused; else each image's own need */
	const struct ns_ctower_opts o = { .progress = c ? s_beat : NULL, .progress_user = c,
					  .vram_budget = firm ? arena : 0,
					  .vram_cap = firm ? arena : 0 };
	char b[32];
	int rc = ns_ctower_new(t->v, &o, &t->ct, err, errlen);

	if (rc < 0)
		return rc;
	ns_ctower_attach(t->ct); /* ns_image_embed's encode now runs on the device */
	fprintf(stderr, "nscompute: cuda: the vision tower runs on the device (an arena per "
		"image, %" PRIu64 " B (%s) for the largest%s)\n", arena,
		ns_format_bytes(arena, b, sizeof(b)), firm ? ", out of --vram-budget" : "");
	*err = 0;
	return 0;
}
#endif

void nsc_images_clear(struct nsc_proc *p)
{
	if (!p->img)
		return;
	free(p->img->strbuf);
	free(p->img);
	p->img = NULL;
}

bool nsc_images_pending(const struct nsc_proc *p)
{
	return p->img != NULL;
}

int nsc_images_set(struct nsc_proc *p, const void *buf, size_t len)
{
	struct nsc_images *im;

	nsc_images_clear(p);
	if (!(im = calloc(1, sizeof(*im))) || !(im->strbuf = malloc(len + 1))) {
		if (im)
			free(im);
		return nsc_send_error(p, -ENOMEM, "out of memory for the images");
	}
	if (ns_cmsg_dec_images(buf, len, ns_fwd_n_vocab(p->f), im->strbuf, len + 1, &im->m) < 0) {
		p->rejected++;
		fprintf(stderr, "nscompute: malformed IMAGES message rejected (%zu bytes)\n", len);
		im->bad = true;
	}
	p->img = im;
	return 0;
}

/* Each image through the tower; embeddings into the prompt's rows (is_embd), grids out. */
static int s_embed_all(struct nsc_proc *p, const struct nsc_images *im, uint32_t n,
		       struct ns_image_embedding *e, struct ns_fwd_mm_grid *grids, char *err,
		       size_t errlen)
{
	const struct ns_vision_hparams *hp = &p->tower->hp;
	struct ns_image_limits lim = { .max_tokens = im->m.max_tokens,
				       .min_pixels = im->m.min_pixels,
				       .max_pixels = im->m.max_pixels };

	for (uint32_t i = 0; i < im->m.n_images; i++) {
		struct ns_image_file *f = NULL;
		struct ns_image_plan plan;
		int rc = ns_image_embed_plan(hp, im->m.path[i], &lim, &f, &plan, err, errlen);

		if (rc == 0 && plan.n_tokens > n) {
			ns_errf(err, errlen, "%s: %" PRIu64 " tokens, more than the prompt's %u",
				im->m.path[i], plan.n_tokens, n);
			rc = -EINVAL;
		}
		if (rc == 0 && p->c) /* decoding a large file is progress too */
			ns_client_beat(p->c);
		if (rc == 0)
			rc = ns_image_embed(p->tower->v, f, &plan, &lim, &e[i], err, errlen);
		ns_image_close(&f);
		if (rc < 0)
			return rc;
		grids[i] = (struct ns_fwd_mm_grid){ plan.grid_t, plan.grid_h / hp->merge,
						    plan.grid_w / hp->merge };
	}
	return 0;
}

int nsc_images_eval(struct nsc_proc *p, const int32_t *tokens, uint32_t n, float *logits,
		    bool all, uint32_t *image_tokens, uint64_t *tower_ns, uint64_t *tower_req,
		    char *err, size_t errlen)
{
	struct ns_weights_stream_stats w0 = { 0 }, w1 = { 0 };
	struct nsc_images *im = p->img;
	struct ns_image_embedding e[NS_CMSG_MAX_IMAGES];
	struct ns_fwd_mm_grid grids[NS_CMSG_MAX_IMAGES];
	const uint32_t d = p->tower ? p->tower->hp.n_embd_out : 0;
	const uint32_t n_ds = p->tower ? p->tower->hp.n_deepstack : 0;
	int32_t *pos = NULL, next;
	uint8_t *is_embd = NULL;
	float *embd = NULL, *ds = NULL;
	uint64_t t0 = ns_now_ns();
	int rc = 0;

	memset(e, 0, sizeof(e));
	*image_tokens = 0;
	*tower_ns = 0;
	*tower_req = 0;
	p->img = NULL;
	if (p->tower)
		ns_weights_stream_stats(p->tower->w, &w0);
	if (im->bad)
		rc = (ns_errf(err, errlen, "malformed IMAGES message"), -EPROTO);
	else if (!p->tower)
		rc = (ns_errf(err, errlen, "images given, but nscompute has no vision tower "
			      "(--mmproj)"), -EINVAL);
	if (rc == 0 && ns_fwd_n_past(p->f) != 0)
		rc = (ns_errf(err, errlen, "a prompt with images must start the sequence "
			      "over"), -EINVAL);
	if (rc == 0)
		rc = s_embed_all(p, im, n, e, grids, err, errlen);
	*tower_ns = ns_now_ns() - t0;
	if (p->tower) { /* every byte of it streamed: no RAM tier for the tower */
		ns_weights_stream_stats(p->tower->w, &w1);
		*tower_req = w1.bytes - w0.bytes;
	}
	if (rc == 0) {
		pos = malloc((size_t)n * 3 * sizeof(*pos));
		is_embd = malloc(n);
		embd = calloc((size_t)n * d, sizeof(float));
		ds = n_ds ? calloc((size_t)n_ds * n * d, sizeof(float)) : NULL;
		if (!pos || !is_embd || !embd || (n_ds && !ds))
			rc = (ns_errf(err, errlen, "out of memory for %u rows of image "
				      "embeddings", n), -ENOMEM);
	}
	if (rc == 0)
		rc = ns_fwd_mm_positions(tokens, n, (int32_t)im->m.image_id, grids,
					 im->m.n_images, 0, pos, is_embd, &next, err, errlen);
	/* the i-th run of image rows takes image i's embeddings, in order */
	for (uint32_t r = 0, img = 0, k = 0; rc == 0 && r < n; r++) {
		if (!is_embd[r])
			continue;
		if (k == e[img].plan.n_tokens) {
			img++;
			k = 0;
		}
		memcpy(embd + (size_t)r * d, e[img].embd + (size_t)k * d, d * sizeof(float));
		for (uint32_t l = 0; l < n_ds; l++)
			memcpy(ds + ((size_t)l * n + r) * d,
			       e[img].deepstack + ((size_t)l * e[img].plan.n_tokens + k) * d,
			       d * sizeof(float));
		k++;
		(*image_tokens)++;
	}
	if (rc == 0) {
		struct ns_fwd_mm mm = { .is_embd = is_embd, .embd = embd, .deepstack = ds,
					.n_deepstack = n_ds, .pos = pos };

		rc = ns_fwd_eval_mm(p->f, tokens, n, &mm, logits, all);
		if (rc < 0)
			ns_errf(err, errlen, "%s", ns_fwd_error(p->f));
	}
	for (uint32_t i = 0; i < NS_CMSG_MAX_IMAGES; i++)
		ns_image_embedding_free(&e[i]);
	free(pos);
	free(is_embd);
	free(embd);
	free(ds);
	free(im->strbuf);
	free(im);
	return rc;
}
