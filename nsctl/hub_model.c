/* hub_model.c - MODEL arguments naming a pulled model: `nsctl run unsloth/Qwen3-8B-GGUF:Q4_K_M`
 * opens the file `nsctl pull` (or `hf download`, or llama.cpp -hf) put in the hub cache. The
 * lookup is offline: refs/main names the snapshot, and the files are chosen in it by the
 * rules pull uses on the hub's listing, so both agree on which file a name means. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub.h"
#include "ns_util.h"

#define S_INDEX_MAX (64u << 20) /* a safetensors index read from the cache, at most */

static bool s_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !memcmp(s + n - k, suffix, k);
}

/* Text that names a local path rather than a repo: absolute or ./-relative, no '/', or a
 * "dir/file.gguf" that is not there (its open reports it as a missing file). */
static bool s_looks_local(const char *arg, const struct hub_ref *r)
{
	return arg[0] == '/' || arg[0] == '.' || arg[0] == '~' || !strchr(arg, '/') ||
	       (!r->quant[0] && !r->file[0] && s_ends_with(arg, ".gguf"));
}

static int s_read_file(const char *path, char **buf, size_t *len)
{
	struct stat st;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

	*buf = NULL;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_size < 0 || (uint64_t)st.st_size > S_INDEX_MAX) {
		close(fd);
		return -EFBIG;
	}
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf) {
		close(fd);
		return -ENOMEM;
	}
	got = pread(fd, *buf, (size_t)st.st_size, 0);
	if (got != st.st_size)
		rc = got < 0 ? -errno : -EIO;
	close(fd);
	if (rc) {
		free(*buf);
		*buf = NULL;
		return rc;
	}
	(*buf)[got] = '\0';
	*len = (size_t)got;
	return 0;
}

/* The snapshot refs/main points at, and the files r means in it, into out. */
static int s_resolve(const char *root, const struct hub_ref *r, char *out, size_t outlen,
		     char *err, size_t errlen)
{
	char folder[HUB_REPO_MAX + 16], repo_dir[PATH_MAX], commit[HUB_COMMIT_LEN + 1];
	char snap[PATH_MAX];
	struct hub_listing l;
	struct hub_pick p;
	int rc;

	if (hub_repo_folder(r->repo, folder, sizeof(folder)) ||
	    snprintf(repo_dir, sizeof(repo_dir), "%s/%s", root, folder) >= (int)sizeof(repo_dir))
		return -ENAMETOOLONG;
	rc = hub_cache_read_ref(repo_dir, "main", commit);
	if (rc) {
		ns_errf(err, errlen, "%s", rc == -ENOENT ? "nothing of it there" :
						       "its refs/main is unreadable");
		return -ENOENT;
	}
	if (snprintf(snap, sizeof(snap), "%s/snapshots/%s", repo_dir, commit) >= (int)sizeof(snap))
		return -ENAMETOOLONG;
	if ((rc = hub_cache_snapshot(repo_dir, commit, &l, err, errlen)))
		return rc;
	rc = hub_pick_files(&l, r, &p, err, errlen);
	if (!rc && p.needs_index) {
		char path[PATH_MAX], *json = NULL;
		size_t len = 0;

		if (snprintf(path, sizeof(path), "%s/%s", snap, l.files[p.index_file].path) >=
		    (int)sizeof(path))
			rc = -ENAMETOOLONG;
		else
			rc = s_read_file(path, &json, &len);
		if (rc)
			ns_errf(err, errlen, "cannot read %s: %s", path, strerror(-rc));
		else
			rc = hub_pick_add_shards(&l, &p, json, len, err, errlen);
		free(json);
	}
	if (!rc) {
		int n = p.kind == HUB_KIND_SAFETENSORS ?
				snprintf(out, outlen, "%s", snap) :
				snprintf(out, outlen, "%s/%s", snap, l.files[p.primary].path);

		rc = n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
	}
	hub_pick_free(&p);
	hub_listing_free(&l);
	return rc;
}

int nsctl_model_arg(const char *who, const char **model, char *buf, size_t buflen)
{
	const char *arg = *model;
	char root[PATH_MAX], err[NS_ERR_LEN], why[NS_ERR_LEN];
	struct hub_ref r;
	struct stat st;
	int rc;

	if (!arg || !stat(arg, &st))
		return 0; /* there: a file or a folder, whatever its name looks like */
	if (hub_ref_parse(arg, &r, err, sizeof(err)) || s_looks_local(arg, &r))
		return 0; /* a path; opening it says what is wrong */
	if ((rc = hub_cache_root(root, sizeof(root), err, sizeof(err)))) {
		fprintf(stderr, "%s: %s is not a file, and %s\n", who, arg, err);
		return 2;
	}
	rc = s_resolve(root, &r, buf, buflen, why, sizeof(why));
	if (rc == -ENAMETOOLONG) {
		fprintf(stderr, "%s: %s: path too long under %s\n", who, arg, root);
		return 2;
	}
	if (rc) {
		fprintf(stderr, "%s: %s is not a file, and not in the Hugging Face cache %s (%s); "
			"fetch it with: nsctl pull %s\n", who, arg, root, why, arg);
		return 2;
	}
	*model = buf;
	return 0;
}
