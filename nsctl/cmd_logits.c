/* nsctl logits MODEL --tokens 1,2,3 -o FILE [--image F [--mmproj F]] [--backend cpu|cuda]
 *              [budget flags]
 *
 * Evaluates exactly the given token ids (no BOS added) as one prompt from position 0 and writes
 * the logits of every position as raw little-endian float32, layout [n_tokens][n_vocab],
 * through the pipeline as `nsctl run` does (the C API, neurostream.h): nsio streams the weights
 * under --mem-budget in blocks of --block-rows, nscompute multiplies them. (The forward pass
 * in-process, for debugging, is the test tool tests/forward/fwd_logits.)
 *
 * --image F (repeatable): each maximal run of the image placeholder id (--image-token, else
 * the vocabulary's <|image_pad|>) in the ids stands for the next image, as long as the tokens
 * it becomes (else one line says the count); nscompute runs the vision tower (--mmproj, else
 * the one beside the model: mmproj_beside.h) over it and evaluates the prompt with its
 * embeddings.
 *
 * --backend cuda: nscompute-cuda's pass (cfwd.h) computes the logits, the weights nsplan puts
 * in VRAM under --vram-budget resident there and the rest streamed; with images the tower
 * runs on the GPU too (nscompute/cuda/ctower.h: an arena per image of the largest image's size,
 * out of --vram-budget and in nsplan's reserve: nsctl/tower_vram.h) and its output goes
 * through the host to the GPU's pass. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_opt.h"
#include "commands.h"
#include "image_args.h"
#include "neurostream.h"
#include "ns_util.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "nsctl logits writes host floats as little-endian");

struct s_opts {
	const char *model;
	const char *tokens;
	const char *out;
	uint64_t mem_budget, ram_budget, block_rows, lookahead, vram_budget;
	const char *backend;  /* --backend: "cpu" (the default) or "cuda" */
	bool act_q8;
	bool moe_predict;     /* --moe-predict on */
	int threads;
	const char *ctk, *ctv; /* -ctk / -ctv: KV cache types, NULL = f32 */
	struct nsctl_images img; /* --image, --mmproj, --max-patches, --image-token */
};

static void s_usage(FILE *f)
{
	fprintf(f,
		"usage: nsctl logits MODEL --tokens ID[,ID...] -o FILE [options]\n"
		"  Evaluates exactly these token ids (no BOS added) as one prompt through the\n"
		"  pipeline (nsio streaming the weights under the budgets, nscompute multiplying\n"
		"  them) and writes the logits of every position to FILE as little-endian float32\n"
		"  [n_tokens][n_vocab].\n"
		"options:\n"
		"  -m, --model MODEL     the model (or as the first argument)\n"
		"  -o, --output FILE     where the logits go\n"
		"  -t, --threads N       kernel threads (default 1)\n"
		"  --act f32|q8          kernel activations: f32 (default, exact weights) or q8\n"
		"                        (int8 per 32, as llama.cpp)\n"
		"  -ctk, --cache-type-k T, -ctv, --cache-type-v T\n"
		"                        KV cache element types: f32 (default, exact), f16, q8_0\n"
		"  --mem-budget SIZE     streaming arena size (e.g. 512MB, binary units)\n"
		"  --ram-budget SIZE     RAM cache: nsplan places weights in it, nsio loads them\n"
		"                        (0, the default: none; --mem-budget 0: the engine's own)\n"
		"  --block-rows N        rows per streamed block (0: whole tensors, shrunk to fit)\n"
		"  --lookahead N         blocks in flight after the one being multiplied\n"
		"  --moe-predict on|off  MoE: prefetch predicted experts (default off; the logits\n"
		"                        are the same either way)\n"
		"  --backend cpu|cuda    compute process: nscompute, or nscompute-cuda (the GPU's\n"
		"                        pass; images: the vision tower stays on the CPU)\n"
		"  --vram-budget SIZE    GPU budget (cuda backend): nsplan puts weights in VRAM\n"
		NSCTL_IMAGE_USAGE
		"  with images, each run of the image token in the ids is the next image, as long\n"
		"  as the tokens it becomes\n");
}

