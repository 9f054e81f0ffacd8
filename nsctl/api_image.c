/* api_image.c - images in prompts (neurostream.h ns_engine_set_images): the vision tower
 * judged at load from headers, each image judged from its header before any weight is read,
 * the placeholder runs of a prompt, and the IMAGES message that tells nscompute the files
 * (proto/ctl_msg.h; nscompute/compute_image.h runs the tower). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "engine_internal.h"
#include "gguf.h"
#include "hparams.h"
#include "image_embed.h"
#include "model.h"
#include "ns_util.h"
#include "tokenizer.h"

#define S_PAD "<|image_pad|>"

struct nse_images {
	struct ns_vision_hparams hp;
	int32_t image_id;                 /* -1: none known */
	uint32_t n;                       /* pending images */
	char *path[NS_ENGINE_MAX_IMAGES]; /* absolute */
	uint32_t tokens[NS_ENGINE_MAX_IMAGES];
};

/* The model takes images: an architecture with M-RoPE (the cpu and the cuda pass). */
static int s_model_takes_images(struct ns_engine *e)
{
	struct ns_arch_model *am = NULL;
	char why[NS_ERR_LEN];
	int rc = ns_arch_bind(e->m, &am, why, sizeof(why));

	if (rc == 0 && !(am->arch->flags & NS_ARCH_MROPE)) {
		ns_errf(e->err, sizeof(e->err), "--mmproj %s: this model ('%s') takes no images "
			"(its decoder has no M-RoPE image positions: qwen3vl, qwen3vlmoe, qwen35, "
			"qwen35moe do)", e->o.mmproj, am->arch->name);
		rc = -EINVAL;
	} else if (rc < 0) {
		ns_errf(e->err, sizeof(e->err), "%s", why);
	}
	ns_arch_model_free(&am);
	return rc;
}

