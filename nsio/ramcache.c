/* ramcache.c - the RAM tier: plan windows filled through the arena, served by copy, replaced
 * by later plan generations (see ramcache.h). */
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <unistd.h>

#include "arena.h"
#include "layout.h"
#include "ns_util.h"
#include "plan.h"
#include "plan_shm.h"
#include "ramcache.h"


static uint64_t s_n_rows(void *ctx, uint64_t tensor)
{
	const struct ns_model *m = ctx;

	return m->tensors[tensor].n_rows;
}

static int s_win_cmp(const void *a, const void *b)
{
	const struct nsio_ram_win *x = a, *y = b;

	if (x->tensor != y->tensor)
		return x->tensor < y->tensor ? -1 : 1;
	return x->row0 < y->row0 ? -1 : x->row0 > y->row0;
}

/* Sort rc->win and rebuild rc->first. */
static void s_index(struct nsio_ram *rc)
{
	uint64_t i = 0;

	qsort(rc->win, rc->n_win, sizeof(*rc->win), s_win_cmp);
	for (uint64_t t = 0; t <= rc->n_tensors; t++) {
		while (i < rc->n_win && rc->win[i].tensor < t)
			i++;
		rc->first[t] = i;
	}
}

/* Copy the current plan out of the mapped plan segment into *buf (malloc'd, *len bytes) and
 * check it against m. -EAGAIN while a publish races us or none was made yet. */
static int s_read_plan(struct nsio_ram *rc, const struct ns_model *m, void **buf, size_t *len,
		       char *err, size_t errlen)
{
	size_t cap = 1u << 20;
	int tries = 0, r;

	*buf = NULL;
	for (;;) {
		void *nb = realloc(*buf, cap);

		if (!nb) {
			r = -ENOMEM;
			break;
		}
		*buf = nb;
		r = nsplan_shm_read(&rc->plan, *buf, cap, len);
		if (r == -ENOSPC && cap < (1u << 30)) {
			cap *= 2;
			continue;
		}
		if (r != -EAGAIN || ++tries >= 1000) /* a writer stuck mid-publish: later */
			break;
	}
	if (r == -ENOENT)
		r = -EAGAIN;
	if (r == 0)
		r = nsplan_records_check(*buf, *len, m->n_tensors, s_n_rows, (void *)m, err, errlen);
	if (r) {
		free(*buf);
		*buf = NULL;
		if (r != -EAGAIN && !err[0])
			ns_errf(err, errlen, "cannot read the plan: %s", strerror(-r));
	}
	return r;
}

/* Create the segment (data capacity rc->size) with compute's table; dir.ready follows once
 * the fixed windows are in. */
static int s_create_seg(struct nsio_ram *rc, const char *session, char *err, size_t errlen)
{
	int r;

	ns_seg_unlink(session, NS_RAM_SEG_WHAT); /* a killed nsio's: same bytes, reloaded */
	r = ns_ram_seg_create(&rc->seg, session, rc->n_tensors, rc->rows, rc->off, rc->size, err,
			      errlen);
	if (r)
		return r;
	snprintf(rc->session, sizeof(rc->session), "%s", session);
	rc->dir = rc->seg.dir;
	rc->base = rc->seg.data;
	return 0;
}

/* Bytes of rows [row0, row1) of tensor t (checked against the model by records_check). */
static uint64_t s_win_bytes(const struct ns_model *m, uint32_t t, uint64_t row0, uint64_t row1)
{
	return (row1 - row0) * m->tensors[t].row_bytes;
}

