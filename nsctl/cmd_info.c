/* nsctl info MODEL [--json]: describe a model from its headers alone. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cmd_opt.h"
#include "commands.h"
#include "fixed_mem.h"
#include "ggml_type.h"
#include "hparams.h"
#include "hub.h"
#include "json_out.h"
#include "mmproj_beside.h"
#include "model.h"
#include "ns_util.h"
#include "summary.h"

/* The per-sequence recurrent state nsplan counts in the fixed set (linear-attention layers:
 * conv history and states; the same at every context length). */
static int s_recurrent(const struct ns_model *m, const struct ns_hparams *hp,
		       struct nsplan_fixed *fx)
{
	char err[NS_ERR_LEN];

	return nsplan_fixed_compute(m, hp, 1, 0, fx, err, sizeof(err));
}

static const char *s_yes(bool b)
{
	return b ? "yes" : "no";
}

/* The MTP (next-token prediction) block a checkpoint carries: <arch>.nextn_predict_layers
 * layers at the end of block_count, as llama.cpp's converter writes them. The forward pass
 * runs the main layers; --draft mtp runs the block (nscompute/forward/mtp.h). */
struct s_mtp {
	uint64_t layers, first, tensors, bytes;
};

static void s_mtp_count(const struct ns_model *m, const struct ns_hparams *hp, struct s_mtp *x)
{
	memset(x, 0, sizeof(*x));
	if (!hp->n_nextn)
		return;
	x->layers = hp->n_nextn;
	x->first = hp->n_layer; /* hparams.h: n_layer counts the main layers only */
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		int64_t l = ns_tensor_layer(m->tensors[i].name);

		if (l >= 0 && (uint64_t)l >= x->first) {
			x->tensors++;
			x->bytes += m->tensors[i].n_bytes;
		}
	}
}

/* The vision tower beside a model that takes images (mmproj_beside.h), as run --image and
 * --chat would take it: tw->takes false for a model that takes none; else tw->path "" when
 * none was taken, with tw->why saying so (none fits, several, an unreadable directory). */
struct s_tower {
	bool takes;
	char path[PATH_MAX];
	char why[2 * NS_ERR_LEN];
};

static void s_tower(const struct ns_model *m, const struct ns_hparams *hp, const char *model,
		    struct s_tower *tw)
{
	struct ns_arch_model *am = NULL;
	char e[NS_ERR_LEN], passed[NS_ERR_LEN];
	int rc;

	memset(tw, 0, sizeof(*tw));
	if (ns_arch_bind(m, &am, e, sizeof(e)) < 0)
		return;
	tw->takes = am->arch->flags & NS_ARCH_MROPE;
	ns_arch_model_free(&am);
	if (!tw->takes)
		return;
	rc = nsctl_mmproj_beside(model, hp->n_embd, hp->n_deepstack, tw->path, sizeof(tw->path),
				 passed, sizeof(passed), e, sizeof(e));
	if (rc <= 0)
		tw->path[0] = 0;
	if (rc < 0)
		snprintf(tw->why, sizeof(tw->why), "%s", e);
	else if (rc == 0)
		snprintf(tw->why, sizeof(tw->why), "none beside the model fits it (%s); --mmproj "
			 "FILE names one", passed[0] ? passed : "no mmproj*.gguf there");
}

