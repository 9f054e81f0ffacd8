/* session.c - create, attach and tear down a session's segments and runtime directory. */
#include "session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ns_util.h"

#define S_CTL "ctl"
#define S_ARENA "arena"

static bool s_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

int ns_session_rundir(const char *id, char *buf, size_t n)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	char user[32];
	int k;

	if (x && *x) {
		k = snprintf(buf, n, "%s/neurostream-%s", x, id);
	} else {
		ns_seg_user(user, sizeof(user));
		k = snprintf(buf, n, "/tmp/neurostream-%s-%s", user, id);
	}
	return (k < 0 || (size_t)k >= n) ? -ENAMETOOLONG : 0;
}

/* Byte layout of the control segment for params p; false on overflow. */
static bool s_layout(const struct ns_session_params *p, struct ns_ctl *g, uint64_t *total)
{
	uint64_t rings, slot, clients, leases, tensors, off;

	if (ns_mul_u64_overflow(2ull * NS_RING_REC_BYTES, p->ring_slots, &rings))
		return false;
	slot = sizeof(struct ns_client_slot) + rings;
	slot = ns_align_up_u64(slot, 64);
	if (ns_mul_u64_overflow(slot, p->max_clients, &clients) ||
	    ns_mul_u64_overflow(sizeof(struct ns_lease), p->lease_slots, &leases) ||
	    ns_mul_u64_overflow(sizeof(struct ns_tensor_entry), p->tensor_cap, &tensors))
		return false;
	off = ns_align_up_u64(sizeof(struct ns_ctl), 4096);
	g->client_slot_bytes = slot;
	g->off_clients = off;
	if (ns_add_u64_overflow(off, clients, &off))
		return false;
	off = ns_align_up_u64(off, 4096);
	g->off_leases = off;
	if (ns_add_u64_overflow(off, leases, &off))
		return false;
	off = ns_align_up_u64(off, 4096);
	g->off_tensors = off;
	if (ns_add_u64_overflow(off, tensors, &off) || off > (1ull << 40))
		return false;
	*total = ns_align_up_u64(off, 4096);
	return true;
}

static int s_check_params(const struct ns_session_params *p, char *err, size_t errlen)
{
	if (!s_pow2(p->align) || p->align < 512 || p->align > (1u << 20))
		return ns_errf(err, errlen, "alignment %u is not a power of two in 512..1M",
			       p->align), -EINVAL;
	if (p->max_clients < 1 || p->max_clients > 1024)
		return ns_errf(err, errlen, "max_clients %u not in 1..1024", p->max_clients),
		       -EINVAL;
	if (!s_pow2(p->ring_slots) || p->ring_slots < 8 || p->ring_slots > 65536)
		return ns_errf(err, errlen, "ring_slots %u not a power of two in 8..65536",
			       p->ring_slots), -EINVAL;
	if (!s_pow2(p->lease_slots) || p->lease_slots < 8 || p->lease_slots > (1u << 20))
		return ns_errf(err, errlen, "lease_slots %u not a power of two in 8..1M",
			       p->lease_slots), -EINVAL;
	if (p->tensor_cap < 1 || p->tensor_cap > (1u << 20))
		return ns_errf(err, errlen, "tensor_cap %u not in 1..1M", p->tensor_cap), -EINVAL;
	if (p->arena_bytes / p->align == 0)
		return ns_errf(err, errlen, "memory budget %llu B is smaller than one %u B block",
			       (unsigned long long)p->arena_bytes, p->align), -EINVAL;
	if (p->arena_bytes > (1ull << 46))
		return ns_errf(err, errlen, "memory budget %llu B is absurdly large",
			       (unsigned long long)p->arena_bytes), -EINVAL;
	if (p->id && !ns_session_id_valid(p->id))
		return ns_errf(err, errlen, "session id '%s' is not 1-16 of [A-Za-z0-9_]", p->id),
		       -EINVAL;
	return 0;
}

