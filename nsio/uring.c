/* uring.c - nsio's io_uring: O_DIRECT shard files, registered files and buffers, chunk
 * submission and completion (short reads and -EAGAIN re-queued), and the doorbell. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "nsio.h"
#include "ns_util.h"
#include "ring.h"

#define S_FIXED_BUF_SPAN (1ull << 30) /* registered buffers are at most 1 GiB each */
#define S_MAX_STALLS 3 /* short reads in a row without aligned progress before -EIO */

static int s_open_shards(struct nsio *s)
{
	bool said = false;
	/* fault injection for tests: behave as if O_DIRECT were refused (pre-6.6 tmpfs) */
	bool fake_einval = getenv("NS_NSIO_FAULT_NO_DIRECT") != NULL;

	/* and: O_DIRECT reads of more than 8 KiB complete 1000 bytes short, at an unaligned
	 * count, as a filesystem may; the rest must be read again from an aligned offset.
	 * "tiny": a chunk's first read completes with 512 bytes, under the alignment, in the
	 * middle of the file; the read must be tried again, not failed. */
	const char *fault = getenv("NS_NSIO_FAULT_SHORT_READ");

	s->fault_short_read = !fault ? NSIO_FAULT_NONE : !strcmp(fault, "tiny") ?
			      NSIO_FAULT_TINY : NSIO_FAULT_UNALIGNED;

	s->fds = calloc(s->model->n_shards, sizeof(int));
	if (!s->fds)
		return -ENOMEM;
	s->direct = !s->o.no_direct;
	for (uint32_t i = 0; i < s->model->n_shards; i++) {
		const char *path = s->model->shards[i]->path;
		char err[NS_ERR_LEN], self[64];
		int fd = ns_open_regular(path, O_RDONLY, err, sizeof(err)), dfd = -1;

		if (fd < 0) {
			fprintf(stderr, "nsio: %s\n", err);
			return fd;
		}
		if (!s->o.no_direct) {
			/* the file just checked, reopened for O_DIRECT through its descriptor (not
			 * its name, which may meanwhile name something else) */
			snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
			dfd = open(self, O_RDONLY | O_DIRECT | O_CLOEXEC);
			if (dfd >= 0 && fake_einval) {
				close(dfd);
				dfd = -1;
				errno = EINVAL;
			}
			if (dfd < 0 && errno == EINVAL) {
				if (!said && !s->o.quiet)
					printf("nsio: O_DIRECT refused on %s (tmpfs?): using "
					       "buffered reads\n", path);
				said = true;
				s->direct = false;
			}
		}
		if (dfd >= 0) {
			close(fd);
			fd = dfd;
		}
		s->fds[i] = fd;
	}
	if (s->o.no_direct)
		s->direct = false;
	/* rows a checkpoint's converter would rewrite are made by ns_model_read_rows, which
	 * reads at any offset: descriptors without O_DIRECT for them */
	for (uint64_t t = 0; t < s->model->n_tensors && !s->bfds; t++) {
		char err[NS_ERR_LEN];

		if (s->model->tensors[t].src && ns_model_open_fds(s->model, &s->bfds, err,
								  sizeof(err))) {
			fprintf(stderr, "nsio: %s\n", err);
			return -EIO;
		}
	}
	/* mixed: keep every shard the same way so alignment rules are uniform */
	if (!s->direct && !s->o.no_direct) {
		for (uint32_t i = 0; i < s->model->n_shards; i++) {
			int fl = fcntl(s->fds[i], F_GETFL);
			if (fl >= 0 && (fl & O_DIRECT))
				fcntl(s->fds[i], F_SETFL, fl & ~O_DIRECT);
		}
	}
	atomic_store(&s->ctl->direct, s->direct ? 1 : 0);
	return 0;
}

