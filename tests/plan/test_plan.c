/* test_plan.c - the residency planner on the oracle tiny models.
 *
 * For each model and RAM budgets 0, a bit, half, everything (and a sweep between): every tensor
 * placed exactly once (the published records pass nsplan_records_check with coverage), budgets
 * never exceeded, the prediction equals the bytes the forward pass requests per token,
 * recomputed here from the windows (non-resident touched bytes, held vectors excluded, a tied
 * embedding's lookup row added), more RAM never predicts more disk bytes. Hand-computed
 * figures from the oracle README's shapes for tiny-qwen3moe and from the oracle's tensor
 * table for the tied tiny-qwen3. Hotness reorders expert slabs; plan_update diffs.
 * Exit 0 pass, 1 fail, 77 skip. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "ns_test.h"
#include "ns_util.h"
#include "plan.h"
#include "plan_stats.h"
#include "summary.h"

static int s_fail;

#define CHECK(cond, ...) NS_EXPECT(s_fail, cond, __VA_ARGS__)

static const char *const s_models[] = {
	"tiny/tiny-qwen3-F32.gguf", "tiny/tiny-qwen3-Q4_K_M.gguf", "tiny/tiny-llama-Q8_0.gguf",
	"tiny/tiny-qwen3moe-F32.gguf", "tiny/tiny-qwen3moe-Q4_K_M.gguf",
	"tiny/tiny-gpt-oss-MXFP4_MOE.gguf", "tiny/tiny-gemma3-Q4_K_M.gguf",
	"tiny/tiny-gemma4-Q4_K_M.gguf", "tiny/tiny-qwen35-Q4_K_M.gguf",
	"tiny/split/tiny-qwen3-F32-00001-of-00003.gguf",
};

static uint64_t s_rows(void *ctx, uint64_t i)
{
	return ((const struct ns_model *)ctx)->tensors[i].n_rows;
}

/* Held by compute from the start: the architecture table's role (which the forward tests
 * check against what the pass reads: tests/forward/test_arch_reads.c). */
static bool s_held(const struct ns_hparams *hp, const struct ns_model_tensor *t)
{
	return ns_arch_role(hp, t) == NS_ROLE_HELD;
}

/* Independent recomputation of the prediction from the windows: what a token touches of each
 * window, whether the forward pass requests it per token (not a held tensor), and whether the
 * window is resident. A tied token_embd on disk costs one more row (the embedding lookup);
 * a token embedding is placed whole or not at all. */
static double s_expected_disk(const struct ns_model *m, const struct ns_hparams *hp,
			      const struct nsplan *pl, const struct nsplan_hotness *hot,
			      double *touched)
{
	double disk = 0;
	int embd_tier = -1;

	*touched = 0;
	for (uint64_t i = 0; i < pl->hdr.n_entries; i++) {
		const struct nsplan_entry *e = &pl->entries[i];
		const struct ns_model_tensor *t = &m->tensors[e->tensor];
		double bytes = (double)((e->row_end - e->row_begin) * t->row_bytes), w;
		bool embd = !strcmp(t->name, "token_embd.weight");

		int64_t l = ns_tensor_layer(t->name);

		if (embd) {
			CHECK(embd_tier < 0 || embd_tier == e->tier, "token_embd split over tiers");
			embd_tier = e->tier;
		}
		if (ns_tensor_is_expert(t->name) && hot && !s_held(hp, t))
			w = bytes * (double)hot->hits[l * hot->n_expert + e->expert] /
			    (double)hot->tokens[l];
		else if (ns_tensor_is_expert(t->name))
			w = bytes * hp->n_expert_used / (double)t->ne[t->n_dims - 1];
		else if (embd && !hp->tied_embeddings)
			w = (double)t->row_bytes * (double)(e->row_end - e->row_begin) / (double)t->n_rows;
		else
			w = bytes;
		*touched += w;
		if (e->tier == NSPLAN_DISK && !s_held(hp, t))
			disk += w + (embd && hp->tied_embeddings ? (double)t->row_bytes : 0);
	}
	return disk;
}

