/* nsctl image MODEL_OR_MMPROJ --image FILE [--mmproj F] [-o FILE] [--max-patches N]
 *             [--min-pixels N] [--max-pixels N] [--provider fused|ref] [--threads N] [--json]
 *
 * An image through the vision tower (nscompute/vision/image_embed.h), on its own: prints the
 * tokens the image becomes and its grid (t, h, w) in patches (Transformers' image_grid_thw),
 * and with -o writes the embeddings as raw float32 (n_tokens, n_embd * (1 + n_deepstack)):
 * per token the merger's output, then each DeepStack feature (llama.cpp's layout of an image
 * embedding, so the two compare directly).
 *
 * The tower is the mmproj given as MODEL_OR_MMPROJ or --mmproj, else the one mmproj*.gguf
 * beside the model that fits it (mmproj_beside.h). Order: the headers,
 * then the image's header and plan (a bad image or one over --max-patches tokens is refused
 * here, exit 2, before any weight is read), then the weights and the tower. The weights are
 * read into RAM (fused kernels) or per call (ref); `run --image` will stream them inside
 * nscompute instead. Exit: 0 ok, 1 runtime failure, 2 bad usage, model, mmproj or image. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_opt.h"
#include "commands.h"
#include "hparams.h"
#include "image_embed.h"
#include "mmproj_beside.h"
#include "json_out.h"
#include "ns_util.h"
#include "weights_fused.h"

#define S_USAGE "usage: nsctl image MODEL_OR_MMPROJ --image FILE [--mmproj F] [-o FILE] " \
		"[--max-patches N] [--min-pixels N] [--max-pixels N] [--provider fused|ref] " \
		"[-t|--threads N] [--json]"

struct s_opts {
	const char *model, *mmproj, *image, *out;
	struct ns_image_limits lim;
	uint64_t threads;
	bool ref, json;
};

static int s_bad(const char *what, const char *arg)
{
	fprintf(stderr, "nsctl image: %s%s%s (%s)\n", what, arg ? " " : "", arg ? arg : "",
		S_USAGE);
	return 2;
}

static int s_count(const char *flag, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	if (ns_parse_count(v, lo, hi, out) == 0)
		return 0;
	fprintf(stderr, "nsctl image: %s: bad value '%s' (%" PRIu64 "..%" PRIu64 ")\n", flag, v,
		lo, hi);
	return 2;
}

enum {
	O_HELP = 1, O_MODEL, O_JSON, O_IMAGE, O_MMPROJ, O_OUT, O_MAX_PATCHES, O_MIN_PIXELS,
	O_MAX_PIXELS, O_THREADS, O_PROVIDER,
};

/* llama.cpp's mtmd spellings where they mean the same: -m, --image, --mmproj, -t */
static const struct ns_opt s_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	NSCTL_OPT_MODEL(O_MODEL),
	{ "json", NULL, NS_OPT_SWITCH, O_JSON },
	{ "image", NULL, NS_OPT_VALUE, O_IMAGE },
	{ "mmproj", NULL, NS_OPT_VALUE, O_MMPROJ },
	{ "output", "-o", NS_OPT_VALUE, O_OUT },
	{ "max-patches", NULL, NS_OPT_VALUE, O_MAX_PATCHES },
	{ "min-pixels", NULL, NS_OPT_VALUE, O_MIN_PIXELS },
	{ "max-pixels", NULL, NS_OPT_VALUE, O_MAX_PIXELS },
	{ "threads", "-t", NS_OPT_VALUE, O_THREADS },
	{ "provider", NULL, NS_OPT_VALUE, O_PROVIDER },
};

