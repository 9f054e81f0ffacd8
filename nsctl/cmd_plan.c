/* nsctl plan MODEL [budgets] [-c CTX] [--json [--windows]]: the residency plan, the fixed
 * memory beyond the budgets and the predicted disk bytes per decoded token. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budgets.h"
#include "cmd_opt.h"
#include "commands.h"
#include "draft_model.h"
#include "fixed_mem.h"
#include "arch.h"
#include "gpu_need.h"
#include "hparams.h"
#include "image_args.h"
#include "json_out.h"
#include "kv_type.h"
#include "model.h"
#include "ns_util.h"
#include "plan.h"
#include "plan_stats.h"
#include "summary.h"

struct s_args {
	const char *path;
	struct nsctl_budget_req q; /* the budgets asked for, completed by nsctl_budgets_complete */
	bool vram_given;
	uint32_t n_ctx;
	bool json, windows;
	bool overhead_given;
	uint64_t overhead;
	const char *stats_path;
	const char *ctk, *ctv; /* KV cache types (-ctk / -ctv), NULL = f32 */
	const char *draft;     /* --draft MODEL: a draft model counted in the fixed set; "mtp":
				* the model's MTP block (--draft mtp) */
	bool cuda;             /* --backend cuda: a draft model counted in VRAM instead */
	struct nsctl_images img; /* --mmproj and its limits: the tower counted as run counts it */
};

/* Everything the outputs print, gathered once. */
struct s_report {
	const struct s_args *a;
	const struct ns_model *m;
	const struct ns_hparams *hp;
	const struct ns_summary *sum;
	const struct nsplan_fixed *fx;
	const struct nsplan *pl;
	const struct nsplan_mem_probe *probe; /* NULL when not probed */
	const struct nsplan_default_out *dflt; /* NULL when every budget was given */
	uint64_t host_total;  /* what the RAM tier fills + mem + fixed (nsctl_host_total) */
};

static void s_usage(FILE *f)
{
	fprintf(f, "usage: nsctl plan MODEL [--vram-budget B] [--reserve-vram B] [--ram-budget B] "
		   "[--mem-budget B] [-c CTX] [--json [--windows]] [--embd-resident] [--stats FILE] "
		   "[--overhead B] [--meminfo FILE --cgroup-file FILE --cgroup-root DIR] "
		   "[-ctk T] [-ctv T] [--draft MODEL|mtp] [--backend cpu|cuda] [--mmproj F | "
		   "--no-mmproj] [--max-patches N] [--min-pixels N] [--max-pixels N]\n"
		   "  --draft: a draft model (nsctl run --draft) counted in the fixed set; mtp: the\n"
		   "    model's MTP block (nsctl run --draft mtp)\n"
		   "  --backend cuda: a draft model is counted in VRAM (its weights, KV cache and\n"
		   "    scratch in the reserve beside the pass's), not in the fixed set\n"
		   "  --mmproj: a vision tower (nsctl run --mmproj) and its images' working memory "
		   "for images\n    of up to --max-patches tokens (and within --min-pixels, "
		   "--max-pixels) counted in the fixed set;\n    without it, the one mmproj*.gguf "
		   "beside MODEL that fits it (as run --image or --chat takes it)\n"
		   "  --no-mmproj: no vision tower, not even the one beside MODEL\n"
		   "  -ctk/--cache-type-k, -ctv/--cache-type-v: KV cache types counted (f32, f16, "
		   "q8_0)\n"
		   "  --stats: expert hit counts ('tokens LAYER N' and 'LAYER EXPERT HITS' lines)\n"
		   "  budgets in binary units (512MB = 512 MiB); missing ones are derived from "
		   "MemAvailable and the cgroup limit\n");
}

static int s_parse_size(const char *opt, const char *v, uint64_t *out)
{
	int ret = ns_parse_bytes(v, out);

	if (ret) {
		fprintf(stderr, "nsctl plan: %s expects a size like 512MB or 6GB, got '%s'\n", opt, v);
		return -1;
	}
	return 0;
}

enum {
	O_HELP = 1, O_MODEL, O_VRAM, O_RESERVE, O_RAM, O_MEM, O_OVERHEAD, O_CTX, O_CTK, O_CTV,
	O_MEMINFO, O_CGROUP_FILE, O_CGROUP_ROOT, O_STATS, O_JSON, O_WINDOWS, O_EMBD_RESIDENT,
	O_DRAFT, O_BACKEND,
};