/* First generation: every RAM window, fixed ones first in data, all queued for filling. */
static int s_apply_first(struct nsio_ram *rc, const struct ns_model *m,
			 const struct nsplan_header *h, const struct nsplan_entry *e,
			 const char *session, char *err, size_t errlen)
{
	uint64_t n = 0, pos = 0;
	int r;

	for (uint64_t i = 0; i < h->n_entries; i++)
		n += e[i].tier == NSPLAN_RAM;
	rc->n_tensors = m->n_tensors;
	rc->rows = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*rc->rows));
	rc->off = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*rc->off));
	rc->first = calloc(m->n_tensors + 1, sizeof(*rc->first));
	rc->win = calloc(n ? n : 1, sizeof(*rc->win));
	if (!rc->rows || !rc->off || !rc->first || !rc->win)
		return -ENOMEM;
	for (int pass = 0; pass < 2; pass++) { /* fixed windows, then expert windows */
		for (uint64_t i = 0; i < h->n_entries; i++) {
			const struct nsplan_entry *x = &e[i];
			bool expert = x->expert != NSPLAN_NO_EXPERT;
			struct nsio_ram_win *w;

			if (x->tier != NSPLAN_RAM || expert != (pass == 1))
				continue;
			w = &rc->win[rc->n_win++];
			*w = (struct nsio_ram_win){ .tensor = x->tensor, .expert = expert,
						    .row0 = x->row_begin, .row1 = x->row_end,
						    .off = pos };
			w->bytes = s_win_bytes(m, x->tensor, x->row_begin, x->row_end);
			pos += w->bytes; /* the plan's RAM bytes: at most its budget, checked */
			if (!expert && !x->row_begin) {
				rc->rows[x->tensor] = x->row_end;
				rc->off[x->tensor] = w->off;
			}
			if (pass == 0)
				rc->fixed_end = pos;
		}
	}
	if (pos > rc->budget)
		return ns_errf(err, errlen, "RAM windows need %llu bytes, over --ram-budget %llu",
			       (unsigned long long)pos, (unsigned long long)rc->budget), -EINVAL;
	s_index(rc);
	rc->size = rc->budget; /* later generations may place more experts (pages untouched
				* until filled cost nothing) */
	if (!n) /* nothing resident: no segment */
		return 0;
	r = s_create_seg(rc, session, err, errlen);
	if (r == 0) /* every window, none loaded yet: the fill's goal */
		atomic_store(&rc->dir->planned_bytes, pos);
	return r;
}

/* The complete expert window of rc holding exactly rows [row0, row1) of t, or NULL. */
static struct nsio_ram_win *s_find_exact(struct nsio_ram *rc, uint32_t t, uint64_t row0,
					 uint64_t row1)
{
	for (uint64_t i = rc->first[t]; i < rc->first[t + 1]; i++) {
		struct nsio_ram_win *w = &rc->win[i];

		if (w->row0 == row0 && w->row1 == row1 && w->ready && w->expert)
			return w;
		if (w->row0 > row0)
			break;
	}
	return NULL;
}

