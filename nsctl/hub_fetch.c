/* hub_fetch.c - one file from the hub to its place: reused when its checksum is already
 * there, else written to a partial file (continued with a Range request after a kill or a
 * cut connection), hashed as it arrives, and given its final name only when the hash is the
 * hub's. The partial file is held under huggingface_hub's lock, so an `hf download` of the
 * same blob waits for us and we for it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub.h"
#include "ns_util.h"

/* The bytes' way to disk: at their offset in the partial file, through the hash. */
struct s_writer {
	int fd;
	const char *path;
	struct hub_hash *hash;
	struct ns_progress *prog;
	uint64_t pos, fetched;
	char *err;
	size_t errlen;
};

static int s_start(void *arg, uint64_t offset)
{
	struct s_writer *w = arg;
	int rc;

	if (offset == w->pos)
		return 0;
	/* the server sent the whole file in answer to a range: what we hold goes */
	if (offset != 0 || ftruncate(w->fd, 0)) {
		rc = offset ? -EBADMSG : -errno;
		ns_errf(w->err, w->errlen, "cannot restart %s: %s", w->path, strerror(-rc));
		return rc;
	}
	w->pos = 0;
	if ((rc = hub_hash_reset(w->hash)))
		return rc;
	ns_progress_restart(w->prog);
	return 0;
}

static int s_data(void *arg, const char *buf, size_t n)
{
	struct s_writer *w = arg;
	size_t done = 0;
	int rc;

	while (done < n) {
		ssize_t k = pwrite(w->fd, buf + done, n - done, (off_t)(w->pos + done));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = k < 0 ? -errno : -EIO;
			ns_errf(w->err, w->errlen, "cannot write %s: %s", w->path, strerror(-rc));
			return rc;
		}
		done += (size_t)k;
	}
	if ((rc = hub_hash_update(w->hash, buf, n)))
		return rc;
	w->pos += n;
	w->fetched += n;
	ns_progress_add(w->prog, n);
	return 0;
}

/* HEAD the file and check the hub's answer against the listing's. */
static int s_meta(struct hub_client *c, const char *repo, const char *commit,
		  const struct hub_file *f, struct hub_meta *m, char *err, size_t errlen)
{
	int rc = hub_head_file(c, repo, commit, f->path, m, err, errlen);

	if (rc)
		return rc;
	if (strcasecmp(m->commit, commit)) {
		ns_errf(err, errlen, "%s: resolve answered for commit %s, not %s", f->path, m->commit,
			commit);
		return -EBADMSG;
	}
	/* an LFS file's sha256 is the same fact in both answers (a git file's blob id is too,
	 * but huggingface_hub never relies on that, so neither do we) */
	if (f->lfs && f->oid[0] && strcasecmp(f->oid, m->oid)) {
		ns_errf(err, errlen, "%s: the listing's checksum %s is not resolve's %s", f->path,
			f->oid, m->oid);
		return -EBADMSG;
	}
	if (f->has_size && f->size != m->size) {
		ns_errf(err, errlen, "%s: the listing's size %llu is not resolve's %llu", f->path,
			(unsigned long long)f->size, (unsigned long long)m->size);
		return -EBADMSG;
	}
	return 0;
}

