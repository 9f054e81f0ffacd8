/* api.c - neurostream.h: loading, generation, chat, logits over the child processes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arch.h"
#include "draft_model.h"
#include "tower_vram.h"
#include "engine_internal.h"
#include "gguf.h"
#include "kv_type.h"
#include "model.h"
#include "ns_util.h"
#include "session.h"
#include "tokenizer.h"

void ns_engine_opts_default(struct ns_engine_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mem_budget = NS_BUDGET_AUTO; /* as nsctl run: api_budgets.c */
	o->ram_budget = NS_BUDGET_AUTO;
	o->lookahead = -1;
	o->run_ahead = -1;
	o->image_token = -1;
}

void ns_gen_params_default(struct ns_gen_params *g)
{
	memset(g, 0, sizeof(*g));
	g->n_predict = -1;
	g->temperature = 0.8f;
	g->top_k = 40;
	g->top_p = 0.95f;
	g->min_p = 0.05f;
	g->repeat_penalty = 1.0f;
	g->repeat_last_n = 64;
}

/* Tokenizer, chat family, end-of-generation ids. */
static int s_load_meta(struct ns_engine *e)
{
	const char *tpl;
	size_t nv;

	e->tok = ns_tok_new(ns_model_meta(e->m), e->err, sizeof(e->err));
	if (!e->tok)
		return -EINVAL;
	tpl = ns_gguf_get_str(ns_model_meta(e->m), "tokenizer.chat_template");
	e->fam = ns_chat_family_detect(tpl);
	if (e->o.chat_template) {
		e->fam = ns_chat_family_from_name(e->o.chat_template);
		if (e->fam == NS_CHAT_UNKNOWN)
			return ns_errf(e->err, sizeof(e->err), "chat template '%s': not a family "
				       "name we know", e->o.chat_template), -EINVAL;
		e->o.chat_template = NULL; /* the caller's string is not kept */
		tpl = ns_chat_family_name(e->fam);
	}
	if (e->o.reasoning_effort) {
		static const char *const eff[] = { "low", "medium", "high" };
		const char *r = e->o.reasoning_effort;

		e->o.reasoning_effort = NULL; /* the caller's string: keep a static copy */
		for (size_t i = 0; i < NS_ARRAY_LEN(eff); i++)
			if (!strcmp(r, eff[i]))
				e->o.reasoning_effort = eff[i];
		if (!e->o.reasoning_effort)
			return ns_errf(e->err, sizeof(e->err), "reasoning effort '%s': low, medium "
				       "or high", r), -EINVAL;
		if (e->fam != NS_CHAT_GPTOSS)
			return ns_errf(e->err, sizeof(e->err), "a reasoning effort is for the "
				       "harmony (gpt-oss) chat template; this model's is %s", tpl ?
				       ns_chat_family_name(e->fam) : "missing"), -EINVAL;
	}
	nv = ns_tok_n_vocab(e->tok);
	for (size_t i = 0; i < nv && i <= INT32_MAX && e->n_stop < NS_CMSG_MAX_STOP; i++)
		if (ns_tok_is_eog(e->tok, (int32_t)i))
			e->stop_ids[e->n_stop++] = (int32_t)i;
	return 0;
}
/* model as an absolute path the children can open from anywhere, symlinks kept: a split
 * model in the Hugging Face cache is a folder of links named -NNNNN-of-NNNNN.gguf into blobs
 * named by checksum, and the shards are found by those names. 0 or -errno. */
static int s_abs_path(const char *model, char *out, size_t len)
{
	char cwd[PATH_MAX];
	struct stat st;
	int n;

	if (stat(model, &st))
		return -errno;
	if (model[0] == '/')
		n = snprintf(out, len, "%s", model);
	else if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	else
		n = snprintf(out, len, "%s/%s", cwd, model);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}