static int s_off_cmp(const void *a, const void *b)
{
	const struct nsio_ram_win *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* A later generation: keep the fixed windows; expert windows it keeps move down to pack the
 * expert area (in ascending offset order, so every move is to a lower or equal offset and
 * overwrites only dropped or already moved bytes), the dropped ones go, the new ones are
 * appended and queued. */
static int s_apply_next(struct nsio_ram *rc, const struct ns_model *m,
			const struct nsplan_header *h, const struct nsplan_entry *e)
{
	struct nsio_ram_win *nw;
	uint64_t n = 0, k = 0, pos = rc->fixed_end, fixed = 0, same = 0, kept = 0, dropped = 0;
	uint64_t fixed_new = 0, planned;

	for (uint64_t i = 0; i < h->n_entries; i++)
		n += e[i].tier == NSPLAN_RAM;
	for (uint64_t i = 0; i < rc->n_win; i++)
		fixed += !rc->win[i].expert;
	nw = calloc(n + fixed + 1, sizeof(*nw));
	if (!nw)
		return -ENOMEM;
	/* the fixed set stays as it is; does the new plan agree? */
	for (uint64_t i = 0; i < rc->n_win; i++)
		if (!rc->win[i].expert)
			nw[k++] = rc->win[i];
	for (uint64_t i = 0; i < h->n_entries; i++) {
		const struct nsplan_entry *x = &e[i];

		if (x->tier != NSPLAN_RAM || x->expert != NSPLAN_NO_EXPERT)
			continue;
		fixed_new++;
		for (uint64_t j = 0; j < fixed; j++)
			same += nw[j].tensor == x->tensor && nw[j].row0 == x->row_begin &&
				nw[j].row1 == x->row_end;
	}
	if ((same != fixed || fixed_new != fixed) && !rc->said_fixed) {
		fprintf(stderr, "nsio: plan generation %u places non-expert windows differently; "
			"keeping the first generation's (compute reads them in place)\n",
			h->generation);
		rc->said_fixed = true;
	}
	/* kept expert windows, in ascending offset order, packed after the fixed ones */
	qsort(rc->win, rc->n_win, sizeof(*rc->win), s_off_cmp);
	for (uint64_t i = 0; i < rc->n_win; i++) {
		struct nsio_ram_win *w = &rc->win[i];
		bool keep = false;

		if (!w->expert)
			continue;
		for (uint64_t j = 0; j < h->n_entries && w->ready && !keep; j++)
			keep = e[j].tier == NSPLAN_RAM && e[j].expert != NSPLAN_NO_EXPERT &&
			       e[j].tensor == w->tensor && e[j].row_begin == w->row0 &&
			       e[j].row_end == w->row1;
		if (!keep) {
			dropped += w->ready ? w->bytes : 0;
			continue;
		}
		if (w->off != pos)
			memmove(rc->base + pos, rc->base + w->off, (size_t)w->bytes);
		nw[k] = *w;
		nw[k++].off = pos;
		pos += w->bytes;
		kept += w->bytes;
	}
	/* restore lookup order of the old table for s_find_exact below */
	s_index(rc);
	for (uint64_t i = 0; i < h->n_entries; i++) {
		const struct nsplan_entry *x = &e[i];
		uint64_t bytes;

		if (x->tier != NSPLAN_RAM || x->expert == NSPLAN_NO_EXPERT ||
		    s_find_exact(rc, x->tensor, x->row_begin, x->row_end))
			continue;
		bytes = s_win_bytes(m, x->tensor, x->row_begin, x->row_end);
		if (bytes > rc->size - pos) { /* only when the fixed set disagreed */
			rc->ignored++;
			continue;
		}
		nw[k++] = (struct nsio_ram_win){ .tensor = x->tensor, .expert = true,
						 .row0 = x->row_begin, .row1 = x->row_end,
						 .off = pos, .bytes = bytes };
		pos += bytes;
	}
	free(rc->win);
	rc->win = nw;
	rc->n_win = k;
	s_index(rc);
	rc->resident_bytes = 0;
	planned = 0;
	for (uint64_t i = 0; i < k; i++) {
		rc->resident_bytes += nw[i].ready ? nw[i].bytes : 0;
		planned += nw[i].bytes;
	}
	atomic_store(&rc->dir->planned_bytes, planned); /* before resident: a reader never sees
							 * more loaded than planned */
	atomic_store(&rc->dir->resident_bytes, rc->resident_bytes);
	atomic_fetch_add(&rc->dir->kept_bytes, kept);
	atomic_fetch_add(&rc->dir->dropped_bytes, dropped);
	return 0;
}

int nsio_ram_poll(struct nsio_ram *rc, const struct ns_model *m, const char *session,
		  char *err, size_t errlen)
{
	const struct nsplan_header *h;
	const struct nsplan_seg_ctl *c;
	void *buf = NULL;
	size_t len = 0;
	uint32_t seq;
	int r;

	err[0] = 0;
	if (!rc->plan.base && (r = nsplan_shm_open(&rc->plan, session, err, errlen)))
		return r == -EPERM ? r : -EAGAIN; /* not ours; or absent, or nsplan is creating
						   * it (header not written yet) */
	c = (const struct nsplan_seg_ctl *)((const uint8_t *)rc->plan.base +
					    sizeof(struct ns_seg_header));
	seq = atomic_load_explicit(&((struct nsplan_seg_ctl *)c)->seq, memory_order_acquire);
	if (rc->plan_gen && seq == rc->plan_seq)
		return 0;
	r = s_read_plan(rc, m, &buf, &len, err, errlen);
	if (r)
		return r;
	rc->plan_seq = seq;
	h = buf;
	if (h->generation == rc->plan_gen) {
		free(buf);
		return 0;
	}
	if (h->ram_budget != rc->budget || h->ram_used > rc->budget) {
		ns_errf(err, errlen, "the plan's RAM budget (%llu, %llu used) is not nsio's "
			"--ram-budget %llu", (unsigned long long)h->ram_budget,
			(unsigned long long)h->ram_used, (unsigned long long)rc->budget);
		free(buf);
		return -EINVAL;
	}
	if (!rc->plan_gen)
		r = s_apply_first(rc, m, h, (const struct nsplan_entry *)(h + 1), session, err,
				  errlen);
	else if (rc->dir)
		r = s_apply_next(rc, m, h, (const struct nsplan_entry *)(h + 1));
	else /* the first generation had nothing in RAM: no segment, nothing to change */
		r = 0;
	if (r == 0) {
		rc->plan_gen = h->generation ? h->generation : 1;
		rc->fill_idx = rc->fill_pos = 0;
		rc->filling = rc->dir != NULL;
		if (rc->dir)
			atomic_fetch_add(&rc->dir->generations, 1);
	}
	free(buf);
	return r < 0 ? r : 1;
}

/* Read [a0, a0 + len) of fd into buf on the fill's ring until want bytes are in (short reads
 * continue, end of file before want is -EIO). Adds device bytes and reads to dir. */
static int s_read(struct nsio_ram *rc, int fd, uint8_t *buf, uint64_t a0, uint64_t len,
		  uint64_t want)
{
	uint64_t got = 0;

	if (!rc->ring) {
		struct io_uring *ring = calloc(1, sizeof(*ring));
		int r = ring ? io_uring_queue_init(2, ring, 0) : -ENOMEM;

		if (r < 0) {
			free(ring);
			return r;
		}
		rc->ring = ring;
	}
	while (got < want) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(rc->ring);
		struct io_uring_cqe *cqe;
		int r, res;

		if (!sqe)
			return -EBUSY;
		io_uring_prep_read(sqe, fd, buf + got, (unsigned)(len - got), a0 + got);
		r = io_uring_submit_and_wait(rc->ring, 1);
		if (r < 0 && r != -EINTR)
			return r;
		do
			r = io_uring_wait_cqe(rc->ring, &cqe);
		while (r == -EINTR);
		if (r < 0)
			return r;
		res = cqe->res;
		io_uring_cqe_seen(rc->ring, cqe);
		if (res == -EAGAIN || res == -EINTR)
			continue;
		if (res < 0)
			return res;
		if (res == 0)
			return -EIO; /* end of file before the window's end */
		atomic_fetch_add(&rc->dir->fill_reads, 1);
		atomic_fetch_add(&rc->dir->fill_device, (uint64_t)res);
		got += (uint64_t)res;
	}
	return 0;
}

