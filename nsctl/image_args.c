/* image_args.c - see image_args.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "gguf.h"
#include "hparams.h"
#include "image_args.h"
#include "image_embed.h"
#include "mmproj_beside.h"
#include "model.h"
#include "ns_util.h"

int nsctl_images_add(struct nsctl_images *im, const char *who, const char *path)
{
	if (im->n >= NS_ENGINE_MAX_IMAGES) {
		fprintf(stderr, "%s: --image: at most %d images\n", who, NS_ENGINE_MAX_IMAGES);
		return -EINVAL;
	}
	im->path[im->n++] = path;
	return 0;
}

/* The text model takes images and the tower is its own: 0 or -errno with err; with no tower
 * given, the one beside the model (mmproj_beside.h), or im->mmproj left NULL when there is
 * none and no image asks for one. */
static int s_tower(struct nsctl_images *im, const char *model, struct ns_vision_hparams *vhp,
		   char *err, size_t errlen)
{
	struct ns_model *m = NULL, *t = NULL;
	struct ns_arch_model *am = NULL;
	struct ns_hparams hp;
	char why[NS_ERR_LEN];
	bool takes = false;
	int rc = ns_model_open(model, &m, err, errlen);

	if (rc < 0)
		return rc;
	if ((rc = ns_arch_bind(m, &am, why, sizeof(why))) < 0)
		ns_errf(err, errlen, "%s: %s", model, why);
	else if (!(takes = am->arch->flags & NS_ARCH_MROPE) && (im->n || im->mmproj))
		rc = (ns_errf(err, errlen, "%s: this model ('%s') takes no images: no vision "
			      "tower for it (qwen3vl, qwen3vlmoe, qwen35, qwen35moe take them)",
			      model, am->arch->name), -EINVAL);
	if (rc == 0)
		rc = ns_hparams_load(m, &hp, err, errlen);
	ns_arch_model_free(&am);
	ns_model_close(&m);
	if (rc < 0 || !takes) /* a text-only model with images only maybe later: no tower */
		return rc;
	if (!im->mmproj) {
		rc = nsctl_mmproj_beside(model, hp.n_embd, hp.n_deepstack, im->found,
					 sizeof(im->found), why, sizeof(why), err, errlen);
		if (rc < 0)
			return rc;
		if (rc == 0 && im->n)
			return ns_errf(err, errlen, "--image: no vision tower for %s: none beside it "
				       "fits (%s); name one with --mmproj FILE", model,
				       why[0] ? why : "no mmproj*.gguf there"), -ENOENT;
		if (rc == 0)
			return 0;
		im->mmproj = im->found;
		im->beside = true;
	}
	if ((rc = ns_model_open(im->mmproj, &t, err, errlen)) == 0) {
		if (!ns_vision_is_mmproj(t))
			rc = (ns_errf(err, errlen, "--mmproj %s: not a vision tower (an mmproj "
				      "GGUF)", im->mmproj), -EINVAL);
		else if ((rc = ns_vision_hparams_load(t, vhp, why, sizeof(why))) < 0)
			ns_errf(err, errlen, "--mmproj %s: %s", im->mmproj, why);
		else if (vhp->n_embd_out != hp.n_embd)
			rc = (ns_errf(err, errlen, "--mmproj %s: not the tower of %s (its "
				      "projection_dim %u, the model's n_embd %u)", im->mmproj,
				      model, vhp->n_embd_out, hp.n_embd), -EINVAL);
		else if (vhp->n_deepstack != hp.n_deepstack)
			rc = (ns_errf(err, errlen, "--mmproj %s: not the tower of %s (%u DeepStack "
				      "feature(s), the model takes %u)", im->mmproj, model,
				      vhp->n_deepstack, hp.n_deepstack), -EINVAL);
		ns_model_close(&t);
	}
	return rc;
}

int nsctl_images_check(struct nsctl_images *im, const char *who, const char *model,
		       uint32_t n_ctx, struct ns_engine_opts *eo)
{
	struct ns_image_limits lim = { .max_tokens = im->max_tokens,
				       .min_pixels = im->min_pixels,
				       .max_pixels = im->max_pixels };
	struct ns_vision_hparams vhp;
	char err[NS_ERR_LEN];
	uint64_t total = 0;
	int rc = 0;

	if (im->no_mmproj && (im->mmproj || im->n)) {
		fprintf(stderr, "%s: %s\n", who, im->mmproj ? "--mmproj and --no-mmproj: name one"
			: "--image needs a vision tower; --no-mmproj leaves it out");
		return 2;
	}
	if (im->no_mmproj || (!im->n && !im->mmproj && !im->later))
		return 0;
	rc = s_tower(im, model, &vhp, err, sizeof(err));
	if (rc == 0 && !im->mmproj) /* none beside a model images may come to later */
		return 0;

	for (uint32_t i = 0; rc == 0 && i < im->n; i++) {
		struct ns_image_file *f = NULL;
		struct ns_image_plan plan;

		rc = ns_image_embed_plan(&vhp, im->path[i], &lim, &f, &plan, err, sizeof(err));
		ns_image_close(&f);
		total += rc == 0 ? plan.n_tokens : 0;
		if (rc == 0 && n_ctx && total > n_ctx)
			rc = (ns_errf(err, sizeof(err), "%s: the images become %" PRIu64 " tokens, "
				      "more than the context of %u (-c)", im->path[i], total,
				      n_ctx), -EINVAL);
	}
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return 2;
	}
	eo->mmproj = im->mmproj;
	eo->max_image_tokens = (uint32_t)im->max_tokens;
	eo->min_image_pixels = im->min_pixels;
	eo->max_image_pixels = im->max_pixels;
	eo->image_token = (int32_t)im->image_token;
	return 0;
}

void nsctl_images_say(const struct nsctl_images *im, const char *who)
{
	if (im->beside)
		fprintf(stderr, "%s: vision tower %s (found beside the model; --mmproj FILE names "
			"another, --no-mmproj none)\n", who, im->mmproj);
}

int nsctl_images_opt(struct nsctl_images *im, const char *who, int id, const char *flag,
		     const char *v)
{
	uint64_t x = 0, hi = id == NSCTL_IMG_MAX_PATCHES ? 1u << 24 :
			     id == NSCTL_IMG_TOKEN ? INT32_MAX : 1ull << 40;

	if (id == NSCTL_IMG_IMAGE)
		return nsctl_images_add(im, who, v);
	if (id == NSCTL_IMG_MMPROJ) {
		im->mmproj = v;
		return 0;
	}
	if (id == NSCTL_IMG_NO_MMPROJ) {
		im->no_mmproj = true;
		return 0;
	}
	if (ns_parse_count(v, id == NSCTL_IMG_TOKEN ? 0 : 1, hi, &x) < 0) {
		fprintf(stderr, "%s: %s: bad value '%s' (%d..%" PRIu64 ")\n", who, flag, v,
			id == NSCTL_IMG_TOKEN ? 0 : 1, hi);
		return -EINVAL;
	}
	if (id == NSCTL_IMG_MAX_PATCHES)
		im->max_tokens = x;
	else if (id == NSCTL_IMG_MIN_PIXELS)
		im->min_pixels = x;
	else if (id == NSCTL_IMG_MAX_PIXELS)
		im->max_pixels = x;
	else
		im->image_token = (int64_t)x;
	return 0;
}
