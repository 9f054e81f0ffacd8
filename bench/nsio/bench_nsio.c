/* bench_nsio - nsio streaming a multi-GB model through the client library, against a bare
 * io_uring O_DIRECT reader at the same block size and queue depth, measured in the same run.
 *
 *   bench_nsio [--scratch PATH] [--size 2GB] [--block-bytes 1MB] [--queue-depth 8]
 *              [--mem-budget 64MB] [--rounds 6] [--keep] [--also-fixed]
 *
 * The model is generated here (GGUF, F32 rows of 4 KiB, tensor data 4 KiB aligned, so a block
 * of block-bytes / 4096 rows is exactly one aligned read of block-bytes) into a scratch file,
 * --scratch PATH (default $NS_BUILD_ROOT/bench-nsio.gguf), deleted at the end unless --keep.
 * The file is created new (it is never moved over an existing one); an existing PATH is used
 * only when it is such a scratch file (its metadata says so, "bench_nsio.scratch") of the
 * size asked for, and anything else at PATH is refused in one line, never overwritten or
 * deleted: the old --file flag read like "the file to read", and it truncated a 17 GB model. Both readers use
 * O_DIRECT, so every round reads the device, not the page cache. Each round runs both readers
 * back to back, alternating which goes first; the ratio is given over all rounds and as the
 * median of the per-round ratios. The bare reader uses plain buffers like diskprobe.c;
 * --also-fixed adds a bare reader with registered buffers (what nsio uses) for information. Prints both bandwidths, the ratio (target >= 0.95), the
 * arena peak against the budget and the CPU time nsio used per GB streamed. Exit 0 always
 * when it ran (numbers are for people), 1 on an error. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "gguf_write.h"
#include "ggml_type.h"
#include "model.h"
#include "ns_util.h"
#include "session.h"

#define ROW_ELEMS 1024 /* F32: 4096-byte rows */
#define TENSOR_ROWS 65536 /* 256 MiB per tensor */

#define S_SCRATCH_KEY "bench_nsio.scratch"

struct opts {
	const char *file;       /* --scratch */
	uint64_t size, block, budget;
	uint32_t qd, rounds;
	bool keep, also_fixed;
};

static int s_fill(void *ctx, uint64_t off, void *dst, size_t n)
{
	uint64_t base = (uint64_t)(uintptr_t)ctx << 40;
	uint8_t *d = dst;
	size_t i = 0;

	for (; i < n && (off + i) % 8; i++)
		d[i] = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = (base + off + i) * 0x9e3779b97f4a7c15ull;
		memcpy(d + i, &v, 8);
	}
	for (; i < n; i++)
		d[i] = 0;
	return 0;
}

/* An existing PATH: 1 when it is our scratch file of n_tensors tensors (use it), 0 when it
 * is anything else (refuse). */
static int s_is_scratch(const char *path, uint64_t n_tensors)
{
	struct ns_gguf *g;
	char err[NS_ERR_LEN];
	bool mark = false;
	int ok;

	if (ns_gguf_open(path, &g, err, sizeof(err)) < 0)
		return 0; /* not even a GGUF: certainly not ours */
	ok = ns_gguf_get_bool(g, S_SCRATCH_KEY, &mark) && mark && g->n_tensors == n_tensors;
	ns_gguf_close(&g);
	return ok;
}