static bool s_fixed_ready(const struct nsio_ram *rc);

/* The window being filled is complete. */
static void s_window_done(struct nsio_ram *rc, struct nsio_ram_win *w)
{
	w->ready = true;
	rc->resident_bytes += w->bytes;
	atomic_store(&rc->dir->resident_bytes, rc->resident_bytes);
	rc->fill_idx++;
	rc->fill_pos = 0;
	/* compute may use its table once every fixed window is in (win is sorted by tensor, so
	 * expert windows come between fixed ones) */
	if (!w->expert && s_fixed_ready(rc))
		ns_ram_seg_ready(&rc->seg);
}

/* One step of a window of a checkpoint tensor whose rows the converter rewrites: at most one
 * chunk of rows made by ns_model_read_rows straight into the segment (no lease: the reads are
 * buffered and land where they belong). Returns 1, or -errno with a line. */
static int s_fill_made(struct nsio_ram *rc, const struct ns_model *m,
		       const struct nsio_ram_io *io, struct nsio_ram_win *w,
		       const struct ns_model_tensor *mt, char *err, size_t errlen)
{
	uint64_t done = rc->fill_pos / mt->row_bytes, rows = w->bytes / mt->row_bytes;
	uint64_t step = io->chunk / mt->row_bytes ? io->chunk / mt->row_bytes : 1;
	int r;

	if (step > rows - done)
		step = rows - done;
	r = ns_model_read_rows(m, io->bfds, mt, w->row0 + done, step,
			       rc->base + w->off + rc->fill_pos);
	if (r)
		return ns_errf(err, errlen, "cannot load %s into RAM: %s", mt->name,
			       strerror(-r)), r;
	atomic_fetch_add(&rc->dir->fill_reads, 1);
	atomic_fetch_add(&rc->dir->fill_device, step * mt->src->row_bytes);
	atomic_fetch_add(&rc->dir->fill_bytes, step * mt->row_bytes);
	rc->fill_pos += step * mt->row_bytes;
	if (rc->fill_pos == w->bytes)
		s_window_done(rc, w);
	return 1;
}

/* True once every fixed (non-expert) window is complete. */
static bool s_fixed_ready(const struct nsio_ram *rc)
{
	for (uint64_t i = 0; i < rc->n_win; i++)
		if (!rc->win[i].expert && !rc->win[i].ready)
			return false;
	return true;
}