/* unrunnable: why no backend can run the model (ns_arch_check's line), NULL when one can. */
static void s_print_text(const struct ns_model *m, const struct ns_hparams *hp,
			 const struct ns_summary *s, const char *path, const char *unrunnable,
			 const struct s_tower *tw)
{
	const struct ns_gguf *g = ns_model_meta(m);
	char a[32], b[32];
	struct nsplan_fixed rec;
	struct s_mtp mtp;

	printf("model:          %s\n", path);
	printf("files:          %u shard%s, %s (%" PRIu64 " bytes)\n", m->n_shards,
	       m->n_shards == 1 ? "" : "s", ns_format_bytes(m->total_file_bytes, a, sizeof(a)),
	       m->total_file_bytes);
	if (m->format == NS_MODEL_SAFETENSORS)
		printf("safetensors:    %" PRIu64 " tensors as llama.cpp's converter names them, %"
		       PRIu64 " metadata keys from config.json and tokenizer.json\n", m->n_tensors,
		       g->n_kv);
	else
		printf("gguf:           v%u, alignment %u, %" PRIu64 " tensors, %" PRIu64
		       " metadata keys\n", g->version, g->alignment, m->n_tensors, g->n_kv);
	printf("architecture:   %s\n", hp->arch[0] ? hp->arch : "(none)");
	printf("runnable:       %s%s\n", unrunnable ? "no: " : "yes",
	       unrunnable ? unrunnable : "");
	if (hp->name[0])
		printf("name:           %s\n", hp->name);
	if (hp->has_block_count)
		printf("layers:         %u\n", hp->n_layer);
	if (hp->n_embd)
		printf("n_embd:         %u\n", hp->n_embd);
	if (hp->n_ff)
		printf("n_ff:           %u\n", hp->n_ff);
	if (hp->n_head)
		printf("heads:          %u (kv %u), head dim %u (v %u)\n", hp->n_head, hp->n_head_kv,
		       hp->head_dim_k, hp->head_dim_v);
	if (hp->n_ctx_train)
		printf("context:        %u (trained)\n", hp->n_ctx_train);
	if (hp->n_head)
		printf("rope:           base %g, %u dims%s%s%s\n", hp->rope_freq_base, hp->rope_dims,
		       hp->rope_scaling_type[0] ? ", scaling " : "", hp->rope_scaling_type,
		       hp->rope_scale > 0 ? " (factor set)" : "");
	if (hp->sliding_window)
		printf("sliding window: %u\n", hp->sliding_window);
	if (hp->n_expert)
		printf("experts:        %u, %u active per token, expert n_ff %u%s\n", hp->n_expert,
		       hp->n_expert_used, hp->n_ff_exp,
		       hp->n_expert_shared ? " (+ shared experts)" : "");
	if (s_recurrent(m, hp, &rec) == 0 && rec.n_rec_layers)
		printf("recurrent:      %s per sequence, any context (%u layers: conv history + "
		       "one state per value head)\n", ns_format_bytes(rec.recurrent_bytes, a,
		       sizeof(a)), rec.n_rec_layers);
	printf("parameters:     %" PRIu64 " (%.3f B)\n", s->n_params, (double)s->n_params / 1e9);
	printf("tensor bytes:   %s\n", ns_format_bytes(m->total_tensor_bytes, a, sizeof(a)));
	printf("by type:\n");
	for (uint32_t t = 0; t < NS_TYPE_COUNT; t++) {
		char nb[32];
		if (!s->n_tensors_by_type[t])
			continue;
		printf("  %-8s %5u tensors  %12" PRIu64 " bytes  %10s%s\n", ns_type_name(t, nb, sizeof(nb)),
		       s->n_tensors_by_type[t], s->bytes_by_type[t],
		       ns_format_bytes(s->bytes_by_type[t], a, sizeof(a)),
		       ns_type_computable(t) ? "" : "  (not computable by neurostream)");
	}
	s_mtp_count(m, hp, &mtp);
	if (mtp.layers)
		printf("mtp:            %" PRIu64 " layer%s from blk.%" PRIu64 ", %" PRIu64
		       " tensors, %s: the drafter of --draft mtp\n", mtp.layers, mtp.layers == 1 ? "" : "s",
		       mtp.first, mtp.tensors, ns_format_bytes(mtp.bytes, a, sizeof(a)));
	if (s->expert_bytes)
		printf("expert weights: %s (%.1f%% of tensor bytes)\n",
		       ns_format_bytes(s->expert_bytes, a, sizeof(a)),
		       100.0 * (double)s->expert_bytes / (double)(m->total_tensor_bytes ? m->total_tensor_bytes : 1));
	printf("tokenizer:      %s%s%s%s, %u tokens; chat template: %s\n",
	       hp->tokenizer_model[0] ? hp->tokenizer_model : "(none)",
	       hp->tokenizer_pre[0] ? " (pre " : "", hp->tokenizer_pre, hp->tokenizer_pre[0] ? ")" : "",
	       hp->n_vocab, s_yes(hp->has_chat_template));
	printf("embeddings:     %s\n", hp->tied_embeddings ? "tied (output uses token_embd)" : "untied");
	if (tw->takes && tw->path[0])
		printf("vision tower:   %s (beside the model: run --image / --chat take it)\n",
		       tw->path);
	else if (tw->takes)
		printf("vision tower:   %s\n", tw->why);
	printf("per token:      %s of weights touched per decoded token (%" PRIu64 " bytes)%s\n",
	       ns_format_bytes(s->bytes_per_token, a, sizeof(a)), s->bytes_per_token,
	       hp->n_expert ? ", active experts only" : "");
	if (s->max_row_tensor >= 0)
		printf("min budget:     --mem-budget %s (%" PRIu64 " bytes): %u blocks of one row of %s (%s)\n",
		       ns_format_bytes(s->min_mem_budget, a, sizeof(a)), s->min_mem_budget,
		       NS_DEFAULT_LOOKAHEAD + 1, m->tensors[s->max_row_tensor].name,
		       ns_format_bytes(s->max_row_bytes, b, sizeof(b)));
	if (s->n_uncomputable)
		printf("warning:        %u tensors have types neurostream cannot compute (first: %s)\n",
		       s->n_uncomputable, m->tensors[s->first_uncomputable].name);
	if (s->n_layers) {
		printf("\n%6s %8s %14s %12s %14s\n", "layer", "tensors", "bytes", "size", "experts");
		for (uint32_t l = 0; l < s->n_layers; l++) {
			const struct ns_layer_summary *ls = &s->layers[l];
			printf("%6u %8u %14" PRIu64 " %12s %14" PRIu64 "\n", l, ls->n_tensors, ls->bytes,
			       ns_format_bytes(ls->bytes, a, sizeof(a)), ls->expert_bytes);
		}
		printf("%6s %8s %14" PRIu64 " %12s\n", "other", "", s->nonlayer_bytes,
		       ns_format_bytes(s->nonlayer_bytes, a, sizeof(a)));
	}
}