/* Weight bytes per token of held tensors (touched every token, requested never). */
static double s_held_touched(const struct ns_model *m, const struct ns_hparams *hp)
{
	double sum = 0;

	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		if (!s_held(hp, t))
			continue;
		sum += ns_tensor_is_expert(t->name) ?
		       (double)t->n_bytes * hp->n_expert_used / (double)t->ne[t->n_dims - 1] :
		       (double)t->n_bytes;
	}
	return sum;
}

static void s_check_plan(const char *rel, const struct ns_model *m, const struct ns_hparams *hp,
			 const struct nsplan *pl, const struct nsplan_hotness *hot)
{
	char err[NS_ERR_LEN];
	size_t len = nsplan_records_bytes(pl);
	void *buf = malloc(len);
	double touched, disk;
	uint64_t ram = 0, vram = 0;

	CHECK(buf, "malloc");
	if (!buf)
		return;
	nsplan_records_write(pl, buf);
	CHECK(nsplan_records_check(buf, len, m->n_tensors, s_rows, (void *)m, err, sizeof(err)) == 0,
	      "%s: records: %s", rel, err);
	free(buf);
	for (uint64_t i = 0; i < pl->hdr.n_entries; i++) {
		const struct nsplan_entry *e = &pl->entries[i];
		uint64_t b = (e->row_end - e->row_begin) * m->tensors[e->tensor].row_bytes;
		if (e->tier == NSPLAN_RAM)
			ram += b;
		else if (e->tier != NSPLAN_DISK)
			vram += b;
	}
	CHECK(ram == pl->hdr.ram_used && ram <= pl->hdr.ram_budget,
	      "%s: RAM used %" PRIu64 " (header %" PRIu64 ") budget %" PRIu64, rel, ram,
	      pl->hdr.ram_used, pl->hdr.ram_budget);
	CHECK(vram == pl->hdr.vram_used &&
	      vram <= (pl->hdr.vram_budget ? pl->hdr.vram_budget - pl->hdr.reserve_vram : 0),
	      "%s: VRAM used %" PRIu64 " budget %" PRIu64 " reserve %" PRIu64, rel, vram,
	      pl->hdr.vram_budget, pl->hdr.reserve_vram);
	disk = s_expected_disk(m, hp, pl, hot, &touched);
	CHECK(fabs(disk - pl->predict.bytes_per_token) < 1e-6 * (1 + disk),
	      "%s at RAM %" PRIu64 ": predicted %.3f, recomputed %.3f", rel, pl->hdr.ram_budget,
	      pl->predict.bytes_per_token, disk);
	CHECK(fabs(touched - pl->predict.touched) < 1e-6 * (1 + touched),
	      "%s: touched %.3f, recomputed %.3f", rel, pl->predict.touched, touched);
}

static struct nsplan *s_plan(const struct ns_model *m, const struct ns_hparams *hp, uint64_t ram,
			     uint64_t vram, uint64_t reserve, const struct nsplan_hotness *hot)
{
	struct nsplan_opts o = { .budgets = { .ram = ram, .vram = vram, .reserve_vram = reserve,
					      .mem = 1 << 20 }, .hot = hot };
	struct nsplan *pl = NULL;
	char err[NS_ERR_LEN];

	if (nsplan_compute(m, hp, &o, 1, &pl, err, sizeof(err))) {
		CHECK(0, "nsplan_compute: %s", err);
		return NULL;
	}
	return pl;
}

