/* bench_disk.c - the drive as nsio reads it (bench/diskbw.h: O_DIRECT, nsio's read size and
 * queue depth), measured on the model file itself: the roofline, and for MoE models the
 * random-read limit. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "diskbw.h"
#include "ns_util.h"
#include "stats.h"

/* The drive is measured on the largest shard of the model. */
static const struct ns_gguf *s_largest_shard(const struct ns_model *m)
{
	const struct ns_gguf *big = m->shards[0];

	for (uint32_t i = 1; i < m->n_shards; i++)
		if (m->shards[i]->file_size > big->file_size)
			big = m->shards[i];
	return big;
}

/* An MoE token's expert reads are scattered over the file, so beside the sequential roofline
 * (the table's, conservative) print the drive's random-read rate at the same read size and
 * queue depth, and each tg row's ratio to the roofline it gives. Dense models: nothing. */
void bench_moe_random_limit(const struct bench_opts *o, const struct ns_model *m,
			       const struct ns_bench_row *tg, size_t nc)
{
	struct ns_diskbw_opts d;
	struct ns_diskbw_result r;
	const struct ns_gguf *big = s_largest_shard(m);
	char err[NS_ERR_LEN];
	bool moe = false;

	for (uint64_t i = 0; i < m->n_tensors && !moe; i++)
		moe = strstr(m->tensors[i].name, "_exps") != NULL;
	if (!moe || o->no_disk)
		return;
	ns_diskbw_opts_default(&d);
	d.block_bytes = BENCH_NSIO_READ_BYTES;
	d.queue_depth = BENCH_NSIO_QUEUE_DEPTH;
	d.repeats = 3;
	d.pattern = NS_DISKBW_RAND;
	if (ns_diskbw_measure(big->path, &d, &r, err, sizeof(err))) {
		fprintf(stderr, "nsctl bench: random-read measurement failed: %s\n", err);
		return;
	}
	fprintf(stderr, "nsctl bench: MoE: expert reads are scattered; random %" PRIu64 "-byte "
		"reads at queue depth %u: %.3f GB/s (median of 3 passes)\n", d.block_bytes,
		d.queue_depth, r.median_bps / 1e9);
	for (size_t i = 0; i < nc; i++) {
		double mean, sd;

		if (!tg[i].n_samples || !(tg[i].bytes_per_token > 0))
			continue;
		ns_stats_mean_sd(tg[i].ts, tg[i].n_samples, &mean, &sd);
		fprintf(stderr, "nsctl bench: MoE: configuration %zu: tg %.3f t/s against a "
			"random-read roofline of %.3f t/s: ratio %.2f\n", i + 1, mean,
			r.median_bps / tg[i].bytes_per_token,
			mean / (r.median_bps / tg[i].bytes_per_token));
	}
}

/* passes timed passes of the drive into d (nothing when it failed once already). */
void bench_measure_disk(const struct bench_opts *o, const struct ns_model *m, uint32_t passes,
			  bool quiet, struct bench_disk *disk)
{
	struct ns_diskbw_opts d;
	struct ns_diskbw_result r;
	const struct ns_gguf *big = s_largest_shard(m);
	char err[NS_ERR_LEN];

	if (o->no_disk || disk->failed)
		return;
	ns_diskbw_opts_default(&d);
	d.block_bytes = BENCH_NSIO_READ_BYTES;
	d.queue_depth = BENCH_NSIO_QUEUE_DEPTH;
	d.repeats = passes;
	d.pattern = NS_DISKBW_SEQ;
	if (!quiet)
		fprintf(stderr, "nsctl bench: measuring the drive: O_DIRECT reads of %" PRIu64
			" bytes, queue depth %u, on %s ...", d.block_bytes, d.queue_depth, big->path);
	if (ns_diskbw_measure(big->path, &d, &r, err, sizeof(err))) {
		fprintf(stderr, "\nnsctl bench: drive measurement failed (%s); no roofline\n", err);
		disk->failed = true;
		return;
	}
	for (uint32_t i = 0; i < r.repeats && disk->n < BENCH_MAX_DISK_PASSES; i++)
		disk->bps[disk->n++] = r.pass_bps[i];
	if (!quiet)
		fprintf(stderr, " %.3f GB/s (median of %u passes of %.2f GB; min %.3f, max %.3f)\n",
			r.median_bps / 1e9, r.repeats, (double)r.pass_bytes / 1e9, r.min_bps / 1e9,
			r.max_bps / 1e9);
}