static int s_parse_u64(const char *flag, const char *text, uint64_t min, uint64_t *out)
{
	if (ns_parse_count(text, min, UINT64_MAX, out) < 0) {
		fprintf(stderr, "nsctl logits: %s: bad value '%s' (an integer >= %" PRIu64 ")\n",
			flag, text ? text : "", min);
		return -EINVAL;
	}
	return 0;
}

/* A size; 0 is what leaving the flag out means (the engine's own arena, no RAM cache), as
 * for nsctl run. */
static int s_parse_size(const char *flag, const char *text, uint64_t *out)
{
	int rc = text ? ns_parse_bytes(text, out) : -EINVAL;

	if (rc < 0) {
		fprintf(stderr, "nsctl logits: %s: bad size '%s' (e.g. 512MB, 6GB)\n", flag,
			text ? text : "");
		return -EINVAL;
	}
	return 0;
}

enum {
	O_HELP = 1, O_MODEL, O_TOKENS, O_OUT, O_CTK, O_CTV, O_ACT, O_THREADS, O_MEM, O_RAM,
	O_ROWS, O_LOOKAHEAD, O_MOE_PREDICT, O_BACKEND, O_VRAM,
};

static const struct ns_opt s_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	NSCTL_OPT_MODEL(O_MODEL),
	{ "tokens", NULL, NS_OPT_VALUE, O_TOKENS },
	{ "output", "-o", NS_OPT_VALUE, O_OUT },
	{ "cache-type-k", "-ctk", NS_OPT_VALUE, O_CTK },
	{ "cache-type-v", "-ctv", NS_OPT_VALUE, O_CTV },
	{ "act", NULL, NS_OPT_VALUE, O_ACT },
	{ "moe-predict", NULL, NS_OPT_VALUE, O_MOE_PREDICT },
	{ "threads", "-t", NS_OPT_VALUE, O_THREADS },
	{ "mem-budget", NULL, NS_OPT_VALUE, O_MEM },
	{ "ram-budget", NULL, NS_OPT_VALUE, O_RAM },
	{ "block-rows", NULL, NS_OPT_VALUE, O_ROWS },
	{ "lookahead", NULL, NS_OPT_VALUE, O_LOOKAHEAD },
	{ "backend", NULL, NS_OPT_VALUE, O_BACKEND },
	{ "vram-budget", NULL, NS_OPT_VALUE, O_VRAM },
	NSCTL_IMAGE_OPTS,
};