int ns_engine_load(const char *model, const struct ns_engine_opts *o, struct ns_engine **out,
		   char *err, size_t errlen)
{
	struct ns_engine *e = calloc(1, sizeof(*e));
	uint32_t n_ctx_asked;
	int rc;

	*out = NULL;
	if (!e)
		return ns_errf(err, errlen, "out of memory"), -ENOMEM;
	e->think = -1;
	if (o)
		e->o = *o;
	else
		ns_engine_opts_default(&e->o);
	n_ctx_asked = e->o.n_ctx;
	if (!e->o.n_ctx)
		e->o.n_ctx = 4096;
	if (e->o.lookahead < 0) /* as nsctl info / plan assume for the smallest budget */
		e->o.lookahead = (int32_t)NS_DEFAULT_LOOKAHEAD;
	if (!e->o.backend)
		e->o.backend = "cpu";
	rc = 0;
	if (e->o.n_seq > NS_CMSG_MAX_SEQ || (e->o.n_seq > 1 && !strcmp(e->o.backend, "cuda"))) {
		ns_errf(err, errlen, e->o.n_seq > NS_CMSG_MAX_SEQ ? "%u sequences: at most %d" :
			"%u sequences: the cuda backend evaluates one at a time (cpu backend)",
			e->o.n_seq, NS_CMSG_MAX_SEQ);
		rc = -EINVAL;
	}
	if (strcmp(e->o.backend, "cpu") && strcmp(e->o.backend, "cuda")) {
		ns_errf(err, errlen, "unknown backend '%s' (cpu, cuda)", e->o.backend);
		rc = -EINVAL;
	}
	for (int i = 0; i < NS_PROC_COUNT && rc == 0; i++) {
		if (!e->o.wrap[i])
			continue;
		if (!(e->wrap_copy[i] = strdup(e->o.wrap[i]))) {
			rc = -ENOMEM;
			ns_errf(err, errlen, "out of memory");
		}
		e->o.wrap[i] = e->wrap_copy[i];
	}
	e->o.backend = !strcmp(e->o.backend, "cuda") ? "cuda" : "cpu"; /* static strings */
	for (int i = 0; i < 2 && rc == 0; i++) {
		const char **name = i ? &e->o.cache_type_v : &e->o.cache_type_k;
		enum ns_kv_type t;

		if (!*name)
			continue;
		if (ns_kv_type_parse(*name, &t)) {
			ns_errf(err, errlen, "KV cache type '%s': f32, f16 or q8_0", *name);
			rc = -EINVAL;
		} else {
			*name = ns_kv_type_name(t); /* a static string */
		}
	}
	if (rc == 0 && e->o.draft_model) {
		if ((rc = s_abs_path(e->o.draft_model, e->draft_path, sizeof(e->draft_path)))) {
			ns_errf(err, errlen, "draft model %s: %s", e->o.draft_model, strerror(-rc));
			if (rc != -ENOMEM && rc != -EIO)
				rc = -EINVAL;
		}
		e->o.draft_model = e->draft_path;
	}
	if (rc == 0 && e->o.mmproj) {
		if ((rc = s_abs_path(e->o.mmproj, e->mmproj_path, sizeof(e->mmproj_path)))) {
			ns_errf(err, errlen, "--mmproj %s: %s", e->o.mmproj, strerror(-rc));
			if (rc != -ENOMEM && rc != -EIO)
				rc = -EINVAL;
		}
		e->o.mmproj = e->mmproj_path;
	}
	if (rc == 0 && (rc = s_abs_path(model, e->model_path, sizeof(e->model_path)))) {
		ns_errf(err, errlen, "%s: %s", model, strerror(-rc));
		if (rc != -ENOMEM && rc != -EIO) /* no such file, name too long, no access */
			rc = -EINVAL;
	}
	if (rc == 0) {
		rc = ns_model_open(e->model_path, &e->m, e->err, sizeof(e->err));
		if (rc < 0 && rc != -ENOMEM && rc != -EIO) /* a directory, no access, no GGUF */
			rc = -EINVAL;
		if (rc == 0 && e->o.run_ahead < 0) /* dense: read ahead; MoE: nsrouter does */
			e->o.run_ahead = ns_model_find(e->m, "blk.0.ffn_gate_exps.weight") == NULL;
		/* a draft model nscompute would refuse, or one of another vocabulary: now */
		if (rc == 0 && e->o.draft_model)
			rc = nsctl_draft_compatible(e->model_path, e->o.draft_model, e->err,
						    sizeof(e->err));
		if (rc == 0)
			rc = nse_budgets_resolve(e, n_ctx_asked);
		/* a draft model on cuda: its arena out of the VRAM budget, which nsplan's reserve
		 * keeps for it (draft_model.h); refused in one line when it does not fit */
		if (rc == 0 && e->o.draft_model && !strcmp(e->o.backend, "cuda") &&
		    e->o.vram_budget)
			rc = nsctl_draft_vram_reserve(e->model_path, e->o.draft_model, e->o.n_ctx,
						      e->o.cache_type_k, e->o.cache_type_v,
						      e->o.vram_budget, e->o.reserve_vram,
						      &e->o.reserve_vram, NULL, e->err,
						      sizeof(e->err));
		/* the vision tower on cuda: its arena out of the budget too, after the draft's
		 * (tower_vram.h; nscompute-cuda takes both out of --vram-budget) */
		if (rc == 0 && e->o.mmproj && !strcmp(e->o.backend, "cuda") && e->o.vram_budget) {
			const struct nsctl_tower tw = {
				.mmproj = e->o.mmproj,
				.lim = { .max_tokens = e->o.max_image_tokens,
					 .min_pixels = e->o.min_image_pixels,
					 .max_pixels = e->o.max_image_pixels } };

			rc = nsctl_tower_vram_reserve(e->model_path, &tw, e->o.n_ctx,
						      e->o.cache_type_k, e->o.cache_type_v,
						      e->o.vram_budget, e->o.reserve_vram,
						      &e->o.reserve_vram, NULL, e->err,
						      sizeof(e->err));
		}
		if (rc == 0 && !e->o.mem_budget) {
			/* enough for the whole model plus slack, at most 512 MiB: a small model
			 * does not pay for mapping a large arena */
			uint64_t want = e->m->total_tensor_bytes + (16ull << 20);

			e->o.mem_budget = want < (512ull << 20) ? want : 512ull << 20;
		}
		if (rc == 0) {
			struct ns_arch_model *am = NULL;
			char why[NS_ERR_LEN]; /* a file the table cannot bind: nse_start says */

			if (ns_arch_bind(e->m, &am, why, sizeof(why)) == 0)
				e->recurrent = am->kinds & NS_LAYER_RECURRENT;
			ns_arch_model_free(&am);
		}
		if (rc == 0)
			rc = s_load_meta(e);
		if (rc == 0) /* the tower for this model, from headers (api_image.c) */
			rc = nse_images_load(e);
		if (rc == 0)
			rc = nse_start(e);
		if (rc < 0)
			ns_errf(err, errlen, "%s", e->err);
	}
	if (rc < 0) {
		ns_engine_free(&e);
		return rc;
	}
	*out = e;
	return 0;
}

void ns_engine_free(struct ns_engine **ep)
{
	struct ns_engine *e = ep ? *ep : NULL;

	if (!e)
		return;
	nse_teardown(e);
	nse_images_free(e);
	ns_tok_destroy(&e->tok);
	ns_model_close(&e->m);
	for (int i = 0; i < NS_PROC_COUNT; i++)
		free(e->wrap_copy[i]);
	free(e->hist);
	free(e);
	*ep = NULL;
}