static const struct ns_opt s_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	NSCTL_OPT_MODEL(O_MODEL),
	{ "vram-budget", NULL, NS_OPT_VALUE, O_VRAM },
	{ "reserve-vram", NULL, NS_OPT_VALUE, O_RESERVE },
	{ "ram-budget", NULL, NS_OPT_VALUE, O_RAM },
	{ "mem-budget", NULL, NS_OPT_VALUE, O_MEM },
	{ "overhead", NULL, NS_OPT_VALUE, O_OVERHEAD },
	{ "ctx-size", "-c --ctx", NS_OPT_VALUE, O_CTX },
	{ "cache-type-k", "-ctk", NS_OPT_VALUE, O_CTK },
	{ "cache-type-v", "-ctv", NS_OPT_VALUE, O_CTV },
	{ "meminfo", NULL, NS_OPT_VALUE, O_MEMINFO },
	{ "cgroup-file", NULL, NS_OPT_VALUE, O_CGROUP_FILE },
	{ "cgroup-root", NULL, NS_OPT_VALUE, O_CGROUP_ROOT },
	{ "stats", NULL, NS_OPT_VALUE, O_STATS },
	{ "draft", NULL, NS_OPT_VALUE, O_DRAFT },
	{ "backend", NULL, NS_OPT_VALUE, O_BACKEND },
	{ "json", NULL, NS_OPT_SWITCH, O_JSON },
	{ "windows", NULL, NS_OPT_SWITCH, O_WINDOWS },
	{ "embd-resident", NULL, NS_OPT_SWITCH, O_EMBD_RESIDENT },
	/* the image flags of run that change what the tower takes (image_args.h) */
	{ "mmproj", NULL, NS_OPT_VALUE, NSCTL_IMG_MMPROJ },
	NSCTL_NO_MMPROJ_OPT,
	{ "max-patches", NULL, NS_OPT_VALUE, NSCTL_IMG_MAX_PATCHES },
	{ "min-pixels", NULL, NS_OPT_VALUE, NSCTL_IMG_MIN_PIXELS },
	{ "max-pixels", NULL, NS_OPT_VALUE, NSCTL_IMG_MAX_PIXELS },
};

/* One option (o NULL: the model) of s_opts, spelled f: 0, or -EINVAL after one line. */
static int s_on_opt(void *user, const struct ns_opt *o, const char *f, const char *v)
{
	struct s_args *a = user;
	uint64_t n;

	switch (o ? o->id : O_MODEL) {
	case O_HELP:
		s_usage(stdout);
		exit(0);
	case O_VRAM:
		a->vram_given = true;
		return s_parse_size(f, v, &a->q.b.vram) ? -EINVAL : 0;
	case O_RESERVE:
		a->q.reserve_given = true;
		return s_parse_size(f, v, &a->q.b.reserve_vram) ? -EINVAL : 0;
	case O_RAM:
		a->q.ram_given = true;
		return s_parse_size(f, v, &a->q.b.ram) ? -EINVAL : 0;
	case O_MEM:
		a->q.mem_given = true;
		return s_parse_size(f, v, &a->q.b.mem) ? -EINVAL : 0;
	case O_OVERHEAD:
		a->overhead_given = true;
		return s_parse_size(f, v, &a->overhead) ? -EINVAL : 0;
	case O_CTX:
		if (ns_parse_count(v, 1, 1u << 30, &n) < 0) {
			fprintf(stderr, "nsctl plan: %s expects a context length 1..%u, got '%s'\n",
				f, 1u << 30, v);
			return -EINVAL;
		}
		a->n_ctx = (uint32_t)n;
		return 0;
	case O_CTK:
	case O_CTV: /* f may be an abbreviation getopt_long took: name the flag meant */
		return nsctl_kv_set("nsctl plan", nsctl_kv_is_flag(f) ? f : o->id == O_CTK ?
				    "--cache-type-k" : "--cache-type-v", v, &a->ctk, &a->ctv) ?
		       -EINVAL : 0;
	case O_MEMINFO:
		a->q.paths.meminfo = v;
		return 0;
	case O_CGROUP_FILE:
		a->q.paths.self_cgroup = v;
		return 0;
	case O_CGROUP_ROOT:
		a->q.paths.cgroup_root = v;
		return 0;
	case O_STATS:
		a->stats_path = v;
		return 0;
	case O_DRAFT:
		a->draft = v;
		return 0;
	case O_BACKEND:
		if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
			fprintf(stderr, "nsctl plan: %s expects cpu or cuda, got '%s'\n", f, v);
			return -EINVAL;
		}
		a->cuda = !strcmp(v, "cuda");
		return 0;
	case O_JSON:
		a->json = true;
		return 0;
	case O_WINDOWS:
		a->windows = true;
		return 0;
	case O_EMBD_RESIDENT:
		a->q.embd_resident = true;
		return 0;
	case NSCTL_IMG_MMPROJ:
	case NSCTL_IMG_NO_MMPROJ:
	case NSCTL_IMG_MAX_PATCHES:
	case NSCTL_IMG_MIN_PIXELS:
	case NSCTL_IMG_MAX_PIXELS:
		return nsctl_images_opt(&a->img, "nsctl plan", o->id, f, v);
	}
	if (a->path) {
		fprintf(stderr, "nsctl plan: more than one model given ('%s')\n", v);
		return -EINVAL;
	}
	a->path = v;
	return 0;
}

