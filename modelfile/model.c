/* model.c - one tensor index over the shards of a (possibly split) GGUF model; a Hugging Face
 * checkpoint is handed to hf_model.c. */
#include "model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_model.h"
#include "ns_util.h"

static uint64_t s_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

int64_t ns_model_find_index(const struct ns_model *m, const char *name)
{
	uint64_t mask = m->n_slots - 1;

	for (uint64_t i = s_hash(name) & mask;; i = (i + 1) & mask) {
		uint64_t slot = m->slots[i];
		if (!slot)
			return -1;
		if (!strcmp(m->tensors[slot - 1].name, name))
			return (int64_t)(slot - 1);
	}
}

const struct ns_model_tensor *ns_model_find(const struct ns_model *m, const char *name)
{
	int64_t i = ns_model_find_index(m, name);

	return i < 0 ? NULL : &m->tensors[i];
}

int ns_model_check_vocab(const struct ns_model *m, uint64_t n_tokens, char *err, size_t errlen)
{
	static const char *const names[] = { "token_embd.weight", "output.weight" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct ns_model_tensor *t = ns_model_find(m, names[i]);

		if (!t || t->n_dims < 2 || t->n_rows == n_tokens)
			continue;
		ns_errf(err, errlen, "%s: the vocabulary has %" PRIu64 " tokens but %s has %" PRIu64
			" rows (one per token)", m->shards[t->shard]->path, n_tokens, t->name,
			t->n_rows);
		return -EINVAL;
	}
	return 0;
}

void ns_model_close(struct ns_model **pm)
{
	struct ns_model *m = pm ? *pm : NULL;

	if (!m)
		return;
	for (uint32_t i = 0; m->shards && i < m->n_shards; i++)
		ns_gguf_close(&m->shards[i]);
	free(m->shards);
	free(m->tensors);
	free(m->slots);
	ns_hf_store_free(&m->hf);
	free(m);
	*pm = NULL;
}

int ns_model_append(struct ns_model *m, struct ns_model **extra, char *err, size_t errlen)
{
	struct ns_model *x = *extra, tmp;
	struct ns_gguf **shards;
	struct ns_model_tensor *tensors;
	uint64_t n, files, bytes;
	int rc;

	if (x->format != NS_MODEL_GGUF || x->hf)
		return ns_errf(err, errlen, "%s: not a GGUF file", ns_model_meta(x)->path), -EINVAL;
	if (ns_add_u64_overflow(m->n_tensors, x->n_tensors, &n) ||
	    (uint64_t)m->n_shards + x->n_shards > UINT32_MAX || n > SIZE_MAX / sizeof(*tensors) ||
	    ns_add_u64_overflow(m->total_file_bytes, x->total_file_bytes, &files) ||
	    ns_add_u64_overflow(m->total_tensor_bytes, x->total_tensor_bytes, &bytes))
		return ns_errf(err, errlen, "%s: too many tensors", ns_model_meta(x)->path),
		       -EOVERFLOW;
	shards = calloc((size_t)m->n_shards + x->n_shards, sizeof(*shards));
	tensors = calloc(n ? (size_t)n : 1, sizeof(*tensors));
	if (!shards || !tensors) {
		free(shards);
		free(tensors);
		return ns_errf(err, errlen, "out of memory"), -ENOMEM;
	}
	memcpy(shards, m->shards, m->n_shards * sizeof(*shards));
	memcpy(shards + m->n_shards, x->shards, x->n_shards * sizeof(*shards));
	memcpy(tensors, m->tensors, m->n_tensors * sizeof(*tensors));
	memcpy(tensors + m->n_tensors, x->tensors, x->n_tensors * sizeof(*tensors));
	for (uint64_t i = m->n_tensors; i < n; i++)
		tensors[i].shard += m->n_shards;
	/* the index over both, on a copy: m stays as it was if a name is in both files */
	tmp = *m;
	tmp.shards = shards;
	tmp.tensors = tensors;
	tmp.n_tensors = n;
	tmp.n_shards = m->n_shards + x->n_shards;
	if ((rc = ns_model_build_index(&tmp, err, errlen)) < 0) {
		free(tmp.slots);
		free(shards);
		free(tensors);
		return rc;
	}
	free(m->shards);
	free(m->tensors);
	free(m->slots);
	*m = tmp;
	m->total_file_bytes = files;
	m->total_tensor_bytes = bytes;
	/* the shards (and the names in their headers) are m's now */
	free(x->shards);
	free(x->tensors);
	free(x->slots);
	free(x);
	*extra = NULL;
	return 0;
}