/* One option (opt NULL: the model) spelled a: 0, or -EINVAL after one line. */
static int s_on_opt(void *user, const struct ns_opt *opt, const char *a, const char *v)
{
	struct s_opts *o = user;
	int rc = 0;

	switch (opt ? opt->id : O_MODEL) {
	case O_HELP:
		printf("%s\n", S_USAGE);
		exit(0);
	case O_MODEL:
		if (o->model)
			return s_bad("unexpected argument", v) ? -EINVAL : 0;
		o->model = v;
		return 0;
	case O_JSON:
		o->json = true;
		return 0;
	case O_IMAGE:
		o->image = v;
		return 0;
	case O_MMPROJ:
		o->mmproj = v;
		return 0;
	case O_OUT:
		o->out = v;
		return 0;
	case O_MAX_PATCHES:
		rc = s_count(a, v, 1, 1u << 24, &o->lim.max_tokens);
		break;
	case O_MIN_PIXELS:
		rc = s_count(a, v, 1, 1ull << 40, &o->lim.min_pixels);
		break;
	case O_MAX_PIXELS:
		rc = s_count(a, v, 1, 1ull << 40, &o->lim.max_pixels);
		break;
	case O_THREADS:
		rc = s_count(a, v, 1, 256, &o->threads);
		break;
	case O_PROVIDER:
		if (strcmp(v, "fused") && strcmp(v, "ref"))
			rc = s_bad("unknown option or value:", a);
		o->ref = !strcmp(v, "ref");
		break;
	}
	return rc ? -EINVAL : 0;
}

static int s_parse(int argc, char **argv, struct s_opts *o)
{
	if (ns_opt_parse("nsctl image", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt, o))
		return 2;
	if (!o->model)
		return s_bad("no MODEL_OR_MMPROJ", NULL);
	if (!o->image)
		return s_bad("no --image FILE", NULL);
	return 0;
}

/* The tower's file: MODEL itself when it is an mmproj, else --mmproj, else the one beside it
 * (mmproj_beside.h); a text model's width must be the tower's output width. */
static int s_open_tower(const struct s_opts *o, struct ns_model **tower, char *err,
			size_t errlen)
{
	struct ns_model *m = NULL;
	struct ns_hparams thp;
	char found[4096];
	const char *path = o->mmproj;
	uint64_t width = 0;
	int rc = ns_model_open(o->model, &m, err, errlen);

	if (rc < 0)
		return rc;
	if (ns_vision_is_mmproj(m) && !o->mmproj) {
		*tower = m;
		return 0;
	}
	if (ns_hparams_load(m, &thp, err, errlen) < 0) {
		ns_model_close(&m);
		return -EINVAL;
	}
	ns_model_close(&m);
	if (!path) {
		char why[NS_ERR_LEN];

		rc = nsctl_mmproj_beside(o->model, thp.n_embd, thp.n_deepstack, found, sizeof(found),
					 why, sizeof(why), err, errlen);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return ns_errf(err, errlen, "no vision tower for %s: none beside it fits (%s); "
				       "name one with --mmproj FILE", o->model,
				       why[0] ? why : "no mmproj*.gguf there"), -ENOENT;
	}
	path = path ? path : found;
	if ((rc = ns_model_open(path, tower, err, errlen)) < 0)
		return rc;
	if (!ns_vision_is_mmproj(*tower) ||
	    !ns_gguf_get_u64(ns_model_meta(*tower), "clip.vision.projection_dim", &width) ||
	    width != thp.n_embd) {
		ns_errf(err, errlen, "%s: not an mmproj for %s (projection_dim %" PRIu64 ", the "
			"model's n_embd %u)", path, o->model, width, thp.n_embd);
		ns_model_close(tower);
		return -EINVAL;
	}
	return 0;
}

static int s_write(const char *path, const struct ns_image_embedding *e)
{
	const uint64_t n = e->plan.n_tokens, d = e->n_embd;
	FILE *f = fopen(path, "wb");
	bool ok = f != NULL;

	for (uint64_t t = 0; ok && t < n; t++) {
		ok = fwrite(e->embd + t * d, sizeof(float), d, f) == d;
		for (uint32_t k = 0; ok && k < e->n_deepstack; k++)
			ok = fwrite(e->deepstack + (k * n + t) * d, sizeof(float), d, f) == d;
	}
	if (f && fclose(f) != 0)
		ok = false;
	if (!ok)
		fprintf(stderr, "nsctl image: cannot write %s\n", path);
	return ok ? 0 : 1;
}