/* The lock huggingface_hub takes for this blob; waits (saying so) while another holds it. */
static int s_lock(const struct hub_paths *p, const char *name, int *fd, char *err, size_t errlen)
{
	char dir[4096];
	char *slash;
	int rc;

	snprintf(dir, sizeof(dir), "%s", p->lock);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	if (slash && (rc = hub_mkdirs(dir))) {
		ns_errf(err, errlen, "cannot make %s: %s", dir, strerror(-rc));
		return rc;
	}
	*fd = open(p->lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (*fd < 0) {
		rc = -errno;
		ns_errf(err, errlen, "cannot open %s: %s", p->lock, strerror(errno));
		return rc;
	}
	if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	if (errno == EWOULDBLOCK) {
		fprintf(stderr, "nsctl pull: %s: another process is downloading it; waiting\n", name);
		while (flock(*fd, LOCK_EX) && errno == EINTR)
			;
		return 0;
	}
	rc = -errno;
	ns_errf(err, errlen, "cannot lock %s: %s", p->lock, strerror(errno));
	close(*fd);
	*fd = -1;
	return rc;
}

/* Download into the partial file from where it ends, then check the whole against oid. */
static int s_download(struct hub_client *c, const struct hub_paths *p, const struct hub_meta *m,
		      const char *name, bool progress, uint64_t *resumed_at, uint64_t *fetched,
		      char *err, size_t errlen)
{
	struct ns_progress prog;
	struct s_writer w = { .fd = -1, .path = p->partial, .prog = &prog, .err = err,
			      .errlen = errlen };
	char hex[HUB_OID_MAX + 1], dir[4096];
	struct stat st;
	char *slash;
	int rc;

	snprintf(dir, sizeof(dir), "%s", p->partial);
	if ((slash = strrchr(dir, '/')) && (*slash = '\0', (rc = hub_mkdirs(dir)))) {
		ns_errf(err, errlen, "cannot make %s: %s", dir, strerror(-rc));
		return rc;
	}
	w.fd = open(p->partial, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (w.fd < 0 || fstat(w.fd, &st)) {
		rc = -errno;
		ns_errf(err, errlen, "cannot open %s: %s", p->partial, strerror(errno));
		goto out;
	}
	w.pos = (uint64_t)st.st_size;
	if (w.pos > m->size) { /* longer than the file: not a prefix of it */
		if (ftruncate(w.fd, 0)) {
			rc = -errno;
			ns_errf(err, errlen, "cannot truncate %s: %s", p->partial, strerror(errno));
			goto out;
		}
		w.pos = 0;
	}
	*resumed_at = w.pos;
	if ((rc = hub_hash_new(&w.hash, m->oid, m->size)) ||
	    (w.pos && (rc = hub_hash_fd(w.hash, w.fd, w.pos)))) {
		ns_errf(err, errlen, "cannot read %s: %s", p->partial, strerror(-rc));
		goto out;
	}
	ns_progress_begin(&prog, progress, name, NULL, m->size, w.pos);
	if (w.pos < m->size) {
		struct hub_sink sink = { .start = s_start, .data = s_data, .arg = &w, .err = err,
					 .errlen = errlen };

		rc = hub_get(c, m->url, w.pos, m->size, &sink, err, errlen);
	}
	ns_progress_end(&prog);
	*fetched = w.fetched;
	if (rc)
		goto out; /* the partial stays: the next pull continues it */
	if (fsync(w.fd)) {
		rc = -errno;
		ns_errf(err, errlen, "cannot write %s: %s", p->partial, strerror(errno));
		goto out;
	}
	if (hub_hash_check(w.hash, m->oid, hex)) {
		ns_errf(err, errlen, "%s: the downloaded bytes hash to %s, the hub's checksum is %s: "
			"refused (the partial download is removed; pull again)", name, hex, m->oid);
		unlink(p->partial);
		rc = -EBADMSG;
	}
out:
	hub_hash_free(&w.hash);
	if (w.fd >= 0)
		close(w.fd);
	return rc;
}

int hub_fetch_file(struct hub_client *c, const struct hub_dest *d, const char *repo,
		   const struct hub_file *f, bool progress, enum hub_fetched *how,
		   uint64_t *fetched, char *final, size_t finallen, char *err, size_t errlen)
{
	struct hub_meta m;
	struct hub_paths p;
	uint64_t partial = 0, resumed_at = 0;
	bool present = false;
	int lock_fd = -1, rc;

	*fetched = 0;
	*how = HUB_REUSED;
	if ((rc = s_meta(c, repo, d->commit, f, &m, err, errlen)) ||
	    (rc = hub_dest_paths(d, f->path, m.oid, &p, err, errlen)) ||
	    (rc = hub_dest_lookup(d, &p, m.oid, m.size, false, &present, &partial, err, errlen)))
		return rc;
	snprintf(final, finallen, "%s", p.final);
	if (present)
		return 0;
	if ((rc = s_lock(&p, f->path, &lock_fd, err, errlen)))
		return rc;
	/* another process may have finished it while we waited */
	rc = hub_dest_lookup(d, &p, m.oid, m.size, false, &present, &partial, err, errlen);
	if (!rc && !present) {
		rc = s_download(c, &p, &m, f->path, progress, &resumed_at, fetched, err, errlen);
		if (!rc)
			rc = hub_dest_finish(d, &p, m.oid, err, errlen);
		*how = resumed_at ? HUB_RESUMED : HUB_DOWNLOADED;
	}
	close(lock_fd);
	return rc;
}

/* ---- a small file into memory ---- */

struct s_mem {
	char *buf;
	size_t len, max;
	struct hub_hash *hash;
	char *err;
	size_t errlen;
};

static int s_mem_start(void *arg, uint64_t offset)
{
	struct s_mem *mm = arg;

	mm->len = 0;
	return offset ? -EBADMSG : hub_hash_reset(mm->hash);
}

static int s_mem_data(void *arg, const char *buf, size_t n)
{
	struct s_mem *mm = arg;

	if (n > mm->max - mm->len) {
		ns_errf(mm->err, mm->errlen, "larger than %zu bytes", mm->max);
		return -EFBIG;
	}
	memcpy(mm->buf + mm->len, buf, n);
	mm->len += n;
	return hub_hash_update(mm->hash, buf, n);
}

int hub_fetch_text(struct hub_client *c, const char *repo, const char *commit,
		   const struct hub_file *f, size_t max, char **buf, size_t *len, char *err,
		   size_t errlen)
{
	struct s_mem mm = { .err = err, .errlen = errlen };
	struct hub_sink sink = { .start = s_mem_start, .data = s_mem_data, .arg = &mm, .err = err,
				 .errlen = errlen };
	char hex[HUB_OID_MAX + 1];
	struct hub_meta m;
	int rc;

	*buf = NULL;
	*len = 0;
	if ((rc = s_meta(c, repo, commit, f, &m, err, errlen)))
		return rc;
	if (m.size > max) {
		ns_errf(err, errlen, "%s: %llu bytes, more than the %zu expected", f->path,
			(unsigned long long)m.size, max);
		return -EFBIG;
	}
	mm.max = (size_t)m.size;
	mm.buf = malloc(mm.max + 1);
	if (!mm.buf)
		return -ENOMEM;
	rc = hub_hash_new(&mm.hash, m.oid, m.size);
	if (!rc && m.size)
		rc = hub_get(c, m.url, 0, m.size, &sink, err, errlen);
	if (!rc && hub_hash_check(mm.hash, m.oid, hex)) {
		ns_errf(err, errlen, "%s: the downloaded bytes hash to %s, the hub's checksum is %s",
			f->path, hex, m.oid);
		rc = -EBADMSG;
	}
	hub_hash_free(&mm.hash);
	if (rc) {
		free(mm.buf);
		return rc;
	}
	mm.buf[mm.len] = '\0';
	*buf = mm.buf;
	*len = mm.len;
	return 0;
}