static int s_parse_args(int argc, char **argv, struct s_args *a)
{
	if (ns_opt_parse("nsctl plan", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt, a))
		return 2;
	if (a->windows && !a->json) {
		fprintf(stderr, "nsctl plan: --windows goes with --json\n");
		return 2;
	}
	if (!a->path) {
		fprintf(stderr, "nsctl plan: no MODEL given (usage: nsctl plan MODEL [options]; "
			"--help lists them)\n");
		return 2;
	}
	return 0;
}

/* ---- text output ---- */

static void s_print_tally_row(const char *label, const struct nsplan_tally *t)
{
	char b[4][32];

	printf("  %-8s %7u %14" PRIu64 " %11s %11s %11s %11s\n", label, t->n_tensors, t->bytes,
	       t->tier_bytes[NSPLAN_VRAM_Q] ? ns_format_bytes(t->tier_bytes[NSPLAN_VRAM_Q], b[0], 32) : "-",
	       t->tier_bytes[NSPLAN_VRAM_F] ? ns_format_bytes(t->tier_bytes[NSPLAN_VRAM_F], b[1], 32) : "-",
	       t->tier_bytes[NSPLAN_RAM] ? ns_format_bytes(t->tier_bytes[NSPLAN_RAM], b[2], 32) : "-",
	       t->tier_bytes[NSPLAN_DISK] ? ns_format_bytes(t->tier_bytes[NSPLAN_DISK], b[3], 32) : "-");
}

/* "f32 K+V", or "f16 K, q8_0 V" when the two types differ. */
static const char *s_kv_types(const struct s_args *a, char *buf, size_t n)
{
	const char *k = a->ctk ? a->ctk : "f32", *v = a->ctv ? a->ctv : "f32";

	if (!strcmp(k, v))
		snprintf(buf, n, "%s K+V", k);
	else
		snprintf(buf, n, "%s K, %s V", k, v);
	return buf;
}