/* One option (opt NULL: the model) spelled a: 0, or -EINVAL after one line. */
static int s_on_opt(void *user, const struct ns_opt *opt, const char *a, const char *v)
{
	struct s_opts *o = user;
	uint64_t n = 0;
	int rc = 0;

	if (opt && opt->id >= NSCTL_IMG_IMAGE)
		return nsctl_images_opt(&o->img, "nsctl logits", opt->id, a, v);
	switch (opt ? opt->id : O_MODEL) {
	case O_HELP:
		s_usage(stdout);
		exit(0);
	case O_MODEL:
		if (o->model) {
			fprintf(stderr, "nsctl logits: unexpected argument '%s'\n", v);
			return -EINVAL;
		}
		o->model = v;
		return 0;
	case O_TOKENS:
		o->tokens = v;
		return 0;
	case O_OUT:
		o->out = v;
		return 0;
	case O_CTK:
	case O_CTV: /* a may be an abbreviation getopt_long took: name the flag meant */
		return nsctl_kv_set("nsctl logits", nsctl_kv_is_flag(a) ? a : opt->id == O_CTK ?
				    "--cache-type-k" : "--cache-type-v", v, &o->ctk, &o->ctv);
	case O_ACT:
		if (strcmp(v, "f32") && strcmp(v, "q8")) {
			fprintf(stderr, "nsctl logits: %s f32|q8 (got '%s')\n", a, v);
			return -EINVAL;
		}
		o->act_q8 = !strcmp(v, "q8");
		return 0;
	case O_MOE_PREDICT:
		if (strcmp(v, "on") && strcmp(v, "off")) {
			fprintf(stderr, "nsctl logits: %s on|off (got '%s')\n", a, v);
			return -EINVAL;
		}
		o->moe_predict = !strcmp(v, "on");
		return 0;
	case O_BACKEND:
		if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
			fprintf(stderr, "nsctl logits: %s cpu|cuda (got '%s')\n", a, v);
			return -EINVAL;
		}
		o->backend = v;
		return 0;
	case O_VRAM:
		return s_parse_size(a, v, &o->vram_budget);
	case O_THREADS:
		rc = s_parse_u64(a, v, 1, &n);
		if (rc == 0 && n > 1024) {
			fprintf(stderr, "nsctl logits: %s %s is too many\n", a, v);
			rc = -EINVAL;
		}
		o->threads = (int)n;
		return rc;
	case O_MEM:
		return s_parse_size(a, v, &o->mem_budget);
	case O_RAM:
		return s_parse_size(a, v, &o->ram_budget);
	case O_ROWS:
		rc = s_parse_u64(a, v, 0, &o->block_rows);
		if (rc == 0 && o->block_rows > UINT32_MAX) {
			fprintf(stderr, "nsctl logits: %s %s is too many (at most %u)\n", a, v,
				UINT32_MAX);
			rc = -EINVAL;
		}
		return rc;
	case O_LOOKAHEAD:
		rc = s_parse_u64(a, v, 0, &o->lookahead);
		if (rc == 0 && o->lookahead > 1024) {
			fprintf(stderr, "nsctl logits: %s %s is too many\n", a, v);
			rc = -EINVAL;
		}
		return rc;
	}
	return -EINVAL;
}

static int s_parse_args(int argc, char **argv, struct s_opts *o)
{
	int rc;

	memset(o, 0, sizeof(*o));
	o->lookahead = UINT64_MAX;
	o->threads = 1;
	o->img.image_token = -1;
	rc = ns_opt_parse("nsctl logits", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt, o);
	if (rc < 0)
		return rc;
	if (!o->model || !o->tokens || !o->out) {
		fprintf(stderr, "nsctl logits: %s (usage: nsctl logits MODEL --tokens ID[,ID...] "
			"-o FILE [options]; --help lists them)\n", !o->model ? "no MODEL given" :
			!o->tokens ? "--tokens is required" : "-o FILE is required");
		return -EINVAL;
	}
	if (o->vram_budget && (!o->backend || strcmp(o->backend, "cuda"))) {
		fprintf(stderr, "nsctl logits: --vram-budget is the cuda backend's (add --backend "
			"cuda)\n");
		return -EINVAL;
	}
	return 0;
}

/* "1,2,3" -> malloc'd ids; count in *n. Returns 0 or -EINVAL with a message printed. */
static int s_parse_tokens(const char *text, int32_t **out, uint32_t *n)
{
	size_t cap = 1;
	const char *p = text;
	int32_t *ids;

	for (const char *c = text; *c; c++)
		cap += *c == ',';
	if (cap > UINT32_MAX || !(ids = malloc(cap * sizeof(*ids)))) {
		fprintf(stderr, "nsctl logits: too many tokens\n");
		return -EINVAL;
	}
	*n = 0;
	for (;;) {
		char *end;
		long long v;

		if (*p < '0' || *p > '9') {
			fprintf(stderr, "nsctl logits: --tokens: expected a token id at '%s'\n", p);
			free(ids);
			return -EINVAL;
		}
		errno = 0;
		v = strtoll(p, &end, 10);
		if (errno || v > INT32_MAX || (*end && *end != ',')) {
			fprintf(stderr, "nsctl logits: --tokens: bad token id at '%s'\n", p);
			free(ids);
			return -EINVAL;
		}
		ids[(*n)++] = (int32_t)v;
		if (!*end)
			break;
		p = end + 1;
	}
	*out = ids;
	return 0;
}