/* Arrays print their first items only (as gguf-py dumps do): a 200k-token vocabulary would
 * drown the output. */
#define S_ARRAY_PREVIEW 16

static void s_json_value(struct json_out *j, const struct ns_gguf_value *v);

static void s_json_array_item(struct json_out *j, const struct ns_gguf_value *arr, uint64_t i)
{
	uint32_t it = arr->v.arr.item_type;

	if (it == NS_GGUF_STRING) {
		const struct ns_gguf_str *s = arr->v.arr.items;
		jo_strn(j, s[i].s, (size_t)s[i].len);
	} else if (it == NS_GGUF_ARRAY) {
		s_json_value(j, &((const struct ns_gguf_value *)arr->v.arr.items)[i]);
	} else if (it == NS_GGUF_BOOL) {
		jo_bool(j, ((const uint8_t *)arr->v.arr.items)[i] != 0);
	} else if (it == NS_GGUF_F32 || it == NS_GGUF_F64) {
		jo_f64(j, ns_gguf_arr_f64(arr, i));
	} else if (it == NS_GGUF_U64) {
		uint64_t u;
		memcpy(&u, (const uint8_t *)arr->v.arr.items + 8 * i, 8);
		jo_u64(j, u);
	} else {
		jo_i64(j, ns_gguf_arr_i64(arr, i));
	}
}

static void s_json_value(struct json_out *j, const struct ns_gguf_value *v)
{
	jo_begin_obj(j);
	jo_key(j, "type");
	jo_str(j, ns_gguf_vtype_name(v->type));
	if (v->type == NS_GGUF_ARRAY) {
		uint64_t n = v->v.arr.n < S_ARRAY_PREVIEW ? v->v.arr.n : S_ARRAY_PREVIEW;
		jo_key(j, "item_type");
		jo_str(j, ns_gguf_vtype_name(v->v.arr.item_type));
		jo_key(j, "length");
		jo_u64(j, v->v.arr.n);
		jo_key(j, "first");
		jo_begin_arr(j);
		for (uint64_t i = 0; i < n; i++)
			s_json_array_item(j, v, i);
		jo_end_arr(j);
	} else {
		jo_key(j, "value");
		switch (v->type) {
		case NS_GGUF_STRING: jo_strn(j, v->v.str.s, (size_t)v->v.str.len); break;
		case NS_GGUF_BOOL: jo_bool(j, v->v.b); break;
		case NS_GGUF_F32: case NS_GGUF_F64: jo_f64(j, v->v.f64); break;
		case NS_GGUF_I8: case NS_GGUF_I16: case NS_GGUF_I32: case NS_GGUF_I64:
			jo_i64(j, v->v.i64);
			break;
		default: jo_u64(j, v->v.u64); break;
		}
	}
	jo_end_obj(j);
}

