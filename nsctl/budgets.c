/* budgets.c - the budgets of a run before anything starts: the choice `nsctl plan` prints and
 * `nsctl run` and `nsctl bench` take (nsctl_pick_budgets), the check of budgets the user named
 * (nsctl_check_budgets, nsctl_check_vram). One line on stderr for every refusal. */
#include "budgets.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "arch.h"
#include "draft_model.h"
#include "image_embed.h"
#include "neurostream.h"
#include "vision.h"
#include "vision_hparams.h"
#include "gpu_need.h"
#include "kv_type.h"
#include "ns_util.h"

uint32_t nsctl_default_ctx(const struct ns_hparams *hp, uint32_t n_ctx)
{
	if (n_ctx)
		return n_ctx;
	return hp->n_ctx_train && hp->n_ctx_train < NSCTL_DEFAULT_CTX ? hp->n_ctx_train
								      : NSCTL_DEFAULT_CTX;
}

/* Bytes of 32 elements of a KV cache type name (NULL: f32). */
static uint32_t s_b32(const char *kv_type)
{
	return (uint32_t)ns_kv_row_bytes((enum ns_kv_type)nsctl_kv_enum(kv_type), 32);
}

int nsctl_budget_inputs(const struct ns_model *m, uint32_t n_ctx, const char *ctk,
			const char *ctv, const uint64_t *overhead, bool runnable,
			struct ns_hparams *hp, struct ns_summary *sum, struct nsplan_fixed *fx,
			char *err, size_t errlen)
{
	int ret = ns_hparams_load(m, hp, err, errlen);

	/* run and bench refuse a model no backend runs before their budgets' line; plan still
	 * plans an architecture no pass computes yet (by the table where it describes it, else
	 * by shapes), but not one whose tables contradict each other */
	if (!ret)
		ret = runnable ? ns_arch_check(m, NS_BACKEND_CPU | NS_BACKEND_CUDA, err, errlen)
			       : ns_arch_check_described(m, err, errlen);
	if (!ret && ns_summary_compute(m, hp, sum)) {
		ns_errf(err, errlen, "out of memory");
		ret = -ENOMEM;
	}
	if (!ret)
		ret = nsplan_fixed_compute_kv(m, hp, nsctl_default_ctx(hp, n_ctx), s_b32(ctk),
					      s_b32(ctv), overhead ? *overhead :
					      nsplan_process_overhead(m), fx, err, errlen);
	return ret;
}

/* What the fixed set's draft bytes are, for the lines that name them. */
static const char *s_draft_what(const struct nsplan_fixed *fx)
{
	return fx->draft_mtp ? "MTP block" : "draft model";
}

int nsctl_fixed_add_draft(struct nsplan_fixed *fx, const struct ns_model *m,
			  const struct ns_hparams *hp, const char *draft, char *err, size_t errlen)
{
	uint64_t b;
	int rc;

	if (!draft)
		return 0;
	if (!strcmp(draft, NSCTL_DRAFT_MTP)) /* the model's own block, resident (mtp.h) */
		rc = nsplan_mtp_bytes(m, hp, fx->n_ctx, &b, err, errlen);
	else
		rc = nsctl_draft_bytes(draft, fx->n_ctx, &b, err, errlen);
	if (rc < 0)
		return rc;
	if (ns_add_u64_overflow(fx->total, b, &fx->total))
		return ns_errf(err, errlen, "--draft %s: the fixed set overflows", draft),
		       -EOVERFLOW;
	fx->draft_bytes = b;
	fx->draft_mtp = !strcmp(draft, NSCTL_DRAFT_MTP);
	return 0;
}