static int s_write_all(const char *path, const float *v, uint64_t n)
{
	FILE *f = fopen(path, "wb");
	int ok;

	if (!f) {
		fprintf(stderr, "nsctl logits: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	ok = fwrite(v, sizeof(float), (size_t)n, f) == (size_t)n;
	ok &= fclose(f) == 0;
	if (!ok) {
		fprintf(stderr, "nsctl logits: writing %s failed\n", path);
		return -EIO;
	}
	return 0;
}

/* The pipeline through the C API. */
static int s_logits(struct s_opts *o, const int32_t *ids, uint32_t n)
{
	struct ns_engine_opts eo;
	struct ns_engine *e = NULL;
	char err[512];
	float *logits = NULL;
	uint64_t n_out;
	int rc, status = 1;

	ns_engine_opts_default(&eo);
	eo.mem_budget = o->mem_budget;
	eo.ram_budget = o->ram_budget;
	eo.block_rows = o->block_rows;
	eo.lookahead = o->lookahead == UINT64_MAX ? -1 : (int32_t)o->lookahead;
	eo.threads = o->threads;
	eo.act_q8 = o->act_q8;
	eo.moe_predict = o->moe_predict;
	eo.cache_type_k = o->ctk;
	eo.cache_type_v = o->ctv;
	eo.n_ctx = n;
	if (o->backend)
		eo.backend = o->backend;
	eo.vram_budget = o->vram_budget;
	/* a RAM tier and VRAM windows need nsplan's plan (else nsio and nscompute ignore them) */
	eo.no_plan = !o->ram_budget && !o->vram_budget;
	/* images, the tower and the context before anything starts (image_args.h) */
	if ((rc = nsctl_images_check(&o->img, "nsctl logits", o->model, n, &eo)))
		return rc;
	rc = ns_engine_load(o->model, &eo, &e, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "nsctl logits: %s\n", err);
		return rc == -EINVAL || rc == -ENOSPC ? 2 : 1;
	}
	if (ns_mul_u64_overflow(n, ns_engine_n_vocab(e), &n_out) ||
	    n_out > SIZE_MAX / sizeof(float) || !(logits = malloc((size_t)n_out * sizeof(float)))) {
		fprintf(stderr, "nsctl logits: no memory for %u x %u logits\n", n,
			ns_engine_n_vocab(e));
		goto out;
	}
	rc = ns_engine_set_images(e, o->img.path, o->img.n);
	if (rc == 0)
		rc = ns_engine_logits(e, ids, n, logits);
	if (rc < 0) {
		fprintf(stderr, "nsctl logits: %s\n", ns_engine_error(e));
		status = rc == -EINVAL ? 2 : 1;
		goto out;
	}
	if (s_write_all(o->out, logits, n_out) < 0)
		goto out;
	{
		struct ns_engine_stats st;

		ns_engine_stats(e, &st);
		fprintf(stderr, "nsctl logits: wrote %u x %u float32 logits to %s (streamed: "
			"%llu bytes requested, arena peak %llu of %llu", n, ns_engine_n_vocab(e),
			o->out, (unsigned long long)st.req_prefill,
			(unsigned long long)st.arena_peak, (unsigned long long)st.arena_bytes);
		if (o->img.n)
			fprintf(stderr, "; %u image tokens, tower %.3f s, its weights %llu "
				"bytes of them", st.n_image_tokens, st.tower_s,
				(unsigned long long)st.req_tower);
		if (o->img.beside) /* the tower's file, said once nothing was refused */
			fprintf(stderr, "; vision tower %s, found beside the model", o->img.mmproj);
		fprintf(stderr, ")\n");
	}
	status = 0;
out:
	free(logits);
	ns_engine_free(&e);
	return status;
}

int cmd_logits(int argc, char **argv)
{
	struct s_opts o;
	int32_t *ids = NULL;
	uint32_t n = 0;
	int status;

	if (s_parse_args(argc, argv, &o) < 0 || s_parse_tokens(o.tokens, &ids, &n) < 0)
		return 2;
	status = s_logits(&o, ids, n);
	free(ids);
	return status;
}