static void s_model(const char *rel)
{
	char path[1024], err[NS_ERR_LEN];
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	struct ns_summary sum;
	uint64_t total, budgets[4];
	double prev = INFINITY;

	ns_test_oracle_path(path, sizeof(path), rel);
	if (ns_model_open(path, &m, err, sizeof(err)) || ns_hparams_load(m, &hp, err, sizeof(err)) ||
	    ns_summary_compute(m, &hp, &sum)) {
		CHECK(0, "%s: %s", rel, err);
		ns_model_close(&m);
		return;
	}
	total = m->total_tensor_bytes;
	budgets[0] = 0;
	budgets[1] = 4096 + 17; /* a bit, not a row multiple */
	budgets[2] = total / 2;
	budgets[3] = total;
	for (int i = 0; i < 4; i++) {
		struct nsplan *pl = s_plan(m, &hp, budgets[i], 0, 0, NULL);
		if (!pl)
			continue;
		s_check_plan(rel, m, &hp, pl, NULL);
		/* the planner's total agrees with summary.h's per-token figure */
		CHECK(fabs(pl->predict.touched - (double)sum.bytes_per_token) < 0.5,
		      "%s: touched %.1f, summary %" PRIu64, rel, pl->predict.touched,
		      sum.bytes_per_token);
		if (i == 0) {
			/* all on disk: what a token touches, less held tensors, plus the lookup
			 * row of a tied embedding */
			const struct ns_model_tensor *e = ns_model_find(m, "token_embd.weight");
			double want = pl->predict.touched - s_held_touched(m, &hp) +
				      (hp.tied_embeddings && e ? (double)e->row_bytes : 0);
			CHECK(pl->predict.bytes_per_token == want, "%s: RAM 0 predicts %.1f, want "
			      "%.1f", rel, pl->predict.bytes_per_token, want);
		}
		if (i == 3) {
			/* everything cached but an untied embedding, read by row */
			const struct ns_model_tensor *e = ns_model_find(m, "token_embd.weight");
			double want = !hp.tied_embeddings && e ? (double)e->row_bytes : 0;
			CHECK(pl->predict.bytes_per_token == want, "%s: full RAM predicts %.1f, want %.1f",
			      rel, pl->predict.bytes_per_token, want);
		}
		nsplan_destroy(&pl);
	}
	/* monotone: 97 budgets from 0 to everything */
	for (uint64_t k = 0; k <= 96; k++) {
		struct nsplan *pl = s_plan(m, &hp, total / 96 * k + k * 7, 0, 0, NULL);
		if (!pl)
			break;
		s_check_plan(rel, m, &hp, pl, NULL);
		CHECK(pl->predict.bytes_per_token <= prev, "%s: RAM %" PRIu64 " predicts %.1f > %.1f",
		      rel, pl->hdr.ram_budget, pl->predict.bytes_per_token, prev);
		prev = pl->predict.bytes_per_token;
		nsplan_destroy(&pl);
	}
	/* VRAM: a third of the model after a reserve; F32 tensors go to VRAM-F */
	{
		struct nsplan *pl = s_plan(m, &hp, total / 3, total / 3 + 4096, 4096, NULL);
		if (pl) {
			s_check_plan(rel, m, &hp, pl, NULL);
			for (uint64_t i = 0; i < pl->hdr.n_entries; i++) {
				const struct nsplan_entry *e = &pl->entries[i];
				uint32_t type = m->tensors[e->tensor].type;
				bool fl = type == 0 || type == 1 || type == 30;
				if (e->tier == NSPLAN_VRAM_F || e->tier == NSPLAN_VRAM_Q)
					CHECK(fl == (e->tier == NSPLAN_VRAM_F), "%s: %s in %s", rel,
					      m->tensors[e->tensor].name, nsplan_tier_name(e->tier));
			}
			CHECK(pl->hdr.vram_used > 0, "%s: nothing in VRAM", rel);
			nsplan_destroy(&pl);
		}
	}
	/* VRAM for everything, no RAM: an untied embedding goes to VRAM too (the CUDA pass
	 * looks its rows up there), so no byte per token comes from disk; one byte short of
	 * what it and everything before it need, it alone stays on disk, read by row */
	{
		const struct ns_model_tensor *e = ns_model_find(m, "token_embd.weight");
		const bool untied = !hp.tied_embeddings && e;
		struct nsplan *pl = s_plan(m, &hp, 0, total, 0, NULL);

		if (pl) {
			s_check_plan(rel, m, &hp, pl, NULL);
			CHECK(pl->predict.bytes_per_token == 0, "%s: all in VRAM predicts %.1f", rel,
			      pl->predict.bytes_per_token);
			nsplan_destroy(&pl);
		}
		uint64_t held = 0; /* held tensors come after the embedding, the last in order */

		for (uint64_t i = 0; i < m->n_tensors; i++)
			held += s_held(&hp, &m->tensors[i]) ? m->tensors[i].n_bytes : 0;
		pl = untied ? s_plan(m, &hp, 0, total - held - 1, 0, NULL) : NULL;
		if (pl) {
			bool embd_on_disk = false;

			s_check_plan(rel, m, &hp, pl, NULL);
			for (uint64_t i = 0; i < pl->hdr.n_entries; i++)
				if (&m->tensors[pl->entries[i].tensor] == e)
					embd_on_disk |= pl->entries[i].tier == NSPLAN_DISK;
			CHECK(embd_on_disk && pl->predict.bytes_per_token == (double)e->row_bytes,
			      "%s: VRAM one byte short: embedding on disk %d, predicts %.1f", rel,
			      embd_on_disk, pl->predict.bytes_per_token);
			nsplan_destroy(&pl);
		}
	}
	ns_summary_free(&sum);
	ns_model_close(&m);
}

