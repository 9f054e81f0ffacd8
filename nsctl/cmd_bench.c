/* nsctl bench MODEL [-p 512] [-n 128] [-r 5] [-o md|json|csv] [sweeps]
 *
 * llama-bench's conventions on top of the C API (neurostream.h): a prompt-processing test
 * (pp<p>: the prompt evaluated from an empty context) and a generation test (tg<n>: n tokens
 * decoded), each repeated r times, reported as mean ± sd tokens per second, plus the streaming
 * figures: weight bytes read from the drive per token, stall ms per token, arena peak, cache
 * hit rate, and the roofline: the drive's O_DIRECT bandwidth measured in this run on the model
 * file itself (bench/diskbw.h, at nsio's read size and queue depth; passes before the runs,
 * one after every configuration and more at the end, the median of all) divided by the bytes
 * read from the drive per token, with the measured rate's ratio to it.
 *
 * Sweeps (comma lists): --budgets (arena), --ram-budgets, --vram-budgets, --block-rows,
 * --lookahead; every combination is a configuration. Each repeat loads every configuration
 * afresh (load and warm-up timed apart), in forward order on even repeats and backward on odd
 * ones, so drift of the machine spreads evenly. Decoding is teacher-forced
 * (ns_engine_decode_forced): one token sequence, cut from a fixed text with the model's
 * tokenizer before the runs, is fed to every run, so every configuration decodes the same
 * tokens whatever its logits (llama-bench feeds random ids instead; ours are text-like so an
 * MoE model routes as on prose). With --draft (bench_draft.c) each tg test is instead one
 * greedy generation per drafter after the same prompt ids, every drafter's tokens checked
 * against the one-token decode's. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "budgets.h"
#include "draft_model.h"
#include "commands.h"
#include "diskbw.h"
#include "hparams.h"
#include "hub.h"
#include "model.h"
#include "neurostream.h"
#include "ns_progress.h"
#include "ns_util.h"
#include "plan.h"
#include "stats.h"
#include "table.h"

static volatile sig_atomic_t s_interrupted; /* SIGINT/SIGTERM: the engine's cancel flag */

static void s_on_signal(int sig)
{
	s_interrupted = sig;
}

/* llama-bench's model_type: "qwen3 8B Q4_K - Medium". */
static void s_model_name(const struct ns_model *m, uint64_t n_params, char *buf, size_t len)
{
	static const struct { uint32_t ft; const char *name; } ftypes[] = {
		{ 0, "all F32" }, { 1, "F16" }, { 2, "Q4_0" }, { 7, "Q8_0" }, { 15, "Q4_K - Medium" },
		{ 14, "Q4_K - Small" }, { 17, "Q5_K - Medium" }, { 18, "Q6_K" }, { 32, "BF16" },
		{ 38, "MXFP4 MoE" },
	};
	const struct ns_gguf *g = m->shards[0];
	const char *arch = ns_gguf_get_str(g, "general.architecture");
	const char *ft = "unknown type";
	char size[32];
	uint64_t v;

	if (ns_gguf_get_u64(g, "general.file_type", &v))
		for (size_t i = 0; i < NS_ARRAY_LEN(ftypes); i++)
			if (ftypes[i].ft == v)
				ft = ftypes[i].name;
	if (n_params >= 1000000000ull)
		snprintf(size, sizeof(size), "%.0fB", (double)n_params / 1e9);
	else
		snprintf(size, sizeof(size), "%.0fM", (double)n_params / 1e6);
	snprintf(buf, len, "%s %s %s", arch ? arch : "?", size, ft);
}

static void s_fill_budgets(struct ns_bench_row *r, const struct bench_config *c, const char *model,
			   uint64_t size, uint64_t n_params, double disk_bps)
{
	ns_bench_row_init(r);
	snprintf(r->model, sizeof(r->model), "%s", model);
	snprintf(r->backend, sizeof(r->backend), "%s", c->cuda ? "CUDA" : "CPU");
	r->size_bytes = size;
	r->n_params = n_params;
	r->mem_budget = c->mem;
	r->ram_budget = c->ram;
	r->vram_budget = c->vram;
	r->block_rows = (uint32_t)c->rows;
	r->lookahead = c->lookahead < 0 ? 0 : (uint32_t)c->lookahead;
	r->disk_bps = disk_bps;
	r->bytes_per_token = 0;
	r->req_bytes_per_token = 0;
	r->stall_ms_per_token = 0;
	r->arena_peak = 0;
	r->cache_hit_rate = 0;
}