int nsio_ram_fill_step(struct nsio_ram *rc, const struct ns_model *m,
		       const struct nsio_ram_io *io, char *err, size_t errlen)
{
	const uint32_t align = io->ctl->align ? io->ctl->align : 1;
	const struct ns_model_tensor *mt;
	struct nsio_ram_win *w;
	uint64_t fo, fend, a0, aend, cap, alen, want, lo, cur;
	uint32_t idx, shard;
	int r;

	if (!rc->filling)
		return 0;
	while (rc->fill_idx < rc->n_win && rc->win[rc->fill_idx].ready) {
		rc->fill_idx++;
		rc->fill_pos = 0;
	}
	if (rc->fill_idx == rc->n_win) {
		rc->filling = false;
		ns_ram_seg_ready(&rc->seg);
		atomic_store(&rc->dir->plan_gen, rc->plan_gen);
		return 0;
	}
	w = &rc->win[rc->fill_idx];
	mt = &m->tensors[w->tensor];
	if (!ns_model_rows_plain(mt, w->row0, w->bytes / mt->row_bytes, &shard, &fo))
		return s_fill_made(rc, m, io, w, mt, err, errlen);
	/* file range of the rest of the window; the plan was checked against the model, whose
	 * tensors lie inside their files, so none of this overflows */
	fend = fo + w->bytes;
	fo += rc->fill_pos;
	a0 = fo / align * align;
	if (ns_add_u64_overflow(fend, align - 1, &aend))
		return ns_errf(err, errlen, "%s: file offset overflows", mt->name), -EOVERFLOW;
	aend = aend / align * align;
	cap = (io->chunk < (1ull << 30) ? io->chunk : (1ull << 30)) / align * align; /* one read */
	if (cap < align)
		cap = align; /* a lease of one alignment unit always moves forward */
	alen = aend - a0 < cap ? aend - a0 : cap;
	r = ns_arena_alloc(io->ctl, alen, NS_OWNER_NONE, 0, 0, &idx);
	if (r == -EAGAIN)
		return -EAGAIN;
	if (r)
		return ns_errf(err, errlen, "no arena lease of %llu bytes for the RAM fill: %s",
			       (unsigned long long)alen, strerror(-r)), r;
	lo = fend - a0 < alen ? fend - a0 : alen; /* wanted bytes end, from a0 */
	cur = ns_ctl_leases(io->ctl)[idx].off;
	r = s_read(rc, io->fds[shard], io->arena + cur, a0, alen, lo);
	if (r == 0) {
		want = lo - (fo - a0);
		memcpy(rc->base + w->off + rc->fill_pos, io->arena + cur + (fo - a0), (size_t)want);
		rc->fill_pos += want;
		atomic_fetch_add(&rc->dir->fill_bytes, want);
		if (alen > atomic_load(&rc->dir->fill_lease_max))
			atomic_store(&rc->dir->fill_lease_max, alen);
	}
	ns_arena_release(io->ctl, idx);
	if (r)
		return ns_errf(err, errlen, "cannot load %s into RAM: %s", mt->name,
			       strerror(-r)), r;
	if (rc->fill_pos == w->bytes)
		s_window_done(rc, w);
	return 1;
}

uint64_t nsio_ram_prefix(const struct nsio_ram *rc, uint32_t tensor, uint64_t row0,
			 uint64_t nrows, uint64_t row_bytes, const uint8_t **src)
{
	uint64_t lo, hi, have;
	const struct nsio_ram_win *w;

	if (!rc->base || !rc->win || tensor >= rc->n_tensors)
		return 0;
	lo = rc->first[tensor];
	hi = rc->first[tensor + 1];
	while (hi - lo > 1) { /* last window of tensor with row0 <= the request's row0 */
		uint64_t mid = lo + (hi - lo) / 2;

		if (rc->win[mid].row0 <= row0)
			lo = mid;
		else
			hi = mid;
	}
	if (lo >= rc->first[tensor + 1])
		return 0;
	w = &rc->win[lo];
	if (!w->ready || w->row0 > row0 || row0 >= w->row1)
		return 0;
	have = w->row1 - row0;
	*src = rc->base + w->off + (row0 - w->row0) * row_bytes;
	return have < nrows ? have : nrows;
}

void nsio_ram_destroy(struct nsio_ram *rc)
{
	if (rc->seg.seg.base) {
		ns_seg_unmap(&rc->seg.seg);
		ns_seg_unlink(rc->session, NS_RAM_SEG_WHAT);
	}
	if (rc->plan.base)
		ns_seg_unmap(&rc->plan);
	if (rc->ring) {
		io_uring_queue_exit(rc->ring);
		free(rc->ring);
	}
	free(rc->rows);
	free(rc->off);
	free(rc->win);
	free(rc->first);
	memset(rc, 0, sizeof(*rc));
}
