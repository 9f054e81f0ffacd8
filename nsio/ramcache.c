/* ramcache.c - the RAM tier: plan windows loaded once, served by copy (see ramcache.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <unistd.h>

#include "gguf.h"
#include "ns_util.h"
#include "plan.h"
#include "plan_shm.h"
#include "ramcache.h"

static uint64_t s_n_rows(void *ctx, uint64_t tensor)
{
	const struct ns_model *m = ctx;

	return m->tensors[tensor].n_rows;
}

/* Read len bytes at file offset off of path into dst, chunk bytes per read, dropping the
 * page cache behind us so the load does not hold twice its size. */
static int s_load_span(int fd, uint8_t *dst, uint64_t off, uint64_t len, uint64_t chunk)
{
	uint64_t done = 0;

	while (done < len) {
		uint64_t want = len - done < chunk ? len - done : chunk;
		ssize_t n = pread(fd, dst + done, (size_t)want, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		posix_fadvise(fd, (off_t)(off + done), n, POSIX_FADV_DONTNEED);
		done += (uint64_t)n;
	}
	return 0;
}

/* Fill rc->rows / rc->off from a checked plan; returns the bytes needed. */
static uint64_t s_place(struct nsio_ram *rc, const struct ns_model *m,
			const struct nsplan_header *h, const struct nsplan_entry *e)
{
	uint64_t total = 0;

	for (uint64_t i = 0; i < h->n_entries; i++) {
		const struct ns_model_tensor *mt = &m->tensors[e[i].tensor];
		uint64_t bytes;

		if (e[i].tier != NSPLAN_RAM)
			continue;
		if (e[i].row_begin != 0) {
			rc->ignored++;
			continue;
		}
		/* row_end <= n_rows (checked), so this product is at most the tensor's size */
		bytes = e[i].row_end * mt->row_bytes;
		rc->rows[e[i].tensor] = e[i].row_end;
		rc->off[e[i].tensor] = total;
		total += bytes;
	}
	return total;
}

/* Create the segment for rc->size data bytes and its directory; owner: the session's. */
static int s_create_seg(struct nsio_ram *rc, const char *session, int32_t owner_pid,
			char *err, size_t errlen)
{
	uint64_t dir = 128 + sizeof(struct nsio_ram_dir), tabs, total;
	struct nsio_ram_dir *d;
	int r;

	if (ns_mul_u64_overflow(rc->n_tensors, 16, &tabs) ||
	    ns_add_u64_overflow(dir, tabs + 63, &dir) ||
	    ns_add_u64_overflow(dir / 64 * 64, rc->size, &total))
		return ns_errf(err, errlen, "RAM cache size overflows"), -EOVERFLOW;
	dir = dir / 64 * 64;
	ns_seg_unlink(session, NSIO_RAM_SEG_WHAT); /* a killed nsio's: same bytes, reloaded */
	r = ns_seg_create(&rc->seg, session, NSIO_RAM_SEG_WHAT, NSIO_RAM_SEG_KIND, total, err,
			  errlen);
	if (r)
		return r;
	snprintf(rc->session, sizeof(rc->session), "%s", session);
	((struct ns_seg_header *)rc->seg.base)->owner_pid = owner_pid;
	d = (struct nsio_ram_dir *)((uint8_t *)rc->seg.base + 128);
	d->magic = NSIO_RAM_MAGIC;
	d->n_tensors = rc->n_tensors;
	d->data_off = dir;
	d->data_bytes = rc->size;
	rc->base = (uint8_t *)rc->seg.base + dir;
	return 0;
}

/* Publish rows/off in the directory, then ready. */
static void s_publish(struct nsio_ram *rc)
{
	struct nsio_ram_dir *d = (struct nsio_ram_dir *)((uint8_t *)rc->seg.base + 128);
	uint64_t *tab = (uint64_t *)(d + 1);

	memcpy(tab, rc->rows, rc->n_tensors * sizeof(uint64_t));
	memcpy(tab + rc->n_tensors, rc->off, rc->n_tensors * sizeof(uint64_t));
	atomic_store_explicit(&d->ready, 1, memory_order_release);
}

int nsio_ram_load(struct nsio_ram *rc, const struct ns_model *m, const char *session,
		  int32_t owner_pid, uint64_t chunk_bytes, char *err, size_t errlen)
{
	struct ns_seg seg = { 0 };
	const struct nsplan_header *h;
	void *buf = NULL;
	size_t cap = 1u << 20, len = 0;
	int tries = 0, rc_ = nsplan_shm_open(&seg, session, err, errlen);

	if (rc_) /* absent, or nsplan is creating it (header not written yet): later */
		return -EAGAIN;
	for (;;) {
		void *nb = realloc(buf, cap);

		if (!nb) {
			rc_ = -ENOMEM;
			break;
		}
		buf = nb;
		rc_ = nsplan_shm_read(&seg, buf, cap, &len);
		if (rc_ == -ENOSPC && cap < (1u << 30)) {
			cap *= 2;
			continue;
		}
		if (rc_ != -EAGAIN || ++tries >= 1000) /* a writer stuck mid-publish: later */
			break;
	}
	ns_seg_unmap(&seg);
	if (rc_ == -ENOENT || rc_ == -EAGAIN) {
		free(buf);
		return -EAGAIN;
	}
	if (rc_ == 0)
		rc_ = nsplan_records_check(buf, len, m->n_tensors, s_n_rows, (void *)m, err, errlen);
	if (rc_) {
		free(buf);
		if (!err[0])
			ns_errf(err, errlen, "cannot read the plan: %s", strerror(-rc_));
		return rc_;
	}
	h = buf;
	if (h->ram_budget != rc->budget || h->ram_used > rc->budget) {
		ns_errf(err, errlen, "the plan's RAM budget (%llu, %llu used) is not nsio's "
			"--ram-budget %llu", (unsigned long long)h->ram_budget,
			(unsigned long long)h->ram_used, (unsigned long long)rc->budget);
		free(buf);
		return -EINVAL;
	}
	rc->n_tensors = m->n_tensors;
	rc->rows = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*rc->rows));
	rc->off = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*rc->off));
	if (!rc->rows || !rc->off) {
		free(buf);
		return -ENOMEM;
	}
	rc->size = s_place(rc, m, h, (const struct nsplan_entry *)((const uint8_t *)buf +
								   sizeof(*h)));
	free(buf);
	if (rc->size > rc->budget) {
		ns_errf(err, errlen, "RAM windows need %llu bytes, over --ram-budget %llu",
			(unsigned long long)rc->size, (unsigned long long)rc->budget);
		return -EINVAL;
	}
	if (rc->size) {
		int r = s_create_seg(rc, session, owner_pid, err, errlen);

		if (r) {
			rc->size = 0;
			return r;
		}
	}
	for (uint32_t sh = 0; sh < m->n_shards && rc->size; sh++) {
		int fd = open(m->shards[sh]->path, O_RDONLY | O_CLOEXEC), e = errno;

		if (fd < 0)
			return ns_errf(err, errlen, "cannot open %s: %s", m->shards[sh]->path,
				       strerror(e)), -e;
		for (uint64_t t = 0; t < m->n_tensors; t++) {
			const struct ns_model_tensor *mt = &m->tensors[t];
			int r;

			if (!rc->rows[t] || mt->shard != sh)
				continue;
			r = s_load_span(fd, rc->base + rc->off[t], mt->file_offset,
					rc->rows[t] * mt->row_bytes, chunk_bytes);
			if (r) {
				close(fd);
				return ns_errf(err, errlen, "cannot load %s into RAM: %s", mt->name,
					       strerror(-r)), r;
			}
		}
		close(fd);
	}
	if (rc->size)
		s_publish(rc);
	rc->resident_bytes = rc->size;
	rc->ready = true;
	return 0;
}

uint64_t nsio_ram_prefix(const struct nsio_ram *rc, uint32_t tensor, uint64_t row0,
			 uint64_t nrows, uint64_t row_bytes, const uint8_t **src)
{
	uint64_t have;

	if (!rc->base || tensor >= rc->n_tensors || row0 >= rc->rows[tensor])
		return 0;
	have = rc->rows[tensor] - row0;
	*src = rc->base + rc->off[tensor] + row0 * row_bytes;
	return have < nrows ? have : nrows;
}

void nsio_ram_destroy(struct nsio_ram *rc)
{
	if (rc->seg.base) {
		ns_seg_unmap(&rc->seg);
		ns_seg_unlink(rc->session, NSIO_RAM_SEG_WHAT);
	}
	free(rc->rows);
	free(rc->off);
	memset(rc, 0, sizeof(*rc));
}