/* Hand-computed figures for tiny-qwen3moe-F32 (oracle tiny/README.md shapes, F32 = 4 bytes):
 *   norms: output_norm 256 + per layer attn_norm 256, ffn_norm 256, q_norm 64, k_norm 64
 *          = 1024 + 2 * (1024 + 1024 + 256 + 256) = 6144: held by compute from the start,
 *          never requested per token, cached last
 *   attention per layer: q 256*256, k 256*128, v 256*128, o 256*256 = 196608 elems = 786432 B
 *   router per layer: 256*8*4 = 8192
 *   output: 256*512*4 = 524288; token_embd (untied) row: 256*4 = 1024
 *   experts per layer: 3 tensors * 8 experts * 256*256*4 = 6291456 (slab 262144)
 *   touched = 6144 + 2*786432 + 2*8192 + 524288 + 1024 + 2 * 6291456 * 2/8 = 5266432
 *   (the same total the oracle's tensor table gives in check_plan.py)
 *   requested per token at RAM 0 = touched - 6144 norms = 5260288 */
static void s_hand_qwen3moe(void)
{
	char path[1024], err[NS_ERR_LEN];
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	const uint64_t class0 = 2 * 786432 + 2 * 8192, output = 524288, slab = 262144;
	const double ram0 = 5266432.0 - 6144;
	uint64_t hits[2 * 8] = { 0 }, tokens[2] = { 100, 100 };
	struct nsplan_hotness hot = { .n_layer = 2, .n_expert = 8, .hits = hits, .tokens = tokens };
	struct nsplan *pl, *p2 = NULL;
	struct nsplan_diff *d = NULL;

	ns_test_oracle_path(path, sizeof(path), "tiny/tiny-qwen3moe-F32.gguf");
	if (ns_model_open(path, &m, err, sizeof(err)) || ns_hparams_load(m, &hp, err, sizeof(err))) {
		CHECK(0, "%s", err);
		ns_model_close(&m);
		return;
	}
	pl = s_plan(m, &hp, 0, 0, 0, NULL);
	if (pl) {
		CHECK(pl->predict.touched == 5266432.0, "qwen3moe touched %.1f, want 5266432",
		      pl->predict.touched);
		CHECK(pl->predict.bytes_per_token == ram0 && pl->predict.held_disk == 6144 &&
		      pl->predict.held_bytes == 6144 && pl->predict.tied_row == 0,
		      "qwen3moe at RAM 0 predicts %.1f (held on disk %" PRIu64 "), want %.1f",
		      pl->predict.bytes_per_token, pl->predict.held_disk, ram0);
		nsplan_destroy(&pl);
	}
	/* exactly the small every-token matrices: all of them resident, nothing else (the
	 * norms stay on disk: they cost nothing per token) */
	pl = s_plan(m, &hp, class0, 0, 0, NULL);
	if (pl) {
		CHECK(pl->predict.bytes_per_token == ram0 - (double)class0,
		      "qwen3moe class0 budget predicts %.1f, want %.1f",
		      pl->predict.bytes_per_token, ram0 - (double)class0);
		CHECK(pl->by_kind[NSPLAN_KIND_NORM].tier_bytes[NSPLAN_RAM] == 0 &&
		      pl->predict.held_disk == 6144, "norms cached before the attention");
		CHECK(pl->by_kind[NSPLAN_KIND_OUTPUT].tier_bytes[NSPLAN_RAM] == 0, "output cached early");
		nsplan_destroy(&pl);
	}
	/* + output + 3 expert slabs (expert 0 of layer 0: gate, down, up) */
	pl = s_plan(m, &hp, class0 + output + 3 * slab, 0, 0, NULL);
	if (pl) {
		CHECK(pl->predict.bytes_per_token == ram0 - (double)(class0 + output) - 3 * slab / 4.0,
		      "qwen3moe predicts %.1f", pl->predict.bytes_per_token);
		for (uint64_t i = 0; i < pl->hdr.n_entries; i++) {
			const struct nsplan_entry *e = &pl->entries[i];
			if (e->kind == NSPLAN_KIND_EXPERT && e->tier == NSPLAN_RAM)
				CHECK(e->expert == 0 && ns_tensor_layer(m->tensors[e->tensor].name) == 0,
				      "cached expert %u of %s, want expert 0 of layer 0", e->expert,
				      m->tensors[e->tensor].name);
		}
		/* per token exactly: the mean over every routing (all pairs in both layers) is the
		 * expected value; a routing of only cached experts reads the dense part alone */
		{
			uint64_t sum = 0, n = 0, one;
			uint32_t r[4];
			for (uint32_t a = 0; a < 64; a++)
				for (uint32_t b = 0; b < 64; b++) {
					r[0] = a / 8; r[1] = a % 8; r[2] = b / 8; r[3] = b % 8;
					if (r[0] >= r[1] || r[2] >= r[3])
						continue;
					CHECK(nsplan_token_bytes(pl, m, r, 2, 2, &one) == 0, "token bytes");
					sum += one;
					n++;
				}
			CHECK(n == 28 * 28 && (double)sum / (double)n == pl->predict.bytes_per_token,
			      "mean over routings %.3f, predicted %.3f", (double)sum / (double)n,
			      pl->predict.bytes_per_token);
			r[0] = 0; r[1] = 1; r[2] = 0; r[3] = 1;
			CHECK(nsplan_token_bytes(pl, m, r, 2, 2, &one) == 0 &&
			      one == pl->predict.disk_dense + 3 * slab * 3, "routing 0,1 reads %" PRIu64, one);
			r[3] = 8;
			CHECK(nsplan_token_bytes(pl, m, r, 2, 2, &one) == -EINVAL, "expert 8 accepted");
		}
		/* statistics: layer 1 expert 5 and layer 0 expert 3 hot -> their slabs move in */
		for (int e = 0; e < 8; e++)
			hits[e] = hits[8 + e] = 20;
		hits[8 + 5] = 90;
		hits[3] = 80;
		char uerr[NS_ERR_LEN];
		CHECK(nsplan_update(pl, m, &hp, &hot, &p2, &d, uerr, sizeof(uerr)) == 0, "%s", uerr);
		if (p2 && d) {
			uint64_t moved_in = 0;
			CHECK(p2->hdr.generation == 2 && d->from_generation == 1 && d->to_generation == 2,
			      "generations %u, %u->%u", p2->hdr.generation, d->from_generation,
			      d->to_generation);
			for (uint64_t i = 0; i < p2->hdr.n_entries; i++) {
				const struct nsplan_entry *e = &p2->entries[i];
				CHECK(e->generation == 2, "entry generation %u", e->generation);
				if (e->kind == NSPLAN_KIND_EXPERT && e->tier == NSPLAN_RAM)
					CHECK(e->expert == 5 && ns_tensor_layer(m->tensors[e->tensor].name) == 1,
					      "hot plan cached expert %u of %s", e->expert,
					      m->tensors[e->tensor].name);
			}
			for (uint64_t i = 0; i < d->n_moves; i++)
				if (d->moves[i].to == NSPLAN_RAM)
					moved_in += d->moves[i].bytes;
			CHECK(d->bytes_promoted == 3 * slab && d->bytes_demoted == 3 * slab &&
			      moved_in == 3 * slab, "diff promoted %" PRIu64 " demoted %" PRIu64,
			      d->bytes_promoted, d->bytes_demoted);
			/* expected disk bytes with the measured rates: every slab weighs hits/tokens */
			CHECK(!p2->predict.uniform, "uniform flag");
			s_check_plan("hot", m, &hp, p2, &hot);
		}
		nsplan_diff_destroy(&d);
		nsplan_destroy(&p2);
		nsplan_destroy(&pl);
	}
	ns_model_close(&m);
}

