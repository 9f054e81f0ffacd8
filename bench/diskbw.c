/* diskbw.c - io_uring O_DIRECT read bandwidth of a file. See diskbw.h. */
#include "diskbw.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ns_util.h"

#define S_MAX_QD 4096u
#define S_MAX_BUFFER_BYTES (1ull << 30) /* queue_depth * block_bytes */

struct slot {
	uint8_t *buf;   /* block_bytes, NS_DIRECT_ALIGN aligned */
	uint64_t off;   /* file offset of the remaining part of this read */
	uint64_t len;   /* bytes still to read */
	uint64_t done;  /* bytes already read into buf */
};

struct reader {
	int fd;
	struct io_uring ring;
	bool ring_ok;
	struct slot *slots;
	uint32_t qd;
	uint64_t bs, n_blocks;
	enum ns_diskbw_pattern pattern;
	uint64_t cursor; /* SEQ: next block; RAND: xorshift state */
};

static uint64_t s_next_block(struct reader *rd)
{
	if (rd->pattern == NS_DISKBW_SEQ) {
		uint64_t b = rd->cursor++ % rd->n_blocks;
		return b;
	}
	rd->cursor ^= rd->cursor << 13;
	rd->cursor ^= rd->cursor >> 7;
	rd->cursor ^= rd->cursor << 17;
	return rd->cursor % rd->n_blocks;
}

static int s_queue(struct reader *rd, uint32_t i)
{
	struct slot *s = &rd->slots[i];
	struct io_uring_sqe *sqe = io_uring_get_sqe(&rd->ring);

	if (!sqe)
		return -EBUSY; /* cannot happen: at most qd reads in a ring of qd entries */
	io_uring_prep_read(sqe, rd->fd, s->buf + s->done, (unsigned)s->len, s->off);
	io_uring_sqe_set_data64(sqe, i);
	return 0;
}

/* One pass of n_ios block reads, qd in flight. Returns 0 or -errno. */
static int s_pass(struct reader *rd, uint64_t n_ios, char *err, size_t errlen)
{
	uint64_t issued = 0, completed = 0;
	uint32_t inflight = 0;
	int ret;

	for (uint32_t i = 0; i < rd->qd && issued < n_ios; i++, issued++) {
		struct slot *s = &rd->slots[i];
		s->off = s_next_block(rd) * rd->bs;
		s->len = rd->bs;
		s->done = 0;
		if ((ret = s_queue(rd, i)))
			return ret;
		inflight++;
	}
	while (completed < n_ios) {
		struct io_uring_cqe *cqe;
		uint32_t i;
		int res;

		ret = io_uring_submit_and_wait(&rd->ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN) {
			ns_errf(err, errlen, "io_uring_submit_and_wait: %s", strerror(-ret));
			return ret;
		}
		while (io_uring_peek_cqe(&rd->ring, &cqe) == 0) {
			struct slot *s;

			i = (uint32_t)io_uring_cqe_get_data64(cqe);
			res = cqe->res;
			io_uring_cqe_seen(&rd->ring, cqe);
			if (i >= rd->qd) {
				ns_errf(err, errlen, "io_uring returned an unknown request %u", i);
				return -EIO;
			}
			s = &rd->slots[i];
			if (res == -EAGAIN || res == -EINTR) {
				if ((ret = s_queue(rd, i)))
					return ret;
				continue;
			}
			if (res < 0) {
				ns_errf(err, errlen, "O_DIRECT read of %" PRIu64 " bytes at offset %" PRIu64
					": %s", s->len, s->off, strerror(-res));
				return res;
			}
			if (res == 0 || (uint64_t)res > s->len ||
			    ((uint64_t)res < s->len && res % NS_DIRECT_ALIGN)) {
				ns_errf(err, errlen, "O_DIRECT read at offset %" PRIu64 " returned %d of %"
					PRIu64 " bytes", s->off, res, s->len);
				return -EIO;
			}
			if ((uint64_t)res < s->len) { /* short read: the rest, re-queued in place */
				s->off += (uint64_t)res;
				s->done += (uint64_t)res;
				s->len -= (uint64_t)res;
				if ((ret = s_queue(rd, i)))
					return ret;
				continue;
			}
			completed++;
			inflight--;
			if (issued < n_ios) {
				s->off = s_next_block(rd) * rd->bs;
				s->len = rd->bs;
				s->done = 0;
				if ((ret = s_queue(rd, i)))
					return ret;
				issued++;
				inflight++;
			}
		}
	}
	return inflight ? -EIO : 0;
}

static int s_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void ns_diskbw_opts_default(struct ns_diskbw_opts *o)
{
	*o = (struct ns_diskbw_opts){
		.block_bytes = 1ull << 20,
		.queue_depth = 16,
		.repeats = 3,
		.pass_bytes = 0,
		.pattern = NS_DISKBW_SEQ,
		.seed = 88172645463325252ull,
	};
}

static void s_reader_close(struct reader *rd)
{
	if (rd->slots)
		for (uint32_t i = 0; i < rd->qd; i++)
			free(rd->slots[i].buf);
	free(rd->slots);
	if (rd->ring_ok)
		io_uring_queue_exit(&rd->ring);
	if (rd->fd >= 0)
		close(rd->fd);
}