static void s_json_metadata(struct json_out *j, const struct ns_model *m)
{
	const struct ns_gguf *g = ns_model_meta(m);

	jo_key(j, "metadata");
	jo_begin_obj(j);
	for (uint64_t i = 0; i < g->n_kv; i++) {
		jo_key(j, g->kv[i].key.s);
		s_json_value(j, &g->kv[i].value);
	}
	jo_end_obj(j);
}

static void s_json_tensors(struct json_out *j, const struct ns_model *m)
{
	char nb[32];

	jo_key(j, "tensors");
	jo_begin_arr(j);
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		jo_begin_obj(j);
		jo_key(j, "name"); jo_str(j, t->name);
		jo_key(j, "type"); jo_str(j, ns_type_name(t->type, nb, sizeof(nb)));
		jo_key(j, "ne");
		jo_begin_arr(j);
		for (uint32_t d = 0; d < t->n_dims; d++)
			jo_u64(j, t->ne[d]);
		jo_end_arr(j);
		jo_key(j, "shard"); jo_u64(j, t->shard);
		jo_key(j, "offset"); jo_u64(j, t->file_offset - m->shards[t->shard]->data_offset);
		jo_key(j, "file_offset"); jo_u64(j, t->file_offset);
		jo_key(j, "bytes"); jo_u64(j, t->n_bytes);
		jo_end_obj(j);
	}
	jo_end_arr(j);
}