int nsctl_fixed_add_tower(struct nsplan_fixed *fx, const struct nsctl_tower *tower, char *err,
			  size_t errlen)
{
	const char *mmproj = tower ? tower->mmproj : NULL;
	struct ns_model *t = NULL;
	struct ns_vision_hparams vhp;
	struct ns_image_work w = { 0 };
	char why[NS_ERR_LEN];
	uint64_t b = 0, sum;
	int rc;

	if (!mmproj)
		return 0;
	rc = ns_model_open(mmproj, &t, why, sizeof(why));
	if (rc == 0)
		rc = ns_vision_hparams_load(t, &vhp, why, sizeof(why));
	/* what the tower holds (vision.h: biases, norms, the patch kernel as float; its
	 * matrices and position grid stream through the arena, nsio --mmproj); then what one
	 * prompt's images take while nscompute embeds them (image_embed.h) */
	if (rc == 0) {
		b = ns_vision_held_bytes(&vhp);
		if (ns_image_work_bytes(&vhp, &tower->lim, fx->n_ctx, NS_ENGINE_MAX_IMAGES,
					&w) < 0 ||
		    ns_add_u64_overflow(b, w.total, &sum) ||
		    ns_add_u64_overflow(fx->total, sum, &fx->total)) {
			snprintf(why, sizeof(why), "the fixed set overflows");
			rc = -EOVERFLOW;
		}
	}
	/* its matrices stream through the arena: the widest row sets a least arena too */
	for (uint64_t i = 0; rc == 0 && i < t->n_tensors; i++)
		if (t->tensors[i].row_bytes > fx->tower_row_bytes)
			fx->tower_row_bytes = t->tensors[i].row_bytes;
	if (rc == 0)
		fx->tower_min_arena = ns_stream_min_budget(fx->tower_row_bytes,
							   NS_DEFAULT_LOOKAHEAD);
	ns_model_close(&t);
	if (rc < 0)
		return ns_errf(err, errlen, "--mmproj %s: %s", mmproj, why), rc;
	fx->tower_bytes = b;
	fx->image_bytes = w.total;
	fx->image_tokens = w.max_tokens;
	return 0;
}

uint64_t nsctl_cacheable_bytes(const struct ns_model *m, const struct ns_hparams *hp, bool embd)
{
	uint64_t total = m->total_tensor_bytes;

	for (uint64_t i = 0; i < m->n_tensors && !embd; i++)
		if (nsplan_tensor_kind(&m->tensors[i], hp) == NSPLAN_KIND_EMBD)
			total -= m->tensors[i].n_bytes;
	return total;
}

/* Routed-expert bytes one token reads in one layer, on average over the layers (0: dense). */
static uint64_t s_layer_expert_bytes(const struct ns_model *m, const struct ns_hparams *hp)
{
	uint64_t total = 0;

	if (!hp->n_expert || !hp->n_expert_used || !hp->n_layer)
		return 0;
	for (uint64_t i = 0; i < m->n_tensors; i++)
		if (nsplan_tensor_kind(&m->tensors[i], hp) == NSPLAN_KIND_EXPERT)
			total += m->tensors[i].n_bytes; /* <= the file sizes: no overflow */
	return total / hp->n_layer / hp->n_expert * hp->n_expert_used;
}

/* A refusal's one line: into a->err when the caller gave a buffer (the library), else on
 * stderr after "who: " (the commands). */
