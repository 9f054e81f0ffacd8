/* hf_model.c - a Hugging Face checkpoint as a struct ns_model: which files, then config,
 * tensors and tokenizer (see hf_model.h). */
#include "hf_model.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf_meta.h"
#include "hf_config.h"
#include "hf_tensors.h"
#include "hf_vocab.h"
#include "ns_util.h"
#include "safetensors.h"

#define S_INDEX "model.safetensors.index.json"
#define S_SINGLE "model.safetensors"

/* ---- the store: allocations that live as long as the model ---- */

struct s_block {
	struct s_block *next;
	size_t used, cap;
	max_align_t data[];
};

struct ns_hf_store {
	struct s_block *blocks;
};

void *ns_hf_store_alloc(struct ns_hf_store *s, size_t n)
{
	struct s_block *b = s->blocks;
	size_t a = sizeof(max_align_t), need = (n + a - 1) / a * a;
	void *p;

	if (n > SIZE_MAX / 2)
		return NULL;
	if (!b || b->cap - b->used < need) {
		size_t cap = need > (64u << 10) ? need : (64u << 10);

		b = malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->used = 0;
		b->cap = cap;
		b->next = s->blocks;
		s->blocks = b;
	}
	p = (char *)b->data + b->used;
	b->used += need;
	memset(p, 0, n);
	return p;
}

void ns_hf_store_free(struct ns_hf_store **ps)
{
	struct ns_hf_store *s = ps ? *ps : NULL;

	if (!s)
		return;
	while (s->blocks) {
		struct s_block *b = s->blocks;

		s->blocks = b->next;
		free(b);
	}
	free(s);
	*ps = NULL;
}

/* ---- which files ---- */

static bool s_ends(const char *s, const char *p)
{
	size_t n = strlen(s), m = strlen(p);

	return n >= m && !strcmp(s + n - m, p);
}

static bool s_is_file(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode);
}

bool ns_hf_is_checkpoint(const char *path)
{
	struct stat st;

	if (stat(path, &st))
		return false;
	if (S_ISDIR(st.st_mode))
		return true;
	return S_ISREG(st.st_mode) && (s_ends(path, ".safetensors") ||
				       s_ends(path, ".safetensors.index.json"));
}

/* The checkpoint's files: dir, and either the index or the single file. */
struct s_where {
	char dir[4096];
	char index[4096];  /* "" when there is none */
	char single[4096]; /* the one safetensors file when there is no index */
};

