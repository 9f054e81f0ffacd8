/* test_expert_peak.c - streaming one expert in 128-row blocks holds (lookahead + 1) blocks of
 * the arena, not the expert.
 *
 *   test_expert_peak
 *
 * A Qwen3-30B-A3B-shaped model from the bench generator (modelfile/synth.h: one layer, the
 * vocabulary capped at 512 and the experts at 8 to stay small; every other dimension is the real
 * model's: n_embd 2048, n_ff_exp 768, Q4_K_M). A fresh nsio serves it; one client streams one
 * expert's window [e * rows, (e + 1) * rows) of blk.0.ffn_down_exps and then of
 * blk.0.ffn_gate_exps with ns_stream_linear (what the forward pass does), --block-rows 128 and
 * the default lookahead (NS_DEFAULT_LOOKAHEAD, what nsctl gives nsio and nscompute), checking every block's bytes against a plain pread. nsio's arena
 * peak counter (ctl->arena.peak, the most bytes leases ever held) must then lie between
 * (lookahead + 1) blocks of 128 rows and (lookahead + 1) block slots (the block widened for
 * O_DIRECT alignment, ns_stream_slot_bytes), and below the expert's window:
 *   gate: 768 rows of 1152 B = 884736 B per expert, blocks of 147456 B: 5 blocks <= 757760;
 *   down: 2048 rows of 432 B (Q4_K) or 630 B (Q6_K) per expert.
 * The down window is streamed first: the peak counter only grows, and its blocks are smaller. */
#include <inttypes.h>

#include "io/io_testlib.h"
#include "synth.h"

#define BLOCK_ROWS 128

struct s_ctx {
	const struct iot_ref *ref;
	uint64_t blocks, max_rows;
};

static int s_block(void *ctx, const struct ns_block *b)
{
	struct s_ctx *x = ctx;

	x->blocks++;
	if (b->nrows > x->max_rows)
		x->max_rows = b->nrows;
	usleep(1000); /* compute time: nsio fills the lookahead meanwhile */
	return iot_block_ok(x->ref, b) ? 0 : -EIO;
}

/* Stream expert e of tensor name; check the arena peak. Returns the peak. */
static uint64_t s_expert(struct ns_session *s, struct ns_client *c, const struct iot_ref *ref,
			 const char *name, uint32_t e, uint32_t la)
{
	const struct ns_model_tensor *t = ns_model_find(ref->m, name);
	int64_t ci = ns_client_find_tensor(c, name);
	struct s_ctx x = { .ref = ref };
	char err[NS_ERR_LEN];
	uint64_t rows, er, block, slot, win, peak;

	IOT_CHECK(t && t->n_dims == 3 && ci >= 0, "%s missing", name);
	er = t->ne[1]; /* rows per expert */
	IOT_CHECK(ns_stream_block_rows(c, (uint64_t)ci, BLOCK_ROWS, la, &rows, err,
				       sizeof(err)) == 0 && rows == BLOCK_ROWS,
		  "%s: block rows %llu (%s)", name, (unsigned long long)rows, err);
	block = BLOCK_ROWS * t->row_bytes;
	slot = ns_stream_slot_bytes(block);
	win = er * t->row_bytes;
	IOT_CHECK(ns_stream_linear(c, (uint64_t)ci, (uint64_t)e * er, (uint64_t)(e + 1) * er,
				   BLOCK_ROWS, la, s_block, &x) == 0, "stream %s", name);
	peak = atomic_load(&s->ctl->arena.peak);
	printf("%s expert %u: %llu rows of %llu B = %llu B in %llu blocks of %llu rows; arena peak "
	       "%llu B = %.2f blocks of %llu B (slot %llu B), limit (lookahead %u + 1) slots = "
	       "%llu B\n", name, e, (unsigned long long)er, (unsigned long long)t->row_bytes,
	       (unsigned long long)win, (unsigned long long)x.blocks,
	       (unsigned long long)x.max_rows, (unsigned long long)peak,
	       (double)peak / (double)block, (unsigned long long)block, (unsigned long long)slot,
	       la, (unsigned long long)((la + 1) * slot));
	IOT_CHECK(x.blocks == (er + BLOCK_ROWS - 1) / BLOCK_ROWS && x.max_rows == BLOCK_ROWS,
		  "%s: %llu blocks of at most %llu rows", name, (unsigned long long)x.blocks,
		  (unsigned long long)x.max_rows);
	IOT_CHECK(x.blocks > la + 1, "%s: the expert is not larger than the lookahead", name);
	IOT_CHECK(peak >= (la + 1) * block && peak <= (la + 1) * slot,
		  "%s: arena peak %llu B is not (lookahead + 1) = %u blocks of %llu B (<= %llu "
		  "with alignment)", name, (unsigned long long)peak, la + 1,
		  (unsigned long long)block, (unsigned long long)((la + 1) * slot));
	IOT_CHECK(peak < win, "%s: arena peak %llu B holds the whole expert (%llu B)", name,
		  (unsigned long long)peak, (unsigned long long)win);
	return peak;
}

int main(void)
{
	struct ns_synth_opts o = { .preset = "qwen3-30b-a3b", .layers = 1, .seed = 7,
				   .max_vocab = 512, .max_experts = 8 };
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	char la_arg[16];
	const char *extra[] = { "--quiet", "--lookahead", la_arg, NULL };
	const char *root = getenv("NS_BUILD_ROOT");
	char model[4096], err[NS_ERR_LEN];
	struct ns_session *s;
	struct ns_client *c;
	struct iot_ref ref;
	uint64_t t0 = ns_now_ns(), p_down, p_gate;
	uint32_t la;
	pid_t pid;

	snprintf(model, sizeof(model), "%s/tests/moe/expert-peak-%d.gguf",
		 root && *root ? root : ".", (int)getpid());
	IOT_CHECK(ns_synth_write(&o, model, err, sizeof(err)) == 0, "generate: %s", err);
	iot_ref_open(&ref, model);
	printf("generated %s: %llu bytes in %.2f s\n", model,
	       (unsigned long long)ref.m->total_tensor_bytes, (double)(ns_now_ns() - t0) / 1e9);

	/* nsio started as nsctl starts it: the lookahead users get by default */
	snprintf(la_arg, sizeof(la_arg), "%u", NS_DEFAULT_LOOKAHEAD);
	p.arena_bytes = 8ull << 20;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "session: %s", err);
	pid = iot_start_nsio(s, model, extra);
	iot_cleanup_register(s, pid, model);
	IOT_CHECK(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "client: %s", err);
	la = ns_client_default_lookahead(c);
	IOT_CHECK(la == NS_DEFAULT_LOOKAHEAD, "nsio's default lookahead %u, not %u", la,
		  NS_DEFAULT_LOOKAHEAD);
	IOT_CHECK(atomic_load(&s->ctl->arena.peak) == 0, "arena used before any request");
	p_down = s_expert(s, c, &ref, "blk.0.ffn_down_exps.weight", 5, la);
	p_gate = s_expert(s, c, &ref, "blk.0.ffn_gate_exps.weight", 3, la);
	IOT_CHECK(p_gate >= p_down, "peak went down");
	ns_client_close(&c);
	IOT_CHECK(iot_stop_nsio(pid) == 0, "nsio exit");
	iot_cleanup_register(NULL, 0, model);
	ns_session_destroy(&s);
	iot_ref_close(&ref);
	unlink(model);
	printf("ok (%.2f s)\n", (double)(ns_now_ns() - t0) / 1e9);
	return 0;
}