static int s_make_file(const struct opts *o)
{
	struct ns_gguf_writer *w;
	char err[NS_ERR_LEN], name[32];
	uint64_t n_tensors = o->size / ((uint64_t)TENSOR_ROWS * ROW_ELEMS * 4);
	int fd;

	if (n_tensors == 0)
		n_tensors = 1;
	if (access(o->file, F_OK) == 0) {
		if (s_is_scratch(o->file, n_tensors) == 1) {
			printf("using the scratch file %s of an earlier run\n", o->file);
			return 0;
		}
		fprintf(stderr, "bench_nsio: %s exists and is not a bench_nsio scratch file of "
			"%llu tensors: not overwritten (name a new path with --scratch)\n", o->file,
			(unsigned long long)n_tensors);
		return -EEXIST;
	}
	printf("writing %s: %llu tensors of 256 MiB ...\n", o->file, (unsigned long long)n_tensors);
	fflush(stdout);
	w = ns_gguf_writer_new(4096);
	if (!w)
		return -ENOMEM;
	ns_gguf_writer_set_str(w, "general.architecture", "llama");
	ns_gguf_writer_set_bool(w, S_SCRATCH_KEY, true);
	for (uint64_t i = 0; i < n_tensors; i++) {
		uint64_t ne[2] = { ROW_ELEMS, TENSOR_ROWS };
		snprintf(name, sizeof(name), "blk.%llu.weight", (unsigned long long)i);
		if (ns_gguf_writer_add_tensor_lazy(w, name, NS_TYPE_F32, 2, ne, s_fill,
						   (void *)(uintptr_t)(i + 1)))
			return -EINVAL;
	}
	if (ns_gguf_writer_write_new(w, o->file, err, sizeof(err))) {
		fprintf(stderr, "bench_nsio: %s\n", err);
		ns_gguf_writer_destroy(&w);
		return -EIO;
	}
	ns_gguf_writer_destroy(&w);
	fd = open(o->file, O_RDONLY); /* no dirty pages left for O_DIRECT to flush */
	if (fd >= 0) {
		fdatasync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
	return 0;
}

/* Bare reader: every tensor's bytes, sequentially, block bytes per read, qd in flight, one
 * buffer per slot (like shared/tools/diskprobe.c in seq mode). */
static double s_bare(const struct opts *o, const struct ns_model *m, bool fixed,
		     uint64_t *bytes_out)
{
	struct io_uring ring;
	uint8_t **buf;
	uint32_t *free_slots, n_free = 0, inflight = 0;
	uint64_t t0, bytes = 0, next_t = 0, next_off = 0;
	double dt;
	int fd = open(m->shards[0]->path, O_RDONLY | O_DIRECT);

	if (fd < 0 || io_uring_queue_init(o->qd, &ring, 0) < 0)
		return -1;
	buf = calloc(o->qd, sizeof(*buf));
	free_slots = calloc(o->qd, sizeof(*free_slots));
	if (!buf || !free_slots)
		return -1;
	for (uint32_t i = 0; i < o->qd; i++) {
		if (posix_memalign((void **)&buf[i], 4096, o->block))
			return -1;
		free_slots[n_free++] = i;
	}
	if (fixed) { /* registered buffers, as nsio uses where the kernel allows */
		struct iovec *iov = calloc(o->qd, sizeof(*iov));
		for (uint32_t i = 0; iov && i < o->qd; i++)
			iov[i] = (struct iovec){ buf[i], o->block };
		if (!iov || io_uring_register_buffers(&ring, iov, o->qd))
			fixed = false;
		free(iov);
	}
	t0 = ns_now_ns();
	for (;;) {
		struct io_uring_cqe *cqe;

		while (n_free && next_t < m->n_tensors) {
			const struct ns_model_tensor *t = &m->tensors[next_t];
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			uint64_t len = t->n_bytes - next_off < o->block ? t->n_bytes - next_off
									 : o->block;
			uint32_t slot = free_slots[--n_free];

			if (fixed)
				io_uring_prep_read_fixed(sqe, fd, buf[slot], (unsigned)len,
							 t->file_offset + next_off, (int)slot);
			else
				io_uring_prep_read(sqe, fd, buf[slot], (unsigned)len,
						   t->file_offset + next_off);
			io_uring_sqe_set_data64(sqe, ((uint64_t)slot << 32) | len);
			inflight++;
			next_off += len;
			if (next_off >= t->n_bytes) {
				next_off = 0;
				next_t++;
			}
		}
		if (!inflight)
			break;
		io_uring_submit(&ring);
		if (io_uring_wait_cqe(&ring, &cqe) < 0)
			return -1;
		if (cqe->res < 0 || (uint64_t)cqe->res != (io_uring_cqe_get_data64(cqe) & 0xffffffffu)) {
			fprintf(stderr, "bare read: %d\n", cqe->res);
			return -1;
		}
		bytes += (uint64_t)cqe->res;
		free_slots[n_free++] = (uint32_t)(io_uring_cqe_get_data64(cqe) >> 32);
		io_uring_cqe_seen(&ring, cqe);
		inflight--;
	}
	dt = (ns_now_ns() - t0) / 1e9;
	*bytes_out = bytes;
	for (uint32_t i = 0; i < o->qd; i++)
		free(buf[i]);
	free(buf);
	free(free_slots);
	io_uring_queue_exit(&ring);
	close(fd);
	return bytes / dt;
}

struct sink {
	uint64_t bytes, blocks, bad;
	uint32_t tensor;
};

static int s_sink(void *ctx, const struct ns_block *b)
{
	struct sink *k = ctx;
	uint64_t v, want = (((uint64_t)(b->tensor + 1) << 40) + b->row0 * 4096ull) *
			   0x9e3779b97f4a7c15ull;

	memcpy(&v, b->data, 8); /* spot check: the first word of every block */
	if (v != want)
		k->bad++;
	k->bytes += b->nbytes;
	k->blocks++;
	return 0;
}

static double s_nsio(const struct opts *o, struct ns_client *c, struct sink *k)
{
	uint64_t t0 = ns_now_ns();
	/* 2 qd + 1 blocks requested: qd reads stay in flight while the consumer holds one block
	 * and the next ones wait delivered (the queue depth, not the lookahead, bounds reads) */
	uint32_t la = 2 * o->qd;

	for (uint64_t t = 0; t < ns_client_n_tensors(c); t++) {
		struct ns_client_tensor ti;
		int rc;

		ns_client_tensor(c, t, &ti);
		rc = ns_stream_linear(c, t, 0, ti.n_rows, o->block / ti.row_bytes, la, s_sink, k);
		if (rc) {
			fprintf(stderr, "bench_nsio: stream: %s\n", strerror(-rc));
			return -1;
		}
	}
	return k->bytes / ((ns_now_ns() - t0) / 1e9);
}

static int s_parse(int argc, char **argv, struct opts *o)
{
	static char deffile[4096];
	const char *root = getenv("NS_BUILD_ROOT");

	snprintf(deffile, sizeof(deffile), "%s/bench-nsio.gguf", root && *root ? root : ".");
	*o = (struct opts){ .file = deffile, .size = 2ull << 30, .block = 1 << 20,
			    .budget = 64ull << 20, .qd = 8, .rounds = 6 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t x;

		if (!strcmp(a, "--keep")) {
			o->keep = true;
			continue;
		}
		if (!strcmp(a, "--also-fixed")) {
			o->also_fixed = true;
			continue;
		}
		if (!v)
			goto bad;
		i++;
		if (!strcmp(a, "--file")) {
			fprintf(stderr, "bench_nsio: --file is now --scratch PATH (a file this "
				"bench creates, and deletes unless --keep)\n");
			return 2;
		} else if (!strcmp(a, "--scratch"))
			o->file = v;
		else if (!strcmp(a, "--size") && !ns_parse_bytes(v, &x) && x)
			o->size = x;
		else if (!strcmp(a, "--block-bytes") && !ns_parse_bytes(v, &x) && x % 4096 == 0 &&
			 x && x <= (64u << 20))
			o->block = x;
		else if (!strcmp(a, "--mem-budget") && !ns_parse_bytes(v, &x) && x)
			o->budget = x;
		else if (!strcmp(a, "--queue-depth") && atoi(v) > 0 && atoi(v) <= 256)
			o->qd = (uint32_t)atoi(v);
		else if (!strcmp(a, "--rounds") && atoi(v) > 0 && atoi(v) <= 20)
			o->rounds = (uint32_t)atoi(v);
		else
			goto bad;
	}
	return 0;
bad:
	fprintf(stderr, "usage: bench_nsio [--scratch PATH] [--size 2GB] [--block-bytes 1MB] "
		"[--queue-depth 8] [--mem-budget 64MB] [--rounds 6] [--keep] [--also-fixed]\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct ns_model *m;
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	struct ns_session *s;
	struct ns_client *c;
	struct ns_stats_snapshot st;
	struct rusage ru;
	char err[NS_ERR_LEN], path[4096], qd_s[16], bb_s[32], la_s[16];
	double cpu_s, ratios[20], sum_bare_s = 0, sum_ns_s = 0, median = 0;
	uint64_t sum_bare_b = 0;
	uint32_t n_ratios = 0;
	uint64_t nsio_bytes = 0, bad = 0;
	pid_t pid;
	int rc, status;

	rc = s_parse(argc, argv, &o);
	if (rc)
		return rc;
	rc = s_make_file(&o);
	if (rc)
		return rc == -EEXIST ? 2 : 1;
	if (ns_model_open(o.file, &m, err, sizeof(err))) {
		fprintf(stderr, "bench_nsio: %s\n", err);
		return 1;
	}
	p.arena_bytes = o.budget;
	if (ns_session_create(&p, &s, err, sizeof(err))) {
		fprintf(stderr, "bench_nsio: %s\n", err);
		return 1;
	}
	snprintf(qd_s, sizeof(qd_s), "%u", o.qd);
	snprintf(la_s, sizeof(la_s), "%u", o.qd);
	snprintf(bb_s, sizeof(bb_s), "%llu", (unsigned long long)o.block);
	{
		const char *extra[] = { "--queue-depth", qd_s, "--block-bytes", bb_s, "--lookahead",
					la_s, "--quiet", NULL };
		if (ns_nsio_spawn(ns_nsio_path(path, sizeof(path)), s->id, o.file, extra, &pid) ||
		    ns_nsio_wait_running(s->ctl, pid, 0, 20000, NULL)) {
			fprintf(stderr, "bench_nsio: nsio did not start (%s)\n", path);
			ns_session_destroy(&s);
			return 1;
		}
	}
	if (ns_client_open(s->id, NULL, &c, err, sizeof(err))) {
		fprintf(stderr, "bench_nsio: %s\n", err);
		kill(pid, SIGTERM);
		ns_session_destroy(&s);
		return 1;
	}
	printf("file %s: %.2f GiB, block %llu B, queue depth %u, budget %llu B\n", o.file,
	       m->total_tensor_bytes / 1073741824.0, (unsigned long long)o.block, o.qd,
	       (unsigned long long)o.budget);
	for (uint32_t r = 0; r < o.rounds; r++) {
		struct sink k = { 0 };
		uint64_t bb = 0;
		double bare = 0, fixed = 0, ns = 0;

		/* paired: both readers every round, alternating who goes first (the disk, and
		 * a virtual disk's host cache, change under us) */
		if (r % 2)
			ns = s_nsio(&o, c, &k);
		bare = s_bare(&o, m, false, &bb);
		if (!(r % 2))
			ns = s_nsio(&o, c, &k);
		if (o.also_fixed)
			fixed = s_bare(&o, m, true, &bb);
		if (bare <= 0 || ns <= 0 || fixed < 0)
			break;
		printf("round %u: bare io_uring O_DIRECT %.3f GB/s, nsio + client %.3f GB/s, ratio "
		       "%.3f", r, bare / 1e9, ns / 1e9, ns / bare);
		if (o.also_fixed)
			printf(" (bare with registered buffers %.3f GB/s)", fixed / 1e9);
		printf("\n");
		ratios[n_ratios++] = ns / bare;
		sum_bare_s += bb / bare;
		sum_bare_b += bb;
		sum_ns_s += k.bytes / ns;
		nsio_bytes += k.bytes;
		bad += k.bad;
	}
	ns_stats_snapshot(s->ctl, &st);
	ns_client_close(&c);
	kill(pid, SIGTERM);
	wait4(pid, &status, 0, &ru);
	cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
		ru.ru_stime.tv_usec / 1e6;
	for (uint32_t i = 0; i < n_ratios; i++) /* insertion sort for the median */
		for (uint32_t j = i; j > 0 && ratios[j] < ratios[j - 1]; j--) {
			double x = ratios[j];
			ratios[j] = ratios[j - 1];
			ratios[j - 1] = x;
		}
	if (n_ratios)
		median = n_ratios % 2 ? ratios[n_ratios / 2]
				      : (ratios[n_ratios / 2 - 1] + ratios[n_ratios / 2]) / 2;
	printf("bare reader:    %.3f GB/s (all rounds)\n",
	       sum_bare_s > 0 ? sum_bare_b / sum_bare_s / 1e9 : 0);
	printf("nsio streaming: %.3f GB/s (all rounds)\n",
	       sum_ns_s > 0 ? nsio_bytes / sum_ns_s / 1e9 : 0);
	printf("ratio:          %.3f over all rounds, median of rounds %.3f (target >= 0.95)\n",
	       sum_ns_s > 0 && sum_bare_s > 0 ? (nsio_bytes / sum_ns_s) / (sum_bare_b / sum_bare_s)
					     : 0, median);
	printf("arena peak:     %llu of %llu B budget (%s)\n", (unsigned long long)st.arena_peak,
	       (unsigned long long)st.arena_bytes, st.arena_peak <= st.arena_bytes ? "within" :
	       "OVER");
	printf("nsio CPU:       %.3f s for %.2f GB = %.3f s/GB (%llu reads, %llu device bytes)\n",
	       cpu_s, nsio_bytes / 1e9, nsio_bytes ? cpu_s / (nsio_bytes / 1e9) : 0,
	       (unsigned long long)st.reads, (unsigned long long)st.bytes_device);
	printf("spot checks:    %llu bad blocks\n", (unsigned long long)bad);
	ns_session_destroy(&s);
	ns_model_close(&m);
	if (!o.keep)
		unlink(o.file);
	return bad || st.arena_peak > st.arena_bytes ? 1 : 0;
}