static void s_print_text(const struct s_report *r)
{
	const struct nsplan *pl = r->pl;
	const struct nsplan_fixed *fx = r->fx;
	const struct nsplan_predict *pr = &pl->predict;
	const struct s_args *a = r->a;
	char s[8][32], kvt[40];

	printf("model:        %s (%s, %" PRIu64 " tensors, %s)\n", a->path,
	       r->hp->arch[0] ? r->hp->arch : "?", r->m->n_tensors,
	       ns_format_bytes(r->m->total_tensor_bytes, s[0], 32));
	if (r->probe)
		printf("memory:       MemAvailable %s, cgroup v%d limit %s%s%s -> available %s\n",
		       r->probe->mem_available == NSPLAN_NO_LIMIT ? "unknown" :
		       ns_format_bytes(r->probe->mem_available, s[0], 32), r->probe->cgroup_version,
		       r->probe->cgroup_limit == NSPLAN_NO_LIMIT ? "none" :
		       ns_format_bytes(r->probe->cgroup_limit, s[1], 32),
		       r->probe->cgroup_file[0] ? " from " : "", r->probe->cgroup_file,
		       ns_format_bytes(r->probe->available, s[2], 32));
	if (r->dflt)
		printf("defaults:     headroom %s, usable %s after the fixed set; arena = min(%s for "
		       "%u+1 blocks of %s, max(minimum, usable/4)), RAM cache = the rest (at most "
		       "the cacheable %s)\n",
		       ns_format_bytes(r->dflt->headroom, s[0], 32),
		       ns_format_bytes(r->dflt->usable, s[1], 32),
		       ns_format_bytes(r->dflt->arena_want, s[2], 32), NS_DEFAULT_LOOKAHEAD,
		       ns_format_bytes(NSPLAN_DEFAULT_BLOCK_BYTES, s[3], 32),
		       ns_format_bytes(nsctl_cacheable_bytes(r->m, r->hp, a->q.embd_resident), s[4], 32));
	if (pl->hdr.vram_budget && a->q.draft_vram)
		printf("budgets:      --vram-budget %s (--reserve-vram %s for KV cache (%s) and "
		       "scratch, and the draft model's %s)\n",
		       ns_format_bytes(pl->hdr.vram_budget, s[0], 32),
		       ns_format_bytes(pl->hdr.reserve_vram, s[1], 32),
		       s_kv_types(a, kvt, sizeof(kvt)), ns_format_bytes(a->q.draft_vram, s[2], 32));
	else if (a->q.draft_vram) /* no budget to hold it against: the figure alone */
		printf("budgets:      --vram-budget 0 (no GPU tier); the draft model takes %s of "
		       "VRAM\n", ns_format_bytes(a->q.draft_vram, s[0], 32));
	else if (pl->hdr.vram_budget)
		printf("budgets:      --vram-budget %s (--reserve-vram %s for KV cache (%s) and "
		       "scratch)\n", ns_format_bytes(pl->hdr.vram_budget, s[0], 32),
		       ns_format_bytes(pl->hdr.reserve_vram, s[1], 32),
		       s_kv_types(a, kvt, sizeof(kvt)));
	else
		printf("budgets:      --vram-budget 0 (no GPU tier)\n");
	printf("              --ram-budget %s%s, --mem-budget %s%s (minimum %s)\n",
	       ns_format_bytes(pl->hdr.ram_budget, s[2], 32), a->q.ram_given ? "" : " (default)",
	       ns_format_bytes(pl->hdr.mem_budget, s[3], 32), a->q.mem_given ? "" : " (default)",
	       ns_format_bytes(nsplan_min_arena(r->sum->min_mem_budget, fx), s[4], 32));
	printf("placed:       VRAM %s, RAM %s, disk %s\n",
	       ns_format_bytes(pl->hdr.vram_used, s[0], 32), ns_format_bytes(pl->hdr.ram_used, s[1], 32),
	       ns_format_bytes(r->m->total_tensor_bytes - pl->hdr.vram_used - pl->hdr.ram_used, s[2], 32));
	printf("fixed set at -c %u (host memory beyond the budgets):\n", fx->n_ctx);
	printf("  KV cache    %12" PRIu64 " bytes %11s  %s, %u layers%s", fx->kv_bytes,
	       ns_format_bytes(fx->kv_bytes, s[0], 32), s_kv_types(a, kvt, sizeof(kvt)),
	       fx->n_kv_layers,
	       fx->n_swa_layers ? "" : "\n");
	if (fx->n_swa_layers && fx->ring_positions)
		printf(", %u sliding (window %u; their caches are rings of %u positions)\n",
		       fx->n_swa_layers, r->hp->sliding_window, fx->ring_positions);
	else if (fx->n_swa_layers)
		printf(", %u sliding (window %u; their caches hold the whole context)\n",
		       fx->n_swa_layers, r->hp->sliding_window);
	if (fx->n_rec_layers)
		printf("  recurrent   %12" PRIu64 " bytes %11s  %u layers (conv + ssm state)\n",
		       fx->recurrent_bytes, ns_format_bytes(fx->recurrent_bytes, s[0], 32),
		       fx->n_rec_layers);
	if (fx->rollback_bytes)
		printf("  rollback    %12" PRIu64 " bytes %11s  a copy of that state and %u tokens' "
		       "recurrence inputs (speculative decoding)\n", fx->rollback_bytes,
		       ns_format_bytes(fx->rollback_bytes, s[0], 32), NSPLAN_ROLLBACK_TOKENS);
	printf("  scratch     %12" PRIu64 " bytes %11s  the cpu pass's activations, MoE rows, "
	       "attention scores and sampler (nsplan/fixed_mem.h), B=%u\n", fx->scratch_bytes,
	       ns_format_bytes(fx->scratch_bytes, s[0], 32), fx->batch);
	if (a->overhead_given)
		printf("  overhead    %12" PRIu64 " bytes %11s  as given\n", fx->overhead_bytes,
		       ns_format_bytes(fx->overhead_bytes, s[0], 32));
	else
		printf("  overhead    %12" PRIu64 " bytes %11s  %u processes x %s + %u x the "
		       "%s outside the tensors (header, vocabulary)\n",
		       fx->overhead_bytes, ns_format_bytes(fx->overhead_bytes, s[0], 32),
		       NSPLAN_N_PROCESSES, ns_format_bytes(NSPLAN_PROC_BASE, s[1], 32),
		       NSPLAN_META_FACTOR, ns_format_bytes(r->m->total_file_bytes -
							   r->m->total_tensor_bytes, s[2], 32));
	printf("  margin      %12" PRIu64 " bytes %11s  1/%u of the above + %s\n", fx->margin_bytes,
	       ns_format_bytes(fx->margin_bytes, s[0], 32), NSPLAN_MARGIN_DIV,
	       ns_format_bytes(NSPLAN_MARGIN_MIN, s[1], 32));
	if (fx->draft_bytes)
		printf("  draft       %12" PRIu64 " bytes %11s  --draft %s: %sweights, f32 KV cache, "
		       "scratch (resident in nscompute)\n", fx->draft_bytes,
		       ns_format_bytes(fx->draft_bytes, s[0], 32), r->a->draft,
		       fx->draft_mtp ? "the model's MTP block: " : "");
	if (fx->tower_bytes)
		printf("  tower       %12" PRIu64 " bytes %11s  %s %s: biases, norms and "
		       "patch kernel held in nscompute (its matrices stream through the arena)\n",
		       fx->tower_bytes, ns_format_bytes(fx->tower_bytes, s[0], 32),
		       a->img.beside ? "found beside the model," : "--mmproj", a->img.mmproj);
	if (fx->tower_bytes)
		printf("  images      %12" PRIu64 " bytes %11s  an image of up to %" PRIu64 " tokens "
		       "through the tower (its file, pixels, activations) and %u tokens of embeddings held "
		       "for the decoder\n", fx->image_bytes,
		       ns_format_bytes(fx->image_bytes, s[0], 32), fx->image_tokens, fx->n_ctx);
	printf("  total       %12" PRIu64 " bytes %11s\n", fx->total,
	       ns_format_bytes(fx->total, s[0], 32));
	printf("host memory:  %s = RAM cache (what this model fills) + arena + fixed set: the "
	       "session's peak at most\n",
	       ns_format_bytes(r->host_total, s[0], 32));
	printf("per token:    %.0f bytes (%s) requested from disk per decoded token (%.0f "
	       "touched): dense %" PRIu64 " exact", pr->bytes_per_token,
	       ns_format_bytes((uint64_t)(pr->bytes_per_token + 0.5), s[0], 32), pr->touched,
	       pr->disk_dense);
	if (pr->tied_row)
		printf(" (tied token_embd on disk: whole for the logits + one %" PRIu64
		       "-byte row for the embedding lookup)", pr->tied_row);
	if (pr->expert_bytes)
		printf(" + experts %.1f expected (%" PRIu64 " non-resident expert bytes x %s)",
		       pr->disk_expert, pr->disk_expert_bytes,
		       pr->uniform ? "n_expert_used/n_expert" : "measured hit rate");
	printf("\nonce:         %" PRIu64 " bytes (%s) read from disk at start of %" PRIu64
	       " held by compute (norms, biases, expert bias tables: never per token)",
	       pr->held_disk, ns_format_bytes(pr->held_disk, s[1], 32), pr->held_bytes);
	printf("\n\n  %-8s %7s %14s %11s %11s %11s %11s\n", "kind", "tensors", "bytes", "VRAM-Q",
	       "VRAM-F", "RAM", "disk");
	for (unsigned k = 0; k < NSPLAN_KIND_COUNT; k++)
		if (pl->by_kind[k].n_tensors)
			s_print_tally_row(nsplan_kind_name(k), &pl->by_kind[k]);
	printf("\n  %-8s %7s %14s %11s %11s %11s %11s\n", "layer", "tensors", "bytes", "VRAM-Q",
	       "VRAM-F", "RAM", "disk");
	for (uint32_t l = 0; l <= pl->n_layers; l++) {
		char label[16];
		if (!pl->by_layer[l].n_tensors)
			continue;
		if (l == pl->n_layers)
			snprintf(label, sizeof(label), "other");
		else
			snprintf(label, sizeof(label), "%u", l);
		s_print_tally_row(label, &pl->by_layer[l]);
	}
}