static void *s_bell_thread(void *arg)
{
	struct nsio *s = arg;
	uint32_t seen = atomic_load(&s->ctl->doorbell);
	uint64_t one = 1;

	while (!atomic_load(&s->bell_stop)) {
		uint32_t now = atomic_load(&s->ctl->doorbell);

		if (now != seen) {
			seen = now;
			if (write(s->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
				break;
			continue;
		}
		ns_futex_wait(&s->ctl->doorbell, seen, 100000000ull);
	}
	return NULL;
}

int nsio_arm_doorbell(struct nsio *s)
{
	struct io_uring_sqe *sqe;

	if (s->efd_armed)
		return 0;
	sqe = io_uring_get_sqe(&s->ring);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_read(sqe, s->efd, &s->efd_buf, sizeof(s->efd_buf), 0);
	io_uring_sqe_set_data64(sqe, NSIO_UD_DOORBELL);
	s->efd_armed = true;
	s->need_submit = true;
	return 0;
}

int nsio_uring_setup(struct nsio *s)
{
	struct io_uring_params p = { 0 };
	uint64_t cap = s->ctl->arena_bytes;
	int rc;

	rc = s_open_shards(s);
	if (rc)
		return 1;
	rc = io_uring_queue_init_params(s->o.queue_depth + 4, &s->ring, &p);
	if (rc < 0) {
		fprintf(stderr, "nsio: io_uring_queue_init: %s\n", strerror(-rc));
		return 1;
	}
	s->ring_ok = true;
	if (io_uring_register_files(&s->ring, s->fds, s->model->n_shards) == 0)
		s->fixed_files = true;
	{
		uint64_t n = (cap + S_FIXED_BUF_SPAN - 1) / S_FIXED_BUF_SPAN;
		struct iovec *iov = calloc(n, sizeof(*iov));

		if (iov) {
			for (uint64_t i = 0; i < n; i++) {
				uint64_t off = i * S_FIXED_BUF_SPAN;
				iov[i].iov_base = s->sess->arena + off;
				iov[i].iov_len = cap - off < S_FIXED_BUF_SPAN ? cap - off
									    : S_FIXED_BUF_SPAN;
			}
			if (n <= 1024 && io_uring_register_buffers(&s->ring, iov, (unsigned)n) == 0) {
				s->fixed_bufs = true;
				s->fixed_buf_span = S_FIXED_BUF_SPAN;
			}
			free(iov);
		}
	}
	s->efd = eventfd(0, EFD_CLOEXEC);
	if (s->efd < 0) {
		fprintf(stderr, "nsio: eventfd: %s\n", strerror(errno));
		return 1;
	}
	rc = pthread_create(&s->bell, NULL, s_bell_thread, s);
	if (rc) {
		fprintf(stderr, "nsio: doorbell thread: %s\n", strerror(rc));
		return 1;
	}
	s->bell_started = true;
	return nsio_arm_doorbell(s) ? 1 : 0;
}

/* Queue chunk c (or re-queue it after a short read) at the tail of the submission list. */
static void s_chunk_push(struct nsio *s, struct nsio_chunk *c)
{
	c->next = NULL;
	if (s->chunkq_tail)
		s->chunkq_tail->next = c;
	else
		s->chunkq = c;
	s->chunkq_tail = c;
}

int nsio_queue_chunks(struct nsio *s, struct nsio_req *r)
{
	uint64_t pos = r->disk_pos, bb = s->o.block_bytes; /* rows before it came from RAM */
	uint64_t lease_off = ns_ctl_leases(s->ctl)[r->lease].off;

	r->chunks_left = 0;
	while (pos < r->len) {
		uint64_t end = pos + bb < r->len ? pos + bb : r->len;
		struct nsio_chunk *c = s->chunk_free;

		if (s->fixed_bufs) { /* never straddle a registered buffer */
			uint64_t a = lease_off + pos, lim = (a / s->fixed_buf_span + 1) *
							   s->fixed_buf_span;
			if (lease_off + end > lim)
				end = lim - lease_off;
		}
		if (c)
			s->chunk_free = c->next;
		else if (!(c = malloc(sizeof(*c))))
			return -ENOMEM;
		c->req = r;
		c->pos = pos;
		c->end = end;
		c->stalls = 0;
		s_chunk_push(s, c);
		r->chunks_left++;
		pos = end;
	}
	return 0;
}

int nsio_submit_chunks(struct nsio *s)
{
	int queued = 0;

	while (s->chunkq && s->inflight < s->o.queue_depth) {
		struct nsio_chunk *c = s->chunkq;
		struct nsio_req *r = c->req;
		struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
		uint64_t lease_off = ns_ctl_leases(s->ctl)[r->lease].off;
		uint8_t *buf = s->sess->arena + lease_off + c->pos;
		unsigned len = (unsigned)(c->end - c->pos);
		uint64_t foff = r->file_off + c->pos;
		int fd = s->fixed_files ? (int)r->shard : s->fds[r->shard];

		if (!sqe)
			break;
		s->chunkq = c->next;
		if (!s->chunkq)
			s->chunkq_tail = NULL;
		if (s->fixed_bufs)
			io_uring_prep_read_fixed(sqe, fd, buf, len, foff,
						 (int)((lease_off + c->pos) / s->fixed_buf_span));
		else
			io_uring_prep_read(sqe, fd, buf, len, foff);
		if (s->fixed_files)
			sqe->flags |= IOSQE_FIXED_FILE;
		io_uring_sqe_set_data(sqe, c);
		s->inflight++;
		queued++;
	}
	if (queued || s->need_submit) {
		int rc = io_uring_submit(&s->ring);

		s->need_submit = false;
		if (rc < 0 && rc != -EAGAIN && rc != -EINTR && rc != -EBUSY)
			return rc;
	}
	return queued;
}

static void s_chunk_finish(struct nsio *s, struct nsio_chunk *c, int status)
{
	struct nsio_req *r = c->req;

	if (status < 0 && r->status == 0)
		r->status = status;
	c->next = s->chunk_free;
	s->chunk_free = c;
	if (--r->chunks_left == 0)
		nsio_req_done(s, r);
}

/* Explain the first failed read on stderr (the request fails with status, which the client
 * reports against its tensor): which file and bytes, and where the file ends now when it
 * ended before them (a model truncated or rewritten while nsio serves it). */
static void s_say_read_error(struct nsio *s, const struct nsio_chunk *c, int status)
{
	const struct nsio_req *r = c->req;
	const struct ns_model_tensor *t = &s->model->tensors[r->tensor];
	const char *path = s->model->shards[r->shard]->path;
	uint64_t a = r->file_off + r->first, b = r->file_off + r->want_end;
	struct stat st;

	if (s->said_read_err)
		return;
	s->said_read_err = true;
	if (status == -EIO && fstat(s->fds[r->shard], &st) == 0 && (uint64_t)st.st_size < b)
		fprintf(stderr, "nsio: %s: %s rows %llu..%llu need bytes %llu..%llu but the file "
			"now ends at %lld (truncated while in use?)\n", path, t->name,
			(unsigned long long)r->row0, (unsigned long long)(r->row0 + r->nrows),
			(unsigned long long)a, (unsigned long long)b, (long long)st.st_size);
	else
		fprintf(stderr, "nsio: %s: reading %s rows %llu..%llu (bytes %llu..%llu): %s\n",
			path, t->name, (unsigned long long)r->row0,
			(unsigned long long)(r->row0 + r->nrows), (unsigned long long)a,
			(unsigned long long)b, strerror(-status));
}

void nsio_handle_cqe(struct nsio *s, struct io_uring_cqe *cqe)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	struct nsio_chunk *c;
	uint64_t start;
	int res = cqe->res;

	if (ud == NSIO_UD_DOORBELL) {
		s->efd_armed = false;
		nsio_arm_doorbell(s);
		return;
	}
	c = (struct nsio_chunk *)(uintptr_t)ud;
	s->inflight--;
	if (res == -EAGAIN || res == -EINTR) {
		atomic_fetch_add(&s->ctl->stats.eagain, 1);
		s_chunk_push(s, c);
		return;
	}
	if (res < 0) {
		s_say_read_error(s, c, res);
		s_chunk_finish(s, c, res);
		return;
	}
	atomic_fetch_add(&s->ctl->stats.reads, 1);
	atomic_fetch_add(&s->ctl->stats.bytes_device, (uint64_t)res);
	if (res == 0) { /* end of file: fine once the wanted bytes are in */
		if (c->pos < c->req->want_end)
			s_say_read_error(s, c, -EIO);
		s_chunk_finish(s, c, c->pos >= c->req->want_end ? 0 : -EIO);
		return;
	}
	/* test hooks: as if the read had stopped at an unaligned count / under one block */
	if (s->direct && res > 8192 && s->fault_short_read == NSIO_FAULT_UNALIGNED)
		res -= 1000;
	if (s->direct && res > 512 && !c->stalls && s->fault_short_read == NSIO_FAULT_TINY)
		res = 512;
	start = c->pos;
	c->pos += (uint64_t)res;
	if (c->pos < c->end) {
		const uint64_t align = s->direct && s->ctl->align ? s->ctl->align : 1;

		atomic_fetch_add(&s->ctl->stats.short_reads, 1);
		if (c->pos >= c->req->want_end) { /* the rest lies past the wanted bytes */
			s_chunk_finish(s, c, 0);
			return;
		}
		/* O_DIRECT reads must start on the alignment (file offset and buffer: file_off,
		 * the lease and every chunk start are aligned): continue from the aligned
		 * offset at or below the position, reading the same file bytes again into the
		 * same place. No aligned progress: either the read stopped inside the last
		 * block of the file, which ends before the wanted bytes (as res == 0 above), or
		 * the filesystem returned less than a block for now; the same read is tried
		 * again, and only S_MAX_STALLS in a row make it an error. */
		c->pos = c->pos / align * align;
		if (c->pos <= start) {
			c->pos = start;
			if (++c->stalls > S_MAX_STALLS) {
				s_say_read_error(s, c, -EIO);
				s_chunk_finish(s, c, -EIO);
				return;
			}
		} else {
			c->stalls = 0;
		}
		s_chunk_push(s, c);
		return;
	}
	s_chunk_finish(s, c, 0);
}
