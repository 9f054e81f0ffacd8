/* arena.c - ring allocator of leases inside the shared arena (nsio is the only caller). */
#include "arena.h"

#include <errno.h>

#include "ns_util.h"

static struct ns_lease *s_slot(struct ns_ctl *ctl, uint64_t seq)
{
	return &ns_ctl_leases(ctl)[seq & (ctl->lease_slots - 1)];
}

int ns_arena_alloc(struct ns_ctl *ctl, uint64_t len, uint32_t owner, uint64_t ticket,
		   uint64_t client_epoch, uint32_t *idx)
{
	struct ns_arena_state *a = &ctl->arena;
	uint64_t head = atomic_load(&a->head_seq), tail = atomic_load(&a->tail_seq);
	uint64_t cap = ctl->arena_bytes, off, h, t, r;
	struct ns_lease *l;

	if (len == 0 || len % ctl->align)
		return -EINVAL;
	if (len > cap)
		return -E2BIG;
	if (head - tail >= ctl->lease_slots)
		return -EAGAIN;
	if (head == tail) {
		off = 0; /* empty: start over at the bottom, no wrap waste */
	} else {
		t = s_slot(ctl, tail)->off;
		h = atomic_load(&a->off_head);
		if (h > t) {
			if (cap - h >= len)
				off = h;
			else if (len <= t)
				off = 0;
			else
				return -EAGAIN;
		} else if (h < t) {
			if (t - h >= len)
				off = h;
			else
				return -EAGAIN;
		} else {
			return -EAGAIN; /* live region covers the whole ring */
		}
	}
	l = s_slot(ctl, head);
	l->owner = owner;
	l->seq = head;
	l->off = off;
	l->len = len;
	l->ticket = ticket;
	l->client_epoch = client_epoch;
	l->cpl_pos = 0;
	atomic_store(&l->state, NS_LEASE_ALLOC);
	atomic_store(&a->off_head, off + len);
	atomic_store(&a->head_seq, head + 1);
	r = atomic_load(&a->reserved) + len;
	atomic_store(&a->reserved, r);
	if (r > atomic_load(&a->peak))
		atomic_store(&a->peak, r);
	*idx = (uint32_t)(head & (ctl->lease_slots - 1));
	return 0;
}

static void s_sweep(struct ns_ctl *ctl)
{
	struct ns_arena_state *a = &ctl->arena;
	uint64_t head = atomic_load(&a->head_seq), tail = atomic_load(&a->tail_seq);

	while (tail != head && atomic_load(&s_slot(ctl, tail)->state) == NS_LEASE_RETIRED) {
		atomic_store(&s_slot(ctl, tail)->state, NS_LEASE_FREE);
		tail++;
		atomic_store(&a->tail_seq, tail);
	}
	if (tail == head)
		atomic_store(&a->off_head, 0);
}

int ns_arena_release(struct ns_ctl *ctl, uint32_t idx)
{
	struct ns_lease *l;
	uint32_t st;

	if (idx >= ctl->lease_slots)
		return -EINVAL;
	l = &ns_ctl_leases(ctl)[idx];
	st = atomic_load(&l->state);
	if (st == NS_LEASE_FREE || st == NS_LEASE_RETIRED)
		return -EINVAL;
	atomic_store(&l->state, NS_LEASE_RETIRED);
	atomic_fetch_sub(&ctl->arena.reserved, l->len);
	s_sweep(ctl);
	return 0;
}

struct ns_lease *ns_arena_lookup(struct ns_ctl *ctl, uint32_t idx, uint64_t seq)
{
	struct ns_lease *l;
	uint64_t head = atomic_load(&ctl->arena.head_seq), tail = atomic_load(&ctl->arena.tail_seq);

	if (idx >= ctl->lease_slots || seq < tail || seq >= head)
		return NULL;
	if ((seq & (ctl->lease_slots - 1)) != idx)
		return NULL;
	l = &ns_ctl_leases(ctl)[idx];
	return l->seq == seq ? l : NULL;
}

