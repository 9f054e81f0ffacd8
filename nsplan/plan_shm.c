/* plan_shm.c - publishing plans in shared memory (see plan_shm.h). */
#include "plan_shm.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ns_util.h"

static struct nsplan_seg_ctl *s_ctl(const struct ns_seg *seg)
{
	return (struct nsplan_seg_ctl *)((uint8_t *)seg->base + sizeof(struct ns_seg_header));
}

/* Geometry a reader or a re-opening writer can trust. */
static int s_check_geometry(const struct ns_seg *seg, char *err, size_t errlen)
{
	const struct nsplan_seg_ctl *c;
	uint64_t first = ns_align_up_u64(sizeof(struct ns_seg_header) + sizeof(*c), 64);

	if (seg->size < first) {
		ns_errf(err, errlen, "%s: %zu bytes, too small for a plan segment", seg->name,
			seg->size);
		return -EPROTO;
	}
	c = s_ctl(seg);
	if (c->slot_bytes < sizeof(struct nsplan_header) || c->off_slot[0] != first ||
	    c->slot_bytes > (seg->size - first) / 2 || c->off_slot[1] != first + c->slot_bytes) {
		ns_errf(err, errlen, "%s: slot geometry does not fit the segment", seg->name);
		return -EPROTO;
	}
	return 0;
}

int nsplan_shm_create(struct ns_seg *seg, const char *session, uint64_t max_entries,
		      char *err, size_t errlen)
{
	uint64_t first = ns_align_up_u64(sizeof(struct ns_seg_header) +
					 sizeof(struct nsplan_seg_ctl), 64);
	uint64_t slot, size;
	struct nsplan_seg_ctl *c;
	int ret;

	if (ns_mul_u64_overflow(max_entries, sizeof(struct nsplan_entry), &slot) ||
	    ns_add_u64_overflow(slot, sizeof(struct nsplan_header), &slot) ||
	    ns_mul_u64_overflow(slot, 2, &size) || ns_add_u64_overflow(size, first, &size) ||
	    size > SIZE_MAX) {
		ns_errf(err, errlen, "a plan of %" PRIu64 " entries is too large", max_entries);
		return -EOVERFLOW;
	}
	ret = ns_seg_create(seg, session, NSPLAN_SEG_WHAT, NSPLAN_SEG_KIND, (size_t)size, err,
			    errlen);
	if (ret == -EEXIST) {
		/* a previous nsplan of this session: keep its segment, readers hold its plan */
		ret = ns_seg_open(seg, session, NSPLAN_SEG_WHAT, NSPLAN_SEG_KIND, true, err, errlen);
		if (ret)
			return ret;
		ret = s_check_geometry(seg, err, errlen);
		if (!ret && s_ctl(seg)->slot_bytes < slot) {
			ns_errf(err, errlen, "%s: slots of %" PRIu64 " bytes, this model needs %" PRIu64,
				seg->name, s_ctl(seg)->slot_bytes, slot);
			ret = -EPROTO;
		}
		if (ret)
			ns_seg_unmap(seg);
		else {
			/* the previous writer may have died mid-publish (seq odd): close its
			 * write so the parity the readers rely on holds again */
			if (atomic_load(&s_ctl(seg)->seq) & 1u)
				atomic_fetch_add(&s_ctl(seg)->seq, 1);
			atomic_store(&s_ctl(seg)->pid, (int32_t)getpid());
		}
		return ret;
	}
	if (ret)
		return ret;
	c = s_ctl(seg);
	c->slot_bytes = slot;
	c->off_slot[0] = first;
	c->off_slot[1] = first + slot;
	atomic_store(&c->active, NSPLAN_SLOT_NONE);
	atomic_store(&c->pid, (int32_t)getpid());
	atomic_thread_fence(memory_order_release);
	return 0;
}

int nsplan_shm_publish(struct ns_seg *seg, const struct nsplan *pl, char *err, size_t errlen)
{
	struct nsplan_seg_ctl *c = s_ctl(seg);
	uint32_t active = atomic_load_explicit(&c->active, memory_order_relaxed);
	uint32_t slot = active == 0 ? 1 : 0;
	size_t len = nsplan_records_bytes(pl);

	if (len > c->slot_bytes) {
		ns_errf(err, errlen, "plan of %zu bytes does not fit a %" PRIu64 "-byte slot", len,
			c->slot_bytes);
		return -ENOSPC;
	}
	atomic_fetch_add_explicit(&c->seq, 1, memory_order_acq_rel); /* odd: writing */
	atomic_thread_fence(memory_order_release);
	nsplan_records_write(pl, (uint8_t *)seg->base + c->off_slot[slot]);
	atomic_store_explicit(&c->len[slot], len, memory_order_release);
	atomic_store_explicit(&c->active, slot, memory_order_release);
	atomic_fetch_add_explicit(&c->seq, 1, memory_order_acq_rel); /* even: done */
	atomic_fetch_add_explicit(&c->published, 1, memory_order_relaxed);
	syscall(SYS_futex, &c->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	return 0;
}

int nsplan_shm_open(struct ns_seg *seg, const char *session, char *err, size_t errlen)
{
	int ret = ns_seg_open(seg, session, NSPLAN_SEG_WHAT, NSPLAN_SEG_KIND, false, err, errlen);

	if (ret)
		return ret;
	ret = s_check_geometry(seg, err, errlen);
	if (ret)
		ns_seg_unmap(seg);
	return ret;
}

int nsplan_shm_read(const struct ns_seg *seg, void *buf, size_t cap, size_t *len)
{
	struct nsplan_seg_ctl *c = s_ctl(seg);
	uint32_t s1, s2, a;
	uint64_t n, off;

	s1 = atomic_load_explicit(&c->seq, memory_order_acquire);
	a = atomic_load_explicit(&c->active, memory_order_acquire);
	if (a == NSPLAN_SLOT_NONE)
		return -ENOENT;
	if (a > 1)
		return -EAGAIN;
	n = atomic_load_explicit(&c->len[a], memory_order_acquire);
	off = c->off_slot[a];
	if (n > c->slot_bytes || off > seg->size || n > seg->size - off)
		return -EAGAIN;
	if (n > cap)
		return -ENOSPC;
	memcpy(buf, (const uint8_t *)seg->base + off, (size_t)n);
	atomic_thread_fence(memory_order_acquire);
	s2 = atomic_load_explicit(&c->seq, memory_order_acquire);
	if (s2 - s1 > ((s1 | 1u) + 1u) - s1)
		return -EAGAIN;
	*len = (size_t)n;
	return 0;
}