/* Hand-computed figures for tiny-qwen3-Q4_K_M, whose token_embd is tied to the output
 * (oracle meta/tiny__tiny-qwen3-Q4_K_M.json, gguf-py's table):
 *   matrices 813312 B, of which token_embd 107520 B = 512 rows of 210 B (Q6_K), attention
 *   229632 B; blk.0.ffn_down 73728 B (rows of 288 B), blk.0.ffn_gate rows of 144 B;
 *   held vectors (norms) 6144 B.
 *   RAM 0: 813312 + 210 (the tied embedding's lookup row) = 813522 per token.
 *   RAM = attention + 107519: the embedding does not fit whole, so it stays on disk and the
 *   dense FFN takes the budget: blk.0.ffn_down whole (73728), 234 rows of blk.0.ffn_gate
 *   (33696), 95 bytes left that no row fits: 813522 - 229632 - 73728 - 33696 = 476466.
 *   RAM = attention + 107520 + 73728: the embedding whole (its row too), then blk.0.ffn_down:
 *   813522 - 229632 - 107520 - 210 - 73728 = 402432. */
static void s_hand_tied(void)
{
	static const struct { uint64_t ram; double want; uint64_t tied_row; } c[] = {
		{ 0, 813522, 210 },
		{ 229632 + 107519, 476466, 210 },
		{ 229632 + 107520 + 73728, 402432, 0 },
		{ 819456, 0, 0 },
	};
	char path[1024], err[NS_ERR_LEN];
	struct ns_model *m = NULL;
	struct ns_hparams hp;

	ns_test_oracle_path(path, sizeof(path), "tiny/tiny-qwen3-Q4_K_M.gguf");
	if (ns_model_open(path, &m, err, sizeof(err)) || ns_hparams_load(m, &hp, err, sizeof(err))) {
		CHECK(0, "%s", err);
		ns_model_close(&m);
		return;
	}
	CHECK(hp.tied_embeddings, "tiny-qwen3 is not tied");
	for (size_t i = 0; i < NS_ARRAY_LEN(c); i++) {
		struct nsplan *pl = s_plan(m, &hp, c[i].ram, 0, 0, NULL);

		if (!pl)
			continue;
		CHECK(pl->predict.bytes_per_token == c[i].want && pl->predict.tied_row == c[i].tied_row,
		      "tied tiny-qwen3 at RAM %" PRIu64 ": predicts %.1f (tied row %" PRIu64 "), want "
		      "%.1f (%" PRIu64 ")", c[i].ram, pl->predict.bytes_per_token, pl->predict.tied_row,
		      c[i].want, c[i].tied_row);
		CHECK(pl->predict.held_bytes == 6144, "held %" PRIu64, pl->predict.held_bytes);
		nsplan_destroy(&pl);
	}
	ns_model_close(&m);
}