/* Running means of the per-repeat streaming figures (finalised by dividing by n_samples). */
static void s_accumulate(struct ns_bench_row *r, double bytes_tok, double req_tok, double stall,
			 double peak, double hit, const struct ns_engine_stats *st)
{
	if (st->predict_experts) { /* summed over the repeats: a ratio of the totals */
		r->pred_experts += st->predict_experts;
		r->pred_hits += st->predict_hits;
		r->predict_hit_rate = (double)r->pred_hits / (double)r->pred_experts;
	}
	r->bytes_per_token += bytes_tok;
	r->req_bytes_per_token += req_tok;
	r->stall_ms_per_token += stall;
	if (peak > r->arena_peak)
		r->arena_peak = peak;
	r->cache_hit_rate += hit;
}

static void s_finish(struct ns_bench_row *r)
{
	if (!r->n_samples) {
		r->bytes_per_token = r->req_bytes_per_token = r->stall_ms_per_token = -1;
		r->arena_peak = r->cache_hit_rate = -1;
		return;
	}
	r->bytes_per_token /= (double)r->n_samples;
	r->req_bytes_per_token /= (double)r->n_samples;
	r->stall_ms_per_token /= (double)r->n_samples;
	r->cache_hit_rate /= (double)r->n_samples;
}

/* The planner's bytes per decoded token under c's budgets (what `nsctl plan` prints), or -1. */
static double s_plan_bytes(const struct ns_model *m, const struct bench_config *c)
{
	struct ns_hparams hp;
	struct nsplan_opts po = { .budgets = { .vram = c->vram, .ram = c->ram, .mem = c->mem } };
	struct nsplan *pl = NULL;
	char err[NS_ERR_LEN];
	double b;

	if (ns_hparams_load(m, &hp, err, sizeof(err)) ||
	    nsplan_compute(m, &hp, &po, 1, &pl, err, sizeof(err))) {
		fprintf(stderr, "nsctl bench: no plan prediction: %s\n", err);
		return -1;
	}
	b = pl->predict.bytes_per_token;
	nsplan_destroy(&pl);
	return b;
}

/* One repeat of one configuration: load, warm up, pp, tg. Returns 0 or negative errno (exit 2
 * material when -EINVAL/-ENOSPC). */
static int s_run_one(const struct bench_opts *o, const struct bench_config *c, const char *pp_text,
		     struct ns_bench_row *pp, struct ns_bench_row *tg, const struct bench_ids *forced,
		     struct bench_ids *refs, double times[3])
{
	const size_t nd = o->n_drafts ? o->n_drafts : 1; /* tg rows per depth */
	struct ns_engine_opts eo;
	struct ns_engine *e = NULL;
	struct ns_gen_params g;
	struct ns_engine_stats st;
	struct bench_ids got = { 0 };
	char err[NS_ERR_LEN];
	uint64_t t0;
	bool said = false; /* a line of ours already names the failure */
	int rc;