static int s_hist_push(struct ns_engine *e, int32_t id)
{
	if (e->n_hist == e->hist_cap) {
		size_t cap = e->hist_cap ? e->hist_cap * 2 : 256;
		int32_t *h = realloc(e->hist, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		e->hist = h;
		e->hist_cap = cap;
	}
	e->hist[e->n_hist++] = id;
	return 0;
}

/* Speculative decoding's figures (SPEC before DONE): per token the decode passes yielded. */
static void s_fill_spec(struct ns_engine_stats *s, const struct ns_cmsg_done *d,
			const struct ns_cmsg_spec *sp)
{
	uint32_t toks = d->n_gen > 1 ? d->n_gen - 1 : 0;

	s->draft = true;
	s->drafted = sp->drafted;
	s->accepted = sp->accepted;
	s->draft_passes = sp->draft_passes;
	s->draft_k = sp->k_last;
	s->accept_rate = sp->drafted ? (double)sp->accepted / sp->drafted : 0;
	s->passes_per_token = toks ? (double)d->n_decode / toks : 0;
	s->decode_tok_s = d->decode_ns && toks ? toks / s->decode_s : 0;
	s->gb_per_token = toks ? (double)d->req_decode / toks / 1e9 : 0;
	s->dev_gb_per_token = toks ? (double)d->dev_decode / toks / 1e9 : 0;
}

/* Statistics of the call from nsio's counters (before/after) and nscompute's DONE (and SPEC
 * when it came: sp != NULL). */
static void s_fill_stats(struct ns_engine *e, const struct ns_stats_snapshot *a,
			 const struct ns_stats_snapshot *b, const struct ns_cmsg_done *d,
			 const struct ns_cmsg_spec *sp)
{
	struct ns_engine_stats *s = &e->st;
	uint32_t toks = d->n_prompt + d->n_decode;

	s->n_prompt = d->n_prompt;
	s->n_gen = d->n_gen;
	s->n_decode = d->n_decode;
	s->prefill_s = (double)d->prefill_ns / 1e9;
	s->decode_s = (double)d->decode_ns / 1e9;
	s->prefill_tok_s = d->prefill_ns ? d->n_prompt / s->prefill_s : 0;
	s->decode_tok_s = d->decode_ns && d->n_decode ? d->n_decode / s->decode_s : 0;
	s->req_prefill = d->req_prefill;
	s->req_decode = d->req_decode;
	s->dev_prefill = d->dev_prefill;
	s->dev_decode = d->dev_decode;
	s->gb_per_token = d->n_decode ? (double)d->req_decode / d->n_decode / 1e9 : 0;
	s->dev_gb_per_token = d->n_decode ? (double)d->dev_decode / d->n_decode / 1e9 : 0;
	s->stall_ms_per_token = toks ? (double)(b->stall_ns - a->stall_ns) / 1e6 / toks : 0;
	s->arena_peak = b->arena_peak;
	s->arena_bytes = b->arena_bytes;
	s->requests = b->requests - a->requests;
	s->cache_hits = b->cache_hits - a->cache_hits;
	s->cache_hit_rate = s->requests ? (double)s->cache_hits / s->requests : 0;
	s->predict_experts = b->predict_experts - a->predict_experts;
	s->predict_hits = b->predict_hits - a->predict_hits;
	s->predict_reads = b->predict_reads - a->predict_reads;
	s->predict_claims = b->predict_claims - a->predict_claims;
	s->predict_promoted = b->predict_promoted - a->predict_promoted;
	s->predict_hit_rate = s->predict_experts ? (double)s->predict_hits / s->predict_experts
						 : 0;
	s->nsio_restarts = e->child[NS_PROC_NSIO].restarts;
	s->stop_reason = d->reason;
	s->n_image_tokens = d->n_image_tokens;
	s->tower_s = (double)d->tower_ns / 1e9;
	s->req_tower = d->tower_req;
	if (sp)
		s_fill_spec(s, d, sp);
}

struct s_run {
	const int32_t *ids;
	uint32_t n;
	uint32_t flags;
	const struct ns_gen_params *g;
	ns_token_fn cb;
	void *user;
	float *logits;          /* LOGITS_ALL: (n, n_vocab) */
	uint32_t n_logits;      /* rows expected in logits (set by s_run) */
	uint32_t pos0;          /* LOGITS_ALL: the context position of logits' row 0 */
	uint32_t keep;          /* NS_EVAL_KEEP: positions kept */
	uint32_t n_forced;      /* FORCED: the last n_forced of ids are decoded one by one */
	bool keep_hist;         /* append to e->hist (chat) */
};

/* The EVAL's draft block from g (speculative decoding, neurostream.h); 0 or -EINVAL. */
static int s_draft_block(struct ns_engine *e, const struct ns_gen_params *g,
			 struct ns_cmsg_eval *ev)
{
	struct ns_cmsg_draft *d = &ev->draft;

	d->max = g->draft_max ? g->draft_max : 16;
	d->min = g->draft_min ? g->draft_min : 1;
	d->kind = g->draft == NS_GEN_DRAFT_NGRAM ? NS_DRAFT_NGRAM :
		  g->draft == NS_GEN_DRAFT_ORACLE ? NS_DRAFT_ORACLE :
		  g->draft == NS_GEN_DRAFT_MODEL ? NS_DRAFT_MODEL :
		  g->draft == NS_GEN_DRAFT_MTP ? NS_DRAFT_MTP : 0;
	if (!d->kind)
		return ns_errf(e->err, sizeof(e->err), "unknown drafter %d", (int)g->draft),
		       -EINVAL;
	if (d->kind == NS_DRAFT_MTP && !e->o.draft_mtp)
		return ns_errf(e->err, sizeof(e->err), "the MTP drafter needs the engine loaded "
			       "with its MTP block (ns_engine_opts.draft_mtp)"), -EINVAL;
	if (d->kind == NS_DRAFT_MODEL && !e->o.draft_model)
		return ns_errf(e->err, sizeof(e->err), "the draft model drafter needs the engine "
			       "loaded with a draft model (ns_engine_opts.draft_model)"), -EINVAL;
	if (d->max > NS_CMSG_MAX_DRAFT || d->min > d->max)
		return ns_errf(e->err, sizeof(e->err), "draft lengths %u..%u: 1 <= min <= max <= "
			       "%d", d->min, d->max, NS_CMSG_MAX_DRAFT), -EINVAL;
	if (d->kind == NS_DRAFT_ORACLE) {
		if (g->n_draft_oracle > NS_CMSG_MAX_TOKENS - ev->n_tokens)
			return ns_errf(e->err, sizeof(e->err), "too many oracle drafts"), -EINVAL;
		for (uint32_t i = 0; i < g->n_draft_oracle; i++)
			if (g->draft_oracle[i] < 0 || (uint32_t)g->draft_oracle[i] >= e->n_vocab)
				return ns_errf(e->err, sizeof(e->err), "oracle draft id %d out of "
					       "range", g->draft_oracle[i]), -EINVAL;
		d->oracle = g->draft_oracle;
		d->n_oracle = g->n_draft_oracle;
	}
	ev->flags |= NS_EVAL_DRAFT;
	return 0;
}

/* One EVAL round trip. */
/* A message nscompute sent that does not decode, or that this request cannot have: the
 * stream is reliable and in order, so one was lost or damaged, and skipping it would drop a
 * token or wait forever for DONE. The request fails; the channel is refused from now on. */
static int s_out_of_step(struct ns_engine *e, size_t len, int type)
{
	e->rejected++;
	e->ctl_broken = true;
	ns_errf(e->err, sizeof(e->err), "malformed message from nscompute (%zu bytes, type %d): "
		"the request cannot go on", len, type);
	return -EPROTO;
}

/* The prompt's progress: done of r's n tokens (done == n: its evaluation ended, said once). */
static void s_progress(struct ns_engine *e, bool *open, uint64_t done, uint64_t n, uint64_t t0)
{
	if (!*open || !e->o.progress)
		return;
	if (done >= n)
		*open = e->ram_watch = false;
	e->o.progress(NS_PROGRESS_PREFILL, done, n, (double)(ns_now_ns() - t0) / 1e9,
		      e->o.progress_user);
}

static int s_run_one(struct ns_engine *e, struct s_run *r);

/* One EVAL; the pending images (ns_engine_set_images) are for it only, taken or refused. */
static int s_run(struct ns_engine *e, struct s_run *r)
{
	int rc = s_run_one(e, r);

	nse_images_forget(e);
	return rc;
}

static int s_run_one(struct ns_engine *e, struct s_run *r)
{
	struct ns_cmsg_eval ev = { .flags = r->flags, .keep = r->keep, .n_tokens = r->n,
				   .tokens = r->ids };
	struct ns_stats_snapshot a, b;
	struct ns_cmsg_done d = { 0 };
	struct ns_cmsg_spec sp = { 0 };
	struct ns_detok *dt = NULL;
	uint8_t *buf;
	size_t sz;
	bool stopped = false, got_spec = false;
	bool pf_open = r->n >= 2 && !r->n_forced; /* the prompt's progress (s_progress) */
	uint64_t pf_t0 = 0;
	int32_t last = -1;
	uint32_t got_logits = 0;
	int rc;

	if (r->n == 0 || r->n > NS_CMSG_MAX_TOKENS)
		return ns_errf(e->err, sizeof(e->err), "%u tokens: nothing to evaluate or too many",
			       r->n), -EINVAL;
	for (uint32_t i = 0; i < r->n; i++)
		if (r->ids[i] < 0 || (uint32_t)r->ids[i] >= e->n_vocab)
			return ns_errf(e->err, sizeof(e->err), "token id %d out of range (vocabulary "
				       "of %u)", r->ids[i], e->n_vocab), -EINVAL;
	if (r->g) {
		int64_t np = r->g->n_predict < 0 ? (int64_t)e->n_ctx : r->g->n_predict;

		ev.n_predict = (uint32_t)(np > e->n_ctx ? e->n_ctx : np);
		ev.sampling = (struct ns_cmsg_sampling){
			.temperature = r->g->temperature, .top_k = r->g->top_k,
			.top_p = r->g->top_p, .min_p = r->g->min_p,
			.repeat_penalty = r->g->repeat_penalty,
			.repeat_last_n = r->g->repeat_last_n < 0 ? 0 : r->g->repeat_last_n,
			.seed = r->g->seed };
		if (!r->g->no_stop) {
			ev.n_stop = e->n_stop;
			ev.stop = e->stop_ids;
		}
	} else {
		ev.sampling.repeat_penalty = 1.0f;
	}
	r->n_logits = r->logits ? r->n : 0;
	if (r->n_forced) {
		ev.flags |= NS_EVAL_FORCED;
		ev.n_predict = r->n_forced;
	}
	/* (nothing to generate: nothing to draft; nscompute sends SPEC only after generating) */
	if (r->g && r->g->draft && ev.n_predict && (rc = s_draft_block(e, r->g, &ev)) < 0)
		return rc;
	if (nse_images_pending(e)) { /* the prompt's images: its runs, then IMAGES first */
		if (r->keep || !(r->flags & NS_EVAL_RESET))
			return ns_errf(e->err, sizeof(e->err), "a prompt with images starts the "
				       "context over"), -EINVAL;
		if ((rc = nse_images_check_ids(e, r->ids, r->n - r->n_forced)) < 0)
			return rc;
		if ((rc = nse_images_send(e)) < 0)
			return rc;
		ev.flags = (ev.flags & ~(uint32_t)NS_EVAL_KEEP) | NS_EVAL_RESET;
		ev.keep = 0;
	}
	sz = ns_cmsg_size_eval_msg(&ev);
	if (!(buf = malloc(sz)))
		return ns_errf(e->err, sizeof(e->err), "out of memory"), -ENOMEM;
	memset(&e->st, 0, sizeof(e->st));
	ns_stats_snapshot(e->s->ctl, &a);
	rc = nse_send(e, buf, ns_cmsg_enc_eval(&ev, buf, sz));
	free(buf);
	if (rc < 0)
		return rc;
	pf_t0 = ns_now_ns();
	s_progress(e, &pf_open, 0, r->n, pf_t0);
	e->ram_watch = pf_open && e->o.progress && !e->ram_done; /* nse_recv: the RAM fill */
	e->t_ram = 0;
	e->t_ram0 = pf_t0;
	if (r->flags & NS_EVAL_RESET)
		e->n_hist = 0;
	if (r->flags & (NS_EVAL_RESET | NS_EVAL_KEEP))
		e->hist_cut = false; /* nscompute cuts as hist says */
	if (r->keep_hist)
		for (uint32_t i = 0; i < r->n && rc == 0; i++)
			rc = s_hist_push(e, r->ids[i]);
	if (rc == 0 && r->cb && !(dt = ns_detok_new(e->tok, false, false)))
		rc = -ENOMEM;
	while (rc == 0) {
		zmq_msg_t msg;
		const void *p;
		size_t len;
		int type;

		rc = nse_recv(e, &msg, 0);
		if (rc < 0)
			break;
		p = zmq_msg_data(&msg);
		len = zmq_msg_size(&msg);
		type = ns_cmsg_type(p, len);
		if (type != NS_CMSG_PROGRESS)
			s_progress(e, &pf_open, r->n, r->n, pf_t0); /* the prompt is evaluated */
		if (type == NS_CMSG_PROGRESS) {
			struct ns_cmsg_progress pg;

			/* nscompute counts the prompt's pass: a teacher-forced tail is
			 * decoded after it (and draws no progress: pf_open is false) */
			const uint32_t n_pf = r->n - r->n_forced;

			if (ns_cmsg_dec_progress(p, len, &pg) == 0 && pg.n_tokens == n_pf) {
				/* tokens' worth of the work, short of the whole until the end */
				uint64_t done = (uint64_t)n_pf * pg.layers_done / pg.n_layers;

				if (pf_open && done < n_pf)
					s_progress(e, &pf_open, done, r->n, pf_t0);
				zmq_msg_close(&msg);
				continue;
			}
		} else if (type == NS_CMSG_TOKEN) {
			struct ns_cmsg_token t;

			if (ns_cmsg_dec_token(p, len, e->n_vocab, &t) == 0) {
				const char *txt = "";
				size_t tl = 0;

				/* the previous token is now in nscompute's context */
				if (r->keep_hist && last >= 0)
					rc = s_hist_push(e, last);
				last = t.id;
				if (dt && ns_detok_feed(dt, t.id, &txt, &tl) < 0)
					tl = 0;
				if (!stopped && r->cb && r->cb(txt, tl, t.id, r->user)) {
					uint8_t q[NS_CMSG_HDR];

					stopped = true;
					if (rc == 0)
						rc = nse_send(e, q, ns_cmsg_enc_stop(q, sizeof(q)));
				}
				zmq_msg_close(&msg);
				continue;
			}
		} else if (type == NS_CMSG_LOGITS && r->logits) {
			uint32_t pos;
			float *row = malloc((size_t)e->n_vocab * sizeof(float));

			if (row && ns_cmsg_dec_logits(p, len, e->n_vocab, &pos, row) == 0 &&
			    pos >= r->pos0 && pos - r->pos0 < r->n_logits &&
			    got_logits < r->n_logits) {
				memcpy(r->logits + (uint64_t)(pos - r->pos0) * e->n_vocab, row,
				       (size_t)e->n_vocab * sizeof(float));
				got_logits++;
				free(row);
				zmq_msg_close(&msg);
				continue;
			}
			free(row);
		} else if (type == NS_CMSG_SPEC && (ev.flags & NS_EVAL_DRAFT) && !got_spec) {
			if (ns_cmsg_dec_spec(p, len, &sp) == 0) {
				got_spec = true;
				zmq_msg_close(&msg);
				continue;
			}
		} else if (type == NS_CMSG_DONE) {
			if (ns_cmsg_dec_done(p, len, &d) == 0 &&
			    (!(ev.flags & NS_EVAL_DRAFT) || got_spec)) {
				zmq_msg_close(&msg);
				break;
			}
		} else if (type == NS_CMSG_ERROR) {
			struct ns_cmsg_error er;

			if (ns_cmsg_dec_error(p, len, &er) == 0) {
				ns_errf(e->err, sizeof(e->err), "nscompute: %s", er.text);
				rc = er.code == -ENOSPC || er.code == -EINVAL ? -EINVAL : er.code;
				if (r->flags & NS_EVAL_RESET || r->keep_hist)
					e->n_hist = 0; /* its context is undefined now */
				zmq_msg_close(&msg);
				break;
			}
		}
		zmq_msg_close(&msg);
		rc = s_out_of_step(e, len, type);
		break;
	}
	s_progress(e, &pf_open, r->n, r->n, pf_t0); /* a failure ends it too */
	if (dt && rc == 0) {
		const char *txt;
		size_t tl;

		if (ns_detok_flush(dt, &txt, &tl) == 0 && tl && !stopped && r->cb)
			r->cb(txt, tl, -1, r->user);
	}
	ns_detok_destroy(&dt);
	if (rc == 0 && r->logits && got_logits != r->n_logits)
		return ns_errf(e->err, sizeof(e->err), "nscompute sent %u of %u logits rows",
			       got_logits, r->n_logits), -EPROTO;
	if (rc < 0)
		return rc;
	ns_stats_snapshot(e->s->ctl, &b);
	s_fill_stats(e, &a, &b, &d, got_spec ? &sp : NULL);
	return 0;
}

/* s_run of a request that keeps a prefix (NS_EVAL_KEEP). nscompute refuses a cut back that
 * a sliding layer's ring cache can no longer serve (-ERANGE: the ring overwrote positions the
 * next token reads, nscompute/forward/forward.h ns_fwd_truncate) before it evaluates
 * anything; then the kept prefix (hist) is evaluated again from position 0, in requests of
 * at most NS_CMSG_MAX_TOKENS, and the request runs on after it. */
static int s_run_kept(struct ns_engine *e, struct s_run *r)
{
	const uint32_t keep = r->keep;
	int32_t *prefix;
	int rc;

	if (!(r->flags & NS_EVAL_KEEP) || !keep)
		return s_run(e, r);
	/* s_run's failure forgets hist: the prefix first */
	if (keep > e->n_hist)
		return ns_errf(e->err, sizeof(e->err), "keep %u past the context's %zu", keep,
			       e->n_hist), -EINVAL;
	if (!(prefix = malloc((size_t)keep * sizeof(*prefix))))
		return ns_errf(e->err, sizeof(e->err), "out of memory"), -ENOMEM;
	memcpy(prefix, e->hist, (size_t)keep * sizeof(*prefix));
	rc = s_run(e, r);
	for (uint32_t i = 0; rc == -ERANGE && i < keep;) {
		const uint32_t n = keep - i < NS_CMSG_MAX_TOKENS ? keep - i : NS_CMSG_MAX_TOKENS;
		int rr = s_run(e, &(struct s_run){ .ids = prefix + i, .n = n,
						   .flags = i ? 0 : NS_EVAL_RESET,
						   .keep_hist = true });

		i += n;
		if (rr < 0) {
			rc = rr;
		} else if (i == keep) {
			struct s_run again = *r;

			again.flags &= ~NS_EVAL_KEEP;
			again.keep = 0;
			rc = s_run(e, &again);
			r->n_logits = again.n_logits;
		}
	}
	free(prefix);
	return rc;
}

#define S_IMAGE_MARK NS_ENGINE_IMAGE_MARK

/* "<|vision_start|><|image_pad|><|vision_end|>" per pending image, then text (Qwen-VL's
 * processor: an image part before the text). 0 or -ENOMEM. */
static int s_prefix_images(struct ns_engine *e, const char *text, char **out)
{
	uint32_t n = 0;
	char *s;

	while (n < NS_ENGINE_MAX_IMAGES && ns_engine_image_tokens(e, n))
		n++;
	if (!(s = malloc(n * strlen(S_IMAGE_MARK) + strlen(text) + 1)))
		return ns_errf(e->err, sizeof(e->err), "out of memory"), -ENOMEM;
	s[0] = 0;
	for (uint32_t i = 0; i < n; i++)
		strcat(s, S_IMAGE_MARK);
	strcat(s, text);
	*out = s;
	return 0;
}

int ns_engine_generate(struct ns_engine *e, const char *prompt, const struct ns_gen_params *g,
		       ns_token_fn cb, void *user)
{
	struct ns_gen_params def;
	int32_t *ids = NULL;
	size_t n = 0;
	int rc = 0;

	if (!g) {
		ns_gen_params_default(&def);
		g = &def;
	}
	if (nse_images_pending(e)) { /* each <|image_pad|> of the text: the next image */
		char *text = NULL;

		if (!strstr(prompt, "<|image_pad|>")) /* none written: they open the prompt */
			rc = s_prefix_images(e, prompt, &text);
		if (rc == 0)
			rc = nse_images_encode(e, text ? text : prompt, true, true, &ids, &n);
		free(text);
		if (rc < 0) {
			nse_images_forget(e);
			return rc;
		}
	} else if ((rc = ns_tok_encode(e->tok, prompt, strlen(prompt), true, false, &ids,
				       &n)) < 0) {
		return ns_errf(e->err, sizeof(e->err), "cannot tokenize the prompt"), rc;
	}
	if (n == 0) {
		free(ids);
		return ns_errf(e->err, sizeof(e->err), "the prompt is empty and the vocabulary "
			       "adds no BOS token"), -EINVAL;
	}
	if (n > e->n_ctx) {
		free(ids);
		return ns_errf(e->err, sizeof(e->err), "the prompt has %zu tokens, more than "
			       "the context of %u (-c)", n, e->n_ctx), -EINVAL;
	}
	rc = s_run(e, &(struct s_run){ .ids = ids, .n = (uint32_t)n, .flags = NS_EVAL_RESET,
				       .g = g, .cb = cb, .user = user, .keep_hist = true });
	free(ids);
	return rc;
}

int ns_engine_generate_ids(struct ns_engine *e, const int32_t *ids, uint32_t n,
			   const struct ns_gen_params *g, ns_token_fn cb, void *user)
{
	struct ns_gen_params def;

	if (!g) {
		ns_gen_params_default(&def);
		g = &def;
	}
	if (n == 0 || !ids)
		return ns_errf(e->err, sizeof(e->err), "no prompt tokens"), -EINVAL;
	if (n > e->n_ctx)
		return ns_errf(e->err, sizeof(e->err), "the prompt has %u tokens, more than the "
			       "context of %u (-c)", n, e->n_ctx), -EINVAL;
	/* (s_run checks every id against the vocabulary) */
	return s_run(e, &(struct s_run){ .ids = ids, .n = n, .flags = NS_EVAL_RESET, .g = g,
					 .cb = cb, .user = user, .keep_hist = true });
}

int ns_engine_chat_prompt(struct ns_engine *e, const struct ns_engine_msg *msgs, size_t n,
			  char **out)
{
	/* thinking: ns_engine_set_thinking's word when it was said; else Qwen3 thinks (its
	 * template's default), Qwen3.5 and Gemma 4 only with opts.thinking (Qwen3.5's template
	 * would think: a long thought before every reply is not what -p or --chat expect) */
	bool think = e->think >= 0 ? e->think > 0 : e->fam == NS_CHAT_QWEN35 ? e->o.thinking : true;
	struct ns_chat_opts co = { .enable_thinking = think,
				   .think_opt_in = e->think >= 0 ? e->think > 0 : e->o.thinking,
				   .reasoning_effort = e->o.reasoning_effort };
	struct ns_chat_msg *cm;
	int rc;

	*out = NULL;
	if (e->fam == NS_CHAT_UNKNOWN)
		return ns_errf(e->err, sizeof(e->err), "this model has no chat template we know "
			       "(tokenizer.chat_template)"), -EINVAL;
	if (!(cm = calloc(n ? n : 1, sizeof(*cm))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		cm[i] = (struct ns_chat_msg){ .role = msgs[i].role, .content = msgs[i].content };
	rc = ns_chat_render(e->fam, cm, n, true, &co, out, e->err, sizeof(e->err));
	free(cm);
	return rc;
}

const char *ns_engine_chat_template(const struct ns_engine *e)
{
	return e->fam == NS_CHAT_UNKNOWN ? NULL : ns_chat_family_name(e->fam);
}

/* The conversation rendered with the pending images opening the last user message, as
 * Qwen-VL's chat template writes image parts before the text; taken as is when a message
 * already places them (nsctl run --chat's /image: every image of the conversation, each in
 * its turn). */
static int s_chat_images(struct ns_engine *e, const struct ns_engine_msg *msgs, size_t n,
			 char **text)
{
	struct ns_engine_msg *m = calloc(n ? n : 1, sizeof(*m));
	char *content = NULL;
	size_t last = n;
	int rc;

	for (size_t i = 0; i < n; i++)
		if (!strcmp(msgs[i].role, "user"))
			last = i;
	if (!m)
		return ns_errf(e->err, sizeof(e->err), "out of memory"), -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (strstr(msgs[i].content, "<|image_pad|>")) {
			free(m);
			return ns_engine_chat_prompt(e, msgs, n, text);
		}
	if (last == n) {
		free(m);
		return ns_errf(e->err, sizeof(e->err), "images need a user message"), -EINVAL;
	}
	if ((rc = s_prefix_images(e, msgs[last].content, &content)) == 0) {
		memcpy(m, msgs, n * sizeof(*m));
		m[last].content = content;
		rc = ns_engine_chat_prompt(e, m, n, text);
	}
	free(content);
	free(m);
	return rc;
}

int ns_engine_chat(struct ns_engine *e, const struct ns_engine_msg *msgs, size_t n,
		   const struct ns_gen_params *g, ns_token_fn cb, void *user)
{
	struct ns_gen_params def;
	char *text = NULL;
	int32_t *ids = NULL;
	size_t n_ids = 0, keep = 0;
	uint32_t flags;
	int rc;

	if (!g) {
		ns_gen_params_default(&def);
		g = &def;
	}
	if (nse_images_pending(e)) { /* the images open the last user message (Qwen-VL) */
		rc = s_chat_images(e, msgs, n, &text);
		if (rc == 0)
			rc = nse_images_encode(e, text, ns_chat_family_adds_bos(e->fam), true, &ids,
					       &n_ids);
		free(text);
		if (rc < 0) {
			nse_images_forget(e);
			return rc;
		}
		e->n_hist = 0; /* the context starts over (s_run) */
	} else {
		rc = ns_engine_chat_prompt(e, msgs, n, &text);
		if (rc < 0)
			return rc;
		rc = ns_tok_encode(e->tok, text, strlen(text), ns_chat_family_adds_bos(e->fam),
				   true, &ids, &n_ids);
		free(text);
		if (rc < 0)
			return ns_errf(e->err, sizeof(e->err), "cannot tokenize the conversation"),
			       rc;
	}
	if (n_ids > e->n_ctx) {
		free(ids);
		return ns_errf(e->err, sizeof(e->err), "the conversation has %zu tokens, more "
			       "than the context of %u (-c); /reset", n_ids, e->n_ctx), -EINVAL;
	}
	/* keep the longest common prefix with the context (at least one token is evaluated:
	 * its logits give the first reply token); nscompute cuts the rest (NS_EVAL_KEEP) */
	while (keep < e->n_hist && keep + 1 < n_ids && e->hist[keep] == ids[keep])
		keep++;
	if (e->recurrent && keep < e->n_hist)
		keep = 0; /* a recurrent state goes back only to the start */
	flags = !keep ? NS_EVAL_RESET : keep < e->n_hist || e->hist_cut ? NS_EVAL_KEEP : 0;
	e->n_hist = keep;
	rc = s_run_kept(e, &(struct s_run){ .ids = ids + keep, .n = (uint32_t)(n_ids - keep),
				       .flags = flags, .keep = flags & NS_EVAL_KEEP ? (uint32_t)keep : 0,
				       .g = g, .cb = cb, .user = user, .keep_hist = true });
	free(ids);
	return rc;
}

/* One STEP round trip (proto/ctl_msg.h): LOGITS per sequence that asked, then DONE. */
int ns_engine_step(struct ns_engine *e, const struct ns_engine_seq *seqs, uint32_t n)
{
	struct ns_cmsg_step st = { .n_seq = n };
	struct ns_cmsg_done d = { 0 };
	uint32_t want = 0, got = 0, total = 0;
	int32_t *toks;
	uint8_t *buf;
	size_t sz;
	float *row;
	int rc;

	if (!n || n > NS_CMSG_MAX_SEQ)
		return ns_errf(e->err, sizeof(e->err), "a step of %u sequences", n), -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (!seqs[i].n || seqs[i].n > NS_CMSG_MAX_TOKENS - total)
			return ns_errf(e->err, sizeof(e->err), "a step of too many tokens"), -EINVAL;
		total += seqs[i].n;
		st.seq[i] = (struct ns_cmsg_step_seq){ .slot = seqs[i].slot, .keep = seqs[i].keep,
						       .n_tokens = seqs[i].n,
						       .want_logits = seqs[i].logits != NULL };
		want += seqs[i].logits != NULL;
	}
	sz = ns_cmsg_size_step(n, total);
	toks = malloc((size_t)total * sizeof(*toks));
	buf = malloc(sz);
	row = malloc((size_t)e->n_vocab * sizeof(float));
	rc = toks && buf && row ? 0 : -ENOMEM;
	for (uint32_t i = 0, k = 0; rc == 0 && i < n; k += seqs[i].n, i++)
		memcpy(toks + k, seqs[i].tokens, (size_t)seqs[i].n * sizeof(*toks));
	st.tokens = toks;
	if (rc == 0) {
		if (seqs[0].slot == 0 || n > 1)
			e->n_hist = 0; /* slot 0 is the single-sequence calls' context */
		memset(&e->st, 0, sizeof(e->st));
		rc = nse_send(e, buf, ns_cmsg_enc_step(&st, buf, sz));
	} else {
		ns_errf(e->err, sizeof(e->err), "out of memory");
	}
	free(toks);
	free(buf);
	while (rc == 0) {
		zmq_msg_t msg;
		const void *p;
		size_t len;
		int type;
		uint32_t pos;

		if ((rc = nse_recv(e, &msg, 0)) < 0)
			break;
		p = zmq_msg_data(&msg);
		len = zmq_msg_size(&msg);
		type = ns_cmsg_type(p, len);
		if (type == NS_CMSG_LOGITS && ns_cmsg_dec_logits(p, len, e->n_vocab, &pos, row) == 0 &&
		    pos < n && seqs[pos].logits && got < want) {
			memcpy(seqs[pos].logits, row, (size_t)e->n_vocab * sizeof(float));
			got++;
		} else if (type == NS_CMSG_DONE && ns_cmsg_dec_done(p, len, &d) == 0) {
			zmq_msg_close(&msg);
			break;
		} else if (type == NS_CMSG_ERROR) {
			struct ns_cmsg_error er;

			if (ns_cmsg_dec_error(p, len, &er) == 0) {
				ns_errf(e->err, sizeof(e->err), "nscompute: %s", er.text);
				rc = er.code == -ENOSPC || er.code == -EINVAL ? -EINVAL : er.code;
			} else {
				rc = -EPROTO;
				ns_errf(e->err, sizeof(e->err), "malformed error from nscompute");
			}
		} else {
			rc = s_out_of_step(e, len, type);
		}
		zmq_msg_close(&msg);
	}
	free(row);
	if (rc == 0 && got != want)
		return ns_errf(e->err, sizeof(e->err), "nscompute sent %u of %u logits rows", got,
			       want), -EPROTO;
	if (rc == 0) {
		e->st.n_prompt = d.n_prompt;
		e->st.prefill_s = (double)d.prefill_ns / 1e9;
		e->st.req_prefill = d.req_prefill;
		e->st.dev_prefill = d.dev_prefill;
		e->st.req_tower = d.tower_req;
	}
	return rc;
}

int ns_engine_poll(struct ns_engine *e)
{
	if (nse_cancelled(e))
		return ns_errf(e->err, sizeof(e->err), "cancelled"), -ECANCELED;
	return nse_supervise(e);
}

uint32_t ns_engine_n_ctx(const struct ns_engine *e)
{
	return e->n_ctx;
}

bool ns_engine_is_recurrent(const struct ns_engine *e)
{
	return e->recurrent;
}

void ns_engine_reset(struct ns_engine *e)
{
	e->n_hist = 0;
}

int ns_engine_logits(struct ns_engine *e, const int32_t *ids, uint32_t n, float *out)
{
	if (n > e->n_ctx)
		return ns_errf(e->err, sizeof(e->err), "%u tokens do not fit the context of %u "
			       "(-c)", n, e->n_ctx), -EINVAL;
	return s_run(e, &(struct s_run){ .ids = ids, .n = n,
				       .flags = NS_EVAL_RESET | NS_EVAL_LOGITS_ALL,
				       .logits = out });
}

int ns_engine_eval(struct ns_engine *e, const int32_t *ids, uint32_t n, float *logits,
		   bool all)
{
	const uint32_t keep = (uint32_t)e->n_hist;
	const uint32_t flags = !keep ? NS_EVAL_RESET : e->hist_cut ? NS_EVAL_KEEP : 0;
	float *rows = logits;
	int rc;

	if ((uint64_t)keep + n > e->n_ctx)
		return ns_errf(e->err, sizeof(e->err), "%u tokens after %u do not fit the context "
			       "of %u (-c)", n, keep, e->n_ctx), -EINVAL;
	if (logits && !all && n > 1 &&
	    !(rows = malloc((size_t)n * e->n_vocab * sizeof(float))))
		return ns_errf(e->err, sizeof(e->err), "out of memory"), -ENOMEM;
	rc = s_run_kept(e, &(struct s_run){ .ids = ids, .n = n,
				       .flags = flags | (logits ? NS_EVAL_LOGITS_ALL : 0),
				       .keep = flags & NS_EVAL_KEEP ? keep : 0, .logits = rows,
				       .pos0 = keep, .keep_hist = true });
	if (rows != logits) { /* the last row only */
		if (rc == 0)
			memcpy(logits, rows + (size_t)(n - 1) * e->n_vocab,
			       (size_t)e->n_vocab * sizeof(float));
		free(rows);
	}
	return rc;
}

int ns_engine_rollback(struct ns_engine *e, uint32_t n_keep)
{
	if (n_keep > e->n_hist || (e->recurrent && n_keep && n_keep != e->n_hist))
		return ns_errf(e->err, sizeof(e->err), "cannot go back to position %u: the context "
			       "holds %zu%s", n_keep, e->n_hist, e->recurrent ? " and this model's "
			       "recurrent state goes back only to 0" : ""), -EINVAL;
	if (n_keep < e->n_hist) {
		e->n_hist = n_keep;
		e->hist_cut = true;
	}
	return 0;
}

uint32_t ns_engine_n_past(const struct ns_engine *e)
{
	return (uint32_t)e->n_hist;
}

int ns_engine_decode_forced(struct ns_engine *e, const int32_t *prompt, uint32_t n_prompt,
			    const int32_t *cont, uint32_t n_cont, float *logits, ns_token_fn cb,
			    void *user)
{
	int32_t *ids;
	uint64_t n = (uint64_t)n_prompt + n_cont;
	int rc;

	if (n_prompt == 0 || n_cont == 0)
		return ns_errf(e->err, sizeof(e->err), "teacher forcing needs at least one prompt "
			       "token and one continuation token"), -EINVAL;
	if (n > e->n_ctx)
		return ns_errf(e->err, sizeof(e->err), "%llu tokens do not fit the context of %u "
			       "(-c)", (unsigned long long)n, e->n_ctx), -EINVAL;
	if (!(ids = malloc((size_t)n * sizeof(*ids))))
		return ns_errf(e->err, sizeof(e->err), "out of memory"), -ENOMEM;
	memcpy(ids, prompt, (size_t)n_prompt * sizeof(*ids));
	memcpy(ids + n_prompt, cont, (size_t)n_cont * sizeof(*ids));
	rc = s_run(e, &(struct s_run){ .ids = ids, .n = (uint32_t)n,
				       .flags = NS_EVAL_RESET | (logits ? NS_EVAL_LOGITS_ALL : 0),
				       .n_forced = n_cont, .logits = logits, .cb = cb,
				       .user = user });
	free(ids);
	return rc;
}

int ns_engine_tokenize(struct ns_engine *e, const char *text, bool add_special, int32_t **ids,
		       size_t *n)
{
	return ns_tok_encode(e->tok, text, strlen(text), add_special, false, ids, n);
}

uint32_t ns_engine_n_vocab(const struct ns_engine *e)
{
	return e->n_vocab;
}

const char *ns_engine_session(const struct ns_engine *e)
{
	return e->s ? e->s->id : "";
}

int ns_engine_pid(const struct ns_engine *e, enum ns_engine_proc p)
{
	return p < NS_PROC_COUNT ? (int)e->child[p].pid : 0;
}

void ns_engine_stats(const struct ns_engine *e, struct ns_engine_stats *out)
{
	*out = e->st;
}

void ns_engine_cancel(struct ns_engine *e)
{
	if (e)
		e->cancelled = 1;
}

const char *ns_engine_error(const struct ns_engine *e)
{
	return e->err;
}