/* The record checker refuses what a broken or hostile writer could publish. */
static void s_records_bad(void)
{
	char path[1024], err[NS_ERR_LEN];
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	struct nsplan *pl;

	ns_test_oracle_path(path, sizeof(path), "tiny/tiny-qwen3-Q4_K_M.gguf");
	if (ns_model_open(path, &m, err, sizeof(err)) || ns_hparams_load(m, &hp, err, sizeof(err))) {
		CHECK(0, "%s", err);
		ns_model_close(&m);
		return;
	}
	pl = s_plan(m, &hp, 100000, 0, 0, NULL);
	if (pl) {
		size_t len = nsplan_records_bytes(pl);
		uint8_t *buf = malloc(len);
		struct nsplan_entry *e = (struct nsplan_entry *)(buf + sizeof(struct nsplan_header));
		struct { const char *what; size_t off; uint8_t v; } cases[] = {
			{ "magic", 0, 0x55 },
			{ "version", 8, 9 },
			{ "tier", sizeof(struct nsplan_header) + 4, 7 },
			{ "tensor", sizeof(struct nsplan_header) + 2, 0xff },
			{ "row", sizeof(struct nsplan_header) + 32 + 8, 0x7f },
			{ "generation", sizeof(struct nsplan_header) + 24, 9 },
		};
		for (size_t c = 0; buf && c < NS_ARRAY_LEN(cases); c++) {
			nsplan_records_write(pl, buf);
			buf[cases[c].off] = cases[c].v;
			CHECK(nsplan_records_check(buf, len, m->n_tensors, s_rows, m, err, sizeof(err)) ==
			      -EPROTO, "corrupt %s accepted", cases[c].what);
		}
		if (buf) {
			nsplan_records_write(pl, buf);
			CHECK(nsplan_records_check(buf, len - 1, m->n_tensors, s_rows, m, err,
						   sizeof(err)) == -EPROTO, "short accepted");
			CHECK(nsplan_records_check(buf, len - 32, m->n_tensors, s_rows, m, err,
						   sizeof(err)) == -EPROTO, "missing entry accepted");
			e[0].row_end += 1; /* overlap / gap */
			CHECK(nsplan_records_check(buf, len, m->n_tensors, s_rows, m, err, sizeof(err)) ==
			      -EPROTO, "gap accepted");
		}
		free(buf);
		nsplan_destroy(&pl);
	}
	{
		struct nsplan_opts o = { .budgets = { .vram = 10, .reserve_vram = 11 } };
		CHECK(nsplan_compute(m, &hp, &o, 1, &pl, err, sizeof(err)) == -EINVAL,
		      "reserve above budget accepted");
	}
	ns_model_close(&m);
}