uint64_t ns_arena_recover(struct ns_ctl *ctl,
			  enum ns_lease_fate (*fate)(struct ns_ctl *, struct ns_lease *, void *),
			  void *arg, uint64_t *quarantined)
{
	struct ns_arena_state *a = &ctl->arena;
	uint64_t head = atomic_load(&a->head_seq), tail = atomic_load(&a->tail_seq);
	uint64_t dropped = 0, reserved = 0;

	if (head - tail > ctl->lease_slots) { /* corrupt: start empty */
		atomic_store(&a->tail_seq, head);
		tail = head;
	}
	for (uint64_t s = tail; s != head; s++) {
		struct ns_lease *l = s_slot(ctl, s);
		uint32_t st = atomic_load(&l->state);
		enum ns_lease_fate f = NS_LEASE_DROP;

		if (st != NS_LEASE_RETIRED && st != NS_LEASE_FREE && l->seq == s &&
		    l->len <= ctl->arena_bytes && l->off <= ctl->arena_bytes - l->len)
			f = fate(ctl, l, arg);
		if (f == NS_LEASE_DROP) {
			if (st != NS_LEASE_RETIRED && st != NS_LEASE_FREE)
				dropped++;
			atomic_store(&l->state, NS_LEASE_RETIRED);
			continue;
		}
		if (f == NS_LEASE_QUARANTINED) {
			l->owner = NS_OWNER_NONE;
			atomic_store(&l->state, NS_LEASE_QUARANTINE);
			(*quarantined)++;
		}
		reserved += l->len;
	}
	atomic_store(&a->reserved, reserved);
	s_sweep(ctl);
	return dropped;
}

uint64_t ns_arena_release_quarantine(struct ns_ctl *ctl)
{
	uint64_t head = atomic_load(&ctl->arena.head_seq), n = 0;

	for (uint64_t s = atomic_load(&ctl->arena.tail_seq); s != head; s++) {
		struct ns_lease *l = s_slot(ctl, s);

		if (atomic_load(&l->state) == NS_LEASE_QUARANTINE) {
			atomic_store(&l->state, NS_LEASE_RETIRED);
			atomic_fetch_sub(&ctl->arena.reserved, l->len);
			n++;
		}
	}
	s_sweep(ctl);
	return n;
}

bool ns_span_aligned(uint64_t off, uint64_t len, uint32_t align, uint64_t *a_off, uint64_t *a_len)
{
	uint64_t end;

	if (ns_add_u64_overflow(off, len, &end) || end > UINT64_MAX - align)
		return false;
	*a_off = off / align * align;
	*a_len = ns_align_up_u64(end, align) - *a_off;
	return true;
}

uint64_t ns_span_max(uint64_t file_offset, uint64_t row_bytes, uint64_t n_rows, uint64_t nrows,
		     uint32_t align)
{
	uint64_t len, best = 0, k_end;

	if (nrows > n_rows)
		nrows = n_rows;
	if (nrows == 0 || ns_mul_u64_overflow(row_bytes, nrows, &len))
		return 0;
	/* start misalignments repeat with a period that divides align */
	k_end = n_rows - nrows + 1;
	if (k_end > align)
		k_end = align;
	for (uint64_t k = 0; k < k_end; k++) {
		uint64_t start, a_off, a_len;

		if (ns_mul_u64_overflow(k, row_bytes, &start) ||
		    ns_add_u64_overflow(start, file_offset, &start) ||
		    !ns_span_aligned(start, len, align, &a_off, &a_len))
			return 0;
		if (a_len > best)
			best = a_len;
	}
	return best;
}

int ns_block_rows_fit(uint64_t cap, uint32_t align, uint32_t lookahead, uint64_t file_offset,
		      uint64_t row_bytes, uint64_t n_rows, uint64_t want, uint64_t *rows,
		      uint64_t *need)
{
	uint64_t per, fit, span1;

	*need = 0;
	if (row_bytes == 0 || n_rows == 0)
		return -EINVAL;
	if (want == 0 || want > n_rows)
		want = n_rows;
	per = cap / ((uint64_t)lookahead + 1) / align * align;
	/* a block of n rows spans at most align_up(n * row_bytes) + align bytes */
	fit = per > align ? (per - align) / row_bytes : 0;
	if (fit >= 1) {
		*rows = fit < want ? fit : want;
		return 0;
	}
	span1 = ns_span_max(file_offset, row_bytes, n_rows, 1, align);
	if (span1 == 0 || ns_mul_u64_overflow(span1, (uint64_t)lookahead + 1, need)) {
		*need = UINT64_MAX;
		return -ENOSPC;
	}
	if (*need <= cap) {
		*rows = 1;
		return 0;
	}
	return -ENOSPC;
}