void ns_session_unlink(const char *id)
{
	char dir[PATH_MAX];

	ns_seg_unlink(id, S_CTL);
	ns_seg_unlink(id, S_ARENA);
	ns_seg_unlink_session(id); /* segments other modules added to the session */
	if (ns_session_rundir(id, dir, sizeof(dir)) == 0) {
		DIR *d = opendir(dir);
		struct dirent *de;

		/* the ipc endpoints of the session's processes live directly inside */
		while (d && (de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				unlinkat(dirfd(d), de->d_name, 0);
		if (d)
			closedir(d);
		rmdir(dir);
	}
}

int ns_session_create(const struct ns_session_params *p, struct ns_session **out, char *err,
		      size_t errlen)
{
	struct ns_session *s;
	struct ns_ctl geom = { 0 }, *c;
	uint64_t ctl_bytes, arena_bytes;
	int rc;

	*out = NULL;
	rc = s_check_params(p, err, errlen);
	if (rc)
		return rc;
	if (!s_layout(p, &geom, &ctl_bytes))
		return ns_errf(err, errlen, "session geometry overflows"), -EOVERFLOW;
	arena_bytes = p->arena_bytes / p->align * p->align;
	ns_seg_sweep_stale();
	s = calloc(1, sizeof(*s));
	if (!s)
		return ns_errf(err, errlen, "out of memory"), -ENOMEM;
	if (p->id)
		snprintf(s->id, sizeof(s->id), "%s", p->id);
	else if ((rc = ns_session_random_id(s->id)) < 0) {
		ns_errf(err, errlen, "getrandom: %s", strerror(-rc));
		free(s);
		return rc;
	}
	s->owner = true;
	s->arena_writable = true;
	rc = ns_session_rundir(s->id, s->rundir, sizeof(s->rundir));
	if (rc == 0 && mkdir(s->rundir, 0700) != 0)
		rc = -errno;
	if (rc) {
		ns_errf(err, errlen, "runtime dir %s: %s", s->rundir, strerror(-rc));
		free(s);
		return rc;
	}
	rc = ns_seg_create(&s->ctl_seg, s->id, S_CTL, NS_SEG_CTL, ctl_bytes, err, errlen);
	if (rc)
		goto fail;
	rc = ns_seg_create(&s->arena_seg, s->id, S_ARENA, NS_SEG_ARENA,
			   NS_ARENA_DATA_OFFSET + arena_bytes, err, errlen);
	if (rc)
		goto fail;
	c = s->ctl = s->ctl_seg.base;
	s->arena = (uint8_t *)s->arena_seg.base + NS_ARENA_DATA_OFFSET;
	c->arena_bytes = arena_bytes;
	c->budget_bytes = p->arena_bytes;
	c->align = p->align;
	c->max_clients = p->max_clients;
	c->ring_slots = p->ring_slots;
	c->lease_slots = p->lease_slots;
	c->tensor_cap = p->tensor_cap;
	c->client_slot_bytes = geom.client_slot_bytes;
	c->off_clients = geom.off_clients;
	c->off_leases = geom.off_leases;
	c->off_tensors = geom.off_tensors;
	*out = s;
	return 0;
fail:
	ns_seg_unmap(&s->ctl_seg);
	ns_seg_unmap(&s->arena_seg);
	if (rc != -EEXIST)
		ns_session_unlink(s->id);
	else
		rmdir(s->rundir);
	free(s);
	return rc;
}

/* Geometry read from a mapped control segment, checked against its size. */
static int s_check_geometry(struct ns_ctl *c, size_t size, char *err, size_t errlen)
{
	struct ns_session_params p = {
		.arena_bytes = c->arena_bytes, .align = c->align, .max_clients = c->max_clients,
		.ring_slots = c->ring_slots, .lease_slots = c->lease_slots,
		.tensor_cap = c->tensor_cap,
	};
	struct ns_ctl g = { 0 };
	uint64_t total;
	int rc = s_check_params(&p, err, errlen);

	if (rc)
		return -EPROTO;
	if (!s_layout(&p, &g, &total) || total != size || g.off_clients != c->off_clients ||
	    g.off_leases != c->off_leases || g.off_tensors != c->off_tensors ||
	    g.client_slot_bytes != c->client_slot_bytes || c->arena_bytes % c->align)
		return ns_errf(err, errlen, "control segment geometry is inconsistent"), -EPROTO;
	return 0;
}

int ns_session_attach(const char *id, bool arena_writable, struct ns_session **out, char *err,
		      size_t errlen)
{
	struct ns_session *s;
	int rc;

	*out = NULL;
	if (!ns_session_id_valid(id))
		return ns_errf(err, errlen, "session id '%s' is not 1-16 of [A-Za-z0-9_]",
			       id ? id : "(null)"), -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return ns_errf(err, errlen, "out of memory"), -ENOMEM;
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->arena_writable = arena_writable;
	ns_session_rundir(id, s->rundir, sizeof(s->rundir));
	rc = ns_seg_open(&s->ctl_seg, id, S_CTL, NS_SEG_CTL, true, err, errlen);
	if (rc)
		goto fail;
	s->ctl = s->ctl_seg.base;
	rc = s_check_geometry(s->ctl, s->ctl_seg.size, err, errlen);
	if (rc)
		goto fail;
	rc = ns_seg_open(&s->arena_seg, id, S_ARENA, NS_SEG_ARENA, arena_writable, err, errlen);
	if (rc)
		goto fail;
	if (s->arena_seg.size != NS_ARENA_DATA_OFFSET + s->ctl->arena_bytes) {
		ns_errf(err, errlen, "arena segment is %zu bytes, control says %llu", 
			s->arena_seg.size, (unsigned long long)s->ctl->arena_bytes);
		rc = -EPROTO;
		goto fail;
	}
	s->arena = (uint8_t *)s->arena_seg.base + NS_ARENA_DATA_OFFSET;
	*out = s;
	return 0;
fail:
	ns_seg_unmap(&s->ctl_seg);
	ns_seg_unmap(&s->arena_seg);
	free(s);
	return rc;
}

void ns_session_destroy(struct ns_session **sp)
{
	struct ns_session *s = *sp;

	if (!s)
		return;
	ns_seg_unmap(&s->ctl_seg);
	ns_seg_unmap(&s->arena_seg);
	if (s->owner)
		ns_session_unlink(s->id);
	free(s);
	*sp = NULL;
}

void ns_stats_snapshot(struct ns_ctl *c, struct ns_stats_snapshot *o)
{
	struct ns_stats *st = &c->stats;

	o->bytes_requested = atomic_load(&st->bytes_requested);
	o->bytes_device = atomic_load(&st->bytes_device);
	o->reads = atomic_load(&st->reads);
	o->requests = atomic_load(&st->requests);
	o->blocks_delivered = atomic_load(&st->blocks_delivered);
	o->stall_ns = atomic_load(&st->stall_ns);
	o->arena_wait_ns = atomic_load(&st->arena_wait_ns);
	o->cache_hits = atomic_load(&st->cache_hits);
	o->rejected = atomic_load(&st->rejected);
	o->stale_dropped = atomic_load(&st->stale_dropped);
	o->short_reads = atomic_load(&st->short_reads);
	o->eagain = atomic_load(&st->eagain);
	o->leases_reclaimed = atomic_load(&st->leases_reclaimed);
	o->restarts = atomic_load(&st->restarts);
	o->nsio_cpu_ns = atomic_load(&st->nsio_cpu_ns);
	o->ahead_bytes = atomic_load(&st->ahead_bytes);
	o->arena_bytes = c->arena_bytes;
	o->arena_reserved = atomic_load(&c->arena.reserved);
	o->arena_peak = atomic_load(&c->arena.peak);
	o->live_leases = atomic_load(&c->arena.head_seq) - atomic_load(&c->arena.tail_seq);
	o->nsio_gen = atomic_load(&c->nsio_gen);
	o->nsio_state = atomic_load(&c->nsio_state);
	o->nsio_pid = atomic_load(&c->nsio_pid);
}
