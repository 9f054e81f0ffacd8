/* resident.c - see resident.h. */
#include "resident.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "ns_util.h"
#include "plan_shm.h" /* nsplan's plan.h with it (nsrouter's own plan.h is another file) */

#define S_LOOK_NS 100000000ull /* 100 ms between looks at the plan segment */

/* Rows [row0, row1) of tensor in RAM: adjacent RAM windows of one tensor merged. */
struct s_win {
	uint32_t tensor;
	uint64_t row0, row1;
};

struct ns_rres {
	const struct ns_model *m; /* borrowed */
	char session[64];
	struct ns_seg seg;        /* the plan segment once found (base NULL before) */
	bool have_seq;
	uint32_t seq;             /* seqlock value of the plan we hold */
	uint64_t t_look;
	struct s_win *win;        /* n_win, sorted by (tensor, row0), owned */
	uint64_t n_win;
	uint64_t bytes;
	uint32_t generation;
	void *buf;                /* scratch for plan copies, cap bytes */
	size_t cap;
};

int ns_rres_new(const struct ns_model *m, const char *session, struct ns_rres **out)
{
	struct ns_rres *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->m = m;
	snprintf(r->session, sizeof(r->session), "%s", session ? session : "");
	*out = r;
	return 0;
}

void ns_rres_destroy(struct ns_rres **pr)
{
	struct ns_rres *r = pr ? *pr : NULL;

	if (!r)
		return;
	if (r->seg.base)
		ns_seg_unmap(&r->seg);
	free(r->win);
	free(r->buf);
	free(r);
	*pr = NULL;
}

static uint64_t s_n_rows(void *ctx, uint64_t tensor)
{
	return ((const struct ns_model *)ctx)->tensors[tensor].n_rows;
}

int ns_rres_load(struct ns_rres *r, const void *buf, size_t len, char *err, size_t errlen)
{
	const struct nsplan_header *h = buf;
	const struct nsplan_entry *e;
	struct s_win *w;
	uint64_t n = 0, bytes = 0;
	int rc = nsplan_records_check(buf, len, r->m->n_tensors, s_n_rows, (void *)r->m, err,
				      errlen);

	if (rc)
		return rc;
	e = (const struct nsplan_entry *)((const uint8_t *)buf + sizeof(*h));
	w = calloc(h->n_entries ? h->n_entries : 1, sizeof(*w));
	if (!w) {
		ns_errf(err, errlen, "out of memory reading the plan");
		return -ENOMEM;
	}
	/* entries are sorted by (tensor, row_begin) and partition each tensor (checked) */
	for (uint64_t i = 0; i < h->n_entries; i++) {
		if (e[i].tier != NSPLAN_RAM || e[i].row_end == e[i].row_begin)
			continue;
		bytes += (e[i].row_end - e[i].row_begin) * r->m->tensors[e[i].tensor].row_bytes;
		if (n && w[n - 1].tensor == e[i].tensor && w[n - 1].row1 == e[i].row_begin) {
			w[n - 1].row1 = e[i].row_end;
			continue;
		}
		w[n++] = (struct s_win){ .tensor = e[i].tensor, .row0 = e[i].row_begin,
					 .row1 = e[i].row_end };
	}
	free(r->win);
	r->win = w;
	r->n_win = n;
	r->bytes = bytes;
	r->generation = h->generation;
	return 0;
}

int ns_rres_refresh(struct ns_rres *r, bool force, char *err, size_t errlen)
{
	const struct nsplan_seg_ctl *c;
	uint64_t now = ns_now_ns();
	uint32_t seq;
	size_t len = 0;
	int rc = -EAGAIN;

	if (!force && now - r->t_look < S_LOOK_NS)
		return 0;
	r->t_look = now;
	if (!r->seg.base && (rc = nsplan_shm_open(&r->seg, r->session, err, errlen)))
		return rc == -EPERM ? rc : 0; /* not ours; or no plan (yet): nothing resident */
	rc = -EAGAIN;
	c = (const struct nsplan_seg_ctl *)((const uint8_t *)r->seg.base +
					    sizeof(struct ns_seg_header));
	seq = atomic_load_explicit(&c->seq, memory_order_acquire);
	if ((seq & 1u) || (r->have_seq && seq == r->seq))
		return 0; /* a publish in progress (look again later), or nothing new */
	for (int tries = 0; tries < 100 && rc == -EAGAIN; tries++) {
		if (!r->buf) {
			r->buf = malloc(1u << 16);
			if (!r->buf)
				return 0;
			r->cap = 1u << 16;
		}
		rc = nsplan_shm_read(&r->seg, r->buf, r->cap, &len);
		if (rc == -ENOSPC) { /* the plan outgrew the copy */
			size_t cap = r->cap * 2;
			void *nb = cap <= (1u << 30) ? realloc(r->buf, cap) : NULL;

			if (!nb)
				return 0;
			r->buf = nb;
			r->cap = cap;
			rc = -EAGAIN;
		}
	}
	if (rc == -ENOENT || rc == -EAGAIN)
		return 0; /* nothing published yet, or a writer raced every copy: later */
	if (rc == 0)
		rc = ns_rres_load(r, r->buf, len, err, errlen);
	r->seq = seq;
	r->have_seq = true; /* a bad plan is not looked at again until the next publish */
	return rc ? rc : 1;
}

bool ns_rres_covered(const struct ns_rres *r, uint32_t tensor, uint64_t row0, uint64_t nrows)
{
	uint64_t lo = 0, hi = r->n_win;

	if (!nrows)
		return false;
	/* the first window at or after (tensor, row0 + 1): its predecessor may hold row0 */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		const struct s_win *w = &r->win[mid];

		if (w->tensor < tensor || (w->tensor == tensor && w->row0 <= row0))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return false;
	lo--;
	return r->win[lo].tensor == tensor && r->win[lo].row0 <= row0 &&
	       row0 + nrows <= r->win[lo].row1;
}

void ns_rres_figures(const struct ns_rres *r, uint32_t *generation, uint64_t *windows,
		     uint64_t *bytes)
{
	*generation = r->generation;
	*windows = r->n_win;
	*bytes = r->bytes;
}