static void s_print_json(const struct ns_model *m, const struct ns_hparams *hp,
			 const struct ns_summary *s, const char *path, const char *unrunnable,
			 const struct s_tower *tw,
			 bool with_meta, bool with_tensors)
{
	const struct ns_gguf *g = ns_model_meta(m);
	struct nsplan_fixed rec;
	struct json_out j;
	struct s_mtp mtp;
	char nb[32];

	jo_init(&j, stdout);
	jo_begin_obj(&j);
	jo_key(&j, "path"); jo_str(&j, path);
	jo_key(&j, "n_shards"); jo_u64(&j, m->n_shards);
	jo_key(&j, "shards");
	jo_begin_arr(&j);
	for (uint32_t i = 0; i < m->n_shards; i++)
		jo_str(&j, m->shards[i]->path);
	jo_end_arr(&j);
	jo_key(&j, "file_size"); jo_u64(&j, m->total_file_bytes);
	jo_key(&j, "version"); jo_u64(&j, g->version);
	jo_key(&j, "alignment"); jo_u64(&j, g->alignment);
	jo_key(&j, "n_kv"); jo_u64(&j, g->n_kv);
	jo_key(&j, "data_offset"); jo_u64(&j, g->data_offset);
	jo_key(&j, "n_tensors"); jo_u64(&j, m->n_tensors);
	jo_key(&j, "architecture"); jo_str(&j, hp->arch);
	jo_key(&j, "runnable"); jo_bool(&j, !unrunnable);
	if (unrunnable) {
		jo_key(&j, "unrunnable_why"); jo_str(&j, unrunnable);
	}
	jo_key(&j, "name"); jo_str(&j, hp->name);
	if (tw->takes) { /* the vision tower beside the model, as run --image takes it */
		jo_key(&j, "mmproj");
		if (tw->path[0])
			jo_str(&j, tw->path);
		else
			jo_null(&j);
		if (!tw->path[0]) {
			jo_key(&j, "mmproj_why"); jo_str(&j, tw->why);
		}
	}
	jo_key(&j, "block_count");
	if (hp->has_block_count)
		jo_u64(&j, hp->n_layer);
	else
		jo_null(&j);
	jo_key(&j, "hparams");
	jo_begin_obj(&j);
	jo_key(&j, "n_embd"); jo_u64(&j, hp->n_embd);
	jo_key(&j, "n_ff"); jo_u64(&j, hp->n_ff);
	jo_key(&j, "n_head"); jo_u64(&j, hp->n_head);
	jo_key(&j, "n_head_kv"); jo_u64(&j, hp->n_head_kv);
	jo_key(&j, "head_dim_k"); jo_u64(&j, hp->head_dim_k);
	jo_key(&j, "head_dim_v"); jo_u64(&j, hp->head_dim_v);
	jo_key(&j, "n_ctx_train"); jo_u64(&j, hp->n_ctx_train);
	jo_key(&j, "rope_freq_base"); jo_f64(&j, hp->rope_freq_base);
	jo_key(&j, "rope_dims"); jo_u64(&j, hp->rope_dims);
	jo_key(&j, "rope_scaling_type"); jo_str(&j, hp->rope_scaling_type);
	jo_key(&j, "rope_scale"); jo_f64(&j, hp->rope_scale);
	jo_key(&j, "sliding_window"); jo_u64(&j, hp->sliding_window);
	jo_key(&j, "n_expert"); jo_u64(&j, hp->n_expert);
	jo_key(&j, "n_expert_used"); jo_u64(&j, hp->n_expert_used);
	jo_key(&j, "n_ff_exp"); jo_u64(&j, hp->n_ff_exp);
	jo_key(&j, "rms_eps"); jo_f64(&j, hp->rms_eps);
	jo_end_obj(&j);
	if (s_recurrent(m, hp, &rec) == 0) {
		jo_key(&j, "recurrent_state_bytes"); jo_u64(&j, rec.recurrent_bytes);
	}
	jo_key(&j, "n_params"); jo_u64(&j, s->n_params);
	jo_key(&j, "tensor_bytes"); jo_u64(&j, m->total_tensor_bytes);
	jo_key(&j, "bytes_by_type");
	jo_begin_obj(&j);
	for (uint32_t t = 0; t < NS_TYPE_COUNT; t++) {
		if (!s->n_tensors_by_type[t])
			continue;
		jo_key(&j, ns_type_name(t, nb, sizeof(nb)));
		jo_u64(&j, s->bytes_by_type[t]);
	}
	jo_end_obj(&j);
	jo_key(&j, "tensors_by_type");
	jo_begin_obj(&j);
	for (uint32_t t = 0; t < NS_TYPE_COUNT; t++) {
		if (!s->n_tensors_by_type[t])
			continue;
		jo_key(&j, ns_type_name(t, nb, sizeof(nb)));
		jo_u64(&j, s->n_tensors_by_type[t]);
	}
	jo_end_obj(&j);
	s_mtp_count(m, hp, &mtp);
	jo_key(&j, "format"); jo_str(&j, m->format == NS_MODEL_SAFETENSORS ? "safetensors" : "gguf");
	jo_key(&j, "mtp");
	jo_begin_obj(&j);
	jo_key(&j, "layers"); jo_u64(&j, mtp.layers);
	jo_key(&j, "tensors"); jo_u64(&j, mtp.tensors);
	jo_key(&j, "bytes"); jo_u64(&j, mtp.bytes);
	jo_key(&j, "run"); jo_bool(&j, false);
	jo_end_obj(&j);
	jo_key(&j, "expert_bytes"); jo_u64(&j, s->expert_bytes);
	jo_key(&j, "expert_share");
	jo_f64(&j, m->total_tensor_bytes ? (double)s->expert_bytes / (double)m->total_tensor_bytes : 0);
	jo_key(&j, "tokenizer");
	jo_begin_obj(&j);
	jo_key(&j, "model"); jo_str(&j, hp->tokenizer_model);
	jo_key(&j, "pre"); jo_str(&j, hp->tokenizer_pre);
	jo_key(&j, "n_vocab"); jo_u64(&j, hp->n_vocab);
	jo_end_obj(&j);
	jo_key(&j, "chat_template"); jo_bool(&j, hp->has_chat_template);
	jo_key(&j, "tied_embeddings"); jo_bool(&j, hp->tied_embeddings);
	jo_key(&j, "bytes_per_token"); jo_u64(&j, s->bytes_per_token);
	jo_key(&j, "min_mem_budget"); jo_u64(&j, s->min_mem_budget);
	jo_key(&j, "min_mem_budget_tensor");
	if (s->max_row_tensor >= 0)
		jo_str(&j, m->tensors[s->max_row_tensor].name);
	else
		jo_null(&j);
	jo_key(&j, "uncomputable_tensors"); jo_u64(&j, s->n_uncomputable);
	jo_key(&j, "layers");
	jo_begin_arr(&j);
	for (uint32_t l = 0; l < s->n_layers; l++) {
		jo_begin_obj(&j);
		jo_key(&j, "layer"); jo_u64(&j, l);
		jo_key(&j, "n_tensors"); jo_u64(&j, s->layers[l].n_tensors);
		jo_key(&j, "bytes"); jo_u64(&j, s->layers[l].bytes);
		jo_key(&j, "params"); jo_u64(&j, s->layers[l].params);
		jo_key(&j, "expert_bytes"); jo_u64(&j, s->layers[l].expert_bytes);
		jo_end_obj(&j);
	}
	jo_end_arr(&j);
	if (with_meta)
		s_json_metadata(&j, m);
	if (with_tensors)
		s_json_tensors(&j, m);
	jo_end_obj(&j);
}