/* Split metadata of one shard: count 0 means "not split". */
static int s_split_info(const struct ns_gguf *g, uint64_t *count, uint64_t *no, char *err,
			size_t errlen)
{
	*count = 0;
	*no = 0;
	if (!ns_gguf_find(g, "split.count"))
		return 0;
	if (!ns_gguf_get_u64(g, "split.count", count) || !ns_gguf_get_u64(g, "split.no", no) ||
	    *count == 0 || *count > 9999 || *no >= *count) {
		ns_errf(err, errlen, "%s: offset 0: invalid split metadata (split.count / split.no)",
			g->path);
		return -EINVAL;
	}
	return 0;
}

/* "dir/name-00002-of-00003.gguf" -> prefix length up to "-00002..." or -1 if not split-named. */
static int s_split_prefix(const char *path, size_t *prefix_len)
{
	size_t n = strlen(path);
	const char *tail;
	unsigned a, b;
	char rest[8];

	if (n < 20)
		return -1;
	tail = path + n - 20; /* "-00002-of-00003.gguf" */
	if (sscanf(tail, "-%5u-of-%5u%7s", &a, &b, rest) != 3 || strcmp(rest, ".gguf") ||
	    tail[0] != '-' || tail[6] != '-')
		return -1;
	*prefix_len = n - 20;
	return 0;
}

int ns_model_build_index(struct ns_model *m, char *err, size_t errlen)
{
	uint64_t want = 16;

	while (want < m->n_tensors * 2)
		want *= 2;
	m->n_slots = want;
	m->slots = calloc((size_t)want, sizeof(*m->slots));
	if (!m->slots) {
		ns_errf(err, errlen, "out of memory for the tensor index");
		return -ENOMEM;
	}
	for (uint64_t t = 0; t < m->n_tensors; t++) {
		uint64_t mask = want - 1;
		uint64_t i = s_hash(m->tensors[t].name) & mask;
		for (; m->slots[i]; i = (i + 1) & mask) {
			if (!strcmp(m->tensors[m->slots[i] - 1].name, m->tensors[t].name)) {
				const struct ns_gguf *g = m->shards[m->tensors[t].shard];
				ns_errf(err, errlen, "%s: offset %" PRIu64
					": tensor '%s' also appears in another shard", g->path,
					g->data_offset, m->tensors[t].name);
				return -EINVAL;
			}
		}
		m->slots[i] = t + 1;
	}
	return 0;
}

int ns_model_open(const char *path, struct ns_model **out, char *err, size_t errlen)
{
	return ns_model_open_flags(path, 0, out, err, errlen);
}