static void __attribute__((format(printf, 2, 3))) s_refuse(const struct nsctl_budget_req *a,
							   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (a->err) {
		vsnprintf(a->err, a->errlen, fmt, ap);
	} else {
		fprintf(stderr, "%s: ", a->who);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}

uint64_t nsctl_host_total(const struct ns_model *m, uint64_t mem, uint64_t ram,
			  const struct nsplan_fixed *fx)
{
	uint64_t t, fill = ram < m->total_tensor_bytes ? ram : m->total_tensor_bytes;

	/* memory is charged in pages, and a cgroup's limit is a whole number of them */
	if (ns_add_u64_overflow(fill, mem, &t) || ns_add_u64_overflow(t, fx->total, &t) ||
	    t > UINT64_MAX - 4095)
		return UINT64_MAX;
	return (t + 4095) & ~4095ull;
}

/* The line for named budgets whose session does not fit the memory available: the figures,
 * where the limit comes from, and what to lower. What to lower is the first of: the RAM
 * budget alone, the arena alone (not below the smallest workable one), both together, and
 * the fixed set (nothing a budget can give back). */
static void s_say_over(const struct nsctl_budget_req *a, const struct ns_model *m, uint64_t mem,
		       uint64_t ram, uint64_t min_arena, const struct nsplan_fixed *fx,
		       const struct nsplan_mem_probe *probe)
{
	uint64_t need = nsctl_host_total(m, mem, ram, fx);
	uint64_t fill = ram < m->total_tensor_bytes ? ram : m->total_tensor_bytes;
	uint64_t avail = probe->available;
	uint64_t whole = avail & ~4095ull; /* charged in pages */
	uint64_t room = whole > fx->total ? whole - fx->total : 0; /* for the budgets */
	bool cg = probe->cgroup_limit < probe->mem_available;
	char s[14][32], fix[200], draft[128] = "", exact[64] = "";

	if (fill && room > mem)
		snprintf(fix, sizeof(fix), "lower --ram-budget to %" PRIu64 " or less",
			 room - mem);
	else if (room > fill && room - fill >= min_arena)
		snprintf(fix, sizeof(fix), "lower --mem-budget to %" PRIu64 " or less", room - fill);
	else if (room >= min_arena)
		snprintf(fix, sizeof(fix), "lower both: --mem-budget and --ram-budget together "
			 "%" PRIu64 " or less (the arena at least %" PRIu64 "), or -c", room,
			 min_arena);
	else if (fx->image_bytes)
		snprintf(fix, sizeof(fix), "the fixed set alone (with the smallest arena, %" PRIu64
			 ") does not fit: lower -c or --max-patches (or -ctk/-ctv f16|q8_0)",
			 min_arena);
	else
		snprintf(fix, sizeof(fix), "the fixed set alone (with the smallest arena, %" PRIu64
			 ") does not fit: lower -c (or -ctk/-ctv f16|q8_0)", min_arena);
	if (fx->draft_bytes)
		snprintf(draft, sizeof(draft), ", %s %s", s_draft_what(fx),
			 ns_format_bytes(fx->draft_bytes, s[11], 32));
	if (fx->tower_bytes)
		snprintf(draft + strlen(draft), sizeof(draft) - strlen(draft), ", vision tower %s, "
			 "images %s", ns_format_bytes(fx->tower_bytes, s[12], 32),
			 ns_format_bytes(fx->image_bytes, s[13], 32));
	ns_format_bytes(avail, s[10], 32);
	if (need == UINT64_MAX)
		snprintf(s[9], 32, "more than 2^64 bytes");
	else
		ns_format_bytes(need, s[9], 32);
	if (!strcmp(s[9], s[10])) /* a few pages over: the rounded figures would look equal */
		snprintf(exact, sizeof(exact), "; %" PRIu64 " > %" PRIu64 " bytes", need, avail);
	s_refuse(a, "--mem-budget %s + --ram-budget %s (%s of it for this model's %s) + "
		 "the fixed set %s (KV cache %s, scratch %s, processes %s, margin %s%s at -c %u) = %s "
		 "exceed the %s of memory available (%s%s%s%s); %s",
		ns_format_bytes(mem, s[0], 32), ns_format_bytes(ram, s[1], 32),
		ns_format_bytes(fill, s[2], 32), ns_format_bytes(m->total_tensor_bytes, s[3], 32),
		ns_format_bytes(fx->total, s[4], 32),
		ns_format_bytes(fx->kv_bytes + fx->recurrent_bytes + fx->rollback_bytes, s[5], 32),
		ns_format_bytes(fx->scratch_bytes, s[6], 32),
		ns_format_bytes(fx->overhead_bytes, s[7], 32),
		ns_format_bytes(fx->margin_bytes, s[8], 32), draft, fx->n_ctx, s[9], s[10],
		cg ? "the cgroup's limit" : "MemAvailable",
		cg && probe->cgroup_file[0] ? ", " : "", cg ? probe->cgroup_file : "", exact, fix);
}

/* The line for an arena under the smallest workable one. */
static void s_say_small_arena(const struct nsctl_budget_req *a, const struct ns_model *m,
			      const struct ns_summary *sum, const struct nsplan_fixed *fx,
			      uint64_t mem)
{
	uint64_t least = nsplan_min_arena(sum->min_mem_budget, fx);
	bool tower = least > sum->min_mem_budget;
	char s[2][32];

	s_refuse(a, "--mem-budget %s is below the smallest workable arena: --mem-budget %"
		PRIu64 " (%s: %u blocks of one row of %s, %" PRIu64 " bytes)",
		ns_format_bytes(mem, s[0], 32), least, ns_format_bytes(least, s[1], 32),
		NS_DEFAULT_LOOKAHEAD + 1,
		tower ? "the vision tower's widest tensor" : m->tensors[sum->max_row_tensor].name,
		tower ? fx->tower_row_bytes : sum->max_row_bytes);
}

int nsctl_budgets_complete(struct nsctl_budget_req *a, const struct ns_model *m,
			   const struct ns_hparams *hp, const struct ns_summary *sum,
			   const struct nsplan_fixed *fx, struct nsplan_mem_probe *probe,
			   bool *probed, struct nsplan_default_out *dflt, bool *defaulted)
{
	uint64_t gpu_fixed = fx->kv_bytes + fx->recurrent_bytes + fx->scratch_bytes;
	char err[NS_ERR_LEN], s[5][32];

	if (a->b.vram) {
		/* the CUDA pass's exact set besides weight windows (nsplan/gpu_need.h) */
		struct nsplan_gpu_need gn;

		if (nsplan_gpu_need(m, fx->n_ctx, 0, 0, (enum ns_kv_type)nsctl_kv_enum(a->ctk),
				    (enum ns_kv_type)nsctl_kv_enum(a->ctv), &gn, err,
				    sizeof(err)) == 0)
			gpu_fixed = gn.total;
		if (!a->reserve_given)
			a->b.reserve_vram = gpu_fixed;
		if (a->b.reserve_vram < gpu_fixed || a->b.vram < a->b.reserve_vram) {
			uint64_t least = a->b.reserve_vram > gpu_fixed ? a->b.reserve_vram : gpu_fixed;
			s_refuse(a, "--vram-budget %s with reserve %s cannot hold the "
				"GPU fixed set %s (KV cache, scratch, vectors and staging at -c %u); smallest "
				"workable: "
				"--vram-budget %" PRIu64 " --reserve-vram %" PRIu64,
				ns_format_bytes(a->b.vram, s[0], 32),
				ns_format_bytes(a->b.reserve_vram, s[1], 32),
				ns_format_bytes(gpu_fixed, s[2], 32), fx->n_ctx, least, gpu_fixed);
			return 2;
		}
		/* a draft model's arena beside the pass: out of the budget, in the reserve */
		if (a->draft_vram && a->b.vram - a->b.reserve_vram < a->draft_vram) {
			s_refuse(a, "the draft model's %s of VRAM (weights, KV cache and scratch at "
				 "-c %u) does not fit: with the cuda pass's %s it exceeds "
				 "--vram-budget %s; smallest workable: --vram-budget %" PRIu64 " (or a "
				 "smaller draft, a lower -c, or --backend cpu)",
				 ns_format_bytes(a->draft_vram, s[0], 32), fx->n_ctx,
				 ns_format_bytes(a->b.reserve_vram, s[1], 32),
				 ns_format_bytes(a->b.vram, s[2], 32),
				 a->b.reserve_vram + a->draft_vram);
			return 2;
		}
		a->b.reserve_vram += a->draft_vram;
	} else if (a->reserve_given && a->b.reserve_vram) {
		s_refuse(a, "--reserve-vram needs a --vram-budget");
		return 2;
	}
	if (a->mem_given && a->b.mem < nsplan_min_arena(sum->min_mem_budget, fx)) {
		s_say_small_arena(a, m, sum, fx, a->b.mem);
		return 2;
	}
	*probed = nsplan_mem_probe(&a->paths, probe, err, sizeof(err)) == 0;
	if (*probed && fx->draft_bytes) { /* the draft first: its own line, what to drop */
		uint64_t arena = a->mem_given ? a->b.mem : nsplan_min_arena(sum->min_mem_budget, fx);

		if (fx->total > probe->available || arena > probe->available - fx->total) {
			s_refuse(a, "the %s's %s (weights, KV cache and scratch at -c %u) does "
				 "not fit: with the fixed set %s and the arena %s it exceeds the %s "
				 "of memory available (%s); use a smaller draft, lower -c, or drop "
				 "--draft", s_draft_what(fx),
				 ns_format_bytes(fx->draft_bytes, s[0], 32), fx->n_ctx,
				 ns_format_bytes(fx->total - fx->draft_bytes, s[1], 32),
				 ns_format_bytes(arena, s[2], 32),
				 ns_format_bytes(probe->available, s[3], 32),
				 probe->cgroup_limit < probe->mem_available ? "the cgroup's limit"
									     : "MemAvailable");
			return 2;
		}
	}
	if (*probed && fx->tower_bytes) { /* likewise the tower and its images */
		uint64_t arena = a->mem_given ? a->b.mem : nsplan_min_arena(sum->min_mem_budget, fx);

		if (fx->total > probe->available || arena > probe->available - fx->total) {
			s_refuse(a, "the vision tower's %s and its images' working memory %s "
				 "(images of up to %" PRIu64 " tokens at -c %u) do not fit: with the "
				 "rest of the fixed set %s and the arena %s they exceed the %s of "
				 "memory available (%s); lower --max-patches or -c",
				 ns_format_bytes(fx->tower_bytes, s[0], 32),
				 ns_format_bytes(fx->image_bytes, s[1], 32), fx->image_tokens,
				 fx->n_ctx, ns_format_bytes(fx->total - fx->tower_bytes -
							    fx->image_bytes, s[2], 32),
				 ns_format_bytes(arena, s[3], 32),
				 ns_format_bytes(probe->available, s[4], 32),
				 probe->cgroup_limit < probe->mem_available ? "the cgroup's limit"
									     : "MemAvailable");
			return 2;
		}
	}
	if (a->ram_given && a->mem_given) {
		if (*probed && nsctl_host_total(m, a->b.mem, a->b.ram, fx) > probe->available) {
			s_say_over(a, m, a->b.mem, a->b.ram, sum->min_mem_budget, fx, probe);
			return 2;
		}
		return 0;
	}
	if (!*probed) {
		s_refuse(a, "%s", err);
		return 2;
	}
	struct nsplan_default_in in = {
		.available = probe->available, .fixed = fx->total,
		.min_arena = nsplan_min_arena(sum->min_mem_budget, fx),
		.max_row_bytes = sum->max_row_bytes,
		.cacheable = nsctl_cacheable_bytes(m, hp, a->embd_resident),
		.lookahead = NS_DEFAULT_LOOKAHEAD, .block_bytes = NSPLAN_DEFAULT_BLOCK_BYTES,
		.layer_expert_bytes = s_layer_expert_bytes(m, hp),
		.ram_given = a->ram_given, .mem_given = a->mem_given,
	};
	/* what VRAM holds need not be cached in RAM too */
	uint64_t vram_w = a->b.vram - a->b.reserve_vram;
	in.cacheable = in.cacheable > vram_w ? in.cacheable - vram_w : 0;
	if (nsplan_default_budgets(&in, &a->b, dflt, err, sizeof(err))) {
		s_refuse(a, "%s", err);
		return 2;
	}
	*defaulted = true;
	return 0;
}

/* nsctl serve --parallel N: a KV cache and a recurrent state per sequence, the rest shared */
static int s_fixed_for_seqs(struct nsplan_fixed *fx, uint32_t n_seq, char *err, size_t errlen)
{
	uint64_t per = fx->kv_bytes + fx->recurrent_bytes, all;

	if (n_seq <= 1)
		return 0;
	if (per < fx->kv_bytes || ns_mul_u64_overflow(per, n_seq, &all) ||
	    fx->total + (all - per) < fx->total) {
		ns_errf(err, errlen, "%u sequences' KV caches of %llu bytes overflow", n_seq,
			(unsigned long long)per);
		return -EOVERFLOW;
	}
	fx->total += all - per;
	fx->kv_bytes *= n_seq;
	fx->recurrent_bytes *= n_seq;
	return 0;
}

int nsctl_pick_budgets(const char *who, const char *model, const char *draft,
		       const struct nsctl_tower *tower, uint32_t n_ctx,
		       uint32_t n_seq, const char *ctk, const char *ctv, bool mem_given,
		       uint64_t *mem, bool ram_given, uint64_t *ram, char *line, size_t linelen,
		       char *errbuf, size_t errlen)
{
	struct nsctl_budget_req a = { .who = who, .mem_given = mem_given, .ram_given = ram_given,
				      .err = errbuf, .errlen = errlen, .ctk = ctk, .ctv = ctv };
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	struct ns_summary sum = { 0 };
	struct nsplan_fixed fx;
	struct nsplan_mem_probe probe;
	struct nsplan_default_out dflt;
	bool probed = false, defaulted = false;
	char err[NS_ERR_LEN], s[6][32];
	int ret;

	a.b.mem = mem_given ? *mem : 0;
	a.b.ram = ram_given ? *ram : 0;
	line[0] = 0;
	ret = ns_model_open(model, &m, err, sizeof(err));
	/* run and bench: a model no backend runs is refused here, before the budgets' line
	 * (nse_start checks it again for the API's other callers: 0.01 s) */
	if (!ret)
		ret = nsctl_budget_inputs(m, n_ctx, ctk, ctv, NULL, true, &hp, &sum, &fx, err,
					  sizeof(err));
	if (!ret)
		ret = s_fixed_for_seqs(&fx, n_seq, err, sizeof(err));
	if (!ret)
		ret = nsctl_fixed_add_draft(&fx, m, &hp, draft, err, sizeof(err));
	if (!ret)
		ret = nsctl_fixed_add_tower(&fx, tower, err, sizeof(err));
	if (ret) {
		s_refuse(&a, "%s", err);
		ret = ret == -ENOMEM ? 1 : 2;
		goto out;
	}
	/* a given 0 is the engine's own arena (neurostream.h): its size, weighed as given */
	if (mem_given && !a.b.mem) {
		a.b.mem = m->total_tensor_bytes + (16ull << 20);
		if (a.b.mem > (512ull << 20))
			a.b.mem = 512ull << 20;
	}
	ret = nsctl_budgets_complete(&a, m, &hp, &sum, &fx, &probe, &probed, &dflt, &defaulted);
	if (ret)
		goto out;
	*mem = mem_given ? *mem : a.b.mem;
	*ram = a.b.ram;
	if (defaulted) {
		char dr[128] = "";

		if (fx.draft_bytes) /* counted in the fixed set: the RAM cache makes room */
			snprintf(dr, sizeof(dr), " (%s %s)", s_draft_what(&fx),
				 ns_format_bytes(fx.draft_bytes, s[4], 32));
		if (fx.tower_bytes) /* likewise, with the images' working memory */
			snprintf(dr + strlen(dr), sizeof(dr) - strlen(dr), " (vision tower %s, "
				 "images %s)", ns_format_bytes(fx.tower_bytes, s[4], 32),
				 ns_format_bytes(fx.image_bytes, s[5], 32));
		snprintf(line, linelen, "%s: budgets from %s available (%s): --mem-budget %s "
			 "--ram-budget %s, fixed %s%s at -c %u%s", who,
			 ns_format_bytes(probe.available, s[0], 32),
			 probe.cgroup_limit < probe.mem_available ? "the cgroup's limit"
								  : "MemAvailable",
			 ns_format_bytes(a.b.mem, s[1], 32), ns_format_bytes(a.b.ram, s[2], 32),
			 ns_format_bytes(fx.total, s[3], 32), dr, fx.n_ctx,
			 n_seq > 1 ? " per sequence" : "");
	}
out:
	ns_summary_free(&sum);
	ns_model_close(&m);
	return ret;
}

int nsctl_check_budgets(const char *who, const char *model, const char *draft,
			const struct nsctl_tower *tower, uint32_t n_ctx,
			uint32_t n_seq,
			const char *ctk, const char *ctv, const uint64_t *mem, const uint64_t *ram,
			size_t n)
{
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	struct ns_summary sum = { 0 };
	struct nsplan_fixed fx;
	struct nsplan_mem_probe probe;
	bool probed;
	char err[NS_ERR_LEN];
	int ret;

	ret = ns_model_open(model, &m, err, sizeof(err));
	if (!ret)
		ret = nsctl_budget_inputs(m, n_ctx, ctk, ctv, NULL, true, &hp, &sum, &fx, err,
					  sizeof(err));
	if (!ret)
		ret = s_fixed_for_seqs(&fx, n_seq, err, sizeof(err));
	if (!ret)
		ret = nsctl_fixed_add_draft(&fx, m, &hp, draft, err, sizeof(err));
	if (!ret)
		ret = nsctl_fixed_add_tower(&fx, tower, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "%s: %s\n", who, err);
		ret = ret == -ENOMEM ? 1 : 2;
		goto out;
	}
	/* no probe (no MemAvailable): nothing to check the sum against */
	probed = nsplan_mem_probe(NULL, &probe, err, sizeof(err)) == 0;
	for (size_t i = 0; i < n && !ret; i++) {
		/* mem 0: the engine's own arena (the model's bytes + 16 MiB, at most 512 MiB) */
		uint64_t arena = mem[i] ? mem[i] : m->total_tensor_bytes + (16ull << 20);

		if (!mem[i] && arena > (512ull << 20))
			arena = 512ull << 20;
		if (mem[i] && mem[i] < nsplan_min_arena(sum.min_mem_budget, &fx)) {
			struct nsctl_budget_req q = { .who = who }; /* its line on stderr */

			s_say_small_arena(&q, m, &sum, &fx, mem[i]);
			ret = 2;
		} else if (probed && nsctl_host_total(m, arena, ram[i], &fx) > probe.available) {
			struct nsctl_budget_req q = { .who = who }; /* its line on stderr */

			s_say_over(&q, m, arena, ram[i], sum.min_mem_budget, &fx, &probe);
			ret = 2;
		}
	}
out:
	ns_summary_free(&sum);
	ns_model_close(&m);
	return ret;
}

