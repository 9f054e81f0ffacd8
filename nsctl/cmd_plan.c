/* nsctl plan MODEL [budgets] [-c CTX] [--json [--windows]]: the residency plan, the fixed
 * memory beyond the budgets and the predicted disk bytes per decoded token. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget_defaults.h"
#include "commands.h"
#include "fixed_mem.h"
#include "forward.h"
#include "gpu_need.h"
#include "hparams.h"
#include "json_out.h"
#include "model.h"
#include "ns_util.h"
#include "plan.h"
#include "plan_stats.h"
#include "summary.h"

#define S_DEFAULT_CTX 4096u

struct s_args {
	const char *path;
	struct nsplan_budgets b;
	bool vram_given, reserve_given, ram_given, mem_given;
	uint32_t n_ctx;
	bool json, windows, embd_resident;
	bool overhead_given;
	uint64_t overhead;
	struct nsplan_mem_paths paths;
	const char *stats_path;
	const char *who;  /* prefix of the budget messages: "nsctl plan", "nsctl run" */
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
	uint64_t rss_at_start;
	uint64_t host_total;  /* ram + mem + fixed */
};

static void s_usage(FILE *f)
{
	fprintf(f, "usage: nsctl plan MODEL [--vram-budget B] [--reserve-vram B] [--ram-budget B] "
		   "[--mem-budget B] [-c CTX] [--json [--windows]] [--embd-resident] [--stats FILE] "
		   "[--overhead B] [--meminfo FILE --cgroup-file FILE --cgroup-root DIR]\n"
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

static int s_parse_args(int argc, char **argv, struct s_args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool takes = !strcmp(o, "--vram-budget") || !strcmp(o, "--reserve-vram") ||
			     !strcmp(o, "--ram-budget") || !strcmp(o, "--mem-budget") ||
			     !strcmp(o, "-c") || !strcmp(o, "--ctx") || !strcmp(o, "--overhead") ||
			     !strcmp(o, "--meminfo") || !strcmp(o, "--cgroup-file") ||
			     !strcmp(o, "--cgroup-root") || !strcmp(o, "--stats");

		if (takes && !v) {
			fprintf(stderr, "nsctl plan: %s needs a value\n", o);
			return 2;
		}
		if (takes)
			i++;
		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			s_usage(stdout);
			return 1;
		} else if (!strcmp(o, "--vram-budget")) {
			if (s_parse_size(o, v, &a->b.vram))
				return 2;
			a->vram_given = true;
		} else if (!strcmp(o, "--reserve-vram")) {
			if (s_parse_size(o, v, &a->b.reserve_vram))
				return 2;
			a->reserve_given = true;
		} else if (!strcmp(o, "--ram-budget")) {
			if (s_parse_size(o, v, &a->b.ram))
				return 2;
			a->ram_given = true;
		} else if (!strcmp(o, "--mem-budget")) {
			if (s_parse_size(o, v, &a->b.mem))
				return 2;
			a->mem_given = true;
		} else if (!strcmp(o, "--overhead")) {
			if (s_parse_size(o, v, &a->overhead))
				return 2;
			a->overhead_given = true;
		} else if (!strcmp(o, "-c") || !strcmp(o, "--ctx")) {
			uint64_t n;

			if (ns_parse_count(v, 1, 1u << 30, &n) < 0) {
				fprintf(stderr, "nsctl plan: %s expects a context length 1..%u, got '%s'\n",
					o, 1u << 30, v);
				return 2;
			}
			a->n_ctx = (uint32_t)n;
		} else if (!strcmp(o, "--meminfo")) {
			a->paths.meminfo = v;
		} else if (!strcmp(o, "--cgroup-file")) {
			a->paths.self_cgroup = v;
		} else if (!strcmp(o, "--cgroup-root")) {
			a->paths.cgroup_root = v;
		} else if (!strcmp(o, "--stats")) {
			a->stats_path = v;
		} else if (!strcmp(o, "--json")) {
			a->json = true;
		} else if (!strcmp(o, "--windows")) {
			a->windows = true;
		} else if (!strcmp(o, "--embd-resident")) {
			a->embd_resident = true;
		} else if (o[0] == '-' && o[1]) {
			fprintf(stderr, "nsctl plan: unknown option '%s' (try nsctl plan --help)\n", o);
			return 2;
		} else if (!a->path) {
			a->path = o;
		} else {
			fprintf(stderr, "nsctl plan: more than one model given ('%s')\n", o);
			return 2;
		}
	}
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

/* Bytes an untied input embedding would take from the RAM cache (it is never cached by
 * default, so the default RAM budget does not count it). */
static uint64_t s_cacheable(const struct ns_model *m, const struct ns_hparams *hp, bool embd)
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

static void s_print_text(const struct s_report *r)
{
	const struct nsplan *pl = r->pl;
	const struct nsplan_fixed *fx = r->fx;
	const struct nsplan_predict *pr = &pl->predict;
	const struct s_args *a = r->a;
	char s[8][32];

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
		       ns_format_bytes(s_cacheable(r->m, r->hp, a->embd_resident), s[4], 32));
	if (pl->hdr.vram_budget)
		printf("budgets:      --vram-budget %s (--reserve-vram %s for KV cache and scratch)\n",
		       ns_format_bytes(pl->hdr.vram_budget, s[0], 32),
		       ns_format_bytes(pl->hdr.reserve_vram, s[1], 32));
	else
		printf("budgets:      --vram-budget 0 (no GPU tier)\n");
	printf("              --ram-budget %s%s, --mem-budget %s%s (minimum %s)\n",
	       ns_format_bytes(pl->hdr.ram_budget, s[2], 32), a->ram_given ? "" : " (default)",
	       ns_format_bytes(pl->hdr.mem_budget, s[3], 32), a->mem_given ? "" : " (default)",
	       ns_format_bytes(r->sum->min_mem_budget, s[4], 32));
	printf("placed:       VRAM %s, RAM %s, disk %s\n",
	       ns_format_bytes(pl->hdr.vram_used, s[0], 32), ns_format_bytes(pl->hdr.ram_used, s[1], 32),
	       ns_format_bytes(r->m->total_tensor_bytes - pl->hdr.vram_used - pl->hdr.ram_used, s[2], 32));
	printf("fixed set at -c %u (host memory beyond the budgets):\n", fx->n_ctx);
	printf("  KV cache    %12" PRIu64 " bytes %11s  f32 K+V, %u layers%s", fx->kv_bytes,
	       ns_format_bytes(fx->kv_bytes, s[0], 32), fx->n_kv_layers,
	       fx->n_swa_layers ? "" : "\n");
	if (fx->n_swa_layers)
		printf(", %u sliding (capped at %u)\n", fx->n_swa_layers, r->hp->sliding_window);
	if (fx->n_rec_layers)
		printf("  recurrent   %12" PRIu64 " bytes %11s  %u layers (conv + ssm state)\n",
		       fx->recurrent_bytes, ns_format_bytes(fx->recurrent_bytes, s[0], 32),
		       fx->n_rec_layers);
	printf("  scratch     %12" PRIu64 " bytes %11s  4*(4*B*n_embd + B*(q+k+v) + n_head*B*n_ctx + "
	       "2*B*n_ff + n_vocab), B=%u\n", fx->scratch_bytes,
	       ns_format_bytes(fx->scratch_bytes, s[0], 32), fx->batch);
	if (a->overhead_given)
		printf("  overhead    %12" PRIu64 " bytes %11s  as given\n", fx->overhead_bytes,
		       ns_format_bytes(fx->overhead_bytes, s[0], 32));
	else
		printf("  overhead    %12" PRIu64 " bytes %11s  %u processes x RSS at start %s\n",
		       fx->overhead_bytes, ns_format_bytes(fx->overhead_bytes, s[0], 32),
		       NSPLAN_N_PROCESSES, ns_format_bytes(r->rss_at_start, s[1], 32));
	printf("  total       %12" PRIu64 " bytes %11s\n", fx->total,
	       ns_format_bytes(fx->total, s[0], 32));
	printf("host memory:  %s = RAM cache + arena + fixed set\n",
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
	jo_key(&j, "n_tensors"); jo_u64(&j, r->m->n_tensors);
	jo_key(&j, "tensor_bytes"); jo_u64(&j, r->m->total_tensor_bytes);
	jo_key(&j, "generation"); jo_u64(&j, pl->hdr.generation);
	jo_key(&j, "budgets");
	jo_begin_obj(&j);
	jo_key(&j, "vram"); jo_u64(&j, pl->hdr.vram_budget);
	jo_key(&j, "reserve_vram"); jo_u64(&j, pl->hdr.reserve_vram);
	jo_key(&j, "ram"); jo_u64(&j, pl->hdr.ram_budget);
	jo_key(&j, "mem"); jo_u64(&j, pl->hdr.mem_budget);
	jo_key(&j, "ram_default"); jo_bool(&j, !r->a->ram_given);
	jo_key(&j, "mem_default"); jo_bool(&j, !r->a->mem_given);
	jo_key(&j, "min_mem"); jo_u64(&j, r->sum->min_mem_budget);
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
	jo_key(&j, "recurrent_bytes"); jo_u64(&j, fx->recurrent_bytes);
	jo_key(&j, "scratch_bytes"); jo_u64(&j, fx->scratch_bytes);
	jo_key(&j, "batch"); jo_u64(&j, fx->batch);
	jo_key(&j, "overhead_bytes"); jo_u64(&j, fx->overhead_bytes);
	jo_key(&j, "rss_at_start"); jo_u64(&j, r->rss_at_start);
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

/* ---- budgets ---- */

/* The line for an arena under the smallest workable one. */
static void s_say_small_arena(const char *who, const struct ns_model *m,
			      const struct ns_summary *sum, uint64_t mem)
{
	char s[2][32];

	fprintf(stderr, "%s: --mem-budget %s is below the smallest workable arena: --mem-budget %"
		PRIu64 " (%s: %u blocks of one row of %s, %" PRIu64 " bytes)\n", who,
		ns_format_bytes(mem, s[0], 32), sum->min_mem_budget,
		ns_format_bytes(sum->min_mem_budget, s[1], 32), NS_DEFAULT_LOOKAHEAD + 1,
		m->tensors[sum->max_row_tensor].name, sum->max_row_bytes);
}

/* Check and complete the budgets. Returns 0, or an exit code after one line on stderr. */
static int s_budgets(struct s_args *a, const struct ns_model *m, const struct ns_hparams *hp,
		     const struct ns_summary *sum, const struct nsplan_fixed *fx,
		     struct nsplan_mem_probe *probe, bool *probed,
		     struct nsplan_default_out *dflt, bool *defaulted)
{
	uint64_t gpu_fixed = fx->kv_bytes + fx->recurrent_bytes + fx->scratch_bytes;
	char err[NS_ERR_LEN], s[4][32];

	if (a->b.vram) {
		/* the CUDA pass's exact set besides weight windows (nsplan/gpu_need.h) */
		struct nsplan_gpu_need gn;

		if (nsplan_gpu_need(m, fx->n_ctx, 0, 0, &gn, err, sizeof(err)) == 0)
			gpu_fixed = gn.total;
		if (!a->reserve_given)
			a->b.reserve_vram = gpu_fixed;
		if (a->b.reserve_vram < gpu_fixed || a->b.vram < a->b.reserve_vram) {
			uint64_t least = a->b.reserve_vram > gpu_fixed ? a->b.reserve_vram : gpu_fixed;
			fprintf(stderr, "%s: ", a->who);
			fprintf(stderr, "--vram-budget %s with reserve %s cannot hold the "
				"GPU fixed set %s (KV cache, scratch, vectors and staging at -c %u); smallest "
				"workable: "
				"--vram-budget %" PRIu64 " --reserve-vram %" PRIu64 "\n",
				ns_format_bytes(a->b.vram, s[0], 32),
				ns_format_bytes(a->b.reserve_vram, s[1], 32),
				ns_format_bytes(gpu_fixed, s[2], 32), fx->n_ctx, least, gpu_fixed);
			return 2;
		}
	} else if (a->reserve_given && a->b.reserve_vram) {
		fprintf(stderr, "%s: ", a->who);
		fprintf(stderr, "--reserve-vram needs a --vram-budget\n");
		return 2;
	}
	if (a->mem_given && a->b.mem < sum->min_mem_budget) {
		s_say_small_arena(a->who, m, sum, a->b.mem);
		return 2;
	}
	*probed = nsplan_mem_probe(&a->paths, probe, err, sizeof(err)) == 0;
	if (a->ram_given && a->mem_given) {
		uint64_t need, least = fx->total + sum->min_mem_budget;
		bool ovf = ns_add_u64_overflow(a->b.ram, a->b.mem, &need) ||
			   ns_add_u64_overflow(need, fx->total, &need);
		if (*probed && (ovf || need > probe->available)) {
			uint64_t room = probe->available > fx->total + a->b.mem ?
					probe->available - fx->total - a->b.mem : 0;
			fprintf(stderr, "%s: ", a->who);
			fprintf(stderr, "--ram-budget %s + --mem-budget %s + the fixed set %s "
				"(KV cache, scratch, processes at -c %u) exceed the %s available; "
				"smallest workable: --mem-budget %" PRIu64 " --ram-budget 0 with %" PRIu64
				" bytes available%s; at this --mem-budget the largest --ram-budget is %"
				PRIu64 "\n", ns_format_bytes(a->b.ram, s[0], 32),
				ns_format_bytes(a->b.mem, s[1], 32), ns_format_bytes(fx->total, s[2], 32),
				fx->n_ctx, ns_format_bytes(probe->available, s[3], 32),
				sum->min_mem_budget, least,
				least > probe->available ? " (or a smaller -c)" : "", room);
			return 2;
		}
		return 0;
	}
	if (!*probed) {
		fprintf(stderr, "%s: ", a->who);
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	struct nsplan_default_in in = {
		.available = probe->available, .fixed = fx->total, .min_arena = sum->min_mem_budget,
		.max_row_bytes = sum->max_row_bytes,
		.cacheable = s_cacheable(m, hp, a->embd_resident),
		.lookahead = NS_DEFAULT_LOOKAHEAD, .block_bytes = NSPLAN_DEFAULT_BLOCK_BYTES,
		.layer_expert_bytes = s_layer_expert_bytes(m, hp),
		.ram_given = a->ram_given, .mem_given = a->mem_given,
	};
	/* what VRAM holds need not be cached in RAM too */
	uint64_t vram_w = a->b.vram - a->b.reserve_vram;
	in.cacheable = in.cacheable > vram_w ? in.cacheable - vram_w : 0;
	if (nsplan_default_budgets(&in, &a->b, dflt, err, sizeof(err))) {
		fprintf(stderr, "%s: ", a->who);
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	*defaulted = true;
	return 0;
}

int cmd_plan(int argc, char **argv)
{
	uint64_t rss = nsplan_self_rss(); /* before the model is mapped: the bare process */
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

	a.who = "nsctl plan";
	ret = s_parse_args(argc, argv, &a);
	if (ret)
		return ret == 1 ? 0 : ret;
	ret = ns_model_open(a.path, &m, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "nsctl plan: %s\n", err);
		return 2;
	}
	ret = ns_hparams_load(m, &hp, err, sizeof(err));
	/* a plan for a model whose tables contradict each other would be a promise run breaks;
	 * an architecture the forward pass does not know yet is still planned (by shapes) */
	if (!ret && ns_fwd_arch_supported(hp.arch))
		ret = ns_fwd_check(m, err, sizeof(err));
	if (!ret && ns_summary_compute(m, &hp, &sum)) {
		ns_errf(err, sizeof(err), "out of memory");
		ret = -ENOMEM;
	}
	if (!ret && !a.n_ctx)
		a.n_ctx = hp.n_ctx_train && hp.n_ctx_train < S_DEFAULT_CTX ? hp.n_ctx_train : S_DEFAULT_CTX;
	if (!ret)
		ret = nsplan_fixed_compute(m, &hp, a.n_ctx, a.overhead_given ? a.overhead :
					   rss * NSPLAN_N_PROCESSES, &fx, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "nsctl plan: %s\n", err);
		ret = ret == -ENOMEM ? 1 : 2;
		goto out;
	}
	ret = s_budgets(&a, m, &hp, &sum, &fx, &probe, &probed, &dflt, &defaulted);
	if (ret)
		goto out;
	o.budgets = a.b;
	o.embd_resident = a.embd_resident;
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
		.rss_at_start = rss,
	};
	if (ns_add_u64_overflow(a.b.ram, a.b.mem, &r.host_total) ||
	    ns_add_u64_overflow(r.host_total, fx.total, &r.host_total))
		r.host_total = UINT64_MAX;
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

int nsctl_pick_budgets(const char *who, const char *model, uint32_t n_ctx, uint32_t n_seq,
		       bool mem_given, uint64_t *mem, bool ram_given, uint64_t *ram, char *line,
		       size_t linelen)
{
	uint64_t rss = nsplan_self_rss();
	struct s_args a = { .path = model, .who = who, .n_ctx = n_ctx, .mem_given = mem_given,
			    .ram_given = ram_given };
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	struct ns_summary sum = { 0 };
	struct nsplan_fixed fx;
	struct nsplan_mem_probe probe;
	struct nsplan_default_out dflt;
	bool probed = false, defaulted = false;
	char err[NS_ERR_LEN], s[4][32];
	int ret;

	a.b.mem = mem_given ? *mem : 0;
	a.b.ram = ram_given ? *ram : 0;
	line[0] = 0;
	ret = ns_model_open(model, &m, err, sizeof(err));
	if (!ret)
		ret = ns_hparams_load(m, &hp, err, sizeof(err));
	/* run and bench: a model no backend runs is refused here, before the budgets' line
	 * (nse_start checks it again for the API's other callers: 0.01 s) */
	if (!ret && ns_fwd_arch_supported(hp.arch))
		ret = ns_fwd_check(m, err, sizeof(err));
	if (!ret && ns_summary_compute(m, &hp, &sum)) {
		ns_errf(err, sizeof(err), "out of memory");
		ret = -ENOMEM;
	}
	if (!ret && !a.n_ctx)
		a.n_ctx = hp.n_ctx_train && hp.n_ctx_train < S_DEFAULT_CTX ? hp.n_ctx_train
									: S_DEFAULT_CTX;
	if (!ret)
		ret = nsplan_fixed_compute(m, &hp, a.n_ctx, rss * NSPLAN_N_PROCESSES, &fx, err,
					   sizeof(err));
	if (!ret && n_seq > 1) { /* nsctl serve --parallel: one KV cache per sequence */
		uint64_t kv;

		if (ns_mul_u64_overflow(fx.kv_bytes, n_seq, &kv) ||
		    fx.total + (kv - fx.kv_bytes) < fx.total) {
			ns_errf(err, sizeof(err), "%u KV caches of %llu bytes overflow", n_seq,
				(unsigned long long)fx.kv_bytes);
			ret = -EOVERFLOW;
		} else {
			fx.total += kv - fx.kv_bytes;
			fx.kv_bytes = kv;
		}
	}
	if (ret) {
		fprintf(stderr, "%s: %s\n", who, err);
		ret = ret == -ENOMEM ? 1 : 2;
		goto out;
	}
	ret = s_budgets(&a, m, &hp, &sum, &fx, &probe, &probed, &dflt, &defaulted);
	if (ret)
		goto out;
	*mem = a.b.mem;
	*ram = a.b.ram;
	if (defaulted)
		snprintf(line, linelen, "%s: budgets from %s available (%s): --mem-budget %s "
			 "--ram-budget %s, fixed %s at -c %u%s", who,
			 ns_format_bytes(probe.available, s[0], 32),
			 probe.cgroup_limit < probe.mem_available ? "the cgroup's limit"
								  : "MemAvailable",
			 ns_format_bytes(a.b.mem, s[1], 32), ns_format_bytes(a.b.ram, s[2], 32),
			 ns_format_bytes(fx.total, s[3], 32), fx.n_ctx,
			 n_seq > 1 ? " per sequence" : "");
out:
	ns_summary_free(&sum);
	ns_model_close(&m);
	return ret;
}

int nsctl_check_budgets(const char *who, const char *model, const uint64_t *mem,
			const uint64_t *ram, size_t n)
{
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	struct ns_summary sum = { 0 };
	struct nsplan_mem_probe probe;
	bool probed;
	char err[NS_ERR_LEN], s[5][32];
	int ret;

	ret = ns_model_open(model, &m, err, sizeof(err));
	if (!ret)
		ret = ns_hparams_load(m, &hp, err, sizeof(err));
	if (!ret && ns_summary_compute(m, &hp, &sum)) {
		ns_errf(err, sizeof(err), "out of memory");
		ret = -ENOMEM;
	}
	if (ret) {
		fprintf(stderr, "%s: %s\n", who, err);
		ret = ret == -ENOMEM ? 1 : 2;
		goto out;
	}
	/* no probe (no MemAvailable): nothing to check the sum against */
	probed = nsplan_mem_probe(NULL, &probe, err, sizeof(err)) == 0;
	for (size_t i = 0; i < n && !ret; i++) {
		/* the RAM tier fills no more than the model's bytes (its segment's other pages
		 * stay untouched) */
		uint64_t ram_used = ram[i] < m->total_tensor_bytes ? ram[i] : m->total_tensor_bytes;
		uint64_t need;

		if (mem[i] && mem[i] < sum.min_mem_budget) {
			s_say_small_arena(who, m, &sum, mem[i]);
			ret = 2;
		} else if (probed && (ns_add_u64_overflow(ram_used, mem[i], &need) ||
				      need > probe.available)) {
			fprintf(stderr, "%s: --mem-budget %s + --ram-budget %s (%s of it for this "
				"model's %s) exceed the %s of memory available (%s)\n", who,
				ns_format_bytes(mem[i], s[0], 32), ns_format_bytes(ram[i], s[1], 32),
				ns_format_bytes(ram_used, s[2], 32),
				ns_format_bytes(m->total_tensor_bytes, s[3], 32),
				ns_format_bytes(probe.available, s[4], 32),
				probe.cgroup_limit < probe.mem_available ? "the cgroup's limit"
									 : "MemAvailable");
			ret = 2;
		}
	}
out:
	ns_summary_free(&sum);
	ns_model_close(&m);
	return ret;
}

int nsctl_check_vram(const char *who, const char *model, uint32_t n_ctx, uint64_t vram,
		     uint64_t reserve)
{
	struct ns_model *m = NULL;
	struct nsplan_gpu_need gn;
	char err[NS_ERR_LEN], s[3][32];
	int ret;

	ret = ns_model_open(model, &m, err, sizeof(err));
	if (!ret)
		ret = nsplan_gpu_need(m, n_ctx ? n_ctx : S_DEFAULT_CTX, 0, 0, &gn, err, sizeof(err));
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
			n_ctx ? n_ctx : S_DEFAULT_CTX, reserve > gn.total ? reserve : gn.total);
		return 2;
	}
	return 0;
}
