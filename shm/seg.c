/* seg.c - named shared-memory segments: create, open-and-verify, sweep of dead sessions. */
#include "seg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ns_util.h"

void ns_seg_user(char *buf, size_t n)
{
	const char *u = getenv("USER");
	size_t j = 0;

	if (n == 0)
		return;
	if (u && *u) {
		for (size_t i = 0; u[i] && j + 1 < n && j < 24; i++) {
			char c = u[i];
			if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9') || c == '_')
				buf[j++] = c;
		}
	}
	buf[j] = '\0';
	if (j == 0)
		snprintf(buf, n, "uid%u", (unsigned)getuid());
}

bool ns_session_id_valid(const char *id)
{
	size_t n = 0;

	if (!id)
		return false;
	for (; id[n]; n++) {
		char c = id[n];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_'))
			return false;
		if (n >= NS_SESSION_ID_LEN)
			return false;
	}
	return n > 0;
}

int ns_session_arg_check(const char *prog, const char *id)
{
	if (ns_session_id_valid(id))
		return 0;
	fprintf(stderr, "%s: --session '%s' is not 1-16 of [A-Za-z0-9_]\n", prog,
		id ? id : "");
	return -EINVAL;
}

int ns_session_args_check(const char *prog, const char *id, const char *model)
{
	if (!id || !model) {
		fprintf(stderr, "%s: %s is required (usage: %s --session ID --model PATH "
			"[options]; --help lists them)\n", prog, !id ? "--session ID" :
			"--model PATH", prog);
		return -EINVAL;
	}
	return ns_session_arg_check(prog, id);
}

int ns_seg_name(char *buf, size_t n, const char *session, const char *what)
{
	char user[32];
	int k;

	ns_seg_user(user, sizeof(user));
	k = snprintf(buf, n, "/ns-%s-%s-%s", user, session, what);
	if (k < 0 || (size_t)k >= n)
		return -ENAMETOOLONG;
	return 0;
}

int ns_session_random_id(char id[NS_SESSION_ID_LEN + 1])
{
	uint64_t v;
	ssize_t r = getrandom(&v, sizeof(v), 0);

	if (r != (ssize_t)sizeof(v))
		return r < 0 ? -errno : -EIO;
	snprintf(id, NS_SESSION_ID_LEN + 1, "%016llx", (unsigned long long)v);
	return 0;
}

int ns_seg_create(struct ns_seg *seg, const char *session, const char *what, uint32_t kind,
		  size_t size, char *err, size_t errlen)
{
	struct ns_seg_header *h;
	int fd, rc;

	memset(seg, 0, sizeof(*seg));
	if (size < sizeof(struct ns_seg_header)) {
		ns_errf(err, errlen, "segment %s: size %zu too small", what, size);
		return -EINVAL;
	}
	rc = ns_seg_name(seg->name, sizeof(seg->name), session, what);
	if (rc) {
		ns_errf(err, errlen, "segment name for session '%s' too long", session);
		return rc;
	}
	fd = shm_open(seg->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		ns_errf(err, errlen, "shm_open %s: %s", seg->name, strerror(errno));
		return rc;
	}
	if (ftruncate(fd, (off_t)size) != 0) {
		rc = -errno;
		ns_errf(err, errlen, "ftruncate %s to %zu bytes: %s", seg->name, size,
			strerror(errno));
		goto fail;
	}
	seg->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (seg->base == MAP_FAILED) {
		rc = -errno;
		seg->base = NULL;
		ns_errf(err, errlen, "mmap %s (%zu bytes): %s", seg->name, size, strerror(errno));
		goto fail;
	}
	close(fd);
	seg->size = size;
	h = seg->base;
	h->layout_version = NS_SEG_LAYOUT_VERSION;
	h->kind = kind;
	h->size = size;
	h->owner_pid = (int32_t)getpid();
	atomic_store(&h->generation, 0);
	snprintf(h->session, sizeof(h->session), "%s", session);
	ns_seg_user(h->user, sizeof(h->user));
	/* magic last: a reader never sees a half-written header as valid */
	atomic_thread_fence(memory_order_release);
	h->magic = NS_SEG_MAGIC;
	return 0;
fail:
	close(fd);
	shm_unlink(seg->name);
	return rc;
}