/* ---- JSON output ---- */

static void s_json_tally(struct json_out *j, const struct nsplan_tally *t)
{
	jo_key(j, "tensors"); jo_u64(j, t->n_tensors);
	jo_key(j, "bytes"); jo_u64(j, t->bytes);
	for (unsigned tier = 0; tier < NSPLAN_TIER_COUNT; tier++) {
		jo_key(j, nsplan_tier_name(tier));
		jo_u64(j, t->tier_bytes[tier]);
	}
}

static void s_print_json(const struct s_report *r)
{
	const struct nsplan *pl = r->pl;
	const struct nsplan_fixed *fx = r->fx;
	const struct nsplan_predict *pr = &pl->predict;
	struct json_out j;

	jo_init(&j, stdout);
	jo_begin_obj(&j);
	jo_key(&j, "model"); jo_str(&j, r->a->path);
	jo_key(&j, "architecture"); jo_str(&j, r->hp->arch);
	jo_key(&j, "mmproj"); /* the tower counted: --mmproj, the one beside the model, or none */
	if (r->a->img.mmproj) jo_str(&j, r->a->img.mmproj); else jo_null(&j);
	jo_key(&j, "n_tensors"); jo_u64(&j, r->m->n_tensors);
	jo_key(&j, "tensor_bytes"); jo_u64(&j, r->m->total_tensor_bytes);
	jo_key(&j, "generation"); jo_u64(&j, pl->hdr.generation);
	jo_key(&j, "budgets");
	jo_begin_obj(&j);
	jo_key(&j, "vram"); jo_u64(&j, pl->hdr.vram_budget);
	jo_key(&j, "reserve_vram"); jo_u64(&j, pl->hdr.reserve_vram);
	jo_key(&j, "draft_vram"); jo_u64(&j, r->a->q.draft_vram); /* in reserve_vram */
	jo_key(&j, "ram"); jo_u64(&j, pl->hdr.ram_budget);
	jo_key(&j, "mem"); jo_u64(&j, pl->hdr.mem_budget);
	jo_key(&j, "ram_default"); jo_bool(&j, !r->a->q.ram_given);
	jo_key(&j, "mem_default"); jo_bool(&j, !r->a->q.mem_given);
	jo_key(&j, "min_mem"); jo_u64(&j, nsplan_min_arena(r->sum->min_mem_budget, fx));
	jo_end_obj(&j);
	jo_key(&j, "memory");
	if (r->probe) {
		jo_begin_obj(&j);
		jo_key(&j, "mem_available");
		if (r->probe->mem_available == NSPLAN_NO_LIMIT) jo_null(&j); else jo_u64(&j, r->probe->mem_available);
		jo_key(&j, "cgroup_version"); jo_i64(&j, r->probe->cgroup_version);
		jo_key(&j, "cgroup_limit");
		if (r->probe->cgroup_limit == NSPLAN_NO_LIMIT) jo_null(&j); else jo_u64(&j, r->probe->cgroup_limit);
		jo_key(&j, "cgroup_file"); jo_str(&j, r->probe->cgroup_file);
		jo_key(&j, "available"); jo_u64(&j, r->probe->available);
		if (r->dflt) {
			jo_key(&j, "headroom"); jo_u64(&j, r->dflt->headroom);
			jo_key(&j, "usable"); jo_u64(&j, r->dflt->usable);
			jo_key(&j, "arena_want"); jo_u64(&j, r->dflt->arena_want);
		}
		jo_end_obj(&j);
	} else {
		jo_null(&j);
	}
	jo_key(&j, "fixed");
	jo_begin_obj(&j);
	jo_key(&j, "n_ctx"); jo_u64(&j, fx->n_ctx);
	jo_key(&j, "kv_bytes"); jo_u64(&j, fx->kv_bytes);
	jo_key(&j, "kv_layers"); jo_u64(&j, fx->n_kv_layers);
	jo_key(&j, "swa_layers"); jo_u64(&j, fx->n_swa_layers);
	jo_key(&j, "swa_ring_positions"); jo_u64(&j, fx->ring_positions);
	jo_key(&j, "recurrent_bytes"); jo_u64(&j, fx->recurrent_bytes);
	jo_key(&j, "rollback_bytes"); jo_u64(&j, fx->rollback_bytes);
	jo_key(&j, "scratch_bytes"); jo_u64(&j, fx->scratch_bytes);
	jo_key(&j, "batch"); jo_u64(&j, fx->batch);
	jo_key(&j, "overhead_bytes"); jo_u64(&j, fx->overhead_bytes);
	jo_key(&j, "margin_bytes"); jo_u64(&j, fx->margin_bytes);
	jo_key(&j, "draft_bytes"); jo_u64(&j, fx->draft_bytes);
	jo_key(&j, "tower_bytes"); jo_u64(&j, fx->tower_bytes);
	jo_key(&j, "image_bytes"); jo_u64(&j, fx->image_bytes);
	jo_key(&j, "image_tokens"); jo_u64(&j, fx->image_tokens);
	jo_key(&j, "total"); jo_u64(&j, fx->total);
	jo_end_obj(&j);
	jo_key(&j, "host_total"); jo_u64(&j, r->host_total);
	jo_key(&j, "placed");
	jo_begin_obj(&j);
	jo_key(&j, "vram"); jo_u64(&j, pl->hdr.vram_used);
	jo_key(&j, "ram"); jo_u64(&j, pl->hdr.ram_used);
	jo_end_obj(&j);
	jo_key(&j, "per_token");
	jo_begin_obj(&j);
	jo_key(&j, "bytes"); jo_f64(&j, pr->bytes_per_token);
	jo_key(&j, "touched"); jo_f64(&j, pr->touched);
	jo_key(&j, "touched_dense"); jo_u64(&j, pr->touched_dense);
	jo_key(&j, "resident_dense"); jo_u64(&j, pr->resident_dense);
	jo_key(&j, "disk_dense"); jo_u64(&j, pr->disk_dense);
	jo_key(&j, "tied_row"); jo_u64(&j, pr->tied_row);
	jo_key(&j, "held_bytes"); jo_u64(&j, pr->held_bytes);
	jo_key(&j, "held_disk"); jo_u64(&j, pr->held_disk);
	jo_key(&j, "expert_bytes"); jo_u64(&j, pr->expert_bytes);
	jo_key(&j, "disk_expert_bytes"); jo_u64(&j, pr->disk_expert_bytes);
	jo_key(&j, "touched_expert"); jo_f64(&j, pr->touched_expert);
	jo_key(&j, "disk_expert"); jo_f64(&j, pr->disk_expert);
	jo_key(&j, "uniform"); jo_bool(&j, pr->uniform);
	jo_end_obj(&j);
	jo_key(&j, "by_kind");
	jo_begin_obj(&j);
	for (unsigned k = 0; k < NSPLAN_KIND_COUNT; k++) {
		if (!pl->by_kind[k].n_tensors)
			continue;
		jo_key(&j, nsplan_kind_name(k));
		jo_begin_obj(&j);
		s_json_tally(&j, &pl->by_kind[k]);
		jo_end_obj(&j);
	}
	jo_end_obj(&j);
	jo_key(&j, "by_layer");
	jo_begin_arr(&j);
	for (uint32_t l = 0; l <= pl->n_layers; l++) {
		if (!pl->by_layer[l].n_tensors)
			continue;
		jo_begin_obj(&j);
		jo_key(&j, "layer");
		if (l == pl->n_layers) jo_null(&j); else jo_u64(&j, l);
		s_json_tally(&j, &pl->by_layer[l]);
		jo_end_obj(&j);
	}
	jo_end_arr(&j);
	if (r->a->windows) {
		jo_key(&j, "windows");
		jo_begin_arr(&j);
		for (uint64_t i = 0; i < pl->hdr.n_entries; i++) {
			const struct nsplan_entry *e = &pl->entries[i];
			jo_begin_obj(&j);
			jo_key(&j, "tensor"); jo_str(&j, r->m->tensors[e->tensor].name);
			jo_key(&j, "index"); jo_u64(&j, e->tensor);
			jo_key(&j, "rows"); jo_begin_arr(&j); jo_u64(&j, e->row_begin);
			jo_u64(&j, e->row_end); jo_end_arr(&j);
			jo_key(&j, "tier"); jo_str(&j, nsplan_tier_name(e->tier));
			jo_key(&j, "kind"); jo_str(&j, nsplan_kind_name(e->kind));
			jo_key(&j, "expert");
			if (e->expert == NSPLAN_NO_EXPERT) jo_null(&j); else jo_u64(&j, e->expert);
			jo_end_obj(&j);
		}
		jo_end_arr(&j);
	}
	jo_end_obj(&j);
}