int ns_diskbw_measure(const char *path, const struct ns_diskbw_opts *o,
		      struct ns_diskbw_result *r, char *err, size_t errlen)
{
	struct reader rd = { .fd = -1 };
	struct stat st;
	uint64_t buf_total, pass, n_ios;
	double sorted[NS_DISKBW_MAX_REPEATS];
	int ret;

	memset(r, 0, sizeof(*r));
	if (!o->block_bytes || o->block_bytes % NS_DIRECT_ALIGN || o->block_bytes > UINT32_MAX / 2) {
		ns_errf(err, errlen, "block size %" PRIu64 " is not a positive multiple of %u below 2 GiB",
			o->block_bytes, NS_DIRECT_ALIGN);
		return -EINVAL;
	}
	if (!o->queue_depth || o->queue_depth > S_MAX_QD) {
		ns_errf(err, errlen, "queue depth %u is outside 1..%u", o->queue_depth, S_MAX_QD);
		return -EINVAL;
	}
	if (!o->repeats || o->repeats > NS_DISKBW_MAX_REPEATS) {
		ns_errf(err, errlen, "repeats %u is outside 1..%u", o->repeats, NS_DISKBW_MAX_REPEATS);
		return -EINVAL;
	}
	if (ns_mul_u64_overflow(o->block_bytes, o->queue_depth, &buf_total) ||
	    buf_total > S_MAX_BUFFER_BYTES) {
		ns_errf(err, errlen, "queue depth %u x block %" PRIu64 " bytes exceeds the 1 GiB of buffers "
			"allowed", o->queue_depth, o->block_bytes);
		return -EINVAL;
	}
	rd.fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (rd.fd < 0) {
		ret = -errno;
		ns_errf(err, errlen, "%s: cannot open with O_DIRECT: %s", path, strerror(errno));
		return ret;
	}
	if (fstat(rd.fd, &st)) {
		ret = -errno;
		ns_errf(err, errlen, "%s: fstat: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		ns_errf(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	r->file_bytes = (uint64_t)st.st_size;
	rd.bs = o->block_bytes;
	rd.n_blocks = r->file_bytes / rd.bs;
	if (!rd.n_blocks) {
		ns_errf(err, errlen, "%s: %" PRIu64 " bytes is smaller than one block of %" PRIu64,
			path, r->file_bytes, rd.bs);
		ret = -EINVAL;
		goto out;
	}
	pass = o->pass_bytes ? o->pass_bytes : NS_DISKBW_MIN_PASS_BYTES;
	if (!o->pass_bytes && pass > rd.n_blocks * rd.bs)
		pass = rd.n_blocks * rd.bs; /* the whole file */
	n_ios = pass / rd.bs + (pass % rd.bs != 0);
	r->pass_bytes = n_ios * rd.bs;
	rd.qd = o->queue_depth;
	rd.pattern = o->pattern;
	rd.cursor = o->pattern == NS_DISKBW_RAND ? (o->seed ? o->seed : 1) : 0;
	if ((ret = io_uring_queue_init(rd.qd, &rd.ring, 0)) < 0) {
		ns_errf(err, errlen, "io_uring_queue_init(%u): %s", rd.qd, strerror(-ret));
		goto out;
	}
	rd.ring_ok = true;
	rd.slots = calloc(rd.qd, sizeof(*rd.slots));
	if (!rd.slots) {
		ret = -ENOMEM;
		ns_errf(err, errlen, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < rd.qd; i++) {
		if (posix_memalign((void **)&rd.slots[i].buf, NS_DIRECT_ALIGN, rd.bs)) {
			ret = -ENOMEM;
			ns_errf(err, errlen, "out of memory for %u buffers of %" PRIu64 " bytes", rd.qd,
				rd.bs);
			goto out;
		}
	}
	/* pass 0 warms the ring, the drive and the file's extent map; it is dropped */
	for (uint32_t p = 0; p <= o->repeats; p++) {
		uint64_t t0 = ns_now_ns(), dt;

		if ((ret = s_pass(&rd, n_ios, err, errlen))) {
			if (ret == -EINVAL)
				ns_errf(err, errlen, "%s: the file system refuses O_DIRECT reads of %" PRIu64
					" bytes (EINVAL)", path, rd.bs);
			goto out;
		}
		dt = ns_now_ns() - t0;
		if (p)
			r->pass_bps[p - 1] = (double)r->pass_bytes / ((double)(dt ? dt : 1) / 1e9);
	}
	r->repeats = o->repeats;
	memcpy(sorted, r->pass_bps, o->repeats * sizeof(double));
	qsort(sorted, o->repeats, sizeof(double), s_cmp_double);
	r->min_bps = sorted[0];
	r->max_bps = sorted[o->repeats - 1];
	r->median_bps = o->repeats % 2 ? sorted[o->repeats / 2]
		: (sorted[o->repeats / 2 - 1] + sorted[o->repeats / 2]) / 2;
	ret = 0;
out:
	s_reader_close(&rd);
	return ret;
}
