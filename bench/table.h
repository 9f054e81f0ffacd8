/* table.h - `nsctl bench` results in llama-bench's formats: a markdown table
 * (model | size | params | backend | test | t/s, t/s as "mean ± sd"), JSON (an array of
 * objects with llama-bench's field names: model_type, model_size, model_n_params, n_prompt,
 * n_gen, avg_ts, stddev_ts, samples_ts) or CSV (one header line, then one line per row), plus
 * the streaming columns of this engine: budgets, GB read per token, stall ms per token, arena
 * peak, cache hit rate, the roofline tok/s (drive bandwidth / bytes read per token, both
 * measured in the same run) and the ratio of the mean to it.
 *
 * Rows are the caller's; printing allocates nothing that outlives the call. */
#ifndef NS_BENCH_TABLE_H
#define NS_BENCH_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NS_BENCH_MAX_SAMPLES 64

enum ns_table_fmt { NS_TABLE_MD, NS_TABLE_JSON, NS_TABLE_CSV };

/* "md", "json" or "csv" -> 0; anything else -> -EINVAL. */
int ns_table_parse_fmt(const char *s, enum ns_table_fmt *fmt);

/* One configuration x one test, over its repeats. Unknown measurements are negative. */
struct ns_bench_row {
	char model[96];          /* llama-bench's model_type: "qwen3 8B Q4_K - Medium" */
	uint64_t size_bytes;     /* weight bytes of the model (all shards) */
	uint64_t n_params;
	char backend[16];        /* "CPU", "CUDA" */
	uint32_t n_prompt, n_gen; /* the test: pp<n_prompt> when n_gen is 0, else tg<n_gen> */
	uint32_t n_depth;        /* tokens in the context before the test (-d), 0 = none */
	uint64_t mem_budget, ram_budget, vram_budget; /* bytes; 0 = not set */
	uint32_t block_rows, lookahead;               /* 0 = the engine's default */
	size_t n_samples;
	double ts[NS_BENCH_MAX_SAMPLES]; /* tokens per second of each repeat, in run order */
	double bytes_per_token;  /* weight bytes read from the drive per token (mean) */
	double req_bytes_per_token;  /* weight bytes requested from nsio per token (mean): before
				      * O_DIRECT alignment widening, what the plan predicts */
	double plan_bytes_per_token; /* the planner's prediction of requested bytes (nsctl plan) */
	double stall_ms_per_token; /* time the compute side waited for weights, per token */
	double arena_peak;       /* bytes of streaming arena in use at peak */
	double cache_hit_rate;   /* 0..1 share of weight bytes served from RAM/VRAM caches */
	double predict_hit_rate; /* MoE: 0..1 share of the real router's experts that the
				  * one-layer-early prediction named (over the repeats); < 0: no
				  * prediction (dense, --moe-predict off) */
	double disk_bps;         /* the drive's O_DIRECT bandwidth measured in the same run */
	uint64_t pred_experts, pred_hits; /* the sums behind predict_hit_rate */
	/* speculative decoding (nsctl bench --draft): the drafter ("none", "ngram",
	 * "oracle:0.80", a draft model's file name; "" = a teacher-forced tg row or a pp row, no
	 * draft columns), and per tg run (means over the repeats) the drafted tokens evaluated,
	 * those kept and decode passes per generated token; bytes_per_token and t/s are then per
	 * generated token. Unknown: negative. */
	char draft[64];
	double drafted, accepted, passes_per_token;
};

/* accepted / drafted, or -1 (no draft row, nothing drafted). */
double ns_bench_row_accept_rate(const struct ns_bench_row *r);

/* Reset a row: every measurement unknown, no samples. */
void ns_bench_row_init(struct ns_bench_row *r);

/* "pp512" / "tg128" (llama-bench's "tg128 @ d2048" with a depth) into buf. Returns buf. */
char *ns_bench_row_test(const struct ns_bench_row *r, char *buf, size_t len);

/* Roofline tokens per second (disk_bps / bytes_per_token), or -1 when either is unknown. */
double ns_bench_row_roofline(const struct ns_bench_row *r);

/* Print rows[0..n) in fmt. Markdown prints a header even for n == 0; the block_rows and
 * lookahead columns appear only when some row sets them. Returns 0 or -EIO on a write error. */
int ns_table_print(FILE *f, enum ns_table_fmt fmt, const struct ns_bench_row *rows, size_t n);

#endif
