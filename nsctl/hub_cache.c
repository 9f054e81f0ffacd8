/* hub_cache.c - where pulled files live, in huggingface_hub's own layouts, so that what the
 * `hf` tool fetched is reused and what we fetch is found by it (and by llama.cpp -hf).
 *
 * The cache (huggingface_hub's file_download.py and constants.py, read for the layout):
 *   <root>/models--ORG--NAME/blobs/<oid>                   the bytes, named by their checksum
 *   <root>/models--ORG--NAME/blobs/<oid>.incomplete        a download under way
 *   <root>/models--ORG--NAME/snapshots/<commit>/<path>     symlink -> ../../blobs/<oid>
 *   <root>/models--ORG--NAME/refs/main                     the commit main was at
 *   <root>/.locks/models--ORG--NAME/<oid>.lock             held while the blob is written
 * A --local-dir (-o DIR): DIR/<path> are the files themselves, and
 *   DIR/.cache/huggingface/download/<path>.metadata        "<commit>\n<oid>\n<unix time>\n"
 * says which content each one is. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hub.h"
#include "ns_util.h"

#define S_SNAPSHOT_DEPTH 16 /* folders inside a snapshot walked at most */

static int s_fmt(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int s_fmt(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int hub_cache_root(char *out, size_t outlen, char *err, size_t errlen)
{
	static const struct { const char *var, *sub; } order[] = {
		{ "HF_HUB_CACHE", "" },
		{ "HUGGINGFACE_HUB_CACHE", "" },
		{ "HF_HOME", "/hub" },
		{ "XDG_CACHE_HOME", "/huggingface/hub" },
		{ "HOME", "/.cache/huggingface/hub" },
	};
	const struct passwd *pw;

	for (size_t i = 0; i < NS_ARRAY_LEN(order); i++) {
		const char *v = getenv(order[i].var);

		if (!v || !*v)
			continue;
		if (s_fmt(out, outlen, "%s%s", v, order[i].sub)) {
			ns_errf(err, errlen, "%s is too long a path", order[i].var);
			return -ENAMETOOLONG;
		}
		return 0;
	}
	pw = getpwuid(getuid());
	if (pw && pw->pw_dir && *pw->pw_dir && !s_fmt(out, outlen, "%s/.cache/huggingface/hub",
						      pw->pw_dir))
		return 0;
	ns_errf(err, errlen, "no cache directory: set HF_HUB_CACHE or HF_HOME");
	return -ENOENT;
}

int hub_mkdirs(const char *dir)
{
	char buf[PATH_MAX];
	struct stat st;

	if (!*dir)
		return -ENOENT;
	if (s_fmt(buf, sizeof(buf), "%s", dir))
		return -ENAMETOOLONG;
	for (char *c = buf + 1;; c++) {
		if (*c != '/' && *c)
			continue;
		char keep = *c;
		*c = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		if (stat(buf, &st))
			return -errno;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		if (!keep)
			return 0;
		*c = keep;
	}
}

static int s_mkparent(const char *path)
{
	char buf[PATH_MAX];
	char *slash;

	if (s_fmt(buf, sizeof(buf), "%s", path))
		return -ENAMETOOLONG;
	slash = strrchr(buf, '/');
	if (!slash || slash == buf)
		return 0;
	*slash = '\0';
	return hub_mkdirs(buf);
}

int hub_dest_cache(struct hub_dest *d, const char *root, const char *repo, const char *commit,
		   char *err, size_t errlen)
{
	char folder[HUB_REPO_MAX + 16];

	memset(d, 0, sizeof(*d));
	if (hub_repo_folder(repo, folder, sizeof(folder)) ||
	    s_fmt(d->dir, sizeof(d->dir), "%s/%s", root, folder) ||
	    s_fmt(d->locks, sizeof(d->locks), "%s/.locks/%s", root, folder)) {
		ns_errf(err, errlen, "cache path too long under %s", root);
		return -ENAMETOOLONG;
	}
	snprintf(d->commit, sizeof(d->commit), "%s", commit);
	return 0;
}

int hub_dest_local(struct hub_dest *d, const char *dir, const char *commit, char *err,
		   size_t errlen)
{
	memset(d, 0, sizeof(*d));
	d->local = true;
	if (s_fmt(d->dir, sizeof(d->dir), "%s", dir)) {
		ns_errf(err, errlen, "output directory path too long");
		return -ENAMETOOLONG;
	}
	snprintf(d->commit, sizeof(d->commit), "%s", commit);
	return 0;
}

int hub_dest_paths(const struct hub_dest *d, const char *path, const char *oid,
		   struct hub_paths *p, char *err, size_t errlen)
{
	int rc;

	memset(p, 0, sizeof(*p));
	if (d->local)
		rc = s_fmt(p->final, sizeof(p->final), "%s/%s", d->dir, path) ||
		     s_fmt(p->blob, sizeof(p->blob), "%s", p->final) ||
		     s_fmt(p->meta, sizeof(p->meta), "%s/.cache/huggingface/download/%s.metadata",
			   d->dir, path) ||
		     s_fmt(p->lock, sizeof(p->lock), "%s/.cache/huggingface/download/%s.lock",
			   d->dir, path) ||
		     s_fmt(p->partial, sizeof(p->partial),
			   "%s/.cache/huggingface/download/%s.%s.incomplete", d->dir, path, oid);
	else
		rc = s_fmt(p->final, sizeof(p->final), "%s/snapshots/%s/%s", d->dir, d->commit,
			   path) ||
		     s_fmt(p->blob, sizeof(p->blob), "%s/blobs/%s", d->dir, oid) ||
		     s_fmt(p->partial, sizeof(p->partial), "%s/blobs/%s.incomplete", d->dir, oid) ||
		     s_fmt(p->lock, sizeof(p->lock), "%s/%s.lock", d->locks, oid);
	if (rc) {
		ns_errf(err, errlen, "path of %s too long under %s", path, d->dir);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* A regular file (symlinks followed) of exactly size bytes. */
static bool s_file_of_size(const char *path, uint64_t size)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size;
}

/* The snapshot's link to its blob: ../ once per folder between it and the repo folder. */
static int s_link(const struct hub_dest *d, const struct hub_paths *p, const char *oid,
		  char *err, size_t errlen)
{
	const char *rel = p->final + strlen(d->dir) + 1; /* "snapshots/<commit>/<path>" */
	char target[PATH_MAX] = "";
	size_t used = 0;
	int rc;

	for (const char *c = rel; *c; c++) {
		if (*c != '/')
			continue;
		if (used + 3 >= sizeof(target))
			return -ENAMETOOLONG;
		memcpy(target + used, "../", 4);
		used += 3;
	}
	if (s_fmt(target + used, sizeof(target) - used, "blobs/%s", oid))
		return -ENAMETOOLONG;
	if ((rc = s_mkparent(p->final))) {
		ns_errf(err, errlen, "cannot make the folder of %s: %s", p->final, strerror(-rc));
		return rc;
	}
	if (unlink(p->final) && errno != ENOENT) {
		rc = -errno;
		ns_errf(err, errlen, "cannot replace %s: %s", p->final, strerror(errno));
		return rc;
	}
	if (symlink(target, p->final)) {
		rc = -errno;
		ns_errf(err, errlen, "cannot link %s to its blob: %s", p->final, strerror(errno));
		return rc;
	}
	return 0;
}

/* "<commit>\n<oid>\n<time>\n" of a local-dir file, written atomically. The time (seconds,
 * fractional) is later than the file's mtime: huggingface_hub trusts metadata no older than
 * the file, and re-hashes the file otherwise. */
static int s_write_meta(const struct hub_dest *d, const struct hub_paths *p, const char *oid,
			char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	struct timespec now;
	FILE *f;
	int rc;

	if ((rc = s_mkparent(p->meta)) || (rc = s_fmt(tmp, sizeof(tmp), "%s.tmp", p->meta))) {
		ns_errf(err, errlen, "cannot write %s: %s", p->meta, strerror(-rc));
		return rc;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	f = fopen(tmp, "w");
	if (!f) {
		rc = -errno;
	} else {
		bool bad = fprintf(f, "%s\n%s\n%lld.%03ld\n", d->commit, oid, (long long)now.tv_sec,
				   now.tv_nsec / 1000000) < 0;

		if ((fclose(f) || bad) && (rc = -errno) == 0)
			rc = -EIO;
	}
	if (!rc && rename(tmp, p->meta))
		rc = -errno;
	if (rc) {
		ns_errf(err, errlen, "cannot write %s: %s", p->meta, strerror(-rc));
		unlink(tmp);
	}
	return rc;
}

/* The metadata of a local-dir file names oid and is not older than the file. */
static bool s_meta_says(const struct hub_paths *p, const char *oid)
{
	char commit[128], got[128];
	double stamp = 0;
	struct stat st;
	FILE *f = fopen(p->meta, "r");
	bool ok;

	if (!f)
		return false;
	ok = fscanf(f, "%127s %127s %lf", commit, got, &stamp) == 3 && !strcasecmp(got, oid) &&
	     !stat(p->final, &st) && (double)st.st_mtime - 1.0 <= stamp;
	fclose(f);
	return ok;
}

static int s_hash_matches(const char *path, const char *oid, uint64_t size, bool *yes)
{
	struct hub_hash *h = NULL;
	char hex[HUB_OID_MAX + 1];
	int fd, rc;

	*yes = false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = hub_hash_new(&h, oid, size);
	if (!rc)
		rc = hub_hash_fd(h, fd, size);
	if (!rc) {
		rc = hub_hash_check(h, oid, hex);
		*yes = rc == 0;
		rc = rc == -EBADMSG ? 0 : rc;
	}
	hub_hash_free(&h);
	close(fd);
	return rc;
}

int hub_dest_lookup(const struct hub_dest *d, const struct hub_paths *p, const char *oid,
		    uint64_t size, bool readonly, bool *present, uint64_t *partial, char *err,
		    size_t errlen)
{
	struct stat st;
	int rc;

	*present = false;
	*partial = 0;
	if (!d->local) {
		if (s_file_of_size(p->final, size)) {
			*present = true;
			return 0;
		}
		/* fetched for another snapshot, or by hf without this link */
		if (s_file_of_size(p->blob, size)) {
			*present = true;
			return readonly ? 0 : s_link(d, p, oid, err, errlen);
		}
	} else if (s_file_of_size(p->final, size)) {
		bool same;

		if (s_meta_says(p, oid)) {
			*present = true;
			return 0;
		}
		/* no or stale metadata: the content decides (as huggingface_hub does) */
		if ((rc = s_hash_matches(p->final, oid, size, &same))) {
			ns_errf(err, errlen, "cannot read %s: %s", p->final, strerror(-rc));
			return rc;
		}
		if (same) {
			*present = true;
			return readonly ? 0 : s_write_meta(d, p, oid, err, errlen);
		}
	}
	if (!stat(p->partial, &st) && S_ISREG(st.st_mode))
		*partial = (uint64_t)st.st_size;
	return 0;
}

int hub_dest_finish(const struct hub_dest *d, const struct hub_paths *p, const char *oid,
		    char *err, size_t errlen)
{
	int rc;

	if ((rc = s_mkparent(p->blob))) {
		ns_errf(err, errlen, "cannot make the folder of %s: %s", p->blob, strerror(-rc));
		return rc;
	}
	if (rename(p->partial, p->blob)) {
		rc = -errno;
		ns_errf(err, errlen, "cannot rename %s to %s: %s", p->partial, p->blob,
			strerror(errno));
		return rc;
	}
	return d->local ? s_write_meta(d, p, oid, err, errlen) : s_link(d, p, oid, err, errlen);
}

int hub_cache_read_ref(const char *repo_dir, const char *name, char commit[HUB_COMMIT_LEN + 1])
{
	char path[PATH_MAX], buf[HUB_COMMIT_LEN + 8];
	ssize_t n;
	int fd;

	if (s_fmt(path, sizeof(path), "%s/refs/%s", repo_dir, name))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	if (n != HUB_COMMIT_LEN || !hub_oid_valid(buf))
		return -EBADMSG;
	memcpy(commit, buf, HUB_COMMIT_LEN + 1);
	return 0;
}

int hub_cache_write_ref(const char *repo_dir, const char *name, const char *commit, char *err,
			size_t errlen)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	ssize_t n;
	int fd, rc;

	if (s_fmt(path, sizeof(path), "%s/refs/%s", repo_dir, name) ||
	    s_fmt(tmp, sizeof(tmp), "%s/refs/.%s.XXXXXX", repo_dir, name))
		return -ENAMETOOLONG;
	if ((rc = s_mkparent(path))) {
		ns_errf(err, errlen, "cannot make %s/refs: %s", repo_dir, strerror(-rc));
		return rc;
	}
	fd = mkstemp(tmp);
	if (fd < 0) {
		rc = -errno;
		ns_errf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		return rc;
	}
	n = write(fd, commit, strlen(commit)); /* huggingface_hub writes no newline */
	rc = n == (ssize_t)strlen(commit) ? 0 : n < 0 ? -errno : -EIO;
	(void)fchmod(fd, 0644); /* mkstemp's 0600; the ref is as readable as the rest */
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc) {
		ns_errf(err, errlen, "cannot write %s: %s", path, strerror(-rc));
		unlink(tmp);
	}
	return rc;
}

/* dir/rel: files added to l with paths relative to the snapshot. */
static int s_walk(const char *snap, const char *rel, int depth, struct hub_listing *l)
{
	char dirpath[PATH_MAX];
	struct dirent *de;
	DIR *dir;
	int rc = 0;

	if (depth > S_SNAPSHOT_DEPTH)
		return 0;
	if (s_fmt(dirpath, sizeof(dirpath), "%s%s%s", snap, *rel ? "/" : "", rel))
		return -ENAMETOOLONG;
	dir = opendir(dirpath);
	if (!dir)
		return -errno;
	while (!rc && (de = readdir(dir))) {
		char child[PATH_MAX], relchild[PATH_MAX], target[PATH_MAX];
		struct stat lst, st;
		const char *oid = "";
		ssize_t tn;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (s_fmt(relchild, sizeof(relchild), "%s%s%s", rel, *rel ? "/" : "", de->d_name) ||
		    s_fmt(child, sizeof(child), "%s/%s", snap, relchild))
			continue;
		if (lstat(child, &lst))
			continue;
		if (S_ISDIR(lst.st_mode)) {
			rc = s_walk(snap, relchild, depth + 1, l);
			continue;
		}
		if (stat(child, &st) || !S_ISREG(st.st_mode))
			continue; /* a link whose blob is gone is not a file of the snapshot */
		if (S_ISLNK(lst.st_mode) && (tn = readlink(child, target, sizeof(target) - 1)) > 0) {
			const char *base;

			target[tn] = '\0';
			base = strrchr(target, '/');
			base = base ? base + 1 : target;
			if (hub_oid_valid(base))
				oid = base;
		}
		rc = hub_listing_add(l, relchild, (uint64_t)st.st_size, true, oid, strlen(oid) == 64);
	}
	closedir(dir);
	return rc;
}

int hub_cache_snapshot(const char *repo_dir, const char *commit, struct hub_listing *l,
		       char *err, size_t errlen)
{
	char snap[PATH_MAX];
	int rc;

	memset(l, 0, sizeof(*l));
	snprintf(l->commit, sizeof(l->commit), "%s", commit);
	if (s_fmt(snap, sizeof(snap), "%s/snapshots/%s", repo_dir, commit))
		return -ENAMETOOLONG;
	rc = s_walk(snap, "", 0, l);
	if (rc) {
		ns_errf(err, errlen, "cannot list %s: %s", snap, strerror(-rc));
		hub_listing_free(l);
		return rc;
	}
	hub_listing_sort(l);
	return 0;
}