int cmd_plan(int argc, char **argv)
{
	struct s_args a = { 0 };
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	struct ns_summary sum = { 0 };
	struct nsplan_fixed fx;
	struct nsplan *pl = NULL;
	struct nsplan_mem_probe probe;
	struct nsplan_default_out dflt;
	struct nsplan_opts o = { 0 };
	struct s_report r = { 0 };
	struct nsplan_stats st = { 0 };
	bool probed = false, defaulted = false;
	char err[NS_ERR_LEN];
	int ret;

	a.q.who = "nsctl plan";
	a.img.image_token = -1;
	ret = s_parse_args(argc, argv, &a);
	if (ret)
		return ret == 1 ? 0 : ret;
	/* the tower is this model's, as run checks it (one line, exit 2); without --mmproj the
	 * one beside the model, as run --image or --chat takes it */
	{
		struct ns_engine_opts eo = { 0 };

		a.img.later = true;
		if ((ret = nsctl_images_check(&a.img, "nsctl plan", a.path, 0, &eo)))
			return ret;
	}
	if (!a.img.mmproj && (a.img.max_tokens || a.img.min_pixels || a.img.max_pixels)) {
		fprintf(stderr, "nsctl plan: --max-patches, --min-pixels and --max-pixels go with "
			"a vision tower (--mmproj, or the one beside the model)\n");
		return 2;
	}
	ret = ns_model_open(a.path, &m, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "nsctl plan: %s\n", err);
		return 2;
	}
	/* a plan for a model whose tables contradict each other would be a promise run breaks */
	a.q.ctk = a.ctk; /* the GPU fixed set's KV cache in these types too */
	a.q.ctv = a.ctv;
	ret = nsctl_budget_inputs(m, a.n_ctx, a.ctk, a.ctv, a.overhead_given ? &a.overhead : NULL,
				  false, &hp, &sum, &fx, err, sizeof(err));
	if (!ret) /* a draft model on cuda: in VRAM, not in the fixed set (budgets.h) */
		ret = nsctl_fixed_add_draft(&fx, m, &hp, nsctl_ram_draft(a.draft && !strcmp(
						    a.draft, NSCTL_DRAFT_MTP), a.draft,
						    a.cuda ? "cuda" : "cpu"), err, sizeof(err));
	if (!ret && a.cuda && a.draft && strcmp(a.draft, NSCTL_DRAFT_MTP))
		ret = nsctl_draft_vram(a.draft, fx.n_ctx, &a.q.draft_vram, err, sizeof(err));
	if (!ret && a.img.mmproj) {
		const struct nsctl_tower tw = { .mmproj = a.img.mmproj,
						.lim = { .max_tokens = a.img.max_tokens,
							 .min_pixels = a.img.min_pixels,
							 .max_pixels = a.img.max_pixels } };

		ret = nsctl_fixed_add_tower(&fx, &tw, err, sizeof(err));
	}
	if (!ret)
		a.n_ctx = fx.n_ctx;
	if (ret) {
		fprintf(stderr, "nsctl plan: %s\n", err);
		ret = ret == -ENOMEM ? 1 : 2;
		goto out;
	}
	ret = nsctl_budgets_complete(&a.q, m, &hp, &sum, &fx, &probe, &probed, &dflt, &defaulted);
	if (ret)
		goto out;
	o.budgets = a.q.b;
	o.embd_resident = a.q.embd_resident;
	if (a.stats_path) {
		ret = nsplan_stats_load(a.stats_path, hp.n_layer, hp.n_expert, &st, err, sizeof(err));
		if (ret) {
			fprintf(stderr, "nsctl plan: %s\n", err);
			ret = ret == -ENOMEM ? 1 : 2;
			goto out;
		}
		o.hot = &st.hot;
	}
	ret = nsplan_compute(m, &hp, &o, 1, &pl, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "nsctl plan: %s\n", err);
		ret = ret == -ENOMEM ? 1 : 2;
		goto out;
	}
	r = (struct s_report){
		.a = &a, .m = m, .hp = &hp, .sum = &sum, .fx = &fx, .pl = pl,
		.probe = probed ? &probe : NULL, .dflt = defaulted ? &dflt : NULL,
	};
	r.host_total = nsctl_host_total(m, a.q.b.mem, a.q.b.ram, &fx);
	if (a.json)
		s_print_json(&r);
	else
		s_print_text(&r);
	ret = 0;
	if (fflush(stdout) != 0) {
		fprintf(stderr, "nsctl plan: cannot write output: %s\n", strerror(errno));
		ret = 1;
	}
out:
	nsplan_stats_free(&st);
	nsplan_destroy(&pl);
	ns_summary_free(&sum);
	ns_model_close(&m);
	return ret;
}