	ns_engine_opts_default(&eo);
	eo.mem_budget = c->mem;
	eo.ram_budget = c->ram;
	eo.vram_budget = c->vram;
	eo.backend = o->backend ? o->backend : "cpu";
	eo.act_q8 = o->act_q8;
	eo.cache_type_k = o->ctk;
	eo.cache_type_v = o->ctv;
	if (o->run_ahead >= 0)
		eo.run_ahead = o->run_ahead;
	eo.moe_predict = o->moe_predict;
	eo.block_rows = c->rows;
	eo.lookahead = c->lookahead;
	eo.threads = o->threads;
	eo.no_plan = o->no_plan;
	eo.draft_model = o->draft_model;
	if (o->n_ctx)
		eo.n_ctx = o->n_ctx;
	eo.cancel = &s_interrupted;
	t0 = ns_now_ns();
	rc = ns_engine_load(o->model, &eo, &e, err, sizeof(err));
	times[0] = (double)(ns_now_ns() - t0) / 1e9;
	if (rc < 0) {
		fprintf(stderr, "\nnsctl bench: %s\n", err);
		return rc;
	}
	ns_gen_params_default(&g);
	g.temperature = 0;
	g.no_stop = true;
	g.repeat_penalty = 1.0f;
	/* warm-up: one short generation (children's page-ins, kernel dispatch, first reads) */
	g.n_predict = 1;
	t0 = ns_now_ns();
	rc = ns_engine_generate(e, "The", &g, NULL, NULL);
	times[1] = (double)(ns_now_ns() - t0) / 1e9;
	if (rc == 0 && o->n_prompt) {
		g.n_predict = 0;
		rc = ns_engine_generate(e, pp_text, &g, NULL, NULL);
		if (rc == 0) {
			ns_engine_stats(e, &st);
			times[2] = st.prefill_s;
			if (st.prefill_tok_s > 0 && pp->n_samples < NS_BENCH_MAX_SAMPLES) {
				double dev = st.n_prompt ? (double)st.dev_prefill / st.n_prompt : 0;
				pp->ts[pp->n_samples++] = st.prefill_tok_s;
				double req = st.n_prompt ? (double)st.req_prefill / st.n_prompt
							 : 0;

				s_accumulate(pp, dev, req, st.stall_ms_per_token,
					     (double)st.arena_peak, st.cache_hit_rate, &st);
			}
		}
	}
	for (size_t di = 0; rc == 0 && o->n_gen && di < o->depths.n; di++, tg += nd) {
		/* forced->ids: depth + 1 prompt tokens (prefill, untimed), then the n_gen tokens
		 * to decode */
		const uint32_t d = (uint32_t)o->depths.v[di];

		if (o->n_drafts) { /* generated, one row per drafter (its own line on failure) */
			if ((rc = bench_draft_runs(e, o, forced->ids, d + 1, &refs[di], tg)) < 0)
				said = !s_interrupted;
			continue;
		}
		got.n = 0;
		got.n_want = ns_progress_wanted(o->quiet) ? o->n_gen : 0; /* the token counter */
		got.t0 = ns_now_ns();
		rc = ns_engine_decode_forced(e, forced->ids, d + 1, forced->ids + d + 1, o->n_gen,
					     NULL, bench_collect, &got);
		if (rc == 0 && (got.n != o->n_gen ||
				memcmp(got.ids, forced->ids + d + 1, got.n * sizeof(*got.ids)))) {
			fprintf(stderr, "\nnsctl bench: decoded %u tokens, not the %u forced ones\n",
				got.n, o->n_gen);
			rc = -EPROTO;
			said = true;
		} else if (rc == 0) {
			ns_engine_stats(e, &st);
			if (st.decode_tok_s > 0 && tg->n_samples < NS_BENCH_MAX_SAMPLES) {
				double b = st.dev_gb_per_token > 0 ? st.dev_gb_per_token
								   : st.gb_per_token;
				tg->ts[tg->n_samples++] = st.decode_tok_s;
				s_accumulate(tg, b * 1e9, (double)st.req_decode / st.n_decode,
					     st.stall_ms_per_token, (double)st.arena_peak,
					     st.cache_hit_rate, &st);
			}
		}
	}
	if (rc < 0 && !said) /* the engine's line (an -EPROTO of its own too) */
		fprintf(stderr, "\nnsctl bench: %s\n", s_interrupted ? "interrupted"
								   : ns_engine_error(e));
	free(got.ids);
	ns_engine_free(&e);
	return rc;
}