enum { O_HELP = 1, O_MODEL, O_JSON, O_METADATA, O_TENSORS };

static const struct ns_opt s_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	NSCTL_OPT_MODEL(O_MODEL),
	{ "json", NULL, NS_OPT_SWITCH, O_JSON },
	{ "metadata", NULL, NS_OPT_SWITCH, O_METADATA },
	{ "tensors", NULL, NS_OPT_SWITCH, O_TENSORS },
};

struct s_args {
	const char *path;
	bool json, with_meta, with_tensors;
};

static int s_on_opt(void *user, const struct ns_opt *o, const char *f, const char *v)
{
	struct s_args *a = user;

	(void)f;
	switch (o ? o->id : O_MODEL) {
	case O_HELP:
		printf("usage: nsctl info MODEL [--json [--metadata] [--tensors]]\n"
		       "  -m, --model MODEL  the model (or as the first argument)\n");
		exit(0);
	case O_JSON:
		a->json = true;
		return 0;
	case O_METADATA:
		a->with_meta = true;
		return 0;
	case O_TENSORS:
		a->with_tensors = true;
		return 0;
	}
	if (a->path) {
		fprintf(stderr, "nsctl info: more than one model given ('%s')\n", v);
		return -EINVAL;
	}
	a->path = v;
	return 0;
}

int cmd_info(int argc, char **argv)
{
	struct s_args a = { 0 };
	const char *path;
	bool json, with_meta, with_tensors;
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	struct ns_summary s;
	struct s_tower tw;
	char err[NS_ERR_LEN], pulled[4096];
	int ret;

	if (ns_opt_parse("nsctl info", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt, &a))
		return 2;
	path = a.path;
	json = a.json;
	with_meta = a.with_meta;
	with_tensors = a.with_tensors;
	if ((with_meta || with_tensors) && !json) {
		fprintf(stderr, "nsctl info: --metadata and --tensors go with --json\n");
		return 2;
	}
	if (!path) {
		fprintf(stderr, "usage: nsctl info MODEL [--json [--metadata] [--tensors]]\n");
		return 2;
	}
	if ((ret = nsctl_model_arg("nsctl info", &path, pulled, sizeof(pulled))))
		return ret; /* REPO:QUANT -> the cached file */
	ret = ns_model_open(path, &m, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "nsctl info: %s\n", err);
		return 2;
	}
	ret = ns_hparams_load(m, &hp, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "nsctl info: %s\n", err);
		ns_model_close(&m);
		return 2;
	}
	if (ns_summary_compute(m, &hp, &s)) {
		fprintf(stderr, "nsctl info: out of memory\n");
		ns_model_close(&m);
		return 1;
	}
	/* the file is shown either way; what would refuse it to run is a line of the report */
	ret = ns_arch_check(m, NS_BACKEND_CPU | NS_BACKEND_CUDA, err, sizeof(err));
	if (ret == -ENOMEM) {
		fprintf(stderr, "nsctl info: %s\n", err);
		ns_summary_free(&s);
		ns_model_close(&m);
		return 1;
	}
	s_tower(m, &hp, path, &tw);
	if (json)
		s_print_json(m, &hp, &s, path, ret ? err : NULL, &tw, with_meta, with_tensors);
	else
		s_print_text(m, &hp, &s, path, ret ? err : NULL, &tw);
	ns_summary_free(&s);
	ns_model_close(&m);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "nsctl info: cannot write output: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