int ns_seg_check_header(const struct ns_seg_header *h, size_t mapped, uint32_t kind,
			const char *session, char *err, size_t errlen)
{
	if (mapped < sizeof(*h)) {
		ns_errf(err, errlen, "segment is %zu bytes, smaller than its header", mapped);
		return -EPROTO;
	}
	if (h->magic != NS_SEG_MAGIC) {
		ns_errf(err, errlen, "segment magic 0x%016llx is not a neurostream segment",
			(unsigned long long)h->magic);
		return -EPROTO;
	}
	if (h->layout_version != NS_SEG_LAYOUT_VERSION) {
		ns_errf(err, errlen, "segment layout version %u, this build speaks %u",
			h->layout_version, NS_SEG_LAYOUT_VERSION);
		return -EPROTO;
	}
	if (h->kind != kind) {
		ns_errf(err, errlen, "segment kind %u, expected %u", h->kind, kind);
		return -EPROTO;
	}
	if (h->size != mapped) {
		ns_errf(err, errlen, "segment header says %llu bytes, the object has %zu",
			(unsigned long long)h->size, mapped);
		return -EPROTO;
	}
	if (session && strncmp(h->session, session, sizeof(h->session)) != 0) {
		ns_errf(err, errlen, "segment belongs to session '%.16s', not '%s'", h->session,
			session);
		return -EPROTO;
	}
	return 0;
}

int ns_seg_open(struct ns_seg *seg, const char *session, const char *what, uint32_t kind,
		bool writable, char *err, size_t errlen)
{
	struct stat st;
	int fd, rc;
	char why[NS_ERR_LEN];

	memset(seg, 0, sizeof(*seg));
	rc = ns_seg_name(seg->name, sizeof(seg->name), session, what);
	if (rc) {
		ns_errf(err, errlen, "segment name for session '%s' too long", session);
		return rc;
	}
	fd = shm_open(seg->name, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		ns_errf(err, errlen, "shm_open %s: %s", seg->name, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		ns_errf(err, errlen, "fstat %s: %s", seg->name, strerror(errno));
		close(fd);
		return rc;
	}
	if (st.st_size < (off_t)sizeof(struct ns_seg_header)) {
		ns_errf(err, errlen, "segment %s: %lld bytes, smaller than its header", seg->name,
			(long long)st.st_size);
		close(fd);
		return -EPROTO;
	}
	seg->size = (size_t)st.st_size;
	seg->base = mmap(NULL, seg->size, writable ? PROT_READ | PROT_WRITE : PROT_READ,
			 MAP_SHARED, fd, 0);
	close(fd);
	if (seg->base == MAP_FAILED) {
		rc = -errno;
		seg->base = NULL;
		ns_errf(err, errlen, "mmap %s: %s", seg->name, strerror(-rc));
		return rc;
	}
	rc = ns_seg_check_header(seg->base, seg->size, kind, session, why, sizeof(why));
	if (rc) {
		ns_errf(err, errlen, "%s: %s", seg->name, why);
		ns_seg_unmap(seg);
		return rc;
	}
	return 0;
}

void ns_seg_unmap(struct ns_seg *seg)
{
	if (seg->base)
		munmap(seg->base, seg->size);
	seg->base = NULL;
	seg->size = 0;
}

int ns_seg_unlink(const char *session, const char *what)
{
	char name[NS_SEG_NAME_LEN];
	int rc = ns_seg_name(name, sizeof(name), session, what);

	if (rc)
		return rc;
	return shm_unlink(name) == 0 ? 0 : -errno;
}

int ns_seg_unlink_session(const char *session)
{
	char user[32], prefix[96], path[300];
	struct dirent *de;
	DIR *d;
	int n = 0;

	if (!ns_session_id_valid(session))
		return 0;
	ns_seg_user(user, sizeof(user));
	snprintf(prefix, sizeof(prefix), "ns-%s-%s-", user, session);
	d = opendir("/dev/shm");
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
			continue;
		snprintf(path, sizeof(path), "/%s", de->d_name);
		if (shm_unlink(path) == 0)
			n++;
	}
	closedir(d);
	return n;
}

bool ns_pid_alive(pid_t pid)
{
	char path[64], buf[256];
	FILE *f;
	char *p;
	bool alive = true;

	if (pid <= 0)
		return false;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	/* a zombie still answers kill(0) but is dead for our purposes */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno != ENOENT;
	if (fgets(buf, sizeof(buf), f)) {
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
			alive = false;
	}
	fclose(f);
	return alive;
}

int ns_seg_sweep_stale(void)
{
	char user[32], prefix[64], path[300];
	struct ns_seg_header h;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int removed = 0;

	ns_seg_user(user, sizeof(user));
	snprintf(prefix, sizeof(prefix), "ns-%s-", user);
	d = opendir("/dev/shm");
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		bool stale = false;
		ssize_t got;
		int fd;

		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
			continue;
		snprintf(path, sizeof(path), "/%s", de->d_name);
		fd = shm_open(path, O_RDONLY | O_CLOEXEC, 0);
		if (fd < 0)
			continue;
		got = pread(fd, &h, sizeof(h), 0);
		if (fstat(fd, &st) != 0) {
			close(fd);
			continue;
		}
		close(fd);
		if (got == (ssize_t)sizeof(h) && h.magic == NS_SEG_MAGIC)
			stale = !ns_pid_alive(h.owner_pid);
		else
			stale = time(NULL) - st.st_mtime > 60; /* never finished creating */
		if (stale && shm_unlink(path) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}
