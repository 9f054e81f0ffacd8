/* hub_list.c - a repo's files: the hub's listing (GET /api/models/ORG/NAME/revision/REV
 * ?blobs=true, huggingface_hub's model_info(files_metadata=True)): its commit ("sha") and per
 * file ("siblings") the path, the size and the checksum (lfs.sha256 for LFS files, blobId for
 * files kept in git), and the list those go into (a cache's snapshot fills one too). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub.h"
#include "ns_util.h"

#define S_LISTING_MAX (64u << 20) /* a repo listing's JSON, at most */

int hub_grow(void **arr, size_t *cap, size_t item)
{
	size_t n = *cap ? 2 * *cap : 16;
	void *na;

	if (n > SIZE_MAX / item)
		return -ENOMEM;
	na = realloc(*arr, n * item);
	if (!na)
		return -ENOMEM;
	*arr = na;
	*cap = n;
	return 0;
}

int hub_listing_add(struct hub_listing *l, const char *path, uint64_t size, bool has_size,
		    const char *oid, bool lfs)
{
	struct hub_file *f;

	if (l->n == l->cap && hub_grow((void **)&l->files, &l->cap, sizeof(*f)))
		return -ENOMEM;
	f = &l->files[l->n];
	memset(f, 0, sizeof(*f));
	f->path = strdup(path);
	if (!f->path)
		return -ENOMEM;
	f->size = size;
	f->has_size = has_size;
	f->lfs = lfs;
	snprintf(f->oid, sizeof(f->oid), "%s", oid ? oid : "");
	l->n++;
	return 0;
}

static int s_by_path(const void *a, const void *b)
{
	return strcmp(((const struct hub_file *)a)->path, ((const struct hub_file *)b)->path);
}

void hub_listing_sort(struct hub_listing *l)
{
	if (l->n > 1)
		qsort(l->files, l->n, sizeof(*l->files), s_by_path);
}

void hub_listing_free(struct hub_listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->files[i].path);
	free(l->files);
	memset(l, 0, sizeof(*l));
}

static int s_parse_listing(const char *body, size_t len, const char *repo, struct hub_listing *l,
			   char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root = json_loadb(body, len, 0, &jerr), *sib, *it;
	const char *sha;
	size_t i;
	int rc = 0;

	if (!root) {
		ns_errf(err, errlen, "the listing of %s is not JSON: %s (line %d)", repo, jerr.text,
			jerr.line);
		return -EBADMSG;
	}
	sha = json_string_value(json_object_get(root, "sha"));
	sib = json_object_get(root, "siblings");
	if (!sha || strlen(sha) != HUB_COMMIT_LEN || !hub_oid_valid(sha) || !json_is_array(sib)) {
		ns_errf(err, errlen, "the listing of %s has no commit (sha) or no file list "
			"(siblings)", repo);
		json_decref(root);
		return -EBADMSG;
	}
	snprintf(l->commit, sizeof(l->commit), "%s", sha);
	json_array_foreach(sib, i, it) {
		const char *path = json_string_value(json_object_get(it, "rfilename"));
		json_t *size = json_object_get(it, "size"), *lfs = json_object_get(it, "lfs");
		const char *oid = json_string_value(json_object_get(it, "blobId"));
		bool has_size = json_is_integer(size) && json_integer_value(size) >= 0;
		uint64_t bytes = has_size ? (uint64_t)json_integer_value(size) : 0;

		if (!path)
			continue;
		if (!hub_path_valid(path)) /* it would leave the snapshot folder */
			continue;
		if (json_is_object(lfs)) {
			json_t *ls = json_object_get(lfs, "size");

			oid = json_string_value(json_object_get(lfs, "sha256"));
			if (json_is_integer(ls) && json_integer_value(ls) >= 0) {
				bytes = (uint64_t)json_integer_value(ls);
				has_size = true;
			}
		}
		if (oid && !hub_oid_valid(oid))
			oid = NULL;
		if ((rc = hub_listing_add(l, path, bytes, has_size, oid, json_is_object(lfs)))) {
			ns_errf(err, errlen, "out of memory");
			break;
		}
	}
	json_decref(root);
	hub_listing_sort(l);
	return rc;
}

int hub_list_repo(struct hub_client *c, const char *repo, const char *rev, struct hub_listing *l,
		  char *err, size_t errlen)
{
	char url[2048], what[HUB_REPO_MAX + 32], *body = NULL;
	size_t len = 0;
	int rc;

	memset(l, 0, sizeof(*l));
	snprintf(what, sizeof(what), "the listing of %s", repo);
	if (snprintf(url, sizeof(url), "%s/api/models/%s/revision/%s?blobs=true",
		     hub_client_endpoint(c), repo, rev) >= (int)sizeof(url))
		return -ENAMETOOLONG;
	rc = hub_get_small(c, url, S_LISTING_MAX, repo, what, &body, &len, err, errlen);
	if (!rc)
		rc = s_parse_listing(body ? body : "", len, repo, l, err, errlen);
	free(body);
	if (rc)
		hub_listing_free(l);
	return rc;
}