int cmd_bench(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = s_on_signal };
	struct bench_opts o;
	struct bench_config cfg[BENCH_MAX_CONFIGS];
	struct ns_bench_row *pp = NULL, *tg = NULL, *out = NULL;
	struct ns_model *m = NULL;
	struct bench_ids forced = { 0 }, *refs = NULL;
	struct ns_engine *probe = NULL;
	struct ns_engine_opts eo;
	struct bench_disk *disk = NULL;
	char err[NS_ERR_LEN], name[96], *pp_text = NULL, pulled[4096];
	uint64_t n_params = 0;
	uint32_t pp_tokens = 0;
	double disk_bps = -1;
	size_t nc = 0, nrow = 0, nd;
	int rc = 0, exit_code = 0;

	const char *ram_draft; /* the draft model counted in RAM: on cuda it is in VRAM */

	if (bench_parse(&o, argc, argv))
		return 2;
	ram_draft = nsctl_ram_draft(false, o.draft_model, o.backend);
	if ((rc = nsctl_model_arg("nsctl bench", &o.model, pulled, sizeof(pulled))))
		return rc; /* REPO:QUANT -> the cached file */
	if (!o.budgets.n && !o.ram.n) { /* as nsctl run: what nsctl plan would choose */
		uint64_t mem = 0, ram = 0;
		char line[320];

		if ((rc = nsctl_pick_budgets("nsctl bench", o.model, ram_draft, NULL, o.n_ctx, 1, o.ctk,
					     o.ctv, false, &mem, false, &ram, line, sizeof(line),
					     NULL, 0)))
			return rc;
		fprintf(stderr, "%s\n", line);
		o.budgets = (struct bench_list){ .v = { mem }, .n = 1 };
		o.ram = (struct bench_list){ .v = { ram }, .n = 1 };
	}
	if (bench_configs(&o, cfg, &nc))
		return 2;
	if ((rc = ns_model_open(o.model, &m, err, sizeof(err)))) {
		fprintf(stderr, "nsctl bench: %s\n", err);
		return rc == -EINVAL ? 2 : 1;
	}
	/* each configuration's budgets checked as nsctl run checks named ones, before anything
	 * starts: the arena's least and what memory holds (nsctl_check_budgets), the cuda pass's
	 * fixed set within each VRAM budget */
	{
		uint64_t mems[BENCH_MAX_CONFIGS], rams[BENCH_MAX_CONFIGS];

		for (size_t i = 0; i < nc; i++) {
			mems[i] = cfg[i].mem;
			rams[i] = cfg[i].ram;
		}
		rc = nsctl_check_budgets("nsctl bench", o.model, ram_draft, NULL, o.n_ctx, 1,
					 o.ctk, o.ctv, mems, rams, nc);
		for (size_t i = 0; i < o.vram.n && cfg[0].cuda && !rc; i++)
			if (o.vram.v[i])
				rc = nsctl_check_vram("nsctl bench", o.model, o.n_ctx, o.ctk,
						      o.ctv, o.vram.v[i], 0);
		/* a draft model on cuda: its arena out of each VRAM budget (draft_model.h) */
		for (size_t i = 0; i < o.vram.n && o.draft_model && !ram_draft && !rc; i++) {
			uint64_t r;

			if (o.vram.v[i] &&
			    nsctl_draft_vram_reserve(o.model, o.draft_model,
						     o.n_ctx ? o.n_ctx : NSCTL_DEFAULT_CTX, o.ctk,
						     o.ctv, o.vram.v[i], 0, &r, NULL, err,
						     sizeof(err)) < 0) {
				fprintf(stderr, "nsctl bench: %s\n", err);
				rc = 2;
			}
		}
		if (rc) {
			exit_code = rc;
			goto done;
		}
	}
	for (uint64_t i = 0; i < m->n_tensors; i++)
		n_params += m->tensors[i].n_elems;
	s_model_name(m, n_params, name, sizeof(name));
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	nd = o.n_drafts ? o.n_drafts : 1;
	pp = calloc(nc, sizeof(*pp));
	tg = calloc(nc * o.depths.n * nd, sizeof(*tg));
	out = calloc((1 + o.depths.n * nd) * nc, sizeof(*out));
	disk = calloc(1, sizeof(*disk));
	refs = calloc(o.depths.n, sizeof(*refs));
	if (!pp || !tg || !out || !disk || !refs) {
		fprintf(stderr, "nsctl bench: out of memory\n");
		exit_code = 1;
		goto done;
	}
	for (size_t i = 0; i < nc; i++) {
		s_fill_budgets(&pp[i], &cfg[i], name, m->total_tensor_bytes, n_params, -1);
		pp[i].n_prompt = o.n_prompt;
		for (size_t di = 0; di < o.depths.n * nd; di++) {
			struct ns_bench_row *t = &tg[i * o.depths.n * nd + di];
			const struct bench_draft *dr = o.n_drafts ? &o.drafts[di % nd] : NULL;

			s_fill_budgets(t, &cfg[i], name, m->total_tensor_bytes, n_params, -1);
			t->n_gen = o.n_gen;
			t->n_depth = (uint32_t)o.depths.v[di / nd];
			/* the plan predicts a pass's bytes: a generated token's without drafts */
			if (!dr || dr->kind == NS_GEN_DRAFT_NONE)
				t->plan_bytes_per_token = s_plan_bytes(m, &cfg[i]);
			if (dr)
				snprintf(t->draft, sizeof(t->draft), "%s", dr->name);
		}
	}
	/* the pp prompt and the tg tokens, cut with the model's tokenizer (first configuration's
	 * engine) */
	if (o.n_prompt || o.n_gen) {
		ns_engine_opts_default(&eo);
		eo.mem_budget = cfg[0].mem;
		eo.block_rows = cfg[0].rows;
		eo.lookahead = cfg[0].lookahead;
		eo.no_plan = true;
		eo.cancel = &s_interrupted;
		rc = ns_engine_load(o.model, &eo, &probe, err, sizeof(err));
		if (rc == 0 && o.n_prompt)
			rc = bench_prompt(probe, o.n_prompt, &pp_text, &pp_tokens);
		else if (rc < 0)
			fprintf(stderr, "nsctl bench: %s\n", err);
		if (rc == 0 && o.n_gen) {
			uint64_t dmax = 0;

			for (size_t di = 0; di < o.depths.n; di++)
				dmax = o.depths.v[di] > dmax ? o.depths.v[di] : dmax;
			rc = bench_forced(probe, (uint32_t)dmax + o.n_gen + 1, &forced);
		}
		ns_engine_free(&probe);
		if (rc < 0) {
			exit_code = rc == -EINVAL || rc == -ENOSPC ? 2 : 1;
			goto done;
		}
		if (o.n_prompt && pp_tokens != o.n_prompt)
			fprintf(stderr, "nsctl bench: the pp prompt has %u tokens (of %u asked)\n",
				pp_tokens, o.n_prompt);
	}
	bench_measure_disk(&o, m, o.disk_repeats, false, disk);
	for (uint32_t r = 0; r < o.repeats && !s_interrupted; r++) {
		for (size_t k = 0; k < nc && !s_interrupted; k++) {
			size_t i = r % 2 ? nc - 1 - k : k; /* alternate the sweep order */
			double times[3] = { 0 };
			char what[160];

			bench_config_text(&cfg[i], what, sizeof(what));
			if (ns_progress_wanted(o.quiet)) /* the line below replaces it */
				fprintf(stderr, "\rnsctl bench: repeat %u/%u, configuration %zu/%zu "
					"(%s) ...", r + 1, o.repeats, k + 1, nc, what);
			rc = s_run_one(&o, &cfg[i], pp_text, &pp[i], &tg[i * o.depths.n * nd],
				       &forced, refs, times);
			if (rc < 0) {
				exit_code = s_interrupted ? 130 : rc == -EINVAL || rc == -ENOSPC ? 2 : 1;
				goto done;
			}
			fprintf(stderr, "\rnsctl bench: repeat %u/%u, configuration %zu/%zu (%s): load "
				"%.2f s, warm-up %.2f s, prefill %.2f s", r + 1, o.repeats, k + 1, nc,
				what, times[0], times[1], times[2]);
			for (size_t di = 0; di < o.depths.n * nd; di++) {
				const struct ns_bench_row *t = &tg[i * o.depths.n * nd + di];

				if (t->n_samples && t->n_depth)
					fprintf(stderr, ", tg @ d%u", t->n_depth);
				else if (t->n_samples)
					fprintf(stderr, ", tg");
				if (t->n_samples)
					fprintf(stderr, "%s%s %.2f t/s", t->draft[0] ? " " : "",
						t->draft, t->ts[t->n_samples - 1]);
			}
			fputc('\n', stderr);
			/* one pass of the drive between configurations: the limit is sampled
			 * across the run, not only at its ends */
			bench_measure_disk(&o, m, 1, true, disk);
		}
	}
	if (s_interrupted) {
		exit_code = 130;
		goto done;
	}
	bench_measure_disk(&o, m, o.disk_repeats, false, disk);
	if (disk->n && !disk->failed && ns_stats_median(disk->bps, disk->n, &disk_bps) == 0) {
		double mean, sd;

		ns_stats_mean_sd(disk->bps, disk->n, &mean, &sd);
		fprintf(stderr, "nsctl bench: roofline bandwidth %.3f GB/s: median of %zu drive passes "
			"over the run (mean %.3f ± %.3f)\n", disk_bps / 1e9, disk->n, mean / 1e9,
			sd / 1e9);
		for (size_t i = 0; i < nc; i++)
			pp[i].disk_bps = disk_bps;
		for (size_t i = 0; i < nc * o.depths.n * nd; i++)
			tg[i].disk_bps = disk_bps;
	}
	for (size_t i = 0; i < nc; i++) {
		if (o.n_prompt) {
			s_finish(&pp[i]);
			out[nrow++] = pp[i];
		}
		for (size_t di = 0; o.n_gen && di < o.depths.n * nd; di++) {
			s_finish(&tg[i * o.depths.n * nd + di]);
			out[nrow++] = tg[i * o.depths.n * nd + di];
		}
	}
	if (o.n_gen && disk_bps > 0)
		bench_moe_random_limit(&o, m, tg, nc * o.depths.n * nd);
	if (ns_table_print(stdout, o.fmt, out, nrow) < 0) {
		fprintf(stderr, "nsctl bench: cannot write the table\n");
		exit_code = 1;
	}
done:
	free(pp_text);
	free(disk);
	free(forced.ids);
	for (size_t di = 0; refs && di < o.depths.n; di++)
		free(refs[di].ids);
	free(refs);
	free(pp);
	free(tg);
	free(out);
	ns_model_close(&m);
	return exit_code;
}