int nsctl_check_vram(const char *who, const char *model, uint32_t n_ctx, const char *ctk,
		     const char *ctv, uint64_t vram, uint64_t reserve)
{
	struct ns_model *m = NULL;
	struct nsplan_gpu_need gn;
	char err[NS_ERR_LEN], s[3][32];
	int ret;

	ret = ns_model_open(model, &m, err, sizeof(err));
	if (!ret)
		ret = nsplan_gpu_need(m, n_ctx ? n_ctx : NSCTL_DEFAULT_CTX, 0, 0,
				      (enum ns_kv_type)nsctl_kv_enum(ctk),
				      (enum ns_kv_type)nsctl_kv_enum(ctv), &gn, err, sizeof(err));
	ns_model_close(&m);
	if (ret) {
		fprintf(stderr, "%s: %s\n", who, err);
		return ret == -ENOMEM ? 1 : 2;
	}
	if (!reserve)
		reserve = gn.total;
	if (reserve < gn.total || vram < reserve) {
		fprintf(stderr, "%s: --vram-budget %s with reserve %s cannot hold the cuda pass's KV "
			"cache, scratch, vectors and staging (%s at -c %u); smallest workable: "
			"--vram-budget %" PRIu64 "\n", who, ns_format_bytes(vram, s[0], 32),
			ns_format_bytes(reserve, s[1], 32), ns_format_bytes(gn.total, s[2], 32),
			n_ctx ? n_ctx : NSCTL_DEFAULT_CTX, reserve > gn.total ? reserve : gn.total);
		return 2;
	}
	return 0;
}