int ns_model_open_flags(const char *path, unsigned flags, struct ns_model **out, char *err,
			size_t errlen)
{
	struct ns_gguf *first = NULL;
	struct ns_model *m = NULL;
	uint64_t count, no, total = 0;
	size_t prefix_len = 0;
	int ret;

	*out = NULL;
	if (ns_hf_is_checkpoint(path))
		return ns_hf_open(path, !(flags & NS_MODEL_OPEN_NO_VOCAB), out, err, errlen);
	ret = ns_gguf_open(path, &first, err, errlen);
	if (ret)
		return ret;
	ret = s_split_info(first, &count, &no, err, errlen);
	if (ret)
		goto fail;
	m = calloc(1, sizeof(*m));
	if (!m)
		goto oom;
	m->n_shards = count > 1 ? (uint32_t)count : 1;
	m->shards = calloc(m->n_shards, sizeof(*m->shards));
	if (!m->shards)
		goto oom;
	if (m->n_shards == 1) {
		m->shards[0] = first;
		first = NULL;
	} else {
		if (s_split_prefix(path, &prefix_len)) {
			ns_errf(err, errlen, "%s: offset 0: split.count is %" PRIu64
				" but the name does not end in -NNNNN-of-NNNNN.gguf", path, count);
			ret = -EINVAL;
			goto fail;
		}
		for (uint32_t i = 0; i < m->n_shards; i++) {
			char shard_path[4096];
			uint64_t c, n;

			if (i == no) {
				m->shards[i] = first;
				first = NULL;
				continue;
			}
			if (snprintf(shard_path, sizeof(shard_path), "%.*s-%05u-of-%05u.gguf",
				     (int)prefix_len, path, i + 1, m->n_shards) >= (int)sizeof(shard_path)) {
				ns_errf(err, errlen, "%s: path too long", path);
				ret = -ENAMETOOLONG;
				goto fail;
			}
			ret = ns_gguf_open(shard_path, &m->shards[i], err, errlen);
			if (ret == -ENOENT) {
				ns_errf(err, errlen, "%s: offset 0: missing shard %u of %u (%s not found)",
					path, i + 1, m->n_shards, shard_path);
				goto fail;
			}
			if (ret)
				goto fail;
			ret = s_split_info(m->shards[i], &c, &n, err, errlen);
			if (ret)
				goto fail;
			if (c != m->n_shards || n != i) {
				ns_errf(err, errlen, "%s: offset 0: shard says it is %" PRIu64 " of %" PRIu64
					", expected %u of %u", shard_path, n + 1, c, i + 1, m->n_shards);
				ret = -EINVAL;
				goto fail;
			}
		}
	}
	for (uint32_t i = 0; i < m->n_shards; i++) {
		total += m->shards[i]->n_tensors;
		m->total_file_bytes += m->shards[i]->file_size;
	}
	if (m->n_shards > 1) {
		uint64_t declared;
		if (ns_gguf_get_u64(m->shards[0], "split.tensors.count", &declared) && declared != total) {
			ns_errf(err, errlen, "%s: offset 0: split.tensors.count is %" PRIu64
				" but the %u shards hold %" PRIu64 " tensors", m->shards[0]->path,
				declared, m->n_shards, total);
			ret = -EINVAL;
			goto fail;
		}
	}
	m->tensors = calloc(total ? (size_t)total : 1, sizeof(*m->tensors));
	if (!m->tensors)
		goto oom;
	for (uint32_t s = 0; s < m->n_shards; s++) {
		const struct ns_gguf *g = m->shards[s];
		for (uint64_t i = 0; i < g->n_tensors; i++) {
			const struct ns_gguf_tensor *gt = &g->tensors[i];
			struct ns_model_tensor *t = &m->tensors[m->n_tensors++];
			t->name = gt->name.s;
			t->type = gt->type;
			t->n_dims = gt->n_dims;
			memcpy(t->ne, gt->ne, sizeof(t->ne));
			t->shard = s;
			t->file_offset = gt->file_offset;
			t->n_elems = gt->n_elems;
			t->n_rows = gt->n_rows;
			t->row_bytes = gt->row_bytes;
			t->n_bytes = gt->n_bytes;
			m->total_tensor_bytes += gt->n_bytes;
		}
	}
	ret = ns_model_build_index(m, err, errlen);
	if (ret)
		goto fail;
	*out = m;
	return 0;
oom:
	ns_errf(err, errlen, "%s: out of memory", path);
	ret = -ENOMEM;
fail:
	ns_gguf_close(&first);
	ns_model_close(&m);
	return ret;
}