/* The statistics text format: good files load, bad ones are refused whole with a line. */
static void s_stats(void)
{
	static const struct { const char *text; int ret; } c[] = {
		{ "# c\ntokens 1 10\n1 7 9  # hot\n\n", 0 },
		{ "tokens 0 5\n0 3 6\n", -EINVAL },        /* more hits than tokens */
		{ "2 0 1\n", -EINVAL },                     /* layer out of range */
		{ "0 8 1\n", -EINVAL },                     /* expert out of range */
		{ "0 1\n", -EINVAL },                       /* short record */
		{ "0 1 2 3\n", -EINVAL },                   /* long record */
		{ "tokens 0 -5\n", -EINVAL },
		{ "0 1 99999999999999999999999\n", -EINVAL },
		{ "tokens x 1\n", -EINVAL },
	};
	char path[] = "/tmp/ns-test-stats-XXXXXX", err[NS_ERR_LEN];
	int fd = mkstemp(path);

	CHECK(fd >= 0, "mkstemp");
	if (fd < 0)
		return;
	close(fd);
	for (size_t i = 0; i < NS_ARRAY_LEN(c); i++) {
		struct nsplan_stats st;
		FILE *f = fopen(path, "w");
		int ret;
		if (!f)
			break;
		fputs(c[i].text, f);
		fclose(f);
		err[0] = '\0';
		ret = nsplan_stats_load(path, 2, 8, &st, err, sizeof(err));
		CHECK(ret == c[i].ret, "stats case %zu: %d (%s)", i, ret, err);
		CHECK(ret || (st.tokens[1] == 10 && st.hits[15] == 9 && st.hot.n_expert == 8),
		      "stats case %zu loaded wrongly", i);
		CHECK(!ret || (err[0] && !strchr(err, '\n')), "stats case %zu: no one-line error", i);
		nsplan_stats_free(&st);
	}
	unlink(path);
}

int main(void)
{
	ns_test_require_oracle();
	for (size_t i = 0; i < NS_ARRAY_LEN(s_models); i++)
		s_model(s_models[i]);
	s_hand_qwen3moe();
	s_hand_tied();
	s_records_bad();
	s_stats();
	if (s_fail) {
		fprintf(stderr, "%d failures\n", s_fail);
		return 1;
	}
	printf("ok\n");
	return 0;
}