static void s_report(const struct s_opts *o, const struct ns_image_file *f,
		     const struct ns_image_embedding *e, double secs)
{
	const struct ns_image_plan *p = &e->plan;

	if (o->json) {
		struct json_out j;

		jo_init(&j, stdout);
		jo_begin_obj(&j);
		jo_key(&j, "image");
		jo_str(&j, o->image);
		jo_key(&j, "format");
		jo_str(&j, ns_image_format_name(f->format));
		jo_key(&j, "width");
		jo_u64(&j, f->width);
		jo_key(&j, "height");
		jo_u64(&j, f->height);
		jo_key(&j, "resized_width");
		jo_u64(&j, p->width);
		jo_key(&j, "resized_height");
		jo_u64(&j, p->height);
		jo_key(&j, "grid_thw");
		jo_begin_arr(&j);
		jo_u64(&j, p->grid_t);
		jo_u64(&j, p->grid_h);
		jo_u64(&j, p->grid_w);
		jo_end_arr(&j);
		jo_key(&j, "n_tokens");
		jo_u64(&j, p->n_tokens);
		jo_key(&j, "n_embd");
		jo_u64(&j, e->n_embd);
		jo_key(&j, "n_deepstack");
		jo_u64(&j, e->n_deepstack);
		jo_key(&j, "tower_s");
		jo_f64(&j, secs);
		jo_end_obj(&j);
		return;
	}
	printf("%s: %s %ux%u -> %ux%u, grid (t, h, w) = (%u, %u, %u) patches, %" PRIu64
	       " tokens of %u%s (tower %.3f s)\n", o->image, ns_image_format_name(f->format),
	       f->width, f->height, p->width, p->height, p->grid_t, p->grid_h, p->grid_w,
	       p->n_tokens, e->n_embd, e->n_deepstack ? " + DeepStack" : "", secs);
}

int cmd_image(int argc, char **argv)
{
	struct s_opts o = { .threads = 2 };
	struct ns_weights_fused_opts fo;
	struct ns_vision_opts vo;
	struct ns_image_embedding e = { 0 };
	struct ns_vision_hparams hp;
	struct ns_image_plan plan;
	struct ns_image_file *f = NULL;
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	struct ns_vision *v = NULL;
	char err[NS_ERR_LEN];
	uint64_t t0;
	int ret, rc = s_parse(argc, argv, &o);

	if (rc)
		return rc;
	rc = 2; /* headers, then the image: bad input until the weights */
	if (s_open_tower(&o, &m, err, sizeof(err)) < 0 ||
	    ns_vision_hparams_load(m, &hp, err, sizeof(err)) < 0 ||
	    ns_image_embed_plan(&hp, o.image, &o.lim, &f, &plan, err, sizeof(err)) < 0) {
		fprintf(stderr, "nsctl image: %s\n", err);
		goto out;
	}
	fo = (struct ns_weights_fused_opts){ .n_threads = (int)o.threads };
	vo = (struct ns_vision_opts){ .n_threads = (int)o.threads };
	ret = o.ref ? ns_weights_ref_new(m, &w, err, sizeof(err))
		    : ns_weights_fused_new(m, &fo, &w, err, sizeof(err));
	if (ret == 0)
		ret = ns_vision_new(m, w, &vo, &v, err, sizeof(err));
	if (ret < 0) { /* a tensor the tower cannot use is bad input; the rest, failures */
		fprintf(stderr, "nsctl image: %s\n", err);
		rc = ret == -EINVAL ? 2 : 1;
		goto out;
	}
	rc = 1;
	t0 = ns_now_ns();
	if (ns_image_embed(v, f, &plan, &o.lim, &e, err, sizeof(err)) < 0) {
		fprintf(stderr, "nsctl image: %s\n", err);
		goto out;
	}
	s_report(&o, f, &e, (double)(ns_now_ns() - t0) / 1e9);
	rc = o.out ? s_write(o.out, &e) : 0;
out:
	ns_image_embedding_free(&e);
	ns_vision_destroy(&v);
	ns_weights_destroy(&w);
	ns_image_close(&f);
	ns_model_close(&m);
	return rc;
}
