/* session.c - create, attach and tear down a session's segments and runtime directory. */
#include "session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ns_util.h"

#define S_CTL NS_SEG_CTL_WHAT
#define S_ARENA "arena"
#define S_LOCK_GRACE_S 60 /* a runtime dir without its lock this long is a dead start */

static bool s_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* Where runtime dirs live and how their names begin: "<parent>/<prefix><id>". */
static int s_rundir_parts(char *parent, size_t pn, char *prefix, size_t fn)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	char user[32];
	int a, b;

	if (x && *x) {
		a = snprintf(parent, pn, "%s", x);
		b = snprintf(prefix, fn, "neurostream-");
	} else {
		ns_seg_user(user, sizeof(user));
		a = snprintf(parent, pn, "/tmp");
		b = snprintf(prefix, fn, "neurostream-%s-", user);
	}
	return (a < 0 || (size_t)a >= pn || b < 0 || (size_t)b >= fn) ? -ENAMETOOLONG : 0;
}

int ns_session_rundir(const char *id, char *buf, size_t n)
{
	char parent[PATH_MAX], prefix[64];
	int k;

	if (s_rundir_parts(parent, sizeof(parent), prefix, sizeof(prefix)) < 0)
		return -ENAMETOOLONG;
	k = snprintf(buf, n, "%s/%s%s", parent, prefix, id);
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

	ns_seg_unlink_session(id); /* ctl, arena and what other modules added to the session */
	if (ns_session_rundir(id, dir, sizeof(dir)) == 0) {
		DIR *d = opendir(dir);
		struct dirent *de;

		/* the lock and the ipc endpoints of the session's processes live directly inside */
		while (d && (de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				unlinkat(dirfd(d), de->d_name, 0);
		if (d)
			closedir(d);
		rmdir(dir);
	}
}

/* Open the lock of runtime dir `dir` (created when create) and take it: shared, or
 * exclusive without waiting. Returns the fd or -errno (-EWOULDBLOCK: held by others). */
static int s_lock(const char *dir, bool create, bool exclusive)
{
	char path[PATH_MAX + 16];
	struct stat st;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, NS_SESSION_LOCK) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT | O_EXCL : 0), 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || st.st_uid != geteuid()) {
		close(fd);
		return -EPERM;
	}
	if (flock(fd, exclusive ? LOCK_EX | LOCK_NB : LOCK_SH | LOCK_NB) != 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

int ns_session_hold(const char *id, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	int fd;

	if (ns_session_rundir(id, dir, sizeof(dir)) < 0)
		return ns_errf(err, errlen, "runtime dir path too long"), -ENAMETOOLONG;
	fd = s_lock(dir, false, false);
	if (fd == -EWOULDBLOCK)
		return ns_errf(err, errlen, "session %s is being removed", id), -ENOENT;
	if (fd < 0)
		return ns_errf(err, errlen, "session %s: lock %s/%s: %s", id, dir, NS_SESSION_LOCK,
			       strerror(-fd)), fd == -EPERM ? -EPERM : -ENOENT;
	return fd;
}

/* A session without a lock: alive while its control segment's creator is (pid, and start
 * time where the header has one); without a control segment, while its runtime dir (made at
 * `made`) is younger than a minute. */
static int s_owner_probe(const char *id, time_t made)
{
	char user[32], path[300];
	struct ns_seg_header h;
	ssize_t got;
	int fd;

	ns_seg_user(user, sizeof(user));
	snprintf(path, sizeof(path), "/dev/shm/ns-%s-%s-ctl", user, id);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return time(NULL) - made > S_LOCK_GRACE_S ? 0 : 1;
	got = pread(fd, &h, sizeof(h), 0);
	close(fd);
	if (got != (ssize_t)sizeof(h) || h.magic != NS_SEG_MAGIC)
		return time(NULL) - made > S_LOCK_GRACE_S ? 0 : 1;
	return ns_proc_alive(h.owner_pid, h.layout_version >= 2 ? h.owner_start : 0);
}

int ns_session_probe(const char *id)
{
	char dir[PATH_MAX];
	struct stat st;
	int fd;

	if (ns_session_rundir(id, dir, sizeof(dir)) < 0 || stat(dir, &st) != 0)
		return -ENOENT;
	fd = s_lock(dir, false, true);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (fd == -ENOENT) /* no lock: a start in progress, one that died, or an older build's */
		return s_owner_probe(id, st.st_mtime);
	return 1; /* held (or not ours to judge) */
}

int ns_session_each(int (*fn)(const char *id, const char *dir, void *arg), void *arg)
{
	char parent[PATH_MAX], prefix[64], dir[PATH_MAX * 2];
	struct dirent *de;
	struct stat st;
	size_t pl;
	DIR *d;
	int rc = 0;

	if (s_rundir_parts(parent, sizeof(parent), prefix, sizeof(prefix)) < 0)
		return 0;
	pl = strlen(prefix);
	d = opendir(parent);
	while (d && rc == 0 && (de = readdir(d))) {
		const char *id = de->d_name + pl;

		if (strncmp(de->d_name, prefix, pl) || !ns_session_id_valid(id))
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", parent, de->d_name);
		if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
			continue;
		rc = fn(id, dir, arg);
	}
	if (d)
		closedir(d);
	return rc;
}

static int s_sweep_one(const char *id, const char *dir, void *arg)
{
	(void)dir;
	if (ns_session_probe(id) == 0) {
		ns_session_unlink(id);
		(*(int *)arg)++;
	}
	return 0;
}

/* A segment of a session without a runtime dir: dead when its header's owner is. */
static bool s_orphan_stale(int dfd, const char *name)
{
	struct ns_seg_header h;
	struct stat st;
	ssize_t got;
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		return false;
	got = pread(fd, &h, sizeof(h), 0);
	if (fstat(fd, &st) != 0 || st.st_uid != geteuid()) {
		close(fd);
		return false;
	}
	close(fd);
	if (got == (ssize_t)sizeof(h) && h.magic == NS_SEG_MAGIC)
		return !ns_proc_alive(h.owner_pid, h.layout_version >= 2 ? h.owner_start : 0);
	return time(NULL) - st.st_mtime > S_LOCK_GRACE_S; /* never finished creating */
}

int ns_session_sweep(void)
{
	char id[NS_SESSION_ID_LEN + 1], path[300];
	struct dirent *de;
	int n = 0;
	DIR *d;

	ns_session_each(s_sweep_one, &n);
	d = opendir("/dev/shm");
	while (d && (de = readdir(d))) {
		if (!ns_seg_name_session(de->d_name, id) || ns_session_probe(id) != -ENOENT)
			continue;
		snprintf(path, sizeof(path), "/%s", de->d_name);
		if (s_orphan_stale(dirfd(d), de->d_name) && shm_unlink(path) == 0)
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

bool ns_session_owner_alive(const struct ns_ctl *ctl)
{
	return ns_proc_alive(ctl->hdr.owner_pid, ctl->hdr.owner_start);
}

/* Any /dev/shm entry of session id that is not ours (or not 0600) was planted: -EPERM with
 * a line naming it. Its names other than the control segment's carry a key only we can read,
 * so this finds what a leaked key or a test hook let in before anything uses it. */
static int s_foreign(const char *id, char *err, size_t errlen)
{
	char user[32], prefix[96];
	struct dirent *de;
	struct stat st;
	DIR *d = opendir("/dev/shm");
	int rc = 0;

	ns_seg_user(user, sizeof(user));
	snprintf(prefix, sizeof(prefix), "ns-%s-%s-", user, id);
	while (d && rc == 0 && (de = readdir(d))) {
		if (strncmp(de->d_name, prefix, strlen(prefix)) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (st.st_uid != geteuid() || (st.st_mode & 07777) != 0600) {
			ns_errf(err, errlen, "segment /%s of this session belongs to uid %u (mode "
				"%04o), not to us: another user planted it; refusing the session",
				de->d_name, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
			rc = -EPERM;
		}
	}
	if (d)
		closedir(d);
	return rc;
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
	ns_session_sweep();
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
	s->lock_fd = -1;
	rc = ns_session_rundir(s->id, s->rundir, sizeof(s->rundir));
	if (rc == 0 && mkdir(s->rundir, 0700) != 0)
		rc = -errno;
	if (rc) {
		ns_errf(err, errlen, "runtime dir %s: %s", s->rundir, strerror(-rc));
		free(s);
		return rc;
	}
	s->lock_fd = s_lock(s->rundir, true, false);
	if (s->lock_fd < 0) {
		rc = s->lock_fd;
		ns_errf(err, errlen, "runtime dir %s: lock: %s", s->rundir, strerror(-rc));
		goto fail;
	}
	rc = ns_seg_create(&s->ctl_seg, s->id, S_CTL, NS_SEG_CTL, ctl_bytes, err, errlen);
	if (rc)
		goto fail;
	rc = ns_seg_create(&s->arena_seg, s->id, S_ARENA, NS_SEG_ARENA,
			   NS_ARENA_DATA_OFFSET + arena_bytes, err, errlen);
	if (rc)
		goto fail;
	rc = s_foreign(s->id, err, errlen);
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
	/* the runtime dir was made here, so the id is ours: whatever exists of it goes (a
	 * segment under it that is not ours stays, and unlink skips it) */
	ns_session_unlink(s->id);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
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
	s->lock_fd = -1;
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
	/* held while attached: the session is alive as long as any of its processes is */
	s->lock_fd = ns_session_hold(id, err, errlen);
	if (s->lock_fd < 0) {
		rc = s->lock_fd;
		goto fail;
	}
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
	if (s->lock_fd >= 0)
		close(s->lock_fd);
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
	o->predict_experts = atomic_load(&st->predict_experts);
	o->predict_hits = atomic_load(&st->predict_hits);
	o->predict_reads = atomic_load(&st->predict_reads);
	o->predict_promoted = atomic_load(&st->predict_promoted);
	o->predict_claims = atomic_load(&st->predict_claims);
	o->predict_skipped = atomic_load(&st->predict_skipped);
	o->arena_bytes = c->arena_bytes;
	o->arena_reserved = atomic_load(&c->arena.reserved);
	o->arena_peak = atomic_load(&c->arena.peak);
	o->live_leases = atomic_load(&c->arena.head_seq) - atomic_load(&c->arena.tail_seq);
	o->nsio_gen = atomic_load(&c->nsio_gen);
	o->nsio_state = atomic_load(&c->nsio_state);
	o->nsio_pid = atomic_load(&c->nsio_pid);
}