static int s_join(char *out, size_t n, const char *dir, const char *name, char *err,
		  size_t errlen)
{
	if (snprintf(out, n, "%s/%s", dir, name) >= (int)n) {
		ns_errf(err, errlen, "%s: path too long", dir);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* Does the index name file (a basename) as a shard? */
static bool s_index_names(const char *index, const char *file)
{
	json_t *root = json_load_file(index, 0, NULL);
	const json_t *v;
	const char *k;
	bool found = false;

	json_object_foreach(json_object_get(root, "weight_map"), k, v)
		if (json_is_string(v) && !strcmp(json_string_value(v), file))
			found = true;
	json_decref(root);
	return found;
}

static int s_where(const char *path, struct s_where *w, char *err, size_t errlen)
{
	struct stat st;
	const char *slash;
	int rc;

	memset(w, 0, sizeof(*w));
	if (stat(path, &st)) {
		rc = -errno;
		ns_errf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	if (S_ISDIR(st.st_mode)) {
		snprintf(w->dir, sizeof(w->dir), "%s", path);
		for (size_t n = strlen(w->dir); n > 1 && w->dir[n - 1] == '/'; n--)
			w->dir[n - 1] = '\0';
		if ((rc = s_join(w->index, sizeof(w->index), w->dir, S_INDEX, err, errlen)) ||
		    (rc = s_join(w->single, sizeof(w->single), w->dir, S_SINGLE, err, errlen)))
			return rc;
		if (s_is_file(w->index))
			return 0;
		w->index[0] = '\0';
		if (s_is_file(w->single))
			return 0;
		ns_errf(err, errlen, "%s: a checkpoint directory needs %s or %s", path, S_SINGLE,
			S_INDEX);
		return -ENOENT;
	}
	slash = strrchr(path, '/');
	if (slash)
		snprintf(w->dir, sizeof(w->dir), "%.*s", (int)(slash - path), path);
	else
		snprintf(w->dir, sizeof(w->dir), ".");
	if (!w->dir[0])
		snprintf(w->dir, sizeof(w->dir), "/");
	if (s_ends(path, ".index.json")) {
		snprintf(w->index, sizeof(w->index), "%s", path);
		return 0;
	}
	/* a shard of an indexed checkpoint opens the whole checkpoint, as a GGUF shard does */
	if ((rc = s_join(w->index, sizeof(w->index), w->dir, S_INDEX, err, errlen)))
		return rc;
	if (s_is_file(w->index) && s_index_names(w->index, slash ? slash + 1 : path))
		return 0;
	w->index[0] = '\0';
	snprintf(w->single, sizeof(w->single), "%s", path);
	return 0;
}

/* ---- the files themselves ---- */

struct s_files {
	struct ns_st_file **f;
	uint32_t n;
};

static void s_files_close(struct s_files *fs)
{
	for (uint32_t i = 0; fs->f && i < fs->n; i++)
		ns_st_close(&fs->f[i]);
	free(fs->f);
	fs->f = NULL;
	fs->n = 0;
}

/* A shard name from an index: a plain file name in the checkpoint's directory. */
static bool s_shard_name_ok(const char *s)
{
	return *s && *s != '.' && !strchr(s, '/');
}

static int s_open_index(const struct s_where *w, struct s_files *fs, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root = json_load_file(w->index, JSON_REJECT_DUPLICATES, &je);
	const json_t *map = json_object_get(root, "weight_map"), *v;
	const char **names = NULL;
	const char *k;
	uint32_t n = 0;
	int rc = 0;

	if (!root || !json_is_object(map) || !json_object_size(map)) {
		ns_errf(err, errlen, "%s: %s", w->index, root ? "no weight_map object naming the "
			"tensors' files" : je.text);
		json_decref(root);
		return -EINVAL;
	}
	names = calloc(json_object_size(map), sizeof(*names));
	fs->f = calloc(json_object_size(map), sizeof(*fs->f));
	if (!names || !fs->f) {
		rc = -ENOMEM;
		ns_errf(err, errlen, "%s: out of memory", w->index);
		goto out;
	}
	json_object_foreach((json_t *)map, k, v) { /* the files, in order of first mention */
		const char *file = json_string_value(v);
		uint32_t i;

		if (!file || !s_shard_name_ok(file)) {
			ns_errf(err, errlen, "%s: tensor '%s' names '%s', not a file beside the index",
				w->index, k, file ? file : "(not a string)");
			rc = -EINVAL;
			goto out;
		}
		for (i = 0; i < n && strcmp(names[i], file); i++)
			;
		if (i == n)
			names[n++] = file;
	}
	for (uint32_t i = 0; i < n; i++, fs->n++) {
		char path[4096];

		if ((rc = s_join(path, sizeof(path), w->dir, names[i], err, errlen)))
			goto out;
		if (!s_is_file(path)) {
			ns_errf(err, errlen, "%s: names shard '%s', which is missing (%s)", w->index,
				names[i], path);
			rc = -ENOENT;
			goto out;
		}
		if ((rc = ns_st_open(path, &fs->f[i], err, errlen)))
			goto out;
	}
	json_object_foreach((json_t *)map, k, v) { /* every tensor where the index says */
		const char *file = json_string_value(v);
		uint32_t i;

		for (i = 0; i < n && strcmp(names[i], file); i++)
			;
		if (ns_st_find(fs->f[i], k) < 0) {
			ns_errf(err, errlen, "%s: tensor '%s' should be in %s, which does not hold it",
				w->index, k, file);
			rc = -EINVAL;
			goto out;
		}
	}
out:
	free(names);
	json_decref(root);
	return rc;
}

static int s_open_files(const struct s_where *w, struct s_files *fs, char *err, size_t errlen)
{
	if (w->index[0])
		return s_open_index(w, fs, err, errlen);
	fs->f = calloc(1, sizeof(*fs->f));
	if (!fs->f) {
		ns_errf(err, errlen, "%s: out of memory", w->single);
		return -ENOMEM;
	}
	fs->n = 1;
	return ns_st_open(w->single, &fs->f[0], err, errlen);
}

/* general.name: the directory's name, or NAME of a Hugging Face cache's
 * models--ORG--NAME/snapshots/<revision>. */
static void s_model_name(const char *dir, char *out, size_t n)
{
	const char *base = strrchr(dir, '/'), *snap = strstr(dir, "/snapshots/");
	const char *models = NULL;

	for (const char *p = dir; (p = strstr(p, "models--")); p++)
		models = p;
	if (snap && models && models < snap) {
		const char *name = models + 8, *sep;

		while ((sep = strstr(name, "--")) && sep < snap)
			name = sep + 2;
		snprintf(out, n, "%.*s", (int)(snap - name), name);
		return;
	}
	snprintf(out, n, "%s", base ? base + 1 : dir);
}

/* ---- the model ---- */

static int s_build(struct ns_model *m, const struct s_where *w, const struct s_files *fs,
		   bool vocab, char *err, size_t errlen)
{
	struct ns_hf_config c;
	uint32_t n_mtp = 0;
	char name[256];
	int rc;

	if ((rc = ns_hf_config_load(w->dir, &c, err, errlen)))
		return rc;
	m->n_shards = fs->n;
	m->shards = calloc(fs->n, sizeof(*m->shards));
	if (!m->shards)
		goto oom;
	for (uint32_t i = 0; i < fs->n; i++) {
		m->shards[i] = ns_gguf_meta_new(fs->f[i]->path, fs->f[i]->file_size);
		if (!m->shards[i])
			goto oom;
		m->shards[i]->data_offset = fs->f[i]->data_offset;
		m->shards[i]->version = 0; /* not a GGUF: the metadata is translated */
		m->total_file_bytes += fs->f[i]->file_size;
	}
	if ((rc = ns_hf_tensors_build(m, &c, fs->f, fs->n, &n_mtp, err, errlen)))
		return rc;
	s_model_name(w->dir, name, sizeof(name));
	rc = ns_hf_config_write(&c, n_mtp, name, m->shards[0]);
	if (rc)
		goto oom;
	if (vocab && (rc = ns_hf_vocab_load(w->dir, c.n_vocab, m->shards[0], err, errlen)))
		return rc;
	return ns_model_build_index(m, err, errlen);
oom:
	ns_errf(err, errlen, "%s: out of memory", w->dir);
	return -ENOMEM;
}

int ns_hf_open(const char *path, bool vocab, struct ns_model **out, char *err, size_t errlen)
{
	struct s_files fs = { 0 };
	struct s_where w;
	struct ns_model *m = NULL;
	int rc;

	*out = NULL;
	if ((rc = s_where(path, &w, err, errlen)))
		return rc;
	if ((rc = s_open_files(&w, &fs, err, errlen)))
		goto out;
	m = calloc(1, sizeof(*m));
	if (!m || !(m->hf = calloc(1, sizeof(*m->hf)))) {
		ns_errf(err, errlen, "%s: out of memory", path);
		rc = -ENOMEM;
		goto out;
	}
	m->format = NS_MODEL_SAFETENSORS;
	if ((rc = s_build(m, &w, &fs, vocab, err, errlen)))
		goto out;
	*out = m;
	m = NULL;
out:
	s_files_close(&fs);
	ns_model_close(&m);
	return rc;
}