/* Weight bytes of layers 0..ngl-1 ("blk.N." tensors) and of every tensor outside the layers;
 * *n_layer: the layers the file has (the highest N + 1). */
static uint64_t s_layer_bytes(const struct ns_model *m, int64_t ngl, uint32_t *n_layer)
{
	uint64_t sum = 0;

	*n_layer = 0;
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		unsigned layer;

		if (sscanf(t->name, "blk.%u.", &layer) == 1) {
			if (layer + 1 > *n_layer)
				*n_layer = layer + 1;
			if ((int64_t)layer >= ngl)
				continue;
		}
		if (ns_add_u64_overflow(sum, t->n_bytes, &sum))
			return UINT64_MAX;
	}
	return sum;
}

int nsctl_ngl_vram(const char *who, const char *model, uint32_t n_ctx, const char *ctk,
		   const char *ctv, int64_t ngl, uint64_t *vram)
{
	struct ns_model *m = NULL;
	struct nsplan_gpu_need gn;
	char err[NS_ERR_LEN], s[32];
	uint32_t n_layer = 0;
	uint64_t w = 0;
	int ret;

	ret = ns_model_open(model, &m, err, sizeof(err));
	if (!ret)
		ret = nsplan_gpu_need(m, n_ctx ? n_ctx : NSCTL_DEFAULT_CTX, 0, 0,
				      (enum ns_kv_type)nsctl_kv_enum(ctk),
				      (enum ns_kv_type)nsctl_kv_enum(ctv), &gn, err, sizeof(err));
	if (!ret)
		w = s_layer_bytes(m, ngl, &n_layer);
	ns_model_close(&m);
	if (ret) {
		fprintf(stderr, "%s: %s\n", who, err);
		return ret == -ENOMEM ? 1 : 2;
	}
	if (ns_add_u64_overflow(w, gn.total, vram)) {
		fprintf(stderr, "%s: -ngl: the VRAM budget overflows\n", who);
		return 2;
	}
	fprintf(stderr, "%s: -ngl %lld: --backend cuda --vram-budget %s = %" PRIu64 " bytes (%s%u of %u layers' weights, "
		"the others outside the layers, and the cuda pass's needs)\n", who,
		ngl >= n_layer ? -1LL : (long long)ngl, ns_format_bytes(*vram, s, sizeof(s)), *vram,
		ngl >= n_layer ? "all " : "", ngl >= n_layer ? n_layer : (uint32_t)ngl, n_layer);
	return 0;
}