int nse_images_load(struct ns_engine *e)
{
	struct ns_model *t = NULL;
	struct ns_hparams thp;
	char why[NS_ERR_LEN];
	int rc;

	if (!e->o.mmproj)
		return 0;
	if ((rc = s_model_takes_images(e)) < 0)
		return rc;
	if (!(e->img = calloc(1, sizeof(*e->img))))
		return ns_errf(e->err, sizeof(e->err), "out of memory"), -ENOMEM;
	rc = ns_model_open(e->o.mmproj, &t, why, sizeof(why));
	if (rc == 0 && !ns_vision_is_mmproj(t)) {
		snprintf(why, sizeof(why), "not a vision tower (an mmproj GGUF)");
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = ns_vision_hparams_load(t, &e->img->hp, why, sizeof(why));
	if (rc == 0 && (rc = ns_hparams_load(e->m, &thp, why, sizeof(why))) == 0 &&
	    thp.n_embd != e->img->hp.n_embd_out) {
		snprintf(why, sizeof(why), "not the tower of this model: its projection_dim %u, "
			 "the model's n_embd %u", e->img->hp.n_embd_out, thp.n_embd);
		rc = -EINVAL;
	} else if (rc == 0 && thp.n_deepstack != e->img->hp.n_deepstack) {
		snprintf(why, sizeof(why), "not the tower of this model: %u DeepStack feature(s), "
			 "the model takes %u", e->img->hp.n_deepstack, thp.n_deepstack);
		rc = -EINVAL;
	}
	ns_model_close(&t);
	if (rc < 0)
		return ns_errf(e->err, sizeof(e->err), "--mmproj %s: %s", e->o.mmproj, why),
		       rc == -ENOMEM ? rc : -EINVAL;
	e->img->image_id = e->o.image_token >= 0 ? e->o.image_token :
			   ns_tok_find(e->tok, S_PAD, strlen(S_PAD));
	if (e->img->image_id >= 0 && (uint32_t)e->img->image_id >= ns_tok_n_vocab(e->tok))
		return ns_errf(e->err, sizeof(e->err), "image token %d out of the vocabulary (%zu)",
			       e->img->image_id, ns_tok_n_vocab(e->tok)), -EINVAL;
	/* no placeholder: the tower could never take an image; said before anything starts */
	if (e->img->image_id < 0)
		return ns_errf(e->err, sizeof(e->err), "--mmproj %s: the vocabulary has no " S_PAD
			       " token (name the placeholder id: --image-token)", e->o.mmproj),
		       -EINVAL;
	return 0;
}

void nse_images_forget(struct ns_engine *e)
{
	if (!e->img)
		return;
	for (uint32_t i = 0; i < e->img->n; i++)
		free(e->img->path[i]);
	e->img->n = 0;
}

void nse_images_free(struct ns_engine *e)
{
	nse_images_forget(e);
	free(e->img);
	e->img = NULL;
}

bool nse_images_pending(const struct ns_engine *e)
{
	return e->img && e->img->n;
}

int ns_engine_set_images(struct ns_engine *e, const char *const *paths, uint32_t n)
{
	struct ns_image_limits lim = { .max_tokens = e->o.max_image_tokens,
				       .min_pixels = e->o.min_image_pixels,
				       .max_pixels = e->o.max_image_pixels };
	uint64_t total = 0;
	char cwd[PATH_MAX];

	if (e->img)
		nse_images_forget(e);
	if (!n)
		return 0;
	if (!e->img)
		return ns_errf(e->err, sizeof(e->err), "images given, but the engine has no vision "
			       "tower (ns_engine_opts.mmproj, nsctl --mmproj)"), -EINVAL;
	if (e->img->image_id < 0)
		return ns_errf(e->err, sizeof(e->err), "images given, but the vocabulary has no "
			       S_PAD " token (name the placeholder id: --image-token)"), -EINVAL;
	if (n > NS_ENGINE_MAX_IMAGES)
		return ns_errf(e->err, sizeof(e->err), "%u images: at most %d", n,
			       NS_ENGINE_MAX_IMAGES), -EINVAL;
	if (!getcwd(cwd, sizeof(cwd)))
		return ns_errf(e->err, sizeof(e->err), "getcwd: %s", strerror(errno)), -errno;
	for (uint32_t i = 0; i < n; i++) {
		struct ns_image_file *f = NULL;
		struct ns_image_plan plan;
		char *abs;
		int rc = ns_image_embed_plan(&e->img->hp, paths[i], &lim, &f, &plan, e->err,
					     sizeof(e->err));

		ns_image_close(&f);
		if (rc < 0) {
			nse_images_forget(e);
			return rc == -ENOMEM ? rc : -EINVAL;
		}
		total += plan.n_tokens;
		if (total > e->n_ctx) {
			ns_errf(e->err, sizeof(e->err), "%s: the images become %" PRIu64 " tokens, "
				"more than the context of %u (-c)", paths[i], total, e->n_ctx);
			nse_images_forget(e);
			return -EINVAL;
		}
		if (paths[i][0] == '/')
			abs = strdup(paths[i]);
		else if ((abs = malloc(strlen(cwd) + strlen(paths[i]) + 2)))
			sprintf(abs, "%s/%s", cwd, paths[i]);
		if (!abs || strlen(abs) > NS_CMSG_MAX_PATH) {
			ns_errf(e->err, sizeof(e->err), "%s: %s", paths[i], abs ? "path too long" :
				"out of memory");
			free(abs);
			nse_images_forget(e);
			return abs ? -EINVAL : -ENOMEM;
		}
		e->img->path[i] = abs;
		e->img->tokens[i] = (uint32_t)plan.n_tokens;
		e->img->n = i + 1;
	}
	return 0;
}

uint32_t ns_engine_image_tokens(const struct ns_engine *e, uint32_t i)
{
	return e->img && i < e->img->n ? e->img->tokens[i] : 0;
}

int32_t ns_engine_image_token(const struct ns_engine *e)
{
	return e->img ? e->img->image_id : -1;
}

int nse_images_check_ids(struct ns_engine *e, const int32_t *ids, uint32_t n)
{
	const struct nse_images *im = e->img;
	uint32_t run = 0, k = 0;

	for (uint32_t i = 0; i <= n; i++) {
		if (i < n && ids[i] == im->image_id) {
			run++;
			continue;
		}
		if (!run)
			continue;
		if (k >= im->n)
			return ns_errf(e->err, sizeof(e->err), "the prompt has more runs of the image "
				       "token %d than the %u image(s) given", im->image_id, im->n),
			       -EINVAL;
		if (run != im->tokens[k])
			return ns_errf(e->err, sizeof(e->err), "image %u (%s) is %u tokens: its run "
				       "of the image token %d is %u long", k + 1, im->path[k],
				       im->tokens[k], im->image_id, run), -EINVAL;
		k++;
		run = 0;
	}
	if (k != im->n)
		return ns_errf(e->err, sizeof(e->err), "%u image(s) given, the prompt has %u "
			       "run(s) of the image token %d", im->n, k, im->image_id), -EINVAL;
	return 0;
}

int nse_images_send(struct ns_engine *e)
{
	struct ns_cmsg_images m = { .image_id = (uint32_t)e->img->image_id,
				    .max_tokens = e->o.max_image_tokens,
				    .n_images = e->img->n, .min_pixels = e->o.min_image_pixels,
				    .max_pixels = e->o.max_image_pixels };
	uint8_t *buf;
	size_t sz;
	int rc;

	for (uint32_t i = 0; i < m.n_images; i++)
		m.path[i] = e->img->path[i];
	sz = ns_cmsg_size_images(&m);
	if (!sz || !(buf = malloc(sz)))
		return ns_errf(e->err, sizeof(e->err), "out of memory"), -ENOMEM;
	rc = nse_send(e, buf, ns_cmsg_enc_images(&m, buf, sz));
	free(buf);
	return rc;
}

/* Append ids[0..n) to the growing array. */
static int s_append(int32_t **all, size_t *n_all, size_t *cap, const int32_t *ids, size_t n,
		    int32_t fill, size_t n_fill)
{
	size_t need = *n_all + n + n_fill;

	if (need > *cap) {
		size_t c = need * 2;
		int32_t *a = realloc(*all, c * sizeof(*a));

		if (!a)
			return -ENOMEM;
		*all = a;
		*cap = c;
	}
	if (n)
		memcpy(*all + *n_all, ids, n * sizeof(*ids));
	*n_all += n;
	for (size_t i = 0; i < n_fill; i++)
		(*all)[(*n_all)++] = fill;
	return 0;
}

int nse_images_encode(struct ns_engine *e, const char *text, bool add_bos, bool parse_special,
		      int32_t **ids, size_t *n)
{
	const struct nse_images *im = e->img;
	size_t cap = 0;
	uint32_t k = 0;
	int rc = 0;

	*ids = NULL;
	*n = 0;
	for (const char *p = text; rc == 0;) {
		const char *pad = strstr(p, S_PAD);
		size_t len = pad ? (size_t)(pad - p) : strlen(p);
		int32_t *part = NULL;
		size_t np = 0;

		if (pad && k >= im->n) {
			ns_errf(e->err, sizeof(e->err), "the prompt has more " S_PAD " than the %u "
				"image(s) given", im->n);
			rc = -EINVAL;
			break;
		}
		if ((len || (add_bos && p == text)) &&
		    (rc = ns_tok_encode(e->tok, p, len, add_bos && p == text, parse_special, &part,
					&np)) < 0) {
			ns_errf(e->err, sizeof(e->err), "cannot tokenize the prompt");
			break;
		}
		rc = s_append(ids, n, &cap, part, np, im->image_id, pad ? im->tokens[k] : 0);
		free(part);
		if (!pad)
			break;
		k++;
		p = pad + strlen(S_PAD);
	}
	if (rc == 0 && k != im->n) {
		ns_errf(e->err, sizeof(e->err), "%u image(s) given, the prompt has %u " S_PAD,
			im->n, k);
		rc = -EINVAL;
	}
	if (rc < 0) {
		free(*ids);
		*ids = NULL;
		*n = 0;
	}
	return rc == -ENOMEM ? (ns_errf(e->err, sizeof(e->err), "out of memory"), rc) : rc;
}
